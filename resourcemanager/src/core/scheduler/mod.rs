//! The capacity scheduler: a queue tree with guarantees and maxima, users with limits,
//! applications with YARN's desired-state asks, and a node index. Pure: it is told about
//! nodes, applications, asks and releases, and answers with placements; the lifecycle layer
//! ([`super::RmCore`]) turns placements into containers.
//!
//! One pass ([`Scheduler::schedule`]) places one container at a time, each time choosing
//! the most under-served queue (used over guaranteed by the resource calculator, then the
//! queue's priority) down to a leaf, the first application in the leaf's order (FIFO by
//! application priority then submission, or fair: least used first) whose user is within its
//! limit, its first ask (by request priority) that fits the queue's maximum on every level,
//! and a node by the index's policy, honouring locality with YARN's delay scheduling. A pass
//! runs after every event (an ask, a node joining or a container ending), so an allocation
//! never waits for a heartbeat. A leaf, a user or an ask shape that cannot be served is
//! skipped for the rest of the pass, which bounds a pass's cost on a full cluster.

pub mod gang;
pub mod nodes;
pub mod queues;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use spindle_common::{ApplicationId, NodeId, Resource};

use super::queue_conf::{Calculator, OrderingPolicy, SchedulerConf};
pub use nodes::{NodeIndex, SchedNode};
use queues::{min_each, ratio, scale, within};
pub use queues::{Queue, QueueTree, UserUsage};

/// (YARN request priority, allocationRequestId): the key of a desired-state ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AskKey {
    pub priority: i32,
    pub allocation_request_id: i64,
}

/// The desired state for one [`AskKey`]: how many containers are still wanted anywhere
/// (`any`), on given hosts and racks, and whether the ask may fall back from them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    pub capability: Resource,
    pub any: u32,
    pub relax_locality: bool,
    pub hosts: BTreeMap<String, u32>,
    pub racks: BTreeMap<String, u32>,
    /// The application's AM container ask.
    pub is_am: bool,
    /// Scheduling opportunities passed up waiting for locality (delay scheduling).
    pub missed: u32,
    /// The gang this ask belongs to: placed only together with the gang's other asks.
    pub gang: Option<String>,
}

impl Ask {
    pub fn new(capability: Resource, n: u32) -> Self {
        Self {
            capability,
            any: n,
            relax_locality: true,
            hosts: BTreeMap::new(),
            racks: BTreeMap::new(),
            is_am: false,
            missed: 0,
            gang: None,
        }
    }
    fn has_hosts(&self) -> bool {
        self.hosts.values().any(|c| *c > 0)
    }
    fn has_racks(&self) -> bool {
        self.racks.values().any(|c| *c > 0)
    }
}

#[derive(Debug, Clone)]
pub struct SchedApp {
    /// The leaf queue's index in the tree.
    pub queue: usize,
    pub user: String,
    pub priority: i32,
    pub submit_seq: u64,
    pub asks: BTreeMap<AskKey, Ask>,
    pub used: Resource,
    pub containers: usize,
    pub am_resource: Resource,
    /// Activated: counted against max-parallel-apps and the AM limit, may be scheduled.
    pub active: bool,
    /// Gangs by id.
    pub gangs: BTreeMap<String, gang::Gang>,
    order: Option<(i64, u64)>,
}

/// One decision: place a container of `resource` for `app`'s ask `key` on `node`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub app: ApplicationId,
    pub key: AskKey,
    pub node: NodeId,
    pub resource: Resource,
    pub is_am: bool,
    /// Set for members of a gang (all of which are in the same pass's placements).
    pub gang: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Scheduler {
    conf: SchedulerConf,
    min_alloc: Resource,
    tree: QueueTree,
    nodes: NodeIndex,
    apps: BTreeMap<ApplicationId, SchedApp>,
    /// Per queue: schedulable applications in its subtree (to skip idle branches quickly).
    demand: Vec<usize>,
    /// Per (leaf, user): the user's schedulable applications there ("active users").
    active_users: BTreeMap<(usize, String), usize>,
    /// Containers wanted, by shape, over every ask: a pass ends as soon as every wanted
    /// shape is known not to fit anywhere.
    shapes: BTreeMap<Resource, u64>,
    /// Work counters of the passes so far (for benchmarks and diagnosis).
    pub stats: PassStats,
}

/// What scheduling passes did: how many, and how much work they took.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PassStats {
    pub passes: u64,
    pub leaves_served: u64,
    pub apps_visited: u64,
    pub node_searches: u64,
    pub failed_searches: u64,
    pub placements: u64,
    /// Gangs placed whole.
    pub gangs_placed: u64,
}

/// How serving one leaf ended.
enum Served {
    Placed(Vec<Placement>),
    /// Nothing more for this leaf in this pass.
    LeafDone,
    /// No wanted shape fits anywhere: the pass is over.
    PassDone,
}

impl Scheduler {
    pub fn new(conf: SchedulerConf, min_alloc: Resource) -> Self {
        let tree = QueueTree::build(&conf.root);
        let n = tree.queues.len();
        Self {
            conf,
            nodes: NodeIndex::new(min_alloc.clone()),
            min_alloc,
            tree,
            apps: BTreeMap::new(),
            demand: vec![0; n],
            active_users: BTreeMap::new(),
            shapes: BTreeMap::new(),
            stats: PassStats::default(),
        }
    }

    fn count_shape(&mut self, cap: &Resource, n: u32, up: bool) {
        if n == 0 {
            return;
        }
        if up {
            *self.shapes.entry(cap.clone()).or_insert(0) += u64::from(n);
        } else if let Some(c) = self.shapes.get_mut(cap) {
            *c = c.saturating_sub(u64::from(n));
            if *c == 0 {
                self.shapes.remove(cap);
            }
        }
    }

    // ------------------------------------------------------------------ accessors

