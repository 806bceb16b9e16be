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
    AllocateRequest, AmCommand, CheckpointReport, Container, ContainerStatus, GangSpec, GangStatus,
    NodeReport, PreemptionAcknowledgement, PreemptionMessage, RegisterApplicationMasterRequest,
    RegisterApplicationMasterResponse, ResizeDemand, ResizeOffer, ResourceRequest,
    ThroughputReport, UpdateContainerError, UpdateContainerRequest, UpdatedContainer,
};
use spindle_common::records::labels::PlacementConstraintInfo;
use spindle_common::records::resource::ResourceInfo;
use spindle_common::resource::Resource;
use spindle_common::states::FinalApplicationStatus;

use crate::am_client::{AmClient, AmError};
use crate::gang::GangTrack;

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

/// YARN's `AMRMClient.ContainerRequest`: one container of `capability`, anywhere (`*`) and,
/// if given, preferably on `nodes` / `racks`.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerRequest {
    pub capability: Resource,
    /// Lower values are served first within an application, as in YARN.
    pub priority: i32,
    pub nodes: Vec<String>,
    pub racks: Vec<String>,
    /// False forbids falling back from the named nodes/racks to `*`.
    pub relax_locality: bool,
    pub allocation_request_id: i64,
    pub node_label_expression: Option<String>,
    /// Spindle's extension: the gang this request is a member of (granted whole or not at
    /// all with the gang's other members). Usually set through [`crate::gang::GangRequest`].
    pub gang: Option<GangSpec>,
    /// Allocation tags of the container (what placement constraints count).
    pub allocation_tags: Vec<String>,
    /// Where the container may go: tags (IN, NOTIN, CARDINALITY) and node attributes.
    pub placement_constraint: Option<PlacementConstraintInfo>,
}

impl ContainerRequest {
    pub fn new(capability: Resource, priority: i32) -> Self {
        Self {
            capability,
            priority,
            nodes: Vec::new(),
            racks: Vec::new(),
            relax_locality: true,
            allocation_request_id: 0,
            node_label_expression: None,
            gang: None,
            allocation_tags: Vec::new(),
            placement_constraint: None,
        }
    }
    pub fn allocation_tags(mut self, tags: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.allocation_tags = tags.into_iter().map(Into::into).collect();
        self
    }
    pub fn placement_constraint(mut self, c: PlacementConstraintInfo) -> Self {
        self.placement_constraint = Some(c);
        self
    }
    pub fn gang(mut self, spec: GangSpec) -> Self {
        self.gang = Some(spec);
        self
    }
    pub fn nodes(mut self, nodes: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.nodes = nodes.into_iter().map(Into::into).collect();
        self
    }
    pub fn racks(mut self, racks: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.racks = racks.into_iter().map(Into::into).collect();
        self
    }
    pub fn relax_locality(mut self, relax: bool) -> Self {
        self.relax_locality = relax;
        self
    }
    pub fn allocation_request_id(mut self, id: i64) -> Self {
        self.allocation_request_id = id;
        self
    }
    pub fn node_label_expression(mut self, expr: impl Into<String>) -> Self {
        self.node_label_expression = Some(expr.into());
        self
    }

    /// The table entries this request counts in, with the relaxLocality each carries
    /// (named nodes and racks: true; `*`: the request's own flag), as YARN's AMRMClient.
    fn keys(&self) -> Vec<(AskKey, bool)> {
        let key = |name: &str| AskKey {
            priority: self.priority,
            allocation_request_id: self.allocation_request_id,
            resource_name: name.to_string(),
        };
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for n in self.nodes.iter().chain(self.racks.iter()) {
            if n != ANY && seen.insert(n.clone()) {
                out.push((key(n), true));
            }
        }
        out.push((key(ANY), self.relax_locality));
        out
    }
}

