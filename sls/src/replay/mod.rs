//! The replay: an event loop in virtual time that plays the NodeManagers and one
//! ApplicationMaster per job against the real [`RmCore`].
//!
//! Each job is submitted at its time; when the core launches its AM (an
//! [`Effect::LaunchAm`]), the simulated AM registers and asks at once (a gang for a
//! multi-container GPU job, a plain ask otherwise); when containers are allocated to it (an
//! [`Effect::ContainersAllocated`]) it pulls them with an allocate call and starts them,
//! and their node reports them running; after their duration their node reports them
//! complete, and when the last one ends the AM unregisters and exits. Those are the moments
//! the live daemons call the RM too (the NM heartbeats at once when a container ends, the
//! SDK's AM polls every 20-50 ms while it waits), so calls in between, which carry no
//! news, are skipped: the core's decisions are the same. Node and AM liveness are not
//! simulated (their expiries are off), and launches take no time.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;

use spindle_common::resource::{GPU, GPU_MODEL_ATTRIBUTE};
use spindle_common::states::{ContainerState, FinalApplicationStatus};
use spindle_common::token::TokenSecret;
use spindle_common::{ApplicationAttemptId, ApplicationId, ContainerId, NodeId, Resource};
use spindle_resourcemanager::config::RmConfig;
use spindle_resourcemanager::core::scheduler::gang::{GangPhase, GangRequest};
use spindle_resourcemanager::core::{
    Allocation, AmReport, AskUpdate, CoreConfig, Effect, LaunchSpec, NodeRegistration,
    ReportedContainer, RmCore, Submission,
};

mod check;
mod cpu;
mod elastic;
mod notice;
mod tally;
mod tasks;

pub use check::check_jobs;
pub use cpu::CpuFigures;
pub use elastic::{fixed_allocation, make_elastic, rescale};

use crate::cluster::ClusterSpec;
use crate::fairness::{Fairness, FairnessMeter};
use crate::trace::{BadRow, Job, Placement, RowProblem, Shape};
use crate::SlsError;

/// Virtual time zero, as the core's clock reads it (a realistic epoch in milliseconds).
const EPOCH_MS: u64 = 1_700_000_000_000;
/// The gang id every simulated AM uses for its one gang.
const GANG_ID: &str = "gang";

#[derive(Debug, Clone)]
pub struct Options {
    /// Run the core's `sanity_check()` after every step (slow; on in tests).
    pub check: bool,
    /// Measure each core call's wall time (the decision latency figures).
    pub timing: bool,
    /// The timeout a gang's AM names; `None` waits as long as it takes (the trace's job
    /// waited until it ran).
    pub gang_timeout_ms: Option<u64>,
    /// The AM container of every job.
    pub am_memory_mb: i64,
    pub am_vcores: i64,
    /// How a job's AM answers a preemption notice: it acknowledges, checkpoints (taking
    /// `checkpoint_cost_ms`) and gives its containers back; with `false` it ignores the
    /// notice and the RM kills at the deadline.
    pub ack_preemption: bool,
    pub checkpoint_cost_ms: u64,
    /// Every job also checkpoints this often while it runs (0: never; a job killed without
    /// a checkpoint starts over).
    pub checkpoint_interval_ms: u64,
    /// Submit each job with a priority that orders it by its duration, shortest first (the
    /// `sjf-oracle` reference: only a simulator knows durations).
    pub oracle_priority: bool,
    /// Run jobs with `min_gpus`/`max_gpus` rigid at `num_gpus` (the fixed allocation).
    pub rigid: bool,
    /// Elastic jobs' throughput by GPU count when the trace gives none (linear without).
    pub throughput: Option<BTreeMap<u32, f64>>,
    /// What one resize of an elastic job costs it (no progress meanwhile).
    pub restart_cost_ms: u64,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            check: false,
            timing: true,
            gang_timeout_ms: None,
            am_memory_mb: 1024,
            am_vcores: 1,
            ack_preemption: true,
            checkpoint_cost_ms: 30_000,
            checkpoint_interval_ms: 3_600_000,
            oracle_priority: false,
            rigid: false,
            throughput: None,
            restart_cost_ms: 10_000,
        }
    }
}