    pub fn conf(&self) -> &SchedulerConf {
        &self.conf
    }
    pub fn tree(&self) -> &QueueTree {
        &self.tree
    }
    pub fn nodes(&self) -> &NodeIndex {
        &self.nodes
    }
    pub fn node(&self, id: &NodeId) -> Option<&SchedNode> {
        self.nodes.by_id(id)
    }
    pub fn apps(&self) -> &BTreeMap<ApplicationId, SchedApp> {
        &self.apps
    }
    pub fn app(&self, id: &ApplicationId) -> Option<&SchedApp> {
        self.apps.get(id)
    }
    pub fn cluster(&self) -> &Resource {
        &self.nodes.cluster
    }
    pub fn calculator(&self) -> Calculator {
        self.conf.calculator
    }

    // ------------------------------------------------------------------ nodes

    pub fn add_node(&mut self, id: NodeId, rack: String, total: Resource, used: Resource) {
        self.nodes.add(id, rack, total, used);
        self.recompute();
    }

    /// Records a node's GPU model (from its `nm.yarn.io/gpu-model` attribute).
    pub fn set_gpu_model(&mut self, id: &NodeId, model: Option<String>) {
        self.nodes.set_gpu_model(id, model);
    }

    pub fn remove_node(&mut self, id: &NodeId) -> Option<SchedNode> {
        let n = self.nodes.remove(id);
        self.recompute();
        n
    }

    pub fn set_schedulable(&mut self, id: &NodeId, schedulable: bool) {
        self.nodes.set_schedulable(id, schedulable);
        self.recompute();
    }

    fn recompute(&mut self) {
        let cluster = self.nodes.cluster.clone();
        self.tree.compute_capacities(&cluster);
    }

    // ------------------------------------------------------------------ applications

    /// Registers an application in `leaf` (an index from [`QueueTree::leaf`]). Returns the
    /// applications activated as a result (possibly including this one).
    pub fn add_app(
        &mut self,
        id: ApplicationId,
        leaf: usize,
        user: &str,
        priority: i32,
        submit_seq: u64,
        am_resource: Resource,
    ) -> Vec<ApplicationId> {
        self.apps.insert(
            id,
            SchedApp {
                queue: leaf,
                user: user.to_string(),
                priority,
                submit_seq,
                asks: BTreeMap::new(),
                used: Resource::zero(),
                containers: 0,
                am_resource,
                active: false,
                gangs: BTreeMap::new(),
                order: None,
            },
        );
        let q = &mut self.tree.queues[leaf];
        q.apps.insert(id);
        q.waiting.insert((submit_seq, id));
        q.users.entry(user.to_string()).or_default().pending_apps += 1;
        self.try_activate(leaf)
    }

    /// Forgets an application (its containers must have been released) and activates the
    /// next ones its departure makes room for.
    pub fn remove_app(&mut self, id: &ApplicationId) -> Vec<ApplicationId> {
        let Some(mut app) = self.apps.remove(id) else {
            return vec![];
        };
        app.asks.clear();
        self.set_order(id, &mut app, None);
        let leaf = app.queue;
        self.detach(id, &app);
        self.try_activate(leaf)
    }

    /// Takes an app's membership and AM charge out of its leaf (usage must be zero or moved).
    fn detach(&mut self, id: &ApplicationId, app: &SchedApp) {
        let q = &mut self.tree.queues[app.queue];
        q.apps.remove(id);
        q.waiting.remove(&(app.submit_seq, *id));
        let mut drop_user = false;
        if let Some(u) = q.users.get_mut(&app.user) {
            if app.active {
                u.active_apps = u.active_apps.saturating_sub(1);
                u.am_used.sub_assign(&app.am_resource);
            } else {
                u.pending_apps = u.pending_apps.saturating_sub(1);
            }
            drop_user = u.active_apps == 0 && u.pending_apps == 0 && u.used.is_zero();
        }
        if drop_user {
            q.users.remove(&app.user);
        }
        if app.active {
            q.active_apps = q.active_apps.saturating_sub(1);
            q.am_used.sub_assign(&app.am_resource);
        }
    }

    /// The AM resource limit of a leaf: `maximum-am-resource-percent` of what the queue may
    /// currently use (its guarantee, or more while it is using more).
    pub fn am_limit(&self, leaf: usize) -> Resource {
        let q = &self.tree.queues[leaf];
        let base = max_each(&q.guaranteed, &q.used);
        let mut l = scale(&base, q.spec.max_am_resource_percent);
        l.memory_mb = l.memory_mb.max(self.min_alloc.memory_mb);
        l.vcores = l.vcores.max(self.min_alloc.vcores);
        l
    }

    fn max_parallel(&self, leaf: usize) -> Option<u32> {
        self.tree.queues[leaf]
            .spec
            .max_parallel_apps
            .or(self.conf.max_parallel_apps)
    }

    fn user_max_parallel(&self, user: &str) -> Option<u32> {
        self.conf
            .user_max_parallel_apps_for
            .get(user)
            .copied()
            .or(self.conf.user_max_parallel_apps)
    }

    /// Why a waiting application is not active yet, in YARN's words; None if it is active.
    pub fn waiting_reason(&self, id: &ApplicationId) -> Option<String> {
        let app = self.apps.get(id)?;
        if app.active {
            return None;
        }
        let q = &self.tree.queues[app.queue];
        if let Some(m) = self.max_parallel(app.queue) {
            if q.active_apps as u64 >= u64::from(m) {
                return Some(format!(
                    "Application is added to the scheduler and is not yet activated. Queue's max-parallel-apps ({m}) reached: {} running in {}",
                    q.active_apps, q.spec.path
                ));
            }
        }
        if let Some(m) = self.user_max_parallel(&app.user) {
            let active = q.users.get(&app.user).map(|u| u.active_apps).unwrap_or(0);
            if active as u64 >= u64::from(m) {
                return Some(format!(
                    "Application is added to the scheduler and is not yet activated. User {}'s max-parallel-apps ({m}) reached",
                    app.user
                ));
            }
        }
        Some(format!(
            "Application is added to the scheduler and is not yet activated. Queue's AM resource limit exceeded. Details : AM Partition = <DEFAULT_PARTITION>; AM Resource Request = {}; Queue Resource Limit for AM = {}; Queue AM Resource Usage = {};",
            app.am_resource,
            self.am_limit(app.queue),
            q.am_used
        ))
    }

