//! The NM's Prometheus metrics (`GET /metrics`), YARN's `NodeManagerMetrics` by other names.
//!
//! The counters live in the [`crate::manager`] actor, which is the only thing that sees a
//! container start or end; `/metrics` asks it for a snapshot, so no metric is shared state.

use std::fmt::Write;

use spindle_common::resource::Resource;

/// Counters since the NM started, and gauges taken from the container table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NmMetrics {
    /// Processes started.
    pub launched: u64,
    /// Exited with code 0.
    pub completed: u64,
    /// Exited non-zero, or failed to localize or start.
    pub failed: u64,
    /// Stopped on request (AM, RM, or NM shutdown).
    pub killed: u64,
    /// Accepted and not yet complete.
    pub running: u64,
    pub allocated: Resource,
    pub capacity: Resource,
}

impl NmMetrics {
    /// Prometheus text exposition format 0.0.4.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, value: i64| {
            let _ = writeln!(out, "# HELP spindle_nm_{name} {help}");
            let _ = writeln!(out, "# TYPE spindle_nm_{name} {kind}");
            let _ = writeln!(out, "spindle_nm_{name} {value}");
        };
        let c = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        metric(
            "containers_launched_total",
            "counter",
            "Containers whose process was started.",
            c(self.launched),
        );
        metric(
            "containers_completed_total",
            "counter",
            "Containers that exited with code 0.",
            c(self.completed),
        );
        metric(
            "containers_failed_total",
            "counter",
            "Containers that exited non-zero or failed to localize or start.",
            c(self.failed),
        );
        metric(
            "containers_killed_total",
            "counter",
            "Containers stopped on request.",
            c(self.killed),
        );
        metric(
            "containers_running",
            "gauge",
            "Containers accepted and not yet complete.",
            c(self.running),
        );
        metric(
            "allocated_memory_mb",
            "gauge",
            "Memory held by live containers, in MB.",
            self.allocated.memory_mb,
        );
        metric(
            "allocated_vcores",
            "gauge",
            "Vcores held by live containers.",
            self.allocated.vcores,
        );
        metric(
            "available_memory_mb",
            "gauge",
            "Memory not held by containers, in MB.",
            self.capacity.memory_mb - self.allocated.memory_mb,
        );
        metric(
            "available_vcores",
            "gauge",
            "Vcores not held by containers.",
            self.capacity.vcores - self.allocated.vcores,
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prometheus_text() {
        let m = NmMetrics {
            launched: 3,
            completed: 1,
            failed: 1,
            killed: 1,
            running: 1,
            allocated: Resource::new(1024, 1),
            capacity: Resource::new(4096, 4),
        };
        let t = m.render();
        assert!(t.contains("# TYPE spindle_nm_containers_launched_total counter\n"));
        assert!(t.contains("\nspindle_nm_containers_launched_total 3\n"));
        assert!(t.contains("\nspindle_nm_allocated_memory_mb 1024\n"));
        assert!(t.contains("\nspindle_nm_available_vcores 3\n"));
        for line in t.lines().filter(|l| !l.starts_with('#')) {
            let (name, value) = line.split_once(' ').unwrap();
            assert!(name.starts_with("spindle_nm_"));
            value.parse::<i64>().unwrap();
        }
    }
}
