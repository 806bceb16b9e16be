//! The NodeManager's typed configuration, built once from the raw Hadoop properties.
//!
//! Every rule has its own error variant, and every message names where the bad value came
//! from (`file:line`, `-D` for a command-line override, `<default>` when unset) in the one-line
//! `<where>: property '<name>': expected ..., got '...'` form the daemons print before they
//! exit with status 1. Nothing downstream re-reads raw properties.

use std::path::{Path, PathBuf};
use std::time::Duration;

use spindle_common::config::{keys, ConfigError, Configuration, DEFAULT_SOURCE};
use spindle_common::records::node::LaunchHold;
use spindle_common::resource::Resource;

use crate::health::{DiskCheckConfig, HealthConfig};
use crate::isolation::{DeviceIsolation, IsolationConfig};
use crate::runas::{Credentials, RunAs};

/// Whether a stopped NM leaves its containers running for the next NM to re-adopt
/// (YARN's key; not yet in `common::config::keys`).
pub const NM_RECOVERY_ENABLED: &str = "yarn.nodemanager.recovery.enabled";
pub const DEFAULT_NM_RECOVERY_ENABLED: bool = false;
/// NM environment variables a container inherits unless its launch context sets them.
pub const NM_ENV_WHITELIST: &str = "yarn.nodemanager.env-whitelist";
pub const DEFAULT_NM_ENV_WHITELIST: &str = "JAVA_HOME,PATH,LANG,TZ,TMPDIR,RUST_LOG,RUST_BACKTRACE";
/// How much of a failed container's stderr goes into its diagnostics.
pub const NM_STDERR_TAIL_BYTES: &str = "yarn.nodemanager.container.stderr.tail.bytes";
pub const DEFAULT_NM_STDERR_TAIL_BYTES: u64 = 4096;
pub const DEFAULT_NM_HOSTNAME: &str = "127.0.0.1";

// ---- Resource plugins (GPU, FPGA). YARN's names where YARN has one; `spindle.` otherwise.

/// Where the FPGA vendor's discovery tool (`aocl`) is; unset: `$ALTERAOCLSDKROOT/bin/aocl`,
/// else `aocl` on the NM's `PATH` (YARN's order).
pub const NM_FPGA_PATH_TO_DISCOVERY_EXECUTABLES: &str =
    "yarn.nodemanager.resource-plugins.fpga.path-to-discovery-executables";
/// The FPGA vendor plugin; YARN ships (and Spindle implements) only Intel's OpenCL one.
pub const NM_FPGA_VENDOR_PLUGIN_CLASS: &str =
    "yarn.nodemanager.resource-plugins.fpga.vendor-plugin.class";
pub const DEFAULT_NM_FPGA_VENDOR_PLUGIN_CLASS: &str =
    "org.apache.hadoop.yarn.server.nodemanager.containermanager.resourceplugin.fpga.IntelFpgaOpenclPlugin";
/// How long one run of a discovery executable (`nvidia-smi`, `aocl diagnose`) may take before
/// it is killed. YARN hard-codes 10 s; configurable so tests of a hanging tool stay short.
pub const NM_DEVICE_DISCOVERY_TIMEOUT_MS: &str =
    "spindle.nodemanager.resource-plugins.discovery-timeout-ms";
pub const DEFAULT_NM_DEVICE_DISCOVERY_TIMEOUT_MS: u64 = 10_000;
/// How often the GPU plugin re-reads utilization, memory and temperature (and notices GPUs
/// that vanished); 0 disables the refresh. YARN re-runs `nvidia-smi` on every REST read
/// instead; a background refresh keeps a hanging `nvidia-smi` away from REST callers.
pub const NM_GPU_REFRESH_INTERVAL_MS: &str =
    "spindle.nodemanager.resource-plugins.gpu.refresh-interval-ms";
pub const DEFAULT_NM_GPU_REFRESH_INTERVAL_MS: u64 = 30_000;
/// Major number of GPU device nodes (`/dev/nvidia<minor>`) when the node itself cannot be
/// stat'ed (YARN's container-executor `gpu.major-device-number`).
pub const NM_GPU_MAJOR_DEVICE_NUMBER: &str =
    "spindle.nodemanager.resource-plugins.gpu.major-device-number";
pub const DEFAULT_NM_GPU_MAJOR_DEVICE_NUMBER: u32 = 195;
/// Major number of FPGA device nodes when `/dev/<name>` cannot be stat'ed (YARN's
/// container-executor `fpga.major-device-number`).
pub const NM_FPGA_MAJOR_DEVICE_NUMBER: &str =
    "spindle.nodemanager.resource-plugins.fpga.major-device-number";
pub const DEFAULT_NM_FPGA_MAJOR_DEVICE_NUMBER: u32 = 246;

