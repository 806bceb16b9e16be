//! Scenario and property tests of the core, through a [`TestEnv`] that feeds inputs and runs
//! `sanity_check()` after every step. No sockets, no sleeps: time is a number we move.

use proptest::prelude::*;
use spindle_common::states::{
    ContainerState, FinalApplicationStatus, NodeState, YarnApplicationState as AppState,
};
use spindle_common::token::TokenSecret;

use super::*;

mod am_guarantees;
mod am_limit;
mod capacity;
mod cpu;
mod decommission;
mod dependencies;
mod elastic;
mod fair_preemption;
mod fairshare;
mod gang;
mod idle;
mod images;
mod keys;
mod labels;
mod lifetime;
mod preemption;
mod preemption_reach;
mod recovery;
mod recovery_waiting;
mod resubmission;
mod resume;
mod topology;
mod updates;
mod usage;
mod wait_reason;

/// A queue path from a test's literal.
pub(crate) fn qp(path: impl AsRef<str>) -> spindle_common::QueuePath {
    spindle_common::QueuePath::parse(path.as_ref()).expect("a valid queue path")
}

pub(crate) struct TestEnv {
    pub core: RmCore,
    pub now: u64,
    pub effects: Vec<Effect>,
}

impl TestEnv {
    pub(crate) fn new() -> Self {
        Self::with_conf(CoreConfig::for_tests())
    }

    pub(crate) fn with_conf(conf: CoreConfig) -> Self {
        let secret = TokenSecret::from_hex("00112233445566778899aabbccddeeff").expect("static hex");
        Self {
            core: RmCore::new(conf, 1_000, 0, secret),
            now: 1_000_000,
            effects: Vec::new(),
        }
    }

    pub(crate) fn step(&mut self) {
        self.effects.extend(self.core.take_effects());
        if let Err(e) = self.core.sanity_check() {
            panic!("sanity check failed at t={}: {e}", self.now);
        }
    }

    pub(crate) fn advance(&mut self, ms: u64) {
        self.now += ms;
        self.core.tick(self.now);
        self.step();
    }

    pub(crate) fn add_node(&mut self, host: &str, port: u16, mem: i64, vcores: i64) -> NodeId {
        let id = NodeId::new(host, port);
        self.core.register_node(
            NodeRegistration {
                id: id.clone(),
                http_address: format!("{host}:{port}"),
                rack: "/default-rack".into(),
                total: Resource::new(mem, vcores),
                version: "test".into(),
                containers: vec![],
                attributes: Default::default(),
            },
            self.now,
        );
        self.step();
        id
    }

    pub(crate) fn submission(&self, queue: &str) -> Submission {
        Submission {
            name: "test".into(),
            queue: queue.into(),
            user: "alice".into(),
            priority: 0,
            application_type: "YARN".into(),
            tags: vec![],
            am_resource: Resource::new(512, 1),
            am_launch: LaunchSpec {
                commands: vec!["./am".into()],
                ..Default::default()
            },
            max_app_attempts: 0,
            keep_containers: false,
            unmanaged_am: false,
            groups: vec![],
            node_label_expression: None,
            am_node_label_expression: None,
            lifetime_secs: None,
            dependencies: Vec::new(),
        }
    }

    pub(crate) fn submit(&mut self, queue: &str) -> ApplicationId {
        let id = self.core.new_application();
        let sub = self.submission(queue);
        self.core.submit(id, sub, self.now).expect("submit");
        self.step();
        id
    }

    /// Completes the launches the core asked for, as a healthy NM would.
    pub(crate) fn launch_all(&mut self) -> Vec<(ApplicationAttemptId, ContainerId)> {
        let mut out = vec![];
        for e in std::mem::take(&mut self.effects) {
            if let Effect::LaunchAm {
                attempt, container, ..
            } = e
            {
                self.core
                    .am_launched(&attempt, &container, Ok(()), self.now);
                out.push((attempt, container));
            }
        }
        self.step();
        out
    }

    pub(crate) fn heartbeat(
        &mut self,
        node: &NodeId,
        reports: Vec<ReportedContainer>,
    ) -> HeartbeatReply {
        let r = self
            .core
            .node_heartbeat(node, true, String::new(), reports, self.now);
        self.step();
        r
    }

