//! `cgroup_bench`: the added cost of cgroup setup and teardown per container launch (not a
//! test; `docs/performance.md` has the figures and the command).
//!
//! Two measurements over the same number of containers, each a GPU-like container (1 vcore
//! strict, 256 MB, pids limit, three GPUs denied):
//! 1. **direct**: `Cgroups::create` (mkdir, limits, device denial, opening `cgroup.procs`),
//!    then `/bin/true` placed in it before exec, then teardown (`oom_kills` + `destroy`);
//!    setup and teardown are timed separately, the process is not.
//! 2. **end to end**: the executor launching `true` and reaping it, with cgroups and without,
//!    interleaved; the difference of the two is what cgroups add to a launch as the NM does it.
//!
//! Needs root and mounted cgroups. Uses its own hierarchy under its own cgroups and removes it.

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use spindle_common::ids::{ApplicationAttemptId, ApplicationId, ContainerId};
use spindle_nodemanager::cgroups::{self, Cgroups, Layout};
use spindle_nodemanager::isolation::{
    DeviceIsolation, DeviceNumber, IsolationConfig, IsolationSpec,
};
use spindle_nodemanager::launcher::{ContainerExecutor, Enforcement, LaunchSpec, ProcessExecutor};

struct Args {
    containers: usize,
    devices: DeviceIsolation,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        containers: 200,
        devices: DeviceIsolation::Auto,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--containers" => {
                a.containers = value()?.parse().map_err(|e| format!("--containers: {e}"))?
            }
            "--devices" => {
                let v = value()?;
                a.devices = DeviceIsolation::parse(&v)
                    .ok_or(format!("--devices: auto, v1 or ebpf, not {v}"))?
            }
            "-h" | "--help" => {
                return Err("usage: cgroup_bench [--containers N] [--devices auto|v1|ebpf]".into())
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if a.containers == 0 {
        return Err("--containers must be at least 1".into());
    }
    Ok(a)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}

fn summary(name: &str, mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    let (p50, p99) = (percentile(&v, 50.0), percentile(&v, 99.0));
    println!(
        "| {name} | {} | {} | {} | {} |",
        v.len(),
        ms(p50),
        ms(p99),
        ms(v[v.len() - 1])
    );
    (p50, p99)
}

fn cid(seq: u64) -> ContainerId {
    ContainerId::new(
        ApplicationAttemptId::new(ApplicationId::new(1, 1), 1),
        0,
        seq,
    )
}

fn gpu_container() -> IsolationSpec {
    IsolationSpec {
        vcores: 1,
        memory_mb: 256,
        strict_cpu: true,
        denied_devices: [0, 1, 3].map(|m| DeviceNumber::char(195, m)).to_vec(),
        granted_devices: vec![DeviceNumber::char(195, 2)],
        pids_max: 4096,
    }
}

/// Runs `/bin/true` inside the placement's cgroups.
fn run_true(fds: Vec<i32>) -> std::io::Result<()> {
    let mut cmd = std::process::Command::new("/bin/true");
    // SAFETY: in the forked child, only write(2) on descriptors opened before the fork.
    unsafe {
        cmd.pre_exec(move || {
            for &fd in &fds {
                cgroups::enter_cgroup(fd)?;
            }
            Ok(())
        });
    }
    let st = cmd.status()?;
    if st.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!("/bin/true: {st}")))
    }
}

fn launch_spec(base: &Path, id: ContainerId) -> LaunchSpec {
    let work_dir = base.join("app").join(id.to_string());
    LaunchSpec {
        container_id: id,
        user: "bench".into(),
        command: "true".into(),
        env: BTreeMap::new(),
        work_dir,
        app_local_dirs: vec![base.join("app")],
        log_dirs: vec![base.join("logs").join(id.to_string())],
        local_resources: BTreeMap::new(),
        isolation: gpu_container(),
        run_as: None,
        fetch_token: None,
    }
}

async fn end_to_end(
    ex: &ProcessExecutor,
    base: &Path,
    id: ContainerId,
) -> Result<Duration, String> {
    let spec = launch_spec(base, id);
    ex.prepare(&spec).map_err(|e| e.to_string())?;
    let t = Instant::now();
    let p = ex.start(&spec, false).map_err(|e| e.to_string())?;
    let exit = p.exit.await;
    let d = t.elapsed();
    if exit.exit_status() != 0 {
        return Err(format!("{id}: {exit:?}"));
    }
    let _ = std::fs::remove_dir_all(&spec.work_dir);
    Ok(d)
}

