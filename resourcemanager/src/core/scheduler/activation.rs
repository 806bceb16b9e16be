//! Applications in the scheduler: admission into a leaf, activation (`max-parallel-apps`, the AM resource limit, YARN's waiting diagnostics), moves, priorities and reconfiguration, and the user and queue limits the pass applies.
//! The AM limit is YARN's formula over the queue's current limit; waiting applications are
//! retried before every pass (`activate_waiting`).
//!
//! Must not: place containers (the pass does).

use super::*;
use spindle_common::QueuePath;
use std::borrow::Cow;

impl Scheduler {
    /// Registers an application in `leaf` (an index from [`QueueTree::leaf`]). Returns the
    /// applications activated as a result (possibly including this one).
    pub fn add_app(
        &mut self,
        id: ApplicationId,
        leaf: QueueIdx,
        user: &str,
        priority: i32,
        submit_seq: u64,
        am_resource: Resource,
    ) -> Vec<ApplicationId> {
        self.apps.insert(
            id,
            Box::new(SchedApp {
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
                service: Service {
                    at: self.now,
                    last_ran: self.now,
                    ..Service::default()
                },
                order: None,
                tags: BTreeSet::new(),
                wait: FairWait::default(),
                gpu_parts: smallvec::SmallVec::new(),
            }),
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
        self.nodes.room_changed();
        let Some(mut app) = self.apps.remove(id) else {
            return vec![];
        };
        if let Some(t) = self.las_cross_at.remove(id) {
            self.las_cross.remove(&(t, *id));
        }
        app.asks.clear();
        self.set_order(id, &mut app, None);
        let leaf = app.queue;
        self.detach(id, &app);
        self.try_activate(leaf)
    }

    /// Takes an app's membership and AM charge out of its leaf (usage must be zero or moved).
    pub(super) fn detach(&mut self, id: &ApplicationId, app: &SchedApp) {
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

    /// The AM resource limit of a leaf, as YARN's capacity scheduler computes it
    /// (`LeafQueue.getAMResourceLimitPerPartition`): `maximum-am-resource-percent` of the
    /// larger of the queue's guarantee and its [current limit](Self::current_limit) (the
    /// guarantee unless it fits within the current limit), normalized up to the minimum
    /// allocation.
    pub fn am_limit(&self, leaf: QueueIdx) -> Resource {
        let q = &self.tree.queues[leaf];
        let calc = self.conf.calculator;
        let current = self.current_limit(leaf);
        let usable = if within(calc, &q.guaranteed, &current) {
            current
        } else {
            q.guaranteed.clone()
        };
        multiply_and_normalize_up(&usable, q.spec.max_am_resource_percent, &self.min_alloc)
    }

    /// YARN's current limit of a queue (`AbstractCSQueue.getCurrentLimitResource` with the
    /// limits a parent hands its children): what the queue may use now in the default
    /// partition. The root's is the partition's total; a child's is its parent's limit less
    /// what the parent uses, plus what the child itself uses, rounded down to the minimum
    /// allocation; each is capped by the queue's maximum capacity. Component-wise (YARN
    /// compares by the calculator's dominant share; per type is never larger).
    pub fn current_limit(&self, q: QueueIdx) -> Resource {
        let chain: Vec<QueueIdx> = self.tree.path_up(q).collect();
        let mut limit = self.nodes.partition_total(placement::DEFAULT_PARTITION);
        let mut parent_used: Option<Resource> = None;
        for &i in chain.iter().rev() {
            let queue = &self.tree.queues[i];
            let used = queue.default_used();
            if let Some(pu) = parent_used.take() {
                limit = round_down(&limit.minus(&pu).plus(&used), &self.min_alloc);
            }
            limit = min_each(&limit, &queue.maximum);
            parent_used = Some(used);
        }
        limit
    }

    /// Retries activation in every leaf with waiting applications: the AM limit grows with
    /// the cluster and with what the queue's ancestors leave free, as in YARN, which
    /// activates applications again whenever resources are released or nodes join.
    pub fn activate_waiting(&mut self) -> Vec<ApplicationId> {
        let leaves: Vec<QueueIdx> = self
            .tree
            .iter()
            .filter(|(_, q)| !q.waiting.is_empty())
            .map(|(i, _)| i)
            .collect();
        leaves
            .into_iter()
            .flat_map(|l| self.try_activate(l))
            .collect()
    }

    pub(super) fn max_parallel(&self, leaf: QueueIdx) -> Option<u32> {
        self.tree.queues[leaf]
            .spec
            .max_parallel_apps
            .or(self.conf.max_parallel_apps)
    }

    pub(super) fn user_max_parallel(&self, user: &str) -> Option<u32> {
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
    pub(super) fn try_activate(&mut self, leaf: QueueIdx) -> Vec<ApplicationId> {
        let mut out = Vec::new();
        let mut after: Option<(u64, ApplicationId)> = None;
        loop {
            let next = match after {
                None => self.tree.queues[leaf].waiting.iter().next(),
                Some(k) => self.tree.queues[leaf]
                    .waiting
                    .range((std::ops::Bound::Excluded(k), std::ops::Bound::Unbounded))
                    .next(),
            };
            let Some(&(seq, id)) = next else {
                break;
            };
            after = Some((seq, id));
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
            self.activate_now(&id);
            out.push(id);
        }
        out
    }

    /// Activates a waiting application at once, whatever the limits: a recovered
    /// application whose AM already runs (after an RM restart) holds its AM container
    /// already, so it is active from the start, charged to its queue's and user's AM usage.
    pub fn activate_now(&mut self, id: &ApplicationId) {
        let Some(app) = self.apps.get(id).filter(|a| !a.active) else {
            return;
        };
        let (leaf, seq, am, user) = (
            app.queue,
            app.submit_seq,
            app.am_resource.clone(),
            app.user.clone(),
        );
        let q = &mut self.tree.queues[leaf];
        q.waiting.remove(&(seq, *id));
        q.active_apps += 1;
        q.am_used.add_assign(&am);
        let u = q.users.entry(user).or_default();
        u.pending_apps = u.pending_apps.saturating_sub(1);
        u.active_apps += 1;
        u.am_used.add_assign(&am);
        if let Some(a) = self.apps.get_mut(id) {
            a.active = true;
        }
        self.refresh_order(id);
    }

    /// Moves an application to another leaf with its usage (YARN's move). Returns the
    /// applications activated as a result (the move may free room in the old leaf): their
    /// attempts must be started.
    pub fn move_app(&mut self, id: &ApplicationId, leaf: QueueIdx) -> Vec<ApplicationId> {
        self.nodes.room_changed();
        let Some(mut app) = self.apps.remove(id) else {
            return vec![];
        };
        let old = app.queue;
        self.set_order(id, &mut app, None);
        // Both leaves' ledgers are brought up to now before the user's usage moves.
        self.fs_accrue(old, &app.user, false);
        self.fs_accrue(leaf, &app.user, !app.used.is_zero());
        self.fs_changed(old, &app.user);
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
        self.recount_partitions();
        let mut activated = self.try_activate(old);
        activated.extend(self.try_activate(leaf));
        activated
    }

    /// Recounts every queue's use of the labelled partitions from what each application
    /// uses on each node (after a move or a reconfiguration changed whose queue is whose).
    pub(super) fn recount_partitions(&mut self) {
        for q in &mut self.tree.queues {
            for p in q.parts.values_mut() {
                p.used = Resource::zero();
            }
        }
        let mut charges = Vec::new();
        for n in self.nodes.iter().filter(|n| !n.partition.is_empty()) {
            for (app, r) in &n.apps_used {
                if let Some(a) = self.apps.get(app) {
                    charges.push((a.queue, n.partition.clone(), r.clone()));
                }
            }
        }
        for (leaf, part, r) in charges {
            self.tree.charge_partition(leaf, &part, &r, true);
        }
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
        app_leaves: &BTreeMap<ApplicationId, QueuePath>,
    ) -> Vec<ApplicationId> {
        let old_tree = std::mem::replace(&mut self.tree, QueueTree::build(&conf.root));
        self.conf = conf;
        self.demand = vec![0; self.tree.queues.len()];
        self.active_users.clear();
        self.remap_fairshare(&old_tree);
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
        self.recount_partitions();
        touched
            .into_iter()
            .flat_map(|l| self.try_activate(l))
            .collect()
    }

    /// YARN's user limit in a leaf for a user about to take `ask`: the larger of an equal
    /// share among active users and `minimum-user-limit-percent` of the queue's current
    /// capacity, capped by `user-limit-factor` x the guarantee (-1: the queue maximum), and
    /// never below one minimum allocation.
    pub fn user_limit(&self, leaf: QueueIdx, ask: &Resource) -> Resource {
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

    /// The user limit's decision on a plain ask of shape `cap` in the default partition of
    /// `leaf` by a user who uses `user_used` there: `None` when the user may take it (YARN
    /// lets a user below its limit go past it by one ask), else the limit it is at. The one
    /// check the pass and the reason an ask waits share.
    pub(super) fn user_limit_reached(
        &self,
        leaf: QueueIdx,
        user_used: &Resource,
        cap: &Resource,
    ) -> Option<Resource> {
        let limit = self.user_limit(leaf, cap);
        (!within(self.conf.calculator, user_used, &limit)).then_some(limit)
    }

    /// The first queue from `leaf` up whose maximum `ask` would exceed beside what waiting
    /// gangs hold there (less `own_hold`, a gang's own and its followers' holds), or None if
    /// it fits: the one test plain asks, gangs and the reasons they wait all make.
    pub(super) fn queue_blocking(
        &self,
        leaf: QueueIdx,
        ask: &Resource,
        part: &str,
        own_hold: Option<&Resource>,
    ) -> Option<QueueIdx> {
        let calc = self.conf.calculator;
        let none = Resource::zero();
        self.tree.path_up(leaf).find(|q| {
            let queue = &self.tree.queues[*q];
            let held = match (part.is_empty(), own_hold) {
                (false, _) => Cow::Borrowed(&none),
                (true, None) => self.held_ref(*q, &none),
                (true, Some(own)) => Cow::Owned(self.held(*q).minus(own).clamp_non_negative()),
            };
            let used = queue.used_ref_in(part);
            !sum_within(calc, &[&used, &held, ask], &queue.maximum_ref_in(part))
        })
    }

    /// What waiting gangs hold against queue `q`'s maximum. A gang's node reservation
    /// keeps the room it needs on its nodes; a queue whose maximum is below the cluster
    /// must also keep its other work from growing into that room under the maximum, so
    /// the gang's need counts there. A queue allowed the whole cluster needs no such
    /// hold: counting it would only keep small work off nodes the gang will never use
    /// (no backfill on a nearly full cluster).
    pub(super) fn held(&self, q: QueueIdx) -> Resource {
        self.held_ref(q, &Resource::zero()).into_owned()
    }

    /// [`Self::held`], borrowed (`none` when nothing is held).
    fn held_ref<'a>(&'a self, q: QueueIdx, none: &'a Resource) -> Cow<'a, Resource> {
        let queue = &self.tree.queues[q];
        if self.nodes.cluster.fits_in(&queue.maximum) {
            Cow::Borrowed(none)
        } else {
            Cow::Borrowed(&queue.reserved)
        }
    }
}

/// YARN's `Resources.multiplyAndNormalizeUp`: `r * by`, each type rounded up to a multiple
/// of its step (the minimum allocation; a type without a step is only rounded up to a whole
/// unit). Every type is computed; under the memory calculator only memory is compared.
fn multiply_and_normalize_up(r: &Resource, by: f64, step: &Resource) -> Resource {
    let mut out = Resource::zero();
    for (k, v) in r.entries() {
        let scaled = (v as f64 * by).ceil() as i64;
        let s = step.get(k);
        let up = if s > 0 {
            (scaled.saturating_add(s - 1) / s).saturating_mul(s)
        } else {
            scaled
        };
        out.set(k, up);
    }
    out
}

/// Each type of `r` rounded down to a multiple of its step, never below zero (YARN's
/// `Resources.roundDown`).
fn round_down(r: &Resource, step: &Resource) -> Resource {
    let mut out = Resource::zero();
    for (k, v) in r.entries() {
        let v = v.max(0);
        let s = step.get(k);
        out.set(k, if s > 0 { v / s * s } else { v });
    }
    out
}
