//! Starting and stopping container processes: the [`ContainerExecutor`] seam and the one
//! real implementation, [`ProcessExecutor`].
//!
//! A container is a process group of its own (`setsid`), so that a stop reaches every
//! process it started. Its command is the launch context's `commands` joined by spaces,
//! YARN's placeholders expanded ([`expand_placeholders`]). As in YARN it runs under bash: the
//! leader is a small wrapper that runs the command as `bash -c "<command>"` and then records
//! its exit code in `<work dir>/.exitcode`:
//!
//! ```text
//! bash -c 'trap : TERM INT HUP; "$BASH" -c "$1"; rc=$?; printf "%s\n" "$rc" > .exitcode; exit "$rc"' spindle-container "<command>"
//! ```
//!
//! The wrapper exists for NM recovery: a re-adopted container is not the new NM's child, so
//! its wait status is lost, but the file is not. The no-op traps (handlers, not `SIG_IGN`,
//! so the command still gets default dispositions) make the wrapper outlive a group SIGTERM
//! long enough to reap the command and write `143`; the command's exit code, including
//! bash's 128+signo for a signalled command, is therefore what the wrapper exits with.
//!
//! A *plain* command ([`plain_argv`]: one program and literal arguments, optionally after
//! `exec`; no quotes, expansions, redirections, globs, operators or assignments) is exec'd
//! directly instead: bash would end up doing the same, and skipping two bash start-ups
//! matters when a node starts a gang's members at once. Its exit code is then known only to
//! the NM that started it; if it ends while no NM runs, the recovering NM reports it with
//! -100 and a diagnostic.
//!
//! **Fork and exec by hand** (`launcher/spawn.rs`). `std::process::Command::spawn`
//! returns only after the child has exec'd, so a child could not wait between its setup and
//! its `exec`. The launcher forks with raw libc calls instead: everything the child needs is
//! built before the fork and the child allocates nothing (it is forked from a multi-threaded
//! process). The child resets its signal mask and dispositions, `setsid`s, joins its cgroups,
//! redirects stdout/stderr to its log files, `chdir`s to its work dir, switches user (when
//! [`crate::runas`] says so: groups and gid, then uid), closes every other descriptor
//! (`close_range`) and `exec`s. A failed setup step comes back to the parent through a
//! close-on-exec pipe as (step, errno), so setup errors stay synchronous; an `exec` failure
//! is written to the container's stderr and ends it with bash's codes (127 not found, 126
//! otherwise). The parent reaps through a pidfd (`AsyncFd`), not a thread per container.
//!
//! **Held starts** (gang launches, [`Gate`]). With `hold`, each child then waits on a pipe
//! (its gate) before `exec`, in NM state `SCHEDULED`; the start call is answered once all are
//! held. `POST /ws/v1/node/containers/release` writes one byte to each named gate; a stop, an
//! expired hold (`spindle.nodemanager.launch-hold.timeout-ms`) or the NM's death closes the
//! gate instead, and the child exits with [`GATE_ABANDONED_EXIT`] (125) without running
//! anything. The book-keeping of holds is `crate::manager`'s `hold` module; the AM side is
//! the SDK's `NmClient::start_gang`.
//!
//! Containers run as the NodeManager's own user unless [`crate::runas`] says otherwise
//! (YARN's LinuxContainerExecutor in non-secure mode: `nobody`, or the submitter); `USER`
//! always names the submitter, as in YARN.
//!
//! Limits are enforced by the executor's [`Enforcement`], chosen once at NM start
//! ([`ProcessExecutor::for_node`], logged in one line, with a warning that says why when
//! cgroups are not used):
//! * **cgroups** ([`crate::cgroups`], which documents layout, names, limits and reclaim): the
//!   container's cgroups are made before the fork, and the child joins them (writes `0` to
//!   each pre-opened `cgroup.procs`) after `setsid` and before `exec`, so nothing it runs
//!   escapes; a failed write fails the spawn, and a cgroup that cannot be made fails the
//!   launch ([`LaunchError::Isolation`], as does a container that must be denied devices on
//!   a node that cannot deny them). When the leader has been reaped, the OOM-kill counter is
//!   read and the cgroups are emptied and removed. An OOM kill is reported as
//!   [`ProcessExit::MemoryExceeded`] (-104, "Container killed for exceeding its memory limit
//!   of N MB"). On v1, where the kernel kills only one process, the monitor
//!   (`yarn.nodemanager.container-monitor.interval-ms`) kills the rest of the container when
//!   the counter moves (cgroup2 does it itself, `memory.oom.group`).
//! * **process tree** (no cgroups: `spindle.nodemanager.cgroups.enabled=false`,
//!   `yarn.nodemanager.container-executor.class` = `...DefaultContainerExecutor`, or none
//!   usable on the machine (not mounted, not writable); and
//!   `yarn.nodemanager.pmem-check-enabled`): every monitor interval the RSS of the container's
//!   process tree (descendants of the leader plus its session) is summed from `/proc`
//!   ([`crate::isolation::proctree`]), and a tree over its limit is killed and reported with
//!   -104. CPU, pids and devices are then not isolated.
//! * **none**: no cgroups and the pmem check disabled.
//!
//! A container update (YARN's `updateContainer`, [`ContainerExecutor::update_limits`])
//! rewrites the memory and CPU limits in the container's cgroups
//! ([`crate::cgroups::Cgroups::update`]) and the memory limit its watcher checks (the
//! process-tree RSS limit, shared with the watch), so both hold the container to its new size.
//!
//! Known limit: a container re-adopted after an NM restart gets cgroup teardown and OOM
//! reporting ([`ContainerExecutor::adopted_ended`]) but no pmem watching and no v1 OOM
//! follow-up.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::fs;
use std::future::Future;
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::AsRawFd;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;

