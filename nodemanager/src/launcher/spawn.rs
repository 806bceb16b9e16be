//! Forking a container's leader by hand, so that it can be held between fork and exec.
//!
//! `std::process::Command::spawn` returns only once the child has exec'd (it waits on a
//! close-on-exec pipe), so a child cannot wait for anything after its setup and before its
//! `exec`. A gang needs exactly that: every member is forked into its cgroups with its logs
//! open, then held at a *gate* (a pipe) until the AM releases the whole gang, on every node
//! at once; what is left after the release is the `exec` alone, so the members start within
//! milliseconds of each other however long each node took to set them up.
//!
//! The child runs only async-signal-safe calls (it is forked from a multi-threaded process):
//! everything it needs (C strings, pointer arrays, descriptors, messages) is made before the
//! fork, and it allocates nothing.
//!
//! Setup errors (`setsid`, joining a cgroup, redirecting, `chdir`) come back to the parent
//! through a close-on-exec *setup pipe* as (stage, errno), so a launch that cannot be isolated
//! fails synchronously as before. The pipe is closed when setup is done, before the gate, so
//! the parent never waits for a held child. An `exec` failure is written to the container's
//! stderr and ends the child with bash's codes (127 not found, 126 otherwise).

use std::collections::BTreeMap;
use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use nix::libc;

pub use super::mounts::PrivateMounts;

/// What one child needs; borrowed, as it lives only until the fork.
pub(super) struct ChildSpec<'a> {
    /// The program to exec: a path, already resolved (no `PATH` search in the child).
    pub program: &'a Path,
    /// argv, `argv[0]` included.
    pub argv: &'a [&'a OsStr],
    /// The whole environment.
    pub env: &'a BTreeMap<String, String>,
    pub dir: &'a Path,
    pub stdout: &'a File,
    pub stderr: &'a File,
    /// `cgroup.procs` files to write `0` to (join), after `setsid`.
    pub cgroup_procs: &'a [RawFd],
    /// Hold the child at this gate (the read end of a [`Gate`]) until it is opened.
    pub gate: Option<&'a Gate>,
    /// Drop to this account (groups, gid, uid) after joining the cgroups, before `exec`.
    pub run_as: Option<&'a crate::runas::Credentials>,
    /// Enter a private mount namespace and mount there (after `chdir`, so relative paths
    /// are relative to `dir`): what the process and its children see, and nobody else; the
    /// mounts end with the namespace's last process.
    pub mounts: Option<&'a PrivateMounts>,
}

/// Where a child waits before its `exec`: the NM writes one byte to let it go; if the write
/// end is closed instead (the NM dropped the container, or died), the child exits with
/// [`GATE_ABANDONED_EXIT`] without running anything.
pub struct Gate {
    /// The child's end; the parent closes its copy once the child is forked
    /// ([`Gate::forked`]), so a held container costs the NM one descriptor.
    read: Option<OwnedFd>,
    write: OwnedFd,
}

/// The exit code of a held child whose gate was closed without being opened.
pub const GATE_ABANDONED_EXIT: i32 = 125;

impl Gate {
    pub fn new() -> io::Result<Self> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: pipe2 writes two descriptors into `fds`, which we then own.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just created and are owned by nobody else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok(Self {
            read: Some(read),
            write,
        })
    }

    /// The child holds its own copy of the read end now: the parent's can go.
    pub fn forked(&mut self) {
        self.read = None;
    }

    /// Lets the held child exec. Consumes the gate: its parent-side descriptors are closed.
    pub fn open(self) -> io::Result<()> {
        // SAFETY: a one-byte write from a static buffer to a descriptor we own.
        let n = unsafe { libc::write(self.write.as_raw_fd(), b"1".as_ptr().cast(), 1) };
        if n == 1 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("read", &self.read.as_ref().map(|r| r.as_raw_fd()))
            .field("write", &self.write.as_raw_fd())
            .finish()
    }
}

/// The steps of the child's setup, as reported through the setup pipe.
const STAGES: [&str; 9] = [
    "start a new session (setsid)",
    "join its cgroups",
    "redirect its standard streams",
    "enter its work directory",
    "reset its signal mask",
    "wait at its launch gate",
    "switch to its user",
    "enter a private mount namespace",
    "mount its container's root file system",
];

