//! `spindle sweep` (a hyperparameter sweep or Slurm job array: the client) and `spindle
//! sweep-am` (the AM it ships), on [`spindle_appmaster_sdk::sweep`].

use std::time::Duration;

use anyhow::Context;
use spindle_common::resource::Resource;
use spindle_common::states::FinalApplicationStatus;

use super::args::{Opt, Parsed, UsageError};
use super::dshell::{check_shell_script, env_from, over_defaults, shell_command_from};
use super::launch::{
    am_clients, app_options, exit_status, ignore_am_args, invalid, run_client, AppFields,
};
use super::train::{prepare_shipment, shipment_from, text_option};
use super::{parse_or_usage, usage_error, EXIT_OK};
use spindle_appmaster_sdk::dshell::{
    default_container_resources, DsAmConfig, DsOptions, DEFAULT_NO_PROGRESS_TIMEOUT,
};
use spindle_appmaster_sdk::ship::Shipped;
use spindle_appmaster_sdk::sweep::client::DEFAULT_APP_NAME;
use spindle_appmaster_sdk::sweep::{
    grid, numbered, parse_array, parse_param, run_am_with, SweepAmConfig, SweepOptions, Trial,
};

pub const USAGE: &str = "\
usage: spindle sweep (--param NAME=v1,v2,... | --trials N | --array SPEC) --shell-command CMD [options]
Runs CMD once per trial, each trial in its own container, at most --parallel at once. The
containers are asked for one by one as trials wait (never as a gang), each trial starts as
soon as its container is granted, and the container (its GPUs) goes back to the cluster as
soon as the trial ends. Every trial's command sees SPINDLE_TRIAL_ID, SPINDLE_TRIAL_ATTEMPT
(from 1), SPINDLE_TRIAL_COUNT, SWEEP_<NAME> for each parameter (the name upper-cased) and,
with --array, SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_COUNT, _MIN, _MAX and SLURM_ARRAY_JOB_ID.
  --param NAME=v1,v2,...        a parameter and its values (repeatable): the trials are the
                                grid of every combination, the first parameter varying slowest
  --trials N                    N trials 0..N-1 without parameters
  --array SPEC                  Slurm's job array: indices 0-31, 1,3,5, 0-15:4 (a step), and
                                %K for at most K at once (0-31%4); SPINDLE_TRIAL_ID is the index
  --parallel K                  at most K trials asked for or running at once (default: all)
  --max-trial-retries R         run a failed trial again up to R times (default 0); a trial
                                whose container is lost to preemption or a node runs again
                                without that counting
  --worker-resources LIST       per trial, e.g. yarn.io/gpu=1,vcores=4,memory-mb=4096
                                (unnamed memory-mb / vcores default to 256 / 1)
  -shell_command CMD            the command, run with bash -c
  -shell_script FILE            ship FILE and run it (bash ExecScript.sh); not with
                                -shell_command
  -shell_args ARG               appended to the command (repeatable)
  -shell_env K=V                environment of every trial (repeatable)
  --image IMG                   run every trial in this image (registry/repo:tag,
                                repo@sha256:..., oci:/dir); the NodeManager pulls and caches
                                it; nodes that hold it already are preferred
  --mount SRC:DST[:ro|rw]       bind a node directory into the image, read-only unless :rw
                                (repeatable; the node must allow SRC); needs --image
  --files A,B                   copy these files into every trial's working directory
                                (FILE#NAME renames one)
  --archives X.tgz,...          unpack each .tar/.tar.gz/.tgz into a directory of its name
                                in every trial's working directory
  --src-dir DIR                 pack DIR and unpack it in every trial's working directory
  --staging-dir DIR             stage what is shipped in DIR, on a file system every NM
                                reads (default: spindle.client.staging-dir; unset: it is
                                uploaded to the ResourceManager, which NMs download from)
  -queue Q                      queue to submit to
  -appname NAME                 application name (default spindle-sweep)
  -priority P                   application priority
  -master_memory MB             AM memory (default 512)
  -master_vcores N              AM vcores (default 1)
  -container_priority P         priority of the trials' container requests (default 0)
  -max_app_attempts N           AM attempts
  -time T                       the sweep's lifetime in Slurm's formats (MM, MM:SS, HH:MM:SS,
                                D-HH, D-HH:MM, D-HH:MM:SS): the ResourceManager kills it T
                                after submission (YARN's LIFETIME), also with --detach;
                                capped by the queue's maximum-application-lifetime
  -timeout_ms MS                the same lifetime in milliseconds
  -after APP[,APP]              start only once these applications have ended (afterany)
  -after_ok APP[,APP]           start only once these applications have succeeded (afterok);
                                if one does not, this sweep fails
  -no_progress_timeout_ms MS    the AM gives up after MS waiting on the cluster without
                                progress (default 300000); a long trial is never timed out
  -node_label_expression EXPR   run the trials in this partition (node label)
  --detach                      return once the application is accepted, printing its id and
                                the commands to follow it, kill it and fetch its logs (the AM's
                                log ends with the table of trials); without it, Ctrl-C kills
                                the application
  --rm-address HOST:PORT, --conf-dir DIR
The client prints the trials' progress and, at the end, a table of trials: id, parameters,
state, exit status, attempts, duration and the last line of its stdout.
Exit status 0 only if every trial succeeded (the application FINISHED with SUCCEEDED), 2 if
not (the diagnostic names the failed trials) or refused before submission, 130 if
interrupted (the application is killed), 255 for a usage error.";

pub const OPTS: &[Opt] = &[
    Opt::repeated("param", &[]),
    Opt::one("trials", &[]),
    Opt::one("array", &["a"]),
    Opt::one("parallel", &[]),
    Opt::one("max_trial_retries", &[]),
    Opt::one("worker_resources", &["container_resources"]),
    Opt::one("shell_command", &[]),
    Opt::one("shell_script", &[]),
    Opt::repeated("shell_args", &[]),
    Opt::repeated("shell_env", &["env"]),
    Opt::one("src_dir", &[]),
    Opt::one("image", &[]),
    Opt::repeated("mount", &[]),
    Opt::repeated("files", &[]),
    Opt::repeated("archives", &[]),
    Opt::one("staging_dir", &[]),
    Opt::one("queue", &[]),
    Opt::one("appname", &["app_name", "name"]),
    Opt::one("priority", &[]),
    Opt::one("master_memory", &[]),
    Opt::one("master_vcores", &[]),
    Opt::one("container_priority", &[]),
    Opt::one("max_app_attempts", &[]),
    Opt::one("time", &[]),
    Opt::one("timeout_ms", &["timeout"]),
    Opt::repeated("after", &[]),
    Opt::repeated("after_ok", &[]),
    Opt::one("no_progress_timeout_ms", &[]),
    Opt::one("node_label_expression", &[]),
    Opt::flag("detach", &[]),
];

/// The trials of `--param`, `--trials` or `--array` (exactly one), and the `%K` of an
/// array.
fn trials_from(p: &Parsed) -> Result<(Vec<Trial>, bool, Option<u32>), UsageError> {
    let spec = |e: spindle_appmaster_sdk::sweep::SweepSpecError| UsageError::Other(e.to_string());
    let given = [p.has("param"), p.has("trials"), p.has("array")];
    match given {
        [true, false, false] => {
            let params = p
                .values("param")
                .iter()
                .map(|v| parse_param(v))
                .collect::<Result<Vec<_>, _>>()
                .map_err(spec)?;
            Ok((grid(&params).map_err(spec)?, false, None))
        }
        [false, true, false] => {
            let n = p.parse::<u32>("trials")?.unwrap_or(0);
            Ok((numbered(n).map_err(spec)?, false, None))
        }
        [false, false, true] => {
            let a = parse_array(p.value("array").unwrap_or_default()).map_err(spec)?;
            Ok((a.trials(), true, a.max_running))
        }
        [false, false, false] => Err(UsageError::Other(
            "no trials given: use --param NAME=v1,v2,... (a grid), --trials N or --array SPEC"
                .into(),
        )),
        _ => Err(UsageError::Other(
            "--param, --trials and --array exclude each other: give one".into(),
        )),
    }
}

/// `--parallel K` and an array's `%K`: the same number if both, all trials if neither.
fn parallel_from(p: &Parsed, trials: usize, array_limit: Option<u32>) -> Result<u32, UsageError> {
    let parallel = p.parse::<u32>("parallel")?;
    match (parallel, array_limit) {
        (Some(0), _) => Err(invalid("parallel", "0", "must be at least 1")),
        (Some(k), Some(l)) if k != l => Err(invalid(
            "parallel",
            &k.to_string(),
            format!("the --array limit says %{l}: give one of them"),
        )),
        (Some(k), _) | (None, Some(k)) => Ok(k),
        (None, None) => Ok(trials as u32),
    }
}

/// The trial's container: `--worker-resources` over the defaults.
fn resources_from(p: &Parsed) -> Result<Resource, UsageError> {
    let Some(list) = p.value("worker_resources") else {
        return Ok(default_container_resources());
    };
    let r = over_defaults(list).map_err(|r| invalid("worker_resources", list, r))?;
    if r.memory_mb <= 0 || r.vcores <= 0 {
        return Err(invalid(
            "worker_resources",
            list,
            "memory-mb and vcores must both be positive",
        ));
    }
    Ok(r)
}

/// The options of `spindle sweep`.
pub fn options_from(p: &Parsed) -> Result<SweepOptions, UsageError> {
    let (trials, array, array_limit) = trials_from(p)?;
    let parallel = parallel_from(p, trials.len(), array_limit)?;
    let mut ship = shipment_from(p)?;
    let shell_command = shell_command_from(p, &mut ship)?;
    let mut shell = DsOptions::new(DsAmConfig {
        num_containers: trials.len() as u32,
        container_resources: resources_from(p)?,
        shell_command,
        shell_env: env_from(p, "shell_env")?,
        container_priority: p.parse::<i32>("container_priority")?.unwrap_or(0),
        no_progress_timeout: p
            .parse::<u64>("no_progress_timeout_ms")?
            .map(Duration::from_millis)
            .unwrap_or(DEFAULT_NO_PROGRESS_TIMEOUT),
        placement: Vec::new(),
        node_label_expression: text_option(p, "node_label_expression")?,
    });
    shell.app_name = DEFAULT_APP_NAME.into();
    app_options(
        p,
        AppFields {
            app_name: &mut shell.app_name,
            queue: &mut shell.queue,
            priority: &mut shell.priority,
            master_resources: &mut shell.master_resources,
            max_app_attempts: Some(&mut shell.max_app_attempts),
            lifetime: &mut shell.lifetime,
            dependencies: &mut shell.dependencies,
        },
    )?;
    shell.ship = ship;
    Ok(SweepOptions {
        shell,
        trials,
        array,
        parallel,
        max_trial_retries: p.parse::<u32>("max_trial_retries")?.unwrap_or(0),
    })
}

pub async fn run_client_cmd(args: Vec<String>) -> anyhow::Result<u8> {
    let Some(p) = parse_or_usage(&args, OPTS, USAGE)? else {
        return Ok(EXIT_OK);
    };
    let mut opts = options_from(&p).map_err(|e| usage_error(e, USAGE))?;
    check_shell_script(&p)?;
    let words: Vec<String> = opts
        .shell
        .am
        .shell_command
        .split_whitespace()
        .map(str::to_string)
        .collect();
    prepare_shipment(&p, &mut opts.shell.ship, &words)?;
    run_client(&p, &opts.launch(), "sweep").await
}

/// The AM: configuration and identity from the environment; exit 0 when every trial
/// succeeded, 2 else.
pub async fn run_am_cmd(args: Vec<String>) -> anyhow::Result<u8> {
    ignore_am_args("sweep-am", &args);
    let cfg = SweepAmConfig::from_env().context("bad sweep configuration")?;
    let (mut amrm, nm, host) = am_clients()?;
    let app = amrm.client().attempt_id().application_id;
    let shipped = Shipped::from_env(app).context("bad sweep configuration")?;
    let report = run_am_with(&cfg, &shipped, &mut amrm, &nm, &host, &mut |l| say!("{l}"))
        .await
        .context("sweep application master failed")?;
    Ok(exit_status(
        report.final_status == FinalApplicationStatus::SUCCEEDED,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(a: &[&str]) -> Parsed {
        super::super::parse_with_common(OPTS, a).expect("parses")
    }

    #[test]
    fn a_grid_sweep() {
        let o = options_from(&parsed(&[
            "--param",
            "lr=0.1,0.01",
            "--param",
            "bs=32,64",
            "--parallel",
            "2",
            "--worker-resources",
            "yarn.io/gpu=1",
            "--max-trial-retries",
            "1",
            "--shell-command",
            "python3 t.py",
            "--shell-env",
            "A=1",
        ]))
        .expect("good options");
        assert_eq!(o.trials.len(), 4);
        assert_eq!(o.trials[1].params_text(), "lr=0.1 bs=64");
        assert_eq!((o.parallel, o.max_trial_retries, o.array), (2, 1, false));
        assert_eq!(
            o.shell.am.container_resources,
            default_container_resources().with("yarn.io/gpu", 1)
        );
        assert_eq!(o.shell.am.shell_command, "python3 t.py");
        assert_eq!(o.shell.app_name, "spindle-sweep");
        assert_eq!(o.am_config().shell.num_containers, 4);
        assert_eq!(o.shell.am.shell_env["A"], "1");
    }

    #[test]
    fn slurm_arrays_and_counts() {
        let o =
            options_from(&parsed(&["--array", "0-31%4", "-shell_command", "true"])).expect("array");
        assert_eq!((o.trials.len(), o.parallel, o.array), (32, 4, true));
        let o =
            options_from(&parsed(&["--array", "1,3,5", "-shell_command", "true"])).expect("list");
        assert_eq!((o.trials[2].id, o.parallel), (5, 3));
        let o = options_from(&parsed(&[
            "--array",
            "0-15%4",
            "--parallel",
            "4",
            "-shell_command",
            "true",
        ]))
        .expect("the same limit twice");
        assert_eq!(o.parallel, 4);
        let o = options_from(&parsed(&["--trials", "3", "-shell_command", "true"])).expect("count");
        assert_eq!((o.trials.len(), o.parallel, o.max_trial_retries), (3, 3, 0));
    }

    #[test]
    fn mistakes_are_named() {
        let e = |a: &[&str]| options_from(&parsed(a)).expect_err("refused").to_string();
        assert!(e(&["-shell_command", "true"]).contains("no trials given"));
        assert!(
            e(&["--trials", "2", "--array", "0-1", "-shell_command", "x"])
                .contains("exclude each other")
        );
        assert!(e(&["--param", "lr", "-shell_command", "x"]).contains("expected NAME=v1,v2"));
        assert!(e(&["--param", "l-r=1", "-shell_command", "x"]).contains("parameter name"));
        assert!(e(&["--array", "5-2", "-shell_command", "x"]).contains("ends before it starts"));
        assert!(e(&["--array", "0-3%0", "-shell_command", "x"]).contains("%0"));
        assert!(e(&["--array", "0-3%2", "--parallel", "3", "-shell_command", "x"]).contains("%2"));
        assert!(e(&["--trials", "0", "-shell_command", "x"]).contains("at least 1"));
        assert!(
            e(&["--trials", "2", "--parallel", "0", "-shell_command", "x"]).contains("at least 1")
        );
        assert!(e(&["--trials", "2"]).contains("no shell command"));
        assert!(e(&[
            "--trials",
            "2",
            "-shell_command",
            "x",
            "--worker-resources",
            "vcores=0"
        ])
        .contains("positive"));
    }
}
