//! Graceful decommission (YARN's `rmadmin -refreshNodes [-g timeout]`): a node newly in the
//! exclude list drains (no new containers, what runs runs on) and turns DECOMMISSIONED when
//! it is empty or at its timeout, when what is left is killed; without `-g` it goes at once;
//! a node taken off the list while draining is recommissioned; an excluded NM is refused.

use super::*;

fn excluding(hosts: &[&str]) -> HostLists {
    HostLists {
        include: BTreeSet::new(),
        exclude: hosts.iter().map(|h| (h.to_string(), None)).collect(),
    }
}

fn graceful(timeout_secs: i64) -> DecommissionType {
    DecommissionType::Graceful { timeout_secs }
}

/// An app whose AM runs on `h2` (small) and one worker on `h1`; answers the nodes, the
/// attempt, the AM and the worker.
fn am_on_h2_worker_on_h1(
    env: &mut TestEnv,
) -> (
    NodeId,
    NodeId,
    ApplicationAttemptId,
    ContainerId,
    ContainerId,
) {
    let n2 = env.add_node("h2", 2, 1024, 1);
    let _app = env.submit("default");
    let (att, am) = env.launch_all()[0];
    env.heartbeat(&n2, vec![TestEnv::running(am)]);
    env.core
        .am_register(&att, "h2".into(), 0, String::new(), env.now)
        .expect("register");
    let n1 = env.add_node("h1", 1, 4096, 4);
    let r = env.ask(&att, 1, 1024);
    let worker = r.allocated[0].id;
    assert_eq!(r.allocated[0].node_id, n1, "h2 has no room for the worker");
    env.heartbeat(&n1, vec![TestEnv::running(worker)]);
    (n1, n2, att, am, worker)
}

fn state(env: &TestEnv, n: &NodeId) -> NodeState {
    env.core.nodes()[n].state
}

#[test]
fn decommission_graceful_drain_then_decommissioned_and_shut_down() {
    let mut env = TestEnv::new();
    let (n1, n2, att, am, worker) = am_on_h2_worker_on_h1(&mut env);
    let done = env
        .core
        .refresh_nodes(excluding(&["h1"]), graceful(30), env.now);
    env.step();
    assert_eq!(done.decommissioning, vec![n1.clone()]);
    assert!(done.decommissioned.is_empty());
    assert_eq!(state(&env, &n1), NodeState::DECOMMISSIONING);
    let drain = env.core.nodes()[&n1].decommissioning.expect("a drain");
    assert_eq!(drain.timeout_secs, Some(30));
    assert_eq!(drain.deadline(), Some(env.now + 30_000));
    // The node keeps heartbeating and its worker keeps running.
    env.advance(10_000);
    let hb = env.heartbeat(&n1, vec![TestEnv::running(worker)]);
    assert_eq!(hb.action, NodeAction::Normal);
    assert_eq!(state(&env, &n1), NodeState::DECOMMISSIONING);
    assert!(env.core.containers()[&worker].is_live());
    // The node's room no longer counts in the cluster.
    assert_eq!(env.core.scheduler().nodes().cluster.memory_mb, 1024);
    // The worker ends: the drained node is decommissioned at its heartbeat and told to stop.
    env.advance(1_000);
    let hb = env.heartbeat(&n1, vec![TestEnv::done(worker, 0)]);
    assert_eq!(hb.action, NodeAction::Shutdown);
    assert!(
        hb.diagnostics.contains("ready to be decommissioned"),
        "{}",
        hb.diagnostics
    );
    assert_eq!(state(&env, &n1), NodeState::DECOMMISSIONED);
    assert!(env.core.nodes()[&n1].decommissioning.is_none());
    assert!(env.core.scheduler().node(&n1).is_none());
    let r = env
        .core
        .am_allocate(&att, 2, vec![], vec![], 0.5, env.now)
        .expect("allocate");
    assert_eq!(r.completed.len(), 1);
    assert_eq!(r.completed[0].exit_status, 0, "the worker ended on its own");
    // Later heartbeats and a new registration are refused with SHUTDOWN.
    let hb = env.heartbeat(&n1, vec![]);
    assert_eq!(hb.action, NodeAction::Shutdown);
    assert!(
        hb.diagnostics.contains("Disallowed NodeManager"),
        "{}",
        hb.diagnostics
    );
    let reg = NodeRegistration {
        id: n1.clone(),
        http_address: "h1:1".into(),
        rack: "/default-rack".into(),
        total: Resource::new(4096, 4),
        version: "test".into(),
        containers: vec![],
        attributes: Default::default(),
    };
    let refused = env
        .core
        .try_register_node(reg, env.now)
        .expect_err("refused");
    env.step();
    assert_eq!(refused, NodeRefused::Excluded { node: n1.clone() });
    assert!(refused.to_string().contains("exclude"), "{refused}");
    assert_eq!(state(&env, &n1), NodeState::DECOMMISSIONED);
    assert_eq!(state(&env, &n2), NodeState::RUNNING);
    let _ = am;
}