    /// Activates waiting applications of `leaf` in submission order while the limits allow:
    /// max-parallel-apps (queue, then user) and the AM resource limit (at least one AM may
    /// always run, as in YARN).
    fn try_activate(&mut self, leaf: usize) -> Vec<ApplicationId> {
        let mut out = Vec::new();
        let waiting: Vec<(u64, ApplicationId)> =
            self.tree.queues[leaf].waiting.iter().copied().collect();
        for (seq, id) in waiting {
            let Some(app) = self.apps.get(&id) else {
                continue;
            };
            let q = &self.tree.queues[leaf];
            if let Some(m) = self.max_parallel(leaf) {
                if q.active_apps as u64 >= u64::from(m) {
                    break;
                }
            }
            if let Some(m) = self.user_max_parallel(&app.user) {
                let active = q.users.get(&app.user).map(|u| u.active_apps).unwrap_or(0);
                if active as u64 >= u64::from(m) {
                    continue;
                }
            }
            if q.active_apps > 0 {
                let after = q.am_used.plus(&app.am_resource);
                if !within(self.conf.calculator, &after, &self.am_limit(leaf)) {
                    break;
                }
            }
            let am = app.am_resource.clone();
            let user = app.user.clone();
            let q = &mut self.tree.queues[leaf];
            q.waiting.remove(&(seq, id));
            q.active_apps += 1;
            q.am_used.add_assign(&am);
            let u = q.users.entry(user).or_default();
            u.pending_apps = u.pending_apps.saturating_sub(1);
            u.active_apps += 1;
            u.am_used.add_assign(&am);
            if let Some(a) = self.apps.get_mut(&id) {
                a.active = true;
            }
            self.refresh_order(&id);
            out.push(id);
        }
        out
    }

    /// Moves an application to another leaf with its usage (YARN's move).
    pub fn move_app(&mut self, id: &ApplicationId, leaf: usize) {
        let Some(mut app) = self.apps.remove(id) else {
            return;
        };
        let old = app.queue;
        self.set_order(id, &mut app, None);
        let used = app.used.clone();
        for q in self.tree.path_up(old).collect::<Vec<_>>() {
            self.tree.queues[q].used.sub_assign(&used);
            self.tree.queues[q].num_containers = self.tree.queues[q]
                .num_containers
                .saturating_sub(app.containers);
        }
        if let Some(u) = self.tree.queues[old].users.get_mut(&app.user) {
            u.used.sub_assign(&used);
        }
        self.detach(id, &app);
        app.queue = leaf;
        for q in self.tree.path_up(leaf).collect::<Vec<_>>() {
            self.tree.queues[q].used.add_assign(&used);
            self.tree.queues[q].num_containers += app.containers;
        }
        let nq = &mut self.tree.queues[leaf];
        nq.apps.insert(*id);
        let u = nq.users.entry(app.user.clone()).or_default();
        u.used.add_assign(&used);
        if app.active {
            u.active_apps += 1;
            u.am_used.add_assign(&app.am_resource);
            nq.active_apps += 1;
            nq.am_used.add_assign(&app.am_resource);
        } else {
            u.pending_apps += 1;
            nq.waiting.insert((app.submit_seq, *id));
        }
        self.apps.insert(*id, app);
        self.refresh_order(id);
        self.try_activate(old);
        self.try_activate(leaf);
    }

    pub fn set_priority(&mut self, id: &ApplicationId, priority: i32) {
        if let Some(a) = self.apps.get_mut(id) {
            a.priority = priority;
        }
        self.refresh_order(id);
    }

    /// Replaces the configuration: the tree is rebuilt and every application re-attached to
    /// its leaf by path with its usage. The caller has checked that every application's leaf
    /// still exists. Returns applications activated by the new limits.
    pub fn reconfigure(
        &mut self,
        conf: SchedulerConf,
        app_leaves: &BTreeMap<ApplicationId, String>,
    ) -> Vec<ApplicationId> {
        let old_tree = std::mem::replace(&mut self.tree, QueueTree::build(&conf.root));
        self.conf = conf;
        self.demand = vec![0; self.tree.queues.len()];
        self.active_users.clear();
        self.recompute();
        let ids: Vec<ApplicationId> = self.apps.keys().copied().collect();
        let mut touched = BTreeSet::new();
        for id in ids {
            let Some(mut app) = self.apps.remove(&id) else {
                continue;
            };
            let path = app_leaves
                .get(&id)
                .cloned()
                .unwrap_or_else(|| old_tree.queues[app.queue].spec.path.clone());
            let Some(leaf) = self.tree.leaf(&path) else {
                // Unreachable when the caller validated; keep the app out of scheduling.
                continue;
            };
            app.queue = leaf;
            app.order = None;
            touched.insert(leaf);
            for q in self.tree.path_up(leaf).collect::<Vec<_>>() {
                self.tree.queues[q].used.add_assign(&app.used);
                self.tree.queues[q].num_containers += app.containers;
            }
            let q = &mut self.tree.queues[leaf];
            q.apps.insert(id);
            let u = q.users.entry(app.user.clone()).or_default();
            u.used.add_assign(&app.used);
            if app.active {
                u.active_apps += 1;
                u.am_used.add_assign(&app.am_resource);
                q.active_apps += 1;
                q.am_used.add_assign(&app.am_resource);
            } else {
                u.pending_apps += 1;
                q.waiting.insert((app.submit_seq, id));
            }
            self.apps.insert(id, app);
            self.refresh_order(&id);
        }
        touched
            .into_iter()
            .flat_map(|l| self.try_activate(l))
            .collect()
    }

    // ------------------------------------------------------------------ asks

    /// Replaces the desired state for one key; nothing wanted anywhere removes it.
    pub fn set_ask(&mut self, app: &ApplicationId, key: AskKey, ask: Ask) {
        let Some(a) = self.apps.get_mut(app) else {
            return;
        };
        let old = if ask.any == 0 && !ask.has_hosts() {
            a.asks.remove(&key)
        } else {
            let (cap, n, solo) = (ask.capability.clone(), ask.any, ask.gang.is_none());
            let old = a.asks.insert(key, ask);
            if solo {
                self.count_shape(&cap, n, true);
            }
            old
        };
        if let Some(o) = old.filter(|o| o.gang.is_none()) {
            self.count_shape(&o.capability, o.any, false);
        }
        self.refresh_order(app);
    }

