//! Application attempts: starting one (the AM ask), launching its AM container (the `LaunchAm` effect, after the record naming it), the launch outcome, and failing an attempt (retry or give up).

use super::*;

impl Attempt {
    pub(super) fn new(id: ApplicationAttemptId, now: u64, placeholder: bool) -> Self {
        Self {
            id,
            phase: if placeholder {
                AttemptPhase::Ended {
                    end: AttemptEnd::Failed,
                    registered: false,
                    unregistered_at: None,
                }
            } else {
                AttemptPhase::Scheduled
            },
            start_time: now,
            finish_time: if placeholder { now } else { 0 },
            am: None,
            host: String::new(),
            rpc_port: -1,
            response_id: 0,
            last_heard: now,
            next_container_seq: 0,
            containers: BTreeSet::new(),
            to_deliver: Vec::new(),
            offers: Vec::new(),
            updated: Vec::new(),
            update_errors: Vec::new(),
            pending_increases: Vec::new(),
            to_report: Vec::new(),
            sent_to_am: Vec::new(),
            unacked: BTreeMap::new(),
            diagnostics: if placeholder {
                "Attempt from before a ResourceManager restart".into()
            } else {
                String::new()
            },
            inherited: BTreeSet::new(),
        }
    }
}

impl RmCore {
    pub(super) fn start_attempt(&mut self, id: ApplicationId, now: u64) {
        let Some(app) = self.apps.get_mut(&id) else {
            return;
        };
        let n = app.attempts.len() as u32 + 1;
        let attempt = Attempt::new(ApplicationAttemptId::new(id, n), now, false);
        app.attempts.push(attempt);
        app.progress = 0.0;
        app.tracking_url.clear();
        let mut ask = Ask::new(app.sub.am_resource.clone(), 1);
        ask.is_am = true;
        // A label that went away since submission leaves the AM in the default partition.
        ask.partition = self.ask_partition(&id, None, true).unwrap_or_default();
        self.sched.set_ask(
            &id,
            AskKey {
                priority: AM_PRIORITY,
                allocation_request_id: -1,
            },
            ask,
        );
    }

    /// The current attempt of an unfinished, managed application whose AM container has
    /// been allocated and whose attempt has not ended.
    pub(super) fn live_attempt_record(app: &App) -> Option<AttemptRecord> {
        if app.state.is_final() || app.sub.unmanaged_am {
            return None;
        }
        let att = app.current_attempt()?;
        if !matches!(
            att.phase,
            AttemptPhase::Allocated | AttemptPhase::Launched { .. } | AttemptPhase::Running
        ) {
            return None;
        }
        Some(AttemptRecord {
            am_container: att.am_container()?,
            am_node: att.am_node()?.clone(),
            am_node_http: att.am_node_http().unwrap_or_default().to_string(),
            start_time: att.start_time,
            host: att.host.clone(),
            rpc_port: att.rpc_port,
            tracking_url: app.tracking_url.clone(),
        })
    }

    pub(super) fn launch_am(&mut self, app_id: &ApplicationId, container: Allocation, now: u64) {
        let rm_address = self.conf.rm_address.clone();
        let Some(app) = self.apps.get_mut(app_id) else {
            return;
        };
        let max_attempts = app.max_attempts;
        let submit_time = app.submit_time;
        let mut launch: LaunchSpec = app.sub.am_launch.clone();
        let Some(att) = app.current_attempt_mut() else {
            return;
        };
        att.phase = AttemptPhase::Allocated;
        att.am = Some(AmContainer {
            id: container.id,
            node: container.node_id.clone(),
            node_http: container.node_http_address.clone(),
        });
        att.last_heard = now;
        let attempt_id = att.id;
        let env = &mut launch.environment;
        env.insert(cenv::RM_ADDRESS.into(), rm_address);
        env.insert(
            cenv::AMRM_TOKEN.into(),
            token::issue_amrm_token(&self.keys.amrm, &attempt_id),
        );
        env.insert(cenv::APPLICATION_ATTEMPT_ID.into(), attempt_id.to_string());
        env.insert(cenv::APP_SUBMIT_TIME_ENV.into(), submit_time.to_string());
        env.insert(cenv::MAX_APP_ATTEMPTS.into(), max_attempts.to_string());
        // Durable before visible: the record naming the AM container is written before the
        // NM hears of it, so a restarted RM knows every AM an NM may be running.
        self.persist(app_id);
        self.effects.push(Effect::LaunchAm {
            attempt: attempt_id,
            container: container.id,
            node_http: container.node_http_address.clone(),
            container_token: container.container_token,
            launch,
        });
    }