/// Why a container request was refused (nothing was changed).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AskError {
    #[error("container request capability {0} is empty or negative")]
    BadCapability(String),
    #[error("cannot turn off locality relaxation on a request with no nodes or racks")]
    RelaxWithoutLocation,
    #[error(
        "'{resource_name}' at priority {priority}, allocationRequestId {allocation_request_id} \
         already has {existing} outstanding; a request for {requested} needs another \
         allocationRequestId or priority"
    )]
    CapabilityMismatch {
        priority: i32,
        allocation_request_id: i64,
        resource_name: String,
        existing: String,
        requested: String,
    },
    #[error(
        "cannot ask for '{resource_name}' at priority {priority} with relaxLocality={requested} \
         while it is already asked with relaxLocality={existing}"
    )]
    RelaxLocalityMismatch {
        priority: i32,
        resource_name: String,
        existing: bool,
        requested: bool,
    },
    /// The RM keys asks by (priority, allocationRequestId): one key cannot serve two gangs,
    /// or a gang and plain asks.
    #[error(
        "priority {priority}, allocationRequestId {allocation_request_id} is already asked \
         {existing}; a request {requested} needs another allocationRequestId"
    )]
    GangMismatch {
        priority: i32,
        allocation_request_id: i64,
        existing: String,
        requested: String,
    },
    /// The RM places a gang itself; its members name no nodes or racks.
    #[error("a gang member cannot name nodes or racks (gang '{0}')")]
    GangWithLocality(String),
}

fn gang_words(g: &Option<GangSpec>) -> String {
    match g {
        Some(g) => format!("for gang '{}'", g.id),
        None => "without a gang".into(),
    }
}

/// The RM's key for an ask: SchedulerRequestKey(priority, allocationRequestId) x resourceName.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AskKey {
    pub priority: i32,
    pub allocation_request_id: i64,
    pub resource_name: String,
}

#[derive(Debug, Clone, PartialEq)]
struct AskEntry {
    capability: Resource,
    num_containers: i32,
    relax_locality: bool,
    node_label_expression: Option<String>,
    gang: Option<GangSpec>,
    allocation_tags: Vec<String>,
    placement_constraint: Option<PlacementConstraintInfo>,
}

/// The client side of the desired-state ask table.
#[derive(Debug, Clone, Default)]
pub struct AskTable {
    entries: BTreeMap<AskKey, AskEntry>,
    /// What the RM was last told for each key.
    sent: BTreeMap<AskKey, AskEntry>,
    /// Outstanding requests, oldest first, to match grants against.
    requests: Vec<ContainerRequest>,
}

