//! Node labels, node attributes and placement constraints on the pure core: exclusive and
//! non-exclusive partitions (lending and taking back), per-label queue capacities, every
//! constraint kind, constraints and partitions inside gangs, the refusals, and a property
//! test that no node of an exclusive partition runs a container asked for elsewhere.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use spindle_common::resource::GPU;
use spindle_common::{ApplicationId, NodeId, Resource};

use super::preemption::{conf, leaf, Cluster};
use crate::core::labels::{AttributeOp, LabelChange};
use crate::core::queue_conf::{AccessibleLabels, LabelCapacity};
use crate::core::scheduler::gang::GangRequest;
use crate::core::scheduler::placement::{Constraint, Scope, TagScope, TagTarget};
use crate::core::*;

/// Applies a label change as the driver does (plan, then set), or returns the refusal.
fn change(c: &mut Cluster, ch: LabelChange) -> Result<(), CoreError> {
    let next = c.env.core.plan_labels(ch)?;
    c.env.core.set_labels(next, c.env.now);
    c.env.step();
    Ok(())
}

fn add(c: &mut Cluster, labels: &[(&str, bool)]) {
    change(
        c,
        LabelChange::AddLabels(labels.iter().map(|(l, e)| (l.to_string(), *e)).collect()),
    )
    .expect("add labels");
}

fn label_nodes(c: &mut Cluster, nodes: &[usize], label: &str) {
    let nodes = nodes
        .iter()
        .map(|i| (c.nodes[*i].to_string(), vec![label.to_string()]))
        .collect();
    change(
        c,
        LabelChange::ReplaceNodeLabels {
            nodes,
            fail_on_unknown: true,
        },
    )
    .expect("label nodes");
}

fn with_label(path: &str, pct: f64, label: &str, cap: f64) -> crate::core::queue_conf::QueueSpec {
    let mut q = leaf(path, pct);
    q.label_capacities.insert(
        label.into(),
        LabelCapacity {
            capacity: cap,
            max_capacity: 100.0,
        },
    );
    q
}

/// An ask of `n` one-GPU containers in `label` with `tags` and `constraint`.
fn ask(
    c: &mut Cluster,
    app: &ApplicationId,
    key: i64,
    n: u32,
    label: Option<&str>,
    tags: &[&str],
    constraint: Option<Constraint>,
) -> Result<AllocateReply, CoreError> {
    let att = c.att(app);
    let a = AskUpdate {
        image: None,
        label: label.map(str::to_string),
        tags: tags.iter().map(|t| t.to_string()).collect(),
        constraint,
        priority: 1,
        allocation_request_id: key,
        resource_name: "*".into(),
        capability: Resource::new(1024, 1).with(GPU, 1),
        num_containers: n,
        relax_locality: true,
        gang: None,
        cpu: None,
    };
    let r = c
        .env
        .core
        .am_allocate(&att, 0, vec![a], vec![], 0.1, c.env.now);
    c.env.step();
    r
}

/// The nodes (by index) of `app`'s live non-AM containers, with their counts.
fn placed(c: &Cluster, app: &ApplicationId) -> BTreeMap<usize, usize> {
    let mut out = BTreeMap::new();
    for x in c.env.core.containers().values() {
        if x.is_live() && !x.is_am && x.id.application_id() == *app {
            let i = c
                .nodes
                .iter()
                .position(|n| *n == x.node)
                .expect("known node");
            *out.entry(i).or_insert(0) += 1;
        }
    }
    out
}

fn tag(scope: TagScope, t: &str) -> TagTarget {
    TagTarget {
        scope,
        tag: t.into(),
    }
}

fn not_in_node(t: &str) -> Constraint {
    Constraint::Cardinality {
        scope: Scope::Node,
        target: tag(TagScope::This, t),
        min: 0,
        max: 0,
    }
}

#[test]
fn an_exclusive_partition_takes_only_its_own_asks() {
    let mut q = with_label("root.a", 100.0, "h100", 100.0);
    q.accessible_labels = Some(AccessibleLabels::Any);
    let mut c = Cluster::new(conf(vec![q], 0), 4, 4);
    add(&mut c, &[("h100", true)]);
    label_nodes(&mut c, &[2, 3], "h100");
    let app = c.start("a", "u", 0);
    ask(&mut c, &app, 1, 12, None, &[], None).expect("ask");
    let on = placed(&c, &app);
    assert_eq!(
        on.values().sum::<usize>(),
        8,
        "only the default nodes' 8 GPUs"
    );
    assert!(on.keys().all(|i| *i < 2), "nothing on h100 nodes: {on:?}");
    ask(&mut c, &app, 2, 8, Some("h100"), &[], None).expect("ask");
    let on = placed(&c, &app);
    assert_eq!(on.get(&2), Some(&4));
    assert_eq!(on.get(&3), Some(&4));
    // The REST views: the node's partition and the label's nodes.
    assert_eq!(c.env.core.partition_of(&c.nodes[2]), "h100");
    assert_eq!(c.env.core.partition_of(&c.nodes[0]), "");
}