#[test]
fn decommission_no_new_containers_on_a_draining_node() {
    let mut env = TestEnv::new();
    let (n1, n2, att, am, worker) = am_on_h2_worker_on_h1(&mut env);
    env.core
        .refresh_nodes(excluding(&["h1"]), graceful(-1), env.now);
    env.step();
    assert_eq!(
        env.core.nodes()[&n1]
            .decommissioning
            .and_then(|d| d.deadline()),
        None,
        "a negative timeout never ends the drain"
    );
    // h1 has 3 GB free but drains: nothing is placed there, however long it waits.
    let r = env.ask(&att, 2, 1024);
    assert!(r.allocated.is_empty());
    for i in 0..10 {
        env.advance(300_000);
        env.heartbeat(&n1, vec![TestEnv::running(worker)]);
        env.heartbeat(&n2, vec![TestEnv::running(am)]);
        let r = env
            .core
            .am_allocate(&att, 2 + i, vec![], vec![], 0.5, env.now)
            .expect("allocate");
        env.step();
        assert!(r.allocated.is_empty(), "{:?}", r.allocated);
    }
    assert_eq!(state(&env, &n1), NodeState::DECOMMISSIONING);
    // A new node takes them.
    let n3 = env.add_node("h3", 3, 4096, 4);
    let r = env
        .core
        .am_allocate(&att, 20, vec![], vec![], 0.5, env.now)
        .expect("allocate");
    assert_eq!(r.allocated.len(), 2);
    assert!(r.allocated.iter().all(|c| c.node_id == n3));
}

#[test]
fn decommission_timeout_kills_what_is_left() {
    let mut env = TestEnv::new();
    let (n1, _n2, att, _am, worker) = am_on_h2_worker_on_h1(&mut env);
    env.core
        .refresh_nodes(excluding(&["h1"]), graceful(10), env.now);
    env.step();
    env.advance(9_000);
    env.heartbeat(&n1, vec![TestEnv::running(worker)]);
    assert_eq!(state(&env, &n1), NodeState::DECOMMISSIONING);
    env.advance(1_500);
    assert_eq!(state(&env, &n1), NodeState::DECOMMISSIONED);
    assert!(!env.core.containers()[&worker].is_live());
    let r = env
        .core
        .am_allocate(&att, 2, vec![], vec![], 0.5, env.now)
        .expect("allocate");
    assert_eq!(r.completed.len(), 1);
    assert_eq!(r.completed[0].exit_status, exit_status::ABORTED);
    assert!(
        r.completed[0]
            .diagnostics
            .contains("decommission timeout of 10 s"),
        "{}",
        r.completed[0].diagnostics
    );
    let hb = env.heartbeat(&n1, vec![TestEnv::running(worker)]);
    assert_eq!(hb.action, NodeAction::Shutdown);
}

#[test]
fn decommission_recommission_puts_the_node_back_in_service() {
    let mut env = TestEnv::new();
    let (n1, _n2, att, _am, worker) = am_on_h2_worker_on_h1(&mut env);
    env.core
        .refresh_nodes(excluding(&["h1:1"]), graceful(30), env.now);
    env.step();
    assert_eq!(state(&env, &n1), NodeState::DECOMMISSIONING);
    let r = env.ask(&att, 1, 1024);
    assert!(r.allocated.is_empty());
    let done = env
        .core
        .refresh_nodes(HostLists::default(), graceful(30), env.now);
    env.step();
    assert_eq!(done.recommissioned, vec![n1.clone()]);
    assert_eq!(state(&env, &n1), NodeState::RUNNING);
    assert!(env.core.nodes()[&n1].decommissioning.is_none());
    // Back in service: the waiting ask lands there, and the deadline no longer applies.
    let r = env
        .core
        .am_allocate(&att, 2, vec![], vec![], 0.5, env.now)
        .expect("allocate");
    assert_eq!(r.allocated.len(), 1);
    assert_eq!(r.allocated[0].node_id, n1);
    env.advance(60_000);
    env.heartbeat(
        &n1,
        vec![
            TestEnv::running(worker),
            TestEnv::running(r.allocated[0].id),
        ],
    );
    assert_eq!(state(&env, &n1), NodeState::RUNNING);
}

