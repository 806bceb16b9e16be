//! Every example file in `conf/` loads, both as a directory and one by one, and the values
//! the minicluster and the docs rely on read back through the typed getters.

use std::path::{Path, PathBuf};

use spindle_common::config::{keys, ConfigError, Configuration, CONF_FILES};

fn conf_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../conf")
}

fn xml_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(conf_dir())
        .expect("conf/ exists")
        .map(|e| e.expect("readable conf/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "xml"))
        .collect();
    files.sort();
    files
}

/// Reads every property with `get`, so that a broken `${...}` anywhere fails the test.
fn expand_all(c: &Configuration) -> Result<(), ConfigError> {
    for name in c.names() {
        c.get(name)?;
    }
    Ok(())
}

#[test]
fn every_xml_file_loads_on_its_own() -> Result<(), ConfigError> {
    let files = xml_files();
    assert!(!files.is_empty());
    for file in &files {
        let mut c = Configuration::new();
        c.add_file(file)?;
        assert!(c.names().count() > 0, "{} defines nothing", file.display());
        expand_all(&c)?;
        let name = file
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        assert!(
            CONF_FILES.contains(&name),
            "{name} is not one of CONF_FILES, so load_dir would never read it"
        );
    }
    Ok(())
}

#[test]
fn the_directory_loads_and_typed_values_read_back() -> Result<(), ConfigError> {
    let c = Configuration::load_dir(&conf_dir())?.with_env([("USER", "tester")]);
    expand_all(&c)?;
    assert_eq!(
        c.names().count(),
        xml_files().iter().try_fold(0, |n, f| {
            let mut one = Configuration::new();
            one.add_file(f).map(|()| n + one.names().count())
        })?,
        "no property is defined in two example files"
    );

    assert_eq!(
        c.get_string(keys::RM_WEBAPP_ADDRESS, keys::DEFAULT_RM_WEBAPP_ADDRESS)?,
        "127.0.0.1:8088"
    );
    assert_eq!(
        c.get_string(keys::NM_WEBAPP_ADDRESS, keys::DEFAULT_NM_WEBAPP_ADDRESS)?,
        "127.0.0.1:0"
    );
    assert_eq!(c.get_i64(keys::NM_RESOURCE_MEMORY_MB, 0)?, 8192);
    assert_eq!(c.get_i64(keys::NM_RESOURCE_CPU_VCORES, 0)?, 8);
    assert_eq!(c.get_i64(keys::SCHEDULER_MIN_ALLOCATION_MB, 0)?, 128);
    assert_eq!(c.get_i64(keys::SCHEDULER_MAX_ALLOCATION_MB, 0)?, 8192);
    assert_eq!(c.get_i64(keys::SCHEDULER_MAX_ALLOCATION_VCORES, 0)?, 8);
    assert_eq!(
        c.get_duration_ms(keys::RM_NM_HEARTBEAT_INTERVAL_MS, 0)?,
        1000
    );
    assert_eq!(c.get_duration_ms(keys::NM_LIVENESS_EXPIRY_MS, 0)?, 600_000);
    assert_eq!(c.get_i64(keys::RM_AM_MAX_ATTEMPTS, 0)?, 2);
    assert_eq!(
        c.get_strings(keys::RESOURCE_TYPES)?,
        ["yarn.io/gpu", "yarn.io/fpga"]
    );
    assert_eq!(
        c.get_i64(&format!("{}yarn.io/gpu", keys::NM_RESOURCE_TYPE_PREFIX), -1)?,
        0
    );

    let cs = |rest: &str| format!("{}{rest}", keys::CAPACITY_SCHEDULER_PREFIX);
    assert_eq!(c.get_strings(&cs("root.queues"))?, ["default", "gpu"]);
    assert_eq!(c.get_f64(&cs("root.default.capacity"), 0.0)?, 70.0);
    assert_eq!(c.get_f64(&cs("root.gpu.capacity"), 0.0)?, 30.0);
    for q in ["default", "gpu"] {
        assert_eq!(
            c.get_f64(&cs(&format!("root.{q}.maximum-capacity")), 0.0)?,
            100.0
        );
        assert_eq!(
            c.get_f64(&cs(&format!("root.{q}.user-limit-factor")), 0.0)?,
            1.0
        );
        assert_eq!(
            c.get_string(&cs(&format!("root.{q}.state")), "")?,
            "RUNNING"
        );
        assert_eq!(
            c.get_string(&cs(&format!("root.{q}.acl_submit_applications")), "")?,
            "*"
        );
    }
    assert!(c
        .get_string(
            keys::CS_RESOURCE_CALCULATOR,
            keys::DEFAULT_CS_RESOURCE_CALCULATOR
        )?
        .ends_with(".DominantResourceCalculator"));
    Ok(())
}

#[test]
fn directories_follow_spindle_work_dir() -> Result<(), ConfigError> {
    let unset = Configuration::load_dir(&conf_dir())?.with_env([("USER", "tester")]);
    assert_eq!(
        unset.get_strings(keys::NM_LOCAL_DIRS)?,
        ["/tmp/spindle/nm-local-dir"]
    );
    let empty = unset.clone().with_env([("SPINDLE_WORK_DIR", "")]);
    assert_eq!(
        empty.get_strings(keys::NM_LOG_DIRS)?,
        ["/tmp/spindle/nm-logs"]
    );
    let set = unset.with_env([("SPINDLE_WORK_DIR", "/work/mc/nm1")]);
    assert_eq!(
        set.get_strings(keys::NM_LOCAL_DIRS)?,
        ["/work/mc/nm1/nm-local-dir"]
    );
    assert_eq!(
        set.get_string(keys::NM_RECOVERY_DIR, keys::DEFAULT_NM_RECOVERY_DIR)?,
        "/work/mc/nm1/nm-recovery"
    );
    assert_eq!(
        set.get_string(
            keys::SPINDLE_RM_STATE_STORE_PATH,
            keys::DEFAULT_SPINDLE_RM_STATE_STORE_PATH
        )?,
        "/work/mc/nm1/rm/rmstore.sqlite"
    );
    Ok(())
}
