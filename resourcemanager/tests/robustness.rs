//! Robustness: hostile requests against every RM operation in `docs/openapi.yaml`.
//!
//! The rule under test: no request may panic the RM or corrupt its state, and every REST
//! error is a YARN `RemoteException` body with the right status (400 bad input, 401/403,
//! 404 unknown id, 405/409 wrong method or state; 500 only for real bugs).
//!
//! The RM runs in-process on 127.0.0.1:0 with a fake NM at the network boundary (both from
//! `support`, as in `rest_api.rs`). Before the barrage the test makes a sentinel application
//! A (AM launched, named by no hostile request except the semantic attacks aimed at it) and a
//! victim B (AM registered; the AM-protocol requests carry its token). The barrage is built from the
//! spec: for every RM path and method, hostile path parameters, query strings, bodies
//! (generic ones and wrong-typed values for each field of the operation's request schema),
//! content types, `Accept`, bearer tokens, wrong methods and path shapes; then hand-written
//! semantic attacks (forged tokens for A, B releasing A's container, absurd asks, a rogue
//! node claiming A's AM container, absurd node sizes, hostile submissions and scheduler
//! mutations, bodies past the 2 MiB limit). Requests go over raw TCP (paths are sent
//! verbatim; a dropped connection shows as one), 8 at a time.
//!
//! Each answer must come (no hang, no dropped connection), must not be a 5xx other than a
//! 503 the spec lists, must carry a status the spec lists for the operation (or the router's
//! fallback 404, or 405 for a wrong method), must be the status the request class calls for
//! where there is one (401 for a bad token, 400 for unreadable JSON, 4xx for a garbage id),
//! and, when it is an error on a REST path, must be a `RemoteException` body. After the
//! barrage the RM must still serve normal requests, A must be unchanged, no application or
//! node may exist that the test did not make, and no thread may have panicked.
//!
//! The daemon-independent half (spec reading, raw client, catalogues, checks) is
//! `spindle_test_support::contract::robust`, shared with `nodemanager/tests/robustness.rs`; this
//! file holds what is the RM's own.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use spindle_common::ids::ApplicationAttemptId;
use spindle_common::token::{issue_amrm_token, TokenSecret};
use spindle_test_support::contract::fill_with;
use spindle_test_support::contract::robust::{
    self, daemon_panics, op_index, record_panics, run_barrage, spec_cases, spec_ops, Case, Daemon,
    Expect, Kind, Op, Req,
};
use support::{fake_nm, start_rm, Launches, Rm};

const DAEMON: &str = "rm";
/// The start of the message of the router's fallback 404.
const FALLBACK_PREFIX: &str = "java.lang.Exception: no resource at";
/// The test threads of this file (their panics are assertion failures, not daemon panics).
const TEST_NAMES: &[&str] = &[
    "every_rm_operation_survives_hostile_requests",
    "the_spec_reader_finds_queries_and_bodies",
];

// ====================================================================== the RM

/// This file's requests: an optional JSON body and an optional bearer token.
impl Rm {
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
        token: Option<&str>,
    ) -> (u16, Value) {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(b) = body {
            req = req.json(&b);
        }
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let r = req.send().await.unwrap_or_else(|e| panic!("{path}: {e}"));
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }
    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.call(reqwest::Method::POST, path, Some(body), None)
            .await
    }
    async fn new_app_id(&self) -> String {
        let (status, v) = self
            .post("/ws/v1/cluster/apps/new-application", json!({}))
            .await;
        assert_eq!(status, 200, "{v}");
        v["application-id"].as_str().expect("id").to_string()
    }
}

/// An application whose AM the fake NM was asked to launch.
struct Launched {
    id: String,
    attempt: String,
    am_container: String,
    token: String,
}