#[test]
fn decommission_without_graceful_is_at_once() {
    let mut env = TestEnv::new();
    let (n1, n2, att, _am, worker) = am_on_h2_worker_on_h1(&mut env);
    // A graceful drain first, then a forceful refresh ends it.
    env.core
        .refresh_nodes(excluding(&["h1"]), graceful(3600), env.now);
    env.step();
    let done = env
        .core
        .refresh_nodes(excluding(&["h1"]), DecommissionType::Normal, env.now);
    env.step();
    assert_eq!(done.decommissioned, vec![n1.clone()]);
    assert_eq!(state(&env, &n1), NodeState::DECOMMISSIONED);
    assert!(!env.core.containers()[&worker].is_live());
    let r = env
        .core
        .am_allocate(&att, 2, vec![], vec![], 0.5, env.now)
        .expect("allocate");
    assert_eq!(r.completed[0].exit_status, exit_status::ABORTED);
    assert!(r.completed[0].diagnostics.contains("decommissioned"));
    assert_eq!(state(&env, &n2), NodeState::RUNNING);
    // An empty node drained gracefully is decommissioned by the refresh itself.
    let n3 = env.add_node("h3", 3, 4096, 4);
    let done = env
        .core
        .refresh_nodes(excluding(&["h1", "h3"]), graceful(30), env.now);
    env.step();
    assert_eq!(done.decommissioned, vec![n3.clone()]);
    assert_eq!(state(&env, &n3), NodeState::DECOMMISSIONED);
}

#[test]
fn decommission_lists_refuse_registration() {
    let mut env = TestEnv::new();
    env.core.set_host_lists(HostLists {
        include: ["h1".to_string(), "h2:2".to_string()].into_iter().collect(),
        exclude: [("h2".to_string(), None)].into_iter().collect(),
    });
    let reg = |host: &str, port: u16| NodeRegistration {
        id: NodeId::new(host, port),
        http_address: format!("{host}:{port}"),
        rack: "/default-rack".into(),
        total: Resource::new(4096, 4),
        version: "test".into(),
        containers: vec![],
        attributes: Default::default(),
    };
    assert!(env.core.try_register_node(reg("h1", 1), env.now).is_ok());
    let e = env
        .core
        .try_register_node(reg("h2", 2), env.now)
        .expect_err("excluded");
    assert!(matches!(e, NodeRefused::Excluded { .. }));
    let e = env
        .core
        .try_register_node(reg("h3", 3), env.now)
        .expect_err("not included");
    assert!(matches!(e, NodeRefused::NotIncluded { .. }));
    assert!(e.to_string().contains("include"), "{e}");
    env.step();
    assert_eq!(
        env.core.nodes()[&NodeId::new("h2", 2)].state,
        NodeState::DECOMMISSIONED
    );
    assert_eq!(env.core.scheduler().nodes().schedulable_count(), 1);
}

