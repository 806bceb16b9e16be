//! CPUs of GPU containers on the pure core: a ranged ask granted its minimum and sized by
//! the partition's policy, the adaptive round moving cores toward the larger predicted gain
//! (declared, reported or explored), every resize told to the AM as an RM-initiated update,
//! and, over random jobs, ranges, queue maxima and the resize interval kept after every move.

use std::collections::BTreeMap;

use proptest::prelude::*;
use spindle_common::resource::GPU;
use spindle_common::{ApplicationId, ContainerId, NodeId, Resource};

use super::preemption::{conf, leaf, Cluster};
use super::TestEnv;
use crate::core::queue_conf::MaxCapacitySpec;
use crate::core::*;

const INTERVAL: u64 = 10_000;
const RESIZE: u64 = 30_000;

/// The one set-up: queues `root.a` and `root.b` (`b_max`% at most) under `policy`, and
/// `nodes` (name, vcores, GPUs) registered.
fn cluster_of(policy: CpuPolicy, b_max: f64, nodes: &[(&str, i64, i64)]) -> Cluster {
    let b_cap = b_max.min(50.0);
    let mut a = leaf("root.a", 100.0 - b_cap);
    a.max_capacity = MaxCapacitySpec::Percent(100.0);
    let mut b = leaf("root.b", b_cap);
    b.max_capacity = MaxCapacitySpec::Percent(b_max);
    let mut c = conf(vec![a, b], 0);
    c.preemption.enabled = false;
    c.cpu = CpuConf {
        policy,
        interval_ms: INTERVAL,
        resize_interval_ms: RESIZE,
        explore_ms: 60_000,
        ..CpuConf::default()
    };
    let mut env = TestEnv::with_conf(c);
    let mut ids = Vec::new();
    for (name, vcores, gpus) in nodes {
        let id = NodeId::new(*name, 1);
        env.core.register_node(
            NodeRegistration {
                id: id.clone(),
                http_address: format!("{name}:2"),
                rack: "/r".into(),
                total: Resource::new(65536, *vcores).with(GPU, *gpus),
                version: "test".into(),
                containers: vec![],
                attributes: Default::default(),
            },
            env.now,
        );
        ids.push(id);
    }
    env.step();
    Cluster {
        env,
        nodes: ids,
        ams: BTreeMap::new(),
    }
}

/// One node of 8 GPUs and 24 CPUs (Synergy's server).
fn cluster(policy: CpuPolicy, b_max: f64) -> Cluster {
    cluster_of(policy, b_max, &[("n0", 24, 8)])
}

/// `n` containers of `vcores` vcores and `gpus` GPUs, asking `cpu` beyond that.
fn ask(n: u32, vcores: i64, gpus: i64, cpu: Option<CpuAsk>) -> AskUpdate {
    AskUpdate {
        image: None,
        label: None,
        tags: Vec::new(),
        constraint: None,
        priority: 1,
        allocation_request_id: 1,
        resource_name: "*".into(),
        capability: Resource::new(1024, vcores).with(GPU, gpus),
        num_containers: n,
        relax_locality: true,
        gang: None,
        cpu,
    }
}

/// A range or `auto` with a declared table (empty: none).
fn cpu(range: &str, table: &str) -> Option<CpuAsk> {
    Some(CpuAsk {
        vcores: VcoresAsk::parse(range).unwrap(),
        table: CpuCurve::parse(table).unwrap(),
    })
}

/// `app`'s AM asks `asks`; what the answer granted, after a step and an NM round.
fn allocate(c: &mut Cluster, app: &ApplicationId, asks: Vec<AskUpdate>) -> AllocateReply {
    let att = c.att(app);
    let r = c
        .env
        .core
        .am_allocate(&att, 0, asks, vec![], 0.1, c.env.now)
        .expect("ask");
    c.env.step();
    c.nm_round();
    r
}

/// A GPU container of `gpus` GPUs asking `range` vcores, with a declared table.
fn ranged(
    c: &mut Cluster,
    app: &ApplicationId,
    gpus: i64,
    range: &str,
    table: &str,
) -> ContainerId {
    try_ranged(c, app, gpus, range, table).expect("granted at once")
}

