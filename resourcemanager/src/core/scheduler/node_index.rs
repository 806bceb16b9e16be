//! The node table and its free-capacity index: nodes bucketed by free GPUs, and within a
//! bucket ordered by free memory, so that a fit is found in a few probes at any cluster size;
//! and the holds gangs keep on nodes, with what the holder needs of each node.
//!
//! Placement policy: a GPU ask takes the node with the fewest free GPUs that still fits and,
//! among those, the least free memory (best fit: whole free GPU nodes stay whole). An ask
//! without GPUs prefers nodes without free GPUs and, among those, the most free memory
//! (spreading CPU work, as YARN's heartbeat-driven placement does).
//!
//! Here: the table, the buckets and the sums kept as nodes change. [`search`] has the orders
//! and the bounded searches over them, [`holds`] the gangs' holds and [`check`] the sums
//! recomputed from the nodes.

mod check;
mod holds;
mod search;

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, DefaultHasher};

use spindle_common::resource::GPU;
use spindle_common::{NodeId, Resource};

use super::by_partition::ByPartition;
use super::counts::Counts;
use super::placement::NodeTags;
use super::queue_tree::max_each;

/// Nodes with this many free GPUs or more share the top bucket.
pub const MAX_BUCKET: usize = 16;
/// How many nodes one search looks at per bucket before giving up for this pass. Bounds a
/// pass's cost on a full cluster; a miss is retried on the next pass.
pub const PROBES: usize = 64;

#[derive(Debug, Clone)]
pub struct SchedNode {
    pub id: NodeId,
    pub host: String,
    pub rack: String,
    pub total: Resource,
    pub used: Resource,
    /// `total - used`, kept current.
    pub free: Resource,
    /// Whether the node takes new containers: it is healthy and not draining. Others keep
    /// what they have; their room counts neither in the cluster's nor in any plan's.
    pub schedulable: bool,
    /// The node's last health report said healthy (UNHEALTHY nodes take nothing new).
    pub healthy: bool,
    /// DECOMMISSIONING: the node drains (takes nothing new, and no gang holds it).
    pub draining: bool,
    /// The node's GPU model (`nm.yarn.io/gpu-model`), for gangs that want one model.
    pub gpu_model: Option<String>,
    /// The node's attributes (name to value): topology levels for gangs' domains, and what
    /// placement constraints test.
    pub attributes: BTreeMap<String, String>,
    /// The node's label (partition); `""` is the default partition.
    pub partition: String,
    /// Allocation tags of the containers on it.
    pub tags: NodeTags,
    /// What each application uses here (to move its accounting when the label changes).
    pub apps_used: BTreeMap<spindle_common::ApplicationId, Resource>,
    key: Option<(usize, i64)>,
}

