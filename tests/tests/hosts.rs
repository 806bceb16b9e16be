//! Issue 29, items 4 and 5: the RM and each NodeManager as a separate host
//! (`spindle_system_tests::hosts`: own network namespace, address, link, host name, `/tmp`
//! and directories), and partitions made by cutting a host's link, checked against what
//! YARN promises, on the RM's views (REST nodes, applications, attempts, containers), the
//! AMs' and the NMs' own:
//!
//! - a node cut off past `yarn.nm.liveness-monitor.expiry-interval-ms` is LOST, its gang
//!   worker is reported lost (-100) and the gang restarts on the other nodes; when the link
//!   returns the node rejoins and the container the RM no longer knows is stopped there;
//! - an NM cut off for less than the expiry keeps its container running and resynchronizes:
//!   the node stays RUNNING, the same container finishes and the application succeeds;
//! - an AM cut off past `yarn.am.liveness-monitor.expiry-interval-ms` has its attempt failed
//!   and a new attempt starts on another host; the old AM is stopped once its host returns.
//!
//! - item 3: a `spindle train --checkpoint-dir` on a path each host has privately fails
//!   before any rank starts, naming the nodes that do not see the AM's directory; on a
//!   directory every host mounts (the harness's shared directory) the job runs.
//!
//! Root only (network and mount namespaces): skipped with the reason outside CI, a failure
//! under `CI=true`.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use spindle_system_tests::hosts::{start_or_skip as hosts, Host, Hosts, HostsOpts};
use spindle_system_tests::{app_id_in, output_text as text, wait_until, DshellSpec};

const LIMIT: Duration = Duration::from_secs(60);

fn props(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn state_of(c: &Hosts, node: &str) -> String {
    c.rest()
        .node(node)
        .and_then(|n| n["state"].as_str().map(str::to_string))
        .unwrap_or_default()
}

fn wait_node_state(c: &Hosts, node: &str, state: &str, timeout: Duration) {
    wait_until(&format!("node {node} {state}"), timeout, || {
        (state_of(c, node) == state).then_some(())
    });
}

/// The application's containers that are not an attempt's AM container.
fn workers(c: &Hosts, app: &str) -> Vec<Value> {
    c.rest().workers_of(app)
}

/// Whether a process on `host` has `needle` in its command line.
fn runs(c: &Hosts, host: &Host, needle: &str) -> bool {
    c.processes(host)
        .iter()
        .any(|(_, cmd)| cmd.contains(needle))
}

#[test]
fn each_host_has_its_own_address_name_and_tmp() {
    let Some(c) = hosts(
        "each_host_has_its_own_address_name_and_tmp",
        HostsOpts {
            nms: 2,
            ..Default::default()
        },
    ) else {
        return;
    };
    // Every daemon is on its host's address, not 127.0.0.1.
    assert!(c.rm_addr.starts_with(&format!("{}:", c.rm_host.link.ip)));
    for (addr, h) in c.nm_addrs.iter().zip(&c.nm_hosts) {
        assert!(addr.starts_with(&format!("{}:", h.link.ip)), "{addr}");
        assert!(c.rest().node(addr).is_some(), "the RM knows {addr}");
    }
    let marker = format!("only-on-this-host-{}", std::process::id());
    let cmd = format!(
        "hostname; echo x > /tmp/{marker}; ls /tmp; ls {} | sed 's/^/seen: /'",
        c.nm_hosts[1].dir.display()
    );
    let mut spec = DshellSpec::new("where-am-i", &cmd);
    // Both on nm0 or nm1: the AM and the worker fill a node each.
    spec.am_mb = 2560;
    spec.worker_resources = "memory-mb=2560,vcores=1";
    let app = c.rest().submit_dshell_spec(&spec);
    let a = c
        .rest()
        .wait_app_state(&app, &["FINISHED", "FAILED", "KILLED"], LIMIT);
    assert_eq!(a["finalStatus"], "SUCCEEDED", "{a}\n{}", c.logs());
    let w = &workers(&c, &app)[0];
    let host = c
        .nm_host_of(w["nodeId"].as_str().unwrap_or_default())
        .expect("the worker's host");
    let out = c.rest().container_log(
        w["nodeHttpAddress"].as_str().unwrap_or_default(),
        w["containerId"].as_str().unwrap_or_default(),
        "stdout",
    );
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some(host.name.as_str()), "{out}");
    assert!(out.contains(&marker), "{out}");
    // The file lives in that host's /tmp only; the other NM host's directory is hidden.
    assert!(!std::path::Path::new("/tmp").join(&marker).exists());
    // nm1's directory is hidden on nm0 (an empty mount), and nm1 sees its own.
    assert_eq!(out.contains("seen: nm"), host.name == "nm1", "{out}");
}

