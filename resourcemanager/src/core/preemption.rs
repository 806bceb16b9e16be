//! Preemption's lifecycle: the monitor's rounds (every `monitoring_interval`, driven by
//! `tick`), notices to AMs (YARN's `PreemptionMessage` plus a deadline), their
//! acknowledgements and checkpoint reports, the kill at the deadline (exit -102, PREEMPTED),
//! and what each application lost. The decisions are the scheduler's
//! ([`scheduler::victims`]); this module carries them out.
//!
//! Timeline of one preemption: at a round the monitor picks victims and notices go out (an
//! [`Effect::PreemptionNotice`] per victim attempt, the message in each allocate answer
//! until the containers are gone); the preemptor's gang holds the nodes it will use. The
//! deadline is `notice + max_wait_before_kill`; an AM that acknowledges with a checkpoint
//! ETA is killed at the earlier of the two. Whatever is still live then is killed; a
//! container under notice that ends earlier (its workers checkpointed and exited) counts
//! as preempted all the same.

use super::*;
use scheduler::victims::{Candidate, Candidates, Choice};
pub use scheduler::victims::{PreemptionConf, Reason};
use spindle_common::resource::GPU;

/// At most this many live containers of one leaf are considered as victims in a round
/// (whole gangs are never cut: an application's containers are taken together).
const CANDIDATES_PER_LEAF: usize = 256;

/// A container under notice.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    /// Who it is taken back for, and that application's leaf.
    pub preemptor: ApplicationId,
    pub leaf: scheduler::QueueIdx,
    pub reason: Reason,
    pub notified_at: u64,
    /// `notified_at + max_wait_before_kill`: the latest the container may live.
    pub deadline: u64,
    /// When it will be killed: the deadline, or the acknowledged ETA if earlier.
    pub kill_at: u64,
    pub acknowledged: bool,
    pub killed: bool,
    /// Set when the notice is an elastic gang's shrink, not a preemption.
    pub shrink: Option<Shrink>,
}

/// An elastic gang's shrink a notice carries out.
#[derive(Debug, Clone, PartialEq)]
pub struct Shrink {
    pub gang: String,
    pub from: u32,
    pub to: u32,
}

/// How a container under notice ended.
pub(super) enum NoticeEnd {
    /// Preempted: exit -102 and the diagnostics to report.
    Preempted(i32, String),
    /// Given back by an elastic gang's shrink: the exit and diagnostics to report.
    Shrunk(i32, String),
}

/// What the monitor has done since the RM started (`/metrics`, `spindle sls`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreemptionCounters {
    pub rounds: u64,
    /// Preemptors served (one per choice).
    pub decisions: u64,
    /// Decisions made with `observe_only` on (nothing was sent).
    pub observed: u64,
    /// Units (whole gangs or single containers) taken back.
    pub units: u64,
    pub containers_noticed: u64,
    /// Containers still live at their kill time.
    pub containers_killed: u64,
    /// Containers that ended after their notice, before their kill time.
    pub containers_exited: u64,
    pub lost_gpu_ms: u64,
}

#[derive(Debug, Clone, Default)]
pub struct PreemptionState {
    pub next_round_at: u64,
    pub notices: BTreeMap<ContainerId, Notice>,
    pub counters: PreemptionCounters,
    /// Work counter: running containers the monitor's rounds looked at as candidates.
    pub candidates_examined: u64,
}

/// What an AM's allocate call says besides asks: its last checkpoint and its answer to a
/// notice (an ETA in ms).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AmReport {
    pub checkpoint: Option<Checkpoint>,
    pub acknowledge_eta_ms: Option<u64>,
    /// Elastic gangs' measured throughput: (gang, size, value).
    pub throughput: Vec<(String, u32, f64)>,
    /// Throughput measured with workers of this many vcores: (vcores, value).
    pub cpu_throughput: Vec<(u32, f64)>,
    /// YARN's container updates.
    pub updates: Vec<ContainerUpdate>,
}

/// The notice an allocate answer carries: every container of the application under notice.
#[derive(Debug, Clone, PartialEq)]
pub struct PreemptionNotice {
    pub containers: Vec<NoticedContainer>,
    /// What they hold in all.
    pub resource: Resource,
    /// The earliest deadline among them (ms).
    pub deadline: u64,
    /// Gangs taken back whole.
    pub gangs: Vec<String>,
}

