//! Whether a gang can ever be granted: a gang that needs more than its queue may ever hold,
//! more than its partition has in all, or a member shape larger than any node of its
//! partition would wait for its timeout for nothing. It is refused when it is asked for.
//!
//! Must not: look at what is free now (a gang that waits for room is not refused).

use super::*;

/// Why a gang can never be granted, with the figures that show it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NeverFits {
    #[error(
        "it needs {need} in all, but queue {queue} may use at most {max} (its maximum-capacity)"
    )]
    OverQueueMaximum {
        queue: String,
        need: Box<Resource>,
        max: Box<Resource>,
    },
    #[error("it needs {need} in all, but {partition} has only {total}")]
    OverPartition {
        partition: String,
        need: Box<Resource>,
        total: Box<Resource>,
    },
    #[error("each member needs {shape}, larger than any node of {partition} (the largest has {largest})")]
    NoNodeLargeEnough {
        partition: String,
        shape: Box<Resource>,
        largest: Box<Resource>,
    },
}

fn partition_name(p: &str) -> String {
    if p.is_empty() {
        "the cluster".into()
    } else {
        format!("partition {p}")
    }
}

impl Scheduler {
    /// Checks that `members` containers of `shape` in `partition` could be granted together
    /// to an application of `leaf` on an otherwise idle cluster. A partition without nodes
    /// yet is given the benefit of the doubt: nodes may still register.
    pub fn gang_feasible(
        &self,
        leaf: QueueIdx,
        partition: &str,
        shape: &Resource,
        members: u32,
    ) -> Result<(), NeverFits> {
        // A default-partition gang may also use the idle room non-exclusive partitions lend.
        // The partitions' sums and distinct node shapes are kept by the node index: this
        // costs the shapes, not the nodes.
        let mut total = Resource::zero();
        let mut largest = Resource::zero();
        let mut any_fits = false;
        for p in self.with_lenders(partition) {
            total.add_assign(&self.nodes.partition_total(p));
            for (node_total, _) in self.nodes.partition_shapes(p) {
                any_fits |= shape.fits_in(node_total);
                largest = max_each(&largest, node_total);
            }
        }
        if total.is_zero() || members == 0 {
            return Ok(());
        }
        if !any_fits {
            return Err(NeverFits::NoNodeLargeEnough {
                partition: partition_name(partition),
                shape: Box::new(shape.clone()),
                largest: Box::new(largest),
            });
        }
        let need = shape.times(i64::from(members));
        if !need.fits_in(&total) {
            return Err(NeverFits::OverPartition {
                partition: partition_name(partition),
                need: Box::new(need),
                total: Box::new(total),
            });
        }
        let calc = self.conf.calculator;
        for q in self.tree.path_up(leaf) {
            let (_, max) = self.tree.queues[q].limits_in(partition);
            if !within(calc, &need, &max) {
                return Err(NeverFits::OverQueueMaximum {
                    queue: self.tree.queues[q].spec.path.to_string(),
                    need: Box::new(need),
                    max: Box::new(max),
                });
            }
        }
        Ok(())
    }
}
