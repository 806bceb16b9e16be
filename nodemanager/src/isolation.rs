//! What a container may use, as decided before launch: the contract between the resource
//! plugins (which grant devices) and the executor (which enforces limits with cgroups or, where
//! cgroups are missing, by watching the process tree).

use spindle_common::resource::Resource;

/// A device node by its numbers, as the devices cgroup names it (`c 195:2 rwm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceNumber {
    /// `'c'` (character) or `'b'` (block).
    pub kind: char,
    pub major: u32,
    pub minor: u32,
}

impl DeviceNumber {
    pub fn char(major: u32, minor: u32) -> Self {
        Self {
            kind: 'c',
            major,
            minor,
        }
    }
}

impl std::fmt::Display for DeviceNumber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}:{}", self.kind, self.major, self.minor)
    }
}

/// The limits of one container.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IsolationSpec {
    /// Vcores granted: cpu shares/weight in proportion; a hard quota when `strict_cpu`.
    pub vcores: i64,
    /// Memory granted in MB: the container's memory limit.
    pub memory_mb: i64,
    /// `yarn.nodemanager.linux-container-executor.cgroups.strict-resource-usage`.
    pub strict_cpu: bool,
    /// Devices of every plugin on this node that the container was NOT granted: denied.
    pub denied_devices: Vec<DeviceNumber>,
    /// Devices the container was granted (informational; everything else stays as the
    /// parent allows).
    pub granted_devices: Vec<DeviceNumber>,
    /// Most processes the container may run (pids controller); 0 means no limit.
    pub pids_max: u64,
}

impl IsolationSpec {
    /// Limits from the container's granted resource.
    pub fn for_resource(r: &Resource) -> Self {
        Self {
            vcores: r.vcores,
            memory_mb: r.memory_mb,
            ..Default::default()
        }
    }
}

pub mod proctree;

/// How the devices a container was not granted are denied when cgroups are in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceIsolation {
    /// The v1 devices controller where it is mounted (v1 or hybrid), else an eBPF device
    /// program on the cgroup2 hierarchy.
    #[default]
    Auto,
    /// Only the v1 devices controller (`devices.deny`).
    V1,
    /// Only an eBPF `BPF_PROG_TYPE_CGROUP_DEVICE` program attached to the container's cgroup2
    /// cgroup (also works on a hybrid machine, where cgroup2 is mounted beside v1).
    Ebpf,
}

impl DeviceIsolation {
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Some(Self::Auto),
            "v1" => Some(Self::V1),
            "ebpf" | "bpf" => Some(Self::Ebpf),
            _ => None,
        }
    }
}

/// The node's isolation policy, from the NM configuration (see `docs/configuration.md`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsolationConfig {
    /// Whether cgroups may be used at all (the executor class and Spindle's switch). Even when
    /// true, the NM falls back to the process-tree watcher where cgroups are not usable.
    pub cgroups_enabled: bool,
    /// `yarn.nodemanager.linux-container-executor.cgroups.hierarchy`: with a leading `/`,
    /// relative to each controller's mount point (YARN's meaning); without, relative to the
    /// NM's own cgroup in each controller (delegated setups, and tests).
    pub hierarchy: String,
    /// A hard CPU quota of `vcores` cores per container, not only a proportional share.
    pub strict_cpu: bool,
    /// `pids.max` of each container; 0 means no limit.
    pub pids_limit: u64,
    /// How often running containers are checked (pmem watcher, v1 OOM follow-up).
    pub monitor_interval: std::time::Duration,
    /// `yarn.nodemanager.pmem-check-enabled`: without cgroups, kill containers whose process
    /// tree's resident memory exceeds their limit.
    pub pmem_check: bool,
    pub device_isolation: DeviceIsolation,
    /// `yarn.nodemanager.linux-container-executor.cgroups.mount-path`: only hierarchies
    /// mounted under it are used (YARN's pre-mounted cgroups); None: any found in
    /// `/proc/self/mountinfo`.
    pub mount_path: Option<std::path::PathBuf>,
}

/// Spindle's default hierarchy (YARN's is `/hadoop-yarn`).
pub const DEFAULT_CGROUP_HIERARCHY: &str =
    spindle_common::config::keys::DEFAULT_NM_CGROUPS_HIERARCHY;
/// Default `pids.max` of a container: generous for training jobs with many data-loader
/// workers, small enough to stop a fork bomb from taking the node's pid space.
pub const DEFAULT_PIDS_LIMIT: u64 =
    spindle_common::config::keys::DEFAULT_SPINDLE_NM_CONTAINER_PIDS_LIMIT;
/// YARN's `yarn.nodemanager.container-monitor.interval-ms` default.
pub const DEFAULT_MONITOR_INTERVAL_MS: u64 =
    spindle_common::config::keys::DEFAULT_NM_CONTAINER_MONITOR_INTERVAL_MS;

impl Default for IsolationConfig {
    fn default() -> Self {
        Self {
            cgroups_enabled: spindle_common::config::keys::DEFAULT_SPINDLE_NM_CGROUPS_ENABLED,
            hierarchy: DEFAULT_CGROUP_HIERARCHY.to_string(),
            strict_cpu: spindle_common::config::keys::DEFAULT_NM_CGROUPS_STRICT_RESOURCE_USAGE,
            pids_limit: DEFAULT_PIDS_LIMIT,
            monitor_interval: std::time::Duration::from_millis(DEFAULT_MONITOR_INTERVAL_MS),
            pmem_check: spindle_common::config::keys::DEFAULT_NM_PMEM_CHECK_ENABLED,
            device_isolation: DeviceIsolation::Auto,
            mount_path: None,
        }
    }
}

impl IsolationSpec {
    /// Adds the node-wide parts of the policy (strict CPU, pids limit) to a container's limits.
    pub fn with_node_policy(mut self, conf: &IsolationConfig) -> Self {
        self.strict_cpu = conf.strict_cpu;
        self.pids_max = conf.pids_limit;
        self
    }
}
