//! The watch over one running container: its memory limit (process-tree RSS, or the
//! cgroup's OOM counter) and the teardown of its isolation when it ends.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use spindle_common::ids::ContainerId;
use tracing::warn;

use super::Enforcement;
use crate::cgroups::Cgroups;
use crate::containers::ProcessExit;
use crate::isolation::proctree;

/// Memory limits of the containers this executor watches, by container.
pub(super) type WatchedLimits = Arc<Mutex<HashMap<ContainerId, Arc<AtomicI64>>>>;

/// What watches one running container and tears its isolation down when it ends.
pub(super) struct Watch {
    pub(super) enforcement: Enforcement,
    pub(super) id: ContainerId,
    pub(super) pid: i32,
    /// The container's memory limit in MB; a container update changes it.
    pub(super) limit_mb: Arc<AtomicI64>,
    /// Where the executor keeps `limit_mb`: the entry goes when the watch ends.
    pub(super) registry: WatchedLimits,
}

impl Watch {
    fn limit_mb(&self) -> i64 {
        self.limit_mb.load(Ordering::Relaxed)
    }

    /// How often to check. Checked while the limit is positive (an update can make it so).
    pub(super) fn interval(&self) -> Option<Duration> {
        match &self.enforcement {
            Enforcement::None => None,
            Enforcement::ProcessTree { interval } | Enforcement::Cgroups { interval, .. } => {
                Some(*interval)
            }
        }
    }

    /// One check; `Some(why)` once the container has been killed for its memory.
    pub(super) async fn check(&self) -> Option<String> {
        let limit = self.limit_mb();
        if limit <= 0 {
            return None;
        }
        let enforcement = self.enforcement.clone();
        let (id, pid) = (self.id, self.pid);
        tokio::task::spawn_blocking(move || match enforcement {
            Enforcement::None => None,
            Enforcement::ProcessTree { .. } => match proctree::check(pid, limit) {
                proctree::PmemVerdict::Within => None,
                proctree::PmemVerdict::Over { rss_bytes, members } => {
                    proctree::kill_tree(pid, &members);
                    let mb = rss_bytes >> 20;
                    warn!(container_id = %id, app_id = %id.application_id(), rss_mb = mb, limit_mb = limit, "container is over its memory limit: killed");
                    Some(format!("its process tree used {mb} MB (pmem check)"))
                }
            },
            Enforcement::Cgroups { cgroups, .. } => {
                let n = cgroups.oom_kills(&id);
                (n > 0).then(|| {
                    cgroups.kill_all(&id);
                    warn!(container_id = %id, app_id = %id.application_id(), oom_kills = n, limit_mb = limit, "the kernel OOM-killed a container process: container killed");
                    oom_detail(n)
                })
            }
        })
        .await
        .unwrap_or(None)
    }

    /// The leader has been reaped: reads the OOM counter, then empties and removes the
    /// container's cgroups.
    pub(super) async fn finish(self, exit: ProcessExit, killed: Option<String>) -> ProcessExit {
        let limit_mb = self.limit_mb();
        {
            let mut reg = self
                .registry
                .lock()
                .expect("the watched-limits lock is never poisoned");
            if reg
                .get(&self.id)
                .is_some_and(|l| Arc::ptr_eq(l, &self.limit_mb))
            {
                reg.remove(&self.id);
            }
        }
        let detail = match self.enforcement {
            Enforcement::Cgroups { cgroups, .. } => {
                let id = self.id;
                tokio::task::spawn_blocking(move || teardown(&cgroups, &id))
                    .await
                    .unwrap_or(None)
                    .or(killed)
            }
            _ => killed,
        };
        match detail {
            Some(detail) => ProcessExit::MemoryExceeded { limit_mb, detail },
            None => exit,
        }
    }
}

fn oom_detail(kills: u64) -> String {
    format!("the kernel's OOM killer killed {kills} of its processes")
}

/// Reads the container's OOM kills and removes its cgroups; the OOM detail, if any.
pub(super) fn teardown(cgroups: &Cgroups, id: &ContainerId) -> Option<String> {
    let n = cgroups.oom_kills(id);
    if let Err(e) = cgroups.destroy(id) {
        warn!(container_id = %id, error = %e, "cannot remove the container's cgroups");
    }
    (n > 0).then(|| oom_detail(n))
}
