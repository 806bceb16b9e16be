//! `/metrics`: Prometheus text exposition of the cluster metrics.

use std::fmt::Write;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use super::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/metrics", get(metrics))
}

async fn metrics(State(st): State<AppState>) -> impl IntoResponse {
    let s = st.driver.snapshot().await;
    let m = super::cluster::cluster_metrics(&s);
    let mut out = String::new();
    let mut g = |name: &str, help: &str, kind: &str, v: i64| {
        let _ = writeln!(out, "# HELP spindle_rm_{name} {help}\n# TYPE spindle_rm_{name} {kind}\nspindle_rm_{name} {v}");
    };
    g(
        "apps_submitted_total",
        "Applications submitted since start.",
        "counter",
        m.apps_submitted as i64,
    );
    g(
        "apps_completed_total",
        "Applications that reached a final state.",
        "counter",
        m.apps_completed as i64,
    );
    g(
        "apps_failed_total",
        "Applications that FAILED.",
        "counter",
        m.apps_failed as i64,
    );
    g(
        "apps_killed_total",
        "Applications that were KILLED.",
        "counter",
        m.apps_killed as i64,
    );
    g(
        "apps_pending",
        "Applications waiting (NEW to ACCEPTED).",
        "gauge",
        m.apps_pending as i64,
    );
    g(
        "apps_running",
        "Applications RUNNING.",
        "gauge",
        m.apps_running as i64,
    );
    g(
        "containers_allocated",
        "Live containers.",
        "gauge",
        m.containers_allocated as i64,
    );
    g(
        "containers_pending",
        "Containers asked for and not yet allocated.",
        "gauge",
        m.containers_pending as i64,
    );
    g(
        "containers_allocated_total",
        "Containers allocated since start.",
        "counter",
        s.counters.containers_allocated as i64,
    );
    g(
        "memory_total_mb",
        "Memory of active nodes.",
        "gauge",
        m.total_mb,
    );
    g(
        "memory_allocated_mb",
        "Memory allocated to containers.",
        "gauge",
        m.allocated_mb,
    );
    g(
        "vcores_total",
        "Vcores of active nodes.",
        "gauge",
        m.total_virtual_cores,
    );
    g(
        "vcores_allocated",
        "Vcores allocated to containers.",
        "gauge",
        m.allocated_virtual_cores,
    );
    g(
        "nodes_active",
        "RUNNING nodes.",
        "gauge",
        m.active_nodes as i64,
    );
    g("nodes_lost", "LOST nodes.", "gauge", m.lost_nodes as i64);
    g(
        "nodes_unhealthy",
        "UNHEALTHY nodes.",
        "gauge",
        m.unhealthy_nodes as i64,
    );
    g(
        "nodes_decommissioning",
        "DECOMMISSIONING nodes (draining).",
        "gauge",
        m.decommissioning_nodes as i64,
    );
    g(
        "nodes_decommissioned",
        "DECOMMISSIONED nodes.",
        "gauge",
        m.decommissioned_nodes as i64,
    );
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out)
}
