//! The YARN-compatible client commands (`application -movetoqueue/-changeQueue/
//! -updatePriority/-updateLifetime/-appTags`, `applicationattempt`, `container`,
//! `node -status`, `queue -list`, `top`, `completion`) run as the real binary against a
//! recording fake RM: what they send (paths, query strings, bodies) and the layout of what
//! they print (YARN's headers, patterns and words).

use std::sync::{Arc, Mutex};

use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use axum::{Json, Router};
use serde_json::{json, Value};
use spindle_common::records::exception::ExceptionKind;

const APP: &str = "application_1_0001";
const ATTEMPT: &str = "appattempt_1_0001_000001";
const AM: &str = "container_1_0001_01_000001";
const WORKER: &str = "container_1_0001_01_000002";

#[derive(Default)]
struct Rec {
    /// `(method path?query, body)` of every request.
    calls: Vec<(String, Value)>,
}

type Shared = Arc<Mutex<Rec>>;

fn remote(kind: ExceptionKind, msg: &str) -> Response {
    let status = StatusCode::from_u16(kind.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, Json(kind.body(msg))).into_response()
}

fn record(s: &Shared, what: String, body: Value) {
    s.lock().unwrap().calls.push((what, body));
}

fn app_json() -> Value {
    json!({"id": APP, "user": "alice", "name": "sleeper", "queue": "default",
           "state": "RUNNING", "finalStatus": "UNDEFINED", "progress": 50.0,
           "applicationType": "DISTRIBUTEDSHELL", "applicationTags": "nightly",
           "priority": 3, "startedTime": 1_000, "runningContainers": 2,
           "allocatedMB": 2048, "allocatedVCores": 2, "memorySeconds": 10240, "vcoreSeconds": 10,
           "trackingUrl": "http://rm:8088/proxy/application_1_0001/", "amRPCAddress": "h:0",
           "timeouts": {"timeout": [{"type": "LIFETIME", "expiryTime": "UNLIMITED",
                                      "remainingTimeInSeconds": -1}]}})
}

async fn apps(State(s): State<Shared>, RawQuery(q): RawQuery) -> Response {
    record(
        &s,
        format!("GET /apps?{}", q.unwrap_or_default()),
        Value::Null,
    );
    Json(json!({"apps": {"app": [app_json()]}})).into_response()
}

async fn app(State(s): State<Shared>, Path(id): Path<String>) -> Response {
    record(&s, format!("GET /apps/{id}"), Value::Null);
    if id != APP {
        return remote(
            ExceptionKind::NotFound,
            &format!("java.lang.Exception: app with id: {id} not found"),
        );
    }
    Json(json!({"app": app_json()})).into_response()
}

async fn put_queue(
    State(s): State<Shared>,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
    Json(body): Json<Value>,
) -> Response {
    record(
        &s,
        format!("PUT /apps/{id}/queue?{}", q.unwrap_or_default()),
        body.clone(),
    );
    if body["queue"] == "nowhere" {
        return remote(
            ExceptionKind::BadRequest,
            "Failed to move application_1_0001 to queue nowhere: no such queue",
        );
    }
    Json(json!({"queue": body["queue"]})).into_response()
}

async fn put_priority(
    State(s): State<Shared>,
    Path(id): Path<String>,
    Json(body): Json<Value>,
) -> Response {
    record(&s, format!("PUT /apps/{id}/priority"), body.clone());
    // Clamped to the cluster's maximum of 10, as the RM does.
    let p = body["priority"].as_i64().unwrap_or(0).clamp(0, 10);
    Json(json!({"priority": p})).into_response()
}

async fn put_timeout(
    State(s): State<Shared>,
    Path(id): Path<String>,
    Json(body): Json<Value>,
) -> Response {
    record(&s, format!("PUT /apps/{id}/timeout"), body.clone());
    let t = &body["timeout"];
    Json(
        json!({"timeout": {"type": t["type"], "expiryTime": t["expiryTime"],
                            "remainingTimeInSeconds": 59}}),
    )
    .into_response()
}

fn attempt_json() -> Value {
    json!({"id": 1, "appAttemptId": ATTEMPT, "appAttemptState": "RUNNING", "containerId": AM,
           "nodeId": "h:1", "nodeHttpAddress": "h:2", "startTime": 1_000,
           "diagnosticsInfo": ""})
}

async fn attempts(State(s): State<Shared>, Path(id): Path<String>) -> Response {
    record(&s, format!("GET /apps/{id}/appattempts"), Value::Null);
    Json(json!({"appAttempts": {"appAttempt": [attempt_json()]}})).into_response()
}

