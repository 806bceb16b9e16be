//! The RM keeps what it promised: many applications on a small stack, across a restart; and
//! no AM container is started on an NM before the state it depends on is in the store.

mod support;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use spindle_common::config::Configuration;
use support::{serve_nm, start_rm_with, Rm};

const STORE_KEY: &str = "spindle.resourcemanager.state-store.path";

async fn post(http: &reqwest::Client, base: &str, path: &str, body: Value) -> (u16, Value) {
    let r = http
        .post(format!("{base}{path}"))
        .json(&body)
        // A stalled store holds a submission for its busy timeout per write.
        .timeout(Duration::from_secs(60))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// Asks for an id and submits a small application under it: the status of the submission.
async fn submit(http: &reqwest::Client, base: &str, name: &str) -> (u16, Value) {
    let (s, v) = post(http, base, "/ws/v1/cluster/apps/new-application", json!({})).await;
    assert_eq!(s, 200, "{v}");
    let id = v["application-id"].as_str().expect("id").to_string();
    post(
        http,
        base,
        "/ws/v1/cluster/apps?user.name=alice",
        json!({
            "application-id": id, "application-name": name, "queue": "default",
            "am-container-spec": {"commands": {"command": "sleep 1000"}},
            "resource": {"memory": 256, "vCores": 1}
        }),
    )
    .await
}

impl Rm {
    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        post(&self.http, &self.base, path, body).await
    }

    async fn submit(&self, name: &str) -> (u16, Value) {
        submit(&self.http, &self.base, name).await
    }
}

fn conf_with_store(path: &std::path::Path) -> Configuration {
    let mut conf = Configuration::new();
    conf.set("yarn.scheduler.minimum-allocation-mb", "128");
    // The queue's own limit: the system-wide one is scaled by the queue's share of the
    // cluster, and this cluster has no node (issue 16: such submissions fail).
    conf.set(
        "yarn.scheduler.capacity.root.default.maximum-applications",
        "20000",
    );
    conf.set(STORE_KEY, &path.display().to_string());
    conf
}

