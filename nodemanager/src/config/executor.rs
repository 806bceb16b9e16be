//! The container executor's settings: cgroups and the process-tree memory watcher (what
//! isolation a container gets) and who containers run as (YARN's LinuxContainerExecutor in
//! non-secure mode).
//!
//! It only reads and checks keys into [`IsolationConfig`] and [`RunAs`]; it must not probe
//! cgroup mounts or create anything on the node (that is [`crate::cgroups`]' job at start),
//! and must not spell a key itself: the names are in `spindle_common::config::keys`.

use std::path::Path;
use std::time::Duration;

use spindle_common::config::{keys, Configuration};

use super::validate::{absolute, at};
use super::NmConfigError;
use crate::isolation::{DeviceIsolation, IsolationConfig};
use crate::runas::{Credentials, RunAs};

/// Who containers run as: only an explicit LinuxContainerExecutor changes user.
pub(super) fn run_as_config(conf: &Configuration) -> Result<RunAs, NmConfigError> {
    let lce = conf
        .get_nonempty(keys::NM_CONTAINER_EXECUTOR_CLASS)?
        .is_some_and(|c| c.ends_with("LinuxContainerExecutor"));
    if !lce {
        return Ok(RunAs::NmUser);
    }
    if conf.get_bool(keys::NM_LCE_LIMIT_USERS, keys::DEFAULT_NM_LCE_LIMIT_USERS)? {
        let name = conf.get_string(keys::NM_LCE_LOCAL_USER, keys::DEFAULT_NM_LCE_LOCAL_USER)?;
        let creds = Credentials::lookup(&name).map_err(|reason| NmConfigError::BadRunAsUser {
            at: at(conf, keys::NM_LCE_LOCAL_USER),
            name: keys::NM_LCE_LOCAL_USER,
            value: name.clone(),
            reason,
        })?;
        return Ok(RunAs::LocalUser(creds));
    }
    let min_uid = conf.get_u64(
        keys::SPINDLE_NM_LCE_MIN_USER_ID,
        keys::DEFAULT_SPINDLE_NM_LCE_MIN_USER_ID,
    )?;
    let banned = conf
        .get_string(
            keys::SPINDLE_NM_LCE_BANNED_USERS,
            keys::DEFAULT_SPINDLE_NM_LCE_BANNED_USERS,
        )?
        .split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(String::from)
        .collect();
    Ok(RunAs::Submitter {
        min_uid: u32::try_from(min_uid).unwrap_or(u32::MAX),
        banned,
    })
}

/// Reads the isolation keys (defaults in [`IsolationConfig::default`]).
pub(super) fn isolation_config(conf: &Configuration) -> Result<IsolationConfig, NmConfigError> {
    let d = IsolationConfig::default();
    let class_allows = match conf.get_nonempty(keys::NM_CONTAINER_EXECUTOR_CLASS)? {
        None => true,
        Some(c) if c.ends_with("LinuxContainerExecutor") => true,
        Some(c) if c.ends_with("DefaultContainerExecutor") => false,
        Some(c) => {
            return Err(NmConfigError::UnknownContainerExecutor {
                at: at(conf, keys::NM_CONTAINER_EXECUTOR_CLASS),
                name: keys::NM_CONTAINER_EXECUTOR_CLASS,
                value: c,
            })
        }
    };
    let cgroups_enabled = class_allows
        && conf.get_bool(
            keys::SPINDLE_NM_CGROUPS_ENABLED,
            keys::DEFAULT_SPINDLE_NM_CGROUPS_ENABLED,
        )?;
    let hierarchy = conf.get_string(keys::NM_CGROUPS_HIERARCHY, &d.hierarchy)?;
    let parts: Vec<&str> = hierarchy.split('/').filter(|p| !p.is_empty()).collect();
    if parts.is_empty()
        || parts
            .iter()
            .any(|p| *p == "." || *p == ".." || p.contains([',', '\0', '\n']))
    {
        return Err(NmConfigError::BadCgroupHierarchy {
            at: at(conf, keys::NM_CGROUPS_HIERARCHY),
            name: keys::NM_CGROUPS_HIERARCHY,
            value: hierarchy,
        });
    }
    let device_raw = conf.get_string(
        keys::SPINDLE_NM_CGROUPS_DEVICE_ISOLATION,
        keys::DEFAULT_SPINDLE_NM_CGROUPS_DEVICE_ISOLATION,
    )?;
    let device_isolation = DeviceIsolation::parse(&device_raw).ok_or_else(|| {
        NmConfigError::UnknownDeviceIsolation {
            at: at(conf, keys::SPINDLE_NM_CGROUPS_DEVICE_ISOLATION),
            name: keys::SPINDLE_NM_CGROUPS_DEVICE_ISOLATION,
            value: device_raw.clone(),
        }
    })?;
    let interval = conf.get_duration_ms(
        keys::NM_CONTAINER_MONITOR_INTERVAL_MS,
        keys::DEFAULT_NM_CONTAINER_MONITOR_INTERVAL_MS,
    )?;
    if interval == 0 {
        return Err(NmConfigError::MonitorIntervalNotPositive {
            at: at(conf, keys::NM_CONTAINER_MONITOR_INTERVAL_MS),
            name: keys::NM_CONTAINER_MONITOR_INTERVAL_MS,
            value: "0".into(),
        });
    }
    Ok(IsolationConfig {
        cgroups_enabled,
        hierarchy,
        strict_cpu: conf.get_bool(keys::NM_CGROUPS_STRICT_RESOURCE_USAGE, d.strict_cpu)?,
        pids_limit: conf.get_u64(keys::SPINDLE_NM_CONTAINER_PIDS_LIMIT, d.pids_limit)?,
        monitor_interval: Duration::from_millis(interval),
        pmem_check: conf.get_bool(
            keys::NM_PMEM_CHECK_ENABLED,
            keys::DEFAULT_NM_PMEM_CHECK_ENABLED,
        )?,
        device_isolation,
        mount_path: conf
            .get_nonempty(keys::NM_CGROUPS_MOUNT_PATH)?
            .map(|p| absolute(Path::new(&p))),
    })
}
