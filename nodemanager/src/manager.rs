//! The single owner of the node's containers: an actor fed by typed commands.
//!
//! HTTP handlers, the status updater, and the per-container tasks (localizer, reaper,
//! liveness poller, SIGKILL timer) never touch the table: they send a [`Command`] and, where
//! they need an answer, wait on its oneshot reply. The actor's handling of a command is
//! synchronous (a signal, a `spawn`, a small store write), so one slow container never holds
//! the others; anything slow (copying local resources, waiting for a process) runs in its own
//! task and reports back with another command.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use spindle_common::env;
use spindle_common::ids::{ApplicationId, ContainerId, NodeId};
use spindle_common::records::node::{
    ContainerLaunchContext, FailedContainerRequest, LaunchHold, ReleaseContainersResponse,
    StartContainerRequest, StartContainersResponse, StopContainersResponse,
};
use spindle_common::records::tracker::NmContainerReport;
use spindle_common::resource::Resource;
use spindle_common::states::{exit_status, NmContainerState};
use spindle_common::time::now_ms;
use spindle_common::token::{verify_container_token, ContainerTokenIdentifier, TokenSecret};
use tokio::sync::{mpsc, oneshot, watch, Notify};
use tracing::{debug, error, info, info_span, warn, Instrument};

use crate::containers::{
    Container, ContainerTable, Outcome, ProcessExit, StopAction, StopReason, APP_FINISHED,
};
use crate::launcher::{
    expand_placeholders, file_tail, ContainerExecutor, Gate, LaunchSpec, StopSignal,
};
use crate::metrics::NmMetrics;
use crate::plugins::Plugins;
use crate::store::{CompletedRecord, ContainerRecord, Store};

/// How often a re-adopted container (not our child) is checked for life.
pub const ADOPTED_POLL_INTERVAL: Duration = Duration::from_millis(500);
/// Acknowledged (`DONE`) containers kept for REST before the oldest are forgotten.
pub const MAX_DONE_RETAINED: usize = 500;
const CHANNEL_DEPTH: usize = 1024;

/// What the actor knows about the node that never changes while it runs.
#[derive(Debug, Clone)]
pub struct NodeContext {
    pub node_id: NodeId,
    /// First local dir: where work dirs go. Non-empty by construction.
    pub local_dirs: Vec<PathBuf>,
    pub log_dirs: Vec<PathBuf>,
    pub conf_dir: PathBuf,
    /// Whitelisted variables of the NM's own environment, captured at start.
    pub inherited_env: BTreeMap<String, String>,
    pub sigkill_delay: Duration,
    /// How long a held gang start waits for its release when the call names no timeout.
    pub launch_hold_timeout: Duration,
    /// Who containers run as.
    pub run_as: crate::runas::RunAs,
    pub stderr_tail_bytes: u64,
    pub capacity: Resource,
    /// Node-wide limits added to every container's (strict CPU, pids limit).
    pub isolation: crate::isolation::IsolationConfig,
}

/// The node as REST shows it.
#[derive(Debug, Clone)]
pub struct NodeView {
    pub started_ms: u64,
    /// Last heartbeat the RM answered; 0 before the first.
    pub last_heartbeat_ms: u64,
    pub registered: bool,
}

/// An application as REST shows it.
#[derive(Debug, Clone)]
pub struct AppView {
    pub id: ApplicationId,
    pub user: String,
    pub state: &'static str,
    pub containers: Vec<ContainerId>,
}

type Reply<T> = oneshot::Sender<T>;

/// Everything the actor can be asked or told.
pub enum Command {
    /// Start containers; with `hold`, the reply waits until all are held or failed.
    Start {
        requests: Vec<StartContainerRequest>,
        hold: Option<LaunchHold>,
        reply: Reply<StartContainersResponse>,
    },
    /// Let held containers run.
    Release {
        ids: Vec<ContainerId>,
        reply: Reply<ReleaseContainersResponse>,
    },
    /// A held start's timeout: stop what was not released.
    HoldExpired {
        group: u64,
    },
    Stop {
        ids: Vec<ContainerId>,
        reply: Reply<StopContainersResponse>,
    },
    Node {
        reply: Reply<NodeView>,
    },
    Apps {
        reply: Reply<Vec<AppView>>,
    },
    Containers {
        reply: Reply<Vec<Container>>,
    },
    Container {
        id: ContainerId,
        reply: Reply<Option<Container>>,
    },
    Metrics {
        reply: Reply<NmMetrics>,
    },
    /// A resource plugin's devices and who holds them (None: no plugin for that type).
    Resource {
        name: String,
        reply: Reply<Option<crate::plugins::ResourceView>>,
    },
    /// The RM accepted our registration.
    Registered {
        secret: TokenSecret,
        rm_identifier: u64,
    },
    /// What to tell the RM in a heartbeat or registration.
    Reports {
        reply: Reply<Vec<NmContainerReport>>,
    },
    /// The RM answered a heartbeat.
    HeartbeatAnswered {
        containers_to_cleanup: Vec<ContainerId>,
        applications_to_cleanup: Vec<ApplicationId>,
        containers_to_be_removed: Vec<ContainerId>,
    },
    Localized {
        id: ContainerId,
        result: Result<(), (bool, String)>,
    },
    Exited {
        id: ContainerId,
        exit: ProcessExit,
        stderr_tail: String,
    },
    KillDeadline {
        id: ContainerId,
    },
    /// Stops every live container; replies once none is live.
    StopAll {
        reason: StopReason,
        reply: Reply<()>,
    },
    /// Ends the actor. Containers are left as they are.
    Shutdown {
        reply: Reply<()>,
    },
}