impl AskTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts `req` in (one more container on each of its keys). Refused as a whole when it
    /// conflicts with what is outstanding under the same key.
    pub fn add(&mut self, req: ContainerRequest) -> Result<(), AskError> {
        if req.capability.any_negative() || req.capability.is_zero() {
            return Err(AskError::BadCapability(req.capability.to_string()));
        }
        if !req.relax_locality && req.nodes.is_empty() && req.racks.is_empty() {
            return Err(AskError::RelaxWithoutLocation);
        }
        if let Some(g) = &req.gang {
            if !req.nodes.is_empty() || !req.racks.is_empty() {
                return Err(AskError::GangWithLocality(g.id.clone()));
            }
        }
        let keys = req.keys();
        for (k, relax) in &keys {
            if let Some(e) = self.entries.get(k).filter(|e| e.num_containers > 0) {
                if e.gang.as_ref().map(|g| &g.id) != req.gang.as_ref().map(|g| &g.id) {
                    return Err(AskError::GangMismatch {
                        priority: k.priority,
                        allocation_request_id: k.allocation_request_id,
                        existing: gang_words(&e.gang),
                        requested: gang_words(&req.gang),
                    });
                }
                if e.capability != req.capability {
                    return Err(AskError::CapabilityMismatch {
                        priority: k.priority,
                        allocation_request_id: k.allocation_request_id,
                        resource_name: k.resource_name.clone(),
                        existing: e.capability.to_string(),
                        requested: req.capability.to_string(),
                    });
                }
                if e.relax_locality != *relax {
                    return Err(AskError::RelaxLocalityMismatch {
                        priority: k.priority,
                        resource_name: k.resource_name.clone(),
                        existing: e.relax_locality,
                        requested: *relax,
                    });
                }
            }
        }
        for (k, relax) in keys {
            let e = self.entries.entry(k).or_insert_with(|| AskEntry {
                capability: req.capability.clone(),
                num_containers: 0,
                relax_locality: relax,
                node_label_expression: req.node_label_expression.clone(),
                gang: req.gang.clone(),
                allocation_tags: req.allocation_tags.clone(),
                placement_constraint: req.placement_constraint.clone(),
            });
            if e.num_containers == 0 {
                e.capability = req.capability.clone();
                e.relax_locality = relax;
                e.node_label_expression = req.node_label_expression.clone();
                e.gang = req.gang.clone();
                e.allocation_tags = req.allocation_tags.clone();
                e.placement_constraint = req.placement_constraint.clone();
            }
            e.num_containers += 1;
        }
        self.requests.push(req);
        Ok(())
    }

    /// Takes one container away from each of `req`'s keys (never below zero). Returns
    /// whether an equal outstanding request was found.
    pub fn remove(&mut self, req: &ContainerRequest) -> bool {
        let found = match self.requests.iter().position(|r| r == req) {
            Some(i) => {
                self.requests.remove(i);
                true
            }
            None => false,
        };
        if found {
            for (k, _) in req.keys() {
                if let Some(e) = self.entries.get_mut(&k) {
                    e.num_containers = (e.num_containers - 1).max(0);
                }
            }
        }
        found
    }

    /// Takes every outstanding request that `pred` selects out of the table; returns how many.
    ///
    /// With `rm_knows` (the RM already dropped them, as for a gang whose soft timeout passed,
    /// or never accepted them, as for a refused allocate call) the RM's remembered view is
    /// counted down too, so nothing is sent; without it the new absolute counts (zero) are
    /// sent with the next heartbeat, withdrawing the asks at the RM.
    pub fn withdraw(&mut self, pred: impl Fn(&ContainerRequest) -> bool, rm_knows: bool) -> usize {
        let (gone, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.requests)
            .into_iter()
            .partition(|r| pred(r));
        self.requests = kept;
        for req in &gone {
            for (k, _) in req.keys() {
                if let Some(e) = self.entries.get_mut(&k) {
                    e.num_containers = (e.num_containers - 1).max(0);
                }
                if rm_knows {
                    if let Some(e) = self.sent.get_mut(&k) {
                        e.num_containers = (e.num_containers - 1).max(0);
                    }
                    if self.entries.get(&k).is_some_and(|e| e.num_containers == 0)
                        && self.sent.get(&k).is_none_or(|s| s.num_containers == 0)
                    {
                        self.entries.remove(&k);
                        self.sent.remove(&k);
                    }
                }
            }
        }
        gone.len()
    }

    /// Containers still wanted: the sum of the `*` entries.
    pub fn outstanding(&self) -> i32 {
        self.entries
            .iter()
            .filter(|(k, _)| k.resource_name == ANY)
            .map(|(_, e)| e.num_containers)
            .sum()
    }

    /// The outstanding requests, oldest first.
    pub fn requests(&self) -> &[ContainerRequest] {
        &self.requests
    }

    /// The absolute number wanted under a key (0 if absent).
    pub fn num_containers(&self, key: &AskKey) -> i32 {
        self.entries.get(key).map_or(0, |e| e.num_containers)
    }

    /// The entries to send: those that differ from what the RM last heard, in key order.
    pub fn changes(&self) -> Vec<ResourceRequest> {
        self.entries
            .iter()
            .filter(|(k, e)| match self.sent.get(*k) {
                Some(s) => s != *e,
                None => e.num_containers > 0,
            })
            .map(|(k, e)| ResourceRequest {
                priority: k.priority,
                resource_name: k.resource_name.clone(),
                capability: ResourceInfo::from(&e.capability),
                num_containers: e.num_containers,
                relax_locality: e.relax_locality,
                node_label_expression: e.node_label_expression.clone(),
                allocation_request_id: k.allocation_request_id,
                gang: e.gang.clone(),
                allocation_tags: e.allocation_tags.clone(),
                placement_constraint: e.placement_constraint.clone(),
            })
            .collect()
    }

    pub fn has_changes(&self) -> bool {
        !self.changes().is_empty()
    }

    /// Records that the RM heard `sent` (the output of [`AskTable::changes`]); entries that
    /// reached zero are forgotten on both sides.
    pub fn commit(&mut self, sent: &[ResourceRequest]) {
        for r in sent {
            let k = AskKey {
                priority: r.priority,
                allocation_request_id: r.allocation_request_id,
                resource_name: r.resource_name.clone(),
            };
            let Some(e) = self.entries.get(&k) else {
                continue;
            };
            if e.num_containers == 0 {
                self.entries.remove(&k);
                self.sent.remove(&k);
            } else {
                self.sent.insert(k, e.clone());
            }
        }
    }

    /// Forgets what the RM was told, so that the next changes are the whole table (resync).
    pub fn mark_all_unsent(&mut self) {
        self.sent.clear();
        self.entries.retain(|_, e| e.num_containers > 0);
    }

    /// Counts a grant against the oldest matching request (same priority and
    /// allocationRequestId, a capability that fits; one naming the container's node
    /// preferred) and removes it from both the table and the RM's remembered view, since the
    /// RM already counted it down. Returns the matched request.
    pub fn on_allocated(&mut self, c: &Container) -> Option<ContainerRequest> {
        let granted = c.resource.to_resource();
        let node = c.node_id.to_string();
        let same_key = |r: &ContainerRequest| {
            r.priority == c.priority && r.allocation_request_id == c.allocation_request_id
        };
        let fits = |r: &ContainerRequest| r.capability.fits_in(&granted);
        let on_node =
            |r: &ContainerRequest| r.nodes.iter().any(|n| n == &node || n == &c.node_id.host);
        let idx = self
            .requests
            .iter()
            .position(|r| same_key(r) && fits(r) && on_node(r))
            .or_else(|| self.requests.iter().position(|r| same_key(r) && fits(r)))
            .or_else(|| self.requests.iter().position(same_key))?;
        let req = self.requests.remove(idx);
        for (k, _) in req.keys() {
            for table in [&mut self.entries, &mut self.sent] {
                if let Some(e) = table.get_mut(&k) {
                    e.num_containers = (e.num_containers - 1).max(0);
                }
            }
            if self.entries.get(&k).is_some_and(|e| e.num_containers == 0)
                && self.sent.get(&k).is_none_or(|s| s.num_containers == 0)
            {
                self.entries.remove(&k);
                self.sent.remove(&k);
            }
        }
        Some(req)
    }
}

