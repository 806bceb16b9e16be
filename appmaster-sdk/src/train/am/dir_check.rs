//! The checkpoint directory checked before a gang's ranks start: every worker's node must
//! see the directory the AM sees (the same files, writable), or a restart could resume on a
//! node that does not find the checkpoint, and the AM's markers (`.spindle-preempted`,
//! `.spindle-resize`) would not reach the workers.
//!
//! Every gang attempt of a job with `--checkpoint-dir` (restarts included: the nodes may
//! differ) starts its containers with a probe instead of the worker command, through the
//! same held start the workers get (so the image is pulled and the shipped files localized
//! before the check):
//!
//! 1. the AM writes `DIR/.spindle-check-<token>` holding the token (its attempt id, the gang
//!    attempt and 16 random bytes);
//! 2. on each node, the first member's probe (in the container's own view: with `--image`,
//!    inside the image, where the directory is bind-mounted) reads the marker, writes
//!    `DIR/.spindle-check-<token>.<node rank>` holding the token, prints one line
//!    (`spindle-checkpoint-check: <verdict>`, [`NodeView`]) to its stdout and parks; the
//!    other members only park;
//! 3. the AM reads each probe's line from its NM's container log, then, for every node that
//!    saw the marker, the node's answer file (so the node's writes reach the AM too);
//! 4. the marker and answers are removed; if a node failed ([`Unseen`]) the attempt ends
//!    with [`DirCheckError::NotShared`] naming the nodes (the gang is released, no rank ran,
//!    the job fails); else every container is re-initialized with its worker command.
//!
//! The probe costs a held start and one re-initialization per container, and a few
//! milliseconds of reads and writes per node; a node that does not answer within
//! [`CHECK_TIMEOUT`] (a hung mount) fails the check.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use spindle_common::ids::NodeId;
use spindle_common::records::node::ContainerLaunchContext as Ctx;

use super::Attempt;
use crate::train::checkpoint::RESERVED_PREFIX;
use crate::train::RankInfo;

/// How long the AM waits for every node's probe to answer.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(30);
/// How often the AM reads the probes' logs while some have not answered.
const POLL: Duration = Duration::from_millis(100);
/// The names of the marker and the answers start so (Spindle's, never a checkpoint).
pub const CHECK_PREFIX: &str = ".spindle-check-";
/// The probe's environment: the token it must read, the marker's path and its answer's.
pub const ENV_CHECK_TOKEN: &str = "SPINDLE_CHECK_TOKEN";
pub const ENV_CHECK_MARKER: &str = "SPINDLE_CHECK_MARKER";
pub const ENV_CHECK_ANSWER: &str = "SPINDLE_CHECK_ANSWER";
/// The probe's stdout line starts so; its verdict ([`NodeView::word`]) follows.
pub const ANSWER_LINE: &str = "spindle-checkpoint-check: ";

/// What a checkpoint directory must be, said with every failure.
pub const REQUIREMENT: &str = "A checkpoint directory must be one directory that every node \
    mounts at the same path (NFS, a parallel file system such as Lustre, GPFS or CephFS, or a \
    bind mount of one), readable and writable by the job's user on every node that runs a \
    worker or the AM; not a node-local disk: after a restart, rank 0 may run on another node \
    and must find the checkpoint there";

/// The probe: reads the marker, writes the node's answer, says what it saw, parks until the
/// AM re-initializes the container with the worker command (or stops it). POSIX `sh`: it
/// also runs in images without bash.
const PROBE: &str = r#"d="$SPINDLE_CHECKPOINT_DIR"; m="$SPINDLE_CHECK_MARKER"; got=
if [ ! -d "$d" ]; then v=no-directory
elif [ ! -f "$m" ]; then v=no-marker
elif ! IFS= read -r got < "$m" || [ "$got" != "$SPINDLE_CHECK_TOKEN" ]; then v=other-marker
elif ! printf '%s\n' "$SPINDLE_CHECK_TOKEN" > "$SPINDLE_CHECK_ANSWER"; then v=not-writable
else v=sees; fi
echo "spindle-checkpoint-check: $v"
exec sleep 2147483647"#;
/// What the other members of a node run meanwhile.
const PARKED: &str = "exec sleep 2147483647";

