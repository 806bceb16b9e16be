//! The `yarn` CLI's output formats, reproduced (ApplicationCLI, NodeCLI, LogsCLI).

use std::fmt::Write as _;

use spindle_common::records::cluster::{AppInfo, CapacitySchedulerQueueInfo, NodeInfo};
use spindle_common::states::{NodeState, YarnApplicationState};

/// Java's `DecimalFormat("###.##%")` of a REST progress given in percent (0..=100).
pub fn format_progress(percent: f32) -> String {
    if !percent.is_finite() {
        return "0%".into();
    }
    let s = format!("{:.2}", percent);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    let s = if s == "-0" { "0" } else { s };
    format!("{s}%")
}

fn right(width: usize, s: &str) -> String {
    format!("{s:>width$}")
}

/// YARN's `APPLICATIONS_PATTERN`, `%30s\t%20s\t%20s\t%10s\t%10s\t%18s\t%18s\t%15s\t%35s`.
fn app_row(cols: [&str; 9]) -> String {
    const W: [usize; 9] = [30, 20, 20, 10, 10, 18, 18, 15, 35];
    let cells: Vec<String> = cols.iter().zip(W).map(|(c, w)| right(w, c)).collect();
    cells.join("\t")
}

/// Java's `Set.toString()`: `[A, B]`.
pub fn java_set<T: std::fmt::Display>(items: &[T]) -> String {
    let v: Vec<String> = items.iter().map(|i| i.to_string()).collect();
    format!("[{}]", v.join(", "))
}

/// `yarn application -list` output.
pub fn format_app_list(
    apps: &[AppInfo],
    types: &[String],
    states: &[YarnApplicationState],
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Total number of applications (application-types: {} and states: {}):{}",
        java_set(types),
        java_set(states),
        apps.len()
    );
    let _ = writeln!(
        s,
        "{}",
        app_row([
            "Application-Id",
            "Application-Name",
            "Application-Type",
            "User",
            "Queue",
            "State",
            "Final-State",
            "Progress",
            "Tracking-URL",
        ])
    );
    for a in apps {
        let state = a.state.to_string();
        let final_status = a.final_status.to_string();
        let progress = format_progress(a.progress);
        let _ = writeln!(
            s,
            "{}",
            app_row([
                &a.id,
                &a.name,
                &a.application_type,
                &a.user,
                &a.queue,
                &state,
                &final_status,
                &progress,
                tracking_url(a),
            ])
        );
    }
    s
}

fn tracking_url(a: &AppInfo) -> &str {
    a.tracking_url
        .as_deref()
        .filter(|u| !u.is_empty())
        .unwrap_or("N/A")
}

/// (AM host, RPC port) from the REST `amRPCAddress` (`host:port`), YARN's `N/A` / -1 when the
/// AM has not registered.
fn am_host_port(a: &AppInfo) -> (String, i64) {
    match a.am_rpc_address.as_deref().filter(|s| !s.is_empty()) {
        Some(addr) => match addr.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), p.parse().unwrap_or(-1)),
            None => (addr.to_string(), -1),
        },
        None => ("N/A".to_string(), -1),
    }
}

