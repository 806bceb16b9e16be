//! What the training AM reads and writes in the job's checkpoint directory
//! (`--checkpoint-dir`, the workers' `SPINDLE_CHECKPOINT_DIR`).
//!
//! - It *reads* where the job's work is saved, to report it to the RM (which counts only the
//!   work since the last checkpoint as lost to a preemption): the newest regular file directly
//!   in the directory gives the time (its mtime) and the label (its name); names starting with
//!   `.spindle-` are Spindle's own and are skipped. A file [`STEP_FILE`] holding a whole number
//!   gives the step.
//! - It *writes* the preemption marker [`MARKER`] when the gang is preempted: one line
//!   `SPINDLE_PREEMPT_DEADLINE_MS=<ms since the epoch>`, the RM's kill deadline, for workers
//!   that want to know how long they have after their SIGTERM. The AM removes it before it
//!   starts the workers again.
//!
//! - For an elastic job it *writes* the resize marker [`RESIZE_MARKER`] before it stops the
//!   workers for a resize (lines `SPINDLE_RESIZE_FROM=<n>`, `SPINDLE_RESIZE_TO=<n>`,
//!   `SPINDLE_RESIZE_DEADLINE_MS=<ms>`), and removes it before the workers start again at
//!   the new size; it *reads* [`THROUGHPUT_FILE`] (a number, units per second, written by
//!   rank 0) and reports it to the RM for the current size.
//!
//! The directory is read as a local path on the AM's node (a shared filesystem in a real
//! cluster); a directory that cannot be read simply gives no checkpoint.

use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

/// The preemption marker's file name.
pub const MARKER: &str = ".spindle-preempted";
/// The variable the marker's one line sets.
pub const DEADLINE_VAR: &str = "SPINDLE_PREEMPT_DEADLINE_MS";
/// The optional file whose whole-number content is the checkpoint's training step.
pub const STEP_FILE: &str = ".spindle-step";
/// Names starting with this are Spindle's, never a checkpoint.
pub const RESERVED_PREFIX: &str = ".spindle-";

/// The job's latest checkpoint as the directory shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The newest checkpoint file's mtime, in ms since the epoch.
    pub time_ms: u64,
    /// The content of [`STEP_FILE`], if it holds a whole number.
    pub step: Option<u64>,
    /// The newest checkpoint file's name.
    pub label: String,
}

/// `ckpt-3 (step 3)`, or the label alone without a step.
impl std::fmt::Display for Checkpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.step {
            Some(step) => write!(f, "{} (step {step})", self.label),
            None => f.write_str(&self.label),
        }
    }
}

/// The newest regular file directly in `dir` (not a `.spindle-*` one), with the step of
/// [`STEP_FILE`]; None when there is none or `dir` cannot be read. Ties in mtime go to the
/// greater name, so the answer does not depend on the directory's order.
pub fn latest(dir: &Path) -> Option<Checkpoint> {
    let mut best: Option<(u64, String)> = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(RESERVED_PREFIX) {
            continue;
        }
        // Not following links: a checkpoint is a file the job wrote here.
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        let Some(ms) = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        else {
            continue;
        };
        if best.as_ref().is_none_or(|(t, n)| (ms, &name) > (*t, n)) {
            best = Some((ms, name));
        }
    }
    let (time_ms, label) = best?;
    Some(Checkpoint {
        time_ms,
        step: step(dir),
        label,
    })
}

