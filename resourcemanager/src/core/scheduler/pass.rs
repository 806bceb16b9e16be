//! The scheduling pass (`Scheduler::schedule`): pick the most under-served leaf, its next application and ask, a node for it (locality delay, GPU packing), and commit the placement.
//! A leaf visit (`LeafVisit`) serves one application's gangs, then its plain asks.
//!
//! Must not: change an ask or an application's admission except by committing a placement.

use super::resume::{OrderEntry, RunWhy};
use super::*;
use smallvec::SmallVec;

/// Whether two partition names are the same, without a call for the common case of two
/// default partitions (`str`'s `==` calls `memcmp` even for empty strings, and passes
/// compare partitions for every ask they look at).
#[inline]
pub(super) fn same_partition(a: &str, b: &str) -> bool {
    a.len() == b.len() && (a.is_empty() || a == b)
}

/// How many applications of a leaf's order a visit takes at a time.
const ORDER_BATCH: usize = 16;

/// An application's plain asks that might be placed now: key, shape, whether an AM's.
type Candidates = SmallVec<[(AskKey, Resource, bool); 4]>;

/// One visit of a leaf in a pass: what it has learned so far.
pub(super) struct LeafVisit<'a> {
    leaf: QueueIdx,
    part: &'a str,
    /// Without backfill the leaf's first waiting application blocks the rest.
    strict: bool,
    /// Shapes that exceed a maximum of this leaf or one of its parents, in this visit.
    over_max: Vec<Resource>,
    /// Shapes no node takes in this pass.
    failed_shapes: &'a mut Vec<Resource>,
    /// CPU-only shapes no node takes in this pass for the cores its free GPUs keep (see
    /// [`gpu_cpus`]): they stand for failed shapes for the rest of the pass only (no room
    /// epoch tells when the GPU asks stop waiting), and never for AM asks, which are exempt.
    kept_shapes: &'a mut Vec<Resource>,
    /// Whether every wanted shape was known not to fit when the pass began.
    full: bool,
    blocked_users: &'a mut BlockedUsers,
    /// Whether every application walked so far in this visit was passed over.
    passed_over: bool,
    /// Why they were, as far as resuming after them in a later pass goes.
    why: RunWhy,
    /// The application being visited (its place in the leaf's order).
    at: OrderEntry,
}

impl LeafVisit<'_> {
    /// Whether an ask of `cap` is not searched for in this pass because a CPU-only shape
    /// that fits in it was refused for the cores free GPUs keep (AM asks are exempt).
    fn kept_for_gpus(&self, cap: &Resource, is_am: bool) -> bool {
        !is_am
            && cap.get(spindle_common::resource::GPU) <= 0
            && self.kept_shapes.iter().any(|s| s.fits_in(cap))
    }
}

/// Users whose limit a pass found reached, per leaf (looked up without allocating).
pub(super) struct BlockedUsers(BTreeMap<QueueIdx, BTreeMap<String, OrderEntry>>);

impl BlockedUsers {
    pub(super) fn new() -> Self {
        Self(BTreeMap::new())
    }

    fn contains(&self, leaf: QueueIdx, user: &str) -> bool {
        self.0.get(&leaf).is_some_and(|u| u.contains_key(user))
    }

    /// `user` of `leaf` is at its limit, found at the application at `at` in its order.
    fn insert(&mut self, leaf: QueueIdx, user: &str, at: OrderEntry) {
        let users = self.0.entry(leaf).or_default();
        match users.get_mut(user) {
            Some(first) => *first = (*first).min(at),
            None => {
                users.insert(user.to_string(), at);
            }
        }
    }

    /// The users of `leaf` found at their limit at or before `cursor`.
    fn through(&self, leaf: QueueIdx, cursor: OrderEntry) -> impl Iterator<Item = &String> + Clone {
        self.0
            .get(&leaf)
            .into_iter()
            .flat_map(move |users| users.iter().filter(move |(_, at)| **at <= cursor))
            .map(|(u, _)| u)
    }
}

