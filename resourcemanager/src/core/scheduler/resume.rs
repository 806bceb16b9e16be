//! Where a leaf's next visit starts: per partition and leaf, the last application of the
//! run from the leaf's start that the scheduler found it cannot serve, kept from one pass
//! to the next while nothing that could make those applications servable has happened.
//!
//! Within a pass nothing makes a passed-over application servable: room only shrinks,
//! usage only grows, shapes and users only fail. Between passes more happens, so a run is
//! kept across passes only when every application in it waited for a reason that only these
//! undo, each of which drops it:
//! - room growing anywhere (a release, a node, a hold given up, a configuration or label
//!   change, an application removed or moved): the node index's room epoch;
//! - an application at or before the cursor asking anew or being re-ordered;
//! - for a run that a user limit stopped, the leaf's usage growing or one of its users
//!   leaving (both raise the limit).
//!
//! Runs with an application that waited for anything else (a gang, a placement constraint,
//! a local ask's relaxing delay) last only for the pass. This is what makes a pass over a
//! full cluster cost what changed since the last one, not every waiting application.
//!
//! Must not: decide whether an application can be served (the pass does).

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

use spindle_common::{ApplicationId, Resource};

use super::QueueIdx;

/// An application's place in its leaf's serving order.
pub(super) type OrderEntry = (i64, u64, ApplicationId);

/// Why the applications of a run were passed over, as far as keeping it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct RunWhy {
    /// One waited for something that changes between passes without any of the events
    /// this module watches (a gang, a placement constraint): the run lasts for this pass.
    pub passing: bool,
    /// One stopped at its user's limit, which grows with the leaf's usage.
    pub user_limited: bool,
}

impl RunWhy {
    fn and(self, other: RunWhy) -> RunWhy {
        RunWhy {
            passing: self.passing || other.passing,
            user_limited: self.user_limited || other.user_limited,
        }
    }
}

#[derive(Debug, Clone)]
struct Run {
    cursor: OrderEntry,
    why: RunWhy,
    /// The leaf's user-limit moves when the run was last extended.
    limit_moves: u64,
    /// The users found at their limit within the run: a walk from the leaf's start would
    /// find them there again, and pass over their later applications too.
    blocked: Vec<String>,
}

#[derive(Debug, Clone, Default)]
struct PartitionRuns {
    epoch: u64,
    leaves: BTreeMap<QueueIdx, Run>,
    /// Shapes no node took at this epoch (room has only shrunk since).
    failed_shapes: Vec<Resource>,
}

/// The runs, per partition.
#[derive(Debug, Clone, Default)]
pub(super) struct Resumes {
    parts: BTreeMap<String, PartitionRuns>,
    /// Per leaf: how often something raised its user limit (its usage grew, or one of its
    /// users left).
    limit_moves: Vec<u64>,
}

impl Resumes {
    /// A pass starts in `part`: drops the runs that may no longer hold, and hands over
    /// the shapes known not to fit anywhere (back with [`Self::end`]).
    pub(super) fn begin(&mut self, part: &str, epoch: u64) -> Vec<Resource> {
        let Some(p) = self.parts.get_mut(part) else {
            self.parts.insert(
                part.to_string(),
                PartitionRuns {
                    epoch,
                    ..PartitionRuns::default()
                },
            );
            return Vec::new();
        };
        if p.epoch != epoch {
            p.epoch = epoch;
            p.leaves.clear();
            p.failed_shapes.clear();
            return Vec::new();
        }
        let moves = &self.limit_moves;
        p.leaves.retain(|leaf, r| {
            let limit_rose = moves.get(leaf.0).copied().unwrap_or(0) != r.limit_moves;
            !(r.why.passing || r.why.user_limited && limit_rose)
        });
        std::mem::take(&mut p.failed_shapes)
    }

    /// The pass is done with `part`: the shapes it found no node for are kept while room
    /// has not grown since it began.
    pub(super) fn end(&mut self, part: &str, epoch: u64, failed_shapes: Vec<Resource>) {
        if let Some(p) = self.parts.get_mut(part).filter(|p| p.epoch == epoch) {
            p.failed_shapes = failed_shapes;
        }
    }

