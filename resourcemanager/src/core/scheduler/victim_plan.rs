//! The victim planner: for one preemptor and a pool of candidates (cheapest first), the
//! fewest victims after which its gang fits, found on a scratch index of the nodes that
//! matter, and the bound that drops a preemptor no victim set can reach before any plan is
//! tried. Per round, each candidate's reach (its size and its hosts' free room) is worked
//! out once, however many preemptors and tries look at it.
//!
//! Must not: choose who preempts, or whom a queue may give ([`super::victims`] does).

use super::gang::{plan, Plan};
use super::victims::{Candidate, Hold, PreemptionConf, Preemptor, Reason};
use super::*;

/// Plans tried while adding victims, and while pruning them, per preemptor.
const MAX_ADD_PLANS: usize = 24;
const MAX_PRUNE_PLANS: usize = 16;

/// Per round, the most each candidate could add to a plan: its size and the free room of
/// the host of each of its containers (a host counted once per container on it). Worked out
/// once a round, when first asked (the scheduler does not change during a round).
#[derive(Default)]
pub(super) struct Reach {
    of: Vec<Option<Resource>>,
}

impl Reach {
    fn of(&mut self, s: &Scheduler, cands: &[Candidate], i: usize) -> &Resource {
        if self.of.len() <= i {
            self.of.resize(cands.len().max(i + 1), None);
        }
        self.of[i].get_or_insert_with(|| {
            let c = &cands[i];
            let mut most = c.total.clone();
            for (_, id, _) in &c.containers {
                if let Some(r) = s.nodes.slot(id).and_then(|slot| s.room_of(slot)) {
                    most.add_assign(&r);
                }
            }
            most
        })
    }
}

impl Scheduler {
    /// Whether the preemptor may take over nodes another waiting gang holds: that gang is
    /// one the preemptor could take from (a queue over its guarantee, a lower rank).
    fn may_steal(
        &self,
        holder: &gang::Holder,
        p: &Preemptor,
        reason: Reason,
        conf: &PreemptionConf,
    ) -> bool {
        let Some(h) = self.apps.get(&holder.0) else {
            return true;
        };
        match reason {
            Reason::Guarantee => {
                let none = vec![Resource::zero(); self.tree.queues.len()];
                h.queue != p.leaf
                    && !self.giving_path(h.queue, p.leaf).is_empty()
                    && self.may_give(h.queue, p.leaf, &Resource::zero(), &none, &none, conf)
            }
            _ => {
                let probe = Candidate {
                    app: holder.0,
                    gang: Some(holder.1.clone()),
                    containers: Vec::new(),
                    total: Resource::zero(),
                    lost_gpu_ms: 0,
                    shrink: None,
                    whole_app: false,
                };
                self.outranks(p, &probe, reason, conf)
            }
        }
    }

    /// The preemptors of `waiting` some victim set could serve: each is dropped whose need
    /// is beyond the free room of every node and all that the leaves it may take from hold
    /// (`held`: per leaf, the live containers a round may take, not under notice; its
    /// applications whole included). A bound from above, before any candidate is built:
    /// every plan [`Self::pick_victims`] could find is within it, so what is dropped would
    /// have found none. In a full cluster whose leaves with preemptors can reach only a few
    /// hundred containers, that is every round, which then costs what the leaves hold
    /// rather than every candidate's reach.
    pub fn within_reach(
        &self,
        conf: &PreemptionConf,
        waiting: Vec<Preemptor>,
        held: &BTreeMap<QueueIdx, Resource>,
    ) -> Vec<Preemptor> {
        let mut free: Option<Resource> = None;
        let giving = self.giving_queues(conf);
        waiting
            .into_iter()
            .filter(|p| {
                let free = free.get_or_insert_with(|| self.nodes.free_everywhere());
                let mut most = free.clone();
                if self.under_guarantee_with(p) {
                    for (vl, r) in held {
                        if *vl != p.leaf && self.gives_freely(*vl, p.leaf, &giving) {
                            most.add_assign(r);
                        }
                    }
                }
                let intra = conf.intra_queue
                    && !self.tree.queues[p.leaf].spec.intra_queue_disable_preemption;
                if intra {
                    if let Some(r) = held.get(&p.leaf) {
                        most.add_assign(r);
                    }
                }
                p.need.fits_in(&most)
            })
            .collect()
    }

    /// The nodes whose free room takes at least the smallest of `p`'s units: those come
    /// from the index's buckets (a walk of every node only for a unit below the minimum
    /// allocation, which the buckets do not hold). Free room elsewhere takes no member.
    pub(super) fn room_slots(&self, p: &Preemptor) -> Vec<usize> {
        let smallest = p
            .units
            .iter()
            .map(|u| &u.cap)
            .min_by_key(|c| (c.get(spindle_common::resource::GPU), c.memory_mb, c.vcores));
        match smallest {
            Some(u)
                if u.memory_mb >= self.min_alloc.memory_mb && u.vcores >= self.min_alloc.vcores =>
            {
                self.nodes.taking_anywhere(u).collect()
            }
            Some(u) => self
                .nodes
                .slots()
                .filter(|s| self.nodes.get(*s).is_some_and(|n| u.fits_in(&n.free)))
                .collect(),
            None => Vec::new(),
        }
    }

