//! Two HA ResourceManagers (`rm1`, `rm2`) on 127.0.0.1 sharing a one- (or three-) member
//! etcd of the test's own (`/usr/bin/etcd`), for the HA system tests: start and restart each RM, read
//! its `haState`, a client conf dir naming both, and the logs. Every process is killed by
//! pid and the directory removed when it is dropped.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use spindle_test_support::etcd::EtcdCluster;
use spindle_test_support::images::free_port;

use crate::{bin, conf, read_addr, spawn, wait_until, write_cluster_secret, Daemon, Rm};

/// The default lease of [`Ha::start`].
pub const LEASE_MS: u64 = 2000;

/// Fields drop in order: the RMs (killed by pid), then etcd, then the directory.
pub struct Ha {
    /// NodeManagers following the active ([`Ha::start_nm`]).
    pub nms: Vec<Daemon>,
    pub rms: [Option<Daemon>; 2],
    pub etcd: EtcdCluster,
    pub dir: tempfile::TempDir,
    pub conf_dir: PathBuf,
    pub secret: PathBuf,
    pub ports: [u16; 2],
    pub starts: usize,
    /// Follows no redirect: the test looks at the standby's 307s.
    pub http: reqwest::blocking::Client,
    pub lease_ms: u64,
    /// Properties every RM gets besides the HA ones.
    pub extra: Vec<(String, String)>,
}

impl Ha {
    /// Both RMs with automatic failover and a [`LEASE_MS`] lease.
    pub fn start() -> Self {
        Self::start_with(LEASE_MS, &[])
    }

    /// Both RMs with a lease of `lease_ms` and `extra` properties each.
    pub fn start_with(lease_ms: u64, extra: &[(&str, &str)]) -> Self {
        Self::start_on(1, lease_ms, extra)
    }

    /// [`Ha::start_with`] on an etcd of `members` members (1 or 3).
    pub fn start_on(members: usize, lease_ms: u64, extra: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let etcd = EtcdCluster::start(dir.path(), members);
        let conf_dir = conf::write_conf_dir(&dir.path().join("conf"), &[]);
        let secret = dir.path().join("cluster-secret");
        write_cluster_secret(&secret);
        let http = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("client");
        let mut ha = Ha {
            dir,
            etcd,
            conf_dir,
            secret,
            ports: [free_port(), free_port()],
            rms: [None, None],
            nms: Vec::new(),
            starts: 0,
            http,
            lease_ms,
            extra: extra
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        ha.start_rm(0);
        ha.start_rm(1);
        ha
    }

    pub fn base(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.ports[i])
    }

    pub fn rm(&self, i: usize) -> Rm<'_> {
        Rm {
            http: &self.http,
            base: self.base(i),
        }
    }

    /// Starts `rm<i+1>` on its configured port, its directories its own.
    pub fn start_rm(&mut self, i: usize) {
        self.starts += 1;
        let rm_dir = self.dir.path().join(format!("rm{}", i + 1));
        std::fs::create_dir_all(&rm_dir).expect("rm dir");
        let address = rm_dir.join("address");
        let _ = std::fs::remove_file(&address);
        let extra = conf::ha_rm_props(
            i,
            &[self.address(0), self.address(1)],
            &self.etcd.endpoints(),
            "ha-system-test",
            self.lease_ms,
        );
        let extra: Vec<(String, String)> = extra.into_iter().chain(self.extra.clone()).collect();
        let props = conf::rm_props(&self.secret, "127.0.0.1", &rm_dir, &extra);
        let args = conf::daemon_args(&self.conf_dir, &props, &address);
        let mut d = spawn(
            &format!("rm{}", i + 1),
            &bin("resourcemanager"),
            &args,
            self.dir
                .path()
                .join(format!("rm{}-{}.log", i + 1, self.starts)),
            &[],
        );
        read_addr(&address, &mut d);
        self.rms[i] = Some(d);
    }

    /// `haState` of `rm<i+1>`, or None when it does not answer.
    pub fn ha_state(&self, i: usize) -> Option<String> {
        let r = self
            .http
            .get(format!("{}/ws/v1/cluster/info", self.base(i)))
            .send()
            .ok()?;
        let v: Value = r.json().ok()?;
        v["clusterInfo"]["haState"].as_str().map(str::to_string)
    }

    /// Waits until exactly one RM is ACTIVE and the other STANDBY; returns the active's index.
    pub fn wait_roles(&self, within: Duration) -> usize {
        // A standby says STANDBY as soon as it serves, and redirects once it has read the
        // election key (until then it answers 503 with `Retry-After`).
        wait_until(
            "one ACTIVE and one STANDBY RM that redirects to it",
            within,
            || settled_active([self.ha_state(0), self.ha_state(1)], |i| self.redirects(i)),
        )
    }

    /// Whether `rm<i+1>` redirects a REST call (a standby that knows the active).
    fn redirects(&self, i: usize) -> bool {
        let url = format!("{}/ws/v1/cluster/apps", self.base(i));
        self.http
            .get(url)
            .send()
            .is_ok_and(|r| r.status() == reqwest::StatusCode::TEMPORARY_REDIRECT)
    }

    pub fn logs(&self) -> String {
        let mut out = String::new();
        for e in std::fs::read_dir(self.dir.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "log") && !is_etcd_log(&p) {
                out += &format!(
                    "--- {}\n{}\n",
                    p.display(),
                    std::fs::read_to_string(&p).unwrap_or_default()
                );
            }
        }
        out
    }
}