/// Where a replay is, for a progress bar.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    pub sim_ms: u64,
    pub jobs_done: usize,
    pub jobs_total: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Finished,
    /// The RM refused the submission (the core's reason).
    Rejected(String),
    /// The gang's AM gave up at its timeout.
    TimedOut(String),
    /// The RM failed the application.
    Failed(String),
    /// Still waiting when nothing else was left to happen (it can never be placed), with
    /// what the RM said of it.
    Unfinished(String),
}

impl Outcome {
    pub fn label(&self) -> &'static str {
        match self {
            Self::Finished => "FINISHED",
            Self::Rejected(_) => "REJECTED",
            Self::TimedOut(_) => "TIMED_OUT",
            Self::Failed(_) => "FAILED",
            Self::Unfinished(_) => "UNFINISHED",
        }
    }
}

#[derive(Debug, Clone)]
pub struct JobResult {
    pub start_ms: Option<u64>,
    pub finish_ms: Option<u64>,
    pub nodes: BTreeSet<String>,
    pub outcome: Outcome,
    /// GPU-milliseconds its containers ran.
    pub gpu_ms_used: u128,
    /// Times it was taken back, and the GPU-milliseconds of work lost (since its last
    /// checkpoint) each time.
    pub preemptions: u32,
    pub lost_gpu_ms: u128,
}

/// The cluster at one moment (a step function: it holds until the next sample).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub t_ms: u64,
    pub used_gpus: i64,
    pub pending_gpus: i64,
    pub queued_jobs: u32,
    pub running_jobs: u32,
}

#[derive(Debug, Clone)]
pub struct RunResult {
    pub jobs: Vec<JobResult>,
    pub timeline: Vec<Sample>,
    pub total_gpus: i64,
    /// Core calls that ran a scheduling pass.
    pub decisions: u64,
    /// Wall time of each such call, in microseconds (empty without `Options::timing`).
    pub latencies_us: Vec<u32>,
    pub wall_s: f64,
    pub restarts: u64,
    /// Elastic jobs' resizes (grows and shrinks).
    pub resizes: u64,
    /// Units (gangs, or single containers) the RM took back.
    pub preemptions: u64,
    pub lost_gpu_ms: u128,
    /// From each notice to the containers' exit, in ms.
    pub notice_to_exit_ms: Vec<u64>,
    /// Users' usage against their shares.
    pub fairness: Fairness,
    /// GPU nodes' CPUs held and GPUs stranded, over time (with CPU-sensitive jobs only).
    pub cpu: Option<CpuFigures>,
}

/// What the RM says of an application still waiting: its state and diagnostics, and its
/// gangs' reasons.
fn waiting_reason(core: &RmCore, app: &ApplicationId) -> String {
    let mut parts = Vec::new();
    if let Some(a) = core.apps().get(app) {
        parts.push(format!("{:?}", a.state));
        if !a.diagnostics.is_empty() {
            parts.push(a.diagnostics.clone());
        }
    }
    for g in core.gang_statuses(app) {
        parts.push(format!("gang {:?}: {}", g.phase, g.diagnostics));
    }
    parts.join("; ")
}

fn capability(t: &crate::trace::Tasks) -> Resource {
    Resource::new(t.memory_mb, t.vcores).with(GPU, t.gpus)
}

/// Replays `jobs` on `cluster` under `rm`'s configuration, each submitted at its time
/// (results come back in the order of `jobs`). `check_jobs` must have passed.
/// Ticks in a row with nothing running and nothing to come after which a replay ends: a
/// tick can still place what waits (a deadline passed, an age grew), so more than one, but
/// a tick that changes nothing for this long never will.
const IDLE_TICKS_AT_MOST: u32 = 1_000;
/// Only the clock's own events are pending (its regular tick and deadline ticks).
const IDLE_EVENTS_AT_MOST: usize = 8;

