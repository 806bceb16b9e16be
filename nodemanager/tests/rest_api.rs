//! The NM REST API's shapes and errors, against an in-process NM and a fake RM.

mod support;

use serde_json::{json, Value};
use spindle_common::states::ContainerState;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn assert_remote_exception(v: &Value, exception: &str, message: &str) {
    let re = &v["RemoteException"];
    assert_eq!(re["exception"], exception, "{v}");
    assert_eq!(re["message"], message, "{v}");
    assert!(
        re["javaClassName"]
            .as_str()
            .is_some_and(|s| s.ends_with(exception)),
        "{v}"
    );
}

/// Sends a request with a literal path (HTTP clients would normalise `..`).
async fn raw_get(addr: std::net::SocketAddr, path: &str) -> u16 {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.unwrap();
    let text = String::from_utf8_lossy(&buf);
    text.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test]
async fn empty_node_shapes_and_errors() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let mut nm = TestNm::start(dirs.path(), rm.addr, false).await;
    rm.wait_registered(1).await;

    for path in ["/ws/v1/node", "/ws/v1/node/info"] {
        let (s, v) = nm.get_json(path).await;
        assert_eq!(s, 200);
        let info = &v["nodeInfo"];
        assert_eq!(info["id"], nm.node_id.to_string());
        assert_eq!(info["nodeHostName"], "127.0.0.1");
        assert_eq!(info["totalPmemAllocatedContainersMB"], 4096);
        assert_eq!(info["totalVCoresAllocatedContainers"], 4);
        assert_eq!(info["nodeHealthy"], true);
        assert_eq!(info["healthReport"], "");
        assert!(info["nmStartupTime"].as_u64().unwrap() > 0);
    }
    assert_eq!(
        nm.get("/ws/v1/node/apps").await,
        (200, r#"{"apps":null}"#.to_string())
    );
    assert_eq!(
        nm.get("/ws/v1/node/containers").await,
        (200, r#"{"containers":null}"#.to_string())
    );

    let (s, v) = nm.get_json("/ws/v1/node/apps/application_1_0001").await;
    assert_eq!(s, 404);
    assert_remote_exception(
        &v,
        "NotFoundException",
        "app with id application_1_0001 not found",
    );
    let (s, v) = nm.get_json("/ws/v1/node/apps/app_bogus").await;
    assert_eq!(s, 400);
    assert_remote_exception(
        &v,
        "BadRequestException",
        "Invalid ApplicationId: app_bogus",
    );
    let (s, v) = nm.get_json("/ws/v1/node/apps?state=bogus").await;
    assert_eq!(s, 400);
    assert_eq!(v["RemoteException"]["exception"], "BadRequestException");

    let (s, v) = nm.get_json("/ws/v1/node/containers/container_x").await;
    assert_eq!(s, 400);
    assert_remote_exception(
        &v,
        "BadRequestException",
        "invalid container id, container_x",
    );
    let unknown = cid(1, 1).to_string();
    let (s, v) = nm
        .get_json(&format!("/ws/v1/node/containers/{unknown}"))
        .await;
    assert_eq!(s, 404);
    assert_remote_exception(
        &v,
        "NotFoundException",
        &format!("container with id, {unknown}, not found"),
    );
    let (s, v) = nm
        .get_json(&format!("/ws/v1/node/containers/{unknown}/logs"))
        .await;
    assert_eq!(s, 404);
    assert_eq!(v["RemoteException"]["exception"], "NotFoundException");
    let (s, v) = nm.get_json("/ws/v1/node/nothing-here").await;
    assert_eq!(s, 404);
    assert_eq!(v["RemoteException"]["exception"], "NotFoundException");

    // Malformed bodies are 400 RemoteExceptions, whatever the content type, with the words
    // the RM uses too (one REST edge).
    for (body, says) in [
        ("{not json", "Malformed JSON request body"),
        (
            r#"{"startContainerRequest":[{"containerToken":5}]}"#,
            "Invalid request body",
        ),
    ] {
        let r = nm
            .http
            .post(format!("{}/ws/v1/node/containers/start", nm.base))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400);
        let v: Value = r.json().await.unwrap();
        assert_eq!(
            v["RemoteException"]["exception"], "BadRequestException",
            "{v}"
        );
        assert!(
            v["RemoteException"]["message"]
                .as_str()
                .unwrap()
                .starts_with(says),
            "{v}"
        );
    }
    let r = nm
        .http
        .post(format!("{}/ws/v1/node/containers/stop", nm.base))
        .body(r#"{"containerIds":["nope"]}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let r = nm
        .http
        .delete(format!("{}/ws/v1/node/info", nm.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);
    nm.stop().await.unwrap();
}

#[tokio::test]
async fn apps_containers_logs_and_metrics() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let mut nm = TestNm::start(dirs.path(), rm.addr, false).await;
    rm.wait_registered(1).await;

    let (done_id, live_id) = (cid(2, 1), cid(2, 2));
    nm.run_container(&rm, done_id, "alice", "echo hello; echo oops >&2")
        .await;
    rm.wait_state(&done_id, ContainerState::COMPLETE).await;
    nm.run_container(&rm, live_id, "alice", "sleep 100").await;
    rm.wait_state(&live_id, ContainerState::RUNNING).await;
    let app = done_id.application_id().to_string();

    // Apps, with filters.
    let (_, v) = nm.get_json("/ws/v1/node/apps").await;
    assert_eq!(
        v,
        json!({"apps":{"app":[{"id": app, "user":"alice", "state":"RUNNING",
            "containerids":[done_id.to_string(), live_id.to_string()]}]}})
    );
    assert_eq!(
        nm.get_json("/ws/v1/node/apps?state=running&user=alice")
            .await
            .1,
        v
    );
    assert_eq!(
        nm.get_json("/ws/v1/node/apps?state=FINISHED").await.1,
        json!({"apps":null})
    );
    assert_eq!(
        nm.get_json("/ws/v1/node/apps?user=bob").await.1,
        json!({"apps":null})
    );
    let (_, one) = nm.get_json(&format!("/ws/v1/node/apps/{app}")).await;
    assert_eq!(one["app"]["id"], app);

    // Containers.
    let (_, v) = nm.get_json("/ws/v1/node/containers").await;
    let list = v["containers"]["container"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    let (_, c) = nm
        .get_json(&format!("/ws/v1/node/containers/{done_id}"))
        .await;
    let c = &c["container"];
    assert_eq!(c["id"], done_id.to_string());
    assert_eq!(c["state"], "EXITED_WITH_SUCCESS");
    assert_eq!(c["exitCode"], 0);
    assert_eq!(c["user"], "alice");
    assert_eq!(c["totalMemoryNeededMB"], 512);
    assert_eq!(c["totalVCoresNeeded"], 1);
    assert_eq!(c["nodeId"], nm.node_id.to_string());
    assert_eq!(c["executionType"], "GUARANTEED");
    assert_eq!(
        c["containerLogsLink"],
        format!("http://{}/node/containerlogs/{done_id}/alice", nm.node_id)
    );
    assert_eq!(c["containerLogFiles"], json!(["stderr", "stdout"]));
    let (_, live) = nm
        .get_json(&format!("/ws/v1/node/containers/{live_id}"))
        .await;
    assert_eq!(live["container"]["state"], "RUNNING");
    assert_eq!(live["container"]["exitCode"], -1000);

    // Log listing and files.
    let (s, v) = nm
        .get_json(&format!("/ws/v1/node/containers/{done_id}/logs"))
        .await;
    assert_eq!(s, 200);
    let info = &v["containerLogsInfo"];
    assert_eq!(info["logAggregationType"], "LOCAL");
    assert_eq!(info["containerId"], done_id.to_string());
    assert_eq!(info["nodeId"], nm.node_id.to_string());
    let files = info["containerLogInfo"].as_array().unwrap();
    assert_eq!(files.len(), 2);
    assert_eq!(files[1]["fileName"], "stdout");
    assert_eq!(files[1]["fileSize"], "6");
    assert!(files[1]["lastModifiedTime"]
        .as_str()
        .unwrap()
        .contains("+0000"));

    for path in [
        format!("/ws/v1/node/containers/{done_id}/logs/stdout"),
        format!("/ws/v1/node/containerlogs/{done_id}/stdout"),
        format!("/node/containerlogs/{done_id}/alice/stdout"),
    ] {
        let r = nm
            .http
            .get(format!("{}{path}", nm.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
        let ct = r.headers()["content-type"].to_str().unwrap().to_string();
        assert!(ct.starts_with("text/plain"), "{ct}");
        assert_eq!(r.text().await.unwrap(), "hello\n");
    }
    assert_eq!(
        nm.get(&format!(
            "/ws/v1/node/containerlogs/{done_id}/stderr?size=-3"
        ))
        .await,
        (200, "ps\n".to_string())
    );
    let (s, v) = nm
        .get_json(&format!("/ws/v1/node/containerlogs/{done_id}/nosuchfile"))
        .await;
    assert_eq!(s, 404);
    assert_eq!(v["RemoteException"]["exception"], "NotFoundException");
    // Path tricks are refused.
    let (s, v) = nm
        .get_json(&format!(
            "/ws/v1/node/containerlogs/{done_id}/..%2F..%2Fetc%2Fpasswd"
        ))
        .await;
    assert_eq!(s, 400);
    assert_eq!(v["RemoteException"]["exception"], "BadRequestException");
    assert_eq!(
        raw_get(
            nm.addr,
            &format!("/ws/v1/node/containers/{done_id}/logs/..")
        )
        .await,
        400
    );
    assert_eq!(
        raw_get(nm.addr, &format!("/ws/v1/node/containerlogs/{done_id}/..")).await,
        400
    );

    // The UI page lists the files with links.
    let (s, html) = nm
        .get(&format!("/node/containerlogs/{done_id}/alice"))
        .await;
    assert_eq!(s, 200);
    assert!(
        html.contains(&format!(
            "href=\"/node/containerlogs/{done_id}/alice/stdout\""
        )),
        "{html}"
    );
    assert!(html.contains(">stderr</a>"), "{html}");

    // Metrics.
    let r = nm
        .http
        .get(format!("{}/metrics", nm.base))
        .send()
        .await
        .unwrap();
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    let m = r.text().await.unwrap();
    for line in [
        "spindle_nm_containers_launched_total 2",
        "spindle_nm_containers_completed_total 1",
        "spindle_nm_containers_running 1",
        "spindle_nm_allocated_memory_bytes 536870912",
        "spindle_nm_allocated_vcores 1",
        "spindle_nm_available_memory_bytes 3758096384",
    ] {
        assert!(m.lines().any(|l| l == line), "{line} missing from\n{m}");
    }

    // Logs stay readable after the container is stopped and the NM has stopped it.
    nm.stop_containers(vec![live_id]).await;
    rm.wait_state(&live_id, ContainerState::COMPLETE).await;
    let (s, _) = nm
        .get(&format!("/ws/v1/node/containers/{live_id}/logs/stdout"))
        .await;
    assert_eq!(s, 200);
    nm.stop().await.unwrap();
}
