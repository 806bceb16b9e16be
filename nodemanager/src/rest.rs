//! The NM's HTTP API: YARN's NM REST v1 (`/ws/v1/node/...`), the container management calls
//! (start/stop/release/signal/reinitialize/update), container logs, the UI-style log pages, and `/metrics`.
//!
//! Handlers parse, ask the container manager through its [`NmHandle`], and map the answer to
//! a status; they hold no mutable state. Logs are read from disk here (see [`crate::logs`]).
//! Every error is a YARN `RemoteException` body; the UI pages answer errors in plain text.

use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use spindle_common::ids::{ApplicationId, ContainerId, NodeId};
use spindle_common::records::exception::ExceptionKind;
use spindle_common::records::nm::{
    AssignedDeviceJson, AssignedGpuDeviceJson, ContainerLogFileInfo, ContainerLogsBody,
    ContainerLogsInfo, DeviceJson, DeviceResourceInfo, FreePort, GpuDeviceInfoJson, GpuDeviceJson,
    GpuMemoryUsageJson, GpuResourceInfo, GpuTemperatureJson, GpuUtilizationsJson, PerGpuJson,
};
use spindle_common::records::node::{
    ContainerUpdateRequest, LaunchHold, NmAppBody, NmAppInfo, NmApps, NmAppsBody, NmContainerBody,
    NmContainerInfo, NmContainers, NmContainersBody, NmNodeInfo, NodeInfoBody,
    ReinitializeContainerRequest, ReinitializeContainerResponse, ReleaseContainersRequest,
    SignalContainerRequest, StartContainersRequest, StopContainersRequest,
};
use spindle_common::resource::Resource;
use spindle_rest_edge::{ApiError, JsonBody, PathParams, QueryParams};

use crate::containers::Container;
use crate::logs;
use crate::manager::{AppView, NmHandle, ReinitError, Unavailable};
use crate::plugins::{HealthView, PluginDetails, ResourceView};
use crate::rest_auth::{authorize, operation, Bearer};

/// The YARN REST API version these shapes follow.
pub const HADOOP_COMPAT_VERSION: &str = "3.4.0";
/// YARN's default `yarn.nodemanager.vmem-pmem-ratio`, for `totalVmemAllocatedContainersMB`.
const VMEM_PMEM_RATIO: f64 = 2.1;
/// NM application states YARN's `?state=` filter accepts.
const APP_STATES: &[&str] = &[
    "NEW",
    "INITING",
    "RUNNING",
    "FINISHING_CONTAINERS_WAIT",
    "APPLICATION_RESOURCES_CLEANINGUP",
    "FINISHED",
];
const MISSING_LOG: &str = "Cannot find this log on the local disk.";

/// What the handlers share: a handle to the actor and facts fixed at start.
#[derive(Clone)]
pub struct RestState(Arc<Inner>);

struct Inner {
    handle: NmHandle,
    node_id: NodeId,
    capacity: Resource,
    log_roots: Vec<PathBuf>,
    health: HealthView,
    /// The RM's web address (`host:port`, or a base URL with its scheme), for the log
    /// pages' links back to the application.
    rm_web: Option<String>,
    /// `http` or `https` (`yarn.http.policy`): how this NM's own links are written.
    scheme: &'static str,
}

impl RestState {
    pub fn new(
        handle: NmHandle,
        node_id: NodeId,
        capacity: Resource,
        log_roots: Vec<PathBuf>,
    ) -> Self {
        Self(Arc::new(Inner {
            handle,
            node_id,
            capacity,
            log_roots,
            health: HealthView::default(),
            rm_web: None,
            scheme: "http",
        }))
    }

    /// The RM's web address (`host:port`): the container-log pages link to the application
    /// there, in the RM's UI (`/ui/#/app/<id>`) and on YARN's `/cluster/app/<id>` page.
    pub fn with_rm_address(self, rm: impl Into<String>) -> Self {
        let inner = Inner {
            handle: self.0.handle.clone(),
            node_id: self.0.node_id.clone(),
            capacity: self.0.capacity.clone(),
            log_roots: self.0.log_roots.clone(),
            health: self.0.health.clone(),
            rm_web: Some(rm.into()),
            scheme: self.0.scheme,
        };
        Self(Arc::new(inner))
    }

