//! An exact RM restart under load, on the real binaries: the RM is killed (SIGKILL) while a
//! thread submits 200 applications through the REST API and 30 distributed-shell
//! applications run with live AMs; a new RM on the same state store takes over. Then:
//!
//! - no AM that was alive gets a second attempt (each application RUNNING at the kill has
//!   one attempt at the end);
//! - every application the RM acknowledged (202) reaches FINISHED/SUCCEEDED: the
//!   distributed-shell AM succeeds only once it has heard of every one of its containers'
//!   completions, so none was lost, including the two the NM handed over in a heartbeat
//!   just before the kill while their AM was frozen (SIGSTOP) and so could not have fetched
//!   them, and those of workers that ended while the RM was down; each is told once (the
//!   AM's own log lists it once);
//! - no worker runs twice, no container process outlives its application (the processes
//!   the NMs started are gone, and their cgroups where the NMs made any), and no node is ever
//!   over-allocated (a thread samples the RM's node reports throughout: used <= total), nor
//!   is any RUNNING application said to be "not yet activated".
//!
//! The NM liveness expiry is short (6 s) and the hand-over AM's NM is frozen (SIGSTOP) from
//! the kill until longer than that after the restart, so that NM registers again late: the
//! recovered attempt waits for its AM all the same. The workers wait on marker files the
//! test creates, so every step happens in a known order whatever the machine's speed.
//! Bounded: under a minute here, a few at most in a debug build on two cores. It uses the
//! binaries of the current profile (`bin_dir`), so it runs in debug as in release; nothing
//! in it depends on the profile.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::{json, Value};
use spindle_system_tests::{bin, wait_until, Cluster, ClusterOpts};

/// Applications with live AMs at the kill.
const LIVE: usize = 30;
/// Applications the submitting thread sends.
const SUBMITTED: usize = 200;
/// The kill comes once this many of them are acknowledged.
const KILL_AFTER: usize = 60;
/// Each NM's size: with YARN's default `maximum-am-resource-percent` (0.1), room for the
/// live applications' AMs and a share of the submitted ones'.
const NODE_MB: i64 = 65536;
const NODE_VCORES: i64 = 128;
/// The whole test's bound.
const LIMIT: Duration = Duration::from_secs(420);
/// The NM liveness expiry: short, as a test cluster's often is. The hand-over AM's NM is
/// frozen longer than this after the restart; its attempt must wait anyway.
const NM_EXPIRY_MS: u64 = 6000;
/// A worker's wait for its marker file, bounded so that nothing outlives a failed test long.
fn wait_for(marker: &str) -> String {
    format!("for i in $(seq 600); do [ -e {marker} ] && break; sleep 0.5; done")
}

/// A distributed-shell submission, the `spindle` binary run in place (no copy per
/// application), `n` workers of 128 MB running `command`.
fn dshell(id: &str, name: &str, n: u32, command: &str) -> Value {
    json!({
        "application-id": id,
        "application-name": name,
        "application-type": "DISTRIBUTEDSHELL",
        "queue": "default",
        "max-app-attempts": 2,
        "am-container-spec": {
            "environment": {"entry": [
                {"key": "DISTRIBUTEDSHELL_NUM_CONTAINERS", "value": n.to_string()},
                {"key": "DISTRIBUTEDSHELL_CONTAINER_RESOURCES", "value": "memory-mb=128,vcores=1"},
                {"key": "DISTRIBUTEDSHELL_SHELL_COMMAND", "value": command}
            ]},
            "commands": {"command": format!("{} distributed-shell-am", bin("spindle").display())}
        },
        "resource": {"memory": 256, "vCores": 1}
    })
}

