//! `spindle schedulerconf` (YARN's `yarn schedulerconf`): against a fake RM that records every
//! request (method, path, query, body) and answers as YARN's RM does, or refuses a change
//! with a `RemoteException`; then against a real RM in-process, where the change is applied,
//! shown by `-getconf`, and a misspelt property is refused with the closest known one.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{OriginalUri, State};
use axum::http::{header, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use serde_json::{json, Value};
use spindle_common::config::Configuration;
use spindle_common::records::exception::ExceptionKind;
use spindle_resourcemanager::config::RmConfig;

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
    let body_json: Option<Value> = serde_json::from_slice(&body).ok();
    lock(&s).push(Seen {
        method: method.clone(),
        path: path.clone(),
        query: uri.query().unwrap_or_default().to_string(),
        body: body_json.clone(),
    });
    match (method.as_str(), path.as_str()) {
        ("GET", "/ws/v1/cluster/scheduler-conf") => Json(json!({"property": [
            {"name": "yarn.scheduler.capacity.root.queues", "value": "a,b"},
            {"name": "yarn.scheduler.capacity.root.a.acl_submit_applications", "value": "alice ops&dev"},
        ]}))
        .into_response(),
        ("PUT", "/ws/v1/cluster/scheduler-conf") => {
            let removes_busy = body_json
                .as_ref()
                .map(|b| b["remove-queue"].to_string().contains("root.busy"))
                .unwrap_or(false);
            if removes_busy {
                let kind = ExceptionKind::BadRequest;
                let status =
                    StatusCode::from_u16(kind.status()).unwrap_or(StatusCode::BAD_REQUEST);
                return (
                    status,
                    Json(kind.body(
                        "Failed to re-init queues : root.busy is not a leaf queue in STOPPED state (queue root.busy, rule queue-removal-not-stopped)",
                    )),
                )
                    .into_response();
            }
            (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "text/plain")],
                "Configuration change successfully applied.",
            )
                .into_response()
        }
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn serve_fake() -> (Shared, String) {
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
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), out)
        .await
        .expect("spindle finishes in time")
        .expect("spindle runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn take(s: &Shared) -> Vec<Seen> {
    std::mem::take(&mut *lock(s))
}

#[tokio::test]
async fn schedulerconf_sends_yarns_mutation_and_prints_yarns_answers() {
    let (shared, addr) = serve_fake().await;

    let (code, out, err) = spindle(
        &[
            "schedulerconf",
            "-add",
            "root.a.a1:capacity=60,maximum-capacity=100;root.a.a2:capacity=40",
            "-update",
            "root.default:acl_administer_queue=user1\\,user2 group1\\,group2,state=",
            "-remove",
            "root.c;root.d",
            "-global",
            "yarn.scheduler.capacity.maximum-applications=5000",
        ],
        &addr,
    )
    .await;
    assert_eq!(
        (code, out.as_str()),
        (0, "Configuration changed successfully.\n"),
        "{err}"
    );
    let seen = take(&shared);
    assert_eq!(seen.len(), 1, "{seen:#?}");
    let r = &seen[0];
    assert_eq!(
        (&r.method, r.path.as_str(), r.query.as_str()),
        (
            &Method::PUT,
            "/ws/v1/cluster/scheduler-conf",
            "user.name=admin"
        )
    );
    let entry = |k: &str, v: Option<&str>| json!({"key": k, "value": v});
    assert_eq!(
        r.body,
        Some(json!({
            "add-queue": [
                {"queue-name": "root.a.a1", "params": {"entry": [
                    entry("capacity", Some("60")), entry("maximum-capacity", Some("100"))]}},
                {"queue-name": "root.a.a2", "params": {"entry": [entry("capacity", Some("40"))]}},
            ],
            "update-queue": [
                {"queue-name": "root.default", "params": {"entry": [
                    entry("acl_administer_queue", Some("user1,user2 group1,group2")),
                    entry("state", None)]}},
            ],
            "remove-queue": ["root.c", "root.d"],
            "global-updates": {"entry": [
                entry("yarn.scheduler.capacity.maximum-applications", Some("5000"))]},
        }))
    );

    // The RM's refusal, in SchedConfCLI's words, exit 255 (YARN's -1).
    let (code, out, err) = spindle(&["schedulerconf", "-remove", "root.busy"], &addr).await;
    assert_eq!((code, out.as_str()), (255, ""), "{err}");
    assert_eq!(
        err.trim(),
        "Configuration change unsuccessful: Failed to re-init queues : root.busy is not a leaf queue in STOPPED state (queue root.busy, rule queue-removal-not-stopped)"
    );
    assert_eq!(take(&shared).len(), 1);

    // -getconf: YARN's ConfInfo XML.
    let (code, out, err) = spindle(&["schedulerconf", "-getconf"], &addr).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<configuration>\n  <property>\n    <name>yarn.scheduler.capacity.root.queues</name>\n    <value>a,b</value>\n  </property>\n  <property>\n    <name>yarn.scheduler.capacity.root.a.acl_submit_applications</name>\n    <value>alice ops&amp;dev</value>\n  </property>\n</configuration>\n"
    );
    let seen = take(&shared);
    assert_eq!(
        (seen[0].method.clone(), seen[0].path.as_str()),
        (Method::GET, "/ws/v1/cluster/scheduler-conf")
    );

    // A misspelt property is refused before anything is sent, with the closest known one;
    // so are bad syntax, -format (no REST counterpart) and no command at all.
    let (code, _, err) = spindle(
        &["schedulerconf", "-update", "root.a:maximum-capacty=80"],
        &addr,
    )
    .await;
    assert_eq!(code, 255, "{err}");
    assert!(
        err.contains(
            "Unknown property 'maximum-capacty' for queue root.a; did you mean 'maximum-capacity'?"
        ),
        "{err}"
    );
    for bad in [
        &["schedulerconf", "-update", "root.a:capacity"][..],
        &["schedulerconf", "-format"],
        &["schedulerconf"],
        &["schedulerconf", "-getconf", "-remove", "root.c"],
    ] {
        let (code, _, err) = spindle(bad, &addr).await;
        assert_eq!(code, 255, "{bad:?}: {err}");
        assert!(err.contains("usage: spindle schedulerconf"), "{err}");
    }
    assert!(take(&shared).is_empty());
}

