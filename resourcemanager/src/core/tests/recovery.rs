//! Work-preserving recovery: a restarted RM (a new core, one epoch later, fed the records the
//! old one persisted) takes running work back as NMs re-register, and the AM carries on.

use spindle_common::states::{
    ContainerState, FinalApplicationStatus, YarnApplicationState as AppState,
};
use spindle_common::token::TokenSecret;

use super::TestEnv;
use crate::core::*;

fn report(id: ContainerId, state: ContainerState, exit: i32, mem: i64) -> ReportedContainer {
    ReportedContainer {
        id,
        state,
        exit_status: exit,
        diagnostics: if state == ContainerState::COMPLETE {
            format!("exit {exit}")
        } else {
            String::new()
        },
        resource: Resource::new(mem, 1),
    }
}

pub(super) fn registration(node: &NodeId, containers: Vec<ReportedContainer>) -> NodeRegistration {
    NodeRegistration {
        id: node.clone(),
        http_address: format!("{}:{}", node.host, node.port),
        rack: "/default-rack".into(),
        total: Resource::new(8192, 8),
        version: "test".into(),
        containers,
        attributes: Default::default(),
    }
}

/// The last record the core asked to persist for `app`.
pub(super) fn last_record(env: &TestEnv, app: &ApplicationId) -> AppRecord {
    env.effects
        .iter()
        .rev()
        .find_map(|e| match e {
            Effect::PersistApp(r) if r.id == *app => Some((**r).clone()),
            _ => None,
        })
        .expect("a persisted record")
}

/// A new RM incarnation (epoch 1) with the same secret, which recovers `records`.
pub(super) fn restarted(records: Vec<AppRecord>, now: u64) -> TestEnv {
    let mut env = TestEnv::new();
    let secret = TokenSecret::from_hex("00112233445566778899aabbccddeeff").expect("static hex");
    env.core = RmCore::new(CoreConfig::for_tests(), 2_000, 1, secret);
    env.now = now;
    for r in records {
        env.core.recover_app(r, now);
    }
    env.step();
    env
}

struct Running {
    env: TestEnv,
    node: NodeId,
    app: ApplicationId,
    attempt: ApplicationAttemptId,
    am: ContainerId,
    workers: Vec<ContainerId>,
}

/// One node, one application whose registered AM holds two 1024 MB workers, all running.
fn running_app() -> Running {
    let mut env = TestEnv::new();
    let node = NodeId::new("h1", 1);
    env.core.register_node(registration(&node, vec![]), env.now);
    env.step();
    let app = env.submit("default");
    let (attempt, am) = env.launch_all()[0];
    env.heartbeat(&node, vec![report(am, ContainerState::RUNNING, -1000, 512)]);
    env.core
        .am_register(
            &attempt,
            "amhost".into(),
            7,
            "http://amhost/ui".into(),
            env.now,
        )
        .expect("register");
    env.step();
    let workers: Vec<ContainerId> = env
        .ask(&attempt, 2, 1024)
        .allocated
        .iter()
        .map(|c| c.id)
        .collect();
    let workers = if workers.len() == 2 {
        workers
    } else {
        let again = env
            .core
            .am_allocate(&attempt, 1, vec![], vec![], 0.1, env.now)
            .expect("allocate");
        env.step();
        workers
            .into_iter()
            .chain(again.allocated.iter().map(|c| c.id))
            .collect()
    };
    assert_eq!(workers.len(), 2, "two workers allocated");
    let mut reports = vec![report(am, ContainerState::RUNNING, -1000, 512)];
    reports.extend(
        workers
            .iter()
            .map(|w| report(*w, ContainerState::RUNNING, -1000, 1024)),
    );
    env.heartbeat(&node, reports);
    Running {
        env,
        node,
        app,
        attempt,
        am,
        workers,
    }
}

#[test]
fn a_restarted_rm_takes_running_work_back_and_the_am_carries_on() {
    let r = running_app();
    let rec = last_record(&r.env, &r.app);
    let live = rec
        .live_attempt
        .clone()
        .expect("the live attempt is persisted");
    assert_eq!(live.am_container, r.am);
    assert_eq!(live.am_node, r.node);

    let mut env = restarted(vec![rec], r.env.now + 5_000);
    let app = env.app(&r.app);
    assert_eq!(app.state, AppState::RUNNING);
    assert_eq!(app.attempts.len(), 1, "no new attempt");
    assert!(
        app.diagnostics.contains("waiting for attempt"),
        "{}",
        app.diagnostics
    );
    assert!(
        !env.effects
            .iter()
            .any(|e| matches!(e, Effect::LaunchAm { .. })),
        "no AM launched: {:?}",
        env.effects
    );

    // The NM re-registers with the AM and one worker running; the other ended meanwhile.
    let reports = vec![
        report(r.am, ContainerState::RUNNING, -1000, 512),
        report(r.workers[0], ContainerState::RUNNING, -1000, 1024),
        report(r.workers[1], ContainerState::COMPLETE, 0, 1024),
    ];
    env.core
        .register_node(registration(&r.node, reports), env.now);
    env.step();
    assert_eq!(env.core.counters().containers_recovered, 2);
    for c in [r.am, r.workers[0]] {
        assert_eq!(
            env.core.containers()[&c].state,
            RmContainerState::RUNNING,
            "{c}"
        );
    }
    assert!(!env.core.containers().contains_key(&r.workers[1]));
    let node = env.core.scheduler().node(&r.node).expect("node");
    assert_eq!(node.used, Resource::new(512 + 1024, 2));
    assert_eq!(
        env.app(&r.app)
            .current_attempt()
            .and_then(|a| a.awaiting_am_until()),
        None
    );

    // The AM must register again (the SDK does on this error), then hears of the worker
    // that ended while the RM was down, and its asks are served with new-epoch ids.
    let err = env
        .core
        .am_allocate(&r.attempt, 5, vec![], vec![], 0.5, env.now)
        .expect_err("not registered yet");
    assert!(matches!(err, CoreError::NotRegistered(_)), "{err:?}");
    env.core
        .am_register(&r.attempt, "amhost".into(), 7, String::new(), env.now)
        .expect("re-register");
    env.step();
    let reply = env.ask(&r.attempt, 1, 1024);
    let done: Vec<_> = reply
        .completed
        .iter()
        .map(|s| (s.container_id, s.exit_status))
        .collect();
    assert_eq!(done, vec![(r.workers[1], 0)]);
    let new: Vec<ContainerId> = reply.allocated.iter().map(|c| c.id).collect();
    assert!(new.iter().all(|c| c.epoch == 1), "{new:?}");
    // A second report of the ended worker is not told twice.
    env.heartbeat(
        &r.node,
        vec![
            report(r.am, ContainerState::RUNNING, -1000, 512),
            report(r.workers[0], ContainerState::RUNNING, -1000, 1024),
            report(r.workers[1], ContainerState::COMPLETE, 0, 1024),
        ],
    );
    let again = env
        .core
        .am_allocate(&r.attempt, 1, vec![], vec![], 0.5, env.now)
        .expect("allocate");
    env.step();
    assert!(
        !again
            .completed
            .iter()
            .any(|s| s.container_id == r.workers[1]),
        "{:?}",
        again.completed
    );

    // The recovered worker ends normally: its resources go back and the AM is told.
    env.heartbeat(
        &r.node,
        vec![
            report(r.am, ContainerState::RUNNING, -1000, 512),
            report(r.workers[0], ContainerState::COMPLETE, 0, 1024),
        ],
    );
    let after = env
        .core
        .am_allocate(&r.attempt, 2, vec![], vec![], 0.9, env.now)
        .expect("allocate");
    env.step();
    assert!(after
        .completed
        .iter()
        .any(|s| s.container_id == r.workers[0] && s.exit_status == 0));
}

