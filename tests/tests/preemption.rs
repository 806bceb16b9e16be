//! System tests of preemption on the real binaries.
//!
//! 1. A 4-node cluster with fake GPUs (4 per node, 16 in all), queues `a` and `b` at 50/50
//!    (maximum 100, DominantResourceCalculator) and the capacity-preemption monitor on. Queue
//!    `a` fills the cluster with one `spindle train` job of 4 workers x 4 GPUs, whose workers
//!    (`WORKER`, a small shell script) count steps and checkpoint after each one; queue `b`
//!    then submits a gang of 8 GPUs. The monitor takes `a`'s gang back whole; its AM tells the
//!    workers (SIGTERM through their NMs, the deadline in `.spindle-preempted`), they
//!    checkpoint and exit before the kill, `b`'s gang runs within `max_wait_before_kill` and a
//!    few seconds, and when `b` is done `a` resumes from its checkpoint and completes having
//!    counted exactly the steps of an unpreempted run.
//! 2. `POST /ws/v1/node/containers/signal` on a real NM: SIGTERM without a SIGKILL after it
//!    (the container exits in its own time, with its own status), SIGQUIT, SIGKILL, and the
//!    refusals.
//!
//! Every process is killed by pid when a test ends (the daemons by their `Daemon` guards, the
//! workers by the pids they write).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use reqwest::Method;
use serde_json::{json, Value};
use spindle_system_tests::{
    app_id_in, bin, cs_xml, fake_gpus, spawn, wait_until, Cluster, ClusterOpts, Daemon,
};

const GPU: &str = "yarn.io/gpu";
/// Steps every worker counts (one per ~200 ms).
const STEPS: u64 = 60;
/// Queue a's job: workers of 4 GPUs each, the whole cluster.
const WORKERS: u32 = 4;
const MAX_WAIT_BEFORE_KILL_MS: u64 = 10_000;
/// Everything the first test waits for, in all; it takes about 30 s.
const TEST_LIMIT: Duration = Duration::from_secs(110);

/// The worker: resumes from `$SPINDLE_CHECKPOINT_DIR/rank-$RANK`, counts `$STEPS` steps of
/// ~200 ms, checkpointing after each (rank 0 also writes the step to `.spindle-step` for the
/// AM's report); on SIGTERM it checkpoints and exits 0. Each run appends one line to
/// `$WORKER_LOG`: `rank= attempt= from= to= how=sigterm|done marker=<.spindle-preempted>`.
const WORKER: &str = r#"#!/bin/sh
set -u
dir="$SPINDLE_CHECKPOINT_DIR"
ck="$dir/rank-$RANK"
mkdir -p "$dir/tmp"
echo $$ > "$PID_DIR/$$.pid"
step=0
[ -f "$ck" ] && step=$(cat "$ck")
start=$step
save() {
    echo "$step" > "$dir/tmp/rank-$RANK" && mv "$dir/tmp/rank-$RANK" "$ck"
    if [ "$RANK" = 0 ]; then
        echo "$step" > "$dir/tmp/step" && mv "$dir/tmp/step" "$dir/.spindle-step"
    fi
}
on_term() {
    save
    marker=$(cat "$dir/.spindle-preempted" 2>/dev/null || echo none)
    echo "rank=$RANK attempt=$SPINDLE_GANG_ATTEMPT from=$start to=$step how=sigterm marker=$marker" >> "$WORKER_LOG"
    echo "SIGTERM at step $step: checkpointed"
    exit 0
}
trap on_term TERM
echo "rank $RANK of attempt $SPINDLE_GANG_ATTEMPT resumes at step $step"
while [ "$step" -lt "$STEPS" ]; do
    sleep 0.2 &
    wait $!
    step=$((step + 1))
    save
done
echo "rank=$RANK attempt=$SPINDLE_GANG_ATTEMPT from=$start to=$step how=done marker=none" >> "$WORKER_LOG"
"#;

