//! `/ws/v1/cluster/accounting?from=&to=&groupBy=queue|user|application`: GPU-hours, lost
//! (preempted) GPU-hours, wall hours, memory GB-hours and vcore-hours per group over a
//! period, in the spirit of Slurm's `sreport`.
//!
//! Sources: the state store's usage records (one per finished application, kept beyond
//! `max-completed-applications`), and for applications not recorded yet (running, or final
//! with containers still live) the live figures, counted up to now.
//!
//! The rule for an application that overlaps the period only in part: its life is
//! `[startedTime, finishedTime]` (`now` while it runs) and its totals are spread evenly over
//! it, so it counts `overlap / life` of each total, and `overlap` as wall time. An
//! application whose life is a single instant counts whole when that instant is inside the
//! period.

use super::*;
use std::collections::BTreeMap;

use crate::store::UsageRecord;
use spindle_common::resource::GPU;

const MS_PER_HOUR: f64 = 3_600_000.0;
/// `from` when not given: this long before `to`.
pub(crate) const DEFAULT_PERIOD_MS: u64 = 24 * 3_600_000;

/// Why an accounting query is refused (400).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum AccountingParamError {
    #[error(
        "Invalid {param} '{value}': give milliseconds since the epoch or an ISO 8601 time such as 2026-11-01T00:00:00.000Z ({reason})"
    )]
    Time {
        param: &'static str,
        value: String,
        reason: String,
    },
    #[error("Invalid groupBy '{0}': give queue, user or application")]
    GroupBy(String),
    #[error("Invalid period: from ({from}) is after to ({to})")]
    Period { from: u64, to: u64 },
}

impl From<AccountingParamError> for ApiError {
    fn from(e: AccountingParamError) -> Self {
        ApiError::bad_request(e.to_string())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GroupBy {
    Queue,
    User,
    Application,
}

impl GroupBy {
    fn as_str(self) -> &'static str {
        match self {
            GroupBy::Queue => "queue",
            GroupBy::User => "user",
            GroupBy::Application => "application",
        }
    }
}

/// A parsed query: the period (ms since the epoch, both ends included) and the grouping.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AccountingQuery {
    pub from: u64,
    pub to: u64,
    pub group_by: GroupBy,
}

fn parse_time(param: &'static str, raw: &str) -> Result<u64, AccountingParamError> {
    let v = raw.trim();
    let bad = |reason: String| AccountingParamError::Time {
        param,
        value: raw.to_string(),
        reason,
    };
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
        return match v.parse::<i64>() {
            Ok(n) if n >= 0 => Ok(n as u64),
            Ok(_) => Err(bad("it is negative".into())),
            Err(e) => Err(bad(e.to_string())),
        };
    }
    spindle_common::time::parse_iso8601(v).map_err(|e| bad(e.reason.to_string()))
}

/// Parses `from`, `to` (ms or ISO 8601; `to` defaults to `now`, `from` to a day before
/// `to`) and `groupBy` (`queue` by default).
pub(crate) fn parse_query(
    q: &HashMap<String, String>,
    now: u64,
) -> Result<AccountingQuery, AccountingParamError> {
    let to = match q.get("to") {
        Some(v) => parse_time("to", v)?,
        None => now,
    };
    let from = match q.get("from") {
        Some(v) => parse_time("from", v)?,
        None => to.saturating_sub(DEFAULT_PERIOD_MS),
    };
    if from > to {
        return Err(AccountingParamError::Period { from, to });
    }
    let group_by = match q.get("groupBy").map(|g| g.trim().to_ascii_lowercase()) {
        None => GroupBy::Queue,
        Some(g) if g == "queue" => GroupBy::Queue,
        Some(g) if g == "user" => GroupBy::User,
        Some(g) if g == "application" || g == "app" => GroupBy::Application,
        Some(_) => {
            return Err(AccountingParamError::GroupBy(
                q.get("groupBy").cloned().unwrap_or_default(),
            ))
        }
    };
    Ok(AccountingQuery { from, to, group_by })
}

/// One application's usage, from the store or live.
#[derive(Debug, Clone)]
pub(crate) struct UsageRow {
    pub id: ApplicationId,
    pub user: String,
    pub queue: String,
    pub start: u64,
    pub end: u64,
    pub resource_ms: Resource,
    pub preempted_ms: Resource,
}

impl From<UsageRecord> for UsageRow {
    fn from(u: UsageRecord) -> Self {
        Self {
            id: u.id,
            user: u.user,
            queue: u.queue,
            start: u.start_time,
            end: u.finish_time,
            resource_ms: u.resource_ms,
            preempted_ms: u.preempted_ms,
        }
    }
}

/// The share of an application's life `[start, end]` inside `[from, to]`, and that
/// overlap in ms; `None` when they do not meet.
pub(crate) fn overlap(start: u64, end: u64, from: u64, to: u64) -> Option<(f64, u64)> {
    let end = end.max(start);
    if start > to || end < from {
        return None;
    }
    let ms = end.min(to).saturating_sub(start.max(from));
    let life = end - start;
    let share = if life == 0 {
        1.0
    } else {
        ms as f64 / life as f64
    };
    Some((share, ms))
}

