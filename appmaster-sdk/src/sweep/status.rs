//! The sweep AM's account of its trials, for the `spindle sweep` client: each trial's
//! parameters, state, attempts, exit status, duration and the last line of its stdout.
//!
//! The AM keeps one [`SweepTrials`] and writes it, as JSON, to [`TRIALS_FILE`] in its own
//! container log directory each time it changes (atomically, as the training AM's rank file,
//! [`crate::train::status`]); the client reads it through the NM's container log REST of the
//! AM container for its progress line ([`progress_line`]) and its closing table
//! ([`table`]). The AM prints the same table at its end, so that a detached sweep's table is
//! in `spindle logs`.

use serde::{Deserialize, Serialize};
use spindle_common::ids::ContainerId;

use super::Trial;
use crate::follow::{aligned, exit_text};

/// The file's name in the AM container's log directory.
pub const TRIALS_FILE: &str = "spindle-trials.json";
/// Written first, then renamed to [`TRIALS_FILE`].
pub(crate) const TEMP_FILE: &str = ".spindle-trials.json.tmp";
/// The longest last line kept, in characters.
pub const MAX_LAST_LINE: usize = 200;

/// Where a trial is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[allow(non_camel_case_types)]
pub enum TrialState {
    /// Not started, or waiting to run again (after a failure with retries left, or a
    /// container lost to preemption or a node).
    WAITING,
    /// A container was granted and the trial is being started in it.
    STARTING,
    RUNNING,
    /// Exited 0.
    SUCCEEDED,
    /// Failed on its last allowed attempt.
    FAILED,
}

impl TrialState {
    pub fn is_final(self) -> bool {
        matches!(self, Self::SUCCEEDED | Self::FAILED)
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::WAITING => "WAITING",
            Self::STARTING => "STARTING",
            Self::RUNNING => "RUNNING",
            Self::SUCCEEDED => "SUCCEEDED",
            Self::FAILED => "FAILED",
        }
    }
}

/// One trial and how it went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrialStatus {
    #[serde(flatten)]
    pub trial: Trial,
    pub state: TrialState,
    /// Containers the trial was started in so far.
    pub attempts: u32,
    /// The last attempt's container and node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_id: Option<ContainerId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    /// When the last attempt was started (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<u64>,
    /// How long the last attempt ran, once it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// YARN's `ContainerExitStatus` of the last attempt, once it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<i32>,
    /// The last non-empty line of the last attempt's stdout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_line: Option<String>,
}

impl TrialStatus {
    pub fn new(trial: Trial) -> Self {
        Self {
            trial,
            state: TrialState::WAITING,
            attempts: 0,
            container_id: None,
            node_id: None,
            started_ms: None,
            duration_ms: None,
            exit_status: None,
            last_line: None,
        }
    }
}

/// Every trial of the sweep.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SweepTrials {
    pub parallel: u32,
    pub trials: Vec<TrialStatus>,
    /// When this version was written (ms since the epoch).
    pub updated_ms: u64,
}

/// How many trials are in each state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TrialCounts {
    pub waiting: usize,
    pub running: usize,
    pub succeeded: usize,
    pub failed: usize,
}

impl SweepTrials {
    pub fn counts(&self) -> TrialCounts {
        let mut c = TrialCounts::default();
        for t in &self.trials {
            match t.state {
                TrialState::WAITING => c.waiting += 1,
                TrialState::STARTING | TrialState::RUNNING => c.running += 1,
                TrialState::SUCCEEDED => c.succeeded += 1,
                TrialState::FAILED => c.failed += 1,
            }
        }
        c
    }

    pub fn all_final(&self) -> bool {
        self.trials.iter().all(|t| t.state.is_final())
    }

    /// The application's diagnostic when some trial failed: `2 of 16 trials failed: trial 3
    /// (lr=0.1) exit status 1 after 2 attempts; ...` (the first ten named).
    pub fn failure_diagnostic(&self) -> Option<String> {
        let failed: Vec<&TrialStatus> = self
            .trials
            .iter()
            .filter(|t| t.state == TrialState::FAILED)
            .collect();
        if failed.is_empty() {
            return None;
        }
        let named: Vec<String> = failed
            .iter()
            .take(10)
            .map(|t| {
                let params = if t.trial.params.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", t.trial.params_text())
                };
                let exit = t.exit_status.map_or_else(
                    || "did not start".to_string(),
                    |e| format!("exit status {}", exit_text(e)),
                );
                let plural = if t.attempts == 1 { "" } else { "s" };
                format!(
                    "trial {}{params} {exit} after {} attempt{plural}",
                    t.trial.id, t.attempts
                )
            })
            .collect();
        let more = match failed.len().saturating_sub(named.len()) {
            0 => String::new(),
            n => format!("; and {n} more"),
        };
        Some(format!(
            "{} of {} trials failed: {}{more}",
            failed.len(),
            self.trials.len(),
            named.join("; ")
        ))
    }
}

