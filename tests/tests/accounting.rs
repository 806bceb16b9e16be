//! GPU-hour accounting end to end on the real binaries: two users each run a training gang
//! of known size on NMs with fake GPUs; the report (`GET /accounting`, `spindle accounting`)
//! gives each user the GPU-hours their containers held, as the RM's container view times
//! them, within 1%; the figures outlive the application itself (retention of one completed
//! application) and an RM restart on the same state store.

use std::time::Duration;

use serde_json::Value;
use spindle_system_tests::{app_id_in, fake_gpus, Cluster, ClusterOpts};

const GPU: &str = "yarn.io/gpu";
const RUN_LIMIT: Duration = Duration::from_secs(120);

/// Runs a `spindle train` gang of `workers` x `gpus` GPUs sleeping `secs`, as `user`, to
/// its end; answers the application id.
fn train(c: &Cluster, user: &str, workers: u32, gpus: u32, secs: u32) -> String {
    let w = workers.to_string();
    let res = format!("{GPU}={gpus},vcores=1,memory-mb=256");
    let cmd = format!("sleep {secs}");
    let out = spindle_within_as(
        c,
        user,
        &[
            "train",
            "--workers",
            &w,
            "--worker-resources",
            &res,
            "--timeout-ms",
            "100000",
            "--",
            "/bin/sh",
            "-c",
            &cmd,
        ],
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        c.dump_logs();
        panic!("train as {user} failed:\n{text}");
    }
    app_id_in(&text).unwrap_or_else(|| panic!("no application id in:\n{text}"))
}

fn spindle_within_as(c: &Cluster, user: &str, args: &[&str]) -> std::process::Output {
    let mut cmd = std::process::Command::new(spindle_system_tests::bin("spindle"));
    cmd.args(args)
        .env("SPINDLE_RM_ADDRESS", &c.rm_addr)
        .env("SPINDLE_CONF_DIR", &c.conf_dir)
        .env("USER", user);
    spindle_system_tests::output_within(cmd, RUN_LIMIT)
}

/// GPU-seconds of the application's containers as the RM's container view times them
/// (allocation to finish), and the sum of their GPUs.
fn gpu_seconds_of(c: &Cluster, app: &str) -> (f64, i64) {
    let mut secs = 0.0;
    let mut gpus = 0;
    for k in c.containers_of(app) {
        let g = k["allocatedResources"][GPU].as_i64().unwrap_or(0);
        if g == 0 {
            // The AM: no GPUs (and it may still be exiting).
            continue;
        }
        let start = k["startedTime"].as_u64().expect("startedTime");
        let end = k["finishedTime"].as_u64().expect("finishedTime");
        assert!(end >= start && end > 0, "a finished container: {k}");
        secs += g as f64 * (end - start) as f64 / 1000.0;
        gpus += g;
    }
    (secs, gpus)
}

fn seconds_map(app: &Value, key: &str) -> i64 {
    app["resourceSecondsMap"]["entry"]
        .as_array()
        .and_then(|e| e.iter().find(|x| x["key"] == key))
        .and_then(|x| x["value"].as_i64())
        .unwrap_or(-1)
}

fn report(c: &Cluster, group_by: &str) -> Value {
    let (s, v) = c.get(&format!(
        "/ws/v1/cluster/accounting?from=0&groupBy={group_by}"
    ));
    assert_eq!(s, 200, "{v}");
    v["accounting"].clone()
}

fn group<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["group"]
        .as_array()
        .and_then(|g| g.iter().find(|x| x["name"] == name))
        .unwrap_or_else(|| panic!("no group {name} in {r}"))
}

fn within_1pct(got: f64, want: f64, what: &str) {
    assert!(
        want > 0.0 && (got - want).abs() <= want * 0.01,
        "{what}: {got} GPU-hours, want {want} (within 1%)"
    );
}