#[test]
fn decommission_a_draining_node_that_registers_again_keeps_draining() {
    let mut env = TestEnv::new();
    let (n1, _n2, _att, _am, worker) = am_on_h2_worker_on_h1(&mut env);
    env.core
        .refresh_nodes(excluding(&["h1"]), graceful(30), env.now);
    env.step();
    let since = env.core.nodes()[&n1].decommissioning.expect("drain").since;
    env.advance(5_000);
    let reg = NodeRegistration {
        id: n1.clone(),
        http_address: "h1:1".into(),
        rack: "/default-rack".into(),
        total: Resource::new(4096, 4),
        version: "test".into(),
        containers: vec![TestEnv::running(worker)],
        attributes: Default::default(),
    };
    assert!(env.core.try_register_node(reg, env.now).is_ok());
    env.step();
    assert_eq!(state(&env, &n1), NodeState::DECOMMISSIONING);
    assert_eq!(
        env.core.nodes()[&n1].decommissioning.expect("drain").since,
        since
    );
    assert!(env.core.scheduler().node(&n1).is_some_and(|n| n.draining));
    // An unhealthy report does not end the drain, and health back does not either.
    let r = env.core.node_heartbeat(
        &n1,
        false,
        "disk".into(),
        vec![TestEnv::running(worker)],
        env.now,
    );
    env.step();
    assert_eq!(r.action, NodeAction::Normal);
    assert_eq!(state(&env, &n1), NodeState::DECOMMISSIONING);
    env.core.node_heartbeat(
        &n1,
        true,
        String::new(),
        vec![TestEnv::running(worker)],
        env.now,
    );
    env.step();
    assert_eq!(state(&env, &n1), NodeState::DECOMMISSIONING);
    env.advance(26_000);
    assert_eq!(
        state(&env, &n1),
        NodeState::DECOMMISSIONED,
        "the first deadline holds"
    );
}

#[test]
fn decommission_no_increase_on_a_draining_node() {
    let mut env = TestEnv::new();
    let (_n1, _n2, att, _am, worker) = am_on_h2_worker_on_h1(&mut env);
    env.core
        .refresh_nodes(excluding(&["h1"]), graceful(30), env.now);
    env.step();
    let report = AmReport {
        updates: vec![ContainerUpdate {
            container: worker,
            version: 0,
            kind: UpdateKind::IncreaseResource,
            capability: Resource::new(2048, 1),
        }],
        ..AmReport::default()
    };
    let r = env
        .core
        .am_allocate_with(&att, 5, vec![], vec![], 0.5, report, env.now)
        .expect("allocate");
    env.step();
    assert!(
        r.updated.is_empty() && r.update_errors.is_empty(),
        "the increase waits while its node drains"
    );
    // Recommissioned, the node grows the container at the AM's next call.
    env.core
        .refresh_nodes(HostLists::default(), graceful(30), env.now);
    env.step();
    let r = env
        .core
        .am_allocate_with(&att, 6, vec![], vec![], 0.5, AmReport::default(), env.now)
        .expect("allocate");
    env.step();
    assert_eq!(r.updated.len(), 1);
    assert_eq!(r.updated[0].allocation.resource, Resource::new(2048, 1));
}

mod gangs {
    //! The scheduler alone: a draining node is in no gang's plan and holds no gang.

    use spindle_common::resource::GPU;
    use spindle_common::{ApplicationId, NodeId, Resource};

    use crate::core::queue_conf::SchedulerConf;
    use crate::core::scheduler::gang::{GangParams, GangPhase, GangPolicy};
    use crate::core::scheduler::{Ask, AskKey, Scheduler};

    fn gpus(g: i64) -> Resource {
        Resource::new(1024, 1).with(GPU, g)
    }

    fn node(n: &str) -> NodeId {
        NodeId::new(n, 1)
    }

