//! `spindle minicluster`: a resourcemanager and N nodemanagers on this machine; with `--demo`,
//! a distributed shell job and then a training gang run against them, as the commands a user
//! would type (`spindle distributed-shell ...`, `spindle train ...`, run as child processes),
//! with the containers' output and the gang's rank environment printed from their logs.
//!
//! The work directory is a new temporary one, removed when the minicluster stops, unless it
//! was given (`--work-dir`), `--keep-work-dir` was asked, or something failed (startup, a
//! daemon, the demo): then it is kept for its logs, and the last line says where.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::signal::unix::{signal, SignalKind};

use super::args::{Opt, Parsed, UsageError};
use super::{parse_or_usage, usage_error, EXIT_APP_FAILED, EXIT_ERROR, EXIT_OK};
use crate::minicluster::{new_work_dir, MiniCluster, MiniClusterOptions, DEFAULT_STARTUP_TIMEOUT};
use spindle_appmaster_sdk::nm_client::NmClient;
use spindle_appmaster_sdk::rm_client::RmClient;
use spindle_appmaster_sdk::train::shell_quote;
use spindle_common::ids::ApplicationId;
use spindle_common::resource::GPU;

pub const USAGE: &str = "\
usage: spindle minicluster [--nodes N] [--gpus-per-node G] [--rm-address HOST:PORT] [--conf-dir DIR]
                           [-D name=value ...] [--work-dir DIR] [--keep-work-dir] [--demo]
                           [--keep-running] [--startup-timeout-ms MS]
  --nodes N              nodemanagers to start (default 1)
  --gpus-per-node G      every nodemanager discovers G fake GPUs (scripts/fake-nvidia-smi,
                         needs python3) and the RM schedules yarn.io/gpu
  --rm-address HOST:PORT where the RM listens (default 127.0.0.1 and a free port)
  --conf-dir DIR         configuration for every daemon (default $SPINDLE_CONF_DIR, ./conf)
  -D name=value          a property for the RM and every NM, over the files and the
                         minicluster's own settings (repeatable; -Dname=value works too)
  --work-dir DIR         state, container dirs and daemon logs; kept afterwards (default: a
                         new temporary directory, removed when the minicluster stops)
  --keep-work-dir        keep the temporary work dir when the minicluster stops
  --demo                 run a 2-container distributed shell job, then a training gang of 2
                         workers with a GPU each that print their rank environment; print
                         their output and stop. Without --gpus-per-node and without a GPU
                         plugin in the configuration, every node gets 2 fake GPUs for it
  --keep-running         with --demo: keep the cluster running afterwards
Without --demo (or with --keep-running) the cluster runs until SIGINT or SIGTERM. The work
dir is kept whenever startup, a daemon or the demo fails, for its logs.
Where the configuration leaves it unset, the RM gets
yarn.scheduler.capacity.maximum-am-resource-percent=0.5, so that a cluster of a few nodes runs
several applications at once (YARN's 0.1 is sized for large clusters).
The daemons (resourcemanager, nodemanager) are taken from next to this binary, else PATH.";

pub const OPTS: &[Opt] = &[
    Opt::one("nodes", &["num_nodes"]),
    Opt::one("gpus-per-node", &[]),
    Opt::one("work-dir", &["workDir"]),
    Opt::flag("keep-work-dir", &[]),
    Opt::repeated("D", &["define"]),
    Opt::flag("demo", &[]),
    Opt::flag("keep-running", &[]),
    Opt::one("startup-timeout-ms", &[]),
    Opt::one("bin-dir", &[]),
];

/// The distributed shell demo's command, run in each of its containers.
pub const DEMO_COMMAND: &str = "echo hello from $CONTAINER_ID on $NM_HOST";
/// What each worker of the demo's training gang runs: one line with its rank environment.
pub const DEMO_WORKER_SCRIPT: &str = "echo RANK=$RANK WORLD_SIZE=$WORLD_SIZE LOCAL_RANK=$LOCAL_RANK MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES";
/// Workers in the demo's gang.
pub const DEMO_WORKERS: u32 = 2;
/// Fake GPUs per node the demo turns on when the cluster would have none.
pub const DEMO_FAKE_GPUS: u32 = 2;
/// How long each demo application may take before its client kills it.
const DEMO_APP_TIMEOUT: Duration = Duration::from_secs(120);

/// Hadoop's `-Dname=value` as two words, `-D name=value`, for the option parser.
fn split_defines(args: Vec<String>) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    for a in args {
        match a.strip_prefix("-D") {
            Some(rest) if !rest.is_empty() && rest.contains('=') => {
                out.push("-D".to_string());
                out.push(rest.to_string());
            }
            _ => out.push(a),
        }
    }
    out
}