    pub(crate) fn running(id: ContainerId) -> ReportedContainer {
        ReportedContainer {
            id,
            state: ContainerState::RUNNING,
            exit_status: -1000,
            diagnostics: String::new(),
            resource: Resource::zero(),
        }
    }

    pub(crate) fn done(id: ContainerId, exit: i32) -> ReportedContainer {
        ReportedContainer {
            id,
            state: ContainerState::COMPLETE,
            exit_status: exit,
            diagnostics: format!("exit {exit}"),
            resource: Resource::zero(),
        }
    }

    pub(crate) fn app(&self, id: &ApplicationId) -> &App {
        &self.core.apps()[id]
    }

    pub(crate) fn ask(&mut self, att: &ApplicationAttemptId, n: u32, mem: i64) -> AllocateReply {
        let r = self
            .core
            .am_allocate(
                att,
                0,
                vec![AskUpdate {
                    image: None,
                    label: None,
                    tags: Vec::new(),
                    constraint: None,
                    priority: 1,
                    allocation_request_id: 0,
                    resource_name: "*".into(),
                    capability: Resource::new(mem, 1),
                    num_containers: n,
                    relax_locality: true,
                    gang: None,
                    cpu: None,
                }],
                vec![],
                0.1,
                self.now,
            )
            .expect("allocate");
        self.step();
        r
    }
}

#[test]
fn app_runs_to_finished_succeeded() {
    let mut env = TestEnv::new();
    let n1 = env.add_node("h1", 1, 4096, 4);
    let app = env.submit("default");
    assert_eq!(env.app(&app).state, AppState::ACCEPTED);
    let launched = env.launch_all();
    assert_eq!(
        launched.len(),
        1,
        "the AM container is allocated at submit, without a heartbeat"
    );
    let (att, am) = launched[0];
    env.heartbeat(&n1, vec![TestEnv::running(am)]);
    env.core
        .am_register(&att, "h1".into(), 0, String::new(), env.now)
        .unwrap();
    assert_eq!(env.app(&app).state, AppState::RUNNING);
    let r = env.ask(&att, 2, 1000);
    assert_eq!(
        r.allocated.len(),
        2,
        "asks are served in the same allocate call"
    );
    assert_eq!(
        r.allocated[0].resource.memory_mb, 1024,
        "normalized up to a multiple of the minimum"
    );
    let ids: Vec<ContainerId> = r.allocated.iter().map(|c| c.id).collect();
    env.heartbeat(
        &n1,
        vec![
            TestEnv::running(am),
            TestEnv::running(ids[0]),
            TestEnv::running(ids[1]),
        ],
    );
    env.advance(1000);
    let hb = env.heartbeat(
        &n1,
        vec![
            TestEnv::running(am),
            TestEnv::done(ids[0], 0),
            TestEnv::done(ids[1], 0),
        ],
    );
    assert_eq!(
        hb.containers_to_remove.len(),
        0,
        "the NM keeps the completions until the AM has acknowledged them"
    );
    let r = env
        .core
        .am_allocate(&att, 1, vec![], vec![], 1.0, env.now)
        .unwrap();
    assert_eq!(r.completed.len(), 2);
    // The next allocate acknowledges them: the NM may forget them now.
    env.core
        .am_allocate(&att, 2, vec![], vec![], 1.0, env.now)
        .unwrap();
    let done = vec![
        TestEnv::running(am),
        TestEnv::done(ids[0], 0),
        TestEnv::done(ids[1], 0),
    ];
    let hb = env.heartbeat(&n1, done);
    assert_eq!(hb.containers_to_remove.len(), 2);
    env.core
        .am_finish(
            &att,
            FinalApplicationStatus::SUCCEEDED,
            String::new(),
            String::new(),
            env.now,
        )
        .unwrap();
    env.step();
    assert_eq!(env.app(&app).state, AppState::FINISHED);
    assert_eq!(
        env.app(&app).final_status,
        FinalApplicationStatus::SUCCEEDED
    );
    let hb = env.heartbeat(&n1, vec![TestEnv::done(am, 0)]);
    assert_eq!(
        hb.apps_to_cleanup,
        vec![app],
        "the node is told to clean up once the app is gone"
    );
    let hb = env.heartbeat(&n1, vec![]);
    assert!(hb.apps_to_cleanup.is_empty());
    assert!(env.app(&app).memory_ms > 0);
}