#[test]
fn an_am_whose_node_never_comes_back_gets_a_new_attempt_that_does_not_count() {
    let r = running_app();
    let rec = last_record(&r.env, &r.app);
    let mut env = restarted(vec![rec], r.env.now + 5_000);
    let max_before = env.app(&r.app).max_attempts;
    // Another node registers and keeps heartbeating; the AM's node never comes back.
    let other = NodeId::new("h2", 1);
    env.core
        .register_node(registration(&other, vec![]), env.now);
    env.step();
    let expiry = CoreConfig::for_tests().nm_expiry_ms;
    env.advance(expiry - 100);
    env.heartbeat(&other, vec![]);
    assert_eq!(env.app(&r.app).attempts.len(), 1, "still waiting");
    assert_eq!(env.app(&r.app).state, AppState::RUNNING);
    env.advance(200);
    let app = env.app(&r.app);
    assert_eq!(app.attempts.len(), 2, "a second attempt");
    assert_eq!(app.attempts[0].state(), AttemptState::FAILED);
    assert!(
        app.attempts[0].diagnostics.contains("was not reported"),
        "{}",
        app.attempts[0].diagnostics
    );
    assert_eq!(
        app.max_attempts,
        max_before + 1,
        "the lost AM does not count"
    );
    assert!(env
        .effects
        .iter()
        .any(|e| matches!(e, Effect::LaunchAm { attempt, .. } if attempt.attempt_id == 2)));
}

/// YARN's work-preserving restart: a recovered attempt waits for its AM; when the AM's NM
/// registers again without the AM container (its start never reached the NM, or the NM
/// lost it), the attempt fails at once, not counted, and its old workers are stopped.
#[test]
fn an_am_absent_from_its_nodes_registration_gets_a_new_attempt_at_once() {
    let r = running_app();
    let rec = last_record(&r.env, &r.app);
    let mut env = restarted(vec![rec], r.env.now + 5_000);
    let max_before = env.app(&r.app).max_attempts;
    // The node comes back without the AM but with a worker of the old attempt.
    env.core.register_node(
        registration(
            &r.node,
            vec![report(r.workers[0], ContainerState::RUNNING, -1000, 1024)],
        ),
        env.now,
    );
    env.step();
    let app = env.app(&r.app);
    assert_eq!(app.attempts.len(), 2, "no waiting out the NM expiry");
    assert_eq!(app.attempts[0].state(), AttemptState::FAILED);
    assert!(
        app.attempts[0]
            .diagnostics
            .contains("when it registered again"),
        "{}",
        app.attempts[0].diagnostics
    );
    assert_eq!(
        app.max_attempts,
        max_before + 1,
        "the lost AM does not count"
    );
    assert_eq!(app.state, AppState::ACCEPTED);
    // The old attempt's worker is to be stopped; the new attempt's AM is being launched.
    let hb = env.heartbeat(
        &r.node,
        vec![report(r.workers[0], ContainerState::RUNNING, -1000, 1024)],
    );
    assert!(hb.containers_to_cleanup.contains(&r.workers[0]), "{hb:?}");
    assert!(env
        .effects
        .iter()
        .any(|e| matches!(e, Effect::LaunchAm { attempt, .. } if attempt.attempt_id == 2)));
}

#[test]
fn an_am_that_ended_while_the_rm_was_down_gets_a_new_attempt_at_once() {
    let r = running_app();
    let rec = last_record(&r.env, &r.app);
    let mut env = restarted(vec![rec], r.env.now + 5_000);
    // The node comes back reporting the AM container complete (it was killed meanwhile).
    env.core.register_node(
        registration(
            &r.node,
            vec![
                report(r.am, ContainerState::COMPLETE, 137, 512),
                report(r.workers[0], ContainerState::RUNNING, -1000, 1024),
            ],
        ),
        env.now,
    );
    env.step();
    let app = env.app(&r.app);
    assert_eq!(app.attempts.len(), 2, "no waiting out the NM expiry");
    assert_eq!(app.attempts[0].state(), AttemptState::FAILED);
    assert!(
        app.attempts[0]
            .diagnostics
            .contains("while the ResourceManager was down"),
        "{}",
        app.attempts[0].diagnostics
    );
    assert!(env
        .effects
        .iter()
        .any(|e| matches!(e, Effect::LaunchAm { attempt, .. } if attempt.attempt_id == 2)));
}

#[test]
fn containers_of_unknown_or_finished_work_are_stopped_not_taken_back() {
    let r = running_app();
    let mut rec = last_record(&r.env, &r.app);
    // The application finished while its record says so: nothing of it is taken back.
    rec.state = AppState::FINISHED;
    rec.final_status = FinalApplicationStatus::SUCCEEDED;
    rec.live_attempt = None;
    let mut env = restarted(vec![rec], r.env.now + 5_000);
    env.core.register_node(
        registration(
            &r.node,
            vec![
                report(r.am, ContainerState::RUNNING, -1000, 512),
                report(r.workers[0], ContainerState::RUNNING, -1000, 1024),
            ],
        ),
        env.now,
    );
    env.step();
    assert_eq!(env.core.counters().containers_recovered, 0);
    let hb = env.heartbeat(
        &r.node,
        vec![
            report(r.am, ContainerState::RUNNING, -1000, 512),
            report(r.workers[0], ContainerState::RUNNING, -1000, 1024),
        ],
    );
    assert!(hb.containers_to_cleanup.contains(&r.am), "{hb:?}");
    assert!(hb.containers_to_cleanup.contains(&r.workers[0]), "{hb:?}");
    let node = env.core.scheduler().node(&r.node).expect("node");
    assert_eq!(node.used, Resource::zero());
}