fn try_ranged(
    c: &mut Cluster,
    app: &ApplicationId,
    gpus: i64,
    range: &str,
    table: &str,
) -> Option<ContainerId> {
    let r = allocate(c, app, vec![ask(1, 1, gpus, cpu(range, table))]);
    r.allocated.first().map(|a| a.id)
}

fn vcores(c: &Cluster, id: &ContainerId) -> i64 {
    c.env.core.containers()[id].resource.vcores
}

const ALEXNET: &str = "1:40;3:100;6:200;9:260;12:294";
const LSTM: &str = "1:100;3:100;12:100";

#[test]
fn a_range_is_granted_at_the_policys_size_within_it() {
    for (policy, range, want) in [
        (CpuPolicy::Proportional, "2..16", 12),
        (CpuPolicy::Proportional, "2..8", 8),
        (CpuPolicy::Static { cpus_per_gpu: 2 }, "2..16", 8),
        (CpuPolicy::Adaptive, "14..20", 14),
    ] {
        let mut c = cluster(policy, 100.0);
        let a = c.start("root.a", "u", 0);
        let r = allocate(&mut c, &a, vec![ask(1, 1, 4, cpu(range, ""))]);
        // The AM gets it at its size, version 0: no update to hear of.
        let got = r.allocated[0].clone();
        assert_eq!(got.resource.vcores, want, "{policy:?} {range}");
        assert_eq!(got.version, 0);
        assert_eq!(got.resource.memory_mb, 1024, "memory never changes");
        assert!(c.poll(&a, AmReport::default()).updated.is_empty());
        if policy != CpuPolicy::Adaptive {
            // Nothing moves later under a non-adaptive policy.
            c.run_for(5 * RESIZE);
            assert_eq!(vcores(&c, &got.id), want);
        }
    }
}

#[test]
fn a_resize_of_a_running_container_is_told_to_its_am_with_a_new_version() {
    let mut c = cluster(CpuPolicy::Adaptive, 100.0);
    let a = c.start("root.a", "u", 0);
    let b = c.start("root.a", "v", 0);
    let fast = ranged(&mut c, &a, 4, "4..40", ALEXNET);
    ranged(&mut c, &b, 4, "4..40", LSTM);
    c.run_for(INTERVAL + 1);
    let r = c.poll(&a, AmReport::default());
    let u = r
        .updated
        .iter()
        .find(|u| u.allocation.id == fast)
        .expect("told");
    assert_eq!(u.kind, UpdateKind::IncreaseResource);
    assert_eq!(u.version, 1);
    assert_eq!(u.allocation.resource.vcores, vcores(&c, &fast));
    assert_eq!(u.allocation.resource.memory_mb, 1024);
}

#[test]
fn a_fixed_ask_is_never_resized() {
    let mut c = cluster(CpuPolicy::Adaptive, 100.0);
    let a = c.start("root.a", "u", 0);
    let r = c.gang(&a, "g", 1, 4);
    let id = r.allocated[0].id;
    c.run_for(5 * RESIZE);
    assert_eq!(vcores(&c, &id), 1);
    assert_eq!(c.env.core.cpu().counters.resizes, 0);
}

/// Under `adaptive`, AlexNet (`root.a`) beside a language model (in `flat_queue`), 4 GPUs
/// each, after three resize intervals of rounds: the cluster, the language model's
/// application, AlexNet's container and the language model's.
fn alexnet_beside_lstm(
    flat_queue: &str,
    b_max: f64,
) -> (Cluster, ApplicationId, ContainerId, ContainerId) {
    let mut c = cluster(CpuPolicy::Adaptive, b_max);
    let a = c.start("root.a", "u", 0);
    let b = c.start(flat_queue, "v", 0);
    let fast = ranged(&mut c, &a, 4, "4..40", ALEXNET);
    let flat = ranged(&mut c, &b, 4, "4..40", LSTM);
    c.run_for(3 * RESIZE);
    (c, b, fast, flat)
}

