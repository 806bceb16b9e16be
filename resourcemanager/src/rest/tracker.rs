//! `/ws/v1/node-tracker/...`: the ResourceTracker protocol NodeManagers speak.

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use spindle_common::records::tracker::*;

use super::{check_resource, ApiError, AppState, JsonBody};
use crate::core::{
    ContainerGpuUse, GpuSample, IgnoredGpuUse, NodeAction as CoreAction, NodeRegistration,
    ReportedContainer,
};
use crate::driver::{NodeBeat, NodeCommand, SelfReport, SelfReportRefusals};
use tracing::{debug, warn};

/// The node-tracker routes, each behind the cluster-secret check (`node_auth`; a no-op when
/// `auth` is `None`).
pub(super) fn routes(auth: Option<std::sync::Arc<super::node_auth::NodeAuth>>) -> Router<AppState> {
    Router::new()
        .route("/ws/v1/node-tracker/register", post(register))
        .route("/ws/v1/node-tracker/heartbeat", post(heartbeat))
        .route("/ws/v1/node-tracker/unregister", post(unregister))
        .route_layer(axum::middleware::from_fn_with_state(
            auth,
            super::node_auth::check,
        ))
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
    let says = SelfReport {
        labels,
        attributes: (!foreign.is_empty()).then_some(foreign),
        images: node_images(req.node_images),
        pull_failures: Vec::new(),
    };
    let r = st
        .driver
        .call(|reply| NodeCommand::Register {
            registration: Box::new(reg),
            says,
            reply,
        })
        .await?;
    if let Some(why) = r.refused {
        return Ok(Json(RegisterNodeManagerResponse {
            node_action: NodeAction::SHUTDOWN,
            rm_identifier: r.rm_identifier,
            container_token_master_key: None,
            heartbeat_interval_ms: r.interval_ms,
            rm_version: env!("CARGO_PKG_VERSION").into(),
            are_node_labels_accepted_by_rm: false,
            are_node_attributes_accepted_by_rm: false,
            diagnostics_message: why.to_string(),
        }));
    }
    let refused = r.self_report;
    Ok(Json(RegisterNodeManagerResponse {
        node_action: NodeAction::NORMAL,
        rm_identifier: r.rm_identifier,
        container_token_master_key: Some(super::master_key::for_node(
            st.info.conf.cluster_secret.as_ref(),
            &r.container_key,
        )?),
        heartbeat_interval_ms: r.interval_ms,
        rm_version: env!("CARGO_PKG_VERSION").into(),
        are_node_labels_accepted_by_rm: refused.labels.is_none(),
        are_node_attributes_accepted_by_rm: refused.attributes.is_none(),
        diagnostics_message: diagnostics(&refused),
    }))
}

async fn heartbeat(
    State(st): State<AppState>,
    JsonBody(req): JsonBody<NodeHeartbeatRequest>,
) -> Result<Json<NodeHeartbeatResponse>, ApiError> {
    let status = req.node_status;
    let node = req.node_id;
    let beat = NodeBeat {
        containers: reports(status.containers_statuses)?,
        gpu: gpu_uses(&node, status.containers_gpu_utilization),
        node: node.clone(),
        healthy: status.healthy,
        report: status.health_report,
        says: SelfReport {
            labels: req.node_labels,
            attributes: req.node_attributes,
            images: node_images(req.node_images),
            pull_failures: pull_failures(req.node_image_pull_failures),
        },
    };
    let last_known_key = req.last_known_container_token_master_key;
    let answer = st
        .driver
        .call(|reply| NodeCommand::Heartbeat {
            beat: Box::new(beat),
            reply,
        })
        .await?;
    for i in answer.ignored_gpu {
        match i {
            IgnoredGpuUse::NotRunning(c) => {
                debug!(node_id = %node, container_id = %c,
                    "GPU sample of a container that is not running ignored")
            }
            IgnoredGpuUse::OtherNode(c) => {
                warn!(node_id = %node, container_id = %c,
                    "GPU sample of a container that runs on another node ignored")
            }
        }
    }
    let (r, refused) = (answer.reply, answer.refused);
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
        container_token_master_key: super::master_key::if_changed(
            st.info.conf.cluster_secret.as_ref(),
            last_known_key.as_ref(),
            &answer.container_key,
        )?,
        are_node_labels_accepted_by_rm: refused.labels.is_none(),
        are_node_attributes_accepted_by_rm: refused.attributes.is_none(),
        images_to_prefetch: answer.images_to_prefetch,
        diagnostics_message: [r.diagnostics, diagnostics(&refused)]
            .into_iter()
            .filter(|d| !d.is_empty())
            .collect::<Vec<_>>()
            .join("; "),
    }))
}

