//! Why an ask waits for room under the queues' maxima or its user's limit, typed: which
//! queue on its path is full, which queues hold that room and how far above their
//! guarantees, and whether the preemption monitor will take it back; or the user limit it is
//! at. Worked out only when a waiting ask's reason is
//! read (an AM's allocate, a REST view, a gang's timeout), never by a scheduling pass, and
//! rendered to text in one place ([`std::fmt::Display`]).

use std::fmt;

use spindle_common::Resource;

use super::queue_tree::{ratio, QueueIdx};
use super::Scheduler;

/// Why an ask that fits no queue room waits.
#[derive(Debug, Clone, PartialEq)]
pub enum WaitReason {
    /// The ask's own queue is at its maximum with its own work.
    QueueAtMaximum {
        queue: String,
        /// Percent of the cluster (or partition) the queue uses and may use at most.
        used_pct: f64,
        max_pct: f64,
    },
    /// The ask's user is at its user limit in the queue (YARN's `user-limit-factor` and
    /// `minimum-user-limit-percent`): the user's other work must end first.
    UserLimit {
        user: String,
        queue: String,
        /// What the user uses in the queue, and its limit there now.
        used: Resource,
        limit: Resource,
    },
    /// The queues have room, but no node of the partition has the ask's GPUs and memory
    /// free now (Slurm's `Resources`).
    NoNodeRoom { need: Resource, partition: String },
    /// A parent, the root or a partition is full of other queues' work.
    Full {
        scope: FullScope,
        /// The other queues under `scope` that use room, the farthest above its guarantee
        /// first.
        holders: Vec<RoomHolder>,
        reclaim: Reclaim,
    },
}

/// What is full above the waiting queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FullScope {
    /// The root in the default partition: the whole cluster.
    Root,
    /// The root's share of a labelled partition.
    Partition(String),
    /// A parent queue at its maximum.
    Parent(String),
}

/// A queue holding room the waiting ask needs.
#[derive(Debug, Clone, PartialEq)]
pub struct RoomHolder {
    pub queue: String,
    /// Percent of the cluster (or partition) it uses, and its guarantee in the same terms.
    pub used_pct: f64,
    pub guarantee_pct: f64,
}

impl RoomHolder {
    /// Percentage points above its guarantee (0 when within it).
    pub fn above(&self) -> f64 {
        (self.used_pct - self.guarantee_pct).max(0.0)
    }
}

/// Whether the preemption monitor will take the room back for the waiting queue.
#[derive(Debug, Clone, PartialEq)]
pub enum Reclaim {
    /// It will: the monitor is on, the waiting queue is below its guarantee and `holders`
    /// are above theirs.
    Monitor { waiting: String },
    /// The monitor is off (or only observes).
    MonitorOff,
    /// The waiting queue already uses its guarantee: room above a guarantee is not taken
    /// back for it.
    WaiterAtGuarantee {
        waiting: String,
        used_pct: f64,
        guarantee_pct: f64,
    },
    /// Every holder is within its guarantee: there is nothing to take back.
    HoldersWithinGuarantee,
}

/// The scope's name as the text says it.
impl fmt::Display for FullScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FullScope::Root => write!(f, "root is full"),
            FullScope::Partition(p) => write!(f, "partition {p} is full"),
            FullScope::Parent(q) => write!(f, "parent queue {q} is at its maximum"),
        }
    }
}

