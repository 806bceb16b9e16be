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
//! **The seam.** The container lifecycle (`crate::containers`, `crate::manager`) knows a
//! started container only by the [`ExecHandle`] its executor returned: it keeps it, signals
//! it ([`ContainerExecutor::signal`]), waits on the exit future the start returned, persists
//! it in the recovery store and re-attaches to it after a restart
//! ([`ContainerExecutor::reattach`]). Pids and process groups are [`ProcessExecutor`]'s
//! business alone (`launcher/process.rs`), so another executor (an OCI runtime) can name its
//! containers its own way without touching the lifecycle.
//!
//! Files: `process.rs` ([`ProcessExecutor`]), `spawn.rs` (fork and exec), `mounts.rs` (a
//! child's private mounts, for the OCI executor's leader, [`crate::oci`]), `watch.rs` (the
//! memory watch and teardown of one container), `localize.rs` (local resources),
//! `command.rs` (the command line), `files.rs` (files in a container's directories),
//! `handle.rs` ([`ExecHandle`]).
//!
//! Known limit: a container re-adopted after an NM restart gets cgroup teardown and OOM
//! reporting ([`ProcessExecutor::adopted_ended`]) but no pmem watching and no v1 OOM
//! follow-up.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;

use nix::errno::Errno;
use spindle_common::ids::ContainerId;
use spindle_common::records::cluster::LocalResourceInfo;

use crate::cgroups::CgroupError;
use crate::containers::ProcessExit;
use crate::isolation::IsolationSpec;

mod command;
pub mod fetch;
mod files;
mod handle;
mod localize;
mod mounts;
mod process;
mod remote;
mod spawn;
mod watch;

pub use command::{expand_placeholders, plain_argv};
use files::io_err;
pub(crate) use files::open_log;
pub use files::{file_tail, open_plain_file};
pub use handle::ExecHandle;
#[cfg(test)]
use localize::localize;
pub use localize::{
    resource_source, resource_target, unpack_archive, unpack_reader, ArchiveError, ArchiveFormat,
    SourceError, SourceKind, UserReader, WORK_DIR_KEY,
};
pub use process::{proc_start_ticks, Enforcement, ProcessExecutor, EXIT_CODE_FILE};
pub(crate) use process::{signal_group, Leader};
pub use spawn::{Gate, PrivateMounts, GATE_ABANDONED_EXIT};

/// How often a re-adopted container (not the NM's child) is checked for life.
pub const ADOPTED_POLL_INTERVAL: std::time::Duration = std::time::Duration::from_millis(500);

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
    /// A container token of the container's application, signed by the NM's current
    /// container-token master key: what blobs of the RM's blob store are fetched with.
    pub fetch_token: Option<String>,
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
    /// A remote resource (an RM blob, an HTTP(S) URL) could not be fetched, or its size or
    /// digest was not the expected one.
    #[error(transparent)]
    Fetch(Box<fetch::FetchError>),
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
    #[error("cannot signal {handle}: {source}")]
    Signal { handle: ExecHandle, source: Errno },
    /// The container's cgroups could not be made: it is not run unconfined.
    #[error("cannot isolate the container: {0}")]
    Isolation(#[from] CgroupError),
    /// An OCI container's request was refused, or its image or bundle could not be had.
    #[error(transparent)]
    Oci(#[from] crate::oci::OciError),
}

impl LaunchError {
    /// Failures before the process existed count as localization failures.
    pub fn is_localization(&self) -> bool {
        matches!(
            self,
            Self::Localization(_)
                | Self::Source(_)
                | Self::Fetch(_)
                | Self::Io { .. }
                | Self::Oci(crate::oci::OciError::Image { .. })
        )
    }

    /// The exit code a container that failed this way reports (7 for a refused runtime
    /// request, YARN's shape); None: no process ran, no code.
    pub fn exit_status(&self) -> Option<i32> {
        match self {
            Self::Oci(e) => e.exit_status(),
            _ => None,
        }
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

/// Resolves when a container's process ends, with how it ended.
pub type ExitFuture = Pin<Box<dyn Future<Output = ProcessExit> + Send>>;

/// A started process and the future that resolves when it ends.
pub struct StartedProcess {
    /// What the lifecycle keeps to signal it and to re-attach to it after a restart.
    pub handle: ExecHandle,
    pub exit: ExitFuture,
    /// Where a held process waits (started with `hold`): open it to let the process run.
    pub gate: Option<spawn::Gate>,
}

/// The OS boundary for containers: everything the lifecycle asks of the machine, with the
/// container named by the [`ExecHandle`] the executor gave it. Tests of the NM's logic may
/// fake it; [`ProcessExecutor`] runs process groups; an OCI runtime can be another.
pub trait ContainerExecutor: Send + Sync + 'static {
    /// Creates the directories and localizes resources. Blocking: run it off the runtime.
    fn prepare(&self, spec: &LaunchSpec) -> Result<(), LaunchError>;
    /// Starts the process group. Called from within the tokio runtime; must not block long.
    /// With `hold`, the process is set up (cgroups, logs, session) but held before its
    /// `exec` until [`StartedProcess::gate`] is opened; dropping the gate ends it unrun.
    fn start(&self, spec: &LaunchSpec, hold: bool) -> Result<StartedProcess, LaunchError>;
    /// A prepared container will not be started (stopped while it was localized): drops
    /// what `prepare` made for its start beyond its directories (an OCI bundle). Blocking.
    fn discard(&self, id: &ContainerId) {
        let _ = id;
    }
    /// Signals every process of the container `handle` names. One that no longer exists is
    /// not an error.
    fn signal(&self, handle: &ExecHandle, signal: StopSignal) -> Result<(), LaunchError>;
    /// Re-attaches to a container an earlier NM started (recovery): a future for its end if
    /// it still runs, else how it ended while nobody watched (its isolation released).
    /// Blocking: called once per container at NM start.
    fn reattach(&self, handle: &ExecHandle, adoptee: &Adoptee<'_>) -> Reattached;
    /// Called once at NM start, before recovery: removes isolation (cgroups) left by an
    /// earlier NM for containers other than `live` (the ones about to be re-adopted).
    /// Blocking.
    fn reclaim(&self, live: &[ContainerId]) {
        let _ = live;
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
    /// What a container not yet running is waiting for, for its diagnostics (an image
    /// pull's progress); None when there is nothing to say.
    fn progress(&self, id: &ContainerId) -> Option<String> {
        let _ = id;
        None
    }
}

/// What recovery knows of a container it re-attaches to.
#[derive(Debug, Clone)]
pub struct Adoptee<'a> {
    pub id: ContainerId,
    pub work_dir: &'a Path,
    /// The memory limit it runs under, for an OOM kill found when it ends.
    pub memory_mb: i64,
}

/// A container found by [`ContainerExecutor::reattach`].
pub enum Reattached {
    /// It still runs: the future resolves when it ends.
    Running(ExitFuture),
    /// It ended while no NM watched it.
    Ended(ProcessExit),
}

#[cfg(test)]
mod tests;