    pub fn ask(&self, app: &ApplicationId, key: &AskKey) -> Option<&Ask> {
        self.apps.get(app).and_then(|a| a.asks.get(key))
    }

    pub fn clear_asks(&mut self, app: &ApplicationId) {
        let asks = match self.apps.get_mut(app) {
            Some(a) => std::mem::take(&mut a.asks),
            None => return,
        };
        for ask in asks.into_values().filter(|a| a.gang.is_none()) {
            self.count_shape(&ask.capability, ask.any, false);
        }
        self.release_reservations(app);
        self.refresh_order(app);
    }

    /// Re-files an application in its leaf's serving order (or out of it).
    fn refresh_order(&mut self, id: &ApplicationId) {
        let Some(mut app) = self.apps.remove(id) else {
            return;
        };
        let key = if app.active && !app.asks.is_empty() {
            Some(match self.tree.queues[app.queue].spec.ordering {
                OrderingPolicy::Fifo => (-i64::from(app.priority), app.submit_seq),
                OrderingPolicy::Fair => {
                    let share = ratio(self.conf.calculator, &app.used, &self.nodes.cluster);
                    let scaled = if share.is_finite() {
                        (share * 1e9) as i64
                    } else {
                        i64::MAX
                    };
                    (scaled, app.submit_seq)
                }
            })
        } else {
            None
        };
        self.set_order(id, &mut app, key);
        self.apps.insert(*id, app);
    }

    fn set_order(&mut self, id: &ApplicationId, app: &mut SchedApp, key: Option<(i64, u64)>) {
        if app.order == key {
            return;
        }
        let leaf = app.queue;
        if let Some(old) = app.order.take() {
            self.tree.queues[leaf]
                .schedulable
                .remove(&(old.0, old.1, *id));
            if key.is_none() {
                self.bump_demand(leaf, &app.user, false);
            }
        } else if key.is_some() {
            self.bump_demand(leaf, &app.user, true);
        }
        if let Some(k) = key {
            self.tree.queues[leaf].schedulable.insert((k.0, k.1, *id));
        }
        app.order = key;
    }

    fn bump_demand(&mut self, leaf: usize, user: &str, up: bool) {
        for q in self.tree.path_up(leaf).collect::<Vec<_>>() {
            if up {
                self.demand[q] += 1;
            } else {
                self.demand[q] = self.demand[q].saturating_sub(1);
            }
        }
        let k = (leaf, user.to_string());
        let e = self.active_users.entry(k.clone()).or_insert(0);
        if up {
            *e += 1;
        } else {
            *e = e.saturating_sub(1);
            if *e == 0 {
                self.active_users.remove(&k);
            }
        }
    }

    // ------------------------------------------------------------------ usage

    /// Accounts a container (placed by a pass, or recovered / re-reported by an NM).
    pub fn charge(&mut self, app: &ApplicationId, node: &NodeId, r: &Resource) {
        if let Some(slot) = self.nodes.slot(node) {
            self.nodes.charge(slot, r);
        }
        self.charge_app(app, r, true);
    }

    /// Gives a finished or released container's resources back.
    pub fn release(&mut self, app: &ApplicationId, node: &NodeId, r: &Resource) {
        if let Some(slot) = self.nodes.slot(node) {
            self.nodes.release(slot, r);
        }
        self.charge_app(app, r, false);
    }

    fn charge_app(&mut self, id: &ApplicationId, r: &Resource, up: bool) {
        let Some(app) = self.apps.get_mut(id) else {
            return;
        };
        let leaf = app.queue;
        let user = app.user.clone();
        if up {
            app.used.add_assign(r);
            app.containers += 1;
        } else {
            app.used.sub_assign(r);
            app.containers = app.containers.saturating_sub(1);
        }
        let mut q = Some(leaf);
        while let Some(i) = q {
            let queue = &mut self.tree.queues[i];
            if up {
                queue.used.add_assign(r);
                queue.num_containers += 1;
            } else {
                queue.used.sub_assign(r);
                queue.num_containers = queue.num_containers.saturating_sub(1);
            }
            q = queue.parent;
        }
        let u = self.tree.queues[leaf].users.entry(user).or_default();
        if up {
            u.used.add_assign(r);
        } else {
            u.used.sub_assign(r);
        }
        if self.tree.queues[leaf].spec.ordering == OrderingPolicy::Fair {
            self.refresh_order(id);
        }
    }

    // ------------------------------------------------------------------ limits

    /// YARN's user limit in a leaf for a user about to take `ask`: the larger of an equal
    /// share among active users and `minimum-user-limit-percent` of the queue's current
    /// capacity, capped by `user-limit-factor` x the guarantee (-1: the queue maximum), and
    /// never below one minimum allocation.
    pub fn user_limit(&self, leaf: usize, ask: &Resource) -> Resource {
        let q = &self.tree.queues[leaf];
        let calc = self.conf.calculator;
        let current = if !q.guaranteed.is_zero() && within(calc, &q.used, &q.guaranteed) {
            q.guaranteed.clone()
        } else {
            min_each(&q.used.plus(ask), &q.maximum)
        };
        let active = self
            .active_users
            .range((leaf, String::new())..)
            .take_while(|((l, _), _)| *l == leaf)
            .count()
            .max(1);
        let equal = scale(&current, 1.0 / active as f64);
        let floor = scale(&current, q.spec.minimum_user_limit_percent / 100.0);
        let limit = max_each(&equal, &floor);
        let cap = if q.spec.user_limit_factor < 0.0 {
            q.maximum.clone()
        } else {
            scale(&q.guaranteed, q.spec.user_limit_factor)
        };
        let mut l = min_each(&limit, &cap);
        l.memory_mb = l.memory_mb.max(self.min_alloc.memory_mb);
        l.vcores = l.vcores.max(self.min_alloc.vcores);
        l
    }

