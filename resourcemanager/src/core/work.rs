//! Work counters: what the core has done, counted, never timed. Deterministic for the same
//! inputs, so a test may hold them under ceilings (`tests/work_ceilings.rs`) where a timed
//! test could not, and the benchmarks print them beside their times.

use super::*;

/// Everything the core counts of its own work since it was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkCounts {
    /// Scheduling passes.
    pub passes: u64,
    /// Leaves a pass served (one per pick of the most under-served leaf).
    pub leaves_served: u64,
    /// Applications a pass looked at.
    pub apps_visited: u64,
    /// Searches for a node (single asks and gangs).
    pub node_searches: u64,
    /// Placements made.
    pub placements: u64,
    /// Gang plans made (each a walk over candidate nodes).
    pub gang_plans: u64,
    /// Partitions passes served.
    pub partitions_walked: u64,
    /// Nodes a search tested for an ask, or a gang plan's candidate order yielded.
    pub node_probes: u64,
    /// Nodes yielded by walks of the scheduler's whole node index.
    pub node_index_walked: u64,
    /// Held nodes read.
    pub holds_examined: u64,
    /// Entries walks of the core's application, node and container tables could visit.
    pub apps_walked: u64,
    pub nodes_walked: u64,
    pub containers_walked: u64,
    /// Running units the preemption monitor's rounds built as candidates.
    pub preemption_candidates: u64,
}

impl WorkCounts {
    /// What was done between `earlier` and `self`.
    pub fn since(&self, earlier: &WorkCounts) -> WorkCounts {
        WorkCounts {
            passes: self.passes - earlier.passes,
            leaves_served: self.leaves_served - earlier.leaves_served,
            apps_visited: self.apps_visited - earlier.apps_visited,
            node_searches: self.node_searches - earlier.node_searches,
            placements: self.placements - earlier.placements,
            gang_plans: self.gang_plans - earlier.gang_plans,
            partitions_walked: self.partitions_walked - earlier.partitions_walked,
            node_probes: self.node_probes - earlier.node_probes,
            node_index_walked: self.node_index_walked - earlier.node_index_walked,
            holds_examined: self.holds_examined - earlier.holds_examined,
            apps_walked: self.apps_walked - earlier.apps_walked,
            nodes_walked: self.nodes_walked - earlier.nodes_walked,
            containers_walked: self.containers_walked - earlier.containers_walked,
            preemption_candidates: self.preemption_candidates - earlier.preemption_candidates,
        }
    }

    /// Each counter with its name, in declaration order.
    pub fn named(&self) -> [(&'static str, u64); 14] {
        [
            ("passes", self.passes),
            ("leaves_served", self.leaves_served),
            ("apps_visited", self.apps_visited),
            ("node_searches", self.node_searches),
            ("placements", self.placements),
            ("gang_plans", self.gang_plans),
            ("partitions_walked", self.partitions_walked),
            ("node_probes", self.node_probes),
            ("node_index_walked", self.node_index_walked),
            ("holds_examined", self.holds_examined),
            ("apps_walked", self.apps_walked),
            ("nodes_walked", self.nodes_walked),
            ("containers_walked", self.containers_walked),
            ("preemption_candidates", self.preemption_candidates),
        ]
    }
}

impl RmCore {
    /// See [`WorkCounts`].
    pub fn work(&self) -> WorkCounts {
        let s = &self.sched.stats;
        let n = self.sched.nodes().work();
        WorkCounts {
            passes: s.passes,
            leaves_served: s.leaves_served,
            apps_visited: s.apps_visited,
            node_searches: s.node_searches,
            placements: s.placements,
            gang_plans: s.gang_plans,
            partitions_walked: s.partitions_walked,
            node_probes: n.probes,
            node_index_walked: n.walked,
            holds_examined: n.holds_examined,
            apps_walked: self.apps.walked(),
            nodes_walked: self.nodes.walked(),
            containers_walked: self.containers.walked(),
            preemption_candidates: self.preemption.candidates_examined,
        }
    }
}
