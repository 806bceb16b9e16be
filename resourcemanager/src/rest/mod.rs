//! The RM's HTTP surface: YARN's RM REST API v1 (`cluster`), the ApplicationMasterProtocol
//! (`am`), the ResourceTracker (`tracker`), Prometheus metrics and the web UI (`web`).
//! Handlers parse, send a typed command to the driver (or read its snapshot), and map the
//! answer to YARN's status and body. They hold no cluster state: the only state here is two
//! edge caches behind a `Mutex`, `groups`' OS group lookups and `node_auth`'s replay nonces.
//!
//! Rooms besides those: `cluster::accounting` (usage over a period), `master_key` (the
//! wrapped key in node-tracker answers), `node_auth`, `schedconf`, `admin`, `groups`,
//! `auth`, `metrics` and `ui` (the `/ui` single-page app).

mod admin;
mod am;
mod auth;
pub mod blob_replicas;
mod blobs;
mod cluster;
mod groups;
pub mod ha_admin;
mod master_key;
mod metrics;
mod node_auth;
mod schedconf;
mod tracker;
mod web;

use std::sync::Arc;

use axum::Router;
pub use metrics::RmMetrics;
use spindle_common::records::exception::ExceptionKind;
use spindle_common::Resource;
pub use spindle_rest_edge::{ApiError, JsonBody, PathParams};

use crate::config::RmConfig;
use crate::core::{Caller, RefusalClass};
use crate::driver::{DriverHandle, RmError};
use crate::store::StoreError;

/// Facts about this RM that do not change while it runs.
#[derive(Debug, Clone)]
pub struct RmInfo {
    pub cluster_ts: u64,
    pub started_on: u64,
    pub cluster_id: String,
    pub store_path: String,
    /// Which state store (`rmStateStoreName`; etcd means HA, and this RM is the active).
    pub store_kind: StoreName,
    /// The configuration the RM started with: where `refreshQueues` reads
    /// `capacity-scheduler.xml` again, and how callers' groups are found.
    pub conf: Arc<RmConfig>,
    /// The `/metrics` event series the router's middleware and the driver record.
    pub metrics: Arc<RmMetrics>,
    /// The files clients ship (`crate::blobs`).
    pub blobs: Arc<crate::blobs::BlobStore>,
    /// The other HA RMs every stored blob is copied to (None: one RM, or no cluster secret).
    pub replicas: Option<Arc<crate::blob_replicas::BlobReplicas>>,
}

/// The state store as `/ws/v1/cluster/info` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreName {
    Sqlite,
    Etcd,
}

pub(crate) use auth::form_encode;
pub use cluster::standby_info;

#[derive(Clone)]
pub(crate) struct AppState {
    pub driver: DriverHandle,
    pub info: RmInfo,
    pub groups: Arc<groups::Groups>,
    /// How cluster callers are authenticated.
    pub auth: Arc<auth::Auth>,
    pub blobs: Arc<crate::blobs::BlobStore>,
}

impl AppState {
    /// The caller named by `?user.name=` (default `dr.who`) with their groups. On cluster
    /// routes [`auth::authenticate`] has run first: in `token` mode it set `user.name` to
    /// the token's owner, so this is the authenticated user.
    pub(crate) async fn caller(&self, query: &std::collections::HashMap<String, String>) -> Caller {
        let user = caller(query);
        let groups = self.groups.of(&user).await;
        Caller::new(user, groups)
    }
}

pub fn router(driver: DriverHandle, info: RmInfo) -> Router {
    let groups = Arc::new(groups::Groups::new(info.conf.groups.clone()));
    let request_metrics = info.metrics.clone();
    let node_auth = node_auth::NodeAuth::from_conf(&info.conf);
    let auth = Arc::new(auth::Auth::new(&info.conf.auth));
    let blobs = info.blobs.clone();
    let state = AppState {
        driver,
        info,
        groups,
        auth,
        blobs,
    };
    // Every cluster call is authenticated (and its refusals audited); the AM, node-tracker,
    // metrics and web routes have their own rules.
    let cluster = Router::new()
        .merge(cluster::routes())
        .merge(schedconf::routes())
        .merge(admin::routes())
        .merge(auth::routes())
        .merge(blobs::cluster_routes())
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::authenticate,
        ));
    Router::new()
        .merge(cluster)
        .merge(am::routes())
        .merge(blobs::localizer_routes())
        .merge(tracker::routes(node_auth))
        .merge(metrics::routes())
        .merge(ha_admin::single_rm_routes())
        .merge(web::routes().layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::guard_pages,
        )))
        .fallback(spindle_rest_edge::not_found)
        .method_not_allowed_fallback(spindle_rest_edge::method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            request_metrics,
            metrics::track,
        ))
        .with_state(state)
}

