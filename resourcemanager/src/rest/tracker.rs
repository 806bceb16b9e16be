//! `/ws/v1/node-tracker/...`: the ResourceTracker protocol NodeManagers speak.

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use spindle_common::records::tracker::*;

use super::{check_resource, ApiError, AppState, JsonBody};
use crate::core::{NodeAction as CoreAction, NodeRegistration, ReportedContainer};
use crate::driver::Command;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/ws/v1/node-tracker/register", post(register))
        .route("/ws/v1/node-tracker/heartbeat", post(heartbeat))
        .route("/ws/v1/node-tracker/unregister", post(unregister))
}

fn reports(list: Vec<NmContainerReport>) -> Result<Vec<ReportedContainer>, ApiError> {
    list.into_iter()
        .map(|r| {
            let resource = r.resource.to_resource();
            check_resource(&format!("container {}", r.status.container_id), &resource)?;
            Ok(ReportedContainer {
                id: r.status.container_id,
                state: r.status.state,
                exit_status: r.status.exit_status,
                diagnostics: r.status.diagnostics,
                resource,
            })
        })
        .collect()
}

async fn register(
    State(st): State<AppState>,
    JsonBody(req): JsonBody<RegisterNodeManagerRequest>,
) -> Result<Json<RegisterNodeManagerResponse>, ApiError> {
    let total = req.resource.to_resource();
    if total.any_negative() {
        return Err(ApiError::bad_request(format!(
            "node resource {total} has a negative value"
        )));
    }
    check_resource("node resource", &total)?;
    let rack = req
        .rack
        .filter(|r| r.starts_with('/'))
        .unwrap_or_else(|| "/default-rack".into());
    let reg = NodeRegistration {
        id: req.node_id,
        http_address: req.http_address,
        rack,
        total,
        version: req.nm_version,
        containers: reports(req.container_statuses)?,
        attributes: req.node_attributes,
    };
    let r = st
        .driver
        .call(|reply| Command::RegisterNode(Box::new(reg), reply))
        .await?;
    Ok(Json(RegisterNodeManagerResponse {
        node_action: NodeAction::NORMAL,
        rm_identifier: r.rm_identifier,
        container_token_secret: r.secret_hex,
        heartbeat_interval_ms: r.interval_ms,
        diagnostics_message: String::new(),
        rm_version: env!("CARGO_PKG_VERSION").into(),
        are_node_labels_accepted_by_rm: true,
        are_node_attributes_accepted_by_rm: true,
    }))
}

async fn heartbeat(
    State(st): State<AppState>,
    JsonBody(req): JsonBody<NodeHeartbeatRequest>,
) -> Result<Json<NodeHeartbeatResponse>, ApiError> {
    let status = req.node_status;
    let containers = reports(status.containers_statuses)?;
    let r = st
        .driver
        .call(|reply| Command::Heartbeat {
            node: req.node_id,
            healthy: status.healthy,
            report: status.health_report,
            containers,
            reply,
        })
        .await?;
    Ok(Json(NodeHeartbeatResponse {
        response_id: r.response_id,
        node_action: match r.action {
            CoreAction::Normal => NodeAction::NORMAL,
            CoreAction::Resync => NodeAction::RESYNC,
        },
        containers_to_cleanup: r.containers_to_cleanup,
        applications_to_cleanup: r.apps_to_cleanup,
        containers_to_be_removed_from_nm: r.containers_to_remove,
        next_heartbeat_interval_ms: r.interval_ms,
        diagnostics_message: String::new(),
        are_node_labels_accepted_by_rm: true,
        are_node_attributes_accepted_by_rm: true,
    }))
}

async fn unregister(
    State(st): State<AppState>,
    JsonBody(req): JsonBody<UnRegisterNodeManagerRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    st.driver
        .call(|reply| Command::UnregisterNode(req.node_id, reply))
        .await?;
    Ok(Json(serde_json::json!({})))
}
