//! The RM's typed configuration, built from the raw Hadoop properties. Every rule has its
//! own error, which names the property and, through the raw layer, the file and line. The
//! capacity scheduler's part (`capacity-scheduler.xml`) is [`capacity`].

pub mod capacity;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use spindle_common::config::{keys, ConfigError, Configuration};
use spindle_common::Resource;

use crate::core::CoreConfig;
use capacity::{CapacityConfError, CsProps, SiteSettings};

// The keys the RM reads are spelled once, in `keys`; these names of the RM's own are kept
// (as aliases) so that existing `crate::config::X` paths still resolve.

/// How long a gang may wait when its AM names no timeout (Spindle's own key).
pub const GANG_TIMEOUT: &str = keys::SPINDLE_SCHEDULER_GANG_TIMEOUT_MS;
/// Where the SQLite state store lives (Spindle's own key: YARN's stores are ZK, FS or LevelDB).
pub const STATE_STORE_PATH: &str = keys::SPINDLE_RM_STATE_STORE_PATH;
/// Hadoop's static user-to-groups table, consulted before any lookup:
/// `user1=group1,group2;user2=;` (default `dr.who=;`, the web user has no groups).
pub const GROUP_STATIC_OVERRIDES: &str = keys::HADOOP_USER_GROUP_STATIC_MAPPING_OVERRIDES;
/// How long a user's groups are cached (Hadoop: 300 s).
pub const GROUPS_CACHE_SECS: &str = keys::HADOOP_SECURITY_GROUPS_CACHE_SECS;
/// How long a failed lookup (no such user) is cached (Hadoop: 30 s).
pub const GROUPS_NEGATIVE_CACHE_SECS: &str = keys::HADOOP_SECURITY_GROUPS_NEGATIVE_CACHE_SECS;
/// How long one `id -Gn` may run; Hadoop's 0 (no limit) is taken as 5 s, because a hung
/// lookup would hold a REST request forever.
pub const GROUPS_COMMAND_TIMEOUT: &str = keys::HADOOP_SECURITY_GROUPS_SHELL_COMMAND_TIMEOUT;

