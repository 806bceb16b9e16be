//! Graceful decommission end to end, as YARN's `rmadmin -refreshNodes -g`: a long-running
//! distributed-shell container on nm0, nm0 written to the exclude file, and the refresh.
//! nm0 turns DECOMMISSIONING (`node -list -all`), its container keeps running, a new
//! application runs wholly on nm1; when the container ends nm0 is DECOMMISSIONED and its NM
//! process exits. With a short timeout, the running container is killed at the deadline.
//! Also: a missing exclude file is named, a decommissioned NM that starts again is refused,
//! and `rmadmin -getGroups` prints `user : groups`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use spindle_system_tests::{bin, spawn, wait_until, Cluster, ClusterOpts, Daemon};

const LIMIT: Duration = Duration::from_secs(60);

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Kills every pid written under `dir` when dropped (the workers, should the test fail).
struct KillPids(PathBuf);

impl Drop for KillPids {
    fn drop(&mut self) {
        for pid in pids_in(&self.0) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

fn pids_in(dir: &Path) -> Vec<i32> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".pid"))
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

fn alive(pid: i32) -> bool {
    kill(Pid::from_raw(pid), None).is_ok()
}

/// A cluster of one NM (nm0) whose RM reads `exclude` (empty) as its exclude file.
fn cluster(exclude: &Path, timeout_secs: Option<&str>) -> Cluster {
    cluster_with(exclude, timeout_secs, vec![])
}

fn cluster_with(
    exclude: &Path,
    timeout_secs: Option<&str>,
    nm_props: Vec<(String, String)>,
) -> Cluster {
    std::fs::write(exclude, "").expect("exclude file");
    let mut rm_props = vec![
        (
            "yarn.resourcemanager.nodes.exclude-path".to_string(),
            exclude.display().to_string(),
        ),
        (
            "hadoop.user.group.static.mapping.overrides".to_string(),
            "alice=devs,ops;dr.who=;".to_string(),
        ),
        // Room for a second AM beside the long-running one on a small cluster.
        (
            "yarn.scheduler.capacity.maximum-am-resource-percent".to_string(),
            "0.5".to_string(),
        ),
    ];
    if let Some(t) = timeout_secs {
        rm_props.push((
            "yarn.resourcemanager.nodemanager-graceful-decommission-timeout-secs".into(),
            t.into(),
        ));
    }
    Cluster::start(ClusterOpts {
        nodes: 1,
        rm_props,
        nm_props,
    })
}

