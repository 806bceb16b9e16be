//! Tests that need what only some machines give (root, mounted cgroups, `mknod`): outside CI
//! such a test prints why it skips and returns; under `CI=true` (CI runs as root with
//! cgroups) a missing requirement is a failure, so a broken CI machine cannot pass silently.

/// Whether this run is CI's (`CI=true`, or any value but `false`/`0`/empty).
pub fn in_ci() -> bool {
    ci_value_means_ci(std::env::var("CI").ok().as_deref())
}

fn ci_value_means_ci(v: Option<&str>) -> bool {
    v.is_some_and(|v| !matches!(v.trim(), "" | "0" | "false"))
}

/// A test cannot run here because `reason`: prints `<test>: skipped: <reason>` and returns
/// (the caller then returns), or panics with the same words under CI.
#[track_caller]
pub fn skip(test: &str, reason: impl std::fmt::Display) {
    if in_ci() {
        panic!("{test}: CI=true, but {reason}: CI must run this test");
    }
    eprintln!("{test}: skipped: {reason}");
}

/// `Some(())` when the process is root; otherwise [`skip`]s and gives `None`.
#[track_caller]
pub fn root(test: &str, why: &str) -> Option<()> {
    if nix::unistd::geteuid().is_root() {
        Some(())
    } else {
        skip(test, format_args!("not root ({why})"));
        None
    }
}

#[cfg(test)]
mod tests {
    use super::ci_value_means_ci as ci;

    #[test]
    fn ci_is_recognised_by_its_usual_values() {
        assert!(ci(Some("true")) && ci(Some("1")) && ci(Some("yes")));
        assert!(!ci(None) && !ci(Some("")) && !ci(Some("false")) && !ci(Some("0")));
    }
}
