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
        if self.nodes.cluster.get(GPU) > 0 {
            used.get(GPU).max(0) as u64
        } else {
            used.vcores.max(0) as u64
        }
    }

    /// Brings an application's attained service up to now; called before its usage changes.
    pub(super) fn accrue(&mut self, id: &ApplicationId) {
        let now = self.now;
        let Some(w) = self.apps.get(id).map(|a| self.weight(&a.used)) else {
            return;
        };
        if let Some(a) = self.apps.get_mut(id) {
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

    /// Advances the attained service of every application in a `las` leaf, applies
    /// promotions and moves the applications whose level changed.
    pub fn refresh_levels(&mut self) {
        let leaves: Vec<QueueIdx> = self
            .tree
            .iter()
            .filter(|(_, q)| q.is_leaf() && q.spec.ordering == OrderingPolicy::Las)
            .map(|(i, _)| i)
            .collect();
        for leaf in leaves {
            let spec = self.tree.queues[leaf].spec.las.clone();
            let ids: Vec<ApplicationId> = self.tree.queues[leaf].apps.iter().copied().collect();
            for id in ids {
                self.accrue(&id);
                let now = self.now;
                let Some(a) = self.apps.get_mut(&id) else {
                    continue;
                };
                let waiting = a.used.get(GPU) == 0 && !a.asks.is_empty();
                if waiting
                    && spec.promotion_factor > 0.0
                    && a.service.ran_ms > 0
                    && now.saturating_sub(a.service.last_ran) as f64
                        >= spec.promotion_factor * a.service.ran_ms as f64
                {
                    // Starved: it starts over at the first level.
                    a.service.gpu_ms = 0;
                    a.service.ran_ms = 0;
                }
                let level = spec.level(a.service.gpu_ms);
                if level != a.service.level {
                    a.service.level = level;
                    self.refresh_order(&id);
                }
            }
        }
    }
}
