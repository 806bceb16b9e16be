//! Preemption on the pure core: queue guarantees restored by taking whole gangs back, with a
//! notice, an acknowledgement and a kill at the deadline; the minimum runtime and no
//! thrashing; intra-queue preemption by priority and by `las` level; and property tests of
//! the invariants over random clusters, queues and gangs.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use spindle_common::resource::GPU;
use spindle_common::states::exit_status;
use spindle_common::{ApplicationAttemptId, ApplicationId, ContainerId, NodeId, Resource};

use super::{qp, TestEnv};
use crate::core::queue_conf::*;
use crate::core::scheduler::gang::{GangPhase, GangRequest};
use crate::core::*;

pub(super) const WAIT: u64 = 15_000;
const INTERVAL: u64 = 3_000;

pub(super) fn leaf(path: &str, pct: f64) -> QueueSpec {
    let mut q = QueueSpec::new(qp(path), CapacitySpec::Percent(pct));
    q.max_am_resource_percent = 1.0;
    q.user_limit_factor = -1.0;
    q
}

pub(super) fn conf(children: Vec<QueueSpec>, min_runtime_ms: u64) -> CoreConfig {
    let mut c = CoreConfig::for_tests();
    let mut root = QueueSpec::new(qp("root"), CapacitySpec::Percent(100.0));
    root.children = children;
    c.scheduler.root = root;
    c.max_allocation = Resource::new(65536, 64).with(GPU, 8);
    c.preemption = PreemptionConf {
        enabled: true,
        monitoring_interval_ms: INTERVAL,
        max_wait_before_kill_ms: WAIT,
        min_runtime_ms,
        intra_queue: true,
        ..PreemptionConf::default()
    };
    c
}

/// A cluster driven as healthy NMs and AMs would drive it.
pub(super) struct Cluster {
    pub(super) env: TestEnv,
    pub(super) nodes: Vec<NodeId>,
    pub(super) ams: BTreeMap<ApplicationId, ApplicationAttemptId>,
}

impl Cluster {
    pub(super) fn new(c: CoreConfig, nodes: usize, gpus: i64) -> Self {
        let mut env = TestEnv::with_conf(c);
        let mut ids = Vec::new();
        for i in 0..nodes {
            let id = NodeId::new(format!("n{i}"), 1);
            env.core.register_node(
                NodeRegistration {
                    id: id.clone(),
                    http_address: format!("n{i}:2"),
                    rack: "/r".into(),
                    total: Resource::new(65536, 64).with(GPU, gpus),
                    version: "test".into(),
                    containers: vec![],
                    attributes: Default::default(),
                },
                env.now,
            );
            env.step();
            ids.push(id);
        }
        Self {
            env,
            nodes: ids,
            ams: BTreeMap::new(),
        }
    }

    /// Submits to `queue` as `user` with `priority`, launches and registers its AM.
    pub(super) fn start(&mut self, queue: &str, user: &str, priority: i32) -> ApplicationId {
        let id = self.env.core.new_application();
        let mut sub = self.env.submission(queue);
        sub.user = user.into();
        sub.priority = priority;
        sub.am_resource = Resource::new(512, 1);
        self.env.core.submit(id, sub, self.env.now).expect("submit");
        self.env.step();
        for (att, _) in self.env.launch_all() {
            self.env
                .core
                .am_register(&att, "h".into(), 0, String::new(), self.env.now)
                .expect("register");
            self.env.step();
            self.ams.insert(att.application_id, att);
        }
        self.nm_round();
        id
    }

    pub(super) fn att(&self, app: &ApplicationId) -> ApplicationAttemptId {
        *self.ams.get(app).expect("a started application")
    }

    /// Asks for a gang of `n` members with `gpus` GPUs each.
    pub(super) fn gang(
        &mut self,
        app: &ApplicationId,
        id: &str,
        n: u32,
        gpus: i64,
    ) -> AllocateReply {
        self.gang_with(app, id, n, gpus, GangRequest::default(), 0.1)
    }

