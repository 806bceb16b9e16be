//! Work-preserving RM restart, end to end: the RM is killed (SIGKILL) while a distributed
//! shell's workers run; a new RM on the same state store takes the running work back as the
//! NMs re-register, the AM registers again, and the application finishes with its first
//! attempt and without any worker run twice.

use std::process::{Command, Stdio};
use std::time::Duration;

use nix::sys::signal::Signal;
use spindle_system_tests::{bin, wait_until, Cluster, ClusterOpts};

#[test]
fn an_rm_crash_loses_no_running_work() {
    let mut c = Cluster::start(ClusterOpts {
        nodes: 2,
        ..Default::default()
    });
    let marks = tempfile::tempdir().expect("tempdir");
    let ran = marks.path().join("ran");
    let logs = tempfile::tempdir().expect("tempdir");
    let out_path = logs.path().join("client.out");
    let out = std::fs::File::create(&out_path).expect("client log");
    let mut client = Command::new(bin("spindle"))
        .args([
            "distributed-shell",
            "--num-containers",
            "3",
            "--container-resources",
            "memory-mb=256,vcores=1",
            "--shell-command",
            &format!("echo $CONTAINER_ID >> {}; sleep 6", ran.display()),
        ])
        .env("SPINDLE_RM_ADDRESS", &c.rm_addr)
        .env("SPINDLE_CONF_DIR", &c.conf_dir)
        .stdout(Stdio::from(out.try_clone().expect("clone")))
        .stderr(Stdio::from(out))
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn the client");
    // Every worker is running.
    wait_until("3 workers to run", Duration::from_secs(60), || {
        let n = std::fs::read_to_string(&ran)
            .unwrap_or_default()
            .lines()
            .count();
        (n >= 3).then_some(())
    });
    let (_, apps) = c.get("/ws/v1/cluster/apps");
    let id = apps["apps"]["app"][0]["id"]
        .as_str()
        .expect("one application")
        .to_string();

    c.restart_rm_after(Signal::SIGKILL);

    let app = c.wait_app_state(
        &id,
        &["FINISHED", "FAILED", "KILLED"],
        Duration::from_secs(90),
    );
    let status = client.wait().expect("client exit");
    let text = std::fs::read_to_string(&out_path).unwrap_or_default();
    if app["finalStatus"] != "SUCCEEDED" {
        c.dump_logs();
    }
    assert_eq!(app["finalStatus"], "SUCCEEDED", "{app:#}\nclient:\n{text}");
    assert!(status.success(), "client: {text}");
    let (_, atts) = c.get(&format!("/ws/v1/cluster/apps/{id}/appattempts"));
    let atts = atts["appAttempts"]["appAttempt"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(atts.len(), 1, "the first attempt carried on: {atts:#?}");
    let runs = std::fs::read_to_string(&ran).unwrap_or_default();
    assert_eq!(runs.lines().count(), 3, "no worker ran twice: {runs}");
    let rm_log = std::fs::read_dir(c.dir.path())
        .expect("cluster dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("rm-restart"))
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .collect::<String>();
    assert!(rm_log.contains("recovered 1 applications"), "{rm_log}");
}

/// The same for a training gang: the RM dies while `spindle train`'s 4 workers run; the new
/// RM takes the gang back, the training AM registers again, and the job finishes SUCCEEDED
/// with its first attempt and its first gang attempt.
#[test]
fn an_rm_crash_does_not_restart_a_running_training_gang() {
    let mut c = Cluster::start(ClusterOpts {
        nodes: 2,
        ..Default::default()
    });
    let marks = tempfile::tempdir().expect("tempdir");
    let ran = marks.path().join("ran");
    let logs = tempfile::tempdir().expect("tempdir");
    let out_path = logs.path().join("train.out");
    let out = std::fs::File::create(&out_path).expect("train log");
    let script = format!("echo $RANK >> {}; sleep 6", ran.display());
    let mut train = Command::new(bin("spindle"))
        .args([
            "train",
            "--workers",
            "4",
            "--worker-resources",
            "vcores=1,memory-mb=256",
            "--max-restarts",
            "2",
            "--timeout-ms",
            "120000",
            "--",
            "/bin/sh",
            "-c",
            &script,
        ])
        .env("SPINDLE_RM_ADDRESS", &c.rm_addr)
        .env("SPINDLE_CONF_DIR", &c.conf_dir)
        .stdout(Stdio::from(out.try_clone().expect("clone")))
        .stderr(Stdio::from(out))
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn spindle train");
    wait_until("4 workers to run", Duration::from_secs(60), || {
        let n = std::fs::read_to_string(&ran)
            .unwrap_or_default()
            .lines()
            .count();
        (n >= 4).then_some(())
    });
    let (_, apps) = c.get("/ws/v1/cluster/apps");
    let id = apps["apps"]["app"][0]["id"]
        .as_str()
        .expect("one application")
        .to_string();

    c.restart_rm_after(Signal::SIGKILL);

    let app = c.wait_app_state(
        &id,
        &["FINISHED", "FAILED", "KILLED"],
        Duration::from_secs(90),
    );
    let status = train.wait().expect("train exit");
    let text = std::fs::read_to_string(&out_path).unwrap_or_default();
    if app["finalStatus"] != "SUCCEEDED" {
        c.dump_logs();
    }
    assert_eq!(app["finalStatus"], "SUCCEEDED", "{app:#}\ntrain:\n{text}");
    assert!(status.success(), "train: {text}");
    let (_, atts) = c.get(&format!("/ws/v1/cluster/apps/{id}/appattempts"));
    let n_atts = atts["appAttempts"]["appAttempt"]
        .as_array()
        .map(Vec::len)
        .unwrap_or(0);
    assert_eq!(n_atts, 1, "the first AM attempt carried on: {atts:#}");
    let runs = std::fs::read_to_string(&ran).unwrap_or_default();
    let mut ranks: Vec<&str> = runs.lines().collect();
    ranks.sort_unstable();
    assert_eq!(
        ranks,
        ["0", "1", "2", "3"],
        "each rank ran once (no gang restart)"
    );
}

/// The pid of the process whose environment says `CONTAINER_ID=<id>` and which leads its
/// own process group (a container's leader).
fn container_leader(id: &str) -> Option<i32> {
    let want = format!("CONTAINER_ID={id}");
    std::fs::read_dir("/proc")
        .ok()?
        .filter_map(Result::ok)
        .find_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let env = std::fs::read(e.path().join("environ")).ok()?;
            let has = env.split(|b| *b == 0).any(|v| v == want.as_bytes());
            let leader = nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(pid)))
                .is_ok_and(|g| g.as_raw() == pid);
            (has && leader).then_some(pid)
        })
}

