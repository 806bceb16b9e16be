//! System tests of the distributed-training launcher on the real binaries: a 4-node cluster
//! whose NMs each discover 4 fake GPUs runs `spindle train --workers 16` with the
//! `allreduce_worker` stand-in, whose workers rendezvous over TCP at
//! `MASTER_ADDR:MASTER_PORT` and all-reduce their ranks. This proves the environment
//! contract end to end (ranks, local ranks, world size, a working master port, one distinct
//! GPU per worker). The second case kills one worker of the first gang attempt and checks
//! that the AM restarts the whole gang, which then completes, its checkpoint directory
//! checked on every node before each attempt's ranks start.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use spindle_system_tests::{
    app_id_in, bin, fake_gpus, running, spawn, wait_until, Cluster, ClusterOpts,
};

const GPU: &str = "yarn.io/gpu";
const WORKERS: usize = 16;
const RESOURCES: &str = "yarn.io/gpu=1,vcores=1,memory-mb=256";
const RUN_LIMIT: Duration = Duration::from_secs(180);

fn gpu_cluster(scratch: &Path) -> Cluster {
    let gpus = fake_gpus(scratch, 4);
    Cluster::start(ClusterOpts {
        nodes: 4,
        rm_props: vec![("yarn.resource-types".into(), GPU.into())],
        nm_props: vec![
            ("yarn.nodemanager.resource-plugins".into(), GPU.into()),
            (
                "yarn.nodemanager.resource-plugins.gpu.path-to-discovery-executables".into(),
                gpus.display().to_string(),
            ),
            // Room for 4 one-vcore GPU workers and the AM on one node.
            ("yarn.nodemanager.resource.cpu-vcores".into(), "8".into()),
        ],
    })
}

/// What one worker reported (`ALLREDUCE_REPORT_DIR`).
#[derive(Debug, Clone)]
struct Report {
    fields: BTreeMap<String, String>,
    result: String,
}

impl Report {
    fn get(&self, k: &str) -> &str {
        self.fields.get(k).map_or("", String::as_str)
    }
    fn num(&self, k: &str) -> u64 {
        self.get(k).parse().unwrap_or(u64::MAX)
    }
}

fn read_reports(dir: &Path, attempt: u32) -> Vec<Report> {
    let mut out = Vec::new();
    for rank in 0..WORKERS {
        let p = dir.join(format!("attempt-{attempt}-rank-{rank}.txt"));
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        let mut lines = text.lines();
        let env = lines.next().unwrap_or_default();
        let fields = env
            .split_whitespace()
            .skip(1)
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        out.push(Report {
            fields,
            result: lines.next().unwrap_or_default().to_string(),
        });
    }
    out
}

