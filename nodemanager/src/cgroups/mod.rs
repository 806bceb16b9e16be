//! Container isolation with Linux control groups, on cgroup v1, cgroup v2 and the hybrid
//! layout (v1 controllers with cgroup2 mounted beside them). Plain cgroupfs file writes plus
//! the raw `bpf(2)` syscall; no cgroups crate.
//!
//! What to use is decided once, at NM start ([`Cgroups::new`], called by the launcher's
//! `ProcessExecutor::for_node`, which logs the choice in one line):
//!
//! * **Layout** ([`layout`]): read from `/proc/self/mountinfo` and `/proc/self/cgroup`, never
//!   from fixed paths. Where a v1 `cpu` or `memory` hierarchy is mounted (v1 or hybrid), cpu,
//!   memory and pids limits use v1 ([`v1`]); on a pure cgroup2 machine they use v2 ([`v2`]),
//!   with the controllers enabled down the hierarchy through `cgroup.subtree_control` (pids
//!   only where it can be delegated; a missing pids controller is a warning, not an error).
//! * **Devices** (`spindle.nodemanager.cgroups.device-isolation`): `auto` uses the v1
//!   devices controller if it is mounted (`devices.deny` of `c MAJ:MIN rwm`), else a
//!   `BPF_PROG_TYPE_CGROUP_DEVICE` program on the container's cgroup2 cgroup, hand-assembled
//!   and loaded with `bpf(2)` ([`bpf`]), attached with `BPF_F_ALLOW_MULTI` so a parent's
//!   programs (systemd's) still apply; `v1` allows only the former, `ebpf` only the latter
//!   (also on hybrid machines).
//!
//! Every container gets one cgroup per hierarchy it needs, named after its container id, under
//! `<controller root>/<hierarchy>/<instance>/`:
//!
//! * `hierarchy` is `yarn.nodemanager.linux-container-executor.cgroups.hierarchy` (default
//!   `/spindle`): with a leading `/` it starts at each controller's mount point (YARN's
//!   meaning), without one it starts at the NM's own cgroup in that controller (for delegated
//!   setups and for tests, which then nest inside whatever cgroup runs them);
//! * `instance` ([`instance_name`]) is `nm-` plus a hash of the NM's first local dir, so that
//!   several NMs on one host (the minicluster) never reclaim each other's containers, while a
//!   restarted NM, which reuses its local dirs, finds its own.
//!
//! **Limits** (from the container's [`IsolationSpec`]): `cpu.shares` = 1024 x vcores (v2
//! `cpu.weight` = 100 x vcores, one vcore being the default weight as 1024 shares are in
//! YARN); under `...cgroups.strict-resource-usage` a CFS quota of vcores x 100 ms per 100 ms.
//! Memory: the container's MB as `memory.limit_in_bytes` and `memory.memsw.limit_in_bytes`
//! (v2 `memory.max`, `memory.swap.max=0`, `memory.oom.group=1`). `pids.max` =
//! `spindle.nodemanager.container.pids-limit` (4096; 0 = none). The devices the container was
//! not granted are denied. Fail closed: if the node cannot deny devices (no v1 devices
//! controller and no loadable eBPF program), a container whose `denied_devices` is not empty
//! fails to launch ([`CgroupError::NoDeviceIsolation`]); containers that deny nothing run.
//!
//! **Placement before exec**: the launcher makes the cgroups and opens each `cgroup.procs`
//! here ([`Cgroups::create`]), and the forked child (`launcher/spawn.rs`), after `setsid` and
//! before `exec`, writes `0` (itself) into each: async-signal-safe, one `write(2)` per fd, no
//! allocation. A failed write fails the spawn, so nothing the container runs is unconfined.
//!
//! **OOM**: after the leader is reaped, `oom_kill` of `memory.oom_control` (v1) or
//! `memory.events` (v2) is read before teardown ([`Cgroups::oom_kills`]); non-zero means the
//! container is reported as killed for exceeding its memory (-104).
//!
//! **Teardown and reclaim**: when a container ends its cgroups are emptied (`cgroup.kill` on
//! v2, and SIGKILL to every pid listed, repeated until none is left) and removed, children
//! first, bounded by [`TEARDOWN_TIMEOUT`] (5 s). At NM start ([`Cgroups::reclaim`]) every
//! cgroup under the NM's instance that does not belong to a container it re-adopts is
//! reclaimed the same way, and so are other instances' cgroups that have been without any
//! process for [`ABANDONED_AGE`] (60 s: left by an NM that was killed and whose local dirs are
//! not reused); other instances' cgroups with processes are never touched, as they may belong
//! to a live NM on the same host. At NM stop ([`Cgroups::shutdown`]) the empty instance and
//! hierarchy directories are removed.

