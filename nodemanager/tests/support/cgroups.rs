//! cgroup helpers shared by the tests that need root and cgroups: whether this process may
//! use them, and a test's own hierarchy, removed (processes killed) when dropped.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use spindle_nodemanager::cgroups::{self, Layout};
use spindle_nodemanager::isolation::IsolationConfig;
use spindle_test_support::require;

static NEXT: AtomicU32 = AtomicU32::new(0);

/// The cgroup layout, if this process may use cgroups; else None after saying why.
pub(crate) fn cgroups_or_skip(test: &str) -> Option<Layout> {
    if !nix::unistd::geteuid().is_root() {
        require::skip(test, "not root, cgroups cannot be managed");
        return None;
    }
    let layout = match Layout::detect() {
        Ok(l) => l,
        Err(e) => {
            require::skip(test, format_args!("cannot read /proc/self/mountinfo: {e}"));
            return None;
        }
    };
    let v1 = layout.v1_mount("cpu").is_some() && layout.v1_mount("memory").is_some();
    if !v1 && layout.v2.is_none() {
        require::skip(test, "no cgroup v1 cpu+memory and no cgroup2 mounted");
        return None;
    }
    Some(layout)
}

/// A test's own hierarchy: removed (processes killed) in every controller on drop.
pub(crate) struct Hierarchy {
    layout: Layout,
    name: String,
}

impl Hierarchy {
    pub(crate) fn new(layout: &Layout) -> Self {
        // Relative (inside the test's own cgroups) where v1 carries the limits; on a pure
        // cgroup2 machine the test's own cgroup has processes, so it cannot delegate
        // controllers to children: start at the root there.
        let root = if layout.v1_mount("memory").is_some() {
            ""
        } else {
            "/"
        };
        let name = format!(
            "{root}spindle-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let h = Self {
            layout: layout.clone(),
            name,
        };
        h.purge();
        h
    }

    /// Its directory in every mounted hierarchy (they need not exist).
    pub(crate) fn dirs(&self) -> Vec<PathBuf> {
        self.layout
            .v1
            .iter()
            .chain(self.layout.v2.iter())
            .filter_map(|m| {
                if self.name.starts_with('/') {
                    Some(m.mount_point.clone())
                } else {
                    m.own_dir()
                }
            })
            .map(|d| d.join(self.name.trim_start_matches('/')))
            .collect()
    }

    pub(crate) fn purge(&self) {
        if let Err(e) = cgroups::purge_hierarchy(&self.layout, &self.name) {
            eprintln!("cannot purge test hierarchy {}: {e}", self.name);
        }
    }

    /// True if nothing of the hierarchy is left in any controller.
    pub(crate) fn gone(&self) -> bool {
        self.dirs().iter().all(|d| !d.exists())
    }

    pub(crate) fn config(&self) -> IsolationConfig {
        IsolationConfig {
            hierarchy: self.name.clone(),
            monitor_interval: Duration::from_millis(100),
            ..Default::default()
        }
    }
}

impl Drop for Hierarchy {
    fn drop(&mut self) {
        self.purge();
    }
}
