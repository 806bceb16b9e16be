//! Elastic gangs on the pure core: the doubling policy grows a job in doublings on an idle
//! cluster, shrinks it when rigid work arrives and grows it back when that work ends; the
//! resize interval; offers declined; the preemption monitor shrinks an elastic gang before
//! it preempts a rigid one; and property tests of the invariants (never below the minimum
//! nor above the maximum, always a legal size, no resize more often than the interval).

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use spindle_common::resource::GPU;
use spindle_common::states::exit_status;
use spindle_common::{ApplicationId, ContainerId};

use super::preemption::{conf, leaf, Cluster};
use super::TestEnv;
use crate::core::queue_conf::*;
use crate::core::scheduler::elastic_policy::{ElasticSpec, SizeRule};
use crate::core::scheduler::gang::{GangPhase, GangRequest};
use crate::core::*;

const RESIZE_INTERVAL: u64 = 5_000;

fn elastic_conf(c: &mut CoreConfig) {
    c.elastic = ElasticConf {
        monitoring_interval_ms: 1_000,
        resize_interval_ms: RESIZE_INTERVAL,
        restart_cost_ms: 0,
        shrink_deadline_ms: 10_000,
    };
}

/// One `doubling` leaf over `nodes` x `gpus`.
fn doubling(nodes: usize, gpus: i64) -> Cluster {
    with_policy(nodes, gpus, ElasticPolicy::Doubling)
}

fn with_policy(nodes: usize, gpus: i64, policy: ElasticPolicy) -> Cluster {
    let mut q = leaf("root.default", 100.0);
    q.elastic = policy;
    let mut c = conf(vec![q], 0);
    c.preemption.enabled = false;
    elastic_conf(&mut c);
    Cluster::new(c, nodes, gpus)
}

fn spec(min: u32, max: u32) -> ElasticSpec {
    ElasticSpec {
        min,
        max,
        rule: SizeRule::PowerOfTwo,
        throughput: BTreeMap::from([(1, 318.0), (2, 576.2), (4, 1152.4), (8, 2177.8)]),
    }
}

/// The study-implied table (sublinear: 57% per GPU at 8 against 1).
const IMPLIED: [(u32, f64); 4] = [(1, 318.0), (2, 535.9), (4, 916.6), (8, 1446.9)];

impl Cluster {
    /// Asks for an elastic gang of 1-GPU members.
    fn elastic(&mut self, app: &ApplicationId, min: u32, max: u32) -> AllocateReply {
        self.elastic_with(app, spec(min, max))
    }

    fn elastic_with(&mut self, app: &ApplicationId, spec: ElasticSpec) -> AllocateReply {
        let max = spec.max;
        let params = GangRequest {
            elastic: Some(spec),
            ..GangRequest::default()
        };
        self.gang_with(app, "workers", max, 1, params, 0.0)
    }

    /// The AM's allocate call: it gives back at once what a shrink demands.
    fn comply(&mut self, app: &ApplicationId) -> AllocateReply {
        let att = self.att(app);
        let r = self
            .env
            .core
            .am_allocate(&att, 0, vec![], vec![], 0.1, self.env.now)
            .expect("poll");
        self.env.step();
        let give: Vec<ContainerId> = r
            .demands
            .iter()
            .flat_map(|d| d.containers.clone())
            .collect();
        if !give.is_empty() {
            self.env
                .core
                .am_allocate(&att, 0, vec![], give, 0.1, self.env.now)
                .expect("release");
            self.env.step();
        }
        self.nm_round();
        r
    }

    fn size(&self, app: &ApplicationId) -> usize {
        self.env
            .core
            .scheduler()
            .gang(app, "workers")
            .map_or(0, |g| g.members.len())
    }

