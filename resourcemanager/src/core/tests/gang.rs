//! Gang scheduling on the pure core: whole-or-nothing grants, tightest packing, visible
//! reservations, bounded waits, timeouts and member failures.

use std::collections::BTreeSet;

use proptest::prelude::*;
use spindle_common::resource::GPU;
use spindle_common::{ApplicationId, NodeId, Resource};

use super::TestEnv;
use crate::core::queue_conf::*;
use crate::core::scheduler::gang::{GangParams, GangPhase, GangPolicy, GangRequest};
use crate::core::scheduler::{Ask, AskKey, Placement, QueueIdx, Scheduler};
use crate::core::*;

fn sched(nodes: &[(&str, &str, i64)]) -> Scheduler {
    let mut conf = SchedulerConf::single_default_queue();
    conf.root.children[0].user_limit_factor = -1.0;
    conf.root.children[0].max_am_resource_percent = 1.0;
    let mut s = Scheduler::new(conf, Resource::new(128, 1));
    for (name, rack, gpus) in nodes {
        s.add_node(
            NodeId::new(*name, 1),
            rack.to_string(),
            Resource::new(262144, 64).with(GPU, *gpus),
            Resource::zero(),
        );
    }
    s
}

fn app(n: u32) -> ApplicationId {
    ApplicationId::new(9, n)
}

fn leaf(s: &Scheduler) -> QueueIdx {
    s.tree().leaf("default").expect("leaf")
}

fn gpu_unit(g: i64) -> Resource {
    Resource::new(1024, 1).with(GPU, g)
}

fn params(policy: GangPolicy, max_nodes: u32) -> GangParams {
    GangParams {
        policy,
        max_nodes,
        timeout_ms: 0,
        hard: false,
        ..Default::default()
    }
}

fn ask_gang(
    s: &mut Scheduler,
    a: ApplicationId,
    id: &str,
    n: u32,
    cap: Resource,
    p: GangParams,
    now: u64,
) {
    s.set_gang(&a, id, p, now);
    let mut ask = Ask::new(cap, n);
    ask.gang = Some(id.into());
    s.set_ask(
        &a,
        AskKey {
            priority: 1,
            allocation_request_id: 7,
        },
        ask,
    );
}

/// Occupies `gpus` GPUs of `node` with a 1-GPU-per-container filler app.
fn occupy(s: &mut Scheduler, filler: ApplicationId, node: &str, gpus: i64) {
    for _ in 0..gpus {
        s.charge(&filler, &NodeId::new(node, 1), &gpu_unit(1));
    }
}

fn nodes_of(p: &[Placement]) -> BTreeSet<String> {
    p.iter().map(|x| x.node.host.clone()).collect()
}

#[test]
fn an_8_gpu_gang_lands_on_one_node_whenever_one_has_8_free() {
    let mut s = sched(&[("a", "/r1", 8), ("b", "/r1", 8), ("c", "/r2", 8)]);
    let l = leaf(&s);
    s.add_app(app(1), l, "filler", 0, 1, Resource::new(128, 1));
    occupy(&mut s, app(1), "a", 3);
    occupy(&mut s, app(1), "b", 2);
    s.add_app(app(2), l, "u", 0, 2, Resource::new(128, 1));
    ask_gang(
        &mut s,
        app(2),
        "g",
        8,
        gpu_unit(1),
        params(GangPolicy::Pack, 0),
        0,
    );
    let p = s.schedule();
    assert_eq!(p.len(), 8);
    assert_eq!(nodes_of(&p), ["c".to_string()].into());
    // A 4-GPU gang takes the node with exactly the room it needs and keeps whole ones whole.
    let mut s = sched(&[("a", "/r1", 8), ("b", "/r1", 8)]);
    let l = leaf(&s);
    s.add_app(app(1), l, "filler", 0, 1, Resource::new(128, 1));
    occupy(&mut s, app(1), "b", 4);
    s.add_app(app(2), l, "u", 0, 2, Resource::new(128, 1));
    ask_gang(
        &mut s,
        app(2),
        "g",
        4,
        gpu_unit(1),
        params(GangPolicy::Pack, 0),
        0,
    );
    let p = s.schedule();
    assert_eq!(
        nodes_of(&p),
        ["b".to_string()].into(),
        "best fit keeps node a's 8 GPUs whole"
    );
    assert!(s.check().is_ok());
}

