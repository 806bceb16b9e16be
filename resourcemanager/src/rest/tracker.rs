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
    let node = req.node_id.clone();
    let labels = req.node_labels;
    // An NM speaks only for `nm.yarn.io/`: anything else is kept out of the registration
    // and refused by name through the self-report below.
    let mut attributes = req.node_attributes;
    let foreign: std::collections::BTreeMap<String, String> = attributes
        .iter()
        .filter(|(k, _)| !k.starts_with(crate::core::labels::NM_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    attributes.retain(|k, _| k.starts_with(crate::core::labels::NM_PREFIX));
    let reg = NodeRegistration {
        id: req.node_id,
        http_address: req.http_address,
        rack,
        total,
        version: req.nm_version,
        containers: reports(req.container_statuses)?,
        attributes,
    };
    let r = st
        .driver
        .call(|reply| Command::RegisterNode(Box::new(reg), reply))
        .await?;
    if let Some(why) = r.refused {
        return Ok(Json(RegisterNodeManagerResponse {
            node_action: NodeAction::SHUTDOWN,
            rm_identifier: r.rm_identifier,
            container_token_secret: String::new(),
            heartbeat_interval_ms: r.interval_ms,
            rm_version: env!("CARGO_PKG_VERSION").into(),
            are_node_labels_accepted_by_rm: false,
            are_node_attributes_accepted_by_rm: false,
            diagnostics_message: why.to_string(),
        }));
    }
    let refused = self_report(&st, node, labels, (!foreign.is_empty()).then_some(foreign)).await?;
    Ok(Json(RegisterNodeManagerResponse {
        node_action: NodeAction::NORMAL,
        rm_identifier: r.rm_identifier,
        container_token_secret: r.secret_hex,
        heartbeat_interval_ms: r.interval_ms,
        rm_version: env!("CARGO_PKG_VERSION").into(),
        are_node_labels_accepted_by_rm: refused.0.is_none(),
        are_node_attributes_accepted_by_rm: refused.1.is_none(),
        diagnostics_message: diagnostics(&refused),
    }))
}

async fn heartbeat(
    State(st): State<AppState>,
    JsonBody(req): JsonBody<NodeHeartbeatRequest>,
) -> Result<Json<NodeHeartbeatResponse>, ApiError> {
    let status = req.node_status;
    let containers = reports(status.containers_statuses)?;
    let node = req.node_id.clone();
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
    let refused = self_report(&st, node, req.node_labels, req.node_attributes).await?;
    Ok(Json(NodeHeartbeatResponse {
        response_id: r.response_id,
        node_action: match r.action {
            CoreAction::Normal => NodeAction::NORMAL,
            CoreAction::Resync => NodeAction::RESYNC,
            CoreAction::Shutdown => NodeAction::SHUTDOWN,
        },
        containers_to_cleanup: r.containers_to_cleanup,
        applications_to_cleanup: r.apps_to_cleanup,
        containers_to_be_removed_from_nm: r.containers_to_remove,
        next_heartbeat_interval_ms: r.interval_ms,
        are_node_labels_accepted_by_rm: refused.0.is_none(),
        are_node_attributes_accepted_by_rm: refused.1.is_none(),
        diagnostics_message: [r.diagnostics, diagnostics(&refused)]
            .into_iter()
            .filter(|d| !d.is_empty())
            .collect::<Vec<_>>()
            .join("; "),
    }))
}

/// Hands what an NM says of itself (labels, attributes) to the core; answers the refusals.
async fn self_report(
    st: &AppState,
    node: spindle_common::NodeId,
    labels: Option<Vec<String>>,
    attributes: Option<std::collections::BTreeMap<String, String>>,
) -> Result<(Option<String>, Option<String>), ApiError> {
    if labels.is_none() && attributes.is_none() {
        return Ok((None, None));
    }
    Ok(st
        .driver
        .call(|reply| Command::NodeSelfReport {
            node,
            labels,
            attributes,
            reply,
        })
        .await?)
}

fn diagnostics(refused: &(Option<String>, Option<String>)) -> String {
    [refused.0.as_deref(), refused.1.as_deref()]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join("; ")
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