    /// The users each kept run of `part` found at their limit, with the leaf and the run's
    /// end: a pass resuming after the run starts with them blocked, as a walk through it
    /// would block them.
    pub(super) fn blocked(&self, part: &str) -> impl Iterator<Item = (QueueIdx, OrderEntry, &str)> {
        self.parts
            .get(part)
            .into_iter()
            .flat_map(|p| p.leaves.iter())
            .flat_map(|(leaf, r)| r.blocked.iter().map(move |u| (*leaf, r.cursor, u.as_str())))
    }

    /// The leaves of `part` whose every waiting application (the last at `last`) is
    /// known not servable in this pass.
    pub(super) fn walked<'a>(
        &'a self,
        part: &str,
        last: impl Fn(QueueIdx) -> Option<OrderEntry> + 'a,
    ) -> impl Iterator<Item = QueueIdx> + 'a {
        self.parts
            .get(part)
            .into_iter()
            .flat_map(|p| p.leaves.iter())
            .filter(move |(leaf, r)| last(**leaf).is_some_and(|l| l <= r.cursor))
            .map(|(leaf, _)| *leaf)
    }

    /// Where `leaf`'s visit in `part` starts (after this application), if anywhere.
    pub(super) fn get(&mut self, part: &str, leaf: QueueIdx, epoch: u64) -> Option<OrderEntry> {
        let p = self.parts.get_mut(part)?;
        if p.epoch != epoch {
            p.epoch = epoch;
            p.leaves.clear();
            p.failed_shapes.clear();
            return None;
        }
        p.leaves.get(&leaf).map(|r| r.cursor)
    }

    /// The run of `leaf` in `part` now ends at `cursor`; `why` says why its newest
    /// applications were passed over (added to what the run already carried), `blocked`
    /// which users it found at their limit (all of them so far: a set that only grows, so
    /// it is copied only when its size changed).
    pub(super) fn extend<'a>(
        &mut self,
        part: &str,
        leaf: QueueIdx,
        cursor: OrderEntry,
        why: RunWhy,
        blocked: impl Iterator<Item = &'a String> + Clone,
    ) {
        let Some(p) = self.parts.get_mut(part) else {
            return;
        };
        match p.leaves.entry(leaf) {
            // A run extended keeps the moves it began with: a limit that rose since then may
            // have let its first applications through.
            Entry::Occupied(mut e) => {
                let r = e.get_mut();
                r.cursor = cursor;
                r.why = r.why.and(why);
                if blocked.clone().count() != r.blocked.len() {
                    r.blocked = blocked.cloned().collect();
                }
            }
            Entry::Vacant(e) => {
                e.insert(Run {
                    cursor,
                    why,
                    limit_moves: self.limit_moves.get(leaf.0).copied().unwrap_or(0),
                    blocked: blocked.cloned().collect(),
                });
            }
        }
    }

    /// An application of `leaf` at `entry` asks anew or was re-ordered: a run through it
    /// no longer holds, in any partition.
    pub(super) fn reopen(&mut self, leaf: QueueIdx, entry: &OrderEntry) {
        for p in self.parts.values_mut() {
            if p.leaves.get(&leaf).is_some_and(|r| *entry <= r.cursor) {
                p.leaves.remove(&leaf);
            }
        }
    }

    /// Forgets every run: each pass walks every application again (what passes did before
    /// runs were kept; tests compare the two). The shapes known not to fit are kept: the
    /// pass skips an ask of such a shape before its user's limit is looked at, so a walk
    /// that searched for it again could find its user at the limit where one that knew
    /// better does not (a difference of which check comes first, not of what fits).
    #[cfg(test)]
    pub(crate) fn forget(&mut self) {
        for p in self.parts.values_mut() {
            p.leaves.clear();
        }
    }

    /// Something raised `leaf`'s user limit (its usage grew, or a user left): a run a user
    /// limit stopped is walked again from the next pass.
    pub(super) fn limit_moved(&mut self, leaf: QueueIdx) {
        if self.limit_moves.len() <= leaf.0 {
            self.limit_moves.resize(leaf.0 + 1, 0);
        }
        self.limit_moves[leaf] += 1;
    }
}
