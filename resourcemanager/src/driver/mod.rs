//! The driver: the one task that owns the [`RmCore`]. REST handlers send it typed
//! [`Command`]s with a oneshot reply; it applies them to the core, executes the core's
//! effects in order (state-store writes first, so nothing is acknowledged before it is
//! durable), and only then answers. REST reads ask it for a [`Snapshot`], built lazily: only
//! when a read comes and the state changed since the last one. It reports each core call's
//! time through [`LoopObserver`], which the daemon implements with `/metrics`.
//!
//! Must not: name the REST edge (the daemon assembles both), or reach the state store other
//! than through [`StateStore`].

mod admin;
mod apps;
mod command;
mod nodes;
mod snapshot;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use spindle_common::records::node::{
    StartContainerRequest, StartContainersRequest, StartContainersResponse, NODE_FULL_EXCEPTION,
};
use spindle_common::time::now_ms;
use spindle_common::token::ContainerKey;
use spindle_common::{ApplicationAttemptId, ContainerId};
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{error, info, warn};

use crate::config::capacity::{CapacityConfError, CsProps, SiteSettings};
use crate::core::{CoreError, Effect, RmCore};
use crate::store::{StateStore, StoreError};

pub use command::{
    AdminCommand, AmCommand, AppCommand, Command, HeartbeatAnswer, Mutated, NodeBeat, NodeCommand,
    NodeRegistered, QueryCommand, Reply, SelfReport, SelfReportRefusals,
};
pub use snapshot::{NodePlacement, Snapshot};

pub use crate::core::ONLY_ADMINS;

/// What can go wrong with a command, beyond the core's own refusals.
#[derive(Debug, thiserror::Error)]
pub enum RmError {
    #[error(transparent)]
    Core(#[from] CoreError),
    /// A capacity-scheduler configuration that breaks a rule; nothing was changed.
    #[error("{0}")]
    SchedulerConf(Box<CapacityConfError>),
    #[error("state store write failed: {0}")]
    Store(#[from] StoreError),
    #[error("the ResourceManager is shutting down")]
    Unavailable,
}

impl From<CapacityConfError> for RmError {
    fn from(e: CapacityConfError) -> Self {
        RmError::SchedulerConf(Box::new(e))
    }
}

/// A handle on the driver for REST handlers: send commands, read snapshots.
#[derive(Clone)]
pub struct DriverHandle {
    tx: mpsc::Sender<Command>,
    snapshot: watch::Receiver<Arc<Snapshot>>,
}

/// A handle that does not keep the driver running (its task ends when the last
/// [`DriverHandle`] is dropped): for background tasks such as the blob cleaner.
#[derive(Clone)]
pub struct WeakDriverHandle {
    tx: mpsc::WeakSender<Command>,
    snapshot: watch::Receiver<Arc<Snapshot>>,
}

impl WeakDriverHandle {
    /// The handle, while the driver runs.
    pub fn upgrade(&self) -> Option<DriverHandle> {
        Some(DriverHandle {
            tx: self.tx.upgrade()?,
            snapshot: self.snapshot.clone(),
        })
    }
}

impl DriverHandle {
    pub fn downgrade(&self) -> WeakDriverHandle {
        WeakDriverHandle {
            tx: self.tx.downgrade(),
            snapshot: self.snapshot.clone(),
        }
    }

    /// A snapshot as of this call: it queues behind every command sent before it, so a
    /// client reads its own writes. Falls back to the last one published if the driver is
    /// gone.
    pub async fn snapshot(&self) -> Arc<Snapshot> {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Command::Snapshot(tx)).await.is_ok() {
            if let Ok(s) = rx.await {
                return s;
            }
        }
        self.snapshot.borrow().clone()
    }

    /// Sends a command (of any family) built around a fresh oneshot and waits for its
    /// answer.
    pub async fn call<T, C: Into<Command>>(
        &self,
        make: impl FnOnce(Reply<T>) -> C,
    ) -> Result<T, RmError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(make(tx).into())
            .await
            .map_err(|_| RmError::Unavailable)?;
        rx.await.map_err(|_| RmError::Unavailable)?
    }
}

