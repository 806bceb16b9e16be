//! A replay's output directory: `summary.json` (the figures), `jobs.csv` (each job's
//! submit, start and finish), `timeline.csv` (GPUs used and pending, jobs queued and
//! running, over time) and `settings.txt` (what the run changed in the configuration).
//! Everything but the wall-clock figures is a function of the trace, the configuration
//! and the seed: two runs give the same bytes.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::fairness::Fairness;
use crate::replay::{Outcome, RunResult, Sample};
use crate::trace::Job;
use crate::SlsError;

/// Completion and queueing figures for a set of jobs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Split {
    pub jobs: usize,
    pub avg_jct_s: f64,
    pub p50_jct_s: f64,
    pub p95_jct_s: f64,
    pub p99_jct_s: f64,
    pub avg_queue_s: f64,
    pub p99_queue_s: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub policy: String,
    pub trace: String,
    pub nodes: usize,
    pub gpus: i64,
    /// Jobs in the trace.
    pub jobs: usize,
    pub finished: usize,
    pub rejected: usize,
    pub timed_out: usize,
    pub failed: usize,
    pub unfinished: usize,
    /// Over finished jobs: completion time (finish - submit) and queueing (start - submit).
    pub avg_jct_s: f64,
    pub p50_jct_s: f64,
    pub p95_jct_s: f64,
    pub p99_jct_s: f64,
    pub avg_queue_s: f64,
    pub p99_queue_s: f64,
    /// The same for jobs of at most one GPU, and of more.
    pub single_gpu: Split,
    pub multi_gpu: Split,
    /// From the trace's start to the last completion.
    pub makespan_s: f64,
    /// GPU-seconds busy over GPU-seconds available until the last completion.
    pub gpu_utilization: f64,
    pub gpu_seconds_used: f64,
    /// What the trace's jobs need at their size.
    pub gpu_seconds_trace: f64,
    /// Units (gangs, or single containers) the RM took back.
    pub preemptions: u64,
    /// GPU-seconds of work lost to preemption (since each victim's last checkpoint), and
    /// that as a share of the GPU-seconds used.
    #[serde(default)]
    pub lost_gpu_seconds: f64,
    #[serde(default)]
    pub lost_fraction: f64,
    /// From a notice to the victim's exit: the mean and the longest, in seconds.
    #[serde(default)]
    pub notice_to_exit_avg_s: f64,
    #[serde(default)]
    pub notice_to_exit_max_s: f64,
    pub resizes: u64,
    /// Users' decayed GPU usage against their shares (see [`crate::fairness`]).
    #[serde(default)]
    pub fairness: Fairness,
    /// With CPU-sensitive jobs: GPU nodes' vcore-seconds held over available, and the
    /// share of GPU-seconds stranded (free GPUs on nodes with no free vcore).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_utilization: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus_stranded: Option<f64>,
    /// With CPU-sensitive jobs: of the GPU-seconds they held, the share their GPUs computed
    /// (a job below its curve's peak throughput keeps its GPUs waiting on input CPUs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_busy: Option<f64>,
    /// Second and later AM attempts.
    pub restarts: u64,
    /// Core calls that ran a scheduling pass.
    pub scheduler_decisions: u64,
    /// Wall-clock figures (`null` with `--no-timing`, which makes two runs byte-identical).
    pub decision_p50_us: Option<f64>,
    pub decision_p99_us: Option<f64>,
    pub wall_s: Option<f64>,
}

/// Rounds to milliseconds' precision, so that figures print the same way everywhere.
fn r3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn secs(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

/// Nearest-rank percentile of sorted values.
fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn split<'a>(pairs: impl Iterator<Item = (&'a Job, u64, u64)>) -> Split {
    let mut jct = Vec::new();
    let mut queue = Vec::new();
    for (job, start, finish) in pairs {
        jct.push(secs(finish.saturating_sub(job.submit_ms)));
        queue.push(secs(start.saturating_sub(job.submit_ms)));
    }
    jct.sort_by(f64::total_cmp);
    queue.sort_by(f64::total_cmp);
    let avg = |v: &[f64]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    Split {
        jobs: jct.len(),
        avg_jct_s: r3(avg(&jct)),
        p50_jct_s: r3(pct(&jct, 0.50)),
        p95_jct_s: r3(pct(&jct, 0.95)),
        p99_jct_s: r3(pct(&jct, 0.99)),
        avg_queue_s: r3(avg(&queue)),
        p99_queue_s: r3(pct(&queue, 0.99)),
    }
}

/// What the run was, for the summary's header fields.
pub struct Labels<'a> {
    pub policy: &'a str,
    pub trace: &'a str,
    pub nodes: usize,
    pub timing: bool,
}

