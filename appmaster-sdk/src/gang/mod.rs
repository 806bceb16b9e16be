//! Gangs: asks that the RM grants whole, in one allocate response, or not at all
//! (Spindle's extension of YARN's ask; see `GangSpec` in `common::records::am`).
//!
//! Why a client-side layer at all: the protocol is stateless per heartbeat (the RM repeats
//! every gang's status in every answer, grants arrive as plain containers), while an AM wants
//! one call that resolves when its whole gang is there. [`AmRmClient::request_gang`] puts
//! every member's ask into the ask table (so they leave in the same allocate call), drives
//! the heartbeat at [`crate::amrm::GANG_INTERVAL`] while the gang waits, attributes granted
//! containers to the gang by (priority, allocationRequestId), and resolves on the first of:
//! all members granted, a `TIMED_OUT` or `FAILED` status, the RM refusing the ask, or (as a
//! backstop for an RM that never answers with a timeout) the gang's own timeout plus a grace.
//! Everything else heard meanwhile (completions of other containers, plain grants, node
//! updates) is kept and handed out by the next [`AmRmClient::poll`], so nothing is lost.
//!
//! [`AmRmClient::release_gang`] is the restart half: stop every live member on its NM, wait
//! (bounded) until the NMs report them gone, so that their GPUs are free before the RM hands
//! them out again, then release them to the RM and send that at once. The same id may then be
//! asked for again.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use spindle_common::ids::ContainerId;
use spindle_common::records::am::{
    Container, ContainerStatus, GangState, GangStatus, GangTimeoutPolicy, ResourceRequest,
};
use spindle_common::records::exception::RemoteException;

use crate::am_client::AmError;
use crate::amrm::{AllocationEvents, AmRmClient, AskError, ContainerRequest, MAX_INTERVAL};
use crate::error::ClientError;
use crate::nm_client::NmClient;

mod request;

pub use request::{Elasticity, GangMember, GangRequest};

/// How long [`AmRmClient::release_gang`] waits for the NMs to report stopped members gone.
pub const RELEASE_WAIT: Duration = Duration::from_secs(30);
/// How often it asks them meanwhile.
const RELEASE_POLL: Duration = Duration::from_millis(25);
/// Consecutive failed heartbeats (about [`MAX_INTERVAL`] apart) after which
/// [`AmRmClient::wait_gang`] gives up and returns the error; the gang stays asked.
pub const MAX_HEARTBEAT_FAILURES: u32 = 30;
/// NM container states after which the container holds nothing on its node.
const NM_TERMINAL: &[&str] = &[
    "EXITED_WITH_SUCCESS",
    "EXITED_WITH_FAILURE",
    "CONTAINER_CLEANEDUP_AFTER_KILL",
    "LOCALIZATION_FAILED",
    "DONE",
    "COMPLETE",
];

