//! Hyperparameter sweeps and Slurm's job arrays: `spindle sweep` submits an application
//! whose AM (`spindle sweep-am`, this same binary) runs one shell command once per *trial*,
//! at most `parallel` trials at a time, each in its own container asked for incrementally
//! (never as a gang: a trial starts as soon as one container is granted, as the Hopsworks
//! hyperparameter search does), and gives each container back as its trial ends.
//!
//! The trials are a grid (`--param lr=0.1,0.01 --param bs=32,64`: the cross product, the
//! first parameter varying slowest), a count (`--trials N`: ids 0..N-1), or a Slurm job
//! array (`--array 0-31%4`: the indices, `%K` the most at once). Each trial's command sees
//! [`ENV_TRIAL_ID`], [`ENV_TRIAL_ATTEMPT`], [`ENV_TRIAL_COUNT`], `SWEEP_<NAME>` per parameter
//! (the name upper-cased) and, for an array, Slurm's `SLURM_ARRAY_*` variables
//! ([`trial_env`]).
//!
//! The client hands the AM the shell part of its configuration as the distributed shell's
//! (`DISTRIBUTEDSHELL_*`, [`DsAmConfig`]) and the trials in `SPINDLE_SWEEP_*`
//! ([`SweepAmConfig::to_env`]); the AM reports each trial in [`status`]'s file, which the
//! client reads for its progress line and closing table.

pub mod am;
pub mod client;
pub mod status;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::dshell::{DsAmConfig, DsConfigError};

pub use am::{run_am_with, SweepReport};
pub use client::SweepOptions;

/// YARN's application type of a sweep.
pub const APPLICATION_TYPE: &str = "SPINDLE_SWEEP";
pub const AM_COMMAND: &str = "./spindle sweep-am";

/// The trials, as JSON ([`Trial`]s).
pub const ENV_TRIALS: &str = "SPINDLE_SWEEP_TRIALS";
pub const ENV_PARALLEL: &str = "SPINDLE_SWEEP_PARALLEL";
pub const ENV_MAX_TRIAL_RETRIES: &str = "SPINDLE_SWEEP_MAX_TRIAL_RETRIES";

/// A trial's id (the array index for a job array) in its command's environment.
pub const ENV_TRIAL_ID: &str = "SPINDLE_TRIAL_ID";
/// Which attempt of the trial this is, from 1.
pub const ENV_TRIAL_ATTEMPT: &str = "SPINDLE_TRIAL_ATTEMPT";
/// How many trials the sweep has.
pub const ENV_TRIAL_COUNT: &str = "SPINDLE_TRIAL_COUNT";
/// A parameter's variable is this prefix and its name upper-cased: `SWEEP_LR`.
pub const PARAM_ENV_PREFIX: &str = "SWEEP_";
/// The most trials one sweep may have (Slurm's `MaxArraySize` is of this order).
pub const MAX_TRIALS: usize = 10_000;

/// One trial: its id and the parameter values it runs with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trial {
    /// 0.. for a grid or a count; the index for a job array.
    pub id: u32,
    /// `(name, value)` in the order the parameters were given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub params: Vec<(String, String)>,
}

