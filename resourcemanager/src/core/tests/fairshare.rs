//! Fair share with memory: users' decayed usage (exact decay across irregular updates,
//! billing by resource weights, preempted work not charged) and the `fairshare` ordering
//! (users below their share ahead of users above it, a bound on any application's wait).

use proptest::prelude::*;
use spindle_common::resource::GPU;
use spindle_common::{ApplicationId, NodeId, QueuePath, Resource};

use super::preemption::{conf, leaf, Cluster, WAIT};
use crate::core::queue_conf::*;
use crate::core::scheduler::{Ask, AskKey, QueueIdx, Scheduler, UserFairshare};

const H: u64 = 3_600_000;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// One `fairshare` leaf `root.a` (wait bound `max_wait_ms`) on one node of `gpus` GPUs.
fn sched(gpus: i64, max_wait_ms: u64, weights: &[(&str, f64)]) -> (Scheduler, QueueIdx) {
    let mut conf = SchedulerConf::single_default_queue();
    let mut a = QueueSpec::new(QueuePath::root().child("a"), CapacitySpec::Percent(100.0));
    a.user_limit_factor = -1.0;
    a.max_am_resource_percent = 1.0;
    a.ordering = OrderingPolicy::Fairshare;
    a.fairshare.max_wait_ms = max_wait_ms;
    a.fairshare.user_weights = weights.iter().map(|(u, w)| (u.to_string(), *w)).collect();
    conf.root.children = vec![a];
    conf.fairshare.half_life_ms = H;
    conf.fairshare.calc_period_ms = 1_000;
    let mut s = Scheduler::new(conf, Resource::new(128, 1));
    s.add_node(
        node(),
        "/r".into(),
        Resource::new(1 << 20, 1024).with(GPU, gpus),
        Resource::zero(),
    );
    let leaf = s.tree().leaf("root.a").expect("root.a");
    (s, leaf)
}

fn node() -> NodeId {
    NodeId::new("n1", 1)
}

fn app(n: u32) -> ApplicationId {
    ApplicationId::new(9, n)
}

fn gpus(n: i64) -> Resource {
    Resource::new(1024 * n, n).with(GPU, n)
}

/// `user`'s application `n` starts holding `r` now.
fn start(s: &mut Scheduler, leaf: QueueIdx, n: u32, user: &str, r: &Resource) {
    s.add_app(app(n), leaf, user, 0, u64::from(n), Resource::zero());
    s.charge(&app(n), &node(), r);
}

/// Application `n` gives `r` back now and is gone.
fn stop(s: &mut Scheduler, n: u32, r: &Resource) {
    s.release(&app(n), &node(), r);
    s.remove_app(&app(n));
}

/// `user`'s application `n` holds `r` from `from` to `to`, then is gone (`from` no earlier
/// than the scheduler's clock: time never goes back).
fn ran(s: &mut Scheduler, leaf: QueueIdx, n: u32, user: &str, r: &Resource, from: u64, to: u64) {
    assert!(from >= s.now());
    s.set_now(from);
    start(s, leaf, n, user, r);
    s.set_now(to);
    stop(s, n, r);
}

fn user(s: &Scheduler, leaf: &str, name: &str) -> UserFairshare {
    s.fairshare_view()
        .into_iter()
        .find(|q| &*q.queue == leaf)
        .and_then(|q| q.users.into_iter().find(|u| u.user == name))
        .unwrap_or_else(|| panic!("{name} has no row in {leaf}"))
}

/// `user`'s application `n` waits for one container of `r`.
fn waits(s: &mut Scheduler, leaf: QueueIdx, n: u32, user: &str, r: &Resource) {
    s.add_app(app(n), leaf, user, 0, u64::from(n), Resource::zero());
    s.set_ask(&app(n), AskKey::default(), Ask::new(r.clone(), 1));
}

