//! Usage accounting on the pure core: every container adds resource x (end - allocation)
//! per type to its application (YARN's `resourceSecondsMap`), preempted ones to the
//! preempted figures too, and the final record the store writes carries the totals.

use spindle_common::resource::GPU;
use spindle_common::states::FinalApplicationStatus;
use spindle_common::ApplicationId;

use super::preemption::{conf, leaf, Cluster, WAIT};
use super::TestEnv;
use crate::core::*;

/// Every live non-AM container of `app` exits 0 at the current time.
fn members_exit(c: &mut Cluster, app: &ApplicationId) {
    for n in c.nodes.clone() {
        let reports = c.env.core.nodes()[&n]
            .containers
            .iter()
            .map(|cid| {
                let mine = cid.application_id() == *app && !c.env.core.containers()[cid].is_am;
                if mine {
                    TestEnv::done(*cid, 0)
                } else {
                    TestEnv::running(*cid)
                }
            })
            .collect();
        c.env.heartbeat(&n, reports);
    }
}

/// The AM unregisters and its container exits.
fn finish(c: &mut Cluster, app: &ApplicationId) {
    let att = c.att(app);
    c.env
        .core
        .am_finish(
            &att,
            FinalApplicationStatus::SUCCEEDED,
            String::new(),
            String::new(),
            c.env.now,
        )
        .expect("finish");
    c.env.step();
    let am = c.env.core.apps()[app]
        .current_attempt()
        .and_then(Attempt::am_container)
        .expect("an AM container");
    let node = c.env.core.containers()[&am].node.clone();
    c.env.heartbeat(&node, vec![TestEnv::done(am, 0)]);
}

#[test]
fn two_users_gangs_count_gpu_ms_exactly_and_the_final_record_carries_them() {
    let mut c = Cluster::new(
        conf(vec![leaf("root.a", 50.0), leaf("root.b", 50.0)], 0),
        4,
        4,
    );
    let a = c.start("root.a", "alice", 0);
    let b = c.start("root.b", "bob", 0);
    // alice: 2 members x 4 GPUs for 60 s; bob: 1 member x 4 GPUs for 30 s.
    assert_eq!(c.gang(&a, "train", 2, 4).allocated.len(), 2);
    assert_eq!(c.gang(&b, "train", 1, 4).allocated.len(), 1);
    c.run_for(30_000);
    members_exit(&mut c, &b);
    c.run_for(30_000);
    members_exit(&mut c, &a);
    for app in [a, b] {
        assert_eq!(c.live_gpus(&app), 0);
    }
    assert_eq!(c.env.app(&a).usage.resource_ms.get(GPU), 8 * 60_000);
    assert_eq!(c.env.app(&b).usage.resource_ms.get(GPU), 4 * 30_000);
    // Memory: the members' 1024 MB each, plus the AM's 512 MB while it lives.
    assert_eq!(
        c.env.app(&b).usage.resource_ms.memory_mb,
        1024 * 30_000,
        "the AM is still running: only ended containers are counted"
    );
    c.env.effects.clear();
    finish(&mut c, &a);
    let u = c.env.app(&a).usage.clone();
    assert_eq!(
        u.resource_ms.get(GPU),
        8 * 60_000,
        "an AM without GPUs adds none"
    );
    assert!(
        u.resource_ms.memory_mb > 2 * 1024 * 60_000,
        "the AM's memory counts"
    );
    assert!(u.preempted_ms.is_zero(), "nothing was preempted");
    // The final record the driver writes (the store's usage row) carries the totals, once.
    let finals: Vec<&AppRecord> = c
        .env
        .effects
        .iter()
        .filter_map(|e| match e {
            Effect::PersistApp(r) if r.id == a && r.state.is_final() => Some(&**r),
            _ => None,
        })
        .collect();
    assert_eq!(finals.last().map(|r| &r.usage), Some(&u));
    assert_eq!(
        finals.iter().filter(|r| r.usage == u).count(),
        1,
        "the final record is not written twice"
    );
    // A restarted core takes the usage back from the record.
    let rec = (*finals.last().expect("a final record")).clone();
    let mut env = TestEnv::with_conf(conf(vec![leaf("root.a", 50.0), leaf("root.b", 50.0)], 0));
    env.core.recover_app(rec, env.now);
    env.step();
    assert_eq!(env.app(&a).usage, u);
}

#[test]
fn a_running_container_counts_up_to_now_in_the_view() {
    let mut c = Cluster::new(conf(vec![leaf("root.a", 100.0)], 0), 1, 4);
    let a = c.start("root.a", "alice", 0);
    c.gang(&a, "g", 1, 2);
    let since = c.env.now;
    c.run_for(5_000);
    let app = c.env.app(&a);
    assert_eq!(app.usage.resource_ms.get(GPU), 0, "nothing ended yet");
    let live: Vec<_> = c
        .env
        .core
        .containers()
        .values()
        .filter(|x| x.is_live() && x.id.application_id() == a)
        .map(|x| (&x.resource, x.allocated_time))
        .collect();
    let view = app.usage.with_live(live, since + 5_000);
    assert_eq!(view.resource_ms.get(GPU), 2 * 5_000);
}

#[test]
fn preempted_containers_count_in_the_preempted_figures() {
    let mut c = Cluster::new(
        conf(vec![leaf("root.a", 50.0), leaf("root.b", 50.0)], 0),
        4,
        4,
    );
    let a = c.start("root.a", "alice", 0);
    assert_eq!(c.gang(&a, "train", 4, 4).allocated.len(), 4);
    c.run_for(10_000);
    let b = c.start("root.b", "bob", 0);
    c.gang(&b, "train", 2, 4);
    c.run_for(WAIT + 10_000);
    assert_eq!(c.live_gpus(&a), 0, "a's gang was taken back");
    let app = c.env.app(&a);
    let p = &app.preemption;
    assert_eq!(p.containers, 4);
    assert_eq!(app.usage.preempted_ms.get(GPU) as u64, p.gpu_ms);
    assert_eq!(app.usage.preempted_ms.memory_mb, p.memory_ms);
    assert_eq!(app.usage.preempted_ms.vcores, p.vcore_ms);
    assert_eq!(
        app.usage.resource_ms.get(GPU),
        app.usage.preempted_ms.get(GPU),
        "every GPU container of a was preempted"
    );
    assert!(app.usage.preempted_ms.get(GPU) >= 16 * 10_000);
}
