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
use crate::core::{
    AmProtocol, App, Attempt, Dependency, DependencyKind, KillOutcome, Node, QueueView,
    RmContainer, Submission,
};
use crate::driver::{AdminCommand, AppCommand, QueryCommand, Snapshot};

mod accounting;
mod apps;
mod attempts;
mod images;
mod labels;
mod nodes;
mod scheduler;
mod submit;

pub(super) use apps::app_info;
use apps::*;
use attempts::*;
use labels::*;
pub(super) use nodes::node_info;
use nodes::*;
use scheduler::*;
use submit::*;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/ws/v1/cluster", get(info))
        .route("/ws/v1/cluster/", get(info))
        .route("/ws/v1/cluster/info", get(info))
        .route("/ws/v1/cluster/metrics", get(metrics))
        .route("/ws/v1/cluster/scheduler", get(scheduler))
        .route("/ws/v1/cluster/nodes", get(nodes))
        .route("/ws/v1/cluster/nodes/{nodeid}", get(node))
        .route("/ws/v1/cluster/nodes-summary", get(nodes_summary))
        .route(
            "/ws/v1/cluster/nodes/{nodeid}/get-labels",
            get(node_get_labels),
        )
        .route(
            "/ws/v1/cluster/nodes/{nodeid}/replace-labels",
            post(node_replace_labels),
        )
        .route("/ws/v1/cluster/get-node-labels", get(get_node_labels))
        .route("/ws/v1/cluster/add-node-labels", post(add_node_labels))
        .route(
            "/ws/v1/cluster/remove-node-labels",
            post(remove_node_labels),
        )
        .route(
            "/ws/v1/cluster/replace-node-to-labels",
            post(replace_node_to_labels),
        )
        .route("/ws/v1/cluster/get-node-to-labels", get(get_node_to_labels))
        .route("/ws/v1/cluster/label-mappings", get(label_mappings))
        .route(
            "/ws/v1/cluster/get-node-attributes",
            get(get_node_attributes),
        )
        .route(
            "/ws/v1/cluster/get-attributes-to-nodes",
            get(get_attributes_to_nodes),
        )
        .route(
            "/ws/v1/cluster/get-node-to-attributes",
            get(get_node_to_attributes),
        )
        .route(
            "/ws/v1/cluster/node-attributes-mapping",
            post(node_attributes_mapping),
        )
        .route("/ws/v1/cluster/images/prefetch", post(images::prefetch))
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
        .route("/ws/v1/cluster/apps/{appid}/timeouts", get(app_timeouts))
        .route(
            "/ws/v1/cluster/apps/{appid}/timeouts/{type}",
            get(app_timeout),
        )
        .route(
            "/ws/v1/cluster/apps/{appid}/timeout",
            axum::routing::put(put_app_timeout),
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
        .route("/ws/v1/cluster/accounting", get(accounting::accounting))
}

type Q = Query<HashMap<String, String>>;

fn rm_host(headers: &HeaderMap) -> String {
    headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost:8088")
        .to_string()
}

async fn info(State(st): State<AppState>) -> Json<ClusterInfoBody> {
    let i = &st.info;
    Json(info_body(
        i.cluster_ts,
        i.started_on,
        crate::ha::HaState::Active,
        i.store_kind,
    ))
}

/// What a standby RM answers on `/ws/v1/cluster/info` (it redirects every other call).
pub fn standby_info(cluster_ts: u64, started_on: u64) -> ClusterInfoBody {
    info_body(
        cluster_ts,
        started_on,
        crate::ha::HaState::Standby,
        super::StoreName::Etcd,
    )
}

fn info_body(
    id: u64,
    started_on: u64,
    ha: crate::ha::HaState,
    store: super::StoreName,
) -> ClusterInfoBody {
    let (store_name, connection) = match store {
        super::StoreName::Sqlite => (
            "org.apache.spindle.resourcemanager.SQLiteRMStateStore",
            "ResourceManager HA is not enabled.",
        ),
        super::StoreName::Etcd => (
            "org.apache.spindle.resourcemanager.EtcdRMStateStore",
            "CONNECTED",
        ),
    };
    ClusterInfoBody {
        cluster_info: ClusterInfo {
            id,
            started_on,
            state: "STARTED".into(),
            ha_state: ha.as_str().into(),
            rm_state_store_name: store_name.into(),
            resource_manager_version: env!("CARGO_PKG_VERSION").into(),
            resource_manager_build_version: format!("spindle {}", env!("CARGO_PKG_VERSION")),
            resource_manager_version_built_on: String::new(),
            hadoop_version: "3.4.0".into(),
            hadoop_build_version: format!("3.4.0 (spindle {})", env!("CARGO_PKG_VERSION")),
            hadoop_version_built_on: String::new(),
            ha_zoo_keeper_connection_state: connection.into(),
        },
    }
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
    // What waiting gangs hold on nodes: the root queue's reservations.
    let reserved = s
        .queue_views
        .iter()
        .find(|v| v.parent.is_none())
        .map(|v| v.reserved.clone())
        .unwrap_or_default();
    m.reserved_mb = reserved.memory_mb;
    m.reserved_virtual_cores = reserved.vcores;
    m.total_reserved_resources_across_partition = ResourceInfo::from(&reserved);
    m.total_allocated_containers_across_partition = m.containers_allocated;
    m
}

async fn metrics(State(st): State<AppState>) -> Json<ClusterMetricsBody> {
    let s = st.driver.snapshot().await;
    Json(ClusterMetricsBody {
        cluster_metrics: cluster_metrics(&s),
    })
}
