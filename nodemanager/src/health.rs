//! The node's own health checks, as YARN's NodeHealthCheckerService runs them: an
//! administrator's health script and the disk checker of the local and log dirs. Their
//! verdict is what the heartbeat's `healthy` flag says, so an unhealthy node stops getting
//! containers (the RM turns it UNHEALTHY) and comes back when the checks pass again.
//!
//! * **Script** (`yarn.nodemanager.health-checker.script.path`, run every
//!   `...interval-ms` with `...script.opts`): a line of its output that begins with `ERROR`
//!   marks the node unhealthy, with those lines as the report; a run past
//!   `...timeout-ms` (or `...script.timeout-ms`) or that cannot start does too. A non-zero
//!   exit without an `ERROR` line does not (YARN's rule: a broken script must not take a
//!   whole cluster down).
//! * **Disks** (`yarn.nodemanager.disk-health-checker.*`, every `...interval-ms`): a dir is bad
//!   if it cannot be created or written, or its file system is fuller than
//!   `...max-disk-utilization-per-disk-percentage` or has less than
//!   `...min-free-space-per-disk-mb` left. The node is unhealthy when fewer than
//!   `...min-healthy-disks` (a fraction) of its local dirs, or of its log dirs, are good.
//!
//! Device plugins' problems are reported alongside but never make the node unhealthy
//! ([`crate::plugins::HealthView`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use spindle_common::config::keys;
use spindle_common::time::now_ms;
use tokio::sync::{watch, Notify};
use tracing::{info, warn};

/// The checks to run.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthConfig {
    pub script: Option<PathBuf>,
    pub script_opts: Vec<String>,
    pub script_interval: Duration,
    pub script_timeout: Duration,
    pub disks: DiskCheckConfig,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DiskCheckConfig {
    pub enabled: bool,
    pub interval: Duration,
    /// Fraction (0..=1) of the local dirs, and of the log dirs, that must be good.
    pub min_healthy_fraction: f64,
    /// A file system fuller than this (percent) makes its dir bad.
    pub max_utilization_percent: f64,
    /// Less free space than this (MB) makes a dir bad.
    pub min_free_mb: u64,
}

impl Default for HealthConfig {
    fn default() -> Self {
        Self {
            script: None,
            script_opts: Vec::new(),
            script_interval: Duration::from_millis(keys::DEFAULT_NM_HEALTH_CHECKER_INTERVAL_MS),
            script_timeout: Duration::from_millis(
                keys::DEFAULT_NM_HEALTH_CHECKER_SCRIPT_TIMEOUT_MS,
            ),
            disks: DiskCheckConfig::default(),
        }
    }
}

impl Default for DiskCheckConfig {
    fn default() -> Self {
        Self {
            enabled: keys::DEFAULT_NM_DISK_CHECKER_ENABLE,
            interval: Duration::from_millis(keys::DEFAULT_NM_DISK_CHECKER_INTERVAL_MS),
            min_healthy_fraction: keys::DEFAULT_NM_DISK_CHECKER_MIN_HEALTHY,
            max_utilization_percent: keys::DEFAULT_NM_DISK_CHECKER_MAX_UTILIZATION,
            min_free_mb: keys::DEFAULT_NM_DISK_CHECKER_MIN_FREE_MB,
        }
    }
}

/// The checks' verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeCheck {
    pub healthy: bool,
    /// Why not, or empty.
    pub report: String,
    /// When the verdict last changed (ms since the epoch).
    pub since_ms: u64,
}

impl Default for NodeCheck {
    fn default() -> Self {
        Self {
            healthy: true,
            report: String::new(),
            since_ms: now_ms(),
        }
    }
}