async fn one_attempt(State(s): State<Shared>, Path((id, att)): Path<(String, String)>) -> Response {
    record(&s, format!("GET /apps/{id}/appattempts/{att}"), Value::Null);
    if att != ATTEMPT {
        return remote(ExceptionKind::NotFound, "app attempt not found");
    }
    Json(json!({"appAttempt": attempt_json()})).into_response()
}

fn container_json(id: &str) -> Value {
    json!({"containerId": id, "allocatedMB": 1024, "allocatedVCores": 1,
           "assignedNodeId": "h:1", "priority": 0, "startedTime": 1_709_814_896_789u64,
           "finishedTime": 0, "elapsedTime": 5, "diagnosticsInfo": "", "containerExitStatus": 0,
           "containerState": "RUNNING", "nodeHttpAddress": "http://h:2", "nodeId": "h:1",
           "logUrl": format!("http://h:2/node/containerlogs/{id}/alice")})
}

async fn containers(State(s): State<Shared>, Path((id, att)): Path<(String, String)>) -> Response {
    record(
        &s,
        format!("GET /apps/{id}/appattempts/{att}/containers"),
        Value::Null,
    );
    Json(json!({"containers": {"container": [container_json(WORKER), container_json(AM)]}}))
        .into_response()
}

async fn one_container(
    State(s): State<Shared>,
    Path((id, att, cid)): Path<(String, String, String)>,
) -> Response {
    record(
        &s,
        format!("GET /apps/{id}/appattempts/{att}/containers/{cid}"),
        Value::Null,
    );
    if cid != AM && cid != WORKER {
        return remote(
            ExceptionKind::NotFound,
            &format!("java.lang.Exception: container with id: {cid} not found"),
        );
    }
    Json(json!({"container": container_json(&cid)})).into_response()
}

async fn node(State(s): State<Shared>, Path(id): Path<String>) -> Response {
    record(&s, format!("GET /nodes/{id}"), Value::Null);
    if id != "h:1" {
        return remote(
            ExceptionKind::NotFound,
            &format!("java.lang.Exception: nodeId, {id}, is not found"),
        );
    }
    Json(
        json!({"node": {"id": "h:1", "rack": "/default-rack", "state": "RUNNING",
        "nodeHostName": "h", "nodeHTTPAddress": "h:2", "lastHealthUpdate": 1_709_814_896_789u64,
        "healthReport": "", "numContainers": 2, "nodeLabels": [],
        "usedResource": {"memory": 2048, "vCores": 2},
        "totalResource": {"memory": 8192, "vCores": 8}}}),
    )
    .into_response()
}

async fn scheduler() -> Response {
    let leaf = |name: &str, path: &str, cap: f64| {
        json!({"type": "capacitySchedulerLeafQueueInfo", "queueName": name, "queuePath": path,
               "state": "RUNNING", "capacity": cap, "usedCapacity": 0.0, "maxCapacity": 100.0,
               "weight": -1.0, "maxParallelApps": 2147483647})
    };
    Json(json!({"scheduler": {"schedulerInfo": {
    "type": "capacityScheduler", "capacity": 100.0, "usedCapacity": 0.0, "maxCapacity": 100.0,
    "weight": -1.0, "queueName": "root", "queuePath": "root",
    "queues": {"queue": [
        {"queueName": "eng", "queuePath": "root.eng", "state": "RUNNING", "capacity": 60.0,
         "usedCapacity": 0.0, "maxCapacity": 100.0, "weight": -1.0,
         "maxParallelApps": 2147483647,
         "queues": {"queue": [leaf("a", "root.eng.a", 50.0), leaf("b", "root.eng.b", 50.0)]}},
        leaf("default", "root.default", 40.0)
    ]}}}}))
    .into_response()
}

async fn metrics() -> Response {
    Json(
        json!({"clusterMetrics": {"appsSubmitted": 1, "appsRunning": 1, "totalNodes": 1,
        "activeNodes": 1, "availableMB": 6144, "allocatedMB": 2048, "availableVirtualCores": 6,
        "allocatedVirtualCores": 2, "containersAllocated": 2}}),
    )
    .into_response()
}

async fn info() -> Response {
    Json(json!({"clusterInfo": {"id": 1, "startedOn": 1_000, "state": "STARTED"}})).into_response()
}

