//! The AM resource limit against YARN's formula (`LeafQueue.getAMResourceLimitPerPartition`),
//! and gangs that can never be granted refused when they are asked for.

use proptest::prelude::*;
use spindle_common::resource::GPU;
use spindle_common::{ApplicationId, ContainerId, NodeId, Resource};

use super::{qp, TestEnv};
use crate::core::queue_conf::*;
use crate::core::scheduler::feasible::NeverFits;
use crate::core::scheduler::gang::GangRequest;
use crate::core::scheduler::{QueueIdx, Scheduler};
use crate::core::*;

fn leaf(path: &str, pct: f64, max: f64) -> QueueSpec {
    let mut q = QueueSpec::new(qp(path), CapacitySpec::Percent(pct));
    q.max_capacity = MaxCapacitySpec::Percent(max);
    q.max_am_resource_percent = 0.1;
    q
}

fn conf(children: Vec<QueueSpec>, calc: Calculator, min: Resource) -> CoreConfig {
    let mut c = CoreConfig::for_tests();
    let mut root = QueueSpec::new(qp("root"), CapacitySpec::Percent(100.0));
    root.children = children;
    c.scheduler.root = root;
    c.scheduler.calculator = calc;
    c.min_allocation = min;
    c.max_allocation = Resource::new(16384, 16).with(GPU, 8);
    c
}

fn add_gpu_node(env: &mut TestEnv, host: &str, mem: i64, vcores: i64, gpus: i64) -> NodeId {
    let id = NodeId::new(host, 1);
    env.core.register_node(
        NodeRegistration {
            id: id.clone(),
            http_address: format!("{host}:1"),
            rack: "/default-rack".into(),
            total: Resource::new(mem, vcores).with(GPU, gpus),
            version: "test".into(),
            containers: vec![],
            attributes: Default::default(),
        },
        env.now,
    );
    env.step();
    id
}

fn am_limit(env: &TestEnv, path: &str) -> Resource {
    let s = env.core.scheduler();
    s.am_limit(s.tree().leaf(path).expect("leaf"))
}

/// YARN's formula, written out independently of the scheduler, for a two-level tree
/// (root with leaves) in the default partition: the leaf's current limit is
/// min(max, cluster - root used + leaf used) rounded down to the step; the usable base is
/// the current limit when the guarantee fits in it (by the calculator), else the guarantee;
/// the limit is base x percent, each type rounded up to the step.
#[allow(clippy::too_many_arguments)]
fn yarn_am_limit(
    calc: Calculator,
    cluster: &Resource,
    root_used: &Resource,
    leaf_used: &Resource,
    guarantee: &Resource,
    max: &Resource,
    pct: f64,
    step: &Resource,
) -> Resource {
    let mut out = Resource::zero();
    let mut current = Resource::zero();
    for (k, c) in cluster.entries() {
        let s = step.get(k);
        let avail = (c - root_used.get(k) + leaf_used.get(k)).max(0);
        let avail = if s > 0 { avail / s * s } else { avail };
        current.set(k, avail.min(max.get(k)));
    }
    let fits = match calc {
        Calculator::Memory => guarantee.memory_mb <= current.memory_mb,
        Calculator::Dominant => guarantee.fits_in(&current),
    };
    let base = if fits { current } else { guarantee.clone() };
    for (k, v) in base.entries() {
        let x = (v as f64 * pct).ceil() as i64;
        let s = step.get(k);
        out.set(k, if s > 0 { (x + s - 1) / s * s } else { x });
    }
    out
}

#[test]
fn the_limit_is_yarns_on_the_readme_cluster() {
    // Two NMs of 16 GB / 16 vcores, two queues of 50% (maximum 100%), 10% for AMs, DRF,
    // minimum allocation 1024 MB / 1 vcore: the case the README's cluster is.
    let min = Resource::new(1024, 1);
    let c = conf(
        vec![leaf("root.a", 50.0, 100.0), leaf("root.b", 50.0, 100.0)],
        Calculator::Dominant,
        min.clone(),
    );
    let mut env = TestEnv::with_conf(c);
    env.add_node("h0", 1, 16384, 16);
    env.add_node("h1", 1, 16384, 16);
    // Idle: the current limit is the whole cluster (32 GB, 32 vcores); 10% = 3276.8 MB and
    // 3.2 vcores, normalized up: 4096 MB and 4 vcores. (The old formula took 10% of the
    // 16 GB guarantee and rounded vcores down: 1638 MB and 1 vcore, one AM at a time.)
    assert_eq!(am_limit(&env, "root.a"), Resource::new(4096, 4));
    assert_eq!(am_limit(&env, "root.b"), Resource::new(4096, 4));
}

