//! System test of the Prometheus metrics on the real binaries: a 2-node cluster whose NMs each
//! discover 4 fake GPUs, two queues (`root.a` 75%, `root.b` 25%), a gang run to its end (a gang
//! wait observed), then GPU containers held in `root.a` and more GPUs asked for in `root.b`
//! than are free (pending GPUs). The RM's per-queue GPU series equal the scheduler REST view
//! (`/ws/v1/cluster/scheduler`), its per-node GPU series the nodes view, each NM's per-GPU
//! series its GPU plugin's view, and Debian's `promtool check metrics` accepts both daemons'
//! `/metrics` (skipped with a reason when promtool is missing, a failure under `CI=true`).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};
use spindle_system_tests::{
    app_id_in, bin, cs_xml, fake_gpus_in, wait_until, Cluster, ClusterOpts,
};

const GPU: &str = "yarn.io/gpu";

/// One sample: its name, labels and value.
#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// The samples of a text exposition (our label values never hold `"` or `,`).
fn parse(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').expect("sample line");
            let (name, labels) = match series.split_once('{') {
                Some((n, rest)) => {
                    let inner = rest.trim_end_matches('}');
                    let labels = inner
                        .split("\",")
                        .filter(|p| !p.is_empty())
                        .map(|p| {
                            let (k, v) = p.split_once("=\"").expect("label");
                            (k.to_string(), v.trim_end_matches('"').to_string())
                        })
                        .collect();
                    (n.to_string(), labels)
                }
                None => (series.to_string(), BTreeMap::new()),
            };
            Sample {
                name,
                labels,
                value: value.parse().expect("value"),
            }
        })
        .collect()
}

fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.value)
}

fn resource_value(r: &Value, name: &str) -> i64 {
    r["resourceInformations"]["resourceInformation"]
        .as_array()
        .and_then(|a| a.iter().find(|i| i["name"] == name))
        .and_then(|i| i["value"].as_i64())
        .unwrap_or(0)
}

/// The queue of the scheduler view named `path`, anywhere in the tree.
fn find_queue<'a>(q: &'a Value, path: &str) -> Option<&'a Value> {
    if q["queuePath"] == path {
        return Some(q);
    }
    q["queues"]["queue"]
        .as_array()
        .and_then(|a| a.iter().find_map(|c| find_queue(c, path)))
}

/// `used`, `guaranteed`, `maximum` and `pending` GPUs of a queue in the scheduler view.
fn rest_gpus(sched: &Value, path: &str) -> [i64; 4] {
    let q = find_queue(&sched["scheduler"]["schedulerInfo"], path)
        .unwrap_or_else(|| panic!("{path} not in {sched}"));
    let part = &q["capacities"]["queueCapacitiesByPartition"][0];
    [
        resource_value(&q["resourcesUsed"], GPU),
        resource_value(&part["effectiveMinResource"], GPU),
        resource_value(&part["effectiveMaxResource"], GPU),
        resource_value(
            &q["resources"]["resourceUsagesByPartition"][0]["pending"],
            GPU,
        ),
    ]
}

fn metric_gpus(samples: &[Sample], path: &str) -> [i64; 4] {
    ["used", "guaranteed", "maximum", "pending"].map(|k| {
        value(
            samples,
            &format!("spindle_rm_queue_resource_{k}"),
            &[("queue", path), ("resource", GPU)],
        )
        .unwrap_or_else(|| panic!("no {k} GPU series for {path}")) as i64
    })
}

fn text(c: &Cluster, url: &str) -> String {
    let r = c.http.get(url).send().expect("GET /metrics");
    assert_eq!(r.status().as_u16(), 200, "{url}");
    let ct = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert!(ct.starts_with("text/plain; version=0.0.4"), "{url}: {ct}");
    r.text().expect("body")
}

