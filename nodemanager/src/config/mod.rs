//! The NodeManager's typed configuration, built once from the raw Hadoop properties.
//!
//! Every rule has its own error variant, and every message names where the bad value came
//! from (`file:line`, `-D` for a command-line override, `<default>` when unset) in the one-line
//! `<where>: property '<name>': expected ..., got '...'` form the daemons print before they
//! exit with status 1. Nothing downstream re-reads raw properties.
//!
//! This module owns [`NmConfig`] and its top-level keys (addresses, memory and vcores, dirs,
//! stop and hold timeouts, recovery, the environment whitelist); the rest of the parser is
//! split by concern:
//! - [`error`]: [`NmConfigError`], one variant per rule;
//! - [`resources`]: the device plugins' settings and `node-resources.xml`'s extended types;
//! - [`executor`]: cgroups and the memory watcher, and who containers run as;
//! - [`health`]: the health script and the disk checker;
//! - [`image`]: the image store (`spindle.nodemanager.runtime.oci.*`);
//! - [`node_labels`]: the distributed node label and attribute providers;
//! - [`validate`]: the checks and conversions those share.
//!
//! No module here spells a key: every name (and its default) is in
//! `spindle_common::config::keys`. The names this module exported before the keys moved
//! there are re-exported below, so `spindle_nodemanager::config::NM_RECOVERY_ENABLED` and
//! the like still work.

use std::path::{Path, PathBuf};
use std::time::Duration;

use spindle_common::config::{keys, Configuration};
use spindle_common::net::is_wildcard;
use spindle_common::records::node::LaunchHold;
use spindle_common::resource::Resource;

use crate::health::HealthConfig;
use crate::isolation::IsolationConfig;
use crate::node_labels::NodeLabelsConfig;
use crate::runas::RunAs;

mod error;
mod executor;
mod health;
mod image;
mod node_labels;
mod resources;
mod runtime;
mod validate;

#[cfg(test)]
mod tests;

pub use error::NmConfigError;
use executor::{isolation_config, run_as_config};
use health::health_config;
use image::image_store_config;
use node_labels::node_labels_config;
use resources::{node_resource_types, resource_plugins};
pub use resources::{
    parse_allowed_fpgas, parse_allowed_gpus, AllowedFpgas, AllowedGpus, FpgaPluginConfig,
    GpuPluginConfig, ResourcePluginsConfig,
};
use runtime::runtime_policy;
pub use validate::connectable;
use validate::{absolute, at, check_address, dirs, valid_env_name, valid_hostname};

