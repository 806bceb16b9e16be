//! Time limits the RM enforces and dependencies it holds, end to end with the real binaries:
//! a detached `--time` job is killed by the RM at its lifetime with YARN's diagnostic, also
//! across an RM restart; a queue's `maximum-application-lifetime` caps a longer request and
//! the client says so; `--after-ok` waits, runs after success, fails after failure, and
//! `--after` runs whatever the end.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use spindle_system_tests::{app_id_in, cs_xml, Cluster, ClusterOpts};

const LIFETIME_EXCEEDED: &str =
    "Application is killed by ResourceManager as it has exceeded the lifetime period.";

fn cluster(cs: &[(&str, &str)]) -> Cluster {
    let mut pairs = vec![("maximum-am-resource-percent", "0.9")];
    pairs.extend_from_slice(cs);
    let c = Cluster::start_with_files(
        ClusterOpts {
            nodes: 1,
            ..Default::default()
        },
        &[("capacity-scheduler.xml", &cs_xml(&pairs))],
    );
    c.wait_nodes_running(1);
    c
}

/// `spindle distributed-shell ... --detach` running `command`; the id and the client's text.
fn detached(c: &Cluster, command: &str, extra: &[&str]) -> (String, String) {
    let mut args = vec![
        "distributed-shell",
        "-shell_command",
        command,
        "-container_resources",
        "memory-mb=128,vcores=1",
        "-master_memory",
        "128",
        "--detach",
    ];
    args.extend_from_slice(extra);
    let out = c.spindle_within(&args, Duration::from_secs(60));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{args:?}: {text}");
    let id = app_id_in(&text).unwrap_or_else(|| panic!("no application id in: {text}"));
    (id, text)
}

#[test]
fn a_detached_time_limit_is_enforced_by_the_rm_across_a_restart() {
    let mut c = cluster(&[]);
    let start = Instant::now();
    let (id, text) = detached(&c, "sleep 300", &["--time", "0:08"]);
    assert!(text.contains("Lifetime 00:00:08"), "{text}");
    // The RM holds the deadline: UNLIMITED no more.
    let (_, t) = c.get(&format!("/ws/v1/cluster/apps/{id}/timeouts"));
    let lifetime = &t["timeouts"]["timeout"][0];
    assert_eq!(lifetime["type"], "LIFETIME", "{t}");
    assert_ne!(lifetime["expiryTime"], "UNLIMITED", "{t}");
    c.wait_app_state(&id, &["RUNNING"], Duration::from_secs(30));
    // A restart in between: the new RM reads the deadline from the state store.
    c.restart_rm_after(Signal::SIGKILL);
    let app = c.wait_app_state(&id, &["KILLED"], Duration::from_secs(60));
    assert_eq!(app["diagnostics"], LIFETIME_EXCEEDED, "{app}");
    assert!(
        start.elapsed() >= Duration::from_secs(8),
        "killed before its lifetime"
    );
    let status = c.spindle(&["application", "-status", &id]);
    let s = String::from_utf8_lossy(&status.stdout);
    assert!(s.contains("exceeded the lifetime"), "{s}");
}

#[test]
fn a_queue_maximum_caps_a_longer_lifetime_and_the_client_says_so() {
    let c = cluster(&[("root.default.maximum-application-lifetime", "4")]);
    let (_, q) = c.get("/ws/v1/cluster/scheduler");
    assert!(
        q.to_string().contains("\"maxApplicationLifetime\":4"),
        "{q}"
    );
    let (id, text) = detached(&c, "sleep 300", &["--time", "10:00"]);
    assert!(text.contains("capped it to 00:00:04"), "{text}");
    let app = c.wait_app_state(&id, &["KILLED"], Duration::from_secs(60));
    assert_eq!(app["diagnostics"], LIFETIME_EXCEEDED, "{app}");
    // A malformed --time is refused before anything is submitted.
    let out = c.spindle(&[
        "distributed-shell",
        "-shell_command",
        "true",
        "--time",
        "1:2:3:4",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("HH:MM:SS"));
}

#[test]
fn after_ok_waits_runs_after_success_and_fails_after_failure() {
    let c = cluster(&[]);
    let (first, _) = detached(&c, "sleep 4", &[]);
    let (second, text) = detached(&c, "true", &["--after-ok", &first]);
    assert!(text.contains(&format!("holds it until {first}")), "{text}");
    // Held: ACCEPTED, saying what it waits for, while the first runs.
    let a = c.app(&second);
    assert_eq!(a["state"], "ACCEPTED", "{a}");
    assert!(
        a["diagnostics"].as_str().unwrap_or("").contains(&first),
        "{a}"
    );
    c.wait_app_state(&first, &["FINISHED"], Duration::from_secs(60));
    let a = c.wait_app_state(&second, &["FINISHED"], Duration::from_secs(60));
    assert_eq!(a["finalStatus"], "SUCCEEDED", "{a}");
    let first_done = c.app(&first)["finishedTime"].as_u64().unwrap_or(u64::MAX);
    assert!(
        a["launchTime"].as_u64().unwrap_or(0) >= first_done,
        "launched before its dependency ended: {a}"
    );

    let (failing, _) = detached(&c, "exit 3", &[]);
    let (ok, _) = detached(&c, "true", &["--after-ok", &failing]);
    let (any, _) = detached(&c, "true", &["--after", &failing]);
    c.wait_app_state(&failing, &["FINISHED", "FAILED"], Duration::from_secs(60));
    let a = c.wait_app_state(&ok, &["FAILED"], Duration::from_secs(60));
    let diag = a["diagnostics"].as_str().unwrap_or("");
    assert!(diag.contains(&failing) && diag.contains("afterok"), "{a}");
    let a = c.wait_app_state(&any, &["FINISHED"], Duration::from_secs(60));
    assert_eq!(a["finalStatus"], "SUCCEEDED", "{a}");
    // An unknown dependency is refused with the RM's words.
    let out = c.spindle(&[
        "distributed-shell",
        "-shell_command",
        "true",
        "--after",
        "application_1_9999",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("application_1_9999"), "{err}");
}
