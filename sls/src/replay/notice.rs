//! Preemption as the simulated daemons live it: the RM's tick (the monitor, `las` levels,
//! kills at deadlines) every monitoring interval while anything waits; a job's AM answering
//! a notice (it acknowledges, checkpoints for `checkpoint_cost_ms` and gives its containers
//! back, or, with `ack_preemption` off, lets the RM kill them at the deadline); the NMs
//! stopping what the RM wants gone; and the job's work: a gang runs again from its last
//! checkpoint (the one the notice asked for, else its last periodic one, else the start).

use super::*;
use spindle_resourcemanager::core::{Checkpoint, PreemptionNotice};

/// A notice a job's AM is answering.
#[derive(Debug, Clone)]
pub(super) struct Answering {
    /// When it came (sim ms).
    at: u64,
    /// The checkpoint the notice asked for is written (its work is saved as of `at`).
    checkpointed: bool,
}

/// The `sjf-oracle` priority: shorter jobs higher (a duration in seconds below 2e9).
pub(super) fn oracle_priority(job: &Job) -> i32 {
    let longest_s = job.tasks.iter().map(|t| t.duration_ms).max().unwrap_or(0) / 1000;
    (2_000_000_000u64 - longest_s.min(1_999_999_999)) as i32
}

impl Sim<'_> {
    /// A job that resumes from a checkpoint: a gang (it runs again whole) or a job of one
    /// container. The containers of other jobs are independent tasks: one taken back runs
    /// again from its start.
    pub(super) fn resumable(&self, j: usize) -> bool {
        self.jobs[j].is_gang() || self.jobs[j].containers() == 1
    }

    /// Schedules the next tick when the RM needs one: something waits, or is under notice.
    pub(super) fn keep_ticking(&mut self) {
        let Some(every) = self.tick_ms else { return };
        let busy = !self.noticed.is_empty() || self.elastic_ticks() || self.cpu_ticks();
        if self.ticking || (self.queued == 0 && !busy) {
            return;
        }
        self.ticking = true;
        let t = (self.now / every + 1) * every;
        self.at(t, Ev::Tick(true));
    }

    pub(super) fn tick(&mut self, regular: bool) -> Result<(), SlsError> {
        if regular {
            self.ticking = false;
            self.elastic_heartbeats();
        }
        self.timed(|c, now| c.tick_decisions(now));
        self.settle()?;
        self.reap()?;
        Ok(())
    }

    /// The job's AM heard of a notice (in an allocate answer).
    pub(super) fn on_notice(
        &mut self,
        j: usize,
        attempt: ApplicationAttemptId,
        n: PreemptionNotice,
    ) {
        for c in &n.containers {
            self.noticed.insert(c.id, j);
        }
        if self.runs[j].notice.is_some() {
            return;
        }
        let deadline = n.deadline.saturating_sub(EPOCH_MS);
        self.runs[j].notice = Some(Answering {
            at: self.now,
            checkpointed: false,
        });
        self.cpu_noticed(j);
        // The RM kills at the deadline: a tick then (it may come from the AM sooner).
        self.at(deadline.saturating_add(1), Ev::Tick(false));
        let (_, saved_at) = self.periodic(j);
        let mut report = AmReport {
            checkpoint: Some(Checkpoint {
                time: EPOCH_MS + saved_at,
                step: None,
                label: Some("periodic".into()),
            }),
            acknowledge_eta_ms: None,
            ..AmReport::default()
        };
        if self.opts.ack_preemption && self.resumable(j) {
            let eta = self.opts.checkpoint_cost_ms;
            report.acknowledge_eta_ms = Some(eta);
            if self.now.saturating_add(eta) < deadline {
                let epoch = self.runs[j].epoch;
                self.at(self.now.saturating_add(eta), Ev::Checkpointed(j, epoch));
            }
        }
        self.allocate_with(j, attempt, vec![], vec![], report);
    }

    /// The work a gang's periodic checkpoints have saved by now, and when the last was
    /// written (sim ms; the run's start when none was).
    fn periodic(&self, j: usize) -> (u64, u64) {
        let run = &self.runs[j];
        if !self.resumable(j) || run.run_from == u64::MAX {
            return (run.saved_ms, self.now);
        }
        let ran = self.now.saturating_sub(run.run_from);
        let every = self.opts.checkpoint_interval_ms;
        let done = ran.checked_div(every).map_or(0, |k| k * every);
        (run.saved_ms + done, run.run_from + done)
    }

    /// The AM wrote the checkpoint the notice asked for: it says so and gives its
    /// containers back.
    pub(super) fn checkpointed(&mut self, j: usize, epoch: u32) -> Result<(), SlsError> {
        let (Some(att), Some(n)) = (self.runs[j].attempt, self.runs[j].notice.clone()) else {
            return Ok(());
        };
        if epoch != self.runs[j].epoch || self.runs[j].outcome.is_some() {
            return Ok(());
        }
        if let Some(a) = self.runs[j].notice.as_mut() {
            a.checkpointed = true;
        }
        let release: Vec<ContainerId> = self
            .noticed
            .iter()
            .filter(|(_, job)| **job == j)
            .map(|(c, _)| *c)
            .collect();
        let report = AmReport {
            checkpoint: Some(Checkpoint {
                time: EPOCH_MS + n.at,
                step: None,
                label: Some("on notice".into()),
            }),
            acknowledge_eta_ms: None,
            ..AmReport::default()
        };
        self.allocate_with(j, att, vec![], release, report);
        self.settle()?;
        self.reap()
    }

    /// The NMs stop what the RM wants gone (a kill at the deadline, a release): each
    /// container under notice the RM asked its node to clean up ends there.
    ///
    /// A notice may also name the job's AM container (the monitor takes a whole application
    /// last). The replay does not play an AM's preemption: the AM goes on until its job
    /// ends, and the notice's entry is then forgotten with every other noticed container
    /// that runs nowhere any more, so the clock does not tick for it forever.
    fn reap(&mut self) -> Result<(), SlsError> {
        let mut gone: BTreeMap<NodeId, Vec<(ContainerId, usize)>> = BTreeMap::new();
        let mut stale = Vec::new();
        for (c, j) in &self.noticed {
            let Some(g) = self.runs[*j].granted.iter().find(|g| g.id == *c) else {
                if !self.running.values().any(|on| on.contains(c)) {
                    stale.push(*c);
                }
                continue;
            };
            let wanted = self
                .core
                .nodes()
                .get(&g.node)
                .is_some_and(|n| n.to_cleanup.contains(c));
            if wanted {
                gone.entry(g.node.clone()).or_default().push((*c, *j));
            }
        }
        for c in stale {
            self.noticed.remove(&c);
        }
        if gone.is_empty() {
            return Ok(());
        }
        let mut jobs: BTreeSet<usize> = BTreeSet::new();
        for (node, cs) in gone {
            let ids: Vec<ContainerId> = cs.iter().map(|(c, _)| *c).collect();
            if let Some(s) = self.running.get_mut(&node) {
                for c in &ids {
                    s.remove(c);
                }
            }
            self.heartbeat(&node, &ids);
            for (c, j) in cs {
                self.noticed.remove(&c);
                self.taken_back(j, c);
                jobs.insert(j);
            }
        }
        self.settle()?;
        for j in jobs {
            self.maybe_ask_again(j);
        }
        self.settle()
    }

    /// One container of job `j` ended under notice: its GPUs are free, its unrun time is
    /// not used, and the work since the job's last checkpoint is lost.
    fn taken_back(&mut self, j: usize, c: ContainerId) {
        let Some(pos) = self.runs[j].granted.iter().position(|g| g.id == c) else {
            return;
        };
        let g = self.runs[j].granted.remove(pos);
        if !g.started {
            return;
        }
        self.held(j, -g.gpus);
        self.waits_for(j, g.gpus);
        let gpus = g.gpus.max(0) as u128;
        let unrun = u128::from(g.ends_at.saturating_sub(self.now));
        self.runs[j].gpu_ms_used = self.runs[j].gpu_ms_used.saturating_sub(gpus * unrun);
        let notice = self.runs[j].notice.clone();
        if let Some(n) = &notice {
            self.notice_to_exit_ms.push(self.now.saturating_sub(n.at));
        }
        let saved_at = match &notice {
            Some(n) if n.checkpointed => n.at,
            _ => self.periodic(j).1,
        };
        let since = if self.resumable(j) {
            saved_at.max(self.runs[j].run_from)
        } else {
            g.ends_at
                .saturating_sub(self.jobs[j].tasks.get(g.group).map_or(0, |t| t.duration_ms))
        };
        let lost = gpus * u128::from(self.now.saturating_sub(since));
        self.runs[j].lost_gpu_ms += lost;
        self.lost_gpu_ms += lost;
        if !self.resumable(j) {
            self.runs[j].preemptions += 1;
            self.preemptions += 1;
        }
    }

    /// When nothing of a preempted job runs any more, its AM asks again for what is left:
    /// a gang from its checkpoint, whole; an independent job for the containers it lost.
    fn maybe_ask_again(&mut self, j: usize) {
        let (Some(att), None) = (self.runs[j].attempt, self.runs[j].outcome.as_ref()) else {
            return;
        };
        if self.resumable(j) {
            if self.runs[j].granted.iter().any(|g| g.started) || self.runs[j].notice.is_none() {
                return;
            }
            let noticed_at = self.runs[j].notice.as_ref().map(|n| n.at);
            let checkpointed = self.runs[j].notice.as_ref().is_some_and(|n| n.checkpointed);
            let saved = match &self.runs[j].notice {
                Some(n) if n.checkpointed => {
                    let run = &self.runs[j];
                    run.saved_ms + n.at.saturating_sub(run.run_from)
                }
                _ => self.periodic(j).0,
            };
            let saved_at = self.periodic(j).1;
            self.cpu_rewind(j, noticed_at, checkpointed, saved_at);
            let run = &mut self.runs[j];
            run.saved_ms = saved;
            run.run_from = u64::MAX;
            run.epoch += 1;
            run.ended = 0;
            run.granted.clear();
            run.ended_by_group.iter_mut().for_each(|n| *n = 0);
            run.preemptions += 1;
            self.preemptions += 1;
            self.running_jobs = self.running_jobs.saturating_sub(1);
            self.waiting(j, true);
        } else if self.runs[j].notice.is_some() && !self.noticed.values().any(|x| *x == j) {
            self.runs[j].notice = None;
        }
        self.ask_rest(j, att);
    }
}
