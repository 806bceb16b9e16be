//! The preemption monitor's decisions: YARN's `ProportionalCapacityPreemptionPolicy`, made
//! gang-aware. A leaf below its guarantee whose first waiting application cannot be placed
//! takes resources back from queues above theirs (never claiming more from a queue than it
//! holds over its guarantee, nothing from a queue with `disable_preemption`); inside a
//! leaf, a waiting application takes them from lower-ranked ones (lower application
//! priority, a higher `las` level, a user over the user limit). Victims are whole units (a
//! gang's every live member, or one plain container), chosen where the preemptor's gang will
//! then be placed: cheapest first by the work they would lose, then pruned to the fewest
//! that still let the gang fit. An elastic gang's members above its minimum are a unit
//! taken by shrinking, and first. The nodes the plan uses are then held for the preemptor.
//!
//! Pure: the lifecycle layer passes the running candidates (it knows containers and
//! checkpoints) and turns each [`Choice`] into notices, a hold and, at the deadline, kills.

use super::fair_victims::{Ranker, INTRA_QUEUE_REASONS};
pub use super::preemptors::Preemptor;
use super::victim_plan::Reach;
use super::*;
use smallvec::SmallVec;
use spindle_common::ContainerId;
use std::ops::Range;

/// The monitor's settings (`yarn.resourcemanager.monitor.capacity.preemption.*`).
#[derive(Debug, Clone, PartialEq)]
pub struct PreemptionConf {
    /// `yarn.resourcemanager.scheduler.monitor.enable`.
    pub enabled: bool,
    pub observe_only: bool,
    pub monitoring_interval_ms: u64,
    pub max_wait_before_kill_ms: u64,
    pub total_preemption_per_round: f64,
    pub max_ignored_over_capacity: f64,
    pub natural_termination_factor: f64,
    pub intra_queue: bool,
    /// Spindle's: a unit younger than this is not preempted (a preempted job re-granted
    /// is young again, so it cannot be preempted again before running this long).
    pub min_runtime_ms: u64,
    /// `intra-queue-preemption.fairshare.usage-factor`: in a `fairshare` leaf, a user below
    /// their share takes from users above theirs with at least this multiple of its usage
    /// over share.
    pub fairshare_usage_factor: f64,
}

impl Default for PreemptionConf {
    /// YARN's defaults, with the monitor off: the configuration keys' defaults, spelled
    /// once in `keys`.
    fn default() -> Self {
        use spindle_common::config::keys;
        Self {
            enabled: keys::DEFAULT_RM_SCHEDULER_MONITOR_ENABLE,
            observe_only: keys::DEFAULT_PREEMPTION_OBSERVE_ONLY,
            monitoring_interval_ms: keys::DEFAULT_PREEMPTION_MONITORING_INTERVAL_MS,
            max_wait_before_kill_ms: keys::DEFAULT_PREEMPTION_MAX_WAIT_BEFORE_KILL_MS,
            total_preemption_per_round: keys::DEFAULT_PREEMPTION_TOTAL_PER_ROUND,
            max_ignored_over_capacity: keys::DEFAULT_PREEMPTION_MAX_IGNORED_OVER_CAPACITY,
            natural_termination_factor: keys::DEFAULT_PREEMPTION_NATURAL_TERMINATION_FACTOR,
            intra_queue: keys::DEFAULT_PREEMPTION_INTRA_QUEUE_ENABLED,
            min_runtime_ms: keys::DEFAULT_PREEMPTION_MIN_RUNTIME_MS,
            fairshare_usage_factor: keys::DEFAULT_PREEMPTION_INTRA_QUEUE_FAIRSHARE_USAGE_FACTOR,
        }
    }
}

/// A running unit that may be taken back whole: a gang's live members, or one container.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub app: ApplicationId,
    pub gang: Option<String>,
    pub containers: Vec<(ContainerId, NodeId, Resource)>,
    pub total: Resource,
    /// GPU-milliseconds since its last checkpoint (since it started without one).
    pub lost_gpu_ms: u64,
    /// An elastic gang's members above its minimum: taken by shrinking it (from, to)
    /// rather than preempting it, and before any whole unit.
    pub shrink: Option<(u32, u32)>,
    /// An application's AM container with every live container of its attempt (taking it
    /// ends the attempt): YARN's AM containers, considered last, only when no other unit
    /// restores a guarantee, newest application first, and claimed whole from its queue.
    pub whole_app: bool,
}