    /// The first queue from `leaf` up whose maximum `ask` would exceed, or None if it fits.
    fn queue_blocking(&self, leaf: usize, ask: &Resource) -> Option<usize> {
        let calc = self.conf.calculator;
        self.tree.path_up(leaf).find(|q| {
            let queue = &self.tree.queues[*q];
            !within(
                calc,
                &queue.used.plus(&queue.reserved).plus(ask),
                &queue.maximum,
            )
        })
    }

    // ------------------------------------------------------------------ the pass

    /// Places as many outstanding asks as fit now, and charges them.
    pub fn schedule(&mut self) -> Vec<Placement> {
        let mut out = Vec::new();
        if self.nodes.is_empty() {
            return out;
        }
        self.stats.passes += 1;
        let mut excluded = vec![false; self.tree.queues.len()];
        let mut failed_shapes: Vec<Resource> = Vec::new();
        let mut blocked_users: BTreeSet<(usize, String)> = BTreeSet::new();
        while let Some(leaf) = self.pick_leaf(&mut excluded) {
            self.stats.leaves_served += 1;
            match self.serve_leaf(leaf, &mut failed_shapes, &mut blocked_users) {
                Served::Placed(p) => {
                    self.stats.placements += p.len() as u64;
                    out.extend(p)
                }
                Served::LeafDone => excluded[leaf] = true,
                Served::PassDone => break,
            }
        }
        out
    }

    /// Descends from the root to the most under-served leaf with demand not yet excluded.
    fn pick_leaf(&self, excluded: &mut [bool]) -> Option<usize> {
        let root = self.tree.root();
        let calc = self.conf.calculator;
        loop {
            if excluded[root] || self.demand[root] == 0 {
                return None;
            }
            let mut q = root;
            loop {
                let queue = &self.tree.queues[q];
                if queue.is_leaf() {
                    return Some(q);
                }
                let best = queue
                    .children
                    .iter()
                    .copied()
                    .filter(|c| !excluded[*c] && self.demand[*c] > 0)
                    .min_by(|a, b| {
                        let ka = self.order_key(calc, *a);
                        let kb = self.order_key(calc, *b);
                        ka.partial_cmp(&kb).unwrap_or(std::cmp::Ordering::Equal)
                    });
                match best {
                    Some(c) => q = c,
                    None => {
                        excluded[q] = true;
                        break;
                    }
                }
            }
        }
    }

    /// Under-served first. A queue below its guarantee is served before any other, the one
    /// furthest below first (the gap as a share of the cluster): this is what makes
    /// every queue converge to within one container of its guarantee under saturating
    /// demand. Queues at or over their guarantee come next, by used over guaranteed (YARN's
    /// utilization order), then queues without a guarantee by their share of the cluster.
    /// Ties go to the higher queue priority, then to tree order.
    fn order_key(&self, calc: Calculator, q: usize) -> (u8, f64, i64, usize) {
        let queue = &self.tree.queues[q];
        let prio = -i64::from(queue.spec.priority);
        let cluster = &self.nodes.cluster;
        if queue.guaranteed.is_zero() {
            return (2, ratio(calc, &queue.used, cluster), prio, q);
        }
        let r = ratio(calc, &queue.used, &queue.guaranteed);
        if r < 1.0 {
            // The gap to the guarantee, measured along the queue's dominant dimension and
            // scaled to the cluster: (1 - used/guaranteed) x guaranteed's share.
            let gap_share = (1.0 - r) * ratio(calc, &queue.guaranteed, cluster);
            (0, -gap_share, prio, q)
        } else {
            (1, r, prio, q)
        }
    }

    /// Places one container for the first servable application of `leaf`. Cheap checks
    /// come first (a shape already known not to fit), so a full cluster costs little.
    fn serve_leaf(
        &mut self,
        leaf: usize,
        failed_shapes: &mut Vec<Resource>,
        blocked_users: &mut BTreeSet<(usize, String)>,
    ) -> Served {
        let calc = self.conf.calculator;
        let root = self.tree.root();
        // Shapes that exceed a maximum of this leaf or one of its parents, in this call.
        let mut over_max: Vec<Resource> = Vec::new();
        let mut tried_gangs: BTreeSet<String> = BTreeSet::new();
        let mut cursor: Option<(i64, u64, ApplicationId)> = None;
        loop {
            let next = {
                let set = &self.tree.queues[leaf].schedulable;
                match cursor {
                    None => set.iter().next().copied(),
                    Some(c) => set
                        .range((Bound::Excluded(c), Bound::Unbounded))
                        .next()
                        .copied(),
                }
            };
            let Some(entry) = next else {
                return Served::LeafDone;
            };
            cursor = Some(entry);
            self.stats.apps_visited += 1;
            let app_id = entry.2;
            // The asks of this app that might be placed, without allocating for the rest.
            // Gangs first: each is tried whole, once per leaf visit.
            let gangs: Vec<String> = self
                .apps
                .get(&app_id)
                .map(|a| {
                    a.asks
                        .values()
                        .filter_map(|x| x.gang.clone())
                        .collect::<BTreeSet<_>>()
                        .into_iter()
                        .collect()
                })
                .unwrap_or_default();
            for g in gangs {
                if tried_gangs.insert(g.clone()) {
                    self.stats.node_searches += 1;
                    if let Some(p) = self.try_gang(&app_id, &g, leaf) {
                        return Served::Placed(p);
                    }
                }
            }
            let candidates: Vec<(AskKey, Resource, bool)> = match self.apps.get(&app_id) {
                Some(app) => app
                    .asks
                    .iter()
                    .filter(|(_, a)| a.any > 0 && a.gang.is_none())
                    .filter(|(_, a)| {
                        !over_max.iter().any(|s| s.fits_in(&a.capability))
                            && (a.has_hosts()
                                || a.has_racks()
                                || !failed_shapes.iter().any(|s| s.fits_in(&a.capability)))
                    })
                    .map(|(k, a)| (*k, a.capability.clone(), a.is_am))
                    .collect(),
                None => continue,
            };
            if candidates.is_empty() {
                continue;
            }
            let Some(user) = self.apps.get(&app_id).map(|a| a.user.clone()) else {
                continue;
            };
            if blocked_users.contains(&(leaf, user.clone())) {
                continue;
            }
            let user_used = self.tree.queues[leaf]
                .users
                .get(&user)
                .map(|u| u.used.clone())
                .unwrap_or_default();
            for (key, cap, is_am) in candidates {
                if failed_shapes.iter().any(|s| s.fits_in(&cap)) {
                    continue;
                }
                if let Some(q) = self.queue_blocking(leaf, &cap) {
                    // Over the root's maximum means the cluster itself is full in some
                    // dimension: no node can take this shape in this pass.
                    if q == root {
                        failed_shapes.push(cap.clone());
                        if self
                            .shapes
                            .keys()
                            .all(|s| failed_shapes.iter().any(|f| f.fits_in(s)))
                        {
                            return Served::PassDone;
                        }
                    }
                    over_max.push(cap);
                    continue;
                }
                // AM containers were admitted by the AM limit; the user limit governs the rest.
                if !is_am && !within(calc, &user_used, &self.user_limit(leaf, &cap)) {
                    blocked_users.insert((leaf, user.clone()));
                    break;
                }
                self.stats.node_searches += 1;
                match self.find_node(&app_id, &key) {
                    Some(slot) => {
                        return match self.commit(&app_id, &key, slot) {
                            Some(p) => Served::Placed(vec![p]),
                            None => Served::LeafDone,
                        }
                    }
                    None => {
                        self.stats.failed_searches += 1;
                        let local = self
                            .apps
                            .get(&app_id)
                            .and_then(|a| a.asks.get(&key))
                            .is_some_and(|a| a.has_hosts() || a.has_racks());
                        if !local {
                            failed_shapes.push(cap);
                            if self
                                .shapes
                                .keys()
                                .all(|s| failed_shapes.iter().any(|f| f.fits_in(s)))
                            {
                                return Served::PassDone;
                            }
                        }
                    }
                }
            }
        }
    }

