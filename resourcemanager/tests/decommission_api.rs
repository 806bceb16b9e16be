//! `POST /ws/v1/cluster/refresh-nodes` and `GET /ws/v1/cluster/users/{user}/groups` on an
//! in-process RM: the admin check, the query's words, a missing file named, a decommissioned
//! node told SHUTDOWN at its heartbeat and at a new registration, recommission, and groups.

mod support;

use reqwest::Method;
use serde_json::{json, Value};
use support::{start_rm, Rm};

async fn send(rm: &Rm, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut req = rm.http.request(method, format!("{}{path}", rm.base));
    if let Some(b) = body {
        req = req.json(&b);
    }
    let r = req.send().await.expect("send");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn register(rm: &Rm, node: &str) -> Value {
    let (s, v) = send(
        rm,
        Method::POST,
        "/ws/v1/node-tracker/register",
        Some(json!({"nodeId": node, "httpAddress": node,
                    "resource": {"memory": 4096, "vCores": 4}, "nmVersion": "t"})),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    v
}

async fn heartbeat(rm: &Rm, node: &str) -> Value {
    let (s, v) = send(
        rm,
        Method::POST,
        "/ws/v1/node-tracker/heartbeat",
        Some(json!({"nodeId": node, "responseId": 0,
                    "nodeStatus": {"healthy": true, "healthReport": "", "containersStatuses": []}})),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    v
}

async fn state(rm: &Rm, node: &str) -> String {
    let (_, v) = rm.get(&format!("/ws/v1/cluster/nodes/{node}")).await;
    v["node"]["state"].as_str().unwrap_or_default().to_string()
}

fn refused(status: u16, body: &Value, exception: &str, part: &str) {
    let re = &body["RemoteException"];
    assert_eq!(re["exception"], exception, "{status} {body}");
    let msg = re["message"].as_str().unwrap_or_default();
    assert!(msg.contains(part), "'{part}' not in: {msg}");
}

#[tokio::test]
async fn refresh_nodes_over_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exclude = dir.path().join("exclude");
    std::fs::write(&exclude, "").expect("exclude");
    let path = exclude.display().to_string();
    let rm = start_rm(&[
        ("yarn.acl.enable", "true"),
        ("yarn.admin.acl", "admin"),
        ("yarn.resourcemanager.nodes.exclude-path", &path),
        (
            "hadoop.user.group.static.mapping.overrides",
            "dr.who=;admin=;bob=devs,ops;",
        ),
    ])
    .await;
    let (h1, h2) = ("127.0.0.1:1", "127.0.0.1:2");
    register(&rm, h1).await;
    register(&rm, h2).await;

    // Admins only, before any file is read.
    std::fs::write(&exclude, format!("{h1}\n")).expect("exclude h1");
    let (s, v) = send(
        &rm,
        Method::POST,
        "/ws/v1/cluster/refresh-nodes?user.name=bob",
        None,
    )
    .await;
    assert_eq!(s, 403, "{v}");
    refused(s, &v, "ForbiddenException", "Only admins");
    assert_eq!(state(&rm, h1).await, "RUNNING");

    // Bad words are 400s naming them.
    for (q, part) in [
        ("decommissionType=SOON", "decommissionType `SOON`"),
        (
            "decommissionType=GRACEFUL&decommissionTimeout=1h",
            "decommissionTimeout `1h`",
        ),
        (
            "decommissionTimeout=30",
            "goes with decommissionType=GRACEFUL",
        ),
    ] {
        let (s, v) = send(
            &rm,
            Method::POST,
            &format!("/ws/v1/cluster/refresh-nodes?user.name=admin&{q}"),
            None,
        )
        .await;
        assert_eq!(s, 400, "{q}: {v}");
        refused(s, &v, "BadRequestException", part);
    }
    assert_eq!(state(&rm, h1).await, "RUNNING");

    // Graceful on an empty node: drained already, so DECOMMISSIONED at once.
    let (s, v) = send(
        &rm,
        Method::POST,
        "/ws/v1/cluster/refresh-nodes?user.name=admin&decommissionType=GRACEFUL&decommissionTimeout=60",
        None,
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        v,
        json!({"decommissioned": [h1], "decommissioning": [], "recommissioned": []})
    );
    assert_eq!(state(&rm, h1).await, "DECOMMISSIONED");
    assert_eq!(state(&rm, h2).await, "RUNNING");
    let (_, m) = rm.get("/ws/v1/cluster/metrics").await;
    assert_eq!(m["clusterMetrics"]["decommissionedNodes"], 1, "{m}");
    let text = rm
        .http
        .get(format!("{}/metrics", rm.base))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        text.contains("\nspindle_rm_nodes_decommissioned 1\n"),
        "{text}"
    );
    assert!(
        text.contains("\nspindle_rm_nodes_decommissioning 0\n"),
        "{text}"
    );

    // Its NM is told to shut down, at a heartbeat and at a new registration.
    let hb = heartbeat(&rm, h1).await;
    assert_eq!(hb["nodeAction"], "SHUTDOWN", "{hb}");
    assert!(
        hb["diagnosticsMessage"]
            .as_str()
            .is_some_and(|d| d.contains("Disallowed NodeManager")),
        "{hb}"
    );
    let reg = register(&rm, h1).await;
    assert_eq!(reg["nodeAction"], "SHUTDOWN", "{reg}");
    assert!(
        reg["diagnosticsMessage"]
            .as_str()
            .is_some_and(|d| d.contains("exclude list")),
        "{reg}"
    );
    assert_eq!(heartbeat(&rm, h2).await["nodeAction"], "NORMAL");

    // Off the list, it may join again.
    std::fs::write(&exclude, "# nothing\n").expect("exclude none");
    let (s, v) = send(
        &rm,
        Method::POST,
        "/ws/v1/cluster/refresh-nodes?user.name=admin",
        None,
    )
    .await;
    assert_eq!(s, 200, "{v}");
    let reg = register(&rm, h1).await;
    assert_eq!(reg["nodeAction"], "NORMAL", "{reg}");
    assert_eq!(state(&rm, h1).await, "RUNNING");

    // A missing file: a 400 naming it and the key, and nothing changes.
    std::fs::remove_file(&exclude).expect("rm exclude");
    let (s, v) = send(
        &rm,
        Method::POST,
        "/ws/v1/cluster/refresh-nodes?user.name=admin&decommissionType=FORCEFUL",
        None,
    )
    .await;
    assert_eq!(s, 400, "{v}");
    refused(s, &v, "BadRequestException", &path);
    refused(
        s,
        &v,
        "BadRequestException",
        "yarn.resourcemanager.nodes.exclude-path",
    );
    assert_eq!(state(&rm, h1).await, "RUNNING");

    // Groups, as the RM resolves them; anyone may ask.
    let (s, v) = rm.get("/ws/v1/cluster/users/bob/groups").await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v, json!({"user": "bob", "groups": ["devs", "ops"]}));
    let (_, v) = rm
        .get("/ws/v1/cluster/users/no-such-user-spindle/groups")
        .await;
    assert_eq!(v["groups"], json!([]));
}
