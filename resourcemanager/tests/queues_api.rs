//! Integration test of the capacity scheduler's REST surface, with the RM in-process on an
//! ephemeral port and a real configuration directory: the `/scheduler` view, the mutation
//! API (`scheduler-conf`, `validate`, `version`), `refresh-queues` after editing
//! `capacity-scheduler.xml`, refusals that change nothing, persistence across a restart,
//! moving and re-prioritizing applications, and the ACL checks (403) with ACLs enabled.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use spindle_resourcemanager::config::RmConfig;

const CS: &str = "yarn.scheduler.capacity.";

fn cs_xml(pairs: &[(&str, &str)]) -> String {
    let mut x = String::from("<?xml version=\"1.0\"?>\n<configuration>\n");
    for (k, v) in pairs {
        x.push_str(&format!(
            "  <property><name>{CS}{k}</name><value>{v}</value></property>\n"
        ));
    }
    x.push_str("</configuration>\n");
    x
}

struct Rm {
    base: String,
    http: reqwest::Client,
    server: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Drop for Rm {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn start(conf_dir: &Path, store: &Path, extra: &[(&str, &str)]) -> Rm {
    let mut overrides = vec![
        (
            "spindle.resourcemanager.state-store.path".to_string(),
            store.display().to_string(),
        ),
        (
            "yarn.scheduler.minimum-allocation-mb".to_string(),
            "128".to_string(),
        ),
    ];
    overrides.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let conf = RmConfig::load(conf_dir, &overrides).expect("config");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let (rm, serve) = spindle_resourcemanager::daemon::start(listener, conf)
        .await
        .expect("start");
    let server = tokio::spawn(serve(Box::pin(std::future::pending())));
    Rm {
        base: format!("http://{}", rm.addr),
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .expect("client"),
        server,
    }
}

impl Rm {
    async fn get(&self, path: &str) -> (u16, Value) {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .expect("get");
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    /// Sends JSON; answers the status and the body (JSON, or a JSON string for text).
    async fn send(&self, method: reqwest::Method, path: &str, body: Value) -> (u16, Value) {
        let r = self
            .http
            .request(method, format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .expect("send");
        let status = r.status().as_u16();
        let text = r.text().await.unwrap_or_default();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    async fn put(&self, path: &str, body: Value) -> (u16, Value) {
        self.send(reqwest::Method::PUT, path, body).await
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.send(reqwest::Method::POST, path, body).await
    }

    /// `(path, capacity, state)` of every queue in `/scheduler`, parents first.
    async fn queues(&self) -> Vec<(String, f64, String)> {
        let (status, v) = self.get("/ws/v1/cluster/scheduler").await;
        assert_eq!(status, 200, "{v}");
        fn walk(q: &Value, out: &mut Vec<(String, f64, String)>) {
            for c in q["queues"]["queue"].as_array().cloned().unwrap_or_default() {
                out.push((
                    c["queuePath"].as_str().unwrap_or_default().to_string(),
                    c["capacity"].as_f64().unwrap_or(-1.0),
                    c["state"].as_str().unwrap_or_default().to_string(),
                ));
                walk(&c, out);
            }
        }
        let mut out = vec![];
        walk(&v["scheduler"]["schedulerInfo"], &mut out);
        out
    }

    async fn version(&self, user: &str) -> u64 {
        let (status, v) = self
            .get(&format!(
                "/ws/v1/cluster/scheduler-conf/version?user.name={user}"
            ))
            .await;
        assert_eq!(status, 200, "{v}");
        v["versionID"].as_u64().expect("versionID")
    }

    async fn submit(&self, user: &str, queue: &str) -> String {
        let (status, v) = self
            .post("/ws/v1/cluster/apps/new-application", json!({}))
            .await;
        assert_eq!(status, 200, "{v}");
        let id = v["application-id"].as_str().expect("id").to_string();
        let (status, v) = self
            .post(
                &format!("/ws/v1/cluster/apps?user.name={user}"),
                json!({"application-id": id, "queue": queue,
                       "am-container-spec": {"commands": {"command": "sleep 100"}},
                       "resource": {"memory": 256, "vCores": 1}}),
            )
            .await;
        assert_eq!(status, 202, "{v}");
        id
    }

    async fn app(&self, id: &str) -> Value {
        self.get(&format!("/ws/v1/cluster/apps/{id}")).await.1["app"].clone()
    }
}

fn assert_refused(status: u16, body: &Value, exception: &str, parts: &[&str]) {
    let re = &body["RemoteException"];
    assert_eq!(re["exception"], exception, "{status} {body}");
    let msg = re["message"].as_str().unwrap_or_default();
    for p in parts {
        assert!(msg.contains(p), "'{p}' not in: {msg}");
    }
}

fn two_queues() -> String {
    cs_xml(&[
        ("root.queues", "a,b"),
        ("root.a.capacity", "70"),
        ("root.b.capacity", "30"),
        ("root.a.acl_submit_applications", "*"),
    ])
}

#[tokio::test]
async fn scheduler_view_mutations_refresh_and_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let conf_dir = dir.path().join("conf");
    std::fs::create_dir_all(&conf_dir).expect("mkdir");
    let cs_file = conf_dir.join("capacity-scheduler.xml");
    std::fs::write(&cs_file, two_queues()).expect("write");
    let store = dir.path().join("rm.sqlite");
    let extra = [("yarn.cluster.max-application-priority", "10")];
    let rm = start(&conf_dir, &store, &extra).await;

    // The YARN shape.
    let (_, v) = rm.get("/ws/v1/cluster/scheduler").await;
    let info = &v["scheduler"]["schedulerInfo"];
    assert_eq!(info["type"], "capacityScheduler");
    assert_eq!(info["queueName"], "root");
    let a = &info["queues"]["queue"][0];
    assert_eq!(a["queueName"], "a");
    assert_eq!(a["queuePath"], "root.a");
    assert_eq!(a["type"], "capacitySchedulerLeafQueueInfo");
    assert_eq!(a["capacity"], 70.0);
    assert_eq!(
        a["capacities"]["queueCapacitiesByPartition"][0]["capacity"],
        70.0
    );
    assert!(a["resources"]["resourceUsagesByPartition"][0]["amLimit"].is_object());
    assert_eq!(a["queueAcls"]["queueAcl"][1]["accessType"], "SUBMIT_APP");
    assert!(a["users"].is_null() && a.get("maxApplications").is_some());
    assert_eq!(a["mode"], "percentage");
    assert_eq!(a["orderingPolicyInfo"], "fifo");
    assert_eq!(
        rm.queues().await,
        vec![
            ("root.a".to_string(), 70.0, "RUNNING".to_string()),
            ("root.b".to_string(), 30.0, "RUNNING".to_string())
        ]
    );

    // GET scheduler-conf: the live properties; version 0.
    let (status, v) = rm.get("/ws/v1/cluster/scheduler-conf").await;
    assert_eq!(status, 200);
    let props = v["property"].as_array().expect("property").clone();
    assert!(props
        .iter()
        .any(|p| p["name"] == format!("{CS}root.queues") && p["value"] == "a,b"));
    assert_eq!(rm.version("dr.who").await, 0);

    // A mutation: add root.c, shrink root.a.
    let (status, body) = rm
        .put(
            "/ws/v1/cluster/scheduler-conf",
            json!({"add-queue": {"queue-name": "root.c", "params": {"entry": {"key": "capacity", "value": "10"}}},
                   "update-queue": {"queue-name": "root.a", "params": {"entry": [{"key": "capacity", "value": "60"}]}}}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    // YARN's sentence, then what changed (Spindle's lines).
    assert_eq!(
        body,
        "Configuration change successfully applied.\nchanged: root.a.capacity: 70 -> 60\nchanged: root.c.capacity: added (10)\nchanged: root.queues: a,b -> a,b,c"
    );
    assert_eq!(rm.version("dr.who").await, 1);
    let after_add = rm.queues().await;
    assert_eq!(
        after_add,
        vec![
            ("root.a".to_string(), 60.0, "RUNNING".to_string()),
            ("root.b".to_string(), 30.0, "RUNNING".to_string()),
            ("root.c".to_string(), 10.0, "RUNNING".to_string())
        ]
    );

    // Refusals change nothing and name the rule.
    let app = rm.submit("alice", "c").await;
    assert_eq!(rm.app(&app).await["state"], "ACCEPTED");
    let refused = [
        (
            json!({"update-queue": {"queue-name": "root.b", "params": {"entry": {"key": "capacity", "value": "40"}}}}),
            vec!["Failed to re-init queues : Illegal capacity sum of 1.1 for children of queue root", "rule capacity-sum"],
        ),
        (
            json!({"remove-queue": "root.b",
                   "update-queue": {"queue-name": "root.a", "params": {"entry": {"key": "capacity", "value": "90"}}}}),
            vec!["root.b cannot be deleted from the capacity scheduler configuration, as the queue is not yet in stopped state", "rule queue-removal-not-stopped"],
        ),
        (
            json!({"update-queue": {"queue-name": "root.c", "params": {"entry": {"key": "state", "value": "STOPPED"}}},
                   "remove-queue": "root.c"}),
            vec!["Can't update queue root.c: it does not exist", "rule invalid-mutation"],
        ),
        (
            json!({"update-queue": {"queue-name": "root.a", "params": {"entry": {"key": "maximum-capacity", "value": "20"}}}}),
            vec!["rule maximum-capacity-below-capacity", "root.a"],
        ),
        (json!({"add_queue": []}), vec!["Invalid sched-conf body"]),
    ];
    for (body, parts) in refused {
        let (status, v) = rm.put("/ws/v1/cluster/scheduler-conf", body.clone()).await;
        assert_eq!(status, 400, "{body}: {v}");
        assert_refused(status, &v, "BadRequestException", &parts);
        assert_eq!(rm.queues().await, after_add, "{body} changed nothing");
        assert_eq!(rm.version("dr.who").await, 1);
    }
    // Stopping c is fine; removing it then is refused by its application.
    let (status, v) = rm
        .put(
            "/ws/v1/cluster/scheduler-conf",
            json!({"update-queue": {"queue-name": "root.c", "params": {"entry": {"key": "state", "value": "STOPPED"}}}}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let stopped = rm.queues().await;
    let remove_c = json!({"remove-queue": ["root.c"],
        "update-queue": {"queue-name": "root.a", "params": {"entry": {"key": "capacity", "value": "70"}}}});
    let (status, v) = rm
        .post("/ws/v1/cluster/scheduler-conf/validate", remove_c.clone())
        .await;
    assert_refused(
        status,
        &v,
        "BadRequestException",
        &[
            "CapacityScheduler configuration validation failed:",
            "root.c",
            "still has applications",
        ],
    );
    let (status, v) = rm
        .put("/ws/v1/cluster/scheduler-conf", remove_c.clone())
        .await;
    assert_refused(
        status,
        &v,
        "BadRequestException",
        &["root.c", "still has applications"],
    );
    assert_eq!(rm.queues().await, stopped);
    assert_eq!(rm.app(&app).await["state"], "ACCEPTED");

    // Move the application out, change its priority, then c can go.
    let (status, v) = rm
        .put(
            &format!("/ws/v1/cluster/apps/{app}/queue"),
            json!({"queue": "root.b"}),
        )
        .await;
    assert_eq!((status, v.clone()), (200, json!({"queue": "b"})), "{v}");
    assert_eq!(rm.app(&app).await["queue"], "b");
    let (status, v) = rm
        .put(
            &format!("/ws/v1/cluster/apps/{app}/priority"),
            json!({"priority": 5}),
        )
        .await;
    assert_eq!((status, v.clone()), (200, json!({"priority": 5})), "{v}");
    let (status, v) = rm
        .put(
            &format!("/ws/v1/cluster/apps/{app}/priority"),
            json!({"priority": 50}),
        )
        .await;
    assert_eq!(
        (status, v.clone()),
        (200, json!({"priority": 10})),
        "clamped: {v}"
    );
    let (status, v) = rm
        .put(
            &format!("/ws/v1/cluster/apps/{app}/queue"),
            json!({"queue": "nosuch"}),
        )
        .await;
    assert_refused(status, &v, "BadRequestException", &["nosuch"]);
    let (status, v) = rm
        .post("/ws/v1/cluster/scheduler-conf/validate", remove_c.clone())
        .await;
    assert_eq!(status, 200, "{v}");
    assert!(!v["property"]
        .as_array()
        .expect("props")
        .iter()
        .any(|p| p["name"].as_str().is_some_and(|n| n.contains("root.c."))));
    assert_eq!(rm.queues().await, stopped, "validate changes nothing");
    let (status, v) = rm.put("/ws/v1/cluster/scheduler-conf", remove_c).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(rm.queues().await.len(), 2);
    let version = rm.version("dr.who").await;
    assert_eq!(version, 3);

    // Access checks with ACLs off: everyone may.
    let (status, v) = rm
        .get("/ws/v1/cluster/queues/a/access?user=zed&queue-acl-type=ADMINISTER_QUEUE")
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["allowed"], true);
    assert_eq!(v["user"], "zed");
    let (status, v) = rm
        .get("/ws/v1/cluster/queues/a/access?user=zed&queue-acl-type=NOPE")
        .await;
    assert_refused(
        status,
        &v,
        "BadRequestException",
        &["Specified queueAclType=NOPE is not a valid type"],
    );
    let (status, _) = rm.get("/ws/v1/cluster/queues/nosuch/access?user=zed").await;
    assert_eq!(status, 404);

    // A restart replays the stored mutations over the file.
    drop(rm);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let rm = start(&conf_dir, &store, &extra).await;
    assert_eq!(rm.version("dr.who").await, 3);
    let (_, v) = rm.get("/ws/v1/cluster/scheduler-conf").await;
    assert!(v["property"]
        .as_array()
        .expect("props")
        .iter()
        .any(|p| p["name"] == format!("{CS}root.a.capacity") && p["value"] == "70"));
    assert_eq!(
        rm.app(&app).await["queue"],
        "b",
        "the moved app is recovered in its queue"
    );

    // refreshQueues: the file wins again; a broken file is refused with its place.
    std::fs::write(
        &cs_file,
        cs_xml(&[
            ("root.queues", "a,b"),
            ("root.a.capacity", "50"),
            ("root.b.capacity", "40"),
        ]),
    )
    .expect("write");
    let (status, v) = rm.post("/ws/v1/cluster/refresh-queues", json!({})).await;
    assert_refused(
        status,
        &v,
        "BadRequestException",
        &[
            "capacity-scheduler.xml:3:",
            "Illegal capacity sum of 0.9",
            "rule capacity-sum",
        ],
    );
    std::fs::write(
        &cs_file,
        cs_xml(&[
            ("root.queues", "a,b"),
            ("root.a.capacity", "50"),
            ("root.b.capacity", "50"),
        ]),
    )
    .expect("write");
    let (status, v) = rm.post("/ws/v1/cluster/refresh-queues", json!({})).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["versionID"], 4);
    assert_eq!(
        rm.queues().await,
        vec![
            ("root.a".to_string(), 50.0, "RUNNING".to_string()),
            ("root.b".to_string(), 50.0, "RUNNING".to_string())
        ]
    );
    // Refreshing an unchanged file changes nothing.
    let (_, v) = rm.post("/ws/v1/cluster/refresh-queues", json!({})).await;
    assert_eq!(v["versionID"], 4);
    // After a refresh the file is authoritative at the next start.
    drop(rm);
    tokio::time::sleep(Duration::from_millis(100)).await;
    std::fs::write(&cs_file, two_queues()).expect("write");
    let rm = start(&conf_dir, &store, &extra).await;
    assert_eq!(rm.queues().await[0].1, 70.0);
    assert_eq!(rm.version("dr.who").await, 4);
}

#[tokio::test]
async fn acls_guard_mutations_kills_and_access_checks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let conf_dir = dir.path().join("conf");
    std::fs::create_dir_all(&conf_dir).expect("mkdir");
    std::fs::write(
        conf_dir.join("capacity-scheduler.xml"),
        cs_xml(&[
            ("root.queues", "a,b"),
            ("root.a.capacity", "50"),
            ("root.b.capacity", "50"),
            ("root.acl_submit_applications", " "),
            ("root.acl_administer_queue", " "),
            ("root.a.acl_submit_applications", "alice,bob"),
            ("root.a.acl_administer_queue", " qadmins"),
            ("root.b.acl_submit_applications", "*"),
        ]),
    )
    .expect("write");
    let store = dir.path().join("rm.sqlite");
    let rm = start(
        &conf_dir,
        &store,
        &[
            ("yarn.acl.enable", "true"),
            ("yarn.admin.acl", "admin"),
            (
                "hadoop.user.group.static.mapping.overrides",
                "dr.who=;alice=devs;bob=;carol=qadmins;admin=",
            ),
        ],
    )
    .await;
    let mutation = json!({"update-queue": {"queue-name": "root.a", "params": {"entry": {"key": "maximum-capacity", "value": "90"}}}});
    for path in [
        "/ws/v1/cluster/scheduler-conf",
        "/ws/v1/cluster/scheduler-conf?user.name=bob",
    ] {
        let (status, v) = rm.put(path, mutation.clone()).await;
        assert_eq!(status, 403, "{v}");
        assert_refused(
            status,
            &v,
            "ForbiddenException",
            &["Only admins can carry out this operation."],
        );
    }
    for (status, v) in [
        rm.get("/ws/v1/cluster/scheduler-conf?user.name=bob").await,
        rm.post("/ws/v1/cluster/refresh-queues?user.name=bob", json!({}))
            .await,
        rm.post(
            "/ws/v1/cluster/scheduler-conf/validate?user.name=bob",
            mutation.clone(),
        )
        .await,
        rm.get("/ws/v1/cluster/scheduler-conf/version?user.name=bob")
            .await,
    ] {
        assert_refused(status, &v, "ForbiddenException", &["Only admins"]);
    }
    let (status, v) = rm
        .put("/ws/v1/cluster/scheduler-conf?user.name=admin", mutation)
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(rm.version("admin").await, 1);

    // Submit ACLs.
    let app = rm.submit("alice", "a").await;
    assert_eq!(rm.app(&app).await["state"], "ACCEPTED");
    let denied = rm.submit("dave", "a").await;
    let d = rm.app(&denied).await;
    assert_eq!(d["state"], "FAILED", "{d}");

    // Kill, move and priority: not by another user; by a queue admin (via a group) or an admin.
    for (method, path, body) in [
        (
            reqwest::Method::PUT,
            format!("/ws/v1/cluster/apps/{app}/state?user.name=bob"),
            json!({"state": "KILLED"}),
        ),
        (
            reqwest::Method::PUT,
            format!("/ws/v1/cluster/apps/{app}/queue?user.name=bob"),
            json!({"queue": "b"}),
        ),
        (
            reqwest::Method::PUT,
            format!("/ws/v1/cluster/apps/{app}/priority?user.name=bob"),
            json!({"priority": 1}),
        ),
    ] {
        let (status, v) = rm.send(method, &path, body).await;
        assert_eq!(status, 403, "{path}: {v}");
        assert_refused(status, &v, "ForbiddenException", &["bob"]);
    }
    assert_eq!(rm.app(&app).await["state"], "ACCEPTED");
    let (status, v) = rm
        .put(
            &format!("/ws/v1/cluster/apps/{app}/priority?user.name=carol"),
            json!({"priority": 0}),
        )
        .await;
    assert_eq!(status, 200, "queue admin by group: {v}");

    // Access checks: about oneself, about others (queue admins only).
    let (status, v) = rm
        .get("/ws/v1/cluster/queues/a/access?user=bob&user.name=bob")
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["allowed"], true);
    let (status, v) = rm
        .get(
            "/ws/v1/cluster/queues/a/access?user=bob&queue-acl-type=ADMINISTER_QUEUE&user.name=bob",
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["allowed"], false);
    assert_eq!(
        v["diagnostics"],
        "User=bob doesn't have access to queue=a with acl-type=ADMINISTER_QUEUE"
    );
    let (status, v) = rm
        .get("/ws/v1/cluster/queues/a/access?user=alice&user.name=bob")
        .await;
    assert_refused(
        status,
        &v,
        "ForbiddenException",
        &["User=bob doesn't haven access to queue=a so it cannot check ACLs for other users."],
    );
    let (status, v) = rm
        .get("/ws/v1/cluster/queues/root.a/access?user=carol&queue-acl-type=ADMINISTER_QUEUE&user.name=admin")
        .await;
    assert_eq!((status, v["allowed"].clone()), (200, json!(true)), "{v}");
    let (status, v) = rm
        .get("/ws/v1/cluster/queues/a/access?user=dave&user.name=carol")
        .await;
    assert_eq!((status, v["allowed"].clone()), (200, json!(false)), "{v}");

    // The owner kills.
    let (status, v) = rm
        .put(
            &format!("/ws/v1/cluster/apps/{app}/state?user.name=alice"),
            json!({"state": "KILLED"}),
        )
        .await;
    assert!(status == 200 || status == 202, "{status} {v}");
}

#[tokio::test]
async fn a_stored_mutation_that_no_longer_validates_stops_the_rm_with_its_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let conf_dir = dir.path().join("conf");
    std::fs::create_dir_all(&conf_dir).expect("mkdir");
    std::fs::write(conf_dir.join("capacity-scheduler.xml"), two_queues()).expect("write");
    let store = dir.path().join("rm.sqlite");
    let rm = start(&conf_dir, &store, &[]).await;
    let (status, v) = rm
        .put(
            "/ws/v1/cluster/scheduler-conf",
            json!({"update-queue": {"queue-name": "root.a", "params": {"entry": {"key": "maximum-allocation-mb", "value": "4096"}}}}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    drop(rm);
    tokio::time::sleep(Duration::from_millis(100)).await;
    // yarn-site.xml now caps containers below what the stored configuration allows.
    let overrides = vec![
        (
            "spindle.resourcemanager.state-store.path".to_string(),
            store.display().to_string(),
        ),
        (
            "yarn.scheduler.maximum-allocation-mb".to_string(),
            "2048".to_string(),
        ),
    ];
    let conf = RmConfig::load(&conf_dir, &overrides).expect("the file alone is fine");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let e = match spindle_resourcemanager::daemon::start(listener, conf).await {
        Ok(_) => panic!("the RM must not start on a configuration it would refuse"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("stored by PUT /ws/v1/cluster/scheduler-conf (version 1")
            && e.contains("rule maximum-allocation")
            && e.contains("scheduler-conf version 1"),
        "{e}"
    );
}