/// What a node's probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeView {
    /// The marker with the token, and the answer written.
    Sees,
    /// No directory at that path.
    NoDirectory,
    /// The directory, but not the AM's marker: another directory at the same path.
    NoMarker,
    /// A marker with another token (a copy, or another job's).
    OtherMarker,
    /// The marker, but the node cannot write there.
    NotWritable,
}

impl NodeView {
    pub const ALL: [NodeView; 5] = [
        NodeView::Sees,
        NodeView::NoDirectory,
        NodeView::NoMarker,
        NodeView::OtherMarker,
        NodeView::NotWritable,
    ];

    /// The probe's word for it.
    pub fn word(self) -> &'static str {
        match self {
            NodeView::Sees => "sees",
            NodeView::NoDirectory => "no-directory",
            NodeView::NoMarker => "no-marker",
            NodeView::OtherMarker => "other-marker",
            NodeView::NotWritable => "not-writable",
        }
    }

    /// The verdict of the probe's line in a container's stdout, if the log has one.
    pub fn from_log(log: &str) -> Option<NodeView> {
        let word = log
            .lines()
            .find_map(|l| l.trim().strip_prefix(ANSWER_LINE))?;
        Self::ALL.into_iter().find(|v| v.word() == word.trim())
    }
}

/// Why a node fails the check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unseen {
    /// Its probe said so.
    Probe(NodeView),
    /// Its probe saw the marker and wrote its answer, but the AM does not see the answer.
    AnswerNotSeen,
    /// No answer within [`CHECK_TIMEOUT`].
    NoAnswer,
}

impl std::fmt::Display for Unseen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unseen::Probe(NodeView::NoDirectory) => write!(f, "no such directory"),
            Unseen::Probe(NodeView::NoMarker) => {
                write!(f, "a directory without the AM's marker: another directory")
            }
            Unseen::Probe(NodeView::OtherMarker) => {
                write!(f, "a marker with another token: another directory")
            }
            Unseen::Probe(NodeView::NotWritable) => write!(f, "the directory, not writable"),
            Unseen::Probe(NodeView::Sees) => write!(f, "the directory"),
            Unseen::AnswerNotSeen => {
                write!(f, "its own write there does not reach the AM's node")
            }
            Unseen::NoAnswer => write!(
                f,
                "no answer within {} s (a hung mount, or the probe could not run: see the \
                 container's stderr)",
                CHECK_TIMEOUT.as_secs()
            ),
        }
    }
}

/// Why the gang does not start.
#[derive(Debug, thiserror::Error)]
pub enum DirCheckError {
    #[error(
        "cannot write the checkpoint directory check's marker {}: {error}. {REQUIREMENT}",
        marker.display()
    )]
    MarkerNotWritten {
        marker: PathBuf,
        error: std::io::Error,
    },
    #[error("{}", not_shared_text(dir, nodes, *of))]
    NotShared {
        dir: String,
        /// Each node that fails, and how.
        nodes: BTreeMap<NodeId, Unseen>,
        /// The gang's nodes.
        of: usize,
    },
}

/// `checkpoint directory /c is not shared: 2 of 3 node(s) do not see the AM's files there:
/// a:1 (no such directory), b:1 (...). A checkpoint directory must be ...`
fn not_shared_text(dir: &str, nodes: &BTreeMap<NodeId, Unseen>, of: usize) -> String {
    let mut s = format!(
        "checkpoint directory {dir} is not shared by the gang's nodes: {} of {of} node(s) do \
         not see the AM's files there, so no rank was started: ",
        nodes.len()
    );
    let list: Vec<String> = nodes.iter().map(|(n, u)| format!("{n} ({u})")).collect();
    s.push_str(&list.join(", "));
    let _ = write!(s, ". {REQUIREMENT}");
    s
}

/// The check's token: the AM attempt, the gang attempt and 16 random bytes (hex).
pub fn token(attempt_id: &str, gang_attempt: u32, random: [u8; 16]) -> String {
    let mut t = format!("{attempt_id}-{gang_attempt}-");
    for b in random {
        let _ = write!(t, "{b:02x}");
    }
    t
}

/// `DIR/.spindle-check-<token>`.
pub fn marker_path(dir: &Path, token: &str) -> PathBuf {
    dir.join(format!("{CHECK_PREFIX}{token}"))
}

