//! A bound on a whole system-test binary: a stuck test (a thread waiting on something that
//! never comes) would otherwise hold the suite until CI's own limit, with nothing printed.
//!
//! The first daemon a binary starts also starts one watchdog thread. Past the limit from then
//! (`SPINDLE_TEST_BINARY_LIMIT_S`, 600 s by default: the longest system-test binary takes
//! under 40 s on two cores) it prints each daemon still running (the test that started it,
//! its pid, its log's last lines), kills them (SIGKILL), removes the network namespaces the
//! binary created (with whatever still runs in them) and exits the binary with a failure, so
//! the rest of the suite runs and the report says which test was stuck.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// The variable that sets the limit, in seconds.
pub const LIMIT_VAR: &str = "SPINDLE_TEST_BINARY_LIMIT_S";
const DEFAULT_LIMIT: Duration = Duration::from_secs(600);
/// How much of each daemon's log the report shows.
const LOG_TAIL_LINES: usize = 40;

/// A running daemon, as the report names it.
struct Entry {
    name: String,
    test: String,
    log: PathBuf,
}

fn live() -> &'static Mutex<BTreeMap<i32, Entry>> {
    static LIVE: OnceLock<Mutex<BTreeMap<i32, Entry>>> = OnceLock::new();
    LIVE.get_or_init(|| {
        let limit = std::env::var(LIMIT_VAR)
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(DEFAULT_LIMIT, Duration::from_secs);
        std::thread::Builder::new()
            .name("system-test watchdog".into())
            .spawn(move || {
                std::thread::sleep(limit);
                expire(limit);
            })
            .expect("the watchdog thread");
        Mutex::new(BTreeMap::new())
    })
}

/// Records a daemon just started (by the current thread, which libtest names after its test).
pub(crate) fn started(pid: i32, name: &str, log: PathBuf) {
    let test = std::thread::current()
        .name()
        .unwrap_or("an unnamed thread")
        .to_string();
    let entry = Entry {
        name: name.to_string(),
        test,
        log,
    };
    live()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(pid, entry);
}

/// Forgets a daemon that was stopped.
pub(crate) fn stopped(pid: i32) {
    live()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&pid);
}

fn expire(limit: Duration) -> ! {
    let live = live().lock().unwrap_or_else(|e| e.into_inner());
    eprintln!(
        "\nsystem-test watchdog: this test binary ran past {}s ({LIMIT_VAR}) since its first \
         daemon started; a test is stuck. Killing its {} daemon(s) and exiting.",
        limit.as_secs(),
        live.len()
    );
    for (pid, e) in live.iter() {
        eprintln!(
            "---- {} (pid {pid}, started by {}; {}), its last lines ----\n{}",
            e.name,
            e.test,
            e.log.display(),
            crate::file_tail(&e.log, LOG_TAIL_LINES)
        );
        let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
    }
    // The hosts' namespaces (and what still runs in them), which their `Drop`s would remove.
    let removed = crate::hosts::net::remove_this_process_namespaces();
    if !removed.is_empty() {
        eprintln!("system-test watchdog: removed network namespaces {removed:?}");
    }
    std::process::exit(101)
}
