//! The node table and its free-capacity index: nodes bucketed by free GPUs, and within a
//! bucket ordered by free memory, so that a fit is found in a few probes at any cluster size.
//!
//! Placement policy: a GPU ask takes the node with the fewest free GPUs that still fits and,
//! among those, the least free memory (best fit: whole free GPU nodes stay whole). An ask
//! without GPUs prefers nodes without free GPUs and, among those, the most free memory
//! (spreading CPU work, as YARN's heartbeat-driven placement does).

use std::collections::{BTreeMap, BTreeSet};

use spindle_common::resource::GPU;
use spindle_common::{NodeId, Resource};

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
    /// RUNNING nodes take containers; others keep what they have.
    pub schedulable: bool,
    /// The node's GPU model (`nm.yarn.io/gpu-model`), for gangs that want one model.
    pub gpu_model: Option<String>,
    /// The node's attributes (name to value): topology levels for gangs' domains.
    pub attributes: BTreeMap<String, String>,
    key: Option<(usize, i64)>,
}

#[derive(Debug, Clone, Default)]
pub struct NodeIndex {
    slots: Vec<Option<SchedNode>>,
    free_slots: Vec<usize>,
    by_id: BTreeMap<NodeId, usize>,
    by_host: BTreeMap<String, BTreeSet<usize>>,
    by_rack: BTreeMap<String, BTreeSet<usize>>,
    buckets: Vec<BTreeSet<(i64, usize)>>,
    min_alloc: Resource,
    /// Sum of the totals of schedulable nodes.
    pub cluster: Resource,
    /// Sum of what is used on schedulable nodes.
    pub cluster_used: Resource,
    /// Component-wise largest total of any schedulable node (YARN caps the maximum
    /// allocation by it).
    pub largest: Resource,
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
}