#[test]
fn a_gang_that_cannot_fit_holds_nothing_but_its_visible_reservation() {
    let mut s = sched(&[("a", "/r1", 8), ("b", "/r1", 8)]);
    let l = leaf(&s);
    s.add_app(app(1), l, "filler", 0, 1, Resource::new(128, 1));
    occupy(&mut s, app(1), "a", 6);
    s.add_app(app(2), l, "u", 0, 2, Resource::new(128, 1));
    ask_gang(
        &mut s,
        app(2),
        "g",
        12,
        gpu_unit(1),
        params(GangPolicy::Pack, 2),
        0,
    );
    assert!(s.schedule().is_empty(), "no part of the gang is placed");
    assert!(s.app(&app(2)).expect("app").used.is_zero());
    let g = s.gang(&app(2), "g").expect("gang");
    assert_eq!(g.phase, GangPhase::Reserved);
    assert_eq!(g.reserved.len(), 2);
    assert!(g.diagnostics.contains("needs 12 GPUs"), "{}", g.diagnostics);
    assert!(
        g.diagnostics.contains("on at most 2 nodes"),
        "{}",
        g.diagnostics
    );
    assert!(
        g.diagnostics.contains("the best fit now is 10 of 12"),
        "{}",
        g.diagnostics
    );
    assert!(
        g.diagnostics.contains("reserved nodes a:1, b:1"),
        "{}",
        g.diagnostics
    );
    // Others may not use the reserved nodes.
    s.add_app(app(3), l, "v", 0, 3, Resource::new(128, 1));
    s.set_ask(
        &app(3),
        AskKey {
            priority: 1,
            allocation_request_id: 0,
        },
        Ask::new(gpu_unit(1), 1),
    );
    assert!(s.schedule().is_empty());
    assert_eq!(
        s.tree().queues[l].reserved.get(GPU),
        12,
        "the reservation counts against the queue"
    );
    // As node a drains, the gang is placed whole.
    for _ in 0..4 {
        s.release(&app(1), &NodeId::new("a", 1), &gpu_unit(1));
    }
    let p = s.schedule();
    let gang: Vec<&Placement> = p.iter().filter(|x| x.gang.is_some()).collect();
    assert_eq!(gang.len(), 12, "whole gang at once");
    assert_eq!(
        s.gang(&app(2), "g").map(|g| g.phase),
        Some(GangPhase::Allocated)
    );
    assert!(s.tree().queues[l].reserved.is_zero());
    assert!(s.check().is_ok());
}

#[test]
fn policies_spread_strict_pack_same_rack_and_max_nodes() {
    let mut s = sched(&[
        ("a", "/r1", 8),
        ("b", "/r1", 8),
        ("c", "/r2", 8),
        ("d", "/r2", 8),
    ]);
    let l = leaf(&s);
    s.add_app(app(1), l, "u", 0, 1, Resource::new(128, 1));
    ask_gang(
        &mut s,
        app(1),
        "spread",
        4,
        gpu_unit(1),
        params(GangPolicy::Spread, 0),
        0,
    );
    let p = s.schedule();
    assert_eq!(nodes_of(&p).len(), 4, "one member per node");
    let mut s = sched(&[
        ("a", "/r1", 8),
        ("b", "/r1", 8),
        ("c", "/r2", 8),
        ("d", "/r2", 8),
    ]);
    let l = leaf(&s);
    s.add_app(app(1), l, "u", 0, 1, Resource::new(128, 1));
    ask_gang(
        &mut s,
        app(1),
        "strict",
        9,
        gpu_unit(1),
        params(GangPolicy::StrictPack, 0),
        0,
    );
    assert!(
        s.schedule().is_empty(),
        "9 GPUs never fit on one 8-GPU node"
    );
    let mut s = sched(&[
        ("a", "/r1", 8),
        ("b", "/r1", 4),
        ("c", "/r2", 8),
        ("d", "/r2", 8),
    ]);
    let l = leaf(&s);
    s.add_app(app(1), l, "u", 0, 1, Resource::new(128, 1));
    ask_gang(
        &mut s,
        app(1),
        "rack",
        16,
        gpu_unit(1),
        params(GangPolicy::SameRack, 0),
        0,
    );
    let p = s.schedule();
    let racks: BTreeSet<String> = p
        .iter()
        .map(|x| s.node(&x.node).map(|n| n.rack.clone()).unwrap_or_default())
        .collect();
    assert_eq!(p.len(), 16);
    assert_eq!(
        racks,
        ["/r2".to_string()].into(),
        "rack r1 has only 12 GPUs"
    );
}