/// Starts the checks; the receiver always holds the current verdict. The first round runs
/// at once; a change wakes the status updater (`wake`) so the RM hears of it without
/// waiting for the next heartbeat. Ends when `stopping` turns true.
pub fn spawn(
    conf: HealthConfig,
    local_dirs: Vec<PathBuf>,
    log_dirs: Vec<PathBuf>,
    wake: Arc<Notify>,
    mut stopping: watch::Receiver<bool>,
) -> watch::Receiver<NodeCheck> {
    let (tx, rx) = watch::channel(NodeCheck::default());
    if conf.script.is_none() && !conf.disks.enabled {
        return rx;
    }
    tokio::spawn(async move {
        let mut script_due = tokio::time::interval(conf.script_interval);
        let mut disks_due = tokio::time::interval(conf.disks.interval);
        let (mut script, mut disks): (Option<String>, Option<String>) = (None, None);
        loop {
            tokio::select! {
                _ = script_due.tick(), if conf.script.is_some() => {
                    if let Some(path) = &conf.script {
                        script = run_script(path, &conf.script_opts, conf.script_timeout).await;
                    }
                }
                _ = disks_due.tick(), if conf.disks.enabled => {
                    let (d, l, c) = (local_dirs.clone(), log_dirs.clone(), conf.disks.clone());
                    disks = tokio::task::spawn_blocking(move || check_disks(&d, &l, &c))
                        .await
                        .unwrap_or_else(|e| Some(format!("the disk checker failed: {e}")));
                }
                _ = crate::manager::until_stopped(&mut stopping) => break,
            }
            let problems: Vec<&str> = [&script, &disks]
                .into_iter()
                .filter_map(|p| p.as_deref())
                .collect();
            let healthy = problems.is_empty();
            let report = problems.join("; ");
            let changed = {
                let cur = tx.borrow();
                cur.healthy != healthy || cur.report != report
            };
            if changed {
                if healthy {
                    info!("node health checks pass again");
                } else {
                    warn!(%report, "node is unhealthy");
                }
                let _ = tx.send(NodeCheck {
                    healthy,
                    report,
                    since_ms: now_ms(),
                });
                wake.notify_one();
            }
        }
    });
    rx
}

