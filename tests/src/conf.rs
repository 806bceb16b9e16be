//! The configuration every test cluster gives its daemons, written in one place for the
//! 127.0.0.1 [`crate::Cluster`] and the cluster of hosts ([`crate::hosts::Hosts`]): the
//! configuration directory, the RM's and each NM's `-D` properties (what differs between
//! the two is the host they bind and where their directories are), and a daemon's command
//! line.

use std::path::{Path, PathBuf};

use crate::CLUSTER_SECRET_FILE;

/// `(name, value)` properties, given to a daemon as `-D name=value`.
pub type Props = Vec<(String, String)>;

fn prop(k: &str, v: impl Into<String>) -> (String, String) {
    (k.to_string(), v.into())
}

/// Creates `dir` as a configuration directory: an empty `yarn-site.xml` (every default is
/// YARN's, and `-D` overrides the rest) and `files` (`capacity-scheduler.xml`, ...) as
/// `(file name, content)`.
pub fn write_conf_dir(dir: &Path, files: &[(&str, &str)]) -> PathBuf {
    std::fs::create_dir_all(dir).expect("conf dir");
    std::fs::write(
        dir.join("yarn-site.xml"),
        "<configuration></configuration>\n",
    )
    .expect("write conf");
    for (name, content) in files {
        assert!(
            !name.contains('/'),
            "conf files are plain names in the conf dir: {name}"
        );
        std::fs::write(dir.join(name), content).expect("write conf file");
    }
    dir.to_path_buf()
}

/// The RM's properties: the cluster `secret`, its web address on `bind_host` (port 0), its
/// state store under `rm_dir`, a 128 MB minimum allocation; then `extra`, which win.
pub fn rm_props(
    secret: &Path,
    bind_host: &str,
    rm_dir: &Path,
    extra: &[(String, String)],
) -> Props {
    let mut p = vec![
        prop(CLUSTER_SECRET_FILE, secret.display().to_string()),
        prop(
            "yarn.resourcemanager.webapp.address",
            format!("{bind_host}:0"),
        ),
        prop(
            "spindle.resourcemanager.state-store.path",
            rm_dir.join("rmstore.sqlite").display().to_string(),
        ),
        prop("yarn.scheduler.minimum-allocation-mb", "128"),
    ];
    p.extend(extra.iter().cloned());
    p
}

/// An NM's properties: its web address on `bind_host` (port 0), the RM at `rm_addr`, its
/// local, log and recovery directories under `nm_dir`, 4096 MB and 4 vcores, a disk checker
/// that ignores how full the disk is, the cluster `secret` when there is one; then `extra`,
/// which win.
pub fn nm_props(
    bind_host: &str,
    rm_addr: &str,
    nm_dir: &Path,
    secret: Option<&Path>,
    extra: &[(String, String)],
) -> Props {
    let dir = |d: &str| nm_dir.join(d).display().to_string();
    let mut p = vec![
        prop("yarn.nodemanager.webapp.address", format!("{bind_host}:0")),
        prop("yarn.resourcemanager.webapp.address", rm_addr),
        prop("spindle.nodemanager.rm-address", rm_addr),
        prop("yarn.nodemanager.local-dirs", dir("local")),
        prop("yarn.nodemanager.log-dirs", dir("logs")),
        prop("yarn.nodemanager.recovery.dir", dir("recovery")),
        prop("yarn.nodemanager.resource.memory-mb", "4096"),
        prop("yarn.nodemanager.resource.cpu-vcores", "4"),
        // System tests must not depend on how full the host's disk is.
        prop(
            "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage",
            "100",
        ),
    ];
    if let Some(s) = secret {
        p.push(prop(CLUSTER_SECRET_FILE, s.display().to_string()));
    }
    p.extend(extra.iter().cloned());
    p
}

/// A daemon's command line: `--conf-dir conf_dir`, `-D k=v` for each of `props`, and
/// `--address-file address_file` (where it writes the address it bound).
pub fn daemon_args(
    conf_dir: &Path,
    props: &[(String, String)],
    address_file: &Path,
) -> Vec<String> {
    let mut args = vec!["--conf-dir".to_string(), conf_dir.display().to_string()];
    for (k, v) in props {
        args.push("-D".into());
        args.push(format!("{k}={v}"));
    }
    args.push("--address-file".into());
    args.push(address_file.display().to_string());
    args
}

/// The HA settings every client of two RMs `rm1`, `rm2` at `addrs` (`host:port`) reads:
/// `yarn.resourcemanager.ha.enabled`, `rm-ids` and each `webapp.address.<id>`.
pub fn ha_client_props(addrs: &[String; 2]) -> Props {
    vec![
        prop("yarn.resourcemanager.ha.enabled", "true"),
        prop("yarn.resourcemanager.ha.rm-ids", "rm1,rm2"),
        prop("yarn.resourcemanager.webapp.address.rm1", addrs[0].as_str()),
        prop("yarn.resourcemanager.webapp.address.rm2", addrs[1].as_str()),
    ]
}

/// The HA properties of RM `rm<i+1>` of two at `addrs`, with automatic failover on the
/// etcd `endpoints` (comma-separated URLs) under `cluster_id` and a lease of `lease_ms`.
pub fn ha_rm_props(
    i: usize,
    addrs: &[String; 2],
    endpoints: &str,
    cluster_id: &str,
    lease_ms: u64,
) -> Props {
    let mut p = ha_client_props(addrs);
    p.extend([
        prop("yarn.resourcemanager.ha.id", format!("rm{}", i + 1)),
        prop("yarn.resourcemanager.cluster-id", cluster_id),
        prop("spindle.ha.etcd.endpoints", endpoints),
        prop("spindle.ha.etcd.lease-ms", lease_ms.to_string()),
    ]);
    p
}

/// An NM's properties ([`nm_props`]) when it follows two HA RMs at `addrs` by id: no
/// `spindle.nodemanager.rm-address` of its own; `extra` win.
pub fn ha_nm_props(
    bind_host: &str,
    addrs: &[String; 2],
    nm_dir: &Path,
    secret: &Path,
    extra: &[(String, String)],
) -> Props {
    let mut with = extra.to_vec();
    with.extend(ha_client_props(addrs));
    nm_props(bind_host, &addrs[0], nm_dir, Some(secret), &with)
        .into_iter()
        .filter(|(k, _)| k != "spindle.nodemanager.rm-address")
        .collect()
}
