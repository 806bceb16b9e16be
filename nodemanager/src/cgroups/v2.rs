//! What a container's limits are in cgroup v2 files, and the delegation of controllers down
//! to the hierarchy (`cgroup.subtree_control`).

use std::fs;
use std::path::Path;

use super::{read_counter, write_file, CgroupError, Setting, CFS_PERIOD_US};
use crate::isolation::IsolationSpec;

/// cgroup v2's default `cpu.weight` (100) is one vcore's worth, as v1's default 1024 shares
/// are in YARN: weights stay exactly proportional to vcores.
pub const WEIGHT_PER_VCORE: i64 = 100;

pub fn cpu(spec: &IsolationSpec) -> Vec<Setting> {
    let vcores = spec.vcores.max(1);
    let mut s = vec![Setting::required(
        "cpu.weight",
        vcores.saturating_mul(WEIGHT_PER_VCORE).clamp(1, 10_000),
    )];
    if spec.strict_cpu {
        s.push(Setting::required(
            "cpu.max",
            format!("{} {CFS_PERIOD_US}", vcores.saturating_mul(CFS_PERIOD_US)),
        ));
    }
    s
}

/// `memory.max`; no swap; and `memory.oom.group` so an OOM kill takes the whole container,
/// as YARN kills the whole container that exceeds its memory.
pub fn memory(spec: &IsolationSpec) -> Vec<Setting> {
    let Some(bytes) = super::limit_bytes(spec.memory_mb) else {
        return Vec::new();
    };
    vec![
        Setting::required("memory.max", bytes),
        Setting::optional("memory.swap.max", 0),
        Setting::optional("memory.oom.group", 1),
    ]
}

pub fn pids(spec: &IsolationSpec) -> Vec<Setting> {
    vec![Setting::required(
        "pids.max",
        super::pids_value(spec.pids_max),
    )]
}

/// `memory.events`'s `oom_kill` (processes killed by the OOM killer in the cgroup).
pub fn oom_kills(dir: &Path) -> Option<u64> {
    read_counter(&dir.join("memory.events"), "oom_kill")
}

/// Makes `controllers` available to the children of `to`, enabling them in
/// `cgroup.subtree_control` of `from` and of every cgroup between it and `to` (inclusive).
/// `from` must be an ancestor of `to` whose own parent already delegates them.
pub fn delegate(from: &Path, to: &Path, controllers: &[&str]) -> Result<(), CgroupError> {
    let rel = to.strip_prefix(from).map_err(|_| {
        CgroupError::Unavailable(format!("{} is not under {}", to.display(), from.display()))
    })?;
    let mut dir = from.to_path_buf();
    let mut chain = vec![dir.clone()];
    for c in rel.components() {
        dir.push(c);
        chain.push(dir.clone());
    }
    for d in chain {
        if !d.is_dir() {
            fs::create_dir(&d).map_err(CgroupError::io("create cgroup", &d))?;
        }
        let enabled = fs::read_to_string(d.join("cgroup.subtree_control")).unwrap_or_default();
        let available = fs::read_to_string(d.join("cgroup.controllers")).unwrap_or_default();
        for c in controllers {
            if enabled.split_whitespace().any(|x| x == *c) {
                continue;
            }
            if !available.split_whitespace().any(|x| x == *c) {
                return Err(CgroupError::Unavailable(format!(
                    "the cgroup2 controller '{c}' is not available in {} (its parent does not delegate it)",
                    d.display()
                )));
            }
            write_file(&d, "cgroup.subtree_control", &format!("+{c}")).map_err(|e| {
                CgroupError::Unavailable(format!(
                    "cannot enable the cgroup2 controller '{c}' in {}: {e}{}",
                    d.display(),
                    if e.raw_os_error() == Some(nix::libc::EBUSY) {
                        " (the cgroup has processes of its own: run the NM in a delegated cgroup \
                         with a leaf for itself, or use an absolute hierarchy)"
                    } else {
                        ""
                    }
                ))
            })?;
        }
    }
    Ok(())
}
