//! The distributed shell application master.
//!
//! Registers, asks for N containers, starts the shell command in each as it is granted,
//! and waits for every one to complete. As in YARN's, a container that ends with -100
//! (ABORTED, e.g. its node was lost) or -102 (PREEMPTED) is not counted as failed: another is
//! asked for. It succeeds only if every container exited 0, and gives up when it has waited
//! on the cluster (for grants, container starts or heartbeat answers) for the configured time
//! without anything happening; a command that simply runs long is never timed out.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use spindle_common::ids::ContainerId;
use spindle_common::records::am::{Container, ContainerStatus, RegisterApplicationMasterResponse};
use spindle_common::records::node::ContainerLaunchContext;
use spindle_common::resource::Resource;
use spindle_common::states::{exit_status, FinalApplicationStatus};
use tokio::sync::mpsc;

use super::DsAmConfig;
use crate::am_client::AmError;
use crate::amrm::{AllocationEvents, AmRmClient, ContainerRequest};
use crate::error::ClientError;
use crate::nm_client::NmClient;
use crate::ship::Shipped;

/// How the AM ended.
#[derive(Debug, Clone, PartialEq)]
pub struct DsAmReport {
    pub final_status: FinalApplicationStatus,
    pub diagnostics: String,
    pub total: u32,
    pub succeeded: u32,
    pub failed: u32,
    /// Containers that ended ABORTED/PREEMPTED and were asked for again.
    pub retried: u32,
}

/// YARN's name of a `ContainerExitStatus`, for the negative framework statuses.
pub fn exit_status_name(status: i32) -> Option<&'static str> {
    Some(match status {
        exit_status::INVALID => "INVALID",
        exit_status::ABORTED => "ABORTED",
        exit_status::DISKS_FAILED => "DISKS_FAILED",
        exit_status::PREEMPTED => "PREEMPTED",
        exit_status::KILLED_EXCEEDED_VMEM => "KILLED_EXCEEDED_VMEM",
        exit_status::KILLED_EXCEEDED_PMEM => "KILLED_EXCEEDED_PMEM",
        exit_status::KILLED_BY_APPMASTER => "KILLED_BY_APPMASTER",
        exit_status::KILLED_BY_RESOURCEMANAGER => "KILLED_BY_RESOURCEMANAGER",
        exit_status::KILLED_AFTER_APP_COMPLETION => "KILLED_AFTER_APP_COMPLETION",
        exit_status::KILLED_BY_CONTAINER_SCHEDULER => "KILLED_BY_CONTAINER_SCHEDULER",
        exit_status::KILLED_FOR_EXCESS_LOGS => "KILLED_FOR_EXCESS_LOGS",
        _ => return None,
    })
}

/// `container X completed on NODE with exit status S (NAME): DIAGNOSTICS`.
pub fn completion_line(s: &ContainerStatus, node: &str) -> String {
    let mut l = format!(
        "container {} completed on {node} with exit status {}",
        s.container_id, s.exit_status
    );
    if let Some(n) = exit_status_name(s.exit_status) {
        l.push_str(&format!(" ({n})"));
    }
    let d = s.diagnostics.trim();
    if !d.is_empty() {
        l.push_str(": ");
        l.push_str(d);
    }
    l
}

/// One ask of the shell: YARN's distributed shell asks once per placement-spec source tag
/// (its own allocationRequestId, the tag as allocation tag, its constraint), or once for all
/// `num_containers` without a spec.
#[derive(Debug, Clone)]
struct Ask {
    request: ContainerRequest,
    total: u32,
    /// Completed (succeeded or failed) containers of this ask.
    finished: u32,
}

/// The asks `cfg` makes.
fn asks(cfg: &DsAmConfig) -> Vec<Ask> {
    let base = || {
        let r = ContainerRequest::new(cfg.container_resources.clone(), cfg.container_priority)
            .image_of_env(&cfg.shell_env);
        match &cfg.node_label_expression {
            Some(e) => r.node_label_expression(e.clone()),
            None => r,
        }
    };
    if cfg.placement.is_empty() {
        return vec![Ask {
            request: base(),
            total: cfg.num_containers,
            finished: 0,
        }];
    }
    cfg.placement
        .iter()
        .zip(1i64..)
        .map(|(spec, id)| {
            let mut r = base()
                .allocation_request_id(id)
                .allocation_tags([spec.source_tag.clone()]);
            r.placement_constraint = spec.constraint.clone();
            Ask {
                request: r,
                total: spec.num_containers,
                finished: 0,
            }
        })
        .collect()
}

