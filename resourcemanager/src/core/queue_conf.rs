//! The capacity scheduler's configuration as typed data: what `capacity-scheduler.xml`
//! (and the `scheduler-conf` mutation API) describe, already parsed and validated by
//! `crate::config::capacity`. The scheduler core consumes it; nothing here reads files.

use std::collections::{BTreeMap, BTreeSet};

use spindle_common::config::keys;
use spindle_common::{QueuePath, Resource};

/// `<qp>.capacity` in YARN's three forms.
#[derive(Debug, Clone, PartialEq)]
pub enum CapacitySpec {
    /// Percent of the parent's guaranteed resources, e.g. `12.5`.
    Percent(f64),
    /// An absolute vector, e.g. `[memory=10240,vcores=12,yarn.io/gpu=8]`.
    Absolute(Resource),
    /// A weight such as `2w`: a share of what the parent has left after absolute and
    /// percent siblings, in proportion to the sibling weights.
    Weight(f64),
}

/// `<qp>.maximum-capacity`: percent of the parent's maximum (default 100), or absolute.
#[derive(Debug, Clone, PartialEq)]
pub enum MaxCapacitySpec {
    Percent(f64),
    Absolute(Resource),
}

/// A YARN ACL: `"user1,user2 group1,group2"`, `*` for everyone, a single space for no one.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Acl {
    pub all: bool,
    pub users: BTreeSet<String>,
    pub groups: BTreeSet<String>,
}

impl Acl {
    pub fn everyone() -> Self {
        Self {
            all: true,
            ..Default::default()
        }
    }
    pub fn nobody() -> Self {
        Self::default()
    }
    pub fn allows(&self, user: &str, groups: &[String]) -> bool {
        self.all || self.users.contains(user) || groups.iter().any(|g| self.groups.contains(g))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueState {
    Running,
    Stopped,
}

impl QueueState {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Running => "RUNNING",
            Self::Stopped => "STOPPED",
        }
    }
}

/// `<qp>.ordering-policy` of a leaf.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderingPolicy {
    /// By application priority (higher first), then submission order.
    Fifo,
    /// The application using least (dominant share) first, ties by submission.
    Fair,
    /// Least attained service (Tiresias's discretized 2D-LAS): applications in levels by
    /// the GPU-seconds they have used ([`LasSpec::thresholds_gpu_s`]), the lowest level
    /// first, FIFO within one; a long wait promotes back to the first level.
    Las,
    /// Fair share with memory (Slurm's multifactor fair share, Fair Tree within one leaf):
    /// applications by their user's decayed usage over the user's share (`user-settings.<u>.weight`),
    /// least attained service among one user's own; one that waited
    /// [`FairshareSpec::max_wait_ms`] goes ahead of every other that has not.
    Fairshare,
}

impl OrderingPolicy {
    /// Every leaf ordering, by name.
    pub const ALL: [OrderingPolicy; 4] = [Self::Fifo, Self::Fair, Self::Las, Self::Fairshare];

    /// The policy `name` (`fifo`, `fair`, `las`, `fairshare`) names.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == name)
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Fifo => "fifo",
            Self::Fair => "fair",
            Self::Las => "las",
            Self::Fairshare => "fairshare",
        }
    }
}

/// `<qp>.elastic-policy` of a leaf: how its elastic gangs are sized.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ElasticPolicy {
    /// Granted the largest legal size that fits when placed; never grown; shrunk toward
    /// their minimum before a rigid gang is preempted.
    #[default]
    None,
    /// The dynamic-scheduling study's doubling heuristic: every elastic job its minimum
    /// first (shrinking others for it), then doublings by time saved per added GPU.
    Doubling,
    /// The same doublings, but a waiting job is started (and others shrunk for it) only
    /// when that saves more time per GPU than growing the running ones: on jobs that
    /// scale almost linearly it runs fewer jobs wider.
    DoublingByGain,
    /// Each round, the rule that suits the leaf's jobs: `doubling`'s (every job its minimum
    /// first) when they scale sublinearly (at their maximum size, less than
    /// [`SUBLINEAR_EFFICIENCY`] of their per-GPU throughput at their minimum), by gain
    /// otherwise. No worse than the best fixed allocation on either of the study's tables.
    DoublingAdaptive,
}

