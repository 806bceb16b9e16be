use spindle_common::states::FinalApplicationStatus;

use super::*;
use spindle_common::localtime::format_local;

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
        &[],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
            lines[0],
            "Total number of applications (application-types: [], states: [SUBMITTED, ACCEPTED, RUNNING] and tags: []):1"
        );
    assert_eq!(
        lines[1],
        format!(
            "{:>30}\t{:>20}\t{:>20}\t{:>10}\t{:>10}\t{:>18}\t{:>18}\t{:>15}\t{:>35}\t{:>8}\t{:>10}\t{:>8}\t{}",
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
            "REASON"
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
            "http://h:8088/proxy/application_1_0001/",
            "0",
            "0.00",
            "-",
            "-"
        ]
    );
    let out = format_app_list(
        &[],
        &["MAPREDUCE".into()],
        &[YarnApplicationState::FINISHED],
        &["nightly".into(), "team-a".into()],
    );
    assert!(out.starts_with(
            "Total number of applications (application-types: [MAPREDUCE], states: [FINISHED] and tags: [nightly, team-a]):0\n"
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
    assert!(lines.contains(&"\tAggregate Resource Allocation : 2048 MB-seconds, 2 vcore-seconds"));
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
        "         Node-Id\t     Node-State\tNode-Http-Address\tNumber-of-Running-Containers\t      GPUS\tGPU-MODEL"
    );
    assert_eq!(
        lines[2],
        format!(
            "{:>16}\t{:>15}\t{:>17}\t{:>28}\t{:>10}\t{}",
            "127.0.0.1:40001", "RUNNING", "127.0.0.1:40001", "3", "0/0", "-"
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
        "usedCapacity": 200.0, "maxCapacity": 100.0, "weight": -1.0,
        "absoluteCapacity": 35.0, "absoluteUsedCapacity": 70.0, "absoluteMaxCapacity": 50.0,
        "maxParallelApps": 2147483647, "nodeLabels": ["*"],
        "type": "capacitySchedulerLeafQueueInfo", "preemptionDisabled": true,
        "intraQueuePreemptionDisabled": true
    }))
    .unwrap();
    assert_eq!(
            format_queue_status(&q),
            "Queue Information : \nQueue Name : a\nQueue Path : root.a\n\tState : RUNNING\n\tCapacity (% of parent) : 70.00%\n\tCurrent Capacity (% of guarantee) : 200.00%\n\tMaximum Capacity (% of parent) : 100.00%\n\tAbsolute Capacity (% of cluster) : 35.00%\n\tAbsolute Used Capacity (% of cluster) : 70.00%\n\tAbsolute Maximum Capacity (% of cluster) : 50.00%\n\tWeight : -1.00\n\tMaximum Parallel Apps : 2147483647\n\tDefault Node Label expression : <DEFAULT_PARTITION>\n\tAccessible Node Labels : *\n\tPreemption : disabled\n\tIntra-queue Preemption : disabled\n"
        );
}

fn attempt() -> AppAttemptInfo {
    AppAttemptInfo {
        id: 1,
        app_attempt_id: "appattempt_1_0001_000001".into(),
        app_attempt_state: "RUNNING".into(),
        container_id: "container_1_0001_01_000001".into(),
        diagnostics_info: String::new(),
        ..Default::default()
    }
}

#[test]
fn attempt_list_and_report_match_application_cli() {
    let ctx = AttemptContext::of(&app(), 1, 1);
    assert_eq!(ctx.host, "h");
    assert_eq!(ctx.rpc_port, -1);
    let out = format_attempt_list(&[(attempt(), ctx.clone())]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "Total number of application attempts :1");
    assert_eq!(
        lines[1],
        format!(
            "{:>30}\t{:>20}\t{:>35}\t{:>35}",
            "ApplicationAttempt-Id", "State", "AM-Container-Id", "Tracking-URL"
        )
    );
    let cols: Vec<&str> = lines[2].split('\t').map(str::trim).collect();
    assert_eq!(
        cols,
        [
            "appattempt_1_0001_000001",
            "RUNNING",
            "container_1_0001_01_000001",
            "http://h:8088/proxy/application_1_0001/"
        ]
    );
    assert_eq!(
            format_attempt_report(&attempt(), &ctx),
            "Application Attempt Report : \n\tApplicationAttempt-Id : appattempt_1_0001_000001\n\tState : RUNNING\n\tAMContainer : container_1_0001_01_000001\n\tTracking-URL : http://h:8088/proxy/application_1_0001/\n\tRPC Port : -1\n\tAM Host : h\n\tDiagnostics : \n"
        );
    // An earlier attempt has no AM host.
    assert_eq!(AttemptContext::of(&app(), 1, 2).host, "N/A");
}

