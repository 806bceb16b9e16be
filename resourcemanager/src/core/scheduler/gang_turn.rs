//! A waiting gang's turn in a pass: placed whole on what is free now (its own hold
//! included), refused for good while its queues could never hold it, or left waiting with
//! the nodes it will use held for it as they drain. The plans themselves are
//! [`super::gang`]'s.

use spindle_common::{ApplicationId, NodeId, Resource};

use super::gang::{describe, per_node, plan, GangParams, GangPhase, Holder, Plan, Unit};
use super::queue_tree::{within, QueueIdx};
use super::{Placement, Scheduler};

/// What a gang's turn asks of its queues: whether it fits under every maximum on its path
/// now, and the first queue it could never fit in.
struct QueueRoom {
    fits_now: bool,
    blocked: Option<QueueIdx>,
}

impl Scheduler {
    /// Tries to place a waiting gang whole on what is free now (its own reservation
    /// included); if it does not fit, reserves the nodes it will use as they drain.
    pub(super) fn try_gang(
        &mut self,
        app_id: &ApplicationId,
        id: &str,
        leaf: QueueIdx,
    ) -> Option<Vec<Placement>> {
        let g = self.apps.get(app_id)?.gangs.get(id)?;
        if !g.phase.is_waiting() {
            return None;
        }
        let epoch = self.nodes.room_epoch();
        if g.missed_at == Some(epoch) {
            // Nothing that could make room happened since it last did not fit.
            return None;
        }
        let tried_before = g.missed_at.is_some();
        if tried_before && self.gang_short_of_room(app_id, id, leaf) {
            self.gang_missed_at(app_id, id, epoch);
            return None;
        }
        let (units, params) = self.gang_units(app_id, id, leaf)?;
        let need = units
            .iter()
            .fold(Resource::zero(), |acc, u| acc.plus(&u.cap));
        let room_in_queues = self.gang_queue_room(app_id, id, leaf, &params.partition, &need);
        if let Some(q) = room_in_queues.blocked {
            self.gang_blocked(app_id, id, q, units.len(), &need, &params.partition, epoch);
            return None;
        }
        let holder: Holder = (*app_id, id.to_string());
        let nodes = &self.nodes;
        // Planning costs a walk over the nodes; when the whole cluster's free room is short
        // of a gang already planned once, no plan can fit (its reason stays the last plan's).
        let room = !tried_before || need.fits_in(&nodes.cluster_free());
        if room {
            if self.gang_plans_left == 0 {
                // This pass's budget of plans is spent: a later pass tries it.
                return None;
            }
            self.gang_plans_left -= 1;
            self.stats.gang_plans += 1;
        }
        let nodes = &self.nodes;
        let free = |s: usize| nodes.free_room(s);
        let mine_or_free = |s: usize| nodes.reserved_by(s).is_none_or(|h| *h == holder);
        let attempt = match room.then(|| plan(app_id, nodes, &units, &params, &free, &mine_or_free))
        {
            None => Plan::Short {
                placed: 0,
                nodes: vec![],
            },
            Some(Plan::Fits(v)) if !room_in_queues.fits_now => Plan::Short {
                placed: v.len(),
                nodes: vec![],
            },
            Some(other) => other,
        };
        match attempt {
            Plan::Fits(assign) => Some(self.gang_placed(app_id, id, assign, params)),
            Plan::Short {
                placed,
                nodes: best_nodes,
            } => {
                let missed = Missed {
                    units: &units,
                    params: &params,
                    need: &need,
                    planned: room.then_some(placed),
                    best_nodes: &best_nodes,
                    fits_now: room_in_queues.fits_now,
                };
                self.gang_waits(app_id, id, leaf, missed);
                None
            }
        }
    }

    /// The cheap test for a gang tried before: the cluster's free room is short of it and
    /// its hold needs no change, so no plan can do anything.
    fn gang_short_of_room(&self, app_id: &ApplicationId, id: &str, leaf: QueueIdx) -> bool {
        let Some(app) = self.apps.get(app_id) else {
            return false;
        };
        let Some(g) = app.gangs.get(id) else {
            return false;
        };
        // An elastic gang is placed at the size its policy chose (or at least its smallest),
        // not its maximum.
        let count = |a: &super::Ask| match (&g.params.elastic, g.admitted) {
            (Some(_), Some(n)) => n.min(a.any),
            (Some(spec), None) => spec.least().unwrap_or(1).min(a.any),
            _ => a.any,
        };
        let need = app
            .asks
            .values()
            .filter(|a| a.gang.as_deref() == Some(id))
            .fold(Resource::zero(), |acc, a| {
                acc.plus(&a.capability.times(i64::from(count(a))))
            });
        !need.fits_in(&self.nodes.cluster_free())
            && (self.gang_hold_intact(app_id, id) || !self.may_hold(app_id, id, leaf))
    }

