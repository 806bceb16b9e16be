//! System test of the capacity scheduler on the real binaries: queues from a
//! `capacity-scheduler.xml` in the conf dir, applications (distributed shell with `sleep`)
//! running in them while the queues are refreshed from the edited file
//! (`spindle rmadmin -refreshQueues`) and mutated through `PUT /scheduler-conf`; refused
//! changes (capacity sum, removing a RUNNING queue, removing a queue with applications,
//! moving a queue to another parent) that leave the queues and the applications exactly as
//! they were; moving an application between queues; a 403 for a kill by someone else with
//! `yarn.acl.enable=true`; and a mutation that survives an RM restart on the same store.
//! Every process is killed by pid when the test ends.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};
use spindle_system_tests::{cs_xml, wait_until, Cluster, ClusterOpts};

const ADMIN: &str = "admin";

fn file_with(a: &str, b: &str) -> String {
    cs_xml(&[
        (
            "resource-calculator",
            "org.apache.hadoop.yarn.util.resource.DominantResourceCalculator",
        ),
        ("maximum-am-resource-percent", "0.5"),
        // With yarn.acl.enable, YARN's default root ACLs (*) would make everyone a queue
        // admin: administration is for cluster admins only here.
        ("root.acl_administer_queue", " "),
        ("root.queues", "a,b"),
        ("root.a.capacity", a),
        ("root.b.capacity", b),
    ])
}

/// A distributed shell with one `sleep` worker, submitted as `user` into `queue`.
fn submit_sleeper(c: &Cluster, user: &str, queue: &str) -> String {
    c.submit_dshell(&format!("sleeper-{queue}"), queue, Some(user), "sleep 300")
}

/// Waits until the app is RUNNING with its AM and its worker running.
fn wait_running(c: &Cluster, id: &str) {
    wait_until(
        &format!("{id} to run its AM and worker"),
        Duration::from_secs(60),
        || {
            let a = c.app(id);
            if a["state"]
                .as_str()
                .is_some_and(|s| s != "RUNNING" && s != "ACCEPTED")
            {
                c.dump_logs();
                panic!("{id} ended: {a}");
            }
            (a["state"] == "RUNNING" && a["runningContainers"].as_i64() == Some(2)).then_some(())
        },
    );
}

/// Every queue as `(path, capacity, maxCapacity, state, numApplications)`, parents first.
fn queues(c: &Cluster) -> Vec<(String, f64, f64, String, u64)> {
    let (status, v) = c.get("/ws/v1/cluster/scheduler");
    assert_eq!(status, 200, "{v}");
    fn walk(q: &Value, out: &mut Vec<(String, f64, f64, String, u64)>) {
        for c in q["queues"]["queue"].as_array().cloned().unwrap_or_default() {
            out.push((
                c["queuePath"].as_str().unwrap_or_default().to_string(),
                c["capacity"].as_f64().unwrap_or(-1.0),
                c["maxCapacity"].as_f64().unwrap_or(-1.0),
                c["state"].as_str().unwrap_or_default().to_string(),
                c["numApplications"].as_u64().unwrap_or(0),
            ));
            walk(&c, out);
        }
    }
    let mut out = vec![];
    walk(&v["scheduler"]["schedulerInfo"], &mut out);
    out
}

fn capacities(c: &Cluster) -> Vec<(String, f64)> {
    queues(c).into_iter().map(|q| (q.0, q.1)).collect()
}

/// What must not change when a change is refused: each app's state, queue and containers.
fn apps_view(c: &Cluster, ids: &[&str]) -> Vec<(String, String, i64)> {
    ids.iter()
        .map(|id| {
            let a = c.app(id);
            (
                a["state"].as_str().unwrap_or_default().to_string(),
                a["queue"].as_str().unwrap_or_default().to_string(),
                a["runningContainers"].as_i64().unwrap_or(-1),
            )
        })
        .collect()
}

fn sched_conf(c: &Cluster, body: Value) -> (u16, Value) {
    let (status, v, _) = c.send(
        Method::PUT,
        &format!("/ws/v1/cluster/scheduler-conf?user.name={ADMIN}"),
        &body,
    );
    (status, v)
}

fn version(c: &Cluster) -> u64 {
    let (status, v) = c.get(&format!(
        "/ws/v1/cluster/scheduler-conf/version?user.name={ADMIN}"
    ));
    assert_eq!(status, 200, "{v}");
    v["versionID"].as_u64().expect("versionID")
}

