//! System tests of issue 27's training failures and logs on the real binaries: a rank-1
//! `RuntimeError` after a checkpoint is restarted (no fail-fast), the attached client
//! announces the restart, and when it fails for good the diagnostic quotes rank 1's stderr,
//! not rank 0's knock-on error; `spindle logs -follow -rank 1` streams lines written after it
//! started and ends with the application, `-tail` and `-rank` read finished logs; a detached
//! job killed with `application -kill` leaves no staging directory behind.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use spindle_system_tests::{app_id_in, bin, wait_until, Cluster, ClusterOpts};

const RUN_LIMIT: Duration = Duration::from_secs(120);
const WORKER: &str = "memory-mb=256,vcores=1";

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn cluster(nm_props: Vec<(String, String)>) -> Cluster {
    Cluster::start(ClusterOpts {
        nodes: 2,
        nm_props,
        ..Default::default()
    })
}

#[test]
fn a_rank_1_error_after_a_checkpoint_is_restarted_and_its_traceback_quoted_at_the_end() {
    let c = cluster(vec![]);
    let ckpt = c.dir.path().join("ckpt");
    std::fs::create_dir_all(&ckpt).unwrap();
    let script = c.dir.path().join("train.py");
    // Rank 0 checkpoints; rank 1 waits for the checkpoint, then raises; rank 0 fails later
    // with a knock-on error (as a collective would after its peer died).
    std::fs::write(
        &script,
        "import os, time\n\
         rank = int(os.environ['RANK'])\n\
         d = os.environ['SPINDLE_CHECKPOINT_DIR']\n\
         attempt = os.environ['SPINDLE_GANG_ATTEMPT']\n\
         if rank == 0:\n\
         \x20   open(os.path.join(d, 'ckpt-' + attempt), 'w').write('weights')\n\
         \x20   time.sleep(3)\n\
         \x20   raise ValueError('KNOCK-ON: the peer went away')\n\
         while not os.listdir(d):\n\
         \x20   time.sleep(0.05)\n\
         raise RuntimeError('RANK1-DIVERGED: loss is nan at step 3')\n",
    )
    .unwrap();
    let o = c.spindle_within(
        &[
            "train",
            "--workers",
            "2",
            "--worker-resources",
            WORKER,
            "--max-restarts",
            "1",
            "--checkpoint-dir",
            ckpt.to_str().unwrap(),
            "--",
            "python3",
            script.to_str().unwrap(),
        ],
        RUN_LIMIT,
    );
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    let id = app_id_in(&t).expect("an application id");
    // Restarted, though every worker failed within the fail-fast window: it had checkpointed.
    assert!(
        t.contains("Gang workers restarted: attempt 2 of 2, because worker rank 1 failed"),
        "{t}"
    );
    let app = c.app(&id);
    assert_eq!(app["finalStatus"], "FAILED", "{t}");
    let diag = app["diagnostics"].as_str().unwrap_or_default().to_string();
    assert!(!diag.contains("not restarting"), "{diag}");
    assert!(diag.contains("gave up after 2 gang attempt(s)"), "{diag}");
    assert!(diag.contains("Last lines of rank 1's stderr"), "{diag}");
    assert!(diag.contains("RuntimeError: RANK1-DIVERGED"), "{diag}");
    assert!(!diag.contains("KNOCK-ON"), "{diag}");
    let am = c.am_stdout(&id);
    assert!(am.contains("gang workers attempt 2"), "{am}");
}

/// Waits (bounded) for `path` to hold `needle`; its text.
fn wait_for_text(path: &Path, needle: &str, timeout: Duration) -> String {
    wait_until(
        &format!("'{needle}' in {}", path.display()),
        timeout,
        || {
            let t = std::fs::read_to_string(path).unwrap_or_default();
            t.contains(needle).then_some(t)
        },
    )
}

