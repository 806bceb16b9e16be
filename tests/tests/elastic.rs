//! System test of elastic training on the real binaries.
//!
//! A 4-node cluster with 3 fake GPUs per node (12 in all), one queue `default` under the
//! `doubling` elastic policy (resizes at most every 2 s, shrinks due within 10 s). An elastic
//! `spindle train --min-workers 2 --max-workers 8` job (1 GPU per worker) runs at 8 on the
//! idle cluster (granted at 8, or at its minimum and grown: the policy's choice). A rigid 8-worker `spindle train` gang then
//! arrives: the elastic job shrinks to 4 (its workers checkpoint on SIGTERM, the marker
//! `.spindle-resize` there, and restart with WORLD_SIZE 4: an all-reduce over the new ranks
//! still sums right), the rigid gang runs, and when it ends the elastic job grows back to 8.
//! The elastic job's work, counted across every restart through its checkpoint, is exactly
//! what a fixed run counts.
//!
//! Every worker writes its pid; the test kills those, and every process still running in
//! the cluster's directories (parked placeholders included), by pid when it ends.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use spindle_system_tests::{
    app_id_in, bin, cs_xml, fake_gpus, spawn, wait_until, Cluster, ClusterOpts, Daemon,
};

const GPU: &str = "yarn.io/gpu";
/// Work units of the whole job; a step adds WORLD_SIZE units (data parallel), every ~200 ms.
const UNITS: u64 = 800;
const SHRINK_DEADLINE_MS: u64 = 10_000;
/// Everything, in all.
const TEST_LIMIT: Duration = Duration::from_secs(120);

/// The worker. At each (re)start it all-reduces its rank with the others (the
/// `allreduce_worker` binary, `$ALLREDUCE`) and logs one line; then rank 0 counts the job's
/// units (the step adds WORLD_SIZE of them) into `$SPINDLE_CHECKPOINT_DIR/units` after each
/// step, the other ranks follow until the units are done. On SIGTERM every rank exits 0 (rank
/// 0 after saving). Each run appends `rank= world= resize= from= to= how= marker=` to
/// `$WORKER_LOG`.
const WORKER: &str = r#"#!/bin/sh
set -u
dir="$SPINDLE_CHECKPOINT_DIR"
ck="$dir/units"
mkdir -p "$dir/tmp"
echo $$ > "$PID_DIR/$$.pid"
units=0
[ -f "$ck" ] && units=$(cat "$ck")
start=$units
on_term() {
    [ "$RANK" = 0 ] && echo "$units" > "$dir/tmp/units" && mv "$dir/tmp/units" "$ck"
    marker=$(tr '\n' ' ' < "$dir/.spindle-resize" 2>/dev/null || echo none)
    echo "rank=$RANK world=$WORLD_SIZE resize=$SPINDLE_RESIZE_COUNT from=$start to=$units how=sigterm marker=$marker" >> "$WORKER_LOG"
    exit 0
}
trap on_term TERM
sum=$("$ALLREDUCE" | grep 'allreduce sum' | sed 's/.*allreduce sum //')
echo "rank=$RANK world=$WORLD_SIZE resize=$SPINDLE_RESIZE_COUNT allreduce=$sum start=$units" >> "$WORKER_LOG"
while [ "$units" -lt "$UNITS" ]; do
    sleep 0.2 &
    wait $!
    if [ "$RANK" = 0 ]; then
        add=$WORLD_SIZE
        [ $((units + add)) -gt "$UNITS" ] && add=$((UNITS - units))
        units=$((units + add))
        echo "$units" > "$dir/tmp/units" && mv "$dir/tmp/units" "$ck"
        echo "$WORLD_SIZE" > "$dir/tmp/tp" && mv "$dir/tmp/tp" "$dir/.spindle-throughput"
    else
        units=$(cat "$ck" 2>/dev/null || echo 0)
    fi
done
echo "rank=$RANK world=$WORLD_SIZE resize=$SPINDLE_RESIZE_COUNT from=$start to=$units how=done marker=none" >> "$WORKER_LOG"
"#;