/// The actor is gone (the NM is stopping).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the NodeManager is shutting down")]
pub struct Unavailable;

/// A cheap, cloneable way to talk to the actor.
#[derive(Clone, Debug)]
pub struct NmHandle {
    tx: mpsc::Sender<Command>,
}

impl NmHandle {
    async fn ask<T>(&self, make: impl FnOnce(Reply<T>) -> Command) -> Result<T, Unavailable> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(make(tx)).await.map_err(|_| Unavailable)?;
        rx.await.map_err(|_| Unavailable)
    }
    async fn tell(&self, cmd: Command) -> Result<(), Unavailable> {
        self.tx.send(cmd).await.map_err(|_| Unavailable)
    }

    pub async fn start(
        &self,
        requests: Vec<StartContainerRequest>,
        hold: Option<LaunchHold>,
    ) -> Result<StartContainersResponse, Unavailable> {
        self.ask(|reply| Command::Start {
            requests,
            hold,
            reply,
        })
        .await
    }
    pub async fn release(
        &self,
        ids: Vec<ContainerId>,
    ) -> Result<ReleaseContainersResponse, Unavailable> {
        self.ask(|reply| Command::Release { ids, reply }).await
    }
    pub async fn stop(&self, ids: Vec<ContainerId>) -> Result<StopContainersResponse, Unavailable> {
        self.ask(|reply| Command::Stop { ids, reply }).await
    }
    pub async fn node(&self) -> Result<NodeView, Unavailable> {
        self.ask(|reply| Command::Node { reply }).await
    }
    pub async fn apps(&self) -> Result<Vec<AppView>, Unavailable> {
        self.ask(|reply| Command::Apps { reply }).await
    }
    pub async fn containers(&self) -> Result<Vec<Container>, Unavailable> {
        self.ask(|reply| Command::Containers { reply }).await
    }
    pub async fn container(&self, id: ContainerId) -> Result<Option<Container>, Unavailable> {
        self.ask(|reply| Command::Container { id, reply }).await
    }
    pub async fn metrics(&self) -> Result<NmMetrics, Unavailable> {
        self.ask(|reply| Command::Metrics { reply }).await
    }
    pub async fn resource(
        &self,
        name: String,
    ) -> Result<Option<crate::plugins::ResourceView>, Unavailable> {
        self.ask(|reply| Command::Resource { name, reply }).await
    }
    pub async fn registered(
        &self,
        secret: TokenSecret,
        rm_identifier: u64,
    ) -> Result<(), Unavailable> {
        self.tell(Command::Registered {
            secret,
            rm_identifier,
        })
        .await
    }
    pub async fn reports(&self) -> Result<Vec<NmContainerReport>, Unavailable> {
        self.ask(|reply| Command::Reports { reply }).await
    }
    pub async fn heartbeat_answered(
        &self,
        containers_to_cleanup: Vec<ContainerId>,
        applications_to_cleanup: Vec<ApplicationId>,
        containers_to_be_removed: Vec<ContainerId>,
    ) -> Result<(), Unavailable> {
        self.tell(Command::HeartbeatAnswered {
            containers_to_cleanup,
            applications_to_cleanup,
            containers_to_be_removed,
        })
        .await
    }
    pub async fn stop_all(&self, reason: StopReason) -> Result<(), Unavailable> {
        self.ask(|reply| Command::StopAll { reason, reply }).await
    }
    pub async fn shutdown(&self) -> Result<(), Unavailable> {
        self.ask(|reply| Command::Shutdown { reply }).await
    }
}

/// The actor's state. Built by [`Manager::new`], run by [`Manager::run`].
/// One held start call (a gang's members on this node).
struct HoldGroup {
    /// Not yet released, stopped or complete.
    members: Vec<ContainerId>,
    /// Still being localized and set up; the call is answered when none is left.
    waiting: HashSet<ContainerId>,
    /// The answer being built (containers that fail to set up move to `failedRequests`).
    resp: StartContainersResponse,
    reply: Option<Reply<StartContainersResponse>>,
}

pub struct Manager {
    ctx: NodeContext,
    table: ContainerTable,
    /// Launch specs of containers still localizing.
    pending: HashMap<ContainerId, LaunchSpec>,
    /// Held starts (gang launches) by number, and which one a container belongs to.
    holds: BTreeMap<u64, HoldGroup>,
    held_in: HashMap<ContainerId, u64>,
    next_hold: u64,
    /// The gates of held containers (`SCHEDULED`): opened by a release, dropped by a stop.
    gates: HashMap<ContainerId, Gate>,
    secret: Option<TokenSecret>,
    rm_identifier: u64,
    executor: Arc<dyn ContainerExecutor>,
    plugins: Plugins,
    store: Option<Store>,
    metrics: NmMetrics,
    tx: mpsc::Sender<Command>,
    rx: mpsc::Receiver<Command>,
    /// Wakes the status updater for an out-of-band heartbeat.
    wake: Arc<Notify>,
    /// Flips to true when the NM stops: container tasks let go of their processes.
    stopping: watch::Receiver<bool>,
    started_ms: u64,
    last_heartbeat_ms: u64,
    drain_waiters: Vec<Reply<()>>,
    cleaned_apps: HashSet<ApplicationId>,
    /// Set by [`Command::StopAll`]: the NM is going away and starts nothing new.
    closing: bool,
    /// The recovery store needs writing: set by [`Manager::persist`], written once per batch
    /// of commands, so a burst of starts costs one fsync instead of one each.
    dirty: std::cell::Cell<bool>,
}

