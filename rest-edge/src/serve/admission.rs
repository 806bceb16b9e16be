//! Admission: who gets a place among the serve loop's open connections, who waits for one,
//! and which idle connection is closed to make room.
//!
//! A connection gets a place while fewer than `spindle.http.max-connections` are open and
//! its peer holds fewer than `spindle.http.max-connections-per-peer`. Otherwise it is not
//! reset: it waits in one FIFO queue (at most `spindle.http.max-queued-connections-per-peer`
//! per peer, and never more than `spindle.http.max-connections` in all) for at most
//! `spindle.http.connection-queue-timeout-ms`, and the cap that holds it back asks the oldest
//! idle connection in its scope (the peer's own for the per-peer cap, any for the total) to
//! close. A place given back goes to the first waiter it fits.
//!
//! Idle means: no request in flight, no byte of a next request read, nothing waiting unread
//! on the socket (the connection checks that itself before it closes), and quiet for at
//! least [`EVICT_GRACE`] since it got its place or last had a byte either way (so a caller
//! that has just connected and not yet written, or has just been answered, keeps its
//! connection; time spent waiting for a place does not count). A connection with a request
//! in flight is never chosen.
//!
//! Must not: read or write a connection's bytes (the connection does, when asked to close).

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{oneshot, Notify};
use tokio::time::Instant;

use super::Track;

/// How long a connection must have been quiet before it may be closed to make room.
pub(super) const EVICT_GRACE: Duration = Duration::from_secs(1);

/// Whose connections an eviction may close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scope {
    /// Only this peer's (its per-peer cap is what holds a new connection back).
    Peer(IpAddr),
    /// Anyone's (the total cap, or the open-file limit).
    All,
}

/// Why a connection waiting for a place was closed without being served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum Refusal {
    #[error("{queued} connections from {peer} already wait for a place, the limit (spindle.http.max-queued-connections-per-peer) is {bound}")]
    PeerQueueFull {
        peer: IpAddr,
        queued: usize,
        bound: usize,
    },
    #[error("{queued} connections already wait for a place, the limit (spindle.http.max-connections) is {bound}")]
    QueueFull { queued: usize, bound: usize },
    #[error("it waited {} ms for a place (spindle.http.connection-queue-timeout-ms)", waited.as_millis())]
    Timeout { waited: Duration },
    #[error("the daemon is shutting down")]
    ShuttingDown,
}

/// The caps admission enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Caps {
    pub total: usize,
    pub per_peer: usize,
    pub queued_per_peer: usize,
}

#[derive(Default)]
struct PeerCount {
    open: usize,
    queued: usize,
}

struct Waiter {
    id: u64,
    peer: IpAddr,
    granted: oneshot::Sender<()>,
}

struct Held {
    peer: IpAddr,
    track: Arc<Track>,
}

#[derive(Default)]
struct State {
    open: usize,
    peers: HashMap<IpAddr, PeerCount>,
    queue: VecDeque<Waiter>,
    held: HashMap<u64, Held>,
    next_id: u64,
}

/// The places of one serve loop.
pub(super) struct Admission {
    caps: Caps,
    state: Mutex<State>,
    /// Woken when the last connection closes and none waits.
    drained: Notify,
}

/// What [`Admission::enter`] says.
pub(super) enum Entry {
    /// A place, at once.
    Admitted(Slot),
    /// In the queue; the scope whose idle connection should close to make room.
    Queued(Ticket, Scope),
}