// The NM's key names as this module exported them before they moved to
// `spindle_common::config::keys` (the `spindle.*` ones are `SPINDLE_*` there).
pub use keys::{
    DEFAULT_NM_ENV_WHITELIST, DEFAULT_NM_FPGA_VENDOR_PLUGIN_CLASS, DEFAULT_NM_RECOVERY_ENABLED,
    DEFAULT_NM_STDERR_TAIL_BYTES, NM_CGROUPS_STRICT_RESOURCE_USAGE, NM_CONTAINER_EXECUTOR_CLASS,
    NM_DISK_CHECKER_ENABLE, NM_DISK_CHECKER_INTERVAL_MS, NM_DISK_CHECKER_MAX_UTILIZATION,
    NM_DISK_CHECKER_MIN_FREE_MB, NM_DISK_CHECKER_MIN_HEALTHY, NM_ENV_WHITELIST,
    NM_FPGA_PATH_TO_DISCOVERY_EXECUTABLES, NM_FPGA_VENDOR_PLUGIN_CLASS,
    NM_HEALTH_CHECKER_SCRIPT_OPTS, NM_HEALTH_CHECKER_TIMEOUT_MS, NM_LCE_LIMIT_USERS,
    NM_LCE_LOCAL_USER, NM_LOG_RETAIN_SECONDS, NM_RECOVERY_ENABLED, NM_RESOURCE_TYPE_PREFIX,
    NM_STDERR_TAIL_BYTES,
};
pub use keys::{
    DEFAULT_SPINDLE_NM_DEVICE_DISCOVERY_TIMEOUT_MS as DEFAULT_NM_DEVICE_DISCOVERY_TIMEOUT_MS,
    DEFAULT_SPINDLE_NM_FPGA_MAJOR_DEVICE_NUMBER as DEFAULT_NM_FPGA_MAJOR_DEVICE_NUMBER,
    DEFAULT_SPINDLE_NM_GPU_MAJOR_DEVICE_NUMBER as DEFAULT_NM_GPU_MAJOR_DEVICE_NUMBER,
    DEFAULT_SPINDLE_NM_GPU_REFRESH_INTERVAL_MS as DEFAULT_NM_GPU_REFRESH_INTERVAL_MS,
    SPINDLE_NM_CGROUPS_DEVICE_ISOLATION as NM_CGROUPS_DEVICE_ISOLATION,
    SPINDLE_NM_CGROUPS_ENABLED as NM_CGROUPS_ENABLED,
    SPINDLE_NM_CONTAINER_PIDS_LIMIT as NM_CONTAINER_PIDS_LIMIT,
    SPINDLE_NM_DEVICE_DISCOVERY_TIMEOUT_MS as NM_DEVICE_DISCOVERY_TIMEOUT_MS,
    SPINDLE_NM_FPGA_MAJOR_DEVICE_NUMBER as NM_FPGA_MAJOR_DEVICE_NUMBER,
    SPINDLE_NM_GPU_MAJOR_DEVICE_NUMBER as NM_GPU_MAJOR_DEVICE_NUMBER,
    SPINDLE_NM_GPU_REFRESH_INTERVAL_MS as NM_GPU_REFRESH_INTERVAL_MS,
    SPINDLE_NM_LCE_BANNED_USERS as NM_LCE_BANNED_USERS,
    SPINDLE_NM_LCE_MIN_USER_ID as NM_LCE_MIN_USER_ID,
};

/// The NodeId host when neither `yarn.nodemanager.hostname` nor the webapp address names one
/// and this machine's host name does not resolve (not a key default: the key's is the
/// wildcard `0.0.0.0`, `keys::DEFAULT_NM_HOSTNAME`).
pub const DEFAULT_NM_HOSTNAME: &str = "127.0.0.1";

/// The NodeManager's validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct NmConfig {
    /// Where the NM's single HTTP port listens (`yarn.nodemanager.webapp.address`).
    pub webapp_address: String,
    /// The host part of the NodeId and `NM_HOST` (`yarn.nodemanager.hostname`).
    pub hostname: String,
    /// What the NM offers to the RM: `memory-mb` and `vcores`.
    pub resource: Resource,
    /// Absolute; the first holds the container work dirs.
    pub local_dirs: Vec<PathBuf>,
    /// Absolute; the first holds the containers' stdout/stderr.
    pub log_dirs: Vec<PathBuf>,
    /// SIGTERM to SIGKILL delay when a container is stopped.
    pub sigkill_delay: Duration,
    /// How long a held gang start waits for its release when the call names no timeout.
    pub launch_hold_timeout: Duration,
    /// When true, a stopping NM leaves containers running and a restarted NM re-adopts them.
    pub recovery_enabled: bool,
    /// Where the container store lives (used only when recovery is enabled).
    pub recovery_dir: PathBuf,
    /// The RM's `host:port`, with a wildcard host replaced by 127.0.0.1.
    pub rm_address: String,
    /// Every RM heartbeats may go to, `rm_address` first: under RM HA (with
    /// `spindle.nodemanager.rm-address` unset) the RMs of `yarn.resourcemanager.ha.rm-ids`.
    pub rm_addresses: Vec<String>,
    /// How heartbeats fail over among them (`yarn.client.failover-*`).
    pub rm_failover: spindle_common::failover::FailoverPolicy,
    /// The NM's configuration directory, absolute; containers get it as `SPINDLE_CONF_DIR`.
    pub conf_dir: PathBuf,
    /// Clients' staging root (`spindle.client.staging-dir`, else
    /// `<temp dir>/spindle-staging`): a finished application's `<root>/<user>/<app>` is
    /// removed here.
    pub staging_root: PathBuf,
    /// NM environment variables passed through to containers.
    pub env_whitelist: Vec<String>,
    /// Bytes of stderr quoted in a failed container's diagnostics.
    pub stderr_tail_bytes: u64,
    /// GPU/FPGA plugins (`yarn.nodemanager.resource-plugins` and their keys).
    pub plugins: ResourcePluginsConfig,
    /// cgroups and the memory watcher (see [`isolation_config`]).
    pub isolation: IsolationConfig,
    /// Which container runtimes run here and how (`yarn.nodemanager.runtime.linux.*`).
    pub runtime: crate::oci::RuntimePolicy,
    /// Who containers run as (see [`crate::runas`]).
    pub run_as: RunAs,
    /// The node's health script and disk checks (see [`crate::health`]).
    pub health: HealthConfig,
    /// How long an ended application's logs are kept (`yarn.nodemanager.log.retain-seconds`);
    /// None: forever (a negative value).
    pub log_retain: Option<Duration>,
    /// The node's partition and `nm.yarn.io/` attribute providers (see
    /// [`crate::node_labels`]).
    pub node_labels: NodeLabelsConfig,
    /// The HTTP serve loop: connection limits and deadlines (`spindle.http.*`).
    pub http: spindle_rest_edge::serve::HttpServerConfig,
    /// The cluster secret (`spindle.cluster.secret-file`) every node-tracker call is signed
    /// with; `None`: unset, calls go unsigned (an RM with the key set refuses them).
    pub cluster_secret: Option<spindle_common::cluster_secret::ClusterSecret>,
    /// The image store: cache, size limit, insecure registries, credentials (see
    /// [`crate::image`]).
    pub images: crate::image::ImageStoreConfig,
}

