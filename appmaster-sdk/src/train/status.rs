//! The training AM's structured account of its gang, for the `spindle train` client: which
//! container is which rank, where it runs, and how it ended.
//!
//! The AM keeps one [`GangRanks`] and writes it, as JSON, to [`RANKS_FILE`] in its own
//! container log directory (the first of `LOG_DIRS`) each time it changes: when a gang is
//! granted and its workers are being started ([`held`]), when they run ([`running`]), and
//! when each ends ([`ended`]). The write is atomic (a temporary file renamed over the old
//! one), so a reader sees one whole version or the one before. The client reads it through
//! the NM's container log REST of the AM container (it is one of the AM's log files, kept
//! with them), which tells it which container to follow for rank 0's output and the exit of
//! every rank at the end, without reading any log message.
//!
//! The AM process has one gang, so the account is process-wide; outside a container (no
//! `LOG_DIRS`, as in tests that run the AM in-process) nothing is written.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use serde::{Deserialize, Serialize};
use spindle_common::ids::ContainerId;
use spindle_common::records::am::ContainerStatus;
use spindle_common::time::now_ms;

use super::{RankInfo, GANG_ID};

/// The file's name in the AM container's log directory.
pub const RANKS_FILE: &str = "spindle-ranks.json";
/// Written first, then renamed to [`RANKS_FILE`].
const TEMP_FILE: &str = ".spindle-ranks.json.tmp";

/// Where one rank's worker is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[allow(non_camel_case_types)]
pub enum RankState {
    /// Granted; being set up on its NM and held there until every worker of the gang is
    /// ready, then released together (the gang's held start).
    HELD,
    /// Its worker runs.
    RUNNING,
    /// Its container ended; `exitStatus` says how.
    COMPLETE,
}

/// One rank of the gang.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RankStatus {
    pub rank: u32,
    pub container_id: ContainerId,
    /// `host:port`, as the RM names the node.
    pub node_id: String,
    /// The NM's web address, where the worker's logs are.
    pub node_http_address: String,
    pub state: RankState,
    /// YARN's `ContainerExitStatus` once `COMPLETE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<i32>,
}

/// What happened to the gang that the client announces, each once (in the order it
/// happened). A resize is not here: the RM's app view tells it (`currentSize`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum GangEvent {
    /// A worker failed: the gang starts again as gang attempt `attempt` of at most `of`.
    #[serde(rename_all = "camelCase")]
    Restarted {
        attempt: u32,
        of: u32,
        because: String,
    },
    /// The RM took gang attempt `gang_attempt` back; the workers resume from `checkpoint`
    /// (the checkpoint directory's newest file and step), if there is one.
    #[serde(rename_all = "camelCase")]
    Preempted {
        gang_attempt: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        checkpoint: Option<String>,
    },
}

impl GangEvent {
    /// The client's line: `Gang workers restarted: attempt 2 of 4, because ...`.
    pub fn line(&self) -> String {
        match self {
            Self::Restarted {
                attempt,
                of,
                because,
            } => format!("Gang {GANG_ID} restarted: attempt {attempt} of {of}, because {because}"),
            Self::Preempted {
                gang_attempt,
                checkpoint,
            } => {
                let from = match checkpoint {
                    Some(k) => format!("resuming from checkpoint {k}"),
                    None => "no checkpoint to resume from".to_string(),
                };
                format!("Gang {GANG_ID} preempted in gang attempt {gang_attempt}; {from}")
            }
        }
    }
}

/// The gang's ranks in its current gang attempt.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct GangRanks {
    /// The gang attempt these ranks belong to (the workers' `SPINDLE_GANG_ATTEMPT`).
    pub gang_attempt: u32,
    /// By rank.
    pub ranks: Vec<RankStatus>,
    /// When this version was written (ms since the epoch).
    pub updated_ms: u64,
    /// Restarts and preemptions so far, oldest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<GangEvent>,
}

/// How many ranks are in each state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RankCounts {
    pub held: u32,
    pub running: u32,
    pub complete: u32,
}