use nix::errno::Errno;
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use spindle_common::ids::ContainerId;
use spindle_common::records::cluster::LocalResourceInfo;
use tracing::{info, warn};

use crate::cgroups::{CgroupError, Cgroups, Layout};
use crate::containers::ProcessExit;
use crate::isolation::{proctree, IsolationConfig, IsolationSpec};

mod localize;
mod spawn;
#[cfg(test)]
use localize::localize;
use localize::localize_as;
pub use localize::{
    resource_source, resource_target, unpack_archive, unpack_reader, ArchiveError, ArchiveFormat,
    SourceError, SourceKind, UserReader, WORK_DIR_KEY,
};
pub use spawn::{Gate, GATE_ABANDONED_EXIT};

/// The name of the exit-code file the wrapper writes in the work dir.
pub const EXIT_CODE_FILE: &str = ".exitcode";

const WRAPPER: &str =
    r#"trap : TERM INT HUP; "$BASH" -c "$1"; rc=$?; printf '%s\n' "$rc" > .exitcode; exit "$rc""#;

/// Everything needed to start one container, decided by the NM before launch.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchSpec {
    pub container_id: ContainerId,
    pub user: String,
    /// The launch context's commands joined with spaces, placeholders expanded.
    pub command: String,
    /// The complete environment of the command (the NM's own is not inherited).
    pub env: BTreeMap<String, String>,
    /// `<local-dir>/usercache/<user>/appcache/<appId>/<containerId>` in the first local dir.
    pub work_dir: PathBuf,
    /// `<local-dir>/usercache/<user>/appcache/<appId>` for every local dir.
    pub app_local_dirs: Vec<PathBuf>,
    /// `<log-dir>/<appId>/<containerId>` for every log dir; stdout/stderr go to the first.
    pub log_dirs: Vec<PathBuf>,
    pub local_resources: BTreeMap<String, LocalResourceInfo>,
    /// Limits to enforce (cgroups, or the process-tree watcher where cgroups are missing).
    pub isolation: crate::isolation::IsolationSpec,
    /// The account the process runs as; None: the NM's own ([`crate::runas`]).
    pub run_as: Option<crate::runas::Credentials>,
}

impl LaunchSpec {
    pub fn stdout_path(&self) -> Option<PathBuf> {
        self.log_dirs.first().map(|d| d.join("stdout"))
    }
    pub fn stderr_path(&self) -> Option<PathBuf> {
        self.log_dirs.first().map(|d| d.join("stderr"))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// A local resource could not be placed in the work dir.
    #[error("{0}")]
    Localization(String),
    /// A local resource's source could not be read as the container's user.
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error("cannot {what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start the container's process: {0}")]
    Spawn(std::io::Error),
    #[error("the started process has no pid (it exited at once)")]
    NoPid,
    #[error("cannot signal process group {pgid}: {source}")]
    Signal { pgid: i32, source: Errno },
    /// The container's cgroups could not be made: it is not run unconfined.
    #[error("cannot isolate the container: {0}")]
    Isolation(#[from] CgroupError),
}

impl LaunchError {
    /// Failures before the process existed count as localization failures.
    pub fn is_localization(&self) -> bool {
        matches!(
            self,
            Self::Localization(_) | Self::Source(_) | Self::Io { .. }
        )
    }
}

fn io_err<'a>(
    what: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> LaunchError + 'a {
    move |source| LaunchError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// Which signal a stop (or a `containers/signal` call) sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    Term,
    Kill,
    /// SIGQUIT: YARN's `OUTPUT_THREAD_DUMP`.
    Quit,
}