async fn serve() -> (Shared, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let shared: Shared = Arc::default();
    let c = "/ws/v1/cluster";
    let router = Router::new()
        .route(&format!("{c}/info"), get(info))
        .route(&format!("{c}/metrics"), get(metrics))
        .route(&format!("{c}/scheduler"), get(scheduler))
        .route(&format!("{c}/apps"), get(apps))
        .route(&format!("{c}/apps/{{id}}"), get(app))
        .route(&format!("{c}/apps/{{id}}/queue"), put(put_queue))
        .route(&format!("{c}/apps/{{id}}/priority"), put(put_priority))
        .route(&format!("{c}/apps/{{id}}/timeout"), put(put_timeout))
        .route(&format!("{c}/apps/{{id}}/appattempts"), get(attempts))
        .route(
            &format!("{c}/apps/{{id}}/appattempts/{{att}}"),
            get(one_attempt),
        )
        .route(
            &format!("{c}/apps/{{id}}/appattempts/{{att}}/containers"),
            get(containers),
        )
        .route(
            &format!("{c}/apps/{{id}}/appattempts/{{att}}/containers/{{cid}}"),
            get(one_container),
        )
        .route(&format!("{c}/nodes/{{id}}"), get(node))
        .with_state(shared.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (shared, addr)
}

async fn spindle(addr: &str, args: &[&str]) -> (i32, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_spindle"))
        .args(args)
        .arg("--rm-address")
        .arg(addr)
        .env_remove("SPINDLE_RM_ADDRESS")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn calls(s: &Shared) -> Vec<(String, Value)> {
    std::mem::take(&mut s.lock().unwrap().calls)
}

#[tokio::test]
async fn application_moves_priorities_lifetimes_and_tag_filters() {
    let (rec, addr) = serve().await;

    // -list with types and tags: sent as the RM's query parameters, named in the header.
    let (code, out, err) = spindle(
        &addr,
        &[
            "application",
            "-list",
            "-appTypes",
            "distributedshell",
            "-appTags",
            "nightly,adhoc",
        ],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "Total number of applications (application-types: [DISTRIBUTEDSHELL], states: [SUBMITTED, ACCEPTED, RUNNING] and tags: [adhoc, nightly]):1"
    );
    assert!(lines[1].trim_start().starts_with("Application-Id\t"));
    assert!(lines[2].trim_start().starts_with(APP));
    let c = calls(&rec);
    assert_eq!(
        c[0].0,
        "GET /apps?states=SUBMITTED%2CACCEPTED%2CRUNNING&applicationTypes=DISTRIBUTEDSHELL&applicationTags=adhoc%2Cnightly"
    );
    // A tag the application does not carry: filtered out (client side too).
    let (_, out, _) = spindle(&addr, &["application", "-list", "-appTags", "weekly"]).await;
    assert!(
        out.lines()
            .next()
            .unwrap()
            .ends_with("and tags: [weekly]):0"),
        "{out}"
    );
    calls(&rec);

    // -movetoqueue APPID -queue Q, and YARN's other spelling.
    let (code, out, err) =
        spindle(&addr, &["application", "-movetoqueue", APP, "-queue", "b"]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        format!("Moving application {APP} to queue b\nSuccessfully completed move.\n")
    );
    let c = calls(&rec);
    assert_eq!(
        c[1].0,
        format!("PUT /apps/{APP}/queue?user.name={}", whoami())
    );
    assert_eq!(c[1].1, json!({"queue": "b"}));
    let (code, out, _) = spindle(&addr, &["application", "-changeQueue", "a", "-appId", APP]).await;
    assert_eq!(code, 0);
    assert!(out.ends_with("Successfully completed move.\n"));
    assert_eq!(calls(&rec)[1].1, json!({"queue": "a"}));
    // The RM's refusal is shown, exit 1.
    let (code, _out, err) = spindle(
        &addr,
        &["application", "-movetoqueue", APP, "-queue", "nowhere"],
    )
    .await;
    assert_eq!(code, 1);
    assert!(err.contains("no such queue"), "{err}");
    // Missing halves are usage errors.
    let (code, _, err) = spindle(&addr, &["application", "-movetoqueue", APP]).await;
    assert_eq!(code, 255);
    assert!(
        err.contains("-movetoqueue APPID needs -queue QUEUE"),
        "{err}"
    );
    let (code, _, err) = spindle(&addr, &["application", "-updatePriority", "3"]).await;
    assert_eq!(code, 255);
    assert!(err.contains("needs -appId APPID"), "{err}");
    calls(&rec);

    // -updatePriority: YARN's two answers.
    let (code, out, _) = spindle(
        &addr,
        &["application", "-updatePriority", "5", "-appId", APP],
    )
    .await;
    assert_eq!(code, 0);
    assert_eq!(
        out,
        format!("Updating priority of an application {APP}\nSuccessfully updated the application {APP} with priority '5'\n")
    );
    assert_eq!(calls(&rec)[0].1, json!({"priority": 5}));
    let (_, out, _) = spindle(
        &addr,
        &["application", "-updatePriority", "50", "-appId", APP],
    )
    .await;
    assert!(out.ends_with(&format!(
        "Updated priority of an application  {APP} to cluster max priority OR keeping old priority as application is in final states\n"
    )));
    let (code, _, err) = spindle(
        &addr,
        &["application", "-updatePriority", "high", "-appId", APP],
    )
    .await;
    assert_eq!(code, 255);
    assert!(
        err.contains("invalid value 'high' for '-updatePriority'"),
        "{err}"
    );
    calls(&rec);

    // -updateLifetime SECONDS: an ISO 8601 expiry about SECONDS from now.
    let before = spindle_common::time::now_ms();
    let (code, out, err) = spindle(
        &addr,
        &["application", "-updateLifetime", "60", "-appId", APP],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let c = calls(&rec);
    assert_eq!(c[0].0, format!("PUT /apps/{APP}/timeout"));
    assert_eq!(c[0].1["timeout"]["type"], "LIFETIME");
    let sent = c[0].1["timeout"]["expiryTime"]
        .as_str()
        .unwrap()
        .to_string();
    let at = spindle_common::time::parse_iso8601(&sent).unwrap();
    assert!(at >= before + 60_000 && at < before + 120_000, "{sent}");
    assert_eq!(
        out,
        format!("Updating timeout for given timeoutType: LIFETIME of an application {APP}\nSuccessfully updated LIFETIME of an application {APP}. New expiry time is {sent}\n")
    );
    let (code, _, err) = spindle(
        &addr,
        &["application", "-updateLifetime", "-5", "-appId", APP],
    )
    .await;
    assert_eq!(code, 255, "{err}");

    // The report shows the timeout line.
    let (_, out, _) = spindle(&addr, &["application", "-status", APP]).await;
    assert!(
        out.contains(
            "\tTimeoutType : LIFETIME\tExpiryTime : UNLIMITED\tRemainingTime : -1seconds\n"
        ),
        "{out}"
    );

    // An unknown application, in YARN's words.
    let (code, _, err) = spindle(
        &addr,
        &[
            "application",
            "-changeQueue",
            "a",
            "-appId",
            "application_1_0009",
        ],
    )
    .await;
    assert_eq!(code, 255);
    assert_eq!(
        err.trim(),
        "Application with id 'application_1_0009' doesn't exist in RM."
    );
}

fn whoami() -> String {
    spindle_appmaster_sdk::address::current_user()
}

#[tokio::test]
async fn attempts_containers_nodes_and_queues_in_yarns_layout() {
    let (rec, addr) = serve().await;

    let (code, out, err) = spindle(&addr, &["applicationattempt", "-list", APP]).await;
    assert_eq!(code, 0, "{err}");
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
            ATTEMPT,
            "RUNNING",
            AM,
            "http://rm:8088/proxy/application_1_0001/"
        ]
    );

    let (code, out, err) = spindle(&addr, &["applicationattempt", "-status", ATTEMPT]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        format!("Application Attempt Report : \n\tApplicationAttempt-Id : {ATTEMPT}\n\tState : RUNNING\n\tAMContainer : {AM}\n\tTracking-URL : http://rm:8088/proxy/application_1_0001/\n\tRPC Port : 0\n\tAM Host : h\n\tDiagnostics : \n")
    );
    let (code, out, _) = spindle(
        &addr,
        &["applicationattempt", "-status", "appattempt_1_0001_000002"],
    )
    .await;
    assert_eq!(code, 255);
    assert_eq!(
        out.trim(),
        "Application Attempt with id 'appattempt_1_0001_000002' doesn't exist in RM or Timeline Server."
    );

    let (code, out, err) = spindle(&addr, &["container", "-list", ATTEMPT]).await;
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "Total number of containers :2");
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
    // Sorted by id: the AM first.
    assert!(lines[2].trim_start().starts_with(AM), "{out}");
    let cols: Vec<&str> = lines[3].split('\t').map(str::trim).collect();
    assert_eq!(cols[0], WORKER);
    assert_eq!(
        cols[1],
        spindle_common::localtime::format_local(1_709_814_896_789)
    );
    assert_eq!(cols[2], "N/A");
    assert_eq!(cols[3], "RUNNING");
    assert_eq!(cols[4], "h:1");
    calls(&rec);

    let (code, out, err) = spindle(&addr, &["container", "-status", WORKER]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with(&format!("Container Report : \n\tContainer-Id : {WORKER}\n\tStart-Time : {}\n\tFinish-Time : N/A\n\tState : RUNNING\n\tExecution-Type : GUARANTEED\n", spindle_common::localtime::format_local(1_709_814_896_789))), "{out}");
    // The attempt is read from the container id.
    assert_eq!(
        calls(&rec)[0].0,
        format!("GET /apps/{APP}/appattempts/{ATTEMPT}/containers/{WORKER}")
    );
    let (code, out, _) = spindle(
        &addr,
        &["container", "-status", "container_1_0001_01_000009"],
    )
    .await;
    assert_eq!(code, 255);
    assert_eq!(
        out.trim(),
        "Container with id 'container_1_0001_01_000009' doesn't exist in RM or Timeline Server."
    );

    let (code, out, err) = spindle(&addr, &["node", "-status", "h:1"]).await;
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "Node Report : ");
    let keys: Vec<&str> = lines[1..]
        .iter()
        .filter_map(|l| l.trim_start().split(" : ").next())
        .collect();
    assert_eq!(
        &keys[..13],
        [
            "Node-Id",
            "Rack",
            "Node-State",
            "Node-Http-Address",
            "Last-Health-Update",
            "Health-Report",
            "Containers",
            "Memory-Used",
            "Memory-Capacity",
            "CPU-Used",
            "CPU-Capacity",
            "Node-Labels",
            "Node Attributes",
        ]
    );
    assert!(
        out.contains("\tMemory-Capacity : 8192MB\n\tCPU-Used : 2 vcores\n"),
        "{out}"
    );
    let (code, out, _) = spindle(&addr, &["node", "-status", "h:9"]).await;
    assert_eq!(code, 255);
    assert_eq!(
        out.trim(),
        "Could not find the node report for node id : h:9"
    );

    let (code, out, err) = spindle(&addr, &["queue", "-list"]).await;
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[1].contains("5 queues were found"), "{out}");
    let first_cells = |l: &str| {
        l.trim_matches('|')
            .split('|')
            .nth(1)
            .unwrap()
            .trim()
            .to_string()
    };
    let paths: Vec<String> = lines[5..lines.len() - 1]
        .iter()
        .map(|l| first_cells(l))
        .collect();
    assert_eq!(
        paths,
        [
            "root",
            "root.eng",
            "root.eng.a",
            "root.eng.b",
            "root.default"
        ]
    );
    let (_, all, _) = spindle(&addr, &["queue", "-list", "all"]).await;
    assert_eq!(all, out);
    let (code, out, _) = spindle(&addr, &["queue", "-list", "eng"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("2 queues were found"), "{out}");
    assert!(
        out.contains(" root.eng.a ") && !out.contains(" root.default "),
        "{out}"
    );
    let (code, out, _) = spindle(&addr, &["queue", "-list", "nope"]).await;
    assert_eq!(code, 255);
    assert_eq!(
        out.trim(),
        "Cannot get any queues under nope from RM,please check."
    );
}

