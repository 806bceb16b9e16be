//! What can stop a replay before it starts, one variant per refusal.

use std::path::PathBuf;

use crate::trace::BadRow;

#[derive(Debug, thiserror::Error)]
pub enum SlsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path}: the header has no `{column}` column (required: submit_time, num_gpus, duration)"
    )]
    MissingColumn { path: PathBuf, column: &'static str },
    #[error("{path}: cannot read the header: {reason}")]
    BadHeader { path: PathBuf, reason: String },
    #[error("{path}: {} bad row(s); nothing was replayed:\n{}", rows.len(), list(rows))]
    BadRows { path: PathBuf, rows: Vec<BadRow> },
    #[error("{path}: the trace has no jobs")]
    EmptyTrace { path: PathBuf },
    #[error("{path}: job {index} of the SLS trace: {reason}")]
    BadSlsJob {
        path: PathBuf,
        index: usize,
        reason: String,
    },
    #[error("{path}: line {line}: {reason}")]
    BadNodeLine {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    #[error("the simulated cluster is empty: give --nodes N (N > 0) or a --node-file with nodes")]
    NoNodes,
    #[error("{option} must be {expected}, got '{value}'")]
    BadOption {
        option: &'static str,
        expected: &'static str,
        value: String,
    },
    #[error("unknown policy '{0}': `spindle sls policies` lists them")]
    UnknownPolicy(String),
    #[error("the configuration: {0}")]
    Config(#[from] spindle_resourcemanager::config::RmConfigError),
    #[error("the configuration directory: {0}")]
    ConfigFiles(#[from] spindle_common::config::ConfigError),
    #[error("the core's sanity check failed at t={at_ms} ms: {reason}")]
    Sanity { at_ms: u64, reason: String },
    #[error("{path}: not a replay's output ({reason})")]
    NotAnOutput { path: PathBuf, reason: String },
    #[error("cannot draw {path}: {reason}")]
    Plot { path: PathBuf, reason: String },
}

fn list(rows: &[BadRow]) -> String {
    const SHOWN: usize = 20;
    let mut s: Vec<String> = rows.iter().take(SHOWN).map(|r| format!("  {r}")).collect();
    if rows.len() > SHOWN {
        s.push(format!("  ... and {} more", rows.len() - SHOWN));
    }
    s.join("\n")
}