pub mod bpf;
pub mod layout;
pub mod v1;
pub mod v2;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt::Display;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use spindle_common::ids::ContainerId;

pub use layout::{Layout, Mode, Mount};

use crate::isolation::{DeviceIsolation, IsolationConfig, IsolationSpec};

/// The CFS period for strict CPU quotas (the kernel's default, 100 ms).
pub const CFS_PERIOD_US: i64 = 100_000;
/// How long teardown keeps killing a container's leftovers before it gives up on a cgroup.
pub const TEARDOWN_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// cgroups cannot be used on this node (the NM falls back to the process-tree watcher).
    #[error("{0}")]
    Unavailable(String),
    #[error("invalid cgroup hierarchy '{0}': expected a path of names without '.', '..' or ','")]
    BadHierarchy(String),
    #[error("cannot {what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot write '{value}' to {path}: {source}")]
    Write {
        path: PathBuf,
        value: String,
        #[source]
        source: io::Error,
    },
    /// Fail closed: a container that must be kept from devices is not run unconfined.
    #[error("the container must be denied {count} device(s), but this node cannot isolate devices: {reason}")]
    NoDeviceIsolation { count: usize, reason: String },
    #[error(transparent)]
    Bpf(#[from] bpf::BpfError),
    #[error("processes in {path} were still alive after {secs} s of SIGKILL")]
    StillBusy { path: PathBuf, secs: u64 },
}

impl CgroupError {
    fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> Self + 'a {
        move |source| Self::Io {
            what,
            path: path.to_path_buf(),
            source,
        }
    }
}

/// One write of a limit into a controller file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    pub file: &'static str,
    pub value: String,
    /// An optional setting may be missing on a kernel (swap accounting, `memory.oom.group`);
    /// failing to write it is logged, not fatal.
    pub required: bool,
}

impl Setting {
    pub fn required(file: &'static str, value: impl Display) -> Self {
        Self {
            file,
            value: value.to_string(),
            required: true,
        }
    }
    pub fn optional(file: &'static str, value: impl Display) -> Self {
        Self {
            file,
            value: value.to_string(),
            required: false,
        }
    }
}

/// The memory limit in bytes, or None for "no limit" (0 or negative MB).
fn limit_bytes(mb: i64) -> Option<i64> {
    (mb > 0).then(|| mb.saturating_mul(1 << 20))
}

fn pids_value(max: u64) -> String {
    if max == 0 {
        "max".into()
    } else {
        max.to_string()
    }
}

/// Writes `value` to an existing control file (never creates one: a missing file is ENOENT).
pub fn write_file(dir: &Path, file: &str, value: &str) -> io::Result<()> {
    OpenOptions::new()
        .write(true)
        .open(dir.join(file))?
        .write_all(value.as_bytes())
}

/// The value of `key` in a flat-keyed file (`memory.events`, `memory.oom_control`, `cpu.stat`).
pub fn read_counter(path: &Path, key: &str) -> Option<u64> {
    read_keyed(path).get(key).copied()
}

/// Every `key value` line of a flat-keyed file; unparsable lines are skipped.
pub fn read_keyed(path: &Path) -> BTreeMap<String, u64> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

