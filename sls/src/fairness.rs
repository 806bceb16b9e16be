//! Fairness over a replay: how close each user's decayed GPU usage stays to the user's
//! share while the user has work waiting, and how long a user who arrives into a full
//! cluster waits until holding the share.
//!
//! A user's **share** is a fraction of the cluster: for each leaf queue the user submits to,
//! the leaf's absolute capacity times the user's weight there
//! (`<leaf>.user-settings.<user>.weight`, default 1) over the weights of every user who
//! submits to that leaf. A user's **usage** is GPU-seconds, decayed with the configuration's
//! half-life (`spindle.scheduler.fairshare.decay-half-life-ms`, as the RM decays its own
//! ledgers), exact between events ([`DecayedUsage`]).
//!
//! Every calc period (`spindle.scheduler.fairshare.calc-period-ms`) the meter takes a sample
//! of `x_i = usage_i / share_i` over the users with a job waiting (two or more, and a share
//! above zero): Jain's index `(Σx)² / (n Σx²)` (1 when all are equal, `1/n` when one user has
//! everything) and `max x / min x`. A **share episode** begins when a user with nothing
//! running or waiting submits a job that the free GPUs cannot hold, and ends when the user
//! holds `min(share x cluster GPUs, GPUs the user runs and waits for)`.
//!
//! Pure: the replay tells the meter of every change; time is an argument.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use spindle_resourcemanager::core::scheduler::decayed_usage::DecayedUsage;

/// What `summary.json`'s `fairness` holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Fairness {
    /// Users in the trace.
    pub users: usize,
    /// Samples taken with two or more users waiting.
    pub samples: u64,
    /// Jain's index of decayed GPU-hours over share across users with waiting work, the
    /// mean over the samples (`None`: no sample).
    pub jain_index: Option<f64>,
    /// The lowest sample's Jain index.
    pub jain_min: Option<f64>,
    /// `max x / min x` of the same ratios, the median over the samples where every waiting
    /// user had some usage.
    pub max_min_ratio: Option<f64>,
    /// Samples in which a waiting user had no usage at all (the ratio is infinite there).
    pub zero_usage_samples: u64,
    /// Share episodes (a user arriving into a full cluster) that ended holding the share,
    /// the mean and the longest wait, in seconds.
    pub share_episodes: usize,
    pub time_to_share_s: Option<f64>,
    pub time_to_share_max_s: Option<f64>,
}

/// Jain's fairness index of `x`: `(Σx)² / (n Σx²)`, in `[1/n, 1]`; 1 for all-equal values
/// (all zeros included) and `None` for none.
pub fn jain(x: &[f64]) -> Option<f64> {
    if x.is_empty() {
        return None;
    }
    let sum: f64 = x.iter().sum();
    let sq: f64 = x.iter().map(|v| v * v).sum();
    if sq <= 0.0 {
        return Some(1.0);
    }
    Some(sum * sum / (x.len() as f64 * sq))
}

/// `max / min` of `x`; `None` when empty or when the least is not above zero.
pub fn max_min(x: &[f64]) -> Option<f64> {
    let min = x.iter().copied().fold(f64::INFINITY, f64::min);
    let max = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (!x.is_empty() && min > 0.0).then(|| max / min)
}

/// One job's leaf as the shares need it: the leaf's name, its absolute capacity (a fraction
/// of the cluster) and the job's user's weight there.
#[derive(Debug, Clone, PartialEq)]
pub struct Placed<'a> {
    pub leaf: &'a str,
    pub abs_capacity: f64,
    pub user: &'a str,
    pub weight: f64,
}

/// Each user's share of the cluster (see the module's documentation), by user.
pub fn shares<'a>(jobs: impl IntoIterator<Item = Placed<'a>>) -> BTreeMap<String, f64> {
    // leaf -> (capacity, user -> weight)
    let mut leaves: BTreeMap<&str, (f64, BTreeMap<&str, f64>)> = BTreeMap::new();
    for p in jobs {
        let e = leaves
            .entry(p.leaf)
            .or_insert((p.abs_capacity, BTreeMap::new()));
        e.1.insert(p.user, p.weight.max(0.0));
    }
    let mut out: BTreeMap<String, f64> = BTreeMap::new();
    for (cap, users) in leaves.values() {
        let total: f64 = users.values().sum();
        for (u, w) in users {
            let s = if total > 0.0 { cap * w / total } else { 0.0 };
            *out.entry((*u).to_string()).or_default() += s;
        }
    }
    out
}

