//! Where the cgroup hierarchies are: which controllers are mounted as v1, whether a cgroup2
//! hierarchy is mounted (unified mode, or hybrid beside v1), and where this process sits in
//! each. Read from `/proc/self/mountinfo` and `/proc/self/cgroup`, never from fixed paths, so a
//! `cpu,cpuacct` co-mount or a cgroup namespace are handled alike.

use std::fs;
use std::path::{Path, PathBuf};

/// One mounted hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Where it is mounted.
    pub mount_point: PathBuf,
    /// The cgroup that the mount's root is (mountinfo's root field; `/` unless bind-mounted
    /// or inside a cgroup namespace).
    pub root: String,
    /// v1: the controllers of the hierarchy (`cpu`, `cpuacct`, ...). v2: empty.
    pub controllers: Vec<String>,
    /// This process's cgroup in the hierarchy, from `/proc/self/cgroup`.
    pub own: Option<String>,
}

impl Mount {
    /// The directory of this process's own cgroup, if it is visible under the mount.
    pub fn own_dir(&self) -> Option<PathBuf> {
        let own = self.own.as_deref()?;
        let rel = if self.root == "/" {
            own
        } else {
            let rest = own.strip_prefix(self.root.as_str())?;
            if !(rest.is_empty() || rest.starts_with('/')) {
                return None;
            }
            rest
        };
        Some(join_cgroup(&self.mount_point, rel))
    }
}

/// The mounted hierarchies of this machine, as this process sees them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Layout {
    /// v1 hierarchies carrying at least one controller (named ones like `name=systemd` skipped).
    pub v1: Vec<Mount>,
    /// The cgroup2 hierarchy, if mounted.
    pub v2: Option<Mount>,
}

/// How the machine's cgroups are arranged, for logs and docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Only v1 hierarchies.
    V1,
    /// v1 controllers plus a cgroup2 mount (systemd's hybrid layout).
    Hybrid,
    /// Only the unified cgroup2 hierarchy.
    V2,
    None,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::V1 => "cgroup v1",
            Self::Hybrid => "hybrid (cgroup v1 controllers, cgroup2 mounted)",
            Self::V2 => "cgroup v2 (unified)",
            Self::None => "no cgroups",
        })
    }
}

impl Layout {
    /// Reads this process's view of the machine.
    pub fn detect() -> std::io::Result<Self> {
        let mountinfo = fs::read_to_string("/proc/self/mountinfo")?;
        let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        Ok(Self::parse(&mountinfo, &own))
    }