pub fn run(
    jobs: &[Job],
    cluster: &ClusterSpec,
    rm: &RmConfig,
    opts: &Options,
    progress: &mut dyn FnMut(Progress),
) -> Result<RunResult, SlsError> {
    let wall = Instant::now();
    if rm.core.preemption.enabled && jobs.iter().any(|j| elastic::spec_of(j, opts).is_some()) {
        return Err(SlsError::BadOption {
            option: "--policy",
            expected: "a policy without the preemption monitor for elastic jobs (doubling, fifo, capacity), or --rigid",
            value: "a policy with the preemption monitor on".into(),
        });
    }
    let mut sim = Sim::new(jobs, cluster, rm.core.clone(), opts)?;
    // Submissions in time order (stable: equal times keep the trace's order).
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&i| jobs[i].submit_ms);
    let mut cursor = 0;
    let mut steps: u64 = 0;
    let mut idle_ticks: u32 = 0;
    loop {
        let next_event = sim.events.first_key_value().map(|(k, _)| k.0);
        let next_submit = order.get(cursor).map(|&i| jobs[i].submit_ms);
        let take_event = match (next_event, next_submit) {
            (None, None) => break,
            // At equal times, what ends goes first: its room is there for what arrives.
            (Some(e), Some(s)) => e <= s,
            (Some(_), None) => true,
            (None, Some(_)) => false,
        };
        if let Some(t) = if take_event { next_event } else { next_submit } {
            sim.fairness.advance(t);
        }
        match (take_event, next_submit) {
            (true, _) => {
                let Some(((t, _), ev)) = sim.events.pop_first() else {
                    break;
                };
                sim.cpu_account(t);
                sim.now = t;
                match ev {
                    Ev::End(j, epoch, containers) => sim.end_tasks(j, epoch, containers)?,
                    Ev::GangDeadline(j) => sim.gang_deadline(j)?,
                    Ev::Tick(regular) => sim.tick(regular)?,
                    Ev::Checkpointed(j, epoch) => sim.checkpointed(j, epoch)?,
                    Ev::ElasticEnd(j, epoch) => sim.elastic_end(j, epoch)?,
                    Ev::CpuEnd(j, epoch, generation) => sim.cpu_end(j, epoch, generation)?,
                }
            }
            (false, Some(s)) => {
                sim.cpu_account(s);
                sim.now = s;
                sim.submit(order[cursor])?;
                cursor += 1;
            }
            (false, None) => break,
        }
        sim.keep_ticking();
        sim.sample();
        steps += 1;
        // Nothing runs and nothing is to come, only the clock ticks: if the ticks change
        // nothing for this long, what waits will wait for ever. End the replay (what
        // waits is reported unfinished, with why) rather than tick without end.
        let only_ticks = cursor == order.len()
            && sim.events.len() <= IDLE_EVENTS_AT_MOST
            && sim.events.values().all(|e| matches!(e, Ev::Tick(_)));
        idle_ticks = if only_ticks { idle_ticks + 1 } else { 0 };
        if idle_ticks > IDLE_TICKS_AT_MOST {
            break;
        }
        if steps % 4096 == 0 {
            progress(Progress {
                sim_ms: sim.now,
                jobs_done: sim.done,
                jobs_total: jobs.len(),
            });
        }
    }
    progress(Progress {
        sim_ms: sim.now,
        jobs_done: sim.done,
        jobs_total: jobs.len(),
    });
    let decisions = sim.core.scheduler().stats.passes;
    for r in sim.runs.iter_mut().filter(|r| r.outcome.is_none()) {
        let why = r
            .app
            .map(|a| waiting_reason(&sim.core, &a))
            .unwrap_or_default();
        r.outcome = Some(Outcome::Unfinished(why));
    }
    let cpu = sim
        .cpu_acc
        .as_ref()
        .map(|a| a.figures(sim.runs.iter().filter_map(|r| r.cpu.as_ref())));
    Ok(RunResult {
        jobs: sim
            .runs
            .into_iter()
            .map(|r| JobResult {
                start_ms: r.start_ms,
                finish_ms: r.finish_ms,
                nodes: r.nodes.iter().map(|n| n.host.clone()).collect(),
                outcome: r.outcome.unwrap_or(Outcome::Unfinished(String::new())),
                gpu_ms_used: r.gpu_ms_used,
                preemptions: r.preemptions,
                lost_gpu_ms: r.lost_gpu_ms,
            })
            .collect(),
        timeline: sim.timeline,
        total_gpus: cluster.total_gpus(),
        decisions,
        latencies_us: sim.latencies_us,
        wall_s: wall.elapsed().as_secs_f64(),
        restarts: sim.restarts,
        resizes: sim.resizes,
        preemptions: sim.preemptions,
        lost_gpu_ms: sim.lost_gpu_ms,
        notice_to_exit_ms: sim.notice_to_exit_ms,
        fairness: sim.fairness.finish(),
        cpu,
    })
}

