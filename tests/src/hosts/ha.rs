//! An HA cluster of hosts: a three-member etcd cluster, each member on a host of its own
//! (`etcd0`..`etcd2`, in its host's network namespace on etcd's ports), two ResourceManagers
//! (`rm1`, `rm2`, each on its own host at `<address>:8088`, the one cluster id
//! [`CLUSTER_ID`], automatic failover) and NodeManager hosts following whichever RM is active
//! (both RMs by id, as `docs/operations.md` sets them up). Partitions: [`Site::cut`] takes a
//! host off the network; [`HaHosts::cut_from_etcd`] severs only an RM's paths to the etcd
//! members (clients, NMs and the other RM still reach it). The store's history is read with
//! [`HaHosts::history`]. Root only, as every cluster of hosts; fields drop in order (RMs,
//! NMs, etcd members by pid, then the network and the directory).

use std::time::Duration;

use serde_json::Value;
use spindle_test_support::etcd::{EtcdCluster, Place};

use super::net::netns_path;
use super::{host_of, nm_host_names, start_nms, Host, Site};
use crate::conf::{self, Props};
use crate::etcd_history::EtcdHistory;
use crate::rest::Rm;
use crate::{output_within, read_addr, wait_until, Daemon};

/// `yarn.resourcemanager.cluster-id` of the cluster: its keys are under `/spindle/ha-hosts/`.
pub const CLUSTER_ID: &str = "ha-hosts";

/// The port each RM listens on, on its host's address.
pub const RM_PORT: u16 = 8088;

/// What to start: NodeManager hosts, the lease, extra `-D` properties for the RMs and the
/// NMs, and extra files of the configuration directory and shared directories (as
/// [`super::HostsOpts`]).
#[derive(Clone)]
pub struct HaHostsOpts {
    pub nms: usize,
    /// `spindle.ha.etcd.lease-ms`.
    pub lease_ms: u64,
    pub rm_props: Props,
    pub nm_props: Props,
    pub files: Vec<(String, String)>,
    pub shared: Vec<std::path::PathBuf>,
}

impl Default for HaHostsOpts {
    fn default() -> Self {
        HaHostsOpts {
            nms: 1,
            lease_ms: 2000,
            rm_props: vec![],
            nm_props: vec![],
            files: vec![],
            shared: vec![],
        }
    }
}

/// The etcd hosts, the two RM hosts and the NM hosts, started; one RM ACTIVE, the other
/// STANDBY, and every NM RUNNING on the active.
pub struct HaHosts {
    /// `rm1` and `rm2`; None once a test killed one and took it out.
    pub rms: [Option<Daemon>; 2],
    pub nms: Vec<Daemon>,
    pub etcd: EtcdCluster,
    /// Each RM's `host:port`.
    pub rm_addrs: [String; 2],
    /// Each NM's NodeId.
    pub nm_addrs: Vec<String>,
    pub rm_hosts: [Host; 2],
    pub etcd_hosts: Vec<Host>,
    pub nm_hosts: Vec<Host>,
    pub lease_ms: u64,
    /// A client on the switch that follows no redirect and gives up after a second (an RM
    /// that is paused must not hold a probe for long).
    pub probe: reqwest::blocking::Client,
    rm_props: Props,
    starts: [usize; 2],
    pub site: Site,
}

/// Starts an HA cluster of hosts, or None where this machine cannot run one or etcd is not
/// installed: the reason printed for `test`, or (under `CI=true`) the test failed.
pub fn start_or_skip(test: &str, opts: HaHostsOpts) -> Option<HaHosts> {
    if !spindle_test_support::etcd::present(test) {
        return None;
    }
    match super::available() {
        Ok(()) => Some(HaHosts::start(opts)),
        Err(why) => {
            spindle_test_support::require::skip(test, why);
            None
        }
    }
}