    /// Whether the gang holds nodes and every one of them is still held for it.
    fn gang_hold_intact(&self, app_id: &ApplicationId, id: &str) -> bool {
        let Some(g) = self.apps.get(app_id).and_then(|a| a.gangs.get(id)) else {
            return false;
        };
        let mine = |s: usize| {
            self.nodes
                .reserved_by(s)
                .is_some_and(|h| h.0 == *app_id && h.1 == id)
        };
        !g.reserved.is_empty()
            && g.reserved
                .iter()
                .all(|n| self.nodes.slot(n).is_some_and(mine))
    }

    fn gang_missed_at(&mut self, app_id: &ApplicationId, id: &str, epoch: u64) {
        if let Some(g) = self.apps.get_mut(app_id).and_then(|a| a.gangs.get_mut(id)) {
            g.missed_at = Some(epoch);
        }
    }

    /// The gang's units, one per member at the size it is placed at (an elastic gang's
    /// policy size), and its parameters; none when it asks for nothing now.
    fn gang_units(
        &self,
        app_id: &ApplicationId,
        id: &str,
        leaf: QueueIdx,
    ) -> Option<(Vec<Unit>, GangParams)> {
        let app = self.apps.get(app_id)?;
        let g = app.gangs.get(id)?;
        let mut units = Vec::new();
        for (k, a) in app
            .asks
            .iter()
            .filter(|(_, a)| a.gang.as_deref() == Some(id))
        {
            for _ in 0..a.any.min(100_000) {
                units.push(Unit {
                    key: *k,
                    cap: a.capability.clone(),
                });
            }
        }
        if units.is_empty() {
            return None;
        }
        if let Some(spec) = &g.params.elastic {
            let size = self.elastic_size(spec, &units[0].cap, leaf, g.admitted);
            if size == 0 {
                return None;
            }
            units.truncate(size as usize);
        }
        Some((units, g.params.clone()))
    }

    /// What this gang holds, and what gangs behind it in the leaf hold (they give way).
    pub(super) fn gang_own_hold(
        &self,
        app_id: &ApplicationId,
        id: &str,
        leaf: QueueIdx,
    ) -> Resource {
        self.apps
            .get(app_id)
            .and_then(|a| a.gangs.get(id))
            .map(|g| g.reserved_need.clone())
            .unwrap_or_default()
            .plus(&self.held_behind(app_id, id, leaf))
    }

    /// Placing now needs room under every maximum on the gang's path (its own hold aside);
    /// holding nodes for it needs only that it could ever fit there, since the hold then
    /// keeps the queue's other work from growing into the room it needs. Holds are kept in
    /// the default partition only.
    fn gang_queue_room(
        &self,
        app_id: &ApplicationId,
        id: &str,
        leaf: QueueIdx,
        part: &str,
        need: &Resource,
    ) -> QueueRoom {
        let own_reserved = self.gang_own_hold(app_id, id, leaf);
        let fits_now = self
            .queue_blocking(leaf, need, part, Some(&own_reserved))
            .is_none();
        let calc = self.conf.calculator;
        let path: Vec<QueueIdx> = self.tree.path_up(leaf).collect();
        let blocked = path.iter().copied().find(|q| {
            let queue = &self.tree.queues[*q];
            let reserved = if part.is_empty() {
                queue.reserved.minus(&own_reserved)
            } else {
                Resource::zero()
            };
            !within(calc, &reserved.plus(need), &queue.limits_in(part).1)
        });
        QueueRoom { fits_now, blocked }
    }

    /// A gang queue `q` could never hold beside the gangs ahead of it: it holds nothing
    /// meanwhile (a hold a draining or lost node dropped must not linger in its books
    /// either) and says why.
    #[allow(clippy::too_many_arguments)]
    fn gang_blocked(
        &mut self,
        app_id: &ApplicationId,
        id: &str,
        q: QueueIdx,
        members: usize,
        need: &Resource,
        part: &str,
        epoch: u64,
    ) {
        let queue = &self.tree.queues[q];
        let diag = format!(
            "gang of {members} containers needs {need}, more than queue {} may ever use{} (maximum {})",
            queue.spec.path,
            if part.is_empty() {
                String::new()
            } else {
                format!(" in partition {part}")
            },
            queue.limits_in(part).1
        );
        self.unreserve(app_id, id);
        if let Some(g) = self.apps.get_mut(app_id).and_then(|a| a.gangs.get_mut(id)) {
            if g.phase == GangPhase::Reserved {
                g.phase = GangPhase::Pending;
            }
            g.short_of_room = None;
            g.diagnostics = diag;
            g.size = members as u32;
            g.missed_at = Some(epoch);
        }
    }

