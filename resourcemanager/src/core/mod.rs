//! The pure core of the ResourceManager: application, attempt, container and node
//! lifecycles around the [`scheduler`]. No I/O, no clock, no async (a test checks this):
//! every input carries the current time, and every side effect is pushed into an outbox
//! ([`Effect`]) that the driver executes (the live one writes SQLite and calls NMs; tests
//! and the simulator just record). The driver owns the one `RmCore` of a running RM.
//!
//! Files: a lifecycle is named for its noun (`apps`, `nodes`, `queues`, `preemption`,
//! `elastic`); the scheduler's view of the same noun is named for that view
//! (`scheduler::node_index`, `queue_tree`, `victims`, `elastic_policy`).

pub mod model;
pub mod queue_conf;
pub mod scheduler;
pub mod shared;

mod am;
mod apps;
mod attempts;
mod check;
mod containers;
pub mod cpu;
mod deadlines;
mod dependencies;
mod elastic;
mod error;
mod idle;
pub mod images;
mod keys;
pub mod labels;
mod nodes;
mod preemption;
mod queues;
mod recovery;
mod resubmission;
mod tick;
mod updates;
pub mod usage;
mod work;

pub use am::{AllocateReply, Allocation, AskUpdate, CompletedContainer, GangView};
pub use apps::{KillOutcome, LIFETIME_EXCEEDED};
pub use cpu::{
    CpuAsk, CpuConf, CpuCounters, CpuCurve, CpuPolicy, CpuPolicyError, CpuRange, VcoresAsk,
};
pub use elastic::{
    ElasticConf, ElasticCounters, ElasticState, Resize, ResizeDemandView, ResizeOfferView,
};
pub use error::{CoreError, RefusalClass, ReinitRefusal, ONLY_ADMINS};
pub use idle::{
    AppGpuUse, ContainerGpuUse, ContainerIdle, GpuSample, IdleGpuEvent, IdleGpuNotice,
    IgnoredGpuUse,
};
pub use keys::activation_delay_ms;
pub use nodes::{
    DecommissionType, HeartbeatReply, HostLists, NodeAction, NodeRefused, NodeRegistration,
    NodesRefreshed, ReportedContainer,
};
pub use preemption::{
    AmReport, Notice, NoticedContainer, PreemptionConf, PreemptionCounters, PreemptionNotice,
    PreemptionState, Reason,
};
pub use updates::{ContainerUpdate, UpdateErrorView, UpdateKind, UpdateRefusal, UpdatedView};
pub use work::WorkCounts;

#[cfg(test)]
pub(crate) mod tests;

use std::collections::{BTreeMap, BTreeSet};

use spindle_common::env as cenv;
use spindle_common::states::{
    exit_status, ContainerState, FinalApplicationStatus, NodeState, RmContainerState,
    YarnApplicationAttemptState as AttemptState, YarnApplicationState as AppState,
};
use spindle_common::token::{self, AmRmKey, ContainerKey, ContainerTokenIdentifier};
use spindle_common::{
    ApplicationAttemptId, ApplicationId, ContainerId, NodeId, QueuePath, Resource,
};

pub use model::*;
use queue_conf::{QueueMapping, QueueState, SchedulerConf};
use scheduler::{Ask, AskKey, Scheduler};
pub use shared::SharedMap;

/// How long a killed application waits for its containers before it is declared KILLED.
const KILL_DEADLINE_MS: u64 = 10_000;
/// YARN's request priority for the AM container ask.
const AM_PRIORITY: i32 = 0;
/// How long an unregistered AM may keep running before the RM stops its container.
const AM_EXIT_GRACE_MS: u64 = 5_000;

/// Settings of the core, already validated by the RM's config layer.
#[derive(Debug, Clone)]
pub struct CoreConfig {
    pub min_allocation: Resource,
    pub max_allocation: Resource,
    pub heartbeat_interval_ms: u64,
    pub nm_expiry_ms: u64,
    pub am_expiry_ms: u64,
    pub am_max_attempts: u32,
    pub container_alloc_expiry_ms: u64,
    pub max_completed_apps: usize,
    /// `http://host:port` that AMs use to reach this RM; set once the RM has bound its port.
    pub rm_address: String,
    /// The capacity scheduler's queues and policies.
    pub scheduler: SchedulerConf,
    /// How long a gang may wait when its AM names no timeout
    /// (`spindle.scheduler.gang.timeout-ms`).
    pub gang_timeout_ms: u64,
    /// The preemption monitor (`yarn.resourcemanager.monitor.capacity.preemption.*`).
    pub preemption: PreemptionConf,
    /// Elastic gangs' resizing (`spindle.elastic.*`).
    pub elastic: ElasticConf,
    /// GPU containers' CPUs (`spindle.scheduler.cpu-policy*`).
    pub cpu: CpuConf,
    /// `yarn.node-labels.configuration-type=distributed`: NMs report their own partition.
    pub distributed_labels: bool,
}

