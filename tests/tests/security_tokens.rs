//! Token keys on a real cluster, attacked by an outsider who learned the container-token
//! master key (as an NM receives it: the harness gives every daemon a cluster secret, and
//! the test, holding that secret, registers a node and unwraps the key from the answer).
//! With that key:
//! - an AM-RM token it signs for a running application's attempt is refused by
//!   `/ws/v1/am/allocate` (401): AM-RM tokens are signed with a key that never leaves the RM;
//! - a forged container token (another key under the same key id) and a tampered one (a
//!   signed identifier with a field changed) sent to a real NM's start are refused: each
//!   lands in `failedRequests` (`InvalidToken`) and nothing runs;
//! - stop, release and signal of application X's running container with application Y's
//!   container token are refused (403; 401 without a token) and X's container still runs;
//!   each refusal is an audit line in the NM's log.

use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{json, Value};
use spindle_common::cluster_secret::ClusterSecret;
use spindle_common::ids::{ApplicationAttemptId, ContainerId, NodeId};
use spindle_common::records::tracker::RegisterNodeManagerResponse;
use spindle_common::token::{
    issue_amrm_token, issue_container_token, unverified_container_identifier, AmRmKey,
    ContainerKey, ContainerTokenIdentifier,
};
use spindle_system_tests::{wait_until, Cluster, ClusterOpts};

const LIMIT: Duration = Duration::from_secs(40);

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as u64
}

/// A distributed shell whose one worker sleeps for minutes.
fn submit_sleeper(c: &Cluster, name: &str) -> String {
    c.submit_dshell(name, "default", None, "sleep 300")
}

