//! The training application master.
//!
//! Registers, then runs gang attempts until one succeeds or the restarts run out. An
//! attempt: ask for the N workers as one gang (printing the RM's word on why it waits), rank
//! the granted containers, ask rank 0's NM for a free `MASTER_PORT`, start every worker at
//! once (one start call per node, all nodes in parallel: the job cannot begin before its
//! last worker does, so start skew is wasted time on every GPU), then watch. Any worker
//! ending other than with 0 (a failure, a lost node's -100) fails the attempt: the AM stops
//! and releases the rest and asks for the gang again, telling the new workers the attempt
//! number, at most `--max-restarts` times. The application succeeds only when all N workers
//! of one attempt exit 0.
//!
//! A preemption is not a failure. When the RM's notice names the gang's workers, the AM
//! writes the marker `.spindle-preempted` (the RM's deadline) into the checkpoint directory,
//! sends every worker SIGTERM through its NM (`GRACEFUL_SHUTDOWN`: checkpoint and exit),
//! acknowledges the notice with the time left to the deadline, waits for the workers to exit
//! (they complete with -102), and asks for the gang again; the new workers resume from the
//! checkpoint. That costs no restart. While the workers run, the AM reports the newest file
//! of the checkpoint directory to the RM as the job's checkpoint (see [`super::checkpoint`]).
//!
//! An elastic job (`--min-workers A --max-workers B`) asks for one elastic gang and starts
//! the workers at the size the RM grants. When the RM grows the gang (a resize offer) or
//! shrinks it (a resize demand), the AM restarts the whole gang at the new size without
//! giving its containers back: it writes the marker `.spindle-resize`, re-initializes every
//! running worker's container with a placeholder (the NM's SIGTERM, then SIGKILL after the
//! grace: the worker checkpoints and exits, the container stays), so that every worker has
//! checkpointed before any starts again; gives the demanded containers back; then
//! re-initializes the kept containers with the worker command and starts the offered ones,
//! every worker with its new `RANK`, `WORLD_SIZE`, `MASTER_ADDR`/`MASTER_PORT` (rank 0's
//! host, a fresh port) and `SPINDLE_RESIZE_COUNT`. A resize costs no restart. Rank 0's
//! measured throughput (`.spindle-throughput`) goes to the RM with the current size.
//!
//! Files: this module (an attempt), `start.rs` (starting its containers), `dir_check.rs`
//! (the checkpoint directory checked before the ranks start), `watch.rs` (its heartbeat
//! loop), `resize.rs` (in-place elastic resizes), `gangs.rs` (the attempt loop and
//! take-over).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use std::path::Path;

use spindle_common::records::am::{GangState, GangStatus};
use spindle_common::records::node::ContainerLaunchContext as Ctx;
use spindle_common::states::FinalApplicationStatus;

use super::checkpoint;
use super::{
    assign_ranks, placement_name, size_rule_text, worker_env, RankInfo, TrainAmConfig,
    TrainConfigError, DEFAULT_FAIL_FAST_WINDOW, ENV_FAIL_FAST_WINDOW_MS, GANG_ID, RESIZE_COUNT,
    WORKER_REQUEST_ID,
};
use crate::am_client::AmError;
use crate::amrm::{AmRmClient, GangDemand, GangOffer};
use crate::gang::{GangError, GangMember, GangRequest};
use crate::nm_client::NmClient;
use crate::ship::Shipped;

pub mod dir_check;
mod gangs;
mod resize;
mod start;
mod watch;

pub use gangs::{one_line, run_am, run_am_with};

/// How long the AM keeps heartbeating through failures before it gives up.
pub const RM_UNREACHABLE_LIMIT: Duration = Duration::from_secs(60);
/// Tries at asking rank 0's NM for a free port.
const FREE_PORT_TRIES: u32 = 3;
/// How long the NMs hold set-up workers for the release: far beyond the release calls' few
/// milliseconds, so it only matters if this AM dies between the two phases.
const HOLD_TIMEOUT: Duration = Duration::from_secs(120);
/// How many lines of the first failed rank's stderr a diagnostic quotes.
const STDERR_LINES: usize = 10;

