//! Who waits for the preemption monitor: each leaf's first application that free room
//! cannot serve ([`Preemptor`]), what it waits with, and whether taking room back for it
//! restores a guarantee. A plain preemptor under its guarantee asks back only the
//! containers that each start below it, the last one crossing it (YARN takes whole
//! containers while any of a guarantee is unmet); a gang asks back all of itself.
//!
//! Must not: choose victims (`victims` does).

use super::gang::{GangParams, Unit};
use super::*;
use smallvec::SmallVec;

const EPS: f64 = 1e-9;

/// What waits: the first application of a leaf that cannot be placed.
pub struct Preemptor {
    pub(super) app: ApplicationId,
    pub(super) gang: Option<String>,
    pub(super) leaf: QueueIdx,
    /// What it waits with: each ask and how many containers of it.
    pub(super) asks: Vec<(AskKey, u32)>,
    /// One per container, built only for the preemptors a round serves.
    pub(super) units: Vec<Unit>,
    pub(super) params: GangParams,
    pub(super) need: Resource,
    /// A plain preemptor's last container, which may take its leaf past its guarantee (as
    /// YARN takes whole containers while any of a guarantee is unmet); zero for a gang.
    pub(super) crossing: Resource,
}

/// The queues from a plain preemptor's leaf up (not the root): what each holds, growing as
/// its containers are counted in, and its guarantee as a share of the cluster.
struct GuaranteeRoom {
    levels: SmallVec<[(Resource, f64); 8]>,
}

impl GuaranteeRoom {
    /// Whether every level, with `extra` more, is below its (non-zero) guarantee.
    fn below_with(&self, extra: &Resource, s: &Scheduler) -> bool {
        self.levels
            .iter()
            .all(|(used, g)| *g > EPS && s.share(&used.plus(extra)) < g - EPS)
    }

    /// Whether every level is below its (non-zero) guarantee.
    fn below(&self, s: &Scheduler) -> bool {
        self.below_with(&Resource::zero(), s)
    }

    /// Counts in up to `n` containers of `cap`, each starting below every guarantee.
    /// Returns how many. A level's share only grows as containers are counted in, so the
    /// count is found by bisection: the first container that would start at or above a
    /// guarantee.
    fn take(&mut self, cap: &Resource, n: u32, s: &Scheduler) -> u32 {
        // Every container before `lo` starts below; the first that does not is at most `hi`.
        let (mut lo, mut hi) = (0u32, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.below_with(&cap.times(i64::from(mid)), s) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let took = lo;
        let add = cap.times(i64::from(took));
        for (used, _) in &mut self.levels {
            used.add_assign(&add);
        }
        took
    }
}

/// Preemptors one round tries (most under-served leaves first).
const MAX_PREEMPTORS_PER_ROUND: usize = 8;
/// At most this many plain containers one preemptor claims per round.
const MAX_PLAIN_UNITS: u32 = 64;

impl Scheduler {
    /// The first application of each leaf that waits for what free room cannot give, unless
    /// `busy(leaf)` (a claim of that leaf is still being honoured).
    pub fn preemptors(&self, busy: &dyn Fn(QueueIdx) -> bool) -> Vec<Preemptor> {
        let mut out = Vec::new();
        for (leaf, q) in self.tree.iter() {
            if !q.is_leaf() || busy(leaf) {
                continue;
            }
            for (_, _, id) in q.schedulable.iter().take(16) {
                let Some(a) = self.apps.get(id) else { continue };
                if let Some(p) = self.waiting_need(*id, a, leaf) {
                    out.push(p);
                    break;
                }
            }
        }
        out
    }

