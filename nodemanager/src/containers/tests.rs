//! The container state machine's rules, without processes.

use super::*;
use spindle_common::ids::{ApplicationAttemptId, NodeId};

/// A process as the tests name it.
fn h(pid: i32) -> ExecHandle {
    ExecHandle::process_group(pid, None)
}

fn cid(app: u32, seq: u64) -> ContainerId {
    ContainerId::new(
        ApplicationAttemptId::new(ApplicationId::new(1, app), 1),
        0,
        seq,
    )
}

fn container(id: ContainerId) -> Container {
    let token = ContainerTokenIdentifier {
        container_id: id,
        node_id: NodeId::new("h", 1),
        app_submitter: "alice".into(),
        resource: ResourceInfo::plain(&Resource::new(1024, 1)),
        expiry_time_ms: 0,
        rm_identifier: 1,
        is_am: false,
        version: 0,
        master_key_id: 0,
    };
    Container::new(token, PathBuf::from("/w"), vec![PathBuf::from("/l")], 10)
}

fn running(t: &mut ContainerTable, id: ContainerId, pid: i32) {
    t.insert(container(id)).unwrap();
    assert!(t.may_start(&id));
    t.started(&id, h(pid));
}

#[test]
fn exit_codes_are_reported_as_yarn_does() {
    let mut t = ContainerTable::new();
    let (a, b, c) = (cid(1, 1), cid(1, 2), cid(1, 3));
    running(&mut t, a, 100);
    running(&mut t, b, 101);
    running(&mut t, c, 102);
    assert_eq!(t.allocated(), Resource::new(3072, 3));
    assert_eq!(
        t.exited(&a, &ProcessExit::Code(0), "", 20),
        Some(Outcome::Succeeded)
    );
    assert_eq!(
        t.exited(&b, &ProcessExit::Code(3), "boom", 20),
        Some(Outcome::Failed)
    );
    assert_eq!(
        t.exited(&c, &ProcessExit::Signal(9), "", 20),
        Some(Outcome::Failed)
    );
    let get = |id| t.get(&id).unwrap().clone();
    assert_eq!(get(a).state(), NmContainerState::EXITED_WITH_SUCCESS);
    assert_eq!(get(b).exit_code(), 3);
    assert!(get(b).diagnostics().contains("boom"));
    assert_eq!(get(c).exit_code(), 137);
    assert_eq!(t.allocated(), Resource::zero());
    // A second exit report changes nothing.
    assert_eq!(t.exited(&a, &ProcessExit::Code(1), "", 30), None);
}

#[test]
fn stops_carry_the_requesters_status() {
    let mut t = ContainerTable::new();
    let (a, b, c) = (cid(1, 1), cid(1, 2), cid(1, 3));
    running(&mut t, a, 100);
    running(&mut t, b, 101);
    t.insert(container(c)).unwrap();
    assert_eq!(
        t.request_stop(&a, StopReason::AppMaster, 1),
        StopAction::Terminate { process: h(100) }
    );
    // A later stop by someone else does not change the first reason.
    assert_eq!(
        t.request_stop(&a, StopReason::ResourceManager, 1),
        StopAction::Nothing
    );
    assert_eq!(
        t.request_stop(&b, StopReason::ResourceManager, 1),
        StopAction::Terminate { process: h(101) }
    );
    assert_eq!(
        t.request_stop(&c, StopReason::AppMaster, 1),
        StopAction::CompletedBeforeStart(Outcome::Killed)
    );
    assert!(!t.may_start(&c));
    assert_eq!(
        t.exited(&a, &ProcessExit::Code(143), "", 2),
        Some(Outcome::Killed)
    );
    assert_eq!(
        t.exited(&b, &ProcessExit::Signal(9), "", 2),
        Some(Outcome::Killed)
    );
    assert_eq!(t.get(&a).unwrap().exit_code(), -105);
    assert_eq!(t.get(&b).unwrap().exit_code(), -106);
    assert_eq!(t.get(&c).unwrap().exit_code(), -105);
    assert_eq!(
        t.request_stop(&cid(9, 9), StopReason::AppMaster, 1),
        StopAction::Unknown
    );
    assert_eq!(
        t.request_stop(&a, StopReason::AppMaster, 1),
        StopAction::Nothing
    );
}

