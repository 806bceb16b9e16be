//! The NM's Prometheus metrics (`GET /metrics`, text exposition format 0.0.4 through the
//! `prometheus` crate), YARN's `NodeManagerMetrics` by other names, plus one series set per GPU.
//!
//! The counters live in the [`crate::manager`] actor, which is the only thing that sees a
//! container start or end; `/metrics` asks it for a snapshot (and the GPU plugin's view,
//! [`crate::manager::NmHandle::resource`]), so no metric is shared state. The launch-latency
//! histogram is the one piece shared between snapshots: an `Arc` inside the `prometheus` crate.

use std::collections::BTreeMap;

use prometheus::{Histogram, HistogramOpts, IntCounter, IntGauge, IntGaugeVec, Opts, Registry};
use spindle_common::resource::Resource;

use crate::plugins::{PluginDetails, ResourceView};

/// The content type of the text exposition format 0.0.4.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

const MIB: i64 = 1 << 20;

/// From the start request to the process running: localization, cgroup set-up, and for a
/// gang's held start the wait for its release.
const LAUNCH_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// The launch-latency histogram (cheap to clone: the buckets are shared).
#[derive(Clone)]
pub struct LaunchLatency(Histogram);

impl Default for LaunchLatency {
    fn default() -> Self {
        Self(
            Histogram::with_opts(
                HistogramOpts::new(
                    "spindle_nm_container_launch_duration_seconds",
                    "From a container's start request to its process running (a gang member's held start counts until its release).",
                )
                .buckets(LAUNCH_BUCKETS.to_vec()),
            )
            .expect("valid histogram"),
        )
    }
}

impl std::fmt::Debug for LaunchLatency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LaunchLatency({} samples)", self.0.get_sample_count())
    }
}

/// Request latency of the NM's HTTP API by method, route template and status code
/// (`spindle_nm_http_request_duration_seconds`), recorded by [`track`].
#[derive(Clone)]
pub struct HttpLatency(prometheus::HistogramVec);

impl Default for HttpLatency {
    fn default() -> Self {
        Self(
            prometheus::HistogramVec::new(
                HistogramOpts::new(
                    "spindle_nm_http_request_duration_seconds",
                    "NM HTTP requests (container starts and stops, logs, REST) by method, route template and status code.",
                )
                .buckets(vec![
                    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                    5.0, 10.0,
                ]),
                &["method", "path", "code"],
            )
            .expect("valid histogram"),
        )
    }
}

/// The middleware that times every request by its route template (`MatchedPath`: one series
/// per route however many containers there are); unmatched paths are `unmatched`, methods
/// outside HTTP's own `other`.
pub async fn track(
    axum::extract::State(h): axum::extract::State<std::sync::Arc<HttpLatency>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let path = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".to_string());
    let method = spindle_common::net::method_label(req.method().as_str());
    let start = std::time::Instant::now();
    let resp = next.run(req).await;
    h.0.with_label_values(&[method, path.as_str(), resp.status().as_str()])
        .observe(start.elapsed().as_secs_f64());
    resp
}

/// Counters since the NM started, and gauges taken from the container table.
#[derive(Debug, Clone, Default)]
pub struct NmMetrics {
    /// Processes started.
    pub launched: u64,
    /// Exited with code 0.
    pub completed: u64,
    /// Exited non-zero, or failed to localize or start.
    pub failed: u64,
    /// Stopped on request (AM, RM, or NM shutdown).
    pub killed: u64,
    /// Killed for exceeding their memory (the kernel's OOM killer in their cgroup, or the
    /// NM's own memory monitor).
    pub oom_killed: u64,
    /// Accepted and not yet complete.
    pub running: u64,
    /// Containers in the table by state (filled for each snapshot).
    pub by_state: BTreeMap<&'static str, u64>,
    pub allocated: Resource,
    pub capacity: Resource,
    pub launch_latency: LaunchLatency,
}

impl NmMetrics {
    /// A container's process started; `accepted_ms` is when its start request was accepted.
    pub fn record_launch(&mut self, accepted_ms: u64, now_ms: u64) {
        self.launched += 1;
        self.launch_latency
            .0
            .observe(now_ms.saturating_sub(accepted_ms) as f64 / 1000.0);
    }

