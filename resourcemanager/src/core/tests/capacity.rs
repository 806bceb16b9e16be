//! Scenario and property tests of the capacity scheduler, on the pure core: each rule of
//! YARN's CapacityScheduler that Spindle implements, with `sanity_check()` after every step
//! (through [`TestEnv`]) or `Scheduler::check()` for the scheduler-level properties.

use std::collections::BTreeMap;

use proptest::prelude::*;
use spindle_common::resource::GPU;
use spindle_common::states::{FinalApplicationStatus, YarnApplicationState as AppState};
use spindle_common::{ApplicationAttemptId, ApplicationId, NodeId, Resource};

use super::{qp, TestEnv};
use crate::core::queue_conf::*;
use crate::core::scheduler::{Ask, AskKey, QueueIdx, Scheduler};
use crate::core::*;

fn leaf(path: &str, pct: f64) -> QueueSpec {
    let mut q = QueueSpec::new(qp(path), CapacitySpec::Percent(pct));
    q.max_am_resource_percent = 0.5;
    q
}

fn conf_with(children: Vec<QueueSpec>) -> CoreConfig {
    let mut c = CoreConfig::for_tests();
    let mut root = QueueSpec::new(qp("root"), CapacitySpec::Percent(100.0));
    root.children = children;
    c.scheduler.root = root;
    c.max_allocation = Resource::new(16384, 16).with(GPU, 8);
    c
}

fn submit_as(env: &mut TestEnv, queue: &str, user: &str) -> ApplicationId {
    let id = env.core.new_application();
    let mut sub = env.submission(queue);
    sub.user = user.into();
    env.core.submit(id, sub, env.now).expect("submit");
    env.step();
    id
}

/// Launches and registers every AM the core asked for; returns their attempts by app.
fn start_ams(env: &mut TestEnv) -> BTreeMap<ApplicationId, ApplicationAttemptId> {
    let mut out = BTreeMap::new();
    for (att, _) in env.launch_all() {
        env.core
            .am_register(&att, "h".into(), 0, String::new(), env.now)
            .expect("register");
        env.step();
        out.insert(att.application_id, att);
    }
    out
}

pub(super) fn used_mb(env: &TestEnv, queue: &str) -> i64 {
    env.core
        .queue_views()
        .into_iter()
        .find(|v| v.path == queue)
        .map(|v| v.used.memory_mb)
        .unwrap_or(-1)
}

fn view(env: &TestEnv, queue: &str) -> QueueView {
    env.core
        .queue_views()
        .into_iter()
        .find(|v| v.path == queue)
        .expect("queue")
}

fn nodes(env: &mut TestEnv, n: usize, mem: i64, vcores: i64) -> Vec<NodeId> {
    (0..n)
        .map(|i| env.add_node(&format!("h{i}"), 1, mem, vcores))
        .collect()
}

/// Completes `count` live non-AM containers of `app` through their nodes' heartbeats.
fn finish_some(env: &mut TestEnv, app: &ApplicationId, count: usize) {
    let victims: Vec<(ContainerId, NodeId)> = env
        .core
        .containers()
        .values()
        .filter(|c| c.is_live() && !c.is_am && c.id.application_id() == *app)
        .take(count)
        .map(|c| (c.id, c.node.clone()))
        .collect();
    for (c, n) in victims {
        env.heartbeat(&n, vec![TestEnv::done(c, 0)]);
    }
}

#[test]
fn idle_capacity_is_used_up_to_maximum_and_given_back_to_the_underserved() {
    let mut a = leaf("root.a", 60.0);
    a.user_limit_factor = -1.0;
    let mut b = leaf("root.b", 40.0);
    b.user_limit_factor = -1.0;
    b.max_capacity = MaxCapacitySpec::Percent(50.0);
    let mut env = TestEnv::with_conf(conf_with(vec![a, b]));
    nodes(&mut env, 10, 10240, 20);
    let app_b = submit_as(&mut env, "b", "bob");
    let ams = start_ams(&mut env);
    env.ask(&ams[&app_b], 200, 1024);
    let b_used = used_mb(&env, "root.b");
    assert!(
        b_used <= 51200,
        "b stays within its maximum of 50%: {b_used}"
    );
    assert!(
        b_used > 51200 - 1024,
        "b uses idle capacity up to its maximum: {b_used}"
    );
    let app_a = submit_as(&mut env, "a", "alice");
    let ams = start_ams(&mut env);
    env.ask(&ams[&app_a], 200, 1024);
    assert!(
        used_mb(&env, "root.a") >= 51200 - 1024,
        "a takes what b left"
    );
    // As b's containers end, a (under its guarantee) gets the space, not b.
    let before = used_mb(&env, "root.a");
    finish_some(&mut env, &app_b, 5);
    assert_eq!(used_mb(&env, "root.a"), before + 5 * 1024);
    assert_eq!(view(&env, "root.b").guaranteed.memory_mb, 40960);
}