#[test]
fn a_non_exclusive_partition_lends_idle_room_and_takes_it_back() {
    let mut c = Cluster::new(
        conf(vec![with_label("root.a", 100.0, "ib", 100.0)], 0),
        4,
        4,
    );
    add(&mut c, &[("ib", false)]);
    label_nodes(&mut c, &[2, 3], "ib");
    let lender = c.start("a", "u", 0);
    ask(&mut c, &lender, 1, 16, None, &[], None).expect("ask");
    let on = placed(&c, &lender);
    assert_eq!(
        on.values().sum::<usize>(),
        16,
        "the idle ib nodes are lent: {on:?}"
    );
    // The partition's own work arrives: the lent containers get notices, then are killed,
    // and the ib asks run there.
    let owner = c.start("a", "v", 0);
    ask(&mut c, &owner, 1, 8, Some("ib"), &[], None).expect("ask");
    c.run_for(super::preemption::WAIT * 3);
    let on = placed(&c, &owner);
    assert_eq!(
        on.values().sum::<usize>(),
        8,
        "ib work took its nodes back: {on:?}"
    );
    assert!(on.keys().all(|i| *i >= 2));
    let lent = placed(&c, &lender);
    assert!(
        lent.keys().all(|i| *i < 2),
        "no lent container left on ib: {lent:?}"
    );
}

#[test]
fn per_label_queue_capacities_share_a_partition() {
    let mut root_children = vec![
        with_label("root.a", 50.0, "h100", 75.0),
        with_label("root.b", 50.0, "h100", 25.0),
    ];
    // a may use at most 75% of h100: b's share stays free for it.
    if let Some(c) = root_children[0].label_capacities.get_mut("h100") {
        c.max_capacity = 75.0;
    }
    let mut c = Cluster::new(conf(root_children, 0), 5, 4);
    add(&mut c, &[("h100", true)]);
    label_nodes(&mut c, &[1, 2, 3, 4], "h100");
    let a = c.start("a", "u", 0);
    let b = c.start("b", "v", 0);
    // Both ask for the whole partition at once (16 GPUs).
    let att_a = c.att(&a);
    let att_b = c.att(&b);
    let mk = |n| AskUpdate {
        image: None,
        label: Some("h100".into()),
        tags: vec![],
        constraint: None,
        priority: 1,
        allocation_request_id: 1,
        resource_name: "*".into(),
        capability: Resource::new(1024, 1).with(GPU, 1),
        num_containers: n,
        relax_locality: true,
        gang: None,
        cpu: None,
    };
    c.env
        .core
        .am_allocate(&att_a, 0, vec![mk(16)], vec![], 0.1, c.env.now)
        .expect("a");
    c.env
        .core
        .am_allocate(&att_b, 0, vec![mk(16)], vec![], 0.1, c.env.now)
        .expect("b");
    c.env.step();
    let in_h100 = |app| {
        placed(&c, app)
            .iter()
            .filter(|(i, _)| **i >= 1)
            .map(|(_, n)| *n)
            .sum::<usize>()
    };
    let (ga, gb) = (in_h100(&a), in_h100(&b));
    assert_eq!((ga, gb), (12, 4), "a's maximum is 75% of the 16 GPUs");
    let views = c.env.core.scheduler().tree();
    let qa = views.find("root.a").expect("a");
    let share = &views.queues[qa].parts["h100"];
    assert_eq!(share.abs_capacity, 75.0);
}

#[test]
fn an_ask_for_a_label_its_queue_cannot_access_or_that_does_not_exist_is_refused() {
    let mut q = leaf("root.a", 100.0);
    q.accessible_labels = Some(AccessibleLabels::Only(BTreeSet::new()));
    let mut c = Cluster::new(conf(vec![q], 0), 2, 4);
    add(&mut c, &[("h100", true)]);
    let app = c.start("a", "u", 0);
    let e = ask(&mut c, &app, 1, 1, Some("h100"), &[], None).expect_err("not accessible");
    assert!(matches!(e, CoreError::LabelNotAccessible { .. }), "{e}");
    let e = ask(&mut c, &app, 1, 1, Some("nope"), &[], None).expect_err("unknown");
    assert_eq!(e, CoreError::UnknownLabel("nope".into()));
    assert!(e.to_string().contains("addToClusterNodeLabels"));
}

