//! Elastic jobs in the replay. A job with `min_gpus`/`max_gpus` is asked as an elastic gang
//! (members of `gpus_per_container` GPUs, sizes powers of two between the bounds, its
//! throughput table in the spec: the policy's speed model is exact, the study's
//! "precompute"). Its work is its `duration` times its throughput at `num_gpus`; at `w`
//! GPUs it advances at its throughput at `w`. Its AM reports its progress in every allocate
//! call, accepts every growth offer and gives back at once what a shrink demands; each
//! resize costs `restart_cost_ms` of no progress (the checkpoint is taken at the resize,
//! so nothing else is lost).

use spindle_resourcemanager::core::scheduler::elastic_policy::{Elastic, ElasticSpec, SizeRule};
use spindle_resourcemanager::core::scheduler::AskKey;
use spindle_resourcemanager::core::{ResizeDemandView, ResizeOfferView};

use super::*;

/// An elastic job's run.
#[derive(Debug, Clone)]
pub(super) struct ElasticRun {
    /// The speed model (the job's table by member count).
    model: Elastic,
    /// Work in all and done so far (throughput units x seconds).
    work: f64,
    done: f64,
    /// Members running now (0 before the first grant).
    members: u32,
    /// When progress (re)starts at the current size: after a restart's cost.
    from: u64,
    /// When `done` was last brought up to date.
    accrued: u64,
    pub(super) resizes: u32,
    /// When its AM last reported progress.
    reported: u64,
}

/// How often a running elastic job's AM reports its progress between its other calls.
const PROGRESS_EVERY_MS: u64 = 60_000;

impl ElasticRun {
    fn rate(&self) -> f64 {
        if self.members == 0 {
            0.0
        } else {
            self.model.speed(self.members)
        }
    }

    /// Brings `done` up to `now`.
    fn accrue(&mut self, now: u64) {
        let start = self.accrued.max(self.from);
        if now > start {
            self.done += self.rate() * (now - start) as f64 / 1000.0;
        }
        self.accrued = now.max(self.accrued);
    }

    fn progress(&self) -> f32 {
        if self.work <= 0.0 {
            1.0
        } else {
            (self.done / self.work).clamp(0.0, 1.0) as f32
        }
    }

    /// When the work is done at the current size.
    fn ends_at(&self) -> u64 {
        let left = (self.work - self.done).max(0.0);
        let rate = self.rate();
        if rate <= 0.0 {
            return u64::MAX;
        }
        self.from.max(self.accrued) + (left / rate * 1000.0).ceil() as u64
    }
}

/// The elastic gang spec of a job, by member count; None for a rigid job.
pub(super) fn spec_of(job: &Job, opts: &Options) -> Option<(ElasticSpec, i64)> {
    let (min, max) = match (job.min_gpus, job.max_gpus) {
        (None, None) => return None,
        (a, b) => (a, b),
    };
    if opts.rigid || !job.is_gang_shaped() {
        return None;
    }
    let per = job.tasks.first().map_or(1, |t| t.gpus.max(1));
    let gpus = job.gpus();
    let members = |g: u32| (i64::from(g) / per).max(1) as u32;
    let table = job.throughput.clone().or_else(|| opts.throughput.clone());
    let throughput = table
        .map(|t| {
            t.into_iter()
                .filter(|(g, _)| i64::from(*g) % per == 0)
                .map(|(g, v)| (members(g), v))
                .collect()
        })
        .unwrap_or_default();
    Some((
        ElasticSpec {
            min: members(min.unwrap_or(gpus as u32)),
            max: members(max.unwrap_or(gpus as u32)),
            rule: SizeRule::PowerOfTwo,
            throughput,
        },
        per,
    ))
}

/// The job's speed model (its table, interpolated like the RM's).
fn model(spec: ElasticSpec) -> Elastic {
    Elastic::new(spec, Resource::zero(), AskKey::default(), 0)
}

/// A rigid job's duration at `gpus` GPUs for the same work (`--fixed-gpus`).
pub fn rescale(job: &Job, gpus: u32, table: Option<&BTreeMap<u32, f64>>) -> u64 {
    let t = job
        .throughput
        .as_ref()
        .or(table)
        .cloned()
        .unwrap_or_default();
    let m = model(ElasticSpec {
        min: 1,
        max: u32::MAX,
        rule: SizeRule::Any,
        throughput: t,
    });
    let now = job.gpus().max(1) as u32;
    let d = job.tasks.first().map_or(0, |t| t.duration_ms) as f64;
    (d * m.speed(now) / m.speed(gpus.max(1))).round() as u64
}