#[test]
fn user_limit_factor_one_caps_a_lone_user_at_the_guarantee() {
    let a = leaf("root.a", 50.0);
    let mut b = leaf("root.b", 50.0);
    b.user_limit_factor = -1.0;
    let mut env = TestEnv::with_conf(conf_with(vec![a, b]));
    nodes(&mut env, 4, 10240, 40);
    let app = submit_as(&mut env, "a", "alice");
    let ams = start_ams(&mut env);
    env.ask(&ams[&app], 100, 1024);
    let used = used_mb(&env, "root.a");
    // YARN's rule: used may pass the limit by the container that crossed it, no more.
    assert!(used <= 20480 + 1024, "{used}");
    assert!(used >= 20480, "{used}");
    let user = &view(&env, "root.a").users[0];
    assert_eq!(user.name, "alice");
}

#[test]
fn am_limit_and_max_parallel_apps_keep_applications_accepted() {
    let mut a = leaf("root.a", 100.0);
    a.max_am_resource_percent = 0.1;
    a.max_parallel_apps = Some(10);
    let mut b = leaf("root.b", 0.0);
    b.max_parallel_apps = Some(1);
    let mut env = TestEnv::with_conf(conf_with(vec![a, b]));
    nodes(&mut env, 1, 10240, 40);
    // AM limit: 10% of 10240 = 1024 = two AMs of 512.
    let apps: Vec<ApplicationId> = (0..4)
        .map(|i| submit_as(&mut env, "a", &format!("u{i}")))
        .collect();
    assert_eq!(env.launch_all().len(), 2);
    let waiting = env.app(&apps[3]);
    assert_eq!(waiting.state, AppState::ACCEPTED);
    assert!(
        waiting.diagnostics.contains("AM resource limit exceeded"),
        "{}",
        waiting.diagnostics
    );
    assert_eq!(view(&env, "root.a").num_active_applications, 2);
    assert_eq!(view(&env, "root.a").num_pending_applications, 2);
    // A finished app makes room for the next.
    let att = env
        .app(&apps[0])
        .current_attempt()
        .map(|a| a.id)
        .expect("attempt");
    let am = env
        .app(&apps[0])
        .current_attempt()
        .and_then(|a| a.am_container())
        .expect("am");
    let node = env.core.containers()[&am].node.clone();
    env.core
        .am_register(&att, "h".into(), 0, String::new(), env.now)
        .expect("reg");
    env.core
        .am_finish(
            &att,
            FinalApplicationStatus::SUCCEEDED,
            String::new(),
            String::new(),
            env.now,
        )
        .expect("finish");
    env.step();
    env.heartbeat(&node, vec![TestEnv::done(am, 0)]);
    assert_eq!(env.launch_all().len(), 1, "the third app is activated");
    // max-parallel-apps=1: the second app in b waits, and says why.
    let b1 = submit_as(&mut env, "b", "x");
    let b2 = submit_as(&mut env, "b", "y");
    assert!(
        env.app(&b1).diagnostics.is_empty() || !env.app(&b1).diagnostics.contains("max-parallel")
    );
    assert!(
        env.app(&b2).diagnostics.contains("max-parallel-apps"),
        "{}",
        env.app(&b2).diagnostics
    );
}

#[test]
fn maximum_applications_refuses_beyond_the_limit() {
    let mut a = leaf("root.a", 100.0);
    a.max_applications = Some(2);
    let mut env = TestEnv::with_conf(conf_with(vec![a]));
    nodes(&mut env, 1, 10240, 40);
    submit_as(&mut env, "a", "u");
    submit_as(&mut env, "a", "u");
    let third = submit_as(&mut env, "a", "u");
    let app = env.app(&third);
    assert_eq!(app.state, AppState::FAILED);
    assert!(
        app.diagnostics.contains("already has 2 applications"),
        "{}",
        app.diagnostics
    );
}

#[test]
fn fifo_serves_priority_then_submission_and_fair_shares() {
    let mut fifo = leaf("root.f", 50.0);
    fifo.user_limit_factor = -1.0;
    let mut fair = leaf("root.g", 50.0);
    fair.ordering = OrderingPolicy::Fair;
    fair.user_limit_factor = -1.0;
    let mut conf = conf_with(vec![fifo, fair]);
    conf.scheduler.max_application_priority = 10;
    let mut env = TestEnv::with_conf(conf);
    nodes(&mut env, 1, 20480, 80);
    let first = submit_as(&mut env, "f", "u");
    let second = submit_as(&mut env, "f", "u");
    let g1 = submit_as(&mut env, "g", "u");
    let g2 = submit_as(&mut env, "g", "u");
    let ams = start_ams(&mut env);
    let caller = Caller::new("u", vec![]);
    env.core
        .set_priority(&second, 5, &caller, env.now)
        .expect("priority");
    env.step();
    // Asks are registered without placement first: fill the node beforehand.
    let hog = submit_as(&mut env, "f", "u");
    let _ = hog;
    for id in [first, second, g1, g2] {
        let r = env
            .core
            .am_allocate(
                &ams[&id],
                0,
                vec![AskUpdate {
                    image: None,
                    label: None,
                    tags: Vec::new(),
                    constraint: None,
                    priority: 1,
                    allocation_request_id: 0,
                    resource_name: "*".into(),
                    capability: Resource::new(1024, 1),
                    num_containers: 100,
                    relax_locality: true,
                    gang: None,
                    cpu: None,
                }],
                vec![],
                0.0,
                env.now,
            )
            .expect("ask");
        let _ = r;
        env.step();
    }
    // The node is full now. Free 8 containers of `first`: FIFO gives them to `second`
    // (higher priority), fair splits between g1 and g2.
    let used = |env: &TestEnv, id: &ApplicationId| {
        env.core
            .scheduler()
            .app(id)
            .map(|a| a.used.memory_mb)
            .unwrap_or(0)
    };
    let s_before = used(&env, &second);
    let f_before = used(&env, &first);
    finish_some(&mut env, &first, 4);
    assert_eq!(used(&env, &first), f_before - 4 * 1024);
    assert!(
        used(&env, &second) >= s_before,
        "second (priority 5) is served before first"
    );
    let (a, b) = (used(&env, &g1), used(&env, &g2));
    assert!(
        (a - b).abs() <= 1024 + 512,
        "fair ordering balances g1 {a} and g2 {b}"
    );
}

