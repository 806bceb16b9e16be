//! The RM's HTTP surface: YARN's RM REST API v1 (`cluster`), the ApplicationMasterProtocol
//! (`am`), the ResourceTracker (`tracker`), Prometheus metrics and the web UI (`web`).
//! Handlers parse, send a typed command to the driver (or read its snapshot), and map the
//! answer to YARN's status and body. They hold no state of their own.

mod am;
mod cluster;
mod groups;
mod metrics;
mod schedconf;
mod tracker;
mod web;

use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde::de::DeserializeOwned;
use spindle_common::records::exception::ExceptionKind;
use spindle_common::Resource;

use crate::config::RmConfig;
use crate::core::{Caller, RefusalClass};
use crate::driver::{DriverHandle, RmError};

/// Facts about this RM that do not change while it runs.
#[derive(Debug, Clone)]
pub struct RmInfo {
    pub cluster_ts: u64,
    pub started_on: u64,
    pub cluster_id: String,
    pub store_path: String,
    /// The configuration the RM started with: where `refreshQueues` reads
    /// `capacity-scheduler.xml` again, and how callers' groups are found.
    pub conf: Arc<RmConfig>,
}

#[derive(Clone)]
pub(crate) struct AppState {
    pub driver: DriverHandle,
    pub info: RmInfo,
    pub groups: Arc<groups::Groups>,
}

impl AppState {
    /// The caller named by `?user.name=` (default `dr.who`) with their groups.
    pub(crate) async fn caller(&self, query: &std::collections::HashMap<String, String>) -> Caller {
        let user = caller(query);
        let groups = self.groups.of(&user).await;
        Caller::new(user, groups)
    }
}

pub fn router(driver: DriverHandle, info: RmInfo) -> Router {
    let groups = Arc::new(groups::Groups::new(info.conf.groups.clone()));
    let state = AppState {
        driver,
        info,
        groups,
    };
    Router::new()
        .merge(cluster::routes())
        .merge(schedconf::routes())
        .merge(am::routes())
        .merge(tracker::routes())
        .merge(metrics::routes())
        .merge(web::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
}

async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        ExceptionKind::NotFound,
        format!("java.lang.Exception: no resource at {}", uri.path()),
    )
}

async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        ExceptionKind::MethodNotAllowed,
        format!("HTTP method {method} is not supported by {}", uri.path()),
    )
}

/// A YARN `RemoteException` answer.
#[derive(Debug)]
pub struct ApiError {
    pub kind: ExceptionKind,
    pub message: String,
}

impl ApiError {
    pub fn new(kind: ExceptionKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ExceptionKind::BadRequest, message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ExceptionKind::NotFound, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.kind.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, axum::Json(self.kind.body(self.message))).into_response()
    }
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
            RmError::Store(m) => ApiError::new(ExceptionKind::Internal, m),
            RmError::Unavailable => ApiError::new(ExceptionKind::ServiceUnavailable, e.to_string()),
        }
    }
}

/// `Json<T>` whose rejections are YARN `RemoteException` bodies with status 400.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let is_xml = req
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("xml"));
        if is_xml {
            return Err(ApiError::bad_request(
                "XML request bodies are not supported by Spindle; send the same document as JSON (Content-Type: application/json)",
            ));
        }
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(JsonBody(v)),
            Err(rej) => Err(ApiError::bad_request(match rej {
                JsonRejection::JsonDataError(e) => {
                    format!("Invalid request body: {}", e.body_text())
                }
                JsonRejection::JsonSyntaxError(e) => {
                    format!("Malformed JSON request body: {}", e.body_text())
                }
                JsonRejection::MissingJsonContentType(_) => {
                    "Expected request with `Content-Type: application/json`".to_string()
                }
                other => other.body_text(),
            })),
        }
    }
}

/// `Path<T>` whose rejections (a parameter that is not UTF-8 once percent-decoded) are YARN
/// `RemoteException` bodies with status 400, like every other bad input.
pub struct PathParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for PathParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(v)) => Ok(PathParams(v)),
            Err(rej) => {
                // A route without the parameters its handler reads is the RM's bug (500).
                let kind = if rej.status().is_server_error() {
                    ExceptionKind::Internal
                } else {
                    ExceptionKind::BadRequest
                };
                Err(ApiError::new(kind, rej.body_text()))
            }
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