/// Below this ratio of per-GPU throughput (at the maximum size against the minimum), a
/// leaf's elastic jobs scale sublinearly: running more of them narrower clears the work
/// faster than running fewer wider, and `doubling-adaptive` starts every job at its minimum.
/// The study's measured table is at 0.86 (near linear), its implied one at 0.57.
pub const SUBLINEAR_EFFICIENCY: f64 = 0.75;

impl ElasticPolicy {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Doubling => "doubling",
            Self::DoublingByGain => "doubling-by-gain",
            Self::DoublingAdaptive => "doubling-adaptive",
        }
    }

    /// A leaf whose elastic jobs the doubling round sizes.
    pub fn is_doubling(&self) -> bool {
        matches!(
            self,
            Self::Doubling | Self::DoublingByGain | Self::DoublingAdaptive
        )
    }
}

/// The `fairshare` ordering's per-leaf settings.
#[derive(Debug, Clone, PartialEq)]
pub struct FairshareSpec {
    /// `<qp>.user-settings.<user>.weight`: each named user's share (default 1; 0 is none).
    pub user_weights: BTreeMap<String, f64>,
    /// `<qp>.ordering-policy.fairshare.max-wait-ms`: an application that has waited this
    /// long for its next container goes ahead of every one that has not (0: never).
    pub max_wait_ms: u64,
}

impl FairshareSpec {
    /// The share of `user` in this leaf.
    pub fn weight(&self, user: &str) -> f64 {
        self.user_weights.get(user).copied().unwrap_or(1.0)
    }
}

impl Default for FairshareSpec {
    fn default() -> Self {
        Self {
            user_weights: BTreeMap::new(),
            max_wait_ms: keys::DEFAULT_CS_QUEUE_FAIRSHARE_MAX_WAIT_MS,
        }
    }
}

/// The cluster's fair-share accounting (yarn-site, fixed for the RM's life).
#[derive(Debug, Clone, PartialEq)]
pub struct FairshareConf {
    /// `spindle.scheduler.fairshare.billing-weights` (Slurm's `TRESBillingWeights`): billing
    /// units per unit of each resource type per second.
    pub billing: BillingWeights,
    /// `spindle.scheduler.fairshare.decay-half-life-ms` (Slurm's `PriorityDecayHalfLife`);
    /// 0: usage never decays.
    pub half_life_ms: u64,
    /// `spindle.scheduler.fairshare.calc-period-ms` (Slurm's `PriorityCalcPeriod`): how often
    /// users' places in `fairshare` leaves follow the usage of their running containers.
    pub calc_period_ms: u64,
}

impl Default for FairshareConf {
    fn default() -> Self {
        Self {
            billing: BillingWeights::default(),
            half_life_ms: 7 * 86_400_000,
            calc_period_ms: 300_000,
        }
    }
}

/// Billing units per unit of a resource type per second (`yarn.io/gpu=1.0,...`).
#[derive(Debug, Clone, PartialEq)]
pub struct BillingWeights(pub BTreeMap<String, f64>);

impl Default for BillingWeights {
    fn default() -> Self {
        Self(
            [
                ("yarn.io/gpu", 1.0),
                ("vcores", 0.01),
                ("memory-mb", 0.000_001),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        )
    }
}

impl BillingWeights {
    /// Billing units per second that `r` costs while held.
    pub fn per_second(&self, r: &Resource) -> f64 {
        self.0
            .iter()
            .map(|(name, w)| w * r.get(name).max(0) as f64)
            .sum()
    }
}

/// The `las` ordering's levels.
#[derive(Debug, Clone, PartialEq)]
pub struct LasSpec {
    /// Ascending attained-service thresholds in GPU-seconds: level k holds applications
    /// with at least `thresholds[k-1]` and less than `thresholds[k]`.
    pub thresholds_gpu_s: Vec<u64>,
    /// A waiting application that has waited this many times its attained running time
    /// returns to level 0 (0 disables promotion).
    pub promotion_factor: f64,
}

impl Default for LasSpec {
    fn default() -> Self {
        Self {
            thresholds_gpu_s: vec![3600, 36_000],
            promotion_factor: 4.0,
        }
    }
}

impl LasSpec {
    /// The level of an application that has attained `service_gpu_ms`.
    pub fn level(&self, service_gpu_ms: u64) -> u8 {
        let s = service_gpu_ms / 1000;
        self.thresholds_gpu_s
            .iter()
            .take_while(|t| s >= **t)
            .count() as u8
    }
}

/// `resource-calculator`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Calculator {
    /// `DefaultResourceCalculator`: memory only.
    Memory,
    /// `DominantResourceCalculator`: the dominant share over every type.
    Dominant,
}