    /// Shows the device plugins' problems as the node's `healthReport`.
    pub fn with_health(self, health: HealthView) -> Self {
        let inner = Inner {
            handle: self.0.handle.clone(),
            node_id: self.0.node_id.clone(),
            capacity: self.0.capacity.clone(),
            log_roots: self.0.log_roots.clone(),
            health,
            rm_web: self.0.rm_web.clone(),
            scheme: self.0.scheme,
        };
        Self(Arc::new(inner))
    }

    /// Writes this NM's own links (`containerLogsLink`) with `scheme`, `https` under
    /// `yarn.http.policy=HTTPS_ONLY`.
    pub fn with_scheme(self, scheme: &'static str) -> Self {
        let inner = Inner {
            handle: self.0.handle.clone(),
            node_id: self.0.node_id.clone(),
            capacity: self.0.capacity.clone(),
            log_roots: self.0.log_roots.clone(),
            health: self.0.health.clone(),
            rm_web: self.0.rm_web.clone(),
            scheme,
        };
        Self(Arc::new(inner))
    }
}

pub fn router(state: RestState) -> Router {
    let http = Arc::new(crate::metrics::HttpLatency::default());
    Router::new()
        .route("/ws/v1/node", get(node_info))
        .route("/ws/v1/node/", get(node_info))
        .route("/ws/v1/node/info", get(node_info))
        .route("/ws/v1/node/apps", get(apps))
        .route("/ws/v1/node/apps/{appid}", get(app))
        .route("/ws/v1/node/containers", get(containers))
        .route("/ws/v1/node/containers/start", post(start))
        .route("/ws/v1/node/containers/stop", post(stop))
        .route("/ws/v1/node/containers/release", post(release))
        .route("/ws/v1/node/containers/signal", post(signal))
        .route("/ws/v1/node/containers/reinitialize", post(reinitialize))
        .route("/ws/v1/node/containers/update", post(update))
        .route("/ws/v1/node/containers/{containerid}", get(container))
        .route("/ws/v1/node/containers/{containerid}/logs", get(log_list))
        .route(
            "/ws/v1/node/containers/{containerid}/logs/{filename}",
            get(log_file),
        )
        .route(
            "/ws/v1/node/containerlogs/{containerid}/{filename}",
            get(log_file),
        )
        .route("/node/containerlogs/{containerid}/{user}", get(ui_log_page))
        .route(
            "/node/containerlogs/{containerid}/{user}/{filename}",
            get(ui_log_file),
        )
        .route("/ws/v1/node/resources/{resourcename}", get(resource_info))
        .route("/ws/v1/node/ports/free", get(free_port))
        .route("/metrics", get(metrics))
        .fallback(spindle_rest_edge::not_found)
        .method_not_allowed_fallback(spindle_rest_edge::method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            http.clone(),
            crate::metrics::track,
        ))
        .layer(axum::Extension(http))
        .with_state(state)
}

// ---------------------------------------------------------------------------------------
// Errors and the JSON body extractor

impl From<Unavailable> for ApiError {
    fn from(e: Unavailable) -> Self {
        Self::new(ExceptionKind::ServiceUnavailable, e.to_string())
    }
}

fn parse_container_id(s: &str) -> Result<ContainerId, ApiError> {
    s.parse()
        .map_err(|_| ApiError::bad_request(format!("invalid container id, {s}")))
}

// ---------------------------------------------------------------------------------------
// Node, apps, containers

async fn node_info(State(s): State<RestState>) -> Result<Json<NodeInfoBody>, ApiError> {
    let v = s.0.handle.node().await?;
    let version = env!("CARGO_PKG_VERSION");
    Ok(Json(NodeInfoBody {
        node_info: NmNodeInfo {
            id: s.0.node_id.to_string(),
            node_host_name: s.0.node_id.host.clone(),
            total_pmem_allocated_containers_mb: s.0.capacity.memory_mb,
            total_vmem_allocated_containers_mb: (s.0.capacity.memory_mb as f64 * VMEM_PMEM_RATIO)
                as i64,
            total_v_cores_allocated_containers: s.0.capacity.vcores,
            vmem_check_enabled: false,
            pmem_check_enabled: false,
            last_node_update_time: v.last_heartbeat_ms,
            nm_startup_time: v.started_ms,
            health_report: s.0.health.report(),
            node_healthy: s.0.health.healthy(),
            node_manager_version: version.to_string(),
            node_manager_build_version: format!("spindle {version}"),
            node_manager_version_built_on: String::new(),
            hadoop_version: HADOOP_COMPAT_VERSION.to_string(),
            hadoop_build_version: format!("spindle {version}"),
            hadoop_version_built_on: String::new(),
        },
    }))
}

