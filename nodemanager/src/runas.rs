//! Who a container runs as: YARN's LinuxContainerExecutor in non-secure mode.
//!
//! With `yarn.nodemanager.container-executor.class` set to `...LinuxContainerExecutor`, a
//! root NodeManager drops each container's privileges before `exec`:
//! * `yarn.nodemanager.linux-container-executor.nonsecure-mode.limit-users` = true (YARN's
//!   default): every container runs as `...nonsecure-mode.local-user` (default `nobody`);
//! * false: as the submitting user, who must exist on the node, have a uid of at least
//!   `spindle.nodemanager.linux-container-executor.min-user-id` (YARN's `min.user.id` of
//!   `container-executor.cfg`, 1000) and not be among
//!   `spindle.nodemanager.linux-container-executor.banned-users` (`banned.users`).
//!
//! Otherwise containers run as the NM's own user. A non-root container cannot leave its
//! cgroups (their `cgroup.procs` belong to root), which a root one could.
//!
//! `chown_tree` gives a container its dirs without following links or giving away a
//! hard-linked file.

use std::collections::BTreeSet;
use std::ffi::CString;

use nix::unistd::{getgrouplist, Gid, User};

/// A resolved local account: what the child sets before `exec`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    pub user: String,
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups (the account's primary group included).
    pub groups: Vec<u32>,
}

impl Credentials {
    /// Looks `name` up in the node's user database (NSS).
    pub fn lookup(name: &str) -> Result<Self, String> {
        let user = User::from_name(name)
            .map_err(|e| format!("cannot look up local user '{name}': {e}"))?
            .ok_or_else(|| format!("there is no local user '{name}' on this node"))?;
        let cname = CString::new(name).map_err(|_| format!("invalid user name '{name}'"))?;
        let groups = getgrouplist(&cname, user.gid)
            .map(|g| g.into_iter().map(Gid::as_raw).collect())
            .unwrap_or_else(|_| vec![user.gid.as_raw()]);
        Ok(Self {
            user: name.to_string(),
            uid: user.uid.as_raw(),
            gid: user.gid.as_raw(),
            groups,
        })
    }
}

/// The node's policy.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum RunAs {
    /// As the NodeManager's own user (DefaultContainerExecutor, or no executor class set).
    #[default]
    NmUser,
    /// Every container as this one local account (`limit-users` = true).
    LocalUser(Credentials),
    /// As the submitting user (`limit-users` = false), within these bounds.
    Submitter {
        min_uid: u32,
        banned: BTreeSet<String>,
    },
}

impl RunAs {
    /// The credentials a container of `submitter` gets: None to stay the NM's user, an error
    /// (for the AM's start call) when the submitter may not run here.
    pub fn credentials_for(&self, submitter: &str) -> Result<Option<Credentials>, String> {
        match self {
            Self::NmUser => Ok(None),
            Self::LocalUser(c) => Ok(Some(c.clone())),
            Self::Submitter { min_uid, banned } => {
                if banned.contains(submitter) {
                    return Err(format!(
                        "user '{submitter}' is banned from running containers on this node"
                    ));
                }
                let c = Credentials::lookup(submitter)?;
                if c.uid < *min_uid {
                    return Err(format!(
                        "user '{submitter}' has uid {} below the minimum {min_uid} for containers",
                        c.uid
                    ));
                }
                Ok(Some(c))
            }
        }
    }

    /// Whether containers change user (the NM must then be root).
    pub fn switches_user(&self) -> bool {
        !matches!(self, Self::NmUser)
    }
}

/// Gives `path` and, for directories, everything below it to `c` (a container's work and log
/// directories, localized resources included). Symlinks are changed, not followed. A regular
/// file with more than one link is left as it is: giving it away would give away its other
/// names too (a hard link to a root file put there by someone else), so a hard-linked file of
/// an unpacked archive stays the NM's (readable, not writable, by the container).
pub fn chown_tree(path: &std::path::Path, c: &Credentials) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path)?;
    if meta.is_file() && meta.nlink() > 1 {
        return Ok(());
    }
    std::os::unix::fs::lchown(path, Some(c.uid), Some(c.gid))?;
    if meta.is_dir() {
        for entry in std::fs::read_dir(path)? {
            chown_tree(&entry?.path(), c)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hard_linked_file_is_not_given_away() {
        if spindle_test_support::require::root(
            "a_hard_linked_file_is_not_given_away",
            "chown needs root",
        )
        .is_none()
        {
            return;
        }
        use std::os::unix::fs::MetadataExt;
        let nobody = Credentials::lookup("nobody").expect("nobody");
        let d = tempfile::tempdir().unwrap();
        let outside = d.path().join("root-file");
        std::fs::write(&outside, "x").unwrap();
        let tree = d.path().join("tree");
        std::fs::create_dir(&tree).unwrap();
        std::fs::write(tree.join("own"), "y").unwrap();
        std::fs::hard_link(&outside, tree.join("linked")).unwrap();
        std::os::unix::fs::symlink(&outside, tree.join("sym")).unwrap();
        chown_tree(&tree, &nobody).unwrap();
        let uid = |p: &std::path::Path| std::fs::symlink_metadata(p).unwrap().uid();
        assert_eq!(uid(&tree), nobody.uid);
        assert_eq!(uid(&tree.join("own")), nobody.uid);
        assert_eq!(uid(&tree.join("sym")), nobody.uid, "the link itself");
        assert_eq!(
            uid(&outside),
            0,
            "neither through the hard link nor the symlink"
        );
    }

    #[test]
    fn local_user_and_submitter_policies() {
        let root = Credentials::lookup("root").expect("root exists");
        assert_eq!((root.uid, root.gid), (0, 0));
        assert!(Credentials::lookup("no-such-user-spindle")
            .unwrap_err()
            .contains("no local user"));
        assert_eq!(RunAs::NmUser.credentials_for("alice"), Ok(None));
        let local = RunAs::LocalUser(root.clone());
        assert_eq!(local.credentials_for("anyone"), Ok(Some(root)));
        let sub = RunAs::Submitter {
            min_uid: 1000,
            banned: BTreeSet::from(["bin".to_string()]),
        };
        assert!(sub
            .credentials_for("root")
            .unwrap_err()
            .contains("below the minimum"));
        assert!(sub.credentials_for("bin").unwrap_err().contains("banned"));
        assert!(sub
            .credentials_for("no-such-user-spindle")
            .unwrap_err()
            .contains("no local user"));
    }
}
