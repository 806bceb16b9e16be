//! Fair share with memory: every user's decayed usage per leaf ([`DecayedUsage`], billed by
//! [`super::super::queue_conf::BillingWeights`], kept for every leaf) and the `fairshare`
//! leaf ordering that uses it.
//!
//! A `fairshare` leaf serves its applications by their user's *place*: the user's decayed
//! usage over the user's share (`user-settings.<user>.weight`), on a scale decay does not
//! move ([`DecayedUsage::place`]); users without usage first, users without a share last;
//! among one user's own, least attained service first, then submission. An application
//! that has waited `ordering-policy.fairshare.max-wait-ms` for its next container goes ahead
//! of every one that has not (FIFO among those), so none waits without bound.
//!
//! Cost: a user's place is worked out when the user's first application in the leaf starts
//! waiting, and then once per `spindle.scheduler.fairshare.calc-period-ms` (Slurm's
//! `PriorityCalcPeriod`) for everyone, when the running containers' usage moves the leaf's
//! applications; never per visit. A moved application reopens its leaf's kept run (see
//! `resume`) through `set_order`, as `fair` and `las` do.

use super::decayed_usage::DecayedUsage;
use super::*;
use crate::core::queue_conf::FairshareConf;
use spindle_common::QueuePath;

/// Where an application's wait for its next container stands (`fairshare` leaves).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FairWait {
    /// When it began waiting (gaining a place in the order, or after its last container).
    pub since: Option<u64>,
    /// When the wait bound passes (`None`: no bound).
    pub due: Option<u64>,
    /// The bound passed: it goes ahead of every application that has not waited as long.
    pub overdue: bool,
}

/// One user's usage in one leaf and the place last worked out from it.
#[derive(Debug, Clone, Default)]
struct Ledger {
    usage: DecayedUsage,
    place: Option<i64>,
}

/// The users' ledgers and the ordering's bookkeeping.
#[derive(Debug, Clone, Default)]
pub(super) struct FairState {
    /// Per queue (by index; parents' maps stay empty): user -> ledger.
    ledgers: Vec<BTreeMap<String, Ledger>>,
    /// The time places are measured from (moved on when they would grow too large).
    epoch: u64,
    /// When the next calculation of places is due.
    next_calc: u64,
    /// Waiting applications of `fairshare` leaves by when their wait bound passes.
    due: BTreeSet<(u64, ApplicationId)>,
    /// Ledgers changed since the store last heard of them.
    changed: BTreeSet<(QueueIdx, String)>,
    /// Per queue, its decayed usage over its guarantee where every leaf under its parent
    /// is `fairshare` (`fair_queues`), as of the last calculation.
    pub(super) slack: Vec<Option<f64>>,
}

impl FairState {
    /// Brings `user`'s ledger in `leaf` up to `now`, `rate` billing units per second having
    /// been held since it was last; `create` makes one where there is none.
    pub(super) fn accrue(
        &mut self,
        leaf: QueueIdx,
        user: &str,
        create: bool,
        rate: f64,
        now: u64,
        half_life_ms: u64,
    ) {
        if self.ledgers.len() <= leaf.0 {
            if !create {
                return;
            }
            self.ledgers.resize_with(leaf.0 + 1, BTreeMap::new);
        }
        let map = &mut self.ledgers[leaf];
        let l = match map.get_mut(user) {
            Some(l) => l,
            None if create => map.entry(user.to_string()).or_insert(Ledger {
                usage: DecayedUsage {
                    at: now,
                    ..DecayedUsage::default()
                },
                place: None,
            }),
            None => return,
        };
        l.usage.advance(now, rate, half_life_ms);
    }

    /// The store is to hear of `user`'s ledger in `leaf`, if there is one.
    pub(super) fn mark_changed(&mut self, leaf: QueueIdx, user: &str) {
        if self
            .ledgers
            .get(leaf.0)
            .is_some_and(|m| m.contains_key(user))
        {
            self.changed.insert((leaf, user.to_string()));
        }
    }
}

