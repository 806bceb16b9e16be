//! Applications: ids, submission (queue mapping, placement, limits, admission), kill, finishing, retirement of completed applications, and the state-store record (`persist`).
//! An application's lifetime (YARN's `LIFETIME` timeout) is kept here and enforced by the tick.
//!
//! Must not: talk to nodes or AMs directly (containers go through `containers`, attempts through `attempts`).

use super::*;
use scheduler::QueueIdx;

/// YARN's diagnostic for an application killed at the end of its lifetime.
pub const LIFETIME_EXCEEDED: &str =
    "Application is killed by ResourceManager as it has exceeded the lifetime period.";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillOutcome {
    /// The application is (now or already) in a final state.
    Done(AppState),
    /// Containers are being stopped; ask again.
    InProgress,
}

impl RmCore {
    /// `POST /apps/new-application`: reserves the next id.
    pub fn new_application(&mut self) -> ApplicationId {
        let id = ApplicationId::new(self.cluster_ts, self.next_app);
        self.next_app += 1;
        id
    }

    pub(super) fn max_attempts_for(&self, sub: &Submission) -> u32 {
        let global = self.conf.am_max_attempts.max(1);
        if sub.max_app_attempts == 0 {
            global
        } else {
            sub.max_app_attempts.min(global)
        }
    }

    /// The largest container the scheduler grants now: the configured maximum, capped per type
    /// by the largest active node (YARN's rule), or the configured maximum while no node is
    /// active.
    pub fn max_allocation(&self) -> Resource {
        let conf = &self.conf.max_allocation;
        let nodes = self.sched.nodes();
        if nodes.schedulable_count() == 0 {
            return conf.clone();
        }
        let largest = &nodes.largest;
        let mut out = Resource::zero();
        for (k, v) in conf.entries() {
            out.set(k, v.min(largest.get(k)));
        }
        out
    }

    /// The maximum allocation in a leaf: the cluster's, lowered by the queue's own
    /// `maximum-allocation-mb` / `-vcores`.
    pub(super) fn max_allocation_in(&self, leaf: Option<QueueIdx>) -> Resource {
        let mut max = self.max_allocation();
        if let Some(q) = leaf.and_then(|l| self.sched.tree().get(l)) {
            if let Some(qm) = &q.spec.max_allocation {
                for (k, v) in qm.entries() {
                    if v > 0 && v < max.get(k) {
                        max.set(k, v);
                    }
                }
            }
        }
        max
    }

    /// Normalizes an ask up to the minimum allocation (memory to a multiple of it) and
    /// checks it against the maximum of the cluster (and of the leaf, when given).
    pub fn normalize(&self, r: &Resource) -> Result<Resource, CoreError> {
        self.normalize_in(r, None)
    }

    pub(super) fn normalize_in(
        &self,
        r: &Resource,
        leaf: Option<QueueIdx>,
    ) -> Result<Resource, CoreError> {
        if r.any_negative() {
            return Err(CoreError::NegativeResource(Box::new(r.clone())));
        }
        let mut n = r.clone();
        let step = self.conf.min_allocation.memory_mb.max(1);
        // Saturating: an absurd ask is refused below (over the maximum), never an overflow.
        n.memory_mb = r.memory_mb.max(step).saturating_add(step - 1) / step * step;
        n.vcores = r.vcores.max(self.conf.min_allocation.vcores);
        let max = &self.max_allocation_in(leaf);
        for (name, v) in n.entries() {
            let limit = max.get(name);
            let bounded = name == "memory-mb" || name == "vcores" || limit > 0;
            if (bounded && v > limit)
                || (!bounded
                    && v > 0
                    && self.sched.cluster().get(name) == 0
                    && !self.sched.nodes().is_empty())
            {
                return Err(CoreError::OverMaximumAllocation {
                    resource_type: name.to_string(),
                    requested: Box::new(r.clone()),
                    max: Box::new(max.clone()),
                });
            }
        }
        Ok(n)
    }