#[test]
fn submissions_to_unknown_parent_stopped_or_denied_queues_fail_as_yarn() {
    let mut p = QueueSpec::new(qp("root.p"), CapacitySpec::Percent(50.0));
    p.children.push(leaf("root.p.x", 100.0));
    let mut stopped = leaf("root.s", 25.0);
    stopped.state = QueueState::Stopped;
    let mut private = leaf("root.secret", 25.0);
    private.acl_submit = Some(Acl {
        all: false,
        users: ["alice".to_string()].into(),
        groups: ["ops".to_string()].into(),
    });
    let mut conf = conf_with(vec![p, stopped, private]);
    conf.scheduler.root.acl_submit = Some(Acl::nobody());
    conf.scheduler.acl_enabled = true;
    conf.scheduler.admin_acl = Acl::nobody();
    let mut env = TestEnv::with_conf(conf);
    nodes(&mut env, 1, 10240, 40);
    let cases = [
        ("nosuch", "bob", "unknown queue: nosuch"),
        ("p", "bob", "non-leaf queue: p"),
        ("s", "bob", "Queue root.s is STOPPED"),
        (
            "secret",
            "bob",
            "User bob does not have permission to submit",
        ),
    ];
    for (q, user, diag) in cases {
        let id = submit_as(&mut env, q, user);
        let app = env.app(&id);
        assert_eq!(app.state, AppState::FAILED, "{q}");
        assert!(app.diagnostics.contains(diag), "{q}: {}", app.diagnostics);
    }
    let ok = submit_as(&mut env, "secret", "alice");
    assert_eq!(env.app(&ok).state, AppState::ACCEPTED);
    let id = env.core.new_application();
    let mut sub = env.submission("secret");
    sub.user = "carol".into();
    sub.groups = vec!["ops".into()];
    env.core.submit(id, sub, env.now).expect("submit");
    assert_eq!(
        env.app(&id).state,
        AppState::ACCEPTED,
        "group ops may submit"
    );
}

#[test]
fn queue_mappings_place_applications_first_match_wins() {
    let mut conf = conf_with(vec![
        leaf("root.default", 50.0),
        leaf("root.eng", 25.0),
        leaf("root.carol", 25.0),
    ]);
    conf.scheduler.queue_mappings = vec![
        QueueMapping::User {
            user: "alice".into(),
            queue: "eng".into(),
        },
        QueueMapping::Group {
            group: "engineering".into(),
            queue: "eng".into(),
        },
        QueueMapping::User {
            user: "%user".into(),
            queue: "%user".into(),
        },
    ];
    let mut env = TestEnv::with_conf(conf);
    nodes(&mut env, 1, 10240, 40);
    let a = submit_as(&mut env, "default", "alice");
    assert_eq!(env.app(&a).queue, "root.eng");
    let id = env.core.new_application();
    let mut sub = env.submission("default");
    sub.user = "dave".into();
    sub.groups = vec!["engineering".into()];
    env.core.submit(id, sub, env.now).expect("submit");
    assert_eq!(env.app(&id).queue, "root.eng");
    let c = submit_as(&mut env, "default", "carol");
    assert_eq!(
        env.app(&c).queue,
        "root.carol",
        "%user maps to the user's own queue"
    );
    let explicit = submit_as(&mut env, "carol", "alice");
    assert_eq!(
        env.app(&explicit).queue,
        "root.carol",
        "a named queue is kept without override"
    );
}

