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
//! Root only: [`available`] says why not, for the test to skip (or fail under `CI=true`).

pub mod net;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::conf::{self, Props};
use crate::rest::Rm;
use crate::{bin, bin_dir, output_within, read_addr, spawn_command, write_cluster_secret, Daemon};
use net::{Link, Net};

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

/// A host of the cluster.
#[derive(Clone, Debug)]
pub struct Host {
    /// Its host name (`rm`, `nm0`, ...).
    pub name: String,
    pub link: Link,
    /// Its private directory (hidden from the other hosts).
    pub dir: PathBuf,
}

/// The set-up each host runs in its new mount and UTS namespaces before `exec`ing the
/// daemon: `$1` host name, `$2` the cluster's hosts file, `$3` how many directories to
/// hide, those directories, how many shared directories, each one's source and path, then
/// the daemon's command line.
const HOST_INIT: &str = r#"set -e
echo "$1" > /proc/sys/kernel/hostname
keep="$4"
if [ -n "$keep" ]; then mount --bind /tmp "$5"; fi
mount -t tmpfs -o mode=1777,size=512m host-tmp /tmp
if [ -n "$keep" ]; then mkdir -p "$keep"; mount --bind "$5/${keep#/tmp/}" "$keep"; umount "$5"; fi
mount --bind "$2" /etc/hosts
k="$3"; shift 5
while [ "$k" -gt 0 ]; do mount -t tmpfs -o ro,size=4k,mode=0555 other-host "$1"; shift; k=$((k-1)); done
k="$1"; shift
while [ "$k" -gt 0 ]; do mkdir -p "$2"; mount --bind "$1" "$2"; shift 2; k=$((k-1)); done
exec "$@""#;

/// Where a host's init holds the machine's `/tmp` for a moment (in its own mount namespace)
/// while it mounts its private one: created once, never mounted in the test's namespace.
const OLD_TMP: &str = "/run/spindle-hosts-old-tmp";

/// The directory right under `/tmp` that holds the harness's files (a checkout under
/// `/tmp`, as a clean CI clone may be): each host mounts it again over its private `/tmp`,
/// so the binaries, the configuration and the hosts' directories stay where they are.
fn kept_under_tmp(dir: &Path) -> Option<String> {
    let rest = dir.strip_prefix("/tmp").ok()?;
    let top = rest.components().next()?;
    Some(Path::new("/tmp").join(top).to_string_lossy().into_owned())
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
    pub conf_dir: PathBuf,
    /// A client living on the switch (the test's vantage point).
    pub http: reqwest::blocking::Client,
    /// Each shared directory: its path on every host, and its source on the test's side.
    pub shared: Vec<(PathBuf, PathBuf)>,
    net: Net,
    pub dir: tempfile::TempDir,
}

impl Hosts {
    pub fn start(opts: HostsOpts) -> Hosts {
        let root = bin_dir().join("hosts-tests");
        std::fs::create_dir_all(&root).expect("hosts-tests dir");
        std::fs::create_dir_all(OLD_TMP).expect("a mount point for the machine's /tmp");
        let dir = tempfile::Builder::new()
            .prefix("hosts-")
            .tempdir_in(&root)
            .expect("tempdir");
        let mut net = Net::create();
        let mut host = |name: &str, octet: u8| {
            let d = dir.path().join("hosts").join(name);
            std::fs::create_dir_all(&d).expect("host dir");
            Host {
                name: name.to_string(),
                link: net.add_host(name, octet),
                dir: d,
            }
        };
        let shared: Vec<(PathBuf, PathBuf)> = opts
            .shared
            .iter()
            .enumerate()
            .map(|(i, at)| {
                assert!(
                    at.is_absolute(),
                    "a shared directory's path: {}",
                    at.display()
                );
                let source = dir.path().join("shared").join(i.to_string());
                std::fs::create_dir_all(&source).expect("shared dir");
                // Writable by every user, as a shared scratch file system.
                std::fs::set_permissions(&source, std::fs::Permissions::from_mode(0o1777))
                    .expect("shared dir mode");
                (at.clone(), source)
            })
            .collect();
        let rm_host = host("rm", 1);
        let nm_hosts: Vec<Host> = (0..opts.nms)
            .map(|i| host(&format!("nm{i}"), 10 + i as u8))
            .collect();
        let mut etc_hosts = format!("127.0.0.1 localhost\n{} switch\n", net.switch_ip);
        for h in std::iter::once(&rm_host).chain(&nm_hosts) {
            etc_hosts.push_str(&format!("{} {}\n", h.link.ip, h.name));
        }
        std::fs::write(dir.path().join("etc-hosts"), etc_hosts).expect("hosts file");
        let files: Vec<(&str, &str)> = opts
            .files
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        let conf_dir = conf::write_conf_dir(&dir.path().join("conf"), &files);
        let secret = dir.path().join("cluster-secret");
        write_cluster_secret(&secret);
        let http = net.in_switch(|| {
            reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .expect("client")
        });
        let all: Vec<Host> = std::iter::once(rm_host.clone())
            .chain(nm_hosts.iter().cloned())
            .collect();
        let rm_dir = rm_host.dir.join("rm");
        let props = conf::rm_props(&secret, &rm_host.link.ip, &rm_dir, &opts.rm_props);
        let args = conf::daemon_args(&conf_dir, &props, &rm_dir.join("address"));
        std::fs::create_dir_all(&rm_dir).expect("rm dir");
        let on = |h: &Host, program: &str, args: &[String]| {
            start_on(dir.path(), h, &all, &shared, program, args)
        };
        let mut rm = on(&rm_host, "resourcemanager", &args);
        let rm_addr = read_addr(&rm_dir.join("address"), &mut rm);
        let mut nms = vec![];
        let mut nm_addrs = vec![];
        for h in &nm_hosts {
            let d = h.dir.join("nm");
            std::fs::create_dir_all(&d).expect("nm dir");
            let props = conf::nm_props(&h.link.ip, &rm_addr, &d, Some(&secret), &opts.nm_props);
            let args = conf::daemon_args(&conf_dir, &props, &d.join("address"));
            let mut nm = on(h, "nodemanager", &args);
            nm_addrs.push(read_addr(&d.join("address"), &mut nm));
            nms.push(nm);
        }
        let c = Hosts {
            rm,
            nms,
            rm_addr,
            nm_addrs,
            rm_host,
            nm_hosts,
            conf_dir,
            http,
            shared,
            net,
            dir,
        };
        c.rest().wait_nodes_running(opts.nms);
        c
    }

