//! A training worker stand-in whose throughput does or does not follow its CPUs, for the
//! CPU policy's system test (`tests/cpu_adaptive.rs`).
//!
//! - `cpu_worker busy THREADS`: THREADS threads each doing fixed chunks of integer work as
//!   fast as they can: its throughput follows the CPU time it gets (a cgroup's CFS quota
//!   caps it even when cores are idle).
//! - `cpu_worker paced OPS`: one chunk at a time, OPS a second at most (sleeping between):
//!   its throughput does not depend on its CPUs.
//! - `cpu_worker calibrate THREADS`: prints the chunks THREADS threads do in a second here.
//!
//! Every second a worker writes its rate (chunks per second over that second) to
//! `$SPINDLE_CHECKPOINT_DIR/.spindle-throughput` (what `spindle train` reports for rank 0)
//! and appends `<ms since the epoch> <rate>` to `rates.log` there; at the start it writes
//! its pid to `pid` there. It stops by itself after `CPU_WORKER_MAX_S` seconds (default 120).

#![forbid(unsafe_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// One chunk of work: a few hundred microseconds of integer arithmetic.
fn chunk(seed: u64) -> u64 {
    let mut x = seed | 1;
    for _ in 0..100_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

fn write_atomic(dir: &Path, name: &str, text: &str) -> std::io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, dir.join(name))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().map(String::as_str).unwrap_or("");
    let arg = |what: &str| -> u64 {
        args.get(1)
            .and_then(|v| v.parse().ok())
            .filter(|v| *v > 0)
            .unwrap_or_else(|| {
                eprintln!("cpu_worker {mode}: {what} must be a positive whole number");
                std::process::exit(2)
            })
    };
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    match mode {
        "calibrate" => {
            let threads: Vec<_> = (0..arg("THREADS"))
                .map(|t| {
                    std::thread::spawn(move || {
                        let start = Instant::now();
                        let mut n = 0u64;
                        while start.elapsed() < Duration::from_secs(1) {
                            std::hint::black_box(chunk(n + t));
                            n += 1;
                        }
                        n
                    })
                })
                .collect();
            let n: u64 = threads.into_iter().map(|t| t.join().unwrap_or(0)).sum();
            println!("{n}");
            return;
        }
        "busy" => {
            for t in 0..arg("THREADS") {
                let (done, stop) = (done.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut i = t;
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::black_box(chunk(i));
                        i += 1;
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        }
        "paced" => {
            let gap = Duration::from_secs_f64(1.0 / arg("OPS") as f64);
            let (done, stop) = (done.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut next = Instant::now();
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    std::hint::black_box(chunk(i));
                    i += 1;
                    done.fetch_add(1, Ordering::Relaxed);
                    next += gap;
                    std::thread::sleep(next.saturating_duration_since(Instant::now()));
                }
            });
        }
        _ => {
            eprintln!("usage: cpu_worker busy THREADS | paced OPS | calibrate THREADS");
            std::process::exit(2);
        }
    }
    let dir = PathBuf::from(std::env::var("SPINDLE_CHECKPOINT_DIR").unwrap_or_else(|_| {
        eprintln!("cpu_worker: SPINDLE_CHECKPOINT_DIR is not set");
        std::process::exit(2)
    }));
    let max = std::env::var("CPU_WORKER_MAX_S")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(120);
    if let Err(e) = write_atomic(&dir, "pid", &std::process::id().to_string()) {
        eprintln!("cpu_worker: writing its pid in {}: {e}", dir.display());
        std::process::exit(2);
    }
    let start = Instant::now();
    let mut last = (Instant::now(), 0u64);
    while start.elapsed() < Duration::from_secs(max) {
        std::thread::sleep(Duration::from_secs(1));
        let (at, n) = (Instant::now(), done.load(Ordering::Relaxed));
        let rate = (n - last.1) as f64 / at.duration_since(last.0).as_secs_f64();
        last = (at, n);
        let logged = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("rates.log"))
            .and_then(|mut f| writeln!(f, "{} {rate:.2}", now_ms()));
        if let Err(e) =
            logged.and_then(|_| write_atomic(&dir, ".spindle-throughput", &format!("{rate:.2}\n")))
        {
            eprintln!("cpu_worker: writing in {}: {e}", dir.display());
        }
    }
    stop.store(true, Ordering::Relaxed);
}