/// The report over `rows` (each application once).
pub(crate) fn report(rows: &[UsageRow], q: &AccountingQuery) -> AccountingInfo {
    let mut groups: BTreeMap<String, AccountingGroup> = BTreeMap::new();
    let mut total = AccountingGroup {
        name: "TOTAL".into(),
        ..Default::default()
    };
    for r in rows {
        let Some((share, ms)) = overlap(r.start, r.end, q.from, q.to) else {
            continue;
        };
        let key = match q.group_by {
            GroupBy::Queue => r.queue.clone(),
            GroupBy::User => r.user.clone(),
            GroupBy::Application => r.id.to_string(),
        };
        let hours = |v: i64| v.max(0) as f64 * share / MS_PER_HOUR;
        let part = AccountingGroup {
            name: key.clone(),
            gpu_hours: hours(r.resource_ms.get(GPU)),
            lost_gpu_hours: hours(r.preempted_ms.get(GPU)),
            wall_hours: ms as f64 / MS_PER_HOUR,
            memory_gb_hours: hours(r.resource_ms.memory_mb) / 1024.0,
            vcore_hours: hours(r.resource_ms.vcores),
            apps: 1,
        };
        let g = groups
            .entry(key.clone())
            .or_insert_with(|| AccountingGroup {
                name: key,
                ..Default::default()
            });
        for acc in [g, &mut total] {
            acc.gpu_hours += part.gpu_hours;
            acc.lost_gpu_hours += part.lost_gpu_hours;
            acc.wall_hours += part.wall_hours;
            acc.memory_gb_hours += part.memory_gb_hours;
            acc.vcore_hours += part.vcore_hours;
            acc.apps += 1;
        }
    }
    let mut group: Vec<AccountingGroup> = groups.into_values().collect();
    group.sort_by(|a, b| {
        b.gpu_hours
            .total_cmp(&a.gpu_hours)
            .then_with(|| a.name.cmp(&b.name))
    });
    AccountingInfo {
        from: q.from,
        to: q.to,
        from_time: spindle_common::time::format_iso8601(q.from),
        to_time: spindle_common::time::format_iso8601(q.to),
        group_by: q.group_by.as_str().into(),
        group,
        total,
    }
}

/// The rows to report: the stored records, except that an application the snapshot holds
/// with containers still live, or still running, is taken live (its containers counted up
/// to `now`): its stored record, if any, is not final yet.
pub(crate) fn rows(stored: Vec<UsageRecord>, s: &Snapshot, now: u64) -> Vec<UsageRow> {
    let mut by_id: BTreeMap<ApplicationId, UsageRow> = stored
        .into_iter()
        .map(|u| (u.id, UsageRow::from(u)))
        .collect();
    let mut live: BTreeMap<ApplicationId, Vec<(&Resource, u64)>> = BTreeMap::new();
    for c in s.containers.values().filter(|c| c.is_live()) {
        live.entry(c.id.application_id())
            .or_default()
            .push((&c.resource, c.allocated_time));
    }
    for a in s.apps.values() {
        let mine = live.remove(&a.id).unwrap_or_default();
        if a.state.is_final() && mine.is_empty() {
            // Its last container has ended: the stored record is the final word (and when
            // the store did not return it, it lies outside the period).
            continue;
        }
        let usage = a.usage.with_live(mine, now);
        by_id.insert(
            a.id,
            UsageRow {
                id: a.id,
                user: a.sub.user.clone(),
                queue: a.queue.to_string(),
                start: a.submit_time,
                end: if a.finish_time > 0 {
                    a.finish_time
                } else {
                    now
                },
                resource_ms: usage.resource_ms,
                preempted_ms: usage.preempted_ms,
            },
        );
    }
    by_id.into_values().collect()
}

