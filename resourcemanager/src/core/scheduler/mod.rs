//! The capacity scheduler: a queue tree with guarantees and maxima, users with limits,
//! applications with YARN's desired-state asks, and a node index. Pure: it is told about
//! nodes, applications, asks and releases, and answers with placements; the lifecycle layer
//! ([`super::RmCore`]) turns placements into containers.
//!
//! One pass ([`Scheduler::schedule`]) places one container at a time, each time choosing
//! the most under-served queue (used over guaranteed by the resource calculator, then the
//! queue's priority) down to a leaf, the first application in the leaf's order (FIFO by
//! application priority then submission, or fair: least used first) whose user is within its
//! limit, its first ask (by request priority) that fits the queue's maximum on every level,
//! and a node by the index's policy, honouring locality with YARN's delay scheduling. A pass
//! runs after every event (an ask, a node joining or a container ending), so an allocation
//! never waits for a heartbeat. A leaf, a user or an ask shape that cannot be served is
//! skipped for the rest of the pass, which bounds a pass's cost on a full cluster.
//!
//! The pass serves each labelled partition by the queues' shares of it, then the default
//! partition, which may borrow non-exclusive partitions' idle room.

mod activation;
mod asks;
mod by_partition;
mod counts;
pub mod cpu_policy;
pub mod decayed_usage;
mod doubling;
pub mod elastic_policy;
mod fair_queues;
pub mod fair_victims;
pub mod fairshare;
pub mod feasible;
pub mod gang;
mod gang_turn;
pub mod gpu_cpus;
mod image_holders;
mod las;
pub mod node_index;
mod pass;
pub mod placement;
pub mod preemptors;
pub mod queue_tree;
mod resume;
pub mod topology;
mod victim_plan;
pub mod victims;
pub mod wait_reason;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use spindle_common::{ApplicationId, NodeId, Resource};

use super::queue_conf::{Calculator, OrderingPolicy, SchedulerConf};
pub use fairshare::{AppPlace, FairWait, FairshareRecord, QueueFairshare, UserFairshare};
pub use las::Service;
pub use node_index::{NodeIndex, SchedNode};
use queue_tree::{max_each, min_each, ratio, scale, sum_within, within};
pub use queue_tree::{Queue, QueueIdx, QueueTree, UserUsage};

/// (YARN request priority, allocationRequestId): the key of a desired-state ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct AskKey {
    pub priority: i32,
    pub allocation_request_id: i64,
}

/// The desired state for one [`AskKey`]: how many containers are still wanted anywhere
/// (`any`), on given hosts and racks, and whether the ask may fall back from them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    pub capability: Resource,
    pub any: u32,
    pub relax_locality: bool,
    pub hosts: BTreeMap<String, u32>,
    pub racks: BTreeMap<String, u32>,
    /// The application's AM container ask.
    pub is_am: bool,
    /// Scheduling opportunities passed up waiting for locality (delay scheduling).
    pub missed: u32,
    /// The gang this ask belongs to: placed only together with the gang's other asks.
    pub gang: Option<String>,
    /// The partition (node label) its containers must run in; `""` is the default one.
    pub partition: String,
    /// Allocation tags of its containers.
    pub tags: Vec<String>,
    /// Where its containers may go besides room and partition.
    pub constraint: Option<placement::Constraint>,
    /// The container image its containers run in: nodes holding it are tried first.
    pub image: Option<String>,
}

impl Ask {
    pub fn new(capability: Resource, n: u32) -> Self {
        Self {
            capability,
            any: n,
            relax_locality: true,
            hosts: BTreeMap::new(),
            racks: BTreeMap::new(),
            is_am: false,
            missed: 0,
            gang: None,
            partition: String::new(),
            tags: Vec::new(),
            constraint: None,
            image: None,
        }
    }
    fn has_hosts(&self) -> bool {
        self.hosts.values().any(|c| *c > 0)
    }
    fn has_racks(&self) -> bool {
        self.racks.values().any(|c| *c > 0)
    }
}

