//! The node health settings: the health check script and the disk checker (YARN's keys and
//! defaults), read into [`HealthConfig`].
//!
//! It must not run the script or look at the disks (that is [`crate::health`] once the NM
//! runs); the only file it touches is the script's metadata, to refuse one that cannot run.

use std::path::PathBuf;
use std::time::Duration;

use spindle_common::config::{keys, Configuration};

use super::validate::at;
use super::NmConfigError;
use crate::health::{DiskCheckConfig, HealthConfig};

/// The health script and disk checker (YARN's names and defaults).
pub(super) fn health_config(conf: &Configuration) -> Result<HealthConfig, NmConfigError> {
    let d = HealthConfig::default();
    let bad = |name: &'static str, expected: &str, value: String| NmConfigError::BadValue {
        at: at(conf, name),
        name,
        expected: expected.to_string(),
        value,
    };
    let positive_ms = |name: &'static str, default: Duration| -> Result<Duration, NmConfigError> {
        let ms = conf.get_duration_ms(name, default.as_millis() as u64)?;
        if ms == 0 {
            return Err(bad(name, "an interval greater than 0", "0 ms".into()));
        }
        Ok(Duration::from_millis(ms))
    };
    let script = match conf.get_nonempty(keys::NM_HEALTH_CHECKER_SCRIPT_PATH)? {
        None => None,
        Some(p) => {
            use std::os::unix::fs::PermissionsExt;
            let path = PathBuf::from(&p);
            let executable = std::fs::metadata(&path)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false);
            if !executable {
                return Err(bad(
                    keys::NM_HEALTH_CHECKER_SCRIPT_PATH,
                    "an executable file",
                    p,
                ));
            }
            Some(path)
        }
    };
    // YARN 3 renamed script.timeout-ms to timeout-ms; the new name wins.
    let timeout_key = if conf
        .get_nonempty(keys::NM_HEALTH_CHECKER_TIMEOUT_MS)?
        .is_some()
    {
        keys::NM_HEALTH_CHECKER_TIMEOUT_MS
    } else {
        keys::NM_HEALTH_CHECKER_SCRIPT_TIMEOUT_MS
    };
    let fraction = conf.get_f64(
        keys::NM_DISK_CHECKER_MIN_HEALTHY,
        d.disks.min_healthy_fraction,
    )?;
    if !(0.0..=1.0).contains(&fraction) {
        return Err(bad(
            keys::NM_DISK_CHECKER_MIN_HEALTHY,
            "a fraction from 0.0 to 1.0",
            fraction.to_string(),
        ));
    }
    let percent = conf.get_f64(
        keys::NM_DISK_CHECKER_MAX_UTILIZATION,
        d.disks.max_utilization_percent,
    )?;
    if !(0.0..=100.0).contains(&percent) {
        return Err(bad(
            keys::NM_DISK_CHECKER_MAX_UTILIZATION,
            "a percentage from 0.0 to 100.0",
            percent.to_string(),
        ));
    }
    Ok(HealthConfig {
        script,
        script_opts: conf
            .get_string(
                keys::NM_HEALTH_CHECKER_SCRIPT_OPTS,
                keys::DEFAULT_NM_HEALTH_CHECKER_SCRIPT_OPTS,
            )?
            .split_whitespace()
            .map(String::from)
            .collect(),
        script_interval: positive_ms(keys::NM_HEALTH_CHECKER_INTERVAL_MS, d.script_interval)?,
        script_timeout: positive_ms(timeout_key, d.script_timeout)?,
        disks: DiskCheckConfig {
            enabled: conf.get_bool(keys::NM_DISK_CHECKER_ENABLE, d.disks.enabled)?,
            interval: positive_ms(keys::NM_DISK_CHECKER_INTERVAL_MS, d.disks.interval)?,
            min_healthy_fraction: fraction,
            max_utilization_percent: percent,
            min_free_mb: conf.get_u64(keys::NM_DISK_CHECKER_MIN_FREE_MB, d.disks.min_free_mb)?,
        },
    })
}