/// A container under notice, with where it runs (so the AM can reach it on its node) and
/// its gang.
#[derive(Debug, Clone, PartialEq)]
pub struct NoticedContainer {
    pub id: ContainerId,
    pub node: NodeId,
    pub node_http: String,
    pub gang: Option<String>,
}

impl RmCore {
    pub fn preemption(&self) -> &PreemptionState {
        &self.preemption
    }

    /// Whether the preemption monitor takes room back (on, and not only observing): what a
    /// waiting ask's reason tells.
    pub(super) fn monitor_acts(&self) -> bool {
        self.conf.preemption.enabled && !self.conf.preemption.observe_only
    }

    /// Kills what reached its kill time, then, once per monitoring interval, a round.
    pub(super) fn preemption_tick(&mut self, now: u64) {
        let due: Vec<ContainerId> = self
            .preemption
            .notices
            .iter()
            .filter(|(_, n)| !n.killed && n.kill_at <= now)
            .map(|(c, _)| *c)
            .collect();
        for c in due {
            let Some(n) = self.preemption.notices.get_mut(&c) else {
                continue;
            };
            n.killed = true;
            let diag = format!(
                "Container preempted by scheduler: killed {} ms after its notice",
                now.saturating_sub(n.notified_at)
            );
            self.preemption.counters.containers_killed += 1;
            self.kill_container(&c, exit_status::PREEMPTED, diag, now);
        }
        let conf = self.conf.preemption.clone();
        if !conf.enabled || now < self.preemption.next_round_at {
            return;
        }
        self.preemption.next_round_at = now.saturating_add(conf.monitoring_interval_ms.max(1));
        self.preemption.counters.rounds += 1;
        self.reclaim_lent(&conf, now);
        let busy: BTreeSet<scheduler::QueueIdx> =
            self.preemption.notices.values().map(|n| n.leaf).collect();
        // What waits, found once for the whole round.
        let waiting = self.sched.preemptors(&|l| busy.contains(&l));
        if !self.sched.any_preemptor(&conf, &waiting) {
            return;
        }
        // Candidates only where this round's preemptors could take them.
        let waiting = self.sched.round_preemptors(waiting);
        let from = self.sched.candidate_leaves(&conf, &waiting);
        if from.is_empty() {
            return;
        }
        let (live, held) = self.live_candidates(&conf, &waiting, &from);
        // Preemptors no victim set of these leaves could serve go before a candidate is
        // built: in a full cluster that is most rounds (issue 25).
        let waiting = self.sched.within_reach(&conf, waiting, &held);
        if waiting.is_empty() {
            return;
        }
        let units = self.unit_candidates(&live, &conf, now);
        let mut cands = Candidates::new(units, || self.whole_app_candidates(&live, &conf, now));
        let choices = self.sched.preemption_round(&mut cands, &conf, waiting);
        let cands = cands.into_all();
        self.preemption.candidates_examined += cands.len() as u64;
        for ch in choices {
            self.carry_out(ch, &cands, &conf, now);
        }
    }

    /// The live containers a round may take from, by application: only the leaves that may
    /// give are walked ([`scheduler::Scheduler::victim_leaves`]), newest applications first
    /// (the least work to lose, YARN's latest-launched first), up to
    /// [`CANDIDATES_PER_LEAF`] containers a leaf: a round's cost does not grow with the
    /// cluster. With them, what the live containers not under notice hold in all, per leaf:
    /// no round can free more there.
    #[allow(clippy::type_complexity)]
    fn live_candidates(
        &self,
        conf: &PreemptionConf,
        waiting: &[scheduler::victims::Preemptor],
        from: &BTreeSet<scheduler::QueueIdx>,
    ) -> (
        Vec<(&App, Vec<&RmContainer>)>,
        BTreeMap<scheduler::QueueIdx, Resource>,
    ) {
        let mut out = Vec::new();
        let mut held: BTreeMap<scheduler::QueueIdx, Resource> = BTreeMap::new();
        for leaf in self
            .sched
            .victim_leaves(conf, waiting)
            .into_iter()
            .filter(|l| from.contains(l))
        {
            let mut taken = 0;
            for app_id in self.sched.tree().queues[leaf].apps.iter().rev() {
                if taken >= CANDIDATES_PER_LEAF {
                    break;
                }
                let Some(app) = self.apps.get(app_id) else {
                    continue;
                };
                if app.state.is_final() || app.killing_since.is_some() {
                    continue;
                }
                let Some(att) = app.current_attempt() else {
                    continue;
                };
                let live: Vec<&RmContainer> = att
                    .containers
                    .iter()
                    .chain(att.inherited.iter())
                    .filter_map(|c| self.containers.get(c).filter(|x| x.is_live()))
                    .collect();
                taken += live.len();
                let sum = held.entry(leaf).or_default();
                for c in live
                    .iter()
                    .filter(|c| !self.preemption.notices.contains_key(&c.id))
                {
                    sum.add_assign(&c.resource);
                }
                out.push((app, live));
            }
        }
        (out, held)
    }