impl Candidate {
    /// What taking it claims from its queues, of the `left` a preemptor still needs: a
    /// unit's share of it, an application taken whole all it holds (its queue must stay at
    /// or above its guarantee without all of it).
    pub(super) fn claim(&self, left: &Resource) -> Resource {
        if self.whole_app {
            self.total.clone()
        } else {
            min_each(&self.total, left)
        }
    }
}

/// A round's candidates: the units, built at once, then the applications that may be taken
/// whole with their AM ([`Candidate::whole_app`]), built only when a preemptor of the round
/// first needs the last resort (most rounds never do, and each repeats its units' containers).
pub struct Candidates<'a> {
    all: Vec<Candidate>,
    whole_apps: Option<Box<dyn FnOnce() -> Vec<Candidate> + 'a>>,
    /// Where the applications taken whole sit in `all`, once built.
    whole: Option<Range<usize>>,
}

impl<'a> Candidates<'a> {
    /// `units` (none of them [`Candidate::whole_app`]) and how to build the applications
    /// that may be taken whole.
    pub fn new(units: Vec<Candidate>, whole_apps: impl FnOnce() -> Vec<Candidate> + 'a) -> Self {
        Self {
            all: units,
            whole_apps: Some(Box::new(whole_apps)),
            whole: None,
        }
    }

    /// Every candidate built so far (a [`Choice`]'s victims index it).
    pub fn all(&self) -> &[Candidate] {
        &self.all
    }

    pub fn into_all(self) -> Vec<Candidate> {
        self.all
    }

    /// The applications that may be taken whole, built on the first call.
    fn whole_apps(&mut self) -> Range<usize> {
        if let Some(r) = &self.whole {
            return r.clone();
        }
        let from = self.all.len();
        if let Some(build) = self.whole_apps.take() {
            self.all.extend(build());
        }
        let r = from..self.all.len();
        self.whole = Some(r.clone());
        r
    }
}

/// Cheapest first: an elastic gang's extra members, then by the work lost.
fn cheapest_first(pool: &mut [usize], cands: &[Candidate]) {
    pool.sort_by_key(|i| {
        let c = &cands[*i];
        (
            c.shrink.is_none(),
            c.lost_gpu_ms,
            c.containers.len(),
            c.app,
            c.gang.as_deref(),
        )
    });
}

/// Why a preemptor may take resources back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Its queue is below its guarantee; victims are in queues above theirs.
    Guarantee,
    /// Intra-queue: victims have a lower application priority.
    Priority,
    /// Intra-queue: victims are on a later `las` level.
    LasLevel,
    /// Intra-queue: victims' users are over the user limit, the preemptor's is not.
    UserLimit,
    /// Intra-queue (`fairshare` leaves): victims' users are far above their share, the
    /// preemptor's is below it (`fair_victims`).
    Fairshare,
    /// Not a preemption: the elastic policy shrinks a gang for work waiting in its queue.
    Elastic,
    /// A non-exclusive partition takes back room it lent to the default partition.
    Partition,
}

impl Reason {
    pub fn describe(&self) -> &'static str {
        match self {
            Reason::Guarantee => "its queue is below its guaranteed capacity",
            Reason::Priority => "it has a higher application priority",
            Reason::LasLevel => "it has attained less service (las level)",
            Reason::UserLimit => "the victim's user is over the queue's user limit",
            Reason::Fairshare => "the victim's user is far above their fair share, its user below",
            Reason::Elastic => "the elastic policy shrinks the gang for waiting work",
            Reason::Partition => "its partition takes back room it lent to the default partition",
        }
    }
}