#[derive(Debug, Clone)]
pub struct SchedApp {
    /// The leaf queue's index in the tree.
    pub queue: QueueIdx,
    pub user: String,
    pub priority: i32,
    pub submit_seq: u64,
    pub asks: BTreeMap<AskKey, Ask>,
    pub used: Resource,
    pub containers: usize,
    pub am_resource: Resource,
    /// Activated: counted against max-parallel-apps and the AM limit, may be scheduled.
    pub active: bool,
    /// Gangs by id.
    pub gangs: BTreeMap<String, gang::Gang>,
    /// What it has attained so far (the `las` ordering's measure).
    pub service: Service,
    /// Its application tags (what `app-tag/` constraints name).
    pub tags: BTreeSet<String>,
    /// Its wait for its next container (the `fairshare` ordering's age bound).
    pub wait: FairWait,
    order: Option<(i64, u64)>,
    /// The partitions where it, active, asks for GPU containers, as counted in
    /// `Scheduler::gpu_asking` (see [`gpu_cpus`]).
    gpu_parts: smallvec::SmallVec<[String; 1]>,
}

/// One decision: place a container of `resource` for `app`'s ask `key` on `node`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub app: ApplicationId,
    pub key: AskKey,
    pub node: NodeId,
    pub resource: Resource,
    pub is_am: bool,
    /// Set for members of a gang (all of which are in the same pass's placements).
    pub gang: Option<String>,
    /// The container's allocation tags (counted on its node until it ends).
    pub tags: Vec<String>,
    /// The partition its ask was for (a default-partition container on a node of a
    /// non-exclusive partition is lent room, taken back when that partition needs it).
    pub partition: String,
}

#[derive(Debug, Clone)]
pub struct Scheduler {
    conf: SchedulerConf,
    min_alloc: Resource,
    tree: QueueTree,
    nodes: NodeIndex,
    apps: BTreeMap<ApplicationId, Box<SchedApp>>,
    /// Per queue: schedulable applications in its subtree (to skip idle branches quickly).
    demand: Vec<usize>,
    /// Per (leaf, user): the user's schedulable applications there ("active users").
    active_users: BTreeMap<(QueueIdx, String), usize>,
    /// Containers wanted, by shape, over every ask: a pass ends as soon as every wanted
    /// shape is known not to fit anywhere.
    shapes: BTreeMap<Resource, u64>,
    /// The AM containers among them, by shape (AM asks are exempt from the cores free GPUs
    /// keep, so a shape refused only for those never stands for theirs).
    am_shapes: BTreeMap<Resource, u64>,
    /// Plans of waiting gangs this pass may still make (`gang.max-plans-per-pass`).
    gang_plans_left: u32,
    /// Per partition and leaf, where the leaf's next visit starts: after the applications
    /// the scheduler found it cannot serve, kept across passes while nothing that could
    /// make them servable happened (see `resume`).
    resumes: resume::Resumes,
    /// Work counters of the passes so far (for benchmarks and diagnosis).
    pub stats: PassStats,
    /// The caller's clock, as last told ([`Scheduler::set_now`]).
    now: u64,
    /// Applications of `las` leaves holding GPUs by when they cross their next threshold,
    /// and waiting ones by when they are due for promotion.
    las_cross: BTreeSet<(u64, ApplicationId)>,
    las_cross_at: BTreeMap<ApplicationId, u64>,
    las_promote: BTreeSet<(u64, ApplicationId)>,
    /// Users' decayed usage per leaf and the `fairshare` ordering's bookkeeping.
    fs: fairshare::FairState,
    /// The cluster's labels and whether each is exclusive.
    labels: BTreeMap<String, bool>,
    /// The CPU policy (what a node keeps for its free GPUs: `gpu_cpus`).
    cpu: cpu_policy::CpuConf,
    /// Per partition, whether GPU asks wait there, worked out at most once a pass.
    /// Per partition, the active applications asking for GPU containers there, kept as
    /// asks change (whether CPU-only work must leave cores to free GPUs, [`gpu_cpus`]).
    gpu_asking: gpu_cpus::GpuAsking,
    /// The last `find_node` found nothing only because of cores kept for free GPUs.
    kept_back: bool,
}

