//! Gangs: asks granted whole or not at all. A gang is every ask of one application naming
//! the same gang id. Each pass tries to place a waiting gang on the nodes free now, by its
//! placement policy; if it does not fit, the gang reserves the nodes it will use as they
//! drain, and no other ask is placed there, so the gang's wait is bounded by the running
//! time of what those nodes already run. Pure, like the rest of the scheduler. Where the
//! members would go is [`plan`]'s (the planner, in `gang/plan.rs`).

use std::collections::{BTreeMap, BTreeSet};

use spindle_common::resource::GPU;
use spindle_common::{ApplicationId, ContainerId, NodeId, Resource};

use super::node_index::NodeIndex;
use super::queue_tree::QueueIdx;
use super::{AskKey, Scheduler};

mod plan;
pub use plan::{describe, per_node, plan, plan_models, Plan, Unit};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GangPolicy {
    #[default]
    Pack,
    StrictPack,
    Spread,
    SameRack,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GangPhase {
    Pending,
    Reserved,
    Allocated,
    TimedOut,
    Failed,
    /// The preemption monitor took it back whole; the AM asks again.
    Preempted,
}

impl GangPhase {
    pub fn is_waiting(&self) -> bool {
        matches!(self, Self::Pending | Self::Reserved)
    }
}

/// What an AM asks of a gang (its allocate call's `gang` object, converted at the edge).
/// The core completes it with what the ask itself says ([`GangRequest::with_ask`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GangRequest {
    pub policy: GangPolicy,
    /// At most this many nodes (0: no limit; STRICT_PACK without one means 1).
    pub max_nodes: u32,
    /// 0: the scheduler's default.
    pub timeout_ms: u64,
    /// Fail the application at the timeout (else withdraw the asks and tell the AM).
    pub hard: bool,
    /// Only nodes whose GPUs are of this model.
    pub gpu_model: Option<String>,
    /// Every node of the gang has GPUs of one model.
    pub same_gpu_model: bool,
    /// Set for an elastic gang (one ask, whose count is the maximum).
    pub elastic: Option<super::elastic_policy::ElasticSpec>,
    /// All members in one domain of a topology level (required or preferred).
    pub domain: Option<super::topology::Domain>,
}

impl GangRequest {
    /// The gang's parameters: the request, and the partition, tags and placement
    /// constraint of the ask that carries it.
    pub fn with_ask(
        self,
        partition: String,
        tags: Vec<String>,
        constraint: Option<super::placement::Constraint>,
    ) -> GangParams {
        GangParams {
            policy: self.policy,
            max_nodes: self.max_nodes,
            timeout_ms: self.timeout_ms,
            hard: self.hard,
            gpu_model: self.gpu_model,
            same_gpu_model: self.same_gpu_model,
            elastic: self.elastic,
            domain: self.domain,
            partition,
            tags,
            constraint,
            image: None,
        }
    }
}

/// What the scheduler places a gang by: the AM's [`GangRequest`] with its ask's partition,
/// tags and constraint.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GangParams {
    pub policy: GangPolicy,
    /// At most this many nodes (0: no limit; STRICT_PACK without one means 1).
    pub max_nodes: u32,
    /// 0: the scheduler's default.
    pub timeout_ms: u64,
    /// Fail the application at the timeout (else withdraw the asks and tell the AM).
    pub hard: bool,
    /// Only nodes whose GPUs are of this model.
    pub gpu_model: Option<String>,
    /// Every node of the gang has GPUs of one model.
    pub same_gpu_model: bool,
    /// Set for an elastic gang (one ask, whose count is the maximum).
    pub elastic: Option<super::elastic_policy::ElasticSpec>,
    /// All members in one domain of a topology level (required or preferred).
    pub domain: Option<super::topology::Domain>,
    /// The partition (node label) every member runs in; `""` is the default.
    pub partition: String,
    /// The members' allocation tags.
    pub tags: Vec<String>,
    /// Where every member may go (checked node by node, with the tags already there).
    pub constraint: Option<super::placement::Constraint>,
    /// The members' container image: a plan on nodes that hold it is tried first.
    pub image: Option<String>,
}

/// A gang's life in the scheduler.
#[derive(Debug, Clone, PartialEq)]
pub struct Gang {
    pub params: GangParams,
    /// When the current round of asking began (for the timeout).
    pub since: u64,
    pub phase: GangPhase,
    pub reserved: Vec<NodeId>,
    pub diagnostics: String,
    /// Containers granted in the current round.
    pub members: Vec<ContainerId>,
    pub failed: Vec<ContainerId>,
    /// Containers the gang asks for in all (last known).
    pub size: u32,
    /// What the reservation holds against the queue (YARN's reserved containers).
    pub reserved_need: Resource,
    /// Set when the AM must hear of a state change (TIMED_OUT, FAILED, ALLOCATED).
    pub changed: bool,
    /// The node index's room epoch when the gang last failed to be placed: until it
    /// changes (or the gang's asks do) trying again cannot succeed, so a pass skips it.
    pub missed_at: Option<u64>,
    /// Members the last plan on free room placed (for the reason it waits).
    pub last_fit: usize,
    /// What the gang needs, when its last turn found no room for it under a maximum on its
    /// queue path (the typed reason, [`super::wait_reason::WaitReason`], is made from it
    /// when read).
    pub short_of_room: Option<Resource>,
    /// An elastic gang's sizing state, from its first grant on.
    pub elastic: Option<super::elastic_policy::Elastic>,
    /// A waiting elastic gang of a `doubling` leaf: the size the policy admitted it at.
    pub admitted: Option<u32>,
}

