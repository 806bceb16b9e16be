//! Traces: the jobs a replay submits. Read from Spindle's CSV (one row a job) or YARN SLS
//! JSON (a job with its tasks), and checked whole: every bad row is reported with its line,
//! and a trace with any bad row is refused before anything starts.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

use serde_json::Value;
use spindle_resourcemanager::core::scheduler::gang::GangPolicy;

use crate::SlsError;

/// How a gang's members are placed (the gang spec's `placement`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    Pack,
    StrictPack,
    Spread,
    SameRack,
}

impl Placement {
    fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_uppercase().replace('-', "_").as_str() {
            "" | "PACK" => Some(Self::Pack),
            "STRICT_PACK" => Some(Self::StrictPack),
            "SPREAD" => Some(Self::Spread),
            "SAME_RACK" => Some(Self::SameRack),
            _ => None,
        }
    }

    pub fn policy(self) -> GangPolicy {
        match self {
            Self::Pack => GangPolicy::Pack,
            Self::StrictPack => GangPolicy::StrictPack,
            Self::Spread => GangPolicy::Spread,
            Self::SameRack => GangPolicy::SameRack,
        }
    }
}

/// Containers of one shape and one run time, asked together.
#[derive(Debug, Clone, PartialEq)]
pub struct Tasks {
    pub count: u32,
    /// How long each container runs once started.
    pub duration_ms: u64,
    pub gpus: i64,
    pub vcores: i64,
    pub memory_mb: i64,
}

/// How a job's containers are asked for.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// All containers granted at once or none (a multi-container GPU job); the job's time
    /// starts when the whole gang is granted.
    Gang {
        placement: Placement,
        gpu_model: Option<String>,
    },
    /// Plain asks: each container starts when granted (a single container, or an SLS job's
    /// independent tasks).
    Independent,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// Where it came from: the CSV line, or the SLS job's position (1-based).
    pub line: usize,
    pub id: String,
    pub submit_ms: u64,
    pub user: String,
    pub queue: String,
    pub priority: i32,
    /// One entry for a CSV job; one per task group for an SLS job.
    pub tasks: Vec<Tasks>,
    pub shape: Shape,
    /// The elastic range (read and checked; used by elastic policies).
    pub min_gpus: Option<u32>,
    pub max_gpus: Option<u32>,
    /// Throughput by GPU count (the `throughput` column, `1:318.0;2:576.2`).
    pub throughput: Option<BTreeMap<u32, f64>>,
    /// Throughput per GPU by CPUs per GPU (the `cpu_throughput` column, `1:100;3:180`):
    /// the job asks a vcores range and its speed follows its CPUs.
    pub cpu_throughput: Option<BTreeMap<u32, f64>>,
}

impl Job {
    pub fn containers(&self) -> u32 {
        self.tasks.iter().map(|t| t.count).sum()
    }

    pub fn gpus(&self) -> i64 {
        self.tasks.iter().map(|t| i64::from(t.count) * t.gpus).sum()
    }

    /// GPU-milliseconds the job needs at its size.
    pub fn gpu_ms(&self) -> u128 {
        self.tasks
            .iter()
            .map(|t| u128::from(t.count) * t.gpus.max(0) as u128 * u128::from(t.duration_ms))
            .sum()
    }

    pub fn is_gang(&self) -> bool {
        matches!(self.shape, Shape::Gang { .. })
    }
}

/// A row the replay refuses, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct BadRow {
    pub line: usize,
    pub problem: RowProblem,
}