#[test]
fn completed_containers_are_reported_until_acknowledged() {
    let mut t = ContainerTable::new();
    let (a, b) = (cid(1, 1), cid(1, 2));
    running(&mut t, a, 100);
    running(&mut t, b, 101);
    t.exited(&a, &ProcessExit::Code(0), "", 5);
    let r = t.reports();
    assert_eq!(r.len(), 2);
    assert_eq!(r[0].status.state, ContainerState::COMPLETE);
    assert_eq!(r[1].status.state, ContainerState::RUNNING);
    assert_eq!(r[1].status.exit_status, -1000);
    // Acknowledging a running container is ignored.
    assert_eq!(t.acknowledge(&[a, b]), 1);
    assert_eq!(t.reports().len(), 1);
    assert_eq!(t.get(&a).unwrap().state(), NmContainerState::DONE);
    t.prune_done(0);
    assert!(t.get(&a).is_none());
    assert!(t.get(&b).is_some());
}

#[test]
fn apps_finish_when_their_containers_are_done() {
    let mut t = ContainerTable::new();
    let (a, b) = (cid(1, 1), cid(2, 1));
    running(&mut t, a, 100);
    running(&mut t, b, 101);
    let app = a.application_id();
    assert_eq!(t.app_state(t.app(&app).unwrap()), APP_RUNNING);
    assert!(t.finish_app(&app));
    assert_eq!(t.live_of_app(&app), vec![a]);
    assert_eq!(t.app_state(t.app(&app).unwrap()), APP_FINISHING);
    t.request_stop(&a, StopReason::ResourceManager, 1);
    t.exited(&a, &ProcessExit::Signal(15), "", 2);
    assert_eq!(t.app_state(t.app(&app).unwrap()), APP_FINISHED);
    assert!(t.live_of_app(&app).is_empty());
    assert_eq!(t.live_ids(), vec![b]);
    assert!(t.insert(container(b)).is_err());
}

#[test]
fn a_memory_kill_is_reported_with_minus_104() {
    let mut t = ContainerTable::new();
    let (a, b) = (cid(1, 1), cid(1, 2));
    running(&mut t, a, 100);
    running(&mut t, b, 101);
    let oom = ProcessExit::MemoryExceeded {
        limit_mb: 64,
        detail: "the kernel's OOM killer killed 1 of its processes".into(),
    };
    assert_eq!(t.exited(&a, &oom, "Killed", 5), Some(Outcome::Killed));
    let c = t.get(&a).unwrap();
    assert_eq!(c.exit_code(), -104);
    assert_eq!(c.state(), NmContainerState::CONTAINER_CLEANEDUP_AFTER_KILL);
    assert!(
        c.diagnostics()
            .starts_with("Container killed for exceeding its memory limit of 64 MB."),
        "{}",
        c.diagnostics()
    );
    assert!(
        c.diagnostics().contains("OOM killer"),
        "{}",
        c.diagnostics()
    );
    // A container being stopped keeps its stopper's status.
    t.request_stop(&b, StopReason::AppMaster, 6);
    assert_eq!(t.exited(&b, &oom, "", 7), Some(Outcome::Killed));
    assert_eq!(t.get(&b).unwrap().exit_code(), -105);
}

#[test]
fn localization_failures_never_ran() {
    let mut t = ContainerTable::new();
    let a = cid(1, 1);
    t.insert(container(a)).unwrap();
    assert_eq!(
        t.launch_failed(&a, true, None, "no such file".into(), 3),
        Some(Outcome::Failed)
    );
    let c = t.get(&a).unwrap();
    assert_eq!(c.state(), NmContainerState::LOCALIZATION_FAILED);
    // It never had an exit status; the wire shows YARN's -1000.
    assert_eq!(c.exit_status(), None);
    assert_eq!(c.exit_code(), -1000);
    assert_eq!(c.public_state(), ContainerState::COMPLETE);
}