/// One queue of the tree, with every property already resolved to a value (defaults and
/// inheritance applied by the parser, except ACLs, which the scheduler checks up the tree
/// with YARN's OR semantics).
#[derive(Debug, Clone, PartialEq)]
pub struct QueueSpec {
    /// Full path, `root.a.b`.
    pub path: QueuePath,
    /// Short name, YARN's `queueName`.
    pub name: String,
    pub capacity: CapacitySpec,
    pub max_capacity: MaxCapacitySpec,
    pub state: QueueState,
    /// `<qp>.user-limit-factor`; -1 disables (a user may use the queue's maximum).
    pub user_limit_factor: f64,
    /// `<qp>.minimum-user-limit-percent`, 1..=100.
    pub minimum_user_limit_percent: f64,
    /// `<qp>.maximum-applications`; None derives it from the global value and the queue's
    /// absolute capacity, as YARN does.
    pub max_applications: Option<u32>,
    /// `<qp>.max-parallel-apps`; None is unlimited.
    pub max_parallel_apps: Option<u32>,
    /// `<qp>.maximum-am-resource-percent` as a fraction (0.1 = 10%).
    pub max_am_resource_percent: f64,
    /// `<qp>.maximum-allocation-mb` / `-vcores` (and extended types): per-container cap.
    pub max_allocation: Option<Resource>,
    /// `<qp>.acl_submit_applications`; None inherits (root's default is everyone).
    pub acl_submit: Option<Acl>,
    /// `<qp>.acl_administer_queue`; None inherits (root's default is everyone).
    pub acl_admin: Option<Acl>,
    pub ordering: OrderingPolicy,
    /// `<qp>.backfill`: false serves the leaf strictly in order (its first waiting
    /// application blocks the ones after it).
    pub backfill: bool,
    /// `<qp>.gang.max-reservations` (>= 1): waiting gangs of the leaf that may hold nodes.
    pub gang_max_reservations: u32,
    /// `<qp>.disable_preemption` (inherited): the monitor takes nothing from this queue.
    pub disable_preemption: bool,
    /// `<qp>.intra-queue-preemption.disable_preemption` (inherited).
    pub intra_queue_disable_preemption: bool,
    /// The `las` ordering's levels (used when `ordering` is `Las`).
    pub las: LasSpec,
    /// The `fairshare` ordering's shares and wait bound (used when `ordering` is `Fairshare`).
    pub fairshare: FairshareSpec,
    /// `<qp>.elastic-policy` (leaves; inherited).
    pub elastic: ElasticPolicy,
    /// `<qp>.default-application-priority`.
    pub default_application_priority: i32,
    /// `<qp>.default-application-lifetime` / `maximum-application-lifetime` (inherited).
    pub lifetime: LifetimeLimits,
    /// `<qp>.priority`: among siblings equally under-served, the higher goes first.
    pub priority: i32,
    /// `<qp>.accessible-node-labels`: None inherits the parent's (root: any).
    pub accessible_labels: Option<AccessibleLabels>,
    /// `<qp>.accessible-node-labels.<label>.capacity` / `.maximum-capacity`, in percent of
    /// the parent's share of that partition.
    pub label_capacities: BTreeMap<String, LabelCapacity>,
    /// `<qp>.default-node-label-expression`: the partition of asks that name none.
    pub default_label_expression: Option<String>,
    /// `<qp>.gpu-idle-timeout-ms`, `-action`, `-threshold-percent` (inherited).
    pub gpu_idle: GpuIdlePolicy,
    pub children: Vec<QueueSpec>,
}

