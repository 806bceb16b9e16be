//! System tests: the real `resourcemanager`, `nodemanager` and `spindle` binaries on
//! 127.0.0.1, driven over raw HTTP as a YARN client would, and through the CLI as a user
//! would. Every process a test starts is killed by pid when the test ends.

use std::time::Duration;

use nix::sys::signal::Signal;
use reqwest::Method;
use serde_json::{json, Value};
use spindle_system_tests::{app_id_in, bin, wait_until, Cluster, ClusterOpts};

fn new_app(c: &Cluster) -> String {
    let (status, v, _) = c.send(
        Method::POST,
        "/ws/v1/cluster/apps/new-application",
        &json!({}),
    );
    assert_eq!(status, 200, "{v}");
    assert!(v["maximum-resource-capability"]["memory"]
        .as_i64()
        .is_some_and(|m| m > 0));
    v["application-id"]
        .as_str()
        .expect("application-id")
        .to_string()
}

/// YARN's `application-submission-context` for a distributed-shell AM, exactly what a YARN
/// REST client would post: the `spindle` binary is shipped as a local resource.
fn ds_context(id: &str, n: u32, command: &str) -> Value {
    json!({
        "application-id": id,
        "application-name": "raw-http-dshell",
        "application-type": "DISTRIBUTEDSHELL",
        "queue": "default",
        "priority": 0,
        "max-app-attempts": 1,
        "am-container-spec": {
            "local-resources": {"entry": [{"key": "spindle", "value": {
                "resource": format!("file://{}", bin("spindle").display()), "type": "FILE", "visibility": "APPLICATION"}}]},
            "environment": {"entry": [
                {"key": "DISTRIBUTEDSHELL_NUM_CONTAINERS", "value": n.to_string()},
                {"key": "DISTRIBUTEDSHELL_CONTAINER_RESOURCES", "value": "memory-mb=256,vcores=1"},
                {"key": "DISTRIBUTEDSHELL_SHELL_COMMAND", "value": command}
            ]},
            "commands": {"command": "./spindle distributed-shell-am"}
        },
        "resource": {"memory": 256, "vCores": 1},
        "application-tags": {"tag": ["system-test"]}
    })
}

fn nm_log(c: &Cluster, container: &Value, file: &str) -> String {
    let http = container["nodeHttpAddress"]
        .as_str()
        .unwrap_or_default()
        .trim_start_matches("http://")
        .to_string();
    let cid = container["containerId"].as_str().unwrap_or_default();
    c.http
        .get(format!(
            "http://{http}/ws/v1/node/containerlogs/{cid}/{file}"
        ))
        .send()
        .and_then(|r| r.text())
        .unwrap_or_default()
}

