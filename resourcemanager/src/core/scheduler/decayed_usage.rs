//! Decayed usage (Slurm's `PriorityDecayHalfLife`): what one user has used in one leaf, in
//! billing-unit-seconds ([`super::super::queue_conf::BillingWeights`]), halved every
//! half-life. Decay is applied lazily and exactly: a value brought from `at` to `now`
//! is multiplied by `2^(-(now - at) / half-life)` and gains the exact integral of what the
//! containers held over the interval charged, each instant decayed from its own time, so
//! the result does not depend on how often it is brought up to date. Work taken back by
//! preemption is refunded by the same integral (it is never charged).
//!
//! Pure: time is an argument.

/// One user's usage in one leaf.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DecayedUsage {
    /// Billing-unit-seconds, decayed, as of `at`.
    pub decayed: f64,
    /// Billing-unit-seconds charged since accounting began, never decayed.
    pub raw: f64,
    /// When `decayed` was last brought up to date (ms).
    pub at: u64,
}

/// `2^(-dt / half_life)`; 1 when usage never decays (`half_life_ms` 0).
pub fn decay_factor(dt_ms: u64, half_life_ms: u64) -> f64 {
    if half_life_ms == 0 {
        return 1.0;
    }
    (-(dt_ms as f64) / half_life_ms as f64).exp2()
}

/// What `rate` billing units per second held for `dt_ms` charged, decayed to the end of
/// the interval: `rate * ∫_0^dt 2^(-(dt - t) / h) dt` (`rate * dt` without decay).
pub fn charged(rate: f64, dt_ms: u64, half_life_ms: u64) -> f64 {
    if rate <= 0.0 || dt_ms == 0 {
        return 0.0;
    }
    let secs = dt_ms as f64 / 1000.0;
    if half_life_ms == 0 {
        return rate * secs;
    }
    let h = half_life_ms as f64 / 1000.0;
    // (h / ln 2) * (1 - 2^(-dt/h)), with expm1 for short intervals.
    let x = secs / h * std::f64::consts::LN_2;
    rate * h / std::f64::consts::LN_2 * -(-x).exp_m1()
}

impl DecayedUsage {
    /// Brings the usage to `now`, `rate` billing units per second having been held since
    /// `at`. A `now` before `at` changes nothing.
    pub fn advance(&mut self, now: u64, rate: f64, half_life_ms: u64) {
        if now <= self.at {
            return;
        }
        let dt = now - self.at;
        self.decayed =
            self.decayed * decay_factor(dt, half_life_ms) + charged(rate, dt, half_life_ms);
        if rate > 0.0 {
            self.raw += rate * dt as f64 / 1000.0;
        }
        self.at = now;
    }

    /// The usage as of `now` without changing it (for views).
    pub fn as_of(&self, now: u64, rate: f64, half_life_ms: u64) -> DecayedUsage {
        let mut u = *self;
        u.advance(now, rate, half_life_ms);
        u
    }

    /// Takes back what a container of `rate` held from `since` to `at` charged (it was
    /// preempted). Call after [`Self::advance`]; never leaves a negative.
    pub fn refund(&mut self, rate: f64, since: u64, half_life_ms: u64) {
        let held = self.at.saturating_sub(since);
        self.decayed = (self.decayed - charged(rate, held, half_life_ms)).max(0.0);
        self.raw = (self.raw - rate.max(0.0) * held as f64 / 1000.0).max(0.0);
    }

