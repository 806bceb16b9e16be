//! Integration test: the RM in-process on an ephemeral port, driven over real HTTP as a YARN
//! client, an NM and an AM would. The NM side is a tiny HTTP server in the test that accepts
//! AM launches (a fake at the network boundary, `support::fake_nm`), so every RM path runs for
//! real.

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use spindle_common::config::Configuration;
use spindle_resourcemanager::config::RmConfig;
use support::{fake_nm, start_rm, Rm};

/// This file's requests: a JSON body, an optional bearer token, and the `Location` answered.
impl Rm {
    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Value,
        token: Option<&str>,
    ) -> (u16, Value, Option<String>) {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .json(&body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let r = req.send().await.expect("send");
        let status = r.status().as_u16();
        let loc = r
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        (status, r.json().await.unwrap_or(Value::Null), loc)
    }
    async fn post(&self, path: &str, body: Value) -> (u16, Value, Option<String>) {
        self.send(reqwest::Method::POST, path, body, None).await
    }
}

fn assert_remote_exception(body: &Value, exception: &str) {
    let re = &body["RemoteException"];
    assert_eq!(re["exception"], exception, "{body}");
    assert!(
        re["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    assert!(
        re["javaClassName"]
            .as_str()
            .is_some_and(|m| m.contains('.')),
        "{body}"
    );
}

async fn wait_for<F: Fn() -> bool>(f: F) {
    for _ in 0..100 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("condition not met within 2 s");
}

fn container_report(id: &str, state: &str, exit: i32) -> Value {
    json!({"containerId": id, "state": state, "exitStatus": exit, "diagnostics": "", "resource": {"memory": 0, "vCores": 0}})
}

#[tokio::test]
async fn a_yarn_client_an_nm_and_an_am_drive_the_rm() {
    let rm = start_rm(&[
        ("yarn.nm.liveness-monitor.expiry-interval-ms", "1500"),
        (
            "yarn.resourcemanager.nodemanagers.heartbeat-interval-ms",
            "100",
        ),
    ])
    .await;
    let (status, info) = rm.get("/ws/v1/cluster/info").await;
    assert_eq!(status, 200);
    assert_eq!(info["clusterInfo"]["state"], "STARTED");
    assert_eq!(info["clusterInfo"]["haState"], "ACTIVE");
    let (_, apps) = rm.get("/ws/v1/cluster/apps").await;
    assert_eq!(
        apps,
        json!({"apps": null}),
        "YARN answers null when there are no apps"
    );

    // An NM registers.
    let (nm_addr, launches) = fake_nm().await;
    let (status, reg, _) = rm
        .post("/ws/v1/node-tracker/register", json!({"nodeId": nm_addr, "httpAddress": nm_addr, "resource": {"memory": 4096, "vCores": 4}, "nmVersion": "t"}))
        .await;
    assert_eq!(status, 200, "{reg}");
    assert_eq!(reg["nodeAction"], "NORMAL");
    // No cluster secret here (compatibility mode): the container-token master key goes
    // unwrapped, saying so; never the AM-RM key.
    let key = &reg["containerTokenMasterKey"];
    assert!(key["keyId"].is_u64(), "{reg}");
    assert_eq!(key["unwrapped"], true, "{reg}");
    assert!(
        key["bytes"].as_str().is_some_and(|s| s.len() >= 32),
        "{reg}"
    );
    assert!(reg.get("containerTokenSecret").is_none(), "{reg}");
    let (_, nodes) = rm.get("/ws/v1/cluster/nodes").await;
    assert_eq!(nodes["nodes"]["node"][0]["state"], "RUNNING");
    assert_eq!(nodes["nodes"]["node"][0]["availMemoryMB"], 4096);

    // A client submits, as to YARN.
    let (status, new_app, _) = rm
        .post("/ws/v1/cluster/apps/new-application", json!({}))
        .await;
    assert_eq!(status, 200);
    let app_id = new_app["application-id"].as_str().expect("id").to_string();
    assert!(app_id.starts_with("application_"));
    // YARN's rule: the configured maximum (8192), capped by the largest registered node.
    assert_eq!(new_app["maximum-resource-capability"]["memory"], 4096);
    let ctx = json!({
        "application-id": app_id, "application-name": "ds", "queue": "default", "application-type": "DISTRIBUTEDSHELL",
        "am-container-spec": {"commands": {"command": "./am"}, "environment": {"entry": [{"key": "A", "value": "1"}]}},
        "resource": {"memory": 256, "vCores": 1}, "application-tags": {"tag": ["x", "y"]}
    });
    let (status, _, loc) = rm
        .send(
            reqwest::Method::POST,
            "/ws/v1/cluster/apps?user.name=alice",
            ctx.clone(),
            None,
        )
        .await;
    assert_eq!(status, 202);
    assert!(loc
        .expect("Location")
        .ends_with(&format!("/ws/v1/cluster/apps/{app_id}")));
    // The same id submitted by another user (dr.who) is another submission: a conflict.
    let (status, dup, _) = rm.post("/ws/v1/cluster/apps", ctx).await;
    assert_eq!(status, 409, "{dup}");
    assert_remote_exception(&dup, "YarnException");
    assert!(dup.to_string().contains("user differs"), "{dup}");

    // The RM launched the AM at once, with what it needs to reach the RM.
    wait_for(|| !launches.lock().expect("lock").is_empty()).await;
    let launch = launches.lock().expect("lock")[0].clone();
    let env = &launch.start_container_request[0]
        .container_launch_context
        .environment;
    let token = env["SPINDLE_AMRM_TOKEN"].clone();
    assert_eq!(env["A"], "1");
    assert!(env["SPINDLE_RM_ADDRESS"].starts_with("http://127.0.0.1:"));
    let (_, app) = rm.get(&format!("/ws/v1/cluster/apps/{app_id}")).await;
    assert_eq!(app["app"]["state"], "ACCEPTED");
    assert_eq!(app["app"]["user"], "alice");
    assert_eq!(app["app"]["applicationTags"], "x,y");
    let attempts = rm
        .get(&format!("/ws/v1/cluster/apps/{app_id}/appattempts"))
        .await
        .1;
    let am_cid = attempts["appAttempts"]["appAttempt"][0]["containerId"]
        .as_str()
        .expect("am cid")
        .to_string();
    let attempt_id = attempts["appAttempts"]["appAttempt"][0]["appAttemptId"]
        .as_str()
        .expect("attempt")
        .to_string();
    assert_eq!(attempts["appAttempts"]["appAttempt"][0]["id"], 1);

    // AM protocol: a bad token is refused; register; ask; containers come in the reply.
    let (status, body, _) = rm
        .send(
            reqwest::Method::POST,
            "/ws/v1/am/register",
            json!({"host": "h"}),
            Some("nope.00"),
        )
        .await;
    assert_eq!(status, 401);
    assert_remote_exception(&body, "AuthorizationException");
    let (status, body, _) = rm
        .send(
            reqwest::Method::POST,
            "/ws/v1/am/allocate",
            json!({}),
            Some(&token),
        )
        .await;
    assert_eq!(status, 409, "allocate before register: {body}");
    let hb = |containers: Vec<Value>| json!({"nodeId": nm_addr, "responseId": 0, "nodeStatus": {"healthy": true, "containersStatuses": containers}});
    rm.post(
        "/ws/v1/node-tracker/heartbeat",
        hb(vec![container_report(&am_cid, "RUNNING", -1000)]),
    )
    .await;
    let (status, reg, _) = rm
        .send(
            reqwest::Method::POST,
            "/ws/v1/am/register",
            json!({"host": "h", "rpcPort": 1, "trackingUrl": ""}),
            Some(&token),
        )
        .await;
    assert_eq!(status, 200, "{reg}");
    assert_eq!(reg["queue"], "root.default");
    let ask = json!({"ask": [{"priority": 1, "resourceName": "*", "capability": {"memory": 512, "vCores": 1}, "numContainers": 2, "relaxLocality": true}]});
    let (status, alloc, _) = rm
        .send(
            reqwest::Method::POST,
            "/ws/v1/am/allocate",
            ask,
            Some(&token),
        )
        .await;
    assert_eq!(status, 200, "{alloc}");
    let got = alloc["allocatedContainers"]
        .as_array()
        .expect("list")
        .clone();
    assert_eq!(got.len(), 2, "the ask is served in the same call: {alloc}");
    assert!(got[0]["containerToken"]
        .as_str()
        .is_some_and(|t| t.contains('.')));
    let (_, app) = rm.get(&format!("/ws/v1/cluster/apps/{app_id}")).await;
    assert_eq!(app["app"]["state"], "RUNNING");
    assert_eq!(app["app"]["runningContainers"], 3);
    assert_eq!(app["app"]["allocatedMB"], 256 + 1024);
    let (_, cs) = rm
        .get(&format!(
            "/ws/v1/cluster/apps/{app_id}/appattempts/{attempt_id}/containers"
        ))
        .await;
    assert_eq!(
        cs["containers"]["container"].as_array().map(Vec::len),
        Some(3)
    );
    let (status, bad, _) = rm
        .send(reqwest::Method::POST, "/ws/v1/am/allocate", json!({"ask": [{"priority": 1, "resourceName": "*", "capability": {"memory": 999999, "vCores": 1}, "numContainers": 1}]}), Some(&token))
        .await;
    assert_eq!(status, 400);
    assert!(bad["RemoteException"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("maximum allowed allocation")));

    // Workers finish; the AM hears of it; the AM finishes.
    let w0 = got[0]["id"].as_str().expect("id").to_string();
    let w1 = got[1]["id"].as_str().expect("id").to_string();
    let (_, r, _) = rm
        .post(
            "/ws/v1/node-tracker/heartbeat",
            hb(vec![
                container_report(&am_cid, "RUNNING", -1000),
                container_report(&w0, "COMPLETE", 0),
                container_report(&w1, "COMPLETE", 3),
            ]),
        )
        .await;
    // The NM keeps them until the AM has acknowledged them.
    assert_eq!(
        r["containersToBeRemovedFromNm"].as_array().map(Vec::len),
        Some(0)
    );
    let (_, alloc, _) = rm
        .send(
            reqwest::Method::POST,
            "/ws/v1/am/allocate",
            json!({"progress": 1.0}),
            Some(&token),
        )
        .await;
    let done = alloc["completedContainerStatuses"]
        .as_array()
        .expect("list");
    assert_eq!(done.len(), 2);
    assert!(done.iter().any(|s| s["exitStatus"] == 3));
    // The next allocate acknowledges them: the NM's next report of them is answered with
    // their removal.
    let (_, again, _) = rm
        .send(
            reqwest::Method::POST,
            "/ws/v1/am/allocate",
            json!({"progress": 1.0}),
            Some(&token),
        )
        .await;
    assert_eq!(
        again["completedContainerStatuses"]
            .as_array()
            .map(Vec::len)
            .unwrap_or(0),
        0
    );
    let (_, r, _) = rm
        .post(
            "/ws/v1/node-tracker/heartbeat",
            hb(vec![
                container_report(&am_cid, "RUNNING", -1000),
                container_report(&w0, "COMPLETE", 0),
                container_report(&w1, "COMPLETE", 3),
            ]),
        )
        .await;
    assert_eq!(
        r["containersToBeRemovedFromNm"].as_array().map(Vec::len),
        Some(2)
    );
    let (status, _, _) = rm
        .send(
            reqwest::Method::POST,
            "/ws/v1/am/finish",
            json!({"finalApplicationStatus": "SUCCEEDED", "diagnostics": "ok"}),
            Some(&token),
        )
        .await;
    assert_eq!(status, 200);
    let (_, app) = rm.get(&format!("/ws/v1/cluster/apps/{app_id}")).await;
    assert_eq!(app["app"]["state"], "FINISHED");
    assert_eq!(app["app"]["finalStatus"], "SUCCEEDED");
    assert_eq!(app["app"]["trackingUI"], "History");
    assert!(app["app"]["amContainerLogs"]
        .as_str()
        .is_some_and(|l| l.contains("/node/containerlogs/")));
    // The AM process exits after unregistering, and its NM says so: the queue's AM slot is free.
    rm.post(
        "/ws/v1/node-tracker/heartbeat",
        hb(vec![container_report(&am_cid, "COMPLETE", 0)]),
    )
    .await;

    // Filters.
    for (q, n) in [
        ("states=FINISHED", 1),
        ("states=running,accepted", 0),
        ("finalStatus=SUCCEEDED", 1),
        ("user=alice", 1),
        ("user=bob", 0),
        ("applicationTypes=distributedshell", 1),
        ("applicationTags=y", 1),
        ("applicationTags=z", 0),
        ("name=ds", 1),
        ("limit=1", 1),
        ("startedTimeBegin=0&startedTimeEnd=1", 0),
        ("finishedTimeBegin=1", 1),
    ] {
        let (status, body) = rm.get(&format!("/ws/v1/cluster/apps?{q}")).await;
        assert_eq!(status, 200, "{q}");
        let got = body["apps"]["app"].as_array().map(Vec::len).unwrap_or(0);
        assert_eq!(got, n, "{q}: {body}");
    }
    for q in [
        "states=BOGUS",
        "limit=0",
        "finalStatus=X",
        "startedTimeBegin=5&startedTimeEnd=1",
        "startedTimeBegin=-1",
    ] {
        let (status, body) = rm.get(&format!("/ws/v1/cluster/apps?{q}")).await;
        assert_eq!(status, 400, "{q}");
        assert_remote_exception(&body, "BadRequestException");
    }
    let (status, stats) = rm
        .get("/ws/v1/cluster/appstatistics?states=FINISHED,RUNNING")
        .await;
    assert_eq!(status, 200);
    assert_eq!(stats["appStatInfo"]["statItem"][0]["count"], 1);
    assert_eq!(
        rm.get("/ws/v1/cluster/appstatistics?applicationTypes=a,b")
            .await
            .0,
        400
    );

    // Errors: unknown id 404, malformed id 400, malformed body 400, non-KILLED target 400.
    let (status, body) = rm.get("/ws/v1/cluster/apps/application_1_9999").await;
    assert_eq!(status, 404);
    assert_remote_exception(&body, "NotFoundException");
    let (status, body) = rm.get("/ws/v1/cluster/apps/garbage").await;
    assert_eq!(status, 400);
    assert_remote_exception(&body, "BadRequestException");
    let r = rm
        .http
        .post(format!("{}/ws/v1/cluster/apps", rm.base))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .expect("post");
    assert_eq!(r.status().as_u16(), 400);
    assert_remote_exception(&r.json().await.expect("json"), "BadRequestException");
    let (status, body, _) = rm
        .send(
            reqwest::Method::PUT,
            &format!("/ws/v1/cluster/apps/{app_id}/state"),
            json!({"state": "RUNNING"}),
            None,
        )
        .await;
    assert_eq!(status, 400);
    assert_eq!(
        body["RemoteException"]["message"],
        "Only 'KILLED' is allowed as a target state."
    );
    assert_eq!(rm.get("/ws/v1/cluster/nodes/nohost:1").await.0, 404);
    assert_eq!(
        rm.get(
            "/ws/v1/cluster/apps/{app_id}/queue"
                .replace("{app_id}", &app_id)
                .as_str()
        )
        .await
        .1,
        json!({"queue": "default"})
    );

    // Kill a running application: 202 while its AM is stopped, then 200 KILLED.
    let (_, new_app, _) = rm
        .post("/ws/v1/cluster/apps/new-application", json!({}))
        .await;
    let id2 = new_app["application-id"].as_str().expect("id").to_string();
    rm.post("/ws/v1/cluster/apps", json!({"application-id": id2, "am-container-spec": {"commands": {"command": "sleep 100"}}, "resource": {"memory": 256, "vCores": 1}})).await;
    wait_for(|| launches.lock().expect("lock").len() >= 2).await;
    let atts = rm
        .get(&format!("/ws/v1/cluster/apps/{id2}/appattempts"))
        .await
        .1;
    let am2 = atts["appAttempts"]["appAttempt"][0]["containerId"]
        .as_str()
        .expect("cid")
        .to_string();
    rm.post(
        "/ws/v1/node-tracker/heartbeat",
        hb(vec![container_report(&am2, "RUNNING", -1000)]),
    )
    .await;
    let (status, body, _) = rm
        .send(
            reqwest::Method::PUT,
            &format!("/ws/v1/cluster/apps/{id2}/state"),
            json!({"state": "KILLED"}),
            None,
        )
        .await;
    assert_eq!((status, body), (202, json!({"state": "ACCEPTED"})));
    let (_, r, _) = rm
        .post(
            "/ws/v1/node-tracker/heartbeat",
            hb(vec![container_report(&am2, "RUNNING", -1000)]),
        )
        .await;
    assert_eq!(r["containersToCleanup"][0], am2.as_str());
    rm.post(
        "/ws/v1/node-tracker/heartbeat",
        hb(vec![container_report(&am2, "COMPLETE", -106)]),
    )
    .await;
    let (status, body, _) = rm
        .send(
            reqwest::Method::PUT,
            &format!("/ws/v1/cluster/apps/{id2}/state"),
            json!({"state": "KILLED"}),
            None,
        )
        .await;
    assert_eq!((status, body), (200, json!({"state": "KILLED"})));
    let m = rm.get("/ws/v1/cluster/metrics").await.1;
    assert_eq!(m["clusterMetrics"]["appsKilled"], 1);
    assert_eq!(m["clusterMetrics"]["appsCompleted"], 2);
    assert_eq!(m["clusterMetrics"]["activeNodes"], 1);

    // The scheduler view has YARN's shape.
    let (_, sched) = rm.get("/ws/v1/cluster/scheduler").await;
    let info = &sched["scheduler"]["schedulerInfo"];
    assert_eq!(info["type"], "capacityScheduler");
    assert_eq!(
        info["queues"]["queue"][0]["type"],
        "capacitySchedulerLeafQueueInfo"
    );
    assert_eq!(info["queues"]["queue"][0]["queuePath"], "root.default");

    // The UI page existing clients probe, and Prometheus metrics.
    let r = rm
        .http
        .get(format!("{}/cluster", rm.base))
        .send()
        .await
        .expect("ui");
    assert_eq!(r.status().as_u16(), 200);
    assert!(r.text().await.expect("text").contains("<table"));
    let text = rm
        .http
        .get(format!("{}/metrics", rm.base))
        .send()
        .await
        .expect("m")
        .text()
        .await
        .expect("t");
    assert!(text.contains("spindle_rm_apps_submitted_total 2"));

    // The silent node is LOST after the expiry interval.
    tokio::time::sleep(Duration::from_millis(1800)).await;
    let (_, lost) = rm.get("/ws/v1/cluster/nodes?states=LOST").await;
    assert_eq!(lost["nodes"]["node"][0]["id"], nm_addr.as_str());
    let (_, r, _) = rm.post("/ws/v1/node-tracker/heartbeat", hb(vec![])).await;
    assert_eq!(r["nodeAction"], "RESYNC");
}

#[tokio::test]
async fn submissions_to_bad_queues_fail_as_yarn_does() {
    let rm = start_rm(&[]).await;
    let (_, new_app, _) = rm
        .post("/ws/v1/cluster/apps/new-application", json!({}))
        .await;
    let id = new_app["application-id"].as_str().expect("id").to_string();
    let (status, _, _) = rm
        .post("/ws/v1/cluster/apps", json!({"application-id": id, "queue": "nosuch", "am-container-spec": {"commands": {"command": "true"}}}))
        .await;
    assert_eq!(status, 202);
    let (_, app) = rm.get(&format!("/ws/v1/cluster/apps/{id}")).await;
    assert_eq!(app["app"]["state"], "FAILED");
    assert!(app["app"]["diagnostics"]
        .as_str()
        .is_some_and(|d| d.contains("unknown queue: nosuch")));
    // An id that was never issued is refused.
    let (status, body, _) = rm
        .post("/ws/v1/cluster/apps", json!({"application-id": "application_1_0001", "am-container-spec": {"commands": {"command": "true"}}}))
        .await;
    assert_eq!(status, 400, "{body}");
}

#[tokio::test]
async fn a_restarted_rm_recovers_every_application() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("rm.sqlite").display().to_string();
    let boot = |store: String| async move {
        let mut conf = Configuration::new();
        conf.set("spindle.resourcemanager.state-store.path", &store);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let (rm, serve) = spindle_resourcemanager::daemon::start(
            listener,
            RmConfig::from_conf(&conf).expect("conf"),
        )
        .await
        .expect("start");
        let server = tokio::spawn(serve(Box::pin(std::future::pending())));
        (format!("http://{}", rm.addr), rm, server)
    };
    let http = reqwest::Client::new();
    let (base, rm, server) = boot(store.clone()).await;
    let mut ids = vec![];
    for queue in ["default", "nosuch"] {
        let v: Value = http
            .post(format!("{base}/ws/v1/cluster/apps/new-application"))
            .send()
            .await
            .expect("new")
            .json()
            .await
            .expect("json");
        let id = v["application-id"].as_str().expect("id").to_string();
        let r = http
            .post(format!("{base}/ws/v1/cluster/apps"))
            .json(&json!({"application-id": id, "queue": queue, "am-container-spec": {"commands": {"command": "sleep 1"}}}))
            .send()
            .await
            .expect("submit");
        assert_eq!(r.status().as_u16(), 202);
        ids.push(id);
    }
    server.abort();
    drop(rm);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (base, _rm, _server) = boot(store).await;
    let v: Value = http
        .get(format!("{base}/ws/v1/cluster/apps"))
        .send()
        .await
        .expect("apps")
        .json()
        .await
        .expect("json");
    let apps = v["apps"]["app"]
        .as_array()
        .expect("apps survive a restart")
        .clone();
    assert_eq!(apps.len(), 2);
    let by_id = |id: &str| apps.iter().find(|a| a["id"] == id).cloned().expect("app");
    assert_eq!(
        by_id(&ids[0])["state"],
        "ACCEPTED",
        "the unfinished app waits for a new attempt"
    );
    assert_eq!(by_id(&ids[1])["state"], "FAILED", "the final state is kept");
    let v: Value = http
        .get(format!("{base}/ws/v1/cluster/apps/{}/appattempts", ids[0]))
        .send()
        .await
        .expect("att")
        .json()
        .await
        .expect("json");
    assert_eq!(
        v["appAttempts"]["appAttempt"].as_array().map(Vec::len),
        Some(1),
        "no NM ran its AM: the attempt that waited for its AM container is started again under \
         its own number, not counted as failed (YARN stores an attempt once its AM container \
         is allocated)"
    );
}