/// What one heartbeat brought.
#[derive(Debug, Clone, Default)]
pub struct AllocationEvents {
    pub allocated: Vec<Container>,
    pub completed: Vec<ContainerStatus>,
    pub nodes: Vec<NodeReport>,
    /// Gang statuses that changed (state, diagnostics, reserved nodes or failed members)
    /// since the AM last heard of that gang; the RM repeats them every heartbeat, the client
    /// passes each change on once.
    pub gangs: Vec<GangStatus>,
    /// Preemption notices: containers the RM newly put under notice (each container once,
    /// although the RM repeats its message until they are gone).
    pub preempted: Vec<PreemptionNotice>,
    /// Elastic gangs the RM grew (each offer once; its containers are not in `allocated`).
    pub offers: Vec<GangOffer>,
    /// Elastic gangs the RM shrinks (each demand once, although the RM repeats it).
    pub demands: Vec<GangDemand>,
    /// Containers the RM resized as asked ([`AmRmClient::request_container_update`]): each
    /// at its new version, with a new token for its NM.
    pub updated: Vec<UpdatedContainer>,
    /// Container updates the RM refused.
    pub update_errors: Vec<UpdateContainerError>,
    /// Containers whose GPUs stayed idle past their queue's `gpu-idle-timeout-ms` (the
    /// queue's `gpu-idle-action` is `notify`); each told once per idle spell.
    pub idle_gpus: Vec<spindle_common::records::am::IdleGpuContainer>,
}