/// `DIR/.spindle-check-<token>.<node rank>`: a node's answer.
pub fn answer_path(dir: &Path, token: &str, node_rank: u32) -> PathBuf {
    dir.join(format!("{CHECK_PREFIX}{token}.{node_rank}"))
}

/// The ranks whose containers run the probe: each node's first (local rank 0).
pub fn probing(ranks: &[RankInfo]) -> impl Iterator<Item = &RankInfo> {
    ranks.iter().filter(|r| r.local_rank == 0)
}

const _: () = assert!(CHECK_PREFIX.len() > RESERVED_PREFIX.len());

/// A started check: the marker is written, the probes are to be heard.
pub(super) struct DirCheck<'a> {
    pub(super) dir: &'a Path,
    pub(super) token: String,
}

impl DirCheck<'_> {
    /// Writes the marker (creating the directory, as a worker would, if it is missing).
    pub(super) fn write_marker(&self) -> Result<(), DirCheckError> {
        let marker = marker_path(self.dir, &self.token);
        std::fs::create_dir_all(self.dir)
            .and_then(|()| std::fs::write(&marker, format!("{}\n", self.token)))
            .map_err(|error| DirCheckError::MarkerNotWritten { marker, error })
    }

    /// The probe's launch context for `r` (its worker context `worker`, with the probe or
    /// the parked command).
    pub(super) fn probe_ctx(&self, r: &RankInfo, mut worker: Ctx) -> Ctx {
        let probe = r.local_rank == 0;
        worker.commands = vec![if probe { PROBE } else { PARKED }.to_string()];
        let env = &mut worker.environment;
        env.insert(ENV_CHECK_TOKEN.into(), self.token.clone());
        let m = marker_path(self.dir, &self.token);
        env.insert(ENV_CHECK_MARKER.into(), m.to_string_lossy().into_owned());
        let a = answer_path(self.dir, &self.token, r.node_rank);
        env.insert(ENV_CHECK_ANSWER.into(), a.to_string_lossy().into_owned());
        worker
    }

    /// Whether the AM sees `r`'s node's answer, holding the token.
    fn answer_seen(&self, r: &RankInfo) -> bool {
        std::fs::read_to_string(answer_path(self.dir, &self.token, r.node_rank))
            .is_ok_and(|t| t.trim_end() == self.token)
    }

    /// Removes the marker and the answers the AM sees.
    pub(super) fn clean_up(&self, ranks: &[RankInfo]) {
        let _ = std::fs::remove_file(marker_path(self.dir, &self.token));
        for r in probing(ranks) {
            let _ = std::fs::remove_file(answer_path(self.dir, &self.token, r.node_rank));
        }
    }

    /// The nodes that fail, from the probes' verdicts (`heard`: a node rank's verdict; a
    /// node left out did not answer).
    pub(super) fn judge(
        &self,
        ranks: &[RankInfo],
        heard: &BTreeMap<u32, NodeView>,
    ) -> BTreeMap<NodeId, Unseen> {
        probing(ranks)
            .filter_map(|r| {
                let unseen = match heard.get(&r.node_rank) {
                    None => Unseen::NoAnswer,
                    Some(NodeView::Sees) if self.answer_seen(r) => return None,
                    Some(NodeView::Sees) => Unseen::AnswerNotSeen,
                    Some(v) => Unseen::Probe(*v),
                };
                Some((r.container.node_id.clone(), unseen))
            })
            .collect()
    }
}

