//! CPU-sensitive jobs in a replay: a job with a `cpu_throughput` table asks its containers'
//! vcores as a range (one CPU per GPU up to the table's largest CPUs per GPU) with the table
//! as its declared speed model, so the partition's CPU policy sizes them (at grant, and
//! under `adaptive` while they run). Its work is its `duration` times its throughput per GPU
//! at the proportional share (the node's CPUs over its GPUs); it advances at its throughput
//! at the CPUs per GPU of its least-served container (a synchronous job runs at its slowest
//! worker's pace). Every resize the RM tells its AM (`updatedContainers`) changes the pace
//! from then on.

use spindle_resourcemanager::core::{CpuAsk, CpuCurve, UpdatedView, VcoresAsk};

use super::*;

/// A running CPU-sensitive job's work and pace.
#[derive(Debug, Clone, Default)]
pub(super) struct CpuRun {
    curve: CpuCurve,
    /// Work in all and done (throughput units x ms, per GPU), and when last brought up.
    work: f64,
    done: f64,
    at: u64,
    /// Each granted container's vcores and GPUs.
    sizes: BTreeMap<ContainerId, (i64, i64)>,
    /// Bumped at every change of pace: an end event of an older one is stale.
    pub(super) generation: u32,
    running: bool,
    /// GPU-milliseconds held while running, and of those the GPUs computed: a GPU whose
    /// job runs below its curve's peak waits on its CPUs for the rest (an input-bound
    /// job's GPU shows that as idle in `nvidia-smi`).
    held_gpu_ms: f64,
    busy_gpu_ms: f64,
    /// Work done when this run began (what the last checkpoint saved), and when a notice
    /// came, the work done by then (what the checkpoint it asks for saves).
    base: f64,
    at_notice: Option<f64>,
}

impl CpuRun {
    fn rate(&self) -> f64 {
        self.sizes
            .values()
            .filter(|(_, g)| *g > 0)
            .map(|(v, g)| self.curve.at(*v as f64 / *g as f64))
            .fold(f64::INFINITY, f64::min)
    }

    fn accrue(&mut self, now: u64) {
        if self.running {
            let r = self.rate();
            if r.is_finite() {
                let dt = now.saturating_sub(self.at) as f64;
                self.done += r * dt;
                let gpus: i64 = self.sizes.values().map(|(_, g)| (*g).max(0)).sum();
                self.held_gpu_ms += gpus as f64 * dt;
                self.busy_gpu_ms += gpus as f64
                    * dt
                    * busy_share(r, self.curve.0.values().copied().fold(0.0, f64::max));
            }
        }
        self.at = now;
    }

    fn ends_at(&self) -> u64 {
        let r = self.rate();
        let left = (self.work - self.done).max(0.0);
        if !(r.is_finite() && r > 0.0) {
            return u64::MAX / 4;
        }
        self.at.saturating_add((left / r).ceil() as u64)
    }
}

/// The share of its time a GPU computes when its job runs at `rate` and at `peak` with
/// CPUs enough (the rest it waits on input).
fn busy_share(rate: f64, peak: f64) -> f64 {
    if peak > 0.0 {
        (rate / peak).clamp(0.0, 1.0)
    } else {
        1.0
    }
}

/// The throughput table as the core's curve.
fn curve_of(table: &BTreeMap<u32, f64>) -> CpuCurve {
    CpuCurve(table.iter().map(|(k, v)| (k * 1000, *v)).collect())
}

