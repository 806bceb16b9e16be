//! Elastic gangs: a gang that runs at any legal size between a minimum and a maximum
//! ([`ElasticSpec`]), its speed model (a throughput table by size, given at submission or
//! learned from the AM's reports), and the decisions of the leaf's `elastic-policy`.
//!
//! Under `doubling` (the dynamic-scheduling study's heuristic) a round, every
//! `spindle.elastic.monitoring-interval-ms`, looks at each such leaf: when the work waiting
//! there (elastic jobs' minimums, rigid gangs and plain asks) needs more GPUs than are free,
//! running elastic jobs shrink, one legal step at a time, the one losing the least predicted
//! time per GPU freed first; otherwise the free GPUs are handed out in doublings, each to the
//! job with the best predicted time saved per added GPU. No job is resized more often than
//! `spindle.elastic.resize-interval-ms`, and a grow is made only when it is predicted to save
//! more than a restart costs. Pure: the round returns [`Resize`]s; growth is placed here (the
//! members are charged like any placement), shrinking is carried out by the lifecycle layer
//! through the preemption protocol's notices.

use std::collections::BTreeMap;

use spindle_common::{ApplicationId, ContainerId, Resource};

use super::queue_tree::QueueIdx;
use super::{AskKey, Placement, Scheduler};

/// The legal sizes of an elastic gang.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SizeRule {
    /// 1, 2, 4, 8, ...
    #[default]
    PowerOfTwo,
    /// Multiples of k (k >= 1).
    Multiple(u32),
    /// Any count.
    Any,
}

impl SizeRule {
    pub fn legal(&self, n: u32) -> bool {
        match self {
            Self::PowerOfTwo => n.is_power_of_two(),
            Self::Multiple(k) => *k > 0 && n > 0 && n.is_multiple_of(*k),
            Self::Any => n > 0,
        }
    }
}

/// What the AM declared of an elastic gang.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ElasticSpec {
    pub min: u32,
    pub max: u32,
    pub rule: SizeRule,
    /// Throughput by member count (any unit), as given at submission.
    pub throughput: BTreeMap<u32, f64>,
}

impl ElasticSpec {
    /// The legal sizes in `[min, max]`, ascending.
    pub fn sizes(&self) -> Vec<u32> {
        match self.rule {
            SizeRule::PowerOfTwo => (0..32)
                .map(|i| 1u32 << i)
                .filter(|n| (self.min..=self.max).contains(n))
                .collect(),
            SizeRule::Multiple(k) if k > 0 => (self.min.div_ceil(k).max(1)..=self.max / k)
                .map(|i| i * k)
                .collect(),
            SizeRule::Multiple(_) => vec![],
            SizeRule::Any => (self.min.max(1)..=self.max).collect(),
        }
    }

    pub fn legal(&self, n: u32) -> bool {
        (self.min..=self.max).contains(&n) && self.rule.legal(n)
    }

    /// The smallest legal size (the effective minimum), without listing them all.
    pub fn least(&self) -> Option<u32> {
        let n = match self.rule {
            SizeRule::PowerOfTwo => self.min.max(1).checked_next_power_of_two()?,
            SizeRule::Multiple(k) if k > 0 => self.min.max(1).div_ceil(k).checked_mul(k)?,
            SizeRule::Multiple(_) => return None,
            SizeRule::Any => self.min.max(1),
        };
        (n <= self.max).then_some(n)
    }

    /// The size one step up from `w`: the smallest legal size at least double (the study's
    /// doubling), else the largest legal size above `w`.
    pub fn up(&self, w: u32) -> Option<u32> {
        let sizes = self.sizes();
        sizes
            .iter()
            .copied()
            .find(|s| *s >= w.saturating_mul(2))
            .or_else(|| sizes.iter().copied().rfind(|s| *s > w))
    }

    /// The size one step down from `w`: the largest legal size at most half, else the
    /// smallest legal size below `w` (never below the minimum).
    pub fn down(&self, w: u32) -> Option<u32> {
        let sizes = self.sizes();
        sizes
            .iter()
            .copied()
            .rfind(|s| *s <= w / 2)
            .or_else(|| sizes.iter().copied().find(|s| *s < w))
    }

    /// The largest legal size not above `n`.
    pub fn at_most(&self, n: u32) -> Option<u32> {
        self.sizes().into_iter().rfind(|s| *s <= n)
    }
}