/// The RM grew an elastic gang from `from` to `to` members
/// ([`AllocationEvent::ResizeOffered`]).
#[derive(Debug, Clone, PartialEq)]
pub struct GangOffer {
    pub gang_id: String,
    /// The new members, granted: start them to accept, or [`AmRmClient::decline_offer`].
    pub containers: Vec<Container>,
    pub from: u32,
    pub to: u32,
}

/// The RM shrinks an elastic gang from `from` to `to` members
/// ([`AllocationEvent::ResizeDemanded`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GangDemand {
    pub gang_id: String,
    /// The members to give back (release) by `deadline_ms`.
    pub containers: Vec<ContainerId>,
    pub from: u32,
    pub to: u32,
    /// When the RM kills what is left (exit -102; not a failure of the gang), ms since the
    /// epoch.
    pub deadline_ms: u64,
}

/// Containers the RM takes back ([`AllocationEvent::Preempted`]): what the AM should
/// checkpoint and give back before `deadline_ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreemptionNotice {
    /// The containers newly under notice (a gang's live members all together).
    pub containers: Vec<ContainerId>,
    /// When the RM kills what is still live, with exit status -102 (ms since the epoch).
    pub deadline_ms: u64,
    /// The gangs the RM takes back whole.
    pub gang_ids: Vec<String>,
}

impl AllocationEvents {
    pub fn is_empty(&self) -> bool {
        self.allocated.is_empty()
            && self.completed.is_empty()
            && self.nodes.is_empty()
            && self.gangs.is_empty()
            && self.preempted.is_empty()
            && self.offers.is_empty()
            && self.demands.is_empty()
            && self.updated.is_empty()
            && self.update_errors.is_empty()
            && self.idle_gpus.is_empty()
    }

    /// Appends `other` after these events.
    pub fn extend(&mut self, other: AllocationEvents) {
        self.allocated.extend(other.allocated);
        self.completed.extend(other.completed);
        self.nodes.extend(other.nodes);
        self.gangs.extend(other.gangs);
        self.preempted.extend(other.preempted);
        self.offers.extend(other.offers);
        self.demands.extend(other.demands);
        self.updated.extend(other.updated);
        self.update_errors.extend(other.update_errors);
        self.idle_gpus.extend(other.idle_gpus);
    }

    /// One [`AllocationEvent`] per item, in the order preemption notices, resize demands,
    /// resize offers, gang statuses, grants, container updates, refused updates, idle GPUs,
    /// completions, node updates (a gang's status comes before its containers' later
    /// completions).
    pub fn into_items(self) -> impl Iterator<Item = AllocationEvent> {
        self.preempted
            .into_iter()
            .map(|n| AllocationEvent::Preempted {
                containers: n.containers,
                deadline_ms: n.deadline_ms,
                gang_ids: n.gang_ids,
            })
            .chain(
                self.demands
                    .into_iter()
                    .map(|d| AllocationEvent::ResizeDemanded {
                        gang_id: d.gang_id,
                        containers: d.containers,
                        from: d.from,
                        to: d.to,
                        deadline_ms: d.deadline_ms,
                    }),
            )
            .chain(
                self.offers
                    .into_iter()
                    .map(|o| AllocationEvent::ResizeOffered {
                        gang_id: o.gang_id,
                        containers: o.containers,
                        from: o.from,
                        to: o.to,
                    }),
            )
            .chain(self.gangs.into_iter().map(AllocationEvent::Gang))
            .chain(self.allocated.into_iter().map(AllocationEvent::Allocated))
            .chain(
                self.updated
                    .into_iter()
                    .map(|u| AllocationEvent::ContainerUpdated {
                        update_type: u.update_type,
                        container: u.container,
                    }),
            )
            .chain(
                self.update_errors
                    .into_iter()
                    .map(|error| AllocationEvent::ContainerUpdateFailed { error }),
            )
            .chain(self.idle_gpus.into_iter().map(AllocationEvent::IdleGpus))
            .chain(self.completed.into_iter().map(AllocationEvent::Completed))
            .chain(self.nodes.into_iter().map(AllocationEvent::NodeUpdated))
    }
}

