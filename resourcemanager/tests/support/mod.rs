//! Test harness shared by the RM's integration tests: the RM in-process on an ephemeral port,
//! and a fake NodeManager at the network boundary that accepts the AM launches the RM sends.
//!
//! Not every test file uses every part (the contract test starts no NM).
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::routing::post;
use axum::{Json, Router};
use serde_json::Value;
use spindle_common::config::Configuration;
use spindle_common::records::node::{StartContainersRequest, StartContainersResponse};
use spindle_resourcemanager::config::RmConfig;
use spindle_test_support::contract::robust::REQUEST_TIMEOUT;

// ====================================================================== the RM

/// An RM serving on 127.0.0.1 with its state store in a temp dir of its own. Dropping it (or
/// [`Rm::shutdown`]) stops the server.
pub(crate) struct Rm {
    pub addr: SocketAddr,
    pub base: String,
    pub http: reqwest::Client,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    server: tokio::task::JoinHandle<anyhow::Result<()>>,
    _dir: tempfile::TempDir,
}

/// The RM the REST tests drive: containers from 128 MB, and `extra` on top.
pub(crate) async fn start_rm(extra: &[(&str, &str)]) -> Rm {
    let mut conf = Configuration::new();
    conf.set("yarn.scheduler.minimum-allocation-mb", "128");
    for (k, v) in extra {
        conf.set(k, v);
    }
    start_rm_with(conf).await
}

/// An RM with `conf` as given, plus a state store in a fresh temp dir unless `conf` names one.
pub(crate) async fn start_rm_with(mut conf: Configuration) -> Rm {
    let dir = tempfile::tempdir().expect("tempdir");
    let store_key = "spindle.resourcemanager.state-store.path";
    if conf.get(store_key).ok().flatten().is_none() {
        conf.set(
            store_key,
            &dir.path().join("rm.sqlite").display().to_string(),
        );
    }
    let rm_conf = RmConfig::from_conf(&conf).expect("config");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let (rm, serve) = spindle_resourcemanager::daemon::start(listener, rm_conf)
        .await
        .expect("start");
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(Box::pin(async move {
        let _ = rx.await;
    })));
    Rm {
        addr: rm.addr,
        base: format!("http://{}", rm.addr),
        http: reqwest::Client::builder()
            .no_proxy()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .expect("client"),
        stop: Some(tx),
        server,
        _dir: dir,
    }
}

impl Rm {
    /// GET `path`: the status and the JSON body (`null` when there is none).
    pub(crate) async fn get(&self, path: &str) -> (u16, Value) {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// Stops the server and waits (up to 10 s) for it to finish.
    pub(crate) async fn shutdown(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        let _ = tokio::time::timeout(Duration::from_secs(10), &mut self.server).await;
        self.server.abort();
    }
}

// ====================================================================== the fake NM

/// The start requests a [`fake_nm`] was sent, in order.
pub(crate) type Launches = Arc<Mutex<Vec<StartContainersRequest>>>;

/// A fake NM web server that accepts (and records) the start requests the RM sends it.
/// Returns its address (`host:port`, also its node id) and the record.
pub(crate) async fn fake_nm() -> (String, Launches) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let addr = serve_nm(move |req| s2.lock().expect("lock").push(req)).await;
    (addr, seen)
}

/// A fake NM web server whose start endpoint hands every request to `on_start` and accepts
/// it. Returns its address (`host:port`, also its node id).
pub(crate) async fn serve_nm(
    on_start: impl Fn(StartContainersRequest) + Clone + Send + Sync + 'static,
) -> String {
    let app = Router::new().route(
        "/ws/v1/node/containers/start",
        post(move |Json(req): Json<StartContainersRequest>| {
            let on_start = on_start.clone();
            async move {
                on_start(req);
                Json(StartContainersResponse::default())
            }
        }),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = l.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(l, app).await });
    addr.to_string()
}