/// Checks one attempt's 16 workers: the right sum, distinct (node, GPU) pairs, ranks in
/// (node, container id) order with local ranks within a node, and stdout in the NM logs.
fn check_attempt(c: &Cluster, dir: &Path, attempt: u32) {
    let reports = read_reports(dir, attempt);
    let n = WORKERS as u64;
    let sum = n * (n - 1) / 2;
    for (rank, r) in reports.iter().enumerate() {
        assert_eq!(
            r.result,
            format!("rank {rank} of {n}: allreduce sum {sum}"),
            "attempt {attempt} rank {rank}: {r:?}"
        );
        assert_eq!(r.num("RANK"), rank as u64, "{r:?}");
        assert_eq!(r.num("WORLD_SIZE"), n, "{r:?}");
        assert_eq!(r.num("SPINDLE_GANG_ATTEMPT"), u64::from(attempt), "{r:?}");
    }
    // One distinct GPU per worker: 16 distinct (node, CUDA_VISIBLE_DEVICES) pairs, each a
    // single device index.
    let pairs: BTreeSet<(String, String)> = reports
        .iter()
        .map(|r| {
            (
                r.get("NODE").to_string(),
                r.get("CUDA_VISIBLE_DEVICES").to_string(),
            )
        })
        .collect();
    assert_eq!(pairs.len(), WORKERS, "{pairs:?}");
    assert!(
        pairs
            .iter()
            .all(|(_, d)| d.parse::<u32>().is_ok_and(|i| i < 4)),
        "{pairs:?}"
    );
    // Rank order: by node (host, then port), then container id; local ranks within a node.
    let key = |r: &Report| {
        let node = r.get("NODE");
        let (host, port) = node.rsplit_once(':').unwrap_or((node, "0"));
        (
            host.to_string(),
            port.parse::<u32>().unwrap_or(0),
            r.get("CONTAINER_ID").to_string(),
        )
    };
    let mut order: Vec<&Report> = reports.iter().collect();
    order.sort_by_key(|r| key(r));
    let ranks: Vec<u64> = order.iter().map(|r| r.num("RANK")).collect();
    assert_eq!(ranks, (0..n).collect::<Vec<_>>());
    let mut per_node: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for r in &order {
        per_node
            .entry(r.get("NODE"))
            .or_default()
            .push(r.num("LOCAL_RANK"));
    }
    for (node, locals) in &per_node {
        assert_eq!(
            locals,
            &(0..locals.len() as u64).collect::<Vec<_>>(),
            "{node}"
        );
        for r in reports.iter().filter(|r| r.get("NODE") == *node) {
            assert_eq!(r.num("LOCAL_WORLD_SIZE"), locals.len() as u64, "{r:?}");
        }
    }
    // MASTER is rank 0's node, and every worker printed its sum to its stdout.
    let master = reports[0]
        .get("NODE")
        .rsplit_once(':')
        .map(|(h, _)| h.to_string());
    for r in &reports {
        assert_eq!(
            r.get("MASTER").rsplit_once(':').map(|(h, _)| h.to_string()),
            master,
            "{r:?}"
        );
        let stdout = c.container_log(r.get("NODE"), r.get("CONTAINER_ID"), "stdout");
        assert!(
            stdout.contains(&r.result),
            "{}: {stdout}",
            r.get("CONTAINER_ID")
        );
    }
}

fn app_id_of(stdout: &str) -> String {
    app_id_in(stdout).unwrap_or_default()
}

fn train_args<'a>(worker: &'a str, env: &'a [String]) -> Vec<&'a str> {
    let mut a = vec![
        "train",
        "--workers",
        "16",
        "--worker-resources",
        RESOURCES,
        "--gang-timeout-ms",
        "60000",
        "--timeout-ms",
        "150000",
    ];
    for e in env {
        a.push("--env");
        a.push(e);
    }
    a.push("--");
    a.push(worker);
    a
}

#[test]
fn sixteen_workers_all_reduce_their_ranks() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let reports = scratch.path().join("reports");
    std::fs::create_dir_all(&reports).expect("reports dir");
    let c = gpu_cluster(scratch.path());
    let worker = bin("allreduce_worker").display().to_string();
    let env = vec![format!("ALLREDUCE_REPORT_DIR={}", reports.display())];
    let out = c.spindle_within(&train_args(&worker, &env), RUN_LIMIT);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let app = app_id_of(&stdout);
    if !out.status.success() {
        eprintln!("---- AM stdout ----\n{}", c.am_stdout(&app));
        c.dump_logs();
    }
    assert!(
        out.status.success(),
        "spindle train: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("final status SUCCEEDED"), "{stdout}");
    let a = c.app(&app);
    assert_eq!(a["state"], "FINISHED", "{a}");
    assert_eq!(a["finalStatus"], "SUCCEEDED", "{a}");
    assert_eq!(a["applicationType"], "SPINDLE_TRAIN", "{a}");
    check_attempt(&c, &reports, 1);
    let am = c.am_stdout(&app);
    for want in [
        "gang workers attempt 1: asking for 16 workers",
        "gang workers is ALLOCATED",
        "on 4 node(s)",
        "worker rank 15 started in container",
        "all 16 workers of attempt 1 exited 0",
    ] {
        assert!(am.contains(want), "AM stdout lacks {want:?}:\n{am}");
    }
}

