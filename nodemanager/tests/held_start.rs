//! Held starts (gang launches): `"hold"` on `POST /ws/v1/node/containers/start` sets each
//! container up and holds it before its `exec` (NM state `SCHEDULED`) until
//! `POST /ws/v1/node/containers/release` names it; a hold not released in time, or a stop,
//! ends the held process without it ever running.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use spindle_common::ids::ContainerId;
use spindle_common::records::cluster::LocalResourceInfo;
use spindle_common::records::node::{ContainerLaunchContext, StartContainerRequest};
use spindle_common::states::ContainerState;
use spindle_common::token::{issue_container_token, ContainerKey};
use support::*;

/// The diagnostic of a container whose hold expired.
const HOLD_EXPIRED: &str = "held for a gang launch that was not released in time";

/// A start request for `id` whose command writes `marker` (so a test sees whether it ran).
fn marker_request(
    nm: &TestNm,
    rm: &FakeRm,
    id: ContainerId,
    marker: &Path,
) -> StartContainerRequest {
    StartContainerRequest {
        container_token: rm.token(&nm.ident(id, "alice")),
        container_launch_context: ContainerLaunchContext {
            commands: vec![r#"echo "ran $CONTAINER_ID" > "$MARKER""#.into()],
            environment: [("MARKER".to_string(), marker.display().to_string())].into(),
            ..Default::default()
        },
    }
}

fn markers_dir(dirs: &Path) -> PathBuf {
    let d = dirs.join("markers");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A fake RM, a registered NM without recovery, and a directory for markers.
async fn nm_with_markers() -> (FakeRm, tempfile::TempDir, TestNm, PathBuf) {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let nm = TestNm::start(dirs.path(), rm.addr, false).await;
    rm.wait_registered(1).await;
    let markers = markers_dir(dirs.path());
    (rm, dirs, nm, markers)
}

/// Live processes whose working directory is `dir` (a container's work dir: a held child has
/// entered it before waiting at its gate). Zombies have no readable cwd and are not counted.
fn processes_in(dir: &Path) -> Vec<i32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd == dir))
        .collect()
}

async fn container_json(nm: &TestNm, id: &ContainerId) -> serde_json::Value {
    let (status, c) = nm.get_json(&format!("/ws/v1/node/containers/{id}")).await;
    assert_eq!(status, 200, "{c}");
    c["container"].clone()
}

