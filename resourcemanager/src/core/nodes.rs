//! Nodes: the ResourceTracker protocol (register, heartbeat, unregister), reported container states, and losing a node.
//!
//! The host lists (`refreshNodes`): a node's drain is `Node.decommissioning`, present exactly
//! while it is DECOMMISSIONING; the tick ends drains that are empty or past their deadline.

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
    /// The node is decommissioned (or refused): the NM stops its containers and exits.
    Shutdown,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HeartbeatReply {
    pub response_id: i32,
    pub action: NodeAction,
    pub containers_to_cleanup: Vec<ContainerId>,
    pub apps_to_cleanup: Vec<ApplicationId>,
    pub containers_to_remove: Vec<ContainerId>,
    pub interval_ms: u64,
    /// Why, for [`NodeAction::Shutdown`] (YARN's `diagnosticsMessage`); else empty.
    pub diagnostics: String,
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
            diagnostics: String::new(),
        }
    }

    fn shutdown(interval_ms: u64, diagnostics: String) -> Self {
        Self {
            action: NodeAction::Shutdown,
            diagnostics,
            ..Self::resync(interval_ms)
        }
    }
}

/// The hosts the RM admits, from `yarn.resourcemanager.nodes.include-path` and
/// `exclude-path` as the driver last read them. An entry is a host (every NM on it) or
/// `host:port` (one NM).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostLists {
    /// Empty: every host may join. Else only these.
    pub include: BTreeSet<String>,
    /// Excluded hosts, each with its own graceful timeout in seconds when the exclude file
    /// (YARN's XML form) gives one.
    pub exclude: BTreeMap<String, Option<i64>>,
}

impl HostLists {
    fn names(entry: &str, id: &NodeId) -> bool {
        entry == id.host || entry == id.to_string()
    }

    /// The exclude entry naming this node, if any.
    fn excluded(&self, id: &NodeId) -> Option<(&String, &Option<i64>)> {
        self.exclude.iter().find(|(e, _)| Self::names(e, id))
    }

    /// Why this node may not be in service, if it may not.
    pub fn refusal(&self, id: &NodeId) -> Option<NodeRefused> {
        if self.excluded(id).is_some() {
            return Some(NodeRefused::Excluded { node: id.clone() });
        }
        if !self.include.is_empty() && !self.include.iter().any(|e| Self::names(e, id)) {
            return Some(NodeRefused::NotIncluded { node: id.clone() });
        }
        None
    }
}

/// Why the RM turns an NM away (it answers SHUTDOWN, as YARN does).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeRefused {
    #[error(
        "Disallowed NodeManager from {}, Sending SHUTDOWN signal to the NodeManager: {node} is in the exclude list (yarn.resourcemanager.nodes.exclude-path)",
        node.host
    )]
    Excluded { node: NodeId },
    #[error(
        "Disallowed NodeManager from {}, Sending SHUTDOWN signal to the NodeManager: {node} is not in the include list (yarn.resourcemanager.nodes.include-path)",
        node.host
    )]
    NotIncluded { node: NodeId },
}

/// How `refreshNodes` takes newly excluded nodes out of service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecommissionType {
    /// At once: the node turns DECOMMISSIONED and its containers are killed.
    Normal,
    /// The node turns DECOMMISSIONING and drains; after `timeout_secs` (unless the exclude
    /// file names the host with its own; negative: never) what is left is killed.
    Graceful { timeout_secs: i64 },
}

/// What one `refreshNodes` changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodesRefreshed {
    pub decommissioned: Vec<NodeId>,
    pub decommissioning: Vec<NodeId>,
    pub recommissioned: Vec<NodeId>,
}

impl RmCore {
    /// `POST /ws/v1/node-tracker/register`, for callers that need not know of a refusal
    /// (a refused node is recorded DECOMMISSIONED, see [`Self::try_register_node`]).
    pub fn register_node(&mut self, reg: NodeRegistration, now: u64) -> u64 {
        let interval = self.conf.heartbeat_interval_ms;
        self.try_register_node(reg, now).unwrap_or(interval)
    }

