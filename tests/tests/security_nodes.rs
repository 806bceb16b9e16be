//! An outsider with nothing but network access to the RM cannot act as a NodeManager: on a
//! real cluster (the harness gives the RM and every NM a cluster secret,
//! `spindle.cluster.secret-file`) with a long-running distributed shell, an unsigned or
//! forged register, heartbeat and unregister, each aimed at a real node, are refused 401 and
//! change nothing (the node list, the application and its running containers stay as they
//! were), each refusal is an `RMAuditLogger` line in the RM's log, and a real `nodemanager`
//! started with another secret is refused and never listed.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};
use spindle_system_tests::{
    bin, wait_until, write_cluster_secret, Cluster, ClusterOpts, CLUSTER_SECRET_FILE,
};

const LIMIT: Duration = Duration::from_secs(30);

/// The nodes the RM lists, as (id, state, healthReport), sorted.
fn nodes(c: &Cluster) -> Vec<(String, String, String)> {
    let (s, v) = c.get("/ws/v1/cluster/nodes");
    assert_eq!(s, 200, "{v}");
    let mut out: Vec<_> = v["nodes"]["node"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|n| {
            (
                n["id"].as_str().unwrap_or_default().to_string(),
                n["state"].as_str().unwrap_or_default().to_string(),
                n["healthReport"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

/// An application's containers as (id, node, state), sorted.
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

/// A distributed shell whose one worker sleeps for minutes.
fn submit_sleeper(c: &Cluster) -> String {
    c.submit_dshell("sleeper", "default", None, "sleep 300")
}

/// POSTs `body` to a node-tracker path as an outsider, with `auth` as the Authorization
/// header (none when `None`): the status and the body.
fn outsider(c: &Cluster, path: &str, body: &Value, auth: Option<&str>) -> (u16, Value) {
    let mut req = c
        .http
        .post(c.url(path))
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(a) = auth {
        req = req.header("authorization", a);
    }
    let r = req.send().expect("send");
    let s = r.status().as_u16();
    (s, r.json().unwrap_or(Value::Null))
}

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis()
}

#[test]
fn an_outsider_cannot_register_heartbeat_or_unregister_a_node() {
    let c = Cluster::start(ClusterOpts {
        nodes: 2,
        ..Default::default()
    });
    assert!(c.cluster_secret().exists());
    let rm_log = c.rm.log_text();
    assert!(
        !rm_log.contains("not authenticated"),
        "the harness runs the RM with a cluster secret:\n{rm_log}"
    );

    let app = submit_sleeper(&c);
    c.wait_app_state(&app, &["RUNNING"], LIMIT);
    wait_until("the AM and its worker to run", LIMIT, || {
        let cs = containers(&c, &app);
        (cs.len() == 2 && cs.iter().all(|x| x.2 == "RUNNING")).then_some(())
    });
    let nodes_before = nodes(&c);
    let containers_before = containers(&c, &app);
    assert_eq!(nodes_before.len(), 2, "{nodes_before:?}");
    assert!(nodes_before.iter().all(|n| n.1 == "RUNNING"));

    // The attacks, each aimed at a real node (the one running the worker, say).
    let (worker, node) = containers_before
        .iter()
        .map(|x| (x.0.clone(), x.1.clone()))
        .max()
        .expect("a container");
    let register = json!({"nodeId": node, "httpAddress": node,
        "resource": {"memory": 4096, "vCores": 4}, "nmVersion": "evil",
        "containerStatuses": []});
    let fake_register = json!({"nodeId": "127.0.0.1:1", "httpAddress": "127.0.0.1:1",
        "resource": {"memory": 1048576, "vCores": 1024}, "nmVersion": "evil"});
    let heartbeat = json!({"nodeId": node, "responseId": 0, "nodeStatus": {
        "healthy": false, "healthReport": "forged by an outsider",
        "containersStatuses": [{"containerId": worker, "state": "COMPLETE", "exitStatus": 0,
            "diagnostics": "forged", "resource": {"memory": 256, "vCores": 1}}]}});
    let unregister = json!({"nodeId": node});
    let forged = format!(
        "SpindleNode node={node}, ts={}, nonce={}, sig={}",
        now_ms(),
        "ab".repeat(16),
        "00".repeat(32)
    );
    let attacks = [
        (
            "/ws/v1/node-tracker/register",
            &fake_register,
            "Register Node",
        ),
        ("/ws/v1/node-tracker/register", &register, "Register Node"),
        (
            "/ws/v1/node-tracker/heartbeat",
            &heartbeat,
            "Node Heartbeat",
        ),
        (
            "/ws/v1/node-tracker/unregister",
            &unregister,
            "Unregister Node",
        ),
    ];
    for (path, body, operation) in attacks {
        for auth in [None, Some(forged.as_str()), Some("Basic ZXZpbDpldmls")] {
            let (s, v) = outsider(&c, path, body, auth);
            assert_eq!(s, 401, "{path} with {auth:?}: {v}");
            assert_eq!(
                v["RemoteException"]["exception"], "AuthorizationException",
                "{v}"
            );
            let msg = v["RemoteException"]["message"].as_str().unwrap_or_default();
            assert!(msg.contains(operation), "{msg}");
        }
    }

    // Nothing changed: the same nodes, healthy; the same containers, running, for a while.
    for _ in 0..4 {
        assert_eq!(nodes(&c), nodes_before);
        assert_eq!(containers(&c, &app), containers_before);
        std::thread::sleep(Duration::from_millis(500));
    }
    let (_, a) = c.get(&format!("/ws/v1/cluster/apps/{app}"));
    assert_eq!(a["app"]["state"], "RUNNING", "{a}");

    // Every refusal is audited with YARN's fields and the caller's address.
    let rm_log = c.rm.log_text();
    for operation in ["Register Node", "Node Heartbeat", "Unregister Node"] {
        let line = rm_log
            .lines()
            .find(|l| {
                l.contains(&format!("OPERATION={operation}"))
                    && l.contains("TARGET=ResourceTrackerService")
                    && l.contains("RESULT=FAILURE")
                    && l.contains("PERMISSIONS=Unauthenticated")
                    && l.contains("IP=127.0.0.1")
            })
            .unwrap_or_else(|| panic!("no audit line for {operation}:\n{rm_log}"));
        assert!(line.contains("DESCRIPTION="), "{line}");
    }

    // A real NodeManager with another cluster's secret is refused and never listed.
    let wrong = c.dir.path().join("another-secret");
    write_cluster_secret(&wrong);
    let mut c = c;
    let i = c.add_nm(&[(CLUSTER_SECRET_FILE.to_string(), wrong.display().to_string())]);
    let stranger = c.nm_addrs[i].clone();
    wait_until("the stranger NM to be refused", LIMIT, || {
        c.nms[i]
            .log_text()
            .contains("refused this node's signature")
            .then_some(())
    });
    assert!(c.nms[i].is_running(), "a refused NM keeps retrying");
    let listed = nodes(&c);
    assert!(listed.iter().all(|n| n.0 != stranger), "{listed:?}");
    assert_eq!(listed, nodes_before);

    // Clean up: the application's processes end with it.
    let (s, v, _) = c.send(
        Method::PUT,
        &format!("/ws/v1/cluster/apps/{app}/state"),
        &json!({"state": "KILLED"}),
    );
    assert!(s == 200 || s == 202, "{s} {v}");
    c.wait_app_state(&app, &["KILLED"], LIMIT);
}

#[test]
fn a_secret_file_the_daemons_cannot_use_stops_them_with_one_line() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let conf = dir.path().join("conf");
    std::fs::create_dir_all(&conf).expect("conf");
    std::fs::write(
        conf.join("yarn-site.xml"),
        "<configuration></configuration>\n",
    )
    .expect("yarn-site");
    let loose = dir.path().join("loose-secret");
    write_cluster_secret(&loose);
    std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let missing = dir.path().join("missing-secret");
    for daemon in ["resourcemanager", "nodemanager"] {
        for (file, problem) in [(&loose, "0644"), (&missing, "no such file")] {
            let out = spindle_system_tests::output_within(
                {
                    let mut cmd = std::process::Command::new(bin(daemon));
                    cmd.arg("--conf-dir").arg(&conf).args([
                        "-D",
                        "yarn.resourcemanager.webapp.address=127.0.0.1:1",
                        "-D",
                        "yarn.nodemanager.webapp.address=127.0.0.1:0",
                        "-D",
                        &format!(
                            "spindle.resourcemanager.state-store.path={}",
                            dir.path().join("rm.sqlite").display()
                        ),
                        "-D",
                        &format!("{CLUSTER_SECRET_FILE}={}", file.display()),
                    ]);
                    cmd
                },
                LIMIT,
            );
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{daemon} {problem}: {err}");
            let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
            assert_eq!(lines.len(), 1, "{daemon}: one line, got: {err}");
            for want in [CLUSTER_SECRET_FILE, &file.display().to_string(), problem] {
                assert!(
                    lines[0].contains(want),
                    "{daemon}: '{}' lacks '{want}'",
                    lines[0]
                );
            }
        }
    }
    assert!(
        !dir.path().join("rm.sqlite").exists(),
        "the RM stopped before it made a store"
    );
}

#[test]
fn the_cli_writes_a_secret_once_and_checks_it_as_the_daemons_do() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("cluster-secret");
    let run = |args: &[&str]| {
        let mut cmd = std::process::Command::new(bin("spindle"));
        cmd.arg("cluster-secret").args(args);
        spindle_system_tests::output_within(cmd, LIMIT)
    };
    let f = file.display().to_string();
    let out = run(&["-generate", &f]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains(&f), "{out:?}");
    let meta = std::fs::metadata(&file).expect("written");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let first = std::fs::read(&file).expect("read");
    // Never overwritten.
    let out = run(&["-generate", &f]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("already exists"),
        "{out:?}"
    );
    assert_eq!(std::fs::read(&file).expect("read"), first);
    assert_eq!(run(&["-check", &f]).status.code(), Some(0));
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o604)).expect("chmod");
    let out = run(&["-check", &f]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("0604"),
        "{out:?}"
    );
}
