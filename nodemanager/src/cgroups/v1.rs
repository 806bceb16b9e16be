//! What a container's limits are in cgroup v1 files (YARN's `CGroupsCpuResourceHandlerImpl`,
//! `CGroupsMemoryResourceHandlerImpl` and the devices module of its container-executor).

use std::path::Path;

use super::{read_counter, Setting, CFS_PERIOD_US};
use crate::isolation::IsolationSpec;

/// YARN's cpu.shares per vcore (the kernel's default share of one cgroup).
pub const SHARES_PER_VCORE: i64 = 1024;

/// `cpu.shares` in proportion to the vcores; with strict usage a CFS quota of `vcores` cores.
pub fn cpu(spec: &IsolationSpec) -> Vec<Setting> {
    let vcores = spec.vcores.max(1);
    let shares = vcores.saturating_mul(SHARES_PER_VCORE).clamp(2, 262_144);
    let mut s = vec![Setting::required("cpu.shares", shares)];
    if spec.strict_cpu {
        s.push(Setting::required("cpu.cfs_period_us", CFS_PERIOD_US));
        s.push(Setting::required(
            "cpu.cfs_quota_us",
            vcores.saturating_mul(CFS_PERIOD_US),
        ));
    }
    s
}

/// The memory limit, and the same limit on memory+swap so that the container cannot swap
/// its way past it (only where swap accounting exists; else swappiness 0, best effort).
pub fn memory(spec: &IsolationSpec) -> Vec<Setting> {
    let Some(bytes) = super::limit_bytes(spec.memory_mb) else {
        return Vec::new();
    };
    vec![
        Setting::required("memory.limit_in_bytes", bytes),
        Setting::optional("memory.memsw.limit_in_bytes", bytes),
        Setting::optional("memory.swappiness", 0),
    ]
}

pub fn pids(spec: &IsolationSpec) -> Vec<Setting> {
    vec![Setting::required(
        "pids.max",
        super::pids_value(spec.pids_max),
    )]
}

/// One `devices.deny` write per device the container was not granted (`c 195:0 rwm`).
pub fn devices(spec: &IsolationSpec) -> Vec<Setting> {
    spec.denied_devices
        .iter()
        .map(|d| Setting::required("devices.deny", format!("{d} rwm")))
        .collect()
}

/// How many processes the kernel's OOM killer killed in the cgroup (`memory.oom_control`'s
/// `oom_kill`, Linux 4.13+); `memory.failcnt` is not used: hitting the limit and reclaiming is
/// not a kill.
pub fn oom_kills(memory_dir: &Path) -> Option<u64> {
    read_counter(&memory_dir.join("memory.oom_control"), "oom_kill")
}