impl NmConfig {
    /// Builds and validates the NM configuration. `conf_dir` is where `conf` was loaded from.
    ///
    /// The NodeId host is `yarn.nodemanager.hostname` when it names a host; when it is unset
    /// or the wildcard `0.0.0.0` (its YARN default, which also makes the NM listen on every
    /// interface), the host of the webapp address if that is not a wildcard, else this
    /// machine's host name (as YARN does) if it resolves, else 127.0.0.1, so that the NodeId
    /// is always an address the RM and AMs can dial.
    pub fn from_configuration(
        conf: &Configuration,
        conf_dir: &Path,
    ) -> Result<Self, NmConfigError> {
        // Typos are told, not refused (Hadoop ignores unknown keys; the files are shared
        // with the RM and perhaps other tools): file, line, key and the closest known key.
        for k in conf.unknown_keys() {
            tracing::warn!("{k}");
        }
        let (webapp_address, hostname) = node_address(conf)?;

        let base = base_capacity(conf)?;

        let local_raw = conf.get_string(keys::NM_LOCAL_DIRS, keys::DEFAULT_NM_LOCAL_DIRS)?;
        let local_dirs = dirs(&local_raw);
        if local_dirs.is_empty() {
            return Err(NmConfigError::NoLocalDirs {
                at: at(conf, keys::NM_LOCAL_DIRS),
                name: keys::NM_LOCAL_DIRS,
                value: local_raw,
            });
        }
        let log_raw = conf.get_string(keys::NM_LOG_DIRS, keys::DEFAULT_NM_LOG_DIRS)?;
        let log_dirs = dirs(&log_raw);
        if log_dirs.is_empty() {
            return Err(NmConfigError::NoLogDirs {
                at: at(conf, keys::NM_LOG_DIRS),
                name: keys::NM_LOG_DIRS,
                value: log_raw,
            });
        }

        let sigkill_delay = Duration::from_millis(conf.get_duration_ms(
            keys::NM_SLEEP_DELAY_BEFORE_SIGKILL_MS,
            keys::DEFAULT_NM_SLEEP_DELAY_BEFORE_SIGKILL_MS,
        )?);

        let hold_ms = conf.get_duration_ms(
            keys::SPINDLE_NM_LAUNCH_HOLD_TIMEOUT_MS,
            keys::DEFAULT_SPINDLE_NM_LAUNCH_HOLD_TIMEOUT_MS,
        )?;
        if hold_ms == 0 || hold_ms > LaunchHold::MAX_TIMEOUT_MS {
            return Err(NmConfigError::BadLaunchHoldTimeout {
                at: at(conf, keys::SPINDLE_NM_LAUNCH_HOLD_TIMEOUT_MS),
                name: keys::SPINDLE_NM_LAUNCH_HOLD_TIMEOUT_MS,
                value: hold_ms,
            });
        }
        let launch_hold_timeout = Duration::from_millis(hold_ms);

        let recovery_enabled =
            conf.get_bool(keys::NM_RECOVERY_ENABLED, keys::DEFAULT_NM_RECOVERY_ENABLED)?;
        let recovery_raw = conf.get_string(keys::NM_RECOVERY_DIR, keys::DEFAULT_NM_RECOVERY_DIR)?;
        if recovery_raw.is_empty() || recovery_raw.contains(',') {
            return Err(NmConfigError::BadRecoveryDir {
                at: at(conf, keys::NM_RECOVERY_DIR),
                name: keys::NM_RECOVERY_DIR,
                value: recovery_raw,
            });
        }
        let recovery_dir = absolute(Path::new(&recovery_raw));

        let (rm_key, rm_raw) = match conf.get_nonempty(keys::SPINDLE_NM_RM_ADDRESS)? {
            Some(a) => (keys::SPINDLE_NM_RM_ADDRESS, a),
            None => (
                keys::RM_WEBAPP_ADDRESS,
                conf.get_string(keys::RM_WEBAPP_ADDRESS, keys::DEFAULT_RM_WEBAPP_ADDRESS)?,
            ),
        };
        check_address(conf, rm_key, &rm_raw, false)?;
        let mut rm_address = connectable(&rm_raw);
        let mut rm_addresses = vec![rm_address.clone()];
        if rm_key != keys::SPINDLE_NM_RM_ADDRESS {
            if let Some(rms) = spindle_common::failover::ha_rm_addresses(conf)
                .map_err(|e| NmConfigError::RmHa(Box::new(e)))?
            {
                rm_addresses = rms.iter().map(|(_, a)| connectable(a)).collect();
                if let Some(first) = rm_addresses.first() {
                    rm_address = first.clone();
                }
            }
        }
        let rm_failover = spindle_common::failover::FailoverPolicy::from_conf(conf)?;

        let env_whitelist = env_whitelist(conf)?;
        let stderr_tail_bytes = conf.get_u64(
            keys::NM_STDERR_TAIL_BYTES,
            keys::DEFAULT_NM_STDERR_TAIL_BYTES,
        )?;
        let plugins = resource_plugins(conf)?;
        let isolation = isolation_config(conf)?;
        let run_as = run_as_config(conf)?;
        let runtime = runtime_policy(conf)?;
        let health = health_config(conf)?;
        let node_labels = node_labels_config(conf)?;
        let retain = conf.get_i64(
            keys::NM_LOG_RETAIN_SECONDS,
            keys::DEFAULT_NM_LOG_RETAIN_SECONDS,
        )?;
        let log_retain = u64::try_from(retain).ok().map(Duration::from_secs);
        let images = image_store_config(conf, &local_dirs)?;

        Ok(Self {
            webapp_address,
            hostname,
            resource: node_resource_types(conf, base)?,
            local_dirs,
            log_dirs,
            sigkill_delay,
            launch_hold_timeout,
            recovery_enabled,
            recovery_dir,
            rm_address,
            rm_addresses,
            rm_failover,
            conf_dir: absolute(conf_dir),
            staging_root: match conf.get(keys::CLIENT_STAGING_DIR)? {
                Some(v) if !v.trim().is_empty() => absolute(Path::new(v.trim())),
                _ => spindle_common::paths::default_staging_root(),
            },
            env_whitelist,
            stderr_tail_bytes,
            plugins,
            isolation,
            runtime,
            run_as,
            health,
            log_retain,
            node_labels,
            http: spindle_rest_edge::serve::HttpServerConfig::from_conf(conf)?,
            cluster_secret: cluster_secret(conf)?,
            images,
        })
    }
}

