//! Fair share that preempts (issue 31, item 2): in a `fairshare` leaf a user far above their
//! share yields to one below it, with the checkpoint notice and the minimum runtime; one
//! user's long job yields to the same user's short one (least attained service); never a
//! user below their share for one above it, and never a move that would turn round. Between
//! sibling queues, the slack above guarantees goes to the queue furthest below its share
//! of decayed usage, guarantees and maxima staying hard.

use std::collections::BTreeMap;

use proptest::prelude::*;
use spindle_common::resource::GPU;
use spindle_common::{ApplicationAttemptId, ApplicationId, ContainerId, NodeId, Resource};

use super::preemption::{conf, leaf, Cluster, WAIT};
use crate::core::queue_conf::*;
use crate::core::scheduler::victims::{Candidate, Candidates, Reason};
use crate::core::scheduler::{Ask, AskKey, QueueIdx, Scheduler};
use crate::core::*;

const INTERVAL: u64 = 3_000;
const H: u64 = 3_600_000;

fn fair_leaf(path: &str, pct: f64) -> QueueSpec {
    let mut q = leaf(path, pct);
    q.ordering = OrderingPolicy::Fairshare;
    q
}

fn fair_conf(children: Vec<QueueSpec>, min_runtime_ms: u64) -> CoreConfig {
    let mut c = conf(children, min_runtime_ms);
    c.scheduler.fairshare.half_life_ms = H;
    c.scheduler.fairshare.calc_period_ms = 1_000;
    // The harness's AMs do not poll while time passes.
    c.am_expiry_ms = u64::MAX / 4;
    c
}

/// Every container `app` holds but its AM is released by its AM.
fn release_workers(c: &mut Cluster, app: &ApplicationId) {
    let ids: Vec<ContainerId> = c
        .env
        .core
        .containers()
        .values()
        .filter(|x| x.is_live() && !x.is_am && x.id.application_id() == *app)
        .map(|x| x.id)
        .collect();
    let att = c.att(app);
    c.env
        .core
        .am_allocate(&att, 0, vec![], ids, 0.5, c.env.now)
        .expect("release");
    c.env.step();
    c.nm_round();
}

fn reasons(c: &Cluster, victim: &ApplicationId) -> Vec<Reason> {
    c.env
        .core
        .preemption()
        .notices
        .iter()
        .filter(|(id, _)| id.application_id() == *victim)
        .map(|(_, n)| n.reason)
        .collect()
}

#[test]
fn a_user_far_above_their_share_yields_to_one_below_after_the_minimum_runtime() {
    let min = 60_000;
    let mut c = Cluster::new(fair_conf(vec![fair_leaf("root.a", 100.0)], min), 2, 4);
    // heavy used the whole cluster for ten minutes, then starts another job on all of it.
    let first = c.start("root.a", "heavy", 0);
    assert_eq!(c.gang(&first, "g", 2, 4).allocated.len(), 2);
    c.run_for(600_000);
    release_workers(&mut c, &first);
    let second = c.start("root.a", "heavy", 0);
    assert_eq!(c.gang(&second, "g", 2, 4).allocated.len(), 2);
    let second_started = c.env.now;
    c.run_for(20_000);
    // light, who has used nothing, asks for 4 GPUs: it waits while heavy's job is young.
    let light = c.start("root.a", "light", 0);
    c.gang(&light, "g", 1, 4);
    c.run_for(INTERVAL);
    assert!(
        c.poll(&second, AmReport::default()).preemption.is_none(),
        "heavy's job is younger than the minimum runtime"
    );
    // Noticed once it has run the minimum, within a monitoring interval.
    let mut notice = None;
    for _ in 0..(min + 2 * INTERVAL) / 1_000 {
        c.run_for(1_000);
        notice = c.poll(&second, AmReport::default()).preemption;
        if notice.is_some() {
            break;
        }
    }
    let notice = notice.expect("heavy yields once its job has run the minimum");
    let ran = c.env.now - second_started;
    assert!(ran >= min, "noticed after {ran} ms");
    assert_eq!(notice.gangs, vec!["g".to_string()], "the gang, whole");
    assert_eq!(reasons(&c, &second), vec![Reason::Fairshare; 2]);
    assert!(reasons(&c, &first).is_empty());
    // The notice is a checkpoint notice: killed only at the deadline.
    c.run_for(WAIT - 2_000);
    assert_eq!(c.live_gpus(&second), 8, "not before the deadline");
    c.run_for(2_000 + INTERVAL);
    assert_eq!(c.live_gpus(&light), 4, "light runs");
    assert_eq!(c.env.app(&second).preemption.preemptions, 1);
    // heavy asks again: it is still above light, so light is never taken back for it.
    c.gang(&second, "g2", 2, 4);
    c.run_for(min + 3 * INTERVAL + WAIT);
    assert_eq!(c.live_gpus(&light), 4);
    assert_eq!(c.env.app(&light).preemption.preemptions, 0);
}

