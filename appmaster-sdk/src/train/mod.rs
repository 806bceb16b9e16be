//! The distributed-training launcher: `spindle train` submits an application of type
//! `SPINDLE_TRAIN` whose AM (this same binary, `spindle train-am`) asks for its workers as
//! one gang, starts them all at once with the rank environment that torchrun and Horovod
//! users expect, and restarts the whole gang when a worker fails.
//!
//! The client hands the AM its parameters in the AM container's environment
//! (`SPINDLE_TRAIN_*`, see [`TrainAmConfig::to_env`]), as the distributed shell does.
//!
//! The environment contract every worker gets (see `docs/sdk.md`):
//! `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `LOCAL_WORLD_SIZE`, `NODE_RANK`, `MASTER_ADDR`,
//! `MASTER_PORT`, `SPINDLE_GANG_ATTEMPT` (1-based), `SPINDLE_CHECKPOINT_DIR` (if given), and
//! from the NM `CUDA_VISIBLE_DEVICES` for its GPUs. Ranks are given in (node, container id)
//! order, so a node's workers hold consecutive ranks and `LOCAL_RANK` counts within a node.
//!
//! When the RM preempts the gang, each worker gets SIGTERM: it should checkpoint to
//! `SPINDLE_CHECKPOINT_DIR` and exit promptly (the RM's kill deadline is in
//! `$SPINDLE_CHECKPOINT_DIR/.spindle-preempted`); the gang is asked for again and the new
//! workers resume from the checkpoint ([`am`], [`checkpoint`]).

pub mod am;
pub mod checkpoint;
pub mod client;
pub mod status;

use std::collections::BTreeMap;
use std::time::Duration;

use spindle_common::ids::NodeId;
use spindle_common::records::am::{Container, GangPlacement, SizeRule};
use spindle_common::records::resource::parse_resource_list;
use spindle_common::resource::Resource;

use crate::cpus::CpusPerGpu;

pub use am::{run_am, run_am_with, AmExtras, TrainReport};
pub use client::{build_submission, run_client, TrainOptions};

pub const ENV_WORKERS: &str = "SPINDLE_TRAIN_WORKERS";
pub const ENV_WORKER_RESOURCES: &str = "SPINDLE_TRAIN_WORKER_RESOURCES";
pub const ENV_PLACEMENT: &str = "SPINDLE_TRAIN_PLACEMENT";
pub const ENV_MAX_NODES: &str = "SPINDLE_TRAIN_MAX_NODES";
pub const ENV_GANG_TIMEOUT_MS: &str = "SPINDLE_TRAIN_GANG_TIMEOUT_MS";
pub const ENV_MAX_RESTARTS: &str = "SPINDLE_TRAIN_MAX_RESTARTS";
pub const ENV_CHECKPOINT_DIR: &str = "SPINDLE_TRAIN_CHECKPOINT_DIR";
/// `0`: the checkpoint directory is not checked on every node before the ranks start.
pub const ENV_CHECKPOINT_CHECK: &str = "SPINDLE_TRAIN_CHECKPOINT_CHECK";
/// The worker command as a JSON array of strings (program and arguments, unquoted).
pub const ENV_COMMAND: &str = "SPINDLE_TRAIN_COMMAND";
/// Extra worker environment as a JSON object of strings.
pub const ENV_WORKER_ENV: &str = "SPINDLE_TRAIN_WORKER_ENV";
/// Elastic jobs: the fewest workers (with [`ENV_MAX_WORKERS`]).
pub const ENV_MIN_WORKERS: &str = "SPINDLE_TRAIN_MIN_WORKERS";
/// Elastic jobs: the most workers.
pub const ENV_MAX_WORKERS: &str = "SPINDLE_TRAIN_MAX_WORKERS";
/// Elastic jobs: `power_of_two` (default), `any` or `multiple:K`.
pub const ENV_SIZE_RULE: &str = "SPINDLE_TRAIN_SIZE_RULE";
/// Elastic jobs: the throughput table, `1:318.0;2:576.2`.
pub const ENV_THROUGHPUT: &str = "SPINDLE_TRAIN_THROUGHPUT";
/// The workers' node label expression (partition); absent without one.
pub const ENV_NODE_LABEL_EXPRESSION: &str = "SPINDLE_TRAIN_NODE_LABEL_EXPRESSION";
/// The GPU model every worker's node must have (`GangSpec.gpuModel`); absent without one.
pub const ENV_GPU_MODEL: &str = "SPINDLE_TRAIN_GPU_MODEL";
/// `--cpus-per-gpu` (`N`, `MIN..MAX` or `auto`); absent without it.
pub const ENV_CPUS_PER_GPU: &str = "SPINDLE_TRAIN_CPUS_PER_GPU";
/// `--cpu-throughput`: throughput per GPU by CPUs per GPU, `1:100;3:180`.
pub const ENV_CPU_THROUGHPUT: &str = "SPINDLE_TRAIN_CPU_THROUGHPUT";

