//! `/metrics`: the RM's Prometheus series in the text exposition format 0.0.4, built with the
//! `prometheus` crate.
//!
//! Two kinds of series:
//! - **events**, kept in [`RmMetrics`] for the RM's life: request latency by route template
//!   ([`track`], a middleware over every route), the time the driver spends in each core call
//!   ([`RmMetrics::observe_core_call`]; the driver times the calls, the core reads no clock)
//!   and how long gangs waited from asking to their grant ([`RmMetrics::observe_gang_waits`],
//!   the waits the core records at each grant, taken by the driver after each call);
//! - **state**, read from the driver's snapshot at each scrape into a registry made for that
//!   scrape (so a removed queue or node leaves no stale series): cluster totals, per queue
//!   used, guaranteed, maximum, pending and reserved per resource type, applications by state
//!   per queue, per node GPUs used and free, and the scheduler's decision counters.
//!
//! Every name and its labels are listed in `docs/operations.md` ("Metrics").

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};
use spindle_common::resource::{GPU, MEMORY_MB, VCORES};

use super::AppState;
use crate::core::model::AppQueue;
use crate::driver::Snapshot;

/// The content type of the text exposition format 0.0.4.
pub(super) const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/metrics", get(metrics))
}

async fn metrics(State(st): State<AppState>) -> impl IntoResponse {
    let s = st.driver.snapshot().await;
    (
        [(header::CONTENT_TYPE, CONTENT_TYPE)],
        st.info.metrics.render(&s),
    )
}

/// The RM's event series (histograms), shared by the router's middleware and the driver.
pub struct RmMetrics {
    registry: Registry,
    http: HistogramVec,
    core_calls: HistogramVec,
    gang_wait: Histogram,
    blobs: BlobCounters,
}

/// The blob store's event counters (`spindle_rm_blob_*`).
struct BlobCounters {
    uploaded_bytes: IntCounter,
    uploads: IntCounter,
    skipped: IntCounter,
    downloaded_bytes: IntCounter,
    removed: IntCounter,
}

impl BlobCounters {
    fn new(registry: &Registry) -> Self {
        let c = |name: &str, help: &str| {
            let c = IntCounter::new(name, help).expect("valid counter");
            registry
                .register(Box::new(c.clone()))
                .expect("unique metric names");
            c
        };
        Self {
            uploaded_bytes: c(
                "spindle_rm_blob_uploaded_bytes_total",
                "Bytes clients uploaded to the blob store (shipped files, whether new or already stored).",
            ),
            uploads: c(
                "spindle_rm_blob_uploads_total",
                "Uploads that stored a new blob.",
            ),
            skipped: c(
                "spindle_rm_blob_uploads_skipped_total",
                "Shipped files a client did not upload because the blob store held their digest for the caller already.",
            ),
            downloaded_bytes: c(
                "spindle_rm_blob_downloaded_bytes_total",
                "Bytes of blobs served to NodeManagers and clients.",
            ),
            removed: c(
                "spindle_rm_blobs_removed_total",
                "Blobs the cleaner removed (no live application used them and their retention had passed).",
            ),
        }
    }
}

impl std::fmt::Debug for RmMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RmMetrics")
    }
}

impl Default for RmMetrics {
    fn default() -> Self {
        Self::new()
    }
}

const HTTP_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
const CORE_BUCKETS: &[f64] = &[
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 0.5, 1.0,
];
/// Gang waits run from nothing (granted at once) to hours.
const GANG_WAIT_BUCKETS: &[f64] = &[
    0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 21600.0,
    86400.0,
];