impl NodeIndex {
    pub fn new(min_alloc: Resource) -> Self {
        Self {
            buckets: vec![BTreeSet::new(); MAX_BUCKET + 1],
            min_alloc,
            ..Default::default()
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
        let (total, used) = (n.total.clone(), n.used.clone());
        if up {
            self.cluster.add_assign(&total);
            self.cluster_used.add_assign(&used);
            self.schedulable_count += 1;
            for (k, v) in total.entries() {
                if v > self.largest.get(k) {
                    self.largest.set(k, v);
                }
            }
        } else {
            self.cluster.sub_assign(&total);
            self.cluster_used.sub_assign(&used);
            self.schedulable_count = self.schedulable_count.saturating_sub(1);
            self.recompute_largest();
        }
    }

    fn recompute_largest(&mut self) {
        let mut l = Resource::zero();
        for n in self.slots.iter().flatten().filter(|n| n.schedulable) {
            for (k, v) in n.total.entries() {
                if v > l.get(k) {
                    l.set(k, v);
                }
            }
        }
        self.largest = l;
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn slot(&self, id: &NodeId) -> Option<usize> {
        self.by_id.get(id).copied()
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

    pub fn iter(&self) -> impl Iterator<Item = &SchedNode> {
        self.by_id.values().filter_map(|s| self.get(*s))
    }

    pub fn add(&mut self, id: NodeId, rack: String, total: Resource, used: Resource) {
        self.room_epoch += 1;
        self.remove(&id);
        let slot = self.free_slots.pop().unwrap_or(self.slots.len());
        let host = id.host.clone();
        let node = SchedNode {
            id: id.clone(),
            host: host.clone(),
            rack: rack.clone(),
            free: total.minus(&used),
            total,
            used,
            schedulable: true,
            gpu_model: None,
            attributes: BTreeMap::new(),
            key: None,
        };
        if slot == self.slots.len() {
            self.slots.push(Some(node));
        } else {
            self.slots[slot] = Some(node);
        }
        self.account(slot, true);
        self.by_id.insert(id, slot);
        self.by_host.entry(host).or_default().insert(slot);
        self.by_rack.entry(rack).or_default().insert(slot);
        self.reindex(slot);
    }

    pub fn remove(&mut self, id: &NodeId) -> Option<SchedNode> {
        self.room_epoch += 1;
        let slot = *self.by_id.get(id)?;
        self.reserved.remove(&slot);
        self.reserved_need.remove(&slot);
        self.account(slot, false);
        self.by_id.remove(id);
        let node = self.slots.get_mut(slot)?.take()?;
        if let Some(k) = node.key {
            self.buckets[k.0].remove(&(k.1, slot));
        }
        if node.schedulable {
            self.recompute_largest();
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
        self.free_slots.push(slot);
        Some(node)
    }

    pub fn set_schedulable(&mut self, id: &NodeId, schedulable: bool) {
        self.room_epoch += 1;
        let Some(slot) = self.slot(id) else { return };
        let Some(n) = self.slots[slot].as_mut() else {
            return;
        };
        if n.schedulable == schedulable {
            return;
        }
        n.schedulable = schedulable;
        let total = n.total.clone();
        if schedulable {
            self.cluster.add_assign(&total);
        } else {
            self.cluster.sub_assign(&total);
        }
        self.reindex(slot);
    }

    pub fn charge(&mut self, slot: usize, r: &Resource) {
        if let Some(n) = self.slots.get_mut(slot).and_then(Option::as_mut) {
            n.used.add_assign(r);
            n.free.sub_assign(r);
            if n.schedulable {
                self.cluster_used.add_assign(r);
            }
        }
        self.reindex(slot);
    }

    pub fn release(&mut self, slot: usize, r: &Resource) {
        self.room_epoch += 1;
        if let Some(n) = self.slots.get_mut(slot).and_then(Option::as_mut) {
            n.used.sub_assign(r);
            n.free.add_assign(r);
            if n.schedulable {
                self.cluster_used.sub_assign(r);
            }
        }
        self.reindex(slot);
    }

    fn reindex(&mut self, slot: usize) {
        let min = &self.min_alloc;
        let Some(n) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        if let Some(k) = n.key.take() {
            self.buckets[k.0].remove(&(k.1, slot));
        }
        if n.schedulable && n.free.memory_mb >= min.memory_mb && n.free.vcores >= min.vcores {
            let gpus = n.free.get(GPU).clamp(0, MAX_BUCKET as i64) as usize;
            let key = (gpus, n.free.memory_mb);
            self.buckets[key.0].insert((key.1, slot));
            n.key = Some(key);
        }
    }

    fn fits(&self, slot: usize, ask: &Resource) -> bool {
        let Some(n) = self.get(slot) else {
            return false;
        };
        if !n.schedulable || !ask.fits_in(&n.free) {
            return false;
        }
        if !self.reserved.contains_key(&slot) {
            return true;
        }
        // A held node takes an ask only beside what its holder will need of it: in every
        // type the ask uses, what runs there now, the ask and the hold fit the node.
        let Some(need) = self.reserved_need.get(&slot) else {
            return false;
        };
        ask.entries()
            .filter(|(_, v)| *v > 0)
            .all(|(k, v)| n.used.get(k) + v + need.get(k) <= n.total.get(k))
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

    /// Holds `slot` for a gang, all of it (`None` frees it).
    pub fn reserve(
        &mut self,
        slot: usize,
        holder: Option<(spindle_common::ApplicationId, String)>,
    ) {
        self.room_epoch += 1;
        self.reserved_need.remove(&slot);
        match holder {
            Some(h) => {
                self.reserved.insert(slot, h);
            }
            None => {
                self.reserved.remove(&slot);
            }
        }
    }

    /// Holds `slot` for a gang that will need `need` of it.
    pub fn hold(
        &mut self,
        slot: usize,
        holder: (spindle_common::ApplicationId, String),
        need: Resource,
    ) {
        self.reserve(slot, Some(holder));
        self.reserved_need.insert(slot, need);
    }

    pub fn reserved_by(&self, slot: usize) -> Option<&(spindle_common::ApplicationId, String)> {
        self.reserved.get(&slot)
    }

    pub fn reservations(&self) -> &BTreeMap<usize, (spindle_common::ApplicationId, String)> {
        &self.reserved
    }

    /// Every indexed node (with room for at least a minimum allocation), most free GPUs
    /// first and, within that, most free memory first.
    pub fn by_free_desc(&self) -> impl Iterator<Item = usize> + '_ {
        (0..=MAX_BUCKET)
            .rev()
            .flat_map(move |b| self.buckets[b].iter().rev().map(|(_, s)| *s))
    }

    /// Indexed nodes with at least `gpus` free GPUs and `mem` free memory, fewest free GPUs
    /// first and, within that, least free memory first (best fit).
    pub fn best_fit_order(&self, gpus: i64, mem: i64) -> impl Iterator<Item = usize> + '_ {
        let g = gpus.clamp(0, MAX_BUCKET as i64) as usize;
        (g..=MAX_BUCKET).flat_map(move |b| self.buckets[b].range((mem, 0)..).map(|(_, s)| *s))
    }

    /// Slots of every node, schedulable or not.
    pub fn slots(&self) -> impl Iterator<Item = usize> + '_ {
        self.by_id.values().copied()
    }

    /// A node anywhere that fits `ask`, by the placement policy of this module.
    pub fn find_any(&self, ask: &Resource) -> Option<usize> {
        let g = ask.get(GPU).clamp(0, MAX_BUCKET as i64) as usize;
        if g > 0 {
            for b in g..=MAX_BUCKET {
                let found = self.buckets[b]
                    .range((ask.memory_mb, 0)..)
                    .take(PROBES)
                    .map(|(_, s)| *s)
                    .find(|s| self.fits(*s, ask));
                if found.is_some() {
                    return found;
                }
            }
            return None;
        }
        for b in 0..=MAX_BUCKET {
            let found = self.buckets[b]
                .iter()
                .rev()
                .take_while(|(mem, _)| *mem >= ask.memory_mb)
                .take(PROBES)
                .map(|(_, s)| *s)
                .find(|s| self.fits(*s, ask));
            if found.is_some() {
                return found;
            }
        }
        None
    }

    /// A node on one of `hosts` that fits.
    pub fn find_on_hosts<'a>(
        &self,
        hosts: impl Iterator<Item = &'a String>,
        ask: &Resource,
    ) -> Option<usize> {
        for h in hosts {
            if let Some(slots) = self.by_host.get(h) {
                if let Some(s) = slots.iter().copied().find(|s| self.fits(*s, ask)) {
                    return Some(s);
                }
            }
        }
        None
    }

    /// A node in one of `racks` that fits (bounded probes per rack).
    pub fn find_in_racks<'a>(
        &self,
        racks: impl Iterator<Item = &'a String>,
        ask: &Resource,
    ) -> Option<usize> {
        for r in racks {
            if let Some(slots) = self.by_rack.get(r) {
                if let Some(s) = slots
                    .iter()
                    .copied()
                    .take(PROBES * 4)
                    .find(|s| self.fits(*s, ask))
                {
                    return Some(s);
                }
            }
        }
        None
    }
}