    /// Applies `queue-mappings` (first match wins) to the queue an application named.
    pub fn mapped_queue(&self, sub: &Submission) -> String {
        let conf = self.sched.conf();
        let named = sub.queue.as_str();
        if conf.queue_mappings.is_empty()
            || (named != "default" && named != "root.default" && !conf.queue_mappings_override)
        {
            return named.to_string();
        }
        for m in &conf.queue_mappings {
            match m {
                QueueMapping::User { user, queue } if user == "%user" || *user == sub.user => {
                    let tree = self.sched.tree();
                    let secondary = sub.groups.iter().skip(1);
                    // `<parent>.%user`: the user's leaf under the queue named after the group.
                    let under = |g: &String| {
                        let parent = tree.find(g).filter(|p| !tree.queues[*p].is_leaf())?;
                        let path = format!("{}.{}", tree.queues[parent].spec.path, sub.user);
                        tree.leaf(&path).map(|_| path)
                    };
                    let q = match queue.as_str() {
                        "%user" => Some(sub.user.clone()),
                        "%primary_group" => sub.groups.first().cloned(),
                        // YARN: the first secondary group that names an existing leaf.
                        "%secondary_group" => {
                            secondary.clone().find(|g| tree.leaf(g).is_some()).cloned()
                        }
                        "%primary_group.%user" => sub.groups.first().and_then(under),
                        "%secondary_group.%user" => secondary.clone().find_map(under),
                        q => Some(q.to_string()),
                    };
                    if let Some(q) = q {
                        return q;
                    }
                }
                QueueMapping::Group { group, queue } if sub.groups.iter().any(|g| g == group) => {
                    return queue.clone();
                }
                _ => {}
            }
        }
        named.to_string()
    }

    /// The leaf an application goes to, or YARN's diagnostic for why it may not.
    pub(super) fn place(&self, id: &ApplicationId, sub: &Submission) -> Result<QueueIdx, String> {
        let tree = self.sched.tree();
        let conf = self.sched.conf();
        let queue = self.mapped_queue(sub);
        let Some(idx) = tree.find(&queue) else {
            return Err(format!(
                "Application {id} submitted by user {} to unknown queue: {queue}",
                sub.user
            ));
        };
        if !tree.queues[idx].is_leaf() {
            return Err(format!(
                "Application {id} submitted by user {} to non-leaf queue: {queue}",
                sub.user
            ));
        }
        if let Some(stopped) = tree
            .path_up(idx)
            .find(|q| tree.queues[*q].spec.state == QueueState::Stopped)
        {
            return Err(format!(
                "Queue {} is STOPPED. Cannot accept submission of application: {id}",
                tree.queues[stopped].spec.path
            ));
        }
        let path = &tree.queues[idx].spec.path;
        if conf.acl_enabled
            && !tree.acl_allows(idx, &sub.user, &sub.groups, false)
            && !conf.admin_acl.allows(&sub.user, &sub.groups)
        {
            return Err(format!(
                "org.apache.hadoop.security.AccessControlException: User {} does not have permission to submit {id} to queue {path}",
                sub.user
            ));
        }
        let q = &tree.queues[idx];
        let (max_apps, max_per_user) = self.app_limits(idx);
        if q.apps.len() as u64 >= u64::from(max_apps) {
            return Err(format!("Queue {path} already has {} applications, cannot accept submission of application: {id}", q.apps.len()));
        }
        // The queue's per-user counts cover exactly its applications (pending and active).
        let from_user = q
            .users
            .get(&sub.user)
            .map_or(0, |u| u.active_apps + u.pending_apps);
        if from_user as u64 >= u64::from(max_per_user) {
            return Err(format!(
                "Queue {path} already has {from_user} applications from user {} cannot accept submission of application: {id}",
                sub.user
            ));
        }
        Ok(idx)
    }

    /// YARN's `maxApplications` of a leaf (its own, else the system-wide figure scaled by its
    /// absolute capacity) and `maxApplicationsPerUser`.
    pub(super) fn app_limits(&self, leaf: QueueIdx) -> (u32, u32) {
        let q = &self.sched.tree().queues[leaf];
        let max = q.spec.max_applications.unwrap_or_else(|| {
            (f64::from(self.sched.conf().max_applications)
                * (if q.abs_capacity > 0.0 {
                    q.abs_capacity
                } else {
                    q.abs_max_capacity
                })
                / 100.0)
                .floor()
                .max(1.0) as u32
        });
        let ulf = if q.spec.user_limit_factor < 0.0 {
            1.0
        } else {
            q.spec.user_limit_factor
        };
        let per_user = (f64::from(max) * q.spec.minimum_user_limit_percent / 100.0 * ulf)
            .floor()
            .clamp(1.0, f64::from(max)) as u32;
        (max, per_user)
    }

