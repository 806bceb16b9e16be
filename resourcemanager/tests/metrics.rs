//! Integration test of the RM's `/metrics`: the RM in-process, a GPU node registered over the
//! ResourceTracker, an application whose AM holds a GPU and asks for more than the node has
//! free. The per-queue GPU series equal the scheduler REST view (`/ws/v1/cluster/scheduler`),
//! requests are timed by route template, and `promtool check metrics` accepts the text (skipped
//! with a reason where promtool is missing, a failure under `CI=true`).

mod support;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};
use support::{fake_nm, start_rm, Rm};

const GPU: &str = "yarn.io/gpu";

fn gpus(n: i64) -> Value {
    json!({"resourceInformation": [{"name": GPU, "value": n}]})
}

fn resource_value(r: &Value, name: &str) -> i64 {
    r["resourceInformations"]["resourceInformation"]
        .as_array()
        .and_then(|a| a.iter().find(|i| i["name"] == name))
        .and_then(|i| i["value"].as_i64())
        .unwrap_or(0)
}

/// The value of the sample `name{labels}` exactly as the text writes it.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

impl Rm {
    async fn post_as(&self, path: &str, body: Value, token: Option<&str>) -> (u16, Value) {
        let mut req = self.http.post(format!("{}{path}", self.base)).json(&body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let r = req.send().await.expect("send");
        let s = r.status().as_u16();
        (s, r.json().await.unwrap_or(Value::Null))
    }
    async fn metrics(&self) -> String {
        let r = self
            .http
            .get(format!("{}/metrics", self.base))
            .send()
            .await
            .expect("metrics");
        assert_eq!(r.status().as_u16(), 200);
        assert!(r.headers()["content-type"]
            .to_str()
            .expect("content type")
            .starts_with("text/plain; version=0.0.4"));
        r.text().await.expect("text")
    }
}

#[tokio::test]
async fn per_queue_gpu_series_match_the_scheduler_view_and_pass_promtool() {
    let rm = start_rm(&[("yarn.resource-types", GPU)]).await;
    let (nm, launches) = fake_nm().await;
    let (s, reg) = rm
        .post_as(
            "/ws/v1/node-tracker/register",
            json!({"nodeId": nm, "httpAddress": nm, "nmVersion": "t",
                   "resource": {"memory": 8192, "vCores": 8, "resourceInformations": gpus(4)}}),
            None,
        )
        .await;
    assert_eq!(s, 200, "{reg}");

    // An application whose AM holds one GPU.
    let (_, new_app) = rm
        .post_as("/ws/v1/cluster/apps/new-application", json!({}), None)
        .await;
    let app = new_app["application-id"].as_str().expect("id").to_string();
    let (s, body) = rm
        .post_as(
            "/ws/v1/cluster/apps?user.name=alice",
            json!({"application-id": app, "application-name": "g", "queue": "default",
                   "am-container-spec": {"commands": {"command": "./am"}},
                   "resource": {"memory": 256, "vCores": 1, "resourceInformations": gpus(1)}}),
            None,
        )
        .await;
    assert_eq!(s, 202, "{body}");
    let token = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let Some(l) = launches.lock().expect("lock").first() {
                return l.start_container_request[0]
                    .container_launch_context
                    .environment["SPINDLE_AMRM_TOKEN"]
                    .clone();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the AM launch");
    let (s, body) = rm
        .post_as("/ws/v1/am/register", json!({"host": "h"}), Some(&token))
        .await;
    assert_eq!(s, 200, "{body}");
    // Five one-GPU containers on a node with three GPUs left: two stay pending.
    let (s, body) = rm
        .post_as(
            "/ws/v1/am/allocate",
            json!({"ask": [{"priority": 1, "resourceName": "*", "numContainers": 5,
                   "capability": {"memory": 256, "vCores": 1, "resourceInformations": gpus(1)}}]}),
            Some(&token),
        )
        .await;
    assert_eq!(s, 200, "{body}");

    let (_, sched) = rm.get("/ws/v1/cluster/scheduler").await;
    let text = rm.metrics().await;
    let q = sched["scheduler"]["schedulerInfo"]["queues"]["queue"]
        .as_array()
        .and_then(|a| a.iter().find(|q| q["queuePath"] == "root.default"))
        .expect("root.default")
        .clone();
    let part = &q["capacities"]["queueCapacitiesByPartition"][0];
    let rest = [
        ("used", resource_value(&q["resourcesUsed"], GPU)),
        (
            "guaranteed",
            resource_value(&part["effectiveMinResource"], GPU),
        ),
        (
            "maximum",
            resource_value(&part["effectiveMaxResource"], GPU),
        ),
        (
            "pending",
            resource_value(
                &q["resources"]["resourceUsagesByPartition"][0]["pending"],
                GPU,
            ),
        ),
    ];
    assert_eq!(
        rest,
        [
            ("used", 4),
            ("guaranteed", 4),
            ("maximum", 4),
            ("pending", 2)
        ],
        "{q}"
    );
    for (kind, want) in rest {
        let series = format!(
            "spindle_rm_queue_resource_{kind}{{queue=\"root.default\",resource=\"{GPU}\"}}"
        );
        assert_eq!(
            sample(&text, &series),
            Some(want as f64),
            "{series} in\n{text}"
        );
    }
    assert_eq!(
        sample(
            &text,
            &format!("spindle_rm_node_gpus_used{{node=\"{nm}\"}}")
        ),
        Some(4.0)
    );
    assert_eq!(
        sample(
            &text,
            &format!("spindle_rm_node_gpus_free{{node=\"{nm}\"}}")
        ),
        Some(0.0)
    );
    assert_eq!(
        sample(
            &text,
            "spindle_rm_queue_applications{queue=\"root.default\",state=\"RUNNING\"}"
        ),
        Some(1.0)
    );
    // Route templates, never raw paths, label request latency; the AM protocol is timed too.
    assert!(text.contains("path=\"/ws/v1/am/allocate\""), "{text}");
    let (s, _) = rm.get(&format!("/ws/v1/cluster/apps/{app}")).await;
    assert_eq!(s, 200);
    let text = rm.metrics().await;
    assert!(
        text.contains("path=\"/ws/v1/cluster/apps/{appid}\""),
        "{text}"
    );
    assert!(!text.contains("application_"), "{text}");
    assert!(
        sample(
            &text,
            "spindle_rm_core_call_duration_seconds_count{call=\"am_allocate\"}"
        )
        .is_some_and(|n| n >= 1.0),
        "{text}"
    );

    // promtool accepts it.
    let Ok(mut child) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        spindle_test_support::require::skip(
            "per_queue_gpu_series_match_the_scheduler_view_and_pass_promtool",
            "promtool is not installed (apt-get install prometheus)",
        );
        return;
    };
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("promtool");
    assert!(
        out.status.success(),
        "promtool check metrics:\n{}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