/// What a queue does about containers that hold GPUs and do not use them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuIdlePolicy {
    /// How long a container's GPUs may stay below the threshold before `action`; 0 is off.
    pub timeout_ms: u64,
    pub action: GpuIdleAction,
    /// A GPU below this utilization (percent) is idle.
    pub threshold_percent: f64,
}

impl Default for GpuIdlePolicy {
    fn default() -> Self {
        Self {
            timeout_ms: 0,
            action: GpuIdleAction::Report,
            threshold_percent: 5.0,
        }
    }
}

/// `<qp>.gpu-idle-action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuIdleAction {
    /// The application's diagnostics and the RM's log name the container.
    Report,
    /// Its AM hears of it in the allocate answer.
    Notify,
    /// The RM stops the container.
    Release,
}

impl GpuIdleAction {
    pub fn as_str(self) -> &'static str {
        match self {
            GpuIdleAction::Report => "report",
            GpuIdleAction::Notify => "notify",
            GpuIdleAction::Release => "release",
        }
    }
}

/// Which partitions (node labels) a queue may use; the default partition always.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessibleLabels {
    /// `*`.
    Any,
    /// A list (empty: the default partition only, YARN's ` `).
    Only(std::collections::BTreeSet<String>),
}

impl AccessibleLabels {
    pub fn allows(&self, label: &str) -> bool {
        label.is_empty()
            || match self {
                AccessibleLabels::Any => true,
                AccessibleLabels::Only(s) => s.contains(label),
            }
    }
}

/// A queue's share of one partition, in percent of its parent's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LabelCapacity {
    pub capacity: f64,
    pub max_capacity: f64,
}

impl QueueSpec {
    /// A leaf or parent with YARN's defaults.
    pub fn new(path: QueuePath, capacity: CapacitySpec) -> Self {
        Self {
            name: path.leaf_name().to_string(),
            path,
            capacity,
            max_capacity: MaxCapacitySpec::Percent(100.0),
            state: QueueState::Running,
            user_limit_factor: 1.0,
            minimum_user_limit_percent: 100.0,
            max_applications: None,
            max_parallel_apps: None,
            max_am_resource_percent: 0.1,
            max_allocation: None,
            acl_submit: None,
            acl_admin: None,
            ordering: OrderingPolicy::Fifo,
            backfill: true,
            gang_max_reservations: 1,
            disable_preemption: false,
            intra_queue_disable_preemption: false,
            las: LasSpec::default(),
            fairshare: FairshareSpec::default(),
            elastic: ElasticPolicy::None,
            default_application_priority: 0,
            lifetime: LifetimeLimits::default(),
            priority: 0,
            accessible_labels: None,
            label_capacities: BTreeMap::new(),
            default_label_expression: None,
            gpu_idle: GpuIdlePolicy::default(),
            children: Vec::new(),
        }
    }

    pub fn is_leaf(&self) -> bool {
        self.children.is_empty()
    }

    pub fn find(&self, path_or_name: &str) -> Option<&QueueSpec> {
        if *self.path == *path_or_name || self.name == path_or_name {
            return Some(self);
        }
        self.children.iter().find_map(|c| c.find(path_or_name))
    }

    /// Every queue, depth first, parents before children.
    pub fn walk(&self) -> Vec<&QueueSpec> {
        let mut out = vec![self];
        for c in &self.children {
            out.extend(c.walk());
        }
        out
    }
}

/// `queue-mappings` entries, first match wins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueMapping {
    /// `u:<user>:<queue>`; `user` may be `%user` (any user); `queue` may be `%user` or
    /// `%primary_group`.
    User { user: String, queue: String },
    /// `g:<group>:<queue>`.
    Group { group: String, queue: String },
}