/// An elastic gang's life once granted.
#[derive(Debug, Clone, PartialEq)]
pub struct Elastic {
    pub spec: ElasticSpec,
    /// Throughput the AM reported, by size (replaces the given table's entry).
    pub learned: BTreeMap<u32, f64>,
    /// The member shape and the ask key its members carry.
    pub cap: Resource,
    pub key: AskKey,
    /// When it was last resized (0: never; the grant is not a resize, so a job granted
    /// its minimum may grow at the next round).
    pub last_resize: u64,
    pub resizes: u32,
    /// A shrink in progress: the size it goes down to.
    pub shrinking: Option<u32>,
    /// When the AM last declined an offer (no offer again within the resize interval).
    pub declined_at: Option<u64>,
    /// Work done by the speed model (throughput units), and when it was last brought up
    /// to date.
    pub work: f64,
    pub accrued_at: u64,
    /// The AM's progress, 0..=1 (YARN's `progress`: the fraction of the job's work done).
    pub progress: f64,
}

impl Elastic {
    pub fn new(spec: ElasticSpec, cap: Resource, key: AskKey, now: u64) -> Self {
        Self {
            spec,
            learned: BTreeMap::new(),
            cap,
            key,
            last_resize: 0,
            resizes: 0,
            shrinking: None,
            declined_at: None,
            work: 0.0,
            accrued_at: now,
            progress: 0.0,
        }
    }

    /// Per-member throughput at the largest legal size over that at the smallest (1: linear
    /// scaling; 1 when the range has one size). None while nothing of its speed is known
    /// (neither given nor reported).
    pub fn efficiency(&self) -> Option<f64> {
        let known = |n: &f64| n.is_finite() && *n > 0.0;
        if !self
            .learned
            .values()
            .chain(self.spec.throughput.values())
            .any(known)
        {
            return None;
        }
        let (Some(lo), Some(hi)) = (self.spec.least(), self.spec.at_most(self.spec.max)) else {
            return Some(1.0);
        };
        let per = |n: u32| self.speed(n) / f64::from(n);
        let base = per(lo);
        Some(if hi > lo && known(&base) {
            per(hi) / base
        } else {
            1.0
        })
    }

    /// Throughput at `w` members: reported, else given, else interpolated between the
    /// nearest known sizes (scaled per member beyond them), else linear in `w`.
    pub fn speed(&self, w: u32) -> f64 {
        let known = |n: u32| {
            self.learned
                .get(&n)
                .or_else(|| self.spec.throughput.get(&n))
                .copied()
                .filter(|t| t.is_finite() && *t > 0.0)
        };
        if let Some(t) = known(w) {
            return t;
        }
        let keys: Vec<u32> = self
            .learned
            .keys()
            .chain(self.spec.throughput.keys())
            .copied()
            .filter(|n| known(*n).is_some())
            .collect();
        let below = keys.iter().copied().filter(|n| *n < w).max();
        let above = keys.iter().copied().filter(|n| *n > w).min();
        let w = f64::from(w);
        match (below, above) {
            (Some(a), Some(b)) => {
                let (ta, tb) = (known(a).unwrap_or(1.0), known(b).unwrap_or(1.0));
                let (a, b) = (f64::from(a), f64::from(b));
                ta + (tb - ta) * (w - a) / (b - a)
            }
            (Some(a), None) => known(a).unwrap_or(1.0) * w / f64::from(a),
            (None, Some(b)) => known(b).unwrap_or(1.0) * w / f64::from(b),
            (None, None) => w,
        }
    }

    /// The work left (throughput units), from the work done and the AM's progress; None
    /// while the AM has reported no progress.
    pub fn remaining(&self) -> Option<f64> {
        if self.progress >= 1.0 {
            return Some(0.0);
        }
        (self.progress > 1e-6 && self.work > 0.0)
            .then(|| self.work * (1.0 - self.progress) / self.progress)
    }

    pub(super) fn accrue(&mut self, size: u32, now: u64) {
        let dt = now.saturating_sub(self.accrued_at) as f64 / 1000.0;
        if size > 0 {
            self.work += self.speed(size) * dt;
        }
        self.accrued_at = now;
    }
}

/// The elastic policy's settings (`spindle.elastic.*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElasticConf {
    pub monitoring_interval_ms: u64,
    pub resize_interval_ms: u64,
    pub restart_cost_ms: u64,
    pub shrink_deadline_ms: u64,
}

