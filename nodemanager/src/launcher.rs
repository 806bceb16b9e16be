//! Starting and stopping container processes: the [`ContainerExecutor`] seam and the one
//! real implementation, [`ProcessExecutor`].
//!
//! A container is a process group of its own (`setsid`), so that a stop reaches every
//! process it started. Its leader is a small bash wrapper that runs the launch context's
//! command as `bash -c "<commands joined by spaces>"` and then records the exit code in
//! `<work dir>/.exitcode`:
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
//! Containers run as the NodeManager's own user: there is no setuid launch yet (YARN's
//! LinuxContainerExecutor), so `USER` names the submitter but the uid is the NM's.
//! Resource isolation (cgroups) and device plugins hook in by wrapping or replacing this
//! executor and through [`crate::plugins`]; none exist yet.

use std::collections::BTreeMap;
use std::fs;
use std::future::Future;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::ExitStatusExt;
use std::path::{Component, Path, PathBuf};
use std::pin::Pin;
use std::process::Stdio;

use nix::errno::Errno;
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use spindle_common::ids::ContainerId;
use spindle_common::records::cluster::LocalResourceInfo;

use crate::containers::ProcessExit;

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
    #[error("cannot {what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start bash: {0}")]
    Spawn(std::io::Error),
    #[error("the started process has no pid (it exited at once)")]
    NoPid,
    #[error("cannot signal process group {pgid}: {source}")]
    Signal { pgid: i32, source: Errno },
}

impl LaunchError {
    /// Failures before the process existed count as localization failures.
    pub fn is_localization(&self) -> bool {
        matches!(self, Self::Localization(_) | Self::Io { .. })
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

/// Which signal a stop sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    Term,
    Kill,
}

/// A started process and the future that resolves when it ends.
pub struct StartedProcess {
    pub pid: i32,
    pub start_ticks: Option<u64>,
    pub exit: Pin<Box<dyn Future<Output = ProcessExit> + Send>>,
}

/// The OS boundary for containers. Tests of the NM's logic may fake it; a cgroup executor
/// will wrap [`ProcessExecutor`].
pub trait ContainerExecutor: Send + Sync + 'static {
    /// Creates the directories and localizes resources. Blocking: run it off the runtime.
    fn prepare(&self, spec: &LaunchSpec) -> Result<(), LaunchError>;
    /// Starts the process group. Called from within the tokio runtime; must not block long.
    fn start(&self, spec: &LaunchSpec) -> Result<StartedProcess, LaunchError>;
    /// Signals every process of a group. A group that no longer exists is not an error.
    fn signal_group(&self, pgid: i32, signal: StopSignal) -> Result<(), LaunchError>;
    /// True while `pid` is a live (non-zombie) process started at `start_ticks`.
    fn is_alive(&self, pid: i32, start_ticks: Option<u64>) -> bool;
    /// The exit code the wrapper recorded in `work_dir`, if any.
    fn recorded_exit_code(&self, work_dir: &Path) -> Option<i32>;
}

/// Runs containers as local process groups of the NM's user.
#[derive(Debug, Clone)]
pub struct ProcessExecutor {
    /// bash, found once in the NM's `PATH`: a container's environment may have no `PATH`.
    bash: PathBuf,
}

impl Default for ProcessExecutor {
    fn default() -> Self {
        Self::new()
    }
}

impl ProcessExecutor {
    pub fn new() -> Self {
        let bash = std::env::var_os("PATH")
            .and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|d| d.join("bash"))
                    .find(|p| p.is_file())
            })
            .unwrap_or_else(|| PathBuf::from("/bin/bash"));
        Self { bash }
    }
}

impl ContainerExecutor for ProcessExecutor {
    fn prepare(&self, spec: &LaunchSpec) -> Result<(), LaunchError> {
        for d in spec
            .app_local_dirs
            .iter()
            .chain(std::iter::once(&spec.work_dir))
            .chain(spec.log_dirs.iter())
        {
            fs::create_dir_all(d).map_err(io_err("create directory", d))?;
        }
        for (key, res) in &spec.local_resources {
            localize(&spec.work_dir, key, res)?;
        }
        Ok(())
    }