/// Everything the capacity scheduler is configured with.
#[derive(Debug, Clone, PartialEq)]
pub struct SchedulerConf {
    pub root: QueueSpec,
    pub calculator: Calculator,
    /// `yarn.scheduler.capacity.maximum-applications` (10000).
    pub max_applications: u32,
    /// `yarn.scheduler.capacity.maximum-am-resource-percent` (0.1).
    pub max_am_resource_percent: f64,
    /// `yarn.scheduler.capacity.max-parallel-apps` for every queue without its own.
    pub max_parallel_apps: Option<u32>,
    /// `yarn.scheduler.capacity.user.max-parallel-apps` (default for every user).
    pub user_max_parallel_apps: Option<u32>,
    /// `yarn.scheduler.capacity.user.<u>.max-parallel-apps`.
    pub user_max_parallel_apps_for: BTreeMap<String, u32>,
    pub queue_mappings: Vec<QueueMapping>,
    /// `queue-mappings-override.enable`: mappings win over the queue the app named.
    pub queue_mappings_override: bool,
    /// `node-locality-delay` (40) missed scheduling opportunities before rack-local.
    pub node_locality_delay: u32,
    /// `gang.max-plans-per-pass` (8, at least 1): waiting gangs one pass plans.
    pub gang_max_plans_per_pass: u32,
    /// `rack-locality-additional-delay` (-1: derived) further ones before off-switch.
    pub rack_locality_additional_delay: i32,
    /// `yarn.cluster.max-application-priority` (0).
    pub max_application_priority: i32,
    /// `yarn.admin.acl` (`*`).
    pub admin_acl: Acl,
    /// `yarn.acl.enable` (false): when false, every ACL allows everyone, as in YARN.
    pub acl_enabled: bool,
    /// Fair-share accounting (`spindle.scheduler.fairshare.*`).
    pub fairshare: FairshareConf,
}

impl SchedulerConf {
    /// YARN's defaults: `root` with one leaf `default` at 100%.
    pub fn single_default_queue() -> Self {
        let root_path = QueuePath::root();
        let default = QueueSpec::new(root_path.child("default"), CapacitySpec::Percent(100.0));
        let mut root = QueueSpec::new(root_path, CapacitySpec::Percent(100.0));
        root.children.push(default);
        Self {
            root,
            calculator: Calculator::Dominant,
            max_applications: 10_000,
            max_am_resource_percent: 0.1,
            max_parallel_apps: None,
            user_max_parallel_apps: None,
            user_max_parallel_apps_for: BTreeMap::new(),
            queue_mappings: Vec::new(),
            queue_mappings_override: false,
            node_locality_delay: 40,
            gang_max_plans_per_pass: 8,
            rack_locality_additional_delay: -1,
            max_application_priority: 0,
            admin_acl: Acl::everyone(),
            acl_enabled: false,
            fairshare: FairshareConf::default(),
        }
    }
}

/// A queue's application lifetimes (YARN's `default-application-lifetime` and
/// `maximum-application-lifetime`, in seconds; unset or -1 means none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LifetimeLimits {
    pub default_secs: Option<u64>,
    pub max_secs: Option<u64>,
}

/// The lifetime an application gets in its queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifetime {
    /// No lifetime: it runs until it ends.
    Unlimited,
    /// What it asked for, or the queue's default when it asked for none.
    Granted(u64),
    /// It asked for more than the queue's maximum and got the maximum.
    Capped { asked: u64, max: u64 },
}

impl Lifetime {
    /// The seconds it runs for at most, if any.
    pub fn secs(self) -> Option<u64> {
        match self {
            Lifetime::Unlimited => None,
            Lifetime::Granted(s) | Lifetime::Capped { max: s, .. } => Some(s),
        }
    }
}

impl LifetimeLimits {
    /// YARN's rule: a request above the maximum gets the maximum; no request gets the
    /// default, else the maximum.
    pub fn grant(&self, asked: Option<u64>) -> Lifetime {
        match (asked, self.max_secs) {
            (Some(a), Some(max)) if a > max => Lifetime::Capped { asked: a, max },
            (Some(a), _) => Lifetime::Granted(a),
            (None, max) => match self.default_secs.or(max) {
                Some(s) => Lifetime::Granted(s),
                None => Lifetime::Unlimited,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::OrderingPolicy;

    #[test]
    fn every_ordering_policy_is_found_by_its_name() {
        for p in OrderingPolicy::ALL {
            assert_eq!(OrderingPolicy::from_name(p.as_str()), Some(p));
        }
        assert_eq!(OrderingPolicy::from_name("FIFO"), None);
        assert_eq!(OrderingPolicy::from_name("sjf"), None);
    }
}