/// The whole number in [`STEP_FILE`], if any.
pub fn step(dir: &Path) -> Option<u64> {
    std::fs::read_to_string(dir.join(STEP_FILE))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The resize marker's file name (elastic jobs).
pub const RESIZE_MARKER: &str = ".spindle-resize";
/// The file rank 0 writes its measured throughput to (a number, units per second).
pub const THROUGHPUT_FILE: &str = ".spindle-throughput";

/// The resize marker's content.
pub fn resize_marker_text(from: u32, to: u32, deadline_ms: u64) -> String {
    format!("SPINDLE_RESIZE_FROM={from}\nSPINDLE_RESIZE_TO={to}\nSPINDLE_RESIZE_DEADLINE_MS={deadline_ms}\n")
}

/// Writes the resize marker (through a temporary file and a rename).
pub fn write_resize_marker(
    dir: &Path,
    from: u32,
    to: u32,
    deadline_ms: u64,
) -> std::io::Result<()> {
    let tmp = dir.join(format!("{RESIZE_MARKER}.tmp"));
    std::fs::write(&tmp, resize_marker_text(from, to, deadline_ms))?;
    std::fs::rename(&tmp, dir.join(RESIZE_MARKER))
}

/// Removes `name` in `dir`; a missing file is not an error.
pub fn remove_file(dir: &Path, name: &str) -> std::io::Result<()> {
    match std::fs::remove_file(dir.join(name)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The number in [`THROUGHPUT_FILE`] and the file's mtime (ms), if it holds a finite
/// non-negative number.
pub fn throughput(dir: &Path) -> Option<(f64, u64)> {
    let p = dir.join(THROUGHPUT_FILE);
    let v: f64 = std::fs::read_to_string(&p).ok()?.trim().parse().ok()?;
    let mtime = std::fs::metadata(&p)
        .ok()?
        .modified()
        .ok()?
        .duration_since(UNIX_EPOCH)
        .ok()
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))?;
    (v.is_finite() && v >= 0.0).then_some((v, mtime))
}

pub fn marker_path(dir: &Path) -> PathBuf {
    dir.join(MARKER)
}

/// The marker's content for a deadline.
pub fn marker_line(deadline_ms: u64) -> String {
    format!("{DEADLINE_VAR}={deadline_ms}\n")
}

/// Writes the marker (through a temporary file and a rename, so a worker never reads half
/// a line).
pub fn write_marker(dir: &Path, deadline_ms: u64) -> std::io::Result<()> {
    let tmp = dir.join(format!("{MARKER}.tmp"));
    std::fs::write(&tmp, marker_line(deadline_ms))?;
    std::fs::rename(&tmp, marker_path(dir))
}

/// Removes the marker; a missing one is not an error.
pub fn remove_marker(dir: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(marker_path(dir)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;

    #[test]
    fn a_checkpoint_reads_as_its_label_and_step() {
        let mut k = Checkpoint {
            time_ms: 1,
            step: Some(3),
            label: "ckpt-3".into(),
        };
        assert_eq!(k.to_string(), "ckpt-3 (step 3)");
        k.step = None;
        assert_eq!(k.to_string(), "ckpt-3");
    }

    fn touch(dir: &Path, name: &str, secs: u64) {
        let p = dir.join(name);
        std::fs::write(&p, name).expect("write");
        let f = std::fs::File::options().write(true).open(&p).expect("open");
        f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
            .expect("set mtime");
    }

    #[test]
    fn the_newest_file_is_the_checkpoint_and_spindle_files_are_not() {
        let d = tempfile::tempdir().expect("tempdir");
        assert_eq!(latest(d.path()), None, "an empty dir has none");
        assert_eq!(latest(&d.path().join("missing")), None);
        touch(d.path(), "ckpt-1.pt", 1_000);
        touch(d.path(), "ckpt-2.pt", 2_000);
        // Spindle's own files and directories never count, however new.
        touch(d.path(), MARKER, 9_000);
        touch(d.path(), ".spindle-anything", 9_000);
        std::fs::create_dir(d.path().join("newer-dir")).expect("dir");
        assert_eq!(
            latest(d.path()),
            Some(Checkpoint {
                time_ms: 2_000_000,
                step: None,
                label: "ckpt-2.pt".into()
            })
        );
        std::fs::write(d.path().join(STEP_FILE), " 42\n").expect("step");
        assert_eq!(latest(d.path()).expect("one").step, Some(42));
        std::fs::write(d.path().join(STEP_FILE), "forty-two").expect("step");
        assert_eq!(latest(d.path()).expect("one").step, None);
        // A tie in mtime goes to the greater name.
        touch(d.path(), "ckpt-0.pt", 2_000);
        assert_eq!(latest(d.path()).expect("one").label, "ckpt-2.pt");
    }

    #[test]
    fn the_marker_is_one_line_and_removing_it_twice_is_fine() {
        let d = tempfile::tempdir().expect("tempdir");
        write_marker(d.path(), 1_700_000_123_456).expect("write");
        assert_eq!(
            std::fs::read_to_string(marker_path(d.path())).expect("read"),
            "SPINDLE_PREEMPT_DEADLINE_MS=1700000123456\n"
        );
        assert!(!d.path().join(format!("{MARKER}.tmp")).exists());
        remove_marker(d.path()).expect("remove");
        remove_marker(d.path()).expect("remove again");
        assert!(!marker_path(d.path()).exists());
        assert!(write_marker(&d.path().join("missing"), 1).is_err());
    }

    #[test]
    fn the_resize_marker_and_the_throughput_file() {
        let d = tempfile::tempdir().expect("tempdir");
        write_resize_marker(d.path(), 8, 4, 77).expect("write");
        assert_eq!(
            std::fs::read_to_string(d.path().join(RESIZE_MARKER)).expect("read"),
            "SPINDLE_RESIZE_FROM=8\nSPINDLE_RESIZE_TO=4\nSPINDLE_RESIZE_DEADLINE_MS=77\n"
        );
        remove_file(d.path(), RESIZE_MARKER).expect("remove");
        remove_file(d.path(), RESIZE_MARKER).expect("remove again");
        assert_eq!(throughput(d.path()), None);
        std::fs::write(d.path().join(THROUGHPUT_FILE), "576.25\n").expect("write");
        assert_eq!(throughput(d.path()).map(|t| t.0), Some(576.25));
        std::fs::write(d.path().join(THROUGHPUT_FILE), "fast").expect("write");
        assert_eq!(throughput(d.path()), None);
        // Never mistaken for a checkpoint.
        assert_eq!(latest(d.path()), None);
    }
}