/// The cgroup directory name of a Spindle NM: `nm-` and an FNV-1a hash of its first local
/// dir. Stable across restarts of the same NM, distinct for NMs sharing a host.
pub fn instance_name(first_local_dir: &Path) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in first_local_dir.as_os_str().as_encoded_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("nm-{:08x}", (h >> 32) ^ (h & 0xffff_ffff))
}

/// The controllers a container's cgroup in one hierarchy is for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Roles {
    cpu: bool,
    memory: bool,
    pids: bool,
    /// v1: `devices.deny`; v2: the eBPF device program.
    devices: bool,
}

impl Roles {
    fn limits(&self) -> bool {
        self.cpu || self.memory || self.pids
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

/// Where one hierarchy keeps this NM's containers.
#[derive(Debug, Clone)]
struct Base {
    version: Version,
    /// `<start>/<hierarchy>/<instance>`: the containers' cgroups are its children.
    dir: PathBuf,
    /// `<start>`: where emptied parents stop being removed at shutdown.
    start: PathBuf,
    /// For logs: `cpu,cpuacct` or `cgroup2`.
    label: String,
    roles: Roles,
}

/// Which controller a caller wants the container's cgroup of (tests, metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Controller {
    Cpu,
    Memory,
    Pids,
    Devices,
}

/// The open `cgroup.procs` files of a new container's cgroups: the forked child writes `0`
/// to each before it execs. Dropped (closed) once the child has started.
#[derive(Debug)]
pub struct Placement {
    files: Vec<File>,
}

impl Placement {
    /// The raw descriptors, for the child. They stay valid while `self` lives.
    pub fn fds(&self) -> Vec<RawFd> {
        self.files.iter().map(AsRawFd::as_raw_fd).collect()
    }
}

/// The node's cgroup setup, decided once at NM start and shared by every launch.
#[derive(Debug)]
pub struct Cgroups {
    mode: Mode,
    bases: Vec<Base>,
    /// How devices are denied (`Ok(description)`), or why they cannot be.
    devices: Result<&'static str, String>,
}

fn check_name(h: &str) -> bool {
    let parts: Vec<&str> = h.split('/').filter(|p| !p.is_empty()).collect();
    !parts.is_empty()
        && parts
            .iter()
            .all(|p| *p != "." && *p != ".." && !p.contains([',', '\0', '\n']))
}

impl Cgroups {
    /// Chooses the hierarchies and controllers, creates `<hierarchy>/<instance>` in each
    /// (delegating controllers on cgroup2) and, where devices go through eBPF, checks that a
    /// device program can be loaded. Errors mean "no cgroups on this node".
    pub fn new(
        layout: &Layout,
        conf: &IsolationConfig,
        instance: &str,
    ) -> Result<Self, CgroupError> {
        if !check_name(&conf.hierarchy) {
            return Err(CgroupError::BadHierarchy(conf.hierarchy.clone()));
        }
        if !check_name(instance) || instance.contains('/') {
            return Err(CgroupError::BadHierarchy(instance.to_string()));
        }
        let absolute = conf.hierarchy.starts_with('/');
        let base_dir = |m: &Mount| -> Result<(PathBuf, PathBuf), CgroupError> {
            let start = if absolute {
                m.mount_point.clone()
            } else {
                m.own_dir().ok_or_else(|| {
                    CgroupError::Unavailable(format!(
                        "this process's own cgroup is not visible under {}, so the relative \
                         hierarchy '{}' has no place",
                        m.mount_point.display(),
                        conf.hierarchy
                    ))
                })?
            };
            let dir = layout::join_cgroup(&start, &conf.hierarchy).join(instance);
            Ok((start, dir))
        };
        let mode = layout.mode();
        let mut bases: Vec<Base> = Vec::new();
        let add = |bases: &mut Vec<Base>, version, m: &Mount, set: fn(&mut Roles)| {
            let (start, dir) = base_dir(m)?;
            match bases.iter_mut().find(|b| b.dir == dir) {
                Some(b) => set(&mut b.roles),
                None => {
                    let mut roles = Roles::default();
                    set(&mut roles);
                    bases.push(Base {
                        version,
                        dir,
                        start,
                        label: if version == Version::V1 {
                            m.controllers.join(",")
                        } else {
                            "cgroup2".into()
                        },
                        roles,
                    });
                }
            }
            Ok::<(), CgroupError>(())
        };

        // Limits: v1 wherever a v1 cpu or memory hierarchy exists (v1 and hybrid), else v2.
        let v1_limits = layout.v1_mount("cpu").is_some() || layout.v1_mount("memory").is_some();
        if v1_limits {
            for c in ["cpu", "memory"] {
                if layout.v1_mount(c).is_none() {
                    return Err(CgroupError::Unavailable(format!(
                        "the cgroup v1 '{c}' controller is not mounted"
                    )));
                }
            }
            if let Some(m) = layout.v1_mount("cpu") {
                add(&mut bases, Version::V1, m, |r| r.cpu = true)?;
            }
            if let Some(m) = layout.v1_mount("memory") {
                add(&mut bases, Version::V1, m, |r| r.memory = true)?;
            }
            match layout.v1_mount("pids") {
                Some(m) => add(&mut bases, Version::V1, m, |r| r.pids = true)?,
                None => tracing::warn!("the cgroup v1 pids controller is not mounted: container pids limits are not enforced"),
            }
        } else if let Some(m) = &layout.v2 {
            add(&mut bases, Version::V2, m, |r| {
                r.cpu = true;
                r.memory = true;
            })?;
        } else {
            return Err(CgroupError::Unavailable(
                "no cgroup hierarchy is mounted".into(),
            ));
        }

        // Devices.
        let v1_devices = layout.v1_mount("devices");
        let ebpf = |bases: &mut Vec<Base>| -> Result<&'static str, String> {
            let Some(m) = &layout.v2 else {
                return Err("no cgroup2 hierarchy is mounted for an eBPF device program".into());
            };
            bpf::probe().map_err(|e| format!("{e}"))?;
            add(bases, Version::V2, m, |r| r.devices = true).map_err(|e| e.to_string())?;
            Ok("eBPF device program on cgroup2")
        };
        let devices = match conf.device_isolation {
            DeviceIsolation::Auto => match v1_devices {
                Some(m) => add(&mut bases, Version::V1, m, |r| r.devices = true)
                    .map(|()| "cgroup v1 devices.deny")
                    .map_err(|e| e.to_string()),
                None => ebpf(&mut bases),
            },
            DeviceIsolation::V1 => match v1_devices {
                Some(m) => add(&mut bases, Version::V1, m, |r| r.devices = true)
                    .map(|()| "cgroup v1 devices.deny")
                    .map_err(|e| e.to_string()),
                None => Err("the cgroup v1 devices controller is not mounted".into()),
            },
            DeviceIsolation::Ebpf => ebpf(&mut bases),
        };

