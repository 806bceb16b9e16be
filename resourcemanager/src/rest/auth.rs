//! Who the REST caller is, on `/ws/v1/cluster/...`, and the audit of what they were refused.
//!
//! [`authenticate`] is the middleware around every cluster route (not `/ws/v1/am/*`, whose
//! callers prove themselves with AM-RM tokens, nor `/ws/v1/node-tracker/*`, nor `/metrics`,
//! `/cluster` and `/ui`). By `hadoop.http.authentication.type`:
//!
//! * `simple` (the default, YARN's pseudo authentication): the caller is whoever
//!   `?user.name=` names, else `dr.who`; with
//!   `hadoop.http.authentication.simple.anonymous.allowed=false` a call without `user.name`
//!   is 401.
//! * `token`: the caller presents a token (`Authorization: Bearer <token>`, or YARN's
//!   `Hadoop-YARN-RM-Delegation-Token: <token>`) signed with the RM's key
//!   (`spindle_common::user_token`), not past its max date and not cancelled; the caller is
//!   its owner. Every call without one is 401, reads included, except the open paths
//!   [`OPEN_PATHS`] (`/ws/v1/cluster` and `/info`). The edge then sets `user.name` to the
//!   owner, whatever the client sent, so every handler's ACL check (queue submit and
//!   administer ACLs, the admin ACL, application owners) sees the authenticated user.
//!
//! Every 401 or 403 a cluster call answers (the edge's own, or a handler's: an ACL refusal) is
//! written as YARN's `RMAuditLogger` writes a failure (`spindle_rest_edge::audit`), with the
//! operation named from the route (YARN's `AuditConstants` where YARN has the call), the
//! user, the peer address, and the refusal's message as `DESCRIPTION`; every successful
//! state-changing call (submit, kill, move, priority, timeout, tokens, admin writes) is
//! written as a success.
//!
//! Tokens are issued by `POST /ws/v1/cluster/delegation-token` (to a token-authenticated
//! caller, for themselves, never outliving the token that asked) and offline by
//! `spindle token -issue` (the operator, with the key file); `DELETE` cancels one. A
//! cancellation is written to the state store (until the token's max date) before it is
//! answered; the store is the one place that keeps them, and every token-authenticated call
//! asks the driver whether its token was cancelled (a call whose check cannot be answered is
//! refused).
//!
//! In `token` mode a submission is pre-checked (`check_submit_acl`): the core answers
//! `SubmitAccess` for the queue it would place it in, after its mappings; a refusal is 403
//! before anything is recorded, an unknown queue is left to the scheduler, and a driver error
//! is that error. `guard_pages` guards the classic pages (`/cluster/...`): in `token` mode they
//! need a token too.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use axum::body::Body;
use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Json, Router};
use spindle_common::records::auth::DelegationToken;
use spindle_common::records::exception::{ExceptionKind, RemoteExceptionBody};
use spindle_common::time::now_ms;
use spindle_common::user_token::{self, UserTokenError, UserTokenIdentifier};
use spindle_rest_edge::audit::{self, AuditEvent};

use super::{ApiError, AppState, JsonBody};
use crate::config::auth::{AuthConfig, AuthMode};

/// YARN's header for an RM delegation token.
pub(crate) const DELEGATION_TOKEN_HEADER: &str = "Hadoop-YARN-RM-Delegation-Token";

/// Cluster paths any caller may read in `token` mode: what the RM is (no application,
/// queue or node in them).
pub(crate) const OPEN_PATHS: [&str; 3] =
    ["/ws/v1/cluster", "/ws/v1/cluster/", "/ws/v1/cluster/info"];

/// Hadoop's static web user: the caller when nobody is named.
const ANONYMOUS: &str = "dr.who";

/// How long a refusal's `RemoteException` body may be for the audit to quote it.
const MAX_AUDITED_BODY: usize = 64 * 1024;

/// How the RM authenticates cluster callers.
pub(crate) struct Auth {
    mode: AuthMode,
}

impl Auth {
    pub(crate) fn new(conf: &AuthConfig) -> Self {
        Self {
            mode: conf.mode.clone(),
        }
    }

    /// Whether callers are authenticated by tokens.
    pub(crate) fn is_token(&self) -> bool {
        matches!(self.mode, AuthMode::Token { .. })
    }
}

