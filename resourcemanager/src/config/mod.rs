//! The RM's typed configuration, built from the raw Hadoop properties. Every rule has its
//! own error ([`RmConfigError`], one variant per refusal), which names the property and,
//! through the raw layer, the file and line. The capacity scheduler's part
//! (`capacity-scheduler.xml`) is [`capacity`].

pub mod auth;
pub mod blobs;
pub mod capacity;
pub mod ha;
pub mod hosts;
pub mod stray;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use spindle_common::config::known::UnknownKey;
use spindle_common::config::{keys, ConfigError, Configuration};
use spindle_common::Resource;

use crate::core::{CoreConfig, PreemptionConf};
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

/// Why the RM's configuration was refused: one variant per rule. Each message reads
/// `[<file>:<line>: ]property '<name>': <what is wrong>` (the text tests and docs match on),
/// and each variant carries the property's [`Place`], its name and the values involved, so
/// callers can tell refusals apart without reading the text.
#[derive(Debug, thiserror::Error)]
pub enum RmConfigError {
    /// The raw reader refused a file or a value (bad XML, not a number, a `${...}` cycle).
    #[error(transparent)]
    Value(#[from] ConfigError),
    /// REST authentication (`hadoop.http.authentication.*`): an unknown type, or token mode
    /// without a usable key file.
    #[error(transparent)]
    Auth(#[from] auth::AuthConfigError),
    /// The HTTP serve loop's limits or TLS settings (`spindle.http.*`, `yarn.http.policy`).
    #[error(transparent)]
    Http(#[from] spindle_rest_edge::serve::HttpConfigError),
    /// `refreshQueues`: capacity-scheduler properties whose names are near misses of known
    /// ones (`root.prod.maximum-capacty`), each with its file, line and the closest known
    /// key. Nothing is applied.
    #[error("{}", near_misses_text(.0))]
    NearMissKeys(Vec<UnknownKey>),
    /// `refreshQueues`: per-queue properties of queues no `.queues` list declares
    /// (`root.prdo.capacity`), each with its file, line and the closest declared queue.
    /// Nothing is applied.
    #[error("{}", stray_keys_text(.0))]
    QueueNotInTree(Vec<stray::StrayQueueKey>),
    /// `yarn.node-labels.configuration-type` is neither `centralized` nor `distributed`.
    #[error("{place}property '{name}': expected centralized or distributed, got '{value}'")]
    BadLabelConfigurationType {
        place: Place,
        name: &'static str,
        value: String,
    },
    /// `yarn.resourcemanager.webapp.address` is not `host:port`.
    #[error("{place}property '{name}': expected host:port, got '{value}'")]
    BadWebappAddress {
        place: Place,
        name: &'static str,
        value: String,
    },
    /// An allocation bound (`yarn.scheduler.{minimum,maximum}-allocation-{mb,vcores}`) or
    /// `yarn.resourcemanager.am.max-attempts` is 0 or negative. `written` is the value as the
    /// file has it (`-0x10`), which the message quotes.
    #[error("{place}property '{name}': must be a positive integer, got {written}")]
    NotPositive {
        place: Place,
        name: &'static str,
        value: i64,
        written: String,
    },
    /// `yarn.scheduler.minimum-allocation-mb` above `yarn.scheduler.maximum-allocation-mb`.
    #[error("{place}property '{name}': minimum allocation {min} MB exceeds the maximum {max} MB")]
    MinAllocationMbAboveMax {
        place: Place,
        name: &'static str,
        min: i64,
        max: i64,
    },
    /// `yarn.scheduler.minimum-allocation-vcores` above the maximum.
    #[error("{place}property '{name}': minimum allocation {min} vcores exceeds the maximum {max}")]
    MinAllocationVcoresAboveMax {
        place: Place,
        name: &'static str,
        min: i64,
        max: i64,
    },
    /// The NM heartbeat interval is 0.
    #[error("{place}property '{name}': must be positive")]
    HeartbeatIntervalZero { place: Place, name: &'static str },
    /// NMs would expire before they could heartbeat once.
    #[error(
        "{place}property '{name}': {expiry_ms} ms is shorter than the heartbeat interval {heartbeat_ms} ms"
    )]
    NmExpiryBelowHeartbeat {
        place: Place,
        name: &'static str,
        expiry_ms: u64,
        heartbeat_ms: u64,
    },
    /// A preemption fraction (`total_preemption_per_round`, `max_ignored_over_capacity`,
    /// `natural_termination_factor`) outside its range.
    #[error("{place}property '{name}': must be a fraction between {min} and {max}, got {written}")]
    PreemptionFraction {
        place: Place,
        name: &'static str,
        value: f64,
        written: String,
        min: f64,
        max: f64,
    },
    /// `intra-queue-preemption.fairshare.usage-factor` below 1 or not a finite number.
    #[error("{place}property '{name}': must be a number at least 1 (a multiple of a user's usage over share), got {written}")]
    PreemptionUsageFactor {
        place: Place,
        name: &'static str,
        written: String,
    },
    /// `yarn.resourcemanager.monitor.capacity.preemption.monitoring_interval` is 0.
    #[error("{place}property '{name}': the monitoring interval must be positive")]
    PreemptionIntervalZero { place: Place, name: &'static str },
    /// `spindle.elastic.monitoring-interval-ms` is 0.
    #[error("{place}property '{name}': the elastic policy's interval must be positive")]
    ElasticIntervalZero { place: Place, name: &'static str },
    /// A CPU policy property is not a policy word, or a number out of range.
    #[error("{place}property '{name}': {source}")]
    CpuPolicy {
        place: Place,
        name: String,
        source: crate::core::CpuPolicyError,
    },
    /// `spindle.scheduler.cpu-policy.interval-ms` is 0 or `auto-factor` below 1.
    #[error("{place}property '{name}': must be positive (at least 1 for the factor), got {value}")]
    CpuPolicyNumber {
        place: Place,
        name: &'static str,
        value: f64,
    },
    /// `yarn.resourcemanager.max-completed-applications` is negative.
    #[error("{place}property '{name}': must not be negative, got {written}")]
    MaxCompletedAppsNegative {
        place: Place,
        name: &'static str,
        value: i64,
        written: String,
    },
    /// A static group mapping entry without `=`.
    #[error("{place}property '{name}': entry '{entry}' is not user=group1,group2")]
    GroupMappingNotUserEqGroups {
        place: Place,
        name: &'static str,
        entry: String,
    },
    /// A static group mapping entry with nothing before `=`.
    #[error("{place}property '{name}': entry '{entry}' names no user")]
    GroupMappingWithoutUser {
        place: Place,
        name: &'static str,
        entry: String,
    },
    /// RM high availability (`yarn.resourcemanager.ha.*`, `spindle.ha.etcd.*`).
    #[error(transparent)]
    Ha(Box<ha::HaConfigError>),
    /// `capacity-scheduler.xml` (or a yarn-site key it reads) broke a rule.
    #[error(transparent)]
    Capacity(#[from] CapacityConfError),
    /// The container-token master key would roll before NMs could all hold the next key
    /// (YARN's rule: more than 3 x the NM expiry interval).
    #[error("{place}property '{name}': {interval_secs} s must be more than 3 x {expiry_name} ({expiry_ms} ms), so every live NM holds a new key before it is used")]
    KeyRollingTooFast {
        place: Place,
        name: &'static str,
        interval_secs: i64,
        expiry_name: &'static str,
        expiry_ms: u64,
    },
    /// `spindle.cluster.secret-file` names a file that cannot be the cluster secret.
    #[error("{place}property '{name}': {source}")]
    ClusterSecret {
        place: Place,
        name: &'static str,
        #[source]
        source: spindle_common::cluster_secret::ClusterSecretError,
    },
}

/// Where a refused property came from: `file:line` (`file` alone for a value from no file,
/// such as `-D`), or nowhere when the property is unset and its default was refused. Shown
/// as the message's `file:line: ` prefix, or as nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Place(Option<String>);

impl Place {
    /// Where `conf` got property `name` from.
    pub fn of(conf: &Configuration, name: &str) -> Self {
        Place(conf.source(name).map(ToString::to_string))
    }

    /// `file:line` or `file`; `None` when the property is unset.
    pub fn as_str(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(p) => write!(f, "{p}: "),
            None => Ok(()),
        }
    }
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
    /// Keys of the configuration Spindle does not know (typos, most likely), each with the
    /// closest known key; logged when the RM starts ([`warn_unknown_keys`]).
    pub unknown_keys: Vec<UnknownKey>,
    pub groups: GroupsConfig,
    /// The include and exclude host files and the graceful decommission timeout.
    pub hosts: hosts::HostsConfig,
    /// How REST callers are authenticated (`hadoop.http.authentication.type`).
    pub auth: auth::AuthConfig,
    /// The HTTP serve loop: connection limits and deadlines (`spindle.http.*`).
    pub http: spindle_rest_edge::serve::HttpServerConfig,
    /// The cluster secret (`spindle.cluster.secret-file`) node-tracker calls must be signed
    /// with; `None`: unset, any caller may register a node (compatibility mode).
    pub cluster_secret: Option<spindle_common::cluster_secret::ClusterSecret>,
    /// `yarn.resourcemanager.container-tokens.master-key-rolling-interval-secs`, in ms.
    pub container_key_rolling_ms: u64,
    /// Where shipped files live and their limits (`spindle.resourcemanager.blob-store.*`).
    pub blobs: blobs::BlobStoreConfig,
    /// High availability (`yarn.resourcemanager.ha.enabled`); None: one RM on SQLite.
    pub ha: Option<ha::HaConfig>,
}

impl RmConfig {
    pub fn from_conf(conf: &Configuration) -> Result<Self, RmConfigError> {
        let ha = ha::HaConfig::from_conf(conf)?;
        // Under HA this RM listens where `webapp.address.<its id>` says, as in YARN.
        let webapp_address = match &ha {
            Some(h) => h.own_webapp().to_string(),
            None => webapp_address(conf)?,
        };
        let store_path = store_path(conf)?;
        let (min_allocation, mut max_allocation) = allocation_bounds(conf)?;
        let (heartbeat, expiry, container_key_rolling_ms) = liveness(conf)?;
        let positive = |name, default| positive(conf, name, default);
        let attempts = positive(keys::RM_AM_MAX_ATTEMPTS, keys::DEFAULT_RM_AM_MAX_ATTEMPTS)?;
        let max_completed = conf.get_i64(
            keys::RM_MAX_COMPLETED_APPLICATIONS,
            keys::DEFAULT_RM_MAX_COMPLETED_APPLICATIONS,
        )?;
        if max_completed < 0 {
            return Err(RmConfigError::MaxCompletedAppsNegative {
                place: Place::of(conf, keys::RM_MAX_COMPLETED_APPLICATIONS),
                name: keys::RM_MAX_COMPLETED_APPLICATIONS,
                value: max_completed,
                written: written(conf, keys::RM_MAX_COMPLETED_APPLICATIONS),
            });
        }
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
        let preemption = preemption_conf(conf)?;
        let core = CoreConfig {
            gang_timeout_ms,
            min_allocation,
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
            preemption,
            elastic: elastic_conf(conf)?,
            cpu: cpu_conf(conf)?,
            distributed_labels: node_labels_distributed(conf)?,
        };
        Ok(Self {
            webapp_address,
            rm_hostname: conf
                .get_nonempty(keys::RM_HOSTNAME)?
                .filter(|h| !spindle_common::net::is_wildcard(h)),
            blobs: blobs::BlobStoreConfig::from_conf(conf, Path::new(&store_path))?,
            store_path: PathBuf::from(store_path),
            cluster_id: conf.get_string(keys::RM_CLUSTER_ID, keys::DEFAULT_RM_CLUSTER_ID)?,
            core,
            scheduler_props,
            scheduler_site,
            conf_dir: None,
            overrides: Vec::new(),
            unknown_keys: conf.unknown_keys(),
            groups: groups_config(conf)?,
            hosts: hosts::HostsConfig::from_conf(conf)?,
            auth: auth::AuthConfig::from_conf(conf)?,
            http: spindle_rest_edge::serve::HttpServerConfig::from_conf(conf)?,
            cluster_secret: cluster_secret(conf)?,
            container_key_rolling_ms,
            ha,
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
    /// configuration directory: call it off the driver task. A capacity-scheduler key that
    /// is a near miss of a known one refuses the whole reload
    /// ([`RmConfigError::NearMissKeys`]), as does a property of a queue outside the tree
    /// ([`RmConfigError::QueueNotInTree`]); the other unknown keys are logged, as at start,
    /// and returned for the caller to tell whoever asked.
    pub fn reload_scheduler_props(&self) -> Result<Reloaded, RmConfigError> {
        match &self.conf_dir {
            Some(dir) => {
                let conf = load_conf(dir, &self.overrides)?;
                let (near, warnings) = split_near_misses(conf.unknown_keys());
                if !near.is_empty() {
                    return Err(RmConfigError::NearMissKeys(near));
                }
                let stray = stray::stray_queue_keys(&conf);
                if !stray.is_empty() {
                    return Err(RmConfigError::QueueNotInTree(stray));
                }
                warn_unknown_keys(&warnings);
                Ok(Reloaded {
                    props: CsProps::from_conf(&conf)?,
                    warnings,
                })
            }
            None => Ok(Reloaded {
                props: self.scheduler_props.clone(),
                warnings: Vec::new(),
            }),
        }
    }
}

/// What `refreshQueues` read: the properties, and the unknown keys that are not near misses
/// (warnings for whoever asked).
#[derive(Debug, Clone)]
pub struct Reloaded {
    pub props: CsProps,
    pub warnings: Vec<UnknownKey>,
}

/// The unknown keys a reload refuses (capacity-scheduler keys with a close known key: a
/// typo of a queue property or a global one), and the rest.
pub fn split_near_misses(unknown: Vec<UnknownKey>) -> (Vec<UnknownKey>, Vec<UnknownKey>) {
    unknown.into_iter().partition(|k| {
        k.suggestion.is_some() && k.name.starts_with(keys::CAPACITY_SCHEDULER_PREFIX)
    })
}

fn near_misses_text(keys: &[UnknownKey]) -> String {
    nothing_applied(keys)
}

fn stray_keys_text(keys: &[stray::StrayQueueKey]) -> String {
    nothing_applied(keys)
}

/// `nothing applied: ` and each refused key's own words, `; ` between them.
fn nothing_applied<T: std::fmt::Display>(keys: &[T]) -> String {
    let each: Vec<String> = keys.iter().map(ToString::to_string).collect();
    format!("nothing applied: {}", each.join("; "))
}

/// Logs each unknown key as a warning naming the file, the line, the key and the closest
/// known key (`conf/yarn-site.xml:12: unknown key 'yarn.schedular.maximum-allocation-mb';
/// did you mean 'yarn.scheduler.maximum-allocation-mb'?`). Unknown keys are not refused:
/// Hadoop ignores them too, and a file shared with other tools may carry its own.
pub fn warn_unknown_keys(unknown: &[UnknownKey]) {
    for k in unknown {
        tracing::warn!("{k}");
    }
}

/// The cluster secret named by `spindle.cluster.secret-file`, loaded (and checked) now, so
/// a missing or loose file stops the RM at start.
fn cluster_secret(
    conf: &Configuration,
) -> Result<Option<spindle_common::cluster_secret::ClusterSecret>, RmConfigError> {
    let name = keys::CLUSTER_SECRET_FILE;
    let Some(path) = conf.get_nonempty(name)? else {
        return Ok(None);
    };
    spindle_common::cluster_secret::ClusterSecret::load(Path::new(&path))
        .map(Some)
        .map_err(|source| RmConfigError::ClusterSecret {
            place: Place::of(conf, name),
            name,
            source,
        })
}

/// A refused value as the user wrote it (trimmed, `${...}` expanded), for the message: `-0x10`
/// or `1.50`, not the number it was parsed to.
fn written(conf: &Configuration, name: &str) -> String {
    conf.get(name)
        .ok()
        .flatten()
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
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
    let name = keys::HADOOP_USER_GROUP_STATIC_MAPPING_OVERRIDES;
    g.static_overrides.clear();
    for entry in raw.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((user, groups)) = entry.split_once('=') else {
            return Err(RmConfigError::GroupMappingNotUserEqGroups {
                place: Place::of(conf, name),
                name,
                entry: entry.to_string(),
            });
        };
        let user = user.trim();
        if user.is_empty() {
            return Err(RmConfigError::GroupMappingWithoutUser {
                place: Place::of(conf, name),
                name,
                entry: entry.to_string(),
            });
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

/// `yarn.resourcemanager.webapp.address`: a socket address, or at least `host:port`.
fn webapp_address(conf: &Configuration) -> Result<String, RmConfigError> {
    let webapp_address =
        conf.get_string(keys::RM_WEBAPP_ADDRESS, keys::DEFAULT_RM_WEBAPP_ADDRESS)?;
    if webapp_address.parse::<std::net::SocketAddr>().is_err() && !webapp_address.contains(':') {
        return Err(RmConfigError::BadWebappAddress {
            place: Place::of(conf, keys::RM_WEBAPP_ADDRESS),
            name: keys::RM_WEBAPP_ADDRESS,
            value: webapp_address,
        });
    }
    Ok(webapp_address)
}

/// The state store's path: the spindle.* key, else its older spelling, else the documented
/// default.
fn store_path(conf: &Configuration) -> Result<String, RmConfigError> {
    Ok(
        match conf.get_nonempty(keys::SPINDLE_RM_STATE_STORE_PATH)? {
            Some(p) => p,
            None => match conf.get_nonempty(keys::RM_STORE_PATH)? {
                Some(p) => p,
                None => conf.get_string(
                    keys::SPINDLE_RM_STATE_STORE_PATH,
                    keys::DEFAULT_SPINDLE_RM_STATE_STORE_PATH,
                )?,
            },
        },
    )
}

/// `name` as a positive integer (`default` when unset).
fn positive(conf: &Configuration, name: &'static str, default: i64) -> Result<i64, RmConfigError> {
    let v = conf.get_i64(name, default)?;
    if v <= 0 {
        return Err(RmConfigError::NotPositive {
            place: Place::of(conf, name),
            name,
            value: v,
            written: written(conf, name),
        });
    }
    Ok(v)
}

/// The scheduler's minimum and maximum allocation (memory and vcores), each positive and
/// the minimum at most the maximum.
fn allocation_bounds(conf: &Configuration) -> Result<(Resource, Resource), RmConfigError> {
    let positive = |name, default| positive(conf, name, default);
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
        return Err(RmConfigError::MinAllocationMbAboveMax {
            place: Place::of(conf, keys::SCHEDULER_MIN_ALLOCATION_MB),
            name: keys::SCHEDULER_MIN_ALLOCATION_MB,
            min: min_mb,
            max: max_mb,
        });
    }
    if min_vc > max_vc {
        return Err(RmConfigError::MinAllocationVcoresAboveMax {
            place: Place::of(conf, keys::SCHEDULER_MIN_ALLOCATION_VCORES),
            name: keys::SCHEDULER_MIN_ALLOCATION_VCORES,
            min: min_vc,
            max: max_vc,
        });
    }
    Ok((Resource::new(min_mb, min_vc), Resource::new(max_mb, max_vc)))
}

/// The NM heartbeat interval and liveness expiry (ms), and the container-token key's
/// rolling interval (ms), which must leave room for two activation delays.
fn liveness(conf: &Configuration) -> Result<(u64, u64, u64), RmConfigError> {
    let heartbeat = conf.get_duration_ms(
        keys::RM_NM_HEARTBEAT_INTERVAL_MS,
        keys::DEFAULT_RM_NM_HEARTBEAT_INTERVAL_MS,
    )?;
    if heartbeat == 0 {
        return Err(RmConfigError::HeartbeatIntervalZero {
            place: Place::of(conf, keys::RM_NM_HEARTBEAT_INTERVAL_MS),
            name: keys::RM_NM_HEARTBEAT_INTERVAL_MS,
        });
    }
    let expiry = conf.get_duration_ms(
        keys::NM_LIVENESS_EXPIRY_MS,
        keys::DEFAULT_NM_LIVENESS_EXPIRY_MS,
    )?;
    if expiry < heartbeat {
        return Err(RmConfigError::NmExpiryBelowHeartbeat {
            place: Place::of(conf, keys::NM_LIVENESS_EXPIRY_MS),
            name: keys::NM_LIVENESS_EXPIRY_MS,
            expiry_ms: expiry,
            heartbeat_ms: heartbeat,
        });
    }
    let rolling_secs = positive(
        conf,
        keys::RM_CONTAINER_TOKEN_MASTER_KEY_ROLLING_INTERVAL_SECS,
        keys::DEFAULT_RM_CONTAINER_TOKEN_MASTER_KEY_ROLLING_INTERVAL_SECS,
    )?;
    let container_key_rolling_ms = (rolling_secs as u64).saturating_mul(1000);
    if container_key_rolling_ms <= 2 * crate::core::activation_delay_ms(expiry) {
        return Err(RmConfigError::KeyRollingTooFast {
            place: Place::of(
                conf,
                keys::RM_CONTAINER_TOKEN_MASTER_KEY_ROLLING_INTERVAL_SECS,
            ),
            name: keys::RM_CONTAINER_TOKEN_MASTER_KEY_ROLLING_INTERVAL_SECS,
            interval_secs: rolling_secs,
            expiry_name: keys::NM_LIVENESS_EXPIRY_MS,
            expiry_ms: expiry,
        });
    }
    Ok((heartbeat, expiry, container_key_rolling_ms))
}

#[cfg(test)]
mod tests;

/// Elastic gangs' resizing settings.
/// `yarn.node-labels.configuration-type`: true for `distributed`.
fn node_labels_distributed(conf: &Configuration) -> Result<bool, RmConfigError> {
    let v = conf.get_string(
        keys::NODE_LABELS_CONFIGURATION_TYPE,
        keys::DEFAULT_NODE_LABELS_CONFIGURATION_TYPE,
    )?;
    match v.trim() {
        "centralized" => Ok(false),
        "distributed" => Ok(true),
        other => Err(RmConfigError::BadLabelConfigurationType {
            place: Place::of(conf, keys::NODE_LABELS_CONFIGURATION_TYPE),
            name: keys::NODE_LABELS_CONFIGURATION_TYPE,
            value: other.to_string(),
        }),
    }
}

/// The CPU policy of GPU containers (`spindle.scheduler.cpu-policy*`).
fn cpu_conf(conf: &Configuration) -> Result<crate::core::CpuConf, RmConfigError> {
    use crate::core::CpuPolicy;
    let cpus_per_gpu = conf.get_u32(
        keys::CPU_POLICY_CPUS_PER_GPU,
        keys::DEFAULT_CPU_POLICY_CPUS_PER_GPU,
    )?;
    let policy = |name: &str, word: &str| {
        CpuPolicy::parse(word, cpus_per_gpu).map_err(|source| RmConfigError::CpuPolicy {
            place: Place::of(conf, name),
            name: name.to_string(),
            source,
        })
    };
    let word = conf.get_string(keys::CPU_POLICY, keys::DEFAULT_CPU_POLICY)?;
    let mut out = crate::core::CpuConf {
        policy: policy(keys::CPU_POLICY, &word)?,
        interval_ms: conf.get_duration_ms(
            keys::CPU_POLICY_INTERVAL_MS,
            keys::DEFAULT_CPU_POLICY_INTERVAL_MS,
        )?,
        resize_interval_ms: conf.get_duration_ms(
            keys::CPU_POLICY_RESIZE_INTERVAL_MS,
            keys::DEFAULT_CPU_POLICY_RESIZE_INTERVAL_MS,
        )?,
        explore_ms: conf.get_duration_ms(
            keys::CPU_POLICY_EXPLORE_MS,
            keys::DEFAULT_CPU_POLICY_EXPLORE_MS,
        )?,
        auto_factor: conf.get_f64(
            keys::CPU_POLICY_AUTO_FACTOR,
            keys::DEFAULT_CPU_POLICY_AUTO_FACTOR,
        )?,
        ..Default::default()
    };
    let bad = |name: &'static str, value: f64| RmConfigError::CpuPolicyNumber {
        place: Place::of(conf, name),
        name,
        value,
    };
    if out.interval_ms == 0 {
        return Err(bad(keys::CPU_POLICY_INTERVAL_MS, 0.0));
    }
    if !(out.auto_factor.is_finite() && out.auto_factor >= 1.0) {
        return Err(bad(keys::CPU_POLICY_AUTO_FACTOR, out.auto_factor));
    }
    let names: Vec<String> = conf
        .names_with_prefix(keys::CPU_POLICY_PARTITION_PREFIX)
        .map(str::to_string)
        .collect();
    for name in names {
        let label = &name[keys::CPU_POLICY_PARTITION_PREFIX.len()..];
        let label = if label == "<DEFAULT>" { "" } else { label };
        let word = conf.get_string(&name, "")?;
        out.by_partition
            .insert(label.to_string(), policy(&name, &word)?);
    }
    Ok(out)
}

fn elastic_conf(conf: &Configuration) -> Result<crate::core::ElasticConf, RmConfigError> {
    let monitoring_interval_ms = conf.get_duration_ms(
        keys::ELASTIC_MONITORING_INTERVAL_MS,
        keys::DEFAULT_ELASTIC_MONITORING_INTERVAL_MS,
    )?;
    if monitoring_interval_ms == 0 {
        return Err(RmConfigError::ElasticIntervalZero {
            place: Place::of(conf, keys::ELASTIC_MONITORING_INTERVAL_MS),
            name: keys::ELASTIC_MONITORING_INTERVAL_MS,
        });
    }
    Ok(crate::core::ElasticConf {
        monitoring_interval_ms,
        resize_interval_ms: conf.get_duration_ms(
            keys::ELASTIC_RESIZE_INTERVAL_MS,
            keys::DEFAULT_ELASTIC_RESIZE_INTERVAL_MS,
        )?,
        restart_cost_ms: conf.get_duration_ms(
            keys::ELASTIC_RESTART_COST_MS,
            keys::DEFAULT_ELASTIC_RESTART_COST_MS,
        )?,
        shrink_deadline_ms: conf.get_duration_ms(
            keys::ELASTIC_SHRINK_DEADLINE_MS,
            keys::DEFAULT_ELASTIC_SHRINK_DEADLINE_MS,
        )?,
    })
}

/// The preemption monitor's properties, each range-checked.
fn preemption_conf(conf: &Configuration) -> Result<PreemptionConf, RmConfigError> {
    let fraction = |name: &'static str, default: f64, max: f64| {
        let value = conf.get_f64(name, default)?;
        if !(0.0..=max).contains(&value) {
            return Err(RmConfigError::PreemptionFraction {
                place: Place::of(conf, name),
                name,
                value,
                written: written(conf, name),
                min: 0.0,
                max,
            });
        }
        Ok(value)
    };
    let monitoring_interval_ms = conf.get_duration_ms(
        keys::PREEMPTION_MONITORING_INTERVAL,
        keys::DEFAULT_PREEMPTION_MONITORING_INTERVAL_MS,
    )?;
    if monitoring_interval_ms == 0 {
        return Err(RmConfigError::PreemptionIntervalZero {
            place: Place::of(conf, keys::PREEMPTION_MONITORING_INTERVAL),
            name: keys::PREEMPTION_MONITORING_INTERVAL,
        });
    }
    let name = keys::PREEMPTION_INTRA_QUEUE_FAIRSHARE_USAGE_FACTOR;
    let fairshare_usage_factor = conf.get_f64(
        name,
        keys::DEFAULT_PREEMPTION_INTRA_QUEUE_FAIRSHARE_USAGE_FACTOR,
    )?;
    if !(fairshare_usage_factor.is_finite() && fairshare_usage_factor >= 1.0) {
        return Err(RmConfigError::PreemptionUsageFactor {
            place: Place::of(conf, name),
            name,
            written: written(conf, name),
        });
    }
    Ok(PreemptionConf {
        enabled: conf.get_bool(
            keys::RM_SCHEDULER_MONITOR_ENABLE,
            keys::DEFAULT_RM_SCHEDULER_MONITOR_ENABLE,
        )?,
        observe_only: conf.get_bool(
            keys::PREEMPTION_OBSERVE_ONLY,
            keys::DEFAULT_PREEMPTION_OBSERVE_ONLY,
        )?,
        monitoring_interval_ms,
        max_wait_before_kill_ms: conf.get_duration_ms(
            keys::PREEMPTION_MAX_WAIT_BEFORE_KILL,
            keys::DEFAULT_PREEMPTION_MAX_WAIT_BEFORE_KILL_MS,
        )?,
        total_preemption_per_round: fraction(
            keys::PREEMPTION_TOTAL_PER_ROUND,
            keys::DEFAULT_PREEMPTION_TOTAL_PER_ROUND,
            1.0,
        )?,
        max_ignored_over_capacity: fraction(
            keys::PREEMPTION_MAX_IGNORED_OVER_CAPACITY,
            keys::DEFAULT_PREEMPTION_MAX_IGNORED_OVER_CAPACITY,
            100.0,
        )?,
        natural_termination_factor: fraction(
            keys::PREEMPTION_NATURAL_TERMINATION_FACTOR,
            keys::DEFAULT_PREEMPTION_NATURAL_TERMINATION_FACTOR,
            1.0,
        )?,
        intra_queue: conf.get_bool(
            keys::PREEMPTION_INTRA_QUEUE_ENABLED,
            keys::DEFAULT_PREEMPTION_INTRA_QUEUE_ENABLED,
        )?,
        min_runtime_ms: conf.get_duration_ms(
            keys::PREEMPTION_MIN_RUNTIME_MS,
            keys::DEFAULT_PREEMPTION_MIN_RUNTIME_MS,
        )?,
        fairshare_usage_factor,
    })
}