#[test]
fn a_gang_can_ask_for_one_gpu_model() {
    let mut s = sched(&[("a", "/r", 8), ("b", "/r", 8), ("c", "/r", 8)]);
    s.set_gpu_model(&NodeId::new("a", 1), Some("NVIDIA H100 80GB HBM3".into()));
    s.set_gpu_model(&NodeId::new("b", 1), Some("Tesla V100-SXM2-16GB".into()));
    s.set_gpu_model(&NodeId::new("c", 1), Some("Tesla V100-SXM2-16GB".into()));
    let l = leaf(&s);
    s.add_app(app(1), l, "u", 0, 1, Resource::new(128, 1));
    let one_model = GangParams {
        same_gpu_model: true,
        ..Default::default()
    };
    ask_gang(&mut s, app(1), "same", 12, gpu_unit(1), one_model, 0);
    let p = s.schedule();
    assert_eq!(p.len(), 12);
    assert_eq!(
        nodes_of(&p),
        ["b".to_string(), "c".to_string()].into(),
        "12 GPUs of one model: only the V100s have them"
    );
    s.add_app(app(2), l, "u", 0, 2, Resource::new(128, 1));
    let h100 = GangParams {
        gpu_model: Some("NVIDIA H100 80GB HBM3".into()),
        ..Default::default()
    };
    ask_gang(&mut s, app(2), "h100", 4, gpu_unit(1), h100.clone(), 0);
    let p = s.schedule();
    assert_eq!(nodes_of(&p), ["a".to_string()].into());
    // No A100 anywhere: the gang waits and says what it wants.
    s.add_app(app(3), l, "u", 0, 3, Resource::new(128, 1));
    let a100 = GangParams {
        gpu_model: Some("NVIDIA A100".into()),
        ..Default::default()
    };
    ask_gang(&mut s, app(3), "a100", 1, gpu_unit(1), a100, 0);
    assert!(s.schedule().is_empty());
    let g = s.gang(&app(3), "a100").expect("gang");
    assert!(
        g.diagnostics.contains("GPU model NVIDIA A100"),
        "{}",
        g.diagnostics
    );
    assert!(s.check().is_ok());
}

#[test]
fn a_large_gang_behind_a_stream_of_small_jobs_starts_within_one_job_duration() {
    // 4 nodes x 8 GPUs, kept full by a stream of 1-GPU jobs that each run DURATION steps.
    // A 32-GPU gang arrives; the bound is DURATION steps: its reservation keeps new small
    // jobs off its nodes, and every running job ends within DURATION.
    const DURATION: u64 = 10;
    let mut s = sched(&[
        ("a", "/r", 8),
        ("b", "/r", 8),
        ("c", "/r", 8),
        ("d", "/r", 8),
    ]);
    let l = leaf(&s);
    s.add_app(app(1), l, "stream", 0, 1, Resource::new(128, 1));
    let key = AskKey {
        priority: 1,
        allocation_request_id: 0,
    };
    let mut running: Vec<(u64, NodeId)> = Vec::new();
    let mut gang_start = None;
    let arrival = 25;
    for step in 0..200u64 {
        // Jobs that are done end; the stream always wants more.
        let (done, keep): (Vec<_>, Vec<_>) =
            running.into_iter().partition(|(t, _)| step >= t + DURATION);
        running = keep;
        for (_, n) in done {
            s.release(&app(1), &n, &gpu_unit(1));
        }
        s.set_ask(&app(1), key, Ask::new(gpu_unit(1), 3));
        if step == arrival {
            s.add_app(app(2), l, "trainer", 0, 2, Resource::new(128, 1));
            ask_gang(
                &mut s,
                app(2),
                "big",
                32,
                gpu_unit(1),
                params(GangPolicy::Pack, 0),
                step,
            );
        }
        for p in s.schedule() {
            if p.gang.is_some() {
                gang_start.get_or_insert(step);
            } else {
                running.push((step, p.node.clone()));
            }
        }
        assert!(s.check().is_ok());
        if gang_start.is_some() {
            break;
        }
    }
    let started = gang_start.expect("the gang started");
    assert!(
        started - arrival <= DURATION,
        "gang waited {} steps, bound {DURATION}",
        started - arrival
    );
}