/// A started process and the future that resolves when it ends.
pub struct StartedProcess {
    pub pid: i32,
    pub start_ticks: Option<u64>,
    pub exit: Pin<Box<dyn Future<Output = ProcessExit> + Send>>,
    /// Where a held process waits (started with `hold`): open it to let the process run.
    pub gate: Option<spawn::Gate>,
}

/// The OS boundary for containers. Tests of the NM's logic may fake it; a cgroup executor
/// will wrap [`ProcessExecutor`].
pub trait ContainerExecutor: Send + Sync + 'static {
    /// Creates the directories and localizes resources. Blocking: run it off the runtime.
    fn prepare(&self, spec: &LaunchSpec) -> Result<(), LaunchError>;
    /// Starts the process group. Called from within the tokio runtime; must not block long.
    /// With `hold`, the process is set up (cgroups, logs, session) but held before its
    /// `exec` until [`StartedProcess::gate`] is opened; dropping the gate ends it unrun.
    fn start(&self, spec: &LaunchSpec, hold: bool) -> Result<StartedProcess, LaunchError>;
    /// Signals every process of a group. A group that no longer exists is not an error.
    fn signal_group(&self, pgid: i32, signal: StopSignal) -> Result<(), LaunchError>;
    /// True while `pid` is a live (non-zombie) process started at `start_ticks`.
    fn is_alive(&self, pid: i32, start_ticks: Option<u64>) -> bool;
    /// The exit code the wrapper recorded in `work_dir`, if any.
    fn recorded_exit_code(&self, work_dir: &Path) -> Option<i32>;
    /// Called once at NM start, before recovery: removes isolation (cgroups) left by an
    /// earlier NM for containers other than `live` (the ones about to be re-adopted).
    /// Blocking.
    fn reclaim(&self, live: &[ContainerId]) {
        let _ = live;
    }
    /// A container this NM did not start (re-adopted after a restart) has ended: releases
    /// its isolation and refines how it ended (an OOM kill seen in its cgroup). Blocking.
    fn adopted_ended(&self, id: &ContainerId, memory_mb: i64, exit: ProcessExit) -> ProcessExit {
        let _ = (id, memory_mb);
        exit
    }
    /// Applies a live container's new limits (YARN's container update): its cgroups'
    /// memory and CPU limits, and the memory limit its watcher (the process-tree RSS check,
    /// or the OOM report) holds it to. A container with no process yet needs nothing here.
    /// Blocking (the kernel may reclaim memory for a shrink): run it off the runtime.
    fn update_limits(
        &self,
        id: &ContainerId,
        old: &IsolationSpec,
        new: &IsolationSpec,
    ) -> Result<(), LaunchError> {
        let _ = (id, old, new);
        Ok(())
    }
    /// The NM is stopping: removes what the executor made for itself (empty cgroup dirs).
    fn shutdown(&self) {}
}

/// How container limits are enforced on this node.
#[derive(Debug, Clone)]
pub enum Enforcement {
    /// Nothing enforced: no cgroups, and the pmem check is disabled.
    None,
    /// No cgroups: the process tree's RSS is checked every `interval`.
    ProcessTree { interval: Duration },
    /// Each container in its own cgroups; `interval` paces the v1 OOM follow-up.
    Cgroups {
        cgroups: Arc<Cgroups>,
        interval: Duration,
    },
}

/// Runs containers as local process groups of the NM's user.
#[derive(Debug, Clone)]
pub struct ProcessExecutor {
    /// bash, found once in the NM's `PATH`: a container's environment may have no `PATH`.
    bash: PathBuf,
    enforcement: Enforcement,
    /// The memory limit (MB) each watched container is held to, shared with its [`Watch`]
    /// so that a container update changes it live.
    limits: WatchedLimits,
}

/// Memory limits of the containers this executor watches, by container.
type WatchedLimits = Arc<Mutex<HashMap<ContainerId, Arc<AtomicI64>>>>;

impl Default for ProcessExecutor {
    fn default() -> Self {
        Self::new()
    }
}