/// Why the configuration was refused. One variant per rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NmConfigError {
    /// The raw reader refused a file or a value (bad XML, not a number, ...).
    #[error(transparent)]
    Conf(#[from] ConfigError),
    #[error("{at}: property '{name}': expected host:port, got '{value}'")]
    BadAddress {
        at: String,
        name: &'static str,
        value: String,
    },
    #[error("{at}: property '{name}': expected a host name or IPv4 address, got '{value}'")]
    BadHostname {
        at: String,
        name: &'static str,
        value: String,
    },
    #[error("{at}: property '{name}': expected a memory size in MB greater than 0, got '{value}'")]
    MemoryNotPositive {
        at: String,
        name: &'static str,
        value: String,
    },
    #[error("{at}: property '{name}': expected a number of vcores greater than 0, got '{value}'")]
    VcoresNotPositive {
        at: String,
        name: &'static str,
        value: String,
    },
    #[error("{at}: property '{name}': expected at least one local directory, got '{value}'")]
    NoLocalDirs {
        at: String,
        name: &'static str,
        value: String,
    },
    #[error("{at}: property '{name}': expected at least one log directory, got '{value}'")]
    NoLogDirs {
        at: String,
        name: &'static str,
        value: String,
    },
    #[error("{at}: property '{name}': expected a duration from 1 ms to 10 min, got {value} ms")]
    BadLaunchHoldTimeout {
        at: String,
        name: &'static str,
        value: u64,
    },
    #[error("{at}: property '{name}': expected a directory path, got '{value}'")]
    BadRecoveryDir {
        at: String,
        name: &'static str,
        value: String,
    },
    #[error(
        "{at}: property '{name}': expected comma-separated environment variable names, got '{value}'"
    )]
    BadEnvWhitelist {
        at: String,
        name: &'static str,
        value: String,
    },
    #[error("{at}: property '{name}': expected resource plugins among yarn.io/gpu, yarn.io/fpga, got '{value}'")]
    UnknownResourcePlugin {
        at: String,
        name: &'static str,
        value: String,
    },
    #[error("{at}: property '{name}': expected 'auto' or index:minor pairs such as 0:0,1:1, got '{value}' ({reason})")]
    BadAllowedGpus {
        at: String,
        name: &'static str,
        value: String,
        reason: String,
    },
    #[error("{at}: property '{name}': expected 'auto' or minor numbers such as 0,1, got '{value}' ({reason})")]
    BadAllowedFpgas {
        at: String,
        name: &'static str,
        value: String,
        reason: String,
    },
    #[error("{at}: property '{name}': expected IntelFpgaOpenclPlugin (the only FPGA vendor plugin), got '{value}'")]
    UnknownFpgaVendorPlugin {
        at: String,
        name: &'static str,
        value: String,
    },
    #[error("{at}: property '{name}': expected a time in ms greater than 0, got '{value}'")]
    TimeoutNotPositive {
        at: String,
        name: &'static str,
        value: String,
    },
    #[error("{at}: property '{name}': expected a device major number (0 to 4095), got '{value}'")]
    BadMajorNumber {
        at: String,
        name: &'static str,
        value: String,
    },
    // ---- Container isolation
    #[error("{at}: property '{name}': expected DefaultContainerExecutor or LinuxContainerExecutor, got '{value}'")]
    UnknownContainerExecutor {
        at: String,
        name: &'static str,
        value: String,
    },
    #[error("{at}: property '{name}': expected {expected}, got '{value}'")]
    BadValue {
        at: String,
        name: &'static str,
        expected: String,
        value: String,
    },
    #[error("{at}: property '{name}': expected a local user to run containers as, got '{value}' ({reason})")]
    BadRunAsUser {
        at: String,
        name: &'static str,
        value: String,
        reason: String,
    },
    #[error("{at}: property '{name}': expected a cgroup path of names without '.', '..' or ',' (such as /spindle), got '{value}'")]
    BadCgroupHierarchy {
        at: String,
        name: &'static str,
        value: String,
    },
    #[error("{at}: property '{name}': expected auto, v1 or ebpf, got '{value}'")]
    UnknownDeviceIsolation {
        at: String,
        name: &'static str,
        value: String,
    },
    #[error("{at}: property '{name}': expected an interval in ms greater than 0, got '{value}'")]
    MonitorIntervalNotPositive {
        at: String,
        name: &'static str,
        value: String,
    },
}

/// Which GPUs the NM may hand out (`yarn.nodemanager.resource-plugins.gpu.allowed-gpu-devices`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedGpus {
    /// Every GPU discovery finds; index = position in the discovery output.
    Auto,
    /// Exactly these `(index, minor)` pairs, discovered or not (YARN's rule: an explicit list
    /// is authoritative, for machines where discovery does not work).
    List(Vec<(u32, u32)>),
}

/// Which FPGAs the NM may hand out (`...fpga.allowed-fpga-devices`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedFpgas {
    Auto,
    /// Discovered devices with these minor numbers only.
    Minors(Vec<u32>),
}

/// The GPU plugin's settings (`yarn.io/gpu` in `yarn.nodemanager.resource-plugins`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuPluginConfig {
    pub allowed: AllowedGpus,
    /// `path-to-discovery-executables` (file or directory). When set, `nvidia-smi` is used
    /// even where NVML is present: the operator chose the tool.
    pub discovery_executable: Option<PathBuf>,
    pub timeout: Duration,
    /// None: no background refresh.
    pub refresh_interval: Option<Duration>,
    pub major: u32,
}

/// The FPGA plugin's settings (`yarn.io/fpga` in `yarn.nodemanager.resource-plugins`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FpgaPluginConfig {
    pub allowed: AllowedFpgas,
    pub discovery_executable: Option<PathBuf>,
    pub timeout: Duration,
    pub major: u32,
}

/// The enabled resource plugins; both None when `yarn.nodemanager.resource-plugins` is empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourcePluginsConfig {
    pub gpu: Option<GpuPluginConfig>,
    pub fpga: Option<FpgaPluginConfig>,
}

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
    /// The NM's configuration directory, absolute; containers get it as `SPINDLE_CONF_DIR`.
    pub conf_dir: PathBuf,
    /// NM environment variables passed through to containers.
    pub env_whitelist: Vec<String>,
    /// Bytes of stderr quoted in a failed container's diagnostics.
    pub stderr_tail_bytes: u64,
    /// GPU/FPGA plugins (`yarn.nodemanager.resource-plugins` and their keys).
    pub plugins: ResourcePluginsConfig,
    /// cgroups and the memory watcher (see [`isolation_config`]).
    pub isolation: IsolationConfig,
    /// Who containers run as (see [`crate::runas`]).
    pub run_as: RunAs,
    /// The node's health script and disk checks (see [`crate::health`]).
    pub health: HealthConfig,
    /// How long an ended application's logs are kept (`yarn.nodemanager.log.retain-seconds`);
    /// None: forever (a negative value).
    pub log_retain: Option<Duration>,
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

        let recovery_enabled = conf.get_bool(NM_RECOVERY_ENABLED, DEFAULT_NM_RECOVERY_ENABLED)?;
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
        let rm_address = connectable(&rm_raw);

        let whitelist_raw = conf.get_string(NM_ENV_WHITELIST, DEFAULT_NM_ENV_WHITELIST)?;
        let env_whitelist: Vec<String> = whitelist_raw
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        if env_whitelist.iter().any(|v| !valid_env_name(v)) {
            return Err(NmConfigError::BadEnvWhitelist {
                at: at(conf, NM_ENV_WHITELIST),
                name: NM_ENV_WHITELIST,
                value: whitelist_raw,
            });
        }
        let stderr_tail_bytes = conf.get_u64(NM_STDERR_TAIL_BYTES, DEFAULT_NM_STDERR_TAIL_BYTES)?;
        let plugins = resource_plugins(conf)?;
        let isolation = isolation_config(conf)?;
        let run_as = run_as_config(conf)?;
        let health = health_config(conf)?;
        let retain = conf.get_i64(NM_LOG_RETAIN_SECONDS, 10_800)?;
        let log_retain = u64::try_from(retain).ok().map(Duration::from_secs);

        Ok(Self {
            webapp_address,
            hostname,
            resource: node_resource_types(conf, Resource::new(memory, vcores))?,
            local_dirs,
            log_dirs,
            sigkill_delay,
            launch_hold_timeout,
            recovery_enabled,
            recovery_dir,
            rm_address,
            conf_dir: absolute(conf_dir),
            env_whitelist,
            stderr_tail_bytes,
            plugins,
            isolation,
            run_as,
            health,
            log_retain,
        })
    }
}