impl Scheduler {
    /// Places as many outstanding asks as fit now, and charges them.
    pub fn schedule(&mut self) -> Vec<Placement> {
        let mut out = Vec::new();
        if self.nodes.is_empty() {
            return out;
        }
        self.stats.passes += 1;
        // Gangs holding nodes go first, whatever their queue: the nodes they hold are theirs
        // alone, and the work ahead of them may wait for exactly those nodes (a strict
        // leaf's head under fair order) or end the pass before them (no other node fits
        // its shape).
        let holders: BTreeSet<(ApplicationId, String)> =
            self.nodes.reservations().values().cloned().collect();
        // Holders plan on their own nodes outside the budget; the others share it.
        self.gang_plans_left = u32::MAX;
        for (a, g) in holders {
            let Some(leaf) = self.apps.get(&a).map(|x| x.queue) else {
                continue;
            };
            self.stats.node_searches += 1;
            if let Some(p) = self.try_gang(&a, &g, leaf) {
                self.stats.placements += p.len() as u64;
                out.extend(p);
            }
        }
        self.gang_plans_left = self.conf.gang_max_plans_per_pass;
        // Each labelled partition serves its own asks first, by the queues' shares of it;
        // the default partition comes last, and may borrow what non-exclusive partitions
        // still have free.
        let mut partitions: Vec<String> = self.labels.keys().cloned().collect();
        partitions.push(String::new());
        for part in partitions {
            self.stats.partitions_walked += 1;
            let epoch = self.nodes.room_epoch();
            let mut failed_shapes = self.resumes.begin(&part, epoch);
            let mut kept_shapes = Vec::new();
            // Every wanted shape already failed at this epoch: the first application that
            // can only wait ends the pass, as its failed search would have.
            let full = !failed_shapes.is_empty()
                && self
                    .shapes
                    .keys()
                    .all(|s| failed_shapes.iter().any(|f| f.fits_in(s)));
            let mut excluded = vec![false; self.tree.queues.len()];
            // Leaves whose every waiting application is known not servable sit out.
            let queues = &self.tree.queues;
            for leaf in self
                .resumes
                .walked(&part, |l| queues[l].schedulable.last().copied())
            {
                excluded[leaf] = true;
            }
            // Users that runs kept from earlier passes found at their limit are blocked from
            // the start, as a walk through those runs would block them.
            let mut blocked_users = BlockedUsers::new();
            for (leaf, at, user) in self.resumes.blocked(&part) {
                blocked_users.insert(leaf, user, at);
            }
            while let Some(leaf) = self.pick_leaf(&mut excluded, &part) {
                self.stats.leaves_served += 1;
                let shapes = (&mut failed_shapes, &mut kept_shapes, full);
                match self.serve_leaf(leaf, &part, shapes, &mut blocked_users) {
                    Served::Placed(p) => {
                        self.stats.placements += p.len() as u64;
                        out.extend(p)
                    }
                    Served::LeafDone => excluded[leaf] = true,
                    Served::PassDone => break,
                }
            }
            self.resumes.end(&part, epoch, failed_shapes);
        }
        out
    }