#[derive(Debug, Deserialize)]
struct AppsQuery {
    state: Option<String>,
    user: Option<String>,
}

fn app_info(a: AppView) -> NmAppInfo {
    NmAppInfo {
        id: a.id.to_string(),
        user: a.user,
        state: a.state.to_string(),
        containerids: a.containers.iter().map(ToString::to_string).collect(),
    }
}

async fn apps(
    State(s): State<RestState>,
    QueryParams(q): QueryParams<AppsQuery>,
) -> Result<Json<NmAppsBody>, ApiError> {
    let state = match q.state.as_deref().map(str::trim).filter(|v| !v.is_empty()) {
        Some(v) => {
            let up = v.to_ascii_uppercase();
            if !APP_STATES.contains(&up.as_str()) {
                return Err(ApiError::bad_request(format!(
                    "Invalid application state {v}: expected one of {}",
                    APP_STATES.join(", ")
                )));
            }
            Some(up)
        }
        None => None,
    };
    let user = q.user.filter(|u| !u.is_empty());
    let list: Vec<NmAppInfo> =
        s.0.handle
            .apps()
            .await?
            .into_iter()
            .filter(|a| state.as_deref().is_none_or(|st| a.state == st))
            .filter(|a| user.as_deref().is_none_or(|u| a.user == u))
            .map(app_info)
            .collect();
    Ok(Json(NmAppsBody {
        apps: (!list.is_empty()).then(|| NmApps { app: list.into() }),
    }))
}

async fn app(
    State(s): State<RestState>,
    PathParams(appid): PathParams<String>,
) -> Result<Json<NmAppBody>, ApiError> {
    let id: ApplicationId = appid
        .parse()
        .map_err(|_| ApiError::bad_request(format!("Invalid ApplicationId: {appid}")))?;
    s.0.handle
        .apps()
        .await?
        .into_iter()
        .find(|a| a.id == id)
        .map(|a| Json(NmAppBody { app: app_info(a) }))
        .ok_or_else(|| ApiError::not_found(format!("app with id {appid} not found")))
}

async fn container_info(s: &RestState, c: &Container) -> NmContainerInfo {
    let files = logs::list(&s.0.log_roots, &c.id)
        .await
        .unwrap_or_default()
        .into_iter()
        .map(|f| f.name)
        .collect();
    NmContainerInfo {
        id: c.id.to_string(),
        state: c.state().to_string(),
        exit_code: c.exit_code(),
        diagnostics: c.diagnostics().to_string(),
        user: c.user.clone(),
        total_memory_needed_mb: c.resource.memory_mb,
        total_v_cores_needed: c.resource.vcores,
        container_logs_link: format!(
            "{}://{}/node/containerlogs/{}/{}",
            s.0.scheme, s.0.node_id, c.id, c.user
        ),
        node_id: s.0.node_id.to_string(),
        execution_type: "GUARANTEED".to_string(),
        container_log_files: files,
    }
}

async fn containers(State(s): State<RestState>) -> Result<Json<NmContainersBody>, ApiError> {
    let all = s.0.handle.containers().await?;
    let mut list = Vec::with_capacity(all.len());
    for c in &all {
        list.push(container_info(&s, c).await);
    }
    Ok(Json(NmContainersBody {
        containers: (!list.is_empty()).then(|| NmContainers {
            container: list.into(),
        }),
    }))
}

async fn container(
    State(s): State<RestState>,
    PathParams(cid): PathParams<String>,
) -> Result<Json<NmContainerBody>, ApiError> {
    let id = parse_container_id(&cid)?;
    match s.0.handle.container(id).await? {
        Some(c) => Ok(Json(NmContainerBody {
            container: container_info(&s, &c).await,
        })),
        None => Err(ApiError::not_found(format!(
            "container with id, {cid}, not found"
        ))),
    }
}

async fn start(
    State(s): State<RestState>,
    JsonBody(req): JsonBody<StartContainersRequest>,
) -> Result<impl IntoResponse, ApiError> {
    if let Some(ms) = req.hold.as_ref().and_then(|h| h.timeout_ms) {
        if ms == 0 || ms > LaunchHold::MAX_TIMEOUT_MS {
            return Err(ApiError::bad_request(format!(
                "hold.timeoutMs must be from 1 to {}, got {ms}",
                LaunchHold::MAX_TIMEOUT_MS
            )));
        }
    }
    Ok(Json(
        s.0.handle
            .start(req.start_container_request, req.hold)
            .await?,
    ))
}

