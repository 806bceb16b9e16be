//! Elastic gangs' lifecycle: the doubling policy's rounds (every
//! `spindle.elastic.monitoring-interval-ms`, driven by `tick`), growth handed to the AM as
//! offers (the members are allocated containers, in `allocatedContainers` too; an offer is
//! told once), shrinking
//! asked of the AM as demands through the preemption protocol (a notice per member, with a
//! deadline, honouring the AM's acknowledgement; what is left at the deadline is killed with
//! -102), and the members the AM gives back. The decisions are the scheduler's
//! ([`scheduler::elastic_policy`]); this module carries them out.

use super::*;
use preemption::{Notice, Shrink};
pub use scheduler::elastic_policy::{ElasticConf, Resize};

/// An offer the AM's next allocate answer carries (once).
#[derive(Debug, Clone, PartialEq)]
pub struct ResizeOfferView {
    pub gang: String,
    pub from: u32,
    pub to: u32,
    pub containers: Vec<ContainerId>,
}

/// A shrink the AM's allocate answers carry until its members are gone.
#[derive(Debug, Clone, PartialEq)]
pub struct ResizeDemandView {
    pub gang: String,
    pub from: u32,
    pub to: u32,
    pub containers: Vec<ContainerId>,
    pub deadline: u64,
}

/// What the elastic policy has done since the RM started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ElasticCounters {
    pub rounds: u64,
    pub grows: u64,
    pub shrinks: u64,
    pub members_offered: u64,
    pub members_demanded: u64,
    /// Offered members the AM released unused.
    pub members_declined: u64,
}

#[derive(Debug, Clone, Default)]
pub struct ElasticState {
    pub next_round_at: u64,
    pub counters: ElasticCounters,
}

impl RmCore {
    pub fn elastic(&self) -> &ElasticState {
        &self.elastic
    }

    /// Once per monitoring interval: the doubling policy's round, carried out.
    pub(super) fn elastic_tick(&mut self, now: u64) {
        if now < self.elastic.next_round_at {
            return;
        }
        let conf = self.conf.elastic.clone();
        self.elastic.next_round_at = now.saturating_add(conf.monitoring_interval_ms.max(1));
        self.elastic.counters.rounds += 1;
        for r in self.sched.elastic_round(&conf, now) {
            match r {
                Resize::Grow {
                    app,
                    gang,
                    from,
                    to,
                    placements,
                } => self.offer(app, gang, from, to, placements, now),
                Resize::Shrink {
                    app,
                    gang,
                    from,
                    to,
                } => self.demand(app, gang, from, to, conf.shrink_deadline_ms, now),
            }
        }
    }

    /// A round at once (a new elastic job waits for no interval to be sized).
    pub(super) fn elastic_round_now(&mut self, now: u64) {
        self.elastic.next_round_at = 0;
        self.elastic_tick(now);
    }

    fn offer(
        &mut self,
        app: ApplicationId,
        gang: String,
        from: u32,
        to: u32,
        placements: Vec<scheduler::Placement>,
        now: u64,
    ) {
        let mut ids = Vec::new();
        for p in placements {
            match self.allocate_container(&p, now) {
                Some(c) => ids.push(c),
                None => self.sched.release(&p.app, &p.node, &p.resource),
            }
        }
        self.elastic.counters.grows += 1;
        self.elastic.counters.members_offered += ids.len() as u64;
        let Some(a) = self.apps.get_mut(&app) else {
            return;
        };
        a.set_diagnostics(
            DiagnosticsKind::Gang,
            format!("Gang {gang} offered growth from {from} to {to} members"),
        );
        if let Some(att) = a.current_attempt_mut() {
            if att.to_deliver.is_empty() {
                self.effects.push(Effect::ContainersAllocated(att.id));
            }
            att.to_deliver.extend(ids.iter().copied());
            att.offers.push(ResizeOfferView {
                gang,
                from,
                to,
                containers: ids,
            });
        }
        self.changed();
    }

