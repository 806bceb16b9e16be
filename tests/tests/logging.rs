//! Logs and traces: the daemons started with `--log-format json` write nothing but JSON
//! lines, and the lines about a container carry its ids as fields (the spans' fields
//! flattened); a bad log format is refused naming what is wrong; the NM's container-log page
//! links back to the application in the RM's UI. Real binaries on 127.0.0.1; every process is
//! killed by pid and the work directory removed when the test ends.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use spindle_system_tests::{app_id_in, bin, output_within, spawn, wait_until, Cluster, Daemon};

/// Starts `name` with `args` plus `--address-file`, and waits for the address it writes.
fn start_daemon(dir: &Path, name: &str, args: Vec<String>) -> (Daemon, String) {
    let addr_file = dir.join(format!("{name}.address"));
    let mut args = args;
    args.push("--address-file".into());
    args.push(addr_file.display().to_string());
    let mut d = spawn(
        name,
        &bin(name),
        &args,
        dir.join(format!("{name}.log")),
        &[],
    );
    let addr = wait_until(
        &format!("{name} to listen"),
        Duration::from_secs(20),
        || {
            if !d.is_running() {
                panic!("{name} exited early:\n{}", d.log_text());
            }
            std::fs::read_to_string(&addr_file)
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        },
    );
    (d, addr)
}

fn define(props: &[(&str, String)]) -> Vec<String> {
    props
        .iter()
        .flat_map(|(k, v)| ["-D".to_string(), format!("{k}={v}")])
        .collect()
}

/// An RM and one NM, both started with `--log-format json`, as a [`Cluster`] so the usual
/// helpers work (they are killed by pid and the directory removed when it drops).
fn json_cluster() -> Cluster {
    let dir = tempfile::tempdir().expect("tempdir");
    let conf_dir = dir.path().join("conf");
    std::fs::create_dir_all(&conf_dir).unwrap();
    std::fs::write(
        conf_dir.join("yarn-site.xml"),
        "<configuration></configuration>\n",
    )
    .unwrap();
    let mut rm_args = vec![
        "--conf-dir".to_string(),
        conf_dir.display().to_string(),
        "--log-format".into(),
        "json".into(),
    ];
    rm_args.extend(define(&[
        ("yarn.resourcemanager.webapp.address", "127.0.0.1:0".into()),
        (
            "spindle.resourcemanager.state-store.path",
            dir.path().join("rmstore.sqlite").display().to_string(),
        ),
        ("yarn.scheduler.minimum-allocation-mb", "128".into()),
    ]));
    let (rm, rm_addr) = start_daemon(dir.path(), "resourcemanager", rm_args.clone());
    let nm_dir = dir.path().join("nm0");
    let mut nm_args = vec![
        "--conf-dir".to_string(),
        conf_dir.display().to_string(),
        "--log-format".into(),
        "json".into(),
    ];
    nm_args.extend(define(&[
        ("yarn.nodemanager.webapp.address", "127.0.0.1:0".into()),
        ("spindle.nodemanager.rm-address", rm_addr.clone()),
        (
            "yarn.nodemanager.local-dirs",
            nm_dir.join("local").display().to_string(),
        ),
        (
            "yarn.nodemanager.log-dirs",
            nm_dir.join("logs").display().to_string(),
        ),
        (
            "yarn.nodemanager.recovery.dir",
            nm_dir.join("recovery").display().to_string(),
        ),
        ("yarn.nodemanager.resource.memory-mb", "4096".into()),
        ("yarn.nodemanager.resource.cpu-vcores", "4".into()),
        (
            "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage",
            "100".into(),
        ),
    ]));
    let (nm, nm_addr) = start_daemon(dir.path(), "nodemanager", nm_args);
    let c = Cluster {
        dir,
        rm,
        rm_addr,
        nms: vec![nm],
        nm_addrs: vec![nm_addr],
        nm_args: vec![],
        http: reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap(),
        conf_dir,
        rm_args,
        rm_restarts: 0,
        scheme: "http",
    };
    c.wait_nodes_running(1);
    c
}

/// Every line of a daemon's log parsed as a JSON object; panics naming the first that is not.
fn json_lines(name: &str, text: &str) -> Vec<serde_json::Map<String, Value>> {
    assert!(!text.trim().is_empty(), "{name} logged nothing");
    text.lines()
        .enumerate()
        .map(|(i, line)| match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(m)) => m,
            other => panic!(
                "{name} log line {} is not a JSON object ({other:?}):\n{line}",
                i + 1
            ),
        })
        .collect()
}

fn field<'a>(line: &'a serde_json::Map<String, Value>, k: &str) -> Option<&'a str> {
    line.get(k).and_then(Value::as_str)
}