#[test]
fn a_user_whose_usage_is_all_in_the_running_job_is_not_preempted() {
    // heavy's only usage is the job it runs: preempting it would refund all of it and put
    // heavy below light, which would then be taken back in turn. Nothing moves.
    let mut c = Cluster::new(fair_conf(vec![fair_leaf("root.a", 100.0)], 0), 2, 4);
    let heavy = c.start("root.a", "heavy", 0);
    c.gang(&heavy, "g", 2, 4);
    c.run_for(600_000);
    let light = c.start("root.a", "light", 0);
    c.gang(&light, "g", 1, 4);
    c.run_for(3 * INTERVAL + WAIT);
    assert_eq!(c.live_gpus(&heavy), 8);
    assert_eq!(c.env.app(&heavy).preemption.preemptions, 0);
}

#[test]
fn under_fairshare_a_users_short_job_preempts_the_same_users_long_one() {
    let mut q = fair_leaf("root.a", 100.0);
    q.las = LasSpec {
        thresholds_gpu_s: vec![8 * 30],
        promotion_factor: 0.0,
    };
    let mut c = Cluster::new(fair_conf(vec![q], 0), 2, 4);
    let long = c.start("root.a", "alice", 0);
    c.gang(&long, "g", 2, 4);
    // 8 GPUs x 20 s: still on the first level; a new job of alice's waits.
    c.run_for(20_000);
    let short = c.start("root.a", "alice", 0);
    c.gang(&short, "g", 1, 4);
    c.run_for(INTERVAL);
    assert!(c.poll(&long, AmReport::default()).preemption.is_none());
    // Past 240 GPU-seconds the long job is on the next level: the short one preempts it.
    c.run_for(10_000 + INTERVAL);
    assert!(c.poll(&long, AmReport::default()).preemption.is_some());
    assert_eq!(reasons(&c, &long), vec![Reason::LasLevel; 2]);
    c.run_for(WAIT + INTERVAL);
    assert_eq!(c.live_gpus(&short), 4);
}

#[test]
fn another_users_long_job_is_not_a_las_victim_under_fairshare() {
    let mut q = fair_leaf("root.a", 100.0);
    q.las = LasSpec {
        thresholds_gpu_s: vec![8 * 30],
        promotion_factor: 0.0,
    };
    let mut c = Cluster::new(fair_conf(vec![q], 0), 2, 4);
    let long = c.start("root.a", "alice", 0);
    c.gang(&long, "g", 2, 4);
    c.run_for(60_000);
    // bob has used nothing, but alice's usage is all in the running job (no fair-share
    // victim), and least attained service stays within a user.
    let bob = c.start("root.a", "bob", 0);
    c.gang(&bob, "g", 1, 4);
    c.run_for(3 * INTERVAL + WAIT);
    assert_eq!(c.env.app(&long).preemption.preemptions, 0);
}

// --- Between sibling queues ---

/// `n` plain (non-gang) containers of `gpus` GPUs for `app`.
fn plain(c: &mut Cluster, app: &ApplicationId, n: u32, gpus: i64) {
    let att = c.att(app);
    let ask = AskUpdate {
        image: None,
        label: None,
        tags: Vec::new(),
        constraint: None,
        priority: 1,
        allocation_request_id: 0,
        resource_name: "*".into(),
        capability: Resource::new(1024, 1).with(GPU, gpus),
        num_containers: n,
        relax_locality: true,
        gang: None,
        cpu: None,
    };
    c.env
        .core
        .am_allocate(&att, 0, vec![ask], vec![], 0.1, c.env.now)
        .expect("ask");
    c.env.step();
    c.nm_round();
}

/// Sibling leaves a and b (25% each, maximum `max_b`% for b) and c (50%) under root, all
/// `fairshare` unless `b_fifo`; 4 nodes of 4 GPUs; no preemption.
fn siblings(b_fifo: bool, max_b: f64) -> Cluster {
    let mut b = fair_leaf("root.b", 25.0);
    if b_fifo {
        b.ordering = OrderingPolicy::Fifo;
    }
    b.max_capacity = MaxCapacitySpec::Percent(max_b);
    let mut cf = fair_conf(
        vec![fair_leaf("root.a", 25.0), b, fair_leaf("root.c", 50.0)],
        0,
    );
    cf.preemption.enabled = false;
    Cluster::new(cf, 4, 4)
}

