//! System test of the idle-GPU policy on the real binaries: one NodeManager with 6 fake GPUs
//! (`scripts/fake-nvidia-smi`, whose `fake-gpu.conf` the test rewrites while the NM samples
//! it every 200 ms) and three queues with `gpu-idle-timeout-ms=2000` and the three actions.
//! Each queue runs a distributed shell of two one-GPU containers; once they run, the test
//! makes the first container's GPU report 0% and every other GPU 85%. Then:
//!
//! - `release`: the idle container ends with -106 (KILLED_BY_RESOURCEMANAGER) and the policy's
//!   diagnostic, no sooner than the timeout after its GPU went idle;
//! - `report`: the application's diagnostics name the idle container, and the RM's log says so;
//! - `notify`: the AM hears of it (the SDK logs the allocate answer's `idleGpuContainers`);
//!
//! and in every queue the container at 85% keeps running. The app view shows
//! `gpuUtilization` and `idleGpuSeconds`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use reqwest::Method;
use serde_json::{json, Value};
use spindle_system_tests::{bin, cs_xml, fake_gpus_in, wait_until, Cluster, ClusterOpts};

const GPU: &str = "yarn.io/gpu";
const TIMEOUT_MS: u64 = 2_000;
const QUEUES: [(&str, &str); 3] = [("rel", "release"), ("rep", "report"), ("not", "notify")];

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis() as u64
}

/// Submits a distributed shell of two one-GPU containers to `queue`; returns its id.
fn submit(c: &Cluster, queue: &str, command: &str) -> String {
    let (s, v, _) = c.send(
        Method::POST,
        "/ws/v1/cluster/apps/new-application",
        &json!({}),
    );
    assert_eq!(s, 200, "{v}");
    let id = v["application-id"].as_str().expect("id").to_string();
    let (s, body, _) = c.send(
        Method::POST,
        "/ws/v1/cluster/apps?user.name=tester",
        &json!({
            "application-id": id,
            "application-name": format!("idle-{queue}"),
            "application-type": "DISTRIBUTEDSHELL",
            "queue": queue,
            "max-app-attempts": 1,
            "am-container-spec": {
                "local-resources": {"entry": [{"key": "spindle", "value": {
                    "resource": format!("file://{}", bin("spindle").display()),
                    "type": "FILE", "visibility": "APPLICATION"}}]},
                "environment": {"entry": [
                    {"key": "DISTRIBUTEDSHELL_NUM_CONTAINERS", "value": "2"},
                    {"key": "DISTRIBUTEDSHELL_CONTAINER_RESOURCES",
                     "value": format!("memory-mb=256,vcores=1,{GPU}=1")},
                    {"key": "DISTRIBUTEDSHELL_SHELL_COMMAND", "value": command}
                ]},
                "commands": {"command": "./spindle distributed-shell-am"}
            },
            "resource": {"memory": 256, "vCores": 1}
        }),
    );
    assert_eq!(s, 202, "{body}");
    id
}

fn container<'a>(all: &'a [Value], id: &str) -> Option<&'a Value> {
    all.iter().find(|x| x["containerId"] == id)
}