/// Fail fast: the window (ms) after a gang attempt's start within which every worker
/// failing with the same exit status ends the application (0: never fail fast).
pub const ENV_FAIL_FAST_WINDOW_MS: &str = "SPINDLE_TRAIN_FAIL_FAST_WINDOW_MS";
/// The default fail-fast window.
pub const DEFAULT_FAIL_FAST_WINDOW: Duration = Duration::from_secs(30);

/// YARN application type of these applications.
pub const APPLICATION_TYPE: &str = "SPINDLE_TRAIN";
pub const AM_RESOURCE_KEY: &str = "spindle";
pub const AM_COMMAND: &str = "./spindle train-am";
/// The gang's id within the application (one gang per attempt, asked again on restart).
pub const GANG_ID: &str = "workers";
/// The workers' allocationRequestId.
pub const WORKER_REQUEST_ID: i64 = 1;
pub const DEFAULT_MAX_RESTARTS: u32 = 3;

/// What every worker is told (names as torchrun's).
pub const RANK: &str = "RANK";
pub const WORLD_SIZE: &str = "WORLD_SIZE";
pub const LOCAL_RANK: &str = "LOCAL_RANK";
pub const LOCAL_WORLD_SIZE: &str = "LOCAL_WORLD_SIZE";
pub const NODE_RANK: &str = "NODE_RANK";
pub const MASTER_ADDR: &str = "MASTER_ADDR";
pub const MASTER_PORT: &str = "MASTER_PORT";
pub const GANG_ATTEMPT: &str = "SPINDLE_GANG_ATTEMPT";
pub const CHECKPOINT_DIR: &str = "SPINDLE_CHECKPOINT_DIR";
/// Elastic jobs: how many times the gang was resized so far (0 at the first start).
pub const RESIZE_COUNT: &str = "SPINDLE_RESIZE_COUNT";

/// An elastic job's sizes (`spindle train --min-workers A --max-workers B`): the gang is
/// granted at a size from `min` up and grown and shrunk by the RM within `[min, max]`.
#[derive(Debug, Clone, PartialEq)]
pub struct ElasticWorkers {
    pub min: u32,
    pub max: u32,
    pub rule: SizeRule,
    /// With [`SizeRule::MULTIPLE`]: sizes are multiples of this.
    pub multiple: u32,
    /// Throughput (units per second) by worker count, the RM's speed model.
    pub throughput: BTreeMap<u32, f64>,
}

/// `power_of_two` / `power-of-two` / `pow2`, `any`, `multiple:K` (any case).
pub fn parse_size_rule(s: &str) -> Result<(SizeRule, u32), String> {
    let t = s.trim().to_ascii_lowercase().replace('-', "_");
    if let Some(k) = t.strip_prefix("multiple:") {
        let k: u32 = k
            .trim()
            .parse()
            .map_err(|_| format!("'{s}': the multiple must be a whole number"))?;
        if k == 0 {
            return Err(format!("'{s}': the multiple must be at least 1"));
        }
        return Ok((SizeRule::MULTIPLE, k));
    }
    match t.as_str() {
        "power_of_two" | "pow2" => Ok((SizeRule::POWER_OF_TWO, 0)),
        "any" => Ok((SizeRule::ANY, 0)),
        _ => Err(format!(
            "'{s}' is not a size rule: use power_of_two, any or multiple:K"
        )),
    }
}

/// The text [`parse_size_rule`] reads.
pub fn size_rule_text(rule: SizeRule, multiple: u32) -> String {
    match rule {
        SizeRule::POWER_OF_TWO => "power_of_two".into(),
        SizeRule::ANY => "any".into(),
        SizeRule::MULTIPLE => format!("multiple:{multiple}"),
    }
}

