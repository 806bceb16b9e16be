//! The sweep application master.
//!
//! Registers, then keeps at most `parallel` containers asked for or running: it asks for one
//! container per waiting trial while there is room (never a gang), starts the next waiting
//! trial in each container as it is granted, and asks again as trials end. A trial's
//! container ends with its command, so its resources (GPUs) go back to the cluster as soon
//! as the NM reports it; a container granted when no trial waits is released at once.
//!
//! A trial that exits non-zero (or whose container cannot be started) runs again, in a new
//! container, up to `max_trial_retries` times; one whose container ends ABORTED (-100, its
//! node was lost) or PREEMPTED (-102) runs again without that counting. After each trial
//! ends the AM reads the last line of its stdout from the NM. The application SUCCEEDS only
//! if every trial did; otherwise it FAILS with a diagnostic naming the failed trials. Like
//! the distributed shell's ([`crate::dshell::am`], whose heartbeat loop this AM shares), it
//! gives up only after waiting on the cluster for the no-progress timeout; a trial that
//! simply runs long is never timed out.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::time::Duration;

use spindle_common::ids::{ApplicationId, ContainerId};
use spindle_common::records::am::Container;
use spindle_common::records::node::ContainerLaunchContext;
use spindle_common::states::{exit_status, FinalApplicationStatus};
use spindle_common::time::now_ms;
use tokio::sync::mpsc;

use super::status::{
    self, last_line, SweepTrials, TrialState, TrialStatus, TEMP_FILE, TRIALS_FILE,
};
use super::{trial_env, SweepAmConfig};
use crate::am_client::AmError;
use crate::amrm::{AllocationEvents, AmRmClient, ContainerRequest};
use crate::dshell::am::{
    completion_line, drive, finish_and_report, register_fitting, stop_containers, Driven,
    Registered, Stop,
};
use crate::error::ClientError;
use crate::nm_client::NmClient;
use crate::ship::Shipped;

/// How much of a trial's stdout is read for its last line.
const STDOUT_TAIL_BYTES: u64 = 4096;
/// How long the AM waits, once every trial has ended, for the last lines still being read.
const LAST_LINE_WAIT: Duration = Duration::from_secs(5);

/// How the AM ended.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepReport {
    pub final_status: FinalApplicationStatus,
    pub diagnostics: String,
    pub trials: SweepTrials,
}

/// What the AM's own tasks send back between heartbeats.
enum Msg {
    /// The NM answered the start of the trial in this container.
    Launched(ContainerId, Result<(), ClientError>),
    /// The last line of stdout of trial `index`'s attempt `attempt`.
    LastLine {
        index: usize,
        attempt: u32,
        line: Option<String>,
    },
}

struct Sweep<'a> {
    cfg: &'a SweepAmConfig,
    shipped: &'a Shipped,
    nm: &'a NmClient,
    app_id: ApplicationId,
    /// The one ask every trial's container answers.
    request: ContainerRequest,
    doc: SweepTrials,
    /// Trials to start, by index into `doc.trials`: retries go first.
    waiting: VecDeque<usize>,
    /// The trial each granted, not yet completed container runs, and the container.
    held: BTreeMap<ContainerId, (usize, Container)>,
    /// Granted, start call not answered yet.
    starting: BTreeSet<ContainerId>,
    /// Given back to the RM (not needed, or failed to start): their completions are not ours.
    released: BTreeSet<ContainerId>,
    /// Failures counted against each trial's retries (lost containers are not counted).
    failures: Vec<u32>,
    /// Last-line reads not yet answered.
    reading: usize,
    tx: mpsc::UnboundedSender<Msg>,
    /// Where [`TRIALS_FILE`] is written (the AM container's log directory).
    dir: Option<PathBuf>,
    warned: bool,
}