#[test]
fn json_logs_carry_the_ids_and_log_pages_link_to_the_rm() {
    let c = json_cluster();
    let out = c.spindle_within(
        &[
            "distributed-shell",
            "--num-containers",
            "2",
            "--container-resources",
            "memory-mb=256,vcores=1",
            "--shell-command",
            "echo logged-by-$CONTAINER_ID",
        ],
        Duration::from_secs(120),
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        c.dump_logs();
    }
    assert!(out.status.success(), "{text}");
    let app = app_id_in(&text).expect("the client names its application");
    let containers = c.containers_of(&app);
    assert!(containers.len() >= 3, "AM and 2 workers: {containers:?}");
    let ids: BTreeSet<String> = containers
        .iter()
        .filter_map(|v| v["containerId"].as_str().map(String::from))
        .collect();

    // The NM's container-log page links back to the application in the RM.
    let am = &containers[0];
    let cid = am["containerId"].as_str().unwrap();
    let page = c
        .http
        .get(format!(
            "http://{}/node/containerlogs/{cid}/{}",
            c.nm_addrs[0],
            am["user"].as_str().unwrap_or("dr.who")
        ))
        .send()
        .and_then(|r| r.text())
        .expect("log page");
    let ui = format!("http://{}/ui/#/app/{app}", c.rm_addr);
    let yarn = format!("http://{}/cluster/app/{app}", c.rm_addr);
    assert!(page.contains(&format!("href=\"{ui}\"")), "{page}");
    assert!(page.contains(&format!("href=\"{yarn}\"")), "{page}");
    // The YARN page it links to is the application's.
    let r = c.http.get(&yarn).send().expect("GET the linked page");
    assert_eq!(r.status().as_u16(), 200);
    assert!(r.text().unwrap_or_default().contains(&app));

    // Both daemons: only JSON lines; the container lines carry the ids.
    let nm_log = wait_until(
        "the NM to log the containers' ends",
        Duration::from_secs(20),
        || {
            let t = c.nms[0].log_text();
            (t.matches("container process ended").count() >= ids.len()).then_some(t)
        },
    );
    let nm_lines = json_lines("nodemanager", &nm_log);
    let rm_lines = json_lines("resourcemanager", &c.rm.log_text());
    for (name, lines) in [("nodemanager", &nm_lines), ("resourcemanager", &rm_lines)] {
        for l in lines {
            for k in ["timestamp", "level", "target"] {
                assert!(field(l, k).is_some(), "{name}: no {k} in {l:?}");
            }
        }
    }
    // Every container of the application: started and ended, each line naming the
    // container and its application as fields (from the NM's container span).
    let attempt_prefix = app.replace("application_", "appattempt_");
    let mut started = BTreeSet::new();
    let mut ended = BTreeSet::new();
    for l in &nm_lines {
        let msg = field(l, "message").unwrap_or_default();
        let about = msg == "container process started" || msg == "container process ended";
        if !about || field(l, "app_id") != Some(app.as_str()) {
            continue;
        }
        let cid = field(l, "container_id").expect("container_id on a container line");
        assert!(ids.contains(cid), "{cid} is not one of {ids:?}");
        assert!(
            field(l, "attempt_id").is_some_and(|a| a.starts_with(&attempt_prefix)),
            "{l:?}"
        );
        if msg.ends_with("started") {
            started.insert(cid.to_string());
        } else {
            ended.insert(cid.to_string());
        }
    }
    assert_eq!(started, ids, "NM 'started' lines with ids:\n{nm_log}");
    assert_eq!(ended, ids, "NM 'ended' lines with ids:\n{nm_log}");
    assert!(
        nm_lines.iter().any(|l| field(l, "node_id").is_some()
            && l.get("spans")
                .is_some_and(|s| s.to_string().contains("status_updater"))),
        "the NM's status updater logs with its node_id:\n{nm_log}"
    );
    // The RM: the AM launch is logged in a span with the application, attempt and container.
    let launch = rm_lines
        .iter()
        .find(|l| field(l, "message") == Some("AM container launched"))
        .expect("the RM logs the AM launch");
    assert_eq!(field(launch, "app_id"), Some(app.as_str()), "{launch:?}");
    assert_eq!(field(launch, "container_id"), Some(cid), "{launch:?}");
    assert!(field(launch, "attempt_id").is_some_and(|a| a.starts_with("appattempt_")));
    assert!(
        rm_lines.iter().any(
            |l| field(l, "message") == Some("node registered") && field(l, "node_id").is_some()
        ),
        "the RM logs the node's registration with its node_id"
    );
}

#[test]
fn a_bad_log_format_is_refused_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("yarn-site.xml"),
        "<configuration></configuration>\n",
    )
    .unwrap();
    let conf = dir.path().display().to_string();
    // The flag: both daemons refuse it before doing anything.
    for name in ["resourcemanager", "nodemanager"] {
        let mut cmd = Command::new(bin(name));
        cmd.args(["--conf-dir", &conf, "--log-format", "xml"]);
        let out = output_within(cmd, Duration::from_secs(20));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name}: {err}");
        assert!(
            err.contains("unknown log format 'xml'") && err.contains("--log-format"),
            "{name}: {err}"
        );
    }
    // The key: named in the error.
    for name in ["resourcemanager", "nodemanager"] {
        let mut cmd = Command::new(bin(name));
        cmd.args([
            "--conf-dir",
            &conf,
            "-D",
            "spindle.log.format=yaml",
            "-D",
            &format!(
                "spindle.resourcemanager.state-store.path={}",
                dir.path().join("s.sqlite").display()
            ),
        ]);
        let out = output_within(cmd, Duration::from_secs(20));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert!(
            err.contains("spindle.log.format: unknown log format 'yaml'"),
            "{name}: {err}"
        );
    }
}