/// One user's usage as the store keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct FairshareRecord {
    /// The leaf's full path.
    pub queue: String,
    pub user: String,
    pub usage: DecayedUsage,
}

/// A user's standing in a leaf (Slurm's `sshare` row).
#[derive(Debug, Clone, PartialEq)]
pub struct UserFairshare {
    pub user: String,
    /// `user-settings.<user>.weight` (Slurm's RawShares).
    pub weight: f64,
    /// The weight over the leaf's listed users' (NormShares).
    pub norm_share: f64,
    /// Billing-unit-seconds, never decayed.
    pub raw_usage: f64,
    /// Billing-unit-seconds, decayed to now.
    pub decayed_usage: f64,
    /// The decayed usage over the leaf's (EffectvUsage).
    pub norm_usage: f64,
    /// Fair Tree's level fair share, `norm_share / norm_usage`; `None` is infinite (no usage).
    pub level_fs: Option<f64>,
    /// `2^(-norm_usage / norm_share)` in [0, 1] (Slurm's classic fair-share factor; 1 is no
    /// usage, 0.5 is usage equal to the share).
    pub factor: f64,
    /// What the user's running containers bill per second.
    pub billing_rate: f64,
}

/// A queue's fair-share figures: its users' for a leaf, sums for a parent.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueFairshare {
    pub queue: QueuePath,
    pub policy: Option<OrderingPolicy>,
    pub raw_usage: f64,
    pub decayed_usage: f64,
    pub users: Vec<UserFairshare>,
}

/// Why a waiting application of a `fairshare` leaf is where it is (Slurm's `sprio`).
#[derive(Debug, Clone, PartialEq)]
pub struct AppPlace {
    pub queue: QueuePath,
    /// 1-based place among the leaf's waiting applications, and how many wait.
    pub rank: usize,
    pub waiting: usize,
    pub user: UserFairshare,
    /// How long it has waited for its next container (ms), and the bound.
    pub age_ms: u64,
    pub max_wait_ms: u64,
    /// The bound passed: it goes ahead of every application that has not waited as long.
    pub overdue: bool,
    /// GPU-seconds it has attained (vcore-seconds without GPUs): the order among its
    /// user's own applications.
    pub attained_s: f64,
}

/// Places are `log2(usage / share)` in units of 2^-32.
const PLACE_SCALE: f64 = 4_294_967_296.0;
/// Places of users with no usage, and of users with no share.
const NO_USAGE: i64 = i64::MIN + 1;
const NO_SHARE: i64 = i64::MAX - 1;
/// The epoch moves on once this many half-lives have passed since it.
const EPOCH_HALF_LIVES: f64 = 65_536.0;

impl Scheduler {
    fn fs_conf(&self) -> &FairshareConf {
        &self.conf.fairshare
    }

    /// The ledger of `user` in `leaf`, if it was ever charged.
    fn ledger(&self, leaf: QueueIdx, user: &str) -> Option<&Ledger> {
        self.fs.ledgers.get(leaf.0).and_then(|m| m.get(user))
    }

    /// What `user`'s containers in `leaf` bill per second now.
    fn billing_rate(&self, leaf: QueueIdx, user: &str) -> f64 {
        self.tree.queues[leaf]
            .users
            .get(user)
            .map_or(0.0, |u| self.conf.fairshare.billing.per_second(&u.used))
    }

    /// Brings `user`'s ledger in `leaf` up to now; called before the user's usage there
    /// changes. `create`: make the ledger if there is none (a first charge).
    pub(super) fn fs_accrue(&mut self, leaf: QueueIdx, user: &str, create: bool) {
        let rate = self.billing_rate(leaf, user);
        let (now, h) = (self.now, self.conf.fairshare.half_life_ms);
        self.fs.accrue(leaf, user, create, rate, now, h);
    }

