//! The single owner of the node's containers: an actor fed by typed commands.
//!
//! HTTP handlers, the status updater, and the per-container tasks (localizer, reaper,
//! liveness poller, SIGKILL timer) never touch the table: they send a [`Command`] and, where
//! they need an answer, wait on its oneshot reply. The actor's handling of a command is
//! synchronous (a signal, a `spawn`, a small store write), so one slow container never holds
//! the others; anything slow (copying local resources, waiting for a process) runs in its own
//! task and reports back with another command.
//!
//! The actor's code is split by lifecycle concern, each an `impl Manager` block of its own:
//! - [`handle`]: the [`Command`]s and the [`NmHandle`] that sends them;
//! - `auth`: the container-token master keys the RM sent (current and previous), the digests
//!   of tokens verified at a start, and whose application a bearer token proves;
//! - `start`: admitting a start request (token, user, environment, devices), localization,
//!   and starting the process;
//! - `hold`: held starts (gang launches): holding set-up containers, release, the timeout;
//! - `reaper`: watching a container's process (our child, or a re-adopted one) until it ends;
//! - `stop`: stopping, completion book-keeping, and cleaning up a finished application;
//! - `reinit`: re-initializing a running container (YARN's `reInitializeContainer`);
//! - `update`: resizing a live container from a newer token (YARN's `updateContainer`);
//! - `recovery`: re-adopting what a previous NM left, and writing the recovery store.
//!
//! This module owns the actor's state ([`Manager`]), its loop and its dispatch; the
//! submodules must not keep state of their own or touch the table from another task.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use spindle_common::ids::{ApplicationId, ContainerId, NodeId};
use spindle_common::resource::Resource;
use spindle_common::time::now_ms;
use spindle_common::token::ContainerKeys;
use tokio::sync::{mpsc, oneshot, watch, Notify};
use tracing::{debug, info, info_span};

use crate::containers::{ContainerTable, Phase, StopReason};
use crate::launcher::{ContainerExecutor, Gate, LaunchSpec, StopSignal};
use crate::metrics::NmMetrics;
use crate::plugins::Plugins;
use crate::store::Store;

mod auth;
pub mod handle;
mod hold;
mod reaper;
mod recovery;
mod reinit;
mod start;
mod stop;
mod update;

#[cfg(test)]
mod tests;

pub use auth::{ContainerAuthError, TokenOwner};
pub use handle::{Command, NmHandle, Unavailable};
use hold::HoldGroup;
pub use reinit::{ReinitError, Reinitialized, MAX_REINIT_GRACE};

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
    /// Clients' staging root: a finished application's `<root>/<user>/<app>` goes with it.
    pub staging_root: PathBuf,
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