impl From<RmError> for ApiError {
    fn from(e: RmError) -> Self {
        match e {
            RmError::Core(c) => {
                let kind = match c.class() {
                    RefusalClass::NotFound => ExceptionKind::NotFound,
                    RefusalClass::BadRequest => ExceptionKind::BadRequest,
                    RefusalClass::Authorization => ExceptionKind::Authorization,
                    RefusalClass::AmNotRegistered => ExceptionKind::AmNotRegistered,
                    RefusalClass::Conflict => ExceptionKind::Conflict,
                    RefusalClass::Forbidden => ExceptionKind::Forbidden,
                };
                ApiError::new(kind, c.to_string())
            }
            // YARN's refresh and mutation refusals read "Failed to re-init queues : ...".
            RmError::SchedulerConf(e) => ApiError::new(
                ExceptionKind::BadRequest,
                format!("Failed to re-init queues : {e}"),
            ),
            // A deposed active's write: nothing was written and another RM is (or soon will
            // be) active, so the client fails over (503, `Retry-After`) as from a standby.
            RmError::Store(e @ StoreError::Fenced { .. }) => {
                ApiError::new(ExceptionKind::ServiceUnavailable, e.to_string())
            }
            RmError::Store(e) => ApiError::new(ExceptionKind::Internal, e.to_string()),
            RmError::Unavailable => ApiError::new(ExceptionKind::ServiceUnavailable, e.to_string()),
        }
    }
}

/// The largest value of any resource type the REST edge accepts (2^53, the largest integer a
/// JSON number carries exactly through a double; as memory in MB, 8 ZB). The core rounds,
/// adds and subtracts resource values as i64: a request that names an absurd one (an ask,
/// an AM resource, a node's total, a container report) is refused here, before that
/// arithmetic can overflow.
pub const MAX_RESOURCE_VALUE: i64 = 1 << 53;

/// Refuses (400) a resource with a value above [`MAX_RESOURCE_VALUE`]; `what` names it.
pub(crate) fn check_resource(what: &str, r: &Resource) -> Result<(), ApiError> {
    match r.entries().find(|(_, v)| *v > MAX_RESOURCE_VALUE) {
        Some((name, v)) => Err(ApiError::bad_request(format!(
            "{what}: resource type=[{name}] value {v} is greater than {MAX_RESOURCE_VALUE}"
        ))),
        None => Ok(()),
    }
}

/// The caller's user name from YARN's pseudo authentication (`?user.name=`), else `dr.who`,
/// Hadoop's static web user.
pub(crate) fn caller(query: &std::collections::HashMap<String, String>) -> String {
    query
        .get("user.name")
        .map(|s| s.trim())
        .filter(|s| !s.is_empty() && s.len() <= 256 && !s.contains(['/', '\0']))
        .unwrap_or("dr.who")
        .to_string()
}

#[cfg(test)]
mod tests {
    use axum::http::{header, StatusCode};
    use axum::response::IntoResponse;

    use super::*;

    #[test]
    fn a_write_the_fence_refused_answers_503_with_retry_after_and_other_store_errors_500() {
        let fenced = StoreError::Fenced {
            path: "etcd".into(),
            holder: "rm1".into(),
            key: "/spindle/c/leader".into(),
            revision: 7,
        };
        let resp = ApiError::from(RmError::Store(fenced)).into_response();
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(resp.headers()[header::RETRY_AFTER], "1");
        let broken = StoreError::Corrupt {
            path: "rm.sqlite".into(),
            key: "app".into(),
            message: "bad".into(),
        };
        let resp = ApiError::from(RmError::Store(broken)).into_response();
        assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }
}