/// Whether the token with sequence number `seq` was cancelled: the driver asks the state
/// store.
async fn is_cancelled(
    driver: &crate::driver::DriverHandle,
    seq: u64,
) -> Result<bool, crate::driver::RmError> {
    driver
        .call(|reply| crate::driver::QueryCommand::UserTokenCancelled { seq, reply })
        .await
}

/// Who the caller proved (or said) they are; in the request's extensions after
/// [`authenticate`].
#[derive(Debug, Clone)]
pub(crate) enum Identity {
    /// `simple` mode: the `user.name` given, or `dr.who`.
    Simple(String),
    /// `token` mode: the verified token (its identifier and its text).
    Token {
        id: UserTokenIdentifier,
        token: String,
    },
    /// `token` mode, an open path called without a token.
    Anonymous,
}

impl Identity {
    pub(crate) fn user(&self) -> &str {
        match self {
            Identity::Simple(u) => u,
            Identity::Token { id, .. } => &id.owner,
            Identity::Anonymous => ANONYMOUS,
        }
    }
}

/// Why the edge could not tell who the caller is.
pub(crate) enum NotIdentified {
    /// A 401: the user to audit, and why.
    Refused(String, Unauthenticated),
    /// Whether the token was cancelled could not be asked (the RM is shutting down, the
    /// state store failed, etcd did not answer): answered as that error, never let through.
    Unchecked(ApiError),
}

/// Where `identify` asks whether a token was cancelled.
pub(crate) enum Cancellations<'a> {
    /// The active's driver, which asks the state store.
    Driver(&'a crate::driver::DriverHandle),
    /// etcd, read-only (an HA RM's own routes, a standby's included).
    Etcd(&'a crate::ha::cancelled_tokens::CancelledTokens),
}

impl Cancellations<'_> {
    async fn is_cancelled(&self, seq: u64) -> Result<bool, ApiError> {
        match self {
            Cancellations::Driver(d) => is_cancelled(d, seq).await.map_err(ApiError::from),
            Cancellations::Etcd(t) => t
                .is_cancelled(seq)
                .await
                .map_err(|e| ApiError::new(ExceptionKind::ServiceUnavailable, e.to_string())),
        }
    }
}

/// Why the edge refused to tell who the caller is (each a 401).
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unauthenticated {
    #[error("Authentication required: this ResourceManager runs with hadoop.http.authentication.type=token; send a token as 'Authorization: Bearer <token>' (an operator mints one with `spindle token -issue -user USER`; clients read $SPINDLE_TOKEN or $SPINDLE_TOKEN_FILE)")]
    NoToken,
    #[error("Authentication failed: {0}")]
    BadToken(UserTokenError),
    #[error("Authentication failed: the token (sequence number {0}) has been cancelled")]
    Cancelled(u64),
    #[error("Authentication required: anonymous requests are disallowed (hadoop.http.authentication.simple.anonymous.allowed=false); name the caller with ?user.name=USER")]
    Anonymous,
}

/// The token a request presents: `Authorization: Bearer`, else YARN's header.
fn presented_token(headers: &HeaderMap) -> Option<String> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, rest) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        });
    bearer
        .or_else(|| {
            headers
                .get(DELEGATION_TOKEN_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
        })
        .filter(|t| !t.is_empty())
        .map(str::to_string)
}

/// The query's pairs, decoded as the handlers' `Query` decodes them (an undecodable query
/// reads as none; the handler refuses it).
fn query_pairs(uri: &Uri) -> Vec<(String, String)> {
    axum::extract::Query::<Vec<(String, String)>>::try_from_uri(uri)
        .map(|q| q.0)
        .unwrap_or_default()
}

/// `application/x-www-form-urlencoded` encoding of one key or value.
pub(crate) fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// `uri` with every `user.name` pair replaced by one naming `user`.
fn with_user_name(uri: &Uri, user: &str) -> Option<Uri> {
    let mut pairs: Vec<(String, String)> = query_pairs(uri)
        .into_iter()
        .filter(|(k, _)| k != "user.name")
        .collect();
    pairs.push(("user.name".into(), user.into()));
    let query: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{}={}", form_encode(k), form_encode(v)))
        .collect();
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(format!("{}?{}", uri.path(), query.join("&")).parse().ok()?);
    Uri::from_parts(parts).ok()
}

