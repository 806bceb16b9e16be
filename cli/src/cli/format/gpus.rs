//! What the CLI shows of GPUs (`yarn.io/gpu`), beside YARN's layouts: the application list's
//! GPUS, GPU-HOURS, GPU-UTIL and REASON cells, the report's GPU lines, a node's GPUs and
//! model, and the `sinfo`-like summary of free GPUs per partition.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use spindle_common::records::am::GangState;
use spindle_common::records::cluster::{AppInfo, NodeInfo};
use spindle_common::resource::{GPU, GPU_MODEL_ATTRIBUTE};
use spindle_common::states::YarnApplicationState;

/// The name `node -list` and the labels' commands give the partition without a label.
pub const DEFAULT_PARTITION: &str = "<DEFAULT_PARTITION>";

/// The GPUS cell: the GPUs held now, `+N` for what its asks still want (`0+8`: waiting for
/// 8); `-` once it ended.
pub fn gpus_cell(a: &AppInfo) -> String {
    if a.state.is_final() {
        return "-".into();
    }
    let held = a.allocated_gpus.max(0);
    match a.pending_gpus {
        n if n > 0 => format!("{held}+{n}"),
        _ => held.to_string(),
    }
}

/// GPU-seconds (`resourceSecondsMap`'s `yarn.io/gpu`) as hours with two decimals.
pub fn gpu_hours(a: &AppInfo) -> String {
    format!("{:.2}", a.resource_seconds_map.get(GPU) as f64 / 3600.0)
}

/// The mean utilization of the GPUs it holds, as its NMs last sampled them; `-` when none
/// was sampled.
pub fn gpu_util_cell(a: &AppInfo) -> String {
    match a.gpu_utilization {
        Some(u) if u.is_finite() => format!("{u:.0}%"),
        _ => "-".into(),
    }
}

/// Why it waits, as the RM says (`squeue`'s REASON): its diagnostics' first line while it
/// is not running yet or one of its gangs waits; `-` otherwise.
pub fn reason_cell(a: &AppInfo) -> String {
    use YarnApplicationState::*;
    let not_started = matches!(a.state, NEW | NEW_SAVING | SUBMITTED | ACCEPTED);
    let gang_waits = a
        .gangs
        .iter()
        .any(|g| matches!(g.state, GangState::PENDING | GangState::RESERVED));
    // A running application whose GPU asks wait says why too (its AM's allocate wrote it).
    let asks_wait = a.pending_gpus > 0 && !a.diagnostics.trim().is_empty();
    if !(not_started || gang_waits || asks_wait) {
        return "-".into();
    }
    let first = a.diagnostics.lines().map(str::trim).find(|l| !l.is_empty());
    let gang = a
        .gangs
        .iter()
        .find(|g| !g.diagnostics.trim().is_empty())
        .map(|g| format!("Gang {} is waiting: {}", g.id, g.diagnostics.trim()));
    first
        .map(str::to_string)
        .or(gang)
        .unwrap_or_else(|| "waiting to be scheduled".into())
}

/// `application -status`'s GPU lines, (key, value): GPU-seconds, mean utilization, idle
/// GPU time.
pub fn report_lines(a: &AppInfo) -> [(&'static str, String); 3] {
    let secs = a.resource_seconds_map.get(GPU);
    let util = match a.gpu_utilization {
        Some(u) if u.is_finite() => format!("{u:.1}% (mean over the GPUs it holds)"),
        _ => "N/A (no GPU of it sampled)".into(),
    };
    let idle = match a.idle_gpu_seconds {
        Some(i) => format!("{i} GPU-seconds"),
        None => "N/A (no GPU of it sampled)".into(),
    };
    [
        (
            "GPU-Seconds",
            format!("{secs} ({:.2} GPU-hours)", secs as f64 / 3600.0),
        ),
        ("GPU Utilization", util),
        ("Idle GPU Time", idle),
    ]
}

/// A node's GPUs: (used, total).
pub fn node_gpus(n: &NodeInfo) -> (i64, i64) {
    (
        n.used_resource.to_resource().get(GPU),
        n.total_resource.to_resource().get(GPU),
    )
}

/// The node's GPU model (its `nm.yarn.io/gpu-model` attribute), if it reports one.
pub fn node_gpu_model(n: &NodeInfo) -> Option<String> {
    let (prefix, name) = GPU_MODEL_ATTRIBUTE
        .rsplit_once('/')
        .unwrap_or(("", GPU_MODEL_ATTRIBUTE));
    n.node_attributes_info
        .get("nodeAttributeInfo")
        .and_then(|v| v.as_array())?
        .iter()
        .find(|a| {
            a.get("prefix").and_then(|v| v.as_str()) == Some(prefix)
                && a.get("name").and_then(|v| v.as_str()) == Some(name)
        })
        .and_then(|a| a.get("value").and_then(|v| v.as_str()))
        .filter(|m| !m.trim().is_empty())
        .map(str::to_string)
}

/// The partition (node label) a node is in; [`DEFAULT_PARTITION`] for none.
pub fn partition_of(n: &NodeInfo) -> &str {
    n.node_labels
        .iter()
        .map(String::as_str)
        .find(|l| !l.is_empty())
        .unwrap_or(DEFAULT_PARTITION)
}

/// `sinfo`'s habit: one line per partition with its nodes and free GPUs of total.
pub fn partition_summary(nodes: &[NodeInfo]) -> String {
    let mut parts: BTreeMap<&str, (usize, i64, i64)> = BTreeMap::new();
    for n in nodes {
        let (used, total) = node_gpus(n);
        let e = parts.entry(partition_of(n)).or_default();
        e.0 += 1;
        e.1 += (total - used).max(0);
        e.2 += total;
    }
    let width = parts
        .keys()
        .map(|k| k.chars().count())
        .chain(std::iter::once("PARTITION".len()))
        .max()
        .unwrap_or(0);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<width$}  {:>5}  GPUS(FREE/TOTAL)",
        "PARTITION", "NODES"
    );
    for (name, (count, free, total)) in parts {
        let _ = writeln!(s, "{name:<width$}  {count:>5}  {free}/{total}");
    }
    s
}
