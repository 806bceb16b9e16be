use super::*;
use proptest::prelude::*;
use spindle_common::{ApplicationAttemptId, ApplicationId};

fn cid(i: u64) -> ContainerId {
    ContainerId::new(
        ApplicationAttemptId::new(ApplicationId::new(1, i as u32 + 1), 1),
        0,
        i + 1,
    )
}

fn curve(rows: &[(u32, f64)]) -> Prediction {
    Prediction::Curve(CpuCurve(rows.iter().map(|(k, v)| (k * 1000, *v)).collect()))
}

fn member(i: u64, gpus: u32, vcores: u32, range: (u32, u32), p: Prediction) -> Member {
    Member {
        id: cid(i),
        gpus,
        vcores,
        range: CpuRange {
            min: range.0,
            max: range.1,
        },
        prediction: p,
        movable: true,
        queue: 0,
    }
}

const OPEN: QueueRoom = QueueRoom {
    grow: u32::MAX,
    give: u32::MAX,
};

/// Synergy's AlexNet (2.94x at 12 CPUs/GPU) and a language model (flat from 1).
fn alexnet() -> Prediction {
    curve(&[(1, 40.0), (3, 100.0), (6, 200.0), (9, 260.0), (12, 294.0)])
}
fn lstm() -> Prediction {
    curve(&[(1, 100.0), (3, 100.0), (12, 100.0)])
}

#[test]
fn parses_policies_ranges_and_tables() {
    assert_eq!(
        CpuPolicy::parse("Adaptive", 3).unwrap(),
        CpuPolicy::Adaptive
    );
    assert_eq!(
        CpuPolicy::parse("static", 3).unwrap(),
        CpuPolicy::Static { cpus_per_gpu: 3 }
    );
    assert!(matches!(
        CpuPolicy::parse("greedy", 3),
        Err(CpuPolicyError::Unknown(_))
    ));
    assert_eq!(
        VcoresAsk::parse("2..12").unwrap(),
        VcoresAsk::Range { min: 2, max: 12 }
    );
    assert_eq!(VcoresAsk::parse("AUTO").unwrap(), VcoresAsk::Auto);
    for bad in ["0..3", "4..2", "3", "a..b", ""] {
        assert!(
            matches!(VcoresAsk::parse(bad), Err(CpuPolicyError::BadRange(_))),
            "{bad}"
        );
    }
    let c = CpuCurve::parse("1:100;3:180;6:260;12:294").unwrap();
    assert_eq!(c.0.len(), 4);
    assert!((c.at(2.0) - 140.0).abs() < 1e-9);
    assert!((c.at(0.5) - 50.0).abs() < 1e-9);
    assert!((c.at(20.0) - 294.0).abs() < 1e-9);
    for bad in ["1:100;1:120", "0:5", "x:1", "2:-1", "3"] {
        assert!(
            matches!(CpuCurve::parse(bad), Err(CpuPolicyError::BadTable { .. })),
            "{bad}"
        );
    }
}

#[test]
fn auto_range_follows_the_node() {
    // 24 CPUs / 8 GPUs, factor 4: one GPU gets 1..12.
    let r = VcoresAsk::Auto.range(1, 24, 8, 4.0).unwrap();
    assert_eq!(r, CpuRange { min: 1, max: 12 });
    // Never above the node.
    let r = VcoresAsk::Auto.range(8, 24, 8, 4.0).unwrap();
    assert_eq!(r, CpuRange { min: 8, max: 24 });
    assert_eq!(VcoresAsk::Fixed.range(1, 24, 8, 4.0), None);
}

#[test]
fn cores_move_from_the_flat_job_to_the_sensitive_one() {
    // One node of 24 CPUs, 8 GPUs: two 4-GPU jobs at the proportional 12 each.
    let m = vec![
        member(0, 4, 12, (4, 48), alexnet()),
        member(1, 4, 12, (4, 48), lstm()),
    ];
    let plan = plan_node(&m, 0, &[OPEN]);
    let to = |i| plan.iter().find(|r| r.container == cid(i)).map(|r| r.to);
    assert_eq!(to(1), Some(4), "the flat job keeps one core per GPU");
    assert_eq!(to(0), Some(20));
}

#[test]
fn noise_in_measured_points_does_not_move_cores() {
    // A flat job measured a hair faster at more cores, beside a job at the top of its
    // curve: a move for under 2% of the receiver's throughput is not made.
    let m = vec![
        member(
            0,
            1,
            3,
            (1, 3),
            curve(&[(1, 500.0), (2, 1000.0), (3, 1000.0)]),
        ),
        member(1, 2, 2, (2, 4), curve(&[(1, 25.0), (2, 25.2)])),
    ];
    assert!(plan_node(&m, 0, &[OPEN]).is_empty());
}