    /// Registers an accepted application with the scheduler and starts attempts for every
    /// application that activates as a result.
    pub(super) fn admit(&mut self, id: ApplicationId, leaf: QueueIdx, now: u64) {
        self.admit_as(id, leaf, false, now);
    }

    /// [`Self::admit`]; `running` (a recovered application whose AM container is live) is
    /// active at once, whatever the AM limit: its AM already holds its container.
    pub(super) fn admit_as(&mut self, id: ApplicationId, leaf: QueueIdx, running: bool, now: u64) {
        let Some(app) = self.apps.get(&id) else {
            return;
        };
        let tags = app.sub.tags.iter().cloned().collect();
        // The application's tags must be known before its AM is placed.
        let activated = self.sched.add_app(
            id,
            leaf,
            &app.sub.user.clone(),
            app.sub.priority,
            app.submit_seq,
            app.sub.am_resource.clone(),
        );
        self.sched.set_app_tags(&id, tags);
        if running {
            self.sched.activate_now(&id);
        }
        self.start_activated(activated, now);
        if let Some(reason) = self.sched.waiting_reason(&id) {
            if let Some(a) = self.apps.get_mut(&id) {
                a.set_diagnostics(DiagnosticsKind::NotActivated, reason);
            }
        }
    }

    pub(super) fn start_activated(&mut self, activated: Vec<ApplicationId>, now: u64) {
        for a in activated {
            // Never two live attempts: a recovered application whose AM still runs needs
            // no new one.
            let live = self
                .apps
                .get(&a)
                .and_then(App::current_attempt)
                .is_some_and(|att| !att.is_ended());
            if let Some(app) = self.apps.get_mut(&a) {
                app.clear_diagnostics(DiagnosticsKind::NotActivated);
            }
            if live {
                continue;
            }
            self.start_attempt(a, now);
            self.persist(&a);
        }
    }

