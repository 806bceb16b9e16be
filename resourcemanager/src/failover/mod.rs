//! An HA ResourceManager: one listener whose answers depend on the RM's state.
//!
//! - **Standby** (at start, and after losing leadership): the configuration is loaded, the
//!   etcd elector watches the leader key and campaigns; `/ws/v1/cluster/info` answers with
//!   `haState: STANDBY`, every other call gets a 307 to the active's web address with the
//!   same path and query (YARN's `RMWebAppFilter`), or a 503 with `Retry-After: 1` while no
//!   RM is active.
//! - **Active** (won the election): recovers from the etcd store exactly as an RM restart
//!   recovers from SQLite ([`crate::daemon::assemble`]), with every store write fenced by
//!   the term, then serves the full REST router.
//! - **Stepping down** (lease not renewed in time, election key lost, or a fenced write):
//!   the full router is removed at once (no request reaches the old driver again), the
//!   driver is dropped, and the RM is a standby again in the same process and campaigns;
//!   it recovers from the store afresh if it wins. At shutdown the active resigns, so the
//!   standby takes over without waiting for the lease.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::Context;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use spindle_common::time::now_ms;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower::ServiceExt;
use tracing::info;

use crate::blobs::BlobStore;
use crate::config::ha::HaConfig;
use crate::config::RmConfig;
use crate::daemon::{BlobParts, Serve};
use crate::ha::control::{ControlInbox, HaControl};
use crate::ha::HaState;

mod election;

/// The path a standby answers itself.
const INFO_PATH: &str = "/ws/v1/cluster/info";
/// The HA admin paths, answered by every RM itself.
const HA_PATH: &str = "/ws/v1/ha/";
/// Other RMs' blob pushes ([`crate::rest::blob_replicas`]), answered by every RM itself.
const PEER_BLOBS_PATH: &str = "/ws/v1/ha/blobs/";
/// The metrics path: the active's series and the HA gauges; a standby's HA gauges alone.
const METRICS_PATH: &str = "/metrics";

async fn oneshot(router: Router, req: Request) -> Response {
    match router.oneshot(req).await {
        Ok(r) => r,
        Err(never) => match never {},
    }
}

