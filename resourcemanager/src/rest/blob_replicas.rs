//! The receiving side of [`crate::blob_replicas`]: another HA RM copies a shipped file, or
//! a use of one, here. Answered by every HA RM itself (a standby too, never redirected):
//!
//! - `PUT /ws/v1/ha/blobs/{digest}/apps/{appid}?user=U`: when this RM holds the blob for
//!   `U`, `appid` now uses it (200); else 404 and the pusher sends the bytes;
//! - `PUT /ws/v1/ha/blobs/{digest}?applicationId=A&user=U`: the bytes, streamed into the
//!   blob store as an upload is (digest checked, synced, renamed; the limits apply): 201 when
//!   stored, 200 when it was already.
//!
//! Every call must carry `Authorization: SpindleNode ...` made with the cluster secret by
//! another RM of `yarn.resourcemanager.ha.rm-ids` over this method, path and query (the body
//! is bound by the digest), dated within the allowed skew and not seen before; anything else
//! is 401 before anything is stored, and audited. Without a cluster secret every push is
//! refused.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{ConnectInfo, Query, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::put;
use axum::Router;
use spindle_common::cluster_secret::{ClusterSecret, NodeAuthError, ReplayCache};
use spindle_common::config::keys;
use spindle_common::records::exception::ExceptionKind;
use spindle_common::time::now_ms;
use spindle_rest_edge::audit::{self, AuditEvent};

use super::blobs::{app_id, blob_reply, declared_len, digest, upload_app};
use super::{ApiError, PathParams};
use crate::blobs::{BlobStore, Stored, Upload};
use crate::config::RmConfig;

/// Why a push was refused (401): one variant per reason.
#[derive(Debug, thiserror::Error)]
enum PushRefusal {
    #[error("pushes between ResourceManagers are signed with the cluster secret, and {} is unset on this one", keys::CLUSTER_SECRET_FILE)]
    NoSecret,
    #[error("a push needs 'Authorization: SpindleNode ...' signed by another ResourceManager with the cluster secret")]
    NoSignature,
    #[error("the push's signature is refused: {0}")]
    BadSignature(NodeAuthError),
    #[error("'{0}' is not another ResourceManager of yarn.resourcemanager.ha.rm-ids")]
    NotAPeer(String),
}

/// The routes' state.
#[derive(Clone)]
struct Receiver {
    store: Arc<BlobStore>,
    secret: Option<ClusterSecret>,
    /// The other RMs' ids.
    peers: Arc<Vec<String>>,
    replay: Arc<Mutex<ReplayCache>>,
}

/// The routes of the RM `conf` describes, storing into `store`.
pub fn routes(conf: &RmConfig, store: Arc<BlobStore>) -> Router {
    let peers = conf
        .ha
        .as_ref()
        .map(|ha| {
            ha.rm_ids
                .iter()
                .filter(|id| **id != ha.rm_id)
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    let st = Receiver {
        store,
        secret: conf.cluster_secret.clone(),
        peers: Arc::new(peers),
        replay: Arc::new(Mutex::new(ReplayCache::default())),
    };
    Router::new()
        .route("/ws/v1/ha/blobs/{digest}", put(upload))
        .route("/ws/v1/ha/blobs/{digest}/apps/{appid}", put(claim))
        .fallback(spindle_rest_edge::not_found)
        .method_not_allowed_fallback(spindle_rest_edge::method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(st.clone(), check))
        .with_state(st)
}

/// Who pushed, checked before any handler runs (see the module doc).
async fn check(State(st): State<Receiver>, req: Request, next: axum::middleware::Next) -> Response {
    let ip = req
        .extensions()
        .get::<ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0.ip());
    match verify(&st, req.method().as_str(), req.uri(), req.headers()) {
        Ok(()) => next.run(req).await,
        Err((who, why)) => {
            let message = why.to_string();
            audit::log(&AuditEvent::failure(
                &who,
                ip,
                "Replicate Blob",
                "ResourceManager",
                &message,
                "Unauthenticated",
            ));
            ApiError::new(ExceptionKind::Authorization, message).into_response()
        }
    }
}

fn verify(
    st: &Receiver,
    method: &str,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
) -> Result<(), (String, PushRefusal)> {
    let anon = |why| ("dr.who".to_string(), why);
    let secret = st
        .secret
        .as_ref()
        .ok_or_else(|| anon(PushRefusal::NoSecret))?;
    let header = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| anon(PushRefusal::NoSignature))?;
    let pq = uri.path_and_query().map_or(uri.path(), |pq| pq.as_str());
    let now = now_ms();
    let signed = secret
        .verify(header, method, pq, b"", now)
        .map_err(|e| anon(PushRefusal::BadSignature(e)))?;
    let who = signed.node_id.clone();
    if !st.peers.contains(&who) {
        return Err((who.clone(), PushRefusal::NotAPeer(who)));
    }
    st.replay
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .check(&signed, now)
        .map_err(|e| (who, PushRefusal::BadSignature(e)))
}

fn user(q: &HashMap<String, String>) -> Result<String, ApiError> {
    q.get("user")
        .map(|u| u.trim().to_string())
        .filter(|u| !u.is_empty())
        .ok_or_else(|| ApiError::bad_request("user is required: who uploaded or claimed the blob"))
}

async fn claim(
    State(st): State<Receiver>,
    Query(q): Query<HashMap<String, String>>,
    PathParams((d, appid)): PathParams<(String, String)>,
) -> Result<Response, ApiError> {
    let (d, app, user) = (digest(&d)?, app_id(&appid)?, user(&q)?);
    let size = st.store.claim(&d, &user, &app, now_ms())?;
    Ok(blob_reply(StatusCode::OK, &d, size, false))
}

async fn upload(
    State(st): State<Receiver>,
    Query(q): Query<HashMap<String, String>>,
    PathParams(d): PathParams<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let d = digest(&d)?;
    let up = Upload {
        digest: d.clone(),
        user: user(&q)?,
        app: upload_app(&q)?,
        declared_len: declared_len(&headers),
    };
    Ok(
        match st.store.put(up, body.into_data_stream(), now_ms()).await? {
            Stored::New { size } => blob_reply(StatusCode::CREATED, &d, size, true),
            Stored::Existed { size } => blob_reply(StatusCode::OK, &d, size, false),
        },
    )
}