#[tokio::test]
async fn top_prints_one_frame_when_stdout_is_not_a_terminal() {
    let (rec, addr) = serve().await;
    let (code, out, err) = spindle(&addr, &["top", "-delay", "1"]).await;
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("Spindle top - "), "{out}");
    assert!(
        lines[0].ends_with(" 1 active users, queue(s): root"),
        "{out}"
    );
    assert_eq!(
        lines[1],
        "NodeManager(s): 1 total, 1 active, 0 unhealthy, 0 decommissioned, 0 lost, 0 rebooted"
    );
    assert!(lines[2].starts_with("Queue(s) Applications: 1 running, 1 submitted"));
    assert_eq!(
        lines[3],
        "Queue(s) Mem(GB): 6 available, 2 allocated, 0 pending, 0 reserved"
    );
    assert_eq!(
        lines[4],
        "Queue(s) VCores: 6 available, 2 allocated, 0 pending, 0 reserved"
    );
    assert_eq!(
        lines[5],
        "Queue(s) GPUs: 0 used, 0 free, 0 reserved of 0 total"
    );
    assert_eq!(lines[6], "Queue(s) GPUs held by queue: default 0");
    assert_eq!(
        lines[7],
        "Queue(s) Containers: 2 allocated, 0 pending, 0 reserved"
    );
    assert_eq!(lines[8], "");
    assert!(
        lines[9].trim_start().starts_with("APPLICATIONID USER"),
        "{out}"
    );
    let cols: Vec<&str> = lines[10].split_whitespace().collect();
    assert_eq!(
        &cols[..6],
        [APP, "alice", "distributedshell", "default", "3", "2"]
    );
    assert_eq!(lines.len(), 11);
    // Running and accepted applications were asked for.
    assert!(calls(&rec)
        .iter()
        .any(|(c, _)| c == "GET /apps?states=ACCEPTED%2CRUNNING"));
    let (code, _, err) = spindle(&addr, &["top", "-delay", "0"]).await;
    assert_eq!(code, 255);
    assert!(err.contains("at least 1 second"), "{err}");
}