/// A new application id and its submission, answered 202; None if the RM could not be
/// reached (it is being restarted) or refused.
fn submit(
    http: &reqwest::blocking::Client,
    rm: &str,
    name: &str,
    n: u32,
    cmd: &str,
) -> Option<String> {
    let v: Value = http
        .post(format!(
            "http://{rm}/ws/v1/cluster/apps/new-application?user.name=tester"
        ))
        .json(&json!({}))
        .send()
        .ok()
        .filter(|r| r.status().is_success())?
        .json()
        .ok()?;
    let id = v["application-id"].as_str()?.to_string();
    let r = http
        .post(format!("http://{rm}/ws/v1/cluster/apps?user.name=tester"))
        .json(&dshell(&id, name, n, cmd))
        .send()
        .ok()?;
    (r.status().as_u16() == 202).then_some(id)
}

fn attempts(c: &Cluster, id: &str) -> Vec<Value> {
    let (_, atts) = c.get(&format!("/ws/v1/cluster/apps/{id}/appattempts"));
    atts["appAttempts"]["appAttempt"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Every application's (state, final status), by id.
fn app_states(c: &Cluster) -> BTreeMap<String, (String, String)> {
    let (_, v) = c.get("/ws/v1/cluster/apps");
    v["apps"]["app"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|a| {
            (
                a["id"].as_str().unwrap_or_default().to_string(),
                (
                    a["state"].as_str().unwrap_or_default().to_string(),
                    a["finalStatus"].as_str().unwrap_or_default().to_string(),
                ),
            )
        })
        .collect()
}

/// Processes the NMs started for containers under `cluster_dir`: (pid, container id).
fn container_processes(cluster_dir: &Path) -> Vec<(i32, String)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let env = std::fs::read(e.path().join("environ")).ok()?;
            let id = env
                .split(|b| *b == 0)
                .find_map(|v| v.strip_prefix(b"CONTAINER_ID="))
                .map(|v| String::from_utf8_lossy(v).into_owned())?;
            let ours = std::fs::read_link(e.path().join("cwd"))
                .is_ok_and(|cwd| cwd.starts_with(cluster_dir));
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            let zombie = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next())
                == Some("Z");
            (ours && !zombie).then_some((pid, id))
        })
        .collect()
}

/// Container cgroups (under the NMs' default hierarchy, `spindle`, of every controller and
/// of the unified tree) named after a container of an application whose id has cluster
/// timestamp one of `stamps`: what a root NM with cgroups left behind.
fn container_cgroups(stamps: &BTreeSet<String>) -> Vec<std::path::PathBuf> {
    fn walk(dir: &Path, depth: u32, stamps: &BTreeSet<String>, out: &mut Vec<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.filter_map(Result::ok) {
            let path = e.path();
            if !path.is_dir() {
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("container_")
                && stamps.iter().any(|t| name.contains(&format!("_{t}_")))
            {
                out.push(path);
            } else if depth > 0 {
                walk(&path, depth - 1, stamps, out);
            }
        }
    }
    let root = Path::new("/sys/fs/cgroup");
    let mut tops = vec![root.join("spindle")];
    if let Ok(entries) = std::fs::read_dir(root) {
        tops.extend(
            entries
                .filter_map(Result::ok)
                .map(|e| e.path().join("spindle")),
        );
    }
    let mut out = vec![];
    for t in tops {
        walk(&t, 3, stamps, &mut out);
    }
    out
}

/// The process group leader of container `id`'s process (its launch shell).
fn container_leader(id: &str, cluster_dir: &Path) -> Option<i32> {
    container_processes(cluster_dir)
        .into_iter()
        .filter(|(_, c)| c == id)
        .map(|(pid, _)| pid)
        .find(|pid| {
            nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(*pid)))
                .is_ok_and(|g| g.as_raw() == *pid)
        })
}

/// Samples the RM's node and application reports until stopped: every node seen over its
/// size and every RUNNING application whose diagnostic says it is not activated (state and
/// diagnostic disagree), and how many samples were read.
struct Sampler {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<(BTreeSet<String>, usize)>>,
}