impl RmMetrics {
    pub fn new() -> Self {
        let registry = Registry::new();
        let http = HistogramVec::new(
            HistogramOpts::new(
                "spindle_rm_http_request_duration_seconds",
                "RM HTTP requests (REST, AM protocol, ResourceTracker) by method, route template and status code.",
            )
            .buckets(HTTP_BUCKETS.to_vec()),
            &["method", "path", "code"],
        )
        .expect("valid histogram");
        let core_calls = HistogramVec::new(
            HistogramOpts::new(
                "spindle_rm_core_call_duration_seconds",
                "Time the driver spent in one call of the scheduler core, by call (heartbeats, allocate calls, submissions and the tick run scheduling passes), with its state-store writes.",
            )
            .buckets(CORE_BUCKETS.to_vec()),
            &["call"],
        )
        .expect("valid histogram");
        let gang_wait = Histogram::with_opts(
            HistogramOpts::new(
                "spindle_rm_gang_wait_seconds",
                "How long each granted gang waited, from the start of its round of asking to its grant.",
            )
            .buckets(GANG_WAIT_BUCKETS.to_vec()),
        )
        .expect("valid histogram");
        let blobs = BlobCounters::new(&registry);
        for c in [
            Box::new(http.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(core_calls.clone()),
            Box::new(gang_wait.clone()),
        ] {
            registry.register(c).expect("unique metric names");
        }
        Self {
            registry,
            http,
            core_calls,
            gang_wait,
            blobs,
        }
    }

    /// A new blob of `bytes` was stored.
    pub fn blob_uploaded(&self, bytes: u64) {
        self.blobs.uploads.inc();
        self.blobs.uploaded_bytes.inc_by(bytes);
    }

    /// `bytes` were uploaded for a digest already stored (a new holder proving it).
    pub fn blob_received(&self, bytes: u64) {
        self.blobs.uploaded_bytes.inc_by(bytes);
    }

    /// A client's claim found the digest held: nothing was uploaded.
    pub fn blob_upload_skipped(&self) {
        self.blobs.skipped.inc();
    }

    /// A blob of `bytes` is being served.
    pub fn blob_downloaded(&self, bytes: u64) {
        self.blobs.downloaded_bytes.inc_by(bytes);
    }

    /// The cleaner removed `n` blobs.
    pub fn blobs_removed(&self, n: u64) {
        self.blobs.removed.inc_by(n);
    }

    /// One core call the driver made (`call` is a fixed name, never user input).
    pub fn observe_core_call(&self, call: &'static str, took: Duration) {
        self.core_calls
            .with_label_values(&[call])
            .observe(took.as_secs_f64());
    }

    /// Gangs granted since the last call, each with its wait in ms.
    pub fn observe_gang_waits(&self, waits_ms: &[u64]) {
        for w in waits_ms {
            self.gang_wait.observe(*w as f64 / 1000.0);
        }
    }

    /// The whole exposition: the event series and the snapshot's.
    pub fn render(&self, s: &Snapshot) -> String {
        let mut families = self.registry.gather();
        families.extend(snapshot_registry(s).gather());
        families.sort_by(|a, b| a.name().cmp(b.name()));
        TextEncoder::new()
            .encode_to_string(&families)
            .unwrap_or_else(|e| format!("# encoding failed: {e}\n"))
    }
}

/// The middleware that times every request by its route template (`MatchedPath`, so
/// `/ws/v1/cluster/apps/{appid}` is one series however many applications there are); a path
/// no route matched is `unmatched`, a method outside HTTP's own is `other`.
pub(super) async fn track(State(m): State<Arc<RmMetrics>>, req: Request, next: Next) -> Response {
    let path = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".to_string());
    let method = method_label(req.method());
    let start = Instant::now();
    let resp = next.run(req).await;
    m.http
        .with_label_values(&[method, path.as_str(), resp.status().as_str()])
        .observe(start.elapsed().as_secs_f64());
    resp
}

/// A bounded label for a request method.
pub(super) fn method_label(m: &Method) -> &'static str {
    spindle_common::net::method_label(m.as_str())
}

fn gauge(r: &Registry, name: &str, help: &str, v: i64) {
    let g = IntGauge::new(name, help).expect("valid gauge");
    g.set(v);
    r.register(Box::new(g)).expect("unique metric names");
}

fn counter(r: &Registry, name: &str, help: &str, v: u64) {
    let c = prometheus::IntCounter::new(name, help).expect("valid counter");
    c.inc_by(v);
    r.register(Box::new(c)).expect("unique metric names");
}