/// `1:318.0;2:576.2;4:1152.4` (sizes and non-negative numbers; `,` also separates).
pub fn parse_throughput(s: &str) -> Result<BTreeMap<u32, f64>, String> {
    let mut out = BTreeMap::new();
    for part in s.split([';', ',']).map(str::trim).filter(|p| !p.is_empty()) {
        let (n, v) = part
            .split_once(':')
            .ok_or_else(|| format!("'{part}': expected SIZE:THROUGHPUT"))?;
        let n: u32 = n
            .trim()
            .parse()
            .map_err(|_| format!("'{part}': the size must be a whole number"))?;
        let v: f64 = v
            .trim()
            .parse()
            .map_err(|_| format!("'{part}': the throughput must be a number"))?;
        if n == 0 || !v.is_finite() || v < 0.0 {
            return Err(format!(
                "'{part}': the size must be at least 1 and the throughput a non-negative number"
            ));
        }
        out.insert(n, v);
    }
    Ok(out)
}

/// The text [`parse_throughput`] reads.
pub fn throughput_text(t: &BTreeMap<u32, f64>) -> String {
    t.iter()
        .map(|(n, v)| format!("{n}:{v}"))
        .collect::<Vec<_>>()
        .join(";")
}

impl ElasticWorkers {
    /// Checks the sizes: `1 <= min <= max`, a legal size between them, a multiple for
    /// MULTIPLE.
    pub fn validate(&self) -> Result<(), String> {
        if self.min == 0 || self.min > self.max {
            return Err(format!(
                "the minimum ({}) must be from 1 to the maximum ({})",
                self.min, self.max
            ));
        }
        if self.rule == SizeRule::MULTIPLE && self.multiple == 0 {
            return Err("size rule multiple needs a multiple of at least 1".into());
        }
        let legal = |n: u32| match self.rule {
            SizeRule::POWER_OF_TWO => n.is_power_of_two(),
            SizeRule::MULTIPLE => n.is_multiple_of(self.multiple),
            SizeRule::ANY => true,
        };
        if !(self.min..=self.max).any(legal) {
            return Err(format!(
                "no size from {} to {} is allowed by size rule {}",
                self.min,
                self.max,
                size_rule_text(self.rule, self.multiple)
            ));
        }
        Ok(())
    }
}

/// What the AM is asked to do.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainAmConfig {
    pub workers: u32,
    pub worker_resources: Resource,
    pub placement: GangPlacement,
    /// At most this many nodes (0: no limit).
    pub max_nodes: u32,
    /// How long the gang may wait (None: the RM's default).
    pub gang_timeout: Option<Duration>,
    /// Gang restarts after a worker failure (attempts = restarts + 1).
    pub max_restarts: u32,
    pub checkpoint_dir: Option<String>,
    /// Whether every node is checked to see `checkpoint_dir` before each gang attempt's
    /// ranks start (`dir_check`; on unless `spindle train --no-checkpoint-check`).
    pub checkpoint_check: bool,
    /// Program and arguments.
    pub command: Vec<String>,
    pub worker_env: BTreeMap<String, String>,
    /// Set for an elastic job (then `workers` is its maximum).
    pub elastic: Option<ElasticWorkers>,
    /// The partition (node label) the workers run in; also the application's label.
    pub node_label_expression: Option<String>,
    /// Only nodes whose GPUs are of this model (`nvidia-smi`'s product name).
    pub gpu_model: Option<String>,
    /// `--cpus-per-gpu`: a fixed count (already in `worker_resources`) or a range the RM's
    /// CPU policy sizes each worker in.
    pub cpus_per_gpu: Option<CpusPerGpu>,
    /// `--cpu-throughput`: the job's throughput per GPU by CPUs per GPU (empty: none).
    pub cpu_throughput: BTreeMap<u32, f64>,
}

