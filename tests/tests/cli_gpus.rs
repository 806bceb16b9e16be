//! System test: the CLI sees GPUs, on the real binaries. One NodeManager with 4 fake GPUs
//! (`scripts/fake-nvidia-smi`), queues `a` and `b`; alice runs a one-GPU distributed shell in
//! `a`, bob a CPU one in `b`, both detached. `application -list -queue X -user Y` lists only
//! the matching application, the list shows the GPU columns, `node -list` the free GPUs per
//! partition, and a submission refused on the client side (an unknown queue, too many GPUs)
//! exits 2 without taking an application id. The daemons are killed by pid when the test
//! ends (the harness's `Cluster`), the applications with them.

use std::process::Command;
use std::time::Duration;

use reqwest::Method;
use serde_json::json;
use spindle_system_tests::{
    bin, cs_xml, fake_gpus_in, output_within, wait_until, Cluster, ClusterOpts,
};

const T: Duration = Duration::from_secs(60);

/// `spindle ARGS` as `user`; (exit status, stdout, stderr).
fn spindle_as(c: &Cluster, user: &str, args: &[&str]) -> (i32, String, String) {
    let mut cmd = Command::new(bin("spindle"));
    cmd.args(args)
        .env("SPINDLE_RM_ADDRESS", &c.rm_addr)
        .env("SPINDLE_CONF_DIR", &c.conf_dir)
        .env("USER", user);
    let o = output_within(cmd, T);
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Runs a command that must succeed; its stdout.
fn ok(c: &Cluster, args: &[&str]) -> String {
    let (code, out, err) = spindle_as(c, "tester", args);
    assert_eq!(code, 0, "spindle {args:?}\nstdout:\n{out}\nstderr:\n{err}");
    out
}

/// A detached distributed shell of one container with `resources`, as `user` in `queue`;
/// its application id.
fn submit(c: &Cluster, user: &str, queue: &str, resources: &str) -> String {
    let (code, out, err) = spindle_as(
        c,
        user,
        &[
            "distributed-shell",
            "--num_containers",
            "1",
            "--container_resources",
            resources,
            "--shell_command",
            "sleep 300",
            "--queue",
            queue,
            "--detach",
        ],
    );
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    out.split_whitespace()
        .find(|w| w.starts_with("application_"))
        .map(|w| w.trim_end_matches([';', ',']).to_string())
        .unwrap_or_else(|| panic!("no application id in:\n{out}"))
}

/// The rows (tab-separated cells, trimmed) of `application -list` after its two header
/// lines.
fn rows(out: &str) -> Vec<Vec<String>> {
    out.lines()
        .skip(2)
        .map(|l| l.split('\t').map(|c| c.trim().to_string()).collect())
        .collect()
}

#[test]
fn the_cli_lists_gpus_filters_by_queue_and_user_and_refuses_before_taking_an_id() {
    let cs = cs_xml(&[
        ("root.queues", "a,b"),
        ("root.a.capacity", "50"),
        ("root.b.capacity", "50"),
        ("root.a.maximum-capacity", "100"),
        ("root.b.maximum-capacity", "100"),
        ("maximum-am-resource-percent", "0.5"),
    ]);
    let scratch = tempfile::tempdir().expect("tempdir");
    let gpus = fake_gpus_in(scratch.path(), "gpus", "FAKE_GPU_COUNT=4\n");
    let c = Cluster::start_with_files(
        ClusterOpts::with_fake_gpus(1, &gpus),
        &[("capacity-scheduler.xml", &cs)],
    );

    let alice = submit(&c, "alice", "a", "memory-mb=256,vcores=1,yarn.io/gpu=1");
    let bob = submit(&c, "bob", "b", "memory-mb=256,vcores=1");
    // alice's GPU container runs: the list says it holds one GPU.
    let list = wait_until("alice's application to hold its GPU", T, || {
        let out = ok(&c, &["application", "-list"]);
        rows(&out)
            .iter()
            .any(|r| r[0] == alice && r.get(9).map(String::as_str) == Some("1"))
            .then_some(out)
    });
    let header: Vec<&str> = list
        .lines()
        .nth(1)
        .unwrap()
        .split('\t')
        .map(str::trim)
        .collect();
    assert_eq!(
        header[9..],
        ["GPUS", "GPU-HOURS", "GPU-UTIL", "REASON"],
        "{list}"
    );
    assert_eq!(rows(&list).len(), 2, "{list}");

    // -queue and -user filter (on the RM, and the list says only what matches).
    let only = |args: &[&str]| -> Vec<String> {
        let mut a = vec!["application", "-list"];
        a.extend_from_slice(args);
        rows(&ok(&c, &a))
            .into_iter()
            .map(|r| r[0].clone())
            .collect()
    };
    assert_eq!(
        only(&["-queue", "a", "-user", "alice"]),
        vec![alice.clone()]
    );
    assert_eq!(
        only(&["-queue", "root.b", "-user", "bob"]),
        vec![bob.clone()]
    );
    assert!(only(&["-queue", "a", "-user", "bob"]).is_empty());
    assert_eq!(only(&["-user", "bob"]), vec![bob.clone()]);
    assert_eq!(
        only(&["--queue", "a", "--app-states", "RUNNING"]),
        vec![alice.clone()]
    );

    // -status: GPU time and local ISO 8601 times, no epoch milliseconds.
    let status = ok(&c, &["application", "-status", &alice]);
    assert!(status.contains("\tGPU-Seconds : "), "{status}");
    assert!(status.contains("\tIdle GPU Time : "), "{status}");
    let start = status
        .lines()
        .find_map(|l| l.strip_prefix("\tStart-Time : "))
        .expect("a Start-Time line");
    assert!(
        start.len() == 25 && start.as_bytes()[10] == b'T' && start.as_bytes()[22] == b':',
        "{start}"
    );

    // node -list: the node's GPUs and model, and sinfo's free GPUs per partition.
    let nodes = ok(&c, &["node", "-list"]);
    let lines: Vec<&str> = nodes.lines().collect();
    let node: Vec<&str> = lines[2].split('\t').map(str::trim).collect();
    assert_eq!(node[4], "1/4", "{nodes}");
    assert_ne!(node[5], "-", "the NM reports a GPU model: {nodes}");
    let at = lines
        .iter()
        .position(|l| l.starts_with("PARTITION"))
        .unwrap_or_else(|| panic!("no partition summary:\n{nodes}"));
    assert_eq!(
        lines[at + 1].split_whitespace().collect::<Vec<_>>(),
        ["<DEFAULT_PARTITION>", "1", "3/4"],
        "{nodes}"
    );

    // top: one frame (stdout is not a terminal) with the GPU line.
    let top = ok(&c, &["top"]);
    assert!(top.starts_with("Spindle top - "), "{top}");
    assert!(
        top.contains("Queue(s) GPUs: 1 used, 3 free, 0 reserved of 4 total"),
        "{top}"
    );

    // Refused on the client side: exit 2, and no application id taken.
    let before = c.get("/ws/v1/cluster/apps").1["apps"]["app"]
        .as_array()
        .map_or(0, Vec::len);
    for (queue, resources, says) in [
        (
            "nosuch",
            "memory-mb=256,vcores=1",
            "unknown queue 'nosuch': the leaf queues are root.a, root.b",
        ),
        (
            "a",
            "memory-mb=256,vcores=1,yarn.io/gpu=99",
            "exceed the cluster's maximum container",
        ),
    ] {
        let (code, out, err) = spindle_as(
            &c,
            "alice",
            &[
                "distributed-shell",
                "--num_containers",
                "1",
                "--container_resources",
                resources,
                "--shell_command",
                "true",
                "--queue",
                queue,
                "--detach",
            ],
        );
        assert_eq!(code, 2, "{queue}: stdout:\n{out}\nstderr:\n{err}");
        assert!(err.contains(says), "{err}");
        assert!(!err.contains("spindle logs"), "{err}");
    }
    let after = c.get("/ws/v1/cluster/apps").1["apps"]["app"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(after, before);
    let (s, v, _) = c.send(
        Method::POST,
        "/ws/v1/cluster/apps/new-application",
        &json!({}),
    );
    assert_eq!(s, 200, "{v}");
    let next = v["application-id"].as_str().unwrap_or_default();
    let seq = |id: &str| id.rsplit('_').next().and_then(|n| n.parse::<u32>().ok());
    assert_eq!(
        seq(next),
        seq(&bob).map(|n| n + 1),
        "ids: {alice} {bob} then {next}"
    );
}
