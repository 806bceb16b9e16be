//! `POST /ws/v1/node/containers/update` (YARN's `updateContainer`) with real processes: a
//! running container takes a newer token's memory and vcores without a restart (REST, the
//! heartbeats and the recovery store show them), stale and replayed tokens and device changes
//! are refused, and the memory watcher holds the container to its new limit. The cgroup side
//! (limits rewritten in the container's own cgroups) is in `cgroups.rs`.

mod support;

use std::time::Duration;

use serde_json::json;
use spindle_common::ids::ContainerId;
use spindle_common::records::resource::ResourceInfo;
use spindle_common::resource::Resource;
use spindle_common::states::ContainerState;
use spindle_common::token::ContainerTokenIdentifier;
use support::*;

const UPDATE: &str = "/ws/v1/node/containers/update";

fn resized(nm: &TestNm, id: ContainerId, version: i32, r: &Resource) -> ContainerTokenIdentifier {
    let mut i = nm.ident(id, "alice");
    i.version = version;
    i.resource = ResourceInfo::from(r);
    i
}

async fn update(nm: &TestNm, tokens: &[String]) -> serde_json::Value {
    let (status, v) = nm
        .post_json(UPDATE, &json!({ "containersToUpdate": tokens }))
        .await;
    assert_eq!(status, 200, "{v}");
    v
}

fn failure<'a>(v: &'a serde_json::Value, id: &ContainerId) -> &'a serde_json::Value {
    v["failedRequests"]
        .as_array()
        .expect("failedRequests")
        .iter()
        .find(|f| f["containerId"] == id.to_string())
        .unwrap_or_else(|| panic!("no failure for {id}: {v}"))
}

#[tokio::test]
async fn a_running_container_is_resized_in_place() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().expect("tempdir");
    let mut nm = TestNm::start(dirs.path(), rm.addr, true).await;
    rm.wait_registered(1).await;
    let id = cid(1, 1);
    nm.run_container(&rm, id, "alice", "echo $$ > pid; exec sleep 30")
        .await;
    let work = nm.work_dir("alice", &id);
    let pid = read_when_written(&work.join("pid")).await;
    rm.wait_state(&id, ContainerState::RUNNING).await;

    let bigger = Resource::new(1024, 2);
    let v = update(&nm, &[rm.token(&resized(&nm, id, 1, &bigger))]).await;
    assert_eq!(
        v["successfullyUpdatedContainers"],
        json!([id.to_string()]),
        "{v}"
    );
    assert_eq!(v["failedRequests"], json!([]), "{v}");
    // Same process, new size: REST, heartbeats and the recovery store say so.
    assert_eq!(std::fs::read_to_string(work.join("pid")).expect("pid"), pid);
    let (_, c) = nm.get_json(&format!("/ws/v1/node/containers/{id}")).await;
    assert_eq!(c["container"]["state"], "RUNNING", "{c}");
    assert_eq!(c["container"]["totalMemoryNeededMB"], 1024, "{c}");
    assert_eq!(c["container"]["totalVCoresNeeded"], 2, "{c}");
    wait_until("a heartbeat with the new size", || {
        rm.last_report(&id)
            .filter(|r| r.resource == ResourceInfo::from(&bigger))
    })
    .await;
    let store = dirs.path().join("recovery/nm-containers.json");
    let stored: serde_json::Value = wait_until("the store to hold version 1", || {
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&store).ok()?).ok()?;
        (v["containers"][0]["token"]["version"] == 1).then_some(v)
    })
    .await;
    assert_eq!(
        stored["containers"][0]["token"]["resource"]["memory"], 1024,
        "{stored}"
    );

    // Replayed, older, device-changing, foreign and unknown tokens are refused.
    let replay = rm.token(&resized(&nm, id, 1, &bigger));
    let older = rm.token(&resized(&nm, id, 0, &Resource::new(2048, 2)));
    let gpu = rm.token(&resized(&nm, id, 2, &bigger.clone().with("yarn.io/gpu", 1)));
    let v = update(&nm, &[replay]).await;
    let f = failure(&v, &id);
    assert_eq!(f["exception"], "InvalidToken", "{v}");
    assert!(
        f["message"]
            .as_str()
            .expect("message")
            .contains("stale or replayed"),
        "{v}"
    );
    assert!(v["successfullyUpdatedContainers"]
        .as_array()
        .expect("list")
        .is_empty());
    let v = update(&nm, &[older]).await;
    assert!(failure(&v, &id)["message"]
        .as_str()
        .expect("message")
        .contains("at version 1"));
    let v = update(&nm, &[gpu]).await;
    assert!(
        failure(&v, &id)["message"]
            .as_str()
            .expect("message")
            .contains("device counts cannot change in place; use an elastic gang"),
        "{v}"
    );
    let other = cid(1, 9);
    let mut foreign = resized(&nm, other, 1, &bigger);
    foreign.node_id = spindle_common::ids::NodeId::new("elsewhere", 1);
    let v = update(
        &nm,
        &[
            rm.token(&resized(&nm, other, 1, &bigger)),
            rm.token(&foreign),
            "not-a-token".into(),
        ],
    )
    .await;
    let fails = v["failedRequests"].as_array().expect("failedRequests");
    assert_eq!(fails.len(), 3, "{v}");
    assert_eq!(fails[0]["exception"], "InvalidContainerException", "{v}");
    assert_eq!(fails[1]["exception"], "InvalidToken", "{v}");
    assert!(fails[1]["message"]
        .as_str()
        .expect("message")
        .contains("is for node elsewhere"));
    assert_eq!(fails[2]["exception"], "InvalidToken", "{v}");
    // Nothing changed by the refusals.
    let (_, c) = nm.get_json(&format!("/ws/v1/node/containers/{id}")).await;
    assert_eq!(c["container"]["totalMemoryNeededMB"], 1024, "{c}");

    // A malformed body is a 400 RemoteException.
    let (status, v) = nm
        .post_json(UPDATE, &json!({"containersToUpdate": 3}))
        .await;
    assert_eq!(status, 400, "{v}");
    assert!(v["RemoteException"].is_object(), "{v}");

    nm.stop_containers(vec![id]).await;
    let done = rm.wait_state(&id, ContainerState::COMPLETE).await;
    assert_eq!(done.status.exit_status, -105, "{done:?}");
    let v = update(&nm, &[rm.token(&resized(&nm, id, 2, &bigger))]).await;
    assert!(
        failure(&v, &id)["message"]
            .as_str()
            .expect("message")
            .contains("only a live container"),
        "{v}"
    );
    nm.stop().await.expect("stop");
}