        // Create the bases; on cgroup2 make the limit controllers available to containers.
        for b in &bases {
            ensure_base(b)?;
        }
        // cgroup2's pids controller is optional: used when it can be delegated.
        for b in bases
            .iter_mut()
            .filter(|b| b.version == Version::V2 && b.roles.limits())
        {
            match v2::delegate(&b.start, &b.dir, &["pids"]) {
                Ok(()) => b.roles.pids = true,
                Err(e) => tracing::warn!(error = %e, "container pids limits are not enforced"),
            }
        }
        Ok(Self {
            mode,
            bases,
            devices,
        })
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// How devices are denied, or why they cannot be.
    pub fn device_isolation(&self) -> Result<&'static str, &str> {
        self.devices.as_ref().copied().map_err(String::as_str)
    }

    /// One line for the NM's start-up log.
    pub fn describe(&self) -> String {
        let bases: Vec<String> = self
            .bases
            .iter()
            .map(|b| {
                let mut roles = Vec::new();
                for (on, name) in [
                    (b.roles.cpu, "cpu"),
                    (b.roles.memory, "memory"),
                    (b.roles.pids, "pids"),
                    (b.roles.devices, "devices"),
                ] {
                    if on {
                        roles.push(name);
                    }
                }
                format!("{} [{}] at {}", roles.join("+"), b.label, b.dir.display())
            })
            .collect();
        format!("{}: {}", self.mode, bases.join("; "))
    }