/// SIGKILLs every pid named in `<dir>/*.pid` still alive: the test's workers must not
/// outlive it, whatever happened.
struct KillPids(PathBuf);

impl KillPids {
    fn pids(&self) -> Vec<i32> {
        std::fs::read_dir(&self.0)
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter(|e| e.path().extension().is_some_and(|x| x == "pid"))
                    .filter_map(|e| std::fs::read_to_string(e.path()).ok())
                    .filter_map(|t| t.trim().parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for KillPids {
    fn drop(&mut self) {
        for pid in self.pids() {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

/// Exists and is not a zombie (a zombie no longer runs).
fn alive(pid: i32) -> bool {
    running(pid)
}

#[test]
fn killing_a_worker_restarts_the_gang_which_then_completes() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let reports = scratch.path().join("reports");
    let hang = scratch.path().join("hang");
    std::fs::create_dir_all(&reports).expect("reports dir");
    std::fs::create_dir_all(&hang).expect("hang dir");
    let guard = KillPids(hang.clone());
    let c = gpu_cluster(scratch.path());
    let worker = bin("allreduce_worker").display().to_string();
    let env = vec![
        format!("ALLREDUCE_REPORT_DIR={}", reports.display()),
        format!("ALLREDUCE_HANG_DIR={}", hang.display()),
    ];
    let mut args: Vec<String> = train_args(&worker, &env)
        .into_iter()
        .map(str::to_string)
        .collect();
    // With a checkpoint directory (one machine: every node sees it), checked before each
    // gang attempt's ranks start.
    let ckpt = scratch.path().join("ckpt");
    let at = args.iter().position(|a| a == "--").expect("--");
    args.splice(
        at..at,
        ["--checkpoint-dir".to_string(), ckpt.display().to_string()],
    );
    let mut client = spawn(
        "spindle train",
        &bin("spindle"),
        &args,
        scratch.path().join("client.log"),
        &[
            ("SPINDLE_RM_ADDRESS", c.rm_addr.clone()),
            ("SPINDLE_CONF_DIR", c.conf_dir.display().to_string()),
        ],
    );
    // Attempt 1 all-reduces, then every worker parks with its pid in the hang dir.
    let pids = wait_until(
        "16 workers of attempt 1 to park",
        Duration::from_secs(90),
        || {
            if !client.is_running() {
                panic!("spindle train ended early:\n{}", client.log_text());
            }
            let p = guard.pids();
            (p.len() == WORKERS).then_some(p)
        },
    );
    check_attempt(&c, &reports, 1);
    let victim: i32 = std::fs::read_to_string(hang.join("rank-5.pid"))
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .expect("rank 5's pid");
    kill(Pid::from_raw(victim), Signal::SIGKILL).expect("kill a worker");
    let deadline = Instant::now() + RUN_LIMIT;
    let status = loop {
        if let Ok(Some(s)) = client.child.try_wait() {
            break s;
        }
        if Instant::now() > deadline {
            c.dump_logs();
            panic!("spindle train did not finish:\n{}", client.log_text());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let log = client.log_text();
    let app = app_id_of(&log);
    let am = c.am_stdout(&app);
    if !status.success() {
        eprintln!("---- AM stdout ----\n{am}");
        c.dump_logs();
    }
    assert!(status.success(), "{log}");
    assert!(log.contains("final status SUCCEEDED"), "{log}");
    let a = c.app(&app);
    assert_eq!(a["finalStatus"], "SUCCEEDED", "{a}");
    // The second attempt ran whole and completed.
    check_attempt(&c, &reports, 2);
    for want in [
        "worker rank 5 failed: container",
        "with exit status 137",
        "restarting the gang (attempt 2 of at most 4)",
        "gang workers released: 15 running worker(s) stopped",
        "gang workers attempt 2: asking for 16 workers",
        "all 16 workers of attempt 2 exited 0",
    ] {
        assert!(am.contains(want), "AM stdout lacks {want:?}:\n{am}");
    }
    // The checkpoint directory was checked on the 4 nodes before each attempt's ranks ran,
    // and the check left nothing in it.
    let checked = format!(
        "all 4 node(s) see the checkpoint directory {}",
        ckpt.display()
    );
    assert_eq!(am.matches(&checked).count(), 2, "{am}");
    let left: Vec<_> = std::fs::read_dir(&ckpt)
        .expect("the AM made the directory")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with(".spindle-check-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // The AM stopped every parked worker of attempt 1 (nobody is left behind).
    let left: Vec<i32> = pids.iter().copied().filter(|p| alive(*p)).collect();
    assert!(left.is_empty(), "attempt-1 workers still running: {left:?}");
}

/// A gang that does not fit waits with a reason and a reservation the REST view shows,
/// and starts once the GPUs it needs are free.
#[test]
fn a_waiting_gang_says_why_and_starts_when_room_appears() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let c = gpu_cluster(scratch.path());
    // Two GPUs held by a distributed shell that sleeps.
    let ds_log = scratch.path().join("ds.log");
    let ds_args: Vec<String> = [
        "distributed-shell",
        "--num-containers",
        "2",
        "--container-resources",
        "memory-mb=256,vcores=1,yarn.io/gpu=1",
        "--shell-command",
        "sleep 120",
        "--rm-address",
        c.rm_addr.as_str(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let _ds = spawn("ds", &bin("spindle"), &ds_args, ds_log, &[]);
    let ds_app = wait_until(
        "the shell's GPUs to be held",
        Duration::from_secs(60),
        || {
            let (_, v) =
                c.get("/ws/v1/cluster/apps?states=RUNNING&applicationTypes=DISTRIBUTEDSHELL");
            let app = v["apps"]["app"].as_array()?.first()?.clone();
            (app["runningContainers"].as_i64() == Some(3))
                .then(|| app["id"].as_str().unwrap_or_default().to_string())
        },
    );
    // The 16-worker gang needs all 16 GPUs: it waits, and says so.
    let worker = bin("allreduce_worker").display().to_string();
    let mut args: Vec<String> = train_args(&worker, &[])
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.splice(1..1, ["--rm-address".to_string(), c.rm_addr.clone()]);
    let mut train = spawn(
        "train",
        &bin("spindle"),
        &args,
        scratch.path().join("train.log"),
        &[],
    );
    let waiting = wait_until(
        "the gang to wait with a reason",
        Duration::from_secs(60),
        || {
            let (_, v) = c.get("/ws/v1/cluster/apps?applicationTypes=SPINDLE_TRAIN");
            let app = v["apps"]["app"].as_array()?.first()?.clone();
            let gang = app["gangs"].as_array()?.first()?.clone();
            (gang["state"] == "RESERVED" || gang["state"] == "PENDING").then_some(app)
        },
    );
    let gang = &waiting["gangs"][0];
    let why = gang["diagnostics"].as_str().unwrap_or_default();
    assert!(why.contains("needs 16 GPUs"), "{waiting}");
    assert!(why.contains("the best fit now is 14 of 16"), "{waiting}");
    assert!(
        waiting["diagnostics"]
            .as_str()
            .is_some_and(|d| d.contains("is waiting")),
        "{waiting}"
    );
    // Freeing the GPUs lets the gang start whole; the job then completes.
    let (status, _, _) = c.send(
        reqwest::Method::PUT,
        &format!("/ws/v1/cluster/apps/{ds_app}/state"),
        &serde_json::json!({"state": "KILLED"}),
    );
    assert!(status == 200 || status == 202, "{status}");
    let code = wait_until("spindle train to finish", RUN_LIMIT, || {
        train.child.try_wait().ok().flatten()
    });
    let log = train.log_text();
    assert!(code.success(), "spindle train failed:\n{log}");
    assert!(log.contains("final status SUCCEEDED"), "{log}");
}