    /// Where the usage over `weight` stands on a scale that decay does not move:
    /// `log2(decayed / weight) + (at - epoch) / half-life`. Two users' places compare as
    /// their decayed usages over weights at any common time, however long ago each was
    /// brought up to date, as long as neither charged anything since. `None`: no usage.
    pub fn place(&self, weight: f64, epoch: u64, half_life_ms: u64) -> Option<f64> {
        if self.decayed <= 0.0 || weight <= 0.0 {
            return None;
        }
        let drift = if half_life_ms == 0 {
            0.0
        } else {
            (self.at as f64 - epoch as f64) / half_life_ms as f64
        };
        Some((self.decayed / weight).log2() + drift)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: u64 = 3_600_000;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1.0)
    }

    #[test]
    fn usage_halves_in_one_half_life_whatever_the_steps() {
        let start = DecayedUsage {
            decayed: 1000.0,
            raw: 1000.0,
            at: 5_000,
        };
        let mut once = start;
        once.advance(5_000 + H, 0.0, H);
        assert!(close(once.decayed, 500.0), "{}", once.decayed);
        let mut steps = start;
        for dt in [1u64, 17, 999, 123_456, 7, 2_000_000] {
            steps.advance(steps.at + dt, 0.0, H);
        }
        steps.advance(5_000 + H, 0.0, H);
        assert!(close(steps.decayed, 500.0), "{}", steps.decayed);
        assert_eq!(steps.raw, 1000.0, "raw usage never decays");
        let mut two = start;
        two.advance(5_000 + 2 * H, 0.0, H);
        assert!(close(two.decayed, 250.0));
    }

    #[test]
    fn charging_does_not_depend_on_how_often_it_is_brought_up_to_date() {
        let mut once = DecayedUsage::default();
        once.advance(3 * H, 2.0, H);
        let mut often = DecayedUsage::default();
        let mut t = 0;
        for dt in [1u64, 5_000, 77, 1_000_000, 3_333_333, 42].iter().cycle() {
            t = (t + dt).min(3 * H);
            often.advance(t, 2.0, H);
            if t == 3 * H {
                break;
            }
        }
        assert!(
            close(once.decayed, often.decayed),
            "{} {}",
            once.decayed,
            often.decayed
        );
        assert!(close(once.raw, 2.0 * 3.0 * 3600.0));
        // What was charged in the first half-life has halved twice by the end.
        let mut first = DecayedUsage::default();
        first.advance(H, 2.0, H);
        let mut later = first;
        later.advance(3 * H, 0.0, H);
        assert!(close(later.decayed, first.decayed / 4.0));
    }

    #[test]
    fn no_decay_is_plain_sums() {
        let mut u = DecayedUsage::default();
        u.advance(10_000, 3.0, 0);
        assert_eq!(u.decayed, 30.0);
        u.advance(1_000_000_000, 0.0, 0);
        assert_eq!(u.decayed, 30.0);
    }

    #[test]
    fn a_refund_takes_back_exactly_what_the_container_charged() {
        let mut with = DecayedUsage::default();
        with.advance(1_000, 1.0, H);
        // A second container of 4 units per second from 1 s to 61 s, preempted.
        with.advance(61_000, 5.0, H);
        with.refund(4.0, 1_000, H);
        let mut without = DecayedUsage::default();
        without.advance(61_000, 1.0, H);
        assert!(
            close(with.decayed, without.decayed),
            "{} {}",
            with.decayed,
            without.decayed
        );
        assert!(close(with.raw, without.raw));
        // Never below zero.
        with.refund(1000.0, 0, H);
        assert_eq!(with.decayed, 0.0);
    }

    #[test]
    fn places_compare_as_usages_whenever_each_was_brought_up_to_date() {
        let a = DecayedUsage {
            decayed: 100.0,
            raw: 100.0,
            at: 0,
        };
        let b = DecayedUsage {
            decayed: 60.0,
            raw: 60.0,
            at: H,
        };
        // At H, a holds 50 and b 60: b is further along, though its number is smaller.
        assert!(b.place(1.0, 0, H) > a.place(1.0, 0, H));
        assert!(
            a.place(2.0, 0, H) < a.place(1.0, 0, H),
            "a larger share lowers the place"
        );
        assert_eq!(DecayedUsage::default().place(1.0, 0, H), None);
        let a_later = a.as_of(5 * H, 0.0, H);
        assert!((a_later.place(1.0, 0, H).unwrap() - a.place(1.0, 0, H).unwrap()).abs() < 1e-9);
    }
}