/// `--fixed-gpus K`: every GPU job rigid at `gpus` GPUs, its duration scaled so that it does
/// the same work (by its throughput table, or `table`, or linearly).
pub fn fixed_allocation(jobs: &[Job], gpus: u32, table: Option<&BTreeMap<u32, f64>>) -> Vec<Job> {
    jobs.iter()
        .map(|job| {
            let mut j = job.clone();
            if !job.is_gang_shaped() {
                return j;
            }
            let per = job.tasks[0].gpus.max(1);
            let count = (i64::from(gpus) / per).max(1) as u32;
            j.tasks[0].duration_ms = rescale(job, (i64::from(count) * per) as u32, table);
            j.tasks[0].count = count;
            j.min_gpus = None;
            j.max_gpus = None;
            if count == 1 {
                j.shape = Shape::Independent;
            } else if matches!(j.shape, Shape::Independent) {
                j.shape = Shape::Gang {
                    placement: Placement::Pack,
                    gpu_model: None,
                };
            }
            j
        })
        .collect()
}

/// `--make-elastic`: every job of more than one GPU-holding container without an elastic
/// range gets one: from one container to its requested size.
pub fn make_elastic(jobs: &mut [Job]) {
    for j in jobs.iter_mut() {
        if j.min_gpus.is_none() && j.max_gpus.is_none() && j.is_gang_shaped() && j.containers() > 1
        {
            j.min_gpus = Some(j.tasks[0].gpus.max(1) as u32);
            j.max_gpus = Some(j.gpus() as u32);
        }
    }
}