impl Trial {
    /// `lr=0.1 bs=32`, or `-` without parameters.
    pub fn params_text(&self) -> String {
        if self.params.is_empty() {
            return "-".into();
        }
        self.params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Why a `--param`, `--array` or `--trials` cannot make trials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SweepSpecError {
    #[error("--param '{0}': expected NAME=v1,v2,... (e.g. lr=0.1,0.01)")]
    ParamWithoutValues(String),
    #[error(
        "--param '{0}': a parameter name is letters, digits and _, not starting with a digit \
         (it becomes the variable SWEEP_<NAME>)"
    )]
    ParamBadName(String),
    #[error("--param '{text}': value {position} is empty")]
    ParamEmptyValue { text: String, position: usize },
    #[error("--param '{text}': the value '{value}' is given twice")]
    ParamValueRepeated { text: String, value: String },
    #[error("--param {0} is given twice (names are compared upper-cased, as SWEEP_<NAME>)")]
    ParamRepeated(String),
    #[error("--array '{0}': empty; expected indices like 0-31, 1,3,5 or 0-31%4")]
    ArrayEmpty(String),
    #[error(
        "--array '{text}': '{part}' is not an index, a range A-B or a range with a step A-B:S"
    )]
    ArrayBadPart { text: String, part: String },
    #[error("--array '{text}': the range {start}-{end} ends before it starts")]
    ArrayBackwards { text: String, start: u32, end: u32 },
    #[error("--array '{text}': the step of '{part}' must be at least 1")]
    ArrayZeroStep { text: String, part: String },
    #[error("--array '{text}': '%{limit}' must be a whole number of at least 1 (the most trials at once)")]
    ArrayBadLimit { text: String, limit: String },
    #[error("--array '{text}': index {index} is given twice")]
    ArrayIndexRepeated { text: String, index: u32 },
    #[error("--trials must be at least 1")]
    NoTrials,
    #[error("the sweep would have {count} trials; at most {MAX_TRIALS} are allowed")]
    TooManyTrials { count: usize },
}

/// One `--param NAME=v1,v2,...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    pub values: Vec<String>,
}

/// Reads `NAME=v1,v2,...`: a name fit for an environment variable, at least one value, no
/// empty or repeated value.
pub fn parse_param(text: &str) -> Result<Param, SweepSpecError> {
    let (name, values) = text
        .split_once('=')
        .ok_or_else(|| SweepSpecError::ParamWithoutValues(text.into()))?;
    let name = name.trim();
    let good_name = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !good_name {
        return Err(SweepSpecError::ParamBadName(text.into()));
    }
    if values.trim().is_empty() {
        return Err(SweepSpecError::ParamWithoutValues(text.into()));
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for (i, v) in values.split(',').enumerate() {
        let v = v.trim();
        if v.is_empty() {
            return Err(SweepSpecError::ParamEmptyValue {
                text: text.into(),
                position: i + 1,
            });
        }
        if !seen.insert(v) {
            return Err(SweepSpecError::ParamValueRepeated {
                text: text.into(),
                value: v.into(),
            });
        }
        out.push(v.to_string());
    }
    Ok(Param {
        name: name.to_string(),
        values: out,
    })
}

/// The grid of `params`: their cross product, the first parameter varying slowest; ids from
/// 0 in that order.
pub fn grid(params: &[Param]) -> Result<Vec<Trial>, SweepSpecError> {
    let mut names = BTreeSet::new();
    for p in params {
        if !names.insert(p.name.to_ascii_uppercase()) {
            return Err(SweepSpecError::ParamRepeated(p.name.clone()));
        }
    }
    let count = params
        .iter()
        .try_fold(1usize, |n, p| n.checked_mul(p.values.len()))
        .filter(|&n| n <= MAX_TRIALS)
        .ok_or_else(|| SweepSpecError::TooManyTrials {
            count: params
                .iter()
                .fold(1usize, |n, p| n.saturating_mul(p.values.len())),
        })?;
    Ok((0..count)
        .map(|i| {
            // Mixed radix, the last parameter the fastest digit.
            let mut rest = i;
            let mut values = vec![String::new(); params.len()];
            for (slot, p) in values.iter_mut().zip(params).rev() {
                *slot = p.values[rest % p.values.len()].clone();
                rest /= p.values.len();
            }
            Trial {
                id: i as u32,
                params: params.iter().map(|p| p.name.clone()).zip(values).collect(),
            }
        })
        .collect())
}

/// `--trials N`: trials 0..N-1 without parameters.
pub fn numbered(n: u32) -> Result<Vec<Trial>, SweepSpecError> {
    if n == 0 {
        return Err(SweepSpecError::NoTrials);
    }
    if n as usize > MAX_TRIALS {
        return Err(SweepSpecError::TooManyTrials { count: n as usize });
    }
    Ok((0..n)
        .map(|id| Trial {
            id,
            params: Vec::new(),
        })
        .collect())
}

/// Slurm's `--array`: indices (`1,3,5`, `0-15`, `0-15:4`, mixed) and, after `%`, the most
/// tasks running at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArraySpec {
    /// In the order given.
    pub indices: Vec<u32>,
    pub max_running: Option<u32>,
}