    /// Every live container of `app` but its AM's ends with `exit`.
    fn finish(&mut self, app: &ApplicationId, exit: i32) {
        for n in self.nodes.clone() {
            let core = &self.env.core;
            let reports: Vec<_> = core.nodes()[&n]
                .containers
                .iter()
                .map(|c| {
                    let am = core.containers().get(c).is_some_and(|x| x.is_am);
                    if c.application_id() == *app && !am {
                        TestEnv::done(*c, exit)
                    } else {
                        TestEnv::running(*c)
                    }
                })
                .collect();
            self.env.heartbeat(&n, reports);
        }
    }

    /// Time passes; each second the AM of `app` calls and complies.
    fn run_complying(&mut self, app: &ApplicationId, ms: u64) {
        let mut left = ms;
        while left > 0 {
            let step = left.min(1000);
            self.env.advance(step);
            self.comply(app);
            left -= step;
        }
    }
}

#[test]
fn doubling_grows_on_an_idle_cluster_shrinks_for_a_rigid_gang_and_grows_back() {
    let mut c = doubling(4, 3);
    let a = c.start("root.default", "alice", 0);
    // The ask runs the policy's round at once: its minimum, then the free GPUs in
    // doublings, 2 -> 4 -> 8, so it starts at 8.
    let r = c.elastic(&a, 2, 8);
    assert_eq!(r.allocated.len(), 8);
    assert!(r.offers.is_empty(), "a start is not a resize");
    assert_eq!(c.size(&a), 8);
    assert_eq!(c.live_gpus(&a), 8);
    // A rigid 8-GPU gang arrives: only 4 GPUs are free, so a shrinks to 4 (not 6: sizes
    // are powers of two), through a demand the AM complies with.
    let b = c.start("root.default", "bob", 0);
    c.gang(&b, "train", 8, 1);
    let mut demands = Vec::new();
    for _ in 0..(RESIZE_INTERVAL / 1000 + 2) {
        c.env.advance(1000);
        let r = c.comply(&a);
        demands.extend(r.demands.iter().map(|d| (d.from, d.to, d.containers.len())));
        c.nm_round();
    }
    assert_eq!(demands, vec![(8, 4, 4)]);
    assert_eq!(c.size(&a), 4);
    assert_eq!(c.gang_phase(&b, "train"), Some(GangPhase::Allocated));
    assert_eq!(c.live_gpus(&b), 8);
    // The demanded members ended as given back, not failed nor preempted.
    assert_eq!(c.gang_phase(&a, "workers"), Some(GangPhase::Allocated));
    assert_eq!(c.env.app(&a).preemption.preemptions, 0);
    // b ends; a grows back to 8.
    c.finish(&b, exit_status::SUCCESS);
    c.run_complying(&a, RESIZE_INTERVAL + 2000);
    assert_eq!(c.size(&a), 8);
    let view = c.env.core.gang_statuses(&a);
    assert_eq!(
        (view[0].size, view[0].current_size),
        (8, 8),
        "granted and running"
    );
    let g = c.env.core.scheduler().gang(&a, "workers").expect("gang");
    assert_eq!(g.elastic.as_ref().map(|e| e.resizes), Some(2));
}

/// On one 8-GPU node, `a` (1..8) runs at 8; `b` (1..8) then asks. Returns the sizes of `a`
/// and `b` a few rounds later.
fn second_job_sizes(policy: ElasticPolicy, table: &[(u32, f64)]) -> (usize, usize) {
    let mut c = with_policy(1, 8, policy);
    let with_table = |s: ElasticSpec| ElasticSpec {
        throughput: table.iter().copied().collect(),
        ..s
    };
    let a = c.start("root.default", "alice", 0);
    c.elastic_with(&a, with_table(spec(1, 8)));
    assert_eq!(c.size(&a), 8);
    let b = c.start("root.default", "bob", 0);
    c.elastic_with(&b, with_table(spec(1, 8)));
    for _ in 0..(RESIZE_INTERVAL / 1000 + 3) {
        c.env.advance(1000);
        c.comply(&a);
        c.comply(&b);
    }
    (c.size(&a), c.size(&b))
}