#[derive(Debug, Clone, Default)]
pub struct NodeIndex {
    slots: Vec<Option<SchedNode>>,
    free_slots: Vec<usize>,
    /// Every node's slot, in id order (for walks in that order).
    by_id: BTreeMap<NodeId, usize>,
    /// The same, hashed: a lookup by id costs a hash, not a string comparison per level of
    /// a tree (the preemption round looks up the host of every candidate's container).
    /// Fixed keys, no seed from the OS: the core stays deterministic.
    slot_of: HashMap<NodeId, usize, BuildHasherDefault<DefaultHasher>>,
    by_host: BTreeMap<String, BTreeSet<usize>>,
    by_rack: BTreeMap<String, BTreeSet<usize>>,
    /// The container images each node holds.
    images: super::image_holders::ImageHolders,
    /// Per partition: nodes by free GPUs, then free memory.
    buckets: ByPartition<Vec<BTreeSet<(i64, usize)>>>,
    /// Per partition: the totals of its schedulable nodes.
    partition_total: ByPartition<Resource>,
    /// Per partition: each distinct total of its schedulable nodes and how many nodes have
    /// it. A cluster has a handful of node shapes, so the largest node and whether any node
    /// could ever take a shape cost what the shapes are, not how many nodes there are.
    shapes: ByPartition<BTreeMap<Resource, usize>>,
    /// Per partition: how many nodes it has, schedulable or not.
    members: ByPartition<usize>,
    min_alloc: Resource,
    /// Sum of the totals of schedulable nodes.
    pub cluster: Resource,
    /// Sum of what is used on schedulable nodes.
    pub cluster_used: Resource,
    /// Sum over schedulable nodes of what each uses beyond its total, per type (a node
    /// re-registered smaller than what runs on it): with it, the free room of every node,
    /// none counted below zero, is known without a walk ([`Self::free_everywhere`]).
    overdrawn: Resource,
    /// Component-wise largest total of any healthy node, draining ones included (YARN caps
    /// the maximum allocation by it; a DECOMMISSIONING node stays in its node tracker).
    pub largest: Resource,
    /// Each distinct total of the healthy nodes and how many have it (what `largest` is
    /// computed from when a node leaves).
    healthy_shapes: BTreeMap<Resource, usize>,
    schedulable_count: usize,
    /// Nodes held for a waiting gang: no other ask is placed on them.
    reserved: BTreeMap<usize, (spindle_common::ApplicationId, String)>,
    /// What the holder will need of each held node: other asks may still use what the
    /// node has beyond it (an AM's memory beside a GPU gang's hold). Absent: all of it.
    reserved_need: BTreeMap<usize, Resource>,
    /// Bumped whenever room may have grown somewhere (a release, a node joining, leaving
    /// or changing, a hold given up): a gang that did not fit at one value cannot fit
    /// before it changes.
    room_epoch: u64,
    /// Work counters (read through `&self`, hence cells): see [`NodeWork`].
    probes: Cell<u64>,
    walked: Cell<u64>,
    holds_read: Cell<u64>,
}

/// What the index was asked to look at so far: deterministic work counters for the
/// benchmarks and the work-ceiling test.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeWork {
    /// Nodes a search tested for an ask, or a plan's candidate order yielded.
    pub probes: u64,
    /// Nodes walks of the whole index (`iter`, `slots`) yielded.
    pub walked: u64,
    /// Held nodes read (the holds map's length at each read).
    pub holds_examined: u64,
}

impl NodeIndex {
    pub fn new(min_alloc: Resource) -> Self {
        Self {
            min_alloc,
            ..Default::default()
        }
    }

    fn bucket(&self, partition: &str, b: usize) -> Option<&BTreeSet<(i64, usize)>> {
        self.buckets.get(partition).and_then(|v| v.get(b))
    }

    /// Whether any indexed node of `partition` has `gpus` GPUs and `mem` MB free (other
    /// types not looked at). Not counted as probes: it answers a reason, not a placement.
    pub fn has_room_for(&self, partition: &str, gpus: i64, mem: i64) -> bool {
        let g = gpus.clamp(0, MAX_BUCKET as i64) as usize;
        (g..=MAX_BUCKET).any(|b| {
            self.bucket(partition, b)
                .is_some_and(|set| set.range((mem, 0)..).next().is_some())
        })
    }

    /// The distinct totals of one partition's schedulable nodes, each with its node count.
    pub fn partition_shapes(&self, partition: &str) -> impl Iterator<Item = (&Resource, usize)> {
        self.shapes
            .get(partition)
            .into_iter()
            .flat_map(|m| m.iter().map(|(r, n)| (r, *n)))
    }

    /// How many nodes a partition has, schedulable or not.
    pub fn partition_nodes(&self, partition: &str) -> usize {
        self.members.get(partition).copied().unwrap_or(0)
    }

    fn count_member(&mut self, partition: &str, up: bool) {
        self.members.count(partition, up);
    }

    /// The schedulable total of one partition.
    pub fn partition_total(&self, partition: &str) -> Resource {
        self.partition_total
            .get(partition)
            .cloned()
            .unwrap_or_default()
    }