    /// A container of `app` holding `r` since `allocated_at` was preempted: what it charged
    /// is taken back (preempted work is not charged). Call after its release.
    pub fn refund_preempted(&mut self, app: &ApplicationId, r: &Resource, allocated_at: u64) {
        let Some((leaf, user)) = self.apps.get(app).map(|a| (a.queue, a.user.clone())) else {
            return;
        };
        self.fs_accrue(leaf, &user, false);
        let rate = self.conf.fairshare.billing.per_second(r);
        let h = self.conf.fairshare.half_life_ms;
        if let Some(l) = self
            .fs
            .ledgers
            .get_mut(leaf.0)
            .and_then(|m| m.get_mut(&user))
        {
            l.usage.refund(rate, allocated_at, h);
            self.fs.changed.insert((leaf, user));
        }
    }

    /// The usage of `user` in `leaf` moved: the store hears of the ledger.
    pub(super) fn fs_changed(&mut self, leaf: QueueIdx, user: &str) {
        self.fs.mark_changed(leaf, user);
    }

    /// `place` of a user: where the user's applications go in a `fairshare` leaf.
    fn place_of(&self, leaf: QueueIdx, user: &str) -> i64 {
        let w = self.tree.queues[leaf].spec.fairshare.weight(user);
        if w <= 0.0 {
            return NO_SHARE;
        }
        let h = self.fs_conf().half_life_ms;
        match self
            .ledger(leaf, user)
            .and_then(|l| l.usage.place(w, self.fs.epoch, h))
        {
            None => NO_USAGE,
            Some(p) => (p * PLACE_SCALE).clamp((NO_USAGE + 1) as f64, (NO_SHARE - 1) as f64) as i64,
        }
    }

    /// Works `user`'s place in `leaf` out anew from usage brought up to now.
    fn replace_user(&mut self, leaf: QueueIdx, user: &str) -> i64 {
        self.fs_accrue(leaf, user, false);
        let p = self.place_of(leaf, user);
        if let Some(l) = self
            .fs
            .ledgers
            .get_mut(leaf.0)
            .and_then(|m| m.get_mut(user))
        {
            l.place = Some(p);
        }
        p
    }

    /// The order key of `app` (taken out of the map) in a `fairshare` leaf; starts its wait.
    pub(super) fn fairshare_key(&mut self, id: &ApplicationId, app: &mut SchedApp) -> (i64, u64) {
        if app.wait.since.is_none() {
            app.wait.since = Some(self.now);
            let spec = &self.tree.queues[app.queue].spec.fairshare;
            // A user without a share is never promoted.
            let bound = if spec.weight(&app.user) > 0.0 {
                spec.max_wait_ms
            } else {
                0
            };
            app.wait.due = (bound > 0).then(|| self.now.saturating_add(bound));
            if let Some(d) = app.wait.due {
                self.fs.due.insert((d, *id));
            }
        }
        if app.wait.overdue {
            return (i64::MIN, app.submit_seq);
        }
        let leaf = app.queue;
        // The first waiting application of its user in the leaf: the place is worked out
        // anew (no other application of the user holds the old one).
        let stored = self.ledger(leaf, &app.user).and_then(|l| l.place);
        let place = match stored {
            Some(p)
                if app.order.is_some()
                    || self.active_users.contains_key(&(leaf, app.user.clone())) =>
            {
                p
            }
            _ => self.replace_user(leaf, &app.user),
        };
        (place, app.service.gpu_ms)
    }

