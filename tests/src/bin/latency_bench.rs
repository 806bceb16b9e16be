//! Benchmark (not a test): on an idle minicluster of real daemons, the time from `POST /apps`
//! to the AM process running, and from an AM's ask to its container's process running,
//! p50/p99 over N applications run one after another.
//!
//! `cargo build --release --workspace --bins && ./target/release/latency_bench --apps 100`
//!
//! The same binary is the AM (`latency_bench am <dir>`): it stamps its own start, registers,
//! asks for one container, starts `date +%s%N` in it, and finishes. Every process writes its
//! timestamps (Unix nanoseconds, one clock: everything runs on this machine) under `<dir>`.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use spindle_system_tests::{wait_until, Cluster, ClusterOpts};

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("am") {
        let dir = PathBuf::from(args.get(2).expect("am <dir>"));
        if let Err(e) = am(&dir) {
            eprintln!("latency_bench am: {e}");
            std::process::exit(1);
        }
        return;
    }
    let apps: usize = args
        .iter()
        .position(|a| a == "--apps")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    driver(apps);
}

fn am(dir: &Path) -> Result<(), String> {
    let t_am = now_ns();
    let rm = std::env::var("SPINDLE_RM_ADDRESS").map_err(|e| e.to_string())?;
    let token = std::env::var("SPINDLE_AMRM_TOKEN").map_err(|e| e.to_string())?;
    let cid = std::env::var("CONTAINER_ID").map_err(|e| e.to_string())?;
    let app = cid.split('_').collect::<Vec<_>>();
    let app_id = format!("application_{}_{}", app[app.len() - 4], app[app.len() - 3]);
    let http = reqwest::blocking::Client::new();
    let call = |path: &str, body: Value| -> Result<Value, String> {
        let r = http
            .post(format!("{rm}/ws/v1/am/{path}"))
            .bearer_auth(&token)
            .json(&body)
            .send()
            .map_err(|e| e.to_string())?;
        let s = r.status();
        let v: Value = r.json().map_err(|e| e.to_string())?;
        if !s.is_success() {
            return Err(format!("{path}: {s} {v}"));
        }
        Ok(v)
    };
    call(
        "register",
        json!({"host": "localhost", "rpcPort": 0, "trackingUrl": ""}),
    )?;
    let t_ask = now_ns();
    let mut v = call(
        "allocate",
        json!({"responseId": 0, "ask": [{"priority": 1, "resourceName": "*", "capability": {"memory": 128, "vCores": 1}, "numContainers": 1, "relaxLocality": true}]}),
    )?;
    let deadline = Instant::now() + Duration::from_secs(20);
    while v["allocatedContainers"]
        .as_array()
        .is_none_or(|a| a.is_empty())
    {
        if Instant::now() > deadline {
            return Err("no container".into());
        }
        std::thread::sleep(Duration::from_millis(2));
        v = call("allocate", json!({}))?;
    }
    let c = v["allocatedContainers"][0].clone();
    let out = dir.join(format!("{app_id}.c"));
    let start = json!({"startContainerRequest": [{"containerToken": c["containerToken"], "containerLaunchContext": {
        "commands": [format!("date +%s%N > {}", out.display())], "environment": {}, "localResources": {}}}]});
    let r: Value = http
        .post(format!(
            "http://{}/ws/v1/node/containers/start",
            c["nodeHttpAddress"].as_str().unwrap_or_default()
        ))
        .json(&start)
        .send()
        .and_then(|r| r.json())
        .map_err(|e| e.to_string())?;
    if r["failedRequests"]
        .as_array()
        .is_some_and(|f| !f.is_empty())
    {
        return Err(format!("start failed: {r}"));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let v = call("allocate", json!({}))?;
        if v["completedContainerStatuses"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
        {
            break;
        }
        if Instant::now() > deadline {
            return Err("container did not complete".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    call(
        "finish",
        json!({"finalApplicationStatus": "SUCCEEDED", "diagnostics": ""}),
    )?;
    std::fs::write(
        dir.join(format!("{app_id}.done")),
        format!("{t_am} {t_ask}\n"),
    )
    .map_err(|e| e.to_string())?;
    Ok(())
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn driver(apps: usize) {
    // `--nm-prop NAME=VALUE` (repeatable) passes properties to the NMs, e.g.
    // `spindle.nodemanager.cgroups.enabled=false` to measure without cgroup placement.
    let args: Vec<String> = std::env::args().collect();
    let nm_props: Vec<(String, String)> = args
        .windows(2)
        .filter(|w| w[0] == "--nm-prop")
        .filter_map(|w| {
            w[1].split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect();
    let cluster = Cluster::start(ClusterOpts {
        nodes: 2,
        nm_props,
        ..Default::default()
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let me = std::env::current_exe().expect("exe");
    let mut submit_to_am = vec![];
    let mut ask_to_container = vec![];
    let started = Instant::now();
    for i in 0..apps {
        let (_, v, _) = cluster.send(
            reqwest::Method::POST,
            "/ws/v1/cluster/apps/new-application",
            &json!({}),
        );
        let id = v["application-id"].as_str().expect("id").to_string();
        let body = json!({"application-id": id, "application-name": format!("bench-{i}"),
            "am-container-spec": {"commands": {"command": format!("{} am {}", me.display(), dir.path().display())}},
            "resource": {"memory": 128, "vCores": 1}, "max-app-attempts": 1});
        let t0 = now_ns();
        let (s, _, _) = cluster.send(reqwest::Method::POST, "/ws/v1/cluster/apps", &body);
        assert_eq!(s, 202);
        let done = dir.path().join(format!("{id}.done"));
        let text = wait_until(&format!("{id} to finish"), Duration::from_secs(30), || {
            std::fs::read_to_string(&done).ok()
        });
        let mut it = text
            .split_whitespace()
            .map(|x| x.parse::<u128>().unwrap_or(0));
        let (t_am, t_ask) = (it.next().unwrap_or(0), it.next().unwrap_or(0));
        let c = std::fs::read_to_string(dir.path().join(format!("{id}.c"))).unwrap_or_default();
        let t_c: u128 = c.trim().parse().unwrap_or(0);
        submit_to_am.push((t_am.saturating_sub(t0)) as f64 / 1e6);
        ask_to_container.push((t_c.saturating_sub(t_ask)) as f64 / 1e6);
        cluster.wait_app_state(
            &id,
            &["FINISHED", "FAILED", "KILLED"],
            Duration::from_secs(30),
        );
    }
    let total = started.elapsed();
    submit_to_am.sort_by(f64::total_cmp);
    ask_to_container.sort_by(f64::total_cmp);
    println!(
        "latency over {apps} applications on an idle 2-node minicluster ({:.1} s in all)",
        total.as_secs_f64()
    );
    println!("| path | p50 ms | p99 ms | max ms |");
    println!("|---|---|---|---|");
    println!(
        "| POST /apps -> AM process running | {:.1} | {:.1} | {:.1} |",
        pct(&submit_to_am, 0.5),
        pct(&submit_to_am, 0.99),
        pct(&submit_to_am, 1.0)
    );
    println!(
        "| AM ask -> container process running | {:.1} | {:.1} | {:.1} |",
        pct(&ask_to_container, 0.5),
        pct(&ask_to_container, 0.99),
        pct(&ask_to_container, 1.0)
    );
}