/// What scheduling passes did: how many, and how much work they took.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PassStats {
    pub passes: u64,
    pub leaves_served: u64,
    pub apps_visited: u64,
    pub node_searches: u64,
    pub failed_searches: u64,
    pub placements: u64,
    /// Gangs placed whole.
    pub gangs_placed: u64,
    /// Gang plans made (each a walk over candidate nodes).
    pub gang_plans: u64,
    /// Partitions a pass served (one per labelled partition and the default, per pass).
    pub partitions_walked: u64,
    /// How long each gang granted since the driver last took them had waited (ms, from its
    /// round's `since` to the grant; at most [`GANG_WAITS_KEPT`], the oldest kept).
    pub gang_waits_ms: Vec<u64>,
}

/// The most gang waits [`PassStats::gang_waits_ms`] keeps until the driver takes them.
pub const GANG_WAITS_KEPT: usize = 4096;

/// How serving one leaf ended.
enum Served {
    Placed(Vec<Placement>),
    /// Nothing more for this leaf in this pass.
    LeafDone,
    /// No wanted shape fits anywhere: the pass is over.
    PassDone,
}

impl Scheduler {
    pub fn new(conf: SchedulerConf, min_alloc: Resource) -> Self {
        let tree = QueueTree::build(&conf.root);
        let n = tree.queues.len();
        let mut s = Self {
            conf,
            nodes: NodeIndex::new(min_alloc.clone()),
            min_alloc,
            tree,
            apps: BTreeMap::new(),
            demand: vec![0; n],
            active_users: BTreeMap::new(),
            shapes: BTreeMap::new(),
            am_shapes: BTreeMap::new(),
            gang_plans_left: 0,
            resumes: resume::Resumes::default(),
            stats: PassStats::default(),
            now: 0,
            las_cross: BTreeSet::new(),
            las_cross_at: BTreeMap::new(),
            las_promote: BTreeSet::new(),
            fs: fairshare::FairState::default(),
            labels: BTreeMap::new(),
            cpu: cpu_policy::CpuConf::default(),
            gpu_asking: gpu_cpus::GpuAsking::new(),
            kept_back: false,
        };
        // Absolute capacities (and so `maximum-applications`) are known before any node
        // registers: a fresh cluster accepts submissions, which wait for nodes.
        s.recompute();
        s
    }

    fn count_shape(&mut self, cap: &Resource, n: u32, up: bool, is_am: bool) {
        if n == 0 {
            return;
        }
        count_in(&mut self.shapes, cap, n, up);
        if is_am {
            count_in(&mut self.am_shapes, cap, n, up);
        }
    }

    /// The CPU policy, for the cores nodes keep for their free GPUs.
    pub fn set_cpu_conf(&mut self, cpu: cpu_policy::CpuConf) {
        self.cpu = cpu;
    }

    pub fn conf(&self) -> &SchedulerConf {
        &self.conf
    }

    pub fn tree(&self) -> &QueueTree {
        &self.tree
    }

    pub fn nodes(&self) -> &NodeIndex {
        &self.nodes
    }

    pub fn node(&self, id: &NodeId) -> Option<&SchedNode> {
        self.nodes.by_id(id)
    }

    pub fn apps(&self) -> &BTreeMap<ApplicationId, Box<SchedApp>> {
        &self.apps
    }

    pub fn app(&self, id: &ApplicationId) -> Option<&SchedApp> {
        self.apps.get(id).map(|a| &**a)
    }

    pub fn cluster(&self) -> &Resource {
        &self.nodes.cluster
    }

    pub fn calculator(&self) -> Calculator {
        self.conf.calculator
    }

    pub fn add_node(&mut self, id: NodeId, rack: String, total: Resource, used: Resource) {
        self.nodes.add(id, rack, total, used);
        self.recompute();
    }