#[test]
fn a_reinitialization_replaces_the_process_without_completing() {
    let mut t = ContainerTable::new();
    let (a, b, c) = (cid(1, 1), cid(1, 2), cid(1, 3));
    running(&mut t, a, 100);
    t.insert(container(b)).unwrap();
    // Refusals change nothing.
    assert_eq!(
        t.begin_reinit(&cid(9, 9), 10),
        Err(ReinitRefusal::Unknown(cid(9, 9)))
    );
    assert!(matches!(
        t.begin_reinit(&b, 10),
        Err(ReinitRefusal::NotRunning {
            state: NmContainerState::LOCALIZING,
            ..
        })
    ));
    assert_eq!(t.begin_reinit(&a, 500), Ok(()));
    assert_eq!(
        t.begin_reinit(&a, 500),
        Err(ReinitRefusal::AlreadyReinitializing(a))
    );
    let got = t.get(&a).unwrap();
    assert_eq!(got.state(), NmContainerState::REINITIALIZING);
    // Still running to the RM, still holding its resources.
    assert_eq!(got.public_state(), ContainerState::RUNNING);
    assert_eq!(t.allocated(), Resource::new(2048, 2));
    assert_eq!(
        t.reinit_localized(&a, Ok(()), 50),
        ReinitStep::TerminateOld {
            old: h(100),
            grace_ms: 500
        }
    );
    assert!(t.reinit_kill_due(&a, &h(100)));
    assert!(!t.reinit_kill_due(&a, &h(101)));
    // The old leader's exit is a step, not a completion.
    assert_eq!(
        t.reinit_old_exited(&a),
        Some(ReinitStep::StartNew { old: h(100) })
    );
    t.reinit_started(&a, ExecHandle::process_group(200, Some(7)));
    let got = t.get(&a).unwrap();
    assert_eq!(
        (got.state(), got.process(), got.reinits, got.reinit()),
        (
            NmContainerState::RUNNING,
            Some(&ExecHandle::process_group(200, Some(7))),
            1,
            None
        )
    );
    assert_eq!(got.exit_status(), None);
    assert_eq!(t.reinit_old_exited(&a), None);
    // The new process's end is an ordinary one.
    assert_eq!(
        t.exited(&a, &ProcessExit::Code(0), "", 90),
        Some(Outcome::Succeeded)
    );

    // The old process ending while the new context is localized: start at once.
    running(&mut t, c, 300);
    t.begin_reinit(&c, 10).unwrap();
    assert_eq!(t.reinit_old_exited(&c), Some(ReinitStep::Wait));
    assert_eq!(
        t.reinit_localized(&c, Ok(()), 5),
        ReinitStep::StartNew { old: h(300) }
    );
}

#[test]
fn a_failed_localization_keeps_or_fails_the_container() {
    let mut t = ContainerTable::new();
    let (a, b) = (cid(1, 1), cid(1, 2));
    running(&mut t, a, 100);
    running(&mut t, b, 101);
    t.begin_reinit(&a, 10).unwrap();
    assert_eq!(
        t.reinit_localized(&a, Err("no such file".into()), 5),
        ReinitStep::Reverted
    );
    assert_eq!(t.get(&a).unwrap().state(), NmContainerState::RUNNING);
    assert_eq!(t.get(&a).unwrap().process(), Some(&h(100)));
    // Its old process gone too: the container failed.
    t.begin_reinit(&b, 10).unwrap();
    t.reinit_old_exited(&b);
    assert_eq!(
        t.reinit_localized(&b, Err("no such file".into()), 5),
        ReinitStep::Failed(Outcome::Failed)
    );
    let got = t.get(&b).unwrap();
    assert_eq!(got.state(), NmContainerState::EXITED_WITH_FAILURE);
    assert!(
        got.diagnostics().contains("no such file"),
        "{}",
        got.diagnostics()
    );
}

