//! A gang member for `gang_skew_bench`: the first thing it does is print the wall clock
//! (Unix ns) and its node's port to its stdout (the container's log file, already open: a
//! new file per member in one shared directory would have 64 processes contend for that
//! directory's lock and inode allocation, and measure the file system instead of the
//! launcher); then it stays `LINGER_MS`, like a worker waiting at its rendezvous (a member
//! that exited at once would have its exit and cleanup compete with the later members'
//! start).
//!
//! `gang_stamp [LINGER_MS]`, in a container. Kept to the standard library so that it starts
//! as fast as a program can here: the benchmark measures the launcher, not this.

#![forbid(unsafe_code)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn main() {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let node = std::env::var("NM_PORT").unwrap_or_default();
    println!("{t} {node}");
    let linger = std::env::args()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    std::thread::sleep(Duration::from_millis(linger));
}
