//! CPUs of GPU containers: asks with a vcores range or `auto`, their sizing at grant by the
//! partition's CPU policy (`spindle.scheduler.cpu-policy`), the throughput AMs report by
//! CPUs, and the adaptive round (every `spindle.scheduler.cpu-policy.interval-ms`, driven by
//! `tick`) that moves cores between running containers. Every resize is RM-initiated and
//! goes through the container update path (`updates::resize_container`): its AM hears it
//! in `updatedContainers` with a new token and hands that to the NM, which rewrites the CPU
//! quota. Memory and devices never change. The decisions are
//! [`scheduler::cpu_policy::plan_node`]'s; this module keeps the books and carries them out.
//! Under `adaptive` a container granted where its share is lent (a neighbour grew into a
//! freed GPU's cores) calls it back at once (`cpu_call_back`), ignoring the resize interval.
//!
//! With no ranged container alive the round and every hook cost one map lookup.

use super::*;
pub use scheduler::cpu_policy::{
    milli_per_gpu, CpuConf, CpuCurve, CpuPolicy, CpuPolicyError, CpuRange, VcoresAsk,
};
use scheduler::cpu_policy::{plan_node, reclaim, Member, Prediction, QueueRoom};

/// What an ask says of its containers' CPUs beyond its capability (whose vcores are the
/// range's minimum).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CpuAsk {
    pub vcores: VcoresAsk,
    /// The job's declared throughput by CPUs per GPU (empty: none).
    pub table: CpuCurve,
}

/// A live GPU container whose CPUs the policy sizes.
#[derive(Debug, Clone, PartialEq)]
pub struct SizedContainer {
    pub node: NodeId,
    pub gpus: u32,
    pub range: CpuRange,
    pub table: CpuCurve,
    pub granted_at: u64,
    /// When it was last resized (0: never).
    pub last_resize: u64,
    /// Sized once at grant (by the partition's policy) yet?
    pub sized: bool,
}

/// What the CPU policy has done since the RM started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuCounters {
    pub rounds: u64,
    pub resizes: u64,
    /// Vcores added and removed in all.
    pub cores_moved: u64,
}

#[derive(Debug, Clone, Default)]
pub struct CpuState {
    /// Ranged asks by application and ask key.
    asks: BTreeMap<(ApplicationId, scheduler::AskKey), CpuAsk>,
    containers: BTreeMap<ContainerId, SizedContainer>,
    by_node: BTreeMap<NodeId, BTreeSet<ContainerId>>,
    /// Measured throughput by milli-CPUs per GPU, per application.
    reported: BTreeMap<ApplicationId, BTreeMap<u32, Measured>>,
    /// Granted and not yet sized.
    fresh: BTreeSet<ContainerId>,
    next_round_at: u64,
    pub counters: CpuCounters,
}

/// How many of an AM's reports at one CPU count its point averages over (the newest weigh
/// most once there are more): one report is one short window of a worker's rate, and a
/// window cut by a resize or a busy second must not move a floor or a core on its own.
const REPORTS_AVERAGED: u32 = 8;

/// One measured point of a job's CPU curve: the running mean of its reports.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Measured {
    mean: f64,
    reports: u32,
}

impl Measured {
    fn add(&mut self, value: f64) {
        self.reports = (self.reports + 1).min(REPORTS_AVERAGED);
        self.mean += (value - self.mean) / f64::from(self.reports);
    }
}

impl CpuState {
    pub fn sized(&self) -> &BTreeMap<ContainerId, SizedContainer> {
        &self.containers
    }
}

impl RmCore {
    pub fn cpu(&self) -> &CpuState {
        &self.cpu
    }

    /// An allocate call's ask: its CPU part kept (or dropped) for the containers it grants.
    pub(super) fn cpu_ask(
        &mut self,
        app: ApplicationId,
        key: scheduler::AskKey,
        ask: Option<CpuAsk>,
    ) {
        match ask.filter(|a| a.vcores != VcoresAsk::Fixed) {
            Some(a) => {
                self.cpu.asks.insert((app, key), a);
            }
            None => {
                if !self.cpu.asks.is_empty() {
                    self.cpu.asks.remove(&(app, key));
                }
            }
        }
    }

