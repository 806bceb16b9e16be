//! CPUs per GPU container: the per-partition policy (`spindle.scheduler.cpu-policy`), a
//! container's vcores range, its throughput model by CPUs per GPU, and the adaptive plan for
//! one node.
//!
//! Under `proportional` (the default, today's behaviour) and `static` nothing moves while a
//! container runs. Under `adaptive` a round (every `spindle.scheduler.cpu-policy.interval-ms`)
//! plans each node that runs ranged GPU containers ([`plan_node`]): the node's free vcores
//! (what CPU-only work left) and the vcores of the containers whose predicted gain per core is
//! smallest go, one core at a time, to the container whose predicted throughput gained per
//! core is largest, relative to its own (log throughput: jobs report in units of their own),
//! while the gain exceeds the loss; every container stays within its range,
//! a container resized within `resize-interval-ms` is not touched, a container below its
//! floor (the CPUs of its proportional throughput) is brought up first, a queue never goes
//! above its maximum nor gives more than its `QueueRoom::give` to another queue (the core
//! passes every ranged container's floor as the guarantee: `core::cpu`'s
//! `cpu_queue_room`). A container granted where its share is lent calls it back at once
//! ([`reclaim`]: the one resize that ignores the interval). The prediction
//! ([`Prediction`]) is the job's declared table or what its AM reported; without either a
//! job is explored optimistically (Synergy's profiling) for a bounded time, then left where
//! it is. Pure: the plan is a list of [`Resize`]s the lifecycle layer carries out.

use std::collections::BTreeMap;

use spindle_common::ContainerId;

/// How a partition's GPU containers get their CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CpuPolicy {
    /// The node's CPUs divided by its GPUs, per GPU (what a container's ask gets today).
    #[default]
    Proportional,
    /// A fixed count per GPU (Slurm's `--cpus-per-gpu`).
    Static { cpus_per_gpu: u32 },
    /// Sized by predicted throughput, and moved while jobs run.
    Adaptive,
}

/// Why a policy word is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuPolicyError {
    #[error("unknown CPU policy '{0}' (expected proportional, static or adaptive)")]
    Unknown(String),
    #[error("'{0}' is not a vcores range (expected MIN..MAX with 1 <= MIN <= MAX, or auto)")]
    BadRange(String),
    #[error("throughput table row '{row}': {why}")]
    BadTable { row: String, why: &'static str },
}

impl CpuPolicy {
    /// `proportional`, `static` (at `cpus_per_gpu`) or `adaptive`.
    pub fn parse(word: &str, cpus_per_gpu: u32) -> Result<Self, CpuPolicyError> {
        match word.trim().to_ascii_lowercase().as_str() {
            "proportional" => Ok(Self::Proportional),
            "static" => Ok(Self::Static { cpus_per_gpu }),
            "adaptive" => Ok(Self::Adaptive),
            _ => Err(CpuPolicyError::Unknown(word.to_string())),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Self::Proportional => "proportional",
            Self::Static { .. } => "static",
            Self::Adaptive => "adaptive",
        }
    }
}

/// The CPU policy's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuConf {
    /// Every partition's policy but those named below.
    pub policy: CpuPolicy,
    /// `spindle.scheduler.cpu-policy.<partition>` overrides (`""`: the default partition).
    pub by_partition: BTreeMap<String, CpuPolicy>,
    /// How often the adaptive round runs (ms).
    pub interval_ms: u64,
    /// No container is resized more often than this (ms).
    pub resize_interval_ms: u64,
    /// How long a job without a table or reports is explored (ms).
    pub explore_ms: u64,
    /// `auto`'s top: the node's CPUs per GPU times this.
    pub auto_factor: f64,
}

impl Default for CpuConf {
    fn default() -> Self {
        Self {
            policy: CpuPolicy::Proportional,
            by_partition: BTreeMap::new(),
            interval_ms: 30_000,
            resize_interval_ms: 60_000,
            explore_ms: 300_000,
            auto_factor: 4.0,
        }
    }
}

