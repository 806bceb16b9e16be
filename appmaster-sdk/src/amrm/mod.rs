//! YARN's `AMRMClient` semantics on top of [`AmClient`]: container requests, the ask table,
//! releases, progress, resync, and an adaptive heartbeat.
//!
//! The RM keeps a *desired-state* table keyed by (priority, allocationRequestId,
//! resourceName) in which `numContainers` is the absolute number still wanted. The client
//! mirrors it: [`AmRmClient::add_container_request`] adds one to the `*` entry and to each
//! named host and rack, [`AmRmClient::remove_container_request`] takes one away, and each
//! allocate call sends only the entries whose absolute value changed since the RM last heard
//! it (a failed call sends them again).
//!
//! One convenience differs from YARN's `AMRMClient`: when a container is allocated, the
//! request it satisfies is removed from the table for you (what every YARN AM does by hand
//! with `removeContainerRequest`). The RM has already counted the grant down on its side,
//! so that removal is *not* sent; it only keeps the two tables in step. Turn it off with
//! [`AmRmClient::set_auto_remove_matched`].
//!
//! Gangs (Spindle's all-or-nothing extension) ride on the same table: a request may carry a
//! [`GangSpec`], and every ask of a gang is sent in one allocate call because the table
//! sends all its changes at once. [`crate::gang`] builds `request_gang` / `release_gang`
//! on this client; [`AmRmClient::events`] gives the heartbeats as a `futures::Stream`.
//!
//! Preemption: the RM repeats its `preemptionMessage` in every answer until the containers are
//! gone; the client passes each newly noticed container on once, as
//! [`AllocationEvent::Preempted`] (with the RM's kill deadline). The AM answers with
//! [`AmRmClient::acknowledge_preemption`] (sent with the next heartbeat) and tells the RM
//! where its work is saved with [`AmRmClient::report_checkpoint`] (sent with every heartbeat
//! until a newer one replaces it), so the RM counts only the work since it as lost.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use futures::stream::{BoxStream, StreamExt};
use spindle_common::ids::ContainerId;
pub use spindle_common::records::am::ContainerUpdateType;
use spindle_common::records::am::{
    AllocateRequest, AmCommand, CheckpointReport, Container, GangStatus, PreemptionAcknowledgement,
    PreemptionMessage, RegisterApplicationMasterRequest, RegisterApplicationMasterResponse,
    ResizeDemand, ResizeOffer, ThroughputReport, UpdateContainerRequest,
};
use spindle_common::records::resource::ResourceInfo;
use spindle_common::resource::Resource;
use spindle_common::states::FinalApplicationStatus;

use crate::am_client::{AmClient, AmError};
use crate::gang::GangTrack;

mod ask;
mod events;

pub use ask::{AskError, AskKey, AskTable, ContainerRequest};
pub use events::{
    AllocationEvent, AllocationEvents, GangDemand, GangOffer, PreemptedContainer, PreemptionNotice,
};

/// YARN's `ResourceRequest.ANY`.
pub const ANY: &str = "*";

/// Heartbeat interval while asks are outstanding.
pub const FAST_INTERVAL: Duration = Duration::from_millis(50);
/// First idle interval; it doubles per idle heartbeat up to [`MAX_INTERVAL`].
pub const IDLE_INTERVAL: Duration = Duration::from_millis(100);
pub const MAX_INTERVAL: Duration = Duration::from_millis(1000);
/// Heartbeat interval while a gang waits: the RM grants a gang in one response, and every
/// millisecond between the grant and the AM hearing of it delays the whole job.
pub const GANG_INTERVAL: Duration = Duration::from_millis(20);