#[test]
fn doubling_adaptive_starts_every_job_when_they_scale_sublinearly_and_by_gain_otherwise() {
    let measured: Vec<(u32, f64)> = spec(1, 8).throughput.into_iter().collect();
    // The study's rule shrinks a for b's minimum whatever the table; by gain, b waits for a
    // when the jobs scale almost linearly.
    let doubling = second_job_sizes(ElasticPolicy::Doubling, &measured);
    let by_gain = second_job_sizes(ElasticPolicy::DoublingByGain, &measured);
    assert!(doubling.1 >= 1 && doubling.0 < 8, "{doubling:?}");
    assert_eq!(by_gain, (8, 0));
    // doubling-adaptive: by gain on the near-linear table, the study's rule on the
    // sublinear one.
    let adaptive = ElasticPolicy::DoublingAdaptive;
    assert_eq!(second_job_sizes(adaptive, &measured), by_gain);
    assert_eq!(
        second_job_sizes(adaptive, &IMPLIED),
        second_job_sizes(ElasticPolicy::Doubling, &IMPLIED)
    );
    let (a, b) = second_job_sizes(adaptive, &IMPLIED);
    assert!(b >= 1 && a + b <= 8, "a {a}, b {b}");
}

#[test]
fn a_shrink_not_complied_with_is_killed_at_the_deadline_and_the_gang_goes_on() {
    let mut c = doubling(2, 4);
    let a = c.start("root.default", "alice", 0);
    c.elastic(&a, 1, 8);
    c.run_complying(&a, 3 * RESIZE_INTERVAL);
    assert_eq!(c.size(&a), 8);
    let b = c.start("root.default", "bob", 0);
    c.gang(&b, "train", 2, 2);
    // a's AM never answers: the members are killed at the deadline with -102.
    c.run_for(RESIZE_INTERVAL + 2000);
    let att = c.att(&a);
    let r = c
        .env
        .core
        .am_allocate(&att, 0, vec![], vec![], 0.1, c.env.now)
        .expect("poll");
    assert_eq!(r.demands.len(), 1);
    assert_eq!((r.demands[0].from, r.demands[0].to), (8, 4));
    assert!(r.preemption.is_none(), "a shrink is not a preemption");
    c.run_for(10_000);
    assert_eq!(c.size(&a), 4);
    assert_eq!(c.live_gpus(&b), 4);
    let r = c
        .env
        .core
        .am_allocate(&att, 0, vec![], vec![], 0.1, c.env.now)
        .expect("poll");
    assert!(r.demands.is_empty());
    assert_eq!(
        r.completed
            .iter()
            .filter(|s| s.exit_status == exit_status::PREEMPTED)
            .count(),
        4
    );
    assert_eq!(c.gang_phase(&a, "workers"), Some(GangPhase::Allocated));
}

#[test]
fn a_declined_offer_is_not_made_again_within_the_interval() {
    let mut c = doubling(2, 4);
    // A rigid gang holds 6 of the 8 GPUs: the elastic job starts at 2.
    let b = c.start("root.default", "bob", 0);
    c.gang(&b, "train", 3, 2);
    let a = c.start("root.default", "alice", 0);
    c.elastic(&a, 2, 8);
    c.run_complying(&a, 2000);
    assert_eq!(c.size(&a), 2);
    c.finish(&b, exit_status::SUCCESS);
    let att = c.att(&a);
    let mut declined = 0;
    let mut offers = 0;
    let mut seen = Vec::new();
    for _ in 0..(RESIZE_INTERVAL / 1000 + 3) {
        c.env.advance(1000);
        let r = c
            .env
            .core
            .am_allocate(&att, 0, vec![], vec![], 0.1, c.env.now)
            .expect("poll");
        c.env.step();
        let give: Vec<ContainerId> = r.offers.iter().flat_map(|o| o.containers.clone()).collect();
        offers += r.offers.len();
        declined += give.len();
        if !give.is_empty() {
            c.env
                .core
                .am_allocate(&att, 0, vec![], give, 0.1, c.env.now)
                .expect("decline");
            c.env.step();
        }
        c.nm_round();
        seen.push(offers);
    }
    // Offered at the first round, declined, not offered again until the interval passed.
    let first = seen.iter().position(|n| *n == 1).expect("an offer");
    let second = seen
        .iter()
        .position(|n| *n == 2)
        .expect("offered again later");
    assert!(
        second - first >= (RESIZE_INTERVAL / 1000) as usize,
        "{seen:?}"
    );
    assert_eq!(declined, 12);
    assert_eq!(c.size(&a), 2);
    assert_eq!(c.live_gpus(&a), 2);
    assert_eq!(c.env.core.elastic().counters.members_declined, 12);
}