/// `promtool check metrics` on `text`: None when promtool is missing here (skipped outside
/// CI, a failure under it), else whether it passed, with what it said.
fn promtool(test: &str, what: &str, text: &str) -> Option<()> {
    let Ok(mut child) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        spindle_test_support::require::skip(
            test,
            "promtool is not installed (apt-get install prometheus)",
        );
        return None;
    };
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write to promtool");
    let out = child.wait_with_output().expect("promtool");
    assert!(
        out.status.success(),
        "promtool check metrics refused the {what}'s /metrics:\n{}{}\n---- the text ----\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    Some(())
}

/// The full series names (`spindle_rm_...`, `spindle_nm_...`) a text mentions.
fn names_in(text: &str) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("spindle_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        let name = &tail[..end];
        if (name.starts_with("spindle_rm_") || name.starts_with("spindle_nm_"))
            && !name.ends_with('_')
        {
            out.insert(name.to_string());
        }
        rest = &tail[end..];
    }
    out
}

/// Submits a distributed shell of `n` one-GPU containers in `queue` that wait for `release`.
fn gpu_dshell(c: &Cluster, queue: &str, n: u32, release: &Path) -> String {
    let command = format!(
        "for i in $(seq 600); do [ -e {} ] && break; sleep 0.1; done",
        release.display()
    );
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
            "application-name": format!("gpus-{queue}"),
            "application-type": "DISTRIBUTEDSHELL",
            "queue": queue,
            "max-app-attempts": 1,
            "am-container-spec": {
                "local-resources": {"entry": [{"key": "spindle", "value": {
                    "resource": format!("file://{}", bin("spindle").display()),
                    "type": "FILE", "visibility": "APPLICATION"}}]},
                "environment": {"entry": [
                    {"key": "DISTRIBUTEDSHELL_NUM_CONTAINERS", "value": n.to_string()},
                    {"key": "DISTRIBUTEDSHELL_CONTAINER_RESOURCES",
                     "value": "memory-mb=256,vcores=1,yarn.io/gpu=1"},
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

#[test]
fn queue_node_and_gpu_series_match_the_rest_views_and_pass_promtool() {
    const TEST: &str = "queue_node_and_gpu_series_match_the_rest_views_and_pass_promtool";
    let scratch = tempfile::tempdir().expect("tempdir");
    // GPU 1 busy at 85%, the others idle; sampled every 200 ms.
    let gpus = fake_gpus_in(
        scratch.path(),
        "gpus",
        "FAKE_GPU_COUNT=4\nFAKE_GPU_UTILIZATION=1:85\nFAKE_GPU_MEMORY_USED_MIB=1:2048\n",
    );
    let release = scratch.path().join("release");
    let cs = cs_xml(&[
        ("root.queues", "a,b"),
        ("root.a.capacity", "75"),
        ("root.b.capacity", "25"),
        ("root.a.maximum-capacity", "100"),
        ("root.b.maximum-capacity", "100"),
        ("root.b.user-limit-factor", "4"),
    ]);
    let c = Cluster::start_with_files(
        ClusterOpts {
            nodes: 2,
            rm_props: vec![("yarn.resource-types".into(), GPU.into())],
            nm_props: vec![
                ("yarn.nodemanager.resource-plugins".into(), GPU.into()),
                (
                    "yarn.nodemanager.resource-plugins.gpu.path-to-discovery-executables".into(),
                    gpus.display().to_string(),
                ),
                ("yarn.nodemanager.resource.cpu-vcores".into(), "8".into()),
                (
                    "spindle.nodemanager.resource-plugins.gpu.utilization-interval-ms".into(),
                    "200".into(),
                ),
            ],
        },
        &[("capacity-scheduler.xml", &cs)],
    );

    // A gang of 2 run to its end: the RM observes one gang wait.
    let out = c.spindle_within(
        &[
            "train",
            "--workers",
            "2",
            "--worker-resources",
            "yarn.io/gpu=1,vcores=1,memory-mb=256",
            "--queue",
            "a",
            "--timeout-ms",
            "90000",
            "--",
            "true",
        ],
        Duration::from_secs(120),
    );
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    if !out.status.success() {
        c.dump_logs();
    }
    assert!(
        out.status.success(),
        "spindle train: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let train = app_id_in(&stdout).expect("train's application id");
    c.wait_app_state(&train, &["FINISHED"], Duration::from_secs(30));
    let rm_metrics = c.url("/metrics");
    let m = parse(&text(&c, &rm_metrics));
    assert!(
        value(&m, "spindle_rm_gang_wait_seconds_count", &[]).is_some_and(|n| n >= 1.0),
        "no gang wait observed"
    );
    assert_eq!(
        value(
            &m,
            "spindle_rm_queue_applications",
            &[("queue", "root.a"), ("state", "FINISHED")]
        ),
        Some(1.0)
    );

    // root.a holds 4 GPUs; root.b asks for 6 of the 4 left, so some wait.
    let a = gpu_dshell(&c, "a", 4, &release);
    wait_until("root.a to hold 4 GPUs", Duration::from_secs(60), || {
        let (_, s) = c.get("/ws/v1/cluster/scheduler");
        (rest_gpus(&s, "root.a")[0] == 4).then_some(())
    });
    let b = gpu_dshell(&c, "b", 6, &release);
    wait_until(
        "root.b to have pending GPUs",
        Duration::from_secs(60),
        || {
            let (_, s) = c.get("/ws/v1/cluster/scheduler");
            let [used, _, _, pending] = rest_gpus(&s, "root.b");
            (used == 4 && pending > 0).then_some(())
        },
    );

    // The per-queue GPU series equal the scheduler view taken at the same moment (a view
    // unchanged across the scrape).
    let (rm_text, m, sched) = wait_until(
        "a scrape between two equal scheduler views",
        Duration::from_secs(20),
        || {
            let (_, before) = c.get("/ws/v1/cluster/scheduler");
            let t = text(&c, &rm_metrics);
            let (_, after) = c.get("/ws/v1/cluster/scheduler");
            (before == after).then(|| (t.clone(), parse(&t), after))
        },
    );
    for q in ["root.a", "root.b"] {
        assert_eq!(
            metric_gpus(&m, q),
            rest_gpus(&sched, q),
            "{q}: [used, guaranteed, maximum, pending] GPUs in /metrics vs the scheduler view"
        );
    }
    assert_eq!(metric_gpus(&m, "root.a")[0], 4);
    assert!(metric_gpus(&m, "root.b")[3] > 0);
    assert_eq!(
        value(
            &m,
            "spindle_rm_queue_applications",
            &[("queue", "root.b"), ("state", "RUNNING")]
        ),
        Some(1.0)
    );

    // Per node: used + free = 4, and the used GPUs are the nodes view's.
    let (_, nodes) = c.get("/ws/v1/cluster/nodes");
    for n in nodes["nodes"]["node"].as_array().expect("nodes") {
        let id = n["id"].as_str().expect("node id");
        let used = value(&m, "spindle_rm_node_gpus_used", &[("node", id)]).expect("used");
        let free = value(&m, "spindle_rm_node_gpus_free", &[("node", id)]).expect("free");
        assert_eq!(used + free, 4.0, "{id}");
        assert_eq!(used as i64, resource_value(&n["usedResource"], GPU), "{id}");
    }
    // Requests are timed by route template, never by raw path.
    assert!(
        m.iter().any(
            |s| s.name == "spindle_rm_http_request_duration_seconds_count"
                && s.labels.get("path").map(String::as_str) == Some("/ws/v1/cluster/apps/{appid}")
        ),
        "no request series for the app route template"
    );
    assert!(!m.iter().any(|s| s
        .labels
        .get("path")
        .is_some_and(|p| p.contains("application_"))));
    assert!(value(
        &m,
        "spindle_rm_core_call_duration_seconds_count",
        &[("call", "node_heartbeat")]
    )
    .is_some_and(|n| n > 0.0));

    // Each NM: one series set per GPU, assigned as its GPU plugin says.
    let mut nm_texts = Vec::new();
    for nm in &c.nm_addrs {
        let gpu_view = || -> Value {
            c.http
                .get(format!("http://{nm}/ws/v1/node/resources/yarn.io%2Fgpu"))
                .send()
                .and_then(|r| r.json())
                .expect("gpu view")
        };
        // The plugin's sample (every 200 ms) shows GPU 1 at 85% with 2 GiB in use.
        // The metrics are read between two equal plugin views, so a container
        // starting meanwhile (the RM has placed it; the NM launches it) is not
        // counted on one side only.
        let (t, s, view) = wait_until(
            &format!("{nm} to expose sampled GPU utilization under a settled plugin view"),
            Duration::from_secs(20),
            || {
                let before = gpu_view();
                let t = text(&c, &format!("http://{nm}/metrics"));
                let s = parse(&t);
                let after = gpu_view();
                (before["assignedGpuDevices"] == after["assignedGpuDevices"]
                    && value(&s, "spindle_nm_gpu_utilization_ratio", &[("minor", "1")]).is_some())
                .then(|| (t.clone(), s, after))
            },
        );
        let held = view["assignedGpuDevices"].as_array().map_or(0, Vec::len);
        assert_eq!(
            value(&s, "spindle_nm_gpu_utilization_ratio", &[("minor", "1")]),
            Some(0.85),
            "{nm}: {t}"
        );
        assert_eq!(
            value(&s, "spindle_nm_gpu_utilization_ratio", &[("minor", "0")]),
            Some(0.0),
            "{nm}: {t}"
        );
        assert_eq!(
            value(&s, "spindle_nm_gpu_memory_used_bytes", &[("minor", "1")]),
            Some(2048.0 * 1048576.0),
            "{nm}: {t}"
        );
        assert!(
            value(&s, "spindle_nm_gpu_temperature_celsius", &[("minor", "1")])
                .is_some_and(|c| c > 0.0),
            "{nm}: {t}"
        );
        let per_gpu: Vec<&Sample> = s
            .iter()
            .filter(|x| x.name == "spindle_nm_gpu_assigned")
            .collect();
        assert_eq!(per_gpu.len(), 4, "{nm}: {t}");
        assert_eq!(
            per_gpu.iter().filter(|x| x.value == 1.0).count(),
            held,
            "{nm}: assigned GPUs in /metrics vs the plugin's view {view}"
        );
        for g in &per_gpu {
            assert!(
                !g.labels["model"].is_empty() && !g.labels["minor"].is_empty(),
                "{g:?}"
            );
        }
        assert!(
            s.iter()
                .any(|x| x.name == "spindle_nm_gpu_memory_total_bytes" && x.value > 0.0),
            "{nm}: {t}"
        );
        assert!(
            value(&s, "spindle_nm_containers_launched_total", &[]).is_some_and(|n| n >= 1.0),
            "{nm}: {t}"
        );
        nm_texts.push((nm.clone(), t));
    }
    let held_total: usize = nm_texts
        .iter()
        .map(|(_, t)| {
            parse(t)
                .iter()
                .filter(|x| x.name == "spindle_nm_gpu_assigned" && x.value == 1.0)
                .count()
        })
        .sum();
    assert!(held_total >= 4, "{held_total} GPUs held on the NMs");

    // Every series the dashboard and the operations guide name exists.
    let families: std::collections::BTreeSet<String> = std::iter::once(rm_text.as_str())
        .chain(nm_texts.iter().map(|(_, t)| t.as_str()))
        .flat_map(|t| t.lines())
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .map(str::to_string)
        .collect();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dashboard =
        std::fs::read_to_string(root.join("deploy/grafana/spindle.json")).expect("dashboard");
    serde_json::from_str::<Value>(&dashboard).expect("the dashboard is JSON");
    let ops = std::fs::read_to_string(root.join("docs/operations.md")).expect("operations");
    let metrics_section = &ops[ops.find("### Metrics").expect("Metrics section")..];
    let metrics_section = &metrics_section[..metrics_section.find("\n### ").unwrap_or(0)];
    for (what, text) in [
        ("deploy/grafana/spindle.json", dashboard.as_str()),
        ("docs/operations.md", metrics_section),
    ] {
        let names = names_in(text);
        assert!(names.len() > 10, "{what}: {names:?}");
        for n in names {
            let family = ["_bucket", "_count", "_sum"]
                .iter()
                .find_map(|s| n.strip_suffix(s).filter(|f| families.contains(*f)))
                .unwrap_or(&n);
            assert!(
                families.contains(family),
                "{what} names {n}, which no daemon exposes"
            );
        }
    }

    // promtool accepts both daemons' exposition.
    let checked = promtool(TEST, "RM", &rm_text).is_some();
    if checked {
        for (nm, t) in &nm_texts {
            promtool(TEST, &format!("NM {nm}"), t);
        }
    }

    std::fs::write(&release, "").expect("release");
    for id in [&a, &b] {
        c.wait_app_state(
            id,
            &["FINISHED", "FAILED", "KILLED"],
            Duration::from_secs(90),
        );
    }
}

/// The alert rule `docs/operations.md` shows (a queue under its GPU guarantee with GPUs
/// pending for 10 minutes) is valid and fires as documented: `promtool test rules` over
/// synthetic series of the RM's names, a starved queue and a satisfied one.
#[test]
fn the_documented_starved_queue_alert_fires_after_ten_minutes() {
    const TEST: &str = "the_documented_starved_queue_alert_fires_after_ten_minutes";
    if Command::new("promtool").arg("--version").output().is_err() {
        spindle_test_support::require::skip(
            TEST,
            "promtool is not installed (apt-get install prometheus)",
        );
        return;
    }
    let ops = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/operations.md"),
    )
    .expect("docs/operations.md");
    let start = ops
        .find("groups:\n  - name: spindle")
        .expect("the alert rule in docs/operations.md");
    let rules = &ops[start..start + ops[start..].find("```").expect("end of the rule")];
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("rules.yml"), rules).expect("rules");
    let g = "resource=\"yarn.io/gpu\"";
    std::fs::write(
        dir.path().join("test.yml"),
        format!(
            r#"rule_files: [rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'spindle_rm_queue_resource_used{{queue="root.a",{g}}}'
        values: '2x20'
      - series: 'spindle_rm_queue_resource_guaranteed{{queue="root.a",{g}}}'
        values: '6x20'
      - series: 'spindle_rm_queue_resource_pending{{queue="root.a",{g}}}'
        values: '4x20'
      - series: 'spindle_rm_queue_resource_used{{queue="root.b",{g}}}'
        values: '2x20'
      - series: 'spindle_rm_queue_resource_guaranteed{{queue="root.b",{g}}}'
        values: '2x20'
      - series: 'spindle_rm_queue_resource_pending{{queue="root.b",{g}}}'
        values: '4x20'
    alert_rule_test:
      - eval_time: 5m
        alertname: SpindleQueueStarvedOfGpus
        exp_alerts: []
      - eval_time: 11m
        alertname: SpindleQueueStarvedOfGpus
        exp_alerts:
          - exp_labels: {{severity: warning, queue: root.a, resource: yarn.io/gpu}}
            exp_annotations:
              summary: "Queue root.a is under its GPU guarantee with GPUs pending"
              description: "root.a holds 2 GPUs while its applications wait for more"
"#
        ),
    )
    .expect("test file");
    let out = Command::new("promtool")
        .args(["test", "rules", "test.yml"])
        .current_dir(dir.path())
        .output()
        .expect("promtool");
    assert!(
        out.status.success(),
        "promtool test rules:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
