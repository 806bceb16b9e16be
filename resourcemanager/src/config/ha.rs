//! ResourceManager high availability as YARN configures it (`yarn.resourcemanager.ha.*`,
//! per-RM `<key>.<rm-id>` addresses, `yarn.resourcemanager.cluster-id`), with the etcd
//! endpoints and lease under Spindle's keys (`spindle.ha.etcd.*`). One error per refusal.

use std::collections::BTreeMap;
use std::time::Duration;

use spindle_common::config::{keys, Configuration};

use super::{Place, RmConfigError};
use crate::ha::keys::ClusterIdError;
use crate::ha::{EtcdEndpoints, EtcdKeys};

/// The shortest lease taken: etcd's own minimum TTL is about 2 s with default timings.
pub const MIN_LEASE_MS: u64 = 1000;

/// Why the HA configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum HaConfigError {
    #[error("{place}property '{name}': HA needs at least two RM ids, got '{value}'")]
    TooFewRmIds {
        place: Place,
        name: &'static str,
        value: String,
    },
    #[error("{place}property '{name}': RM id '{id}' is listed twice")]
    DuplicateRmId {
        place: Place,
        name: &'static str,
        id: String,
    },
    #[error("{place}property '{name}': RM id '{id}' may hold only letters, digits, '-' and '_'")]
    BadRmId {
        place: Place,
        name: &'static str,
        id: String,
    },
    #[error("property '{name}' is not set: with HA each RM must say which of {ids:?} it is")]
    IdUnset {
        name: &'static str,
        ids: Vec<String>,
    },
    #[error(
        "{place}property '{name}': '{id}' is not one of yarn.resourcemanager.ha.rm-ids {ids:?}"
    )]
    IdNotListed {
        place: Place,
        name: &'static str,
        id: String,
        ids: Vec<String>,
    },
    #[error("neither {webapp}.{id} nor {hostname}.{id} is set: with HA every RM's web address must be configured (clients and the standby's redirects use it)")]
    NoAddressFor {
        id: String,
        webapp: &'static str,
        hostname: &'static str,
    },
    #[error("{place}property '{name}': expected host:port, got '{value}'")]
    BadAddress {
        place: Place,
        name: String,
        value: String,
    },
    #[error("property '{name}' is not set: HA keeps its state and election in etcd (e.g. http://10.0.0.1:2379,http://10.0.0.2:2379)")]
    NoEndpoints { name: &'static str },
    #[error("{place}property '{name}': endpoint '{value}' is not http://host:port")]
    BadEndpoint {
        place: Place,
        name: &'static str,
        value: String,
    },
    #[error("{place}property '{name}': the lease must be at least {min} ms, got {value}")]
    LeaseTooShort {
        place: Place,
        name: &'static str,
        value: u64,
        min: u64,
    },
    #[error("{place}{source}")]
    ClusterId {
        place: Place,
        #[source]
        source: ClusterIdError,
    },
}

/// Typed HA settings (present only when `yarn.resourcemanager.ha.enabled` is true).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HaConfig {
    /// `yarn.resourcemanager.ha.rm-ids`, in order.
    pub rm_ids: Vec<String>,
    /// `yarn.resourcemanager.ha.id`: this RM.
    pub rm_id: String,
    /// `yarn.resourcemanager.ha.automatic-failover.enabled` (default true).
    pub automatic_failover: bool,
    /// `spindle.ha.etcd.endpoints` and `spindle.ha.etcd.lease-ms` (default 5000).
    pub etcd: EtcdEndpoints,
    /// The etcd key prefix of `yarn.resourcemanager.cluster-id`.
    pub keys: EtcdKeys,
    /// Every RM's web address (`host:port`) by id: `yarn.resourcemanager.webapp.address.<id>`,
    /// else `yarn.resourcemanager.hostname.<id>` with port 8088.
    pub webapp: BTreeMap<String, String>,
}

