//! Idle GPUs through the RM's REST edge, in process: an NM's heartbeats carry
//! `containersGpuUtilization` (bad samples are left out, never refused or panicking), the
//! queue's `notify` action puts the idle container into the AM's allocate answer
//! (`idleGpuContainers`, once), the busy one is left alone, and the app view shows
//! `gpuUtilization` and `idleGpuSeconds`.

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use support::{fake_nm, start_rm, Rm};

const GPU: &str = "yarn.io/gpu";

fn gpus(n: i64) -> Value {
    json!({"resourceInformation": [{"name": GPU, "value": n}]})
}

async fn post(rm: &Rm, path: &str, body: Value, token: Option<&str>) -> (u16, Value) {
    let mut req = rm.http.post(format!("{}{path}", rm.base)).json(&body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = req.send().await.expect("send");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

fn sample(cid: &str, index: u32, util: Value) -> Value {
    json!({"containerId": cid, "gpus": [{"index": index, "minorNumber": index,
           "utilizationPercent": util, "memoryUsedMiB": 10, "temperatureC": 40.0}]})
}

#[tokio::test]
async fn heartbeat_samples_drive_notify_and_the_app_view() {
    let rm = start_rm(&[
        ("yarn.resource-types", GPU),
        (
            "yarn.scheduler.capacity.root.default.gpu-idle-timeout-ms",
            "300",
        ),
        (
            "yarn.scheduler.capacity.root.default.gpu-idle-action",
            "notify",
        ),
    ])
    .await;
    let (nm, launches) = fake_nm().await;
    let (s, reg) = post(
        &rm,
        "/ws/v1/node-tracker/register",
        json!({"nodeId": nm, "httpAddress": nm, "nmVersion": "t",
               "resource": {"memory": 8192, "vCores": 8, "resourceInformations": gpus(4)}}),
        None,
    )
    .await;
    assert_eq!(s, 200, "{reg}");
    let (_, new_app) = post(&rm, "/ws/v1/cluster/apps/new-application", json!({}), None).await;
    let app = new_app["application-id"].as_str().expect("id").to_string();
    let (s, body) = post(
        &rm,
        "/ws/v1/cluster/apps?user.name=alice",
        json!({"application-id": app, "application-name": "g", "queue": "default",
               "am-container-spec": {"commands": {"command": "./am"}},
               "resource": {"memory": 256, "vCores": 1}}),
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
    let (s, body) = post(
        &rm,
        "/ws/v1/am/register",
        json!({"host": "h"}),
        Some(&token),
    )
    .await;
    assert_eq!(s, 200, "{body}");
    let (s, alloc) = post(
        &rm,
        "/ws/v1/am/allocate",
        json!({"ask": [{"priority": 1, "resourceName": "*", "numContainers": 2,
               "capability": {"memory": 256, "vCores": 1, "resourceInformations": gpus(1)}}]}),
        Some(&token),
    )
    .await;
    assert_eq!(s, 200, "{alloc}");
    let ids: Vec<String> = alloc["allocatedContainers"]
        .as_array()
        .expect("containers")
        .iter()
        .map(|c| c["id"].as_str().expect("id").to_string())
        .collect();
    assert_eq!(ids.len(), 2, "{alloc}");
    let (idle, busy) = (ids[0].clone(), ids[1].clone());
    let running: Vec<Value> = ids
        .iter()
        .map(|c| {
            json!({"containerId": c, "state": "RUNNING", "exitStatus": -1000,
                        "diagnostics": "", "resource": {"memory": 0, "vCores": 0}})
        })
        .collect();

    // Bad samples are left out; the heartbeat itself is answered as usual.
    let bad = json!({"nodeId": nm, "responseId": 0, "nodeStatus": {"healthy": true,
        "containersStatuses": running,
        "containersGpuUtilization": [sample(&idle, 0, json!(150.0)), sample(&busy, 1, json!(-3)),
                                     sample("container_1_0001_01_000099", 2, json!(0))]}});
    let (s, r) = post(&rm, "/ws/v1/node-tracker/heartbeat", bad, None).await;
    assert_eq!(s, 200, "{r}");
    let (_, a) = rm.get(&format!("/ws/v1/cluster/apps/{app}")).await;
    assert!(
        a["app"].get("gpuUtilization").is_none(),
        "nothing valid was sampled: {a}"
    );

    // The idle container reports 0% and the busy one 85% for longer than the timeout.
    let mut notices: Vec<Value> = Vec::new();
    for i in 0..20 {
        let hb = json!({"nodeId": nm, "responseId": i, "nodeStatus": {"healthy": true,
            "containersStatuses": running,
            "containersGpuUtilization": [sample(&idle, 0, json!(0)), sample(&busy, 1, json!(85))]}});
        let (s, r) = post(&rm, "/ws/v1/node-tracker/heartbeat", hb, None).await;
        assert_eq!(s, 200, "{r}");
        let (s, alloc) = post(&rm, "/ws/v1/am/allocate", json!({}), Some(&token)).await;
        assert_eq!(s, 200, "{alloc}");
        notices.extend(
            alloc["idleGpuContainers"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        notices.len(),
        1,
        "told once, the idle one only: {notices:?}"
    );
    assert_eq!(notices[0]["containerId"], idle.as_str());
    assert_eq!(notices[0]["gpus"], 1);
    assert_eq!(notices[0]["gpuUtilization"], 0.0);
    assert!(notices[0]["idleSinceMs"].as_u64().is_some_and(|t| t > 0));

    let (_, a) = rm.get(&format!("/ws/v1/cluster/apps/{app}")).await;
    assert_eq!(a["app"]["gpuUtilization"], 42.5, "{a}");
    assert!(
        a["app"]["idleGpuSeconds"].as_u64().is_some_and(|s| s >= 1),
        "{a}"
    );
    assert_eq!(
        a["app"]["runningContainers"], 3,
        "notify stops nothing: {a}"
    );
    rm.shutdown().await;
}