    /// `POST /apps`. Validation errors are answered to the client; queue problems end the
    /// application as FAILED with YARN's diagnostic, as YARN does. Idempotent by id
    /// (`resubmission`): the same submission again changes nothing and is accepted.
    pub fn submit(
        &mut self,
        id: ApplicationId,
        mut sub: Submission,
        now: u64,
    ) -> Result<(), CoreError> {
        if let Some(app) = self.apps.get(&id) {
            return match self.resubmission_differs(app, &sub) {
                None => Ok(()),
                Some(field) => Err(CoreError::DuplicateApp { app: id, field }),
            };
        }
        if !self.issued(&id) {
            return Err(CoreError::AppIdNotIssued(id));
        }
        if sub.unmanaged_am {
            return Err(CoreError::UnmanagedAm);
        }
        if sub.am_launch.commands.iter().all(|c| c.trim().is_empty()) {
            return Err(CoreError::EmptyAmCommand);
        }
        self.check_dependencies(&id, &sub.dependencies)?;
        let placed = self.place(&id, &sub);
        sub.am_resource = self.normalize_in(&sub.am_resource, placed.as_ref().ok().copied())?;
        let max_prio = self.sched.conf().max_application_priority.max(0);
        if sub.priority == 0 {
            if let Ok(leaf) = placed {
                sub.priority = self.sched.tree().queues[leaf]
                    .spec
                    .default_application_priority;
            }
        }
        sub.priority = sub.priority.clamp(0, max_prio);
        let max_attempts = self.max_attempts_for(&sub);
        let queue = match &placed {
            Ok(leaf) => AppQueue::Leaf(self.sched.tree().queues[*leaf].spec.path.clone()),
            Err(_) => AppQueue::Refused(self.mapped_queue(&sub)),
        };
        let mut app = App {
            id,
            queue,
            sub,
            state: AppState::NEW_SAVING,
            final_status: FinalApplicationStatus::UNDEFINED,
            diagnostics: String::new(),
            diagnostics_kind: DiagnosticsKind::Lasting,
            submit_time: now,
            launch_time: 0,
            finish_time: 0,
            submit_seq: self.next_submit_seq,
            attempts: Vec::new(),
            max_attempts,
            progress: 0.0,
            tracking_url: String::new(),
            memory_ms: 0,
            vcore_ms: 0,
            killing_since: None,
            lifetime: None,
            nodes_touched: BTreeSet::new(),
            preemption: AppPreemption::default(),
            usage: usage::AppUsage::default(),
        };
        self.next_submit_seq += 1;
        self.counters.apps_submitted += 1;
        let leaf = match placed {
            Ok(leaf) => leaf,
            Err(diag) => {
                app.state = AppState::FAILED;
                app.final_status = FinalApplicationStatus::FAILED;
                app.set_diagnostics(DiagnosticsKind::Lasting, diag);
                app.finish_time = now;
                self.counters.apps_failed += 1;
                self.counters.apps_completed += 1;
                self.completed.insert((app.finish_time, id));
                self.apps.insert(id, app);
                self.persist(&id);
                self.evict_completed();
                self.changed();
                return Ok(());
            }
        };
        app.state = AppState::ACCEPTED;
        // YARN's LIFETIME, counted from submission, as the queue grants it.
        let granted = self.sched.tree().queues[leaf]
            .spec
            .lifetime
            .grant(app.sub.lifetime_secs);
        if let Some(secs) = granted.secs() {
            let at = now.saturating_add(secs.saturating_mul(1000));
            app.lifetime = Some(at);
            self.lifetimes.insert((at, id));
        }
        self.apps.insert(id, app);
        self.admit_or_hold(id, leaf, true, now);
        // The record is written with the attempt counted, before the client is answered.
        self.persist(&id);
        self.run_scheduler(now);
        self.changed();
        Ok(())
    }

    /// The attempts a restarted RM numbers past: all but an unfinished application's current
    /// attempt still waiting for its AM container. No container carries that attempt's id
    /// (the record naming an AM container is written before it is launched), so the
    /// restarted RM starts it again under the same number rather than failing it and
    /// spending one of the application's attempts, as YARN stores an attempt only once its
    /// AM container is allocated.
    fn numbered_attempts(app: &App) -> u32 {
        let waiting = !app.state.is_final()
            && app
                .current_attempt()
                .is_some_and(|a| matches!(a.phase, AttemptPhase::Scheduled));
        app.attempts.len() as u32 - u32::from(waiting)
    }

    pub(super) fn persist(&mut self, id: &ApplicationId) {
        if let Some(app) = self.apps.get(id) {
            self.effects.push(Effect::PersistApp(Box::new(AppRecord {
                id: app.id,
                sub: app.sub.clone(),
                queue: app.queue.clone(),
                state: app.state,
                final_status: app.final_status,
                diagnostics: app.diagnostics.clone(),
                submit_time: app.submit_time,
                launch_time: app.launch_time,
                finish_time: app.finish_time,
                attempts: Self::numbered_attempts(app),
                memory_ms: app.memory_ms,
                vcore_ms: app.vcore_ms,
                lifetime: app.lifetime,
                live_attempt: Self::live_attempt_record(app),
                usage: app.usage.clone(),
            })));
        }
    }

    /// `PUT /apps/{id}/state {"state":"KILLED"}`.
    pub fn kill(
        &mut self,
        id: &ApplicationId,
        caller: &Caller,
        now: u64,
    ) -> Result<KillOutcome, CoreError> {
        self.check_modify(id, caller, "kill")?;
        self.start_kill(id, "Application killed by user.", now)
    }