    /// Records a node's GPU model (from its `nm.yarn.io/gpu-model` attribute).
    pub fn set_gpu_model(&mut self, id: &NodeId, model: Option<String>) {
        self.nodes.set_gpu_model(id, model);
    }

    pub fn set_node_attributes(&mut self, id: &NodeId, attributes: BTreeMap<String, String>) {
        self.nodes.set_attributes(id, attributes);
    }

    /// The container images a node holds (names and digests): asks naming one prefer it.
    pub fn set_node_images(&mut self, id: &NodeId, images: BTreeSet<String>) {
        self.nodes.set_images(id, images);
    }

    /// The cluster's label set (name to exclusivity); nodes' partitions must be in it.
    pub fn set_labels(&mut self, labels: BTreeMap<String, bool>) {
        self.labels = labels;
        self.nodes.room_changed();
        self.recompute();
    }

    pub fn labels(&self) -> &BTreeMap<String, bool> {
        &self.labels
    }

    /// `partition` and, for the default partition, each non-exclusive partition that lends
    /// it idle room: where an ask of `partition` may be placed.
    pub fn with_lenders<'a>(&'a self, partition: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        let lending = self
            .labels
            .iter()
            .filter(move |(l, exclusive)| partition.is_empty() && !**exclusive && !l.is_empty())
            .map(|(l, _)| l.as_str());
        std::iter::once(partition).chain(lending)
    }

    /// Moves a node into `partition` (`""`: the default); what runs there is accounted to
    /// its queues in the new partition from now on.
    pub fn set_partition(&mut self, id: &NodeId, partition: &str) {
        let Some((old, apps)) = self.nodes.set_partition(id, partition) else {
            return;
        };
        for (app, r) in apps {
            let Some(leaf) = self.apps.get(&app).map(|a| a.queue) else {
                continue;
            };
            self.tree.charge_partition(leaf, &old, &r, false);
            self.tree.charge_partition(leaf, partition, &r, true);
        }
        self.recompute();
    }

    /// Records an application's tags (from its submission).
    pub fn set_app_tags(&mut self, id: &ApplicationId, tags: BTreeSet<String>) {
        if let Some(a) = self.apps.get_mut(id) {
            a.tags = tags;
        }
    }

    /// Counts (or stops counting) a container's allocation tags on its node.
    pub fn tag(&mut self, app: &ApplicationId, node: &NodeId, tags: &[String], up: bool) {
        if tags.is_empty() {
            return;
        }
        if let Some(slot) = self.nodes.slot(node) {
            self.tag_slot(app, slot, tags, up);
        }
    }

    /// [`Self::tag`] on the node in `slot`.
    pub(super) fn tag_slot(&mut self, app: &ApplicationId, slot: usize, tags: &[String], up: bool) {
        if tags.is_empty() {
            return;
        }
        let app_tags = self
            .apps
            .get(app)
            .map(|a| a.tags.clone())
            .unwrap_or_default();
        self.nodes.tag(slot, app, &app_tags, tags, up);
    }

    pub fn remove_node(&mut self, id: &NodeId) -> Option<SchedNode> {
        let n = self.nodes.remove(id);
        self.recompute();
        n
    }

    pub fn set_schedulable(&mut self, id: &NodeId, schedulable: bool) {
        self.nodes.set_schedulable(id, schedulable);
        self.recompute();
    }

    /// A DECOMMISSIONING node drains (`true`) or is recommissioned (`false`).
    pub fn set_draining(&mut self, id: &NodeId, draining: bool) {
        self.nodes.set_draining(id, draining);
        self.recompute();
    }

    /// Forgets where leaves' walks resume (see `resume`): the next pass walks everything.
    #[cfg(test)]
    pub(crate) fn forget_resumes(&mut self) {
        self.resumes.forget();
    }

    fn recompute(&mut self) {
        let cluster = self.nodes.partition_total(placement::DEFAULT_PARTITION);
        self.tree.compute_capacities(&cluster);
        let labelled: BTreeMap<String, Resource> = self
            .labels
            .keys()
            .map(|l| (l.clone(), self.nodes.partition_total(l)))
            .collect();
        self.tree.compute_partitions(&labelled);
        self.nodes.room_changed();
    }

    /// Outstanding containers and resources over all asks (the cluster's pending figures).
    pub fn pending(&self) -> (u64, Resource) {
        let mut n = 0u64;
        let mut r = Resource::zero();
        for a in self.apps.values() {
            for ask in a.asks.values() {
                n += u64::from(ask.any);
                r.add_assign(&ask.capability.times(i64::from(ask.any)));
            }
        }
        (n, r)
    }

    /// Pending resources per queue (leaves and, summed, parents).
    pub fn pending_by_queue(&self) -> Vec<Resource> {
        let mut out = vec![Resource::zero(); self.tree.queues.len()];
        for a in self.apps.values() {
            let mut p = Resource::zero();
            for ask in a.asks.values() {
                p.add_assign(&ask.capability.times(i64::from(ask.any)));
            }
            if p.is_zero() {
                continue;
            }
            for q in self.tree.path_up(a.queue) {
                out[q].add_assign(&p);
            }
        }
        out
    }

    /// The scheduler's own invariants: no node over-allocated, no negative usage, every
    /// queue's usage the sum of its children's (or its applications'), within its maximum.
    pub fn check(&self) -> Result<(), String> {
        self.nodes.check()?;
        for n in self.nodes.iter() {
            if !n.used.fits_in(&n.total) || n.used.any_negative() {
                return Err(format!(
                    "node {} used {} exceeds total {}",
                    n.id, n.used, n.total
                ));
            }
        }
        let mut shapes: BTreeMap<Resource, u64> = BTreeMap::new();
        let mut am_shapes: BTreeMap<Resource, u64> = BTreeMap::new();
        for a in self.apps.values() {
            for ask in a.asks.values().filter(|x| x.any > 0 && x.gang.is_none()) {
                *shapes.entry(ask.capability.clone()).or_insert(0) += u64::from(ask.any);
                if ask.is_am {
                    *am_shapes.entry(ask.capability.clone()).or_insert(0) += u64::from(ask.any);
                }
            }
        }
        let gpu_asking = gpu_cpus::count_asking(self.apps.values().map(|a| &**a));
        if gpu_asking != self.gpu_asking {
            return Err(format!(
                "applications asking for GPUs by partition {:?} differ from the asks {:?}",
                self.gpu_asking, gpu_asking
            ));
        }
        if shapes != self.shapes || am_shapes != self.am_shapes {
            return Err(format!(
                "wanted shapes {:?} (AMs {:?}) differ from the asks {:?} (AMs {:?})",
                self.shapes, self.am_shapes, shapes, am_shapes
            ));
        }
        let mut sums = vec![Resource::zero(); self.tree.queues.len()];
        for (id, a) in &self.apps {
            if a.used.any_negative() {
                return Err(format!("app {id} has negative usage {}", a.used));
            }
            sums[a.queue].add_assign(&a.used);
        }
        for i in (0..self.tree.queues.len()).rev() {
            let q = &self.tree.queues[i];
            if !q.is_leaf() {
                let s = q.children.iter().fold(Resource::zero(), |acc, c| {
                    acc.plus(&self.tree.queues[*c].used)
                });
                sums[i] = s;
            }
            if q.used != sums[i] {
                return Err(format!(
                    "queue {} accounts {} but its contents sum to {}",
                    q.spec.path, q.used, sums[i]
                ));
            }
        }
        Ok(())
    }
}

/// Counts `n` containers of shape `cap` into (or out of) `shapes`.
fn count_in(shapes: &mut BTreeMap<Resource, u64>, cap: &Resource, n: u32, up: bool) {
    if up {
        *shapes.entry(cap.clone()).or_insert(0) += u64::from(n);
    } else if let Some(c) = shapes.get_mut(cap) {
        *c = c.saturating_sub(u64::from(n));
        if *c == 0 {
            shapes.remove(cap);
        }
    }
}