#[derive(Debug, Clone)]
enum Op {
    Submit,
    Ask(usize, u32, i64),
    Finish(usize, usize),
    Heartbeat(usize),
    Advance(u64),
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        Just(Op::Submit),
        (0..5usize, 0..4u32, 100..2500i64).prop_map(|(a, n, m)| Op::Ask(a, n, m)),
        (0..5usize, 0..6usize).prop_map(|(a, c)| Op::Finish(a, c)),
        (0..3usize).prop_map(Op::Heartbeat),
        (1..2000u64).prop_map(Op::Advance),
    ]
}

/// The newest record of each application among the effects so far (as the store keeps).
fn harvest(env: &mut TestEnv, store: &mut BTreeMap<ApplicationId, AppRecord>) {
    for e in &env.effects {
        if let Effect::PersistApp(r) = e {
            store.insert(r.id, (**r).clone());
        }
    }
    env.effects.retain(|e| !matches!(e, Effect::PersistApp(_)));
}

/// Applies `ops` to `env` (nodes `nodes`, applications in `apps`), keeping `store` current.
fn apply(
    env: &mut TestEnv,
    nodes: &[NodeId],
    apps: &mut Vec<ApplicationId>,
    store: &mut BTreeMap<ApplicationId, AppRecord>,
    ops: &[Op],
) {
    for op in ops {
        harvest(env, store);
        match op {
            Op::Submit => apps.push(env.submit("default")),
            Op::Ask(a, n, m) => {
                let Some(att) = apps
                    .get(*a)
                    .and_then(|app| env.core.apps()[app].current_attempt())
                    .map(|x| x.id)
                else {
                    continue;
                };
                let _ = env
                    .core
                    .am_register(&att, "h".into(), 0, String::new(), env.now);
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
                let _ = env
                    .core
                    .am_allocate(&att, 0, vec![ask], vec![], 0.0, env.now);
                env.step();
            }
            Op::Finish(a, c) => {
                let Some(app) = apps.get(*a) else { continue };
                let live: Vec<RmContainer> = env
                    .core
                    .containers()
                    .values()
                    .filter(|x| x.id.application_id() == *app && x.is_live() && !x.is_am)
                    .cloned()
                    .collect();
                if let Some(x) = live.get(*c % live.len().max(1)) {
                    let node = x.node.clone();
                    env.heartbeat(&node, vec![report(x.id, ContainerState::COMPLETE, 0, 0)]);
                }
            }
            Op::Heartbeat(i) => {
                let running = running_on(env, &nodes[*i]);
                env.heartbeat(&nodes[*i], running);
            }
            Op::Advance(ms) => {
                harvest(env, store);
                env.launch_all();
                // Every node reports before time moves, so none is lost.
                for n in nodes {
                    let running = running_on(env, n);
                    env.heartbeat(n, running);
                }
                env.advance(*ms);
            }
        }
    }
}

/// What an NM would report: the live containers the core placed on `node`.
fn running_on(env: &TestEnv, node: &NodeId) -> Vec<ReportedContainer> {
    env.core
        .containers()
        .values()
        .filter(|c| &c.node == node && c.is_live())
        .map(|c| report(c.id, ContainerState::RUNNING, -1000, c.resource.memory_mb))
        .collect()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
    /// Whatever ran before, a restarted RM fed the persisted records and the NMs' reports
    /// holds every invariant, takes back exactly the running containers of live attempts
    /// (no new attempt for them), and keeps working afterwards.
    #[test]
    fn a_restart_takes_back_exactly_the_running_work(
        before in proptest::collection::vec(op(), 1..40),
        after in proptest::collection::vec(op(), 0..20),
    ) {
        let mut old = TestEnv::new();
        let nodes: Vec<NodeId> = (0..3).map(|i| old.add_node(&format!("h{i}"), 1, 4096, 4)).collect();
        let mut apps = vec![];
        let mut store = BTreeMap::new();
        apply(&mut old, &nodes, &mut apps, &mut store, &before);
        // Every node has just reported: the core's RUNNING containers are the NMs' truth.
        for n in &nodes {
            let running = running_on(&old, n);
            old.heartbeat(n, running);
        }
        harvest(&mut old, &mut store);
        let reports: Vec<(NodeId, Vec<ReportedContainer>)> = nodes
            .iter()
            .map(|n| {
                let r = old
                    .core
                    .containers()
                    .values()
                    .filter(|c| &c.node == n && c.state == RmContainerState::RUNNING)
                    .map(|c| report(c.id, ContainerState::RUNNING, -1000, c.resource.memory_mb))
                    .collect();
                (n.clone(), r)
            })
            .collect();
        let records: Vec<AppRecord> = store.values().cloned().collect();
        let mut new = restarted(records, old.now + 1_000);
        for (n, r) in &reports {
            let mut reg = registration(n, r.clone());
            reg.total = Resource::new(4096, 4);
            new.core.register_node(reg, new.now);
            new.step();
        }
        for app in &apps {
            let was = &old.core.apps()[app];
            let is = &new.core.apps()[app];
            let live_am_running = was.current_attempt().and_then(|a| a.am_container()).is_some_and(|c| {
                old.core.containers().get(&c).is_some_and(|c| c.state == RmContainerState::RUNNING)
            }) && !was.state.is_final();
            if live_am_running {
                proptest::prop_assert_eq!(is.attempts.len(), was.attempts.len(), "{}: no new attempt", app);
                let att = was.current_attempt().map(|a| a.id);
                let running_before: BTreeSet<ContainerId> = old.core.containers().values()
                    .filter(|c| Some(c.id.attempt_id) == att && c.state == RmContainerState::RUNNING)
                    .map(|c| c.id).collect();
                let running_after: BTreeSet<ContainerId> = new.core.containers().values()
                    .filter(|c| c.id.application_id() == *app && c.state == RmContainerState::RUNNING)
                    .map(|c| c.id).collect();
                proptest::prop_assert_eq!(running_after, running_before);
            }
        }
        // Each node's usage is what it runs, and never more than it has.
        for n in &nodes {
            let used: i64 = new.core.containers().values().filter(|c| &c.node == n && c.is_live()).map(|c| c.resource.memory_mb).sum();
            let node = new.core.scheduler().node(n).expect("node");
            proptest::prop_assert_eq!(node.used.memory_mb, used);
            proptest::prop_assert!(used <= 4096);
        }
        apply(&mut new, &nodes, &mut apps, &mut store, &after);
    }
}