enum Ev {
    /// These containers of the job reach the end of their run (of the job's run `epoch`:
    /// a preempted gang runs again in a later one).
    End(usize, u32, Vec<ContainerId>),
    /// The job's gang timeout passes (only when AMs name one).
    GangDeadline(usize),
    /// The RM's clock tick (the preemption monitor, `las` levels, kills at deadlines):
    /// the regular one every monitoring interval (`true`), or one at a notice's deadline.
    Tick(bool),
    /// The job's AM has written the checkpoint a notice asked for (in run `epoch`).
    Checkpointed(usize, u32),
    /// An elastic job's work is done, if it is still in run `epoch` (a resize starts
    /// another).
    ElasticEnd(usize, u32),
    /// A CPU-sensitive job's work is done, if it is still in run `epoch` at pace
    /// `generation` (a resize of its CPUs starts another).
    CpuEnd(usize, u32, u32),
}

/// A container the job's AM was given.
struct Granted {
    id: ContainerId,
    node: NodeId,
    /// The task group (its ask's allocationRequestId).
    group: usize,
    gpus: i64,
    started: bool,
    /// When its run ends, once started.
    ends_at: u64,
}

#[derive(Default)]
struct Run {
    app: Option<ApplicationId>,
    attempt: Option<ApplicationAttemptId>,
    am: Option<(ContainerId, NodeId)>,
    response_id: i32,
    granted: Vec<Granted>,
    ended: u32,
    start_ms: Option<u64>,
    finish_ms: Option<u64>,
    nodes: BTreeSet<NodeId>,
    outcome: Option<Outcome>,
    gpu_ms_used: u128,
    /// The gang's current run (bumped by a preemption), the work saved so far (ms of the
    /// job's duration) and when the current run started.
    epoch: u32,
    saved_ms: u64,
    run_from: u64,
    /// A notice its AM is answering.
    notice: Option<notice::Answering>,
    /// Containers of each task group that ended normally (independent jobs re-ask the rest).
    ended_by_group: Vec<u32>,
    preemptions: u32,
    lost_gpu_ms: u128,
    /// An elastic job's work and size, and when its GPU time was last counted.
    elastic: Option<elastic::ElasticRun>,
    elastic_gpu_at: Option<u64>,
    /// A CPU-sensitive job's work and pace.
    cpu: Option<cpu::CpuRun>,
}

struct Sim<'a> {
    core: RmCore,
    jobs: &'a [Job],
    opts: &'a Options,
    /// Virtual milliseconds since the trace's start.
    now: u64,
    runs: Vec<Run>,
    by_app: HashMap<ApplicationId, usize>,
    events: BTreeMap<(u64, u64), Ev>,
    seq: u64,
    /// What each simulated NM runs (it reports all of it in every heartbeat, as an NM does).
    running: HashMap<NodeId, BTreeSet<ContainerId>>,
    used_gpus: i64,
    pending_gpus: i64,
    queued: u32,
    running_jobs: u32,
    done: usize,
    restarts: u64,
    resizes: u64,
    /// Elastic jobs running.
    elastic_live: BTreeSet<usize>,
    /// CPU-sensitive jobs running.
    cpu_live: BTreeSet<usize>,
    /// CPU figures integrated over time (only with CPU-sensitive jobs).
    cpu_acc: Option<cpu::CpuAcc>,
    timeline: Vec<Sample>,
    latencies_us: Vec<u32>,
    /// The RM's tick interval when something needs ticks (preemption, `las`), and whether
    /// one is scheduled.
    tick_ms: Option<u64>,
    ticking: bool,
    /// Containers under notice, by job.
    noticed: BTreeMap<ContainerId, usize>,
    preemptions: u64,
    lost_gpu_ms: u128,
    notice_to_exit_ms: Vec<u64>,
    fairness: FairnessMeter,
    /// Each job's user, as the meter numbers them.
    user_of: Vec<usize>,
}

