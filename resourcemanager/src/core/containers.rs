//! Containers: allocation from scheduler placements (and the pass that makes them), kill and completion with their accounting.

use super::*;

impl RmCore {
    /// Records a placed container. Its token is issued when the container is handed out
    /// ([`Self::container_record`]), as YARN creates container tokens when the AM pulls them:
    /// allocation stays cheap, and a container never pulled never costs a signature.
    pub(super) fn allocate_container(
        &mut self,
        p: &scheduler::Placement,
        now: u64,
    ) -> Option<ContainerId> {
        let node = self.nodes.get_mut(&p.node)?;
        let node_http = node.http_address.clone();
        let app = self.apps.get_mut(&p.app)?;
        let attempt = app.current_attempt_mut()?;
        attempt.next_container_seq += 1;
        let cid = ContainerId::new(attempt.id, self.epoch, attempt.next_container_seq);
        attempt.containers.insert(cid);
        if !app.nodes_touched.contains(&p.node) {
            app.nodes_touched.insert(p.node.clone());
        }
        node.containers.insert(cid);
        self.containers.insert(
            cid,
            RmContainer {
                id: cid,
                node: p.node.clone(),
                node_http,
                resource: p.resource.clone(),
                priority: p.key.priority,
                allocation_request_id: p.key.allocation_request_id,
                is_am: p.is_am,
                gang: p.gang.clone(),
                state: RmContainerState::ALLOCATED,
                allocated_time: now,
                start_time: 0,
                finish_time: 0,
                exit_status: exit_status::INVALID,
                diagnostics: String::new(),
                version: 0,
                token_from: now,
                tags: p.tags.clone(),
                partition: p.partition.clone(),
            },
        );
        self.awaiting_launch.insert((now, cid));
        self.counters.containers_allocated += 1;
        if let Some(g) = &p.gang {
            self.sched.gang_member(&p.app, g, cid);
        }
        self.cpu_granted(p, cid, now);
        Some(cid)
    }

    /// A container as its AM gets it, with a freshly signed token that expires with the
    /// allocation.
    pub(super) fn container_record(&self, cid: &ContainerId) -> Option<Allocation> {
        let c = self.containers.get(cid)?;
        let user = self.apps.get(&cid.application_id())?.sub.user.clone();
        let mut ident = ContainerTokenIdentifier::new(
            *cid,
            c.node.clone(),
            user,
            &c.resource,
            c.token_from + self.conf.container_alloc_expiry_ms,
            self.cluster_ts,
            c.is_am,
        );
        ident.version = c.version;
        Some(Allocation {
            id: *cid,
            node_id: c.node.clone(),
            node_http_address: c.node_http.clone(),
            resource: c.resource.clone(),
            priority: c.priority,
            container_token: token::issue_container_token_owned(self.keys.signing(), ident),
            allocation_request_id: c.allocation_request_id,
            version: c.version,
        })
    }

    /// Runs the scheduler and hands out what it placed: AM containers are launched, the
    /// others wait for their AM's next allocate call.
    pub(super) fn run_scheduler(&mut self, now: u64) {
        self.sched.set_now(now);
        // The AM limit follows what the cluster has free: waiting applications may fit now.
        let activated = self.sched.activate_waiting();
        if !activated.is_empty() {
            self.start_activated(activated, now);
        }
        let placements = self.sched.schedule();
        for p in placements {
            let Some(container) = self.allocate_container(&p, now) else {
                // The node or app vanished between placement and allocation: give it back.
                self.sched.release(&p.app, &p.node, &p.resource);
                self.sched.tag(&p.app, &p.node, &p.tags, false);
                continue;
            };
            if p.is_am {
                if let Some(record) = self.container_record(&container) {
                    self.launch_am(&p.app, record, now);
                }
            } else if let Some(att) = self.apps.get_mut(&p.app).and_then(App::current_attempt_mut) {
                if att.to_deliver.is_empty() {
                    self.effects.push(Effect::ContainersAllocated(att.id));
                }
                att.to_deliver.push(container);
            }
            self.changed();
        }
        self.cpu_size_fresh(now);
    }

    /// Asks the container's NM to stop it. A container the NM has not started is released
    /// at once.
    pub(super) fn kill_container(&mut self, cid: &ContainerId, exit: i32, diag: String, now: u64) {
        let Some(c) = self.containers.get(cid) else {
            return;
        };
        if !c.is_live() {
            return;
        }
        let node = c.node.clone();
        let running = c.state == RmContainerState::RUNNING;
        if let Some(n) = self.nodes.get_mut(&node) {
            n.to_cleanup.insert(*cid);
        }
        if !running {
            self.complete_container(cid, exit, diag, now);
        } else if let Some(c) = self.containers.get_mut(cid) {
            // Remember why, for when the NM confirms.
            c.diagnostics = diag;
        }
    }