impl GangRanks {
    /// Every rank of `ranks` (one gang attempt) in `state`. The same containers keep how
    /// they ended.
    pub fn set(&mut self, gang_attempt: u32, ranks: &[RankInfo], state: RankState) {
        let old = std::mem::take(&mut self.ranks);
        self.gang_attempt = gang_attempt;
        self.ranks = ranks
            .iter()
            .map(|r| {
                let c = &r.container;
                match old.iter().find(|o| o.container_id == c.id) {
                    Some(o) if o.state == RankState::COMPLETE => RankStatus {
                        rank: r.rank,
                        ..o.clone()
                    },
                    _ => RankStatus {
                        rank: r.rank,
                        container_id: c.id,
                        node_id: c.node_id.to_string(),
                        node_http_address: c.node_http_address.clone(),
                        state,
                        exit_status: None,
                    },
                }
            })
            .collect();
        self.ranks.sort_by_key(|r| r.rank);
    }

    /// Marks the rank in container `id` ended with `exit_status`; false if no rank is in it.
    pub fn ended(&mut self, id: &ContainerId, exit_status: i32) -> bool {
        match self.ranks.iter_mut().find(|r| r.container_id == *id) {
            Some(r) => {
                r.state = RankState::COMPLETE;
                r.exit_status = Some(exit_status);
                true
            }
            None => false,
        }
    }

    pub fn counts(&self) -> RankCounts {
        let mut c = RankCounts::default();
        for r in &self.ranks {
            match r.state {
                RankState::HELD => c.held += 1,
                RankState::RUNNING => c.running += 1,
                RankState::COMPLETE => c.complete += 1,
            }
        }
        c
    }

    /// Rank 0, whose output the client follows.
    pub fn rank0(&self) -> Option<&RankStatus> {
        self.ranks.iter().find(|r| r.rank == 0)
    }
}

/// Writes `doc` to `dir/`[`RANKS_FILE`] atomically (a temporary file, then a rename).
pub fn write(dir: &Path, doc: &GangRanks) -> std::io::Result<()> {
    write_atomically(dir, RANKS_FILE, TEMP_FILE, doc)
}

/// Writes `doc` as JSON to `dir/name` atomically: to `dir/temp` first, then renamed, so that
/// a reader sees one whole version or the one before (the AMs' files for their clients).
pub(crate) fn write_atomically<T: Serialize>(
    dir: &Path,
    name: &str,
    temp: &str,
    doc: &T,
) -> std::io::Result<()> {
    let text = serde_json::to_vec_pretty(doc).map_err(std::io::Error::other)?;
    let tmp = dir.join(temp);
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, dir.join(name))
}

/// The AM container's log directory (the first of `LOG_DIRS`), where its files for the
/// client go; None outside a container.
pub(crate) fn am_log_dir() -> Option<PathBuf> {
    std::env::var(spindle_common::env::LOG_DIRS)
        .ok()
        .and_then(|v| {
            v.split(',')
                .map(str::trim)
                .find(|d| !d.is_empty())
                .map(PathBuf::from)
        })
}

/// The AM's account and where it is written.
struct Board {
    dir: Option<PathBuf>,
    doc: GangRanks,
    /// A write failed: said once in the AM's log, not again.
    warned: bool,
}

fn board() -> &'static Mutex<Board> {
    static BOARD: OnceLock<Mutex<Board>> = OnceLock::new();
    BOARD.get_or_init(|| {
        Mutex::new(Board {
            dir: am_log_dir(),
            doc: GangRanks::default(),
            warned: false,
        })
    })
}

/// Changes the account with `f` and writes it if `f` says it changed.
fn update(f: impl FnOnce(&mut GangRanks) -> bool) {
    let mut b = board().lock().unwrap_or_else(|e| e.into_inner());
    if !f(&mut b.doc) {
        return;
    }
    b.doc.updated_ms = now_ms();
    let Some(dir) = b.dir.clone() else { return };
    if let Err(e) = write(&dir, &b.doc) {
        if !b.warned {
            tracing::warn!(dir = %dir.display(), error = %e,
                "cannot write {RANKS_FILE}; the client will not see the ranks");
            b.warned = true;
        }
    }
}

/// Gang attempt `gang_attempt` was granted as `ranks`; its workers are being started.
pub fn held(gang_attempt: u32, ranks: &[RankInfo]) {
    update(|d| {
        d.set(gang_attempt, ranks, RankState::HELD);
        true
    });
}

/// The workers of `ranks` run (started, taken over from an earlier AM, or restarted at a new
/// size).
pub fn running(gang_attempt: u32, ranks: &[RankInfo]) {
    update(|d| {
        d.set(gang_attempt, ranks, RankState::RUNNING);
        true
    });
}

/// Something the client announces happened ([`GangEvent`]).
pub fn event(e: GangEvent) {
    update(|d| {
        d.events.push(e);
        true
    });
}