#[test]
fn anti_affinity_spreads_one_per_node_and_too_many_is_refused() {
    let mut c = Cluster::new(conf(vec![leaf("root.a", 100.0)], 0), 4, 4);
    let app = c.start("a", "u", 0);
    ask(&mut c, &app, 1, 4, None, &["zk"], Some(not_in_node("zk"))).expect("ask");
    let on = placed(&c, &app);
    assert_eq!(on.len(), 4, "one per node: {on:?}");
    assert!(on.values().all(|n| *n == 1));
    let e = ask(&mut c, &app, 2, 5, None, &["zk"], Some(not_in_node("zk")))
        .expect_err("more anti-affine members than nodes");
    assert!(matches!(e, CoreError::Unsatisfiable(_)), "{e}");
    assert!(e.to_string().contains("only 4 nodes"), "{e}");
}

#[test]
fn affinity_cardinality_and_attributes_choose_the_nodes() {
    let mut c = Cluster::new(conf(vec![leaf("root.a", 100.0)], 0), 4, 4);
    change(
        &mut c,
        LabelChange::Attributes {
            op: AttributeOp::Add,
            nodes: vec![("n1".into(), vec![("os".into(), "ubuntu".into())])],
            fail_on_unknown: true,
        },
    )
    .expect("attributes");
    let hb = c.start("a", "u", 0);
    // Two hbase containers on n1 (by attribute).
    let on_ubuntu = Constraint::Attribute {
        name: "rm.yarn.io/os".into(),
        equal: true,
        values: vec!["ubuntu".into()],
    };
    ask(&mut c, &hb, 1, 2, None, &["hbase"], Some(on_ubuntu)).expect("ask");
    assert_eq!(placed(&c, &hb), BTreeMap::from([(1, 2)]));
    // Another application's containers go where hbase is (IN all/hbase) ...
    let app = c.start("a", "v", 0);
    let near = Constraint::Cardinality {
        scope: Scope::Node,
        target: tag(TagScope::All, "hbase"),
        min: 1,
        max: u32::MAX,
    };
    ask(&mut c, &app, 1, 1, None, &["spark"], Some(near)).expect("ask");
    assert_eq!(placed(&c, &app), BTreeMap::from([(1, 1)]));
    // ... and where there is at most 1 spark (CARDINALITY 0..1 on all/spark) but not on
    // the ubuntu node (!=): n1 is out by attribute, so elsewhere.
    let card = Constraint::And(vec![
        Constraint::Cardinality {
            scope: Scope::Node,
            target: tag(TagScope::All, "spark"),
            min: 0,
            max: 0,
        },
        Constraint::Attribute {
            name: "rm.yarn.io/os".into(),
            equal: false,
            values: vec!["ubuntu".into()],
        },
    ]);
    ask(&mut c, &app, 2, 3, None, &["spark"], Some(card)).expect("ask");
    let on = placed(&c, &app);
    assert_eq!(on.get(&1), Some(&1), "{on:?}");
    assert_eq!(on.values().sum::<usize>(), 4);
    assert!([0, 2, 3].iter().all(|i| on.get(i) == Some(&1)), "{on:?}");
}

#[test]
fn a_gang_is_planned_whole_inside_its_partition_and_constraint() {
    let mut c = Cluster::new(
        conf(vec![with_label("root.a", 100.0, "h100", 100.0)], 0),
        6,
        4,
    );
    add(&mut c, &[("h100", true)]);
    label_nodes(&mut c, &[3, 4, 5], "h100");
    change(
        &mut c,
        LabelChange::Attributes {
            op: AttributeOp::Replace,
            nodes: vec![
                ("n4".into(), vec![("model".into(), "H100-SXM".into())]),
                ("n5".into(), vec![("model".into(), "H100-SXM".into())]),
            ],
            fail_on_unknown: true,
        },
    )
    .expect("attributes");
    let app = c.start("a", "u", 0);
    let att = c.att(&app);
    let gang = |n: u32| AskUpdate {
        image: None,
        label: Some("h100".into()),
        tags: vec!["worker".into()],
        constraint: Some(Constraint::And(vec![
            Constraint::Attribute {
                name: "rm.yarn.io/model".into(),
                equal: true,
                values: vec!["H100-SXM".into()],
            },
            not_in_node("worker"),
        ])),
        priority: 1,
        allocation_request_id: 1,
        resource_name: "*".into(),
        capability: Resource::new(1024, 1).with(GPU, 4),
        num_containers: n,
        relax_locality: true,
        gang: Some(("g".into(), GangRequest::default())),
        cpu: None,
    };
    // Three whole-node members cannot fit on the two H100-SXM nodes: nothing is granted
    // (not two of three), and the gang says how far it got.
    let r = c
        .env
        .core
        .am_allocate(&att, 0, vec![gang(3)], vec![], 0.1, c.env.now)
        .expect("gang of 3");
    c.env.step();
    assert!(placed(&c, &app).is_empty());
    assert!(r.gangs[0].diagnostics.contains("2 of 3"), "{:?}", r.gangs);
    c.env
        .core
        .am_allocate(&att, 0, vec![gang(2)], vec![], 0.1, c.env.now)
        .expect("gang");
    c.env.step();
    assert_eq!(placed(&c, &app), BTreeMap::from([(4, 1), (5, 1)]));
}