impl ProcessExecutor {
    pub fn new() -> Self {
        keep_standard_descriptors_open();
        let bash = std::env::var_os("PATH")
            .and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|d| d.join("bash"))
                    .find(|p| p.is_file())
            })
            .unwrap_or_else(|| PathBuf::from("/bin/bash"));
        Self {
            bash,
            enforcement: Enforcement::None,
            limits: WatchedLimits::default(),
        }
    }

    /// An executor that enforces limits as `enforcement` says.
    pub fn with_enforcement(enforcement: Enforcement) -> Self {
        Self {
            enforcement,
            ..Self::new()
        }
    }

    /// The executor of a node: cgroups where the configuration allows them and the machine
    /// has them, else the process-tree watcher (if the pmem check is on), with one warning
    /// that says why. `first_local_dir` names this NM's cgroups ([`crate::cgroups::instance_name`]).
    pub fn for_node(conf: &IsolationConfig, first_local_dir: &Path) -> Self {
        let why_not = if conf.cgroups_enabled {
            let instance = crate::cgroups::instance_name(first_local_dir);
            match Layout::detect()
                .map(|l| match &conf.mount_path {
                    Some(dir) => l.restricted_to(dir),
                    None => l,
                })
                .map_err(|e| CgroupError::Unavailable(format!("cannot read /proc/self: {e}")))
                .and_then(|l| Cgroups::new(&l, conf, &instance))
            {
                Ok(cg) => {
                    info!(cgroups = %cg.describe(), strict_cpu = conf.strict_cpu, pids_limit = conf.pids_limit, "containers run in cgroups");
                    match cg.device_isolation() {
                        Ok(how) => info!(devices = how, "device isolation"),
                        Err(reason) => warn!(
                            %reason,
                            "device isolation is unavailable: containers that must be denied \
                             GPU/FPGA devices will fail to launch"
                        ),
                    }
                    return Self::with_enforcement(Enforcement::Cgroups {
                        cgroups: Arc::new(cg),
                        interval: conf.monitor_interval,
                    });
                }
                Err(e) => e.to_string(),
            }
        } else {
            "disabled by configuration".to_string()
        };
        if conf.pmem_check {
            warn!(
                reason = %why_not,
                interval_ms = conf.monitor_interval.as_millis() as u64,
                "cgroups are not used: container memory is enforced by watching process-tree RSS; \
                 CPU, pids and devices are not isolated"
            );
            Self::with_enforcement(Enforcement::ProcessTree {
                interval: conf.monitor_interval,
            })
        } else {
            warn!(
                reason = %why_not,
                "cgroups are not used and the pmem check is disabled: container limits are not enforced"
            );
            Self::new()
        }
    }

    pub fn enforcement(&self) -> &Enforcement {
        &self.enforcement
    }

    /// The node's cgroups, when containers run in them.
    pub fn cgroups(&self) -> Option<&Arc<Cgroups>> {
        match &self.enforcement {
            Enforcement::Cgroups { cgroups, .. } => Some(cgroups),
            _ => None,
        }
    }
}

/// A daemon started with descriptor 0, 1 or 2 closed would give that number to the next file
/// it opens, and a child's redirection onto 0-2 would then clobber it: each closed one is
/// opened on `/dev/null` (once, and kept for the life of the process).
fn keep_standard_descriptors_open() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for fd in 0..3 {
            // SAFETY: F_GETFD only queries the descriptor's flags.
            if unsafe { nix::libc::fcntl(fd, nix::libc::F_GETFD) } == -1 {
                if let Ok(f) = fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open("/dev/null")
                {
                    // Deliberately leaked: it must stay open at its low number.
                    std::mem::forget(f);
                }
            }
        }
    });
}

/// What watches one running container and tears its isolation down when it ends.
struct Watch {
    enforcement: Enforcement,
    id: ContainerId,
    pid: i32,
    /// The container's memory limit in MB; a container update changes it.
    limit_mb: Arc<AtomicI64>,
    /// Where the executor keeps `limit_mb`: the entry goes when the watch ends.
    registry: WatchedLimits,
}

impl Watch {
    fn limit_mb(&self) -> i64 {
        self.limit_mb.load(Ordering::Relaxed)
    }

    /// How often to check. Checked while the limit is positive (an update can make it so).
    fn interval(&self) -> Option<Duration> {
        match &self.enforcement {
            Enforcement::None => None,
            Enforcement::ProcessTree { interval } | Enforcement::Cgroups { interval, .. } => {
                Some(*interval)
            }
        }
    }

    /// One check; `Some(why)` once the container has been killed for its memory.
    async fn check(&self) -> Option<String> {
        let limit = self.limit_mb();
        if limit <= 0 {
            return None;
        }
        let enforcement = self.enforcement.clone();
        let (id, pid) = (self.id, self.pid);
        tokio::task::spawn_blocking(move || match enforcement {
            Enforcement::None => None,
            Enforcement::ProcessTree { .. } => match proctree::check(pid, limit) {
                proctree::PmemVerdict::Within => None,
                proctree::PmemVerdict::Over { rss_bytes, members } => {
                    proctree::kill_tree(pid, &members);
                    let mb = rss_bytes >> 20;
                    warn!(container_id = %id, app_id = %id.application_id(), rss_mb = mb, limit_mb = limit, "container is over its memory limit: killed");
                    Some(format!("its process tree used {mb} MB (pmem check)"))
                }
            },
            Enforcement::Cgroups { cgroups, .. } => {
                let n = cgroups.oom_kills(&id);
                (n > 0).then(|| {
                    cgroups.kill_all(&id);
                    warn!(container_id = %id, app_id = %id.application_id(), oom_kills = n, limit_mb = limit, "the kernel OOM-killed a container process: container killed");
                    oom_detail(n)
                })
            }
        })
        .await
        .unwrap_or(None)
    }

