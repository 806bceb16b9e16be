//! The pure core of the ResourceManager: application, attempt, container and node
//! lifecycles around the [`scheduler`]. No I/O, no clock, no async (a test checks this):
//! every input carries the current time, and every side effect is pushed into an outbox
//! ([`Effect`]) that the driver executes (the live one writes SQLite and calls NMs; tests
//! and the simulator just record). The driver owns the one `RmCore` of a running RM.

pub mod model;
pub mod queue_conf;
pub mod scheduler;
pub mod shared;

#[cfg(test)]
mod capacity_tests;
#[cfg(test)]
mod gang_tests;
#[cfg(test)]
mod recovery_tests;
#[cfg(test)]
pub(crate) mod tests;

use std::collections::{BTreeMap, BTreeSet};

use spindle_common::env as cenv;
use spindle_common::records::am::{Container, ContainerStatus, NodeReport};
use spindle_common::records::node::{
    ContainerLaunchContext, StartContainerRequest, StartContainersRequest,
};
use spindle_common::records::resource::ResourceInfo;
use spindle_common::states::{
    exit_status, ContainerState, FinalApplicationStatus, NodeState, RmContainerState,
    YarnApplicationAttemptState as AttemptState, YarnApplicationState as AppState,
};
use spindle_common::token::{self, ContainerTokenIdentifier, TokenSecret};
use spindle_common::{ApplicationAttemptId, ApplicationId, ContainerId, NodeId, Resource};

pub use model::*;
use queue_conf::{QueueMapping, QueueState, SchedulerConf};
use scheduler::{Ask, AskKey, Scheduler};
pub use shared::SharedMap;

/// How long a killed application waits for its containers before it is declared KILLED.
const KILL_DEADLINE_MS: u64 = 10_000;
/// How long an unregistered AM may keep running before the RM stops its container.
const AM_EXIT_GRACE_MS: u64 = 5_000;
/// YARN's request priority for the AM container ask.
const AM_PRIORITY: i32 = 0;

/// Settings of the core, already validated by the RM's config layer.
#[derive(Debug, Clone)]
pub struct CoreConfig {
    pub min_allocation: Resource,
    pub max_allocation: Resource,
    pub heartbeat_interval_ms: u64,
    pub nm_expiry_ms: u64,
    pub am_expiry_ms: u64,
    pub am_max_attempts: u32,
    pub container_alloc_expiry_ms: u64,
    pub max_completed_apps: usize,
    /// `http://host:port` that AMs use to reach this RM; set once the RM has bound its port.
    pub rm_address: String,
    /// The capacity scheduler's queues and policies.
    pub scheduler: SchedulerConf,
    /// How long a gang may wait when its AM names no timeout
    /// (`spindle.scheduler.gang.timeout-ms`).
    pub gang_timeout_ms: u64,
}

impl CoreConfig {
    /// YARN's defaults with one `root.default` queue; for tests and the simulator.
    pub fn for_tests() -> Self {
        Self {
            min_allocation: Resource::new(128, 1),
            max_allocation: Resource::new(8192, 8),
            heartbeat_interval_ms: 1000,
            nm_expiry_ms: 600_000,
            am_expiry_ms: 600_000,
            am_max_attempts: 2,
            container_alloc_expiry_ms: 600_000,
            max_completed_apps: 1000,
            rm_address: "http://127.0.0.1:8088".into(),
            scheduler: SchedulerConf::single_default_queue(),
            gang_timeout_ms: DEFAULT_GANG_TIMEOUT_MS,
        }
    }
}

/// A gang's default wait before its timeout applies: ten minutes, YuniKorn's placeholder
/// default is fifteen.
pub const DEFAULT_GANG_TIMEOUT_MS: u64 = 600_000;

/// What the core asks the outside world to do, in order.
#[derive(Debug, Clone)]
pub enum Effect {
    /// Write the application's record to the state store (before the caller is answered).
    PersistApp(Box<AppRecord>),
    /// Drop an evicted application from the state store.
    ForgetApp(ApplicationId),
    /// Have the NM start an AM container; the driver reports back with [`RmCore::am_launched`].
    LaunchAm {
        attempt: ApplicationAttemptId,
        container: ContainerId,
        node_http: String,
        request: StartContainersRequest,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoreError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("Invalid resource request: {0}")]
    InvalidResourceRequest(String),
    #[error("Invalid AMRMToken: {0}")]
    InvalidToken(String),
    #[error("Application attempt {0} is not registered; register before allocate")]
    NotRegistered(ApplicationAttemptId),
    #[error("{0}")]
    WrongState(String),
    /// The caller may not do this (YARN's 403 `ForbiddenException`).
    #[error("{0}")]
    Forbidden(String),
}

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
    pub gang: Option<(String, scheduler::gang::GangParams)>,
}

#[derive(Debug, Clone)]
pub struct AllocateReply {
    pub response_id: i32,
    /// Every gang of the application, with its state.
    pub gangs: Vec<spindle_common::records::am::GangStatus>,
    pub allocated: Vec<Container>,
    pub completed: Vec<ContainerStatus>,
    pub headroom: Resource,
    pub num_cluster_nodes: i32,
    pub updated_nodes: Vec<NodeReport>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillOutcome {
    /// The application is (now or already) in a final state.
    Done(AppState),
    /// Containers are being stopped; ask again.
    InProgress,
}

/// Counters that outlive the applications they count (`/metrics`).
#[derive(Debug, Clone, Default)]
pub struct Counters {
    pub apps_submitted: u64,
    pub apps_completed: u64,
    pub apps_failed: u64,
    pub apps_killed: u64,
    pub containers_allocated: u64,
    /// Running containers taken back from re-registering NMs after an RM restart.
    pub containers_recovered: u64,
}

pub struct RmCore {
    conf: CoreConfig,
    cluster_ts: u64,
    epoch: u32,
    secret: TokenSecret,
    next_app: u32,
    next_submit_seq: u64,
    // Persistent maps: the driver's read snapshot shares them instead of copying them.
    apps: SharedMap<ApplicationId, App>,
    nodes: SharedMap<NodeId, Node>,
    containers: SharedMap<ContainerId, RmContainer>,
    sched: Scheduler,
    effects: Vec<Effect>,
    counters: Counters,
    /// Bumped on every change, so the driver republishes its read snapshot only when needed.
    version: u64,
}

impl RmCore {
    pub fn new(conf: CoreConfig, cluster_ts: u64, epoch: u32, secret: TokenSecret) -> Self {
        let sched = Scheduler::new(conf.scheduler.clone(), conf.min_allocation.clone());
        Self {
            conf,
            cluster_ts,
            epoch,
            secret,
            next_app: 1,
            next_submit_seq: 1,
            apps: SharedMap::new(),
            nodes: SharedMap::new(),
            containers: SharedMap::new(),
            sched,
            effects: Vec::new(),
            counters: Counters::default(),
            version: 0,
        }
    }

