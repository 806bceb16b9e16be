//! Robustness: hostile requests against every NM operation in `docs/openapi.yaml`.
//!
//! The rule under test: no request may panic the NM or corrupt its state, and every REST
//! error is a YARN `RemoteException` body with the right status (400 bad input, 404 unknown
//! id, 405 wrong method; 500 only for real bugs). The UI log pages (`/node/containerlogs`)
//! answer errors in plain text, as the spec says; a JSON error from them must still be a
//! `RemoteException`.
//!
//! The NM runs in-process on 127.0.0.1:0, registered with a fake RM (`support`). Before the
//! barrage it runs a sentinel container (`sleep`), which the path parameters name wherever
//! they need a real id (its logs are the ones the file-name attacks aim at). The barrage is
//! built from the spec: for every NM path and method, hostile path parameters, query
//! strings, bodies (generic ones and wrong-typed values for each field of the operation's
//! request schema), content types, `Accept`, wrong methods and path shapes; then hand-written
//! semantic attacks: starts with forged, foreign-node, expired, tampered and duplicate
//! container tokens (the duplicate names the sentinel), correctly signed starts with hostile
//! launch contexts, submitters and sizes, bad hold timeouts, held starts, releases (one
//! of the sentinel, which is not held) and stops of unknown and hostile containers, bodies
//! past the 2 MiB limit, and extreme log sizes. Requests go over raw TCP (paths are sent
//! verbatim; a dropped connection shows as one), 8 at a time.
//!
//! Each answer must come (no hang, no dropped connection), must not be a 5xx other than a
//! 503 the spec lists, must carry a status the spec lists for the operation (or the router's
//! fallback 404, or 405 for a wrong method), must be the status the request class calls for
//! where there is one (400 for unreadable JSON, 4xx for a garbage id), must not show
//! `/etc/passwd`, and, when it is an error on a REST path, must be a `RemoteException` body.
//! After the barrage the NM must still serve normal requests, the sentinel must still be
//! listed and RUNNING, a new container must start and complete, heartbeats must go on, no
//! thread may have panicked, and the NM must stop cleanly.
//!
//! The daemon-independent half (spec reading, raw client, catalogues, checks) is
//! `spindle_test_support::contract::robust`, shared with `resourcemanager/tests/robustness.rs`;
//! this file holds what is the NM's own.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use spindle_common::ids::NodeId;
use spindle_common::states::ContainerState;
use spindle_common::time::now_ms;
use spindle_common::token::{issue_container_token, ContainerKey};
use spindle_test_support::contract::fill_with;
use spindle_test_support::contract::robust::{
    self, daemon_panics, op_index, record_panics, run_barrage, spec_cases, spec_ops, Case, Daemon,
    Expect, Kind, Op, Req, Resp,
};
use support::{cid, FakeRm, TestNm};

const DAEMON: &str = "nm";
/// The start of the message of the router's fallback 404.
const FALLBACK_PREFIX: &str = "java.lang.Exception: no resource at";
/// The test threads of this file (their panics are assertion failures, not daemon panics).
const TEST_NAMES: &[&str] = &[
    "every_nm_operation_survives_hostile_requests",
    "the_spec_reader_finds_queries_and_bodies",
];

// ====================================================================== the NM

/// The user every container of the test runs as.
const USER: &str = "alice";

fn launch_context(command: &str) -> Value {
    json!({"commands": [command], "environment": {}, "localResources": {}})
}

fn start_body(token: &str, ctx: Value) -> Value {
    json!({"startContainerRequest": [{"containerToken": token, "containerLaunchContext": ctx}]})
}

/// The parts of a container's report that no request of the barrage may change.
fn fingerprint(v: &Value) -> Value {
    let c = &v["container"];
    json!({
        "id": c["id"], "state": c["state"], "exitCode": c["exitCode"], "user": c["user"],
        "diagnostics": c["diagnostics"], "totalMemoryNeededMB": c["totalMemoryNeededMB"],
        "totalVCoresNeeded": c["totalVCoresNeeded"],
    })
}

