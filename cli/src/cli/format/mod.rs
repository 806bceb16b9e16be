//! The `yarn` CLI's output formats, reproduced (ApplicationCLI, NodeCLI, QueueCLI, LogsCLI;
//! TopCLI's frame is in `top`).

use std::fmt::Write as _;

use spindle_common::localtime::format_local;
use spindle_common::records::cluster::{
    AppAttemptInfo, AppInfo, CapacitySchedulerQueueInfo, ContainerReportInfo, NodeInfo,
};
use spindle_common::resource::GPU;
use spindle_common::states::{NodeState, YarnApplicationState};
use spindle_common::time::UtcTime;

pub mod fairshare;
pub mod gpus;

pub use fairshare::{format_app_priority, format_fairshare};

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

/// YARN's `APPLICATIONS_PATTERN`, `%30s\t%20s\t%20s\t%10s\t%10s\t%18s\t%18s\t%15s\t%35s`,
/// then Spindle's GPUS, GPU-HOURS, GPU-UTIL and REASON (as is, last: it may be long).
fn app_row(cols: [&str; 13]) -> String {
    const W: [usize; 13] = [30, 20, 20, 10, 10, 18, 18, 15, 35, 8, 10, 8, 0];
    let cells: Vec<String> = cols.iter().zip(W).map(|(c, w)| right(w, c)).collect();
    cells.join("\t")
}

/// Java's `Set.toString()`: `[A, B]`.
pub fn java_set<T: std::fmt::Display>(items: &[T]) -> String {
    let v: Vec<String> = items.iter().map(|i| i.to_string()).collect();
    format!("[{}]", v.join(", "))
}

/// `yarn application -list` output (Hadoop 3's header, which names the tags too).
pub fn format_app_list(
    apps: &[AppInfo],
    types: &[String],
    states: &[YarnApplicationState],
    tags: &[String],
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Total number of applications (application-types: {}, states: {} and tags: {}):{}",
        java_set(types),
        java_set(states),
        java_set(tags),
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
            "GPUS",
            "GPU-HOURS",
            "GPU-UTIL",
            "REASON",
        ])
    );
    for a in apps {
        let state = a.state.to_string();
        let final_status = a.final_status.to_string();
        let progress = format_progress(a.progress);
        let (gpus, hours) = (gpus::gpus_cell(a), gpus::gpu_hours(a));
        let (util, reason) = (gpus::gpu_util_cell(a), gpus::reason_cell(a));
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
                &gpus,
                &hours,
                &util,
                &reason,
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
    line("Start-Time", &format_local(a.started_time));
    line("Launch-Time", &format_local(a.launch_time));
    line("Finish-Time", &format_local(a.finished_time));
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
    for (k, v) in gpus::report_lines(a) {
        line(k, &v);
    }
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
            let mut v = format_local(k.time);
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
    // ApplicationCLI's timeout line(s): one per timeout, on one line each.
    for t in a.timeouts.iter().flat_map(|t| t.timeout.iter()) {
        let _ = writeln!(
            s,
            "\tTimeoutType : {}\tExpiryTime : {}\tRemainingTime : {}seconds",
            t.timeout_type,
            local_expiry(&t.expiry_time),
            t.remaining_time_in_seconds
        );
    }
    format!("Application Report : \n{s}")
}

/// A timeout's `expiryTime` (the RM's ISO 8601 in UTC) in local time; `UNLIMITED` and
/// what is not a time as given.
fn local_expiry(t: &str) -> String {
    spindle_common::time::parse_iso8601(t)
        .map(format_local)
        .unwrap_or_else(|_| t.to_string())
}

/// YARN's `APPLICATION_ATTEMPTS_PATTERN`, `%30s\t%20s\t%35s\t%35s`.
fn attempt_row(cols: [&str; 4]) -> String {
    const W: [usize; 4] = [30, 20, 35, 35];
    let cells: Vec<String> = cols.iter().zip(W).map(|(c, w)| right(w, c)).collect();
    cells.join("\t")
}

/// What an attempt's lines show of its application: the tracking URL, and the AM's host and
/// RPC port for the current attempt (YARN's `N/A` / -1 otherwise).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptContext {
    pub tracking_url: String,
    pub host: String,
    pub rpc_port: i64,
}

impl AttemptContext {
    /// From the application's report, for attempt `attempt_id` (a number).
    pub fn of(app: &AppInfo, attempt_id: u32, current: u32) -> Self {
        let (host, port) = if attempt_id == current {
            am_host_port(app)
        } else {
            ("N/A".to_string(), -1)
        };
        Self {
            tracking_url: tracking_url(app).to_string(),
            host,
            rpc_port: port,
        }
    }
}