impl Sweep<'_> {
    /// Asks for one container per waiting trial not yet asked for, while fewer than
    /// `parallel` are asked for or held.
    fn top_up(&mut self, amrm: &mut AmRmClient) -> Result<(), AmError> {
        let outstanding = amrm.outstanding_requests().max(0) as usize;
        let wanted = self.waiting.len().saturating_sub(outstanding);
        let room = (self.cfg.parallel as usize).saturating_sub(self.held.len() + outstanding);
        for _ in 0..wanted.min(room) {
            amrm.add_container_request(self.request.clone())?;
        }
        Ok(())
    }

    fn launch_context(&self, index: usize) -> ContainerLaunchContext {
        let t = &self.doc.trials[index];
        ContainerLaunchContext {
            commands: vec![self.cfg.shell.shell_command.clone()],
            environment: trial_env(self.cfg, &t.trial, t.attempts, &self.app_id.to_string()),
            local_resources: self.shipped.resources.clone(),
        }
    }

    /// `trial 3 (lr=0.1)`.
    fn name(&self, index: usize) -> String {
        let t = &self.doc.trials[index].trial;
        if t.params.is_empty() {
            format!("trial {}", t.id)
        } else {
            format!("trial {} ({})", t.id, t.params_text())
        }
    }

    fn start(&mut self, index: usize, c: Container, out: &mut (dyn FnMut(&str) + Send)) {
        let t = &mut self.doc.trials[index];
        t.attempts += 1;
        t.state = TrialState::STARTING;
        t.container_id = Some(c.id);
        t.node_id = Some(c.node_id.to_string());
        t.started_ms = Some(now_ms());
        t.duration_ms = None;
        t.exit_status = None;
        t.last_line = None;
        let attempt = t.attempts;
        out(&format!(
            "{} attempt {attempt}: starting in container {} on {}",
            self.name(index),
            c.id,
            c.node_id
        ));
        let (nm, tx, ctx) = (self.nm.clone(), self.tx.clone(), self.launch_context(index));
        self.starting.insert(c.id);
        self.held.insert(c.id, (index, c.clone()));
        tokio::spawn(async move {
            let r = nm.start_container(&c, ctx).await;
            // The receiver outlives every launch unless the AM is exiting anyway.
            let _ = tx.send(Msg::Launched(c.id, r));
        });
    }

    /// The trial's attempt ended (`exit` None: it never started). It runs again when it
    /// has retries left (or lost its container to the cluster), else it is final.
    fn ended(&mut self, index: usize, exit: Option<i32>, out: &mut (dyn FnMut(&str) + Send)) {
        let name = self.name(index);
        let t = &mut self.doc.trials[index];
        t.exit_status = exit;
        t.duration_ms = t.started_ms.map(|s| now_ms().saturating_sub(s));
        let lost = matches!(exit, Some(exit_status::ABORTED | exit_status::PREEMPTED));
        if exit == Some(exit_status::SUCCESS) {
            t.state = TrialState::SUCCEEDED;
            return;
        }
        if lost {
            t.state = TrialState::WAITING;
            self.waiting.push_front(index);
            out(&format!(
                "{name}: its container was lost; not counted as a failure, it runs again"
            ));
            return;
        }
        self.failures[index] += 1;
        let failures = self.failures[index];
        if failures <= self.cfg.max_trial_retries {
            t.state = TrialState::WAITING;
            self.waiting.push_front(index);
            out(&format!(
                "{name} failed; running it again (retry {failures} of {})",
                self.cfg.max_trial_retries
            ));
        } else {
            t.state = TrialState::FAILED;
            out(&format!(
                "{name} failed for good after {} attempt(s)",
                t.attempts
            ));
        }
    }

    /// Reads the last line of the trial's stdout in `c` in the background.
    fn read_last_line(&mut self, index: usize, c: &Container) {
        let attempt = self.doc.trials[index].attempts;
        let (nm, tx, node, id) = (
            self.nm.clone(),
            self.tx.clone(),
            c.node_http_address.clone(),
            c.id,
        );
        self.reading += 1;
        tokio::spawn(async move {
            let line = match nm
                .container_log_tail(&node, &id, "stdout", STDOUT_TAIL_BYTES)
                .await
            {
                Ok(text) => last_line(&text),
                Err(e) => {
                    tracing::debug!(container = %id, error = %e, "stdout of a trial");
                    None
                }
            };
            let _ = tx.send(Msg::LastLine {
                index,
                attempt,
                line,
            });
        });
    }

    fn on_launched(
        &mut self,
        id: ContainerId,
        r: Result<(), ClientError>,
        amrm: &mut AmRmClient,
        out: &mut (dyn FnMut(&str) + Send),
    ) -> Result<(), AmError> {
        self.starting.remove(&id);
        match r {
            Ok(()) => {
                if let Some((index, c)) = self.held.get(&id) {
                    let index = *index;
                    out(&format!("{} started on {}", self.name(index), c.node_id));
                    self.doc.trials[index].state = TrialState::RUNNING;
                }
            }
            // Already completed (the RM's report raced the NM's answer): nothing to count.
            Err(e) => {
                if let Some((index, c)) = self.held.remove(&id) {
                    out(&format!(
                        "{} could not be started in container {id} on {}: {e}",
                        self.name(index),
                        c.node_id
                    ));
                    self.released.insert(id);
                    amrm.release(id);
                    self.ended(index, None, out);
                }
            }
        }
        self.top_up(amrm)?;
        self.write();
        Ok(())
    }

    fn take_events(
        &mut self,
        ev: AllocationEvents,
        amrm: &mut AmRmClient,
        out: &mut (dyn FnMut(&str) + Send),
    ) -> Result<(), AmError> {
        let changed = !ev.allocated.is_empty() || !ev.completed.is_empty();
        for c in ev.allocated {
            let room = self.held.len() < self.cfg.parallel as usize;
            match self.waiting.pop_front().filter(|_| room) {
                Some(index) => self.start(index, c, out),
                None => {
                    out(&format!(
                        "container {} allocated on {} is not needed; releasing it",
                        c.id, c.node_id
                    ));
                    self.released.insert(c.id);
                    amrm.release(c.id);
                }
            }
        }
        for s in ev.completed {
            self.starting.remove(&s.container_id);
            match self.held.remove(&s.container_id) {
                Some((index, c)) => {
                    out(&completion_line(&s, &c.node_id.to_string()));
                    self.ended(index, Some(s.exit_status), out);
                    self.read_last_line(index, &c);
                }
                None if self.released.remove(&s.container_id) => {
                    tracing::debug!(container = %s.container_id, "released container completed");
                }
                None => out(&completion_line(&s, "an unknown node")),
            }
        }
        for n in ev.nodes {
            out(&format!("node {} is now {}", n.node_id, n.node_state));
        }
        self.top_up(amrm)?;
        let c = self.doc.counts();
        amrm.set_progress((c.succeeded + c.failed) as f32 / self.doc.trials.len().max(1) as f32);
        if changed {
            self.write();
        }
        Ok(())
    }

    fn on_last_line(&mut self, index: usize, attempt: u32, line: Option<String>) {
        self.reading = self.reading.saturating_sub(1);
        let t = &mut self.doc.trials[index];
        // A later attempt's line wins over an earlier one's that arrives late.
        if t.attempts == attempt {
            t.last_line = line;
            self.write();
        }
    }

    /// Writes [`TRIALS_FILE`] for the client (nothing outside a container).
    fn write(&mut self) {
        self.doc.updated_ms = now_ms();
        let Some(dir) = &self.dir else { return };
        let r = crate::train::status::write_atomically(dir, TRIALS_FILE, TEMP_FILE, &self.doc);
        if let Err(e) = r {
            if !self.warned {
                tracing::warn!(dir = %dir.display(), error = %e,
                    "cannot write {TRIALS_FILE}; the client will not see the trials");
                self.warned = true;
            }
        }
    }

    /// Waits (a while) for the last lines still being read once every trial has ended.
    async fn collect_last_lines(&mut self, rx: &mut mpsc::UnboundedReceiver<Msg>) {
        let deadline = tokio::time::Instant::now() + LAST_LINE_WAIT;
        while self.reading > 0 {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(Msg::LastLine {
                    index,
                    attempt,
                    line,
                })) => self.on_last_line(index, attempt, line),
                Ok(Some(Msg::Launched(..))) => {}
                Ok(None) | Err(_) => break,
            }
        }
    }
}