pub(super) fn cstr(bytes: &[u8], what: &str) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} contains a NUL byte"),
        )
    })
}

/// Forks and execs the child; returns its pid once its setup is done (it may be held at its
/// gate, or already running the program).
pub(super) fn fork_exec(spec: &ChildSpec<'_>) -> io::Result<i32> {
    // Everything the child touches is made here, before the fork.
    let program = cstr(spec.program.as_os_str().as_bytes(), "the program path")?;
    let argv: Vec<CString> = spec
        .argv
        .iter()
        .map(|a| cstr(a.as_bytes(), "an argument"))
        .collect::<io::Result<_>>()?;
    let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());
    let env: Vec<CString> = spec
        .env
        .iter()
        .map(|(k, v)| cstr(format!("{k}={v}").as_bytes(), "an environment variable"))
        .collect::<io::Result<_>>()?;
    let mut env_ptrs: Vec<*const libc::c_char> = env.iter().map(|e| e.as_ptr()).collect();
    env_ptrs.push(std::ptr::null());
    let dir = cstr(spec.dir.as_os_str().as_bytes(), "the work directory")?;
    let null = File::open("/dev/null")?;
    let exec_failed = format!("spindle: cannot execute {}: errno ", spec.program.display());
    let mut setup = [0 as RawFd; 2];
    // SAFETY: pipe2 writes two descriptors into `setup`, owned below.
    if unsafe { libc::pipe2(setup.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just created, owned by nobody else.
    let (setup_r, setup_w) = unsafe {
        (
            OwnedFd::from_raw_fd(setup[0]),
            OwnedFd::from_raw_fd(setup[1]),
        )
    };
    let child = Child {
        program: &program,
        argv: &argv_ptrs,
        env: &env_ptrs,
        dir: &dir,
        fds: [
            null.as_raw_fd(),
            spec.stdout.as_raw_fd(),
            spec.stderr.as_raw_fd(),
        ],
        cgroup_procs: spec.cgroup_procs,
        creds: spec.run_as.map(|c| (c.uid, c.gid)),
        groups: spec
            .run_as
            .map(|c| {
                c.groups
                    .iter()
                    .map(|g| *g as libc::gid_t)
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default(),
        gate: match spec.gate {
            Some(g) => Some(
                g.read
                    .as_ref()
                    .map(|r| r.as_raw_fd())
                    .ok_or_else(|| io::Error::other("the gate was already used for a child"))?,
            ),
            None => None,
        },
        setup: setup_w.as_raw_fd(),
        exec_failed: exec_failed.as_bytes(),
        mounts: spec.mounts,
    };
    // SAFETY: in the child, `Child::run` makes only async-signal-safe calls on data made
    // above, which the fork copied and nothing frees, and never returns.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: see above; we are the child.
        unsafe { child.run() }
    }
    drop(setup_w);
    // EOF: setup done. Eight bytes: (stage, errno) of the step that failed.
    let mut buf = [0u8; 8];
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: reads into the unfilled tail of a local buffer.
        let n = unsafe {
            libc::read(
                setup_r.as_raw_fd(),
                buf[got..].as_mut_ptr().cast(),
                buf.len() - got,
            )
        };
        match n {
            0 => break,
            n if n > 0 => got += n as usize,
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
        }
    }
    if got == 0 {
        return Ok(pid);
    }
    // The child failed and exits at once: reap it here, then report.
    let mut status = 0;
    // SAFETY: waits for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    let stage = i32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]);
    let errno = i32::from_ne_bytes([buf[4], buf[5], buf[6], buf[7]]);
    let what = usize::try_from(stage)
        .ok()
        .and_then(|s| STAGES.get(s))
        .copied()
        .unwrap_or("set itself up");
    let e = io::Error::from_raw_os_error(errno);
    Err(io::Error::new(
        e.kind(),
        format!("the process could not {what}: {e}"),
    ))
}

/// The child's half: raw pointers and descriptors only.
struct Child<'a> {
    program: &'a CString,
    argv: &'a [*const libc::c_char],
    env: &'a [*const libc::c_char],
    dir: &'a CString,
    /// stdin, stdout, stderr.
    fds: [RawFd; 3],
    cgroup_procs: &'a [RawFd],
    /// (uid, gid) to switch to, with `groups` as the supplementary groups.
    creds: Option<(u32, u32)>,
    groups: Vec<libc::gid_t>,
    gate: Option<RawFd>,
    setup: RawFd,
    exec_failed: &'a [u8],
    mounts: Option<&'a PrivateMounts>,
}