/// An AM's view of the RM, with YARN's AMRMClient bookkeeping.
#[derive(Debug)]
pub struct AmRmClient {
    client: AmClient,
    table: AskTable,
    pending_release: BTreeSet<ContainerId>,
    /// Released and sent, not yet reported completed: sent again after a resync.
    released: BTreeSet<ContainerId>,
    progress: f32,
    registration: Option<RegisterApplicationMasterRequest>,
    registered: Option<RegisterApplicationMasterResponse>,
    auto_remove_matched: bool,
    idle_polls: u32,
    headroom: Resource,
    num_cluster_nodes: i32,
    /// Gangs asked through [`crate::gang`], by id.
    pub(crate) gangs: BTreeMap<String, GangTrack>,
    /// The last status heard per gang id, to pass on only changes.
    pub(crate) gang_seen: BTreeMap<String, GangStatus>,
    /// Events heard while a gang call was driving the heartbeat, handed out by the next
    /// [`AmRmClient::poll`] so that nothing is lost.
    pub(crate) backlog: AllocationEvents,
    /// Single events not yet yielded by [`AmRmClient::next_event`].
    queued: VecDeque<AllocationEvent>,
    /// Containers whose preemption notice was passed on (until they complete).
    noticed: BTreeSet<ContainerId>,
    /// An acknowledgement (ETA in ms) not yet sent.
    pending_ack: Option<u64>,
    /// The last checkpoint reported, sent with every heartbeat.
    checkpoint: Option<CheckpointReport>,
    /// Containers of resize demands passed on (until they complete).
    demanded: BTreeSet<ContainerId>,
    /// Throughput reports not yet sent, by gang (the latest per gang).
    pending_throughput: BTreeMap<String, ThroughputReport>,
    /// Container updates not yet sent, by container (the latest per container).
    pending_updates: BTreeMap<ContainerId, UpdateContainerRequest>,
    /// Containers whose completion was passed on: a completion the RM sends again (a
    /// restarted RM re-delivers one its predecessor sent but the next allocate did not
    /// acknowledge) is dropped, so the AM hears of each completion exactly once.
    completed_seen: BTreeSet<ContainerId>,
}

impl AmRmClient {
    pub fn new(client: AmClient) -> Self {
        Self {
            client,
            table: AskTable::new(),
            pending_release: BTreeSet::new(),
            released: BTreeSet::new(),
            progress: 0.0,
            registration: None,
            registered: None,
            auto_remove_matched: true,
            idle_polls: 0,
            headroom: Resource::zero(),
            num_cluster_nodes: 0,
            gangs: BTreeMap::new(),
            gang_seen: BTreeMap::new(),
            backlog: AllocationEvents::default(),
            queued: VecDeque::new(),
            noticed: BTreeSet::new(),
            pending_ack: None,
            checkpoint: None,
            demanded: BTreeSet::new(),
            pending_throughput: BTreeMap::new(),
            pending_updates: BTreeMap::new(),
            completed_seen: BTreeSet::new(),
        }
    }

    pub fn client(&self) -> &AmClient {
        &self.client
    }

    pub fn table(&self) -> &AskTable {
        &self.table
    }

    pub(crate) fn table_mut(&mut self) -> &mut AskTable {
        &mut self.table
    }

    /// See the module doc; on by default.
    pub fn set_auto_remove_matched(&mut self, on: bool) {
        self.auto_remove_matched = on;
    }

    pub async fn register(
        &mut self,
        host: &str,
        rpc_port: i32,
        tracking_url: &str,
    ) -> Result<RegisterApplicationMasterResponse, AmError> {
        let req = RegisterApplicationMasterRequest {
            host: host.to_string(),
            rpc_port,
            tracking_url: tracking_url.to_string(),
        };
        let resp = self.client.register(&req).await?;
        self.registration = Some(req);
        self.registered = Some(resp.clone());
        Ok(resp)
    }

    /// The answer to the last registration.
    pub fn registration(&self) -> Option<&RegisterApplicationMasterResponse> {
        self.registered.as_ref()
    }

    pub fn add_container_request(&mut self, req: ContainerRequest) -> Result<(), AskError> {
        self.table.add(req)?;
        self.idle_polls = 0;
        Ok(())
    }

    pub fn remove_container_request(&mut self, req: &ContainerRequest) -> bool {
        self.table.remove(req)
    }

    /// Gives a container back; sent with the next heartbeat.
    pub fn release(&mut self, id: ContainerId) {
        self.pending_release.insert(id);
    }

    /// Progress in 0..=1, reported with every heartbeat.
    pub fn set_progress(&mut self, progress: f32) {
        self.progress = if progress.is_finite() {
            progress.clamp(0.0, 1.0)
        } else {
            0.0
        };
    }