fn gauge_vec(r: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let g = IntGaugeVec::new(Opts::new(name, help), labels).expect("valid gauge");
    r.register(Box::new(g.clone()))
        .expect("unique metric names");
    g
}

const MIB: i64 = 1 << 20;

/// The series read from one snapshot.
fn snapshot_registry(s: &Snapshot) -> Registry {
    let r = Registry::new();
    let m = super::cluster::cluster_metrics(s);
    counter(
        &r,
        "spindle_rm_apps_submitted_total",
        "Applications submitted since start.",
        m.apps_submitted,
    );
    counter(
        &r,
        "spindle_rm_apps_completed_total",
        "Applications that reached a final state.",
        m.apps_completed,
    );
    counter(
        &r,
        "spindle_rm_apps_failed_total",
        "Applications that FAILED.",
        m.apps_failed,
    );
    counter(
        &r,
        "spindle_rm_apps_killed_total",
        "Applications that were KILLED.",
        m.apps_killed,
    );
    let g = |name: &str, help: &str, v: u64| gauge(&r, name, help, v as i64);
    g(
        "spindle_rm_apps_pending",
        "Applications waiting (NEW to ACCEPTED).",
        m.apps_pending,
    );
    g(
        "spindle_rm_apps_running",
        "Applications RUNNING.",
        m.apps_running,
    );
    g(
        "spindle_rm_containers_allocated",
        "Live containers.",
        m.containers_allocated,
    );
    g(
        "spindle_rm_containers_pending",
        "Containers asked for and not yet allocated.",
        m.containers_pending,
    );
    counter(
        &r,
        "spindle_rm_containers_allocated_total",
        "Containers allocated since start.",
        s.counters.containers_allocated,
    );
    gauge(
        &r,
        "spindle_rm_memory_capacity_bytes",
        "Memory of active nodes.",
        m.total_mb * MIB,
    );
    gauge(
        &r,
        "spindle_rm_memory_allocated_bytes",
        "Memory allocated to containers.",
        m.allocated_mb * MIB,
    );
    gauge(
        &r,
        "spindle_rm_vcores_capacity",
        "Vcores of active nodes.",
        m.total_virtual_cores,
    );
    gauge(
        &r,
        "spindle_rm_vcores_allocated",
        "Vcores allocated to containers.",
        m.allocated_virtual_cores,
    );
    g("spindle_rm_nodes_active", "RUNNING nodes.", m.active_nodes);
    g("spindle_rm_nodes_lost", "LOST nodes.", m.lost_nodes);
    g(
        "spindle_rm_nodes_unhealthy",
        "UNHEALTHY nodes.",
        m.unhealthy_nodes,
    );
    g(
        "spindle_rm_nodes_decommissioning",
        "DECOMMISSIONING nodes (draining).",
        m.decommissioning_nodes,
    );
    g(
        "spindle_rm_nodes_decommissioned",
        "DECOMMISSIONED nodes.",
        m.decommissioned_nodes,
    );
    queue_series(&r, s);
    node_series(&r, s);
    decision_series(&r, s);
    r
}

/// Every resource type the cluster knows of: the base two, then every type a node, a queue
/// or the maximum allocation names (so a queue that uses no GPU still shows 0 GPUs).
fn resource_types(s: &Snapshot) -> BTreeSet<&'static str> {
    let mut t: BTreeSet<&'static str> = [MEMORY_MB, VCORES].into_iter().collect();
    t.extend(s.max_allocation.entries().map(|(n, _)| n));
    for (total, _) in s.node_usage.values() {
        t.extend(total.entries().map(|(n, _)| n));
    }
    for q in &s.queue_views {
        t.extend(q.maximum.entries().map(|(n, _)| n));
    }
    t
}