impl Gang {
    pub fn new(params: GangParams, now: u64) -> Self {
        Self {
            params,
            since: now,
            phase: GangPhase::Pending,
            reserved: Vec::new(),
            diagnostics: String::new(),
            members: Vec::new(),
            failed: Vec::new(),
            size: 0,
            reserved_need: Resource::zero(),
            changed: false,
            missed_at: None,
            last_fit: 0,
            short_of_room: None,
            elastic: None,
            admitted: None,
        }
    }
}

/// The owner of a reservation.
pub type Holder = (ApplicationId, String);

/// The scheduler's side of gangs: registering one, its members, timeouts, reservations,
/// and the whole-or-nothing placement (`try_gang`).
impl Scheduler {
    /// Registers (or renews) a gang: a new round of asking starts when the gang is new or
    /// its last round ended (allocated, timed out, failed).
    pub fn set_gang(&mut self, app: &ApplicationId, id: &str, params: GangParams, now: u64) {
        let Some(a) = self.apps.get_mut(app) else {
            return;
        };
        match a.gangs.get_mut(id) {
            Some(g) if g.phase.is_waiting() => {
                g.params = params;
                g.missed_at = None;
            }
            // A running elastic gang is resized by offers and demands, not by asking again.
            Some(g) if g.elastic.is_some() && !g.members.is_empty() => {}
            _ => {
                a.gangs.insert(id.to_string(), Gang::new(params, now));
            }
        }
    }

    pub fn gang(&self, app: &ApplicationId, id: &str) -> Option<&Gang> {
        self.apps.get(app).and_then(|a| a.gangs.get(id))
    }

    /// Records a granted member's container.
    pub fn gang_member(&mut self, app: &ApplicationId, id: &str, c: spindle_common::ContainerId) {
        if let Some(g) = self.apps.get_mut(app).and_then(|a| a.gangs.get_mut(id)) {
            g.members.push(c);
        }
    }

    /// A member ended; a failure (non-zero exit, lost node) turns the gang FAILED.
    pub fn gang_member_ended(
        &mut self,
        app: &ApplicationId,
        id: &str,
        c: spindle_common::ContainerId,
        failed: bool,
    ) {
        if let Some(g) = self.apps.get_mut(app).and_then(|a| a.gangs.get_mut(id)) {
            if failed && g.members.contains(&c) && !g.failed.contains(&c) {
                g.failed.push(c);
                g.phase = GangPhase::Failed;
                g.changed = true;
            }
        }
    }

    /// A member was taken back by the preemption monitor: the gang is PREEMPTED (whole, as
    /// every live member is under the same notice).
    pub fn gang_member_preempted(
        &mut self,
        app: &ApplicationId,
        id: &str,
        c: spindle_common::ContainerId,
    ) {
        if let Some(g) = self.apps.get_mut(app).and_then(|a| a.gangs.get_mut(id)) {
            if g.members.contains(&c) && g.phase != GangPhase::Preempted {
                g.phase = GangPhase::Preempted;
                g.changed = true;
            }
        }
    }

    /// Ends every waiting gang older than its timeout: soft ones withdraw their asks and
    /// turn TIMED_OUT; hard ones are returned for the caller to fail their application
    /// (`monitor`: the preemption monitor acts, for the reason given).
    pub fn expire_gangs(
        &mut self,
        now: u64,
        default_timeout_ms: u64,
        monitor: bool,
    ) -> Vec<(ApplicationId, String, bool, String)> {
        let mut expired = Vec::new();
        for (app, a) in &self.apps {
            for (id, g) in &a.gangs {
                let t = if g.params.timeout_ms > 0 {
                    g.params.timeout_ms
                } else {
                    default_timeout_ms
                };
                if g.phase.is_waiting() && now.saturating_sub(g.since) > t {
                    let diag = format!(
                        "gang {id} timed out after {t} ms: {}",
                        self.gang_diagnostics(app, id, monitor)
                    );
                    expired.push((*app, id.clone(), g.params.hard, diag));
                }
            }
        }
        for (app, id, _, diag) in &expired {
            self.withdraw_gang(app, id);
            if let Some(g) = self.apps.get_mut(app).and_then(|a| a.gangs.get_mut(id)) {
                g.phase = GangPhase::TimedOut;
                g.diagnostics = diag.clone();
                g.reserved.clear();
                g.changed = true;
            }
        }
        expired
    }