// ---- Container isolation: cgroups, and the process-tree memory watcher without them.

/// YARN's executor choice: a class name ending in `DefaultContainerExecutor` turns cgroups
/// off, one ending in `LinuxContainerExecutor` asks for them; unset means "cgroups where the
/// node has them" (Spindle's default, unlike YARN's).
pub const NM_CONTAINER_EXECUTOR_CLASS: &str = "yarn.nodemanager.container-executor.class";
/// Spindle's switch: false keeps containers out of cgroups whatever the executor class.
pub const NM_CGROUPS_ENABLED: &str = "spindle.nodemanager.cgroups.enabled";
pub const NM_CGROUPS_STRICT_RESOURCE_USAGE: &str =
    "yarn.nodemanager.linux-container-executor.cgroups.strict-resource-usage";
/// `pids.max` of every container; 0 = no limit.
pub const NM_CONTAINER_PIDS_LIMIT: &str = "spindle.nodemanager.container.pids-limit";
/// `auto`, `v1` (devices.deny) or `ebpf` (a cgroup2 device program).
pub const NM_CGROUPS_DEVICE_ISOLATION: &str = "spindle.nodemanager.cgroups.device-isolation";

/// `limit-users` of YARN's non-secure LinuxContainerExecutor: one local user for all.
pub const NM_LCE_LIMIT_USERS: &str =
    "yarn.nodemanager.linux-container-executor.nonsecure-mode.limit-users";
/// The local user containers run as when users are limited (YARN's default `nobody`).
pub const NM_LCE_LOCAL_USER: &str =
    "yarn.nodemanager.linux-container-executor.nonsecure-mode.local-user";
/// The lowest uid a submitter's containers may run as (`container-executor.cfg`'s
/// `min.user.id`).
pub const NM_LCE_MIN_USER_ID: &str = "spindle.nodemanager.linux-container-executor.min-user-id";
/// Users whose containers may never run (`container-executor.cfg`'s `banned.users`).
pub const NM_LCE_BANNED_USERS: &str = "spindle.nodemanager.linux-container-executor.banned-users";

/// Seconds an ended application's container logs are kept (no log aggregation); negative:
/// forever.
pub const NM_LOG_RETAIN_SECONDS: &str = "yarn.nodemanager.log.retain-seconds";
pub const NM_HEALTH_CHECKER_TIMEOUT_MS: &str = "yarn.nodemanager.health-checker.timeout-ms";
pub const NM_HEALTH_CHECKER_SCRIPT_OPTS: &str = "yarn.nodemanager.health-checker.script.opts";
pub const NM_DISK_CHECKER_ENABLE: &str = "yarn.nodemanager.disk-health-checker.enable";
pub const NM_DISK_CHECKER_INTERVAL_MS: &str = "yarn.nodemanager.disk-health-checker.interval-ms";
pub const NM_DISK_CHECKER_MIN_HEALTHY: &str =
    "yarn.nodemanager.disk-health-checker.min-healthy-disks";
pub const NM_DISK_CHECKER_MAX_UTILIZATION: &str =
    "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage";
pub const NM_DISK_CHECKER_MIN_FREE_MB: &str =
    "yarn.nodemanager.disk-health-checker.min-free-space-per-disk-mb";

/// `node-resources.xml`'s prefix: `yarn.nodemanager.resource-type.<type>` = how much of an
/// extended resource type (declared in the RM's `resource-types.xml`) this NM offers.
pub const NM_RESOURCE_TYPE_PREFIX: &str = "yarn.nodemanager.resource-type.";

/// Adds the extended types `node-resources.xml` offers to `base` (memory and vcores). A type
/// a resource plugin manages (`yarn.io/gpu`, `yarn.io/fpga`) is then set by the plugin to
/// what it discovered, as in YARN.
fn node_resource_types(conf: &Configuration, base: Resource) -> Result<Resource, NmConfigError> {
    let mut r = base;
    let names: Vec<String> = conf
        .names_with_prefix(NM_RESOURCE_TYPE_PREFIX)
        .map(String::from)
        .collect();
    for name in names {
        let ty = &name[NM_RESOURCE_TYPE_PREFIX.len()..];
        let bad = |expected: &str, value: String| NmConfigError::BadValue {
            at: at(conf, &name),
            name: NM_RESOURCE_TYPE_PREFIX,
            expected: format!("{expected} (in {name})"),
            value,
        };
        let valid_type = !ty.is_empty()
            && ty
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-/".contains(c));
        if !valid_type || ty == "memory-mb" || ty == "vcores" {
            return Err(bad(
                "an extended resource type name (memory and vcores are yarn.nodemanager.resource.*)",
                ty.to_string(),
            ));
        }
        let v = conf.get_i64(&name, 0)?;
        if v < 0 {
            return Err(bad("an amount of 0 or more", v.to_string()));
        }
        r.set(ty, v);
    }
    Ok(r)
}

/// The health script and disk checker (YARN's names and defaults).
fn health_config(conf: &Configuration) -> Result<HealthConfig, NmConfigError> {
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
    let timeout_key = if conf.get_nonempty(NM_HEALTH_CHECKER_TIMEOUT_MS)?.is_some() {
        NM_HEALTH_CHECKER_TIMEOUT_MS
    } else {
        keys::NM_HEALTH_CHECKER_SCRIPT_TIMEOUT_MS
    };
    let fraction = conf.get_f64(NM_DISK_CHECKER_MIN_HEALTHY, d.disks.min_healthy_fraction)?;
    if !(0.0..=1.0).contains(&fraction) {
        return Err(bad(
            NM_DISK_CHECKER_MIN_HEALTHY,
            "a fraction from 0.0 to 1.0",
            fraction.to_string(),
        ));
    }
    let percent = conf.get_f64(
        NM_DISK_CHECKER_MAX_UTILIZATION,
        d.disks.max_utilization_percent,
    )?;
    if !(0.0..=100.0).contains(&percent) {
        return Err(bad(
            NM_DISK_CHECKER_MAX_UTILIZATION,
            "a percentage from 0.0 to 100.0",
            percent.to_string(),
        ));
    }
    Ok(HealthConfig {
        script,
        script_opts: conf
            .get_string(NM_HEALTH_CHECKER_SCRIPT_OPTS, "")?
            .split_whitespace()
            .map(String::from)
            .collect(),
        script_interval: positive_ms(keys::NM_HEALTH_CHECKER_INTERVAL_MS, d.script_interval)?,
        script_timeout: positive_ms(timeout_key, d.script_timeout)?,
        disks: DiskCheckConfig {
            enabled: conf.get_bool(NM_DISK_CHECKER_ENABLE, d.disks.enabled)?,
            interval: positive_ms(NM_DISK_CHECKER_INTERVAL_MS, d.disks.interval)?,
            min_healthy_fraction: fraction,
            max_utilization_percent: percent,
            min_free_mb: conf.get_u64(NM_DISK_CHECKER_MIN_FREE_MB, d.disks.min_free_mb)?,
        },
    })
}