fn queue_series(r: &Registry, s: &Snapshot) {
    let types = resource_types(s);
    let kinds = [
        (
            "spindle_rm_queue_resource_used",
            "Resources a queue's containers hold, per resource type (memory-mb in MiB, vcores, yarn.io/gpu in devices).",
        ),
        (
            "spindle_rm_queue_resource_guaranteed",
            "A queue's guaranteed resources (its capacity, effective), per resource type.",
        ),
        (
            "spindle_rm_queue_resource_maximum",
            "A queue's maximum resources (its maximum capacity, effective), per resource type.",
        ),
        (
            "spindle_rm_queue_resource_pending",
            "Resources asked for by a queue's applications and not yet allocated, per resource type.",
        ),
        (
            "spindle_rm_queue_resource_reserved",
            "Resources a queue's waiting gangs hold reserved on nodes, per resource type.",
        ),
    ];
    let vecs: Vec<IntGaugeVec> = kinds
        .iter()
        .map(|(n, h)| gauge_vec(r, n, h, &["queue", "resource"]))
        .collect();
    for q in &s.queue_views {
        let path = q.path.to_string();
        let values = [&q.used, &q.guaranteed, &q.maximum, &q.pending, &q.reserved];
        for (v, res) in vecs.iter().zip(values) {
            for t in &types {
                v.with_label_values(&[path.as_str(), t]).set(res.get(t));
            }
        }
    }
    let apps = gauge_vec(
        r,
        "spindle_rm_queue_applications",
        "Applications the RM keeps, by leaf queue and YARN state.",
        &["queue", "state"],
    );
    let mut counts: BTreeMap<(&spindle_common::QueuePath, &'static str), i64> = BTreeMap::new();
    for a in s.apps.values() {
        if let AppQueue::Leaf(q) = &a.queue {
            *counts.entry((q, a.state.as_str())).or_default() += 1;
        }
    }
    for ((q, st), n) in counts {
        apps.with_label_values(&[q.to_string().as_str(), st]).set(n);
    }
}

fn node_series(r: &Registry, s: &Snapshot) {
    let used = gauge_vec(
        r,
        "spindle_rm_node_gpus_used",
        "GPUs (yarn.io/gpu) allocated on a node with GPUs.",
        &["node"],
    );
    let free = gauge_vec(
        r,
        "spindle_rm_node_gpus_free",
        "GPUs (yarn.io/gpu) of a node with GPUs not allocated.",
        &["node"],
    );
    for (id, (total, u)) in &s.node_usage {
        let t = total.get(GPU);
        if t <= 0 {
            continue;
        }
        let id = id.to_string();
        used.with_label_values(&[id.as_str()]).set(u.get(GPU));
        free.with_label_values(&[id.as_str()])
            .set((t - u.get(GPU)).max(0));
    }
}

fn decision_series(r: &Registry, s: &Snapshot) {
    counter(
        r,
        "spindle_rm_scheduler_passes_total",
        "Scheduling passes run since start.",
        s.pass_stats.passes,
    );
    let d = IntCounterVec::new(
        Opts::new(
            "spindle_rm_scheduler_decisions_total",
            "The scheduler's decisions since start: containers placed, gangs placed whole, preemption decisions.",
        ),
        &["decision"],
    )
    .expect("valid counter");
    r.register(Box::new(d.clone()))
        .expect("unique metric names");
    for (k, v) in [
        ("container_placed", s.pass_stats.placements),
        ("gang_placed", s.pass_stats.gangs_placed),
        ("preemption", s.preemption.decisions),
    ] {
        d.with_label_values(&[k]).inc_by(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_series_have_their_labels() {
        let m = RmMetrics::new();
        m.observe_core_call("tick", Duration::from_micros(120));
        m.observe_gang_waits(&[1500, 0]);
        let text = TextEncoder::new()
            .encode_to_string(&m.registry.gather())
            .unwrap();
        assert!(text.contains("spindle_rm_core_call_duration_seconds_count{call=\"tick\"} 1\n"));
        assert!(text.contains("spindle_rm_gang_wait_seconds_count 2\n"));
        assert!(text.contains("spindle_rm_gang_wait_seconds_sum 1.5\n"));
        assert!(text.contains("spindle_rm_gang_wait_seconds_bucket{le=\"1\"} 1\n"));
    }

    #[test]
    fn unknown_methods_are_one_label() {
        let m = Method::from_bytes(b"FROBNICATE").unwrap();
        assert_eq!(method_label(&m), "other");
        assert_eq!(method_label(&Method::GET), "GET");
    }
}
