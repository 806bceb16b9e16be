//! Node-tracker authentication on an in-process RM with `spindle.cluster.secret-file` set:
//! register, heartbeat and unregister are accepted only with a valid `SpindleNode`
//! signature by the node the body names; every refusal is 401 `AuthorizationException` and
//! changes nothing (no node appears, none goes unhealthy, none leaves). A secret file that
//! cannot be loaded stops the RM's configuration with the property and the problem named.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{json, Value};
use spindle_common::cluster_secret::{random_nonce, ClusterSecret, MAX_CLOCK_SKEW_MS};
use spindle_common::config::Configuration;
use spindle_resourcemanager::config::RmConfig;
use support::{start_rm, Rm};

const KEY: &str = "spindle.cluster.secret-file";
const REGISTER: &str = "/ws/v1/node-tracker/register";
const HEARTBEAT: &str = "/ws/v1/node-tracker/heartbeat";
const UNREGISTER: &str = "/ws/v1/node-tracker/unregister";

fn register_body(node: &str) -> Value {
    json!({"nodeId": node, "httpAddress": node,
           "resource": {"memory": 4096, "vCores": 4}, "nmVersion": "t"})
}

fn heartbeat_body(node: &str, healthy: bool) -> Value {
    json!({"nodeId": node, "responseId": 0,
           "nodeStatus": {"healthy": healthy, "healthReport": if healthy { "" } else { "disk full" },
                          "containersStatuses": []}})
}

fn nonce() -> [u8; 16] {
    random_nonce().expect("random")
}

fn now_ms() -> u64 {
    spindle_common::time::now_ms()
}