#[derive(Debug, Clone, Default)]
struct Tenant {
    share: f64,
    usage: DecayedUsage,
    held_gpus: i64,
    waiting_jobs: i64,
    waiting_gpus: i64,
    /// When the user's open share episode began.
    episode: Option<u64>,
}

impl Tenant {
    fn demand(&self) -> i64 {
        self.held_gpus + self.waiting_gpus
    }
}

/// A change the replay reports for one user.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Change {
    /// GPUs the user's containers hold now, more (+) or fewer (-).
    pub held_gpus: i64,
    /// GPUs the user's jobs wait for.
    pub waiting_gpus: i64,
    /// Jobs of the user waiting to start (or to run again).
    pub waiting_jobs: i64,
}

/// The meter the replay feeds.
#[derive(Debug, Clone)]
pub struct FairnessMeter {
    tenants: Vec<Tenant>,
    total_gpus: i64,
    half_life_ms: u64,
    period_ms: u64,
    next_sample: u64,
    jain_sum: f64,
    jain_min: Option<f64>,
    samples: u64,
    ratios: Vec<f64>,
    zero_usage_samples: u64,
    episodes_ms: Vec<u64>,
    /// Scratch for a sample's ratios.
    x: Vec<f64>,
}

impl FairnessMeter {
    /// A meter for users with these shares (fractions of the cluster), indexed as given.
    pub fn new(shares: &[f64], total_gpus: i64, half_life_ms: u64, period_ms: u64) -> Self {
        Self {
            tenants: shares
                .iter()
                .map(|s| Tenant {
                    share: *s,
                    ..Tenant::default()
                })
                .collect(),
            total_gpus,
            half_life_ms,
            period_ms: period_ms.max(1),
            next_sample: period_ms.max(1),
            jain_sum: 0.0,
            jain_min: None,
            samples: 0,
            ratios: Vec::new(),
            zero_usage_samples: 0,
            episodes_ms: Vec::new(),
            x: Vec::new(),
        }
    }

    /// Takes every sample due up to `t` (the state has held since the last change), before
    /// the changes of time `t`.
    pub fn advance(&mut self, t: u64) {
        while self.next_sample <= t {
            let at = self.next_sample;
            self.sample(at);
            self.next_sample = at.saturating_add(self.period_ms);
        }
    }

    fn sample(&mut self, at: u64) {
        self.x.clear();
        let h = self.half_life_ms;
        for t in &self.tenants {
            if t.waiting_jobs > 0 && t.share > 0.0 {
                let u = t.usage.as_of(at, t.held_gpus as f64, h);
                self.x.push(u.decayed / t.share);
            }
        }
        if self.x.len() < 2 {
            return;
        }
        if let Some(j) = jain(&self.x) {
            self.samples += 1;
            self.jain_sum += j;
            self.jain_min = Some(self.jain_min.map_or(j, |m| m.min(j)));
        }
        match max_min(&self.x) {
            Some(r) => self.ratios.push(r),
            None => self.zero_usage_samples += 1,
        }
    }

    /// User `user` changed at `now`; `used_gpus` is the cluster's GPUs in use after it.
    pub fn change(&mut self, user: usize, c: Change, now: u64, used_gpus: i64) {
        let (total, h) = (self.total_gpus, self.half_life_ms);
        let Some(t) = self.tenants.get_mut(user) else {
            return;
        };
        let idle = t.demand() == 0;
        t.usage.advance(now, t.held_gpus as f64, h);
        t.held_gpus += c.held_gpus;
        t.waiting_gpus += c.waiting_gpus;
        t.waiting_jobs += c.waiting_jobs;
        if idle && t.waiting_gpus > 0 && total - used_gpus < t.waiting_gpus {
            t.episode = Some(now);
        }
        if let Some(since) = t.episode {
            let entitled = (t.share * total as f64).floor() as i64;
            let demand = t.demand();
            if demand == 0 {
                // Its work went without being held (refused or failed): no episode.
                t.episode = None;
            } else if t.held_gpus >= entitled.min(demand).max(1) {
                self.episodes_ms.push(now - since);
                t.episode = None;
            }
        }
    }