/// The live capacity-scheduler configuration as the driver keeps it beside the core: the
/// raw property set (what `GET /scheduler-conf` shows and mutations edit), the yarn-site
/// settings it is parsed with, and its version (bumped by every applied change).
pub struct SchedConfState {
    pub props: CsProps,
    pub site: SiteSettings,
    pub version: u64,
}

/// Where the command loop reports what it times: each core call, by its command's
/// [`Command::name`] (or `tick`, `roll_container_key`), and the waits of the gangs granted.
pub trait LoopObserver: Send + Sync + 'static {
    fn core_call(&self, call: &'static str, took: Duration);
    fn gang_waits(&self, waits_ms: &[u64]);
}

/// What the driver is made of; the daemon builds it.
pub struct DriverParts {
    pub core: RmCore,
    pub store: Box<dyn StateStore>,
    pub sched: SchedConfState,
    /// For AM launches on NMs.
    pub http: reqwest::Client,
    /// `http` or `https` (`yarn.http.policy`): how NMs are dialed.
    pub nm_scheme: &'static str,
    /// How often the container-token master key is rolled.
    pub container_key_rolling: Duration,
}

struct Driver {
    core: RmCore,
    store: Box<dyn StateStore>,
    sched: SchedConfState,
    publish: watch::Sender<Arc<Snapshot>>,
    published_version: u64,
    /// Weak, so that the driver stops once every handle (router, tests) is gone.
    tx: mpsc::WeakSender<Command>,
    http: reqwest::Client,
    nm_scheme: &'static str,
}

/// Whether a command's answer waits on the state-store writes it caused.
#[derive(Clone, Copy)]
enum Durability {
    /// A failed write fails the call: the caller must not believe a change that was not
    /// written.
    Required,
    /// A failed write is logged; the answer stands.
    Logged,
}

/// Starts the command loop on the runtime and returns the handle REST handlers use. The loop
/// ends when every handle is gone.
pub fn spawn(parts: DriverParts, observer: Arc<dyn LoopObserver>) -> DriverHandle {
    let (tx, mut rx) = mpsc::channel::<Command>(4096);
    let (publish, snapshot) = watch::channel(Arc::new(Snapshot::of(&parts.core)));
    let rolling = parts.container_key_rolling;
    let mut driver = Driver {
        core: parts.core,
        store: parts.store,
        sched: parts.sched,
        publish,
        published_version: u64::MAX,
        tx: tx.downgrade(),
        http: parts.http,
        nm_scheme: parts.nm_scheme,
    };
    let _ = driver.settle();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut roll = tokio::time::interval_at(tokio::time::Instant::now() + rolling, rolling);
        roll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            // Each core call is timed here, outside the core (`/metrics`).
            let start = std::time::Instant::now();
            let call = tokio::select! {
                cmd = rx.recv() => match cmd {
                    Some(cmd) => {
                        let call = cmd.name();
                        driver.handle(cmd);
                        call
                    }
                    None => break,
                },
                _ = roll.tick() => {
                    driver.roll_container_key();
                    "roll_container_key"
                }
                _ = tick.tick() => {
                    driver.tick();
                    "tick"
                }
            };
            observer.core_call(call, start.elapsed());
            observer.gang_waits(&driver.core.take_gang_waits());
        }
    });
    DriverHandle { tx, snapshot }
}

impl Driver {
    fn handle(&mut self, cmd: Command) {
        let span = cmd.span();
        let _in_span = span.enter();
        let now = now_ms();
        match cmd {
            Command::App(c) => self.app(c, now),
            Command::Am(c) => self.am(c, now),
            Command::Node(c) => self.node(c, now),
            Command::Admin(c) => self.admin(c, now),
            Command::Query(c) => self.query(c, now),
            Command::Snapshot(reply) => {
                let _ = reply.send(self.current_snapshot());
            }
        }
    }

    /// The one way a command is answered: the core's effects are executed first (see
    /// [`Driver::settle`]), then the answer is sent; with [`Durability::Required`] a failed
    /// state-store write fails it.
    fn settle_and_reply<T>(
        &mut self,
        r: Result<T, RmError>,
        durability: Durability,
        reply: Reply<T>,
    ) {
        let settled = self.settle();
        let r = match durability {
            Durability::Required => r.and_then(|o| settled.map(|()| o)),
            Durability::Logged => r,
        };
        let _ = reply.send(r);
    }