impl CoreConfig {
    /// YARN's defaults with one `root.default` queue; for tests and the simulator.
    pub fn for_tests() -> Self {
        Self {
            min_allocation: Resource::new(128, 1),
            max_allocation: Resource::new(8192, 8),
            heartbeat_interval_ms: 1000,
            nm_expiry_ms: 600_000,
            am_expiry_ms: 600_000,
            am_max_attempts: 2,
            container_alloc_expiry_ms: 600_000,
            max_completed_apps: 1000,
            rm_address: "http://127.0.0.1:8088".into(),
            scheduler: SchedulerConf::single_default_queue(),
            gang_timeout_ms: DEFAULT_GANG_TIMEOUT_MS,
            preemption: PreemptionConf::default(),
            elastic: ElasticConf::default(),
            cpu: CpuConf::default(),
            distributed_labels: false,
        }
    }
}

/// A gang's default wait before its timeout applies: ten minutes, YuniKorn's placeholder
/// default is fifteen.
pub const DEFAULT_GANG_TIMEOUT_MS: u64 = 600_000;

/// What the core asks the outside world to do, in order.
#[derive(Debug, Clone)]
pub enum Effect {
    /// Write the application's record to the state store (before the caller is answered).
    PersistApp(Box<AppRecord>),
    /// Drop an evicted application from the state store.
    ForgetApp(ApplicationId),
    /// Have the NM start an AM container; the driver reports back with [`RmCore::am_launched`].
    LaunchAm {
        attempt: ApplicationAttemptId,
        container: ContainerId,
        node_http: String,
        /// The RM-signed token the NM checks before it starts the container.
        container_token: String,
        /// The submission's launch context with the core's environment added (RM address,
        /// AM-RM token, attempt id, submit time, max attempts).
        launch: LaunchSpec,
    },
    /// Containers now wait for this attempt's AM to pull them with its next allocate call
    /// (emitted when its delivery list turns non-empty). The live RM has nothing to do, its
    /// AMs poll; the simulator (`spindle sls`) wakes the AM with it instead of polling.
    ContainersAllocated(ApplicationAttemptId),
    /// The preemption monitor sent this attempt's AM a notice, which its next allocate
    /// answer carries. The live RM has nothing to do; the simulator wakes the AM.
    PreemptionNotice(ApplicationAttemptId),
    /// Write these users' decayed usage to the state store (after a container ended, and
    /// once per fair-share calc period for users with running containers).
    PersistFairshare(Vec<scheduler::FairshareRecord>),
}

/// Counters that outlive the applications they count (`/metrics`).
#[derive(Debug, Clone, Default)]
pub struct Counters {
    pub apps_submitted: u64,
    pub apps_completed: u64,
    pub apps_failed: u64,
    pub apps_killed: u64,
    pub containers_allocated: u64,
    /// Running containers taken back from re-registering NMs after an RM restart.
    pub containers_recovered: u64,
}

pub struct RmCore {
    conf: CoreConfig,
    cluster_ts: u64,
    epoch: u32,
    /// The AM-RM master key and the container-token master keys (`keys`).
    keys: keys::TokenKeys,
    next_app: u32,
    /// The cluster timestamps of earlier incarnations of this RM (an RM restarted, or the
    /// other RM of an HA pair) that the store holds applications of: their ids were issued.
    earlier_incarnations: BTreeSet<u64>,
    next_submit_seq: u64,
    // Persistent maps: the driver's read snapshot shares them instead of copying them.
    apps: SharedMap<ApplicationId, App>,
    /// The final applications still kept, oldest finish first: what eviction takes from
    /// (`max-completed-applications`) without scanning every application.
    completed: BTreeSet<(u64, ApplicationId)>,
    /// Applications' `LIFETIME` deadlines, soonest first (see `apps::expire_lifetimes`); an
    /// entry whose application ended or changed its deadline is dropped when it comes due.
    lifetimes: BTreeSet<(u64, ApplicationId)>,
    /// ACCEPTED applications held out of the scheduler for their dependencies (see
    /// `dependencies`): looked at again whenever an application ends.
    held: BTreeSet<ApplicationId>,
    /// Set by recovery: the next tick looks at the held applications again, once every
    /// application has been recovered.
    held_recheck: bool,
    /// Containers allocated but not yet running (ALLOCATED, ACQUIRED), oldest allocation
    /// first: what the allocation expiry looks at (`tick`), without walking every container.
    awaiting_launch: BTreeSet<(u64, ContainerId)>,
    /// The nodes that carry a drain (`Node::decommissioning`): what the tick's end of drains
    /// looks at, without walking every node.
    draining: BTreeSet<NodeId>,
    /// Active nodes by a heartbeat time no later than their last one: the liveness check
    /// looks only at nodes whose recorded time is older than the expiry, and puts a node
    /// that did beat since back at its newest time (YARN's liveness monitor, per node).
    node_liveness: deadlines::Deadlines<NodeId>,
    /// Applications by the earliest time something may come due for them (`tick::app_due`:
    /// their AM's liveness, a recovered AM's report deadline, an unregistered AM's exit
    /// grace, a kill to finish). The tick looks only at those due, and puts one whose AM was
    /// heard since back at its newest deadline; each change that may bring a deadline
    /// closer arms it (`watch_app`).
    am_watch: deadlines::Deadlines<ApplicationId>,
    /// Per node, its RUNNING containers: what a heartbeat that no longer reports one must
    /// find, without looking up every container the node holds.
    running_on: BTreeMap<NodeId, BTreeSet<ContainerId>>,
    nodes: SharedMap<NodeId, Node>,
    containers: SharedMap<ContainerId, RmContainer>,
    sched: Scheduler,
    effects: Vec<Effect>,
    counters: Counters,
    /// Notices out, and the monitor's schedule and counters.
    preemption: PreemptionState,
    /// The elastic policy's schedule and counters.
    elastic: ElasticState,
    /// Ranged GPU containers' CPUs: the CPU policy's books.
    cpu: cpu::CpuState,
    /// Bumped on every change, so the driver republishes its read snapshot only when needed.
    version: u64,
    /// Labels and centrally set attributes (what the store keeps).
    labels: labels::NodeLabels,
    /// Partitions NMs reported (distributed label configuration).
    reported_labels: BTreeMap<NodeId, String>,
    /// The include and exclude host lists (`refreshNodes`).
    hosts: nodes::HostLists,
    /// Sampled GPU use and the idle-GPU policy's state.
    idle: idle::IdleState,
}