    /// The leader has been reaped: reads the OOM counter, then empties and removes the
    /// container's cgroups.
    async fn finish(self, exit: ProcessExit, killed: Option<String>) -> ProcessExit {
        let limit_mb = self.limit_mb();
        {
            let mut reg = self
                .registry
                .lock()
                .expect("the watched-limits lock is never poisoned");
            if reg
                .get(&self.id)
                .is_some_and(|l| Arc::ptr_eq(l, &self.limit_mb))
            {
                reg.remove(&self.id);
            }
        }
        let detail = match self.enforcement {
            Enforcement::Cgroups { cgroups, .. } => {
                let id = self.id;
                tokio::task::spawn_blocking(move || teardown(&cgroups, &id))
                    .await
                    .unwrap_or(None)
                    .or(killed)
            }
            _ => killed,
        };
        match detail {
            Some(detail) => ProcessExit::MemoryExceeded { limit_mb, detail },
            None => exit,
        }
    }
}

fn oom_detail(kills: u64) -> String {
    format!("the kernel's OOM killer killed {kills} of its processes")
}

/// Reads the container's OOM kills and removes its cgroups; the OOM detail, if any.
fn teardown(cgroups: &Cgroups, id: &ContainerId) -> Option<String> {
    let n = cgroups.oom_kills(id);
    if let Err(e) = cgroups.destroy(id) {
        warn!(container_id = %id, error = %e, "cannot remove the container's cgroups");
    }
    (n > 0).then(|| oom_detail(n))
}

fn process_exit(st: std::io::Result<std::process::ExitStatus>) -> ProcessExit {
    match st {
        Ok(st) => match (st.code(), st.signal()) {
            (Some(code), _) => ProcessExit::Code(code),
            (None, Some(sig)) => ProcessExit::Signal(sig),
            (None, None) => ProcessExit::Unknown(format!("unrecognised wait status {st}")),
        },
        Err(e) => ProcessExit::Unknown(format!("cannot wait for the container: {e}")),
    }
}

