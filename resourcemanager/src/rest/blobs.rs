//! The blob store's REST edge (`crate::blobs` keeps the files and records).
//!
//! Clients, behind [`super::auth::authenticate`] like every cluster route:
//! - `PUT /ws/v1/cluster/blobs/{digest}/apps/{appid}?size=N`: "ask by digest first": when
//!   the caller holds the blob (uploaded it once), the application now uses it and nothing
//!   is sent (200, `uploaded: false`, counted as a skipped upload); else 404, or 413 naming
//!   the limit when an upload of `size` bytes would be refused.
//! - `PUT /ws/v1/cluster/blobs/{digest}?applicationId=ID`: the upload, streamed; 201 when
//!   stored, 200 when the digest was stored already (the caller proved they hold the bytes);
//!   400 when the bytes' digest is not `{digest}`, 413 above a limit.
//! - `HEAD /ws/v1/cluster/blobs/{digest}`: existence, for a caller who holds it (200 with
//!   its `Content-Length`), else 404: knowing a digest tells nothing.
//! - `GET /ws/v1/cluster/blobs/{digest}`: the bytes, streamed, to a caller who holds it.
//!
//! NodeManagers: `GET /ws/v1/localizer/blobs/{digest}` with `Authorization: Bearer
//! <container token>` of an application that uses the blob (the RM checks the signature
//! with its container-token master keys); anything else is 401 (no or a bad token) or 404
//! (not this application's), audited.
//!
//! An application that exists must be the caller's to upload or claim for it (403).

use std::collections::HashMap;

use axum::body::Body;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use axum::{Json, Router};
use spindle_common::image_ref::Digest;
use spindle_common::records::blob::{BlobBody, BlobInfo};
use spindle_common::records::exception::ExceptionKind;
use spindle_common::time::now_ms;
use spindle_common::ApplicationId;
use spindle_rest_edge::audit::{self, AuditEvent};

use super::{ApiError, AppState, PathParams};
use crate::blob_replicas::BlobUse;
use crate::blobs::{BlobError, Stored, Upload};

type Q = Query<HashMap<String, String>>;

/// The paths are `spindle_common::resource_url::{CLUSTER_BLOBS_PATH, LOCALIZER_BLOBS_PATH}`
/// (written out: the contract test reads route literals).
pub(super) fn cluster_routes() -> Router<AppState> {
    Router::new()
        .route(
            "/ws/v1/cluster/blobs/{digest}",
            get(download).head(exists).put(upload),
        )
        .route("/ws/v1/cluster/blobs/{digest}/apps/{appid}", put(claim))
}

pub(super) fn localizer_routes() -> Router<AppState> {
    Router::new().route("/ws/v1/localizer/blobs/{digest}", get(localize))
}

impl From<BlobError> for ApiError {
    fn from(e: BlobError) -> Self {
        let kind = match &e {
            BlobError::FileTooLarge { .. }
            | BlobError::StreamTooLarge { .. }
            | BlobError::UserLimit { .. } => ExceptionKind::PayloadTooLarge,
            BlobError::DigestMismatch { .. } | BlobError::Body(_) => ExceptionKind::BadRequest,
            BlobError::NotFound(_) => ExceptionKind::NotFound,
            BlobError::Io { .. } | BlobError::Db { .. } => ExceptionKind::Internal,
        };
        ApiError::new(kind, e.to_string())
    }
}

pub(super) fn digest(text: &str) -> Result<Digest, ApiError> {
    text.parse().map_err(|e| {
        ApiError::bad_request(format!(
            "'{text}' is not a blob digest (sha256:<64 lowercase hex digits>): {e}"
        ))
    })
}

pub(super) fn app_id(text: &str) -> Result<ApplicationId, ApiError> {
    text.parse()
        .map_err(|e| ApiError::bad_request(format!("invalid application id '{text}': {e}")))
}

/// An upload's `applicationId` (required).
pub(super) fn upload_app(q: &HashMap<String, String>) -> Result<ApplicationId, ApiError> {
    app_id(q.get("applicationId").ok_or_else(|| {
        ApiError::bad_request("applicationId is required: the application that uses the blob")
    })?)
}

