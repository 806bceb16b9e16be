//! Fair share with memory on the real binaries: one `fairshare` leaf, NMs with fake GPUs.
//! `heavy` ran a job before (a short half-life makes its usage count now as a week would),
//! `light` never ran. Both submit while the cluster is full, heavy first; when the room comes
//! back, light's job starts first. `spindle queue -fairshare` and `spindle application
//! -priority` show why, and an RM restart on the same state store keeps the usage.

use std::time::{Duration, Instant};

use serde_json::Value;
use spindle_system_tests::rest::DshellSpec;
use spindle_system_tests::{cs_xml, fake_gpus, output_text, wait_until, Cluster, ClusterOpts};

const T: Duration = Duration::from_secs(90);
/// The half-life: long beside the test, so decay is small but measurable.
const HALF_LIFE_MS: u64 = 600_000;
const WHOLE_NODE: &str = "memory-mb=256,vcores=1,yarn.io/gpu=2";

fn submit(c: &Cluster, name: &str, user: &str, command: &str) -> String {
    c.rest().submit_dshell_spec(&DshellSpec {
        user: Some(user),
        worker_resources: WHOLE_NODE,
        ..DshellSpec::new(name, command)
    })
}

/// The `fairShare` row of `user` in `root.default`, if it has one.
fn user_row(c: &Cluster, user: &str) -> Option<Value> {
    let (s, v) = c.get("/ws/v1/cluster/scheduler");
    assert_eq!(s, 200, "{v}");
    v["scheduler"]["schedulerInfo"]["queues"]["queue"]
        .as_array()?
        .iter()
        .find(|q| q["queuePath"] == "root.default")?["fairShare"]["users"]
        .as_array()?
        .iter()
        .find(|u| u["username"] == user)
        .cloned()
}

fn num(v: &Value, field: &str) -> f64 {
    v[field]
        .as_f64()
        .unwrap_or_else(|| panic!("no {field} in {v}"))
}

/// When the application's GPU worker was started (ms), once it was.
fn worker_started(c: &Cluster, app: &str) -> Option<u64> {
    c.containers_of(app)
        .iter()
        .find(|k| k["allocatedResources"]["yarn.io/gpu"].as_i64().unwrap_or(0) > 0)
        .and_then(|k| k["startedTime"].as_u64())
        .filter(|t| *t > 0)
}

fn cli(c: &Cluster, args: &[&str]) -> String {
    let out = c.spindle_within(args, Duration::from_secs(30));
    let text = output_text(&out);
    assert!(out.status.success(), "spindle {args:?}:\n{text}");
    text
}

