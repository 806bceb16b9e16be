//! Guarantees against AM-only load (issue 31, item 6): applications that hold nothing but
//! their AM container. Near-simultaneous submissions to several queues end in shares that
//! follow the guarantees, and the preemption monitor takes AM containers back as a last
//! resort (whole applications, newest first, never below the victim queue's guarantee).

use std::collections::BTreeMap;

use proptest::prelude::*;
use spindle_common::{ApplicationId, NodeId, Resource};

use super::capacity::used_mb;
use super::preemption::{conf, leaf, Cluster};
use super::TestEnv;
use crate::core::queue_conf::*;

/// Queues a (`a`%), b (`b`%, maximum `b_max`%) and c (the rest), the monitor on (no
/// minimum runtime), and `nodes` nodes of 2 GB.
fn cluster(a: f64, b: f64, b_max: f64, nodes: usize, monitor: bool) -> (TestEnv, Vec<NodeId>) {
    let mut qb = leaf("root.b", b);
    qb.max_capacity = MaxCapacitySpec::Percent(b_max);
    let mut c = conf(
        vec![leaf("root.a", a), qb, leaf("root.c", 100.0 - a - b)],
        0,
    );
    c.preemption.enabled = monitor;
    let mut env = TestEnv::with_conf(c);
    let ids = (0..nodes)
        .map(|i| env.add_node(&format!("n{i}"), 1, 2048, 8))
        .collect();
    (env, ids)
}

/// The scenario: two 2 GB nodes, a (60%) and b (30%, maximum 50%).
fn scenario() -> (TestEnv, Vec<NodeId>) {
    cluster(60.0, 30.0, 50.0, 2, true)
}

/// Submits an AM-only application of `mem` MB to `queue` and launches what the core asks.
fn submit_am_only(env: &mut TestEnv, queue: &str, mem: i64) -> ApplicationId {
    let id = env.core.new_application();
    let mut sub = env.submission(queue);
    sub.am_resource = Resource::new(mem, 1);
    env.core.submit(id, sub, env.now).expect("submit");
    env.step();
    env.launch_all();
    id
}

/// Every node reports (live containers run, those the RM wants gone exit) and the AMs the
/// core asks for are launched.
fn nm_round(env: &mut TestEnv, nodes: &[NodeId]) {
    let mut c = Cluster {
        env: std::mem::replace(env, TestEnv::new()),
        nodes: nodes.to_vec(),
        ams: BTreeMap::new(),
    };
    c.nm_round();
    c.env.launch_all();
    *env = c.env;
}

fn run_for(env: &mut TestEnv, nodes: &[NodeId], ms: u64) {
    let mut left = ms;
    while left > 0 {
        let step = left.min(1000);
        env.advance(step);
        nm_round(env, nodes);
        left -= step;
    }
}

#[test]
fn alternating_am_only_submissions_converge_to_the_guarantees() {
    let (mut env, nodes) = scenario();
    let mut apps = Vec::new();
    for i in 0..12 {
        let q = if i % 2 == 0 { "root.a" } else { "root.b" };
        apps.push((q, submit_am_only(&mut env, q, 512)));
        nm_round(&mut env, &nodes);
    }
    run_for(&mut env, &nodes, 60_000);
    let (a, b) = (used_mb(&env, "root.a"), used_mb(&env, "root.b"));
    assert!(a * 100 >= 55 * 4096, "a holds {a} MB of 4096");
    assert!(b * 100 <= 50 * 4096, "b holds {b} MB of 4096");
    assert!(b * 100 >= 30 * 4096, "b kept its guarantee: {b} MB");
    // Whole applications of b, newest first: b's first applications kept their AMs.
    let preempted: Vec<ApplicationId> = apps
        .iter()
        .filter(|(_, id)| env.app(id).preemption.am_containers > 0)
        .map(|(_, id)| *id)
        .collect();
    assert!(!preempted.is_empty(), "an AM was taken back");
    for id in &preempted {
        assert_eq!(env.app(id).queue.to_string(), "root.b");
    }
}