struct Shell<'a> {
    cfg: &'a DsAmConfig,
    /// The files shipped to every container ([`crate::ship`]).
    shipped: &'a Shipped,
    nm: &'a NmClient,
    asks: Vec<Ask>,
    /// The ask each running container was granted for.
    ask_of: BTreeMap<ContainerId, usize>,
    launched: mpsc::UnboundedSender<Launched>,
    /// Granted and started (or starting), not yet completed.
    running: BTreeMap<ContainerId, Container>,
    /// Given back to the RM (extra, or failed to start): their completions are not ours.
    released: BTreeSet<ContainerId>,
    succeeded: u32,
    failed: u32,
    retried: u32,
    /// Granted, start call not answered yet.
    starting: BTreeSet<ContainerId>,
}

impl Shell<'_> {
    /// The ask a granted container answers, by its allocationRequestId (every ask of the
    /// shell has the same priority).
    fn ask_for(&self, c: &Container) -> Option<usize> {
        self.asks
            .iter()
            .position(|a| a.request.allocation_request_id == c.allocation_request_id)
    }

    /// Whether ask `i` still wants a container.
    fn wanted(&self, i: usize) -> bool {
        let running = self.ask_of.values().filter(|&&a| a == i).count();
        let a = &self.asks[i];
        a.finished as usize + running < a.total as usize
    }

    fn finish_one(&mut self, id: &ContainerId) {
        if let Some(i) = self.ask_of.remove(id) {
            self.asks[i].finished += 1;
        }
    }

    fn completed(&self) -> u32 {
        self.succeeded + self.failed
    }

    /// Every container of every ask.
    fn total(&self) -> u32 {
        self.asks.iter().map(|a| a.total).sum()
    }

    fn launch_context(&self) -> ContainerLaunchContext {
        ContainerLaunchContext {
            commands: vec![self.cfg.shell_command.clone()],
            environment: self.cfg.shell_env.clone(),
            local_resources: self.shipped.resources.clone(),
        }
    }

    fn take_events(
        &mut self,
        ev: AllocationEvents,
        amrm: &mut AmRmClient,
        out: &mut (dyn FnMut(&str) + Send),
    ) -> Result<(), AmError> {
        for c in ev.allocated {
            let ask = self.ask_for(&c).filter(|&i| self.wanted(i));
            let Some(ask) = ask else {
                out(&format!(
                    "container {} allocated on {} is not needed; releasing it",
                    c.id, c.node_id
                ));
                self.released.insert(c.id);
                amrm.release(c.id);
                continue;
            };
            self.ask_of.insert(c.id, ask);
            out(&format!(
                "container {} allocated on {} ({})",
                c.id, c.node_id, c.node_http_address
            ));
            let nm = self.nm.clone();
            let tx = self.launched.clone();
            let ctx = self.launch_context();
            let container = c.clone();
            self.starting.insert(c.id);
            self.running.insert(c.id, c);
            tokio::spawn(async move {
                let r = nm.start_container(&container, ctx).await;
                // The receiver outlives every launch unless the AM is exiting anyway.
                let _ = tx.send((container.id, r));
            });
        }
        for s in ev.completed {
            self.starting.remove(&s.container_id);
            match self.running.remove(&s.container_id) {
                Some(c) => {
                    let mut line = completion_line(&s, &c.node_id.to_string());
                    match s.exit_status {
                        exit_status::SUCCESS => {
                            self.succeeded += 1;
                            self.finish_one(&s.container_id);
                        }
                        exit_status::ABORTED | exit_status::PREEMPTED => {
                            if let Some(i) = self.ask_of.remove(&s.container_id) {
                                amrm.add_container_request(self.asks[i].request.clone())?;
                            }
                            self.retried += 1;
                            line.push_str("; not counted as failed, asking for another container");
                        }
                        _ => {
                            self.failed += 1;
                            self.finish_one(&s.container_id);
                        }
                    }
                    out(&line);
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
        amrm.set_progress(self.completed() as f32 / self.total().max(1) as f32);
        Ok(())
    }

    fn on_launched(
        &mut self,
        id: ContainerId,
        r: Result<(), ClientError>,
        amrm: &mut AmRmClient,
        out: &mut (dyn FnMut(&str) + Send),
    ) {
        self.starting.remove(&id);
        match r {
            Ok(()) => {
                let node = self
                    .running
                    .get(&id)
                    .map_or_else(|| "its node".to_string(), |c| c.node_id.to_string());
                out(&format!("container {id} started on {node}"));
            }
            Err(e) => {
                // Already completed (the RM's report raced the NM's answer): nothing to count.
                if let Some(c) = self.running.remove(&id) {
                    out(&format!(
                        "container {id} failed to start on {}: {e}",
                        c.node_id
                    ));
                    self.failed += 1;
                    self.finish_one(&id);
                    self.released.insert(id);
                    amrm.release(id);
                }
            }
        }
    }

    async fn stop_running(&self, out: &mut (dyn FnMut(&str) + Send)) {
        stop_containers(self.nm, self.running.values(), out).await;
    }
}

/// Stops each of `containers` on its NM (an AM giving up), saying how it went.
pub(crate) async fn stop_containers(
    nm: &NmClient,
    containers: impl IntoIterator<Item = &Container>,
    out: &mut (dyn FnMut(&str) + Send),
) {
    for c in containers {
        nm.remember(c);
        match nm.stop_container(&c.node_http_address, &c.id).await {
            Ok(()) => out(&format!("container {} stopped", c.id)),
            Err(e) => out(&format!("container {} could not be stopped: {e}", c.id)),
        }
    }
}

/// Runs the distributed shell AM to its end: registers (as `am_host`), runs the command in
/// `cfg.num_containers` containers, unregisters with the final status. Each event is one
/// line given to `out`.
pub async fn run_am(
    cfg: &DsAmConfig,
    amrm: &mut AmRmClient,
    nm: &NmClient,
    am_host: &str,
    out: &mut (dyn FnMut(&str) + Send),
) -> Result<DsAmReport, AmError> {
    run_am_with(cfg, &Shipped::default(), amrm, nm, am_host, out).await
}

/// [`run_am`] with the files the client shipped for every container; the staging directory
/// is removed once the AM has unregistered.
pub async fn run_am_with(
    cfg: &DsAmConfig,
    shipped: &Shipped,
    amrm: &mut AmRmClient,
    nm: &NmClient,
    am_host: &str,
    out: &mut (dyn FnMut(&str) + Send),
) -> Result<DsAmReport, AmError> {
    let report = run_shell(cfg, shipped, amrm, nm, am_host, out).await?;
    if let Some(l) = shipped.clean_up() {
        out(&l);
    }
    Ok(report)
}

async fn run_shell(
    cfg: &DsAmConfig,
    shipped: &Shipped,
    amrm: &mut AmRmClient,
    nm: &NmClient,
    am_host: &str,
    out: &mut (dyn FnMut(&str) + Send),
) -> Result<DsAmReport, AmError> {
    let registered =
        register_fitting(amrm, am_host, "container", &cfg.container_resources, out).await?;
    let total = if cfg.placement.is_empty() {
        cfg.num_containers
    } else {
        crate::placement::total_containers(&cfg.placement)
    };
    let mut report = DsAmReport {
        final_status: FinalApplicationStatus::FAILED,
        diagnostics: String::new(),
        total,
        succeeded: 0,
        failed: 0,
        retried: 0,
    };
    if let Registered::TooBig(d) = registered {
        report.diagnostics = d;
        return Ok(report);
    }

    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut shell = Shell {
        cfg,
        shipped,
        nm,
        asks: asks(cfg),
        ask_of: BTreeMap::new(),
        launched: tx,
        running: BTreeMap::new(),
        released: BTreeSet::new(),
        succeeded: 0,
        failed: 0,
        retried: 0,
        starting: BTreeSet::new(),
    };
    shell.ask_all(amrm, total, out)?;
    let stop = drive(&mut shell, amrm, &mut rx, cfg.no_progress_timeout, out).await?;

    report.succeeded = shell.succeeded;
    report.failed = shell.failed;
    report.retried = shell.retried;
    match stop {
        Stop::Refused(why) => {
            report.diagnostics = why;
            out(&report.diagnostics);
            shell.stop_running(out).await;
        }
        Stop::GaveUp(idle) => {
            report.diagnostics = format!(
                "gave up after {} ms without progress: {} of {total} containers succeeded, {} \
                 failed, {} running, {} still requested",
                idle.as_millis(),
                shell.succeeded,
                shell.failed,
                shell.running.len(),
                amrm.outstanding_requests()
            );
            out(&report.diagnostics);
            shell.stop_running(out).await;
        }
        Stop::Done if shell.failed == 0 && shell.succeeded >= total => {
            report.final_status = FinalApplicationStatus::SUCCEEDED;
        }
        Stop::Done => {
            report.diagnostics = format!("{} of {total} containers failed", shell.failed);
        }
    }
    finish_and_report(amrm, report.final_status, &report.diagnostics, out).await?;
    Ok(report)
}

/// Why an AM's heartbeat loop ([`drive`]) stopped.
pub(crate) enum Stop {
    /// Every container is accounted for.
    Done,
    /// Waited on the cluster this long without anything happening.
    GaveUp(Duration),
    /// The RM refused the asks themselves: asking again cannot help.
    Refused(String),
}

impl Shell<'_> {
    /// Asks for every container and tells what was asked for.
    fn ask_all(
        &self,
        amrm: &mut AmRmClient,
        total: u32,
        out: &mut (dyn FnMut(&str) + Send),
    ) -> Result<(), AmError> {
        let cfg = self.cfg;
        for a in &self.asks {
            for _ in 0..a.total {
                amrm.add_container_request(a.request.clone())?;
            }
        }
        let label = cfg
            .node_label_expression
            .as_deref()
            .map(|e| format!(" in partition '{e}'"))
            .unwrap_or_default();
        out(&format!(
            "asked for {total} containers of {} at priority {}{label} to run: {}",
            cfg.container_resources, cfg.container_priority, cfg.shell_command
        ));
        for spec in &cfg.placement {
            let placed = spec
                .constraint
                .as_ref()
                .map(|c| format!(" placed by {}", crate::placement::render_constraint(c)))
                .unwrap_or_default();
            out(&format!(
                "  {} containers tagged '{}'{placed}",
                spec.num_containers, spec.source_tag
            ));
        }
        Ok(())
    }
}

/// What [`drive`] runs: the state of a ready AM whose work is containers it asks for one
/// by one (the distributed shell's, the sweep's), and the messages its own tasks send back
/// between heartbeats (container starts answered, logs read).
pub(crate) trait Driven {
    type Msg;
    /// Every container is accounted for.
    fn done(&self) -> bool;
    /// Some container start is not answered yet (the AM waits on an NM).
    fn starting(&self) -> bool;
    fn on_message(
        &mut self,
        msg: Self::Msg,
        amrm: &mut AmRmClient,
        out: &mut (dyn FnMut(&str) + Send),
    ) -> Result<(), AmError>;
    fn on_events(
        &mut self,
        ev: AllocationEvents,
        amrm: &mut AmRmClient,
        out: &mut (dyn FnMut(&str) + Send),
    ) -> Result<(), AmError>;
}

/// Heartbeats, taking the AM's messages between heartbeats, until `d` is done or the AM gives
/// up: after `no_progress_timeout` of waiting on the cluster (for grants, for NMs to answer a
/// start, or for the RM to answer heartbeats) with nothing happening. Running containers
/// are never timed out.
pub(crate) async fn drive<D: Driven>(
    d: &mut D,
    amrm: &mut AmRmClient,
    rx: &mut mpsc::UnboundedReceiver<D::Msg>,
    no_progress_timeout: Duration,
    out: &mut (dyn FnMut(&str) + Send),
) -> Result<Stop, AmError> {
    let mut last_progress = Instant::now();
    let mut heartbeat_failing = false;
    while !d.done() {
        let waiting = amrm.outstanding_requests() > 0 || d.starting() || heartbeat_failing;
        if !waiting {
            last_progress = Instant::now();
        }
        let idle = last_progress.elapsed();
        if idle >= no_progress_timeout {
            return Ok(Stop::GaveUp(idle));
        }
        // Take messages until the heartbeat is due; never cancel an allocate call, whose
        // answer may carry containers.
        let due = tokio::time::Instant::now() + amrm.next_interval();
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(due) => break,
                Some(m) = rx.recv() => {
                    last_progress = Instant::now();
                    d.on_message(m, amrm, out)?;
                }
            }
        }
        match amrm.poll().await {
            Ok(ev) => {
                heartbeat_failing = false;
                if !ev.is_empty() {
                    last_progress = Instant::now();
                }
                d.on_events(ev, amrm, out)?
            }
            // The RM refused the asks themselves (an unknown label, a constraint that can
            // never hold): asking again cannot help.
            Err(AmError::Client(e)) if e.status() == Some(400) => {
                let why = e
                    .remote_exception()
                    .map_or_else(|| e.to_string(), |r| r.message);
                return Ok(Stop::Refused(format!(
                    "the ResourceManager refused the container requests: {why}"
                )));
            }
            Err(AmError::Client(e)) => {
                heartbeat_failing = true;
                tracing::warn!(error = %e, "heartbeat failed; retrying");
                tokio::time::sleep(crate::amrm::MAX_INTERVAL).await;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(Stop::Done)
}

type Launched = (ContainerId, Result<(), ClientError>);

impl Driven for Shell<'_> {
    type Msg = Launched;

    fn done(&self) -> bool {
        self.completed() >= self.total()
    }

    fn starting(&self) -> bool {
        !self.starting.is_empty()
    }

    fn on_message(
        &mut self,
        (id, r): Launched,
        amrm: &mut AmRmClient,
        out: &mut (dyn FnMut(&str) + Send),
    ) -> Result<(), AmError> {
        self.on_launched(id, r, amrm, out);
        Ok(())
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

/// What registering found.
pub(crate) enum Registered {
    /// The cluster can hold the AM's containers.
    Fits(RegisterApplicationMasterResponse),
    /// They exceed its maximum container: the AM has unregistered FAILED with this
    /// diagnostic.
    TooBig(String),
}

/// Registers (as `am_host`) and tells of it. When `asked`, what each of the AM's `what`
/// containers needs, exceeds the cluster's maximum container, unregisters FAILED saying so.
pub(crate) async fn register_fitting(
    amrm: &mut AmRmClient,
    am_host: &str,
    what: &str,
    asked: &Resource,
    out: &mut (dyn FnMut(&str) + Send),
) -> Result<Registered, AmError> {
    let attempt = amrm.client().attempt_id();
    let reg = amrm.register(am_host, -1, "").await?;
    let max = reg.maximum_resource_capability.to_resource();
    out(&format!(
        "registered {attempt} with the ResourceManager (queue '{}', maximum container {max})",
        reg.queue
    ));
    let too_big = asked
        .entries()
        .any(|(k, v)| v > max.get(k) && (max.get(k) > 0 || k == "memory-mb" || k == "vcores"));
    if max.is_zero() || !too_big {
        return Ok(Registered::Fits(reg));
    }
    let d = format!("{what} resources {asked} exceed the cluster's maximum container {max}");
    out(&d);
    amrm.finish(FinalApplicationStatus::FAILED, &d).await?;
    Ok(Registered::TooBig(d))
}

/// Unregisters with the final status and prints the AM's closing line (shared by the ready
/// AMs).
pub(crate) async fn finish_and_report(
    amrm: &mut AmRmClient,
    status: FinalApplicationStatus,
    diagnostics: &str,
    out: &mut (dyn FnMut(&str) + Send),
) -> Result<(), AmError> {
    amrm.set_progress(1.0);
    amrm.finish(status, diagnostics).await?;
    let detail = if diagnostics.is_empty() {
        String::new()
    } else {
        format!(": {diagnostics}")
    };
    out(&format!(
        "application master finished with status {status}{detail}"
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use spindle_common::ids::{ApplicationAttemptId, ApplicationId};
    use spindle_common::states::ContainerState;

    use super::*;

    #[test]
    fn completion_lines_name_framework_statuses() {
        let att = ApplicationAttemptId::new(ApplicationId::new(1, 1), 1);
        let mut s = ContainerStatus {
            container_id: ContainerId::new(att, 0, 2),
            state: ContainerState::COMPLETE,
            exit_status: -100,
            diagnostics: "node lost".into(),
            gang_id: None,
        };
        assert_eq!(
            completion_line(&s, "h:1"),
            "container container_1_0001_01_000002 completed on h:1 with exit status -100 (ABORTED): node lost"
        );
        s.exit_status = 1;
        s.diagnostics = String::new();
        assert_eq!(
            completion_line(&s, "h:1"),
            "container container_1_0001_01_000002 completed on h:1 with exit status 1"
        );
        assert_eq!(exit_status_name(-102), Some("PREEMPTED"));
        assert_eq!(exit_status_name(0), None);
    }
}
