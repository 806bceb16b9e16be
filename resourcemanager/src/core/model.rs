//! The RM's domain records: applications, attempts, containers and nodes, as the lifecycle
//! layer keeps them. REST views are built from these (by the `rest` module), never the other
//! way round.
//!
//! An application's queue is `AppQueue { Leaf(QueuePath), Refused(String) }`; an attempt's life
//! is `AttemptPhase` (`Scheduled`, `Allocated`, `Launched`, `Running`, `Finishing`, `Ended`),
//! from which YARN's state, the AM's protocol step and a recovered attempt's deadline are
//! read, beside its `AmContainer`; a diagnostic carries its `DiagnosticsKind`, so nothing is
//! decided by reading its text.

use std::collections::{BTreeMap, BTreeSet};

use spindle_common::states::{
    FinalApplicationStatus, NodeState, RmContainerState, YarnApplicationAttemptState,
    YarnApplicationState,
};
use spindle_common::{
    ApplicationAttemptId, ApplicationId, ContainerId, NodeId, QueuePath, Resource,
};

use super::queue_conf::{CapacitySpec, MaxCapacitySpec, OrderingPolicy, QueueState};

/// What the submitter asked for, after validation at the REST edge.
#[derive(Debug, Clone, PartialEq)]
pub struct Submission {
    pub name: String,
    pub queue: String,
    pub user: String,
    pub priority: i32,
    pub application_type: String,
    pub tags: Vec<String>,
    pub am_resource: Resource,
    pub am_launch: LaunchSpec,
    /// 0 means the RM default (`yarn.resourcemanager.am.max-attempts`).
    pub max_app_attempts: u32,
    pub keep_containers: bool,
    pub unmanaged_am: bool,
    /// The submitter's groups, resolved at the edge (ACLs and `g:` queue mappings use them).
    pub groups: Vec<String>,
    /// YARN's `appNodeLabelExpression`: the partition of the application's asks that name
    /// none (else the queue's `default-node-label-expression`).
    pub node_label_expression: Option<String>,
    /// YARN's `amContainerNodeLabelExpression`: the AM container's partition.
    pub am_node_label_expression: Option<String>,
    /// YARN's `LIFETIME` timeout asked for, in seconds from submission (capped by the
    /// queue's maximum; None takes the queue's default).
    pub lifetime_secs: Option<u64>,
    /// Applications that must end (or succeed) before this one is admitted.
    pub dependencies: Vec<Dependency>,
}

/// Slurm's dependency types: what a named application must have done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DependencyKind {
    /// `afterany`: ended, however.
    AfterAny,
    /// `afterok`: finished and succeeded; any other end fails the dependent application.
    AfterOk,
}

impl DependencyKind {
    /// Slurm's (and the submission body's) spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            DependencyKind::AfterAny => "afterany",
            DependencyKind::AfterOk => "afterok",
        }
    }
}

/// One dependency of a submission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dependency {
    pub app: ApplicationId,
    pub kind: DependencyKind,
}

/// What a container runs (YARN's `ContainerLaunchContext`, in the core's terms): the core
/// checks the command and adds its own environment to an AM's; the edges convert.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LaunchSpec {
    /// Joined with spaces and run with `bash -c`, as YARN's launch script does.
    pub commands: Vec<String>,
    pub environment: BTreeMap<String, String>,
    /// Files to localize, by the name they get in the container's directory.
    pub local_resources: BTreeMap<String, LocalResource>,
}

/// A file a container needs (YARN's `LocalResource`); the NM checks and fetches it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalResource {
    pub url: String,
    /// YARN's `LocalResourceType` (`FILE`, `ARCHIVE`, `PATTERN`), as given.
    pub kind: String,
    pub visibility: String,
    pub size: i64,
    pub timestamp: i64,
}

/// Who is asking, for ACL checks: the user from `?user.name=` and their groups.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Caller {
    pub user: String,
    pub groups: Vec<String>,
}

impl Caller {
    pub fn new(user: impl Into<String>, groups: Vec<String>) -> Self {
        Self {
            user: user.into(),
            groups,
        }
    }
}