/// `yarn applicationattempt -list APPID` output.
pub fn format_attempt_list(attempts: &[(AppAttemptInfo, AttemptContext)]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Total number of application attempts :{}",
        attempts.len()
    );
    let _ = writeln!(
        s,
        "{}",
        attempt_row([
            "ApplicationAttempt-Id",
            "State",
            "AM-Container-Id",
            "Tracking-URL"
        ])
    );
    for (a, ctx) in attempts {
        let am = if a.container_id.is_empty() {
            "N/A"
        } else {
            a.container_id.as_str()
        };
        let _ = writeln!(
            s,
            "{}",
            attempt_row([
                &a.app_attempt_id,
                &a.app_attempt_state,
                am,
                &ctx.tracking_url
            ])
        );
    }
    s
}

/// `yarn applicationattempt -status ATTEMPTID` output.
pub fn format_attempt_report(a: &AppAttemptInfo, ctx: &AttemptContext) -> String {
    let am = if a.container_id.is_empty() {
        "N/A"
    } else {
        a.container_id.as_str()
    };
    format!(
        "Application Attempt Report : \n\tApplicationAttempt-Id : {}\n\tState : {}\n\tAMContainer : {am}\n\tTracking-URL : {}\n\tRPC Port : {}\n\tAM Host : {}\n\tDiagnostics : {}\n",
        a.app_attempt_id, a.app_attempt_state, ctx.tracking_url, ctx.rpc_port, ctx.host, a.diagnostics_info
    )
}

/// YARN's `CONTAINER_PATTERN`, `%30s\t%20s\t%20s\t%20s\t%20s\t%20s\t%35s`, then GPUS.
fn container_row(cols: [&str; 8]) -> String {
    const W: [usize; 8] = [30, 20, 20, 20, 20, 20, 35, 5];
    let cells: Vec<String> = cols.iter().zip(W).map(|(c, w)| right(w, c)).collect();
    cells.join("\t")
}

fn or_na(s: &str) -> &str {
    if s.is_empty() {
        "N/A"
    } else {
        s
    }
}

/// `yarn container -list ATTEMPTID` output.
pub fn format_container_list(containers: &[ContainerReportInfo]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Total number of containers :{}", containers.len());
    let _ = writeln!(
        s,
        "{}",
        container_row([
            "Container-Id",
            "Start Time",
            "Finish Time",
            "State",
            "Host",
            "Node Http Address",
            "LOG-URL",
            "GPUS",
        ])
    );
    for c in containers {
        let gpus = c.allocated_resources.get(GPU).copied().unwrap_or(0);
        let _ = writeln!(
            s,
            "{}",
            container_row([
                &c.container_id,
                &format_local(c.started_time),
                &format_local(c.finished_time),
                &c.container_state,
                or_na(&c.assigned_node_id),
                or_na(&c.node_http_address),
                &c.log_url,
                &gpus.to_string(),
            ])
        );
    }
    s
}

/// `yarn container -status CONTAINERID` output.
pub fn format_container_report(c: &ContainerReportInfo) -> String {
    format!(
        "Container Report : \n\tContainer-Id : {}\n\tStart-Time : {}\n\tFinish-Time : {}\n\tState : {}\n\tExecution-Type : GUARANTEED\n\tLOG-URL : {}\n\tHost : {}\n\tNodeHttpAddress : {}\n\tExit-Status : {}\n\tDiagnostics : {}\n",
        c.container_id,
        format_local(c.started_time),
        format_local(c.finished_time),
        c.container_state,
        c.log_url,
        or_na(&c.assigned_node_id),
        or_na(&c.node_http_address),
        c.container_exit_status,
        c.diagnostics_info
    )
}

/// Commons-lang's `E dd/MMM/yy hh:mm:ss:SSzz`, NodeCLI's `Last-Health-Update` form, in UTC:
/// `Thu 07/Mar/24 12:34:56:789UTC` (12-hour clock).
pub fn format_health_time(ms: u64) -> String {
    let t = UtcTime::from_ms(ms);
    let h12 = match t.hour % 12 {
        0 => 12,
        h => h,
    };
    format!(
        "{} {:02}/{}/{:02} {:02}:{:02}:{:02}:{:02}UTC",
        t.weekday_name(),
        t.day,
        t.month_name(),
        t.year.rem_euclid(100),
        h12,
        t.minute,
        t.second,
        t.millis
    )
}

