//! `/ws/v1/cluster/...`: Hadoop YARN's ResourceManager REST API v1, field for field.

use std::collections::{BTreeSet, HashMap};

use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use spindle_common::records::cluster::*;
use spindle_common::records::resource::ResourceInfo;
use spindle_common::records::OneOrMany;
use spindle_common::states::{FinalApplicationStatus, NodeState, YarnApplicationState};
use spindle_common::time::now_ms;
use spindle_common::{ApplicationAttemptId, ApplicationId, ContainerId, NodeId, Resource};

use super::{check_resource, ApiError, AppState, JsonBody, PathParams};
use crate::core::queue_conf::{CapacitySpec, MaxCapacitySpec};
use crate::core::{App, Attempt, KillOutcome, Node, QueueView, RmContainer, Submission};
use crate::driver::{Command, Snapshot};

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/ws/v1/cluster", get(info))
        .route("/ws/v1/cluster/", get(info))
        .route("/ws/v1/cluster/info", get(info))
        .route("/ws/v1/cluster/metrics", get(metrics))
        .route("/ws/v1/cluster/scheduler", get(scheduler))
        .route("/ws/v1/cluster/nodes", get(nodes))
        .route("/ws/v1/cluster/nodes/{nodeid}", get(node))
        .route("/ws/v1/cluster/apps", get(apps).post(submit))
        .route("/ws/v1/cluster/apps/new-application", post(new_application))
        .route("/ws/v1/cluster/apps/{appid}", get(app))
        .route(
            "/ws/v1/cluster/apps/{appid}/state",
            get(app_state).put(put_app_state),
        )
        .route(
            "/ws/v1/cluster/apps/{appid}/queue",
            get(app_queue).put(put_app_queue),
        )
        .route(
            "/ws/v1/cluster/apps/{appid}/priority",
            get(app_priority).put(put_app_priority),
        )
        .route("/ws/v1/cluster/apps/{appid}/appattempts", get(attempts))
        .route(
            "/ws/v1/cluster/apps/{appid}/appattempts/{attemptid}",
            get(attempt),
        )
        .route(
            "/ws/v1/cluster/apps/{appid}/appattempts/{attemptid}/containers",
            get(attempt_containers),
        )
        .route(
            "/ws/v1/cluster/apps/{appid}/appattempts/{attemptid}/containers/{containerid}",
            get(attempt_container),
        )
        .route("/ws/v1/cluster/appstatistics", get(app_statistics))
}

type Q = Query<HashMap<String, String>>;

fn rm_host(headers: &HeaderMap) -> String {
    headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost:8088")
        .to_string()
}

// ------------------------------------------------------------------------ info, metrics

async fn info(State(st): State<AppState>) -> Json<ClusterInfoBody> {
    let i = &st.info;
    Json(ClusterInfoBody {
        cluster_info: ClusterInfo {
            id: i.cluster_ts,
            started_on: i.started_on,
            state: "STARTED".into(),
            ha_state: "ACTIVE".into(),
            rm_state_store_name: "org.apache.spindle.resourcemanager.SQLiteRMStateStore".into(),
            resource_manager_version: env!("CARGO_PKG_VERSION").into(),
            resource_manager_build_version: format!("spindle {}", env!("CARGO_PKG_VERSION")),
            resource_manager_version_built_on: String::new(),
            hadoop_version: "3.4.0".into(),
            hadoop_build_version: format!("3.4.0 (spindle {})", env!("CARGO_PKG_VERSION")),
            hadoop_version_built_on: String::new(),
            ha_zoo_keeper_connection_state: "ResourceManager HA is not enabled.".into(),
        },
    })
}

pub(super) fn cluster_metrics(s: &Snapshot) -> ClusterMetrics {
    let mut m = ClusterMetrics {
        apps_submitted: s.counters.apps_submitted,
        apps_completed: s.counters.apps_completed,
        apps_failed: s.counters.apps_failed,
        apps_killed: s.counters.apps_killed,
        containers_pending: s.pending_containers,
        pending_mb: s.pending.memory_mb,
        pending_virtual_cores: s.pending.vcores,
        ..Default::default()
    };
    for a in s.apps.values() {
        match a.state {
            YarnApplicationState::RUNNING => m.apps_running += 1,
            YarnApplicationState::NEW
            | YarnApplicationState::NEW_SAVING
            | YarnApplicationState::SUBMITTED
            | YarnApplicationState::ACCEPTED => m.apps_pending += 1,
            _ => {}
        }
    }
    let mut total = Resource::zero();
    let mut used = Resource::zero();
    for (t, u) in s.node_usage.values() {
        total.add_assign(t);
        used.add_assign(u);
    }
    for n in s.nodes.values() {
        m.total_nodes += 1;
        match n.state {
            NodeState::RUNNING => m.active_nodes += 1,
            NodeState::LOST => m.lost_nodes += 1,
            NodeState::UNHEALTHY => m.unhealthy_nodes += 1,
            NodeState::DECOMMISSIONING => m.decommissioning_nodes += 1,
            NodeState::DECOMMISSIONED => m.decommissioned_nodes += 1,
            NodeState::REBOOTED => m.rebooted_nodes += 1,
            NodeState::SHUTDOWN => m.shutdown_nodes += 1,
            NodeState::NEW => {}
        }
    }
    // YARN counts only active nodes in totalNodes.
    m.total_nodes = m.active_nodes + m.unhealthy_nodes + m.decommissioning_nodes;
    m.total_mb = total.memory_mb;
    m.total_virtual_cores = total.vcores;
    m.allocated_mb = used.memory_mb;
    m.allocated_virtual_cores = used.vcores;
    m.available_mb = (total.memory_mb - used.memory_mb).max(0);
    m.available_virtual_cores = (total.vcores - used.vcores).max(0);
    m.containers_allocated = s.containers.values().filter(|c| c.is_live()).count() as u64;
    m.utilized_mb_percent = if total.memory_mb > 0 {
        used.memory_mb * 100 / total.memory_mb
    } else {
        0
    };
    m.utilized_vcores_percent = if total.vcores > 0 {
        used.vcores * 100 / total.vcores
    } else {
        0
    };
    m.total_used_resources_across_partition = ResourceInfo::from(&used);
    m.total_cluster_resources_across_partition = ResourceInfo::from(&total);
    m.total_reserved_resources_across_partition = ResourceInfo::from(&Resource::zero());
    m.total_allocated_containers_across_partition = m.containers_allocated;
    m
}