#[test]
fn a_stop_during_a_reinitialization_stops_the_container() {
    let mut t = ContainerTable::new();
    let (a, b) = (cid(1, 1), cid(1, 2));
    running(&mut t, a, 100);
    running(&mut t, b, 101);
    t.begin_reinit(&a, 10).unwrap();
    t.reinit_localized(&a, Ok(()), 5);
    assert_eq!(
        t.request_stop(&a, StopReason::AppMaster, 6),
        StopAction::Terminate { process: h(100) }
    );
    // The localization finishing late, or the old process's exit, no longer start anything.
    assert_eq!(t.reinit_localized(&a, Ok(()), 7), ReinitStep::Abandoned);
    assert_eq!(t.reinit_old_exited(&a), None);
    assert_eq!(
        t.exited(&a, &ProcessExit::Code(143), "", 8),
        Some(Outcome::Killed)
    );
    assert_eq!(t.get(&a).unwrap().exit_code(), -105);
    // Between the old process's end and the new one's start: completed at once.
    t.begin_reinit(&b, 10).unwrap();
    t.reinit_old_exited(&b);
    assert_eq!(
        t.request_stop(&b, StopReason::ResourceManager, 9),
        StopAction::CompletedBeforeStart(Outcome::Killed)
    );
    assert_eq!(t.get(&b).unwrap().exit_code(), -106);
    // A start failure after the old process went fails the container.
    let c = cid(1, 3);
    running(&mut t, c, 102);
    t.begin_reinit(&c, 10).unwrap();
    t.reinit_localized(&c, Ok(()), 1);
    t.reinit_old_exited(&c);
    assert_eq!(
        t.reinit_start_failed(&c, "ENOENT".into(), 2),
        Some(Outcome::Failed)
    );
    assert_eq!(
        t.get(&c).unwrap().state(),
        NmContainerState::EXITED_WITH_FAILURE
    );
}

fn update_token(id: ContainerId, version: i32, r: Resource) -> ContainerTokenIdentifier {
    let mut t = container(id).token;
    t.version = version;
    t.resource = ResourceInfo::from(&r);
    t
}

#[test]
fn an_update_takes_a_newer_version_and_its_resource() {
    let mut t = ContainerTable::new();
    let id = cid(1, 1);
    running(&mut t, id, 100);
    let up = update_token(id, 1, Resource::new(4096, 3));
    let plan = t.begin_update(&up).unwrap();
    assert_eq!(plan.old, Resource::new(1024, 1));
    assert_eq!(plan.new, Resource::new(4096, 3));
    assert!(plan.has_process);
    // While it is applied, another update and a re-initialization wait.
    assert_eq!(
        t.begin_update(&update_token(id, 2, Resource::new(2048, 1))),
        Err(UpdateRefusal::Busy(id))
    );
    assert_eq!(t.begin_reinit(&id, 10), Err(ReinitRefusal::Updating(id)));
    assert!(t.finish_update(&up, true));
    let c = t.get(&id).unwrap();
    assert_eq!(c.resource, Resource::new(4096, 3));
    assert_eq!(c.token.version, 1);
    assert_eq!(c.state(), NmContainerState::RUNNING);
    assert_eq!(c.updating(), None);
    assert_eq!(t.allocated(), Resource::new(4096, 3));
    assert_eq!(
        t.reports()[0].resource,
        ResourceInfo::from(&Resource::new(4096, 3))
    );
    // The same token again, or an older one, is stale.
    assert!(matches!(
        t.begin_update(&up),
        Err(UpdateRefusal::Stale {
            current: 1,
            offered: 1,
            ..
        })
    ));
    // A decrease to a newer version goes through.
    let down = update_token(id, 2, Resource::new(512, 1));
    t.begin_update(&down).unwrap();
    assert!(t.finish_update(&down, true));
    assert_eq!(t.get(&id).unwrap().resource, Resource::new(512, 1));
}

#[test]
fn a_failed_update_changes_nothing() {
    let mut t = ContainerTable::new();
    let id = cid(1, 1);
    running(&mut t, id, 100);
    let up = update_token(id, 1, Resource::new(4096, 3));
    t.begin_update(&up).unwrap();
    assert!(t.finish_update(&up, false));
    let c = t.get(&id).unwrap();
    assert_eq!(c.resource, Resource::new(1024, 1));
    assert_eq!(c.token.version, 0);
    assert_eq!(c.updating(), None);
    // ... so the same version may be offered again.
    t.begin_update(&up).unwrap();
}