/// The heartbeat's GPU samples the core can take: a GPU whose utilization is not a number
/// from 0 to 100 (or whose memory or temperature is negative or not finite) is left out with
/// a warning, and a container left without GPUs is dropped. Old NMs send none.
fn gpu_uses(
    node: &spindle_common::NodeId,
    list: Vec<ContainerGpuUtilization>,
) -> Vec<ContainerGpuUse> {
    let mut out = Vec::new();
    for c in list {
        let mut gpus = Vec::new();
        for g in c.gpus {
            let util_ok =
                g.utilization_percent.is_finite() && (0.0..=100.0).contains(&g.utilization_percent);
            let temp_ok = g.temperature_c.is_none_or(f64::is_finite);
            if !util_ok || !temp_ok {
                warn!(node_id = %node, container_id = %c.container_id, gpu = g.index,
                    utilization = g.utilization_percent, temperature = ?g.temperature_c,
                    "GPU sample ignored: utilizationPercent must be from 0 to 100 and temperatureC finite");
                continue;
            }
            gpus.push(GpuSample {
                index: g.index,
                minor: g.minor_number,
                utilization: g.utilization_percent,
                memory_used_mib: g.memory_used_mib,
                temperature_c: g.temperature_c,
            });
        }
        if !gpus.is_empty() {
            out.push(ContainerGpuUse {
                container: c.container_id,
                gpus,
            });
        }
    }
    out
}

/// The refusals of what the NM said of itself, for `diagnosticsMessage`.
/// The NM's images as the core keeps them: names normalized as asks' images are (a name
/// that is no image reference is dropped), digests only when they are `sha256:<hex>`.
fn node_images(list: Option<Vec<NodeImageInfo>>) -> Option<Vec<crate::core::images::NodeImage>> {
    use spindle_common::image_ref::ImageRef;
    let digest_ok = |d: &str| {
        d.strip_prefix("sha256:")
            .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    let list = list?;
    Some(
        list.into_iter()
            .map(|i| crate::core::images::NodeImage {
                names: i
                    .names
                    .iter()
                    .filter_map(|n| ImageRef::parse(n).ok())
                    .map(|r| r.to_string())
                    .collect(),
                digest: Some(i.digest).filter(|d| digest_ok(d)).unwrap_or_default(),
                size_bytes: i.size_bytes,
            })
            .collect(),
    )
}

/// Most failures taken from one heartbeat, and most characters of a reason kept.
const MAX_PULL_FAILURES_PER_BEAT: usize = 16;
const MAX_REASON_CHARS: usize = 500;

/// Failed pulls as the core keeps them (bounded; `at` is set by the core's clock).
fn pull_failures(list: Vec<ImagePullFailureInfo>) -> Vec<crate::core::images::PullFailure> {
    list.into_iter()
        .take(MAX_PULL_FAILURES_PER_BEAT)
        .filter_map(|f| {
            let image = spindle_common::image_ref::ImageRef::parse(&f.image).ok()?;
            Some(crate::core::images::PullFailure {
                image: image.to_string(),
                reason: f.reason.chars().take(MAX_REASON_CHARS).collect(),
                at: 0,
            })
        })
        .collect()
}

fn diagnostics(refused: &SelfReportRefusals) -> String {
    [
        refused.labels.as_ref(),
        refused.attributes.as_ref(),
        refused.images.as_ref(),
    ]
    .into_iter()
    .flatten()
    .map(ToString::to_string)
    .collect::<Vec<_>>()
    .join("; ")
}

async fn unregister(
    State(st): State<AppState>,
    JsonBody(req): JsonBody<UnRegisterNodeManagerRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    st.driver
        .call(|reply| NodeCommand::Unregister(req.node_id, reply))
        .await?;
    Ok(Json(serde_json::json!({})))
}
