//! Fair share between sibling queues: under a parent whose every leaf is `fairshare`, the
//! room above guarantees (the slack) goes to the child furthest below its share of decayed
//! usage: the least decayed usage (its users' in every leaf below it, billed and decayed as
//! theirs) over its guarantee first. Guarantees and maxima stay hard: a queue below its
//! guarantee is still served before any other (`pass::order_key`), and nothing here
//! touches a maximum. Elsewhere the siblings keep YARN's order (used over guaranteed),
//! which also breaks ties here (a new cluster, with no usage yet).
//!
//! Cost: worked out once per `spindle.scheduler.fairshare.calc-period-ms` with the users'
//! places ([`Scheduler::refresh_fairshare`]) and after a reconfiguration; a pass reads one
//! number per child.

use super::*;

impl Scheduler {
    /// The key a pass orders `q` by among siblings at or over their guarantees, where its
    /// parent's leaves are all `fairshare`.
    pub(super) fn slack_key(&self, q: QueueIdx) -> Option<f64> {
        self.fs.slack.get(q.0).copied().flatten()
    }

    /// Works out every queue's [`Self::slack_key`] from usage brought up to now.
    pub(super) fn refresh_slack_keys(&mut self) {
        let n = self.tree.queues.len();
        // Whether every leaf at or under each queue is `fairshare`, and each queue's decayed
        // usage, children before parents.
        let mut all_fair = vec![true; n];
        let mut usage = vec![0.0; n];
        for i in (0..n).rev() {
            let q = &self.tree.queues[QueueIdx(i)];
            if q.is_leaf() {
                all_fair[i] = q.spec.ordering == OrderingPolicy::Fairshare;
                usage[i] = self.leaf_decayed(QueueIdx(i));
            }
            if let Some(p) = q.parent {
                all_fair[p.0] &= all_fair[i];
                usage[p.0] += usage[i];
            }
        }
        self.fs.slack = (0..n)
            .map(|i| {
                let q = &self.tree.queues[QueueIdx(i)];
                let parent = q.parent?;
                if !all_fair[parent.0] {
                    return None;
                }
                let g = self.share(&q.guaranteed);
                Some(if g > 0.0 { usage[i] / g } else { f64::INFINITY })
            })
            .collect();
    }
}
