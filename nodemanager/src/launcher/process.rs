//! The process executor: containers as local process groups (see the module above for the
//! wrapper, the fork and the enforcement). The only place that turns an [`ExecHandle`] into
//! a pid to signal or to check for life.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use spindle_common::ids::ContainerId;
use tracing::{info, warn};

use super::command::plain_argv;
use super::files::{open_log, open_plain_file, open_work_dir};
use super::remote::{localize_resource, Remotes};
use super::watch::{teardown, Watch, WatchedLimits};
use super::{
    io_err, spawn, Adoptee, ContainerExecutor, ExecHandle, LaunchError, LaunchSpec, Reattached,
    StartedProcess, StopSignal, ADOPTED_POLL_INTERVAL,
};
use crate::cgroups::{CgroupError, Cgroups, Layout};
use crate::containers::ProcessExit;
use crate::isolation::{IsolationConfig, IsolationSpec};

/// The name of the exit-code file the wrapper writes in the work dir.
pub const EXIT_CODE_FILE: &str = ".exitcode";

const WRAPPER: &str =
    r#"trap : TERM INT HUP; "$BASH" -c "$1"; rc=$?; printf '%s\n' "$rc" > .exitcode; exit "$rc""#;

/// What a container's leader process runs, where and as whom (see
/// [`ProcessExecutor::start_leader`]).
pub(crate) struct Leader<'a> {
    pub program: &'a Path,
    /// argv, `argv[0]` included.
    pub argv: &'a [&'a OsStr],
    pub env: &'a BTreeMap<String, String>,
    pub dir: &'a Path,
    pub run_as: Option<&'a crate::runas::Credentials>,
    pub mounts: Option<&'a spawn::PrivateMounts>,
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
    /// Fetches remote local resources (RM blobs, HTTP(S) URLs); None: they are refused.
    fetcher: Option<Arc<super::fetch::Fetcher>>,
}

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
            fetcher: None,
        }
    }

    /// This executor, fetching remote local resources with `fetcher`.
    pub fn with_fetcher(mut self, fetcher: super::fetch::Fetcher) -> Self {
        self.fetcher = Some(Arc::new(fetcher));
        self
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

    /// True while the process group's leader is a live (non-zombie) process started when
    /// the handle says (a reused pid is someone else's).
    pub fn is_alive(&self, handle: &ExecHandle) -> bool {
        let Some((pid, start_ticks)) = handle.as_process_group() else {
            return false;
        };
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

    /// The exit code the wrapper recorded in `work_dir`, if any.
    pub fn recorded_exit_code(&self, work_dir: &Path) -> Option<i32> {
        let mut text = String::new();
        open_plain_file(&work_dir.join(EXIT_CODE_FILE))
            .ok()?
            .take(64)
            .read_to_string(&mut text)
            .ok()?;
        text.trim().parse().ok()
    }

    /// Forks a container's leader into the container's cgroups, with its logs as stdout
    /// and stderr, and watches it: the process executor's own start, and the OCI executor's
    /// (whose leader is the runtime, `crun run`). The handle names the leader's process group.
    pub(crate) fn start_leader(
        &self,
        spec: &LaunchSpec,
        leader: &Leader<'_>,
        hold: bool,
    ) -> Result<StartedProcess, LaunchError> {
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
            program: leader.program,
            argv: leader.argv,
            env: leader.env,
            dir: leader.dir,
            stdout: &stdout,
            stderr: &stderr,
            cgroup_procs: &fds,
            gate: gate.as_ref(),
            run_as: leader.run_as,
            mounts: leader.mounts,
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
            handle: ExecHandle::process_group(pid, start_ticks),
            exit,
            gate,
        })
    }

    /// How a container that ended unwatched ended: the code its wrapper recorded, or unknown.
    pub(crate) fn recorded_exit(&self, work_dir: &Path) -> ProcessExit {
        match self.recorded_exit_code(work_dir) {
            Some(code) => ProcessExit::Code(code),
            None => ProcessExit::Unknown(
                "The container's process ended while it was not watched by this NodeManager; \
                 its exit status is unknown."
                    .into(),
            ),
        }
    }

    /// A container this NM did not start (re-adopted after a restart) has ended: releases
    /// its isolation and refines how it ended (an OOM kill seen in its cgroup). Blocking.
    pub fn adopted_ended(
        &self,
        id: &ContainerId,
        memory_mb: i64,
        exit: ProcessExit,
    ) -> ProcessExit {
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
        let remotes = Remotes {
            fetcher: self.fetcher.as_deref(),
            token: spec.fetch_token.as_deref(),
            scratch: spec.app_local_dirs.first().unwrap_or(&spec.work_dir),
        };
        for (key, res) in &spec.local_resources {
            localize_resource(&root, key, res, spec.run_as.as_ref(), remotes)?;
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
        self.start_leader(
            spec,
            &Leader {
                program: &program,
                argv: &argv,
                env: &spec.env,
                dir: &spec.work_dir,
                run_as: spec.run_as.as_ref(),
                mounts: None,
            },
            hold,
        )
    }

    fn signal(&self, handle: &ExecHandle, signal: StopSignal) -> Result<(), LaunchError> {
        match handle.as_process_group() {
            Some((pgid, _)) => signal_group(pgid, signal, handle),
            None => Ok(()),
        }
    }

    fn reattach(&self, handle: &ExecHandle, adoptee: &Adoptee<'_>) -> Reattached {
        let (id, memory_mb) = (adoptee.id, adoptee.memory_mb);
        if !self.is_alive(handle) {
            let exit = self.recorded_exit(adoptee.work_dir);
            return Reattached::Ended(self.adopted_ended(&id, memory_mb, exit));
        }
        // Not our child: its end is seen by polling, its exit code read from the wrapper's file.
        let (ex, handle, work_dir) = (self.clone(), handle.clone(), adoptee.work_dir.to_owned());
        Reattached::Running(Box::pin(async move {
            loop {
                tokio::time::sleep(ADOPTED_POLL_INTERVAL).await;
                if !ex.is_alive(&handle) {
                    break;
                }
            }
            let exit = ex.recorded_exit(&work_dir);
            tokio::task::spawn_blocking(move || ex.adopted_ended(&id, memory_mb, exit))
                .await
                .unwrap_or_else(|e| ProcessExit::Unknown(format!("cannot clean up: {e}")))
        }))
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

/// Signals the process group `pgid` (of the container `handle` names); one that no longer
/// exists is not an error.
pub(crate) fn signal_group(
    pgid: i32,
    signal: StopSignal,
    handle: &ExecHandle,
) -> Result<(), LaunchError> {
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
        Err(source) => Err(LaunchError::Signal {
            handle: handle.clone(),
            source,
        }),
    }
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
