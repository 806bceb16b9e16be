//! `spindle minicluster`: a resourcemanager and N nodemanagers on this machine, optionally
//! with a distributed shell demo run against them.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use tokio::signal::unix::{signal, SignalKind};

use super::args::{Opt, Parsed, UsageError};
use super::{parse_or_usage, usage_error, EXIT_APP_FAILED, EXIT_ERROR, EXIT_OK};
use crate::minicluster::{MiniCluster, MiniClusterOptions, DEFAULT_STARTUP_TIMEOUT};
use spindle_appmaster_sdk::dshell::{run_client, DsAmConfig, DsOptions};
use spindle_appmaster_sdk::rm_client::RmClient;

pub const USAGE: &str = "\
usage: spindle minicluster [--nodes N] [--gpus-per-node G] [--rm-address HOST:PORT] [--conf-dir DIR]
                           [--work-dir DIR] [--demo] [--keep-running] [--startup-timeout-ms MS]
  --nodes N              nodemanagers to start (default 1)
  --gpus-per-node G      every nodemanager discovers G fake GPUs (scripts/fake-nvidia-smi,
                         needs python3) and the RM schedules yarn.io/gpu
  --rm-address HOST:PORT where the RM listens (default 127.0.0.1 and a free port)
  --conf-dir DIR         configuration for every daemon (default $SPINDLE_CONF_DIR, ./conf)
  --work-dir DIR         state, container dirs and daemon logs (default: a new temp dir)
  --demo                 run a 2-container distributed shell job, print its output, stop
  --keep-running         with --demo: keep the cluster running afterwards
Without --demo (or with --keep-running) the cluster runs until SIGINT or SIGTERM.
The daemons (resourcemanager, nodemanager) are taken from next to this binary, else PATH.";

const OPTS: &[Opt] = &[
    Opt::one("nodes", &["num_nodes"]),
    Opt::one("gpus-per-node", &[]),
    Opt::one("work-dir", &["workDir"]),
    Opt::flag("demo", &[]),
    Opt::flag("keep-running", &[]),
    Opt::one("startup-timeout-ms", &[]),
    Opt::one("bin-dir", &[]),
];

pub const DEMO_COMMAND: &str = "echo hello from $CONTAINER_ID on $NM_HOST";

pub fn options_from(p: &Parsed) -> Result<MiniClusterOptions, UsageError> {
    let nodes = p.parse::<u32>("nodes")?.unwrap_or(1);
    if nodes == 0 {
        return Err(UsageError::Invalid {
            option: "nodes",
            value: "0".into(),
            reason: "must be at least 1".into(),
        });
    }
    Ok(MiniClusterOptions {
        nodes,
        rm_bind: p.value("rm-address").map(str::to_string),
        conf_dir: p.value("conf-dir").map(PathBuf::from),
        work_dir: p.value("work-dir").map(PathBuf::from),
        startup_timeout: p
            .parse::<u64>("startup-timeout-ms")?
            .map(Duration::from_millis)
            .unwrap_or(DEFAULT_STARTUP_TIMEOUT),
        bin_dir: p.value("bin-dir").map(PathBuf::from),
        gpus_per_node: p.parse::<u32>("gpus-per-node")?.unwrap_or(0),
    })
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() -> anyhow::Result<&'static str> {
    let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    Ok(tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    })
}