/// One decision of a round.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub preemptor: ApplicationId,
    pub gang: Option<String>,
    pub leaf: QueueIdx,
    pub reason: Reason,
    /// What the preemptor needs in all.
    pub need: Resource,
    /// Indices into the round's candidates.
    pub victims: Vec<usize>,
    /// Nodes the preemptor's gang will be placed on, with what it needs of each (to hold
    /// for it); empty for plain asks.
    pub hold: Hold,
}

/// Nodes to hold for a gang, with what it needs of each.
pub type Hold = Vec<(NodeId, Resource)>;

const EPS: f64 = 1e-9;

impl Scheduler {
    pub(super) fn share(&self, r: &Resource) -> f64 {
        ratio(self.conf.calculator, r, &self.nodes.cluster)
    }

    /// The queues from `victim_leaf` up to (not including) its lowest common ancestor with
    /// `leaf`: the ones that give when the victim goes.
    pub(super) fn giving_path(
        &self,
        victim_leaf: QueueIdx,
        leaf: QueueIdx,
    ) -> SmallVec<[QueueIdx; 8]> {
        let mine: SmallVec<[QueueIdx; 8]> = self.tree.path_up(leaf).collect();
        self.tree
            .path_up(victim_leaf)
            .take_while(|q| !mine.contains(q))
            .collect()
    }

    /// Per queue, whether it gives to a preemptor elsewhere before anything is claimed
    /// from it ([`Self::may_give`] with no claims), judged once for a round's preemptors
    /// rather than once per preemptor and leaf.
    pub(super) fn giving_queues(&self, conf: &PreemptionConf) -> Vec<bool> {
        let zero = Resource::zero();
        (0..self.tree.queues.len())
            .map(|q| self.queue_gives(QueueIdx(q), &zero, &zero, &zero, conf))
            .collect()
    }

    /// Whether `victim_leaf`'s applications may give to `leaf` before anything is claimed,
    /// by [`Self::giving_queues`].
    pub(super) fn gives_freely(
        &self,
        victim_leaf: QueueIdx,
        leaf: QueueIdx,
        giving: &[bool],
    ) -> bool {
        // The path starts at the victim's leaf: a leaf that does not give ends it here.
        if victim_leaf == leaf || !giving[victim_leaf.0] {
            return false;
        }
        let path = self.giving_path(victim_leaf, leaf);
        !path.is_empty() && path.iter().all(|q| giving[*q])
    }

    /// The leaves whose applications a round may take from: over their guarantee outside
    /// the dead zone and not `disable_preemption` (for preemptors elsewhere), or leaves with
    /// a preemptor of their own and intra-queue preemption on.
    pub fn victim_leaves(&self, conf: &PreemptionConf, waiting: &[Preemptor]) -> Vec<QueueIdx> {
        let intra: BTreeSet<QueueIdx> = if conf.intra_queue {
            waiting
                .iter()
                .map(|p| p.leaf)
                .filter(|l| !self.tree.queues[*l].spec.intra_queue_disable_preemption)
                .collect()
        } else {
            BTreeSet::new()
        };
        self.tree
            .iter()
            .filter(|(i, q)| {
                if !q.is_leaf() {
                    return false;
                }
                let g = self.share(&q.guaranteed);
                let over = !q.spec.disable_preemption
                    && self.share(&q.used) > g * (1.0 + conf.max_ignored_over_capacity) + EPS;
                over || intra.contains(i)
            })
            .map(|(i, _)| i)
            .collect()
    }