    /// Prometheus text exposition format 0.0.4; `gpus` is the GPU plugin's view, if the
    /// node has one, and `http` the router's request latency.
    pub fn render(&self, gpus: Option<&ResourceView>, http: Option<&HttpLatency>) -> String {
        let r = Registry::new();
        if let Some(h) = http {
            r.register(Box::new(h.0.clone()))
                .expect("unique metric names");
        }
        let c = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let counter = |name: &str, help: &str, v: u64| {
            let m = IntCounter::new(name, help).expect("valid counter");
            m.inc_by(v);
            r.register(Box::new(m)).expect("unique metric names");
        };
        counter(
            "spindle_nm_containers_launched_total",
            "Containers whose process was started.",
            self.launched,
        );
        counter(
            "spindle_nm_containers_completed_total",
            "Containers that exited with code 0.",
            self.completed,
        );
        counter(
            "spindle_nm_containers_failed_total",
            "Containers that exited non-zero or failed to localize or start.",
            self.failed,
        );
        counter(
            "spindle_nm_containers_killed_total",
            "Containers stopped on request or killed for their memory.",
            self.killed,
        );
        counter(
            "spindle_nm_containers_oom_killed_total",
            "Containers killed for exceeding their memory (the kernel's OOM killer or the NM's monitor).",
            self.oom_killed,
        );
        let gauge = |name: &str, help: &str, v: i64| {
            let m = IntGauge::new(name, help).expect("valid gauge");
            m.set(v);
            r.register(Box::new(m)).expect("unique metric names");
        };
        gauge(
            "spindle_nm_containers_running",
            "Containers accepted and not yet complete.",
            c(self.running),
        );
        gauge(
            "spindle_nm_allocated_memory_bytes",
            "Memory held by live containers.",
            self.allocated.memory_mb * MIB,
        );
        gauge(
            "spindle_nm_allocated_vcores",
            "Vcores held by live containers.",
            self.allocated.vcores,
        );
        gauge(
            "spindle_nm_available_memory_bytes",
            "Memory not held by containers.",
            (self.capacity.memory_mb - self.allocated.memory_mb) * MIB,
        );
        gauge(
            "spindle_nm_available_vcores",
            "Vcores not held by containers.",
            self.capacity.vcores - self.allocated.vcores,
        );
        let states = gauge_vec(
            &r,
            "spindle_nm_containers",
            "Containers the NM keeps, by state (YARN's NM container states).",
            &["state"],
        );
        for (s, n) in &self.by_state {
            states.with_label_values(&[*s]).set(c(*n));
        }
        r.register(Box::new(self.launch_latency.0.clone()))
            .expect("unique metric names");
        if let Some(v) = gpus {
            gpu_series(&r, v);
        }
        let mut families = r.gather();
        families.sort_by(|a, b| a.name().cmp(b.name()));
        prometheus::TextEncoder::new()
            .encode_to_string(&families)
            .unwrap_or_else(|e| format!("# encoding failed: {e}\n"))
    }
}

fn gauge_vec(r: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let g = IntGaugeVec::new(Opts::new(name, help), labels).expect("valid gauge");
    r.register(Box::new(g.clone()))
        .expect("unique metric names");
    g
}

fn float_vec(r: &Registry, name: &str, help: &str, labels: &[&str]) -> prometheus::GaugeVec {
    let g = prometheus::GaugeVec::new(Opts::new(name, help), labels).expect("valid gauge");
    r.register(Box::new(g.clone()))
        .expect("unique metric names");
    g
}