/// Who containers run as: only an explicit LinuxContainerExecutor changes user.
fn run_as_config(conf: &Configuration) -> Result<RunAs, NmConfigError> {
    let lce = conf
        .get_nonempty(NM_CONTAINER_EXECUTOR_CLASS)?
        .is_some_and(|c| c.ends_with("LinuxContainerExecutor"));
    if !lce {
        return Ok(RunAs::NmUser);
    }
    if conf.get_bool(NM_LCE_LIMIT_USERS, true)? {
        let name = conf.get_string(NM_LCE_LOCAL_USER, "nobody")?;
        let creds = Credentials::lookup(&name).map_err(|reason| NmConfigError::BadRunAsUser {
            at: at(conf, NM_LCE_LOCAL_USER),
            name: NM_LCE_LOCAL_USER,
            value: name.clone(),
            reason,
        })?;
        return Ok(RunAs::LocalUser(creds));
    }
    let min_uid = conf.get_u64(NM_LCE_MIN_USER_ID, 1000)?;
    let banned = conf
        .get_string(NM_LCE_BANNED_USERS, "yarn,hdfs,mapred,bin")?
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
fn isolation_config(conf: &Configuration) -> Result<IsolationConfig, NmConfigError> {
    let d = IsolationConfig::default();
    let class_allows = match conf.get_nonempty(NM_CONTAINER_EXECUTOR_CLASS)? {
        None => true,
        Some(c) if c.ends_with("LinuxContainerExecutor") => true,
        Some(c) if c.ends_with("DefaultContainerExecutor") => false,
        Some(c) => {
            return Err(NmConfigError::UnknownContainerExecutor {
                at: at(conf, NM_CONTAINER_EXECUTOR_CLASS),
                name: NM_CONTAINER_EXECUTOR_CLASS,
                value: c,
            })
        }
    };
    let cgroups_enabled = class_allows && conf.get_bool(NM_CGROUPS_ENABLED, true)?;
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
    let device_raw = conf.get_string(NM_CGROUPS_DEVICE_ISOLATION, "auto")?;
    let device_isolation = DeviceIsolation::parse(&device_raw).ok_or_else(|| {
        NmConfigError::UnknownDeviceIsolation {
            at: at(conf, NM_CGROUPS_DEVICE_ISOLATION),
            name: NM_CGROUPS_DEVICE_ISOLATION,
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
        strict_cpu: conf.get_bool(NM_CGROUPS_STRICT_RESOURCE_USAGE, d.strict_cpu)?,
        pids_limit: conf.get_u64(NM_CONTAINER_PIDS_LIMIT, d.pids_limit)?,
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

/// Reads `yarn.nodemanager.resource-plugins` and the keys of each plugin it enables.
fn resource_plugins(conf: &Configuration) -> Result<ResourcePluginsConfig, NmConfigError> {
    let raw = conf.get_string(keys::NM_RESOURCE_PLUGINS, keys::DEFAULT_NM_RESOURCE_PLUGINS)?;
    let mut out = ResourcePluginsConfig::default();
    let names: Vec<&str> = raw
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if names.is_empty() {
        return Ok(out);
    }
    let timeout_ms = conf.get_duration_ms(
        NM_DEVICE_DISCOVERY_TIMEOUT_MS,
        DEFAULT_NM_DEVICE_DISCOVERY_TIMEOUT_MS,
    )?;
    if timeout_ms == 0 {
        return Err(NmConfigError::TimeoutNotPositive {
            at: at(conf, NM_DEVICE_DISCOVERY_TIMEOUT_MS),
            name: NM_DEVICE_DISCOVERY_TIMEOUT_MS,
            value: timeout_ms.to_string(),
        });
    }
    let timeout = Duration::from_millis(timeout_ms);
    for n in names {
        match n {
            spindle_common::resource::GPU => {
                let allowed_raw = conf.get_string(
                    keys::NM_GPU_ALLOWED_DEVICES,
                    keys::DEFAULT_NM_GPU_ALLOWED_DEVICES,
                )?;
                let allowed = parse_allowed_gpus(&allowed_raw).map_err(|reason| {
                    NmConfigError::BadAllowedGpus {
                        at: at(conf, keys::NM_GPU_ALLOWED_DEVICES),
                        name: keys::NM_GPU_ALLOWED_DEVICES,
                        value: allowed_raw.clone(),
                        reason,
                    }
                })?;
                let refresh = conf.get_duration_ms(
                    NM_GPU_REFRESH_INTERVAL_MS,
                    DEFAULT_NM_GPU_REFRESH_INTERVAL_MS,
                )?;
                out.gpu = Some(GpuPluginConfig {
                    allowed,
                    discovery_executable: conf
                        .get_nonempty(keys::NM_GPU_PATH_TO_DISCOVERY_EXECUTABLES)?
                        .map(|p| absolute(Path::new(&p))),
                    timeout,
                    refresh_interval: (refresh > 0).then(|| Duration::from_millis(refresh)),
                    major: major_number(
                        conf,
                        NM_GPU_MAJOR_DEVICE_NUMBER,
                        DEFAULT_NM_GPU_MAJOR_DEVICE_NUMBER,
                    )?,
                });
            }
            spindle_common::resource::FPGA => {
                let allowed_raw = conf.get_string(
                    keys::NM_FPGA_ALLOWED_DEVICES,
                    keys::DEFAULT_NM_FPGA_ALLOWED_DEVICES,
                )?;
                let allowed = parse_allowed_fpgas(&allowed_raw).map_err(|reason| {
                    NmConfigError::BadAllowedFpgas {
                        at: at(conf, keys::NM_FPGA_ALLOWED_DEVICES),
                        name: keys::NM_FPGA_ALLOWED_DEVICES,
                        value: allowed_raw.clone(),
                        reason,
                    }
                })?;
                let class = conf.get_string(
                    NM_FPGA_VENDOR_PLUGIN_CLASS,
                    DEFAULT_NM_FPGA_VENDOR_PLUGIN_CLASS,
                )?;
                let short = class.rsplit('.').next().unwrap_or_default().trim();
                if short != "IntelFpgaOpenclPlugin" {
                    return Err(NmConfigError::UnknownFpgaVendorPlugin {
                        at: at(conf, NM_FPGA_VENDOR_PLUGIN_CLASS),
                        name: NM_FPGA_VENDOR_PLUGIN_CLASS,
                        value: class,
                    });
                }
                out.fpga = Some(FpgaPluginConfig {
                    allowed,
                    discovery_executable: conf
                        .get_nonempty(NM_FPGA_PATH_TO_DISCOVERY_EXECUTABLES)?
                        .map(|p| absolute(Path::new(&p))),
                    timeout,
                    major: major_number(
                        conf,
                        NM_FPGA_MAJOR_DEVICE_NUMBER,
                        DEFAULT_NM_FPGA_MAJOR_DEVICE_NUMBER,
                    )?,
                });
            }
            _ => {
                return Err(NmConfigError::UnknownResourcePlugin {
                    at: at(conf, keys::NM_RESOURCE_PLUGINS),
                    name: keys::NM_RESOURCE_PLUGINS,
                    value: raw.clone(),
                })
            }
        }
    }
    Ok(out)
}

fn major_number(
    conf: &Configuration,
    name: &'static str,
    default: u32,
) -> Result<u32, NmConfigError> {
    let v = conf.get_u64(name, u64::from(default))?;
    // Linux majors are 12 bits.
    match u32::try_from(v) {
        Ok(m) if m < 4096 => Ok(m),
        _ => Err(NmConfigError::BadMajorNumber {
            at: at(conf, name),
            name,
            value: v.to_string(),
        }),
    }
}

/// `auto`, or `index:minor[,index:minor]`: every pair two unsigned integers, no index and no
/// minor twice. The error is the reason, for [`NmConfigError::BadAllowedGpus`].
pub fn parse_allowed_gpus(raw: &str) -> Result<AllowedGpus, String> {
    let t = raw.trim();
    if t.eq_ignore_ascii_case("auto") {
        return Ok(AllowedGpus::Auto);
    }
    if t.is_empty() {
        return Err("empty".into());
    }
    let mut pairs: Vec<(u32, u32)> = Vec::new();
    for item in t.split(',').map(str::trim) {
        let parsed = item.split_once(':').and_then(|(i, m)| {
            Some((i.trim().parse::<u32>().ok()?, m.trim().parse::<u32>().ok()?))
        });
        let Some((index, minor)) = parsed else {
            return Err(format!("'{item}' is not index:minor"));
        };
        if pairs.iter().any(|(i, _)| *i == index) {
            return Err(format!("index {index} is listed twice"));
        }
        if pairs.iter().any(|(_, m)| *m == minor) {
            return Err(format!("minor number {minor} is listed twice"));
        }
        pairs.push((index, minor));
    }
    Ok(AllowedGpus::List(pairs))
}

/// `auto`, or a comma list of distinct minor numbers.
pub fn parse_allowed_fpgas(raw: &str) -> Result<AllowedFpgas, String> {
    let t = raw.trim();
    if t.eq_ignore_ascii_case("auto") {
        return Ok(AllowedFpgas::Auto);
    }
    if t.is_empty() {
        return Err("empty".into());
    }
    let mut minors = Vec::new();
    for item in t.split(',').map(str::trim) {
        let Ok(m) = item.parse::<u32>() else {
            return Err(format!("'{item}' is not a minor number"));
        };
        if minors.contains(&m) {
            return Err(format!("minor number {m} is listed twice"));
        }
        minors.push(m);
    }
    Ok(AllowedFpgas::Minors(minors))
}

use spindle_common::net::is_wildcard;

/// Replaces a wildcard listen host with the loopback address, so the text can be dialled.
pub fn connectable(addr: &str) -> String {
    match addr.rsplit_once(':') {
        Some((host, port)) if is_wildcard(host) => format!("127.0.0.1:{port}"),
        _ => addr.to_string(),
    }
}

/// `file:line`, `-D` for a command-line override, `<default>` when the property is unset.
fn at(conf: &Configuration, name: &str) -> String {
    conf.source(name)
        .map(ToString::to_string)
        .unwrap_or_else(|| DEFAULT_SOURCE.to_string())
}

/// A comma list of directories, made absolute (`file://` prefixes allowed, as in YARN).
fn dirs(raw: &str) -> Vec<PathBuf> {
    raw.split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| absolute(Path::new(d.strip_prefix("file://").unwrap_or(d))))
        .collect()
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

fn check_address(
    conf: &Configuration,
    name: &'static str,
    value: &str,
    allow_port_zero: bool,
) -> Result<(), NmConfigError> {
    let ok = match value.rsplit_once(':') {
        Some((host, port)) => {
            let port_ok = port
                .parse::<u16>()
                .map(|p| allow_port_zero || p > 0)
                .unwrap_or(false);
            port_ok && (is_wildcard(host) || valid_hostname(host))
        }
        None => false,
    };
    if ok {
        Ok(())
    } else {
        Err(NmConfigError::BadAddress {
            at: at(conf, name),
            name,
            value: value.to_string(),
        })
    }
}

/// The characters `NodeId` accepts, so that the NodeId built from it always parses.
fn valid_hostname(h: &str) -> bool {
    !h.is_empty()
        && h.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

fn valid_env_name(v: &str) -> bool {
    let mut chars = v.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(pairs: &[(&str, &str)]) -> Configuration {
        let mut c = Configuration::new();
        for (k, v) in pairs {
            c.set(k, v);
        }
        c
    }

    #[test]
    fn defaults_are_yarns() {
        let c = NmConfig::from_configuration(&Configuration::new(), Path::new("conf")).unwrap();
        assert_eq!(c.webapp_address, "0.0.0.0:8042");
        // Bound to every interface: the machine's name (if it resolves), never the wildcard.
        let expected = spindle_common::net::local_hostname().unwrap_or_else(|| "127.0.0.1".into());
        assert_eq!(c.hostname, expected);
        assert!(
            c.local_dirs[0].ends_with("nm-local-dir"),
            "{:?}",
            c.local_dirs
        );
        assert!(c.recovery_dir.ends_with("yarn-nm-recovery"));
        assert_eq!(c.resource, Resource::new(8192, 8));
        assert_eq!(c.sigkill_delay, Duration::from_millis(250));
        assert!(!c.recovery_enabled);
        assert_eq!(c.rm_address, "127.0.0.1:8088");
        assert!(c.conf_dir.is_absolute());
        assert_eq!(c.local_dirs.len(), 1);
        assert!(c.local_dirs[0].is_absolute());
        assert!(c.env_whitelist.contains(&"PATH".to_string()));
    }

    #[test]
    fn parses_lists_and_addresses() {
        let c = NmConfig::from_configuration(
            &conf(&[
                (keys::NM_LOCAL_DIRS, "/a, /b ,"),
                (keys::NM_LOG_DIRS, "file:///l"),
                (keys::RM_WEBAPP_ADDRESS, "rm.example.com:9000"),
                (keys::NM_WEBAPP_ADDRESS, "127.0.0.1:0"),
                (NM_RECOVERY_ENABLED, "true"),
                (keys::NM_RECOVERY_DIR, "/r"),
            ]),
            Path::new("/etc/spindle"),
        )
        .unwrap();
        assert_eq!(c.local_dirs, vec![PathBuf::from("/a"), PathBuf::from("/b")]);
        assert_eq!(c.log_dirs, vec![PathBuf::from("/l")]);
        assert_eq!(c.rm_address, "rm.example.com:9000");
        assert!(c.recovery_enabled);
        assert_eq!(c.recovery_dir, PathBuf::from("/r"));
    }

    #[test]
    fn each_rule_has_its_error() {
        let cases: Vec<(&str, &str, &str)> = vec![
            (
                keys::NM_RESOURCE_MEMORY_MB,
                "0",
                "expected a memory size in MB greater than 0",
            ),
            (keys::NM_RESOURCE_CPU_VCORES, "-1", "vcores greater than 0"),
            (keys::NM_LOCAL_DIRS, " , ", "at least one local directory"),
            (keys::NM_LOG_DIRS, "", "at least one log directory"),
            (keys::NM_WEBAPP_ADDRESS, "nohostport", "expected host:port"),
            (keys::RM_WEBAPP_ADDRESS, "h:0", "expected host:port"),
            (keys::NM_HOSTNAME, "a b", "host name"),
            (keys::SPINDLE_NM_RM_ADDRESS, "nope", "expected host:port"),
            (keys::NM_RESOURCE_MEMORY_MB, "8g", "expected an integer"),
            (keys::NM_RECOVERY_DIR, "", "directory path"),
            (NM_ENV_WHITELIST, "PATH,1X", "environment variable names"),
        ];
        for (k, v, want) in cases {
            let e = NmConfig::from_configuration(&conf(&[(k, v)]), Path::new("c")).unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains(want), "{k}={v}: {msg}");
            assert!(msg.contains(&format!("property '{k}'")), "{msg}");
            assert!(msg.starts_with("-D: "), "{msg}");
        }
    }

    #[test]
    fn node_host_and_rm_address_follow_the_overrides() {
        let c = NmConfig::from_configuration(
            &conf(&[
                (keys::NM_WEBAPP_ADDRESS, "10.1.2.3:0"),
                (keys::SPINDLE_NM_RM_ADDRESS, "rm:1"),
                (keys::RM_WEBAPP_ADDRESS, "other:2"),
            ]),
            Path::new("c"),
        )
        .unwrap();
        assert_eq!(c.hostname, "10.1.2.3");
        assert_eq!(c.rm_address, "rm:1");
        let c = NmConfig::from_configuration(
            &conf(&[(keys::NM_HOSTNAME, "node7.example.com")]),
            Path::new("c"),
        )
        .unwrap();
        assert_eq!(c.hostname, "node7.example.com");
        assert_eq!(c.webapp_address, "node7.example.com:8042");
        let e = NmConfig::from_configuration(&conf(&[(keys::NM_LOCAL_DIRS, ",")]), Path::new("c"))
            .unwrap_err();
        assert!(matches!(e, NmConfigError::NoLocalDirs { .. }), "{e}");
    }

    #[test]
    fn resource_plugins_are_read_with_yarns_names() {
        let c = NmConfig::from_configuration(&Configuration::new(), Path::new("c")).unwrap();
        assert_eq!(c.plugins, ResourcePluginsConfig::default());
        let c = NmConfig::from_configuration(
            &conf(&[
                (keys::NM_RESOURCE_PLUGINS, "yarn.io/gpu, yarn.io/fpga"),
                (keys::NM_GPU_ALLOWED_DEVICES, "0:0,1:1,2:2,3:4"),
                (
                    keys::NM_GPU_PATH_TO_DISCOVERY_EXECUTABLES,
                    "/opt/nvidia/bin",
                ),
                (NM_DEVICE_DISCOVERY_TIMEOUT_MS, "500"),
                (NM_GPU_REFRESH_INTERVAL_MS, "0"),
                (keys::NM_FPGA_ALLOWED_DEVICES, "0,2"),
                (NM_FPGA_VENDOR_PLUGIN_CLASS, "IntelFpgaOpenclPlugin"),
            ]),
            Path::new("c"),
        )
        .unwrap();
        let gpu = c.plugins.gpu.unwrap();
        assert_eq!(
            gpu.allowed,
            AllowedGpus::List(vec![(0, 0), (1, 1), (2, 2), (3, 4)])
        );
        assert_eq!(
            gpu.discovery_executable,
            Some(PathBuf::from("/opt/nvidia/bin"))
        );
        assert_eq!(gpu.timeout, Duration::from_millis(500));
        assert_eq!(gpu.refresh_interval, None);
        assert_eq!(gpu.major, 195);
        let fpga = c.plugins.fpga.unwrap();
        assert_eq!(fpga.allowed, AllowedFpgas::Minors(vec![0, 2]));
        assert_eq!(fpga.major, 246);
        assert_eq!(fpga.discovery_executable, None);
    }

    #[test]
    fn allowed_devices_refuse_duplicates_and_garbage() {
        assert_eq!(parse_allowed_gpus(" AUTO "), Ok(AllowedGpus::Auto));
        for (bad, why) in [
            ("0:0,0:1", "index 0 is listed twice"),
            ("0:0,1:0", "minor number 0 is listed twice"),
            ("0:0,x", "'x' is not index:minor"),
            ("0-0", "'0-0' is not index:minor"),
            ("0:-1", "not index:minor"),
            ("", "empty"),
            ("0:0,,1:1", "'' is not index:minor"),
        ] {
            let e = parse_allowed_gpus(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        assert_eq!(parse_allowed_fpgas("auto"), Ok(AllowedFpgas::Auto));
        assert!(parse_allowed_fpgas("1,1").unwrap_err().contains("twice"));
        assert!(parse_allowed_fpgas("a").unwrap_err().contains("'a'"));
        let cases: Vec<(&str, &str, &str)> = vec![
            (
                keys::NM_RESOURCE_PLUGINS,
                "yarn.io/tpu",
                "yarn.io/gpu, yarn.io/fpga",
            ),
            (keys::NM_GPU_ALLOWED_DEVICES, "0:1,1:1", "listed twice"),
            (keys::NM_FPGA_ALLOWED_DEVICES, "x", "minor numbers"),
            (
                NM_FPGA_VENDOR_PLUGIN_CLASS,
                "com.acme.Fpga",
                "IntelFpgaOpenclPlugin",
            ),
            (NM_DEVICE_DISCOVERY_TIMEOUT_MS, "0", "greater than 0"),
            (NM_GPU_MAJOR_DEVICE_NUMBER, "5000", "major number"),
        ];
        for (k, v, want) in cases {
            let mut pairs = vec![(keys::NM_RESOURCE_PLUGINS, "yarn.io/gpu,yarn.io/fpga")];
            pairs.push((k, v));
            let e = NmConfig::from_configuration(&conf(&pairs), Path::new("c")).unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains(want), "{k}={v}: {msg}");
            assert!(msg.contains(&format!("property '{k}'")), "{msg}");
        }
    }

    #[test]
    fn launch_hold_timeout_is_one_ms_to_ten_minutes() {
        let key = keys::SPINDLE_NM_LAUNCH_HOLD_TIMEOUT_MS;
        let c = NmConfig::from_configuration(&Configuration::new(), Path::new("c")).unwrap();
        assert_eq!(c.launch_hold_timeout, Duration::from_secs(60));
        for (v, want) in [
            ("1", Duration::from_millis(1)),
            ("90s", Duration::from_secs(90)),
            ("10m", Duration::from_secs(600)),
            ("600000", Duration::from_secs(600)),
        ] {
            let c = NmConfig::from_configuration(&conf(&[(key, v)]), Path::new("c")).unwrap();
            assert_eq!(c.launch_hold_timeout, want, "{v}");
        }
        for (v, want) in [
            ("0", "from 1 ms to 10 min, got 0 ms"),
            ("600001", "from 1 ms to 10 min, got 600001 ms"),
            ("11m", "from 1 ms to 10 min, got 660000 ms"),
            ("soon", "expected a duration"),
        ] {
            let e = NmConfig::from_configuration(&conf(&[(key, v)]), Path::new("c")).unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains(want), "{v}: {msg}");
            assert!(msg.contains(&format!("property '{key}'")), "{msg}");
            assert!(msg.starts_with("-D: "), "{msg}");
            assert!(!msg.contains('\n'), "one line: {msg}");
        }
    }

    #[test]
    fn only_an_explicit_linux_container_executor_changes_the_container_user() {
        let from = |kv: &[(&str, &str)]| NmConfig::from_configuration(&conf(kv), Path::new("c"));
        let lce = (
            NM_CONTAINER_EXECUTOR_CLASS,
            "org.apache.hadoop.yarn.server.nodemanager.LinuxContainerExecutor",
        );
        assert_eq!(from(&[]).unwrap().run_as, RunAs::NmUser);
        let dce = (
            NM_CONTAINER_EXECUTOR_CLASS,
            "org.apache.hadoop.yarn.server.nodemanager.DefaultContainerExecutor",
        );
        assert_eq!(from(&[dce]).unwrap().run_as, RunAs::NmUser);
        match from(&[lce]).unwrap().run_as {
            RunAs::LocalUser(c) => assert_eq!(c.user, "nobody"),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            from(&[lce, (NM_LCE_LIMIT_USERS, "false")]).unwrap().run_as,
            RunAs::Submitter {
                min_uid: 1000,
                banned: ["bin", "hdfs", "mapred", "yarn"]
                    .into_iter()
                    .map(String::from)
                    .collect(),
            }
        );
        assert_eq!(
            from(&[
                lce,
                (NM_LCE_LIMIT_USERS, "false"),
                (NM_LCE_MIN_USER_ID, "500"),
                (NM_LCE_BANNED_USERS, " a, b ,"),
            ])
            .unwrap()
            .run_as,
            RunAs::Submitter {
                min_uid: 500,
                banned: ["a", "b"].into_iter().map(String::from).collect(),
            }
        );
        let msg = from(&[lce, (NM_LCE_LOCAL_USER, "no-such-user-spindle")])
            .unwrap_err()
            .to_string();
        assert!(msg.starts_with("-D: "), "{msg}");
        assert!(
            msg.contains(NM_LCE_LOCAL_USER) && msg.contains("no local user"),
            "{msg}"
        );
        assert!(!msg.contains('\n'), "{msg}");
    }

    #[test]
    fn node_resources_offer_extended_types() {
        let from = |kv: &[(&str, &str)]| NmConfig::from_configuration(&conf(kv), Path::new("c"));
        let c = from(&[
            ("yarn.nodemanager.resource-type.example.com/licenses", "2"),
            ("yarn.nodemanager.resource-type.yarn.io/gpu", "0"),
        ])
        .unwrap();
        assert_eq!(c.resource.get("example.com/licenses"), 2);
        assert_eq!(c.resource.get("yarn.io/gpu"), 0);
        assert_eq!(c.resource.memory_mb, keys::DEFAULT_NM_RESOURCE_MEMORY_MB);
        for (k, v, want) in [
            (
                "yarn.nodemanager.resource-type.example.com/licenses",
                "-1",
                "0 or more",
            ),
            (
                "yarn.nodemanager.resource-type.memory-mb",
                "5",
                "extended resource type",
            ),
            (
                "yarn.nodemanager.resource-type.bad name",
                "1",
                "extended resource type",
            ),
        ] {
            let msg = from(&[(k, v)]).unwrap_err().to_string();
            assert!(msg.contains(want) && msg.contains(k), "{k}={v}: {msg}");
            assert!(!msg.contains('\n'), "{msg}");
        }
    }

    #[test]
    fn health_checks_follow_yarns_keys() {
        let from = |kv: &[(&str, &str)]| NmConfig::from_configuration(&conf(kv), Path::new("c"));
        let c = from(&[]).unwrap();
        assert_eq!(c.health, HealthConfig::default());
        assert!(c.health.script.is_none() && c.health.disks.enabled);
        assert_eq!(c.health.disks.max_utilization_percent, 90.0);
        let c = from(&[
            (keys::NM_HEALTH_CHECKER_SCRIPT_PATH, "/bin/true"),
            (NM_HEALTH_CHECKER_SCRIPT_OPTS, "-a  -b"),
            (keys::NM_HEALTH_CHECKER_INTERVAL_MS, "5000"),
            (keys::NM_HEALTH_CHECKER_SCRIPT_TIMEOUT_MS, "7000"),
            (NM_DISK_CHECKER_MIN_HEALTHY, "0.5"),
            (NM_DISK_CHECKER_MIN_FREE_MB, "1024"),
            (NM_DISK_CHECKER_ENABLE, "false"),
        ])
        .unwrap();
        assert_eq!(c.health.script.as_deref(), Some(Path::new("/bin/true")));
        assert_eq!(c.health.script_opts, ["-a", "-b"]);
        assert_eq!(c.health.script_interval, Duration::from_secs(5));
        assert_eq!(c.health.script_timeout, Duration::from_secs(7));
        assert_eq!(c.health.disks.min_healthy_fraction, 0.5);
        assert_eq!(c.health.disks.min_free_mb, 1024);
        assert!(!c.health.disks.enabled);
        // YARN 3's name for the timeout wins over the old one.
        let c = from(&[
            (keys::NM_HEALTH_CHECKER_SCRIPT_TIMEOUT_MS, "7000"),
            (NM_HEALTH_CHECKER_TIMEOUT_MS, "9000"),
        ])
        .unwrap();
        assert_eq!(c.health.script_timeout, Duration::from_secs(9));
        for (k, v, want) in [
            (
                keys::NM_HEALTH_CHECKER_SCRIPT_PATH,
                "/nonexistent/x",
                "an executable file",
            ),
            (NM_DISK_CHECKER_MIN_HEALTHY, "1.5", "a fraction"),
            (NM_DISK_CHECKER_MAX_UTILIZATION, "101", "a percentage"),
            (keys::NM_HEALTH_CHECKER_INTERVAL_MS, "0", "greater than 0"),
        ] {
            let msg = from(&[(k, v)]).unwrap_err().to_string();
            assert!(msg.contains(want) && msg.contains(k), "{k}={v}: {msg}");
            assert!(msg.starts_with("-D: ") && !msg.contains('\n'), "{msg}");
        }
    }

    #[test]
    fn wildcard_hosts_become_loopback() {
        assert_eq!(connectable("0.0.0.0:1"), "127.0.0.1:1");
        assert_eq!(connectable(":1"), "127.0.0.1:1");
        assert_eq!(connectable("h:1"), "h:1");
    }

    #[test]
    fn isolation_keys() {
        let c = NmConfig::from_configuration(&Configuration::new(), Path::new("c")).unwrap();
        assert_eq!(c.isolation, IsolationConfig::default());
        assert!(c.isolation.cgroups_enabled && c.isolation.pmem_check);
        assert_eq!(c.isolation.hierarchy, "/spindle");
        assert_eq!(c.isolation.pids_limit, 4096);
        assert_eq!(c.isolation.monitor_interval, Duration::from_millis(3000));
        let c = NmConfig::from_configuration(
            &conf(&[
                (keys::NM_CGROUPS_HIERARCHY, "spindle-tests/a"),
                (NM_CGROUPS_STRICT_RESOURCE_USAGE, "true"),
                (NM_CONTAINER_PIDS_LIMIT, "0"),
                (keys::NM_CONTAINER_MONITOR_INTERVAL_MS, "250"),
                (keys::NM_PMEM_CHECK_ENABLED, "false"),
                (NM_CGROUPS_DEVICE_ISOLATION, "eBPF"),
                (keys::NM_CGROUPS_MOUNT_PATH, "/sys/fs/cgroup"),
                (
                    NM_CONTAINER_EXECUTOR_CLASS,
                    "org.apache.hadoop.yarn.server.nodemanager.LinuxContainerExecutor",
                ),
            ]),
            Path::new("c"),
        )
        .unwrap();
        let i = &c.isolation;
        assert!(i.cgroups_enabled && i.strict_cpu && !i.pmem_check);
        assert_eq!(i.hierarchy, "spindle-tests/a");
        assert_eq!(i.pids_limit, 0);
        assert_eq!(i.monitor_interval, Duration::from_millis(250));
        assert_eq!(i.device_isolation, DeviceIsolation::Ebpf);
        assert_eq!(i.mount_path, Some(PathBuf::from("/sys/fs/cgroup")));
        for off in [
            (
                NM_CONTAINER_EXECUTOR_CLASS,
                "org.apache.hadoop.yarn.server.nodemanager.DefaultContainerExecutor",
            ),
            (NM_CGROUPS_ENABLED, "false"),
        ] {
            let c = NmConfig::from_configuration(&conf(&[off]), Path::new("c")).unwrap();
            assert!(!c.isolation.cgroups_enabled, "{off:?}");
        }
        let cases: Vec<(&str, &str, &str)> = vec![
            (
                NM_CONTAINER_EXECUTOR_CLASS,
                "Docker",
                "LinuxContainerExecutor",
            ),
            (keys::NM_CGROUPS_HIERARCHY, "/a/../b", "cgroup path"),
            (keys::NM_CGROUPS_HIERARCHY, "/", "cgroup path"),
            (keys::NM_CGROUPS_HIERARCHY, "a,b", "cgroup path"),
            (NM_CGROUPS_DEVICE_ISOLATION, "v3", "auto, v1 or ebpf"),
            (
                keys::NM_CONTAINER_MONITOR_INTERVAL_MS,
                "0",
                "greater than 0",
            ),
            (NM_CONTAINER_PIDS_LIMIT, "-1", "expected"),
        ];
        for (k, v, want) in cases {
            let e = NmConfig::from_configuration(&conf(&[(k, v)]), Path::new("c")).unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains(want), "{k}={v}: {msg}");
            assert!(msg.contains(&format!("property '{k}'")), "{msg}");
        }
    }
}