fn elastic_cluster(scratch: &Path) -> Cluster {
    let gpus = fake_gpus(scratch, 3);
    let queues = cs_xml(&[
        (
            "resource-calculator",
            "org.apache.hadoop.yarn.util.resource.DominantResourceCalculator",
        ),
        ("maximum-am-resource-percent", "0.5"),
        ("root.queues", "default"),
        ("root.default.capacity", "100"),
        ("root.default.maximum-capacity", "100"),
        ("root.default.user-limit-factor", "1"),
        ("root.default.elastic-policy", "doubling"),
    ]);
    let prop = |k: &str, v: &str| (k.to_string(), v.to_string());
    Cluster::start_with_files(
        ClusterOpts {
            nodes: 4,
            rm_props: vec![
                prop("yarn.resource-types", GPU),
                prop("spindle.elastic.resize-interval-ms", "2000"),
                prop("spindle.elastic.monitoring-interval-ms", "500"),
                prop(
                    "spindle.elastic.shrink-deadline-ms",
                    &SHRINK_DEADLINE_MS.to_string(),
                ),
            ],
            nm_props: vec![
                prop("yarn.nodemanager.resource-plugins", GPU),
                prop(
                    "yarn.nodemanager.resource-plugins.gpu.path-to-discovery-executables",
                    &gpus.display().to_string(),
                ),
                prop("yarn.nodemanager.resource.cpu-vcores", "8"),
            ],
        },
        &[("capacity-scheduler.xml", &queues)],
    )
}

/// When dropped, SIGKILLs every pid in `<pids>/*.pid` and every process whose working
/// directory is under one of `roots` (containers' processes, parked placeholders too).
struct KillAll {
    pids: PathBuf,
    roots: Vec<PathBuf>,
}

impl Drop for KillAll {
    fn drop(&mut self) {
        if let Ok(d) = std::fs::read_dir(&self.pids) {
            for e in d.filter_map(Result::ok) {
                let pid = std::fs::read_to_string(e.path())
                    .ok()
                    .and_then(|t| t.trim().parse::<i32>().ok());
                if let Some(pid) = pid.filter(|p| *p > 1) {
                    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                }
            }
        }
        let me = std::process::id() as i32;
        let Ok(procs) = std::fs::read_dir("/proc") else {
            return;
        };
        for e in procs.filter_map(Result::ok) {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            if pid <= 1 || pid == me {
                continue;
            }
            let Ok(cwd) = std::fs::read_link(e.path().join("cwd")) else {
                continue;
            };
            if self.roots.iter().any(|r| cwd.starts_with(r)) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
    }
}

fn submit_train(c: &Cluster, scratch: &Path, name: &str, args: &[String]) -> Daemon {
    let mut all: Vec<String> = [
        "train",
        "--worker-resources",
        "yarn.io/gpu=1,vcores=1,memory-mb=256",
        "--appname",
        name,
        "--timeout-ms",
        "110000",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    all.extend(args.iter().cloned());
    spawn(
        name,
        &bin("spindle"),
        &all,
        scratch.join(format!("{name}.log")),
        &[
            ("SPINDLE_RM_ADDRESS", c.rm_addr.clone()),
            ("SPINDLE_CONF_DIR", c.conf_dir.display().to_string()),
        ],
    )
}

/// One line of the worker log, as fields.
fn lines(log: &Path) -> Vec<BTreeMap<String, String>> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let (head, marker) = l.split_once(" marker=").unwrap_or((l, ""));
            let mut f: BTreeMap<String, String> = head
                .split_whitespace()
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            if !marker.is_empty() {
                f.insert("marker".into(), marker.trim().to_string());
            }
            f
        })
        .collect()
}

fn num(f: &BTreeMap<String, String>, k: &str) -> u64 {
    f.get(k).and_then(|v| v.parse().ok()).unwrap_or(u64::MAX)
}

fn dump(c: &Cluster, daemons: &[&Daemon], worker_log: &Path) {
    for d in daemons {
        eprintln!("---- {} client ----\n{}", d.name, d.log_text());
        if let Some(app) = app_id_in(&d.log_text()) {
            eprintln!("---- {} AM ----\n{}", d.name, c.am_stdout(&app));
            eprintln!("---- {} app ----\n{}", d.name, c.app(&app));
        }
    }
    eprintln!(
        "---- worker log ----\n{}",
        std::fs::read_to_string(worker_log).unwrap_or_default()
    );
    c.dump_logs();
}

