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

use super::by_partition::ByPartition;
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

/// The run of the leaf a visit is walking, written to its partition's runs once, when the
/// visit ends ([`Resumes::close`]): a visit passes over many applications, and a run's
/// cursor written back at each would cost a map lookup per application.
#[derive(Debug, Clone)]
struct OpenRun {
    leaf: QueueIdx,
    /// Where the run now ends, and why the visit passed over its applications so far.
    end: Option<(OrderEntry, RunWhy)>,
    /// The leaf's user-limit moves when the visit first passed over an application: a run
    /// it starts keeps them (the visit's own placement may move them).
    limit_moves: u64,
    /// An application at or before the run's end was re-ordered in the visit: the run kept
    /// from earlier passes no longer holds either.
    reset: bool,
}

/// The runs, per partition.
#[derive(Debug, Clone, Default)]
pub(super) struct Resumes {
    parts: ByPartition<PartitionRuns>,
    /// Per leaf: how often something raised its user limit (its usage grew, or one of its
    /// users left).
    limit_moves: Vec<u64>,
    /// The run of the visit in progress, if one is.
    open: Option<OpenRun>,
}

impl Resumes {
    /// A pass starts in `part`: drops the runs that may no longer hold, and hands over
    /// the shapes known not to fit anywhere (back with [`Self::end`]).
    pub(super) fn begin(&mut self, part: &str, epoch: u64) -> Vec<Resource> {
        let Some(p) = self.parts.get_mut(part) else {
            self.parts.insert(
                part,
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

    /// A visit of `leaf` in `part` begins: where it starts (after this application), if
    /// anywhere. Its run is written back by [`Self::close`].
    pub(super) fn open(&mut self, part: &str, leaf: QueueIdx, epoch: u64) -> Option<OrderEntry> {
        debug_assert!(self.open.is_none(), "a visit was left open");
        self.open = Some(OpenRun {
            leaf,
            end: None,
            limit_moves: 0,
            reset: false,
        });
        let p = self.parts.get_mut(part)?;
        if p.epoch != epoch {
            p.epoch = epoch;
            p.leaves.clear();
            p.failed_shapes.clear();
            return None;
        }
        p.leaves.get(&leaf).map(|r| r.cursor)
    }

    /// The open visit passed over every application up to `cursor`; `why` says why (all
    /// it found so far in this visit).
    pub(super) fn pass_over(&mut self, cursor: OrderEntry, why: RunWhy) {
        let Some(o) = self.open.as_mut() else {
            return;
        };
        if o.end.is_none() {
            o.limit_moves = self.limit_moves.get(o.leaf.0).copied().unwrap_or(0);
        }
        o.end = Some((cursor, why));
    }

    /// The open visit of `part` ends: its leaf's run now ends where the visit last passed
    /// over an application (`why` added to what the run already carried), and `blocked`,
    /// given that end, says which users it found at their limit (all of them so far: a
    /// set that only grows, so it is copied only when its size changed).
    pub(super) fn close<'a, I>(&mut self, part: &str, blocked: impl FnOnce(OrderEntry) -> I)
    where
        I: Iterator<Item = &'a String> + Clone,
    {
        let Some(o) = self.open.take() else {
            return;
        };
        let Some(p) = self.parts.get_mut(part) else {
            return;
        };
        if o.reset {
            p.leaves.remove(&o.leaf);
        }
        let Some((cursor, why)) = o.end else {
            return;
        };
        let blocked = blocked(cursor);
        match p.leaves.entry(o.leaf) {
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
                    limit_moves: o.limit_moves,
                    blocked: blocked.cloned().collect(),
                });
            }
        }
    }

    /// An application of `leaf` at `entry` asks anew or was re-ordered: a run through it
    /// no longer holds, in any partition.
    pub(super) fn reopen(&mut self, leaf: QueueIdx, entry: &OrderEntry) {
        if let Some(o) = self.open.as_mut().filter(|o| o.leaf == leaf) {
            if o.end.is_some_and(|(c, _)| *entry <= c) {
                o.end = None;
                o.reset = true;
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(k: i64) -> OrderEntry {
        (k, 0, ApplicationId::new(1, k as u32))
    }

    const LEAF: QueueIdx = QueueIdx(3);
    const LIMITED: RunWhy = RunWhy {
        passing: false,
        user_limited: true,
    };

    /// Ends the open visit of the default partition, no user found at a limit.
    fn close(r: &mut Resumes) {
        r.close("", |_| std::iter::empty());
    }

    /// A visit that passed over applications 1 and 2 of `LEAF` in the default partition.
    fn visited(r: &mut Resumes) {
        r.begin("", 7);
        assert_eq!(r.open("", LEAF, 7), None);
        r.pass_over(entry(1), RunWhy::default());
        r.pass_over(entry(2), LIMITED);
    }

    #[test]
    fn a_visit_writes_its_run_once_it_closes() {
        let mut r = Resumes::default();
        visited(&mut r);
        close(&mut r);
        r.begin("", 7);
        assert_eq!(r.open("", LEAF, 7), Some(entry(2)));
        close(&mut r);
    }

    #[test]
    fn an_application_reordered_within_the_open_run_drops_it_and_the_kept_one() {
        let mut r = Resumes::default();
        visited(&mut r);
        close(&mut r);
        // The next visit resumes after 2, passes over 3, then 2 is re-ordered to 3's
        // place: neither the kept run nor the visit's may stand.
        assert_eq!(r.open("", LEAF, 7), Some(entry(2)));
        r.pass_over(entry(3), RunWhy::default());
        r.reopen(LEAF, &entry(3));
        close(&mut r);
        assert_eq!(r.open("", LEAF, 7), None);
        // A re-order after the run's end leaves it.
        r.pass_over(entry(4), RunWhy::default());
        r.reopen(LEAF, &entry(5));
        close(&mut r);
        assert_eq!(r.open("", LEAF, 7), Some(entry(4)));
        close(&mut r);
    }

    #[test]
    fn a_run_keeps_the_limit_moves_from_when_the_visit_first_passed_over() {
        let mut r = Resumes::default();
        visited(&mut r);
        // The visit's own placement raised the limit after it passed over 1 and 2: the
        // run, user-limited, must be walked again next pass.
        r.limit_moved(LEAF);
        close(&mut r);
        r.begin("", 7);
        assert_eq!(r.open("", LEAF, 7), None);
        close(&mut r);
    }
}