impl Admission {
    pub(super) fn new(caps: Caps) -> Arc<Self> {
        Arc::new(Self {
            caps,
            state: Mutex::new(State::default()),
            drained: Notify::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Connections holding a descriptor: open ones and waiting ones.
    pub(super) fn held(&self) -> usize {
        let s = self.lock();
        s.open + s.queue.len()
    }

    /// Waits until no connection is open and none waits.
    pub(super) async fn drained(&self) {
        loop {
            let drained = self.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            if self.held() == 0 {
                return;
            }
            drained.await;
        }
    }

    /// The cap that holds a new connection from `peer` back, if one does.
    fn blocked_by(&self, s: &State, peer: IpAddr) -> Option<Scope> {
        let mine = s.peers.get(&peer).map_or(0, |p| p.open);
        if mine >= self.caps.per_peer {
            Some(Scope::Peer(peer))
        } else if s.open >= self.caps.total {
            Some(Scope::All)
        } else {
            None
        }
    }

    fn take(s: &mut State, peer: IpAddr, track: Arc<Track>) -> u64 {
        s.open += 1;
        s.peers.entry(peer).or_default().open += 1;
        s.next_id += 1;
        let id = s.next_id;
        s.held.insert(id, Held { peer, track });
        id
    }

    /// A place for a new connection from `peer`, a place in the queue, or a refusal.
    pub(super) fn enter(
        self: &Arc<Self>,
        peer: IpAddr,
        track: &Arc<Track>,
    ) -> Result<Entry, Refusal> {
        let mut s = self.lock();
        let Some(scope) = self.blocked_by(&s, peer) else {
            let id = Self::take(&mut s, peer, Arc::clone(track));
            return Ok(Entry::Admitted(Slot {
                admission: Arc::clone(self),
                id,
            }));
        };
        let queued = s.peers.get(&peer).map_or(0, |p| p.queued);
        if queued >= self.caps.queued_per_peer {
            return Err(Refusal::PeerQueueFull {
                peer,
                queued,
                bound: self.caps.queued_per_peer,
            });
        }
        if s.queue.len() >= self.caps.total {
            return Err(Refusal::QueueFull {
                queued: s.queue.len(),
                bound: self.caps.total,
            });
        }
        let (tx, rx) = oneshot::channel();
        s.next_id += 1;
        let id = s.next_id;
        s.queue.push_back(Waiter {
            id,
            peer,
            granted: tx,
        });
        s.peers.entry(peer).or_default().queued += 1;
        Ok(Entry::Queued(
            Ticket {
                admission: Arc::clone(self),
                id,
                peer,
                track: Arc::clone(track),
                granted: Some(rx),
            },
            scope,
        ))
    }

    /// The scope a waiting connection from `peer` would evict in now, if it is still held
    /// back.
    pub(super) fn scope_for(&self, peer: IpAddr) -> Option<Scope> {
        let s = self.lock();
        self.blocked_by(&s, peer)
    }

    /// Asks the connection in `scope` idle the longest (at least [`EVICT_GRACE`]) to close;
    /// returns its peer and how long it has been idle, or `None` when none qualifies.
    pub(super) fn evict_one(&self, scope: Scope) -> Option<(IpAddr, Duration)> {
        let now = Instant::now();
        let s = self.lock();
        let candidates = s
            .held
            .values()
            .filter(|h| scope == Scope::All || scope == Scope::Peer(h.peer))
            .filter_map(|h| Some((h.track.idle_since()?, h)));
        let (since, victim) = oldest_idle(candidates, now)?;
        victim.track.ask_to_close();
        Some((victim.peer, now.duration_since(since)))
    }

    /// Gives back `id`'s place and hands it (or another freed one) to the first waiter it
    /// fits.
    fn release(&self, id: u64) {
        let mut s = self.lock();
        if let Some(h) = s.held.remove(&id) {
            s.open -= 1;
            forget_peer(&mut s, h.peer, |p| p.open -= 1);
        }
        self.grant(&mut s);
        if s.open == 0 && s.queue.is_empty() {
            self.drained.notify_waiters();
        }
    }

    /// Hands places to waiters, first come first served among those a place fits.
    fn grant(&self, s: &mut State) {
        while s.open < self.caps.total {
            let Some(i) = s
                .queue
                .iter()
                .position(|w| s.peers.get(&w.peer).map_or(0, |p| p.open) < self.caps.per_peer)
            else {
                return;
            };
            let Some(w) = s.queue.remove(i) else { return };
            if let Some(p) = s.peers.get_mut(&w.peer) {
                p.queued -= 1;
            }
            // The ticket registers its own track when it takes the grant; count it now.
            s.open += 1;
            s.peers.entry(w.peer).or_default().open += 1;
            // The receiver lives as long as the waiter is queued (its ticket removes it
            // first when dropped), so this cannot fail.
            let _ = w.granted.send(());
        }
    }
}

/// Drops a peer's counts once it has nothing open or waiting.
fn forget_peer(s: &mut State, peer: IpAddr, change: impl FnOnce(&mut PeerCount)) {
    if let Some(p) = s.peers.get_mut(&peer) {
        change(p);
        if p.open == 0 && p.queued == 0 {
            s.peers.remove(&peer);
        }
    }
}

/// The candidate idle the longest, if it has been idle at least [`EVICT_GRACE`].
fn oldest_idle<T>(
    candidates: impl Iterator<Item = (Instant, T)>,
    now: Instant,
) -> Option<(Instant, T)> {
    candidates
        .filter(|(since, _)| now.saturating_duration_since(*since) >= EVICT_GRACE)
        .min_by_key(|(since, _)| *since)
}

/// One open connection's place; given back when dropped.
pub(super) struct Slot {
    admission: Arc<Admission>,
    id: u64,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.admission.release(self.id);
    }
}

/// A connection's place in the queue; leaves it when dropped (giving back a place granted
/// but not taken).
pub(super) struct Ticket {
    admission: Arc<Admission>,
    id: u64,
    peer: IpAddr,
    track: Arc<Track>,
    granted: Option<oneshot::Receiver<()>>,
}

impl Ticket {
    /// Waits for a place; the ticket stays valid (and queued) if this is cancelled.
    pub(super) async fn granted(&mut self) {
        if let Some(rx) = self.granted.as_mut() {
            let _ = rx.await;
        }
    }

    /// The place this ticket was granted (call after [`Ticket::granted`] returned).
    pub(super) fn into_slot(mut self) -> Slot {
        self.granted = None;
        let admission = Arc::clone(&self.admission);
        let mut s = admission.lock();
        // Its clocks start with its place, before an eviction can see it.
        self.track.admitted();
        s.next_id += 1;
        let id = s.next_id;
        s.held.insert(
            id,
            Held {
                peer: self.peer,
                track: Arc::clone(&self.track),
            },
        );
        drop(s);
        // Counted already by `grant`; the ticket's drop must not give it back.
        self.id = 0;
        Slot { admission, id }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if self.id == 0 {
            return;
        }
        let mut s = self.admission.lock();
        if let Some(i) = s.queue.iter().position(|w| w.id == self.id) {
            s.queue.remove(i);
            forget_peer(&mut s, self.peer, |p| p.queued -= 1);
            if s.open == 0 && s.queue.is_empty() {
                self.admission.drained.notify_waiters();
            }
            return;
        }
        // Granted, never taken: give the place back.
        s.open -= 1;
        forget_peer(&mut s, self.peer, |p| p.open -= 1);
        self.admission.grant(&mut s);
        if s.open == 0 && s.queue.is_empty() {
            self.admission.drained.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn ip(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
    }

    fn caps(total: usize, per_peer: usize, queued_per_peer: usize) -> Caps {
        Caps {
            total,
            per_peer,
            queued_per_peer,
        }
    }

    fn admitted(e: Result<Entry, Refusal>) -> Slot {
        match e {
            Ok(Entry::Admitted(s)) => s,
            Ok(Entry::Queued(..)) => panic!("queued, expected a place"),
            Err(r) => panic!("refused: {r}"),
        }
    }

    fn queued(e: Result<Entry, Refusal>) -> (Ticket, Scope) {
        match e {
            Ok(Entry::Queued(t, s)) => (t, s),
            Ok(Entry::Admitted(_)) => panic!("admitted, expected to wait"),
            Err(r) => panic!("refused: {r}"),
        }
    }

    #[tokio::test]
    async fn over_the_per_peer_cap_a_connection_waits_and_gets_the_freed_place() {
        let a = Admission::new(caps(10, 2, 5));
        let t = Arc::new(Track::new());
        let first = admitted(a.enter(ip(1), &t));
        let _second = admitted(a.enter(ip(1), &t));
        let (mut ticket, scope) = queued(a.enter(ip(1), &t));
        assert_eq!(scope, Scope::Peer(ip(1)));
        // Another peer is not held back by this one's cap.
        let _other = admitted(a.enter(ip(2), &t));
        assert_eq!(a.held(), 4);
        drop(first);
        tokio::time::timeout(Duration::from_secs(5), ticket.granted())
            .await
            .expect("the freed place goes to the waiter");
        let slot = ticket.into_slot();
        assert_eq!(a.held(), 3);
        drop(slot);
        assert_eq!(a.held(), 2);
    }

    #[tokio::test]
    async fn a_waiter_given_its_place_is_not_idle_for_the_time_it_waited() {
        let a = Admission::new(caps(10, 1, 5));
        let first_t = Arc::new(Track::new());
        let waiter_t = Arc::new(Track::new());
        let first = admitted(a.enter(ip(1), &first_t));
        let (mut ticket, _) = queued(a.enter(ip(1), &waiter_t));
        // It waited for its place, unread, for longer than the grace.
        waiter_t.backdate(EVICT_GRACE * 3);
        drop(first);
        tokio::time::timeout(Duration::from_secs(5), ticket.granted())
            .await
            .expect("the freed place goes to the waiter");
        let _slot = ticket.into_slot();
        // A caller slow to write once it has its place may be; one that waited may not.
        assert_eq!(a.evict_one(Scope::Peer(ip(1))), None);
        assert!(!waiter_t.asked_to_close());
    }

    #[test]
    fn beyond_the_queue_bound_a_connection_is_refused_naming_the_key() {
        let a = Admission::new(caps(10, 1, 2));
        let t = Arc::new(Track::new());
        let _open = admitted(a.enter(ip(1), &t));
        let _w1 = queued(a.enter(ip(1), &t));
        let _w2 = queued(a.enter(ip(1), &t));
        let r = a.enter(ip(1), &t).err().expect("refused");
        assert_eq!(
            r,
            Refusal::PeerQueueFull {
                peer: ip(1),
                queued: 2,
                bound: 2
            }
        );
        assert!(r
            .to_string()
            .contains("spindle.http.max-queued-connections-per-peer"));
        // The total queue is bounded by the total cap.
        let a = Admission::new(caps(1, 1, 10));
        let _open = admitted(a.enter(ip(1), &t));
        let (_w, scope) = queued(a.enter(ip(2), &t));
        assert_eq!(scope, Scope::All);
        assert!(matches!(
            a.enter(ip(3), &t),
            Err(Refusal::QueueFull {
                queued: 1,
                bound: 1
            })
        ));
    }

    #[test]
    fn a_waiter_that_leaves_gives_its_place_in_line_back() {
        let a = Admission::new(caps(10, 1, 2));
        let t = Arc::new(Track::new());
        let open = admitted(a.enter(ip(1), &t));
        let (w1, _) = queued(a.enter(ip(1), &t));
        drop(w1);
        assert_eq!(a.held(), 1);
        // Granted but never taken: the place comes back too.
        let (w2, _) = queued(a.enter(ip(1), &t));
        drop(open);
        assert_eq!(a.held(), 1, "the place went to the waiter");
        drop(w2);
        assert_eq!(a.held(), 0);
        assert!(a.lock().peers.is_empty());
    }

    #[test]
    fn places_go_first_come_first_served_among_waiters_they_fit() {
        let a = Admission::new(caps(2, 1, 5));
        let t = Arc::new(Track::new());
        let p1 = admitted(a.enter(ip(1), &t));
        let _p2 = admitted(a.enter(ip(2), &t));
        let (mut w1, _) = queued(a.enter(ip(1), &t));
        let (mut w3, _) = queued(a.enter(ip(3), &t));
        // 127.0.0.1's place frees: 127.0.0.1's waiter is first and fits.
        drop(p1);
        assert!(w1.granted.as_mut().unwrap().try_recv().is_ok());
        assert!(w3.granted.as_mut().unwrap().try_recv().is_err());
    }

    #[test]
    fn the_oldest_idle_connection_past_the_grace_is_chosen() {
        let now = Instant::now() + Duration::from_secs(10);
        let old = now - Duration::from_secs(5);
        let older = now - Duration::from_secs(8);
        let fresh = now - Duration::from_millis(10);
        let pick = oldest_idle([(old, "a"), (older, "b"), (fresh, "c")].into_iter(), now);
        assert_eq!(pick.map(|p| p.1), Some("b"));
        assert_eq!(oldest_idle([(fresh, "c")].into_iter(), now), None);
    }

    #[tokio::test]
    async fn eviction_skips_busy_and_fresh_connections_and_other_peers() {
        let a = Admission::new(caps(10, 10, 5));
        let busy = Arc::new(Track::new());
        let idle = Arc::new(Track::new());
        let other = Arc::new(Track::new());
        let _s1 = admitted(a.enter(ip(1), &busy));
        let _s2 = admitted(a.enter(ip(1), &idle));
        let _s3 = admitted(a.enter(ip(2), &other));
        let _in_flight = busy.request_started();
        // Nobody has been quiet for the grace yet.
        assert_eq!(a.evict_one(Scope::All), None);
        idle.backdate(EVICT_GRACE * 3);
        other.backdate(EVICT_GRACE * 5);
        busy.backdate(EVICT_GRACE * 9);
        let (peer, _) = a.evict_one(Scope::Peer(ip(1))).expect("one idle");
        assert_eq!(peer, ip(1));
        assert!(idle.asked_to_close());
        assert!(!busy.asked_to_close());
        let (peer, _) = a.evict_one(Scope::All).expect("the other peer's");
        assert_eq!(peer, ip(2));
        assert!(other.asked_to_close());
        // Asked ones are not asked again; the busy one never.
        assert_eq!(a.evict_one(Scope::All), None);
    }
}
