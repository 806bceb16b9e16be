//! The etcd store against a real etcd (one member on 127.0.0.1, ephemeral ports, data in a
//! temporary directory, killed by pid at the end): the shared suite, fencing, the write
//! limit, paged reads and usage pruning. Skipped without `/usr/bin/etcd` (a failure under CI).

use std::cell::RefCell;
use std::time::Instant;

use spindle_common::states::YarnApplicationState;
use spindle_common::ApplicationId;

use super::*;
use crate::ha::testing::{active_store, elect, endpoints, etcd, runtime};
use crate::ha::{LeaderElector, LostBecause};
use crate::store::suite::{self, record};

#[test]
fn the_etcd_store_passes_the_store_suite() {
    let Some((_dir, cluster)) = etcd("the_etcd_store_passes_the_store_suite", 1) else {
        return;
    };
    let rt = runtime();
    let ep = endpoints(cluster.endpoint_list(), 5000);
    let held = RefCell::new(Vec::new());
    let n = std::cell::Cell::new(0);
    // Each check gets a cluster (key prefix) of its own, and the leadership of it.
    suite::run(|| {
        n.set(n.get() + 1);
        let name = format!("suite-{}", n.get());
        let (elector, leadership) = elect(&rt, &ep, &name, "rm1");
        let store = EtcdStore::open(&ep, EtcdKeys::new(&name).unwrap(), &leadership).unwrap();
        held.borrow_mut().push((elector, leadership));
        store
    });
}

#[test]
fn a_deposed_active_writes_nothing_and_its_successor_recovers_every_acknowledged_write() {
    let test =
        "a_deposed_active_writes_nothing_and_its_successor_recovers_every_acknowledged_write";
    let Some((_dir, cluster)) = etcd(test, 1) else {
        return;
    };
    let rt = runtime();
    let ep = endpoints(cluster.endpoint_list(), 2000);
    let keys = EtcdKeys::new("fence").unwrap();
    let (_e1, l1) = elect(&rt, &ep, "fence", "rm1");
    let lost1 = l1.lost_signal();
    let mut s1 = EtcdStore::open(&ep, keys.clone(), &l1).unwrap();
    s1.recover().unwrap();
    let acked = record();
    s1.put_app(&acked).unwrap();
    // rm1 stops renewing (a kill -9 or a pause): its lease expires and rm2 takes over.
    let since = Instant::now();
    drop(l1);
    let (_e2, l2) = elect(&rt, &ep, "fence", "rm2");
    println!(
        "rm2 elected {:?} after rm1 stopped renewing",
        since.elapsed()
    );
    assert!(l2.term.revision > s1.term().revision, "terms increase");
    let mut s2 = EtcdStore::open(&ep, keys, &l2).unwrap();
    let r = s2.recover().unwrap();
    assert_eq!(r.epoch, 1);
    assert_eq!(
        r.apps.iter().map(|a| a.id).collect::<Vec<_>>(),
        vec![acked.id],
        "the acknowledged write survived the failover"
    );
    // rm1 wakes up: every kind of write is refused, by name, and raises its alarm.
    let mut late = record();
    late.id = ApplicationId::new(5, 7);
    let refused = [
        s1.put_app(&late).err(),
        s1.delete_app(&acked.id).err(),
        s1.put_labels(&Default::default()).err(),
        s1.cancel_user_token(1, 10, 1).err(),
        s1.put_sched_conf(&suite::sched_conf(
            1,
            crate::store::SchedConfSource::Mutation,
        ))
        .err(),
        s1.recover().err(),
    ];
    for e in refused {
        assert!(
            matches!(e, Some(StoreError::Fenced { ref holder, .. }) if holder == "rm1"),
            "{e:?}"
        );
    }
    assert!(
        lost1.borrow().is_some(),
        "the deposed term's alarm is raised"
    );
    let after = s2.recover().unwrap();
    assert_eq!(after.epoch, 2);
    assert_eq!(
        after.apps.len(),
        1,
        "rm1 wrote nothing after losing its term"
    );
    assert!(s2.labels().unwrap().cluster.is_empty());
    assert_eq!(s2.latest_sched_conf().unwrap(), None);
    // The successor itself writes on.
    s2.put_app(&late).unwrap();
    // A resigning active frees the key at once, and is fenced too.
    let lost2 = l2.lost_signal();
    rt.block_on(_e2.resign(l2)).unwrap();
    assert_eq!(
        rt.block_on(_e2.leader()).unwrap(),
        None,
        "the lock is released"
    );
    assert!(matches!(
        s2.delete_app(&late.id),
        Err(StoreError::Fenced { .. })
    ));
    assert_eq!(*lost2.borrow(), Some(LostBecause::Fenced));
}