/// The application's containers as the RM lists them: (id, node, state).
fn containers(c: &Cluster, app: &str) -> Vec<(String, String, String)> {
    let mut out: Vec<_> = c
        .containers_of(app)
        .iter()
        .map(|x| {
            (
                x["containerId"].as_str().unwrap_or_default().to_string(),
                x["nodeId"].as_str().unwrap_or_default().to_string(),
                x["containerState"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

/// The running worker (not the AM: the highest container id) of `app`, and its node.
fn running_worker(c: &Cluster, app: &str) -> (ContainerId, String) {
    let cs = wait_until(&format!("{app}'s AM and worker to run"), LIMIT, || {
        let cs = containers(c, app);
        (cs.len() == 2 && cs.iter().all(|x| x.2 == "RUNNING")).then_some(cs)
    });
    let w = cs.iter().max().expect("a worker");
    (w.0.parse().expect("container id"), w.1.clone())
}

/// The container-token master key, as an NM gets it: a registration signed with the cluster
/// secret, whose answer carries the key wrapped with that secret.
fn key_as_a_node_gets_it(c: &Cluster, secret: &ClusterSecret) -> ContainerKey {
    let node = "127.0.0.1:1";
    let path = "/ws/v1/node-tracker/register";
    let body = json!({"nodeId": node, "httpAddress": node,
        "resource": {"memory": 0, "vCores": 0}, "nmVersion": "outsider"})
    .to_string();
    let auth = secret.sign("POST", path, node, body.as_bytes(), now_ms(), [7; 16]);
    let r = c
        .http
        .post(c.url(path))
        .header("content-type", "application/json")
        .header("authorization", auth)
        .body(body)
        .send()
        .expect("register");
    assert_eq!(r.status().as_u16(), 200);
    let resp: RegisterNodeManagerResponse = r.json().expect("register answer");
    let mk = resp.container_token_master_key.expect("a key");
    assert!(
        mk.wrapped_key.is_some() && mk.bytes.is_none() && !mk.unwrapped,
        "with a cluster secret the key travels wrapped only: {mk:?}"
    );
    let key = mk.open(Some(secret)).expect("the secret unwraps it");
    // Gone again, so nothing is scheduled on it.
    let path = "/ws/v1/node-tracker/unregister";
    let body = json!({ "nodeId": node }).to_string();
    let auth = secret.sign("POST", path, node, body.as_bytes(), now_ms(), [8; 16]);
    let r = c
        .http
        .post(c.url(path))
        .header("content-type", "application/json")
        .header("authorization", auth)
        .body(body)
        .send()
        .expect("unregister");
    assert_eq!(r.status().as_u16(), 200);
    key
}

fn ident(id: ContainerId, node: &str, user: &str) -> ContainerTokenIdentifier {
    let node: NodeId = node.parse().expect("node id");
    ContainerTokenIdentifier::new(
        id,
        node,
        user.into(),
        &spindle_common::Resource::new(128, 1),
        now_ms() + 600_000,
        0,
        false,
    )
}

/// `token` with its identifier changed by `f`, the signature kept.
fn tampered(token: &str, f: impl FnOnce(&mut Value)) -> String {
    let mut v =
        serde_json::to_value(unverified_container_identifier(token).expect("token")).expect("json");
    f(&mut v);
    let sig = token.split_once('.').expect("a token").1;
    format!(
        "{}.{sig}",
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&v).expect("json"))
    )
}

fn post(c: &Cluster, url: &str, body: &Value, auth: Option<&str>) -> (u16, Value) {
    let mut req = c.http.post(url).json(body);
    if let Some(a) = auth {
        req = req.header("authorization", a);
    }
    let r = req.send().expect("send");
    let s = r.status().as_u16();
    (s, r.json().unwrap_or(Value::Null))
}

/// The NM's view of a container's state.
fn nm_state(c: &Cluster, node: &str, id: &ContainerId) -> String {
    let r = c
        .http
        .get(format!("http://{node}/ws/v1/node/containers/{id}"))
        .send()
        .expect("GET");
    let v: Value = r.json().unwrap_or(Value::Null);
    v["container"]["state"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_leaked_container_key_signs_nothing_the_rm_or_an_nm_accepts() {
    let c = Cluster::start(ClusterOpts {
        nodes: 2,
        ..Default::default()
    });
    let secret = ClusterSecret::load(&c.cluster_secret()).expect("the harness's secret");
    let x = submit_sleeper(&c, "x");
    let y = submit_sleeper(&c, "y");
    c.wait_app_state(&x, &["RUNNING"], LIMIT);
    c.wait_app_state(&y, &["RUNNING"], LIMIT);
    let (x_worker, x_node) = running_worker(&c, &x);
    let (y_worker, _) = running_worker(&c, &y);

    let key = key_as_a_node_gets_it(&c, &secret);

    // 1. The key cannot sign an AM-RM token: allocate as X's AM is refused.
    // The worker's attempt is X's current one (one attempt at most).
    let attempt: ApplicationAttemptId = x_worker.attempt_id;
    let as_amrm = AmRmKey::from_hex(
        &key.bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>(),
    )
    .expect("key bytes");
    let forged_amrm = issue_amrm_token(&as_amrm, &attempt);
    let (s, v) = post(
        &c,
        &c.url("/ws/v1/am/allocate"),
        &json!({"responseId": 0, "progress": 0.5, "release": [x_worker.to_string()]}),
        Some(&format!("Bearer {forged_amrm}")),
    );
    assert_eq!(s, 401, "{v}");
    assert_eq!(
        v["RemoteException"]["exception"], "AuthorizationException",
        "{v}"
    );
    // A container token is no AM-RM token either.
    let ct = issue_container_token(&key, &ident(x_worker, &x_node, "alice"));
    let (s, v) = post(
        &c,
        &c.url("/ws/v1/am/allocate"),
        &json!({}),
        Some(&format!("Bearer {ct}")),
    );
    assert_eq!(s, 401, "{v}");

    // 2. Forged and tampered container tokens start nothing on a real NM.
    let marker_dir = c.dir.path().join("markers");
    std::fs::create_dir_all(&marker_dir).expect("markers");
    let attempt_x = x_worker.attempt_id;
    let new_id = |seq: u64| ContainerId::new(attempt_x, 0, 9_000 + seq);
    let forged = issue_container_token(
        &ContainerKey::generate(key.id()).expect("key"),
        &ident(new_id(1), &x_node, "alice"),
    );
    let genuine = issue_container_token(&key, &ident(new_id(2), &x_node, "alice"));
    let as_root = tampered(&genuine, |v| v["appSubmitter"] = json!("root"));
    let longer = tampered(
        &issue_container_token(&key, &ident(new_id(3), &x_node, "alice")),
        |v| v["expiryTimeMs"] = json!(u64::MAX / 2),
    );
    let requests: Vec<Value> = [(1, &forged), (2, &as_root), (3, &longer)]
        .iter()
        .map(|(seq, t)| {
            json!({"containerToken": t, "containerLaunchContext": {
                "commands": [format!("touch {}/ran-{seq}", marker_dir.display())]}})
        })
        .collect();
    let (s, v) = post(
        &c,
        &format!("http://{x_node}/ws/v1/node/containers/start"),
        &json!({ "startContainerRequest": requests }),
        None,
    );
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        v["successfullyStartedContainers"]
            .as_array()
            .map_or(0, Vec::len),
        0,
        "{v}"
    );
    let failed = v["failedRequests"].as_array().cloned().unwrap_or_default();
    assert_eq!(failed.len(), 3, "{v}");
    for f in &failed {
        assert_eq!(f["exception"], "InvalidToken", "{f}");
        assert!(
            f["message"]
                .as_str()
                .unwrap_or_default()
                .contains("signature does not verify"),
            "{f}"
        );
    }
    std::thread::sleep(Duration::from_secs(1));
    for seq in 1..=3 {
        assert!(
            !marker_dir.join(format!("ran-{seq}")).exists(),
            "a refused start ran its command"
        );
        let (status, _) = {
            let r = c
                .http
                .get(format!(
                    "http://{x_node}/ws/v1/node/containers/{}",
                    new_id(seq)
                ))
                .send()
                .expect("GET");
            (r.status().as_u16(), ())
        };
        assert_eq!(status, 404, "a refused start left a container behind");
    }

    // 3. Stop, release and signal of X's worker with Y's container token: refused.
    let y_token = format!(
        "Bearer {}",
        issue_container_token(&key, &ident(y_worker, &x_node, "bob"))
    );
    let calls = [
        (
            "stop",
            json!({"containerIds": [x_worker.to_string()]}),
            "Stop Container Request",
        ),
        (
            "release",
            json!({"containerIds": [x_worker.to_string()]}),
            "Release Container Request",
        ),
        (
            "signal",
            json!({"containerId": x_worker.to_string(), "command": "FORCEFUL_SHUTDOWN"}),
            "Signal Container Request",
        ),
    ];
    for (call, body, _) in &calls {
        let url = format!("http://{x_node}/ws/v1/node/containers/{call}");
        let (s, v) = post(&c, &url, body, Some(&y_token));
        assert_eq!(s, 403, "{call} with Y's token: {v}");
        assert_eq!(
            v["RemoteException"]["exception"], "ForbiddenException",
            "{v}"
        );
        let (s, v) = post(&c, &url, body, None);
        assert_eq!(s, 401, "{call} without a token: {v}");
    }
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(nm_state(&c, &x_node, &x_worker), "RUNNING");
    let still = containers(&c, &x);
    assert!(
        still
            .iter()
            .any(|w| w.0 == x_worker.to_string() && w.2 == "RUNNING"),
        "{still:?}"
    );
    assert_eq!(c.app(&x)["state"], "RUNNING");

    // Each refusal is an audit line in that NM's log.
    let nm_log: String = c.nms.iter().map(|n| n.log_text()).collect();
    for (_, _, op) in &calls {
        let line = nm_log
            .lines()
            .find(|l| {
                l.contains(&format!("OPERATION={op}"))
                    && l.contains("TARGET=ContainerManageImpl")
                    && l.contains("RESULT=FAILURE")
                    && l.contains(&format!("CONTAINERID={x_worker}"))
            })
            .unwrap_or_else(|| panic!("no audit line for {op}:\n{nm_log}"));
        assert!(line.contains("IP=127.0.0.1"), "{line}");
    }
}

/// The container-token master key rolls on a real cluster: with a 2 s NM expiry the rolling
/// interval may be 7 s (more than 3 x the expiry) and a rolled key signs 3 s after it was
/// sent. Across two rolls the NM is sent each new key, applications keep starting
/// containers, and a token signed with the first key (two keys old) no longer starts one.
#[test]
fn the_container_key_rolls_and_work_goes_on() {
    let c = Cluster::start(ClusterOpts {
        nodes: 1,
        rm_props: vec![
            (
                "yarn.nm.liveness-monitor.expiry-interval-ms".into(),
                "2000".into(),
            ),
            (
                "yarn.resourcemanager.container-tokens.master-key-rolling-interval-secs".into(),
                "7".into(),
            ),
        ],
        ..Default::default()
    });
    let first = c.container_key();
    let node = c.nm_addrs[0].clone();
    // Two rolls, the second one active: 2 x 7 s + 3 s.
    let rolled = |c: &Cluster| c.rm.log_text().matches("master key rolled").count();
    wait_until("two rolls", Duration::from_secs(30), || {
        (rolled(&c) >= 2).then_some(())
    });
    std::thread::sleep(Duration::from_secs(4));
    let newest = c.container_key();
    assert_ne!(newest.id(), first.id());
    let nm_log = c.nms[0].log_text();
    assert!(
        nm_log
            .matches("container-token master key received")
            .count()
            >= 3,
        "the NM got the first key and both rolled ones:\n{nm_log}"
    );

    // Work goes on: a distributed shell starts and finishes its containers.
    let out = c.spindle_within(
        &[
            "distributed-shell",
            "--num-containers",
            "2",
            "--container-resources",
            "memory-mb=128,vcores=1",
            "--shell-command",
            "true",
        ],
        LIMIT,
    );
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // A token signed with the first key is two keys old: refused at start.
    let attempt: ApplicationAttemptId = "appattempt_1_0001_000001".parse().expect("attempt");
    let old = issue_container_token(
        &first,
        &ident(ContainerId::new(attempt, 0, 1), &node, "alice"),
    );
    let (s, v) = post(
        &c,
        &format!("http://{node}/ws/v1/node/containers/start"),
        &json!({"startContainerRequest": [{"containerToken": old,
            "containerLaunchContext": {"commands": ["true"]}}]}),
        None,
    );
    assert_eq!(s, 200, "{v}");
    let msg = v["failedRequests"][0]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        msg.contains(&format!("master key {}", first.id())) && msg.contains("not held"),
        "{v}"
    );
}
