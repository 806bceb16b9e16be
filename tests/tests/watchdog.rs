//! The system-test watchdog: a binary stuck past its limit names the stuck test, kills its
//! daemons and fails, instead of holding the suite.

use std::process::Command;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use spindle_system_tests::hosts::{self, net::Net};
use spindle_system_tests::{output_within, running, spawn_command, watchdog::LIMIT_VAR};

/// Run only by the test below, in a child copy of this binary with a 2 s limit: it starts a
/// daemon, writes its pid where the parent reads it, and never ends on its own.
#[test]
#[ignore = "run by a_stuck_binary_kills_its_daemons_names_the_test_and_fails"]
fn stuck_on_purpose() {
    let dir = std::env::var("WATCHDOG_TEST_DIR").expect("run by the parent test");
    let dir = std::path::Path::new(&dir);
    let mut cmd = Command::new("sleep");
    cmd.arg("600");
    let d = spawn_command("sleeper", cmd, dir.join("sleeper.log"));
    // A switch namespace too where this machine allows one (root): the watchdog removes it.
    let net = hosts::available().is_ok().then(Net::create);
    if let Some(n) = &net {
        std::fs::write(dir.join("netns"), &n.switch).expect("netns file");
    }
    std::fs::write(dir.join("pid"), d.pid().to_string()).expect("pid file");
    std::thread::sleep(Duration::from_secs(120));
    drop((d, net));
}

#[test]
fn a_stuck_binary_kills_its_daemons_names_the_test_and_fails() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cmd = Command::new(std::env::current_exe().expect("this binary"));
    cmd.args(["stuck_on_purpose", "--exact", "--ignored", "--nocapture"])
        .env(LIMIT_VAR, "2")
        .env("WATCHDOG_TEST_DIR", dir.path());
    let started = Instant::now();
    let out = output_within(cmd, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(101), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "it waited for the stuck test"
    );
    assert!(stderr.contains("ran past 2s"), "{stderr}");
    assert!(
        stderr.contains("sleeper (pid") && stderr.contains("started by stuck_on_purpose"),
        "{stderr}"
    );
    let pid: i32 = std::fs::read_to_string(dir.path().join("pid"))
        .expect("the child wrote its daemon's pid")
        .parse()
        .expect("a pid");
    // Killed: gone, or a zombie until init reaps it.
    let alive = || running(pid);
    let until = Instant::now() + Duration::from_secs(10);
    while alive() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    // Its namespace removed (where it could make one; under CI=true it must have).
    match std::fs::read_to_string(dir.path().join("netns")) {
        Ok(ns) => {
            let gone = !std::path::Path::new(&hosts::net::netns_path(&ns)).exists();
            if !gone {
                let _ = hosts::net::ip(&["netns", "del", &ns]);
            }
            assert!(gone, "the stuck test's namespace {ns} is still there");
        }
        Err(_) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!(
                "no namespace was made under CI=true: {:?}",
                hosts::available()
            )
        }
        Err(_) => println!("namespaces not checked: {:?}", hosts::available()),
    }
    let left = alive();
    if left {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
    assert!(!left, "the stuck test's daemon {pid} still runs");
}
