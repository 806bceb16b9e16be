//! `spindle sls compare DIR...`: several runs' figures side by side, and their charts
//! overlaid.

use std::path::Path;

use crate::plot::{self, Series};
use crate::report::{self, Stored};
use crate::SlsError;

/// Reads each run's output directory.
pub fn load(dirs: &[&Path]) -> Result<Vec<Stored>, SlsError> {
    dirs.iter().map(|d| report::read(d)).collect()
}

/// A run's label: its directory's name, and its policy when that says more.
pub fn label(s: &Stored) -> String {
    let name = s
        .dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| s.dir.display().to_string());
    if name.contains(&s.summary.policy) {
        name
    } else {
        format!("{name} ({})", s.summary.policy)
    }
}

/// The table: one row a figure, one column a run.
pub fn table(runs: &[Stored]) -> String {
    let labels: Vec<String> = runs.iter().map(label).collect();
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.0}"));
    type Row = (&'static str, Box<dyn Fn(&Stored) -> String>);
    let rows: Vec<Row> = vec![
        ("jobs", Box::new(|s| s.summary.jobs.to_string())),
        ("finished", Box::new(|s| s.summary.finished.to_string())),
        (
            "avg JCT (s)",
            Box::new(|s| format!("{:.1}", s.summary.avg_jct_s)),
        ),
        (
            "p50 JCT (s)",
            Box::new(|s| format!("{:.1}", s.summary.p50_jct_s)),
        ),
        (
            "p95 JCT (s)",
            Box::new(|s| format!("{:.1}", s.summary.p95_jct_s)),
        ),
        (
            "p99 JCT (s)",
            Box::new(|s| format!("{:.1}", s.summary.p99_jct_s)),
        ),
        (
            "avg queue (s)",
            Box::new(|s| format!("{:.1}", s.summary.avg_queue_s)),
        ),
        (
            "p99 queue (s)",
            Box::new(|s| format!("{:.1}", s.summary.p99_queue_s)),
        ),
        (
            "1-GPU avg JCT (s)",
            Box::new(|s| format!("{:.1}", s.summary.single_gpu.avg_jct_s)),
        ),
        (
            "multi-GPU avg JCT (s)",
            Box::new(|s| format!("{:.1}", s.summary.multi_gpu.avg_jct_s)),
        ),
        (
            "multi-GPU avg queue (s)",
            Box::new(|s| format!("{:.1}", s.summary.multi_gpu.avg_queue_s)),
        ),
        (
            "makespan (s)",
            Box::new(|s| format!("{:.0}", s.summary.makespan_s)),
        ),
        (
            "GPU utilization",
            Box::new(|s| format!("{:.1}%", s.summary.gpu_utilization * 100.0)),
        ),
        (
            "GPUs computing while held (CPU-sensitive jobs)",
            Box::new(|s| {
                s.summary
                    .gpu_busy
                    .map_or("-".into(), |b| format!("{:.1}%", b * 100.0))
            }),
        ),
        (
            "Jain index (usage/share)",
            Box::new(|s| {
                s.summary
                    .fairness
                    .jain_index
                    .map_or("-".into(), |j| format!("{j:.3}"))
            }),
        ),
        (
            "time to share (s)",
            Box::new(|s| {
                s.summary
                    .fairness
                    .time_to_share_s
                    .map_or("-".into(), |t| format!("{t:.0}"))
            }),
        ),
        (
            "preemptions",
            Box::new(|s| s.summary.preemptions.to_string()),
        ),
        (
            "lost GPU-hours",
            Box::new(|s| format!("{:.1}", s.summary.lost_gpu_seconds / 3600.0)),
        ),
        (
            "lost / used",
            Box::new(|s| format!("{:.2}%", s.summary.lost_fraction * 100.0)),
        ),
        (
            "decisions",
            Box::new(|s| s.summary.scheduler_decisions.to_string()),
        ),
        (
            "decision p99 (us)",
            Box::new(move |s| opt(s.summary.decision_p99_us)),
        ),
        (
            "wall (s)",
            Box::new(|s| s.summary.wall_s.map_or("-".into(), |w| format!("{w:.1}"))),
        ),
    ];
    let first = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    let widths: Vec<usize> = labels
        .iter()
        .enumerate()
        .map(|(i, l)| {
            rows.iter()
                .map(|r| (r.1)(&runs[i]).len())
                .chain(std::iter::once(l.len()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = format!("{:first$}", "");
    for (l, w) in labels.iter().zip(&widths) {
        out.push_str(&format!("  {l:>w$}"));
    }
    out.push('\n');
    for (name, f) in &rows {
        out.push_str(&format!("{name:first$}"));
        for (s, w) in runs.iter().zip(&widths) {
            out.push_str(&format!("  {:>w$}", f(s)));
        }
        out.push('\n');
    }
    out
}

/// Draws the runs' charts overlaid into `out`.
pub fn draw(out: &Path, runs: &[Stored]) -> Result<(), SlsError> {
    std::fs::create_dir_all(out).map_err(|source| SlsError::Write {
        path: out.to_path_buf(),
        source,
    })?;
    let series: Vec<Series<'_>> = runs
        .iter()
        .map(|s| Series {
            label: label(s),
            timeline: &s.timeline,
            jct_s: &s.jct_s,
            total_gpus: s.summary.gpus,
        })
        .collect();
    plot::draw(out, &series)
}