#[tokio::test]
async fn completion_scripts_name_every_command_and_option() {
    for shell in ["bash", "zsh", "fish"] {
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_spindle"))
            .args(["completion", shell])
            .output()
            .await
            .unwrap();
        assert!(out.status.success(), "{shell}");
        let script = String::from_utf8(out.stdout).unwrap();
        for c in spindle::cli::completion::COMMANDS {
            assert!(script.contains(c.name), "{shell}: {}", c.name);
            for w in spindle::cli::completion::option_words(c) {
                let w = w.trim_start_matches('-');
                assert!(script.contains(w), "{shell}: {} -{w}", c.name);
            }
        }
        for opt in [
            "movetoqueue",
            "changeQueue",
            "updateLifetime",
            "appTags",
            "delay",
        ] {
            assert!(script.contains(opt), "{shell}: {opt}");
        }
    }
    // bash can read the script; it completes commands and options.
    let script = tokio::process::Command::new(env!("CARGO_BIN_EXE_spindle"))
        .args(["completion", "bash"])
        .output()
        .await
        .unwrap()
        .stdout;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spindle.bash");
    std::fs::write(&path, script).unwrap();
    let probe = format!(
        "source {}; COMP_WORDS=(spindle application -upd); COMP_CWORD=2; _spindle; echo \"${{COMPREPLY[*]}}\"; COMP_WORDS=(spindle applicationa); COMP_CWORD=1; _spindle; echo \"${{COMPREPLY[*]}}\"",
        path.display()
    );
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(probe)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "-updatePriority -updateLifetime\napplicationattempt\n"
    );
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_spindle"))
        .args(["completion", "tcsh"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(255));
}

