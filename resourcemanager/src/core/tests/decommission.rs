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
