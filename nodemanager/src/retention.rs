//! Deleting old container logs: YARN's `yarn.nodemanager.log.retain-seconds` (3 hours by
//! default) for a NodeManager without log aggregation. An application's log directory
//! (`<log-dir>/<appId>`) is deleted once the application is no longer live on this node and
//! nothing in the directory has changed for that long; a negative value keeps logs forever.
//!
//! The sweep reads the file system rather than remembering deadlines, so a restarted NM
//! still deletes the logs of applications that ended before it stopped. It never follows a
//! link (a container owns its log directory and may put links there).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use spindle_common::ids::ApplicationId;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::containers::APP_FINISHED;
use crate::manager::NmHandle;

/// How often the sweep runs for a retention of `retain`: a quarter of it, between one second
/// and ten minutes.
pub fn sweep_interval(retain: Duration) -> Duration {
    (retain / 4).clamp(Duration::from_secs(1), Duration::from_secs(600))
}

/// Starts the sweep (nothing when `retain` is None: logs are kept).
pub fn spawn(
    log_dirs: Vec<PathBuf>,
    retain: Option<Duration>,
    handle: NmHandle,
    mut stopping: watch::Receiver<bool>,
) {
    let Some(retain) = retain else {
        return;
    };
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(sweep_interval(retain));
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = crate::manager::until_stopped(&mut stopping) => break,
            }
            // Applications with anything still live here keep their logs.
            let Ok(apps) = handle.apps().await else {
                break;
            };
            let live: BTreeSet<ApplicationId> = apps
                .into_iter()
                .filter(|a| a.state != APP_FINISHED)
                .map(|a| a.id)
                .collect();
            let dirs = log_dirs.clone();
            let _ =
                tokio::task::spawn_blocking(move || sweep(&dirs, &live, retain, SystemTime::now()))
                    .await;
        }
    });
}

/// One sweep: deletes every `<log-dir>/<appId>` of an application not in `live` whose newest
/// entry is older than `retain` at `now`. Returns the deleted directories.
pub fn sweep(
    log_dirs: &[PathBuf],
    live: &BTreeSet<ApplicationId>,
    retain: Duration,
    now: SystemTime,
) -> Vec<PathBuf> {
    let mut deleted = Vec::new();
    for root in log_dirs {
        let Ok(entries) = std::fs::read_dir(root) else {
            continue;
        };
        for e in entries.filter_map(Result::ok) {
            let path = e.path();
            let Some(app) = e
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<ApplicationId>().ok())
            else {
                continue;
            };
            let is_dir = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir());
            if live.contains(&app) || !is_dir {
                continue;
            }
            let newest = newest_mtime(&path, 2);
            let old = newest
                .and_then(|t| now.duration_since(t).ok())
                .is_some_and(|age| age > retain);
            if !old {
                continue;
            }
            match std::fs::remove_dir_all(&path) {
                Ok(()) => {
                    info!(app_id = %app, dir = %path.display(), "deleted the application's logs (retention)");
                    deleted.push(path);
                }
                Err(e) => warn!(dir = %path.display(), error = %e, "cannot delete old logs"),
            }
        }
    }
    deleted
}

/// The newest modification time of `path` and what is below it, `depth` levels down, never
/// following a link (a container owns its log directory and may put links there).
fn newest_mtime(path: &Path, depth: usize) -> Option<SystemTime> {
    let meta = std::fs::symlink_metadata(path).ok();
    let mut newest = meta.as_ref().and_then(|m| m.modified().ok());
    if depth > 0 && meta.is_some_and(|m| m.is_dir()) {
        if let Ok(entries) = std::fs::read_dir(path) {
            for e in entries.filter_map(Result::ok) {
                let t = newest_mtime(&e.path(), depth - 1);
                newest = newest.max(t);
            }
        }
    }
    newest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_logs_of_ended_applications_go_and_the_rest_stay() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().to_path_buf();
        let (ended, running, fresh) = (
            ApplicationId::new(1, 1),
            ApplicationId::new(1, 2),
            ApplicationId::new(1, 3),
        );
        for app in [ended, running, fresh] {
            let c = root
                .join(app.to_string())
                .join("container_1_0001_01_000001");
            std::fs::create_dir_all(&c).unwrap();
            std::fs::write(c.join("stdout"), "x").unwrap();
        }
        std::fs::create_dir_all(root.join("not-an-app")).unwrap();
        let live = BTreeSet::from([running]);
        let retain = Duration::from_secs(60);
        // Nothing is old yet.
        assert!(sweep(
            std::slice::from_ref(&root),
            &live,
            retain,
            SystemTime::now()
        )
        .is_empty());
        // An hour later: the ended application's logs go; the live one's stay.
        let later = SystemTime::now() + Duration::from_secs(3600);
        let gone = sweep(std::slice::from_ref(&root), &live, retain, later);
        assert!(gone.contains(&root.join(ended.to_string())), "{gone:?}");
        assert!(gone.contains(&root.join(fresh.to_string())), "{gone:?}");
        assert!(root.join(running.to_string()).is_dir());
        assert!(
            root.join("not-an-app").is_dir(),
            "only application dirs are swept"
        );
    }

    #[test]
    fn the_sweep_runs_four_times_per_retention_within_bounds() {
        assert_eq!(
            sweep_interval(Duration::from_secs(10_800)),
            Duration::from_secs(600)
        );
        assert_eq!(
            sweep_interval(Duration::from_secs(40)),
            Duration::from_secs(10)
        );
        assert_eq!(
            sweep_interval(Duration::from_millis(100)),
            Duration::from_secs(1)
        );
    }
}
