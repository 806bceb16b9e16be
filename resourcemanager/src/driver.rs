//! The driver: the one task that owns the [`RmCore`]. REST handlers send it typed
//! [`Command`]s with a oneshot reply; it applies them to the core, executes the core's
//! effects in order (state-store writes first, so nothing is acknowledged before it is
//! durable), republishes the read [`Snapshot`], and only then answers.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use spindle_common::records::node::{StartContainersRequest, StartContainersResponse};
use spindle_common::states::FinalApplicationStatus;
use spindle_common::time::now_ms;
use spindle_common::{ApplicationAttemptId, ApplicationId, ContainerId, NodeId, Resource};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{error, info, warn};

use crate::config::RmConfig;
use crate::core::scheduler::{Ask, AskKey};
use crate::core::{
    AllocateReply, App, AskUpdate, Caller, CoreError, Counters, Effect, HeartbeatReply,
    KillOutcome, Node, NodeRegistration, QueueView, ReportedContainer, RmContainer, RmCore,
    Submission,
};
use crate::store::StateStore;

/// What can go wrong with a command, beyond the core's own refusals.
#[derive(Debug, thiserror::Error)]
pub enum RmError {
    #[error(transparent)]
    Core(#[from] CoreError),
    #[error("state store write failed: {0}")]
    Store(String),
    #[error("the ResourceManager is shutting down")]
    Unavailable,
}

type Reply<T> = oneshot::Sender<Result<T, RmError>>;

pub struct NodeRegistered {
    pub interval_ms: u64,
    pub secret_hex: String,
    pub rm_identifier: u64,
}

/// The typed commands the REST layer sends to the driver.
pub enum Command {
    NewApplication(Reply<(ApplicationId, Resource)>),
    Submit(ApplicationId, Box<Submission>, Reply<()>),
    Kill(ApplicationId, Caller, Reply<KillOutcome>),
    RegisterNode(Box<NodeRegistration>, Reply<NodeRegistered>),
    Heartbeat {
        node: NodeId,
        healthy: bool,
        report: String,
        containers: Vec<ReportedContainer>,
        reply: Reply<HeartbeatReply>,
    },
    AmRegister {
        token: String,
        host: String,
        rpc_port: i32,
        tracking_url: String,
        reply: Reply<(Resource, String)>,
    },
    AmAllocate {
        token: String,
        response_id: i32,
        asks: Vec<AskUpdate>,
        release: Vec<ContainerId>,
        progress: f32,
        reply: Reply<AllocateReply>,
    },
    AmFinish {
        token: String,
        status: FinalApplicationStatus,
        diagnostics: String,
        tracking_url: String,
        reply: Reply<()>,
    },
    UnregisterNode(NodeId, Reply<()>),
    /// Internal: how an AM launch went.
    AmLaunched(ApplicationAttemptId, ContainerId, Result<(), String>),
}

/// An immutable copy of what REST reads serve, republished after every change.
#[derive(Clone)]
pub struct Snapshot {
    pub cluster_ts: u64,
    pub apps: BTreeMap<ApplicationId, App>,
    pub nodes: BTreeMap<NodeId, Node>,
    pub containers: BTreeMap<ContainerId, RmContainer>,
    pub counters: Counters,
    pub pending_containers: u64,
    pub pending: Resource,
    /// Every queue, parents before children (`/scheduler`, the UI, `queue -status`).
    pub queue_views: Vec<QueueView>,
    pub max_allocation: Resource,
    /// Resources used per application, as the scheduler accounts them.
    pub app_usage: BTreeMap<ApplicationId, Resource>,
    /// (total, used) per schedulable node.
    pub node_usage: BTreeMap<NodeId, (Resource, Resource)>,
    /// Outstanding asks per application, for `resourceRequests`.
    pub app_asks: BTreeMap<ApplicationId, Vec<(AskKey, Ask)>>,
}

impl Snapshot {
    fn of(core: &RmCore) -> Self {
        let (pending_containers, pending) = core.scheduler().pending();
        Self {
            cluster_ts: core.cluster_timestamp(),
            apps: core.apps().clone(),
            nodes: core.nodes().clone(),
            containers: core.containers().clone(),
            counters: core.counters().clone(),
            pending_containers,
            pending,
            queue_views: core.queue_views(),
            max_allocation: core.max_allocation(),
            app_usage: core
                .scheduler()
                .apps()
                .iter()
                .map(|(k, v)| (*k, v.used.clone()))
                .collect(),
            node_usage: core
                .scheduler()
                .nodes()
                .iter()
                .map(|n| (n.id.clone(), (n.total.clone(), n.used.clone())))
                .collect(),
            app_asks: core
                .scheduler()
                .apps()
                .iter()
                .filter(|(_, a)| !a.asks.is_empty())
                .map(|(k, a)| (*k, a.asks.iter().map(|(k, v)| (*k, v.clone())).collect()))
                .collect(),
        }
    }
}

/// A handle on the driver for REST handlers: send commands, read snapshots.
#[derive(Clone)]
pub struct DriverHandle {
    tx: mpsc::Sender<Command>,
    snapshot: watch::Receiver<Arc<Snapshot>>,
}

impl DriverHandle {
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.borrow().clone()
    }