/// YARN's keep-containers-across-application-attempts: when the AM fails, its workers keep
/// running, the next attempt's register answer lists them, and their completions reach it;
/// an RM restart after that takes them back for the new attempt too.
#[test]
fn kept_containers_survive_a_failed_am_and_an_rm_restart() {
    let mut env = TestEnv::new();
    let node = NodeId::new("h1", 1);
    env.core.register_node(registration(&node, vec![]), env.now);
    env.step();
    let app = env.core.new_application();
    let mut sub = env.submission("default");
    sub.keep_containers = true;
    sub.max_app_attempts = 2;
    env.core.submit(app, sub, env.now).expect("submit");
    env.step();
    let (att1, am1) = env.launch_all()[0];
    env.heartbeat(
        &node,
        vec![report(am1, ContainerState::RUNNING, -1000, 512)],
    );
    env.core
        .am_register(&att1, "h".into(), 0, String::new(), env.now)
        .expect("register");
    env.step();
    let workers: Vec<ContainerId> = env
        .ask(&att1, 2, 1024)
        .allocated
        .iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(workers.len(), 2);
    let running = |am: ContainerId, ws: &[ContainerId]| {
        let mut r = vec![report(am, ContainerState::RUNNING, -1000, 512)];
        r.extend(
            ws.iter()
                .map(|w| report(*w, ContainerState::RUNNING, -1000, 1024)),
        );
        r
    };
    env.heartbeat(&node, running(am1, &workers));

    // The AM dies; its workers do not.
    let mut reports = running(am1, &workers);
    reports[0] = report(am1, ContainerState::COMPLETE, 1, 512);
    let hb = env.heartbeat(&node, reports);
    assert!(
        workers
            .iter()
            .all(|w| !hb.containers_to_cleanup.contains(w)),
        "{hb:?}"
    );
    assert_eq!(env.app(&app).attempts.len(), 2);
    for w in &workers {
        assert_eq!(env.core.containers()[w].state, RmContainerState::RUNNING);
    }
    let (att2, am2) = env.launch_all()[0];
    assert_eq!(att2.attempt_id, 2);
    env.heartbeat(&node, running(am2, &workers));
    env.core
        .am_register(&att2, "h".into(), 0, String::new(), env.now)
        .expect("register attempt 2");
    env.step();
    let previous: Vec<ContainerId> = env
        .core
        .inherited_containers(&att2)
        .iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(previous, workers);

    // A kept worker ends: attempt 2 is told.
    env.heartbeat(
        &node,
        vec![
            report(am2, ContainerState::RUNNING, -1000, 512),
            report(workers[0], ContainerState::COMPLETE, 0, 1024),
            report(workers[1], ContainerState::RUNNING, -1000, 1024),
        ],
    );
    let r = env
        .core
        .am_allocate(&att2, 1, vec![], vec![], 0.5, env.now)
        .expect("allocate");
    env.step();
    assert!(
        r.completed.iter().any(|s| s.container_id == workers[0]),
        "{r:?}"
    );

    // An RM restart: the new RM takes attempt 2's AM and the kept worker back.
    let rec = last_record(&env, &app);
    let mut new = restarted(vec![rec], env.now + 1_000);
    new.core.register_node(
        registration(
            &node,
            vec![
                report(am2, ContainerState::RUNNING, -1000, 512),
                report(workers[1], ContainerState::RUNNING, -1000, 1024),
            ],
        ),
        new.now,
    );
    new.step();
    assert_eq!(new.core.counters().containers_recovered, 2);
    assert_eq!(new.app(&app).attempts.len(), 2, "no third attempt");
    let kept: Vec<ContainerId> = new
        .core
        .inherited_containers(&att2)
        .iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(kept, vec![workers[1]]);
}

/// A gang of 12 x 1024 MB: more than the one 8 GB node the tests' cluster has.
fn big_gang() -> AskUpdate {
    AskUpdate {
        image: None,
        label: None,
        tags: Vec::new(),
        constraint: None,
        priority: 1,
        allocation_request_id: 9,
        resource_name: "*".into(),
        capability: Resource::new(1024, 1),
        num_containers: 12,
        relax_locality: true,
        gang: Some(("g".into(), Default::default())),
        cpu: None,
    }
}

#[test]
fn a_recovered_attempts_gang_is_not_judged_on_a_cluster_still_registering() {
    let r = running_app();
    // Before the restart the same gang is refused at once: the cluster is whole.
    let mut before = r.env;
    let e = before
        .core
        .am_allocate(&r.attempt, 9, vec![big_gang()], vec![], 0.1, before.now)
        .expect_err("refused");
    assert!(matches!(e, CoreError::GangNeverFits { .. }), "{e:?}");
    // After it, the AM's resent gang waits: more NMs may still register.
    let rec = last_record(&before, &r.app);
    let mut env = restarted(vec![rec], before.now + 5_000);
    let reports = vec![
        report(r.am, ContainerState::RUNNING, -1000, 512),
        report(r.workers[0], ContainerState::RUNNING, -1000, 1024),
        report(r.workers[1], ContainerState::RUNNING, -1000, 1024),
    ];
    env.core
        .register_node(registration(&r.node, reports), env.now);
    env.step();
    env.core
        .am_register(&r.attempt, "amhost".into(), 7, String::new(), env.now)
        .expect("re-register");
    env.step();
    env.core
        .am_allocate(&r.attempt, 1, vec![big_gang()], vec![], 0.5, env.now)
        .expect("a recovered attempt's gang waits");
    env.step();
    let g = env.core.gang_statuses(&r.app);
    assert_eq!(g.len(), 1, "{g:?}");
}

/// The tests' configuration with room for many AMs (the AM limit at 100%), so that a
/// restart finds many live attempts in one queue.
fn roomy() -> CoreConfig {
    let mut c = CoreConfig::for_tests();
    c.scheduler.max_am_resource_percent = 1.0;
    for q in c.scheduler.root.children.iter_mut() {
        q.max_am_resource_percent = 1.0;
    }
    c
}

/// A new RM incarnation (epoch 1) with `conf`, which recovers `records` at `now`.
fn restarted_with(conf: CoreConfig, records: Vec<AppRecord>, now: u64) -> TestEnv {
    let mut env = TestEnv::with_conf(conf.clone());
    let secret = TokenSecret::from_hex("00112233445566778899aabbccddeeff").expect("static hex");
    env.core = RmCore::new(conf, 2_000, 1, secret);
    env.now = now;
    for r in records {
        env.core.recover_app(r, now);
    }
    env.step();
    env
}