    /// The RM's REST API, from the switch.
    pub fn rest(&self) -> Rm<'_> {
        Rm {
            http: &self.http,
            base: format!("http://{}", self.rm_addr),
        }
    }

    /// Cuts `host` off the network (its link down): nothing it sends arrives, nothing
    /// reaches it; its processes go on.
    pub fn cut(&self, host: &Host) {
        self.net.set_link(&host.link, false);
    }

    /// Puts `host` back on the network.
    pub fn restore(&self, host: &Host) {
        self.net.set_link(&host.link, true);
    }

    /// The NM host whose NM has NodeId (or HTTP address) `node`.
    pub fn nm_host_of(&self, node: &str) -> Option<&Host> {
        let host = node.trim_start_matches("http://").split(':').next()?;
        self.nm_hosts
            .iter()
            .find(|h| h.link.ip == host || h.name == host)
    }

    /// Every process on `host` (in its network namespace) and its command line, its
    /// arguments joined by spaces.
    pub fn processes(&self, host: &Host) -> Vec<(i32, String)> {
        net::pids_in(&host.link.netns)
            .into_iter()
            .filter_map(|p| {
                let raw = std::fs::read(format!("/proc/{p}/cmdline")).ok()?;
                let args: Vec<String> = raw
                    .split(|b| *b == 0)
                    .filter(|a| !a.is_empty())
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect();
                Some((p, args.join(" ")))
            })
            .collect()
    }

    /// Runs the `spindle` CLI on the switch against this cluster; killed (and the test
    /// failed) past `timeout`.
    pub fn spindle_within(&self, args: &[&str], timeout: Duration) -> std::process::Output {
        output_within(self.spindle_command(args), timeout)
    }

    /// The command line of the `spindle` CLI on the switch against this cluster (for a
    /// caller that sets its working directory, or starts it and goes on).
    pub fn spindle_command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--net={}", net::netns_path(&self.net.switch)))
            .arg("--")
            .arg(bin("spindle"))
            .args(args)
            .env("SPINDLE_RM_ADDRESS", &self.rm_addr)
            .env("SPINDLE_CONF_DIR", &self.conf_dir);
        cmd
    }

    /// The source, on the test's side, of the shared directory every host sees at `at`.
    pub fn shared_source(&self, at: &Path) -> Option<&Path> {
        self.shared
            .iter()
            .find(|(p, _)| p == at)
            .map(|(_, s)| s.as_path())
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

/// Starts `program` (a binary of this build) with `args` on host `h`, the directories of
/// the other hosts of `all` hidden and the `shared` directories (path, source) mounted;
/// logs to `<dir>/<host>.log`.
fn start_on(
    dir: &Path,
    h: &Host,
    all: &[Host],
    shared: &[(PathBuf, PathBuf)],
    program: &str,
    args: &[String],
) -> Daemon {
    let hidden: Vec<&Path> = all
        .iter()
        .filter(|o| o.name != h.name)
        .map(|o| o.dir.as_path())
        .collect();
    let mut cmd = Command::new("nsenter");
    cmd.arg(format!("--net={}", net::netns_path(&h.link.netns)))
        .args([
            "--",
            "unshare",
            "--mount",
            "--uts",
            "--propagation",
            "private",
            "--",
        ])
        .args(["/bin/sh", "-c", HOST_INIT, "host-init", &h.name])
        .arg(dir.join("etc-hosts"))
        .arg(hidden.len().to_string())
        .arg(kept_under_tmp(dir).unwrap_or_default())
        .arg(OLD_TMP)
        .args(hidden)
        .arg(shared.len().to_string())
        .args(shared.iter().flat_map(|(at, source)| [source, at]))
        .arg(bin(program))
        .args(args);
    spawn_command(
        &format!("{program}@{}", h.name),
        cmd,
        dir.join(format!("{}.log", h.name)),
    )
}
