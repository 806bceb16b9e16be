//! The monitor's bound before candidates are built (issue 25): a preemptor whose need is
//! beyond the free room of every node and all that the leaves it may take from hold is
//! dropped ([`Scheduler::within_reach`]), and dropping it never changes what a round decides.

use std::collections::BTreeMap;

use proptest::prelude::*;
use spindle_common::resource::GPU;
use spindle_common::{ApplicationAttemptId, ApplicationId, ContainerId, NodeId, Resource};

use super::preemption::leaf;
use crate::core::queue_conf::*;
use crate::core::scheduler::victims::{Candidate, Candidates};
use crate::core::scheduler::{Ask, AskKey, QueueIdx, Scheduler};
use crate::core::PreemptionConf;

fn gpus(n: i64) -> Resource {
    Resource::new(1024 * n, n).with(GPU, n)
}

/// A scheduler with leaves `root.a` (`share_a`%) and `root.b`, `nodes` nodes of `per_node`
/// GPUs; a's applications run `running` containers (GPUs each, first fit), the first
/// `noticed` of them not candidates (as under notice); b's application waits with
/// `asked` containers of `size` GPUs. Returns the scheduler, the candidates, and what they
/// hold per leaf (what the RM's walk hands the bound).
fn case(
    nodes: usize,
    per_node: i64,
    share_a: f64,
    running: &[i64],
    noticed: usize,
    size: i64,
    asked: u32,
) -> (Scheduler, Vec<Candidate>, BTreeMap<QueueIdx, Resource>) {
    let mut sc = SchedulerConf::single_default_queue();
    sc.root.children = vec![leaf("root.a", share_a), leaf("root.b", 100.0 - share_a)];
    let mut s = Scheduler::new(sc, Resource::new(128, 1));
    let ids: Vec<NodeId> = (0..nodes)
        .map(|i| NodeId::new(format!("n{i}"), 1))
        .collect();
    for id in &ids {
        s.add_node(id.clone(), "/r".into(), gpus(per_node), Resource::zero());
    }
    let a = s.tree().leaf("root.a").expect("root.a");
    let b = s.tree().leaf("root.b").expect("root.b");
    let mut free = vec![per_node; nodes];
    let mut cands = Vec::new();
    let mut held: BTreeMap<QueueIdx, Resource> = BTreeMap::new();
    for (i, g) in running.iter().enumerate() {
        let Some(n) = free.iter().position(|f| f >= g) else {
            continue;
        };
        free[n] -= g;
        let app = ApplicationId::new(7, i as u32 + 1);
        s.add_app(app, a, "alice", 0, i as u64 + 1, Resource::zero());
        s.charge(&app, &ids[n], &gpus(*g));
        if i < noticed {
            continue;
        }
        held.entry(a).or_default().add_assign(&gpus(*g));
        let cid = ContainerId::new(ApplicationAttemptId::new(app, 1), 0, 1);
        cands.push(Candidate {
            app,
            gang: None,
            containers: vec![(cid, ids[n].clone(), gpus(*g))],
            total: gpus(*g),
            lost_gpu_ms: 1_000,
            shrink: None,
            whole_app: false,
        });
    }
    let w = ApplicationId::new(8, 1);
    s.add_app(w, b, "bob", 0, 1_000, Resource::zero());
    s.set_ask(&w, AskKey::default(), Ask::new(gpus(size), asked));
    (s, cands, held)
}

fn pconf() -> PreemptionConf {
    PreemptionConf {
        enabled: true,
        intra_queue: true,
        min_runtime_ms: 0,
        total_preemption_per_round: 1.0,
        ..PreemptionConf::default()
    }
}