pub fn is_etcd_log(p: &Path) -> bool {
    p.file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("etcd"))
}

impl Ha {
    /// `127.0.0.1:<port>` of `rm<i+1>`, as the conf dir names it.
    pub fn address(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.ports[i])
    }

    /// The HA settings every client reads (`yarn.resourcemanager.ha.enabled`, `rm-ids`,
    /// each `webapp.address.<id>`), as `(key, value)`.
    pub fn client_props(&self) -> Vec<(String, String)> {
        conf::ha_client_props(&[self.address(0), self.address(1)])
    }

    /// Starts a NodeManager given both RMs by id (no `spindle.nodemanager.rm-address`),
    /// with `extra` properties (say, fake GPUs); it registers with whichever is active.
    pub fn start_nm(&mut self, extra: &[(String, String)]) {
        let i = self.nms.len();
        let d = self.dir.path().join(format!("nm{i}"));
        std::fs::create_dir_all(&d).expect("nm dir");
        let props = conf::ha_nm_props(
            "127.0.0.1",
            &[self.address(0), self.address(1)],
            &d,
            &self.secret,
            extra,
        );
        let args = conf::daemon_args(&self.conf_dir, &props, &d.join("address"));
        let mut nm = spawn(
            &format!("nodemanager{i}"),
            &bin("nodemanager"),
            &args,
            self.dir.path().join(format!("nm{i}.log")),
            &[],
        );
        read_addr(&d.join("address"), &mut nm);
        self.nms.push(nm);
    }

    /// A client conf dir (`yarn-site.xml`) naming both RMs by id, as a CLI user has it.
    pub fn client_conf(&self) -> PathBuf {
        let dir = self.dir.path().join("client-conf");
        let props: String = self
            .client_props()
            .iter()
            .map(|(k, v)| {
                format!(
                    "  <property>\n    <name>{k}</name>\n    <value>{v}</value>\n  </property>\n"
                )
            })
            .collect();
        let site = format!("<configuration>\n{props}</configuration>\n");
        conf::write_conf_dir(&dir, &[("yarn-site.xml", &site)])
    }

    /// Runs `spindle` with the client conf dir and no RM address of its own.
    pub fn spindle(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new(bin("spindle"))
            .args(args)
            .env("SPINDLE_CONF_DIR", self.client_conf())
            .env_remove("SPINDLE_RM_ADDRESS")
            .output()
            .expect("run spindle")
    }
}

/// Of two RMs' `haState`s, the active's index once one is ACTIVE and the other a STANDBY
/// that `redirects` (a standby says STANDBY before it has read the election key).
pub fn settled_active(
    states: [Option<String>; 2],
    redirects: impl Fn(usize) -> bool,
) -> Option<usize> {
    match (states[0].as_deref(), states[1].as_deref()) {
        (Some("ACTIVE"), Some("STANDBY")) if redirects(1) => Some(0),
        (Some("STANDBY"), Some("ACTIVE")) if redirects(0) => Some(1),
        _ => None,
    }
}