#[test]
fn several_ams_start_on_an_idle_two_queue_cluster() {
    let min = Resource::new(1024, 1);
    let c = conf(
        vec![leaf("root.a", 50.0, 100.0), leaf("root.b", 50.0, 100.0)],
        Calculator::Dominant,
        min,
    );
    let mut env = TestEnv::with_conf(c);
    env.add_node("h0", 1, 16384, 16);
    env.add_node("h1", 1, 16384, 16);
    let a: Vec<ApplicationId> = (0..5).map(|_| env.submit("a")).collect();
    let b: Vec<ApplicationId> = (0..2).map(|_| env.submit("b")).collect();
    let launched = env.launch_all();
    // Each AM is 512 MB normalized to 1024 MB and 1 vcore: four fit in a's 4096 MB / 4
    // vcores, both of b's start; the fifth of a waits, and says why.
    let started = |apps: &[ApplicationId]| {
        launched
            .iter()
            .filter(|(att, _)| apps.contains(&att.application_id))
            .count()
    };
    assert_eq!(started(&a), 4, "four AMs of queue a on an idle cluster");
    assert_eq!(started(&b), 2);
    let waiting = env.app(&a[4]);
    assert!(
        waiting.diagnostics.contains("AM resource limit exceeded"),
        "{}",
        waiting.diagnostics
    );
}