/// What the training AM gets besides its [`TrainAmConfig`], from its environment too: the
/// code shipped to its workers ([`crate::ship`]) and the fail-fast window.
#[derive(Debug, Clone, PartialEq)]
pub struct AmExtras {
    pub shipped: Shipped,
    /// A gang attempt whose workers all fail with the same exit status within this long of
    /// starting (or before any checkpoint) is not restarted; zero: never fail fast.
    pub fail_fast_window: Duration,
}

impl Default for AmExtras {
    fn default() -> Self {
        Self {
            shipped: Shipped::default(),
            fail_fast_window: DEFAULT_FAIL_FAST_WINDOW,
        }
    }
}

impl AmExtras {
    /// Reads [`ENV_FAIL_FAST_WINDOW_MS`] and what [`Shipped::from_lookup`] reads for
    /// application `app`.
    pub fn from_lookup(
        app: spindle_common::ids::ApplicationId,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, TrainConfigError> {
        let fail_fast_window = match lookup(ENV_FAIL_FAST_WINDOW_MS) {
            Some(v) => {
                Duration::from_millis(v.trim().parse().map_err(|_| TrainConfigError::Invalid {
                    name: ENV_FAIL_FAST_WINDOW_MS,
                    value: v.clone(),
                    reason: "not a number of milliseconds".into(),
                })?)
            }
            None => DEFAULT_FAIL_FAST_WINDOW,
        };
        Ok(Self {
            shipped: Shipped::from_lookup(app, &lookup)?,
            fail_fast_window,
        })
    }

    pub fn from_env(app: spindle_common::ids::ApplicationId) -> Result<Self, TrainConfigError> {
        Self::from_lookup(app, |k| std::env::var(k).ok())
    }
}

/// A worker of a gang attempt that ended with a non-zero exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerExit {
    pub rank: u32,
    pub exit_status: i32,
    /// How long after the attempt's workers started.
    pub after: Duration,
}

/// Whether a gang attempt must not be restarted: every one of its `workers` failed (`exits`)
/// with the same positive exit status (a framework status, negative, is not the program's
/// doing), and either all within `window` of starting, or before any checkpoint was written
/// (`checkpointed` is `Some(false)`: a checkpoint directory is set and has no file). An
/// attempt with a checkpoint (`Some(true)`) is never stopped: fail-fast is for a job that
/// cannot even start, and one that checkpointed did; its failures are restarted within
/// `--max-restarts`. The shared exit status if so. A zero window never fails fast.
pub fn fail_fast(
    exits: &[WorkerExit],
    workers: u32,
    window: Duration,
    checkpointed: Option<bool>,
) -> Option<i32> {
    let first = exits.first()?;
    let all = exits.len() == workers as usize;
    (all && may_fail_fast(exits, 0, window, checkpointed)).then_some(first.exit_status)
}

/// Whether the failures so far may still add up to [`fail_fast`] once the rest of the gang
/// has ended: worth waiting for.
fn may_fail_fast(
    exits: &[WorkerExit],
    succeeded: usize,
    window: Duration,
    checkpointed: Option<bool>,
) -> bool {
    let Some(first) = exits.first() else {
        return false;
    };
    let early = match checkpointed {
        Some(true) => false,
        Some(false) => true,
        None => exits.iter().all(|e| e.after <= window),
    };
    !window.is_zero()
        && succeeded == 0
        && first.exit_status > 0
        && exits.iter().all(|e| e.exit_status == first.exit_status)
        && early
}

/// The last [`STDERR_LINES`] lines of a log (a traceback ends with its error), indented
/// under the diagnostic, `  ...` first when lines were left out.
pub fn last_lines(log: &str) -> String {
    let all: Vec<&str> = log.lines().collect();
    let skip = all.len().saturating_sub(STDERR_LINES);
    let mut lines: Vec<String> = Vec::with_capacity(STDERR_LINES + 1);
    if skip > 0 {
        lines.push("  ...".into());
    }
    lines.extend(all[skip..].iter().map(|l| {
        let l = l.trim_end();
        match l.char_indices().nth(300) {
            Some((i, _)) => format!("  {}...", &l[..i]),
            None => format!("  {l}"),
        }
    }));
    lines.join("\n")
}

/// Why a gang attempt failed: one line, and the excerpt of the stderr of the rank that
/// failed first, when it was read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Failure {
    pub why: String,
    /// `Last lines of rank 1's stderr (container on node):` and the lines ([`last_lines`]).
    pub stderr: Option<String>,
}