/// `POST /ws/v1/node/containers/release` (Spindle's extension): held containers exec now.
async fn release(
    State(s): State<RestState>,
    bearer: Bearer,
    JsonBody(req): JsonBody<ReleaseContainersRequest>,
) -> Result<impl IntoResponse, ApiError> {
    authorize(&s.0.handle, &bearer, operation::RELEASE, &req.container_ids).await?;
    Ok(Json(s.0.handle.release(req.container_ids).await?))
}

async fn stop(
    State(s): State<RestState>,
    bearer: Bearer,
    JsonBody(req): JsonBody<StopContainersRequest>,
) -> Result<impl IntoResponse, ApiError> {
    authorize(&s.0.handle, &bearer, operation::STOP, &req.container_ids).await?;
    Ok(Json(s.0.handle.stop(req.container_ids).await?))
}

/// `POST /ws/v1/node/containers/signal` (YARN's `signalToContainer`): a signal to the
/// container's process group. Like a stop it needs the owning application's container token
/// (`crate::rest_auth`), and an unknown container is a `failedRequests` entry with the stop's
/// message.
async fn signal(
    State(s): State<RestState>,
    bearer: Bearer,
    JsonBody(req): JsonBody<SignalContainerRequest>,
) -> Result<impl IntoResponse, ApiError> {
    authorize(&s.0.handle, &bearer, operation::SIGNAL, &[req.container_id]).await?;
    Ok(Json(
        s.0.handle.signal(req.container_id, req.command).await?,
    ))
}

impl From<ReinitError> for ApiError {
    fn from(e: ReinitError) -> Self {
        use crate::containers::ReinitRefusal;
        let kind = match &e {
            ReinitError::Refused(ReinitRefusal::Unknown(_)) => ExceptionKind::NotFound,
            ReinitError::Refused(_) | ReinitError::Ended { .. } => ExceptionKind::Conflict,
            ReinitError::BadContext { .. } => ExceptionKind::BadRequest,
            ReinitError::Localization { .. } | ReinitError::StartFailed { .. } => {
                ExceptionKind::Internal
            }
            ReinitError::ShuttingDown => ExceptionKind::ServiceUnavailable,
        };
        Self::new(kind, e.to_string())
    }
}

/// `POST /ws/v1/node/containers/reinitialize` (YARN's `reInitializeContainer`): a new
/// process from a new launch context in a running container, which keeps its id,
/// allocation, devices, limits and work dir. SIGTERM to the old process, SIGKILL after
/// the grace, then the new process; the answer comes once it started. Like a stop it needs
/// the owning application's container token (`crate::rest_auth`). Refusals are
/// `RemoteException`s: 401/403 (token), 404
/// unknown container, 409 not running / already re-initializing / ended meanwhile, 400 bad
/// body, 500 the new context could not be localized or started.
async fn reinitialize(
    State(s): State<RestState>,
    bearer: Bearer,
    JsonBody(req): JsonBody<ReinitializeContainerRequest>,
) -> Result<Json<ReinitializeContainerResponse>, ApiError> {
    authorize(
        &s.0.handle,
        &bearer,
        operation::REINITIALIZE,
        &[req.container_id],
    )
    .await?;
    let grace = req.grace_period_ms.map(std::time::Duration::from_millis);
    let done =
        s.0.handle
            .reinitialize(req.container_id, req.container_launch_context, grace)
            .await??;
    Ok(Json(ReinitializeContainerResponse {
        container_id: done.id,
        start_time: done.started_ms,
        stopped_in_ms: done.stopped_in_ms,
        reinitializations: done.reinits,
    }))
}

/// `POST /ws/v1/node/containers/update` (YARN's `updateContainer`): each entry of
/// `containersToUpdate` is a new container token from the RM (an allocate answer's
/// `updatedContainers`); the live container it names takes its memory and vcores (cgroup
/// limits and the RSS watcher, applied before the answer) and its version. Each token is
/// checked as a start's is, and the call needs the owning application's container token as
/// `Authorization: Bearer` like a stop (`crate::rest_auth`). Per-container refusals are `failedRequests` entries: a bad,
/// expired or foreign token, an unknown or finished container, a version not newer than the
/// container's (stale or replayed), a change to a device count, limits the kernel refused.
async fn update(
    State(s): State<RestState>,
    bearer: Bearer,
    JsonBody(req): JsonBody<ContainerUpdateRequest>,
) -> Result<impl IntoResponse, ApiError> {
    // The containers the tokens name (unverified here: the actor checks each token).
    let named: Vec<ContainerId> = req
        .containers_to_update
        .iter()
        .filter_map(|t| spindle_common::token::unverified_container_identifier(t).ok())
        .map(|i| i.container_id)
        .collect();
    authorize(&s.0.handle, &bearer, operation::UPDATE, &named).await?;
    Ok(Json(s.0.handle.update(req.containers_to_update).await?))
}