#[test]
fn container_list_and_report_match_application_cli() {
    let c = ContainerReportInfo {
        container_id: "container_1_0001_01_000002".into(),
        started_time: 1_709_814_896_789,
        finished_time: 0,
        container_state: "RUNNING".into(),
        assigned_node_id: "h:1".into(),
        node_http_address: "http://h:2".into(),
        log_url: "http://h:2/node/containerlogs/container_1_0001_01_000002/alice".into(),
        container_exit_status: 0,
        allocated_resources: [(GPU.to_string(), 2)].into_iter().collect(),
        ..Default::default()
    };
    let out = format_container_list(std::slice::from_ref(&c));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "Total number of containers :1");
    assert_eq!(
        lines[1],
        format!(
            "{:>30}\t{:>20}\t{:>20}\t{:>20}\t{:>20}\t{:>20}\t{:>35}\t{:>5}",
            "Container-Id",
            "Start Time",
            "Finish Time",
            "State",
            "Host",
            "Node Http Address",
            "LOG-URL",
            "GPUS"
        )
    );
    let cols: Vec<&str> = lines[2].split('\t').map(str::trim).collect();
    assert_eq!(
        cols,
        [
            "container_1_0001_01_000002",
            format_local(1_709_814_896_789).as_str(),
            "N/A",
            "RUNNING",
            "h:1",
            "http://h:2",
            "http://h:2/node/containerlogs/container_1_0001_01_000002/alice",
            "2"
        ]
    );
    let r = format_container_report(&c);
    let keys: Vec<&str> = r
        .lines()
        .skip(1)
        .filter_map(|l| l.trim_start().split(" : ").next())
        .collect();
    assert!(r.starts_with(&format!(
        "Container Report : \n\tContainer-Id : container_1_0001_01_000002\n\tStart-Time : {}\n\tFinish-Time : N/A\n",
        format_local(1_709_814_896_789)
    )));
    assert_eq!(
        keys,
        [
            "Container-Id",
            "Start-Time",
            "Finish-Time",
            "State",
            "Execution-Type",
            "LOG-URL",
            "Host",
            "NodeHttpAddress",
            "Exit-Status",
            "Diagnostics"
        ]
    );
}

#[test]
fn node_status_matches_node_cli() {
    let n: NodeInfo = serde_json::from_value(serde_json::json!({
        "id": "h:1", "rack": "/default-rack", "state": "RUNNING",
        "nodeHTTPAddress": "h:2", "lastHealthUpdate": 1_709_814_896_789u64,
        "healthReport": "", "numContainers": 2,
        "nodeLabels": ["gpu", "a"],
        "usedResource": {"memory": 2048, "vCores": 2},
        "totalResource": {"memory": 8192, "vCores": 8},
        "nodeAttributesInfo": {"nodeAttributeInfo": [
            {"prefix": "nm.yarn.io", "name": "gpu-model", "type": "STRING", "value": "A100"}
        ]},
    }))
    .unwrap();
    let r = format_node_status(&n);
    let lines: Vec<&str> = r.lines().collect();
    assert_eq!(lines[0], "Node Report : ");
    assert_eq!(lines[1], "\tNode-Id : h:1");
    assert!(lines.contains(&"\tRack : /default-rack"));
    assert!(lines.contains(&"\tNode-State : RUNNING"));
    assert!(lines.contains(&"\tLast-Health-Update : Thu 07/Mar/24 12:34:56:789UTC"));
    assert!(lines.contains(&"\tContainers : 2"));
    assert!(lines.contains(&"\tMemory-Used : 2048MB"));
    assert!(lines.contains(&"\tMemory-Capacity : 8192MB"));
    assert!(lines.contains(&"\tCPU-Used : 2 vcores"));
    assert!(lines.contains(&"\tCPU-Capacity : 8 vcores"));
    assert!(lines.contains(&"\tNode-Labels : a,gpu"));
    assert!(lines.contains(&"\tNode Attributes : nm.yarn.io/gpu-model(STRING)=A100"));
    assert!(lines[lines.len() - 2].starts_with("\tResource Utilization by Node : PMem:"));
    assert_eq!(format_health_time(0), "Thu 01/Jan/70 12:00:00:00UTC");
    assert!(!r.contains("Cached Images"));
}

#[test]
fn node_status_lists_cached_images() {
    let d = format!("sha256:{}", "ab".repeat(32));
    let n: NodeInfo = serde_json::from_value(serde_json::json!({
        "id": "h:1", "state": "RUNNING",
        "images": [{"names": ["127.0.0.1:5000/busybox:1"], "digest": d, "sizeBytes": 1_234_567}],
    }))
    .unwrap();
    let r = format_node_status(&n);
    assert!(r.contains("\tCached Images : 1\n"), "{r}");
    assert!(
        r.contains("\t\t127.0.0.1:5000/busybox:1 (sha256:abababababab, 1.2 MB)"),
        "{r}"
    );
    assert_eq!(human_bytes(999), "999 B");
    assert_eq!(human_bytes(9_800_000_000), "9.8 GB");
}