impl ContainerExecutor for ProcessExecutor {
    #[tracing::instrument(name = "localize", skip_all, fields(container_id = %spec.container_id, app_id = %spec.container_id.application_id()))]
    fn prepare(&self, spec: &LaunchSpec) -> Result<(), LaunchError> {
        // The log dir's parent is the NM's own: a container without one was never prepared
        // (a re-initialization prepares an existing one again).
        let fresh = spec.log_dirs.first().is_some_and(|d| !d.exists());
        let run_as_other = spec.run_as.is_some();
        for d in spec
            .app_local_dirs
            .iter()
            .chain((!run_as_other).then_some(&spec.work_dir))
            .chain(spec.log_dirs.iter())
        {
            fs::create_dir_all(d).map_err(io_err("create directory", d))?;
        }
        // Run as another user, the container's application dir is that user's, so the NM
        // writes into the work dir through a descriptor of it, never by its path again.
        let held = if run_as_other {
            Some(open_work_dir(&spec.work_dir, fresh)?)
        } else {
            None
        };
        let root = match &held {
            Some(dir) if Path::new("/proc/self/fd").is_dir() => {
                PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()))
            }
            _ => spec.work_dir.clone(),
        };
        for (key, res) in &spec.local_resources {
            localize_as(&root, key, res, spec.run_as.as_ref())?;
        }
        drop(held);
        if let Some(c) = &spec.run_as {
            // The container's own directories (and what was localized into them) become its
            // user's; the application dirs too, so every container of the app can share them.
            for d in &spec.app_local_dirs {
                std::os::unix::fs::lchown(d, Some(c.uid), Some(c.gid))
                    .map_err(io_err("give to the container's user", d))?;
            }
            for d in std::iter::once(&spec.work_dir).chain(spec.log_dirs.iter()) {
                crate::runas::chown_tree(d, c)
                    .map_err(io_err("give to the container's user", d))?;
            }
        }
        Ok(())
    }

    #[tracing::instrument(name = "launch", skip_all, fields(container_id = %spec.container_id, app_id = %spec.container_id.application_id()))]
    fn start(&self, spec: &LaunchSpec, hold: bool) -> Result<StartedProcess, LaunchError> {
        let (Some(out_path), Some(err_path)) = (spec.stdout_path(), spec.stderr_path()) else {
            return Err(LaunchError::Localization("no log directory".into()));
        };
        let stdout = open_log(&out_path)?;
        let stderr = open_log(&err_path)?;
        if let Some(c) = &spec.run_as {
            for (f, p) in [(&stdout, &out_path), (&stderr, &err_path)] {
                std::os::unix::fs::fchown(f, Some(c.uid), Some(c.gid))
                    .map_err(io_err("give to the container's user", p))?;
            }
        }
        // A plain command (one program, literal arguments) is exec'd directly: bash would do
        // the same in the end, and skipping the wrapper's two bash start-ups matters when a
        // node starts many containers at once (gang start skew). Anything with shell syntax
        // runs through the wrapper, which also records the exit code for recovery.
        let (program, argv): (PathBuf, Vec<&OsStr>) =
            match plain_argv(&spec.command, spec.env.contains_key("PATH")) {
                Some(words) => {
                    let path = spec
                        .env
                        .get("PATH")
                        .map(OsString::from)
                        .or_else(|| std::env::var_os("PATH"))
                        .unwrap_or_default();
                    let Some(program) = spawn::resolve(words[0], &path, &spec.work_dir) else {
                        return Err(LaunchError::Spawn(std::io::Error::new(
                            std::io::ErrorKind::NotFound,
                            format!("{}: command not found in PATH", words[0]),
                        )));
                    };
                    (program, words.into_iter().map(OsStr::new).collect())
                }
                None => (
                    self.bash.clone(),
                    vec![
                        self.bash.as_os_str(),
                        OsStr::new("-c"),
                        OsStr::new(WRAPPER),
                        OsStr::new("spindle-container"),
                        OsStr::new(&spec.command),
                    ],
                ),
            };
        let gate = if hold {
            Some(spawn::Gate::new().map_err(LaunchError::Spawn)?)
        } else {
            None
        };
        let cgroups = self.cgroups().cloned();
        let placement = match &cgroups {
            Some(cg) => Some(cg.create(&spec.container_id, &spec.isolation)?),
            None => None,
        };
        let fds = placement.as_ref().map(|p| p.fds()).unwrap_or_default();
        let spawned = spawn::fork_exec(&spawn::ChildSpec {
            program: &program,
            argv: &argv,
            env: &spec.env,
            dir: &spec.work_dir,
            stdout: &stdout,
            stderr: &stderr,
            cgroup_procs: &fds,
            gate: gate.as_ref(),
            run_as: spec.run_as.as_ref(),
        });
        // The child has joined its cgroups: the parent's descriptors can go.
        drop(placement);
        let pid = match spawned {
            Ok(pid) => pid,
            Err(e) => {
                if let Some(cg) = &cgroups {
                    if let Err(e) = cg.destroy(&spec.container_id) {
                        warn!(error = %e, "cannot remove the cgroups of a container that did not start");
                    }
                }
                return Err(LaunchError::Spawn(e));
            }
        };
        let mut gate = gate;
        if let Some(g) = gate.as_mut() {
            g.forked();
        }
        let start_ticks = proc_start_ticks(pid);
        let limit_mb = Arc::new(AtomicI64::new(spec.isolation.memory_mb));
        self.limits
            .lock()
            .expect("the watched-limits lock is never poisoned")
            .insert(spec.container_id, Arc::clone(&limit_mb));
        let watch = Watch {
            enforcement: self.enforcement.clone(),
            id: spec.container_id,
            pid,
            limit_mb,
            registry: Arc::clone(&self.limits),
        };
        let exit = Box::pin(async move {
            let mut killed: Option<String> = None;
            let mut wait = std::pin::pin!(spawn::wait(pid));
            let status = match watch.interval() {
                None => wait.await,
                Some(every) => {
                    let mut tick = tokio::time::interval(every);
                    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                    tick.tick().await;
                    loop {
                        tokio::select! {
                            st = &mut wait => break st,
                            _ = tick.tick(), if killed.is_none() => {
                                killed = watch.check().await;
                            }
                        }
                    }
                }
            };
            watch.finish(process_exit(status), killed).await
        });
        Ok(StartedProcess {
            pid,
            start_ticks,
            exit,
            gate,
        })
    }

    fn signal_group(&self, pgid: i32, signal: StopSignal) -> Result<(), LaunchError> {
        if pgid <= 1 {
            // Never signal "every process" (0, -1) or init, whatever the store says.
            return Ok(());
        }
        let sig = match signal {
            StopSignal::Term => Signal::SIGTERM,
            StopSignal::Kill => Signal::SIGKILL,
            StopSignal::Quit => Signal::SIGQUIT,
        };
        match killpg(Pid::from_raw(pgid), sig) {
            Ok(()) | Err(Errno::ESRCH) => Ok(()),
            Err(source) => Err(LaunchError::Signal { pgid, source }),
        }
    }

    fn is_alive(&self, pid: i32, start_ticks: Option<u64>) -> bool {
        if pid <= 1 {
            return false;
        }
        match kill(Pid::from_raw(pid), None) {
            Ok(()) => {}
            // EPERM: the pid now belongs to another user's process, so not ours.
            Err(_) => return false,
        }
        match proc_stat(pid) {
            Some((state, ticks)) => {
                let zombie = matches!(state, 'Z' | 'X');
                let same = match (start_ticks, ticks) {
                    (Some(want), Some(got)) => want == got,
                    _ => true,
                };
                !zombie && same
            }
            // No /proc: trust kill(2).
            None => true,
        }
    }

    fn recorded_exit_code(&self, work_dir: &Path) -> Option<i32> {
        let mut text = String::new();
        open_plain_file(&work_dir.join(EXIT_CODE_FILE))
            .ok()?
            .take(64)
            .read_to_string(&mut text)
            .ok()?;
        text.trim().parse().ok()
    }

    fn reclaim(&self, live: &[ContainerId]) {
        if let Some(cg) = self.cgroups() {
            let keep = live.iter().map(ToString::to_string).collect();
            let n = cg.reclaim(&keep);
            if n > 0 {
                info!(
                    reclaimed = n,
                    "removed stale container cgroups left by an earlier NodeManager"
                );
            }
        }
    }

    fn adopted_ended(&self, id: &ContainerId, memory_mb: i64, exit: ProcessExit) -> ProcessExit {
        match self.cgroups() {
            Some(cg) => match teardown(cg, id) {
                Some(detail) => ProcessExit::MemoryExceeded {
                    limit_mb: memory_mb,
                    detail,
                },
                None => exit,
            },
            None => exit,
        }
    }

    fn update_limits(
        &self,
        id: &ContainerId,
        old: &IsolationSpec,
        new: &IsolationSpec,
    ) -> Result<(), LaunchError> {
        if let Some(cg) = self.cgroups() {
            cg.update(id, old, new)?;
        }
        if let Some(l) = self
            .limits
            .lock()
            .expect("the watched-limits lock is never poisoned")
            .get(id)
        {
            l.store(new.memory_mb, Ordering::Relaxed);
        }
        info!(container_id = %id, memory_mb = new.memory_mb, vcores = new.vcores, "container limits updated");
        Ok(())
    }

    fn shutdown(&self) {
        if let Some(cg) = self.cgroups() {
            cg.shutdown();
        }
    }
}