/// A debug build of the RM once died of a stack overflow at its 98th application (a B-tree
/// node of large applications built on a 2 MiB worker stack), and again at the first
/// submission after recovering the 97. Libtest threads and tokio workers both have 2 MiB
/// stacks, so this runs where the RM does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_applications_are_submitted_recovered_and_submitted_to_again() {
    const APPS: usize = 10_050;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("rm.sqlite");
    let started = Instant::now();

    let rm = start_rm_with(conf_with_store(&store)).await;
    // Eight clients at a time: the driver takes them one by one, as it would real clients.
    let mut clients = tokio::task::JoinSet::new();
    for c in 0..8 {
        let (http, base) = (rm.http.clone(), rm.base.clone());
        clients.spawn(async move {
            for i in (c..APPS).step_by(8) {
                let (s, v) = submit(&http, &base, &format!("app-{i}")).await;
                assert_eq!(s, 202, "submission {i}: {v}");
            }
        });
    }
    while let Some(r) = clients.join_next().await {
        r.expect("client");
    }
    let (s, v) = rm.get("/ws/v1/cluster/metrics").await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        v["clusterMetrics"]["appsSubmitted"].as_u64(),
        Some(APPS as u64),
        "{v}"
    );
    rm.shutdown().await;

    let rm = start_rm_with(conf_with_store(&store)).await;
    let (s, v) = rm.get("/ws/v1/cluster/apps").await;
    assert_eq!(s, 200);
    let apps = v["apps"]["app"].as_array().cloned().unwrap_or_default();
    let accepted = apps.iter().filter(|a| a["state"] == "ACCEPTED").count();
    assert_eq!(
        (apps.len(), accepted),
        (APPS, APPS),
        "every application comes back after the restart, still waiting: {:?}",
        apps.first()
    );
    for i in 0..10 {
        let (s, v) = rm.submit(&format!("after-restart-{i}")).await;
        assert_eq!(s, 202, "submission {i} after the restart: {v}");
    }
    rm.shutdown().await;
    eprintln!(
        "{APPS} applications submitted, recovered and submitted to again in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// Durable before visible: the AM launch on an NM is an effect another daemon sees, so the
/// application record naming the attempt's AM container must be in the store first. The NM
/// here reads the store at every start call. Then the store is locked by another connection
/// (SQLite's `BEGIN EXCLUSIVE`): the RM's writes stall for the busy timeout and fail, and no
/// start call may arrive while they do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_am_is_launched_before_its_record_is_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("rm.sqlite");
    let rm = start_rm_with(conf_with_store(&store)).await;
    let (nm_addr, starts) = store_checking_nm(store.clone()).await;
    let (s, v) = rm
        .post(
            "/ws/v1/node-tracker/register",
            json!({"nodeId": nm_addr, "httpAddress": nm_addr,
                   "resource": {"memory": 8192, "vCores": 8}, "nmVersion": "t"}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let seen = || starts.lock().expect("lock").clone();

    // With a healthy store the AM is launched, after its record.
    let (s, v) = rm.submit("control").await;
    assert_eq!(s, 202, "{v}");
    wait_for(|| seen().len() == 1, "the control AM launch").await;

    // Lock the store: the RM's writes now stall, then fail.
    let lock = rusqlite::Connection::open(&store).expect("open store");
    lock.execute_batch("BEGIN EXCLUSIVE;").expect("lock store");
    let (s, v) = rm.submit("stalled").await;
    assert_ne!(
        s, 202,
        "a submission that could not be written is refused: {v}"
    );
    // Give a stray launch every chance to arrive.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        seen().len(),
        1,
        "the NM was called while the store could not be written: {:?}",
        seen()
    );
    lock.execute_batch("ROLLBACK;").expect("unlock store");
    drop(lock);

    // With the store back, submissions launch again.
    let (s, v) = rm.submit("after").await;
    assert_eq!(s, 202, "{v}");
    wait_for(|| seen().len() >= 2, "the next AM launch").await;
    rm.shutdown().await;
    for start in seen() {
        assert!(
            start.recorded,
            "the AM of {} was started before the store named its container",
            start.attempt
        );
    }
}

/// A start call as the store-checking NM saw it.
#[derive(Debug, Clone)]
struct SeenStart {
    attempt: String,
    /// The application's stored record named an AM container of this attempt.
    recorded: bool,
}

/// A fake NM that, at every start call, reads the RM's store (a reader is not blocked by a
/// writer in WAL mode) for the record of the application whose AM it is asked to start.
async fn store_checking_nm(
    store: std::path::PathBuf,
) -> (String, std::sync::Arc<std::sync::Mutex<Vec<SeenStart>>>) {
    use spindle_common::env as cenv;
    use spindle_common::{ApplicationAttemptId, ContainerId};

    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let addr = serve_nm(move |req| {
        for r in &req.start_container_request {
            let env = &r.container_launch_context.environment;
            let attempt: ApplicationAttemptId = env
                .get(cenv::APPLICATION_ATTEMPT_ID)
                .and_then(|a| a.parse().ok())
                .expect("the AM's attempt id in its environment");
            let app = attempt.application_id.to_string();
            let record: Option<String> = rusqlite::Connection::open(&store)
                .and_then(|c| {
                    c.query_row("SELECT record FROM apps WHERE id=?1", [&app], |r| r.get(0))
                })
                .ok();
            let stored_am: Option<ContainerId> = record
                .and_then(|r| serde_json::from_str::<Value>(&r).ok())
                .and_then(|v| v["live_attempt"]["amContainer"].as_str()?.parse().ok());
            s2.lock().expect("lock").push(SeenStart {
                attempt: attempt.to_string(),
                recorded: stored_am.is_some_and(|c| c.attempt_id == attempt),
            });
        }
    })
    .await;
    (addr, seen)
}

async fn wait_for(mut cond: impl FnMut() -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