/// The middleware that authenticates every cluster call and audits its refusals (see the
/// module doc).
pub(crate) async fn authenticate(
    State(st): State<AppState>,
    mut req: Request,
    next: Next,
) -> Response {
    let ip = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| req.uri().path().to_string());
    let method = req.method().clone();
    let app_id = path_app_id(&route, req.uri().path());
    let open = OPEN_PATHS.contains(&route.as_str());
    let identity = match identify(
        &st.auth.mode,
        Some(Cancellations::Driver(&st.driver)),
        req.uri(),
        req.headers(),
        open,
    )
    .await
    {
        Ok(i) => i,
        Err(NotIdentified::Unchecked(e)) => return e.into_response(),
        Err(NotIdentified::Refused(user, why)) => {
            let (operation, target) = operation(&method, &route);
            let message = why.to_string();
            let mut e =
                AuditEvent::failure(&user, ip, &operation, target, &message, "Unauthenticated");
            if let Some(a) = &app_id {
                e = e.app(a);
            }
            audit::log(&e);
            return ApiError::new(ExceptionKind::Authorization, message).into_response();
        }
    };
    if let Identity::Token { id, .. } = &identity {
        match with_user_name(req.uri(), &id.owner) {
            Some(uri) => *req.uri_mut() = uri,
            None => {
                return ApiError::bad_request("the request's query cannot be rewritten")
                    .into_response()
            }
        }
    }
    let user = identity.user().to_string();
    req.extensions_mut().insert(identity);
    let resp = next.run(req).await;
    audit_response(resp, &user, ip, &method, &route, app_id.as_deref()).await
}

/// The middleware around the classic HTML pages (`/`, `/cluster/...`; not `/ui`): in `token`
/// mode they list applications, users and queues, so they need a valid token like the REST
/// reads. A browser does not send one on a page load, so in `token` mode the classic pages are
/// in effect replaced by `/ui` (which does send it): `GET /cluster` still answers 200, YARN's
/// liveness probe, with a page saying so; every other page without a token is 401.
pub(crate) async fn guard_pages(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if !st.auth.is_token() || path == "/" || path == "/ui" || path.starts_with("/ui/") {
        return next.run(req).await;
    }
    match identify(
        &st.auth.mode,
        Some(Cancellations::Driver(&st.driver)),
        req.uri(),
        req.headers(),
        false,
    )
    .await
    {
        Ok(_) => next.run(req).await,
        Err(NotIdentified::Unchecked(e)) => e.into_response(),
        Err(NotIdentified::Refused(..)) if path == "/cluster" || path == "/cluster/" => (
            StatusCode::OK,
            axum::response::Html(
                "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>Spindle</title></head><body>\
<p>This ResourceManager authenticates its users with tokens (hadoop.http.authentication.type=token): \
open <a href=\"/ui\">the web UI</a> and give it your token.</p></body></html>",
            ),
        )
            .into_response(),
        Err(NotIdentified::Refused(user, why)) => {
            let ip = req
                .extensions()
                .get::<ConnectInfo<SocketAddr>>()
                .map(|c| c.0.ip());
            let message = why.to_string();
            let op = format!("GET {path}");
            audit::log(&AuditEvent::failure(
                &user,
                ip,
                &op,
                "RMWebApp",
                &message,
                "Unauthenticated",
            ));
            ApiError::new(ExceptionKind::Authorization, message).into_response()
        }
    }
}

/// The caller's identity, or why it is not known. `cancellations` answers whether a token
/// was cancelled; without it a token is checked for its signature and dates only.
pub(crate) async fn identify(
    mode: &AuthMode,
    cancellations: Option<Cancellations<'_>>,
    uri: &Uri,
    headers: &HeaderMap,
    open: bool,
) -> Result<Identity, NotIdentified> {
    let refused = |user: &str, why| NotIdentified::Refused(user.to_string(), why);
    match mode {
        AuthMode::Simple { anonymous_allowed } => {
            let named = query_pairs(uri)
                .into_iter()
                .rev()
                .find(|(k, _)| k == "user.name")
                .map(|(_, v)| v.trim().to_string())
                .filter(|v| !v.is_empty());
            match named {
                Some(_) => {
                    let q: HashMap<String, String> = query_pairs(uri).into_iter().collect();
                    Ok(Identity::Simple(super::caller(&q)))
                }
                None if *anonymous_allowed || open => Ok(Identity::Simple(ANONYMOUS.into())),
                None => Err(refused(ANONYMOUS, Unauthenticated::Anonymous)),
            }
        }
        AuthMode::Token { key, .. } => match presented_token(headers) {
            None if open => Ok(Identity::Anonymous),
            None => Err(refused(ANONYMOUS, Unauthenticated::NoToken)),
            Some(token) => {
                let id = key
                    .verify(&token, now_ms())
                    .map_err(|e| refused(ANONYMOUS, Unauthenticated::BadToken(e)))?;
                let seq = id.sequence_number;
                let Some(cancellations) = cancellations else {
                    return Ok(Identity::Token { id, token });
                };
                match cancellations.is_cancelled(seq).await {
                    Ok(false) => Ok(Identity::Token { id, token }),
                    Ok(true) => Err(refused(&id.owner, Unauthenticated::Cancelled(seq))),
                    Err(e) => Err(NotIdentified::Unchecked(e)),
                }
            }
        },
    }
}

