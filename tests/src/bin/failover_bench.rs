//! Benchmark (not a test): how long an HA failover takes, and what the etcd store costs
//! against SQLite, on the real binaries (`spindle_system_tests::ha`, a three-member etcd of
//! Debian's `etcd-server` on 127.0.0.1).
//!
//! `cargo build --release --workspace --bins && ./target/release/failover_bench --kills 20`
//!
//! 1. **Stores.** `spindle bench http --submissions S --heartbeats H --concurrency C` (one
//!    client, the same workload) against the active of two HA RMs on the three-member etcd,
//!    then against one RM on SQLite, both with the same properties (the cluster secret, so
//!    heartbeats are signed) and no NodeManager (the submitted AMs wait: the RM and its
//!    store are measured, not container starts): submissions per second and heartbeat
//!    latency of each, and their ratios.
//! 2. **Failover.** A NodeManager given both RMs joins. `--kills K` times: `kill -9` of the
//!    active; from the kill, the time until the other RM reports `haState: ACTIVE`, until
//!    a submission to it is accepted (`new-application`, then `POST /apps` answered 202:
//!    durable in etcd), and until that application's AM container is allocated (the NM has
//!    failed over and re-registered; its attempt names a container); then the killed RM is
//!    started again and waited for as the standby. p50/p99/max of each.
//!
//! One JSON line. `--lease-ms` is `spindle.ha.etcd.lease-ms` (default 2000); the NM's
//! `yarn.client.failover-sleep-base-ms`/`-max-ms` are 100/1000.

#![forbid(unsafe_code)]

use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::{json, Value};
use spindle_system_tests::ha::Ha;
use spindle_system_tests::{bin, conf, Cluster, ClusterOpts, CLUSTER_SECRET_FILE};
use spindle_test_support::etcd::ETCD;

/// The longest one step of a failover may take before the benchmark gives up.
const STEP_LIMIT: Duration = Duration::from_secs(120);
/// How often the RMs are polled.
const POLL: Duration = Duration::from_millis(20);

fn arg(args: &[String], name: &str, default: u64) -> u64 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} takes a number, got '{v}'"))
        })
        .unwrap_or(default)
}

/// Runs `spindle bench http` against `rm` (`host:port`) with a client conf dir naming the
/// cluster secret `secret`; its JSON line.
fn bench_http(dir: &Path, rm: &str, secret: &Path, workload: &[String]) -> Value {
    let site = format!(
        "<configuration><property><name>{CLUSTER_SECRET_FILE}</name><value>{}</value></property></configuration>\n",
        secret.display()
    );
    let conf_dir = conf::write_conf_dir(&dir.join("bench-conf"), &[("yarn-site.xml", &site)]);
    let out = std::process::Command::new(bin("spindle"))
        .args(["bench", "http", "--rm-address", rm, "--conf-dir"])
        .arg(&conf_dir)
        .args(workload)
        .env_remove("SPINDLE_RM_ADDRESS")
        .output()
        .expect("run spindle bench http");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "spindle bench http failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(text.trim()).expect("bench http's JSON line")
}

fn ratio(a: &Value, b: &Value) -> Value {
    match (a.as_f64(), b.as_f64()) {
        (Some(a), Some(b)) if b > 0.0 => json!(a / b),
        _ => Value::Null,
    }
}

/// Part 1: the same workload on the etcd store and on SQLite.
fn stores(lease_ms: u64, workload: &[String]) -> Value {
    let ha = Ha::start_on(3, lease_ms, &[]);
    let active = ha.wait_roles(Duration::from_secs(60));
    let etcd = bench_http(ha.dir.path(), &ha.address(active), &ha.secret, workload);
    drop(ha);
    let c = Cluster::start(ClusterOpts {
        nodes: 0,
        ..Default::default()
    });
    let secret = c.dir.path().join("cluster-secret");
    let sqlite = bench_http(c.dir.path(), &c.rm_addr, &secret, workload);
    let rate = "submissions_per_sec";
    json!({
        "etcd": etcd,
        "sqlite": sqlite,
        "etcd_over_sqlite_submissions_per_sec": ratio(&etcd[rate], &sqlite[rate]),
        "sqlite_over_etcd_heartbeat_p50": ratio(&sqlite["heartbeat_latency"]["p50_ms"], &etcd["heartbeat_latency"]["p50_ms"]),
        "sqlite_over_etcd_heartbeat_p99": ratio(&sqlite["heartbeat_latency"]["p99_ms"], &etcd["heartbeat_latency"]["p99_ms"]),
    })
}

/// Polls `f` every [`POLL`] until it answers, at most [`STEP_LIMIT`].
fn until<T>(what: &str, ha: &Ha, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + STEP_LIMIT;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within {STEP_LIMIT:?}\n{}",
            ha.logs()
        );
        std::thread::sleep(POLL);
    }
}