    /// The leaves whose candidates a round over `waiting` (already [`Self::round_preemptors`])
    /// can take from: for a preemptor under its guarantee, the other leaves that may give to
    /// it; for intra-queue preemption, its own leaf when an application there ranks below
    /// it. Exactly the leaves the round's pools draw from, so the candidates of no other
    /// leaf need be built (a round whose preemptors nobody can serve builds none).
    pub fn candidate_leaves(
        &self,
        conf: &PreemptionConf,
        waiting: &[Preemptor],
    ) -> BTreeSet<QueueIdx> {
        let giving = self.giving_queues(conf);
        let mut out = BTreeSet::new();
        for p in waiting {
            if self.under_guarantee_with(p) {
                for (vl, q) in self.tree.iter() {
                    if q.is_leaf()
                        && vl != p.leaf
                        && !out.contains(&vl)
                        && self.gives_freely(vl, p.leaf, &giving)
                    {
                        out.insert(vl);
                    }
                }
            }
            let spec = &self.tree.queues[p.leaf].spec;
            if conf.intra_queue && !spec.intra_queue_disable_preemption && !out.contains(&p.leaf) {
                let apps = &self.tree.queues[p.leaf].apps;
                let below = INTRA_QUEUE_REASONS.into_iter().any(|reason| {
                    let ranks_below = self.ranker(p, reason, conf);
                    apps.iter().any(&ranks_below)
                });
                if below {
                    out.insert(p.leaf);
                }
            }
        }
        out
    }

    /// Whether anything waits that a round could serve (cheap: no candidates needed).
    pub fn any_preemptor(&self, conf: &PreemptionConf, waiting: &[Preemptor]) -> bool {
        waiting.iter().any(|p| {
            self.under_guarantee_with(p)
                || (conf.intra_queue
                    && !self.tree.queues[p.leaf].spec.intra_queue_disable_preemption)
        })
    }

    /// One monitoring round: what to take back, from whom, for whom. `cands` are the
    /// running units old enough to be preempted and not already under notice, and the
    /// applications that may be taken whole, built when first needed; `waiting` are this
    /// round's [`Self::preemptors`].
    pub fn preemption_round(
        &self,
        cands: &mut Candidates<'_>,
        conf: &PreemptionConf,
        mut waiting: Vec<Preemptor>,
    ) -> Vec<Choice> {
        let mut out: Vec<Choice> = Vec::new();
        if self.nodes.cluster.is_zero() {
            return out;
        }
        let n = self.tree.queues.len();
        // What each queue gives this round, and what the round takes in all.
        let mut given = vec![Resource::zero(); n];
        let mut round_total = Resource::zero();
        let mut taken = vec![false; cands.all().len()];
        // Units by leaf, once: a preemptor looks only at the leaves that may give.
        let by_leaf = self.by_leaf(cands.all(), 0..cands.all().len());
        let mut whole_by_leaf: Option<BTreeMap<QueueIdx, Vec<usize>>> = None;
        let mut reach = Reach::default();
        waiting = self.round_preemptors(waiting);
        let giving = self.giving_queues(conf);
        let gives =
            |vl: QueueIdx, p: &Preemptor| vl != p.leaf && self.gives_freely(vl, p.leaf, &giving);
        for p in waiting {
            let leaf_spec = &self.tree.queues[p.leaf].spec;
            let mut tries: Vec<(Reason, Vec<usize>)> = Vec::new();
            if self.under_guarantee_with(&p) {
                // The leaves that may give to this preemptor, each judged once.
                let mut pool = Vec::new();
                for (_, idxs) in by_leaf.iter().filter(|(vl, _)| gives(**vl, &p)) {
                    pool.extend(idxs.iter().copied().filter(|i| !taken[*i]));
                }
                tries.push((Reason::Guarantee, pool));
            }
            if conf.intra_queue && !leaf_spec.intra_queue_disable_preemption {
                for reason in INTRA_QUEUE_REASONS {
                    let below = self.ranker(&p, reason, conf);
                    let pool: Vec<usize> = by_leaf
                        .get(&p.leaf)
                        .into_iter()
                        .flatten()
                        .copied()
                        .filter(|i| !taken[*i] && below(&cands.all()[*i].app))
                        .collect();
                    if !pool.is_empty() {
                        tries.push((reason, pool));
                    }
                }
            }
            let mut room: Option<Vec<usize>> = None;
            for (reason, mut units) in tries {
                let first_of_round = out.is_empty();
                // The applications this try may take whole: built at the first need, and
                // asked for first when no unit could be (a pool of them alone is still tried).
                let mut apps = (reason == Reason::Guarantee && units.is_empty())
                    .then(|| self.whole_pool(cands, &mut taken, &mut whole_by_leaf, &p, &giving));
                let mut found = None;
                if !units.is_empty() || apps.as_ref().is_some_and(|a| !a.is_empty()) {
                    let room = room.get_or_insert_with(|| self.room_slots(&p));
                    found = self.pick_units(
                        &p,
                        room,
                        &mut units,
                        cands.all(),
                        reason,
                        &given,
                        conf,
                        &mut reach,
                    );
                }
                if found.is_none() && reason == Reason::Guarantee {
                    let apps = apps.take().unwrap_or_else(|| {
                        self.whole_pool(cands, &mut taken, &mut whole_by_leaf, &p, &giving)
                    });
                    if !apps.is_empty() {
                        let room = room.get_or_insert_with(|| self.room_slots(&p));
                        found = self.pick_last_resort(
                            &p,
                            room,
                            units,
                            apps,
                            cands.all(),
                            &given,
                            conf,
                            &taken,
                            &mut reach,
                        );
                    }
                }
                let Some((victims, hold, claims)) = found else {
                    continue;
                };
                let cands = cands.all();
                let freed = victims
                    .iter()
                    .fold(Resource::zero(), |acc, i| acc.plus(&cands[*i].total));
                if !first_of_round
                    && self.share(&round_total.plus(&freed)) > conf.total_preemption_per_round + EPS
                {
                    // This round has taken its share; a later round serves this preemptor.
                    break;
                }
                for i in &victims {
                    taken[*i] = true;
                }
                // An application taken whole takes its other units with it.
                let whole: BTreeSet<ApplicationId> = victims
                    .iter()
                    .filter(|i| cands[**i].whole_app)
                    .map(|i| cands[*i].app)
                    .collect();
                for (i, c) in cands.iter().enumerate() {
                    taken[i] |= whole.contains(&c.app);
                }
                given = claims;
                round_total.add_assign(&freed);
                out.push(Choice {
                    preemptor: p.app,
                    gang: p.gang.clone(),
                    leaf: p.leaf,
                    reason,
                    need: p.need.clone(),
                    victims,
                    hold: if p.gang.is_some() { hold } else { Vec::new() },
                });
                break;
            }
        }
        out
    }