/// Queue a used the whole cluster for ten minutes; then c fills it while a and b each ask
/// for all of it in 4-GPU containers; then c gives it back, and one pass shares it out.
/// Returns what a and b then hold.
fn a_used_the_cluster_then_both_ask(c: &mut Cluster) -> (i64, i64) {
    let past = c.start("root.a", "alice", 0);
    plain(c, &past, 4, 4);
    assert_eq!(c.gpus_used("root.a"), 16);
    c.run_for(600_000);
    release_workers(c, &past);
    let blocker = c.start("root.c", "xavier", 0);
    plain(c, &blocker, 4, 4);
    assert_eq!(c.gpus_used("root.c"), 16);
    let a = c.start("root.a", "carol", 0);
    let b = c.start("root.b", "bob", 0);
    plain(c, &a, 4, 4);
    plain(c, &b, 4, 4);
    c.run_for(2_000);
    assert_eq!((c.gpus_used("root.a"), c.gpus_used("root.b")), (0, 0));
    release_workers(c, &blocker);
    (c.gpus_used("root.a"), c.gpus_used("root.b"))
}

#[test]
fn the_slack_above_guarantees_goes_to_the_queue_below_its_share_of_decayed_usage() {
    let mut c = siblings(false, 100.0);
    let (a, b) = a_used_the_cluster_then_both_ask(&mut c);
    assert_eq!(a, 4, "a gets its guarantee, however much it used");
    assert_eq!(
        b, 12,
        "b, which used nothing, gets the slack above the guarantees"
    );
}

#[test]
fn a_maximum_stays_hard_against_decayed_usage() {
    let mut c = siblings(false, 50.0);
    let (a, b) = a_used_the_cluster_then_both_ask(&mut c);
    assert_eq!(b, 8, "b stops at its maximum");
    assert_eq!(a, 8, "a gets the rest");
}

#[test]
fn siblings_with_a_leaf_of_another_ordering_keep_yarns_order() {
    let mut c = siblings(true, 100.0);
    let (a, b) = a_used_the_cluster_then_both_ask(&mut c);
    // Used over guaranteed, as YARN: the slack is shared.
    assert_eq!((a, b), (8, 8));
}

// --- The property: a user below their share is never preempted for one above it ---

fn gpus(n: i64) -> Resource {
    Resource::new(1024 * n, n).with(GPU, n)
}

fn cid(app: ApplicationId, n: u64) -> ContainerId {
    ContainerId::new(ApplicationAttemptId::new(app, 1), 0, n)
}

#[derive(Debug, Clone)]
struct UserCase {
    weight: u8,
    /// GPU-seconds used before (a finished job).
    past_gpu_s: u64,
    /// Running one-GPU applications and how long each has run (s).
    running: Vec<u64>,
}

fn user_case() -> impl Strategy<Value = UserCase> {
    (
        1u8..4,
        prop::sample::select(vec![0u64, 100, 5_000, 50_000]),
        prop::collection::vec(1u64..3_000, 0..4),
    )
        .prop_map(|(weight, past_gpu_s, running)| UserCase {
            weight,
            past_gpu_s,
            running,
        })
}

