//! Benchmark (not a test): the start skew of a gang on a minicluster of real daemons, i.e.
//! the time from the first to the last member's process starting, when `spindle train`
//! launches it. A job cannot begin before its last worker does, so skew is time every GPU
//! of the gang waits.
//!
//! `cargo build --release --workspace --bins && ./target/release/gang_skew_bench`
//! (`--runs 10 --members 64 --nodes 4 --vcores 20 --linger-ms 1000`, the defaults;
//! `-D name=value` adds an NM property, e.g. `-D spindle.nodemanager.cgroups.enabled=false`).
//!
//! Each member is `gang_stamp` (built beside this binary): the first thing it does is print
//! the wall clock (Unix ns; everything runs on this machine, one clock) to its stdout, then it
//! stays `--linger-ms` like a worker at its rendezvous.
//! Members are CPU-only, 128 MB and 1 vcore each.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use spindle_system_tests::{bin, output_within, Cluster, ClusterOpts};

fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runs = arg(&args, "--runs", 10);
    let members = arg(&args, "--members", 64);
    let nodes = arg(&args, "--nodes", 4);
    let vcores = arg(&args, "--vcores", 20);
    let linger_ms = arg(&args, "--linger-ms", 1000);
    // Extra NM properties, `-D name=value` (e.g. to compare without cgroups).
    let props: Vec<(String, String)> = args
        .windows(2)
        .filter(|w| w[0] == "-D")
        .filter_map(|w| w[1].split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    driver(runs, members, nodes, vcores, linger_ms, props);
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// (start ns, node) of every member of `app`: the first line of each container's stdout
/// under the NMs' log dirs (`<cluster>/nm<i>/logs/<app>/<container>/stdout`) that reads as
/// "ns port" (the AM's stdout has none).
fn stamps(cluster: &Cluster, nodes: usize, app: &str) -> Vec<(u128, String)> {
    let mut out = Vec::new();
    for i in 0..nodes {
        let app_logs = cluster.dir.path().join(format!("nm{i}/logs/{app}"));
        let Ok(containers) = std::fs::read_dir(&app_logs) else {
            continue;
        };
        for c in containers.filter_map(Result::ok) {
            let Ok(text) = std::fs::read_to_string(c.path().join("stdout")) else {
                continue;
            };
            let stamp = text.lines().find_map(|l| {
                let mut w = l.split_whitespace();
                let ns = w.next()?.parse().ok()?;
                Some((ns, w.next()?.to_string()))
            });
            out.extend(stamp);
        }
    }
    out
}

/// Largest first-to-last spread among the members of one node, and the spread of the
/// nodes' first starts (how far apart the nodes let their members go), in ms.
fn node_spreads(t: &[(u128, String)]) -> (f64, f64) {
    let mut by_node: std::collections::BTreeMap<&str, (u128, u128)> = Default::default();
    for (ns, node) in t {
        let e = by_node.entry(node.as_str()).or_insert((*ns, *ns));
        e.0 = e.0.min(*ns);
        e.1 = e.1.max(*ns);
    }
    let worst = by_node
        .values()
        .map(|(lo, hi)| (hi - lo) as f64 / 1e6)
        .fold(0.0, f64::max);
    let firsts = by_node.values().map(|(lo, _)| *lo);
    let first_spread = match (firsts.clone().min(), firsts.max()) {
        (Some(lo), Some(hi)) => (hi - lo) as f64 / 1e6,
        _ => 0.0,
    };
    (worst, first_spread)
}

fn driver(
    runs: usize,
    members: usize,
    nodes: usize,
    vcores: usize,
    linger_ms: usize,
    props: Vec<(String, String)>,
) {
    let mut nm_props = vec![
        (
            "yarn.nodemanager.resource.cpu-vcores".to_string(),
            vcores.to_string(),
        ),
        (
            "yarn.nodemanager.resource.memory-mb".to_string(),
            "8192".to_string(),
        ),
    ];
    nm_props.extend(props);
    let cluster = Cluster::start(ClusterOpts {
        nodes,
        nm_props,
        ..Default::default()
    });
    // The members: `gang_stamp`, built next to this benchmark.
    let stamp: PathBuf = std::env::current_exe()
        .expect("exe")
        .with_file_name("gang_stamp");
    assert!(
        stamp.is_file(),
        "{} is missing: cargo build --release -p spindle-system-tests --bins",
        stamp.display()
    );
    let mut skews = Vec::new();
    let mut node_skews = Vec::new();
    let mut dispatches = Vec::new();
    let mut helds = Vec::new();
    for run in 0..runs {
        let mut cmd = Command::new(bin("spindle"));
        cmd.env("SPINDLE_RM_ADDRESS", &cluster.rm_addr)
            .env("SPINDLE_CONF_DIR", &cluster.conf_dir)
            .args([
                "train",
                "--workers",
                &members.to_string(),
                "--worker-resources",
                "vcores=1,memory-mb=128",
                "--max-restarts",
                "0",
                "--gang-timeout-ms",
                "60000",
                "--timeout-ms",
                "120000",
                "--",
            ])
            .arg(&stamp)
            .arg(linger_ms.to_string());
        let out = output_within(cmd, Duration::from_secs(180));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let app = spindle_system_tests::app_id_in(&stdout).unwrap_or_default();
        let t = stamps(&cluster, nodes, &app);
        if !out.status.success() || t.len() != members {
            cluster.dump_logs();
            panic!(
                "run {run}: {} stamps of {members}; spindle train said:\n{}{}",
                t.len(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let (lo, hi) = (
            t.iter().map(|x| x.0).min().unwrap_or(0),
            t.iter().map(|x| x.0).max().unwrap_or(0),
        );
        let skew = (hi - lo) as f64 / 1e6;
        let (node_skew, first_spread) = node_spreads(&t);
        // The AM's side: how long its parallel start calls took to be answered.
        // "all N workers set up and held in X ms; all start calls answered in Y ms"
        let am = cluster.am_stdout(&app);
        let ms_after = |key: &str| {
            am.lines()
                .find_map(|l| {
                    let (_, r) = l.split_once(key)?;
                    r.split_whitespace().next()?.parse::<f64>().ok()
                })
                .unwrap_or(f64::NAN)
        };
        let dispatch = ms_after("start calls answered in ");
        let held = ms_after("set up and held in ");
        eprintln!(
            "run {run}: start skew {skew:.1} ms (worst within one node {node_skew:.1} ms; \
             nodes' first starts within {first_spread:.1} ms; all members held {held:.1} ms \
             after the grant's start calls were sent; release calls answered in {dispatch:.1} ms)"
        );
        skews.push(skew);
        node_skews.push(node_skew);
        dispatches.push(dispatch);
        helds.push(held);
    }
    let mut sorted = skews.clone();
    sorted.sort_by(f64::total_cmp);
    println!(
        "start skew of a {members}-member gang (CPU-only, 128 MB / 1 vcore each) on a \
         {nodes}-node minicluster ({vcores} vcores per node), {runs} runs"
    );
    println!("| runs | p50 ms | p99 ms | min ms | max ms |");
    println!("|---|---|---|---|---|");
    println!(
        "| {runs} | {:.1} | {:.1} | {:.1} | {:.1} |",
        pct(&sorted, 0.5),
        pct(&sorted, 0.99),
        pct(&sorted, 0.0),
        pct(&sorted, 1.0)
    );
    let all: Vec<String> = skews.iter().map(|s| format!("{s:.1}")).collect();
    println!("per run (ms): {}", all.join(", "));
    // For diagnosis: keep the daemons' logs.
    if let Ok(keep) = std::env::var("GANG_SKEW_BENCH_LOGS") {
        let _ = std::fs::create_dir_all(&keep);
        let _ = std::fs::copy(&cluster.rm.log, Path::new(&keep).join("rm.log"));
        for nm in &cluster.nms {
            let _ = std::fs::copy(&nm.log, Path::new(&keep).join(format!("{}.log", nm.name)));
        }
    }
    let mut n = node_skews.clone();
    n.sort_by(f64::total_cmp);
    println!(
        "worst spread within one node: p50 {:.1} ms, max {:.1} ms",
        pct(&n, 0.5),
        pct(&n, 1.0)
    );
    let mut d = dispatches.clone();
    d.sort_by(f64::total_cmp);
    println!(
        "AM release calls (all nodes in parallel) answered in: p50 {:.1} ms, max {:.1} ms",
        pct(&d, 0.5),
        pct(&d, 1.0)
    );
    let mut h = helds.clone();
    h.sort_by(f64::total_cmp);
    println!(
        "held start calls (set-up of all members, all nodes in parallel) answered in: \
         p50 {:.1} ms, max {:.1} ms",
        pct(&h, 0.5),
        pct(&h, 1.0)
    );
}