    /// The applications `p` may take whole, not taken this round: from the leaves that give
    /// to it. Builds them at the round's first call.
    fn whole_pool(
        &self,
        cands: &mut Candidates<'_>,
        taken: &mut Vec<bool>,
        whole_by_leaf: &mut Option<BTreeMap<QueueIdx, Vec<usize>>>,
        p: &Preemptor,
        giving: &[bool],
    ) -> Vec<usize> {
        let whole = cands.whole_apps();
        taken.resize(cands.all().len(), false);
        let by_leaf = whole_by_leaf.get_or_insert_with(|| self.by_leaf(cands.all(), whole));
        by_leaf
            .iter()
            .filter(|(vl, _)| **vl != p.leaf && self.gives_freely(**vl, p.leaf, giving))
            .flat_map(|(_, idxs)| idxs.iter().copied())
            .filter(|i| !taken[*i])
            .collect()
    }

    /// The candidates of `range` by the leaf of their application.
    fn by_leaf(&self, cands: &[Candidate], range: Range<usize>) -> BTreeMap<QueueIdx, Vec<usize>> {
        let mut out: BTreeMap<QueueIdx, Vec<usize>> = BTreeMap::new();
        for i in range {
            if let Some(a) = self.apps.get(&cands[i].app) {
                out.entry(a.queue).or_default().push(i);
            }
        }
        out
    }

    /// Victims from `units` for one preemptor, the units that leave every AM running (an
    /// elastic gang's extra members first, then the cheapest by lost work), sorted so when
    /// a plan is tried.
    #[allow(clippy::too_many_arguments)]
    fn pick_units(
        &self,
        p: &Preemptor,
        room: &[usize],
        units: &mut [usize],
        cands: &[Candidate],
        reason: Reason,
        given: &[Resource],
        conf: &PreemptionConf,
        reach: &mut Reach,
    ) -> Option<(Vec<usize>, Hold, Vec<Resource>)> {
        if self.beyond_reach(p, room, units, cands, reach) {
            return None;
        }
        cheapest_first(units, cands);
        self.pick_victims(p, room, units, cands, reason, given, conf)
    }