#[test]
fn the_spec_reader_finds_queries_and_bodies() {
    let ops = spec_ops(env!("CARGO_MANIFEST_DIR"), DAEMON);
    let find = |m: &str, p: &str| &ops[op_index(&ops, m, p)];
    assert_eq!(find("GET", "/ws/v1/node/apps").query, ["state", "user"]);
    let log = find(
        "GET",
        "/ws/v1/node/containers/{containerid}/logs/{filename}",
    );
    assert_eq!(log.query, ["size", "start", "end", "format"]);
    assert_eq!(log.params(), ["containerid", "filename"]);
    let start = find("POST", "/ws/v1/node/containers/start");
    let fields: BTreeMap<_, _> = start.body.clone().expect("body").into_iter().collect();
    assert_eq!(fields["startContainerRequest"], Kind::Arr);
    assert_eq!(fields["hold"], Kind::Obj, "a $ref to an object schema");
    let stop = find("POST", "/ws/v1/node/containers/stop");
    assert_eq!(
        stop.body.clone().expect("body"),
        [("containerIds".to_string(), Kind::Arr)]
    );
    assert!(find("GET", "/metrics").body.is_none());
    assert!(ops.len() > 15, "{} NM operations", ops.len());
    assert!(ops.iter().all(|o| !o.path.starts_with("/ws/v1/cluster")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_nm_operation_survives_hostile_requests() {
    record_panics();
    let started = Instant::now();
    let ops = spec_ops(env!("CARGO_MANIFEST_DIR"), DAEMON);
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().expect("tempdir");
    let mut nm = TestNm::start(dirs.path(), rm.addr, false).await;
    rm.wait_registered(1).await;

    // ---------------------------------------------------------- before: the sentinel
    let sentinel = cid(1, 1);
    nm.run_container(&rm, sentinel, USER, "echo sentinel; exec sleep 300")
        .await;
    // The RM's coarse RUNNING covers the NM's LOCALIZING: wait for the NM's own RUNNING.
    let sentinel_path = format!("/ws/v1/node/containers/{sentinel}");
    let deadline = Instant::now() + Duration::from_secs(15);
    let before = loop {
        let (s, v) = nm.get_json(&sentinel_path).await;
        assert_eq!(s, 200, "{v}");
        if v["container"]["state"] == "RUNNING" {
            break fingerprint(&v);
        }
        assert!(
            Instant::now() < deadline,
            "the sentinel is not RUNNING: {v}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };

    // ---------------------------------------------------------- the spec-driven barrage
    let sample = |p: &str| -> String {
        match p {
            "appid" => sentinel.application_id().to_string(),
            "containerid" => sentinel.to_string(),
            "filename" => "stdout".into(),
            "user" => USER.into(),
            "resourcename" => "yarn.io%2Fgpu".into(),
            other => panic!("no sample for path parameter {{{other}}}: add one"),
        }
    };
    let benign = |op: &Op| op.body.as_ref().map(|_| b"{}".to_vec());
    let safe_path = |op: &Op| fill_with(&op.path, sample);
    let mut cases = spec_cases(
        &ops,
        &sample,
        &benign,
        &|_| None,
        &safe_path,
        &|_| String::new(),
        // One REST edge for both daemons: a body needs a JSON Content-Type here too.
        true,
    );

    // ---------------------------------------------------------- semantic attacks
    let start_op = op_index(&ops, "POST", "/ws/v1/node/containers/start");
    let start_path = "/ws/v1/node/containers/start";
    let mut add = |class: &'static str, op: usize, expect: Expect, target: String, body: Value| {
        cases.push(Case {
            class,
            op,
            expect,
            req: Req::new(&ops[op].method, target).json(body.to_string()),
        });
    };
    // Tokens that must not start anything: 200 with the container in failedRequests.
    let good = |id| rm.token(&nm.ident(id, USER));
    let forged = issue_container_token(
        &ContainerKey::generate(rm.key.id()).expect("key"),
        &nm.ident(cid(2, 1), USER),
    );
    let mut foreign = nm.ident(cid(2, 2), USER);
    foreign.node_id = NodeId::new("127.0.0.1", 1);
    let mut expired = nm.ident(cid(2, 3), USER);
    expired.expiry_time_ms = now_ms() - 1;
    let (forged_payload, _) = forged.split_once('.').expect("token");
    let good_4 = good(cid(2, 4));
    let (_, good_sig) = good_4.split_once('.').expect("token");
    let bad_tokens = vec![
        forged.clone(),
        rm.token(&foreign),
        rm.token(&expired),
        good(sentinel), // a second start of the sentinel
        format!("{forged_payload}.{good_sig}"),
        format!("{good_4}00"),
        String::new(),
        "x".into(),
        ".".into(),
        "a.b".into(),
        "\u{0}".into(),
        "t".repeat(10_000),
    ];
    for t in &bad_tokens {
        add(
            "forged-token",
            start_op,
            Expect::Is(200),
            start_path.into(),
            start_body(t, launch_context("true")),
        );
    }
    add(
        "forged-token",
        start_op,
        Expect::Is(200),
        start_path.into(),
        json!({"startContainerRequest": (0..1000).map(|_| json!({"containerToken": forged, "containerLaunchContext": launch_context("true")})).collect::<Vec<_>>()}),
    );
    // Hold timeouts outside 1..=600000, or not a number: 400 before any token is looked at.
    for hold in [
        json!({"timeoutMs": 0}),
        json!({"timeoutMs": 600_001}),
        json!({"timeoutMs": u64::MAX}),
        json!({"timeoutMs": -1}),
        json!({"timeoutMs": 1.5}),
        json!({"timeoutMs": "x"}),
        json!(5),
        json!("x"),
    ] {
        let mut body = start_body(&forged, launch_context("true"));
        body["hold"] = hold;
        add(
            "bad-hold",
            start_op,
            Expect::Is(400),
            start_path.into(),
            body,
        );
    }
    // Correctly signed starts with hostile launch contexts, submitters and sizes: each is
    // started or refused (200 either way), and nothing else may change.
    let mut n = 0u64;
    let mut next = || {
        n += 1;
        cid(3, n)
    };
    let mut hostile_ctx = vec![
        json!({"commands": ["true"], "environment": {"A=B": "1"}}),
        json!({"commands": ["true"], "environment": {"": "1"}}),
        json!({"commands": ["true"], "environment": {"X\u{0}": "1"}}),
        json!({"commands": ["true"], "environment": {"X": "a\u{0}b"}}),
        json!({"commands": ["true"], "environment": {"PATH": ""}}),
        json!({"commands": ["true"], "localResources": {"..": {"resource": "/nonexistent"}}}),
        json!({"commands": ["true"], "localResources": {"a/b": {"resource": "/nonexistent"}}}),
        json!({"commands": ["true"], "localResources": {"": {"resource": "/nonexistent"}}}),
        json!({"commands": ["true"], "localResources": {"x": {"resource": "file:///nonexistent/x"}}}),
        json!({"commands": ["true"], "localResources": {"y": {"resource": "relative/path"}}}),
        json!({"commands": ["true"], "localResources": {"z": {"resource": "/nonexistent", "type": "ARCHIVE", "size": -1}}}),
        json!({"commands": []}),
        json!({"commands": ["\u{0}"]}),
        json!({"commands": ["true; ".repeat(20_000)]}),
        json!({}),
    ];
    let mut starts = Vec::new();
    for ctx in hostile_ctx.drain(..) {
        starts.push(start_body(&good(next()), ctx));
    }
    for user in ["..", "", "a/b", "-rf", "\u{0}", &"u".repeat(300)] {
        let id = next();
        starts.push(start_body(
            &rm.token(&nm.ident(id, user)),
            launch_context("true"),
        ));
    }
    for (memory, vcores) in [(i64::MAX, i64::MAX), (-1, -1), (0, 0)] {
        let mut ident = nm.ident(next(), USER);
        ident.resource.memory = memory;
        ident.resource.v_cores = vcores;
        starts.push(start_body(&rm.token(&ident), launch_context("true")));
    }
    // The same container twice in one call.
    let twice = good(next());
    starts.push(json!({"startContainerRequest": [
        {"containerToken": twice, "containerLaunchContext": launch_context("true")},
        {"containerToken": twice, "containerLaunchContext": launch_context("true")}]}));
    // A held start that nobody releases (it times out), and one that is released.
    let held = next();
    let mut body = start_body(&good(held), launch_context("true"));
    body["hold"] = json!({"timeoutMs": 300});
    starts.push(body);
    let released = next();
    let mut body = start_body(&good(released), launch_context("true"));
    body["hold"] = json!({});
    starts.push(body);
    for body in starts {
        add(
            "signed-start",
            start_op,
            Expect::Is(200),
            start_path.into(),
            body,
        );
    }
    // Release and stop: the sentinel is not held (refused, 200); unknown ids are refused
    // (200); malformed ids are a 400. Stops name the hostile starts, never the sentinel.
    let release_op = op_index(&ops, "POST", "/ws/v1/node/containers/release");
    let stop_op = op_index(&ops, "POST", "/ws/v1/node/containers/stop");
    let unknown = cid(9, 9).to_string();
    for (op, ids, expect) in [
        (release_op, json!([sentinel.to_string()]), Expect::Is(200)),
        (release_op, json!([released.to_string()]), Expect::Is(200)),
        (
            release_op,
            json!([held.to_string(), held.to_string()]),
            Expect::Is(200),
        ),
        (release_op, json!([unknown]), Expect::Is(200)),
        (
            release_op,
            json!(vec![unknown.clone(); 1000]),
            Expect::Is(200),
        ),
        (release_op, json!(["x"]), Expect::Is(400)),
        (release_op, json!([null]), Expect::Is(400)),
        (stop_op, json!([unknown]), Expect::Is(200)),
        (stop_op, json!(vec![unknown.clone(); 1000]), Expect::Is(200)),
        (
            stop_op,
            json!([cid(3, 1).to_string(), cid(3, 2).to_string()]),
            Expect::Is(200),
        ),
        (stop_op, json!(["container_1_2_3_4_5_6"]), Expect::Is(400)),
        (stop_op, json!([1]), Expect::Is(400)),
    ] {
        let path = ops[op].path.clone();
        // As the owning AM: a container token of the first named container's application
        // (the refusals without one are tested in `container_auth.rs`).
        let first = ids[0]
            .as_str()
            .and_then(|s| s.parse().ok())
            .unwrap_or(cid(9, 9));
        cases.push(Case {
            class: "release-stop",
            op,
            expect,
            req: Req::new(&ops[op].method, path)
                .json(json!({ "containerIds": ids }).to_string())
                .header("Authorization", format!("Bearer {}", good(first))),
        });
    }
    // Bodies past axum's 2 MiB limit: a 400, not a reset connection.
    for op in [start_op, stop_op] {
        cases.push(Case {
            class: "over-limit",
            op,
            expect: Expect::Is(400),
            req: Req::new("POST", ops[op].path.clone())
                .json(format!("{{\"x\":\"{}\"}}", "a".repeat(3_000_000))),
        });
    }
    // Extreme log sizes on the sentinel's stdout, on all three log-file paths.
    for path in [
        "/ws/v1/node/containers/{containerid}/logs/{filename}",
        "/ws/v1/node/containerlogs/{containerid}/{filename}",
        "/node/containerlogs/{containerid}/{user}/{filename}",
    ] {
        let op = op_index(&ops, "GET", path);
        for q in [
            "size=-9223372036854775808",
            "size=9223372036854775807",
            "size=-1",
            "size=0",
            "size=1&format=octet-stream",
            "size=-0",
            "size=+5",
        ] {
            cases.push(Case {
                class: "log-size",
                op,
                expect: Expect::Is(200),
                req: Req::new("GET", format!("{}?{q}", fill_with(path, sample))),
            });
        }
    }

    // No answer may show a file outside the container's logs; a bad token never starts one.
    let extra_check = |c: &Case, r: &Resp| -> Option<String> {
        if r.status == 200 && String::from_utf8_lossy(&r.body).contains("root:x:0:0") {
            return Some("the answer shows /etc/passwd".into());
        }
        if c.class == "forged-token" {
            let v = r.json().unwrap_or(Value::Null);
            let ok = v["successfullyStartedContainers"]
                .as_array()
                .map_or(0, Vec::len);
            let failed = v["failedRequests"].as_array().map_or(0, Vec::len);
            if ok > 0 || failed == 0 {
                return Some(format!(
                    "a bad token: {ok} started, {failed} refused (expected all refused)"
                ));
            }
        }
        None
    };
    let heartbeats_before = rm.state.lock().expect("lock").heartbeats.len();
    let daemon = Daemon {
        name: "NM",
        addr: nm.addr,
        fallback_prefix: FALLBACK_PREFIX,
    };
    let rows = tokio::task::block_in_place(|| run_barrage(&daemon, &ops, cases, &extra_check));

    // ---------------------------------------------------------- after: the NM still works
    let mut after = Vec::new();
    let (s, info) = nm.get_json("/ws/v1/node/info").await;
    if s != 200 || info["nodeInfo"]["id"] != nm.node_id.to_string() {
        after.push(format!("GET /ws/v1/node/info: {s} {info}"));
    }
    let (s, v) = nm.get_json(&sentinel_path).await;
    if s != 200 || fingerprint(&v) != before {
        after.push(format!(
            "the sentinel container changed: {s}\nbefore: {before}\nafter:  {v}"
        ));
    }
    let (s, list) = nm.get_json("/ws/v1/node/containers").await;
    if s != 200 || !list.to_string().contains(&sentinel.to_string()) {
        after.push(format!(
            "GET /ws/v1/node/containers: {s}, the sentinel not listed"
        ));
    }
    let (s, app) = nm
        .get_json(&format!("/ws/v1/node/apps/{}", sentinel.application_id()))
        .await;
    if s != 200 {
        after.push(format!("GET the sentinel's application: {s} {app}"));
    }
    let (s, log) = nm.get(&format!("{sentinel_path}/logs/stdout")).await;
    if s != 200 || !log.contains("sentinel") {
        after.push(format!("the sentinel's stdout: {s} {log:?}"));
    }
    // Heartbeats go on, and report the sentinel running.
    let deadline = Instant::now() + Duration::from_secs(5);
    while rm.state.lock().expect("lock").heartbeats.len() < heartbeats_before + 2
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let beats = rm.state.lock().expect("lock").heartbeats.len() - heartbeats_before;
    let reported = rm.last_report(&sentinel).map(|r| r.status.state);
    if beats < 2 || reported != Some(ContainerState::RUNNING) {
        after.push(format!(
            "{beats} heartbeats since the barrage began; the sentinel reported {reported:?}"
        ));
    }
    let panics = daemon_panics(TEST_NAMES);
    // A normal container still starts, runs and completes.
    let fresh = cid(1, 99);
    nm.run_container(&rm, fresh, USER, "echo after").await;
    let done = rm.wait_state(&fresh, ContainerState::COMPLETE).await;
    if done.status.exit_status != 0 {
        after.push(format!("a container started after the barrage: {done:?}"));
    }
    let stopped = nm.stop().await;
    if let Err(e) = stopped {
        after.push(format!("the NM did not stop cleanly: {e}"));
    }
    drop(rm);
    println!("whole test {:?}", started.elapsed());
    robust::assert_survived(&rows, &after, &panics);
}