    /// Running units old enough to be preempted and not under notice: each gang's live
    /// members together, and each plain non-AM container alone.
    fn unit_candidates(
        &self,
        live: &[(&App, Vec<&RmContainer>)],
        conf: &PreemptionConf,
        now: u64,
    ) -> Vec<Candidate> {
        let mut gangs: BTreeMap<(ApplicationId, String), Candidate> = BTreeMap::new();
        let mut young: BTreeSet<(ApplicationId, String)> = BTreeSet::new();
        let mut out = Vec::new();
        for (app, c) in live
            .iter()
            .flat_map(|(a, cs)| cs.iter().map(move |c| (*a, *c)))
        {
            if c.is_am || self.preemption.notices.contains_key(&c.id) {
                continue;
            }
            let app_id = app.id;
            let ran = now.saturating_sub(c.allocated_time);
            let lost = Self::lost_gpu_ms(app, c, now);
            let entry = (c.id, c.node.clone(), c.resource.clone());
            match &c.gang {
                Some(g) => {
                    let key = (app_id, g.clone());
                    if ran < conf.min_runtime_ms {
                        young.insert(key.clone());
                    }
                    let cand = gangs.entry(key).or_insert_with(|| Candidate {
                        app: app_id,
                        gang: Some(g.clone()),
                        containers: Vec::new(),
                        total: Resource::zero(),
                        lost_gpu_ms: 0,
                        shrink: None,
                        whole_app: false,
                    });
                    cand.total.add_assign(&c.resource);
                    cand.lost_gpu_ms = cand.lost_gpu_ms.saturating_add(lost);
                    cand.containers.push(entry);
                }
                None if ran >= conf.min_runtime_ms => out.push(Candidate {
                    app: app_id,
                    gang: None,
                    containers: vec![entry],
                    total: c.resource.clone(),
                    lost_gpu_ms: lost,
                    shrink: None,
                    whole_app: false,
                }),
                None => {}
            }
        }
        // A gang whose any member is too young (it was just re-granted) is left alone. An
        // elastic gang above its minimum gives its extra members first, by shrinking.
        for ((app, g), c) in gangs {
            if let Some(s) = self.shrink_candidate(&app, &g, &c) {
                out.push(s);
            }
            if !young.contains(&(app, g)) {
                out.push(c);
            }
        }
        out
    }

    /// Each application whole with its AM: the last resort, [`Candidate::whole_app`].
    fn whole_app_candidates(
        &self,
        live: &[(&App, Vec<&RmContainer>)],
        conf: &PreemptionConf,
        now: u64,
    ) -> Vec<Candidate> {
        live.iter()
            .filter_map(|(app, cs)| self.whole_app_candidate(app, cs, conf, now))
            .collect()
    }

    /// An elastic gang's members above its smallest legal size, newest first, as a unit the
    /// monitor takes by shrinking (not while a resize is under way).
    fn shrink_candidate(
        &self,
        app: &ApplicationId,
        g: &str,
        whole: &Candidate,
    ) -> Option<Candidate> {
        let e = self.sched.gang(app, g)?.elastic.as_ref()?;
        if e.shrinking.is_some() {
            return None;
        }
        let from = whole.containers.len() as u32;
        let to = e.spec.least()?;
        if to >= from {
            return None;
        }
        let mut members = whole.containers.clone();
        members.sort_by_key(|c| std::cmp::Reverse(c.0));
        members.truncate((from - to) as usize);
        let total = members
            .iter()
            .fold(Resource::zero(), |acc, c| acc.plus(&c.2));
        Some(Candidate {
            app: *app,
            gang: Some(g.to_string()),
            containers: members,
            total,
            lost_gpu_ms: 0,
            shrink: Some((from, to)),
            whole_app: false,
        })
    }