impl Manager {
    pub fn new(
        ctx: NodeContext,
        executor: Arc<dyn ContainerExecutor>,
        plugins: Plugins,
        store: Option<Store>,
        wake: Arc<Notify>,
        stopping: watch::Receiver<bool>,
    ) -> (Self, NmHandle) {
        let (tx, rx) = mpsc::channel(CHANNEL_DEPTH);
        let metrics = NmMetrics {
            capacity: ctx.capacity.clone(),
            ..Default::default()
        };
        let m = Self {
            ctx,
            table: ContainerTable::new(),
            pending: HashMap::new(),
            holds: BTreeMap::new(),
            held_in: HashMap::new(),
            next_hold: 0,
            gates: HashMap::new(),
            secret: None,
            rm_identifier: 0,
            executor,
            plugins,
            store,
            metrics,
            tx: tx.clone(),
            rx,
            wake,
            stopping,
            started_ms: now_ms(),
            last_heartbeat_ms: 0,
            drain_waiters: Vec::new(),
            cleaned_apps: HashSet::new(),
            closing: false,
            dirty: std::cell::Cell::new(false),
        };
        (m, NmHandle { tx })
    }

    /// Processes commands until [`Command::Shutdown`].
    pub async fn run(mut self) {
        'outer: while let Some(cmd) = self.rx.recv().await {
            let mut next = Some(cmd);
            // Handle what is already queued before writing the store once for all of it.
            while let Some(cmd) = next.take() {
                if let Command::Shutdown { reply } = cmd {
                    self.flush();
                    let _ = reply.send(());
                    break 'outer;
                }
                self.handle(cmd);
                next = self.rx.try_recv().ok();
            }
            self.flush();
        }
        self.flush();
        debug!("container manager stopped");
    }

    /// Writes the recovery store if anything changed since the last write.
    fn flush(&self) {
        if self.dirty.replace(false) {
            self.write_store();
        }
    }

    fn handle(&mut self, cmd: Command) {
        let now = now_ms();
        match cmd {
            Command::Start {
                requests,
                hold: None,
                reply,
            } => {
                let _ = reply.send(self.start(requests, now));
            }
            Command::Start {
                requests,
                hold: Some(hold),
                reply,
            } => self.start_held(requests, hold, reply, now),
            Command::Release { ids, reply } => {
                let _ = reply.send(self.release(ids));
            }
            Command::HoldExpired { group } => self.hold_expired(group, now),
            Command::Stop { ids, reply } => {
                let mut resp = StopContainersResponse::default();
                for id in ids {
                    match self.stop(id, StopReason::AppMaster, now) {
                        Ok(()) => resp.successfully_stopped_containers.push(id),
                        Err(message) => resp.failed_requests.push(FailedContainerRequest {
                            container_id: id.to_string(),
                            exception: "YarnException".into(),
                            message,
                        }),
                    }
                }
                let _ = reply.send(resp);
            }
            Command::Node { reply } => {
                let _ = reply.send(NodeView {
                    started_ms: self.started_ms,
                    last_heartbeat_ms: self.last_heartbeat_ms,
                    registered: self.secret.is_some(),
                });
            }
            Command::Apps { reply } => {
                let apps = self
                    .table
                    .apps()
                    .map(|a| AppView {
                        id: a.id,
                        user: a.user.clone(),
                        state: self.table.app_state(a),
                        containers: a.containers.iter().copied().collect(),
                    })
                    .collect();
                let _ = reply.send(apps);
            }
            Command::Containers { reply } => {
                let _ = reply.send(self.table.iter().cloned().collect());
            }
            Command::Container { id, reply } => {
                let _ = reply.send(self.table.get(&id).cloned());
            }
            Command::Metrics { reply } => {
                let mut m = self.metrics.clone();
                m.running = self.table.running_count() as u64;
                m.allocated = self.table.allocated();
                let _ = reply.send(m);
            }
            Command::Resource { name, reply } => {
                let _ = reply.send(self.plugins.view(&name));
            }
            Command::Registered {
                secret,
                rm_identifier,
            } => {
                self.secret = Some(secret);
                self.rm_identifier = rm_identifier;
            }
            Command::Reports { reply } => {
                let _ = reply.send(self.table.reports());
            }
            Command::HeartbeatAnswered {
                containers_to_cleanup,
                applications_to_cleanup,
                containers_to_be_removed,
            } => {
                self.last_heartbeat_ms = now;
                for id in containers_to_cleanup {
                    let _ = self.stop(id, StopReason::ResourceManager, now);
                }
                for app in applications_to_cleanup {
                    if self.table.finish_app(&app) {
                        info!(app_id = %app, "application finished; stopping its containers");
                        for id in self.table.live_of_app(&app) {
                            let _ = self.stop(id, StopReason::ResourceManager, now);
                        }
                        self.maybe_clean_app(app);
                    }
                }
                if self.table.acknowledge(&containers_to_be_removed) > 0 {
                    self.table.prune_done(MAX_DONE_RETAINED);
                    self.persist();
                }
            }
            Command::Localized { id, result } => self.localized(id, result, now),
            Command::Exited {
                id,
                exit,
                stderr_tail,
            } => {
                let _g = span(&id).entered();
                if let Some(outcome) = self.table.exited(&id, &exit, &stderr_tail, now) {
                    info!(?exit, ?outcome, "container process ended");
                    self.completed(id, outcome, true);
                }
            }
            Command::KillDeadline { id } => {
                if let Some(c) = self.table.get(&id) {
                    if c.state == NmContainerState::KILLING {
                        if let Some(pgid) = c.pid {
                            let _g = span(&id).entered();
                            info!(pgid, "container ignored SIGTERM; sending SIGKILL");
                            self.signal(pgid, StopSignal::Kill);
                        }
                    }
                }
            }
            Command::StopAll { reason, reply } => {
                self.closing = true;
                for id in self.table.live_ids() {
                    let _ = self.stop(id, reason, now);
                }
                self.drain_waiters.push(reply);
                self.check_drained();
            }
            Command::Shutdown { reply } => {
                let _ = reply.send(());
            }
        }
    }

    // -----------------------------------------------------------------------------------
    // Start

    fn start(&mut self, requests: Vec<StartContainerRequest>, now: u64) -> StartContainersResponse {
        let mut resp = StartContainersResponse::default();
        for req in requests {
            match self.admit(req, now) {
                Ok(id) => resp.successfully_started_containers.push(id),
                Err(f) => {
                    warn!(container_id = %f.container_id, exception = %f.exception, message = %f.message, "start refused");
                    resp.failed_requests.push(f);
                }
            }
        }
        if !resp.successfully_started_containers.is_empty() {
            self.persist();
            self.wake.notify_one();
        }
        resp
    }

    /// Checks one start request and, if it is good, begins localizing it.
    fn admit(
        &mut self,
        req: StartContainerRequest,
        now: u64,
    ) -> Result<ContainerId, FailedContainerRequest> {
        let label = token_label(&req.container_token);
        let fail = |label: &str, exception: &str, message: String| FailedContainerRequest {
            container_id: label.to_string(),
            exception: exception.to_string(),
            message,
        };
        if self.closing {
            return Err(fail(
                &label,
                "YarnException",
                "the NodeManager is shutting down".into(),
            ));
        }
        let Some(secret) = &self.secret else {
            return Err(fail(
                &label,
                "NMNotYetReadyException",
                "the NodeManager has not registered with the ResourceManager yet".into(),
            ));
        };
        let ident = verify_container_token(secret, &req.container_token, now).map_err(|e| {
            fail(
                &label,
                "InvalidToken",
                format!("container token refused: {e}"),
            )
        })?;
        let id = ident.container_id;
        let label = id.to_string();
        if ident.node_id != self.ctx.node_id {
            return Err(fail(
                &label,
                "InvalidToken",
                format!(
                    "container token is for node {}, but this is node {}",
                    ident.node_id, self.ctx.node_id
                ),
            ));
        }
        if let Some(c) = self.table.get(&id) {
            return Err(fail(
                &label,
                "InvalidToken",
                format!(
                    "container {id} is already known to this NodeManager (state {})",
                    c.state
                ),
            ));
        }
        if !valid_user(&ident.app_submitter) {
            return Err(fail(
                &label,
                "YarnException",
                format!(
                    "invalid user name '{}' in the container token",
                    ident.app_submitter
                ),
            ));
        }
        let run_as = self
            .ctx
            .run_as
            .credentials_for(&ident.app_submitter)
            .map_err(|e| fail(&label, "YarnException", e))?;
        let ctx = &req.container_launch_context;
        if let Some(bad) = ctx.environment.iter().find(|(k, v)| !valid_env(k, v)) {
            return Err(fail(
                &label,
                "YarnException",
                format!(
                    "invalid environment variable '{}' in the launch context",
                    bad.0
                ),
            ));
        }
        // Refused now rather than failing at localization after the start call said yes.
        if let Some(e) = ctx
            .local_resources
            .keys()
            .find_map(|k| crate::launcher::resource_target(Path::new("."), k).err())
        {
            return Err(fail(&label, "YarnException", e));
        }
        let grant = self
            .plugins
            .assign(id, &ident.resource.to_resource())
            .map_err(|e| fail(&label, "YarnException", e.to_string()))?;
        let mut spec = self.launch_spec(&ident, ctx, grant.env);
        spec.run_as = run_as;
        // Every device node a plugin manages that this container was not granted is denied
        // (also when it asked for none, so a CPU-only container cannot open a GPU).
        spec.isolation.denied_devices = self
            .plugins
            .managed_devices()
            .into_iter()
            .filter(|d| !grant.devices.contains(d))
            .collect();
        spec.isolation.granted_devices = grant.devices;
        let container = Container::new(ident, spec.work_dir.clone(), spec.log_dirs.clone(), now);
        if self.table.insert(container).is_err() {
            self.plugins.release(id);
            return Err(fail(
                &label,
                "InvalidToken",
                format!("container {id} is already known"),
            ));
        }
        let span = span(&id);
        span.in_scope(
            || info!(user = %spec.user, command = %spec.command, "container accepted; localizing"),
        );
        self.pending.insert(id, spec.clone());
        let executor = Arc::clone(&self.executor);
        let tx = self.tx.clone();
        tokio::spawn(
            async move {
                let result =
                    match tokio::task::spawn_blocking(move || executor.prepare(&spec)).await {
                        Ok(Ok(())) => Ok(()),
                        Ok(Err(e)) => Err((e.is_localization(), e.to_string())),
                        Err(e) => Err((true, format!("localization task failed: {e}"))),
                    };
                let _ = tx.send(Command::Localized { id, result }).await;
            }
            .instrument(span),
        );
        Ok(id)
    }

    fn launch_spec(
        &self,
        ident: &ContainerTokenIdentifier,
        ctx: &ContainerLaunchContext,
        plugin_env: BTreeMap<String, String>,
    ) -> LaunchSpec {
        let id = ident.container_id;
        let app = id.application_id().to_string();
        let user = ident.app_submitter.clone();
        let app_local_dirs: Vec<PathBuf> = self
            .ctx
            .local_dirs
            .iter()
            .map(|d| d.join("usercache").join(&user).join("appcache").join(&app))
            .collect();
        let first_local = app_local_dirs
            .first()
            .cloned()
            .unwrap_or_else(|| std::env::temp_dir().join(&app));
        let work_dir = first_local.join(id.to_string());
        let log_dirs: Vec<PathBuf> = self
            .ctx
            .log_dirs
            .iter()
            .map(|d| d.join(&app).join(id.to_string()))
            .collect();
        let first_log = log_dirs
            .first()
            .cloned()
            .unwrap_or_else(|| work_dir.clone());

        let mut envs = self.ctx.inherited_env.clone();
        for (k, v) in &ctx.environment {
            envs.insert(k.clone(), expand_placeholders(v, &first_log));
        }
        let home = Path::new("/home").join(&user);
        let home = if home.is_dir() {
            home
        } else {
            work_dir.clone()
        };
        envs.entry(env::HOME.into())
            .or_insert_with(|| home.to_string_lossy().into_owned());
        envs.entry(env::CONF_DIR.into())
            .or_insert_with(|| self.ctx.conf_dir.to_string_lossy().into_owned());
        envs.extend(plugin_env);
        let join = |dirs: &[PathBuf]| {
            dirs.iter()
                .map(|d| d.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(",")
        };
        let port = self.ctx.node_id.port.to_string();
        for (k, v) in [
            (env::CONTAINER_ID, id.to_string()),
            (env::NM_HOST, self.ctx.node_id.host.clone()),
            (env::NM_PORT, port.clone()),
            (env::NM_HTTP_PORT, port),
            (env::LOCAL_DIRS, join(&app_local_dirs)),
            (env::LOG_DIRS, join(&log_dirs)),
            (env::USER, user.clone()),
            (env::LOGNAME, user.clone()),
            (env::PWD, work_dir.to_string_lossy().into_owned()),
        ] {
            envs.insert(k.to_string(), v);
        }
        LaunchSpec {
            container_id: id,
            user,
            command: expand_placeholders(&ctx.commands.join(" "), &first_log),
            env: envs,
            work_dir,
            app_local_dirs,
            log_dirs,
            local_resources: ctx.local_resources.clone(),
            isolation: crate::isolation::IsolationSpec::for_resource(&ident.resource.to_resource())
                .with_node_policy(&self.ctx.isolation),
            run_as: None,
        }
    }

    fn localized(&mut self, id: ContainerId, result: Result<(), (bool, String)>, now: u64) {
        let _g = span(&id).entered();
        let Some(spec) = self.pending.remove(&id) else {
            return;
        };
        if let Err((localization, diag)) = result {
            warn!(%diag, "localization failed");
            self.hold_settled(id, Some(diag.clone()));
            if let Some(o) = self.table.launch_failed(&id, localization, diag, now) {
                self.completed(id, o, true);
            }
            return;
        }
        if !self.table.may_start(&id) {
            debug!("container was stopped while localizing; not starting it");
            self.hold_settled(
                id,
                Some("the container was stopped before it started".into()),
            );
            return;
        }
        let hold = self.held_in.contains_key(&id);
        match self.executor.start(&spec, hold) {
            Ok(p) => {
                match p.gate {
                    Some(gate) => {
                        info!(
                            pid = p.pid,
                            "container process set up; held for its gang launch"
                        );
                        self.table.held(&id, p.pid, p.start_ticks);
                        self.gates.insert(id, gate);
                    }
                    None => {
                        info!(pid = p.pid, "container process started");
                        self.table.started(&id, p.pid, p.start_ticks);
                        self.metrics.launched += 1;
                    }
                }
                self.persist();
                self.spawn_reaper(id, p.exit, spec.stderr_path());
                self.hold_settled(id, None);
            }
            Err(e) => {
                warn!(error = %e, "container failed to start");
                self.hold_settled(id, Some(e.to_string()));
                if let Some(o) =
                    self.table
                        .launch_failed(&id, e.is_localization(), e.to_string(), now)
                {
                    self.completed(id, o, true);
                }
            }
        }
    }

    // -----------------------------------------------------------------------------------
    // Held starts (gang launches)

    /// Admits a held start; the reply waits until every container is held or has failed.
    fn start_held(
        &mut self,
        requests: Vec<StartContainerRequest>,
        hold: LaunchHold,
        reply: Reply<StartContainersResponse>,
        now: u64,
    ) {
        let resp = self.start(requests, now);
        if resp.successfully_started_containers.is_empty() {
            // Nothing to hold: every request was refused.
            let _ = reply.send(resp);
            return;
        }
        let group = self.next_hold;
        self.next_hold += 1;
        let waiting: HashSet<ContainerId> = resp
            .successfully_started_containers
            .iter()
            .copied()
            .collect();
        for id in &waiting {
            self.held_in.insert(*id, group);
        }
        let timeout = hold
            .timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(self.ctx.launch_hold_timeout);
        info!(
            group,
            containers = waiting.len(),
            timeout_ms = timeout.as_millis() as u64,
            "held start accepted"
        );
        self.holds.insert(
            group,
            HoldGroup {
                members: waiting.iter().copied().collect(),
                waiting,
                resp,
                reply: Some(reply),
            },
        );
        self.maybe_answer_hold(group);
        let tx = self.tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(timeout).await;
            let _ = tx.send(Command::HoldExpired { group }).await;
        });
    }

    /// A container of a held start is set up (held), or failed (`Some(why)`): the start call
    /// is answered once none is left setting up.
    fn hold_settled(&mut self, id: ContainerId, failed: Option<String>) {
        let Some(&group) = self.held_in.get(&id) else {
            return;
        };
        if let Some(g) = self.holds.get_mut(&group) {
            if !g.waiting.remove(&id) {
                return;
            }
            if let Some(message) = failed {
                g.resp.successfully_started_containers.retain(|c| *c != id);
                g.resp.failed_requests.push(FailedContainerRequest {
                    container_id: id.to_string(),
                    exception: "YarnException".into(),
                    message,
                });
            }
        }
        self.maybe_answer_hold(group);
    }

    fn maybe_answer_hold(&mut self, group: u64) {
        if let Some(g) = self.holds.get_mut(&group) {
            if g.waiting.is_empty() {
                if let Some(reply) = g.reply.take() {
                    info!(
                        group,
                        held = g.resp.successfully_started_containers.len(),
                        failed = g.resp.failed_requests.len(),
                        "held start answered"
                    );
                    let _ = reply.send(std::mem::take(&mut g.resp));
                }
            }
        }
    }

    /// Opens the gates of the named held containers, all before any book-keeping, so that
    /// they exec as close together as this node can make it.
    fn release(&mut self, ids: Vec<ContainerId>) -> ReleaseContainersResponse {
        let mut resp = ReleaseContainersResponse::default();
        let mut opened = Vec::with_capacity(ids.len());
        for id in ids {
            match self.gates.remove(&id) {
                Some(gate) => match gate.open() {
                    Ok(()) => opened.push(id),
                    Err(e) => resp.failed_requests.push(FailedContainerRequest {
                        container_id: id.to_string(),
                        exception: "YarnException".into(),
                        message: format!("cannot release container {id}: {e}"),
                    }),
                },
                None => {
                    let message = match self.table.get(&id) {
                        Some(c) => format!("container {id} is not held (state {})", c.state),
                        None => format!("Container {id} is not handled by this NodeManager"),
                    };
                    resp.failed_requests.push(FailedContainerRequest {
                        container_id: id.to_string(),
                        exception: "YarnException".into(),
                        message,
                    });
                }
            }
        }
        for id in &opened {
            if self.table.released(id) {
                self.metrics.launched += 1;
            }
            self.forget_hold(id);
        }
        // Nothing to store or tell the RM: the store keeps no state for a live container and
        // the RM already sees it RUNNING. Not waking the heartbeat or writing the store here
        // leaves this node's CPUs to the processes now starting.
        if !opened.is_empty() {
            info!(containers = opened.len(), "held containers released");
        }
        resp.successfully_released_containers = opened;
        resp
    }

    /// A held start's time is up: what was not released is stopped, and a call still waiting
    /// for its containers to be set up is answered with what there is.
    fn hold_expired(&mut self, group: u64, now: u64) {
        let Some(mut g) = self.holds.remove(&group) else {
            return;
        };
        let mut stopped = 0;
        for id in &g.members {
            self.held_in.remove(id);
            let held = self.gates.remove(id).is_some();
            let localizing = g.waiting.contains(id);
            if held || localizing {
                stopped += 1;
                let _ = self.stop(*id, StopReason::HoldExpired, now);
            }
        }
        if stopped > 0 {
            warn!(
                group,
                stopped, "held start was not released in time; its containers are stopped"
            );
        }
        if let Some(reply) = g.reply.take() {
            for id in g.waiting.drain() {
                g.resp.successfully_started_containers.retain(|c| *c != id);
                g.resp.failed_requests.push(FailedContainerRequest {
                    container_id: id.to_string(),
                    exception: "YarnException".into(),
                    message: "still being set up when the hold timed out; stopped".into(),
                });
            }
            let _ = reply.send(g.resp);
        }
    }

    /// The container is no longer held (released, stopped or complete).
    fn forget_hold(&mut self, id: &ContainerId) {
        self.gates.remove(id);
        if let Some(group) = self.held_in.remove(id) {
            if let Some(g) = self.holds.get_mut(&group) {
                g.members.retain(|m| m != id);
                if g.members.is_empty() && g.reply.is_none() {
                    self.holds.remove(&group);
                }
            }
        }
    }

    /// Waits for a child process and reports its end. Lets go when the NM stops.
    fn spawn_reaper(
        &self,
        id: ContainerId,
        exit: Pin<Box<dyn Future<Output = ProcessExit> + Send>>,
        stderr: Option<PathBuf>,
    ) {
        let tx = self.tx.clone();
        let mut stopping = self.stopping.clone();
        let tail = self.ctx.stderr_tail_bytes;
        tokio::spawn(
            async move {
                tokio::select! {
                    exit = exit => {
                        let stderr_tail = read_tail(&exit, stderr, tail).await;
                        let _ = tx.send(Command::Exited { id, exit, stderr_tail }).await;
                    }
                    _ = until_stopped(&mut stopping) => {
                        debug!("NM stopping; leaving the container process to itself");
                    }
                }
            }
            .instrument(span(&id)),
        );
    }

    /// Watches a re-adopted process, which is not our child, by polling.
    fn spawn_poller(&self, c: &Container, pid: i32) {
        let id = c.id;
        let ticks = c.start_ticks;
        let memory_mb = c.resource.memory_mb;
        let work_dir = c.work_dir.clone();
        let stderr = c.log_dirs.first().map(|d| d.join("stderr"));
        let tx = self.tx.clone();
        let executor = Arc::clone(&self.executor);
        let mut stopping = self.stopping.clone();
        let tail = self.ctx.stderr_tail_bytes;
        tokio::spawn(
            async move {
                loop {
                    tokio::select! {
                        _ = tokio::time::sleep(ADOPTED_POLL_INTERVAL) => {}
                        _ = until_stopped(&mut stopping) => return,
                    }
                    if executor.is_alive(pid, ticks) {
                        continue;
                    }
                    let exit = recorded_exit(executor.as_ref(), &work_dir);
                    let ex = Arc::clone(&executor);
                    let exit =
                        tokio::task::spawn_blocking(move || ex.adopted_ended(&id, memory_mb, exit))
                            .await
                            .unwrap_or_else(|e| {
                                ProcessExit::Unknown(format!("cannot clean up: {e}"))
                            });
                    let stderr_tail = read_tail(&exit, stderr, tail).await;
                    let _ = tx
                        .send(Command::Exited {
                            id,
                            exit,
                            stderr_tail,
                        })
                        .await;
                    return;
                }
            }
            .instrument(span(&id)),
        );
    }

    // -----------------------------------------------------------------------------------
    // Stop and completion

    fn stop(&mut self, id: ContainerId, reason: StopReason, now: u64) -> Result<(), String> {
        let _g = span(&id).entered();
        // A held process must not run now: without its gate it exits even before the signal.
        self.gates.remove(&id);
        match self.table.request_stop(&id, reason, now) {
            StopAction::Unknown => {
                Err(format!("Container {id} is not handled by this NodeManager"))
            }
            StopAction::Nothing => Ok(()),
            StopAction::CompletedBeforeStart(o) => {
                info!(?reason, "container stopped before its process started");
                self.completed(id, o, true);
                Ok(())
            }
            StopAction::SignalGroup { pgid } => {
                info!(
                    ?reason,
                    pgid, "stopping container: SIGTERM to its process group"
                );
                self.signal(pgid, StopSignal::Term);
                self.persist();
                let tx = self.tx.clone();
                let delay = self.ctx.sigkill_delay;
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let _ = tx.send(Command::KillDeadline { id }).await;
                });
                Ok(())
            }
        }
    }

    /// Book-keeping once a container is complete. `observed` is false for containers found
    /// dead during recovery: their pid may already belong to someone else.
    fn completed(&mut self, id: ContainerId, outcome: Outcome, observed: bool) {
        if observed {
            match outcome {
                Outcome::Succeeded => self.metrics.completed += 1,
                Outcome::Failed => self.metrics.failed += 1,
                Outcome::Killed => self.metrics.killed += 1,
            }
        }
        self.plugins.release(id);
        self.pending.remove(&id);
        if self.held_in.contains_key(&id) {
            self.hold_settled(
                id,
                Some("the container ended before it was released".into()),
            );
        }
        self.forget_hold(&id);
        // A stopped container's leader is gone: whatever it left behind in its group gets the
        // SIGKILL now rather than at the deadline. (Exits nobody asked for leave stragglers
        // alone, as YARN without cgroups does.)
        if observed && outcome == Outcome::Killed {
            if let Some(pgid) = self.table.get(&id).and_then(|c| c.pid) {
                self.signal(pgid, StopSignal::Kill);
            }
        }
        self.persist();
        self.wake.notify_one();
        self.maybe_clean_app(id.application_id());
        self.check_drained();
    }

    fn signal(&self, pgid: i32, sig: StopSignal) {
        if let Err(e) = self.executor.signal_group(pgid, sig) {
            warn!(error = %e, "cannot signal container");
        }
    }

    fn check_drained(&mut self) {
        if !self.drain_waiters.is_empty() && self.table.running_count() == 0 {
            for w in self.drain_waiters.drain(..) {
                let _ = w.send(());
            }
        }
    }

    /// Deletes a finished application's local dirs (its logs stay).
    fn maybe_clean_app(&mut self, app: ApplicationId) {
        let Some(a) = self.table.app(&app) else {
            return;
        };
        if self.table.app_state(a) != APP_FINISHED || !self.cleaned_apps.insert(app) {
            return;
        }
        let dirs: Vec<PathBuf> = self
            .ctx
            .local_dirs
            .iter()
            .map(|d| {
                d.join("usercache")
                    .join(&a.user)
                    .join("appcache")
                    .join(app.to_string())
            })
            .collect();
        info!(app_id = %app, "application finished here; deleting its local dirs");
        tokio::task::spawn_blocking(move || {
            for d in dirs {
                if let Err(e) = std::fs::remove_dir_all(&d) {
                    if e.kind() != std::io::ErrorKind::NotFound {
                        warn!(dir = %d.display(), error = %e, "cannot delete application dir");
                    }
                }
            }
        });
    }

    // -----------------------------------------------------------------------------------
    // Recovery and the store

    /// Takes back what the previous NM left: adopts live process groups, reports dead ones.
    pub fn recover(&mut self, records: Vec<ContainerRecord>) {
        let now = now_ms();
        for r in records {
            let id = r.container_id;
            let _g = span(&id).entered();
            let mut c = Container::new(r.token, r.work_dir, r.log_dirs, r.start_time_ms);
            c.user = r.user;
            c.pid = r.pid;
            c.start_ticks = r.start_ticks;
            c.stop = r.stop.as_deref().and_then(StopReason::parse);
            if let Some(done) = r.completed {
                c.state = done
                    .state
                    .parse()
                    .unwrap_or(NmContainerState::EXITED_WITH_FAILURE);
                c.exit_status = done.exit_status;
                c.diagnostics = done.diagnostics;
                c.finish_time_ms = Some(done.finish_time_ms);
                let _ = self.table.insert(c);
                continue;
            }
            let Some(pid) = r.pid else {
                c.state = NmContainerState::LOCALIZATION_FAILED;
                c.exit_status = exit_status::ABORTED;
                c.diagnostics =
                    "The NodeManager restarted while the container was being localized.".into();
                c.finish_time_ms = Some(now);
                info!("container was localizing when the NM stopped; reporting it aborted");
                let _ = self.table.insert(c);
                continue;
            };
            c.state = if c.stop.is_some() {
                NmContainerState::KILLING
            } else {
                NmContainerState::RUNNING
            };
            if self.executor.is_alive(pid, c.start_ticks) {
                info!(pid, "re-adopted a running container");
                // Its devices stay its own: no new container may be given them.
                self.plugins.restore(id, &r.devices);
                if c.stop.is_some() {
                    // The stop's SIGKILL deadline died with the old NM.
                    self.signal(pid, StopSignal::Kill);
                }
                self.spawn_poller(&c, pid);
                let _ = self.table.insert(c);
            } else {
                let exit = recorded_exit(self.executor.as_ref(), &c.work_dir);
                let exit = self.executor.adopted_ended(&id, c.resource.memory_mb, exit);
                let stderr = c.log_dirs.first().map(|d| d.join("stderr"));
                let tail = match &exit {
                    ProcessExit::Code(0) => String::new(),
                    _ => stderr
                        .map(|p| file_tail(&p, self.ctx.stderr_tail_bytes))
                        .unwrap_or_default(),
                };
                let _ = self.table.insert(c);
                if let Some(o) = self.table.exited(&id, &exit, &tail, now) {
                    info!(?exit, "container ended while the NM was down");
                    self.completed(id, o, false);
                }
            }
        }
        self.persist();
    }

    /// Marks the recovery store for writing at the end of the current batch of commands.
    fn persist(&self) {
        self.dirty.set(true);
    }

    fn write_store(&self) {
        let Some(store) = &self.store else {
            return;
        };
        let records: Vec<ContainerRecord> = self
            .table
            .iter()
            .filter(|c| c.state != NmContainerState::DONE)
            .map(|c| ContainerRecord {
                container_id: c.id,
                user: c.user.clone(),
                token: c.token.clone(),
                pid: c.pid,
                start_ticks: c.start_ticks,
                start_time_ms: c.start_time_ms,
                work_dir: c.work_dir.clone(),
                log_dirs: c.log_dirs.clone(),
                stop: c.stop.map(|s| s.as_str().to_string()),
                completed: c.is_complete().then(|| CompletedRecord {
                    state: c.state.to_string(),
                    exit_status: c.exit_status,
                    diagnostics: c.diagnostics.clone(),
                    finish_time_ms: c.finish_time_ms.unwrap_or(0),
                }),
                devices: self.plugins.assigned_minors(&c.id),
            })
            .collect();
        if let Err(e) = store.save(&records) {
            error!(error = %e, "cannot write the recovery store");
        }
    }
}