pub fn options_from(p: &Parsed) -> Result<MiniClusterOptions, UsageError> {
    let nodes = p.parse::<u32>("nodes")?.unwrap_or(1);
    if nodes == 0 {
        return Err(UsageError::Invalid {
            option: "nodes",
            value: "0".into(),
            reason: "must be at least 1".into(),
        });
    }
    let mut defines = Vec::new();
    for d in p.values("D") {
        match d.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                defines.push((k.trim().to_string(), v.to_string()));
            }
            _ => {
                return Err(UsageError::Invalid {
                    option: "D",
                    value: d.clone(),
                    reason: "expected name=value".into(),
                })
            }
        }
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
        defines,
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

/// The minicluster's work directory and whether it goes when the minicluster stops.
struct WorkDir {
    path: PathBuf,
    /// A temporary directory this command made, without `--keep-work-dir`.
    remove: bool,
}

impl WorkDir {
    fn new(given: Option<&Path>, keep: bool) -> anyhow::Result<Self> {
        Ok(match given {
            Some(p) => Self {
                path: p.to_path_buf(),
                remove: false,
            },
            None => Self {
                path: new_work_dir().context("cannot make the work directory")?,
                remove: !keep,
            },
        })
    }

    /// How the startup banner describes it.
    fn fate(&self, given: bool) -> &'static str {
        match (self.remove, given) {
            (true, _) => "removed when the minicluster stops; --keep-work-dir keeps it",
            (false, true) => "kept: given with --work-dir",
            (false, false) => "kept: --keep-work-dir",
        }
    }

    /// Removes it (daemons already stopped) unless it is kept; `failed` keeps it for its
    /// logs. Says which.
    fn finish(self, failed: bool) {
        if self.remove && !failed {
            match std::fs::remove_dir_all(&self.path) {
                Ok(()) => say!("Removed the work dir {}", self.path.display()),
                Err(e) => eprintln!(
                    "warning: cannot remove the work dir {}: {e}",
                    self.path.display()
                ),
            }
        } else if failed {
            eprintln!("Work dir kept for its logs: {}", self.path.display());
        } else {
            say!("Work dir kept: {}", self.path.display());
        }
    }
}

/// Which configuration directory the daemons read, and why that one: `--conf-dir`,
/// `$SPINDLE_CONF_DIR` or `./conf` in the current directory; or that there is none.
pub fn conf_dir_line(opts: &MiniClusterOptions) -> String {
    let why = if opts.conf_dir.is_some() {
        "--conf-dir"
    } else if std::env::var_os(spindle_common::env::CONF_DIR).is_some() {
        "$SPINDLE_CONF_DIR"
    } else {
        "./conf in the current directory, the default; --conf-dir DIR or $SPINDLE_CONF_DIR \
         choose another"
    };
    let asked = spindle_common::config::Configuration::resolve_conf_dir(opts.conf_dir.as_deref());
    match opts.existing_conf_dir() {
        Some(dir) => format!("Configuration directory: {} (from {why})", dir.display()),
        None => format!(
            "Configuration directory: none ({} from {why} does not exist): the daemons get an \
             empty one in the work dir",
            asked.display()
        ),
    }
}