/// The node's attributes as `prefix/name(TYPE)=value`, sorted.
fn node_attributes(n: &NodeInfo) -> Vec<String> {
    let mut out: Vec<String> = n
        .node_attributes_info
        .get("nodeAttributeInfo")
        .and_then(|v| v.as_array())
        .map(|list| {
            list.iter()
                .map(|a| {
                    let f = |k: &str| a.get(k).and_then(|v| v.as_str()).unwrap_or("");
                    let (prefix, name) = (f("prefix"), f("name"));
                    let key = if prefix.is_empty() {
                        name.to_string()
                    } else {
                        format!("{prefix}/{name}")
                    };
                    format!("{key}({})={}", f("type"), f("value"))
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// `yarn node -status NODEID` output (NodeCLI's `Node Report :` block).
pub fn format_node_status(n: &NodeInfo) -> String {
    let mut s = String::new();
    let mut labels = n.node_labels.clone();
    labels.sort();
    let total = n.total_resource.to_resource();
    let used = n.used_resource.to_resource();
    let u = &n.resource_utilization;
    let _ = writeln!(s, "Node Report : ");
    let _ = writeln!(s, "\tNode-Id : {}", n.id);
    let _ = writeln!(s, "\tRack : {}", n.rack);
    let _ = writeln!(s, "\tNode-State : {}", n.state);
    let _ = writeln!(s, "\tNode-Http-Address : {}", n.node_http_address);
    let _ = writeln!(
        s,
        "\tLast-Health-Update : {}",
        format_health_time(n.last_health_update)
    );
    let _ = writeln!(s, "\tHealth-Report : {}", n.health_report);
    let _ = writeln!(s, "\tContainers : {}", n.num_containers);
    let _ = writeln!(s, "\tMemory-Used : {}MB", used.memory_mb);
    let _ = writeln!(s, "\tMemory-Capacity : {}MB", total.memory_mb);
    let _ = writeln!(s, "\tCPU-Used : {} vcores", used.vcores);
    let _ = writeln!(s, "\tCPU-Capacity : {} vcores", total.vcores);
    let _ = writeln!(s, "\tNode-Labels : {}", labels.join(","));
    let _ = writeln!(s, "\tNode Attributes : {}", node_attributes(n).join(","));
    utilization_lines(&mut s, u);
    // Extended resources (yarn.io/gpu, ...) as YARN's Resource string shows them.
    if total.extended().next().is_some() {
        let _ = writeln!(s, "\tConfigured Resources : {total}");
        let _ = writeln!(s, "\tAllocated Resources : {used}");
    }
    // Spindle's: the container images in the node's cache.
    if !n.images.is_empty() {
        let _ = writeln!(s, "\tCached Images : {}", n.images.len());
        for i in &n.images {
            let short = i.digest.get(..19).unwrap_or(&i.digest);
            let names = if i.names.is_empty() {
                "<no name>".to_string()
            } else {
                i.names.join(", ")
            };
            let _ = writeln!(s, "\t\t{names} ({short}, {})", human_bytes(i.size_bytes));
        }
    }
    s
}

/// `1.2 GB`, `512.0 MB`, `900 B`: decimal units, as registries and `docker images` show.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if n < 1000 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1000.0;
    let mut unit = UNITS[0];
    for u in &UNITS[1..] {
        if v < 1000.0 {
            break;
        }
        v /= 1000.0;
        unit = u;
    }
    format!("{v:.1} {unit}")
}

/// Hadoop's `FormattingCLIUtils`: an ASCII table with a centred title, a header between
/// borders, and centred cells.
pub fn ascii_table(title: &str, headers: &[&str], rows: &[Vec<String>]) -> String {
    let n = headers.len();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate().take(n) {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let center = |s: &str, size: usize| -> String {
        let len = s.chars().count();
        if len >= size {
            return s.to_string();
        }
        let left = (size - len) / 2;
        format!("{}{s}{}", " ".repeat(left), " ".repeat(size - len - left))
    };
    let border = |out: &mut String| {
        out.push('+');
        for w in &widths {
            out.push_str(&"-".repeat(w + 2));
            out.push('+');
        }
        out.push('\n');
    };
    let line = |out: &mut String, cells: &[String]| {
        out.push('|');
        for (i, w) in widths.iter().enumerate() {
            out.push_str(&center(cells.get(i).map_or("", String::as_str), w + 2));
            out.push('|');
        }
        out.push('\n');
    };
    let mut out = String::new();
    let inner: usize = widths.iter().sum::<usize>() + 3 * n.saturating_sub(1);
    let title: String = title.chars().take(inner).collect();
    out.push('+');
    out.push_str(&"-".repeat(inner + 2));
    out.push_str("+\n|");
    out.push_str(&center(&title, inner + 2));
    out.push_str("|\n");
    border(&mut out);
    let hdr: Vec<String> = headers.iter().map(|h| h.to_string()).collect();
    line(&mut out, &hdr);
    border(&mut out);
    for r in rows {
        line(&mut out, r);
    }
    if !rows.is_empty() {
        border(&mut out);
    }
    out
}

/// The names of a queue's capacity figures, each with what it is a percent of: YARN's
/// relative `capacity` and `maxCapacity` (of the parent), `usedCapacity` (of the queue's
/// own guarantee, so above 100% when it borrows) and the absolute ones (of the cluster).
/// `queue -list` and `queue -status` print the same names.
const CAPACITY_NAMES: [&str; 6] = [
    "Capacity (% of parent)",
    "Current Capacity (% of guarantee)",
    "Maximum Capacity (% of parent)",
    "Absolute Capacity (% of cluster)",
    "Absolute Used Capacity (% of cluster)",
    "Absolute Maximum Capacity (% of cluster)",
];

/// A queue's figures in [`CAPACITY_NAMES`]' order.
fn capacity_values(q: &CapacitySchedulerQueueInfo) -> [f64; 6] {
    [
        q.capacity,
        q.used_capacity,
        q.max_capacity,
        q.absolute_capacity,
        q.absolute_used_capacity,
        q.absolute_max_capacity,
    ]
}

/// `yarn queue -list all` output: QueueCLI's table of queues, its capacity columns named
/// with what each is a percent of.
pub fn format_queue_list(queues: &[&CapacitySchedulerQueueInfo]) -> String {
    let rows: Vec<Vec<String>> = queues
        .iter()
        .map(|q| {
            let mut row = vec![q.queue_name.clone(), q.queue_path.clone(), q.state.clone()];
            row.extend(
                capacity_values(q)
                    .iter()
                    .map(|v| format!("{}%", java_two_decimals(*v))),
            );
            row.push(java_two_decimals(q.weight));
            row.push(q.max_parallel_apps.to_string());
            row
        })
        .collect();
    let mut headers = vec!["Queue Name", "Queue Path", "State"];
    headers.extend(CAPACITY_NAMES);
    headers.extend(["Weight", "Maximum Parallel Apps"]);
    ascii_table(
        &format!("{} queues were found", queues.len()),
        &headers,
        &rows,
    )
}

/// YARN's `NODES_PATTERN`, `%16s\t%15s\t%17s\t%28s`, then GPUS (used/total) and
/// GPU-MODEL.
fn node_row(cols: [&str; 6]) -> String {
    const W: [usize; 6] = [16, 15, 17, 28, 10, 0];
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
            "GPUS",
            "GPU-MODEL",
        ])
    );
    for n in nodes {
        let state = n.state.to_string();
        let count = n.num_containers.to_string();
        let (used, total) = gpus::node_gpus(n);
        let model = gpus::node_gpu_model(n).unwrap_or_else(|| "-".into());
        let _ = writeln!(
            s,
            "{}",
            node_row([
                &n.id,
                &state,
                &n.node_http_address,
                &count,
                &format!("{used}/{total}"),
                &model
            ])
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
            utilization_lines(&mut s, u);
            let _ = writeln!(s, "\tNode-Labels : {}", labels.join(","));
        }
    }
    // sinfo's habit: free GPUs per partition.
    let _ = writeln!(s);
    s.push_str(&gpus::partition_summary(nodes));
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
/// the REST view's percents, each named with what it is a percent of
/// ([`CAPACITY_NAMES`]).
pub fn format_queue_status(q: &CapacitySchedulerQueueInfo) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "Queue Information : ");
    let _ = writeln!(o, "Queue Name : {}", q.queue_name);
    let _ = writeln!(o, "Queue Path : {}", q.queue_path);
    let _ = writeln!(o, "\tState : {}", q.state);
    for (name, v) in CAPACITY_NAMES.iter().zip(capacity_values(q)) {
        let _ = writeln!(o, "\t{name} : {}%", java_two_decimals(v));
    }
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
    // The RM says per leaf whether the monitor may preempt it (its configuration); a
    // parent's REST record has no flag and prints as disabled.
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

/// A node's two utilization lines, as `yarn node -status` and `-list -showDetails` print them.
fn utilization_lines(
    s: &mut String,
    u: &spindle_common::records::cluster::ResourceUtilizationInfo,
) {
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
}

#[cfg(test)]
mod tests;