/// The reports of `r`'s node: the AM and the workers running, `done` of them complete.
fn reports_of(r: &Running, done: &[ContainerId]) -> Vec<ReportedContainer> {
    let mut v = vec![report(r.am, ContainerState::RUNNING, -1000, 512)];
    for w in &r.workers {
        v.push(match done.contains(w) {
            true => report(*w, ContainerState::COMPLETE, 0, 1024),
            false => report(*w, ContainerState::RUNNING, -1000, 1024),
        });
    }
    v
}

/// YARN's justFinishedContainers -> finishedContainersSentToAM -> acknowledged: the NM keeps
/// reporting a completion until the AM has acknowledged it, so a completion the NM handed
/// over just before the RM died is not lost; the restarted RM tells the AM once.
#[test]
fn a_completion_handed_over_before_a_crash_reaches_the_am_after_the_restart() {
    let mut r = running_app();
    let w0 = r.workers[0];
    // The NM hands the completion over; the RM does not let it forget it yet.
    let hb = r.env.heartbeat(&r.node, reports_of(&r, &[w0]));
    assert!(!hb.containers_to_remove.contains(&w0), "{hb:?}");
    let hb = r.env.heartbeat(&r.node, reports_of(&r, &[w0]));
    assert!(!hb.containers_to_remove.contains(&w0), "{hb:?}");

    // The RM dies before the AM's allocate fetched it; the NM re-registers with it.
    let rec = last_record(&r.env, &r.app);
    let mut env = restarted(vec![rec], r.env.now + 5_000);
    env.core
        .register_node(registration(&r.node, reports_of(&r, &[w0])), env.now);
    env.step();
    env.core
        .am_register(&r.attempt, "amhost".into(), 7, String::new(), env.now)
        .expect("re-register");
    env.step();
    let got = env
        .core
        .am_allocate(&r.attempt, 1, vec![], vec![], 0.5, env.now)
        .expect("allocate");
    env.step();
    let done: Vec<_> = got.completed.iter().map(|s| s.container_id).collect();
    assert_eq!(done, vec![w0], "told once");
    // Told, not acknowledged yet: the NM keeps it.
    let hb = env.heartbeat(&r.node, reports_of(&r, &[w0]));
    assert!(!hb.containers_to_remove.contains(&w0), "{hb:?}");
    // The next allocate acknowledges it (and does not tell it again); the NM may forget it.
    let again = env
        .core
        .am_allocate(&r.attempt, 2, vec![], vec![], 0.5, env.now)
        .expect("allocate");
    env.step();
    assert!(again.completed.is_empty(), "{:?}", again.completed);
    let hb = env.heartbeat(&r.node, reports_of(&r, &[w0]));
    assert!(hb.containers_to_remove.contains(&w0), "{hb:?}");
    let hb = env.heartbeat(&r.node, reports_of(&r, &[]).into_iter().take(2).collect());
    assert!(hb.containers_to_remove.is_empty(), "{hb:?}");
}

/// A completion told to the AM whose acknowledgement (the next allocate) never came before
/// the crash is still with the NM, and the restarted RM tells it again (the SDK drops the
/// repeat): at least once from the RM, exactly once to the AM's code.
#[test]
fn a_completion_told_but_not_acknowledged_before_a_crash_is_told_again() {
    let mut r = running_app();
    let w0 = r.workers[0];
    r.env.heartbeat(&r.node, reports_of(&r, &[w0]));
    let told = r
        .env
        .core
        .am_allocate(&r.attempt, 3, vec![], vec![], 0.5, r.env.now)
        .expect("allocate");
    r.env.step();
    assert_eq!(told.completed.len(), 1);
    let hb = r.env.heartbeat(&r.node, reports_of(&r, &[w0]));
    assert!(!hb.containers_to_remove.contains(&w0), "{hb:?}");

    let rec = last_record(&r.env, &r.app);
    let mut env = restarted(vec![rec], r.env.now + 5_000);
    env.core
        .register_node(registration(&r.node, reports_of(&r, &[w0])), env.now);
    env.step();
    env.core
        .am_register(&r.attempt, "amhost".into(), 7, String::new(), env.now)
        .expect("re-register");
    let got = env
        .core
        .am_allocate(&r.attempt, 1, vec![], vec![], 0.5, env.now)
        .expect("allocate");
    env.step();
    assert_eq!(
        got.completed
            .iter()
            .map(|s| s.container_id)
            .collect::<Vec<_>>(),
        vec![w0]
    );
}

/// A completion no AM will acknowledge (its application ended) is released to the NM at
/// once, so NMs do not keep completions forever.
#[test]
fn completions_of_an_ended_application_are_released_at_once() {
    let mut r = running_app();
    let w0 = r.workers[0];
    r.env.heartbeat(&r.node, reports_of(&r, &[w0]));
    r.env
        .core
        .am_finish(
            &r.attempt,
            FinalApplicationStatus::SUCCEEDED,
            String::new(),
            String::new(),
            r.env.now,
        )
        .expect("finish");
    r.env.step();
    let hb = r.env.heartbeat(&r.node, reports_of(&r, &[w0]));
    assert!(hb.containers_to_remove.contains(&w0), "{hb:?}");
}

/// Many AMs alive across a restart, more than the AM limit of a cluster whose NMs have not
/// registered again yet: each keeps its attempt, is active at once (its resent asks are
/// served), its state and diagnostic agree at every step (`sanity_check`), and none waits
/// out the AM liveness counted from before the restart.
#[test]
fn live_ams_keep_their_attempts_and_agree_with_their_diagnostics_across_a_restart() {
    let mut env = TestEnv::with_conf(roomy());
    let node = NodeId::new("h1", 1);
    let big = |containers| NodeRegistration {
        total: Resource::new(16384, 16),
        ..registration(&node, containers)
    };
    env.core.register_node(big(vec![]), env.now);
    env.step();
    let apps: Vec<ApplicationId> = (0..6).map(|_| env.submit("default")).collect();
    let launched = env.launch_all();
    assert_eq!(launched.len(), 6, "every AM launched");
    let ams: Vec<ReportedContainer> = launched
        .iter()
        .map(|(_, c)| report(*c, ContainerState::RUNNING, -1000, 512))
        .collect();
    env.heartbeat(&node, ams.clone());
    for (att, _) in &launched {
        env.core
            .am_register(att, "h".into(), 0, String::new(), env.now)
            .expect("register");
        env.step();
    }
    let records: Vec<AppRecord> = apps.iter().map(|a| last_record(&env, a)).collect();
    // The last AM call was long ago: the liveness counts from the restart.
    let later = env.now + CoreConfig::for_tests().am_expiry_ms - 1_000;
    let mut new = restarted_with(roomy(), records, later);
    for a in &apps {
        let app = new.app(a);
        assert_eq!(app.state, AppState::RUNNING);
        assert_eq!(app.diagnostics_kind, DiagnosticsKind::Recovered, "{a}");
        assert!(new.core.scheduler().app(a).is_some_and(|s| s.active), "{a}");
    }
    // Nothing happens for a while: no AM is given up on.
    new.advance(5_000);
    assert!(apps.iter().all(|a| new.app(a).attempts.len() == 1));
    // Some AMs come back before their NM does (the RM does not care which is first).
    for (att, _) in &launched[..3] {
        new.core
            .am_register(att, "h".into(), 0, String::new(), new.now)
            .expect("re-register");
        new.step();
    }
    new.core.register_node(big(ams), new.now);
    new.step();
    for (att, _) in &launched[3..] {
        new.core
            .am_register(att, "h".into(), 0, String::new(), new.now)
            .expect("re-register");
        new.step();
    }
    assert_eq!(new.core.counters().containers_recovered, 6);
    for (att, am) in &launched {
        let app = new.app(&att.application_id);
        assert_eq!(app.attempts.len(), 1, "{att} keeps its attempt");
        assert_eq!(app.state, AppState::RUNNING);
        assert_eq!(app.diagnostics, "", "{att}");
        assert_eq!(new.core.containers()[am].state, RmContainerState::RUNNING);
        // Its resent asks are served.
        let got = new.ask(att, 1, 256);
        assert_eq!(got.allocated.len(), 1, "{att}");
    }
    let used = new.core.scheduler().node(&node).expect("node").used.clone();
    assert_eq!(used, Resource::new(6 * 512 + 6 * 256, 12));
}