async fn metrics(State(st): State<AppState>) -> Json<ClusterMetricsBody> {
    let s = st.driver.snapshot().await;
    Json(ClusterMetricsBody {
        cluster_metrics: cluster_metrics(&s),
    })
}

// ------------------------------------------------------------------------ scheduler

fn capacity_mode(c: &CapacitySpec) -> &'static str {
    match c {
        CapacitySpec::Percent(_) => "percentage",
        CapacitySpec::Absolute(_) => "absolute",
        CapacitySpec::Weight(_) => "weight",
    }
}

/// YARN reports `capacity`/`maxCapacity` as percents of the parent even for absolute and
/// weight queues (derived from the effective resources); `weight`/`normalizedWeight` only
/// for weight queues (-1 and 0 otherwise).
struct Shares {
    capacity: f64,
    max_capacity: f64,
    weight: f64,
    normalized_weight: f64,
}

fn shares(views: &[QueueView], v: &QueueView) -> Shares {
    let parent = v
        .parent
        .as_deref()
        .and_then(|p| views.iter().find(|x| x.path == p));
    let relative = |own: f64, of: Option<f64>| match of {
        Some(p) if p > 0.0 => (own * 100.0 / p).min(100.0),
        Some(_) => 0.0,
        None => own,
    };
    let capacity = match v.capacity {
        CapacitySpec::Percent(p) => p,
        _ => relative(v.absolute_capacity, parent.map(|p| p.absolute_capacity)),
    };
    let max_capacity = match v.max_capacity {
        MaxCapacitySpec::Percent(p) => p,
        MaxCapacitySpec::Absolute(_) => relative(
            v.absolute_max_capacity,
            parent.map(|p| p.absolute_max_capacity),
        ),
    };
    let (weight, normalized_weight) = match v.capacity {
        CapacitySpec::Weight(w) => {
            let sum: f64 = views
                .iter()
                .filter(|x| x.parent == v.parent)
                .filter_map(|x| match x.capacity {
                    CapacitySpec::Weight(w) => Some(w),
                    _ => None,
                })
                .sum();
            (w, if sum > 0.0 { w / sum } else { 0.0 })
        }
        _ => (-1.0, 0.0),
    };
    Shares {
        capacity,
        max_capacity,
        weight,
        normalized_weight,
    }
}

fn queue_acls(v: &QueueView) -> QueueAclsInfo {
    QueueAclsInfo {
        queue_acl: vec![
            QueueAclInfo {
                access_type: "ADMINISTER_QUEUE".into(),
                access_control_list: v.acl_admin.clone(),
            },
            QueueAclInfo {
                access_type: "SUBMIT_APP".into(),
                access_control_list: v.acl_submit.clone(),
            },
        ],
    }
}

fn capacities(v: &QueueView, sh: &Shares) -> QueueCapacities {
    let zero = ResourceInfo::from(&Resource::zero());
    let (cfg_min, cfg_max) = match (&v.capacity, &v.max_capacity) {
        (CapacitySpec::Absolute(r), MaxCapacitySpec::Absolute(m)) => {
            (ResourceInfo::from(r), ResourceInfo::from(m))
        }
        (CapacitySpec::Absolute(r), _) => (ResourceInfo::from(r), zero.clone()),
        (_, MaxCapacitySpec::Absolute(m)) => (zero.clone(), ResourceInfo::from(m)),
        _ => (zero.clone(), zero),
    };
    QueueCapacities {
        queue_capacities_by_partition: vec![PartitionQueueCapacitiesInfo {
            partition_name: String::new(),
            capacity: sh.capacity,
            used_capacity: v.used_capacity,
            max_capacity: sh.max_capacity,
            absolute_capacity: v.absolute_capacity,
            absolute_used_capacity: v.absolute_used_capacity,
            absolute_max_capacity: v.absolute_max_capacity,
            max_am_limit_percentage: v.max_am_resource_percent * 100.0,
            weight: sh.weight,
            normalized_weight: sh.normalized_weight,
            configured_min_resource: cfg_min,
            configured_max_resource: cfg_max,
            effective_min_resource: ResourceInfo::from(&v.guaranteed),
            effective_max_resource: ResourceInfo::from(&v.maximum),
        }],
    }
}

