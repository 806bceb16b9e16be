//! Electors and fenced stores of three RMs against a real etcd (one member on 127.0.0.1,
//! killed by pid at the end), over a random schedule of pauses (the active stops renewing and
//! later writes with its old term), kills and forced resignations: every elected active
//! recovers every acknowledged write, a deposed one can write nothing, and one RM writes per
//! term. The seed is printed (set `SPINDLE_HA_SEED` to replay one).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::future::select_all;
use spindle_common::ApplicationId;
use tokio::sync::watch;

use super::testing::{endpoints, etcd, runtime};
use super::{EtcdElector, EtcdEndpoints, EtcdKeys, LeaderElector, Leadership};
use crate::store::suite::record;
use crate::store::{EtcdStore, StateStore, StoreError};

struct Node {
    id: String,
    elector: EtcdElector,
    active: Option<(Leadership, EtcdStore)>,
    /// The store of a term this RM lost without knowing (paused or resigned by force).
    zombie: Option<EtcdStore>,
}

/// A small deterministic generator (xorshift), seeded from the clock or `SPINDLE_HA_SEED`.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[test]
fn random_pauses_kills_and_resignations_never_split_brain_nor_lose_a_write() {
    let test = "random_pauses_kills_and_resignations_never_split_brain_nor_lose_a_write";
    let Some((_dir, cluster)) = etcd(test, 1) else {
        return;
    };
    let seed = std::env::var("SPINDLE_HA_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| spindle_common::time::now_ms() | 1);
    println!("{test}: seed {seed}");
    let mut rng = Rng(seed);
    let rt = runtime();
    let ep = endpoints(cluster.endpoint_list(), 1000);
    let keys = EtcdKeys::new("failover").unwrap();
    let mut nodes: Vec<Node> = ["rm1", "rm2", "rm3"]
        .iter()
        .map(|id| Node {
            id: id.to_string(),
            elector: rt
                .block_on(EtcdElector::connect(&ep, keys.clone(), id))
                .unwrap(),
            active: None,
            zombie: None,
        })
        .collect();
    // Acknowledged writes: application to the priority last written, and writer per term.
    let mut acked: BTreeMap<ApplicationId, i32> = BTreeMap::new();
    let mut writer_of: BTreeMap<i64, String> = BTreeMap::new();
    for round in 0..6u32 {
        let started = Instant::now();
        let w = campaign_all(&rt, &mut nodes, &ep);
        let term = nodes[w].active.as_ref().unwrap().0.term.revision;
        println!(
            "round {round}: {} elected (term {term}) in {:?}",
            nodes[w].id,
            started.elapsed()
        );
        assert_eq!(
            rt.block_on(nodes[w].elector.leader()).unwrap().as_deref(),
            Some(nodes[w].id.as_str())
        );
        let id = nodes[w].id.clone();
        let (leadership, store) = nodes[w].active.as_mut().unwrap();
        let r = store.recover().unwrap();
        let got: BTreeMap<ApplicationId, i32> =
            r.apps.iter().map(|a| (a.id, a.sub.priority)).collect();
        assert_eq!(
            got, acked,
            "round {round}: every acknowledged write recovered"
        );
        for j in 0..3 {
            let mut rec = record();
            rec.id = ApplicationId::new(5, rng.below(8) as u32 + 1);
            rec.sub.priority = (round * 10 + j) as i32;
            store.put_app(&rec).unwrap();
            acked.insert(rec.id, rec.sub.priority);
            let writer = writer_of.entry(term).or_insert_with(|| id.clone());
            assert_eq!(writer, &id, "one writer per term");
        }
        assert!(!leadership.is_lost());
        // Every RM that lost a term without knowing wakes up and tries to write.
        for n in nodes.iter_mut() {
            if let Some(mut z) = n.zombie.take() {
                let mut rec = record();
                rec.id = ApplicationId::new(5, 1);
                rec.sub.priority = -1;
                assert!(
                    matches!(z.put_app(&rec), Err(StoreError::Fenced { .. })),
                    "round {round}: {} wrote after losing its term",
                    n.id
                );
            }
        }
        let (leadership, store) = nodes[w].active.take().unwrap();
        match rng.below(3) {
            // Paused past its lease: the renewal stops, the store lives on.
            0 => {
                println!("round {round}: {} paused", nodes[w].id);
                drop(leadership);
                nodes[w].zombie = Some(store);
            }
            // kill -9: nothing is left.
            1 => {
                println!("round {round}: {} killed", nodes[w].id);
                drop((leadership, store));
            }
            // A forced -transitionToStandby: the lock is released at once.
            _ => {
                println!("round {round}: {} resigned", nodes[w].id);
                rt.block_on(nodes[w].elector.resign(leadership)).unwrap();
                nodes[w].zombie = Some(store);
            }
        }
    }
}

/// Every RM without a term campaigns at once; the first to win opens its store. Returns its
/// index (the losers' campaigns are dropped).
fn campaign_all(rt: &tokio::runtime::Runtime, nodes: &mut [Node], ep: &EtcdEndpoints) -> usize {
    let (i, leadership) = rt.block_on(async {
        let (tx, _rx) = watch::channel(None);
        let tx = &tx;
        let campaigns = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| Box::pin(async move { (i, n.elector.campaign(tx).await) }));
        let ((i, won), _, _) = tokio::time::timeout(Duration::from_secs(30), select_all(campaigns))
            .await
            .expect("someone is elected within 30 s");
        (i, won.unwrap())
    });
    let store = EtcdStore::open(ep, EtcdKeys::new("failover").unwrap(), &leadership).unwrap();
    nodes[i].active = Some((leadership, store));
    i
}
