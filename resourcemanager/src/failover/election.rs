//! The election loop of an HA RM: connects the elector (retrying while etcd is unreachable),
//! campaigns, serves as active until the leadership is lost or an admin makes it standby,
//! and campaigns again; until stop. Manual transitions ([`crate::ha::control`]) arrive on
//! its inbox and are answered from here, the only place that holds the leadership.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::Router;
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{error, info, warn};

use super::Front;
use crate::config::ha::HaConfig;
use crate::config::RmConfig;
use crate::daemon::{assemble, BlobParts, StoreKind};
use crate::driver::DriverHandle;
use crate::ha::control::{ConnectionState, Request, Transition, TransitionError};
use crate::ha::{EtcdElector, LeaderElector, Leadership, LostBecause};
use crate::store::EtcdStore;

type Reply = oneshot::Sender<Result<(), TransitionError>>;

/// Whether this RM campaigns now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Campaign,
    /// Waits for `-transitionToActive` (automatic failover off, or made standby by hand).
    Wait,
    /// Made standby by a forced transition under automatic failover: out of the election
    /// until then (so the other RM takes over), then campaigns again.
    WaitUntil(tokio::time::Instant),
}

/// How an active term ended.
enum End {
    Lost(LostBecause),
    /// `-transitionToStandby`: resign, then answer.
    Resign(Reply),
    Stop,
}

/// The loop's inputs and outputs.
pub(super) struct Election {
    pub conf: Arc<RmConfig>,
    pub addr: SocketAddr,
    pub front: Front,
    pub leader_tx: watch::Sender<Option<String>>,
    pub stop: watch::Receiver<bool>,
    pub requests: mpsc::Receiver<Request>,
    pub connection: watch::Sender<ConnectionState>,
    /// The blob store (one per process) and the RMs it copies to.
    pub blobs: BlobParts,
}

/// How often a standby that does not campaign (automatic failover off, or held off after
/// a forced transition) reads who is active.
const STANDBY_LOOK_EVERY: Duration = Duration::from_secs(1);

impl Election {
    pub(super) async fn run(mut self) {
        let Some(elector) = self.connect().await else {
            return;
        };
        self.connection.send_replace(ConnectionState::Connected);
        let ha = self.front.ha.clone();
        let mut mode = if ha.automatic_failover {
            Mode::Campaign
        } else {
            warn!("HA: yarn.resourcemanager.ha.automatic-failover.enabled is false: this RM stays STANDBY until an admin makes it active (rmadmin -transitionToActive {})", ha.rm_id);
            Mode::Wait
        };
        // `-transitionToActive` callers waiting for this RM to be active.
        let mut waiting: Vec<Reply> = Vec::new();
        loop {
            if mode != Mode::Campaign {
                if self.standby_wait(&elector, &mut mode, &mut waiting).await {
                    return;
                }
                continue;
            }
            let campaign = tokio::select! {
                r = elector.campaign(&self.leader_tx) => Ok(r),
                req = self.requests.recv() => Err(req),
                _ = self.stop.wait_for(|s| *s) => return,
            };
            let leadership = match campaign {
                Ok(Ok(l)) => l,
                Ok(Err(e)) => {
                    self.connection.send_replace(ConnectionState::Disconnected);
                    warn!("HA: election failed, retrying: {e}");
                    if sleep_or_stop(ha.etcd.lease.min(Duration::from_secs(1)), &mut self.stop)
                        .await
                    {
                        return;
                    }
                    continue;
                }
                Err(req) => {
                    if let Some(r) = req {
                        self.on_standby_request(&elector, r, &mut mode, &mut waiting)
                            .await;
                    }
                    continue;
                }
            };
            self.connection.send_replace(ConnectionState::Connected);
            match self.serve_term(&elector, leadership, &mut waiting).await {
                Some(next) => mode = next,
                None => return,
            }
        }
    }

    /// Recovers and serves one won term until it ends; the mode to go on in, or None to
    /// stop.
    async fn serve_term(
        &mut self,
        elector: &EtcdElector,
        mut leadership: Leadership,
        waiting: &mut Vec<Reply>,
    ) -> Option<Mode> {
        let ha = self.front.ha.clone();
        let won = Instant::now();
        let handle = match become_active(&self.conf, self.addr, &ha, &leadership, &self.blobs).await
        {
            Ok((handle, router)) => {
                self.front.set(Some(router));
                info!(rm_id = %ha.rm_id, term = leadership.term.revision, recovery_ms = won.elapsed().as_millis() as u64, "ResourceManager is ACTIVE");
                for w in waiting.drain(..) {
                    let _ = w.send(Ok(()));
                }
                handle
            }
            Err(e) => {
                error!("HA: recovery as the active failed, giving the leadership up: {e:#}");
                let _ = elector.resign(leadership).await;
                if sleep_or_stop(ha.etcd.lease, &mut self.stop).await {
                    return None;
                }
                return Some(Mode::Campaign);
            }
        };
        let end = loop {
            let req = tokio::select! {
                why = leadership.lost() => break End::Lost(why),
                req = self.requests.recv() => req,
                _ = self.stop.wait_for(|s| *s) => break End::Stop,
            };
            match req {
                None => break End::Stop,
                Some(Request {
                    transition: Transition::ToActive,
                    reply,
                }) => {
                    let _ = reply.send(Ok(()));
                }
                Some(Request {
                    transition: Transition::ToStandby,
                    reply,
                }) => break End::Resign(reply),
            }
        };
        self.front.set(None);
        // Not the leader any more; who is, the next campaign says.
        self.leader_tx.send_replace(None);
        drop(handle);
        let resigned = elector.resign(leadership).await;
        match end {
            End::Lost(why) => {
                warn!(rm_id = %ha.rm_id, ?why, "leadership lost: this ResourceManager is STANDBY again");
                Some(Mode::Campaign)
            }
            End::Stop => None,
            End::Resign(reply) => {
                info!(rm_id = %ha.rm_id, "transitioned to STANDBY by an admin: leadership released");
                if resigned.is_err() {
                    self.connection.send_replace(ConnectionState::Disconnected);
                }
                let _ = reply.send(resigned.map_err(TransitionError::Resign));
                Some(self.after_manual_standby())
            }
        }
    }