fn preemption_cluster(scratch: &Path) -> Cluster {
    let gpus = fake_gpus(scratch, 4);
    let queues = cs_xml(&[
        (
            "resource-calculator",
            "org.apache.hadoop.yarn.util.resource.DominantResourceCalculator",
        ),
        ("maximum-am-resource-percent", "0.5"),
        ("root.queues", "a,b"),
        ("root.a.capacity", "50"),
        ("root.b.capacity", "50"),
        ("root.a.maximum-capacity", "100"),
        ("root.b.maximum-capacity", "100"),
        // One user may use the whole cluster (twice its queue's guarantee).
        ("root.a.user-limit-factor", "2"),
        ("root.b.user-limit-factor", "2"),
    ]);
    let prop = |k: &str, v: &str| (k.to_string(), v.to_string());
    let mon = "yarn.resourcemanager.monitor.capacity.preemption.";
    Cluster::start_with_files(
        ClusterOpts {
            nodes: 4,
            rm_props: vec![
                prop("yarn.resource-types", GPU),
                prop("yarn.resourcemanager.scheduler.monitor.enable", "true"),
                prop(&format!("{mon}monitoring_interval"), "500"),
                prop(
                    &format!("{mon}max_wait_before_kill"),
                    &MAX_WAIT_BEFORE_KILL_MS.to_string(),
                ),
                prop("spindle.preemption.min-runtime-ms", "0"),
            ],
            nm_props: vec![
                prop("yarn.nodemanager.resource-plugins", GPU),
                prop(
                    "yarn.nodemanager.resource-plugins.gpu.path-to-discovery-executables",
                    &gpus.display().to_string(),
                ),
                // Room for a node's workers and the AMs.
                prop("yarn.nodemanager.resource.cpu-vcores", "8"),
            ],
        },
        &[("capacity-scheduler.xml", &queues)],
    )
}

/// SIGKILLs every pid named in `<dir>/*.pid` still alive: workers must not outlive the test.
struct KillPids(PathBuf);

impl Drop for KillPids {
    fn drop(&mut self) {
        let Ok(d) = std::fs::read_dir(&self.0) else {
            return;
        };
        for e in d.filter_map(Result::ok) {
            let pid = std::fs::read_to_string(e.path())
                .ok()
                .and_then(|t| t.trim().parse::<i32>().ok());
            if let Some(pid) = pid.filter(|p| *p > 1) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
    }
}

/// `spindle train` (named and into the queue `name`) with `workers` x 4 GPUs and the `extra`
/// options, following the job to its end.
fn submit_train(
    c: &Cluster,
    scratch: &Path,
    name: &str,
    workers: &str,
    extra: &[String],
    command: &[&str],
) -> Daemon {
    let mut args: Vec<String> = [
        "train",
        "--workers",
        workers,
        "--worker-resources",
        "yarn.io/gpu=4,vcores=1,memory-mb=256",
        "--queue",
        name,
        "--appname",
        name,
        "--timeout-ms",
        "100000",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().cloned());
    args.push("--".into());
    args.extend(command.iter().map(|s| s.to_string()));
    spawn(
        name,
        &bin("spindle"),
        &args,
        scratch.join(format!("{name}.log")),
        &[
            ("SPINDLE_RM_ADDRESS", c.rm_addr.clone()),
            ("SPINDLE_CONF_DIR", c.conf_dir.display().to_string()),
        ],
    )
}

/// One line of a worker log.
#[derive(Debug, Clone)]
struct Run {
    rank: u32,
    attempt: u32,
    from: u64,
    to: u64,
    how: String,
    marker: String,
}

fn runs(log: &Path) -> Vec<Run> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .map(|l| {
            let f: BTreeMap<&str, &str> = l
                .split_whitespace()
                .filter_map(|kv| kv.split_once('='))
                .collect();
            let num = |k: &str| {
                f.get(k)
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(u64::MAX)
            };
            Run {
                rank: num("rank") as u32,
                attempt: num("attempt") as u32,
                from: num("from"),
                to: num("to"),
                how: f.get("how").copied().unwrap_or_default().to_string(),
                // The marker's line is `SPINDLE_PREEMPT_DEADLINE_MS=<ms>`: after `marker=`.
                marker: l.split_once("marker=").map_or("", |(_, m)| m).to_string(),
            }
        })
        .collect()
}

/// The lowest step the job's `WORKERS` ranks have checkpointed so far.
fn progress(ckpt: &Path) -> u64 {
    (0..WORKERS)
        .map(|r| {
            std::fs::read_to_string(ckpt.join(format!("rank-{r}")))
                .ok()
                .and_then(|t| t.trim().parse().ok())
                .unwrap_or(0)
        })
        .min()
        .unwrap_or(0)
}

fn dump(c: &Cluster, a: &Daemon, b: &Daemon, worker_log: &Path) {
    for (name, d) in [("a", a), ("b", b)] {
        eprintln!("---- {name} client ----\n{}", d.log_text());
        if let Some(app) = app_id_in(&d.log_text()) {
            eprintln!("---- {name} AM ----\n{}", c.am_stdout(&app));
            eprintln!("---- {name} app ----\n{}", c.app(&app));
        }
    }
    eprintln!(
        "---- a's worker log ----\n{}",
        std::fs::read_to_string(worker_log).unwrap_or_default()
    );
    c.dump_logs();
}

