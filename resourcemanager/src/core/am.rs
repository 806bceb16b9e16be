//! The ApplicationMasterProtocol: AM-RM token check, register, allocate (asks, releases, gang statuses, headroom) and finish.

use super::*;

/// One entry of an AM's allocate `ask`, converted from the wire at the edge.
#[derive(Debug, Clone, PartialEq)]
pub struct AskUpdate {
    pub priority: i32,
    pub allocation_request_id: i64,
    pub resource_name: String,
    pub capability: Resource,
    pub num_containers: u32,
    pub relax_locality: bool,
    /// Set when the ask is a member of a gang: (gang id, its placement and timeout).
    pub gang: Option<(String, scheduler::gang::GangRequest)>,
    /// Its node label expression (a partition), if it names one.
    pub label: Option<String>,
    /// Its containers' allocation tags.
    pub tags: Vec<String>,
    pub constraint: Option<scheduler::placement::Constraint>,
    /// The container image its containers run in (canonical, as the edge normalized it):
    /// nodes that already hold it are preferred among those that fit.
    pub image: Option<String>,
    /// A vcores range or `auto` and a throughput table by CPUs (`None`: fixed vcores).
    pub cpu: Option<cpu::CpuAsk>,
}

#[derive(Debug, Clone)]
pub struct AllocateReply {
    pub response_id: i32,
    /// Every gang of the application, with its state.
    pub gangs: Vec<GangView>,
    pub allocated: Vec<Allocation>,
    pub completed: Vec<CompletedContainer>,
    pub headroom: Resource,
    pub num_cluster_nodes: i32,
    /// Containers the RM is taking back, until they are gone.
    pub preemption: Option<PreemptionNotice>,
    /// Elastic gangs grown (once each).
    pub offers: Vec<ResizeOfferView>,
    /// Elastic gangs to shrink, until done.
    pub demands: Vec<ResizeDemandView>,
    /// YARN's container updates applied since the last call, and those refused.
    pub updated: Vec<UpdatedView>,
    pub update_errors: Vec<UpdateErrorView>,
    /// Containers holding idle GPUs past their queue's timeout (`notify`), sent once.
    pub idle_gpus: Vec<super::IdleGpuNotice>,
}

/// A container handed to its AM: where it is and the RM-signed token that lets the AM start
/// it there (YARN's `Container`; the edge makes the wire record).
#[derive(Debug, Clone, PartialEq)]
pub struct Allocation {
    pub id: ContainerId,
    pub node_id: NodeId,
    pub node_http_address: String,
    pub resource: Resource,
    pub priority: i32,
    pub container_token: String,
    pub allocation_request_id: i64,
    /// YARN's container version (bumped by each resource update).
    pub version: i32,
}

/// A container's end as its AM hears of it (YARN's `ContainerStatus` of a completed one).
#[derive(Debug, Clone, PartialEq)]
pub struct CompletedContainer {
    pub container_id: ContainerId,
    pub state: ContainerState,
    pub exit_status: i32,
    pub diagnostics: String,
    /// The gang the container belonged to, if any.
    pub gang_id: Option<String>,
}

/// A gang as its AM and the REST views see it.
#[derive(Debug, Clone, PartialEq)]
pub struct GangView {
    pub id: String,
    pub phase: scheduler::gang::GangPhase,
    /// Containers the gang asks for in all.
    pub size: u32,
    /// Why it waits, in words.
    pub diagnostics: String,
    pub reserved_nodes: Vec<NodeId>,
    /// Members that ended while the gang ran.
    pub failed_containers: Vec<ContainerId>,
    /// Elastic gangs: members now (0 for a rigid gang), and resizes so far.
    pub current_size: u32,
    pub resizes: u32,
}

impl RmCore {
    /// Checks an AM-RM token and that it names the current attempt of a live application.
    pub fn authenticate_am(&self, tok: &str) -> Result<ApplicationAttemptId, CoreError> {
        let attempt =
            token::verify_amrm_token(&self.keys.amrm, tok).map_err(CoreError::InvalidToken)?;
        let app = self
            .apps
            .get(&attempt.application_id)
            .ok_or(CoreError::TokenForUnknownApp(attempt.application_id))?;
        match app.current_attempt() {
            Some(a) if a.id == attempt => Ok(attempt),
            _ => Err(CoreError::TokenForOldAttempt(attempt)),
        }
    }