impl Default for ElasticConf {
    /// The configuration keys' defaults, spelled once in `keys`.
    fn default() -> Self {
        use spindle_common::config::keys;
        Self {
            monitoring_interval_ms: keys::DEFAULT_ELASTIC_MONITORING_INTERVAL_MS,
            resize_interval_ms: keys::DEFAULT_ELASTIC_RESIZE_INTERVAL_MS,
            restart_cost_ms: keys::DEFAULT_ELASTIC_RESTART_COST_MS,
            shrink_deadline_ms: keys::DEFAULT_ELASTIC_SHRINK_DEADLINE_MS,
        }
    }
}

/// One decision of a round.
#[derive(Debug, Clone, PartialEq)]
pub enum Resize {
    /// Members placed and charged: the AM is offered them.
    Grow {
        app: ApplicationId,
        gang: String,
        from: u32,
        to: u32,
        placements: Vec<Placement>,
    },
    /// The AM is asked to give members back down to `to`.
    Shrink {
        app: ApplicationId,
        gang: String,
        from: u32,
        to: u32,
    },
}

impl Scheduler {
    /// The AM's progress (0..=1) for its elastic gangs' speed model.
    pub fn set_progress(&mut self, app: &ApplicationId, progress: f64) {
        if let Some(a) = self.apps.get_mut(app) {
            for g in a.gangs.values_mut() {
                if let Some(e) = g.elastic.as_mut() {
                    e.progress = progress.clamp(0.0, 1.0);
                }
            }
        }
    }

    /// The throughput an elastic gang's AM measured at `size` members.
    pub fn report_throughput(&mut self, app: &ApplicationId, gang: &str, size: u32, value: f64) {
        if !(value.is_finite() && value > 0.0 && size > 0) {
            return;
        }
        if let Some(e) = self
            .apps
            .get_mut(app)
            .and_then(|a| a.gangs.get_mut(gang))
            .and_then(|g| g.elastic.as_mut())
        {
            e.learned.insert(size, value);
        }
    }

    /// The size a waiting elastic gang is placed at: under `doubling`, the size the
    /// policy's round admitted it at (0: not yet; it waits for a round); else the largest
    /// legal size whose members fit in the free room of the cluster and of its queue.
    pub(super) fn elastic_size(
        &self,
        spec: &ElasticSpec,
        cap: &Resource,
        leaf: QueueIdx,
        admitted: Option<u32>,
    ) -> u32 {
        let sizes = spec.sizes();
        let least = sizes.first().copied().unwrap_or(spec.min);
        if self.tree.queues[leaf].spec.elastic.is_doubling() {
            return admitted.filter(|n| spec.legal(*n)).unwrap_or(0);
        }
        let mut room = self.nodes.cluster_free();
        for q in self.tree.path_up(leaf) {
            let queue = &self.tree.queues[q];
            room = super::queue_tree::min_each(
                &room,
                &queue.maximum.minus(&queue.used).clamp_non_negative(),
            );
        }
        sizes
            .into_iter()
            .rev()
            .find(|s| cap.times(i64::from(*s)).fits_in(&room))
            .unwrap_or(least)
    }

    /// A member of an elastic gang is gone by the AM's or the RM's choice (a release, a
    /// shrink, a declined offer): the gang goes on without it.
    pub fn elastic_member_gone(&mut self, app: &ApplicationId, gang: &str, c: ContainerId) {
        let now = self.now;
        let Some(g) = self.apps.get_mut(app).and_then(|a| a.gangs.get_mut(gang)) else {
            return;
        };
        let before = g.members.len() as u32;
        g.members.retain(|m| *m != c);
        let after = g.members.len() as u32;
        if let Some(e) = g.elastic.as_mut() {
            e.accrue(before, now);
            if e.shrinking.is_some_and(|t| after <= t) {
                e.shrinking = None;
            }
        }
        g.size = after;
    }

    /// The preemption monitor shrinks the gang to `to` (its resize is under way).
    pub fn elastic_shrinking(&mut self, app: &ApplicationId, gang: &str, to: u32) {
        let now = self.now;
        if let Some(e) = self.elastic_mut(app, gang) {
            e.shrinking = Some(to);
            e.last_resize = now;
            e.resizes += 1;
        }
    }

    /// The AM released members it was just offered.
    pub fn elastic_declined(&mut self, app: &ApplicationId, gang: &str) {
        let now = self.now;
        if let Some(e) = self
            .apps
            .get_mut(app)
            .and_then(|a| a.gangs.get_mut(gang))
            .and_then(|g| g.elastic.as_mut())
        {
            e.declined_at = Some(now);
        }
    }