    /// `PUT /apps/{id}/timeout` (`LIFETIME`): the application is killed once the core's clock
    /// reaches `expiry` (YARN's `RMAppLifetimeMonitor`). Answers the deadline now in effect.
    pub fn update_lifetime(
        &mut self,
        id: &ApplicationId,
        expiry: u64,
        caller: &Caller,
        now: u64,
    ) -> Result<u64, CoreError> {
        self.check_modify(id, caller, "update the lifetime of")?;
        let app = self.apps.get_mut(id).ok_or(CoreError::AppNotFound(*id))?;
        if app.state.is_final() {
            return Err(CoreError::LifetimeOfEndedApp {
                app: *id,
                state: app.state,
            });
        }
        if expiry < now {
            return Err(CoreError::LifetimeInThePast { expiry, now });
        }
        if let Some(old) = app.lifetime.replace(expiry) {
            self.lifetimes.remove(&(old, *id));
        }
        self.lifetimes.insert((expiry, *id));
        self.persist(id);
        self.changed();
        Ok(expiry)
    }

    /// Kills every application whose lifetime has passed, with YARN's diagnostic.
    pub(super) fn expire_lifetimes(&mut self, now: u64) {
        while let Some(&(at, id)) = self.lifetimes.first() {
            if at > now {
                break;
            }
            self.lifetimes.pop_first();
            let due = self
                .apps
                .get(&id)
                .is_some_and(|a| a.lifetime == Some(at) && !a.state.is_final());
            if due {
                let _ = self.start_kill(&id, LIFETIME_EXCEEDED, now);
            }
        }
    }

    /// Starts killing an application (its asks dropped, its containers stopped) with the
    /// given diagnostic; it turns KILLED when its containers are gone.
    fn start_kill(
        &mut self,
        id: &ApplicationId,
        diagnostic: &str,
        now: u64,
    ) -> Result<KillOutcome, CoreError> {
        let app = self.apps.get_mut(id).ok_or(CoreError::AppNotFound(*id))?;
        if app.state.is_final() {
            return Ok(KillOutcome::Done(app.state));
        }
        if app.killing_since.is_none() {
            app.killing_since = Some(now);
            if app.diagnostics_kind != DiagnosticsKind::Killed {
                app.set_diagnostics(DiagnosticsKind::Killed, diagnostic);
            }
            self.watch_app(*id);
            self.sched.clear_asks(id);
            let live: Vec<ContainerId> = self.live_containers_of_app(id);
            for c in live {
                self.kill_container(
                    &c,
                    exit_status::KILLED_BY_RESOURCEMANAGER,
                    "Container killed by the ApplicationMaster's kill request.".into(),
                    now,
                );
            }
            self.changed();
        }
        Ok(self.try_finish_kill(id, now))
    }

    pub(super) fn try_finish_kill(&mut self, id: &ApplicationId, now: u64) -> KillOutcome {
        let Some(app) = self.apps.get(id) else {
            return KillOutcome::Done(AppState::KILLED);
        };
        if app.state.is_final() {
            return KillOutcome::Done(app.state);
        }
        let Some(since) = app.killing_since else {
            return KillOutcome::InProgress;
        };
        let live = self.live_containers_of_app(id);
        if !live.is_empty() && now.saturating_sub(since) < KILL_DEADLINE_MS {
            return KillOutcome::InProgress;
        }
        for c in live {
            self.complete_container(&c, exit_status::KILLED_BY_RESOURCEMANAGER, "Container killed: the application was killed and its NodeManager did not confirm in time.".into(), now);
        }
        self.finish_app(
            id,
            AppState::KILLED,
            FinalApplicationStatus::KILLED,
            None,
            now,
        );
        KillOutcome::Done(AppState::KILLED)
    }

    pub(super) fn live_containers_of_app(&self, id: &ApplicationId) -> Vec<ContainerId> {
        let Some(app) = self.apps.get(id) else {
            return vec![];
        };
        app.attempts
            .iter()
            .flat_map(|a| a.containers.iter())
            .filter(|c| self.containers.get(c).is_some_and(RmContainer::is_live))
            .copied()
            .collect()
    }