impl HaConfig {
    /// None when HA is off; else the checked settings.
    pub fn from_conf(conf: &Configuration) -> Result<Option<Self>, RmConfigError> {
        if !conf.get_bool(keys::RM_HA_ENABLED, keys::DEFAULT_RM_HA_ENABLED)? {
            return Ok(None);
        }
        let rm_ids = rm_ids(conf)?;
        let rm_id = match conf.get_nonempty(keys::RM_HA_ID)? {
            Some(id) => id.trim().to_string(),
            None => {
                return Err(HaConfigError::IdUnset {
                    name: keys::RM_HA_ID,
                    ids: rm_ids,
                }
                .into())
            }
        };
        if !rm_ids.contains(&rm_id) {
            return Err(HaConfigError::IdNotListed {
                place: Place::of(conf, keys::RM_HA_ID),
                name: keys::RM_HA_ID,
                id: rm_id,
                ids: rm_ids,
            }
            .into());
        }
        let mut webapp = BTreeMap::new();
        for id in &rm_ids {
            webapp.insert(id.clone(), webapp_of(conf, id)?);
        }
        let cluster_id = conf.get_string(keys::RM_CLUSTER_ID, keys::DEFAULT_RM_CLUSTER_ID)?;
        let keys = EtcdKeys::new(cluster_id.trim()).map_err(|source| HaConfigError::ClusterId {
            place: Place::of(conf, keys::RM_CLUSTER_ID),
            source,
        })?;
        Ok(Some(Self {
            rm_ids,
            rm_id,
            automatic_failover: conf.get_bool(
                keys::RM_HA_AUTOMATIC_FAILOVER_ENABLED,
                keys::DEFAULT_RM_HA_AUTOMATIC_FAILOVER_ENABLED,
            )?,
            etcd: etcd(conf)?,
            keys,
            webapp,
        }))
    }

    /// This RM's own web address.
    pub fn own_webapp(&self) -> &str {
        &self.webapp[&self.rm_id]
    }
}

impl From<HaConfigError> for RmConfigError {
    fn from(e: HaConfigError) -> Self {
        RmConfigError::Ha(Box::new(e))
    }
}

fn rm_ids(conf: &Configuration) -> Result<Vec<String>, RmConfigError> {
    let name = keys::RM_HA_RM_IDS;
    let place = || Place::of(conf, name);
    let ids = conf.get_strings(name)?;
    let mut seen = Vec::new();
    for id in ids {
        let ok = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
        if id.is_empty() || !id.chars().all(ok) {
            return Err(HaConfigError::BadRmId {
                place: place(),
                name,
                id,
            }
            .into());
        }
        if seen.contains(&id) {
            return Err(HaConfigError::DuplicateRmId {
                place: place(),
                name,
                id,
            }
            .into());
        }
        seen.push(id);
    }
    if seen.len() < 2 {
        return Err(HaConfigError::TooFewRmIds {
            place: place(),
            name,
            value: conf.get_raw(name).unwrap_or_default().to_string(),
        }
        .into());
    }
    Ok(seen)
}

/// `yarn.resourcemanager.webapp.address.<id>`, else `<hostname.<id>>:8088` (read as every
/// HA client reads it, [`spindle_common::failover::rm_webapp_address`]).
fn webapp_of(conf: &Configuration, id: &str) -> Result<String, RmConfigError> {
    use spindle_common::failover::{rm_webapp_address, HaAddressError};
    rm_webapp_address(conf, id).map_err(|e| match e {
        HaAddressError::Config(e) => e.into(),
        HaAddressError::BadAddress { name, value } => HaConfigError::BadAddress {
            place: Place::of(conf, &name),
            name,
            value,
        }
        .into(),
        HaAddressError::NoAddressFor {
            id,
            webapp,
            hostname,
        } => HaConfigError::NoAddressFor {
            id,
            webapp,
            hostname,
        }
        .into(),
        HaAddressError::NoRmIds { name } => HaConfigError::TooFewRmIds {
            place: Place::of(conf, name),
            name,
            value: String::new(),
        }
        .into(),
    })
}