    /// Answers a preemption notice: the containers will have checkpointed and exited within
    /// `eta_ms`; the RM then kills what is left at the earlier of that and its deadline. Sent
    /// with the next heartbeat (once; a later call before it replaces the ETA).
    pub fn acknowledge_preemption(&mut self, eta_ms: u64) {
        self.pending_ack = Some(eta_ms);
        self.idle_polls = 0;
    }

    /// Tells the RM where the application's work is saved: `time_ms` (ms since the epoch)
    /// when the checkpoint was written, the training step it holds and a free-form label.
    /// Sent with every heartbeat from the next one on, until a newer checkpoint (a later
    /// `time_ms`, or the same time with another step or label) replaces it; an older one is
    /// ignored. The RM counts the work since it as lost to a preemption.
    pub fn report_checkpoint(&mut self, time_ms: u64, step: Option<u64>, label: Option<String>) {
        let k = CheckpointReport {
            time: time_ms,
            step,
            label,
        };
        if self.checkpoint.as_ref().is_some_and(|c| c.time > k.time) {
            return;
        }
        self.checkpoint = Some(k);
    }

    /// Reports an elastic gang's measured throughput (`value` units per second, the unit of
    /// its throughput table) at `size` members: the RM's speed model for that size. Sent
    /// with the next heartbeat (a later report for the gang before it replaces this one).
    pub fn report_throughput(&mut self, gang_id: &str, size: u32, value: f64) {
        self.report_cpu_throughput(gang_id, size, value, 0);
    }

    /// [`AmRmClient::report_throughput`] measured with workers of `vcores` CPUs each (0: not
    /// said): with it the report also feeds the RM's CPU policy (ranged vcores asks,
    /// `spindle.scheduler.cpu-policy`), which divides it by one worker's GPUs.
    pub fn report_cpu_throughput(&mut self, gang_id: &str, size: u32, value: f64, vcores: u32) {
        if !value.is_finite() || value < 0.0 || size == 0 {
            tracing::debug!(gang = gang_id, size, value, "throughput report ignored");
            return;
        }
        self.pending_throughput.insert(
            gang_id.to_string(),
            ThroughputReport {
                gang_id: gang_id.to_string(),
                size,
                throughput: value,
                vcores,
            },
        );
    }

    /// The checkpoint the heartbeats carry.
    /// Asks the RM, in the next allocate call, to resize the running container `id` (YARN's
    /// `requestContainerUpdate`): `version` is the one the AM holds (the `Container`'s,
    /// from its grant or its last update; a stale one is refused), `capability` the new
    /// size. The answer comes as [`AllocationEvent::ContainerUpdated`] (now or, for an
    /// increase, once the RM finds the room) or [`AllocationEvent::ContainerUpdateFailed`];
    /// then hand the new token to the container's NM
    /// ([`crate::nm_client::NmClient::update_container`]). A second request for the same
    /// container before the first was sent replaces it. Memory and vcores only: device
    /// counts cannot change in place (use an elastic gang).
    pub fn request_container_update(
        &mut self,
        id: ContainerId,
        version: i32,
        update_type: ContainerUpdateType,
        capability: &Resource,
    ) {
        self.pending_updates.insert(
            id,
            UpdateContainerRequest {
                container_id: id,
                container_version: version,
                container_update_type: update_type,
                capability: ResourceInfo::from(capability),
            },
        );
    }

    /// Container updates not sent yet.
    pub fn pending_updates(&self) -> Vec<UpdateContainerRequest> {
        self.pending_updates.values().cloned().collect()
    }

    pub fn checkpoint(&self) -> Option<&CheckpointReport> {
        self.checkpoint.as_ref()
    }

    /// Containers under a preemption notice this client has passed on and that have not
    /// completed yet.
    pub fn under_notice(&self) -> Vec<ContainerId> {
        self.noticed.iter().copied().collect()
    }

    pub fn outstanding_requests(&self) -> i32 {
        self.table.outstanding()
    }

    /// The headroom of the last answer.
    pub fn headroom(&self) -> &Resource {
        &self.headroom
    }

    pub fn num_cluster_nodes(&self) -> i32 {
        self.num_cluster_nodes
    }