    /// A node for an ask, honouring locality with delay scheduling: host-local while fewer
    /// than `node-locality-delay` opportunities were missed, rack-local for
    /// `rack-locality-additional-delay` more (-1: as many again), then anywhere if allowed.
    fn find_node(&mut self, app: &ApplicationId, key: &AskKey) -> Option<usize> {
        let node_delay = self.conf.node_locality_delay;
        let rack_delay = if self.conf.rack_locality_additional_delay < 0 {
            node_delay
        } else {
            self.conf.rack_locality_additional_delay as u32
        };
        let ask = self.apps.get(app)?.asks.get(key)?;
        let cap = &ask.capability;
        if !ask.has_hosts() && !ask.has_racks() {
            return self.nodes.find_any(cap);
        }
        let hosts = ask.hosts.iter().filter(|(_, c)| **c > 0).map(|(h, _)| h);
        if let Some(s) = self.nodes.find_on_hosts(hosts, cap) {
            return Some(s);
        }
        let missed = ask.missed;
        let mut found = None;
        if ask.has_racks() && (missed >= node_delay || !ask.has_hosts()) {
            let racks = ask.racks.iter().filter(|(_, c)| **c > 0).map(|(r, _)| r);
            found = self.nodes.find_in_racks(racks, cap);
        }
        if found.is_none() && ask.relax_locality && missed >= node_delay.saturating_add(rack_delay)
        {
            found = self.nodes.find_any(cap);
        }
        if found.is_none() {
            if let Some(a) = self.apps.get_mut(app).and_then(|a| a.asks.get_mut(key)) {
                a.missed = a.missed.saturating_add(1);
            }
        }
        found
    }

    fn commit(&mut self, app_id: &ApplicationId, key: &AskKey, slot: usize) -> Option<Placement> {
        let node = self.nodes.get(slot)?;
        let (node_id, host, rack) = (node.id.clone(), node.host.clone(), node.rack.clone());
        let app = self.apps.get_mut(app_id)?;
        let ask = app.asks.get_mut(key)?;
        let resource = ask.capability.clone();
        let is_am = ask.is_am;
        let gang = ask.gang.clone();
        let had = ask.any;
        ask.any = ask.any.saturating_sub(1);
        ask.missed = 0;
        if let Some(c) = ask.hosts.get_mut(&host) {
            *c = c.saturating_sub(1);
        }
        if let Some(c) = ask.racks.get_mut(&rack) {
            *c = c.saturating_sub(1);
        }
        if ask.any == 0 {
            app.asks.remove(key);
        }
        if had > 0 && gang.is_none() {
            self.count_shape(&resource, 1, false);
        }
        self.nodes.charge(slot, &resource);
        self.charge_app(app_id, &resource, true);
        self.refresh_order(app_id);
        Some(Placement {
            app: *app_id,
            key: *key,
            node: node_id,
            resource,
            is_am,
            gang,
        })
    }

    // ------------------------------------------------------------------ gangs

    /// Registers (or renews) a gang: a new round of asking starts when the gang is new or
    /// its last round ended (allocated, timed out, failed).
    pub fn set_gang(&mut self, app: &ApplicationId, id: &str, params: gang::GangParams, now: u64) {
        let Some(a) = self.apps.get_mut(app) else {
            return;
        };
        match a.gangs.get_mut(id) {
            Some(g) if g.phase.is_waiting() => g.params = params,
            _ => {
                a.gangs.insert(id.to_string(), gang::Gang::new(params, now));
            }
        }
    }

    pub fn gang(&self, app: &ApplicationId, id: &str) -> Option<&gang::Gang> {
        self.apps.get(app).and_then(|a| a.gangs.get(id))
    }

    /// Records a granted member's container.
    pub fn gang_member(&mut self, app: &ApplicationId, id: &str, c: spindle_common::ContainerId) {
        if let Some(g) = self.apps.get_mut(app).and_then(|a| a.gangs.get_mut(id)) {
            g.members.push(c);
        }
    }

