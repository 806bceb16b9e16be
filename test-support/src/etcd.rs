//! An etcd cluster of the test's own: one or three members of Debian's `etcd-server`
//! (`/usr/bin/etcd`, 3.4) on 127.0.0.1 with ephemeral ports ([`EtcdCluster::start`]), or
//! each member on a host of a cluster of hosts, in that host's network namespace on its
//! address ([`EtcdCluster::start_placed`], [`Place`]); data directories under the test's
//! temporary directory; every member is killed by its pid when the cluster is dropped.
//! `.ci/run` installs the package.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::images::free_port;

/// Where Debian installs the server.
pub const ETCD: &str = "/usr/bin/etcd";

/// Whether the etcd server is installed; else skips with the reason (a failure under CI).
pub fn present(test: &str) -> bool {
    if Path::new(ETCD).exists() {
        return true;
    }
    crate::require::skip(
        test,
        format_args!("{ETCD} is missing (.ci/run installs etcd-server)"),
    );
    false
}

/// Where a member runs: its address, and the network namespace (a path such as
/// `/run/netns/<name>`) it is started in and probed from; None for the test's own.
#[derive(Debug, Clone)]
pub struct Place {
    pub ip: String,
    pub netns: Option<PathBuf>,
}

/// The client and peer ports of a member in a network namespace of its own (etcd's).
const PLACED_PORTS: (u16, u16) = (2379, 2380);

/// One member: its process (None once killed), place, ports and data directory.
struct Member {
    name: String,
    child: Option<Child>,
    place: Place,
    client_port: u16,
    peer_port: u16,
    data: PathBuf,
    log: PathBuf,
}

/// A running etcd cluster on 127.0.0.1.
pub struct EtcdCluster {
    members: Vec<Member>,
    initial_cluster: String,
}

impl EtcdCluster {
    /// Starts `n` members with data under `dir` and waits (at most 30 s) until every one
    /// answers `/health`.
    pub fn start(dir: &Path, n: usize) -> Self {
        let local = Place {
            ip: "127.0.0.1".into(),
            netns: None,
        };
        Self::start_placed(dir, &vec![local; n])
    }

    /// Starts one member at each of `places` (a member in a namespace of its own on etcd's
    /// ports 2379 and 2380, else on ephemeral ports), data under `dir`, and waits (at most
    /// 30 s) until every one answers `/health`.
    pub fn start_placed(dir: &Path, places: &[Place]) -> Self {
        let n = places.len();
        let mut members: Vec<Member> = places
            .iter()
            .enumerate()
            .map(|(i, place)| {
                let (client_port, peer_port) = match place.netns {
                    Some(_) => PLACED_PORTS,
                    None => (free_port(), free_port()),
                };
                Member {
                    name: format!("m{i}"),
                    child: None,
                    place: place.clone(),
                    client_port,
                    peer_port,
                    data: dir.join(format!("etcd-m{i}")),
                    log: dir.join(format!("etcd-m{i}.log")),
                }
            })
            .collect();
        let initial_cluster = members
            .iter()
            .map(|m| format!("{}=http://{}:{}", m.name, m.place.ip, m.peer_port))
            .collect::<Vec<_>>()
            .join(",");
        let mut cluster = Self {
            members: Vec::new(),
            initial_cluster,
        };
        for m in &mut members {
            m.child = Some(cluster.spawn(m, "new"));
        }
        cluster.members = members;
        for i in 0..n {
            cluster.wait_healthy(i, Duration::from_secs(30));
        }
        cluster
    }

    fn spawn(&self, m: &Member, state: &str) -> Child {
        let client = format!("http://{}:{}", m.place.ip, m.client_port);
        let peer = format!("http://{}:{}", m.place.ip, m.peer_port);
        let log = std::fs::File::create(&m.log).expect("etcd log file");
        let mut cmd = match &m.place.netns {
            // nsenter execs etcd: the child's pid is the member's.
            Some(ns) => {
                let mut c = Command::new("nsenter");
                c.arg(format!("--net={}", ns.display())).arg("--").arg(ETCD);
                c
            }
            None => Command::new(ETCD),
        };
        cmd.args(["--name", &m.name])
            .arg("--data-dir")
            .arg(&m.data)
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &self.initial_cluster])
            .args(["--initial-cluster-state", state])
            .args(["--initial-cluster-token", "spindle-test"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("etcd log file"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {ETCD}: {e}"))
    }

    /// Every member's client URL (`http://<ip>:<port>`), comma-separated as
    /// `spindle.ha.etcd.endpoints` takes them.
    pub fn endpoints(&self) -> String {
        self.members
            .iter()
            .map(|m| format!("http://{}:{}", m.place.ip, m.client_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The endpoints as a list.
    pub fn endpoint_list(&self) -> Vec<String> {
        self.endpoints().split(',').map(str::to_string).collect()
    }

    /// Kills member `i` (SIGKILL, by its pid) and reaps it; its data stays.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts member `i` again on its data and ports, and waits until it is healthy.
    pub fn restart(&mut self, i: usize) {
        self.kill(i);
        let child = self.spawn(&self.members[i], "existing");
        self.members[i].child = Some(child);
        self.wait_healthy(i, Duration::from_secs(30));
    }

    /// Sends `sig` (say SIGSTOP, SIGCONT) to member `i`.
    pub fn signal(&self, i: usize, sig: Signal) {
        if let Some(c) = &self.members[i].child {
            let _ = kill(Pid::from_raw(c.id() as i32), sig);
        }
    }

    fn wait_healthy(&mut self, i: usize, within: Duration) {
        let deadline = Instant::now() + within;
        let (port, place) = (self.members[i].client_port, self.members[i].place.clone());
        while Instant::now() < deadline {
            if let Some(Ok(Some(status))) = self.members[i].child.as_mut().map(Child::try_wait) {
                let log = std::fs::read_to_string(&self.members[i].log).unwrap_or_default();
                panic!("etcd member {i} exited ({status}):\n{log}");
            }
            if health(&place, port).is_some_and(|body| body.contains("\"true\"")) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let log = std::fs::read_to_string(&self.members[i].log).unwrap_or_default();
        panic!("etcd member {i} not healthy within {within:?}:\n{log}");
    }
}

/// `GET /health` on a member's client port, from its network namespace, as plain HTTP/1.0;
/// None when it does not answer.
fn health(place: &Place, port: u16) -> Option<String> {
    match &place.netns {
        None => health_at(&place.ip, port),
        Some(ns) => {
            let (ns, ip) = (ns.clone(), place.ip.clone());
            std::thread::spawn(move || {
                let f = std::fs::File::open(&ns).ok()?;
                nix::sched::setns(&f, nix::sched::CloneFlags::CLONE_NEWNET).ok()?;
                health_at(&ip, port)
            })
            .join()
            .ok()
            .flatten()
        }
    }
}

fn health_at(ip: &str, port: u16) -> Option<String> {
    let mut s = TcpStream::connect((ip, port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    Some(body)
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.signal(i, Signal::SIGCONT);
            self.kill(i);
        }
    }
}