    // ------------------------------------------------------------------ accessors

    pub fn conf(&self) -> &CoreConfig {
        &self.conf
    }
    pub fn set_rm_address(&mut self, addr: String) {
        self.conf.rm_address = addr;
    }
    pub fn cluster_timestamp(&self) -> u64 {
        self.cluster_ts
    }
    pub fn secret(&self) -> &TokenSecret {
        &self.secret
    }
    pub fn apps(&self) -> &SharedMap<ApplicationId, App> {
        &self.apps
    }
    pub fn nodes(&self) -> &SharedMap<NodeId, Node> {
        &self.nodes
    }
    pub fn containers(&self) -> &SharedMap<ContainerId, RmContainer> {
        &self.containers
    }
    pub fn scheduler(&self) -> &Scheduler {
        &self.sched
    }
    pub fn counters(&self) -> &Counters {
        &self.counters
    }
    pub fn version(&self) -> u64 {
        self.version
    }
    /// Takes the effects emitted since the last call, in order.
    pub fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.effects)
    }

    fn changed(&mut self) {
        self.version += 1;
    }

    // ------------------------------------------------------------------ applications

    /// `POST /apps/new-application`: reserves the next id.
    pub fn new_application(&mut self) -> ApplicationId {
        let id = ApplicationId::new(self.cluster_ts, self.next_app);
        self.next_app += 1;
        id
    }

    /// Re-creates an application from the state store at RM start. A finished one is kept
    /// for the REST views; an unfinished one starts a new attempt (its old AM, if still
    /// running, is cleaned up when its NM reports it).
    pub fn recover_app(&mut self, rec: AppRecord, now: u64) {
        let max_attempts = self.max_attempts_for(&rec.sub);
        let mut app = App {
            id: rec.id,
            sub: rec.sub,
            queue: rec.queue,
            state: rec.state,
            final_status: rec.final_status,
            diagnostics: rec.diagnostics,
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
            nodes_touched: BTreeSet::new(),
        };
        self.next_submit_seq += 1;
        if rec.id.cluster_timestamp == self.cluster_ts && rec.id.id >= self.next_app {
            self.next_app = rec.id.id + 1;
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
        let leaf = self.sched.tree().leaf(&app.queue);
        // Work-preserving: an attempt whose AM container was live is taken back as it was,
        // waiting for its NM to report the AM (and its containers) and for the AM to register
        // again; only if the AM is not reported in time does a new attempt start.
        let live = rec
            .live_attempt
            .filter(|_| unfinished && leaf.is_some() && !app.sub.unmanaged_am);
        if let (Some(live), Some(last)) = (&live, app.attempts.last_mut()) {
            let mut att = Attempt::new(last.id, live.start_time, false);
            att.state = AttemptState::LAUNCHED;
            att.am_container = Some(live.am_container);
            att.am_node = Some(live.am_node.clone());
            att.am_node_http = Some(live.am_node_http.clone());
            att.host = live.host.clone();
            att.rpc_port = live.rpc_port;
            att.last_heard = now;
            att.awaiting_am_until = Some(now + self.conf.nm_expiry_ms);
            *last = att;
            app.tracking_url = live.tracking_url.clone();
            app.diagnostics = format!(
                "Recovered after a ResourceManager restart; waiting for attempt {} to \
                 re-register (its AM container {} on {}).",
                last.id, live.am_container, live.am_node
            );
        }
        let live = live.is_some() && !app.attempts.is_empty();
        self.apps.insert(id, app);
        if unfinished {
            match leaf {
                Some(leaf) if live => {
                    self.admit(id, leaf, now);
                    self.persist(&id);
                }
                Some(leaf) => {
                    if let Some(a) = self.apps.get_mut(&id) {
                        a.state = AppState::ACCEPTED;
                        a.diagnostics =
                            "Recovered after a ResourceManager restart; starting a new attempt."
                                .into();
                    }
                    self.admit(id, leaf, now);
                    self.persist(&id);
                }
                None => {
                    let q = self
                        .apps
                        .get(&id)
                        .map(|a| a.queue.clone())
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

    fn max_attempts_for(&self, sub: &Submission) -> u32 {
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
    fn max_allocation_in(&self, leaf: Option<usize>) -> Resource {
        let mut max = self.max_allocation();
        if let Some(q) = leaf.and_then(|l| self.sched.tree().queues.get(l)) {
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

    fn normalize_in(&self, r: &Resource, leaf: Option<usize>) -> Result<Resource, CoreError> {
        if r.any_negative() {
            return Err(CoreError::InvalidResourceRequest(format!(
                "requested resource {r} has a negative value"
            )));
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
                return Err(CoreError::InvalidResourceRequest(format!(
                    "requested resource type=[{name}] < 0 or greater than maximum allowed allocation. \
                     Requested resource={r}, maximum allowed allocation={max}, please note that maximum \
                     allowed allocation is calculated by scheduler based on maximum resource of registered \
                     NodeManagers, which might be less than configured maximum allocation={max}"
                )));
            }
        }
        Ok(n)
    }

    /// Applies `queue-mappings` (first match wins) to the queue an application named.
    fn mapped_queue(&self, sub: &Submission) -> String {
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
    fn place(&self, id: &ApplicationId, sub: &Submission) -> Result<usize, String> {
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
    fn app_limits(&self, leaf: usize) -> (u32, u32) {
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
    fn admit(&mut self, id: ApplicationId, leaf: usize, now: u64) {
        let Some(app) = self.apps.get(&id) else {
            return;
        };
        let activated = self.sched.add_app(
            id,
            leaf,
            &app.sub.user.clone(),
            app.sub.priority,
            app.submit_seq,
            app.sub.am_resource.clone(),
        );
        self.start_activated(activated, now);
        if let Some(reason) = self.sched.waiting_reason(&id) {
            if let Some(a) = self.apps.get_mut(&id) {
                a.diagnostics = reason;
            }
        }
    }

    fn start_activated(&mut self, activated: Vec<ApplicationId>, now: u64) {
        for a in activated {
            // Never two live attempts: a recovered application whose AM still runs needs
            // no new one.
            let live = self
                .apps
                .get(&a)
                .and_then(App::current_attempt)
                .is_some_and(|att| {
                    !matches!(
                        att.state,
                        AttemptState::FAILED | AttemptState::KILLED | AttemptState::FINISHED
                    )
                });
            if live {
                continue;
            }
            if let Some(app) = self.apps.get_mut(&a) {
                if app
                    .diagnostics
                    .starts_with("Application is added to the scheduler")
                {
                    app.diagnostics.clear();
                }
            }
            self.start_attempt(a, now);
            self.persist(&a);
        }
    }

    /// `POST /apps`. Validation errors are answered to the client; queue problems end the
    /// application as FAILED with YARN's diagnostic, as YARN does.
    pub fn submit(
        &mut self,
        id: ApplicationId,
        mut sub: Submission,
        now: u64,
    ) -> Result<(), CoreError> {
        if self.apps.contains_key(&id) {
            return Err(CoreError::BadRequest(format!(
                "Application with id {id} is already present! Cannot add a duplicate!"
            )));
        }
        if id.cluster_timestamp != self.cluster_ts || id.id == 0 || id.id >= self.next_app {
            return Err(CoreError::BadRequest(format!(
                "Application id {id} was not issued by this ResourceManager; ask POST /ws/v1/cluster/apps/new-application first"
            )));
        }
        if sub.unmanaged_am {
            return Err(CoreError::BadRequest(
                "Unmanaged AMs are not supported by Spindle yet (unmanaged-AM must be false)"
                    .into(),
            ));
        }
        if sub.am_launch.commands.iter().all(|c| c.trim().is_empty()) {
            return Err(CoreError::BadRequest(
                "am-container-spec.commands.command must not be empty".into(),
            ));
        }
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
            Ok(leaf) => self.sched.tree().queues[*leaf].spec.path.clone(),
            Err(_) => self.mapped_queue(&sub),
        };
        let mut app = App {
            id,
            queue,
            sub,
            state: AppState::NEW_SAVING,
            final_status: FinalApplicationStatus::UNDEFINED,
            diagnostics: String::new(),
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
            nodes_touched: BTreeSet::new(),
        };
        self.next_submit_seq += 1;
        self.counters.apps_submitted += 1;
        let leaf = match placed {
            Ok(leaf) => leaf,
            Err(diag) => {
                app.state = AppState::FAILED;
                app.final_status = FinalApplicationStatus::FAILED;
                app.diagnostics = diag;
                app.finish_time = now;
                self.counters.apps_failed += 1;
                self.counters.apps_completed += 1;
                self.apps.insert(id, app);
                self.persist(&id);
                self.evict_completed();
                self.changed();
                return Ok(());
            }
        };
        app.state = AppState::ACCEPTED;
        self.apps.insert(id, app);
        self.admit(id, leaf, now);
        // The record is written with the attempt counted, before the client is answered.
        self.persist(&id);
        self.run_scheduler(now);
        self.changed();
        Ok(())
    }

    fn start_attempt(&mut self, id: ApplicationId, now: u64) {
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
        self.sched.set_ask(
            &id,
            AskKey {
                priority: AM_PRIORITY,
                allocation_request_id: -1,
            },
            ask,
        );
    }

    fn persist(&mut self, id: &ApplicationId) {
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
                attempts: app.attempts.len() as u32,
                memory_ms: app.memory_ms,
                vcore_ms: app.vcore_ms,
                live_attempt: Self::live_attempt_record(app),
            })));
        }
    }

    /// The current attempt of an unfinished, managed application whose AM container has
    /// been allocated and whose attempt has not ended.
    fn live_attempt_record(app: &App) -> Option<AttemptRecord> {
        if app.state.is_final() || app.sub.unmanaged_am {
            return None;
        }
        let att = app.current_attempt()?;
        if !matches!(
            att.state,
            AttemptState::ALLOCATED | AttemptState::LAUNCHED | AttemptState::RUNNING
        ) {
            return None;
        }
        Some(AttemptRecord {
            am_container: att.am_container?,
            am_node: att.am_node.clone()?,
            am_node_http: att.am_node_http.clone().unwrap_or_default(),
            start_time: att.start_time,
            host: att.host.clone(),
            rpc_port: att.rpc_port,
            tracking_url: app.tracking_url.clone(),
        })
    }

    /// `PUT /apps/{id}/state {"state":"KILLED"}`.
    pub fn kill(
        &mut self,
        id: &ApplicationId,
        caller: &Caller,
        now: u64,
    ) -> Result<KillOutcome, CoreError> {
        self.check_modify(id, caller, "kill")?;
        let app = self
            .apps
            .get_mut(id)
            .ok_or_else(|| CoreError::NotFound(format!("app with id: {id} not found")))?;
        if app.state.is_final() {
            return Ok(KillOutcome::Done(app.state));
        }
        if app.killing_since.is_none() {
            app.killing_since = Some(now);
            if app.diagnostics.is_empty() || !app.diagnostics.contains("killed") {
                app.diagnostics = "Application killed by user.".into();
            }
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

    fn try_finish_kill(&mut self, id: &ApplicationId, now: u64) -> KillOutcome {
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

    fn live_containers_of_app(&self, id: &ApplicationId) -> Vec<ContainerId> {
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
    fn finish_app(
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
        app.progress = if state == AppState::FINISHED {
            100.0
        } else {
            app.progress
        };
        app.killing_since = None;
        if let Some(d) = diag {
            app.diagnostics = d;
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
        self.changed();
    }

    /// Once a final app has no live containers: forget it in the scheduler and tell every
    /// node that ran it to clean up.
    fn maybe_retire(&mut self, id: &ApplicationId, now: u64) {
        let Some(app) = self.apps.get(id) else { return };
        if !app.state.is_final() || !self.live_containers_of_app(id).is_empty() {
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
        let activated = self.sched.remove_app(id);
        if !activated.is_empty() {
            self.start_activated(activated, now);
            self.run_scheduler(now);
        }
    }

    fn evict_completed(&mut self) {
        let finished: Vec<(u64, ApplicationId)> = self
            .apps
            .values()
            .filter(|a| a.state.is_final())
            .map(|a| (a.finish_time, a.id))
            .collect();
        if finished.len() <= self.conf.max_completed_apps {
            return;
        }
        let mut finished = finished;
        finished.sort();
        let excess = finished.len() - self.conf.max_completed_apps;
        for (_, id) in finished.into_iter().take(excess) {
            if !self.live_containers_of_app(&id).is_empty() {
                continue;
            }
            if let Some(app) = self.apps.remove(&id) {
                for c in app.attempts.iter().flat_map(|a| a.containers.iter()) {
                    self.containers.remove(c);
                }
            }
            self.effects.push(Effect::ForgetApp(id));
        }
    }

    // ------------------------------------------------------------------ queues and ACLs

    pub fn scheduler_conf(&self) -> &SchedulerConf {
        self.sched.conf()
    }

    /// Whether `caller` may modify (kill, move, reprioritize) an application: its owner, an
    /// administrator of its queue, or a cluster administrator (`yarn.admin.acl`). Everyone
    /// may when `yarn.acl.enable` is false, as in YARN.
    fn check_modify(
        &self,
        id: &ApplicationId,
        caller: &Caller,
        what: &str,
    ) -> Result<(), CoreError> {
        let app = self
            .apps
            .get(id)
            .ok_or_else(|| CoreError::NotFound(format!("app with id: {id} not found")))?;
        let conf = self.sched.conf();
        if !conf.acl_enabled
            || app.sub.user == caller.user
            || conf.admin_acl.allows(&caller.user, &caller.groups)
        {
            return Ok(());
        }
        let tree = self.sched.tree();
        if let Some(leaf) = tree.leaf(&app.queue) {
            if tree.acl_allows(leaf, &caller.user, &caller.groups, true) {
                return Ok(());
            }
        }
        Err(CoreError::Forbidden(format!(
            "User {} does not have privilege to {what} application {id}: only its owner ({}), an administrator of queue {} or a cluster administrator may",
            caller.user, app.sub.user, app.queue
        )))
    }

    /// `GET /queues/{queue}/access`: whether `caller` holds `acl` on `queue`.
    pub fn queue_access(
        &self,
        queue: &str,
        caller: &Caller,
        acl: QueueAclType,
    ) -> Result<bool, CoreError> {
        let tree = self.sched.tree();
        let idx = tree
            .find(queue)
            .ok_or_else(|| CoreError::NotFound(format!("queue {queue} not found")))?;
        let conf = self.sched.conf();
        if !conf.acl_enabled || conf.admin_acl.allows(&caller.user, &caller.groups) {
            return Ok(true);
        }
        let admin = acl == QueueAclType::AdministerQueue;
        // Queue admins may also submit, as in YARN.
        Ok(tree.acl_allows(idx, &caller.user, &caller.groups, admin)
            || (!admin && tree.acl_allows(idx, &caller.user, &caller.groups, true)))
    }

    /// `PUT /apps/{id}/queue`: moves a running or accepted application, with its usage, to
    /// another RUNNING leaf whose limits admit it. Returns the new leaf's path.
    pub fn move_app(
        &mut self,
        id: &ApplicationId,
        queue: &str,
        caller: &Caller,
        now: u64,
    ) -> Result<String, CoreError> {
        self.check_modify(id, caller, "move")?;
        let app = self
            .apps
            .get(id)
            .ok_or_else(|| CoreError::NotFound(format!("app with id: {id} not found")))?;
        if app.state.is_final() || app.killing_since.is_some() {
            return Err(CoreError::WrongState(format!(
                "App in {} state cannot be moved.",
                app.state
            )));
        }
        let tree = self.sched.tree();
        let target = tree.find(queue).ok_or_else(|| {
            CoreError::BadRequest(format!(
                "Failed to move {id} to queue {queue}: queue does not exist"
            ))
        })?;
        let q = &tree.queues[target];
        if !q.is_leaf() {
            return Err(CoreError::BadRequest(format!(
                "Failed to move {id} to queue {queue}: {} is not a leaf queue",
                q.spec.path
            )));
        }
        if tree
            .path_up(target)
            .any(|x| tree.queues[x].spec.state == QueueState::Stopped)
        {
            return Err(CoreError::BadRequest(format!(
                "Failed to move {id} to queue {}: the queue is STOPPED",
                q.spec.path
            )));
        }
        let conf = self.sched.conf();
        if conf.acl_enabled
            && !tree.acl_allows(target, &caller.user, &caller.groups, false)
            && !tree.acl_allows(target, &caller.user, &caller.groups, true)
            && !conf.admin_acl.allows(&caller.user, &caller.groups)
        {
            return Err(CoreError::Forbidden(format!(
                "User {} may not submit to queue {}",
                caller.user, q.spec.path
            )));
        }
        let path = q.spec.path.clone();
        if path == app.queue {
            return Ok(path);
        }
        let (max_apps, _) = self.app_limits(target);
        if q.apps.len() as u64 >= u64::from(max_apps) {
            return Err(CoreError::BadRequest(format!(
                "Failed to move {id} to queue {path}: it already has {} applications",
                q.apps.len()
            )));
        }
        let used = self
            .sched
            .app(id)
            .map(|a| a.used.clone())
            .unwrap_or_default();
        let calc = self.sched.calculator();
        for x in tree.path_up(target) {
            let after = tree.queues[x].used.plus(&used);
            if !scheduler::queues::within(calc, &after, &tree.queues[x].maximum) {
                return Err(CoreError::BadRequest(format!(
                    "Failed to move {id} to queue {path}: its usage {used} would exceed the maximum of {}",
                    tree.queues[x].spec.path
                )));
            }
        }
        self.sched.move_app(id, target);
        if let Some(a) = self.apps.get_mut(id) {
            a.queue = path.clone();
        }
        self.persist(id);
        self.run_scheduler(now);
        self.changed();
        Ok(path)
    }

    /// `PUT /apps/{id}/priority`: the effective priority (clamped to
    /// `[0, yarn.cluster.max-application-priority]`).
    pub fn set_priority(
        &mut self,
        id: &ApplicationId,
        priority: i32,
        caller: &Caller,
        now: u64,
    ) -> Result<i32, CoreError> {
        self.check_modify(id, caller, "update the priority of")?;
        let app = self
            .apps
            .get(id)
            .ok_or_else(|| CoreError::NotFound(format!("app with id: {id} not found")))?;
        if app.state.is_final() {
            return Err(CoreError::WrongState(format!(
                "Application {id} is in {} state; its priority cannot be updated",
                app.state
            )));
        }
        let p = priority.clamp(0, self.sched.conf().max_application_priority.max(0));
        if let Some(a) = self.apps.get_mut(id) {
            a.sub.priority = p;
        }
        self.sched.set_priority(id, p);
        self.persist(id);
        self.run_scheduler(now);
        self.changed();
        Ok(p)
    }

    /// Applies a new, parsed and self-consistent scheduler configuration. Refuses, changing
    /// nothing, when live applications forbid it: a queue that holds applications is removed
    /// or turned into a parent.
    pub fn reconfigure(&mut self, conf: SchedulerConf, now: u64) -> Result<(), CoreError> {
        let new_tree = scheduler::QueueTree::build(&conf.root);
        let mut leaves = BTreeMap::new();
        for app in self
            .apps
            .values()
            .filter(|a| !a.state.is_final() || self.sched.app(&a.id).is_some())
        {
            if self.sched.app(&app.id).is_none() {
                continue;
            }
            match new_tree.find(&app.queue) {
                Some(i) if new_tree.queues[i].is_leaf() => {
                    leaves.insert(app.id, new_tree.queues[i].spec.path.clone());
                }
                Some(_) => {
                    return Err(CoreError::BadRequest(format!(
                        "Failed to re-init queues : queue {} has running applications and cannot become a parent queue (it must be STOPPED and empty)",
                        app.queue
                    )))
                }
                None => {
                    return Err(CoreError::BadRequest(format!(
                        "Failed to re-init queues : queue {} cannot be removed: it still has applications (application {} is {})",
                        app.queue, app.id, app.state
                    )))
                }
            }
        }
        let activated = self.sched.reconfigure(conf, &leaves);
        for (id, path) in &leaves {
            if let Some(a) = self.apps.get_mut(id) {
                a.queue = path.clone();
            }
        }
        self.start_activated(activated, now);
        self.run_scheduler(now);
        self.changed();
        Ok(())
    }

    /// Every queue's configuration, effective capacities and usage, parents before children.
    pub fn queue_views(&self) -> Vec<QueueView> {
        let tree = self.sched.tree();
        let cluster = self.sched.cluster();
        let pending = self.sched.pending_by_queue();
        let calc = self.sched.calculator();
        let mut out = Vec::with_capacity(tree.queues.len());
        for (i, q) in tree.queues.iter().enumerate() {
            let (max_apps, max_per_user) = if q.is_leaf() {
                self.app_limits(i)
            } else {
                (0, 0)
            };
            let am_limit = if q.is_leaf() {
                self.sched.am_limit(i)
            } else {
                Resource::zero()
            };
            let (apps, active, pending_apps) = if q.is_leaf() {
                (q.apps.len(), q.active_apps, q.waiting.len())
            } else {
                let leaves: Vec<&scheduler::Queue> = tree
                    .queues
                    .iter()
                    .filter(|l| {
                        l.is_leaf() && l.spec.path.starts_with(&format!("{}.", q.spec.path))
                    })
                    .collect();
                (
                    leaves.iter().map(|l| l.apps.len()).sum(),
                    leaves.iter().map(|l| l.active_apps).sum(),
                    leaves.iter().map(|l| l.waiting.len()).sum(),
                )
            };
            let users = q
                .users
                .iter()
                .map(|(name, u)| UserView {
                    name: name.clone(),
                    used: u.used.clone(),
                    am_used: u.am_used.clone(),
                    active_apps: u.active_apps,
                    pending_apps: u.pending_apps,
                    user_limit: self.sched.user_limit(i, &Resource::zero()),
                })
                .collect();
            let pct = |r: &Resource, base: &Resource| -> f64 {
                let x = scheduler::queues::ratio(calc, r, base);
                if x.is_finite() {
                    x * 100.0
                } else {
                    0.0
                }
            };
            out.push(QueueView {
                path: q.spec.path.clone(),
                name: q.spec.name.clone(),
                is_leaf: q.is_leaf(),
                parent: q.parent.map(|p| tree.queues[p].spec.path.clone()),
                state: q.spec.state,
                capacity: q.spec.capacity.clone(),
                max_capacity: q.spec.max_capacity.clone(),
                guaranteed: q.guaranteed.clone(),
                maximum: q.maximum.clone(),
                used: q.used.clone(),
                pending: pending.get(i).cloned().unwrap_or_default(),
                am_used: q.am_used.clone(),
                user_am_limit: am_limit.clone(),
                am_limit,
                absolute_capacity: q.abs_capacity,
                absolute_max_capacity: q.abs_max_capacity,
                absolute_used_capacity: pct(&q.used, cluster),
                used_capacity: pct(&q.used, &q.guaranteed),
                num_applications: apps,
                num_active_applications: active,
                num_pending_applications: pending_apps,
                num_containers: q.num_containers,
                max_applications: max_apps,
                max_applications_per_user: max_per_user,
                max_parallel_apps: q
                    .spec
                    .max_parallel_apps
                    .or(self.sched.conf().max_parallel_apps),
                user_limit_factor: q.spec.user_limit_factor,
                minimum_user_limit_percent: q.spec.minimum_user_limit_percent,
                users,
                ordering: q.spec.ordering,
                default_application_priority: q.spec.default_application_priority,
                priority: q.spec.priority,
                acl_submit: tree.acl_string(i, false),
                acl_admin: tree.acl_string(i, true),
                max_allocation: self.max_allocation_in(Some(i)),
                max_am_resource_percent: q.spec.max_am_resource_percent,
            });
        }
        out
    }

    // ------------------------------------------------------------------ containers

    /// Records a placed container. Its token is issued when the container is handed out
    /// ([`Self::container_record`]), as YARN creates container tokens when the AM pulls them:
    /// allocation stays cheap, and a container never pulled never costs a signature.
    fn allocate_container(&mut self, p: &scheduler::Placement, now: u64) -> Option<ContainerId> {
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
            },
        );
        self.counters.containers_allocated += 1;
        if let Some(g) = &p.gang {
            self.sched.gang_member(&p.app, g, cid);
        }
        Some(cid)
    }

    /// The wire record of a container, with a freshly signed token that expires with the
    /// allocation.
    fn container_record(&self, cid: &ContainerId) -> Option<Container> {
        let c = self.containers.get(cid)?;
        let user = self.apps.get(&cid.application_id())?.sub.user.clone();
        let ident = ContainerTokenIdentifier {
            container_id: *cid,
            node_id: c.node.clone(),
            app_submitter: user,
            resource: ResourceInfo::from(&c.resource),
            expiry_time_ms: c.allocated_time + self.conf.container_alloc_expiry_ms,
            rm_identifier: self.cluster_ts,
            is_am: c.is_am,
        };
        Some(Container {
            id: *cid,
            node_id: c.node.clone(),
            node_http_address: c.node_http.clone(),
            resource: ResourceInfo::from(&c.resource),
            priority: c.priority,
            container_token: token::issue_container_token(&self.secret, &ident),
            execution_type: "GUARANTEED".into(),
            allocation_request_id: c.allocation_request_id,
            version: 0,
        })
    }

    /// Runs the scheduler and hands out what it placed: AM containers are launched, the
    /// others wait for their AM's next allocate call.
    fn run_scheduler(&mut self, now: u64) {
        let placements = self.sched.schedule();
        for p in placements {
            let Some(container) = self.allocate_container(&p, now) else {
                // The node or app vanished between placement and allocation: give it back.
                self.sched.release(&p.app, &p.node, &p.resource);
                continue;
            };
            if p.is_am {
                if let Some(record) = self.container_record(&container) {
                    self.launch_am(&p.app, record, now);
                }
            } else if let Some(att) = self.apps.get_mut(&p.app).and_then(App::current_attempt_mut) {
                att.to_deliver.push(container);
            }
            self.changed();
        }
    }

    fn launch_am(&mut self, app_id: &ApplicationId, container: Container, now: u64) {
        let rm_address = self.conf.rm_address.clone();
        let Some(app) = self.apps.get_mut(app_id) else {
            return;
        };
        let max_attempts = app.max_attempts;
        let submit_time = app.submit_time;
        let mut launch: ContainerLaunchContext = app.sub.am_launch.clone();
        let Some(att) = app.current_attempt_mut() else {
            return;
        };
        att.state = AttemptState::ALLOCATED;
        att.am_container = Some(container.id);
        att.am_node = Some(container.node_id.clone());
        att.am_node_http = Some(container.node_http_address.clone());
        att.last_heard = now;
        let attempt_id = att.id;
        let env = &mut launch.environment;
        env.insert(cenv::RM_ADDRESS.into(), rm_address);
        env.insert(
            cenv::AMRM_TOKEN.into(),
            token::issue_amrm_token(&self.secret, &attempt_id),
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
            request: StartContainersRequest {
                start_container_request: vec![StartContainerRequest {
                    container_token: container.container_token,
                    container_launch_context: launch,
                }],
                hold: None,
            },
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
                        if att.state == AttemptState::ALLOCATED {
                            att.state = AttemptState::LAUNCHED;
                        }
                        att.last_heard = now;
                    }
                }
            }
            Err(diag) => {
                let diag = format!("Error launching {attempt_id}. Got exception: {diag}");
                self.complete_container(container, exit_status::INVALID, diag, now);
            }
        }
        self.changed();
    }

    /// Asks the container's NM to stop it. A container the NM has not started is released
    /// at once.
    fn kill_container(&mut self, cid: &ContainerId, exit: i32, diag: String, now: u64) {
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
    fn complete_container(&mut self, cid: &ContainerId, exit: i32, diag: String, now: u64) {
        let Some(c) = self.containers.get_mut(cid) else {
            return;
        };
        if !c.is_live() {
            return;
        }
        c.state = RmContainerState::COMPLETED;
        c.finish_time = now;
        c.exit_status = exit;
        if !diag.is_empty() {
            c.diagnostics = diag;
        }
        let c = c.clone();
        let app_id = cid.application_id();
        self.sched.release(&app_id, &c.node, &c.resource);
        if let Some(g) = &c.gang {
            self.sched
                .gang_member_ended(&app_id, g, *cid, exit != exit_status::SUCCESS);
        }
        if let Some(n) = self.nodes.get_mut(&c.node) {
            n.containers.remove(cid);
        }
        let held_ms = now.saturating_sub(c.allocated_time) as i64;
        let mut am_ended: Option<(ApplicationAttemptId, bool)> = None;
        if let Some(app) = self.apps.get_mut(&app_id) {
            app.memory_ms += c.resource.memory_mb * held_ms;
            app.vcore_ms += c.resource.vcores * held_ms;
            // A container kept across attempts is reported to the attempt that holds it now.
            let holder = app
                .current_attempt()
                .filter(|a| a.inherited.contains(cid))
                .map(|a| a.id)
                .unwrap_or(cid.attempt_id);
            if let Some(att) = app.attempt_mut(&holder) {
                att.inherited.remove(cid);
                if !c.is_am && !att.unregistered && att.state != AttemptState::FAILED {
                    att.to_report.push(ContainerStatus {
                        container_id: *cid,
                        state: ContainerState::COMPLETE,
                        exit_status: exit,
                        diagnostics: c.diagnostics.clone(),
                        gang_id: c.gang.clone(),
                    });
                }
                if c.is_am {
                    am_ended = Some((att.id, att.unregistered));
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
                    att.state = AttemptState::FINISHED;
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

    fn fail_attempt(
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
        if matches!(
            att.state,
            AttemptState::FAILED | AttemptState::FINISHED | AttemptState::KILLED
        ) {
            return;
        }
        att.state = AttemptState::FAILED;
        att.finish_time = now;
        att.diagnostics = diag.clone();
        att.to_deliver.clear();
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
                app.diagnostics =
                    format!("{diag}\nStarting attempt {} of {max}.", failed_so_far + 1);
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

    // ------------------------------------------------------------------ nodes

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
            .get(spindle_common::records::tracker::GPU_MODEL_ATTRIBUTE)
            .cloned();
        self.sched.set_gpu_model(&id, model);
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

    fn process_reports(&mut self, id: &NodeId, reports: &[ReportedContainer], now: u64) {
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

    /// The current attempt of a live application, if `cid` was allocated to it by an
    /// earlier incarnation of this RM (a lower epoch) and this RM does not know it: a
    /// container to take back after a restart.
    fn previous_epoch_attempt(&self, cid: &ContainerId) -> Option<ApplicationAttemptId> {
        if cid.epoch >= self.epoch || self.containers.contains_key(cid) {
            return None;
        }
        let app = self.apps.get(&cid.application_id())?;
        let att = app.current_attempt()?;
        // Its own, or one an earlier attempt passed on (keep-containers).
        let ours = att.id == cid.attempt_id
            || (app.sub.keep_containers && cid.attempt_id.attempt_id < att.id.attempt_id);
        let live = !app.state.is_final()
            && ours
            && matches!(
                att.state,
                AttemptState::ALLOCATED | AttemptState::LAUNCHED | AttemptState::RUNNING
            );
        live.then_some(att.id)
    }

    /// Takes back a running container an NM reports that an earlier incarnation of this RM
    /// allocated to a still-live attempt: it is accounted on its node, queue and user again,
    /// and if it is the attempt's AM container the attempt stops waiting for it. False (the
    /// NM is told to stop it) when it belongs to no live attempt or no longer fits the node.
    fn recover_container(&mut self, node: &NodeId, r: &ReportedContainer, now: u64) -> bool {
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
        let is_am = att.am_container == Some(r.id);
        if is_am {
            att.awaiting_am_until = None;
        }
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
            },
        );
        self.sched.charge(&app_id, node, &r.resource);
        self.counters.containers_recovered += 1;
        self.changed();
        true
    }

    /// A container of a live attempt that ended while this RM was down (allocated by an
    /// earlier incarnation): its AM is told, once.
    fn report_recovered_completion(&mut self, r: &ReportedContainer, now: u64) {
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
        if att.am_container == Some(r.id) {
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
            att.awaiting_am_until = None;
            self.fail_attempt(&attempt, diag, counts, now);
            return;
        }
        if !att.containers.insert(r.id) {
            return;
        }
        att.to_report.push(ContainerStatus {
            container_id: r.id,
            state: ContainerState::COMPLETE,
            exit_status: r.exit_status,
            diagnostics: r.diagnostics.clone(),
            gang_id: None,
        });
        self.changed();
    }

    fn lose_node(&mut self, id: &NodeId, now: u64) {
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
    fn deactivate_node(
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

    // ------------------------------------------------------------------ AM protocol

    /// Checks an AM-RM token and that it names the current attempt of a live application.
    pub fn authenticate_am(&self, tok: &str) -> Result<ApplicationAttemptId, CoreError> {
        let attempt = token::verify_amrm_token(&self.secret, tok)
            .map_err(|e| CoreError::InvalidToken(e.to_string()))?;
        let app = self.apps.get(&attempt.application_id).ok_or_else(|| {
            CoreError::InvalidToken(format!("application {} is unknown", attempt.application_id))
        })?;
        match app.current_attempt() {
            Some(a) if a.id == attempt => Ok(attempt),
            _ => Err(CoreError::InvalidToken(format!(
                "{attempt} is not the current attempt"
            ))),
        }
    }

    fn live_attempt_mut(
        &mut self,
        attempt: &ApplicationAttemptId,
    ) -> Result<&mut Attempt, CoreError> {
        let app = self.apps.get_mut(&attempt.application_id).ok_or_else(|| {
            CoreError::NotFound(format!("application {} not found", attempt.application_id))
        })?;
        if app.state.is_final() {
            return Err(CoreError::WrongState(format!(
                "Application {} is already {}",
                app.id, app.state
            )));
        }
        let att = app
            .attempt_mut(attempt)
            .ok_or_else(|| CoreError::NotFound(format!("attempt {attempt} not found")))?;
        if matches!(
            att.state,
            AttemptState::FAILED | AttemptState::KILLED | AttemptState::FINISHED
        ) {
            return Err(CoreError::WrongState(format!(
                "Application attempt {attempt} has already ended ({})",
                att.state
            )));
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
        if att.registered {
            return Err(CoreError::WrongState(format!(
                "Application Master is already registered : {}",
                attempt.application_id
            )));
        }
        att.registered = true;
        att.state = AttemptState::RUNNING;
        att.host = host;
        att.rpc_port = rpc_port;
        att.last_heard = now;
        let app = self
            .apps
            .get_mut(&attempt.application_id)
            .ok_or_else(|| CoreError::NotFound(attempt.to_string()))?;
        app.state = AppState::RUNNING;
        app.tracking_url = tracking_url;
        if app.launch_time == 0 {
            app.launch_time = now;
        }
        let queue = app.queue.clone();
        self.persist(&attempt.application_id);
        self.changed();
        Ok((self.max_allocation(), queue))
    }

    /// The live containers `attempt` inherited from earlier attempts, as YARN's register
    /// answer lists them (`containersFromPreviousAttempts`), with fresh tokens.
    pub fn inherited_containers(&self, attempt: &ApplicationAttemptId) -> Vec<Container> {
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

    pub fn am_allocate(
        &mut self,
        attempt: &ApplicationAttemptId,
        response_id: i32,
        asks: Vec<AskUpdate>,
        release: Vec<ContainerId>,
        progress: f32,
        now: u64,
    ) -> Result<AllocateReply, CoreError> {
        {
            let att = self.live_attempt_mut(attempt)?;
            if !att.registered {
                return Err(CoreError::NotRegistered(*attempt));
            }
            att.last_heard = now;
            let _ = response_id;
        }
        let app_id = attempt.application_id;
        // Validate every ask before applying any, so a bad call changes nothing.
        let mut normalized = Vec::with_capacity(asks.len());
        for a in asks {
            if a.priority < 0 {
                return Err(CoreError::InvalidResourceRequest(format!(
                    "priority {} is negative",
                    a.priority
                )));
            }
            let leaf = self.sched.app(&app_id).map(|x| x.queue);
            let cap = self.normalize_in(&a.capability, leaf)?;
            normalized.push((a, cap));
        }
        for (a, cap) in normalized {
            let key = AskKey {
                priority: a.priority,
                allocation_request_id: a.allocation_request_id,
            };
            let mut ask = self
                .sched
                .app(&app_id)
                .and_then(|s| s.asks.get(&key))
                .cloned()
                .unwrap_or_else(|| Ask::new(cap.clone(), 0));
            ask.capability = cap;
            if let Some((gid, params)) = &a.gang {
                self.sched.set_gang(&app_id, gid, params.clone(), now);
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
            self.sched.set_ask(&app_id, key, ask);
        }
        for c in release {
            if c.attempt_id.application_id != app_id {
                continue;
            }
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
        self.run_scheduler(now);
        let num_nodes = self.sched.nodes().schedulable_count() as i32;
        let headroom = self.headroom(&app_id);
        let att = self.live_attempt_mut(attempt)?;
        att.response_id = att.response_id.wrapping_add(1);
        let pulled = std::mem::take(&mut att.to_deliver);
        let completed = std::mem::take(&mut att.to_report);
        let response_id = att.response_id;
        let allocated: Vec<Container> = pulled
            .iter()
            .filter_map(|c| self.container_record(c))
            .collect();
        let gangs = self.gang_statuses(&app_id);
        if let Some(w) = gangs.iter().find(|g| {
            matches!(
                g.state,
                spindle_common::records::am::GangState::PENDING
                    | spindle_common::records::am::GangState::RESERVED
            )
        }) {
            if let Some(a) = self.apps.get_mut(&app_id) {
                a.diagnostics = format!("Gang {} is waiting: {}", w.id, w.diagnostics);
            }
        } else if let Some(a) = self.apps.get_mut(&app_id) {
            if a.diagnostics.starts_with("Gang ") {
                a.diagnostics.clear();
            }
        }
        let reply = AllocateReply {
            response_id,
            gangs,
            allocated,
            completed,
            headroom,
            num_cluster_nodes: num_nodes,
            updated_nodes: Vec::new(),
        };
        for c in &reply.allocated {
            if let Some(rc) = self.containers.get_mut(&c.id) {
                if rc.state == RmContainerState::ALLOCATED {
                    rc.state = RmContainerState::ACQUIRED;
                }
            }
        }
        self.changed();
        Ok(reply)
    }

    /// Every gang of an application, as its AM hears of them.
    pub fn gang_statuses(
        &self,
        app: &ApplicationId,
    ) -> Vec<spindle_common::records::am::GangStatus> {
        use scheduler::gang::GangPhase;
        use spindle_common::records::am::{GangState, GangStatus};
        let Some(a) = self.sched.app(app) else {
            return vec![];
        };
        a.gangs
            .iter()
            .map(|(id, g)| GangStatus {
                id: id.clone(),
                state: match g.phase {
                    GangPhase::Pending => GangState::PENDING,
                    GangPhase::Reserved => GangState::RESERVED,
                    GangPhase::Allocated => GangState::ALLOCATED,
                    GangPhase::TimedOut => GangState::TIMED_OUT,
                    GangPhase::Failed => GangState::FAILED,
                },
                size: g.size,
                diagnostics: g.diagnostics.clone(),
                reserved_nodes: g.reserved.clone(),
                failed_containers: g.failed.clone(),
            })
            .collect()
    }

    /// What the application could still get: the least of the cluster's free resources,
    /// its queue's room below the maximum on every level, and its user's room below the
    /// user limit (YARN's headroom).
    fn headroom(&self, app: &ApplicationId) -> Resource {
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
            free = scheduler::queues::min_each(&free, &room);
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
        scheduler::queues::min_each(&free, &room)
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
        if !att.registered {
            return Err(CoreError::NotRegistered(*attempt));
        }
        att.unregistered = true;
        att.unregistered_at = Some(now);
        att.state = AttemptState::FINISHING;
        let app_id = attempt.application_id;
        if let Some(app) = self.apps.get_mut(&app_id) {
            if !tracking_url.is_empty() {
                app.tracking_url = tracking_url;
            }
        }
        let status = match status {
            FinalApplicationStatus::UNDEFINED => FinalApplicationStatus::FAILED,
            s => s,
        };
        self.finish_app(&app_id, AppState::FINISHED, status, Some(diagnostics), now);
        Ok(())
    }

    // ------------------------------------------------------------------ time

    /// Liveness of nodes and AMs, allocation expiry, kill deadlines, AM exit grace.
    pub fn tick(&mut self, now: u64) {
        for (app, id, hard, diag) in self.sched.expire_gangs(now, self.conf.gang_timeout_ms) {
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
                a.diagnostics = format!("Gang {id}: {diag}");
            }
            self.changed();
        }
        let expired_nodes: Vec<NodeId> = self
            .nodes
            .values()
            .filter(|n| {
                !n.state.is_inactive()
                    && now.saturating_sub(n.last_heartbeat) > self.conf.nm_expiry_ms
            })
            .map(|n| n.id.clone())
            .collect();
        for n in expired_nodes {
            self.lose_node(&n, now);
        }
        let mut am_expired = Vec::new();
        let mut am_linger = Vec::new();
        let mut killing = Vec::new();
        let mut am_unreported = Vec::new();
        for app in self.apps.values() {
            if app.killing_since.is_some() {
                killing.push(app.id);
            }
            if let Some(att) = app.current_attempt() {
                if att.awaiting_am_until.is_some_and(|t| now > t) && !app.state.is_final() {
                    am_unreported.push(att.id);
                }
                let live_am = matches!(att.state, AttemptState::LAUNCHED | AttemptState::RUNNING);
                if live_am
                    && !app.state.is_final()
                    && now.saturating_sub(att.last_heard) > self.conf.am_expiry_ms
                {
                    am_expired.push(att.id);
                }
                if let (Some(at), Some(c)) = (att.unregistered_at, att.am_container) {
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
                self.conf.nm_expiry_ms
            );
            self.fail_attempt(&a, diag, false, now);
        }
        for a in am_expired {
            let c = self
                .apps
                .get(&a.application_id)
                .and_then(|app| app.attempt(&a))
                .and_then(|x| x.am_container);
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
        let expired: Vec<ContainerId> = self
            .containers
            .values()
            .filter(|c| {
                matches!(
                    c.state,
                    RmContainerState::ALLOCATED | RmContainerState::ACQUIRED
                )
            })
            .filter(|c| now.saturating_sub(c.allocated_time) > self.conf.container_alloc_expiry_ms)
            .map(|c| c.id)
            .collect();
        for c in expired {
            self.complete_container(
                &c,
                exit_status::ABORTED,
                "Container expired since it was unused".into(),
                now,
            );
        }
        self.run_scheduler(now);
    }

    // ------------------------------------------------------------------ checks

    /// The invariants every step must keep: no node over-allocated, node and app usage
    /// equal the sum of their live containers, every live container belongs to one app's
    /// attempt and one node.
    pub fn sanity_check(&self) -> Result<(), String> {
        self.sched.check()?;
        let mut node_use: BTreeMap<&NodeId, Resource> = BTreeMap::new();
        let mut app_use: BTreeMap<ApplicationId, Resource> = BTreeMap::new();
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
        for (id, n) in &self.nodes {
            if n.state.is_inactive() && !n.containers.is_empty() {
                return Err(format!("inactive node {id} still holds containers"));
            }
        }
        Ok(())
    }
}

impl Attempt {
    fn new(id: ApplicationAttemptId, now: u64, placeholder: bool) -> Self {
        Self {
            id,
            state: if placeholder {
                AttemptState::FAILED
            } else {
                AttemptState::SCHEDULED
            },
            start_time: now,
            finish_time: if placeholder { now } else { 0 },
            am_container: None,
            am_node: None,
            am_node_http: None,
            registered: false,
            unregistered: false,
            host: String::new(),
            rpc_port: -1,
            response_id: 0,
            last_heard: now,
            next_container_seq: 0,
            containers: BTreeSet::new(),
            to_deliver: Vec::new(),
            to_report: Vec::new(),
            diagnostics: if placeholder {
                "Attempt from before a ResourceManager restart".into()
            } else {
                String::new()
            },
            unregistered_at: None,
            awaiting_am_until: None,
            inherited: BTreeSet::new(),
        }
    }
}

impl HeartbeatReply {
    fn resync(interval_ms: u64) -> Self {
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