    /// A member ended; a failure (non-zero exit, lost node) turns the gang FAILED.
    pub fn gang_member_ended(
        &mut self,
        app: &ApplicationId,
        id: &str,
        c: spindle_common::ContainerId,
        failed: bool,
    ) {
        if let Some(g) = self.apps.get_mut(app).and_then(|a| a.gangs.get_mut(id)) {
            if failed && g.members.contains(&c) && !g.failed.contains(&c) {
                g.failed.push(c);
                g.phase = gang::GangPhase::Failed;
                g.changed = true;
            }
        }
    }

    /// Ends every waiting gang older than its timeout: soft ones withdraw their asks and
    /// turn TIMED_OUT; hard ones are returned for the caller to fail their application.
    pub fn expire_gangs(
        &mut self,
        now: u64,
        default_timeout_ms: u64,
    ) -> Vec<(ApplicationId, String, bool, String)> {
        let mut expired = Vec::new();
        for (app, a) in &self.apps {
            for (id, g) in &a.gangs {
                let t = if g.params.timeout_ms > 0 {
                    g.params.timeout_ms
                } else {
                    default_timeout_ms
                };
                if g.phase.is_waiting() && now.saturating_sub(g.since) > t {
                    let diag = format!("gang {id} timed out after {t} ms: {}", g.diagnostics);
                    expired.push((*app, id.clone(), g.params.hard, diag));
                }
            }
        }
        for (app, id, _, diag) in &expired {
            self.withdraw_gang(app, id);
            if let Some(g) = self.apps.get_mut(app).and_then(|a| a.gangs.get_mut(id)) {
                g.phase = gang::GangPhase::TimedOut;
                g.diagnostics = diag.clone();
                g.reserved.clear();
                g.changed = true;
            }
        }
        expired
    }

    /// Removes a gang's asks and frees its reservation.
    fn withdraw_gang(&mut self, app: &ApplicationId, id: &str) {
        let keys: Vec<AskKey> = self
            .apps
            .get(app)
            .map(|a| {
                a.asks
                    .iter()
                    .filter(|(_, x)| x.gang.as_deref() == Some(id))
                    .map(|(k, _)| *k)
                    .collect()
            })
            .unwrap_or_default();
        if let Some(a) = self.apps.get_mut(app) {
            for k in keys {
                a.asks.remove(&k);
            }
        }
        self.unreserve(app, id);
        self.refresh_order(app);
    }

    fn unreserve(&mut self, app: &ApplicationId, id: &str) {
        let held: Vec<usize> = self
            .nodes
            .reservations()
            .iter()
            .filter(|(_, h)| h.0 == *app && h.1 == id)
            .map(|(s, _)| *s)
            .collect();
        for slot in held {
            self.nodes.reserve(slot, None);
        }
        let Some(a) = self.apps.get_mut(app) else {
            return;
        };
        let leaf = a.queue;
        let Some(g) = a.gangs.get_mut(id) else { return };
        g.reserved.clear();
        let need = std::mem::take(&mut g.reserved_need);
        for q in self.tree.path_up(leaf).collect::<Vec<_>>() {
            self.tree.queues[q].reserved.sub_assign(&need);
        }
    }

    fn release_reservations(&mut self, app: &ApplicationId) {
        let ids: Vec<String> = self
            .apps
            .get(app)
            .map(|a| a.gangs.keys().cloned().collect())
            .unwrap_or_default();
        for id in ids {
            self.unreserve(app, &id);
        }
    }

