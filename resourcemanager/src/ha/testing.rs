//! What the HA tests share: a runtime for the electors' renewal tasks, and an election won
//! on a real etcd (started by the test through `spindle_test_support::etcd`).

use std::time::Duration;

use spindle_test_support::etcd::{present, EtcdCluster};
use tokio::sync::watch;

use super::{EtcdElector, EtcdEndpoints, EtcdKeys, LeaderElector, Leadership};
use crate::store::{EtcdStore, StateStore};

/// An etcd of `members` members in a temporary directory, or None (the test is skipped,
/// a failure under CI) when etcd is not installed.
pub(crate) fn etcd(test: &str, members: usize) -> Option<(tempfile::TempDir, EtcdCluster)> {
    if !present(test) {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let cluster = EtcdCluster::start(dir.path(), members);
    Some((dir, cluster))
}

/// `rm_id` elected in `cluster`, with its store opened and recovered.
pub(crate) fn active_store(
    rt: &tokio::runtime::Runtime,
    ep: &EtcdEndpoints,
    cluster: &str,
    rm_id: &str,
) -> (EtcdElector, Leadership, EtcdStore) {
    let (e, l) = elect(rt, ep, cluster, rm_id);
    let mut s = EtcdStore::open(ep, EtcdKeys::new(cluster).unwrap(), &l).unwrap();
    s.recover().unwrap();
    (e, l, s)
}

/// A multi-threaded runtime: the renewal tasks run while the test thread blocks elsewhere.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The endpoints of a test cluster with a lease of `lease_ms`.
pub(crate) fn endpoints(urls: Vec<String>, lease_ms: u64) -> EtcdEndpoints {
    EtcdEndpoints {
        urls,
        lease: Duration::from_millis(lease_ms),
    }
}

/// `rm_id` connects and campaigns in `cluster` until it wins (at most 30 s).
pub(crate) fn elect(
    rt: &tokio::runtime::Runtime,
    ep: &EtcdEndpoints,
    cluster: &str,
    rm_id: &str,
) -> (EtcdElector, Leadership) {
    rt.block_on(async {
        let e = EtcdElector::connect(ep, EtcdKeys::new(cluster).unwrap(), rm_id)
            .await
            .unwrap();
        let (tx, _rx) = watch::channel(None);
        let l = tokio::time::timeout(Duration::from_secs(30), e.campaign(&tx))
            .await
            .expect("elected within 30 s")
            .unwrap();
        (e, l)
    })
}
