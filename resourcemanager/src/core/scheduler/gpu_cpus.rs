//! The cores a node keeps for its free GPUs: while GPU asks wait in a node's partition, a
//! CPU-only container (not an AM) is refused the vcores the node's free GPUs would need,
//! free GPUs times the partition's CPUs per GPU in its CPU policy's terms (`static`: its
//! `cpus-per-gpu`; `proportional` and `adaptive`: the node's CPUs over its GPUs, what a
//! GPU container is granted there). CPU-only asks already try nodes without free GPUs
//! first (the node index's buckets start at zero free GPUs); this keeps the last cores of a
//! node with free GPUs from them, so GPUs are not stranded behind CPU-only work.
//!
//! Cost: a node with no free GPUs, or a GPU ask, costs one comparison. Whether GPU asks
//! wait in a partition is worked out only when a CPU-only ask meets a node with free GPUs,
//! once per partition and pass ([`GpuWaits`]).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

use spindle_common::resource::GPU;
use spindle_common::{ApplicationId, Resource};

use super::cpu_policy::{CpuConf, CpuPolicy};
use super::node_index::SchedNode;
use super::SchedApp;

/// Per partition, whether GPU asks wait there, as worked out in this pass.
pub(super) type GpuWaits = BTreeMap<String, bool>;

/// The vcores `node`'s free GPUs would be granted under its partition's CPU policy.
pub fn kept_for_gpus(conf: &CpuConf, node: &SchedNode) -> i64 {
    let free_gpus = node.free.get(GPU).max(0);
    if free_gpus == 0 {
        return 0;
    }
    let per_gpu = match conf.policy_of(&node.partition) {
        CpuPolicy::Static { cpus_per_gpu } => i64::from(cpus_per_gpu),
        CpuPolicy::Proportional | CpuPolicy::Adaptive => {
            node.total.vcores / node.total.get(GPU).max(1)
        }
    };
    free_gpus.saturating_mul(per_gpu)
}

/// Whether an active application asks for GPU containers in `partition`.
fn gpu_asks_wait(apps: &BTreeMap<ApplicationId, SchedApp>, partition: &str) -> bool {
    apps.values().filter(|a| a.active).any(|a| {
        a.asks
            .values()
            .any(|k| k.any > 0 && k.partition == partition && k.capability.get(GPU) > 0)
    })
}

/// The check one node search makes for one ask.
pub(super) struct KeepCpus<'a> {
    conf: &'a CpuConf,
    apps: &'a BTreeMap<ApplicationId, SchedApp>,
    waits: RefCell<&'a mut GpuWaits>,
    /// A CPU-only ask that is not an AM's (else everything is admitted).
    cpu_only: bool,
    /// A node was refused for the cores kept for its free GPUs.
    refused: Cell<bool>,
}

impl<'a> KeepCpus<'a> {
    pub(super) fn new(
        conf: &'a CpuConf,
        apps: &'a BTreeMap<ApplicationId, SchedApp>,
        waits: &'a mut GpuWaits,
        cap: &Resource,
        is_am: bool,
    ) -> Self {
        Self {
            conf,
            apps,
            waits: RefCell::new(waits),
            cpu_only: !is_am && cap.get(GPU) <= 0,
            refused: Cell::new(false),
        }
    }

    /// Whether a node was refused only for the cores kept for its free GPUs.
    pub(super) fn refused(&self) -> bool {
        self.refused.get()
    }

    /// Whether `node` may take a container of `cap`.
    pub(super) fn admits(&self, node: &SchedNode, cap: &Resource) -> bool {
        if !self.cpu_only || node.free.get(GPU) <= 0 {
            return true;
        }
        let kept = kept_for_gpus(self.conf, node);
        if node.free.vcores - cap.vcores >= kept {
            return true;
        }
        let mut waits = self.waits.borrow_mut();
        let wait = match waits.get(&node.partition) {
            Some(w) => *w,
            None => {
                let w = gpu_asks_wait(self.apps, &node.partition);
                waits.insert(node.partition.clone(), w);
                w
            }
        };
        if wait {
            self.refused.set(true);
        }
        !wait
    }
}