impl<'a> Sim<'a> {
    fn new(
        jobs: &'a [Job],
        cluster: &ClusterSpec,
        mut conf: CoreConfig,
        opts: &'a Options,
    ) -> Result<Self, SlsError> {
        // Liveness is not simulated: nodes and AMs never go silent here.
        conf.nm_expiry_ms = u64::MAX / 4;
        conf.am_expiry_ms = u64::MAX / 4;
        conf.container_alloc_expiry_ms = u64::MAX / 4;
        conf.rm_address = "http://sls.invalid:8088".into();
        use spindle_resourcemanager::core::queue_conf::OrderingPolicy;
        let ordered_by = |p: OrderingPolicy| {
            conf.scheduler
                .root
                .walk()
                .into_iter()
                .any(|q| q.ordering == p)
        };
        let las = ordered_by(OrderingPolicy::Las);
        // Users' places follow their usage once per calc period, and wait bounds pass.
        let fairshare = ordered_by(OrderingPolicy::Fairshare);
        let doubling = conf
            .scheduler
            .root
            .walk()
            .into_iter()
            .any(|q| q.elastic.is_doubling());
        let tick_ms = [
            (conf.preemption.enabled || las).then_some(conf.preemption.monitoring_interval_ms),
            doubling.then_some(conf.elastic.monitoring_interval_ms),
            fairshare.then_some(conf.scheduler.fairshare.calc_period_ms),
            (conf.cpu.any_adaptive() && jobs.iter().any(|j| j.cpu_throughput.is_some()))
                .then_some(conf.cpu.interval_ms),
        ]
        .into_iter()
        .flatten()
        .min()
        .map(|t| t.max(1));
        let secret = TokenSecret::from_hex("00112233445566778899aabbccddeeff").map_err(|e| {
            SlsError::Sanity {
                at_ms: 0,
                reason: format!("the simulator's token secret: {e}"),
            }
        })?;
        let mut sim = Self {
            core: RmCore::new(conf, EPOCH_MS, 0, secret),
            jobs,
            opts,
            now: 0,
            runs: jobs
                .iter()
                .map(|job| Run {
                    ended_by_group: vec![0; job.tasks.len()],
                    ..Run::default()
                })
                .collect(),
            by_app: HashMap::new(),
            events: BTreeMap::new(),
            seq: 0,
            running: HashMap::new(),
            used_gpus: 0,
            pending_gpus: 0,
            queued: 0,
            running_jobs: 0,
            done: 0,
            restarts: 0,
            resizes: 0,
            elastic_live: BTreeSet::new(),
            cpu_live: BTreeSet::new(),
            cpu_acc: jobs
                .iter()
                .any(|j| j.cpu_throughput.is_some())
                .then(cpu::CpuAcc::default),
            timeline: Vec::new(),
            latencies_us: Vec::new(),
            tick_ms,
            ticking: false,
            noticed: BTreeMap::new(),
            preemptions: 0,
            lost_gpu_ms: 0,
            notice_to_exit_ms: Vec::new(),
            fairness: FairnessMeter::new(&[], 0, 0, 1),
            user_of: Vec::new(),
        };
        for n in &cluster.nodes {
            let mut attributes = BTreeMap::new();
            if let Some(m) = &n.gpu_model {
                attributes.insert(GPU_MODEL_ATTRIBUTE.to_string(), m.clone());
            }
            let id = NodeId::new(&n.host, 8041);
            sim.core.register_node(
                NodeRegistration {
                    id: id.clone(),
                    http_address: format!("{}:8042", n.host),
                    rack: n.rack.clone(),
                    total: n.total(),
                    version: "sls".into(),
                    containers: vec![],
                    attributes,
                },
                EPOCH_MS,
            );
            sim.running.insert(id, BTreeSet::new());
        }
        (sim.fairness, sim.user_of) = tally::meter(&sim.core, jobs, cluster.total_gpus());
        sim.settle()?;
        sim.sample();
        Ok(sim)
    }