    /// What `a` waits with: a waiting gang that has been tried and did not fit, else its
    /// plain asks (up to [`MAX_PLAIN_UNITS`] containers). Only what it needs in all is
    /// summed here; its units are built for the few a round serves ([`Self::round_preemptors`]).
    fn waiting_need(&self, id: ApplicationId, a: &SchedApp, leaf: QueueIdx) -> Option<Preemptor> {
        let preemptor = |gang: Option<&String>, asks: Vec<(AskKey, u32)>, params: GangParams| {
            let need = asks.iter().fold(Resource::zero(), |acc, (k, n)| {
                a.asks.get(k).map_or(acc.clone(), |x| {
                    acc.plus(&x.capability.times(i64::from(*n)))
                })
            });
            let crossing = match (gang, asks.last()) {
                (None, Some((k, _))) => a.asks.get(k).map(|x| x.capability.clone()),
                _ => None,
            };
            Preemptor {
                app: id,
                gang: gang.cloned(),
                leaf,
                asks,
                units: Vec::new(),
                params,
                need,
                crossing: crossing.unwrap_or_default(),
            }
        };
        for (gid, g) in &a.gangs {
            if !g.phase.is_waiting() || g.missed_at.is_none() {
                continue;
            }
            let asks: Vec<(AskKey, u32)> = a
                .asks
                .iter()
                .filter(|(_, x)| x.gang.as_deref() == Some(gid) && x.any > 0)
                .map(|(k, x)| (*k, x.any.min(10_000)))
                .collect();
            if !asks.is_empty() {
                return Some(preemptor(Some(gid), asks, g.params.clone()));
            }
        }
        let mut asks: Vec<(AskKey, u32)> = Vec::new();
        let mut counted = 0;
        for (k, ask) in a.asks.iter().filter(|(_, x)| x.gang.is_none() && x.any > 0) {
            let n = ask.any.min(MAX_PLAIN_UNITS.saturating_sub(counted));
            if n > 0 {
                asks.push((*k, n));
                counted += n;
            }
        }
        // Under its guarantee, a leaf asks back only the containers that each start below
        // it (the last may cross it); otherwise the whole wait, for intra-queue preemption.
        let mut room = self.room_below_guarantee(leaf);
        if room.is_some() {
            let mut kept = Vec::new();
            for (k, n) in &asks {
                let Some(cap) = a.asks.get(k).map(|x| &x.capability) else {
                    continue;
                };
                let took = room.as_mut().map_or(0, |r| r.take(cap, *n, self));
                if took > 0 {
                    kept.push((*k, took));
                }
                if took < *n {
                    break;
                }
            }
            asks = kept;
        }
        (!asks.is_empty()).then(|| preemptor(None, asks, GangParams::default()))
    }

    /// What each queue from `leaf` up (not the root) holds and is guaranteed, when every one
    /// of them is below its guarantee: where a plain preemptor's containers may start.
    fn room_below_guarantee(&self, leaf: QueueIdx) -> Option<GuaranteeRoom> {
        let levels: SmallVec<[(Resource, f64); 8]> = self
            .tree
            .path_up(leaf)
            .filter(|q| *q != QueueIdx::ROOT)
            .map(|q| {
                let queue = &self.tree.queues[q];
                (queue.used.clone(), self.share(&queue.guaranteed))
            })
            .collect();
        let room = GuaranteeRoom { levels };
        room.below(self).then_some(room)
    }

    /// A preemptor's units, one per container it waits for, built once it is served.
    fn with_units(&self, mut p: Preemptor) -> Preemptor {
        if p.units.is_empty() {
            if let Some(a) = self.apps.get(&p.app) {
                p.units = p
                    .asks
                    .iter()
                    .filter_map(|(k, n)| a.asks.get(k).map(|x| (k, n, &x.capability)))
                    .flat_map(|(k, n, cap)| {
                        (0..*n).map(|_| Unit {
                            key: *k,
                            cap: cap.clone(),
                        })
                    })
                    .collect();
            }
        }
        p
    }