impl CpuConf {
    pub fn policy_of(&self, partition: &str) -> CpuPolicy {
        self.by_partition
            .get(partition)
            .copied()
            .unwrap_or(self.policy)
    }

    /// Whether any partition moves CPUs (else the round costs nothing).
    pub fn any_adaptive(&self) -> bool {
        self.policy == CpuPolicy::Adaptive
            || self
                .by_partition
                .values()
                .any(|p| *p == CpuPolicy::Adaptive)
    }
}

/// What an ask says of its vcores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VcoresAsk {
    /// The capability's vcores, as YARN has it.
    #[default]
    Fixed,
    /// Anything in `min..=max` per container (the capability carries `min`).
    Range { min: u32, max: u32 },
    /// One to the node's CPUs per GPU times the configured factor, per GPU.
    Auto,
}

impl VcoresAsk {
    /// `MIN..MAX` or `auto` (what `--cpus-per-gpu` takes; per GPU).
    pub fn parse(text: &str) -> Result<Self, CpuPolicyError> {
        let t = text.trim();
        if t.eq_ignore_ascii_case("auto") {
            return Ok(Self::Auto);
        }
        let bad = || CpuPolicyError::BadRange(text.to_string());
        let (a, b) = t.split_once("..").ok_or_else(bad)?;
        let min: u32 = a.trim().parse().map_err(|_| bad())?;
        let max: u32 = b.trim().parse().map_err(|_| bad())?;
        if min == 0 || min > max {
            return Err(bad());
        }
        Ok(Self::Range { min, max })
    }

    /// The minimum of a container of `gpus` GPUs (what it is granted first): a range's,
    /// or one per GPU for `auto`.
    pub fn min(&self, gpus: u32) -> Option<u32> {
        match self {
            Self::Range { min, .. } => Some(*min),
            Self::Auto => Some(gpus.max(1)),
            Self::Fixed => None,
        }
    }

    /// The range of a container of `gpus` GPUs on a node of `node_vcores` CPUs and
    /// `node_gpus` GPUs, its fixed size being `fixed`. `None`: a fixed ask.
    pub fn range(
        &self,
        gpus: u32,
        node_vcores: u32,
        node_gpus: u32,
        auto_factor: f64,
    ) -> Option<CpuRange> {
        match *self {
            Self::Fixed => None,
            Self::Range { min, max } => Some(CpuRange { min, max }),
            Self::Auto => {
                let per_gpu = f64::from(node_vcores) / f64::from(node_gpus.max(1));
                let top = (per_gpu * auto_factor * f64::from(gpus.max(1))).floor() as u32;
                Some(CpuRange {
                    min: gpus.max(1),
                    max: top.clamp(gpus.max(1), node_vcores.max(1)),
                })
            }
        }
    }
}

/// A container's vcores range (inclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuRange {
    pub min: u32,
    pub max: u32,
}

impl CpuRange {
    pub fn clamp(&self, v: u32) -> u32 {
        v.clamp(self.min, self.max.max(self.min))
    }
}

/// Throughput per GPU by CPUs per GPU (any unit): `1:100;3:180;6:260;12:294`, the GPU
/// table's form. Keys are milli-CPUs per GPU, so a measured point of 13 vcores on 4 GPUs
/// (3.25 per GPU) is kept as it is.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CpuCurve(pub BTreeMap<u32, f64>);

/// Milli-CPUs per GPU of `vcores` over `gpus`.
pub fn milli_per_gpu(vcores: u32, gpus: u32) -> u32 {
    (u64::from(vcores) * 1000 / u64::from(gpus.max(1))).min(u64::from(u32::MAX)) as u32
}

