//! The etcd key layout of one cluster, every key under `/spindle/<cluster-id>/`:
//!
//! | key | value |
//! |---|---|
//! | `leader` | the active RM's `ha.id`, bound to its lease (YARN's `ActiveStandbyElectorLock`) |
//! | `meta/epoch`, `meta/token-secret`, `meta/node-labels`, `meta/schema` | as the SQLite `meta` table |
//! | `apps/<application id>` | one application record (JSON, the SQLite `apps.record`) |
//! | `usage/<cluster timestamp>_<sequence number>` | one finished application's usage record (JSON) |
//! | `sched-conf/<version, 20 digits>` | one scheduler-configuration version (JSON) |
//! | `cancelled-tokens/<sequence number, 20 digits>` | the cancelled token's max date |
//!
//! Numbers in keys are zero-padded so that key order is numeric order.

/// Why a cluster id cannot name a key prefix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterIdError {
    #[error(
        "yarn.resourcemanager.cluster-id is empty; HA needs a name shared by the cluster's RMs"
    )]
    Empty,
    #[error("yarn.resourcemanager.cluster-id '{0}' has a character other than letters, digits, '-', '_' and '.' (it names the etcd key prefix /spindle/<cluster-id>/)")]
    BadChar(String),
}

/// The keys of one cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdKeys {
    prefix: String,
}

impl EtcdKeys {
    /// The keys of the cluster `cluster_id` (letters, digits, `-`, `_`, `.`).
    pub fn new(cluster_id: &str) -> Result<Self, ClusterIdError> {
        if cluster_id.is_empty() {
            return Err(ClusterIdError::Empty);
        }
        let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
        if !cluster_id.chars().all(ok) || cluster_id.chars().all(|c| c == '.') {
            return Err(ClusterIdError::BadChar(cluster_id.to_string()));
        }
        Ok(Self {
            prefix: format!("/spindle/{cluster_id}/"),
        })
    }

    /// `/spindle/<cluster-id>/`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    pub fn leader(&self) -> String {
        format!("{}leader", self.prefix)
    }

    pub fn meta(&self, name: &str) -> String {
        format!("{}meta/{name}", self.prefix)
    }

    /// The prefix of a family of records (`apps/`, `usage/`, ...).
    pub fn family(&self, family: Family) -> String {
        format!("{}{}/", self.prefix, family.name())
    }

    /// One record of a family: `name` is an application id, or a number (zero-padded).
    pub fn record(&self, family: Family, name: &str) -> String {
        format!("{}{name}", self.family(family))
    }

    /// A finished application's usage record: keyed by cluster timestamp and sequence number,
    /// zero-padded, so key order is submission order (pruning drops the oldest first).
    pub fn usage(&self, id: &spindle_common::ApplicationId) -> String {
        let name = format!("{:020}_{:010}", id.cluster_timestamp, id.id);
        self.record(Family::Usage, &name)
    }

    /// One numbered record of a family, zero-padded so key order is numeric order.
    pub fn numbered(&self, family: Family, n: u64) -> String {
        self.record(family, &format!("{n:020}"))
    }
}

/// The families of records, one key per record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Apps,
    Usage,
    SchedConf,
    CancelledTokens,
    /// Users' decayed usage, one key per leaf and user (`<queue path>/<user>`).
    Fairshare,
}

impl Family {
    fn name(self) -> &'static str {
        match self {
            Family::Apps => "apps",
            Family::Usage => "usage",
            Family::SchedConf => "sched-conf",
            Family::CancelledTokens => "cancelled-tokens",
            Family::Fairshare => "fairshare",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_live_under_the_cluster_prefix_and_numbers_sort() {
        let k = EtcdKeys::new("prod-1").unwrap();
        assert_eq!(k.leader(), "/spindle/prod-1/leader");
        assert_eq!(k.meta("epoch"), "/spindle/prod-1/meta/epoch");
        assert_eq!(
            k.record(Family::Apps, "application_1_0001"),
            "/spindle/prod-1/apps/application_1_0001"
        );
        assert!(k.numbered(Family::SchedConf, 9) < k.numbered(Family::SchedConf, 10));
    }

    #[test]
    fn a_cluster_id_that_could_escape_its_prefix_is_refused() {
        assert_eq!(EtcdKeys::new(""), Err(ClusterIdError::Empty));
        for bad in ["a/b", "..", "a b", "x\n"] {
            assert!(
                matches!(EtcdKeys::new(bad), Err(ClusterIdError::BadChar(_))),
                "{bad}"
            );
        }
    }
}
