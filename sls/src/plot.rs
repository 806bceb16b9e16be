//! Charts of one run or several overlaid, as SVG: GPUs in use and GPUs pending over time
//! (`gpus.svg`), jobs waiting over time (`queue.svg`), and the CDF of job completion times
//! (`jct_cdf.svg`). Drawn with `plotters`; no fonts or system libraries are needed.

use std::path::Path;

use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::replay::Sample;
use crate::SlsError;

/// One run to draw.
pub struct Series<'a> {
    pub label: String,
    pub timeline: &'a [Sample],
    pub jct_s: &'a [f64],
    pub total_gpus: i64,
}

/// Points per line: enough for the eye, few enough for a small file.
const POINTS: usize = 1200;

/// One chart: a line per run, on linear or log-scaled x.
struct Chart<'a> {
    title: &'a str,
    x_desc: String,
    y_desc: &'a str,
    x: std::ops::Range<f64>,
    y_max: f64,
    log_x: bool,
    legend: SeriesLabelPosition,
    /// Per run: its label and its points.
    lines: Vec<(String, Vec<(f64, f64)>)>,
}

impl Chart<'_> {
    fn draw(self, area: &DrawingArea<SVGBackend<'_>, Shift>) -> DrawResult {
        let mut b = ChartBuilder::on(area);
        b.caption(self.title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(64);
        let y = 0f64..self.y_max;
        let (x, x_desc, y_desc, legend) = (self.x.clone(), self.x_desc, self.y_desc, self.legend);
        if self.log_x {
            let c = b.build_cartesian_2d(x.log_scale(), y)?;
            lines(c, &x_desc, y_desc, legend, self.lines)
        } else {
            let c = b.build_cartesian_2d(x, y)?;
            lines(c, &x_desc, y_desc, legend, self.lines)
        }
    }
}

/// The mesh, a line per run and the legend, on either kind of x axis.
fn lines<'a, X>(
    mut c: ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, RangedCoordf64>>,
    x_desc: &str,
    y_desc: &str,
    legend: SeriesLabelPosition,
    runs: Vec<(String, Vec<(f64, f64)>)>,
) -> DrawResult
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    c.configure_mesh().x_desc(x_desc).y_desc(y_desc).draw()?;
    for (i, (label, pts)) in runs.into_iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        c.draw_series(LineSeries::new(pts, color.stroke_width(2)))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
    }
    c.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(legend)
        .draw()?;
    Ok(())
}

