//! The AM from registration to unregistration: gang attempts until one ends the job.

use std::collections::BTreeMap;
use std::path::Path;

use spindle_common::ids::ContainerId;
use spindle_common::records::am::Container;
use spindle_common::states::FinalApplicationStatus;

use super::{AmExtras, Attempt, AttemptEnd, TrainReport};
use crate::am_client::AmError;
use crate::amrm::AmRmClient;
use crate::dshell::am::{finish_and_report, register_fitting, Registered};
use crate::gang::GangError;
use crate::nm_client::NmClient;
use crate::train::checkpoint;
use crate::train::status::GangEvent;
use crate::train::{assign_ranks, RankInfo, TrainAmConfig, GANG_ID};

/// Runs the training AM to its end: registers (as `am_host`), runs gang attempts, and
/// unregisters with the workers' final status. Each event is one line given to `out`.
pub async fn run_am(
    cfg: &TrainAmConfig,
    amrm: &mut AmRmClient,
    nm: &NmClient,
    am_host: &str,
    out: &mut (dyn FnMut(&str) + Send),
) -> Result<TrainReport, AmError> {
    run_am_with(cfg, &AmExtras::default(), amrm, nm, am_host, out).await
}

/// [`run_am`] with the shipped code and fail-fast window of `extras`; the staging directory
/// is removed once the AM has unregistered.
pub async fn run_am_with(
    cfg: &TrainAmConfig,
    extras: &AmExtras,
    amrm: &mut AmRmClient,
    nm: &NmClient,
    am_host: &str,
    out: &mut (dyn FnMut(&str) + Send),
) -> Result<TrainReport, AmError> {
    let report = run_gangs(cfg, extras, amrm, nm, am_host, out).await?;
    if let Some(l) = extras.shipped.clean_up() {
        out(&l);
    }
    Ok(report)
}

async fn run_gangs(
    cfg: &TrainAmConfig,
    extras: &AmExtras,
    amrm: &mut AmRmClient,
    nm: &NmClient,
    am_host: &str,
    out: &mut (dyn FnMut(&str) + Send),
) -> Result<TrainReport, AmError> {
    // One line per event: diagnostics from NMs carry newlines (stderr tails).
    let out = &mut |l: &str| out(&one_line(l));
    let registered = register_fitting(amrm, am_host, "worker", &cfg.worker_resources, out).await?;
    let mut report = TrainReport {
        final_status: FinalApplicationStatus::FAILED,
        diagnostics: String::new(),
        attempts: 0,
        preemptions: 0,
        resizes: 0,
    };
    let reg = match registered {
        Registered::Fits(reg) => reg,
        Registered::TooBig(d) => {
            report.diagnostics = d;
            return Ok(report);
        }
    };
    let max_attempts = cfg.max_restarts.saturating_add(1);
    // Attempts that ended in a failure: only these count against --max-restarts.
    let mut failures = 0u32;
    let mut adopted = take_over(
        cfg,
        extras,
        amrm,
        nm,
        &reg.containers_from_previous_attempts,
        out,
    )
    .await;
    let mut after_preemption = false;
    loop {
        report.attempts += 1;
        let attempt = Attempt {
            cfg,
            nm,
            number: report.attempts,
            after_preemption,
            resizes: std::cell::Cell::new(report.resizes),
            extras,
            fresh: adopted.is_none(),
        };
        let end = match adopted.take() {
            Some(ranks) => attempt.watch(amrm, &ranks, out).await?,
            None => attempt.run(amrm, out).await?,
        };
        report.resizes = attempt.resizes.get();
        after_preemption = matches!(end, AttemptEnd::Preempted);
        match end {
            AttemptEnd::Succeeded(n) => {
                report.final_status = FinalApplicationStatus::SUCCEEDED;
                out(&format!(
                    "all {n} workers of attempt {} exited 0",
                    report.attempts
                ));
                break;
            }
            AttemptEnd::Fatal(d) => {
                // Whatever was granted (a gang whose checkpoint directory check failed).
                release(amrm, nm, true, out).await;
                report.diagnostics = d;
                break;
            }
            AttemptEnd::FailedFast(d) => {
                release(amrm, nm, true, out).await;
                report.diagnostics = d;
                break;
            }
            AttemptEnd::Preempted => {
                // Not a failure: the workers checkpointed and the gang is asked for again.
                report.preemptions += 1;
                crate::train::status::event(GangEvent::Preempted {
                    gang_attempt: report.attempts,
                    checkpoint: cfg
                        .checkpoint_dir
                        .as_deref()
                        .and_then(|d| checkpoint::latest(Path::new(d)))
                        .map(|k| k.to_string()),
                });
                release(amrm, nm, true, out).await;
            }
            AttemptEnd::WorkerFailed(f) => {
                failures += 1;
                let last = failures >= max_attempts;
                if !last {
                    let (attempt, of) = (
                        report.attempts + 1,
                        max_attempts.saturating_add(report.preemptions),
                    );
                    out(&format!(
                        "restarting the gang (attempt {attempt} of at most {of}) after: {}",
                        f.why
                    ));
                    crate::train::status::event(GangEvent::Restarted {
                        attempt,
                        of,
                        because: f.why.clone(),
                    });
                }
                release(amrm, nm, false, out).await;
                if last {
                    let preempted = match report.preemptions {
                        0 => String::new(),
                        p => format!(", {p} of them preempted"),
                    };
                    report.diagnostics = format!(
                        "{}; gave up after {} gang attempt(s){preempted} (--max-restarts {})",
                        f.why, report.attempts, cfg.max_restarts
                    );
                    if let Some(q) = f.stderr {
                        report.diagnostics.push('\n');
                        report.diagnostics.push_str(&q);
                    }
                    break;
                }
            }
        }
    }
    finish_and_report(amrm, report.final_status, &report.diagnostics, out).await?;
    Ok(report)
}

