//! What every cluster of hosts shares, whatever runs on the hosts: the directory (under the
//! build's target dir), the network ([`Net`]: the switch and one namespace per host), the
//! hosts themselves with the `/etc/hosts` naming them all, the configuration directory, the
//! cluster secret, the shared directories and the test's HTTP client on the switch; and how
//! a daemon is started on a host ([`Site::start_on`]) and what runs there
//! ([`Site::processes`]). [`super::Hosts`] (one RM) and [`super::ha::HaHosts`] (two RMs and
//! an etcd cluster) are built on it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::net::{self, Link, Net};
use crate::conf;
use crate::{bin, bin_dir, spawn_command, write_cluster_secret, Daemon};

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

/// The directory, network, hosts and configuration of one cluster of hosts. Fields drop in
/// order: the network (every process left in a host's namespace killed, the namespaces
/// deleted), then the directory.
pub struct Site {
    /// Every host, in the order they were asked for.
    pub hosts: Vec<Host>,
    pub conf_dir: PathBuf,
    /// The cluster secret file every daemon reads.
    pub secret: PathBuf,
    /// A client living on the switch (the test's vantage point).
    pub http: reqwest::blocking::Client,
    /// Each shared directory: its path on every host, and its source on the test's side.
    pub shared: Vec<(PathBuf, PathBuf)>,
    pub net: Net,
    pub dir: tempfile::TempDir,
}

impl Site {
    /// Creates the directory, the switch and one host per `(name, last octet)` of `hosts`,
    /// the configuration directory with `files`, the cluster secret and the `shared`
    /// directories (absolute paths every host sees).
    pub fn create(hosts: &[(String, u8)], files: &[(String, String)], shared: &[PathBuf]) -> Site {
        let root = bin_dir().join("hosts-tests");
        std::fs::create_dir_all(&root).expect("hosts-tests dir");
        std::fs::create_dir_all(OLD_TMP).expect("a mount point for the machine's /tmp");
        let dir = tempfile::Builder::new()
            .prefix("hosts-")
            .tempdir_in(&root)
            .expect("tempdir");
        let mut net = Net::create();
        let hosts: Vec<Host> = hosts
            .iter()
            .map(|(name, octet)| {
                let d = dir.path().join("hosts").join(name);
                std::fs::create_dir_all(&d).expect("host dir");
                Host {
                    name: name.clone(),
                    link: net.add_host(name, *octet),
                    dir: d,
                }
            })
            .collect();
        let shared: Vec<(PathBuf, PathBuf)> = shared
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
        let mut etc_hosts = format!("127.0.0.1 localhost\n{} switch\n", net.switch_ip);
        for h in &hosts {
            etc_hosts.push_str(&format!("{} {}\n", h.link.ip, h.name));
        }
        std::fs::write(dir.path().join("etc-hosts"), etc_hosts).expect("hosts file");
        let files: Vec<(&str, &str)> = files
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
        Site {
            hosts,
            conf_dir,
            secret,
            http,
            shared,
            net,
            dir,
        }
    }

    /// The host named `name`.
    pub fn host(&self, name: &str) -> &Host {
        self.hosts
            .iter()
            .find(|h| h.name == name)
            .unwrap_or_else(|| panic!("no host {name}"))
    }

    /// Starts `program` (a binary of this build) with `args` on host `h`, the directories of
    /// the other hosts hidden and the shared directories mounted; logs to
    /// `<dir>/<host>.log`, or `<dir>/<host>-<n>.log` for the `n`th start after the first
    /// (`n` = `run`).
    pub fn start_on(&self, h: &Host, run: usize, program: &str, args: &[String]) -> Daemon {
        let hidden: Vec<&Path> = self
            .hosts
            .iter()
            .filter(|o| o.name != h.name)
            .map(|o| o.dir.as_path())
            .collect();
        let dir = self.dir.path();
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
            .arg(self.shared.len().to_string())
            .args(self.shared.iter().flat_map(|(at, source)| [source, at]))
            .arg(bin(program))
            .args(args);
        let log = match run {
            0 => format!("{}.log", h.name),
            n => format!("{}-{n}.log", h.name),
        };
        spawn_command(&format!("{program}@{}", h.name), cmd, dir.join(log))
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

    /// The command line of the `spindle` CLI on the switch, given the RMs `rm_address`
    /// (`host:port`, comma-separated for several) and the cluster's configuration directory.
    pub fn spindle_command(&self, args: &[&str], rm_address: &str) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--net={}", net::netns_path(&self.net.switch)))
            .arg("--")
            .arg(bin("spindle"))
            .args(args)
            .env("SPINDLE_RM_ADDRESS", rm_address)
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
}
