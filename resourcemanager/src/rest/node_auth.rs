//! Who may speak for a node: the middleware on `/ws/v1/node-tracker/*`. With
//! `spindle.cluster.secret-file` set, a call must carry a `SpindleNode` signature made with
//! the cluster secret (`spindle_common::cluster_secret`) over this very request, by the node
//! its body's `nodeId` names, dated within the allowed skew and not seen before; anything
//! else is answered 401 before the handler runs (so nothing changes) and written to the
//! audit log. Without the key every call is let through (compatibility mode; the RM warns
//! once at start).
//!
//! Must not: parse more of the body than its `nodeId` (the handler does that).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use spindle_common::cluster_secret::{ClusterSecret, NodeAuthError, ReplayCache};
use spindle_common::records::exception::ExceptionKind;
use spindle_common::NodeId;
use spindle_rest_edge::audit::{self, AuditEvent};

use super::ApiError;
use crate::config::RmConfig;
use spindle_common::config::keys;

/// The most body bytes a node-tracker call may carry (axum's JSON limit, which the handler's
/// extractor applies too).
const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// The secret and the nonces of the calls already accepted.
pub(crate) struct NodeAuth {
    secret: ClusterSecret,
    replay: Mutex<ReplayCache>,
}

impl NodeAuth {
    /// The middleware's state for this RM's configuration; without a secret, warns (once:
    /// the router is built once per RM) that any caller may act as a node.
    pub(crate) fn from_conf(conf: &RmConfig) -> Option<Arc<Self>> {
        match &conf.cluster_secret {
            Some(secret) => Some(Arc::new(Self {
                secret: secret.clone(),
                replay: Mutex::new(ReplayCache::default()),
            })),
            None => {
                tracing::warn!(
                    "node-tracker calls are not authenticated ({} is unset): any caller may register, heartbeat or unregister a node (compatibility mode)",
                    keys::CLUSTER_SECRET_FILE
                );
                None
            }
        }
    }
}

/// Only the field the check needs.
#[derive(Deserialize)]
struct Claimed {
    #[serde(rename = "nodeId")]
    node_id: NodeId,
}

/// YARN's operation name of a node-tracker path, for the audit line.
fn operation(path: &str) -> &'static str {
    match path.rsplit('/').next() {
        Some("register") => "Register Node",
        Some("heartbeat") => "Node Heartbeat",
        Some("unregister") => "Unregister Node",
        _ => "Node Tracker Call",
    }
}

/// The middleware (see the module doc). `auth` is `None` in compatibility mode.
pub(crate) async fn check(
    State(auth): State<Option<Arc<NodeAuth>>>,
    req: Request,
    next: Next,
) -> Response {
    let Some(auth) = auth else {
        return next.run(req).await;
    };
    let (parts, body) = req.into_parts();
    let ip = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let path_and_query = parts
        .uri
        .path_and_query()
        .map_or_else(|| parts.uri.path().to_string(), |p| p.as_str().to_string());
    let op = operation(parts.uri.path());
    let refuse = |user: &str, e: NodeAuthError| -> Response {
        let why = e.to_string();
        audit::log(&AuditEvent::failure(
            user,
            ip,
            op,
            "ResourceTrackerService",
            &why,
            "Unauthenticated",
        ));
        ApiError::new(ExceptionKind::Authorization, format!("{op} refused: {why}")).into_response()
    };
    let header = match parts.headers.get(AUTHORIZATION) {
        None => return refuse("dr.who", NodeAuthError::Missing),
        Some(h) => match h.to_str() {
            Ok(h) => h.to_string(),
            Err(_) => {
                return refuse(
                    "dr.who",
                    NodeAuthError::Malformed("the header is not visible ASCII".into()),
                )
            }
        },
    };
    let bytes = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
        Ok(b) => b,
        Err(e) => {
            return ApiError::bad_request(format!(
                "cannot read the request body (at most {MAX_BODY_BYTES} bytes): {e}"
            ))
            .into_response()
        }
    };
    let claimed = serde_json::from_slice::<Claimed>(&bytes)
        .ok()
        .map(|c| c.node_id.to_string());
    let user = claimed.as_deref().unwrap_or("dr.who");
    let now = spindle_common::time::now_ms();
    let signed =
        match auth
            .secret
            .verify(&header, parts.method.as_str(), &path_and_query, &bytes, now)
        {
            Ok(s) => s,
            Err(e) => return refuse(user, e),
        };
    // A signed body without a readable nodeId goes on to the handler's 400.
    if let Some(body_node) = &claimed {
        if *body_node != signed.node_id {
            return refuse(
                user,
                NodeAuthError::NodeMismatch {
                    signed: signed.node_id,
                    body: body_node.clone(),
                },
            );
        }
    }
    let replayed = {
        let mut cache = auth.replay.lock().unwrap_or_else(|p| p.into_inner());
        cache.check(&signed, now)
    };
    if let Err(e) = replayed {
        return refuse(user, e);
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}