impl fmt::Display for BadRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.problem)
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RowProblem {
    #[error("cannot parse the row: {0}")]
    Csv(String),
    #[error("`{column}` is empty")]
    Empty { column: &'static str },
    #[error("`{column}` is not a number: '{value}'")]
    NotANumber { column: &'static str, value: String },
    #[error("`{column}` is negative: {value}")]
    Negative { column: &'static str, value: String },
    #[error("`{column}` must be a whole number: '{value}'")]
    NotWhole { column: &'static str, value: String },
    #[error("`{column}` must be at least 1: {value}")]
    NotPositive { column: &'static str, value: String },
    #[error("num_gpus {num_gpus} is not divisible by gpus_per_container {per_container}")]
    NotDivisible { num_gpus: i64, per_container: i64 },
    #[error("unknown placement '{0}' (PACK, STRICT_PACK, SPREAD or SAME_RACK)")]
    UnknownPlacement(String),
    #[error("min_gpus {min} / max_gpus {max} do not bracket num_gpus {num_gpus}")]
    BadElasticRange { min: i64, max: i64, num_gpus: i64 },
    #[error("bad throughput table: {0} (expected GPUS:VALUE pairs such as 1:318.0;2:576.2)")]
    BadThroughput(String),
    #[error("`user` is not a user name: '{0}' (no white space, '/', '=' or control characters, at most 256 bytes)")]
    BadUser(String),
    #[error("bad cpu_throughput table: {0} (expected CPUS:VALUE pairs such as 1:100;3:180;6:260)")]
    BadCpuThroughput(String),
    #[error("duplicate job_id '{0}'")]
    DuplicateJobId(String),
    #[error("unknown queue '{queue}' (leaf queues: {known})")]
    UnknownQueue { queue: String, known: String },
    #[error("queue '{0}' is a parent queue; jobs go to leaf queues")]
    ParentQueue(String),
    #[error("the job needs {gpus} GPUs, more than the whole cluster's {cluster}")]
    LargerThanCluster { gpus: i64, cluster: i64 },
    #[error("a container of {what} fits on no simulated node")]
    NoNodeFits { what: String },
    #[error("a SPREAD gang of {containers} containers needs as many nodes; {nodes} can hold one")]
    SpreadWiderThanCluster { containers: u32, nodes: usize },
    #[error("a STRICT_PACK gang needs {need} on one node; no simulated node is that large")]
    LargerThanAnyNode { need: String },
    #[error("a SAME_RACK gang needs {need} in one rack; no rack holds that much")]
    LargerThanAnyRack { need: String },
    #[error("gpu_model '{model}' is on no simulated node (models: {known})")]
    UnknownGpuModel { model: String, known: String },
    #[error("a container of {what} is over the scheduler's maximum allocation {max}")]
    OverMaximumAllocation { what: String, max: String },
}

/// Defaults for the columns a row leaves out.
#[derive(Debug, Clone)]
pub struct Defaults {
    pub user: String,
    pub queue: String,
    /// Per container.
    pub vcores: i64,
    pub memory_mb: i64,
}

impl Default for Defaults {
    fn default() -> Self {
        Self {
            user: "user".into(),
            queue: "default".into(),
            vcores: 4,
            memory_mb: 16_384,
        }
    }
}

/// Reads a trace: YARN SLS JSON when the file's first non-blank character is `{` or `[`,
/// else Spindle's CSV. Jobs come back ordered by submission (stably, so equal times keep
/// the file's order).
pub fn read(path: &Path, defaults: &Defaults) -> Result<Vec<Job>, SlsError> {
    let text = std::fs::read_to_string(path).map_err(|source| SlsError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let mut jobs = match text.trim_start().chars().next() {
        Some('{') | Some('[') => parse_sls_json(path, &text, defaults)?,
        _ => parse_csv(path, &text, defaults)?,
    };
    if jobs.is_empty() {
        return Err(SlsError::EmptyTrace {
            path: path.to_path_buf(),
        });
    }
    jobs.sort_by_key(|j| j.submit_ms);
    Ok(jobs)
}

/// The CSV columns Spindle knows; others are ignored.
struct Columns {
    submit_time: usize,
    num_gpus: usize,
    duration: usize,
    job_id: Option<usize>,
    user: Option<usize>,
    queue: Option<usize>,
    vcores: Option<usize>,
    memory_mb: Option<usize>,
    gpus_per_container: Option<usize>,
    placement: Option<usize>,
    gpu_model: Option<usize>,
    priority: Option<usize>,
    min_gpus: Option<usize>,
    max_gpus: Option<usize>,
    throughput: Option<usize>,
    cpu_throughput: Option<usize>,
}

pub fn parse_csv(path: &Path, text: &str, defaults: &Defaults) -> Result<Vec<Job>, SlsError> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .trim(csv::Trim::All)
        .flexible(true)
        .comment(Some(b'#'))
        .from_reader(text.as_bytes());
    let header = reader.headers().map_err(|e| SlsError::BadHeader {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    let find = |name: &str| header.iter().position(|h| h.eq_ignore_ascii_case(name));
    let need = |name: &'static str| {
        find(name).ok_or(SlsError::MissingColumn {
            path: path.to_path_buf(),
            column: name,
        })
    };
    let cols = Columns {
        submit_time: need("submit_time")?,
        num_gpus: need("num_gpus")?,
        duration: need("duration")?,
        job_id: find("job_id"),
        user: find("user"),
        queue: find("queue"),
        vcores: find("vcores"),
        memory_mb: find("memory_mb"),
        gpus_per_container: find("gpus_per_container"),
        placement: find("placement"),
        gpu_model: find("gpu_model"),
        priority: find("priority"),
        min_gpus: find("min_gpus"),
        max_gpus: find("max_gpus"),
        throughput: find("throughput"),
        cpu_throughput: find("cpu_throughput"),
    };
    let mut jobs = Vec::new();
    let mut bad = Vec::new();
    let mut ids = BTreeSet::new();
    for (i, rec) in reader.records().enumerate() {
        let (line, rec) = match rec {
            Ok(r) => (r.position().map(|p| p.line() as usize).unwrap_or(i + 2), r),
            Err(e) => {
                let line = e.position().map(|p| p.line() as usize).unwrap_or(i + 2);
                bad.push(BadRow {
                    line,
                    problem: RowProblem::Csv(e.to_string()),
                });
                continue;
            }
        };
        match csv_job(&cols, &rec, line, jobs.len(), defaults) {
            Ok(job) => {
                if !ids.insert(job.id.clone()) {
                    bad.push(BadRow {
                        line,
                        problem: RowProblem::DuplicateJobId(job.id),
                    });
                } else {
                    jobs.push(job);
                }
            }
            Err(problem) => bad.push(BadRow { line, problem }),
        }
    }
    if !bad.is_empty() {
        return Err(SlsError::BadRows {
            path: path.to_path_buf(),
            rows: bad,
        });
    }
    Ok(jobs)
}

/// A job's user as the RM takes it (what `?user.name=` accepts): the fair-share ledgers
/// and the fairness figures are per user.
pub fn user_name(v: &str) -> Result<String, RowProblem> {
    if spindle_common::user_token::valid_user(v) {
        Ok(v.to_string())
    } else {
        Err(RowProblem::BadUser(v.escape_debug().to_string()))
    }
}

fn csv_job(
    c: &Columns,
    rec: &csv::StringRecord,
    line: usize,
    index: usize,
    d: &Defaults,
) -> Result<Job, RowProblem> {
    let get = |i: Option<usize>| i.and_then(|i| rec.get(i)).filter(|s| !s.is_empty());
    let submit_ms = seconds_ms("submit_time", rec.get(c.submit_time))?;
    let duration_ms = seconds_ms("duration", rec.get(c.duration))?;
    let num_gpus = whole("num_gpus", rec.get(c.num_gpus))?;
    let per = match get(c.gpus_per_container) {
        None => 1,
        Some(v) => {
            let n = whole("gpus_per_container", Some(v))?;
            if n < 1 {
                return Err(RowProblem::NotPositive {
                    column: "gpus_per_container",
                    value: v.into(),
                });
            }
            n
        }
    };
    if num_gpus % per != 0 {
        return Err(RowProblem::NotDivisible {
            num_gpus,
            per_container: per,
        });
    }
    let (count, gpus) = match num_gpus {
        0 => (1, 0),
        n => (n / per, per),
    };
    let count = u32::try_from(count).map_err(|_| RowProblem::NotANumber {
        column: "num_gpus",
        value: num_gpus.to_string(),
    })?;
    let positive = |col: &'static str, default: i64| -> Result<i64, RowProblem> {
        match get(match col {
            "vcores" => c.vcores,
            _ => c.memory_mb,
        }) {
            None => Ok(default),
            Some(v) => {
                let n = whole(col, Some(v))?;
                if n < 1 {
                    return Err(RowProblem::NotPositive {
                        column: col,
                        value: v.into(),
                    });
                }
                Ok(n)
            }
        }
    };
    let vcores = positive("vcores", d.vcores)?;
    let memory_mb = positive("memory_mb", d.memory_mb)?;
    let placement = match get(c.placement) {
        None => Placement::Pack,
        Some(p) => Placement::parse(p).ok_or_else(|| RowProblem::UnknownPlacement(p.into()))?,
    };
    let gpu_model = get(c.gpu_model).map(str::to_string);
    let priority = match get(c.priority) {
        None => 0,
        Some(v) => {
            i32::try_from(whole("priority", Some(v))?).map_err(|_| RowProblem::NotANumber {
                column: "priority",
                value: v.into(),
            })?
        }
    };
    let min_gpus = get(c.min_gpus)
        .map(|v| whole("min_gpus", Some(v)))
        .transpose()?;
    let max_gpus = get(c.max_gpus)
        .map(|v| whole("max_gpus", Some(v)))
        .transpose()?;
    if min_gpus.is_some() || max_gpus.is_some() {
        let (min, max) = (min_gpus.unwrap_or(num_gpus), max_gpus.unwrap_or(num_gpus));
        if min > num_gpus || max < num_gpus || min < 1 {
            return Err(RowProblem::BadElasticRange { min, max, num_gpus });
        }
    }
    let shape = if count > 1 || gpu_model.is_some() || placement != Placement::Pack {
        Shape::Gang {
            placement,
            gpu_model,
        }
    } else {
        Shape::Independent
    };
    Ok(Job {
        line,
        id: get(c.job_id)
            .map(str::to_string)
            .unwrap_or_else(|| format!("job{}", index + 1)),
        submit_ms,
        user: user_name(get(c.user).unwrap_or(&d.user))?,
        queue: get(c.queue).unwrap_or(&d.queue).to_string(),
        priority,
        tasks: vec![Tasks {
            count,
            duration_ms,
            gpus,
            vcores,
            memory_mb,
        }],
        shape,
        min_gpus: min_gpus.map(|v| v as u32),
        max_gpus: max_gpus.map(|v| v as u32),
        throughput: get(c.throughput)
            .map(|v| parse_throughput(v).map_err(RowProblem::BadThroughput))
            .transpose()?,
        cpu_throughput: get(c.cpu_throughput)
            .map(|v| parse_throughput(v).map_err(RowProblem::BadCpuThroughput))
            .transpose()?,
    })
}

/// A throughput table, `GPUS:VALUE` pairs separated by `;` (`1:318.0;2:576.2`): each GPU
/// count a positive whole number, each value a positive number. The reason when not.
pub fn parse_throughput(s: &str) -> Result<BTreeMap<u32, f64>, String> {
    let mut out = BTreeMap::new();
    for part in s.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (g, v) = part
            .split_once(':')
            .ok_or_else(|| format!("'{part}' is not GPUS:VALUE"))?;
        let g: u32 = g
            .trim()
            .parse()
            .ok()
            .filter(|g| *g > 0)
            .ok_or_else(|| format!("'{g}' in '{part}' is not a positive GPU count"))?;
        let v: f64 = v
            .trim()
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite() && *v > 0.0)
            .ok_or_else(|| format!("'{v}' in '{part}' is not a positive number"))?;
        if out.insert(g, v).is_some() {
            return Err(format!("{g} GPUs appears twice"));
        }
    }
    if out.is_empty() {
        return Err("the table is empty".into());
    }
    Ok(out)
}

/// Seconds (whole or decimal, not negative) as milliseconds.
fn seconds_ms(column: &'static str, v: Option<&str>) -> Result<u64, RowProblem> {
    let v = v
        .filter(|s| !s.is_empty())
        .ok_or(RowProblem::Empty { column })?;
    let x: f64 = v.parse().map_err(|_| RowProblem::NotANumber {
        column,
        value: v.into(),
    })?;
    if !x.is_finite() {
        return Err(RowProblem::NotANumber {
            column,
            value: v.into(),
        });
    }
    if x < 0.0 {
        return Err(RowProblem::Negative {
            column,
            value: v.into(),
        });
    }
    // A century of seconds is plenty; beyond it the value is garbage.
    if x > 3.2e9 {
        return Err(RowProblem::NotANumber {
            column,
            value: v.into(),
        });
    }
    Ok((x * 1000.0).round() as u64)
}

/// A whole, non-negative number.
fn whole(column: &'static str, v: Option<&str>) -> Result<i64, RowProblem> {
    let v = v
        .filter(|s| !s.is_empty())
        .ok_or(RowProblem::Empty { column })?;
    match v.parse::<i64>() {
        Ok(n) if n < 0 => Err(RowProblem::Negative {
            column,
            value: v.into(),
        }),
        Ok(n) if n > i64::from(u32::MAX) => Err(RowProblem::NotANumber {
            column,
            value: v.into(),
        }),
        Ok(n) => Ok(n),
        Err(_) if v.parse::<f64>().is_ok() => Err(RowProblem::NotWhole {
            column,
            value: v.into(),
        }),
        Err(_) => Err(RowProblem::NotANumber {
            column,
            value: v.into(),
        }),
    }
}

/// YARN SLS's JSON trace: a sequence (or array) of job objects with `job.start.ms`,
/// `job.end.ms`, `job.queue.name`, `job.id`, `job.user` and `job.tasks`, each task with
/// `container.count` (default 1), `container.start.ms`, `container.end.ms`,
/// `container.priority`, and optionally `container.memory`, `container.vcores` and (a
/// Spindle extension) `container.gpus`. A job's tasks are independent containers, as in
/// YARN; times are relative to the trace's earliest `job.start.ms`.
pub fn parse_sls_json(path: &Path, text: &str, d: &Defaults) -> Result<Vec<Job>, SlsError> {
    let mut values = Vec::new();
    for (i, v) in serde_json::Deserializer::from_str(text)
        .into_iter::<Value>()
        .enumerate()
    {
        let v = v.map_err(|e| SlsError::BadSlsJob {
            path: path.to_path_buf(),
            index: i + 1,
            reason: format!("not JSON: {e}"),
        })?;
        match v {
            Value::Array(items) => values.extend(items),
            other => values.push(other),
        }
    }
    let bad = |index: usize, reason: String| SlsError::BadSlsJob {
        path: path.to_path_buf(),
        index,
        reason,
    };
    let num = |o: &Value, key: &str, index: usize| -> Result<Option<i64>, SlsError> {
        match o.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => n
                .as_i64()
                .or_else(|| n.as_f64().filter(|f| f.is_finite()).map(|f| f as i64))
                .map(Some)
                .ok_or_else(|| bad(index, format!("`{key}` is not a number"))),
            Some(Value::String(s)) => s
                .trim()
                .parse::<i64>()
                .map(Some)
                .map_err(|_| bad(index, format!("`{key}` is not a number: '{s}'"))),
            Some(_) => Err(bad(index, format!("`{key}` is not a number"))),
        }
    };
    let start0 = values
        .iter()
        .filter_map(|v| v.get("job.start.ms").and_then(Value::as_i64))
        .min()
        .unwrap_or(0);
    let mut jobs = Vec::new();
    for (i, v) in values.iter().enumerate() {
        let index = i + 1;
        let start =
            num(v, "job.start.ms", index)?.ok_or_else(|| bad(index, "no `job.start.ms`".into()))?;
        if start < 0 {
            return Err(bad(index, format!("`job.start.ms` is negative: {start}")));
        }
        let tasks_v = v
            .get("job.tasks")
            .and_then(Value::as_array)
            .ok_or_else(|| bad(index, "no `job.tasks` list".into()))?;
        let mut tasks = Vec::new();
        for t in tasks_v {
            let count = num(t, "container.count", index)?.unwrap_or(1);
            let (s, e) = (
                num(t, "container.start.ms", index)?.unwrap_or(0),
                num(t, "container.end.ms", index)?.unwrap_or(0),
            );
            if count < 0 || e < s {
                return Err(bad(
                    index,
                    format!("a task has a negative count or ends before it starts ({s}..{e})"),
                ));
            }
            let gpus = num(t, "container.gpus", index)?.unwrap_or(0);
            let vcores = num(t, "container.vcores", index)?.unwrap_or(1);
            let memory_mb = num(t, "container.memory", index)?.unwrap_or(1024);
            if gpus < 0 || vcores < 1 || memory_mb < 1 {
                return Err(bad(index, "a task's resources must be positive".into()));
            }
            if count > 0 {
                tasks.push(Tasks {
                    count: count.min(i64::from(u32::MAX)) as u32,
                    duration_ms: (e - s) as u64,
                    gpus,
                    vcores,
                    memory_mb,
                });
            }
        }
        if tasks.is_empty() {
            return Err(bad(index, "the job has no tasks".into()));
        }
        let text_of = |key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
        jobs.push(Job {
            line: index,
            id: text_of("job.id").unwrap_or_else(|| format!("job{index}")),
            submit_ms: (start - start0).max(0) as u64,
            user: user_name(&text_of("job.user").unwrap_or_else(|| d.user.clone()))
                .map_err(|p| bad(index, p.to_string()))?,
            queue: text_of("job.queue.name").unwrap_or_else(|| d.queue.clone()),
            priority: 0,
            tasks,
            shape: Shape::Independent,
            min_gpus: None,
            max_gpus: None,
            throughput: None,
            cpu_throughput: None,
        });
    }
    Ok(jobs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv(text: &str) -> Result<Vec<Job>, SlsError> {
        parse_csv(Path::new("t.csv"), text, &Defaults::default())
    }

    #[test]
    fn a_row_becomes_a_gang_of_one_gpu_containers() {
        let jobs =
            csv("submit_time,num_gpus,duration,extra\n0,8,60,x\n1.5,1,10,y\n").expect("test");
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[0].tasks[0].count, 8);
        assert_eq!(jobs[0].tasks[0].gpus, 1);
        assert!(jobs[0].is_gang());
        assert_eq!(jobs[1].submit_ms, 1500);
        assert!(!jobs[1].is_gang());
        assert_eq!(jobs[0].gpu_ms(), 8 * 60_000);
    }

    #[test]
    fn every_bad_row_is_named_with_its_line() {
        let err = csv(
            "submit_time,num_gpus,duration,gpus_per_container,placement\n\
             0,8,60,,\n\
             -1,1,10,,\n\
             0,x,10,,\n\
             0,6,10,4,\n\
             0,2,10,,DIAGONAL\n",
        )
        .expect_err("test");
        let SlsError::BadRows { rows, .. } = err else {
            panic!("{err}")
        };
        let lines: Vec<usize> = rows.iter().map(|r| r.line).collect();
        assert_eq!(lines, vec![3, 4, 5, 6]);
        assert!(matches!(
            rows[0].problem,
            RowProblem::Negative {
                column: "submit_time",
                ..
            }
        ));
        assert!(matches!(
            rows[1].problem,
            RowProblem::NotANumber {
                column: "num_gpus",
                ..
            }
        ));
        assert!(matches!(rows[2].problem, RowProblem::NotDivisible { .. }));
        assert!(matches!(rows[3].problem, RowProblem::UnknownPlacement(_)));
    }

    proptest::proptest! {
        /// No text makes the readers panic: a trace is parsed or refused with reasons.
        #[test]
        fn any_text_is_parsed_or_refused(body in "[0-9a-zA-Z,.\\-_ \n\"{}:\\[\\]]{0,400}") {
            let d = Defaults::default();
            let _ = parse_csv(Path::new("t.csv"), &format!("submit_time,num_gpus,duration,placement,gpus_per_container,min_gpus\n{body}"), &d);
            let _ = parse_csv(Path::new("t.csv"), &body, &d);
            let _ = parse_sls_json(Path::new("t.json"), &body, &d);
        }
    }

    #[test]
    fn a_missing_required_column_is_named() {
        let err = csv("submit_time,gpus,duration\n0,1,1\n").expect_err("test");
        assert!(
            matches!(
                err,
                SlsError::MissingColumn {
                    column: "num_gpus",
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn sls_json_jobs_have_independent_tasks() {
        let text = r#"{"job.start.ms": 1000, "job.end.ms": 5000, "job.queue.name": "a", "job.id": "j1",
            "job.tasks": [{"container.count": 3, "container.start.ms": 1000, "container.end.ms": 4000, "container.priority": 20}]}
            {"job.start.ms": 2000, "job.tasks": [{"container.start.ms": 2000, "container.end.ms": 2500, "container.gpus": 2}]}"#;
        let jobs = parse_sls_json(Path::new("t.json"), text, &Defaults::default()).expect("test");
        assert_eq!(jobs[0].submit_ms, 0);
        assert_eq!(jobs[0].queue, "a");
        assert_eq!(jobs[0].tasks[0].count, 3);
        assert_eq!(jobs[0].tasks[0].duration_ms, 3000);
        assert_eq!(jobs[1].submit_ms, 1000);
        assert_eq!(jobs[1].gpus(), 2);
        assert!(!jobs[1].is_gang());
    }
}