#[test]
fn a_node_cut_off_past_the_expiry_is_lost_its_gang_restarts_elsewhere_and_its_worker_is_stopped_on_rejoin(
) {
    let test = "a_node_cut_off_past_the_expiry_is_lost";
    let Some(c) = hosts(
        test,
        HostsOpts {
            nms: 3,
            rm_props: props(&[("yarn.nm.liveness-monitor.expiry-interval-ms", "3000")]),
            ..Default::default()
        },
    ) else {
        return;
    };
    // Attempt 1's workers sleep (a marker the test can find); attempt 2's succeed. A worker
    // fills most of a node, so each is on a host of its own.
    let o = c.spindle_within(
        &[
            "train",
            "--detach",
            "--workers",
            "2",
            "--worker-resources",
            "memory-mb=2560,vcores=1",
            "--max-restarts",
            "1",
            "--",
            "sh",
            "-c",
            "if [ \"$SPINDLE_GANG_ATTEMPT\" = 1 ]; then exec sleep 7213; fi; echo gang attempt $SPINDLE_GANG_ATTEMPT",
        ],
        LIMIT,
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}\n{}", c.logs());
    let app = app_id_in(&t).expect("an application id");
    let first = wait_until("both workers of attempt 1 RUNNING", LIMIT, || {
        let w = workers(&c, &app);
        (w.len() == 2 && w.iter().all(|x| x["containerState"] == "RUNNING")).then_some(w)
    });
    let am_node = c.rest().attempts_of(&app)[0]["nodeId"].clone();
    let victim = first
        .iter()
        .find(|w| w["nodeId"] != am_node)
        .expect("a worker away from the AM")
        .clone();
    let node = victim["nodeId"].as_str().unwrap().to_string();
    let host = c.nm_host_of(&node).expect("the victim's host").clone();
    wait_until("the worker's process", LIMIT, || {
        runs(&c, &host, "sleep 7213").then_some(())
    });

    c.cut(&host);
    wait_node_state(&c, &node, "LOST", Duration::from_secs(30));
    // The RM's view: the worker completed ABORTED, lost with its node.
    let lost = c
        .rest()
        .containers_of(&app)
        .into_iter()
        .find(|x| x["containerId"] == victim["containerId"])
        .expect("the lost worker is listed");
    assert_eq!(lost["containerExitStatus"], -100, "{lost}");
    assert!(
        lost["diagnosticsInfo"]
            .as_str()
            .unwrap_or_default()
            .contains("lost"),
        "{lost}"
    );
    // The AM heard of it and restarted the gang on the other nodes.
    let a = c
        .rest()
        .wait_app_state(&app, &["FINISHED", "FAILED", "KILLED"], LIMIT);
    assert_eq!(a["finalStatus"], "SUCCEEDED", "{a}\n{}", c.logs());
    let am = c.rest().am_stdout(&app, 1);
    let told =
        format!("with exit status -100 (ABORTED): Container released on a *lost* node {node}");
    assert!(am.contains(&told), "{am}");
    assert!(
        am.contains("restarting the gang (attempt 2 of at most 2)"),
        "{am}"
    );
    let before: Vec<&Value> = first.iter().map(|w| &w["containerId"]).collect();
    let second: Vec<Value> = workers(&c, &app)
        .into_iter()
        .filter(|w| !before.contains(&&w["containerId"]))
        .collect();
    assert_eq!(second.len(), 2, "{second:?}");
    assert!(
        second.iter().all(|w| w["nodeId"] != node.as_str()),
        "{second:?}"
    );
    // The partitioned NM never stopped its container: an unreachable RM stops nothing.
    assert!(runs(&c, &host, "sleep 7213"), "{}", c.logs());

    c.restore(&host);
    wait_node_state(&c, &node, "RUNNING", Duration::from_secs(30));
    wait_until(
        "the NM to stop the container the RM no longer knows",
        Duration::from_secs(30),
        || (!runs(&c, &host, "sleep 7213")).then_some(()),
    );
    assert!(runs(&c, &host, "nodemanager"), "the NM lives on");
}