impl Sim<'_> {
    /// What a CPU-sensitive job's ask says of its CPUs: `auto` (one per GPU up to the
    /// node's share times the RM's factor) with its table (None: a fixed ask).
    pub(super) fn cpu_ask(&self, j: usize) -> Option<CpuAsk> {
        let table = self.jobs[j].cpu_throughput.as_ref()?;
        Some(CpuAsk {
            vcores: VcoresAsk::Auto,
            table: curve_of(table),
        })
    }

    /// A container was granted: its size is kept for the job's pace.
    pub(super) fn cpu_granted(&mut self, j: usize, a: &Allocation) {
        let Some(table) = &self.jobs[j].cpu_throughput else {
            return;
        };
        let run = self.runs[j].cpu.get_or_insert_with(|| CpuRun {
            curve: curve_of(table),
            ..CpuRun::default()
        });
        run.sizes
            .insert(a.id, (a.resource.vcores, a.resource.get(GPU)));
    }

    /// The job's containers all started: its work is set from its duration at the
    /// proportional share, and its end is scheduled at its pace.
    pub(super) fn cpu_started(&mut self, j: usize) {
        let share = self.proportional_share(j);
        let duration = self.jobs[j].tasks.first().map_or(0, |t| t.duration_ms);
        let now = self.now;
        let held: BTreeSet<ContainerId> = self.runs[j].granted.iter().map(|g| g.id).collect();
        let Some(run) = self.runs[j].cpu.as_mut() else {
            return;
        };
        // A run after a preemption: the pace is its new containers' alone.
        run.sizes.retain(|id, _| held.contains(id));
        if run.work == 0.0 {
            run.work = duration as f64 * run.curve.at(share);
        }
        run.at = now;
        run.running = true;
        self.cpu_live.insert(j);
        self.cpu_reschedule(j);
    }

    /// A notice came: the checkpoint it asks for saves the work done by now.
    pub(super) fn cpu_noticed(&mut self, j: usize) {
        let now = self.now;
        if let Some(run) = self.runs[j].cpu.as_mut() {
            run.accrue(now);
            run.at_notice = Some(run.done);
        }
    }

    /// Nothing of the preempted job runs any more: its work goes back to what its
    /// checkpoint saved, the one the notice asked for (`checkpointed`), else its last
    /// periodic one at `saved_at` (the work then taken as done at the pace of the run up to
    /// the notice at `noticed_at`), and it makes no progress until it runs again.
    pub(super) fn cpu_rewind(
        &mut self,
        j: usize,
        noticed_at: Option<u64>,
        checkpointed: bool,
        saved_at: u64,
    ) {
        let run_from = self.runs[j].run_from;
        let Some(run) = self.runs[j].cpu.as_mut() else {
            return;
        };
        let at_notice = run.at_notice.take().unwrap_or(run.base);
        let saved = match noticed_at {
            _ if checkpointed => at_notice,
            Some(n) if n > run_from && saved_at > run_from => {
                let part = (saved_at - run_from) as f64 / (n - run_from) as f64;
                run.base + (at_notice - run.base) * part.min(1.0)
            }
            _ => run.base,
        };
        run.done = saved;
        run.base = saved;
        run.running = false;
    }

    /// The node's CPUs over its GPUs where the job's first container runs.
    fn proportional_share(&self, j: usize) -> f64 {
        let node = self.runs[j].granted.first().map(|g| g.node.clone());
        node.and_then(|n| self.core.nodes().get(&n).map(|n| n.total.clone()))
            .map_or(1.0, |t| t.vcores as f64 / (t.get(GPU).max(1)) as f64)
    }

    fn cpu_reschedule(&mut self, j: usize) {
        let epoch = self.runs[j].epoch;
        let Some(run) = self.runs[j].cpu.as_mut() else {
            return;
        };
        run.generation += 1;
        let (t, generation) = (run.ends_at(), run.generation);
        self.at(t, Ev::CpuEnd(j, epoch, generation));
    }

    /// The RM resized some of the job's containers.
    pub(super) fn cpu_updated(&mut self, j: usize, updated: &[UpdatedView]) {
        let now = self.now;
        let Some(run) = self.runs[j].cpu.as_mut() else {
            return;
        };
        run.accrue(now);
        for u in updated {
            if let Some(s) = run.sizes.get_mut(&u.allocation.id) {
                s.0 = u.allocation.resource.vcores;
            }
        }
        self.resizes += updated.len() as u64;
        if run.running {
            self.cpu_reschedule(j);
        }
    }

    /// The job's work is done, if this end is still current: every container ends.
    pub(super) fn cpu_end(
        &mut self,
        j: usize,
        epoch: u32,
        generation: u32,
    ) -> Result<(), SlsError> {
        let current = self.runs[j]
            .cpu
            .as_ref()
            .is_some_and(|r| r.generation == generation && r.running);
        if !current || epoch != self.runs[j].epoch {
            return Ok(());
        }
        let now = self.now;
        if let Some(run) = self.runs[j].cpu.as_mut() {
            run.accrue(now);
            run.running = false;
        }
        self.cpu_live.remove(&j);
        let started: Vec<ContainerId> = self.runs[j]
            .granted
            .iter()
            .filter(|g| g.started)
            .map(|g| g.id)
            .collect();
        // GPU time is what the job really held, not its trace duration.
        let from = self.runs[j].start_ms.unwrap_or(now);
        let gpus: i64 = self.runs[j].granted.iter().map(|g| g.gpus.max(0)).sum();
        self.runs[j].gpu_ms_used = gpus as u128 * u128::from(now.saturating_sub(from));
        self.end_tasks(j, epoch, started)
    }

    /// Whether CPU-sensitive jobs run under a policy whose rounds need ticks.
    pub(super) fn cpu_ticks(&self) -> bool {
        !self.cpu_live.is_empty() && self.core.conf().cpu.any_adaptive()
    }

    /// Brings the CPU figures up to `t`: GPU nodes' vcores held and GPUs that cannot get
    /// a CPU (free GPUs on nodes with no free vcore), each times the time since the last
    /// event.
    pub(super) fn cpu_account(&mut self, t: u64) {
        let Some(acc) = self.cpu_acc.as_mut() else {
            return;
        };
        let dt = t.saturating_sub(acc.at) as f64;
        acc.at = t;
        if dt == 0.0 {
            return;
        }
        for n in self.core.scheduler().nodes().iter() {
            let gpus = n.total.get(GPU);
            if gpus == 0 {
                continue;
            }
            acc.vcore_ms_total += n.total.vcores as f64 * dt;
            acc.vcore_ms_used += n.used.vcores as f64 * dt;
            acc.gpu_ms_total += gpus as f64 * dt;
            if n.free.vcores < 1 {
                acc.stranded_gpu_ms += n.free.get(GPU).max(0) as f64 * dt;
            }
        }
    }
}

