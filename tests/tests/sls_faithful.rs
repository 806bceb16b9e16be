//! Faithfulness of the scheduler load simulator (`spindle sls`): one small, contended
//! scenario played twice, on a live cluster (the real `resourcemanager` and one
//! `nodemanager` with 4 fake GPUs on 127.0.0.1, jobs submitted at their times by the real
//! `spindle train` and `spindle distributed-shell` clients, containers that `sleep`) and
//! replayed by `spindle sls` with the same configuration files, the same node and the same
//! container sizes. Both must start the jobs in the same order, and each job's completion
//! time (finish - submit) must agree within the live run's launch and heartbeat latency,
//! which the simulator leaves out by design (its launches take no time).
//!
//! The scenario: J1, a gang of 2 one-GPU containers, takes half the node; J2, a gang of 4,
//! must wait for J1 to end; J3 (a single one-GPU container) and J4 (a gang of 2) arrive
//! while J2 waits and queue behind it. The live submit times (as the RM recorded them) are
//! what the simulator replays, so client start-up jitter is not counted as a disagreement.
//!
//! Every process the test starts is killed by pid when it ends (the `Daemon` and `Cluster`
//! guards), and every directory is a `tempfile` directory removed on drop.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use spindle_system_tests::{
    bin, fake_gpus, output_within, spawn, wait_until, Cluster, ClusterOpts, Daemon,
};

const GPU: &str = "yarn.io/gpu";
/// The live node: 4 fake GPUs, and vcores and memory enough for the 4 AMs and the 4 busy
/// GPU containers at once, so that GPUs are the only resource the jobs contend for.
const NODE_GPUS: i64 = 4;
const NODE_VCORES: i64 = 8;
const NODE_MEMORY_MB: i64 = 4096;
/// Every task container, live (`--worker-resources` / `--container-resources`) and in the
/// trace (`vcores`, `memory_mb`).
const CONTAINER_VCORES: i64 = 1;
const CONTAINER_MB: i64 = 256;
/// The AM container of both clients (their `--master-memory` / `--master-vcores`
/// defaults), and the simulator's `--am-memory-mb` / `--am-vcores`.
const AM_MB: i64 = 512;
const AM_VCORES: i64 = 1;
/// Starts closer than this may come in either order.
const TIE_S: f64 = 0.5;
/// Latency allowance (see `allowance_s`).
const BASE_ALLOWANCE_S: f64 = 2.5;
const PER_WAIT_ALLOWANCE_S: f64 = 0.5;
/// The whole live scenario (nominally 13 s, about 15 s measured) must be over within this;
/// each client's application is killed at the same limit.
const LIVE_LIMIT: Duration = Duration::from_secs(45);

struct JobSpec {
    id: &'static str,
    /// Seconds after the first submission.
    submit_s: f64,
    /// One-GPU containers; more than one is a gang.
    gpus: u32,
    duration_s: u32,
}

const JOBS: [JobSpec; 4] = [
    JobSpec {
        id: "J1",
        submit_s: 0.0,
        gpus: 2,
        duration_s: 6,
    },
    JobSpec {
        id: "J2",
        submit_s: 1.0,
        gpus: 4,
        duration_s: 4,
    },
    JobSpec {
        id: "J3",
        submit_s: 2.0,
        gpus: 1,
        duration_s: 3,
    },
    JobSpec {
        id: "J4",
        submit_s: 3.0,
        gpus: 2,
        duration_s: 3,
    },
];

/// One job's times in one run, in seconds since the first submission.
#[derive(Debug, Clone, Copy)]
struct Times {
    submit: f64,
    start: f64,
    finish: f64,
}

impl Times {
    fn jct(&self) -> f64 {
        self.finish - self.submit
    }
}