    /// Sends a command built around a fresh oneshot and waits for its answer.
    pub async fn call<T>(&self, make: impl FnOnce(Reply<T>) -> Command) -> Result<T, RmError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(make(tx))
            .await
            .map_err(|_| RmError::Unavailable)?;
        rx.await.map_err(|_| RmError::Unavailable)?
    }
}

struct Driver {
    core: RmCore,
    store: StateStore,
    publish: watch::Sender<Arc<Snapshot>>,
    published_version: u64,
    /// Weak, so that the driver stops once every handle (router, tests) is gone.
    tx: mpsc::WeakSender<Command>,
    http: reqwest::Client,
}

impl Driver {
    /// Executes the core's effects in order, then republishes the snapshot if anything changed.
    fn settle(&mut self) -> Result<(), RmError> {
        let mut result = Ok(());
        for effect in self.core.take_effects() {
            match effect {
                Effect::PersistApp(rec) => {
                    if let Err(e) = self.store.put_app(&rec) {
                        error!(app_id = %rec.id, "state store write failed: {e}");
                        result = Err(RmError::Store(e.to_string()));
                    }
                }
                Effect::ForgetApp(id) => {
                    if let Err(e) = self.store.delete_app(&id) {
                        warn!(app_id = %id, "state store delete failed: {e}");
                    }
                }
                Effect::LaunchAm {
                    attempt,
                    container,
                    node_http,
                    request,
                } => {
                    self.launch(attempt, container, node_http, request);
                }
            }
        }
        if self.core.version() != self.published_version {
            self.published_version = self.core.version();
            self.publish
                .send_replace(Arc::new(Snapshot::of(&self.core)));
        }
        result
    }

    fn launch(
        &self,
        attempt: ApplicationAttemptId,
        container: ContainerId,
        node_http: String,
        request: StartContainersRequest,
    ) {
        let http = self.http.clone();
        let Some(tx) = self.tx.upgrade() else { return };
        tokio::spawn(async move {
            let url = format!("http://{node_http}/ws/v1/node/containers/start");
            let result = async {
                let resp = http
                    .post(&url)
                    .json(&request)
                    .send()
                    .await
                    .map_err(|e| format!("{url}: {e}"))?;
                let status = resp.status();
                if !status.is_success() {
                    let body = resp.text().await.unwrap_or_default();
                    return Err(format!("{url}: HTTP {status}: {body}"));
                }
                let body: StartContainersResponse =
                    resp.json().await.map_err(|e| format!("{url}: {e}"))?;
                if let Some(f) = body.failed_requests.first() {
                    return Err(format!("{}: {}", f.exception, f.message));
                }
                Ok(())
            }
            .await;
            match &result {
                Ok(()) => {
                    info!(attempt_id = %attempt, container_id = %container, "AM container launched")
                }
                Err(e) => {
                    warn!(attempt_id = %attempt, container_id = %container, "AM launch failed: {e}")
                }
            }
            let _ = tx
                .send(Command::AmLaunched(attempt, container, result))
                .await;
        });
    }