    /// How long to wait before the next heartbeat: 20 ms while a gang waits, 50 ms while
    /// containers are wanted or changes (asks, releases, a preemption acknowledgement) are
    /// unsent, else 100 ms doubling per quiet heartbeat
    /// up to 1 s.
    pub fn next_interval(&self) -> Duration {
        if self.gangs.values().any(GangTrack::is_pending) {
            return GANG_INTERVAL;
        }
        if self.table.outstanding() > 0
            || self.table.has_changes()
            || !self.pending_release.is_empty()
            || self.pending_ack.is_some()
            || !self.pending_updates.is_empty()
        {
            return FAST_INTERVAL;
        }
        let factor = 1u32 << self.idle_polls.min(4);
        (IDLE_INTERVAL * factor).min(MAX_INTERVAL)
    }

    /// One heartbeat: sends the changed asks, releases and progress; returns what came back
    /// (after anything heard while a gang call drove the heartbeat).
    /// On `AM_RESYNC` (or an `ApplicationMasterNotRegisteredException`) it registers again
    /// and marks the whole table for resending; on `AM_SHUTDOWN` it fails with
    /// [`AmError::Shutdown`].
    pub async fn poll(&mut self) -> Result<AllocationEvents, AmError> {
        let fresh = self.heartbeat().await?;
        let mut events = std::mem::take(&mut self.backlog);
        events.extend(fresh);
        Ok(events)
    }

    /// Hands out what gang calls heard and kept, without a heartbeat.
    pub fn take_backlog(&mut self) -> AllocationEvents {
        std::mem::take(&mut self.backlog)
    }

    /// The heartbeat itself: what came back, with gang bookkeeping applied.
    pub(crate) async fn heartbeat(&mut self) -> Result<AllocationEvents, AmError> {
        if self.registration.is_none() {
            return Err(AmError::NotRegistered);
        }
        let ask = self.table.changes();
        let release: Vec<ContainerId> = self.pending_release.iter().copied().collect();
        let ack = self.pending_ack;
        let throughput: Vec<ThroughputReport> = self.pending_throughput.values().cloned().collect();
        let updates: Vec<UpdateContainerRequest> = self.pending_updates.values().cloned().collect();
        let req = AllocateRequest {
            throughput_reports: throughput.clone(),
            update_requests: updates.clone(),
            response_id: 0,
            ask: ask.clone(),
            release: release.clone(),
            progress: self.progress,
            blacklist_request: None,
            tracking_url: None,
            checkpoint: self.checkpoint.clone(),
            preemption_acknowledgement: ack.map(|eta| PreemptionAcknowledgement {
                checkpoint_eta_ms: eta,
            }),
        };
        let mut resp = match self.client.allocate(req).await {
            Ok(r) => r,
            Err(AmError::Client(e))
                if e.is_exception("ApplicationMasterNotRegisteredException") =>
            {
                tracing::warn!("the RM does not know this AM as registered; registering again");
                self.resync().await?;
                return Ok(AllocationEvents::default());
            }
            Err(e) => return Err(e),
        };
        match resp.am_command {
            Some(AmCommand::AM_SHUTDOWN) => return Err(AmError::Shutdown),
            Some(AmCommand::AM_RESYNC) => {
                tracing::warn!("the RM asked for a resync; registering again");
                self.resync().await?;
                return Ok(AllocationEvents::default());
            }
            None => {}
        }
        self.table.commit(&ask);
        if ack.is_some() && self.pending_ack == ack {
            self.pending_ack = None;
        }
        for r in throughput {
            if self.pending_throughput.get(&r.gang_id) == Some(&r) {
                self.pending_throughput.remove(&r.gang_id);
            }
        }
        for u in updates {
            if self.pending_updates.get(&u.container_id) == Some(&u) {
                self.pending_updates.remove(&u.container_id);
            }
        }
        for id in release {
            self.pending_release.remove(&id);
            self.released.insert(id);
        }
        self.headroom = resp.available_resources.to_resource();
        self.num_cluster_nodes = resp.num_cluster_nodes;
        if self.auto_remove_matched {
            for c in &resp.allocated_containers {
                if self.table.on_allocated(c).is_none() {
                    tracing::debug!(container = %c.id, "allocated container matches no outstanding request");
                }
            }
        }
        resp.completed_container_statuses
            .retain(|s| self.completed_seen.insert(s.container_id));
        for s in &resp.completed_container_statuses {
            self.released.remove(&s.container_id);
        }
        let preempted = resp
            .preemption_message
            .as_ref()
            .and_then(|m| self.observe_preemption(m));
        let demands = self.observe_demands(&resp.resize_demands);
        for s in &resp.completed_container_statuses {
            self.noticed.remove(&s.container_id);
            self.demanded.remove(&s.container_id);
        }
        let mut allocated = resp.allocated_containers;
        let offers = take_offers(&resp.resize_offers, &mut allocated);
        for o in &offers {
            tracing::info!(gang = %o.gang_id, from = o.from, to = o.to,
                containers = o.containers.len(), "the ResourceManager offers to grow a gang");
            self.gang_grown(&o.gang_id, &o.containers);
        }
        let mut events = AllocationEvents {
            allocated,
            completed: resp.completed_container_statuses,
            nodes: resp.updated_nodes,
            gangs: Vec::new(),
            preempted: preempted.into_iter().collect(),
            offers,
            demands,
            updated: resp.updated_containers,
            update_errors: resp.update_errors,
            idle_gpus: resp.idle_gpu_containers,
        };
        for i in &events.idle_gpus {
            tracing::warn!(container = %i.container_id, idle_since_ms = i.idle_since_ms,
                gpus = i.gpus, utilization = i.gpu_utilization,
                "the ResourceManager reports a container holding idle GPUs past its queue's gpu-idle-timeout-ms");
        }
        for u in &events.updated {
            tracing::info!(container = %u.container.id, version = u.container.version,
                update = ?u.update_type, "the ResourceManager updated a container");
        }
        for e in &events.update_errors {
            tracing::warn!(container = %e.update_container_request.container_id,
                reason = %e.reason, "the ResourceManager refused a container update");
        }
        self.observe_gangs(&ask, resp.gang_statuses, &mut events);
        if events.is_empty() {
            self.idle_polls = self.idle_polls.saturating_add(1);
        } else {
            self.idle_polls = 0;
        }
        Ok(events)
    }