    /// Descends from the root to the most under-served leaf with demand not yet excluded.
    pub(super) fn pick_leaf(&self, excluded: &mut [bool], part: &str) -> Option<QueueIdx> {
        let root = self.tree.root();
        let calc = self.conf.calculator;
        let cluster = self.nodes.partition_total(part);
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
                // Each child's key once (not once per comparison).
                let best = queue
                    .children
                    .iter()
                    .copied()
                    .filter(|c| !excluded[*c] && self.demand[*c] > 0)
                    .map(|c| (self.order_key(calc, c, part, &cluster), c))
                    .min_by(|(ka, _), (kb, _)| {
                        ka.partial_cmp(kb).unwrap_or(std::cmp::Ordering::Equal)
                    })
                    .map(|(_, c)| c);
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
    /// Among siblings whose parent has only `fairshare` leaves below it, queues at or over
    /// their guarantee go by decayed usage over guarantee instead (`fair_queues`), the
    /// slack to the one furthest below its share of it.
    /// Ties go to the higher queue priority, then to tree order.
    pub(super) fn order_key(
        &self,
        calc: Calculator,
        q: QueueIdx,
        part: &str,
        cluster: &Resource,
    ) -> (u8, f64, f64, i64, QueueIdx) {
        let queue = &self.tree.queues[q];
        let prio = -i64::from(queue.spec.priority);
        let used = queue.used_ref_in(part);
        let Some(guaranteed) = queue.guaranteed_ref_in(part).filter(|g| !g.is_zero()) else {
            return (2, ratio(calc, &used, cluster), 0.0, prio, q);
        };
        let r = ratio(calc, &used, guaranteed);
        if r < 1.0 {
            // The gap to the guarantee, measured along the queue's dominant dimension and
            // scaled to the cluster: (1 - used/guaranteed) x guaranteed's share.
            let gap_share = (1.0 - r) * ratio(calc, guaranteed, cluster);
            (0, -gap_share, 0.0, prio, q)
        } else {
            (1, self.slack_key(q).unwrap_or(r), r, prio, q)
        }
    }

    /// Places one container for the first servable application of `leaf`. Cheap checks
    /// come first (a shape already known not to fit), so a full cluster costs little.
    pub(super) fn serve_leaf(
        &mut self,
        leaf: QueueIdx,
        part: &str,
        (failed_shapes, kept_shapes, full): (&mut Vec<Resource>, &mut Vec<Resource>, bool),
        blocked_users: &mut BlockedUsers,
    ) -> Served {
        let mut visit = LeafVisit {
            leaf,
            part,
            // Without backfill the leaf's first waiting application blocks the rest.
            strict: !self.tree.queues[leaf].spec.backfill,
            over_max: Vec::new(),
            failed_shapes,
            kept_shapes,
            full,
            blocked_users,
            passed_over: true,
            why: RunWhy::default(),
            // Set before each application's turn.
            at: (i64::MIN, 0, ApplicationId::new(0, 0)),
        };
        // Resume after the applications found not servable (in this pass, or in earlier
        // ones while nothing happened that could change that).
        let mut cursor = self.resumes.open(part, leaf, self.nodes.room_epoch());
        let served = self.walk_leaf(&mut visit, &mut cursor);
        let blocked_users = &*visit.blocked_users;
        self.resumes.close(part, |c| blocked_users.through(leaf, c));
        served
    }

    /// A leaf visit's walk of its applications from after `cursor`, up to the one served
    /// or the end of the leaf.
    fn walk_leaf(&mut self, visit: &mut LeafVisit<'_>, cursor: &mut Option<OrderEntry>) -> Served {
        let leaf = visit.leaf;
        // Gang ids are the application's own: two applications may both have a "g1".
        let mut tried_gangs: BTreeSet<(ApplicationId, String)> = BTreeSet::new();
        let mut batch: SmallVec<[OrderEntry; ORDER_BATCH]> = SmallVec::new();
        let (mut next, mut moves) = (0, 0);
        loop {
            // The application the previous round of this loop passed over (it did not
            // return): while all before it were passed over too, resume after it next time.
            if let (true, Some(c)) = (visit.passed_over && !visit.strict, *cursor) {
                self.resumes.pass_over(c, visit.why);
            }
            // The leaf's order is walked in batches (one tree search each, not one per
            // application), taken anew when they run out or the order changed under them.
            let queue = &self.tree.queues[leaf];
            let moved = queue.order_moves != moves;
            if next == batch.len() && batch.len() < ORDER_BATCH && !moved && !batch.is_empty() {
                // The last batch reached the end of the order.
                return Served::LeafDone;
            }
            if next == batch.len() || moved {
                let after = (*cursor).map_or(Bound::Unbounded, Bound::Excluded);
                batch.clear();
                batch.extend(
                    queue
                        .schedulable
                        .range((after, Bound::Unbounded))
                        .take(ORDER_BATCH)
                        .copied(),
                );
                (next, moves) = (0, queue.order_moves);
            }
            let Some(&entry) = batch.get(next) else {
                return Served::LeafDone;
            };
            next += 1;
            *cursor = Some(entry);
            visit.at = entry;
            self.stats.apps_visited += 1;
            if let Some(served) = self.serve_app(visit, entry.2, &mut tried_gangs) {
                return served;
            }
        }
    }

    /// One application's turn in a leaf visit: its gangs first (each tried whole, once per
    /// visit), then its plain asks. `None`: go on to the next application.
    #[inline]
    fn serve_app(
        &mut self,
        visit: &mut LeafVisit<'_>,
        app_id: ApplicationId,
        tried_gangs: &mut BTreeSet<(ApplicationId, String)>,
    ) -> Option<Served> {
        // Gangs that did not fit since room last grew are skipped without a copy.
        let epoch = self.nodes.room_epoch();
        // One lookup of the application serves the visit's reads (again only after its
        // gangs were tried, which may change it).
        let mut a = self.apps.get(&app_id)?;
        if a.asks.values().any(|x| x.gang.is_some()) {
            // A gang waits on timeouts, holds and budgets too: not resumed past next pass.
            visit.why.passing = true;
            let asked = |id: &str| a.asks.values().any(|x| x.gang.as_deref() == Some(id));
            let gangs: Vec<String> = a
                .gangs
                .iter()
                .filter(|(_, g)| same_partition(&g.params.partition, visit.part))
                .filter(|(_, g)| g.missed_at != Some(epoch))
                .filter(|(id, _)| asked(id))
                .map(|(id, _)| id.clone())
                .collect();
            for g in gangs {
                if tried_gangs.insert((app_id, g.clone())) {
                    self.stats.node_searches += 1;
                    if let Some(p) = self.try_gang(&app_id, &g, visit.leaf) {
                        return Some(Served::Placed(p));
                    }
                }
            }
            if visit.strict {
                return Some(Served::LeafDone);
            }
            a = self.apps.get(&app_id)?;
        }
        // Built in this frame and lent on: a visit moves no candidate list around.
        let mut candidates = Candidates::new();
        let waits = plain_candidates(a, visit, &mut candidates);
        let stop = visit.strict.then_some(Served::LeafDone);
        if candidates.is_empty() {
            if waits && visit.full {
                return Some(Served::PassDone);
            }
            return if waits { stop } else { None };
        }
        let user = a.user.as_str();
        if visit.blocked_users.contains(visit.leaf, user) {
            visit.why.user_limited = true;
            return stop;
        }
        let user_used = self.tree.queues[visit.leaf]
            .users
            .get(user)
            .map(|u| u.used.clone())
            .unwrap_or_default();
        if let Some(served) = self.serve_plain(visit, app_id, &candidates, user_used) {
            return Some(served);
        }
        // Nothing of this application could be placed: without backfill nothing after it
        // may be.
        stop
    }

    /// Places the first of an application's plain candidates that fits somewhere, under its
    /// queues' maxima and its user's limit. `None`: none could be placed in this pass.
    #[inline]
    fn serve_plain(
        &mut self,
        visit: &mut LeafVisit<'_>,
        app_id: ApplicationId,
        candidates: &Candidates,
        user_used: Resource,
    ) -> Option<Served> {
        let leaf = visit.leaf;
        for (key, cap, is_am) in candidates {
            if visit.failed_shapes.iter().any(|s| s.fits_in(cap))
                || visit.kept_for_gpus(cap, *is_am)
            {
                continue;
            }
            // AM containers were admitted by the AM limit; the user limit governs the rest.
            let user_ok = *is_am
                || !visit.part.is_empty()
                || self.user_limit_reached(leaf, &user_used, cap).is_none();
            let parts = match self.ask_partitions(visit, cap, user_ok) {
                Ok(parts) => parts,
                Err(Some(served)) => return Some(served),
                // A maximum blocks this shape: the application's next ask may fit.
                Err(None) => continue,
            };
            if parts.is_empty() {
                visit.why.user_limited = true;
                if let Some(a) = self.apps.get(&app_id) {
                    visit.blocked_users.insert(leaf, &a.user, visit.at);
                }
                break;
            }
            self.stats.node_searches += 1;
            let Some(slot) = self.find_node(&app_id, key, &parts) else {
                self.stats.failed_searches += 1;
                let ask = self.apps.get(&app_id).and_then(|a| a.asks.get(key));
                let local = ask.is_some_and(|a| a.has_hosts() || a.has_racks());
                if ask.is_some_and(|a| a.constraint.is_some()) {
                    // Another application's placement may satisfy a constraint, and its
                    // search looks at a bounded number of nodes.
                    visit.why.passing = true;
                }
                if self.kept_back {
                    // Only cores kept for free GPUs stood in the way: they are freed when
                    // the GPU asks stop waiting, which no room epoch tells. Not a failed
                    // shape, and the run lasts for this pass; but for the rest of this pass
                    // the shape is not searched for again, and when it and the failed
                    // shapes cover every wanted shape the pass is over, as for failed ones.
                    visit.why.passing = true;
                    if !local && self.shape_kept(visit, cap.clone()) {
                        return Some(Served::PassDone);
                    }
                    continue;
                }
                if local {
                    // Its locality relaxes with every miss: a later visit in this pass may
                    // place it, so the pass does not resume past it.
                    visit.passed_over = false;
                } else if self.shape_failed(visit, cap.clone()) {
                    // No node fits any plain shape: the pass is over (gangs holding nodes
                    // were tried first).
                    return Some(Served::PassDone);
                }
                continue;
            };
            return Some(match self.commit(&app_id, key, slot) {
                Some(p) => Served::Placed(vec![p]),
                None => Served::LeafDone,
            });
        }
        None
    }

    /// The partitions an ask of shape `cap` may be placed in now: its own, under the
    /// queue's maxima there (and, in the default partition, the user limit: `user_ok`);
    /// for a default-partition ask also each non-exclusive partition that lends, under the
    /// queue's maxima in it. `Err`: none, because a queue's maximum blocks the shape (the
    /// visit notes it; `Err(Some(PassDone))` when no shape can fit anywhere any more).
    #[inline]
    fn ask_partitions(
        &self,
        visit: &mut LeafVisit<'_>,
        cap: &Resource,
        user_ok: bool,
    ) -> Result<SmallVec<[String; 2]>, Option<Served>> {
        let (leaf, part) = (visit.leaf, visit.part);
        let blocking = self.queue_blocking(leaf, cap, part, None);
        let mut parts: SmallVec<[String; 2]> = SmallVec::new();
        if blocking.is_none() && user_ok {
            parts.push(part.to_string());
        }
        if part.is_empty() {
            for (l, _) in self.labels.iter().filter(|(_, exclusive)| !**exclusive) {
                if self.queue_blocking(leaf, cap, l, None).is_none() {
                    parts.push(l.clone());
                }
            }
        }
        let Some(q) = blocking.filter(|_| parts.is_empty()) else {
            return Ok(parts);
        };
        // Over the root's maximum means the cluster itself is full in some dimension: no
        // node can take this shape in this pass.
        if q == self.tree.root() && self.shape_failed(visit, cap.clone()) {
            return Err(Some(Served::PassDone));
        }
        visit.over_max.push(cap.clone());
        Err(None)
    }

    /// Notes that no node takes `cap` in this pass; whether that leaves no plain shape any
    /// node could take.
    #[inline]
    fn shape_failed(&self, visit: &mut LeafVisit<'_>, cap: Resource) -> bool {
        visit.failed_shapes.push(cap);
        self.every_shape_stopped(visit)
    }

    /// A CPU-only shape was refused only for the cores free GPUs keep; whether no wanted
    /// shape can be placed in this pass any more.
    fn shape_kept(&self, visit: &mut LeafVisit<'_>, cap: Resource) -> bool {
        visit.kept_shapes.push(cap);
        self.every_shape_stopped(visit)
    }

    /// Whether every wanted shape is known not to fit in this pass: a failed shape fits in
    /// it, or it is a CPU-only shape no AM asks for and a kept shape fits in it.
    fn every_shape_stopped(&self, visit: &LeafVisit<'_>) -> bool {
        self.shapes.keys().all(|s| {
            visit.failed_shapes.iter().any(|f| f.fits_in(s))
                || (!self.am_shapes.contains_key(s) && visit.kept_for_gpus(s, false))
        })
    }

    /// A node for an ask, honouring locality with delay scheduling: host-local while fewer
    /// than `node-locality-delay` opportunities were missed, rack-local for
    /// `rack-locality-additional-delay` more (-1: as many again), then anywhere if allowed.
    pub(super) fn find_node(
        &mut self,
        app: &ApplicationId,
        key: &AskKey,
        parts: &[String],
    ) -> Option<usize> {
        let node_delay = self.conf.node_locality_delay;
        let rack_delay = if self.conf.rack_locality_additional_delay < 0 {
            node_delay
        } else {
            self.conf.rack_locality_additional_delay as u32
        };
        self.kept_back = false;
        let a = self.apps.get(app)?;
        let ask = a.asks.get(key)?;
        let cap = &ask.capability;
        let asker = placement::Asker { app };
        let nodes = &self.nodes;
        let constraint = ask.constraint.as_ref();
        let keep = gpu_cpus::KeepCpus::new(&self.cpu, &self.gpu_asking, cap, ask.is_am);
        // A constraint on tags is checked node by node: look further than the plain probes.
        let probes = if constraint.is_some_and(|c| c.counts_tags()) {
            node_index::PROBES * 16
        } else {
            node_index::PROBES
        };
        // Its own partition first, then (a default-partition ask) those that lend.
        let also = |n: &SchedNode| {
            parts.iter().any(|p| same_partition(p, &n.partition))
                && constraint.is_none_or(|c| placement::satisfied(c, nodes, n, &asker))
                && keep.admits(n, cap)
        };
        let anywhere = || {
            parts
                .iter()
                .find_map(|p| nodes.find_any(cap, p, probes, &also))
        };
        if !ask.has_hosts() && !ask.has_racks() {
            // A node already holding the image first (a preference: never a wait).
            let holding = ask
                .image
                .as_deref()
                .and_then(|i| nodes.find_holding(i, cap, &also));
            let found = holding.or_else(anywhere);
            self.kept_back = found.is_none() && keep.refused();
            return found;
        }
        let hosts = ask.hosts.iter().filter(|(_, c)| **c > 0).map(|(h, _)| h);
        if let Some(s) = self.nodes.find_on_hosts(hosts, cap, &also) {
            return Some(s);
        }
        let missed = ask.missed;
        let mut found = None;
        if ask.has_racks() && (missed >= node_delay || !ask.has_hosts()) {
            let racks = ask.racks.iter().filter(|(_, c)| **c > 0).map(|(r, _)| r);
            found = self.nodes.find_in_racks(racks, cap, &also);
        }
        if found.is_none() && ask.relax_locality && missed >= node_delay.saturating_add(rack_delay)
        {
            found = anywhere();
        }
        if found.is_none() {
            if let Some(a) = self.apps.get_mut(app).and_then(|a| a.asks.get_mut(key)) {
                a.missed = a.missed.saturating_add(1);
            }
        }
        found
    }

    pub(super) fn commit(
        &mut self,
        app_id: &ApplicationId,
        key: &AskKey,
        slot: usize,
    ) -> Option<Placement> {
        let node = self.nodes.get(slot)?;
        let node_id = node.id.clone();
        let app = self.apps.get_mut(app_id)?;
        let ask = app.asks.get_mut(key)?;
        // Host and rack counts exist only for local asks: no copies of the names otherwise.
        if !ask.hosts.is_empty() {
            if let Some(c) = ask.hosts.get_mut(&node.host) {
                *c = c.saturating_sub(1);
            }
        }
        if !ask.racks.is_empty() {
            if let Some(c) = ask.racks.get_mut(&node.rack) {
                *c = c.saturating_sub(1);
            }
        }
        let resource = ask.capability.clone();
        let is_am = ask.is_am;
        let gang = ask.gang.clone();
        let tags = ask.tags.clone();
        let partition = ask.partition.clone();
        let had = ask.any;
        ask.any = ask.any.saturating_sub(1);
        ask.missed = 0;
        if ask.any == 0 {
            app.asks.remove(key);
        }
        if had > 0 && gang.is_none() {
            self.count_shape(&resource, 1, false, is_am);
        }
        self.charge_slot(app_id, slot, &resource);
        self.tag_slot(app_id, slot, &tags, true);
        self.refresh_order(app_id);
        Some(Placement {
            app: *app_id,
            key: *key,
            node: node_id,
            resource,
            is_am,
            gang,
            tags,
            partition,
        })
    }
}

/// One walk of an application's asks: whether any plain ask waits in this partition,
/// and those that might be placed now (not of a shape known not to fit, unless local).
#[inline]
fn plain_candidates(a: &SchedApp, visit: &LeafVisit<'_>, candidates: &mut Candidates) -> bool {
    let mut waits = false;
    for (k, x) in &a.asks {
        if x.any == 0 || x.gang.is_some() || !same_partition(&x.partition, visit.part) {
            continue;
        }
        waits = true;
        let cap = &x.capability;
        if !visit.over_max.iter().any(|s| s.fits_in(cap))
            && (x.has_hosts()
                || x.has_racks()
                || !(visit.failed_shapes.iter().any(|s| s.fits_in(cap))
                    || visit.kept_for_gpus(cap, x.is_am)))
        {
            candidates.push((*k, cap.clone(), x.is_am));
        }
    }
    waits
}