/// One queue in YARN's `capacityScheduler` shape; children nested under `queues.queue[]`.
fn queue_info(views: &[QueueView], v: &QueueView) -> CapacitySchedulerQueueInfo {
    let sh = shares(views, v);
    let leaf = v.is_leaf.then(|| {
        let users: Vec<UserInfo> = v
            .users
            .iter()
            .map(|u| UserInfo {
                username: u.name.clone(),
                resources_used: ResourceInfo::from(&u.used),
                num_pending_applications: u.pending_apps as u64,
                num_active_applications: u.active_apps as u64,
                am_resource_used: ResourceInfo::from(&u.am_used),
                user_resource_limit: ResourceInfo::from(&u.user_limit),
                user_weight: 1.0,
                is_active: u.active_apps > 0,
            })
            .collect();
        LeafQueueInfo {
            kind: "capacitySchedulerLeafQueueInfo".into(),
            num_active_applications: v.num_active_applications as u64,
            num_pending_applications: v.num_pending_applications as u64,
            num_containers: v.num_containers as u64,
            max_applications: u64::from(v.max_applications),
            max_applications_per_user: u64::from(v.max_applications_per_user),
            user_limit: v.minimum_user_limit_percent,
            users: (!users.is_empty()).then_some(UsersInfo {
                user: OneOrMany(users),
            }),
            user_limit_factor: v.user_limit_factor,
            configured_max_am_resource_limit: v.max_am_resource_percent,
            am_resource_limit: ResourceInfo::from(&v.am_limit),
            used_am_resource: ResourceInfo::from(&v.am_used),
            user_am_resource_limit: ResourceInfo::from(&v.user_am_limit),
            preemption_disabled: true,
            intra_queue_preemption_disabled: true,
            default_priority: v.default_application_priority,
            is_auto_created_leaf_queue: false,
            max_application_lifetime: -1,
            default_application_lifetime: -1,
        }
    });
    let queues = (!v.is_leaf).then(|| CapacitySchedulerQueues {
        queue: OneOrMany(
            views
                .iter()
                .filter(|c| c.parent.as_deref() == Some(v.path.as_str()))
                .map(|c| queue_info(views, c))
                .collect(),
        ),
    });
    CapacitySchedulerQueueInfo {
        queue_path: v.path.clone(),
        capacity: sh.capacity,
        used_capacity: v.used_capacity,
        max_capacity: sh.max_capacity,
        absolute_capacity: v.absolute_capacity,
        absolute_max_capacity: v.absolute_max_capacity,
        absolute_used_capacity: v.absolute_used_capacity,
        weight: sh.weight,
        normalized_weight: sh.normalized_weight,
        num_applications: v.num_applications as u64,
        max_parallel_apps: v
            .max_parallel_apps
            .map(i64::from)
            .unwrap_or(i64::from(i32::MAX)),
        queue_name: v.name.clone(),
        is_absolute_resource: matches!(v.capacity, CapacitySpec::Absolute(_)),
        state: v.state.as_str().into(),
        used_resources: v.used.to_string(),
        resources_used: ResourceInfo::from(&v.used),
        hide_reservation_queues: false,
        node_labels: vec!["*".into()],
        default_node_label_expression: None,
        allocated_containers: v.num_containers as u64,
        reserved_containers: 0,
        pending_containers: 0,
        capacities: capacities(v, &sh),
        resources: ResourceUsages {
            resource_usages_by_partition: vec![PartitionResourcesInfo {
                partition_name: String::new(),
                used: ResourceInfo::from(&v.used),
                reserved: ResourceInfo::from(&Resource::zero()),
                pending: ResourceInfo::from(&v.pending),
                am_used: ResourceInfo::from(&v.am_used),
                am_limit: ResourceInfo::from(&v.am_limit),
                user_am_limit: ResourceInfo::from(&v.user_am_limit),
            }],
        },
        min_effective_capacity: ResourceInfo::from(&v.guaranteed),
        max_effective_capacity: ResourceInfo::from(&v.maximum),
        maximum_allocation: ResourceInfo::from(&v.max_allocation),
        queue_acls: queue_acls(v),
        queue_priority: v.priority,
        ordering_policy_info: if v.is_leaf {
            v.ordering.as_str().into()
        } else {
            "utilization".into()
        },
        auto_create_child_queue_enabled: false,
        mode: capacity_mode(&v.capacity).into(),
        queue_type: if v.is_leaf { "leaf" } else { "parent" }.into(),
        creation_method: "static".into(),
        auto_creation_eligibility: "off".into(),
        queues,
        leaf,
    }
}

/// YARN's health block; Spindle keeps no per-operation history, so it reads as a scheduler
/// that has done nothing notable (every figure 0, every id `N/A`).
fn health() -> CapacitySchedulerHealthInfo {
    CapacitySchedulerHealthInfo {
        lastrun: 0,
        operations_info: [
            "last-allocation",
            "last-release",
            "last-preemption",
            "last-reservation",
        ]
        .into_iter()
        .map(|op| SchedulerOperationInfo {
            operation: op.into(),
            node_id: "N/A".into(),
            container_id: "N/A".into(),
            queue: "N/A".into(),
        })
        .collect(),
        last_run_details: ["releases", "allocations", "reservations"]
            .into_iter()
            .map(|op| LastRunDetail {
                operation: op.into(),
                count: 0,
                resources: ResourceInfo::plain(&Resource::zero()),
            })
            .collect(),
    }
}