/// The webapp address and the NodeId host (see [`NmConfig::from_configuration`]).
fn node_address(conf: &Configuration) -> Result<(String, String), NmConfigError> {
    let explicit_host = conf
        .get_nonempty(keys::NM_HOSTNAME)?
        .filter(|h| !is_wildcard(h));
    if let Some(h) = &explicit_host {
        if !valid_hostname(h) {
            return Err(NmConfigError::BadHostname {
                at: at(conf, keys::NM_HOSTNAME),
                name: keys::NM_HOSTNAME,
                value: h.clone(),
            });
        }
    }
    let webapp_address =
        conf.get_string(keys::NM_WEBAPP_ADDRESS, keys::DEFAULT_NM_WEBAPP_ADDRESS)?;
    check_address(conf, keys::NM_WEBAPP_ADDRESS, &webapp_address, true)?;
    let hostname = explicit_host.unwrap_or_else(|| match webapp_address.rsplit_once(':') {
        Some((host, _)) if !is_wildcard(host) && valid_hostname(host) => host.to_string(),
        _ => spindle_common::net::local_hostname()
            .filter(|h| valid_hostname(h))
            .unwrap_or_else(|| DEFAULT_NM_HOSTNAME.to_string()),
    });
    Ok((webapp_address, hostname))
}