#[test]
fn a_gang_preempted_for_another_queue_checkpoints_and_resumes_where_it_left_off() {
    let started = Instant::now();
    let scratch = tempfile::tempdir().expect("tempdir");
    let pids = scratch.path().join("pids");
    std::fs::create_dir_all(&pids).expect("pid dir");
    let _guard = KillPids(pids.clone());
    let worker = scratch.path().join("worker.sh");
    std::fs::write(&worker, WORKER).expect("worker script");
    let ckpt = scratch.path().join("ckpt");
    std::fs::create_dir_all(&ckpt).expect("checkpoint dir");
    let worker_log = scratch.path().join("steps.log");
    let c = preemption_cluster(scratch.path());

    // Queue a fills the cluster: one job of 4 workers x 4 GPUs.
    let mut extra = vec!["--checkpoint-dir".to_string(), ckpt.display().to_string()];
    for e in [
        format!("STEPS={STEPS}"),
        format!("WORKER_LOG={}", worker_log.display()),
        format!("PID_DIR={}", pids.display()),
    ] {
        extra.push("--env".into());
        extra.push(e);
    }
    let mut a = submit_train(
        &c,
        scratch.path(),
        "a",
        &WORKERS.to_string(),
        &extra,
        &["sh", worker.to_str().expect("utf-8 path")],
    );
    wait_until(
        "a's workers to count steps",
        Duration::from_secs(40),
        || {
            if !a.is_running() {
                panic!("a ended early:\n{}", a.log_text());
            }
            (progress(&ckpt) >= 3).then_some(())
        },
    );
    let before = progress(&ckpt);
    assert!(before < STEPS / 2, "a ran too far before b came: {before}");

    // Queue b, below its guarantee, asks for 8 GPUs as one gang.
    let b_submitted = Instant::now();
    let mut b = submit_train(&c, scratch.path(), "b", "2", &[], &["sleep", "4"]);
    let b_app = wait_until("b's application id", Duration::from_secs(20), || {
        app_id_in(&b.log_text())
    });
    let limit = Duration::from_millis(MAX_WAIT_BEFORE_KILL_MS) + Duration::from_secs(8);
    let b_running = wait_until("b's gang to run", limit, || {
        if !b.is_running() {
            dump(&c, &a, &b, &worker_log);
            panic!("b ended before its gang ran:\n{}", b.log_text());
        }
        let v = c.app(&b_app);
        let gang_ran = v["gangs"]
            .as_array()
            .and_then(|g| g.first())
            .is_some_and(|g| g["state"] == "ALLOCATED");
        (gang_ran && v["runningContainers"].as_i64() == Some(3)).then(|| b_submitted.elapsed())
    });
    eprintln!(
        "b's gang runs {} ms after its submission",
        b_running.as_millis()
    );

    // Both finish, and well.
    let deadline = started + TEST_LIMIT;
    let (mut a_code, mut b_code) = (None, None);
    while a_code.is_none() || b_code.is_none() {
        if let Ok(Some(s)) = a.child.try_wait() {
            a_code = Some(s);
        }
        if let Ok(Some(s)) = b.child.try_wait() {
            b_code = Some(s);
        }
        if Instant::now() > deadline {
            dump(&c, &a, &b, &worker_log);
            panic!("a ({a_code:?}) and b ({b_code:?}) did not finish within {TEST_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if !(a_code.is_some_and(|s| s.success()) && b_code.is_some_and(|s| s.success())) {
        dump(&c, &a, &b, &worker_log);
        panic!("a: {a_code:?}, b: {b_code:?}");
    }
    assert_eq!(c.app(&b_app)["finalStatus"], "SUCCEEDED");

    // a's gang was preempted once, whole; its workers exited before the kill.
    let a_app = app_id_in(&a.log_text()).expect("a's application id");
    let view = c.app(&a_app);
    let am = c.am_stdout(&a_app);
    eprintln!("---- a's AM stdout ----\n{am}");
    assert_eq!(view["finalStatus"], "SUCCEEDED", "{view}");
    let p = &view["preemption"];
    assert_eq!(p["preemptions"], 1, "{view}");
    assert_eq!(view["numNonAMContainerPreempted"], WORKERS, "{view}");
    assert_eq!(view["numAMContainerPreempted"], 0, "{view}");
    assert_eq!(p["containersUnderNotice"], 0, "{view}");
    let to_exit = p["lastNoticeToExitMs"]
        .as_u64()
        .expect("lastNoticeToExitMs");
    assert!(
        to_exit < MAX_WAIT_BEFORE_KILL_MS,
        "the workers exited {to_exit} ms after the notice: {view}"
    );
    assert!(
        p["lastCheckpoint"]["time"].as_u64().unwrap_or(0) > 0,
        "{view}"
    );
    assert!(p["lastCheckpoint"]["step"].as_u64().is_some(), "{view}");
    for want in [
        "preempted (deadline in ",
        "asked workers to checkpoint and exit",
        "with exit status -102",
        "ms after the notice; asking for the gang again",
        "gang workers attempt 2: asking for 4 workers",
        "all 4 workers of attempt 2 exited 0",
    ] {
        assert!(am.contains(want), "a's AM stdout lacks {want:?}:\n{am}");
    }
    // Each worker's completion: it exited before its deadline, nothing was killed there.
    assert_eq!(
        am.matches("before its deadline").count(),
        WORKERS as usize,
        "{am}"
    );
    assert!(!am.contains("killed at its deadline"), "{am}");
    assert!(!am.contains("restarting the gang"), "{am}");
    // The attached client announced it: by whom, and from which checkpoint it resumes.
    assert_eq!(
        p["lastPreemptedBy"]["applicationId"],
        b_app.as_str(),
        "{view}"
    );
    let queue = p["lastPreemptedBy"]["queue"].as_str().unwrap_or_default();
    assert!(queue.ends_with('b'), "{view}");
    let client = a.log_text();
    assert!(
        client.contains("Gang workers preempted in gang attempt 1; resuming from checkpoint"),
        "{client}"
    );
    assert!(
        client.contains(&format!("(taken for {b_app} in queue {queue})")),
        "{client}"
    );

    // Each worker: SIGTERM'd in attempt 1 with the marker there, resumed in attempt 2
    // exactly where it stopped, STEPS steps in all: what an unpreempted run counts.
    let all = runs(&worker_log);
    for rank in 0..WORKERS {
        let mine: Vec<&Run> = all.iter().filter(|r| r.rank == rank).collect();
        assert_eq!(mine.len(), 2, "rank {rank}: {all:?}");
        let (first, second) = (mine[0], mine[1]);
        assert_eq!(
            (first.attempt, first.how.as_str()),
            (1, "sigterm"),
            "{all:?}"
        );
        let marked = first
            .marker
            .strip_prefix("SPINDLE_PREEMPT_DEADLINE_MS=")
            .and_then(|ms| ms.parse::<u64>().ok());
        assert!(marked.is_some_and(|ms| ms > 0), "the marker: {all:?}");
        assert!(first.to > 0 && first.to < STEPS, "{all:?}");
        assert_eq!(
            (second.attempt, second.from, second.to, second.how.as_str()),
            (2, first.to, STEPS, "done"),
            "{all:?}"
        );
        let total: u64 = mine.iter().map(|r| r.to - r.from).sum();
        assert_eq!(total, STEPS, "rank {rank}: {all:?}");
        let saved = std::fs::read_to_string(ckpt.join(format!("rank-{rank}"))).expect("checkpoint");
        assert_eq!(saved.trim(), STEPS.to_string());
    }
    assert!(
        !ckpt.join(".spindle-preempted").exists(),
        "the marker is removed before the restart"
    );

    // The CLI's report says so.
    let out = c.spindle(&["application", "-status", &a_app]);
    let status = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{status}");
    assert!(status.contains("\tPreemptions : 1 ("), "{status}");
    assert!(status.contains("\tLast Checkpoint : "), "{status}");
    assert!(
        started.elapsed() < TEST_LIMIT,
        "took {:?}",
        started.elapsed()
    );
}

// --------------------------------------------------------------------- the NM's signal call

/// A signal as the container's AM sends it, with a container token of its application
/// (for a body naming no valid container, one of an application of its own).
fn signal(c: &Cluster, nm: &str, body: &Value) -> (u16, Value) {
    let named = body["containerId"]
        .as_str()
        .filter(|s| s.parse::<spindle_common::ids::ContainerId>().is_ok())
        .unwrap_or("container_1_0001_01_000001");
    let r = c
        .http
        .request(
            Method::POST,
            format!("http://{nm}/ws/v1/node/containers/signal"),
        )
        .header("authorization", c.container_bearer(named, nm))
        .json(body)
        .send()
        .expect("signal");
    let s = r.status().as_u16();
    (s, r.json().unwrap_or(Value::Null))
}

#[test]
fn the_nm_signals_a_container_without_stopping_it() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let c = Cluster::start(ClusterOpts {
        nodes: 1,
        ..Default::default()
    });
    // Two workers that exit 7 a second after SIGTERM (past the NM's SIGKILL delay for a
    // stop), say so on SIGQUIT (bash ignores it otherwise), and else loop.
    let cmd = "trap 'sleep 1; echo got-term; exit 7' TERM; trap 'echo got-quit' QUIT; \
               echo ready; while :; do sleep 0.1; done";
    let args: Vec<String> = [
        "distributed-shell",
        "--num-containers",
        "2",
        "--container-resources",
        "memory-mb=128,vcores=1",
        "--shell-command",
        cmd,
        "--rm-address",
        c.rm_addr.as_str(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let _ds = spawn(
        "ds",
        &bin("spindle"),
        &args,
        scratch.path().join("ds.log"),
        &[],
    );
    let nm = c.nm_addrs[0].clone();
    // Running, with their traps set.
    let workers: Vec<String> = wait_until("two ready workers", Duration::from_secs(40), || {
        let (_, v) = c.get("/ws/v1/cluster/apps?states=RUNNING");
        let app = v["apps"]["app"].as_array()?.first()?["id"]
            .as_str()?
            .to_string();
        let ids: Vec<String> = c
            .containers_of(&app)
            .iter()
            .filter_map(|x| x["containerId"].as_str().map(str::to_string))
            .filter(|id| !id.ends_with("_000001"))
            .filter(|id| c.container_log(&nm, id, "stdout").contains("ready"))
            .collect();
        (ids.len() == 2).then_some(ids)
    });
    let send = |cid: &str, command: &str| {
        signal(&c, &nm, &json!({"containerId": cid, "command": command}))
    };
    let signalled = |v: &Value, cid: &str| {
        v["successfullySignaledContainers"] == json!([cid]) && v["failedRequests"] == json!([])
    };

    // SIGTERM: the trap runs to its end (no SIGKILL comes) and its status is the container's.
    let (s, v) = send(&workers[0], "GRACEFUL_SHUTDOWN");
    assert!(s == 200 && signalled(&v, &workers[0]), "{s} {v}");
    let graceful = wait_until(
        "the SIGTERM'd worker to exit",
        Duration::from_secs(20),
        || {
            let st = c.nm_container_state(&nm, &workers[0]);
            (st.0 != "RUNNING").then_some(st)
        },
    );
    assert_eq!(graceful.1, 7, "{graceful:?}");
    let log = c.container_log(&nm, &workers[0], "stdout");
    assert!(log.contains("got-term"), "{log}");
    // A container with no process left is refused (while its application still runs).
    let (s, v) = send(&workers[0], "FORCEFUL_SHUTDOWN");
    assert_eq!(s, 200, "{v}");
    let msg = v["failedRequests"][0]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(msg.contains("is not running"), "{v}");

    // SIGQUIT reaches the worker (its trap runs) and it runs on; SIGKILL then ends it.
    let (s, v) = send(&workers[1], "OUTPUT_THREAD_DUMP");
    assert!(s == 200 && signalled(&v, &workers[1]), "{s} {v}");
    wait_until("the SIGQUIT trap's line", Duration::from_secs(20), || {
        c.container_log(&nm, &workers[1], "stdout")
            .contains("got-quit")
            .then_some(())
    });
    assert_eq!(c.nm_container_state(&nm, &workers[1]).0, "RUNNING");
    let (s, v) = send(&workers[1], "FORCEFUL_SHUTDOWN");
    assert!(s == 200 && signalled(&v, &workers[1]), "{s} {v}");
    let killed = wait_until(
        "the SIGKILL'd worker to end",
        Duration::from_secs(20),
        || {
            let st = c.nm_container_state(&nm, &workers[1]);
            (st.0 != "RUNNING").then_some(st)
        },
    );
    assert_eq!(killed.1, 128 + 9, "{killed:?}");

    // Refusals: an unknown container as a stop refuses it; unreadable bodies.
    let unknown = "container_1_0001_01_000099";
    let (s, v) = send(unknown, "GRACEFUL_SHUTDOWN");
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        v["failedRequests"][0]["message"],
        format!("Container {unknown} is not handled by this NodeManager"),
        "{v}"
    );
    for bad in [
        json!({"containerId": workers[0], "command": "PAUSE"}),
        json!({"containerId": "x", "command": "GRACEFUL_SHUTDOWN"}),
        json!({"containerId": workers[0]}),
    ] {
        let (s, v) = signal(&c, &nm, &bad);
        assert_eq!(s, 400, "{bad}: {v}");
        assert!(v["RemoteException"].is_object(), "{v}");
    }
}