    /// `POST /ws/v1/node-tracker/register`: answers the heartbeat interval, or refuses a
    /// node the host lists keep out (it is recorded DECOMMISSIONED, and told to shut down).
    /// A DECOMMISSIONING node that registers again goes on draining.
    pub fn try_register_node(
        &mut self,
        reg: NodeRegistration,
        now: u64,
    ) -> Result<u64, NodeRefused> {
        let id = reg.id.clone();
        let drain = self.nodes.get(&id).and_then(|n| n.decommissioning);
        if let (Some(refused), None) = (self.hosts.refusal(&id), drain) {
            self.refuse_node(reg, &refused, now);
            return Err(refused);
        }
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
            images: Vec::new(),
            to_prefetch: BTreeSet::new(),
            pull_failures: Vec::new(),
            decommissioning: drain,
        };
        let node = Node {
            state: match drain {
                Some(_) => NodeState::DECOMMISSIONING,
                None => node.state,
            },
            ..node
        };
        self.nodes.insert(id.clone(), node);
        self.node_liveness.set(id.clone(), now);
        self.sched.add_node(id.clone(), reg.rack, reg.total, used);
        if drain.is_some() {
            self.sched.set_draining(&id, true);
        }
        let model = reg
            .attributes
            .get(spindle_common::resource::GPU_MODEL_ATTRIBUTE)
            .cloned();
        self.sched.set_gpu_model(&id, model);
        self.apply_node_labels(&id);
        self.process_reports(&id, &reg.containers, now);
        self.fail_absent_recovered_ams(&id, now);
        self.run_scheduler(now);
        self.changed();
        Ok(self.conf.heartbeat_interval_ms)
    }

    /// Records a refused node as DECOMMISSIONED (YARN lists refused hosts among the
    /// inactive nodes); what it ran here before, if anything, ends.
    fn refuse_node(&mut self, reg: NodeRegistration, why: &NodeRefused, now: u64) {
        let id = reg.id.clone();
        let report = why.to_string();
        if self.nodes.get(&id).is_some_and(|n| !n.state.is_inactive()) {
            let diag = format!("Container released on a *decommissioned* node {id}");
            self.deactivate_node(&id, NodeState::DECOMMISSIONED, report, diag, now);
            self.run_scheduler(now);
            return;
        }
        if self
            .nodes
            .get(&id)
            .is_some_and(|n| n.state == NodeState::DECOMMISSIONED)
        {
            return;
        }
        let node = Node {
            id: id.clone(),
            http_address: reg.http_address,
            rack: reg.rack,
            state: NodeState::DECOMMISSIONED,
            total: reg.total,
            version: reg.version,
            health_report: report,
            last_health_update: now,
            last_heartbeat: now,
            response_id: 0,
            containers: BTreeSet::new(),
            to_cleanup: BTreeSet::new(),
            apps_to_cleanup: BTreeSet::new(),
            to_ack: BTreeSet::new(),
            mem_used_physical_mb: 0,
            cpu_usage: 0.0,
            attributes: reg.attributes,
            images: Vec::new(),
            to_prefetch: BTreeSet::new(),
            pull_failures: Vec::new(),
            decommissioning: None,
        };
        self.nodes.insert(id, node);
        self.changed();
    }

    /// Why a node may not be in service now, if it may not (the registration check).
    pub fn node_refusal(&self, id: &NodeId) -> Option<NodeRefused> {
        self.hosts.refusal(id)
    }

    /// Sets the host lists without acting on the nodes (the RM's start: no node is known
    /// yet, and a refused one is turned away when it registers).
    pub fn set_host_lists(&mut self, hosts: HostLists) {
        self.hosts = hosts;
        self.changed();
    }

    /// `refreshNodes` (YARN's NodesListManager): takes the new host lists and acts on every
    /// node in service. A node newly kept out is decommissioned as `how` says (a
    /// DECOMMISSIONING one given a timeout again takes the new one; a forceful refresh ends
    /// its drain at once); a DECOMMISSIONING node no longer kept out is recommissioned.
    pub fn refresh_nodes(
        &mut self,
        hosts: HostLists,
        how: DecommissionType,
        now: u64,
    ) -> NodesRefreshed {
        self.hosts = hosts;
        let mut out = NodesRefreshed::default();
        let ids: Vec<NodeId> = self
            .nodes
            .values()
            .filter(|n| !n.state.is_inactive())
            .map(|n| n.id.clone())
            .collect();
        for id in ids {
            let draining = self.nodes.get(&id).and_then(|n| n.decommissioning);
            match (self.hosts.refusal(&id), how, draining) {
                (None, _, Some(_)) => {
                    self.recommission(&id, now);
                    out.recommissioned.push(id);
                }
                (None, _, None) => {}
                (Some(why), DecommissionType::Normal, _) => {
                    self.decommission(&id, &why.to_string(), now);
                    out.decommissioned.push(id);
                }
                (Some(_), DecommissionType::Graceful { timeout_secs }, _) => {
                    let own = self.hosts.excluded(&id).and_then(|(_, t)| *t);
                    let secs = own.unwrap_or(timeout_secs);
                    let timeout_secs = u64::try_from(secs).ok();
                    let since = draining.map_or(now, |d| d.since);
                    self.start_drain(
                        &id,
                        Decommissioning {
                            since,
                            timeout_secs,
                        },
                        now,
                    );
                    out.decommissioning.push(id);
                }
            }
        }
        // A drain that is already over (an empty node) ends now, not at the next tick.
        self.tick_decommissioning(now);
        out.decommissioning.retain(|id| {
            let done = self
                .nodes
                .get(id)
                .is_some_and(|n| n.state == NodeState::DECOMMISSIONED);
            if done {
                out.decommissioned.push(id.clone());
            }
            !done
        });
        self.run_scheduler(now);
        self.changed();
        out
    }

    fn start_drain(&mut self, id: &NodeId, drain: Decommissioning, now: u64) {
        let Some(node) = self.nodes.get_mut(id) else {
            return;
        };
        if node.decommissioning == Some(drain) {
            return;
        }
        node.state = NodeState::DECOMMISSIONING;
        node.decommissioning = Some(drain);
        self.draining.insert(id.clone());
        node.last_health_update = now;
        self.sched.set_draining(id, true);
        self.changed();
    }

    /// A DECOMMISSIONING node back in service: RUNNING, or UNHEALTHY if its last report said so.
    fn recommission(&mut self, id: &NodeId, now: u64) {
        let healthy = self.sched.node(id).is_none_or(|n| n.healthy);
        let Some(node) = self.nodes.get_mut(id) else {
            return;
        };
        node.decommissioning = None;
        self.draining.remove(id);
        node.state = if healthy {
            NodeState::RUNNING
        } else {
            NodeState::UNHEALTHY
        };
        node.last_health_update = now;
        self.sched.set_draining(id, false);
        self.changed();
    }

    /// Takes a node out of service for good: DECOMMISSIONED, what still runs on it ends
    /// (ABORTED, with `why`), and its NM is told to shut down at its next heartbeat.
    fn decommission(&mut self, id: &NodeId, why: &str, now: u64) {
        if let Some(n) = self.nodes.get_mut(id) {
            n.decommissioning = None;
        }
        self.draining.remove(id);
        let report = format!("Node {id} decommissioned: {why}");
        let diag = format!("Container released on a *decommissioned* node {id}: {why}");
        self.deactivate_node(id, NodeState::DECOMMISSIONED, report, diag, now);
    }

    /// Ends the drains that are over: a DECOMMISSIONING node with no container left, or
    /// one whose deadline passed (what is left is killed).
    pub(super) fn tick_decommissioning(&mut self, now: u64) {
        let over: Vec<(NodeId, Option<u64>)> = self
            .draining
            .iter()
            .filter_map(|id| self.nodes.get(id))
            .filter_map(|n| n.decommissioning.map(|d| (n, d)))
            .filter(|(n, d)| n.containers.is_empty() || d.deadline().is_some_and(|t| now >= t))
            .map(|(n, d)| {
                (
                    n.id.clone(),
                    (!n.containers.is_empty()).then_some(d.timeout_secs.unwrap_or(0)),
                )
            })
            .collect();
        for (id, timed_out) in over {
            let why = match timed_out {
                None => "graceful decommission complete, no containers left".to_string(),
                Some(t) => format!(
                    "its graceful decommission timeout of {t} s passed with containers still running"
                ),
            };
            self.decommission(&id, &why, now);
            self.run_scheduler(now);
        }
    }

    /// The decommissioning invariants (for `sanity_check`): a node carries a drain exactly
    /// while DECOMMISSIONING, and the scheduler drains exactly those nodes.
    pub(super) fn check_decommissioning(&self) -> Result<(), String> {
        let carrying: BTreeSet<&NodeId> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.decommissioning.is_some())
            .map(|(id, _)| id)
            .collect();
        if carrying != self.draining.iter().collect() {
            return Err(format!(
                "nodes {carrying:?} carry a drain but the drain index holds {:?}",
                self.draining
            ));
        }
        for (id, n) in &self.nodes {
            let draining = n.state == NodeState::DECOMMISSIONING;
            if draining != n.decommissioning.is_some() {
                return Err(format!(
                    "node {id} is {} but its drain is {:?}",
                    n.state, n.decommissioning
                ));
            }
            let sched = self.sched.node(id);
            if n.state.is_inactive() && sched.is_some() {
                return Err(format!("{} node {id} is still in the scheduler", n.state));
            }
            if let Some(s) = sched.filter(|s| s.draining != draining) {
                return Err(format!(
                    "node {id} is {} but the scheduler's draining is {}",
                    n.state, s.draining
                ));
            }
        }
        Ok(())
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
        let was_healthy = self.sched.node(id).map(|n| n.healthy);
        let Some(node) = self.nodes.get_mut(id) else {
            return HeartbeatReply::resync(interval);
        };
        if node.state == NodeState::DECOMMISSIONED {
            return HeartbeatReply::shutdown(interval, Self::disallowed(id));
        }
        if node.state.is_inactive() {
            return HeartbeatReply::resync(interval);
        }
        node.last_heartbeat = now;
        node.response_id = node.response_id.wrapping_add(1);
        let was_healthy = was_healthy.unwrap_or(node.state == NodeState::RUNNING);
        if healthy != was_healthy || node.health_report != report {
            // A draining node stays DECOMMISSIONING whatever its health.
            if node.decommissioning.is_none() {
                node.state = if healthy {
                    NodeState::RUNNING
                } else {
                    NodeState::UNHEALTHY
                };
            }
            node.health_report = report;
            node.last_health_update = now;
            self.sched.set_schedulable(id, healthy);
            self.changed();
        }
        self.process_reports(id, &containers, now);
        // A drained node is decommissioned at once and told so (YARN: "is ready to be
        // decommissioned").
        let drained = self
            .nodes
            .get(id)
            .is_some_and(|n| n.decommissioning.is_some() && n.containers.is_empty());
        if drained {
            self.tick_decommissioning(now);
            return HeartbeatReply::shutdown(
                interval,
                format!("DECOMMISSIONING {id} is ready to be decommissioned"),
            );
        }
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
            diagnostics: String::new(),
        }
    }

    /// YARN's answer to a decommissioned node's heartbeat.
    fn disallowed(id: &NodeId) -> String {
        format!(
            "Disallowed NodeManager nodeId: {id} hostname: {}, Sending SHUTDOWN signal to the NodeManager",
            id.host
        )
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
                        let diag = self.idle_release_diagnostics(&r.id, diag);
                        self.complete_container(&r.id, r.exit_status, diag, now);
                    } else {
                        self.report_recovered_completion(r, now);
                    }
                    // The NM forgets a completion only once the AM that must hear of it
                    // has acknowledged it: until then it reports it again, to a restarted
                    // RM too, so no completion is lost.
                    let held = self.hold_completion(&r.id, id);
                    if let Some(n) = self.nodes.get_mut(id) {
                        if !held {
                            n.to_ack.insert(r.id);
                        }
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
                            // What a starting container waits for (an image pull), as its NM
                            // says it; only a change is written.
                            if !r.diagnostics.is_empty() {
                                if let Some(c) = self
                                    .containers
                                    .get_mut(&r.id)
                                    .filter(|c| c.diagnostics != r.diagnostics)
                                {
                                    c.diagnostics = r.diagnostics.clone();
                                    self.changed();
                                }
                            }
                            if let Some(c) = self
                                .containers
                                .get_mut(&r.id)
                                .filter(|c| c.state != RmContainerState::RUNNING)
                            {
                                c.state = RmContainerState::RUNNING;
                                c.start_time = now;
                                self.awaiting_launch.remove(&(c.allocated_time, r.id));
                                self.running_on.entry(id.clone()).or_default().insert(r.id);
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
            .running_on
            .get(id)
            .map(|running| running.difference(&still_running).copied().collect())
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