#[test]
fn the_limit_shrinks_to_the_guarantee_as_the_cluster_fills_and_waiting_ams_start_later() {
    let min = Resource::new(1024, 1);
    let mut b = leaf("root.b", 50.0, 100.0);
    b.user_limit_factor = 2.0;
    let c = conf(
        vec![leaf("root.a", 50.0, 100.0), b],
        Calculator::Memory,
        min,
    );
    let mut env = TestEnv::with_conf(c);
    env.add_node("h0", 1, 16384, 16);
    env.add_node("h1", 1, 16384, 16);
    // Queue b takes most of the cluster with one application.
    let big = env.submit("b");
    let (att, _) = env.launch_all()[0];
    env.core
        .am_register(&att, "h".into(), 0, String::new(), env.now)
        .expect("register");
    env.step();
    env.ask(&att, 28, 1024);
    env.step();
    // b's 29 GB leave a the 16 GB guarantee as its base: 1638.4 -> 2048 MB.
    assert_eq!(am_limit(&env, "root.a").memory_mb, 2048);
    // Three AMs of 512 MB (1024 normalized) for a: two fit its limit, the third waits.
    let a: Vec<ApplicationId> = (0..3).map(|_| env.submit("a")).collect();
    assert_eq!(env.launch_all().len(), 2);
    assert!(env
        .app(&a[2])
        .diagnostics
        .contains("AM resource limit exceeded"));
    // b gives back 20 GB: a's current limit (32 - 11 + 2 = 23 GB) is now above its
    // guarantee, 10% of it is 2355 -> 3072 MB, and the third AM starts at the next pass.
    let done: Vec<(ContainerId, NodeId)> = env
        .core
        .containers()
        .values()
        .filter(|c| c.is_live() && !c.is_am && c.id.application_id() == big)
        .take(20)
        .map(|c| (c.id, c.node.clone()))
        .collect();
    assert_eq!(done.len(), 20);
    for (c, n) in done {
        env.heartbeat(&n, vec![TestEnv::done(c, 0)]);
    }
    assert_eq!(am_limit(&env, "root.a").memory_mb, 3072);
    let launched = env.launch_all();
    assert_eq!(
        launched.len(),
        1,
        "the waiting AM starts once the cluster has room"
    );
    assert_eq!(launched[0].0.application_id, a[2]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    /// On any two-queue cluster and any usage, the limit is YARN's.
    #[test]
    fn the_limit_matches_yarns_formula(
        nodes in 1usize..6,
        mem_gb in 4i64..64,
        vcores in 2i64..48,
        cap_a in 1u32..99,
        max_a in 0u32..100,
        pct in 1u32..100,
        used_a in 0i64..20,
        used_b in 0i64..20,
        dominant in any::<bool>(),
        step_mb in prop::sample::select(vec![128i64, 512, 1024]),
    ) {
        let calc = if dominant { Calculator::Dominant } else { Calculator::Memory };
        let cap_a = f64::from(cap_a);
        let max_a = cap_a.max(f64::from(max_a));
        let mut a = leaf("root.a", cap_a, max_a);
        a.max_am_resource_percent = f64::from(pct) / 100.0;
        let b = leaf("root.b", 100.0 - cap_a, 100.0);
        let mut conf = conf(vec![a, b], calc, Resource::new(step_mb, 1)).scheduler;
        conf.calculator = calc;
        let step = Resource::new(step_mb, 1);
        let mut s = Scheduler::new(conf, step.clone());
        for i in 0..nodes {
            s.add_node(NodeId::new(format!("h{i}"), 1), "/r".into(),
                Resource::new(mem_gb * 1024, vcores), Resource::zero());
        }
        let la = s.tree().leaf("root.a").expect("a");
        let lb = s.tree().leaf("root.b").expect("b");
        let cluster = s.nodes().cluster.clone();
        // Charge usage that fits on the nodes, one container at a time.
        let unit = Resource::new(1024, 1);
        let (app_a, app_b) = (ApplicationId::new(1, 1), ApplicationId::new(1, 2));
        s.add_app(app_a, la, "u", 0, 1, Resource::new(step_mb, 1));
        s.add_app(app_b, lb, "u", 0, 2, Resource::new(step_mb, 1));
        for (app, n) in [(app_a, used_a), (app_b, used_b)] {
            for _ in 0..n {
                let free = s.nodes().iter().find(|x| unit.fits_in(&x.free)).map(|x| x.id.clone());
                if let Some(node) = free {
                    s.charge(&app, &node, &unit);
                }
            }
        }
        let qa = &s.tree().queues[la];
        let root_used = s.tree().queues[QueueIdx::ROOT].default_used();
        let want = yarn_am_limit(calc, &cluster, &root_used, &qa.default_used(),
            &qa.guaranteed, &qa.maximum, qa.spec.max_am_resource_percent, &step);
        prop_assert_eq!(s.am_limit(la), want);
    }
}

fn gang_ask(n: u32, cap: Resource, elastic: Option<(u32, u32)>) -> AskUpdate {
    let mut params = GangRequest::default();
    if let Some((min, max)) = elastic {
        params.elastic = Some(crate::core::scheduler::elastic_policy::ElasticSpec {
            min,
            max,
            rule: crate::core::scheduler::elastic_policy::SizeRule::Any,
            ..Default::default()
        });
    }
    AskUpdate {
        image: None,
        label: None,
        tags: Vec::new(),
        constraint: None,
        priority: 1,
        allocation_request_id: 1,
        resource_name: "*".into(),
        capability: cap,
        num_containers: n,
        relax_locality: true,
        gang: Some(("g".into(), params)),
        cpu: None,
    }
}

/// A registered AM in `queue` on a cluster of two 8-GPU nodes (queue a may use at most 50%).
fn gpu_env() -> (TestEnv, spindle_common::ApplicationAttemptId) {
    let min = Resource::new(1024, 1);
    let c = conf(
        vec![leaf("root.a", 50.0, 50.0), leaf("root.b", 50.0, 100.0)],
        Calculator::Dominant,
        min,
    );
    let mut env = TestEnv::with_conf(c);
    add_gpu_node(&mut env, "g0", 65536, 32, 8);
    add_gpu_node(&mut env, "g1", 65536, 32, 8);
    env.submit("a");
    let (att, _) = env.launch_all()[0];
    env.core
        .am_register(&att, "h".into(), 0, String::new(), env.now)
        .expect("register");
    env.step();
    (env, att)
}

fn refusal(
    env: &mut TestEnv,
    att: &spindle_common::ApplicationAttemptId,
    ask: AskUpdate,
) -> CoreError {
    let before = env
        .core
        .scheduler()
        .app(&att.application_id)
        .map(|a| a.asks.len());
    let e = env
        .core
        .am_allocate(att, 0, vec![ask], vec![], 0.0, env.now)
        .expect_err("refused");
    env.step();
    let after = env
        .core
        .scheduler()
        .app(&att.application_id)
        .map(|a| a.asks.len());
    assert_eq!(before, after, "a refused ask changes nothing");
    e
}

#[test]
fn a_gang_over_its_queue_maximum_is_refused_at_once() {
    let (mut env, att) = gpu_env();
    // Queue a may use 8 of 16 GPUs: a gang of 12 x 1 GPU can never be granted.
    let e = refusal(
        &mut env,
        &att,
        gang_ask(12, Resource::new(1024, 1).with(GPU, 1), None),
    );
    match &e {
        CoreError::GangNeverFits {
            members: 12,
            why: NeverFits::OverQueueMaximum { queue, .. },
            ..
        } => {
            assert_eq!(queue, "root.a");
        }
        other => panic!("unexpected: {other:?}"),
    }
    let msg = e.to_string();
    assert!(
        msg.contains("can never be granted") && msg.contains("root.a"),
        "{msg}"
    );
    // A gang of 8 fits in the queue's maximum and is kept.
    env.core
        .am_allocate(
            &att,
            0,
            vec![gang_ask(8, Resource::new(1024, 1).with(GPU, 1), None)],
            vec![],
            0.0,
            env.now,
        )
        .expect("8 fits");
    env.step();
}

#[test]
fn a_gang_over_the_cluster_or_with_a_shape_no_node_has_is_refused() {
    let (mut env, att) = gpu_env();
    // A member of 9 GPUs: no node has more than 8 (the maximum allocation is 8 too, so the
    // ask is refused as over it, as YARN does).
    let e = refusal(
        &mut env,
        &att,
        gang_ask(1, Resource::new(1024, 1).with(GPU, 9), None),
    );
    assert!(
        matches!(e, CoreError::OverMaximumAllocation { .. }),
        "{e:?}"
    );
    // 6 members of 12 GB: 72 GB exceed the 64 GB queue a may use.
    let e = refusal(&mut env, &att, gang_ask(6, Resource::new(12288, 1), None));
    assert!(
        matches!(
            e,
            CoreError::GangNeverFits {
                why: NeverFits::OverQueueMaximum { .. },
                ..
            }
        ),
        "{e:?}"
    );
    // An elastic gang is judged at its smallest legal size: 2..12 of 1 GPU fits (2 <= 8).
    env.core
        .am_allocate(
            &att,
            0,
            vec![gang_ask(
                12,
                Resource::new(1024, 1).with(GPU, 1),
                Some((2, 12)),
            )],
            vec![],
            0.0,
            env.now,
        )
        .expect("an elastic gang fits at its minimum");
    env.step();
}

#[test]
fn a_gang_larger_than_the_cluster_is_refused_naming_the_total() {
    let min = Resource::new(1024, 1);
    let c = conf(
        vec![leaf("root.a", 100.0, 100.0)],
        Calculator::Dominant,
        min,
    );
    let mut env = TestEnv::with_conf(c);
    add_gpu_node(&mut env, "g0", 65536, 32, 8);
    env.submit("a");
    let (att, _) = env.launch_all()[0];
    env.core
        .am_register(&att, "h".into(), 0, String::new(), env.now)
        .expect("register");
    env.step();
    let e = refusal(
        &mut env,
        &att,
        gang_ask(9, Resource::new(1024, 1).with(GPU, 1), None),
    );
    assert!(
        matches!(
            e,
            CoreError::GangNeverFits {
                why: NeverFits::OverPartition { .. },
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("the cluster has only"), "{e}");
}

#[test]
fn a_member_shape_that_no_node_has_is_refused_even_under_the_maximum_allocation() {
    // One node has the memory, the other the GPUs: 8 GB with a GPU is under the maximum
    // allocation (taken type by type) but no node can hold it.
    let min = Resource::new(1024, 1);
    let c = conf(
        vec![leaf("root.a", 100.0, 100.0)],
        Calculator::Dominant,
        min,
    );
    let mut env = TestEnv::with_conf(c);
    add_gpu_node(&mut env, "big", 16384, 16, 0);
    add_gpu_node(&mut env, "gpu", 4096, 16, 8);
    env.submit("a");
    let (att, _) = env.launch_all()[0];
    env.core
        .am_register(&att, "h".into(), 0, String::new(), env.now)
        .expect("register");
    env.step();
    let e = refusal(
        &mut env,
        &att,
        gang_ask(1, Resource::new(8192, 1).with(GPU, 1), None),
    );
    assert!(
        matches!(
            e,
            CoreError::GangNeverFits {
                why: NeverFits::NoNodeLargeEnough { .. },
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("larger than any node"), "{e}");
}
