//! `sanity_check`: the accounting invariants every step must keep, for tests and the simulator.

use super::*;

impl RmCore {
    /// The invariants every step must keep: no node over-allocated, node and app usage
    /// equal the sum of their live containers, every live container belongs to one app's
    /// attempt and one node.
    pub fn sanity_check(&self) -> Result<(), String> {
        self.sched.check()?;
        self.check_decommissioning()?;
        let mut node_use: BTreeMap<&NodeId, Resource> = BTreeMap::new();
        let mut app_use: BTreeMap<ApplicationId, Resource> = BTreeMap::new();
        for (id, n) in self.nodes.iter().filter(|(_, n)| !n.state.is_inactive()) {
            if self
                .node_liveness
                .get(id)
                .is_none_or(|t| t > n.last_heartbeat)
            {
                return Err(format!(
                    "active node {id} (last heartbeat {}) is watched for liveness at {:?}",
                    n.last_heartbeat,
                    self.node_liveness.get(id)
                ));
            }
        }
        for app in self.sched.apps().keys().filter_map(|id| self.apps.get(id)) {
            if let Some(due) = self.app_due(app) {
                if self.am_watch.get(&app.id).is_none_or(|t| t > due) {
                    return Err(format!(
                        "application {} has something due at {due} but is watched at {:?}",
                        app.id,
                        self.am_watch.get(&app.id)
                    ));
                }
            }
        }
        let mut running: BTreeMap<NodeId, BTreeSet<ContainerId>> = BTreeMap::new();
        for c in self
            .containers
            .values()
            .filter(|c| c.state == RmContainerState::RUNNING)
        {
            running.entry(c.node.clone()).or_default().insert(c.id);
        }
        if running != self.running_on {
            return Err(format!(
                "{} nodes run containers, but the running index lists {}",
                running.len(),
                self.running_on.len()
            ));
        }
        let awaiting: BTreeSet<(u64, ContainerId)> = self
            .containers
            .values()
            .filter(|c| {
                matches!(
                    c.state,
                    RmContainerState::ALLOCATED | RmContainerState::ACQUIRED
                )
            })
            .map(|c| (c.allocated_time, c.id))
            .collect();
        if awaiting != self.awaiting_launch {
            return Err(format!(
                "{} containers are allocated and not yet running, but the expiry index holds {}",
                awaiting.len(),
                self.awaiting_launch.len()
            ));
        }
        for c in self.containers.values().filter(|c| c.is_live()) {
            let app = self
                .apps
                .get(&c.id.application_id())
                .ok_or_else(|| format!("{} has no app", c.id))?;
            let att = app
                .attempt(&c.id.attempt_id)
                .ok_or_else(|| format!("{} has no attempt", c.id))?;
            if !att.containers.contains(&c.id) {
                return Err(format!("{} not listed by its attempt", c.id));
            }
            let node = self
                .nodes
                .get(&c.node)
                .ok_or_else(|| format!("{} on unknown node {}", c.id, c.node))?;
            if !node.containers.contains(&c.id) {
                return Err(format!("{} not listed by node {}", c.id, c.node));
            }
            node_use.entry(&c.node).or_default().add_assign(&c.resource);
            app_use
                .entry(c.id.application_id())
                .or_default()
                .add_assign(&c.resource);
        }
        for n in self.sched.nodes().iter() {
            let id = &n.id;
            let expect = node_use.get(id).cloned().unwrap_or_default();
            if n.used != expect {
                return Err(format!(
                    "node {id} accounts {} but its containers sum to {expect}",
                    n.used
                ));
            }
        }
        for (id, a) in self.sched.apps() {
            let expect = app_use.get(id).cloned().unwrap_or_default();
            if a.used != expect {
                return Err(format!(
                    "app {id} accounts {} but its containers sum to {expect}",
                    a.used
                ));
            }
        }
        self.check_app_states()?;
        for (id, n) in &self.nodes {
            if n.state.is_inactive() && !n.containers.is_empty() {
                return Err(format!("inactive node {id} still holds containers"));
            }
        }
        let finals: BTreeSet<(u64, ApplicationId)> = self
            .apps
            .values()
            .filter(|a| a.state.is_final())
            .map(|a| (a.finish_time, a.id))
            .collect();
        if finals != self.completed {
            return Err(format!(
                "the eviction index holds {} final applications, the table {}",
                self.completed.len(),
                finals.len()
            ));
        }
        Ok(())
    }

    /// An application's state, its scheduler activation and its diagnostic agree: an
    /// attempt whose AM container is allocated belongs to an active application, and the
    /// "not yet activated" diagnostic belongs only to an ACCEPTED application that is not.
    fn check_app_states(&self) -> Result<(), String> {
        for (id, s) in self.sched.apps() {
            let Some(app) = self.apps.get(id) else {
                continue;
            };
            let am_live = app
                .current_attempt()
                .is_some_and(|a| !a.is_ended() && !matches!(a.phase, AttemptPhase::Scheduled));
            if am_live && !s.active && !app.state.is_final() {
                return Err(format!(
                    "app {id} has an AM container but is not activated in the scheduler"
                ));
            }
            if app.diagnostics_kind == DiagnosticsKind::NotActivated && s.active {
                return Err(format!(
                    "app {id} is active but its diagnostic says it is not: {}",
                    app.diagnostics
                ));
            }
        }
        for (id, app) in &self.apps {
            if app.diagnostics_kind == DiagnosticsKind::NotActivated
                && app.state != AppState::ACCEPTED
            {
                return Err(format!(
                    "app {id} is {} but its diagnostic says it is not activated: {}",
                    app.state, app.diagnostics
                ));
            }
        }
        Ok(())
    }
}