#[test]
fn failed_am_retries_then_fails_the_app() {
    let mut env = TestEnv::new();
    let n1 = env.add_node("h1", 1, 4096, 4);
    let app = env.submit("default");
    for attempt in 1..=2 {
        let (att, am) = env.launch_all()[0];
        assert_eq!(att.attempt_id, attempt);
        env.heartbeat(&n1, vec![TestEnv::running(am)]);
        env.heartbeat(&n1, vec![TestEnv::done(am, 1)]);
    }
    let a = env.app(&app);
    assert_eq!(a.state, AppState::FAILED);
    assert!(
        a.diagnostics.contains("failed 2 times"),
        "{}",
        a.diagnostics
    );
    assert!(a.diagnostics.contains("exitCode: 1"));
}

#[test]
fn lost_node_aborts_containers_and_tells_the_am() {
    let mut conf = CoreConfig::for_tests();
    conf.nm_expiry_ms = 5_000;
    let mut env = TestEnv::with_conf(conf);
    let n1 = env.add_node("h1", 1, 2048, 2);
    let app = env.submit("default");
    let (att, am) = env.launch_all()[0];
    env.heartbeat(&n1, vec![TestEnv::running(am)]);
    env.core
        .am_register(&att, "h1".into(), 0, String::new(), env.now)
        .unwrap();
    let n2 = env.add_node("h2", 1, 2048, 2);
    let r = env.ask(&att, 1, 1024);
    let c = r.allocated[0].id;
    assert_eq!(r.allocated[0].node_id, n2);
    env.heartbeat(&n2, vec![TestEnv::running(c)]);
    for _ in 0..4 {
        env.advance(2_000);
        env.heartbeat(&n1, vec![TestEnv::running(am)]);
    }
    assert_eq!(env.core.nodes()[&n2].state, NodeState::LOST);
    let r = env
        .core
        .am_allocate(&att, 2, vec![], vec![], 0.5, env.now)
        .unwrap();
    assert_eq!(r.completed.len(), 1);
    assert_eq!(r.completed[0].exit_status, exit_status::ABORTED);
    assert!(r.completed[0].diagnostics.contains("lost"));
    assert_eq!(env.app(&app).state, AppState::RUNNING);
    // The lost node comes back and is told to re-register.
    let hb = env.heartbeat(&n2, vec![]);
    assert_eq!(hb.action, NodeAction::Resync);
}

#[test]
fn a_stopping_node_is_shut_down_and_its_containers_abort() {
    let mut env = TestEnv::new();
    let n1 = env.add_node("h1", 1, 4096, 4);
    let app = env.submit("default");
    let (_, am) = env.launch_all()[0];
    env.heartbeat(&n1, vec![TestEnv::running(am)]);
    env.core.unregister_node(&n1, env.now);
    env.step();
    assert_eq!(env.core.nodes()[&n1].state, NodeState::SHUTDOWN);
    // The AM's node is gone: the attempt fails without counting, and a new one waits.
    assert_eq!(env.app(&app).state, AppState::ACCEPTED);
    assert_eq!(env.app(&app).attempts.len(), 2);
    let n2 = env.add_node("h2", 1, 4096, 4);
    assert_eq!(
        env.launch_all().len(),
        1,
        "the new attempt's AM lands on the new node"
    );
    assert!(env.core.nodes()[&n2].containers.len() == 1);
}