#[test]
fn secondary_group_and_group_parent_mappings_follow_yarn() {
    let mut conf = conf_with(vec![
        leaf("root.default", 40.0),
        leaf("root.ml", 20.0),
        QueueSpec {
            children: vec![leaf("root.research.alice", 100.0)],
            ..leaf("root.research", 20.0)
        },
        QueueSpec {
            children: vec![leaf("root.ops.bob", 100.0)],
            ..leaf("root.ops", 20.0)
        },
    ]);
    let submit = |env: &mut TestEnv, user: &str, groups: &[&str]| {
        let id = env.core.new_application();
        let mut sub = env.submission("default");
        sub.user = user.into();
        sub.groups = groups.iter().map(|g| g.to_string()).collect();
        env.core.submit(id, sub, env.now).expect("submit");
        env.step();
        env.app(&id).queue.clone()
    };
    let user_map = |queue: &str| QueueMapping::User {
        user: "%user".into(),
        queue: queue.into(),
    };
    // The first secondary group that names a leaf; the primary group is not one.
    conf.scheduler.queue_mappings = vec![user_map("%secondary_group")];
    let mut env = TestEnv::with_conf(conf.clone());
    nodes(&mut env, 1, 10240, 40);
    assert_eq!(submit(&mut env, "carol", &["ml", "nosuch"]), "root.default");
    assert_eq!(
        submit(&mut env, "carol", &["staff", "nosuch", "ml"]),
        "root.ml"
    );
    // The user's leaf under the group's parent queue; no match falls through to the next.
    conf.scheduler.queue_mappings = vec![
        user_map("%primary_group.%user"),
        user_map("%secondary_group.%user"),
    ];
    let mut env = TestEnv::with_conf(conf);
    nodes(&mut env, 1, 10240, 40);
    assert_eq!(
        submit(&mut env, "alice", &["research"]),
        "root.research.alice"
    );
    assert_eq!(
        submit(&mut env, "bob", &["staff", "research", "ops"]),
        "root.ops.bob"
    );
    assert_eq!(submit(&mut env, "dave", &["research"]), "root.default");
}

#[test]
fn only_the_owner_a_queue_admin_or_a_cluster_admin_may_kill_or_move() {
    let mut a = leaf("root.a", 50.0);
    a.acl_admin = Some(Acl {
        all: false,
        users: ["qadmin".to_string()].into(),
        groups: Default::default(),
    });
    let b = leaf("root.b", 50.0);
    let mut conf = conf_with(vec![a, b]);
    conf.scheduler.acl_enabled = true;
    conf.scheduler.root.acl_admin = Some(Acl::nobody());
    conf.scheduler.root.acl_submit = Some(Acl::nobody());
    conf.scheduler.root.children[0].acl_submit = Some(Acl::everyone());
    conf.scheduler.root.children[1].acl_submit = Some(Acl::everyone());
    conf.scheduler.admin_acl = Acl {
        all: false,
        users: ["root".to_string()].into(),
        groups: Default::default(),
    };
    let mut env = TestEnv::with_conf(conf);
    nodes(&mut env, 1, 10240, 40);
    let app = submit_as(&mut env, "a", "alice");
    let mallory = Caller::new("mallory", vec![]);
    assert!(matches!(
        env.core.kill(&app, &mallory, env.now),
        Err(CoreError::NotAppAdmin { .. })
    ));
    assert!(matches!(
        env.core.move_app(&app, "b", &mallory, env.now),
        Err(CoreError::NotAppAdmin { .. })
    ));
    assert!(matches!(
        env.core.set_priority(&app, 1, &mallory, env.now),
        Err(CoreError::NotAppAdmin { .. })
    ));
    assert_eq!(
        env.app(&app).state,
        AppState::ACCEPTED,
        "a refused kill changes nothing"
    );
    assert_eq!(
        env.core
            .move_app(&app, "b", &Caller::new("qadmin", vec![]), env.now)
            .expect("queue admin"),
        "root.b"
    );
    env.step();
    assert_eq!(env.app(&app).queue, "root.b");
    assert!(
        env.core
            .kill(&app, &Caller::new("root", vec![]), env.now)
            .is_ok(),
        "cluster admin"
    );
    assert!(env
        .core
        .queue_access(
            "a",
            &Caller::new("qadmin", vec![]),
            QueueAclType::AdministerQueue
        )
        .expect("q"));
    assert!(env
        .core
        .queue_access("a", &mallory, QueueAclType::SubmitApplications)
        .expect("q"));
    assert!(!env
        .core
        .queue_access("a", &mallory, QueueAclType::AdministerQueue)
        .expect("q"));
}

#[test]
fn a_moved_application_takes_its_usage_along() {
    let mut a = leaf("root.a", 50.0);
    a.user_limit_factor = -1.0;
    let mut b = leaf("root.b", 50.0);
    b.user_limit_factor = -1.0;
    let mut env = TestEnv::with_conf(conf_with(vec![a, b]));
    nodes(&mut env, 2, 10240, 40);
    let app = submit_as(&mut env, "a", "u");
    let ams = start_ams(&mut env);
    env.ask(&ams[&app], 4, 1024);
    let used = used_mb(&env, "root.a");
    assert_eq!(used, 512 + 4 * 1024);
    env.core
        .move_app(&app, "root.b", &Caller::new("u", vec![]), env.now)
        .expect("move");
    env.step();
    assert_eq!(used_mb(&env, "root.a"), 0);
    assert_eq!(used_mb(&env, "root.b"), used);
    assert!(matches!(
        env.core
            .move_app(&app, "nosuch", &Caller::new("u", vec![]), env.now),
        Err(CoreError::MoveToUnknownQueue { .. })
    ));
}

