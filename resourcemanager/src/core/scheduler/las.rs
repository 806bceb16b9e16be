//! Attained service and the `las` ordering (Tiresias's discretized 2D-LAS): every
//! application accrues GPU-milliseconds while it holds GPUs (vcore-milliseconds on a cluster
//! without GPUs); a `las` leaf orders its applications by level (the thresholds crossed),
//! FIFO within a level, so short jobs finish first without anyone declaring a length. A job
//! that has waited `promotion-factor` times its running time goes back to the first level,
//! so nothing starves. Time comes from [`Scheduler::set_now`]; nothing here reads a clock.

use super::*;
use spindle_common::resource::GPU;

/// What an application has received so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Service {
    /// GPU-milliseconds attained (vcore-milliseconds on a cluster without GPUs).
    pub gpu_ms: u64,
    /// Milliseconds during which it held at least one GPU.
    pub ran_ms: u64,
    /// Accrued up to this time.
    pub at: u64,
    /// When it last held GPUs (its submission, before it first ran).
    pub last_ran: u64,
    /// Its `las` level (0 first).
    pub level: u8,
}

impl Scheduler {
    /// The current time, as the caller's clock gives it (never goes back).
    pub fn set_now(&mut self, now: u64) {
        self.now = self.now.max(now);
    }

    pub fn now(&self) -> u64 {
        self.now
    }

    /// What one application's usage weighs per millisecond: its GPUs, or its vcores where the
    /// cluster has no GPUs.
    fn weight(&self, used: &Resource) -> u64 {
        weight(self.nodes.cluster.get(GPU) > 0, used)
    }

    /// Brings an application's attained service up to now; called before its usage changes.
    pub(super) fn accrue(&mut self, id: &ApplicationId) {
        let now = self.now;
        let gpus = self.nodes.cluster.get(GPU) > 0;
        let Some(a) = self.apps.get_mut(id) else {
            return;
        };
        let w = weight(gpus, &a.used);
        let dt = now.saturating_sub(a.service.at);
        if w > 0 && dt > 0 {
            a.service.gpu_ms = a.service.gpu_ms.saturating_add(w.saturating_mul(dt));
            a.service.ran_ms = a.service.ran_ms.saturating_add(dt);
        }
        if w > 0 {
            a.service.last_ran = now;
        }
        a.service.at = now;
    }

    /// The GPU-milliseconds `id` has attained up to now.
    pub fn attained(&self, id: &ApplicationId) -> u64 {
        self.apps.get(id).map_or(0, |a| {
            let dt = self.now.saturating_sub(a.service.at);
            a.service
                .gpu_ms
                .saturating_add(self.weight(&a.used).saturating_mul(dt))
        })
    }

    /// Keeps the indexes `refresh_levels` walks: when each application of a `las` leaf
    /// that holds GPUs crosses its next threshold, and when each waiting one is due for
    /// promotion. Called after its usage changed (its service accrued up to now).
    pub(super) fn las_track(&mut self, id: &ApplicationId) {
        if let Some(t) = self.las_cross_at.remove(id) {
            self.las_cross.remove(&(t, *id));
        }
        let Some(a) = self.apps.get(id) else { return };
        let spec = &self.tree.queues[a.queue].spec;
        if spec.ordering != OrderingPolicy::Las {
            return;
        }
        let w = self.weight(&a.used);
        if w > 0 {
            let next = spec
                .las
                .thresholds_gpu_s
                .iter()
                .map(|t| t.saturating_mul(1000))
                .find(|t| *t > a.service.gpu_ms);
            if let Some(next) = next {
                let at = a
                    .service
                    .at
                    .saturating_add((next - a.service.gpu_ms).div_ceil(w));
                self.las_cross.insert((at, *id));
                self.las_cross_at.insert(*id, at);
            }
        } else if spec.las.promotion_factor > 0.0 && a.service.ran_ms > 0 {
            let wait =
                (spec.las.promotion_factor * a.service.ran_ms as f64).min(u64::MAX as f64 / 4.0);
            let due = a.service.last_ran.saturating_add(wait as u64);
            self.las_promote.insert((due, *id));
        }
    }

    /// Applies what time brought to `las` leaves: applications that crossed a threshold move
    /// down a level, waiting ones due for promotion move back to the first.
    pub fn refresh_levels(&mut self) {
        let now = self.now;
        while let Some(&(at, id)) = self.las_cross.first() {
            if at > now {
                break;
            }
            self.las_cross.remove(&(at, id));
            self.las_cross_at.remove(&id);
            self.accrue(&id);
            self.relevel(&id);
            self.las_track(&id);
        }
        while let Some(&(due, id)) = self.las_promote.first() {
            if due > now {
                break;
            }
            self.las_promote.remove(&(due, id));
            let Some(a) = self.apps.get(&id) else {
                continue;
            };
            let spec = &self.tree.queues[a.queue].spec.las;
            let waiting = self.weight(&a.used) == 0 && !a.asks.is_empty();
            let starved = spec.promotion_factor > 0.0
                && a.service.ran_ms > 0
                && now.saturating_sub(a.service.last_ran) as f64
                    >= spec.promotion_factor * a.service.ran_ms as f64;
            if waiting && starved {
                if let Some(a) = self.apps.get_mut(&id) {
                    // Starved: it starts over at the first level.
                    a.service.gpu_ms = 0;
                    a.service.ran_ms = 0;
                }
                self.relevel(&id);
            }
        }
    }

    fn relevel(&mut self, id: &ApplicationId) {
        let Some(a) = self.apps.get(id) else { return };
        let level = self.tree.queues[a.queue].spec.las.level(a.service.gpu_ms);
        if level != a.service.level {
            if let Some(a) = self.apps.get_mut(id) {
                a.service.level = level;
            }
            self.refresh_order(id);
        }
    }
}

/// What an application's service accrues per millisecond: its GPUs on a cluster with GPUs
/// (`gpus`), its cores on one without.
fn weight(gpus: bool, used: &Resource) -> u64 {
    if gpus {
        used.get(GPU).max(0) as u64
    } else {
        used.vcores.max(0) as u64
    }
}