    /// The resize demands with containers not passed on yet (each demand once, although the
    /// RM repeats it until its containers are gone).
    fn observe_demands(&mut self, demands: &[ResizeDemand]) -> Vec<GangDemand> {
        let mut out = Vec::new();
        for d in demands {
            let mut fresh = false;
            for c in &d.containers {
                fresh |= self.demanded.insert(*c);
            }
            if !fresh {
                continue;
            }
            tracing::warn!(gang = %d.gang_id, from = d.from_size, to = d.to_size,
                containers = d.containers.len(), deadline_ms = d.deadline,
                "the ResourceManager shrinks a gang");
            out.push(GangDemand {
                gang_id: d.gang_id.clone(),
                containers: d.containers.clone(),
                from: d.from_size,
                to: d.to_size,
                deadline_ms: d.deadline,
            });
        }
        out
    }

    /// Containers of a resize demand passed on that have not completed yet.
    pub fn under_demand(&self) -> Vec<ContainerId> {
        self.demanded.iter().copied().collect()
    }

    /// The containers of a preemption message not passed on yet, as one notice.
    fn observe_preemption(&mut self, m: &PreemptionMessage) -> Option<PreemptionNotice> {
        let listed = m
            .strict_contract
            .iter()
            .flat_map(|c| c.container.iter())
            .chain(m.contract.iter().flat_map(|c| c.container.iter()));
        let mut fresh = Vec::new();
        for c in listed {
            if self.noticed.insert(c.id) {
                fresh.push(PreemptedContainer {
                    id: c.id,
                    node_id: c.node_id.clone(),
                    node_http_address: c.node_http_address.clone(),
                    gang_id: c.gang_id.clone(),
                });
            }
        }
        if fresh.is_empty() {
            return None;
        }
        tracing::warn!(containers = fresh.len(), deadline_ms = m.deadline, gangs = ?m.gang_ids,
            "the ResourceManager preempts containers of this application");
        Some(PreemptionNotice {
            containers: fresh,
            deadline_ms: m.deadline,
            gang_ids: m.gang_ids.clone(),
        })
    }

    /// The low-level loop step: waits [`AmRmClient::next_interval`], then one heartbeat
    /// ([`AmRmClient::poll`]), returning everything it brought at once (to act on a
    /// heartbeat's grants together). [`AmRmClient::next_event`] is the same, one event at a
    /// time.
    pub async fn tick(&mut self) -> Result<AllocationEvents, AmError> {
        tokio::time::sleep(self.next_interval()).await;
        self.poll().await
    }