/// YARN's `QueueACL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueAclType {
    SubmitApplications,
    AdministerQueue,
}

/// A queue as the REST view and the CLI show it.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueView {
    pub path: QueuePath,
    pub name: String,
    pub is_leaf: bool,
    pub parent: Option<QueuePath>,
    pub state: QueueState,
    pub capacity: CapacitySpec,
    pub max_capacity: MaxCapacitySpec,
    pub guaranteed: Resource,
    pub maximum: Resource,
    pub used: Resource,
    pub pending: Resource,
    /// Held on nodes for its waiting gangs (YARN's reserved), its children's included.
    pub reserved: Resource,
    pub am_used: Resource,
    pub am_limit: Resource,
    pub user_am_limit: Resource,
    /// Percents, as YARN's `absoluteCapacity`, `absoluteMaxCapacity`, `absoluteUsedCapacity`
    /// and `usedCapacity` (used over guaranteed).
    pub absolute_capacity: f64,
    pub absolute_max_capacity: f64,
    pub absolute_used_capacity: f64,
    pub used_capacity: f64,
    pub num_applications: usize,
    pub num_active_applications: usize,
    pub num_pending_applications: usize,
    pub num_containers: usize,
    pub max_applications: u32,
    pub max_applications_per_user: u32,
    pub max_parallel_apps: Option<u32>,
    pub user_limit_factor: f64,
    pub minimum_user_limit_percent: f64,
    pub users: Vec<UserView>,
    pub ordering: OrderingPolicy,
    pub default_application_priority: i32,
    /// The queue's application lifetimes (inherited ones included).
    pub lifetime: super::queue_conf::LifetimeLimits,
    pub priority: i32,
    pub acl_submit: String,
    pub acl_admin: String,
    pub max_allocation: Resource,
    pub max_am_resource_percent: f64,
    /// Its accessible labels (`*` for any) and default label expression.
    pub accessible_labels: Vec<String>,
    pub default_label_expression: Option<String>,
    /// Its share and use of each labelled partition.
    pub partitions: BTreeMap<String, super::scheduler::queue_tree::PartShare>,
    /// Whether the preemption monitor may take containers from it.
    pub preemption: PreemptionApplies,
    /// Its users' decayed usage and standing (a leaf's), or its leaves' sums (a parent's).
    pub fairshare: super::scheduler::QueueFairshare,
}

/// Whether preemption applies to a queue, from the configuration: the monitor acts
/// (`yarn.resourcemanager.scheduler.monitor.enable`, not observe-only) and the queue does
/// not set `disable_preemption` (between queues) or `intra-queue-preemption.disable_preemption`
/// (inside it; also off unless the intra-queue policy is enabled).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PreemptionApplies {
    pub inter_queue: bool,
    pub intra_queue: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct UserView {
    pub name: String,
    pub used: Resource,
    pub am_used: Resource,
    pub active_apps: usize,
    pub pending_apps: usize,
    pub user_limit: Resource,
    /// `user-settings.<user>.weight` (YARN's `userWeight`; 1 unless set).
    pub weight: f64,
}

#[derive(Debug, Clone)]
pub struct App {
    pub id: ApplicationId,
    pub sub: Submission,
    /// The queue the app ended in (the submission's, resolved to a leaf path).
    pub queue: AppQueue,
    pub state: YarnApplicationState,
    pub final_status: FinalApplicationStatus,
    pub diagnostics: String,
    /// Which of the core's messages `diagnostics` holds (see [`DiagnosticsKind`]).
    pub diagnostics_kind: DiagnosticsKind,
    pub submit_time: u64,
    pub launch_time: u64,
    pub finish_time: u64,
    pub submit_seq: u64,
    pub attempts: Vec<Attempt>,
    pub max_attempts: u32,
    pub progress: f32,
    pub tracking_url: String,
    /// Resource x time of containers that have ended, in MB-ms and vcore-ms.
    pub memory_ms: i64,
    pub vcore_ms: i64,
    /// Kill requested; the app turns KILLED when its containers are gone (or at a deadline).
    pub killing_since: Option<u64>,
    /// YARN's `LIFETIME` timeout: when (ms, the core's clock) the tick kills the application;
    /// `None` is unlimited. Set with `PUT /apps/{id}/timeout`, kept in the state store.
    pub lifetime: Option<u64>,
    /// Nodes that ran any container of the app, told to clean up once it ends.
    pub nodes_touched: BTreeSet<NodeId>,
    /// What preemption took from it, and its last checkpoint.
    pub preemption: AppPreemption,
    /// Resource x time per type of the containers that ended (`resourceSecondsMap`).
    pub usage: super::usage::AppUsage,
}

