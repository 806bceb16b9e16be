//! Hostile idle connections on the real binaries: an RM and one NM on 127.0.0.1, an
//! application whose AM container hands its AM-RM token to the test (which then calls
//! `/ws/v1/am/*` as the AM would, as `update.rs` does), and then 2,000 idle TCP connections
//! (no byte sent) to the RM from 127.0.0.2 to 127.0.0.5 (all of 127/8 is loopback on Linux,
//! so they are other peers than the NM at 127.0.0.1, 500 each, under the default per-peer cap
//! of 512) and 200 to the NM. With all of them open:
//!
//! - an NM heartbeat completes within a second (the RM's `/metrics` count of
//!   `POST /ws/v1/node-tracker/heartbeat` answered 200 grows; heartbeats every 200 ms);
//! - an AM allocate on a fresh connection is answered within a second;
//! - the NM answers a REST call on a fresh connection;
//! - 520 more connections from 127.0.0.6: exactly 512 stay open, the other 8 are closed at
//!   once by the per-peer cap (`spindle.http.max-connections-per-peer`, default 512), and the
//!   RM logs a WARN naming 127.0.0.6; the first 2,000 are all still open (they were held, not
//!   turned away).
//!
//! The daemons are started with an open-file soft limit of 1,024 (a common default) and must
//! raise it to the hard limit themselves, as their logs say.
//!
//! The header-read timeout is raised to 120 s here so the idle connections stay for the whole
//! test (its own test, on a short timeout, is `rest-edge`'s
//! `a_half_sent_request_line_is_closed_after_the_header_read_timeout`, and
//! `idle_connections_are_closed_at_the_header_read_timeout` below on the real RM).
//! Everything is closed at the end; the AM container is killed by pid if still there.

use std::io::{ErrorKind, Read};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};
use spindle_system_tests::{wait_until, Cluster, ClusterOpts};

/// Peers 127.0.0.2..=127.0.0.5, 500 connections each.
const PEERS: u8 = 4;
const PER_PEER: usize = 500;
/// The default `spindle.http.max-connections-per-peer`.
const PEER_CAP: usize = 512;
const NM_IDLE: usize = 200;
const WITHIN: Duration = Duration::from_secs(1);

/// SIGKILLs, when dropped, the process whose pid is in the file if it still runs `sleep`.
struct KillPid(PathBuf);

