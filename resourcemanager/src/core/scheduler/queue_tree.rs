//! The runtime queue tree: each queue's configured spec, its effective guaranteed and
//! maximum resources for the current cluster size, and its usage. Pure bookkeeping; the
//! policy that reads it lives in [`super::Scheduler`].

use std::collections::{BTreeMap, BTreeSet};

use spindle_common::{ApplicationId, QueuePath, Resource};

use crate::core::queue_conf::{
    AccessibleLabels, Acl, Calculator, CapacitySpec, MaxCapacitySpec, QueueSpec,
};

/// A queue's place in the tree ([`QueueTree::queues`]), valid until the next
/// reconfiguration rebuilds the tree. A type of its own, so a queue index is never confused
/// with a node slot or a count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct QueueIdx(pub(super) usize);

impl QueueIdx {
    /// The root queue.
    pub const ROOT: QueueIdx = QueueIdx(0);

    /// The position in [`QueueTree::queues`], for tables indexed alike.
    pub fn index(self) -> usize {
        self.0
    }
}

/// Tables kept per queue (the queues themselves, demand counts, a pass's exclusions) are
/// `Vec`s in the tree's order, indexed by `QueueIdx`.
impl<T> std::ops::Index<QueueIdx> for Vec<T> {
    type Output = T;
    fn index(&self, i: QueueIdx) -> &T {
        &self[i.0]
    }
}

impl<T> std::ops::IndexMut<QueueIdx> for Vec<T> {
    fn index_mut(&mut self, i: QueueIdx) -> &mut T {
        &mut self[i.0]
    }
}

impl<T> std::ops::Index<QueueIdx> for [T] {
    type Output = T;
    fn index(&self, i: QueueIdx) -> &T {
        &self[i.0]
    }
}

impl<T> std::ops::IndexMut<QueueIdx> for [T] {
    fn index_mut(&mut self, i: QueueIdx) -> &mut T {
        &mut self[i.0]
    }
}

/// A user's usage inside one leaf.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UserUsage {
    pub used: Resource,
    pub am_used: Resource,
    pub active_apps: usize,
    pub pending_apps: usize,
}

#[derive(Debug, Clone)]
pub struct Queue {
    /// The configuration of this queue (its `children` list is emptied: see `children`).
    pub spec: QueueSpec,
    pub parent: Option<QueueIdx>,
    pub children: Vec<QueueIdx>,
    pub depth: usize,
    /// Effective guaranteed resources (YARN's effective minimum).
    pub guaranteed: Resource,
    /// Effective maximum resources.
    pub maximum: Resource,
    /// Percent of the cluster, as YARN's `absoluteCapacity` / `absoluteMaxCapacity`.
    pub abs_capacity: f64,
    pub abs_max_capacity: f64,
    pub used: Resource,
    /// Held for waiting gangs (YARN's reserved containers): counts against the maximum.
    pub reserved: Resource,
    pub am_used: Resource,
    pub num_containers: usize,
    /// Leaf only: every application in the queue.
    pub apps: BTreeSet<ApplicationId>,
    /// Leaf only: active applications with outstanding asks, in serving order.
    pub schedulable: BTreeSet<(i64, u64, ApplicationId)>,
    /// Leaf only: how often `schedulable` changed (a pass walks it in batches, taken anew
    /// when it changed under them).
    pub order_moves: u64,
    /// Leaf only: applications not yet activated (max-parallel-apps, AM limit), by submission.
    pub waiting: BTreeSet<(u64, ApplicationId)>,
    pub active_apps: usize,
    pub users: BTreeMap<String, UserUsage>,
    /// Which partitions it may use (its own setting or its parent's).
    pub accessible: AccessibleLabels,
    /// Its share and use of each labelled partition. `used` above counts every partition;
    /// the default partition's use is what the labelled ones leave of it.
    pub parts: BTreeMap<String, PartShare>,
}