/// The descriptor a held child reads its gate from.
const GATE_FD: RawFd = 3;

impl Child<'_> {
    /// Reports a failed setup step and exits.
    ///
    /// # Safety
    /// Only in the forked child (it exits the process).
    unsafe fn fail(&self, stage: i32) -> ! {
        // SAFETY: errno is thread-local and always readable; the write goes from a local
        // buffer to the setup pipe this child owns; `_exit` is async-signal-safe.
        unsafe {
            let errno = *libc::__errno_location();
            let mut msg = [0u8; 8];
            msg[..4].copy_from_slice(&stage.to_ne_bytes());
            msg[4..].copy_from_slice(&errno.to_ne_bytes());
            libc::write(self.setup, msg.as_ptr().cast(), msg.len());
            libc::_exit(126)
        }
    }

    /// Sets the child up and `exec`s the program; never returns.
    ///
    /// # Safety
    /// Only in the forked child, which must make async-signal-safe calls only: every
    /// buffer it touches was built before the fork.
    unsafe fn run(&self) -> ! {
        // SAFETY: see the function's contract: plain libc calls on descriptors, C strings
        // and arrays prepared before the fork; nothing allocates.
        unsafe { self.run_in_child() }
    }

    /// The body of [`Child::run`].
    ///
    /// # Safety
    /// As [`Child::run`].
    unsafe fn run_in_child(&self) -> ! {
        // SAFETY: the caller's contract (the forked child; async-signal-safe calls only).
        unsafe {
            // Rust ignores SIGPIPE and the forking thread may block signals: the program gets
            // default dispositions and an empty mask, as after std's spawn.
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            if libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) != 0 {
                self.fail(4);
            }
            // Handlers the NM installed (SIGTERM, SIGINT, SIGCHLD, ...) are copied by the fork:
            // a held child must die of a stop's SIGTERM, not run the NM's handler. (exec would
            // reset handlers but keeps ignored signals, such as Rust's SIGPIPE.)
            for sig in 1..libc::SIGRTMAX() {
                if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                    libc::signal(sig, libc::SIG_DFL);
                }
            }
            if libc::setsid() < 0 {
                self.fail(0);
            }
            for &fd in self.cgroup_procs {
                if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    self.fail(1);
                }
            }
            for (target, &fd) in self.fds.iter().enumerate() {
                if libc::dup2(fd, target as RawFd) < 0 {
                    self.fail(2);
                }
            }
            if libc::chdir(self.dir.as_ptr()) != 0 {
                self.fail(3);
            }
            if let Some(m) = self.mounts {
                if libc::unshare(libc::CLONE_NEWNS) != 0
                    || libc::mount(
                        std::ptr::null(),
                        c"/".as_ptr(),
                        std::ptr::null(),
                        libc::MS_REC | libc::MS_PRIVATE,
                        std::ptr::null(),
                    ) != 0
                {
                    self.fail(7);
                }
                for p in &m.detach {
                    libc::umount2(p.as_ptr(), libc::MNT_DETACH);
                }
                for [source, target, fstype, data] in &m.mounts {
                    if libc::mount(
                        source.as_ptr(),
                        target.as_ptr(),
                        fstype.as_ptr(),
                        0,
                        data.as_ptr().cast(),
                    ) != 0
                    {
                        self.fail(8);
                    }
                }
            }
            // After the cgroups (root's to write) and before anything of the user's runs; the
            // order matters: groups and gid while still root, uid last.
            if let Some((uid, gid)) = self.creds {
                if libc::setgroups(self.groups.len(), self.groups.as_ptr()) != 0
                    || libc::setgid(gid) != 0
                    || libc::setuid(uid) != 0
                {
                    self.fail(6);
                }
            }
            if let Some(gate) = self.gate {
                if gate != GATE_FD && libc::dup2(gate, GATE_FD) < 0 {
                    self.fail(5);
                }
            }
            // Setup is done: closing every other descriptor closes the setup pipe (the parent
            // goes on) and drops what a held child must not keep open meanwhile (the NM's
            // sockets, other gates' write ends).
            let first = if self.gate.is_some() {
                GATE_FD + 1
            } else {
                GATE_FD
            };
            if libc::syscall(
                libc::SYS_close_range,
                first as libc::c_uint,
                libc::c_uint::MAX,
                0,
            ) != 0
            {
                // An old kernel: the setup pipe is close-on-exec; other descriptors are too.
                libc::close(self.setup);
            }
            if self.gate.is_some() {
                let mut b = 0u8;
                loop {
                    let n = libc::read(GATE_FD, (&mut b as *mut u8).cast(), 1);
                    if n == 1 {
                        break;
                    }
                    if n < 0 && *libc::__errno_location() == libc::EINTR {
                        continue;
                    }
                    libc::_exit(GATE_ABANDONED_EXIT);
                }
                libc::close(GATE_FD);
            }
            libc::execve(self.program.as_ptr(), self.argv.as_ptr(), self.env.as_ptr());
            let errno = *libc::__errno_location();
            libc::write(2, self.exec_failed.as_ptr().cast(), self.exec_failed.len());
            // errno in decimal, then a newline, without allocating.
            let mut line = [0u8; 12];
            let mut i = line.len() - 1;
            line[i] = b'\n';
            let mut e = errno.unsigned_abs();
            loop {
                i -= 1;
                line[i] = b'0' + (e % 10) as u8;
                e /= 10;
                if e == 0 || i == 0 {
                    break;
                }
            }
            libc::write(2, line[i..].as_ptr().cast(), line.len() - i);
            libc::_exit(if errno == libc::ENOENT { 127 } else { 126 })
        }
    }
}

