//! Runs a discovery executable (`nvidia-smi`, `aocl`) under a deadline.
//!
//! Discovery tools are the part of a GPU node most likely to misbehave: a wedged driver makes
//! `nvidia-smi` hang, a broken install prints garbage. So every run is bounded three ways: a
//! time limit (YARN's 10 s by default), after which the tool's whole process group is
//! SIGKILLed (a shell wrapper's children included, so nothing is left behind); a cap on the
//! output kept in memory; and no standard input.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

/// Most bytes of standard output kept (an 8-GPU `nvidia-smi -q -x` is about 200 KB).
pub const MAX_STDOUT: usize = 16 << 20;
/// Most bytes of standard error kept, for error messages.
const MAX_STDERR: usize = 4096;

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("cannot run {path}: {source}")]
    Spawn {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} did not finish within {} ms and was killed", timeout.as_millis())]
    Timeout { path: PathBuf, timeout: Duration },
    #[error("{path} printed more than {max} bytes")]
    TooLarge { path: PathBuf, max: usize },
    #[error("cannot wait for {path}: {source}")]
    Wait {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What a finished run produced.
#[derive(Debug)]
pub struct ExecOutput {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl ExecOutput {
    /// `exit status 3` / `signal 9`, for messages.
    pub fn describe_status(&self) -> String {
        match (self.status.code(), self.status.signal()) {
            (Some(c), _) => format!("exit status {c}"),
            (None, Some(s)) => format!("signal {s}"),
            _ => "an unknown status".into(),
        }
    }

    /// The first line of standard error (trimmed, at most 300 characters).
    pub fn stderr_line(&self) -> String {
        let text = String::from_utf8_lossy(&self.stderr);
        let line = text.lines().map(str::trim).find(|l| !l.is_empty());
        line.unwrap_or("").chars().take(300).collect()
    }
}

/// Reads to EOF, keeping at most `max` bytes; true when more came.
async fn read_capped<R: AsyncRead + Unpin>(r: Option<R>, max: usize) -> (Vec<u8>, bool) {
    let Some(mut r) = r else {
        return (Vec::new(), false);
    };
    let mut kept = Vec::new();
    let mut over = false;
    let mut buf = [0u8; 8192];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = max.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
                over |= n > room;
            }
        }
    }
    (kept, over)
}

/// Spawns `cmd`, trying again for a short while when the executable is "busy" (ETXTBSY):
/// a file just written (a tool being reinstalled, a script a test wrote) stays busy while any
/// process forked at that moment still holds its write descriptor, until that child execs.
async fn spawn_when_not_busy(cmd: &mut Command) -> std::io::Result<tokio::process::Child> {
    const TRIES: u32 = 8;
    let mut pause = Duration::from_millis(5);
    for _ in 1..TRIES {
        match cmd.spawn() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
            other => return other,
        }
    }
    cmd.spawn()
}

/// Runs `path args...` in its own process group with a null stdin, waits at most `timeout`.
pub async fn run<S: AsRef<std::ffi::OsStr>>(
    path: &Path,
    args: &[S],
    timeout: Duration,
) -> Result<ExecOutput, ExecError> {
    let mut cmd = Command::new(path);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = spawn_when_not_busy(&mut cmd)
        .await
        .map_err(|source| ExecError::Spawn {
            path: path.to_path_buf(),
            source,
        })?;
    let pid = child.id();
    // Kills the tool's whole group if this future is dropped (timeout, or the caller went
    // away mid-run); disarmed once the tool has exited by itself.
    let mut guard = GroupGuard(pid.and_then(|p| i32::try_from(p).ok()));
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let work = async {
        let ((out, over), (err, _)) = tokio::join!(
            read_capped(stdout, MAX_STDOUT),
            read_capped(stderr, MAX_STDERR)
        );
        (out, over, err, child.wait().await)
    };
    let result = tokio::time::timeout(timeout, work).await;
    if result.is_ok() {
        guard.0 = None;
    }
    match result {
        Ok((_, true, _, _)) => Err(ExecError::TooLarge {
            path: path.to_path_buf(),
            max: MAX_STDOUT,
        }),
        Ok((stdout, false, stderr, status)) => Ok(ExecOutput {
            status: status.map_err(|source| ExecError::Wait {
                path: path.to_path_buf(),
                source,
            })?,
            stdout,
            stderr,
        }),
        Err(_) => {
            drop(guard);
            let _ = child.kill().await;
            Err(ExecError::Timeout {
                path: path.to_path_buf(),
                timeout,
            })
        }
    }
}

/// SIGKILLs a process group on drop unless disarmed (set to None). The group is one this
/// module made with `process_group(0)`, so only the tool and its children are signalled.
struct GroupGuard(Option<i32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.0.take() {
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        }
    }
}

/// True if `p` is a regular file with an execute bit.
pub fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::time::Instant;

    fn script(dir: &Path, body: &str) -> PathBuf {
        let p = dir.join("tool");
        std::fs::write(&p, format!("#!/bin/bash\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    #[tokio::test]
    async fn output_status_and_stderr_are_kept() {
        let d = tempfile::tempdir().unwrap();
        let p = script(d.path(), "echo out; echo \"bad thing $1\" >&2; exit 3");
        let o = run(&p, &["x"], Duration::from_secs(5)).await.unwrap();
        assert_eq!(o.stdout, b"out\n");
        assert_eq!(o.describe_status(), "exit status 3");
        assert_eq!(o.stderr_line(), "bad thing x");
        assert!(matches!(
            run::<&str>(&d.path().join("missing"), &[], Duration::from_secs(1)).await,
            Err(ExecError::Spawn { .. })
        ));
    }

    #[tokio::test]
    async fn a_hanging_tool_and_its_children_are_killed_at_the_deadline() {
        let d = tempfile::tempdir().unwrap();
        let pidfile = d.path().join("child.pid");
        // A grandchild that holds stdout open: killing only the shell would leave it.
        let p = script(
            d.path(),
            &format!("sleep 30 & echo $! > {}; wait", pidfile.display()),
        );
        let t = Instant::now();
        let e = run::<&str>(&p, &[], Duration::from_millis(300))
            .await
            .unwrap_err();
        assert!(matches!(e, ExecError::Timeout { .. }), "{e}");
        assert!(t.elapsed() < Duration::from_secs(5));
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // Gone (or a zombie about to be reaped by init): never still sleeping.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| s.rsplit(')').next().map(|r| r.trim().chars().next()))
                .flatten();
            if matches!(state, None | Some('Z') | Some('X')) {
                break;
            }
            assert!(Instant::now() < deadline, "the tool's child {pid} survived");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
