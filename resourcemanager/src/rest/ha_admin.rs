//! `/ws/v1/ha/*`: Spindle's REST form of YARN's `HAServiceProtocol` on each RM, for
//! `rmadmin -getServiceState`, `-getAllServiceState`, `-transitionToActive` and
//! `-transitionToStandby`. Served by the HA front in both states (a standby answers these
//! itself, never redirecting). Admin-only as YARN's `AdminService` (`yarn.admin.acl` when
//! `yarn.acl.enable` is true); the caller is authenticated as on `/ws/v1/cluster` (in `token`
//! mode a token's signature and dates, and its cancellation read from etcd
//! ([`crate::ha::cancelled_tokens`]), so a standby with no store open refuses a cancelled
//! token too).
//!
//! - `GET /ws/v1/ha/state`: [`HaStatusInfo`];
//! - `POST /ws/v1/ha/transition-to-active[?forcemanual=true]` and
//!   `POST /ws/v1/ha/transition-to-standby[?forcemanual=true]`: 200 with the new state once
//!   done; 409 under automatic failover without `forcemanual`, or when another RM is active.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, Query, State};
use axum::http::{HeaderMap, Uri};
use axum::routing::{get, post, put};
use axum::{Extension, Json, Router};
use spindle_common::records::admin::HaStatusInfo;
use spindle_common::records::exception::ExceptionKind;
use spindle_rest_edge::audit::{self, AuditEvent};

use super::auth::{identify, Cancellations, NotIdentified};
use super::groups::Groups;
use super::ApiError;
use crate::config::auth::AuthMode;
use crate::config::RmConfig;
use crate::core::queue_conf::Acl;
use crate::ha::cancelled_tokens::CancelledTokens;
use crate::ha::control::{HaControl, Transition, TransitionError};

/// The HA admin routes' state.
#[derive(Clone)]
struct HaAdmin {
    control: HaControl,
    mode: AuthMode,
    admin_acl: Acl,
    acl_enabled: bool,
    groups: Arc<Groups>,
    /// How long a `-transitionToActive` waits for the RM to become active.
    activation_wait: Duration,
    /// The cancelled tokens, read from etcd (`token` mode under HA).
    cancelled: Option<Arc<CancelledTokens>>,
}

/// The routes, for the RM whose election `control` reaches.
pub fn routes(conf: &RmConfig, control: HaControl, lease: Duration) -> Router {
    let st = HaAdmin {
        control,
        mode: conf.auth.mode.clone(),
        admin_acl: conf.scheduler_site.admin_acl.clone(),
        acl_enabled: conf.scheduler_site.acl_enabled,
        groups: Arc::new(Groups::new(conf.groups.clone())),
        // Within the clients' 30 s request timeout.
        activation_wait: (lease * 3 + Duration::from_secs(10)).min(Duration::from_secs(25)),
        cancelled: conf
            .ha
            .as_ref()
            .filter(|_| matches!(conf.auth.mode, AuthMode::Token { .. }))
            .map(|ha| Arc::new(CancelledTokens::new(ha.etcd.clone(), ha.keys.clone()))),
    };
    Router::new()
        .route("/ws/v1/ha/state", get(state))
        .route("/ws/v1/ha/transition-to-active", post(to_active))
        .route("/ws/v1/ha/transition-to-standby", post(to_standby))
        .fallback(spindle_rest_edge::not_found)
        .method_not_allowed_fallback(spindle_rest_edge::method_not_allowed)
        .with_state(st)
}

/// The same paths on an RM without HA: each a 400 saying so (YARN's `rmadmin` refuses
/// its HA commands when HA is not enabled), so that a client learns why rather than a 404.
pub(crate) fn single_rm_routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    async fn not_enabled() -> ApiError {
        ApiError::bad_request(
            "ResourceManager HA is not enabled (yarn.resourcemanager.ha.enabled is false): \
             this is the only ResourceManager, always active",
        )
    }
    Router::new()
        .route("/ws/v1/ha/state", get(not_enabled))
        .route("/ws/v1/ha/transition-to-active", post(not_enabled))
        .route("/ws/v1/ha/transition-to-standby", post(not_enabled))
        .route("/ws/v1/ha/blobs/{digest}", put(not_enabled))
        .route("/ws/v1/ha/blobs/{digest}/apps/{appid}", put(not_enabled))
}

