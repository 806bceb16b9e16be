//! A cluster of hosts: the RM and each NodeManager run as a separate host, with
//!
//! - its own network namespace, address and link ([`net`]: a veth pair to a bridge in a
//!   "switch" namespace; nothing is created in the root namespace), so RM <-> NM and
//!   AM <-> RM traffic crosses the links and [`Hosts::cut`] / [`Hosts::restore`] partition a
//!   host. Every daemon binds its host's address (never 127.0.0.1): the RM
//!   `yarn.resourcemanager.webapp.address`, each NM `yarn.nodemanager.webapp.address`, so
//!   an NM registers as `<its address>:<port>` and the RM tells AMs its own address;
//! - its own UTS namespace (host name `rm`, `nm0`, ...; a private `/etc/hosts` names every
//!   host, so the names resolve on each of them) and mount namespace: a private tmpfs on
//!   `/tmp`, its own directories (`<dir>/hosts/<name>`: the NM's local, log and recovery
//!   dirs, the RM's state store), and every other host's directory hidden under an empty
//!   read-only tmpfs, so no file is shared between hosts by accident. The binaries (the
//!   build's target dir) and `<dir>/conf`, `<dir>/cluster-secret` are readable by all,
//!   like a configuration management system's copy on each machine. `<dir>` is under the
//!   build's target dir, not `/tmp`, which each host replaces.
//!
//! The test speaks from the switch: its HTTP client ([`Hosts::rest`]) was built in a thread
//! that entered the switch's namespace, and the CLI ([`Hosts::spindle_within`]) runs there
//! through `nsenter --net`. A daemon is started as `nsenter --net=<host ns> unshare --mount
//! --uts --propagation private sh -c <set-up> ... exec <daemon>`: each step `exec`s the next,
//! so the [`Daemon`]'s pid is the daemon's and it is killed by pid. On drop: the daemons
//! (SIGTERM, then SIGKILL), then every process left in a host's namespace (containers), then
//! the namespaces (and with them the veths and the bridge), then the directory; the mount
//! namespaces end with their processes.
//!
//! A directory every host shares on purpose (a site's NFS export or parallel file system)
//! is asked for with [`HostsOpts::shared`]: one directory on the test's side
//! ([`Hosts::shared_source`]) bind-mounted into every host at the same path.
//!
//! What every cluster of hosts shares (directory, network, hosts, configuration, how a daemon
//! is started on a host) is [`site::Site`]; [`Hosts`] puts one RM on it, [`ha::HaHosts`] a
//! three-member etcd cluster and two HA RMs.
//!
//! Root only: [`available`] says why not, for the test to skip (or fail under `CI=true`).

pub mod ha;
pub mod net;
pub mod site;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::conf::{self, Props};
use crate::rest::Rm;
use crate::{output_within, read_addr, Daemon};
pub use site::{Host, Site};

/// Why this machine cannot run a cluster of hosts.
#[derive(Debug)]
pub enum Unavailable {
    NotRoot,
    MissingTool(&'static str),
    /// `ip netns add` was refused (a container without `CAP_SYS_ADMIN`, ...).
    NoNetns(String),
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unavailable::NotRoot => write!(f, "not root (network and mount namespaces)"),
            Unavailable::MissingTool(t) => write!(f, "`{t}` is not installed"),
            Unavailable::NoNetns(e) => write!(f, "network namespaces are refused: {e}"),
        }
    }
}

/// Whether a cluster of hosts can run here: root, `ip`, `nsenter` and `unshare`, and a
/// network namespace that can be created.
pub fn available() -> Result<(), Unavailable> {
    if !nix::unistd::geteuid().is_root() {
        return Err(Unavailable::NotRoot);
    }
    for tool in ["ip", "nsenter", "unshare"] {
        let found = Command::new(tool)
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            return Err(Unavailable::MissingTool(tool));
        }
    }
    let (pid, n) = net::unique();
    let probe = format!("sp{pid}-{n}-probe");
    net::ip(&["netns", "add", &probe]).map_err(Unavailable::NoNetns)?;
    let _ = net::ip(&["netns", "del", &probe]);
    Ok(())
}

/// A cluster of hosts started with `opts`, or None where this machine cannot run one: the
/// reason printed for `test`, or (under `CI=true`) the test failed.
pub fn start_or_skip(test: &str, opts: HostsOpts) -> Option<Hosts> {
    match available() {
        Ok(()) => Some(Hosts::start(opts)),
        Err(why) => {
            spindle_test_support::require::skip(test, why);
            None
        }
    }
}

/// What to start: `nms` NodeManager hosts, extra `-D` properties for the RM and the NMs,
/// extra files of the configuration directory, and the paths (absolute) at which every host
/// sees one shared directory each, as a shared file system mounted on every machine (under
/// `/tmp` too: mounted over the host's private `/tmp`).
#[derive(Default, Clone)]
pub struct HostsOpts {
    pub nms: usize,
    pub rm_props: Props,
    pub nm_props: Props,
    pub files: Vec<(String, String)>,
    pub shared: Vec<PathBuf>,
}