#[test]
fn a_preemptor_beyond_all_the_giving_leaves_hold_is_dropped_before_candidates() {
    // 2 nodes of 8 GPUs, a (25%) runs 16 one-GPU containers, 12 of them under notice: b
    // (75%, 12 GPUs) asks 6 GPUs, beyond the 4 a's candidates hold and nothing free.
    let (s, cands, held) = case(2, 8, 25.0, &[1; 16], 12, 1, 6);
    let c = pconf();
    let waiting = s.round_preemptors(s.preemptors(&|_| false));
    assert_eq!(waiting.len(), 1, "b waits under its guarantee");
    assert!(s.within_reach(&c, waiting, &held).is_empty());
    // The round with it finds nothing either.
    let mut round = Candidates::new(cands, Vec::new);
    assert!(s
        .preemption_round(&mut round, &c, s.preemptors(&|_| false))
        .is_empty());
    // Within reach (3 GPUs asked): kept, and served.
    let (s, cands, held) = case(2, 8, 25.0, &[1; 16], 12, 1, 3);
    let waiting = s.round_preemptors(s.preemptors(&|_| false));
    assert_eq!(s.within_reach(&c, waiting, &held).len(), 1);
    let mut round = Candidates::new(cands, Vec::new);
    let chosen = s.preemption_round(&mut round, &c, s.preemptors(&|_| false));
    assert_eq!(chosen.len(), 1, "{chosen:?}");
    assert_eq!(chosen[0].victims.len(), 3);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Over random clusters and shares: a round over the preemptors the bound keeps decides
    /// exactly what a round over all of them does.
    #[test]
    fn dropping_what_is_beyond_reach_never_changes_a_round(
        nodes in 1usize..5,
        per_node in prop::sample::select(vec![4i64, 8]),
        share_a in prop::sample::select(vec![10.0f64, 25.0, 50.0]),
        running in prop::collection::vec(1i64..5, 0..24),
        noticed in 0usize..12,
        size in 1i64..5,
        asked in 1u32..12,
    ) {
        let (s, cands, held) = case(nodes, per_node, share_a, &running, noticed, size, asked);
        let c = pconf();
        let all = s.round_preemptors(s.preemptors(&|_| false));
        let kept = s.within_reach(&c, s.round_preemptors(s.preemptors(&|_| false)), &held);
        prop_assert!(kept.len() <= all.len());
        let mut round = Candidates::new(cands.clone(), Vec::new);
        let over_all = s.preemption_round(&mut round, &c, all);
        let mut round = Candidates::new(cands, Vec::new);
        let over_kept = s.preemption_round(&mut round, &c, kept);
        prop_assert_eq!(over_all, over_kept);
    }
}

#[test]
fn a_node_used_beyond_its_total_hides_no_other_nodes_room() {
    let mut sc = SchedulerConf::single_default_queue();
    sc.root.children = vec![leaf("root.a", 100.0)];
    let mut s = Scheduler::new(sc, Resource::new(128, 1));
    let (n0, n1) = (NodeId::new("n0", 1), NodeId::new("n1", 1));
    // n0 re-registered with 8 GPUs while 10 run on it; n1 is empty.
    s.add_node(n0.clone(), "/r".into(), gpus(8), Resource::zero());
    s.add_node(n1, "/r".into(), gpus(8), Resource::zero());
    let a = s.tree().leaf("root.a").expect("root.a");
    let app = ApplicationId::new(7, 1);
    s.add_app(app, a, "alice", 0, 1, Resource::zero());
    s.charge(&app, &n0, &gpus(10));
    assert_eq!(
        s.nodes().cluster_free(),
        gpus(6),
        "the sum nets n0's overdraft"
    );
    assert_eq!(s.nodes().free_everywhere(), gpus(8), "n1's room, n0's none");
    s.nodes().check().expect("the index's sums");
    // Released back within its total, then empty: the overdraft goes with it.
    s.release(&app, &n0, &gpus(3));
    assert_eq!(s.nodes().free_everywhere(), gpus(9));
    s.release(&app, &n0, &gpus(7));
    assert_eq!(s.nodes().free_everywhere(), gpus(16));
    s.nodes().check().expect("the index's sums");
}