#[test]
fn the_preemption_monitor_shrinks_an_elastic_gang_before_it_preempts_a_rigid_one() {
    let mut c = Cluster::new(
        conf(vec![leaf("root.a", 50.0), leaf("root.b", 50.0)], 0),
        4,
        4,
    );
    let a = c.start("root.a", "alice", 0);
    c.gang(&a, "rigid", 2, 4);
    let e = c.start("root.a", "erin", 0);
    let r = c.elastic(&e, 1, 8);
    assert_eq!(r.allocated.len(), 8, "placed at the largest size that fits");
    c.run_for(5_000);
    let b = c.start("root.b", "bob", 0);
    c.gang(&b, "train", 1, 4);
    c.run_for(4_000);
    let ra = c.poll(&a, AmReport::default());
    assert!(ra.preemption.is_none(), "the rigid gang is left alone");
    let re = c.comply(&e);
    assert!(re.preemption.is_none());
    assert_eq!(re.demands.len(), 1, "the elastic gang is shrunk instead");
    assert_eq!((re.demands[0].from, re.demands[0].to), (8, 1));
    c.run_for(2_000);
    assert_eq!(c.live_gpus(&b), 4);
    assert_eq!(c.live_gpus(&a), 8);
    assert_eq!(c.size(&e), 1);
}

