//! Guarantees against AM-only load on the real binaries (issue 31, item 6): two NMs of 2 GB,
//! queues `a` (60%) and `b` (30%, maximum 50%), the capacity-preemption monitor on.
//! Twelve applications that are nothing but their AM (`spindle submit --am-command "sleep
//! 600"`, 512 MB, so four fit a node) are submitted alternately to `a` and `b`: the first
//! eight fill the cluster half and half. The monitor then takes AM containers back from `b`
//! (whole applications, newest first, never below `b`'s guarantee) until `a` holds at least
//! 55% and `b` at most 50%, within a minute.
//!
//! Every application is killed when the test ends; the daemons are killed by their guards.

use std::time::Duration;

use serde_json::Value;
use spindle_system_tests::{app_id_in, cs_xml, output_text, wait_until, Cluster, ClusterOpts};

const NODE_MB: i64 = 2048;
const AM_MB: i64 = 512;
const APPS: usize = 12;
/// The bound on convergence.
const CONVERGES_WITHIN: Duration = Duration::from_secs(60);

fn cluster() -> Cluster {
    let queues = cs_xml(&[
        // The applications are nothing but AMs: the AM limit must not be what binds.
        ("maximum-am-resource-percent", "1.0"),
        ("root.queues", "a,b,c"),
        ("root.a.capacity", "60"),
        ("root.b.capacity", "30"),
        ("root.b.maximum-capacity", "50"),
        ("root.c.capacity", "10"),
        // One user may use what the queue may.
        ("root.a.user-limit-factor", "2"),
        ("root.b.user-limit-factor", "2"),
    ]);
    let prop = |k: &str, v: &str| (k.to_string(), v.to_string());
    let mon = "yarn.resourcemanager.monitor.capacity.preemption.";
    Cluster::start_with_files(
        ClusterOpts {
            nodes: 2,
            rm_props: vec![
                prop("yarn.resourcemanager.scheduler.monitor.enable", "true"),
                prop(&format!("{mon}monitoring_interval"), "500"),
                prop(&format!("{mon}max_wait_before_kill"), "3000"),
                prop("spindle.preemption.min-runtime-ms", "0"),
            ],
            nm_props: vec![
                prop("yarn.nodemanager.resource.memory-mb", &NODE_MB.to_string()),
                prop("yarn.nodemanager.resource.cpu-vcores", "8"),
            ],
        },
        &[("capacity-scheduler.xml", &queues)],
    )
}

/// Submits an AM-only application to `queue`, detached; its id.
fn submit(c: &Cluster, queue: &str, n: usize) -> String {
    let resources = format!("memory-mb={AM_MB},vcores=1");
    let name = format!("am-only-{n}");
    let out = c.spindle_within(
        &[
            "submit",
            "--am-command",
            "sleep 600",
            "--am-resources",
            &resources,
            "--queue",
            queue,
            "--appname",
            &name,
            "--detach",
        ],
        Duration::from_secs(30),
    );
    let text = output_text(&out);
    assert!(out.status.success(), "spindle submit to {queue}:\n{text}");
    app_id_in(&text).unwrap_or_else(|| panic!("no application id in:\n{text}"))
}

/// Memory (MB) each leaf uses, from the REST scheduler view.
fn used_mb(c: &Cluster, leaf: &str) -> i64 {
    let (s, v) = c.get("/ws/v1/cluster/scheduler");
    assert_eq!(s, 200, "{v}");
    v["scheduler"]["schedulerInfo"]["queues"]["queue"]
        .as_array()
        .and_then(|qs| qs.iter().find(|q| q["queuePath"] == leaf))
        .and_then(|q| q["resourcesUsed"]["memory"].as_i64())
        .unwrap_or_else(|| panic!("no {leaf} in {v}"))
}

fn am_preempted(app: &Value) -> i64 {
    app["numAMContainerPreempted"].as_i64().unwrap_or(0)
}

#[test]
fn am_only_applications_converge_to_the_guarantees() {
    let c = cluster();
    let total = 2 * NODE_MB;
    let mut apps = Vec::new();
    for n in 0..APPS {
        let q = if n % 2 == 0 { "a" } else { "b" };
        apps.push((q, submit(&c, q, n)));
    }
    // The first eight fill the cluster half and half (as without the monitor's help).
    wait_until("the cluster to fill", Duration::from_secs(30), || {
        (used_mb(&c, "root.a") + used_mb(&c, "root.b") == total).then_some(())
    });
    let (a, b) = wait_until(
        "a at 55% or more and b at 50% or less",
        CONVERGES_WITHIN,
        || {
            let (a, b) = (used_mb(&c, "root.a"), used_mb(&c, "root.b"));
            (a * 100 >= 55 * total && b * 100 <= 50 * total).then_some((a, b))
        },
    );
    assert!(
        b * 100 >= 30 * total,
        "b kept its guarantee: a {a} MB, b {b} MB"
    );
    // Only b's applications lost their AMs, and what b lost is what a gained.
    let mut taken = 0;
    for (q, id) in &apps {
        let lost = am_preempted(&c.app(id));
        if lost > 0 {
            assert_eq!(*q, "b", "{id} of {q} lost its AM");
        }
        taken += lost;
    }
    assert!(taken >= 1, "an AM was taken back");
    for (_, id) in &apps {
        let out = c.spindle(&["application", "-kill", id]);
        assert!(out.status.success(), "kill {id}: {}", output_text(&out));
    }
}