#[test]
fn kill_waits_for_running_containers_then_is_final() {
    let mut env = TestEnv::new();
    let n1 = env.add_node("h1", 1, 4096, 4);
    let app = env.submit("default");
    let (_, am) = env.launch_all()[0];
    env.heartbeat(&n1, vec![TestEnv::running(am)]);
    assert_eq!(
        env.core
            .kill(&app, &Caller::new("alice", vec![]), env.now)
            .unwrap(),
        KillOutcome::InProgress
    );
    let hb = env.heartbeat(&n1, vec![TestEnv::running(am)]);
    assert_eq!(hb.containers_to_cleanup, vec![am]);
    env.heartbeat(&n1, vec![TestEnv::done(am, 143)]);
    assert_eq!(
        env.core
            .kill(&app, &Caller::new("alice", vec![]), env.now)
            .unwrap(),
        KillOutcome::Done(AppState::KILLED)
    );
    assert_eq!(env.app(&app).final_status, FinalApplicationStatus::KILLED);
    // A kill of an app without containers is immediate.
    let app2 = env.submit("nope");
    assert_eq!(env.app(&app2).state, AppState::FAILED);
    assert!(env.app(&app2).diagnostics.contains("unknown queue: nope"));
}

#[test]
fn oversized_asks_are_refused_and_change_nothing() {
    let mut env = TestEnv::new();
    let n1 = env.add_node("h1", 1, 4096, 4);
    env.submit("default");
    let (att, am) = env.launch_all()[0];
    env.heartbeat(&n1, vec![TestEnv::running(am)]);
    env.core
        .am_register(&att, "h1".into(), 0, String::new(), env.now)
        .unwrap();
    let err = env
        .core
        .am_allocate(
            &att,
            0,
            vec![AskUpdate {
                image: None,
                label: None,
                tags: Vec::new(),
                constraint: None,
                priority: 1,
                allocation_request_id: 0,
                resource_name: "*".into(),
                capability: Resource::new(1 << 20, 1),
                num_containers: 1,
                relax_locality: true,
                gang: None,
                cpu: None,
            }],
            vec![],
            0.0,
            env.now,
        )
        .unwrap_err();
    assert!(
        matches!(err, CoreError::OverMaximumAllocation { .. }),
        "{err:?}"
    );
    assert_eq!(env.core.scheduler().pending().0, 0);
}

#[test]
fn absurd_resource_values_are_refused_not_overflowed() {
    let mut env = TestEnv::new();
    let node = env.add_node("h1", 1, 4096, 4);
    // A node claiming everything: totals saturate instead of overflowing.
    env.core.register_node(
        NodeRegistration {
            id: NodeId::new("h2", 1),
            http_address: "h2:1".into(),
            rack: "/default-rack".into(),
            total: Resource::new(i64::MAX, i64::MAX),
            version: "test".into(),
            containers: vec![],
            attributes: Default::default(),
        },
        env.now,
    );
    env.step();
    let app = env.submit("default");
    let (att, am) = env.launch_all()[0];
    env.heartbeat(&node, vec![TestEnv::running(am)]);
    env.core
        .am_register(&att, "h".into(), 0, String::new(), env.now)
        .expect("register");
    let huge = AskUpdate {
        image: None,
        label: None,
        tags: Vec::new(),
        constraint: None,
        priority: 1,
        allocation_request_id: 0,
        resource_name: "*".into(),
        capability: Resource::new(i64::MAX, 1),
        num_containers: 1,
        relax_locality: true,
        gang: None,
        cpu: None,
    };
    let r = env
        .core
        .am_allocate(&att, 0, vec![huge], vec![], 0.0, env.now);
    assert!(
        matches!(r, Err(CoreError::OverMaximumAllocation { .. })),
        "{r:?}"
    );
    env.step();
    assert!(!env.app(&app).state.is_final());
}

#[test]
fn core_is_pure() {
    // The design rule: no I/O, clock, async or transport in the core, and no wire format:
    // wire records (`common::records`) and serde belong to the REST and store edges.
    let forbidden = [
        "records::",
        "serde",
        "std::fs",
        "std::net",
        "std::time",
        "std::thread",
        "std::process",
        "tokio",
        "axum",
        "hyper",
        "reqwest",
        "rusqlite",
        "Instant::now",
        "SystemTime",
        "now_ms(",
    ];
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/core");
    let mut checked = 0;
    let mut stack = vec![dir];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("core dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                // The core's own tests may read files (this one does).
                if path.file_name().is_none_or(|n| n != "tests") {
                    stack.push(path);
                }
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read");
            for f in forbidden {
                assert!(!text.contains(f), "{} uses {f}", path.display());
            }
            checked += 1;
        }
    }
    assert!(checked >= 10, "the walk found only {checked} core files");
}