async fn metrics(
    State(s): State<RestState>,
    axum::Extension(http): axum::Extension<Arc<crate::metrics::HttpLatency>>,
) -> Result<impl IntoResponse, ApiError> {
    let m = s.0.handle.metrics().await?;
    let gpus =
        s.0.handle
            .resource(spindle_common::resource::GPU.to_string())
            .await?;
    Ok((
        [(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)],
        m.render(gpus.as_ref(), Some(&http)),
    ))
}

// ---------------------------------------------------------------------------------------
// Resource plugins (`/ws/v1/node/resources/{resourcename}`); the bodies' shapes (YARN's
// `NMGpuResourceInfo`, `NMDeviceResourceInfo`) are in `spindle_common::records::nm`.

fn device_json(d: &crate::plugins::Device) -> DeviceJson {
    DeviceJson {
        id: d.index,
        dev_path: d
            .dev_path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        major_number: d.major,
        minor_number: d.minor,
        bus_id: d.bus_id.clone().unwrap_or_default(),
        is_healthy: d.healthy,
        status: d.status.clone(),
    }
}

fn gpu_json(v: ResourceView) -> GpuResourceInfo {
    let info = match &v.details {
        PluginDetails::Gpu(Some(i)) => Some(GpuDeviceInfoJson {
            gpus: i
                .gpus
                .iter()
                .map(|g| {
                    let used = g.memory_used_mib.map_or(-1, |m| m as i64);
                    let avail = g.memory_free_mib.map_or(-1, |m| m as i64);
                    PerGpuJson {
                        product_name: g.product_name.clone().unwrap_or_else(|| "N/A".into()),
                        uuid: g.uuid.clone().unwrap_or_else(|| "N/A".into()),
                        minor_number: g.minor_number.map_or(-1, i64::from),
                        gpu_utilizations: GpuUtilizationsJson {
                            overall_gpu_utilization: g.gpu_util.unwrap_or(-1.0),
                        },
                        gpu_memory_usage: GpuMemoryUsageJson {
                            used,
                            avail,
                            total: g.memory_total_mib.map_or(
                                if used < 0 || avail < 0 {
                                    -1
                                } else {
                                    used + avail
                                },
                                |t| t as i64,
                            ),
                        },
                        temperature: GpuTemperatureJson {
                            current_gpu_temp: g.gpu_temp.unwrap_or(-1.0),
                            max_gpu_temp: g.gpu_temp_max_threshold.unwrap_or(-1.0),
                            slow_threshold_gpu_temp: g.gpu_temp_slow_threshold.unwrap_or(-1.0),
                        },
                        pci_bus_id: g.pci_bus_id.clone(),
                    }
                })
                .collect(),
            driver_version: i.driver_version.clone().unwrap_or_else(|| "N/A".into()),
            cuda_version: i.cuda_version.clone(),
        }),
        _ => None,
    };
    GpuResourceInfo {
        gpu_device_information: info,
        total_gpu_devices: v
            .devices
            .iter()
            .map(|d| GpuDeviceJson {
                index: d.index,
                minor_number: d.minor,
            })
            .collect(),
        assigned_gpu_devices: v
            .assigned
            .iter()
            .map(|(c, d)| AssignedGpuDeviceJson {
                index: d.index,
                minor_number: d.minor,
                container_id: c.to_string(),
            })
            .collect(),
        discovery_problems: v.problems,
    }
}

/// `GET /ws/v1/node/resources/{resourcename}` (the name URL-encoded: `yarn.io%2Fgpu`).
/// Readable from any origin (`Access-Control-Allow-Origin: *`): the RM's web UI shows each
/// GPU of a node from it. It is a read of what `/ws/v1/node` already tells anyone, and no
/// credentials go with a cross-origin read.
async fn resource_info(
    State(s): State<RestState>,
    name: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let mut r = resource_body(s, name).await?;
    r.headers_mut().insert(
        axum::http::header::ACCESS_CONTROL_ALLOW_ORIGIN,
        axum::http::HeaderValue::from_static("*"),
    );
    Ok(r)
}