    pub(super) fn live_attempt_mut(
        &mut self,
        attempt: &ApplicationAttemptId,
    ) -> Result<&mut Attempt, CoreError> {
        let app = self
            .apps
            .get_mut(&attempt.application_id)
            .ok_or(CoreError::AttemptAppNotFound(attempt.application_id))?;
        if app.state.is_final() {
            return Err(CoreError::AppAlreadyFinal {
                app: app.id,
                state: app.state,
            });
        }
        let att = app
            .attempt_mut(attempt)
            .ok_or(CoreError::AttemptNotFound(*attempt))?;
        if att.is_ended() {
            return Err(CoreError::AttemptEnded {
                attempt: *attempt,
                state: att.state(),
            });
        }
        Ok(att)
    }

    pub fn am_register(
        &mut self,
        attempt: &ApplicationAttemptId,
        host: String,
        rpc_port: i32,
        tracking_url: String,
        now: u64,
    ) -> Result<(Resource, String), CoreError> {
        let att = self.live_attempt_mut(attempt)?;
        if att.has_registered() {
            return Err(CoreError::AlreadyRegistered(attempt.application_id));
        }
        att.phase = AttemptPhase::Running;
        att.host = host;
        att.rpc_port = rpc_port;
        att.last_heard = now;
        let app = self
            .apps
            .get_mut(&attempt.application_id)
            .ok_or(CoreError::AttemptAppNotFound(attempt.application_id))?;
        app.state = AppState::RUNNING;
        // A recovered attempt's AM is back: its "waiting to re-register" note is over.
        app.clear_diagnostics(DiagnosticsKind::Recovered);
        app.tracking_url = tracking_url;
        if app.launch_time == 0 {
            app.launch_time = now;
        }
        let queue = app.queue.to_string();
        self.watch_app(attempt.application_id);
        self.persist(&attempt.application_id);
        self.changed();
        Ok((self.max_allocation(), queue))
    }