/// The application a route names in its path (`{appid}`), as the caller wrote it.
fn path_app_id(route: &str, path: &str) -> Option<String> {
    let i = route.split('/').position(|s| s == "{appid}")?;
    path.split('/').nth(i).map(str::to_string)
}

/// Audits a handler's answer: a 401 or 403 as a failure (its `RemoteException` message as
/// the description), a successful write as a success.
async fn audit_response(
    resp: Response,
    user: &str,
    ip: Option<IpAddr>,
    method: &Method,
    route: &str,
    app_id: Option<&str>,
) -> Response {
    let status = resp.status();
    let refused = status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN;
    let write = method != Method::GET && method != Method::HEAD && method != Method::OPTIONS;
    let audited_write = write && status.is_success();
    if !refused && !audited_write {
        return resp;
    }
    let (operation, target) = operation(method, route);
    if !refused {
        // A submission names its application in the Location it answers.
        let located = resp
            .headers()
            .get(header::LOCATION)
            .and_then(|l| l.to_str().ok())
            .and_then(|l| l.rsplit('/').next())
            .filter(|id| id.starts_with("application_"))
            .map(str::to_string);
        let mut e = AuditEvent::success(user, ip, &operation, target);
        if let Some(a) = app_id.or(located.as_deref()) {
            e = e.app(a);
        }
        audit::log(&e);
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let bytes = axum::body::to_bytes(body, MAX_AUDITED_BODY)
        .await
        .unwrap_or_default();
    let message = serde_json::from_slice::<RemoteExceptionBody>(&bytes)
        .map(|b| b.remote_exception.message)
        .unwrap_or_default();
    let permissions = if status == StatusCode::UNAUTHORIZED {
        "Unauthenticated"
    } else {
        "Forbidden"
    };
    let mut e = AuditEvent::failure(user, ip, &operation, target, &message, permissions);
    if let Some(a) = app_id {
        e = e.app(a);
    }
    audit::log(&e);
    Response::from_parts(parts, Body::from(bytes))
}

/// The audit's OPERATION and TARGET of a cluster call: YARN's `AuditConstants` names where
/// YARN audits the call (its ClientRMService, AdminService or RMWebServices), else the
/// method and route.
fn operation(method: &Method, route: &str) -> (String, &'static str) {
    const CLIENT: &str = "ClientRMService";
    const ADMIN: &str = "AdminService";
    const WEB: &str = "RMWebService";
    let tail = route.strip_prefix("/ws/v1/cluster").unwrap_or(route);
    let named = match (method.as_str(), tail) {
        ("POST", "/apps") => Some(("Submit Application Request", CLIENT)),
        ("GET", "/apps") => Some(("Get Applications Request", CLIENT)),
        ("POST", "/apps/new-application") => Some(("Get New App", CLIENT)),
        ("GET", "/apps/{appid}") => Some(("Get Application Report", CLIENT)),
        ("GET", "/apps/{appid}/state") => Some(("Get Application State", WEB)),
        ("PUT", "/apps/{appid}/state") => Some(("Kill Application Request", CLIENT)),
        ("GET", "/apps/{appid}/queue") => Some(("Get Application Queue", WEB)),
        ("PUT", "/apps/{appid}/queue") => Some(("Move Application Request", CLIENT)),
        ("GET", "/apps/{appid}/priority") => Some(("Get Application Priority", WEB)),
        ("PUT", "/apps/{appid}/priority") => Some(("Update Application Priority", CLIENT)),
        ("PUT", "/apps/{appid}/timeout") => Some(("Update Application Timeouts", CLIENT)),
        ("GET", "/apps/{appid}/appattempts") => Some(("Get Application Attempts", CLIENT)),
        ("GET", "/apps/{appid}/appattempts/{attemptid}") => {
            Some(("Get Application Attempt Report", CLIENT))
        }
        ("GET", "/apps/{appid}/appattempts/{attemptid}/containers") => {
            Some(("Get Containers", CLIENT))
        }
        ("GET", "/apps/{appid}/appattempts/{attemptid}/containers/{containerid}") => {
            Some(("Get Container Report", CLIENT))
        }
        ("POST", "/delegation-token") => Some(("Get Delegation Token", CLIENT)),
        ("DELETE", "/delegation-token") => Some(("Cancel Delegation Token", CLIENT)),
        ("POST", "/refresh-queues") => Some(("refreshQueues", ADMIN)),
        ("POST", "/refresh-nodes") => Some(("refreshNodes", ADMIN)),
        ("GET", "/users/{user}/groups") => Some(("getGroupsForUser", ADMIN)),
        ("POST", "/add-node-labels") => Some(("addToClusterNodeLabels", ADMIN)),
        ("POST", "/remove-node-labels") => Some(("removeFromClusterNodeLabels", ADMIN)),
        ("POST", "/replace-node-to-labels") | ("POST", "/nodes/{nodeid}/replace-labels") => {
            Some(("replaceLabelsOnNode", ADMIN))
        }
        ("POST", "/node-attributes-mapping") => Some(("nodesToAttributesMapping", ADMIN)),
        ("PUT", "/scheduler-conf") => Some(("updateSchedulerConfiguration", WEB)),
        ("GET", "/scheduler-conf") => Some(("getSchedulerConfiguration", WEB)),
        _ => None,
    };
    match named {
        Some((op, target)) => (op.to_string(), target),
        None => (format!("{method} {route}"), WEB),
    }
}

/// `token` mode: a submission to a queue whose submit ACL refuses the (authenticated) caller
/// is refused at once, 403 with YARN's `AccessControlException` words, instead of being
/// accepted and FAILED as in `simple` mode. The queue checked is the one the core would place
/// the submission in (after its queue mappings); a submission to an unknown queue is left to
/// the scheduler, which fails it with its own words. If the driver cannot answer, the
/// submission is refused with that error.
pub(crate) async fn check_submit_acl(
    st: &AppState,
    id: &spindle_common::ApplicationId,
    sub: &crate::core::Submission,
) -> Result<(), ApiError> {
    if !st.auth.is_token() {
        return Ok(());
    }
    let submission = Box::new(sub.clone());
    let access = st
        .driver
        .call(|reply| crate::driver::QueryCommand::SubmitAccess { submission, reply })
        .await?;
    match access {
        Some((queue, false)) => Err(ApiError::new(
            ExceptionKind::Forbidden,
            format!(
                "org.apache.hadoop.security.AccessControlException: User {} does not have permission to submit {id} to queue {queue}",
                sub.user
            ),
        )),
        Some((_, true)) | None => Ok(()),
    }
}

pub(super) fn routes() -> Router<AppState> {
    Router::new().route(
        "/ws/v1/cluster/delegation-token",
        post(issue_token).delete(cancel_token),
    )
}

/// YARN's refusal of a token operation on a channel that did not authenticate with one.
const NOT_TOKEN_CHANNEL: &str = "Delegation token operations can only be carried out on a token authenticated channel (hadoop.http.authentication.type=token)";

/// `POST /delegation-token {"renewer": R}`: a new token for the caller (its owner), valid
/// for `yarn.resourcemanager.delegation.token.max-lifetime` but never past the max date of
/// the token the caller presented.
async fn issue_token(
    State(st): State<AppState>,
    Extension(identity): Extension<Identity>,
    JsonBody(body): JsonBody<DelegationToken>,
) -> Result<Json<DelegationToken>, ApiError> {
    let (
        AuthMode::Token {
            key,
            max_lifetime_ms,
            ..
        },
        Identity::Token { id: caller, .. },
    ) = (&st.auth.mode, &identity)
    else {
        return Err(ApiError::new(ExceptionKind::Forbidden, NOT_TOKEN_CHANNEL));
    };
    let now = now_ms();
    let until = now.saturating_add(*max_lifetime_ms).min(caller.max_date);
    let renewer = body.renewer.unwrap_or_default();
    let id = UserTokenIdentifier::new(&caller.owner, &renewer, now, until.saturating_sub(now))
        .map_err(|e| ApiError::bad_request(format!("Invalid renewer: {e}")))?;
    Ok(Json(DelegationToken {
        token: Some(key.issue(&id)),
        renewer: Some(id.renewer.clone()),
        owner: Some(id.owner.clone()),
        kind: Some(user_token::KIND.to_string()),
        expiration_time: Some(id.max_date),
        max_validity: Some(id.max_date),
    }))
}

/// `DELETE /delegation-token` with `Hadoop-YARN-RM-Delegation-Token: <token>` (else the
/// caller's own token): cancels it, if the caller is its owner or renewer. From then on it is
/// refused (401), across restarts too (the state store keeps it).
async fn cancel_token(
    State(st): State<AppState>,
    Extension(identity): Extension<Identity>,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    let (AuthMode::Token { key, .. }, Identity::Token { id: caller, token }) =
        (&st.auth.mode, &identity)
    else {
        return Err(ApiError::new(ExceptionKind::Forbidden, NOT_TOKEN_CHANNEL));
    };
    let named = headers
        .get(DELEGATION_TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .unwrap_or(token);
    let now = now_ms();
    let target = match key.verify(named, now) {
        Ok(id) => id,
        // An expired token is refused anyway: nothing to cancel.
        Err(UserTokenError::Expired { .. }) => return Ok(StatusCode::OK),
        Err(e) => {
            return Err(ApiError::bad_request(format!(
                "{DELEGATION_TOKEN_HEADER} does not hold a token of this ResourceManager: {e}"
            )))
        }
    };
    if caller.owner != target.owner && caller.owner != target.renewer {
        return Err(ApiError::new(
            ExceptionKind::Forbidden,
            format!(
                "User {} is not authorized to cancel the token (owner {}, renewer {})",
                caller.owner, target.owner, target.renewer
            ),
        ));
    }
    // Stored first: once answered, a restarted RM refuses it too.
    let (seq, max_date) = (target.sequence_number, target.max_date);
    st.driver
        .call(|reply| crate::driver::AdminCommand::CancelUserToken {
            seq,
            max_date,
            reply,
        })
        .await?;
    Ok(StatusCode::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_comes_from_bearer_else_yarns_header() {
        let mut h = HeaderMap::new();
        assert_eq!(presented_token(&h), None);
        h.insert(DELEGATION_TOKEN_HEADER, "yarn-tok".parse().unwrap());
        assert_eq!(presented_token(&h).as_deref(), Some("yarn-tok"));
        h.insert(header::AUTHORIZATION, "Bearer  abc.def ".parse().unwrap());
        assert_eq!(presented_token(&h).as_deref(), Some("abc.def"));
        h.insert(header::AUTHORIZATION, "Basic xyz".parse().unwrap());
        assert_eq!(presented_token(&h).as_deref(), Some("yarn-tok"));
    }

    #[test]
    fn user_name_is_replaced_by_the_owner() {
        let uri: Uri = "/ws/v1/cluster/apps/x/state?user.name=bob&user%2Ename=eve&a=1%262"
            .parse()
            .unwrap();
        let out = with_user_name(&uri, "alice").unwrap();
        assert_eq!(out.path(), "/ws/v1/cluster/apps/x/state");
        let pairs = query_pairs(&out);
        assert_eq!(
            pairs,
            vec![
                ("a".to_string(), "1&2".to_string()),
                ("user.name".to_string(), "alice".to_string())
            ]
        );
        let bare: Uri = "/ws/v1/cluster/apps".parse().unwrap();
        assert_eq!(
            with_user_name(&bare, "a+b%c").unwrap().query(),
            Some("user.name=a%2Bb%25c")
        );
    }

    #[test]
    fn operations_are_named_as_yarn_audits_them() {
        assert_eq!(
            operation(&Method::PUT, "/ws/v1/cluster/apps/{appid}/state"),
            ("Kill Application Request".to_string(), "ClientRMService")
        );
        assert_eq!(
            operation(&Method::POST, "/ws/v1/cluster/apps"),
            ("Submit Application Request".to_string(), "ClientRMService")
        );
        assert_eq!(
            operation(&Method::GET, "/ws/v1/cluster/nodes"),
            ("GET /ws/v1/cluster/nodes".to_string(), "RMWebService")
        );
        assert_eq!(
            path_app_id(
                "/ws/v1/cluster/apps/{appid}/state",
                "/ws/v1/cluster/apps/application_1_0001/state"
            )
            .as_deref(),
            Some("application_1_0001")
        );
        assert_eq!(
            path_app_id("/ws/v1/cluster/apps", "/ws/v1/cluster/apps"),
            None
        );
    }
}
