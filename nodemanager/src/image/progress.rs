//! [`PullProgress`]: how far a pull has come, for the container's diagnostics
//! (`pulling 127.0.0.1:5000/busybox:1: 1.2 of 9.8 MB`).

use std::fmt;

/// Where a pull is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullPhase {
    /// Fetching the manifest (the total is not known yet).
    Resolving,
    /// Fetching and unpacking the config and the layers the node lacks.
    Downloading,
    /// Every layer is in the cache.
    Done,
}

/// The progress of one pull: bytes of blobs fetched and to fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullProgress {
    /// The canonical reference being pulled.
    pub reference: String,
    pub phase: PullPhase,
    pub done_bytes: u64,
    /// The config and the missing layers, as their descriptors declare (compressed).
    pub total_bytes: u64,
}

impl PullProgress {
    pub fn new(reference: String) -> Self {
        PullProgress {
            reference,
            phase: PullPhase::Resolving,
            done_bytes: 0,
            total_bytes: 0,
        }
    }
}

/// `1.2 of 9.8 MB`: both in the unit of the total (kB, MB, GB, TB; decimal, as registries
/// and `docker pull` print sizes).
fn pair(done: u64, total: u64) -> String {
    const UNITS: [(&str, f64); 4] = [("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)];
    #[allow(clippy::cast_precision_loss)] // display only
    let (d, t) = (done as f64, total as f64);
    match UNITS.iter().find(|(_, s)| t >= *s) {
        Some((unit, s)) => format!("{:.1} of {:.1} {unit}", d / s, t / s),
        None => format!("{done} of {total} B"),
    }
}

impl fmt::Display for PullProgress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.phase {
            PullPhase::Resolving => write!(f, "pulling {}: resolving", self.reference),
            PullPhase::Downloading => write!(
                f,
                "pulling {}: {}",
                self.reference,
                pair(self.done_bytes, self.total_bytes)
            ),
            PullPhase::Done => write!(f, "pulled {}", self.reference),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_like_docker() {
        let mut p = PullProgress::new("127.0.0.1:5000/busybox:1".into());
        assert_eq!(p.to_string(), "pulling 127.0.0.1:5000/busybox:1: resolving");
        p.phase = PullPhase::Downloading;
        p.done_bytes = 1_200_000;
        p.total_bytes = 9_800_000;
        assert_eq!(
            p.to_string(),
            "pulling 127.0.0.1:5000/busybox:1: 1.2 of 9.8 MB"
        );
        p.total_bytes = 900;
        p.done_bytes = 12;
        assert_eq!(
            p.to_string(),
            "pulling 127.0.0.1:5000/busybox:1: 12 of 900 B"
        );
    }
}
