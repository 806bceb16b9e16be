//! Time: everything that happens because time passed (AM and NM liveness, kill deadlines, unregistered AMs, expired allocations, gang timeouts), driven by the caller's clock.
//! A tick activates a due container-token key, looks at liveness, ends drains, then makes its
//! decisions (lifetimes, gang timeouts, preemption and elastic rounds, the idle-GPU policy).

use super::*;

impl RmCore {
    /// Everything time drives: liveness of nodes and AMs, allocation expiry, kill deadlines,
    /// AM exit grace, then the decisions ([`Self::tick_decisions`]).
    pub fn tick(&mut self, now: u64) {
        self.activate_container_key(now);
        self.tick_liveness(now);
        self.tick_decommissioning(now);
        self.tick_decisions(now);
    }

    /// What the scheduler decides because time passed: gang timeouts, `las` levels, the
    /// preemption monitor and its kills, then a pass. The simulator, which does not model
    /// liveness, calls this alone.
    pub fn tick_decisions(&mut self, now: u64) {
        self.sched.set_now(now);
        self.expire_lifetimes(now);
        if std::mem::take(&mut self.held_recheck) {
            self.release_held(now);
        }
        self.expire_gangs(now);
        self.sched.refresh_levels();
        self.sched.refresh_fairshare();
        self.persist_fairshare();
        self.preemption_tick(now);
        self.elastic_tick(now);
        self.idle_tick(now);
        self.cpu_tick(now);
        self.run_scheduler(now);
    }

    fn expire_gangs(&mut self, now: u64) {
        let monitor = self.monitor_acts();
        let expired = self
            .sched
            .expire_gangs(now, self.conf.gang_timeout_ms, monitor);
        for (app, id, hard, diag) in expired {
            if hard {
                let msg =
                    format!("Application {app} failed: its gang's hard timeout passed: {diag}");
                self.finish_app(
                    &app,
                    AppState::FAILED,
                    FinalApplicationStatus::FAILED,
                    Some(msg),
                    now,
                );
            } else if let Some(a) = self.apps.get_mut(&app) {
                a.set_diagnostics(DiagnosticsKind::Gang, format!("Gang {id}: {diag}"));
            }
            self.changed();
        }
    }

    /// The earliest time something may come due for `app` in the tick: its AM timing out,
    /// a recovered AM's report deadline, an unregistered AM's exit grace passing, or (at
    /// once) a kill to finish. `None`: nothing until its state changes.
    pub(super) fn app_due(&self, app: &App) -> Option<u64> {
        let mut due: Option<u64> = None;
        let mut at = |t: u64| due = Some(due.map_or(t, |d| d.min(t)));
        if app.killing_since.is_some() {
            at(0);
        }
        let att = app.current_attempt()?;
        if !app.state.is_final() {
            if let Some(t) = att.awaiting_am_until() {
                at(t.saturating_add(1));
            }
            if matches!(
                att.phase,
                AttemptPhase::Launched { report_by: None } | AttemptPhase::Running
            ) {
                at(att
                    .last_heard
                    .saturating_add(self.conf.am_expiry_ms)
                    .saturating_add(1));
            }
        }
        if let (Some(t), Some(c)) = (att.unregistered_at(), att.am_container()) {
            if self.containers.get(&c).is_some_and(RmContainer::is_live) {
                at(t.saturating_add(AM_EXIT_GRACE_MS).saturating_add(1));
            }
        }
        due
    }

    /// Arms (or re-arms) `id` in the tick's watch at [`Self::app_due`].
    pub(super) fn watch_app(&mut self, id: ApplicationId) {
        if let Some(t) = self.apps.get(&id).and_then(|a| self.app_due(a)) {
            self.am_watch.set(id, t);
        }
    }