struct Cleanup {
    layout: Layout,
    hierarchy: String,
    dir: PathBuf,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Err(e) = cgroups::purge_hierarchy(&self.layout, &self.hierarchy) {
            eprintln!("warning: cannot remove {}: {e}", self.hierarchy);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Durations of the direct measurements, one per container after the warm-up.
#[derive(Default)]
struct DirectTimes {
    setup: Vec<Duration>,
    teardown: Vec<Duration>,
    both: Vec<Duration>,
    placed: Vec<Duration>,
    unplaced: Vec<Duration>,
}

/// Part 1: cgroup setup and teardown, and `/bin/true` run placed in them or not.
fn direct(cg: &Cgroups, containers: usize) -> Result<DirectTimes, String> {
    let spec = gpu_container();
    let mut times = DirectTimes::default();
    for i in 0..containers + 10 {
        let id = cid(i as u64 + 1);
        let t0 = Instant::now();
        let placement = match cg.create(&id, &spec) {
            Ok(p) => p,
            Err(e) => return Err(format!("create: {e}")),
        };
        let s = t0.elapsed();
        let fds = placement.fds();
        let t_run = Instant::now();
        let ran = run_true(fds);
        let r = t_run.elapsed();
        drop(placement);
        if let Err(e) = ran {
            return Err(format!("placing /bin/true: {e}"));
        }
        let t_plain = Instant::now();
        if let Err(e) = run_true(Vec::new()) {
            return Err(format!("/bin/true: {e}"));
        }
        let u = t_plain.elapsed();
        let t1 = Instant::now();
        let _ = cg.oom_kills(&id);
        if let Err(e) = cg.destroy(&id) {
            return Err(format!("destroy: {e}"));
        }
        let t = t1.elapsed();
        if i >= 10 {
            times.setup.push(s);
            times.teardown.push(t);
            times.both.push(s + t);
            times.placed.push(r);
            times.unplaced.push(u);
        }
    }
    Ok(times)
}

/// Part 2: launches through the executor, with and without cgroups, start to reaped.
fn end_to_end_all(
    cg: &Arc<Cgroups>,
    dir: &Path,
    containers: usize,
) -> Result<(Vec<Duration>, Vec<Duration>), String> {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return Err(format!("runtime: {e}")),
    };
    let with = ProcessExecutor::with_enforcement(Enforcement::Cgroups {
        cgroups: Arc::clone(cg),
        interval: Duration::from_secs(3),
    });
    let without = ProcessExecutor::new();
    rt.block_on(async {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for i in 0..containers + 10 {
            let x = end_to_end(&with, dir, cid(10_000 + i as u64)).await?;
            let y = end_to_end(&without, dir, cid(20_000 + i as u64)).await?;
            if i >= 10 {
                a.push(x);
                b.push(y);
            }
        }
        Ok((a, b))
    })
    .map_err(|e: String| format!("end-to-end launch failed: {e}"))
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    if !nix::unistd::geteuid().is_root() {
        eprintln!("cgroup_bench needs root (it creates cgroups)");
        return ExitCode::from(2);
    }
    let layout = match Layout::detect() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("cannot read /proc/self: {e}");
            return ExitCode::from(1);
        }
    };
    let pid = std::process::id();
    let cleanup = Cleanup {
        layout: layout.clone(),
        // Inside our own cgroups on v1/hybrid; at the root on pure cgroup2 (a cgroup with
        // processes cannot delegate controllers).
        hierarchy: if layout.v1_mount("memory").is_some() {
            format!("spindle-bench-{pid}")
        } else {
            format!("/spindle-bench-{pid}")
        },
        dir: std::env::temp_dir().join(format!("spindle-bench-{pid}")),
    };
    let conf = IsolationConfig {
        hierarchy: cleanup.hierarchy.clone(),
        strict_cpu: true,
        device_isolation: args.devices,
        ..Default::default()
    };
    let cg = match Cgroups::new(&layout, &conf, "nm-bench") {
        Ok(c) => Arc::new(c),
        Err(e) => {
            eprintln!("cgroups are not usable here: {e}");
            return ExitCode::from(1);
        }
    };
    let devices = match cg.device_isolation() {
        Ok(how) => how.to_string(),
        Err(reason) => {
            eprintln!("device isolation unavailable: {reason}");
            return ExitCode::from(1);
        }
    };
    println!("cgroups: {}", cg.describe());
    println!("devices: {devices}");
    println!("containers: {} (+10 warm-up each)\n", args.containers);

    let times = match direct(&cg, args.containers) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    println!("direct (ms):\n");
    println!("| phase | n | p50 | p99 | max |\n|---|---|---|---|---|");
    summary("setup (create)", times.setup);
    summary("teardown (oom read + destroy)", times.teardown);
    let (p50, p99) = summary("setup + teardown", times.both);
    let (r50, r99) = summary("run /bin/true placed in its cgroups", times.placed);
    let (u50, u99) = summary("run /bin/true, no cgroups", times.unplaced);

    let (a, b) = match end_to_end_all(&cg, &cleanup.dir, args.containers) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    println!("\nend to end, start to reaped, `true` (ms):\n");
    println!("| executor | n | p50 | p99 | max |\n|---|---|---|---|---|");
    let (w50, w99) = summary("with cgroups", a);
    let (o50, o99) = summary("without cgroups", b);
    println!(
        "\nadded per launch: setup + teardown p50 {} ms, p99 {} ms; placement (placed - unplaced run) p50 {} ms, p99 {} ms; end to end p50 {} ms, p99 {} ms (target < 5 ms)",
        ms(p50),
        ms(p99),
        ms(r50.saturating_sub(u50)),
        ms(r99.saturating_sub(u99)),
        ms(w50.saturating_sub(o50)),
        ms(w99.saturating_sub(o99))
    );
    cg.shutdown();
    drop(cleanup);
    if p99 < Duration::from_millis(5) {
        ExitCode::SUCCESS
    } else {
        eprintln!("p99 setup + teardown is over the 5 ms target");
        ExitCode::from(3)
    }
}
