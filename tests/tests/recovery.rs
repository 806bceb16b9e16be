//! Work that survives its managers, end to end on the real daemons: the RM is killed (SIGKILL)
//! while a distributed shell's workers or a training gang run, and a new RM on the same state
//! store takes the running work back as the NMs re-register; or the training AM is killed
//! and its second attempt takes the running gang over. In each case the application finishes
//! SUCCEEDED without any worker run twice.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::Value;
use spindle_system_tests::{bin, wait_until, Cluster, ClusterOpts};

/// A `spindle` client running in the background, its output in a file.
struct Client {
    child: Child,
    out: PathBuf,
    _dir: tempfile::TempDir,
}

fn spawn_spindle(c: &Cluster, args: &[&str]) -> Client {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("client.out");
    let file = std::fs::File::create(&out).expect("client log");
    let child = Command::new(bin("spindle"))
        .args(args)
        .env("SPINDLE_RM_ADDRESS", &c.rm_addr)
        .env("SPINDLE_CONF_DIR", &c.conf_dir)
        .stdout(Stdio::from(file.try_clone().expect("clone")))
        .stderr(Stdio::from(file))
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn spindle");
    Client {
        child,
        out,
        _dir: dir,
    }
}

/// `spindle train` of 4 workers running `script`.
fn spawn_train(c: &Cluster, script: &str) -> Client {
    spawn_spindle(
        c,
        &[
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
            script,
        ],
    )
}

/// Waits until `path` has `n` lines (each worker appends one when it starts).
fn wait_lines(path: &Path, n: usize) {
    wait_until(
        &format!("{n} workers to run"),
        Duration::from_secs(60),
        || {
            let got = std::fs::read_to_string(path)
                .unwrap_or_default()
                .lines()
                .count();
            (got >= n).then_some(())
        },
    );
}

/// The cluster's one application.
fn only_app(c: &Cluster) -> String {
    let (_, apps) = c.get("/ws/v1/cluster/apps");
    apps["apps"]["app"][0]["id"]
        .as_str()
        .expect("one application")
        .to_string()
}

fn attempts(c: &Cluster, id: &str) -> Vec<Value> {
    let (_, atts) = c.get(&format!("/ws/v1/cluster/apps/{id}/appattempts"));
    atts["appAttempts"]["appAttempt"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Waits for `id` to end; asserts it SUCCEEDED and the client exited 0.
fn assert_succeeds(c: &Cluster, id: &str, mut client: Client) {
    let app = c.wait_app_state(
        id,
        &["FINISHED", "FAILED", "KILLED"],
        Duration::from_secs(90),
    );
    let status = client.child.wait().expect("client exit");
    let text = std::fs::read_to_string(&client.out).unwrap_or_default();
    if app["finalStatus"] != "SUCCEEDED" {
        c.dump_logs();
    }
    assert_eq!(app["finalStatus"], "SUCCEEDED", "{app:#}\nclient:\n{text}");
    assert!(status.success(), "client: {text}");
}

/// The lines of `path`, sorted.
fn sorted_lines(path: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect();
    v.sort_unstable();
    v
}

#[test]
fn an_rm_crash_loses_no_running_work() {
    let mut c = Cluster::start(ClusterOpts {
        nodes: 2,
        ..Default::default()
    });
    let marks = tempfile::tempdir().expect("tempdir");
    let ran = marks.path().join("ran");
    let command = format!("echo $CONTAINER_ID >> {}; sleep 6", ran.display());
    let client = spawn_spindle(
        &c,
        &[
            "distributed-shell",
            "--num-containers",
            "3",
            "--container-resources",
            "memory-mb=256,vcores=1",
            "--shell-command",
            &command,
        ],
    );
    wait_lines(&ran, 3);
    let id = only_app(&c);

    c.restart_rm_after(Signal::SIGKILL);

    assert_succeeds(&c, &id, client);
    assert_eq!(attempts(&c, &id).len(), 1, "the first attempt carried on");
    assert_eq!(sorted_lines(&ran).len(), 3, "no worker ran twice");
    let rm_log = std::fs::read_dir(c.dir.path())
        .expect("cluster dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("rm-restart"))
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .collect::<String>();
    assert!(rm_log.contains("recovered 1 applications"), "{rm_log}");
}

/// The same for a training gang: the new RM takes it back, the training AM registers again,
/// and the job finishes with its first AM attempt and its first gang attempt.
#[test]
fn an_rm_crash_does_not_restart_a_running_training_gang() {
    let mut c = Cluster::start(ClusterOpts {
        nodes: 2,
        ..Default::default()
    });
    let marks = tempfile::tempdir().expect("tempdir");
    let ran = marks.path().join("ran");
    let train = spawn_train(&c, &format!("echo $RANK >> {}; sleep 6", ran.display()));
    wait_lines(&ran, 4);
    let id = only_app(&c);

    c.restart_rm_after(Signal::SIGKILL);

    assert_succeeds(&c, &id, train);
    assert_eq!(
        attempts(&c, &id).len(),
        1,
        "the first AM attempt carried on"
    );
    assert_eq!(
        sorted_lines(&ran),
        ["0", "1", "2", "3"],
        "each rank ran once"
    );
}

/// The pid of the process whose environment says `CONTAINER_ID=<id>`, which leads its own
/// process group (a container's leader) and works under `cluster_dir`: tests run clusters
/// side by side, and two RMs started in the same millisecond give the same ids.
fn container_leader(id: &str, cluster_dir: &Path) -> Option<i32> {
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
            let ours = std::fs::read_link(e.path().join("cwd"))
                .is_ok_and(|cwd| cwd.starts_with(cluster_dir));
            (has && leader && ours).then_some(pid)
        })
}

/// The training AM is killed while its 4 workers run: the application keeps its containers
/// across attempts, so the second AM attempt takes the running gang over.
#[test]
fn a_killed_training_am_hands_its_running_gang_to_the_next_attempt() {
    let c = Cluster::start(ClusterOpts {
        nodes: 2,
        ..Default::default()
    });
    let marks = tempfile::tempdir().expect("tempdir");
    let ran = marks.path().join("ran");
    let train = spawn_train(&c, &format!("echo $RANK >> {}; sleep 6", ran.display()));
    wait_lines(&ran, 4);
    let id = only_app(&c);
    let am = attempts(&c, &id)[0]["containerId"]
        .as_str()
        .expect("the AM container")
        .to_string();
    let pid = wait_until("the AM's process", Duration::from_secs(10), || {
        container_leader(&am, c.dir.path())
    });
    nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL)
        .expect("kill the AM");

    assert_succeeds(&c, &id, train);
    assert_eq!(attempts(&c, &id).len(), 2, "a second AM attempt took over");
    assert_eq!(
        sorted_lines(&ran),
        ["0", "1", "2", "3"],
        "each rank ran once; the AM said:\n{}",
        c.am_stdout(&id)
    );
}