#[test]
fn logs_follow_streams_a_rank_until_the_application_ends_and_tail_reads_finished_logs() {
    let c = cluster(vec![]);
    let go = c.dir.path().join("go");
    // Each rank ticks every 0.3 s, then waits for the test's go before its last line.
    let script = format!(
        "for i in 1 2 3 4 5; do echo \"tick $i rank $RANK\"; sleep 0.3; done; \
         while [ ! -e {go} ]; do sleep 0.1; done; echo \"after go rank $RANK\"",
        go = go.display()
    );
    let o = c.spindle_within(
        &[
            "train",
            "--detach",
            "--workers",
            "2",
            "--worker-resources",
            WORKER,
            "--",
            "/bin/sh",
            "-c",
            &script,
        ],
        RUN_LIMIT,
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let id = app_id_in(&t).expect("an application id");
    // Follow rank 1 while it runs.
    let log = c.dir.path().join("follow.out");
    let mut follow = Command::new(bin("spindle"))
        .args(["logs", "-applicationId", &id, "-follow", "-rank", "1"])
        .env("SPINDLE_RM_ADDRESS", &c.rm_addr)
        .env("SPINDLE_CONF_DIR", &c.conf_dir)
        .stdout(Stdio::from(std::fs::File::create(&log).unwrap()))
        .stderr(Stdio::null())
        .spawn()
        .expect("spindle logs -follow");
    let seen = wait_for_text(&log, "[rank 1 stdout] tick 5 rank 1", RUN_LIMIT);
    assert!(!seen.contains("after go"), "{seen}");
    // Written only now, after the follow started: it must still come, and the follow end
    // with the application.
    std::fs::write(&go, "").unwrap();
    let deadline = Instant::now() + RUN_LIMIT;
    let status = loop {
        if let Some(s) = follow.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = follow.kill();
            let _ = follow.wait();
            panic!("logs -follow did not end with the application");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "{out}");
    assert!(out.contains("[rank 1 stdout] after go rank 1"), "{out}");
    assert!(!out.contains("[rank 0 stdout]"), "only rank 1: {out}");
    assert!(out.contains("finished with state FINISHED"), "{out}");
    // Finished logs: the last 2 lines of rank 0's stdout.
    let o = c.spindle_within(
        &[
            "logs",
            "-applicationId",
            &id,
            "-rank",
            "0",
            "-tail",
            "2",
            "-log_files",
            "stdout",
        ],
        RUN_LIMIT,
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let lines: Vec<&str> = t
        .lines()
        .filter(|l| l.starts_with("[rank 0 stdout]"))
        .collect();
    assert_eq!(
        lines,
        [
            "[rank 0 stdout] tick 5 rank 0",
            "[rank 0 stdout] after go rank 0"
        ],
        "{t}"
    );
    // Named refusals: a rank that does not exist, an application that does not.
    let o = c.spindle_within(&["logs", "-applicationId", &id, "-rank", "7"], RUN_LIMIT);
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(
        t.contains(&format!(
            "application {id} has no rank 7: its ranks are 0, 1"
        )),
        "{t}"
    );
    let unknown = id
        .rsplit_once('_')
        .map(|(a, _)| format!("{a}_9999"))
        .unwrap();
    let o = c.spindle_within(&["logs", "-applicationId", &unknown, "-follow"], RUN_LIMIT);
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("doesn't exist"), "{t}");
}

/// The staging directory the client named ("Staged ... in DIR").
fn staged_dir(out: &str) -> PathBuf {
    let line = out
        .lines()
        .find(|l| l.starts_with("Staged "))
        .unwrap_or_else(|| panic!("no staging line in:\n{out}"));
    let (_, dir) = line.rsplit_once(" in ").expect("a directory");
    PathBuf::from(dir.trim())
}

#[test]
fn a_killed_detached_job_leaves_no_staging_directory_behind() {
    let staging = tempfile::tempdir().expect("tempdir");
    let root = staging.path().display().to_string();
    let c = cluster(vec![("spindle.client.staging-dir".into(), root.clone())]);
    let src = c.dir.path().join("project");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("train.sh"), "sleep 120\n").unwrap();
    let o = c.spindle_within(
        &[
            "train",
            "--detach",
            "--workers",
            "1",
            "--worker-resources",
            WORKER,
            "--src-dir",
            src.to_str().unwrap(),
            "--staging-dir",
            &root,
            "--",
            "/bin/sh",
            "train.sh",
        ],
        RUN_LIMIT,
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let id = app_id_in(&t).expect("an application id");
    let dir = staged_dir(&t);
    assert!(
        dir.starts_with(staging.path()) && dir.ends_with(&id),
        "{}",
        dir.display()
    );
    c.wait_app_state(&id, &["RUNNING"], RUN_LIMIT);
    assert!(dir.exists(), "staged before the kill: {}", dir.display());
    let k = c.spindle_within(&["application", "-kill", &id], RUN_LIMIT);
    assert!(k.status.success(), "{}", text(&k));
    c.wait_app_state(&id, &["KILLED"], RUN_LIMIT);
    wait_until(
        &format!("the staging directory {} to be removed", dir.display()),
        Duration::from_secs(30),
        || (!dir.exists()).then_some(()),
    );
}