#[test]
fn label_changes_are_refused_whole_with_a_reason() {
    let mut c = Cluster::new(
        conf(vec![with_label("root.a", 100.0, "h100", 100.0)], 0),
        2,
        4,
    );
    add(&mut c, &[("h100", true), ("ib", false)]);
    label_nodes(&mut c, &[1], "ib");
    let before = c.env.core.node_labels().clone();
    let cases = vec![
        (
            LabelChange::AddLabels(vec![("bad label".into(), true)]),
            "invalid",
        ),
        (
            LabelChange::AddLabels(vec![("ib".into(), true)]),
            "already exists",
        ),
        (LabelChange::RemoveLabels(vec!["ib".into()]), "node n1:1"),
        (
            LabelChange::RemoveLabels(vec!["h100".into()]),
            "queue root.a",
        ),
        (
            LabelChange::ReplaceNodeLabels {
                nodes: vec![
                    ("n0:1".into(), vec!["h100".into()]),
                    ("n1:1".into(), vec!["nope".into()]),
                ],
                fail_on_unknown: true,
            },
            "nope",
        ),
        (
            LabelChange::ReplaceNodeLabels {
                nodes: vec![("ghost".into(), vec!["ib".into()])],
                fail_on_unknown: true,
            },
            "not known",
        ),
        (
            LabelChange::ReplaceNodeLabels {
                nodes: vec![("n0".into(), vec!["ib".into(), "h100".into()])],
                fail_on_unknown: false,
            },
            "at most one label",
        ),
        (
            LabelChange::Attributes {
                op: AttributeOp::Add,
                nodes: vec![("n0".into(), vec![("nm.yarn.io/x".into(), "1".into())])],
                fail_on_unknown: false,
            },
            "bad prefix",
        ),
    ];
    for (ch, want) in cases {
        let e = change(&mut c, ch.clone()).expect_err("refused");
        assert!(e.to_string().contains(want), "{ch:?}: {e}");
        assert_eq!(
            c.env.core.node_labels(),
            &before,
            "nothing applied by {ch:?}"
        );
    }
}

#[test]
fn a_node_changing_partition_moves_its_usage_with_it() {
    let mut c = Cluster::new(
        conf(vec![with_label("root.a", 100.0, "h100", 100.0)], 0),
        2,
        4,
    );
    add(&mut c, &[("h100", false)]);
    let app = c.start("a", "u", 0);
    ask(&mut c, &app, 1, 8, None, &[], None).expect("ask");
    label_nodes(&mut c, &[1], "h100");
    let tree = c.env.core.scheduler().tree();
    let qa = tree.find("root.a").expect("a");
    let q = &tree.queues[qa];
    assert_eq!(q.parts["h100"].used.get(GPU), 4, "node 1's four GPUs moved");
    assert_eq!(q.default_used().get(GPU), 4);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Whatever is labelled and asked, no node of an exclusive partition runs a container
    /// asked for another partition, and every container of a labelled ask is in its label.
    #[test]
    fn no_exclusive_node_runs_a_container_of_another_partition(
        labels in proptest::collection::vec(0usize..3, 5),
        asks in proptest::collection::vec((0usize..3, 1u32..6), 1..6),
    ) {
        let names = ["", "x", "y"];
        let mut q = leaf("root.a", 100.0);
        for l in ["x", "y"] {
            q.label_capacities.insert(l.into(), LabelCapacity { capacity: 100.0, max_capacity: 100.0 });
        }
        let mut c = Cluster::new(conf(vec![q], 0), 6, 2);
        add(&mut c, &[("x", true), ("y", false)]);
        // Node 0 stays in the default partition (for the AM).
        for (i, l) in labels.iter().enumerate() {
            if *l > 0 {
                label_nodes(&mut c, &[i + 1], names[*l]);
            }
        }
        let app = c.start("a", "u", 0);
        for (k, (l, n)) in asks.iter().enumerate() {
            let label = (*l > 0).then_some(names[*l]);
            ask(&mut c, &app, k as i64 + 1, *n, label, &[], None).expect("ask");
            c.run_for(1_000);
        }
        for x in c.env.core.containers().values().filter(|x| x.is_live() && !x.is_am) {
            let node = c.env.core.partition_of(&x.node);
            if node == "x" || !x.partition.is_empty() {
                prop_assert_eq!(&node, &x.partition, "container {} on {}", x.id, x.node);
            }
        }
        let _ = NodeId::new("n0", 1);
    }
}
