//! Why an ask waits for queue room: the typed reason names the queue that is full, the
//! queues that hold its room and how far above their guarantees, and whether the preemption
//! monitor will take it back.

use spindle_common::resource::GPU;
use spindle_common::{ApplicationId, NodeId, QueuePath, Resource};

use crate::core::queue_conf::*;
use crate::core::scheduler::gang::{GangParams, GangPolicy};
use crate::core::scheduler::wait_reason::{FullScope, Reclaim, RoomHolder, WaitReason};
use crate::core::scheduler::{Ask, AskKey, Scheduler};

fn queue(parent: &QueuePath, name: &str, cap: f64, max: f64) -> QueueSpec {
    let mut q = QueueSpec::new(parent.child(name), CapacitySpec::Percent(cap));
    q.max_capacity = MaxCapacitySpec::Percent(max);
    q.user_limit_factor = -1.0;
    q.max_am_resource_percent = 1.0;
    q
}

/// `root.research` (50%, maximum 100%) and `root.prod` (50%, maximum `prod_max`), or with
/// `nested` both under `root.eng` (100%); one node of 4 GPUs.
fn sched(prod_max: f64, nested: bool) -> Scheduler {
    let mut conf = SchedulerConf::single_default_queue();
    let root = QueuePath::root();
    let parent = if nested {
        root.child("eng")
    } else {
        root.clone()
    };
    let kids = vec![
        queue(&parent, "research", 50.0, 100.0),
        queue(&parent, "prod", 50.0, prod_max),
    ];
    conf.root.children = if nested {
        let mut eng = queue(&root, "eng", 100.0, 100.0);
        eng.children = kids;
        vec![eng]
    } else {
        kids
    };
    let mut s = Scheduler::new(conf, Resource::new(128, 1));
    s.add_node(
        NodeId::new("n1", 1),
        "/r1".into(),
        Resource::new(65536, 32).with(GPU, 4),
        Resource::zero(),
    );
    s
}

fn app(n: u32) -> ApplicationId {
    ApplicationId::new(5, n)
}

fn gpus(n: i64) -> Resource {
    Resource::new(1024, 1).with(GPU, n)
}

/// Research takes `research_gpus` GPUs; prod asks for a gang of `prod_gpus` 1-GPU members
/// (or, when `gang` is false, one container of `prod_gpus` GPUs) and a pass runs.
fn fill(s: &mut Scheduler, research_gpus: i64, prod_gpus: u32, gang: bool) {
    let research = s.tree().leaf("research").expect("research");
    let prod = s.tree().leaf("prod").expect("prod");
    s.add_app(app(1), research, "r", 0, 1, Resource::new(128, 1));
    for _ in 0..research_gpus {
        s.charge(&app(1), &NodeId::new("n1", 1), &gpus(1));
    }
    s.add_app(app(2), prod, "p", 0, 2, Resource::new(128, 1));
    let mut ask = if gang {
        Ask::new(gpus(1), prod_gpus)
    } else {
        Ask::new(gpus(i64::from(prod_gpus)), 1)
    };
    if gang {
        let params = GangParams {
            policy: GangPolicy::Pack,
            ..Default::default()
        };
        s.set_gang(&app(2), "g", params, 0);
        ask.gang = Some("g".into());
    }
    let key = AskKey {
        priority: 1,
        allocation_request_id: 1,
    };
    s.set_ask(&app(2), key, ask);
    assert!(s.schedule().is_empty(), "prod's ask does not fit");
}

#[test]
fn a_gang_behind_a_full_root_names_the_queue_that_holds_it() {
    let mut s = sched(50.0, false);
    fill(&mut s, 4, 2, true);
    let r = s.gang_room_reason(&app(2), "g", false).expect("a reason");
    assert_eq!(
        r,
        WaitReason::Full {
            scope: FullScope::Root,
            holders: vec![RoomHolder {
                queue: "root.research".into(),
                used_pct: 100.0,
                guarantee_pct: 50.0,
            }],
            reclaim: Reclaim::MonitorOff,
        }
    );
    let text = s.gang_diagnostics(&app(2), "g", false);
    assert!(
        text.contains(
            "root is full: root.research uses 100% of the cluster, 50 points above its 50% guarantee"
        ),
        "{text}"
    );
    assert!(text.contains("the preemption monitor is off"), "{text}");
    assert!(
        !text.contains("its queue"),
        "prod is not at its maximum: {text}"
    );
    // With the monitor on, prod (below its guarantee) gets the room back.
    let on = s.gang_room_reason(&app(2), "g", true).expect("a reason");
    let WaitReason::Full { reclaim, .. } = &on else {
        panic!("{on:?}")
    };
    assert_eq!(
        *reclaim,
        Reclaim::Monitor {
            waiting: "root.prod".into()
        }
    );
    assert!(on
        .to_string()
        .contains("the preemption monitor will take it back"));
}

#[test]
fn a_holder_within_its_guarantee_is_not_preempted_and_the_reason_says_so() {
    // research holds 2 of 4 GPUs (its guarantee), the rest is prod's ask's own gang need.
    let mut s = sched(100.0, false);
    fill(&mut s, 2, 3, true);
    let r = s.gang_room_reason(&app(2), "g", true).expect("a reason");
    let WaitReason::Full {
        scope,
        holders,
        reclaim,
    } = &r
    else {
        panic!("{r:?}")
    };
    assert_eq!(*scope, FullScope::Root);
    assert_eq!(holders[0].queue, "root.research");
    assert_eq!(*reclaim, Reclaim::HoldersWithinGuarantee);
    assert!(r.to_string().contains("within its 50% guarantee"), "{r}");
}