#[test]
fn devices_cannot_change_in_place() {
    let mut t = ContainerTable::new();
    let id = cid(1, 1);
    let mut c = container(id);
    c.token.resource = ResourceInfo::from(&Resource::new(1024, 1).with("yarn.io/gpu", 2));
    c.resource = c.token.resource.to_resource();
    t.insert(c).unwrap();
    t.started(&id, h(100));
    let more = update_token(id, 1, Resource::new(1024, 1).with("yarn.io/gpu", 4));
    let e = t.begin_update(&more).unwrap_err();
    assert!(
        matches!(&e, UpdateRefusal::DeviceChange { name, from: 2, to: 4, .. } if name == "yarn.io/gpu")
    );
    assert!(e.to_string().contains("use an elastic gang"), "{e}");
    let none = update_token(id, 1, Resource::new(1024, 1));
    assert!(matches!(
        t.begin_update(&none),
        Err(UpdateRefusal::DeviceChange { from: 2, to: 0, .. })
    ));
    // Memory with the same devices is fine.
    let mem = update_token(id, 1, Resource::new(8192, 1).with("yarn.io/gpu", 2));
    t.begin_update(&mem).unwrap();
    assert_eq!(t.get(&id).unwrap().updating(), Some(1));
}

#[test]
fn only_live_containers_are_updated() {
    let mut t = ContainerTable::new();
    let unknown = cid(1, 9);
    assert_eq!(
        t.begin_update(&update_token(unknown, 1, Resource::new(2048, 1))),
        Err(UpdateRefusal::Unknown(unknown))
    );
    // Localizing: accepted with no process to touch, and recorded at once.
    let loc = cid(1, 1);
    t.insert(container(loc)).unwrap();
    let up = update_token(loc, 1, Resource::new(2048, 2));
    assert!(!t.begin_update(&up).unwrap().has_process);
    assert_eq!(t.get(&loc).unwrap().updating(), None);
    assert!(t.finish_update(&up, true));
    assert_eq!(t.get(&loc).unwrap().resource, Resource::new(2048, 2));
    // Re-initializing, stopping, and finished containers are refused.
    let re = cid(1, 2);
    running(&mut t, re, 200);
    t.begin_reinit(&re, 10).unwrap();
    assert_eq!(
        t.begin_update(&update_token(re, 1, Resource::new(2048, 1))),
        Err(UpdateRefusal::Reinitializing(re))
    );
    let done = cid(1, 3);
    running(&mut t, done, 300);
    t.exited(&done, &ProcessExit::Code(0), "", 20);
    assert!(matches!(
        t.begin_update(&update_token(done, 1, Resource::new(2048, 1))),
        Err(UpdateRefusal::NotLive {
            state: NmContainerState::EXITED_WITH_SUCCESS,
            ..
        })
    ));
    // A container that ended while its update was applied records nothing.
    let gone = cid(1, 4);
    running(&mut t, gone, 400);
    let up = update_token(gone, 1, Resource::new(2048, 1));
    t.begin_update(&up).unwrap();
    t.exited(&gone, &ProcessExit::Code(1), "", 20);
    assert!(!t.finish_update(&up, true));
    assert_eq!(t.get(&gone).unwrap().resource, Resource::new(1024, 1));
    assert!(matches!(
        t.begin_update(&update_token(loc, 2, Resource::new(0, 1))),
        Err(UpdateRefusal::Invalid { .. })
    ));
}

#[test]
fn containers_being_killed_give_up_their_room_and_the_others_keep_it() {
    let mut t = ContainerTable::new();
    let (a, b, c) = (cid(1, 1), cid(1, 2), cid(1, 3));
    running(&mut t, a, 100);
    running(&mut t, b, 101);
    t.insert(container(c)).unwrap();
    assert_eq!(t.committed(), Resource::new(3072, 3), "localizing counts");
    t.request_stop(&a, StopReason::ResourceManager, 1);
    assert_eq!(t.committed(), Resource::new(2048, 2));
    assert_eq!(t.allocated(), Resource::new(3072, 3), "still live");
    t.exited(&b, &ProcessExit::Code(0), "", 2);
    assert_eq!(t.committed(), Resource::new(1024, 1));
}
