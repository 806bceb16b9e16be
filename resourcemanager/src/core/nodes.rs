//! Nodes: the ResourceTracker protocol (register, heartbeat, unregister), reported container states, and losing a node.

use super::*;

/// A container as an NM reports it (register or heartbeat).
#[derive(Debug, Clone, PartialEq)]
pub struct ReportedContainer {
    pub id: ContainerId,
    pub state: ContainerState,
    pub exit_status: i32,
    pub diagnostics: String,
    pub resource: Resource,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NodeRegistration {
    pub id: NodeId,
    pub http_address: String,
    pub rack: String,
    pub total: Resource,
    pub version: String,
    pub containers: Vec<ReportedContainer>,
    /// Attributes the NM reports (`nm.yarn.io/...`), e.g. its GPU model.
    pub attributes: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeAction {
    Normal,
    Resync,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HeartbeatReply {
    pub response_id: i32,
    pub action: NodeAction,
    pub containers_to_cleanup: Vec<ContainerId>,
    pub apps_to_cleanup: Vec<ApplicationId>,
    pub containers_to_remove: Vec<ContainerId>,
    pub interval_ms: u64,
}

impl HeartbeatReply {
    pub(super) fn resync(interval_ms: u64) -> Self {
        Self {
            response_id: 0,
            action: NodeAction::Resync,
            containers_to_cleanup: vec![],
            apps_to_cleanup: vec![],
            containers_to_remove: vec![],
            interval_ms,
        }
    }
}

impl RmCore {
    /// `POST /ws/v1/node-tracker/register`.
    pub fn register_node(&mut self, reg: NodeRegistration, now: u64) -> u64 {
        let id = reg.id.clone();
        // A re-registering node forgets what it does not report.
        if let Some(old) = self.nodes.get(&id) {
            let reported: BTreeSet<ContainerId> = reg.containers.iter().map(|c| c.id).collect();
            let lost: Vec<ContainerId> = old
                .containers
                .iter()
                .filter(|c| !reported.contains(c))
                .copied()
                .collect();
            for c in lost {
                let allocated_only = self
                    .containers
                    .get(&c)
                    .is_some_and(|c| c.state != RmContainerState::RUNNING);
                if !allocated_only {
                    self.complete_container(
                        &c,
                        exit_status::ABORTED,
                        "Container lost: its NodeManager re-registered without it".into(),
                        now,
                    );
                }
            }
            self.sched.remove_node(&id);
        }
        let used = self
            .nodes
            .get(&id)
            .map(|n| {
                n.containers
                    .iter()
                    .filter_map(|c| self.containers.get(c))
                    .fold(Resource::zero(), |acc, c| acc.plus(&c.resource))
            })
            .unwrap_or_default();
        let prev = self.nodes.remove(&id);
        let node = Node {
            id: id.clone(),
            http_address: reg.http_address,
            rack: reg.rack.clone(),
            state: NodeState::RUNNING,
            total: reg.total.clone(),
            version: reg.version,
            health_report: String::new(),
            last_health_update: now,
            last_heartbeat: now,
            response_id: 0,
            containers: prev
                .as_ref()
                .map(|p| p.containers.clone())
                .unwrap_or_default(),
            to_cleanup: BTreeSet::new(),
            apps_to_cleanup: prev.map(|p| p.apps_to_cleanup).unwrap_or_default(),
            to_ack: BTreeSet::new(),
            mem_used_physical_mb: 0,
            cpu_usage: 0.0,
            attributes: reg.attributes.clone(),
        };
        self.nodes.insert(id.clone(), node);
        self.sched.add_node(id.clone(), reg.rack, reg.total, used);
        let model = reg
            .attributes
            .get(spindle_common::resource::GPU_MODEL_ATTRIBUTE)
            .cloned();
        self.sched.set_gpu_model(&id, model);
        self.apply_node_labels(&id);
        self.process_reports(&id, &reg.containers, now);
        self.run_scheduler(now);
        self.changed();
        self.conf.heartbeat_interval_ms
    }

    /// `POST /ws/v1/node-tracker/heartbeat`.
    pub fn node_heartbeat(
        &mut self,
        id: &NodeId,
        healthy: bool,
        report: String,
        containers: Vec<ReportedContainer>,
        now: u64,
    ) -> HeartbeatReply {
        let interval = self.conf.heartbeat_interval_ms;
        let Some(node) = self.nodes.get_mut(id) else {
            return HeartbeatReply::resync(interval);
        };
        if node.state.is_inactive() {
            return HeartbeatReply::resync(interval);
        }
        node.last_heartbeat = now;
        node.response_id = node.response_id.wrapping_add(1);
        let was_healthy = node.state == NodeState::RUNNING;
        if healthy != was_healthy || node.health_report != report {
            node.state = if healthy {
                NodeState::RUNNING
            } else {
                NodeState::UNHEALTHY
            };
            node.health_report = report;
            node.last_health_update = now;
            self.sched.set_schedulable(id, healthy);
            self.changed();
        }
        self.process_reports(id, &containers, now);
        self.run_scheduler(now);
        let Some(node) = self.nodes.get_mut(id) else {
            return HeartbeatReply::resync(interval);
        };
        HeartbeatReply {
            response_id: node.response_id,
            action: NodeAction::Normal,
            containers_to_cleanup: node.to_cleanup.iter().copied().collect(),
            apps_to_cleanup: std::mem::take(&mut node.apps_to_cleanup)
                .into_iter()
                .collect(),
            containers_to_remove: std::mem::take(&mut node.to_ack).into_iter().collect(),
            interval_ms: interval,
        }
    }

    pub(super) fn process_reports(&mut self, id: &NodeId, reports: &[ReportedContainer], now: u64) {
        let mut still_running: BTreeSet<ContainerId> = BTreeSet::new();
        for r in reports {
            match r.state {
                ContainerState::COMPLETE => {
                    let known_live = self
                        .containers
                        .get(&r.id)
                        .is_some_and(|c| c.is_live() && c.node == *id);
                    if known_live {
                        let diag = if r.diagnostics.is_empty() {
                            self.containers
                                .get(&r.id)
                                .map(|c| c.diagnostics.clone())
                                .unwrap_or_default()
                        } else {
                            r.diagnostics.clone()
                        };
                        self.complete_container(&r.id, r.exit_status, diag, now);
                    } else {
                        self.report_recovered_completion(r, now);
                    }
                    if let Some(n) = self.nodes.get_mut(id) {
                        n.to_ack.insert(r.id);
                        n.to_cleanup.remove(&r.id);
                    }
                }
                ContainerState::RUNNING | ContainerState::NEW => {
                    let known = self
                        .containers
                        .get(&r.id)
                        .is_some_and(|c| c.node == *id && c.is_live());
                    match known {
                        true => {
                            still_running.insert(r.id);
                            if let Some(c) = self
                                .containers
                                .get_mut(&r.id)
                                .filter(|c| c.state != RmContainerState::RUNNING)
                            {
                                c.state = RmContainerState::RUNNING;
                                c.start_time = now;
                                self.changed();
                            }
                        }
                        false if self.recover_container(id, r, now) => {
                            still_running.insert(r.id);
                        }
                        false => {
                            // Unknown to the RM, or already ended here: the NM must stop it.
                            if let Some(n) = self.nodes.get_mut(id) {
                                n.to_cleanup.insert(r.id);
                            }
                        }
                    }
                }
            }
        }
        // A container the RM saw running that the NM no longer reports is lost.
        let vanished: Vec<ContainerId> = self
            .nodes
            .get(id)
            .map(|n| {
                n.containers
                    .iter()
                    .filter(|c| !still_running.contains(c))
                    .filter(|c| {
                        self.containers
                            .get(c)
                            .is_some_and(|c| c.state == RmContainerState::RUNNING)
                    })
                    .copied()
                    .collect()
            })
            .unwrap_or_default();
        for c in vanished {
            self.complete_container(
                &c,
                exit_status::ABORTED,
                "Container no longer reported by its NodeManager".into(),
                now,
            );
        }
        // Stop asking the NM to clean up what it no longer runs.
        if let Some(n) = self.nodes.get_mut(id) {
            let reported_running: BTreeSet<ContainerId> = reports
                .iter()
                .filter(|r| r.state != ContainerState::COMPLETE)
                .map(|r| r.id)
                .collect();
            n.to_cleanup.retain(|c| reported_running.contains(c));
        }
    }

    pub(super) fn lose_node(&mut self, id: &NodeId, now: u64) {
        let report = format!(
            "Node {id} lost: no heartbeat within {} ms",
            self.conf.nm_expiry_ms
        );
        let diag = format!("Container released on a *lost* node {id}");
        self.deactivate_node(id, NodeState::LOST, report, diag, now);
    }

    /// `POST /ws/v1/node-tracker/unregister`: the NM is stopping; its node turns SHUTDOWN.
    /// Unknown or already inactive nodes are ignored.
    pub fn unregister_node(&mut self, id: &NodeId, now: u64) {
        if self.nodes.get(id).is_some_and(|n| !n.state.is_inactive()) {
            let diag = format!("Container released: node {id} shut down");
            self.deactivate_node(id, NodeState::SHUTDOWN, "Node shut down".into(), diag, now);
            self.run_scheduler(now);
        }
    }

    /// Takes a node out of service: it leaves the scheduler and its containers end ABORTED.
    pub(super) fn deactivate_node(
        &mut self,
        id: &NodeId,
        state: NodeState,
        report: String,
        diag: String,
        now: u64,
    ) {
        let Some(node) = self.nodes.get_mut(id) else {
            return;
        };
        node.state = state;
        node.health_report = report;
        node.last_health_update = now;
        let containers: Vec<ContainerId> = node.containers.iter().copied().collect();
        self.sched.remove_node(id);
        for c in containers {
            // The node left the scheduler above; complete() only releases the app's usage.
            self.complete_container(&c, exit_status::ABORTED, diag.clone(), now);
        }
        self.changed();
    }
}