impl From<String> for Failure {
    fn from(why: String) -> Self {
        Self { why, stderr: None }
    }
}

/// How the AM ended.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainReport {
    pub final_status: FinalApplicationStatus,
    pub diagnostics: String,
    /// Gang attempts made (1 when the first one succeeded), preempted ones included.
    pub attempts: u32,
    /// Gang attempts that ended in a preemption (they cost no restart).
    pub preemptions: u32,
    /// Elastic jobs: resizes of the gang (they cost no restart either).
    pub resizes: u32,
}

/// How one gang attempt ended.
enum AttemptEnd {
    /// Every worker (this many) exited 0.
    Succeeded(u32),
    /// A worker failed or could not start: the gang may be restarted.
    WorkerFailed(Failure),
    /// The RM took the gang back; its workers were told to checkpoint and have exited.
    Preempted,
    /// The gang was never granted (timed out, refused): asking again the same way will not
    /// help.
    Fatal(String),
    /// Every worker failed alike soon after starting ([`fail_fast`]): a restart would fail
    /// the same way. The diagnostic quotes the stderr of the rank that failed first.
    FailedFast(String),
}

/// `gang workers is RESERVED: needs ...; reserved nodes a:1, b:1`.
pub fn status_line(s: &GangStatus) -> String {
    let state = match s.state {
        GangState::PENDING => "PENDING",
        GangState::RESERVED => "RESERVED",
        GangState::ALLOCATED => "ALLOCATED",
        GangState::TIMED_OUT => "TIMED_OUT",
        GangState::FAILED => "FAILED",
        GangState::PREEMPTED => "PREEMPTED",
    };
    let mut l = format!("gang {} is {state}", s.id);
    let d = s.diagnostics.trim();
    if !d.is_empty() {
        l.push_str(": ");
        l.push_str(d);
    }
    if !s.reserved_nodes.is_empty() && !d.contains("reserved") {
        let nodes: Vec<String> = s.reserved_nodes.iter().map(ToString::to_string).collect();
        l.push_str(&format!(" (reserved nodes {})", nodes.join(", ")));
    }
    if !s.failed_containers.is_empty() {
        let ids: Vec<String> = s
            .failed_containers
            .iter()
            .map(ToString::to_string)
            .collect();
        l.push_str(&format!(" (failed members {})", ids.join(", ")));
    }
    l
}

struct Attempt<'a> {
    cfg: &'a TrainAmConfig,
    nm: &'a NmClient,
    number: u32,
    /// The attempt before this one was preempted: a gang timeout asks again.
    after_preemption: bool,
    /// Resizes of the job so far (all attempts), what `SPINDLE_RESIZE_COUNT` says.
    resizes: std::cell::Cell<u32>,
    extras: &'a AmExtras,
    /// The workers were started by this attempt (not taken over from a previous AM): how
    /// long after their start they failed means something ([`fail_fast`]).
    fresh: bool,
}

/// A resize the RM asked for, as the attempt carries it out.
enum Resize {
    Grow(GangOffer),
    Shrink(GangDemand),
}

/// A preemption under way in an attempt.
struct Preempting {
    noticed_at: Instant,
    /// The RM's kill deadline, ms since the epoch.
    deadline_ms: u64,
}

