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

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use std::path::Path;

use spindle_common::ids::ContainerId;
use spindle_common::records::am::{Container, GangState, GangStatus};
use spindle_common::records::node::ContainerLaunchContext as Ctx;
use spindle_common::records::node::{ContainerLaunchContext, LaunchHold, SignalContainerCommand};
use spindle_common::states::{exit_status, FinalApplicationStatus};
use spindle_common::time::now_ms;

use super::checkpoint;
use super::{
    assign_ranks, placement_name, size_rule_text, worker_env, RankInfo, TrainAmConfig,
    TrainConfigError, DEFAULT_FAIL_FAST_WINDOW, ENV_FAIL_FAST_WINDOW_MS, GANG_ID, RESIZE_COUNT,
    WORKER_REQUEST_ID,
};
use crate::am_client::AmError;
use crate::amrm::{
    AllocationEvents, AmRmClient, GangDemand, GangOffer, PreemptionNotice, MAX_INTERVAL,
};
use crate::dshell::am::{completion_line, finish_and_report};
use crate::gang::{is_permanent, GangError, GangMember, GangRequest};
use crate::nm_client::NmClient;
use crate::ship::Shipped;

/// How long the AM keeps heartbeating through failures before it gives up.
pub const RM_UNREACHABLE_LIMIT: Duration = Duration::from_secs(60);
/// Tries at asking rank 0's NM for a free port.
const FREE_PORT_TRIES: u32 = 3;
/// How long the NMs hold set-up workers for the release: far beyond the release calls' few
/// milliseconds, so it only matters if this AM dies between the two phases.
const HOLD_TIMEOUT: Duration = Duration::from_secs(120);
/// How often the checkpoint directory is looked at while the workers run.
const CHECKPOINT_SCAN: Duration = Duration::from_secs(1);
/// How long past the RM's deadline the AM waits for preempted workers to be reported gone
/// before it stops what is left itself and asks for the gang again.
const PREEMPT_GRACE: Duration = Duration::from_secs(10);
/// How long a worker has from its SIGTERM to checkpoint and exit when the gang grows (a
/// shrink gives it until the RM's deadline, less [`RESIZE_MARGIN`]).
const RESIZE_GRACE: Duration = Duration::from_secs(30);
/// Kept between a shrink's stop of the workers and the RM's deadline, for the release.
const RESIZE_MARGIN: Duration = Duration::from_millis(1500);
/// What a container runs between its worker's exit and its restart at the new size.
const PARKED: &str = "exec sleep 2147483647";
/// After a worker fails in a way that may call for failing fast, how long the AM waits for
/// the gang's other workers to end before it restarts the gang as usual.
const FAIL_FAST_GATHER: Duration = Duration::from_secs(5);
/// How many lines of rank 0's stderr a fail-fast diagnostic quotes.
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
/// (`checkpointed` is `Some(false)`: a checkpoint directory is set and has no file). The
/// shared exit status if so. A zero window never fails fast.
pub fn fail_fast(
    exits: &[WorkerExit],
    workers: u32,
    window: Duration,
    checkpointed: Option<bool>,
) -> Option<i32> {
    let first = exits.first()?;
    let all = exits.len() == workers as usize;
    let alike = exits.iter().all(|e| e.exit_status == first.exit_status);
    let early = exits.iter().all(|e| e.after <= window) || checkpointed == Some(false);
    (!window.is_zero() && all && alike && first.exit_status > 0 && early)
        .then_some(first.exit_status)
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
    !window.is_zero()
        && succeeded == 0
        && first.exit_status > 0
        && exits.iter().all(|e| e.exit_status == first.exit_status)
        && (exits.iter().all(|e| e.after <= window) || checkpointed == Some(false))
}