#[test]
fn a_queue_at_its_own_maximum_is_told_so() {
    // prod may use 50% (2 GPUs), already uses 1 and asks for a gang of 2: its own maximum
    // blocks it while the cluster has room.
    let mut s = sched(50.0, false);
    let prod = s.tree().leaf("prod").expect("prod");
    s.add_app(app(3), prod, "p", 0, 3, Resource::new(128, 1));
    s.charge(&app(3), &NodeId::new("n1", 1), &gpus(1));
    fill(&mut s, 0, 2, true);
    let r = s.gang_room_reason(&app(2), "g", true).expect("a reason");
    let WaitReason::QueueAtMaximum { queue, .. } = &r else {
        panic!("{r:?}")
    };
    assert_eq!(queue, "root.prod");
    assert!(
        r.to_string()
            .contains("its queue root.prod has no room for it under its maximum: it uses 25% of the cluster, at most 50%"),
        "{r}"
    );
}

#[test]
fn a_full_parent_names_the_sibling_below_it_and_a_plain_ask_gets_the_same_reason() {
    let mut s = sched(50.0, true);
    fill(&mut s, 4, 1, false);
    let r = s.ask_room_reason(&app(2), false, false).expect("a reason");
    let WaitReason::Full { scope, holders, .. } = &r else {
        panic!("{r:?}")
    };
    assert_eq!(*scope, FullScope::Parent("root.eng".into()));
    assert_eq!(holders.len(), 1);
    assert_eq!(holders[0].queue, "root.eng.research");
    assert!(
        r.to_string()
            .starts_with("parent queue root.eng is at its maximum: root.eng.research uses 100%"),
        "{r}"
    );
}

#[test]
fn an_ask_with_room_has_no_room_reason() {
    let mut s = sched(50.0, false);
    let research = s.tree().leaf("research").expect("research");
    s.add_app(app(1), research, "r", 0, 1, Resource::new(128, 1));
    s.charge(&app(1), &NodeId::new("n1", 1), &gpus(1));
    assert_eq!(s.ask_room_reason(&app(1), false, true), None);
}

#[test]
fn an_ask_no_node_has_room_for_is_told_so_when_the_queues_have_room() {
    // Two nodes of 4 GPUs, research holding 2 on each: 4 GPUs free in the cluster (room for
    // prod's queues), but no node has 3 free.
    let mut s = sched(100.0, false);
    s.add_node(
        NodeId::new("n2", 1),
        "/r1".into(),
        Resource::new(65536, 32).with(GPU, 4),
        Resource::zero(),
    );
    let research = s.tree().leaf("research").expect("research");
    let prod = s.tree().leaf("prod").expect("prod");
    s.add_app(app(1), research, "r", 0, 1, Resource::new(128, 1));
    for n in ["n1", "n2"] {
        s.charge(&app(1), &NodeId::new(n, 1), &gpus(2));
    }
    s.add_app(app(2), prod, "p", 0, 2, Resource::new(128, 1));
    let key = AskKey {
        priority: 1,
        allocation_request_id: 1,
    };
    s.set_ask(&app(2), key, Ask::new(gpus(3), 1));
    assert!(s.schedule().is_empty(), "no node fits 3 GPUs");
    let r = s.ask_room_reason(&app(2), false, true).expect("a reason");
    assert!(matches!(r, WaitReason::NoNodeRoom { .. }), "{r:?}");
    assert_eq!(
        r.to_string(),
        "no node has 3 GPUs and 1024 MB free now: it waits for running containers to end"
    );
}

#[test]
fn a_plain_ask_held_by_the_user_limit_names_the_user_limit() {
    // research's user limit is its guarantee (user-limit-factor 1): 2 of the 4 GPUs. Its
    // one user holds 3 (YARN lets a user at its limit take one more ask), so a fourth waits
    // on the user limit though the queues have room.
    let mut s = sched(50.0, false);
    let mut conf = s.conf().clone();
    for q in &mut conf.root.children {
        q.user_limit_factor = 1.0;
    }
    s.reconfigure(conf, &Default::default());
    let research = s.tree().leaf("research").expect("research");
    s.add_app(app(1), research, "r", 0, 1, Resource::new(128, 1));
    for _ in 0..3 {
        s.charge(&app(1), &NodeId::new("n1", 1), &gpus(1));
    }
    let key = AskKey {
        priority: 1,
        allocation_request_id: 1,
    };
    s.set_ask(&app(1), key, Ask::new(gpus(1), 1));
    assert!(
        s.schedule().is_empty(),
        "the user limit holds the fourth GPU"
    );
    let r = s.ask_room_reason(&app(1), false, true).expect("a reason");
    let WaitReason::UserLimit {
        user, queue, limit, ..
    } = &r
    else {
        panic!("{r:?}")
    };
    assert_eq!((user.as_str(), queue.as_str()), ("r", "root.research"));
    assert_eq!(limit.get(GPU), 2, "{r:?}");
    assert!(
        r.to_string()
            .starts_with("user r is at its user limit in queue root.research"),
        "{r}"
    );
}