/// Why a gang was not (or is no longer) granted.
#[derive(Debug, thiserror::Error)]
pub enum GangError {
    /// The soft timeout passed and the asks were withdrawn (by the RM, or by this client if
    /// the RM let the timeout pass without a word). The AM may relax the gang and ask again.
    #[error("gang '{id}' timed out: {diagnostics}")]
    TimedOut { id: String, diagnostics: String },
    /// A member ended badly or its node was lost; release the gang to restart it.
    #[error("gang '{id}' failed: {diagnostics}")]
    Failed {
        id: String,
        diagnostics: String,
        failed_containers: Vec<ContainerId>,
    },
    /// The RM refused the allocate call that carried the gang's asks.
    #[error("the ResourceManager refused gang '{id}': {}: {}", exception.exception, exception.message)]
    Rejected {
        id: String,
        exception: RemoteException,
    },
    /// The request itself is wrong; nothing was asked.
    #[error("invalid gang request: {0}")]
    Invalid(String),
    #[error("invalid gang request: {0}")]
    Ask(#[from] AskError),
    #[error("no gang '{0}' is known to this client")]
    Unknown(String),
    /// The AM protocol failed (RM unreachable for long, AM_SHUTDOWN, ...).
    #[error(transparent)]
    Am(#[from] AmError),
}

/// Where a gang stands, as this client knows it.
#[derive(Debug, Clone, PartialEq)]
pub enum GangPhase {
    Pending,
    Allocated,
    TimedOut {
        diagnostics: String,
    },
    Failed {
        diagnostics: String,
        failed_containers: Vec<ContainerId>,
    },
    Rejected(RemoteException),
}

/// A read-only view of a gang (see [`AmRmClient::gang`]).
#[derive(Debug, Clone, PartialEq)]
pub struct GangView {
    pub id: String,
    pub phase: GangPhase,
    pub size: u32,
    /// Granted members, in grant order.
    pub containers: Vec<Container>,
    /// Granted members the RM has not reported completed.
    pub live: Vec<ContainerId>,
    /// Members reported completed, in order.
    pub completed: Vec<ContainerStatus>,
    /// The RM's last word on it.
    pub status: Option<GangStatus>,
}

/// What [`AmRmClient::release_gang`] did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GangRelease {
    /// Members stopped and released.
    pub released: Vec<ContainerId>,
    /// Stop calls that failed or members that did not go in time (released anyway).
    pub problems: Vec<String>,
    /// Outstanding asks withdrawn (a gang released while still pending).
    pub withdrawn: usize,
}

/// A gang's bookkeeping inside [`AmRmClient`].
#[derive(Debug, Clone)]
pub(crate) struct GangTrack {
    request: GangRequest,
    phase: GangPhase,
    /// Containers still wanted per (priority, allocationRequestId).
    remaining: BTreeMap<(i32, i64), u32>,
    containers: Vec<Container>,
    live: BTreeSet<ContainerId>,
    completed: Vec<ContainerStatus>,
    /// The RM has heard the asks (a status before that is about an older gang of that id).
    sent: bool,
    /// The RM said ALLOCATED while grants were still missing (warned once).
    warned_short: bool,
    last_status: Option<GangStatus>,
    asked_at: Instant,
}

impl GangTrack {
    pub(crate) fn is_pending(&self) -> bool {
        self.phase == GangPhase::Pending
    }

    fn view(&self) -> GangView {
        GangView {
            id: self.request.id.clone(),
            phase: self.phase.clone(),
            size: self.request.size(),
            containers: self.containers.clone(),
            live: self.live.iter().copied().collect(),
            completed: self.completed.clone(),
            status: self.last_status.clone(),
        }
    }
}

fn gang_pred(id: &str) -> impl Fn(&ContainerRequest) -> bool + '_ {
    move |r| r.gang.as_ref().is_some_and(|g| g.id == id)
}

/// The backstop after a gang's own timeout: the RM should have answered TIMED_OUT by then.
fn backstop_grace(timeout: Duration) -> Duration {
    (timeout / 10).clamp(Duration::from_secs(2), Duration::from_secs(30))
}

impl AmRmClient {
    /// Puts every member's ask into the table (they leave together with the next heartbeat)
    /// and starts tracking the gang; does not wait. Refused as a whole, with nothing asked,
    /// if the request is malformed, the id is still held, or a member's key is in use.
    pub fn submit_gang(&mut self, req: GangRequest) -> Result<(), GangError> {
        req.validate()?;
        if let Some(t) = self.gangs.get(&req.id) {
            if t.is_pending() || !t.live.is_empty() {
                return Err(GangError::Invalid(format!(
                    "gang '{}' is still {}; release it before asking again",
                    req.id,
                    if t.is_pending() { "pending" } else { "held" }
                )));
            }
        }
        // All or nothing on the table too: a refused member leaves no others behind.
        let mut table = self.table().clone();
        for r in req.requests() {
            table.add(r)?;
        }
        *self.table_mut() = table;
        let remaining = req
            .members
            .iter()
            .map(|m| ((m.priority, m.allocation_request_id), m.count))
            .collect();
        // Statuses heard so far are about an earlier gang of this id.
        self.gang_seen.remove(&req.id);
        self.backlog.gangs.retain(|s| s.id != req.id);
        tracing::info!(gang = %req.id, size = req.size(), placement = ?req.placement, "asking for a gang");
        self.gangs.insert(
            req.id.clone(),
            GangTrack {
                request: req,
                phase: GangPhase::Pending,
                remaining,
                containers: Vec::new(),
                live: BTreeSet::new(),
                completed: Vec::new(),
                sent: false,
                warned_short: false,
                last_status: None,
                asked_at: Instant::now(),
            },
        );
        Ok(())
    }

