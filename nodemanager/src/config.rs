//! The NodeManager's typed configuration, built once from the raw Hadoop properties.
//!
//! Every rule has its own error variant, and every message names where the bad value came
//! from (`file:line`, `-D` for a command-line override, `<default>` when unset) in the one-line
//! `<where>: property '<name>': expected ..., got '...'` form the daemons print before they
//! exit with status 1. Nothing downstream re-reads raw properties.

use std::path::{Path, PathBuf};
use std::time::Duration;

use spindle_common::config::{keys, ConfigError, Configuration, DEFAULT_SOURCE};
use spindle_common::resource::Resource;

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
}

impl NmConfig {
    /// Builds and validates the NM configuration. `conf_dir` is where `conf` was loaded from.
    ///
    /// The NodeId host is `yarn.nodemanager.hostname` when it names a host; when it is unset
    /// or the wildcard `0.0.0.0` (its YARN default, which also makes the NM listen on every
    /// interface), the host of the webapp address if that is not a wildcard, else 127.0.0.1,
    /// so that the NodeId is always an address the RM and AMs can dial.
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
            _ => DEFAULT_NM_HOSTNAME.to_string(),
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

        Ok(Self {
            webapp_address,
            hostname,
            resource: Resource::new(memory, vcores),
            local_dirs,
            log_dirs,
            sigkill_delay,
            recovery_enabled,
            recovery_dir,
            rm_address,
            conf_dir: absolute(conf_dir),
            env_whitelist,
            stderr_tail_bytes,
        })
    }
}

fn is_wildcard(host: &str) -> bool {
    matches!(host, "" | "0.0.0.0" | "[::]" | "::")
}

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
        assert_eq!(c.hostname, "127.0.0.1");
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
    fn wildcard_hosts_become_loopback() {
        assert_eq!(connectable("0.0.0.0:1"), "127.0.0.1:1");
        assert_eq!(connectable(":1"), "127.0.0.1:1");
        assert_eq!(connectable("h:1"), "h:1");
    }
}