    /// Asks for a gang with `params` (elastic, a domain, ...), reporting `progress`.
    pub(super) fn gang_with(
        &mut self,
        app: &ApplicationId,
        id: &str,
        n: u32,
        gpus: i64,
        params: GangRequest,
        progress: f32,
    ) -> AllocateReply {
        let att = self.att(app);
        let ask = AskUpdate {
            image: None,
            label: None,
            tags: Vec::new(),
            constraint: None,
            priority: 1,
            allocation_request_id: 1,
            resource_name: "*".into(),
            capability: Resource::new(1024, 1).with(GPU, gpus),
            num_containers: n,
            relax_locality: true,
            gang: Some((id.into(), params)),
            cpu: None,
        };
        let r = self
            .env
            .core
            .am_allocate(&att, 0, vec![ask], vec![], progress, self.env.now)
            .expect("ask");
        self.env.step();
        self.nm_round();
        r
    }

    pub(super) fn poll(&mut self, app: &ApplicationId, report: AmReport) -> AllocateReply {
        let att = self.att(app);
        let r = self
            .env
            .core
            .am_allocate_with(&att, 0, vec![], vec![], 0.1, report, self.env.now)
            .expect("poll");
        self.env.step();
        r
    }

    /// Every node heartbeats: live containers run; those the RM wants gone exit (-105).
    pub(super) fn nm_round(&mut self) {
        for n in self.nodes.clone() {
            let (live, cleanup): (Vec<ContainerId>, BTreeSet<ContainerId>) = {
                let node = &self.env.core.nodes()[&n];
                (
                    node.containers.iter().copied().collect(),
                    node.to_cleanup.iter().copied().collect(),
                )
            };
            let reports = live
                .into_iter()
                .map(|c| {
                    if cleanup.contains(&c) {
                        TestEnv::done(c, exit_status::KILLED_BY_APPMASTER)
                    } else {
                        TestEnv::running(c)
                    }
                })
                .collect();
            self.env.heartbeat(&n, reports);
        }
    }

    /// Time passes in heartbeat-sized steps, the NMs reporting each second.
    pub(super) fn run_for(&mut self, ms: u64) {
        let mut left = ms;
        while left > 0 {
            let step = left.min(1000);
            self.env.advance(step);
            self.nm_round();
            left -= step;
        }
    }

    pub(super) fn gpus_used(&self, queue: &str) -> i64 {
        self.env
            .core
            .queue_views()
            .into_iter()
            .find(|v| v.path == queue)
            .map(|v| v.used.get(GPU))
            .unwrap_or(-1)
    }

    pub(super) fn live_gpus(&self, app: &ApplicationId) -> i64 {
        self.env
            .core
            .containers()
            .values()
            .filter(|c| c.is_live() && c.id.application_id() == *app)
            .map(|c| c.resource.get(GPU))
            .sum()
    }

    pub(super) fn gang_phase(&self, app: &ApplicationId, id: &str) -> Option<GangPhase> {
        self.env.core.scheduler().gang(app, id).map(|g| g.phase)
    }
}

/// a's 4x4-GPU gang fills the 16-GPU cluster and runs `ms`; then b asks for 2x4 GPUs.
fn a_fills_then_b_asks(c: &mut Cluster, ms: u64) -> (ApplicationId, ApplicationId) {
    let a = c.start("root.a", "alice", 0);
    c.gang(&a, "train", 4, 4);
    c.run_for(ms);
    let b = c.start("root.b", "bob", 0);
    c.gang(&b, "train", 2, 4);
    (a, b)
}

fn two_queues(min_runtime_ms: u64) -> Cluster {
    Cluster::new(
        conf(
            vec![leaf("root.a", 50.0), leaf("root.b", 50.0)],
            min_runtime_ms,
        ),
        4,
        4,
    )
}

