//! A container's process tree as `/proc` shows it: the memory watcher used where cgroups are
//! not available (YARN's `ProcfsBasedProcessTree` and the pmem check of its
//! `ContainersMonitorImpl`).
//!
//! The tree of a container is every process descending from its leader, plus every process of
//! the leader's session (the leader calls `setsid`, so its session id is its pid): a daemon
//! that double-forked away from the tree is still counted and still killed, unless it called
//! `setsid` itself, which only cgroups can follow.

use std::collections::{HashMap, HashSet};
use std::fs;

use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// One process, as read from `/proc/<pid>/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcInfo {
    pub pid: i32,
    pub ppid: i32,
    pub pgrp: i32,
    pub session: i32,
    /// Resident set size in pages.
    pub rss_pages: u64,
}

/// Parses one `/proc/<pid>/stat` line. `None` for anything malformed (the process may have
/// exited while it was read).
pub fn parse_stat(pid: i32, line: &str) -> Option<ProcInfo> {
    // The command name may contain spaces and parentheses: fields resume after the last ')'.
    let rest = line.get(line.rfind(')')? + 1..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] = state (field 3), so field n of proc(5) is f[n - 3].
    let num = |n: usize| f.get(n - 3).and_then(|s| s.parse::<i64>().ok());
    Some(ProcInfo {
        pid,
        ppid: i32::try_from(num(4)?).ok()?,
        pgrp: i32::try_from(num(5)?).ok()?,
        session: i32::try_from(num(6)?).ok()?,
        rss_pages: u64::try_from(num(24)?).unwrap_or(0),
    })
}

/// Every process visible in `/proc` (those that vanish while being read are skipped).
pub fn snapshot() -> Vec<ProcInfo> {
    let Ok(rd) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let line = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            parse_stat(pid, &line)
        })
        .collect()
}

/// The container tree of `root` in `procs`: its descendants and its session's members.
pub fn tree_of(root: i32, procs: &[ProcInfo]) -> Vec<ProcInfo> {
    let mut children: HashMap<i32, Vec<usize>> = HashMap::new();
    for (i, p) in procs.iter().enumerate() {
        children.entry(p.ppid).or_default().push(i);
    }
    let mut seen: HashSet<i32> = HashSet::new();
    let mut out = Vec::new();
    let mut stack: Vec<usize> = procs
        .iter()
        .enumerate()
        .filter(|(_, p)| p.pid == root || (root > 1 && p.session == root))
        .map(|(i, _)| i)
        .collect();
    while let Some(i) = stack.pop() {
        let p = procs[i];
        if !seen.insert(p.pid) {
            continue;
        }
        out.push(p);
        if let Some(c) = children.get(&p.pid) {
            stack.extend(c.iter().copied());
        }
    }
    out
}

/// The system page size in bytes.
pub fn page_size() -> u64 {
    // SAFETY: sysconf(3) has no preconditions and touches no caller memory.
    let n = unsafe { nix::libc::sysconf(nix::libc::_SC_PAGESIZE) };
    u64::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
}

/// Resident memory of the tree in bytes, and its members' pids.
pub fn tree_rss(root: i32) -> (u64, Vec<i32>) {
    let tree = tree_of(root, &snapshot());
    let pages: u64 = tree.iter().map(|p| p.rss_pages).sum();
    (
        pages.saturating_mul(page_size()),
        tree.iter().map(|p| p.pid).collect(),
    )
}

/// SIGKILLs the leader's process group and every other member of its tree.
pub fn kill_tree(root: i32, members: &[i32]) {
    if root <= 1 {
        return;
    }
    let _ = nix::sys::signal::killpg(Pid::from_raw(root), Signal::SIGKILL);
    let me = std::process::id() as i32;
    for &pid in members {
        if pid > 1 && pid != me {
            match kill(Pid::from_raw(pid), Signal::SIGKILL) {
                Ok(()) | Err(Errno::ESRCH) => {}
                Err(e) => tracing::debug!(pid, error = %e, "cannot kill container process"),
            }
        }
    }
}

/// What the watcher concluded about one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PmemVerdict {
    Within,
    /// Over the limit: the tree's RSS in bytes and the members to kill.
    Over {
        rss_bytes: u64,
        members: Vec<i32>,
    },
}