    /// The one place a container ends: resources go back, the AM is told, an AM container
    /// ends its attempt.
    pub(super) fn complete_container(
        &mut self,
        cid: &ContainerId,
        exit: i32,
        diag: String,
        now: u64,
    ) {
        // Shared, not cloned: dropped before the record is changed in place below.
        let Some(c) = self.containers.get_shared(cid) else {
            return;
        };
        if !c.is_live() {
            return;
        }
        self.sched.set_now(now);
        let (exit, diag, end) = match self.preempted_end(&c, exit, now) {
            Some(preemption::NoticeEnd::Preempted(e, d)) => (e, d, Some(true)),
            Some(preemption::NoticeEnd::Shrunk(e, d)) => (e, d, Some(false)),
            None => (exit, diag, None),
        };
        drop(c);
        let Some(c) = self.containers.get_mut(cid) else {
            return;
        };
        self.awaiting_launch.remove(&(c.allocated_time, *cid));
        if c.state == RmContainerState::RUNNING {
            if let Some(running) = self.running_on.get_mut(&c.node) {
                running.remove(cid);
                if running.is_empty() {
                    self.running_on.remove(&c.node);
                }
            }
        }
        c.state = RmContainerState::COMPLETED;
        c.finish_time = now;
        c.exit_status = exit;
        if !diag.is_empty() {
            c.diagnostics = diag;
        }
        let Some(c) = self.containers.get_shared(cid) else {
            return;
        };
        let app_id = cid.application_id();
        self.cpu_forget(cid);
        self.sched.release(&app_id, &c.node, &c.resource);
        if end == Some(true) {
            // Work taken back by preemption is not charged to its user's fair share.
            self.sched
                .refund_preempted(&app_id, &c.resource, c.allocated_time);
        }
        self.persist_fairshare();
        self.sched.tag(&app_id, &c.node, &c.tags, false);
        if let Some(g) = &c.gang {
            if end == Some(true) {
                self.sched.gang_member_preempted(&app_id, g, *cid);
            } else if end == Some(false) {
                self.sched.elastic_member_gone(&app_id, g, *cid);
            } else {
                self.sched
                    .gang_member_ended(&app_id, g, *cid, exit != exit_status::SUCCESS);
            }
        }
        if let Some(n) = self.nodes.get_mut(&c.node) {
            n.containers.remove(cid);
        }
        let held_ms = now.saturating_sub(c.allocated_time) as i64;
        let mut am_ended: Option<(ApplicationAttemptId, bool)> = None;
        if let Some(app) = self.apps.get_mut(&app_id) {
            app.memory_ms += c.resource.memory_mb * held_ms;
            app.vcore_ms += c.resource.vcores * held_ms;
            app.usage
                .add(&c.resource, held_ms as u64, end == Some(true));
            // A container kept across attempts is reported to the attempt that holds it now.
            let holder = app
                .current_attempt()
                .filter(|a| a.inherited.contains(cid))
                .map(|a| a.id)
                .unwrap_or(cid.attempt_id);
            if let Some(att) = app.attempt_mut(&holder) {
                att.inherited.remove(cid);
                if !c.is_am && !att.has_unregistered() && att.state() != AttemptState::FAILED {
                    att.to_report.push(CompletedContainer {
                        container_id: *cid,
                        state: ContainerState::COMPLETE,
                        exit_status: exit,
                        diagnostics: c.diagnostics.clone(),
                        gang_id: c.gang.clone(),
                    });
                }
                if c.is_am {
                    am_ended = Some((att.id, att.has_unregistered()));
                }
            }
        }
        if let Some((attempt, unregistered)) = am_ended {
            if unregistered {
                if let Some(att) = self
                    .apps
                    .get_mut(&app_id)
                    .and_then(|a| a.attempt_mut(&attempt))
                {
                    // The AM unregistered: it finished, whatever the attempt said before.
                    att.phase = AttemptPhase::Ended {
                        end: AttemptEnd::Finished,
                        registered: att.has_registered(),
                        unregistered_at: att.unregistered_at(),
                    };
                    att.finish_time = now;
                }
            } else {
                let counts = !matches!(
                    exit,
                    exit_status::ABORTED
                        | exit_status::PREEMPTED
                        | exit_status::DISKS_FAILED
                        | exit_status::KILLED_BY_RESOURCEMANAGER
                );
                let diag = format!(
                    "AM Container for {attempt} exited with  exitCode: {exit}\nFailing this attempt.Diagnostics: {}",
                    c.diagnostics
                );
                self.fail_attempt(&attempt, diag, counts, now);
            }
        }
        if self
            .apps
            .get(&app_id)
            .is_some_and(|a| a.killing_since.is_some())
        {
            self.try_finish_kill(&app_id, now);
        }
        self.maybe_retire(&app_id, now);
        self.changed();
    }
}