    /// What time brought to the fair-share ordering: applications past their wait bound go
    /// ahead; once per calc period every ledger follows its running containers and every
    /// `fairshare` leaf's applications follow their users' places.
    pub fn refresh_fairshare(&mut self) {
        let now = self.now;
        while let Some(&(due, id)) = self.fs.due.first() {
            if due > now {
                break;
            }
            self.fs.due.remove(&(due, id));
            let Some(a) = self.apps.get_mut(&id) else {
                continue;
            };
            if a.wait.due == Some(due) && a.order.is_some() {
                a.wait.overdue = true;
                self.refresh_order(&id);
            }
        }
        if now < self.fs.next_calc {
            return;
        }
        let conf = self.conf.fairshare.clone();
        self.fs.next_calc = now.saturating_add(conf.calc_period_ms.max(1));
        if conf.half_life_ms > 0
            && now.saturating_sub(self.fs.epoch) as f64 / conf.half_life_ms as f64
                > EPOCH_HALF_LIVES
        {
            self.fs.epoch = now;
        }
        let leaves: Vec<QueueIdx> = self
            .tree
            .indices()
            .filter(|l| l.0 < self.fs.ledgers.len())
            .collect();
        for leaf in leaves {
            let users: Vec<String> = self.fs.ledgers[leaf].keys().cloned().collect();
            let fairshare = self.tree.queues[leaf].spec.ordering == OrderingPolicy::Fairshare;
            for u in &users {
                if self.billing_rate(leaf, u) > 0.0 {
                    self.fs.changed.insert((leaf, u.clone()));
                }
                if fairshare {
                    self.replace_user(leaf, u);
                } else {
                    self.fs_accrue(leaf, u, false);
                }
            }
            if fairshare {
                let apps: Vec<ApplicationId> =
                    self.tree.queues[leaf].apps.iter().copied().collect();
                for id in apps {
                    self.refresh_order(&id);
                }
            }
        }
        self.refresh_slack_keys();
    }

    /// The decayed usage of every user of `leaf`, as of now.
    pub(super) fn leaf_decayed(&self, leaf: QueueIdx) -> f64 {
        let h = self.conf.fairshare.half_life_ms;
        self.fs.ledgers.get(leaf.0).map_or(0.0, |m| {
            m.iter()
                .map(|(u, l)| {
                    let rate = self.billing_rate(leaf, u);
                    l.usage.as_of(self.now, rate, h).decayed
                })
                .sum()
        })
    }

    /// The ledgers changed since the last call, for the store.
    pub fn take_fairshare_changes(&mut self) -> Vec<FairshareRecord> {
        let changed = std::mem::take(&mut self.fs.changed);
        changed
            .into_iter()
            .filter_map(|(leaf, user)| {
                let l = self.ledger(leaf, &user)?;
                Some(FairshareRecord {
                    queue: self.tree.queues[leaf].spec.path.to_string(),
                    usage: l.usage,
                    user,
                })
            })
            .collect()
    }

    /// Puts back stored ledgers (at start, before any container is charged); those of
    /// queues that are no leaf any more are dropped.
    pub fn restore_fairshare(&mut self, records: Vec<FairshareRecord>) {
        for r in records {
            let Some(leaf) = self.tree.leaf(&r.queue) else {
                continue;
            };
            if self.fs.ledgers.len() <= leaf.0 {
                self.fs.ledgers.resize_with(leaf.0 + 1, BTreeMap::new);
            }
            self.fs.ledgers[leaf].insert(
                r.user,
                Ledger {
                    usage: r.usage,
                    place: None,
                },
            );
        }
    }

    /// The ledgers re-attached to a rebuilt tree by queue path (`reconfigure`).
    pub(super) fn remap_fairshare(&mut self, old: &QueueTree) {
        let ledgers = std::mem::take(&mut self.fs.ledgers);
        for (i, map) in ledgers.into_iter().enumerate() {
            let Some(leaf) = self.tree.leaf(&old.queues[QueueIdx(i)].spec.path) else {
                continue;
            };
            if self.fs.ledgers.len() <= leaf.0 {
                self.fs.ledgers.resize_with(leaf.0 + 1, BTreeMap::new);
            }
            self.fs.ledgers[leaf] = map
                .into_iter()
                .map(|(u, l)| (u, Ledger { place: None, ..l }))
                .collect();
        }
        self.fs.changed.clear();
        self.fs.slack.clear();
        self.refresh_slack_keys();
    }