    /// Moves an application to a final state, stops what is left of it and records it.
    pub(super) fn finish_app(
        &mut self,
        id: &ApplicationId,
        state: AppState,
        status: FinalApplicationStatus,
        diag: Option<String>,
        now: u64,
    ) {
        let Some(app) = self.apps.get_mut(id) else {
            return;
        };
        if app.state.is_final() {
            return;
        }
        app.state = state;
        app.final_status = status;
        app.finish_time = now;
        self.completed.insert((now, *id));
        app.progress = if state == AppState::FINISHED {
            100.0
        } else {
            app.progress
        };
        app.killing_since = None;
        if let Some(d) = diag {
            app.set_diagnostics(DiagnosticsKind::Lasting, d);
        } else if matches!(
            app.diagnostics_kind,
            DiagnosticsKind::NotActivated | DiagnosticsKind::Recovered
        ) {
            // A passing note about a wait that is over says nothing of a final application.
            app.set_diagnostics(DiagnosticsKind::Lasting, String::new());
        }
        match state {
            AppState::FAILED => self.counters.apps_failed += 1,
            AppState::KILLED => self.counters.apps_killed += 1,
            _ => {}
        }
        self.counters.apps_completed += 1;
        self.sched.clear_asks(id);
        let live = self.live_containers_of_app(id);
        for c in live {
            let is_am = self.containers.get(&c).is_some_and(|c| c.is_am);
            // A finishing AM is given a grace period to exit on its own.
            if !(is_am && state == AppState::FINISHED) {
                self.kill_container(
                    &c,
                    exit_status::KILLED_AFTER_APP_COMPLETION,
                    "Container killed on application completion.".into(),
                    now,
                );
            }
        }
        self.persist(id);
        self.maybe_retire(id, now);
        self.evict_completed();
        self.held.remove(id);
        if !self.held.is_empty() {
            self.release_held(now);
        }
        self.changed();
    }

    /// Once a final app has no live containers: forget it in the scheduler and tell every
    /// node that ran it to clean up.
    pub(super) fn maybe_retire(&mut self, id: &ApplicationId, now: u64) {
        let Some(app) = self.apps.get(id) else { return };
        // A running application retires nothing: its containers are not looked at (each
        // completion of a long-running job's containers walked all its finished ones).
        if !app.state.is_final() {
            return;
        }
        // Newest first, stopping at the first live one: a kill ends containers oldest
        // first, so each of its completions finds a live one at once (walking them all
        // made ending an application of n containers cost n x n lookups).
        let live = app
            .attempts
            .iter()
            .rev()
            .flat_map(|a| a.containers.iter().rev())
            .any(|c| self.containers.get(c).is_some_and(RmContainer::is_live));
        if live {
            return;
        }
        let touched: Vec<NodeId> = app.nodes_touched.iter().cloned().collect();
        for n in touched {
            if let Some(node) = self.nodes.get_mut(&n) {
                node.apps_to_cleanup.insert(*id);
            }
        }
        if let Some(app) = self.apps.get_mut(id) {
            app.nodes_touched.clear();
        }
        // Its last container is gone: the record (and its usage) is final now; written
        // unless the same record is the last one queued already.
        let queued = self.apps.get(id).is_some_and(|app| {
            matches!(self.effects.last(), Some(Effect::PersistApp(r)) if r.id == *id && r.usage == app.usage)
        });
        if !queued {
            self.persist(id);
        }
        self.cpu_app_gone(id);
        let activated = self.sched.remove_app(id);
        if !activated.is_empty() {
            self.start_activated(activated, now);
            self.run_scheduler(now);
        }
    }

    /// Forgets the oldest final applications beyond `max_completed_apps` (those whose
    /// containers all ended; the others wait for a later call).
    pub(super) fn evict_completed(&mut self) {
        let Some(excess) = self
            .completed
            .len()
            .checked_sub(self.conf.max_completed_apps)
            .filter(|e| *e > 0)
        else {
            return;
        };
        let oldest: Vec<(u64, ApplicationId)> =
            self.completed.iter().take(excess).copied().collect();
        for (t, id) in oldest {
            if !self.live_containers_of_app(&id).is_empty() {
                continue;
            }
            self.completed.remove(&(t, id));
            if let Some(app) = self.apps.remove(&id) {
                for c in app.attempts.iter().flat_map(|a| a.containers.iter()) {
                    self.containers.remove(c);
                }
            }
            self.effects.push(Effect::ForgetApp(id));
        }
    }
}
