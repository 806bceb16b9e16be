//! `spindle queue -fairshare` (Slurm's `sshare -l`: per queue and user, shares, raw and
//! decayed usage, the fair-share factor) and `spindle application -priority` (Slurm's
//! `sprio`: the factors of one application's place in its `fairshare` leaf).

use std::fmt::Write as _;

use spindle_common::records::cluster::{AppInfo, CapacitySchedulerQueueInfo, UserFairShareInfo};

/// Usage in billing-unit-seconds, one decimal.
fn usage(v: f64) -> String {
    format!("{v:.1}")
}

/// Fair Tree's level fair share; `inf` for a user without usage.
fn level_fs(u: &UserFairShareInfo) -> String {
    u.level_fs
        .map_or_else(|| "inf".to_string(), |l| format!("{l:.6}"))
}

/// One line per queue (its raw and decayed usage, its ordering policy) and, under each
/// leaf, one per user.
pub fn format_fairshare(queues: &[&CapacitySchedulerQueueInfo]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<24} {:<12} {:>9} {:>10} {:>14} {:>14} {:>12} {:>10} {:>10} {:>10}",
        "Queue",
        "User",
        "RawShares",
        "NormShares",
        "RawUsage",
        "DecayedUsage",
        "EffectvUsage",
        "LevelFS",
        "FairShare",
        "Policy"
    );
    for q in queues {
        let fs = q.fair_share.clone().unwrap_or_default();
        let _ = writeln!(
            out,
            "{:<24} {:<12} {:>9} {:>10} {:>14} {:>14} {:>12} {:>10} {:>10} {:>10}",
            q.queue_path,
            "",
            "",
            "",
            usage(fs.raw_usage),
            usage(fs.decayed_usage),
            "",
            "",
            "",
            if q.queue_type == "leaf" {
                q.ordering_policy_info.as_str()
            } else {
                ""
            }
        );
        for u in &fs.users {
            let _ = writeln!(
                out,
                "{:<24} {:<12} {:>9} {:>10.6} {:>14} {:>14} {:>12.6} {:>10} {:>10.6} {:>10}",
                "",
                u.username,
                format!("{}", u.weight),
                u.norm_shares,
                usage(u.raw_usage),
                usage(u.decayed_usage),
                u.effective_usage,
                level_fs(u),
                u.fair_share_factor,
                ""
            );
        }
    }
    out.push_str(
        "Usage in billing-unit-seconds (spindle.scheduler.fairshare.billing-weights); DecayedUsage halves every decay-half-life-ms.\n\
         In a fairshare leaf, users with the lowest DecayedUsage/RawShares (highest LevelFS) go first.\n",
    );
    out
}

/// Why `app` is where it is in its leaf's order; `None` when it is not waiting in a
/// `fairshare` leaf.
pub fn format_app_priority(app: &AppInfo) -> Option<String> {
    let p = app.fair_share_priority.as_ref()?;
    let u = &p.user;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Application {} of user {} in {}",
        app.id, app.user, p.queue
    );
    let _ = writeln!(
        out,
        "  Position            : {} of {} waiting{}",
        p.position,
        p.waiting_applications,
        if p.overdue {
            " (waited past the bound: ahead of every application that has not)"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "  Fair share (user)   : factor {:.6}, level {} (shares {} = {:.6} of the leaf; decayed usage {} = {:.6} of the leaf; raw usage {})",
        u.fair_share_factor,
        level_fs(u),
        u.weight,
        u.norm_shares,
        usage(u.decayed_usage),
        u.effective_usage,
        usage(u.raw_usage)
    );
    let bound = if p.max_wait_ms == 0 {
        "no bound".to_string()
    } else {
        format!("bound {} s", p.max_wait_ms / 1000)
    };
    let _ = writeln!(
        out,
        "  Age                 : waited {} s ({bound})",
        p.age_ms / 1000
    );
    let _ = writeln!(
        out,
        "  Attained service    : {:.1} GPU-seconds (least first among the user's own)",
        p.attained_service_seconds
    );
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use spindle_common::records::cluster::{AppFairSharePriorityInfo, QueueFairShareInfo};

    fn alice() -> UserFairShareInfo {
        UserFairShareInfo {
            username: "alice".into(),
            weight: 1.0,
            norm_shares: 0.5,
            raw_usage: 7200.0,
            decayed_usage: 3600.0,
            effective_usage: 1.0,
            level_fs: Some(0.5),
            fair_share_factor: 0.25,
            billing_rate: 0.0,
        }
    }

    #[test]
    fn the_fairshare_table_has_a_row_per_queue_and_user() {
        let q = CapacitySchedulerQueueInfo {
            queue_path: "root.a".into(),
            queue_type: "leaf".into(),
            ordering_policy_info: "fairshare".into(),
            fair_share: Some(QueueFairShareInfo {
                raw_usage: 7200.0,
                decayed_usage: 3600.0,
                users: vec![
                    alice(),
                    UserFairShareInfo {
                        username: "bob".into(),
                        weight: 1.0,
                        norm_shares: 0.5,
                        fair_share_factor: 1.0,
                        ..Default::default()
                    },
                ],
            }),
            ..Default::default()
        };
        let t = format_fairshare(&[&q]);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].contains("DecayedUsage") && lines[0].contains("LevelFS"));
        assert!(lines[1].starts_with("root.a") && lines[1].contains("3600.0"));
        assert!(lines[1].trim_end().ends_with("fairshare"));
        assert!(lines[2].contains("alice") && lines[2].contains("0.500000"));
        assert!(lines[3].contains("bob") && lines[3].contains("inf"));
    }

    #[test]
    fn the_priority_report_names_every_factor() {
        let mut app = AppInfo {
            id: "application_1_0001".into(),
            user: "alice".into(),
            ..Default::default()
        };
        assert_eq!(format_app_priority(&app), None);
        app.fair_share_priority = Some(AppFairSharePriorityInfo {
            queue: "root.a".into(),
            position: 2,
            waiting_applications: 3,
            user: alice(),
            age_ms: 61_000,
            max_wait_ms: 86_400_000,
            overdue: false,
            attained_service_seconds: 12.0,
        });
        let t = format_app_priority(&app).unwrap();
        assert!(t.contains("2 of 3 waiting"), "{t}");
        assert!(t.contains("factor 0.250000"), "{t}");
        assert!(t.contains("decayed usage 3600.0"), "{t}");
        assert!(t.contains("waited 61 s (bound 86400 s)"), "{t}");
        assert!(t.contains("12.0 GPU-seconds"), "{t}");
    }
}