fn message(v: &Value) -> String {
    v["RemoteException"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn queues_are_refreshed_and_mutated_while_applications_run() {
    let initial = file_with("60", "40");
    let mut c = Cluster::start_with_files(
        ClusterOpts {
            nodes: 2,
            rm_props: vec![
                ("yarn.acl.enable".into(), "true".into()),
                ("yarn.admin.acl".into(), ADMIN.into()),
                (
                    "hadoop.user.group.static.mapping.overrides".into(),
                    "dr.who=;admin=;alice=;bob=;carol=;mallory=".into(),
                ),
            ],
            ..Default::default()
        },
        &[("capacity-scheduler.xml", &initial)],
    );
    assert_eq!(
        capacities(&c),
        vec![("root.a".to_string(), 60.0), ("root.b".to_string(), 40.0)]
    );
    let app_a = submit_sleeper(&c, "alice", "a");
    let app_b = submit_sleeper(&c, "bob", "b");
    wait_running(&c, &app_a);
    wait_running(&c, &app_b);

    // 1. Edit the file and refresh through the CLI, while both run.
    std::fs::write(
        c.conf_dir.join("capacity-scheduler.xml"),
        file_with("70", "30"),
    )
    .expect("edit");
    let out = c.spindle_as("mallory", &["rmadmin", "-refreshQueues"]);
    assert_eq!(out.status.code(), Some(255), "a non-admin is refused");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refreshQueues: Only admins can carry out this operation."),
        "{err}"
    );
    assert_eq!(capacities(&c)[0].1, 60.0);
    let out = c.spindle_as(ADMIN, &["rmadmin", "-refreshQueues"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        capacities(&c),
        vec![("root.a".to_string(), 70.0), ("root.b".to_string(), 30.0)]
    );
    let out = c.spindle(&["queue", "-status", "a"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.starts_with("Queue Information : \nQueue Name : a\nQueue Path : root.a\n"),
        "{text}"
    );
    assert!(
        text.contains("\tCapacity (% of parent) : 70.00%") && text.contains("\tState : RUNNING"),
        "{text}"
    );
    let out = c.spindle(&["queue", "-status", "nosuch"]);
    assert_eq!(out.status.code(), Some(255));
    assert_eq!(
        apps_view(&c, &[&app_a, &app_b]),
        vec![
            ("RUNNING".to_string(), "a".to_string(), 2),
            ("RUNNING".to_string(), "b".to_string(), 2),
        ]
    );
    // A broken file is refused as a whole, naming the file.
    std::fs::write(
        c.conf_dir.join("capacity-scheduler.xml"),
        file_with("70", "40"),
    )
    .expect("edit");
    let out = c.spindle_as(ADMIN, &["rmadmin", "-refreshQueues"]);
    assert_eq!(out.status.code(), Some(255));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("capacity-scheduler.xml:")
            && err.contains("Illegal capacity sum of 1.1")
            && err.contains("rule capacity-sum"),
        "{err}"
    );
    assert_eq!(capacities(&c)[0].1, 70.0);
    std::fs::write(
        c.conf_dir.join("capacity-scheduler.xml"),
        file_with("70", "30"),
    )
    .expect("edit");

    // 2. A mutation adds a queue, and an application runs in it.
    let (status, v) = sched_conf(
        &c,
        json!({"add-queue": {"queue-name": "root.c", "params": {"entry": [{"key": "capacity", "value": "10"}]}},
               "update-queue": {"queue-name": "root.a", "params": {"entry": {"key": "capacity", "value": "60"}}}}),
    );
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        capacities(&c),
        vec![
            ("root.a".to_string(), 60.0),
            ("root.b".to_string(), 30.0),
            ("root.c".to_string(), 10.0)
        ]
    );
    let (status, v, _) = c.send(
        Method::PUT,
        "/ws/v1/cluster/scheduler-conf?user.name=mallory",
        &json!({"update-queue": {"queue-name": "root.a", "params": {"entry": {"key": "capacity", "value": "50"}}}}),
    );
    assert_eq!(status, 403, "{v}");
    let app_c = submit_sleeper(&c, "carol", "c");
    wait_running(&c, &app_c);
    let (status, v) = sched_conf(
        &c,
        json!({"update-queue": {"queue-name": "root.c", "params": {"entry": {"key": "state", "value": "STOPPED"}}}}),
    );
    assert_eq!(status, 200, "{v}");
    let apps = [app_a.as_str(), app_b.as_str(), app_c.as_str()];

    // 3. Refused changes: 400 naming the rule; queues and applications exactly as before.
    let before_queues = queues(&c);
    let before_apps = apps_view(&c, &apps);
    let before_version = version(&c);
    assert_eq!(
        before_apps[2],
        ("RUNNING".to_string(), "c".to_string(), 2),
        "a STOPPED queue drains"
    );
    let refused = [
        (
            "capacity sum 110",
            json!({"update-queue": {"queue-name": "root.b", "params": {"entry": {"key": "capacity", "value": "40"}}}}),
            vec!["Illegal capacity sum of 1.1 for children of queue root", "rule capacity-sum"],
        ),
        (
            "removing a RUNNING queue",
            json!({"remove-queue": "root.b",
                   "update-queue": {"queue-name": "root.a", "params": {"entry": {"key": "capacity", "value": "90"}}}}),
            vec!["root.b cannot be deleted from the capacity scheduler configuration, as the queue is not yet in stopped state", "rule queue-removal-not-stopped"],
        ),
        (
            "removing a queue with applications",
            json!({"remove-queue": "root.c",
                   "update-queue": {"queue-name": "root.a", "params": {"entry": {"key": "capacity", "value": "70"}}}}),
            vec!["root.c", "still has applications"],
        ),
        (
            "moving a queue under another parent",
            json!({"remove-queue": "root.c",
                   "add-queue": [{"queue-name": "root.p", "params": {"entry": {"key": "capacity", "value": "10"}}},
                                 {"queue-name": "root.p.c", "params": {"entry": {"key": "capacity", "value": "100"}}}]}),
            vec!["c is moved from:root.c to:root.p.c after refresh, which is not allowed.", "rule queue-moved"],
        ),
    ];
    for (what, body, parts) in refused {
        let (status, v) = sched_conf(&c, body);
        assert_eq!(status, 400, "{what}: {v}");
        assert_eq!(
            v["RemoteException"]["exception"], "BadRequestException",
            "{what}: {v}"
        );
        let m = message(&v);
        assert!(m.starts_with("Failed to re-init queues : "), "{what}: {m}");
        for p in parts {
            assert!(m.contains(p), "{what}: '{p}' not in {m}");
        }
        assert_eq!(
            queues(&c),
            before_queues,
            "{what} left the queues as they were"
        );
        assert_eq!(
            apps_view(&c, &apps),
            before_apps,
            "{what} left the applications running"
        );
        assert_eq!(version(&c), before_version);
    }

    // 4. Move an application between queues.
    let (status, v, _) = c.send(
        Method::PUT,
        &format!("/ws/v1/cluster/apps/{app_a}/queue?user.name=alice"),
        &json!({"queue": "b"}),
    );
    assert_eq!((status, v.clone()), (200, json!({"queue": "b"})), "{v}");
    let by_path: Vec<(String, u64)> = queues(&c).into_iter().map(|q| (q.0, q.4)).collect();
    assert_eq!(
        by_path,
        vec![
            ("root.a".to_string(), 0),
            ("root.b".to_string(), 2),
            ("root.c".to_string(), 1)
        ]
    );
    assert_eq!(
        apps_view(&c, &[&app_a])[0],
        ("RUNNING".to_string(), "b".to_string(), 2)
    );

    // 5. With yarn.acl.enable, someone else may not kill an application.
    let (status, v, _) = c.send(
        Method::PUT,
        &format!("/ws/v1/cluster/apps/{app_b}/state?user.name=mallory"),
        &json!({"state": "KILLED"}),
    );
    assert_eq!(status, 403, "{v}");
    assert_eq!(v["RemoteException"]["exception"], "ForbiddenException");
    assert_eq!(c.app(&app_b)["state"], "RUNNING");
    for (id, owner) in [(&app_a, "alice"), (&app_b, "bob"), (&app_c, "carol")] {
        let (status, v, _) = c.send(
            Method::PUT,
            &format!("/ws/v1/cluster/apps/{id}/state?user.name={owner}"),
            &json!({"state": "KILLED"}),
        );
        assert!(status == 200 || status == 202, "{status} {v}");
    }
    for id in [&app_a, &app_b, &app_c] {
        c.wait_app_state(id, &["KILLED"], Duration::from_secs(30));
    }

    // 6. The mutations survive an RM restart on the same store, although the file does not
    //    name root.c.
    let before_queues: Vec<(String, f64, String)> =
        queues(&c).into_iter().map(|q| (q.0, q.1, q.3)).collect();
    let before_version = version(&c);
    c.restart_rm();
    let after: Vec<(String, f64, String)> =
        queues(&c).into_iter().map(|q| (q.0, q.1, q.3)).collect();
    assert_eq!(after, before_queues);
    assert_eq!(
        after.iter().find(|q| q.0 == "root.c").map(|q| q.2.as_str()),
        Some("STOPPED")
    );
    assert_eq!(version(&c), before_version);
    c.wait_nodes_running(2);
}
