//! Work-preserving RM restart: applications re-created from the state store, and containers of earlier epochs taken back as their NMs re-register.
//!
//! Must not: start anything a restarted RM cannot prove it owns (unknown or old attempts' containers are stopped).

use super::*;

impl RmCore {
    /// Re-creates an application from the state store at RM start. A finished one is kept
    /// for the REST views. An unfinished one whose AM container was allocated keeps its
    /// attempt (YARN's work-preserving restart): active at once, in LAUNCHED until its AM
    /// registers again, with the AM liveness counted from now; it fails (not counted) only
    /// if the AM's NM re-registers without the AM container or reports it complete, or no
    /// NM reports it within the NM expiry. Any other unfinished one starts a new attempt.
    pub fn recover_app(&mut self, rec: AppRecord, now: u64) {
        let max_attempts = self.max_attempts_for(&rec.sub);
        let mut app = App {
            id: rec.id,
            sub: rec.sub,
            queue: rec.queue,
            state: rec.state,
            final_status: rec.final_status,
            diagnostics: rec.diagnostics,
            diagnostics_kind: DiagnosticsKind::Lasting,
            submit_time: rec.submit_time,
            launch_time: rec.launch_time,
            finish_time: rec.finish_time,
            submit_seq: self.next_submit_seq,
            attempts: Vec::new(),
            max_attempts,
            progress: if rec.state.is_final() { 100.0 } else { 0.0 },
            tracking_url: String::new(),
            memory_ms: rec.memory_ms,
            vcore_ms: rec.vcore_ms,
            killing_since: None,
            lifetime: rec.lifetime,
            nodes_touched: BTreeSet::new(),
            preemption: AppPreemption::default(),
            usage: rec.usage,
        };
        self.next_submit_seq += 1;
        if rec.id.cluster_timestamp == self.cluster_ts && rec.id.id >= self.next_app {
            self.next_app = rec.id.id + 1;
        }
        if rec.id.cluster_timestamp < self.cluster_ts {
            self.earlier_incarnations.insert(rec.id.cluster_timestamp);
        }
        // Keep attempt numbering going across restarts; earlier attempts are placeholders.
        for n in 1..=rec.attempts {
            app.attempts.push(Attempt::new(
                ApplicationAttemptId::new(rec.id, n),
                now,
                true,
            ));
        }
        let id = app.id;
        let unfinished = !app.state.is_final();
        if let (Some(at), true) = (app.lifetime, unfinished) {
            self.lifetimes.insert((at, id));
        }
        let leaf = self.sched.tree().leaf(&app.queue);
        // Work-preserving: an attempt whose AM container was live is taken back as it was,
        // waiting for its NM to report the AM (and its containers) and for the AM to register
        // again; only if the AM is not reported in time does a new attempt start.
        let live = rec
            .live_attempt
            .filter(|_| unfinished && leaf.is_some() && !app.sub.unmanaged_am);
        if let (Some(live), Some(last)) = (&live, app.attempts.last_mut()) {
            let mut att = Attempt::new(last.id, live.start_time, false);
            // It waits for its AM as long as an NM may stay silent and an AM may stay quiet,
            // counted from the restart: NMs still registering again after a slow start are
            // never taken for lost AMs.
            att.phase = AttemptPhase::Launched {
                report_by: Some(now + self.recovered_am_wait_ms()),
            };
            att.am = Some(AmContainer {
                id: live.am_container,
                node: live.am_node.clone(),
                node_http: live.am_node_http.clone(),
            });
            att.host = live.host.clone();
            att.rpc_port = live.rpc_port;
            att.last_heard = now;
            let diag = format!(
                "Recovered after a ResourceManager restart; waiting for attempt {} to \
                 re-register (its AM container {} on {}).",
                att.id, live.am_container, live.am_node
            );
            *last = att;
            app.tracking_url = live.tracking_url.clone();
            app.set_diagnostics(DiagnosticsKind::Recovered, diag);
        }
        let live = live.is_some() && !app.attempts.is_empty();
        if app.state.is_final() {
            self.completed.insert((app.finish_time, id));
        }
        self.apps.insert(id, app);
        self.watch_app(id);
        if unfinished {
            match leaf {
                Some(leaf) if live => {
                    // Its AM holds its container already: active at once, never "not yet
                    // activated" behind the AM limit of a cluster whose NMs are still
                    // registering again (its asks would wait, and its diagnostic lie).
                    self.admit_as(id, leaf, true, now);
                    self.persist(&id);
                }
                Some(leaf) => {
                    if let Some(a) = self.apps.get_mut(&id) {
                        a.state = AppState::ACCEPTED;
                        a.set_diagnostics(
                            DiagnosticsKind::Lasting,
                            "Recovered after a ResourceManager restart; starting a new attempt.",
                        );
                    }
                    // Its dependencies may not be recovered yet: the first tick looks again.
                    self.held_recheck = true;
                    self.admit_or_hold(id, leaf, false, now);
                    self.persist(&id);
                }
                None => {
                    let q = self
                        .apps
                        .get(&id)
                        .map(|a| a.queue.to_string())
                        .unwrap_or_default();
                    let diag = format!(
                        "Application {id} was recovered but its queue {q} no longer exists"
                    );
                    self.finish_app(
                        &id,
                        AppState::FAILED,
                        FinalApplicationStatus::FAILED,
                        Some(diag),
                        now,
                    );
                }
            }
        }
        self.changed();
    }