#[test]
fn an_nm_cut_off_for_less_than_the_expiry_keeps_its_container_and_resynchronizes() {
    let test = "an_nm_cut_off_for_less_than_the_expiry";
    let Some(c) = hosts(
        test,
        HostsOpts {
            nms: 2,
            rm_props: props(&[("yarn.nm.liveness-monitor.expiry-interval-ms", "20000")]),
            ..Default::default()
        },
    ) else {
        return;
    };
    // The worker waits for a file the test writes into its host's directory (each host
    // sees its own directory; the test sees them all).
    let go: Vec<_> = c.nm_hosts.iter().map(|h| h.dir.join("go")).collect();
    let cmd = format!(
        "while [ ! -e {} ] && [ ! -e {} ]; do sleep 0.1; done; echo released",
        go[0].display(),
        go[1].display()
    );
    let mut spec = DshellSpec::new("partitioned-worker", &cmd);
    spec.am_mb = 2560;
    spec.worker_resources = "memory-mb=2560,vcores=1";
    let app = c.rest().submit_dshell_spec(&spec);
    let w = wait_until("the worker RUNNING", LIMIT, || {
        workers(&c, &app)
            .into_iter()
            .find(|x| x["containerState"] == "RUNNING")
    });
    let node = w["nodeId"].as_str().unwrap().to_string();
    let host = c.nm_host_of(&node).expect("the worker's host").clone();
    let pid_of = |c: &Hosts| {
        c.processes(&host)
            .into_iter()
            .find(|(_, cmd)| cmd.contains("echo released"))
            .map(|(p, _)| p)
    };
    let pid = wait_until("the worker's process", LIMIT, || pid_of(&c));
    let nm = c.nm_hosts.iter().position(|h| h.name == host.name).unwrap();

    c.cut(&host);
    // Cut for a while (well under the expiry): the NM's heartbeats fail, the RM keeps the
    // node RUNNING.
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        assert_eq!(state_of(&c, &node), "RUNNING", "{}", c.logs());
        std::thread::sleep(Duration::from_millis(200));
    }
    wait_until("the NM to notice", LIMIT, || {
        c.nms[nm]
            .log_text()
            .contains("heartbeat failed; containers keep running")
            .then_some(())
    });
    c.restore(&host);
    wait_until("the NM to reach the RM again", LIMIT, || {
        c.nms[nm]
            .log_text()
            .contains("heartbeats reach the ResourceManager again")
            .then_some(())
    });
    assert_eq!(state_of(&c, &node), "RUNNING");
    assert_eq!(pid_of(&c), Some(pid), "the same process runs on");
    let same = workers(&c, &app);
    assert_eq!(same.len(), 1, "{same:?}");
    assert_eq!(same[0]["containerId"], w["containerId"]);
    assert_eq!(same[0]["containerState"], "RUNNING", "{same:?}");

    std::fs::write(&go[nm], "").expect("go");
    let a = c
        .rest()
        .wait_app_state(&app, &["FINISHED", "FAILED", "KILLED"], LIMIT);
    assert_eq!(a["finalStatus"], "SUCCEEDED", "{a}\n{}", c.logs());
    let done = &workers(&c, &app)[0];
    assert_eq!(done["containerId"], w["containerId"]);
    assert_eq!(done["containerExitStatus"], 0, "{done}");
    assert_eq!(c.rest().attempts_of(&app).len(), 1);
}