async fn scheduler(State(st): State<AppState>) -> Json<SchedulerBody> {
    let s = st.driver.snapshot().await;
    let views = &s.queue_views;
    let Some(root) = views.iter().find(|v| v.parent.is_none()) else {
        return Json(SchedulerBody {
            scheduler: SchedulerTypeInfo {
                scheduler_info: CapacitySchedulerInfo {
                    kind: "capacityScheduler".into(),
                    ..Default::default()
                },
            },
        });
    };
    let r = queue_info(views, root);
    Json(SchedulerBody {
        scheduler: SchedulerTypeInfo {
            scheduler_info: CapacitySchedulerInfo {
                kind: "capacityScheduler".into(),
                capacity: 100.0,
                used_capacity: root.used_capacity,
                max_capacity: 100.0,
                weight: -1.0,
                normalized_weight: 0.0,
                queue_name: "root".into(),
                queue_path: "root".into(),
                queue_type: "parent".into(),
                mode: r.mode,
                queues: r.queues,
                capacities: r.capacities,
                health: health(),
                maximum_allocation: ResourceInfo::from(&s.max_allocation),
                queue_acls: r.queue_acls,
                queue_priority: 0,
                ordering_policy_info: "utilization".into(),
                auto_create_child_queue_enabled: false,
                creation_method: "static".into(),
                auto_creation_eligibility: "off".into(),
            },
        },
    })
}

// ------------------------------------------------------------------------ nodes

pub(super) fn node_info(s: &Snapshot, n: &Node) -> NodeInfo {
    let (total, used) = s
        .node_usage
        .get(&n.id)
        .cloned()
        .unwrap_or_else(|| (n.total.clone(), Resource::zero()));
    let avail = total.minus(&used).clamp_non_negative();
    NodeInfo {
        rack: n.rack.clone(),
        state: n.state,
        id: n.id.to_string(),
        node_host_name: n.id.host.clone(),
        node_http_address: n.http_address.clone(),
        last_health_update: n.last_health_update,
        version: n.version.clone(),
        health_report: n.health_report.clone(),
        num_containers: n.containers.len() as i64,
        used_memory_mb: used.memory_mb,
        avail_memory_mb: avail.memory_mb,
        used_virtual_cores: used.vcores,
        available_virtual_cores: avail.vcores,
        mem_utilization: 0.0,
        cpu_utilization: n.cpu_usage,
        used_resource: ResourceInfo::from(&used),
        available_resource: ResourceInfo::from(&avail),
        total_resource: ResourceInfo::from(&n.total),
        node_attributes_info: serde_json::json!({
            "nodeAttributeInfo": n.attributes.iter().map(|(k, v)| {
                let (prefix, name) = k.rsplit_once('/').unwrap_or(("", k.as_str()));
                serde_json::json!({"prefix": prefix, "name": name, "type": "STRING", "value": v})
            }).collect::<Vec<_>>()
        }),
        ..Default::default()
    }
}

fn parse_list<T: std::str::FromStr<Err = String>>(
    q: &HashMap<String, String>,
    key: &str,
) -> Result<Option<Vec<T>>, ApiError> {
    let Some(raw) = q.get(key) else {
        return Ok(None);
    };
    let mut out = Vec::new();
    for part in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        out.push(part.parse::<T>().map_err(ApiError::bad_request)?);
    }
    Ok(if out.is_empty() { None } else { Some(out) })
}

async fn nodes(State(st): State<AppState>, Query(q): Q) -> Result<Json<NodesBody>, ApiError> {
    let s = st.driver.snapshot().await;
    let states = match parse_list::<NodeState>(&q, "states")? {
        Some(v) => Some(v),
        None => parse_list::<NodeState>(&q, "state")?,
    };
    let list: Vec<NodeInfo> = s
        .nodes
        .values()
        .filter(|n| states.as_ref().is_none_or(|st| st.contains(&n.state)))
        .map(|n| node_info(&s, n))
        .collect();
    Ok(Json(NodesBody {
        nodes: if list.is_empty() {
            None
        } else {
            Some(Nodes {
                node: OneOrMany(list),
            })
        },
    }))
}

async fn node(
    State(st): State<AppState>,
    PathParams(id): PathParams<String>,
) -> Result<Json<NodeBody>, ApiError> {
    let nid: NodeId = id
        .parse()
        .map_err(|_| ApiError::bad_request(format!("Invalid NodeId [{id}]. Expected host:port")))?;
    let s = st.driver.snapshot().await;
    let n = s.nodes.get(&nid).ok_or_else(|| {
        ApiError::not_found(format!("java.lang.Exception: nodeId, {id}, is not found"))
    })?;
    Ok(Json(NodeBody {
        node: node_info(&s, n),
    }))
}

// ------------------------------------------------------------------------ apps

fn app_id(raw: &str) -> Result<ApplicationId, ApiError> {
    raw.parse().map_err(|e: spindle_common::ids::IdParseError| {
        ApiError::bad_request(format!("Invalid ApplicationId: {raw} ({e})"))
    })
}

fn find_app<'a>(s: &'a Snapshot, raw: &str) -> Result<&'a App, ApiError> {
    let id = app_id(raw)?;
    s.apps.get(&id).ok_or_else(|| {
        ApiError::not_found(format!("java.lang.Exception: app with id: {raw} not found"))
    })
}

fn logs_url(c: &RmContainer, user: &str) -> String {
    format!(
        "http://{}/node/containerlogs/{}/{}",
        c.node_http, c.id, user
    )
}