/// The users' decayed usage over weight in `leaf`, by name, and whether each is below
/// their share (as `queue -fairshare` shows it).
fn standings(s: &Scheduler, leaf: QueueIdx) -> BTreeMap<String, (f64, bool, bool)> {
    let path = s.tree().queues[leaf].spec.path.clone();
    let view = s.fairshare_view();
    let q = view.into_iter().find(|q| q.queue == path).expect("leaf");
    q.users
        .into_iter()
        .map(|u| {
            let per_weight = u.decayed_usage / u.weight;
            let below = u.norm_usage < u.norm_share;
            let above = u.norm_usage > u.norm_share;
            (u.user, (per_weight, below, above))
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Over random users (shares, past usage, running jobs of any age) and a waiting job of
    /// any of them: no preemption round takes from a user below their share for one above
    /// it; a fair-share victim's user is above their share and the preemptor's below, and
    /// stays above the preemptor's even with every victim's work refunded.
    #[test]
    fn a_user_below_their_share_is_never_preempted_for_one_above_it(
        users in prop::collection::vec(user_case(), 2..5),
        waiter in 0usize..5,
        factor in prop::sample::select(vec![1.0f64, 2.0, 4.0]),
    ) {
        let mut sc = SchedulerConf::single_default_queue();
        let mut a = fair_leaf("root.a", 100.0);
        let names: Vec<String> = (0..users.len()).map(|i| format!("u{i}")).collect();
        a.fairshare.user_weights = names
            .iter()
            .zip(&users)
            .map(|(n, u)| (n.clone(), f64::from(u.weight)))
            .collect();
        a.las.thresholds_gpu_s = vec![1_000_000_000];
        sc.root.children = vec![a];
        sc.fairshare.half_life_ms = H;
        let running: i64 = users.iter().map(|u| u.running.len() as i64).sum();
        let mut s = Scheduler::new(sc, Resource::new(128, 1));
        let node = NodeId::new("n1", 1);
        s.add_node(node.clone(), "/r".into(), gpus(running.max(1)), Resource::zero());
        let leaf = s.tree().leaf("root.a").expect("root.a");
        let t0 = 10_000_000;
        let records = names
            .iter()
            .zip(&users)
            .filter(|(_, u)| u.past_gpu_s > 0)
            .map(|(n, u)| crate::core::scheduler::FairshareRecord {
                queue: "root.a".into(),
                user: n.clone(),
                usage: crate::core::scheduler::decayed_usage::DecayedUsage {
                    decayed: u.past_gpu_s as f64,
                    raw: u.past_gpu_s as f64,
                    at: 0,
                },
            })
            .collect();
        s.restore_fairshare(records);
        // Every running job started at its own time and holds one GPU until now.
        let end = t0 + 3_000_000;
        let mut starts: Vec<(u64, ApplicationId, &str)> = Vec::new();
        let mut n = 1;
        for (name, u) in names.iter().zip(&users) {
            for ran_s in &u.running {
                starts.push((end - ran_s * 1000, ApplicationId::new(7, n), name.as_str()));
                n += 1;
            }
        }
        starts.sort();
        let mut cands = Vec::new();
        for (seq, (at, id, user)) in (1..).zip(starts.iter()) {
            s.set_now(*at);
            s.add_app(*id, leaf, user, 0, seq, Resource::zero());
            s.charge(id, &node, &gpus(1));
            cands.push(Candidate {
                app: *id,
                gang: None,
                containers: vec![(cid(*id, 1), node.clone(), gpus(1))],
                total: gpus(1),
                lost_gpu_ms: end - at,
                shrink: None,
                whole_app: false,
            });
        }
        s.set_now(end);
        let waiting_user = &names[waiter % names.len()];
        let w = ApplicationId::new(8, 1);
        s.add_app(w, leaf, waiting_user, 0, 1_000, Resource::zero());
        s.set_ask(&w, AskKey::default(), Ask::new(gpus(1), 1));
        let before = standings(&s, leaf);
        let rate = BillingWeights::default().per_second(&gpus(1));
        let pconf = crate::core::PreemptionConf {
            enabled: true,
            intra_queue: true,
            min_runtime_ms: 0,
            total_preemption_per_round: 1.0,
            fairshare_usage_factor: factor,
            ..crate::core::PreemptionConf::default()
        };
        let waiting = s.preemptors(&|_| false);
        let mut round = Candidates::new(cands.clone(), Vec::new);
        let choices = s.preemption_round(&mut round, &pconf, waiting);
        for ch in &choices {
            let p_user = &s.app(&ch.preemptor).expect("preemptor").user;
            let (p_pw, _, p_above) = before[p_user];
            let mut refunded: BTreeMap<&str, f64> = BTreeMap::new();
            for v in &ch.victims {
                let v_user = &s.app(&cands[*v].app).expect("victim").user;
                let (_, v_below, _) = before[v_user];
                prop_assert!(
                    !(v_below && p_above),
                    "{v_user} (below its share) preempted for {p_user} (above it) by {:?}",
                    ch.reason
                );
                // Every victim here holds one GPU from its start: what it charged is at
                // most its billing rate for as long.
                *refunded.entry(v_user.as_str()).or_default() +=
                    rate * cands[*v].lost_gpu_ms as f64 / 1000.0;
            }
            if ch.reason == Reason::Fairshare {
                prop_assert!(before[p_user].1, "{p_user} is below its share");
                for (v_user, refund) in refunded {
                    let (v_pw, _, v_above) = before[v_user];
                    prop_assert!(v_above, "{v_user} is above its share");
                    let weight = s.tree().queues[leaf].spec.fairshare.weight(v_user);
                    prop_assert!(
                        v_pw - refund / weight > p_pw,
                        "{v_user} would fall below {p_user}: {v_pw} - {refund}/{weight} <= {p_pw}"
                    );
                }
            }
        }
    }
}