/// A previous AM attempt's gang (the application keeps its containers across attempts):
/// taken over whole if every worker still runs (its ranks); else what is left is stopped
/// and the gang starts again (None).
async fn take_over(
    cfg: &TrainAmConfig,
    extras: &AmExtras,
    amrm: &mut AmRmClient,
    nm: &NmClient,
    previous: &[Container],
    out: &mut (dyn FnMut(&str) + Send),
) -> Option<Vec<RankInfo>> {
    if previous.is_empty() {
        return None;
    }
    let probe = Attempt {
        cfg,
        nm,
        number: 1,
        after_preemption: false,
        resizes: std::cell::Cell::new(0),
        extras,
        fresh: false,
    };
    amrm.adopt_gang(probe.gang_request(), previous.to_vec());
    let whole = match &cfg.elastic {
        Some(e) => (e.min..=e.max).contains(&(previous.len() as u32)),
        None => previous.len() as u32 == cfg.workers,
    };
    if !whole {
        out(&format!(
            "the previous AM attempt left {} of {} workers; restarting the gang",
            previous.len(),
            cfg.workers
        ));
        release(amrm, nm, false, out).await;
        return None;
    }
    out(&format!(
        "took over the running gang of {} workers from the previous AM attempt",
        previous.len()
    ));
    // The previous AM may have died between holding the gang and releasing it:
    // release them all (running ones answer "not held", which is fine).
    let mut by_node: BTreeMap<String, Vec<ContainerId>> = BTreeMap::new();
    for c in previous {
        by_node
            .entry(c.node_http_address.clone())
            .or_default()
            .push(c.id);
    }
    futures::future::join_all(
        by_node
            .into_iter()
            .map(|(addr, ids)| async move { nm.release_containers(&addr, ids).await }),
    )
    .await;
    Some(assign_ranks(previous))
}

/// Folds a multi-line message into one line (`a\n  b` -> `a | b`).
pub fn one_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" | ")
}

/// Stops and releases what is left of the gang, telling how it went (with `quiet`, only if
/// something was left).
async fn release(
    amrm: &mut AmRmClient,
    nm: &NmClient,
    quiet: bool,
    out: &mut (dyn FnMut(&str) + Send),
) {
    match amrm.release_gang(GANG_ID, nm).await {
        Ok(r) if quiet && r.released.is_empty() && r.problems.is_empty() => {}
        Ok(r) => {
            let mut l = format!(
                "gang {GANG_ID} released: {} running worker(s) stopped",
                r.released.len()
            );
            if !r.problems.is_empty() {
                l.push_str(&format!(" ({})", r.problems.join("; ")));
            }
            out(&l);
        }
        Err(GangError::Unknown(_)) => {}
        Err(e) => out(&format!("gang {GANG_ID} could not be released: {e}")),
    }
}