impl HaHosts {
    pub fn start(opts: HaHostsOpts) -> HaHosts {
        let mut names: Vec<(String, u8)> = (0..3).map(|i| (format!("etcd{i}"), 20 + i)).collect();
        names.push(("rm1".into(), 1));
        names.push(("rm2".into(), 2));
        names.extend(nm_host_names(opts.nms, 10));
        let site = Site::create(&names, &opts.files, &opts.shared);
        let etcd_hosts: Vec<Host> = site.hosts[..3].to_vec();
        let rm_hosts = [site.hosts[3].clone(), site.hosts[4].clone()];
        let nm_hosts: Vec<Host> = site.hosts[5..].to_vec();
        let places: Vec<Place> = etcd_hosts
            .iter()
            .map(|h| Place {
                ip: h.link.ip.clone(),
                netns: Some(netns_path(&h.link.netns).into()),
            })
            .collect();
        let etcd_dir = site.dir.path().join("etcd");
        std::fs::create_dir_all(&etcd_dir).expect("etcd dir");
        let etcd = EtcdCluster::start_placed(&etcd_dir, &places);
        let rm_addrs = rm_hosts.clone().map(|h| format!("{}:{RM_PORT}", h.link.ip));
        let probe = site.net.in_switch(|| {
            reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(1))
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("client")
        });
        let mut c = HaHosts {
            rms: [None, None],
            nms: vec![],
            etcd,
            rm_addrs,
            nm_addrs: vec![],
            rm_hosts,
            etcd_hosts,
            nm_hosts,
            lease_ms: opts.lease_ms,
            probe,
            rm_props: opts.rm_props,
            starts: [0, 0],
            site,
        };
        c.start_rm(0);
        c.start_rm(1);
        let active = c.wait_roles(Duration::from_secs(60));
        let (nms, nm_addrs) = start_nms(&c.site, &c.nm_hosts, |h, d| {
            conf::ha_nm_props(&h.link.ip, &c.rm_addrs, d, &c.site.secret, &opts.nm_props)
        });
        c.nms = nms;
        c.nm_addrs = nm_addrs;
        c.rest(active).wait_nodes_running(opts.nms);
        c
    }

    /// Starts (or starts again) `rm<i+1>` on its host, its directory its own.
    pub fn start_rm(&mut self, i: usize) {
        let h = self.rm_hosts[i].clone();
        let rm_dir = h.dir.join("rm");
        std::fs::create_dir_all(&rm_dir).expect("rm dir");
        let address = rm_dir.join("address");
        let _ = std::fs::remove_file(&address);
        let mut extra = vec![(
            "yarn.resourcemanager.webapp.address".to_string(),
            self.rm_addrs[i].clone(),
        )];
        extra.extend(conf::ha_rm_props(
            i,
            &self.rm_addrs,
            &self.etcd.endpoints(),
            CLUSTER_ID,
            self.lease_ms,
        ));
        extra.extend(self.rm_props.iter().cloned());
        let props = conf::rm_props(&self.site.secret, &h.link.ip, &rm_dir, &extra);
        let args = conf::daemon_args(&self.site.conf_dir, &props, &address);
        let mut d = self
            .site
            .start_on(&h, self.starts[i], "resourcemanager", &args);
        self.starts[i] += 1;
        read_addr(&address, &mut d);
        self.rms[i] = Some(d);
    }

    /// The REST API of `rm<i+1>`, from the switch (a standby's 307s followed).
    pub fn rest(&self, i: usize) -> Rm<'_> {
        Rm {
            http: &self.site.http,
            base: format!("http://{}", self.rm_addrs[i]),
        }
    }

    /// `haState` of `rm<i+1>` (`/ws/v1/cluster/info`), or None when it does not answer
    /// within a second.
    pub fn ha_state(&self, i: usize) -> Option<String> {
        let url = format!("http://{}/ws/v1/cluster/info", self.rm_addrs[i]);
        let v: Value = self.probe.get(url).send().ok()?.json().ok()?;
        v["clusterInfo"]["haState"].as_str().map(str::to_string)
    }

    /// The RM that says it is ACTIVE now, if one does.
    pub fn active(&self) -> Option<usize> {
        (0..2).find(|&i| self.ha_state(i).as_deref() == Some("ACTIVE"))
    }

    /// Waits until one RM is ACTIVE and the other STANDBY; the active's index.
    pub fn wait_roles(&self, within: Duration) -> usize {
        // A standby says STANDBY as soon as it serves, and redirects once it has read the
        // election key (until then it answers 503 with `Retry-After`).
        wait_until(
            "one ACTIVE and one STANDBY RM that redirects to it",
            within,
            || {
                crate::ha::settled_active([self.ha_state(0), self.ha_state(1)], |i| {
                    self.redirects(i)
                })
            },
        )
    }

    /// Whether `rm<i+1>` redirects a REST call (a standby that knows the active).
    fn redirects(&self, i: usize) -> bool {
        let url = format!("http://{}/ws/v1/cluster/apps", self.rm_addrs[i]);
        self.probe
            .get(url)
            .send()
            .is_ok_and(|r| r.status() == reqwest::StatusCode::TEMPORARY_REDIRECT)
    }

    /// Severs `rm<i+1>`'s paths to every etcd member (both ways); the rest of the network
    /// still reaches it.
    pub fn cut_from_etcd(&self, i: usize) {
        for e in &self.etcd_hosts {
            self.site.net.sever(&self.rm_hosts[i].link, &e.link);
        }
    }

    /// Ends [`HaHosts::cut_from_etcd`].
    pub fn reconnect_to_etcd(&self, i: usize) {
        for e in &self.etcd_hosts {
            self.site.net.unsever(&self.rm_hosts[i].link, &e.link);
        }
    }

    /// etcd's contents and history through member `m`.
    pub fn history(&self, m: usize) -> EtcdHistory<'_> {
        EtcdHistory {
            http: &self.site.http,
            endpoint: format!("http://{}:2379", self.etcd_hosts[m].link.ip),
        }
    }

    /// The leader key, `/spindle/<cluster id>/leader`.
    pub fn leader_key(&self) -> String {
        format!("/spindle/{CLUSTER_ID}/leader")
    }

    /// Both RMs' addresses, comma-separated (`SPINDLE_RM_ADDRESS`, `--rm-address`).
    pub fn rm_address_list(&self) -> String {
        self.rm_addrs.join(",")
    }

    /// The `spindle` CLI on the switch, given both RMs (it follows the active).
    pub fn spindle_command(&self, args: &[&str]) -> std::process::Command {
        self.site.spindle_command(args, &self.rm_address_list())
    }

    /// Runs the CLI ([`HaHosts::spindle_command`]); killed (and the test failed) past
    /// `timeout`.
    pub fn spindle_within(&self, args: &[&str], timeout: Duration) -> std::process::Output {
        output_within(self.spindle_command(args), timeout)
    }

    /// The NM host whose NM has NodeId (or HTTP address) `node`.
    pub fn nm_host_of(&self, node: &str) -> Option<&Host> {
        host_of(&self.nm_hosts, node)
    }

    /// Every daemon's log (the RMs' every run), for a failure's message.
    pub fn logs(&self) -> String {
        let mut s = String::new();
        let mut logs: Vec<_> = std::fs::read_dir(self.site.dir.path())
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .collect();
        logs.sort();
        for p in logs {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            s.push_str(&format!("---- {name} ----\n{text}\n"));
        }
        s
    }
}
