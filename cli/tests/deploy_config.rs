//! The example `/etc/spindle` of `deploy/etc/spindle` loads through the RM's and the NM's own
//! configuration loaders (every validation they run at start passes, every key is one Spindle
//! knows), and the systemd units
//! of `deploy/systemd` agree with it: they start the binaries this package installs with
//! `--conf-dir /etc/spindle`, and the directories they create are the ones the files name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use spindle_common::config::{keys, Configuration};
use spindle_common::resource::GPU;
use spindle_nodemanager::NmConfig;
use spindle_resourcemanager::config::RmConfig;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

fn etc() -> PathBuf {
    repo().join("deploy/etc/spindle")
}

/// Where the example names the cluster secret; it cannot exist on a test machine, so the
/// loaders get a generated one there instead ([`secret_override`]).
const ETC_SECRET: &str = "/etc/spindle/cluster-secret";

/// `spindle.cluster.secret-file` pointing at a fresh secret in `dir` (the example's own
/// file is checked to be named by [`the_example_etc_names_the_cluster_secret`]).
fn secret_override(dir: &Path) -> (String, String) {
    let p = dir.join("cluster-secret");
    spindle_common::cluster_secret::ClusterSecret::generate_file(&p).expect("secret");
    (
        keys::CLUSTER_SECRET_FILE.to_string(),
        p.display().to_string(),
    )
}

#[test]
fn the_example_etc_names_the_cluster_secret() {
    let conf = Configuration::load_dir(&etc()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        conf.get(keys::CLUSTER_SECRET_FILE)
            .ok()
            .flatten()
            .as_deref(),
        Some(ETC_SECRET)
    );
    // As shipped (no file on this machine) the RM refuses to start, naming the file.
    if !Path::new(ETC_SECRET).exists() {
        let e = RmConfig::load(&etc(), &[]).unwrap_err().to_string();
        assert!(e.contains(ETC_SECRET) && e.contains("no such file"), "{e}");
    }
}

/// `key=value` lines of a unit file's sections (a key given twice keeps both, space-joined).
fn unit(name: &str) -> BTreeMap<String, String> {
    let path = repo().join("deploy/systemd").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with('[') {
            continue;
        }
        let (k, v) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("{name}: not key=value: {line}"));
        out.entry(k.to_string())
            .and_modify(|e| {
                e.push(' ');
                e.push_str(v);
            })
            .or_insert_with(|| v.to_string());
    }
    out
}

/// `StateDirectory=a b` as `/var/lib/a`, `/var/lib/b` (`LogsDirectory` under `/var/log`).
fn unit_dirs(u: &BTreeMap<String, String>, key: &str, base: &str) -> Vec<PathBuf> {
    u.get(key)
        .map(|v| {
            v.split_whitespace()
                .map(|d| Path::new(base).join(d))
                .collect()
        })
        .unwrap_or_default()
}

/// The `[[bin]]` names of this package's manifest: what `cargo install --path cli` installs.
fn installed_binaries() -> Vec<String> {
    let manifest = std::fs::read_to_string(repo().join("cli/Cargo.toml")).expect("manifest");
    let mut names = Vec::new();
    let mut in_bin = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_bin = line == "[[bin]]";
            continue;
        }
        if let Some(v) = line.strip_prefix("name = ").filter(|_| in_bin) {
            names.push(v.trim_matches('"').to_string());
        }
    }
    names
}

#[test]
fn every_key_of_the_example_etc_is_known() {
    let conf = Configuration::load_dir(&etc()).unwrap_or_else(|e| panic!("{e}"));
    let unknown: Vec<String> = conf
        .unknown_keys()
        .iter()
        .map(|k| format!("{} ({:?})", k.name, k.suggestion))
        .collect();
    assert!(
        unknown.is_empty(),
        "unknown keys in deploy/etc/spindle: {unknown:?}"
    );
}

#[test]
fn the_rm_loads_the_example_etc() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c =
        RmConfig::load(&etc(), &[secret_override(dir.path())]).unwrap_or_else(|e| panic!("{e}"));
    assert!(c.cluster_secret.is_some());
    assert_eq!(c.webapp_address, "rm1.example.com:8088");
    assert_eq!(
        c.store_path,
        PathBuf::from("/var/lib/spindle/rm/rmstore.sqlite")
    );
    assert_eq!(c.core.max_allocation.get(GPU), 8);
    let root = &c.core.scheduler.root;
    for q in ["root.default", "root.training"] {
        assert!(root.find(q).is_some_and(|q| q.is_leaf()), "{q} is a leaf");
    }
    assert!((c.core.scheduler.max_am_resource_percent - 0.2).abs() < 1e-9);
}