/// The configuration both runs read: the live daemons from the conf dir, `spindle sls`
/// through `--conf-dir` on the same directory. It is complete, so the simulator fills
/// nothing in (checked: it prints a `set` line for whatever it fills).
fn conf_files() -> [(&'static str, String); 2] {
    let props = |kv: &[(&str, String)]| {
        let mut s = String::from("<configuration>\n");
        for (k, v) in kv {
            s.push_str(&format!(
                "  <property><name>{k}</name><value>{v}</value></property>\n"
            ));
        }
        s.push_str("</configuration>\n");
        s
    };
    let yarn_site = props(&[
        ("yarn.resource-types", GPU.to_string()),
        // What the test cluster also gives the live RM with -D.
        ("yarn.scheduler.minimum-allocation-mb", "128".to_string()),
        (
            "yarn.scheduler.maximum-allocation-mb",
            NODE_MEMORY_MB.to_string(),
        ),
        (
            "yarn.scheduler.maximum-allocation-vcores",
            NODE_VCORES.to_string(),
        ),
        (
            "yarn.resource-types.yarn.io/gpu.maximum-allocation",
            NODE_GPUS.to_string(),
        ),
    ]);
    let capacity = props(&[
        (
            "yarn.scheduler.capacity.resource-calculator",
            "org.apache.hadoop.yarn.util.resource.DominantResourceCalculator".to_string(),
        ),
        // With YARN's 10% the AM limit would admit one application at a time, and the
        // scenario would contend for the AM limit, not for GPUs.
        (
            "yarn.scheduler.capacity.maximum-am-resource-percent",
            "1.0".to_string(),
        ),
    ]);
    [
        ("yarn-site.xml", yarn_site),
        ("capacity-scheduler.xml", capacity),
    ]
}

/// The client command line of a job: a gang through `spindle train` (its workers start
/// together when the whole gang is granted), a single container through
/// `spindle distributed-shell` (a plain ask, started when granted).
fn client_args(j: &JobSpec) -> Vec<String> {
    let res = format!("{GPU}=1,vcores={CONTAINER_VCORES},memory-mb={CONTAINER_MB}");
    let mut a: Vec<String> = if j.gpus > 1 {
        vec![
            "train".into(),
            "--workers".into(),
            j.gpus.to_string(),
            "--worker-resources".into(),
            res,
            "--gang-timeout-ms".into(),
            LIVE_LIMIT.as_millis().to_string(),
            "--max-restarts".into(),
            "0".into(),
        ]
    } else {
        vec![
            "distributed-shell".into(),
            "--num-containers".into(),
            "1".into(),
            "--container-resources".into(),
            res,
            "--shell-command".into(),
            format!("sleep {}", j.duration_s),
        ]
    };
    a.extend([
        "--appname".into(),
        j.id.to_string(),
        "--master-memory".into(),
        AM_MB.to_string(),
        "--master-vcores".into(),
        AM_VCORES.to_string(),
        "--timeout-ms".into(),
        LIVE_LIMIT.as_millis().to_string(),
    ]);
    if j.gpus > 1 {
        a.extend(["--".into(), "sleep".into(), j.duration_s.to_string()]);
    }
    a
}

fn num(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

/// Plays the scenario on the live cluster; each job's RM-recorded times, in ms since the
/// epoch: (submit = the app's `startedTime`, start = the first allocation of a task
/// container (a gang's members are allocated together), finish = the app's
/// `finishedTime`, when its AM unregistered).
fn play_live(c: &Cluster, scratch: &Path) -> Vec<(u64, u64, u64)> {
    let env = [
        ("SPINDLE_RM_ADDRESS", c.rm_addr.clone()),
        ("SPINDLE_CONF_DIR", c.conf_dir.display().to_string()),
    ];
    let t0 = Instant::now();
    let mut clients: Vec<Daemon> = Vec::new();
    for j in &JOBS {
        let at = t0 + Duration::from_secs_f64(j.submit_s);
        if let Some(wait) = at.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        clients.push(spawn(
            j.id,
            &bin("spindle"),
            &client_args(j),
            scratch.join(format!("{}.log", j.id)),
            &env,
        ));
    }
    let deadline = t0 + LIVE_LIMIT;
    for (j, client) in JOBS.iter().zip(clients.iter_mut()) {
        let status = loop {
            if let Ok(Some(s)) = client.child.try_wait() {
                break s;
            }
            if Instant::now() > deadline {
                for d in &clients {
                    eprintln!("---- {} ----\n{}", d.name, d.log_text());
                }
                c.dump_logs();
                // What the RM says of each job: state, diagnostics, and why a gang waits.
                let (_, apps) = c.get("/ws/v1/cluster/apps");
                for a in apps["apps"]["app"].as_array().cloned().unwrap_or_default() {
                    eprintln!(
                        "{} {}: {} {}",
                        a["name"], a["id"], a["state"], a["diagnostics"]
                    );
                    eprintln!("  gangs: {}", a["gangs"]);
                }
                panic!("the live scenario did not finish within {LIVE_LIMIT:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        if !status.success() {
            eprintln!("---- {} ----\n{}", j.id, client.log_text());
            c.dump_logs();
            panic!("{} ended with {status}", j.id);
        }
    }
    let (_, apps) = c.get("/ws/v1/cluster/apps");
    let by_name: BTreeMap<String, Value> = apps["apps"]["app"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|a| (a["name"].as_str().unwrap_or_default().to_string(), a))
        .collect();
    JOBS.iter()
        .map(|j| {
            let app = by_name
                .get(j.id)
                .unwrap_or_else(|| panic!("no application named {}: {apps}", j.id));
            assert_eq!(app["finalStatus"], "SUCCEEDED", "{app}");
            let id = app["id"].as_str().unwrap_or_default();
            let tasks: Vec<Value> = c
                .containers_of(id)
                .into_iter()
                .filter(|ct| num(&ct["allocatedResources"][GPU]) > 0)
                .collect();
            assert_eq!(
                tasks.len(),
                j.gpus as usize,
                "{}: one task container per GPU, once: {tasks:?}",
                j.id
            );
            let start = tasks
                .iter()
                .map(|ct| num(&ct["startedTime"]))
                .min()
                .unwrap_or(0);
            let (submit, finish) = (num(&app["startedTime"]), num(&app["finishedTime"]));
            assert!(
                submit > 0 && start >= submit && finish >= start,
                "{}: submit {submit}, start {start}, finish {finish}: {app}",
                j.id
            );
            (submit as u64, start as u64, finish as u64)
        })
        .collect()
}

/// Replays the scenario with `spindle sls` and reads `jobs.csv`: each job's times in
/// seconds since the trace's start.
fn play_sim(conf_dir: &Path, submits_s: &[f64], scratch: &Path) -> Vec<Times> {
    let trace = scratch.join("trace.csv");
    let out = scratch.join("sls-out");
    let mut csv =
        String::from("job_id,submit_time,num_gpus,duration,gpus_per_container,vcores,memory_mb\n");
    for (j, s) in JOBS.iter().zip(submits_s) {
        csv.push_str(&format!(
            "{},{s:.3},{},{},1,{CONTAINER_VCORES},{CONTAINER_MB}\n",
            j.id, j.gpus, j.duration_s
        ));
    }
    std::fs::write(&trace, &csv).expect("write trace");
    let mut cmd = Command::new(bin("spindle"));
    cmd.arg("sls")
        .arg("--trace")
        .arg(&trace)
        .arg("--conf-dir")
        .arg(conf_dir)
        .args(["--nodes", "1"])
        .args(["--gpus-per-node", &NODE_GPUS.to_string()])
        .args(["--vcores-per-node", &NODE_VCORES.to_string()])
        .args(["--memory-mb-per-node", &NODE_MEMORY_MB.to_string()])
        .args(["--am-memory-mb", &AM_MB.to_string()])
        .args(["--am-vcores", &AM_VCORES.to_string()])
        .arg("--out")
        .arg(&out)
        .args(["--no-timing", "--check", "--quiet"]);
    let o = output_within(cmd, Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "spindle sls: {stdout}\n{stderr}");
    // The simulator ran the live configuration as it is: it filled nothing in.
    assert!(
        !stdout
            .lines()
            .chain(stderr.lines())
            .any(|l| l.trim_start().starts_with("set ")),
        "spindle sls changed the configuration:\n{stdout}\n{stderr}"
    );
    let text = std::fs::read_to_string(out.join("jobs.csv")).expect("jobs.csv");
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("jobs.csv has no {name} column: {header:?}"))
    };
    let (c_id, c_sub, c_start, c_fin, c_out) = (
        col("job_id"),
        col("submit_s"),
        col("start_s"),
        col("finish_s"),
        col("outcome"),
    );
    let rows: BTreeMap<String, Vec<String>> = lines
        .map(|l| {
            let f: Vec<String> = l.splitn(header.len(), ',').map(str::to_string).collect();
            (f[c_id].clone(), f)
        })
        .collect();
    JOBS.iter()
        .map(|j| {
            let f = rows
                .get(j.id)
                .unwrap_or_else(|| panic!("jobs.csv lacks {}:\n{text}", j.id));
            assert_eq!(
                f[c_out], "FINISHED",
                "the simulator did not finish {}:\n{text}\nthe trace:\n{csv}",
                j.id
            );
            let s = |c: usize| -> f64 {
                f[c].parse()
                    .unwrap_or_else(|_| panic!("{}: bad number '{}':\n{text}", j.id, f[c]))
            };
            Times {
                submit: s(c_sub),
                start: s(c_start),
                finish: s(c_fin),
            }
        })
        .collect()
}

/// How many jobs `j` waited behind in the simulation: the jobs that ended after it arrived
/// and no later than it started (it started when their GPUs came free).
fn waited_behind(sim: &[Times], j: usize) -> usize {
    sim.iter()
        .enumerate()
        .filter(|(k, t)| *k != j && t.finish > sim[j].submit && t.finish <= sim[j].start + 1e-6)
        .count()
}

/// The latency allowance of job `j`, which the simulator leaves out by design:
/// - BASE (2.5 s), the job's own latency on the live path: the AM container's launch
///   (localizing and exec'ing the `spindle` binary, a debug build on a loaded CI machine:
///   about 0.5-1 s) and its register and ask, which delay a job that does not wait; the
///   gang's launch (a free-port call, then the NM's held start and release: 0.1-0.3 s);
///   and the end: the NM reports the container's exit at once, but the AM, idle while its
///   workers run, polls the RM at intervals that double up to 1 s (`amrm::MAX_INTERVAL`)
///   before it unregisters. An NM heartbeat interval (1 s) is not in it: a container's end
///   makes the NM heartbeat at once, and a waiting gang's AM polls every 20 ms.
/// - PER_WAIT (0.5 s) for each job it waited behind: that job's end came late by its own
///   launch latency (a gang's release and the `sleep` exec, the completion heartbeat and
///   the scheduling pass it triggers), and the waiting job starts that much later; its own
///   AM launch overlaps the wait and costs nothing more.
///
/// Measured on a 2-core machine with a debug build: live JCTs 0.5-1.1 s over the
/// simulator's, every job, so the allowance leaves 2-3x room for a slower CI machine.
fn allowance_s(sim: &[Times], j: usize) -> f64 {
    BASE_ALLOWANCE_S + PER_WAIT_ALLOWANCE_S * waited_behind(sim, j) as f64
}

fn table(title: &str, sim: &[Times], live: &[Times]) -> String {
    let mut s = format!(
        "{title}\njob  gpus dur | submit | sim start  finish    jct | live start  finish    jct |   diff  allow\n"
    );
    for (i, j) in JOBS.iter().enumerate() {
        let (a, b) = (sim[i], live[i]);
        s.push_str(&format!(
            "{:<4} {:>4} {:>3} | {:>6.2} | {:>9.2} {:>7.2} {:>6.2} | {:>10.2} {:>7.2} {:>6.2} | {:>+6.2} {:>6.2}\n",
            j.id,
            j.gpus,
            j.duration_s,
            b.submit,
            a.start,
            a.finish,
            a.jct(),
            b.start,
            b.finish,
            b.jct(),
            b.jct() - a.jct(),
            allowance_s(sim, i)
        ));
    }
    s
}

/// Job ids by start time.
fn start_order(t: &[Times]) -> Vec<&'static str> {
    let mut idx: Vec<usize> = (0..t.len()).collect();
    idx.sort_by(|a, b| t[*a].start.total_cmp(&t[*b].start));
    idx.into_iter().map(|i| JOBS[i].id).collect()
}

#[test]
fn sls_replays_a_contended_gang_scenario_as_the_live_cluster_runs_it() {
    let began = Instant::now();
    let scratch = tempfile::tempdir().expect("tempdir");
    let gpus = fake_gpus(scratch.path(), NODE_GPUS as u32);
    let files = conf_files();
    let file_refs: Vec<(&str, &str)> = files.iter().map(|(n, t)| (*n, t.as_str())).collect();
    let c = Cluster::start_with_files(
        ClusterOpts {
            nodes: 1,
            rm_props: vec![],
            nm_props: vec![
                ("yarn.nodemanager.resource-plugins".into(), GPU.into()),
                (
                    "yarn.nodemanager.resource-plugins.gpu.path-to-discovery-executables".into(),
                    gpus.display().to_string(),
                ),
                (
                    "yarn.nodemanager.resource.cpu-vcores".into(),
                    NODE_VCORES.to_string(),
                ),
                (
                    "yarn.nodemanager.resource.memory-mb".into(),
                    NODE_MEMORY_MB.to_string(),
                ),
            ],
        },
        &file_refs,
    );
    // The node registered what the simulator is told it has.
    let node = wait_until("the node's 4 GPUs", Duration::from_secs(20), || {
        let (_, v) = c.get("/ws/v1/cluster/nodes");
        let n = v["nodes"]["node"].as_array()?.first()?.clone();
        let gpus = n["totalResource"]["resourceInformations"]["resourceInformation"]
            .as_array()?
            .iter()
            .find(|i| i["name"] == GPU)
            .map(|i| num(&i["value"]))?;
        (gpus == NODE_GPUS).then_some(n)
    });
    assert_eq!(num(&node["totalResource"]["vCores"]), NODE_VCORES, "{node}");
    assert_eq!(
        num(&node["totalResource"]["memory"]),
        NODE_MEMORY_MB,
        "{node}"
    );
    let cluster_up = began.elapsed();

    let raw = play_live(&c, scratch.path());
    let t0 = raw.iter().map(|r| r.0).min().unwrap_or(0);
    let secs = |ms: u64| ms.saturating_sub(t0) as f64 / 1000.0;
    let live: Vec<Times> = raw
        .iter()
        .map(|&(s, st, f)| Times {
            submit: secs(s),
            start: secs(st),
            finish: secs(f),
        })
        .collect();
    let live_done = began.elapsed();
    let submits: Vec<f64> = live.iter().map(|t| t.submit).collect();
    let sim = play_sim(&c.conf_dir, &submits, scratch.path());

    let report = table(
        "spindle sls vs the live cluster (seconds since the first submission; the \
         simulator replayed the live submit times)",
        &sim,
        &live,
    );
    eprintln!(
        "{report}sim start order {:?}, live start order {:?}\n\
         cluster up in {:.1} s, live scenario done at {:.1} s, simulation done at {:.1} s",
        start_order(&sim),
        start_order(&live),
        cluster_up.as_secs_f64(),
        live_done.as_secs_f64(),
        began.elapsed().as_secs_f64()
    );

    // The scenario contended as intended: J2 waited for J1 to end, and J3 and J4 waited.
    assert!(
        sim[1].start >= sim[0].finish - 1e-6,
        "J2 should wait for J1:\n{report}"
    );
    assert!(
        (2..4).all(|j| waited_behind(&sim, j) >= 1),
        "J3 and J4 should wait:\n{report}"
    );

    // (1) The same order of starts: for every two jobs, if one run starts a before b, the
    // other does not start b more than TIE_S before a.
    for a in 0..JOBS.len() {
        for b in 0..JOBS.len() {
            for (first, other, fname, oname) in
                [(&sim, &live, "sim", "live"), (&live, &sim, "live", "sim")]
            {
                if first[a].start < first[b].start {
                    assert!(
                        other[b].start >= other[a].start - TIE_S,
                        "{fname} starts {} before {}, {oname} starts {} {:.2} s before {}:\n{report}",
                        JOBS[a].id,
                        JOBS[b].id,
                        JOBS[b].id,
                        other[a].start - other[b].start,
                        JOBS[a].id
                    );
                }
            }
        }
    }
    // (2) Each job's completion time agrees within the live run's latency.
    for (i, j) in JOBS.iter().enumerate() {
        let diff = live[i].jct() - sim[i].jct();
        let allow = allowance_s(&sim, i);
        assert!(
            diff.abs() <= allow,
            "{}: live JCT {:.2} s vs sim JCT {:.2} s differ by {diff:+.2} s, over the \
             allowance {allow:.2} s:\n{report}",
            j.id,
            live[i].jct(),
            sim[i].jct()
        );
    }
}