async fn resource_body(
    s: RestState,
    name: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    // A name that is not UTF-8 once decoded is no plugin's: YARN's empty answer, as below.
    let Ok(Path(name)) = name else {
        return Ok(Json(serde_json::json!({})).into_response());
    };
    let Some(view) = s.0.handle.resource(name.clone()).await? else {
        // YARN answers an empty NMResourceInfo for a name no plugin manages.
        return Ok(Json(serde_json::json!({})).into_response());
    };
    if name == spindle_common::resource::GPU {
        return Ok(Json(gpu_json(view)).into_response());
    }
    Ok(Json(DeviceResourceInfo {
        total_devices: view.devices.iter().map(device_json).collect(),
        assigned_devices: view
            .assigned
            .iter()
            .map(|(c, d)| AssignedDeviceJson {
                container_id: c.to_string(),
                device: device_json(d),
            })
            .collect(),
        discovery_problems: view.problems,
    })
    .into_response())
}

/// `GET /ws/v1/node/ports/free` (a Spindle extension): a TCP port that was free on this node
/// a moment ago, `{"port":N}`. The training launcher gives it to rank 0 as `MASTER_PORT`:
/// only the node itself can tell which of its ports are free. The OS picks it (bind
/// `0.0.0.0:0`), and the socket is closed before answering, so the port is free but not
/// reserved: the caller should use it at once.
async fn free_port() -> Result<Json<FreePort>, ApiError> {
    let port = std::net::TcpListener::bind(("0.0.0.0", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| {
            ApiError::new(
                ExceptionKind::ServiceUnavailable,
                format!("cannot find a free port: {e}"),
            )
        })?;
    Ok(Json(FreePort { port }))
}

// ---------------------------------------------------------------------------------------
// Logs

/// The log files of a container, or None (404) if it is unknown and has no logs on disk.
async fn log_files(s: &RestState, id: ContainerId) -> Result<Option<Vec<logs::LogFile>>, ApiError> {
    if let Some(files) = logs::list(&s.0.log_roots, &id).await {
        return Ok(Some(files));
    }
    Ok(s.0.handle.container(id).await?.map(|_| Vec::new()))
}

async fn log_list(
    State(s): State<RestState>,
    PathParams(cid): PathParams<String>,
) -> Result<Json<ContainerLogsBody>, ApiError> {
    let id = parse_container_id(&cid)?;
    let files = log_files(&s, id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("container with id, {cid}, not found")))?;
    Ok(Json(ContainerLogsBody {
        container_logs_info: ContainerLogsInfo {
            container_log_info: files
                .into_iter()
                .map(|f| ContainerLogFileInfo {
                    file_name: f.name,
                    file_size: f.size.to_string(),
                    last_modified_time: spindle_common::time::format_times_utc(f.modified_ms),
                })
                .collect(),
            log_aggregation_type: "LOCAL".to_string(),
            container_id: id.to_string(),
            node_id: s.0.node_id.to_string(),
        },
    }))
}

#[derive(Debug, Deserialize)]
struct LogQuery {
    size: Option<String>,
    format: Option<String>,
    /// YARN's log page `start`/`end` byte offsets (negative: from the end).
    start: Option<String>,
    end: Option<String>,
    /// YARN's simple-mode caller, for the audit line of a refusal.
    #[serde(rename = "user.name")]
    user_name: Option<String>,
}

/// A byte count or offset parameter, if given (an empty value is absent).
fn byte_param(name: &str, v: Option<&str>) -> Result<Option<i64>, ApiError> {
    match v.map(str::trim).filter(|v| !v.is_empty()) {
        Some(v) => v.parse::<i64>().map(Some).map_err(|_| {
            ApiError::bad_request(format!(
                "Invalid {name} {v}: expected a whole number of bytes"
            ))
        }),
        None => Ok(None),
    }
}

/// Which bytes `size`, `start` and `end` ask for; `size` with `start` or `end` is refused.
fn log_selection(q: &LogQuery) -> Result<logs::Selection, ApiError> {
    let size = byte_param("size", q.size.as_deref())?;
    let start = byte_param("start", q.start.as_deref())?;
    let end = byte_param("end", q.end.as_deref())?;
    match (size, start, end) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => Err(ApiError::bad_request(
            "size cannot be combined with start or end: give either size or start/end",
        )),
        (Some(n), None, None) => Ok(logs::Selection::Size(n)),
        (None, None, None) => Ok(logs::Selection::Whole),
        (None, start, end) => Ok(logs::Selection::Range { start, end }),
    }
}