    fn clock(&self) -> u64 {
        EPOCH_MS + self.now
    }

    fn at(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        self.events.insert((t, self.seq), ev);
    }

    /// Runs one core call that schedules, timing it.
    fn timed<R>(&mut self, f: impl FnOnce(&mut RmCore, u64) -> R) -> R {
        let now = self.clock();
        if !self.opts.timing {
            return f(&mut self.core, now);
        }
        let t0 = Instant::now();
        let r = f(&mut self.core, now);
        let us = t0.elapsed().as_micros().min(u128::from(u32::MAX)) as u32;
        self.latencies_us.push(us);
        r
    }

    fn submit(&mut self, j: usize) -> Result<(), SlsError> {
        let jobs = self.jobs;
        let job = &jobs[j];
        let id = self.core.new_application();
        self.by_app.insert(id, j);
        self.elastic_init(j);
        self.runs[j].app = Some(id);
        let sub = Submission {
            name: job.id.clone(),
            queue: job.queue.clone(),
            user: job.user.clone(),
            priority: if self.opts.oracle_priority {
                notice::oracle_priority(job)
            } else {
                job.priority
            },
            application_type: "SLS".into(),
            tags: vec![],
            am_resource: Resource::new(self.opts.am_memory_mb, self.opts.am_vcores),
            am_launch: LaunchSpec {
                commands: vec!["sls-am".into()],
                ..Default::default()
            },
            max_app_attempts: 0,
            keep_containers: false,
            unmanaged_am: false,
            groups: vec![],
            node_label_expression: None,
            am_node_label_expression: None,
            lifetime_secs: None,
            dependencies: Vec::new(),
        };
        let r = self.timed(|c, now| c.submit(id, sub, now));
        let refused = match r {
            Err(e) => Some(e.to_string()),
            Ok(()) => self
                .core
                .apps()
                .get(&id)
                .filter(|a| a.state.is_final())
                .map(|a| a.diagnostics.clone()),
        };
        match refused {
            Some(reason) => {
                self.runs[j].outcome = Some(Outcome::Rejected(reason));
                self.done += 1;
            }
            None => {
                self.waiting(j, true);
                self.waits_for(j, job.gpus());
            }
        }
        self.settle()
    }

    /// Executes what the core asked for, as the NMs and AMs would, until it asks nothing.
    fn settle(&mut self) -> Result<(), SlsError> {
        loop {
            let effects = self.core.take_effects();
            if effects.is_empty() {
                break;
            }
            for e in effects {
                match e {
                    Effect::LaunchAm {
                        attempt, container, ..
                    } => self.am_started(attempt, container),
                    Effect::ContainersAllocated(attempt) => self.am_pulls(attempt),
                    Effect::PreemptionNotice(attempt) => self.am_pulls(attempt),
                    Effect::PersistApp(_) | Effect::ForgetApp(_) | Effect::PersistFairshare(_) => {}
                }
            }
        }
        if self.opts.check {
            self.core
                .sanity_check()
                .map_err(|reason| SlsError::Sanity {
                    at_ms: self.now,
                    reason,
                })?;
        }
        Ok(())
    }

