//! The RM's typed configuration, built from the raw Hadoop properties. Every rule has its
//! own error, which names the property and, through the raw layer, the file and line.

use std::path::PathBuf;

use spindle_common::config::{keys, ConfigError, Configuration};
use spindle_common::Resource;

use crate::core::queue_conf::{
    CapacitySpec, MaxCapacitySpec, QueueSpec, QueueState, SchedulerConf,
};
use crate::core::CoreConfig;

const CS: &str = "yarn.scheduler.capacity.";
/// Where the SQLite state store lives (Spindle's own key: YARN's stores are ZK, FS or LevelDB).
pub const STATE_STORE_PATH: &str = "spindle.resourcemanager.state-store.path";

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
}

#[derive(Debug, Clone)]
pub struct RmConfig {
    pub webapp_address: String,
    pub store_path: PathBuf,
    pub cluster_id: String,
    pub core: CoreConfig,
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
        let store_path = conf.get_string(
            STATE_STORE_PATH,
            "/tmp/hadoop-yarn/yarn/system/rmstore.sqlite",
        )?;
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
        for t in conf.get_strings("yarn.resource-types")? {
            let k = format!("yarn.resource-types.{t}.maximum-allocation");
            let v = conf.get_i64(&k, i64::MAX)?;
            max_allocation.set(&t, v);
        }
        let queues = parse_queues(conf)?;
        let core = CoreConfig {
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
            scheduler: SchedulerConf {
                root: queues,
                max_application_priority: conf
                    .get_i64("yarn.cluster.max-application-priority", 0)?
                    .clamp(0, i64::from(i32::MAX)) as i32,
                ..SchedulerConf::single_default_queue()
            },
        };
        Ok(Self {
            webapp_address,
            store_path: PathBuf::from(store_path),
            cluster_id: conf.get_string(keys::RM_CLUSTER_ID, "spindle")?,
            core,
        })
    }
}

/// Reads the queue tree from `capacity-scheduler.xml` properties. Without any, the tree is
/// YARN's default: `root` with one leaf `default` at 100%.
pub fn parse_queues(conf: &Configuration) -> Result<QueueSpec, RmConfigError> {
    fn build(conf: &Configuration, path: &str, depth: usize) -> Result<QueueSpec, RmConfigError> {
        if depth > 32 {
            return Err(rule(
                conf,
                &format!("{CS}{path}.queues"),
                "queue tree deeper than 32 levels".into(),
            ));
        }
        let name = path.rsplit('.').next().unwrap_or(path).to_string();
        let children_key = format!("{CS}{path}.queues");
        let child_names = conf.get_strings(&children_key)?;
        let mut seen = std::collections::BTreeSet::new();
        let mut children = Vec::new();
        for c in &child_names {
            if c.contains('.') || c.contains(char::is_whitespace) {
                return Err(rule(
                    conf,
                    &children_key,
                    format!("queue name '{c}' may not contain '.' or spaces"),
                ));
            }
            if !seen.insert(c.clone()) {
                return Err(rule(
                    conf,
                    &children_key,
                    format!("queue '{c}' is listed twice"),
                ));
            }
            children.push(build(conf, &format!("{path}.{c}"), depth + 1)?);
        }
        let cap_key = format!("{CS}{path}.capacity");
        let capacity = if path == "root" {
            100.0
        } else {
            let raw = conf.get_string(&cap_key, "0")?;
            percent(conf, &cap_key, &raw)?
        };
        let max_key = format!("{CS}{path}.maximum-capacity");
        let raw_max = conf.get_string(&max_key, "100")?;
        let maximum_capacity = if raw_max.trim() == "-1" {
            100.0
        } else {
            percent(conf, &max_key, &raw_max)?
        };
        if maximum_capacity < capacity {
            return Err(rule(conf, &max_key, format!("maximum-capacity {maximum_capacity} is below capacity {capacity} of queue {path}")));
        }
        let state_key = format!("{CS}{path}.state");
        let state = conf.get_string(&state_key, "RUNNING")?.to_ascii_uppercase();
        if state != "RUNNING" && state != "STOPPED" {
            return Err(rule(
                conf,
                &state_key,
                format!("expected RUNNING or STOPPED, got '{state}'"),
            ));
        }
        if !children.is_empty() {
            let sum: f64 = children
                .iter()
                .map(|c| match c.capacity {
                    CapacitySpec::Percent(p) => p,
                    _ => 0.0,
                })
                .sum();
            if (sum - 100.0).abs() > 0.05 && sum != 0.0 {
                return Err(rule(conf, &children_key, format!(
                    "Illegal capacity sum of {:.2} for children of queue {path} for label=. It should be either 0 or 1.0",
                    sum / 100.0
                )));
            }
        }
        let _ = name;
        let mut q = QueueSpec::new(path, CapacitySpec::Percent(capacity));
        q.max_capacity = MaxCapacitySpec::Percent(maximum_capacity);
        q.state = if state == "STOPPED" {
            QueueState::Stopped
        } else {
            QueueState::Running
        };
        q.children = children;
        Ok(q)
    }
    let root_key = format!("{CS}root.queues");
    if conf.get_raw(&root_key).is_none() {
        let mut c = conf.clone();
        c.set(&root_key, "default");
        c.set(&format!("{CS}root.default.capacity"), "100");
        return build(&c, "root", 0);
    }
    build(conf, "root", 0)
}

fn percent(conf: &Configuration, key: &str, raw: &str) -> Result<f64, RmConfigError> {
    let v: f64 = raw
        .trim()
        .parse()
        .map_err(|_| rule(conf, key, format!("expected a percentage such as 12.5, got '{raw}' (absolute and weight forms arrive with the capacity scheduler)")))?;
    if !(0.0..=100.0).contains(&v) {
        return Err(rule(
            conf,
            key,
            format!("expected a percentage between 0 and 100, got {v}"),
        ));
    }
    Ok(v)
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

    #[test]
    fn queue_tree_and_capacity_sum() {
        let c = conf(
            r#"<configuration>
          <property><name>yarn.scheduler.capacity.root.queues</name><value>a,b</value></property>
          <property><name>yarn.scheduler.capacity.root.a.capacity</name><value>70</value></property>
          <property><name>yarn.scheduler.capacity.root.b.capacity</name><value>30</value></property>
        </configuration>"#,
        );
        let q = parse_queues(&c).unwrap();
        assert_eq!(q.children.len(), 2);
        assert_eq!(
            q.find("root.b").unwrap().capacity,
            CapacitySpec::Percent(30.0)
        );
        let mut bad = c.clone();
        bad.set("yarn.scheduler.capacity.root.b.capacity", "40");
        let e = parse_queues(&bad).unwrap_err().to_string();
        assert!(e.contains("Illegal capacity sum of 1.10"), "{e}");
    }
}