    /// Builds the layout from the texts of `/proc/self/mountinfo` and `/proc/self/cgroup`.
    pub fn parse(mountinfo: &str, proc_cgroup: &str) -> Self {
        let mut own_v1: Vec<(Vec<String>, String)> = Vec::new();
        let mut own_v2 = None;
        for line in proc_cgroup.lines() {
            let mut parts = line.splitn(3, ':');
            let (Some(id), Some(ctrls), Some(path)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            if id == "0" && ctrls.is_empty() {
                own_v2 = Some(path.to_string());
            } else {
                own_v1.push((
                    ctrls.split(',').map(str::to_string).collect(),
                    path.to_string(),
                ));
            }
        }
        let mut layout = Layout::default();
        for line in mountinfo.lines() {
            let Some((pre, post)) = line.split_once(" - ") else {
                continue;
            };
            let pre: Vec<&str> = pre.split(' ').collect();
            let post: Vec<&str> = post.split(' ').collect();
            let (Some(root), Some(mp), Some(fstype)) = (pre.get(3), pre.get(4), post.first())
            else {
                continue;
            };
            let mount_point = PathBuf::from(unescape(mp));
            match *fstype {
                "cgroup2" if layout.v2.is_none() => {
                    layout.v2 = Some(Mount {
                        mount_point,
                        root: unescape(root),
                        controllers: Vec::new(),
                        own: own_v2.clone(),
                    });
                }
                "cgroup" => {
                    let controllers: Vec<String> = post
                        .get(2)
                        .map(|o| {
                            o.split(',')
                                .filter(|c| KNOWN_V1.contains(c))
                                .map(str::to_string)
                                .collect()
                        })
                        .unwrap_or_default();
                    if controllers.is_empty()
                        || layout
                            .v1
                            .iter()
                            .any(|m| m.controllers.iter().any(|c| controllers.contains(c)))
                    {
                        continue;
                    }
                    let own = own_v1
                        .iter()
                        .find(|(c, _)| c.iter().any(|x| controllers.contains(x)))
                        .map(|(_, p)| p.clone());
                    layout.v1.push(Mount {
                        mount_point,
                        root: unescape(root),
                        controllers,
                        own,
                    });
                }
                _ => {}
            }
        }
        layout
    }

    /// Only the hierarchies mounted under `dir` (YARN's `cgroups.mount-path`).
    pub fn restricted_to(mut self, dir: &Path) -> Self {
        self.v1.retain(|m| m.mount_point.starts_with(dir));
        self.v2 = self.v2.filter(|m| m.mount_point.starts_with(dir));
        self
    }

    /// The v1 hierarchy that carries `controller`.
    pub fn v1_mount(&self, controller: &str) -> Option<&Mount> {
        self.v1
            .iter()
            .find(|m| m.controllers.iter().any(|c| c == controller))
    }

    pub fn mode(&self) -> Mode {
        match (self.v1.is_empty(), self.v2.is_some()) {
            (false, false) => Mode::V1,
            (false, true) => Mode::Hybrid,
            (true, true) => Mode::V2,
            (true, false) => Mode::None,
        }
    }
}

/// v1 controllers the kernel can have; anything else in the super options is a mount option.
const KNOWN_V1: &[&str] = &[
    "cpu",
    "cpuacct",
    "cpuset",
    "memory",
    "devices",
    "freezer",
    "net_cls",
    "net_prio",
    "blkio",
    "perf_event",
    "hugetlb",
    "pids",
    "rdma",
    "misc",
];

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c));
        if b[i] == b'\\' && octal {
            let digit = |k: usize| u32::from(b[i + k] - b'0');
            let v = digit(1) * 64 + digit(2) * 8 + digit(3);
            if let Ok(v) = u8::try_from(v) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `base` joined with a cgroup path (`/a/b`, or `a/b`), component by component.
pub fn join_cgroup(base: &Path, cgroup: &str) -> PathBuf {
    let mut p = base.to_path_buf();
    for c in cgroup.split('/').filter(|c| !c.is_empty()) {
        p.push(c);
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate
";
    const HYBRID_SELF: &str = "\
9:name=systemd:/user.slice
8:pids:/
5:devices:/
4:memory:/process_api/abc
1:cpu,cpuacct:/
0::/user.slice/session-1.scope
";

    #[test]
    fn a_hybrid_machine() {
        let l = Layout::parse(HYBRID, HYBRID_SELF);
        assert_eq!(l.mode(), Mode::Hybrid);
        assert_eq!(l.v1.len(), 4, "{l:?}");
        let cpu = l.v1_mount("cpuacct").unwrap();
        assert_eq!(cpu.mount_point, PathBuf::from("/sys/fs/cgroup/cpu,cpuacct"));
        assert_eq!(cpu.controllers, vec!["cpu", "cpuacct"]);
        let mem = l.v1_mount("memory").unwrap();
        assert_eq!(
            mem.own_dir().unwrap(),
            PathBuf::from("/sys/fs/cgroup/memory/process_api/abc")
        );
        let v2 = l.v2.as_ref().unwrap();
        assert_eq!(
            v2.own_dir().unwrap(),
            PathBuf::from("/sys/fs/cgroup/unified/user.slice/session-1.scope")
        );
        assert!(l.v1_mount("freezer").is_none());
        let only = l.clone().restricted_to(Path::new("/sys/fs/cgroup/unified"));
        assert_eq!(only.mode(), Mode::V2);
        assert_eq!(
            l.clone().restricted_to(Path::new("/elsewhere")).mode(),
            Mode::None
        );
    }

    #[test]
    fn a_unified_machine_and_a_namespaced_root() {
        let l = Layout::parse(
            "30 23 0:26 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
            "0::/kubepods/pod1/c1\n",
        );
        assert_eq!(l.mode(), Mode::V2);
        assert_eq!(
            l.v2.as_ref().unwrap().own_dir().unwrap(),
            PathBuf::from("/sys/fs/cgroup/c1")
        );
        let outside = Layout::parse(
            "30 23 0:26 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
            "0::/elsewhere\n",
        );
        assert_eq!(outside.v2.as_ref().unwrap().own_dir(), None);
        assert_eq!(Layout::parse("", "").mode(), Mode::None);
    }

    #[test]
    fn escapes_and_joins() {
        assert_eq!(unescape(r"/a\040b"), "/a b");
        assert_eq!(unescape(r"/a\\"), r"/a\\");
        assert_eq!(
            join_cgroup(Path::new("/m"), "/x//y/"),
            PathBuf::from("/m/x/y")
        );
    }
}