/// After a restart, containers an NM reports that the RM does not know are stopped, and
/// containers the new RM allocates that are never started expire
/// (`container-allocation.expiry-interval-ms`) and are released: a recorded allocation is
/// running and accounted, or released, never leaked.
#[test]
fn unknown_containers_are_stopped_and_unstarted_allocations_expire_after_a_restart() {
    let r = running_app();
    let rec = last_record(&r.env, &r.app);
    let mut env = restarted(vec![rec], r.env.now + 5_000);
    // A container of an application no store knows (epoch 0), still running on the node.
    let stranger = ContainerId::new(
        ApplicationAttemptId::new(ApplicationId::new(1_000, 99), 1),
        0,
        1,
    );
    let mut reports = reports_of(&r, &[]);
    reports.push(report(stranger, ContainerState::RUNNING, -1000, 256));
    env.core
        .register_node(registration(&r.node, reports.clone()), env.now);
    env.step();
    let hb = env.heartbeat(&r.node, reports);
    assert!(hb.containers_to_cleanup.contains(&stranger), "{hb:?}");
    assert!(!env.core.containers().contains_key(&stranger));
    // The stopped container is reported complete once, and released.
    let mut reports = reports_of(&r, &[]);
    reports.push(report(stranger, ContainerState::COMPLETE, 137, 256));
    let hb = env.heartbeat(&r.node, reports);
    assert!(hb.containers_to_remove.contains(&stranger), "{hb:?}");
    assert!(!hb.containers_to_cleanup.contains(&stranger), "{hb:?}");

    // The AM asks again; the new container is never started on its NM.
    env.core
        .am_register(&r.attempt, "amhost".into(), 7, String::new(), env.now)
        .expect("re-register");
    env.step();
    let got = env.ask(&r.attempt, 1, 1024);
    assert_eq!(got.allocated.len(), 1);
    let unused = got.allocated[0].id;
    let before = Resource::new(512 + 2 * 1024, 3);
    assert_eq!(
        env.core.scheduler().node(&r.node).expect("node").used,
        before.plus(&Resource::new(1024, 1))
    );
    let expiry = CoreConfig::for_tests().container_alloc_expiry_ms;
    // The AM and the NM go on as before (the NM keeps reporting the others).
    let mut t = 0;
    while t <= expiry {
        env.advance(100_000.min(expiry + 1 - t));
        t += 100_000.min(expiry + 1 - t);
        env.heartbeat(&r.node, reports_of(&r, &[]));
        env.core
            .am_allocate(&r.attempt, 3, vec![], vec![], 0.5, env.now)
            .expect("allocate");
        env.step();
    }
    assert_eq!(
        env.core.containers()[&unused].state,
        RmContainerState::COMPLETED
    );
    assert_eq!(env.core.containers()[&unused].exit_status, -100);
    assert_eq!(
        env.core.scheduler().node(&r.node).expect("node").used,
        before
    );
}

/// What the restart property test plays: AMs, NMs (each keeps a completion until the RM
/// lists it in `containersToBeRemovedFromNm`), and RM restarts at random points.
#[derive(Debug, Clone)]
enum World {
    Submit,
    Ask(usize, u32),
    Exit(usize, usize),
    Heartbeat(usize),
    Poll(usize),
    Advance(u64),
    Restart,
}

fn world_op() -> impl proptest::strategy::Strategy<Value = World> {
    use proptest::prelude::*;
    prop_oneof![
        1 => Just(World::Submit),
        3 => (0..4usize, 1..3u32).prop_map(|(a, n)| World::Ask(a, n)),
        3 => (0..4usize, 0..4usize).prop_map(|(a, c)| World::Exit(a, c)),
        3 => (0..2usize).prop_map(World::Heartbeat),
        3 => (0..4usize).prop_map(World::Poll),
        1 => (1..3000u64).prop_map(World::Advance),
        1 => Just(World::Restart),
    ]
}

/// An NM's container table as the RM sees it in reports.
#[derive(Debug, Clone)]
struct NmEntry {
    mem: i64,
    exit: Option<i32>,
}

struct Sim {
    env: TestEnv,
    epoch: u32,
    nodes: Vec<NodeId>,
    nm: BTreeMap<NodeId, BTreeMap<ContainerId, NmEntry>>,
    apps: Vec<ApplicationId>,
    store: BTreeMap<ApplicationId, AppRecord>,
    /// Attempts registered with the current RM incarnation.
    registered: BTreeSet<ApplicationAttemptId>,
    /// Completions each attempt's AM heard, after the SDK's de-duplication.
    heard: BTreeMap<ApplicationAttemptId, BTreeSet<ContainerId>>,
    /// Completions the current incarnation told, to check it tells each once.
    told: BTreeSet<ContainerId>,
    /// Every container that ended on an NM.
    ended: BTreeSet<ContainerId>,
}

const NODE: (i64, i64) = (4096, 16);

