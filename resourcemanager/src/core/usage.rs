//! Per-application usage: resource x time per resource type (YARN's `resourceSecondsMap`
//! and `preemptedResourceSecondsMap`, kept here in resource-milliseconds).
//!
//! A container counts from its allocation to its completion (as `memorySeconds` always
//! has); one that ended by preemption counts in the preempted figures too. Running
//! containers are added up to `now` only when a view is built ([`AppUsage::with_live`]).
//! Users' decayed usage per leaf (the fair share's memory) lives in the scheduler
//! (`scheduler::fairshare`); here the core hands it to the store and takes it back.
//!
//! Pure: time is an argument.

use spindle_common::Resource;

use super::scheduler::FairshareRecord;
use super::{Effect, RmCore};

impl RmCore {
    /// Hands the users' ledgers that changed to the store.
    pub(super) fn persist_fairshare(&mut self) {
        let changed = self.sched.take_fairshare_changes();
        if !changed.is_empty() {
            self.effects.push(Effect::PersistFairshare(changed));
        }
    }

    /// Puts back the users' decayed usage the store kept (at start, before recovery
    /// charges any container).
    pub fn restore_fairshare(&mut self, records: Vec<FairshareRecord>) {
        self.sched.restore_fairshare(records);
    }
}

/// What an application has used, per resource type, in resource-milliseconds (MB-ms,
/// vcore-ms, GPU-ms, ...).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AppUsage {
    /// Every container that ended.
    pub resource_ms: Resource,
    /// The containers among them that were preempted (YARN's `preempted*Seconds`).
    pub preempted_ms: Resource,
}

impl AppUsage {
    /// A container of `resource` ended after `held_ms`; `preempted` when it was taken back
    /// by preemption.
    pub fn add(&mut self, resource: &Resource, held_ms: u64, preempted: bool) {
        let part = resource.times(i64::try_from(held_ms).unwrap_or(i64::MAX));
        self.resource_ms.add_assign(&part);
        if preempted {
            self.preempted_ms.add_assign(&part);
        }
    }

    /// The totals with live containers (their resource and allocation time) counted up to
    /// `now`.
    pub fn with_live<'a>(
        &self,
        live: impl IntoIterator<Item = (&'a Resource, u64)>,
        now: u64,
    ) -> AppUsage {
        let mut u = self.clone();
        for (r, allocated) in live {
            let held = now.saturating_sub(allocated);
            u.resource_ms
                .add_assign(&r.times(i64::try_from(held).unwrap_or(i64::MAX)));
        }
        u
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spindle_common::resource::GPU;

    #[test]
    fn containers_count_resource_times_duration_per_type() {
        let mut u = AppUsage::default();
        let r = Resource::new(1024, 2).with(GPU, 4);
        u.add(&r, 1_000, false);
        u.add(&r, 500, true);
        assert_eq!(u.resource_ms.get(GPU), 6_000);
        assert_eq!(u.resource_ms.memory_mb, 1_536_000);
        assert_eq!(u.preempted_ms.get(GPU), 2_000);
        assert_eq!(u.preempted_ms.vcores, 1_000);
        let live = u.with_live([(&r, 10_000)], 12_000);
        assert_eq!(live.resource_ms.get(GPU), 14_000);
        assert_eq!(
            live.preempted_ms, u.preempted_ms,
            "live containers are not preempted"
        );
        // A clock before the allocation counts nothing, never a negative.
        assert_eq!(u.with_live([(&r, 10_000)], 9_000), u);
    }
}