    #[test]
    fn decommission_draining_nodes_are_out_of_gang_plans_and_holds() {
        let mut conf = SchedulerConf::single_default_queue();
        conf.root.children[0].user_limit_factor = -1.0;
        conf.root.children[0].max_am_resource_percent = 1.0;
        let mut s = Scheduler::new(conf, Resource::new(128, 1));
        for n in ["a", "b", "c", "e"] {
            s.add_node(
                node(n),
                "/r1".into(),
                Resource::new(262_144, 64).with(GPU, 8),
                Resource::zero(),
            );
        }
        let l = s.tree().leaf("default").expect("leaf");
        let (filler, app) = (ApplicationId::new(9, 1), ApplicationId::new(9, 2));
        s.add_app(filler, l, "filler", 0, 1, Resource::new(128, 1));
        for _ in 0..6 {
            s.charge(&filler, &node("a"), &gpus(1));
        }
        for _ in 0..8 {
            s.charge(&filler, &node("e"), &gpus(1));
        }
        s.set_draining(&node("c"), true);
        s.add_app(app, l, "u", 0, 2, Resource::new(128, 1));
        let params = GangParams {
            policy: GangPolicy::Pack,
            max_nodes: 2,
            timeout_ms: 0,
            hard: false,
            ..Default::default()
        };
        s.set_gang(&app, "g", params, 0);
        let mut ask = Ask::new(gpus(1), 12);
        ask.gang = Some("g".into());
        let key = AskKey {
            priority: 1,
            allocation_request_id: 7,
        };
        s.set_ask(&app, key, ask);
        // b and c would fit it now; c drains, so it waits, holding two other nodes.
        assert!(s.schedule().is_empty());
        let g = s.gang(&app, "g").expect("gang");
        assert_eq!(g.phase, GangPhase::Reserved, "{}", g.diagnostics);
        assert_eq!(g.reserved.len(), 2);
        assert!(!g.reserved.contains(&node("c")), "{:?}", g.reserved);
        assert!(s.check().is_ok());
        // b starts draining: a hold on it is given up at once, and no plan counts on it.
        s.set_draining(&node("b"), true);
        assert!(s.check().is_ok(), "{:?}", s.check());
        assert!(s.schedule().is_empty());
        let g = s.gang(&app, "g").expect("gang");
        assert_eq!(g.reserved, vec![node("a"), node("e")], "{}", g.diagnostics);
        // Both back in service: the gang is placed whole on b and c.
        s.set_draining(&node("b"), false);
        s.set_draining(&node("c"), false);
        let p = s.schedule();
        assert_eq!(p.len(), 12);
        assert!(
            p.iter().all(|x| x.node == node("b") || x.node == node("c")),
            "{:?}",
            p.iter().map(|x| x.node.to_string()).collect::<Vec<_>>()
        );
        assert!(s.check().is_ok());
    }
}