/// bash builtins and keywords: a command starting with one must run in bash.
const SHELL_WORDS: &[&str] = &[
    "!",
    ".",
    ":",
    "[",
    "[[",
    "alias",
    "bg",
    "bind",
    "break",
    "builtin",
    "caller",
    "case",
    "cd",
    "command",
    "compgen",
    "complete",
    "continue",
    "coproc",
    "declare",
    "dirs",
    "disown",
    "do",
    "done",
    "echo",
    "elif",
    "else",
    "enable",
    "esac",
    "eval",
    "exec",
    "exit",
    "export",
    "false",
    "fc",
    "fg",
    "fi",
    "for",
    "function",
    "getopts",
    "hash",
    "help",
    "history",
    "if",
    "in",
    "jobs",
    "kill",
    "let",
    "local",
    "logout",
    "mapfile",
    "popd",
    "printf",
    "pushd",
    "pwd",
    "read",
    "readarray",
    "readonly",
    "return",
    "select",
    "set",
    "shift",
    "shopt",
    "source",
    "suspend",
    "test",
    "then",
    "time",
    "times",
    "trap",
    "true",
    "type",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "unset",
    "until",
    "wait",
    "while",
];

/// The argv of a command bash would run as one plain program with literal arguments (no
/// quotes, expansions, redirections, globs, operators or assignments), or None. A program
/// without a slash needs the container's `PATH` to be found; a relative path with a slash is
/// left to bash, whose meaning of it (the work dir) is certain.
pub fn plain_argv(command: &str, has_path: bool) -> Option<Vec<&str>> {
    let plain =
        |c: char| c.is_ascii_alphanumeric() || "_./:,@%+=-".contains(c) || c == ' ' || c == '\t';
    if !command.chars().all(plain) {
        return None;
    }
    let mut words: Vec<&str> = command.split_ascii_whitespace().collect();
    // `exec prog args` is what bash would do with a plain command anyway.
    if words.first() == Some(&"exec") {
        words.remove(0);
    }
    let prog = *words.first()?;
    // `X=1 prog` is an assignment; a builtin or keyword needs bash.
    if prog.contains('=') || SHELL_WORDS.contains(&prog) {
        return None;
    }
    let absolute = prog.starts_with('/');
    if !absolute && (prog.contains('/') || !has_path) {
        return None;
    }
    Some(words)
}