#[tokio::test]
async fn a_held_gang_runs_only_when_released() {
    let (rm, _dirs, mut nm, markers) = nm_with_markers().await;

    let ids = [cid(20, 1), cid(20, 2), cid(20, 3)];
    let marker = |id: &ContainerId| markers.join(id.to_string());
    let reqs = ids
        .iter()
        .map(|id| marker_request(&nm, &rm, *id, &marker(id)))
        .collect();
    let resp = nm.start_containers_held(reqs, Some(30_000)).await;
    assert_eq!(resp.successfully_started_containers, ids, "{resp:?}");
    assert!(resp.failed_requests.is_empty(), "{resp:?}");

    // The answer came once all were set up: each is held, its process waiting in its work dir.
    for id in &ids {
        let c = container_json(&nm, id).await;
        assert_eq!(c["state"], "SCHEDULED", "{c}");
        let work = nm.work_dir("alice", id);
        assert_eq!(
            processes_in(&work).len(),
            1,
            "one held process in {}",
            work.display()
        );
        assert!(nm.log_dir(id).join("stdout").exists(), "logs are open");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for id in &ids {
        assert!(!marker(id).exists(), "{id} ran while held");
        assert_eq!(container_json(&nm, id).await["state"], "SCHEDULED");
    }
    let (_, metrics) = nm.get("/metrics").await;
    assert!(
        metrics.contains("spindle_nm_containers_launched_total 0\n"),
        "held containers are not launched yet: {metrics}"
    );

    let rel = nm.release_containers(ids.to_vec()).await;
    assert_eq!(rel.successfully_released_containers, ids, "{rel:?}");
    assert!(rel.failed_requests.is_empty(), "{rel:?}");
    for id in &ids {
        let text = read_when_written(&marker(id)).await;
        assert_eq!(text, format!("ran {id}\n"));
        let done = rm.wait_state(id, ContainerState::COMPLETE).await;
        assert_eq!(done.status.exit_status, 0, "{done:?}");
        let c = container_json(&nm, id).await;
        assert_eq!(c["state"], "EXITED_WITH_SUCCESS", "{c}");
        assert_eq!(c["exitCode"], 0, "{c}");
    }
    let (_, metrics) = nm.get("/metrics").await;
    assert!(
        metrics.contains("spindle_nm_containers_launched_total 3\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("spindle_nm_containers_completed_total 3\n"),
        "{metrics}"
    );

    // They are no longer held: a second release refuses each.
    let again = nm.release_containers(ids.to_vec()).await;
    assert!(
        again.successfully_released_containers.is_empty(),
        "{again:?}"
    );
    assert_eq!(again.failed_requests.len(), 3, "{again:?}");
    for (f, id) in again.failed_requests.iter().zip(&ids) {
        assert_eq!(f.container_id, id.to_string());
        assert!(f.message.contains("not held"), "{f:?}");
    }
    nm.stop().await.unwrap();
}

#[tokio::test]
async fn a_hold_not_released_in_time_stops_its_containers_unrun() {
    let (rm, _dirs, mut nm, markers) = nm_with_markers().await;

    let ids = [cid(21, 1), cid(21, 2)];
    let reqs = ids
        .iter()
        .map(|id| marker_request(&nm, &rm, *id, &markers.join(id.to_string())))
        .collect();
    let resp = nm.start_containers_held(reqs, Some(300)).await;
    assert_eq!(resp.successfully_started_containers, ids, "{resp:?}");

    for id in &ids {
        let done = rm.wait_state(id, ContainerState::COMPLETE).await;
        assert_eq!(done.status.exit_status, -100, "{done:?}");
        assert!(done.status.diagnostics.contains(HOLD_EXPIRED), "{done:?}");
        let c = container_json(&nm, id).await;
        assert_eq!(c["state"], "CONTAINER_CLEANEDUP_AFTER_KILL", "{c}");
        assert_eq!(c["exitCode"], -100, "{c}");
        let work = nm.work_dir("alice", id);
        wait_until("the held process to be gone", || {
            processes_in(&work).is_empty().then_some(())
        })
        .await;
    }
    // Give a wrongly opened gate time to show.
    tokio::time::sleep(Duration::from_millis(200)).await;
    for id in &ids {
        assert!(!markers.join(id.to_string()).exists(), "{id} ran");
    }
    let rel = nm.release_containers(ids.to_vec()).await;
    assert!(rel.successfully_released_containers.is_empty(), "{rel:?}");
    assert_eq!(rel.failed_requests.len(), 2, "{rel:?}");
    assert!(
        rel.failed_requests
            .iter()
            .all(|f| f.message.contains("not held")),
        "{rel:?}"
    );
    let (_, metrics) = nm.get("/metrics").await;
    assert!(
        metrics.contains("spindle_nm_containers_launched_total 0\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("spindle_nm_containers_killed_total 2\n"),
        "{metrics}"
    );
    nm.stop().await.unwrap();
}

#[tokio::test]
async fn stopping_a_held_container_kills_it_before_it_runs() {
    let (rm, _dirs, mut nm, markers) = nm_with_markers().await;

    let (a, b) = (cid(22, 1), cid(22, 2));
    let resp = nm
        .start_containers_held(
            vec![
                marker_request(&nm, &rm, a, &markers.join(a.to_string())),
                marker_request(&nm, &rm, b, &markers.join(b.to_string())),
            ],
            Some(30_000),
        )
        .await;
    assert_eq!(resp.successfully_started_containers, vec![a, b], "{resp:?}");

    let stopped = nm.stop_containers(vec![a]).await;
    assert_eq!(
        stopped.successfully_stopped_containers,
        vec![a],
        "{stopped:?}"
    );
    let done = rm.wait_state(&a, ContainerState::COMPLETE).await;
    assert_eq!(done.status.exit_status, -105, "{done:?}");
    assert!(
        done.status.diagnostics.contains("ApplicationMaster"),
        "{done:?}"
    );
    let c = container_json(&nm, &a).await;
    assert_eq!(c["state"], "CONTAINER_CLEANEDUP_AFTER_KILL", "{c}");
    let work_a = nm.work_dir("alice", &a);
    wait_until("the stopped held process to be gone", || {
        processes_in(&work_a).is_empty().then_some(())
    })
    .await;
    // The other member is still held.
    assert_eq!(container_json(&nm, &b).await["state"], "SCHEDULED");

    // Releasing both: only b is still held, and only b runs.
    let rel = nm.release_containers(vec![a, b]).await;
    assert_eq!(rel.successfully_released_containers, vec![b], "{rel:?}");
    assert_eq!(rel.failed_requests.len(), 1, "{rel:?}");
    assert_eq!(rel.failed_requests[0].container_id, a.to_string());
    assert!(
        rel.failed_requests[0].message.contains("not held"),
        "{rel:?}"
    );
    read_when_written(&markers.join(b.to_string())).await;
    let done_b = rm.wait_state(&b, ContainerState::COMPLETE).await;
    assert_eq!(done_b.status.exit_status, 0, "{done_b:?}");
    assert!(
        !markers.join(a.to_string()).exists(),
        "the stopped container ran"
    );
    nm.stop().await.unwrap();
}

#[tokio::test]
async fn bad_hold_timeouts_are_400_and_unknown_releases_fail_per_container() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let mut nm = TestNm::start(dirs.path(), rm.addr, false).await;
    rm.wait_registered(1).await;

    let id = cid(23, 1);
    let request = json!({
        "containerToken": rm.token(&nm.ident(id, "alice")),
        "containerLaunchContext": {"commands": ["true"]},
    });
    for bad in [0u64, 600_001] {
        let (status, body) = nm
            .post_json(
                "/ws/v1/node/containers/start",
                &json!({"startContainerRequest": [request], "hold": {"timeoutMs": bad}}),
            )
            .await;
        assert_eq!(status, 400, "timeoutMs {bad}: {body}");
        let e = &body["RemoteException"];
        assert_eq!(e["exception"], "BadRequestException", "{body}");
        assert!(
            e["message"].as_str().unwrap().contains("timeoutMs"),
            "{body}"
        );
    }
    // Nothing of a refused call was started.
    let (status, _) = nm.get(&format!("/ws/v1/node/containers/{id}")).await;
    assert_eq!(status, 404);

    // The bounds themselves are accepted (no containers, so nothing is held).
    for good in [1u64, 600_000] {
        let (status, body) = nm
            .post_json(
                "/ws/v1/node/containers/start",
                &json!({"startContainerRequest": [], "hold": {"timeoutMs": good}}),
            )
            .await;
        assert_eq!(status, 200, "timeoutMs {good}: {body}");
    }

    let unknown = cid(23, 99);
    let rel = nm.release_containers(vec![unknown]).await;
    assert!(rel.successfully_released_containers.is_empty(), "{rel:?}");
    assert_eq!(rel.failed_requests.len(), 1, "{rel:?}");
    assert_eq!(rel.failed_requests[0].container_id, unknown.to_string());
    assert!(
        rel.failed_requests[0].message.contains("not handled"),
        "{rel:?}"
    );
    let (status, body) = nm
        .post_json("/ws/v1/node/containers/release", &json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = nm
        .post_json(
            "/ws/v1/node/containers/release",
            &json!({"containerIds": ["not-a-container-id"]}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["RemoteException"]["exception"], "BadRequestException");
    nm.stop().await.unwrap();
}

#[tokio::test]
async fn a_held_call_answers_bad_requests_in_failed_requests_and_holds_the_rest() {
    let (rm, _dirs, mut nm, markers) = nm_with_markers().await;

    let (good, forged, missing, no_program) = (cid(24, 1), cid(24, 2), cid(24, 3), cid(24, 4));
    let mut forged_req = marker_request(&nm, &rm, forged, &markers.join("forged"));
    forged_req.container_token = issue_container_token(
        &ContainerKey::generate(rm.key.id()).unwrap(),
        &nm.ident(forged, "alice"),
    );
    let mut missing_req = marker_request(&nm, &rm, missing, &markers.join("missing"));
    missing_req.container_launch_context.local_resources = [(
        "x".to_string(),
        LocalResourceInfo {
            resource: "/no/such/file".into(),
            ..Default::default()
        },
    )]
    .into();
    let no_program_req = StartContainerRequest {
        container_token: rm.token(&nm.ident(no_program, "alice")),
        container_launch_context: ContainerLaunchContext {
            commands: vec!["spindle-no-such-program-xyz".into()],
            ..Default::default()
        },
    };
    let resp = nm
        .start_containers_held(
            vec![
                marker_request(&nm, &rm, good, &markers.join("good")),
                forged_req,
                missing_req,
                no_program_req,
            ],
            Some(30_000),
        )
        .await;
    assert_eq!(resp.successfully_started_containers, vec![good], "{resp:?}");
    let failed = |id: ContainerId| {
        resp.failed_requests
            .iter()
            .find(|f| f.container_id == id.to_string())
            .unwrap_or_else(|| panic!("{id} not in {resp:?}"))
    };
    assert_eq!(resp.failed_requests.len(), 3, "{resp:?}");
    assert_eq!(failed(forged).exception, "InvalidToken");
    assert!(failed(forged).message.contains("signature"), "{resp:?}");
    assert!(
        failed(missing).message.contains("/no/such/file"),
        "{resp:?}"
    );
    assert!(failed(no_program).message.contains("not found"), "{resp:?}");

    // The good one is held; the ones that failed setup ended and are reported as such.
    assert_eq!(container_json(&nm, &good).await["state"], "SCHEDULED");
    let done = rm.wait_state(&missing, ContainerState::COMPLETE).await;
    assert_eq!(done.status.exit_status, -1000, "{done:?}");
    assert_eq!(
        container_json(&nm, &missing).await["state"],
        "LOCALIZATION_FAILED"
    );
    rm.wait_state(&no_program, ContainerState::COMPLETE).await;
    let (status, _) = nm.get(&format!("/ws/v1/node/containers/{forged}")).await;
    assert_eq!(status, 404, "a refused container is unknown");

    let rel = nm.release_containers(vec![good, missing]).await;
    assert_eq!(rel.successfully_released_containers, vec![good], "{rel:?}");
    assert_eq!(rel.failed_requests.len(), 1, "{rel:?}");
    assert_eq!(rel.failed_requests[0].container_id, missing.to_string());
    read_when_written(&markers.join("good")).await;
    let done = rm.wait_state(&good, ContainerState::COMPLETE).await;
    assert_eq!(done.status.exit_status, 0, "{done:?}");
    for m in ["forged", "missing"] {
        assert!(!markers.join(m).exists(), "{m} ran");
    }
    nm.stop().await.unwrap();
}

#[tokio::test]
async fn an_nm_stopping_with_held_containers_ends_them_unrun() {
    let (rm, _dirs, mut nm, markers) = nm_with_markers().await;

    let ids = [cid(25, 1), cid(25, 2)];
    let reqs = ids
        .iter()
        .map(|id| marker_request(&nm, &rm, *id, &markers.join(id.to_string())))
        .collect();
    let resp = nm.start_containers_held(reqs, Some(30_000)).await;
    assert_eq!(resp.successfully_started_containers, ids, "{resp:?}");
    let works: Vec<PathBuf> = ids.iter().map(|id| nm.work_dir("alice", id)).collect();
    for w in &works {
        assert_eq!(processes_in(w).len(), 1, "{}", w.display());
    }
    tokio::time::timeout(Duration::from_secs(10), nm.stop())
        .await
        .expect("the NM stops promptly with held containers")
        .unwrap();
    for w in &works {
        wait_until("the held process to be gone", || {
            processes_in(w).is_empty().then_some(())
        })
        .await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    for id in &ids {
        assert!(!markers.join(id.to_string()).exists(), "{id} ran");
    }
}

#[tokio::test]
async fn a_hold_that_expires_during_setup_answers_and_stops_every_member() {
    let (rm, dirs, mut nm, markers) = nm_with_markers().await;

    // `slow` localizes a FIFO: copying it blocks until someone writes to it.
    let fifo = dirs.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let (quick, slow) = (cid(26, 1), cid(26, 2));
    let mut slow_req = marker_request(&nm, &rm, slow, &markers.join("slow"));
    slow_req.container_launch_context.local_resources = [(
        "data".to_string(),
        LocalResourceInfo {
            resource: format!("file://{}", fifo.display()),
            ..Default::default()
        },
    )]
    .into();
    let resp = tokio::time::timeout(
        Duration::from_secs(10),
        nm.start_containers_held(
            vec![
                marker_request(&nm, &rm, quick, &markers.join("quick")),
                slow_req,
            ],
            Some(500),
        ),
    )
    .await
    .expect("the held start is answered when its hold expires");
    assert_eq!(
        resp.successfully_started_containers,
        vec![quick],
        "{resp:?}"
    );
    assert_eq!(resp.failed_requests.len(), 1, "{resp:?}");
    assert_eq!(resp.failed_requests[0].container_id, slow.to_string());
    assert!(
        resp.failed_requests[0]
            .message
            .contains("still being set up"),
        "{resp:?}"
    );
    for id in [quick, slow] {
        let done = rm.wait_state(&id, ContainerState::COMPLETE).await;
        assert_eq!(done.status.exit_status, -100, "{done:?}");
        assert!(done.status.diagnostics.contains(HOLD_EXPIRED), "{done:?}");
        let c = container_json(&nm, &id).await;
        assert_eq!(c["state"], "CONTAINER_CLEANEDUP_AFTER_KILL", "{c}");
    }

    // Let the blocked copy finish (the localizing thread is blocked opening the FIFO): the
    // late localization result must not start the stopped container.
    wait_until("the FIFO to have a reader", || {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(nix::libc::O_NONBLOCK)
            .open(&fifo)
            .ok()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        container_json(&nm, &slow).await["state"],
        "CONTAINER_CLEANEDUP_AFTER_KILL"
    );
    assert!(processes_in(&nm.work_dir("alice", &slow)).is_empty());
    for m in ["quick", "slow"] {
        assert!(!markers.join(m).exists(), "{m} ran");
    }
    nm.stop().await.unwrap();
}

#[tokio::test]
async fn a_held_container_does_not_survive_an_nm_restart_with_recovery() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let mut nm1 = TestNm::start(dirs.path(), rm.addr, true).await;
    rm.wait_registered(1).await;
    let markers = markers_dir(dirs.path());

    let id = cid(27, 1);
    let marker = markers.join(id.to_string());
    let resp = nm1
        .start_containers_held(vec![marker_request(&nm1, &rm, id, &marker)], Some(30_000))
        .await;
    assert_eq!(resp.successfully_started_containers, vec![id], "{resp:?}");
    let work = nm1.work_dir("alice", &id);
    assert_eq!(processes_in(&work).len(), 1);

    // Running containers outlive a recovering NM; a held one cannot be released by the next
    // NM (its gate was the old NM's), so it ends, unrun, when the old NM goes.
    nm1.stop().await.unwrap();
    wait_until("the held process to be gone", || {
        processes_in(&work).is_empty().then_some(())
    })
    .await;
    let mut nm2 = TestNm::start(dirs.path(), rm.addr, true).await;
    rm.wait_registered(2).await;
    let done = rm.wait_state(&id, ContainerState::COMPLETE).await;
    assert_eq!(done.status.exit_status, -100, "{done:?}");
    let rel = nm2.release_containers(vec![id]).await;
    assert!(rel.successfully_released_containers.is_empty(), "{rel:?}");
    assert!(
        rel.failed_requests[0].message.contains("not held"),
        "{rel:?}"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!marker.exists(), "the held container ran");
    nm2.stop().await.unwrap();
}

#[tokio::test]
async fn a_hold_without_a_timeout_gets_the_nms_default() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let mut conf = nm_config(dirs.path(), rm.addr, false);
    // As from `spindle.nodemanager.launch-hold.timeout-ms` = 300.
    conf.launch_hold_timeout = Duration::from_millis(300);
    let mut nm = TestNm::start_with(dirs.path(), conf).await;
    rm.wait_registered(1).await;
    let markers = markers_dir(dirs.path());

    let id = cid(28, 1);
    let marker = markers.join(id.to_string());
    let resp = nm
        .start_containers_held(vec![marker_request(&nm, &rm, id, &marker)], None)
        .await;
    assert_eq!(resp.successfully_started_containers, vec![id], "{resp:?}");
    let done = rm.wait_state(&id, ContainerState::COMPLETE).await;
    assert_eq!(done.status.exit_status, -100, "{done:?}");
    assert!(done.status.diagnostics.contains(HOLD_EXPIRED), "{done:?}");
    assert!(!marker.exists(), "the held container ran");
    nm.stop().await.unwrap();
}