#[test]
fn the_nm_loads_the_example_etc_as_the_unit_starts_it() {
    let mut conf = Configuration::load_dir(&etc()).unwrap_or_else(|e| panic!("{e}"));
    // What the unit's `-D yarn.nodemanager.hostname=%H` adds.
    conf.set(keys::NM_HOSTNAME, "worker1.example.com");
    let dir = tempfile::tempdir().expect("tempdir");
    let (k, v) = secret_override(dir.path());
    conf.set(&k, &v);
    let c = NmConfig::from_configuration(&conf, &etc()).unwrap_or_else(|e| panic!("{e}"));
    assert!(c.cluster_secret.is_some());
    assert_eq!(c.hostname, "worker1.example.com");
    assert_eq!(c.rm_address, "rm1.example.com:8088");
    assert_eq!(c.resource.memory_mb, 245_760);
    assert_eq!(c.resource.vcores, 64);
    assert!(c.plugins.gpu.is_some(), "the GPU plugin is enabled");
    assert!(c.recovery_enabled);
    assert_eq!(c.local_dirs, [PathBuf::from("/var/lib/spindle/nm-local")]);
    assert_eq!(c.log_dirs, [PathBuf::from("/var/log/spindle/containers")]);
    assert_eq!(
        c.recovery_dir,
        PathBuf::from("/var/lib/spindle/nm-recovery")
    );
}

#[test]
fn the_units_start_the_installed_binaries_on_the_example_etc() {
    let bins = installed_binaries();
    for b in ["spindle", "resourcemanager", "nodemanager"] {
        assert!(
            bins.iter().any(|n| n == b),
            "cli/Cargo.toml installs {b}: {bins:?}"
        );
    }

    let rm = unit("spindle-resourcemanager.service");
    assert_eq!(
        rm.get("ExecStart").map(String::as_str),
        Some("/usr/local/bin/resourcemanager --conf-dir /etc/spindle")
    );
    assert_eq!(rm.get("User").map(String::as_str), Some("spindle"));
    assert!(rm.contains_key("LimitNOFILE") && rm.contains_key("Restart"));
    // The store's directory is the one the unit creates for the spindle user.
    let dir = tempfile::tempdir().expect("tempdir");
    let c =
        RmConfig::load(&etc(), &[secret_override(dir.path())]).unwrap_or_else(|e| panic!("{e}"));
    let store_dir = c.store_path.parent().expect("store dir").to_path_buf();
    assert_eq!(
        unit_dirs(&rm, "StateDirectory", "/var/lib"),
        [store_dir],
        "the RM unit's StateDirectory holds spindle.resourcemanager.state-store.path"
    );

    let nm = unit("spindle-nodemanager.service");
    let exec = nm.get("ExecStart").cloned().unwrap_or_default();
    assert!(
        exec.starts_with("/usr/local/bin/nodemanager --conf-dir /etc/spindle"),
        "{exec}"
    );
    assert_eq!(nm.get("User").map(String::as_str), Some("root"));
    assert_eq!(nm.get("KillMode").map(String::as_str), Some("process"));
    assert!(nm.contains_key("LimitNOFILE") && nm.contains_key("Restart"));
    let mut conf = Configuration::load_dir(&etc()).unwrap_or_else(|e| panic!("{e}"));
    conf.set(keys::NM_HOSTNAME, "worker1.example.com");
    let nm_dir = tempfile::tempdir().expect("tempdir");
    let (k, v) = secret_override(nm_dir.path());
    conf.set(&k, &v);
    let c = NmConfig::from_configuration(&conf, &etc()).unwrap_or_else(|e| panic!("{e}"));
    let state = unit_dirs(&nm, "StateDirectory", "/var/lib");
    for d in c.local_dirs.iter().chain([&c.recovery_dir]) {
        assert!(state.contains(d), "{} is not in {state:?}", d.display());
    }
    let logs = unit_dirs(&nm, "LogsDirectory", "/var/log");
    for d in &c.log_dirs {
        assert!(logs.contains(d), "{} is not in {logs:?}", d.display());
    }
}