pub(super) fn app_info(s: &Snapshot, a: &App, now: u64, rm: &str, with_requests: bool) -> AppInfo {
    let att = a.current_attempt();
    let am = att
        .and_then(|t| t.am_container)
        .and_then(|c| s.containers.get(&c));
    let final_ = a.state.is_final();
    let live: Vec<&RmContainer> = s
        .containers
        .values()
        .filter(|c| c.is_live() && c.id.application_id() == a.id)
        .collect();
    let used = s.app_usage.get(&a.id).cloned().unwrap_or_default();
    let (mut mem_ms, mut vc_ms) = (a.memory_ms, a.vcore_ms);
    for c in &live {
        let held = now.saturating_sub(c.allocated_time) as i64;
        mem_ms += c.resource.memory_mb * held;
        vc_ms += c.resource.vcores * held;
    }
    let cluster_mb: i64 = s.node_usage.values().map(|(t, _)| t.memory_mb).sum();
    let registered = att.is_some_and(|t| t.registered && !t.unregistered);
    let tracking_ui = if final_ {
        "History"
    } else if registered {
        "ApplicationMaster"
    } else {
        "UNASSIGNED"
    };
    let tracking_url = if !a.tracking_url.is_empty() {
        a.tracking_url.clone()
    } else {
        format!("http://{rm}/cluster/app/{}", a.id)
    };
    let resource_requests = if with_requests {
        s.app_asks
            .get(&a.id)
            .map(|asks| {
                asks.iter()
                    .map(|(k, ask)| AppResourceRequestInfo {
                        capability: RequestCapabilityInfo {
                            memory: ask.capability.memory_mb,
                            virtual_cores: ask.capability.vcores,
                        },
                        node_label_expression: String::new(),
                        num_containers: i64::from(ask.any),
                        priority: PriorityInfo {
                            priority: k.priority,
                        },
                        relax_locality: ask.relax_locality,
                        resource_name: "*".into(),
                        allocation_request_id: k.allocation_request_id,
                    })
                    .collect()
            })
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    AppInfo {
        id: a.id.to_string(),
        user: a.sub.user.clone(),
        name: a.sub.name.clone(),
        queue: a.queue.rsplit('.').next().unwrap_or(&a.queue).to_string(),
        state: a.state,
        final_status: a.final_status,
        progress: if final_ { 100.0 } else { a.progress },
        tracking_ui: tracking_ui.into(),
        tracking_url: Some(tracking_url),
        diagnostics: a.diagnostics.clone(),
        cluster_id: s.cluster_ts,
        application_type: a.sub.application_type.clone(),
        application_tags: a.sub.tags.join(","),
        priority: a.sub.priority,
        started_time: a.submit_time,
        launch_time: a.launch_time,
        finished_time: a.finish_time,
        elapsed_time: if a.finish_time > 0 {
            a.finish_time.saturating_sub(a.submit_time)
        } else {
            now.saturating_sub(a.submit_time)
        },
        am_container_logs: am.map(|c| logs_url(c, &a.sub.user)),
        am_host_http_address: am.map(|c| c.node_http.clone()),
        am_rpc_address: att
            .filter(|t| t.registered)
            .map(|t| format!("{}:{}", t.host, t.rpc_port)),
        master_node_id: am.map(|c| c.node.to_string()),
        allocated_mb: if final_ { -1 } else { used.memory_mb },
        allocated_v_cores: if final_ { -1 } else { used.vcores },
        reserved_mb: if final_ { -1 } else { 0 },
        reserved_v_cores: if final_ { -1 } else { 0 },
        running_containers: if final_ { -1 } else { live.len() as i64 },
        memory_seconds: mem_ms / 1000,
        vcore_seconds: vc_ms / 1000,
        queue_usage_percentage: 0.0,
        cluster_usage_percentage: if cluster_mb > 0 && !final_ {
            used.memory_mb as f32 * 100.0 / cluster_mb as f32
        } else {
            0.0
        },
        resource_requests,
        gangs: s.app_gangs.get(&a.id).cloned().unwrap_or_default(),
        ..Default::default()
    }
}

fn time_range(q: &HashMap<String, String>, begin: &str, end: &str) -> Result<(u64, u64), ApiError> {
    let parse = |k: &str, default: u64| -> Result<u64, ApiError> {
        match q.get(k) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse::<i64>()
                .ok()
                .filter(|n| *n >= 0)
                .map(|n| n as u64)
                .ok_or_else(|| ApiError::bad_request(format!("{k} must be greater than 0"))),
        }
    };
    let b = parse(begin, 0)?;
    let e = parse(end, u64::MAX)?;
    if b > e {
        return Err(ApiError::bad_request(format!(
            "{end} must be greater than {begin}"
        )));
    }
    Ok((b, e))
}