    /// GPU-milliseconds a container would lose if taken now: since the application's last
    /// checkpoint, or since it started.
    fn lost_gpu_ms(app: &App, c: &RmContainer, now: u64) -> u64 {
        let saved = app
            .preemption
            .checkpoint
            .as_ref()
            .map_or(0, |k| k.time.min(now));
        let since = saved.max(c.allocated_time);
        (c.resource.get(GPU).max(0) as u64).saturating_mul(now.saturating_sub(since))
    }

    /// The application taken whole, its AM with every live container of its attempt (`live`,
    /// none under notice): the monitor's last resort for a guarantee. None while its AM is
    /// under notice or younger than the minimum runtime, or when it has no live AM.
    fn whole_app_candidate(
        &self,
        app: &App,
        live: &[&RmContainer],
        conf: &PreemptionConf,
        now: u64,
    ) -> Option<Candidate> {
        let am = live.iter().find(|c| c.is_am)?;
        let notices = &self.preemption.notices;
        if notices.contains_key(&am.id)
            || now.saturating_sub(am.allocated_time) < conf.min_runtime_ms
        {
            return None;
        }
        let mut cand = Candidate {
            app: app.id,
            gang: None,
            containers: Vec::new(),
            total: Resource::zero(),
            lost_gpu_ms: 0,
            shrink: None,
            whole_app: true,
        };
        for c in live.iter().filter(|c| !notices.contains_key(&c.id)) {
            cand.containers
                .push((c.id, c.node.clone(), c.resource.clone()));
            cand.total.add_assign(&c.resource);
            cand.lost_gpu_ms = cand
                .lost_gpu_ms
                .saturating_add(Self::lost_gpu_ms(app, c, now));
        }
        Some(cand)
    }

    /// Sends the notices of one decision and holds the preemptor's nodes.
    fn carry_out(&mut self, ch: Choice, cands: &[Candidate], conf: &PreemptionConf, now: u64) {
        self.preemption.counters.decisions += 1;
        if conf.observe_only {
            self.preemption.counters.observed += 1;
            return;
        }
        let deadline = now.saturating_add(conf.max_wait_before_kill_ms);
        let preemptor = self.apps.get(&ch.preemptor).map(|a| Preemptor {
            app: ch.preemptor,
            queue: a.queue.to_string(),
        });
        let mut told: BTreeSet<ApplicationAttemptId> = BTreeSet::new();
        let mut names = Vec::new();
        for i in &ch.victims {
            let Some(v) = cands.get(*i) else { continue };
            self.preemption.counters.units += 1;
            names.push(match &v.gang {
                Some(g) => format!("{} gang {g}", v.app),
                None if v.whole_app => format!("{} with its AM", v.app),
                None => v
                    .containers
                    .first()
                    .map_or(v.app.to_string(), |c| c.0.to_string()),
            });
            let shrink = v.shrink.map(|(from, to)| Shrink {
                gang: v.gang.clone().unwrap_or_default(),
                from,
                to,
            });
            if let Some(s) = &shrink {
                self.sched.elastic_shrinking(&v.app, &s.gang, s.to);
            }
            let Some(app) = self.apps.get_mut(&v.app) else {
                continue;
            };
            if shrink.is_none() {
                app.preemption.preemptions += 1;
                app.preemption.preempted_by.clone_from(&preemptor);
            }
            if let Some(att) = app.current_attempt() {
                if told.insert(att.id) {
                    self.effects.push(Effect::PreemptionNotice(att.id));
                }
            }
            for (c, _, _) in &v.containers {
                self.preemption.counters.containers_noticed += 1;
                self.preemption.notices.insert(
                    *c,
                    Notice {
                        preemptor: ch.preemptor,
                        leaf: ch.leaf,
                        reason: ch.reason,
                        notified_at: now,
                        deadline,
                        kill_at: deadline,
                        acknowledged: false,
                        killed: false,
                        shrink: shrink.clone(),
                    },
                );
            }
        }
        if let Some(g) = &ch.gang {
            if !ch.hold.is_empty() {
                self.sched.hold_for(&ch.preemptor, g, &ch.hold);
            }
        }
        if names.is_empty() {
            // Only nodes other gangs held were taken over: nobody is preempted.
            self.changed();
            return;
        }
        if let Some(app) = self.apps.get_mut(&ch.preemptor) {
            let what = ch
                .gang
                .as_ref()
                .map_or("its containers".to_string(), |g| format!("gang {g}"));
            app.set_diagnostics(
                DiagnosticsKind::Gang,
                format!(
                    "Preempting {} for {what} ({}); they are told now and killed by {} ms from now at the latest",
                    names.join(", "),
                    ch.reason.describe(),
                    conf.max_wait_before_kill_ms
                ),
            );
        }
        self.changed();
    }

