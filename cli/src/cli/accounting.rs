//! `spindle accounting`: GPU-hours, lost (preempted) GPU-hours, wall hours, memory GB-hours
//! and vcore-hours per queue, user or application over a period, as a table in the spirit of
//! Slurm's `sreport` (the RM's `GET /ws/v1/cluster/accounting`).

use anyhow::Context;
use spindle_common::records::cluster::{AccountingGroup, AccountingInfo};

use spindle_common::localtime::{format_local, parse_local};

use super::args::{Opt, Parsed, UsageError};
use super::{parse_or_usage, rm_client, usage_error, EXIT_OK};

pub const USAGE: &str = "\
usage: spindle accounting [-from T] [-to T] [-groupBy queue|user|application]
                          [--rm-address HOST:PORT] [--conf-dir DIR]
  -from T      start of the period: a date (2026-11-28, local midnight), a local date
               and time (2026-11-28T14:05[:09]), ISO 8601 with a zone
               (2026-11-28T14:05:09+01:00, ...Z) or ms since the epoch; default 24 hours
               before -to
  -to T        end of the period, in the same forms; default now
  -groupBy G   queue (full path; default), user or application

Finished applications come from the RM's state store (kept after the RM forgets them);
running ones count up to now. An application that overlaps the period in part counts
pro rata (its totals spread evenly over its life). LOST-GPU-HOURS are those of preempted
containers.";

pub const OPTS: &[Opt] = &[
    Opt::one("from", &["start"]),
    Opt::one("to", &["end"]),
    Opt::one("groupBy", &["group-by", "g"]),
];

const GROUPS: [&str; 3] = ["queue", "user", "application"];

/// The report as a table: a header with the period, then one row per group and a total
/// (hours with four decimals: a GPU-second is 0.0003).
pub fn format_report(r: &AccountingInfo) -> String {
    let header = [
        "GROUP",
        "GPU-HOURS",
        "LOST-GPU-HOURS",
        "WALL-HOURS",
        "MEM-GB-HOURS",
        "VCORE-HOURS",
        "APPS",
    ];
    let row = |g: &AccountingGroup| -> Vec<String> {
        vec![
            g.name.clone(),
            format!("{:.4}", g.gpu_hours),
            format!("{:.4}", g.lost_gpu_hours),
            format!("{:.4}", g.wall_hours),
            format!("{:.4}", g.memory_gb_hours),
            format!("{:.4}", g.vcore_hours),
            g.apps.to_string(),
        ]
    };
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
    rows.extend(r.group.iter().map(row));
    let mut total = row(&r.total);
    total[0] = "TOTAL".into();
    rows.push(total);
    let widths: Vec<usize> = (0..header.len())
        .map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0))
        .collect();
    let line = |r: &[String]| -> String {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == 0 {
                    format!("{c:<w$}", w = widths[i])
                } else {
                    format!("{c:>w$}", w = widths[i])
                }
            })
            .collect();
        cells.join("  ").trim_end().to_string()
    };
    let width = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
    let rule = "-".repeat(width);
    let mut out = String::new();
    out.push_str(&format!("{rule}\n"));
    out.push_str(&format!(
        "Cluster usage by {} {} - {}\n",
        r.group_by,
        format_local(r.from),
        format_local(r.to)
    ));
    out.push_str("Usage reported in hours; memory in GB-hours\n");
    out.push_str(&format!("{rule}\n"));
    let n = rows.len();
    for (i, rw) in rows.iter().enumerate() {
        if i == n - 1 {
            out.push_str(&format!("{rule}\n"));
        }
        out.push_str(&line(rw));
        out.push('\n');
    }
    out
}

/// `-from`/`-to` as ms since the epoch, read here (dates and local times included) so that
/// the RM gets one unambiguous form.
fn period_end(p: &Parsed, option: &'static str) -> anyhow::Result<Option<String>> {
    p.value(option)
        .map(|v| {
            parse_local(v).map(|ms| ms.to_string()).map_err(|e| {
                usage_error(
                    UsageError::Invalid {
                        option,
                        value: v.to_string(),
                        reason: e.to_string(),
                    },
                    USAGE,
                )
            })
        })
        .transpose()
}

pub async fn run(args: Vec<String>) -> anyhow::Result<u8> {
    let Some(p) = parse_or_usage(&args, OPTS, USAGE)? else {
        return Ok(EXIT_OK);
    };
    let group_by = p.value("groupBy");
    if let Some(g) = group_by {
        if !GROUPS.contains(&g.to_ascii_lowercase().as_str()) {
            return Err(usage_error(
                UsageError::Other(format!(
                    "invalid -groupBy '{g}': give queue, user or application"
                )),
                USAGE,
            ));
        }
    }
    let from = period_end(&p, "from")?;
    let to = period_end(&p, "to")?;
    let rm = rm_client(&p)?;
    let r = rm
        .accounting(from.as_deref(), to.as_deref(), group_by)
        .await
        .with_context(|| format!("cannot read the accounting report at {}", rm.address()))?;
    say_raw!("{}", format_report(&r));
    Ok(EXIT_OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_sreport_like_table_with_the_period_and_a_total() {
        let g = |name: &str, gpu: f64, apps: u64| AccountingGroup {
            name: name.into(),
            gpu_hours: gpu,
            lost_gpu_hours: gpu / 4.0,
            wall_hours: 1.5,
            memory_gb_hours: 12.25,
            vcore_hours: 3.0,
            apps,
        };
        let r = AccountingInfo {
            from: 1,
            to: 3_600_000,
            from_time: "1970-01-01T00:00:00.000+0000".into(),
            to_time: "1970-01-01T01:00:00.000+0000".into(),
            group_by: "user".into(),
            group: vec![g("alice", 8.0, 2), g("bob", 2.0, 1)],
            total: g("", 10.0, 3),
        };
        let out = format_report(&r);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[1],
            format!(
                "Cluster usage by user {} - {}",
                format_local(1),
                format_local(3_600_000)
            )
        );
        assert_eq!(
            lines[4].split_whitespace().collect::<Vec<_>>(),
            [
                "GROUP",
                "GPU-HOURS",
                "LOST-GPU-HOURS",
                "WALL-HOURS",
                "MEM-GB-HOURS",
                "VCORE-HOURS",
                "APPS"
            ]
        );
        assert_eq!(
            lines[5].split_whitespace().collect::<Vec<_>>(),
            ["alice", "8.0000", "2.0000", "1.5000", "12.2500", "3.0000", "2"]
        );
        assert_eq!(lines[6].split_whitespace().next(), Some("bob"));
        assert!(lines[7].starts_with("----"));
        assert_eq!(
            lines[8].split_whitespace().collect::<Vec<_>>(),
            ["TOTAL", "10.0000", "2.5000", "1.5000", "12.2500", "3.0000", "3"]
        );
        // Columns line up: every row's GPU-HOURS ends where the header's does.
        let end = lines[4].find("GPU-HOURS").unwrap() + "GPU-HOURS".len();
        assert_eq!(&lines[5][end - 6..end], "8.0000");
    }
}