fn etcd(conf: &Configuration) -> Result<EtcdEndpoints, RmConfigError> {
    let name = keys::SPINDLE_HA_ETCD_ENDPOINTS;
    let urls = conf.get_strings(name)?;
    if urls.is_empty() {
        return Err(HaConfigError::NoEndpoints { name }.into());
    }
    for u in &urls {
        let ok = u
            .strip_prefix("http://")
            .and_then(|r| r.rsplit_once(':'))
            .is_some_and(|(h, p)| !h.is_empty() && !h.contains('/') && p.parse::<u16>().is_ok());
        if !ok {
            return Err(HaConfigError::BadEndpoint {
                place: Place::of(conf, name),
                name,
                value: u.clone(),
            }
            .into());
        }
    }
    let lease_name = keys::SPINDLE_HA_ETCD_LEASE_MS;
    let lease = conf.get_duration_ms(lease_name, keys::DEFAULT_SPINDLE_HA_ETCD_LEASE_MS)?;
    if lease < MIN_LEASE_MS {
        return Err(HaConfigError::LeaseTooShort {
            place: Place::of(conf, lease_name),
            name: lease_name,
            value: lease,
            min: MIN_LEASE_MS,
        }
        .into());
    }
    Ok(EtcdEndpoints {
        urls,
        lease: Duration::from_millis(lease),
    })
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

    const GOOD: &[(&str, &str)] = &[
        ("yarn.resourcemanager.ha.enabled", "true"),
        ("yarn.resourcemanager.ha.rm-ids", "rm1,rm2"),
        ("yarn.resourcemanager.ha.id", "rm2"),
        ("yarn.resourcemanager.webapp.address.rm1", "h1:8088"),
        ("yarn.resourcemanager.hostname.rm2", "h2"),
        ("yarn.resourcemanager.cluster-id", "prod"),
        ("spindle.ha.etcd.endpoints", "http://e1:2379,http://e2:2379"),
    ];

    fn with(over: &[(&str, &str)]) -> Result<Option<HaConfig>, RmConfigError> {
        let mut pairs: Vec<(&str, &str)> = GOOD
            .iter()
            .filter(|(k, _)| !over.iter().any(|(o, _)| o == k))
            .copied()
            .collect();
        pairs.extend(over.iter().filter(|(_, v)| !v.is_empty()));
        HaConfig::from_conf(&conf(&pairs))
    }

    fn refused(over: &[(&str, &str)]) -> HaConfigError {
        match with(over) {
            Err(RmConfigError::Ha(e)) => *e,
            other => panic!("{over:?}: {other:?}"),
        }
    }

    #[test]
    fn ha_is_off_unless_enabled_and_yarn_keys_are_read_with_their_defaults() {
        assert_eq!(HaConfig::from_conf(&conf(&[])).unwrap(), None);
        let ha = with(&[]).unwrap().unwrap();
        assert_eq!(ha.rm_ids, ["rm1", "rm2"]);
        assert_eq!(ha.rm_id, "rm2");
        assert!(ha.automatic_failover, "automatic failover is on by default");
        assert_eq!(ha.etcd.urls, ["http://e1:2379", "http://e2:2379"]);
        assert_eq!(ha.etcd.lease, Duration::from_millis(5000));
        assert_eq!(ha.keys.leader(), "/spindle/prod/leader");
        assert_eq!(ha.webapp["rm1"], "h1:8088");
        assert_eq!(ha.own_webapp(), "h2:8088", "from hostname.rm2");
        let manual = with(&[(
            "yarn.resourcemanager.ha.automatic-failover.enabled",
            "false",
        )]);
        assert!(!manual.unwrap().unwrap().automatic_failover);
    }

    #[test]
    fn each_bad_ha_setting_is_refused_by_name() {
        let ids = "yarn.resourcemanager.ha.rm-ids";
        assert!(matches!(
            refused(&[(ids, "rm1")]),
            HaConfigError::TooFewRmIds { .. }
        ));
        assert!(matches!(
            refused(&[(ids, "rm1,rm1")]),
            HaConfigError::DuplicateRmId { .. }
        ));
        assert!(matches!(
            refused(&[(ids, "rm1,r/2")]),
            HaConfigError::BadRmId { .. }
        ));
        let id = "yarn.resourcemanager.ha.id";
        assert!(matches!(
            refused(&[(id, "")]),
            HaConfigError::IdUnset { .. }
        ));
        assert!(matches!(
            refused(&[(id, "rm3")]),
            HaConfigError::IdNotListed { .. }
        ));
        let host2 = "yarn.resourcemanager.hostname.rm2";
        assert!(
            matches!(refused(&[(host2, "")]), HaConfigError::NoAddressFor { ref id, .. } if id == "rm2")
        );
        let web1 = "yarn.resourcemanager.webapp.address.rm1";
        assert!(matches!(
            refused(&[(web1, "h1")]),
            HaConfigError::BadAddress { .. }
        ));
        let ep = "spindle.ha.etcd.endpoints";
        assert!(matches!(
            refused(&[(ep, "")]),
            HaConfigError::NoEndpoints { .. }
        ));
        assert!(matches!(
            refused(&[(ep, "e1:2379")]),
            HaConfigError::BadEndpoint { .. }
        ));
        let lease = "spindle.ha.etcd.lease-ms";
        assert!(matches!(
            refused(&[(lease, "10")]),
            HaConfigError::LeaseTooShort { value: 10, .. }
        ));
        let cid = "yarn.resourcemanager.cluster-id";
        assert!(matches!(
            refused(&[(cid, "a/b")]),
            HaConfigError::ClusterId { .. }
        ));
        let msg = refused(&[(id, "rm3")]).to_string();
        assert!(
            msg.contains("yarn.resourcemanager.ha.id") && msg.contains("rm3"),
            "{msg}"
        );
    }
}