impl Driven for Sweep<'_> {
    type Msg = Msg;

    fn done(&self) -> bool {
        self.doc.all_final()
    }

    fn starting(&self) -> bool {
        !self.starting.is_empty()
    }

    fn on_message(
        &mut self,
        msg: Msg,
        amrm: &mut AmRmClient,
        out: &mut (dyn FnMut(&str) + Send),
    ) -> Result<(), AmError> {
        match msg {
            Msg::Launched(id, r) => self.on_launched(id, r, amrm, out),
            Msg::LastLine {
                index,
                attempt,
                line,
            } => {
                self.on_last_line(index, attempt, line);
                Ok(())
            }
        }
    }

    fn on_events(
        &mut self,
        ev: AllocationEvents,
        amrm: &mut AmRmClient,
        out: &mut (dyn FnMut(&str) + Send),
    ) -> Result<(), AmError> {
        self.take_events(ev, amrm, out)
    }
}

/// Runs the sweep AM to its end: registers (as `am_host`), runs every trial, unregisters
/// with the final status, prints the table of trials, and removes the staging directory.
/// Each event is one line given to `out`.
pub async fn run_am_with(
    cfg: &SweepAmConfig,
    shipped: &Shipped,
    amrm: &mut AmRmClient,
    nm: &NmClient,
    am_host: &str,
    out: &mut (dyn FnMut(&str) + Send),
) -> Result<SweepReport, AmError> {
    let report = run_sweep(cfg, shipped, amrm, nm, am_host, out).await?;
    out("Trials:");
    for l in status::table(&report.trials) {
        out(&l);
    }
    if let Some(l) = shipped.clean_up() {
        out(&l);
    }
    Ok(report)
}