impl Sampler {
    fn start(rm: String) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::spawn(move || {
            let http = reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()
                .expect("client");
            let (mut over, mut samples) = (BTreeSet::new(), 0);
            while !s.load(Ordering::Relaxed) {
                let nodes: Option<Value> = http
                    .get(format!("http://{rm}/ws/v1/cluster/nodes"))
                    .send()
                    .ok()
                    .and_then(|r| r.json().ok());
                let running: Option<Value> = http
                    .get(format!("http://{rm}/ws/v1/cluster/apps?states=RUNNING"))
                    .send()
                    .ok()
                    .and_then(|r| r.json().ok());
                for a in running
                    .map(|v| v["apps"]["app"].as_array().cloned().unwrap_or_default())
                    .unwrap_or_default()
                {
                    let diag = a["diagnostics"].as_str().unwrap_or_default();
                    if diag.contains("not yet activated") {
                        over.insert(format!("{} is RUNNING but says: {diag}", a["id"]));
                    }
                }
                if let Some(v) = nodes {
                    samples += 1;
                    for n in v["nodes"]["node"].as_array().cloned().unwrap_or_default() {
                        let mb = n["usedMemoryMB"].as_i64().unwrap_or(0);
                        let vc = n["usedVirtualCores"].as_i64().unwrap_or(0);
                        let avail = n["availMemoryMB"].as_i64().unwrap_or(0);
                        if mb > NODE_MB || vc > NODE_VCORES || avail < 0 {
                            over.insert(format!(
                                "{}: {mb} MB, {vc} vcores, {avail} MB free",
                                n["id"]
                            ));
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(250));
            }
            (over, samples)
        });
        Self {
            stop,
            handle: Some(handle),
        }
    }

    fn finish(mut self) -> (BTreeSet<String>, usize) {
        self.stop.store(true, Ordering::Relaxed);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[test]
fn a_crash_under_load_keeps_live_attempts_and_loses_no_completion() {
    let start = Instant::now();
    let left = || LIMIT.saturating_sub(start.elapsed());
    // The other options keep their defaults, whatever options the harness grows.
    #[allow(clippy::needless_update)]
    let mut c = Cluster::start(ClusterOpts {
        nodes: 2,
        rm_props: vec![(
            "yarn.nm.liveness-monitor.expiry-interval-ms".into(),
            NM_EXPIRY_MS.to_string(),
        )],
        nm_props: vec![
            (
                "yarn.nodemanager.resource.memory-mb".into(),
                NODE_MB.to_string(),
            ),
            (
                "yarn.nodemanager.resource.cpu-vcores".into(),
                NODE_VCORES.to_string(),
            ),
        ],
        ..Default::default()
    });
    let marks = tempfile::tempdir().expect("tempdir");
    let m = marks.path().display().to_string();
    let http = c.http.clone();
    let rm = c.rm_addr.clone();

    // 30 applications with live AMs. The first is the hand-over case: its two workers end
    // when told (`go`); the others' one worker each ends at `early` (while the RM is down)
    // or at `late` (after the restart).
    let handover = submit(
        &http,
        &rm,
        "handover",
        2,
        &format!(
            "echo $CONTAINER_ID >> {m}/ran; {}",
            wait_for(&format!("{m}/go"))
        ),
    )
    .expect("handover app accepted");
    let mut live = vec![handover.clone()];
    for i in 1..LIVE {
        let when = if i % 2 == 1 { "early" } else { "late" };
        let cmd = format!(
            "echo $CONTAINER_ID >> {m}/ran; {}",
            wait_for(&format!("{m}/{when}"))
        );
        live.push(submit(&http, &rm, &format!("live-{i}"), 1, &cmd).expect("live app accepted"));
    }
    let ran = marks.path().join("ran");
    let workers = LIVE + 1;
    wait_until("every live application's workers to run", left(), || {
        let n = std::fs::read_to_string(&ran)
            .unwrap_or_default()
            .lines()
            .count();
        let states = app_states(&c);
        let running = live
            .iter()
            .all(|id| states.get(id).is_some_and(|(s, _)| s == "RUNNING"));
        (n >= workers && running).then_some(())
    });

    // The hand-over: the AM is frozen, its workers end, and the RM takes their completions
    // from the NM's heartbeat; the AM cannot have fetched them.
    let am = attempts(&c, &handover)[0]["containerId"]
        .as_str()
        .expect("the hand-over AM's container")
        .to_string();
    let am_pid = wait_until("the hand-over AM's process", left(), || {
        container_leader(&am, c.dir.path())
    });
    let am_group = nix::unistd::Pid::from_raw(am_pid);
    let am_node = attempts(&c, &handover)[0]["nodeHttpAddress"]
        .as_str()
        .unwrap_or_default()
        .trim_start_matches("http://")
        .to_string();
    let am_nm = c
        .nm_addrs
        .iter()
        .position(|a| a.trim_start_matches("http://") == am_node)
        .unwrap_or_else(|| panic!("no NM at {am_node}: {:?}", c.nm_addrs));
    nix::sys::signal::killpg(am_group, Signal::SIGSTOP).expect("freeze the AM");
    std::fs::write(marks.path().join("go"), "").expect("go");
    wait_until(
        "the RM to hear that the hand-over workers ended",
        left(),
        || (c.app(&handover)["runningContainers"].as_i64() == Some(1)).then_some(()),
    );

    // The node reports are watched from now on, and the submissions start.
    let sampler = Sampler::start(rm.clone());
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let acks = Arc::new(AtomicUsize::new(0));
    let submitter = {
        let (acked, acks, rm) = (acked.clone(), acks.clone(), rm.clone());
        let deadline = Instant::now() + left();
        std::thread::spawn(move || {
            let http = reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .expect("client");
            let mut i = 0;
            while i < SUBMITTED && Instant::now() < deadline {
                match submit(&http, &rm, &format!("bulk-{i}"), 1, "true") {
                    Some(id) => {
                        acked.lock().expect("lock").push(id);
                        acks.fetch_add(1, Ordering::SeqCst);
                        i += 1;
                    }
                    // The RM is down (or was killed mid-call): try again with a new id.
                    None => std::thread::sleep(Duration::from_millis(100)),
                }
            }
        })
    };

    let at_kill = wait_until("submissions to be under way", left(), || {
        let n = acks.load(Ordering::SeqCst);
        (n >= KILL_AFTER).then_some(n)
    });
    assert!(
        at_kill < SUBMITTED,
        "the kill comes while submissions go on"
    );
    let running_at_kill: Vec<String> = app_states(&c)
        .into_iter()
        .filter(|(_, (s, _))| s == "RUNNING")
        .map(|(id, _)| id)
        .collect();
    assert!(running_at_kill.len() >= LIVE, "{running_at_kill:?}");

    // The crash. Half the live workers end while the RM is down; the NMs keep their
    // completions and report them when they register again.
    c.rm.signal(Signal::SIGKILL);
    wait_until("the RM to die", Duration::from_secs(10), || {
        (!c.rm.is_running()).then_some(())
    });
    std::fs::write(marks.path().join("early"), "").expect("early");
    // The hand-over AM's NM is frozen too, and registers again only after longer than the
    // NM expiry: the still-frozen AM's recovered attempt waits for it all the same.
    c.nms[am_nm].signal(Signal::SIGSTOP);
    std::thread::sleep(Duration::from_secs(2));
    c.restart_rm_after(Signal::SIGKILL);
    std::thread::sleep(Duration::from_millis(NM_EXPIRY_MS + 2000));
    c.nms[am_nm].signal(Signal::SIGCONT);
    c.wait_nodes_running(2);
    nix::sys::signal::killpg(am_group, Signal::SIGCONT).expect("thaw the AM");
    std::fs::write(marks.path().join("late"), "").expect("late");

    submitter.join().expect("the submitting thread");
    let acked = acked.lock().expect("lock").clone();
    assert_eq!(
        acked.len(),
        SUBMITTED,
        "every submission acknowledged in time"
    );

    // Every acknowledged application reaches a final state, and succeeds.
    let all: Vec<String> = live.iter().chain(acked.iter()).cloned().collect();
    let ended = |s: &str| matches!(s, "FINISHED" | "FAILED" | "KILLED");
    let finals = loop {
        let states = app_states(&c);
        let waiting: Vec<&String> = all
            .iter()
            .filter(|id| !states.get(*id).is_some_and(|(s, _)| ended(s)))
            .collect();
        if waiting.is_empty() {
            break states;
        }
        if left().is_zero() {
            c.dump_logs();
            let why: Vec<Value> = waiting.iter().take(10).map(|id| c.app(id)).collect();
            panic!(
                "{} applications did not end in time: {why:#?}",
                waiting.len()
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let (over, samples) = sampler.finish();
    let bad: Vec<_> = all
        .iter()
        .filter(|id| finals[*id] != ("FINISHED".to_string(), "SUCCEEDED".to_string()))
        .map(|id| (id.clone(), c.app(id)["diagnostics"].clone()))
        .collect();
    if !bad.is_empty() {
        c.dump_logs();
    }
    assert!(
        bad.is_empty(),
        "applications that did not succeed: {bad:#?}"
    );

    // No AM alive at the kill got a second attempt.
    for id in &running_at_kill {
        let all = attempts(&c, id);
        if all.len() != 1 {
            // Why the first attempt ended, and the daemons' logs: what the next look needs.
            c.dump_logs();
        }
        assert_eq!(
            all.len(),
            1,
            "{id} was RUNNING at the kill and has {} attempts: {all:#?}; the application: {:#}",
            all.len(),
            c.app(id)
        );
    }
    // Each worker ran once.
    let lines: Vec<String> = std::fs::read_to_string(&ran)
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect();
    let unique: BTreeSet<&String> = lines.iter().collect();
    assert_eq!(lines.len(), workers, "{lines:?}");
    assert_eq!(unique.len(), workers, "no worker ran twice: {lines:?}");
    // The hand-over AM heard of each of its workers' completions once.
    let out = c.am_stdout(&handover);
    let heard: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("completed on") && l.contains("with exit status 0"))
        .collect();
    assert_eq!(heard.len(), 2, "the hand-over AM's log:\n{out}");

    // No node was over-allocated, at any sample.
    assert!(samples > 10, "the node reports were sampled ({samples})");
    assert!(
        over.is_empty(),
        "over-allocated nodes, or disagreeing states: {over:#?}"
    );

    // No container process outlives its application.
    let until = Instant::now() + Duration::from_secs(30).min(left());
    let mut left_over = container_processes(c.dir.path());
    while !left_over.is_empty() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(200));
        left_over = container_processes(c.dir.path());
    }
    for (pid, _) in &left_over {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid), Signal::SIGKILL);
    }
    assert!(
        left_over.is_empty(),
        "container processes left: {left_over:?}"
    );
    // Nor their cgroups (where the NMs made any: as root with cgroups, as in CI).
    let stamps: BTreeSet<String> = all
        .iter()
        .filter_map(|id| id.split('_').nth(1).map(String::from))
        .collect();
    let mut cgroups = container_cgroups(&stamps);
    while !cgroups.is_empty() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(200));
        cgroups = container_cgroups(&stamps);
    }
    assert!(cgroups.is_empty(), "container cgroups left: {cgroups:?}");
    let rm_log = std::fs::read_to_string(c.dir.path().join("rm-restart1.log")).unwrap_or_default();
    assert!(rm_log.contains("recovered"), "{rm_log}");
}