    /// The periodic pass: deadlines, idle GPUs, preemption, scheduling.
    fn tick(&mut self) {
        self.core.tick(now_ms());
        for e in self.core.take_idle_events() {
            info!(container_id = %e.container, queue = %e.queue, action = e.action.as_str(),
                gpus = e.gpus, idle_ms = e.idle_ms, timeout_ms = e.timeout_ms,
                "container holds idle GPUs past its queue's gpu-idle-timeout-ms");
        }
        let _ = self.settle();
    }

    /// YARN's master-key roll: a fresh random container-token key, the next id after the
    /// newest one (the core sends it to NMs now and signs with it after the activation
    /// delay). A failing random source skips this roll with an error; the old keys stay.
    fn roll_container_key(&mut self) {
        let id = self.core.newest_container_key().id().wrapping_add(1);
        match ContainerKey::generate(id) {
            Ok(key) => {
                if self.core.roll_container_key(key, now_ms()) {
                    info!(
                        key_id = id,
                        "container-token master key rolled; NMs get it at their next heartbeat"
                    );
                }
            }
            Err(e) => error!("container-token master key not rolled: {e}"),
        }
        let _ = self.settle();
    }

    /// Executes the core's effects. Durable before visible: every state-store write of the
    /// batch happens first, and an AM launch (seen by an NM) only after it; a launch whose
    /// application record could not be written is not sent, and is reported to the core as
    /// a failed launch instead.
    fn settle(&mut self) -> Result<(), RmError> {
        let mut result = Ok(());
        let mut unwritten = BTreeSet::new();
        let mut launches = Vec::new();
        for effect in self.core.take_effects() {
            match effect {
                Effect::PersistApp(rec) => {
                    let _s = tracing::info_span!("store_write", app_id = %rec.id).entered();
                    if let Err(e) = self.store.put_app(&rec) {
                        error!(app_id = %rec.id, "state store write failed: {e}");
                        unwritten.insert(rec.id);
                        result = Err(RmError::Store(e));
                    }
                }
                // AMs poll for their containers: nothing to push.
                Effect::ContainersAllocated(_) => {}
                // The notice rides on the AM's next allocate answer.
                Effect::PreemptionNotice(_) => {}
                Effect::PersistFairshare(records) => {
                    if let Err(e) = self.store.put_fairshare(&records) {
                        // The ledgers stay in memory; the next change writes them again.
                        warn!("state store: users' decayed usage not written: {e}");
                    }
                }
                Effect::ForgetApp(id) => {
                    let _s = tracing::info_span!("store_delete", app_id = %id).entered();
                    if let Err(e) = self.store.delete_app(&id) {
                        warn!(app_id = %id, "state store delete failed: {e}");
                    }
                }
                Effect::LaunchAm {
                    attempt,
                    container,
                    node_http,
                    container_token,
                    launch,
                } => {
                    let request = StartContainersRequest {
                        start_container_request: vec![StartContainerRequest {
                            container_token,
                            container_launch_context: launch.into(),
                        }],
                        hold: None,
                    };
                    launches.push((attempt, container, node_http, request));
                }
            }
        }
        for (attempt, container, node_http, request) in launches {
            if unwritten.contains(&attempt.application_id) {
                let diag = "the RM could not write the attempt to its state store".to_string();
                warn!(attempt_id = %attempt, container_id = %container, "AM not launched: {diag}");
                self.report_launch(attempt, container, Err(diag));
            } else {
                self.launch(attempt, container, node_http, request);
            }
        }
        result
    }

    /// Hands the outcome of an AM launch back to the driver's queue (never inline: the core
    /// is in the middle of settling).
    fn report_launch(
        &self,
        attempt: ApplicationAttemptId,
        container: ContainerId,
        result: Result<(), String>,
    ) {
        let Some(tx) = self.tx.upgrade() else { return };
        tokio::spawn(async move {
            let _ = tx
                .send(AmCommand::Launched(attempt, container, result).into())
                .await;
        });
    }