impl Sim<'_> {
    /// Sets up an elastic job's run (at submission).
    pub(super) fn elastic_init(&mut self, j: usize) {
        let Some((spec, per)) = spec_of(&self.jobs[j], self.opts) else {
            return;
        };
        let job = &self.jobs[j];
        let m = model(spec.clone());
        let at = (job.gpus() / per).max(1) as u32;
        let d = job.tasks.first().map_or(0, |t| t.duration_ms) as f64 / 1000.0;
        self.runs[j].elastic = Some(ElasticRun {
            work: d * m.speed(at),
            model: m,
            done: 0.0,
            members: 0,
            from: 0,
            accrued: 0,
            resizes: 0,
            reported: 0,
        });
    }

    pub(super) fn elastic_params(&self, j: usize) -> Option<ElasticSpec> {
        self.runs[j].elastic.as_ref().map(|e| e.model.spec.clone())
    }

    /// The AM's progress for its allocate calls.
    pub(super) fn elastic_progress(&mut self, j: usize) -> f32 {
        let now = self.now;
        match self.runs[j].elastic.as_mut() {
            Some(e) => {
                e.accrue(now);
                e.reported = now;
                e.progress()
            }
            None => 0.0,
        }
    }

    /// The first grant: the job starts at the granted size.
    pub(super) fn elastic_granted(&mut self, j: usize) {
        let now = self.now;
        let idx: Vec<usize> = (0..self.runs[j].granted.len())
            .filter(|i| !self.runs[j].granted[*i].started)
            .collect();
        let Some(e) = self.runs[j].elastic.as_mut() else {
            return;
        };
        if e.members > 0 {
            // Growth is handled with its offer.
            return;
        }
        e.members = idx.len() as u32;
        e.from = now;
        e.accrued = now;
        self.runs[j].elastic_gpu_at = Some(now);
        self.elastic_run(j, idx, true);
    }

    /// Starts `idx` (granted members) and schedules the end for the current size.
    fn elastic_run(&mut self, j: usize, idx: Vec<usize>, first: bool) {
        let now = self.now;
        if self.runs[j].start_ms.is_none() {
            self.runs[j].start_ms = Some(now);
        }
        if first {
            self.waiting(j, false);
            self.running_jobs += 1;
            self.elastic_live.insert(j);
            self.waits_for(j, -self.jobs[j].gpus());
        }
        let mut nodes: BTreeSet<NodeId> = BTreeSet::new();
        for i in idx {
            let (id, node, gpus) = {
                let g = &mut self.runs[j].granted[i];
                g.started = true;
                g.ends_at = now;
                (g.id, g.node.clone(), g.gpus)
            };
            self.held(j, gpus);
            self.running.entry(node.clone()).or_default().insert(id);
            self.runs[j].nodes.insert(node.clone());
            nodes.insert(node);
        }
        for n in nodes {
            self.heartbeat(&n, &[]);
        }
        self.runs[j].epoch += 1;
        let epoch = self.runs[j].epoch;
        if let Some(t) = self.runs[j].elastic.as_ref().map(ElasticRun::ends_at) {
            self.at(t, Ev::ElasticEnd(j, epoch));
        }
    }

    /// Growth offered: the AM checkpoints, restarts the whole gang at the new size.
    pub(super) fn elastic_grow(&mut self, j: usize, offers: Vec<ResizeOfferView>) {
        let now = self.now;
        let cost = self.opts.restart_cost_ms;
        for o in offers {
            let idx: Vec<usize> = (0..self.runs[j].granted.len())
                .filter(|i| {
                    let g = &self.runs[j].granted[*i];
                    !g.started && o.containers.contains(&g.id)
                })
                .collect();
            let Some(e) = self.runs[j].elastic.as_mut() else {
                return;
            };
            e.accrue(now);
            self.gpu_account(j);
            let e = self.runs[j].elastic.as_mut().expect("checked above");
            e.members += idx.len() as u32;
            e.from = now + cost;
            e.accrued = now;
            e.resizes += 1;
            self.resizes += 1;
            self.elastic_run(j, idx, false);
        }
    }

    /// A shrink demanded: the AM checkpoints, gives the members back and restarts the rest.
    pub(super) fn elastic_shrink(
        &mut self,
        j: usize,
        attempt: ApplicationAttemptId,
        demands: Vec<ResizeDemandView>,
    ) {
        let now = self.now;
        let cost = self.opts.restart_cost_ms;
        let give: Vec<ContainerId> = demands
            .iter()
            .flat_map(|d| d.containers.iter().copied())
            .filter(|c| self.runs[j].granted.iter().any(|g| g.id == *c && g.started))
            .collect();
        if give.is_empty() {
            return;
        }
        if let Some(e) = self.runs[j].elastic.as_mut() {
            e.accrue(now);
        }
        self.gpu_account(j);
        let mut by_node: BTreeMap<NodeId, Vec<ContainerId>> = BTreeMap::new();
        for c in &give {
            if let Some(pos) = self.runs[j].granted.iter().position(|g| g.id == *c) {
                let g = self.runs[j].granted.remove(pos);
                self.held(j, -g.gpus);
                by_node.entry(g.node).or_default().push(*c);
            }
        }
        if let Some(e) = self.runs[j].elastic.as_mut() {
            e.members = e.members.saturating_sub(give.len() as u32);
            e.from = now + cost;
            e.accrued = now;
            e.resizes += 1;
        }
        self.resizes += 1;
        let progress = self.elastic_progress(j);
        let rid = self.runs[j].response_id;
        let r = self.timed(|c, t| {
            c.am_allocate_with(
                &attempt,
                rid,
                vec![],
                give,
                progress,
                AmReport::default(),
                t,
            )
        });
        if let Ok(reply) = r {
            self.runs[j].response_id = reply.response_id;
        }
        for (node, cs) in by_node {
            if let Some(s) = self.running.get_mut(&node) {
                for c in &cs {
                    s.remove(c);
                }
            }
            self.heartbeat(&node, &cs);
        }
        self.runs[j].epoch += 1;
        let epoch = self.runs[j].epoch;
        if let Some(t) = self.runs[j].elastic.as_ref().map(ElasticRun::ends_at) {
            self.at(t, Ev::ElasticEnd(j, epoch));
        }
    }

    /// GPU-time used up to now at the current size.
    fn gpu_account(&mut self, j: usize) {
        let now = self.now;
        let run = &mut self.runs[j];
        let live: i64 = run
            .granted
            .iter()
            .filter(|g| g.started)
            .map(|g| g.gpus.max(0))
            .sum();
        let since = run.elastic_gpu_at.unwrap_or(now);
        run.gpu_ms_used += live as u128 * u128::from(now.saturating_sub(since));
        run.elastic_gpu_at = Some(now);
    }

    /// The work is done: every member ends, the AM unregisters.
    pub(super) fn elastic_end(&mut self, j: usize, epoch: u32) -> Result<(), SlsError> {
        if epoch != self.runs[j].epoch || self.runs[j].outcome.is_some() {
            return Ok(());
        }
        self.gpu_account(j);
        let mut by_node: BTreeMap<NodeId, Vec<ContainerId>> = BTreeMap::new();
        for g in self.runs[j].granted.iter().filter(|g| g.started) {
            by_node.entry(g.node.clone()).or_default().push(g.id);
        }
        let gpus: i64 = self.runs[j]
            .granted
            .iter()
            .filter(|g| g.started)
            .map(|g| g.gpus)
            .sum();
        self.held(j, -gpus);
        self.runs[j].granted.clear();
        for (node, cs) in by_node {
            if let Some(s) = self.running.get_mut(&node) {
                for c in &cs {
                    s.remove(c);
                }
            }
            self.heartbeat(&node, &cs);
        }
        self.elastic_live.remove(&j);
        self.settle()?;
        self.finish(j, Outcome::Finished, FinalApplicationStatus::SUCCEEDED, "")
    }

    /// Whether an elastic job runs (the doubling policy's rounds need ticks then).
    pub(super) fn elastic_ticks(&self) -> bool {
        !self.elastic_live.is_empty()
    }

    /// Running elastic jobs' AMs report their progress (as live AMs do in every heartbeat),
    /// at most once per `PROGRESS_EVERY_MS`, before the RM's round.
    pub(super) fn elastic_heartbeats(&mut self) {
        let due: Vec<usize> = self
            .elastic_live
            .iter()
            .copied()
            .filter(|j| {
                self.runs[*j]
                    .elastic
                    .as_ref()
                    .is_some_and(|e| self.now >= e.reported + PROGRESS_EVERY_MS)
            })
            .collect();
        for j in due {
            if let Some(att) = self.runs[j].attempt {
                self.allocate(j, att, vec![]);
            }
        }
    }
}

impl Job {
    /// Asked as one gang of equal members (the CSV's jobs of more than one container).
    pub(super) fn is_gang_shaped(&self) -> bool {
        self.tasks.len() == 1 && self.gpus() > 0
    }
}
