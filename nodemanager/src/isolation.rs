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