/// `yarn application -status` output.
pub fn format_app_report(a: &AppInfo) -> String {
    let (host, port) = am_host_port(a);
    let mut s = String::new();
    let mut line = |k: &str, v: &dyn std::fmt::Display| {
        let _ = writeln!(s, "\t{k} : {v}");
    };
    line("Application-Id", &a.id);
    line("Application-Name", &a.name);
    line("Application-Type", &a.application_type);
    line("User", &a.user);
    line("Queue", &a.queue);
    line("Application Priority", &a.priority);
    line("Start-Time", &a.started_time);
    line("Finish-Time", &a.finished_time);
    line("Progress", &format_progress(a.progress));
    line("State", &a.state);
    line("Final-State", &a.final_status);
    line("Tracking-URL", &tracking_url(a));
    line("RPC Port", &port);
    line("AM Host", &host);
    line(
        "Aggregate Resource Allocation",
        &format!(
            "{} MB-seconds, {} vcore-seconds",
            a.memory_seconds, a.vcore_seconds
        ),
    );
    line(
        "Aggregate Resource Preempted",
        &format!(
            "{} MB-seconds, {} vcore-seconds",
            a.preempted_memory_seconds, a.preempted_vcore_seconds
        ),
    );
    if let Some(p) = &a.preemption {
        // Spindle's lines, only for an application preemption touched (YARN prints none).
        line(
            "Preemptions",
            &format!(
                "{} (containers: {} non-AM, {} AM; {} under notice now)",
                p.preemptions,
                a.num_non_am_container_preempted,
                a.num_am_container_preempted,
                p.containers_under_notice
            ),
        );
        line(
            "Work Lost To Preemption",
            &format!(
                "{:.1} GPU-seconds (of {:.1} GPU-seconds the preempted containers ran)",
                p.lost_gpu_seconds, p.preempted_gpu_seconds
            ),
        );
        if let Some(ms) = p.last_notice_to_exit_ms {
            line(
                "Preemption Notice To Exit",
                &format!("last {ms} ms, longest {} ms", p.max_notice_to_exit_ms),
            );
        }
        if let Some(k) = &p.last_checkpoint {
            let mut v = format!("{}", k.time);
            if let Some(step) = k.step {
                v.push_str(&format!(", step {step}"));
            }
            if let Some(l) = &k.label {
                v.push_str(&format!(", {l}"));
            }
            line("Last Checkpoint", &v);
        }
    }
    line("Log Aggregation Status", &a.log_aggregation_status);
    line("Diagnostics", &a.diagnostics);
    line("Unmanaged Application", &a.unmanaged_application);
    line(
        "Application Node Label Expression",
        &a.app_node_label_expression
            .as_deref()
            .filter(|x| !x.is_empty())
            .unwrap_or("<Not set>"),
    );
    line(
        "AM container Node Label Expression",
        &a.am_node_label_expression
            .as_deref()
            .filter(|x| !x.is_empty())
            .unwrap_or("<DEFAULT_PARTITION>"),
    );
    format!("Application Report : \n{s}")
}

/// YARN's `NODES_PATTERN`, `%16s\t%15s\t%17s\t%28s`.
fn node_row(cols: [&str; 4]) -> String {
    const W: [usize; 4] = [16, 15, 17, 28];
    let cells: Vec<String> = cols.iter().zip(W).map(|(c, w)| right(w, c)).collect();
    cells.join("\t")
}

/// `yarn node -list` output.
pub fn format_node_list(nodes: &[NodeInfo], show_details: bool) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Total Nodes:{}", nodes.len());
    let _ = writeln!(
        s,
        "{}",
        node_row([
            "Node-Id",
            "Node-State",
            "Node-Http-Address",
            "Number-of-Running-Containers",
        ])
    );
    for n in nodes {
        let state = n.state.to_string();
        let count = n.num_containers.to_string();
        let _ = writeln!(
            s,
            "{}",
            node_row([&n.id, &state, &n.node_http_address, &count])
        );
        if show_details {
            let u = &n.resource_utilization;
            let mut labels = n.node_labels.clone();
            labels.sort();
            let _ = writeln!(s, "Detailed Node Information :");
            let _ = writeln!(
                s,
                "\tConfigured Resources : {}",
                n.total_resource.to_resource()
            );
            let _ = writeln!(
                s,
                "\tAllocated Resources : {}",
                n.used_resource.to_resource()
            );
            let _ = writeln!(
                s,
                "\tResource Utilization by Node : PMem:{} MB, VMem:{} MB, VCores:{}",
                u.node_physical_memory_mb, u.node_virtual_memory_mb, u.node_cpu_usage
            );
            let _ = writeln!(
                s,
                "\tResource Utilization by Containers : PMem:{} MB, VMem:{} MB, VCores:{}",
                u.aggregated_containers_physical_memory_mb,
                u.aggregated_containers_virtual_memory_mb,
                u.containers_cpu_usage
            );
            let _ = writeln!(s, "\tNode-Labels : {}", labels.join(","));
        }
    }
    s
}