#[test]
fn two_users_gpu_hours_match_their_containers_and_survive_eviction_and_an_rm_restart() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let gpus = fake_gpus(scratch.path(), 4);
    let mut c = Cluster::start(ClusterOpts {
        nodes: 2,
        rm_props: vec![
            ("yarn.resource-types".into(), GPU.into()),
            // Only the last finished application is kept: the first is forgotten, its
            // usage is not.
            (
                "yarn.resourcemanager.max-completed-applications".into(),
                "1".into(),
            ),
        ],
        nm_props: vec![
            ("yarn.nodemanager.resource-plugins".into(), GPU.into()),
            (
                "yarn.nodemanager.resource-plugins.gpu.path-to-discovery-executables".into(),
                gpus.display().to_string(),
            ),
            ("yarn.nodemanager.resource.cpu-vcores".into(), "8".into()),
        ],
    });

    // alice: 2 workers x 2 GPUs for 3 s; bob: 1 worker x 4 GPUs for 2 s.
    let a = train(&c, "alice", 2, 2, 3);
    let (alice_secs, alice_gpus) = gpu_seconds_of(&c, &a);
    assert_eq!(alice_gpus, 4, "alice's gang holds 4 GPUs");
    assert!(alice_secs >= 4.0 * 3.0, "{alice_secs}");
    let (_, view) = c.get(&format!("/ws/v1/cluster/apps/{a}"));
    let in_view = seconds_map(&view["app"], GPU);
    assert!(
        (in_view as f64 - alice_secs).abs() <= 1.0,
        "the app view's resourceSecondsMap ({in_view} s) agrees: {}",
        view["app"]
    );
    let b = train(&c, "bob", 1, 4, 2);
    let (bob_secs, bob_gpus) = gpu_seconds_of(&c, &b);
    assert_eq!(bob_gpus, 4);
    assert!(bob_secs >= 4.0 * 2.0, "{bob_secs}");
    // alice's application is gone from the RM's memory.
    let (s, _) = c.get(&format!("/ws/v1/cluster/apps/{a}"));
    assert_eq!(s, 404, "the first application was evicted (retention 1)");

    let check = |c: &Cluster, when: &str| -> Value {
        let by_user = report(c, "user");
        let alice = group(&by_user, "alice");
        let bob = group(&by_user, "bob");
        within_1pct(
            alice["gpuHours"].as_f64().unwrap_or(-1.0),
            alice_secs / 3600.0,
            &format!("alice {when}"),
        );
        within_1pct(
            bob["gpuHours"].as_f64().unwrap_or(-1.0),
            bob_secs / 3600.0,
            &format!("bob {when}"),
        );
        for g in [alice, bob] {
            assert_eq!(g["apps"], 1, "{g}");
            assert_eq!(g["lostGpuHours"].as_f64(), Some(0.0), "{g}");
            assert!(g["wallHours"].as_f64().unwrap_or(0.0) > 0.0, "{g}");
            assert!(g["memoryGBHours"].as_f64().unwrap_or(0.0) > 0.0, "{g}");
        }
        let by_queue = report(c, "queue");
        let q = group(&by_queue, "root.default");
        within_1pct(
            q["gpuHours"].as_f64().unwrap_or(-1.0),
            (alice_secs + bob_secs) / 3600.0,
            &format!("root.default {when}"),
        );
        assert_eq!(q["apps"], 2);
        by_user
    };
    let before = check(&c, "before the restart");

    // A period that ends before anything ran counts nothing; bad parameters are named.
    let (s, v) = c.get("/ws/v1/cluster/accounting?from=0&to=1000");
    assert_eq!(s, 200);
    assert_eq!(v["accounting"]["group"], serde_json::json!([]), "{v}");
    let (s, v) = c.get("/ws/v1/cluster/accounting?groupBy=node");
    assert_eq!(s, 400, "{v}");
    assert!(
        v["RemoteException"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("groupBy")),
        "{v}"
    );
    let (s, v) = c.get("/ws/v1/cluster/accounting?from=yesterday");
    assert_eq!(s, 400, "{v}");

    // The CLI prints the same figures.
    let out = c.spindle(&["accounting", "-from", "0", "-groupBy", "user"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let row = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some("alice"))
        .unwrap_or_else(|| panic!("no alice row:\n{text}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    let gpu_hours: f64 = cells[1].parse().expect("GPU-HOURS");
    assert!(
        (gpu_hours - alice_secs / 3600.0).abs() < 0.0001,
        "{row} vs {alice_secs} GPU-s"
    );
    assert_eq!(cells.last(), Some(&"1"), "APPS: {row}");
    assert!(
        text.contains("GPU-HOURS") && text.contains("LOST-GPU-HOURS"),
        "{text}"
    );

    // The report outlives the RM.
    c.restart_rm();
    let after = check(&c, "after the restart");
    for user in ["alice", "bob"] {
        let (x, y) = (group(&before, user), group(&after, user));
        assert_eq!(x["gpuHours"], y["gpuHours"], "{user}: {x} vs {y}");
    }
}