/// Checks a container's tree against its limit (`limit_mb` <= 0: no limit).
pub fn check(root: i32, limit_mb: i64) -> PmemVerdict {
    if limit_mb <= 0 {
        return PmemVerdict::Within;
    }
    let (rss, members) = tree_rss(root);
    let limit = u64::try_from(limit_mb).unwrap_or(0).saturating_mul(1 << 20);
    if rss > limit {
        PmemVerdict::Over {
            rss_bytes: rss,
            members,
        }
    } else {
        PmemVerdict::Within
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    fn p(pid: i32, ppid: i32, session: i32, rss: u64) -> ProcInfo {
        ProcInfo {
            pid,
            ppid,
            pgrp: session,
            session,
            rss_pages: rss,
        }
    }

    #[test]
    fn stat_lines_parse_even_with_odd_names() {
        let line = "42 (a) b (c)) S 7 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 \
                    12345 1000000 250 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0";
        let i = parse_stat(42, line).unwrap();
        assert_eq!((i.ppid, i.pgrp, i.session, i.rss_pages), (7, 42, 42, 250));
        assert_eq!(parse_stat(1, "garbage"), None);
        assert_eq!(parse_stat(1, "1 (x) S 0"), None);
    }

    #[test]
    fn the_tree_has_descendants_and_session_members() {
        let procs = [
            p(10, 1, 10, 1),   // the leader
            p(11, 10, 10, 2),  // its child
            p(12, 11, 10, 4),  // grandchild
            p(13, 1, 10, 8),   // orphan of the session, reparented to init
            p(14, 12, 14, 16), // descendant that called setsid: still a descendant
            p(20, 1, 20, 32),  // unrelated
            p(21, 20, 20, 64),
        ];
        let mut pids: Vec<i32> = tree_of(10, &procs).iter().map(|p| p.pid).collect();
        pids.sort();
        assert_eq!(pids, vec![10, 11, 12, 13, 14]);
        let rss: u64 = tree_of(10, &procs).iter().map(|p| p.rss_pages).sum();
        assert_eq!(rss, 31);
        assert!(tree_of(99, &procs).is_empty());
    }

    /// A real tree: a session leader whose grandchild holds ~48 MB. The watcher sees the
    /// grandchild's memory, finds the tree over a 16 MB limit and within a 1 GB one, and its
    /// kill takes the whole tree down.
    #[test]
    fn the_watcher_measures_and_kills_a_real_process_tree() {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new("bash");
        // The inner bash holds 48 MB in a variable, then sleeps; the outer one waits.
        cmd.arg("-c")
            .arg(r#"bash -c 'x=$(head -c 48000000 /dev/zero | tr "\0" a); echo ready; sleep 60; echo unreachable' & wait"#)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        // SAFETY: setsid(2) is async-signal-safe and touches no parent memory.
        unsafe {
            cmd.pre_exec(|| {
                nix::unistd::setsid()
                    .map(|_| ())
                    .map_err(std::io::Error::from)
            });
        }
        let mut child = cmd.spawn().expect("bash");
        struct Reap(std::process::Child);
        impl Drop for Reap {
            fn drop(&mut self) {
                let root = self.0.id() as i32;
                let (_, members) = tree_rss(root);
                kill_tree(root, &members);
                let _ = self.0.wait();
            }
        }
        let root = child.id() as i32;
        let mut out = child.stdout.take().expect("stdout");
        let guard = Reap(child);
        let mut buf = [0u8; 6];
        std::io::Read::read_exact(&mut out, &mut buf).expect("ready");
        assert_eq!(&buf, b"ready\n");

        // "ready" comes before the inner bash forks its sleep.
        let deadline = Instant::now() + Duration::from_secs(10);
        let (rss, members) = loop {
            let (rss, members) = tree_rss(root);
            if members.len() >= 3 || Instant::now() > deadline {
                break (rss, members);
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(members.len() >= 3, "leader, inner bash, sleep: {members:?}");
        assert!(rss > 40_000_000, "tree rss {rss}");
        assert_eq!(check(root, 1024), PmemVerdict::Within);
        assert_eq!(check(root, 0), PmemVerdict::Within);
        let PmemVerdict::Over { rss_bytes, members } = check(root, 16) else {
            panic!("a 48 MB tree is over 16 MB");
        };
        assert!(rss_bytes > 16 << 20);
        kill_tree(root, &members);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !members
            .iter()
            .all(|&m| m == root || !Path::new(&format!("/proc/{m}")).exists() || zombie(m))
        {
            assert!(Instant::now() < deadline, "tree survived the kill");
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(guard);
    }

    use std::path::Path;
    fn zombie(pid: i32) -> bool {
        fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.get(s.rfind(')')? + 1..)?
                    .split_whitespace()
                    .next()
                    .map(|st| st == "Z")
            })
            .unwrap_or(true)
    }
}