    pub(super) fn elastic_mut(&mut self, app: &ApplicationId, gang: &str) -> Option<&mut Elastic> {
        self.apps
            .get_mut(app)
            .and_then(|a| a.gangs.get_mut(gang))
            .and_then(|g| g.elastic.as_mut())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(min: u32, max: u32, rule: SizeRule) -> ElasticSpec {
        ElasticSpec {
            min,
            max,
            rule,
            throughput: BTreeMap::new(),
        }
    }

    #[test]
    fn sizes_follow_the_rule() {
        assert_eq!(spec(1, 8, SizeRule::PowerOfTwo).sizes(), vec![1, 2, 4, 8]);
        assert_eq!(spec(3, 12, SizeRule::PowerOfTwo).sizes(), vec![4, 8]);
        assert_eq!(spec(1, 10, SizeRule::Multiple(4)).sizes(), vec![4, 8]);
        assert_eq!(spec(2, 5, SizeRule::Any).sizes(), vec![2, 3, 4, 5]);
        for (min, max, rule) in [
            (1, 8, SizeRule::PowerOfTwo),
            (3, 12, SizeRule::PowerOfTwo),
            (5, 7, SizeRule::PowerOfTwo),
            (1, 10, SizeRule::Multiple(4)),
            (9, 10, SizeRule::Multiple(4)),
            (2, 5, SizeRule::Any),
        ] {
            let s = spec(min, max, rule);
            assert_eq!(s.least(), s.sizes().first().copied(), "{s:?}");
        }
        let s = spec(2, 8, SizeRule::PowerOfTwo);
        assert_eq!(s.up(2), Some(4));
        assert_eq!(s.up(8), None);
        assert_eq!(s.down(8), Some(4));
        assert_eq!(s.down(2), None);
        let any = spec(1, 6, SizeRule::Any);
        assert_eq!(any.up(4), Some(6));
        assert_eq!(any.down(5), Some(2));
    }

    #[test]
    fn efficiency_is_per_member_throughput_at_the_top_over_the_bottom() {
        let with = |min, max, table: &[(u32, f64)]| {
            let mut s = spec(min, max, SizeRule::PowerOfTwo);
            s.throughput = table.iter().copied().collect();
            Elastic::new(s, Resource::zero(), AskKey::default(), 0)
                .efficiency()
                .unwrap_or(-1.0)
        };
        let measured = [(1, 318.0), (2, 576.2), (4, 1152.4), (8, 2177.8)];
        let implied = [(1, 318.0), (2, 535.9), (4, 916.6), (8, 1446.9)];
        assert!((with(1, 8, &measured) - 2177.8 / 8.0 / 318.0).abs() < 1e-9);
        assert!((with(1, 8, &implied) - 1446.9 / 8.0 / 318.0).abs() < 1e-9);
        // Near linear above, sublinear below the line doubling-adaptive draws.
        assert!(with(1, 8, &measured) >= crate::core::queue_conf::SUBLINEAR_EFFICIENCY);
        assert!(with(1, 8, &implied) < crate::core::queue_conf::SUBLINEAR_EFFICIENCY);
        // Between the sizes it spans only; no table is linear; one size is efficient.
        assert!((with(2, 4, &implied) - 916.6 / 4.0 / (535.9 / 2.0)).abs() < 1e-9);
        assert_eq!(with(4, 4, &implied), 1.0);
        // Nothing known: no figure.
        assert_eq!(with(1, 8, &[]), -1.0);
        assert_eq!(with(1, 8, &[(1, 0.0)]), -1.0);
    }

    #[test]
    fn speed_is_given_learned_interpolated_or_linear() {
        let mut s = spec(1, 16, SizeRule::PowerOfTwo);
        s.throughput = BTreeMap::from([(1, 318.0), (2, 576.2), (4, 1152.4), (8, 2177.8)]);
        let mut e = Elastic::new(s, Resource::zero(), AskKey::default(), 0);
        assert_eq!(e.speed(4), 1152.4);
        assert!((e.speed(16) - 2177.8 * 2.0).abs() < 1e-9);
        assert!((e.speed(3) - (576.2 + 1152.4) / 2.0).abs() < 1e-9);
        e.learned.insert(4, 1000.0);
        assert_eq!(e.speed(4), 1000.0);
        let bare = Elastic::new(
            spec(1, 8, SizeRule::Any),
            Resource::zero(),
            AskKey::default(),
            0,
        );
        assert_eq!(bare.speed(5), 5.0);
    }
}