#[test]
fn an_elastic_job_shrinks_for_a_rigid_gang_and_grows_back_without_losing_work() {
    let started = Instant::now();
    let scratch = tempfile::tempdir().expect("tempdir");
    let pids = scratch.path().join("pids");
    std::fs::create_dir_all(&pids).expect("pid dir");
    let worker = scratch.path().join("worker.sh");
    std::fs::write(&worker, WORKER).expect("worker script");
    let ckpt = scratch.path().join("ckpt");
    std::fs::create_dir_all(&ckpt).expect("checkpoint dir");
    let worker_log = scratch.path().join("workers.log");
    let c = elastic_cluster(scratch.path());
    let _guard = KillAll {
        pids: pids.clone(),
        roots: vec![c.dir.path().to_path_buf(), scratch.path().to_path_buf()],
    };
    let deadline = started + TEST_LIMIT;
    let left = || deadline.saturating_duration_since(Instant::now());

    // The elastic job: 2 to 8 workers of 1 GPU.
    let mut args: Vec<String> = [
        "--min-workers",
        "2",
        "--max-workers",
        "8",
        "--throughput",
        "1:318.0;2:576.2;4:1152.4;8:2177.8",
        "--checkpoint-dir",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(ckpt.display().to_string());
    for e in [
        format!("UNITS={UNITS}"),
        format!("WORKER_LOG={}", worker_log.display()),
        format!("PID_DIR={}", pids.display()),
        format!("ALLREDUCE={}", bin("allreduce_worker").display()),
    ] {
        args.push("--env".into());
        args.push(e);
    }
    args.push("--".into());
    args.push("sh".into());
    args.push(worker.display().to_string());
    let mut e = submit_train(&c, scratch.path(), "elastic", &args);
    // Workers started at world size `w` after the first `skip` starts.
    let started_at = |w: &str, skip: usize| {
        lines(&worker_log)
            .iter()
            .filter(|f| f.contains_key("allreduce"))
            .skip(skip)
            .filter(|f| f.get("world").map(String::as_str) == Some(w))
            .count()
    };
    let starts = || {
        lines(&worker_log)
            .iter()
            .filter(|f| f.contains_key("allreduce"))
            .count()
    };
    wait_until("the elastic job at 8 workers", left(), || {
        if !e.is_running() {
            dump(&c, &[&e], &worker_log);
            panic!("the elastic job ended early:\n{}", e.log_text());
        }
        (started_at("8", 0) >= 8).then_some(())
    });
    let starts_at_8 = starts();
    let units_at_8 = std::fs::read_to_string(ckpt.join("units")).unwrap_or_default();
    eprintln!(
        "elastic job at 8 workers after {} ms ({} units done)",
        started.elapsed().as_millis(),
        units_at_8.trim()
    );

    // The rigid gang: 8 workers of 1 GPU, only 4 GPUs free.
    let rigid_args: Vec<String> = ["--workers", "8", "--", "sleep", "5"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut r = submit_train(&c, scratch.path(), "rigid", &rigid_args);
    wait_until("the elastic job shrunk to 4", left(), || {
        if !e.is_running() || !r.is_running() {
            dump(&c, &[&e, &r], &worker_log);
            panic!("a job ended before the shrink");
        }
        (started_at("4", starts_at_8) >= 4).then_some(())
    });
    eprintln!(
        "elastic job shrunk to 4 after {} ms",
        started.elapsed().as_millis()
    );

    // Both finish, and well. Meanwhile, what the RM says of the elastic gang, each change.
    let e_app_id = app_id_in(&e.log_text()).expect("the elastic job's application id");
    let mut seen: Vec<String> = Vec::new();
    let (mut e_code, mut r_code) = (None, None);
    while e_code.is_none() || r_code.is_none() {
        let v = c.app(&e_app_id);
        let now = format!(
            "{} ms: gangs {} diagnostics {} progress {} rigid {}",
            started.elapsed().as_millis(),
            v["gangs"],
            v["diagnostics"],
            v["progress"],
            if r_code.is_some() { "done" } else { "running" }
        );
        if seen.last().map(|l| l.split_once(": ").map(|x| x.1))
            != Some(now.split_once(": ").map(|x| x.1))
        {
            seen.push(now);
        }
        if let Ok(Some(s)) = e.child.try_wait() {
            e_code = Some(s);
        }
        if let Ok(Some(s)) = r.child.try_wait() {
            r_code = Some(s);
        }
        if Instant::now() > deadline {
            dump(&c, &[&e, &r], &worker_log);
            panic!(
                "elastic ({e_code:?}) and rigid ({r_code:?}) did not finish within {TEST_LIMIT:?}"
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if !(e_code.is_some_and(|s| s.success()) && r_code.is_some_and(|s| s.success())) {
        dump(&c, &[&e, &r], &worker_log);
        panic!("elastic: {e_code:?}, rigid: {r_code:?}");
    }
    eprintln!("both done after {} ms", started.elapsed().as_millis());
    eprintln!(
        "---- the RM's word on the elastic gang ----\n{}",
        seen.join("\n")
    );

    let e_app = app_id_in(&e.log_text()).expect("the elastic job's application id");
    let am = c.am_stdout(&e_app);
    eprintln!("---- elastic AM stdout ----\n{am}");
    let view = c.app(&e_app);
    eprintln!("---- elastic app ----\n{view}");
    let rm_log = c.rm.log_text();
    let resizing: Vec<&str> = rm_log
        .lines()
        .filter(|l| {
            let l = l.to_ascii_lowercase();
            l.contains("elastic")
                || l.contains("shrink")
                || l.contains("grow")
                || l.contains("resize")
        })
        .collect();
    eprintln!("---- the RM on resizes ----\n{}", resizing.join("\n"));
    assert_eq!(view["finalStatus"], "SUCCEEDED", "{view}");
    // Grown to 8, shrunk to 4 for the rigid gang, grown back to 8; no restart used.
    // At 8 first: granted at 8 on the idle cluster, or grown to 8 from the minimum.
    let at_8 = am.find("WORLD_SIZE=8").expect("the job ran at 8");
    let shrunk = am
        .find("shrunk 8 -> 4 (deadline in ")
        .expect("shrunk 8 -> 4");
    assert!(at_8 < shrunk, "{am}");
    assert!(
        am[shrunk..].contains("gang workers grown 4 -> 8"),
        "grown back after the rigid gang:\n{am}"
    );
    assert!(!am.contains("restarting the gang"), "{am}");
    // The client tells the resizes as the RM reports them.
    let client = e.log_text();
    assert!(client.contains("gang workers shrunk 8 -> 4"), "{client}");
    assert!(client.contains("gang workers grown 4 -> 8"), "{client}");

    assert!(am.contains("all 8 workers of attempt 1 exited 0"), "{am}");

    // Every start's all-reduce summed its world's ranks; the last resize left 8 workers.
    let all = lines(&worker_log);
    for f in all.iter().filter(|f| f.contains_key("allreduce")) {
        let w = num(f, "world");
        assert_eq!(num(f, "allreduce"), w * (w - 1) / 2, "{f:?}");
    }
    // Workers stopped for a resize saw the marker.
    for f in all
        .iter()
        .filter(|f| f.get("how").map(String::as_str) == Some("sigterm"))
    {
        assert!(
            f.get("marker")
                .is_some_and(|m| m.contains("SPINDLE_RESIZE_TO=")),
            "{f:?}"
        );
    }
    // The work: rank 0's runs cover 0..UNITS without a gap or an overlap.
    let mut runs: Vec<(u64, u64)> = all
        .iter()
        .filter(|f| f.get("rank").map(String::as_str) == Some("0") && f.contains_key("how"))
        .map(|f| (num(f, "from"), num(f, "to")))
        .collect();
    runs.sort();
    let mut at = 0;
    for (from, to) in &runs {
        assert_eq!(*from, at, "rank 0's runs: {runs:?}");
        at = *to;
    }
    assert_eq!(at, UNITS, "rank 0's runs: {runs:?}");
    let total: u64 = runs.iter().map(|(f, t)| t - f).sum();
    assert_eq!(total, UNITS, "the units of a fixed run");
    let saved = std::fs::read_to_string(ckpt.join("units")).expect("checkpoint");
    assert_eq!(saved.trim(), UNITS.to_string());

    // The rigid gang ran to its end.
    let r_app = app_id_in(&r.log_text()).expect("the rigid job's application id");
    assert_eq!(c.app(&r_app)["finalStatus"], "SUCCEEDED");
    assert!(started.elapsed() < TEST_LIMIT);
}