#[test]
fn a_queue_under_its_guarantee_takes_a_whole_gang_back_with_notice_then_kill() {
    let mut c = two_queues(0);
    let a = c.start("root.a", "alice", 0);
    let r = c.gang(&a, "train", 4, 4);
    assert_eq!(r.allocated.len(), 4, "a's 16-GPU gang fills the cluster");
    c.run_for(10_000);
    let b = c.start("root.b", "bob", 0);
    c.gang(&b, "train", 2, 4);
    assert_eq!(c.gpus_used("root.b"), 0, "nothing free for b");
    // Within one monitoring interval the notice goes out, for the whole gang.
    c.run_for(INTERVAL);
    let notice = c
        .poll(&a, AmReport::default())
        .preemption
        .expect("a notice");
    assert_eq!(notice.containers.len(), 4, "the gang is taken whole");
    assert_eq!(notice.gangs, vec!["train".to_string()]);
    // Each container says where it runs (its node, as granted) and its gang.
    for n in &notice.containers {
        let granted = r.allocated.iter().find(|g| g.id == n.id).expect("granted");
        assert_eq!(n.node, granted.node_id);
        assert_eq!(n.node_http, granted.node_http_address);
        assert_eq!(n.gang.as_deref(), Some("train"));
    }
    assert!(c
        .env
        .effects
        .iter()
        .any(|e| matches!(e, Effect::PreemptionNotice(att) if att.application_id == a)));
    // b's gang holds nodes now; nothing else may take them.
    assert_eq!(c.gang_phase(&b, "train"), Some(GangPhase::Reserved));
    // Not yet killed before the deadline.
    c.run_for(WAIT - 2_000);
    assert_eq!(c.live_gpus(&a), 16, "a keeps its gang until the deadline");
    // At the deadline the gang is killed whole, with -102, and b's gang runs.
    c.run_for(2_000 + INTERVAL);
    assert_eq!(c.live_gpus(&a), 0);
    assert_eq!(c.gpus_used("root.b"), 8, "b's guarantee restored");
    let r = c.poll(&a, AmReport::default());
    assert!(
        r.preemption.is_none(),
        "the notice ends with the containers"
    );
    assert_eq!(r.completed.len(), 4);
    assert!(r
        .completed
        .iter()
        .all(|s| s.exit_status == exit_status::PREEMPTED));
    assert_eq!(c.gang_phase(&a, "train"), Some(GangPhase::Preempted));
    let p = &c.env.app(&a).preemption;
    assert_eq!(p.preemptions, 1);
    assert_eq!(p.containers, 4);
    assert!(
        p.lost_gpu_ms > 0,
        "no checkpoint: everything since the start is lost"
    );
    assert_eq!(p.max_notice_to_exit_ms, WAIT);
}

#[test]
fn an_acknowledged_notice_kills_at_the_eta_and_a_checkpoint_saves_the_work() {
    let mut c = two_queues(0);
    let (a, _b) = a_fills_then_b_asks(&mut c, 20_000);
    c.run_for(INTERVAL);
    let notified = c.poll(&a, AmReport::default()).preemption.expect("notice");
    // The AM checkpoints and asks for 2 s; the RM kills then, not at the deadline.
    let report = AmReport {
        checkpoint: None,
        acknowledge_eta_ms: Some(2_000),
        ..AmReport::default()
    };
    c.poll(&a, report);
    c.run_for(1_000);
    assert_eq!(c.live_gpus(&a), 16, "before the ETA");
    let saved = AmReport {
        checkpoint: Some(Checkpoint {
            time: c.env.now,
            step: Some(100),
            label: None,
        }),
        acknowledge_eta_ms: None,
        ..AmReport::default()
    };
    c.poll(&a, saved);
    c.run_for(2_000);
    assert_eq!(c.live_gpus(&a), 0, "killed at the ETA");
    assert!(notified.deadline > c.env.now, "well before the deadline");
    let p = &c.env.app(&a).preemption;
    // Lost: 16 GPUs for the time between the checkpoint and the kill (at most 2 s).
    assert!(p.lost_gpu_ms <= 16 * 2_000, "lost {}", p.lost_gpu_ms);
    assert!(p.gpu_ms >= 16 * 20_000);
    assert_eq!(c.gpus_used("root.b"), 8);
}