#[derive(Debug, Clone)]
enum Op {
    Submit,
    Ask(usize, u32, i64),
    Finish(usize, usize),
    Heartbeat(usize),
    /// Which of the 3 nodes are excluded (bits), graceful with this timeout (s) or not.
    Refresh(u8, Option<i64>),
    Register(usize),
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        Just(Op::Submit),
        (0..4usize, 0..4u32, 100..3000i64).prop_map(|(a, n, m)| Op::Ask(a, n, m)),
        (0..4usize, 0..8usize).prop_map(|(a, c)| Op::Finish(a, c)),
        (0..3usize).prop_map(Op::Heartbeat),
        (0..8u8, proptest::option::of(-1..20i64)).prop_map(|(m, g)| Op::Refresh(m, g)),
        (0..3usize).prop_map(Op::Register),
        (1..6000u64).prop_map(Op::Advance),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Whatever is excluded, drained, recommissioned or timed out, the accounting holds
    /// (`sanity_check` after every step, with the drain invariants), no container is placed
    /// on a node after its drain began, and a DECOMMISSIONED node holds nothing.
    #[test]
    fn decommission_invariants_hold_under_random_operations(
        ops in proptest::collection::vec(op(), 1..60)
    ) {
        let mut env = TestEnv::new();
        let nodes: Vec<NodeId> =
            (0..3).map(|i| env.add_node(&format!("h{i}"), 1, 4096, 4)).collect();
        let mut apps: Vec<ApplicationId> = vec![];
        for op in &ops {
            match op {
                Op::Submit => apps.push(env.submit("default")),
                Op::Ask(a, n, m) => {
                    let att = apps
                        .get(*a)
                        .and_then(|app| env.core.apps()[app].current_attempt().map(|x| x.id));
                    if let Some(att) = att {
                        let _ = env.core.am_register(&att, "h".into(), 0, String::new(), env.now);
                        let ask = AskUpdate {
                            image: None,
                            label: None,
                            tags: Vec::new(),
                            constraint: None,
                            priority: 1,
                            allocation_request_id: 0,
                            resource_name: "*".into(),
                            capability: Resource::new(*m, 1),
                            num_containers: *n,
                            relax_locality: true,
                            gang: None,
                            cpu: None,
                        };
                        let _ = env.core.am_allocate(&att, 0, vec![ask], vec![], 0.0, env.now);
                        env.step();
                    }
                }
                Op::Finish(a, c) => {
                    if let Some(app) = apps.get(*a) {
                        let live: Vec<RmContainer> = env
                            .core
                            .containers()
                            .values()
                            .filter(|x| x.id.application_id() == *app && x.is_live())
                            .cloned()
                            .collect();
                        if let Some(x) = live.get(*c % live.len().max(1)) {
                            let node = x.node.clone();
                            env.heartbeat(&node, vec![TestEnv::done(x.id, 0)]);
                        }
                    }
                }
                Op::Heartbeat(i) => {
                    let running: Vec<ReportedContainer> = env
                        .core
                        .containers()
                        .values()
                        .filter(|c| c.node == nodes[*i] && c.is_live())
                        .map(|c| TestEnv::running(c.id))
                        .collect();
                    let r = env.heartbeat(&nodes[*i], running);
                    let state = env.core.nodes()[&nodes[*i]].state;
                    prop_assert_eq!(
                        r.action == NodeAction::Shutdown,
                        state == NodeState::DECOMMISSIONED,
                        "{:?} for a {} node", r.action, state
                    );
                }
                Op::Refresh(mask, g) => {
                    let hosts: Vec<&str> = ["h0", "h1", "h2"]
                        .into_iter()
                        .enumerate()
                        .filter(|(i, _)| mask & (1 << i) != 0)
                        .map(|(_, h)| h)
                        .collect();
                    let how = match g {
                        Some(t) => graceful(*t),
                        None => DecommissionType::Normal,
                    };
                    env.core.refresh_nodes(excluding(&hosts), how, env.now);
                    env.step();
                    for (i, n) in nodes.iter().enumerate() {
                        let node = &env.core.nodes()[n];
                        if mask & (1 << i) == 0 {
                            prop_assert!(node.state != NodeState::DECOMMISSIONING);
                        } else if !node.state.is_inactive() || node.state == NodeState::DECOMMISSIONED {
                            prop_assert!(matches!(
                                node.state,
                                NodeState::DECOMMISSIONING | NodeState::DECOMMISSIONED
                            ), "{} after excluding it", node.state);
                        }
                    }
                }
                Op::Register(i) => {
                    let reg = NodeRegistration {
                        id: nodes[*i].clone(),
                        http_address: format!("h{i}:1"),
                        rack: "/default-rack".into(),
                        total: Resource::new(4096, 4),
                        version: "test".into(),
                        containers: env
                            .core
                            .containers()
                            .values()
                            .filter(|c| c.node == nodes[*i] && c.is_live())
                            .map(|c| TestEnv::running(c.id))
                            .collect(),
                        attributes: Default::default(),
                    };
                    let excluded = env.core.node_refusal(&nodes[*i]).is_some();
                    let draining = env.core.nodes()[&nodes[*i]].decommissioning.is_some();
                    let r = env.core.try_register_node(reg, env.now);
                    env.step();
                    prop_assert_eq!(r.is_err(), excluded && !draining);
                }
                Op::Advance(ms) => {
                    env.launch_all();
                    env.advance(*ms);
                }
            }
            for n in env.core.nodes().values() {
                if let Some(d) = n.decommissioning {
                    for c in n.containers.iter().filter_map(|c| env.core.containers().get(c)) {
                        prop_assert!(
                            c.allocated_time <= d.since,
                            "{} placed on draining {} at {} (drain since {})",
                            c.id, n.id, c.allocated_time, d.since
                        );
                    }
                }
                if n.state == NodeState::DECOMMISSIONED {
                    prop_assert!(n.containers.is_empty());
                    prop_assert!(env.core.scheduler().node(&n.id).is_none());
                }
            }
        }
    }
}

#[test]
fn decommission_a_host_timeout_from_the_exclude_file_wins() {
    let mut env = TestEnv::new();
    let (n1, _n2, _att, _am, worker) = am_on_h2_worker_on_h1(&mut env);
    let hosts = HostLists {
        include: BTreeSet::new(),
        exclude: [("h1".to_string(), Some(5))].into_iter().collect(),
    };
    env.core.refresh_nodes(hosts, graceful(3600), env.now);
    env.step();
    assert_eq!(
        env.core.nodes()[&n1]
            .decommissioning
            .and_then(|d| d.timeout_secs),
        Some(5),
        "YARN: the host's own timeout over the request's"
    );
    env.advance(4_000);
    env.heartbeat(&n1, vec![TestEnv::running(worker)]);
    assert_eq!(state(&env, &n1), NodeState::DECOMMISSIONING);
    env.advance(1_000);
    assert_eq!(state(&env, &n1), NodeState::DECOMMISSIONED);
}