/// A distributed shell whose one worker writes its pid under `pids` and sleeps, started in
/// the background; answers the client and the worker's pid once it runs.
fn long_shell(c: &Cluster, pids: &Path) -> (Daemon, i32) {
    let shell = format!(
        "echo $$ > {}/$CONTAINER_ID.pid; exec sleep 600",
        pids.display()
    );
    let args: Vec<String> = [
        "distributed-shell",
        "--num-containers",
        "1",
        "--container-resources",
        "memory-mb=256,vcores=1",
        "--shell-command",
        &shell,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let client = spawn(
        "long distributed shell",
        &bin("spindle"),
        &args,
        c.dir.path().join("long-shell.out"),
        &[
            ("SPINDLE_RM_ADDRESS", c.rm_addr.clone()),
            ("SPINDLE_CONF_DIR", c.conf_dir.display().to_string()),
        ],
    );
    let pid = wait_until("the long-running worker", LIMIT, || {
        pids_in(pids).first().copied()
    });
    (client, pid)
}

fn node_state(c: &Cluster, id: &str) -> String {
    let (_, v) = c.get(&format!("/ws/v1/cluster/nodes/{id}"));
    v["node"]["state"].as_str().unwrap_or_default().to_string()
}

/// The line of `spindle node -list -all` naming `id`.
fn node_list_line(c: &Cluster, id: &str) -> String {
    let o = c.spindle(&["node", "-list", "-all"]);
    assert!(o.status.success(), "{}", text(&o));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .find(|l| l.contains(id))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_gracefully_decommissioned_node_drains_then_leaves() {
    let scratch = tempfile::tempdir().expect("scratch");
    let exclude = scratch.path().join("exclude");
    let pids = scratch.path().join("pids");
    let seen = scratch.path().join("seen");
    std::fs::create_dir_all(&pids).expect("pids");
    std::fs::create_dir_all(&seen).expect("seen");
    let _guard = KillPids(pids.clone());
    let mut c = cluster(&exclude, None);
    let nm0 = c.nm_addrs[0].clone();

    // The long-running work starts while nm0 is the only node: its AM and worker run there.
    let (_client, worker) = long_shell(&c, &pids);
    c.add_nm(&[]);
    c.wait_nodes_running(2);
    let nm1 = c.nm_addrs[1].clone();

    std::fs::write(&exclude, format!("# going away\n{nm0}\n")).expect("exclude nm0");
    let o = c.spindle(&["rmadmin", "-refreshNodes", "-g", "30"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).trim().is_empty(),
        "silent on success: {}",
        text(&o)
    );
    let line = node_list_line(&c, &nm0);
    assert!(line.contains("DECOMMISSIONING"), "{line}");
    let (_, node) = c.get(&format!("/ws/v1/cluster/nodes/{nm0}"));
    assert_eq!(node["node"]["decommissioningTimeout"], 30, "{node}");
    let (_, m) = c.get("/ws/v1/cluster/metrics");
    assert_eq!(m["clusterMetrics"]["decommissioningNodes"], 1, "{m}");

    // A new application runs wholly on nm1, while nm0's worker keeps running.
    let o = c.spindle_within(
        &[
            "distributed-shell",
            "--num-containers",
            "2",
            "--container-resources",
            "memory-mb=256,vcores=1",
            "--shell-command",
            &format!("echo $NM_HTTP_PORT > {}/$CONTAINER_ID", seen.display()),
        ],
        LIMIT,
    );
    assert!(o.status.success(), "{}", text(&o));
    let port1 = nm1.rsplit(':').next().expect("port").to_string();
    let ports: Vec<String> = std::fs::read_dir(&seen)
        .expect("seen")
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .map(|s| s.trim().to_string())
        .collect();
    assert_eq!(ports, vec![port1.clone(), port1.clone()], "workers on nm1");
    let app2 = spindle_system_tests::app_id_in(&text(&o)).expect("app id");
    let am_host = c.app(&app2)["amHostHttpAddress"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(am_host, nm1, "the AM ran on nm1 too");
    assert!(alive(worker), "nm0's worker still runs while nm0 drains");
    assert_eq!(node_state(&c, &nm0), "DECOMMISSIONING");

    // The worker ends: nm0 drains, is DECOMMISSIONED, and its NM exits.
    let _ = kill(Pid::from_raw(worker), Signal::SIGTERM);
    wait_until("nm0 DECOMMISSIONED", LIMIT, || {
        (node_state(&c, &nm0) == "DECOMMISSIONED").then_some(())
    });
    wait_until("nm0's NM process to exit", LIMIT, || {
        (!c.nms[0].is_running()).then_some(())
    });
    assert!(
        c.nms[0].log_text().contains("shut down"),
        "{}",
        c.nms[0].log_text()
    );
    let line = node_list_line(&c, &nm0);
    assert!(line.contains("DECOMMISSIONED"), "{line}");
    let (_, m) = c.get("/ws/v1/cluster/metrics");
    assert_eq!(m["clusterMetrics"]["decommissionedNodes"], 1, "{m}");
    assert_eq!(m["clusterMetrics"]["decommissioningNodes"], 0, "{m}");
    assert_eq!(node_state(&c, &nm1), "RUNNING");

    // Taken off the exclude list, the node may join again.
    std::fs::write(&exclude, "").expect("empty exclude");
    let o = c.spindle(&["rmadmin", "-refreshNodes"]);
    assert!(o.status.success(), "{}", text(&o));

    // A missing exclude file is named, and nothing changes.
    std::fs::remove_file(&exclude).expect("rm exclude");
    let o = c.spindle(&["rmadmin", "-refreshNodes", "-g"]);
    assert_eq!(o.status.code(), Some(255), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with("refreshNodes: "), "{err}");
    assert!(err.contains(&exclude.display().to_string()), "{err}");
    assert_eq!(node_state(&c, &nm1), "RUNNING");

    // getGroups: `user : groups`, from the RM's lookup.
    let o = c.spindle(&["rmadmin", "-getGroups", "alice", "dr.who"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "alice : devs ops\ndr.who : \n"
    );
}

#[test]
fn a_short_graceful_timeout_kills_what_is_left_and_a_refused_nm_exits() {
    let scratch = tempfile::tempdir().expect("scratch");
    let exclude = scratch.path().join("exclude");
    let pids = scratch.path().join("pids");
    std::fs::create_dir_all(&pids).expect("pids");
    let _guard = KillPids(pids.clone());
    // The configured default timeout is what `-g` without a number takes. nm0 keeps its
    // containers across its own restarts, but not when the RM decommissions it.
    let recovery = vec![(
        "yarn.nodemanager.recovery.enabled".to_string(),
        "true".to_string(),
    )];
    let mut c = cluster_with(&exclude, Some("3"), recovery);
    let nm0 = c.nm_addrs[0].clone();
    let (_client, worker) = long_shell(&c, &pids);
    c.add_nm(&[]);
    c.wait_nodes_running(2);

    std::fs::write(&exclude, format!("{nm0}\n")).expect("exclude nm0");
    let o = c.spindle(&["rmadmin", "-refreshNodes", "-graceful", "-server"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(node_state(&c, &nm0), "DECOMMISSIONING");
    let started = std::time::Instant::now();
    wait_until("nm0 DECOMMISSIONED at its timeout", LIMIT, || {
        (node_state(&c, &nm0) == "DECOMMISSIONED").then_some(())
    });
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "not before the timeout: {:?}",
        started.elapsed()
    );
    wait_until("nm0's NM process to exit", LIMIT, || {
        (!c.nms[0].is_running()).then_some(())
    });
    wait_until("the worker killed", LIMIT, || {
        (!alive(worker)).then_some(())
    });
    let (_, node) = c.get(&format!("/ws/v1/cluster/nodes/{nm0}"));
    let report = node["node"]["healthReport"].as_str().unwrap_or_default();
    assert!(
        report.contains("graceful decommission timeout of 3 s"),
        "{node}"
    );
    // The killed containers' diagnostic names the timeout (the AM's attempt carries it).
    let (_, apps) = c.get("/ws/v1/cluster/apps");
    let app = apps["apps"]["app"][0]["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let (_, atts) = c.get(&format!("/ws/v1/cluster/apps/{app}/appattempts"));
    assert!(
        atts.to_string().contains("decommission timeout of 3 s"),
        "{atts}"
    );

    // The excluded NM started again is refused and exits.
    let log = c.dir.path().join("nm0-again.log");
    let args = nm_args(&c, 0);
    let mut again = spawn("nodemanager0 again", &bin("nodemanager"), &args, log, &[]);
    wait_until("the refused NM to exit", LIMIT, || {
        (!again.is_running()).then_some(())
    });
    let log = again.log_text();
    assert!(log.contains("Disallowed NodeManager"), "{log}");
    assert_eq!(node_state(&c, &nm0), "DECOMMISSIONED");
}

/// nm`i`'s command line again, on the same port (what `Cluster::add_nm` gave it).
fn nm_args(c: &Cluster, i: usize) -> Vec<String> {
    let d = c.dir.path().join(format!("nm{i}"));
    let mut args = vec!["--conf-dir".to_string(), c.conf_dir.display().to_string()];
    for (k, v) in [
        ("yarn.nodemanager.webapp.address", c.nm_addrs[i].clone()),
        ("yarn.resourcemanager.webapp.address", c.rm_addr.clone()),
        ("spindle.nodemanager.rm-address", c.rm_addr.clone()),
        (
            "yarn.nodemanager.local-dirs",
            d.join("local2").display().to_string(),
        ),
        (
            "yarn.nodemanager.log-dirs",
            d.join("logs2").display().to_string(),
        ),
        (
            "yarn.nodemanager.recovery.dir",
            d.join("recovery2").display().to_string(),
        ),
        (
            "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage",
            "100".to_string(),
        ),
        (
            spindle_system_tests::CLUSTER_SECRET_FILE,
            c.cluster_secret().display().to_string(),
        ),
    ] {
        args.push("-D".into());
        args.push(format!("{k}={v}"));
    }
    args
}

#[test]
fn client_tracked_graceful_decommission_forces_at_its_timeout() {
    let scratch = tempfile::tempdir().expect("scratch");
    let exclude = scratch.path().join("exclude.xml");
    let pids = scratch.path().join("pids");
    std::fs::create_dir_all(&pids).expect("pids");
    let _guard = KillPids(pids.clone());
    let mut c = cluster(&exclude, None);
    std::fs::write(&exclude, "<hosts/>\n").expect("empty XML exclude file");
    let nm0 = c.nm_addrs[0].clone();
    let (_client, worker) = long_shell(&c, &pids);
    c.add_nm(&[]);
    c.wait_nodes_running(2);

    // YARN's XML form; the RM's own timeout (3600 s) is far away: the client forces.
    std::fs::write(
        &exclude,
        format!("<hosts>\n  <host><name>{nm0}</name></host>\n</hosts>\n"),
    )
    .expect("exclude nm0");
    let started = std::time::Instant::now();
    let o = c.spindle_within(&["rmadmin", "-refreshNodes", "-g", "2", "-client"], LIMIT);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "the client waits out its timeout: {:?}",
        started.elapsed()
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("Graceful decommissioning not completed in") && out.contains(&nm0),
        "{out}"
    );
    assert_eq!(
        node_state(&c, &nm0),
        "DECOMMISSIONED",
        "forced when the command returns"
    );
    wait_until("the worker killed", LIMIT, || {
        (!alive(worker)).then_some(())
    });
    wait_until("nm0's NM process to exit", LIMIT, || {
        (!c.nms[0].is_running()).then_some(())
    });
}