    /// The figures, after the last change.
    pub fn finish(&self) -> Fairness {
        let mut ratios = self.ratios.clone();
        ratios.sort_by(f64::total_cmp);
        let r3 = |v: f64| (v * 1000.0).round() / 1000.0;
        Fairness {
            users: self.tenants.len(),
            samples: self.samples,
            jain_index: (self.samples > 0).then(|| r3(self.jain_sum / self.samples as f64)),
            jain_min: self.jain_min.map(r3),
            max_min_ratio: (!ratios.is_empty()).then(|| r3(ratios[(ratios.len() - 1) / 2])),
            zero_usage_samples: self.zero_usage_samples,
            share_episodes: self.episodes_ms.len(),
            time_to_share_s: (!self.episodes_ms.is_empty()).then(|| {
                r3(self.episodes_ms.iter().sum::<u64>() as f64
                    / self.episodes_ms.len() as f64
                    / 1000.0)
            }),
            time_to_share_max_s: self
                .episodes_ms
                .iter()
                .max()
                .map(|m| r3(*m as f64 / 1000.0)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_of_known_inputs() {
        assert_eq!(jain(&[]), None);
        assert_eq!(jain(&[3.0, 3.0, 3.0]), Some(1.0));
        assert_eq!(jain(&[0.0, 0.0]), Some(1.0));
        // One of n has everything: 1/n.
        assert_eq!(jain(&[5.0, 0.0, 0.0, 0.0]), Some(0.25));
        // (1+2+3)^2 / (3 * 14) = 36/42.
        let j = jain(&[1.0, 2.0, 3.0]).expect("some");
        assert!((j - 36.0 / 42.0).abs() < 1e-12, "{j}");
        assert_eq!(max_min(&[1.0, 4.0, 2.0]), Some(4.0));
        assert_eq!(max_min(&[0.0, 4.0]), None);
        assert_eq!(max_min(&[]), None);
    }

    #[test]
    fn shares_split_each_leaf_by_weight() {
        let p = |leaf, abs_capacity, user, weight| Placed {
            leaf,
            abs_capacity,
            user,
            weight,
        };
        let s = shares([
            p("a", 0.6, "u1", 1.0),
            p("a", 0.6, "u2", 2.0),
            p("a", 0.6, "u1", 1.0),
            p("b", 0.4, "u1", 1.0),
            p("b", 0.4, "nobody", 0.0),
        ]);
        assert!((s["u1"] - (0.2 + 0.4)).abs() < 1e-12);
        assert!((s["u2"] - 0.4).abs() < 1e-12);
        assert_eq!(s["nobody"], 0.0);
    }

    #[test]
    fn samples_compare_usage_over_share_of_waiting_users() {
        // Two users with equal shares of a 10-GPU cluster, no decay, a sample every 10 s.
        let mut m = FairnessMeter::new(&[0.5, 0.5], 10, 0, 10_000);
        let wait = |jobs, gpus| Change {
            waiting_jobs: jobs,
            waiting_gpus: gpus,
            held_gpus: 0,
        };
        let start = |gpus: i64| Change {
            waiting_jobs: -1,
            waiting_gpus: -gpus,
            held_gpus: gpus,
        };
        // User 0 runs 10 GPUs from 0 and has more waiting; user 1 arrives at 5 s.
        m.change(0, wait(1, 10), 0, 0);
        m.change(0, wait(1, 10), 0, 0);
        m.change(0, start(10), 0, 10);
        m.advance(5_000);
        m.change(1, wait(1, 5), 5_000, 10);
        // At 10 s: user 0 has 100 GPU-s, user 1 none.
        m.advance(10_000);
        // User 0 gives back 5 GPUs at 10 s and user 1 takes them: it held its share
        // (5 GPUs) after 5 s.
        let release = Change {
            held_gpus: -5,
            ..Change::default()
        };
        m.change(0, release, 10_000, 5);
        m.change(1, start(5), 10_000, 10);
        m.advance(20_000);
        let f = m.finish();
        // Only the 10 s sample had two users waiting: one with none.
        assert_eq!(f.samples, 1);
        assert_eq!(f.jain_index, Some(0.5));
        assert_eq!(f.zero_usage_samples, 1);
        assert_eq!(f.max_min_ratio, None);
        assert_eq!(f.share_episodes, 1);
        assert_eq!(f.time_to_share_s, Some(5.0));
        assert_eq!(f.users, 2);
    }

    #[test]
    fn a_user_with_free_room_starts_no_episode() {
        let mut m = FairnessMeter::new(&[0.5, 0.5], 10, 0, 1_000);
        m.change(
            0,
            Change {
                waiting_jobs: 1,
                waiting_gpus: 2,
                held_gpus: 0,
            },
            0,
            0,
        );
        m.change(
            0,
            Change {
                waiting_jobs: -1,
                waiting_gpus: -2,
                held_gpus: 2,
            },
            0,
            2,
        );
        assert_eq!(m.finish().share_episodes, 0);
        assert_eq!(m.finish().jain_index, None);
    }
}