    /// When no units restore a guarantee: applications taken whole with their AM (`apps`),
    /// after the units of other applications, newest first; each stands in for its own
    /// other units, and one whose units an earlier preemptor of the round took is left
    /// out. Never for intra-queue preemption.
    #[allow(clippy::too_many_arguments)]
    fn pick_last_resort(
        &self,
        p: &Preemptor,
        room: &[usize],
        mut units: Vec<usize>,
        mut apps: Vec<usize>,
        cands: &[Candidate],
        given: &[Resource],
        conf: &PreemptionConf,
        taken: &[bool],
        reach: &mut Reach,
    ) -> Option<(Vec<usize>, Hold, Vec<Resource>)> {
        let partly_taken: BTreeSet<ApplicationId> = (0..cands.len())
            .filter(|i| taken[*i])
            .map(|i| cands[i].app)
            .collect();
        apps.retain(|i| !partly_taken.contains(&cands[*i].app));
        if apps.is_empty() {
            return None;
        }
        apps.sort_by_key(|i| std::cmp::Reverse(cands[*i].app));
        let whole: BTreeSet<ApplicationId> = apps.iter().map(|i| cands[*i].app).collect();
        units.retain(|i| !whole.contains(&cands[*i].app));
        let last_resort: Vec<usize> = units.iter().chain(apps.iter()).copied().collect();
        if self.beyond_reach(p, room, &last_resort, cands, reach) {
            return None;
        }
        cheapest_first(&mut units, cands);
        units.extend(apps);
        self.pick_victims(p, room, &units, cands, Reason::Guarantee, given, conf)
    }

    /// Whether a candidate ranks below the preemptor inside the preemptor's leaf, by `reason`.
    pub(super) fn outranks(
        &self,
        p: &Preemptor,
        c: &Candidate,
        reason: Reason,
        conf: &PreemptionConf,
    ) -> bool {
        self.ranker(p, reason, conf)(&c.app)
    }