    /// A container was granted: a GPU container of a ranged ask is sized at the next tick.
    pub(super) fn cpu_granted(&mut self, p: &scheduler::Placement, cid: ContainerId, now: u64) {
        if self.cpu.asks.is_empty() {
            return;
        }
        let Some(ask) = self.cpu.asks.get(&(p.app, p.key)) else {
            return;
        };
        let gpus = u32::try_from(p.resource.get(spindle_common::resource::GPU)).unwrap_or(0);
        let Some(node) = self
            .sched
            .nodes()
            .slot(&p.node)
            .and_then(|s| self.sched.nodes().get(s))
        else {
            return;
        };
        if gpus == 0 {
            return;
        }
        let node_gpus = u32::try_from(node.total.get(spindle_common::resource::GPU)).unwrap_or(0);
        let node_vcores = u32::try_from(node.total.vcores).unwrap_or(0);
        let Some(range) = ask
            .vcores
            .range(gpus, node_vcores, node_gpus, self.conf.cpu.auto_factor)
        else {
            return;
        };
        let entry = SizedContainer {
            node: p.node.clone(),
            gpus,
            range,
            table: ask.table.clone(),
            granted_at: now,
            last_resize: 0,
            sized: false,
        };
        self.cpu.containers.insert(cid, entry);
        self.cpu
            .by_node
            .entry(p.node.clone())
            .or_default()
            .insert(cid);
        self.cpu.fresh.insert(cid);
    }

    /// A container ended.
    pub(super) fn cpu_forget(&mut self, cid: &ContainerId) {
        if self.cpu.containers.is_empty() {
            return;
        }
        if let Some(c) = self.cpu.containers.remove(cid) {
            self.cpu.fresh.remove(cid);
            if let Some(set) = self.cpu.by_node.get_mut(&c.node) {
                set.remove(cid);
                if set.is_empty() {
                    self.cpu.by_node.remove(&c.node);
                }
            }
        }
    }

    /// An application ended: its asks and reports go.
    pub(super) fn cpu_app_gone(&mut self, app: &ApplicationId) {
        if self.cpu.asks.is_empty() && self.cpu.reported.is_empty() {
            return;
        }
        self.cpu.reported.remove(app);
        self.cpu.asks.retain(|(a, _), _| a != app);
    }

    /// The AM measured `value` with workers of `vcores` CPUs (each with the GPUs of its
    /// ranged containers): averaged into that CPU count's point ([`REPORTS_AVERAGED`]).
    pub(super) fn report_cpu_throughput(&mut self, app: &ApplicationId, vcores: u32, value: f64) {
        if !(value.is_finite() && value > 0.0 && vcores > 0) {
            return;
        }
        let gpus = self
            .cpu
            .containers
            .iter()
            .find(|(c, _)| c.application_id() == *app)
            .map(|(_, s)| s.gpus);
        if let Some(g) = gpus {
            let per_gpu = value / f64::from(g);
            self.cpu
                .reported
                .entry(*app)
                .or_default()
                .entry(milli_per_gpu(vcores, g))
                .or_default()
                .add(per_gpu);
        }
    }

    /// Fresh containers sized by their partition's policy; then, once per interval, the
    /// adaptive round on every node of an adaptive partition that runs ranged containers.
    pub(super) fn cpu_tick(&mut self, now: u64) {
        if self.cpu.containers.is_empty() {
            return;
        }
        self.cpu_size_fresh(now);
        if !self.conf.cpu.any_adaptive() || now < self.cpu.next_round_at {
            return;
        }
        self.cpu.next_round_at = now.saturating_add(self.conf.cpu.interval_ms.max(1));
        self.cpu.counters.rounds += 1;
        let nodes: Vec<NodeId> = self.cpu.by_node.keys().cloned().collect();
        for n in nodes {
            self.cpu_round_node(&n, now);
        }
    }