    /// Containers tagged `target` on the nodes of `rack`.
    pub fn rack_tags(
        &self,
        rack: &str,
        target: &super::placement::TagTarget,
        app: &spindle_common::ApplicationId,
    ) -> u32 {
        self.by_rack.get(rack).map_or(0, |slots| {
            slots
                .iter()
                .filter_map(|s| self.get(*s))
                .map(|n| n.tags.of(target, app))
                .sum()
        })
    }

    /// Moves a node to another partition; returns its old one and what each application
    /// uses on it (whose accounting moves with it).
    pub fn set_partition(
        &mut self,
        id: &NodeId,
        partition: &str,
    ) -> Option<(String, BTreeMap<spindle_common::ApplicationId, Resource>)> {
        let slot = self.slot(id)?;
        if self.get(slot)?.partition == partition {
            return None;
        }
        self.room_epoch += 1;
        self.account(slot, false);
        self.unindex(slot);
        let n = self.slots.get_mut(slot)?.as_mut()?;
        let old = std::mem::replace(&mut n.partition, partition.to_string());
        let apps = n.apps_used.clone();
        self.count_member(&old, false);
        self.count_member(partition, true);
        self.account(slot, true);
        self.reindex(slot);
        Some((old, apps))
    }

    /// Records what `app` uses on the node (charges and releases).
    pub fn charge_app(
        &mut self,
        slot: usize,
        app: &spindle_common::ApplicationId,
        r: &Resource,
        up: bool,
    ) {
        if let Some(n) = self.slots.get_mut(slot).and_then(Option::as_mut) {
            let e = n.apps_used.entry(*app).or_default();
            if up {
                e.add_assign(r);
            } else {
                e.sub_assign(r);
            }
            if e.is_zero() {
                n.apps_used.remove(app);
            }
        }
    }