    fn dir_of(b: &Base, id: &str) -> PathBuf {
        b.dir.join(id)
    }

    /// The container's cgroup directory for `controller`, if this node has one for it.
    pub fn container_dir(&self, controller: Controller, id: &ContainerId) -> Option<PathBuf> {
        let b = self.bases.iter().find(|b| match controller {
            Controller::Cpu => b.roles.cpu,
            Controller::Memory => b.roles.memory,
            Controller::Pids => b.roles.pids,
            Controller::Devices => b.roles.devices,
        })?;
        Some(Self::dir_of(b, &id.to_string()))
    }

    /// Creates the container's cgroups with its limits and opens them for placement. On any
    /// failure what was made is removed again.
    pub fn create(&self, id: &ContainerId, spec: &IsolationSpec) -> Result<Placement, CgroupError> {
        let deny = !spec.denied_devices.is_empty();
        if deny {
            if let Err(reason) = &self.devices {
                return Err(CgroupError::NoDeviceIsolation {
                    count: spec.denied_devices.len(),
                    reason: reason.clone(),
                });
            }
        }
        let name = id.to_string();
        let mut made: Vec<PathBuf> = Vec::new();
        let result = self.create_in(&name, spec, deny, &mut made);
        if result.is_err() {
            let _ = kill_and_remove(&made, TEARDOWN_TIMEOUT);
        }
        result
    }