/// `POST /apps` is idempotent by application id (a client resends a submission whose answer
/// was lost in a failover): the same one twice is one application, a different one under the
/// same id is a 409 naming the field.
#[tokio::test]
async fn the_same_submission_twice_is_one_application_and_another_is_a_conflict() {
    let rm = start_rm(&[]).await;
    let (_, new_app, _) = rm
        .post("/ws/v1/cluster/apps/new-application", json!({}))
        .await;
    let id = new_app["application-id"].as_str().expect("id").to_string();
    let body = |command: &str| {
        json!({"application-id": id, "application-name": "twice",
            "am-container-spec": {"commands": {"command": command}},
            "resource": {"memory": 1024, "vCores": 1}})
    };
    for _ in 0..2 {
        let (status, b, _) = rm.post("/ws/v1/cluster/apps", body("sleep 60")).await;
        assert_eq!(status, 202, "{b}");
    }
    let (_, apps) = rm.get("/ws/v1/cluster/apps").await;
    let listed = apps["apps"]["app"].as_array().expect("apps");
    assert_eq!(listed.len(), 1, "{apps}");
    let (status, b, _) = rm.post("/ws/v1/cluster/apps", body("sleep 61")).await;
    assert_eq!(status, 409, "{b}");
    assert_remote_exception(&b, "YarnException");
    let message = b["RemoteException"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("am-container-spec differs"), "{message}");
}
