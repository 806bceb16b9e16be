//! A container's own cgroup files, as a test reads them: a process's cgroup (from
//! `/proc/<pid>/cgroup`) under the mount point of the controller (`/proc/self/mountinfo`),
//! v1 or v2.

use std::path::{Path, PathBuf};

/// One controller's file of the cgroup `pid` is in, if that cgroup is the container's own
/// (its path names `cid`): `v1` under the v1 `controller`'s mount, else `v2` under cgroup2.
pub fn container_file(
    pid: i32,
    cid: &str,
    controller: &str,
    v1: &str,
    v2: &str,
) -> Option<PathBuf> {
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    // (mount point, fs type, super options) of each cgroup mount.
    let mounts: Vec<(String, String, String)> = mountinfo
        .lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let mount_point = pre.split_whitespace().nth(4)?.to_string();
            let mut post = post.split_whitespace();
            let fstype = post.next()?.to_string();
            let opts = post.nth(1).unwrap_or("").to_string();
            fstype
                .starts_with("cgroup")
                .then_some((mount_point, fstype, opts))
        })
        .collect();
    let mut found = None;
    for line in cgroups.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        if !path.contains(cid) {
            continue;
        }
        let rel = path.trim_start_matches('/');
        if controllers.split(',').any(|c| c == controller) {
            let (mp, _, _) = mounts
                .iter()
                .find(|(_, t, o)| t == "cgroup" && o.split(',').any(|x| x == controller))?;
            let f = Path::new(mp).join(rel).join(v1);
            if f.exists() {
                return Some(f);
            }
        } else if controllers.is_empty() {
            if let Some((mp, _, _)) = mounts.iter().find(|(_, t, _)| t == "cgroup2") {
                let f = Path::new(mp).join(rel).join(v2);
                if f.exists() {
                    found = Some(f);
                }
            }
        }
    }
    found
}