#[test]
fn the_timeout_reaches_the_am_and_a_hard_one_fails_the_application() {
    for hard in [false, true] {
        let mut env = TestEnv::new();
        let n = env.add_node("h1", 1, 8192, 8);
        let app = env.submit("default");
        let (att, am) = env.launch_all()[0];
        env.heartbeat(&n, vec![TestEnv::running(am)]);
        env.core
            .am_register(&att, "h".into(), 0, String::new(), env.now)
            .expect("register");
        let gang = AskUpdate {
            image: None,
            cpu: None,
            label: None,
            tags: Vec::new(),
            constraint: None,
            priority: 1,
            allocation_request_id: 1,
            resource_name: "*".into(),
            // The whole node: it fits the cluster (a gang that never could is refused at
            // once), but not beside the AM, so it waits for its timeout.
            capability: Resource::new(4096, 4),
            num_containers: 2,
            relax_locality: true,
            gang: Some((
                "g".into(),
                GangRequest {
                    policy: GangPolicy::Pack,
                    max_nodes: 0,
                    timeout_ms: 1000,
                    hard,
                    ..Default::default()
                },
            )),
        };
        let r = env
            .core
            .am_allocate(&att, 0, vec![gang], vec![], 0.0, env.now)
            .expect("ask");
        env.step();
        assert!(r.allocated.is_empty());
        assert!(
            matches!(r.gangs[0].phase, GangPhase::Reserved | GangPhase::Pending),
            "{:?}",
            r.gangs
        );
        assert!(
            env.app(&app).diagnostics.contains("Gang g is waiting"),
            "{}",
            env.app(&app).diagnostics
        );
        env.advance(1500);
        if hard {
            assert_eq!(env.app(&app).state, AppState::FAILED);
            assert!(
                env.app(&app).diagnostics.contains("timed out"),
                "{}",
                env.app(&app).diagnostics
            );
        } else {
            let r = env
                .core
                .am_allocate(&att, 1, vec![], vec![], 0.0, env.now)
                .expect("poll");
            assert_eq!(r.gangs[0].phase, GangPhase::TimedOut);
            assert!(r.gangs[0].diagnostics.contains("timed out after 1000 ms"));
            assert_eq!(
                env.core.scheduler().pending().0,
                0,
                "the asks were withdrawn"
            );
        }
    }
}