impl ArraySpec {
    pub fn trials(&self) -> Vec<Trial> {
        self.indices
            .iter()
            .map(|&id| Trial {
                id,
                params: Vec::new(),
            })
            .collect()
    }
}

/// Reads Slurm's `--array` text.
pub fn parse_array(text: &str) -> Result<ArraySpec, SweepSpecError> {
    let t = text.trim();
    let (list, limit) = match t.split_once('%') {
        Some((l, k)) => (l, Some(k)),
        None => (t, None),
    };
    let max_running = match limit {
        Some(k) => match k.trim().parse::<u32>() {
            Ok(n) if n >= 1 => Some(n),
            _ => {
                return Err(SweepSpecError::ArrayBadLimit {
                    text: text.into(),
                    limit: k.into(),
                })
            }
        },
        None => None,
    };
    if list.trim().is_empty() {
        return Err(SweepSpecError::ArrayEmpty(text.into()));
    }
    let bad = |part: &str| SweepSpecError::ArrayBadPart {
        text: text.into(),
        part: part.into(),
    };
    let mut indices = Vec::new();
    let mut seen = BTreeSet::new();
    for part in list.split(',') {
        let p = part.trim();
        let (range, step) = match p.split_once(':') {
            Some((r, s)) => (r, s.trim().parse::<u32>().map_err(|_| bad(p))?),
            None => (p, 1),
        };
        if step == 0 {
            return Err(SweepSpecError::ArrayZeroStep {
                text: text.into(),
                part: p.into(),
            });
        }
        let num = |s: &str| s.trim().parse::<u32>().map_err(|_| bad(p));
        let (start, end) = match range.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None if step == 1 => (num(range)?, num(range)?),
            None => return Err(bad(p)),
        };
        if end < start {
            return Err(SweepSpecError::ArrayBackwards {
                text: text.into(),
                start,
                end,
            });
        }
        let count = ((end - start) / step) as usize + 1;
        if indices.len() + count > MAX_TRIALS {
            return Err(SweepSpecError::TooManyTrials {
                count: indices.len() + count,
            });
        }
        for i in (start..=end).step_by(step as usize) {
            if !seen.insert(i) {
                return Err(SweepSpecError::ArrayIndexRepeated {
                    text: text.into(),
                    index: i,
                });
            }
            indices.push(i);
        }
    }
    Ok(ArraySpec {
        indices,
        max_running,
    })
}

/// What the sweep AM is asked to do.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepAmConfig {
    /// Each trial's command, environment, container resources, priority, partition, and
    /// the AM's no-progress timeout, as the distributed shell's (its `num_containers` is the
    /// number of trials; no placement spec).
    pub shell: DsAmConfig,
    pub trials: Vec<Trial>,
    /// Slurm's job array: the trials get `SLURM_ARRAY_*`.
    pub array: bool,
    /// The most trials asked for or running at once.
    pub parallel: u32,
    /// A failed trial runs again up to this many times.
    pub max_trial_retries: u32,
}

