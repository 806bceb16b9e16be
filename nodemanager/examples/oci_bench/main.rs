//! `oci_bench`: what running a job in a container image costs (issue 28; not a test,
//! `docs/performance.md` has the figures and the command). Two measurements, same run:
//!
//! 1. **start** ([`start`]): launch to reaped of `/bin/true` from an image already in the
//!    cache, interleaved over the same N: (A) a process container (`ProcessExecutor`, no
//!    image), (B) an image container (`OciExecutor` over `NodeImages`, the real crun), and
//!    (C) `podman run --rm` (crun) of the same image, imported once from the same OCI layout.
//! 2. **pull** ([`pull`]): a ~500 MB image (busybox and layers of seeded pseudo-random, so
//!    incompressible, data) from a `docker-registry` of its own on 127.0.0.1, through
//!    `ImageStore::ensure` with a cold cache, interleaved with `skopeo copy` of the same image
//!    into `oci:` and `dir:`; and Spindle's stages (sha256, gunzip, unpack) over the same
//!    layer blobs on disk, to say what bounds the pull.
//!
//! An example, not a `src/bin` binary like `cgroup_bench`: it builds its images and starts its
//! registry with the test helpers of `spindle-test-support` (a dev-dependency), which the
//! NodeManager's own binaries must not depend on.
//!
//! Needs root (crun, overlay mounts, podman rootful), crun, and the tools the image helpers
//! run (umoci, skopeo, docker-registry, busybox-static); podman is optional (`--no-podman`,
//! or column C says why it is missing). Everything it makes is under one temporary directory
//! (podman's storage included), removed at the end; the registry is killed by pid.

mod pull;
mod start;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use spindle_test_support::images::TOOLS;

const USAGE: &str = "usage: oci_bench [--starts N] [--pulls N] [--image-mb MB] [--layers N] [--seed S] [--no-podman] [--skip-start] [--skip-pull]";

pub(crate) struct Args {
    pub starts: usize,
    pub pulls: usize,
    pub image_mb: u64,
    pub layers: usize,
    pub seed: u64,
    pub podman: bool,
    pub start: bool,
    pub pull: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        starts: 40,
        pulls: 3,
        image_mb: 512,
        layers: 4,
        seed: 28,
        podman: true,
        start: true,
        pull: true,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        let bad = |e: std::num::ParseIntError| format!("{flag}: {e}");
        match flag.as_str() {
            "--starts" => a.starts = value()?.parse().map_err(bad)?,
            "--pulls" => a.pulls = value()?.parse().map_err(bad)?,
            "--image-mb" => a.image_mb = value()?.parse().map_err(bad)?,
            "--layers" => a.layers = value()?.parse().map_err(bad)?,
            "--seed" => a.seed = value()?.parse().map_err(bad)?,
            "--no-podman" => a.podman = false,
            "--skip-start" => a.start = false,
            "--skip-pull" => a.pull = false,
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    // Bounded: a few minutes in all at the defaults, never unbounded disk or time.
    let limits = [
        ("--starts", a.starts as u64, 1, 1000),
        ("--pulls", a.pulls as u64, 1, 20),
        ("--image-mb", a.image_mb, 1, 4096),
        ("--layers", a.layers as u64, 1, 16),
    ];
    for (name, v, lo, hi) in limits {
        if !(lo..=hi).contains(&v) {
            return Err(format!("{name} must be between {lo} and {hi}, not {v}"));
        }
    }
    Ok(a)
}

/// p50, p90 and max of a set of durations.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Summary {
    pub n: usize,
    pub p50: Duration,
    pub p90: Duration,
    pub max: Duration,
}

impl Summary {
    pub(crate) fn of(mut v: Vec<Duration>) -> Summary {
        v.sort();
        let at = |q: f64| {
            let rank = (q * v.len() as f64).ceil() as usize;
            v[rank.clamp(1, v.len()) - 1]
        };
        Summary {
            n: v.len(),
            p50: at(0.5),
            p90: at(0.9),
            max: v[v.len() - 1],
        }
    }
}

pub(crate) fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

/// The scratch directory, removed on drop unless something is still mounted under it.
struct Scratch {
    dir: PathBuf,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let prefix = self.dir.to_string_lossy().into_owned();
        let left: Vec<&str> = mounts
            .lines()
            .filter_map(|l| l.split(' ').nth(4))
            .filter(|m| m.starts_with(&prefix))
            .collect();
        if !left.is_empty() {
            eprintln!(
                "warning: {} not removed, still mounted there: {left:?}",
                self.dir.display()
            );
            return;
        }
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            eprintln!("warning: cannot remove {}: {e}", self.dir.display());
        }
    }
}

/// Why the machine cannot run the bench, if it cannot.
fn missing_tools() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("oci_bench needs root (crun, overlay mounts, podman rootful)".into());
    }
    let missing: Vec<_> = TOOLS.iter().filter(|t| !Path::new(t).exists()).collect();
    if !missing.is_empty() {
        return Some(format!(
            "missing {missing:?} (Debian: docker-registry umoci skopeo busybox-static)"
        ));
    }
    if let Err(e) = spindle_nodemanager::oci::find_runtime_binary(Some("crun")) {
        return Some(format!("no crun: {e}"));
    }
    None
}

/// The benchmarks the arguments ask for; their summary, or an exit code and why.
fn bench() -> Result<String, (u8, String)> {
    let args = parse_args().map_err(|e| (2, e))?;
    if let Some(why) = missing_tools() {
        return Err((2, why));
    }
    let scratch = Scratch {
        dir: std::env::temp_dir().join(format!("spindle-oci-bench-{}", std::process::id())),
    };
    std::fs::create_dir(&scratch.dir)
        .map_err(|e| (1, format!("cannot create {}: {e}", scratch.dir.display())))?;
    let mut report = Vec::new();
    if args.start {
        let r = start::run(&scratch.dir.join("start"), &args);
        report.push(r.map_err(|e| (1, format!("start benchmark failed: {e}")))?);
    }
    if args.pull {
        let r = pull::run(&scratch.dir.join("pull"), &args);
        report.push(r.map_err(|e| (1, format!("pull benchmark failed: {e}")))?);
    }
    Ok(report.join("\n"))
}

fn main() -> ExitCode {
    match bench() {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err((code, why)) => {
            eprintln!("{why}");
            ExitCode::from(code)
        }
    }
}