/// The node states `node -list` shows: `-all` means every state, `-states` the given ones,
/// else RUNNING (as YARN's NodeCLI).
pub fn node_states(all: bool, states: &[NodeState]) -> Vec<NodeState> {
    if all {
        NodeState::ALL.to_vec()
    } else if states.is_empty() {
        vec![NodeState::RUNNING]
    } else {
        states.to_vec()
    }
}

/// One log file, in LogsCLI's local-log layout.
pub fn format_log_file(
    container_id: &str,
    node_id: &str,
    file_name: &str,
    last_modified: Option<&str>,
    content: &str,
) -> String {
    let header = format!("Container: {container_id} on {node_id}");
    let mut s = String::new();
    let _ = writeln!(s, "{header}");
    let _ = writeln!(s, "LogAggregationType: LOCAL");
    let _ = writeln!(s, "{}", "=".repeat(header.len()));
    let _ = writeln!(s, "LogType:{file_name}");
    if let Some(t) = last_modified {
        let _ = writeln!(s, "LogLastModifiedTime:{t}");
    }
    let _ = writeln!(s, "LogLength:{}", content.len());
    let _ = writeln!(s, "LogContents:");
    s.push_str(content);
    let end = format!("End of LogType:{file_name}");
    let _ = writeln!(s, "\n{end}");
    let _ = writeln!(s, "{}\n", "*".repeat(end.len() + 50));
    s
}

/// Java's `DecimalFormat("#.00")`: two decimals, no leading zero (`.00`, `70.00`).
pub fn java_two_decimals(v: f64) -> String {
    let v = if v.is_finite() { v } else { 0.0 };
    let s = format!("{:.2}", v.abs());
    let s = s.strip_prefix("0.").map(|d| format!(".{d}")).unwrap_or(s);
    if v < 0.0 && s != ".00" {
        format!("-{s}")
    } else {
        s
    }
}

/// `yarn queue -status` output (QueueCLI's `Queue Information :` block). The figures are
/// the REST view's percents: capacity and maximum of the parent, current capacity as used
/// over guaranteed.
pub fn format_queue_status(q: &CapacitySchedulerQueueInfo) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "Queue Information : ");
    let _ = writeln!(o, "Queue Name : {}", q.queue_name);
    let _ = writeln!(o, "Queue Path : {}", q.queue_path);
    let _ = writeln!(o, "\tState : {}", q.state);
    let _ = writeln!(o, "\tCapacity : {}%", java_two_decimals(q.capacity));
    let _ = writeln!(
        o,
        "\tCurrent Capacity : {}%",
        java_two_decimals(q.used_capacity)
    );
    let _ = writeln!(
        o,
        "\tMaximum Capacity : {}%",
        java_two_decimals(q.max_capacity)
    );
    let _ = writeln!(o, "\tWeight : {}", java_two_decimals(q.weight));
    let _ = writeln!(o, "\tMaximum Parallel Apps : {}", q.max_parallel_apps);
    let label = q
        .default_node_label_expression
        .as_deref()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .unwrap_or("<DEFAULT_PARTITION>");
    let _ = writeln!(o, "\tDefault Node Label expression : {label}");
    let _ = writeln!(o, "\tAccessible Node Labels : {}", q.node_labels.join(","));
    // Spindle does not preempt: a parent's REST record has no flag, and it is off too.
    let (preempt, intra) = q
        .leaf
        .as_ref()
        .map(|l| (l.preemption_disabled, l.intra_queue_preemption_disabled))
        .unwrap_or((true, true));
    let word = |disabled: bool| if disabled { "disabled" } else { "enabled" };
    let _ = writeln!(o, "\tPreemption : {}", word(preempt));
    let _ = writeln!(o, "\tIntra-queue Preemption : {}", word(intra));
    o
}

