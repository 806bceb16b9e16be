//! Watching a running gang: heartbeats, completions, preemption notices, resize asks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use spindle_common::ids::ContainerId;
use spindle_common::records::am::{ContainerStatus, GangState, GangStatus, UpdatedContainer};
use spindle_common::records::node::SignalContainerCommand;
use spindle_common::states::exit_status;
use spindle_common::time::now_ms;

use super::{
    fail_fast, may_fail_fast, status_line, Attempt, AttemptEnd, Failure, Preempting, Resize,
    WorkerExit, RM_UNREACHABLE_LIMIT,
};
use crate::am_client::AmError;
use crate::amrm::{
    AllocationEvents, AmRmClient, GangDemand, GangOffer, PreemptionNotice, MAX_INTERVAL,
};
use crate::dshell::am::completion_line;
use crate::gang::is_permanent;
use crate::train::{checkpoint, RankInfo, TrainAmConfig, GANG_ID};

/// How often the checkpoint directory is looked at while the workers run.
const CHECKPOINT_SCAN: Duration = Duration::from_secs(1);
/// How long past the RM's deadline the AM waits for preempted workers to be reported gone
/// before it stops what is left itself and asks for the gang again.
const PREEMPT_GRACE: Duration = Duration::from_secs(10);
/// After a worker fails in a way that may call for failing fast, how long the AM waits for
/// the gang's other workers to end before it restarts the gang as usual.
const FAIL_FAST_GATHER: Duration = Duration::from_secs(5);

/// Reports the checkpoint directory's newest file to the RM (through the heartbeats) when
/// it changes, looking at most every [`CHECKPOINT_SCAN`].
pub(super) struct CheckpointWatch<'a> {
    dir: Option<&'a Path>,
    scanned: Option<Instant>,
    last: Option<checkpoint::Checkpoint>,
    /// The last throughput reported: (size, value, file mtime).
    throughput: Option<(u32, f64, u64)>,
    /// Rank 0's vcores and since when (ms since the epoch) it has had them: a throughput
    /// file written since is reported with them (ranged `--cpus-per-gpu` only).
    vcores: Option<(u32, u64)>,
}

impl<'a> CheckpointWatch<'a> {
    pub(super) fn new(cfg: &'a TrainAmConfig) -> Self {
        Self {
            dir: cfg.checkpoint_dir.as_deref().map(Path::new),
            scanned: None,
            last: None,
            throughput: None,
            vcores: None,
        }
    }

    /// Rank 0 runs with `vcores` CPUs from `since_ms` on.
    fn cpus_from(&mut self, vcores: i64, since_ms: u64) {
        let v = u32::try_from(vcores).unwrap_or(0);
        if self.vcores.is_none_or(|(old, _)| old != v) {
            self.vcores = Some((v, since_ms));
        }
    }

    /// Looks now if `force`, else if the last look is [`CHECKPOINT_SCAN`] old; true if it
    /// looked.
    pub(super) fn report(&mut self, amrm: &mut AmRmClient, force: bool) -> bool {
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
        // A file older than rank 0's last resize measured other CPUs: no vcores said.
        let vcores = match self.vcores {
            Some((v, since)) if mtime >= since => v,
            _ => 0,
        };
        tracing::info!(size, value, vcores, "throughput report");
        amrm.report_cpu_throughput(GANG_ID, size, value, vcores);
        self.throughput = Some((size, value, mtime));
    }
}

/// What the AM knows of the running gang while it watches it.
struct Watch {
    ranks: Vec<RankInfo>,
    /// The gang's current size.
    n: u32,
    current: BTreeMap<ContainerId, RankInfo>,
    /// When a worker's resources last changed in place (ms since the epoch; 0: never).
    resized_ms: u64,
    /// Workers of the current size that exited 0.
    done: BTreeSet<ContainerId>,
    /// Workers that ended after the preemption notice.
    gone: BTreeSet<ContainerId>,
    preempting: Option<Preempting>,
    /// When the workers (re)started, the failures of this attempt so far, and the first
    /// failure's line and time: while every failure so far may add up to a fail-fast, the
    /// AM waits a little for the rest of the gang before it decides.
    started: Instant,
    exits: Vec<WorkerExit>,
    first_failure: Option<(String, Instant)>,
}

impl Watch {
    fn new(number: u32, ranks: &[RankInfo]) -> Self {
        let mut w = Self {
            ranks: Vec::new(),
            n: 0,
            current: BTreeMap::new(),
            resized_ms: 0,
            done: BTreeSet::new(),
            gone: BTreeSet::new(),
            preempting: None,
            started: Instant::now(),
            exits: Vec::new(),
            first_failure: None,
        };
        w.run_at(number, ranks.to_vec());
        w
    }

