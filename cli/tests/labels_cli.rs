//! Node labels and node attributes from the client side: `spindle rmadmin` label commands,
//! `spindle nodeattributes`, `spindle cluster -lnl/-lna` and the SDK's `RmClient` methods
//! against a fake RM that records every request (method, path, query, body) and answers
//! YARN's bodies, or a `RemoteException` for the node it is told to refuse.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{OriginalUri, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use serde_json::{json, Value};
use spindle_appmaster_sdk::{RmAddress, RmClient};
use spindle_common::records::exception::ExceptionKind;
use spindle_common::records::labels::{
    AttributeMappingOperation, NodeAttributeInfo, NodeLabelInfo, NodeToAttributes,
    NodeToLabelsEntry, NodeToLabelsEntryList, NodesToAttributesMappingRequest,
};

/// One request as the fake saw it.
#[derive(Debug, Clone)]
struct Seen {
    method: Method,
    path: String,
    query: String,
    body: Option<Value>,
}

type Shared = Arc<Mutex<Vec<Seen>>>;

fn lock(s: &Shared) -> std::sync::MutexGuard<'_, Vec<Seen>> {
    s.lock().unwrap_or_else(|p| p.into_inner())
}

async fn any(
    State(s): State<Shared>,
    method: Method,
    OriginalUri(uri): OriginalUri,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let query = uri.query().unwrap_or_default().to_string();
    let body_json: Option<Value> = serde_json::from_slice(&body).ok();
    lock(&s).push(Seen {
        method: method.clone(),
        path: path.clone(),
        query: query.clone(),
        body: body_json.clone(),
    });
    let refuse = |msg: &str| {
        let kind = ExceptionKind::BadRequest;
        let status = StatusCode::from_u16(kind.status()).unwrap_or(StatusCode::BAD_REQUEST);
        (status, Json(kind.body(msg))).into_response()
    };
    let Some(p) = path.strip_prefix("/ws/v1/cluster/") else {
        return StatusCode::NOT_FOUND.into_response();
    };
    match (method.as_str(), p) {
        ("GET", "get-node-labels") => Json(json!({"nodeLabelsInfo": {"nodeLabelInfo": [
            {"name": "h100", "exclusivity": true},
            {"name": "ib", "exclusivity": false},
        ]}}))
        .into_response(),
        ("GET", "get-node-to-labels") => Json(json!({"nodeToLabels": {
            "h1:8041": {"nodeLabelInfo": [{"name": "h100", "exclusivity": true}]},
        }}))
        .into_response(),
        ("GET", "label-mappings") => Json(json!({"labelsToNodes": {
            "h100": {"nodeId": ["h1:8041"], "exclusivity": true},
        }}))
        .into_response(),
        ("GET", "nodes/h1:8041/get-labels") => {
            Json(json!({"nodeLabelInfo": [{"name": "h100", "exclusivity": true}]})).into_response()
        }
        ("GET", "get-node-attributes") => Json(json!({"nodeAttributeInfo": [
            {"prefix": "rm.yarn.io", "name": "os", "type": "STRING", "value": ""},
            {"prefix": "nm.yarn.io", "name": "gpu-count", "type": "STRING", "value": ""},
        ]}))
        .into_response(),
        ("GET", "get-attributes-to-nodes") => Json(json!({"attributesToNodes": {
            "rm.yarn.io/os": [{"hostname": "h1", "attributeValue": "ubuntu"}],
        }}))
        .into_response(),
        ("GET", "get-node-to-attributes") => Json(json!({"nodeToAttributes": {
            "h1": [{"prefix": "rm.yarn.io", "name": "os", "type": "STRING", "value": "ubuntu"}],
        }}))
        .into_response(),
        ("POST", "replace-node-to-labels") => {
            let unknown = body_json
                .as_ref()
                .and_then(|b| b["nodeToLabels"].as_array().cloned())
                .unwrap_or_default()
                .iter()
                .any(|e| e["nodeId"] == "ghost");
            if unknown {
                refuse("Node ghost is not known to the ResourceManager")
            } else {
                StatusCode::OK.into_response()
            }
        }
        ("POST", "remove-node-labels") if query.contains("labels=busy") => {
            refuse("Cannot remove label busy: queue root.gpu still uses it")
        }
        ("POST", "add-node-labels")
        | ("POST", "remove-node-labels")
        | ("POST", "node-attributes-mapping")
        | ("POST", "nodes/h1:8041/replace-labels") => StatusCode::OK.into_response(),
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn serve() -> (Shared, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let shared: Shared = Arc::default();
    let router = Router::new().fallback(any).with_state(shared.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (shared, addr)
}

async fn spindle(args: &[&str], addr: &str) -> (i32, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_spindle"))
        .args(args)
        .args(["--rm-address", addr])
        .env_remove("SPINDLE_RM_ADDRESS")
        .env("USER", "admin")
        .output()
        .await
        .expect("spindle runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The requests since the last call (and forgets them).
fn take(s: &Shared) -> Vec<Seen> {
    std::mem::take(&mut *lock(s))
}

fn one(s: &Shared) -> Seen {
    let mut seen = take(s);
    assert_eq!(seen.len(), 1, "{seen:#?}");
    seen.remove(0)
}

#[tokio::test]
async fn rmadmin_label_commands_send_yarns_requests() {
    let (shared, addr) = serve().await;

    let (code, out, err) = spindle(
        &[
            "rmadmin",
            "-addToClusterNodeLabels",
            "h100(exclusive=true),ib(exclusive=false),x",
        ],
        &addr,
    )
    .await;
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    let r = one(&shared);
    assert_eq!(r.method, Method::POST);
    assert_eq!(r.path, "/ws/v1/cluster/add-node-labels");
    assert_eq!(r.query, "user.name=admin");
    assert_eq!(
        r.body,
        Some(json!({"nodeLabelsInfo": {"nodeLabelInfo": [
            {"name": "h100", "exclusivity": true},
            {"name": "ib", "exclusivity": false},
            {"name": "x", "exclusivity": true},
        ]}}))
    );

    let (code, _, err) = spindle(&["rmadmin", "-removeFromClusterNodeLabels", "a, b"], &addr).await;
    assert_eq!(code, 0, "{err}");
    let r = one(&shared);
    assert_eq!(
        (r.method, r.path.as_str(), r.query.as_str()),
        (
            Method::POST,
            "/ws/v1/cluster/remove-node-labels",
            "user.name=admin&labels=a&labels=b"
        )
    );

    let (code, _, err) = spindle(
        &[
            "rmadmin",
            "-replaceLabelsOnNode",
            "h1:8041=h100 h2=ib,h3=",
            "-failOnUnknownNodes",
        ],
        &addr,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let r = one(&shared);
    assert_eq!(r.path, "/ws/v1/cluster/replace-node-to-labels");
    assert_eq!(r.query, "user.name=admin");
    assert_eq!(
        r.body,
        Some(json!({
            "nodeToLabels": [
                {"nodeId": "h1:8041", "labels": ["h100"]},
                {"nodeId": "h2", "labels": ["ib"]},
                {"nodeId": "h3", "labels": []},
            ],
            "failOnUnknownNodes": true,
        }))
    );

    // The RM's refusal: `<command>: <message>` on stderr, exit 255 (YARN's -1).
    let (code, _, err) = spindle(&["rmadmin", "-replaceLabelsOnNode", "ghost=h100"], &addr).await;
    assert_eq!(code, 255);
    assert_eq!(
        err.trim(),
        "replaceLabelsOnNode: Node ghost is not known to the ResourceManager"
    );
    take(&shared);
    let (code, _, err) = spindle(&["rmadmin", "-removeFromClusterNodeLabels", "busy"], &addr).await;
    assert_eq!(code, 255);
    assert_eq!(
        err.trim(),
        "removeFromClusterNodeLabels: Cannot remove label busy: queue root.gpu still uses it"
    );
    take(&shared);

    // Syntax mistakes are usage errors, named before any call.
    for bad in [
        &[
            "rmadmin",
            "-addToClusterNodeLabels",
            "h100(exclusive=maybe)",
        ][..],
        &["rmadmin", "-replaceLabelsOnNode", "h1=a,b"],
        &["rmadmin", "-refreshQueues", "-addToClusterNodeLabels", "x"],
    ] {
        let (code, _, err) = spindle(bad, &addr).await;
        assert_eq!(code, 255, "{bad:?}");
        assert!(err.starts_with("error: "), "{err}");
        assert!(err.contains("usage: spindle rmadmin"), "{err}");
    }
    assert!(take(&shared).is_empty());
}

#[tokio::test]
async fn nodeattributes_commands_send_yarns_requests_and_print_tables() {
    let (shared, addr) = serve().await;

    let (code, out, err) = spindle(
        &[
            "nodeattributes",
            "-add",
            "h1:os(STRING)=ubuntu,py=3 h2:rm.yarn.io/java=17",
            "-failOnUnknownNodes",
        ],
        &addr,
    )
    .await;
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    let r = one(&shared);
    assert_eq!(r.method, Method::POST);
    assert_eq!(r.path, "/ws/v1/cluster/node-attributes-mapping");
    assert_eq!(r.query, "user.name=admin");
    let attr = |name: &str, value: &str| json!({"prefix": "rm.yarn.io", "name": name, "type": "STRING", "value": value});
    assert_eq!(
        r.body,
        Some(json!({
            "operation": "ADD",
            "nodesToAttributes": [
                {"node": "h1", "nodeAttributes": [attr("os", "ubuntu"), attr("py", "3")]},
                {"node": "h2", "nodeAttributes": [attr("java", "17")]},
            ],
            "failOnUnknownNodes": true,
        }))
    );

    let (code, _, err) = spindle(&["nodeattributes", "-replace", "h1:os=rhel h2:"], &addr).await;
    assert_eq!(code, 0, "{err}");
    let r = one(&shared);
    assert_eq!(
        r.body,
        Some(json!({
            "operation": "REPLACE",
            "nodesToAttributes": [
                {"node": "h1", "nodeAttributes": [attr("os", "rhel")]},
                {"node": "h2", "nodeAttributes": []},
            ],
            "failOnUnknownNodes": false,
        }))
    );

    let (code, _, err) = spindle(&["nodeattributes", "-remove", "h1:os,py"], &addr).await;
    assert_eq!(code, 0, "{err}");
    let r = one(&shared);
    assert_eq!(
        r.body.as_ref().map(|b| b["operation"].clone()),
        Some(json!("REMOVE"))
    );

    // nm.yarn.io/ is refused before any call.
    let (code, _, err) = spindle(
        &["nodeattributes", "-add", "h1:nm.yarn.io/gpu-count=8"],
        &addr,
    )
    .await;
    assert_eq!(code, 255);
    assert!(err.contains("is a NodeManager attribute"), "{err}");
    assert!(take(&shared).is_empty());

    let (code, out, err) = spindle(&["nodeattributes", "-list"], &addr).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        format!(
            "{:>40}\t{:>20}\n{:>40}\t{:>20}\n{:>40}\t{:>20}\n",
            "Attribute", "Type", "rm.yarn.io/os", "STRING", "nm.yarn.io/gpu-count", "STRING"
        )
    );
    assert_eq!(one(&shared).path, "/ws/v1/cluster/get-node-attributes");

    let (code, out, err) = spindle(
        &[
            "nodeattributes",
            "-attributestonodes",
            "-attributes",
            "os,nm.yarn.io/gpu-count",
        ],
        &addr,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        format!(
            "rm.yarn.io/os :\n{:>40}\t{:>20}\n{:>40}\t{:>20}\n",
            "Hostname", "Attribute-value", "h1", "ubuntu"
        )
    );
    let r = one(&shared);
    assert_eq!(r.path, "/ws/v1/cluster/get-attributes-to-nodes");
    assert_eq!(
        r.query,
        "attributes=rm.yarn.io%2Fos%2Cnm.yarn.io%2Fgpu-count"
    );

    let (code, out, err) = spindle(
        &["nodeattributes", "-nodestoattributes", "-nodes", "h1,h2"],
        &addr,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        format!(
            "{:>40}\tNode-attributes\n{:>40}\trm.yarn.io/os(STRING)=ubuntu\n",
            "Hostname", "h1"
        )
    );
    let r = one(&shared);
    assert_eq!(r.path, "/ws/v1/cluster/get-node-to-attributes");
    assert_eq!(r.query, "hostnames=h1%2Ch2");
}

#[tokio::test]
async fn cluster_lists_labels_and_attributes() {
    let (shared, addr) = serve().await;
    let (code, out, err) = spindle(&["cluster", "-lnl"], &addr).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "Node Labels: <h100:exclusivity=true>,<ib:exclusivity=false>\n"
    );
    let r = one(&shared);
    assert_eq!(
        (r.method, r.path.as_str(), r.query.as_str()),
        (Method::GET, "/ws/v1/cluster/get-node-labels", "")
    );
    let (code, out, err) = spindle(&["cluster", "--list-node-attributes"], &addr).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "rm.yarn.io/os(STRING)\nnm.yarn.io/gpu-count(STRING)\n");
    let (code, _, err) = spindle(&["cluster"], &addr).await;
    assert_eq!(code, 255, "{err}");
}

#[tokio::test]
async fn rm_client_label_and_attribute_methods() {
    let (shared, addr) = serve().await;
    let rm = RmClient::new(&RmAddress::parse(&addr).expect("address"))
        .expect("client")
        .with_user("admin");

    let labels = rm.node_labels().await.expect("labels");
    assert_eq!(
        labels,
        vec![
            NodeLabelInfo {
                name: "h100".into(),
                exclusivity: true
            },
            NodeLabelInfo {
                name: "ib".into(),
                exclusivity: false
            },
        ]
    );
    let n2l = rm.node_to_labels().await.expect("node to labels");
    assert_eq!(
        n2l.node_to_labels["h1:8041"].node_label_info[0].name,
        "h100"
    );
    let l2n = rm
        .labels_to_nodes(&["h100".into(), "ib".into()])
        .await
        .expect("label mappings");
    assert_eq!(l2n.labels_to_nodes["h100"].node_id, vec!["h1:8041"]);
    let of = rm.labels_of_node("h1:8041").await.expect("node's labels");
    assert_eq!(of[0].name, "h100");
    rm.replace_labels_on_node("h1:8041", &["h100".into()])
        .await
        .expect("replace on node");
    let attrs = rm.node_attributes().await.expect("attributes");
    assert_eq!(attrs.node_attribute_info.len(), 2);
    let a2n = rm.attributes_to_nodes(&[]).await.expect("all attributes");
    assert_eq!(a2n.attributes_to_nodes["rm.yarn.io/os"][0].hostname, "h1");
    let n2a = rm.node_to_attributes(&[]).await.expect("all nodes");
    assert_eq!(n2a.node_to_attributes["h1"][0].value, "ubuntu");
    rm.replace_node_to_labels(&NodeToLabelsEntryList {
        node_to_labels: vec![NodeToLabelsEntry {
            node_id: "h2".into(),
            labels: vec![],
        }],
        fail_on_unknown_nodes: false,
    })
    .await
    .expect("replace");
    rm.map_node_attributes(&NodesToAttributesMappingRequest {
        operation: AttributeMappingOperation::REMOVE,
        nodes_to_attributes: vec![NodeToAttributes {
            node: "h1".into(),
            node_attributes: vec![NodeAttributeInfo {
                prefix: "rm.yarn.io".into(),
                name: "os".into(),
                attribute_type: "STRING".into(),
                value: String::new(),
            }],
        }],
        fail_on_unknown_nodes: false,
    })
    .await
    .expect("mapping");
    let e = rm
        .remove_node_labels(&["busy".into()])
        .await
        .expect_err("refused");
    assert_eq!(e.status(), Some(400));
    assert_eq!(
        e.remote_exception().map(|r| r.message),
        Some("Cannot remove label busy: queue root.gpu still uses it".to_string())
    );

    let seen: Vec<(String, String, String)> = take(&shared)
        .into_iter()
        .map(|s| (s.method.to_string(), s.path, s.query))
        .collect();
    let c = |p: &str| format!("/ws/v1/cluster/{p}");
    let want: Vec<(String, String, String)> = [
        ("GET", c("get-node-labels"), ""),
        ("GET", c("get-node-to-labels"), ""),
        ("GET", c("label-mappings"), "labels=h100&labels=ib"),
        ("GET", c("nodes/h1:8041/get-labels"), ""),
        (
            "POST",
            c("nodes/h1:8041/replace-labels"),
            "user.name=admin&labels=h100",
        ),
        ("GET", c("get-node-attributes"), ""),
        ("GET", c("get-attributes-to-nodes"), ""),
        ("GET", c("get-node-to-attributes"), ""),
        ("POST", c("replace-node-to-labels"), "user.name=admin"),
        ("POST", c("node-attributes-mapping"), "user.name=admin"),
        (
            "POST",
            c("remove-node-labels"),
            "user.name=admin&labels=busy",
        ),
    ]
    .into_iter()
    .map(|(m, p, q)| (m.to_string(), p, q.to_string()))
    .collect();
    assert_eq!(seen, want);
}