    /// Counts one container's allocation tags on the node (in or out).
    pub fn tag(
        &mut self,
        slot: usize,
        app: &spindle_common::ApplicationId,
        app_tags: &BTreeSet<String>,
        tags: &[String],
        up: bool,
    ) {
        if tags.is_empty() {
            return;
        }
        if let Some(n) = self.slots.get_mut(slot).and_then(Option::as_mut) {
            n.tags.count(app, app_tags, tags, up);
        }
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// See `room_epoch`.
    pub fn room_epoch(&self) -> u64 {
        self.room_epoch
    }

    /// Room may have grown outside this index's view (queue maxima changed).
    pub fn room_changed(&mut self) {
        self.room_epoch += 1;
    }

    /// Nodes that take containers.
    pub fn schedulable_count(&self) -> usize {
        self.schedulable_count
    }

    /// The free room of every schedulable node, none counted below zero (unlike
    /// [`Self::cluster_free`], a node used beyond its total does not hide another's room).
    pub fn free_everywhere(&self) -> Resource {
        self.cluster
            .minus(&self.cluster_used)
            .plus(&self.overdrawn)
            .clamp_non_negative()
    }

    /// Free resources over schedulable nodes.
    pub fn cluster_free(&self) -> Resource {
        self.cluster.minus(&self.cluster_used).clamp_non_negative()
    }

    fn account(&mut self, slot: usize, up: bool) {
        let Some(n) = self.slots.get(slot).and_then(Option::as_ref) else {
            return;
        };
        if !n.schedulable {
            return;
        }
        // Keys are copied only when new: partitions and shapes repeat across nodes.
        let part = self
            .partition_total
            .get_or_insert_with(&n.partition, Resource::zero);
        if up {
            part.add_assign(&n.total);
        } else {
            part.sub_assign(&n.total);
        }
        let shapes = self.shapes.get_or_insert_with(&n.partition, BTreeMap::new);
        shapes.count(&n.total, up);
        let overdraft = overdraft(&n.free);
        if up {
            self.cluster.add_assign(&n.total);
            self.cluster_used.add_assign(&n.used);
            self.schedulable_count += 1;
            if let Some(o) = overdraft {
                self.overdrawn.add_assign(&o);
            }
        } else {
            self.cluster.sub_assign(&n.total);
            self.cluster_used.sub_assign(&n.used);
            self.schedulable_count = self.schedulable_count.saturating_sub(1);
            if let Some(o) = overdraft {
                self.overdrawn.sub_assign(&o);
            }
        }
    }

    /// A schedulable node's use changed by `r` (`up`: charged): the sums follow.
    fn account_use(&mut self, slot: usize, r: &Resource, up: bool) {
        let Some(n) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        let before = overdraft(&n.free);
        if up {
            n.used.add_assign(r);
            n.free.sub_assign(r);
        } else {
            n.used.sub_assign(r);
            n.free.add_assign(r);
        }
        if !n.schedulable {
            return;
        }
        let after = overdraft(&n.free);
        if up {
            self.cluster_used.add_assign(r);
        } else {
            self.cluster_used.sub_assign(r);
        }
        if before.is_some() || after.is_some() {
            self.overdrawn.sub_assign(&before.unwrap_or_default());
            self.overdrawn.add_assign(&after.unwrap_or_default());
        }
    }

    /// Counts a healthy node's total in or out of `healthy_shapes`, and keeps `largest`.
    fn count_healthy(&mut self, total: &Resource, up: bool) {
        self.healthy_shapes.count(total, up);
        if up {
            self.largest = max_each(&self.largest, total);
            return;
        }
        // From the distinct shapes, not the nodes: a node leaving costs the shapes.
        self.largest = self
            .healthy_shapes
            .keys()
            .fold(Resource::zero(), |l, t| max_each(&l, t));
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn slot(&self, id: &NodeId) -> Option<usize> {
        self.slot_of.get(id).copied()
    }

    pub fn get(&self, slot: usize) -> Option<&SchedNode> {
        self.slots.get(slot).and_then(Option::as_ref)
    }

    /// A schedulable node's free room (what a gang plan may use now).
    pub fn free_room(&self, slot: usize) -> Option<Resource> {
        self.get(slot)
            .filter(|n| n.schedulable)
            .map(|n| n.free.clone())
    }

    /// A schedulable node's whole capacity (what a gang's hold may count on as it drains).
    pub fn whole_room(&self, slot: usize) -> Option<Resource> {
        self.get(slot)
            .filter(|n| n.schedulable)
            .map(|n| n.total.clone())
    }

    pub fn by_id(&self, id: &NodeId) -> Option<&SchedNode> {
        self.slot(id).and_then(|s| self.get(s))
    }

    /// Every node, in id order. Counted (`walked`): a pass should not need it.
    pub fn iter(&self) -> impl Iterator<Item = &SchedNode> {
        self.by_id
            .values()
            .filter_map(|s| self.get(*s))
            .inspect(|_| self.walked.set(self.walked.get() + 1))
    }

    /// See [`NodeWork`].
    pub fn work(&self) -> NodeWork {
        NodeWork {
            probes: self.probes.get(),
            walked: self.walked.get(),
            holds_examined: self.holds_read.get(),
        }
    }

    pub fn add(&mut self, id: NodeId, rack: String, total: Resource, used: Resource) {
        self.insert(SchedNode {
            host: id.host.clone(),
            id,
            rack,
            free: total.minus(&used),
            total,
            used,
            schedulable: true,
            healthy: true,
            draining: false,
            gpu_model: None,
            attributes: BTreeMap::new(),
            partition: String::new(),
            tags: NodeTags::default(),
            apps_used: BTreeMap::new(),
            key: None,
        });
    }

    /// A scratch index of copies of `nodes` (distinct, in id order) as schedulable, without
    /// their per-application use or holds: what a preemption plan is tried on. Built in bulk
    /// (its maps from sorted runs), as a preemption round builds one per preemptor.
    pub fn scratch<'a>(min_alloc: Resource, nodes: impl Iterator<Item = &'a SchedNode>) -> Self {
        let mut idx = Self::new(min_alloc);
        // Room for the most nodes the caller may give (its filter drops some).
        let most = nodes.size_hint().1.unwrap_or(0);
        idx.slots.reserve(most);
        let mut ids = Vec::with_capacity(most);
        let mut hosts: Vec<(String, BTreeSet<usize>)> = Vec::with_capacity(most);
        for n in nodes {
            let slot = idx.slots.len();
            ids.push((n.id.clone(), slot));
            // In id order, a host's nodes are adjacent.
            match hosts.last_mut() {
                Some((h, set)) if *h == n.host => {
                    set.insert(slot);
                }
                _ => hosts.push((n.host.clone(), BTreeSet::from([slot]))),
            }
            match idx.by_rack.get_mut(&n.rack) {
                Some(set) => {
                    set.insert(slot);
                }
                None => {
                    idx.by_rack.insert(n.rack.clone(), BTreeSet::from([slot]));
                }
            }
            idx.count_healthy(&n.total, true);
            idx.count_member(&n.partition, true);
            idx.slots.push(Some(SchedNode {
                id: n.id.clone(),
                host: n.host.clone(),
                rack: n.rack.clone(),
                total: n.total.clone(),
                used: n.used.clone(),
                free: n.free.clone(),
                schedulable: true,
                healthy: true,
                draining: false,
                gpu_model: n.gpu_model.clone(),
                attributes: n.attributes.clone(),
                partition: n.partition.clone(),
                tags: n.tags.clone(),
                apps_used: BTreeMap::new(),
                key: None,
            }));
            idx.account(slot, true);
            idx.reindex(slot);
        }
        idx.slot_of = ids.iter().cloned().collect();
        idx.by_id = ids.into_iter().collect();
        // A host whose nodes were not adjacent (ids out of order) is merged, not lost.
        for (h, set) in hosts {
            idx.by_host.entry(h).or_default().extend(set);
        }
        idx.room_epoch += 1;
        idx
    }

    /// Indexes a new node (replacing one of the same id): one accounting, one bucket entry.
    fn insert(&mut self, node: SchedNode) {
        self.room_epoch += 1;
        self.remove(&node.id);
        let slot = self.free_slots.pop().unwrap_or(self.slots.len());
        self.count_healthy(&node.total, true);
        self.count_member(&node.partition, true);
        self.by_id.insert(node.id.clone(), slot);
        self.slot_of.insert(node.id.clone(), slot);
        match self.by_host.get_mut(&node.host) {
            Some(set) => {
                set.insert(slot);
            }
            None => {
                self.by_host
                    .insert(node.host.clone(), BTreeSet::from([slot]));
            }
        }
        match self.by_rack.get_mut(&node.rack) {
            Some(set) => {
                set.insert(slot);
            }
            None => {
                self.by_rack
                    .insert(node.rack.clone(), BTreeSet::from([slot]));
            }
        }
        if slot == self.slots.len() {
            self.slots.push(Some(node));
        } else {
            self.slots[slot] = Some(node);
        }
        self.account(slot, true);
        self.reindex(slot);
    }

    pub fn remove(&mut self, id: &NodeId) -> Option<SchedNode> {
        self.room_epoch += 1;
        let slot = *self.slot_of.get(id)?;
        self.reserved.remove(&slot);
        self.reserved_need.remove(&slot);
        self.account(slot, false);
        self.unindex(slot);
        self.by_id.remove(id);
        self.slot_of.remove(id);
        let node = self.slots.get_mut(slot)?.take()?;
        self.count_member(&node.partition, false);
        if node.healthy {
            self.count_healthy(&node.total, false);
        }
        if let Some(s) = self.by_host.get_mut(&node.host) {
            s.remove(&slot);
            if s.is_empty() {
                self.by_host.remove(&node.host);
            }
        }
        if let Some(s) = self.by_rack.get_mut(&node.rack) {
            s.remove(&slot);
            if s.is_empty() {
                self.by_rack.remove(&node.rack);
            }
        }
        self.images.forget(slot);
        self.free_slots.push(slot);
        Some(node)
    }

    /// The node's health (from its heartbeat): an unhealthy node takes nothing new.
    pub fn set_schedulable(&mut self, id: &NodeId, healthy: bool) {
        self.set_service(id, |n| n.healthy = healthy);
    }

    /// Starts (or ends: recommission) a node's drain: a draining node takes nothing new, no
    /// gang plans on it, and a hold on it is given up (its gang plans again elsewhere).
    pub fn set_draining(&mut self, id: &NodeId, draining: bool) {
        self.set_service(id, |n| n.draining = draining);
    }

    /// Changes a node's health or drain and, when that changes whether it takes containers,
    /// moves its total and use in or out of the schedulable sums.
    fn set_service(&mut self, id: &NodeId, change: impl FnOnce(&mut SchedNode)) {
        self.room_epoch += 1;
        let Some(slot) = self.slot(id) else { return };
        let Some(n) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        let was_healthy = n.healthy;
        change(n);
        if n.healthy != was_healthy {
            let (total, healthy) = (n.total.clone(), n.healthy);
            self.count_healthy(&total, healthy);
        }
        let Some(n) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        let schedulable = n.healthy && !n.draining;
        if n.schedulable == schedulable {
            return;
        }
        // Out of the sums as it was, in again as it is (`account` skips unschedulable nodes).
        self.account(slot, false);
        if let Some(n) = self.slots.get_mut(slot).and_then(Option::as_mut) {
            n.schedulable = schedulable;
        }
        self.account(slot, true);
        if !schedulable {
            self.reserved.remove(&slot);
            self.reserved_need.remove(&slot);
        }
        self.reindex(slot);
    }

    pub fn charge(&mut self, slot: usize, r: &Resource) {
        self.account_use(slot, r, true);
        self.reindex(slot);
    }

    pub fn release(&mut self, slot: usize, r: &Resource) {
        self.room_epoch += 1;
        self.account_use(slot, r, false);
        self.reindex(slot);
    }

    fn unindex(&mut self, slot: usize) {
        let Some(n) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        if let Some(k) = n.key.take() {
            if let Some(b) = self.buckets.get_mut(&n.partition) {
                b[k.0].remove(&(k.1, slot));
            }
        }
    }

    fn reindex(&mut self, slot: usize) {
        self.unindex(slot);
        let min = &self.min_alloc;
        let Some(n) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        if n.schedulable && n.free.memory_mb >= min.memory_mb && n.free.vcores >= min.vcores {
            let gpus = n.free.get(GPU).clamp(0, MAX_BUCKET as i64) as usize;
            let key = (gpus, n.free.memory_mb);
            self.buckets
                .get_or_insert_with(&n.partition, || vec![BTreeSet::new(); MAX_BUCKET + 1])[key.0]
                .insert((key.1, slot));
            n.key = Some(key);
        }
    }

    /// The node's attributes (topology levels), as it registered them.
    pub fn set_attributes(&mut self, id: &NodeId, attributes: BTreeMap<String, String>) {
        self.room_epoch += 1;
        if let Some(n) = self
            .slot(id)
            .and_then(|s| self.slots.get_mut(s))
            .and_then(Option::as_mut)
        {
            n.attributes = attributes;
        }
    }

    /// The container images the node holds (its NM's last report): a preference for asks
    /// naming one of them. Room does not change, so neither does the room epoch.
    pub fn set_images(&mut self, id: &NodeId, images: BTreeSet<String>) {
        if let Some(slot) = self.slot(id) {
            self.images.set(slot, images);
        }
    }

    /// Whether the node in `slot` holds `image`.
    pub fn holds_image(&self, slot: usize, image: &str) -> bool {
        self.images.holds(slot, image)
    }

    pub fn set_gpu_model(&mut self, id: &NodeId, model: Option<String>) {
        self.room_epoch += 1;
        if let Some(n) = self
            .slot(id)
            .and_then(|s| self.slots.get_mut(s))
            .and_then(Option::as_mut)
        {
            n.gpu_model = model;
        }
    }
}

/// What a node's `free` is below zero, per type; none for a node within its total (the
/// common case, checked without building anything).
fn overdraft(free: &Resource) -> Option<Resource> {
    free.any_negative()
        .then(|| Resource::zero().minus(free).clamp_non_negative())
}