    fn create_in(
        &self,
        name: &str,
        spec: &IsolationSpec,
        deny: bool,
        made: &mut Vec<PathBuf>,
    ) -> Result<Placement, CgroupError> {
        let mut files = Vec::new();
        for b in &self.bases {
            if !(b.roles.limits() || (b.roles.devices && deny)) {
                continue;
            }
            let dir = Self::dir_of(b, name);
            match fs::create_dir(&dir) {
                Ok(()) => {}
                // The NM's own directory was removed under it (an operator, or another NM's
                // reclaim of empty cgroups): make it again.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    ensure_base(b)?;
                    fs::create_dir(&dir).map_err(CgroupError::io("create cgroup", &dir))?;
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    // A leftover of an earlier life of this id: start clean.
                    kill_and_remove(std::slice::from_ref(&dir), TEARDOWN_TIMEOUT)?;
                    fs::create_dir(&dir).map_err(CgroupError::io("create cgroup", &dir))?;
                }
                Err(e) => return Err(CgroupError::io("create cgroup", &dir)(e)),
            }
            made.push(dir.clone());
            let mut settings = Vec::new();
            match b.version {
                Version::V1 => {
                    if b.roles.cpu {
                        settings.extend(v1::cpu(spec));
                    }
                    if b.roles.memory {
                        settings.extend(v1::memory(spec));
                    }
                    if b.roles.pids {
                        settings.extend(v1::pids(spec));
                    }
                    if b.roles.devices {
                        settings.extend(v1::devices(spec));
                    }
                }
                Version::V2 => {
                    if b.roles.cpu {
                        settings.extend(v2::cpu(spec));
                    }
                    if b.roles.memory {
                        settings.extend(v2::memory(spec));
                    }
                    if b.roles.pids {
                        settings.extend(v2::pids(spec));
                    }
                }
            }
            apply(&dir, &settings)?;
            if b.version == Version::V2 && b.roles.devices && deny {
                bpf::deny_devices(&dir, &spec.denied_devices)?;
            }
            let procs = dir.join("cgroup.procs");
            let f = OpenOptions::new()
                .write(true)
                .open(&procs)
                .map_err(CgroupError::io("open", &procs))?;
            files.push(f);
        }
        Ok(Placement { files })
    }

    /// Applies a running container's new memory and CPU limits (YARN's container update),
    /// the same settings [`Cgroups::create`] writes, in the container's existing cgroups.
    /// Memory goes first, so a refused shrink (v1 answers EBUSY when the usage cannot be
    /// reclaimed below the new limit) leaves every limit as it was; on v1 the memory+swap
    /// limit is raised before, or lowered after, the memory limit, as the kernel requires
    /// `memory.limit_in_bytes <= memory.memsw.limit_in_bytes`. Pids and devices stay.
    pub fn update(
        &self,
        id: &ContainerId,
        old: &IsolationSpec,
        new: &IsolationSpec,
    ) -> Result<(), CgroupError> {
        let name = id.to_string();
        let grow = new.memory_mb > old.memory_mb;
        let mut memory = Vec::new();
        let mut cpu = Vec::new();
        for b in &self.bases {
            if !(b.roles.cpu || b.roles.memory) {
                continue;
            }
            let dir = Self::dir_of(b, &name);
            if !dir.is_dir() {
                return Err(CgroupError::Unavailable(format!(
                    "container {id} has no cgroup at {}",
                    dir.display()
                )));
            }
            if b.roles.memory {
                let mut m = match b.version {
                    Version::V1 => v1::memory(new),
                    Version::V2 => v2::memory(new),
                };
                if grow && b.version == Version::V1 {
                    // memsw before the memory limit.
                    m.sort_by_key(|s| s.file != "memory.memsw.limit_in_bytes");
                }
                memory.push((dir.clone(), m));
            }
            if b.roles.cpu {
                let c = match b.version {
                    Version::V1 => v1::cpu(new),
                    Version::V2 => v2::cpu(new),
                };
                cpu.push((dir, c));
            }
        }
        for (dir, settings) in memory.iter().chain(cpu.iter()) {
            apply(dir, settings)?;
        }
        Ok(())
    }

    /// Every existing cgroup directory of the container.
    fn existing_dirs(&self, name: &str) -> Vec<PathBuf> {
        self.bases
            .iter()
            .map(|b| Self::dir_of(b, name))
            .filter(|d| d.is_dir())
            .collect()
    }

    /// How many of the container's processes the kernel's OOM killer has killed.
    pub fn oom_kills(&self, id: &ContainerId) -> u64 {
        let Some(b) = self.bases.iter().find(|b| b.roles.memory) else {
            return 0;
        };
        let dir = Self::dir_of(b, &id.to_string());
        match b.version {
            Version::V1 => v1::oom_kills(&dir),
            Version::V2 => v2::oom_kills(&dir),
        }
        .unwrap_or(0)
    }

    /// The container's `cpu.stat` (v1: `nr_throttled`, `throttled_time` ns; v2:
    /// `usage_usec`, `nr_throttled`, `throttled_usec`).
    pub fn cpu_stat(&self, id: &ContainerId) -> BTreeMap<String, u64> {
        self.container_dir(Controller::Cpu, id)
            .map(|d| read_keyed(&d.join("cpu.stat")))
            .unwrap_or_default()
    }

    /// SIGKILLs every process in the container's cgroups once (they stay until [`Self::destroy`]).
    pub fn kill_all(&self, id: &ContainerId) {
        let dirs = self.existing_dirs(&id.to_string());
        for pid in procs_of(&dirs) {
            kill_pid(pid);
        }
    }

    /// Kills whatever is left in the container's cgroups and removes them.
    pub fn destroy(&self, id: &ContainerId) -> Result<(), CgroupError> {
        kill_and_remove(&self.existing_dirs(&id.to_string()), TEARDOWN_TIMEOUT)
    }

    /// Removes every container cgroup of this NM whose name is not in `keep` (the containers a
    /// restarted NM re-adopts), killing what still runs in it. Returns how many were removed.
    pub fn reclaim(&self, keep: &HashSet<String>) -> usize {
        let mut stale: BTreeSet<String> = BTreeSet::new();
        for b in &self.bases {
            let Ok(rd) = fs::read_dir(&b.dir) else {
                continue;
            };
            for e in rd.flatten() {
                if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    if let Some(n) = e.file_name().to_str() {
                        if !keep.contains(n) {
                            stale.insert(n.to_string());
                        }
                    }
                }
            }
        }
        let mut n = 0;
        for name in &stale {
            match kill_and_remove(&self.existing_dirs(name), TEARDOWN_TIMEOUT) {
                Ok(()) => n += 1,
                Err(e) => {
                    tracing::warn!(cgroup = %name, error = %e, "cannot reclaim a stale container cgroup")
                }
            }
        }
        n + self.reclaim_abandoned()
    }

    /// Removes what NMs that are gone left under the hierarchy: cgroups of other instances
    /// (a killed NM whose local dirs are not reused) that have had no process for
    /// [`ABANDONED_AGE`]. Another instance's cgroups with processes are never touched: they
    /// may belong to a live NM on this host. Returns how many container cgroups went.
    fn reclaim_abandoned(&self) -> usize {
        let mut n = 0;
        for b in &self.bases {
            let Some(hierarchy) = b.dir.parent() else {
                continue;
            };
            let Ok(rd) = fs::read_dir(hierarchy) else {
                continue;
            };
            for inst in rd.flatten() {
                let path = inst.path();
                if path == b.dir || !inst.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    continue;
                }
                // Judged before its children go (removing them refreshes its mtime).
                let whole = abandoned(&path);
                let Ok(containers) = fs::read_dir(&path) else {
                    continue;
                };
                for c in containers.flatten() {
                    let cpath = c.path();
                    if c.file_type().map(|t| t.is_dir()).unwrap_or(false)
                        && abandoned(&cpath)
                        && remove_empty_tree(&cpath)
                    {
                        n += 1;
                    }
                }
                if whole {
                    let _ = fs::remove_dir(&path);
                }
            }
        }
        n
    }

    /// Removes this NM's (empty) directories and the hierarchy's, if nothing else uses them.
    pub fn shutdown(&self) {
        for b in &self.bases {
            let mut d = b.dir.clone();
            while d.starts_with(&b.start) && d != b.start {
                if fs::remove_dir(&d).is_err() {
                    break;
                }
                if !d.pop() {
                    break;
                }
            }
        }
    }
}