#[test]
fn a_record_over_the_write_limit_is_refused_by_name_and_the_store_goes_on() {
    let test = "a_record_over_the_write_limit_is_refused_by_name_and_the_store_goes_on";
    let Some((_dir, cluster)) = etcd(test, 1) else {
        return;
    };
    let rt = runtime();
    let ep = endpoints(cluster.endpoint_list(), 5000);
    let (_e, l, mut s) = active_store(&rt, &ep, "big", "rm1");
    let mut big = record();
    big.diagnostics = "x".repeat(MAX_WRITE_BYTES + 1);
    match s.put_app(&big) {
        Err(StoreError::TooLarge { key, limit, .. }) => {
            assert!(key.ends_with(&big.id.to_string()), "{key}");
            assert_eq!(limit, MAX_WRITE_BYTES);
        }
        other => panic!("{other:?}"),
    }
    // Just under the limit goes through etcd's own 1.5 MiB request limit.
    big.diagnostics = "x".repeat(MAX_WRITE_BYTES - 10_000);
    s.put_app(&big).unwrap();
    assert!(!l.is_lost());
}

#[test]
fn recovery_reads_past_one_page_and_usage_records_are_pruned_oldest_first() {
    let test = "recovery_reads_past_one_page_and_usage_records_are_pruned_oldest_first";
    let Some((_dir, cluster)) = etcd(test, 1) else {
        return;
    };
    let rt = runtime();
    let ep = endpoints(cluster.endpoint_list(), 5000);
    let (_e, _l, mut s) = active_store(&rt, &ep, "pages", "rm1");
    s.usage_kept = 3;
    let n = PAGE as u32 + 20;
    let started = Instant::now();
    for i in 1..=n {
        let mut r = record();
        r.id = ApplicationId::new(5, i);
        r.live_attempt = None;
        if i <= 5 {
            r.state = YarnApplicationState::FINISHED;
            r.finish_time = 10;
        }
        s.put_app(&r).unwrap();
    }
    println!("{n} writes in {:?}", started.elapsed());
    let r = s.recover().unwrap();
    assert_eq!(r.apps.len(), n as usize);
    assert!(r.apps.windows(2).all(|w| w[0].id < w[1].id), "in id order");
    let kept: Vec<u32> = s
        .usage_between(0, u64::MAX)
        .unwrap()
        .0
        .iter()
        .map(|u| u.id.id)
        .collect();
    assert_eq!(kept, vec![3, 4, 5], "the newest usage records are kept");
}

#[test]
fn without_quorum_nothing_is_acknowledged_and_with_it_back_nothing_is_lost() {
    let test = "without_quorum_nothing_is_acknowledged_and_with_it_back_nothing_is_lost";
    let Some((_dir, mut cluster)) = etcd(test, 3) else {
        return;
    };
    let rt = runtime();
    // The default lease (and so a 5 s call timeout): a member's death may cost a raft
    // election (about 1 s with etcd's default timings) before the next write commits.
    let ep = endpoints(cluster.endpoint_list(), 5000);
    let (_e, l, mut s) = active_store(&rt, &ep, "quorum", "rm1");
    let mut rec = record();
    s.put_app(&rec).unwrap();
    // One member of three down: the store writes on.
    cluster.kill(2);
    rec.id = ApplicationId::new(5, 2);
    s.put_app(&rec).unwrap();
    // Two down: no write is acknowledged (the call fails, typed, within its timeout).
    cluster.kill(1);
    rec.id = ApplicationId::new(5, 3);
    let started = Instant::now();
    let e = s.put_app(&rec).unwrap_err();
    assert!(matches!(e, StoreError::Backend { .. }), "{e:?}");
    println!("{test}: refused after {:?}: {e}", started.elapsed());
    // Quorum back: a new term (the lease of the old one lapsed meanwhile, or not) recovers
    // both acknowledged writes; the unacknowledged one may or may not have landed.
    cluster.restart(1);
    cluster.restart(2);
    drop((s, l));
    let (_e2, l2) = elect(&rt, &ep, "quorum", "rm2");
    let mut s2 = EtcdStore::open(&ep, EtcdKeys::new("quorum").unwrap(), &l2).unwrap();
    let ids: Vec<u32> = s2.recover().unwrap().apps.iter().map(|a| a.id.id).collect();
    assert!(ids.starts_with(&[1, 2]), "{ids:?}");
}