/// `Trials: 4 running, 3 succeeded, 1 failed, 8 waiting (of 16, at most 4 at once)`.
pub fn progress_line(d: &SweepTrials) -> Option<String> {
    if d.trials.is_empty() {
        return None;
    }
    let c = d.counts();
    Some(format!(
        "Trials: {} running, {} succeeded, {} failed, {} waiting (of {}, at most {} at once)",
        c.running,
        c.succeeded,
        c.failed,
        c.waiting,
        d.trials.len(),
        d.parallel
    ))
}

/// `12.3s`, `4m05s`, `2h03m`.
pub fn duration_text(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{:.1}s", ms as f64 / 1000.0),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// The closing table: `TRIAL PARAMETERS STATE EXIT-STATUS ATTEMPTS DURATION LAST-LINE`.
pub fn table(d: &SweepTrials) -> Vec<String> {
    let head = [
        "TRIAL",
        "PARAMETERS",
        "STATE",
        "EXIT-STATUS",
        "ATTEMPTS",
        "DURATION",
        "LAST-LINE",
    ]
    .map(str::to_string)
    .to_vec();
    let mut rows = vec![head];
    for t in &d.trials {
        rows.push(vec![
            t.trial.id.to_string(),
            t.trial.params_text(),
            t.state.as_str().to_string(),
            t.exit_status.map_or_else(|| "-".into(), exit_text),
            t.attempts.to_string(),
            t.duration_ms.map_or_else(|| "-".into(), duration_text),
            t.last_line.clone().unwrap_or_default(),
        ]);
    }
    aligned(&rows)
}

/// The last non-empty line of `text`, at most [`MAX_LAST_LINE`] characters (its end kept).
pub fn last_line(text: &str) -> Option<String> {
    let l = text
        .lines()
        .rev()
        .map(str::trim_end)
        .find(|l| !l.trim().is_empty())?;
    let n = l.chars().count();
    Some(if n > MAX_LAST_LINE {
        let tail: String = l.chars().skip(n - (MAX_LAST_LINE - 3)).collect();
        format!("...{tail}")
    } else {
        l.to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trial(id: u32, params: &[(&str, &str)]) -> Trial {
        Trial {
            id,
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn doc() -> SweepTrials {
        let mut a = TrialStatus::new(trial(0, &[("lr", "0.1")]));
        a.state = TrialState::SUCCEEDED;
        a.attempts = 1;
        a.exit_status = Some(0);
        a.duration_ms = Some(1500);
        a.last_line = Some("loss 0.25".into());
        let mut b = TrialStatus::new(trial(1, &[("lr", "0.01")]));
        b.state = TrialState::FAILED;
        b.attempts = 2;
        b.exit_status = Some(3);
        b.duration_ms = Some(61_000);
        let c = TrialStatus::new(trial(2, &[("lr", "0.001")]));
        SweepTrials {
            parallel: 2,
            trials: vec![a, b, c],
            updated_ms: 1,
        }
    }

    #[test]
    fn the_table_has_a_row_per_trial() {
        let t = table(&doc());
        assert_eq!(
            t,
            [
                "  TRIAL  PARAMETERS  STATE      EXIT-STATUS  ATTEMPTS  DURATION  LAST-LINE",
                "  0      lr=0.1      SUCCEEDED  0            1         1.5s      loss 0.25",
                "  1      lr=0.01     FAILED     3            2         1m01s",
                "  2      lr=0.001    WAITING    -            0         -",
            ]
        );
        assert_eq!(
            progress_line(&doc()).as_deref(),
            Some("Trials: 0 running, 1 succeeded, 1 failed, 1 waiting (of 3, at most 2 at once)")
        );
        assert_eq!(duration_text(7_260_000), "2h01m");
    }

    #[test]
    fn the_diagnostic_names_the_failed_trials() {
        let d = doc();
        assert_eq!(
            d.failure_diagnostic().as_deref(),
            Some("1 of 3 trials failed: trial 1 (lr=0.01) exit status 3 after 2 attempts")
        );
        let mut ok = d.clone();
        ok.trials.retain(|t| t.state != TrialState::FAILED);
        assert_eq!(ok.failure_diagnostic(), None);
        assert!(!d.all_final());
    }

    #[test]
    fn the_file_reads_back_and_the_last_line_is_found() {
        let d = doc();
        let text = serde_json::to_string(&d).expect("JSON");
        let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(v["trials"][0]["id"], 0);
        assert_eq!(v["trials"][0]["params"][0][1], "0.1");
        assert_eq!(v["trials"][1]["state"], "FAILED");
        assert_eq!(v["trials"][0]["lastLine"], "loss 0.25");
        let back: SweepTrials = serde_json::from_str(&text).expect("back");
        assert_eq!(back, d);
        assert_eq!(last_line("a\nb  \n\n  \n").as_deref(), Some("b"));
        assert_eq!(last_line(" \n"), None);
        let long = "x".repeat(500);
        assert_eq!(
            last_line(&long).map(|l| l.chars().count()),
            Some(MAX_LAST_LINE)
        );
    }
}