impl CpuCurve {
    /// Parses `cpus:throughput` rows separated by `;` (or `,`).
    pub fn parse(text: &str) -> Result<Self, CpuPolicyError> {
        let mut m = BTreeMap::new();
        for row in text
            .split([';', ','])
            .map(str::trim)
            .filter(|r| !r.is_empty())
        {
            let bad = |why| CpuPolicyError::BadTable {
                row: row.to_string(),
                why,
            };
            let (k, v) = row
                .split_once(':')
                .ok_or_else(|| bad("expected CPUS:VALUE"))?;
            let k: u32 = k.trim().parse().map_err(|_| bad("CPUS is not a count"))?;
            let v: f64 = v.trim().parse().map_err(|_| bad("VALUE is not a number"))?;
            if k == 0 || k > 1_000_000 {
                return Err(bad("CPUS must be between 1 and 1000000"));
            }
            if !(v.is_finite() && v > 0.0) {
                return Err(bad("VALUE must be positive"));
            }
            if m.insert(k * 1000, v).is_some() {
                return Err(bad("CPUS given twice"));
            }
        }
        Ok(Self(m))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Throughput per GPU at `cpg` CPUs per GPU: linear between rows, from zero below the
    /// first row, flat above the last, and never lower at more CPUs than at fewer (a job
    /// can leave cores idle, so a dip in a measured table is noise).
    pub fn at(&self, cpg: f64) -> f64 {
        let mut below = (0.0, 0.0);
        for (&k, &v) in &self.0 {
            let (k, v) = (f64::from(k) / 1000.0, v.max(below.1));
            if cpg <= k {
                let (k0, v0) = below;
                if k <= k0 {
                    return v;
                }
                return v0 + (v - v0) * (cpg - k0) / (k - k0);
            }
            below = (k, v);
        }
        below.1
    }
}

/// How a container's throughput at a CPU count is predicted.
#[derive(Debug, Clone, PartialEq)]
pub enum Prediction {
    /// Declared or measured, by CPUs per GPU.
    Curve(CpuCurve),
    /// Unknown and being explored: each added core is assumed to pay (Synergy's optimistic
    /// profiling); never a donor while exploring.
    Explore,
    /// Unknown and no longer explored: left where it is.
    Unknown,
}

/// One ranged GPU container of a node, as the plan sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    pub id: ContainerId,
    pub gpus: u32,
    pub vcores: u32,
    pub range: CpuRange,
    pub prediction: Prediction,
    /// False when resized within the resize interval: the plan leaves it alone.
    pub movable: bool,
    /// Its leaf queue (an index into the plan's `queues`).
    pub queue: usize,
}

/// What a leaf may gain or give of vcores in this plan: up to its maximum (on its path
/// below the root), and how many its containers may give to another queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueRoom {
    pub grow: u32,
    pub give: u32,
}

/// One container's new size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resize {
    pub container: ContainerId,
    pub from: u32,
    pub to: u32,
}

/// Exploration's assumed gain per core: above any real curve's, so a job being explored is
/// tried at more cores first.
const EXPLORE_GAIN: f64 = f64::MAX / 4.0;
/// The gain of a core that takes a job from no predicted throughput to some: above any
/// relative gain, below exploration's.
const STARTS_A_JOB: f64 = f64::MAX / 8.0;

impl Member {
    /// Predicted throughput (per GPU times GPUs) at `v` vcores.
    fn throughput(&self, v: u32) -> f64 {
        match &self.prediction {
            Prediction::Curve(c) => {
                let g = self.gpus.max(1);
                c.at(f64::from(v) / f64::from(g)) * f64::from(g)
            }
            Prediction::Explore | Prediction::Unknown => 0.0,
        }
    }

    /// Raises the range's minimum to the fewest vcores at which the predicted throughput is
    /// still that at `share` (Synergy's guarantee: no job is made slower than at the
    /// GPU-proportional share), within measurement noise ([`MIN_REL_GAIN`]: a flat job whose
    /// measured points differ by noise must not claim its whole share back). Unknown jobs
    /// keep their range.
    pub fn guarantee(mut self, share: u32) -> Self {
        if let Prediction::Curve(_) = self.prediction {
            let share = self.range.clamp(share);
            let target = self.throughput(share) * (1.0 - MIN_REL_GAIN);
            let floor = (self.range.min..share)
                .find(|v| self.throughput(*v) >= target - 1e-9)
                .unwrap_or(share);
            self.range.min = floor;
        }
        self
    }

