//! System test: the YARN-compatible client commands against a real cluster (one RM, two
//! NMs) running a distributed shell. Each command's output has YARN's layout, and the
//! changes (`-movetoqueue`/`-changeQueue`, `-updatePriority`, `-updateLifetime`) show in the
//! RM's REST view; a lifetime that runs out kills the application with YARN's diagnostic.
//! Every process the test starts is killed by pid when it ends.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};
use spindle_system_tests::{bin, cs_xml, wait_until, Cluster, ClusterOpts};

const T: Duration = Duration::from_secs(30);

/// Kills the background client by pid when the test ends, whatever happens.
struct Background(Child);

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn run(c: &Cluster, args: &[&str]) -> (i32, String, String) {
    let o = c.spindle_within(args, T);
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Runs a command that must succeed; its stdout.
fn ok(c: &Cluster, args: &[&str]) -> String {
    let (code, out, err) = run(c, args);
    if code != 0 {
        c.dump_logs();
    }
    assert_eq!(code, 0, "spindle {args:?}\nstdout:\n{out}\nstderr:\n{err}");
    out
}

/// The cells of a tab-separated YARN table row, trimmed.
fn cells(line: &str) -> Vec<String> {
    line.split('\t').map(|c| c.trim().to_string()).collect()
}

/// A distributed-shell AM submitted over REST with tags, as a YARN client would.
fn submit_tagged(c: &Cluster, queue: &str, command: &str) -> String {
    let (s, v, _) = c.send(
        Method::POST,
        "/ws/v1/cluster/apps/new-application",
        &json!({}),
    );
    assert_eq!(s, 200, "{v}");
    let id = v["application-id"].as_str().unwrap().to_string();
    let ctx = json!({
        "application-id": id,
        "application-name": "tagged-dshell",
        "application-type": "DISTRIBUTEDSHELL",
        "queue": queue,
        "max-app-attempts": 1,
        "am-container-spec": {
            "local-resources": {"entry": [{"key": "spindle", "value": {
                "resource": format!("file://{}", bin("spindle").display()), "type": "FILE",
                "visibility": "APPLICATION"}}]},
            "environment": {"entry": [
                {"key": "DISTRIBUTEDSHELL_NUM_CONTAINERS", "value": "1"},
                {"key": "DISTRIBUTEDSHELL_CONTAINER_RESOURCES", "value": "memory-mb=256,vcores=1"},
                {"key": "DISTRIBUTEDSHELL_SHELL_COMMAND", "value": command}
            ]},
            "commands": {"command": "./spindle distributed-shell-am"}
        },
        "resource": {"memory": 256, "vCores": 1},
        "application-tags": {"tag": ["cli-yarn"]}
    });
    let (s, v, _) = c.send(Method::POST, "/ws/v1/cluster/apps?user.name=tester", &ctx);
    assert_eq!(s, 202, "{v}");
    id
}

#[test]
fn yarn_client_commands_against_a_running_distributed_shell() {
    let cs = cs_xml(&[
        ("root.queues", "a,b"),
        ("root.a.capacity", "50"),
        ("root.b.capacity", "50"),
        ("root.a.maximum-capacity", "100"),
        ("root.b.maximum-capacity", "100"),
        ("maximum-am-resource-percent", "0.5"),
    ]);
    let c = Cluster::start_with_files(
        ClusterOpts {
            nodes: 2,
            rm_props: vec![("yarn.cluster.max-application-priority".into(), "10".into())],
            ..Default::default()
        },
        &[("capacity-scheduler.xml", &cs)],
    );

    // A distributed shell through the CLI, in queue a, left running in the background.
    let log = c.dir.path().join("dshell.out");
    let client = Command::new(bin("spindle"))
        .args([
            "distributed-shell",
            "--num_containers",
            "2",
            "--container_resources",
            "memory-mb=256,vcores=1",
            "--shell_command",
            "sleep 300",
            "--queue",
            "a",
            "--timeout_ms",
            "600000",
        ])
        .env("SPINDLE_RM_ADDRESS", &c.rm_addr)
        .env("SPINDLE_CONF_DIR", &c.conf_dir)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the distributed shell client");
    let _client = Background(client);
    let app = wait_until("the distributed shell to be submitted", T, || {
        let (_, v) = c.get("/ws/v1/cluster/apps");
        v["apps"]["app"].as_array().and_then(|a| {
            a.iter()
                .find(|x| x["name"] != "tagged-dshell")
                .and_then(|x| x["id"].as_str().map(String::from))
        })
    });
    c.wait_app_state(&app, &["RUNNING"], T);
    wait_until("AM and 2 shell containers", T, || {
        (c.containers_of(&app)
            .iter()
            .filter(|x| x["containerState"] == "RUNNING")
            .count()
            >= 3)
            .then_some(())
    });
    let tagged = submit_tagged(&c, "b", "sleep 300");
    c.wait_app_state(&tagged, &["RUNNING"], T);

    // application -list, with types and tags.
    let out = ok(&c, &["application", "-list"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "Total number of applications (application-types: [], states: [SUBMITTED, ACCEPTED, RUNNING] and tags: []):2"
    );
    assert_eq!(
        cells(lines[1]),
        [
            "Application-Id",
            "Application-Name",
            "Application-Type",
            "User",
            "Queue",
            "State",
            "Final-State",
            "Progress",
            "Tracking-URL",
            "GPUS",
            "GPU-HOURS",
            "GPU-UTIL",
            "REASON"
        ]
    );
    let out = ok(&c, &["application", "-list", "-appTags", "cli-yarn"]);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].ends_with("and tags: [cli-yarn]):1"), "{out}");
    assert_eq!(cells(lines[2])[0], tagged);
    let out = ok(
        &c,
        &[
            "application",
            "-list",
            "-appTypes",
            "MAPREDUCE",
            "-appTags",
            "cli-yarn",
        ],
    );
    assert!(out.lines().next().unwrap().ends_with("):0"), "{out}");
    let out = ok(
        &c,
        &["application", "-list", "-appTypes", "distributedshell"],
    );
    assert!(out.lines().next().unwrap().ends_with("):2"), "{out}");
    // The RM itself filters on the parameters the CLI sends (tags and types without case).
    let (_, v) = c.get("/ws/v1/cluster/apps?applicationTags=CLI-YARN,other");
    let ids: Vec<&str> = v["apps"]["app"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x["id"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(ids, [tagged.as_str()], "{v}");
    let (_, v) = c.get("/ws/v1/cluster/apps?applicationTypes=MAPREDUCE,SPARK");
    assert!(v["apps"].is_null(), "{v}");

    // Move to b and back (both spellings); the RM's view follows.
    let out = ok(&c, &["application", "-movetoqueue", &app, "-queue", "b"]);
    assert_eq!(
        out,
        format!("Moving application {app} to queue b\nSuccessfully completed move.\n")
    );
    assert_eq!(c.app(&app)["queue"], "b");
    let out = ok(&c, &["application", "-changeQueue", "a", "-appId", &app]);
    assert!(out.ends_with("Successfully completed move.\n"), "{out}");
    assert_eq!(c.app(&app)["queue"], "a");
    let (code, _, err) = run(&c, &["application", "-movetoqueue", &app, "-queue", "nope"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("nope"), "{err}");
    assert_eq!(c.app(&app)["queue"], "a");

    // Priority: taken, and clamped to the cluster's maximum.
    let out = ok(&c, &["application", "-updatePriority", "7", "-appId", &app]);
    assert!(out.ends_with(&format!(
        "Successfully updated the application {app} with priority '7'\n"
    )));
    assert_eq!(c.app(&app)["priority"], 7);
    let out = ok(
        &c,
        &["application", "-updatePriority", "99", "-appId", &app],
    );
    assert!(out.contains("to cluster max priority"), "{out}");
    assert_eq!(c.app(&app)["priority"], 10);

    // Lifetime: the client's --timeout_ms 600000 is the RM's LIFETIME (ten minutes from
    // submission); then an hour from now, in the REST view and the report.
    let (_, v) = c.get(&format!("/ws/v1/cluster/apps/{app}/timeouts"));
    let t = &v["timeouts"]["timeout"][0];
    assert_ne!(t["expiryTime"], "UNLIMITED", "{v}");
    let left = t["remainingTimeInSeconds"].as_i64().unwrap_or(-1);
    assert!((500..=600).contains(&left), "{v}");
    let out = ok(
        &c,
        &["application", "-updateLifetime", "3600", "-appId", &app],
    );
    assert!(
        out.starts_with(&format!(
            "Updating timeout for given timeoutType: LIFETIME of an application {app}\nSuccessfully updated LIFETIME of an application {app}. New expiry time is "
        )),
        "{out}"
    );
    let (_, v) = c.get(&format!("/ws/v1/cluster/apps/{app}/timeouts/LIFETIME"));
    let t = &v["timeout"];
    assert_eq!(t["type"], "LIFETIME");
    assert!(
        out.trim_end().ends_with(t["expiryTime"].as_str().unwrap()),
        "{out} {v}"
    );
    let left = t["remainingTimeInSeconds"].as_i64().unwrap();
    assert!((3500..=3600).contains(&left), "{v}");
    let out = ok(&c, &["application", "-status", &app]);
    assert!(
        out.contains("\tTimeoutType : LIFETIME\tExpiryTime : "),
        "{out}"
    );
    assert!(out.contains("\tApplication Priority : 10\n"), "{out}");
    assert!(out.contains("\tQueue : a\n"), "{out}");

    // applicationattempt -list / -status.
    let out = ok(&c, &["applicationattempt", "-list", &app]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "Total number of application attempts :1");
    assert_eq!(
        cells(lines[1]),
        [
            "ApplicationAttempt-Id",
            "State",
            "AM-Container-Id",
            "Tracking-URL"
        ]
    );
    let row = cells(lines[2]);
    let attempt = row[0].clone();
    assert!(attempt.starts_with("appattempt_"), "{out}");
    assert_eq!(row[1], "RUNNING");
    let am = row[2].clone();
    assert!(am.starts_with("container_"), "{out}");
    let out = ok(&c, &["applicationattempt", "-status", &attempt]);
    assert!(
        out.starts_with(&format!(
            "Application Attempt Report : \n\tApplicationAttempt-Id : {attempt}\n\tState : RUNNING\n\tAMContainer : {am}\n\tTracking-URL : "
        )),
        "{out}"
    );

    // container -list / -status.
    let out = ok(&c, &["container", "-list", &attempt]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "Total number of containers :3", "{out}");
    assert_eq!(
        cells(lines[1]),
        [
            "Container-Id",
            "Start Time",
            "Finish Time",
            "State",
            "Host",
            "Node Http Address",
            "LOG-URL",
            "GPUS"
        ]
    );
    assert_eq!(cells(lines[2])[0], am, "sorted, the AM first");
    for l in &lines[2..] {
        let r = cells(l);
        assert_eq!(r[3], "RUNNING", "{out}");
        assert_eq!(r[2], "N/A", "not finished: {out}");
        assert!(r[6].contains("/node/containerlogs/"), "{out}");
    }
    let out = ok(&c, &["container", "-status", &am]);
    assert!(
        out.starts_with(&format!(
            "Container Report : \n\tContainer-Id : {am}\n\tStart-Time : "
        )),
        "{out}"
    );
    assert!(out.contains("\tState : RUNNING\n"), "{out}");

    // node -status of a node from node -list.
    let out = ok(&c, &["node", "-list"]);
    let node = cells(out.lines().nth(2).unwrap())[0].clone();
    let out = ok(&c, &["node", "-status", &node]);
    assert!(
        out.starts_with(&format!(
            "Node Report : \n\tNode-Id : {node}\n\tRack : /default-rack\n\tNode-State : RUNNING\n"
        )),
        "{out}"
    );
    assert!(out.contains("\tMemory-Capacity : "), "{out}");
    let (code, out, _) = run(&c, &["node", "-status", "nosuchhost:1"]);
    assert_eq!(code, 255);
    assert_eq!(
        out.trim(),
        "Could not find the node report for node id : nosuchhost:1"
    );

    // queue -list: every queue in QueueCLI's table.
    let out = ok(&c, &["queue", "-list"]);
    assert!(
        out.lines().nth(1).unwrap().contains("3 queues were found"),
        "{out}"
    );
    for path in ["root", "root.a", "root.b"] {
        assert!(out.contains(&format!(" {path} ")), "{path}: {out}");
    }
    assert!(out.contains(" 50.00% "), "{out}");

    // top, with stdout not a terminal: one frame with the cluster's figures and both apps,
    // the distributed shell (3 containers) first.
    let out = ok(&c, &["top"]);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("Spindle top - "), "{out}");
    assert_eq!(
        lines[1],
        "NodeManager(s): 2 total, 2 active, 0 unhealthy, 0 decommissioned, 0 lost, 0 rebooted"
    );
    assert!(
        lines[2].starts_with("Queue(s) Applications: 2 running, "),
        "{out}"
    );
    assert!(lines[5].starts_with("Queue(s) GPUs: "), "{out}");
    assert!(
        lines[9].trim_start().starts_with("APPLICATIONID USER"),
        "{out}"
    );
    assert!(
        lines[10].trim_start().starts_with(&format!("{app} ")),
        "{out}"
    );
    assert!(
        lines[11].trim_start().starts_with(&format!("{tagged} ")),
        "{out}"
    );

    // A lifetime that runs out: the tagged application is killed by the RM.
    ok(
        &c,
        &["application", "-updateLifetime", "1", "-appId", &tagged],
    );
    let a = c.wait_app_state(&tagged, &["KILLED"], T);
    assert_eq!(
        a["diagnostics"],
        "Application is killed by ResourceManager as it has exceeded the lifetime period.",
        "{a}"
    );
    let (code, _, err) = run(
        &c,
        &["application", "-updateLifetime", "60", "-appId", &tagged],
    );
    assert_eq!(
        code, 1,
        "a finished application's lifetime is refused: {err}"
    );
    assert!(err.contains("lifetime cannot be updated"), "{err}");

    // Done: kill the distributed shell; the client is killed by pid on drop.
    let out = ok(&c, &["application", "-kill", &app]);
    assert!(
        out.ends_with(&format!("Killed application {app}\n")),
        "{out}"
    );
    let v: Value = c.app(&app);
    assert_eq!(v["state"], "KILLED");
}