#[test]
fn queue_table_matches_formatting_cli_utils() {
    let q = |name: &str, path: &str, cap: f64| CapacitySchedulerQueueInfo {
        queue_name: name.into(),
        queue_path: path.into(),
        state: "RUNNING".into(),
        capacity: cap,
        used_capacity: 0.0,
        max_capacity: 100.0,
        weight: -1.0,
        max_parallel_apps: 2147483647,
        ..Default::default()
    };
    let (root, a) = (q("root", "root", 100.0), q("a", "root.a", 70.0));
    let t = format_queue_list(&[&root, &a]);
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines.len(), 8, "{t}");
    let border = lines[2];
    assert!(
        border.starts_with("+-") && border.ends_with("-+"),
        "{border}"
    );
    assert_eq!(lines[0].len(), border.len());
    assert_eq!(lines[1].trim_matches('|').trim(), "2 queues were found");
    assert_eq!(lines[4], border);
    assert_eq!(lines[7], border);
    let cells = |l: &str| -> Vec<String> {
        l.trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    assert_eq!(
        cells(lines[3]),
        [
            "Queue Name",
            "Queue Path",
            "State",
            "Capacity (% of parent)",
            "Current Capacity (% of guarantee)",
            "Maximum Capacity (% of parent)",
            "Absolute Capacity (% of cluster)",
            "Absolute Used Capacity (% of cluster)",
            "Absolute Maximum Capacity (% of cluster)",
            "Weight",
            "Maximum Parallel Apps"
        ]
    );
    assert_eq!(
        cells(lines[6]),
        [
            "a",
            "root.a",
            "RUNNING",
            "70.00%",
            ".00%",
            "100.00%",
            ".00%",
            ".00%",
            ".00%",
            "-1.00",
            "2147483647"
        ]
    );
    // Cells are centred: "a" in a column as wide as "Queue Name".
    assert!(lines[6].starts_with("|     a      |"), "{}", lines[6]);
}

fn gpu_node(id: &str, label: &str, used: i64, total: i64, model: &str) -> NodeInfo {
    use spindle_common::resource::Resource;
    NodeInfo {
        id: id.into(),
        state: NodeState::RUNNING,
        node_http_address: id.into(),
        node_labels: if label.is_empty() {
            vec![]
        } else {
            vec![label.into()]
        },
        used_resource: (&Resource::new(1024, 1).with(GPU, used)).into(),
        total_resource: (&Resource::new(8192, 8).with(GPU, total)).into(),
        node_attributes_info: serde_json::json!({"nodeAttributeInfo": [
            {"prefix": "nm.yarn.io", "name": "gpu-model", "type": "STRING", "value": model},
            {"prefix": "nm.yarn.io", "name": "gpu-count", "type": "STRING", "value": "4"}
        ]}),
        ..Default::default()
    }
}

#[test]
fn app_list_shows_gpus_and_why_a_waiting_application_waits() {
    use spindle_common::records::am::{GangState, GangStatus};
    use spindle_common::records::cluster::{ResourceSecondsEntry, ResourceSecondsMap};
    let running = AppInfo {
        allocated_gpus: 4,
        gpu_utilization: Some(63.4),
        resource_seconds_map: ResourceSecondsMap {
            entry: vec![ResourceSecondsEntry {
                key: GPU.into(),
                value: 9000,
            }]
            .into(),
        },
        ..app()
    };
    let waiting = AppInfo {
        id: "application_1_0002".into(),
        state: YarnApplicationState::ACCEPTED,
        pending_gpus: 8,
        diagnostics: "Gang g0 is waiting: needs 8 GPUs on at most 1 node\nmore".into(),
        ..app()
    };
    let gang_waits = AppInfo {
        id: "application_1_0003".into(),
        allocated_gpus: 1,
        pending_gpus: 2,
        gangs: vec![GangStatus {
            id: "g1".into(),
            state: GangState::RESERVED,
            diagnostics: "reserved nodes a".into(),
            ..Default::default()
        }],
        ..app()
    };
    let done = AppInfo {
        id: "application_1_0004".into(),
        state: YarnApplicationState::FINISHED,
        allocated_gpus: -1,
        diagnostics: "it ended".into(),
        ..app()
    };
    let asks_wait = AppInfo {
        id: "application_1_0005".into(),
        allocated_gpus: 1,
        pending_gpus: 2,
        diagnostics: "no node has 2 GPUs and 256 MB free now: it waits".into(),
        ..app()
    };
    let out = format_app_list(
        &[running, waiting, gang_waits, done, asks_wait],
        &[],
        &[],
        &[],
    );
    let rows: Vec<Vec<&str>> = out
        .lines()
        .skip(2)
        .map(|l| l.split('\t').map(str::trim).skip(9).collect())
        .collect();
    assert_eq!(rows[0], ["4", "2.50", "63%", "-"]);
    assert_eq!(
        rows[1],
        [
            "0+8",
            "0.00",
            "-",
            "Gang g0 is waiting: needs 8 GPUs on at most 1 node"
        ]
    );
    assert_eq!(
        rows[2],
        ["1+2", "0.00", "-", "Gang g1 is waiting: reserved nodes a"]
    );
    assert_eq!(rows[3], ["-", "0.00", "-", "-"]);
    // Running, with GPU asks that wait: the reason the AM's allocate wrote.
    assert_eq!(
        rows[4],
        [
            "1+2",
            "0.00",
            "-",
            "no node has 2 GPUs and 256 MB free now: it waits"
        ]
    );
}