/// The node's memory and vcores (`yarn.nodemanager.resource.*`), each positive.
fn base_capacity(conf: &Configuration) -> Result<Resource, NmConfigError> {
    let memory = conf.get_i64(
        keys::NM_RESOURCE_MEMORY_MB,
        keys::DEFAULT_NM_RESOURCE_MEMORY_MB,
    )?;
    if memory <= 0 {
        return Err(NmConfigError::MemoryNotPositive {
            at: at(conf, keys::NM_RESOURCE_MEMORY_MB),
            name: keys::NM_RESOURCE_MEMORY_MB,
            value: memory.to_string(),
        });
    }
    let vcores = conf.get_i64(
        keys::NM_RESOURCE_CPU_VCORES,
        keys::DEFAULT_NM_RESOURCE_CPU_VCORES,
    )?;
    if vcores <= 0 {
        return Err(NmConfigError::VcoresNotPositive {
            at: at(conf, keys::NM_RESOURCE_CPU_VCORES),
            name: keys::NM_RESOURCE_CPU_VCORES,
            value: vcores.to_string(),
        });
    }
    Ok(Resource::new(memory, vcores))
}

/// `yarn.nodemanager.env-whitelist`: the NM's variables a container inherits.
fn env_whitelist(conf: &Configuration) -> Result<Vec<String>, NmConfigError> {
    let whitelist_raw = conf.get_string(keys::NM_ENV_WHITELIST, keys::DEFAULT_NM_ENV_WHITELIST)?;
    let env_whitelist: Vec<String> = whitelist_raw
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    if env_whitelist.iter().any(|v| !valid_env_name(v)) {
        return Err(NmConfigError::BadEnvWhitelist {
            at: at(conf, keys::NM_ENV_WHITELIST),
            name: keys::NM_ENV_WHITELIST,
            value: whitelist_raw,
        });
    }
    Ok(env_whitelist)
}

/// The cluster secret named by `spindle.cluster.secret-file`, loaded now so a missing or
/// loose file stops the NM at start (the same refusals as the RM's).
fn cluster_secret(
    conf: &Configuration,
) -> Result<Option<spindle_common::cluster_secret::ClusterSecret>, NmConfigError> {
    let name = keys::CLUSTER_SECRET_FILE;
    let Some(path) = conf.get_nonempty(name)? else {
        return Ok(None);
    };
    spindle_common::cluster_secret::ClusterSecret::load(Path::new(&path))
        .map(Some)
        .map_err(|e| NmConfigError::ClusterSecret {
            at: at(conf, name),
            name,
            problem: e.to_string(),
        })
}