/// Without cgroups the RSS watcher holds the container to its new memory limit: a
/// container well within 512 MB is killed (-104) once shrunk to 16 MB.
#[tokio::test]
async fn the_memory_watcher_follows_a_shrink() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().expect("tempdir");
    let mut conf = nm_config(dirs.path(), rm.addr, false);
    conf.isolation.cgroups_enabled = false;
    conf.isolation.monitor_interval = Duration::from_millis(100);
    let mut nm = TestNm::start_with(dirs.path(), conf).await;
    rm.wait_registered(1).await;
    let id = cid(2, 1);
    // ~40 MB held in a bash variable (the loop keeps bash from exec'ing `sleep`, which
    // would drop it).
    nm.run_container(
        &rm,
        id,
        "alice",
        r#"x=$(head -c 40000000 /dev/zero | tr '\0' a); echo "holding ${#x}" > held; while :; do sleep 0.1; done"#,
    )
    .await;
    read_when_written(&nm.work_dir("alice", &id).join("held")).await;
    // Well within its 512 MB for a few checks.
    tokio::time::sleep(Duration::from_millis(400)).await;
    rm.wait_state(&id, ContainerState::RUNNING).await;
    let v = update(
        &nm,
        &[rm.token(&resized(&nm, id, 1, &Resource::new(16, 1)))],
    )
    .await;
    assert_eq!(
        v["successfullyUpdatedContainers"],
        json!([id.to_string()]),
        "{v}"
    );
    let done = rm.wait_state(&id, ContainerState::COMPLETE).await;
    assert_eq!(done.status.exit_status, -104, "{done:?}");
    assert!(
        done.status
            .diagnostics
            .contains("exceeding its memory limit of 16 MB"),
        "{done:?}"
    );
    nm.stop().await.expect("stop");
}

/// A container still localizing takes the update at once and starts with the new size.
#[tokio::test]
async fn a_localizing_container_starts_at_its_new_size() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().expect("tempdir");
    let mut nm = TestNm::start(dirs.path(), rm.addr, false).await;
    rm.wait_registered(1).await;
    let id = cid(3, 1);
    // Started and updated in one go: the update may find it localizing or running.
    nm.run_container(&rm, id, "alice", "exec sleep 30").await;
    let v = update(
        &nm,
        &[rm.token(&resized(&nm, id, 1, &Resource::new(768, 3)))],
    )
    .await;
    assert_eq!(
        v["successfullyUpdatedContainers"],
        json!([id.to_string()]),
        "{v}"
    );
    let (_, c) = nm.get_json(&format!("/ws/v1/node/containers/{id}")).await;
    assert_eq!(c["container"]["totalMemoryNeededMB"], 768, "{c}");
    assert_eq!(c["container"]["totalVCoresNeeded"], 3, "{c}");
    rm.wait_state(&id, ContainerState::RUNNING).await;
    nm.stop().await.expect("stop");
}
