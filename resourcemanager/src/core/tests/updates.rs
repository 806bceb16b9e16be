//! YARN's container update API on the pure core: a decrease applied at once, an increase
//! when its node has room (waiting for it otherwise), versions and tokens, and every refusal.

use spindle_common::resource::GPU;
use spindle_common::token;
use spindle_common::{ApplicationAttemptId, ContainerId, Resource};

use super::preemption::{conf, leaf, Cluster};
use crate::core::*;

fn one_queue() -> Cluster {
    Cluster::new(conf(vec![leaf("root.a", 100.0)], 0), 1, 2)
}

/// A plain container of 4096 MB / 2 vcores (and `gpus` GPUs).
fn plain(c: &mut Cluster, att: &ApplicationAttemptId, gpus: i64) -> ContainerId {
    let ask = AskUpdate {
        image: None,
        label: None,
        tags: Vec::new(),
        constraint: None,
        priority: 1,
        allocation_request_id: 7,
        resource_name: "*".into(),
        capability: Resource::new(4096, 2).with(GPU, gpus),
        num_containers: 1,
        relax_locality: true,
        gang: None,
        cpu: None,
    };
    let r = c
        .env
        .core
        .am_allocate(att, 0, vec![ask], vec![], 0.0, c.env.now)
        .expect("ask");
    c.env.step();
    c.nm_round();
    r.allocated[0].id
}

fn update(
    c: &mut Cluster,
    att: &ApplicationAttemptId,
    id: ContainerId,
    version: i32,
    kind: UpdateKind,
    cap: Resource,
) -> AllocateReply {
    let report = AmReport {
        updates: vec![ContainerUpdate {
            container: id,
            version,
            kind,
            capability: cap,
        }],
        ..AmReport::default()
    };
    let r = c
        .env
        .core
        .am_allocate_with(att, 0, vec![], vec![], 0.0, report, c.env.now)
        .expect("allocate");
    c.env.step();
    r
}

#[test]
fn a_decrease_applies_at_once_with_a_new_version_and_token() {
    let mut c = one_queue();
    let a = c.start("root.a", "u", 0);
    let att = c.att(&a);
    let id = plain(&mut c, &att, 0);
    let r = update(
        &mut c,
        &att,
        id,
        0,
        UpdateKind::DecreaseResource,
        Resource::new(2048, 1),
    );
    assert!(r.update_errors.is_empty(), "{:?}", r.update_errors);
    assert_eq!(r.updated.len(), 1);
    let u = &r.updated[0];
    assert_eq!((u.version, u.allocation.version), (1, 1));
    assert_eq!(u.allocation.resource, Resource::new(2048, 1));
    // The token carries the new size and version, signed by the RM.
    let ident = token::verify_container_token(
        c.env.core.container_keys(),
        &u.allocation.container_token,
        0,
    )
    .expect("a valid token");
    assert_eq!(ident.version, 1);
    assert_eq!(ident.resource.to_resource(), Resource::new(2048, 1));
    // The queue is charged the smaller size (the AM's 512 MB aside).
    let used = c
        .env
        .core
        .queue_views()
        .into_iter()
        .find(|v| v.path == "root.a")
        .map(|v| v.used.memory_mb);
    assert_eq!(used, Some(2048 + 512));
}