    /// How long a recovered attempt waits for an NM to report its AM container (or for the
    /// AM to register again) before it fails, uncounted: the longer of the NM and the AM
    /// liveness expiries.
    pub(super) fn recovered_am_wait_ms(&self) -> u64 {
        self.conf.nm_expiry_ms.max(self.conf.am_expiry_ms)
    }

    /// A node re-registered after a restart: every recovered attempt still waiting for its
    /// AM container on that node, which the node did not report, fails now (not counted:
    /// the AM is gone, most likely its start never reached the NM before the RM died).
    pub(super) fn fail_absent_recovered_ams(&mut self, node: &NodeId, now: u64) {
        let absent: Vec<(ApplicationAttemptId, ContainerId)> = self
            .sched
            .apps()
            .keys()
            .filter_map(|id| self.apps.get(id))
            .filter(|a| !a.state.is_final())
            .filter_map(App::current_attempt)
            .filter(|att| att.awaiting_am_until().is_some() && att.am_node() == Some(node))
            .filter_map(|att| att.am_container().map(|c| (att.id, c)))
            .filter(|(_, c)| !self.containers.contains_key(c))
            .collect();
        for (attempt, c) in absent {
            if let Some(att) = self
                .apps
                .get_mut(&attempt.application_id)
                .and_then(|a| a.attempt_mut(&attempt))
            {
                if let AttemptPhase::Launched { report_by } = &mut att.phase {
                    *report_by = None;
                }
            }
            self.watch_app(attempt.application_id);
            let diag = format!(
                "ApplicationMaster container {c} of {attempt} was not reported by its \
                 NodeManager {node} when it registered again after the ResourceManager's restart"
            );
            self.fail_attempt(&attempt, diag, false, now);
        }
    }

    /// The current attempt of a live application, if `cid` was allocated to it by an
    /// earlier incarnation of this RM (a lower epoch) and this RM does not know it: a
    /// container to take back after a restart.
    pub(super) fn previous_epoch_attempt(&self, cid: &ContainerId) -> Option<ApplicationAttemptId> {
        if cid.epoch >= self.epoch || self.containers.contains_key(cid) {
            return None;
        }
        let app = self.apps.get(&cid.application_id())?;
        let att = app.current_attempt()?;
        // Its own, or one an earlier attempt passed on (keep-containers): never an earlier
        // attempt's AM (an AM whose attempt failed while its NM was away is stopped, not
        // kept as a worker of the next attempt).
        let old_am = app
            .attempts
            .iter()
            .any(|a| a.id != att.id && a.am_container() == Some(*cid));
        let ours = att.id == cid.attempt_id
            || (app.sub.keep_containers
                && cid.attempt_id.attempt_id < att.id.attempt_id
                && !old_am);
        let live = !app.state.is_final()
            && ours
            && matches!(
                att.phase,
                AttemptPhase::Allocated | AttemptPhase::Launched { .. } | AttemptPhase::Running
            );
        live.then_some(att.id)
    }

