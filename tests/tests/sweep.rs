//! System tests of `spindle sweep` on the real binaries.
//!
//! The first runs a 16-trial grid (`--param lr=4 values --param bs=4 values`) with
//! `--parallel 4`, one GPU per trial, on two NMs of 4 fake GPUs each: twice the GPUs the sweep
//! may use, so that the limit of 4 is the AM's and not the cluster's. Every trial runs; the
//! RM never lists more than 4 live trial containers of the application (sampled while it
//! runs), and the trials' own start/end timestamps never overlap more than 4 deep; each
//! container is finished at the RM (its GPU free) within a few seconds of its trial's
//! command ending; trial 5 fails once, runs again, and the client's table shows it with 2
//! attempts. The second runs a Slurm job array (`--array 1,3%1`) whose task 3 always fails:
//! the sweep fails with a diagnostic naming it, after its retry.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use spindle_system_tests::{app_id_in, bin, fake_gpus, Cluster, ClusterOpts};

const GPU: &str = "yarn.io/gpu";
const RUN_LIMIT: Duration = Duration::from_secs(240);
/// How soon after its trial's command ends a container must be finished at the RM.
const RELEASE_WITHIN_MS: u64 = 5_000;

/// Writes `trial.sh`: it records its start (epoch ms, container, GPUs) and end in `dir`,
/// sleeps a little between, and prints its parameters and a last line; trial `fail_id`
/// exits 3 on attempts up to `fail_attempts` (0: never fails).
fn trial_script(dir: &Path, fail_id: u32, fail_attempts: u32) -> String {
    let script = dir.join("trial.sh");
    let text = format!(
        r#"#!/bin/bash
d={dir}
id=$SPINDLE_TRIAL_ID; a=$SPINDLE_TRIAL_ATTEMPT
echo "$(date +%s%3N) $CONTAINER_ID $CUDA_VISIBLE_DEVICES" > $d/t$id-a$a.start
sleep 2
echo "lr=$SWEEP_LR bs=$SWEEP_BS array=$SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_TASK_COUNT"
date +%s%3N > $d/t$id-a$a.end
if [ "$id" = {fail_id} ] && [ "$a" -le {fail_attempts} ]; then echo "trial $id fails"; exit 3; fi
echo "trial $id done"
"#,
        dir = dir.display()
    );
    std::fs::write(&script, text).expect("trial script");
    format!("bash {}", script.display())
}

/// Runs `spindle ARGS` against the cluster, calling `sample` every 100 ms while it runs;
/// returns its exit status and stdout. Killed (and the test failed) past [`RUN_LIMIT`].
fn run_sampling(
    c: &Cluster,
    dir: &Path,
    args: &[String],
    mut sample: impl FnMut(),
) -> (std::process::ExitStatus, String) {
    let out_path = dir.join("client.out");
    let out = std::fs::File::create(&out_path).expect("client stdout");
    let err = out.try_clone().expect("client stderr");
    let mut child = Command::new(bin("spindle"))
        .args(args)
        .env("SPINDLE_RM_ADDRESS", &c.rm_addr)
        .env("SPINDLE_CONF_DIR", &c.conf_dir)
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn spindle sweep");
    let deadline = Instant::now() + RUN_LIMIT;
    let status = loop {
        if let Ok(Some(s)) = child.try_wait() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            c.dump_logs();
            panic!(
                "spindle sweep ran past {RUN_LIMIT:?}:\n{}",
                std::fs::read_to_string(&out_path).unwrap_or_default()
            );
        }
        sample();
        std::thread::sleep(Duration::from_millis(100));
    };
    (
        status,
        std::fs::read_to_string(&out_path).unwrap_or_default(),
    )
}

/// The live (not COMPLETE) trial containers of every sweep application the RM knows.
fn live_trial_containers(c: &Cluster) -> usize {
    let (_, apps) = c.get("/ws/v1/cluster/apps");
    let ids: Vec<String> = apps["apps"]["app"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|a| a["id"].as_str().map(str::to_string))
        .collect();
    ids.iter()
        .flat_map(|id| c.containers_of(id))
        .filter(|k| {
            let id = k["containerId"].as_str().unwrap_or_default();
            // The AM is the first container of the attempt.
            !id.ends_with("_000001") && k["containerState"] != "COMPLETE"
        })
        .count()
}