#[derive(Debug, thiserror::Error)]
pub enum TrainConfigError {
    #[error("environment variable {0} is not set (is this the training AM container?)")]
    Missing(&'static str),
    #[error("environment variable {name}='{value}' is invalid: {reason}")]
    Invalid {
        name: &'static str,
        value: String,
        reason: String,
    },
    /// What the client shipped cannot be read ([`crate::ship`]).
    #[error(transparent)]
    Shipped(#[from] crate::ship::ShippedError),
}

/// `pack`, `STRICT_PACK`, `strict-pack`, `spread`, `same_rack` (any case, `-` or `_`).
pub fn parse_placement(s: &str) -> Result<GangPlacement, String> {
    let n: String = s
        .trim()
        .chars()
        .filter(|c| *c != '-' && *c != '_')
        .flat_map(char::to_lowercase)
        .collect();
    Ok(match n.as_str() {
        "pack" => GangPlacement::PACK,
        "strictpack" => GangPlacement::STRICT_PACK,
        "spread" => GangPlacement::SPREAD,
        "samerack" => GangPlacement::SAME_RACK,
        _ => {
            return Err(format!(
                "'{s}' is not a placement: use pack, strict_pack, spread or same_rack"
            ))
        }
    })
}

pub fn placement_name(p: GangPlacement) -> &'static str {
    match p {
        GangPlacement::PACK => "PACK",
        GangPlacement::STRICT_PACK => "STRICT_PACK",
        GangPlacement::SPREAD => "SPREAD",
        GangPlacement::SAME_RACK => "SAME_RACK",
    }
}

impl TrainAmConfig {
    /// The AM container's environment entries that carry this configuration.
    pub fn to_env(&self) -> Vec<(String, String)> {
        let command = serde_json::to_string(&self.command).unwrap_or_else(|_| "[]".into());
        let env = serde_json::to_string(&self.worker_env).unwrap_or_else(|_| "{}".into());
        let mut out = vec![
            (ENV_WORKERS.into(), self.workers.to_string()),
            (
                ENV_WORKER_RESOURCES.into(),
                crate::dshell::resource_list(&self.worker_resources),
            ),
            (
                ENV_PLACEMENT.into(),
                placement_name(self.placement).to_string(),
            ),
            (ENV_MAX_NODES.into(), self.max_nodes.to_string()),
            (ENV_MAX_RESTARTS.into(), self.max_restarts.to_string()),
            (ENV_COMMAND.into(), command),
            (ENV_WORKER_ENV.into(), env),
        ];
        if let Some(t) = self.gang_timeout {
            out.push((ENV_GANG_TIMEOUT_MS.into(), t.as_millis().to_string()));
        }
        if let Some(d) = &self.checkpoint_dir {
            out.push((ENV_CHECKPOINT_DIR.into(), d.clone()));
        }
        if !self.checkpoint_check {
            out.push((ENV_CHECKPOINT_CHECK.into(), "0".into()));
        }
        if let Some(e) = &self.elastic {
            out.push((ENV_MIN_WORKERS.into(), e.min.to_string()));
            out.push((ENV_MAX_WORKERS.into(), e.max.to_string()));
            out.push((ENV_SIZE_RULE.into(), size_rule_text(e.rule, e.multiple)));
            if !e.throughput.is_empty() {
                out.push((ENV_THROUGHPUT.into(), throughput_text(&e.throughput)));
            }
        }
        if let Some(l) = &self.node_label_expression {
            out.push((ENV_NODE_LABEL_EXPRESSION.into(), l.clone()));
        }
        if let Some(m) = &self.gpu_model {
            out.push((ENV_GPU_MODEL.into(), m.clone()));
        }
        if let Some(c) = &self.cpus_per_gpu {
            out.push((ENV_CPUS_PER_GPU.into(), c.text()));
        }
        if !self.cpu_throughput.is_empty() {
            out.push((
                ENV_CPU_THROUGHPUT.into(),
                throughput_text(&self.cpu_throughput),
            ));
        }
        out
    }

