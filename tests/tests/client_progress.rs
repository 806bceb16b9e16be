//! System tests of what the `spindle train` and `spindle distributed-shell` clients tell the
//! user, on the real binaries: `--detach` returns at once and leaves the application
//! running; a gang that cannot fit yet says why, once; Ctrl-C (SIGINT) on the client kills
//! the application; `--follow` streams rank 0's (the shell's first container's) stdout and
//! stderr, prefixed; and the end summary lists every rank with its exit status.

use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use spindle_system_tests::{
    app_id_in, bin, cs_xml, fake_gpus, spawn, wait_until, Cluster, ClusterOpts, Daemon,
};

const GPU: &str = "yarn.io/gpu";
const GPU_WORKER: &str = "yarn.io/gpu=1,vcores=1,memory-mb=256";
const RUN_LIMIT: Duration = Duration::from_secs(120);

/// Two NMs with 4 fake GPUs each; AMs may take half of the queue, so that two applications
/// run at once.
fn gpu_cluster(scratch: &Path) -> Cluster {
    let gpus = fake_gpus(scratch, 4);
    Cluster::start_with_files(
        ClusterOpts {
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
        },
        &[(
            "capacity-scheduler.xml",
            &cs_xml(&[("maximum-am-resource-percent", "0.5")]),
        )],
    )
}

fn client(c: &Cluster, scratch: &Path, name: &str, args: &[&str]) -> Daemon {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
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

/// Waits for the client to exit; its exit code (None: killed by a signal).
fn wait_exit(c: &Cluster, d: &mut Daemon, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(Some(s)) = d.child.try_wait() {
            return s.code();
        }
        if Instant::now() > deadline {
            c.dump_logs();
            panic!("{} did not end within {limit:?}:\n{}", d.name, d.log_text());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The lines of the exit summary table after `title`: (index, container, node, state, exit).
fn summary_rows(out: &str, title: &str) -> Vec<(u32, String, String, String, String)> {
    let Some((_, after)) = out.split_once(title) else {
        return Vec::new();
    };
    after
        .lines()
        .skip(2) // the rest of the title line, the header
        .map_while(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let index = w.first()?.parse().ok()?;
            (w.len() >= 5 && l.starts_with("  ")).then(|| {
                (
                    index,
                    w[1].to_string(),
                    w[2].to_string(),
                    w[3].to_string(),
                    w[4..].join(" "),
                )
            })
        })
        .collect()
}

#[test]
fn detach_then_a_waiting_gang_says_why_once_and_ctrl_c_kills_it() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let c = gpu_cluster(scratch.path());

    // A gang of 4 sleeping workers, detached: the client returns at once.
    let started = Instant::now();
    let out = c.spindle_within(
        &[
            "train",
            "--workers",
            "4",
            "--worker-resources",
            GPU_WORKER,
            "--detach",
            "--",
            "sleep",
            "300",
        ],
        Duration::from_secs(60),
    );
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(took < Duration::from_secs(20), "--detach took {took:?}");
    let holder = app_id_in(&stdout).expect("the application id");
    for want in [
        "; detached, it keeps running.".to_string(),
        format!("spindle application -status {holder}"),
        format!("spindle application -kill {holder}"),
        format!("spindle logs -applicationId {holder}"),
    ] {
        assert!(stdout.contains(&want), "lacks {want:?}:\n{stdout}");
    }
    // It runs on without its client: its AM and 4 workers.
    wait_until("the detached gang to run", Duration::from_secs(60), || {
        let a = c.app(&holder);
        (a["state"] == "RUNNING" && a["runningContainers"].as_i64() == Some(5)).then_some(())
    });

    // 6 GPUs of the 4 left: the gang waits and says why, once.
    let mut waiting = client(
        &c,
        scratch.path(),
        "waiting",
        &[
            "train",
            "--workers",
            "6",
            "--worker-resources",
            GPU_WORKER,
            "--gang-timeout-ms",
            "300000",
            "--follow",
            "--",
            "true",
        ],
    );
    wait_until("the waiting reason", Duration::from_secs(60), || {
        if !waiting.is_running() {
            panic!("the waiting client ended:\n{}", waiting.log_text());
        }
        waiting.log_text().contains("needs 6 GPUs").then_some(())
    });
    // Some 15 more looks at the application; nothing new to say.
    std::thread::sleep(Duration::from_secs(3));
    let log = waiting.log_text();
    let app = app_id_in(&log).expect("the waiting application's id");
    assert_eq!(c.app(&app)["state"], "RUNNING", "{log}");
    let reasons: Vec<&str> = log.lines().filter(|l| l.starts_with("Waiting: ")).collect();
    assert!(
        reasons
            .iter()
            .any(|l| l.contains("gang workers is") && l.contains("needs 6 GPUs")),
        "{log}"
    );
    assert!(
        reasons.windows(2).all(|w| w[0] != w[1]),
        "a reason repeated:\n{log}"
    );
    assert!(
        reasons.len() <= 3,
        "the reason is told again and again:\n{log}"
    );
    let progress: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with("Gang workers:"))
        .collect();
    assert_eq!(progress, ["Gang workers: 0 of 6 granted"], "{log}");

    // Ctrl-C: the client kills the application, says so, and exits non-zero.
    waiting.signal(Signal::SIGINT);
    let code = wait_exit(&c, &mut waiting, Duration::from_secs(45));
    let log = waiting.log_text();
    eprintln!("---- the interrupted client ----\n{log}");
    assert_eq!(code, Some(130), "{log}");
    assert!(
        log.contains(&format!("Killing application {app}: interrupted")),
        "{log}"
    );
    assert!(log.contains(&format!("Killed application {app}")), "{log}");
    c.wait_app_state(&app, &["KILLED"], Duration::from_secs(30));

    // The detached gang ran on all along.
    assert_eq!(c.app(&holder)["state"], "RUNNING");
    let out = c.spindle_within(&["application", "-kill", &holder], Duration::from_secs(60));
    assert!(out.status.success(), "{out:?}");
    c.wait_app_state(&holder, &["KILLED"], Duration::from_secs(30));
}