    /// An AM's checkpoint report and its answer to a notice, from an allocate call.
    pub(super) fn am_report(&mut self, app_id: &ApplicationId, report: AmReport, now: u64) {
        if let Some(k) = report.checkpoint {
            if let Some(app) = self.apps.get_mut(app_id) {
                app.preemption.checkpoint = Some(k);
            }
        }
        if let Some(eta) = report.acknowledge_eta_ms {
            let at = now.saturating_add(eta);
            for (c, n) in self.preemption.notices.iter_mut() {
                if c.application_id() == *app_id && !n.killed {
                    n.acknowledged = true;
                    n.kill_at = n.deadline.min(at);
                }
            }
        }
    }

    /// The notice the application's next allocate answer carries, if any.
    pub(super) fn notice_for(&self, app_id: &ApplicationId) -> Option<PreemptionNotice> {
        let mut out = PreemptionNotice {
            containers: Vec::new(),
            resource: Resource::zero(),
            deadline: u64::MAX,
            gangs: Vec::new(),
        };
        for (c, n) in &self.preemption.notices {
            if c.application_id() != *app_id || n.shrink.is_some() {
                continue;
            }
            out.deadline = out.deadline.min(n.deadline);
            let Some(rc) = self.containers.get(c) else {
                continue;
            };
            out.containers.push(NoticedContainer {
                id: *c,
                node: rc.node.clone(),
                node_http: rc.node_http.clone(),
                gang: rc.gang.clone(),
            });
            out.resource.add_assign(&rc.resource);
            if let Some(g) = &rc.gang {
                if !out.gangs.contains(g) {
                    out.gangs.push(g.clone());
                }
            }
        }
        (!out.containers.is_empty()).then_some(out)
    }

    /// A container ended: if it was under notice, it was preempted (or given back by a
    /// shrink); account for it. Returns the exit status and diagnostics to report.
    pub(super) fn preempted_end(
        &mut self,
        c: &RmContainer,
        exit: i32,
        now: u64,
    ) -> Option<NoticeEnd> {
        let n = self.preemption.notices.remove(&c.id)?;
        if let Some(s) = &n.shrink {
            let (exit, how) = if n.killed {
                (exit_status::PREEMPTED, "killed at its deadline".to_string())
            } else {
                (exit, format!("it exited with status {exit}"))
            };
            return Some(NoticeEnd::Shrunk(
                exit,
                format!(
                    "Container given back by gang {}'s shrink from {} to {} members: {how}",
                    s.gang, s.from, s.to
                ),
            ));
        }
        if !n.killed {
            self.preemption.counters.containers_exited += 1;
        }
        let gpus = c.resource.get(GPU).max(0) as u64;
        let app_id = c.id.application_id();
        let app = self.apps.get_mut(&app_id)?;
        let saved = app
            .preemption
            .checkpoint
            .as_ref()
            .map_or(0, |k| k.time.min(now));
        let lost = gpus.saturating_mul(now.saturating_sub(saved.max(c.allocated_time)));
        let held = now.saturating_sub(c.allocated_time);
        let p = &mut app.preemption;
        if c.is_am {
            p.am_containers += 1;
        } else {
            p.containers += 1;
        }
        p.resource.add_assign(&c.resource);
        p.memory_ms += c.resource.memory_mb * held as i64;
        p.vcore_ms += c.resource.vcores * held as i64;
        p.lost_gpu_ms = p.lost_gpu_ms.saturating_add(lost);
        p.gpu_ms = p.gpu_ms.saturating_add(gpus.saturating_mul(held));
        let to_exit = now.saturating_sub(n.notified_at);
        p.last_notice_to_exit_ms = Some(to_exit);
        p.max_notice_to_exit_ms = p.max_notice_to_exit_ms.max(to_exit);
        self.preemption.counters.lost_gpu_ms =
            self.preemption.counters.lost_gpu_ms.saturating_add(lost);
        let how = if n.killed {
            "killed at its deadline".to_string()
        } else {
            format!("it exited with status {exit} before its deadline")
        };
        Some(NoticeEnd::Preempted(
            exit_status::PREEMPTED,
            format!(
                "Container preempted by scheduler for {} ({}): {how}, {to_exit} ms after its notice",
                n.preemptor,
                n.reason.describe()
            ),
        ))
    }
}