#[test]
fn usage_halves_in_exactly_one_half_life_across_irregular_updates() {
    let (mut s, leaf) = sched(8, 0, &[]);
    ran(&mut s, leaf, 1, "u", &gpus(2), 0, 1_800_000);
    let at_end = user(&s, "root.a", "u");
    assert!(at_end.decayed_usage > 0.0);
    // Irregular passes of time, some crossing calc periods, one far apart.
    let mut t = 1_800_000;
    for dt in [1, 999, 1_001, 77_777, 3, 1_000_000, 2_520_219] {
        t += dt;
        s.set_now(t);
        s.refresh_fairshare();
    }
    assert_eq!(t, 1_800_000 + H);
    let later = user(&s, "root.a", "u");
    assert!(
        close(later.decayed_usage, at_end.decayed_usage / 2.0),
        "{} is not half of {}",
        later.decayed_usage,
        at_end.decayed_usage
    );
    assert_eq!(
        later.raw_usage, at_end.raw_usage,
        "raw usage does not decay"
    );
    // Two GPUs (and their vcores and memory) for half an hour, never decayed.
    let rate = BillingWeights::default().per_second(&gpus(2));
    assert!(close(at_end.raw_usage, rate * 1800.0));
}

#[test]
fn an_eight_gpu_job_costs_eight_times_a_one_gpu_job_of_the_same_length() {
    let (mut s, leaf) = sched(9, 0, &[]);
    start(&mut s, leaf, 1, "big", &gpus(8));
    start(&mut s, leaf, 2, "small", &gpus(1));
    s.set_now(600_000);
    stop(&mut s, 1, &gpus(8));
    stop(&mut s, 2, &gpus(1));
    s.set_now(5_000_000);
    let (big, small) = (user(&s, "root.a", "big"), user(&s, "root.a", "small"));
    assert!(close(big.decayed_usage, 8.0 * small.decayed_usage));
    assert!(close(big.raw_usage, 8.0 * small.raw_usage));
    // By default a GPU-second is one billing unit; vcores and memory count little.
    assert!(
        small.raw_usage >= 600.0 && small.raw_usage < 610.0,
        "{}",
        small.raw_usage
    );
}

#[test]
fn preempted_work_is_not_charged() {
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
    assert_eq!(c.live_gpus(&a), 0, "alice's gang was taken back");
    assert!(c.env.app(&a).usage.preempted_ms.get(GPU) >= 16 * 10_000);
    c.run_for(10_000);
    let alice = user(c.env.core.scheduler(), "root.a", "alice");
    // Only her AM (512 MB, 1 vcore) is charged: well under one GPU-second.
    assert!(alice.raw_usage < 1.0, "{alice:?}");
    let bob = user(c.env.core.scheduler(), "root.b", "bob");
    assert!(
        bob.raw_usage >= 8.0 * 10.0,
        "bob's running gang is charged: {bob:?}"
    );
    assert!(bob.billing_rate >= 8.0, "{bob:?}");
}

#[test]
fn the_user_who_used_nothing_goes_first_and_a_share_scales_usage() {
    let (mut s, leaf) = sched(2, 0, &[("heavy", 8.0)]);
    // heavy used 3x what medium did, but has 8x the share.
    start(&mut s, leaf, 1, "heavy", &gpus(1));
    start(&mut s, leaf, 2, "medium", &gpus(1));
    s.set_now(1_000_000);
    stop(&mut s, 2, &gpus(1));
    s.set_now(3_000_000);
    stop(&mut s, 1, &gpus(1));
    // The node is full: everyone waits.
    start(&mut s, leaf, 50, "blocker", &gpus(2));
    waits(&mut s, leaf, 3, "medium", &gpus(1));
    waits(&mut s, leaf, 4, "heavy", &gpus(1));
    waits(&mut s, leaf, 5, "fresh", &gpus(1));
    let order: Vec<ApplicationId> = s.tree().queues[leaf]
        .schedulable
        .iter()
        .map(|e| e.2)
        .collect();
    // blocker holds usage since 3,000,000 but has no waiting application.
    assert_eq!(order, vec![app(5), app(4), app(3)]);
    let places = s.app_places();
    assert_eq!(places[&app(5)].rank, 1);
    assert_eq!(places[&app(3)].rank, 3);
    assert_eq!(places[&app(3)].waiting, 3);
    assert!(places[&app(4)].user.factor > places[&app(3)].user.factor);
    assert_eq!(
        places[&app(5)].user.level_fs,
        None,
        "no usage: infinite level fair share"
    );
}