    /// Asks for the gang and resolves when the whole of it is granted: the containers in
    /// grant order, or why not.
    pub async fn request_gang(&mut self, req: GangRequest) -> Result<Vec<Container>, GangError> {
        self.request_gang_with(req, &mut |_| {}).await
    }

    /// [`AmRmClient::request_gang`], telling `on_status` each change of the RM's status of
    /// the gang while it waits (PENDING / RESERVED with the RM's diagnostics, ...).
    pub async fn request_gang_with(
        &mut self,
        req: GangRequest,
        on_status: &mut (dyn FnMut(&GangStatus) + Send),
    ) -> Result<Vec<Container>, GangError> {
        let id = req.id.clone();
        self.submit_gang(req)?;
        self.wait_gang(&id, on_status).await
    }

    /// Drives the heartbeat until the submitted gang `id` resolves (see the module doc).
    /// Events not about this gang are kept for the next [`AmRmClient::poll`]; the gang's
    /// own containers are returned here and not kept.
    pub async fn wait_gang(
        &mut self,
        id: &str,
        on_status: &mut (dyn FnMut(&GangStatus) + Send),
    ) -> Result<Vec<Container>, GangError> {
        let track = self
            .gangs
            .get(id)
            .ok_or_else(|| GangError::Unknown(id.to_string()))?;
        let deadline = track
            .request
            .timeout
            .map(|t| track.asked_at + t + backstop_grace(t));
        let mut failures = 0u32;
        // The asks go out at once; then a heartbeat every GANG_INTERVAL.
        let mut first = true;
        loop {
            if let Some(outcome) = self.gang_outcome(id) {
                return outcome;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(self.abandon_gang(id));
            }
            if !std::mem::take(&mut first) {
                tokio::time::sleep(self.next_interval()).await;
            }
            match self.heartbeat().await {
                Ok(mut ev) => {
                    failures = 0;
                    let (mine, others): (Vec<_>, Vec<_>) =
                        ev.gangs.into_iter().partition(|s| s.id == id);
                    for s in &mine {
                        on_status(s);
                    }
                    ev.gangs = others;
                    let taken: BTreeSet<ContainerId> = self
                        .gangs
                        .values()
                        .flat_map(|t| t.containers.iter().map(|c| c.id))
                        .collect();
                    ev.allocated.retain(|c| !taken.contains(&c.id));
                    self.backlog.extend(ev);
                }
                Err(AmError::Client(e)) => {
                    if let Some(rejected) = self.rejection(id, &e) {
                        return Err(rejected);
                    }
                    if is_permanent(&e) {
                        // E.g. 409 after a HARD timeout failed the application: retrying
                        // cannot help.
                        return Err(GangError::Am(AmError::Client(e)));
                    }
                    failures += 1;
                    if failures >= MAX_HEARTBEAT_FAILURES {
                        return Err(GangError::Am(AmError::Client(e)));
                    }
                    tracing::warn!(gang = id, error = %e, "heartbeat failed while a gang waits; retrying");
                    tokio::time::sleep(MAX_INTERVAL).await;
                }
                Err(e) => return Err(GangError::Am(e)),
            }
        }
    }