    /// Every queue's fair-share figures as of now, parents before children.
    pub fn fairshare_view(&self) -> Vec<QueueFairshare> {
        let mut out: Vec<QueueFairshare> = self
            .tree
            .queues
            .iter()
            .enumerate()
            .map(|(i, q)| {
                let users = if q.is_leaf() {
                    self.leaf_users(QueueIdx(i))
                } else {
                    Vec::new()
                };
                QueueFairshare {
                    queue: q.spec.path.clone(),
                    policy: q.is_leaf().then_some(q.spec.ordering),
                    raw_usage: users.iter().map(|u| u.raw_usage).sum(),
                    decayed_usage: users.iter().map(|u| u.decayed_usage).sum(),
                    users,
                }
            })
            .collect();
        for i in (1..out.len()).rev() {
            if let Some(p) = self.tree.queues[i].parent {
                let (raw, decayed) = (out[i].raw_usage, out[i].decayed_usage);
                out[p.0].raw_usage += raw;
                out[p.0].decayed_usage += decayed;
            }
        }
        out
    }

    /// The users of a leaf (charged ever, or with applications there) and their standing.
    pub(super) fn leaf_users(&self, leaf: QueueIdx) -> Vec<UserFairshare> {
        let q = &self.tree.queues[leaf];
        let h = self.conf.fairshare.half_life_ms;
        let mut names: BTreeSet<&str> = q.users.keys().map(String::as_str).collect();
        if let Some(m) = self.fs.ledgers.get(leaf.0) {
            names.extend(m.keys().map(String::as_str));
        }
        let rows: Vec<(&str, f64, DecayedUsage, f64)> = names
            .into_iter()
            .map(|u| {
                let rate = self.billing_rate(leaf, u);
                let usage = self
                    .ledger(leaf, u)
                    .map(|l| l.usage.as_of(self.now, rate, h))
                    .unwrap_or_default();
                (u, q.spec.fairshare.weight(u), usage, rate)
            })
            .collect();
        let total_w: f64 = rows.iter().map(|r| r.1.max(0.0)).sum();
        let total_u: f64 = rows.iter().map(|r| r.2.decayed).sum();
        rows.into_iter()
            .map(|(user, weight, usage, rate)| {
                let norm_share = if total_w > 0.0 {
                    weight.max(0.0) / total_w
                } else {
                    0.0
                };
                let norm_usage = if total_u > 0.0 {
                    usage.decayed / total_u
                } else {
                    0.0
                };
                let factor = if norm_share > 0.0 {
                    (-norm_usage / norm_share).exp2()
                } else {
                    0.0
                };
                UserFairshare {
                    user: user.to_string(),
                    weight,
                    norm_share,
                    raw_usage: usage.raw,
                    decayed_usage: usage.decayed,
                    norm_usage,
                    level_fs: (norm_usage > 0.0).then(|| norm_share / norm_usage),
                    factor,
                    billing_rate: rate,
                }
            })
            .collect()
    }

    /// Why each waiting application of every `fairshare` leaf is where it is.
    pub fn app_places(&self) -> BTreeMap<ApplicationId, AppPlace> {
        let mut out = BTreeMap::new();
        for (i, q) in self.tree.queues.iter().enumerate() {
            if !q.is_leaf()
                || q.spec.ordering != OrderingPolicy::Fairshare
                || q.schedulable.is_empty()
            {
                continue;
            }
            let users: BTreeMap<String, UserFairshare> = self
                .leaf_users(QueueIdx(i))
                .into_iter()
                .map(|u| (u.user.clone(), u))
                .collect();
            let waiting = q.schedulable.len();
            for (rank, (_, _, id)) in q.schedulable.iter().enumerate() {
                let Some(a) = self.apps.get(id) else { continue };
                let Some(user) = users.get(&a.user) else {
                    continue;
                };
                out.insert(
                    *id,
                    AppPlace {
                        queue: q.spec.path.clone(),
                        rank: rank + 1,
                        waiting,
                        user: user.clone(),
                        age_ms: a.wait.since.map_or(0, |s| self.now.saturating_sub(s)),
                        max_wait_ms: q.spec.fairshare.max_wait_ms,
                        overdue: a.wait.overdue,
                        attained_s: self.attained(id) as f64 / 1000.0,
                    },
                );
            }
        }
        out
    }
}