impl Drop for KillPid {
    fn drop(&mut self) {
        let Some(pid) = std::fs::read_to_string(&self.0)
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
            .filter(|p| *p > 1)
        else {
            return;
        };
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmd).starts_with("sleep") {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

/// Sets this process's open-file soft limit (the daemons it starts inherit it), keeping the
/// hard limit; returns the hard limit.
fn set_soft_nofile(soft: u64) -> u64 {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (_, mut hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit");
    // A machine whose hard limit is low (a CI container's 1,024, say): root may raise it.
    if hard < 8192 && setrlimit(Resource::RLIMIT_NOFILE, soft.min(hard), 8192).is_ok() {
        hard = 8192;
    }
    setrlimit(Resource::RLIMIT_NOFILE, soft.min(hard), hard).expect("setrlimit");
    hard
}

/// Raises this test's own open-file limit to the hard limit (it holds ~2,800 sockets).
fn raise_nofile() -> u64 {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit");
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).expect("setrlimit");
    }
    getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit").0
}

/// A TCP connection to `to` from `from` (port chosen by the kernel); nothing is sent on it.
fn connect_from(from: Ipv4Addr, to: SocketAddr) -> TcpStream {
    let s =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    s.bind(&SocketAddr::new(IpAddr::V4(from), 0).into())
        .unwrap_or_else(|e| panic!("bind {from}: {e}"));
    s.connect_timeout(&to.into(), Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("connect {from} -> {to}: {e}"));
    s.into()
}

/// Whether the server still holds `s` open: a read would block (no EOF, no reset).
fn still_open(s: &TcpStream) -> bool {
    s.set_nonblocking(true).expect("nonblocking");
    let mut b = [0u8; 16];
    let mut r = s;
    matches!(r.read(&mut b), Err(e) if e.kind() == ErrorKind::WouldBlock)
}

/// The number of heartbeats the RM answered with 200, from its `/metrics`.
fn heartbeats_answered(c: &Cluster) -> u64 {
    let text = c
        .http
        .get(c.url("/metrics"))
        .send()
        .and_then(|r| r.text())
        .expect("GET /metrics");
    text.lines()
        .filter(|l| {
            l.starts_with("spindle_rm_http_request_duration_seconds_count{")
                && l.contains("path=\"/ws/v1/node-tracker/heartbeat\"")
                && l.contains("code=\"200\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap_or_else(|e| panic!("address {s}: {e}"))
}

/// Submits an application whose AM container writes its AM-RM token to `token_file` (and
/// its pid to `pid_file`) and sleeps; registers as its AM; returns (app id, token).
fn start_am(c: &Cluster, token_file: &Path, pid_file: &Path) -> (String, String) {
    let (status, v, _) = c.send(
        reqwest::Method::POST,
        "/ws/v1/cluster/apps/new-application",
        &json!({}),
    );
    assert_eq!(status, 200, "{v}");
    let app = v["application-id"].as_str().expect("id").to_string();
    let am_cmd = format!(
        "echo $$ > {pid}; printf '%s' \"$SPINDLE_AMRM_TOKEN\" > {tok}.tmp && mv {tok}.tmp {tok}; exec sleep 600",
        pid = pid_file.display(),
        tok = token_file.display()
    );
    let (status, v, _) = c.send(
        reqwest::Method::POST,
        "/ws/v1/cluster/apps?user.name=tester",
        &json!({
            "application-id": app,
            "application-name": "connection-limits",
            "application-type": "SPINDLE-TEST",
            "queue": "default",
            "max-app-attempts": 1,
            "am-container-spec": {"commands": {"command": am_cmd}},
            "resource": {"memory": 256, "vCores": 1},
        }),
    );
    assert_eq!(status, 202, "{v}");
    let token = wait_until(
        "the AM container's AM-RM token",
        Duration::from_secs(30),
        || {
            std::fs::read_to_string(token_file)
                .ok()
                .filter(|t| !t.is_empty())
        },
    );
    let (status, v) = am_post(
        c,
        &token,
        "/ws/v1/am/register",
        &json!({"host": "127.0.0.1", "rpcPort": 0, "trackingUrl": ""}),
    );
    assert_eq!(status, 200, "register: {v}");
    c.wait_app_state(&app, &["RUNNING"], Duration::from_secs(20));
    (app, token)
}

/// A `/ws/v1/am/*` call with the AM-RM token on a fresh client (a new connection).
fn am_post(c: &Cluster, token: &str, path: &str, body: &Value) -> (u16, Value) {
    let fresh = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(10))
        .pool_max_idle_per_host(0)
        .build()
        .expect("client");
    let r = fresh
        .post(c.url(path))
        .bearer_auth(token)
        .json(body)
        .send()
        .unwrap_or_else(|e| panic!("POST {path}: {e}"));
    let s = r.status().as_u16();
    (s, r.json().unwrap_or(Value::Null))
}

#[test]
fn with_2000_idle_connections_open_heartbeats_and_allocates_still_succeed_within_a_second() {
    // The daemons start with the common default soft limit of 1,024 open files (under which
    // ~1,100 idle connections once stopped the RM), and must raise it themselves.
    let hard = set_soft_nofile(1024);
    assert!(
        hard >= 4096,
        "this test holds ~2,800 sockets; the hard open-file limit is {hard}"
    );
    let slow_header = (
        "spindle.http.header-read-timeout-ms".to_string(),
        "120000".to_string(),
    );
    let c = Cluster::start(ClusterOpts {
        nodes: 1,
        rm_props: vec![
            (
                "yarn.resourcemanager.nodemanagers.heartbeat-interval-ms".to_string(),
                "200".to_string(),
            ),
            slow_header.clone(),
        ],
        nm_props: vec![slow_header],
    });
    raise_nofile();
    for d in [&c.rm, &c.nms[0]] {
        let said = format!("open-file limit (RLIMIT_NOFILE): {hard}");
        assert!(
            d.log_text().contains(&said),
            "{} did not raise its open-file limit to {hard}:\n{}",
            d.name,
            d.log_text()
        );
    }
    let scratch = c.dir.path().join("scratch");
    std::fs::create_dir_all(&scratch).expect("scratch dir");
    let pid_file = scratch.join("am.pid");
    let _kill = KillPid(pid_file.clone());
    let (app, token) = start_am(&c, &scratch.join("amrm-token"), &pid_file);
    let rm = addr(&c.rm_addr);
    let nm = addr(&c.nm_addrs[0]);

    // 2,000 idle connections to the RM from four other peers, 200 to the NM.
    let started = Instant::now();
    let mut idle: Vec<TcpStream> = Vec::with_capacity(PEERS as usize * PER_PEER);
    for p in 0..PEERS {
        let from = Ipv4Addr::new(127, 0, 0, 2 + p);
        for _ in 0..PER_PEER {
            idle.push(connect_from(from, rm));
        }
    }
    let nm_idle: Vec<TcpStream> = (0..NM_IDLE)
        .map(|_| connect_from(Ipv4Addr::new(127, 0, 0, 2), nm))
        .collect();
    eprintln!(
        "opened {} idle connections to the RM and {} to the NM in {:?}",
        idle.len(),
        nm_idle.len(),
        started.elapsed()
    );
    // Let the RM accept them all (they are accepted, not queued, when the checks run).
    std::thread::sleep(Duration::from_millis(500));

    // An NM heartbeat completes within a second.
    let before = heartbeats_answered(&c);
    let t = Instant::now();
    wait_until("an NM heartbeat", Duration::from_secs(10), || {
        (heartbeats_answered(&c) > before).then_some(())
    });
    let took = t.elapsed();
    eprintln!("a heartbeat was answered {took:?} after the count was read");
    assert!(
        took < WITHIN,
        "no NM heartbeat answered within {WITHIN:?}: {took:?}"
    );

    // An AM allocate on a fresh connection is answered within a second.
    let t = Instant::now();
    let (status, v) = am_post(
        &c,
        &token,
        "/ws/v1/am/allocate",
        &json!({"responseId": 0, "progress": 0.1}),
    );
    let took = t.elapsed();
    assert_eq!(status, 200, "allocate: {v}");
    eprintln!("an AM allocate took {took:?}");
    assert!(took < WITHIN, "the AM allocate took {took:?}");

    // The NM answers too.
    let t = Instant::now();
    let r = c
        .http
        .get(format!("http://{nm}/ws/v1/node/info"))
        .send()
        .expect("GET the NM's /ws/v1/node/info");
    assert!(r.status().is_success(), "{}", r.status());
    assert!(t.elapsed() < WITHIN, "the NM took {:?}", t.elapsed());

    // The per-peer cap: 520 from one new peer, 512 held, 8 closed at once.
    let over_peer = Ipv4Addr::new(127, 0, 0, 6);
    let over: Vec<TcpStream> = (0..PEER_CAP + 8)
        .map(|_| connect_from(over_peer, rm))
        .collect();
    let held = wait_until(
        "the per-peer cap to close the connections beyond it",
        Duration::from_secs(10),
        || {
            let open = over.iter().filter(|s| still_open(s)).count();
            (open <= PEER_CAP).then_some(open)
        },
    );
    assert_eq!(held, PEER_CAP, "connections from {over_peer} held open");
    wait_until(
        "the RM's WARN naming the peer turned away",
        Duration::from_secs(10),
        || {
            c.rm.log_text()
                .lines()
                .any(|l| {
                    l.contains("WARN")
                        && l.contains("spindle.http.max-connections-per-peer")
                        && l.contains(&over_peer.to_string())
                })
                .then_some(())
        },
    );
    // The first 2,000 (and the NM's 200) were held, not turned away.
    let open = idle.iter().filter(|s| still_open(s)).count();
    assert_eq!(open, idle.len(), "idle connections to the RM still open");
    let open = nm_idle.iter().filter(|s| still_open(s)).count();
    assert_eq!(open, nm_idle.len(), "idle connections to the NM still open");

    // Close everything, then the application ends.
    drop(over);
    drop(idle);
    drop(nm_idle);
    let (status, v) = am_post(
        &c,
        &token,
        "/ws/v1/am/finish",
        &json!({"finalApplicationStatus": "SUCCEEDED", "diagnostics": "", "trackingUrl": ""}),
    );
    assert_eq!(status, 200, "finish: {v}");
    c.wait_app_state(&app, &["FINISHED"], Duration::from_secs(20));
}

#[test]
fn idle_connections_are_closed_at_the_header_read_timeout() {
    raise_nofile();
    let c = Cluster::start(ClusterOpts {
        nodes: 0,
        rm_props: vec![(
            "spindle.http.header-read-timeout-ms".to_string(),
            "500".to_string(),
        )],
        nm_props: vec![],
    });
    let rm = addr(&c.rm_addr);
    let silent: Vec<TcpStream> = (0..100)
        .map(|_| connect_from(Ipv4Addr::new(127, 0, 0, 7), rm))
        .collect();
    let mut half = connect_from(Ipv4Addr::new(127, 0, 0, 7), rm);
    std::io::Write::write_all(&mut half, b"GET /ws/v1/cluster/info HT").expect("write");
    wait_until(
        "the RM to close connections that sent no whole request head",
        Duration::from_secs(10),
        || {
            let open = silent.iter().filter(|s| still_open(s)).count();
            (open == 0 && !still_open(&half)).then_some(())
        },
    );
    // The RM still answers.
    let (status, _) = c.get("/ws/v1/cluster/info");
    assert_eq!(status, 200);
}

/// The held-out probe: the RM's open-file limit (soft and hard) lowered to 1,024 with
/// `prlimit`, 1,100 idle connections held from one other peer (past its per-peer cap and,
/// with the RM's own descriptors, past the limit), then 14 probe requests on fresh
/// connections: every one is answered 200 at once, without waiting for the idle ones'
/// timeouts (the header-read timeout is 120 s here). Runs in a few seconds.
#[test]
fn with_the_open_file_limit_at_1024_and_1100_idle_connections_every_probe_is_answered() {
    raise_nofile();
    if std::process::Command::new("prlimit")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "prlimit (util-linux) is missing"
        );
        eprintln!("skipped: prlimit (util-linux) is missing");
        return;
    }
    let c = Cluster::start(ClusterOpts {
        nodes: 0,
        rm_props: vec![(
            "spindle.http.header-read-timeout-ms".to_string(),
            "120000".to_string(),
        )],
        nm_props: vec![],
    });
    let out = std::process::Command::new("prlimit")
        .args(["--pid", &c.rm.pid().to_string(), "--nofile=1024:1024"])
        .output()
        .expect("run prlimit");
    assert!(out.status.success(), "prlimit: {out:?}");
    let rm = addr(&c.rm_addr);
    let started = Instant::now();
    let idle: Vec<TcpStream> = (0..1100)
        .map(|_| connect_from(Ipv4Addr::new(127, 0, 0, 8), rm))
        .collect();
    eprintln!(
        "opened {} idle connections in {:?}",
        idle.len(),
        started.elapsed()
    );
    // Past the grace an idle connection keeps before it may be closed to make room.
    std::thread::sleep(Duration::from_millis(1500));
    let t = Instant::now();
    for i in 0..14 {
        let (status, v) = c.get("/ws/v1/cluster/info");
        assert_eq!(status, 200, "probe {i}: {v}");
    }
    eprintln!("14 probes answered in {:?}", t.elapsed());
    let closed = idle.iter().filter(|s| !still_open(s)).count();
    eprintln!("{closed} idle connections were closed to make room");
    assert!(
        c.rm.log_text().contains("to make room"),
        "the RM logs the idle connections it closed:\n{}",
        c.rm.log_text()
    );
    drop(idle);
    let (status, _) = c.get("/ws/v1/cluster/info");
    assert_eq!(status, 200);
}