/// Per GPU, labelled `minor`, `model` and `uuid` (empty when unknown): whether a container
/// holds it, its memory size, and, from the GPU plugin's periodic sample
/// ([`crate::plugins::gpu::samples`], every
/// `spindle.nodemanager.resource-plugins.gpu.utilization-interval-ms`), its utilization,
/// memory used and temperature. A GPU without a current sample (sampling off, failed, or not
/// yet run) has no such series: nothing is ever reported as 0 that was not read as 0.
fn gpu_series(r: &Registry, v: &ResourceView) {
    let labels = &["minor", "model", "uuid"];
    let assigned = gauge_vec(
        r,
        "spindle_nm_gpu_assigned",
        "1 when a container holds the GPU, 0 when it is free.",
        labels,
    );
    let healthy = gauge_vec(
        r,
        "spindle_nm_gpu_healthy",
        "1 when the GPU may be handed out, 0 when the plugin marks it unhealthy.",
        labels,
    );
    let util = float_vec(
        r,
        "spindle_nm_gpu_utilization_ratio",
        "The GPU's utilization (0 to 1) at the plugin's last reading.",
        labels,
    );
    let mem_used = gauge_vec(
        r,
        "spindle_nm_gpu_memory_used_bytes",
        "GPU memory in use at the plugin's last reading.",
        labels,
    );
    let mem_total = gauge_vec(
        r,
        "spindle_nm_gpu_memory_total_bytes",
        "The GPU's memory.",
        labels,
    );
    let temp = float_vec(
        r,
        "spindle_nm_gpu_temperature_celsius",
        "The GPU's temperature at the plugin's last reading.",
        labels,
    );
    let readings = match &v.details {
        PluginDetails::Gpu(Some(info)) => info.gpus.as_slice(),
        _ => &[],
    };
    let sampled = crate::plugins::gpu::samples(v);
    for d in &v.devices {
        let reading = readings.iter().find(|g| {
            g.minor_number == Some(d.minor)
                || (g.uuid.is_some() && g.uuid == d.uuid && g.minor_number.is_none())
        });
        let minor = d.minor.to_string();
        let model = d
            .model
            .clone()
            .or_else(|| reading.and_then(|g| g.product_name.clone()))
            .unwrap_or_default();
        let uuid = d
            .uuid
            .clone()
            .or_else(|| reading.and_then(|g| g.uuid.clone()))
            .unwrap_or_default();
        let l = [minor.as_str(), model.as_str(), uuid.as_str()];
        let held = v.assigned.iter().any(|(_, a)| a.minor == d.minor);
        assigned.with_label_values(&l).set(i64::from(held));
        healthy.with_label_values(&l).set(i64::from(d.healthy));
        let mem_mib = reading.and_then(|g| g.memory_total_mib).or(d.memory_mib);
        if let Some(m) = mem_mib {
            mem_total
                .with_label_values(&l)
                .set(i64::try_from(m).unwrap_or(i64::MAX / MIB) * MIB);
        }
        let Some(g) = sampled.get(&d.minor) else {
            continue;
        };
        util.with_label_values(&l)
            .set(f64::from(g.utilization) / 100.0);
        if let Some(m) = g.memory_used_mib {
            mem_used
                .with_label_values(&l)
                .set(i64::try_from(m).unwrap_or(i64::MAX / MIB) * MIB);
        }
        if let Some(t) = g.temperature_c {
            temp.with_label_values(&l).set(f64::from(t));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spindle_common::states::NmContainerState;

    #[test]
    fn renders_prometheus_text() {
        let mut m = NmMetrics {
            launched: 2,
            completed: 1,
            failed: 1,
            killed: 1,
            oom_killed: 1,
            running: 1,
            allocated: Resource::new(1024, 1),
            capacity: Resource::new(4096, 4),
            ..Default::default()
        };
        m.by_state.insert(NmContainerState::RUNNING.as_str(), 1);
        m.record_launch(1000, 1250);
        let t = m.render(None, Some(&HttpLatency::default()));
        assert!(t.contains("# TYPE spindle_nm_containers_launched_total counter\n"));
        assert!(t.contains("\nspindle_nm_containers_launched_total 3\n"));
        assert!(t.contains("\nspindle_nm_containers_oom_killed_total 1\n"));
        assert!(t.contains("\nspindle_nm_allocated_memory_bytes 1073741824\n"));
        assert!(t.contains("\nspindle_nm_available_vcores 3\n"));
        assert!(t.contains("\nspindle_nm_containers{state=\"RUNNING\"} 1\n"));
        assert!(t.contains("\nspindle_nm_container_launch_duration_seconds_sum 0.25\n"));
        assert!(
            t.contains("\nspindle_nm_container_launch_duration_seconds_bucket{le=\"0.25\"} 1\n")
        );
        for line in t.lines().filter(|l| !l.starts_with('#')) {
            let (name, value) = line.rsplit_once(' ').unwrap();
            assert!(name.starts_with("spindle_nm_"), "{line}");
            value.parse::<f64>().unwrap();
        }
    }
}