/// A container ended: its rank, if it is one of the current ranks, is complete.
pub fn ended(s: &ContainerStatus) {
    update(|d| d.ended(&s.container_id, s.exit_status));
}

#[cfg(test)]
mod tests {
    use spindle_common::records::am::Container;

    use super::*;
    use crate::train::assign_ranks;

    fn container(id: &str, node: &str) -> Container {
        serde_json::from_value(serde_json::json!({
            "id": id, "nodeId": node, "nodeHttpAddress": format!("{node}0"),
            "resource": {"memory": 256, "vCores": 1}, "priority": 0,
            "containerToken": "t",
        }))
        .expect("a container")
    }

    #[test]
    fn ranks_move_from_held_to_complete() {
        let cs = vec![
            container("container_1_0001_01_000003", "b:1"),
            container("container_1_0001_01_000002", "a:1"),
        ];
        let ranks = assign_ranks(&cs);
        let mut d = GangRanks::default();
        d.set(1, &ranks, RankState::HELD);
        assert_eq!(d.gang_attempt, 1);
        assert_eq!(
            d.counts(),
            RankCounts {
                held: 2,
                running: 0,
                complete: 0
            }
        );
        let r0 = d.rank0().expect("rank 0").clone();
        assert_eq!(r0.node_id, "a:1");
        assert_eq!(r0.container_id.to_string(), "container_1_0001_01_000002");
        assert_eq!(r0.node_http_address, "a:10");
        assert!(d.ended(&r0.container_id, 3));
        assert!(!d.ended(&"container_1_0001_01_000009".parse().unwrap(), 0));
        // A rank that already ended stays ended when the others run.
        d.set(1, &ranks, RankState::RUNNING);
        assert_eq!(
            d.counts(),
            RankCounts {
                held: 0,
                running: 1,
                complete: 1
            }
        );
        assert_eq!(d.rank0().and_then(|r| r.exit_status), Some(3));
        // The next gang attempt starts over.
        let next = assign_ranks(&[container("container_1_0001_01_000004", "a:1")]);
        d.set(2, &next, RankState::HELD);
        assert_eq!((d.gang_attempt, d.ranks.len()), (2, 1));
        assert_eq!(d.counts().held, 1);
    }

    #[test]
    fn the_file_is_written_whole_and_reads_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ranks = assign_ranks(&[container("container_1_0001_01_000002", "a:1")]);
        let mut d = GangRanks::default();
        d.set(1, &ranks, RankState::RUNNING);
        write(dir.path(), &d).expect("written");
        d.ended(&ranks[0].container.id, 0);
        write(dir.path(), &d).expect("written again");
        let text = std::fs::read_to_string(dir.path().join(RANKS_FILE)).expect("the file");
        let back: GangRanks = serde_json::from_str(&text).expect("JSON");
        assert_eq!(back, d);
        let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(v["ranks"][0]["state"], "COMPLETE");
        assert_eq!(v["ranks"][0]["exitStatus"], 0);
        assert_eq!(v["ranks"][0]["containerId"], "container_1_0001_01_000002");
        assert!(!dir.path().join(TEMP_FILE).exists());
        assert!(v.get("events").is_none(), "{v}");
    }

    #[test]
    fn events_read_back_and_say_what_happened() {
        let mut d = GangRanks::default();
        d.events.push(GangEvent::Restarted {
            attempt: 2,
            of: 4,
            because: "worker rank 1 failed: exit 1".into(),
        });
        d.events.push(GangEvent::Preempted {
            gang_attempt: 2,
            checkpoint: Some("ckpt-3 (step 3)".into()),
        });
        let v = serde_json::to_value(&d).expect("JSON");
        assert_eq!(v["events"][0]["event"], "RESTARTED");
        assert_eq!(v["events"][1]["gangAttempt"], 2);
        let back: GangRanks = serde_json::from_value(v).expect("back");
        assert_eq!(back, d);
        assert_eq!(
            d.events[0].line(),
            "Gang workers restarted: attempt 2 of 4, because worker rank 1 failed: exit 1"
        );
        assert_eq!(
            d.events[1].line(),
            "Gang workers preempted in gang attempt 2; resuming from checkpoint ckpt-3 (step 3)"
        );
        let none = GangEvent::Preempted {
            gang_attempt: 1,
            checkpoint: None,
        };
        assert!(none.line().ends_with("no checkpoint to resume from"));
    }
}