#[derive(Debug, Clone)]
enum Op {
    Submit,
    Ask(usize, u32, i64),
    Finish(usize, usize, i32),
    NodeSilent(usize),
    Heartbeat(usize),
    Kill(usize),
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        Just(Op::Submit),
        (0..6usize, 0..5u32, 100..3000i64).prop_map(|(a, n, m)| Op::Ask(a, n, m)),
        (0..6usize, 0..8usize, -1..2i32).prop_map(|(a, c, e)| Op::Finish(a, c, e)),
        (0..3usize).prop_map(Op::NodeSilent),
        (0..3usize).prop_map(Op::Heartbeat),
        (0..6usize).prop_map(Op::Kill),
        (1..4000u64).prop_map(Op::Advance),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Whatever happens, no node is over-allocated and every usage figure equals the sum of
    /// its containers (sanity_check runs after every step), and the same inputs give the
    /// same decisions.
    #[test]
    fn invariants_hold_under_random_operations(ops in proptest::collection::vec(op(), 1..60)) {
        let run = |ops: &[Op]| -> Vec<String> {
            let mut conf = CoreConfig::for_tests();
            conf.nm_expiry_ms = 6_000;
            let mut env = TestEnv::with_conf(conf);
            let nodes: Vec<NodeId> = (0..3).map(|i| env.add_node(&format!("h{i}"), 1, 4096, 4)).collect();
            let mut silent = [false; 3];
            let mut apps: Vec<ApplicationId> = vec![];
            let mut trace = vec![];
            for op in ops {
                match op {
                    Op::Submit => apps.push(env.submit("default")),
                    Op::Ask(a, n, m) => {
                        if let Some(app) = apps.get(*a) {
                            let att = env.core.apps()[app].current_attempt().map(|x| x.id);
                            if let Some(att) = att {
                                let _ = env.core.am_register(&att, "h".into(), 0, String::new(), env.now);
                                let r = env.core.am_allocate(&att, 0, vec![AskUpdate { image: None, label: None, tags: Vec::new(), constraint: None, priority: 1, allocation_request_id: 0, resource_name: "*".into(), capability: Resource::new(*m, 1), num_containers: *n, relax_locality: true, gang: None , cpu: None }], vec![], 0.0, env.now);
                                if let Ok(r) = r { trace.push(format!("{:?}", r.allocated.iter().map(|c| c.id.to_string()).collect::<Vec<_>>())); }
                                env.step();
                            }
                        }
                    }
                    Op::Finish(a, c, e) => {
                        if let Some(app) = apps.get(*a) {
                            let live: Vec<RmContainer> = env.core.containers().values().filter(|x| x.id.application_id() == *app && x.is_live()).cloned().collect();
                            if let Some(x) = live.get(*c % live.len().max(1)) {
                                let node = x.node.clone();
                                env.heartbeat(&node, vec![TestEnv::done(x.id, *e)]);
                            }
                        }
                    }
                    Op::NodeSilent(i) => silent[*i] = true,
                    Op::Heartbeat(i) => {
                        if !silent[*i] {
                            let running: Vec<ReportedContainer> = env.core.containers().values().filter(|c| c.node == nodes[*i] && c.is_live()).map(|c| TestEnv::running(c.id)).collect();
                            let r = env.heartbeat(&nodes[*i], running);
                            trace.push(format!("{:?}", r.action));
                        }
                    }
                    Op::Kill(a) => {
                        if let Some(app) = apps.get(*a) {
                            let _ = env.core.kill(app, &Caller::new("alice", vec![]), env.now);
                            env.step();
                        }
                    }
                    Op::Advance(ms) => {
                        env.launch_all();
                        env.advance(*ms);
                    }
                }
            }
            trace.push(format!("{:?}", env.core.apps().values().map(|a| a.state).collect::<Vec<_>>()));
            trace
        };
        let a = run(&ops);
        let b = run(&ops);
        prop_assert_eq!(a, b);
    }
}