/// A real RM, in-process on an ephemeral port.
async fn start_rm(
    store: &std::path::Path,
) -> (String, tokio::task::JoinHandle<anyhow::Result<()>>) {
    let mut conf = Configuration::new();
    let cs = "yarn.scheduler.capacity.";
    let store = store.display().to_string();
    for (k, v) in [
        (
            "spindle.resourcemanager.state-store.path".to_string(),
            store.as_str(),
        ),
        ("yarn.scheduler.minimum-allocation-mb".to_string(), "128"),
        (format!("{cs}root.queues"), "a,b"),
        (format!("{cs}root.a.capacity"), "70"),
        (format!("{cs}root.b.capacity"), "30"),
    ] {
        conf.set(&k, v);
    }
    let rm_conf = RmConfig::from_conf(&conf).expect("config");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let (rm, serve) = spindle_resourcemanager::daemon::start(listener, rm_conf)
        .await
        .expect("start");
    let server = tokio::spawn(serve(Box::pin(std::future::pending())));
    (rm.addr.to_string(), server)
}

#[tokio::test]
async fn schedulerconf_against_a_real_rm() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (addr, server) = start_rm(&dir.path().join("rm.sqlite")).await;

    let (code, out, err) = spindle(
        &[
            "schedulerconf",
            "-update",
            "root.a:capacity=60;root.b:capacity=30",
            "-add",
            "root.c:capacity=10,maximum-capacity=20",
        ],
        &addr,
    )
    .await;
    // YARN's line, then what changed, a property a line (root.b stays at 30).
    assert_eq!(
        (code, out.as_str()),
        (
            0,
            "Configuration changed successfully.\n  root.a.capacity: 70 -> 60\n  root.c.capacity: added (10)\n  root.c.maximum-capacity: added (20)\n  root.queues: a,b -> a,b,c\n"
        ),
        "{err}"
    );
    let (code, out, err) = spindle(&["schedulerconf", "-getconf"], &addr).await;
    assert_eq!(code, 0, "{err}");
    for want in [
        "<name>yarn.scheduler.capacity.root.queues</name>\n    <value>a,b,c</value>",
        "<name>yarn.scheduler.capacity.root.c.maximum-capacity</name>\n    <value>20</value>",
        "<name>yarn.scheduler.capacity.root.a.capacity</name>\n    <value>60</value>",
    ] {
        assert!(out.contains(want), "{want}\n{out}");
    }

    // A change the RM's rules refuse: its message, nothing applied.
    let (code, _, err) = spindle(&["schedulerconf", "-update", "root.a:capacity=-60"], &addr).await;
    assert_eq!(code, 255, "{err}");
    assert!(
        err.starts_with("Configuration change unsuccessful: Failed to re-init queues : Illegal capacity of -60 for queue root.a"),
        "{err}"
    );
    let (_, out, _) = spindle(&["schedulerconf", "-getconf"], &addr).await;
    assert!(
        out.contains("<name>yarn.scheduler.capacity.root.a.capacity</name>\n    <value>60</value>"),
        "{out}"
    );
    server.abort();
}
