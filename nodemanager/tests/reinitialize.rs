//! `POST /ws/v1/node/containers/reinitialize` (YARN's `reInitializeContainer`) with real
//! processes: the old process gets SIGTERM (and SIGKILL after the grace), the new one runs in
//! the same container (same id, work dir, logs), and the RM never hears a completion of the
//! old one.

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use spindle_common::states::ContainerState;
use support::*;

fn body(
    id: &spindle_common::ids::ContainerId,
    command: &str,
    grace: Option<u64>,
) -> serde_json::Value {
    let mut b = json!({
        "containerId": id.to_string(),
        "containerLaunchContext": {
            "commands": [command],
            "environment": {"GEN": "2"},
        },
    });
    if let Some(g) = grace {
        b["gracePeriodMs"] = json!(g);
    }
    b
}

/// No heartbeat so far reported the container anything but RUNNING.
fn only_running(rm: &FakeRm, id: &spindle_common::ids::ContainerId) -> bool {
    let st = rm.state.lock().expect("rm state");
    st.heartbeats
        .iter()
        .flat_map(|h| h.node_status.containers_statuses.iter())
        .filter(|r| r.status.container_id == *id)
        .all(|r| r.status.state == ContainerState::RUNNING)
}

#[tokio::test]
async fn a_running_container_gets_a_new_process_without_completing() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().expect("tempdir");
    let mut nm = TestNm::start(dirs.path(), rm.addr, false).await;
    rm.wait_registered(1).await;
    let id = cid(1, 1);
    // Generation 1 checkpoints on SIGTERM (writes a file) and exits.
    nm.run_container(
        &rm,
        id,
        "alice",
        "trap 'echo saved > ckpt; exit 0' TERM; echo gen1 > gen1.pid; while true; do sleep 0.05; done",
    )
    .await;
    let work = nm.work_dir("alice", &id);
    read_when_written(&work.join("gen1.pid")).await;
    rm.wait_state(&id, ContainerState::RUNNING).await;

    let (status, v) = nm
        .post_json(
            "/ws/v1/node/containers/reinitialize",
            &body(
                &id,
                "echo gen$GEN > gen2; cat ckpt > seen; exec sleep 30",
                Some(5000),
            ),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["containerId"], id.to_string());
    assert_eq!(v["reinitializations"], 1);
    assert!(v["startTime"].as_u64().expect("startTime") > 0, "{v}");
    assert!(
        v["stoppedInMs"].as_u64().expect("stoppedInMs") < 5000,
        "{v}"
    );
    // The new process runs in the same work dir and saw the old one's checkpoint.
    assert_eq!(read_when_written(&work.join("gen2")).await.trim(), "gen2");
    assert_eq!(read_when_written(&work.join("seen")).await.trim(), "saved");
    let (_, c) = nm.get_json(&format!("/ws/v1/node/containers/{id}")).await;
    assert_eq!(c["container"]["state"], "RUNNING", "{c}");
    // Let a few heartbeats go by: the old process's exit was never a completion.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(only_running(&rm, &id));

    // A second call while none runs is fine; one for an unknown container is a 404.
    let (status, v) = nm
        .post_json(
            "/ws/v1/node/containers/reinitialize",
            &body(&cid(9, 9), "true", None),
        )
        .await;
    assert_eq!(status, 404, "{v}");
    assert_eq!(
        v["RemoteException"]["exception"], "NotFoundException",
        "{v}"
    );
    let (status, v) = nm
        .post_json(
            "/ws/v1/node/containers/reinitialize",
            &json!({"containerId": id.to_string()}),
        )
        .await;
    assert_eq!(status, 400, "{v}");

    // The container then ends as its new process does.
    nm.stop_containers(vec![id]).await;
    let done = rm.wait_state(&id, ContainerState::COMPLETE).await;
    assert_eq!(done.status.exit_status, -105, "{done:?}");
    nm.stop().await.expect("NM stops");
}

#[tokio::test]
async fn a_process_ignoring_sigterm_is_killed_after_the_grace() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().expect("tempdir");
    let mut nm = TestNm::start(dirs.path(), rm.addr, false).await;
    rm.wait_registered(1).await;
    let id = cid(2, 1);
    nm.run_container(
        &rm,
        id,
        "alice",
        "trap '' TERM; echo up > up; while true; do sleep 0.05; done",
    )
    .await;
    let work = nm.work_dir("alice", &id);
    read_when_written(&work.join("up")).await;
    let t0 = Instant::now();
    // Two re-initializations at once: the second is refused with 409.
    let first_body = body(&id, "echo new > new; exec sleep 30", Some(600));
    let first = nm.post_json("/ws/v1/node/containers/reinitialize", &first_body);
    let second = async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        nm.post_json(
            "/ws/v1/node/containers/reinitialize",
            &body(&id, "true", None),
        )
        .await
    };
    let ((s1, v1), (s2, v2)) = tokio::join!(first, second);
    assert_eq!(s1, 200, "{v1}");
    assert_eq!(s2, 409, "{v2}");
    assert!(
        v2["RemoteException"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("already being re-initialized")),
        "{v2}"
    );
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(550),
        "SIGKILL after the grace: {took:?}"
    );
    assert!(
        v1["stoppedInMs"].as_u64().expect("stoppedInMs") >= 550,
        "{v1}"
    );
    assert_eq!(read_when_written(&work.join("new")).await.trim(), "new");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(only_running(&rm, &id));

    // A stopped container cannot be re-initialized.
    nm.stop_containers(vec![id]).await;
    rm.wait_state(&id, ContainerState::COMPLETE).await;
    let (status, v) = nm
        .post_json(
            "/ws/v1/node/containers/reinitialize",
            &body(&id, "true", None),
        )
        .await;
    assert_eq!(status, 409, "{v}");
    assert_eq!(v["RemoteException"]["exception"], "YarnException", "{v}");
    nm.stop().await.expect("NM stops");
}