#[test]
fn the_user_without_usage_starts_first_and_the_usage_survives_an_rm_restart() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let gpus = fake_gpus(scratch.path(), 2);
    let cs = cs_xml(&[
        ("root.queues", "default"),
        ("root.default.capacity", "100"),
        ("root.default.ordering-policy", "fairshare"),
        ("root.default.maximum-am-resource-percent", "1.0"),
    ]);
    let mut opts = ClusterOpts::with_fake_gpus(1, &gpus);
    opts.rm_props.extend([
        (
            "spindle.scheduler.fairshare.decay-half-life-ms".to_string(),
            HALF_LIFE_MS.to_string(),
        ),
        (
            "spindle.scheduler.fairshare.calc-period-ms".into(),
            "500".into(),
        ),
        // GPU-seconds only: the AMs (no GPUs) cost nothing, so light's usage stays 0.
        (
            "spindle.scheduler.fairshare.billing-weights".into(),
            "yarn.io/gpu=1".into(),
        ),
    ]);
    let mut c = Cluster::start_with_files(opts, &[("capacity-scheduler.xml", &cs)]);
    c.wait_nodes_running(1);

    // heavy's earlier job: both GPUs for a few seconds.
    let prior = submit(&c, "prior", "heavy", "sleep 3");
    c.wait_app_state(&prior, &["FINISHED"], T);
    let heavy_before = wait_until("heavy's usage charged, nothing running", T, || {
        user_row(&c, "heavy").filter(|u| num(u, "billingRate") == 0.0 && num(u, "rawUsage") > 0.0)
    });
    assert!(
        num(&heavy_before, "rawUsage") >= 2.0 * 3.0,
        "two GPUs for at least 3 s: {heavy_before}"
    );

    // The cluster is full: a third user's job holds both GPUs.
    let blocker = submit(&c, "blocker", "other", "sleep 300");
    wait_until("the blocker's worker to run", T, || {
        worker_started(&c, &blocker)
    });
    // heavy submits first, light second; both wait for the whole node.
    let heavy = submit(&c, "heavy-job", "heavy", "sleep 2");
    let light = submit(&c, "light-job", "light", "sleep 2");
    let place = |app: &str| {
        let a = c.app(app);
        a["fairSharePriority"]["position"]
            .as_u64()
            .filter(|_| a["fairSharePriority"]["queue"] == "root.default")
    };
    wait_until("both workers to wait in the fairshare order", T, || {
        (place(&heavy).is_some()
            && place(&light).is_some()
            && c.app(&heavy)["pendingGpus"].as_i64() == Some(2)
            && c.app(&light)["pendingGpus"].as_i64() == Some(2))
        .then_some(())
    });
    assert_eq!(
        place(&light),
        Some(1),
        "light, without usage, is first: {}",
        c.app(&light)
    );
    assert_eq!(place(&heavy), Some(2), "{}", c.app(&heavy));

    // Why: the queue's users and each application's factors.
    let table = cli(&c, &["queue", "-fairshare", "default"]);
    let row = |user: &str| {
        table
            .lines()
            .find(|l| l.split_whitespace().next() == Some(user))
            .unwrap_or_else(|| panic!("no {user} row in:\n{table}"))
            .to_string()
    };
    assert!(
        row("light").contains("inf"),
        "light has no usage: infinite level fair share:\n{table}"
    );
    assert!(!row("heavy").contains("inf"), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("root.default") && l.contains("fairshare")),
        "{table}"
    );
    let why_light = cli(&c, &["application", "-priority", &light]);
    assert!(
        why_light.contains("1 of 3 waiting") || why_light.contains("1 of 2 waiting"),
        "{why_light}"
    );
    assert!(why_light.contains("factor 1.000000"), "{why_light}");
    let why_heavy = cli(&c, &["application", "-priority", &heavy]);
    assert!(why_heavy.contains("Position"), "{why_heavy}");
    assert!(
        !why_heavy.contains("factor 1.000000"),
        "heavy has usage: {why_heavy}"
    );

    // The room comes back: light's worker starts, heavy's waits for it.
    let kill = c.spindle_within(&["application", "-kill", &blocker], Duration::from_secs(90));
    assert!(kill.status.success(), "{}", output_text(&kill));
    let light_started = wait_until("light's worker to start", T, || worker_started(&c, &light));
    assert_eq!(
        worker_started(&c, &heavy),
        None,
        "heavy's job waits while light's holds the node"
    );
    c.wait_app_state(&light, &["FINISHED"], T);
    let heavy_started = wait_until("heavy's worker to start", T, || worker_started(&c, &heavy));
    assert!(heavy_started >= light_started);
    c.wait_app_state(&heavy, &["FINISHED"], T);

    // Nothing runs: the usage is fixed but for decay. An RM restart keeps it.
    let users = ["heavy", "light", "other"];
    let before: Vec<Value> = users
        .iter()
        .map(|u| {
            wait_until(&format!("{u}'s containers to end"), T, || {
                user_row(&c, u).filter(|r| num(r, "billingRate") == 0.0)
            })
        })
        .collect();
    let stopped = Instant::now();
    c.restart_rm();
    let after: Vec<Value> = users
        .iter()
        .map(|u| {
            wait_until(&format!("{u}'s usage after the restart"), T, || {
                user_row(&c, u)
            })
        })
        .collect();
    let elapsed_ms = stopped.elapsed().as_millis() as f64;
    for ((u, b), a) in users.iter().zip(&before).zip(&after) {
        assert_eq!(
            num(a, "rawUsage"),
            num(b, "rawUsage"),
            "{u}: raw usage kept exactly"
        );
        let (db, da) = (num(b, "decayedUsage"), num(a, "decayedUsage"));
        let floor = db * (-(elapsed_ms + 1000.0) / HALF_LIFE_MS as f64).exp2();
        assert!(
            da <= db && da >= floor * (1.0 - 1e-9),
            "{u}: decayed {db} became {da}"
        );
    }
    assert!(num(&after[0], "decayedUsage") > num(&after[1], "decayedUsage"));
}