pub fn summarize(jobs: &[Job], run: &RunResult, l: &Labels<'_>) -> Summary {
    let finished: Vec<(&Job, u64, u64)> = jobs
        .iter()
        .zip(&run.jobs)
        .filter(|(_, r)| r.outcome == Outcome::Finished)
        .filter_map(|(j, r)| Some((j, r.start_ms?, r.finish_ms?)))
        .collect();
    let all = split(finished.iter().copied());
    let single = split(finished.iter().copied().filter(|(j, _, _)| j.gpus() <= 1));
    let multi = split(finished.iter().copied().filter(|(j, _, _)| j.gpus() > 1));
    let count = |label: &str| {
        run.jobs
            .iter()
            .filter(|r| r.outcome.label() == label)
            .count()
    };
    let makespan_ms = run
        .jobs
        .iter()
        .filter_map(|r| r.finish_ms)
        .max()
        .unwrap_or(0);
    let used_ms: u128 = run.jobs.iter().map(|r| r.gpu_ms_used).sum();
    let trace_ms: u128 = jobs.iter().map(Job::gpu_ms).sum();
    let available = run.total_gpus.max(0) as f64 * secs(makespan_ms);
    let mut lat: Vec<f64> = run.latencies_us.iter().map(|u| f64::from(*u)).collect();
    lat.sort_by(f64::total_cmp);
    let lat_pct = |p: f64| pct(&lat, p);
    Summary {
        policy: l.policy.to_string(),
        trace: l.trace.to_string(),
        nodes: l.nodes,
        gpus: run.total_gpus,
        jobs: jobs.len(),
        finished: finished.len(),
        rejected: count("REJECTED"),
        timed_out: count("TIMED_OUT"),
        failed: count("FAILED"),
        unfinished: count("UNFINISHED"),
        avg_jct_s: all.avg_jct_s,
        p50_jct_s: all.p50_jct_s,
        p95_jct_s: all.p95_jct_s,
        p99_jct_s: all.p99_jct_s,
        avg_queue_s: all.avg_queue_s,
        p99_queue_s: all.p99_queue_s,
        single_gpu: single,
        multi_gpu: multi,
        makespan_s: r3(secs(makespan_ms)),
        gpu_utilization: if available > 0.0 {
            (used_ms as f64 / 1000.0 / available * 1e6).round() / 1e6
        } else {
            0.0
        },
        gpu_seconds_used: r3(used_ms as f64 / 1000.0),
        gpu_seconds_trace: r3(trace_ms as f64 / 1000.0),
        preemptions: run.preemptions,
        lost_gpu_seconds: r3(run.lost_gpu_ms as f64 / 1000.0),
        lost_fraction: if used_ms > 0 {
            (run.lost_gpu_ms as f64 / used_ms as f64 * 1e6).round() / 1e6
        } else {
            0.0
        },
        notice_to_exit_avg_s: if run.notice_to_exit_ms.is_empty() {
            0.0
        } else {
            r3(run.notice_to_exit_ms.iter().sum::<u64>() as f64
                / run.notice_to_exit_ms.len() as f64
                / 1000.0)
        },
        notice_to_exit_max_s: r3(secs(
            run.notice_to_exit_ms.iter().copied().max().unwrap_or(0),
        )),
        resizes: run.resizes,
        fairness: run.fairness.clone(),
        cpu_utilization: run.cpu.map(|c| c.utilization),
        gpus_stranded: run.cpu.map(|c| c.gpus_stranded),
        gpu_busy: run.cpu.map(|c| c.gpu_busy),
        restarts: run.restarts,
        scheduler_decisions: run.decisions,
        decision_p50_us: l.timing.then(|| lat_pct(0.50)),
        decision_p99_us: l.timing.then(|| lat_pct(0.99)),
        wall_s: l.timing.then(|| r3(run.wall_s)),
    }
}

fn create(path: &Path) -> Result<std::io::BufWriter<std::fs::File>, SlsError> {
    std::fs::File::create(path)
        .map(std::io::BufWriter::new)
        .map_err(|source| SlsError::Write {
            path: path.to_path_buf(),
            source,
        })
}