#[test]
fn a_young_gang_is_not_preempted_and_a_reelected_one_is_not_thrashed() {
    let min = 60_000;
    let mut c = two_queues(min);
    let a = c.start("root.a", "alice", 0);
    c.gang(&a, "train", 4, 4);
    let b = c.start("root.b", "bob", 0);
    c.gang(&b, "train", 2, 4);
    c.run_for(min - 10_000);
    assert!(
        c.poll(&a, AmReport::default()).preemption.is_none(),
        "too young"
    );
    c.run_for(10_000 + INTERVAL);
    assert!(
        c.poll(&a, AmReport::default()).preemption.is_some(),
        "old enough now"
    );
    c.run_for(WAIT + INTERVAL);
    assert_eq!(c.gpus_used("root.b"), 8);
    // a asks again and gets 8 GPUs back... only when b ends; meanwhile a third queue-b
    // gang cannot take a again before a has run `min` again: a is re-granted half.
    c.gang(&a, "train", 2, 4);
    c.run_for(INTERVAL);
    assert_eq!(c.live_gpus(&a), 8, "a's smaller gang fits beside b's");
    let b2 = c.start("root.b", "carol", 0);
    c.gang(&b2, "more", 1, 4);
    c.run_for(INTERVAL * 3);
    assert!(
        c.poll(&a, AmReport::default()).preemption.is_none(),
        "a re-granted gang is not preempted again before it has run the minimum"
    );
}

#[test]
fn a_victim_queue_is_never_pushed_below_its_guarantee() {
    // a holds 8 GPUs (its guarantee) as two 4-GPU gangs, c holds 8 over its 0% guarantee
    // share... b needs 8: only c gives.
    let mut c = Cluster::new(
        conf(
            vec![leaf("root.a", 50.0), leaf("root.b", 50.0), {
                let mut q = leaf("root.c", 0.0);
                q.max_capacity = MaxCapacitySpec::Percent(100.0);
                q
            }],
            0,
        ),
        4,
        4,
    );
    let a = c.start("root.a", "alice", 0);
    c.gang(&a, "g1", 1, 4);
    c.gang(&a, "g2", 1, 4);
    let x = c.start("root.c", "xavier", 0);
    c.gang(&x, "g", 2, 4);
    c.run_for(10_000);
    assert_eq!(c.gpus_used("root.a"), 8);
    assert_eq!(c.gpus_used("root.c"), 8);
    let b = c.start("root.b", "bob", 0);
    c.gang(&b, "train", 2, 4);
    c.run_for(INTERVAL + WAIT + INTERVAL);
    assert_eq!(c.gpus_used("root.b"), 8);
    assert_eq!(c.gpus_used("root.a"), 8, "a stayed at its guarantee");
    assert_eq!(c.env.app(&a).preemption.preemptions, 0);
    assert_eq!(c.env.app(&x).preemption.preemptions, 1);
}

#[test]
fn disable_preemption_and_observe_only_take_nothing() {
    for (disable, observe) in [(true, false), (false, true)] {
        let mut a_spec = leaf("root.a", 50.0);
        a_spec.disable_preemption = disable;
        let mut cf = conf(vec![a_spec, leaf("root.b", 50.0)], 0);
        cf.preemption.observe_only = observe;
        let mut c = Cluster::new(cf, 4, 4);
        let (a, _b) = a_fills_then_b_asks(&mut c, 10_000);
        c.run_for(INTERVAL + WAIT + INTERVAL);
        assert_eq!(c.live_gpus(&a), 16, "disable={disable} observe={observe}");
        assert!(c.poll(&a, AmReport::default()).preemption.is_none());
        let counters = &c.env.core.preemption().counters;
        assert_eq!(counters.observed > 0, observe);
    }
}

#[test]
fn a_higher_priority_application_preempts_inside_its_queue() {
    let mut cf = conf(vec![leaf("root.a", 100.0)], 0);
    cf.scheduler.max_application_priority = 10;
    let mut c = Cluster::new(cf, 2, 4);
    let low = c.start("root.a", "alice", 1);
    c.gang(&low, "g", 2, 4);
    c.run_for(10_000);
    let high = c.start("root.a", "bob", 5);
    c.gang(&high, "g", 1, 4);
    c.run_for(INTERVAL + WAIT + INTERVAL);
    assert_eq!(c.live_gpus(&high), 4);
    assert_eq!(c.env.app(&low).preemption.preemptions, 1);
    // Equal priorities never preempt each other.
    let same = c.start("root.a", "carol", 5);
    c.gang(&same, "g", 2, 4);
    c.run_for(INTERVAL + WAIT + INTERVAL);
    assert_eq!(c.env.app(&high).preemption.preemptions, 0);
}