async fn run_sweep(
    cfg: &SweepAmConfig,
    shipped: &Shipped,
    amrm: &mut AmRmClient,
    nm: &NmClient,
    am_host: &str,
    out: &mut (dyn FnMut(&str) + Send),
) -> Result<SweepReport, AmError> {
    let resources = &cfg.shell.container_resources;
    let registered = register_fitting(amrm, am_host, "trial", resources, out).await?;
    let doc = SweepTrials {
        parallel: cfg.parallel,
        trials: cfg.trials.iter().cloned().map(TrialStatus::new).collect(),
        updated_ms: now_ms(),
    };
    if let Registered::TooBig(diagnostics) = registered {
        return Ok(SweepReport {
            final_status: FinalApplicationStatus::FAILED,
            diagnostics,
            trials: doc,
        });
    }
    let mut request = ContainerRequest::new(resources.clone(), cfg.shell.container_priority)
        .image_of_env(&cfg.shell.shell_env);
    if let Some(e) = &cfg.shell.node_label_expression {
        request = request.node_label_expression(e.clone());
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut sweep = Sweep {
        cfg,
        shipped,
        nm,
        app_id: amrm.client().attempt_id().application_id,
        request,
        waiting: (0..doc.trials.len()).collect(),
        failures: vec![0; doc.trials.len()],
        doc,
        held: BTreeMap::new(),
        starting: BTreeSet::new(),
        released: BTreeSet::new(),
        reading: 0,
        tx,
        dir: crate::train::status::am_log_dir(),
        warned: false,
    };
    out(&format!(
        "sweep of {} trials, at most {} at once, each in a container of {resources} at \
         priority {}, up to {} retries per trial: {}",
        cfg.trials.len(),
        cfg.parallel,
        cfg.shell.container_priority,
        cfg.max_trial_retries,
        cfg.shell.shell_command
    ));
    sweep.write();
    sweep.top_up(amrm)?;
    let stop = drive(
        &mut sweep,
        amrm,
        &mut rx,
        cfg.shell.no_progress_timeout,
        out,
    )
    .await?;
    let done = matches!(stop, Stop::Done);
    let diagnostics = match stop {
        Stop::Done => {
            sweep.collect_last_lines(&mut rx).await;
            sweep.doc.failure_diagnostic().unwrap_or_default()
        }
        Stop::Refused(why) => why,
        Stop::GaveUp(idle) => {
            let c = sweep.doc.counts();
            format!(
                "gave up after {} ms without progress: {} of {} trials succeeded, {} failed, \
                 {} running, {} waiting",
                idle.as_millis(),
                c.succeeded,
                sweep.doc.trials.len(),
                c.failed,
                c.running,
                c.waiting
            )
        }
    };
    if !done {
        out(&diagnostics);
        stop_containers(nm, sweep.held.values().map(|(_, c)| c), out).await;
    }
    sweep.write();
    let final_status = if done && diagnostics.is_empty() {
        FinalApplicationStatus::SUCCEEDED
    } else {
        FinalApplicationStatus::FAILED
    };
    finish_and_report(amrm, final_status, &diagnostics, out).await?;
    Ok(SweepReport {
        final_status,
        diagnostics,
        trials: sweep.doc,
    })
}
