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

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

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
use tracing::{error, info, warn};

use crate::config::ha::HaConfig;
use crate::config::RmConfig;
use crate::daemon::{assemble, Serve, StoreKind};
use crate::driver::DriverHandle;
use crate::ha::{EtcdElector, HaState, LeaderElector, Leadership};
use crate::store::EtcdStore;

/// The path a standby answers itself.
const INFO_PATH: &str = "/ws/v1/cluster/info";

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
}

impl Front {
    fn set(&self, router: Option<Router>) {
        *self.active.write().unwrap_or_else(|p| p.into_inner()) = router;
    }

    fn current(&self) -> Option<Router> {
        self.active
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn state(&self) -> HaState {
        if self.current().is_some() {
            HaState::Active
        } else {
            HaState::Standby
        }
    }
}

async fn route(State(front): State<Front>, req: Request) -> Response {
    if let Some(router) = front.current() {
        return match router.oneshot(req).await {
            Ok(r) => r,
            Err(never) => match never {},
        };
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
    let front = Front {
        active: Arc::new(RwLock::new(None)),
        leader,
        ha: ha.clone(),
        scheme: conf.http.scheme(),
        started_on: now_ms(),
    };
    let router = Router::new().fallback(route).with_state(front.clone());
    let (stop_tx, stop) = watch::channel(false);
    info!(rm_id = %ha.rm_id, "ResourceManager starting as STANDBY");
    let elect = tokio::spawn(run_election(conf.clone(), addr, front, leader_tx, stop));
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

/// Connects the elector (retrying while etcd is unreachable), then campaigns, serves as
/// active until the leadership is lost, and campaigns again; until `stop`.
async fn run_election(
    conf: Arc<RmConfig>,
    addr: SocketAddr,
    front: Front,
    leader_tx: watch::Sender<Option<String>>,
    mut stop: watch::Receiver<bool>,
) {
    let ha = front.ha.clone();
    let pause = ha.etcd.lease.min(Duration::from_secs(1));
    let elector = loop {
        match EtcdElector::connect(&ha.etcd, ha.keys.clone(), &ha.rm_id).await {
            Ok(e) => break e,
            Err(e) => warn!("HA: cannot reach etcd yet: {e}"),
        }
        if sleep_or_stop(pause, &mut stop).await {
            return;
        }
    };
    if !ha.automatic_failover {
        warn!("HA: yarn.resourcemanager.ha.automatic-failover.enabled is false: this RM stays STANDBY until an admin makes it active");
        let _ = stop.wait_for(|s| *s).await;
        return;
    }
    loop {
        let campaign = tokio::select! {
            r = elector.campaign(&leader_tx) => r,
            _ = stop.wait_for(|s| *s) => return,
        };
        let mut leadership = match campaign {
            Ok(l) => l,
            Err(e) => {
                warn!("HA: election failed, retrying: {e}");
                if sleep_or_stop(pause, &mut stop).await {
                    return;
                }
                continue;
            }
        };
        let won = Instant::now();
        let handle = match become_active(&conf, addr, &ha, &leadership).await {
            Ok((handle, router)) => {
                front.set(Some(router));
                info!(rm_id = %ha.rm_id, term = leadership.term.revision, recovery_ms = won.elapsed().as_millis() as u64, "ResourceManager is ACTIVE");
                handle
            }
            Err(e) => {
                error!("HA: recovery as the active failed, giving the leadership up: {e:#}");
                let _ = elector.resign(leadership).await;
                if sleep_or_stop(ha.etcd.lease, &mut stop).await {
                    return;
                }
                continue;
            }
        };
        let lost = tokio::select! {
            why = leadership.lost() => Some(why),
            _ = stop.wait_for(|s| *s) => None,
        };
        front.set(None);
        // Not the leader any more; who is, the next campaign says.
        leader_tx.send_replace(None);
        drop(handle);
        debug_assert_eq!(front.state(), HaState::Standby);
        match lost {
            Some(why) => {
                warn!(rm_id = %ha.rm_id, ?why, "leadership lost: this ResourceManager is STANDBY again");
                // Frees the key if it is still this term's (safe: the delete is fenced too).
                let _ = elector.resign(leadership).await;
            }
            None => {
                let _ = elector.resign(leadership).await;
                return;
            }
        }
    }
}

/// Opens the etcd store fenced by `leadership` and recovers, off the async workers.
async fn become_active(
    conf: &Arc<RmConfig>,
    addr: SocketAddr,
    ha: &Arc<HaConfig>,
    leadership: &Leadership,
) -> anyhow::Result<(DriverHandle, Router)> {
    let (conf, ha) = (conf.clone(), ha.clone());
    let (term, alarm) = (leadership.term.clone(), leadership.alarm());
    tokio::task::spawn_blocking(move || {
        let store = EtcdStore::open_fenced(&ha.etcd, ha.keys.clone(), term, alarm)?;
        assemble(conf, addr, store, StoreKind::Etcd)
    })
    .await
    .context("the recovery task failed")?
}

/// Sleeps `d`; true when `stop` was set meanwhile.
async fn sleep_or_stop(d: Duration, stop: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => false,
        _ = stop.wait_for(|s| *s) => true,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use axum::http::Request as HttpRequest;

    use super::*;
    use crate::ha::{EtcdEndpoints, EtcdKeys};

    fn front(leader: Option<&str>) -> (Router, watch::Sender<Option<String>>) {
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
        let f = Front {
            active: Arc::new(RwLock::new(None)),
            leader: rx,
            ha: Arc::new(ha),
            scheme: "http",
            started_on: 7,
        };
        (Router::new().fallback(route).with_state(f), tx)
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
    async fn a_standby_answers_cluster_info_and_redirects_the_rest_to_the_active() {
        let (r, leader) = front(Some("rm1"));
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
