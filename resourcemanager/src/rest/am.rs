//! `/ws/v1/am/...`: the ApplicationMasterProtocol as JSON. The AM-RM token travels as
//! `Authorization: Bearer <token>`; the driver checks it against the current attempt.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use axum::{Json, Router};
use spindle_common::records::am::*;
use spindle_common::records::exception::ExceptionKind;
use spindle_common::records::resource::ResourceInfo;

use super::{check_resource, ApiError, AppState, JsonBody};
use crate::core::scheduler::gang::{GangPolicy, GangRequest};
use crate::core::AskUpdate;
use crate::driver::AmCommand;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/ws/v1/am/register", post(register))
        .route("/ws/v1/am/allocate", post(allocate))
        .route("/ws/v1/am/finish", post(finish))
}

fn token(headers: &HeaderMap) -> Result<String, ApiError> {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            ApiError::new(
                ExceptionKind::Authorization,
                "missing AMRMToken: send 'Authorization: Bearer <SPINDLE_AMRM_TOKEN>'",
            )
        })
}

async fn register(
    State(st): State<AppState>,
    headers: HeaderMap,
    JsonBody(req): JsonBody<RegisterApplicationMasterRequest>,
) -> Result<Json<RegisterApplicationMasterResponse>, ApiError> {
    let token = token(&headers)?;
    let (max, queue, previous) = st
        .driver
        .call(|reply| AmCommand::Register {
            token,
            host: req.host,
            rpc_port: req.rpc_port,
            tracking_url: req.tracking_url,
            reply,
        })
        .await?;
    let mut types = vec!["MEMORY".to_string(), "CPU".to_string()];
    types.extend(max.extended().map(|(k, _)| k.to_string()));
    Ok(Json(RegisterApplicationMasterResponse {
        maximum_resource_capability: ResourceInfo::from(&max),
        queue,
        containers_from_previous_attempts: previous,
        scheduler_resource_types: types,
    }))
}

async fn allocate(
    State(st): State<AppState>,
    headers: HeaderMap,
    JsonBody(req): JsonBody<AllocateRequest>,
) -> Result<Json<AllocateResponse>, ApiError> {
    let token = token(&headers)?;
    let mut asks = Vec::with_capacity(req.ask.len());
    for a in req.ask {
        if a.num_containers < 0 {
            return Err(ApiError::bad_request(format!(
                "numContainers must not be negative, got {}",
                a.num_containers
            )));
        }
        if a.resource_name.is_empty() {
            return Err(ApiError::bad_request(
                "resourceName must be '*', a rack or a host",
            ));
        }
        let cpu_table = a
            .gang
            .as_ref()
            .map(|g| g.cpu_throughput.clone())
            .unwrap_or_default();
        let gang = match a.gang {
            Some(g) => {
                let id = g.id.trim().to_string();
                if id.is_empty() || id.len() > 256 {
                    return Err(ApiError::bad_request(
                        "gang.id must be a non-empty string of at most 256 characters",
                    ));
                }
                let policy = match g.placement {
                    GangPlacement::PACK => GangPolicy::Pack,
                    GangPlacement::STRICT_PACK => GangPolicy::StrictPack,
                    GangPlacement::SPREAD => GangPolicy::Spread,
                    GangPlacement::SAME_RACK => GangPolicy::SameRack,
                };
                let elastic = crate::wire::elastic_spec(&g, a.num_containers)
                    .map_err(ApiError::bad_request)?;
                let domain = crate::wire::gang_domain(&g).map_err(ApiError::bad_request)?;
                Some((
                    id,
                    GangRequest {
                        elastic,
                        domain,
                        policy,
                        max_nodes: g.max_nodes,
                        timeout_ms: g.timeout_ms,
                        hard: g.timeout_policy == GangTimeoutPolicy::HARD,
                        gpu_model: g.gpu_model.filter(|m| !m.trim().is_empty()),
                        same_gpu_model: g.same_gpu_model,
                    },
                ))
            }
            None => None,
        };
        let capability = a.capability.to_resource();
        check_resource("capability", &capability)?;
        let cpu = crate::wire::cpu_ask(a.vcores_range.as_deref(), &cpu_table)
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        asks.push(AskUpdate {
            image: a
                .image
                .map(|i| spindle_common::image_ref::ImageRef::parse(&i).map(|r| r.placement_key()))
                .transpose()
                .map_err(|e| ApiError::bad_request(e.to_string()))?,
            priority: a.priority,
            allocation_request_id: a.allocation_request_id,
            resource_name: a.resource_name,
            capability,
            num_containers: a.num_containers as u32,
            relax_locality: a.relax_locality,
            gang,
            label: a
                .node_label_expression
                .map(|l| l.trim().to_string())
                .filter(|l| !l.is_empty()),
            tags: crate::wire::allocation_tags(a.allocation_tags).map_err(ApiError::bad_request)?,
            constraint: a
                .placement_constraint
                .map(|c| crate::wire::constraint(&c))
                .transpose()
                .map_err(ApiError::bad_request)?,
            cpu,
        });
    }
    let progress = if req.progress.is_finite() {
        req.progress
    } else {
        0.0
    };
    let r = st
        .driver
        .call(|reply| AmCommand::Allocate {
            token,
            response_id: req.response_id,
            asks,
            release: req.release,
            progress,
            report: crate::wire::am_report(
                req.checkpoint,
                req.preemption_acknowledgement,
                req.throughput_reports,
                req.update_requests,
            ),
            reply,
        })
        .await?;
    Ok(Json(AllocateResponse {
        response_id: r.response_id,
        allocated_containers: crate::wire::all(r.allocated),
        completed_container_statuses: crate::wire::all(r.completed),
        available_resources: ResourceInfo::from(&r.headroom),
        // Spindle tells AMs of no node changes yet (YARN lists unusable nodes here).
        updated_nodes: Vec::new(),
        num_cluster_nodes: r.num_cluster_nodes,
        am_command: None,
        application_priority: 0,
        gang_statuses: crate::wire::all(r.gangs),
        preemption_message: r.preemption.map(crate::wire::preemption_message),
        resize_offers: crate::wire::all(r.offers),
        resize_demands: crate::wire::all(r.demands),
        updated_containers: crate::wire::all(r.updated),
        update_errors: crate::wire::all(r.update_errors),
        idle_gpu_containers: r
            .idle_gpus
            .into_iter()
            .map(|n| spindle_common::records::am::IdleGpuContainer {
                container_id: n.container,
                idle_since_ms: n.idle_since,
                gpus: n.gpus,
                gpu_utilization: n.utilization,
            })
            .collect(),
    }))
}

async fn finish(
    State(st): State<AppState>,
    headers: HeaderMap,
    JsonBody(req): JsonBody<FinishApplicationMasterRequest>,
) -> Result<Json<FinishApplicationMasterResponse>, ApiError> {
    let token = token(&headers)?;
    st.driver
        .call(|reply| AmCommand::Finish {
            token,
            status: req.final_application_status,
            diagnostics: req.diagnostics,
            tracking_url: req.tracking_url,
            reply,
        })
        .await?;
    Ok(Json(FinishApplicationMasterResponse {
        is_unregistered: true,
    }))
}