    /// An ApplicationMasterProtocol call: checks the AM-RM token and runs `f` on the core
    /// for the attempt it names (the caller settles and answers).
    fn am_call<T>(
        &mut self,
        token: &str,
        f: impl FnOnce(&mut RmCore, &ApplicationAttemptId) -> Result<T, CoreError>,
    ) -> Result<T, RmError> {
        self.core
            .authenticate_am(token)
            .and_then(|att| {
                // The command's span names the attempt once the token says which it is.
                let span = tracing::Span::current();
                span.record("app_id", tracing::field::display(&att.application_id));
                span.record("attempt_id", tracing::field::display(&att));
                f(&mut self.core, &att)
            })
            .map_err(RmError::from)
    }

    /// The snapshot as of now, rebuilt only if the state changed since the last one.
    fn current_snapshot(&mut self) -> Arc<Snapshot> {
        if self.core.version() != self.published_version {
            self.published_version = self.core.version();
            self.publish
                .send_replace(Arc::new(Snapshot::of(&self.core)));
        }
        self.publish.borrow().clone()
    }

    fn launch(
        &self,
        attempt: ApplicationAttemptId,
        container: ContainerId,
        node_http: String,
        request: StartContainersRequest,
    ) {
        let http = self.http.clone();
        let scheme = self.nm_scheme;
        let Some(tx) = self.tx.upgrade() else { return };
        let span = tracing::info_span!(
            "launch_am",
            app_id = %attempt.application_id,
            attempt_id = %attempt,
            container_id = %container,
            node = %node_http,
        );
        let task = async move {
            let url = format!("{scheme}://{node_http}/ws/v1/node/containers/start");
            // An NM that has just registered may not have the RM's answer (its container
            // key) yet: its start is retried, as YARN's NM proxy retries
            // NMNotYetReadyException, for a bounded time.
            let mut tries = 0;
            let result = loop {
                match start_am(&http, &url, &request).await {
                    Err(AmStartFailure::NotReady(e)) if tries < AM_START_NOT_READY_TRIES => {
                        tries += 1;
                        tracing::debug!("AM launch: {e}; retrying");
                        tokio::time::sleep(AM_START_NOT_READY_PAUSE).await;
                    }
                    r => break r.map_err(|e| e.to_string()),
                }
            };
            match &result {
                Ok(()) => {
                    info!(attempt_id = %attempt, container_id = %container, "AM container launched")
                }
                Err(e) => {
                    warn!(attempt_id = %attempt, container_id = %container, "AM launch failed: {e}")
                }
            }
            let _ = tx
                .send(AmCommand::Launched(attempt, container, result).into())
                .await;
        };
        tokio::spawn(tracing::Instrument::instrument(task, span));
    }
}

/// How often, and how far apart, an AM start an NM answered NMNotYetReadyException (or
/// `NODE_FULL_EXCEPTION`: a container it runs is about to be told to stop) is tried again
/// (about 5 s in all).
const AM_START_NOT_READY_TRIES: u32 = 25;
const AM_START_NOT_READY_PAUSE: std::time::Duration = std::time::Duration::from_millis(200);
/// YARN's exception class an NM answers a start with before it has registered.
const NM_NOT_YET_READY: &str = "NMNotYetReadyException";

/// Why an AM start failed.
#[derive(Debug, thiserror::Error)]
enum AmStartFailure {
    /// The NM has not heard the RM's registration answer yet, or is still running a
    /// container whose room the RM handed on (retried).
    #[error("{0}")]
    NotReady(String),
    #[error("{0}")]
    Failed(String),
}

/// One start call of an AM container on its NM.
async fn start_am(
    http: &reqwest::Client,
    url: &str,
    request: &StartContainersRequest,
) -> Result<(), AmStartFailure> {
    let failed = AmStartFailure::Failed;
    let resp = http
        .post(url)
        .json(request)
        .send()
        .await
        .map_err(|e| failed(format!("{url}: {e}")))?;
    let status = resp.status();
    if !status.is_success() {
        let body = resp.text().await.unwrap_or_default();
        return Err(failed(format!("{url}: HTTP {status}: {body}")));
    }
    let body: StartContainersResponse = resp
        .json()
        .await
        .map_err(|e| failed(format!("{url}: {e}")))?;
    match body.failed_requests.first() {
        None => Ok(()),
        Some(f) if f.exception == NM_NOT_YET_READY || f.exception == NODE_FULL_EXCEPTION => Err(
            AmStartFailure::NotReady(format!("{}: {}", f.exception, f.message)),
        ),
        Some(f) => Err(failed(format!("{}: {}", f.exception, f.message))),
    }
}