/// Resolves once the NM is stopping (or gone).
pub async fn until_stopped(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

fn span(id: &ContainerId) -> tracing::Span {
    info_span!("container", container_id = %id, app_id = %id.application_id())
}

fn recorded_exit(executor: &dyn ContainerExecutor, work_dir: &Path) -> ProcessExit {
    match executor.recorded_exit_code(work_dir) {
        Some(code) => ProcessExit::Code(code),
        None => ProcessExit::Unknown(
            "The container's process ended while it was not watched by this NodeManager; \
             its exit status is unknown."
                .into(),
        ),
    }
}

async fn read_tail(exit: &ProcessExit, stderr: Option<PathBuf>, max: u64) -> String {
    if matches!(exit, ProcessExit::Code(0)) || max == 0 {
        return String::new();
    }
    let Some(path) = stderr else {
        return String::new();
    };
    tokio::task::spawn_blocking(move || file_tail(&path, max))
        .await
        .unwrap_or_default()
}

/// The container id a token claims, read without verifying it: only to label a refusal.
fn token_label(token: &str) -> String {
    token
        .split_once('.')
        .and_then(|(body, _)| URL_SAFE_NO_PAD.decode(body.trim()).ok())
        .and_then(|p| serde_json::from_slice::<serde_json::Value>(&p).ok())
        .and_then(|v| v.get("containerId")?.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// A user name that is safe as a path component.
fn valid_user(u: &str) -> bool {
    !u.is_empty()
        && u.len() <= 256
        && u != "."
        && u != ".."
        && !u.starts_with('-')
        && u.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@'))
}

fn valid_env(k: &str, v: &str) -> bool {
    !k.is_empty() && !k.contains('=') && !k.contains('\0') && !v.contains('\0')
}

#[cfg(test)]
mod tests {
    use super::*;
    use spindle_common::ids::ApplicationAttemptId;
    use spindle_common::records::resource::ResourceInfo;
    use spindle_common::token::issue_container_token;

    #[test]
    fn labels_and_names() {
        let s = TokenSecret::generate().unwrap();
        let id = ContainerId::new(ApplicationAttemptId::new(ApplicationId::new(3, 4), 1), 0, 7);
        let t = issue_container_token(
            &s,
            &ContainerTokenIdentifier {
                container_id: id,
                node_id: NodeId::new("h", 1),
                app_submitter: "u".into(),
                resource: ResourceInfo::default(),
                expiry_time_ms: 0,
                rm_identifier: 0,
                is_am: false,
            },
        );
        assert_eq!(token_label(&t), id.to_string());
        assert_eq!(token_label("garbage"), "");
        assert!(valid_user("alice.b-c_d@X"));
        for bad in ["", ".", "..", "a/b", "-x", "a b"] {
            assert!(!valid_user(bad), "{bad}");
        }
        assert!(valid_env("A", "x=y"));
        assert!(!valid_env("A=B", "x"));
        assert!(!valid_env("", "x"));
    }
}