    /// The driver's report on an AM launch.
    pub fn am_launched(
        &mut self,
        attempt_id: &ApplicationAttemptId,
        container: &ContainerId,
        result: Result<(), String>,
        now: u64,
    ) {
        let app_id = attempt_id.application_id;
        let current = self
            .apps
            .get(&app_id)
            .and_then(App::current_attempt)
            .map(|a| a.id);
        if current != Some(*attempt_id) {
            return;
        }
        match result {
            Ok(()) => {
                if let Some(app) = self.apps.get_mut(&app_id) {
                    if app.launch_time == 0 {
                        app.launch_time = now;
                    }
                    if let Some(att) = app.current_attempt_mut() {
                        if att.phase == AttemptPhase::Allocated {
                            att.phase = AttemptPhase::Launched { report_by: None };
                        }
                        att.last_heard = now;
                    }
                }
                self.watch_app(app_id);
            }
            Err(diag) => {
                let diag = format!("Error launching {attempt_id}. Got exception: {diag}");
                self.complete_container(container, exit_status::INVALID, diag, now);
            }
        }
        self.changed();
    }

    pub(super) fn fail_attempt(
        &mut self,
        attempt: &ApplicationAttemptId,
        diag: String,
        counts: bool,
        now: u64,
    ) {
        let app_id = attempt.application_id;
        let Some(app) = self.apps.get_mut(&app_id) else {
            return;
        };
        if app.state.is_final() || app.killing_since.is_some() {
            return;
        }
        let Some(att) = app.attempt_mut(attempt) else {
            return;
        };
        if att.is_ended() {
            return;
        }
        att.end(AttemptEnd::Failed);
        att.finish_time = now;
        att.diagnostics = diag.clone();
        att.to_deliver.clear();
        att.offers.clear();
        if !counts {
            app.max_attempts += 1;
        }
        let failed_so_far = app.attempts.len() as u32;
        let max = app.max_attempts;
        let keep = app.sub.keep_containers && failed_so_far < max;
        self.sched.clear_asks(&app_id);
        // Its own containers and those it inherited, still live.
        let live: Vec<ContainerId> = self
            .apps
            .get(&app_id)
            .and_then(|a| a.attempt(attempt))
            .map(|a| {
                a.containers
                    .iter()
                    .chain(a.inherited.iter())
                    .copied()
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
            .into_iter()
            .filter(|c| self.containers.get(c).is_some_and(RmContainer::is_live))
            .collect();
        let mut kept = BTreeSet::new();
        for c in live {
            // YARN's keep-containers-across-application-attempts: the work survives its AM.
            if keep && self.containers.get(&c).is_some_and(|x| !x.is_am) {
                kept.insert(c);
                continue;
            }
            self.kill_container(
                &c,
                exit_status::KILLED_BY_RESOURCEMANAGER,
                "Container of a failed attempt".into(),
                now,
            );
        }
        if failed_so_far < max {
            if let Some(app) = self.apps.get_mut(&app_id) {
                app.state = AppState::ACCEPTED;
                app.set_diagnostics(
                    DiagnosticsKind::Lasting,
                    format!("{diag}\nStarting attempt {} of {max}.", failed_so_far + 1),
                );
            }
            self.start_attempt(app_id, now);
            if let Some(next) = self
                .apps
                .get_mut(&app_id)
                .and_then(App::current_attempt_mut)
            {
                next.inherited = kept;
            }
            self.persist(&app_id);
            self.run_scheduler(now);
        } else {
            let msg = format!(
                "Application {app_id} failed {failed_so_far} times (global limit ={}; local limit is ={max}) due to {diag}\n. Failing the application.",
                self.conf.am_max_attempts
            );
            self.finish_app(
                &app_id,
                AppState::FAILED,
                FinalApplicationStatus::FAILED,
                Some(msg),
                now,
            );
        }
        self.changed();
    }
}