    fn tick_liveness(&mut self, now: u64) {
        // Only nodes whose recorded heartbeat is older than the expiry are looked at; one
        // that beat since goes back in at its last heartbeat, an inactive one leaves.
        let expiry = self.conf.nm_expiry_ms;
        let mut expired_nodes: Vec<NodeId> = Vec::new();
        if let Some(cutoff) = now.checked_sub(expiry).and_then(|t| t.checked_sub(1)) {
            for (_, id) in self.node_liveness.take_until(cutoff) {
                let Some(n) = self.nodes.get(&id).filter(|n| !n.state.is_inactive()) else {
                    continue;
                };
                if now.saturating_sub(n.last_heartbeat) > expiry {
                    expired_nodes.push(id);
                } else {
                    let beat = n.last_heartbeat;
                    self.node_liveness.set(id, beat);
                }
            }
        }
        for n in expired_nodes {
            self.lose_node(&n, now);
        }
        let mut am_expired = Vec::new();
        let mut am_linger = Vec::new();
        let mut killing = Vec::new();
        let mut am_unreported = Vec::new();
        // Only applications something may have come due for are looked at, and of those
        // only the ones the scheduler still holds (a retired one is final with no live
        // container).
        let due: Vec<ApplicationId> = self
            .am_watch
            .take_until(now)
            .into_iter()
            .map(|(_, id)| id)
            .filter(|id| self.sched.apps().contains_key(id))
            .collect();
        for app in due.iter().filter_map(|id| self.apps.get(id)) {
            if app.killing_since.is_some() {
                killing.push(app.id);
            }
            if let Some(att) = app.current_attempt() {
                if att.awaiting_am_until().is_some_and(|t| now > t) && !app.state.is_final() {
                    am_unreported.push(att.id);
                }
                // A recovered attempt still waiting for its AM container is judged by its
                // own deadline above (uncounted), not by the AM liveness.
                let live_am = matches!(
                    att.phase,
                    AttemptPhase::Launched { report_by: None } | AttemptPhase::Running
                );
                if live_am
                    && !app.state.is_final()
                    && now.saturating_sub(att.last_heard) > self.conf.am_expiry_ms
                {
                    am_expired.push(att.id);
                }
                if let (Some(at), Some(c)) = (att.unregistered_at(), att.am_container()) {
                    if now.saturating_sub(at) > AM_EXIT_GRACE_MS
                        && self.containers.get(&c).is_some_and(RmContainer::is_live)
                    {
                        am_linger.push(c);
                    }
                }
            }
        }
        for a in am_unreported {
            // Most likely its node is gone: like a lost node, this does not count against
            // the application's attempts.
            let diag = format!(
                "ApplicationMaster container of {a} was not reported by any NodeManager within \
                 {} ms of the ResourceManager's restart",
                self.recovered_am_wait_ms()
            );
            self.fail_attempt(&a, diag, false, now);
        }
        for a in am_expired {
            let c = self
                .apps
                .get(&a.application_id)
                .and_then(|app| app.attempt(&a))
                .and_then(Attempt::am_container);
            if let Some(c) = c {
                self.kill_container(
                    &c,
                    exit_status::KILLED_BY_RESOURCEMANAGER,
                    "ApplicationMaster timed out".into(),
                    now,
                );
            }
            self.fail_attempt(
                &a,
                format!("ApplicationMaster for attempt {a} timed out"),
                true,
                now,
            );
        }
        for c in am_linger {
            self.kill_container(
                &c,
                exit_status::KILLED_AFTER_APP_COMPLETION,
                "ApplicationMaster did not exit after unregistering".into(),
                now,
            );
        }
        for a in killing {
            self.try_finish_kill(&a, now);
        }
        for id in due {
            self.watch_app(id);
        }
        // Only containers not yet running can expire: the oldest allocations first, and
        // the walk stops at the first that has not expired.
        let expiry = self.conf.container_alloc_expiry_ms;
        let expired: Vec<ContainerId> = self
            .awaiting_launch
            .iter()
            .take_while(|(at, _)| now.saturating_sub(*at) > expiry)
            .map(|(_, c)| *c)
            .collect();
        for c in expired {
            self.complete_container(
                &c,
                exit_status::ABORTED,
                "Container expired since it was unused".into(),
                now,
            );
        }
    }
}