    /// The live containers `attempt` inherited from earlier attempts, as YARN's register
    /// answer lists them (`containersFromPreviousAttempts`), with fresh tokens.
    pub fn inherited_containers(&self, attempt: &ApplicationAttemptId) -> Vec<Allocation> {
        self.apps
            .get(&attempt.application_id)
            .and_then(|a| a.attempt(attempt))
            .map(|a| {
                a.inherited
                    .iter()
                    .filter(|c| self.containers.get(c).is_some_and(RmContainer::is_live))
                    .filter_map(|c| self.container_record(c))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// An allocate call without a checkpoint report or acknowledgement.
    pub fn am_allocate(
        &mut self,
        attempt: &ApplicationAttemptId,
        response_id: i32,
        asks: Vec<AskUpdate>,
        release: Vec<ContainerId>,
        progress: f32,
        now: u64,
    ) -> Result<AllocateReply, CoreError> {
        let report = AmReport::default();
        self.am_allocate_with(attempt, response_id, asks, release, progress, report, now)
    }

    /// YARN's allocate: asks (desired state), releases, progress, plus Spindle's checkpoint
    /// report and preemption acknowledgement; answers with what was placed and completed.
    #[allow(clippy::too_many_arguments)]
    pub fn am_allocate_with(
        &mut self,
        attempt: &ApplicationAttemptId,
        response_id: i32,
        asks: Vec<AskUpdate>,
        release: Vec<ContainerId>,
        progress: f32,
        mut report: AmReport,
        now: u64,
    ) -> Result<AllocateReply, CoreError> {
        self.acknowledge_completions(attempt, now)?;
        // YARN's response id guards against replays; answers here are recomputed, not cached.
        let _ = response_id;
        let app_id = attempt.application_id;
        // Validate every ask before applying any, so a bad call changes nothing.
        let normalized = self.validate_asks(attempt, asks)?;
        let elastic_asked = self.apply_asks(&app_id, normalized, now);
        for c in release {
            if c.attempt_id.application_id != app_id {
                continue;
            }
            self.elastic_release(&c);
            self.kill_container(
                &c,
                exit_status::ABORTED,
                "Container released by application".into(),
                now,
            );
            // A released container's completion is reported to the AM like any other.
        }
        if let Some(app) = self.apps.get_mut(&app_id) {
            app.progress = (progress.clamp(0.0, 1.0)) * 100.0;
        }
        self.sched.set_progress(&app_id, f64::from(progress));
        for (gang, size, value) in &report.throughput {
            self.sched.report_throughput(&app_id, gang, *size, *value);
        }
        for (vcores, value) in std::mem::take(&mut report.cpu_throughput) {
            self.report_cpu_throughput(&app_id, vcores, value);
        }
        let updates = std::mem::take(&mut report.updates);
        self.container_updates(attempt, updates, now);
        self.am_report(&app_id, report, now);
        if elastic_asked {
            // A new elastic job is sized by the policy's round now, not at the next one.
            self.elastic_round_now(now);
        }
        self.run_scheduler(now);
        let reply = self.allocate_reply(attempt)?;
        self.changed();
        Ok(reply)
    }

    /// The allocate call hears from the AM, and acknowledges the completions of the last
    /// answer: their NMs may forget them now.
    fn acknowledge_completions(
        &mut self,
        attempt: &ApplicationAttemptId,
        now: u64,
    ) -> Result<(), CoreError> {
        let att = self.live_attempt_mut(attempt)?;
        if !att.has_registered() {
            return Err(CoreError::NotRegistered(*attempt));
        }
        att.last_heard = now;
        let sent = std::mem::take(&mut att.sent_to_am);
        let acked: Vec<(ContainerId, NodeId)> = sent
            .into_iter()
            .filter_map(|c| att.unacked.remove(&c).map(|n| (c, n)))
            .collect();
        for (c, n) in acked {
            if let Some(node) = self.nodes.get_mut(&n) {
                node.to_ack.insert(c);
            }
        }
        Ok(())
    }

    /// Every ask normalized and checked (its shape, partition, whether it could ever be
    /// satisfied, a gang's feasibility), each with its capability and partition; the first
    /// refusal fails the whole call.
    fn validate_asks(
        &self,
        attempt: &ApplicationAttemptId,
        asks: Vec<AskUpdate>,
    ) -> Result<Vec<(AskUpdate, Resource, String)>, CoreError> {
        let app_id = attempt.application_id;
        // An attempt that outlived an RM restart resends asks judged before it, while its
        // NMs may still be registering again: a gang of it is not judged on a partial cluster.
        let recovered = self
            .apps
            .get(&app_id)
            .and_then(|a| a.attempt(attempt))
            .and_then(|a| a.am.as_ref())
            .is_some_and(|am| am.id.epoch < self.epoch);
        let mut normalized = Vec::with_capacity(asks.len());
        for mut a in asks {
            let gpus = u32::try_from(a.capability.get(spindle_common::resource::GPU)).unwrap_or(0);
            if let Some(min) = a.cpu.as_ref().and_then(|c| c.vcores.min(gpus)) {
                // A range's minimum is what is granted first.
                a.capability.vcores = i64::from(min);
            }
            if a.priority < 0 {
                return Err(CoreError::NegativePriority(a.priority));
            }
            let leaf = self.sched.app(&app_id).map(|x| x.queue);
            let cap = self.normalize_in(&a.capability, leaf)?;
            let part = self.ask_partition(&app_id, a.label.as_deref(), false)?;
            if a.resource_name == "*" {
                self.check_satisfiable(&part, &a.tags, a.constraint.as_ref(), a.num_containers)?;
                if let (Some((gang, params)), Some(leaf), false) = (&a.gang, leaf, recovered) {
                    // An elastic gang must fit at its smallest legal size.
                    let members = params
                        .elastic
                        .as_ref()
                        .and_then(|e| e.least())
                        .unwrap_or(a.num_containers);
                    self.sched
                        .gang_feasible(leaf, &part, &cap, members)
                        .map_err(|why| CoreError::GangNeverFits {
                            gang: gang.clone(),
                            members,
                            why,
                        })?;
                }
            }
            normalized.push((a, cap, part));
        }
        Ok(normalized)
    }

    /// Applies validated asks (YARN's desired state per priority and request id); returns
    /// whether an elastic gang was asked for.
    fn apply_asks(
        &mut self,
        app_id: &ApplicationId,
        normalized: Vec<(AskUpdate, Resource, String)>,
        now: u64,
    ) -> bool {
        let mut elastic_asked = false;
        for (a, cap, part) in normalized {
            let key = AskKey {
                priority: a.priority,
                allocation_request_id: a.allocation_request_id,
            };
            let mut ask = self
                .sched
                .app(app_id)
                .and_then(|s| s.asks.get(&key))
                .cloned()
                .unwrap_or_else(|| Ask::new(cap.clone(), 0));
            self.cpu_ask(*app_id, key, a.cpu.clone());
            ask.capability = cap;
            ask.partition = part.clone();
            ask.tags = a.tags.clone();
            ask.constraint = a.constraint.clone();
            ask.image = a.image.clone();
            if let Some((gid, request)) = &a.gang {
                let mut params =
                    request
                        .clone()
                        .with_ask(part, a.tags.clone(), a.constraint.clone());
                params.image = a.image.clone();
                let running_elastic = self
                    .sched
                    .gang(app_id, gid)
                    .is_some_and(|g| g.elastic.is_some() && !g.members.is_empty());
                if running_elastic {
                    // Resized by offers and demands; a repeated ask changes nothing.
                    continue;
                }
                elastic_asked |= params.elastic.is_some();
                self.sched.set_gang(app_id, gid, params, now);
                ask.gang = Some(gid.clone());
            }
            if a.resource_name == "*" {
                ask.any = a.num_containers;
                ask.relax_locality = a.relax_locality;
            } else if a.resource_name.starts_with('/') {
                ask.racks.insert(a.resource_name, a.num_containers);
            } else {
                ask.hosts.insert(a.resource_name, a.num_containers);
            }
            self.sched.set_ask(app_id, key, ask);
        }
        elastic_asked
    }

    /// The answer to an allocate call: what was placed (with fresh tokens, now ACQUIRED),
    /// what completed, gangs' states, headroom, notices, offers and updates.
    fn allocate_reply(
        &mut self,
        attempt: &ApplicationAttemptId,
    ) -> Result<AllocateReply, CoreError> {
        let app_id = attempt.application_id;
        let num_nodes = self.sched.nodes().schedulable_count() as i32;
        let headroom = self.headroom(&app_id);
        let att = self.live_attempt_mut(attempt)?;
        att.response_id = att.response_id.wrapping_add(1);
        let pulled = std::mem::take(&mut att.to_deliver);
        let offers = std::mem::take(&mut att.offers);
        let updated = std::mem::take(&mut att.updated);
        let update_errors = std::mem::take(&mut att.update_errors);
        let completed = std::mem::take(&mut att.to_report);
        att.sent_to_am = completed.iter().map(|c| c.container_id).collect();
        let response_id = att.response_id;
        let allocated: Vec<Allocation> = pulled
            .iter()
            .filter_map(|c| self.container_record(c))
            .collect();
        let gangs = self.gang_statuses(&app_id);
        self.gang_diagnostics(&app_id, &gangs);
        let reply = AllocateReply {
            response_id,
            gangs,
            allocated,
            completed,
            headroom,
            num_cluster_nodes: num_nodes,
            preemption: self.notice_for(&app_id),
            offers,
            demands: self.demands_for(&app_id),
            updated,
            update_errors,
            idle_gpus: self.take_idle_notices(&app_id),
        };
        for c in &reply.allocated {
            if let Some(rc) = self.containers.get_mut(&c.id) {
                if rc.state == RmContainerState::ALLOCATED {
                    rc.state = RmContainerState::ACQUIRED;
                }
            }
        }
        Ok(reply)
    }

    /// The application's diagnostics name its first waiting gang and why it waits; else,
    /// when a plain ask of it waits for queue room, why (read at each allocate, never by a
    /// scheduling pass).
    fn gang_diagnostics(&mut self, app_id: &ApplicationId, gangs: &[GangView]) {
        let ask_reason = self
            .sched
            .ask_room_reason(app_id, false, self.monitor_acts());
        let Some(a) = self.apps.get_mut(app_id) else {
            return;
        };
        if let Some(w) = gangs.iter().find(|g| {
            matches!(
                g.phase,
                scheduler::gang::GangPhase::Pending | scheduler::gang::GangPhase::Reserved
            )
        }) {
            a.set_diagnostics(
                DiagnosticsKind::Gang,
                format!("Gang {} is waiting: {}", w.id, w.diagnostics),
            );
            return;
        }
        a.clear_diagnostics(DiagnosticsKind::Gang);
        match ask_reason {
            Some(r)
                if a.diagnostics.is_empty() || a.diagnostics_kind == DiagnosticsKind::AskWaits =>
            {
                a.set_diagnostics(
                    DiagnosticsKind::AskWaits,
                    format!("A container request is waiting: {r}"),
                );
            }
            Some(_) => {}
            None => a.clear_diagnostics(DiagnosticsKind::AskWaits),
        }
    }

    /// Whether the completion of `cid` that `node` reports must stay with the NM (not in
    /// `containersToBeRemovedFromNm` yet): a live attempt of its application has not had it
    /// acknowledged by its AM (told in an answer, then acknowledged by the next allocate).
    /// A completion no AM waits for (an AM container, an ended attempt's, an unknown
    /// application's) is released at once; one held for an attempt that has ended since is
    /// released when the NM reports it again.
    pub(super) fn hold_completion(&mut self, cid: &ContainerId, node: &NodeId) -> bool {
        let Some(app) = self.apps.get_mut(&cid.application_id()) else {
            return false;
        };
        let over = app.state.is_final();
        for att in app.attempts.iter_mut() {
            if att.is_ended() || over {
                att.unacked.remove(cid);
                continue;
            }
            if att.unacked.contains_key(cid) {
                return true;
            }
            // A completion just recorded is the last one queued: look from the end.
            if att.to_report.iter().rev().any(|c| c.container_id == *cid)
                || att.sent_to_am.contains(cid)
            {
                att.unacked.insert(*cid, node.clone());
                return true;
            }
        }
        false
    }

    /// Every gang of an application, as its AM hears of them.
    /// Why an application's AM container waits, when a full queue above it is the cause
    /// (worked out when read, for the REST view; the pass never builds it).
    pub fn am_wait_reason(&self, app: &ApplicationId) -> Option<String> {
        self.sched
            .ask_room_reason(app, true, self.monitor_acts())
            .map(|r| format!("Its AM container waits: {r}"))
    }

    pub fn gang_statuses(&self, app: &ApplicationId) -> Vec<GangView> {
        let Some(a) = self.sched.app(app) else {
            return vec![];
        };
        let monitor = self.monitor_acts();
        a.gangs
            .iter()
            .map(|(id, g)| GangView {
                id: id.clone(),
                phase: g.phase,
                size: g.size,
                diagnostics: self.sched.gang_diagnostics(app, id, monitor),
                reserved_nodes: g.reserved.clone(),
                failed_containers: g.failed.clone(),
                current_size: g.elastic.as_ref().map_or(0, |_| g.members.len() as u32),
                resizes: g.elastic.as_ref().map_or(0, |e| e.resizes),
            })
            .collect()
    }

    /// What the application could still get: the least of the cluster's free resources,
    /// its queue's room below the maximum on every level, and its user's room below the
    /// user limit (YARN's headroom).
    pub(super) fn headroom(&self, app: &ApplicationId) -> Resource {
        let mut free = self.sched.nodes().cluster_free();
        let Some(a) = self.sched.app(app) else {
            return free;
        };
        let tree = self.sched.tree();
        for q in tree.path_up(a.queue) {
            let room = tree.queues[q]
                .maximum
                .minus(&tree.queues[q].used)
                .clamp_non_negative();
            free = scheduler::queue_tree::min_each(&free, &room);
        }
        let used = tree.queues[a.queue]
            .users
            .get(&a.user)
            .map(|u| u.used.clone())
            .unwrap_or_default();
        let room = self
            .sched
            .user_limit(a.queue, &Resource::zero())
            .minus(&used)
            .clamp_non_negative();
        scheduler::queue_tree::min_each(&free, &room)
    }

    pub fn am_finish(
        &mut self,
        attempt: &ApplicationAttemptId,
        status: FinalApplicationStatus,
        diagnostics: String,
        tracking_url: String,
        now: u64,
    ) -> Result<(), CoreError> {
        let att = self.live_attempt_mut(attempt)?;
        if !att.has_registered() {
            return Err(CoreError::NotRegistered(*attempt));
        }
        att.phase = AttemptPhase::Finishing { at: now };
        let app_id = attempt.application_id;
        self.watch_app(app_id);
        let mut killing = false;
        if let Some(app) = self.apps.get_mut(&app_id) {
            if !tracking_url.is_empty() {
                app.tracking_url = tracking_url;
            }
            killing = app.killing_since.is_some();
        }
        if killing {
            // YARN's KILLING state: the AM's own verdict (often a failure it saw because its
            // workers were killed first) does not replace the kill; the kill's diagnostic
            // stays.
            self.finish_app(
                &app_id,
                AppState::KILLED,
                FinalApplicationStatus::KILLED,
                None,
                now,
            );
            return Ok(());
        }
        let status = match status {
            FinalApplicationStatus::UNDEFINED => FinalApplicationStatus::FAILED,
            s => s,
        };
        self.finish_app(&app_id, AppState::FINISHED, status, Some(diagnostics), now);
        Ok(())
    }
}
