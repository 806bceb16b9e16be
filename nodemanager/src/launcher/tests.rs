//! Unit tests of the launcher's pure parts: local resource URLs and names, localization into
//! a temporary dir, the plain-argv fast path, placeholders, file tails and `/proc` reads.
//! They must not start containers (the executor is tested in `nodemanager/tests`).

use super::*;
use std::os::unix::fs::PermissionsExt;

#[test]
fn resource_urls() {
    assert_eq!(
        resource_source("file:///a/b").unwrap(),
        PathBuf::from("/a/b")
    );
    assert_eq!(
        resource_source("file://localhost/a%20b").unwrap(),
        PathBuf::from("/a b")
    );
    assert_eq!(resource_source("file:/x").unwrap(), PathBuf::from("/x"));
    assert_eq!(resource_source("/abs").unwrap(), PathBuf::from("/abs"));
    assert!(resource_source("hdfs://nn/x")
        .unwrap_err()
        .contains("not supported"));
    assert!(resource_source("file://other/x")
        .unwrap_err()
        .contains("remote host"));
    assert!(resource_source("rel/x").is_err());
    let w = Path::new("/w");
    assert_eq!(resource_target(w, "a/b").unwrap(), PathBuf::from("/w/a/b"));
    for bad in ["", "../x", "/abs", "a/../../b", "."] {
        assert!(resource_target(w, bad).is_err(), "{bad}");
    }
}

#[test]
fn plain_commands_are_exec_d_directly_and_shell_syntax_is_not() {
    assert_eq!(
        plain_argv("/usr/bin/sleep 10", false),
        Some(vec!["/usr/bin/sleep", "10"])
    );
    assert_eq!(
        plain_argv("python3 train.py --lr 0.1", true),
        Some(vec!["python3", "train.py", "--lr", "0.1"])
    );
    assert_eq!(
        plain_argv("python3 train.py", false),
        None,
        "no PATH: leave it to bash"
    );
    assert_eq!(
        plain_argv("exec /bin/prog a", false),
        Some(vec!["/bin/prog", "a"])
    );
    assert_eq!(
        plain_argv("exec python3 t.py --lr=0.1", true),
        Some(vec!["python3", "t.py", "--lr=0.1"])
    );
    for shell in [
        "echo hi",
        "exit 3",
        "a=1 prog",
        "prog > out",
        "prog | x",
        "prog; y",
        "p $X",
        "p \"a b\"",
        "./spindle am",
        "p *.txt",
        "cd /tmp",
        "p 'a'",
        "p && q",
    ] {
        assert_eq!(plain_argv(shell, true), None, "{shell}");
    }
}

#[test]
fn placeholders() {
    let s = expand_placeholders("x 1><LOG_DIR>/stdout {{HOME}} a<CPS>b {{", Path::new("/l"));
    assert_eq!(s, "x 1>/l/stdout $HOME a:b {{");
}

#[test]
fn localization_copies_with_mode_and_refuses_missing() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("tool.sh");
    fs::write(&src, "echo hi").unwrap();
    fs::set_permissions(&src, fs::Permissions::from_mode(0o755)).unwrap();
    let work = d.path().join("work");
    fs::create_dir_all(&work).unwrap();
    let res = LocalResourceInfo {
        resource: format!("file://{}", src.display()),
        kind: "FILE".into(),
        ..Default::default()
    };
    localize(&work, "bin/tool.sh", &res).unwrap();
    let mode = fs::metadata(work.join("bin/tool.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
    let missing = LocalResourceInfo {
        resource: "/no/such/file".into(),
        ..Default::default()
    };
    let e = localize(&work, "m", &missing).unwrap_err();
    assert!(e.is_localization());
    assert!(e.to_string().contains("/no/such/file"), "{e}");
}

#[test]
fn tails_and_proc_stat() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("f");
    fs::write(&p, "0123456789").unwrap();
    assert_eq!(file_tail(&p, 4), "6789");
    assert_eq!(file_tail(&p, 100), "0123456789");
    assert_eq!(file_tail(&d.path().join("none"), 4), "");
    let me = std::process::id() as i32;
    let ticks = proc_start_ticks(me);
    assert!(ticks.is_some());
    let ex = ProcessExecutor::new();
    assert!(ex.is_alive(me, ticks));
    assert!(!ex.is_alive(me, ticks.map(|t| t + 1)));
    assert!(!ex.is_alive(0, None));
    assert!(!ex.is_alive(1, None));
}