    /// Predicted gain of one more core, relative to the job's own pace (`None`: it may not
    /// grow): the growth of log throughput, so jobs reporting in different units (images,
    /// tokens, samples per second) compare by how much sooner each would finish, and the
    /// plan maximizes the product of the jobs' speeds, not the sum of numbers in units that
    /// differ.
    fn gain(&self, v: u32) -> Option<f64> {
        if !self.movable || v >= self.range.max {
            return None;
        }
        match self.prediction {
            Prediction::Curve(_) => Some(self.log_step(v)),
            Prediction::Explore => Some(EXPLORE_GAIN),
            Prediction::Unknown => None,
        }
    }

    /// Predicted loss of one core less (`None`: it may not give).
    fn loss(&self, v: u32) -> Option<f64> {
        if !self.movable || v <= self.range.min {
            return None;
        }
        match self.prediction {
            Prediction::Curve(_) => Some(self.drop_cost(v)),
            Prediction::Explore | Prediction::Unknown => None,
        }
    }

    /// Predicted relative throughput lost from `v` to `v - 1` vcores (nothing for a job
    /// without a curve: it holds its cores on a guess).
    fn drop_cost(&self, v: u32) -> f64 {
        match self.prediction {
            Prediction::Curve(_) if v > 0 => self.log_step(v - 1),
            _ => 0.0,
        }
    }

    /// `ln T(v + 1) - ln T(v)`: the relative speed one core adds at `v` (a core that starts
    /// a stalled job is worth more than any other move).
    fn log_step(&self, v: u32) -> f64 {
        let (at, above) = (self.throughput(v), self.throughput(v + 1));
        if at <= 0.0 {
            return if above > 0.0 { STARTS_A_JOB } else { 0.0 };
        }
        (above / at).ln().max(0.0)
    }
}

/// The smallest gain worth a move (so rounding in a table does not make cores shuttle back
/// and forth).
const MIN_GAIN: f64 = 1e-9;

/// The smallest gain worth a move from another container, as a share of the receiver's
/// predicted throughput: measured points carry noise (a rate measured across a resize, a
/// busy machine), and moves for less made cores shuttle between two jobs every round.
const MIN_REL_GAIN: f64 = 0.02;

/// [`MIN_REL_GAIN`] on the scale of [`Member::gain`] (log throughput).
fn move_worth() -> f64 {
    MIN_REL_GAIN.ln_1p()
}

/// Plans one node: `free` vcores unused on it, its ranged GPU containers, their leaves'
/// room. Sizes outside a range are brought into it first (a container granted its minimum,
/// or one whose range changed); then cores go, one at a time, to the largest predicted gain
/// per core, from the free cores or from the container with the smallest predicted loss
/// while the loss is smaller than the gain. Returns the containers whose size changes.
pub fn plan_node(members: &[Member], mut free: u32, queues: &[QueueRoom]) -> Vec<Resize> {
    let mut size: Vec<u32> = members.iter().map(|m| m.vcores).collect();
    let mut room: Vec<QueueRoom> = queues.to_vec();
    // Below the minimum (a container granted short of its floor on a node whose cores are
    // lent, or whose range changed): grown first, from the free cores, then from the
    // cheapest donor above its own minimum whatever the gain (the floor is a guarantee).
    for (i, m) in members.iter().enumerate() {
        let want = m.range.min.saturating_sub(size[i]);
        let q = &mut room[m.queue];
        let add = want.min(free).min(q.grow);
        size[i] += add;
        free -= add;
        q.grow -= add;
        while size[i] < m.range.min && m.movable {
            let Some((d, _)) = donor(members, &size, &room, i) else {
                break;
            };
            take(members, &mut size, &mut room, d, i);
        }
    }
    // Each step moves one core; the sum of the maxima and the free cores bound the steps.
    let mut budget: u32 = members.iter().map(|m| m.range.max).sum::<u32>() + free;
    while budget > 0 && step(members, &mut size, &mut free, &mut room) {
        budget -= 1;
    }
    changes(members, size)
}