    /// Whether the preemptor's leaf, given its need, restores a guarantee on every level:
    /// it stays within it, or each of its containers but a plain preemptor's last starts
    /// below it (YARN takes whole containers while any of a guarantee is unmet).
    pub(super) fn under_guarantee_with(&self, p: &Preemptor) -> bool {
        let before_last = p.need.minus(&p.crossing);
        self.tree
            .path_up(p.leaf)
            .filter(|q| *q != QueueIdx::ROOT)
            .all(|q| {
                let queue = &self.tree.queues[q];
                let g = self.share(&queue.guaranteed);
                !queue.guaranteed.is_zero()
                    && (self.share(&queue.used.plus(&p.need)) <= g + EPS
                        || (!p.crossing.is_zero()
                            && self.share(&queue.used.plus(&before_last)) < g - EPS))
            })
    }

    /// The preemptors a round serves: the most under-served leaves first, and a bounded
    /// number a round, so a round's cost stays flat however many leaves wait (the rest are
    /// served by later rounds). Idempotent.
    pub fn round_preemptors(&self, waiting: Vec<Preemptor>) -> Vec<Preemptor> {
        // Each leaf's gap once (not once per comparison), then the few served, in order.
        let mut keyed: Vec<(f64, QueueIdx, Preemptor)> = waiting
            .into_iter()
            .map(|p| {
                let q = &self.tree.queues[p.leaf];
                (self.share(&q.used) - self.share(&q.guaranteed), p.leaf, p)
            })
            .collect();
        let order = |a: &(f64, QueueIdx, Preemptor), b: &(f64, QueueIdx, Preemptor)| {
            a.0.total_cmp(&b.0).then(a.1.cmp(&b.1))
        };
        if keyed.len() > MAX_PREEMPTORS_PER_ROUND {
            keyed.select_nth_unstable_by(MAX_PREEMPTORS_PER_ROUND - 1, order);
            keyed.truncate(MAX_PREEMPTORS_PER_ROUND);
        }
        keyed.sort_by(order);
        keyed
            .into_iter()
            .map(|(_, _, p)| self.with_units(p))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::queue_conf::SchedulerConf;
    use proptest::prelude::*;
    use spindle_common::resource::GPU;

    /// One node of 64 GB, 64 vcores and 8 GPUs: the cluster shares are taken of.
    fn sched() -> Scheduler {
        let mut s = Scheduler::new(SchedulerConf::single_default_queue(), Resource::new(128, 1));
        s.add_node(
            NodeId::new("n1", 1),
            "/r1".into(),
            Resource::new(65_536, 64).with(GPU, 8),
            Resource::zero(),
        );
        s
    }

    /// The count taken one container at a time, as a reference for the bisection.
    fn take_one_by_one(room: &mut GuaranteeRoom, cap: &Resource, n: u32, s: &Scheduler) -> u32 {
        let mut took = 0;
        while took < n && room.below(s) {
            for (used, _) in &mut room.levels {
                used.add_assign(cap);
            }
            took += 1;
        }
        took
    }

    proptest! {
        #[test]
        fn bisection_takes_as_many_as_one_by_one(
            levels in prop::collection::vec((0i64..70_000, 0i64..70, 0i64..9, 0.0f64..1.2), 1..4),
            cap in (0i64..9_000, 0i64..9, 0i64..3),
            n in 0u32..80,
        ) {
            let s = sched();
            let levels: SmallVec<[(Resource, f64); 8]> = levels
                .into_iter()
                .map(|(m, v, g, share)| (Resource::new(m, v).with(GPU, g), share))
                .collect();
            let cap = Resource::new(cap.0, cap.1).with(GPU, cap.2);
            let mut fast = GuaranteeRoom { levels: levels.clone() };
            let mut slow = GuaranteeRoom { levels };
            prop_assert_eq!(fast.take(&cap, n, &s), take_one_by_one(&mut slow, &cap, n, &s));
            prop_assert_eq!(fast.levels, slow.levels);
        }
    }
}