impl Sim {
    fn new() -> Self {
        let mut env = TestEnv::with_conf(roomy());
        let nodes: Vec<NodeId> = (0..2)
            .map(|i| env.add_node(&format!("h{i}"), 1, NODE.0, NODE.1))
            .collect();
        let nm = nodes.iter().map(|n| (n.clone(), BTreeMap::new())).collect();
        Self {
            env,
            epoch: 0,
            nodes,
            nm,
            apps: vec![],
            store: BTreeMap::new(),
            registered: BTreeSet::new(),
            heard: BTreeMap::new(),
            told: BTreeSet::new(),
            ended: BTreeSet::new(),
        }
    }

    fn reports(&self, node: &NodeId) -> Vec<ReportedContainer> {
        self.nm[node]
            .iter()
            .map(|(id, e)| match e.exit {
                Some(x) => report(*id, ContainerState::COMPLETE, x, e.mem),
                None => report(*id, ContainerState::RUNNING, -1000, e.mem),
            })
            .collect()
    }

    /// AM launches the core asked for reach their NMs.
    fn launch(&mut self) {
        self.harvest();
        for (_, c) in self.env.launch_all() {
            let Some(rc) = self.env.core.containers().get(&c) else {
                continue;
            };
            let (node, mem) = (rc.node.clone(), rc.resource.memory_mb);
            self.nm
                .entry(node)
                .or_default()
                .insert(c, NmEntry { mem, exit: None });
        }
    }

    fn heartbeat(&mut self, i: usize) {
        let node = self.nodes[i].clone();
        let reports = self.reports(&node);
        let hb = self.env.heartbeat(&node, reports);
        let table = self.nm.entry(node).or_default();
        for c in hb.containers_to_cleanup {
            if let Some(e) = table.get_mut(&c).filter(|e| e.exit.is_none()) {
                e.exit = Some(exit_status::KILLED_BY_RESOURCEMANAGER);
                self.ended.insert(c);
            }
        }
        for c in hb.containers_to_remove {
            if table.get(&c).is_some_and(|e| e.exit.is_some()) {
                table.remove(&c);
            }
        }
        self.harvest();
    }

    fn harvest(&mut self) {
        harvest(&mut self.env, &mut self.store);
    }

    /// The AM of app `a` calls allocate (registering first, as the SDK does on a 409).
    fn allocate(&mut self, a: usize, asks: Vec<AskUpdate>) {
        let Some(att) = self
            .apps
            .get(a)
            .and_then(|app| self.env.core.apps()[app].current_attempt())
            .filter(|x| {
                matches!(
                    x.phase,
                    AttemptPhase::Launched { .. } | AttemptPhase::Running
                )
            })
            .map(|x| x.id)
        else {
            return;
        };
        // Its AM must be running on an NM.
        let am = self.env.core.apps()[&att.application_id]
            .current_attempt()
            .and_then(Attempt::am_container);
        let alive = am.is_some_and(|c| {
            self.nm
                .values()
                .any(|t| t.get(&c).is_some_and(|e| e.exit.is_none()))
        });
        if !alive {
            return;
        }
        if self.registered.insert(att) {
            let _ = self
                .env
                .core
                .am_register(&att, "h".into(), 0, String::new(), self.env.now);
            self.env.step();
        }
        let Ok(reply) = self
            .env
            .core
            .am_allocate(&att, 0, asks, vec![], 0.1, self.env.now)
        else {
            self.env.step();
            return;
        };
        self.env.step();
        for s in &reply.completed {
            assert!(
                self.told.insert(s.container_id),
                "{} told twice by one RM",
                s.container_id
            );
            self.heard.entry(att).or_default().insert(s.container_id);
        }
        for c in &reply.allocated {
            self.nm.entry(c.node_id.clone()).or_default().insert(
                c.id,
                NmEntry {
                    mem: c.resource.memory_mb,
                    exit: None,
                },
            );
        }
        self.harvest();
    }

    fn restart(&mut self) {
        self.harvest();
        self.epoch += 1;
        let conf = roomy();
        let secret = TokenSecret::from_hex("00112233445566778899aabbccddeeff").expect("static hex");
        let now = self.env.now + 1_000;
        let mut env = TestEnv::with_conf(conf.clone());
        env.core = RmCore::new(conf, 2_000 + u64::from(self.epoch), self.epoch, secret);
        env.now = now;
        for r in self.store.values() {
            env.core.recover_app(r.clone(), now);
        }
        env.step();
        self.env = env;
        self.registered.clear();
        self.told.clear();
        for n in self.nodes.clone() {
            let mut reg = registration(&n, self.reports(&n));
            reg.total = Resource::new(NODE.0, NODE.1);
            self.env.core.register_node(reg, self.env.now);
            self.env.step();
        }
        self.harvest();
    }