    /// Removes a gang's asks and frees its reservation.
    pub(super) fn withdraw_gang(&mut self, app: &ApplicationId, id: &str) {
        let keys: Vec<AskKey> = self
            .apps
            .get(app)
            .map(|a| {
                a.asks
                    .iter()
                    .filter(|(_, x)| x.gang.as_deref() == Some(id))
                    .map(|(k, _)| *k)
                    .collect()
            })
            .unwrap_or_default();
        if let Some(a) = self.apps.get_mut(app) {
            for k in keys {
                a.asks.remove(&k);
            }
        }
        self.unreserve(app, id);
        self.refresh_order(app);
    }

    /// The other gangs of the leaf that hold nodes.
    fn leaf_holders(&self, app: &ApplicationId, id: &str, leaf: QueueIdx) -> BTreeSet<Holder> {
        self.nodes
            .reservations()
            .values()
            .filter(|h| !(h.0 == *app && h.1 == id))
            .filter(|h| self.apps.get(&h.0).is_some_and(|a| a.queue == leaf))
            .cloned()
            .collect()
    }

    /// Where an application stands in its leaf's order (None: not waiting to be served).
    fn rank(&self, app: &ApplicationId) -> Option<(i64, u64, ApplicationId)> {
        self.apps
            .get(app)
            .and_then(|a| a.order)
            .map(|(k, s)| (k, s, *app))
    }

    /// Whether `other` comes before `app` in their leaf's order.
    fn ahead(&self, other: &ApplicationId, app: &ApplicationId) -> bool {
        match (self.rank(other), self.rank(app)) {
            (Some(o), Some(m)) => o < m,
            (_, None) => true,
            (None, Some(_)) => false,
        }
    }

    /// Whether gang `id` of `app` may hold nodes: fewer than the leaf's
    /// `gang.max-reservations` gangs of the leaf ahead of it in the leaf's order hold some
    /// (one behind it gives way: [`Self::give_way`]).
    pub(super) fn may_hold(&self, app: &ApplicationId, id: &str, leaf: QueueIdx) -> bool {
        let ahead = self
            .leaf_holders(app, id, leaf)
            .iter()
            .filter(|h| self.ahead(&h.0, app))
            .count();
        ahead < self.tree.queues[leaf].spec.gang_max_reservations as usize
    }

    /// What the leaf's holders behind gang `id` of `app` hold.
    pub(super) fn held_behind(&self, app: &ApplicationId, id: &str, leaf: QueueIdx) -> Resource {
        self.leaf_holders(app, id, leaf)
            .iter()
            .filter(|h| !self.ahead(&h.0, app))
            .filter_map(|h| self.apps.get(&h.0).and_then(|a| a.gangs.get(&h.1)))
            .fold(Resource::zero(), |acc, g| acc.plus(&g.reserved_need))
    }

    /// Makes room under `gang.max-reservations` for a gang that came ahead in line (a higher
    /// priority, a lower `las` level): the leaf's holders last in order give their nodes up.
    pub(super) fn give_way(&mut self, app: &ApplicationId, id: &str, leaf: QueueIdx) {
        let max = self.tree.queues[leaf].spec.gang_max_reservations as usize;
        let mut behind: Vec<((i64, u64, ApplicationId), Holder)> = Vec::new();
        let mut count = 0;
        for h in self.leaf_holders(app, id, leaf) {
            count += 1;
            if !self.ahead(&h.0, app) {
                let r = self.rank(&h.0).unwrap_or((i64::MAX, u64::MAX, h.0));
                behind.push((r, h));
            }
        }
        behind.sort();
        while count >= max {
            let Some((_, h)) = behind.pop() else { break };
            self.unreserve(&h.0, &h.1);
            if let Some(g) = self.apps.get_mut(&h.0).and_then(|a| a.gangs.get_mut(&h.1)) {
                g.phase = GangPhase::Pending;
                g.missed_at = None;
            }
            count -= 1;
        }
    }

    pub(super) fn unreserve(&mut self, app: &ApplicationId, id: &str) {
        let held: Vec<usize> = self
            .nodes
            .reservations()
            .iter()
            .filter(|(_, h)| h.0 == *app && h.1 == id)
            .map(|(s, _)| *s)
            .collect();
        for slot in held {
            self.nodes.reserve(slot, None);
        }
        let Some(a) = self.apps.get_mut(app) else {
            return;
        };
        let leaf = a.queue;
        let Some(g) = a.gangs.get_mut(id) else { return };
        g.reserved.clear();
        let need = std::mem::take(&mut g.reserved_need);
        if !need.is_zero() {
            // What the gang held against its queues' maxima is theirs again.
            self.nodes.room_changed();
        }
        for q in self.tree.path_up(leaf).collect::<Vec<_>>() {
            self.tree.queues[q].reserved.sub_assign(&need);
        }
    }

    pub(super) fn release_reservations(&mut self, app: &ApplicationId) {
        let ids: Vec<String> = self
            .apps
            .get(app)
            .map(|a| a.gangs.keys().cloned().collect())
            .unwrap_or_default();
        for id in ids {
            self.unreserve(app, &id);
        }
    }
}