/// The RM host and NodeManager hosts, started and waited for (every NM RUNNING).
pub struct Hosts {
    pub rm: Daemon,
    pub nms: Vec<Daemon>,
    /// The RM's `host:port` (on the RM host's address).
    pub rm_addr: String,
    /// Each NM's NodeId, `host:port`.
    pub nm_addrs: Vec<String>,
    pub rm_host: Host,
    pub nm_hosts: Vec<Host>,
    pub site: Site,
}

/// `count` NodeManager hosts `nm0`, `nm1`, ... with the last octets from `first` on.
pub fn nm_host_names(count: usize, first: u8) -> Vec<(String, u8)> {
    (0..count)
        .map(|i| (format!("nm{i}"), first + i as u8))
        .collect()
}

/// Starts an NM on each of `hosts` with the properties `props` gives for the host and the
/// NM's directory (which RM or RMs it reports to among them), and returns each with its
/// NodeId.
pub fn start_nms(
    site: &Site,
    hosts: &[Host],
    props: impl Fn(&Host, &Path) -> Props,
) -> (Vec<Daemon>, Vec<String>) {
    let mut nms = vec![];
    let mut nm_addrs = vec![];
    for h in hosts {
        let d = h.dir.join("nm");
        std::fs::create_dir_all(&d).expect("nm dir");
        let args = conf::daemon_args(&site.conf_dir, &props(h, &d), &d.join("address"));
        let mut nm = site.start_on(h, 0, "nodemanager", &args);
        nm_addrs.push(read_addr(&d.join("address"), &mut nm));
        nms.push(nm);
    }
    (nms, nm_addrs)
}

impl Hosts {
    pub fn start(opts: HostsOpts) -> Hosts {
        let mut names = vec![("rm".to_string(), 1)];
        names.extend(nm_host_names(opts.nms, 10));
        let site = Site::create(&names, &opts.files, &opts.shared);
        let rm_host = site.host("rm").clone();
        let nm_hosts: Vec<Host> = site.hosts[1..].to_vec();
        let rm_dir = rm_host.dir.join("rm");
        let props = conf::rm_props(&site.secret, &rm_host.link.ip, &rm_dir, &opts.rm_props);
        let args = conf::daemon_args(&site.conf_dir, &props, &rm_dir.join("address"));
        std::fs::create_dir_all(&rm_dir).expect("rm dir");
        let mut rm = site.start_on(&rm_host, 0, "resourcemanager", &args);
        let rm_addr = read_addr(&rm_dir.join("address"), &mut rm);
        let (nms, nm_addrs) = start_nms(&site, &nm_hosts, |h, d| {
            conf::nm_props(&h.link.ip, &rm_addr, d, Some(&site.secret), &opts.nm_props)
        });
        let c = Hosts {
            rm,
            nms,
            rm_addr,
            nm_addrs,
            rm_host,
            nm_hosts,
            site,
        };
        c.rest().wait_nodes_running(opts.nms);
        c
    }

    /// The RM's REST API, from the switch.
    pub fn rest(&self) -> Rm<'_> {
        Rm {
            http: &self.site.http,
            base: format!("http://{}", self.rm_addr),
        }
    }

    /// Cuts `host` off the network (its link down): nothing it sends arrives, nothing
    /// reaches it; its processes go on.
    pub fn cut(&self, host: &Host) {
        self.site.cut(host);
    }

    /// Puts `host` back on the network.
    pub fn restore(&self, host: &Host) {
        self.site.restore(host);
    }

    /// The NM host whose NM has NodeId (or HTTP address) `node`.
    pub fn nm_host_of(&self, node: &str) -> Option<&Host> {
        host_of(&self.nm_hosts, node)
    }

    /// Every process on `host` (in its network namespace) and its command line.
    pub fn processes(&self, host: &Host) -> Vec<(i32, String)> {
        self.site.processes(host)
    }

    /// Runs the `spindle` CLI on the switch against this cluster; killed (and the test
    /// failed) past `timeout`.
    pub fn spindle_within(&self, args: &[&str], timeout: Duration) -> std::process::Output {
        output_within(self.spindle_command(args), timeout)
    }

    /// The command line of the `spindle` CLI on the switch against this cluster (for a
    /// caller that sets its working directory, or starts it and goes on).
    pub fn spindle_command(&self, args: &[&str]) -> Command {
        self.site.spindle_command(args, &self.rm_addr)
    }

    /// The source, on the test's side, of the shared directory every host sees at `at`.
    pub fn shared_source(&self, at: &Path) -> Option<&Path> {
        self.site.shared_source(at)
    }

    /// Every daemon's log, for a failure's message.
    pub fn logs(&self) -> String {
        let mut s = format!("---- rm ----\n{}", self.rm.log_text());
        for nm in &self.nms {
            s.push_str(&format!("\n---- {} ----\n{}", nm.name, nm.log_text()));
        }
        s
    }
}

/// The host of `hosts` whose NM has NodeId (or HTTP address) `node`.
pub fn host_of<'h>(hosts: &'h [Host], node: &str) -> Option<&'h Host> {
    let host = node.trim_start_matches("http://").split(':').next()?;
    hosts.iter().find(|h| h.link.ip == host || h.name == host)
}