#[test]
fn reconfiguration_applies_capacities_and_refuses_removing_a_busy_queue() {
    let mut env = TestEnv::with_conf(conf_with(vec![leaf("root.a", 50.0), leaf("root.b", 50.0)]));
    nodes(&mut env, 1, 10240, 40);
    let app = submit_as(&mut env, "b", "u");
    // Removing b (it holds an application) is refused and changes nothing.
    let mut without_b = env.core.scheduler_conf().clone();
    without_b.root.children.retain(|c| c.name != "b");
    without_b.root.children[0].capacity = CapacitySpec::Percent(100.0);
    let before = env.core.queue_views();
    assert!(matches!(
        env.core.reconfigure(without_b, env.now),
        Err(CoreError::Reinit(
            ReinitRefusal::QueueWithAppsRemoved { .. }
        ))
    ));
    assert_eq!(env.core.queue_views(), before);
    // Turning a busy leaf into a parent is refused too.
    let mut parent_b = env.core.scheduler_conf().clone();
    parent_b.root.children[1]
        .children
        .push(leaf("root.b.c", 100.0));
    assert!(env.core.reconfigure(parent_b, env.now).is_err());
    // New capacities and a new queue are applied, with the app still in b.
    let mut grown = env.core.scheduler_conf().clone();
    grown.root.children[0].capacity = CapacitySpec::Percent(30.0);
    grown.root.children[1].capacity = CapacitySpec::Percent(50.0);
    grown.root.children.push(leaf("root.c", 20.0));
    env.core.reconfigure(grown, env.now).expect("reconfigure");
    env.step();
    assert_eq!(view(&env, "root.a").guaranteed.memory_mb, 3072);
    assert_eq!(view(&env, "root.c").guaranteed.memory_mb, 2048);
    assert_eq!(env.app(&app).queue, "root.b");
    assert_eq!(view(&env, "root.b").num_applications, 1);
    // A STOPPED queue keeps its running apps but takes no new ones.
    let mut stop_b = env.core.scheduler_conf().clone();
    stop_b.root.children[1].state = QueueState::Stopped;
    env.core.reconfigure(stop_b, env.now).expect("stop");
    env.step();
    assert_eq!(env.app(&app).state, AppState::ACCEPTED);
    let refused = submit_as(&mut env, "b", "u");
    assert_eq!(env.app(&refused).state, AppState::FAILED);
}

#[test]
fn absolute_and_weight_capacities_resolve_to_resources() {
    let mut abs = QueueSpec::new(
        qp("root.abs"),
        CapacitySpec::Absolute(Resource::new(4096, 4).with(GPU, 2)),
    );
    abs.max_capacity = MaxCapacitySpec::Absolute(Resource::new(8192, 8).with(GPU, 4));
    let w1 = QueueSpec::new(qp("root.w1"), CapacitySpec::Weight(1.0));
    let w3 = QueueSpec::new(qp("root.w3"), CapacitySpec::Weight(3.0));
    let mut env = TestEnv::with_conf(conf_with(vec![abs, w1, w3]));
    env.core.register_node(
        NodeRegistration {
            id: NodeId::new("g", 1),
            http_address: "g:1".into(),
            rack: "/r".into(),
            total: Resource::new(20480, 20).with(GPU, 8),
            version: "t".into(),
            containers: vec![],
            attributes: Default::default(),
        },
        env.now,
    );
    env.step();
    assert_eq!(
        view(&env, "root.abs").guaranteed,
        Resource::new(4096, 4).with(GPU, 2)
    );
    assert_eq!(
        view(&env, "root.abs").maximum,
        Resource::new(8192, 8).with(GPU, 4)
    );
    assert_eq!(
        view(&env, "root.w1").guaranteed,
        Resource::new(4096, 4).with(GPU, 1)
    );
    assert_eq!(
        view(&env, "root.w3").guaranteed,
        Resource::new(12288, 12).with(GPU, 4)
    );
}

#[test]
fn drf_serves_the_queue_with_the_lower_dominant_share() {
    // gpu uses 3 of its 4 guaranteed GPUs (dominant share 0.75) and 3 GB of 8; cpu uses
    // 4 GB of 8 (0.5). DRF serves cpu first; the memory-only calculator serves gpu first.
    for (calc, first) in [(Calculator::Dominant, 2u32), (Calculator::Memory, 1u32)] {
        let (mut s, leaves) = sched_with(&[50.0, 50.0], &[100.0, 100.0], -1.0, 100.0);
        let mut conf = s.conf().clone();
        conf.calculator = calc;
        s = Scheduler::new(conf, Resource::new(1024, 1));
        s.add_node(
            NodeId::new("g", 1),
            "/r".into(),
            Resource::new(16384, 16).with(GPU, 8),
            Resource::zero(),
        );
        let node = NodeId::new("g", 1);
        s.add_app(app(1), leaves[0], "u", 0, 1, Resource::new(1024, 1));
        s.add_app(app(2), leaves[1], "v", 0, 2, Resource::new(1024, 1));
        for _ in 0..3 {
            s.charge(&app(1), &node, &Resource::new(1024, 1).with(GPU, 1));
        }
        s.charge(&app(2), &node, &Resource::new(4096, 2));
        s.set_ask(
            &app(1),
            AskKey {
                priority: 1,
                allocation_request_id: 0,
            },
            Ask::new(Resource::new(1024, 1).with(GPU, 1), 1),
        );
        s.set_ask(
            &app(2),
            AskKey {
                priority: 1,
                allocation_request_id: 0,
            },
            Ask::new(Resource::new(1024, 1), 1),
        );
        let placed = s.schedule();
        assert_eq!(placed.len(), 2);
        assert_eq!(placed[0].app, app(first), "{calc:?}");
        assert!(s.check().is_ok());
    }
}