impl Attempt<'_> {
    fn gang_request(&self) -> GangRequest {
        let mut member = GangMember::new(
            self.cfg.worker_resources.clone(),
            self.cfg.workers,
            WORKER_REQUEST_ID,
        );
        if let Some(l) = &self.cfg.node_label_expression {
            member = member.node_label_expression(l.clone());
        }
        let mut capability = self.cfg.worker_resources.clone();
        if let Some(Ok(Some(range))) = self.cfg.cpus_per_gpu.map(|c| c.apply(&mut capability)) {
            member = member.vcores_range(range);
        }
        let req = match &self.cfg.elastic {
            Some(e) => GangRequest::elastic(GANG_ID, member, e.min, e.max, e.rule)
                .size_multiple(e.multiple)
                .throughput(e.throughput.clone()),
            None => GangRequest::new(GANG_ID, vec![member]),
        };
        let mut req = req
            .cpu_throughput(self.cfg.cpu_throughput.clone())
            .placement(self.cfg.placement)
            .max_nodes(self.cfg.max_nodes);
        if let Some(image) = spindle_common::runtime_request::requested_image(&self.cfg.worker_env)
        {
            req = req.image(image);
        }
        if let Some(t) = self.cfg.gang_timeout {
            req = req.timeout(t);
        }
        if let Some(m) = &self.cfg.gpu_model {
            req = req.gpu_model(m.clone());
        }
        req
    }

    async fn run(
        &self,
        amrm: &mut AmRmClient,
        out: &mut (dyn FnMut(&str) + Send),
    ) -> Result<AttemptEnd, AmError> {
        let cfg = self.cfg;
        let n = cfg.workers;
        let how_many = match &cfg.elastic {
            Some(e) => format!(
                "{} to {} elastic workers (sizes {})",
                e.min,
                e.max,
                size_rule_text(e.rule, e.multiple)
            ),
            None => format!("{n} workers"),
        };
        let mut asked = format!(
            "gang {GANG_ID} attempt {}: asking for {how_many} of {} (placement {}",
            self.number,
            cfg.worker_resources,
            placement_name(cfg.placement)
        );
        if cfg.max_nodes > 0 {
            asked.push_str(&format!(", at most {} nodes", cfg.max_nodes));
        }
        if let Some(t) = cfg.gang_timeout {
            asked.push_str(&format!(", timeout {} ms", t.as_millis()));
        }
        if let Some(l) = &cfg.node_label_expression {
            asked.push_str(&format!(", partition '{l}'"));
        }
        if let Some(m) = &cfg.gpu_model {
            asked.push_str(&format!(", GPU model '{m}'"));
        }
        asked.push(')');
        out(&asked);
        let asked_at = Instant::now();
        let containers = loop {
            let granted = amrm
                .request_gang_with(self.gang_request(), &mut |s| out(&status_line(s)))
                .await;
            match granted {
                Ok(c) => break c,
                // The gang ran on this cluster before it was preempted: it fits again once
                // the preemptor is done, however long that takes.
                Err(GangError::TimedOut { diagnostics, .. }) if self.after_preemption => {
                    out(&format!(
                        "gang {GANG_ID} not granted within its timeout after the preemption \
                         ({diagnostics}); asking again"
                    ));
                }
                Err(GangError::TimedOut { diagnostics, .. }) => {
                    return Ok(AttemptEnd::Fatal(format!(
                        "the gang of {n} workers was not granted in time: {diagnostics}"
                    )))
                }
                Err(GangError::Failed { diagnostics, .. }) => {
                    return Ok(AttemptEnd::WorkerFailed(
                        format!("the gang failed before it started: {diagnostics}").into(),
                    ))
                }
                Err(GangError::Am(e)) => return Err(e),
                Err(e) => return Ok(AttemptEnd::Fatal(e.to_string())),
            }
        };
        let ranks = assign_ranks(&containers);
        let n = ranks.len() as u32;
        let nodes: BTreeSet<String> = ranks
            .iter()
            .map(|r| r.container.node_id.to_string())
            .collect();
        out(&format!(
            "gang {GANG_ID} granted after {} ms: {n} workers on {} node(s): {}",
            asked_at.elapsed().as_millis(),
            nodes.len(),
            nodes.iter().cloned().collect::<Vec<_>>().join(", ")
        ));
        let Some(master) = ranks.first().map(|r| r.container.clone()) else {
            return Ok(AttemptEnd::Fatal("the gang was granted empty".into()));
        };
        let port = match self.free_port(&master).await {
            Ok(p) => p,
            Err(e) => {
                return Ok(AttemptEnd::WorkerFailed(
                    format!(
                        "cannot get a free port on rank 0's node {}: {e}",
                        master.node_id
                    )
                    .into(),
                ))
            }
        };
        let master_addr = master.node_id.host.clone();
        out(&format!(
            "rendezvous: MASTER_ADDR={master_addr} MASTER_PORT={port} WORLD_SIZE={n}"
        ));
        // A preemption's marker is for the workers it stopped, not for these.
        if let Some(dir) = &cfg.checkpoint_dir {
            if let Err(e) = checkpoint::remove_marker(Path::new(dir)) {
                out(&format!(
                    "cannot remove the preemption marker in {dir}: {e}; the workers will see it"
                ));
            }
        }
        super::status::held(self.number, &ranks);
        let started = match cfg
            .checkpoint_dir
            .as_deref()
            .filter(|_| cfg.checkpoint_check)
        {
            Some(dir) => match self
                .start_checked(Path::new(dir), &ranks, n, &master_addr, port, out)
                .await
            {
                Ok(started) => started,
                Err(e) => return Ok(AttemptEnd::Fatal(e.to_string())),
            },
            None => self.start_all(&ranks, n, &master_addr, port, out).await,
        };
        if let Some(failure) = started {
            return Ok(AttemptEnd::WorkerFailed(failure.into()));
        }
        self.watch(amrm, &ranks, out).await
    }

    /// One worker's launch context at this size.
    fn worker_ctx(&self, r: &RankInfo, n: u32, master_addr: &str, port: u16) -> Ctx {
        let mut environment = worker_env(self.cfg, r, n, master_addr, port, self.number);
        if self.cfg.elastic.is_some() {
            environment.insert(RESIZE_COUNT.into(), self.resizes.get().to_string());
        }
        Ctx {
            commands: vec![self.cfg.command_line()],
            environment,
            local_resources: self.extras.shipped.resources.clone(),
        }
    }

    /// The fail-fast window; zero (never) for workers this attempt did not start.
    fn fail_fast_window(&self) -> Duration {
        if self.fresh {
            self.extras.fail_fast_window
        } else {
            Duration::ZERO
        }
    }

    /// Whether the checkpoint directory has a checkpoint (None: no directory).
    fn checkpointed(&self) -> Option<bool> {
        self.cfg
            .checkpoint_dir
            .as_deref()
            .map(|d| checkpoint::latest(Path::new(d)).is_some())
    }

    /// Why the attempt is not restarted, with the last lines of the stderr of the rank that
    /// failed first.
    async fn fail_fast_diagnostic(
        &self,
        status: i32,
        exits: &[WorkerExit],
        ranks: &[RankInfo],
    ) -> String {
        let window = self.fail_fast_window();
        let latest = exits.iter().map(|e| e.after).max().unwrap_or_default();
        let when = if latest <= window {
            format!("within {} ms of starting", latest.as_millis())
        } else {
            format!(
                "before any checkpoint was written to {}",
                self.cfg.checkpoint_dir.as_deref().unwrap_or("")
            )
        };
        let d = format!(
            "all {} workers of gang attempt {} failed with exit status {status} {when}; not \
             restarting the gang, which would fail the same way (fail-fast window {} ms)",
            exits.len(),
            self.number,
            window.as_millis()
        );
        match self.first_failed_stderr(exits, ranks).await {
            Some(q) => format!("{d}\n{q}"),
            None => d,
        }
    }

    /// The last lines of the stderr of the rank that failed first (`exits` are in the order
    /// their ends were reported), read from its NM's container log; None without a failure.
    async fn first_failed_stderr(
        &self,
        exits: &[WorkerExit],
        ranks: &[RankInfo],
    ) -> Option<String> {
        let first = exits.first()?;
        let r = ranks.iter().find(|r| r.rank == first.rank)?;
        let c = &r.container;
        let rank = first.rank;
        Some(
            match self
                .nm
                .container_log(&c.node_http_address, &c.id, "stderr")
                .await
            {
                Ok(log) if !log.trim().is_empty() => format!(
                    "Last lines of rank {rank}'s stderr ({} on {}):\n{}",
                    c.id,
                    c.node_id,
                    last_lines(&log)
                ),
                Ok(_) => format!("Rank {rank}'s stderr ({} on {}) is empty", c.id, c.node_id),
                Err(e) => format!(
                    "Rank {rank}'s stderr ({} on {}) could not be read: {e}",
                    c.id, c.node_id
                ),
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exit(rank: u32, exit_status: i32, after_ms: u64) -> WorkerExit {
        WorkerExit {
            rank,
            exit_status,
            after: Duration::from_millis(after_ms),
        }
    }

    #[test]
    fn a_gang_fails_fast_only_when_every_worker_failed_alike_and_early() {
        let w = Duration::from_secs(30);
        let all = [exit(0, 1, 200), exit(1, 1, 250)];
        assert_eq!(fail_fast(&all, 2, w, None), Some(1));
        // Not every worker failed (one still runs or succeeded).
        assert_eq!(fail_fast(&all[..1], 2, w, None), None);
        // Different statuses: something else went on.
        assert_eq!(
            fail_fast(&[exit(0, 1, 200), exit(1, 2, 250)], 2, w, None),
            None
        );
        // Framework statuses (lost node, preemption) are not the program's failure.
        assert_eq!(
            fail_fast(&[exit(0, -100, 10), exit(1, -100, 10)], 2, w, None),
            None
        );
        // Late: restarted as usual, unless no checkpoint was ever written.
        let late = [exit(0, 1, 200), exit(1, 1, 45_000)];
        assert_eq!(fail_fast(&late, 2, w, None), None);
        assert_eq!(fail_fast(&late, 2, w, Some(true)), None);
        assert_eq!(fail_fast(&late, 2, w, Some(false)), Some(1));
        // A zero window turns it off; an empty gang never fails fast.
        assert_eq!(fail_fast(&all, 2, Duration::ZERO, Some(false)), None);
        assert_eq!(fail_fast(&[], 0, w, None), None);
        // Worth waiting for the rest while every failure so far is alike and early.
        assert!(may_fail_fast(&all[..1], 0, w, None));
        assert!(!may_fail_fast(&all[..1], 1, w, None), "one succeeded");
        assert!(!may_fail_fast(&[exit(0, 1, 40_000)], 0, w, Some(true)));
        assert!(may_fail_fast(&[exit(0, 1, 40_000)], 0, w, Some(false)));
        assert!(!may_fail_fast(&[], 0, w, None));
        // An attempt that checkpointed is never stopped, however early it failed.
        assert_eq!(fail_fast(&all, 2, w, Some(true)), None);
        assert!(!may_fail_fast(&all[..1], 0, w, Some(true)));
    }

    #[test]
    fn the_diagnostic_quotes_the_last_lines() {
        let log: String = (1..=12).map(|i| format!("line {i}\n")).collect();
        let q = last_lines(&log);
        assert!(q.starts_with("  ...\n  line 3\n  line 4"), "{q}");
        assert!(q.ends_with("  line 12"), "{q}");
        assert!(!q.contains("line 2\n"), "{q}");
        assert_eq!(last_lines("boom"), "  boom");
        assert_eq!(last_lines("a\nb\n"), "  a\n  b");
        let long = "x".repeat(400);
        assert_eq!(last_lines(&long).len(), 2 + 300 + 3);
    }

    #[test]
    fn extras_come_from_the_environment() {
        let app: spindle_common::ids::ApplicationId = "application_1_0002".parse().unwrap();
        let none = AmExtras::from_lookup(app, |_| None).unwrap();
        assert_eq!(none, AmExtras::default());
        assert_eq!(none.fail_fast_window, DEFAULT_FAIL_FAST_WINDOW);
        let e = AmExtras::from_lookup(app, |k| {
            (k == ENV_FAIL_FAST_WINDOW_MS).then(|| "1500".to_string())
        })
        .unwrap();
        assert_eq!(e.fail_fast_window, Duration::from_millis(1500));
        let bad = AmExtras::from_lookup(app, |k| {
            (k == ENV_FAIL_FAST_WINDOW_MS).then(|| "soon".to_string())
        })
        .unwrap_err();
        assert!(bad.to_string().contains(ENV_FAIL_FAST_WINDOW_MS), "{bad}");
    }

    #[test]
    fn lines_are_single() {
        assert_eq!(
            one_line("a: exit 137.\nLast bytes :\n  killed\n"),
            "a: exit 137. | Last bytes : | killed"
        );
        assert_eq!(one_line("plain"), "plain");
    }

    #[test]
    fn status_lines_carry_the_rm_words() {
        let mut s = GangStatus {
            id: "workers".into(),
            state: GangState::RESERVED,
            size: 16,
            diagnostics: "needs 16 GPUs; the best fit now is 12".into(),
            reserved_nodes: vec!["a:1".parse().unwrap(), "b:1".parse().unwrap()],
            failed_containers: vec![],
            ..Default::default()
        };
        assert_eq!(
            status_line(&s),
            "gang workers is RESERVED: needs 16 GPUs; the best fit now is 12 (reserved nodes a:1, b:1)"
        );
        s.diagnostics = "reserved nodes a:1, b:1".into();
        assert_eq!(
            status_line(&s),
            "gang workers is RESERVED: reserved nodes a:1, b:1"
        );
        s.state = GangState::PENDING;
        s.diagnostics.clear();
        s.reserved_nodes.clear();
        assert_eq!(status_line(&s), "gang workers is PENDING");
    }
}