/// A queue's guarantee, maximum and use in one labelled partition.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PartShare {
    pub guaranteed: Resource,
    pub maximum: Resource,
    pub used: Resource,
    /// Percent of the partition (YARN's `absoluteCapacity` per partition).
    pub abs_capacity: f64,
    pub abs_max_capacity: f64,
    /// The configured percentages of the parent's share.
    pub capacity: f64,
    pub max_capacity: f64,
}

impl Queue {
    pub fn is_leaf(&self) -> bool {
        self.children.is_empty()
    }

    /// Its use of the default partition.
    pub fn default_used(&self) -> Resource {
        let mut u = self.used.clone();
        for p in self.parts.values() {
            u.sub_assign(&p.used);
        }
        u
    }

    /// Its use in `partition`, without a copy where one is not needed (the default
    /// partition of a queue that uses no labelled one).
    pub fn used_ref_in(&self, partition: &str) -> std::borrow::Cow<'_, Resource> {
        use std::borrow::Cow;
        if partition.is_empty() {
            if self.parts.values().all(|p| p.used.is_zero()) {
                Cow::Borrowed(&self.used)
            } else {
                Cow::Owned(self.default_used())
            }
        } else {
            match self.parts.get(partition) {
                Some(p) => Cow::Borrowed(&p.used),
                None => Cow::Owned(Resource::zero()),
            }
        }
    }

    /// Its guarantee in `partition` (None: it has no share there).
    pub fn guaranteed_ref_in(&self, partition: &str) -> Option<&Resource> {
        if partition.is_empty() {
            Some(&self.guaranteed)
        } else {
            self.parts.get(partition).map(|p| &p.guaranteed)
        }
    }

    /// Its maximum in `partition` (zero in a partition it has no share of).
    pub fn maximum_ref_in(&self, partition: &str) -> std::borrow::Cow<'_, Resource> {
        use std::borrow::Cow;
        if partition.is_empty() {
            Cow::Borrowed(&self.maximum)
        } else {
            match self.parts.get(partition) {
                Some(p) => Cow::Borrowed(&p.maximum),
                None => Cow::Owned(Resource::zero()),
            }
        }
    }

    /// Its use in `partition`.
    pub fn used_in(&self, partition: &str) -> Resource {
        self.used_ref_in(partition).into_owned()
    }

    /// Its guarantee and maximum in `partition`.
    pub fn limits_in(&self, partition: &str) -> (Resource, Resource) {
        if partition.is_empty() {
            (self.guaranteed.clone(), self.maximum.clone())
        } else {
            self.parts
                .get(partition)
                .map(|p| (p.guaranteed.clone(), p.maximum.clone()))
                .unwrap_or_default()
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct QueueTree {
    pub queues: Vec<Queue>,
    by_path: BTreeMap<QueuePath, QueueIdx>,
    by_name: BTreeMap<String, Vec<QueueIdx>>,
}

impl QueueTree {
    pub fn build(root: &QueueSpec) -> Self {
        let mut t = QueueTree::default();
        t.add(root, None, 0);
        t
    }

    fn add(&mut self, spec: &QueueSpec, parent: Option<QueueIdx>, depth: usize) -> QueueIdx {
        let idx = QueueIdx(self.queues.len());
        let mut own = spec.clone();
        own.children.clear();
        let accessible = match (&spec.accessible_labels, parent) {
            (Some(a), _) => a.clone(),
            (None, Some(p)) => self.queues[p].accessible.clone(),
            (None, None) => AccessibleLabels::Any,
        };
        self.queues.push(Queue {
            accessible,
            parts: BTreeMap::new(),
            spec: own,
            parent,
            children: Vec::new(),
            depth,
            guaranteed: Resource::zero(),
            maximum: Resource::zero(),
            abs_capacity: 0.0,
            abs_max_capacity: 0.0,
            used: Resource::zero(),
            reserved: Resource::zero(),
            am_used: Resource::zero(),
            num_containers: 0,
            apps: BTreeSet::new(),
            schedulable: BTreeSet::new(),
            order_moves: 0,
            waiting: BTreeSet::new(),
            active_apps: 0,
            users: BTreeMap::new(),
        });
        self.by_path.insert(spec.path.clone(), idx);
        self.by_name.entry(spec.name.clone()).or_default().push(idx);
        for c in &spec.children {
            let ci = self.add(c, Some(idx), depth + 1);
            self.queues[idx].children.push(ci);
        }
        idx
    }

    pub fn root(&self) -> QueueIdx {
        QueueIdx::ROOT
    }

    pub fn get(&self, idx: QueueIdx) -> Option<&Queue> {
        self.queues.get(idx.0)
    }

    /// Every queue with its index, parents before children.
    pub fn iter(&self) -> impl Iterator<Item = (QueueIdx, &Queue)> {
        self.queues
            .iter()
            .enumerate()
            .map(|(i, q)| (QueueIdx(i), q))
    }

    /// Every queue's index, parents before children.
    pub fn indices(&self) -> impl Iterator<Item = QueueIdx> {
        (0..self.queues.len()).map(QueueIdx)
    }

    /// By full path, else by short name when that is unambiguous (YARN accepts both).
    pub fn find(&self, name: &str) -> Option<QueueIdx> {
        if let Some(i) = self.by_path.get(name) {
            return Some(*i);
        }
        match self.by_name.get(name).map(Vec::as_slice) {
            Some([one]) => Some(*one),
            _ => None,
        }
    }

    pub fn leaf(&self, name: &str) -> Option<QueueIdx> {
        self.find(name).filter(|i| self.queues[*i].is_leaf())
    }

    /// The queue and its ancestors, leaf first.
    pub fn path_up(&self, mut idx: QueueIdx) -> impl Iterator<Item = QueueIdx> + '_ {
        let mut done = false;
        std::iter::from_fn(move || {
            if done {
                return None;
            }
            let cur = idx;
            match self.queues[cur].parent {
                Some(p) => idx = p,
                None => done = true,
            }
            Some(cur)
        })
    }

    /// Recomputes every queue's effective guaranteed and maximum for a cluster of `cluster`.
    pub fn compute_capacities(&mut self, cluster: &Resource) {
        let root = self.root();
        self.queues[root].guaranteed = cluster.clone();
        self.queues[root].maximum = cluster.clone();
        self.queues[root].abs_capacity = 100.0;
        self.queues[root].abs_max_capacity = 100.0;
        self.compute_children(root, cluster);
    }

    /// Recomputes every queue's share of each labelled partition (`totals`: the partition's
    /// schedulable resources). A queue's share is its configured percentage of its parent's
    /// (0 and 0 where it may not use the label); use is kept.
    pub fn compute_partitions(&mut self, totals: &BTreeMap<String, Resource>) {
        for q in &mut self.queues {
            q.parts.retain(|l, _| totals.contains_key(l));
        }
        let order: Vec<QueueIdx> = self.indices().collect();
        for (label, total) in totals {
            for &i in &order {
                let (pg, pm, pa, pam) = match self.queues[i].parent {
                    None => (total.clone(), total.clone(), 100.0, 100.0),
                    Some(p) => {
                        let s = self.queues[p].parts.get(label).cloned().unwrap_or_default();
                        (s.guaranteed, s.maximum, s.abs_capacity, s.abs_max_capacity)
                    }
                };
                let q = &mut self.queues[i];
                let (cap, max) = if q.parent.is_none() {
                    (100.0, 100.0)
                } else if !q.accessible.allows(label) {
                    (0.0, 0.0)
                } else {
                    q.spec
                        .label_capacities
                        .get(label)
                        .map_or((0.0, 100.0), |c| (c.capacity, c.max_capacity))
                };
                let e = q.parts.entry(label.clone()).or_default();
                e.capacity = cap;
                e.max_capacity = max;
                e.guaranteed = scale(&pg, cap / 100.0);
                let mut m = scale(&pm, max / 100.0);
                for (k, v) in e.guaranteed.entries() {
                    if m.get(k) < v {
                        m.set(k, v);
                    }
                }
                e.maximum = m;
                e.abs_capacity = pa * cap / 100.0;
                e.abs_max_capacity = (pam * max / 100.0).max(e.abs_capacity);
            }
        }
    }

    /// Charges (or releases) `r` in a labelled partition along `leaf`'s path; the default
    /// partition needs nothing (it is what the others leave of `used`).
    pub fn charge_partition(&mut self, leaf: QueueIdx, partition: &str, r: &Resource, up: bool) {
        if partition.is_empty() {
            return;
        }
        let mut q = Some(leaf);
        while let Some(i) = q {
            let e = self.queues[i]
                .parts
                .entry(partition.to_string())
                .or_default();
            if up {
                e.used.add_assign(r);
            } else {
                e.used.sub_assign(r);
            }
            q = self.queues[i].parent;
        }
    }

    fn compute_children(&mut self, parent: QueueIdx, cluster: &Resource) {
        let children = self.queues[parent].children.clone();
        if children.is_empty() {
            return;
        }
        let pg = self.queues[parent].guaranteed.clone();
        let pm = self.queues[parent].maximum.clone();
        let p_abs = self.queues[parent].abs_capacity;
        let p_abs_max = self.queues[parent].abs_max_capacity;
        // Absolute and percent siblings take theirs first; weights share what is left.
        let mut taken = Resource::zero();
        let mut weight_sum = 0.0;
        for &c in &children {
            match &self.queues[c].spec.capacity {
                CapacitySpec::Percent(p) => taken.add_assign(&scale(&pg, *p / 100.0)),
                CapacitySpec::Absolute(r) => taken.add_assign(&min_each(r, &pg)),
                CapacitySpec::Weight(w) => weight_sum += w.max(0.0),
            }
        }
        let left = pg.minus(&taken).clamp_non_negative();
        for &c in &children {
            let (g, abs) = match &self.queues[c].spec.capacity {
                CapacitySpec::Percent(p) => (scale(&pg, *p / 100.0), p_abs * p / 100.0),
                CapacitySpec::Absolute(r) => {
                    let g = min_each(r, &pg);
                    // No resources yet: nothing narrower than the parent is known.
                    let abs = share_pct(&g, cluster).unwrap_or(p_abs);
                    (g, abs)
                }
                CapacitySpec::Weight(w) => {
                    let f = if weight_sum > 0.0 {
                        w.max(0.0) / weight_sum
                    } else {
                        0.0
                    };
                    let g = scale(&left, f);
                    // No resources yet: YARN's weight mode, the normalized weight of the
                    // parent's absolute capacity.
                    let abs = share_pct(&g, cluster).unwrap_or(p_abs * f);
                    (g, abs)
                }
            };
            let (mut m, abs_max) = match &self.queues[c].spec.max_capacity {
                MaxCapacitySpec::Percent(p) => (scale(&pm, *p / 100.0), p_abs_max * p / 100.0),
                MaxCapacitySpec::Absolute(r) => {
                    let m = min_each(r, &pm);
                    let abs = share_pct(&m, cluster).unwrap_or(p_abs_max);
                    (m, abs)
                }
            };
            // The maximum is never below the guarantee.
            for (k, v) in g.entries() {
                if m.get(k) < v {
                    m.set(k, v);
                }
            }
            let q = &mut self.queues[c];
            q.guaranteed = g;
            q.maximum = m;
            q.abs_capacity = abs;
            q.abs_max_capacity = abs_max.max(abs);
            self.compute_children(c, cluster);
        }
    }

    /// The effective ACL: a queue allows what it or any ancestor allows (YARN's OR rule);
    /// an unset ACL on root allows everyone.
    pub fn acl_allows(&self, idx: QueueIdx, user: &str, groups: &[String], admin: bool) -> bool {
        for q in self.path_up(idx) {
            let spec = &self.queues[q].spec;
            let acl: Option<&Acl> = if admin {
                spec.acl_admin.as_ref()
            } else {
                spec.acl_submit.as_ref()
            };
            match acl {
                Some(a) if a.allows(user, groups) => return true,
                None if self.queues[q].parent.is_none() => return true,
                _ => {}
            }
        }
        false
    }

    /// The ACL string of a queue as YARN shows it (inherited ones resolved to the nearest set).
    pub fn acl_string(&self, idx: QueueIdx, admin: bool) -> String {
        for q in self.path_up(idx) {
            let spec = &self.queues[q].spec;
            let acl = if admin {
                spec.acl_admin.as_ref()
            } else {
                spec.acl_submit.as_ref()
            };
            if let Some(a) = acl {
                return acl_text(a);
            }
        }
        "*".into()
    }
}

pub fn acl_text(a: &Acl) -> String {
    if a.all {
        return "*".into();
    }
    let users: Vec<&str> = a.users.iter().map(String::as_str).collect();
    let groups: Vec<&str> = a.groups.iter().map(String::as_str).collect();
    if users.is_empty() && groups.is_empty() {
        return " ".into();
    }
    format!("{} {}", users.join(","), groups.join(","))
        .trim_end()
        .to_string()
}

/// Component-wise `r * f`, rounded down.
pub fn scale(r: &Resource, f: f64) -> Resource {
    let mut out = Resource::zero();
    for (k, v) in r.entries() {
        out.set(k, (v as f64 * f).floor() as i64);
    }
    out
}

/// The larger of each dimension.
pub fn max_each(a: &Resource, b: &Resource) -> Resource {
    let mut out = a.clone();
    for (k, v) in b.entries() {
        if v > out.get(k) {
            out.set(k, v);
        }
    }
    out
}

pub fn min_each(a: &Resource, b: &Resource) -> Resource {
    let mut out = Resource::zero();
    for (k, v) in a.entries() {
        out.set(k, v.min(b.get(k)));
    }
    out
}

/// `r` as a percent of `cluster`, by memory (YARN's absolute figures are per partition and
/// memory-based for display).
/// `r`'s memory as a percentage of the cluster's; `None` while the cluster has none.
fn share_pct(r: &Resource, cluster: &Resource) -> Option<f64> {
    (cluster.memory_mb > 0).then(|| r.memory_mb as f64 * 100.0 / cluster.memory_mb as f64)
}

/// How far `used` is into `base`, by the configured calculator: memory only, or the dominant
/// share over every type `base` has (a type `base` lacks counts as fully used when used).
pub fn ratio(calc: Calculator, used: &Resource, base: &Resource) -> f64 {
    match calc {
        Calculator::Memory => {
            if base.memory_mb > 0 {
                used.memory_mb as f64 / base.memory_mb as f64
            } else if used.memory_mb > 0 {
                f64::INFINITY
            } else {
                0.0
            }
        }
        Calculator::Dominant => used.dominant_ratio(base),
    }
}

/// `a` within `b` by the calculator: memory only, or every type.
pub fn within(calc: Calculator, a: &Resource, b: &Resource) -> bool {
    match calc {
        Calculator::Memory => a.memory_mb <= b.memory_mb,
        Calculator::Dominant => a.fits_in(b),
    }
}

/// `within(calc, &sum(parts), b)` without building the sum: the scheduler asks it of every
/// queue on a leaf's path for every visit.
pub fn sum_within(calc: Calculator, parts: &[&Resource], b: &Resource) -> bool {
    let sum =
        |f: &dyn Fn(&Resource) -> i64| parts.iter().fold(0i64, |acc, r| acc.saturating_add(f(r)));
    if sum(&|r| r.memory_mb) > b.memory_mb {
        return false;
    }
    if calc == Calculator::Memory {
        return true;
    }
    sum(&|r| r.vcores) <= b.vcores
        && parts
            .iter()
            .all(|p| p.extended().all(|(k, _)| sum(&|r| r.get(k)) <= b.get(k)))
}
