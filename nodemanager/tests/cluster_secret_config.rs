//! The NM reads `spindle.cluster.secret-file` with the RM's rules: a good file is loaded, a
//! missing, loose (group/other bits), short or non-hex one stops the configuration with one
//! line naming the property, the file and the problem.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use spindle_common::cluster_secret::ClusterSecret;
use spindle_common::config::{keys, Configuration};
use spindle_nodemanager::NmConfig;

fn conf(dir: &Path, secret: &Path) -> Configuration {
    let mut c = Configuration::new();
    c.set(keys::NM_WEBAPP_ADDRESS, "127.0.0.1:0");
    c.set(keys::RM_WEBAPP_ADDRESS, "127.0.0.1:8088");
    c.set(
        keys::NM_LOCAL_DIRS,
        &dir.join("local").display().to_string(),
    );
    c.set(keys::NM_LOG_DIRS, &dir.join("logs").display().to_string());
    c.set(keys::CLUSTER_SECRET_FILE, &secret.display().to_string());
    c
}

fn load(dir: &Path, secret: &Path) -> Result<NmConfig, String> {
    NmConfig::from_configuration(&conf(dir, secret), dir).map_err(|e| e.to_string())
}

#[test]
fn the_nm_loads_a_good_secret_and_names_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let good = d.join("good");
    ClusterSecret::generate_file(&good).unwrap();
    let c = load(d, &good).unwrap();
    assert_eq!(c.cluster_secret, Some(ClusterSecret::load(&good).unwrap()));

    let missing = d.join("missing");
    let e = load(d, &missing).unwrap_err();
    assert!(
        e.contains(keys::CLUSTER_SECRET_FILE) && e.contains(&missing.display().to_string()),
        "{e}"
    );
    assert!(e.contains("no such file"), "{e}");

    let loose = d.join("loose");
    ClusterSecret::generate_file(&loose).unwrap();
    std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o640)).unwrap();
    let e = load(d, &loose).unwrap_err();
    assert!(e.contains("0640") && e.contains("0600"), "{e}");

    let text = d.join("text");
    std::fs::write(&text, "not a secret at all, not even hex").unwrap();
    std::fs::set_permissions(&text, std::fs::Permissions::from_mode(0o600)).unwrap();
    let e = load(d, &text).unwrap_err();
    assert!(e.contains("not hex"), "{e}");
    assert!(!e.contains('\n'), "one line: {e}");

    // Unset: no secret, calls go unsigned.
    let mut c = conf(d, &good);
    c.set(keys::CLUSTER_SECRET_FILE, "");
    assert_eq!(
        NmConfig::from_configuration(&c, d).unwrap().cluster_secret,
        None
    );
}