/// Where an application's work is saved up to, as its AM reported it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Checkpoint {
    /// When it was written (the AM's clock, ms since the epoch).
    pub time: u64,
    pub step: Option<u64>,
    pub label: Option<String>,
}

/// The application a preemption took containers for, and its queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preemptor {
    pub app: ApplicationId,
    /// Its leaf queue's path, as users see it.
    pub queue: String,
}

/// An application's preemption record (YARN's `preemptedResource*` figures, plus the work
/// lost and how long the AM took from notice to exit).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AppPreemption {
    pub checkpoint: Option<Checkpoint>,
    /// Who the last preemption took its containers for.
    pub preempted_by: Option<Preemptor>,
    /// Units (whole gangs, or single containers) taken back.
    pub preemptions: u32,
    pub containers: u32,
    pub am_containers: u32,
    /// The resources of every preempted container, summed.
    pub resource: Resource,
    pub memory_ms: i64,
    pub vcore_ms: i64,
    /// GPU-milliseconds of work lost (since the last checkpoint, else since the start).
    pub lost_gpu_ms: u64,
    /// GPU-milliseconds the preempted containers had run in all.
    pub gpu_ms: u64,
    /// From notice to the container's exit: the last one, and the longest.
    pub last_notice_to_exit_ms: Option<u64>,
    pub max_notice_to_exit_ms: u64,
}

/// The queue an application is in. It reads as the name users see (`Deref<Target = str>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppQueue {
    /// The leaf it was placed in (moves and reconfigurations keep it current).
    Leaf(QueuePath),
    /// Placement was refused: the queue it was submitted to (after queue mappings), which
    /// need not name a queue, kept for the record.
    Refused(String),
}

impl AppQueue {
    /// The leaf, unless placement was refused.
    pub fn leaf(&self) -> Option<&QueuePath> {
        match self {
            AppQueue::Leaf(p) => Some(p),
            AppQueue::Refused(_) => None,
        }
    }

    /// A queue read back from the state store: a leaf path if it parses as one.
    pub fn recovered(name: String) -> Self {
        match QueuePath::parse(&name) {
            Ok(p) => AppQueue::Leaf(p),
            Err(_) => AppQueue::Refused(name),
        }
    }
}

impl std::ops::Deref for AppQueue {
    type Target = str;
    fn deref(&self) -> &str {
        match self {
            AppQueue::Leaf(p) => p,
            AppQueue::Refused(s) => s,
        }
    }
}

impl PartialEq<&str> for AppQueue {
    fn eq(&self, other: &&str) -> bool {
        **self == **other
    }
}

impl std::fmt::Display for AppQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self)
    }
}

/// What an application's diagnostic is about, so that the core replaces or clears its own
/// passing messages by kind, never by reading their text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DiagnosticsKind {
    /// A message the core never clears by itself (a failure, a recovery note).
    #[default]
    Lasting,
    /// The scheduler's reason why the application is not activated yet.
    NotActivated,
    /// The application is held until the applications it depends on end.
    Dependency,
    /// A gang of the application waits, or gave up softly.
    Gang,
    /// A plain ask of the application waits for room under its queues' maxima.
    AskWaits,
    /// The application is being killed.
    Killed,
    /// Containers of the application hold idle GPUs past their queue's timeout.
    IdleGpu,
    /// The application was recovered after an RM restart and waits for its attempt's AM to
    /// register again (cleared when it does, replaced when the attempt fails).
    Recovered,
}