    /// A refused allocate call (4xx with a RemoteException) that carried the gang's first
    /// asks refuses the gang: its asks leave the table unsent, so the call is not repeated.
    fn rejection(&mut self, id: &str, e: &ClientError) -> Option<GangError> {
        let status = e.status()?;
        let exception = e.remote_exception()?;
        let first_send = self.gangs.get(id).is_some_and(|t| !t.sent);
        if !(400..500).contains(&status)
            || !first_send
            || e.is_exception("ApplicationMasterNotRegisteredException")
        {
            return None;
        }
        self.table_mut().withdraw(gang_pred(id), true);
        self.gangs.remove(id);
        Some(GangError::Rejected {
            id: id.to_string(),
            exception,
        })
    }

    /// The gang's outcome if it has one; a timed-out or refused gang is forgotten (it holds
    /// nothing), a failed one is kept for [`AmRmClient::release_gang`].
    fn gang_outcome(&mut self, id: &str) -> Option<Result<Vec<Container>, GangError>> {
        let Some(t) = self.gangs.get(id) else {
            return Some(Err(GangError::Unknown(id.to_string())));
        };
        match t.phase.clone() {
            GangPhase::Pending => None,
            GangPhase::Allocated => Some(Ok(t.containers.clone())),
            GangPhase::Failed {
                diagnostics,
                failed_containers,
            } => Some(Err(GangError::Failed {
                id: id.to_string(),
                diagnostics,
                failed_containers,
            })),
            GangPhase::TimedOut { mut diagnostics } => {
                if t.request.policy == GangTimeoutPolicy::HARD {
                    diagnostics
                        .push_str(" (HARD timeout: the ResourceManager fails the application)");
                }
                self.gangs.remove(id);
                Some(Err(GangError::TimedOut {
                    id: id.to_string(),
                    diagnostics,
                }))
            }
            GangPhase::Rejected(exception) => {
                self.gangs.remove(id);
                Some(Err(GangError::Rejected {
                    id: id.to_string(),
                    exception,
                }))
            }
        }
    }

    /// The client-side backstop: withdraws the asks, gives back any member already granted
    /// (an RM that grants gang asks one by one), and forgets the gang.
    fn abandon_gang(&mut self, id: &str) -> GangError {
        let Some(t) = self.gangs.remove(id) else {
            return GangError::Unknown(id.to_string());
        };
        self.table_mut().withdraw(gang_pred(id), false);
        for c in &t.live {
            self.release(*c);
        }
        let waited = t.asked_at.elapsed().as_millis();
        let last = t
            .last_status
            .as_ref()
            .map(|s| s.diagnostics.trim())
            .filter(|d| !d.is_empty())
            .map_or_else(String::new, |d| format!("; the RM's last word: {d}"));
        GangError::TimedOut {
            id: id.to_string(),
            diagnostics: format!(
                "not granted after {waited} ms and the ResourceManager did not report a \
                 timeout{last}; {} of {} granted were given back and the asks withdrawn",
                t.containers.len(),
                t.request.size()
            ),
        }
    }

    /// Withdraws a gang that is still pending (its asks are sent as zero; members granted
    /// so far are released) and forgets it. False if no pending gang has that id.
    pub fn cancel_gang(&mut self, id: &str) -> bool {
        if !self.gangs.get(id).is_some_and(GangTrack::is_pending) {
            return false;
        }
        let _ = self.abandon_gang(id);
        true
    }

    /// Asks for an elastic gang ([`GangRequest::elastic`]: one shape, `min`..`max` members,
    /// a size rule, optionally a throughput table) and resolves when the RM has granted it
    /// whole at some size from `min` up (the containers, in grant order). Later growth comes
    /// as [`crate::amrm::AllocationEvent::ResizeOffered`], shrinking as
    /// [`crate::amrm::AllocationEvent::ResizeDemanded`].
    pub async fn request_elastic_gang(
        &mut self,
        req: GangRequest,
    ) -> Result<Vec<Container>, GangError> {
        self.request_elastic_gang_with(req, &mut |_| {}).await
    }

