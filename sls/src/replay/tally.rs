//! The replay's running counts (GPUs in use and waited for, jobs waiting) and the fairness
//! meter ([`crate::fairness`]), changed together so that they never disagree.

use spindle_resourcemanager::core::RmCore;

use super::Sim;
use crate::fairness::{self, Change, FairnessMeter, Placed};
use crate::trace::Job;

/// The meter for `jobs`' users (shares from the core's leaves) and each job's user index.
pub(super) fn meter(core: &RmCore, jobs: &[Job], total_gpus: i64) -> (FairnessMeter, Vec<usize>) {
    let sched = core.scheduler();
    let tree = sched.tree();
    let placed = jobs.iter().filter_map(|j| {
        let q = tree.get(tree.leaf(&j.queue)?)?;
        Some(Placed {
            leaf: q.spec.path.as_str(),
            abs_capacity: q.abs_capacity / 100.0,
            user: &j.user,
            weight: q.spec.fairshare.weight(&j.user),
        })
    });
    let shares = fairness::shares(placed);
    let mut names: Vec<&str> = jobs.iter().map(|j| j.user.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let user_of = jobs
        .iter()
        .map(|j| names.binary_search(&j.user.as_str()).unwrap_or(0))
        .collect();
    let by_index: Vec<f64> = names
        .iter()
        .map(|u| shares.get(*u).copied().unwrap_or(0.0))
        .collect();
    let fs = &sched.conf().fairshare;
    let m = FairnessMeter::new(&by_index, total_gpus, fs.half_life_ms, fs.calc_period_ms);
    (m, user_of)
}

impl Sim<'_> {
    /// Job `j`'s containers hold `gpus` more (fewer when negative).
    pub(super) fn held(&mut self, j: usize, gpus: i64) {
        self.used_gpus += gpus;
        self.tally(
            j,
            Change {
                held_gpus: gpus,
                ..Change::default()
            },
        );
    }

    /// Job `j` waits for `gpus` more GPUs (fewer when negative).
    pub(super) fn waits_for(&mut self, j: usize, gpus: i64) {
        self.pending_gpus += gpus;
        self.tally(
            j,
            Change {
                waiting_gpus: gpus,
                ..Change::default()
            },
        );
    }

    /// Job `j` begins to wait (`true`: submitted, or taken back whole) or stops waiting.
    pub(super) fn waiting(&mut self, j: usize, waits: bool) {
        let d = if waits {
            self.queued += 1;
            1
        } else if self.queued > 0 {
            self.queued -= 1;
            -1
        } else {
            return;
        };
        self.tally(
            j,
            Change {
                waiting_jobs: d,
                ..Change::default()
            },
        );
    }

    fn tally(&mut self, j: usize, c: Change) {
        if let Some(&u) = self.user_of.get(j) {
            self.fairness.change(u, c, self.now, self.used_gpus);
        }
    }
}