/// The first [`STDERR_LINES`] lines of a log, indented under the diagnostic.
pub fn first_lines(log: &str) -> String {
    let mut lines: Vec<String> = log
        .lines()
        .take(STDERR_LINES)
        .map(|l| {
            let l = l.trim_end();
            match l.char_indices().nth(300) {
                Some((i, _)) => format!("  {}...", &l[..i]),
                None => format!("  {l}"),
            }
        })
        .collect();
    if log.lines().nth(STDERR_LINES).is_some() {
        lines.push("  ...".into());
    }
    lines.join("\n")
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
    WorkerFailed(String),
    /// The RM took the gang back; its workers were told to checkpoint and have exited.
    Preempted,
    /// The gang was never granted (timed out, refused): asking again the same way will not
    /// help.
    Fatal(String),
    /// Every worker failed alike soon after starting ([`fail_fast`]): a restart would fail
    /// the same way. The diagnostic quotes rank 0's stderr.
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

/// Reports the checkpoint directory's newest file to the RM (through the heartbeats) when
/// it changes, looking at most every [`CHECKPOINT_SCAN`].
struct CheckpointWatch<'a> {
    dir: Option<&'a Path>,
    scanned: Option<Instant>,
    last: Option<checkpoint::Checkpoint>,
    /// The last throughput reported: (size, value, file mtime).
    throughput: Option<(u32, f64, u64)>,
}

impl<'a> CheckpointWatch<'a> {
    fn new(cfg: &'a TrainAmConfig) -> Self {
        Self {
            dir: cfg.checkpoint_dir.as_deref().map(Path::new),
            scanned: None,
            last: None,
            throughput: None,
        }
    }

    /// Looks now if `force`, else if the last look is [`CHECKPOINT_SCAN`] old; true if it
    /// looked.
    fn report(&mut self, amrm: &mut AmRmClient, force: bool) -> bool {
        let Some(dir) = self.dir else { return false };
        if !force && self.scanned.is_some_and(|t| t.elapsed() < CHECKPOINT_SCAN) {
            return false;
        }
        self.scanned = Some(Instant::now());
        let Some(k) = checkpoint::latest(dir) else {
            return true;
        };
        if self.last.as_ref() == Some(&k) {
            return true;
        }
        tracing::debug!(time_ms = k.time_ms, step = ?k.step, label = %k.label, "checkpoint");
        amrm.report_checkpoint(k.time_ms, k.step, Some(k.label.clone()));
        self.last = Some(k);
        true
    }

    /// Reports rank 0's throughput file for the gang's current `size` when it changed.
    fn report_throughput(&mut self, amrm: &mut AmRmClient, size: u32) {
        let Some(dir) = self.dir else { return };
        let Some((value, mtime)) = checkpoint::throughput(dir) else {
            return;
        };
        if self.throughput == Some((size, value, mtime)) {
            return;
        }
        tracing::info!(size, value, "throughput report");
        amrm.report_throughput(GANG_ID, size, value);
        self.throughput = Some((size, value, mtime));
    }
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
        let req = match &self.cfg.elastic {
            Some(e) => GangRequest::elastic(GANG_ID, member, e.min, e.max, e.rule)
                .size_multiple(e.multiple)
                .throughput(e.throughput.clone()),
            None => GangRequest::new(GANG_ID, vec![member]),
        };
        let mut req = req
            .placement(self.cfg.placement)
            .max_nodes(self.cfg.max_nodes);
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
                    return Ok(AttemptEnd::WorkerFailed(format!(
                        "the gang failed before it started: {diagnostics}"
                    )))
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
                return Ok(AttemptEnd::WorkerFailed(format!(
                    "cannot get a free port on rank 0's node {}: {e}",
                    master.node_id
                )))
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
        if let Some(failure) = self.start_all(&ranks, n, &master_addr, port, out).await {
            return Ok(AttemptEnd::WorkerFailed(failure));
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

    /// Why the attempt is not restarted, with the first lines of rank 0's stderr (read from
    /// its NM's container log).
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
        let mut d = format!(
            "all {} workers of gang attempt {} failed with exit status {status} {when}; not \
             restarting the gang, which would fail the same way (fail-fast window {} ms)",
            exits.len(),
            self.number,
            window.as_millis()
        );
        let Some(r0) = ranks.iter().find(|r| r.rank == 0) else {
            return d;
        };
        let c = &r0.container;
        match self
            .nm
            .container_log(&c.node_http_address, &c.id, "stderr")
            .await
        {
            Ok(log) if !log.trim().is_empty() => d.push_str(&format!(
                "\nFirst lines of rank 0's stderr ({} on {}):\n{}",
                c.id,
                c.node_id,
                first_lines(&log)
            )),
            Ok(_) => d.push_str(&format!(
                "\nRank 0's stderr ({} on {}) is empty",
                c.id, c.node_id
            )),
            Err(e) => d.push_str(&format!(
                "\nRank 0's stderr ({} on {}) could not be read: {e}",
                c.id, c.node_id
            )),
        }
        d
    }