/// `(start ms, container, end ms)` of each trial attempt, by `(trial, attempt)`.
fn trial_runs(dir: &Path) -> BTreeMap<(u32, u32), (u64, String, u64)> {
    let mut runs = BTreeMap::new();
    for e in std::fs::read_dir(dir).expect("trial dir").flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(stem) = name.strip_suffix(".start") else {
            continue;
        };
        let key = stem
            .trim_start_matches('t')
            .split_once("-a")
            .and_then(|(t, a)| Some((t.parse().ok()?, a.parse().ok()?)))
            .expect("t<id>-a<attempt>");
        let start = std::fs::read_to_string(e.path()).unwrap_or_default();
        let mut w = start.split_whitespace();
        let ms: u64 = w.next().and_then(|s| s.parse().ok()).expect("start ms");
        let container = w.next().unwrap_or_default().to_string();
        let end: u64 = std::fs::read_to_string(dir.join(format!("{stem}.end")))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or_else(|| panic!("{stem} has no end"));
        runs.insert(key, (ms, container, end));
    }
    runs
}

/// The most intervals open at once.
fn max_overlap(intervals: impl Iterator<Item = (u64, u64)>) -> usize {
    let mut edges: Vec<(u64, i32)> = intervals.flat_map(|(s, e)| [(s, 1), (e, -1)]).collect();
    // An end before a start at the same instant.
    edges.sort();
    let (mut open, mut most) = (0i32, 0i32);
    for (_, d) in edges {
        open += d;
        most = most.max(open);
    }
    most as usize
}

/// The table row of trial `id` as whitespace-separated cells.
fn table_row(stdout: &str, id: u32) -> Vec<String> {
    let table = stdout
        .lines()
        .skip_while(|l| l.trim() != "Trials:")
        .collect::<Vec<_>>();
    table
        .iter()
        .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .find(|cells| cells.first().map(String::as_str) == Some(&id.to_string()))
        .unwrap_or_else(|| panic!("no row for trial {id}:\n{stdout}"))
}

#[test]
fn sixteen_trials_run_at_most_four_at_once_and_free_each_gpu_as_they_end() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let trials = scratch.path().join("trials");
    std::fs::create_dir_all(&trials).expect("trials dir");
    let gpus = fake_gpus(scratch.path(), 4);
    let c = Cluster::start(ClusterOpts {
        nodes: 2,
        rm_props: vec![("yarn.resource-types".into(), GPU.into())],
        nm_props: vec![
            ("yarn.nodemanager.resource-plugins".into(), GPU.into()),
            (
                "yarn.nodemanager.resource-plugins.gpu.path-to-discovery-executables".into(),
                gpus.display().to_string(),
            ),
            ("yarn.nodemanager.resource.cpu-vcores".into(), "8".into()),
        ],
    });
    c.wait_nodes_running(2);
    let command = trial_script(&trials, 5, 1);
    let args: Vec<String> = [
        "sweep",
        "--param",
        "lr=0.1,0.01,0.001,0.0001",
        "--param",
        "bs=16,32,64,128",
        "--parallel",
        "4",
        "--worker-resources",
        "yarn.io/gpu=1",
        "--max-trial-retries",
        "1",
        "--no-progress-timeout-ms",
        "120000",
        "--shell-command",
        &command,
    ]
    .map(str::to_string)
    .to_vec();
    let mut most_live = 0;
    let (status, stdout) = run_sampling(&c, scratch.path(), &args, || {
        most_live = most_live.max(live_trial_containers(&c));
    });
    let app = app_id_in(&stdout).unwrap_or_default();
    if !status.success() {
        eprintln!("---- AM stdout ----\n{}", c.am_stdout(&app));
        c.dump_logs();
    }
    assert!(status.success(), "spindle sweep: {stdout}");
    assert!(stdout.contains("final status SUCCEEDED"), "{stdout}");
    assert!(
        stdout.contains("Submitted sweep application_") && stdout.contains("of 16 trials"),
        "{stdout}"
    );
    let a = c.app(&app);
    assert_eq!(a["applicationType"], "SPINDLE_SWEEP", "{a}");

    // Every trial ran; trial 5 twice. Never more than 4 at once, seen from the RM while it
    // ran and from the trials' own clocks.
    let runs = trial_runs(&trials);
    assert_eq!(runs.len(), 17, "{runs:?}");
    for id in 0..16 {
        assert!(
            runs.contains_key(&(id, 1)),
            "trial {id} did not run: {runs:?}"
        );
    }
    assert!(
        runs.contains_key(&(5, 2)),
        "trial 5 was not retried: {runs:?}"
    );
    assert!(
        (1..=4).contains(&most_live),
        "the RM listed {most_live} live trial containers at once"
    );
    let overlap = max_overlap(runs.values().map(|(s, _, e)| (*s, *e)));
    assert!((1..=4).contains(&overlap), "{overlap} trials overlapped");

    // Each trial's container is finished at the RM (its GPU given back) within a few seconds
    // of its command's end.
    let reports: BTreeMap<String, Value> = c
        .containers_of(&app)
        .into_iter()
        .map(|k| (k["containerId"].as_str().unwrap_or_default().to_string(), k))
        .collect();
    for ((id, attempt), (_, container, end)) in &runs {
        let k = reports
            .get(container)
            .unwrap_or_else(|| panic!("trial {id}.{attempt}: no report of {container}"));
        assert_eq!(k["containerState"], "COMPLETE", "{k}");
        let finished = k["finishedTime"].as_u64().unwrap_or(0);
        assert!(
            finished + 500 >= *end && finished <= end + RELEASE_WITHIN_MS,
            "trial {id}.{attempt} ended at {end}, its container {container} finished at \
             {finished}"
        );
    }
    // No GPU is held on any node now.
    let (_, nodes) = c.get("/ws/v1/cluster/nodes");
    for n in nodes["nodes"]["node"].as_array().expect("nodes") {
        let used = n["usedResource"]["resourceInformations"]["resourceInformation"]
            .as_array()
            .and_then(|r| r.iter().find(|i| i["name"] == GPU))
            .and_then(|i| i["value"].as_i64())
            .unwrap_or(0);
        assert_eq!(used, 0, "{n}");
    }

    // The table: a row per trial; trial 5 with 2 attempts and its last line.
    let row = table_row(&stdout, 5);
    assert_eq!(row[1..4], ["lr=0.01", "bs=32", "SUCCEEDED"], "{row:?}");
    assert_eq!((row[4].as_str(), row[5].as_str()), ("0", "2"), "{row:?}");
    assert_eq!(row[7..], ["trial", "5", "done"], "{row:?}");
    for id in 0..16 {
        assert_eq!(table_row(&stdout, id)[3], "SUCCEEDED", "{stdout}");
    }
    let am = c.am_stdout(&app);
    assert!(
        am.contains("trial 5 (lr=0.01 bs=32) failed; running it again"),
        "{am}"
    );
}