/// The work dir of a container run as another user, opened without following a link. Its
/// parent (the application's dir) belongs to that user, so anything may have been put at its
/// place before the NM makes it: for a container never prepared (`fresh`), whatever is there
/// (a link to a root directory, say) is removed and a new directory made, which must then be
/// the NM's own. A re-initialized container's existing work dir must be a directory, not a
/// link.
fn open_work_dir(work_dir: &Path, fresh: bool) -> Result<fs::File, LaunchError> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    if let Some(parent) = work_dir.parent() {
        fs::create_dir_all(parent).map_err(io_err("create directory", parent))?;
    }
    if fresh {
        match fs::symlink_metadata(work_dir) {
            Ok(m) => {
                warn!(dir = %work_dir.display(), "removing what was put at a new container's work dir before the NodeManager made it");
                let removed = if m.is_dir() {
                    fs::remove_dir_all(work_dir)
                } else {
                    fs::remove_file(work_dir)
                };
                removed.map_err(io_err("remove what was put at", work_dir))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err("inspect", work_dir)(e)),
        }
        fs::create_dir(work_dir).map_err(io_err("create directory", work_dir))?;
    } else if let Err(e) = fs::create_dir(work_dir) {
        if e.kind() != std::io::ErrorKind::AlreadyExists {
            return Err(io_err("create directory", work_dir)(e));
        }
    }
    let dir = fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_DIRECTORY)
        .open(work_dir)
        .map_err(|e| {
            LaunchError::Localization(format!(
                "the work directory {} is not a plain directory (a link?): {e}",
                work_dir.display()
            ))
        })?;
    let meta = dir.metadata().map_err(io_err("inspect", work_dir))?;
    if fresh && meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err(LaunchError::Localization(format!(
            "the new work directory {} is not the NodeManager's own (uid {})",
            work_dir.display(),
            meta.uid()
        )));
    }
    Ok(dir)
}

/// Opens (creating) a container's log file for appending. The container owns its log dir,
/// so the file is opened without following a link (`O_NOFOLLOW`, `O_NONBLOCK` so a fifo
/// cannot hang the NM) and must be a regular file with one link: a log replaced by a link
/// to another file (before a re-initialization, say) is never written or given away.
fn open_log(path: &Path) -> Result<fs::File, LaunchError> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(io_err("open log file", path))?;
    check_plain(&f).map_err(io_err("open log file", path))?;
    Ok(f)
}

/// Whether an opened file is a regular file with exactly one link; else an error saying
/// what it is.
fn check_plain(f: &fs::File) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let m = f.metadata()?;
    if !m.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if m.nlink() != 1 {
        return Err(std::io::Error::other(format!(
            "a regular file with {} hard links",
            m.nlink()
        )));
    }
    Ok(())
}

/// Opens a file a container may have replaced (in its work or log dir) for reading, as
/// [`open_log`] does: no link followed, no fifo waited on, a regular file with one link.
pub fn open_plain_file(path: &Path) -> std::io::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)?;
    check_plain(&f)?;
    Ok(f)
}

/// `(state, starttime)` from `/proc/<pid>/stat`.
fn proc_stat(pid: i32) -> Option<(char, Option<u64>)> {
    let s = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses; fields resume after the last ')'.
    let rest = &s[s.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    // starttime is field 22 of the line, the 20th after the state (field 3).
    let ticks = fields.nth(18).and_then(|t| t.parse().ok());
    Some((state, ticks))
}

/// The process's start time in clock ticks since boot (Linux), to detect pid reuse.
pub fn proc_start_ticks(pid: i32) -> Option<u64> {
    proc_stat(pid).and_then(|(_, t)| t)
}

/// The last `max` bytes of a file, lossily decoded; empty if unreadable or not a plain
/// file ([`open_plain_file`]: a container's stderr replaced by a link is not read).
pub fn file_tail(path: &Path, max: u64) -> String {
    let Ok(mut f) = open_plain_file(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(max);
    if f.seek(SeekFrom::Start(start)).is_err() {
        return String::new();
    }
    let mut buf = Vec::new();
    let _ = f.take(max).read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// Expands YARN's command placeholders: `<LOG_DIR>` (the container's first log dir),
/// `<CPS>` (the class-path separator) and `{{VAR}}` (`$VAR`, YARN's cross-platform form).
pub fn expand_placeholders(s: &str, log_dir: &Path) -> String {
    let mut out = s
        .replace("<LOG_DIR>", &log_dir.to_string_lossy())
        .replace("<CPS>", ":");
    while let Some(start) = out.find("{{") {
        let Some(len) = out[start + 2..].find("}}") else {
            break;
        };
        let name = out[start + 2..start + 2 + len].to_string();
        out.replace_range(start..start + 2 + len + 2, &format!("${name}"));
    }
    out
}

#[cfg(test)]
mod tests;