#[cfg(test)]
mod tests {
    use spindle_common::states::FinalApplicationStatus;

    use super::*;

    fn app() -> AppInfo {
        AppInfo {
            id: "application_1_0001".into(),
            name: "DistributedShell".into(),
            application_type: "DISTRIBUTEDSHELL".into(),
            user: "alice".into(),
            queue: "default".into(),
            state: YarnApplicationState::RUNNING,
            final_status: FinalApplicationStatus::UNDEFINED,
            progress: 12.5,
            tracking_url: Some("http://h:8088/proxy/application_1_0001/".into()),
            am_rpc_address: Some("h:-1".into()),
            memory_seconds: 2048,
            vcore_seconds: 2,
            ..Default::default()
        }
    }

    #[test]
    fn progress_like_decimal_format() {
        assert_eq!(format_progress(0.0), "0%");
        assert_eq!(format_progress(100.0), "100%");
        assert_eq!(format_progress(12.5), "12.5%");
        assert_eq!(format_progress(33.333_33), "33.33%");
        assert_eq!(format_progress(f32::NAN), "0%");
    }

    #[test]
    fn app_list_matches_yarn() {
        let out = format_app_list(
            &[app()],
            &[],
            &[
                YarnApplicationState::SUBMITTED,
                YarnApplicationState::ACCEPTED,
                YarnApplicationState::RUNNING,
            ],
        );
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            "Total number of applications (application-types: [] and states: [SUBMITTED, ACCEPTED, RUNNING]):1"
        );
        assert_eq!(
            lines[1],
            format!(
                "{:>30}\t{:>20}\t{:>20}\t{:>10}\t{:>10}\t{:>18}\t{:>18}\t{:>15}\t{:>35}",
                "Application-Id",
                "Application-Name",
                "Application-Type",
                "User",
                "Queue",
                "State",
                "Final-State",
                "Progress",
                "Tracking-URL"
            )
        );
        let cols: Vec<&str> = lines[2].split('\t').map(str::trim).collect();
        assert_eq!(
            cols,
            [
                "application_1_0001",
                "DistributedShell",
                "DISTRIBUTEDSHELL",
                "alice",
                "default",
                "RUNNING",
                "UNDEFINED",
                "12.5%",
                "http://h:8088/proxy/application_1_0001/"
            ]
        );
        let out = format_app_list(
            &[],
            &["MAPREDUCE".into()],
            &[YarnApplicationState::FINISHED],
        );
        assert!(out.starts_with(
            "Total number of applications (application-types: [MAPREDUCE] and states: [FINISHED]):0\n"
        ));
    }

    #[test]
    fn app_report_matches_yarn() {
        let r = format_app_report(&app());
        let lines: Vec<&str> = r.lines().collect();
        assert_eq!(lines[0], "Application Report : ");
        assert_eq!(lines[1], "\tApplication-Id : application_1_0001");
        assert!(lines.contains(&"\tRPC Port : -1"));
        assert!(lines.contains(&"\tAM Host : h"));
        assert!(lines.contains(&"\tProgress : 12.5%"));
        assert!(lines.contains(&"\tApplication Priority : 0"));
        assert!(
            lines.contains(&"\tAggregate Resource Allocation : 2048 MB-seconds, 2 vcore-seconds")
        );
        assert!(lines.contains(&"\tLog Aggregation Status : DISABLED"));
        assert!(lines.contains(&"\tDiagnostics : "));
        let keys: Vec<&str> = lines[1..]
            .iter()
            .filter_map(|l| l.trim_start().split(" : ").next())
            .collect();
        let pos = |k: &str| keys.iter().position(|x| *x == k).unwrap();
        assert!(pos("Start-Time") < pos("Finish-Time"));
        assert!(pos("Final-State") < pos("Tracking-URL"));
        assert!(pos("AM Host") < pos("Aggregate Resource Allocation"));
        let mut a = app();
        a.am_rpc_address = None;
        a.tracking_url = None;
        let r = format_app_report(&a);
        assert!(r.contains("\tAM Host : N/A\n"));
        assert!(r.contains("\tTracking-URL : N/A\n"));
    }

    #[test]
    fn node_list_matches_yarn() {
        let n = NodeInfo {
            id: "127.0.0.1:40001".into(),
            state: NodeState::RUNNING,
            node_http_address: "127.0.0.1:40001".into(),
            num_containers: 3,
            ..Default::default()
        };
        let out = format_node_list(&[n], false);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "Total Nodes:1");
        assert_eq!(
            lines[1],
            "         Node-Id\t     Node-State\tNode-Http-Address\tNumber-of-Running-Containers"
        );
        assert_eq!(
            lines[2],
            format!(
                "{:>16}\t{:>15}\t{:>17}\t{:>28}",
                "127.0.0.1:40001", "RUNNING", "127.0.0.1:40001", "3"
            )
        );
        assert_eq!(node_states(false, &[]), vec![NodeState::RUNNING]);
        assert_eq!(node_states(true, &[]).len(), NodeState::ALL.len());
    }

    #[test]
    fn log_block_matches_logs_cli() {
        let b = format_log_file(
            "container_1_0001_01_000002",
            "h:1",
            "stdout",
            None,
            "hello\n",
        );
        let lines: Vec<&str> = b.lines().collect();
        assert_eq!(lines[0], "Container: container_1_0001_01_000002 on h:1");
        assert_eq!(lines[1], "LogAggregationType: LOCAL");
        assert_eq!(lines[2], "=".repeat(lines[0].len()));
        assert_eq!(lines[3], "LogType:stdout");
        assert_eq!(lines[4], "LogLength:6");
        assert_eq!(lines[5], "LogContents:");
        assert_eq!(lines[6], "hello");
        assert_eq!(lines[7], "");
        assert_eq!(lines[8], "End of LogType:stdout");
        assert!(lines[9].starts_with("*****"));
    }

    #[test]
    fn queue_status_like_queue_cli() {
        assert_eq!(java_two_decimals(0.0), ".00");
        assert_eq!(java_two_decimals(70.0), "70.00");
        assert_eq!(java_two_decimals(12.345), "12.35");
        assert_eq!(java_two_decimals(-1.0), "-1.00");
        assert_eq!(java_two_decimals(-0.5), "-.50");
        let q: CapacitySchedulerQueueInfo = serde_json::from_value(serde_json::json!({
            "queueName": "a", "queuePath": "root.a", "state": "RUNNING", "capacity": 70.0,
            "usedCapacity": 12.5, "maxCapacity": 100.0, "weight": -1.0,
            "maxParallelApps": 2147483647, "nodeLabels": ["*"],
            "type": "capacitySchedulerLeafQueueInfo", "preemptionDisabled": true,
            "intraQueuePreemptionDisabled": true
        }))
        .unwrap();
        assert_eq!(
            format_queue_status(&q),
            "Queue Information : \nQueue Name : a\nQueue Path : root.a\n\tState : RUNNING\n\tCapacity : 70.00%\n\tCurrent Capacity : 12.50%\n\tMaximum Capacity : 100.00%\n\tWeight : -1.00\n\tMaximum Parallel Apps : 2147483647\n\tDefault Node Label expression : <DEFAULT_PARTITION>\n\tAccessible Node Labels : *\n\tPreemption : disabled\n\tIntra-queue Preemption : disabled\n"
        );
    }
}
