//! The RM web UI: server-rendered HTML pages at `/` and `/cluster/...`. `GET /cluster`
//! answers 200 on the active RM, which existing YARN clients use as a liveness probe. The
//! single-page web UI at `/ui` (`ui/`) links from every page's navigation bar.

use std::fmt::Write;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;
use spindle_common::time::now_ms;

use super::cluster::{app_info, cluster_metrics, node_info};
use super::AppState;
use crate::core::QueueView;
use crate::driver::Snapshot;

#[path = "ui/mod.rs"]
mod ui;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .merge(ui::routes())
        .route("/", get(|| async { Redirect::temporary("/cluster") }))
        .route("/cluster", get(overview))
        .route("/cluster/", get(overview))
        .route("/cluster/apps", get(overview))
        .route("/cluster/app/{appid}", get(app_page))
        .route("/cluster/nodes", get(nodes_page))
        .route("/cluster/scheduler", get(scheduler_page))
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

fn page(title: &str, body: &str) -> Html<String> {
    Html(format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{t} - Spindle</title>\
<style>body{{font-family:sans-serif;margin:1.5em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:3px 8px;text-align:left}}\
th{{background:#eee}}nav a{{margin-right:1em}}.bar{{background:#ddd;width:200px;height:12px;display:inline-block}}.bar span{{background:#4a8;height:12px;display:block}}</style></head>\
<body><nav><a href=\"/ui\">Web UI</a><a href=\"/cluster\">Applications</a><a href=\"/cluster/nodes\">Nodes</a><a href=\"/cluster/scheduler\">Scheduler</a><a href=\"/ws/v1/cluster/metrics\">REST</a></nav>\
<h1>{t}</h1>{body}</body></html>",
        t = esc(title)
    ))
}

fn metrics_table(s: &Snapshot) -> String {
    let m = cluster_metrics(s);
    format!(
        "<table id=\"metrics\"><tr><th>Apps Submitted</th><th>Apps Pending</th><th>Apps Running</th><th>Apps Completed</th>\
<th>Containers Running</th><th>Memory Used</th><th>Memory Total</th><th>VCores Used</th><th>VCores Total</th><th>Active Nodes</th><th>Lost Nodes</th></tr>\
<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} MB</td><td>{} MB</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr></table>",
        m.apps_submitted, m.apps_pending, m.apps_running, m.apps_completed, m.containers_allocated, m.allocated_mb, m.total_mb,
        m.allocated_virtual_cores, m.total_virtual_cores, m.active_nodes, m.lost_nodes
    )
}

async fn overview(State(st): State<AppState>, headers: HeaderMap) -> Html<String> {
    let s = st.driver.snapshot().await;
    let rm = headers
        .get("host")
        .and_then(|h| h.to_str().ok())
        .unwrap_or("")
        .to_string();
    let now = now_ms();
    let mut b = metrics_table(&s);
    b.push_str("<h2>Applications</h2><table id=\"apps\"><tr><th>ID</th><th>User</th><th>Name</th><th>Type</th><th>Queue</th><th>State</th><th>FinalStatus</th><th>Progress</th><th>Running Containers</th><th>Allocated MB</th></tr>");
    for a in s.apps.values().rev() {
        let i = app_info(&s, a, now, &rm, false);
        let _ = write!(
            b,
            "<tr><td><a href=\"/cluster/app/{id}\">{id}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.0}%</td><td>{}</td><td>{}</td></tr>",
            esc(&i.user), esc(&i.name), esc(&i.application_type), esc(&i.queue), i.state, i.final_status, i.progress,
            i.running_containers, i.allocated_mb, id = esc(&i.id)
        );
    }
    b.push_str("</table>");
    page("Cluster", &b)
}

async fn app_page(State(st): State<AppState>, id: Result<Path<String>, PathRejection>) -> Response {
    // A malformed id (one that is not UTF-8 once decoded, too) is the page's 404.
    let id = id.map(|Path(id)| id).unwrap_or_default();
    let s = st.driver.snapshot().await;
    let Some(a) = id.parse().ok().and_then(|aid| s.apps.get(&aid)) else {
        return (
            axum::http::StatusCode::NOT_FOUND,
            page(
                "Not found",
                &format!("<p>Application {} not found.</p>", esc(&id)),
            ),
        )
            .into_response();
    };
    let i = app_info(&s, a, now_ms(), "", false);
    let mut b = format!(
        "<table><tr><th>User</th><td>{}</td></tr><tr><th>Name</th><td>{}</td></tr><tr><th>Queue</th><td>{}</td></tr>\
<tr><th>State</th><td id=\"state\">{}</td></tr><tr><th>FinalStatus</th><td>{}</td></tr><tr><th>Diagnostics</th><td><pre>{}</pre></td></tr>\
<tr><th>Aggregate Resource Allocation</th><td>{} MB-seconds, {} vcore-seconds</td></tr></table><h2>Attempts</h2><table><tr><th>Attempt</th><th>State</th><th>AM Container</th><th>Node</th><th>Logs</th></tr>",
        esc(&i.user), esc(&i.name), esc(&i.queue), i.state, i.final_status, esc(&i.diagnostics), i.memory_seconds, i.vcore_seconds
    );
    for t in &a.attempts {
        let logs = t
            .am_container()
            .and_then(|c| s.containers.get(&c))
            .map(|c| {
                format!(
                    "<a href=\"{}://{}/node/containerlogs/{}/{}\">logs</a>",
                    s.scheme,
                    esc(&c.node_http),
                    c.id,
                    esc(&a.sub.user)
                )
            })
            .unwrap_or_default();
        let _ = write!(
            b,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{logs}</td></tr>",
            t.id,
            t.state(),
            t.am_container().map(|c| c.to_string()).unwrap_or_default(),
            esc(&t.am_node().map(|n| n.to_string()).unwrap_or_default())
        );
    }
    b.push_str("</table>");
    page(&format!("Application {id}"), &b).into_response()
}

async fn nodes_page(State(st): State<AppState>) -> Html<String> {
    let s = st.driver.snapshot().await;
    let mut b = String::from("<table id=\"nodes\"><tr><th>Node</th><th>Rack</th><th>State</th><th>Containers</th><th>Mem Used</th><th>Mem Avail</th><th>VCores Used</th><th>VCores Avail</th><th>Resources</th><th>Health</th></tr>");
    for n in s.nodes.values() {
        let i = node_info(&s, n);
        let extra: Vec<String> = n
            .total
            .extended()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        let _ = write!(
            b,
            "<tr><td><a href=\"{scheme}://{http}/ws/v1/node/info\">{id}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{} MB</td><td>{} MB</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&i.rack), i.state, i.num_containers, i.used_memory_mb, i.avail_memory_mb, i.used_virtual_cores,
            i.available_virtual_cores, esc(&extra.join(", ")), esc(&i.health_report), scheme = s.scheme, http = esc(&i.node_http_address), id = esc(&i.id)
        );
    }
    b.push_str("</table>");
    page("Nodes", &b)
}

fn queue_rows(views: &[QueueView], v: &QueueView, depth: usize, out: &mut String) {
    let _ = write!(
        out,
        "<tr><td style=\"padding-left:{}em\">{}</td><td>{}</td><td>{:.1}%</td><td>{:.1}%</td><td><div class=\"bar\"><span style=\"width:{:.0}%\"></span></div> {:.1}% of guarantee</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        depth * 2,
        esc(&v.name),
        v.state.as_str(),
        v.absolute_capacity,
        v.absolute_max_capacity,
        v.used_capacity.min(100.0),
        v.used_capacity,
        esc(&v.used.to_string()),
        esc(&v.guaranteed.to_string()),
        v.num_applications
    );
    for c in views
        .iter()
        .filter(|c| c.parent.as_deref() == Some(v.path.as_str()))
    {
        queue_rows(views, c, depth + 1, out);
    }
}

async fn scheduler_page(State(st): State<AppState>) -> Html<String> {
    let s = st.driver.snapshot().await;
    let mut b = String::from("<table id=\"queues\"><tr><th>Queue</th><th>State</th><th>Absolute Capacity</th><th>Absolute Max Capacity</th><th>Used</th><th>Used Resources</th><th>Guaranteed</th><th>Applications</th></tr>");
    if let Some(root) = s.queue_views.iter().find(|v| v.parent.is_none()) {
        queue_rows(&s.queue_views, root, 0, &mut b);
    }
    b.push_str("</table>");
    page("Scheduler", &b)
}