#[test]
fn las_demotes_long_jobs_and_a_new_job_preempts_at_the_level_boundary() {
    let mut q = leaf("root.a", 100.0);
    q.ordering = OrderingPolicy::Las;
    q.las = LasSpec {
        thresholds_gpu_s: vec![8 * 30],
        promotion_factor: 0.0,
    };
    let mut c = Cluster::new(conf(vec![q], 0), 2, 4);
    let long = c.start("root.a", "alice", 0);
    c.gang(&long, "g", 2, 4);
    // 8 GPUs x 20 s: still level 0; a new job waits behind it, nothing preempted.
    c.run_for(20_000);
    let short = c.start("root.a", "bob", 0);
    c.gang(&short, "g", 1, 4);
    c.run_for(INTERVAL);
    assert!(c.poll(&long, AmReport::default()).preemption.is_none());
    // Past 240 GPU-seconds the long job is on level 1: the new one preempts it.
    c.run_for(10_000 + INTERVAL);
    assert_eq!(
        c.env.core.scheduler().app(&long).map(|a| a.service.level),
        Some(1)
    );
    assert!(c.poll(&long, AmReport::default()).preemption.is_some());
    c.run_for(WAIT + INTERVAL);
    assert_eq!(c.live_gpus(&short), 4);
}