/// One run of the health script: Some(why) if it says the node is unhealthy.
pub async fn run_script(path: &Path, opts: &[String], timeout: Duration) -> Option<String> {
    let out = match crate::plugins::exec::run(path, opts, timeout).await {
        Err(crate::plugins::exec::ExecError::Timeout { .. }) => {
            return Some(format!(
                "Node health script {} timed out after {} ms",
                path.display(),
                timeout.as_millis()
            ))
        }
        Err(crate::plugins::exec::ExecError::Spawn { source: e, .. }) => {
            return Some(format!(
                "Node health script {} could not run: {e}",
                path.display()
            ))
        }
        Err(e) => return Some(format!("Node health script {} failed: {e}", path.display())),
        Ok(out) => out,
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let errors: Vec<&str> = text
        .lines()
        .map(str::trim_end)
        .filter(|l| l.starts_with("ERROR"))
        .collect();
    if errors.is_empty() {
        if !out.status.success() {
            warn!(script = %path.display(), status = %out.status,
                "the node health script failed without an ERROR line; the node stays healthy");
        }
        return None;
    }
    Some(errors.join(" | "))
}

/// The disk checker over both dir lists: Some(report) if the node is unhealthy.
pub fn check_disks(local: &[PathBuf], logs: &[PathBuf], c: &DiskCheckConfig) -> Option<String> {
    let mut problems = Vec::new();
    for (kind, dirs) in [("local-dirs", local), ("log-dirs", logs)] {
        let bad: Vec<String> = dirs
            .iter()
            .filter_map(|d| dir_problem(d, c).map(|why| format!("{} ({why})", d.display())))
            .collect();
        if dirs.is_empty() || bad.is_empty() {
            continue;
        }
        let good = (dirs.len() - bad.len()) as f64 / dirs.len() as f64;
        if good < c.min_healthy_fraction || good == 0.0 {
            problems.push(format!(
                "{}/{} {kind} are bad: {}",
                bad.len(),
                dirs.len(),
                bad.join(", ")
            ));
        }
    }
    (!problems.is_empty()).then(|| problems.join("; "))
}

/// Why one dir is bad, if it is.
fn dir_problem(dir: &Path, c: &DiskCheckConfig) -> Option<String> {
    if let Err(e) = std::fs::create_dir_all(dir) {
        return Some(format!("cannot create it: {e}"));
    }
    use nix::unistd::{access, AccessFlags};
    if let Err(e) = access(
        dir,
        AccessFlags::R_OK | AccessFlags::W_OK | AccessFlags::X_OK,
    ) {
        return Some(format!("not readable and writable: {e}"));
    }
    let st = match nix::sys::statvfs::statvfs(dir) {
        Ok(st) => st,
        Err(e) => return Some(format!("cannot read its file system's usage: {e}")),
    };
    let block = st.fragment_size() as u128;
    let total = st.blocks() as u128 * block;
    let usable = st.blocks_available() as u128 * block;
    if total == 0 {
        return None;
    }
    let used_percent = (total - usable.min(total)) as f64 * 100.0 / total as f64;
    if used_percent > c.max_utilization_percent {
        return Some(format!(
            "used space {used_percent:.1}% above the threshold of {:.1}%",
            c.max_utilization_percent
        ));
    }
    let free_mb = (usable >> 20) as u64;
    if free_mb < c.min_free_mb {
        return Some(format!(
            "{free_mb} MB free, below the minimum of {} MB",
            c.min_free_mb
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, body: &str) -> PathBuf {
        let p = dir.join("health.sh");
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    #[tokio::test]
    async fn the_script_decides_by_error_lines_and_time() {
        let d = tempfile::tempdir().unwrap();
        let t = Duration::from_secs(5);
        let ok = script(d.path(), "echo all good");
        assert_eq!(run_script(&ok, &[], t).await, None);
        let failing = script(d.path(), "echo fine; exit 3");
        assert_eq!(
            run_script(&failing, &[], t).await,
            None,
            "exit codes do not count"
        );
        let bad = script(d.path(), "echo checking; echo \"ERROR $1 is broken\"");
        assert_eq!(
            run_script(&bad, &["gpu0".into()], t).await.as_deref(),
            Some("ERROR gpu0 is broken")
        );
        let slow = script(d.path(), "sleep 5");
        let why = run_script(&slow, &[], Duration::from_millis(200))
            .await
            .unwrap();
        assert!(why.contains("timed out after 200 ms"), "{why}");
        let why = run_script(&d.path().join("missing"), &[], t).await.unwrap();
        assert!(why.contains("could not run"), "{why}");
    }

    #[test]
    fn full_or_missing_dirs_are_bad_below_the_healthy_fraction() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        let relaxed = DiskCheckConfig {
            max_utilization_percent: 100.0,
            ..Default::default()
        };
        assert_eq!(
            check_disks(std::slice::from_ref(&a), std::slice::from_ref(&a), &relaxed),
            None
        );
        assert!(a.is_dir(), "created");
        // Any file system is fuller than 0 %.
        let strict = DiskCheckConfig {
            max_utilization_percent: 0.0,
            ..Default::default()
        };
        let why = check_disks(std::slice::from_ref(&a), &[], &strict).unwrap();
        assert!(why.starts_with("1/1 local-dirs are bad:"), "{why}");
        assert!(why.contains("above the threshold of 0.0%"), "{why}");
        // Free-space floor.
        let floor = DiskCheckConfig {
            max_utilization_percent: 100.0,
            min_free_mb: u64::MAX,
            ..Default::default()
        };
        assert!(check_disks(&[], std::slice::from_ref(&a), &floor)
            .unwrap()
            .contains("1/1 log-dirs are bad"));
        // One bad dir of four is within the default 25 % rule; all four bad are not.
        let blocked = d.path().join("file");
        std::fs::write(&blocked, "").unwrap();
        let under_file = blocked.join("dir");
        let dirs = vec![
            d.path().join("b"),
            d.path().join("c"),
            d.path().join("e"),
            under_file,
        ];
        assert_eq!(check_disks(&dirs, &[], &relaxed), None);
        let why = check_disks(&[blocked.join("x")], &[], &relaxed).unwrap();
        assert!(why.contains("cannot create it"), "{why}");
    }
}