async fn apps(
    State(st): State<AppState>,
    headers: HeaderMap,
    Query(q): Q,
) -> Result<Json<AppsBody>, ApiError> {
    let s = st.driver.snapshot().await;
    let mut states = parse_list::<YarnApplicationState>(&q, "states")?;
    if states.is_none() {
        states = parse_list::<YarnApplicationState>(&q, "state")?;
    }
    let final_status = match q.get("finalStatus") {
        Some(v) => Some(
            v.parse::<FinalApplicationStatus>()
                .map_err(ApiError::bad_request)?,
        ),
        None => None,
    };
    let limit = match q.get("limit") {
        Some(v) => {
            let n: i64 = v
                .trim()
                .parse()
                .map_err(|_| ApiError::bad_request(format!("limit must be a number, got {v}")))?;
            if n <= 0 {
                return Err(ApiError::bad_request("limit value must be greater then 0"));
            }
            n as usize
        }
        None => usize::MAX,
    };
    let started = time_range(&q, "startedTimeBegin", "startedTimeEnd")?;
    let finished = time_range(&q, "finishedTimeBegin", "finishedTimeEnd")?;
    let has_finished_filter =
        q.contains_key("finishedTimeBegin") || q.contains_key("finishedTimeEnd");
    let lower_set = |k: &str| -> Option<BTreeSet<String>> {
        q.get(k)
            .map(|v| {
                v.split(',')
                    .map(|t| t.trim().to_lowercase())
                    .filter(|t| !t.is_empty())
                    .collect::<BTreeSet<_>>()
            })
            .filter(|s| !s.is_empty())
    };
    let types = lower_set("applicationTypes");
    let tags = lower_set("applicationTags");
    let user = q.get("user").filter(|u| !u.is_empty());
    let queue = q.get("queue").filter(|u| !u.is_empty());
    let name = q.get("name").filter(|u| !u.is_empty());
    let with_requests = !q
        .get("deSelects")
        .is_some_and(|d| d.split(',').any(|x| x.trim() == "resourceRequests"));
    let now = now_ms();
    let rm = rm_host(&headers);
    let list: Vec<AppInfo> = s
        .apps
        .values()
        .filter(|a| states.as_ref().is_none_or(|v| v.contains(&a.state)))
        .filter(|a| final_status.is_none_or(|f| f == a.final_status))
        .filter(|a| user.is_none_or(|u| *u == a.sub.user))
        .filter(|a| {
            queue.is_none_or(|qn| {
                !a.state.is_final()
                    && (*qn == a.queue || a.queue.rsplit('.').next() == Some(qn.as_str()))
            })
        })
        .filter(|a| name.is_none_or(|n| *n == a.sub.name))
        .filter(|a| a.submit_time >= started.0 && a.submit_time <= started.1)
        .filter(|a| {
            !has_finished_filter
                || (a.finish_time > 0 && a.finish_time >= finished.0 && a.finish_time <= finished.1)
        })
        .filter(|a| {
            types
                .as_ref()
                .is_none_or(|t| t.contains(&a.sub.application_type.to_lowercase()))
        })
        .filter(|a| {
            tags.as_ref()
                .is_none_or(|t| a.sub.tags.iter().any(|x| t.contains(&x.to_lowercase())))
        })
        .take(limit)
        .map(|a| app_info(&s, a, now, &rm, with_requests))
        .collect();
    Ok(Json(AppsBody {
        apps: if list.is_empty() {
            None
        } else {
            Some(Apps {
                app: OneOrMany(list),
            })
        },
    }))
}

async fn app(
    State(st): State<AppState>,
    headers: HeaderMap,
    PathParams(id): PathParams<String>,
) -> Result<Json<AppBody>, ApiError> {
    let s = st.driver.snapshot().await;
    let a = find_app(&s, &id)?;
    Ok(Json(AppBody {
        app: app_info(&s, a, now_ms(), &rm_host(&headers), true),
    }))
}

async fn app_state(
    State(st): State<AppState>,
    PathParams(id): PathParams<String>,
) -> Result<Json<AppStateBody>, ApiError> {
    let s = st.driver.snapshot().await;
    let a = find_app(&s, &id)?;
    Ok(Json(AppStateBody {
        state: a.state.to_string(),
    }))
}

async fn put_app_state(
    State(st): State<AppState>,
    headers: HeaderMap,
    Query(q): Q,
    PathParams(id): PathParams<String>,
    JsonBody(body): JsonBody<AppStateBody>,
) -> Result<Response, ApiError> {
    let aid = app_id(&id)?;
    if !body.state.trim().eq_ignore_ascii_case("KILLED") {
        return Err(ApiError::bad_request(
            "Only 'KILLED' is allowed as a target state.",
        ));
    }
    let who = st.caller(&q).await;
    let out = st.driver.call(|r| Command::Kill(aid, who, r)).await?;
    Ok(match out {
        KillOutcome::Done(state) => (
            StatusCode::OK,
            Json(AppStateBody {
                state: state.to_string(),
            }),
        )
            .into_response(),
        KillOutcome::InProgress => (
            StatusCode::ACCEPTED,
            [(
                header::LOCATION,
                format!(
                    "http://{}/ws/v1/cluster/apps/{aid}/state",
                    rm_host(&headers)
                ),
            )],
            Json(AppStateBody {
                state: "ACCEPTED".into(),
            }),
        )
            .into_response(),
    })
}

async fn app_queue(
    State(st): State<AppState>,
    PathParams(id): PathParams<String>,
) -> Result<Json<AppQueueBody>, ApiError> {
    let s = st.driver.snapshot().await;
    let a = find_app(&s, &id)?;
    Ok(Json(AppQueueBody {
        queue: a.queue.rsplit('.').next().unwrap_or(&a.queue).to_string(),
    }))
}

/// The short leaf name, as `GET /apps/{id}/queue` and `AppInfo.queue` show a queue.
fn leaf_name(path: &str) -> String {
    path.rsplit('.').next().unwrap_or(path).to_string()
}

/// `PUT /apps/{id}/queue {"queue":"b"}`: moves the application (owner, queue admin or
/// cluster admin only); answers the queue it is now in.
async fn put_app_queue(
    State(st): State<AppState>,
    Query(q): Q,
    PathParams(id): PathParams<String>,
    JsonBody(body): JsonBody<AppQueueBody>,
) -> Result<Json<AppQueueBody>, ApiError> {
    let aid = app_id(&id)?;
    let queue = body.queue.trim().to_string();
    if queue.is_empty() {
        return Err(ApiError::bad_request("Target Queue cannot be empty"));
    }
    let caller = st.caller(&q).await;
    let path = st
        .driver
        .call(|r| Command::MoveApp {
            id: aid,
            queue,
            caller,
            reply: r,
        })
        .await?;
    Ok(Json(AppQueueBody {
        queue: leaf_name(&path),
    }))
}