#[test]
fn las_promotes_a_starved_job_back_to_the_first_level() {
    let mut q = leaf("root.a", 100.0);
    q.ordering = OrderingPolicy::Las;
    q.las = LasSpec {
        thresholds_gpu_s: vec![4],
        promotion_factor: 2.0,
    };
    let mut c = Cluster::new(conf(vec![q], 0), 1, 4);
    let a = c.start("root.a", "alice", 0);
    c.gang(&a, "g", 1, 4);
    c.run_for(5_000);
    assert_eq!(
        c.env.core.scheduler().app(&a).map(|x| x.service.level),
        Some(1)
    );
    // Taken back by a newcomer; then it waits twice its running time and is promoted.
    let b = c.start("root.a", "bob", 0);
    c.gang(&b, "g", 1, 4);
    c.run_for(INTERVAL + WAIT + INTERVAL);
    assert_eq!(c.live_gpus(&b), 4);
    c.gang(&a, "g", 1, 4);
    let ran = c
        .env
        .core
        .scheduler()
        .app(&a)
        .map_or(0, |x| x.service.ran_ms);
    assert!(ran >= 5_000, "ran {ran} ms");
    c.run_for(ran);
    assert_eq!(
        c.env.core.scheduler().app(&a).map(|x| x.service.level),
        Some(1),
        "not yet"
    );
    c.run_for(ran + 2_000);
    assert_eq!(
        c.env.core.scheduler().app(&a).map(|x| x.service.level),
        Some(0),
        "promoted"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Over random clusters, queue shares and gangs: a gang is never partly under notice or
    /// partly killed; no victim queue gives more than it held over its guarantee; and a
    /// queue under its guarantee whose gang fits its guarantee runs it within
    /// `max_wait_before_kill` plus one monitoring interval (and the NMs' report).
    #[test]
    fn preemption_invariants(
        nodes in 2usize..6,
        gpus in prop::sample::select(vec![2i64, 4, 8]),
        share_a in prop::sample::select(vec![25.0f64, 50.0, 75.0]),
        a_gangs in prop::collection::vec(1u32..4, 1..4),
        b_members in 1u32..4,
    ) {
        let total = nodes as i64 * gpus;
        // Gangs of whole nodes, never more members than nodes (a larger one is refused).
        let a_gangs: Vec<u32> = a_gangs.iter().map(|n| (*n).min(nodes as u32)).collect();
        let b_members = b_members.min(nodes as u32);
        let mut c = Cluster::new(
            conf(vec![leaf("root.a", share_a), leaf("root.b", 100.0 - share_a)], 0),
            nodes,
            gpus,
        );
        // Both AMs first: a gang holding nodes keeps every other container off them.
        let a = c.start("root.a", "alice", 0);
        let b = c.start("root.b", "bob", 0);
        for (i, n) in a_gangs.iter().enumerate() {
            c.gang(&a, &format!("g{i}"), *n, gpus);
        }
        c.run_for(5_000);
        let b_gpus = i64::from(b_members) * gpus;
        let a_before = c.gpus_used("root.a");
        let free_before = total - a_before;
        c.gang(&b, "b", b_members, gpus);
        let asked_at = c.env.now;
        let a_guar = total as f64 * share_a / 100.0;
        let b_guar = total as f64 - a_guar;
        let mut ran_at = None;
        let mut noticed = false;
        for _ in 0..((WAIT + 3 * INTERVAL) / 1000) {
            c.run_for(1_000);
            // Whole or absent: every gang of a is entirely under notice or not at all.
            let notices = &c.env.core.preemption().notices;
            let gangs = c.env.core.scheduler().app(&a).map(|x| x.gangs.clone()).unwrap_or_default();
            for (id, g) in gangs {
                let live: Vec<_> = g.members.iter().filter(|m| c.env.core.containers().get(m).is_some_and(|x| x.is_live())).collect();
                let under = live.iter().filter(|m| notices.contains_key(m)).count();
                prop_assert!(under == 0 || under == live.len(), "gang {} partly under notice", id);
                if under > 0 && !noticed {
                    noticed = true;
                    // What b claims from a (its need beyond the free room) leaves a at or
                    // above its guarantee. (a's usage then, not when b asked: a's own
                    // waiting gangs may have been placed since, taking it over.)
                    let a_now = c.gpus_used("root.a");
                    let free_now = total - a_now - c.gpus_used("root.b");
                    let claim = (b_gpus - free_now).max(0);
                    prop_assert!((a_now - claim) as f64 >= a_guar - 1e-9,
                        "a had {a_now} GPUs (at b's ask {a_before}), guarantee {a_guar}, b claimed {claim}");
                }
            }
            if ran_at.is_none() && c.live_gpus(&b) == b_gpus {
                ran_at = Some(c.env.now - asked_at);
            }
        }
        let feasible = b_gpus as f64 <= b_guar + 1e-9
            && free_before < b_gpus
            && a_before as f64 > a_guar * 1.1 + 1e-9
            && (a_before - (b_gpus - free_before)) as f64 >= a_guar - 1e-9;
        if feasible {
            // The preemptor's guarantee is restored within max_wait_before_kill plus one
            // monitoring interval (plus the NM's report and this loop's 1 s steps).
            let t = ran_at.unwrap_or(u64::MAX);
            prop_assert!(t <= WAIT + INTERVAL + 2_000, "b ran after {t} ms");
        }
        if !noticed {
            prop_assert_eq!(c.env.app(&a).preemption.preemptions, 0);
        }
        prop_assert!(c.env.core.sanity_check().is_ok());
    }
}

#[test]
fn a_gang_ahead_in_line_takes_over_the_hold_and_an_am_runs_beside_it() {
    let mut cf = conf(vec![leaf("root.a", 100.0)], 0);
    cf.preemption.enabled = false;
    cf.scheduler.max_application_priority = 100;
    let mut c = Cluster::new(cf, 1, 8);
    let x = c.start("root.a", "alice", 1);
    c.gang(&x, "g", 8, 1);
    let y = c.start("root.a", "bob", 1);
    c.gang(&y, "g", 8, 1);
    assert_eq!(c.gang_phase(&y, "g"), Some(GangPhase::Reserved));
    // The node is held for y's GPUs, but z's AM (memory only) still starts beside them.
    let z = c.start("root.a", "carol", 5);
    c.gang(&z, "g", 8, 1);
    assert_eq!(
        c.gang_phase(&z, "g"),
        Some(GangPhase::Reserved),
        "z is ahead: it holds"
    );
    assert_eq!(
        c.gang_phase(&y, "g"),
        Some(GangPhase::Pending),
        "y gave way"
    );
    c.run_for(1_000);
}
