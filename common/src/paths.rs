//! Lexical path checks shared by the side that packs an archive (the SDK's code shipping)
//! and the side that unpacks it (the NM's localization): both must agree on what stays
//! inside a directory, so the rule is written once.

use std::path::{Component, Path, PathBuf};

/// `<system temp dir>/spindle-staging`: where clients stage shipped code when
/// `spindle.client.staging-dir` is unset (the SDK's shipping) and where an NM looks for a
/// finished application's staging directory (readable by every NM of one machine).
pub fn default_staging_root() -> PathBuf {
    std::env::temp_dir().join("spindle-staging")
}

/// `<root>/<user>/<app>`: an application's staging directory, None when `user` is not one
/// plain path component (so the path stays inside `root`).
pub fn staging_dir(root: &Path, user: &str, app: &str) -> Option<PathBuf> {
    let plain = |s: &str| !s.is_empty() && s != "." && s != ".." && !s.contains(['/', '\\', '\0']);
    (plain(user) && plain(app)).then(|| root.join(user).join(app))
}

/// Whether relative link `target`, followed from a directory `depth` levels below the root,
/// stays inside the root (read lexically, as a link is resolved). An absolute target, or
/// one that climbs above the root at any step, does not.
pub fn link_stays_inside(depth: usize, target: &Path) -> bool {
    let mut d = depth as isize;
    for c in target.components() {
        match c {
            Component::Normal(_) => d += 1,
            Component::CurDir => {}
            Component::ParentDir => {
                d -= 1;
                if d < 0 {
                    return false;
                }
            }
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_staging_dir_stays_under_its_root() {
        let root = Path::new("/tmp/st");
        assert_eq!(
            staging_dir(root, "alice", "application_1_0001"),
            Some(PathBuf::from("/tmp/st/alice/application_1_0001"))
        );
        for user in ["", ".", "..", "a/b"] {
            assert_eq!(
                staging_dir(root, user, "application_1_0001"),
                None,
                "{user}"
            );
        }
        assert!(default_staging_root().ends_with("spindle-staging"));
    }

    #[test]
    fn links_that_climb_out_or_are_absolute_do_not_stay_inside() {
        assert!(link_stays_inside(0, Path::new("a/b")));
        assert!(link_stays_inside(1, Path::new("../x")));
        assert!(link_stays_inside(2, Path::new("./../../y")));
        assert!(!link_stays_inside(0, Path::new("../x")));
        assert!(!link_stays_inside(1, Path::new("../../x")));
        // Climbing out and back in is still out: each step is resolved.
        assert!(!link_stays_inside(0, Path::new("../root/x")));
        assert!(!link_stays_inside(5, Path::new("/etc/passwd")));
    }
}