/// In a forked child before exec: joins the cgroup whose `cgroup.procs` is open as `fd` (`0` = the
/// writing process). Async-signal-safe: one write(2), no allocation.
pub fn enter_cgroup(fd: std::os::fd::RawFd) -> std::io::Result<()> {
    // SAFETY: `fd` is a descriptor the parent opened (O_CLOEXEC) and keeps open until the
    // spawn returns; the buffer is a static one-byte slice.
    let n = unsafe { nix::libc::write(fd, b"0".as_ptr().cast(), 1) };
    if n == 1 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// How long a cgroup must have been without processes before another NM takes it for
/// abandoned (a live NM removes its own within milliseconds of a container's end).
pub const ABANDONED_AGE: Duration = Duration::from_secs(60);

/// True if no process is in `dir` or below and `dir` was last changed over
/// [`ABANDONED_AGE`] ago.
fn abandoned(dir: &Path) -> bool {
    let old = fs::metadata(dir)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age >= ABANDONED_AGE);
    old && procs_of(&post_order(&[dir.to_path_buf()])).is_empty()
}

/// Removes a cgroup tree without processes, children first; false if any of it stays.
fn remove_empty_tree(dir: &Path) -> bool {
    post_order(&[dir.to_path_buf()])
        .iter()
        .all(|d| fs::remove_dir(d).is_ok())
}

/// Makes a base directory (again): `mkdir -p`, and on cgroup2 the controller delegation.
fn ensure_base(b: &Base) -> Result<(), CgroupError> {
    let mut controllers = Vec::new();
    if b.version == Version::V2 {
        for (on, c) in [
            (b.roles.cpu, "cpu"),
            (b.roles.memory, "memory"),
            (b.roles.pids, "pids"),
        ] {
            if on {
                controllers.push(c);
            }
        }
    }
    if controllers.is_empty() {
        fs::create_dir_all(&b.dir).map_err(|e| {
            CgroupError::Unavailable(format!("cannot create {}: {e}", b.dir.display()))
        })
    } else {
        v2::delegate(&b.start, &b.dir, &controllers)
    }
}