/// The AM's environment does not describe a sweep.
#[derive(Debug, thiserror::Error)]
pub enum SweepConfigError {
    #[error(transparent)]
    Shell(#[from] DsConfigError),
    #[error("environment variable {0} is not set (is this the sweep AM container?)")]
    Missing(&'static str),
    #[error("environment variable {name}='{value}' is invalid: {reason}")]
    Invalid {
        name: &'static str,
        value: String,
        reason: String,
    },
}

/// Marks the trials of a job array in [`ENV_TRIALS`].
#[derive(Debug, Serialize, Deserialize)]
struct TrialsEnv {
    #[serde(default)]
    array: bool,
    trials: Vec<Trial>,
}

impl SweepAmConfig {
    /// The AM container's environment: the shell's, then the trials, parallelism and
    /// retries.
    pub fn to_env(&self) -> Vec<(String, String)> {
        let mut env = self.shell.to_env();
        let trials = TrialsEnv {
            array: self.array,
            trials: self.trials.clone(),
        };
        env.push((
            ENV_TRIALS.into(),
            serde_json::to_string(&trials).unwrap_or_default(),
        ));
        env.push((ENV_PARALLEL.into(), self.parallel.to_string()));
        env.push((
            ENV_MAX_TRIAL_RETRIES.into(),
            self.max_trial_retries.to_string(),
        ));
        env
    }

    pub fn from_env() -> Result<Self, SweepConfigError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, SweepConfigError> {
        let shell = DsAmConfig::from_lookup(&lookup)?;
        let get = |name: &'static str| lookup(name).ok_or(SweepConfigError::Missing(name));
        let invalid =
            |name: &'static str, value: String, reason: String| SweepConfigError::Invalid {
                name,
                value,
                reason,
            };
        let v = get(ENV_TRIALS)?;
        let t: TrialsEnv = serde_json::from_str(&v)
            .map_err(|e| invalid(ENV_TRIALS, v.clone(), format!("not the trials' JSON: {e}")))?;
        if t.trials.is_empty() {
            return Err(invalid(ENV_TRIALS, v, "no trial".into()));
        }
        let number = |name: &'static str| -> Result<u32, SweepConfigError> {
            let v = get(name)?;
            v.trim()
                .parse()
                .map_err(|_| invalid(name, v.clone(), "not a whole number".into()))
        };
        let parallel = number(ENV_PARALLEL)?;
        if parallel == 0 {
            return Err(invalid(
                ENV_PARALLEL,
                "0".into(),
                "must be at least 1".into(),
            ));
        }
        Ok(Self {
            shell,
            trials: t.trials,
            array: t.array,
            parallel,
            max_trial_retries: number(ENV_MAX_TRIAL_RETRIES)?,
        })
    }
}