#[test]
fn an_am_cut_off_past_the_am_expiry_fails_its_attempt_and_the_next_starts_on_another_host() {
    let test = "an_am_cut_off_past_the_am_expiry";
    let Some(c) = hosts(
        test,
        HostsOpts {
            nms: 3,
            rm_props: props(&[
                ("yarn.am.liveness-monitor.expiry-interval-ms", "4000"),
                ("yarn.nm.liveness-monitor.expiry-interval-ms", "60000"),
            ]),
            ..Default::default()
        },
    ) else {
        return;
    };
    // Attempt 1's worker runs until stopped; attempt 2's ends at once. The AM and the worker
    // fill most of a node each, so nothing of attempt 2 can land on the cut-off host while
    // attempt 1's AM is held there (the RM still sees that node RUNNING: a container it
    // placed there could not be started).
    let mut spec = DshellSpec::new(
        "cut-off-am",
        "case \"$CONTAINER_ID\" in *_01_0*) exec sleep 7214;; esac; echo attempt 2",
    );
    spec.am_mb = 2560;
    spec.worker_resources = "memory-mb=2560,vcores=1";
    spec.max_attempts = 2;
    let app = c.rest().submit_dshell_spec(&spec);
    wait_until("attempt 1's worker RUNNING", LIMIT, || {
        workers(&c, &app)
            .iter()
            .any(|x| x["containerState"] == "RUNNING")
            .then_some(())
    });
    let first = c.rest().attempts_of(&app)[0].clone();
    let node = first["nodeId"].as_str().unwrap().to_string();
    let host = c.nm_host_of(&node).expect("the AM's host").clone();
    assert!(runs(&c, &host, "distributed-shell-am"));

    c.cut(&host);
    let atts = wait_until("a second attempt", Duration::from_secs(30), || {
        let a = c.rest().attempts_of(&app);
        (a.len() == 2).then_some(a)
    });
    // The RM's view: attempt 1 failed as timed out; the application goes on.
    assert_eq!(atts[0]["appAttemptState"], "FAILED", "{:?}", atts[0]);
    assert!(
        atts[0]["diagnosticsInfo"]
            .as_str()
            .unwrap_or_default()
            .contains("timed out"),
        "{:?}",
        atts[0]
    );
    let a = c.rest().app(&app);
    assert!(
        a["diagnostics"]
            .as_str()
            .unwrap_or_default()
            .contains("Starting attempt 2 of 2"),
        "{a}"
    );
    // The node was never lost: only the AM expired.
    assert_eq!(state_of(&c, &node), "RUNNING");
    let a = c
        .rest()
        .wait_app_state(&app, &["FINISHED", "FAILED", "KILLED"], LIMIT);
    assert_eq!(a["finalStatus"], "SUCCEEDED", "{a}\n{}", c.logs());
    let second = &c.rest().attempts_of(&app)[1];
    assert_ne!(second["nodeId"], node.as_str(), "{second}");

    // Back on the network, the host's NM hears that the old AM and its worker are over.
    c.restore(&host);
    wait_until(
        "the old AM and its worker to be stopped",
        Duration::from_secs(30),
        || {
            (!runs(&c, &host, "distributed-shell-am") && !runs(&c, &host, "sleep 7214"))
                .then_some(())
        },
    );
}

/// The worker of the checkpoint directory tests: says it started (stdout) and writes a file
/// into the checkpoint directory.
const CKPT_WORKER: &str =
    "echo RANK-PROCESS-STARTED $RANK; hostname > \"$SPINDLE_CHECKPOINT_DIR/rank-$RANK\"";

/// `spindle train` of two workers, each filling most of a node (so on hosts of their own),
/// with `--checkpoint-dir dir`; attached, its output.
fn train_with_checkpoint_dir(c: &Hosts, dir: &Path) -> std::process::Output {
    c.spindle_within(
        &[
            "train",
            "--workers",
            "2",
            "--worker-resources",
            "memory-mb=2560,vcores=1",
            "--max-restarts",
            "2",
            "--checkpoint-dir",
            dir.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            CKPT_WORKER,
        ],
        LIMIT,
    )
}

