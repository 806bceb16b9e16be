//! Outstanding asks per application and the demand and usage bookkeeping they drive: ask table, application order keys, pending counts by shape, and charging or releasing resources on nodes, applications, users and queues.

use super::*;

impl Scheduler {
    /// Replaces the desired state for one key; nothing wanted anywhere removes it.
    pub fn set_ask(&mut self, app: &ApplicationId, key: AskKey, ask: Ask) {
        let Some(a) = self.apps.get_mut(app) else {
            return;
        };
        // A gang whose asks change is worth trying again.
        for gid in [
            ask.gang.as_ref(),
            a.asks.get(&key).and_then(|o| o.gang.as_ref()),
        ]
        .into_iter()
        .flatten()
        {
            if let Some(g) = a.gangs.get_mut(gid) {
                g.missed_at = None;
            }
        }
        let old = if ask.any == 0 && !ask.has_hosts() {
            a.asks.remove(&key)
        } else {
            let (cap, n, solo, is_am) = (
                ask.capability.clone(),
                ask.any,
                ask.gang.is_none(),
                ask.is_am,
            );
            let old = a.asks.insert(key, ask);
            if solo {
                self.count_shape(&cap, n, true, is_am);
            }
            old
        };
        if let Some(o) = old.filter(|o| o.gang.is_none()) {
            self.count_shape(&o.capability, o.any, false, o.is_am);
        }
        self.refresh_order(app);
        // Asking anew may make it servable: the walk must not resume past it.
        if let Some((k, leaf)) = self.apps.get(app).and_then(|a| Some((a.order?, a.queue))) {
            self.resumes.reopen(leaf, &(k.0, k.1, *app));
        }
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
            self.count_shape(&ask.capability, ask.any, false, ask.is_am);
        }
        self.release_reservations(app);
        self.refresh_order(app);
    }

    /// Re-files an application in its leaf's serving order (or out of it).
    pub(super) fn refresh_order(&mut self, id: &ApplicationId) {
        let Some(mut app) = self.apps.remove(id) else {
            return;
        };
        let key = if app.active && !app.asks.is_empty() {
            Some(match self.tree.queues[app.queue].spec.ordering {
                OrderingPolicy::Fifo => (-i64::from(app.priority), app.submit_seq),
                OrderingPolicy::Las => (i64::from(app.service.level), app.submit_seq),
                OrderingPolicy::Fairshare => self.fairshare_key(id, &mut app),
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

    pub(super) fn set_order(
        &mut self,
        id: &ApplicationId,
        app: &mut SchedApp,
        key: Option<(i64, u64)>,
    ) {
        gpu_cpus::recount(&mut self.gpu_asking, app);
        if app.order == key {
            return;
        }
        let leaf = app.queue;
        self.tree.queues[leaf].order_moves += 1;
        if key.is_none() {
            app.wait = FairWait::default();
        }
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
            let entry = (k.0, k.1, *id);
            self.resumes.reopen(leaf, &entry);
            self.tree.queues[leaf].schedulable.insert(entry);
        }
        app.order = key;
    }

    pub(super) fn bump_demand(&mut self, leaf: QueueIdx, user: &str, up: bool) {
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
                // One user fewer shares the leaf: the others' limits rise.
                self.resumes.limit_moved(leaf);
            }
        }
    }

    /// Accounts a container (placed by a pass, or recovered / re-reported by an NM).
    pub fn charge(&mut self, app: &ApplicationId, node: &NodeId, r: &Resource) {
        let part = self.charge_node(app, self.nodes.slot(node), r, true);
        self.charge_app(app, r, true, &part);
    }

    /// [`Self::charge`] on the node in `slot` (a pass's placement knows it).
    pub(super) fn charge_slot(&mut self, app: &ApplicationId, slot: usize, r: &Resource) {
        let part = self.charge_node(app, Some(slot), r, true);
        self.charge_app(app, r, true, &part);
    }

    /// Charges or releases `r` on the node in `slot` for `app`; returns the node's partition.
    fn charge_node(
        &mut self,
        app: &ApplicationId,
        slot: Option<usize>,
        r: &Resource,
        up: bool,
    ) -> String {
        let Some(slot) = slot else {
            return String::new();
        };
        if up {
            self.nodes.charge(slot, r);
        } else {
            self.nodes.release(slot, r);
        }
        self.nodes.charge_app(slot, app, r, up);
        self.nodes
            .get(slot)
            .map(|n| n.partition.clone())
            .unwrap_or_default()
    }

    /// Gives a finished or released container's resources back.
    pub fn release(&mut self, app: &ApplicationId, node: &NodeId, r: &Resource) {
        let part = self.charge_node(app, self.nodes.slot(node), r, false);
        self.charge_app(app, r, false, &part);
    }

    /// A live container changed size (YARN's container update): its node, application,
    /// user and queues are charged the difference; no container comes or goes.
    pub fn recharge(&mut self, app: &ApplicationId, node: &NodeId, from: &Resource, to: &Resource) {
        let slot = self.nodes.slot(node);
        self.charge_node(app, slot, from, false);
        let part = self.charge_node(app, slot, to, true);
        self.accrue(app);
        if let Some((leaf, user)) = self.apps.get(app).map(|a| (a.queue, a.user.clone())) {
            self.fs_accrue(leaf, &user, true);
        }
        if let Some(leaf) = self.apps.get(app).map(|a| a.queue) {
            self.tree.charge_partition(leaf, &part, from, false);
            self.tree.charge_partition(leaf, &part, to, true);
        }
        let Some(a) = self.apps.get_mut(app) else {
            return;
        };
        a.used.sub_assign(from);
        a.used.add_assign(to);
        let (leaf, user) = (a.queue, a.user.clone());
        let mut q = Some(leaf);
        while let Some(i) = q {
            let queue = &mut self.tree.queues[i];
            queue.used.sub_assign(from);
            queue.used.add_assign(to);
            q = queue.parent;
        }
        let u = self.tree.queues[leaf].users.entry(user).or_default();
        u.used.sub_assign(from);
        u.used.add_assign(to);
        match self.tree.queues[leaf].spec.ordering {
            OrderingPolicy::Fair | OrderingPolicy::Fairshare => self.refresh_order(app),
            OrderingPolicy::Las => self.las_track(app),
            OrderingPolicy::Fifo => {}
        }
    }

    pub(super) fn charge_app(
        &mut self,
        id: &ApplicationId,
        r: &Resource,
        up: bool,
        partition: &str,
    ) {
        self.accrue(id);
        let Some(app) = self.apps.get_mut(id) else {
            return;
        };
        let leaf = app.queue;
        self.tree.charge_partition(leaf, partition, r, up);
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
        let fairshare = self.tree.queues[leaf].spec.ordering == OrderingPolicy::Fairshare;
        // The user's ledger is brought up to now before the user's usage changes.
        let users = &mut self.tree.queues[leaf].users;
        let u = match users.get_mut(&app.user) {
            Some(u) => u,
            None => users.entry(app.user.clone()).or_default(),
        };
        let rate = self.conf.fairshare.billing.per_second(&u.used);
        self.fs.accrue(
            leaf,
            &app.user,
            up,
            rate,
            self.now,
            self.conf.fairshare.half_life_ms,
        );
        if !up {
            self.fs.mark_changed(leaf, &app.user);
        }
        if up && fairshare {
            // It got a container: its wait starts over.
            app.wait = FairWait::default();
        }
        if up {
            // A user limit grows with its leaf's usage beyond the guarantee.
            self.resumes.limit_moved(leaf);
            u.used.add_assign(r);
        } else {
            u.used.sub_assign(r);
        }
        match self.tree.queues[leaf].spec.ordering {
            OrderingPolicy::Fair | OrderingPolicy::Fairshare => self.refresh_order(id),
            OrderingPolicy::Las => self.las_track(id),
            OrderingPolicy::Fifo => {}
        }
    }
}