/// Draws the three charts into `dir`.
pub fn draw(dir: &Path, runs: &[Series<'_>]) -> Result<(), SlsError> {
    let end_ms = runs
        .iter()
        .filter_map(|r| r.timeline.last().map(|s| s.t_ms))
        .max()
        .unwrap_or(0)
        .max(1);
    let (unit, per) = time_unit(end_ms);
    let x_end = end_ms as f64 / per;
    let buckets: Vec<Vec<[f64; 3]>> = runs.iter().map(|r| averaged(r.timeline, end_ms)).collect();
    // The line of figure `d` (0 used, 1 pending, 2 queued) of every run, and its largest value.
    let over_time = |d: usize, label: &dyn Fn(&Series<'_>) -> String| {
        let lines: Vec<(String, Vec<(f64, f64)>)> = runs
            .iter()
            .zip(&buckets)
            .map(|(r, b)| {
                let pts = b
                    .iter()
                    .enumerate()
                    .map(|(k, v)| ((k as f64 + 0.5) * x_end / POINTS as f64, v[d]))
                    .collect();
                (label(r), pts)
            })
            .collect();
        let max = buckets
            .iter()
            .flat_map(|b| b.iter().map(|v| v[d]))
            .fold(1.0, f64::max);
        (lines, max)
    };
    let timed =
        |title, y_desc, d: usize, y_max: Option<f64>, label: &dyn Fn(&Series<'_>) -> String| {
            let (lines, max) = over_time(d, label);
            Chart {
                title,
                x_desc: format!("time ({unit})"),
                y_desc,
                x: 0f64..x_end,
                y_max: y_max.unwrap_or(max) * 1.05,
                log_x: false,
                legend: SeriesLabelPosition::UpperRight,
                lines,
            }
        };
    let plain = |r: &Series<'_>| r.label.clone();
    let max_gpus = runs.iter().map(|r| r.total_gpus).max().unwrap_or(1).max(1) as f64;
    svg(&dir.join("gpus.svg"), (1000, 720), |root| {
        let (top, bottom) = root.split_vertically(360);
        let mut used = timed("GPUs in use", "GPUs", 0, Some(max_gpus), &|r| {
            format!("{} (of {} GPUs)", r.label, r.total_gpus)
        });
        used.legend = SeriesLabelPosition::LowerRight;
        used.draw(&top)?;
        timed(
            "GPUs pending (asked for, not yet granted)",
            "GPUs",
            1,
            None,
            &plain,
        )
        .draw(&bottom)
    })?;
    svg(&dir.join("queue.svg"), (1000, 400), |root| {
        timed("Jobs waiting to start", "jobs", 2, None, &plain).draw(root)
    })?;
    let all_jct = || runs.iter().flat_map(|r| r.jct_s.iter().copied());
    let lo = all_jct().fold(f64::MAX, f64::min).max(0.1);
    let hi = all_jct().fold(1.0f64, f64::max).max(lo * 10.0);
    let lines = runs
        .iter()
        .filter(|r| !r.jct_s.is_empty())
        .map(|r| {
            let mut v: Vec<f64> = r.jct_s.to_vec();
            v.sort_by(f64::total_cmp);
            let n = v.len();
            let pts = (0..n)
                .step_by(n.div_ceil(POINTS).max(1))
                .chain(std::iter::once(n - 1))
                .map(|k| (v[k].max(lo), (k + 1) as f64 / n as f64))
                .collect();
            (r.label.clone(), pts)
        })
        .collect();
    svg(&dir.join("jct_cdf.svg"), (1000, 480), |root| {
        Chart {
            title: "Job completion time, CDF",
            x_desc: "completion time (s, log scale)".into(),
            y_desc: "fraction of jobs",
            x: lo..hi * 1.1,
            y_max: 1.0,
            log_x: true,
            legend: SeriesLabelPosition::LowerRight,
            lines,
        }
        .draw(root)
    })
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

fn svg(
    path: &Path,
    size: (u32, u32),
    f: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> DrawResult,
) -> Result<(), SlsError> {
    let fail = |reason: String| SlsError::Plot {
        path: path.to_path_buf(),
        reason,
    };
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(e.to_string()))?;
    f(&root).map_err(|e| fail(e.to_string()))?;
    root.present().map_err(|e| fail(e.to_string()))
}

/// The best unit for a time axis, and milliseconds per unit.
fn time_unit(end_ms: u64) -> (&'static str, f64) {
    match end_ms {
        t if t > 3 * 86_400_000 => ("days", 86_400_000.0),
        t if t > 3 * 3_600_000 => ("hours", 3_600_000.0),
        t if t > 3 * 60_000 => ("minutes", 60_000.0),
        _ => ("seconds", 1000.0),
    }
}

/// The step function's time-weighted mean of (used, pending, queued) in each of `POINTS`
/// equal buckets up to `end_ms`.
fn averaged(timeline: &[Sample], end_ms: u64) -> Vec<[f64; 3]> {
    let width = end_ms as f64 / POINTS as f64;
    let mut out = vec![[0.0f64; 3]; POINTS];
    for (i, s) in timeline.iter().enumerate() {
        let from = s.t_ms as f64;
        let to = timeline.get(i + 1).map_or(end_ms as f64, |n| n.t_ms as f64);
        if to <= from {
            continue;
        }
        let v = [
            s.used_gpus as f64,
            s.pending_gpus as f64,
            f64::from(s.queued_jobs),
        ];
        let (mut a, b) = (from, to.min(end_ms as f64));
        // Walk the buckets the interval covers, each taking its own part of it.
        let mut k = ((a / width) as usize).min(POINTS - 1);
        while a < b && k < POINTS {
            let edge = if k == POINTS - 1 {
                b
            } else {
                ((k + 1) as f64 * width).min(b)
            };
            if edge > a {
                for d in 0..3 {
                    out[k][d] += v[d] * (edge - a) / width;
                }
                a = edge;
            }
            k += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_means_weigh_time() {
        let tl = [
            Sample {
                t_ms: 0,
                used_gpus: 8,
                pending_gpus: 0,
                queued_jobs: 0,
                running_jobs: 1,
            },
            Sample {
                t_ms: 600,
                used_gpus: 0,
                pending_gpus: 0,
                queued_jobs: 0,
                running_jobs: 0,
            },
        ];
        let b = averaged(&tl, 1200);
        assert!((b[0][0] - 8.0).abs() < 1e-9);
        assert!(b[POINTS - 1][0].abs() < 1e-9);
        let total: f64 = b.iter().map(|v| v[0]).sum::<f64>() / POINTS as f64;
        assert!((total - 4.0).abs() < 1e-6, "{total}");
    }

    #[test]
    fn bucket_means_never_exceed_the_largest_value() {
        // Odd times that fall near bucket edges in floating point.
        let tl: Vec<Sample> = (0..5000u64)
            .map(|i| Sample {
                t_ms: i * 997 + (i % 7) * 13,
                used_gpus: (i % 9) as i64,
                pending_gpus: 0,
                queued_jobs: 0,
                running_jobs: 0,
            })
            .collect();
        let end = tl.last().map_or(1, |s| s.t_ms) + 333;
        for b in averaged(&tl, end) {
            assert!(b[0] <= 8.0 + 1e-6, "{}", b[0]);
        }
    }

    #[test]
    fn charts_are_written() {
        let dir = tempfile::tempdir().expect("test");
        let tl = [Sample {
            t_ms: 0,
            used_gpus: 4,
            pending_gpus: 2,
            queued_jobs: 1,
            running_jobs: 1,
        }];
        draw(
            dir.path(),
            &[Series {
                label: "capacity".into(),
                timeline: &tl,
                jct_s: &[1.0, 10.0, 100.0],
                total_gpus: 8,
            }],
        )
        .expect("test");
        for f in ["gpus.svg", "queue.svg", "jct_cdf.svg"] {
            let text = std::fs::read_to_string(dir.path().join(f)).expect("test");
            assert!(text.starts_with("<svg"), "{f}");
            assert!(text.contains("capacity"), "{f} has its legend");
        }
    }
}