#[test]
fn a_checkpoint_dir_private_to_each_host_fails_before_any_rank_starts_naming_the_nodes() {
    let test = "a_checkpoint_dir_private_to_each_host_fails_before_any_rank_starts";
    let Some(c) = hosts(
        test,
        HostsOpts {
            nms: 3,
            ..Default::default()
        },
    ) else {
        return;
    };
    // Under each host's private /tmp: the AM makes it on its own host, no other has it.
    let dir = Path::new("/tmp/ckpt-private");
    let o = train_with_checkpoint_dir(&c, dir);
    let t = text(&o);
    assert!(!o.status.success(), "{t}\n{}", c.logs());
    let app = app_id_in(&t).expect("an application id");
    let a = c.rest().app(&app);
    assert_eq!(a["finalStatus"], "FAILED", "{a}");
    let diag = a["diagnostics"].as_str().unwrap_or_default().to_string();
    assert!(
        diag.contains("checkpoint directory /tmp/ckpt-private is not shared"),
        "{diag}"
    );
    assert!(diag.contains("not a node-local disk"), "{diag}");
    // Every worker's node away from the AM's host is named, as having no such directory;
    // the AM's own node (it made the directory there) is not.
    let am_node = c.rest().attempts_of(&app)[0]["nodeId"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let ws = workers(&c, &app);
    assert_eq!(ws.len(), 2, "{ws:?}");
    let mut named = 0;
    for w in &ws {
        let node = w["nodeId"].as_str().unwrap_or_default();
        if node == am_node {
            assert!(!diag.contains(&format!("{node} (")), "{node}: {diag}");
        } else {
            assert!(
                diag.contains(&format!("{node} (no such directory)")),
                "{node}: {diag}"
            );
            named += 1;
        }
    }
    assert!(named >= 1, "a worker away from the AM: {ws:?}");
    // Not restarted (--max-restarts 2): another gang would fail the same way.
    let am = c.rest().am_stdout(&app, 1);
    assert!(!am.contains("restarting the gang"), "{am}");
    // No rank process ran: neither worker's stdout has its line, the AM started none.
    for w in &ws {
        let out = c.rest().container_log(
            w["nodeHttpAddress"].as_str().unwrap_or_default(),
            w["containerId"].as_str().unwrap_or_default(),
            "stdout",
        );
        assert!(!out.contains("RANK-PROCESS-STARTED"), "{out}");
    }
    assert!(!am.contains("started in container"), "{am}");
}

#[test]
fn a_checkpoint_dir_every_host_mounts_passes_the_check_and_the_job_runs() {
    let test = "a_checkpoint_dir_every_host_mounts_passes_the_check_and_the_job_runs";
    let dir = Path::new("/tmp/ckpt-shared");
    let Some(c) = hosts(
        test,
        HostsOpts {
            nms: 3,
            shared: vec![dir.to_path_buf()],
            ..Default::default()
        },
    ) else {
        return;
    };
    let o = train_with_checkpoint_dir(&c, dir);
    let t = text(&o);
    assert!(o.status.success(), "{t}\n{}", c.logs());
    let app = app_id_in(&t).expect("an application id");
    let am = c.rest().am_stdout(&app, 1);
    assert!(
        am.contains("all 2 node(s) see the checkpoint directory /tmp/ckpt-shared"),
        "{am}"
    );
    // Each rank wrote from its own host into the one shared directory; the check left
    // nothing behind.
    let source = c.shared_source(dir).expect("the shared directory");
    let mut hosts_seen: Vec<String> = (0..2)
        .map(|r| {
            std::fs::read_to_string(source.join(format!("rank-{r}")))
                .unwrap_or_else(|e| panic!("rank-{r}: {e}\n{am}"))
                .trim()
                .to_string()
        })
        .collect();
    hosts_seen.dedup();
    assert_eq!(hosts_seen.len(), 2, "two hosts: {hosts_seen:?}");
    let left: Vec<String> = std::fs::read_dir(source)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with(".spindle-check-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