    fn start(&self, spec: &LaunchSpec) -> Result<StartedProcess, LaunchError> {
        let (Some(out_path), Some(err_path)) = (spec.stdout_path(), spec.stderr_path()) else {
            return Err(LaunchError::Localization("no log directory".into()));
        };
        let stdout = open_log(&out_path)?;
        let stderr = open_log(&err_path)?;
        let mut cmd = tokio::process::Command::new(&self.bash);
        cmd.arg("-c")
            .arg(WRAPPER)
            .arg("spindle-container")
            .arg(&spec.command)
            .current_dir(&spec.work_dir)
            .env_clear()
            .envs(&spec.env)
            .stdin(Stdio::null())
            .stdout(Stdio::from(stdout))
            .stderr(Stdio::from(stderr))
            .kill_on_drop(false);
        // SAFETY: the closure runs in the forked child before exec and only calls setsid(2),
        // which is async-signal-safe; it touches no memory shared with the parent.
        unsafe {
            cmd.pre_exec(|| {
                nix::unistd::setsid()
                    .map(|_| ())
                    .map_err(std::io::Error::from)
            });
        }
        let mut child = cmd.spawn().map_err(LaunchError::Spawn)?;
        let pid = child
            .id()
            .and_then(|p| i32::try_from(p).ok())
            .ok_or(LaunchError::NoPid)?;
        let start_ticks = proc_start_ticks(pid);
        let exit = Box::pin(async move {
            match child.wait().await {
                Ok(st) => match (st.code(), st.signal()) {
                    (Some(code), _) => ProcessExit::Code(code),
                    (None, Some(sig)) => ProcessExit::Signal(sig),
                    (None, None) => ProcessExit::Unknown(format!("unrecognised wait status {st}")),
                },
                Err(e) => ProcessExit::Unknown(format!("cannot wait for the container: {e}")),
            }
        });
        Ok(StartedProcess {
            pid,
            start_ticks,
            exit,
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
        fs::read_to_string(work_dir.join(EXIT_CODE_FILE))
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

fn open_log(path: &Path) -> Result<fs::File, LaunchError> {
    fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io_err("open log file", path))
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

/// The source path of a local resource: a `file://` URL (host empty or `localhost`) or an
/// absolute path. Anything else is refused: Spindle has no distributed file system.
pub fn resource_source(url: &str) -> Result<PathBuf, String> {
    let path = if let Some(rest) = url.strip_prefix("file://") {
        let rest = rest.strip_prefix("localhost").unwrap_or(rest);
        if !rest.starts_with('/') {
            return Err(format!(
                "resource URL '{url}' names a remote host; only local files can be localized"
            ));
        }
        rest.to_string()
    } else if let Some(rest) = url.strip_prefix("file:") {
        rest.to_string()
    } else if url.starts_with('/') {
        return Ok(PathBuf::from(url));
    } else {
        return Err(format!(
            "resource URL '{url}' is not supported: expected file:// or an absolute path"
        ));
    };
    if !path.starts_with('/') {
        return Err(format!("resource URL '{url}' is not an absolute file path"));
    }
    let decoded = urlencoding::decode(&path)
        .map_err(|_| format!("resource URL '{url}' is not valid percent-encoded UTF-8"))?;
    Ok(PathBuf::from(decoded.into_owned()))
}

/// A resource key must name a place inside the work dir.
fn resource_target(work_dir: &Path, key: &str) -> Result<PathBuf, String> {
    let rel = Path::new(key);
    if key.is_empty() || !rel.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(format!(
            "local resource name '{key}' must be a relative path without '..'"
        ));
    }
    Ok(work_dir.join(rel))
}

fn localize(work_dir: &Path, key: &str, res: &LocalResourceInfo) -> Result<(), LaunchError> {
    let kind = res.kind.to_ascii_uppercase();
    if !(kind.is_empty() || kind == "FILE") {
        return Err(LaunchError::Localization(format!(
            "local resource '{key}': type {} is not supported (only FILE)",
            res.kind
        )));
    }
    let src = resource_source(&res.resource)
        .map_err(|m| LaunchError::Localization(format!("local resource '{key}': {m}")))?;
    let dst = resource_target(work_dir, key).map_err(LaunchError::Localization)?;
    let meta = fs::metadata(&src).map_err(|e| {
        LaunchError::Localization(format!(
            "local resource '{key}': cannot read {}: {e}",
            src.display()
        ))
    })?;
    if let Some(parent) = dst.parent() {
        fs::create_dir_all(parent).map_err(io_err("create directory", parent))?;
    }
    if meta.is_dir() {
        copy_dir(&src, &dst)
    } else {
        // fs::copy keeps the permission bits, so executables stay executable.
        fs::copy(&src, &dst).map(|_| ()).map_err(|e| {
            LaunchError::Localization(format!(
                "local resource '{key}': cannot copy {}: {e}",
                src.display()
            ))
        })
    }
}

fn copy_dir(src: &Path, dst: &Path) -> Result<(), LaunchError> {
    fs::create_dir_all(dst).map_err(io_err("create directory", dst))?;
    let perms = fs::metadata(src)
        .map_err(io_err("read", src))?
        .permissions();
    for entry in fs::read_dir(src).map_err(io_err("read directory", src))? {
        let entry = entry.map_err(io_err("read directory", src))?;
        let from = entry.path();
        let to = dst.join(entry.file_name());
        let ft = entry.file_type().map_err(io_err("read", &from))?;
        if ft.is_dir() {
            copy_dir(&from, &to)?;
        } else {
            fs::copy(&from, &to).map_err(io_err("copy", &from))?;
        }
    }
    fs::set_permissions(dst, perms).map_err(io_err("set permissions on", dst))
}

/// The last `max` bytes of a file, lossily decoded; empty if unreadable.
pub fn file_tail(path: &Path, max: u64) -> String {
    let Ok(mut f) = fs::File::open(path) else {
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
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn resource_urls() {
        assert_eq!(
            resource_source("file:///a/b").unwrap(),
            PathBuf::from("/a/b")
        );
        assert_eq!(
            resource_source("file://localhost/a%20b").unwrap(),
            PathBuf::from("/a b")
        );
        assert_eq!(resource_source("file:/x").unwrap(), PathBuf::from("/x"));
        assert_eq!(resource_source("/abs").unwrap(), PathBuf::from("/abs"));
        assert!(resource_source("hdfs://nn/x")
            .unwrap_err()
            .contains("not supported"));
        assert!(resource_source("file://other/x")
            .unwrap_err()
            .contains("remote host"));
        assert!(resource_source("rel/x").is_err());
        let w = Path::new("/w");
        assert_eq!(resource_target(w, "a/b").unwrap(), PathBuf::from("/w/a/b"));
        for bad in ["", "../x", "/abs", "a/../../b", "."] {
            assert!(resource_target(w, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn placeholders() {
        let s = expand_placeholders("x 1><LOG_DIR>/stdout {{HOME}} a<CPS>b {{", Path::new("/l"));
        assert_eq!(s, "x 1>/l/stdout $HOME a:b {{");
    }

    #[test]
    fn localization_copies_with_mode_and_refuses_missing() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("tool.sh");
        fs::write(&src, "echo hi").unwrap();
        fs::set_permissions(&src, fs::Permissions::from_mode(0o755)).unwrap();
        let work = d.path().join("work");
        fs::create_dir_all(&work).unwrap();
        let res = LocalResourceInfo {
            resource: format!("file://{}", src.display()),
            kind: "FILE".into(),
            ..Default::default()
        };
        localize(&work, "bin/tool.sh", &res).unwrap();
        let mode = fs::metadata(work.join("bin/tool.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
        let missing = LocalResourceInfo {
            resource: "/no/such/file".into(),
            ..Default::default()
        };
        let e = localize(&work, "m", &missing).unwrap_err();
        assert!(e.is_localization());
        assert!(e.to_string().contains("/no/such/file"), "{e}");
    }

    #[test]
    fn tails_and_proc_stat() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        fs::write(&p, "0123456789").unwrap();
        assert_eq!(file_tail(&p, 4), "6789");
        assert_eq!(file_tail(&p, 100), "0123456789");
        assert_eq!(file_tail(&d.path().join("none"), 4), "");
        let me = std::process::id() as i32;
        let ticks = proc_start_ticks(me);
        assert!(ticks.is_some());
        let ex = ProcessExecutor::new();
        assert!(ex.is_alive(me, ticks));
        assert!(!ex.is_alive(me, ticks.map(|t| t + 1)));
        assert!(!ex.is_alive(0, None));
        assert!(!ex.is_alive(1, None));
    }
}