/// Sends `body` to `path` with `auth` as the Authorization header (none when `None`).
async fn send(rm: &Rm, path: &str, body: &[u8], auth: Option<&str>) -> (u16, Value) {
    let mut req = rm
        .http
        .post(format!("{}{path}", rm.base))
        .header("content-type", "application/json")
        .body(body.to_vec());
    if let Some(a) = auth {
        req = req.header("authorization", a);
    }
    let r = req.send().await.expect("send");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// A call signed as `signer` with `secret`, over exactly the bytes sent.
async fn signed(
    rm: &Rm,
    secret: &ClusterSecret,
    signer: &str,
    path: &str,
    body: &Value,
) -> (u16, Value) {
    let bytes = serde_json::to_vec(body).unwrap();
    let h = secret.sign("POST", path, signer, &bytes, now_ms(), nonce());
    send(rm, path, &bytes, Some(&h)).await
}

fn assert_401(status: u16, body: &Value, part: &str) {
    assert_eq!(status, 401, "{body}");
    let re = &body["RemoteException"];
    assert_eq!(re["exception"], "AuthorizationException", "{body}");
    let msg = re["message"].as_str().unwrap_or_default();
    assert!(msg.contains(part), "'{part}' not in: {msg}");
}

/// Every node the RM lists, as (id, state, healthReport).
async fn nodes(rm: &Rm) -> Vec<(String, String, String)> {
    let (s, v) = rm.get("/ws/v1/cluster/nodes?states=NEW,RUNNING,UNHEALTHY,DECOMMISSIONED,LOST,REBOOTED,DECOMMISSIONING,SHUTDOWN").await;
    assert_eq!(s, 200, "{v}");
    let mut out: Vec<_> = v["nodes"]["node"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|n| {
            (
                n["id"].as_str().unwrap_or_default().to_string(),
                n["state"].as_str().unwrap_or_default().to_string(),
                n["healthReport"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

fn secret_file(dir: &Path, name: &str) -> (String, ClusterSecret) {
    let p = dir.join(name);
    ClusterSecret::generate_file(&p).expect("generate");
    (
        p.display().to_string(),
        ClusterSecret::load(&p).expect("load"),
    )
}

#[tokio::test]
async fn node_tracker_calls_need_the_cluster_secret() {
    let dir = tempfile::tempdir().unwrap();
    let (path, secret) = secret_file(dir.path(), "secret");
    let (_, other) = secret_file(dir.path(), "other");
    let rm = start_rm(&[(KEY, &path)]).await;
    let (a, b) = ("127.0.0.1:1", "127.0.0.1:2");

    // The real node registers and heartbeats with the secret.
    let (s, v) = signed(&rm, &secret, a, REGISTER, &register_body(a)).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["nodeAction"], "NORMAL", "{v}");
    let (s, v) = signed(&rm, &secret, a, HEARTBEAT, &heartbeat_body(a, true)).await;
    assert_eq!(s, 200, "{v}");
    let before = nodes(&rm).await;
    assert_eq!(before.len(), 1, "{before:?}");
    assert_eq!(before[0].1, "RUNNING", "{before:?}");

    // Each route, each way of not having the secret: 401, nothing changes.
    let calls = [
        (REGISTER, register_body(b)),
        (REGISTER, register_body(a)),
        (HEARTBEAT, heartbeat_body(a, false)),
        (UNREGISTER, json!({"nodeId": a})),
    ];
    for (route, body) in &calls {
        let bytes = serde_json::to_vec(body).unwrap();
        let node = body["nodeId"].as_str().unwrap();
        // No header at all.
        let (s, v) = send(&rm, route, &bytes, None).await;
        assert_401(s, &v, "no Authorization header");
        // A header of another scheme, and a garbled one.
        let (s, v) = send(&rm, route, &bytes, Some("Basic YWxpY2U6eA==")).await;
        assert_401(s, &v, "not a SpindleNode signature");
        let (s, v) = send(&rm, route, &bytes, Some("SpindleNode node=x")).await;
        assert_401(s, &v, "not a SpindleNode signature");
        // Signed with another secret.
        let (s, v) = signed(&rm, &other, node, route, body).await;
        assert_401(s, &v, "does not verify");
        // Signed by the real secret over other bytes (a tampered body).
        let h = secret.sign("POST", route, node, b"{}", now_ms(), nonce());
        let (s, v) = send(&rm, route, &bytes, Some(&h)).await;
        assert_401(s, &v, "does not verify");
        // Signed for another route.
        let h = secret.sign(
            "POST",
            "/ws/v1/node-tracker/other",
            node,
            &bytes,
            now_ms(),
            nonce(),
        );
        let (s, v) = send(&rm, route, &bytes, Some(&h)).await;
        assert_401(s, &v, "does not verify");
        // Dated outside the allowed skew.
        let old = now_ms() - MAX_CLOCK_SKEW_MS - 60_000;
        let h = secret.sign("POST", route, node, &bytes, old, nonce());
        let (s, v) = send(&rm, route, &bytes, Some(&h)).await;
        assert_401(s, &v, "more than");
        // A valid signature by one node speaking for another.
        let h = secret.sign("POST", route, "127.0.0.1:9", &bytes, now_ms(), nonce());
        let (s, v) = send(&rm, route, &bytes, Some(&h)).await;
        assert_401(s, &v, "speaks for node");
        assert!(
            v["RemoteException"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains(match *route {
                    REGISTER => "Register Node",
                    HEARTBEAT => "Node Heartbeat",
                    _ => "Unregister Node",
                }),
            "{v}"
        );
        assert_eq!(nodes(&rm).await, before, "after refused {route} {body}");
    }

    // A captured, accepted request sent again is refused as a replay.
    let bytes = serde_json::to_vec(&heartbeat_body(a, true)).unwrap();
    let h = secret.sign("POST", HEARTBEAT, a, &bytes, now_ms(), nonce());
    let (s, v) = send(&rm, HEARTBEAT, &bytes, Some(&h)).await;
    assert_eq!(s, 200, "{v}");
    let unreg = serde_json::to_vec(&json!({"nodeId": a})).unwrap();
    let (s, v) = send(&rm, HEARTBEAT, &bytes, Some(&h)).await;
    assert_401(s, &v, "already used");
    assert_eq!(nodes(&rm).await, before);

    // The real node may still unregister, once.
    let h = secret.sign("POST", UNREGISTER, a, &unreg, now_ms(), nonce());
    let (s, v) = send(&rm, UNREGISTER, &unreg, Some(&h)).await;
    assert_eq!(s, 200, "{v}");
    let after = nodes(&rm).await;
    assert_ne!(after[0].1, "RUNNING", "{after:?}");
    rm.shutdown().await;
}

#[tokio::test]
async fn without_the_key_node_tracker_calls_are_not_checked() {
    let rm = start_rm(&[]).await;
    let node = "127.0.0.1:3";
    let bytes = serde_json::to_vec(&register_body(node)).unwrap();
    let (s, v) = send(&rm, REGISTER, &bytes, None).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(nodes(&rm).await.len(), 1);
    rm.shutdown().await;
}

#[test]
fn a_secret_file_that_cannot_be_loaded_stops_the_rm_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let err = |path: &Path| {
        let mut c = Configuration::new();
        c.set(KEY, &path.display().to_string());
        RmConfig::from_conf(&c).unwrap_err().to_string()
    };
    let missing = dir.path().join("missing");
    let e = err(&missing);
    assert!(e.contains(KEY) && e.contains("no such file"), "{e}");
    assert!(e.contains(&missing.display().to_string()), "{e}");

    let loose = dir.path().join("loose");
    ClusterSecret::generate_file(&loose).unwrap();
    std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = err(&loose);
    assert!(e.contains("0644") && e.contains("0600"), "{e}");

    let short = dir.path().join("short");
    std::fs::write(&short, "abcd\n").unwrap();
    std::fs::set_permissions(&short, std::fs::Permissions::from_mode(0o600)).unwrap();
    let e = err(&short);
    assert!(e.contains("2 bytes"), "{e}");
    assert!(!e.contains('\n'), "one line: {e}");
}