async fn submit_and_launch(rm: &Rm, launches: &Launches, name: &str) -> Launched {
    let id = rm.new_app_id().await;
    let (status, body) = rm
        .call(
            reqwest::Method::POST,
            "/ws/v1/cluster/apps?user.name=alice",
            Some(json!({
                "application-id": id, "application-name": name, "queue": "default",
                "am-container-spec": {"commands": {"command": "sleep 1000"}},
                "resource": {"memory": 256, "vCores": 1}, "application-tags": {"tag": [name]}
            })),
            None,
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let found = launches.lock().expect("lock").iter().find_map(|l| {
            let env = &l.start_container_request[0]
                .container_launch_context
                .environment;
            let attempt = env.get("SPINDLE_APPLICATION_ATTEMPT_ID")?.clone();
            let a: ApplicationAttemptId = attempt.parse().ok()?;
            (a.application_id.to_string() == id)
                .then(|| (attempt, env["SPINDLE_AMRM_TOKEN"].clone()))
        });
        if let Some((attempt, token)) = found {
            let (_, atts) = rm
                .get(&format!("/ws/v1/cluster/apps/{id}/appattempts"))
                .await;
            let am_container = atts["appAttempts"]["appAttempt"][0]["containerId"]
                .as_str()
                .expect("AM container")
                .to_string();
            return Launched {
                id,
                attempt,
                am_container,
                token,
            };
        }
        assert!(
            Instant::now() < deadline,
            "the AM of {name} was not launched"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The parts of an application's report that no request of the barrage may change.
async fn fingerprint(rm: &Rm, id: &str) -> Value {
    let (s, app) = rm.get(&format!("/ws/v1/cluster/apps/{id}")).await;
    assert_eq!(s, 200, "{app}");
    let a = &app["app"];
    let mut keep = serde_json::Map::new();
    for k in [
        "id",
        "user",
        "name",
        "queue",
        "state",
        "finalStatus",
        "progress",
        "trackingUI",
        "diagnostics",
        "applicationType",
        "applicationTags",
        "priority",
        "startedTime",
        "launchTime",
        "finishedTime",
        "amContainerLogs",
        "amHostHttpAddress",
        "amRPCAddress",
        "masterNodeId",
        "allocatedMB",
        "allocatedVCores",
        "runningContainers",
    ] {
        keep.insert(k.to_string(), a[k].clone());
    }
    let (_, atts) = rm
        .get(&format!("/ws/v1/cluster/apps/{id}/appattempts"))
        .await;
    let (_, state) = rm.get(&format!("/ws/v1/cluster/apps/{id}/state")).await;
    let (_, queue) = rm.get(&format!("/ws/v1/cluster/apps/{id}/queue")).await;
    let (_, prio) = rm.get(&format!("/ws/v1/cluster/apps/{id}/priority")).await;
    json!({"app": keep, "attempts": atts, "state": state, "queue": queue, "priority": prio})
}

fn report(v: Value) -> Value {
    json!({"containerId": v["id"], "state": v["state"], "exitStatus": v["exit"], "diagnostics": "", "resource": {"memory": 256, "vCores": 1}})
}

/// The `id`s of a list of reports (none if `list` is not an array).
fn ids(list: &Value) -> BTreeSet<String> {
    list.as_array()
        .map(|l| {
            l.iter()
                .filter_map(|x| x["id"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn the_spec_reader_finds_queries_and_bodies() {
    let ops = spec_ops(env!("CARGO_MANIFEST_DIR"), DAEMON);
    let find = |m: &str, p: &str| &ops[op_index(&ops, m, p)];
    let apps = find("GET", "/ws/v1/cluster/apps");
    for q in ["states", "limit", "deSelects", "finishedTimeEnd"] {
        assert!(apps.query.iter().any(|x| x == q), "{q}: {:?}", apps.query);
    }
    assert!(apps.body.is_none());
    let submit = find("POST", "/ws/v1/cluster/apps");
    assert_eq!(submit.query, ["user.name"]);
    let fields: BTreeMap<_, _> = submit.body.clone().expect("body").into_iter().collect();
    assert_eq!(fields["application-id"], Kind::Str);
    assert_eq!(fields["priority"], Kind::Int);
    assert_eq!(fields["unmanaged-AM"], Kind::Bool);
    assert_eq!(fields["am-container-spec"], Kind::Obj);
    let alloc = find("POST", "/ws/v1/am/allocate");
    let fields: BTreeMap<_, _> = alloc.body.clone().expect("body").into_iter().collect();
    assert_eq!(fields["ask"], Kind::Arr);
    assert_eq!(fields["progress"], Kind::Num);
    assert_eq!(fields["blacklistRequest"], Kind::Any);
    let finish = find("POST", "/ws/v1/am/finish");
    let fields: BTreeMap<_, _> = finish.body.clone().expect("body").into_iter().collect();
    assert_eq!(
        fields["finalApplicationStatus"],
        Kind::Str,
        "a $ref to a string enum"
    );
    let access = find("GET", "/ws/v1/cluster/queues/{queue}/access");
    assert_eq!(access.query, ["user", "queue-acl-type", "user.name"]);
    assert_eq!(access.params(), ["queue"]);
    let remove = find("POST", "/ws/v1/cluster/remove-node-labels");
    assert_eq!(remove.query, ["labels", "user.name"]);
    assert!(remove.body.is_none());
    let replace = find("POST", "/ws/v1/cluster/replace-node-to-labels");
    assert_eq!(replace.query, ["failOnUnknownNodes", "user.name"]);
    let fields: BTreeMap<_, _> = replace.body.clone().expect("body").into_iter().collect();
    assert_eq!(fields["nodeToLabels"], Kind::Arr);
    assert_eq!(fields["failOnUnknownNodes"], Kind::Bool);
    let mapping = find("POST", "/ws/v1/cluster/node-attributes-mapping");
    let fields: BTreeMap<_, _> = mapping.body.clone().expect("body").into_iter().collect();
    assert_eq!(fields["operation"], Kind::Str);
    assert_eq!(fields["nodesToAttributes"], Kind::Arr);
    let add = find("POST", "/ws/v1/cluster/add-node-labels");
    let fields: BTreeMap<_, _> = add.body.clone().expect("body").into_iter().collect();
    assert_eq!(fields["nodeLabelsInfo"], Kind::Obj, "a $ref to an object");
    let relabel = find("POST", "/ws/v1/cluster/nodes/{nodeid}/replace-labels");
    assert_eq!(relabel.query, ["labels", "user.name"]);
    assert_eq!(relabel.params(), ["nodeid"]);
    assert_eq!(
        find("GET", "/ws/v1/cluster/get-node-to-attributes").query,
        ["hostnames"]
    );
    assert!(ops.len() > 30, "{} RM operations", ops.len());
    assert!(ops.iter().all(|o| !o.path.starts_with("/ws/v1/node/")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rm_operation_survives_hostile_requests() {
    record_panics();
    let started = Instant::now();
    let ops = spec_ops(env!("CARGO_MANIFEST_DIR"), DAEMON);
    let rm = start_rm(&[]).await;

    // ---------------------------------------------------------- before: a node, A and B
    let (nm_addr, launches) = fake_nm().await;
    let (s, v) = rm
        .post(
            "/ws/v1/node-tracker/register",
            json!({"nodeId": nm_addr, "httpAddress": nm_addr, "resource": {"memory": 8192, "vCores": 8}, "nmVersion": "t"}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let a = submit_and_launch(&rm, &launches, "sentinel").await;
    let b = submit_and_launch(&rm, &launches, "victim").await;
    let hb = |containers: Vec<Value>| json!({"nodeId": nm_addr, "responseId": 0, "nodeStatus": {"healthy": true, "containersStatuses": containers}});
    let running = vec![
        report(json!({"id": a.am_container, "state": "RUNNING", "exit": -1000})),
        report(json!({"id": b.am_container, "state": "RUNNING", "exit": -1000})),
    ];
    let (s, v) = rm
        .post("/ws/v1/node-tracker/heartbeat", hb(running.clone()))
        .await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = rm
        .call(
            reqwest::Method::POST,
            "/ws/v1/am/register",
            Some(json!({"host": "h", "rpcPort": 1, "trackingUrl": ""})),
            Some(&b.token),
        )
        .await;
    assert_eq!(s, 200, "B registers: {v}");
    // Ids for the hostile submissions, reserved now so that every app after is accounted for.
    let mut fresh = Vec::new();
    for _ in 0..14 {
        fresh.push(rm.new_app_id().await);
    }
    let (_, info) = rm.get("/ws/v1/cluster/info").await;
    let cluster_ts = info["clusterInfo"]["id"].as_u64().expect("cluster id");
    let unknown_app = format!("application_{cluster_ts}_9999");
    let before_a = fingerprint(&rm, &a.id).await;
    let (_, conf_before) = rm.get("/ws/v1/cluster/scheduler-conf").await;

    // ---------------------------------------------------------- the spec-driven barrage
    let sample = |p: &str| -> String {
        match p {
            "appid" => b.id.clone(),
            "attemptid" => b.attempt.clone(),
            "containerid" => b.am_container.clone(),
            "nodeid" => nm_addr.clone(),
            "queue" => "default".into(),
            "user" => "alice".into(),
            "type" => "LIFETIME".into(),
            "digest" => {
                "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855".into()
            }
            other => panic!("no sample for path parameter {{{other}}}: add one"),
        }
    };
    // A body that gets a request past parsing without changing what the test keeps.
    let benign = |op: &Op| -> Option<Vec<u8>> {
        op.body.as_ref()?;
        let b: &[u8] = match (op.method.as_str(), op.path.as_str()) {
            ("PUT", "/ws/v1/cluster/apps/{appid}/state") => b"{\"state\":\"KILLED\"}",
            ("PUT", "/ws/v1/cluster/apps/{appid}/queue") => b"{\"queue\":\"default\"}",
            ("PUT", "/ws/v1/cluster/apps/{appid}/priority") => b"{\"priority\":0}",
            ("POST", "/ws/v1/am/finish") => b"{\"diagnostics\":\"no status\"}",
            _ => b"{}",
        };
        Some(b.to_vec())
    };
    let token_b = b.token.clone();
    let auth = |op: &Op| op.path.starts_with("/ws/v1/am/").then(|| token_b.clone());
    // Requests with a benign body aimed at an application go to one that does not exist
    // (B must not be killed or moved by a query test).
    let safe_path = |op: &Op| -> String {
        if op.method == "PUT" && op.path.contains("{appid}") {
            fill_with(&op.path, |_| unknown_app.clone())
        } else {
            fill_with(&op.path, sample)
        }
    };
    // The queue access check needs the user to check, or it stops before the queue.
    let required_query = |op: &Op| -> String {
        if op.path.ends_with("/access") {
            "?user=alice".into()
        } else {
            String::new()
        }
    };
    let mut cases = spec_cases(
        &ops,
        &sample,
        &benign,
        &auth,
        &safe_path,
        &required_query,
        true,
    );

    // Bearer tokens, on each AM operation: all 401.
    let forged_for_a = issue_amrm_token(
        &TokenSecret::generate().expect("secret"),
        &a.attempt.parse().expect("attempt"),
    );
    let (b_payload, b_sig) = b.token.split_once('.').expect("token");
    let (a_payload, _) = forged_for_a.split_once('.').expect("token");
    let bad_tokens: Vec<Vec<u8>> = vec![
        b"Bearer".to_vec(),
        b"Bearer ".to_vec(),
        b"Bearer  ".to_vec(),
        format!("bearer {}", b.token).into_bytes(),
        format!("Basic {}", b.token).into_bytes(),
        format!("Token {}", b.token).into_bytes(),
        b.token.clone().into_bytes(),
        b"Bearer x".to_vec(),
        b"Bearer .".to_vec(),
        b"Bearer a.b".to_vec(),
        b"Bearer ...".to_vec(),
        format!("Bearer {forged_for_a}").into_bytes(),
        format!("Bearer {a_payload}.{b_sig}").into_bytes(),
        format!("Bearer {b_payload}.{}", "0".repeat(64)).into_bytes(),
        format!("Bearer {b_payload}.{}", &b_sig[..b_sig.len() - 2]).into_bytes(),
        format!("Bearer {b_payload}.{b_sig}00").into_bytes(),
        format!("Bearer {}.{b_sig}", "_-_-").into_bytes(),
        format!("Bearer {} trailing", b.token).into_bytes(),
        format!("Bearer {}", "t".repeat(10_000)).into_bytes(),
        b"Bearer \xff\xfe\xfd".to_vec(),
    ];
    for (i, op) in ops.iter().enumerate() {
        if !op.path.starts_with("/ws/v1/am/") {
            continue;
        }
        // The body would act if the token were taken: finish A (the forged token is A's).
        let body: &[u8] = if op.path.ends_with("/finish") {
            b"{\"finalApplicationStatus\":\"SUCCEEDED\",\"diagnostics\":\"forged\"}"
        } else if op.path.ends_with("/allocate") {
            b"{\"release\":[]}"
        } else {
            b"{\"host\":\"h\"}"
        };
        cases.push(Case {
            class: "auth",
            op: i,
            expect: Expect::Is(401),
            req: Req::new(&op.method, op.path.clone()).json(body),
        });
        for t in &bad_tokens {
            cases.push(Case {
                class: "auth",
                op: i,
                expect: Expect::Is(401),
                req: Req::new(&op.method, op.path.clone())
                    .header("Authorization", t.clone())
                    .json(body),
            });
        }
    }

    // ---------------------------------------------------------- semantic attacks
    let mut semantic = |m: &str, p: &str, target: String, body: Value, token: Option<&str>| {
        let mut req = Req::new(m, target).json(body.to_string());
        if let Some(t) = token {
            req = req.bearer(t);
        }
        cases.push(Case {
            class: "semantic",
            op: op_index(&ops, m, p),
            expect: Expect::Spec,
            req,
        });
    };
    // B's AM asks for absurd things and releases A's AM container.
    let ask = |extra: Value| {
        let mut a = json!({"priority": 1, "resourceName": "*", "capability": {"memory": 128, "vCores": 1}, "numContainers": 1});
        for (k, v) in extra.as_object().expect("object") {
            a[k] = v.clone();
        }
        json!({"ask": [a]})
    };
    let alloc = "/ws/v1/am/allocate";
    let allocs = vec![
        ask(json!({"numContainers": 2147483647})),
        ask(json!({"numContainers": -1})),
        ask(json!({"capability": {"memory": -1, "vCores": -1}})),
        ask(json!({"capability": {"memory": 0, "vCores": 0}})),
        ask(json!({"capability": {"memory": i64::MAX, "vCores": i64::MAX}})),
        ask(
            json!({"capability": {"memory": 128, "vCores": 1, "resourceInformations": {"resourceInformation": [{"name": "yarn.io/gpu", "value": -5}]}}}),
        ),
        ask(
            json!({"capability": {"memory": 128, "vCores": 1, "resourceInformations": {"resourceInformation": [{"name": "", "value": 1}, {"name": "memory-mb", "value": i64::MAX}]}}}),
        ),
        ask(json!({"priority": i32::MIN})),
        ask(json!({"priority": i32::MAX, "allocationRequestId": i64::MIN})),
        ask(json!({"resourceName": ""})),
        ask(json!({"resourceName": "r".repeat(5000), "relaxLocality": false})),
        ask(json!({"resourceName": "/no-rack", "relaxLocality": false})),
        ask(json!({"resourceName": "\u{0}"})),
        ask(json!({"gang": {"id": "", "placement": "PACK"}})),
        ask(json!({"gang": {"id": "g".repeat(300)}})),
        ask(json!({"gang": {"id": "g", "placement": "BOGUS"}})),
        ask(json!({"gang": {"id": "g", "maxNodes": 0, "timeoutMs": u64::MAX}})),
        ask(json!({"gang": {"id": "g2", "placement": "STRICT_PACK", "numContainers": 1000}})),
        json!({"ask": (0..1000).map(|i| json!({"priority": i, "resourceName": "*", "capability": {"memory": 128, "vCores": 1}, "numContainers": 0})).collect::<Vec<_>>()}),
        json!({"release": [a.am_container]}),
        json!({"release": ["container_1_0001_01_000001"]}),
        json!({"release": [b.am_container, b.am_container]}),
        json!({"release": ["x"]}),
        json!({"progress": 1e39}),
        json!({"progress": -1e30}),
        json!({"responseId": i32::MIN}),
        json!({"responseId": i32::MAX}),
        json!({"blacklistRequest": {"blacklistAdditions": [nm_addr], "blacklistRemovals": ["x"]}}),
        ask(json!({"numContainers": 0})),
    ];
    for body in allocs {
        semantic("POST", alloc, alloc.into(), body, Some(&b.token));
    }
    // B registers again (409).
    semantic(
        "POST",
        "/ws/v1/am/register",
        "/ws/v1/am/register".into(),
        json!({"host": "h"}),
        Some(&b.token),
    );
    // A rogue node (loopback, nothing listens there) claims A's AM container.
    let claim = vec![report(
        json!({"id": a.am_container, "state": "COMPLETE", "exit": 0}),
    )];
    let rogue_hb = |node: &str| json!({"nodeId": node, "responseId": 0, "nodeStatus": {"healthy": true, "containersStatuses": claim.clone()}});
    let tracker = "/ws/v1/node-tracker";
    semantic(
        "POST",
        "/ws/v1/node-tracker/heartbeat",
        format!("{tracker}/heartbeat"),
        rogue_hb("127.0.0.1:1"),
        None,
    );
    semantic(
        "POST",
        "/ws/v1/node-tracker/register",
        format!("{tracker}/register"),
        json!({"nodeId": "127.0.0.1:2", "httpAddress": "127.0.0.1:2", "resource": {"memory": 0, "vCores": 0}, "nmVersion": "rogue", "containerStatuses": claim.clone()}),
        None,
    );
    semantic(
        "POST",
        "/ws/v1/node-tracker/register",
        format!("{tracker}/register"),
        json!({"nodeId": "127.0.0.1:3", "httpAddress": "127.0.0.1:3", "resource": {"memory": -1, "vCores": 1}}),
        None,
    );
    // Absurd node sizes: the cluster's totals are sums of them.
    semantic(
        "POST",
        "/ws/v1/node-tracker/register",
        format!("{tracker}/register"),
        json!({"nodeId": "127.0.0.1:4", "httpAddress": "127.0.0.1:4", "resource": {"memory": i64::MAX, "vCores": i64::MAX}}),
        None,
    );
    semantic(
        "POST",
        "/ws/v1/node-tracker/register",
        format!("{tracker}/register"),
        json!({"nodeId": "127.0.0.1:5", "httpAddress": "127.0.0.1:5", "resource": {"memory": 0, "vCores": 0},
               "containerStatuses": [{"containerId": "container_1_0001_01_000001", "state": "RUNNING", "exitStatus": -1000,
                                      "resource": {"memory": i64::MAX, "vCores": i64::MAX}}]}),
        None,
    );
    semantic(
        "POST",
        "/ws/v1/node-tracker/unregister",
        format!("{tracker}/unregister"),
        json!({"nodeId": "127.0.0.1:1"}),
        None,
    );
    // Hostile submissions, each with its own reserved id.
    let apps_path = "/ws/v1/cluster/apps";
    let spec = |cmd: &str| json!({"commands": {"command": cmd}});
    let submissions = vec![
        json!({"am-container-spec": {"commands": {"command": "true"}, "environment": {"entry": [{"key": "A=B", "value": "1"}]}}}),
        json!({"am-container-spec": {"commands": {"command": "true"}, "environment": {"entry": [{"key": "", "value": "1"}]}}}),
        json!({"am-container-spec": {"commands": {"command": "true"}, "local-resources": {"entry": [{"key": "..", "value": {"resource": "/nonexistent", "type": "FILE"}}]}}}),
        json!({"am-container-spec": {"commands": {"command": "true"}, "local-resources": {"entry": [{"key": "a/b", "value": {"resource": "/nonexistent"}}]}}}),
        json!({"am-container-spec": spec("true"), "resource": {"memory": -1, "vCores": -1}}),
        json!({"am-container-spec": spec("true"), "resource": {"memory": i64::MAX, "vCores": 1}}),
        json!({"am-container-spec": spec("true"), "max-app-attempts": -1}),
        json!({"am-container-spec": spec("true"), "unmanaged-AM": true}),
        json!({"am-container-spec": spec("true"), "priority": i32::MAX, "resource": {"memory": 128, "vCores": 1}}),
        json!({"am-container-spec": spec("true"), "queue": "root"}),
        json!({"am-container-spec": spec("true"), "queue": "q".repeat(5000)}),
        json!({"am-container-spec": spec("true"), "queue": "root..default"}),
        json!({"am-container-spec": spec(&"c".repeat(100_000)), "application-name": "\u{0}<script>", "application-type": "t".repeat(5000), "application-tags": {"tag": (0..1000).map(|i| format!("tag{i}")).collect::<Vec<_>>()}, "resource": {"memory": 128, "vCores": 1}}),
        json!({"am-container-spec": spec("true"), "application-id": " "}),
    ];
    for (i, mut body) in submissions.into_iter().enumerate() {
        if body.get("application-id").is_none() {
            body["application-id"] = json!(fresh[i]);
        }
        semantic("POST", apps_path, apps_path.into(), body, None);
    }
    // A second submission of A's id.
    semantic(
        "POST",
        apps_path,
        apps_path.into(),
        json!({"application-id": a.id, "am-container-spec": spec("true")}),
        None,
    );
    // Moving or re-prioritising A under a name that is not A's.
    let queue_path = "/ws/v1/cluster/apps/{appid}/queue";
    let state_path = "/ws/v1/cluster/apps/{appid}/state";
    for (p, body) in [
        (queue_path, json!({"queue": "nosuch"})),
        (queue_path, json!({"queue": "root"})),
        (queue_path, json!({"queue": "  "})),
        (state_path, json!({"state": "RUNNING"})),
    ] {
        semantic("PUT", p, fill_with(p, |_| b.id.clone()), body, None);
    }
    // Scheduler mutations that must be refused (and, as a dry run, changed nothing anyway).
    let entry = |q: &str, k: &str, v: &str| json!({"update-queue": [{"queue-name": q, "params": {"entry": [{"key": k, "value": v}]}}]});
    let mutations = vec![
        json!({"remove-queue": ["root.default"]}),
        json!({"remove-queue": ["root"]}),
        json!({"remove-queue": "root.default"}),
        entry("root.default", "capacity", "NaN"),
        entry("root.default", "capacity", "-5"),
        entry("root.default", "capacity", "1e309"),
        entry("root.default", "capacity", "abc"),
        entry("root.default", "capacity", "101"),
        entry("root.default", "maximum-capacity", "-1"),
        entry("root.default", "user-limit-factor", "NaN"),
        entry("root.nosuch", "capacity", "10"),
        entry("root", "capacity", "50"),
        json!({"add-queue": [{"queue-name": "root..x"}]}),
        json!({"add-queue": [{"queue-name": "root.default.child", "params": {"entry": [{"key": "capacity", "value": "100"}]}}]}),
        json!({"add-queue": [{"queue-name": format!("root.{}", "n".repeat(5000))}]}),
        json!({"add-queue": [{"queue-name": "root.a b"}]}),
        json!({"global-updates": {"entry": [{"key": "yarn.scheduler.capacity.maximum-applications", "value": "99999999999999999999"}]}}),
        json!({"global-updates": {"entry": [{"key": "yarn.scheduler.capacity.maximum-am-resource-percent", "value": "NaN"}]}}),
        json!({"global-updates": {"entry": [{"key": "yarn.scheduler.capacity.root.queues", "value": ""}]}}),
        json!({"sched-conf": {"sched-conf": {}}}),
    ];
    for body in &mutations {
        semantic(
            "POST",
            "/ws/v1/cluster/scheduler-conf/validate",
            "/ws/v1/cluster/scheduler-conf/validate".into(),
            body.clone(),
            None,
        );
        semantic(
            "PUT",
            "/ws/v1/cluster/scheduler-conf",
            "/ws/v1/cluster/scheduler-conf".into(),
            body.clone(),
            None,
        );
    }

    // Label and attribute changes that must be refused whole (400), changing nothing.
    let long = "l".repeat(5000);
    let label_attacks: Vec<(&str, String, Option<Value>)> = vec![
        (
            "/ws/v1/cluster/add-node-labels",
            String::new(),
            Some(json!({"nodeLabelInfo": [{"name": "fine"}, {"name": "not fine"}]})),
        ),
        (
            "/ws/v1/cluster/add-node-labels",
            String::new(),
            Some(json!({"nodeLabelInfo": [{"name": ""}]})),
        ),
        (
            "/ws/v1/cluster/add-node-labels",
            String::new(),
            Some(json!({"nodeLabelInfo": [{"name": long}]})),
        ),
        (
            "/ws/v1/cluster/add-node-labels",
            String::new(),
            Some(json!({"nodeLabelInfo": [{"name": "a/b"}, {"name": "\u{0}"}]})),
        ),
        (
            "/ws/v1/cluster/add-node-labels",
            String::new(),
            Some(
                json!({"nodeLabelsInfo": {"nodeLabelInfo": [{"name": "x", "exclusivity": "yes"}]}}),
            ),
        ),
        (
            "/ws/v1/cluster/remove-node-labels",
            "?labels=nosuch".into(),
            None,
        ),
        (
            "/ws/v1/cluster/remove-node-labels",
            "?labels=%00".into(),
            None,
        ),
        (
            "/ws/v1/cluster/remove-node-labels",
            format!("?labels={long}"),
            None,
        ),
        (
            "/ws/v1/cluster/remove-node-labels",
            "?labels=,,,".into(),
            None,
        ),
        (
            "/ws/v1/cluster/replace-node-to-labels",
            String::new(),
            Some(json!({"nodeToLabels": [{"nodeId": nm_addr, "labels": ["nosuch"]}]})),
        ),
        (
            "/ws/v1/cluster/replace-node-to-labels",
            String::new(),
            Some(json!({"nodeToLabels": [{"nodeId": nm_addr, "labels": ["a", "b"]}]})),
        ),
        (
            "/ws/v1/cluster/replace-node-to-labels",
            String::new(),
            Some(json!({"nodeToLabels": [{"nodeId": "", "labels": []}]})),
        ),
        (
            "/ws/v1/cluster/replace-node-to-labels",
            "?failOnUnknownNodes=true".into(),
            Some(json!({"nodeToLabels": [{"nodeId": long, "labels": []}]})),
        ),
        (
            "/ws/v1/cluster/replace-node-to-labels",
            String::new(),
            Some(json!({"nodeToLabels": {"nodeId": nm_addr}})),
        ),
        (
            "/ws/v1/cluster/node-attributes-mapping",
            String::new(),
            Some(
                json!({"operation": "ADD", "nodesToAttributes": [{"node": nm_addr, "nodeAttributes": [{"prefix": "nm.yarn.io", "name": "gpu-model", "value": "forged"}]}]}),
            ),
        ),
        (
            "/ws/v1/cluster/node-attributes-mapping",
            String::new(),
            Some(
                json!({"operation": "ADD", "nodesToAttributes": [{"node": nm_addr, "nodeAttributes": [{"name": "os", "type": "FLOAT", "value": "1"}]}]}),
            ),
        ),
        (
            "/ws/v1/cluster/node-attributes-mapping",
            String::new(),
            Some(
                json!({"operation": "ADD", "nodesToAttributes": [{"node": nm_addr, "nodeAttributes": [{"name": long, "value": "1"}]}]}),
            ),
        ),
        (
            "/ws/v1/cluster/node-attributes-mapping",
            String::new(),
            Some(
                json!({"operation": "ADD", "nodesToAttributes": [{"node": nm_addr, "nodeAttributes": [{"name": "ok", "value": "1"}, {"name": "../x", "value": "1"}]}]}),
            ),
        ),
        (
            "/ws/v1/cluster/node-attributes-mapping",
            String::new(),
            Some(
                json!({"operation": "REMOVE", "nodesToAttributes": [{"node": nm_addr, "nodeAttributes": [{"name": "absent"}]}]}),
            ),
        ),
        (
            "/ws/v1/cluster/node-attributes-mapping",
            String::new(),
            Some(json!({"operation": "DROP", "nodesToAttributes": []})),
        ),
        (
            "/ws/v1/cluster/node-attributes-mapping",
            String::new(),
            Some(
                json!({"operation": "ADD", "nodesToAttributes": [{"node": " ", "nodeAttributes": []}]}),
            ),
        ),
        (
            "/ws/v1/cluster/nodes/{nodeid}/replace-labels",
            "?labels=a,b".into(),
            None,
        ),
        (
            "/ws/v1/cluster/nodes/{nodeid}/replace-labels",
            "?labels=nosuch".into(),
            None,
        ),
    ];
    for (p, query, body) in label_attacks {
        let target = format!("{}{query}", fill_with(p, |_| nm_addr.clone()));
        let mut req = Req::new("POST", target);
        if let Some(b) = body {
            req = req.json(b.to_string());
        }
        cases.push(Case {
            class: "labels",
            op: op_index(&ops, "POST", p),
            expect: Expect::Is(400),
            req,
        });
    }

    // Bodies past axum's 2 MiB limit: a 400, not a reset connection.
    for (m, p) in [
        ("POST", "/ws/v1/cluster/apps"),
        ("POST", "/ws/v1/node-tracker/heartbeat"),
    ] {
        cases.push(Case {
            class: "over-limit",
            op: op_index(&ops, m, p),
            expect: Expect::Is(400),
            req: Req::new(m, p).json(format!("{{\"x\":\"{}\"}}", "a".repeat(3_000_000))),
        });
    }
    let daemon = Daemon {
        name: "RM",
        addr: rm.addr,
        fallback_prefix: FALLBACK_PREFIX,
    };
    let rows = tokio::task::block_in_place(|| run_barrage(&daemon, &ops, cases, &|_, _| None));

    // ---------------------------------------------------------- after: the RM still works
    let mut after = Vec::new();
    let (s, info) = rm.get("/ws/v1/cluster/info").await;
    if s != 200 || info["clusterInfo"]["state"] != "STARTED" {
        after.push(format!("GET /ws/v1/cluster/info: {s} {info}"));
    }
    let after_a = fingerprint(&rm, &a.id).await;
    if after_a != before_a {
        after.push(format!(
            "the sentinel application changed:\nbefore: {before_a}\nafter:  {after_a}"
        ));
    }
    let (s, apps) = rm.get("/ws/v1/cluster/apps").await;
    let known: BTreeSet<String> = [a.id.clone(), b.id.clone()]
        .into_iter()
        .chain(fresh.iter().cloned())
        .collect();
    let listed = ids(&apps["apps"]["app"]);
    if s != 200 || !listed.contains(&a.id) || !listed.contains(&b.id) || !listed.is_subset(&known) {
        after.push(format!(
            "GET /ws/v1/cluster/apps: {s}; apps {listed:?}, expected A, B and some of {fresh:?}"
        ));
    }
    let (s, nodes) = rm.get("/ws/v1/cluster/nodes").await;
    let node_ids = ids(&nodes["nodes"]["node"]);
    let allowed_nodes: BTreeSet<String> = [nm_addr.clone(), "127.0.0.1:2".into()].into();
    if s != 200 || !node_ids.contains(&nm_addr) || !node_ids.is_subset(&allowed_nodes) {
        after.push(format!("GET /ws/v1/cluster/nodes: {s}; nodes {node_ids:?}"));
    }
    // No label or central attribute exists that the test did not make (none), and the node
    // kept its (default) partition.
    for (p, want) in [
        (
            "/ws/v1/cluster/get-node-labels",
            json!({"nodeLabelsInfo": {"nodeLabelInfo": []}}),
        ),
        (
            "/ws/v1/cluster/get-node-to-labels",
            json!({"nodeToLabels": {}}),
        ),
        (
            "/ws/v1/cluster/get-attributes-to-nodes",
            json!({"attributesToNodes": {}}),
        ),
    ] {
        let (s, v) = rm.get(p).await;
        if s != 200 || v != want {
            after.push(format!("GET {p}: {s} {v}, expected {want}"));
        }
    }
    let (s, sched) = rm.get("/ws/v1/cluster/scheduler").await;
    let queues = sched.to_string();
    if s != 200 || !queues.contains("root.default") {
        after.push(format!("GET /ws/v1/cluster/scheduler: {s}"));
    }
    let (s, conf_after) = rm.get("/ws/v1/cluster/scheduler-conf").await;
    if s != 200 || conf_after.to_string().contains("NaN") {
        after.push(format!(
            "GET /ws/v1/cluster/scheduler-conf: {s}; before {conf_before}, after {conf_after}"
        ));
    }
    // The driver still takes commands: a normal submission runs; B's AM still allocates.
    // (B's absurd asks may hold every free MB now, so the new AM need not be launched.)
    let (s, v) = rm
        .post("/ws/v1/cluster/apps/new-application", json!({}))
        .await;
    if s != 200 {
        after.push(format!("new-application after the barrage: {s} {v}"));
    }
    let c = v["application-id"].as_str().unwrap_or("none").to_string();
    let (s, v) = rm
        .post(
            apps_path,
            json!({"application-id": c, "am-container-spec": spec("true"), "resource": {"memory": 128, "vCores": 1}}),
        )
        .await;
    let (s2, st) = rm.get(&format!("/ws/v1/cluster/apps/{c}/state")).await;
    if s != 202 || s2 != 200 || st["state"] != "ACCEPTED" {
        after.push(format!(
            "a submission after the barrage: {s} {v}; {s2} {st}"
        ));
    }
    let (s, v) = rm
        .call(
            reqwest::Method::POST,
            alloc,
            Some(json!({"progress": 0.5})),
            Some(&b.token),
        )
        .await;
    if s != 200 {
        after.push(format!("B's allocate after the barrage: {s} {v}"));
    }
    let (s, v) = rm.post("/ws/v1/node-tracker/heartbeat", hb(running)).await;
    if s != 200 || v["nodeAction"] != "NORMAL" {
        after.push(format!("the NM's heartbeat after the barrage: {s} {v}"));
    }
    let panics = daemon_panics(TEST_NAMES);
    rm.shutdown().await;
    println!("whole test {:?}", started.elapsed());
    robust::assert_survived(&rows, &after, &panics);
}