#[test]
fn idle_gpus_are_reported_notified_or_released_by_queue_and_busy_ones_are_left_alone() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let gpus = fake_gpus_in(
        scratch.path(),
        "gpus",
        "FAKE_GPU_COUNT=6\nFAKE_GPU_UTILIZATION=85\n",
    );
    let conf = gpus.join("fake-gpu.conf");
    let release = scratch.path().join("release");
    let mut cs: Vec<(String, String)> = vec![
        ("root.queues".into(), "rel,rep,not".into()),
        ("maximum-am-resource-percent".into(), "1".into()),
    ];
    for (q, action) in QUEUES {
        let cap = if q == "rel" { "34" } else { "33" };
        cs.push((format!("root.{q}.capacity"), cap.into()));
        cs.push((
            format!("root.{q}.gpu-idle-timeout-ms"),
            TIMEOUT_MS.to_string(),
        ));
        cs.push((format!("root.{q}.gpu-idle-action"), action.into()));
        cs.push((format!("root.{q}.user-limit-factor"), "3".into()));
    }
    let cs_ref: Vec<(&str, &str)> = cs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let c = Cluster::start_with_files(
        ClusterOpts {
            nodes: 1,
            rm_props: vec![
                ("yarn.resource-types".into(), GPU.into()),
                (
                    "yarn.resourcemanager.nodemanagers.heartbeat-interval-ms".into(),
                    "200".into(),
                ),
            ],
            nm_props: vec![
                ("yarn.nodemanager.resource-plugins".into(), GPU.into()),
                (
                    "yarn.nodemanager.resource-plugins.gpu.path-to-discovery-executables".into(),
                    gpus.display().to_string(),
                ),
                (
                    "spindle.nodemanager.resource-plugins.gpu.utilization-interval-ms".into(),
                    "200".into(),
                ),
                ("yarn.nodemanager.resource.memory-mb".into(), "8192".into()),
                ("yarn.nodemanager.resource.cpu-vcores".into(), "16".into()),
            ],
        },
        &[("capacity-scheduler.xml", &cs_xml(&cs_ref))],
    );
    let nm = c.nm_addrs[0].clone();

    // The containers wait (bounded) until the test has looked.
    let command = format!(
        "for i in $(seq 600); do [ -e {} ] && break; sleep 0.1; done",
        release.display()
    );
    let apps: BTreeMap<&str, String> = QUEUES
        .iter()
        .map(|(q, _)| (*q, submit(&c, q, &command)))
        .collect();

    // Every app's two GPU containers run and hold a GPU each on the NM.
    let assigned: BTreeMap<String, i64> = wait_until(
        "six containers holding a GPU each",
        Duration::from_secs(60),
        || {
            let v: Value = c
                .http
                .get(format!("http://{nm}/ws/v1/node/resources/yarn.io%2Fgpu"))
                .send()
                .and_then(|r| r.json())
                .ok()?;
            let a: BTreeMap<String, i64> = v["assignedGpuDevices"]
                .as_array()?
                .iter()
                .map(|d| {
                    (
                        d["containerId"].as_str().unwrap_or_default().to_string(),
                        d["index"].as_i64().unwrap_or(-1),
                    )
                })
                .collect();
            (a.len() == 6).then_some(a)
        },
    );
    // Per app: (idle container, busy container), the GPU containers in id order.
    let mut pairs: BTreeMap<&str, (String, String)> = BTreeMap::new();
    for (q, id) in &apps {
        let mut mine: Vec<&String> = assigned
            .keys()
            .filter(|cid| cid.contains(&id["application_".len()..]))
            .collect();
        mine.sort();
        assert_eq!(mine.len(), 2, "{q}: {assigned:?}");
        pairs.insert(q, (mine[0].clone(), mine[1].clone()));
    }
    // Before the test chooses, every GPU is busy: nothing is idle.
    std::thread::sleep(Duration::from_millis(500));
    for (q, id) in &apps {
        let app = c.app(id);
        assert!(
            !app["diagnostics"]
                .as_str()
                .unwrap_or_default()
                .contains("idle GPUs"),
            "{q}: {app}"
        );
    }
    // Now the first container of each app sits on a 0% GPU.
    let util: Vec<String> = pairs
        .values()
        .map(|(idle, _)| format!("{}:0", assigned[idle]))
        .chain(
            pairs
                .values()
                .map(|(_, busy)| format!("{}:85", assigned[busy])),
        )
        .collect();
    let tmp = gpus.join("fake-gpu.conf.new");
    std::fs::write(
        &tmp,
        format!(
            "FAKE_GPU_COUNT=6\nFAKE_GPU_UTILIZATION={}\n",
            util.join(",")
        ),
    )
    .expect("conf");
    let idle_from = now_ms();
    std::fs::rename(&tmp, &conf).expect("rename conf");
    let started = Instant::now();

    // release: the idle container ends with -106 and the policy's diagnostic.
    let (rel_idle, rel_busy) = pairs["rel"].clone();
    let ended = wait_until(
        "the release queue's idle container to be released",
        Duration::from_secs(30),
        || {
            let all = c.containers_of(&apps["rel"]);
            container(&all, &rel_idle)
                .filter(|x| x["containerState"] == "COMPLETE")
                .cloned()
        },
    );
    assert_eq!(ended["containerExitStatus"], -106, "{ended}");
    let diag = ended["diagnosticsInfo"].as_str().unwrap_or_default();
    assert!(
        diag.contains("gpu-idle-action release")
            && diag.contains("gpu-idle-timeout-ms of 2000 ms")
            && diag.contains("idle"),
        "{diag}"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(TIMEOUT_MS),
        "released after {:?}, before the timeout",
        started.elapsed()
    );
    if let Some(fin) = ended["finishedTime"].as_u64().filter(|t| *t > 0) {
        assert!(
            fin >= idle_from + TIMEOUT_MS,
            "finished {fin}, idle from {idle_from}"
        );
    }

    // report: the application's diagnostics name the idle container, not the busy one.
    let (rep_idle, rep_busy) = pairs["rep"].clone();
    let app = wait_until(
        "the report queue's diagnostics",
        Duration::from_secs(30),
        || {
            let a = c.app(&apps["rep"]);
            a["diagnostics"]
                .as_str()
                .is_some_and(|d| d.contains(&rep_idle))
                .then_some(a)
        },
    );
    let diag = app["diagnostics"].as_str().unwrap_or_default();
    assert!(
        diag.contains("idle GPUs") && !diag.contains(&rep_busy),
        "{diag}"
    );
    assert!(
        c.rm.log_text().contains("container holds idle GPUs"),
        "the RM logs what the policy did"
    );

    // notify: the AM hears of the idle container (the SDK logs the allocate answer's event).
    let (not_idle, not_busy) = pairs["not"].clone();
    let am = c.containers_of(&apps["not"])[0]["containerId"]
        .as_str()
        .expect("the AM container")
        .to_string();
    let log = wait_until(
        "the notify AM to hear of it",
        Duration::from_secs(30),
        || {
            let l = c.container_log(&nm, &am, "stderr");
            (l.contains("holding idle GPUs") && l.contains(&not_idle)).then_some(l)
        },
    );
    assert!(!log.contains(&format!("container={not_busy}")), "{log}");

    // The app views show the figures: the report app has held one GPU idle for seconds.
    let app = c.app(&apps["rep"]);
    let util = app["gpuUtilization"].as_f64().expect("gpuUtilization");
    assert!((util - 42.5).abs() < 0.01, "mean of 0% and 85%: {app}");
    assert!(
        app["idleGpuSeconds"].as_u64().expect("idleGpuSeconds") >= 1,
        "{app}"
    );

    // Busy containers (85%) are left alone everywhere; report and notify keep the idle ones.
    for (q, (idle, busy)) in &pairs {
        let all = c.containers_of(&apps[q]);
        let b = container(&all, busy).expect("busy container");
        assert_eq!(b["containerState"], "RUNNING", "{q}: {b}");
        if *q != "rel" {
            let i = container(&all, idle).expect("idle container");
            assert_eq!(i["containerState"], "RUNNING", "{q} keeps it: {i}");
        }
    }
    assert_eq!(rel_busy, pairs["rel"].1);

    std::fs::write(&release, "").expect("release");
    for id in apps.values() {
        c.wait_app_state(
            id,
            &["FINISHED", "FAILED", "KILLED"],
            Duration::from_secs(60),
        );
    }
}