    /// Asks the AM to give back `from - to` members: those on nodes another gang holds
    /// first, then those on the nodes where the gang has fewest members, newest first.
    fn demand(
        &mut self,
        app: ApplicationId,
        gang: String,
        from: u32,
        to: u32,
        deadline_ms: u64,
        now: u64,
    ) {
        let members: Vec<ContainerId> = self
            .sched
            .gang(&app, &gang)
            .map(|g| g.members.clone())
            .unwrap_or_default();
        let live: Vec<(ContainerId, NodeId)> = members
            .iter()
            .filter_map(|c| self.containers.get(c).filter(|x| x.is_live()))
            .filter(|c| !self.preemption.notices.contains_key(&c.id))
            .map(|c| (c.id, c.node.clone()))
            .collect();
        let mut on_node: BTreeMap<&NodeId, usize> = BTreeMap::new();
        for (_, n) in &live {
            *on_node.entry(n).or_default() += 1;
        }
        let held_by_other = |n: &NodeId| {
            let idx = self.sched.nodes();
            idx.slot(n)
                .and_then(|s| idx.reserved_by(s))
                .is_some_and(|h| h.0 != app || h.1 != gang)
        };
        let mut order: Vec<(bool, usize, std::cmp::Reverse<ContainerId>)> = live
            .iter()
            .map(|(c, n)| {
                (
                    !held_by_other(n),
                    on_node.get(n).copied().unwrap_or(0),
                    std::cmp::Reverse(*c),
                )
            })
            .collect();
        order.sort();
        let k = from.saturating_sub(to) as usize;
        let chosen: Vec<ContainerId> = order.into_iter().take(k).map(|x| x.2 .0).collect();
        let deadline = now.saturating_add(deadline_ms);
        let leaf = self.sched.app(&app).map(|a| a.queue);
        self.elastic.counters.shrinks += 1;
        self.elastic.counters.members_demanded += chosen.len() as u64;
        for c in &chosen {
            self.preemption.notices.insert(
                *c,
                Notice {
                    preemptor: app,
                    leaf: leaf.unwrap_or_default(),
                    reason: scheduler::victims::Reason::Elastic,
                    notified_at: now,
                    deadline,
                    kill_at: deadline,
                    acknowledged: false,
                    killed: false,
                    shrink: Some(Shrink {
                        gang: gang.clone(),
                        from,
                        to,
                    }),
                },
            );
        }
        if let Some(a) = self.apps.get_mut(&app) {
            a.set_diagnostics(
                DiagnosticsKind::Gang,
                format!(
                    "Gang {gang} asked to shrink from {from} to {to} members by {deadline_ms} ms from now (work waits in its queue)"
                ),
            );
            if let Some(att) = a.current_attempt() {
                self.effects.push(Effect::PreemptionNotice(att.id));
            }
        }
        self.changed();
    }

    /// The shrinks the application's next allocate answer carries.
    pub(super) fn demands_for(&self, app_id: &ApplicationId) -> Vec<ResizeDemandView> {
        let mut out: Vec<ResizeDemandView> = Vec::new();
        for (c, n) in &self.preemption.notices {
            let Some(s) = n.shrink.as_ref().filter(|_| c.application_id() == *app_id) else {
                continue;
            };
            match out.iter_mut().find(|d| d.gang == s.gang) {
                Some(d) => {
                    d.containers.push(*c);
                    d.deadline = d.deadline.min(n.deadline);
                }
                None => out.push(ResizeDemandView {
                    gang: s.gang.clone(),
                    from: s.from,
                    to: s.to,
                    containers: vec![*c],
                    deadline: n.deadline,
                }),
            }
        }
        out
    }

    /// The AM released a member of an elastic gang: the gang goes on without it (a member
    /// never started was an offer declined).
    pub(super) fn elastic_release(&mut self, c: &ContainerId) {
        let Some(rc) = self.containers.get(c).filter(|x| x.is_live()) else {
            return;
        };
        let Some(g) = rc.gang.clone() else { return };
        let app = c.application_id();
        if self
            .sched
            .gang(&app, &g)
            .is_none_or(|x| x.elastic.is_none())
        {
            return;
        }
        let started = rc.state == RmContainerState::RUNNING;
        if !started && !self.preemption.notices.contains_key(c) {
            self.elastic.counters.members_declined += 1;
            self.sched.elastic_declined(&app, &g);
        }
        self.sched.elastic_member_gone(&app, &g, *c);
    }
}