#[derive(Debug, thiserror::Error)]
pub enum RmConfigError {
    #[error(transparent)]
    Value(#[from] ConfigError),
    #[error("{place}property '{name}': {message}")]
    Rule {
        place: String,
        name: String,
        message: String,
    },
    /// `capacity-scheduler.xml` (or a yarn-site key it reads) broke a rule.
    #[error(transparent)]
    Capacity(#[from] CapacityConfError),
}

/// How the RM learns a caller's groups (Hadoop's `ShellBasedUnixGroupsMapping`: `id -Gn`).
#[derive(Debug, Clone, PartialEq)]
pub struct GroupsConfig {
    /// Users whose groups are fixed by configuration, never looked up.
    pub static_overrides: BTreeMap<String, Vec<String>>,
    pub cache_ttl: Duration,
    pub negative_cache_ttl: Duration,
    pub command_timeout: Duration,
}

impl Default for GroupsConfig {
    fn default() -> Self {
        Self {
            static_overrides: BTreeMap::from([("dr.who".to_string(), Vec::new())]),
            cache_ttl: Duration::from_secs(keys::DEFAULT_HADOOP_SECURITY_GROUPS_CACHE_SECS),
            negative_cache_ttl: Duration::from_secs(
                keys::DEFAULT_HADOOP_SECURITY_GROUPS_NEGATIVE_CACHE_SECS,
            ),
            command_timeout: Duration::from_secs(5),
        }
    }
}

#[derive(Debug, Clone)]
pub struct RmConfig {
    pub webapp_address: String,
    /// `yarn.resourcemanager.hostname` when it names a host: what AMs are told to dial when
    /// the RM listens on every interface (else this machine's name).
    pub rm_hostname: Option<String>,
    pub store_path: PathBuf,
    pub cluster_id: String,
    pub core: CoreConfig,
    /// The live capacity-scheduler property set the RM starts with (from the files; the
    /// driver replaces it with the state store's when mutations were stored).
    pub scheduler_props: CsProps,
    /// The yarn-site settings the capacity scheduler reads, fixed while the RM runs.
    pub scheduler_site: SiteSettings,
    /// Where `refreshQueues` re-reads `capacity-scheduler.xml`; `None` when the RM was
    /// configured in memory (tests), in which case a refresh re-applies `scheduler_props`.
    pub conf_dir: Option<PathBuf>,
    /// `-D name=value` overrides, re-applied on every refresh so they keep winning.
    pub overrides: Vec<(String, String)>,
    pub groups: GroupsConfig,
}

fn rule(conf: &Configuration, name: &str, message: String) -> RmConfigError {
    let place = conf
        .source(name)
        .map(|s| {
            if s.line > 0 {
                format!("{}:{}: ", s.file.display(), s.line)
            } else {
                format!("{}: ", s.file.display())
            }
        })
        .unwrap_or_default();
    RmConfigError::Rule {
        place,
        name: name.to_string(),
        message,
    }
}

impl RmConfig {
    pub fn from_conf(conf: &Configuration) -> Result<Self, RmConfigError> {
        let webapp_address =
            conf.get_string(keys::RM_WEBAPP_ADDRESS, keys::DEFAULT_RM_WEBAPP_ADDRESS)?;
        if webapp_address.parse::<std::net::SocketAddr>().is_err() && !webapp_address.contains(':')
        {
            return Err(rule(
                conf,
                keys::RM_WEBAPP_ADDRESS,
                format!("expected host:port, got '{webapp_address}'"),
            ));
        }
        // The spindle.* key, else its older spelling, else the documented default.
        let store_path = match conf.get_nonempty(keys::SPINDLE_RM_STATE_STORE_PATH)? {
            Some(p) => p,
            None => match conf.get_nonempty(keys::RM_STORE_PATH)? {
                Some(p) => p,
                None => conf.get_string(
                    keys::SPINDLE_RM_STATE_STORE_PATH,
                    keys::DEFAULT_SPINDLE_RM_STATE_STORE_PATH,
                )?,
            },
        };
        let positive = |name: &str, default: i64| -> Result<i64, RmConfigError> {
            let v = conf.get_i64(name, default)?;
            if v <= 0 {
                return Err(rule(
                    conf,
                    name,
                    format!("must be a positive integer, got {v}"),
                ));
            }
            Ok(v)
        };
        let min_mb = positive(
            keys::SCHEDULER_MIN_ALLOCATION_MB,
            keys::DEFAULT_SCHEDULER_MIN_ALLOCATION_MB,
        )?;
        let max_mb = positive(
            keys::SCHEDULER_MAX_ALLOCATION_MB,
            keys::DEFAULT_SCHEDULER_MAX_ALLOCATION_MB,
        )?;
        let min_vc = positive(
            keys::SCHEDULER_MIN_ALLOCATION_VCORES,
            keys::DEFAULT_SCHEDULER_MIN_ALLOCATION_VCORES,
        )?;
        let max_vc = positive(
            keys::SCHEDULER_MAX_ALLOCATION_VCORES,
            keys::DEFAULT_SCHEDULER_MAX_ALLOCATION_VCORES,
        )?;
        if min_mb > max_mb {
            return Err(rule(
                conf,
                keys::SCHEDULER_MIN_ALLOCATION_MB,
                format!("minimum allocation {min_mb} MB exceeds the maximum {max_mb} MB"),
            ));
        }
        if min_vc > max_vc {
            return Err(rule(
                conf,
                keys::SCHEDULER_MIN_ALLOCATION_VCORES,
                format!("minimum allocation {min_vc} vcores exceeds the maximum {max_vc}"),
            ));
        }
        let heartbeat = conf.get_duration_ms(
            keys::RM_NM_HEARTBEAT_INTERVAL_MS,
            keys::DEFAULT_RM_NM_HEARTBEAT_INTERVAL_MS,
        )?;
        if heartbeat == 0 {
            return Err(rule(
                conf,
                keys::RM_NM_HEARTBEAT_INTERVAL_MS,
                "must be positive".into(),
            ));
        }
        let expiry = conf.get_duration_ms(
            keys::NM_LIVENESS_EXPIRY_MS,
            keys::DEFAULT_NM_LIVENESS_EXPIRY_MS,
        )?;
        if expiry < heartbeat {
            return Err(rule(
                conf,
                keys::NM_LIVENESS_EXPIRY_MS,
                format!("{expiry} ms is shorter than the heartbeat interval {heartbeat} ms"),
            ));
        }
        let attempts = positive(keys::RM_AM_MAX_ATTEMPTS, keys::DEFAULT_RM_AM_MAX_ATTEMPTS)?;
        let max_completed = conf.get_i64(
            keys::RM_MAX_COMPLETED_APPLICATIONS,
            keys::DEFAULT_RM_MAX_COMPLETED_APPLICATIONS,
        )?;
        if max_completed < 0 {
            return Err(rule(
                conf,
                keys::RM_MAX_COMPLETED_APPLICATIONS,
                "must not be negative".into(),
            ));
        }
        let mut max_allocation = Resource::new(max_mb, max_vc);
        // Extended types from resource-types.xml bound asks by their maximum-allocation.
        for t in conf.get_strings(keys::RESOURCE_TYPES)? {
            let k = format!(
                "{}{t}.{}",
                keys::RESOURCE_TYPES_PREFIX,
                keys::RESOURCE_TYPE_MAXIMUM_ALLOCATION
            );
            let v = conf.get_i64(&k, i64::MAX)?;
            max_allocation.set(&t, v);
        }
        let scheduler_props = CsProps::from_conf(conf)?;
        let scheduler_site = SiteSettings::from_conf(conf, &max_allocation)?;
        let scheduler = capacity::parse_props(&scheduler_props, &scheduler_site)?;
        let gang_timeout_ms = conf.get_duration_ms(
            keys::SPINDLE_SCHEDULER_GANG_TIMEOUT_MS,
            keys::DEFAULT_SPINDLE_SCHEDULER_GANG_TIMEOUT_MS,
        )?;
        let core = CoreConfig {
            gang_timeout_ms,
            min_allocation: Resource::new(min_mb, min_vc),
            max_allocation,
            heartbeat_interval_ms: heartbeat,
            nm_expiry_ms: expiry,
            am_expiry_ms: conf.get_duration_ms(
                keys::AM_LIVENESS_EXPIRY_MS,
                keys::DEFAULT_AM_LIVENESS_EXPIRY_MS,
            )?,
            am_max_attempts: attempts.min(i64::from(u32::MAX)) as u32,
            container_alloc_expiry_ms: conf.get_duration_ms(
                keys::RM_CONTAINER_ALLOCATION_EXPIRY_MS,
                keys::DEFAULT_RM_CONTAINER_ALLOCATION_EXPIRY_MS,
            )?,
            max_completed_apps: max_completed as usize,
            rm_address: String::new(),
            scheduler,
        };
        Ok(Self {
            webapp_address,
            rm_hostname: conf
                .get_nonempty(keys::RM_HOSTNAME)?
                .filter(|h| !spindle_common::net::is_wildcard(h)),
            store_path: PathBuf::from(store_path),
            cluster_id: conf.get_string(keys::RM_CLUSTER_ID, keys::DEFAULT_RM_CLUSTER_ID)?,
            core,
            scheduler_props,
            scheduler_site,
            conf_dir: None,
            overrides: Vec::new(),
            groups: groups_config(conf)?,
        })
    }

    /// Loads `dir` (see [`Configuration::load_dir`]), applies the `-D` overrides, and
    /// remembers both so that `refreshQueues` can read `capacity-scheduler.xml` again.
    pub fn load(dir: &Path, overrides: &[(String, String)]) -> Result<Self, RmConfigError> {
        let conf = load_conf(dir, overrides)?;
        let mut c = Self::from_conf(&conf)?;
        c.conf_dir = Some(dir.to_path_buf());
        c.overrides = overrides.to_vec();
        Ok(c)
    }

    /// The capacity-scheduler properties as the files say now (`refreshQueues`). Reads the
    /// configuration directory: call it off the driver task.
    pub fn reload_scheduler_props(&self) -> Result<CsProps, RmConfigError> {
        match &self.conf_dir {
            Some(dir) => Ok(CsProps::from_conf(&load_conf(dir, &self.overrides)?)?),
            None => Ok(self.scheduler_props.clone()),
        }
    }
}

fn load_conf(dir: &Path, overrides: &[(String, String)]) -> Result<Configuration, RmConfigError> {
    let mut conf = Configuration::load_dir(dir)?;
    for (k, v) in overrides {
        conf.set(k, v);
    }
    Ok(conf)
}

fn groups_config(conf: &Configuration) -> Result<GroupsConfig, RmConfigError> {
    let mut g = GroupsConfig::default();
    let raw = conf.get_string(
        keys::HADOOP_USER_GROUP_STATIC_MAPPING_OVERRIDES,
        keys::DEFAULT_HADOOP_USER_GROUP_STATIC_MAPPING_OVERRIDES,
    )?;
    g.static_overrides.clear();
    for entry in raw.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((user, groups)) = entry.split_once('=') else {
            return Err(rule(
                conf,
                keys::HADOOP_USER_GROUP_STATIC_MAPPING_OVERRIDES,
                format!("entry '{entry}' is not user=group1,group2"),
            ));
        };
        let user = user.trim();
        if user.is_empty() {
            return Err(rule(
                conf,
                keys::HADOOP_USER_GROUP_STATIC_MAPPING_OVERRIDES,
                format!("entry '{entry}' names no user"),
            ));
        }
        g.static_overrides.insert(
            user.to_string(),
            spindle_common::config::value::split_list(groups),
        );
    }
    g.cache_ttl = Duration::from_secs(conf.get_u64(
        keys::HADOOP_SECURITY_GROUPS_CACHE_SECS,
        keys::DEFAULT_HADOOP_SECURITY_GROUPS_CACHE_SECS,
    )?);
    g.negative_cache_ttl = Duration::from_secs(conf.get_u64(
        keys::HADOOP_SECURITY_GROUPS_NEGATIVE_CACHE_SECS,
        keys::DEFAULT_HADOOP_SECURITY_GROUPS_NEGATIVE_CACHE_SECS,
    )?);
    let timeout = conf.get_duration_ms(
        keys::HADOOP_SECURITY_GROUPS_SHELL_COMMAND_TIMEOUT,
        keys::DEFAULT_HADOOP_SECURITY_GROUPS_SHELL_COMMAND_TIMEOUT,
    )?;
    g.command_timeout = if timeout == 0 {
        Duration::from_secs(5)
    } else {
        Duration::from_millis(timeout)
    };
    Ok(g)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn conf(xml: &str) -> Configuration {
        let mut c = Configuration::new();
        c.add_str(Path::new("capacity-scheduler.xml"), xml)
            .expect("xml");
        c
    }

    #[test]
    fn defaults_match_yarn() {
        let c = RmConfig::from_conf(&Configuration::new()).unwrap();
        assert_eq!(c.webapp_address, "0.0.0.0:8088");
        assert_eq!(c.rm_hostname, None);
        // ${hadoop.tmp.dir}/yarn/system/rmstore.sqlite, expanded.
        let store = c.store_path.display().to_string();
        assert!(
            store.ends_with("/yarn/system/rmstore.sqlite") && !store.contains('$'),
            "{store}"
        );
        let mut legacy = Configuration::new();
        legacy.set(keys::RM_STORE_PATH, "/var/lib/old.sqlite");
        legacy.set(keys::RM_HOSTNAME, "rm.example");
        let c2 = RmConfig::from_conf(&legacy).unwrap();
        assert_eq!(c2.store_path, PathBuf::from("/var/lib/old.sqlite"));
        assert_eq!(c2.rm_hostname.as_deref(), Some("rm.example"));
        legacy.set(STATE_STORE_PATH, "/var/lib/new.sqlite");
        assert_eq!(
            RmConfig::from_conf(&legacy).unwrap().store_path,
            PathBuf::from("/var/lib/new.sqlite")
        );
        assert_eq!(c.core.min_allocation, Resource::new(1024, 1));
        assert_eq!(c.core.max_allocation, Resource::new(8192, 4));
        assert_eq!(c.core.am_max_attempts, 2);
        assert_eq!(c.core.nm_expiry_ms, 600_000);
        assert!(c
            .core
            .scheduler
            .root
            .find("default")
            .is_some_and(|q| q.is_leaf()));
    }

    /// The defaults that moved to `keys` are the values the RM used before.
    #[test]
    fn defaults_spelled_in_keys_are_unchanged() {
        assert_eq!(
            keys::DEFAULT_SPINDLE_SCHEDULER_GANG_TIMEOUT_MS,
            crate::core::DEFAULT_GANG_TIMEOUT_MS
        );
        let c = RmConfig::from_conf(&Configuration::new()).unwrap();
        assert_eq!(c.core.gang_timeout_ms, crate::core::DEFAULT_GANG_TIMEOUT_MS);
        assert_eq!(c.cluster_id, "spindle");
        assert_eq!(c.groups, GroupsConfig::default());
        assert_eq!(c.groups.cache_ttl, Duration::from_secs(300));
        assert_eq!(c.groups.negative_cache_ttl, Duration::from_secs(30));
        let s = &c.core.scheduler;
        assert_eq!(s.max_applications, 10_000);
        assert_eq!(s.node_locality_delay, 40);
        assert_eq!(s.rack_locality_additional_delay, -1);
        assert!(!s.queue_mappings_override);
        assert_eq!(s.max_am_resource_percent, 0.1);
        let q = s.root.find("default").unwrap();
        assert_eq!(q.user_limit_factor, 1.0);
        assert_eq!(q.minimum_user_limit_percent, 100.0);
        assert_eq!((q.priority, q.default_application_priority), (0, 0));
    }

    #[test]
    fn queue_tree_and_capacity_sum() {
        let c = conf(
            r#"<configuration>
          <property><name>yarn.scheduler.capacity.root.queues</name><value>a,b</value></property>
          <property><name>yarn.scheduler.capacity.root.a.capacity</name><value>70</value></property>
          <property><name>yarn.scheduler.capacity.root.b.capacity</name><value>30</value></property>
        </configuration>"#,
        );
        let rm = RmConfig::from_conf(&c).unwrap();
        let q = &rm.core.scheduler.root;
        assert_eq!(q.children.len(), 2);
        assert_eq!(
            q.find("root.b").unwrap().capacity,
            crate::core::queue_conf::CapacitySpec::Percent(30.0)
        );
        assert_eq!(
            rm.scheduler_props
                .get("yarn.scheduler.capacity.root.a.capacity"),
            Some("70")
        );
        let mut bad = c.clone();
        bad.set("yarn.scheduler.capacity.root.b.capacity", "40");
        let e = RmConfig::from_conf(&bad).unwrap_err().to_string();
        assert!(
            e.starts_with(
                "capacity-scheduler.xml:2: Illegal capacity sum of 1.1 for children of queue root"
            ),
            "{e}"
        );
    }

    #[test]
    fn load_remembers_the_dir_and_overrides_for_refresh() {
        let dir = tempfile::tempdir().unwrap();
        let cs = dir.path().join("capacity-scheduler.xml");
        std::fs::write(
            &cs,
            "<configuration><property><name>yarn.scheduler.capacity.root.queues</name><value>a</value></property>\n\
             <property><name>yarn.scheduler.capacity.root.a.capacity</name><value>100</value></property></configuration>",
        )
        .unwrap();
        let overrides = vec![(
            "yarn.scheduler.capacity.root.a.user-limit-factor".to_string(),
            "3".to_string(),
        )];
        let rm = RmConfig::load(dir.path(), &overrides).unwrap();
        assert_eq!(rm.conf_dir.as_deref(), Some(dir.path()));
        std::fs::write(
            &cs,
            "<configuration><property><name>yarn.scheduler.capacity.root.queues</name><value>a,b</value></property></configuration>",
        )
        .unwrap();
        let props = rm.reload_scheduler_props().unwrap();
        assert_eq!(
            props.get("yarn.scheduler.capacity.root.queues"),
            Some("a,b")
        );
        assert_eq!(
            props.get("yarn.scheduler.capacity.root.a.user-limit-factor"),
            Some("3"),
            "-D overrides survive a refresh"
        );
        // In memory: a refresh re-applies what the RM started with.
        let mem = RmConfig::from_conf(&Configuration::new()).unwrap();
        assert_eq!(mem.reload_scheduler_props().unwrap(), mem.scheduler_props);
    }

    #[test]
    fn group_settings() {
        let mut c = Configuration::new();
        let g = RmConfig::from_conf(&c).unwrap().groups;
        assert_eq!(g.static_overrides.get("dr.who"), Some(&vec![]));
        assert_eq!(g.command_timeout, Duration::from_secs(5));
        c.set(GROUP_STATIC_OVERRIDES, "alice=devs,ops;bob=;");
        c.set(GROUPS_COMMAND_TIMEOUT, "2s");
        let g = RmConfig::from_conf(&c).unwrap().groups;
        assert_eq!(
            g.static_overrides.get("alice"),
            Some(&vec!["devs".to_string(), "ops".to_string()])
        );
        assert_eq!(g.static_overrides.get("bob"), Some(&vec![]));
        assert_eq!(g.command_timeout, Duration::from_secs(2));
        c.set(GROUP_STATIC_OVERRIDES, "alice");
        assert!(RmConfig::from_conf(&c).is_err());
    }
}