impl Attempt<'_> {
    /// Starts the gang with the checkpoint directory checked first ([`self`]): every
    /// container runs the probe; only if every node sees the AM's files there is each
    /// re-initialized with its worker command. The check's refusal, or the first failure to
    /// start, if any.
    pub(super) async fn start_checked(
        &self,
        dir: &Path,
        ranks: &[RankInfo],
        n: u32,
        master_addr: &str,
        port: u16,
        out: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Option<String>, DirCheckError> {
        let random = spindle_common::cluster_secret::random_nonce().unwrap_or_else(|e| {
            tracing::warn!(error = %e, "no random bytes for the check's token");
            Default::default()
        });
        let first = ranks.first().map(|r| r.container.id.attempt_id.to_string());
        let check = DirCheck {
            dir,
            token: token(&first.unwrap_or_default(), self.number, random),
        };
        check.write_marker()?;
        let probes = ranks
            .iter()
            .map(|r| check.probe_ctx(r, self.worker_ctx(r, n, master_addr, port)))
            .collect();
        let nodes = probing(ranks).count();
        out(&format!(
            "checking that the {nodes} node(s) of the gang see the checkpoint directory {}",
            dir.display()
        ));
        if let Some(failure) = self
            .launch(ranks, probes, "set up for the check", out)
            .await
        {
            check.clean_up(ranks);
            return Ok(Some(failure));
        }
        let heard = self.hear_probes(ranks).await;
        let unseen = check.judge(ranks, &heard);
        check.clean_up(ranks);
        if !unseen.is_empty() {
            return Err(DirCheckError::NotShared {
                dir: dir.display().to_string(),
                nodes: unseen,
                of: nodes,
            });
        }
        out(&format!(
            "all {nodes} node(s) see the checkpoint directory {}",
            dir.display()
        ));
        let mut failure = None;
        for (r, res) in self
            .reinit_workers(ranks.iter(), n, master_addr, port)
            .await
        {
            let c = &r.container;
            match res {
                Ok(()) => out(&format!(
                    "worker rank {} started in container {} on node {} (local rank {} of {})",
                    r.rank, c.id, c.node_id, r.local_rank, r.local_world_size
                )),
                Err(e) => {
                    let l = format!(
                        "worker rank {} could not be started in container {} on node {}: {e}",
                        r.rank, c.id, c.node_id
                    );
                    out(&l);
                    failure.get_or_insert(l);
                }
            }
        }
        Ok(failure)
    }

    /// Reads the probes' verdicts from their stdout logs until every node has answered or
    /// [`CHECK_TIMEOUT`] has passed: node rank -> verdict.
    pub(super) async fn hear_probes(&self, ranks: &[RankInfo]) -> BTreeMap<u32, NodeView> {
        let began = Instant::now();
        let mut heard = BTreeMap::new();
        let all: BTreeSet<u32> = probing(ranks).map(|r| r.node_rank).collect();
        loop {
            let pending = probing(ranks).filter(|r| !heard.contains_key(&r.node_rank));
            let logs = futures::future::join_all(pending.map(|r| async move {
                let c = &r.container;
                let log = self
                    .nm
                    .container_log(&c.node_http_address, &c.id, "stdout")
                    .await;
                (r.node_rank, log.ok().and_then(|l| NodeView::from_log(&l)))
            }))
            .await;
            for (node_rank, view) in logs {
                if let Some(v) = view {
                    heard.insert(node_rank, v);
                }
            }
            if heard.len() == all.len() || began.elapsed() >= CHECK_TIMEOUT {
                return heard;
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(node: &str, rank: u32, local_rank: u32, node_rank: u32) -> RankInfo {
        RankInfo {
            container: crate::train::tests::container(u64::from(rank) + 2, node),
            rank,
            local_rank,
            local_world_size: 2,
            node_rank,
        }
    }

    #[test]
    fn the_probe_s_line_is_read_back_by_its_word() {
        for v in NodeView::ALL {
            let log = format!("noise\n{ANSWER_LINE}{}\nmore\n", v.word());
            assert_eq!(NodeView::from_log(&log), Some(v));
        }
        assert_eq!(NodeView::from_log("nothing yet"), None);
        assert_eq!(NodeView::from_log(&format!("{ANSWER_LINE}maybe")), None);
        // The probe prints exactly these words.
        for v in NodeView::ALL {
            assert!(PROBE.contains(&format!("v={}", v.word())), "{}", v.word());
        }
    }

    #[test]
    fn the_token_and_names_are_unique_per_attempt_and_reserved() {
        let t = token("appattempt_1_0001_000001", 2, [0xab; 16]);
        assert_eq!(t, format!("appattempt_1_0001_000001-2-{}", "ab".repeat(16)));
        let d = Path::new("/ckpt");
        let m = marker_path(d, &t);
        assert!(m.starts_with(d));
        let name = m.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with(RESERVED_PREFIX), "{name}");
        assert_ne!(answer_path(d, &t, 0), answer_path(d, &t, 1));
        assert_ne!(answer_path(d, &t, 0), m);
    }

    #[test]
    fn the_message_names_each_node_that_does_not_see_it_and_the_requirement() {
        let nodes: BTreeMap<NodeId, Unseen> = [
            ("nm1:8041", Unseen::Probe(NodeView::NoDirectory)),
            ("nm2:8041", Unseen::Probe(NodeView::NoMarker)),
            ("nm3:8041", Unseen::NoAnswer),
        ]
        .into_iter()
        .map(|(n, u)| (n.parse().unwrap(), u))
        .collect();
        let e = DirCheckError::NotShared {
            dir: "/tmp/ckpt".into(),
            nodes,
            of: 4,
        };
        let s = e.to_string();
        assert!(
            s.contains("checkpoint directory /tmp/ckpt is not shared"),
            "{s}"
        );
        assert!(s.contains("3 of 4 node(s)"), "{s}");
        assert!(s.contains("nm1:8041 (no such directory)"), "{s}");
        assert!(
            s.contains("nm2:8041 (a directory without the AM's marker"),
            "{s}"
        );
        assert!(s.contains("nm3:8041 (no answer within 30 s"), "{s}");
        assert!(s.contains("no rank was started"), "{s}");
        assert!(s.contains("every node mounts at the same path"), "{s}");
        assert!(s.contains("not a node-local disk"), "{s}");
        assert!(!s.contains('\n'), "one line: {s}");
    }

    #[test]
    fn one_probe_per_node_and_the_verdicts_are_judged_against_the_answers() {
        let dir = tempfile::tempdir().unwrap();
        let check = DirCheck {
            dir: dir.path(),
            token: token("appattempt_1_0001_000001", 1, [7; 16]),
        };
        let ranks = [
            rank("a:1", 0, 0, 0),
            rank("a:1", 1, 1, 0),
            rank("b:1", 2, 0, 1),
            rank("c:1", 3, 0, 2),
            rank("d:1", 4, 0, 3),
        ];
        assert_eq!(
            probing(&ranks).map(|r| r.rank).collect::<Vec<_>>(),
            [0, 2, 3, 4]
        );
        let worker = Ctx {
            commands: vec!["exec python3 train.py".into()],
            ..Default::default()
        };
        let p = check.probe_ctx(&ranks[2], worker.clone());
        assert_eq!(p.commands, [PROBE]);
        assert_eq!(
            p.environment[ENV_CHECK_ANSWER],
            answer_path(dir.path(), &check.token, 1).to_string_lossy()
        );
        assert_eq!(check.probe_ctx(&ranks[1], worker).commands, [PARKED]);

        check.write_marker().unwrap();
        let marker = marker_path(dir.path(), &check.token);
        assert_eq!(
            std::fs::read_to_string(&marker).unwrap(),
            format!("{}\n", check.token)
        );
        // a answered and wrote; b said it sees but its answer is not here; c has another
        // directory; d never answered.
        std::fs::write(answer_path(dir.path(), &check.token, 0), &check.token).unwrap();
        let heard: BTreeMap<u32, NodeView> = [
            (0, NodeView::Sees),
            (1, NodeView::Sees),
            (2, NodeView::NoMarker),
        ]
        .into();
        let failed = check.judge(&ranks, &heard);
        let failed: Vec<(String, Unseen)> = failed
            .into_iter()
            .map(|(n, u)| (n.to_string(), u))
            .collect();
        assert_eq!(
            failed,
            [
                ("b:1".to_string(), Unseen::AnswerNotSeen),
                ("c:1".to_string(), Unseen::Probe(NodeView::NoMarker)),
                ("d:1".to_string(), Unseen::NoAnswer),
            ]
        );
        check.clean_up(&ranks);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_missing_directory_is_created_and_an_unwritable_one_named() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("new/ckpt");
        let check = DirCheck {
            dir: &sub,
            token: "t".into(),
        };
        check.write_marker().unwrap();
        assert!(marker_path(&sub, "t").is_file());
        let file = dir.path().join("a-file");
        std::fs::write(&file, "x").unwrap();
        let check = DirCheck {
            dir: &file,
            token: "t".into(),
        };
        let e = check.write_marker().unwrap_err().to_string();
        assert!(e.contains("a-file/.spindle-check-t"), "{e}");
        assert!(e.contains("A checkpoint directory must be"), "{e}");
    }
}
