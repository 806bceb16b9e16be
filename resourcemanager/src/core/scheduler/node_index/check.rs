//! The node index checked against its nodes: the sums it keeps (schedulable totals and use,
//! per partition and over the cluster, shapes, members, the largest node) recomputed from
//! the nodes themselves, for the core's `sanity_check`.

use super::*;

impl NodeIndex {
    /// The index's own sums against its nodes: the schedulable totals and use, per
    /// partition and over the cluster, and the count (for `sanity_check`).
    pub fn check(&self) -> Result<(), String> {
        let mut cluster = Resource::zero();
        let mut used = Resource::zero();
        let mut overdrawn = Resource::zero();
        let mut parts: BTreeMap<&str, Resource> = BTreeMap::new();
        let mut shapes: BTreeMap<&str, BTreeMap<&Resource, usize>> = BTreeMap::new();
        let mut members: ByPartition<usize> = ByPartition::default();
        let mut count = 0;
        for n in self.iter() {
            members.count(&n.partition, true);
            if n.schedulable != (n.healthy && !n.draining) {
                return Err(format!(
                    "node {} schedulable={} but healthy={} draining={}",
                    n.id, n.schedulable, n.healthy, n.draining
                ));
            }
            if !n.schedulable {
                if self.reserved.contains_key(&self.slot_of[&n.id]) {
                    return Err(format!("unschedulable node {} is held for a gang", n.id));
                }
                continue;
            }
            cluster.add_assign(&n.total);
            used.add_assign(&n.used);
            if let Some(o) = overdraft(&n.free) {
                overdrawn.add_assign(&o);
            }
            parts.entry(&n.partition).or_default().add_assign(&n.total);
            *shapes
                .entry(&n.partition)
                .or_default()
                .entry(&n.total)
                .or_default() += 1;
            count += 1;
        }
        let same = |a: &Resource, b: &Resource| a.minus(b).is_zero();
        if !same(&overdrawn, &self.overdrawn) {
            return Err(format!(
                "the node index says its nodes are used {} beyond their totals; they say {overdrawn}",
                self.overdrawn
            ));
        }
        if !same(&cluster, &self.cluster)
            || !same(&used, &self.cluster_used)
            || count != self.schedulable_count
        {
            return Err(format!(
                "the node index sums {} nodes, total {}, used {}; its nodes say {count}, {cluster}, {used}",
                self.schedulable_count, self.cluster, self.cluster_used
            ));
        }
        let names: BTreeSet<&str> = parts
            .keys()
            .copied()
            .chain(self.partition_total.keys())
            .collect();
        for p in names {
            let total = self.partition_total(p);
            let expect = parts.get(p).cloned().unwrap_or_default();
            if !same(&total, &expect) {
                return Err(format!(
                    "partition `{p}` sums {total} but its schedulable nodes {expect}"
                ));
            }
            let kept: BTreeMap<&Resource, usize> = self.partition_shapes(p).collect();
            let counted = shapes.remove(p).unwrap_or_default();
            if kept != counted {
                return Err(format!(
                    "partition `{p}` keeps node shapes {kept:?} but its schedulable nodes have {counted:?}"
                ));
            }
        }
        if members != self.members {
            return Err(format!(
                "the node index counts {:?} nodes per partition but has {members:?}",
                self.members
            ));
        }
        let largest = self
            .iter()
            .filter(|n| n.healthy)
            .fold(Resource::zero(), |l, n| max_each(&l, &n.total));
        if largest != self.largest {
            return Err(format!(
                "the node index's largest node is {} but its nodes' is {largest}",
                self.largest
            ));
        }
        Ok(())
    }
}