#[test]
fn adaptive_moves_cores_from_the_flat_job_to_the_cpu_bound_one() {
    let (mut c, b, fast, flat) = alexnet_beside_lstm("root.a", 100.0);
    // 24 CPUs, 2 AMs of one each: the flat job keeps one per GPU, the rest to AlexNet.
    assert_eq!(vcores(&c, &flat), 4);
    assert_eq!(vcores(&c, &fast), 18);
    let r = c.poll(&b, AmReport::default());
    assert!(r
        .updated
        .iter()
        .any(|u| u.kind == UpdateKind::DecreaseResource && u.allocation.resource.vcores == 4));
}

#[test]
fn the_cpus_owed_to_free_gpus_are_kept_for_them() {
    let mut c = cluster(CpuPolicy::Adaptive, 100.0);
    let a = c.start("root.a", "u", 0);
    let fast = ranged(&mut c, &a, 4, "4..40", ALEXNET);
    c.run_for(3 * RESIZE);
    // 24 CPUs: the AM's one, AlexNet's proportional 12, and 12 owed to the 4 free GPUs.
    assert_eq!(vcores(&c, &fast), 12);
    // A job on the other four GPUs gets what is left of its share at once.
    let b = c.start("root.a", "v", 0);
    let other = ranged(&mut c, &b, 4, "4..40", ALEXNET);
    assert_eq!(vcores(&c, &other), 10, "what the two AMs left of its 12");
}

#[test]
fn a_container_granted_where_its_share_is_lent_gets_it_back_at_once() {
    let (mut c, b, fast, flat) = alexnet_beside_lstm("root.a", 100.0);
    assert_eq!((vcores(&c, &fast), vcores(&c, &flat)), (18, 4));
    // The flat job ends: its 4 GPUs come back with 4 CPUs, AlexNet holding the other 8
    // of their share. A CPU-hungry job granted them at once gets what AlexNet holds above
    // its own share (even though AlexNet was resized within the interval).
    let att = c.att(&b);
    c.env
        .core
        .am_allocate(&att, 0, vec![], vec![flat], 0.1, c.env.now)
        .expect("release");
    c.env.step();
    c.nm_round();
    let next = ranged(&mut c, &b, 4, "4..40", ALEXNET);
    assert_eq!(vcores(&c, &fast), 12, "AlexNet back at its share");
    assert_eq!(vcores(&c, &next), 10, "its 12 less what the two AMs hold");
    // Neither goes below the CPUs of its proportional throughput afterwards.
    c.run_for(3 * RESIZE);
    assert!(vcores(&c, &fast) >= 12 && vcores(&c, &next) >= 10);
}

#[test]
fn a_flat_job_of_another_queue_lends_its_spare_cores() {
    // root.b's vcores guarantee (half the node) is never reached: the flat job still
    // lends what it does not need, and keeps its own throughput.
    let (c, _, fast, flat) = alexnet_beside_lstm("root.b", 50.0);
    assert_eq!(vcores(&c, &flat), 4);
    assert_eq!(vcores(&c, &fast), 18);
}

#[test]
fn a_queue_at_its_maximum_gets_no_core_from_another() {
    // root.b may hold at most a quarter of the cluster: 6 vcores, 2 GPUs.
    let mut c = cluster(CpuPolicy::Adaptive, 25.0);
    let a = c.start("root.a", "u", 0);
    let b = c.start("root.b", "v", 0);
    let flat = ranged(&mut c, &a, 4, "4..40", LSTM);
    let fast = ranged(&mut c, &b, 1, "1..12", ALEXNET);
    c.run_for(3 * RESIZE);
    let used_b: i64 = 1 + vcores(&c, &fast);
    assert!(used_b <= 6, "root.b above its maximum: {used_b}");
    assert!(vcores(&c, &fast) <= 5);
    assert!(vcores(&c, &flat) >= 4);
}