    fn play(&mut self, op: &World) {
        match op {
            World::Submit => {
                if self.apps.len() < 4 {
                    self.apps.push(self.env.submit("default"));
                }
            }
            World::Ask(a, n) => {
                let ask = AskUpdate {
                    image: None,
                    label: None,
                    tags: Vec::new(),
                    constraint: None,
                    priority: 1,
                    allocation_request_id: 0,
                    resource_name: "*".into(),
                    capability: Resource::new(512, 1),
                    num_containers: *n,
                    relax_locality: true,
                    gang: None,
                    cpu: None,
                };
                self.allocate(*a, vec![ask]);
            }
            World::Exit(a, k) => {
                let Some(app) = self.apps.get(*a) else { return };
                let am = self.env.core.apps()[app]
                    .current_attempt()
                    .and_then(Attempt::am_container);
                let workers: Vec<(NodeId, ContainerId)> = self
                    .nm
                    .iter()
                    .flat_map(|(n, t)| t.iter().map(move |(c, e)| (n, c, e)))
                    .filter(|(_, c, e)| {
                        c.application_id() == *app && e.exit.is_none() && Some(**c) != am
                    })
                    .map(|(n, c, _)| (n.clone(), *c))
                    .collect();
                if let Some((n, c)) = workers.get(*k % workers.len().max(1)) {
                    if let Some(e) = self.nm.get_mut(n).and_then(|t| t.get_mut(c)) {
                        e.exit = Some(0);
                        self.ended.insert(*c);
                    }
                }
            }
            World::Heartbeat(i) => self.heartbeat(*i),
            World::Poll(a) => self.allocate(*a, vec![]),
            World::Advance(ms) => {
                self.launch();
                for i in 0..self.nodes.len() {
                    self.heartbeat(i);
                }
                self.env.advance(*ms);
                self.harvest();
            }
            World::Restart => self.restart(),
        }
        self.launch();
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
    /// RM restarts at random points under AMs and NMs that behave as the real ones do: every
    /// step keeps the accounting (`sanity_check`: no node over-allocated), one RM never tells
    /// a completion twice, and every worker completion of an attempt that is still live
    /// reaches its AM, whatever restart fell between the NM's report and the AM's allocate.
    #[test]
    fn restarts_at_random_points_lose_no_completion(ops in proptest::collection::vec(world_op(), 1..60)) {
        let mut sim = Sim::new();
        for op in &ops {
            sim.play(op);
        }
        // Let everything settle: NMs report, AMs call twice (acknowledging), NMs report again.
        for _ in 0..3 {
            for i in 0..sim.nodes.len() {
                sim.heartbeat(i);
            }
            for a in 0..sim.apps.len() {
                sim.allocate(a, vec![]);
            }
        }
        for app in &sim.apps {
            let a = &sim.env.core.apps()[app];
            let Some(att) = a.current_attempt().filter(|x| x.state() == AttemptState::RUNNING) else {
                continue;
            };
            if a.state.is_final() {
                continue;
            }
            let heard = sim.heard.get(&att.id).cloned().unwrap_or_default();
            let am = att.am_container();
            // Every worker of this attempt that ended on an NM was heard by its AM...
            for c in sim.ended.iter().filter(|c| c.attempt_id == att.id && Some(**c) != am) {
                proptest::prop_assert!(heard.contains(c), "{} ended on its NM but its AM never heard", c);
            }
            // ...and, acknowledged, is no longer kept by its NM.
            for t in sim.nm.values() {
                for (c, e) in t {
                    if c.attempt_id == att.id && e.exit.is_some() && Some(*c) != am {
                        proptest::prop_assert!(false, "{} acknowledged by its AM but still kept by its NM", c);
                    }
                }
            }
        }
    }
}

/// A short NM expiry (a test cluster's, say) and an RM that comes up slowly: the NMs
/// register again later than the NM expiry after the restart. A recovered attempt waits for
/// its AM as long as the AM liveness allows too, so its live AM keeps it.
#[test]
fn nms_registering_later_than_the_nm_expiry_do_not_cost_live_ams_their_attempts() {
    let r = running_app();
    let rec = last_record(&r.env, &r.app);
    let mut conf = CoreConfig::for_tests();
    conf.nm_expiry_ms = 3_000;
    let mut env = restarted_with(conf, vec![rec], r.env.now + 5_000);
    env.advance(4_000);
    env.advance(4_000);
    assert_eq!(env.app(&r.app).attempts.len(), 1, "still waiting");
    env.core
        .register_node(registration(&r.node, reports_of(&r, &[])), env.now);
    env.step();
    env.core
        .am_register(&r.attempt, "amhost".into(), 7, String::new(), env.now)
        .expect("re-register");
    env.step();
    env.heartbeat(&r.node, reports_of(&r, &[]));
    let app = env.app(&r.app);
    assert_eq!(app.attempts.len(), 1, "the live AM keeps its attempt");
    assert_eq!(app.state, AppState::RUNNING);
    assert_eq!(env.core.counters().containers_recovered, 3);
}

/// keep-containers across attempts and an AM whose NM came back only after its recovered
/// attempt gave up on it: the next attempt takes the old workers over, but the old AM is
/// stopped, never kept as one of its containers (it would run on, unseen, to the end).
#[test]
fn an_old_attempts_am_reported_late_is_stopped_not_kept() {
    let mut env = TestEnv::new();
    let node = NodeId::new("h1", 1);
    env.core.register_node(registration(&node, vec![]), env.now);
    env.step();
    let app = env.core.new_application();
    let mut sub = env.submission("default");
    sub.keep_containers = true;
    sub.max_app_attempts = 2;
    env.core.submit(app, sub, env.now).expect("submit");
    env.step();
    let (att1, am1) = env.launch_all()[0];
    env.heartbeat(
        &node,
        vec![report(am1, ContainerState::RUNNING, -1000, 512)],
    );
    env.core
        .am_register(&att1, "h".into(), 0, String::new(), env.now)
        .expect("register");
    env.step();
    let w = env.ask(&att1, 1, 1024).allocated[0].id;
    let running = vec![
        report(am1, ContainerState::RUNNING, -1000, 512),
        report(w, ContainerState::RUNNING, -1000, 1024),
    ];
    env.heartbeat(&node, running.clone());
    let rec = last_record(&env, &app);

    // The restarted RM waits for the AM; its NM stays away past the wait.
    let mut new = restarted(vec![rec], env.now + 1_000);
    let other = NodeId::new("h2", 1);
    new.core
        .register_node(registration(&other, vec![]), new.now);
    new.step();
    let wait = CoreConfig::for_tests().nm_expiry_ms;
    for _ in 0..6 {
        new.advance(wait / 5);
        new.heartbeat(&other, vec![]);
    }
    assert_eq!(new.app(&app).attempts.len(), 2, "a second attempt");
    // The NM comes back with the old AM and the worker still running.
    new.core
        .register_node(registration(&node, running.clone()), new.now);
    new.step();
    let hb = new.heartbeat(&node, running);
    assert!(hb.containers_to_cleanup.contains(&am1), "{hb:?}");
    assert!(!hb.containers_to_cleanup.contains(&w), "{hb:?}");
    let att2 = new.app(&app).attempts[1].id;
    let kept: Vec<ContainerId> = new
        .core
        .inherited_containers(&att2)
        .iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(kept, vec![w]);
}

/// State, activation and diagnostic agree after a move too: an application waiting behind
/// its queue's max-parallel-apps is activated when the running one moves out, starts its
/// attempt, and no longer says it is not activated.
#[test]
fn a_move_that_frees_room_starts_the_waiting_application() {
    use crate::core::queue_conf::{CapacitySpec, QueueSpec};
    let mut conf = roomy();
    let mut a = QueueSpec::new(super::qp("root.a"), CapacitySpec::Percent(50.0));
    a.max_parallel_apps = Some(1);
    a.max_am_resource_percent = 1.0;
    let mut b = QueueSpec::new(super::qp("root.b"), CapacitySpec::Percent(50.0));
    b.max_am_resource_percent = 1.0;
    conf.scheduler.root.children = vec![a, b];
    let mut env = TestEnv::with_conf(conf);
    env.add_node("h1", 1, 8192, 8);
    let x = env.submit("a");
    let y = env.submit("a");
    assert_eq!(env.launch_all().len(), 1);
    assert_eq!(env.app(&y).diagnostics_kind, DiagnosticsKind::NotActivated);
    env.core
        .move_app(&x, "root.b", &Caller::new("alice", vec![]), env.now)
        .expect("move");
    env.step();
    let launched = env.launch_all();
    assert_eq!(launched.len(), 1, "the waiting application starts");
    assert_eq!(launched[0].0.application_id, y);
    assert_ne!(env.app(&y).diagnostics_kind, DiagnosticsKind::NotActivated);
}