impl RmCore {
    /// A core whose first container-token master key is derived from `amrm` (tests, the
    /// simulator); the daemon uses [`RmCore::with_container_key`] with a random one.
    pub fn new(conf: CoreConfig, cluster_ts: u64, epoch: u32, amrm: AmRmKey) -> Self {
        let first = ContainerKey::derive(&amrm, cluster_ts, epoch);
        Self::with_container_key(conf, cluster_ts, epoch, amrm, first)
    }

    /// A core that signs AM-RM tokens with `amrm` (the stored key) and container tokens with
    /// `container` (fresh at every RM start).
    pub fn with_container_key(
        conf: CoreConfig,
        cluster_ts: u64,
        epoch: u32,
        amrm: AmRmKey,
        container: ContainerKey,
    ) -> Self {
        let mut sched = Scheduler::new(conf.scheduler.clone(), conf.min_allocation.clone());
        sched.set_cpu_conf(conf.cpu.clone());
        Self {
            conf,
            cluster_ts,
            epoch,
            keys: keys::TokenKeys::new(amrm, container),
            next_app: 1,
            earlier_incarnations: BTreeSet::new(),
            next_submit_seq: 1,
            apps: SharedMap::new(),
            completed: BTreeSet::new(),
            lifetimes: BTreeSet::new(),
            held: BTreeSet::new(),
            held_recheck: false,
            awaiting_launch: BTreeSet::new(),
            draining: BTreeSet::new(),
            node_liveness: deadlines::Deadlines::default(),
            am_watch: deadlines::Deadlines::default(),
            running_on: BTreeMap::new(),
            nodes: SharedMap::new(),
            containers: SharedMap::new(),
            sched,
            effects: Vec::new(),
            counters: Counters::default(),
            preemption: PreemptionState::default(),
            elastic: ElasticState::default(),
            cpu: cpu::CpuState::default(),
            version: 0,
            labels: labels::NodeLabels::default(),
            reported_labels: BTreeMap::new(),
            hosts: nodes::HostLists::default(),
            idle: idle::IdleState::default(),
        }
    }

    pub fn conf(&self) -> &CoreConfig {
        &self.conf
    }

    pub fn set_rm_address(&mut self, addr: String) {
        self.conf.rm_address = addr;
    }

    pub fn cluster_timestamp(&self) -> u64 {
        self.cluster_ts
    }

    pub fn apps(&self) -> &SharedMap<ApplicationId, App> {
        &self.apps
    }

    pub fn nodes(&self) -> &SharedMap<NodeId, Node> {
        &self.nodes
    }

    pub fn containers(&self) -> &SharedMap<ContainerId, RmContainer> {
        &self.containers
    }

    /// The waits (ms) of the gangs granted since the last call (the driver's `/metrics`
    /// histogram; the core keeps at most `GANG_WAITS_KEPT` between calls).
    pub fn take_gang_waits(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.sched.stats.gang_waits_ms)
    }

    pub fn scheduler(&self) -> &Scheduler {
        &self.sched
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    pub fn version(&self) -> u64 {
        self.version
    }

    /// Takes the effects emitted since the last call, in order.
    pub fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.effects)
    }

    fn changed(&mut self) {
        self.version += 1;
    }
}
