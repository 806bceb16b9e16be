//! REST forms of two `yarn rmadmin` commands that YARN only has over its admin RPC:
//! `POST /ws/v1/cluster/refresh-nodes` (`-refreshNodes [-g [timeout]]`: the RM re-reads the
//! include and exclude host files and decommissions, gracefully or not, the nodes they now
//! keep out) and `GET /ws/v1/cluster/users/{user}/groups` (`-getGroups`: the user's groups
//! as the RM's own lookup resolves them, the ones its ACLs and queue mappings use).

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::http::Extensions;
use axum::routing::{get, post};
use axum::{Json, Router};
use spindle_common::records::admin::{DecommissionType, RefreshNodesInfo, UserGroupsInfo};
use spindle_common::records::exception::ExceptionKind;

use super::schedconf::{audit_failure, remote_ip, AUDIT_REFRESH_NODES};
use super::{ApiError, AppState, PathParams};
use crate::core::DecommissionType as Decommission;
use crate::driver::{AdminCommand, QueryCommand};

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/ws/v1/cluster/refresh-nodes", post(refresh_nodes))
        .route("/ws/v1/cluster/users/{user}/groups", get(user_groups))
}

type Q = Query<HashMap<String, String>>;

/// `decommissionType` and `decommissionTimeout` (YARN's `RefreshNodesRequest` fields) to
/// how the core decommissions; the timeout defaults to
/// `yarn.resourcemanager.nodemanager-graceful-decommission-timeout-secs`.
fn decommission_type(
    q: &HashMap<String, String>,
    default_secs: i64,
) -> Result<Decommission, ApiError> {
    let kind = match q.get("decommissionType").map(|s| s.trim()) {
        None | Some("") => DecommissionType::NORMAL,
        Some(v) => serde_json::from_value(serde_json::Value::String(v.to_ascii_uppercase()))
            .map_err(|_| {
                ApiError::bad_request(format!(
                    "decommissionType `{v}`: expected NORMAL, GRACEFUL or FORCEFUL"
                ))
            })?,
    };
    let timeout = match q.get("decommissionTimeout").map(|s| s.trim()) {
        None | Some("") => None,
        Some(v) => Some(v.parse::<i64>().map_err(|_| {
            ApiError::bad_request(format!(
                "decommissionTimeout `{v}`: expected a number of seconds (negative: no timeout)"
            ))
        })?),
    };
    match kind {
        DecommissionType::GRACEFUL => Ok(Decommission::Graceful {
            timeout_secs: timeout.unwrap_or(default_secs),
        }),
        _ if timeout.is_some() => Err(ApiError::bad_request(
            "decommissionTimeout goes with decommissionType=GRACEFUL",
        )),
        _ => Ok(Decommission::Normal),
    }
}

/// `refreshNodes`: the admin check first (nobody else makes the RM read files), then the
/// host files as yarn-site names them now, then the change. A missing or unreadable file
/// changes nothing and is named in the 400. A refusal is audited (who, from where, why).
async fn refresh_nodes(
    State(st): State<AppState>,
    Query(q): Q,
    ext: Extensions,
) -> Result<Json<RefreshNodesInfo>, ApiError> {
    let caller = st.caller(&q).await;
    let user = caller.user.clone();
    let r = refresh(&st, &q, caller).await;
    if let Err(e) = &r {
        audit_failure(&user, remote_ip(&ext), AUDIT_REFRESH_NODES, e);
    }
    r
}

async fn refresh(
    st: &AppState,
    q: &HashMap<String, String>,
    caller: crate::core::Caller,
) -> Result<Json<RefreshNodesInfo>, ApiError> {
    let who = caller.clone();
    st.driver.call(|r| QueryCommand::CheckAdmin(who, r)).await?;
    let conf = st.info.conf.clone();
    let read = tokio::task::spawn_blocking(move || {
        let hosts = conf.reload_hosts().map_err(|e| e.to_string())?;
        let lists = hosts.read().map_err(|e| e.to_string())?;
        Ok::<_, String>((hosts.graceful_timeout_secs, lists))
    })
    .await
    .map_err(|e| ApiError::new(ExceptionKind::Internal, format!("refreshNodes failed: {e}")))?;
    let (default_secs, hosts) =
        read.map_err(|e| ApiError::bad_request(format!("refreshNodes failed: {e}")))?;
    let how = decommission_type(q, default_secs)?;
    let done = st
        .driver
        .call(|reply| AdminCommand::RefreshNodes {
            hosts,
            how,
            caller,
            reply,
        })
        .await?;
    let names = |v: Vec<spindle_common::NodeId>| v.iter().map(ToString::to_string).collect();
    Ok(Json(RefreshNodesInfo {
        decommissioned: names(done.decommissioned),
        decommissioning: names(done.decommissioning),
        recommissioned: names(done.recommissioned),
    }))
}

/// `getGroups`: as YARN's admin protocol, anyone may ask (the answer is what `id -Gn`
/// says on the RM's host, through the same cache the ACL checks use).
async fn user_groups(
    State(st): State<AppState>,
    PathParams(user): PathParams<String>,
) -> Result<Json<UserGroupsInfo>, ApiError> {
    let groups = st.groups.of(&user).await;
    Ok(Json(UserGroupsInfo { user, groups }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn decommission_types_like_yarn() {
        assert_eq!(
            decommission_type(&q(&[]), 3600).ok(),
            Some(Decommission::Normal)
        );
        assert_eq!(
            decommission_type(&q(&[("decommissionType", "FORCEFUL")]), 3600).ok(),
            Some(Decommission::Normal)
        );
        assert_eq!(
            decommission_type(&q(&[("decommissionType", "graceful")]), 3600).ok(),
            Some(Decommission::Graceful { timeout_secs: 3600 })
        );
        assert_eq!(
            decommission_type(
                &q(&[
                    ("decommissionType", "GRACEFUL"),
                    ("decommissionTimeout", "-1")
                ]),
                3600
            )
            .ok(),
            Some(Decommission::Graceful { timeout_secs: -1 })
        );
        assert!(decommission_type(&q(&[("decommissionType", "SOON")]), 3600).is_err());
        assert!(decommission_type(
            &q(&[
                ("decommissionType", "GRACEFUL"),
                ("decommissionTimeout", "1h")
            ]),
            3600
        )
        .is_err());
        assert!(decommission_type(&q(&[("decommissionTimeout", "30")]), 3600).is_err());
    }
}