/// One core to the container with the largest predicted gain that can get one: from the
/// free cores while its queue has room, else from the container (of its own queue, or of a
/// queue above its guarantee) with the smallest predicted loss below that gain. False when
/// no move gains.
fn step(members: &[Member], size: &mut [u32], free: &mut u32, room: &mut [QueueRoom]) -> bool {
    let mut receivers: Vec<(usize, f64)> = members
        .iter()
        .enumerate()
        .filter_map(|(i, m)| m.gain(size[i]).map(|g| (i, g)))
        .filter(|(_, g)| *g > MIN_GAIN)
        .collect();
    receivers.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    for (r, gain) in receivers {
        let rq = members[r].queue;
        if *free > 0 && room[rq].grow > 0 {
            size[r] += 1;
            *free -= 1;
            room[rq].grow -= 1;
            return true;
        }
        if members[r].prediction == Prediction::Explore {
            // Exploration takes only free cores: no measured job pays for a guess.
            continue;
        }
        let Some((d, loss)) = donor(members, size, room, r) else {
            continue;
        };
        if loss + move_worth() >= gain {
            continue;
        }
        take(members, size, room, d, r);
        return true;
    }
    false
}

/// The container that loses least by giving `r` one core: of `r`'s queue, or of a queue
/// above its guarantee while `r`'s may grow; movable and above its minimum.
fn donor(members: &[Member], size: &[u32], room: &[QueueRoom], r: usize) -> Option<(usize, f64)> {
    let rq = members[r].queue;
    members
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != r)
        .filter(|(_, m)| m.queue == rq || (room[m.queue].give > 0 && room[rq].grow > 0))
        .filter_map(|(i, m)| m.loss(size[i]).map(|l| (i, l)))
        .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)))
}

/// One core from `d` to `r`, and their queues' rooms.
fn take(members: &[Member], size: &mut [u32], room: &mut [QueueRoom], d: usize, r: usize) {
    let (dq, rq) = (members[d].queue, members[r].queue);
    if dq != rq {
        room[dq].give -= 1;
        room[dq].grow += 1;
        room[rq].grow -= 1;
    }
    size[d] -= 1;
    size[r] += 1;
}

/// The members whose size changed.
fn changes(members: &[Member], size: Vec<u32>) -> Vec<Resize> {
    members
        .iter()
        .zip(size)
        .filter(|(m, s)| m.vcores != *s)
        .map(|(m, s)| Resize {
            container: m.id,
            from: m.vcores,
            to: s,
        })
        .collect()
}

/// Calls back `need` cores for a container being granted its share on a node whose cores
/// are lent: one at a time from the member (the node's other ranged containers, each with
/// its range's minimum set to what it keeps) that loses least by it, a member being
/// explored or unknown first. Unlike the round this ignores the resize interval: a loan is
/// returned when the GPU it was lent from is granted.
pub fn reclaim(members: &[Member], need: u32) -> Vec<Resize> {
    let mut size: Vec<u32> = members.iter().map(|m| m.vcores).collect();
    for _ in 0..need {
        let cheapest = members
            .iter()
            .enumerate()
            .filter(|(i, m)| size[*i] > m.range.min)
            .map(|(i, m)| (i, m.drop_cost(size[i])))
            .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        let Some((d, _)) = cheapest else { break };
        size[d] -= 1;
    }
    changes(members, size)
}

#[cfg(test)]
#[path = "cpu_policy_tests.rs"]
mod tests;