/// `PUT /apps/{id}/priority {"priority":N}`: answers the effective priority (clamped to
/// `[0, yarn.cluster.max-application-priority]`, as YARN does).
async fn put_app_priority(
    State(st): State<AppState>,
    Query(q): Q,
    PathParams(id): PathParams<String>,
    JsonBody(body): JsonBody<AppPriorityBody>,
) -> Result<Json<AppPriorityBody>, ApiError> {
    let aid = app_id(&id)?;
    let caller = st.caller(&q).await;
    let priority = st
        .driver
        .call(|r| Command::SetPriority {
            id: aid,
            priority: body.priority,
            caller,
            reply: r,
        })
        .await?;
    Ok(Json(AppPriorityBody { priority }))
}

async fn app_priority(
    State(st): State<AppState>,
    PathParams(id): PathParams<String>,
) -> Result<Json<AppPriorityBody>, ApiError> {
    let s = st.driver.snapshot().await;
    let a = find_app(&s, &id)?;
    Ok(Json(AppPriorityBody {
        priority: a.sub.priority,
    }))
}

fn attempt_info(s: &Snapshot, a: &App, t: &Attempt) -> AppAttemptInfo {
    let am = t.am_container.and_then(|c| s.containers.get(&c));
    AppAttemptInfo {
        id: t.id.attempt_id,
        start_time: t.start_time,
        finished_time: t.finish_time,
        container_id: t.am_container.map(|c| c.to_string()).unwrap_or_default(),
        node_http_address: t.am_node_http.clone().unwrap_or_default(),
        node_id: t
            .am_node
            .as_ref()
            .map(|n| n.to_string())
            .unwrap_or_default(),
        logs_link: am.map(|c| logs_url(c, &a.sub.user)).unwrap_or_default(),
        blacklisted_nodes: String::new(),
        nodes_blacklisted_by_system: String::new(),
        app_attempt_id: t.id.to_string(),
        app_attempt_state: t.state.to_string(),
        diagnostics_info: t.diagnostics.clone(),
    }
}

async fn attempts(
    State(st): State<AppState>,
    PathParams(id): PathParams<String>,
) -> Result<Json<AppAttemptsBody>, ApiError> {
    let s = st.driver.snapshot().await;
    let a = find_app(&s, &id)?;
    let list = a.attempts.iter().map(|t| attempt_info(&s, a, t)).collect();
    Ok(Json(AppAttemptsBody {
        app_attempts: AppAttempts {
            app_attempt: OneOrMany(list),
        },
    }))
}

fn find_attempt<'a>(a: &'a App, raw: &str) -> Result<&'a Attempt, ApiError> {
    let id: ApplicationAttemptId =
        raw.parse()
            .map_err(|e: spindle_common::ids::IdParseError| {
                ApiError::bad_request(format!("Invalid AppAttemptId: {raw} ({e})"))
            })?;
    a.attempt(&id).ok_or_else(|| {
        ApiError::not_found(format!(
            "java.lang.Exception: appattempt with id: {raw} not found"
        ))
    })
}

async fn attempt(
    State(st): State<AppState>,
    PathParams((id, att)): PathParams<(String, String)>,
) -> Result<Json<AppAttemptBody>, ApiError> {
    let s = st.driver.snapshot().await;
    let a = find_app(&s, &id)?;
    let t = find_attempt(a, &att)?;
    Ok(Json(AppAttemptBody {
        app_attempt: attempt_info(&s, a, t),
    }))
}

fn container_report(c: &RmContainer, user: &str, now: u64) -> ContainerReportInfo {
    let end = if c.finish_time > 0 {
        c.finish_time
    } else {
        now
    };
    ContainerReportInfo {
        container_id: c.id.to_string(),
        allocated_mb: c.resource.memory_mb,
        allocated_v_cores: c.resource.vcores,
        assigned_node_id: c.node.to_string(),
        priority: c.priority,
        started_time: c.allocated_time,
        finished_time: c.finish_time,
        elapsed_time: end.saturating_sub(c.allocated_time),
        diagnostics_info: c.diagnostics.clone(),
        log_url: logs_url(c, user),
        container_exit_status: c.exit_status,
        container_state: match c.state {
            spindle_common::states::RmContainerState::COMPLETED
            | spindle_common::states::RmContainerState::KILLED
            | spindle_common::states::RmContainerState::RELEASED
            | spindle_common::states::RmContainerState::EXPIRED => "COMPLETE".into(),
            spindle_common::states::RmContainerState::RUNNING => "RUNNING".into(),
            _ => "NEW".into(),
        },
        node_http_address: format!("http://{}", c.node_http),
        node_id: c.node.to_string(),
        allocated_resources: c
            .resource
            .entries()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    }
}

async fn attempt_containers(
    State(st): State<AppState>,
    PathParams((id, att)): PathParams<(String, String)>,
) -> Result<Json<ContainersBody>, ApiError> {
    let s = st.driver.snapshot().await;
    let a = find_app(&s, &id)?;
    let t = find_attempt(a, &att)?;
    let now = now_ms();
    let list: Vec<ContainerReportInfo> = t
        .containers
        .iter()
        .filter_map(|c| s.containers.get(c))
        .map(|c| container_report(c, &a.sub.user, now))
        .collect();
    Ok(Json(ContainersBody {
        containers: if list.is_empty() {
            None
        } else {
            Some(Containers {
                container: OneOrMany(list),
            })
        },
    }))
}

