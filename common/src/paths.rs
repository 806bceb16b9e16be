//! Lexical path checks shared by the side that packs an archive (the SDK's code shipping)
//! and the side that unpacks it (the NM's localization): both must agree on what stays
//! inside a directory, so the rule is written once.

use std::path::{Component, Path};

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
