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
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde::de::DeserializeOwned;
use spindle_common::records::exception::ExceptionKind;

use crate::config::RmConfig;
use crate::core::{Caller, CoreError};
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
    pub async fn caller(&self, query: &std::collections::HashMap<String, String>) -> Caller {
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
                let kind = match &c {
                    CoreError::NotFound(_) => ExceptionKind::NotFound,
                    CoreError::BadRequest(_) | CoreError::InvalidResourceRequest(_) => {
                        ExceptionKind::BadRequest
                    }
                    CoreError::InvalidToken(_) => ExceptionKind::Authorization,
                    CoreError::NotRegistered(_) => ExceptionKind::AmNotRegistered,
                    CoreError::WrongState(_) => ExceptionKind::Conflict,
                    CoreError::Forbidden(_) => ExceptionKind::Forbidden,
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