fn write_err(path: &Path) -> impl Fn(std::io::Error) -> SlsError + '_ {
    move |source| SlsError::Write {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes `summary.json`, `jobs.csv`, `timeline.csv` and `settings.txt` into `dir`.
pub fn write(
    dir: &Path,
    jobs: &[Job],
    run: &RunResult,
    summary: &Summary,
    settings: &[(String, String)],
) -> Result<(), SlsError> {
    std::fs::create_dir_all(dir).map_err(write_err(dir))?;
    let p = dir.join("summary.json");
    let mut f = create(&p)?;
    serde_json::to_writer_pretty(&mut f, summary)
        .map_err(|e| write_err(&p)(std::io::Error::other(e)))?;
    writeln!(f)
        .and_then(|()| f.flush())
        .map_err(write_err(&p))?;

    let p = dir.join("jobs.csv");
    let mut w = csv::Writer::from_writer(create(&p)?);
    let csv_err = |p: &Path, e: csv::Error| write_err(p)(std::io::Error::other(e));
    w.write_record([
        "job_id",
        "queue",
        "user",
        "gpus",
        "containers",
        "submit_s",
        "start_s",
        "finish_s",
        "queue_s",
        "jct_s",
        "nodes",
        "outcome",
        "preemptions",
        "lost_gpu_s",
        "reason",
    ])
    .map_err(|e| csv_err(&p, e))?;
    let opt = |v: Option<u64>| v.map(|ms| format!("{:.3}", secs(ms))).unwrap_or_default();
    for (j, r) in jobs.iter().zip(&run.jobs) {
        let reason = match &r.outcome {
            Outcome::Rejected(s)
            | Outcome::TimedOut(s)
            | Outcome::Failed(s)
            | Outcome::Unfinished(s) => s.clone(),
            Outcome::Finished => String::new(),
        };
        let queue_s = r.start_ms.map(|s| s.saturating_sub(j.submit_ms));
        let jct_s = r.finish_ms.map(|f| f.saturating_sub(j.submit_ms));
        w.write_record([
            j.id.clone(),
            j.queue.clone(),
            j.user.clone(),
            j.gpus().to_string(),
            j.containers().to_string(),
            format!("{:.3}", secs(j.submit_ms)),
            opt(r.start_ms),
            opt(r.finish_ms),
            opt(queue_s),
            opt(jct_s),
            r.nodes.iter().cloned().collect::<Vec<_>>().join(";"),
            r.outcome.label().to_string(),
            r.preemptions.to_string(),
            format!("{:.3}", r.lost_gpu_ms as f64 / 1000.0),
            reason,
        ])
        .map_err(|e| csv_err(&p, e))?;
    }
    w.flush().map_err(write_err(&p))?;

    let p = dir.join("timeline.csv");
    let mut f = create(&p)?;
    let mut text = String::from("t_s,used_gpus,pending_gpus,queued_jobs,running_jobs\n");
    for s in &run.timeline {
        text.push_str(&format!(
            "{:.3},{},{},{},{}\n",
            secs(s.t_ms),
            s.used_gpus,
            s.pending_gpus,
            s.queued_jobs,
            s.running_jobs
        ));
    }
    f.write_all(text.as_bytes())
        .and_then(|()| f.flush())
        .map_err(write_err(&p))?;

    let p = dir.join("settings.txt");
    let mut f = create(&p)?;
    let mut text = String::from(
        "# Settings this run filled in or changed, in order, over the --conf-dir files\n",
    );
    for (k, v) in settings {
        text.push_str(&format!("{k}={v}\n"));
    }
    f.write_all(text.as_bytes())
        .and_then(|()| f.flush())
        .map_err(write_err(&p))?;
    Ok(())
}

/// A finished run read back from its directory (for `compare`).
#[derive(Debug, Clone)]
pub struct Stored {
    pub dir: PathBuf,
    pub summary: Summary,
    /// Completion times of finished jobs, in seconds.
    pub jct_s: Vec<f64>,
    pub timeline: Vec<Sample>,
}

pub fn read(dir: &Path) -> Result<Stored, SlsError> {
    let not = |reason: String| SlsError::NotAnOutput {
        path: dir.to_path_buf(),
        reason,
    };
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name)).map_err(|e| not(format!("{name}: {e}")))
    };
    let summary: Summary = serde_json::from_str(&read("summary.json")?)
        .map_err(|e| not(format!("summary.json: {e}")))?;
    let text = read("jobs.csv")?;
    let mut rdr = csv::Reader::from_reader(text.as_bytes());
    let jct_col = rdr
        .headers()
        .ok()
        .and_then(|h| h.iter().position(|c| c == "jct_s"))
        .ok_or_else(|| not("jobs.csv has no jct_s column".into()))?;
    let mut jct_s = Vec::new();
    for rec in rdr.records() {
        let rec = rec.map_err(|e| not(format!("jobs.csv: {e}")))?;
        if let Some(v) = rec.get(jct_col).and_then(|v| v.parse::<f64>().ok()) {
            jct_s.push(v);
        }
    }
    let mut timeline = Vec::new();
    for (i, line) in read("timeline.csv")?.lines().enumerate().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let bad = || not(format!("timeline.csv line {}: '{line}'", i + 1));
        if f.len() != 5 {
            return Err(bad());
        }
        let t: f64 = f[0].parse().map_err(|_| bad())?;
        let n = |k: usize| f[k].parse::<i64>().map_err(|_| bad());
        timeline.push(Sample {
            t_ms: (t * 1000.0).round() as u64,
            used_gpus: n(1)?,
            pending_gpus: n(2)?,
            queued_jobs: n(3)?.max(0) as u32,
            running_jobs: n(4)?.max(0) as u32,
        });
    }
    Ok(Stored {
        dir: dir.to_path_buf(),
        summary,
        jct_s,
        timeline,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(pct(&v, 0.5), 50.0);
        assert_eq!(pct(&v, 0.99), 99.0);
        assert_eq!(pct(&[7.0], 0.99), 7.0);
        assert_eq!(pct(&[], 0.5), 0.0);
    }
}