impl App {
    /// Sets the diagnostic and what it is about.
    pub fn set_diagnostics(&mut self, kind: DiagnosticsKind, text: impl Into<String>) {
        self.diagnostics_kind = kind;
        self.diagnostics = text.into();
    }

    /// Clears the diagnostic if it is a passing message of `kind`.
    pub fn clear_diagnostics(&mut self, kind: DiagnosticsKind) {
        if self.diagnostics_kind == kind {
            self.set_diagnostics(DiagnosticsKind::Lasting, String::new());
        }
    }

    pub fn current_attempt(&self) -> Option<&Attempt> {
        self.attempts.last()
    }
    pub fn current_attempt_mut(&mut self) -> Option<&mut Attempt> {
        self.attempts.last_mut()
    }
    pub fn attempt(&self, id: &ApplicationAttemptId) -> Option<&Attempt> {
        self.attempts.iter().find(|a| a.id == *id)
    }
    pub fn attempt_mut(&mut self, id: &ApplicationAttemptId) -> Option<&mut Attempt> {
        self.attempts.iter_mut().find(|a| a.id == *id)
    }
}

#[derive(Debug, Clone)]
pub struct Attempt {
    pub id: ApplicationAttemptId,
    /// Where the attempt is in its life, with what each step knows ([`Attempt::state`] is
    /// YARN's name for it).
    pub phase: AttemptPhase,
    pub start_time: u64,
    pub finish_time: u64,
    /// The AM container, once allocated.
    pub am: Option<AmContainer>,
    pub host: String,
    pub rpc_port: i32,
    pub response_id: i32,
    /// Last time the AM called the RM (register or allocate), for AM liveness.
    pub last_heard: u64,
    pub next_container_seq: u64,
    /// Every container ever allocated to this attempt, for REST and logs.
    pub containers: BTreeSet<ContainerId>,
    /// Allocated, not yet handed to the AM.
    pub to_deliver: Vec<ContainerId>,
    /// Elastic growth not yet offered to the AM.
    pub offers: Vec<super::ResizeOfferView>,
    /// Container updates applied and refused, not yet told to the AM; increases waiting
    /// for room (with their normalized target).
    pub updated: Vec<super::UpdatedView>,
    pub update_errors: Vec<super::UpdateErrorView>,
    pub pending_increases: Vec<(super::ContainerUpdate, Resource)>,
    /// Completed, not yet told to the AM.
    pub to_report: Vec<super::CompletedContainer>,
    /// Completions told to the AM in its last allocate answer: its next allocate call
    /// acknowledges them (YARN's `finishedContainersSentToAM`).
    pub sent_to_am: Vec<ContainerId>,
    /// Completions an NM reported that it must keep reporting (to this RM and to a restarted
    /// one) until the AM has acknowledged them, with the node to tell then (YARN's
    /// `justFinishedContainers` held back from `containersToBeRemovedFromNm`).
    pub unacked: BTreeMap<ContainerId, NodeId>,
    pub diagnostics: String,
    /// Live containers of earlier attempts handed to this one
    /// (`keep-containers-across-application-attempts`): listed in its register answer
    /// (`containersFromPreviousAttempts`), and their completions are reported to it.
    pub inherited: BTreeSet<ContainerId>,
}

/// An attempt's AM container: set together when it is allocated (or recovered).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmContainer {
    pub id: ContainerId,
    pub node: NodeId,
    pub node_http: String,
}

/// Where an attempt is in its life: YARN's attempt states, each with the data valid in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptPhase {
    /// The AM container is asked for.
    Scheduled,
    /// The AM container is allocated; its NM is being asked to start it.
    Allocated,
    /// The NM started the AM container; the AM has not registered (yet, or again after an
    /// RM restart). A recovered attempt's AM must be reported by its NM by `report_by`, else
    /// the attempt fails.
    Launched { report_by: Option<u64> },
    /// The AM registered.
    Running,
    /// The AM unregistered at `at`; its container is stopped after a grace period. It may
    /// still call allocate meanwhile.
    Finishing { at: u64 },
    /// Over, with how far the AM got.
    Ended {
        end: AttemptEnd,
        registered: bool,
        unregistered_at: Option<u64>,
    },
}

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptEnd {
    Finished,
    Failed,
    Killed,
}