    /// Tries to place a waiting gang whole on what is free now (its own reservation
    /// included); if it does not fit, reserves the nodes it will use as they drain.
    fn try_gang(
        &mut self,
        app_id: &ApplicationId,
        id: &str,
        leaf: usize,
    ) -> Option<Vec<Placement>> {
        let app = self.apps.get(app_id)?;
        let g = app.gangs.get(id)?;
        if !g.phase.is_waiting() {
            return None;
        }
        let params = g.params.clone();
        let mut units = Vec::new();
        for (k, a) in app
            .asks
            .iter()
            .filter(|(_, a)| a.gang.as_deref() == Some(id))
        {
            for _ in 0..a.any.min(100_000) {
                units.push(gang::Unit {
                    key: *k,
                    cap: a.capability.clone(),
                });
            }
        }
        if units.is_empty() {
            return None;
        }
        let need = units
            .iter()
            .fold(Resource::zero(), |acc, u| acc.plus(&u.cap));
        let own_reserved = g.reserved_need.clone();
        let calc = self.conf.calculator;
        // Placing now needs room under every maximum on the gang's path (its own hold
        // aside); holding nodes for it needs only that it could ever fit there, since the
        // hold then keeps the queue's other work from growing into the room it needs.
        let path: Vec<usize> = self.tree.path_up(leaf).collect();
        let fits_now = path.iter().all(|q| {
            let queue = &self.tree.queues[*q];
            within(
                calc,
                &queue
                    .used
                    .plus(&queue.reserved)
                    .minus(&own_reserved)
                    .plus(&need),
                &queue.maximum,
            )
        });
        let blocked = path.iter().copied().find(|q| {
            let queue = &self.tree.queues[*q];
            !within(
                calc,
                &queue.reserved.minus(&own_reserved).plus(&need),
                &queue.maximum,
            )
        });
        let holder: gang::Holder = (*app_id, id.to_string());
        if let Some(q) = blocked {
            let diag = format!(
                "gang of {} containers needs {need}, more than queue {} may ever use (maximum {})",
                units.len(),
                self.tree.queues[q].spec.path,
                self.tree.queues[q].maximum
            );
            if let Some(g) = self.apps.get_mut(app_id).and_then(|a| a.gangs.get_mut(id)) {
                g.diagnostics = diag;
                g.size = units.len() as u32;
            }
            return None;
        }
        let nodes = &self.nodes;
        let free = |s: usize| {
            nodes
                .get(s)
                .filter(|n| n.schedulable)
                .map(|n| n.free.clone())
        };
        let mine_or_free = |s: usize| nodes.reserved_by(s).is_none_or(|h| *h == holder);
        let attempt = match gang::plan(nodes, &units, &params, &free, &mine_or_free) {
            gang::Plan::Fits(v) if !fits_now => gang::Plan::Short {
                placed: v.len(),
                nodes: vec![],
            },
            other => other,
        };
        match attempt {
            gang::Plan::Fits(assign) => {
                self.unreserve(app_id, id);
                let mut out = Vec::with_capacity(assign.len());
                for (key, slot, _) in assign {
                    if let Some(p) = self.commit(app_id, &key, slot) {
                        out.push(p);
                    }
                }
                self.stats.gangs_placed += 1;
                if let Some(g) = self.apps.get_mut(app_id).and_then(|a| a.gangs.get_mut(id)) {
                    g.phase = gang::GangPhase::Allocated;
                    g.size = out.len() as u32;
                    g.members.clear();
                    g.failed.clear();
                    g.diagnostics.clear();
                    g.changed = true;
                }
                Some(out)
            }
            gang::Plan::Short { placed, .. } => {
                let has_hold = self
                    .apps
                    .get(app_id)
                    .and_then(|a| a.gangs.get(id))
                    .is_some_and(|g| !g.reserved.is_empty());
                let hold_intact = has_hold
                    && self
                        .apps
                        .get(app_id)
                        .and_then(|a| a.gangs.get(id))
                        .is_some_and(|g| {
                            g.reserved.iter().all(|n| {
                                self.nodes
                                    .slot(n)
                                    .is_some_and(|s| self.nodes.reserved_by(s) == Some(&holder))
                            })
                        });
                if !hold_intact {
                    self.unreserve(app_id, id);
                    let nodes = &self.nodes;
                    let total = |s: usize| {
                        nodes
                            .get(s)
                            .filter(|n| n.schedulable)
                            .map(|n| n.total.clone())
                    };
                    let not_others = |s: usize| nodes.reserved_by(s).is_none();
                    if let gang::Plan::Fits(assign) =
                        gang::plan(nodes, &units, &params, &total, &not_others)
                    {
                        let slots: BTreeSet<usize> = assign.iter().map(|(_, s, _)| *s).collect();
                        let mut names = Vec::new();
                        for s in &slots {
                            self.nodes.reserve(*s, Some(holder.clone()));
                            if let Some(n) = self.nodes.get(*s) {
                                names.push(n.id.clone());
                            }
                        }
                        for q in self.tree.path_up(leaf).collect::<Vec<_>>() {
                            self.tree.queues[q].reserved.add_assign(&need);
                        }
                        if let Some(g) = self.apps.get_mut(app_id).and_then(|a| a.gangs.get_mut(id))
                        {
                            g.reserved = names;
                            g.reserved_need = need.clone();
                        }
                    }
                }
                if let Some(g) = self.apps.get_mut(app_id).and_then(|a| a.gangs.get_mut(id)) {
                    g.phase = if g.reserved.is_empty() {
                        gang::GangPhase::Pending
                    } else {
                        gang::GangPhase::Reserved
                    };
                    g.size = units.len() as u32;
                    g.diagnostics = gang::describe(&units, &params, placed, &g.reserved);
                    if !fits_now {
                        g.diagnostics
                            .push_str("; its queue must first drain below its maximum");
                    }
                }
                None
            }
        }
    }

    // ------------------------------------------------------------------ figures

    /// Outstanding containers and resources over all asks (the cluster's pending figures).
    pub fn pending(&self) -> (u64, Resource) {
        let mut n = 0u64;
        let mut r = Resource::zero();
        for a in self.apps.values() {
            for ask in a.asks.values() {
                n += u64::from(ask.any);
                r.add_assign(&ask.capability.times(i64::from(ask.any)));
            }
        }
        (n, r)
    }

    /// Pending resources per queue (leaves and, summed, parents).
    pub fn pending_by_queue(&self) -> Vec<Resource> {
        let mut out = vec![Resource::zero(); self.tree.queues.len()];
        for a in self.apps.values() {
            let mut p = Resource::zero();
            for ask in a.asks.values() {
                p.add_assign(&ask.capability.times(i64::from(ask.any)));
            }
            if p.is_zero() {
                continue;
            }
            for q in self.tree.path_up(a.queue) {
                out[q].add_assign(&p);
            }
        }
        out
    }

    /// The scheduler's own invariants: no node over-allocated, no negative usage, every
    /// queue's usage the sum of its children's (or its applications'), within its maximum.
    pub fn check(&self) -> Result<(), String> {
        for n in self.nodes.iter() {
            if !n.used.fits_in(&n.total) || n.used.any_negative() {
                return Err(format!(
                    "node {} used {} exceeds total {}",
                    n.id, n.used, n.total
                ));
            }
        }
        let mut shapes: BTreeMap<Resource, u64> = BTreeMap::new();
        for a in self.apps.values() {
            for ask in a.asks.values().filter(|x| x.any > 0 && x.gang.is_none()) {
                *shapes.entry(ask.capability.clone()).or_insert(0) += u64::from(ask.any);
            }
        }
        if shapes != self.shapes {
            return Err(format!(
                "wanted shapes {:?} differ from the asks {:?}",
                self.shapes, shapes
            ));
        }
        let mut sums = vec![Resource::zero(); self.tree.queues.len()];
        for (id, a) in &self.apps {
            if a.used.any_negative() {
                return Err(format!("app {id} has negative usage {}", a.used));
            }
            sums[a.queue].add_assign(&a.used);
        }
        for i in (0..self.tree.queues.len()).rev() {
            let q = &self.tree.queues[i];
            if !q.is_leaf() {
                let s = q.children.iter().fold(Resource::zero(), |acc, c| {
                    acc.plus(&self.tree.queues[*c].used)
                });
                sums[i] = s;
            }
            if q.used != sums[i] {
                return Err(format!(
                    "queue {} accounts {} but its contents sum to {}",
                    q.spec.path, q.used, sums[i]
                ));
            }
        }
        Ok(())
    }
}

fn max_each(a: &Resource, b: &Resource) -> Resource {
    let mut out = a.clone();
    for (k, v) in b.entries() {
        if v > out.get(k) {
            out.set(k, v);
        }
    }
    out
}