/// The actor's state. Built by [`Manager::new`], run by [`Manager::run`].
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
    /// The container-token master keys the RM sent (current and previous).
    keys: ContainerKeys,
    /// Digests of the tokens verified at a container's start (or update), and whose they
    /// are: a call acting on containers may present one of them (see `auth`).
    start_tokens: HashMap<[u8; 32], TokenOwner>,
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
    /// Callers waiting for a re-initialization's new process (one per container).
    reinit_waiters: HashMap<ContainerId, Reply<Result<Reinitialized, ReinitError>>>,
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
            keys: ContainerKeys::default(),
            start_tokens: HashMap::new(),
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
            reinit_waiters: HashMap::new(),
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
        // Durable before visible: what a reader (the RM's heartbeat, REST) is about to see
        // is in the recovery store first, so an NM killed right after cannot forget it.
        if matches!(
            cmd,
            Command::Reports { .. }
                | Command::Containers { .. }
                | Command::Container { .. }
                | Command::Apps { .. }
        ) {
            self.flush();
        }
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
                let _ = reply.send(self.stop_by_app_master(ids, now));
            }
            Command::Signal { id, command, reply } => {
                let _ = reply.send(self.signal_answer(id, command));
            }
            Command::Reinitialize {
                id,
                context,
                grace,
                reply,
            } => self.reinitialize(id, context, grace, reply, now),
            Command::ReinitLocalized { id, result } => self.reinit_localized(id, result, now),
            Command::ReinitGraceOver { id, old } => self.reinit_grace_over(id, &old),
            Command::Update { tokens, reply } => self.update(tokens, reply, now),
            Command::UpdatesApplied {
                results,
                response,
                reply,
            } => self.updates_applied(results, response, reply),
            Command::Node { reply } => {
                let _ = reply.send(self.node_view());
            }
            Command::Apps { reply } => {
                let _ = reply.send(self.app_views());
            }
            Command::Containers { reply } => {
                let _ = reply.send(self.table.iter().cloned().collect());
            }
            Command::Container { id, reply } => {
                let _ = reply.send(self.table.get(&id).cloned());
            }
            Command::Metrics { reply } => {
                let _ = reply.send(self.metrics_now());
            }
            Command::Resource { name, reply } => {
                let _ = reply.send(self.plugins.view(&name));
            }
            Command::Registered { key, rm_identifier } => {
                self.install_key(key);
                self.rm_identifier = rm_identifier;
            }
            Command::MasterKey { key } => self.install_key(key),
            Command::Authorize { token, reply } => {
                let _ = reply.send(self.authorize(&token));
            }
            Command::Reports { reply } => {
                let mut reports = self.table.reports();
                // A container still starting says what it waits for (an image pull).
                for r in reports
                    .iter_mut()
                    .filter(|r| r.status.state != spindle_common::states::ContainerState::COMPLETE)
                    .filter(|r| r.status.diagnostics.is_empty())
                {
                    if let Some(p) = self.executor.progress(&r.status.container_id) {
                        r.status.diagnostics = p;
                    }
                }
                let _ = reply.send(reports);
            }
            Command::HeartbeatAnswered {
                containers_to_cleanup,
                applications_to_cleanup,
                containers_to_be_removed,
            } => self.heartbeat_answered(
                containers_to_cleanup,
                applications_to_cleanup,
                containers_to_be_removed,
                now,
            ),
            Command::Localized { id, result } => self.localized(id, result, now),
            Command::Exited {
                id,
                exit,
                stderr_tail,
            } => {
                let _g = span(&id).entered();
                if let Some(step) = self.table.reinit_old_exited(&id) {
                    info!(?exit, "the process being replaced ended");
                    self.reinit_step(id, step, now);
                } else if let Some(outcome) = self.table.exited(&id, &exit, &stderr_tail, now) {
                    info!(?exit, ?outcome, "container process ended");
                    self.completed(id, outcome, true);
                }
            }
            Command::KillDeadline { id } => {
                if let Some(Phase::Killing { process, .. }) = self.table.get(&id).map(|c| &c.phase)
                {
                    let _g = span(&id).entered();
                    info!(%process, "container ignored SIGTERM; sending SIGKILL");
                    self.signal(process, StopSignal::Kill);
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
}

impl Manager {
    fn node_view(&self) -> NodeView {
        NodeView {
            started_ms: self.started_ms,
            last_heartbeat_ms: self.last_heartbeat_ms,
            registered: self.keys.current().is_some(),
        }
    }

    fn app_views(&self) -> Vec<AppView> {
        self.table
            .apps()
            .map(|a| AppView {
                id: a.id,
                user: a.user.clone(),
                state: self.table.app_state(a),
                containers: a.containers.iter().copied().collect(),
            })
            .collect()
    }

    fn metrics_now(&self) -> NmMetrics {
        let mut m = self.metrics.clone();
        m.running = self.table.running_count() as u64;
        m.allocated = self.table.allocated();
        for c in self.table.iter() {
            *m.by_state.entry(c.state().as_str()).or_default() += 1;
        }
        m
    }

    /// The RM answered a heartbeat: stops what it cleans up, forgets what it acknowledged.
    fn heartbeat_answered(
        &mut self,
        containers_to_cleanup: Vec<ContainerId>,
        applications_to_cleanup: Vec<ApplicationId>,
        containers_to_be_removed: Vec<ContainerId>,
        now: u64,
    ) {
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
}

/// Resolves once the NM is stopping (or gone).
pub async fn until_stopped(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

fn span(id: &ContainerId) -> tracing::Span {
    info_span!(
        "container",
        container_id = %id,
        app_id = %id.application_id(),
        attempt_id = %id.attempt_id
    )
}