    /// Containers granted since the last call sized by their partition's policy (after
    /// every scheduling pass; nothing to do costs one check).
    pub(super) fn cpu_size_fresh(&mut self, now: u64) {
        if self.cpu.fresh.is_empty() {
            return;
        }
        for cid in std::mem::take(&mut self.cpu.fresh) {
            self.cpu_size_at_grant(cid, now);
        }
    }

    /// The size a partition's policy gives a container at grant: the node's CPUs per GPU
    /// (proportional and adaptive, which then moves it) or the static count, in its range.
    fn cpu_size_at_grant(&mut self, cid: ContainerId, now: u64) {
        let Some(s) = self.cpu.containers.get(&cid).cloned() else {
            return;
        };
        let Some(node) = self
            .sched
            .nodes()
            .slot(&s.node)
            .and_then(|x| self.sched.nodes().get(x))
        else {
            return;
        };
        let policy = self.conf.cpu.policy_of(&node.partition);
        let free = if node.draining { 0 } else { node.free.vcores };
        let Some((node_vcores, node_gpus)) = self.cpu_node_shape(&s.node) else {
            return;
        };
        let want = match policy {
            CpuPolicy::Static { cpus_per_gpu } => cpus_per_gpu.saturating_mul(s.gpus),
            CpuPolicy::Proportional | CpuPolicy::Adaptive => {
                proportional(node_vcores, node_gpus, s.gpus)
            }
        };
        let want = s.range.clamp(want);
        if let Some(c) = self.cpu.containers.get_mut(&cid) {
            c.sized = true;
        }
        let have = self.containers.get(&cid).map_or(0, |c| c.resource.vcores);
        let short = i64::from(want) - have - free.max(0);
        if policy == CpuPolicy::Adaptive && short > 0 {
            // Its share is lent to neighbours (grown into a freed GPU's cores): called back.
            self.cpu_call_back(&s.node, cid, u32::try_from(short).unwrap_or(u32::MAX), now);
        }
        self.cpu_resize(cid, want, now);
    }

    /// Takes `need` cores back from `node`'s ranged containers above their proportional
    /// share (never below it), those losing least first, for `to`'s share.
    fn cpu_call_back(&mut self, node: &NodeId, to: ContainerId, need: u32, now: u64) {
        let Some(ids) = self.cpu.by_node.get(node) else {
            return;
        };
        let Some((node_vcores, node_gpus)) = self.cpu_node_shape(node) else {
            return;
        };
        let lenders: Vec<Member> = ids
            .iter()
            .filter(|cid| **cid != to)
            .filter_map(|cid| {
                let m = self.cpu_member(cid, 0, now)?;
                let share = m.range.clamp(proportional(node_vcores, node_gpus, m.gpus));
                (self.cpu.containers.get(cid)?.sized && m.vcores > share).then_some(Member {
                    range: CpuRange {
                        min: share,
                        max: m.range.max,
                    },
                    ..m
                })
            })
            .collect();
        for r in reclaim(&lenders, need) {
            self.cpu_resize(r.container, r.to, now);
        }
    }

    /// One node's adaptive plan, carried out: decreases first, so the increases fit.
    fn cpu_round_node(&mut self, node: &NodeId, now: u64) {
        let Some(ids) = self.cpu.by_node.get(node) else {
            return;
        };
        let Some(sn) = self
            .sched
            .nodes()
            .slot(node)
            .and_then(|x| self.sched.nodes().get(x))
        else {
            return;
        };
        if self.conf.cpu.policy_of(&sn.partition) != CpuPolicy::Adaptive {
            return;
        }
        let Some((node_vcores, node_gpus)) = self.cpu_node_shape(node) else {
            return;
        };
        // The node's free GPUs are owed their proportional share: those CPUs stay free for
        // the GPU jobs that will land there, so no GPU is stranded by a grown neighbour.
        let free_gpus = u32::try_from(sn.free.get(spindle_common::resource::GPU)).unwrap_or(0);
        let owed = i64::from(proportional(node_vcores, node_gpus, free_gpus));
        let free = u32::try_from((sn.free.vcores - owed).max(0)).unwrap_or(u32::MAX);
        let mut leaves: Vec<scheduler::queue_tree::QueueIdx> = Vec::new();
        let mut members = Vec::new();
        for cid in ids {
            let Some(leaf) = self.sched.app(&cid.application_id()).map(|a| a.queue) else {
                continue;
            };
            let queue = leaves.iter().position(|l| *l == leaf).unwrap_or_else(|| {
                leaves.push(leaf);
                leaves.len() - 1
            });
            let Some(member) = self.cpu_member(cid, queue, now) else {
                continue;
            };
            let share = proportional(node_vcores, node_gpus, member.gpus);
            members.push(member.guarantee(share));
        }
        let rooms: Vec<QueueRoom> = leaves.iter().map(|l| self.cpu_queue_room(*l)).collect();
        let mut plan = plan_node(&members, free, &rooms);
        plan.sort_by_key(|r| r.to > r.from);
        for r in plan {
            self.cpu_resize(r.container, r.to, now);
        }
    }