#[test]
fn minimum_user_limit_percent_splits_a_queue_between_active_users() {
    let (mut s, leaves) = sched_with(&[100.0], &[100.0], 1.0, 50.0);
    s.add_node(
        NodeId::new("n", 1),
        "/r".into(),
        Resource::new(20480, 64),
        Resource::zero(),
    );
    demand(&mut s, app(1), leaves[0], "u1", 100, 1024);
    demand(&mut s, app(2), leaves[0], "u2", 100, 1024);
    s.schedule();
    assert!(s.check().is_ok());
    for (name, u) in &s.tree().queues[leaves[0]].users {
        assert!(
            (u.used.memory_mb - 10240).abs() <= 1024,
            "{name} {}",
            u.used
        );
    }
}

#[test]
fn delay_scheduling_waits_for_the_host_then_relaxes() {
    let mut conf = conf_with(vec![leaf("root.a", 100.0)]);
    conf.scheduler.node_locality_delay = 3;
    conf.scheduler.rack_locality_additional_delay = 2;
    let mut env = TestEnv::with_conf(conf);
    let n1 = env.add_node("h1", 1, 10240, 40);
    let n2 = env.add_node("h2", 1, 2048, 4);
    let app = submit_as(&mut env, "a", "u");
    let ams = start_ams(&mut env);
    // Fill h2, then ask for 1 container on h2 (full): the ask waits 3 + 2 opportunities.
    let h2_fill = AskUpdate {
        image: None,
        label: None,
        tags: Vec::new(),
        constraint: None,
        priority: 1,
        allocation_request_id: 0,
        resource_name: "h2".into(),
        capability: Resource::new(2048, 1),
        num_containers: 1,
        relax_locality: false,
        gang: None,
        cpu: None,
    };
    let star = AskUpdate {
        image: None,
        label: None,
        tags: Vec::new(),
        constraint: None,
        priority: 1,
        allocation_request_id: 0,
        resource_name: "*".into(),
        capability: Resource::new(2048, 1),
        num_containers: 1,
        relax_locality: false,
        gang: None,
        cpu: None,
    };
    let r = env
        .core
        .am_allocate(&ams[&app], 0, vec![h2_fill, star], vec![], 0.0, env.now)
        .expect("fill");
    env.step();
    let on_h2 = r.allocated.iter().filter(|c| c.node_id == n2).count();
    assert!(
        on_h2 == 1 || env.core.nodes()[&n2].containers.len() == 1,
        "h2 is full now"
    );
    let want_h2 = AskUpdate {
        image: None,
        label: None,
        tags: Vec::new(),
        constraint: None,
        priority: 2,
        allocation_request_id: 1,
        resource_name: "h2".into(),
        capability: Resource::new(1024, 1),
        num_containers: 1,
        relax_locality: true,
        gang: None,
        cpu: None,
    };
    let star2 = AskUpdate {
        image: None,
        label: None,
        tags: Vec::new(),
        constraint: None,
        priority: 2,
        allocation_request_id: 1,
        resource_name: "*".into(),
        capability: Resource::new(1024, 1),
        num_containers: 1,
        relax_locality: true,
        gang: None,
        cpu: None,
    };
    let r = env
        .core
        .am_allocate(&ams[&app], 1, vec![want_h2, star2], vec![], 0.0, env.now)
        .expect("ask");
    env.step();
    assert!(
        r.allocated.iter().all(|c| c.allocation_request_id != 1),
        "not placed off-host at once"
    );
    let mut placed_at = None;
    for opportunity in 1..=10 {
        env.heartbeat(&n1, vec![]);
        let key = AskKey {
            priority: 2,
            allocation_request_id: 1,
        };
        if env.core.scheduler().ask(&app, &key).is_none() {
            placed_at = Some(opportunity);
            break;
        }
    }
    let at = placed_at.expect("relaxed to any node eventually");
    assert!(
        at >= 4,
        "waited for node-locality-delay + rack delay opportunities, placed at {at}"
    );
}