/// Waits for our child `pid` to end, without tying a thread to it (a pidfd where the kernel
/// has them, Linux 5.3+; else a blocking `waitpid` on the blocking pool).
pub(super) async fn wait(pid: i32) -> io::Result<ExitStatus> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd >= 0 {
        // SAFETY: a fresh descriptor only we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
        // SAFETY: an OwnedFd's descriptor stays open and the same until the AsyncFd drops it.
        let registered = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
        };
        if let Ok(afd) = registered {
            loop {
                let mut guard = afd.readable().await?;
                if let Some(st) = try_reap(pid)? {
                    return Ok(st);
                }
                guard.clear_ready();
            }
        }
    }
    tokio::task::spawn_blocking(move || loop {
        let mut status = 0;
        // SAFETY: waits for our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return Ok(ExitStatus::from_raw(status));
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    })
    .await
    .map_err(io::Error::other)?
}

fn try_reap(pid: i32) -> io::Result<Option<ExitStatus>> {
    let mut status = 0;
    // SAFETY: a non-blocking wait for our own child.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    match r {
        0 => Ok(None),
        r if r == pid => Ok(Some(ExitStatus::from_raw(status))),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Finds `program` as `execvp` would, in `path` (a `PATH` value; relative entries are
/// relative to `dir`, where the child will be): the first executable regular file.
pub(super) fn resolve(program: &str, path: &OsStr, dir: &Path) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    std::env::split_paths(path)
        .map(|d| {
            let d = if d.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                d
            };
            dir.join(d).join(program)
        })
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn run(
        program: &Path,
        args: &[&str],
        gate: Option<&Gate>,
        dir: &Path,
    ) -> io::Result<(i32, PathBuf)> {
        let out = dir.join("out");
        let stdout = File::create(&out)?;
        let stderr = stdout.try_clone()?;
        let argv: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
        let env = BTreeMap::from([("GREETING".to_string(), "hello".to_string())]);
        let pid = fork_exec(&ChildSpec {
            program,
            argv: &argv,
            env: &env,
            dir,
            stdout: &stdout,
            stderr: &stderr,
            cgroup_procs: &[],
            gate,
            run_as: None,
            mounts: None,
        })?;
        Ok((pid, out))
    }

    #[tokio::test]
    async fn runs_a_program_with_its_environment_and_directory() {
        let d = tempfile::tempdir().unwrap();
        let (pid, out) = run(
            Path::new("/bin/sh"),
            &["sh", "-c", "echo $GREETING; pwd; exit 3"],
            None,
            d.path(),
        )
        .unwrap();
        let st = wait(pid).await.unwrap();
        assert_eq!(st.code(), Some(3));
        let text = std::fs::read_to_string(out).unwrap();
        let dir = d.path().canonicalize().unwrap();
        assert_eq!(text, format!("hello\n{}\n", dir.display()));
    }

    #[tokio::test]
    async fn a_held_child_runs_only_when_its_gate_opens() {
        let d = tempfile::tempdir().unwrap();
        let mut gate = Gate::new().unwrap();
        let (pid, out) = run(
            Path::new("/bin/sh"),
            &["sh", "-c", "echo ran"],
            Some(&gate),
            d.path(),
        )
        .unwrap();
        gate.forked();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            "",
            "ran before release"
        );
        gate.open().unwrap();
        let st = wait(pid).await.unwrap();
        assert_eq!(st.code(), Some(0));
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "ran\n");
    }

    #[tokio::test]
    async fn an_abandoned_gate_ends_the_child_without_running_it() {
        let d = tempfile::tempdir().unwrap();
        let gate = Gate::new().unwrap();
        let (pid, out) = run(
            Path::new("/bin/sh"),
            &["sh", "-c", "echo ran"],
            Some(&gate),
            d.path(),
        )
        .unwrap();
        drop(gate);
        let st = wait(pid).await.unwrap();
        assert_eq!(st.code(), Some(GATE_ABANDONED_EXIT));
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "");
    }

    #[tokio::test]
    async fn exec_and_setup_failures_are_reported() {
        let d = tempfile::tempdir().unwrap();
        let (pid, out) = run(Path::new("/nonexistent/prog"), &["prog"], None, d.path()).unwrap();
        assert_eq!(wait(pid).await.unwrap().code(), Some(127));
        let text = std::fs::read_to_string(out).unwrap();
        assert!(
            text.starts_with("spindle: cannot execute /nonexistent/prog: errno 2"),
            "{text}"
        );
        let log = File::create(d.path().join("log")).unwrap();
        let e = fork_exec(&ChildSpec {
            program: Path::new("/bin/true"),
            argv: &[OsStr::new("true")],
            env: &BTreeMap::new(),
            dir: &d.path().join("missing"),
            stdout: &log,
            stderr: &log,
            cgroup_procs: &[],
            gate: None,
            run_as: None,
            mounts: None,
        })
        .unwrap_err();
        assert!(e.to_string().contains("enter its work directory"), "{e}");
    }

    #[tokio::test]
    async fn a_child_runs_as_the_account_it_is_given() {
        if spindle_test_support::require::root(
            "a_child_runs_as_the_account_it_is_given",
            "switching users needs root",
        )
        .is_none()
        {
            return;
        }
        let nobody = crate::runas::Credentials::lookup("nobody").expect("nobody exists");
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("out");
        let log = File::create(&out).unwrap();
        let pid = fork_exec(&ChildSpec {
            program: Path::new("/bin/sh"),
            argv: &[
                OsStr::new("sh"),
                OsStr::new("-c"),
                OsStr::new("id -u; id -g"),
            ],
            env: &BTreeMap::new(),
            dir: d.path(),
            stdout: &log,
            stderr: &log,
            cgroup_procs: &[],
            gate: None,
            run_as: Some(&nobody),
            mounts: None,
        })
        .unwrap();
        assert_eq!(wait(pid).await.unwrap().code(), Some(0));
        assert_eq!(
            std::fs::read_to_string(out).unwrap(),
            format!("{}\n{}\n", nobody.uid, nobody.gid)
        );
    }

    #[test]
    fn resolves_like_execvp() {
        let d = tempfile::tempdir().unwrap();
        let bin = d.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let tool = bin.join("tool");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        let path = OsStr::new("/nonexistent:bin");
        assert_eq!(resolve("tool", path, d.path()), None, "not executable yet");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(
            resolve("tool", path, d.path()),
            Some(d.path().join("bin/tool"))
        );
        assert_eq!(resolve("/x/y", path, d.path()), Some(PathBuf::from("/x/y")));
        assert_eq!(
            resolve("sh", OsStr::new("/bin"), d.path()),
            Some(PathBuf::from("/bin/sh"))
        );
    }
}