    /// Commits a plan that fits: every member placed, the gang allocated (an elastic one
    /// starts its resizing bookkeeping; the rest of its maximum comes as offers).
    fn gang_placed(
        &mut self,
        app_id: &ApplicationId,
        id: &str,
        assign: Vec<(super::AskKey, usize, Resource)>,
        params: GangParams,
    ) -> Vec<Placement> {
        self.unreserve(app_id, id);
        let mut out = Vec::with_capacity(assign.len());
        for (key, slot, _) in assign {
            if let Some(p) = self.commit(app_id, &key, slot) {
                out.push(p);
            }
        }
        self.stats.gangs_placed += 1;
        if let (Some(spec), Some(first)) = (params.elastic, out.first()) {
            // The rest of the maximum is not waiting: growth comes as offers.
            let (cap, key) = (first.resource.clone(), first.key);
            if let Some(mut ask) = self.ask(app_id, &key).cloned() {
                ask.any = 0;
                self.set_ask(app_id, key, ask);
            }
            let now = self.now;
            if let Some(g) = self.apps.get_mut(app_id).and_then(|a| a.gangs.get_mut(id)) {
                g.elastic = Some(super::elastic_policy::Elastic::new(spec, cap, key, now));
            }
        }
        if let Some(g) = self.apps.get_mut(app_id).and_then(|a| a.gangs.get_mut(id)) {
            if self.stats.gang_waits_ms.len() < super::GANG_WAITS_KEPT {
                self.stats
                    .gang_waits_ms
                    .push(self.now.saturating_sub(g.since));
            }
            g.phase = GangPhase::Allocated;
            g.size = out.len() as u32;
            g.members.clear();
            g.failed.clear();
            g.diagnostics.clear();
            g.short_of_room = None;
            g.changed = true;
        }
        out
    }

    /// A gang that did not fit waits: the leaf's first gangs in line hold the nodes a plan
    /// on whole nodes picks (the ones behind them wait without fencing any off, so smaller
    /// work keeps flowing around them), and its diagnostics say how far it got.
    fn gang_waits(&mut self, app_id: &ApplicationId, id: &str, leaf: QueueIdx, m: Missed<'_>) {
        let holder: Holder = (*app_id, id.to_string());
        let hold_intact = self.gang_hold_intact(app_id, id);
        let may_hold = self.may_hold(app_id, id, leaf);
        if !hold_intact {
            self.unreserve(app_id, id);
        }
        if !hold_intact && may_hold {
            self.give_way(app_id, id, leaf);
            self.gang_hold(app_id, id, leaf, &holder, &m);
        }
        if let Some(g) = self.apps.get_mut(app_id).and_then(|a| a.gangs.get_mut(id)) {
            g.phase = if g.reserved.is_empty() {
                GangPhase::Pending
            } else {
                GangPhase::Reserved
            };
            g.size = m.units.len() as u32;
            if let Some(placed) = m.planned {
                g.last_fit = placed;
            }
            g.diagnostics = describe(m.units, m.params, g.last_fit, &g.reserved);
            if let Some(d) = m.params.domain.as_ref().filter(|d| d.required) {
                g.diagnostics.push_str(&super::topology::shortfall(
                    &self.nodes,
                    d,
                    m.best_nodes,
                    g.last_fit,
                    m.units.len(),
                ));
            }
            // Which queue is full and who holds it is worked out when the reason is read.
            g.short_of_room = (!m.fits_now).then(|| m.need.clone());
        }
        let epoch = self.nodes.room_epoch();
        self.gang_missed_at(app_id, id, epoch);
    }

    /// Holds for the gang the nodes a plan on whole nodes (not held by others) picks.
    fn gang_hold(
        &mut self,
        app_id: &ApplicationId,
        id: &str,
        leaf: QueueIdx,
        holder: &Holder,
        m: &Missed<'_>,
    ) {
        let nodes = &self.nodes;
        let total = |s: usize| nodes.whole_room(s);
        let not_others = |s: usize| nodes.reserved_by(s).is_none();
        let Plan::Fits(assign) = plan(app_id, nodes, m.units, m.params, &total, &not_others) else {
            return;
        };
        let mut names: Vec<NodeId> = Vec::new();
        for (s, need) in per_node(&assign) {
            self.nodes.hold(s, holder.clone(), need);
            if let Some(n) = self.nodes.get(s) {
                names.push(n.id.clone());
            }
        }
        for q in self.tree.path_up(leaf).collect::<Vec<_>>() {
            self.tree.queues[q].reserved.add_assign(m.need);
        }
        if let Some(g) = self.apps.get_mut(app_id).and_then(|a| a.gangs.get_mut(id)) {
            g.reserved = names;
            g.reserved_need = m.need.clone();
        }
    }
}

/// What a gang's turn found when it did not fit.
struct Missed<'a> {
    units: &'a [Unit],
    params: &'a GangParams,
    need: &'a Resource,
    /// How many members the best plan placed, when a plan was made.
    planned: Option<usize>,
    best_nodes: &'a [usize],
    fits_now: bool,
}