/// Jobs report throughput in their own units (images, tokens, samples per second): the
/// core goes to the job it makes relatively faster, whatever the units' scale.
#[test]
fn a_core_goes_to_the_larger_relative_gain_whatever_the_units() {
    // Tokens per second: +10% for a second core. Images per second: +50%.
    let tokens = curve(&[(1, 100_000.0), (2, 110_000.0)]);
    let images = curve(&[(1, 40.0), (2, 60.0)]);
    let m = vec![
        member(0, 1, 1, (1, 2), tokens),
        member(1, 1, 1, (1, 2), images),
    ];
    let plan = plan_node(&m, 1, &[OPEN]);
    assert_eq!(
        plan,
        vec![Resize {
            container: cid(1),
            from: 1,
            to: 2
        }]
    );
}

#[test]
fn free_cores_go_to_the_largest_gain_and_explore_takes_only_free() {
    let m = vec![
        member(0, 1, 3, (1, 12), alexnet()),
        member(1, 1, 3, (1, 12), Prediction::Explore),
        member(2, 1, 3, (1, 12), lstm()),
    ];
    // No free core: the explored job takes nothing from the others, but the flat job's
    // cores go to AlexNet.
    let plan = plan_node(&m, 0, &[OPEN]);
    assert!(plan.iter().all(|r| r.container != cid(1)));
    // Free cores: exploration first (optimistic), then AlexNet.
    let plan = plan_node(&m, 20, &[OPEN]);
    let to = |i| plan.iter().find(|r| r.container == cid(i)).map(|r| r.to);
    assert_eq!(to(1), Some(12));
    assert_eq!(to(0), Some(12));
}

#[test]
fn a_queue_at_its_maximum_only_swaps_inside_and_guarantees_hold() {
    // Queue 0 (AlexNet) may not grow; queue 1 (flat) may give.
    let mut m = vec![
        member(0, 1, 3, (1, 12), alexnet()),
        member(1, 1, 3, (1, 12), lstm()),
    ];
    m[1].queue = 1;
    let rooms = [
        QueueRoom { grow: 0, give: 0 },
        QueueRoom {
            grow: u32::MAX,
            give: 0,
        },
    ];
    assert!(plan_node(&m, 10, &rooms).is_empty());
    // Queue 0 may grow by 2, queue 1 give 1: one core taken, one free.
    let rooms = [
        QueueRoom { grow: 2, give: 0 },
        QueueRoom { grow: 0, give: 1 },
    ];
    let plan = plan_node(&m, 1, &rooms);
    let to = |i| plan.iter().find(|r| r.container == cid(i)).map(|r| r.to);
    assert_eq!(to(0), Some(5));
    assert_eq!(to(1), Some(2));
}

#[test]
fn a_job_below_its_floor_is_brought_up_whatever_the_gain() {
    // DeepSpeech granted one core where AlexNet holds the rest: one more core gains it
    // no more than AlexNet loses, yet its floor (its proportional throughput) comes first.
    let deepspeech = curve(&[(1, 60.0), (3, 100.0)]);
    let m = vec![
        member(0, 1, 9, (1, 12), alexnet()).guarantee(3),
        member(1, 1, 1, (1, 12), deepspeech).guarantee(3),
    ];
    let plan = plan_node(&m, 0, &[OPEN]);
    let to = |i| plan.iter().find(|r| r.container == cid(i)).map(|r| r.to);
    assert_eq!(to(1), Some(3));
    assert_eq!(to(0), Some(7));
    // A container resized within the interval is not touched by the round.
    let mut resting = m.clone();
    resting[0].movable = false;
    assert!(plan_node(&resting, 0, &[OPEN]).is_empty());
}

#[test]
fn a_call_back_takes_the_cheapest_cores_down_to_each_minimum() {
    // Both above their share of 3: the language model's cores cost nothing, AlexNet's do.
    let m = vec![
        member(0, 1, 9, (3, 12), alexnet()),
        member(1, 1, 5, (3, 12), lstm()),
        member(2, 1, 4, (3, 12), Prediction::Explore),
    ];
    let r = reclaim(&m, 2);
    let to = |r: &[Resize], i| r.iter().find(|x| x.container == cid(i)).map(|x| x.to);
    assert_eq!(to(&r, 0), None, "AlexNet loses most: left alone");
    assert_eq!(r.iter().map(|x| x.from - x.to).sum::<u32>(), 2);
    // Asked for more than all hold above their minima: each at its minimum, no lower.
    let r = reclaim(&m, 100);
    assert_eq!(
        (to(&r, 0), to(&r, 1), to(&r, 2)),
        (Some(3), Some(3), Some(3))
    );
    assert!(reclaim(&m, 0).is_empty());
}

