//! The CPU policy on the real binaries, with cgroups: two `spindle train` jobs on one node of
//! 3 fake GPUs and 5 vcores (CFS quotas on: `strict-resource-usage`), each worker asking a
//! vcores range (`--cpus-per-gpu`) and declaring a throughput table (`--cpu-throughput`):
//!
//! - a CPU-bound job (1 GPU, `1..3` CPUs): two threads of integer work, whose rate follows
//!   the CPU time its cgroup quota allows (one core at 1 vcore; both of the machine's cores
//!   from 2 on);
//! - a paced job (2 GPUs, `1..2` CPUs per GPU): a fixed number of chunks a second, whatever
//!   its CPUs.
//!
//! The AMs run on a second, CPU-only node (no cgroups): AMs go to nodes without free GPUs
//! first. Once with `spindle.scheduler.cpu-policy=proportional` (the node's 5/3 CPUs per
//! GPU: 1 and 3 vcores), once with `adaptive` (interval 1 s, resize interval 2 s): the
//! CPU-bound job's `cpu.cfs_quota_us` (v2 `cpu.max`) is raised to 3 cores and the paced
//! job's lowered to 2, through RM-initiated container updates the train AM hands to the NM.
//! Each worker logs its measured rate every second, and rank 0's rate is reported to the RM
//! with its vcores. Over a window after the resize has landed the CPU-bound job's rate is
//! at least 1.3x its proportional rate, and the paced job's within 5%.
//!
//! Root and cgroups only: elsewhere the test prints why it skips (under `CI=true` it fails).
//! Every wait is bounded; the applications are killed at the end and every worker left is
//! killed by pid.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::json;
use spindle_system_tests::{app_id_in, bin, cgroup, fake_gpus, Cluster, ClusterOpts};
use spindle_test_support::require;

const GPU: &str = "yarn.io/gpu";
/// The paced job's chunks a second.
const PACE: u64 = 200;
/// How long the rates are averaged over.
const WINDOW: Duration = Duration::from_secs(6);
/// Any one wait of the test.
const WAIT: Duration = Duration::from_secs(40);

/// SIGKILLs, when dropped, every worker whose pid file is in one of these directories and
/// that still runs `cpu_worker` (a recycled pid is left alone).
struct KillWorkers(Vec<PathBuf>);

