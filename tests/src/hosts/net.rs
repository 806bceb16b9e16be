//! The network of a cluster of hosts: a "switch" network namespace holding a bridge (with
//! the address the test itself speaks from), and one network namespace per host, joined to
//! the bridge by a veth pair. Nothing is created in the root namespace: each veth is made
//! with one end in the switch and the other in the host (`ip -n SW link add ... peer ...
//! netns HOST`), so interface names only need to be unique inside their namespace, and the
//! namespaces' names carry the test process's pid and a counter.
//!
//! A link is cut by setting its switch end down (the host sees no carrier; nothing it sends
//! arrives, nothing reaches it) and restored by setting it up. This kernel has no `netem`
//! qdisc (`tc qdisc add ... netem` fails with "Specified qdisc kind is unknown"), so delay
//! and loss are not modelled: a partition is all or nothing.

use std::fs::File;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// This process's pid and a number no other call in it gets: what makes a namespace's name
/// unique among parallel tests.
pub fn unique() -> (u32, u32) {
    static N: AtomicU32 = AtomicU32::new(0);
    (std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

/// Where `ip netns add` puts a namespace's handle.
pub fn netns_path(netns: &str) -> String {
    format!("/run/netns/{netns}")
}

/// Runs `ip args`; its stderr when it fails.
pub fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn must(args: &[&str]) {
    ip(args).unwrap_or_else(|e| panic!("{e}"));
}

/// One host's place on the network.
#[derive(Clone, Debug)]
pub struct Link {
    /// The host's network namespace.
    pub netns: String,
    /// The host's address on the test subnet.
    pub ip: String,
    /// The veth end on the switch: set down to cut the host off.
    pub port: String,
}

/// The switch and the hosts' namespaces; every one is deleted on drop, after the processes
/// still in a host's namespace are killed.
pub struct Net {
    pub switch: String,
    /// The test's own address (on the switch's bridge).
    pub switch_ip: String,
    subnet: String,
    prefix: String,
    pub links: Vec<Link>,
}

impl Net {
    /// A switch namespace with bridge `br0`, up, at `<subnet>.254/24`, where the subnet is
    /// `10.213.<x>` with `x` from the pid and a counter (each switch is a network of its
    /// own, so subnets could not collide anyway; the variety keeps logs apart).
    pub fn create() -> Net {
        let (pid, n) = unique();
        let prefix = format!("sp{pid}-{n}");
        let subnet = format!("10.213.{}", (pid + n) % 250 + 1);
        let switch = format!("{prefix}-sw");
        let net = Net {
            switch_ip: format!("{subnet}.254"),
            switch: switch.clone(),
            subnet,
            prefix,
            links: vec![],
        };
        must(&["netns", "add", &switch]);
        must(&["-n", &switch, "link", "set", "lo", "up"]);
        must(&["-n", &switch, "link", "add", "br0", "type", "bridge"]);
        let addr = format!("{}/24", net.switch_ip);
        must(&["-n", &switch, "addr", "add", &addr, "dev", "br0"]);
        must(&["-n", &switch, "link", "set", "br0", "up"]);
        net
    }

    /// A host `name` (short: it names the switch port `p-<name>`) with address
    /// `<subnet>.<octet>`: its namespace, `lo` and `eth0` up, `eth0` on the bridge.
    pub fn add_host(&mut self, name: &str, octet: u8) -> Link {
        let port = format!("p-{name}");
        assert!(port.len() <= 15, "interface name {port} is too long");
        let link = Link {
            netns: format!("{}-{name}", self.prefix),
            ip: format!("{}.{octet}", self.subnet),
            port,
        };
        let (ns, sw) = (link.netns.as_str(), self.switch.as_str());
        must(&["netns", "add", ns]);
        self.links.push(link.clone());
        must(&["-n", ns, "link", "set", "lo", "up"]);
        must(&[
            "-n", sw, "link", "add", &link.port, "type", "veth", "peer", "name", "eth0", "netns",
            ns,
        ]);
        must(&["-n", sw, "link", "set", &link.port, "master", "br0"]);
        must(&["-n", sw, "link", "set", &link.port, "up"]);
        let addr = format!("{}/24", link.ip);
        must(&["-n", ns, "addr", "add", &addr, "dev", "eth0"]);
        must(&["-n", ns, "link", "set", "eth0", "up"]);
        link
    }

    /// Sets the switch end of `link` down (`up == false`) or up.
    pub fn set_link(&self, link: &Link, up: bool) {
        let state = if up { "up" } else { "down" };
        must(&["-n", &self.switch, "link", "set", &link.port, state]);
    }

    /// Cuts the traffic between `a` and `b` only (each other host still reaches both): a
    /// blackhole route to the other's address in each one's namespace, so what either sends
    /// the other is dropped without an answer, as on a lost path. [`Net::unsever`] ends it.
    pub fn sever(&self, a: &Link, b: &Link) {
        for (from, to) in [(a, b), (b, a)] {
            let dst = format!("{}/32", to.ip);
            must(&["-n", &from.netns, "route", "add", "blackhole", &dst]);
        }
    }

    /// Ends a [`Net::sever`] of `a` and `b`.
    pub fn unsever(&self, a: &Link, b: &Link) {
        for (from, to) in [(a, b), (b, a)] {
            let dst = format!("{}/32", to.ip);
            must(&["-n", &from.netns, "route", "del", "blackhole", &dst]);
        }
    }

    /// Builds `make()` in a thread that entered the switch's network namespace, so its
    /// sockets (a blocking `reqwest` client's runtime thread, started there, inherits the
    /// namespace) live on the test subnet. The test's own threads stay where they are.
    pub fn in_switch<T: Send + 'static>(&self, make: impl FnOnce() -> T + Send + 'static) -> T {
        let path = netns_path(&self.switch);
        std::thread::spawn(move || {
            let f = File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            nix::sched::setns(&f, nix::sched::CloneFlags::CLONE_NEWNET)
                .unwrap_or_else(|e| panic!("setns {path}: {e}"));
            make()
        })
        .join()
        .expect("the switch thread")
    }
}

/// The pids of the processes in network namespace `netns` (`ip netns pids`).
pub fn pids_in(netns: &str) -> Vec<i32> {
    Command::new("ip")
        .args(["netns", "pids", netns])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// SIGKILLs every process in `netns`, a few rounds (a dying parent may have forked).
fn kill_all_in(netns: &str) {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    for _ in 0..20 {
        let pids = pids_in(netns);
        if pids.is_empty() {
            return;
        }
        for p in pids {
            let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Removes every namespace this process created (`sp<pid>-...`), its processes killed first:
/// what the `Drop`s would have done, for a test binary that exits without them (the
/// [`crate::watchdog`]). The names of those it removed.
pub fn remove_this_process_namespaces() -> Vec<String> {
    let prefix = format!("sp{}-", std::process::id());
    let listed = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
        .unwrap_or_default();
    let ours: Vec<String> = listed
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&prefix))
        .map(str::to_string)
        .collect();
    for ns in &ours {
        kill_all_in(ns);
        let _ = ip(&["netns", "del", ns]);
    }
    ours
}

impl Drop for Net {
    fn drop(&mut self) {
        for l in &self.links {
            kill_all_in(&l.netns);
            let _ = ip(&["netns", "del", &l.netns]);
        }
        kill_all_in(&self.switch);
        let _ = ip(&["netns", "del", &self.switch]);
    }
}