#[test]
fn measured_throughput_replaces_exploration() {
    let mut c = cluster(CpuPolicy::Adaptive, 100.0);
    let a = c.start("root.a", "u", 0);
    let b = c.start("root.a", "v", 0);
    let known = ranged(&mut c, &a, 4, "4..40", ALEXNET);
    let unknown = ranged(&mut c, &b, 4, "4..40", "");
    // Exploration: the unknown job is grown first with the free cores.
    c.env.core.tick(c.env.now);
    c.env.step();
    c.run_for(INTERVAL + 1);
    assert!(vcores(&c, &unknown) > 4, "explored upward");
    // Its AM reports that it is flat: two points at different CPU counts.
    for v in [4u32, 12] {
        c.poll(
            &b,
            AmReport {
                cpu_throughput: vec![(v, 400.0)],
                ..AmReport::default()
            },
        );
    }
    c.run_for(4 * RESIZE);
    assert_eq!(vcores(&c, &unknown), 4, "a flat job gives its cores back");
    assert_eq!(vcores(&c, &known), 18);
}

/// Live containers of `app` on each node, by node name.
fn placed_on(c: &Cluster, app: &ApplicationId) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for ct in c.env.core.containers().values() {
        if ct.is_live() && ct.id.application_id() == *app && !ct.is_am {
            *out.entry(ct.node.host.clone()).or_default() += 1;
        }
    }
    out
}

#[test]
fn cpu_only_work_prefers_nodes_without_free_gpus_and_leaves_the_cores_owed_to_them() {
    for policy in [
        CpuPolicy::Proportional,
        CpuPolicy::Static { cpus_per_gpu: 2 },
    ] {
        // n0: 8 GPUs and 24 CPUs; n1: CPUs only (the three AMs go there first).
        let mut c = cluster_of(policy, 100.0, &[("n0", 24, 8), ("n1", 7, 0)]);
        let gpu = c.start("root.a", "u", 0);
        let wide = c.start("root.a", "v", 0);
        let cpus = c.start("root.a", "w", 0);
        // A 4-GPU job holds half of n0 with 12 CPUs; an 8-GPU job waits for the rest.
        assert_eq!(
            allocate(&mut c, &gpu, vec![ask(1, 12, 4, None)])
                .allocated
                .len(),
            1
        );
        assert!(allocate(&mut c, &wide, vec![ask(1, 1, 8, None)])
            .allocated
            .is_empty());
        // CPU-only work: n1's four CPUs first, then n0 only above what its 4 free GPUs are
        // owed (proportional: 4 x 3 = 12 of its 12 free; static 2 per GPU: 8, so 2 more).
        allocate(&mut c, &cpus, vec![ask(8, 2, 0, None)]);
        c.run_for(2_000);
        let on_n0 = match policy {
            CpuPolicy::Static { .. } => 2,
            _ => 0,
        };
        let want: BTreeMap<String, usize> = [("n1".to_string(), 2), ("n0".to_string(), on_n0)]
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .collect();
        assert_eq!(placed_on(&c, &cpus), want, "{policy:?}");
        // No GPU job waits any more: the CPU-only work may take n0's last cores.
        allocate(&mut c, &wide, vec![ask(0, 1, 8, None)]);
        c.run_for(2_000);
        assert_eq!(placed_on(&c, &cpus).get("n0"), Some(&6), "{policy:?}");
    }
}

#[test]
fn an_am_and_gpu_work_are_not_held_back_by_the_cores_owed_to_free_gpus() {
    let mut c = cluster(CpuPolicy::Proportional, 100.0);
    let gpu = c.start("root.a", "u", 0);
    let wide = c.start("root.a", "v", 0);
    assert_eq!(
        allocate(&mut c, &gpu, vec![ask(1, 12, 4, None)])
            .allocated
            .len(),
        1
    );
    assert!(allocate(&mut c, &wide, vec![ask(1, 1, 8, None)])
        .allocated
        .is_empty());
    // 10 CPUs left beside 4 free GPUs owed 12: an AM still starts, and so does GPU work.
    let late = c.start("root.a", "x", 0);
    assert!(c.ams.contains_key(&late), "the AM was placed");
    assert_eq!(
        allocate(&mut c, &late, vec![ask(1, 2, 1, None)])
            .allocated
            .len(),
        1
    );
}