/// The AM's place in the ApplicationMasterProtocol, as a view of the phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmProtocol {
    NotRegistered,
    Registered,
    /// Unregistered (`finish`) at this time.
    Finished {
        at: u64,
    },
}

impl Attempt {
    pub fn am_container(&self) -> Option<ContainerId> {
        self.am.as_ref().map(|a| a.id)
    }
    pub fn am_node(&self) -> Option<&NodeId> {
        self.am.as_ref().map(|a| &a.node)
    }
    pub fn am_node_http(&self) -> Option<&str> {
        self.am.as_ref().map(|a| a.node_http.as_str())
    }
    /// YARN's name for the phase.
    pub fn state(&self) -> YarnApplicationAttemptState {
        use YarnApplicationAttemptState as S;
        match self.phase {
            AttemptPhase::Scheduled => S::SCHEDULED,
            AttemptPhase::Allocated => S::ALLOCATED,
            AttemptPhase::Launched { .. } => S::LAUNCHED,
            AttemptPhase::Running => S::RUNNING,
            AttemptPhase::Finishing { .. } => S::FINISHING,
            AttemptPhase::Ended { end, .. } => match end {
                AttemptEnd::Finished => S::FINISHED,
                AttemptEnd::Failed => S::FAILED,
                AttemptEnd::Killed => S::KILLED,
            },
        }
    }
    pub fn is_ended(&self) -> bool {
        matches!(self.phase, AttemptPhase::Ended { .. })
    }
    /// Where the AM is in the ApplicationMasterProtocol (it keeps its last step once the
    /// attempt has ended).
    pub fn am_protocol(&self) -> AmProtocol {
        match self.phase {
            AttemptPhase::Scheduled | AttemptPhase::Allocated | AttemptPhase::Launched { .. } => {
                AmProtocol::NotRegistered
            }
            AttemptPhase::Running => AmProtocol::Registered,
            AttemptPhase::Finishing { at } => AmProtocol::Finished { at },
            AttemptPhase::Ended {
                registered,
                unregistered_at,
                ..
            } => match (registered, unregistered_at) {
                (_, Some(at)) => AmProtocol::Finished { at },
                (true, None) => AmProtocol::Registered,
                (false, None) => AmProtocol::NotRegistered,
            },
        }
    }
    /// Registered, and not necessarily still (it may have unregistered since).
    pub fn has_registered(&self) -> bool {
        self.am_protocol() != AmProtocol::NotRegistered
    }
    pub fn has_unregistered(&self) -> bool {
        matches!(self.am_protocol(), AmProtocol::Finished { .. })
    }
    pub fn unregistered_at(&self) -> Option<u64> {
        match self.am_protocol() {
            AmProtocol::Finished { at } => Some(at),
            _ => None,
        }
    }
    /// A recovered attempt's deadline for its NM to report the AM container.
    pub fn awaiting_am_until(&self) -> Option<u64> {
        match self.phase {
            AttemptPhase::Launched { report_by } => report_by,
            _ => None,
        }
    }
    /// Ends the attempt `end`, keeping how far its AM got; an ended attempt stays as it is.
    pub fn end(&mut self, end: AttemptEnd) {
        if self.is_ended() {
            return;
        }
        self.phase = AttemptPhase::Ended {
            end,
            registered: self.has_registered(),
            unregistered_at: self.unregistered_at(),
        };
    }
}

#[derive(Debug, Clone)]
pub struct RmContainer {
    pub id: ContainerId,
    pub node: NodeId,
    pub node_http: String,
    pub resource: Resource,
    pub priority: i32,
    pub allocation_request_id: i64,
    pub is_am: bool,
    /// The gang it was granted with, if any.
    pub gang: Option<String>,
    pub state: RmContainerState,
    pub allocated_time: u64,
    pub start_time: u64,
    pub finish_time: u64,
    pub exit_status: i32,
    pub diagnostics: String,
    /// YARN's container version: bumped by every resource update.
    pub version: i32,
    /// When the grant its tokens stand for began: the allocation, or the last update
    /// (a token expires `container-allocation.expiry-interval-ms` after it).
    pub token_from: u64,
    /// Its allocation tags (counted on its node while it lives).
    pub tags: Vec<String>,
    /// The partition its ask was for (`""`: the default).
    pub partition: String,
}