/// The training AM is killed while its 4 workers run: the application keeps its containers
/// across attempts, so the second AM attempt takes the running gang over, and the job
/// finishes SUCCEEDED without any worker run twice.
#[test]
fn a_killed_training_am_hands_its_running_gang_to_the_next_attempt() {
    let c = Cluster::start(ClusterOpts {
        nodes: 2,
        ..Default::default()
    });
    let marks = tempfile::tempdir().expect("tempdir");
    let ran = marks.path().join("ran");
    let logs = tempfile::tempdir().expect("tempdir");
    let out_path = logs.path().join("train.out");
    let out = std::fs::File::create(&out_path).expect("train log");
    let script = format!("echo $RANK >> {}; sleep 6", ran.display());
    let mut train = Command::new(bin("spindle"))
        .args([
            "train",
            "--workers",
            "4",
            "--worker-resources",
            "vcores=1,memory-mb=256",
            "--max-restarts",
            "2",
            "--timeout-ms",
            "120000",
            "--",
            "/bin/sh",
            "-c",
            &script,
        ])
        .env("SPINDLE_RM_ADDRESS", &c.rm_addr)
        .env("SPINDLE_CONF_DIR", &c.conf_dir)
        .stdout(Stdio::from(out.try_clone().expect("clone")))
        .stderr(Stdio::from(out))
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn spindle train");
    wait_until("4 workers to run", Duration::from_secs(60), || {
        let n = std::fs::read_to_string(&ran)
            .unwrap_or_default()
            .lines()
            .count();
        (n >= 4).then_some(())
    });
    let (_, apps) = c.get("/ws/v1/cluster/apps");
    let id = apps["apps"]["app"][0]["id"]
        .as_str()
        .expect("one application")
        .to_string();
    let (_, atts) = c.get(&format!("/ws/v1/cluster/apps/{id}/appattempts"));
    let am = atts["appAttempts"]["appAttempt"][0]["containerId"]
        .as_str()
        .expect("the AM container")
        .to_string();
    let pid = wait_until("the AM's process", Duration::from_secs(10), || {
        container_leader(&am)
    });
    nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL)
        .expect("kill the AM");

    let app = c.wait_app_state(
        &id,
        &["FINISHED", "FAILED", "KILLED"],
        Duration::from_secs(90),
    );
    let status = train.wait().expect("train exit");
    let text = std::fs::read_to_string(&out_path).unwrap_or_default();
    if app["finalStatus"] != "SUCCEEDED" {
        c.dump_logs();
    }
    assert_eq!(app["finalStatus"], "SUCCEEDED", "{app:#}\ntrain:\n{text}");
    assert!(status.success(), "train: {text}");
    let (_, atts) = c.get(&format!("/ws/v1/cluster/apps/{id}/appattempts"));
    let n_atts = atts["appAttempts"]["appAttempt"]
        .as_array()
        .map(Vec::len)
        .unwrap_or(0);
    assert_eq!(n_atts, 2, "a second AM attempt took over: {atts:#}");
    let second_am = c.am_stdout(&id);
    let runs = std::fs::read_to_string(&ran).unwrap_or_default();
    let mut ranks: Vec<&str> = runs.lines().collect();
    ranks.sort_unstable();
    assert_eq!(
        ranks,
        ["0", "1", "2", "3"],
        "each rank ran once; the second AM said:\n{second_am}"
    );
}