async fn attempt_container(
    State(st): State<AppState>,
    PathParams((id, att, cid)): PathParams<(String, String, String)>,
) -> Result<Json<ContainerReportBody>, ApiError> {
    let s = st.driver.snapshot().await;
    let a = find_app(&s, &id)?;
    let t = find_attempt(a, &att)?;
    let c: ContainerId = cid
        .parse()
        .map_err(|e: spindle_common::ids::IdParseError| ApiError::bad_request(e.to_string()))?;
    let rc = t
        .containers
        .contains(&c)
        .then(|| s.containers.get(&c))
        .flatten()
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "java.lang.Exception: container with id: {cid} not found"
            ))
        })?;
    Ok(Json(ContainerReportBody {
        container: container_report(rc, &a.sub.user, now_ms()),
    }))
}

async fn app_statistics(
    State(st): State<AppState>,
    Query(q): Q,
) -> Result<Json<AppStatisticsBody>, ApiError> {
    let s = st.driver.snapshot().await;
    let states = parse_list::<YarnApplicationState>(&q, "states")?
        .unwrap_or_else(|| YarnApplicationState::ALL.to_vec());
    let types: Vec<String> = q
        .get("applicationTypes")
        .map(|v| {
            v.split(',')
                .map(|t| t.trim().to_lowercase())
                .filter(|t| !t.is_empty())
                .collect()
        })
        .unwrap_or_default();
    if types.len() > 1 {
        return Err(ApiError::bad_request(format!(
            "# of applicationTypes = {}, we temporarily support at most one applicationType",
            types.len()
        )));
    }
    let kind = types.first().cloned().unwrap_or_else(|| "*".into());
    let items = states
        .into_iter()
        .map(|state| StatItem {
            state,
            kind: kind.clone(),
            count: s
                .apps
                .values()
                .filter(|a| {
                    a.state == state
                        && (kind == "*" || a.sub.application_type.to_lowercase() == kind)
                })
                .count() as u64,
        })
        .collect();
    Ok(Json(AppStatisticsBody {
        app_stat_info: AppStatInfo { stat_item: items },
    }))
}

async fn new_application(State(st): State<AppState>) -> Result<Json<NewApplication>, ApiError> {
    let (id, max) = st.driver.call(Command::NewApplication).await?;
    Ok(Json(NewApplication {
        application_id: id,
        maximum_resource_capability: ResourceInfo::from(&max),
    }))
}

/// Converts YARN's submission context into the core's [`Submission`], refusing what
/// cannot be run with a 400 that says which field is wrong.
fn submission(
    ctx: ApplicationSubmissionContext,
    user: String,
) -> Result<(ApplicationId, Submission), ApiError> {
    if ctx.application_id.trim().is_empty() {
        return Err(ApiError::bad_request(
            "application-id is required; get one from POST /ws/v1/cluster/apps/new-application",
        ));
    }
    let id = app_id(ctx.application_id.trim())?;
    let spec = ctx.am_container_spec;
    let command = spec.commands.map(|c| c.command).unwrap_or_default();
    let mut env = std::collections::BTreeMap::new();
    for e in spec.environment.map(|e| e.entry.0).unwrap_or_default() {
        if e.key.is_empty() || e.key.contains('=') || e.key.contains('\0') {
            return Err(ApiError::bad_request(format!(
                "invalid environment variable name '{}'",
                e.key
            )));
        }
        env.insert(e.key, e.value);
    }
    let mut local = std::collections::BTreeMap::new();
    for e in spec.local_resources.map(|l| l.entry.0).unwrap_or_default() {
        if e.key.is_empty() || e.key.contains('/') || e.key == ".." || e.key == "." {
            return Err(ApiError::bad_request(format!(
                "invalid local resource name '{}'",
                e.key
            )));
        }
        local.insert(e.key, e.value);
    }
    let resource = ctx
        .resource
        .map(|r| r.to_resource())
        .unwrap_or_else(|| Resource::new(1024, 1));
    check_resource("resource", &resource)?;
    let attempts = ctx.max_app_attempts.unwrap_or(0);
    if attempts < 0 {
        return Err(ApiError::bad_request(format!(
            "max-app-attempts must not be negative, got {attempts}"
        )));
    }
    let name = ctx
        .application_name
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "N/A".into());
    Ok((
        id,
        Submission {
            name,
            queue: ctx
                .queue
                .filter(|q| !q.trim().is_empty())
                .unwrap_or_else(|| "default".into())
                .trim()
                .to_string(),
            user,
            priority: ctx.priority.unwrap_or(0),
            application_type: ctx
                .application_type
                .filter(|t| !t.is_empty())
                .unwrap_or_else(|| "YARN".into()),
            tags: ctx
                .application_tags
                .map(|t| t.tag.0)
                .unwrap_or_default()
                .into_iter()
                .map(|t| t.trim().to_lowercase())
                .filter(|t| !t.is_empty())
                .collect(),
            am_resource: resource,
            am_launch: spindle_common::records::node::ContainerLaunchContext {
                commands: vec![command],
                environment: env,
                local_resources: local,
            },
            max_app_attempts: attempts as u32,
            keep_containers: ctx.keep_containers_across_application_attempts,
            unmanaged_am: ctx.unmanaged_am,
            groups: Vec::new(),
        },
    ))
}

async fn submit(
    State(st): State<AppState>,
    headers: HeaderMap,
    Query(q): Q,
    JsonBody(ctx): JsonBody<ApplicationSubmissionContext>,
) -> Result<Response, ApiError> {
    let who = st.caller(&q).await;
    let (id, mut sub) = submission(ctx, who.user)?;
    sub.groups = who.groups;
    st.driver
        .call(|r| Command::Submit(id, Box::new(sub), r))
        .await?;
    let location = format!("http://{}/ws/v1/cluster/apps/{id}", rm_host(&headers));
    Ok((StatusCode::ACCEPTED, [(header::LOCATION, location)]).into_response())
}
