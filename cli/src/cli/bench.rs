//! `spindle bench scheduler --nodes N [--apps A] [--containers-per-app C] [--steady-events E]
//! [--ordering fifo|fair|las|fairshare] [--cpu-policy proportional|static|adaptive]`:
//! the scheduler benchmark of the RM's pure core (`spindle_resourcemanager::bench`), printed
//! as one JSON line. A benchmark, not a test: run it on a quiet machine, in a release build.
//! `spindle bench http` measures a running RM over HTTP(S) instead (`bench/http.rs`).

use anyhow::{bail, Context};

use spindle_resourcemanager::core::queue_conf::OrderingPolicy;

use super::EXIT_OK;

mod http;

pub async fn run(args: Vec<String>) -> anyhow::Result<u8> {
    let mut it = args.iter();
    let gangs = match it.next().map(String::as_str) {
        Some("scheduler") => false,
        Some("gangs") => true,
        Some("http") => return http::run(&args[1..]).await,
        _ => bail!("usage: spindle bench scheduler|gangs --nodes N [--apps A] [--containers-per-app C] [--steady-events E] [--seed S] [--preemption 0|1] [--constrained 0|1] [--ordering fifo|fair|las|fairshare] [--cpu-policy proportional|static|adaptive]\n       spindle bench http [--submissions N] [--concurrency C] [--heartbeats H] [--nodes N] [--kill K] [--rm-address HOST:PORT] [--conf-dir DIR]"),
    };
    let mut spec = spindle_resourcemanager::bench::BenchSpec::new(10_000);
    let rest: Vec<&String> = it.collect();
    let mut i = 0;
    while i < rest.len() {
        let flag = rest[i].trim_start_matches('-');
        let value = rest
            .get(i + 1)
            .with_context(|| format!("{} needs a value", rest[i]))?;
        if flag == "ordering" {
            let names = OrderingPolicy::ALL.map(|p| p.as_str()).join(", ");
            spec.ordering =
                Some(OrderingPolicy::from_name(value).with_context(|| {
                    format!("--ordering must be one of {names}, got '{value}'")
                })?);
            i += 2;
            continue;
        }
        if flag == "cpu-policy" {
            let cpus_per_gpu = spindle_common::config::keys::DEFAULT_CPU_POLICY_CPUS_PER_GPU;
            spec.cpu_policy = Some(
                spindle_resourcemanager::core::CpuPolicy::parse(value, cpus_per_gpu)
                    .with_context(|| format!("--cpu-policy: '{value}'"))?,
            );
            i += 2;
            continue;
        }
        let n: u64 = value.parse().with_context(|| {
            format!("{} must be a non-negative integer, got '{value}'", rest[i])
        })?;
        match flag {
            "nodes" => spec.nodes = n as usize,
            "apps" => spec.apps = n as usize,
            "containers-per-app" => spec.containers_per_app = n as u32,
            "steady-events" => spec.steady_events = n as usize,
            "racks" => spec.racks = (n as usize).max(1),
            "seed" => spec.seed = n,
            "preemption" => spec.preemption = n != 0,
            "constrained" => spec.constrained = n != 0,
            other => bail!("unknown option --{other}"),
        }
        i += 2;
    }
    if spec.nodes == 0 || spec.apps == 0 {
        bail!("--nodes and --apps must be positive");
    }
    // The core is synchronous and single-threaded: run it off the async runtime's workers.
    let line = tokio::task::spawn_blocking(move || {
        if gangs {
            serde_json::to_string(&spindle_resourcemanager::bench::run_gangs(&spec))
        } else {
            serde_json::to_string(&spindle_resourcemanager::bench::run(&spec))
        }
    })
    .await
    .context("the benchmark task failed")?
    .context("encoding the result")?;
    println!("{line}");
    Ok(EXIT_OK)
}