    pub fn from_env() -> Result<Self, TrainConfigError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads the configuration back; the worker count, resources and command are required.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, TrainConfigError> {
        let invalid = |name: &'static str, value: &str, reason: String| TrainConfigError::Invalid {
            name,
            value: value.to_string(),
            reason,
        };
        let required = |name: &'static str| lookup(name).ok_or(TrainConfigError::Missing(name));
        let number = |name: &'static str, v: &str| -> Result<u64, TrainConfigError> {
            v.trim()
                .parse()
                .map_err(|_| invalid(name, v, "not a whole number".into()))
        };
        let n = required(ENV_WORKERS)?;
        let workers = u32::try_from(number(ENV_WORKERS, &n)?)
            .map_err(|_| invalid(ENV_WORKERS, &n, "too large".into()))?;
        if workers == 0 {
            return Err(invalid(ENV_WORKERS, &n, "must be at least 1".into()));
        }
        let r = required(ENV_WORKER_RESOURCES)?;
        let mut worker_resources =
            parse_resource_list(&r).map_err(|e| invalid(ENV_WORKER_RESOURCES, &r, e))?;
        let cpus_per_gpu = match lookup(ENV_CPUS_PER_GPU) {
            Some(c) => {
                let cpus = CpusPerGpu::parse(&c)
                    .and_then(|v| v.apply(&mut worker_resources).map(|_| v))
                    .map_err(|e| invalid(ENV_CPUS_PER_GPU, &c, e.to_string()))?;
                Some(cpus)
            }
            None => None,
        };
        let cpu_throughput = match lookup(ENV_CPU_THROUGHPUT) {
            Some(t) => parse_throughput(&t).map_err(|e| invalid(ENV_CPU_THROUGHPUT, &t, e))?,
            None => BTreeMap::new(),
        };
        if worker_resources.memory_mb <= 0 || worker_resources.vcores <= 0 {
            return Err(invalid(
                ENV_WORKER_RESOURCES,
                &r,
                "memory-mb and vcores must both be positive".into(),
            ));
        }
        let placement = match lookup(ENV_PLACEMENT) {
            Some(p) => parse_placement(&p).map_err(|e| invalid(ENV_PLACEMENT, &p, e))?,
            None => GangPlacement::PACK,
        };
        let max_nodes = match lookup(ENV_MAX_NODES) {
            Some(v) => u32::try_from(number(ENV_MAX_NODES, &v)?)
                .map_err(|_| invalid(ENV_MAX_NODES, &v, "too large".into()))?,
            None => 0,
        };
        let gang_timeout = match lookup(ENV_GANG_TIMEOUT_MS) {
            Some(v) => match number(ENV_GANG_TIMEOUT_MS, &v)? {
                0 => None,
                ms => Some(Duration::from_millis(ms)),
            },
            None => None,
        };
        let max_restarts = match lookup(ENV_MAX_RESTARTS) {
            Some(v) => u32::try_from(number(ENV_MAX_RESTARTS, &v)?)
                .map_err(|_| invalid(ENV_MAX_RESTARTS, &v, "too large".into()))?,
            None => DEFAULT_MAX_RESTARTS,
        };
        let c = required(ENV_COMMAND)?;
        let command: Vec<String> = serde_json::from_str(&c)
            .map_err(|e| invalid(ENV_COMMAND, &c, format!("not a JSON array of strings: {e}")))?;
        if command.first().is_none_or(|p| p.trim().is_empty()) {
            return Err(invalid(ENV_COMMAND, &c, "no program to run".into()));
        }
        let worker_env = match lookup(ENV_WORKER_ENV).filter(|v| !v.trim().is_empty()) {
            Some(v) => serde_json::from_str(&v).map_err(|e| {
                invalid(
                    ENV_WORKER_ENV,
                    &v,
                    format!("not a JSON object of strings: {e}"),
                )
            })?,
            None => BTreeMap::new(),
        };
        let checkpoint_dir = lookup(ENV_CHECKPOINT_DIR).filter(|d| !d.trim().is_empty());
        let checkpoint_check = lookup(ENV_CHECKPOINT_CHECK).is_none_or(|v| v.trim() != "0");
        let elastic = match (lookup(ENV_MIN_WORKERS), lookup(ENV_MAX_WORKERS)) {
            (None, None) => None,
            (Some(a), Some(b)) => {
                let min = u32::try_from(number(ENV_MIN_WORKERS, &a)?)
                    .map_err(|_| invalid(ENV_MIN_WORKERS, &a, "too large".into()))?;
                let max = u32::try_from(number(ENV_MAX_WORKERS, &b)?)
                    .map_err(|_| invalid(ENV_MAX_WORKERS, &b, "too large".into()))?;
                let (rule, multiple) = match lookup(ENV_SIZE_RULE) {
                    Some(r) => parse_size_rule(&r).map_err(|e| invalid(ENV_SIZE_RULE, &r, e))?,
                    None => (SizeRule::POWER_OF_TWO, 0),
                };
                let throughput = match lookup(ENV_THROUGHPUT) {
                    Some(t) => parse_throughput(&t).map_err(|e| invalid(ENV_THROUGHPUT, &t, e))?,
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
                    .map_err(|r| invalid(ENV_MIN_WORKERS, &format!("{min}..{max}"), r))?;
                Some(e)
            }
            (Some(_), None) => return Err(TrainConfigError::Missing(ENV_MAX_WORKERS)),
            (None, Some(_)) => return Err(TrainConfigError::Missing(ENV_MIN_WORKERS)),
        };
        let workers = elastic.as_ref().map_or(workers, |e| e.max);
        let text = |name: &str| {
            lookup(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let node_label_expression = text(ENV_NODE_LABEL_EXPRESSION);
        let gpu_model = text(ENV_GPU_MODEL);
        Ok(Self {
            workers,
            worker_resources,
            placement,
            max_nodes,
            gang_timeout,
            max_restarts,
            checkpoint_dir,
            checkpoint_check,
            command,
            worker_env,
            elastic,
            node_label_expression,
            gpu_model,
            cpus_per_gpu,
            cpu_throughput,
        })
    }

    /// The command line the NM runs with `bash -c`: each word quoted for the shell, after
    /// `exec` so that the worker is the container's process (signals reach it directly).
    pub fn command_line(&self) -> String {
        let words: Vec<String> = self.command.iter().map(|w| shell_quote(w)).collect();
        format!("exec {}", words.join(" "))
    }
}

/// Quotes a word for bash: as is when it is made of safe characters only, else in single
/// quotes (a `'` inside becomes `'\''`).
pub fn shell_quote(w: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c);
    if !w.is_empty() && w.chars().all(safe) {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

/// One worker's place in the job.
#[derive(Debug, Clone, PartialEq)]
pub struct RankInfo {
    pub container: Container,
    pub rank: u32,
    pub local_rank: u32,
    pub local_world_size: u32,
    pub node_rank: u32,
}

/// Ranks in (node, container id) order; local ranks count within a node.
pub fn assign_ranks(containers: &[Container]) -> Vec<RankInfo> {
    let mut sorted: Vec<&Container> = containers.iter().collect();
    sorted.sort_by(|a, b| a.node_id.cmp(&b.node_id).then(a.id.cmp(&b.id)));
    let mut per_node: BTreeMap<&NodeId, u32> = BTreeMap::new();
    for c in &sorted {
        *per_node.entry(&c.node_id).or_default() += 1;
    }
    let node_ranks: BTreeMap<&NodeId, u32> = per_node
        .keys()
        .enumerate()
        .map(|(i, n)| (*n, i as u32))
        .collect();
    let mut seen: BTreeMap<&NodeId, u32> = BTreeMap::new();
    sorted
        .iter()
        .enumerate()
        .map(|(rank, c)| {
            let local = seen.entry(&c.node_id).or_default();
            let info = RankInfo {
                container: (*c).clone(),
                rank: rank as u32,
                local_rank: *local,
                local_world_size: per_node.get(&c.node_id).copied().unwrap_or(1),
                node_rank: node_ranks.get(&c.node_id).copied().unwrap_or(0),
            };
            *local += 1;
            info
        })
        .collect()
}

/// The rank environment of one worker (the configuration's extra environment under it).
pub fn worker_env(
    cfg: &TrainAmConfig,
    r: &RankInfo,
    world_size: u32,
    master_addr: &str,
    master_port: u16,
    attempt: u32,
) -> BTreeMap<String, String> {
    let mut env = cfg.worker_env.clone();
    let mut set = |k: &str, v: String| {
        env.insert(k.to_string(), v);
    };
    set(RANK, r.rank.to_string());
    set(WORLD_SIZE, world_size.to_string());
    set(LOCAL_RANK, r.local_rank.to_string());
    set(LOCAL_WORLD_SIZE, r.local_world_size.to_string());
    set(NODE_RANK, r.node_rank.to_string());
    set(MASTER_ADDR, master_addr.to_string());
    set(MASTER_PORT, master_port.to_string());
    set(GANG_ATTEMPT, attempt.to_string());
    if let Some(d) = &cfg.checkpoint_dir {
        set(CHECKPOINT_DIR, d.clone());
    }
    env
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::HashMap;

    use spindle_common::ids::{ApplicationAttemptId, ApplicationId, ContainerId};
    use spindle_common::records::resource::ResourceInfo;
    use spindle_common::resource::GPU;

    use super::*;

    fn cfg() -> TrainAmConfig {
        TrainAmConfig {
            workers: 4,
            worker_resources: Resource::new(4096, 4).with(GPU, 1),
            placement: GangPlacement::SPREAD,
            max_nodes: 2,
            gang_timeout: Some(Duration::from_millis(1500)),
            max_restarts: 5,
            checkpoint_dir: Some("/ckpt/run 1".into()),
            // Off, so the round trip carries SPINDLE_TRAIN_CHECKPOINT_CHECK=0 too.
            checkpoint_check: false,
            command: vec!["python".into(), "train.py".into(), "--lr=0.1".into()],
            worker_env: BTreeMap::from([("A".into(), "b c".into())]),
            elastic: None,
            node_label_expression: None,
            gpu_model: None,
            cpus_per_gpu: None,
            cpu_throughput: BTreeMap::new(),
        }
    }

    #[test]
    fn label_and_gpu_model_round_trip() {
        let mut c = cfg();
        let env: HashMap<String, String> = c.to_env().into_iter().collect();
        assert!(!env.contains_key(ENV_NODE_LABEL_EXPRESSION));
        assert!(!env.contains_key(ENV_GPU_MODEL));
        c.node_label_expression = Some("h100".into());
        c.gpu_model = Some("NVIDIA H100 80GB HBM3".into());
        let env: HashMap<String, String> = c.to_env().into_iter().collect();
        assert_eq!(env[ENV_NODE_LABEL_EXPRESSION], "h100");
        assert_eq!(
            TrainAmConfig::from_lookup(|k| env.get(k).cloned()).expect("round trip"),
            c
        );
    }

    #[test]
    fn cpus_per_gpu_round_trips_and_a_bad_one_is_named() {
        let mut c = cfg();
        c.cpus_per_gpu = Some(CpusPerGpu::Range { min: 2, max: 6 });
        c.cpu_throughput = BTreeMap::from([(1, 100.0), (3, 180.5)]);
        c.worker_resources.vcores = 2;
        let env: HashMap<String, String> = c.to_env().into_iter().collect();
        assert_eq!(env[ENV_CPUS_PER_GPU], "2..6");
        assert_eq!(env[ENV_CPU_THROUGHPUT], "1:100;3:180.5");
        let back = TrainAmConfig::from_lookup(|k| env.get(k).cloned()).expect("round trip");
        assert_eq!(back, c);
        let mut bad = env.clone();
        bad.insert(ENV_CPUS_PER_GPU.into(), "5..2".into());
        let e = TrainAmConfig::from_lookup(|k| bad.get(k).cloned()).expect_err("5..2");
        assert!(e.to_string().contains(ENV_CPUS_PER_GPU), "{e}");
    }

    #[test]
    fn an_elastic_config_round_trips_and_its_words_parse() {
        let mut c = cfg();
        c.workers = 8;
        c.elastic = Some(ElasticWorkers {
            min: 2,
            max: 8,
            rule: SizeRule::MULTIPLE,
            multiple: 2,
            throughput: BTreeMap::from([(1, 318.0), (2, 576.2)]),
        });
        let env: HashMap<String, String> = c.to_env().into_iter().collect();
        assert_eq!(env[ENV_SIZE_RULE], "multiple:2");
        assert_eq!(env[ENV_THROUGHPUT], "1:318;2:576.2");
        assert_eq!(
            TrainAmConfig::from_lookup(|k| env.get(k).cloned()).unwrap(),
            c
        );
        assert_eq!(
            parse_size_rule("POWER-OF-TWO"),
            Ok((SizeRule::POWER_OF_TWO, 0))
        );
        assert_eq!(parse_size_rule("Any"), Ok((SizeRule::ANY, 0)));
        assert!(parse_size_rule("multiple:0").is_err());
        assert!(parse_size_rule("odd").is_err());
        assert_eq!(
            parse_throughput("1:318.0; 2:576.2;4:1152.4;8:2177.8")
                .unwrap()
                .len(),
            4
        );
        for bad in ["1", "0:3", "x:1", "1:-2", "2:fast"] {
            assert!(parse_throughput(bad).is_err(), "{bad}");
        }
        let e = |min, max, rule, multiple| ElasticWorkers {
            min,
            max,
            rule,
            multiple,
            throughput: BTreeMap::new(),
        };
        assert!(e(2, 8, SizeRule::POWER_OF_TWO, 0).validate().is_ok());
        assert!(e(5, 7, SizeRule::POWER_OF_TWO, 0).validate().is_err());
        assert!(e(3, 2, SizeRule::ANY, 0).validate().is_err());
        assert!(e(1, 5, SizeRule::MULTIPLE, 0).validate().is_err());
        assert!(e(5, 7, SizeRule::MULTIPLE, 4).validate().is_err());
    }

    #[test]
    fn config_round_trips_through_the_environment() {
        let c = cfg();
        let env: HashMap<String, String> = c.to_env().into_iter().collect();
        assert_eq!(env[ENV_PLACEMENT], "SPREAD");
        assert_eq!(
            env[ENV_WORKER_RESOURCES],
            "memory-mb=4096,vcores=4,yarn.io/gpu=1"
        );
        assert_eq!(
            TrainAmConfig::from_lookup(|k| env.get(k).cloned()).unwrap(),
            c
        );
        // Defaults.
        let env = HashMap::from([
            (ENV_WORKERS, "2"),
            (ENV_WORKER_RESOURCES, "memory-mb=128,vcores=1"),
            (ENV_COMMAND, r#"["true"]"#),
        ]);
        let d = TrainAmConfig::from_lookup(|k| env.get(k).map(|v| v.to_string())).unwrap();
        assert_eq!(d.placement, GangPlacement::PACK);
        assert_eq!(d.max_restarts, DEFAULT_MAX_RESTARTS);
        assert_eq!(
            (d.max_nodes, d.gang_timeout, d.checkpoint_dir),
            (0, None, None)
        );
    }

    #[test]
    fn bad_environment_is_named() {
        let good: HashMap<&str, &str> = HashMap::from([
            (ENV_WORKERS, "2"),
            (ENV_WORKER_RESOURCES, "memory-mb=128,vcores=1"),
            (ENV_COMMAND, r#"["true"]"#),
        ]);
        for (k, v) in [
            (ENV_WORKERS, "0"),
            (ENV_WORKERS, "x"),
            (ENV_WORKER_RESOURCES, "vcores=0"),
            (ENV_PLACEMENT, "anywhere"),
            (ENV_COMMAND, "[]"),
            (ENV_COMMAND, "python"),
            (ENV_WORKER_ENV, "[1]"),
            (ENV_MAX_RESTARTS, "-1"),
        ] {
            let mut env = good.clone();
            env.insert(k, v);
            let e = TrainAmConfig::from_lookup(|n| env.get(n).map(|v| v.to_string())).unwrap_err();
            assert!(e.to_string().contains(k), "{k}={v}: {e}");
        }
        let mut env = good.clone();
        env.remove(ENV_COMMAND);
        assert!(matches!(
            TrainAmConfig::from_lookup(|n| env.get(n).map(|v| v.to_string())),
            Err(TrainConfigError::Missing(ENV_COMMAND))
        ));
    }

    #[test]
    fn placements_parse_in_any_spelling() {
        assert_eq!(
            parse_placement("strict-pack"),
            Ok(GangPlacement::STRICT_PACK)
        );
        assert_eq!(parse_placement("SAME_RACK"), Ok(GangPlacement::SAME_RACK));
        assert_eq!(parse_placement("Pack"), Ok(GangPlacement::PACK));
        assert!(parse_placement("tight").is_err());
    }

    #[test]
    fn command_words_are_quoted_for_bash() {
        let mut c = cfg();
        assert_eq!(c.command_line(), "exec python train.py --lr=0.1");
        c.command = vec![
            "sh".into(),
            "-c".into(),
            "echo $X 'q'".into(),
            String::new(),
        ];
        assert_eq!(c.command_line(), r#"exec sh -c 'echo $X '\''q'\''' ''"#);
    }

    pub(crate) fn container(seq: u64, node: &str) -> Container {
        let att = ApplicationAttemptId::new(ApplicationId::new(1, 1), 1);
        Container {
            id: ContainerId::new(att, 0, seq),
            node_id: node.parse().unwrap(),
            node_http_address: node.into(),
            resource: ResourceInfo::from(&Resource::new(128, 1)),
            priority: 0,
            container_token: String::new(),
            execution_type: "GUARANTEED".into(),
            allocation_request_id: WORKER_REQUEST_ID,
            version: 0,
        }
    }

    #[test]
    fn ranks_follow_node_then_container_order() {
        let cs = vec![
            container(5, "b:1"),
            container(2, "b:1"),
            container(9, "a:2"),
            container(3, "c:1"),
            container(4, "a:2"),
        ];
        let r = assign_ranks(&cs);
        let got: Vec<(u64, String, u32, u32, u32, u32)> = r
            .iter()
            .map(|i| {
                (
                    i.container.id.seq,
                    i.container.node_id.to_string(),
                    i.rank,
                    i.local_rank,
                    i.local_world_size,
                    i.node_rank,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (4, "a:2".into(), 0, 0, 2, 0),
                (9, "a:2".into(), 1, 1, 2, 0),
                (2, "b:1".into(), 2, 0, 2, 1),
                (5, "b:1".into(), 3, 1, 2, 1),
                (3, "c:1".into(), 4, 0, 1, 2),
            ]
        );
        let env = worker_env(&cfg(), &r[3], 5, "a", 29500, 2);
        let get = |k: &str| env.get(k).map(String::as_str);
        assert_eq!(get(RANK), Some("3"));
        assert_eq!(get(WORLD_SIZE), Some("5"));
        assert_eq!(get(LOCAL_RANK), Some("1"));
        assert_eq!(get(LOCAL_WORLD_SIZE), Some("2"));
        assert_eq!(get(NODE_RANK), Some("1"));
        assert_eq!(get(MASTER_ADDR), Some("a"));
        assert_eq!(get(MASTER_PORT), Some("29500"));
        assert_eq!(get(GANG_ATTEMPT), Some("2"));
        assert_eq!(get(CHECKPOINT_DIR), Some("/ckpt/run 1"));
        assert_eq!(get("A"), Some("b c"));
    }
}