fn apply(dir: &Path, settings: &[Setting]) -> Result<(), CgroupError> {
    for s in settings {
        if let Err(e) = write_file(dir, s.file, &s.value) {
            if s.required {
                return Err(CgroupError::Write {
                    path: dir.join(s.file),
                    value: s.value.clone(),
                    source: e,
                });
            }
            tracing::debug!(file = s.file, error = %e, "optional cgroup setting not applied");
        }
    }
    Ok(())
}

/// The pids listed in the `cgroup.procs` of `dirs`.
fn procs_of(dirs: &[PathBuf]) -> BTreeSet<i32> {
    dirs.iter()
        .flat_map(|d| {
            fs::read_to_string(d.join("cgroup.procs"))
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.trim().parse::<i32>().ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

fn kill_pid(pid: i32) {
    // Never init, never ourselves, whatever a cgroup file says.
    if pid > 1 && pid != std::process::id() as i32 {
        match kill(Pid::from_raw(pid), Signal::SIGKILL) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(e) => tracing::debug!(pid, error = %e, "cannot kill a container process"),
        }
    }
}

/// Every directory at or below `dirs`, children before their parents.
fn post_order(dirs: &[PathBuf]) -> Vec<PathBuf> {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        if let Ok(rd) = fs::read_dir(d) {
            for e in rd.flatten() {
                if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    walk(&e.path(), out);
                }
            }
        }
        out.push(d.to_path_buf());
    }
    let mut out = Vec::new();
    for d in dirs {
        if d.is_dir() {
            walk(d, &mut out);
        }
    }
    out
}

/// Empties the cgroups `dirs` (and any cgroups a container made below them) with SIGKILL,
/// repeated until no process is left (a process may fork while it is being killed), then
/// removes them, children first. Bounded by `timeout`.
pub fn kill_and_remove(dirs: &[PathBuf], timeout: Duration) -> Result<(), CgroupError> {
    let all = post_order(dirs);
    if all.is_empty() {
        return Ok(());
    }
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_micros(500);
    // cgroup2's cgroup.kill (Linux 5.14+) kills the whole subtree at once, forks included.
    for d in dirs {
        let _ = write_file(d, "cgroup.kill", "1");
    }
    loop {
        let pids = procs_of(&all);
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            kill_pid(pid);
        }
        if Instant::now() >= deadline {
            return Err(CgroupError::StillBusy {
                path: all[all.len() - 1].clone(),
                secs: timeout.as_secs(),
            });
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
    for d in &all {
        loop {
            match fs::remove_dir(d) {
                Ok(()) => break,
                Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                // A killed task can keep its cgroup busy for a moment while it exits.
                Err(e)
                    if e.raw_os_error() == Some(nix::libc::EBUSY) && Instant::now() < deadline =>
                {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(20));
                }
                Err(e) => return Err(CgroupError::io("remove cgroup", d)(e)),
            }
        }
    }
    Ok(())
}

/// Kills and removes everything under `hierarchy` in every mounted hierarchy, and the
/// hierarchy directories themselves. For test guards and operators' clean-up, not for a
/// running NM (it would take other NMs' containers too).
pub fn purge_hierarchy(layout: &Layout, hierarchy: &str) -> Result<(), CgroupError> {
    if !check_name(hierarchy) {
        return Err(CgroupError::BadHierarchy(hierarchy.to_string()));
    }
    let absolute = hierarchy.starts_with('/');
    let mut dirs = Vec::new();
    for m in layout.v1.iter().chain(layout.v2.iter()) {
        let start = if absolute {
            Some(m.mount_point.clone())
        } else {
            m.own_dir()
        };
        if let Some(s) = start {
            dirs.push(layout::join_cgroup(&s, hierarchy));
        }
    }
    kill_and_remove(&dirs, TEARDOWN_TIMEOUT)
}

#[cfg(test)]
mod tests;