    async fn free_port(&self, master: &Container) -> Result<u16, crate::ClientError> {
        let mut tries = 0;
        loop {
            tries += 1;
            match self.nm.free_port(&master.node_http_address).await {
                Ok(p) => return Ok(p),
                Err(e) if tries >= FREE_PORT_TRIES => return Err(e),
                Err(e) => {
                    tracing::warn!(node = %master.node_id, error = %e, "free port; retrying");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    /// Starts every worker together ([`NmClient::start_gang`]): every node sets its workers up
    /// and holds them, then all are released at once. Returns the first failure, if any.
    async fn start_all(
        &self,
        ranks: &[RankInfo],
        n: u32,
        master_addr: &str,
        port: u16,
        out: &mut (dyn FnMut(&str) + Send),
    ) -> Option<String> {
        let members: Vec<(Container, ContainerLaunchContext)> = ranks
            .iter()
            .map(|r| {
                (
                    r.container.clone(),
                    self.worker_ctx(r, n, master_addr, port),
                )
            })
            .collect();
        let hold = LaunchHold {
            timeout_ms: Some(HOLD_TIMEOUT.as_millis() as u64),
        };
        let launch = self.nm.start_gang(members, hold).await;
        let outcome: BTreeMap<ContainerId, Result<(), crate::ClientError>> =
            launch.outcome.into_iter().collect();
        let mut failure = None;
        for r in ranks {
            let c = &r.container;
            match outcome.get(&c.id) {
                Some(Ok(())) => out(&format!(
                    "worker rank {} started in container {} on node {} (local rank {} of {})",
                    r.rank, c.id, c.node_id, r.local_rank, r.local_world_size
                )),
                Some(Err(e)) => {
                    let l = format!(
                        "worker rank {} could not be started in container {} on node {}: {e}",
                        r.rank, c.id, c.node_id
                    );
                    out(&l);
                    failure.get_or_insert(l);
                }
                None => {
                    let l = format!(
                        "worker rank {} got no start answer from {}",
                        r.rank, c.node_id
                    );
                    out(&l);
                    failure.get_or_insert(l);
                }
            }
        }
        if failure.is_none() {
            out(&format!(
                "all {n} workers set up and held in {:.1} ms; all start calls answered in {:.1} ms",
                launch.held_in.as_secs_f64() * 1e3,
                launch.released_in.unwrap_or_default().as_secs_f64() * 1e3
            ));
        }
        failure
    }

    /// Heartbeats until every worker exited 0, one did not, or the gang was preempted and
    /// its workers have exited. An elastic gang is resized here when the RM asks.
    async fn watch(
        &self,
        amrm: &mut AmRmClient,
        ranks: &[RankInfo],
        out: &mut (dyn FnMut(&str) + Send),
    ) -> Result<AttemptEnd, AmError> {
        let mut ranks: Vec<RankInfo> = ranks.to_vec();
        super::status::running(self.number, &ranks);
        let mut n = ranks.len() as u32;
        let mut current: BTreeMap<ContainerId, RankInfo> =
            ranks.iter().map(|r| (r.container.id, r.clone())).collect();
        let mut done: BTreeSet<ContainerId> = BTreeSet::new();
        // Workers that ended after the preemption notice.
        let mut gone: BTreeSet<ContainerId> = BTreeSet::new();
        let mut preempting: Option<Preempting> = None;
        let mut checkpoints = CheckpointWatch::new(self.cfg);
        let mut failing_since: Option<Instant> = None;
        // When the workers (re)started, the failures of this attempt so far, and the first
        // failure's line and time: while every failure so far may add up to a fail-fast, the
        // AM waits a little for the rest of the gang before it decides.
        let mut started = Instant::now();
        let mut exits: Vec<WorkerExit> = Vec::new();
        let mut first_failure: Option<(String, Instant)> = None;
        // Heard during a resize, handled next.
        let mut carried: Option<AllocationEvents> = None;
        // Whatever the gang call heard meanwhile is handed out by this first poll.
        loop {
            if preempting.is_none() && done.len() as u32 >= n {
                return Ok(AttemptEnd::Succeeded(n));
            }
            if let Some(p) = &preempting {
                let ended = |id: &ContainerId| done.contains(id) || gone.contains(id);
                if current.keys().all(ended) {
                    out(&format!(
                        "workers exited {} ms after the notice; asking for the gang again",
                        p.noticed_at.elapsed().as_millis()
                    ));
                    return Ok(AttemptEnd::Preempted);
                }
                let grace = u64::try_from(PREEMPT_GRACE.as_millis()).unwrap_or(u64::MAX);
                if now_ms() > p.deadline_ms.saturating_add(grace) {
                    let left = current.keys().filter(|id| !ended(id)).count();
                    out(&format!(
                        "{left} worker(s) still reported running {} ms after the preemption \
                         deadline; stopping them and asking for the gang again",
                        grace
                    ));
                    return Ok(AttemptEnd::Preempted);
                }
            } else {
                let due = checkpoints.report(amrm, false);
                if due && self.cfg.elastic.is_some() {
                    checkpoints.report_throughput(amrm, n);
                }
            }
            let ev = match carried.take() {
                Some(ev) => ev,
                None => match amrm.poll().await {
                    Ok(ev) => {
                        failing_since = None;
                        ev
                    }
                    Err(AmError::Client(e)) => {
                        let since = *failing_since.get_or_insert_with(Instant::now);
                        if is_permanent(&e) || since.elapsed() >= RM_UNREACHABLE_LIMIT {
                            return Err(AmError::Client(e));
                        }
                        tracing::warn!(error = %e, "heartbeat failed; retrying");
                        tokio::time::sleep(MAX_INTERVAL).await;
                        continue;
                    }
                    Err(e) => return Err(e),
                },
            };
            for c in ev.allocated {
                out(&format!(
                    "container {} allocated on {} is not needed; releasing it",
                    c.id, c.node_id
                ));
                amrm.release(c.id);
            }
            for notice in &ev.preempted {
                if !notice.containers.iter().any(|c| current.contains_key(c)) {
                    tracing::info!(containers = ?notice.containers,
                        "a preemption notice about containers of an earlier attempt");
                    continue;
                }
                if preempting.is_none() {
                    let live: Vec<&RankInfo> = ranks
                        .iter()
                        .filter(|r| !done.contains(&r.container.id))
                        .collect();
                    preempting = Some(
                        self.on_notice(amrm, &live, notice, &mut checkpoints, out)
                            .await,
                    );
                }
            }
            let mut resize: Option<Resize> = None;
            for d in ev.demands.into_iter().filter(|d| d.gang_id == GANG_ID) {
                if preempting.is_some() || !done.is_empty() || resize.is_some() {
                    out(&format!(
                        "gang {GANG_ID} asked to shrink {} -> {}: not resizing now (the \
                         workers are {}); the ResourceManager takes the containers at its \
                         deadline",
                        d.from,
                        d.to,
                        if preempting.is_some() {
                            "preempted"
                        } else if resize.is_some() {
                            "being resized"
                        } else {
                            "finishing"
                        }
                    ));
                    continue;
                }
                resize = Some(Resize::Shrink(d));
            }
            for o in ev.offers.into_iter().filter(|o| o.gang_id == GANG_ID) {
                let ids: Vec<ContainerId> = o.containers.iter().map(|c| c.id).collect();
                if self.cfg.elastic.is_none()
                    || preempting.is_some()
                    || !done.is_empty()
                    || resize.is_some()
                {
                    out(&format!(
                        "gang {GANG_ID} offered to grow {} -> {}: declined (the workers are {})",
                        o.from,
                        o.to,
                        if self.cfg.elastic.is_none() {
                            "not elastic"
                        } else if preempting.is_some() {
                            "preempted"
                        } else if resize.is_some() {
                            "being resized"
                        } else {
                            "finishing"
                        }
                    ));
                    amrm.decline_offer(GANG_ID, &ids);
                    continue;
                }
                resize = Some(Resize::Grow(o));
            }
            let mut failure = None;
            for s in &ev.completed {
                super::status::ended(s);
                let Some(r) = current.get(&s.container_id) else {
                    tracing::info!(container = %s.container_id, exit_status = s.exit_status,
                        "a container of an earlier attempt or size completed");
                    continue;
                };
                let node = r.container.node_id.to_string();
                if preempting.is_none() && s.exit_status == exit_status::PREEMPTED {
                    // Killed for a preemption whose notice this AM never heard (it was not
                    // listening, or the notice came and went between two heartbeats).
                    out(&format!(
                        "gang {GANG_ID} preempted: worker rank {} was taken back without a \
                         notice this AM heard",
                        r.rank
                    ));
                    preempting = Some(Preempting {
                        noticed_at: Instant::now(),
                        deadline_ms: now_ms(),
                    });
                }
                if preempting.is_some() {
                    gone.insert(s.container_id);
                    out(&format!(
                        "worker rank {} ended after the preemption notice: {}",
                        r.rank,
                        completion_line(s, &node)
                    ));
                } else if s.exit_status == exit_status::SUCCESS {
                    done.insert(s.container_id);
                    out(&format!(
                        "worker rank {} exited 0 in container {} on {node} ({} of {n} done)",
                        r.rank,
                        s.container_id,
                        done.len()
                    ));
                } else {
                    let l = format!(
                        "worker rank {} failed: {}",
                        r.rank,
                        completion_line(s, &node)
                    );
                    out(&l);
                    exits.push(WorkerExit {
                        rank: r.rank,
                        exit_status: s.exit_status,
                        after: started.elapsed(),
                    });
                    failure.get_or_insert(l);
                }
            }
            for g in ev.gangs.iter().filter(|g| g.id == GANG_ID) {
                // A FAILED status naming none of this attempt's workers is about the last one.
                let ours = g.failed_containers.is_empty()
                    || g.failed_containers.iter().any(|c| current.contains_key(c));
                if !ours {
                    continue;
                }
                out(&status_line(g));
                if g.state == GangState::FAILED && failure.is_none() && preempting.is_none() {
                    failure = Some(status_line(g));
                }
            }
            for node in &ev.nodes {
                out(&format!("node {} is now {}", node.node_id, node.node_state));
            }
            amrm.set_progress(done.len() as f32 / n.max(1) as f32);
            if let Some(f) = failure {
                first_failure.get_or_insert((f, Instant::now()));
            }
            if let Some((f, at)) = &first_failure {
                if let Some(Resize::Grow(o)) = resize.take() {
                    let ids: Vec<ContainerId> = o.containers.iter().map(|c| c.id).collect();
                    amrm.decline_offer(GANG_ID, &ids);
                }
                let window = self.fail_fast_window();
                let checkpointed = self.checkpointed();
                let ended = done.len() + exits.len() >= current.len();
                if preempting.is_none()
                    && !ended
                    && at.elapsed() < FAIL_FAST_GATHER
                    && may_fail_fast(&exits, done.len(), window, checkpointed)
                {
                    tokio::time::sleep(amrm.next_interval()).await;
                    continue;
                }
                if let Some(status) = fail_fast(&exits, n, window, checkpointed) {
                    let d = self.fail_fast_diagnostic(status, &exits, &ranks).await;
                    return Ok(AttemptEnd::FailedFast(d));
                }
                return Ok(AttemptEnd::WorkerFailed(f.clone()));
            }
            if let (Some(rs), None) = (resize, &preempting) {
                match self.resize(amrm, &ranks, rs, &mut checkpoints, out).await {
                    Ok(new_ranks) => {
                        ranks = new_ranks;
                        started = Instant::now();
                        super::status::running(self.number, &ranks);
                        n = ranks.len() as u32;
                        current = ranks.iter().map(|r| (r.container.id, r.clone())).collect();
                        done.clear();
                        // Send the releases now and take what came meanwhile.
                        match amrm.poll().await {
                            Ok(ev) => carried = Some(ev),
                            Err(e) => tracing::warn!(error = %e, "heartbeat after a resize"),
                        }
                        continue;
                    }
                    Err(f) => return Ok(AttemptEnd::WorkerFailed(f)),
                }
            }
            if preempting.is_some() || (done.len() as u32) < n {
                tokio::time::sleep(amrm.next_interval()).await;
            }
        }
    }

    /// Restarts the whole gang at its new size (see the module doc): every running worker
    /// checkpoints and exits (its container re-initialized with a placeholder), demanded
    /// containers go back, then every worker starts with its new rank. The new ranks, or why
    /// the gang cannot go on (a failure: the attempt restarts the gang).
    async fn resize(
        &self,
        amrm: &mut AmRmClient,
        ranks: &[RankInfo],
        resize: Resize,
        checkpoints: &mut CheckpointWatch<'_>,
        out: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Vec<RankInfo>, String> {
        let started = Instant::now();
        let from = ranks.len() as u32;
        let (leaving, joining, deadline_ms): (BTreeSet<ContainerId>, Vec<Container>, u64) =
            match &resize {
                Resize::Grow(o) => (
                    BTreeSet::new(),
                    o.containers.clone(),
                    now_ms().saturating_add(RESIZE_GRACE.as_millis() as u64),
                ),
                Resize::Shrink(d) => (
                    d.containers
                        .iter()
                        .filter(|c| ranks.iter().any(|r| r.container.id == **c))
                        .copied()
                        .collect(),
                    Vec::new(),
                    d.deadline_ms,
                ),
            };
        let kept: Vec<Container> = ranks
            .iter()
            .filter(|r| !leaving.contains(&r.container.id))
            .map(|r| r.container.clone())
            .collect();
        let to = (kept.len() + joining.len()) as u32;
        if to == from {
            out(&format!(
                "gang {GANG_ID}: the resize names none of the running workers; nothing to do"
            ));
            return Ok(ranks.to_vec());
        }
        if to == 0 {
            return Err(format!(
                "gang {GANG_ID} was asked to shrink to no worker at all"
            ));
        }
        let left = deadline_ms.saturating_sub(now_ms());
        let grace = match &resize {
            Resize::Grow(_) => RESIZE_GRACE,
            Resize::Shrink(_) => Duration::from_millis(left)
                .saturating_sub(RESIZE_MARGIN)
                .clamp(Duration::from_millis(100), RESIZE_GRACE),
        };
        if let Some(dir) = &self.cfg.checkpoint_dir {
            if let Err(e) = checkpoint::write_resize_marker(Path::new(dir), from, to, deadline_ms) {
                out(&format!(
                    "cannot write the resize marker in {dir}: {e}; the workers will take the \
                     SIGTERM for a preemption"
                ));
            }
        }
        match &resize {
            Resize::Grow(o) => {
                let nodes: BTreeSet<String> =
                    o.containers.iter().map(|c| c.node_id.to_string()).collect();
                out(&format!(
                    "gang {GANG_ID} grown {from} -> {to}: {} new worker(s) on {}; asking the \
                     {from} running workers to checkpoint and exit",
                    o.containers.len(),
                    nodes.into_iter().collect::<Vec<_>>().join(", ")
                ));
            }
            Resize::Shrink(_) => {
                amrm.acknowledge_preemption(left);
                out(&format!(
                    "gang {GANG_ID} shrunk {from} -> {to} (deadline in {left} ms): asking the \
                     {from} running workers to checkpoint and exit; {} container(s) go back",
                    leaving.len()
                ));
            }
        }
        // 1. Every running worker checkpoints and exits; its container stays, parked.
        let parked = Ctx {
            commands: vec![PARKED.into()],
            environment: BTreeMap::new(),
            local_resources: BTreeMap::new(),
        };
        let stops = futures::future::join_all(ranks.iter().map(|r| {
            let ctx = parked.clone();
            async move {
                let c = &r.container;
                let res = self
                    .nm
                    .reinitialize_container(&c.node_http_address, &c.id, ctx, Some(grace))
                    .await;
                (r, res)
            }
        }))
        .await;
        let mut failure = None;
        for (r, res) in stops {
            if let Err(e) = res {
                let l = format!(
                    "worker rank {} could not be stopped for the resize in container {} on {}: {e}",
                    r.rank, r.container.id, r.container.node_id
                );
                out(&l);
                failure.get_or_insert(l);
            }
        }
        if let Some(f) = failure {
            if let Resize::Grow(o) = &resize {
                let ids: Vec<ContainerId> = o.containers.iter().map(|c| c.id).collect();
                amrm.decline_offer(GANG_ID, &ids);
            }
            return Err(f);
        }
        out(&format!(
            "all {from} workers checkpointed and exited in {} ms",
            started.elapsed().as_millis()
        ));
        checkpoints.report(amrm, true);
        if let Some(dir) = &self.cfg.checkpoint_dir {
            // A throughput measured at the old size is not this size's.
            let _ = checkpoint::remove_file(Path::new(dir), checkpoint::THROUGHPUT_FILE);
        }
        // 2. The demanded containers go back (their workers have exited).
        if !leaving.is_empty() {
            let ids: Vec<ContainerId> = leaving.iter().copied().collect();
            amrm.release_members(GANG_ID, &ids);
        }
        // 3. Every worker starts again at the new size.
        let all: Vec<Container> = kept.iter().chain(joining.iter()).cloned().collect();
        let new_ranks = assign_ranks(&all);
        let Some(master) = new_ranks.first().map(|r| r.container.clone()) else {
            return Err("the resized gang is empty".into());
        };
        let port = self.free_port(&master).await.map_err(|e| {
            format!(
                "cannot get a free port on rank 0's node {}: {e}",
                master.node_id
            )
        })?;
        let master_addr = master.node_id.host.clone();
        self.resizes.set(self.resizes.get() + 1);
        if let Some(dir) = &self.cfg.checkpoint_dir {
            if let Err(e) = checkpoint::remove_file(Path::new(dir), checkpoint::RESIZE_MARKER) {
                out(&format!("cannot remove the resize marker in {dir}: {e}"));
            }
        }
        out(&format!(
            "rendezvous: MASTER_ADDR={master_addr} MASTER_PORT={port} WORLD_SIZE={to} \
             (resize {})",
            self.resizes.get()
        ));
        let joining_ids: BTreeSet<ContainerId> = joining.iter().map(|c| c.id).collect();
        let restarts = futures::future::join_all(
            new_ranks
                .iter()
                .filter(|r| !joining_ids.contains(&r.container.id))
                .map(|r| {
                    let ctx = self.worker_ctx(r, to, &master_addr, port);
                    async move {
                        let c = &r.container;
                        let res = self
                            .nm
                            .reinitialize_container(&c.node_http_address, &c.id, ctx, None)
                            .await;
                        (r, res.map(|_| ()))
                    }
                }),
        );
        let fresh: Vec<RankInfo> = new_ranks
            .iter()
            .filter(|r| joining_ids.contains(&r.container.id))
            .cloned()
            .collect();
        let (restarted, failure) = futures::join!(restarts, async {
            if fresh.is_empty() {
                None
            } else {
                self.start_all(&fresh, to, &master_addr, port, out).await
            }
        });
        let mut failure = failure;
        for (r, res) in restarted {
            match res {
                Ok(()) => out(&format!(
                    "worker rank {} restarted in container {} on node {} (local rank {} of {})",
                    r.rank, r.container.id, r.container.node_id, r.local_rank, r.local_world_size
                )),
                Err(e) => {
                    let l = format!(
                        "worker rank {} could not be restarted in container {} on {}: {e}",
                        r.rank, r.container.id, r.container.node_id
                    );
                    out(&l);
                    failure.get_or_insert(l);
                }
            }
        }
        if let Some(f) = failure {
            return Err(f);
        }
        out(&format!(
            "gang {GANG_ID} runs at {to} workers (resize {} done in {} ms)",
            self.resizes.get(),
            started.elapsed().as_millis()
        ));
        Ok(new_ranks)
    }

    /// The RM's notice names this gang: the marker with the deadline for the workers,
    /// SIGTERM to each live worker through its NM, the acknowledgement with the time left.
    async fn on_notice(
        &self,
        amrm: &mut AmRmClient,
        live: &[&RankInfo],
        notice: &PreemptionNotice,
        checkpoints: &mut CheckpointWatch<'_>,
        out: &mut (dyn FnMut(&str) + Send),
    ) -> Preempting {
        let noticed_at = Instant::now();
        let deadline_ms = notice.deadline_ms;
        if let Some(dir) = &self.cfg.checkpoint_dir {
            if let Err(e) = checkpoint::write_marker(Path::new(dir), deadline_ms) {
                out(&format!(
                    "cannot write the preemption marker {}: {e}",
                    checkpoint::marker_path(Path::new(dir)).display()
                ));
            }
        }
        // The freshest checkpoint goes with the acknowledgement.
        checkpoints.report(amrm, true);
        let signals = futures::future::join_all(live.iter().map(|r| async move {
            let c = &r.container;
            let res = self
                .nm
                .signal_container(
                    &c.node_http_address,
                    &c.id,
                    SignalContainerCommand::GRACEFUL_SHUTDOWN,
                )
                .await;
            (r.rank, res)
        }))
        .await;
        let left = deadline_ms.saturating_sub(now_ms());
        amrm.acknowledge_preemption(left);
        let app = amrm.client().attempt_id().application_id;
        out(&format!(
            "gang {GANG_ID} of {app} preempted (deadline in {left} ms): asked workers to \
             checkpoint and exit"
        ));
        for (rank, res) in signals {
            if let Err(e) = res {
                out(&format!("worker rank {rank} could not be signalled: {e}"));
            }
        }
        Preempting {
            noticed_at,
            deadline_ms,
        }
    }
}

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
    let attempt_id = amrm.client().attempt_id();
    let reg = amrm.register(am_host, -1, "").await?;
    let max = reg.maximum_resource_capability.to_resource();
    out(&format!(
        "registered {attempt_id} with the ResourceManager (queue '{}', maximum container {max})",
        reg.queue
    ));
    let too_big = cfg
        .worker_resources
        .entries()
        .any(|(k, v)| v > max.get(k) && (max.get(k) > 0 || k == "memory-mb" || k == "vcores"));
    let mut report = TrainReport {
        final_status: FinalApplicationStatus::FAILED,
        diagnostics: String::new(),
        attempts: 0,
        preemptions: 0,
        resizes: 0,
    };
    if !max.is_zero() && too_big {
        report.diagnostics = format!(
            "worker resources {} exceed the cluster's maximum container {max}",
            cfg.worker_resources
        );
        out(&report.diagnostics);
        amrm.finish(report.final_status, &report.diagnostics)
            .await?;
        return Ok(report);
    }
    let max_attempts = cfg.max_restarts.saturating_add(1);
    // Attempts that ended in a failure: only these count against --max-restarts.
    let mut failures = 0u32;
    // A previous AM attempt's gang (the application keeps its containers across attempts):
    // taken over whole if every worker still runs; else what is left is stopped and the
    // gang starts again.
    let mut adopted = None;
    let previous = reg.containers_from_previous_attempts.clone();
    if !previous.is_empty() {
        let probe = Attempt {
            cfg,
            nm,
            number: 1,
            after_preemption: false,
            resizes: std::cell::Cell::new(0),
            extras,
            fresh: false,
        };
        amrm.adopt_gang(probe.gang_request(), previous.clone());
        let whole = match &cfg.elastic {
            Some(e) => (e.min..=e.max).contains(&(previous.len() as u32)),
            None => previous.len() as u32 == cfg.workers,
        };
        if whole {
            out(&format!(
                "took over the running gang of {} workers from the previous AM attempt",
                previous.len()
            ));
            // The previous AM may have died between holding the gang and releasing it:
            // release them all (running ones answer "not held", which is fine).
            let mut by_node: BTreeMap<String, Vec<ContainerId>> = BTreeMap::new();
            for c in &previous {
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
            adopted = Some(assign_ranks(&previous));
        } else {
            out(&format!(
                "the previous AM attempt left {} of {} workers; restarting the gang",
                previous.len(),
                cfg.workers
            ));
            release(amrm, nm, false, out).await;
        }
    }
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
                release(amrm, nm, true, out).await;
            }
            AttemptEnd::WorkerFailed(d) => {
                failures += 1;
                let last = failures >= max_attempts;
                if !last {
                    out(&format!(
                        "restarting the gang (attempt {} of at most {}) after: {d}",
                        report.attempts + 1,
                        max_attempts.saturating_add(report.preemptions)
                    ));
                }
                release(amrm, nm, false, out).await;
                if last {
                    let preempted = match report.preemptions {
                        0 => String::new(),
                        p => format!(", {p} of them preempted"),
                    };
                    report.diagnostics = format!(
                        "{d}; gave up after {} gang attempt(s){preempted} (--max-restarts {})",
                        report.attempts, cfg.max_restarts
                    );
                    break;
                }
            }
        }
    }
    finish_and_report(amrm, report.final_status, &report.diagnostics, out).await?;
    Ok(report)
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
    }

    #[test]
    fn the_diagnostic_quotes_the_first_lines() {
        let log: String = (1..=12).map(|i| format!("line {i}\n")).collect();
        let q = first_lines(&log);
        assert!(q.starts_with("  line 1\n  line 2"), "{q}");
        assert!(q.contains("  line 10\n  ..."), "{q}");
        assert!(!q.contains("line 11"), "{q}");
        assert_eq!(first_lines("boom"), "  boom");
        let long = "x".repeat(400);
        assert_eq!(first_lines(&long).len(), 2 + 300 + 3);
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