    /// The NM started the AM: it registers and asks for the job's containers.
    fn am_started(&mut self, attempt: ApplicationAttemptId, container: ContainerId) {
        let Some(&j) = self.by_app.get(&attempt.application_id) else {
            return;
        };
        let now = self.clock();
        self.core.am_launched(&attempt, &container, Ok(()), now);
        let Some(node) = self
            .core
            .containers()
            .get(&container)
            .map(|c| c.node.clone())
        else {
            return;
        };
        if self.runs[j].attempt.is_some() {
            // A later attempt: it asks again for what it has not got.
            self.restarts += 1;
        }
        self.runs[j].attempt = Some(attempt);
        self.runs[j].am = Some((container, node.clone()));
        self.runs[j].response_id = 0;
        self.running
            .entry(node.clone())
            .or_default()
            .insert(container);
        self.heartbeat(&node, &[]);
        if let Err(e) = self
            .core
            .am_register(&attempt, node.host.clone(), 0, String::new(), now)
        {
            self.fail(j, e.to_string());
            return;
        }
        self.ask_rest(j, attempt);
        let job = &self.jobs[j];
        if let (Some(t), true) = (self.opts.gang_timeout_ms, job.is_gang()) {
            self.at(
                self.now.saturating_add(t).saturating_add(1),
                Ev::GangDeadline(j),
            );
        }
    }

    /// Asks for every container of the job not running and not done.
    fn ask_rest(&mut self, j: usize, attempt: ApplicationAttemptId) {
        let jobs = self.jobs;
        let job = &jobs[j];
        let gang = match &job.shape {
            Shape::Gang {
                placement,
                gpu_model,
            } => Some((
                GANG_ID.to_string(),
                GangRequest {
                    policy: placement.policy(),
                    timeout_ms: self.opts.gang_timeout_ms.unwrap_or(u64::MAX),
                    gpu_model: gpu_model.clone(),
                    ..GangRequest::default()
                },
            )),
            Shape::Independent => None,
        };
        if let Some(spec) = self.elastic_params(j) {
            // An elastic gang: one ask for its maximum, granted at least its minimum.
            let Some(t) = job.tasks.first() else { return };
            let ask = AskUpdate {
                image: None,
                label: None,
                tags: Vec::new(),
                constraint: None,
                priority: 1,
                allocation_request_id: 0,
                resource_name: "*".into(),
                capability: capability(t),
                num_containers: spec.max,
                relax_locality: true,
                cpu: None,
                gang: gang.map(|(id, p)| {
                    (
                        id,
                        GangRequest {
                            elastic: Some(spec),
                            ..p
                        },
                    )
                }),
            };
            self.allocate(j, attempt, vec![ask]);
            return;
        }
        let run = &self.runs[j];
        let asks: Vec<AskUpdate> = job
            .tasks
            .iter()
            .enumerate()
            .map(|(g, t)| {
                let live = run.granted.iter().filter(|x| x.group == g).count() as u32;
                let done = run.ended_by_group.get(g).copied().unwrap_or(0);
                (g, t, t.count.saturating_sub(live + done))
            })
            .filter(|(_, _, n)| *n > 0)
            .map(|(g, t, n)| AskUpdate {
                image: None,
                label: None,
                tags: Vec::new(),
                constraint: None,
                priority: 1,
                allocation_request_id: g as i64,
                resource_name: "*".into(),
                capability: capability(t),
                num_containers: n,
                relax_locality: true,
                gang: gang.clone(),
                cpu: self.cpu_ask(j),
            })
            .collect();
        self.allocate(j, attempt, asks);
    }

    /// Containers wait for the AM: it pulls them with an allocate call.
    fn am_pulls(&mut self, attempt: ApplicationAttemptId) {
        let Some(&j) = self.by_app.get(&attempt.application_id) else {
            return;
        };
        if self.runs[j].attempt == Some(attempt) {
            self.allocate(j, attempt, vec![]);
        }
    }

    fn allocate(&mut self, j: usize, attempt: ApplicationAttemptId, asks: Vec<AskUpdate>) {
        self.allocate_with(j, attempt, asks, vec![], AmReport::default());
    }