    /// Takes back a running container an NM reports that an earlier incarnation of this RM
    /// allocated to a still-live attempt: it is accounted on its node, queue and user again,
    /// and if it is the attempt's AM container the attempt stops waiting for it. False (the
    /// NM is told to stop it) when it belongs to no live attempt or no longer fits the node.
    pub(super) fn recover_container(
        &mut self,
        node: &NodeId,
        r: &ReportedContainer,
        now: u64,
    ) -> bool {
        let Some(attempt) = self.previous_epoch_attempt(&r.id) else {
            return false;
        };
        let app_id = attempt.application_id;
        let fits = self
            .sched
            .node(node)
            .is_some_and(|n| r.resource.fits_in(&n.free));
        let Some(n) = self.nodes.get_mut(node).filter(|_| fits) else {
            return false;
        };
        let node_http = n.http_address.clone();
        n.containers.insert(r.id);
        let Some(app) = self.apps.get_mut(&app_id) else {
            return false;
        };
        app.nodes_touched.insert(node.clone());
        if attempt.attempt_id != r.id.attempt_id.attempt_id {
            // Kept from an earlier attempt: listed by its own (placeholder) attempt, held by
            // the current one.
            if let Some(own) = app.attempt_mut(&r.id.attempt_id) {
                own.containers.insert(r.id);
            }
        }
        let Some(att) = app.current_attempt_mut() else {
            return false;
        };
        if att.id == r.id.attempt_id {
            att.containers.insert(r.id);
        } else {
            att.inherited.insert(r.id);
        }
        let is_am = att.am_container() == Some(r.id);
        if let (true, AttemptPhase::Launched { report_by }) = (is_am, &mut att.phase) {
            *report_by = None;
            self.watch_app(app_id);
        }
        self.running_on
            .entry(node.clone())
            .or_default()
            .insert(r.id);
        self.containers.insert(
            r.id,
            RmContainer {
                id: r.id,
                node: node.clone(),
                node_http,
                resource: r.resource.clone(),
                priority: if is_am { AM_PRIORITY } else { 0 },
                allocation_request_id: -1,
                is_am,
                gang: None,
                state: RmContainerState::RUNNING,
                allocated_time: now,
                start_time: now,
                finish_time: 0,
                exit_status: exit_status::INVALID,
                diagnostics: String::new(),
                version: 0,
                token_from: now,
                tags: Vec::new(),
                partition: String::new(),
            },
        );
        self.sched.charge(&app_id, node, &r.resource);
        self.counters.containers_recovered += 1;
        self.changed();
        true
    }

    /// A container of a live attempt that ended while this RM was down (allocated by an
    /// earlier incarnation): its AM is told, once.
    pub(super) fn report_recovered_completion(&mut self, r: &ReportedContainer, now: u64) {
        let Some(attempt) = self.previous_epoch_attempt(&r.id) else {
            return;
        };
        let Some(att) = self
            .apps
            .get_mut(&attempt.application_id)
            .and_then(App::current_attempt_mut)
        else {
            return;
        };
        if att.am_container() == Some(r.id) {
            // The AM ended while the RM was down: its attempt fails now (counted as an AM
            // exit normally is), rather than waiting out the NM expiry for an AM that is gone.
            let counts = !matches!(
                r.exit_status,
                exit_status::ABORTED
                    | exit_status::PREEMPTED
                    | exit_status::DISKS_FAILED
                    | exit_status::KILLED_BY_RESOURCEMANAGER
            );
            let diag = format!(
                "AM Container for {attempt} exited with  exitCode: {} while the ResourceManager \
                 was down\nFailing this attempt.Diagnostics: {}",
                r.exit_status, r.diagnostics
            );
            if let AttemptPhase::Launched { report_by } = &mut att.phase {
                *report_by = None;
            }
            self.fail_attempt(&attempt, diag, counts, now);
            return;
        }
        if !att.containers.insert(r.id) {
            return;
        }
        att.to_report.push(CompletedContainer {
            container_id: r.id,
            state: ContainerState::COMPLETE,
            exit_status: r.exit_status,
            diagnostics: r.diagnostics.clone(),
            gang_id: None,
        });
        self.changed();
    }
}