#[test]
fn app_report_shows_gpu_time_and_local_times() {
    use spindle_common::records::am::CheckpointReport;
    use spindle_common::records::cluster::{
        AppPreemptionInfo, AppTimeoutInfo, AppTimeoutsInfo, ResourceSecondsEntry,
        ResourceSecondsMap,
    };
    let a = AppInfo {
        started_time: 1_795_871_109_000,
        launch_time: 1_795_871_110_000,
        gpu_utilization: Some(42.25),
        idle_gpu_seconds: Some(120),
        resource_seconds_map: ResourceSecondsMap {
            entry: vec![ResourceSecondsEntry {
                key: GPU.into(),
                value: 7200,
            }]
            .into(),
        },
        timeouts: Some(AppTimeoutsInfo {
            timeout: vec![AppTimeoutInfo {
                timeout_type: "LIFETIME".into(),
                expiry_time: "2026-11-28T14:05:09.000+0000".into(),
                remaining_time_in_seconds: 60,
            }],
        }),
        preemption: Some(AppPreemptionInfo {
            last_checkpoint: Some(CheckpointReport {
                time: 1_795_871_111_000,
                step: Some(300),
                label: None,
            }),
            ..Default::default()
        }),
        ..app()
    };
    let r = format_app_report(&a);
    let has = |l: &str| r.lines().any(|x| x == l);
    assert!(has(&format!(
        "\tStart-Time : {}",
        format_local(1_795_871_109_000)
    )));
    assert!(has(&format!(
        "\tLaunch-Time : {}",
        format_local(1_795_871_110_000)
    )));
    assert!(has("\tFinish-Time : N/A"), "{r}");
    assert!(has("\tGPU-Seconds : 7200 (2.00 GPU-hours)"), "{r}");
    assert!(
        has("\tGPU Utilization : 42.2% (mean over the GPUs it holds)"),
        "{r}"
    );
    assert!(has("\tIdle GPU Time : 120 GPU-seconds"), "{r}");
    assert!(has(&format!(
        "\tLast Checkpoint : {}, step 300",
        format_local(1_795_871_111_000)
    )));
    let expiry =
        format_local(spindle_common::time::parse_iso8601("2026-11-28T14:05:09.000+0000").unwrap());
    assert!(r.contains(&format!("\tExpiryTime : {expiry}\t")), "{r}");
    // No epoch milliseconds anywhere.
    assert!(!r.contains("1795871"), "{r}");
    let r = format_app_report(&app());
    assert!(
        r.contains("\tGPU Utilization : N/A (no GPU of it sampled)\n"),
        "{r}"
    );
    assert!(
        r.contains("\tIdle GPU Time : N/A (no GPU of it sampled)\n"),
        "{r}"
    );
}

#[test]
fn node_list_shows_gpus_models_and_free_gpus_per_partition() {
    let nodes = [
        gpu_node("a:1", "", 3, 4, "H100"),
        gpu_node("b:1", "", 0, 4, "H100"),
        gpu_node("c:1", "a100", 2, 8, "A100"),
    ];
    let out = format_node_list(&nodes, false);
    let lines: Vec<&str> = out.lines().collect();
    let cells = |l: &str| -> Vec<String> { l.split('\t').map(|c| c.trim().to_string()).collect() };
    assert_eq!(cells(lines[2])[4..], ["3/4", "H100"]);
    assert_eq!(cells(lines[4])[4..], ["2/8", "A100"]);
    assert_eq!(lines[5], "");
    let summary: Vec<Vec<&str>> = lines[6..]
        .iter()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        summary,
        [
            vec!["PARTITION", "NODES", "GPUS(FREE/TOTAL)"],
            vec!["<DEFAULT_PARTITION>", "2", "5/8"],
            vec!["a100", "1", "6/8"],
        ]
    );
}