type Q = Query<HashMap<String, String>>;
type Peer = Option<Extension<ConnectInfo<SocketAddr>>>;

/// The admin check of `operation`: the caller's identity, then `yarn.admin.acl`. Refusals
/// are audited.
async fn admin(
    st: &HaAdmin,
    uri: &Uri,
    headers: &HeaderMap,
    peer: &Peer,
    operation: &str,
) -> Result<String, ApiError> {
    let ip = peer.as_ref().map(|c| c.0 .0.ip());
    let audit_refusal = |user: &str, message: &str, permissions: &str| {
        audit::log(&AuditEvent::failure(
            user,
            ip,
            operation,
            "AdminService",
            message,
            permissions,
        ));
    };
    let cancellations = st.cancelled.as_deref().map(Cancellations::Etcd);
    let identity = match identify(&st.mode, cancellations, uri, headers, false).await {
        Ok(i) => i,
        Err(NotIdentified::Refused(user, why)) => {
            let message = why.to_string();
            audit_refusal(&user, &message, "Unauthenticated");
            return Err(ApiError::new(ExceptionKind::Authorization, message));
        }
        Err(NotIdentified::Unchecked(e)) => return Err(e),
    };
    let user = identity.user().to_string();
    let groups = st.groups.of(&user).await;
    if st.acl_enabled && !st.admin_acl.allows(&user, &groups) {
        let message = format!("User {user} doesn't have permission to call '{operation}'");
        audit_refusal(&user, &message, "Forbidden");
        return Err(ApiError::new(ExceptionKind::Forbidden, message));
    }
    Ok(user)
}

fn status(c: &HaControl) -> HaStatusInfo {
    HaStatusInfo {
        rm_id: c.rm_id.clone(),
        ha_state: c.state().as_str().to_string(),
        connection_state: c.connection().as_str().to_string(),
        automatic_failover: c.automatic_failover,
        active_rm_id: c.leader(),
    }
}

async fn state(
    State(st): State<HaAdmin>,
    uri: Uri,
    headers: HeaderMap,
    peer: Peer,
) -> Result<Json<HaStatusInfo>, ApiError> {
    admin(&st, &uri, &headers, &peer, "getServiceState").await?;
    Ok(Json(status(&st.control)))
}

async fn to_active(
    st: State<HaAdmin>,
    q: Q,
    uri: Uri,
    headers: HeaderMap,
    peer: Peer,
) -> Result<Json<HaStatusInfo>, ApiError> {
    transition(st, q, uri, headers, peer, Transition::ToActive).await
}

async fn to_standby(
    st: State<HaAdmin>,
    q: Q,
    uri: Uri,
    headers: HeaderMap,
    peer: Peer,
) -> Result<Json<HaStatusInfo>, ApiError> {
    transition(st, q, uri, headers, peer, Transition::ToStandby).await
}

async fn transition(
    State(st): State<HaAdmin>,
    Query(q): Q,
    uri: Uri,
    headers: HeaderMap,
    peer: Peer,
    to: Transition,
) -> Result<Json<HaStatusInfo>, ApiError> {
    let operation = to.command();
    let user = admin(&st, &uri, &headers, &peer, operation).await?;
    let forced = q
        .get("forcemanual")
        .is_some_and(|v| v.is_empty() || v.eq_ignore_ascii_case("true"));
    let done = tokio::time::timeout(st.activation_wait, st.control.transition(to, forced))
        .await
        .unwrap_or(Err(TransitionError::NotActiveInTime {
            secs: st.activation_wait.as_secs(),
        }));
    let ip = peer.as_ref().map(|c| c.0 .0.ip());
    match done {
        Ok(()) => {
            audit::log(&AuditEvent::success(&user, ip, operation, "AdminService"));
            Ok(Json(status(&st.control)))
        }
        Err(e) => {
            let kind = match &e {
                TransitionError::AutomaticFailover | TransitionError::OtherActive { .. } => {
                    ExceptionKind::Conflict
                }
                TransitionError::NotConnected
                | TransitionError::Resign(_)
                | TransitionError::Election(_)
                | TransitionError::NotActiveInTime { .. }
                | TransitionError::Stopping => ExceptionKind::ServiceUnavailable,
            };
            let message = e.to_string();
            audit::log(&AuditEvent::failure(
                &user,
                ip,
                operation,
                "AdminService",
                &message,
                "",
            ));
            Err(ApiError::new(kind, message))
        }
    }
}