    /// The next single event: one left from the last heartbeat, else heartbeats (at
    /// [`AmRmClient::next_interval`]) until something happens. A failed heartbeat is
    /// returned as the error; calling again retries.
    ///
    /// The event is owned and the borrow ends when it is returned, so this is the AM's
    /// loop: `while let Ok(ev) = amrm.next_event().await { ... }` may ask, release,
    /// acknowledge and report between events (see `docs/sdk.md`).
    ///
    /// Cancelling this future while a heartbeat is in flight loses that heartbeat's answer
    /// (which may carry containers), as with any allocate call: do not race it in a
    /// `select!` against something that wins often; events already queued are never lost.
    pub async fn next_event(&mut self) -> Result<AllocationEvent, AmError> {
        loop {
            if let Some(e) = self.queued.pop_front() {
                return Ok(e);
            }
            let backlog = self.take_backlog();
            if !backlog.is_empty() {
                self.queued.extend(backlog.into_items());
                continue;
            }
            let ev = self.tick().await?;
            self.queued.extend(ev.into_items());
        }
    }

    /// The heartbeats as a `futures::Stream` of single events, for stream combinators. The
    /// stream borrows the client mutably for as long as it lives, so nothing can be asked,
    /// released or acknowledged while it is held: drop it to act (nothing queued is lost),
    /// or loop on [`AmRmClient::next_event`] instead. After [`AmError::Shutdown`] or [`AmError::NotRegistered`] it ends;
    /// after other errors (an unreachable RM) it yields the error and carries on, after a
    /// pause of [`MAX_INTERVAL`].
    ///
    /// Boxed (and so `Unpin`), so that `events.next().await` works without pinning.
    pub fn events(&mut self) -> BoxStream<'_, Result<AllocationEvent, AmError>> {
        // State: the client, whether the stream has ended, whether to back off first.
        futures::stream::unfold((self, false, false), |(c, done, backoff)| async move {
            if done {
                return None;
            }
            if backoff {
                tokio::time::sleep(MAX_INTERVAL).await;
            }
            match c.next_event().await {
                Ok(e) => Some((Ok(e), (c, false, false))),
                Err(e @ (AmError::Shutdown | AmError::NotRegistered)) => {
                    Some((Err(e), (c, true, false)))
                }
                Err(e) => Some((Err(e), (c, false, true))),
            }
        })
        .boxed()
    }

    async fn resync(&mut self) -> Result<(), AmError> {
        let req = self.registration.clone().ok_or(AmError::NotRegistered)?;
        self.client.reset_response_id();
        let resp = self.client.register(&req).await?;
        self.registered = Some(resp);
        self.table.mark_all_unsent();
        self.pending_release.extend(self.released.iter().copied());
        Ok(())
    }

    /// Unregisters with the final status (retrying until the RM confirms); registers again
    /// first if the RM has forgotten this AM (after its restart).
    pub async fn finish(
        &mut self,
        status: FinalApplicationStatus,
        diagnostics: &str,
    ) -> Result<(), AmError> {
        match self.client.finish(status, diagnostics).await {
            Err(AmError::Client(e))
                if e.is_exception("ApplicationMasterNotRegisteredException") =>
            {
                self.resync().await?;
                self.client.finish(status, diagnostics).await
            }
            r => r,
        }
    }
}

/// The offers of one answer, with their containers taken out of `allocated` (an offered
/// container is in both lists; the AM hears of it as part of its offer only). An offered id
/// missing from `allocated` is dropped from the offer with a warning.
fn take_offers(offers: &[ResizeOffer], allocated: &mut Vec<Container>) -> Vec<GangOffer> {
    offers
        .iter()
        .map(|o| {
            let mut containers = Vec::with_capacity(o.containers.len());
            for id in &o.containers {
                match allocated.iter().position(|c| c.id == *id) {
                    Some(i) => containers.push(allocated.remove(i)),
                    None => tracing::warn!(gang = %o.gang_id, container = %id,
                        "a resize offer names a container the answer does not allocate"),
                }
            }
            GangOffer {
                gang_id: o.gang_id.clone(),
                containers,
                from: o.from_size,
                to: o.to_size,
            }
        })
        .collect()
}