#[test]
fn per_queue_maximum_allocation_refuses_bigger_asks() {
    let mut small = leaf("root.small", 100.0);
    small.max_allocation = Some(Resource::new(2048, 2));
    let mut env = TestEnv::with_conf(conf_with(vec![small]));
    nodes(&mut env, 1, 10240, 40);
    let app = submit_as(&mut env, "small", "u");
    let ams = start_ams(&mut env);
    let big = AskUpdate {
        image: None,
        label: None,
        tags: Vec::new(),
        constraint: None,
        priority: 1,
        allocation_request_id: 0,
        resource_name: "*".into(),
        capability: Resource::new(4096, 1),
        num_containers: 1,
        relax_locality: true,
        gang: None,
        cpu: None,
    };
    let err = env
        .core
        .am_allocate(&ams[&app], 0, vec![big], vec![], 0.0, env.now)
        .unwrap_err();
    assert!(
        matches!(err, CoreError::OverMaximumAllocation { .. }),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------
// Properties, on the scheduler directly.

pub(super) fn sched_with(
    pcts: &[f64],
    max: &[f64],
    ulf: f64,
    mulp: f64,
) -> (Scheduler, Vec<QueueIdx>) {
    let mut root = QueueSpec::new(qp("root"), CapacitySpec::Percent(100.0));
    for (i, (p, m)) in pcts.iter().zip(max).enumerate() {
        let mut q = QueueSpec::new(qp(format!("root.q{i}")), CapacitySpec::Percent(*p));
        q.max_capacity = MaxCapacitySpec::Percent(*m);
        q.user_limit_factor = ulf;
        q.minimum_user_limit_percent = mulp;
        q.max_am_resource_percent = 1.0;
        root.children.push(q);
    }
    let mut conf = SchedulerConf::single_default_queue();
    conf.root = root;
    let s = Scheduler::new(conf, Resource::new(1024, 1));
    let leaves = (0..pcts.len())
        .map(|i| s.tree().leaf(&format!("root.q{i}")).expect("leaf"))
        .collect();
    (s, leaves)
}

pub(super) fn app(n: u32) -> ApplicationId {
    ApplicationId::new(7, n)
}

fn demand(s: &mut Scheduler, id: ApplicationId, leaf: QueueIdx, user: &str, n: u32, mem: i64) {
    s.add_app(id, leaf, user, 0, u64::from(id.id), Resource::new(1024, 1));
    s.set_ask(
        &id,
        AskKey {
            priority: 1,
            allocation_request_id: 0,
        },
        Ask::new(Resource::new(mem, 1), n),
    );
}

/// Percent capacities for `k` queues from integer weights, summing to exactly 100.
fn percents(weights: &[u32]) -> Vec<f64> {
    let total: u32 = weights.iter().sum();
    let mut out: Vec<f64> = weights
        .iter()
        .map(|w| f64::from(*w) * 100.0 / f64::from(total))
        .collect();
    let sum: f64 = out.iter().sum();
    if let Some(last) = out.last_mut() {
        *last += 100.0 - sum;
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Under saturating demand every queue ends within one container of its guarantee, and
    /// no node is over-allocated.
    #[test]
    fn every_queue_converges_to_its_guarantee(weights in proptest::collection::vec(1u32..6, 2..5), nodes in 2usize..12) {
        let pcts = percents(&weights);
        let (mut s, leaves) = sched_with(&pcts, &vec![100.0; pcts.len()], -1.0, 100.0);
        for i in 0..nodes {
            s.add_node(NodeId::new(format!("n{i}"), 1), "/r".into(), Resource::new(8192, 64), Resource::zero());
        }
        for (i, l) in leaves.iter().enumerate() {
            demand(&mut s, app(i as u32 + 1), *l, "u", 10_000, 1024);
        }
        let placed = s.schedule();
        prop_assert!(!placed.is_empty());
        prop_assert!(s.check().is_ok(), "{:?}", s.check());
        for l in &leaves {
            let q = &s.tree().queues[*l];
            let diff = q.used.memory_mb - q.guaranteed.memory_mb;
            prop_assert!(diff.abs() <= 1024, "{} used {} guaranteed {}", q.spec.path, q.used, q.guaranteed);
        }
    }

    /// A queue alone uses idle capacity up to its maximum and never beyond it.
    #[test]
    fn idle_capacity_is_used_up_to_maximum(cap in 10u32..60, extra in 0u32..40, nodes in 1usize..8) {
        let c = f64::from(cap);
        let m = f64::from((cap + extra).min(100));
        let (mut s, leaves) = sched_with(&[c, 100.0 - c], &[m, 100.0], -1.0, 100.0);
        for i in 0..nodes {
            s.add_node(NodeId::new(format!("n{i}"), 1), "/r".into(), Resource::new(8192, 64), Resource::zero());
        }
        demand(&mut s, app(1), leaves[0], "u", 10_000, 1024);
        s.schedule();
        prop_assert!(s.check().is_ok());
        let q = &s.tree().queues[leaves[0]];
        prop_assert!(q.used.memory_mb <= q.maximum.memory_mb);
        prop_assert!(q.used.memory_mb > q.maximum.memory_mb - 1024, "used {} max {}", q.used, q.maximum);
    }

    /// No user exceeds its user limit by more than the container that crossed it.
    #[test]
    fn user_limits_hold(users in 1usize..5, mulp in 10u32..=100, ulf in 1u32..4, nodes in 1usize..6) {
        let (mut s, leaves) = sched_with(&[50.0, 50.0], &[100.0, 100.0], f64::from(ulf), f64::from(mulp));
        for i in 0..nodes {
            s.add_node(NodeId::new(format!("n{i}"), 1), "/r".into(), Resource::new(8192, 64), Resource::zero());
        }
        for u in 0..users {
            demand(&mut s, app(u as u32 + 1), leaves[0], &format!("user{u}"), 10_000, 1024);
        }
        s.schedule();
        prop_assert!(s.check().is_ok());
        let q = &s.tree().queues[leaves[0]];
        for (name, u) in &q.users {
            let limit = s.user_limit(leaves[0], &Resource::zero());
            prop_assert!(u.used.memory_mb <= limit.memory_mb.max(q.guaranteed.memory_mb * i64::from(ulf)) + 1024, "{name} used {} limit {}", u.used, limit);
            prop_assert!(u.used.memory_mb <= q.guaranteed.memory_mb * i64::from(ulf) + 1024, "{name} over ULF cap");
        }
    }

    /// The same inputs give the same decisions, through random asks and releases.
    #[test]
    fn the_same_inputs_give_the_same_decisions(ops in proptest::collection::vec((0usize..3, 0u32..20, 1i64..4, any::<bool>()), 1..40)) {
        let run = || {
            let (mut s, leaves) = sched_with(&[50.0, 30.0, 20.0], &[100.0, 60.0, 100.0], 2.0, 50.0);
            for i in 0..5 {
                s.add_node(NodeId::new(format!("n{i}"), 1), format!("/r{}", i % 2), Resource::new(8192, 8).with(GPU, 2), Resource::zero());
            }
            for (i, l) in leaves.iter().enumerate() {
                s.add_app(app(i as u32 + 1), *l, &format!("u{i}"), 0, i as u64, Resource::new(1024, 1));
            }
            let mut trace = vec![];
            let mut live: Vec<(ApplicationId, NodeId, Resource)> = vec![];
            for (q, n, mem, gpu) in &ops {
                let id = app(*q as u32 + 1);
                let cap = if *gpu { Resource::new(mem * 1024, 1).with(GPU, 1) } else { Resource::new(mem * 1024, 1) };
                s.set_ask(&id, AskKey { priority: 1, allocation_request_id: 0 }, Ask::new(cap, *n));
                for p in s.schedule() {
                    trace.push(format!("{} {} {}", p.app, p.node, p.resource));
                    live.push((p.app, p.node, p.resource));
                }
                if *n % 3 == 0 && !live.is_empty() {
                    let (a, nd, r) = live.remove(0);
                    s.release(&a, &nd, &r);
                }
                assert!(s.check().is_ok());
            }
            trace
        };
        prop_assert_eq!(run(), run());
    }
}

/// YARN's `maxApplications` is the system-wide figure scaled by the queue's absolute
/// capacity, a property of the configuration: before any NodeManager registers (a fresh
/// cluster, or the moment after an RM restart) submissions are accepted and wait, whether the
/// queues are configured by percentage, weight or absolute resources.
#[test]
fn maximum_applications_does_not_depend_on_the_registered_resources() {
    // An absolute guarantee is a share only of registered resources: until nodes arrive,
    // the queue is limited by its parent's figure.
    let cases: Vec<(&str, CapacitySpec, u32)> = vec![
        ("percent", CapacitySpec::Percent(50.0), 50),
        ("weight", CapacitySpec::Weight(1.0), 50),
        (
            "absolute",
            CapacitySpec::Absolute(Resource::new(8192, 8)),
            100,
        ),
    ];
    for (what, cap, max_apps) in cases {
        let mut a = QueueSpec::new(qp("root.a"), cap.clone());
        a.max_am_resource_percent = 0.5;
        let mut b = QueueSpec::new(qp("root.b"), cap);
        b.max_am_resource_percent = 0.5;
        let mut conf = conf_with(vec![a, b]);
        conf.scheduler.max_applications = 100;
        let mut env = TestEnv::with_conf(conf);
        let ids: Vec<ApplicationId> = (0..5).map(|_| submit_as(&mut env, "a", "u")).collect();
        for id in &ids {
            let app = env.app(id);
            assert_eq!(app.state, AppState::ACCEPTED, "{what}: {}", app.diagnostics);
        }
        let v = view(&env, "root.a");
        assert_eq!(v.max_applications, max_apps, "{what}");
        // Once nodes arrive, they run.
        nodes(&mut env, 2, 16384, 16);
        env.advance(1_000);
        let launched = env.launch_all().len();
        assert!(launched >= 1, "{what}: an AM is launched once nodes arrive");
        if what == "absolute" {
            // 8 GB of 32 GB registered: a quarter of 100.
            assert_eq!(view(&env, "root.a").max_applications, 25);
        }
    }
}