    /// Whether an application ranks below the preemptor inside the preemptor's leaf, by
    /// `reason`, as a test prepared once (the user limit is computed once, not per victim).
    fn ranker(&self, p: &Preemptor, reason: Reason, conf: &PreemptionConf) -> Ranker<'_> {
        let Some(pa) = self.apps.get(&p.app) else {
            return Box::new(|_| false);
        };
        let leaf = p.leaf;
        let me = p.app;
        let ordering = self.tree.queues[leaf].spec.ordering;
        let victim =
            move |id: &ApplicationId| self.apps.get(id).filter(|v| v.queue == leaf && *id != me);
        match reason {
            Reason::Fairshare => self.fairshare_ranker(p, conf),
            Reason::LasLevel if ordering == OrderingPolicy::Fairshare => self.own_las_ranker(p),
            Reason::LasLevel if ordering == OrderingPolicy::Las => {
                let level = pa.service.level;
                Box::new(move |id| victim(id).is_some_and(|v| v.service.level > level))
            }
            Reason::Priority if ordering != OrderingPolicy::Las => {
                let prio = pa.priority;
                Box::new(move |id| victim(id).is_some_and(|v| v.priority < prio))
            }
            Reason::UserLimit => {
                let calc = self.conf.calculator;
                let users = &self.tree.queues[leaf].users;
                let used = |u: &str| users.get(u).map(|x| x.used.clone()).unwrap_or_default();
                let limit = self.user_limit(leaf, &Resource::zero());
                if !within(calc, &used(&pa.user).plus(&p.need), &limit) {
                    return Box::new(|_| false);
                }
                let over: BTreeSet<&str> = users
                    .iter()
                    .filter(|(_, u)| !within(calc, &u.used, &limit))
                    .map(|(name, _)| name.as_str())
                    .collect();
                let mine = pa.user.clone();
                Box::new(move |id| {
                    victim(id).is_some_and(|v| v.user != mine && over.contains(v.user.as_str()))
                })
            }
            _ => Box::new(|_| false),
        }
    }

    /// Whether taking `claim` from `victim_leaf` keeps every giving queue at or above its
    /// guarantee and outside the dead zone. `prior` is what earlier preemptors of this round
    /// claimed, `claims` that plus this preemptor's earlier victims: the natural-termination
    /// share bounds what one round takes from a queue across preemptors, never one
    /// preemptor's own victims (a gang's need is taken in one round or not at all).
    pub(super) fn may_give(
        &self,
        victim_leaf: QueueIdx,
        leaf: QueueIdx,
        claim: &Resource,
        claims: &[Resource],
        prior: &[Resource],
        conf: &PreemptionConf,
    ) -> bool {
        self.giving_path(victim_leaf, leaf)
            .into_iter()
            .all(|q| self.queue_gives(q, claim, &claims[q], &prior[q], conf))
    }

    /// Whether queue `q` may give `claim` more, having been claimed `claimed` this round and
    /// having given `prior` in earlier decisions of it: not `disable_preemption`, over its
    /// guarantee outside the dead zone, staying at or above it, and (after its first claim)
    /// within the natural-termination share of what it holds over it.
    fn queue_gives(
        &self,
        q: QueueIdx,
        claim: &Resource,
        claimed: &Resource,
        prior: &Resource,
        conf: &PreemptionConf,
    ) -> bool {
        let queue = &self.tree.queues[q];
        if queue.spec.disable_preemption {
            return false;
        }
        let used = queue.used.minus(claimed);
        let g = self.share(&queue.guaranteed);
        let over = self.share(&used) - g;
        let in_dead_zone =
            self.share(&queue.used) <= g * (1.0 + conf.max_ignored_over_capacity) + EPS;
        let stays = self.share(&used.minus(claim)) >= g - EPS;
        let natural = prior.is_zero()
            || self.share(&claimed.plus(claim))
                <= conf.natural_termination_factor * (self.share(&queue.used) - g) + EPS;
        over > EPS && !in_dead_zone && stays && natural
    }

    /// Holds `nodes` for a waiting gang (replacing what it held): victims are leaving them
    /// for it, and nothing else may be placed there meanwhile.
    pub fn hold_for(&mut self, app: &ApplicationId, gang: &str, nodes: &[(NodeId, Resource)]) {
        let Some(a) = self.apps.get(app) else { return };
        let leaf = a.queue;
        let Some(g) = a.gangs.get(gang) else { return };
        if !g.phase.is_waiting() {
            return;
        }
        let need = a
            .asks
            .values()
            .filter(|x| x.gang.as_deref() == Some(gang))
            .fold(Resource::zero(), |acc, x| {
                acc.plus(&x.capability.times(i64::from(x.any)))
            });
        self.unreserve(app, gang);
        let holder = (*app, gang.to_string());
        let mut names = Vec::new();
        for (n, node_need) in nodes {
            let Some(s) = self.nodes.slot(n) else {
                continue;
            };
            // A gang the monitor may take from loses the nodes it held (it holds again,
            // elsewhere, at its next try).
            if let Some(other) = self.nodes.reserved_by(s).cloned() {
                if other != holder {
                    self.unreserve(&other.0, &other.1);
                    if let Some(g) = self
                        .apps
                        .get_mut(&other.0)
                        .and_then(|a| a.gangs.get_mut(&other.1))
                    {
                        g.phase = gang::GangPhase::Pending;
                        g.missed_at = None;
                    }
                }
            }
            self.nodes.hold(s, holder.clone(), node_need.clone());
            names.push(n.clone());
        }
        for q in self.tree.path_up(leaf).collect::<Vec<_>>() {
            self.tree.queues[q].reserved.add_assign(&need);
        }
        if let Some(g) = self.apps.get_mut(app).and_then(|a| a.gangs.get_mut(gang)) {
            g.reserved = names;
            g.reserved_need = need;
            g.phase = gang::GangPhase::Reserved;
            g.missed_at = None;
        }
    }
}