/// One thing the RM told the AM, as [`AmRmClient::events`] yields them.
#[derive(Debug, Clone)]
pub enum AllocationEvent {
    Allocated(Container),
    Completed(ContainerStatus),
    NodeUpdated(NodeReport),
    Gang(GangStatus),
    /// The RM takes these containers back: checkpoint and give them back before
    /// `deadline_ms` (ms since the epoch), when the RM kills what is left with -102
    /// (PREEMPTED). Told once per newly noticed container.
    Preempted {
        containers: Vec<ContainerId>,
        deadline_ms: u64,
        gang_ids: Vec<String>,
    },
    /// The RM grew the elastic gang `gang_id` from `from` to `to` members: `containers` are
    /// granted and belong to the gang. Accept by starting them (typically after restarting
    /// the whole gang at `to`), decline with [`AmRmClient::decline_offer`]. Told once.
    ResizeOffered {
        gang_id: String,
        containers: Vec<Container>,
        from: u32,
        to: u32,
    },
    /// The RM shrinks the elastic gang `gang_id` from `from` to `to`: give `containers` back
    /// ([`AmRmClient::release_members`]) by `deadline_ms` (ms since the epoch), when the RM
    /// kills what is left with -102 (the gang goes on at `to`). Told once per demand, although
    /// the RM repeats it until the containers are gone.
    ResizeDemanded {
        gang_id: String,
        containers: Vec<ContainerId>,
        from: u32,
        to: u32,
        deadline_ms: u64,
    },
    /// The RM resized a container as asked ([`AmRmClient::request_container_update`]; an
    /// increase may come some heartbeats later): `container` is at its new `version` and
    /// `resource`, with a new `container_token`. The running container does not change until
    /// the AM hands that token to its NM: [`crate::nm_client::NmClient::update_container`]
    /// (or `update_containers`). The SDK does not do it by itself, so that the AM decides
    /// when (after a decrease, the process should already fit the smaller size).
    ContainerUpdated {
        update_type: ContainerUpdateType,
        container: Container,
    },
    /// The RM refused an update (`error.reason` says why, e.g.
    /// `INCORRECT_CONTAINER_VERSION_ERROR`; `error.current_container_version` is the version
    /// to ask from).
    ContainerUpdateFailed {
        error: UpdateContainerError,
    },
    /// The RM says this container's GPUs have been idle since `idle_since_ms`, longer than
    /// its queue's `gpu-idle-timeout-ms` (`gpu-idle-action=notify`): the AM may checkpoint
    /// and release it, or put it to work. Told once per idle spell.
    IdleGpus(spindle_common::records::am::IdleGpuContainer),
}

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
            .chain(m.contract.iter().flat_map(|c| c.container.iter()))
            .map(|c| c.id);
        let mut fresh = Vec::new();
        for id in listed {
            if self.noticed.insert(id) {
                fresh.push(id);
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

    /// Waits [`AmRmClient::next_interval`], then [`AmRmClient::poll`].
    pub async fn tick(&mut self) -> Result<AllocationEvents, AmError> {
        tokio::time::sleep(self.next_interval()).await;
        self.poll().await
    }

    /// The next single event: one left from the last heartbeat, else heartbeats (at
    /// [`AmRmClient::next_interval`]) until something happens. A failed heartbeat is
    /// returned as the error; calling again retries.
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

    /// The heartbeats as a `futures::Stream` of single events, for incremental asks: add
    /// requests, then take grants and completions as they come (see `docs/sdk.md`). The
    /// stream borrows the client; drop it to change the asks (nothing queued is lost) and
    /// make a new one. After [`AmError::Shutdown`] or [`AmError::NotRegistered`] it ends;
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

#[cfg(test)]
mod tests {
    use spindle_common::ids::{ApplicationAttemptId, ApplicationId, NodeId};

    use super::*;

    fn res(mb: i64) -> Resource {
        Resource::new(mb, 1)
    }

    fn asks(t: &AskTable) -> Vec<(String, i32, i32, bool)> {
        t.changes()
            .into_iter()
            .map(|r| {
                (
                    r.resource_name,
                    r.priority,
                    r.num_containers,
                    r.relax_locality,
                )
            })
            .collect()
    }

    fn container(seq: u64, priority: i32, mb: i64, node: &str) -> Container {
        let att = ApplicationAttemptId::new(ApplicationId::new(1, 1), 1);
        let node_id: NodeId = node.parse().unwrap();
        Container {
            id: ContainerId::new(att, 0, seq),
            node_http_address: node.to_string(),
            node_id,
            resource: ResourceInfo::from(&res(mb)),
            priority,
            container_token: String::new(),
            execution_type: "GUARANTEED".into(),
            allocation_request_id: 0,
            version: 0,
        }
    }

    #[test]
    fn absolute_counts_and_only_changes_are_sent() {
        let mut t = AskTable::new();
        for _ in 0..3 {
            t.add(ContainerRequest::new(res(256), 0)).unwrap();
        }
        assert_eq!(asks(&t), vec![("*".into(), 0, 3, true)]);
        let sent = t.changes();
        t.commit(&sent);
        assert!(t.changes().is_empty());
        assert_eq!(t.outstanding(), 3);

        // Another priority is a separate key; only it changes.
        t.add(ContainerRequest::new(res(512), 1)).unwrap();
        assert_eq!(asks(&t), vec![("*".into(), 1, 1, true)]);
        let sent = t.changes();
        t.commit(&sent);

        // Removing sends the new absolute count, and zero when the key empties.
        assert!(t.remove(&ContainerRequest::new(res(256), 0)));
        assert!(t.remove(&ContainerRequest::new(res(512), 1)));
        assert_eq!(
            asks(&t),
            vec![("*".into(), 0, 2, true), ("*".into(), 1, 0, true)]
        );
        let sent = t.changes();
        t.commit(&sent);
        assert!(t.changes().is_empty());
        assert!(!t.remove(&ContainerRequest::new(res(512), 1)));
        assert_eq!(t.outstanding(), 2);
    }

    #[test]
    fn add_then_remove_before_sending_sends_nothing() {
        let mut t = AskTable::new();
        let r = ContainerRequest::new(res(256), 0);
        t.add(r.clone()).unwrap();
        t.remove(&r);
        assert!(t.changes().is_empty());
    }

    #[test]
    fn hosts_and_racks_get_entries_with_yarn_relax_rules() {
        let mut t = AskTable::new();
        let r = ContainerRequest::new(res(256), 2)
            .nodes(["n1:1", "n2:1", "n1:1"])
            .racks(["/r1"])
            .relax_locality(false);
        t.add(r.clone()).unwrap();
        let mut got = asks(&t);
        got.sort();
        assert_eq!(
            got,
            vec![
                ("*".into(), 2, 1, false),
                ("/r1".into(), 2, 1, true),
                ("n1:1".into(), 2, 1, true),
                ("n2:1".into(), 2, 1, true),
            ]
        );
        // A relaxed ask on the same `*` key conflicts.
        let e = t
            .add(ContainerRequest::new(res(256), 2).nodes(["n3:1"]))
            .unwrap_err();
        assert!(matches!(e, AskError::RelaxLocalityMismatch { .. }));
        // Relax=false needs a location.
        assert_eq!(
            t.add(ContainerRequest::new(res(1), 3).relax_locality(false)),
            Err(AskError::RelaxWithoutLocation)
        );
        // A refused request changed nothing.
        assert_eq!(t.requests().len(), 1);
        assert_eq!(t.outstanding(), 1);
    }

    #[test]
    fn different_shapes_need_different_keys() {
        let mut t = AskTable::new();
        t.add(ContainerRequest::new(res(256), 0)).unwrap();
        let e = t.add(ContainerRequest::new(res(512), 0)).unwrap_err();
        assert!(matches!(e, AskError::CapabilityMismatch { .. }), "{e}");
        t.add(ContainerRequest::new(res(512), 0).allocation_request_id(7))
            .unwrap();
        assert_eq!(t.outstanding(), 2);
        assert!(matches!(
            t.add(ContainerRequest::new(Resource::zero(), 0)),
            Err(AskError::BadCapability(_))
        ));
        // Once a key is empty its shape may change.
        t.remove(&ContainerRequest::new(res(256), 0));
        t.add(ContainerRequest::new(res(512), 0)).unwrap();
    }

    #[test]
    fn grants_are_matched_without_resending() {
        let mut t = AskTable::new();
        t.add(ContainerRequest::new(res(256), 0)).unwrap();
        t.add(ContainerRequest::new(res(256), 0).nodes(["h:2"]))
            .unwrap();
        let sent = t.changes();
        t.commit(&sent);
        // A grant on h:2 matches the request naming it.
        let m = t.on_allocated(&container(2, 0, 1024, "h:2")).unwrap();
        assert_eq!(m.nodes, vec!["h:2".to_string()]);
        assert!(t.changes().is_empty(), "{:?}", t.changes());
        assert_eq!(t.outstanding(), 1);
        let key = AskKey {
            priority: 0,
            allocation_request_id: 0,
            resource_name: "h:2".into(),
        };
        assert_eq!(t.num_containers(&key), 0);
        // The next grant takes the last one; a third matches nothing.
        assert!(t.on_allocated(&container(3, 0, 1024, "g:2")).is_some());
        assert!(t.on_allocated(&container(4, 0, 1024, "g:2")).is_none());
        assert_eq!(t.outstanding(), 0);
        assert!(t.changes().is_empty());
        // A later ask on the same key is sent as an absolute 1.
        t.add(ContainerRequest::new(res(256), 0)).unwrap();
        assert_eq!(asks(&t), vec![("*".into(), 0, 1, true)]);
    }

    #[test]
    fn grant_before_the_ask_was_acknowledged_keeps_counts_sane() {
        let mut t = AskTable::new();
        t.add(ContainerRequest::new(res(256), 0)).unwrap();
        t.add(ContainerRequest::new(res(256), 0)).unwrap();
        // Grant arrives although the commit of the ask never happened (e.g. a retried call).
        t.on_allocated(&container(2, 0, 256, "h:1")).unwrap();
        assert_eq!(asks(&t), vec![("*".into(), 0, 1, true)]);
    }

    #[test]
    fn resync_resends_everything() {
        let mut t = AskTable::new();
        t.add(ContainerRequest::new(res(256), 0)).unwrap();
        t.add(ContainerRequest::new(res(256), 4).nodes(["h:1"]))
            .unwrap();
        let sent = t.changes();
        t.commit(&sent);
        t.mark_all_unsent();
        assert_eq!(t.changes().len(), 3);
    }
}