    /// A live ranged container as the plan sees it (in the plan's queue `queue`): movable
    /// once sized, running and not resized within the resize interval.
    fn cpu_member(&self, cid: &ContainerId, queue: usize, now: u64) -> Option<Member> {
        let (s, c) = (self.cpu.containers.get(cid)?, self.containers.get(cid)?);
        let resting = s.last_resize > 0
            && now
                < s.last_resize
                    .saturating_add(self.conf.cpu.resize_interval_ms);
        Some(Member {
            id: *cid,
            gpus: s.gpus,
            vcores: u32::try_from(c.resource.vcores.max(0)).unwrap_or(0),
            range: s.range,
            prediction: self.cpu_prediction(cid, s, now),
            movable: s.sized && !resting && c.state == RmContainerState::RUNNING,
            queue,
        })
    }

    /// A node's CPUs and GPUs (at least one).
    fn cpu_node_shape(&self, node: &NodeId) -> Option<(u32, u32)> {
        let n = self
            .sched
            .nodes()
            .slot(node)
            .and_then(|x| self.sched.nodes().get(x))?;
        let gpus = n.total.get(spindle_common::resource::GPU).max(1);
        Some((
            u32::try_from(n.total.vcores.max(0)).unwrap_or(u32::MAX),
            u32::try_from(gpus).unwrap_or(u32::MAX),
        ))
    }

    /// A container's prediction: its declared table with what its AM measured over it; with
    /// neither (fewer than two measured points), explored until `explore-ms` after its
    /// grant, then left where it is.
    fn cpu_prediction(&self, cid: &ContainerId, s: &SizedContainer, now: u64) -> Prediction {
        let reported = self.cpu.reported.get(&cid.application_id());
        let points = reported.map_or(0, BTreeMap::len);
        if !s.table.is_empty() || points >= 2 {
            let mut curve = s.table.clone();
            if let Some(r) = reported {
                curve.0.extend(r.iter().map(|(k, m)| (*k, m.mean)));
            }
            return Prediction::Curve(curve);
        }
        if now < s.granted_at.saturating_add(self.conf.cpu.explore_ms) {
            Prediction::Explore
        } else {
            Prediction::Unknown
        }
    }

    /// What a leaf may gain (its path's maxima below the root) and give of vcores. It may give any
    /// core its containers hold above their floors (the plan's minima: the CPUs of their
    /// GPU-proportional throughput): a queue's guarantee is what it can get when it asks,
    /// and what a ranged GPU container asks of CPUs is its share at grant, which is called
    /// back from the node's borrowers at once ([`reclaim`]). A guarantee in vcores would
    /// forbid every move between queues on a cluster whose CPUs are mostly on CPU-only
    /// nodes (each queue's vcores guarantee counts them all), which is where most jobs
    /// meet: Philly's eleven queues share nodes.
    fn cpu_queue_room(&self, leaf: scheduler::queue_tree::QueueIdx) -> QueueRoom {
        let tree = self.sched.tree();
        // The root is left out: its maximum is the cluster, which free cores on a node
        // already bound, and a core moved between two queues leaves its use unchanged.
        let grow = tree
            .path_up(leaf)
            .filter(|q| tree.queues[*q].parent.is_some())
            .map(|q| {
                let queue = &tree.queues[q];
                queue.maximum.vcores - queue.used.vcores
            })
            .min()
            .unwrap_or(0);
        QueueRoom {
            grow: u32::try_from(grow.max(0)).unwrap_or(u32::MAX),
            give: u32::MAX,
        }
    }