impl RmContainer {
    pub fn is_live(&self) -> bool {
        matches!(
            self.state,
            RmContainerState::NEW
                | RmContainerState::ALLOCATED
                | RmContainerState::ACQUIRED
                | RmContainerState::RUNNING
        )
    }
}

#[derive(Debug, Clone)]
pub struct Node {
    pub id: NodeId,
    pub http_address: String,
    pub rack: String,
    pub state: NodeState,
    pub total: Resource,
    pub version: String,
    pub health_report: String,
    pub last_health_update: u64,
    pub last_heartbeat: u64,
    pub response_id: i32,
    /// Live containers the RM has placed on this node.
    pub containers: BTreeSet<ContainerId>,
    pub to_cleanup: BTreeSet<ContainerId>,
    pub apps_to_cleanup: BTreeSet<ApplicationId>,
    /// Completed containers the RM has recorded; the NM may forget them.
    pub to_ack: BTreeSet<ContainerId>,
    pub mem_used_physical_mb: i64,
    pub cpu_usage: f32,
    /// Attributes the NM reported (`nm.yarn.io/gpu-model`, ...).
    pub attributes: BTreeMap<String, String>,
    /// The container images its NM last said it holds.
    pub images: Vec<super::images::NodeImage>,
    /// Images asked to be pulled ahead of jobs, for its next heartbeat answer.
    pub to_prefetch: BTreeSet<String>,
    /// The last pulls that failed on it (at most [`super::images::MAX_PULL_FAILURES`]).
    pub pull_failures: Vec<super::images::PullFailure>,
    /// A graceful decommission's drain: `Some` exactly while `state` is DECOMMISSIONING.
    pub decommissioning: Option<Decommissioning>,
}

/// A DECOMMISSIONING node's drain (YARN's graceful decommission): it takes no new
/// containers, what runs on it runs on, and it turns DECOMMISSIONED when it is empty or at
/// `deadline`, when what is left is killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decommissioning {
    /// When the drain started (ms).
    pub since: u64,
    /// The timeout it was given (YARN's `decommissioningTimeout`, seconds); `None`: no
    /// deadline (a negative timeout), the node waits for its containers however long.
    pub timeout_secs: Option<u64>,
}

impl Decommissioning {
    /// When what still runs is killed (ms), if ever.
    pub fn deadline(&self) -> Option<u64> {
        self.timeout_secs
            .map(|t| self.since.saturating_add(t.saturating_mul(1000)))
    }
}

/// Everything the RM must not lose about an application, as written to the state store.
#[derive(Debug, Clone)]
pub struct AppRecord {
    pub id: ApplicationId,
    pub sub: Submission,
    pub queue: AppQueue,
    pub state: YarnApplicationState,
    pub final_status: FinalApplicationStatus,
    pub diagnostics: String,
    pub submit_time: u64,
    pub launch_time: u64,
    pub finish_time: u64,
    pub attempts: u32,
    pub memory_ms: i64,
    pub vcore_ms: i64,
    /// The application's `LIFETIME` deadline, if one was set.
    pub lifetime: Option<u64>,
    /// The current attempt while its AM container lives: a restarted RM waits for that AM
    /// (and its containers, as their NMs re-register) instead of starting a new attempt.
    pub live_attempt: Option<AttemptRecord>,
    /// Resource x time per type of the containers that ended (kept in the state store).
    pub usage: super::usage::AppUsage,
}

/// What a restarted RM needs of a live attempt (work-preserving recovery).
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptRecord {
    pub am_container: ContainerId,
    pub am_node: NodeId,
    pub am_node_http: String,
    pub start_time: u64,
    pub host: String,
    pub rpc_port: i32,
    pub tracking_url: String,
}

/// Named things per container id for REST lookups.
pub type ContainerTable = BTreeMap<ContainerId, RmContainer>;