#[test]
fn follow_streams_the_first_worker_and_the_summary_lists_every_rank() {
    let c = Cluster::start(ClusterOpts {
        nodes: 2,
        ..Default::default()
    });

    // Rank 0 writes to stdout and stderr, some of it a second later; rank 2 fails.
    let script = "echo \"first line of rank $RANK\"; echo \"complaint of rank $RANK\" >&2; \
                  sleep 1; echo \"late line of rank $RANK\"; \
                  if [ \"$RANK\" = 2 ]; then sleep 2; exit 3; fi";
    let out = c.spindle_within(
        &[
            "train",
            "--workers",
            "3",
            "--worker-resources",
            "vcores=1,memory-mb=256",
            "--max-restarts",
            "0",
            "--follow",
            "--",
            "bash",
            "-c",
            script,
        ],
        RUN_LIMIT,
    );
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let app = app_id_in(&stdout).unwrap_or_default();
    if out.status.code() != Some(2) {
        eprintln!("---- AM stdout ----\n{}", c.am_stdout(&app));
        c.dump_logs();
    }
    assert_eq!(
        out.status.code(),
        Some(2),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        "[rank 0 stdout] first line of rank 0",
        "[rank 0 stderr] complaint of rank 0",
        "[rank 0 stdout] late line of rank 0",
        "Gang workers: 3 of 3 granted",
    ] {
        assert!(stdout.contains(want), "lacks {want:?}:\n{stdout}");
    }
    // Only rank 0 is followed (rank 2's stderr may be quoted in the final diagnostics).
    let followed: Vec<&str> = stdout.lines().filter(|l| l.starts_with('[')).collect();
    assert_eq!(followed.len(), 3, "{stdout}");
    assert!(
        followed.iter().all(|l| l.ends_with("of rank 0")),
        "{stdout}"
    );
    let late = stdout.find("late line of rank 0").expect("the late line");
    let summary = stdout
        .find("Ranks of gang attempt 1:")
        .expect("the summary");
    assert!(late < summary, "{stdout}");
    let rows = summary_rows(&stdout, "Ranks of gang attempt 1:");
    assert_eq!(
        rows.iter().map(|r| r.0).collect::<Vec<_>>(),
        [0, 1, 2],
        "{stdout}"
    );
    for (rank, container, node, state, exit) in &rows {
        assert!(container.starts_with("container_"), "{stdout}");
        assert!(node.contains(':'), "{stdout}");
        assert_eq!(state, "COMPLETE", "{stdout}");
        let want = if *rank == 2 { "3" } else { "0" };
        assert_eq!(exit, want, "rank {rank}:\n{stdout}");
    }
    // Rank 0's container is the one whose output was followed.
    let rank0 = &rows[0];
    assert!(
        stdout.contains(&format!("Following rank 0: container {}", rank0.1)),
        "{stdout}"
    );
    assert!(stdout.contains("final status FAILED"), "{stdout}");

    // The distributed shell: its first container is followed, every container summarized.
    let out = c.spindle_within(
        &[
            "distributed-shell",
            "--num-containers",
            "2",
            "--shell-command",
            "echo \"hello from $CONTAINER_ID\"; echo trouble >&2",
            "--follow",
        ],
        RUN_LIMIT,
    );
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = summary_rows(&stdout, "Tasks:");
    assert_eq!(rows.len(), 2, "{stdout}");
    for (i, (index, _, _, state, exit)) in rows.iter().enumerate() {
        assert_eq!(
            (*index as usize, state.as_str(), exit.as_str()),
            (i, "COMPLETE", "0")
        );
    }
    let first = &rows[0].1;
    for want in [
        format!("[task 0 stdout] hello from {first}"),
        "[task 0 stderr] trouble".to_string(),
        "Containers: 2 granted".to_string(),
    ] {
        assert!(stdout.contains(&want), "lacks {want:?}:\n{stdout}");
    }
    assert!(
        !stdout.contains(&format!("hello from {}", rows[1].1)),
        "{stdout}"
    );

    // stdout is not a terminal here: without --follow nothing is streamed, the rest is told.
    let out = c.spindle_within(
        &[
            "distributed-shell",
            "--num-containers",
            "1",
            "--shell-command",
            "echo quiet",
        ],
        RUN_LIMIT,
    );
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{stdout}");
    assert!(!stdout.contains("quiet"), "{stdout}");
    assert_eq!(summary_rows(&stdout, "Tasks:").len(), 1, "{stdout}");
}