/// The environment of `trial`'s `attempt` (from 1): the sweep's `--shell_env`, then
/// [`ENV_TRIAL_ID`], [`ENV_TRIAL_ATTEMPT`], [`ENV_TRIAL_COUNT`], `SWEEP_<NAME>` per parameter
/// and, for a job array, Slurm's `SLURM_ARRAY_JOB_ID` (the application id),
/// `SLURM_ARRAY_TASK_ID`, `_COUNT`, `_MIN`, `_MAX`.
pub fn trial_env(
    cfg: &SweepAmConfig,
    trial: &Trial,
    attempt: u32,
    app_id: &str,
) -> BTreeMap<String, String> {
    let mut env = cfg.shell.shell_env.clone();
    env.insert(ENV_TRIAL_ID.into(), trial.id.to_string());
    env.insert(ENV_TRIAL_ATTEMPT.into(), attempt.to_string());
    env.insert(ENV_TRIAL_COUNT.into(), cfg.trials.len().to_string());
    for (k, v) in &trial.params {
        env.insert(
            format!("{PARAM_ENV_PREFIX}{}", k.to_ascii_uppercase()),
            v.clone(),
        );
    }
    if cfg.array {
        let ids = cfg.trials.iter().map(|t| t.id);
        let (min, max) = (ids.clone().min(), ids.max());
        env.insert("SLURM_ARRAY_JOB_ID".into(), app_id.to_string());
        env.insert("SLURM_ARRAY_TASK_ID".into(), trial.id.to_string());
        env.insert(
            "SLURM_ARRAY_TASK_COUNT".into(),
            cfg.trials.len().to_string(),
        );
        env.insert("SLURM_ARRAY_TASK_MIN".into(), min.unwrap_or(0).to_string());
        env.insert("SLURM_ARRAY_TASK_MAX".into(), max.unwrap_or(0).to_string());
    }
    env
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use spindle_common::resource::Resource;

    use super::*;
    use crate::dshell::DEFAULT_NO_PROGRESS_TIMEOUT;

    #[test]
    fn the_grid_is_the_cross_product() {
        let lr = parse_param("lr=0.1, 0.01").expect("lr");
        let bs = parse_param("batch_size=32,64,128").expect("bs");
        assert_eq!(lr.values, ["0.1", "0.01"]);
        let g = grid(&[lr, bs]).expect("grid");
        assert_eq!(g.len(), 6);
        assert_eq!(g[0].params_text(), "lr=0.1 batch_size=32");
        assert_eq!(g[2].params_text(), "lr=0.1 batch_size=128");
        assert_eq!(g[3].params_text(), "lr=0.01 batch_size=32");
        assert_eq!(g[5].id, 5);
        assert_eq!(grid(&[]).expect("no param").len(), 1);
    }

    #[test]
    fn bad_params_are_named() {
        use SweepSpecError::*;
        assert_eq!(parse_param("lr"), Err(ParamWithoutValues("lr".into())));
        assert_eq!(parse_param("lr="), Err(ParamWithoutValues("lr=".into())));
        assert_eq!(parse_param("1lr=1"), Err(ParamBadName("1lr=1".into())));
        assert_eq!(parse_param("l-r=1"), Err(ParamBadName("l-r=1".into())));
        assert_eq!(parse_param("=1"), Err(ParamBadName("=1".into())));
        assert_eq!(
            parse_param("lr=1,,2"),
            Err(ParamEmptyValue {
                text: "lr=1,,2".into(),
                position: 2
            })
        );
        assert_eq!(
            parse_param("lr=1,2,1"),
            Err(ParamValueRepeated {
                text: "lr=1,2,1".into(),
                value: "1".into()
            })
        );
        let a = parse_param("lr=1").expect("lr");
        let b = parse_param("LR=2").expect("LR");
        assert_eq!(grid(&[a, b]), Err(ParamRepeated("LR".into())));
        let big = parse_param(&format!(
            "x={}",
            (0..200)
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(",")
        ))
        .expect("x");
        let y = Param {
            name: "y".into(),
            ..big.clone()
        };
        assert_eq!(grid(&[big, y]), Err(TooManyTrials { count: 40_000 }));
        assert_eq!(numbered(0), Err(NoTrials));
        assert_eq!(numbered(3).expect("3").len(), 3);
    }

    #[test]
    fn slurm_array_spellings() {
        let a = parse_array("0-31%4").expect("0-31%4");
        assert_eq!(a.indices, (0..32).collect::<Vec<_>>());
        assert_eq!(a.max_running, Some(4));
        let a = parse_array("1,3,5").expect("1,3,5");
        assert_eq!((a.indices, a.max_running), (vec![1, 3, 5], None));
        assert_eq!(parse_array("0-15").expect("0-15").indices.len(), 16);
        assert_eq!(
            parse_array("0-15:4,20").expect("step").indices,
            [0, 4, 8, 12, 20]
        );
        assert_eq!(parse_array("7").expect("7").trials()[0].id, 7);
    }

    #[test]
    fn bad_arrays_are_named() {
        use SweepSpecError::*;
        let e = |t: &str| parse_array(t).expect_err(t);
        assert_eq!(e(""), ArrayEmpty("".into()));
        assert_eq!(e("%4"), ArrayEmpty("%4".into()));
        assert!(matches!(e("a-3"), ArrayBadPart { part, .. } if part == "a-3"));
        assert!(matches!(e("1,,2"), ArrayBadPart { part, .. } if part.is_empty()));
        assert!(matches!(e("3:2"), ArrayBadPart { .. }));
        assert!(matches!(
            e("5-2"),
            ArrayBackwards {
                start: 5,
                end: 2,
                ..
            }
        ));
        assert!(matches!(e("0-4:0"), ArrayZeroStep { .. }));
        assert!(matches!(e("0-31%0"), ArrayBadLimit { limit, .. } if limit == "0"));
        assert!(matches!(e("0-31%x"), ArrayBadLimit { .. }));
        assert!(matches!(e("1,2,1"), ArrayIndexRepeated { index: 1, .. }));
        assert!(matches!(e("0-20000"), TooManyTrials { count: 20_001 }));
        assert!(e("0-31%0").to_string().contains("the most trials at once"));
    }

    fn cfg(array: bool) -> SweepAmConfig {
        SweepAmConfig {
            shell: DsAmConfig {
                num_containers: 2,
                container_resources: Resource::new(256, 1).with("yarn.io/gpu", 1),
                shell_command: "python3 train.py".into(),
                shell_env: BTreeMap::from([("A".into(), "1".into())]),
                container_priority: 0,
                no_progress_timeout: DEFAULT_NO_PROGRESS_TIMEOUT,
                placement: Vec::new(),
                node_label_expression: None,
            },
            trials: if array {
                parse_array("3,5").expect("array").trials()
            } else {
                grid(&[parse_param("lr=0.1,0.2").expect("lr")]).expect("grid")
            },
            array,
            parallel: 1,
            max_trial_retries: 2,
        }
    }

    #[test]
    fn config_round_trips_through_the_environment() {
        for array in [false, true] {
            let c = cfg(array);
            let env: HashMap<String, String> = c.to_env().into_iter().collect();
            assert_eq!(env[ENV_PARALLEL], "1");
            let back = SweepAmConfig::from_lookup(|k| env.get(k).cloned()).expect("back");
            assert_eq!(back, c);
        }
        let mut env: HashMap<String, String> = cfg(false).to_env().into_iter().collect();
        env.insert(ENV_PARALLEL.into(), "0".into());
        let e = SweepAmConfig::from_lookup(|k| env.get(k).cloned()).expect_err("parallel 0");
        assert!(e.to_string().contains(ENV_PARALLEL), "{e}");
        env.remove(ENV_TRIALS);
        assert!(matches!(
            SweepAmConfig::from_lookup(|k| env.get(k).cloned()),
            Err(SweepConfigError::Missing(ENV_TRIALS))
        ));
    }

    #[test]
    fn each_trial_sees_its_id_parameters_and_array_index() {
        let c = cfg(false);
        let env = trial_env(&c, &c.trials[1], 2, "application_1_0001");
        assert_eq!(env[ENV_TRIAL_ID], "1");
        assert_eq!(env[ENV_TRIAL_ATTEMPT], "2");
        assert_eq!(env[ENV_TRIAL_COUNT], "2");
        assert_eq!(env["SWEEP_LR"], "0.2");
        assert_eq!(env["A"], "1");
        assert!(!env.contains_key("SLURM_ARRAY_TASK_ID"));
        let c = cfg(true);
        let env = trial_env(&c, &c.trials[1], 1, "application_1_0001");
        assert_eq!(env[ENV_TRIAL_ID], "5");
        assert_eq!(env["SLURM_ARRAY_TASK_ID"], "5");
        assert_eq!(env["SLURM_ARRAY_TASK_COUNT"], "2");
        assert_eq!(env["SLURM_ARRAY_TASK_MIN"], "3");
        assert_eq!(env["SLURM_ARRAY_TASK_MAX"], "5");
        assert_eq!(env["SLURM_ARRAY_JOB_ID"], "application_1_0001");
    }
}