impl fmt::Display for WaitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitReason::NoNodeRoom { need, partition } => {
                let gpus = need.get(spindle_common::resource::GPU);
                let what = if gpus > 0 {
                    format!("{gpus} GPUs and {} MB", need.memory_mb)
                } else {
                    format!("{} MB", need.memory_mb)
                };
                let where_ = if partition.is_empty() {
                    String::new()
                } else {
                    format!(" of partition {partition}")
                };
                write!(
                    f,
                    "no node{where_} has {what} free now: it waits for running containers to end"
                )
            }
            WaitReason::UserLimit {
                user,
                queue,
                used,
                limit,
            } => write!(
                f,
                "user {user} is at its user limit in queue {queue}: it uses {used}, its limit is {limit} (the queue's user-limit-factor and minimum-user-limit-percent), so it waits until the user's other containers end"
            ),
            WaitReason::QueueAtMaximum {
                queue,
                used_pct,
                max_pct,
            } => write!(
                f,
                "its queue {queue} has no room for it under its maximum: it uses {used_pct:.0}% of the cluster, at most {max_pct:.0}%, and must first drain"
            ),
            WaitReason::Full {
                scope,
                holders,
                reclaim,
            } => {
                write!(f, "{scope}")?;
                let of = match scope {
                    FullScope::Partition(p) => format!("partition {p}"),
                    _ => "the cluster".to_string(),
                };
                for (i, h) in holders.iter().enumerate() {
                    let sep = if i == 0 { ": " } else { "; " };
                    write!(f, "{sep}{} uses {:.0}% of {of}, ", h.queue, h.used_pct)?;
                    if h.above() >= 0.5 {
                        write!(
                            f,
                            "{:.0} points above its {:.0}% guarantee",
                            h.above(),
                            h.guarantee_pct
                        )?;
                    } else {
                        write!(f, "within its {:.0}% guarantee", h.guarantee_pct)?;
                    }
                }
                match reclaim {
                    Reclaim::Monitor { waiting } => write!(
                        f,
                        "; the preemption monitor will take it back, since {waiting} is below its guarantee"
                    ),
                    Reclaim::MonitorOff => write!(
                        f,
                        "; the preemption monitor is off, so it waits until that work ends"
                    ),
                    Reclaim::WaiterAtGuarantee {
                        waiting,
                        used_pct,
                        guarantee_pct,
                    } => write!(
                        f,
                        "; the preemption monitor will not take it back: {waiting} already uses {used_pct:.0}%, at or above its {guarantee_pct:.0}% guarantee"
                    ),
                    Reclaim::HoldersWithinGuarantee => write!(
                        f,
                        "; the preemption monitor will not take it back: every holder is within its guarantee"
                    ),
                }
            }
        }
    }
}

impl Scheduler {
    /// A gang's diagnostics as read: how far its last plan got, and why its queues have no
    /// room for it when that is why it waits.
    pub fn gang_diagnostics(
        &self,
        app: &spindle_common::ApplicationId,
        id: &str,
        monitor: bool,
    ) -> String {
        let Some(g) = self.apps.get(app).and_then(|a| a.gangs.get(id)) else {
            return String::new();
        };
        match self.gang_room_reason(app, id, monitor) {
            Some(r) => format!("{}; {r}", g.diagnostics),
            None => g.diagnostics.clone(),
        }
    }

    /// Why a waiting gang has no room under its queues' maxima, if that is why it waits
    /// (as of its last turn).
    pub fn gang_room_reason(
        &self,
        app: &spindle_common::ApplicationId,
        id: &str,
        monitor: bool,
    ) -> Option<WaitReason> {
        let a = self.apps.get(app)?;
        let g = a.gangs.get(id).filter(|g| g.phase.is_waiting())?;
        let need = g.short_of_room.as_ref()?;
        let own_hold = self.gang_own_hold(app, id, a.queue);
        self.room_reason(a.queue, &g.params.partition, need, &own_hold, monitor)
    }

    /// Why the first pending plain ask of an application (no gang's; its AM's when `am`,
    /// else the others, by request priority) has no room under its queues' maxima, if that
    /// is why it waits.
    pub fn ask_room_reason(
        &self,
        app: &spindle_common::ApplicationId,
        am: bool,
        monitor: bool,
    ) -> Option<WaitReason> {
        let a = self.apps.get(app)?;
        let ask = a
            .asks
            .values()
            .find(|x| x.any > 0 && x.gang.is_none() && x.is_am == am)?;
        let need = &ask.capability;
        self.room_reason(a.queue, &ask.partition, need, &Resource::zero(), monitor)
            .or_else(|| self.user_limit_reason(a.queue, &a.user, ask))
            .or_else(|| {
                let fits = self.nodes().has_room_for(
                    &ask.partition,
                    need.get(spindle_common::resource::GPU),
                    need.memory_mb,
                );
                (!fits && self.nodes().partition_nodes(&ask.partition) > 0).then(|| {
                    WaitReason::NoNodeRoom {
                        need: need.clone(),
                        partition: ask.partition.clone(),
                    }
                })
            })
    }