#[test]
fn a_failed_member_is_reported_with_its_gang() {
    let mut env = TestEnv::new();
    let n = env.add_node("h1", 1, 16384, 16);
    env.submit("default");
    let (att, am) = env.launch_all()[0];
    env.heartbeat(&n, vec![TestEnv::running(am)]);
    env.core
        .am_register(&att, "h".into(), 0, String::new(), env.now)
        .expect("register");
    let gang = AskUpdate {
        image: None,
        cpu: None,
        label: None,
        tags: Vec::new(),
        constraint: None,
        priority: 1,
        allocation_request_id: 1,
        resource_name: "*".into(),
        capability: Resource::new(1024, 1),
        num_containers: 4,
        relax_locality: true,
        gang: Some((
            "g".into(),
            GangRequest {
                policy: GangPolicy::Pack,
                max_nodes: 0,
                timeout_ms: 0,
                hard: false,
                ..Default::default()
            },
        )),
    };
    let r = env
        .core
        .am_allocate(&att, 0, vec![gang], vec![], 0.0, env.now)
        .expect("ask");
    env.step();
    assert_eq!(r.allocated.len(), 4, "granted whole in the same call");
    assert_eq!(r.gangs[0].phase, GangPhase::Allocated);
    let victim = r.allocated[0].id;
    env.heartbeat(&n, vec![TestEnv::running(am), TestEnv::done(victim, 1)]);
    let r = env
        .core
        .am_allocate(&att, 1, vec![], vec![], 0.0, env.now)
        .expect("poll");
    assert_eq!(r.gangs[0].phase, GangPhase::Failed);
    assert_eq!(r.gangs[0].failed_containers, vec![victim]);
    assert_eq!(r.completed[0].gang_id.as_deref(), Some("g"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A gang that fits is placed on the fewest nodes that can hold it (uniform 1-GPU
    /// members, GPUs the only constraint), whole, and no node is over-allocated.
    #[test]
    fn a_fitting_gang_takes_the_fewest_nodes(used in proptest::collection::vec(0i64..=8, 2..8), k in 1u32..40) {
        let names: Vec<String> = (0..used.len()).map(|i| format!("n{i}")).collect();
        let spec: Vec<(&str, &str, i64)> = names.iter().map(|n| (n.as_str(), "/r", 8)).collect();
        let mut s = sched(&spec);
        let l = leaf(&s);
        s.add_app(app(1), l, "filler", 0, 1, Resource::new(128, 1));
        for (n, u) in names.iter().zip(&used) {
            occupy(&mut s, app(1), n, *u);
        }
        let mut free: Vec<i64> = used.iter().map(|u| 8 - u).collect();
        free.sort_unstable_by(|a, b| b.cmp(a));
        let total: i64 = free.iter().sum();
        s.add_app(app(2), l, "u", 0, 2, Resource::new(128, 1));
        ask_gang(&mut s, app(2), "g", k, gpu_unit(1), params(GangPolicy::Pack, 0), 0);
        let p = s.schedule();
        prop_assert!(s.check().is_ok());
        if i64::from(k) <= total {
            prop_assert_eq!(p.len() as u32, k, "whole");
            let mut acc = 0;
            let mut fewest = 0;
            for f in &free {
                if acc >= i64::from(k) { break; }
                acc += f;
                fewest += 1;
            }
            prop_assert_eq!(nodes_of(&p).len(), fewest);
        } else {
            prop_assert!(p.is_empty(), "absent");
        }
    }

    /// Through random gangs, single asks and releases, every gang is whole or absent after
    /// every pass, and the scheduler's invariants hold.
    #[test]
    fn gangs_are_whole_or_absent(ops in proptest::collection::vec((0u8..3, 1u32..20, 0usize..4), 1..30)) {
        let mut s = sched(&[("a", "/r1", 8), ("b", "/r1", 8), ("c", "/r2", 8)]);
        let l = leaf(&s);
        for i in 1..=3 {
            s.add_app(app(i), l, &format!("u{i}"), 0, u64::from(i), Resource::new(128, 1));
        }
        let mut live: Vec<Placement> = vec![];
        for (step, (kind, n, pol)) in ops.iter().enumerate() {
            let a = app(1 + (step as u32 % 3));
            match kind {
                0 => {
                    let policy = [GangPolicy::Pack, GangPolicy::StrictPack, GangPolicy::Spread, GangPolicy::SameRack][*pol];
                    let id = format!("g{step}");
                    ask_gang(&mut s, a, &id, *n, gpu_unit(1), params(policy, 0), step as u64);
                }
                1 => s.set_ask(&a, AskKey { priority: 2, allocation_request_id: 0 }, Ask::new(gpu_unit(1), *n)),
                _ => {
                    for _ in 0..(*n as usize).min(live.len()) {
                        let p = live.remove(0);
                        s.release(&p.app, &p.node, &p.resource);
                    }
                }
            }
            let placed = s.schedule();
            let mut per_gang: std::collections::BTreeMap<(ApplicationId, String), u32> = Default::default();
            for p in &placed {
                if let Some(g) = &p.gang {
                    *per_gang.entry((p.app, g.clone())).or_default() += 1;
                }
            }
            for ((a, g), count) in per_gang {
                let gang = s.gang(&a, &g).expect("gang");
                prop_assert_eq!(gang.size, count, "gang {} of {} placed partly", g, a);
                prop_assert!(s.app(&a).is_some_and(|x| !x.asks.values().any(|k| k.gang.as_deref() == Some(g.as_str()))), "no member left asking");
            }
            live.extend(placed);
            prop_assert!(s.check().is_ok(), "{:?}", s.check());
        }
    }
}

#[test]
fn under_fair_ordering_a_reserved_gang_starts_when_its_node_drains() {
    for ordering in [OrderingPolicy::Fifo, OrderingPolicy::Fair] {
        let mut conf = SchedulerConf::single_default_queue();
        conf.root.children[0].user_limit_factor = -1.0;
        conf.root.children[0].max_am_resource_percent = 1.0;
        conf.root.children[0].ordering = ordering;
        let mut s = Scheduler::new(conf, Resource::new(128, 1));
        s.add_node(
            NodeId::new("a", 1),
            "/r".into(),
            Resource::new(262144, 64).with(GPU, 8),
            Resource::zero(),
        );
        let l = leaf(&s);
        s.add_app(app(1), l, "u", 0, 1, Resource::new(128, 1));
        occupy(&mut s, app(1), "a", 8);
        s.add_app(app(2), l, "u", 0, 2, Resource::new(128, 1));
        ask_gang(
            &mut s,
            app(2),
            "g",
            8,
            gpu_unit(1),
            params(GangPolicy::Pack, 0),
            0,
        );
        // A later application waits with a plain ask.
        s.add_app(app(3), l, "u", 0, 3, Resource::new(128, 1));
        s.set_ask(
            &app(3),
            AskKey {
                priority: 1,
                allocation_request_id: 0,
            },
            Ask::new(gpu_unit(1), 1),
        );
        assert!(s.schedule().is_empty(), "{ordering:?}: the node is full");
        for _ in 0..8 {
            s.release(&app(1), &NodeId::new("a", 1), &gpu_unit(1));
        }
        let placed = s.schedule();
        assert_eq!(
            placed.iter().filter(|p| p.gang.is_some()).count(),
            8,
            "{ordering:?}: the gang gets its drained node: {placed:?}"
        );
        assert!(s.check().is_ok());
    }
}

#[test]
fn gangs_of_two_applications_with_the_same_id_are_both_tried() {
    // Gang ids belong to their application: app 1's "g" not fitting must not keep app 2's
    // "g" from being placed in the same pass.
    let mut s = sched(&[("a", "/r", 8)]);
    let l = leaf(&s);
    s.add_app(app(1), l, "u", 0, 1, Resource::new(128, 1));
    ask_gang(
        &mut s,
        app(1),
        "g",
        16,
        gpu_unit(1),
        params(GangPolicy::Pack, 0),
        0,
    );
    s.add_app(app(2), l, "u", 0, 2, Resource::new(128, 1));
    ask_gang(
        &mut s,
        app(2),
        "g",
        4,
        gpu_unit(1),
        params(GangPolicy::Pack, 0),
        0,
    );
    let placed = s.schedule();
    assert_eq!(placed.len(), 4, "{placed:?}");
    assert!(placed.iter().all(|p| p.app == app(2)));
    assert!(s.check().is_ok());
}

#[test]
fn only_the_first_waiting_gang_of_a_leaf_holds_nodes_by_default() {
    // Three 8-GPU nodes, each half full. Two 8-GPU gangs wait: the first holds one node;
    // the second holds none, so a 4-GPU ask still finds room on a node nobody holds.
    let mut s = sched(&[("a", "/r", 8), ("b", "/r", 8), ("c", "/r", 8)]);
    let l = leaf(&s);
    s.add_app(app(1), l, "u", 0, 1, Resource::new(128, 1));
    for n in ["a", "b", "c"] {
        occupy(&mut s, app(1), n, 4);
    }
    s.add_app(app(2), l, "u", 0, 2, Resource::new(128, 1));
    ask_gang(
        &mut s,
        app(2),
        "g",
        8,
        gpu_unit(1),
        params(GangPolicy::StrictPack, 0),
        0,
    );
    s.add_app(app(3), l, "u", 0, 3, Resource::new(128, 1));
    ask_gang(
        &mut s,
        app(3),
        "g",
        8,
        gpu_unit(1),
        params(GangPolicy::StrictPack, 0),
        0,
    );
    assert!(s.schedule().is_empty());
    let holders: BTreeSet<ApplicationId> = s.nodes().reservations().values().map(|h| h.0).collect();
    assert_eq!(
        holders,
        BTreeSet::from([app(2)]),
        "only the first gang holds"
    );
    s.add_app(app(4), l, "u", 0, 4, Resource::new(128, 1));
    s.set_ask(
        &app(4),
        AskKey {
            priority: 1,
            allocation_request_id: 0,
        },
        Ask::new(gpu_unit(4), 1),
    );
    let placed = s.schedule();
    assert_eq!(placed.len(), 1, "{placed:?}");
    assert_eq!(placed[0].app, app(4));
    assert!(s.check().is_ok());
}

#[test]
fn a_granted_gang_records_how_long_it_waited() {
    let mut s = sched(&[("a", "/r1", 4)]);
    let l = leaf(&s);
    s.add_app(app(1), l, "filler", 0, 1, Resource::new(128, 1));
    occupy(&mut s, app(1), "a", 4);
    s.add_app(app(2), l, "u", 0, 2, Resource::new(128, 1));
    s.set_now(1_000);
    ask_gang(
        &mut s,
        app(2),
        "g",
        4,
        gpu_unit(1),
        params(GangPolicy::Pack, 0),
        1_000,
    );
    assert!(s.schedule().is_empty());
    assert!(s.stats.gang_waits_ms.is_empty(), "nothing granted yet");
    for _ in 0..4 {
        s.release(&app(1), &NodeId::new("a", 1), &gpu_unit(1));
    }
    s.set_now(6_500);
    assert_eq!(s.schedule().len(), 4);
    assert_eq!(
        s.stats.gang_waits_ms,
        vec![5_500],
        "from its ask to its grant"
    );
    assert!(s.check().is_ok());
}