    /// Whether `p`'s need is beyond the most a plan over `pool` could ever see free: the
    /// room of `room` and every candidate's [`Reach`] (a bound from above). Then no victim
    /// set can serve it, and neither the pool is sorted nor a scratch index built.
    pub(super) fn beyond_reach(
        &self,
        p: &Preemptor,
        room: &[usize],
        pool: &[usize],
        cands: &[Candidate],
        reach: &mut Reach,
    ) -> bool {
        let mut most = Resource::zero();
        for r in room.iter().filter_map(|s| self.room_of(*s)) {
            most.add_assign(&r);
        }
        for i in pool {
            most.add_assign(reach.of(self, cands, *i));
        }
        !p.need.fits_in(&most)
    }

    /// A node's free room, none below zero.
    fn room_of(&self, slot: usize) -> Option<Resource> {
        self.nodes.get(slot).map(|n| n.free.clamp_non_negative())
    }

    /// Victims for one preemptor from `pool` (cheapest first): added until its gang fits on
    /// what is free plus what they free, then pruned (dearest first) while it still fits.
    /// Returns the victims and the nodes the plan uses.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn pick_victims(
        &self,
        p: &Preemptor,
        room: &[usize],
        pool: &[usize],
        cands: &[Candidate],
        reason: Reason,
        given: &[Resource],
        conf: &PreemptionConf,
    ) -> Option<(Vec<usize>, Hold, Vec<Resource>)> {
        // A scratch index of the nodes that matter: free room now, or a candidate on them.
        let holder = p.gang.as_ref().map(|g| (p.app, g.clone()));
        let mut slots = room.to_vec();
        let hosts = pool.iter().flat_map(|i| cands[*i].containers.iter());
        slots.extend(hosts.filter_map(|(_, id, _)| self.nodes.slot(id)));
        // In id order, as a walk adds them: the scratch index's slots break a plan's ties.
        slots.sort_unstable_by(|a, b| {
            let id = |s: &usize| self.nodes.get(*s).map(|n| &n.id);
            id(a).cmp(&id(b))
        });
        slots.dedup();
        let usable = slots.into_iter().filter_map(|s| {
            let n = self.nodes.get(s)?;
            let held_by_other = self
                .nodes
                .reserved_by(s)
                .is_some_and(|h| Some(h) != holder.as_ref() && !self.may_steal(h, p, reason, conf));
            (n.schedulable && !held_by_other).then_some(n)
        });
        let mut idx = NodeIndex::scratch(self.min_alloc.clone(), usable);
        let fits = |idx: &NodeIndex| -> Option<Hold> {
            if !p.need.fits_in(&idx.cluster_free()) {
                return None;
            }
            let free = |s: usize| idx.get(s).map(|n| n.free.clone());
            match plan(&p.app, idx, &p.units, &p.params, &free, &|_| true) {
                Plan::Fits(assign) => Some(
                    super::gang::per_node(&assign)
                        .into_iter()
                        .filter_map(|(s, need)| idx.get(s).map(|n| (n.id.clone(), need)))
                        .collect(),
                ),
                Plan::Short { .. } => None,
            }
        };
        let apply = |idx: &mut NodeIndex, c: &Candidate, free: bool| {
            for (_, node, r) in &c.containers {
                if let Some(s) = idx.slot(node) {
                    if free {
                        idx.release(s, r);
                    } else {
                        idx.charge(s, r);
                    }
                }
            }
        };
        let mut chosen: Vec<usize> = Vec::new();
        let mut claims = given.to_vec();
        // What the victims must free: the need beyond the room free now.
        let beyond_free = p.need.minus(&idx.cluster_free()).clamp_non_negative();
        let mut left = beyond_free.clone();
        // Nodes other gangs held that it may take over may be all it needs.
        if let Some(nodes) = fits(&idx) {
            return Some((Vec::new(), nodes, given.to_vec()));
        }
        let mut plans = 0;
        let mut placed: Option<Hold> = None;
        for &i in pool {
            let c = &cands[i];
            if reason == Reason::Guarantee {
                let claim = c.claim(&left);
                let Some(vl) = self.apps.get(&c.app).map(|a| a.queue) else {
                    continue;
                };
                if !self.may_give(vl, p.leaf, &claim, &claims, given, conf) {
                    continue;
                }
                for q in self.giving_path(vl, p.leaf) {
                    claims[q].add_assign(&claim);
                }
                left = left.minus(&claim).clamp_non_negative();
            }
            apply(&mut idx, c, true);
            chosen.push(i);
            if plans < MAX_ADD_PLANS && p.need.fits_in(&idx.cluster_free()) {
                plans += 1;
                if let Some(nodes) = fits(&idx) {
                    placed = Some(nodes);
                    break;
                }
            }
        }
        let mut nodes = placed?;
        // Prune, dearest first: a victim the gang can fit without stays.
        for (prunes, pos) in (0..chosen.len()).rev().enumerate() {
            if prunes >= MAX_PRUNE_PLANS || chosen.len() == 1 {
                break;
            }
            let i = chosen[pos];
            apply(&mut idx, &cands[i], false);
            match fits(&idx) {
                Some(n) => {
                    chosen.remove(pos);
                    nodes = n;
                }
                None => apply(&mut idx, &cands[i], true),
            }
        }
        let mut claims = given.to_vec();
        if reason == Reason::Guarantee {
            // Claims again for the victims that stayed, in order: each must still be allowed.
            let mut left = beyond_free;
            for &i in &chosen {
                let c = &cands[i];
                let claim = c.claim(&left);
                let vl = self.apps.get(&c.app)?.queue;
                if !self.may_give(vl, p.leaf, &claim, &claims, given, conf) {
                    return None;
                }
                for q in self.giving_path(vl, p.leaf) {
                    claims[q].add_assign(&claim);
                }
                left = left.minus(&claim).clamp_non_negative();
            }
        }
        Some((chosen, nodes, claims))
    }
}