#[test]
fn submissions_waiting_together_are_served_by_guarantee() {
    // Twelve AM-only applications wait, alternately a and b, before any node joins (as
    // submissions within one heartbeat do); the nodes' room goes to the most under-served
    // queue first, without the monitor.
    let (mut env, _) = cluster(60.0, 30.0, 50.0, 0, false);
    for i in 0..12 {
        submit_am_only(&mut env, if i % 2 == 0 { "root.a" } else { "root.b" }, 512);
    }
    assert_eq!(used_mb(&env, "root.a"), 0);
    let nodes = vec![
        env.add_node("n0", 1, 2048, 8),
        env.add_node("n1", 1, 2048, 8),
    ];
    nm_round(&mut env, &nodes);
    assert_eq!(used_mb(&env, "root.a"), 5 * 512, "a past its 60%");
    assert_eq!(
        used_mb(&env, "root.b"),
        3 * 512,
        "b past its 30%, within 50%"
    );
}

#[test]
fn non_am_containers_go_before_any_am() {
    // b (30%, maximum 100%) fills the cluster: an application with five workers and two
    // AM-only ones. a's one AM-only application takes a worker back, never an AM.
    let (mut env, nodes) = cluster(60.0, 30.0, 100.0, 2, true);
    let w = submit_am_only(&mut env, "root.b", 512);
    let att = env.app(&w).current_attempt().expect("an attempt").id;
    env.core
        .am_register(&att, "h".into(), 0, String::new(), env.now)
        .expect("register");
    env.step();
    env.ask(&att, 5, 512);
    let xy = [
        submit_am_only(&mut env, "root.b", 512),
        submit_am_only(&mut env, "root.b", 512),
    ];
    nm_round(&mut env, &nodes);
    assert_eq!(used_mb(&env, "root.b"), 4096);
    let a = submit_am_only(&mut env, "root.a", 512);
    run_for(&mut env, &nodes, 40_000);
    assert_eq!(used_mb(&env, "root.a"), 512, "a's AM runs");
    assert!(env
        .app(&a)
        .current_attempt()
        .is_some_and(|t| t.am_container().is_some()));
    assert_eq!(env.app(&w).preemption.containers, 1, "one worker taken");
    for id in [w].iter().chain(xy.iter()) {
        assert_eq!(
            env.app(id).preemption.am_containers,
            0,
            "no AM taken from {id}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// Over random guarantees, maxima, cluster sizes and submission orders of AM-only
    /// applications: once the monitor has converged, a queue whose next container would
    /// start below its guarantee (and within its maximum) has no other queue that could give one (over its guarantee
    /// outside the dead zone, and staying at or above it); and a queue that lost an AM is
    /// at or above its guarantee.
    #[test]
    fn the_monitor_converges_to_the_guarantees(
        nodes in 2usize..4,
        (ga, gb) in prop::sample::select(vec![(60.0f64, 30.0f64), (50.0, 40.0), (70.0, 20.0), (30.0, 60.0)]),
        b_max in prop::sample::select(vec![50.0f64, 75.0, 100.0]),
        order in prop::collection::vec(any::<bool>(), 4..20),
    ) {
        let (mut env, ids) = cluster(ga, gb, b_max, nodes, true);
        let mut apps = Vec::new();
        for to_a in &order {
            let q = if *to_a { "root.a" } else { "root.b" };
            apps.push((q, submit_am_only(&mut env, q, 512)));
            nm_round(&mut env, &ids);
        }
        run_for(&mut env, &ids, 180_000);
        let total = nodes as f64 * 2048.0;
        let unit = 512.0;
        let guar = |q: &str| if q == "root.a" { ga } else { gb } / 100.0 * total;
        let max = |q: &str| if q == "root.a" { 100.0 } else { b_max } / 100.0 * total;
        let waits = |q: &str| apps.iter().any(|(aq, id)| {
            *aq == q && env.app(id).current_attempt().is_some_and(|t| t.am_container().is_none())
        });
        for (q, other) in [("root.a", "root.b"), ("root.b", "root.a")] {
            let used = used_mb(&env, q) as f64;
            let other_used = used_mb(&env, other) as f64;
            if waits(q) && used < guar(q) - 1e-6 && used + unit <= max(q) + 1e-6 {
                let could_give = other_used > guar(other) * 1.1 + 1e-6
                    && other_used - unit >= guar(other) - 1e-6;
                prop_assert!(!could_give,
                    "{q} holds {used} of {total} under its guarantee {} while {other} holds {other_used}",
                    guar(q));
            }
            let lost_am = apps.iter().any(|(aq, id)| *aq == q && env.app(id).preemption.am_containers > 0);
            if lost_am {
                prop_assert!(used >= guar(q) - 1e-6, "{q} lost an AM and holds {used} under {}", guar(q));
            }
        }
        prop_assert!(env.core.sanity_check().is_ok());
    }
}