/// Streams one log file (all of it, `?size=`, or `?start=`/`?end=` byte offsets): text/plain,
/// or octet-stream with `?format=octet-stream`. Only a regular file inside the container's
/// log directory is served ([`logs::open_log`]); anything else is a 403 naming the file and
/// why, written to the audit log (`Get Container Log`, `NMWebServices`).
async fn serve_log(
    s: &RestState,
    cid: &str,
    name: &str,
    q: &LogQuery,
    caller: (&str, Option<std::net::IpAddr>),
) -> Result<Response, ApiError> {
    let id = parse_container_id(cid)?;
    let selection = log_selection(q)?;
    let log = logs::open_log(&s.0.log_roots, &id, name)
        .await
        .map_err(|e| log_error(e, &id, caller))?;
    let stream = logs::stream_selection(log, selection)
        .await
        .map_err(|e| ApiError::new(ExceptionKind::Internal, format!("{name}: {e}")))?;
    let content_type = match q.format.as_deref() {
        Some(f) if f.eq_ignore_ascii_case("octet-stream") => "application/octet-stream",
        _ => "text/plain; charset=utf-8",
    };
    Ok((
        [(header::CONTENT_TYPE, content_type)],
        Body::from_stream(stream),
    )
        .into_response())
}

/// A log file that is not served: 400 (bad name), 404 (missing), 403 (refused: audited) or
/// 500 (an I/O error).
fn log_error(
    e: logs::LogError,
    id: &ContainerId,
    caller: (&str, Option<std::net::IpAddr>),
) -> ApiError {
    let kind = match &e {
        logs::LogError::InvalidName { .. } => ExceptionKind::BadRequest,
        logs::LogError::Missing { .. } => ExceptionKind::NotFound,
        logs::LogError::Io { .. } => ExceptionKind::Internal,
        logs::LogError::Symlink { .. }
        | logs::LogError::NotRegular { .. }
        | logs::LogError::HardLinked { .. }
        | logs::LogError::UnsafeDir { .. } => ExceptionKind::Forbidden,
    };
    let message = e.to_string();
    if e.is_refusal() {
        let (user, ip) = caller;
        let cid = id.to_string();
        let app = id.application_id().to_string();
        spindle_rest_edge::audit::log(
            &spindle_rest_edge::audit::AuditEvent::failure(
                user,
                ip,
                "Get Container Log",
                "NMWebServices",
                &message,
                "Not a regular file in the container's log directory",
            )
            .app(&app)
            .container(&cid),
        );
    }
    ApiError::new(kind, message)
}

/// The peer of a request, where the server recorded it.
fn peer_ip(ext: &axum::http::Extensions) -> Option<std::net::IpAddr> {
    ext.get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0.ip())
}

async fn log_file(
    State(s): State<RestState>,
    ext: axum::http::Extensions,
    PathParams((cid, name)): PathParams<(String, String)>,
    QueryParams(q): QueryParams<LogQuery>,
) -> Result<Response, ApiError> {
    let user = q.user_name.clone().unwrap_or_else(|| "dr.who".to_string());
    serve_log(&s, &cid, &name, &q, (&user, peer_ip(&ext))).await
}

/// The UI pages answer in plain text, not JSON.
fn ui_error(e: ApiError) -> Response {
    let status = StatusCode::from_u16(e.kind.status()).unwrap_or(StatusCode::BAD_REQUEST);
    (status, e.message).into_response()
}

async fn ui_log_page(
    State(s): State<RestState>,
    Path((cid, user)): Path<(String, String)>,
) -> Response {
    let id = match parse_container_id(&cid) {
        Ok(id) => id,
        Err(e) => return ui_error(e),
    };
    let files = match log_files(&s, id).await {
        Ok(Some(f)) => f,
        Ok(None) => return ui_error(ApiError::not_found(MISSING_LOG)),
        Err(e) => return ui_error(e),
    };
    let user_url = urlencoding::encode(&user);
    let mut rows = String::new();
    for f in &files {
        rows.push_str(&format!(
            "<tr><td><a href=\"/node/containerlogs/{id}/{user_url}/{name_url}\">{name}</a></td>\
             <td>{size}</td><td>{time}</td></tr>\n",
            name_url = urlencoding::encode(&f.name),
            name = html_escape(&f.name),
            size = f.size,
            time = spindle_common::time::format_times_utc(f.modified_ms),
        ));
    }
    Html(format!(
        "<!DOCTYPE html>\n<html><head><title>Logs for {id}</title></head><body>\n\
         <h1>Logs for {id}</h1>\n<p>User: {user}. Node: {node}.</p>\n{app}\
         <table>\n<tr><th>Log Type</th><th>Log Length</th><th>Last Modified</th></tr>\n{rows}</table>\n\
         </body></html>\n",
        user = html_escape(&user),
        node = s.0.node_id,
        app = app_links(s.0.rm_web.as_deref(), &id),
    ))
    .into_response()
}