#[test]
fn a_pass_that_keeps_cores_from_cpu_only_work_still_places_an_am_of_that_shape() {
    // One node: 8 GPUs, 24 CPUs. A 4-GPU job holds 12 of them (and its AM one): 11 free
    // beside 4 free GPUs owed 12, while a gang of two 4-GPU workers waits (gangs are not
    // among the wanted plain shapes).
    let mut c = cluster_of(CpuPolicy::Proportional, 100.0, &[("n0", 24, 8)]);
    let gpu = c.start("root.a", "u", 0);
    let wide = c.start("root.a", "v", 0);
    let cpus = c.start("root.a", "w", 0);
    assert_eq!(
        allocate(&mut c, &gpu, vec![ask(1, 12, 4, None)])
            .allocated
            .len(),
        1
    );
    let mut gang = ask(2, 1, 4, None);
    gang.gang = Some((
        "g".into(),
        crate::core::scheduler::gang::GangRequest {
            policy: crate::core::scheduler::gang::GangPolicy::Pack,
            ..Default::default()
        },
    ));
    assert!(allocate(&mut c, &wide, vec![gang]).allocated.is_empty());
    // CPU-only work of the AM's own shape is kept off the cores: the pass stops searching
    // for that shape, the only plain one wanted, but an AM of the same shape is exempt, so
    // the pass goes on and places it.
    let am_shape = c.env.submission("root.a").am_resource;
    let mut small = ask(2, am_shape.vcores, 0, None);
    small.capability = am_shape;
    assert!(allocate(&mut c, &cpus, vec![small]).allocated.is_empty());
    let late = c.start("root.a", "x", 0);
    assert!(c.ams.contains_key(&late), "the AM was placed");
    c.run_for(2_000);
    assert_eq!(
        placed_on(&c, &cpus),
        BTreeMap::new(),
        "CPU-only work kept off"
    );
}

fn arb_table() -> impl Strategy<Value = String> {
    prop::collection::btree_map(1u32..13, 10.0f64..500.0, 1..5).prop_map(|m| {
        m.iter()
            .map(|(k, v)| format!("{k}:{v:.1}"))
            .collect::<Vec<_>>()
            .join(";")
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Random jobs on one node under `adaptive`: after every step each ranged container is
    /// inside its range, every queue within its maximum, the node within its CPUs
    /// (`sanity_check`, run by every step), and no container resized twice within the
    /// resize interval.
    #[test]
    fn adaptive_keeps_ranges_maxima_and_the_interval(
        jobs in prop::collection::vec((1i64..4, 1u32..4, 0u32..12, arb_table(), prop::bool::ANY), 1..4),
        steps in 4usize..14,
    ) {
        let mut c = cluster(CpuPolicy::Adaptive, 60.0);
        let mut ids = Vec::new();
        for (i, (gpus, min, span, table, in_b)) in jobs.into_iter().enumerate() {
            let q = if in_b { "root.b" } else { "root.a" };
            let app = c.start(q, &format!("u{i}"), 0);
            let lo = min * gpus as u32;
            let range = format!("{lo}..{}", lo + span);
            if !c.ams.contains_key(&app) {
                continue;
            }
            if let Some(id) = try_ranged(&mut c, &app, gpus, &range, &table) {
                ids.push((app, id, lo, lo + span));
            }
        }
        let mut last: BTreeMap<ContainerId, u64> = BTreeMap::new();
        for _ in 0..steps {
            c.run_for(INTERVAL / 2);
            for (_, id, lo, hi) in &ids {
                let Some(ct) = c.env.core.containers().get(id).filter(|x| x.is_live()) else { continue };
                let v = ct.resource.vcores;
                prop_assert!(v >= i64::from(*lo) && v <= i64::from(*hi), "{v} outside {lo}..{hi}");
                prop_assert_eq!(ct.resource.memory_mb, 1024);
                let at = c.env.core.cpu().sized()[id].last_resize;
                if let Some(&was) = last.get(id) {
                    if was != 0 && at != was {
                        prop_assert!(at - was >= RESIZE, "resized at {was} and again at {at}");
                    }
                }
                last.insert(*id, at);
            }
            for v in c.env.core.queue_views() {
                prop_assert!(v.used.fits_in(&v.maximum), "{} above its maximum", v.path);
            }
        }
    }
}