/// CPU figures integrated over a replay.
#[derive(Debug, Clone, Default)]
pub(super) struct CpuAcc {
    at: u64,
    vcore_ms_used: f64,
    vcore_ms_total: f64,
    stranded_gpu_ms: f64,
    gpu_ms_total: f64,
}

/// What `summary.json` says of CPUs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuFigures {
    /// GPU nodes' vcore-seconds held over available.
    pub utilization: f64,
    /// GPU-seconds stranded (free GPUs on nodes without a free vcore) over available.
    pub gpus_stranded: f64,
    /// Of the GPU-seconds CPU-sensitive jobs held, the share their GPUs computed (each at
    /// its job's throughput over the peak of its curve; the rest waiting on input CPUs).
    pub gpu_busy: f64,
}

impl CpuAcc {
    /// The figures, with the CPU-sensitive jobs' runs.
    pub(super) fn figures<'a>(&self, runs: impl Iterator<Item = &'a CpuRun>) -> CpuFigures {
        let (held, busy) = runs.fold((0.0, 0.0), |(h, b), r| {
            (h + r.held_gpu_ms, b + r.busy_gpu_ms)
        });
        let ratio = |a: f64, b: f64| {
            if b > 0.0 {
                (a / b * 1e6).round() / 1e6
            } else {
                0.0
            }
        };
        CpuFigures {
            utilization: ratio(self.vcore_ms_used, self.vcore_ms_total),
            gpus_stranded: ratio(self.stranded_gpu_ms, self.gpu_ms_total),
            gpu_busy: ratio(busy, held),
        }
    }
}