async fn ui_log_file(
    State(s): State<RestState>,
    ext: axum::http::Extensions,
    Path((cid, user, name)): Path<(String, String, String)>,
    Query(q): Query<LogQuery>,
) -> Response {
    match serve_log(&s, &cid, &name, &q, (&user, peer_ip(&ext))).await {
        Ok(r) => r,
        Err(e) => ui_error(e),
    }
}

/// The log page's way back to the application in the RM: its page in the RM's UI and YARN's
/// `/cluster/app/<id>` page. Nothing when the NM does not know the RM's address.
fn app_links(rm_web: Option<&str>, id: &ContainerId) -> String {
    let Some(rm) = rm_web else {
        return String::new();
    };
    // An address without a scheme is plain HTTP's (a base URL keeps its own).
    let rm = html_escape(&spindle_common::tls::HttpPolicy::HttpOnly.base_url(rm));
    let app = id.application_id();
    format!(
        "<p>Application: <a class=\"rm-ui-app\" href=\"{rm}/ui/#/app/{app}\">{app}</a> \
         in the ResourceManager's UI \
         (<a class=\"rm-cluster-app\" href=\"{rm}/cluster/app/{app}\">YARN's application page</a>).</p>\n"
    )
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_pages_link_to_the_application_in_the_rm() {
        let id: ContainerId = "container_1700000000000_0007_01_000002".parse().unwrap();
        let html = app_links(Some("rm.example.com:8088"), &id);
        assert!(
            html.contains(
                "href=\"http://rm.example.com:8088/ui/#/app/application_1700000000000_0007\""
            ),
            "{html}"
        );
        assert!(
            html.contains(
                "href=\"http://rm.example.com:8088/cluster/app/application_1700000000000_0007\""
            ),
            "{html}"
        );
        assert_eq!(app_links(None, &id), "");
        // Under HTTPS_ONLY the NM is given the RM's base URL: its scheme is kept.
        let tls = app_links(Some("https://rm.example.com:8090"), &id);
        assert!(
            tls.contains(
                "href=\"https://rm.example.com:8090/cluster/app/application_1700000000000_0007\""
            ),
            "{tls}"
        );
    }

    #[test]
    fn log_byte_selections() {
        let q = |size: Option<&str>, start: Option<&str>, end: Option<&str>| LogQuery {
            size: size.map(str::to_string),
            format: None,
            start: start.map(str::to_string),
            end: end.map(str::to_string),
            user_name: None,
        };
        assert_eq!(
            log_selection(&q(None, None, None)).unwrap(),
            logs::Selection::Whole
        );
        assert_eq!(
            log_selection(&q(Some("-5"), None, None)).unwrap(),
            logs::Selection::Size(-5)
        );
        assert_eq!(
            log_selection(&q(None, Some("12"), Some(""))).unwrap(),
            logs::Selection::Range {
                start: Some(12),
                end: None
            }
        );
        for bad in [
            q(Some("1"), Some("2"), None),
            q(Some("1"), None, Some("2")),
            q(None, Some("x"), None),
            q(None, None, Some("1.5")),
        ] {
            let e = log_selection(&bad).unwrap_err();
            assert_eq!(e.kind.status(), 400, "{bad:?}");
        }
    }

    #[test]
    fn errors_are_remote_exceptions() {
        let r = ApiError::bad_request("invalid container id, x").into_response();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        let r = ApiError::from(Unavailable).into_response();
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            html_escape("<a href='x'>&"),
            "&lt;a href=&#39;x&#39;&gt;&amp;"
        );
    }

    #[tokio::test]
    async fn a_free_port_can_be_bound() {
        let Json(FreePort { port }) = free_port().await.expect("a free port");
        assert_ne!(port, 0);
        // Free means bindable now.
        std::net::TcpListener::bind(("0.0.0.0", port)).expect("the port is free");
    }
}
