//! Intra-queue preemption in `fairshare` leaves: who ranks below a waiting application.
//!
//! - **Fair share** ([`Reason::Fairshare`]): the preemptor's user is below their share of the
//!   leaf (decayed usage over share under 1, as `queue -fairshare` shows it), and the victim's
//!   user is far above theirs: above their share, and with at least
//!   `intra-queue-preemption.fairshare.usage-factor` times the preemptor's user's usage over
//!   share (a pairwise measure, so a leaf of two users works too). So that a move never
//!   turns round, the victim's user stays above the preemptor's even if every application
//!   the victim's user runs in the leaf were preempted and its work refunded
//!   ([`Scheduler::refundable`], a bound from above of what preemption would take back).
//!   A user below their share is therefore never a victim of this reason.
//! - **Least attained service within a user** ([`Reason::LasLevel`] in a `fairshare` leaf):
//!   the leaf orders one user's own applications by attained service, so a waiting one takes
//!   from the same user's applications on a later level of the leaf's `ordering-policy.las`
//!   thresholds (the level worked out from attained service now; `fairshare` leaves keep no
//!   levels).
//!
//! Victims are then chosen as for every reason (`victims`): the cheapest by work lost since
//! the last checkpoint first (for work that does not checkpoint, the newest), none younger
//! than the minimum runtime, each with the checkpoint notice.
//!
//! Cost: one pass over the leaf's users and applications per preemptor a round serves; none
//! for leaves of other orderings.

use super::preemptors::Preemptor;
use super::victims::{PreemptionConf, Reason};
use super::*;

/// The intra-queue reasons, in the order a round tries them for one preemptor.
pub(super) const INTRA_QUEUE_REASONS: [Reason; 4] = [
    Reason::Fairshare,
    Reason::LasLevel,
    Reason::Priority,
    Reason::UserLimit,
];

/// A test of whether an application ranks below a preemptor, prepared once per preemptor.
pub(super) type Ranker<'a> = Box<dyn Fn(&ApplicationId) -> bool + 'a>;

/// One user's standing in a leaf, as the fair-share reason compares them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Standing {
    /// Decayed usage over the leaf's, divided by the share (1: exactly at the share).
    pub over_share: f64,
    /// Decayed usage over weight (billing-unit-seconds per unit of share).
    pub per_weight: f64,
    /// `per_weight` less everything preemption could refund the user's running work.
    pub per_weight_after: f64,
}

impl Scheduler {
    /// Each user's [`Standing`] in `leaf`, of the users with a share.
    pub fn fair_standings(&self, leaf: QueueIdx) -> BTreeMap<String, Standing> {
        let mut refundable: BTreeMap<&str, f64> = BTreeMap::new();
        for id in &self.tree.queues[leaf].apps {
            if let Some(a) = self.apps.get(id) {
                *refundable.entry(a.user.as_str()).or_default() += self.refundable(a);
            }
        }
        self.leaf_users(leaf)
            .into_iter()
            .filter(|u| u.weight > 0.0 && u.norm_share > 0.0)
            .map(|u| {
                let refund = refundable.get(u.user.as_str()).copied().unwrap_or(0.0);
                let standing = Standing {
                    over_share: u.norm_usage / u.norm_share,
                    per_weight: u.decayed_usage / u.weight,
                    per_weight_after: (u.decayed_usage - refund).max(0.0) / u.weight,
                };
                (u.user, standing)
            })
            .collect()
    }

    /// A bound from above of what preempting every container of `a` would refund: its
    /// billing rate now for as long as it has held GPUs (decay only lowers the charge).
    fn refundable(&self, a: &SchedApp) -> f64 {
        let rate = self.conf.fairshare.billing.per_second(&a.used);
        if rate <= 0.0 {
            return 0.0;
        }
        let held_ms = a
            .service
            .ran_ms
            .saturating_add(self.now.saturating_sub(a.service.at));
        rate * held_ms as f64 / 1000.0
    }

    /// [`Reason::Fairshare`]: applications of users far above their share, for a preemptor
    /// whose user is below theirs, in a `fairshare` leaf.
    pub(super) fn fairshare_ranker(&self, p: &Preemptor, conf: &PreemptionConf) -> Ranker<'_> {
        let leaf = p.leaf;
        let (Some(pa), OrderingPolicy::Fairshare) =
            (self.apps.get(&p.app), self.tree.queues[leaf].spec.ordering)
        else {
            return Box::new(|_| false);
        };
        let standings = self.fair_standings(leaf);
        let Some(mine) = standings.get(&pa.user).copied() else {
            return Box::new(|_| false);
        };
        if mine.over_share >= 1.0 {
            return Box::new(|_| false);
        }
        let factor = conf.fairshare_usage_factor;
        let far_above: BTreeSet<String> = standings
            .into_iter()
            .filter(|(name, s)| {
                *name != pa.user
                    && s.over_share > 1.0
                    && s.over_share >= factor * mine.over_share
                    && s.per_weight_after > mine.per_weight
            })
            .map(|(name, _)| name)
            .collect();
        if far_above.is_empty() {
            return Box::new(|_| false);
        }
        let me = p.app;
        Box::new(move |id| {
            *id != me
                && self
                    .apps
                    .get(id)
                    .is_some_and(|v| v.queue == leaf && far_above.contains(&v.user))
        })
    }

    /// [`Reason::LasLevel`] in a `fairshare` leaf: the preemptor's user's own applications
    /// on a later level than it, by attained service now.
    pub(super) fn own_las_ranker(&self, p: &Preemptor) -> Ranker<'_> {
        let leaf = p.leaf;
        let Some(pa) = self.apps.get(&p.app) else {
            return Box::new(|_| false);
        };
        let las = &self.tree.queues[leaf].spec.las;
        let level = las.level(self.attained(&p.app));
        let (me, user) = (p.app, pa.user.as_str());
        Box::new(move |id| {
            *id != me
                && self.apps.get(id).is_some_and(|v| {
                    v.queue == leaf && v.user == user && las.level(self.attained(id)) > level
                })
        })
    }
}