    /// [`AmRmClient::request_elastic_gang`], telling `on_status` each change of the RM's
    /// status of the gang while it waits.
    pub async fn request_elastic_gang_with(
        &mut self,
        req: GangRequest,
        on_status: &mut (dyn FnMut(&GangStatus) + Send),
    ) -> Result<Vec<Container>, GangError> {
        if req.elastic.is_none() {
            return Err(GangError::Invalid(format!(
                "gang '{}' is not elastic: build it with GangRequest::elastic",
                req.id
            )));
        }
        self.request_gang_with(req, on_status).await
    }

    /// The RM grew a gang: its offered containers are members from now on.
    pub(crate) fn gang_grown(&mut self, id: &str, containers: &[Container]) {
        if let Some(t) = self.gangs.get_mut(id) {
            for c in containers {
                if t.live.insert(c.id) {
                    t.containers.push(c.clone());
                }
            }
        }
    }

    /// Declines (part of) a resize offer: the containers leave the gang and go back to the
    /// RM with the next heartbeat.
    pub fn decline_offer(&mut self, gang_id: &str, containers: &[ContainerId]) {
        tracing::info!(
            gang = gang_id,
            containers = containers.len(),
            "declining a resize offer"
        );
        self.release_members(gang_id, containers);
    }

    /// Gives members of a gang back to the RM (with the next heartbeat) without stopping
    /// them: for a shrink, once their processes have exited (or an offer declined). The gang
    /// goes on with the rest.
    pub fn release_members(&mut self, gang_id: &str, containers: &[ContainerId]) {
        if let Some(t) = self.gangs.get_mut(gang_id) {
            t.containers.retain(|c| !containers.contains(&c.id));
            for c in containers {
                t.live.remove(c);
            }
        }
        for c in containers {
            self.release(*c);
        }
    }

    /// The gang as this client knows it.
    pub fn gang(&self, id: &str) -> Option<GangView> {
        self.gangs.get(id).map(GangTrack::view)
    }

    /// Ids of the gangs this client tracks.
    pub fn gang_ids(&self) -> Vec<String> {
        self.gangs.keys().cloned().collect()
    }

    /// The gang a granted container belongs to, if any.
    pub fn gang_of(&self, container: &ContainerId) -> Option<&str> {
        self.gangs
            .values()
            .find(|t| t.containers.iter().any(|c| &c.id == container))
            .map(|t| t.request.id.as_str())
    }

    /// Stops every live member on its NM (all at once), waits up to [`RELEASE_WAIT`] until
    /// the NMs report them gone (their devices free), releases them to the RM and sends the
    /// release at once; withdraws the asks of a gang still pending. The id may then be asked
    /// for again. Unreachable NMs (a lost node) do not stop it: those members are released
    /// anyway and named in [`GangRelease::problems`].
    pub async fn release_gang(
        &mut self,
        id: &str,
        nm: &NmClient,
    ) -> Result<GangRelease, GangError> {
        let t = self
            .gangs
            .remove(id)
            .ok_or_else(|| GangError::Unknown(id.to_string()))?;
        let mut out = GangRelease::default();
        if t.is_pending() {
            out.withdrawn = self.table_mut().withdraw(gang_pred(id), false);
        }
        let live: Vec<Container> = t
            .containers
            .iter()
            .filter(|c| t.live.contains(&c.id))
            .cloned()
            .collect();
        let stops = futures::future::join_all(live.iter().map(|c| async move {
            nm.remember(c);
            let stopped = nm.stop_container(&c.node_http_address, &c.id).await;
            let gone = wait_gone(nm, c).await;
            (c.id, stopped, gone)
        }))
        .await;
        for (cid, stopped, gone) in stops {
            if let Err(e) = stopped {
                out.problems.push(format!("stop of {cid}: {e}"));
            }
            if !gone {
                out.problems.push(format!(
                    "{cid} was still running after {} ms",
                    RELEASE_WAIT.as_millis()
                ));
            }
            self.release(cid);
            out.released.push(cid);
        }
        for p in &out.problems {
            tracing::warn!(gang = id, problem = %p, "releasing a gang");
        }
        if !out.released.is_empty() || out.withdrawn > 0 {
            // Send now, so that a new ask for the same id comes after the release.
            match self.heartbeat().await {
                Ok(ev) => self.backlog.extend(ev),
                Err(e) => tracing::warn!(gang = id, error = %e,
                    "could not send the release at once; it goes with the next heartbeat"),
            }
        }
        Ok(out)
    }