#[derive(Debug, Clone)]
enum Op {
    Elastic {
        min: u32,
        max: u32,
    },
    Rigid {
        n: u32,
        gpus: i64,
    },
    Advance(u64),
    /// The AM of the i-th application calls (and gives back what is demanded, or not).
    Poll {
        i: usize,
        comply: bool,
    },
    Finish(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u32..3, 0u32..3).prop_map(|(a, b)| Op::Elastic {
            min: 1 << a.min(b),
            max: 1 << (a.max(b) + 1),
        }),
        (1u32..4, 1i64..4).prop_map(|(n, gpus)| Op::Rigid { n, gpus }),
        (500u64..8_000).prop_map(Op::Advance),
        (0usize..8, any::<bool>()).prop_map(|(i, comply)| Op::Poll { i, comply }),
        (0usize..8).prop_map(Op::Finish),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(48)
    ))]
    #[test]
    fn elastic_invariants_hold(
        ops in proptest::collection::vec(op(), 1..50),
        policy in prop::sample::select(vec![
            ElasticPolicy::Doubling,
            ElasticPolicy::DoublingByGain,
            ElasticPolicy::DoublingAdaptive,
        ]),
    ) {
        let mut c = with_policy(4, 4, policy);
        let mut apps: Vec<ApplicationId> = Vec::new();
        let mut elastic: BTreeSet<ApplicationId> = BTreeSet::new();
        let mut last: BTreeMap<ApplicationId, (u32, u64)> = BTreeMap::new();
        let mut done: BTreeSet<ApplicationId> = BTreeSet::new();
        for op in ops {
            match op {
                Op::Elastic { min, max } => {
                    let id = c.start("root.default", "u", 0);
                    c.elastic(&id, min, max);
                    apps.push(id);
                    elastic.insert(id);
                }
                Op::Rigid { n, gpus } => {
                    let id = c.start("root.default", "u", 0);
                    c.gang(&id, "train", n, gpus);
                    apps.push(id);
                }
                Op::Advance(ms) => c.run_for(ms),
                Op::Poll { i, comply } => {
                    if let Some(id) = apps.get(i).copied().filter(|a| !done.contains(a)) {
                        if comply { c.comply(&id); } else { c.poll(&id, AmReport::default()); }
                    }
                }
                Op::Finish(i) => {
                    if let Some(id) = apps.get(i).copied() {
                        done.insert(id);
                        c.finish(&id, exit_status::SUCCESS);
                    }
                }
            }
            for id in &elastic {
                let Some(g) = c.env.core.scheduler().gang(id, "workers") else { continue };
                let Some(e) = g.elastic.as_ref() else { continue };
                let live = g.members.len() as u32;
                let sizes = e.spec.sizes();
                let least = sizes[0];
                if live == 0 {
                    continue; // the job ended
                }
                prop_assert!(live <= e.spec.max, "{live} members, above the maximum");
                match e.shrinking {
                    Some(to) => {
                        prop_assert!(e.spec.legal(to), "shrinks to an illegal size {to}");
                        prop_assert!(live >= to, "{live} members, below the shrink's {to}");
                    }
                    None => {
                        prop_assert!(live >= least, "{live} members, below the minimum {least}");
                        prop_assert!(e.spec.legal(live), "{live} members is not a legal size");
                    }
                }
                // No resize sooner than the interval after the previous one.
                if let Some((n, at)) = last.get(id).copied() {
                    if e.resizes > n {
                        prop_assert!(
                            e.last_resize.saturating_sub(at) >= RESIZE_INTERVAL,
                            "resized {} ms after the previous resize", e.last_resize - at
                        );
                    }
                }
                last.insert(*id, (e.resizes, e.last_resize));
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(48)
    ))]
    /// Queue `a` runs rigid gangs and elastic gangs over its guarantee; `b` asks for a gang
    /// of one-GPU members (any free GPU serves it). When what is free plus what `a`'s elastic
    /// gangs hold above their minimum covers `b`'s gang, no rigid unit is preempted: the
    /// monitor shrinks elastic gangs first.
    #[test]
    fn shrink_comes_before_rigid_preemption(
        rigid in proptest::collection::vec(1u32..3, 0..3),
        elastic in proptest::collection::vec((0u32..2, 1u32..3), 1..3),
        b_members in 1u32..8,
    ) {
        let mut c = Cluster::new(conf(vec![leaf("root.a", 50.0), leaf("root.b", 50.0)], 0), 4, 4);
        let mut elastic_apps = Vec::new();
        for n in &rigid {
            let id = c.start("root.a", "ra", 0);
            c.gang(&id, "workers", *n, 2);
        }
        for (lo, up) in &elastic {
            let id = c.start("root.a", "ea", 0);
            c.elastic(&id, 1 << lo, 1 << (lo + up));
            elastic_apps.push(id);
        }
        c.run_for(5_000);
        let free = c.env.core.scheduler().nodes().cluster_free().get(GPU) as u32;
        let extra: u32 = elastic_apps
            .iter()
            .filter_map(|e| c.env.core.scheduler().gang(e, "workers"))
            .filter_map(|g| g.elastic.as_ref().map(|el| (g.members.len() as u32, el.spec.sizes()[0])))
            .map(|(n, least)| n.saturating_sub(least))
            .sum();
        let b = c.start("root.b", "b", 0);
        c.gang(&b, "train", b_members, 1);
        let enough = free + extra >= b_members;
        for _ in 0..8 {
            c.run_for(1_000);
            let notices = &c.env.core.preemption().notices;
            let rigid_preempted = notices.iter().any(|(id, n)| {
                n.shrink.is_none() && !elastic_apps.contains(&id.application_id())
            });
            prop_assert!(
                !(enough && rigid_preempted),
                "a rigid unit is preempted though {free} free + {extra} elastic GPUs cover {b_members}"
            );
        }
    }
}