/// Runs `spindle distributed-shell` to its end: (exit 0, stdout + stderr).
fn dshell(c: &Cluster, n: &str, resources: &str, command: &str) -> (bool, String) {
    let out = c.spindle(&[
        "distributed-shell",
        "--num-containers",
        n,
        "--container-resources",
        resources,
        "--shell-command",
        command,
    ]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn assert_remote_exception(body: &Value, exception: &str) {
    assert_eq!(body["RemoteException"]["exception"], exception, "{body}");
    assert!(
        body["RemoteException"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    assert!(
        body["RemoteException"]["javaClassName"].as_str().is_some(),
        "{body}"
    );
}

#[test]
fn a_yarn_rest_client_runs_a_distributed_shell_and_kills_an_application() {
    let c = Cluster::start(ClusterOpts {
        nodes: 2,
        ..Default::default()
    });
    let id = new_app(&c);
    let (status, body, location) = c.send(
        Method::POST,
        "/ws/v1/cluster/apps?user.name=tester",
        &ds_context(&id, 3, "echo worker-output from $CONTAINER_ID"),
    );
    assert_eq!(status, 202, "{body}");
    assert!(location.is_some_and(|l| l.ends_with(&format!("/ws/v1/cluster/apps/{id}"))));
    let app = c.wait_app_state(
        &id,
        &["FINISHED", "FAILED", "KILLED"],
        Duration::from_secs(60),
    );
    if app["finalStatus"] != "SUCCEEDED" {
        c.dump_logs();
    }
    assert_eq!(app["state"], "FINISHED", "{app}");
    assert_eq!(app["finalStatus"], "SUCCEEDED", "{app}");
    assert_eq!(app["user"], "tester");
    assert_eq!(app["applicationType"], "DISTRIBUTEDSHELL");
    assert!(app["amContainerLogs"]
        .as_str()
        .is_some_and(|l| l.contains("/node/containerlogs/")));
    // The workers' output is in their container logs, served by their NMs.
    let containers = c.containers_of(&id);
    assert_eq!(
        containers.len(),
        4,
        "the AM and three workers: {containers:?}"
    );
    let workers: Vec<Value> = containers
        .iter()
        .filter(|x| {
            !x["containerId"]
                .as_str()
                .unwrap_or_default()
                .ends_with("_000001")
        })
        .cloned()
        .collect();
    assert_eq!(workers.len(), 3);
    for w in &workers {
        let out = nm_log(&c, w, "stdout");
        let cid = w["containerId"].as_str().unwrap_or_default();
        assert_eq!(
            out.trim(),
            format!("worker-output from {cid}"),
            "each worker's own stdout"
        );
    }
    // The CLI sees the same application and its logs.
    let out = c.spindle(&["application", "-list", "-appStates", "ALL"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(&id) && text.contains("FINISHED") && text.contains("SUCCEEDED"),
        "{text}"
    );
    let out = c.spindle(&["logs", "-applicationId", &id]);
    let text = String::from_utf8_lossy(&out.stdout);
    for w in &workers {
        let line = format!(
            "worker-output from {}",
            w["containerId"].as_str().unwrap_or_default()
        );
        assert!(text.contains(&line), "spindle logs shows {line}: {text}");
    }
    let out = c.spindle(&["node", "-list"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Total Nodes:2"), "{text}");

    // A running application is killed: 202 while its containers stop, then KILLED.
    let id2 = new_app(&c);
    let (status, _, _) = c.send(
        Method::POST,
        "/ws/v1/cluster/apps",
        &ds_context(&id2, 2, "sleep 300"),
    );
    assert_eq!(status, 202);
    c.wait_app_state(&id2, &["RUNNING"], Duration::from_secs(30));
    wait_until("the workers to run", Duration::from_secs(30), || {
        (c.containers_of(&id2)
            .iter()
            .filter(|x| x["containerState"] == "RUNNING")
            .count()
            == 3)
            .then_some(())
    });
    let (status, body, _) = c.send(
        Method::PUT,
        &format!("/ws/v1/cluster/apps/{id2}/state"),
        &json!({"state": "KILLED"}),
    );
    assert!(status == 202 || status == 200, "{status} {body}");
    assert!(
        body["state"] == "ACCEPTED" || body["state"] == "KILLED",
        "{body}"
    );
    let app = c.wait_app_state(&id2, &["KILLED"], Duration::from_secs(20));
    assert_eq!(app["finalStatus"], "KILLED");
    let (status, body, _) = c.send(
        Method::PUT,
        &format!("/ws/v1/cluster/apps/{id2}/state"),
        &json!({"state": "KILLED"}),
    );
    assert_eq!((status, body), (200, json!({"state": "KILLED"})));
    // Its processes are gone from every NM.
    wait_until(
        "the NMs to stop every container",
        Duration::from_secs(20),
        || {
            let running: usize = c
                .nm_addrs
                .iter()
                .map(|nm| {
                    let v: Value = c
                        .http
                        .get(format!("http://{nm}/ws/v1/node/containers"))
                        .send()
                        .and_then(|r| r.json())
                        .unwrap_or(Value::Null);
                    v["containers"]["container"]
                        .as_array()
                        .map(|a| a.iter().filter(|x| x["state"] == "RUNNING").count())
                        .unwrap_or(0)
                })
                .sum();
            (running == 0).then_some(())
        },
    );

    // Bad input: a malformed body and an unknown id get YARN's RemoteException.
    let r = c
        .http
        .post(c.url("/ws/v1/cluster/apps"))
        .header("content-type", "application/json")
        .body("{\"application-id\": ")
        .send()
        .expect("post");
    assert_eq!(r.status().as_u16(), 400);
    assert_remote_exception(&r.json().expect("json"), "BadRequestException");
    let (status, body) = c.get("/ws/v1/cluster/apps/application_1_9999");
    assert_eq!(status, 404);
    assert_remote_exception(&body, "NotFoundException");
    let (status, body, _) = c.send(
        Method::PUT,
        &format!("/ws/v1/cluster/apps/{id}/state"),
        &json!({"state": "FINISHED"}),
    );
    assert_eq!(status, 400);
    assert_remote_exception(&body, "BadRequestException");
    // The RM is alive after all of it: existing clients probe /cluster.
    assert_eq!(
        c.http
            .get(c.url("/cluster"))
            .send()
            .expect("ui")
            .status()
            .as_u16(),
        200
    );
}

#[test]
fn a_killed_nodemanager_is_lost_and_its_containers_are_reported_to_the_am() {
    let c = Cluster::start(ClusterOpts {
        nodes: 2,
        rm_props: vec![
            (
                "yarn.nm.liveness-monitor.expiry-interval-ms".into(),
                "2000".into(),
            ),
            (
                "yarn.resourcemanager.nodemanagers.heartbeat-interval-ms".into(),
                "250".into(),
            ),
        ],
        ..Default::default()
    });
    let pids = c.dir.path().join("worker-pids");
    let id = new_app(&c);
    let cmd = format!("echo $$ >> {}; exec sleep 5", pids.display());
    let (status, _, _) = c.send(
        Method::POST,
        "/ws/v1/cluster/apps",
        &ds_context(&id, 4, &cmd),
    );
    assert_eq!(status, 202);
    wait_until("four workers to run", Duration::from_secs(30), || {
        (c.containers_of(&id)
            .iter()
            .filter(|x| x["containerState"] == "RUNNING")
            .count()
            == 5)
            .then_some(())
    });
    // Kill the NM that does not host the AM.
    let (_, atts) = c.get(&format!("/ws/v1/cluster/apps/{id}/appattempts"));
    let am_node = atts["appAttempts"]["appAttempt"][0]["nodeId"]
        .as_str()
        .expect("am node")
        .to_string();
    let victim = c
        .nm_addrs
        .iter()
        .position(|a| *a != am_node)
        .expect("another node");
    let victim_addr = c.nm_addrs[victim].clone();
    assert!(
        c.containers_of(&id)
            .iter()
            .any(|x| x["nodeId"] == victim_addr.as_str()),
        "a worker runs on the victim"
    );
    c.nms[victim].signal(Signal::SIGKILL);
    let lost = wait_until("the node to be LOST", Duration::from_secs(15), || {
        let (_, v) = c.get(&format!("/ws/v1/cluster/nodes/{victim_addr}"));
        (v["node"]["state"] == "LOST").then_some(v)
    });
    assert!(
        lost["node"]["healthReport"]
            .as_str()
            .is_some_and(|h| h.contains("lost")),
        "{lost}"
    );
    let app = c.wait_app_state(
        &id,
        &["FINISHED", "FAILED", "KILLED"],
        Duration::from_secs(60),
    );
    // The AM heard of the lost containers (-100 ABORTED), asked again, and succeeded.
    let am = c
        .containers_of(&id)
        .into_iter()
        .next()
        .expect("am container");
    let am_out = nm_log(&c, &am, "stdout");
    assert!(am_out.contains("-100"), "the AM was told: {am_out}");
    assert_eq!(app["finalStatus"], "SUCCEEDED", "{app}\n{am_out}");
    let aborted = c
        .containers_of(&id)
        .iter()
        .filter(|x| x["containerExitStatus"] == -100)
        .count();
    assert!(aborted >= 1);
    let (_, m) = c.get("/ws/v1/cluster/metrics");
    assert_eq!(m["clusterMetrics"]["lostNodes"], 1);
    // An NM that stops cleanly (SIGTERM) unregisters: its node is SHUTDOWN at once.
    let survivor = 1 - victim;
    let survivor_addr = c.nm_addrs[survivor].clone();
    c.nms[survivor].signal(Signal::SIGTERM);
    wait_until(
        "the stopped node to be SHUTDOWN",
        Duration::from_secs(10),
        || {
            let (_, v) = c.get(&format!("/ws/v1/cluster/nodes/{survivor_addr}"));
            (v["node"]["state"] == "SHUTDOWN").then_some(())
        },
    );
    let (_, m) = c.get("/ws/v1/cluster/metrics");
    assert_eq!(m["clusterMetrics"]["shutdownNodes"], 1);
    // The orphaned workers of the killed NM are ours to stop.
    for pid in std::fs::read_to_string(&pids)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse::<i32>().ok())
    {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL);
    }
}

#[test]
fn a_malformed_configuration_stops_each_daemon_with_one_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases = [
        (
            "<configuration>\n  <property>\n    <name>yarn.nodemanager.resource.memory-mb</name>\n    <value>lots</value>\n  </property>\n</configuration>\n",
            vec!["yarn-site.xml:2", "yarn.nodemanager.resource.memory-mb", "lots"],
            "nodemanager",
        ),
        (
            "<configuration>\n  <property>\n    <name>yarn.scheduler.minimum-allocation-mb</name>\n    <value>x1</value>\n  </property>\n</configuration>\n",
            vec!["yarn-site.xml:2", "yarn.scheduler.minimum-allocation-mb", "x1"],
            "resourcemanager",
        ),
        ("<configuration>\n  <property>\n    <name>a</name>\n    <value>b</value>\n", vec!["yarn-site.xml:"], "resourcemanager"),
        ("<configuration>\n  <property>\n    <name>a</name>\n  </propertyy>\n</configuration>\n", vec!["yarn-site.xml:4"], "nodemanager"),
    ];
    for (i, (xml, want, daemon)) in cases.iter().enumerate() {
        let conf = dir.path().join(format!("c{i}"));
        std::fs::create_dir_all(&conf).expect("dir");
        std::fs::write(conf.join("yarn-site.xml"), xml).expect("write");
        let out = std::process::Command::new(bin(daemon))
            .arg("--conf-dir")
            .arg(&conf)
            .args([
                "-D",
                "yarn.resourcemanager.webapp.address=127.0.0.1:0",
                "-D",
                "yarn.nodemanager.webapp.address=127.0.0.1:0",
            ])
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{daemon} case {i}: {err}");
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{daemon} case {i}: one line, got: {err}");
        for w in want {
            assert!(
                lines[0].contains(w),
                "{daemon} case {i}: '{}' lacks '{w}'",
                lines[0]
            );
        }
    }
}

#[test]
fn the_distributed_shell_client_and_the_cli_work_end_to_end() {
    let c = Cluster::start(ClusterOpts {
        nodes: 2,
        ..Default::default()
    });
    let (ok, text) = dshell(
        &c,
        "2",
        "memory-mb=256,vcores=1",
        "echo hello from $CONTAINER_ID",
    );
    assert!(ok, "{text}");
    assert!(text.contains("SUCCEEDED"), "{text}");
    let id = app_id_in(&text).expect("the client names the application");
    let out = c.spindle(&["application", "-status", &id]);
    let status = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{status}");
    assert!(
        status.contains("Application Report") && status.contains("SUCCEEDED"),
        "{status}"
    );
    // A failing command fails the application, and the client says so with a non-zero exit.
    let (ok, text) = dshell(&c, "1", "memory-mb=256,vcores=1", "exit 3");
    assert!(!ok, "{text}");
    assert!(text.contains("FAILED"), "{text}");
    // Unknown application: a clear message and a non-zero exit.
    let out = c.spindle(&["application", "-status", "application_1_9999"]);
    assert!(!out.status.success());
}

#[test]
fn the_minicluster_command_runs_the_demo_and_leaves_no_process() {
    let work = tempfile::tempdir().expect("tempdir");
    let out = std::process::Command::new(bin("spindle"))
        .args([
            "minicluster",
            "--nodes",
            "2",
            "--demo",
            "--rm-address",
            "127.0.0.1:0",
            "--work-dir",
        ])
        .arg(work.path())
        .output()
        .expect("minicluster");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("SUCCEEDED"), "{text}");
    // No daemon outlives the command.
    let marker = work.path().display().to_string();
    let leftovers: Vec<String> = std::fs::read_dir("/proc")
        .expect("proc")
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .chars()
                .all(|c| c.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .filter(|cmd| cmd.contains(&marker))
        .collect();
    assert!(leftovers.is_empty(), "left behind: {leftovers:?}");
}

/// A node whose health script reports an ERROR turns UNHEALTHY at the RM with the script's
/// line as its report, and gets no containers; the healthy node runs them all.
#[test]
fn an_unhealthy_node_gets_no_containers() {
    let mut c = Cluster::start(ClusterOpts {
        nodes: 1,
        ..Default::default()
    });
    let scratch = tempfile::tempdir().expect("tempdir");
    let script = scratch.path().join("health.sh");
    std::fs::write(&script, "#!/bin/sh\necho 'ERROR gpu 3 fell off the bus'\n").expect("script");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    c.add_nm(&[
        (
            "yarn.nodemanager.health-checker.script.path".to_string(),
            script.display().to_string(),
        ),
        (
            "yarn.nodemanager.health-checker.interval-ms".to_string(),
            "200".to_string(),
        ),
    ]);
    let sick = wait_until(
        "the second node to be UNHEALTHY",
        Duration::from_secs(30),
        || {
            let (_, v) = c.get("/ws/v1/cluster/nodes?states=UNHEALTHY");
            v["nodes"]["node"].as_array()?.first().cloned()
        },
    );
    assert_eq!(
        sick["healthReport"], "ERROR gpu 3 fell off the bus",
        "{sick}"
    );
    let sick_id = sick["id"].as_str().unwrap_or_default().to_string();

    let (ok, text) = dshell(&c, "3", "memory-mb=256,vcores=1", "true");
    assert!(ok && text.contains("SUCCEEDED"), "{text}");
    let id = app_id_in(&text).expect("the client names the application");
    let (_, atts) = c.get(&format!("/ws/v1/cluster/apps/{id}/appattempts"));
    let am_node = atts["appAttempts"]["appAttempt"][0]["nodeId"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_ne!(am_node, sick_id, "the AM ran on the unhealthy node");
    // Every container's log is on the healthy node: the unhealthy one ran nothing.
    let sick_logs = c.dir.path().join("nm1/logs").join(&id);
    assert!(!sick_logs.exists(), "containers ran on {sick_id}");
}

/// `node-resources.xml`'s `yarn.nodemanager.resource-type.<type>`: an NM offers an extended
/// type the RM declares (`yarn.resource-types`), the RM's node view shows it, and containers
/// that ask for it run.
#[test]
fn a_node_offers_a_declared_extended_resource_type() {
    let c = Cluster::start(ClusterOpts {
        nodes: 1,
        rm_props: vec![(
            "yarn.resource-types".to_string(),
            "example.com/licenses".to_string(),
        )],
        nm_props: vec![(
            "yarn.nodemanager.resource-type.example.com/licenses".to_string(),
            "2".to_string(),
        )],
    });
    let (_, nodes) = c.get("/ws/v1/cluster/nodes");
    let infos = nodes["nodes"]["node"][0]["totalResource"]["resourceInformations"]
        ["resourceInformation"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let licenses = infos
        .iter()
        .find(|i| i["name"] == "example.com/licenses")
        .unwrap_or_else(|| panic!("no licenses in {nodes}"));
    assert_eq!(licenses["value"], 2, "{licenses}");
    let (ok, text) = dshell(
        &c,
        "3",
        "memory-mb=128,vcores=1,example.com/licenses=1",
        "true",
    );
    assert!(ok && text.contains("SUCCEEDED"), "{text}");
}