    /// The gang runs (again) as `ranks`: after the start or a resize.
    fn run_at(&mut self, number: u32, ranks: Vec<RankInfo>) {
        super::super::status::running(number, &ranks);
        self.started = Instant::now();
        self.n = ranks.len() as u32;
        self.current = ranks.iter().map(|r| (r.container.id, r.clone())).collect();
        self.ranks = ranks;
        self.done.clear();
    }

    /// The attempt's end when every worker exited 0, or the preempted workers are gone (or
    /// overdue).
    fn settled(&self, out: &mut (dyn FnMut(&str) + Send)) -> Option<AttemptEnd> {
        let Some(p) = &self.preempting else {
            return (self.done.len() as u32 >= self.n).then_some(AttemptEnd::Succeeded(self.n));
        };
        let ended = |id: &ContainerId| self.done.contains(id) || self.gone.contains(id);
        if self.current.keys().all(ended) {
            out(&format!(
                "workers exited {} ms after the notice; asking for the gang again",
                p.noticed_at.elapsed().as_millis()
            ));
            return Some(AttemptEnd::Preempted);
        }
        let grace = u64::try_from(PREEMPT_GRACE.as_millis()).unwrap_or(u64::MAX);
        if now_ms() > p.deadline_ms.saturating_add(grace) {
            let left = self.current.keys().filter(|id| !ended(id)).count();
            out(&format!(
                "{left} worker(s) still reported running {} ms after the preemption \
                 deadline; stopping them and asking for the gang again",
                grace
            ));
            return Some(AttemptEnd::Preempted);
        }
        None
    }

    /// Why the gang cannot be resized now, if it cannot.
    fn busy(&self, resize: &Option<Resize>) -> Option<&'static str> {
        if self.preempting.is_some() {
            Some("preempted")
        } else if resize.is_some() {
            Some("being resized")
        } else if !self.done.is_empty() {
            Some("finishing")
        } else {
            None
        }
    }

    /// The resize the RM's demands and offers ask for, if the gang can take one now; the
    /// others are answered here.
    fn resize_asked(
        &self,
        elastic: bool,
        demands: Vec<GangDemand>,
        offers: Vec<GangOffer>,
        amrm: &mut AmRmClient,
        out: &mut (dyn FnMut(&str) + Send),
    ) -> Option<Resize> {
        let mut resize: Option<Resize> = None;
        for d in demands.into_iter().filter(|d| d.gang_id == GANG_ID) {
            if let Some(why) = self.busy(&resize) {
                out(&format!(
                    "gang {GANG_ID} asked to shrink {} -> {}: not resizing now (the \
                     workers are {why}); the ResourceManager takes the containers at its \
                     deadline",
                    d.from, d.to,
                ));
                continue;
            }
            resize = Some(Resize::Shrink(d));
        }
        for o in offers.into_iter().filter(|o| o.gang_id == GANG_ID) {
            let why = if elastic {
                self.busy(&resize)
            } else {
                Some("not elastic")
            };
            if let Some(why) = why {
                out(&format!(
                    "gang {GANG_ID} offered to grow {} -> {}: declined (the workers are {why})",
                    o.from, o.to,
                ));
                decline(amrm, &o);
                continue;
            }
            resize = Some(Resize::Grow(o));
        }
        resize
    }

    /// Takes in the completed containers; the first failure of the current workers, if any.
    fn on_completed(
        &mut self,
        completed: &[ContainerStatus],
        out: &mut (dyn FnMut(&str) + Send),
    ) -> Option<String> {
        let mut failure = None;
        for s in completed {
            super::super::status::ended(s);
            let Some(r) = self.current.get(&s.container_id) else {
                tracing::info!(container = %s.container_id, exit_status = s.exit_status,
                    "a container of an earlier attempt or size completed");
                continue;
            };
            let node = r.container.node_id.to_string();
            if self.preempting.is_none() && s.exit_status == exit_status::PREEMPTED {
                // Killed for a preemption whose notice this AM never heard (it was not
                // listening, or the notice came and went between two heartbeats).
                out(&format!(
                    "gang {GANG_ID} preempted: worker rank {} was taken back without a \
                     notice this AM heard",
                    r.rank
                ));
                self.preempting = Some(Preempting {
                    noticed_at: Instant::now(),
                    deadline_ms: now_ms(),
                });
            }
            if self.preempting.is_some() {
                self.gone.insert(s.container_id);
                out(&format!(
                    "worker rank {} ended after the preemption notice: {}",
                    r.rank,
                    completion_line(s, &node)
                ));
            } else if s.exit_status == exit_status::SUCCESS {
                self.done.insert(s.container_id);
                out(&format!(
                    "worker rank {} exited 0 in container {} on {node} ({} of {} done)",
                    r.rank,
                    s.container_id,
                    self.done.len(),
                    self.n
                ));
            } else {
                let l = format!(
                    "worker rank {} failed: {}",
                    r.rank,
                    completion_line(s, &node)
                );
                out(&l);
                self.exits.push(WorkerExit {
                    rank: r.rank,
                    exit_status: s.exit_status,
                    after: self.started.elapsed(),
                });
                failure.get_or_insert(l);
            }
        }
        failure
    }

    /// Tells the gang's statuses about this attempt; a FAILED one is a failure when the
    /// completions named none.
    fn on_gangs(
        &self,
        gangs: &[GangStatus],
        failure: &mut Option<String>,
        out: &mut (dyn FnMut(&str) + Send),
    ) {
        for g in gangs.iter().filter(|g| g.id == GANG_ID) {
            // A FAILED status naming none of this attempt's workers is about the last one.
            let ours = g.failed_containers.is_empty()
                || g.failed_containers
                    .iter()
                    .any(|c| self.current.contains_key(c));
            if !ours {
                continue;
            }
            out(&status_line(g));
            if g.state == GangState::FAILED && failure.is_none() && self.preempting.is_none() {
                *failure = Some(status_line(g));
            }
        }
    }
}