/// `top` on a terminal (a pseudo-terminal from util-linux's `script`): it redraws every
/// `-delay` seconds and quits on `q`.
#[tokio::test]
async fn top_refreshes_on_a_terminal_and_quits_on_q() {
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        spindle_test_support::require::skip(
            "top_refreshes_on_a_terminal_and_quits_on_q",
            "util-linux `script` (for a pseudo-terminal) is not installed",
        );
        return;
    }
    let (_rec, addr) = serve().await;
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("top.out");
    let cmd = format!(
        "{} top -delay 1 --rm-address {addr}",
        env!("CARGO_BIN_EXE_spindle")
    );
    let mut child = std::process::Command::new("script")
        .args(["-qfec", &cmd, "/dev/null"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let frames = |p: &std::path::Path| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .matches("Spindle top - ")
            .count()
    };
    let start = std::time::Instant::now();
    while frames(&out_path) < 2 {
        if start.elapsed() > std::time::Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "no second frame within 20 s:\n{}",
                std::fs::read_to_string(&out_path).unwrap_or_default()
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    {
        use std::io::Write;
        let stdin = child.stdin.as_mut().unwrap();
        stdin.write_all(b"q").unwrap();
        stdin.flush().unwrap();
    }
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > std::time::Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("top did not quit on q");
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert!(status.success());
    let text = std::fs::read_to_string(&out_path).unwrap();
    // Drawn in place (cursor home, lines cleared), the header in reverse video, and the
    // screen cleared on the way out.
    assert!(text.contains("\x1b[H\x1b[2KSpindle top - "), "{text:?}");
    assert!(text.contains("\x1b[7m"), "{text:?}");
    assert!(text.contains(APP), "{text:?}");
    assert!(text.ends_with("\x1b[2J\x1b[H"), "{text:?}");
}