/// An upload's `Content-Length`, when it sent one.
pub(super) fn declared_len(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

/// Copies a stored blob's use to the other HA RMs before the client is answered
/// ([`crate::blob_replicas`]); a peer that fails is retried later, never failing the call.
async fn replicate(st: &AppState, digest: &Digest, user: &str, app: ApplicationId) {
    if let Some(r) = &st.info.replicas {
        let blob = BlobUse {
            digest: digest.clone(),
            user: user.to_string(),
            app,
        };
        r.replicate(&st.blobs, &blob).await;
    }
}

/// An application the RM knows must be `user`'s (one not submitted yet is anybody's id).
async fn check_owner(st: &AppState, app: &ApplicationId, user: &str) -> Result<(), ApiError> {
    let s = st.driver.snapshot().await;
    match s.apps.get(app) {
        Some(a) if a.sub.user != user => Err(ApiError::new(
            ExceptionKind::Forbidden,
            format!(
                "User {user} cannot use blobs for application {app} of user {}",
                a.sub.user
            ),
        )),
        _ => Ok(()),
    }
}

pub(super) fn blob_reply(
    status: StatusCode,
    digest: &Digest,
    size: u64,
    uploaded: bool,
) -> Response {
    let body = BlobBody {
        blob: BlobInfo {
            digest: digest.to_string(),
            size,
            uploaded,
        },
    };
    (status, Json(body)).into_response()
}

#[tracing::instrument(skip_all, fields(app_id = %appid))]
async fn claim(
    State(st): State<AppState>,
    Query(q): Q,
    PathParams((d, appid)): PathParams<(String, String)>,
) -> Result<Response, ApiError> {
    let (d, app) = (digest(&d)?, app_id(&appid)?);
    let caller = st.caller(&q).await;
    check_owner(&st, &app, &caller.user).await?;
    let size: Option<u64> =
        match q.get("size") {
            Some(s) => Some(s.parse().map_err(|_| {
                ApiError::bad_request(format!("size '{s}' is not a number of bytes"))
            })?),
            None => None,
        };
    match st.blobs.claim(&d, &caller.user, &app, now_ms()) {
        Ok(size) => {
            replicate(&st, &d, &caller.user, app).await;
            st.info.metrics.blob_upload_skipped();
            Ok(blob_reply(StatusCode::OK, &d, size, false))
        }
        Err(BlobError::NotFound(_)) => {
            if let Some(size) = size {
                st.blobs.check_upload(&d, &caller.user, size)?;
            }
            Err(BlobError::NotFound(d).into())
        }
        Err(e) => Err(e.into()),
    }
}

#[tracing::instrument(skip_all, fields(digest = %d))]
async fn upload(
    State(st): State<AppState>,
    Query(q): Q,
    PathParams(d): PathParams<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let d = digest(&d)?;
    let app = upload_app(&q)?;
    let caller = st.caller(&q).await;
    check_owner(&st, &app, &caller.user).await?;
    let up = Upload {
        digest: d.clone(),
        user: caller.user.clone(),
        app,
        declared_len: declared_len(&headers),
    };
    let stored = st.blobs.put(up, body.into_data_stream(), now_ms()).await?;
    replicate(&st, &d, &caller.user, app).await;
    match stored {
        Stored::New { size } => {
            st.info.metrics.blob_uploaded(size);
            tracing::info!(size, user = %caller.user, "blob stored");
            Ok(blob_reply(StatusCode::CREATED, &d, size, true))
        }
        Stored::Existed { size } => {
            st.info.metrics.blob_received(size);
            Ok(blob_reply(StatusCode::OK, &d, size, false))
        }
    }
}

async fn exists(
    State(st): State<AppState>,
    Query(q): Q,
    PathParams(d): PathParams<String>,
) -> Result<Response, ApiError> {
    let d = digest(&d)?;
    let caller = st.caller(&q).await;
    match st.blobs.size_for_user(&d, &caller.user)? {
        Some(size) => {
            Ok((StatusCode::OK, [(header::CONTENT_LENGTH, size.to_string())]).into_response())
        }
        None => Err(BlobError::NotFound(d).into()),
    }
}

async fn download(
    State(st): State<AppState>,
    Query(q): Q,
    PathParams(d): PathParams<String>,
) -> Result<Response, ApiError> {
    let d = digest(&d)?;
    let caller = st.caller(&q).await;
    if st.blobs.size_for_user(&d, &caller.user)?.is_none() {
        return Err(BlobError::NotFound(d).into());
    }
    serve(&st, &d)
}

/// The blob's bytes as a streamed body ([`crate::blobs::read_chunks`]).
fn serve(st: &AppState, d: &Digest) -> Result<Response, ApiError> {
    let (file, len) = st.blobs.open_blob(d)?;
    st.info.metrics.blob_downloaded(len);
    let stream = crate::blobs::read_chunks(file);
    Ok((
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_string()),
            (header::CONTENT_LENGTH, len.to_string()),
        ],
        Body::from_stream(stream),
    )
        .into_response())
}

/// Why an NM's download was refused (401), for the answer and the audit.
#[derive(Debug, thiserror::Error)]
enum LocalizerRefusal {
    #[error("a blob download needs 'Authorization: Bearer <container token>' of an application that uses it")]
    NoToken,
    #[error("the container token is refused: {0}")]
    BadToken(spindle_common::token::TokenError),
}

async fn localize(
    State(st): State<AppState>,
    PathParams(d): PathParams<String>,
    req: axum::extract::Request,
) -> Result<Response, ApiError> {
    let d = digest(&d)?;
    let ip = req
        .extensions()
        .get::<ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0.ip());
    let headers = req.headers();
    let refuse = |who: &str, e: LocalizerRefusal| {
        let why = e.to_string();
        audit::log(&AuditEvent::failure(
            who,
            ip,
            "Localize Blob",
            "LocalizerService",
            &why,
            "Unauthenticated",
        ));
        ApiError::new(ExceptionKind::Authorization, why)
    };
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, t)| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .ok_or_else(|| refuse("dr.who", LocalizerRefusal::NoToken))?;
    let ident = st
        .driver
        .call(|reply| crate::driver::QueryCommand::OpenContainerToken { token, reply })
        .await?
        .map_err(|e| refuse("dr.who", LocalizerRefusal::BadToken(e)))?;
    let app = ident.container_id.application_id();
    if st.blobs.size_for_app(&d, &app)?.is_none() {
        return Err(ApiError::not_found(format!(
            "blob {d} is not stored for application {app}"
        )));
    }
    serve(&st, &d)
}
