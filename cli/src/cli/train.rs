//! `spindle train` (the client of the distributed-training launcher) and `spindle train-am`
//! (the AM it ships).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use spindle_common::states::FinalApplicationStatus;

use super::args::{Opt, Parsed, UsageError};
use super::dshell::{env_from, over_defaults};
use super::launch::{
    am_clients, app_options, exit_status, ignore_am_args, invalid, run_client, AppFields,
};
use super::{parse_or_usage, usage_error, EXIT_OK};
use spindle_appmaster_sdk::cpus::CpusPerGpu;
use spindle_appmaster_sdk::ship::{
    parse_list, resolve_staging_root, unshipped_program_warning, Shipment,
};
use spindle_appmaster_sdk::train::{
    parse_placement, parse_size_rule, parse_throughput, run_am_with, AmExtras, ElasticWorkers,
    TrainAmConfig, TrainOptions, DEFAULT_MAX_RESTARTS,
};
use spindle_common::records::am::SizeRule;

pub const USAGE: &str = "\
usage: spindle train --workers N --worker-resources LIST [options] -- CMD [ARGS...]
       spindle train --min-workers A --max-workers B --worker-resources LIST [options] -- CMD
Runs CMD in N workers granted together as one gang (all or nothing), each with the rank
environment of torchrun: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK,
MASTER_ADDR, MASTER_PORT (a free port on rank 0's node), SPINDLE_GANG_ATTEMPT,
SPINDLE_CHECKPOINT_DIR, and CUDA_VISIBLE_DEVICES for its GPUs. A worker that fails restarts
the whole gang. When the gang is preempted every worker gets SIGTERM: it should checkpoint
to SPINDLE_CHECKPOINT_DIR and exit (the RM's kill deadline is in the file .spindle-preempted
there); the gang is then asked for again and resumes from the checkpoint (no restart used).
  --workers N                   workers in the gang (required unless elastic)
  --min-workers A, --max-workers B
                                an elastic job: granted at a size from A up, grown and shrunk
                                by the RM within [A, B]; each resize restarts every worker with
                                its new RANK/WORLD_SIZE after a SIGTERM (marker .spindle-resize
                                in SPINDLE_CHECKPOINT_DIR; SPINDLE_RESIZE_COUNT counts them)
  --size-rule R                 elastic sizes: power_of_two (default), any, or multiple:K
  --throughput T                elastic speed model, SIZE:UNITS_PER_S;... e.g.
                                \"1:318.0;2:576.2;4:1152.4\" (rank 0 may report measured
                                values in SPINDLE_CHECKPOINT_DIR/.spindle-throughput)
  --worker-resources LIST       per worker, e.g. yarn.io/gpu=1,vcores=4,memory-mb=4096
                                (unnamed memory-mb / vcores default to 256 / 1)
  --cpus-per-gpu N|MIN..MAX|auto
                                each worker's vcores per GPU (Slurm's name; replaces the
                                vcores of --worker-resources): N is a fixed ask; a range or
                                auto (one to the node's CPUs per GPU times the RM's
                                auto-factor) lets the RM's CPU policy size and move them;
                                rank 0's throughput file is then reported with its vcores
  --cpu-throughput T            with a ranged --cpus-per-gpu: throughput per GPU by CPUs per
                                GPU, CPUS:UNITS_PER_S;... e.g. \"1:100;3:180;6:260\" (the
                                RM's CPU model; rank 0's reports refine it)
  --placement P                 pack (default), strict_pack, spread or same_rack
  --max-nodes K                 at most K nodes (default: no limit)
  --node-label-expression EXPR  run the workers in this partition (node label); also the
                                application's label expression
  --gpu-model MODEL             only nodes whose GPUs are this model (nvidia-smi's name)
  --gang-timeout-ms T           fail if the gang is not granted within T ms (default: the
                                RM's spindle.scheduler.gang.timeout-ms)
  --max-restarts K              gang restarts after a worker failure (default 3;
                                preemptions do not count)
  --checkpoint-dir DIR          given to every worker as SPINDLE_CHECKPOINT_DIR (with --image
                                also mounted read-write at its path); its newest
                                file is reported to the RM as the job's checkpoint.
                                One directory every node mounts at the same path
                                (NFS, a parallel file system), never a local disk:
                                checked on every node before the ranks start
  --no-checkpoint-check         do not check that every node sees --checkpoint-dir
                                (a directory a probe cannot judge)
  --env K=V                     worker environment (repeatable)
  --src-dir DIR                 pack DIR (tar.gz) and unpack it in every worker's working
                                directory, so that a relative `python3 train.py` is found
  --image IMG                   run every worker in this image (registry/repo:tag,
                                repo@sha256:..., oci:/dir); the NodeManager pulls and caches
                                it; nodes that hold it already are preferred
  --mount SRC:DST[:ro|rw]       bind a node directory into the image, read-only unless :rw
                                (repeatable; the node must allow SRC); needs --image
  --files A,B                   copy these files into every worker's working directory
                                (FILE#NAME renames one)
  --archives X.tgz,...          unpack each .tar/.tar.gz/.tgz into a directory of its name
                                in every worker's working directory (X.tgz#NAME renames it)
  --staging-dir DIR             stage what is shipped in DIR, on a file system every NM
                                reads (default: spindle.client.staging-dir; unset: it is
                                uploaded to the ResourceManager, which NMs download from)
  --fail-fast-window-ms MS      when every worker fails with the same exit status within MS
                                of starting and no checkpoint exists, the application fails
                                at once, quoting the stderr of the rank that failed first,
                                instead of restarting (default 30000; 0: always restart)
  --queue Q                     queue to submit to
  --appname NAME                application name (default spindle-train)
  --priority P                  application priority
  --master-memory MB            AM memory (default 512)
  --master-vcores N             AM vcores (default 1)
  --time T                      the application's lifetime in Slurm's formats (MM, MM:SS,
                                HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS): the ResourceManager
                                kills it T after submission (YARN's LIFETIME), also with
                                --detach; capped by the queue's maximum-application-lifetime
  --timeout-ms MS               the same lifetime in milliseconds
  --after APP[,APP]             start only once these applications have ended (afterany)
  --after-ok APP[,APP]          start only once these applications have succeeded (afterok);
                                if one does not, this application fails
  --follow, --no-follow         stream rank 0's stdout and stderr as they are written, each
                                line prefixed [rank 0 stdout] (default: follow when stdout
                                is a terminal)
  --detach                      return once the application is accepted, printing its id and
                                the commands to follow it, kill it and fetch its logs;
                                without it, Ctrl-C kills the application
  --rm-address HOST:PORT, --conf-dir DIR
The client prints why the gang waits (once per change), its progress (granted, held,
running), and at the end each rank's container, node, state and exit status.
Exit status 0 only if the application FINISHED with SUCCEEDED, 2 if it did not or was
refused before submission (unknown queue, too large; no application id is used), 130 if
interrupted (the application is killed), 255 for a usage error.";

pub const OPTS: &[Opt] = &[
    Opt::one("workers", &["num_workers", "nproc"]),
    Opt::one("min_workers", &[]),
    Opt::one("max_workers", &[]),
    Opt::one("size_rule", &[]),
    Opt::one("throughput", &[]),
    Opt::one("worker_resources", &[]),
    Opt::one("cpus_per_gpu", &[]),
    Opt::one("cpu_throughput", &[]),
    Opt::one("placement", &[]),
    Opt::one("max_nodes", &[]),
    Opt::one("node_label_expression", &[]),
    Opt::one("gpu_model", &[]),
    Opt::one("gang_timeout_ms", &[]),
    Opt::one("max_restarts", &[]),
    Opt::one("checkpoint_dir", &[]),
    Opt::flag("no_checkpoint_check", &[]),
    Opt::repeated("env", &["worker_env"]),
    Opt::one("src_dir", &[]),
    Opt::one("image", &[]),
    Opt::repeated("mount", &[]),
    Opt::repeated("files", &[]),
    Opt::repeated("archives", &[]),
    Opt::one("staging_dir", &[]),
    Opt::one("fail_fast_window_ms", &[]),
    Opt::one("queue", &[]),
    Opt::one("appname", &["app_name", "name"]),
    Opt::one("priority", &[]),
    Opt::one("master_memory", &[]),
    Opt::one("master_vcores", &[]),
    Opt::one("time", &[]),
    Opt::one("timeout_ms", &["timeout"]),
    Opt::repeated("after", &[]),
    Opt::repeated("after_ok", &[]),
    Opt::flag("follow", &[]),
    Opt::flag("no_follow", &[]),
    Opt::flag("detach", &[]),
];

/// An image job's checkpoints must outlive its containers: `--checkpoint-dir DIR` with
/// `--image` also binds DIR read-write at the same path (the nodes must allow it in
/// `yarn.nodemanager.runtime.linux.runc.allowed-rw-mounts`).
fn with_checkpoint_mount(
    env: &mut std::collections::BTreeMap<String, String>,
    dir: &str,
) -> Result<(), UsageError> {
    use spindle_common::runtime_request::{BindMount, MountMode, RuntimeRequest};
    let Ok(Some(mut request)) = RuntimeRequest::from_env(env) else {
        return Ok(());
    };
    let path = std::path::PathBuf::from(dir.trim());
    if !path.is_absolute() {
        return Err(invalid(
            "checkpoint_dir",
            dir,
            "with --image it is mounted into the image: give an absolute path",
        ));
    }
    if request.mounts.iter().any(|m| m.destination == path) {
        return Ok(());
    }
    request.mounts.push(BindMount {
        source: path.clone(),
        destination: path,
        mode: MountMode::ReadWrite,
    });
    env.extend(request.to_env());
    Ok(())
}

/// The options of `spindle train` (the command is the positional words, after `--`).
pub fn options_from(p: &Parsed) -> Result<TrainOptions, UsageError> {
    let elastic = elastic_from(p)?;
    let workers = match (&elastic, p.parse::<u32>("workers")?) {
        (Some(e), None) => e.max,
        (Some(e), Some(w)) if w == e.max => w,
        (Some(_), Some(w)) => {
            return Err(invalid(
                "workers",
                &w.to_string(),
                "an elastic job's size is --min-workers..--max-workers; leave --workers out",
            ))
        }
        (None, Some(w)) => w,
        (None, None) => return Err(UsageError::Other("--workers N is required".into())),
    };
    if workers == 0 {
        return Err(invalid("workers", "0", "must be at least 1"));
    }
    let list = p
        .value("worker_resources")
        .ok_or_else(|| UsageError::Other("--worker-resources LIST is required".into()))?;
    let mut worker_resources =
        over_defaults(list).map_err(|r| invalid("worker_resources", list, r))?;
    let cpus_per_gpu = match p.value("cpus_per_gpu") {
        Some(v) => {
            let c = CpusPerGpu::parse(v).map_err(|e| invalid("cpus_per_gpu", v, e.to_string()))?;
            c.apply(&mut worker_resources)
                .map_err(|e| invalid("cpus_per_gpu", v, e.to_string()))?;
            Some(c)
        }
        None => None,
    };
    let cpu_throughput = match p.value("cpu_throughput") {
        Some(v) if !cpus_per_gpu.is_some_and(|c| c.is_ranged()) => {
            return Err(invalid(
                "cpu_throughput",
                v,
                "only with a range or auto in --cpus-per-gpu",
            ))
        }
        Some(v) => parse_throughput(v).map_err(|r| invalid("cpu_throughput", v, r))?,
        None => BTreeMap::new(),
    };
    if worker_resources.memory_mb <= 0 || worker_resources.vcores <= 0 {
        return Err(invalid(
            "worker_resources",
            list,
            "memory-mb and vcores must both be positive",
        ));
    }
    let placement = match p.value("placement") {
        Some(v) => parse_placement(v).map_err(|r| invalid("placement", v, r))?,
        None => Default::default(),
    };
    let command = p.positionals.clone();
    if command.first().is_none_or(|c| c.trim().is_empty()) {
        return Err(UsageError::Other(
            "no worker command given: put it after --, e.g. -- python train.py".into(),
        ));
    }
    let mut worker_env = env_from(p, "env")?;
    if let Some(dir) = p.value("checkpoint_dir") {
        with_checkpoint_mount(&mut worker_env, dir)?;
    }
    let gang_timeout = match p.parse::<u64>("gang_timeout_ms")? {
        Some(0) | None => None,
        Some(ms) => Some(Duration::from_millis(ms)),
    };
    let mut o = TrainOptions::new(TrainAmConfig {
        workers,
        worker_resources,
        placement,
        max_nodes: p.parse::<u32>("max_nodes")?.unwrap_or(0),
        gang_timeout,
        max_restarts: p
            .parse::<u32>("max_restarts")?
            .unwrap_or(DEFAULT_MAX_RESTARTS),
        checkpoint_dir: p.value("checkpoint_dir").map(str::to_string),
        checkpoint_check: !p.has("no_checkpoint_check"),
        command,
        worker_env,
        elastic,
        node_label_expression: text_option(p, "node_label_expression")?,
        gpu_model: text_option(p, "gpu_model")?,
        cpus_per_gpu,
        cpu_throughput,
    });
    app_options(
        p,
        AppFields {
            app_name: &mut o.app_name,
            queue: &mut o.queue,
            priority: &mut o.priority,
            master_resources: &mut o.master_resources,
            max_app_attempts: None,
            lifetime: &mut o.lifetime,
            dependencies: &mut o.dependencies,
        },
    )?;
    o.ship = shipment_from(p)?;
    o.fail_fast_window = p
        .parse::<u64>("fail_fast_window_ms")?
        .map(Duration::from_millis);
    Ok(o)
}

/// `--src-dir`, `--files`, `--archives` (repeatable, comma lists), staged under the default
/// root until [`staging_root`] names the configured one.
pub(crate) fn shipment_from(p: &Parsed) -> Result<Shipment, UsageError> {
    let mut s = Shipment::new(None);
    for (option, list) in [("files", &mut s.files), ("archives", &mut s.archives)] {
        for v in p.values(option) {
            let flag = if option == "files" {
                "--files"
            } else {
                "--archives"
            };
            list.extend(parse_list(flag, v).map_err(|e| invalid(option, v, e.to_string()))?);
        }
    }
    s.src_dir = match p.value("src_dir").map(str::trim) {
        Some("") => return Err(invalid("src_dir", "", "empty")),
        Some(d) => Some(d.into()),
        None => None,
    };
    Ok(s)
}

/// Resolves the staging root (`--staging-dir`, yarn-site, default), checks what is shipped
/// before anything is submitted, and warns (stderr) when the command names a file of the
/// current directory that nothing ships.
pub(crate) fn prepare_shipment(
    p: &Parsed,
    ship: &mut Shipment,
    command: &[String],
) -> anyhow::Result<()> {
    if ship.is_empty() {
        if let Ok(cwd) = std::env::current_dir() {
            if let Some(w) = unshipped_program_warning(command, &cwd) {
                eprintln!("{w}");
            }
        }
        return Ok(());
    }
    let conf_dir = p.value("conf-dir").map(std::path::PathBuf::from);
    ship.staging_root = resolve_staging_root(p.value("staging_dir"), conf_dir.as_deref())?;
    ship.validate()?;
    Ok(())
}

/// An optional text value, trimmed; given but empty is a mistake.
pub(crate) fn text_option(p: &Parsed, name: &'static str) -> Result<Option<String>, UsageError> {
    match p.value(name).map(str::trim) {
        Some("") => Err(invalid(name, "", "empty")),
        Some(v) => Ok(Some(v.to_string())),
        None => Ok(None),
    }
}

/// `--min-workers A --max-workers B [--size-rule R] [--throughput T]`: both or neither.
fn elastic_from(p: &Parsed) -> Result<Option<ElasticWorkers>, UsageError> {
    let (min, max) = match (
        p.parse::<u32>("min_workers")?,
        p.parse::<u32>("max_workers")?,
    ) {
        (None, None) => {
            for o in ["size_rule", "throughput"] {
                if let Some(v) = p.value(o) {
                    return Err(invalid(
                        o,
                        v,
                        "only for an elastic job (--min-workers and --max-workers)",
                    ));
                }
            }
            return Ok(None);
        }
        (Some(a), Some(b)) => (a, b),
        (Some(_), None) => {
            return Err(UsageError::Other(
                "--min-workers needs --max-workers".into(),
            ))
        }
        (None, Some(_)) => {
            return Err(UsageError::Other(
                "--max-workers needs --min-workers".into(),
            ))
        }
    };
    let (rule, multiple) = match p.value("size_rule") {
        Some(v) => parse_size_rule(v).map_err(|r| invalid("size_rule", v, &r))?,
        None => (SizeRule::POWER_OF_TWO, 0),
    };
    let throughput = match p.value("throughput") {
        Some(v) => parse_throughput(v).map_err(|r| invalid("throughput", v, &r))?,
        None => BTreeMap::new(),
    };
    let e = ElasticWorkers {
        min,
        max,
        rule,
        multiple,
        throughput,
    };
    e.validate()
        .map_err(|r| invalid("min_workers", &format!("{min}..{max}"), &r))?;
    Ok(Some(e))
}

pub async fn run_client_cmd(args: Vec<String>) -> anyhow::Result<u8> {
    let Some(p) = parse_or_usage(&args, OPTS, USAGE)? else {
        return Ok(EXIT_OK);
    };
    let mut opts = options_from(&p).map_err(|e| usage_error(e, USAGE))?;
    prepare_shipment(&p, &mut opts.ship, &opts.am.command)?;
    run_client(&p, &opts.launch(), "training application").await
}

/// The AM: configuration and identity from the environment; exit 0 on SUCCEEDED, 2 else.
pub async fn run_am_cmd(args: Vec<String>) -> anyhow::Result<u8> {
    ignore_am_args("train-am", &args);
    let cfg = TrainAmConfig::from_env().context("bad training AM configuration")?;
    let (mut amrm, nm, host) = am_clients()?;
    let app = amrm.client().attempt_id().application_id;
    let extras = AmExtras::from_env(app).context("bad training AM configuration")?;
    let report = run_am_with(&cfg, &extras, &mut amrm, &nm, &host, &mut |l| say!("{l}"))
        .await
        .context("training application master failed")?;
    Ok(exit_status(
        report.final_status == FinalApplicationStatus::SUCCEEDED,
    ))
}

#[cfg(test)]
mod tests {
    use spindle_common::records::am::GangPlacement;
    use spindle_common::resource::Resource;

    use super::*;

    fn parsed(a: &[&str]) -> Result<Parsed, UsageError> {
        super::super::parse_with_common(OPTS, a)
    }

    #[test]
    fn node_label_and_gpu_model() {
        let p = parsed(&[
            "--workers",
            "2",
            "--worker-resources",
            "yarn.io/gpu=1",
            "--node-label-expression",
            "h100",
            "--gpu-model",
            "NVIDIA H100 80GB HBM3",
            "--",
            "python",
            "train.py",
        ])
        .expect("parses");
        let o = options_from(&p).expect("good options");
        assert_eq!(o.am.node_label_expression.as_deref(), Some("h100"));
        assert_eq!(o.am.gpu_model.as_deref(), Some("NVIDIA H100 80GB HBM3"));
        assert_eq!(o.launch().app_node_label_expression, Some("h100"));
        let p = parsed(&[
            "--workers",
            "2",
            "--worker-resources",
            "yarn.io/gpu=1",
            "--gpu-model",
            " ",
            "--",
            "x",
        ])
        .expect("parses");
        assert!(options_from(&p).is_err());
        let p = parsed(&[
            "--workers",
            "2",
            "--worker-resources",
            "vcores=1",
            "--",
            "x",
        ])
        .expect("parses");
        let o = options_from(&p).expect("good options");
        assert_eq!((o.am.node_label_expression, o.am.gpu_model), (None, None));
    }

    #[test]
    fn an_image_job_s_checkpoint_dir_is_mounted_read_write() {
        let p = parsed(&[
            "--workers",
            "2",
            "--worker-resources",
            "vcores=1",
            "--checkpoint-dir",
            "/ckpt/run1",
            "--image",
            "busybox",
            "--mount",
            "/data:/data",
            "--",
            "x",
        ])
        .expect("parses");
        let o = options_from(&p).expect("good options");
        assert_eq!(
            o.am.worker_env["YARN_CONTAINER_RUNTIME_RUNC_MOUNTS"],
            "/data:/data:ro,/ckpt/run1:/ckpt/run1:rw"
        );
        let p = parsed(&[
            "--workers",
            "2",
            "--worker-resources",
            "vcores=1",
            "--checkpoint-dir",
            "/ckpt",
            "--",
            "x",
        ])
        .unwrap();
        let o = options_from(&p).expect("no image: no mount");
        assert!(!o
            .am
            .worker_env
            .contains_key("YARN_CONTAINER_RUNTIME_RUNC_MOUNTS"));
        let p = parsed(&[
            "--workers",
            "2",
            "--worker-resources",
            "vcores=1",
            "--checkpoint-dir",
            "ckpt",
            "--image",
            "busybox",
            "--",
            "x",
        ])
        .unwrap();
        assert!(
            options_from(&p).is_err(),
            "a relative checkpoint dir with an image"
        );
    }

    #[test]
    fn the_issue_s_command_line() {
        let p = parsed(&[
            "--workers",
            "16",
            "--worker-resources",
            "yarn.io/gpu=1,vcores=4,memory-mb=4096",
            "--placement",
            "strict_pack",
            "--max-nodes",
            "2",
            "--gang-timeout-ms",
            "60000",
            "--max-restarts",
            "5",
            "--queue",
            "gpu",
            "--checkpoint-dir",
            "/ckpt",
            "--env",
            "NCCL_DEBUG=INFO",
            "--",
            "python",
            "train.py",
            "--epochs",
            "3",
        ])
        .unwrap();
        let o = options_from(&p).unwrap();
        assert_eq!(o.am.workers, 16);
        assert_eq!(
            o.am.worker_resources,
            Resource::new(4096, 4).with("yarn.io/gpu", 1)
        );
        assert_eq!(o.am.placement, GangPlacement::STRICT_PACK);
        assert_eq!(o.am.max_nodes, 2);
        assert_eq!(o.am.gang_timeout, Some(Duration::from_secs(60)));
        assert_eq!(o.am.max_restarts, 5);
        assert_eq!(o.queue.as_deref(), Some("gpu"));
        assert_eq!(o.am.checkpoint_dir.as_deref(), Some("/ckpt"));
        assert_eq!(o.am.command, ["python", "train.py", "--epochs", "3"]);
        assert_eq!(
            o.am.worker_env.get("NCCL_DEBUG").map(String::as_str),
            Some("INFO")
        );
        // Defaults.
        let o = options_from(
            &parsed(&[
                "--workers",
                "2",
                "--worker-resources",
                "yarn.io/gpu=1",
                "--",
                "w",
            ])
            .unwrap(),
        )
        .unwrap();
        assert_eq!(o.am.placement, GangPlacement::PACK);
        assert_eq!(o.am.max_restarts, DEFAULT_MAX_RESTARTS);
        assert_eq!(
            o.am.worker_resources,
            Resource::new(256, 1).with("yarn.io/gpu", 1)
        );
        assert_eq!(o.max_app_attempts, Some(2));
    }

    #[test]
    fn an_elastic_command_line() {
        let p = parsed(&[
            "--min-workers",
            "2",
            "--max-workers",
            "8",
            "--worker-resources",
            "yarn.io/gpu=1",
            "--throughput",
            "1:318.0;2:576.2;4:1152.4;8:2177.8",
            "--",
            "w",
        ])
        .unwrap();
        let o = options_from(&p).unwrap();
        let e = o.am.elastic.clone().expect("elastic");
        assert_eq!((e.min, e.max, e.rule), (2, 8, SizeRule::POWER_OF_TWO));
        assert_eq!(e.throughput.get(&8), Some(&2177.8));
        assert_eq!(o.am.workers, 8);
        let o = options_from(
            &parsed(&[
                "--min-workers",
                "3",
                "--max-workers",
                "9",
                "--size-rule",
                "multiple:3",
                "--worker-resources",
                "vcores=1",
                "--",
                "w",
            ])
            .unwrap(),
        )
        .unwrap();
        let e = o.am.elastic.expect("elastic");
        assert_eq!((e.rule, e.multiple), (SizeRule::MULTIPLE, 3));
        for bad in [
            &[
                "--min-workers",
                "2",
                "--worker-resources",
                "vcores=1",
                "--",
                "w",
            ][..],
            &[
                "--max-workers",
                "2",
                "--worker-resources",
                "vcores=1",
                "--",
                "w",
            ],
            &[
                "--min-workers",
                "4",
                "--max-workers",
                "2",
                "--worker-resources",
                "vcores=1",
                "--",
                "w",
            ],
            &[
                "--min-workers",
                "5",
                "--max-workers",
                "7",
                "--worker-resources",
                "vcores=1",
                "--",
                "w",
            ],
            &[
                "--min-workers",
                "2",
                "--max-workers",
                "8",
                "--workers",
                "4",
                "--worker-resources",
                "vcores=1",
                "--",
                "w",
            ],
            &[
                "--workers",
                "2",
                "--size-rule",
                "any",
                "--worker-resources",
                "vcores=1",
                "--",
                "w",
            ],
            &[
                "--min-workers",
                "2",
                "--max-workers",
                "8",
                "--throughput",
                "x",
                "--worker-resources",
                "vcores=1",
                "--",
                "w",
            ],
        ] {
            let r = parsed(bad).and_then(|p| options_from(&p));
            assert!(r.is_err(), "{bad:?}");
        }
    }

    #[test]
    fn bad_command_lines_are_refused() {
        for bad in [
            &["--worker-resources", "vcores=1", "--", "w"][..],
            &[
                "--workers",
                "0",
                "--worker-resources",
                "vcores=1",
                "--",
                "w",
            ],
            &["--workers", "2", "--", "w"],
            &["--workers", "2", "--worker-resources", "vcores=1"],
            &[
                "--workers",
                "2",
                "--worker-resources",
                "vcores=0",
                "--",
                "w",
            ],
            &[
                "--workers",
                "2",
                "--worker-resources",
                "vcores=1",
                "--placement",
                "x",
                "--",
                "w",
            ],
            &[
                "--workers",
                "2",
                "--worker-resources",
                "vcores=1",
                "--env",
                "NOEQ",
                "--",
                "w",
            ],
        ] {
            let p = parsed(bad).unwrap();
            assert!(options_from(&p).is_err(), "{bad:?}");
        }
        assert!(parsed(&["--wrkers", "2"]).is_err());
    }
}

#[cfg(test)]
#[path = "train_cpus_tests.rs"]
mod cpus_tests;