    /// The vcores `app` may add on `node`: the node's free ones (none while it drains) and
    /// every queue's room up its path.
    fn cpu_room(&self, app: &ApplicationId, node: &NodeId) -> i64 {
        let free = self
            .sched
            .nodes()
            .slot(node)
            .and_then(|s| self.sched.nodes().get(s))
            .filter(|n| !n.draining)
            .map_or(0, |n| n.free.vcores);
        let Some(leaf) = self.sched.app(app).map(|a| a.queue) else {
            return 0;
        };
        let tree = self.sched.tree();
        tree.path_up(leaf)
            .map(|q| tree.queues[q].maximum.vcores - tree.queues[q].used.vcores)
            .fold(free, i64::min)
            .max(0)
    }

    /// Resizes a container's vcores toward `to`: an increase as far as its node and queues
    /// have room (the rest is left for a later round).
    fn cpu_resize(&mut self, cid: ContainerId, to: u32, now: u64) {
        let Some(c) = self.containers.get(&cid).filter(|c| c.is_live()) else {
            return;
        };
        let from = c.resource.vcores;
        let mut to = i64::from(to);
        if to > from {
            to = to.min(from + self.cpu_room(&cid.application_id(), &c.node));
        }
        if from == to {
            return;
        }
        let mut target = c.resource.clone();
        target.vcores = to;
        let undelivered = self
            .apps
            .get(&cid.application_id())
            .and_then(App::current_attempt)
            .is_some_and(|a| a.to_deliver.contains(&cid));
        if undelivered {
            // Sized before its AM has seen it: it is handed over at this size, version 0.
            let app = cid.application_id();
            let node = c.node.clone();
            let old = c.resource.clone();
            self.sched.recharge(&app, &node, &old, &target);
            if let Some(rc) = self.containers.get_mut(&cid) {
                rc.resource = target;
            }
            self.changed();
            return;
        }
        let kind = if to > from {
            UpdateKind::IncreaseResource
        } else {
            UpdateKind::DecreaseResource
        };
        self.resize_container(&cid.attempt_id, &cid, kind, target, now);
        self.cpu.counters.resizes += 1;
        self.cpu.counters.cores_moved += from.abs_diff(to);
        if let Some(s) = self.cpu.containers.get_mut(&cid) {
            s.last_resize = now.max(1);
        }
        if let Some(att) = self
            .apps
            .get(&cid.application_id())
            .and_then(App::current_attempt)
        {
            self.effects.push(Effect::ContainersAllocated(att.id));
        }
    }
}

/// The GPU-proportional share of a container of `gpus` GPUs on a node of `vcores` CPUs and
/// `node_gpus` GPUs.
fn proportional(vcores: u32, node_gpus: u32, gpus: u32) -> u32 {
    let share = u64::from(vcores) * u64::from(gpus) / u64::from(node_gpus.max(1));
    u32::try_from(share).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::Measured;

    #[test]
    fn a_point_averages_its_reports_so_one_short_window_does_not_move_it() {
        let mut m = Measured::default();
        m.add(50.0);
        assert_eq!(m.mean, 50.0, "the first report is the point");
        // A paced job's 1-s window that lost two chunks to a resize: 4% low alone, under
        // the 2% the plan counts as noise once averaged with the windows around it.
        for v in [50.0, 48.0, 50.0, 51.0] {
            m.add(v);
        }
        assert!((m.mean - 49.8).abs() < 1e-9, "{}", m.mean);
        // The newest weigh most once more than REPORTS_AVERAGED came: a job that changed
        // is followed.
        for _ in 0..40 {
            m.add(60.0);
        }
        assert!(m.mean > 59.0, "{}", m.mean);
    }
}