#[test]
fn no_application_waits_longer_than_the_bound() {
    const BOUND: u64 = 20_000;
    let (mut s, leaf) = sched(1, BOUND, &[]);
    ran(&mut s, leaf, 1, "heavy", &gpus(1), 0, 3_600_000);
    let t0 = 3_600_000;
    s.set_now(t0);
    s.add_app(app(2), leaf, "light", 0, 2, Resource::zero());
    s.charge(&app(2), &node(), &gpus(1));
    waits(&mut s, leaf, 3, "heavy", &gpus(1));
    // Every second the running light job ends and a new light job arrives: without a
    // bound, heavy would wait for ever behind them.
    let mut running = app(2);
    let mut heavy_started = None;
    for i in 0..60u32 {
        let t = t0 + 1_000 * u64::from(i + 1);
        s.set_now(t);
        s.release(&running, &node(), &gpus(1));
        s.remove_app(&running);
        waits(&mut s, leaf, 100 + i, "light", &gpus(1));
        s.refresh_fairshare();
        let placed = s.schedule();
        assert_eq!(placed.len(), 1, "one GPU frees each second");
        running = placed[0].app;
        if running == app(3) {
            heavy_started = Some(t);
            break;
        }
        assert_eq!(
            placed[0].app,
            app(100 + i),
            "a light job goes ahead while heavy is within the bound"
        );
    }
    let started = heavy_started.expect("heavy started");
    assert!(started - t0 >= BOUND, "heavy went ahead only at the bound");
    assert!(
        started - t0 <= BOUND + 1_000,
        "heavy waited {} ms",
        started - t0
    );
}

#[test]
fn a_user_without_a_share_goes_last_and_is_never_promoted() {
    let (mut s, leaf) = sched(1, 1_000, &[("none", 0.0)]);
    s.set_now(10_000);
    start(&mut s, leaf, 50, "blocker", &gpus(1));
    waits(&mut s, leaf, 1, "none", &gpus(1));
    waits(&mut s, leaf, 2, "some", &gpus(1));
    s.set_now(60_000);
    s.refresh_fairshare();
    let places = s.app_places();
    assert!(places[&app(2)].overdue, "past the bound with a share");
    assert!(!places[&app(1)].overdue, "no share: no promotion");
    assert_eq!((places[&app(2)].rank, places[&app(1)].rank), (1, 2));
    assert_eq!(places[&app(1)].user.factor, 0.0);
}

#[derive(Debug, Clone)]
struct UserCase {
    weight: u8,
    used_gpus: i64,
    used_s: u64,
    apps: u8,
}

fn user_case() -> impl Strategy<Value = UserCase> {
    (0u8..4, 0i64..4, 0u64..5_000, 1u8..4).prop_map(|(weight, used_gpus, used_s, apps)| UserCase {
        weight,
        used_gpus,
        used_s,
        apps,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Within one leaf, no application of a user below their share is ordered behind one
    /// of a user above it.
    #[test]
    fn a_user_below_their_share_is_never_behind_one_above_it(
        users in proptest::collection::vec(user_case(), 2..6),
        gap_s in 0u64..20_000,
    ) {
        let names: Vec<String> = (0..users.len()).map(|i| format!("u{i}")).collect();
        let weights: Vec<(&str, f64)> = names
            .iter()
            .zip(&users)
            .map(|(n, u)| (n.as_str(), f64::from(u.weight)))
            .collect();
        let (mut s, leaf) = sched(4, 0, &weights);
        let mut n = 1;
        for (name, u) in names.iter().zip(&users) {
            if u.used_gpus > 0 && u.used_s > 0 {
                let t = s.now();
                ran(&mut s, leaf, n, name, &gpus(u.used_gpus), t, t + u.used_s * 1000);
                n += 1;
            }
        }
        let t = s.now();
        s.set_now(t + gap_s * 1000);
        for (name, u) in names.iter().zip(&users) {
            for _ in 0..u.apps {
                // Larger than the node: they all wait.
                waits(&mut s, leaf, n, name, &gpus(8));
                n += 1;
            }
        }
        let view = s.fairshare_view();
        let rows = &view.iter().find(|q| &*q.queue == "root.a").unwrap().users;
        let standing = |user: &str| {
            let r = rows.iter().find(|r| r.user == user).unwrap();
            (r.norm_usage < r.norm_share, r.norm_usage > r.norm_share)
        };
        let order: Vec<String> = s.tree().queues[leaf]
            .schedulable
            .iter()
            .map(|e| s.app(&e.2).unwrap().user.clone())
            .collect();
        for (i, ahead) in order.iter().enumerate() {
            for behind in &order[i + 1..] {
                let (_, ahead_above) = standing(ahead);
                let (behind_below, _) = standing(behind);
                prop_assert!(
                    !(ahead_above && behind_below),
                    "{behind} (below its share) is behind {ahead} (above it): {order:?} {rows:?}"
                );
            }
        }
    }
}