#[test]
fn no_job_is_taken_below_its_proportional_throughput() {
    // DeepSpeech loses speed below 3 per GPU: AlexNet may not take those cores.
    let deepspeech = curve(&[(1, 60.0), (3, 100.0)]);
    let m = vec![
        member(0, 1, 3, (1, 12), alexnet()).guarantee(3),
        member(1, 1, 3, (1, 12), deepspeech).guarantee(3),
        member(2, 1, 3, (1, 12), lstm()).guarantee(3),
    ];
    assert_eq!(m[1].range.min, 3);
    assert_eq!(m[2].range.min, 1, "a flat job's floor is one core");
    let plan = plan_node(&m, 0, &[OPEN]);
    let to = |i| plan.iter().find(|r| r.container == cid(i)).map(|r| r.to);
    assert_eq!(to(1), None);
    assert_eq!(to(2), Some(1));
    assert_eq!(to(0), Some(5));
}

fn arb_curve() -> impl Strategy<Value = Prediction> {
    prop_oneof![
        6 => prop::collection::btree_map((1u32..16).prop_map(|k| k * 1000), 1.0f64..500.0, 1..5)
            .prop_map(|m| Prediction::Curve(CpuCurve(m))),
        1 => Just(Prediction::Explore),
        1 => Just(Prediction::Unknown),
    ]
}

prop_compose! {
    fn arb_member(i: u64)(gpus in 1u32..5, min in 1u32..6, span in 0u32..20, off in 0u32..20,
                          p in arb_curve(), movable in prop::bool::weighted(0.8),
                          queue in 0usize..3) -> Member {
        let max = min + span;
        Member { id: cid(i), gpus, vcores: min + off.min(span),
                 range: CpuRange { min, max }, prediction: p, movable, queue }
    }
}

fn arb_node() -> impl Strategy<Value = (Vec<Member>, u32, Vec<QueueRoom>)> {
    let members = (1usize..7).prop_flat_map(|n| (0..n as u64).map(arb_member).collect::<Vec<_>>());
    let rooms = prop::collection::vec((0u32..10, 0u32..10), 3).prop_map(|v| {
        v.into_iter()
            .map(|(grow, give)| QueueRoom { grow, give })
            .collect()
    });
    (members, 0u32..30, rooms)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// A job's throughput unit does not move cores: scaling every curve of a node by its
    /// own factor gives the same plan (powers of two, so the scaling itself is exact).
    #[test]
    fn plans_do_not_depend_on_throughput_units(
        (members, free, rooms) in arb_node(),
        scales in prop::collection::vec(prop::sample::select(vec![0.25, 1.0, 64.0, 1_048_576.0]), 8),
    ) {
        let scaled: Vec<Member> = members
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let mut m = m.clone();
                if let Prediction::Curve(c) = &mut m.prediction {
                    let k = scales[i % scales.len()];
                    c.0.values_mut().for_each(|v| *v *= k);
                }
                m
            })
            .collect();
        prop_assert_eq!(plan_node(&members, free, &rooms), plan_node(&scaled, free, &rooms));
    }

    /// Never outside a range; no frozen container moves; the node and the queues' maxima
    /// and guarantees hold; and no move is left that gains (cores went toward the larger
    /// predicted gain).
    #[test]
    fn plans_keep_every_limit_and_end_at_no_gain((members, free, rooms) in arb_node()) {
        let plan = plan_node(&members, free, &rooms);
        let mut size: Vec<u32> = members.iter().map(|m| m.vcores).collect();
        for r in &plan {
            let i = members.iter().position(|m| m.id == r.container).unwrap();
            let m = &members[i];
            prop_assert!(m.movable, "a frozen container was resized");
            prop_assert!(r.to >= m.range.min && r.to <= m.range.max, "{r:?} outside {:?}", m.range);
            prop_assert_eq!(r.from, m.vcores);
            size[i] = r.to;
        }
        let before: i64 = members.iter().map(|m| i64::from(m.vcores)).sum();
        let after: i64 = size.iter().map(|&s| i64::from(s)).sum();
        prop_assert!(after - before <= i64::from(free), "more cores than the node had free");
        for (q, room) in rooms.iter().enumerate() {
            let delta: i64 = members.iter().zip(&size)
                .filter(|(m, _)| m.queue == q)
                .map(|(m, s)| i64::from(*s) - i64::from(m.vcores))
                .sum();
            prop_assert!(delta <= i64::from(room.grow), "queue {q} above its maximum");
            prop_assert!(-delta <= i64::from(room.give), "queue {q} below its guarantee");
        }
        // Local optimum inside one queue: no movable pair where one more core for a gains
        // more than one less for b loses by more than a move is worth (both measured).
        for (a, ma) in members.iter().enumerate() {
            for (b, mb) in members.iter().enumerate() {
                if a == b || ma.queue != mb.queue { continue; }
                if !matches!(ma.prediction, Prediction::Curve(_)) { continue; }
                if let (Some(g), Some(l)) = (ma.gain(size[a]), mb.loss(size[b])) {
                    prop_assert!(g <= l + move_worth() + 1e-12, "a move from {b} to {a} would still gain");
                }
            }
        }
    }
}