/// `GET /accounting`.
pub(super) async fn accounting(
    State(st): State<AppState>,
    Query(q): Q,
) -> Result<Json<AccountingBody>, ApiError> {
    let now = now_ms();
    let query = parse_query(&q, now)?;
    let (stored, snap) = st
        .driver
        .call(|reply| QueryCommand::Accounting {
            from: query.from,
            to: query.to,
            reply,
        })
        .await?;
    let rows = rows(stored, &snap, now);
    Ok(Json(AccountingBody {
        accounting: report(&rows, &query),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn params_take_ms_or_iso_8601_and_default_to_the_last_day_by_queue() {
        let now = 1_800_000_000_000;
        let d = parse_query(&q(&[]), now).unwrap();
        assert_eq!(
            (d.from, d.to, d.group_by),
            (now - DEFAULT_PERIOD_MS, now, GroupBy::Queue)
        );
        let p = parse_query(
            &q(&[
                ("from", "2026-11-01T00:00:00.000Z"),
                ("to", "1793491200000"),
                ("groupBy", "user"),
            ]),
            now,
        )
        .unwrap();
        assert_eq!(
            p.from,
            spindle_common::time::parse_iso8601("2026-11-01T00:00:00.000Z").unwrap()
        );
        assert_eq!((p.to, p.group_by), (1_793_491_200_000, GroupBy::User));
        assert_eq!(
            parse_query(&q(&[("groupBy", "application")]), now)
                .unwrap()
                .group_by,
            GroupBy::Application
        );
    }

    #[test]
    fn bad_params_are_refused_by_name() {
        let now = 1_000;
        assert!(matches!(
            parse_query(&q(&[("from", "yesterday")]), now),
            Err(AccountingParamError::Time { param: "from", .. })
        ));
        assert!(matches!(
            parse_query(&q(&[("to", "-5")]), now),
            Err(AccountingParamError::Time { param: "to", .. })
        ));
        assert_eq!(
            parse_query(&q(&[("groupBy", "node")]), now),
            Err(AccountingParamError::GroupBy("node".into()))
        );
        assert_eq!(
            parse_query(&q(&[("from", "10"), ("to", "5")]), now),
            Err(AccountingParamError::Period { from: 10, to: 5 })
        );
        let e = parse_query(&q(&[("from", "yesterday")]), now).unwrap_err();
        assert!(e.to_string().contains("Invalid from 'yesterday'"), "{e}");
    }

    fn row(id: u32, user: &str, queue: &str, start: u64, end: u64, gpus: i64) -> UsageRow {
        let life = (end - start) as i64;
        UsageRow {
            id: ApplicationId::new(1, id),
            user: user.into(),
            queue: queue.into(),
            start,
            end,
            resource_ms: Resource::new(1024 * life, 2 * life).with(GPU, gpus * life),
            preempted_ms: Resource::new(0, 0).with(GPU, gpus * life / 2),
        }
    }

    #[test]
    fn groups_sum_and_an_overlapping_app_counts_pro_rata() {
        const H: u64 = 3_600_000;
        let rows = vec![
            // alice: 4 GPUs for 2 h, all inside; 2 GPUs for 4 h, half inside.
            row(1, "alice", "root.a", 0, 2 * H, 4),
            row(2, "alice", "root.a", 8 * H, 12 * H, 2),
            // bob: 8 GPUs for 1 h inside; one app entirely after the period.
            row(3, "bob", "root.b", H, 2 * H, 8),
            row(4, "bob", "root.b", 11 * H, 12 * H, 8),
        ];
        let query = AccountingQuery {
            from: 0,
            to: 10 * H,
            group_by: GroupBy::User,
        };
        let r = report(&rows, &query);
        assert_eq!(r.group.len(), 2);
        let alice = r.group.iter().find(|g| g.name == "alice").unwrap();
        let bob = r.group.iter().find(|g| g.name == "bob").unwrap();
        assert!((alice.gpu_hours - (8.0 + 4.0)).abs() < 1e-9, "{alice:?}");
        assert!((alice.lost_gpu_hours - 6.0).abs() < 1e-9);
        assert!((alice.wall_hours - 4.0).abs() < 1e-9);
        assert!((alice.memory_gb_hours - 4.0).abs() < 1e-9);
        assert!((alice.vcore_hours - 8.0).abs() < 1e-9);
        assert_eq!(alice.apps, 2);
        assert!((bob.gpu_hours - 8.0).abs() < 1e-9);
        assert_eq!(bob.apps, 1);
        assert_eq!(r.group[0].name, "alice", "most GPU-hours first");
        assert!((r.total.gpu_hours - 20.0).abs() < 1e-9);
        assert_eq!(r.total.apps, 3);
        let by_app = report(
            &rows,
            &AccountingQuery {
                group_by: GroupBy::Application,
                ..query.clone()
            },
        );
        assert_eq!(by_app.group.len(), 3);
        let by_queue = report(
            &rows,
            &AccountingQuery {
                group_by: GroupBy::Queue,
                ..query
            },
        );
        assert_eq!(by_queue.group[0].name, "root.a");
    }

    #[test]
    fn extreme_periods_answer_without_overflow() {
        let huge = i64::MAX.to_string();
        let p = parse_query(&q(&[("from", "0"), ("to", &huge)]), 5).unwrap();
        let r = report(&[row(1, "a", "root.a", 0, 3_600_000, 1)], &p);
        assert!((r.total.gpu_hours - 1.0).abs() < 1e-9);
        assert!(r.to_time.ends_with("+0000"), "{}", r.to_time);
        assert!(matches!(
            parse_query(&q(&[("to", "99999999999999999999")]), 5),
            Err(AccountingParamError::Time { param: "to", .. })
        ));
    }

    #[test]
    fn overlap_edges() {
        assert_eq!(overlap(10, 20, 0, 9), None);
        assert_eq!(overlap(10, 20, 21, 30), None);
        assert_eq!(overlap(10, 20, 20, 30), Some((0.0, 0)));
        assert_eq!(overlap(10, 20, 0, 100), Some((1.0, 10)));
        assert_eq!(overlap(10, 20, 15, 100), Some((0.5, 5)));
        assert_eq!(
            overlap(10, 10, 0, 100),
            Some((1.0, 0)),
            "an instant inside counts whole"
        );
    }
}