    fn allocate_with(
        &mut self,
        j: usize,
        attempt: ApplicationAttemptId,
        asks: Vec<AskUpdate>,
        release: Vec<ContainerId>,
        report: AmReport,
    ) {
        let rid = self.runs[j].response_id;
        let progress = self.elastic_progress(j);
        let r = self.timed(|c, now| {
            c.am_allocate_with(&attempt, rid, asks, release, progress, report, now)
        });
        match r {
            Ok(reply) => {
                self.runs[j].response_id = reply.response_id;
                if !reply.updated.is_empty() {
                    self.cpu_updated(j, &reply.updated);
                }
                self.granted(j, reply.allocated);
                if !reply.offers.is_empty() {
                    self.elastic_grow(j, reply.offers);
                }
                if !reply.demands.is_empty() {
                    self.elastic_shrink(j, attempt, reply.demands);
                }
                if let Some(n) = reply.preemption {
                    self.on_notice(j, attempt, n);
                }
            }
            Err(e) => self.fail(j, e.to_string()),
        }
    }

    /// The AM unregisters with `status` and exits.
    fn finish(
        &mut self,
        j: usize,
        outcome: Outcome,
        status: FinalApplicationStatus,
        diag: &str,
    ) -> Result<(), SlsError> {
        if outcome == Outcome::Finished {
            self.runs[j].finish_ms = Some(self.now);
            self.running_jobs = self.running_jobs.saturating_sub(1);
        } else {
            self.waiting(j, false);
            let granted_gpus: i64 = self.runs[j].granted.iter().map(|g| g.gpus).sum();
            self.waits_for(j, granted_gpus - self.jobs[j].gpus());
        }
        self.runs[j].outcome = Some(outcome);
        self.done += 1;
        if let Some(att) = self.runs[j].attempt {
            let diag = diag.to_string();
            let r = self.timed(|c, now| c.am_finish(&att, status, diag, String::new(), now));
            if let Err(e) = r {
                self.runs[j].outcome = Some(Outcome::Failed(e.to_string()));
            }
        }
        if let Some((am, node)) = self.runs[j].am.take() {
            if let Some(s) = self.running.get_mut(&node) {
                s.remove(&am);
            }
            self.heartbeat(&node, &[am]);
        }
        self.settle()
    }

    /// The RM refused the AM something it cannot go on without.
    fn fail(&mut self, j: usize, reason: String) {
        if self.runs[j].outcome.is_none() {
            if self.runs[j].start_ms.is_none() {
                self.waiting(j, false);
                self.waits_for(j, -self.jobs[j].gpus());
            }
            self.runs[j].outcome = Some(Outcome::Failed(reason));
            self.done += 1;
        }
    }

    fn gang_deadline(&mut self, j: usize) -> Result<(), SlsError> {
        let now = self.clock();
        self.core.tick(now);
        self.settle()?;
        let (Some(app), None, None) = (
            self.runs[j].app,
            self.runs[j].start_ms,
            self.runs[j].outcome.as_ref(),
        ) else {
            return Ok(());
        };
        let timed_out = self
            .core
            .gang_statuses(&app)
            .into_iter()
            .find(|g| g.phase == GangPhase::TimedOut);
        if let Some(g) = timed_out {
            // The AM gives up, as the SDK's gang call does on TIMED_OUT.
            self.finish(
                j,
                Outcome::TimedOut(g.diagnostics.clone()),
                FinalApplicationStatus::FAILED,
                &g.diagnostics,
            )?;
        }
        Ok(())
    }

    fn sample(&mut self) {
        let s = Sample {
            t_ms: self.now,
            used_gpus: self.used_gpus,
            pending_gpus: self.pending_gpus,
            queued_jobs: self.queued,
            running_jobs: self.running_jobs,
        };
        match self.timeline.last_mut() {
            Some(last) if last.t_ms == s.t_ms => *last = s,
            Some(last)
                if (
                    last.used_gpus,
                    last.pending_gpus,
                    last.queued_jobs,
                    last.running_jobs,
                ) == (s.used_gpus, s.pending_gpus, s.queued_jobs, s.running_jobs) => {}
            _ => self.timeline.push(s),
        }
    }
}
