//! The REST edge of container authorization: the calls that act on containers (stop,
//! release, signal, re-initialize, update) carry `Authorization: Bearer <container token>`
//! of a container of the application that owns every container the call names (the AM has
//! them from its allocate answers). The container actor says whose the token is
//! ([`crate::manager::NmHandle::authorize`]); here that application is compared with each
//! named container's (a container id names its application). A refusal is a
//! `RemoteException`, 401 (no token, not a token of this cluster's RM for this node) or 403
//! (another application's token), nothing is done, and the refusal is written to the audit
//! log (YARN's operation names, target `ContainerManageImpl`).
//!
//! Must not: decide anything about the containers themselves (the actor does).

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use spindle_common::ids::ContainerId;
use spindle_common::records::exception::ExceptionKind;
use spindle_rest_edge::audit::{self, AuditEvent};
use spindle_rest_edge::ApiError;

use crate::manager::{ContainerAuthError, NmHandle, TokenOwner};

/// The audit target of these calls (YARN's `NMAuditLogger` target).
pub const AUDIT_TARGET: &str = "ContainerManageImpl";

/// YARN's operation names, for the audit log.
pub mod operation {
    pub const STOP: &str = "Stop Container Request";
    pub const RELEASE: &str = "Release Container Request";
    pub const SIGNAL: &str = "Signal Container Request";
    pub const REINITIALIZE: &str = "Re-Initialize Container Request";
    pub const UPDATE: &str = "Update Container Request";
}

/// What a request says about its caller: the `Authorization` header and the peer address.
/// Never rejects; a missing header is decided by [`authorize`].
#[derive(Debug, Clone)]
pub struct Bearer {
    header: Option<String>,
    ip: Option<IpAddr>,
}

impl<S: Send + Sync> FromRequestParts<S> for Bearer {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self {
            header: parts
                .headers
                .get(AUTHORIZATION)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()),
            ip: parts
                .extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map(|c| c.0.ip()),
        })
    }
}

/// The token of `Authorization: Bearer <token>`.
fn bearer_token(header: Option<&str>) -> Result<&str, ContainerAuthError> {
    let h = header.map(str::trim).filter(|h| !h.is_empty());
    let h = h.ok_or(ContainerAuthError::Missing)?;
    let (scheme, token) = h.split_once(' ').ok_or(ContainerAuthError::NotBearer)?;
    if !scheme.eq_ignore_ascii_case("bearer") || token.trim().is_empty() {
        return Err(ContainerAuthError::NotBearer);
    }
    Ok(token.trim())
}

/// Checks that the bearer token proves the application of every container in `containers`;
/// on refusal writes the audit line and answers the `RemoteException`.
pub async fn authorize(
    handle: &NmHandle,
    bearer: &Bearer,
    op: &'static str,
    containers: &[ContainerId],
) -> Result<TokenOwner, ApiError> {
    let verdict = match bearer_token(bearer.header.as_deref()) {
        Err(e) => Err((e, None)),
        Ok(token) => match handle.authorize(token.to_string()).await? {
            Err(e) => Err((e, None)),
            Ok(owner) => match containers
                .iter()
                .find(|c| c.application_id() != owner.application())
            {
                Some(c) => Err((
                    ContainerAuthError::OtherApplication {
                        container: *c,
                        owner: c.application_id(),
                        token_app: owner.application(),
                    },
                    Some(owner),
                )),
                None => Ok(owner),
            },
        },
    };
    let (e, owner) = match verdict {
        Ok(owner) => return Ok(owner),
        Err(x) => x,
    };
    let user = owner.as_ref().map_or("dr.who", |o| o.user.as_str());
    let description = e.to_string();
    let container = containers.first().map(ToString::to_string);
    let app = containers.first().map(|c| c.application_id().to_string());
    let mut ev = AuditEvent::failure(
        user,
        bearer.ip,
        op,
        AUDIT_TARGET,
        &description,
        if e.is_forbidden() {
            "Not the application's container token"
        } else {
            "Unauthenticated"
        },
    );
    if let Some(a) = &app {
        ev = ev.app(a);
    }
    if let Some(c) = &container {
        ev = ev.container(c);
    }
    audit::log(&ev);
    let kind = if e.is_forbidden() {
        ExceptionKind::Forbidden
    } else {
        ExceptionKind::Authorization
    };
    Err(ApiError::new(kind, description))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_bearer_header_carries_a_token() {
        assert_eq!(bearer_token(None), Err(ContainerAuthError::Missing));
        assert_eq!(bearer_token(Some("  ")), Err(ContainerAuthError::Missing));
        assert_eq!(
            bearer_token(Some("Basic abc")),
            Err(ContainerAuthError::NotBearer)
        );
        assert_eq!(
            bearer_token(Some("Bearer")),
            Err(ContainerAuthError::NotBearer)
        );
        assert_eq!(bearer_token(Some("Bearer  t.x ")), Ok("t.x"));
        assert_eq!(bearer_token(Some("bearer t")), Ok("t"));
    }
}