    /// The mode after `-transitionToStandby`: out of the election for one lease length under
    /// automatic failover (the other RM takes the released key meanwhile), else waiting for
    /// `-transitionToActive`.
    fn after_manual_standby(&self) -> Mode {
        if self.front.ha.automatic_failover {
            Mode::WaitUntil(tokio::time::Instant::now() + self.front.ha.etcd.lease)
        } else {
            Mode::Wait
        }
    }

    /// Connects the elector, retrying while etcd is unreachable (a transition asked
    /// meanwhile is refused as not connected); None when stopped first.
    async fn connect(&mut self) -> Option<EtcdElector> {
        let ha = self.front.ha.clone();
        let pause = ha.etcd.lease.min(Duration::from_secs(1));
        loop {
            match EtcdElector::connect(&ha.etcd, ha.keys.clone(), &ha.rm_id).await {
                Ok(e) => return Some(e),
                Err(e) => warn!("HA: cannot reach etcd yet: {e}"),
            }
            let req = tokio::select! {
                _ = tokio::time::sleep(pause) => None,
                req = self.requests.recv() => req,
                _ = self.stop.wait_for(|s| *s) => return None,
            };
            if let Some(r) = req {
                let _ = r.reply.send(Err(TransitionError::NotConnected));
            }
        }
    }

    /// A standby out of the election: waits for a transition, the end of a hold-off, or
    /// stop (true).
    async fn standby_wait(
        &mut self,
        elector: &EtcdElector,
        mode: &mut Mode,
        waiting: &mut Vec<Reply>,
    ) -> bool {
        let until = match *mode {
            Mode::WaitUntil(t) => Some(t),
            _ => None,
        };
        let hold_off = async move {
            match until {
                Some(t) => tokio::time::sleep_until(t).await,
                None => std::future::pending().await,
            }
        };
        // Not campaigning, it still follows who is active, so it redirects there.
        match elector.leader().await {
            Ok(leader) => {
                self.leader_tx.send_if_modified(|l| {
                    let changed = *l != leader;
                    *l = leader;
                    changed
                });
                self.connection.send_replace(ConnectionState::Connected);
            }
            Err(e) => {
                let was = self.connection.send_replace(ConnectionState::Disconnected);
                if was != ConnectionState::Disconnected {
                    warn!("HA: cannot read who is active: {e}");
                }
            }
        }
        let req = tokio::select! {
            _ = hold_off => {
                *mode = Mode::Campaign;
                return false;
            }
            req = self.requests.recv() => req,
            _ = tokio::time::sleep(STANDBY_LOOK_EVERY) => return false,
            _ = self.stop.wait_for(|s| *s) => return true,
        };
        if let Some(r) = req {
            self.on_standby_request(elector, r, mode, waiting).await;
        }
        false
    }

    /// A transition asked of a standby. To standby: done (with automatic failover off it
    /// stops campaigning). To active: refused while another RM is active; else this RM
    /// campaigns and the answer waits until it is active.
    async fn on_standby_request(
        &self,
        elector: &EtcdElector,
        r: Request,
        mode: &mut Mode,
        waiting: &mut Vec<Reply>,
    ) {
        match r.transition {
            Transition::ToStandby => {
                if !self.front.ha.automatic_failover {
                    *mode = Mode::Wait;
                }
                let _ = r.reply.send(Ok(()));
            }
            Transition::ToActive => match elector.leader().await {
                Err(e) => {
                    self.connection.send_replace(ConnectionState::Disconnected);
                    let _ = r.reply.send(Err(TransitionError::Election(e)));
                }
                Ok(Some(active)) if active != self.front.ha.rm_id => {
                    let _ = r.reply.send(Err(TransitionError::OtherActive { active }));
                }
                Ok(_) => {
                    *mode = Mode::Campaign;
                    waiting.push(r.reply);
                }
            },
        }
    }
}

/// Opens the etcd store fenced by `leadership` and recovers, off the async workers.
async fn become_active(
    conf: &Arc<RmConfig>,
    addr: SocketAddr,
    ha: &Arc<HaConfig>,
    leadership: &Leadership,
    blobs: &BlobParts,
) -> anyhow::Result<(DriverHandle, Router)> {
    let (conf, ha, blobs) = (conf.clone(), ha.clone(), blobs.clone());
    let (term, alarm) = (leadership.term.clone(), leadership.alarm());
    tokio::task::spawn_blocking(move || {
        let store = EtcdStore::open_fenced(&ha.etcd, ha.keys.clone(), term, alarm)?;
        assemble(conf, addr, store, StoreKind::Etcd, blobs)
    })
    .await
    .context("the recovery task failed")?
}

/// Sleeps `d`; true when `stop` was set meanwhile.
async fn sleep_or_stop(d: Duration, stop: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => false,
        _ = stop.wait_for(|s| *s) => true,
    }
}
