//! The cores a node keeps for its free GPUs: while GPU asks wait in a node's partition, a
//! CPU-only container (not an AM) is refused the vcores the node's free GPUs would need,
//! free GPUs times the partition's CPUs per GPU in its CPU policy's terms (`static`: its
//! `cpus-per-gpu`; `proportional` and `adaptive`: the node's CPUs over its GPUs, what a
//! GPU container is granted there). CPU-only asks already try nodes without free GPUs
//! first (the node index's buckets start at zero free GPUs); this keeps the last cores of a
//! node with free GPUs from them, so GPUs are not stranded behind CPU-only work.
//!
//! Cost: a node with no free GPUs, or a GPU ask, costs one comparison. Whether GPU asks
//! wait in a partition is a count kept as asks change ([`GpuAsking`], recounted for one
//! application when its asks or its activation change), never a walk of the applications.

use std::cell::Cell;
use std::collections::BTreeMap;

use smallvec::SmallVec;
use spindle_common::resource::GPU;
use spindle_common::Resource;

use super::cpu_policy::{CpuConf, CpuPolicy};
use super::node_index::SchedNode;
use super::pass::same_partition;
use super::SchedApp;

/// Per partition, how many active applications ask for GPU containers there.
pub(super) type GpuAsking = BTreeMap<String, u32>;

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

/// The partitions where `app`, active, asks for GPU containers (each once).
fn asking_in(app: &SchedApp) -> SmallVec<[String; 1]> {
    let mut parts: SmallVec<[String; 1]> = SmallVec::new();
    if !app.active {
        return parts;
    }
    for k in app.asks.values() {
        if k.any > 0
            && k.capability.get(GPU) > 0
            && !parts.iter().any(|p| same_partition(p, &k.partition))
        {
            parts.push(k.partition.clone());
        }
    }
    parts
}

/// Counts `app` again after its asks or its activation changed.
pub(super) fn recount(asking: &mut GpuAsking, app: &mut SchedApp) {
    let now = asking_in(app);
    let same = now.len() == app.gpu_parts.len()
        && now
            .iter()
            .zip(&app.gpu_parts)
            .all(|(a, b)| same_partition(a, b));
    if same {
        return;
    }
    for p in &app.gpu_parts {
        if let Some(n) = asking.get_mut(p) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                asking.remove(p);
            }
        }
    }
    for p in &now {
        *asking.entry(p.clone()).or_insert(0) += 1;
    }
    app.gpu_parts = now;
}

/// The counts worked out from scratch (the sanity check's).
pub(super) fn count_asking<'a>(apps: impl Iterator<Item = &'a SchedApp>) -> GpuAsking {
    let mut out = GpuAsking::new();
    for a in apps {
        for p in asking_in(a) {
            *out.entry(p).or_insert(0) += 1;
        }
    }
    out
}

/// The check one node search makes for one ask.
pub(super) struct KeepCpus<'a> {
    conf: &'a CpuConf,
    asking: &'a GpuAsking,
    /// A CPU-only ask that is not an AM's (else everything is admitted).
    cpu_only: bool,
    /// A node was refused for the cores kept for its free GPUs.
    refused: Cell<bool>,
}

impl<'a> KeepCpus<'a> {
    pub(super) fn new(
        conf: &'a CpuConf,
        asking: &'a GpuAsking,
        cap: &Resource,
        is_am: bool,
    ) -> Self {
        Self {
            conf,
            asking,
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
        let wait = self.asking.contains_key(&node.partition);
        if wait {
            self.refused.set(true);
        }
        !wait
    }
}