    fn handle(&mut self, cmd: Command) {
        let now = now_ms();
        match cmd {
            Command::NewApplication(reply) => {
                let id = self.core.new_application();
                let max = self.core.max_allocation();
                let _ = self.settle();
                let _ = reply.send(Ok((id, max)));
            }
            Command::Submit(id, sub, reply) => {
                let r = self.core.submit(id, *sub, now).map_err(RmError::from);
                let s = self.settle();
                let _ = reply.send(r.and(s));
            }
            Command::Kill(id, caller, reply) => {
                let r = self.core.kill(&id, &caller, now).map_err(RmError::from);
                let s = self.settle();
                let _ = reply.send(r.and_then(|o| s.map(|_| o)));
            }
            Command::RegisterNode(reg, reply) => {
                let id = reg.id.clone();
                let interval_ms = self.core.register_node(*reg, now);
                info!(node_id = %id, "node registered");
                let _ = self.settle();
                let _ = reply.send(Ok(NodeRegistered {
                    interval_ms,
                    secret_hex: self.core.secret().to_hex(),
                    rm_identifier: self.core.cluster_timestamp(),
                }));
            }
            Command::Heartbeat {
                node,
                healthy,
                report,
                containers,
                reply,
            } => {
                let r = self
                    .core
                    .node_heartbeat(&node, healthy, report, containers, now);
                let _ = self.settle();
                let _ = reply.send(Ok(r));
            }
            Command::AmRegister {
                token,
                host,
                rpc_port,
                tracking_url,
                reply,
            } => {
                let r = self
                    .core
                    .authenticate_am(&token)
                    .and_then(|att| {
                        self.core
                            .am_register(&att, host, rpc_port, tracking_url, now)
                    })
                    .map_err(RmError::from);
                let s = self.settle();
                let _ = reply.send(r.and_then(|o| s.map(|_| o)));
            }
            Command::AmAllocate {
                token,
                response_id,
                asks,
                release,
                progress,
                reply,
            } => {
                let r = self
                    .core
                    .authenticate_am(&token)
                    .and_then(|att| {
                        self.core
                            .am_allocate(&att, response_id, asks, release, progress, now)
                    })
                    .map_err(RmError::from);
                let _ = self.settle();
                let _ = reply.send(r);
            }
            Command::AmFinish {
                token,
                status,
                diagnostics,
                tracking_url,
                reply,
            } => {
                let r = self
                    .core
                    .authenticate_am(&token)
                    .and_then(|att| {
                        self.core
                            .am_finish(&att, status, diagnostics, tracking_url, now)
                    })
                    .map_err(RmError::from);
                let s = self.settle();
                let _ = reply.send(r.and(s));
            }
            Command::UnregisterNode(node, reply) => {
                self.core.unregister_node(&node, now);
                info!(node_id = %node, "node unregistered (SHUTDOWN)");
                let _ = self.settle();
                let _ = reply.send(Ok(()));
            }
            Command::AmLaunched(attempt, container, result) => {
                self.core.am_launched(&attempt, &container, result, now);
                let _ = self.settle();
            }
        }
    }
}

/// A started RM, for tests and the binary.
pub struct RunningRm {
    pub addr: SocketAddr,
    pub handle: DriverHandle,
}

/// Opens the state store, recovers, and serves on `listener` until `shutdown` resolves.
pub async fn run(
    listener: TcpListener,
    conf: RmConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let (rm, serve) = start(listener, conf).await?;
    info!("ResourceManager listening on http://{}", rm.addr);
    serve(Box::pin(shutdown)).await
}

type Serve = Box<
    dyn FnOnce(
            std::pin::Pin<Box<dyn Future<Output = ()> + Send>>,
        ) -> std::pin::Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send>>
        + Send,
>;

/// Starts the driver and returns the handle plus a closure that serves HTTP until shutdown.
pub async fn start(listener: TcpListener, conf: RmConfig) -> anyhow::Result<(RunningRm, Serve)> {
    use anyhow::Context;
    let addr = listener.local_addr().context("reading the bound address")?;
    let mut store = StateStore::open(&conf.store_path)?;
    let recovered = store.recover()?;
    for s in &recovered.skipped {
        warn!("state store: skipped unreadable record: {s}");
    }
    let cluster_ts = now_ms();
    let mut core = RmCore::new(
        conf.core.clone(),
        cluster_ts,
        recovered.epoch,
        recovered.secret,
    );
    let host = if addr.ip().is_unspecified() {
        "127.0.0.1".to_string()
    } else {
        addr.ip().to_string()
    };
    core.set_rm_address(format!("http://{host}:{}", addr.port()));
    let n = recovered.apps.len();
    for rec in recovered.apps {
        core.recover_app(rec, cluster_ts);
    }
    if n > 0 {
        info!(
            epoch = recovered.epoch,
            "recovered {n} applications from {}",
            conf.store_path.display()
        );
    }
    let (tx, mut rx) = mpsc::channel::<Command>(4096);
    let (publish, snapshot) = watch::channel(Arc::new(Snapshot::of(&core)));
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .connect_timeout(Duration::from_secs(3))
        .build()
        .context("building the HTTP client")?;
    let mut driver = Driver {
        core,
        store,
        publish,
        published_version: u64::MAX,
        tx: tx.downgrade(),
        http,
    };
    let _ = driver.settle();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                cmd = rx.recv() => match cmd {
                    Some(cmd) => driver.handle(cmd),
                    None => break,
                },
                _ = tick.tick() => {
                    driver.core.tick(now_ms());
                    let _ = driver.settle();
                }
            }
        }
    });
    let handle = DriverHandle { tx, snapshot };
    let info = crate::rest::RmInfo {
        cluster_ts,
        started_on: cluster_ts,
        cluster_id: conf.cluster_id.clone(),
        store_path: conf.store_path.display().to_string(),
    };
    let router = crate::rest::router(handle.clone(), info);
    let serve: Serve = Box::new(move |shutdown| {
        Box::pin(async move {
            axum::serve(
                listener,
                router.into_make_service_with_connect_info::<SocketAddr>(),
            )
            .with_graceful_shutdown(shutdown)
            .await
            .context("serving HTTP")
        })
    });
    Ok((RunningRm { addr, handle }, serve))
}