pub async fn run(args: Vec<String>) -> anyhow::Result<u8> {
    let Some(p) = parse_or_usage(&args, OPTS, USAGE)? else {
        return Ok(EXIT_OK);
    };
    let opts = options_from(&p).map_err(|e| usage_error(e, USAGE))?;
    // Handlers first, so that a signal during startup still stops the daemons (the
    // cancelled start drops its guard).
    let signal = shutdown_signal();
    tokio::pin!(signal);
    let mut cluster = tokio::select! {
        r = MiniCluster::start(&opts) => r.context("minicluster failed to start")?,
        s = &mut signal => {
            eprintln!("{}; stopped during startup", s?);
            return Ok(EXIT_ERROR);
        }
    };
    say!("Work dir: {}", cluster.work_dir.display());
    say!("Configuration: {}", cluster.conf_dir.display());
    for d in cluster.daemons() {
        say!(
            "{} running (pid {}), log {}",
            d.name,
            d.pid(),
            d.log.display()
        );
    }
    for (i, a) in cluster.nm_addresses.iter().enumerate() {
        say!("NodeManager nm{i}: http://{a}/");
    }
    if opts.gpus_per_node > 0 {
        say!(
            "Fake GPUs: {} per node ({}/fake-gpus/nvidia-smi)",
            opts.gpus_per_node,
            cluster.work_dir.display()
        );
    }
    say!("RM web UI: http://{}/", cluster.rm_address);
    say!("SPINDLE_RM_ADDRESS={}", cluster.rm_address);

    let mut code = EXIT_OK;
    if p.has("demo") {
        let demo = tokio::select! {
            r = demo(&cluster) => r,
            s = &mut signal => {
                // Dropping the cluster stops the daemons.
                eprintln!("{}; stopping the minicluster", s?);
                return Ok(EXIT_ERROR);
            }
        };
        match demo {
            Ok(true) => say!("Demo SUCCEEDED"),
            Ok(false) => {
                say!("Demo FAILED");
                code = EXIT_APP_FAILED;
            }
            Err(e) => {
                eprintln!("error: demo failed: {e:#}");
                code = EXIT_APP_FAILED;
            }
        }
        if !p.has("keep-running") {
            say!("Stopping the minicluster");
            cluster.stop();
            return Ok(code);
        }
    }
    say!("Minicluster running; press Ctrl-C (or send SIGTERM) to stop it");
    let mut check = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            s = &mut signal => {
                say!("{}; stopping the minicluster", s?);
                break;
            }
            _ = check.tick() => {
                if let Err(e) = cluster.check_alive() {
                    eprintln!("error: {e}");
                    code = EXIT_ERROR;
                    break;
                }
            }
        }
    }
    cluster.stop();
    Ok(code)
}

/// Runs the distributed shell demo in-process and prints its containers' stdout.
async fn demo(cluster: &MiniCluster) -> anyhow::Result<bool> {
    let rm = RmClient::new(&cluster.rm_address)?;
    let mut opts = DsOptions::new(DsAmConfig {
        num_containers: 2,
        container_resources: spindle_appmaster_sdk::dshell::default_container_resources(),
        shell_command: DEMO_COMMAND.into(),
        shell_env: BTreeMap::new(),
        container_priority: 0,
        no_progress_timeout: Duration::from_secs(60),
        placement: Vec::new(),
        node_label_expression: None,
    });
    opts.app_name = "minicluster-demo".into();
    opts.timeout = Some(Duration::from_secs(120));
    say!("Running distributed shell: 2 containers, '{DEMO_COMMAND}'");
    let exe = super::launch::current_exe()?;
    let outcome = run_client(&rm, &opts, &exe, &mut |l| say!("{l}")).await?;
    say!("Container output (stdout):");
    let files = vec!["stdout".to_string()];
    match super::logs::print_logs(&rm, &outcome.app_id, None, &files, &mut |s| say_raw!("{s}"))
        .await
    {
        Ok(0) => say!("(no container logs found)"),
        Ok(_) => {}
        Err(e) => eprintln!("cannot fetch the logs: {e:#}"),
    }
    Ok(outcome.succeeded())
}

#[cfg(test)]
mod tests {
    use super::super::args::parse;
    use super::*;

    #[test]
    fn options() {
        let all: Vec<Opt> = OPTS
            .iter()
            .chain(super::super::COMMON_OPTS.iter())
            .copied()
            .collect();
        let a: Vec<String> = [
            "--nodes",
            "3",
            "--demo",
            "-keep-running",
            "--work-dir",
            "/tmp/x",
            "--gpus-per-node",
            "4",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let p = parse(&a, &all).unwrap();
        let o = options_from(&p).unwrap();
        assert_eq!(o.nodes, 3);
        assert_eq!(o.work_dir, Some(PathBuf::from("/tmp/x")));
        assert_eq!(o.gpus_per_node, 4);
        assert!(p.has("demo") && p.has("keep-running"));
        let p = parse(&["--nodes".to_string(), "0".to_string()], &all).unwrap();
        assert!(options_from(&p).is_err());
    }
}