    /// Why a plain ask of `user` in `leaf` waits when the user limit holds it (as the pass
    /// decides it: [`Self::user_limit_reached`]; AM containers and asks of a labelled
    /// partition are not under it).
    fn user_limit_reason(
        &self,
        leaf: QueueIdx,
        user: &str,
        ask: &super::Ask,
    ) -> Option<WaitReason> {
        if ask.is_am || !ask.partition.is_empty() {
            return None;
        }
        let queue = &self.tree.queues[leaf];
        let used = queue
            .users
            .get(user)
            .map(|u| u.used.clone())
            .unwrap_or_default();
        let limit = self.user_limit_reached(leaf, &used, &ask.capability)?;
        Some(WaitReason::UserLimit {
            user: user.to_string(),
            queue: queue.spec.path.to_string(),
            used,
            limit,
        })
    }

    /// Why an ask of `need` for `leaf` in `part` waits for queue room, when a queue on its
    /// path is full (`monitor`: the preemption monitor is on and acts).
    pub fn room_reason(
        &self,
        leaf: QueueIdx,
        part: &str,
        need: &Resource,
        own_hold: &Resource,
        monitor: bool,
    ) -> Option<WaitReason> {
        let full = self.queue_blocking(leaf, need, part, Some(own_hold))?;
        let calc = self.conf.calculator;
        let total = self.tree.queues[self.tree.root()].limits_in(part).1;
        let pct = |r: &Resource| {
            let v = ratio(calc, r, &total) * 100.0;
            if v.is_finite() {
                v
            } else {
                0.0
            }
        };
        let share = |q: QueueIdx| {
            let queue = &self.tree.queues[q];
            let (guaranteed, maximum) = queue.limits_in(part);
            (
                pct(&queue.used_in(part)),
                pct(&guaranteed),
                pct(&maximum),
                queue.spec.path.to_string(),
            )
        };
        if full == leaf {
            let (used_pct, _, max_pct, queue) = share(leaf);
            return Some(WaitReason::QueueAtMaximum {
                queue,
                used_pct,
                max_pct,
            });
        }
        // The siblings of every queue on the waiter's path below the full one hold its
        // room (the waiter's own branch aside).
        let path: Vec<QueueIdx> = self.tree.path_up(leaf).take_while(|q| *q != full).collect();
        let mut holders: Vec<RoomHolder> = path
            .iter()
            .filter_map(|q| self.tree.queues[*q].parent.map(|p| (*q, p)))
            .flat_map(|(q, p)| {
                self.tree.queues[p]
                    .children
                    .iter()
                    .copied()
                    .filter(move |c| *c != q)
            })
            .filter(|c| !self.tree.queues[*c].used_in(part).is_zero())
            .map(|c| {
                let (used_pct, guarantee_pct, _, queue) = share(c);
                RoomHolder {
                    queue,
                    used_pct,
                    guarantee_pct,
                }
            })
            .collect();
        holders.sort_by(|a, b| b.above().total_cmp(&a.above()));
        let scope = match (self.tree.queues[full].parent, part) {
            (None, "") => FullScope::Root,
            (None, p) => FullScope::Partition(p.to_string()),
            (Some(_), _) => FullScope::Parent(self.tree.queues[full].spec.path.to_string()),
        };
        let (used_pct, guarantee_pct, _, waiting) = share(leaf);
        // The monitor takes room back only for a queue below its guarantee.
        let at_guarantee = {
            let queue = &self.tree.queues[leaf];
            let g = queue.limits_in(part).0;
            g.is_zero() || ratio(calc, &queue.used_in(part), &g) >= 1.0
        };
        let reclaim = if !monitor {
            Reclaim::MonitorOff
        } else if at_guarantee {
            Reclaim::WaiterAtGuarantee {
                waiting,
                used_pct,
                guarantee_pct,
            }
        } else if holders.iter().all(|h| h.above() < 0.5) {
            Reclaim::HoldersWithinGuarantee
        } else {
            Reclaim::Monitor { waiting }
        };
        Some(WaitReason::Full {
            scope,
            holders,
            reclaim,
        })
    }
}