#[test]
fn a_job_array_task_that_keeps_failing_fails_the_sweep_naming_it() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let trials = scratch.path().join("trials");
    std::fs::create_dir_all(&trials).expect("trials dir");
    let c = Cluster::start(ClusterOpts {
        nodes: 1,
        ..Default::default()
    });
    c.wait_nodes_running(1);
    let command = trial_script(&trials, 3, 99);
    let args: Vec<String> = [
        "sweep",
        "--array",
        "1,3%1",
        "--max-trial-retries",
        "1",
        "--shell-command",
        &command,
    ]
    .map(str::to_string)
    .to_vec();
    let (status, stdout) = run_sampling(&c, scratch.path(), &args, || {});
    assert_eq!(status.code(), Some(2), "{stdout}");
    let want = "1 of 2 trials failed: trial 3 exit status 3 after 2 attempts";
    assert!(stdout.contains(&format!("Diagnostics: {want}")), "{stdout}");
    let runs = trial_runs(&trials);
    let keys: Vec<(u32, u32)> = runs.keys().copied().collect();
    assert_eq!(keys, [(1, 1), (3, 1), (3, 2)], "{runs:?}");
    // %1: one at a time.
    assert_eq!(max_overlap(runs.values().map(|(s, _, e)| (*s, *e))), 1);
    let row = table_row(&stdout, 3);
    assert_eq!(row[1..5], ["-", "FAILED", "3", "2"], "{row:?}");
    assert_eq!(row[6..], ["trial", "3", "fails"], "{row:?}");
    let row = table_row(&stdout, 1);
    assert_eq!(row[2], "SUCCEEDED", "{row:?}");
    // The array's environment reached the command (stdout of task 1, in its NM's logs).
    let app = app_id_in(&stdout).unwrap_or_default();
    let task1 = c
        .containers_of(&app)
        .into_iter()
        .find(|k| k["containerId"] == runs[&(1, 1)].1)
        .expect("task 1's container");
    let out = c.container_log(
        task1["nodeHttpAddress"].as_str().unwrap_or_default(),
        &runs[&(1, 1)].1,
        "stdout",
    );
    assert!(out.contains("array=1 of 2"), "{out}");
}