impl Drop for KillWorkers {
    fn drop(&mut self) {
        for d in &self.0 {
            if let Some(pid) = worker_pid(d).filter(|p| is_worker(*p)) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
    }
}

fn worker_pid(dir: &Path) -> Option<i32> {
    std::fs::read_to_string(dir.join("pid"))
        .ok()?
        .trim()
        .parse()
        .ok()
        .filter(|p| *p > 1)
}

fn is_worker(pid: i32) -> bool {
    let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    String::from_utf8_lossy(&cmd).contains("cpu_worker")
}

/// Waits up to [`WAIT`] for `f`; on a timeout the applications and the daemons' logs are
/// printed before the test fails.
fn wait_for<T>(c: &Cluster, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() > deadline {
            let (_, apps) = c.get("/ws/v1/cluster/apps");
            eprintln!("---- applications ----\n{apps:#}");
            c.dump_logs();
            panic!("timed out after {WAIT:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// The CPU quota of the worker's container, in cores (v1 `cpu.cfs_quota_us` over the
/// period, v2 `cpu.max`); None when its cgroup has no quota file.
fn quota_cores(pid: i32) -> Option<f64> {
    let f = cgroup::container_file(pid, "container_", "cpu", "cpu.cfs_quota_us", "cpu.max")?;
    let text = std::fs::read_to_string(&f).ok()?;
    let mut words = text.split_whitespace();
    let quota: f64 = words.next()?.parse().ok()?;
    let period: f64 = match words.next() {
        Some(p) => p.parse().ok()?,
        None => std::fs::read_to_string(f.with_file_name("cpu.cfs_period_us"))
            .ok()?
            .trim()
            .parse()
            .ok()?,
    };
    Some(quota / period)
}

/// The mean of the rates a worker logged from `since_ms` on.
fn mean_rate(dir: &Path, since_ms: u128) -> f64 {
    let log = std::fs::read_to_string(dir.join("rates.log")).unwrap_or_default();
    let rates: Vec<f64> = log
        .lines()
        .filter_map(|l| {
            let (t, r) = l.split_once(' ')?;
            (t.parse::<u128>().ok()? >= since_ms).then_some(r.parse().ok()?)
        })
        .collect();
    assert!(!rates.is_empty(), "no rate logged in {}", dir.display());
    rates.iter().sum::<f64>() / rates.len() as f64
}

/// One policy's run: the measured rates and the final quotas (cores).
#[derive(Debug)]
struct Run {
    busy_rate: f64,
    paced_rate: f64,
    busy_quota: f64,
    paced_quota: f64,
}

/// The chunks `threads` threads do in a second on this machine now (the CPU-bound job's
/// table is in one thread's).
fn calibrate(threads: u32) -> f64 {
    let out = std::process::Command::new(bin("cpu_worker"))
        .args(["calibrate", &threads.to_string()])
        .output()
        .expect("cpu_worker calibrate");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("a rate")
}

fn cluster(scratch: &Path, policy: &str) -> Cluster {
    let gpus = fake_gpus(&scratch.join(policy), 3);
    let mut c = Cluster::start(ClusterOpts {
        nodes: 0,
        rm_props: vec![
            ("yarn.resource-types".into(), GPU.into()),
            ("spindle.scheduler.cpu-policy".into(), policy.into()),
            // Both AMs fit the queue's AM share of this small cluster.
            (
                "yarn.scheduler.capacity.maximum-am-resource-percent".into(),
                "1.0".into(),
            ),
            (
                "spindle.scheduler.cpu-policy.interval-ms".into(),
                "1000".into(),
            ),
            (
                "spindle.scheduler.cpu-policy.resize-interval-ms".into(),
                "2000".into(),
            ),
        ],
        nm_props: vec![],
    });
    let prop = |k: &str, v: &str| (k.to_string(), v.to_string());
    c.add_nm(&[
        prop("yarn.nodemanager.resource-plugins", GPU),
        prop(
            "yarn.nodemanager.resource-plugins.gpu.path-to-discovery-executables",
            &gpus.display().to_string(),
        ),
        prop("yarn.nodemanager.resource.cpu-vcores", "5"),
        prop(
            "yarn.nodemanager.linux-container-executor.cgroups.strict-resource-usage",
            "true",
        ),
    ]);
    c.add_nm(&[
        prop("yarn.nodemanager.resource.cpu-vcores", "2"),
        prop("spindle.nodemanager.cgroups.enabled", "false"),
    ]);
    c.wait_nodes_running(2);
    c
}

/// Submits a detached `spindle train` job of one worker; its application id.
fn submit(
    c: &Cluster,
    name: &str,
    dir: &Path,
    resources: &str,
    cpus: &str,
    table: &str,
    worker: &[&str],
) -> String {
    std::fs::create_dir_all(dir).expect("checkpoint dir");
    let exe = bin("cpu_worker").display().to_string();
    let d = dir.display().to_string();
    let mut args = vec![
        "train",
        "--detach",
        "--appname",
        name,
        "--workers",
        "1",
        "--worker-resources",
        resources,
        "--cpus-per-gpu",
        cpus,
        "--cpu-throughput",
        table,
        "--checkpoint-dir",
        &d,
        "--no-checkpoint-check",
        "--env",
        "CPU_WORKER_MAX_S=100",
        "--",
        &exe,
    ];
    args.extend_from_slice(worker);
    let out = c.spindle(&args);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{name}: {text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    app_id_in(&text).unwrap_or_else(|| panic!("{name}: no application id in {text}"))
}

fn run(scratch: &Path, policy: &str, per_thread: f64) -> Option<Run> {
    let c = cluster(scratch, policy);
    let busy_dir = scratch.join(format!("{policy}-busy"));
    let paced_dir = scratch.join(format!("{policy}-paced"));
    let _guard = KillWorkers(vec![busy_dir.clone(), paced_dir.clone()]);
    let r = per_thread.round();
    let busy_table = format!("1:{r};2:{};3:{}", 2.0 * r, 3.0 * r);
    let paced_table = format!("1:{};2:{}", PACE / 2, PACE / 2);
    let pace = PACE.to_string();
    let busy = submit(
        &c,
        "cpu-bound",
        &busy_dir,
        &format!("{GPU}=1,memory-mb=256"),
        "1..3",
        &busy_table,
        &["busy", "2"],
    );
    let running = |dir: &Path, what: &str| {
        wait_for(&c, what, || {
            let pid = worker_pid(dir)?;
            std::fs::metadata(dir.join("rates.log")).ok().map(|_| pid)
        })
    };
    let busy_pid = running(&busy_dir, "the CPU-bound worker to run");
    let paced = submit(
        &c,
        "paced",
        &paced_dir,
        &format!("{GPU}=2,memory-mb=256"),
        "1..2",
        &paced_table,
        &["paced", &pace],
    );
    let paced_pid = running(&paced_dir, "the paced worker to run");
    let Some(first) = quota_cores(busy_pid) else {
        require::skip(
            "cpu_adaptive",
            format_args!(
                "the worker's cgroup has no CPU quota file (no cgroups here?):\n{}",
                std::fs::read_to_string(format!("/proc/{busy_pid}/cgroup")).unwrap_or_default()
            ),
        );
        return None;
    };
    eprintln!("{policy}: the CPU-bound job starts at {first} cores");
    if policy == "adaptive" {
        let started = Instant::now();
        wait_for(&c, "the adaptive round to move the cores", || {
            let q = (quota_cores(busy_pid)?, quota_cores(paced_pid)?);
            (q.0 > 1.0 && q.1 < 3.0).then_some(())
        });
        eprintln!(
            "adaptive: the cores moved {:?} after both ran",
            started.elapsed()
        );
    }
    // The rates over a window that starts after the resize has landed.
    std::thread::sleep(Duration::from_secs(2));
    let since = now_ms();
    std::thread::sleep(WINDOW);
    let out = Run {
        busy_rate: mean_rate(&busy_dir, since),
        paced_rate: mean_rate(&paced_dir, since),
        busy_quota: quota_cores(busy_pid).expect("the CPU-bound quota"),
        paced_quota: quota_cores(paced_pid).expect("the paced quota"),
    };
    for app in [&busy, &paced] {
        let (status, body, _) = c.send(
            reqwest::Method::PUT,
            &format!("/ws/v1/cluster/apps/{app}/state"),
            &json!({"state": "KILLED"}),
        );
        assert!(
            status == 200 || status == 202,
            "kill {app}: {status} {body}"
        );
    }
    // The NM stops the workers and removes their cgroups.
    for pid in [busy_pid, paced_pid] {
        wait_for(&c, "the workers to be stopped", || {
            (!is_worker(pid)).then_some(())
        });
    }
    Some(out)
}

#[test]
fn adaptive_moves_cpus_to_the_cpu_bound_job_and_it_runs_faster() {
    let test = "cpu_adaptive";
    if require::root(test, "container cgroups are written as root").is_none() {
        return;
    }
    let scratch = tempfile::tempdir().expect("tempdir");
    let per_thread = calibrate(1);
    let Some(prop) = run(scratch.path(), "proportional", per_thread) else {
        return;
    };
    let Some(adapt) = run(scratch.path(), "adaptive", per_thread) else {
        return;
    };
    eprintln!(
        "{test}: one thread does {per_thread:.0} chunks/s here\n\
         proportional: {prop:?}\nadaptive:     {adapt:?}\n\
         CPU-bound rate x{:.2}, paced rate x{:.3}",
        adapt.busy_rate / prop.busy_rate,
        adapt.paced_rate / prop.paced_rate
    );
    // Proportional: the node's 5/3 CPUs per GPU, rounded down: 1 and 3 vcores.
    assert_eq!((prop.busy_quota, prop.paced_quota), (1.0, 3.0));
    // Adaptive: raised to the range's top for the CPU-bound job, lowered for the paced one.
    assert_eq!((adapt.busy_quota, adapt.paced_quota), (3.0, 2.0));
    let paced = adapt.paced_rate / prop.paced_rate;
    assert!(
        (0.95..=1.05).contains(&paced),
        "the paced job's rate moved by x{paced:.3}"
    );
    // More than one core's quota pays only where two threads get more than one core: on a
    // machine others keep busy they do not, whatever the quota. That is the machine's load,
    // not a missing capability, so it is printed and never fails a run (CI's included): the
    // quotas above are the behaviour; the speed-up is a measurement.
    let two = calibrate(2) / calibrate(1);
    if two < 1.6 {
        eprintln!(
            "{test}: the speed-up is not checked: two threads run only x{two:.2} as fast as \
             one on this machine now (it is busy)"
        );
        return;
    }
    assert!(
        adapt.busy_rate >= 1.3 * prop.busy_rate,
        "the CPU-bound job ran {:.1}/s under adaptive against {:.1}/s",
        adapt.busy_rate,
        prop.busy_rate
    );
}