/// `/metrics`: the active's series followed by the HA gauges, or the gauges alone on a
/// standby (YARN exempts `/jmx` and `/prom` from the standby's redirect likewise).
async fn metrics(front: &Front, req: Request) -> Response {
    let gauges = ha_gauges(&front.control);
    let Some(router) = front.current() else {
        return ([(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)], gauges).into_response();
    };
    let resp = oneshot(router, req).await;
    if !resp.status().is_success() {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => {
            let mut text = bytes.to_vec();
            text.extend_from_slice(gauges.as_bytes());
            Response::from_parts(parts, Body::from(text))
        }
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// The text exposition format's content type (as the active's `/metrics`).
const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `spindle_rm_ha_state` (1 active, 0 standby) and `spindle_rm_ha_election_connection_state`
/// (0 connecting, 1 connected, 2 disconnected), labelled with the RM's id.
fn ha_gauges(c: &HaControl) -> String {
    let id = &c.rm_id;
    let active = i64::from(c.state() == HaState::Active);
    let conn = c.connection();
    let (state, value) = (conn.as_str(), conn.gauge());
    [
        "# HELP spindle_rm_ha_state Whether this ResourceManager is the active one (1) or a standby (0).".to_string(),
        "# TYPE spindle_rm_ha_state gauge".to_string(),
        format!("spindle_rm_ha_state{{rm_id=\"{id}\"}} {active}"),
        "# HELP spindle_rm_ha_election_connection_state The leader election's connection to etcd: 0 connecting, 1 connected, 2 disconnected.".to_string(),
        "# TYPE spindle_rm_ha_election_connection_state gauge".to_string(),
        format!("spindle_rm_ha_election_connection_state{{rm_id=\"{id}\",state=\"{state}\"}} {value}"),
        String::new(),
    ]
    .join("\n")
}

/// What the listener serves now, shared by every request.
#[derive(Clone)]
struct Front {
    /// The active's router; None while standby.
    active: Arc<RwLock<Option<Router>>>,
    /// Who leads, as the elector last saw it.
    leader: watch::Receiver<Option<String>>,
    ha: Arc<HaConfig>,
    scheme: &'static str,
    started_on: u64,
    /// `haState` as the election loop last set it (with the router, in [`Front::set`]).
    state: Arc<watch::Sender<HaState>>,
    /// The manual transitions and the election's connection state.
    control: HaControl,
    /// `/ws/v1/ha/*` ([`crate::rest::ha_admin`]), answered in both states.
    admin: Router,
    /// `/ws/v1/ha/blobs/*` ([`crate::rest::blob_replicas`]), answered in both states.
    peer_blobs: Router,
}

impl Front {
    /// A standby's front for the RM `ha` names, receiving other RMs' blob pushes into
    /// `blobs`, with the inbox its election loop reads.
    fn new(
        conf: &RmConfig,
        ha: Arc<HaConfig>,
        leader: watch::Receiver<Option<String>>,
        blobs: Arc<BlobStore>,
    ) -> (Self, ControlInbox) {
        let (control, inbox) = HaControl::new(&ha.rm_id, ha.automatic_failover, leader.clone());
        let state = inbox.state.clone();
        let front = Front {
            active: Arc::new(RwLock::new(None)),
            leader,
            admin: crate::rest::ha_admin::routes(conf, control.clone(), ha.etcd.lease),
            peer_blobs: crate::rest::blob_replicas::routes(conf, blobs),
            ha,
            scheme: conf.http.scheme(),
            started_on: now_ms(),
            state,
            control,
        };
        (front, inbox)
    }

    fn set(&self, router: Option<Router>) {
        let state = if router.is_some() {
            HaState::Active
        } else {
            HaState::Standby
        };
        *self.active.write().unwrap_or_else(|p| p.into_inner()) = router;
        self.state.send_replace(state);
    }

    fn current(&self) -> Option<Router> {
        self.active
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

async fn route(State(front): State<Front>, req: Request) -> Response {
    let path = req.uri().path();
    if path.starts_with(PEER_BLOBS_PATH) {
        return oneshot(front.peer_blobs.clone(), req).await;
    }
    if path.starts_with(HA_PATH) {
        return oneshot(front.admin.clone(), req).await;
    }
    if path == METRICS_PATH {
        return metrics(&front, req).await;
    }
    if let Some(router) = front.current() {
        return oneshot(router, req).await;
    }
    if req.uri().path() == INFO_PATH {
        return Json(crate::rest::standby_info(
            front.started_on,
            front.started_on,
        ))
        .into_response();
    }
    let leader = front.leader.borrow().clone();
    match leader.filter(|id| *id != front.ha.rm_id) {
        Some(id) => {
            let target = front.ha.webapp.get(&id).cloned().unwrap_or_default();
            let pq = req
                .uri()
                .path_and_query()
                .map_or(req.uri().path(), |pq| pq.as_str());
            let location = format!("{}://{target}{pq}", front.scheme);
            Response::builder()
                .status(StatusCode::TEMPORARY_REDIRECT)
                .header(header::LOCATION, location)
                .body(Body::from(format!(
                    "This is the standby ResourceManager {}; the active is {id} at {target}\n",
                    front.ha.rm_id
                )))
                .unwrap_or_else(|_| StatusCode::TEMPORARY_REDIRECT.into_response())
        }
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "1")],
            format!(
                "This is the standby ResourceManager {}; no ResourceManager is active yet\n",
                front.ha.rm_id
            ),
        )
            .into_response(),
    }
}

/// Starts an HA RM on `listener` as a standby, with its election running; returns the
/// closure that serves HTTP until shutdown (and then resigns if active).
pub async fn start(listener: TcpListener, conf: RmConfig) -> anyhow::Result<Serve> {
    let addr = listener.local_addr().context("reading the bound address")?;
    crate::config::warn_unknown_keys(&conf.unknown_keys);
    let ha = Arc::new(conf.ha.clone().context("HA is not enabled")?);
    let conf = Arc::new(conf);
    let (leader_tx, leader) = watch::channel(None);
    let blobs = BlobParts::open(&conf)?;
    let (front, inbox) = Front::new(&conf, ha.clone(), leader, blobs.store.clone());
    let router = Router::new().fallback(route).with_state(front.clone());
    let (stop_tx, stop) = watch::channel(false);
    info!(rm_id = %ha.rm_id, "ResourceManager starting as STANDBY");
    let election = election::Election {
        conf: conf.clone(),
        addr,
        front,
        leader_tx,
        stop,
        requests: inbox.requests,
        connection: inbox.connection,
        blobs,
    };
    let elect = tokio::spawn(election.run());
    let http_conf = conf.http.clone();
    Ok(Box::new(move |shutdown| {
        Box::pin(async move {
            let served = spindle_rest_edge::serve::serve(listener, router, http_conf, shutdown)
                .await
                .context("serving HTTP");
            let _ = stop_tx.send(true);
            let _ = tokio::time::timeout(Duration::from_secs(5), elect).await;
            served
        })
    }))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use axum::http::Request as HttpRequest;
    use tempfile::TempDir;

    use super::*;
    use crate::ha::{EtcdEndpoints, EtcdKeys};

    fn front(leader: Option<&str>) -> (Router, watch::Sender<Option<String>>, TempDir) {
        let (r, tx, _inbox, dir) = front_with_inbox(leader);
        (r, tx, dir)
    }

    /// The front of `rm2`, its blob store in the returned directory.
    fn front_with_inbox(
        leader: Option<&str>,
    ) -> (Router, watch::Sender<Option<String>>, ControlInbox, TempDir) {
        let ha = HaConfig {
            rm_ids: vec!["rm1".into(), "rm2".into()],
            rm_id: "rm2".into(),
            automatic_failover: true,
            etcd: EtcdEndpoints {
                urls: vec!["http://127.0.0.1:1".into()],
                lease: Duration::from_secs(5),
            },
            keys: EtcdKeys::new("t").unwrap(),
            webapp: BTreeMap::from([
                ("rm1".into(), "h1:8088".into()),
                ("rm2".into(), "h2:8088".into()),
            ]),
        };
        let (tx, rx) = watch::channel(leader.map(str::to_string));
        let conf = RmConfig::from_conf(&spindle_common::config::Configuration::new()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut blobs = conf.blobs.clone();
        blobs.dir = dir.path().join("blobs");
        let store = Arc::new(BlobStore::open(blobs).unwrap());
        let (f, inbox) = Front::new(&conf, Arc::new(ha), rx, store);
        (Router::new().fallback(route).with_state(f), tx, inbox, dir)
    }

    async fn body_text(resp: Response) -> String {
        let b = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        String::from_utf8(b.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn a_standby_answers_ha_admin_and_metrics_itself() {
        let (r, _leader, mut inbox, _dir) = front_with_inbox(Some("rm1"));
        let state = call(&r, "GET", "/ws/v1/ha/state").await;
        assert_eq!(state.status(), StatusCode::OK);
        let v: serde_json::Value = serde_json::from_str(&body_text(state).await).unwrap();
        assert_eq!(v["haState"], "STANDBY");
        assert_eq!(v["rmId"], "rm2");
        assert_eq!(v["activeRmId"], "rm1");
        assert_eq!(v["connectionState"], "CONNECTING");
        let m = call(&r, "GET", "/metrics").await;
        assert_eq!(m.status(), StatusCode::OK);
        let text = body_text(m).await;
        assert!(
            text.contains("spindle_rm_ha_state{rm_id=\"rm2\"} 0"),
            "{text}"
        );
        assert!(
            text.contains(
                "spindle_rm_ha_election_connection_state{rm_id=\"rm2\",state=\"CONNECTING\"} 0"
            ),
            "{text}"
        );
        // Under automatic failover a transition needs forcemanual (409, YARN's words).
        let refused = call(&r, "POST", "/ws/v1/ha/transition-to-standby").await;
        assert_eq!(refused.status(), StatusCode::CONFLICT);
        assert!(body_text(refused).await.contains("--forcemanual"));
        // Forced, it reaches the election loop, whose answer is the call's.
        let answered = tokio::spawn(async move {
            let req = inbox.requests.recv().await.expect("a request");
            assert_eq!(req.transition, crate::ha::control::Transition::ToStandby);
            req.reply.send(Ok(())).ok();
            inbox
        });
        let forced = call(
            &r,
            "POST",
            "/ws/v1/ha/transition-to-standby?forcemanual=true",
        )
        .await;
        assert_eq!(forced.status(), StatusCode::OK);
        answered.await.unwrap();
        let wrong = call(&r, "GET", "/ws/v1/ha/transition-to-active").await;
        assert_eq!(wrong.status(), StatusCode::METHOD_NOT_ALLOWED);
    }

    async fn call(r: &Router, method: &str, uri: &str) -> Response {
        let req = HttpRequest::builder()
            .method(method)
            .uri(uri)
            .body(Body::empty())
            .unwrap();
        r.clone().oneshot(req).await.unwrap()
    }

    #[tokio::test]
    async fn a_standby_sends_the_web_ui_to_the_active() {
        let (r, _leader, _dir) = front(Some("rm1"));
        for uri in [
            "/ui",
            "/ui/apps/application_1_0001",
            "/ui/static/app.js",
            "/cluster",
            "/cluster/apps?state=RUNNING",
            "/",
        ] {
            let resp = call(&r, "GET", uri).await;
            assert_eq!(resp.status(), StatusCode::TEMPORARY_REDIRECT, "{uri}");
            assert_eq!(
                resp.headers()[header::LOCATION],
                format!("http://h1:8088{uri}").as_str(),
                "{uri}"
            );
        }
    }

    #[tokio::test]
    async fn a_standby_answers_cluster_info_and_redirects_the_rest_to_the_active() {
        let (r, leader, _dir) = front(Some("rm1"));
        let info = call(&r, "GET", "/ws/v1/cluster/info").await;
        assert_eq!(info.status(), StatusCode::OK);
        let body = axum::body::to_bytes(info.into_body(), 1 << 20)
            .await
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["clusterInfo"]["haState"], "STANDBY");
        for (method, uri) in [
            ("GET", "/ws/v1/cluster/apps?states=RUNNING"),
            ("POST", "/ws/v1/cluster/apps/new-application"),
            ("PUT", "/ws/v1/cluster/apps/application_1_0001/state"),
        ] {
            let resp = call(&r, method, uri).await;
            assert_eq!(resp.status(), StatusCode::TEMPORARY_REDIRECT, "{uri}");
            assert_eq!(
                resp.headers()[header::LOCATION],
                format!("http://h1:8088{uri}").as_str()
            );
        }
        // No active known (or only itself, stale): 503 with a retry hint, never a loop.
        for who in [None, Some("rm2".to_string())] {
            leader.send_replace(who);
            let resp = call(&r, "GET", "/ws/v1/cluster/apps").await;
            assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(resp.headers()[header::RETRY_AFTER], "1");
        }
    }
}