/// Whether `python3` (which runs the fake `nvidia-smi`) is on `PATH`.
fn python3_on_path() -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|d| {
            d.join("python3")
                .metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

pub async fn run(args: Vec<String>) -> anyhow::Result<u8> {
    let args = split_defines(args);
    let Some(p) = parse_or_usage(&args, OPTS, USAGE)? else {
        return Ok(EXIT_OK);
    };
    let mut opts = options_from(&p).map_err(|e| usage_error(e, USAGE))?;
    let demo = p.has("demo");
    if demo && opts.gpus_per_node == 0 && !opts.gpu_plugin_configured() {
        if python3_on_path() {
            opts.gpus_per_node = DEMO_FAKE_GPUS;
            say!(
                "No GPU plugin in the configuration: for the demo's training gang every node \
                 gets {DEMO_FAKE_GPUS} fake GPUs (scripts/fake-nvidia-smi; --gpus-per-node G \
                 to choose)"
            );
        } else {
            say!(
                "No GPU plugin in the configuration and no python3 for fake GPUs: the demo's \
                 training gang runs without GPUs"
            );
        }
    }
    // Said before the start, so that a start the configuration breaks names it too.
    say!("{}", conf_dir_line(&opts));
    let given = opts.work_dir.is_some();
    let work = WorkDir::new(opts.work_dir.as_deref(), p.has("keep-work-dir"))?;
    opts.work_dir = Some(work.path.clone());

    // Handlers first, so that a signal during startup still stops the daemons (the
    // cancelled start drops its guard).
    let signal = shutdown_signal();
    tokio::pin!(signal);
    let started = tokio::select! {
        r = MiniCluster::start(&opts) => r,
        s = &mut signal => {
            eprintln!("{}; stopped during startup", s?);
            work.finish(false);
            return Ok(EXIT_ERROR);
        }
    };
    let mut cluster = match started {
        Ok(c) => c,
        Err(e) => {
            work.finish(true);
            return Err(e).context("minicluster failed to start");
        }
    };
    say!(
        "Work dir: {} ({})",
        cluster.work_dir.display(),
        work.fate(given)
    );
    say!("Configuration in use: {}", cluster.conf_dir.display());
    say!(
        "Cluster secret (spindle.cluster.secret-file, node registrations and heartbeats are signed with it): {}",
        cluster.cluster_secret.display()
    );
    for (k, v) in &cluster.defaults_applied {
        say!("Minicluster default (the configuration leaves it unset): {k}={v}");
    }
    for (k, v) in &opts.defines {
        say!("-D {k}={v}");
    }
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
    if demo {
        let outcome = tokio::select! {
            r = run_demo(&cluster) => r,
            s = &mut signal => {
                eprintln!("{}; stopping the minicluster", s?);
                cluster.stop();
                work.finish(true);
                return Ok(EXIT_ERROR);
            }
        };
        match outcome {
            Ok(true) => say!("Demo SUCCEEDED"),
            Ok(false) => {
                say!("Demo FAILED");
                code = EXIT_APP_FAILED;
            }
            Err(e) => {
                eprintln!("error: demo failed: {}", super::error_text(&e));
                code = EXIT_APP_FAILED;
            }
        }
        if !p.has("keep-running") {
            say!("Stopping the minicluster");
            cluster.stop();
            work.finish(code != EXIT_OK);
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
    work.finish(code != EXIT_OK);
    Ok(code)
}

/// `spindle` and its arguments as a shell would take them.
fn command_line(args: &[String]) -> String {
    std::iter::once("spindle".to_string())
        .chain(args.iter().map(|a| shell_quote(a)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `spindle <args>` against the cluster (as a user would, `SPINDLE_RM_ADDRESS` set),
/// printing its output; returns whether it exited 0 and the application id it named.
async fn run_spindle(
    cluster: &MiniCluster,
    args: &[String],
) -> anyhow::Result<(bool, Option<ApplicationId>)> {
    say!("$ {}", command_line(args));
    let exe = std::env::current_exe().context("cannot find the spindle binary")?;
    let mut child = tokio::process::Command::new(&exe)
        .args(args)
        .env("SPINDLE_RM_ADDRESS", cluster.rm_address.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot run {}", exe.display()))?;
    let stdout = child.stdout.take().context("no stdout pipe")?;
    let mut lines = BufReader::new(stdout).lines();
    let mut app_id = None;
    let follow = async {
        while let Some(line) = lines.next_line().await? {
            if app_id.is_none() {
                app_id = first_app_id(&line);
            }
            say!("{line}");
        }
        child.wait().await
    };
    // The client kills its application at --timeout-ms; this bounds the client itself.
    let status = tokio::time::timeout(DEMO_APP_TIMEOUT + Duration::from_secs(30), follow)
        .await
        .context("the demo's client did not finish in time")?
        .context("cannot read the client's output")?;
    Ok((status.success(), app_id))
}

/// The first `application_<ts>_<n>` a line names.
fn first_app_id(line: &str) -> Option<ApplicationId> {
    line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .find(|w| w.starts_with("application_"))
        .and_then(|w| w.parse().ok())
}

/// The distributed shell, then a training gang; true when both succeed and every rank's
/// environment line is found in the workers' logs.
async fn run_demo(cluster: &MiniCluster) -> anyhow::Result<bool> {
    let rm = RmClient::new(&cluster.rm_address)?;
    let timeout_ms = DEMO_APP_TIMEOUT.as_millis().to_string();
    let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<String>>();

    say!("");
    say!("== Distributed shell: 2 containers");
    let mut args = words(&[
        "distributed-shell",
        "--num-containers",
        "2",
        "--container-resources",
        "memory-mb=256,vcores=1",
        "--appname",
        "minicluster-demo",
        "--timeout-ms",
        &timeout_ms,
        "--shell-command",
    ]);
    args.push(DEMO_COMMAND.to_string());
    let (mut ds_ok, ds_app) = run_spindle(cluster, &args).await?;
    if let Some(app) = &ds_app {
        let lines = task_stdout(&rm, app).await?;
        say!("Output of each container (its stdout, as `spindle logs -applicationId {app}` prints it):");
        for (line, container) in &lines {
            say!("  {line}    ({container})");
        }
        if lines.is_empty() {
            say!("(no container output found)");
            ds_ok = false;
        }
    }

    let gpus = cluster_gpus(&rm).await;
    let resources = if gpus >= u64::from(DEMO_WORKERS) {
        format!("{GPU}=1,memory-mb=256,vcores=1")
    } else {
        "memory-mb=256,vcores=1".to_string()
    };
    say!("");
    say!(
        "== Training gang: {DEMO_WORKERS} workers ({} GPUs in the cluster), each printing its rank environment",
        gpus
    );
    let mut args = words(&[
        "train",
        "--workers",
        &DEMO_WORKERS.to_string(),
        "--worker-resources",
        &resources,
        "--appname",
        "minicluster-demo-train",
        "--timeout-ms",
        &timeout_ms,
        "--",
        "sh",
        "-c",
    ]);
    args.push(DEMO_WORKER_SCRIPT.to_string());
    let (train_ok, train_app) = run_spindle(cluster, &args).await?;
    let mut ranks_ok = false;
    if let Some(app) = &train_app {
        let mut lines: Vec<(u32, String, String)> = task_stdout(&rm, app)
            .await?
            .into_iter()
            .filter_map(|(line, container)| {
                let rank = line.strip_prefix("RANK=")?.split_whitespace().next()?;
                Some((rank.parse().ok()?, line, container))
            })
            .collect();
        lines.sort();
        say!("Rank environment of each worker (its stdout, as `spindle logs -applicationId {app}` prints it):");
        for (_, line, container) in &lines {
            say!("  {line}    ({container})");
        }
        ranks_ok = lines.len() == DEMO_WORKERS as usize;
        if !ranks_ok {
            say!(
                "expected {DEMO_WORKERS} rank lines in the workers' logs, found {}",
                lines.len()
            );
        }
    }
    Ok(ds_ok && train_ok && ranks_ok)
}

/// GPUs the RUNNING nodes offer in all (0 when the RM cannot say).
async fn cluster_gpus(rm: &RmClient) -> u64 {
    match rm
        .nodes(&[spindle_common::states::NodeState::RUNNING])
        .await
    {
        Ok(nodes) => nodes
            .iter()
            .map(|n| u64::try_from(n.total_resource.to_resource().get(GPU)).unwrap_or(0))
            .sum(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot list the nodes");
            0
        }
    }
}

/// Every stdout line of the application's containers except its AMs', each with
/// `<container> on <node>`, in container order.
async fn task_stdout(rm: &RmClient, app: &ApplicationId) -> anyhow::Result<Vec<(String, String)>> {
    let nm = NmClient::new()?;
    let ams: Vec<String> = rm
        .app_attempts(app)
        .await
        .with_context(|| format!("cannot list the attempts of {app}"))?
        .into_iter()
        .map(|a| a.container_id)
        .collect();
    let containers = super::logs::find_containers(rm, &nm, app).await?;
    let mut out = Vec::new();
    for (cid, loc) in containers
        .iter()
        .filter(|(c, _)| !ams.contains(&c.to_string()))
    {
        match nm
            .container_log(&loc.node_http_address, cid, "stdout")
            .await
        {
            Ok(text) => out.extend(
                text.lines()
                    .map(|l| (l.to_string(), format!("{cid} on {}", loc.node_id))),
            ),
            Err(e) => tracing::warn!(container = %cid, error = %e, "cannot fetch its stdout"),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::args::parse;
    use super::*;

    fn all() -> Vec<Opt> {
        OPTS.iter()
            .chain(super::super::COMMON_OPTS.iter())
            .copied()
            .collect()
    }

    #[test]
    fn the_configuration_directory_is_named_with_where_it_came_from() {
        let dir = tempfile::tempdir().unwrap();
        let opts = MiniClusterOptions {
            conf_dir: Some(dir.path().to_path_buf()),
            ..Default::default()
        };
        let line = conf_dir_line(&opts);
        assert!(line.starts_with("Configuration directory: /"), "{line}");
        assert!(line.ends_with("(from --conf-dir)"), "{line}");
        let opts = MiniClusterOptions {
            conf_dir: Some(dir.path().join("nosuch")),
            ..Default::default()
        };
        let line = conf_dir_line(&opts);
        assert!(
            line.starts_with("Configuration directory: none (")
                && line.contains("nosuch from --conf-dir does not exist"),
            "{line}"
        );
    }

    fn words(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn options() {
        let a = words(&[
            "--nodes",
            "3",
            "--demo",
            "-keep-running",
            "--work-dir",
            "/tmp/x",
            "--gpus-per-node",
            "4",
            "--keep-work-dir",
        ]);
        let p = parse(&a, &all()).unwrap();
        let o = options_from(&p).unwrap();
        assert_eq!(o.nodes, 3);
        assert_eq!(o.work_dir, Some(PathBuf::from("/tmp/x")));
        assert_eq!(o.gpus_per_node, 4);
        assert!(o.defines.is_empty());
        assert!(p.has("demo") && p.has("keep-running") && p.has("keep-work-dir"));
        let p = parse(&words(&["--nodes", "0"]), &all()).unwrap();
        assert!(options_from(&p).is_err());
    }

    #[test]
    fn defines_in_both_spellings() {
        let a = split_defines(words(&[
            "-D",
            "yarn.nodemanager.resource.memory-mb=4096",
            "-Dyarn.scheduler.minimum-allocation-mb=256",
            "--demo",
            "-D",
            "a.b=x=y",
        ]));
        let p = parse(&a, &all()).unwrap();
        let o = options_from(&p).unwrap();
        assert_eq!(
            o.defines,
            [
                (
                    "yarn.nodemanager.resource.memory-mb".to_string(),
                    "4096".to_string()
                ),
                (
                    "yarn.scheduler.minimum-allocation-mb".to_string(),
                    "256".to_string()
                ),
                ("a.b".to_string(), "x=y".to_string()),
            ]
        );
        assert!(p.has("demo"));
        for bad in ["novalue", "=x"] {
            let p = parse(&words(&["-D", bad]), &all()).unwrap();
            let e = options_from(&p).unwrap_err();
            assert!(
                matches!(&e, UsageError::Invalid { option: "D", value, .. } if value == bad),
                "{e}"
            );
        }
    }

    #[test]
    fn the_demo_commands_read_as_typed() {
        let line = command_line(&words(&["train", "--workers", "2", "--", "sh", "-c"]))
            + " "
            + &shell_quote(DEMO_WORKER_SCRIPT);
        assert!(
            line.starts_with("spindle train --workers 2 -- sh -c 'echo RANK=$RANK "),
            "{line}"
        );
        assert_eq!(
            first_app_id("Submitted training application application_17_0002 (2 workers)"),
            Some("application_17_0002".parse().unwrap())
        );
        assert_eq!(first_app_id("no id here"), None);
    }
}