/// Declines the RM's offer to grow the gang.
pub(super) fn decline(amrm: &mut AmRmClient, o: &GangOffer) {
    let ids: Vec<ContainerId> = o.containers.iter().map(|c| c.id).collect();
    amrm.decline_offer(GANG_ID, &ids);
}

impl Attempt<'_> {
    /// Heartbeats until every worker exited 0, one did not, or the gang was preempted and
    /// its workers have exited. An elastic gang is resized here when the RM asks.
    pub(super) async fn watch(
        &self,
        amrm: &mut AmRmClient,
        ranks: &[RankInfo],
        out: &mut (dyn FnMut(&str) + Send),
    ) -> Result<AttemptEnd, AmError> {
        let mut w = Watch::new(self.number, ranks);
        let mut checkpoints = CheckpointWatch::new(self.cfg);
        let mut failing_since: Option<Instant> = None;
        // Heard during a resize, handled next.
        let mut carried: Option<AllocationEvents> = None;
        // Whatever the gang call heard meanwhile is handed out by this first poll.
        loop {
            if let Some(end) = w.settled(out) {
                return Ok(end);
            }
            if w.preempting.is_none() {
                let due = checkpoints.report(amrm, false);
                let ranged = self.cfg.cpus_per_gpu.is_some_and(|c| c.is_ranged());
                if ranged {
                    if let Some(r0) = w.ranks.iter().find(|r| r.rank == 0) {
                        checkpoints.cpus_from(r0.container.resource.v_cores, w.resized_ms);
                    }
                }
                if due && (self.cfg.elastic.is_some() || ranged) {
                    checkpoints.report_throughput(amrm, w.n);
                }
            }
            let ev = match carried.take() {
                Some(ev) => ev,
                None => match self.heartbeat(amrm, &mut failing_since).await? {
                    Some(ev) => ev,
                    None => continue,
                },
            };
            for c in ev.allocated {
                out(&format!(
                    "container {} allocated on {} is not needed; releasing it",
                    c.id, c.node_id
                ));
                amrm.release(c.id);
            }
            self.on_updated(&mut w, ev.updated, out).await;
            self.on_notices(amrm, &mut w, &ev.preempted, &mut checkpoints, out)
                .await;
            let resize =
                w.resize_asked(self.cfg.elastic.is_some(), ev.demands, ev.offers, amrm, out);
            let mut failure = w.on_completed(&ev.completed, out);
            w.on_gangs(&ev.gangs, &mut failure, out);
            for node in &ev.nodes {
                out(&format!("node {} is now {}", node.node_id, node.node_state));
            }
            amrm.set_progress(w.done.len() as f32 / w.n.max(1) as f32);
            if let Some(f) = failure {
                w.first_failure.get_or_insert((f, Instant::now()));
            }
            if w.first_failure.is_some() {
                if let Some(Resize::Grow(o)) = &resize {
                    decline(amrm, o);
                }
                match self.failed(&w).await {
                    Some(end) => return Ok(end),
                    None => {
                        tokio::time::sleep(amrm.next_interval()).await;
                        continue;
                    }
                }
            }
            if let (Some(rs), None) = (resize, &w.preempting) {
                match self.resize(amrm, &w.ranks, rs, &mut checkpoints, out).await {
                    Ok(new_ranks) => {
                        w.run_at(self.number, new_ranks);
                        // Send the releases now and take what came meanwhile.
                        match amrm.poll().await {
                            Ok(ev) => carried = Some(ev),
                            Err(e) => tracing::warn!(error = %e, "heartbeat after a resize"),
                        }
                        continue;
                    }
                    Err(f) => return Ok(AttemptEnd::WorkerFailed(f.into())),
                }
            }
            if w.preempting.is_some() || (w.done.len() as u32) < w.n {
                tokio::time::sleep(amrm.next_interval()).await;
            }
        }
    }

    /// One heartbeat; None after a failed one that may be retried (having waited).
    async fn heartbeat(
        &self,
        amrm: &mut AmRmClient,
        failing_since: &mut Option<Instant>,
    ) -> Result<Option<AllocationEvents>, AmError> {
        match amrm.poll().await {
            Ok(ev) => {
                *failing_since = None;
                Ok(Some(ev))
            }
            Err(AmError::Client(e)) => {
                let since = *failing_since.get_or_insert_with(Instant::now);
                if is_permanent(&e) || since.elapsed() >= RM_UNREACHABLE_LIMIT {
                    return Err(AmError::Client(e));
                }
                tracing::warn!(error = %e, "heartbeat failed; retrying");
                tokio::time::sleep(MAX_INTERVAL).await;
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Containers the RM resized in place (its CPU policy moving vcores): each worker's NM
    /// is handed the new token, so the container's CPU quota follows.
    async fn on_updated(
        &self,
        w: &mut Watch,
        updated: Vec<UpdatedContainer>,
        out: &mut (dyn FnMut(&str) + Send),
    ) {
        for u in updated {
            let c = u.container;
            if !w.current.contains_key(&c.id) {
                tracing::info!(container = %c.id, "an update of a container not running now");
                continue;
            }
            if let Err(e) = self.nm.update_container(&c).await {
                out(&format!("container {} could not be resized: {e}", c.id));
                continue;
            }
            tracing::info!(container = %c.id, vcores = c.resource.v_cores, "resized");
            w.resized_ms = now_ms();
            for r in w.ranks.iter_mut().filter(|r| r.container.id == c.id) {
                r.container = c.clone();
            }
            if let Some(r) = w.current.get_mut(&c.id) {
                r.container = c;
            }
        }
    }

    /// Acts on the first preemption notice naming this attempt's workers.
    async fn on_notices(
        &self,
        amrm: &mut AmRmClient,
        w: &mut Watch,
        notices: &[PreemptionNotice],
        checkpoints: &mut CheckpointWatch<'_>,
        out: &mut (dyn FnMut(&str) + Send),
    ) {
        for notice in notices {
            if !notice
                .containers
                .iter()
                .any(|c| w.current.contains_key(&c.id))
            {
                tracing::info!(containers = ?notice.ids(),
                    "a preemption notice about containers of an earlier attempt");
                continue;
            }
            if w.preempting.is_none() {
                let live: Vec<&RankInfo> = w
                    .ranks
                    .iter()
                    .filter(|r| !w.done.contains(&r.container.id))
                    .collect();
                w.preempting = Some(self.on_notice(amrm, &live, notice, checkpoints, out).await);
            }
        }
    }

    /// After a failure: the attempt's end, or None while the AM waits (up to
    /// [`FAIL_FAST_GATHER`]) for the rest of a gang that may be failing fast.
    async fn failed(&self, w: &Watch) -> Option<AttemptEnd> {
        let (f, at) = w.first_failure.as_ref()?;
        let window = self.fail_fast_window();
        let checkpointed = self.checkpointed();
        let ended = w.done.len() + w.exits.len() >= w.current.len();
        if w.preempting.is_none()
            && !ended
            && at.elapsed() < FAIL_FAST_GATHER
            && may_fail_fast(&w.exits, w.done.len(), window, checkpointed)
        {
            return None;
        }
        if let Some(status) = fail_fast(&w.exits, w.n, window, checkpointed) {
            let d = self.fail_fast_diagnostic(status, &w.exits, &w.ranks).await;
            return Some(AttemptEnd::FailedFast(d));
        }
        Some(AttemptEnd::WorkerFailed(Failure {
            why: f.clone(),
            stderr: self.first_failed_stderr(&w.exits, &w.ranks).await,
        }))
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