#[test]
fn an_increase_waits_for_room_on_its_node_and_comes_in_a_later_answer() {
    let mut c = one_queue();
    let a = c.start("root.a", "u", 0);
    let att = c.att(&a);
    let first = plain(&mut c, &att, 0);
    // The node (65536 MB) is nearly full: a second container takes most of it.
    let ask = AskUpdate {
        image: None,
        label: None,
        tags: Vec::new(),
        constraint: None,
        priority: 2,
        allocation_request_id: 8,
        resource_name: "*".into(),
        capability: Resource::new(60_000, 2),
        num_containers: 1,
        relax_locality: true,
        gang: None,
        cpu: None,
    };
    let r = c
        .env
        .core
        .am_allocate(&att, 0, vec![ask], vec![], 0.0, c.env.now)
        .expect("ask");
    c.env.step();
    let big = r.allocated[0].id;
    let r = update(
        &mut c,
        &att,
        first,
        0,
        UpdateKind::IncreaseResource,
        Resource::new(8192, 2),
    );
    assert!(
        r.updated.is_empty() && r.update_errors.is_empty(),
        "it waits"
    );
    // A second update of the same container is refused while the first waits.
    let r = update(
        &mut c,
        &att,
        first,
        0,
        UpdateKind::IncreaseResource,
        Resource::new(6144, 2),
    );
    assert!(matches!(
        r.update_errors[0].refusal,
        UpdateRefusal::Outstanding
    ));
    // The big container ends: the increase is applied at the AM's next call.
    c.nm_round();
    c.env
        .core
        .am_allocate(&att, 0, vec![], vec![big], 0.0, c.env.now)
        .expect("release");
    c.env.step();
    let r = c.poll(&a, AmReport::default());
    assert!(
        r.updated.is_empty(),
        "not before its NM confirms the release"
    );
    c.nm_round();
    let r = c.poll(&a, AmReport::default());
    assert_eq!(r.updated.len(), 1);
    assert_eq!(r.updated[0].allocation.resource, Resource::new(8192, 2));
}

#[test]
fn updates_are_refused_with_yarns_reasons() {
    let mut c = one_queue();
    let a = c.start("root.a", "u", 0);
    let att = c.att(&a);
    let id = plain(&mut c, &att, 1);
    let cases = [
        (
            1,
            UpdateKind::DecreaseResource,
            Resource::new(2048, 1).with(GPU, 1),
            "INCORRECT_CONTAINER_VERSION_ERROR",
        ),
        (
            0,
            UpdateKind::DecreaseResource,
            Resource::new(8192, 1).with(GPU, 1),
            "INVALID_TARGET_CAPABILITY",
        ),
        (
            0,
            UpdateKind::IncreaseResource,
            Resource::new(2048, 2).with(GPU, 1),
            "INVALID_TARGET_CAPABILITY",
        ),
        (
            0,
            UpdateKind::IncreaseResource,
            Resource::new(4096, 2).with(GPU, 2),
            "NOT_SUPPORTED: device counts (yarn.io/gpu)",
        ),
        (
            0,
            UpdateKind::PromoteExecutionType,
            Resource::new(4096, 2).with(GPU, 1),
            "NOT_SUPPORTED: execution-type",
        ),
        (
            0,
            UpdateKind::IncreaseResource,
            Resource::new(1 << 40, 2).with(GPU, 1),
            "INVALID_TARGET_CAPABILITY",
        ),
    ];
    for (version, kind, cap, reason) in cases {
        let r = update(&mut c, &att, id, version, kind, cap.clone());
        assert!(r.updated.is_empty(), "{kind:?} {cap}");
        let msg = r.update_errors[0].refusal.to_string();
        assert!(msg.starts_with(reason), "{kind:?} {cap}: {msg}");
        assert_eq!(r.update_errors[0].current_version, 0);
    }
    // Another application's container, and the AM's own, are not this AM's to resize.
    let am = c
        .env
        .app(&a)
        .current_attempt()
        .and_then(|x| x.am_container())
        .expect("an AM container");
    let r = update(
        &mut c,
        &att,
        am,
        0,
        UpdateKind::DecreaseResource,
        Resource::new(256, 1),
    );
    assert!(matches!(
        r.update_errors[0].refusal,
        UpdateRefusal::AmContainer
    ));
    let b = c.start("root.a", "v", 0);
    let batt = c.att(&b);
    let r = update(
        &mut c,
        &batt,
        id,
        0,
        UpdateKind::DecreaseResource,
        Resource::new(2048, 1),
    );
    assert!(matches!(
        r.update_errors[0].refusal,
        UpdateRefusal::UnknownContainer
    ));
    // A gang member is resized as an elastic gang.
    let r = c.gang(&b, "g", 1, 1);
    let member = r.allocated[0].id;
    let r = update(
        &mut c,
        &batt,
        member,
        0,
        UpdateKind::DecreaseResource,
        Resource::new(512, 1).with(GPU, 1),
    );
    assert!(matches!(
        r.update_errors[0].refusal,
        UpdateRefusal::GangMember(_)
    ));
}