/// A submission to `base` accepted (202), its application id; None when the RM does not
/// accept it (not active yet, a redirect, no answer).
fn submit(http: &reqwest::blocking::Client, base: &str) -> Option<String> {
    let r = http
        .post(format!("{base}/ws/v1/cluster/apps/new-application"))
        .send()
        .ok()?;
    if r.status() != 200 {
        return None;
    }
    let v: Value = r.json().ok()?;
    let id = v["application-id"].as_str()?.to_string();
    let ctx = json!({
        "application-id": id,
        "application-name": "failover-bench",
        "application-type": "SPINDLE-BENCH",
        "max-app-attempts": 1,
        "am-container-spec": {"commands": {"command": "true"}},
        "resource": {"memory": 128, "vCores": 1}
    });
    let r = http
        .post(format!("{base}/ws/v1/cluster/apps"))
        .json(&ctx)
        .send()
        .ok()?;
    (r.status() == 202).then_some(id)
}

/// Whether `app`'s first attempt on `base` has its AM container.
fn allocated(http: &reqwest::blocking::Client, base: &str, app: &str) -> bool {
    let Some(v) = http
        .get(format!("{base}/ws/v1/cluster/apps/{app}/appattempts"))
        .send()
        .ok()
        .and_then(|r| r.json::<Value>().ok())
    else {
        return false;
    };
    v["appAttempts"]["appAttempt"][0]["containerId"]
        .as_str()
        .is_some_and(|c| !c.is_empty())
}

/// p50, p99 and max of `ms`.
fn summary(ms: &mut [u64]) -> Value {
    ms.sort_unstable();
    let at = |q: f64| {
        let i = ((ms.len() as f64 * q).ceil() as usize).clamp(1, ms.len()) - 1;
        ms[i]
    };
    json!({"p50_ms": at(0.5), "p99_ms": at(0.99), "max_ms": ms[ms.len() - 1], "n": ms.len()})
}

/// Part 2: `kills` SIGKILLs of the active.
fn failover(lease_ms: u64, kills: u64) -> Value {
    let sleeps = [
        ("yarn.client.failover-sleep-base-ms", "100"),
        ("yarn.client.failover-sleep-max-ms", "1000"),
    ];
    let mut ha = Ha::start_on(3, lease_ms, &[]);
    let mut active = ha.wait_roles(Duration::from_secs(60));
    ha.start_nm(
        &sleeps
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<Vec<_>>(),
    );
    let http = ha.http.clone();
    until("the NM to register", &ha, || {
        (ha.rm(active).running_nodes() == 1).then_some(())
    });
    let (mut to_active, mut to_write, mut to_alloc) = (Vec::new(), Vec::new(), Vec::new());
    for k in 0..kills {
        let next = 1 - active;
        let base = ha.base(next);
        let killed = Instant::now();
        ha.rms[active]
            .as_ref()
            .expect("the active runs")
            .signal(Signal::SIGKILL);
        until("the standby to become ACTIVE", &ha, || {
            (ha.ha_state(next).as_deref() == Some("ACTIVE")).then_some(())
        });
        to_active.push(killed.elapsed().as_millis() as u64);
        let app = until("a submission accepted", &ha, || submit(&http, &base));
        to_write.push(killed.elapsed().as_millis() as u64);
        until("the next allocation", &ha, || {
            allocated(&http, &base, &app).then_some(())
        });
        to_alloc.push(killed.elapsed().as_millis() as u64);
        eprintln!(
            "kill {}: rm{} -> rm{}: ACTIVE {} ms, write {} ms, allocation {} ms",
            k + 1,
            active + 1,
            next + 1,
            to_active[to_active.len() - 1],
            to_write[to_write.len() - 1],
            to_alloc[to_alloc.len() - 1]
        );
        // The killed RM back, as the standby.
        ha.start_rm(active);
        until("the restarted RM to be STANDBY", &ha, || {
            (ha.ha_state(active).as_deref() == Some("STANDBY")).then_some(())
        });
        active = next;
    }
    json!({
        "kills": kills,
        "lease_ms": lease_ms,
        "etcd_members": 3,
        "nm_failover_sleep_ms": {"base": 100, "max": 1000},
        "to_active": summary(&mut to_active),
        "to_write_accepted": summary(&mut to_write),
        "to_next_allocation": summary(&mut to_alloc),
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("usage: failover_bench [--kills K (20)] [--lease-ms MS (2000)] [--submissions S (200)] [--heartbeats H (500)] [--concurrency C (8)] [--skip-stores]");
        return;
    }
    if !Path::new(ETCD).exists() {
        eprintln!("failover_bench: {ETCD} is missing (apt-get install etcd-server)");
        std::process::exit(2);
    }
    let kills = arg(&args, "--kills", 20);
    let lease_ms = arg(&args, "--lease-ms", 2000);
    let workload: Vec<String> = ["--submissions", "--heartbeats", "--concurrency"]
        .iter()
        .zip([200, 500, 8])
        .flat_map(|(name, default)| [name.to_string(), arg(&args, name, default).to_string()])
        .collect();
    let stores = if args.iter().any(|a| a == "--skip-stores") {
        Value::Null
    } else {
        stores(lease_ms, &workload)
    };
    let failover = if kills > 0 {
        failover(lease_ms, kills)
    } else {
        Value::Null
    };
    println!("{}", json!({"stores": stores, "failover": failover}));
}