    /// Takes over a gang a previous attempt of this AM was granted (its live members, as the
    /// register answer's `containersFromPreviousAttempts` lists them with
    /// keep-containers-across-application-attempts): tracked as granted, so that completions
    /// and [`AmRmClient::release_gang`] work on it as on one this attempt asked for.
    pub fn adopt_gang(&mut self, req: GangRequest, containers: Vec<Container>) {
        let remaining = req
            .members
            .iter()
            .map(|m| ((m.priority, m.allocation_request_id), 0))
            .collect();
        tracing::info!(gang = %req.id, members = containers.len(), "adopting a gang from a previous attempt");
        self.gangs.insert(
            req.id.clone(),
            GangTrack {
                request: req,
                phase: GangPhase::Allocated,
                remaining,
                live: containers.iter().map(|c| c.id).collect(),
                containers,
                completed: Vec::new(),
                sent: true,
                warned_short: false,
                last_status: None,
                asked_at: Instant::now(),
            },
        );
    }

    /// Applies one heartbeat's answer to the tracked gangs: marks gangs whose asks went out
    /// in `sent`, attributes grants, notes completions, applies statuses (only changes are
    /// passed on in `events.gangs`).
    pub(crate) fn observe_gangs(
        &mut self,
        sent: &[ResourceRequest],
        statuses: Vec<GangStatus>,
        events: &mut AllocationEvents,
    ) {
        for r in sent {
            if let Some(g) = &r.gang {
                if let Some(t) = self.gangs.get_mut(&g.id) {
                    t.sent = true;
                }
            }
        }
        for c in &events.allocated {
            let key = (c.priority, c.allocation_request_id);
            if let Some(t) = self
                .gangs
                .values_mut()
                .find(|t| t.is_pending() && t.remaining.get(&key).is_some_and(|n| *n > 0))
            {
                if let Some(n) = t.remaining.get_mut(&key) {
                    *n -= 1;
                }
                t.containers.push(c.clone());
                t.live.insert(c.id);
            }
        }
        for s in &events.completed {
            if let Some(t) = self
                .gangs
                .values_mut()
                .find(|t| t.live.contains(&s.container_id))
            {
                t.live.remove(&s.container_id);
                t.completed.push(s.clone());
            }
        }
        let mut timed_out = Vec::new();
        for s in statuses {
            if self.gang_seen.get(&s.id) != Some(&s) {
                self.gang_seen.insert(s.id.clone(), s.clone());
                events.gangs.push(s.clone());
            }
            let Some(t) = self.gangs.get_mut(&s.id) else {
                continue;
            };
            if !t.sent {
                // About an earlier gang of this id: the RM has not heard this one yet.
                continue;
            }
            match s.state {
                GangState::PENDING | GangState::RESERVED | GangState::ALLOCATED => {}
                GangState::TIMED_OUT if t.is_pending() => {
                    t.phase = GangPhase::TimedOut {
                        diagnostics: s.diagnostics.clone(),
                    };
                    timed_out.push(s.id.clone());
                }
                GangState::TIMED_OUT => {}
                // Its members come back as completions with -102 (PREEMPTED).
                GangState::PREEMPTED => {}
                GangState::FAILED => {
                    // A pending gang has no members to fail: that status is a stale one
                    // about an earlier gang of the same id.
                    let ours = s.failed_containers.is_empty()
                        || s.failed_containers
                            .iter()
                            .any(|c| t.containers.iter().any(|m| m.id == *c));
                    if !t.is_pending() && ours {
                        t.phase = GangPhase::Failed {
                            diagnostics: s.diagnostics.clone(),
                            failed_containers: s.failed_containers.clone(),
                        };
                    }
                }
            }
            if s.state == GangState::ALLOCATED
                && t.request.elastic.is_none()
                && t.remaining.values().any(|n| *n > 0)
                && !t.warned_short
            {
                t.warned_short = true;
                tracing::warn!(gang = %s.id, "the RM reports the gang ALLOCATED but not every member was granted yet");
            }
            t.last_status = Some(s);
        }
        // The RM withdrew timed-out gangs' asks itself: keep the table in step without
        // sending, and give back any member granted one by one.
        for id in timed_out {
            let owned: Vec<ContainerId> = self
                .gangs
                .get(&id)
                .map(|t| t.live.iter().copied().collect())
                .unwrap_or_default();
            self.table_mut().withdraw(gang_pred(&id), true);
            for c in owned {
                self.release(c);
            }
        }
        // An elastic gang is granted at a size between its minimum and its maximum, in the
        // answer that says ALLOCATED; the RM drops the rest of the ask itself (growth comes
        // as offers), so the table forgets it without sending.
        let mut settled = Vec::new();
        for (id, t) in &mut self.gangs {
            let Some(e) = &t.request.elastic else {
                continue;
            };
            let allocated = t
                .last_status
                .as_ref()
                .is_some_and(|s| s.state == GangState::ALLOCATED);
            if t.is_pending() && allocated && t.containers.len() as u32 >= e.min {
                tracing::info!(gang = %id, size = t.containers.len(), min = e.min, max = e.max,
                    waited_ms = t.asked_at.elapsed().as_millis() as u64, "elastic gang granted");
                t.phase = GangPhase::Allocated;
                for n in t.remaining.values_mut() {
                    *n = 0;
                }
                settled.push(id.clone());
            }
        }
        for id in settled {
            self.table_mut().withdraw(gang_pred(&id), true);
        }
        for t in self.gangs.values_mut() {
            if t.is_pending() && t.remaining.values().all(|n| *n == 0) {
                tracing::info!(gang = %t.request.id, size = t.request.size(),
                    waited_ms = t.asked_at.elapsed().as_millis() as u64, "gang granted");
                t.phase = GangPhase::Allocated;
            }
        }
    }
}

/// A refusal that asking again will not change: a 4xx other than a timeout or throttling.
/// (`ApplicationMasterNotRegisteredException` never gets here: the heartbeat re-registers.)
pub fn is_permanent(e: &ClientError) -> bool {
    e.status()
        .is_some_and(|s| (400..500).contains(&s) && s != 408 && s != 429)
}

/// Polls the NM until the container is in a terminal state, unknown, or the NM is gone;
/// false if it is still there after [`RELEASE_WAIT`].
async fn wait_gone(nm: &NmClient, c: &Container) -> bool {
    let deadline = Instant::now() + RELEASE_WAIT;
    loop {
        match nm.container_status(&c.node_http_address, &c.id).await {
            Ok(info) if NM_TERMINAL.contains(&info.state.as_str()) => return true,
            Ok(_) => {}
            Err(e) if e.is_not_found() || e.is_connect() => return true,
            Err(e) => tracing::debug!(container = %c.id, error = %e, "container status"),
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(RELEASE_POLL).await;
    }
}
