//! The driver: the one task that owns the [`RmCore`]. REST handlers send it typed
//! [`Command`]s with a oneshot reply; it applies them to the core, executes the core's
//! effects in order (state-store writes first, so nothing is acknowledged before it is
//! durable), and only then answers. REST reads ask it for a [`Snapshot`], built lazily: only
//! when a read comes and the state changed since the last one.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use spindle_common::records::node::{
    StartContainerRequest, StartContainersRequest, StartContainersResponse,
};
use spindle_common::states::FinalApplicationStatus;
use spindle_common::time::now_ms;
use spindle_common::token::ContainerKey;
use spindle_common::{ApplicationAttemptId, ApplicationId, ContainerId, NodeId, Resource};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{error, info, warn};

use crate::config::capacity::{self, CapacityConfError, CsProps, SchedConfMutation, SiteSettings};
use crate::config::RmConfig;
use crate::core::labels::{LabelChange, NodeLabels};
use crate::core::queue_conf::SchedulerConf;
use crate::core::scheduler::{Ask, AskKey};
use crate::core::{
    AllocateReply, AmReport, App, AskUpdate, Caller, CoreError, Counters, Effect, HeartbeatReply,
    KillOutcome, Node, NodeRegistration, QueueAclType, QueueView, ReportedContainer, RmContainer,
    RmCore, SharedMap, Submission,
};
use crate::store::{SchedConfSource, StateStore, StoredSchedConf};
use crate::wire;

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
    Store(String),
    #[error("the ResourceManager is shutting down")]
    Unavailable,
}

impl From<CapacityConfError> for RmError {
    fn from(e: CapacityConfError) -> Self {
        RmError::SchedulerConf(Box::new(e))
    }
}

type Reply<T> = oneshot::Sender<Result<T, RmError>>;

pub struct NodeRegistered {
    pub interval_ms: u64,
    /// The container-token master key the node must hold (the REST edge wraps it).
    pub container_key: ContainerKey,
    pub rm_identifier: u64,
    /// The host lists keep this node out: the NM is told to shut down.
    pub refused: Option<crate::core::NodeRefused>,
}

/// The typed commands the REST layer sends to the driver.
pub enum Command {
    NewApplication(Reply<(ApplicationId, Resource)>),
    Submit(ApplicationId, Box<Submission>, Reply<()>),
    Kill(ApplicationId, Caller, Reply<KillOutcome>),
    RegisterNode(Box<NodeRegistration>, Reply<NodeRegistered>),
    /// The GPU samples an NM's heartbeat carried (after the heartbeat itself).
    GpuUse {
        node: NodeId,
        uses: Vec<crate::core::ContainerGpuUse>,
        reply: Reply<Vec<crate::core::IgnoredGpuUse>>,
    },
    Heartbeat {
        node: NodeId,
        healthy: bool,
        report: String,
        containers: Vec<ReportedContainer>,
        /// With the RM's newest container-token master key (the REST edge sends it when the
        /// node's last known key differs).
        reply: Reply<(HeartbeatReply, ContainerKey)>,
    },
    AmRegister {
        token: String,
        host: String,
        rpc_port: i32,
        tracking_url: String,
        /// Maximum allocation, queue, containers kept from earlier attempts.
        reply: Reply<(
            Resource,
            String,
            Vec<spindle_common::records::am::Container>,
        )>,
    },
    AmAllocate {
        token: String,
        response_id: i32,
        asks: Vec<AskUpdate>,
        release: Vec<ContainerId>,
        progress: f32,
        report: AmReport,
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
    /// An administrator's label or central attribute change: validated whole, stored,
    /// then applied.
    ChangeLabels {
        change: LabelChange,
        caller: Caller,
        reply: Reply<()>,
    },
    /// What an NM says of itself: its partition (distributed configuration) and its
    /// `nm.yarn.io/` attributes. Answers why either was refused, if it was.
    NodeSelfReport {
        node: NodeId,
        labels: Option<Vec<String>>,
        attributes: Option<BTreeMap<String, String>>,
        reply: Reply<(Option<String>, Option<String>)>,
    },
    /// `PUT /apps/{id}/queue`: answers the new leaf's path.
    MoveApp {
        id: ApplicationId,
        queue: String,
        caller: Caller,
        reply: Reply<spindle_common::QueuePath>,
    },
    /// `PUT /apps/{id}/priority`: answers the effective priority.
    SetPriority {
        id: ApplicationId,
        priority: i32,
        caller: Caller,
        reply: Reply<i32>,
    },
    /// `PUT /apps/{id}/timeout` (`LIFETIME`): answers the deadline in effect (ms).
    UpdateLifetime {
        id: ApplicationId,
        expiry: u64,
        caller: Caller,
        reply: Reply<u64>,
    },
    /// `GET /queues/{queue}/access`: whether `user` holds `acl` on `queue`. The `caller`
    /// must administer the queue to ask about someone else.
    QueueAccess {
        queue: String,
        caller: Caller,
        user: Caller,
        acl: QueueAclType,
        reply: Reply<bool>,
    },
    /// Fails with 403 unless the caller is a cluster administrator (checked before the
    /// REST layer reads any file on the caller's behalf).
    CheckAdmin(Caller, Reply<()>),
    /// `DELETE /delegation-token`: a user token cancelled (its sequence number and max
    /// date), written to the state store so a restarted RM still refuses it.
    CancelUserToken {
        seq: u64,
        max_date: u64,
        reply: Reply<()>,
    },
    /// `refreshNodes`: the host lists as the REST layer read them, and how newly excluded
    /// nodes leave. Admins only.
    RefreshNodes {
        hosts: crate::core::HostLists,
        how: crate::core::DecommissionType,
        caller: Caller,
        reply: Reply<crate::core::NodesRefreshed>,
    },
    /// `refreshQueues`: replace the live capacity-scheduler properties by `props` (read from
    /// `capacity-scheduler.xml` by the REST layer). Answers the configuration version.
    RefreshQueues {
        props: Box<CsProps>,
        caller: Caller,
        reply: Reply<u64>,
    },
    /// `PUT /scheduler-conf` (`dry_run`: `POST /scheduler-conf/validate`). Answers the
    /// version and the resulting (or would-be) property set.
    MutateSchedulerConf {
        mutation: Box<SchedConfMutation>,
        caller: Caller,
        dry_run: bool,
        reply: Reply<(u64, CsProps)>,
    },
    /// `GET /scheduler-conf` and `/scheduler-conf/version`: the live set and its version.
    GetSchedulerConf(Caller, Reply<(u64, CsProps)>),
    /// `GET /accounting`: the state store's usage records of applications within
    /// `[from, to]` (ms), with the snapshot of the same moment (for the applications not
    /// recorded yet: running, or final with containers still live).
    Accounting {
        from: u64,
        to: u64,
        reply: Reply<(Vec<crate::store::UsageRecord>, Arc<Snapshot>)>,
    },
    /// Internal: how an AM launch went.
    AmLaunched(ApplicationAttemptId, ContainerId, Result<(), String>),
    /// Internal: a REST read wants a snapshot as of now. Built only when the state changed
    /// since the last one, so writes (heartbeats, allocate calls) never pay for copies.
    Snapshot(oneshot::Sender<Arc<Snapshot>>),
}

/// An immutable copy of what REST reads serve, rebuilt on demand after a change.
#[derive(Clone)]
pub struct Snapshot {
    pub cluster_ts: u64,
    pub apps: SharedMap<ApplicationId, App>,
    pub nodes: SharedMap<NodeId, Node>,
    pub containers: SharedMap<ContainerId, RmContainer>,
    pub counters: Counters,
    pub pending_containers: u64,
    pub pending: Resource,
    /// Every queue, parents before children (`/scheduler`, the UI, `queue -status`).
    pub queue_views: Vec<QueueView>,
    pub max_allocation: Resource,
    /// Resources used per application, as the scheduler accounts them; an application that
    /// uses nothing (every waiting one) is left out: read it as zero.
    pub app_usage: BTreeMap<ApplicationId, Resource>,
    /// (total, used) per schedulable node.
    pub node_usage: BTreeMap<NodeId, (Resource, Resource)>,
    /// Gangs per application (Spindle's `gangs` extension of the app view).
    pub app_gangs: BTreeMap<ApplicationId, Vec<spindle_common::records::am::GangStatus>>,
    /// Outstanding asks per application, for `resourceRequests`.
    pub app_asks: BTreeMap<ApplicationId, Vec<(AskKey, Ask)>>,
    /// Containers under a preemption notice, per application.
    pub notices: BTreeMap<ApplicationId, u32>,
    /// What the preemption monitor has done (`/metrics`).
    pub preemption: crate::core::PreemptionCounters,
    /// The cluster's labels, mappings and central attributes.
    pub labels: NodeLabels,
    /// Per node: its partition, its attributes (the NM's and the central ones) and the
    /// allocation tags of what runs there.
    pub node_placement: BTreeMap<NodeId, NodePlacement>,
    /// The scheduling passes' work counters (`/metrics`).
    pub pass_stats: crate::core::scheduler::PassStats,
    /// Sampled GPU use per application (`gpuUtilization`, `idleGpuSeconds`).
    pub app_gpu: BTreeMap<ApplicationId, crate::core::AppGpuUse>,
    /// `http` or `https` (`yarn.http.policy`, as in the address AMs are told): the scheme of
    /// the URLs REST answers carry (tracking and log URLs, a container's node address).
    pub scheme: &'static str,
}

/// A node as placement sees it.
#[derive(Debug, Clone, Default)]
pub struct NodePlacement {
    pub partition: String,
    pub attributes: BTreeMap<String, String>,
    pub tags: BTreeMap<String, u32>,
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
                // Not the waiting ones: with 100,000 pending applications these zeros
                // were 11 MB per snapshot, and two snapshots live while one is rebuilt.
                .filter(|(_, v)| !v.used.is_zero())
                .map(|(k, v)| (*k, v.used.clone()))
                .collect(),
            node_usage: core
                .scheduler()
                .nodes()
                .iter()
                .map(|n| (n.id.clone(), (n.total.clone(), n.used.clone())))
                .collect(),
            labels: core.node_labels().clone(),
            node_placement: core
                .nodes()
                .keys()
                .map(|id| {
                    let tags = core
                        .scheduler()
                        .node(id)
                        .map(|n| n.tags.totals().clone())
                        .unwrap_or_default();
                    let p = NodePlacement {
                        partition: core.partition_of(id),
                        attributes: core.node_attributes(id),
                        tags,
                    };
                    (id.clone(), p)
                })
                .collect(),
            app_gangs: core
                .scheduler()
                .apps()
                .iter()
                .filter(|(_, a)| !a.gangs.is_empty())
                .map(|(k, _)| (*k, wire::all(core.gang_statuses(k))))
                .collect(),
            app_asks: core
                .scheduler()
                .apps()
                .iter()
                .filter(|(_, a)| !a.asks.is_empty())
                .map(|(k, a)| (*k, a.asks.iter().map(|(k, v)| (*k, v.clone())).collect()))
                .collect(),
            notices: core
                .preemption()
                .notices
                .keys()
                .fold(BTreeMap::new(), |mut m, c| {
                    *m.entry(c.application_id()).or_insert(0) += 1;
                    m
                }),
            preemption: core.preemption().counters.clone(),
            pass_stats: core.scheduler().stats.clone(),
            app_gpu: core.gpu_use_by_app(),
            scheme: if core.conf().rm_address.starts_with("https://") {
                "https"
            } else {
                "http"
            },
        }
    }
}

impl Command {
    /// The call's name in `/metrics` (`spindle_rm_core_call_duration_seconds{call}`).
    fn name(&self) -> &'static str {
        match self {
            Command::NewApplication { .. } => "new_application",
            Command::Submit { .. } => "submit",
            Command::Kill { .. } => "kill",
            Command::RegisterNode { .. } => "register_node",
            Command::Heartbeat { .. } => "node_heartbeat",
            Command::AmRegister { .. } => "am_register",
            Command::AmAllocate { .. } => "am_allocate",
            Command::AmFinish { .. } => "am_finish",
            Command::UnregisterNode { .. } => "unregister_node",
            Command::AmLaunched { .. } => "am_launched",
            Command::Snapshot { .. } => "snapshot",
            #[allow(unreachable_patterns)]
            _ => "admin",
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

/// The live capacity-scheduler configuration as the driver keeps it beside the core: the
/// raw property set (what `GET /scheduler-conf` shows and mutations edit), the yarn-site
/// settings it is parsed with, and its version (bumped by every applied change).
struct SchedConfState {
    props: CsProps,
    site: SiteSettings,
    version: u64,
}

struct Driver {
    core: RmCore,
    store: StateStore,
    sched: SchedConfState,
    publish: watch::Sender<Arc<Snapshot>>,
    published_version: u64,
    /// Weak, so that the driver stops once every handle (router, tests) is gone.
    tx: mpsc::WeakSender<Command>,
    http: reqwest::Client,
    /// `http` or `https` (`yarn.http.policy`): how NMs are dialed.
    nm_scheme: &'static str,
}

impl Driver {
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
                        result = Err(RmError::Store(e.to_string()));
                    }
                }
                // AMs poll for their containers: nothing to push.
                Effect::ContainersAllocated(_) => {}
                // The notice rides on the AM's next allocate answer.
                Effect::PreemptionNotice(_) => {}
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
                .send(Command::AmLaunched(attempt, container, result))
                .await;
        });
    }

    /// An ApplicationMasterProtocol call: checks the AM-RM token, runs `f` on the core for
    /// the attempt it names, and executes the effects; when `durable`, a state-store failure
    /// fails the call (the caller must not believe a change that was not written).
    fn am_call<T>(
        &mut self,
        token: &str,
        durable: bool,
        f: impl FnOnce(&mut RmCore, &ApplicationAttemptId) -> Result<T, CoreError>,
    ) -> Result<T, RmError> {
        let r = self
            .core
            .authenticate_am(token)
            .and_then(|att| {
                // The command's span names the attempt once the token says which it is.
                let span = tracing::Span::current();
                span.record("app_id", tracing::field::display(&att.application_id));
                span.record("attempt_id", tracing::field::display(&att));
                f(&mut self.core, &att)
            })
            .map_err(RmError::from);
        let s = self.settle();
        if durable {
            r.and_then(|o| s.map(|_| o))
        } else {
            r
        }
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
        };
        tokio::spawn(tracing::Instrument::instrument(task, span));
    }

    fn handle(&mut self, cmd: Command) {
        let span = command_span(&cmd);
        let _in_span = span.enter();
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
                let (interval_ms, refused) = match self.core.try_register_node(*reg, now) {
                    Ok(interval) => {
                        info!(node_id = %id, "node registered");
                        (interval, None)
                    }
                    Err(why) => {
                        warn!(node_id = %id, "node refused: {why}");
                        (self.core.conf().heartbeat_interval_ms, Some(why))
                    }
                };
                let _ = self.settle();
                let _ = reply.send(Ok(NodeRegistered {
                    interval_ms,
                    container_key: self.core.newest_container_key().clone(),
                    rm_identifier: self.core.cluster_timestamp(),
                    refused,
                }));
            }
            Command::GpuUse { node, uses, reply } => {
                let ignored = self.core.record_gpu_use(&node, uses, now);
                let _ = reply.send(Ok(ignored));
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
                let key = self.core.newest_container_key().clone();
                let _ = reply.send(Ok((r, key)));
            }
            Command::AmRegister {
                token,
                host,
                rpc_port,
                tracking_url,
                reply,
            } => {
                let r = self.am_call(&token, true, |core, att| {
                    let (max, queue) = core.am_register(att, host, rpc_port, tracking_url, now)?;
                    Ok((max, queue, wire::all(core.inherited_containers(att))))
                });
                let _ = reply.send(r);
            }
            Command::AmAllocate {
                token,
                response_id,
                asks,
                release,
                progress,
                report,
                reply,
            } => {
                // Allocate writes nothing the client must wait for: a store problem is logged.
                let r = self.am_call(&token, false, |core, att| {
                    core.am_allocate_with(att, response_id, asks, release, progress, report, now)
                });
                let _ = reply.send(r);
            }
            Command::AmFinish {
                token,
                status,
                diagnostics,
                tracking_url,
                reply,
            } => {
                let r = self.am_call(&token, true, |core, att| {
                    core.am_finish(att, status, diagnostics, tracking_url, now)
                });
                let _ = reply.send(r);
            }
            Command::UnregisterNode(node, reply) => {
                self.core.unregister_node(&node, now);
                info!(node_id = %node, "node unregistered (SHUTDOWN)");
                let _ = self.settle();
                let _ = reply.send(Ok(()));
            }
            Command::MoveApp {
                id,
                queue,
                caller,
                reply,
            } => {
                let r = self
                    .core
                    .move_app(&id, &queue, &caller, now)
                    .map_err(RmError::from);
                if let Ok(path) = &r {
                    info!(app_id = %id, user = %caller.user, "application moved to queue {path}");
                }
                let s = self.settle();
                let _ = reply.send(r.and_then(|o| s.map(|_| o)));
            }
            Command::SetPriority {
                id,
                priority,
                caller,
                reply,
            } => {
                let r = self
                    .core
                    .set_priority(&id, priority, &caller, now)
                    .map_err(RmError::from);
                let s = self.settle();
                let _ = reply.send(r.and_then(|o| s.map(|_| o)));
            }
            Command::UpdateLifetime {
                id,
                expiry,
                caller,
                reply,
            } => {
                let r = self
                    .core
                    .update_lifetime(&id, expiry, &caller, now)
                    .map_err(RmError::from);
                if let Ok(at) = &r {
                    info!(app_id = %id, user = %caller.user, "application lifetime set to end at {at} ms");
                }
                let s = self.settle();
                let _ = reply.send(r.and_then(|o| s.map(|_| o)));
            }
            Command::QueueAccess {
                queue,
                caller,
                user,
                acl,
                reply,
            } => {
                let r = self
                    .core
                    .queue_access_of(&queue, &caller, &user, acl)
                    .map_err(RmError::from);
                let _ = reply.send(r);
            }
            Command::CheckAdmin(caller, reply) => {
                let _ = reply.send(self.core.check_admin(&caller).map_err(RmError::from));
            }
            Command::CancelUserToken {
                seq,
                max_date,
                reply,
            } => {
                let r = self
                    .store
                    .cancel_user_token(seq, max_date, now)
                    .map_err(|e| RmError::Store(e.to_string()));
                let _ = reply.send(r);
            }
            Command::ChangeLabels {
                change,
                caller,
                reply,
            } => {
                let r = self
                    .core
                    .check_admin(&caller)
                    .and_then(|()| self.core.plan_labels(change))
                    .map_err(RmError::from)
                    .and_then(|next| {
                        self.store
                            .put_labels(&next)
                            .map_err(|e| RmError::Store(e.to_string()))?;
                        info!(user = %caller.user, "node labels changed");
                        self.core.set_labels(next, now);
                        Ok(())
                    });
                let _ = self.settle();
                let _ = reply.send(r);
            }
            Command::NodeSelfReport {
                node,
                labels,
                attributes,
                reply,
            } => {
                let l = labels.and_then(|l| {
                    self.core
                        .report_node_labels(&node, &l)
                        .err()
                        .map(|e| e.to_string())
                });
                let a = attributes.and_then(|a| {
                    self.core
                        .report_node_attributes(&node, a)
                        .err()
                        .map(|e| e.to_string())
                });
                if let Some(why) = l.as_ref().or(a.as_ref()) {
                    warn!(node_id = %node, "refused the node's own labels or attributes: {why}");
                }
                self.core.run_after_change(now);
                let _ = self.settle();
                let _ = reply.send(Ok((l, a)));
            }
            Command::RefreshNodes {
                hosts,
                how,
                caller,
                reply,
            } => {
                let r = self.core.check_admin(&caller).map(|()| {
                    let done = self.core.refresh_nodes(hosts, how, now);
                    info!(
                        user = %caller.user,
                        ?how,
                        decommissioned = ?done.decommissioned,
                        decommissioning = ?done.decommissioning,
                        recommissioned = ?done.recommissioned,
                        "nodes refreshed"
                    );
                    done
                });
                if let Err(e) = &r {
                    warn!(user = %caller.user, "refreshNodes refused: {e}");
                }
                let _ = self.settle();
                let _ = reply.send(r.map_err(RmError::from));
            }
            Command::RefreshQueues {
                props,
                caller,
                reply,
            } => {
                let r = self
                    .core
                    .check_admin(&caller)
                    .map_err(RmError::from)
                    .and_then(|()| {
                        self.apply_scheduler_props(*props, SchedConfSource::Refresh, &caller, now)
                    });
                let _ = reply.send(r);
            }
            Command::MutateSchedulerConf {
                mutation,
                caller,
                dry_run,
                reply,
            } => {
                let r = self
                    .core
                    .check_admin(&caller)
                    .map_err(RmError::from)
                    .and_then(|()| self.mutate(&mutation, &caller, dry_run, now));
                let _ = reply.send(r);
            }
            Command::GetSchedulerConf(caller, reply) => {
                let r = self
                    .core
                    .check_admin(&caller)
                    .map_err(RmError::from)
                    .map(|()| (self.sched.version, self.sched.props.clone()));
                let _ = reply.send(r);
            }
            Command::Snapshot(reply) => {
                let _ = reply.send(self.current_snapshot());
            }
            Command::Accounting { from, to, reply } => {
                let rows = match self.store.usage_between(from, to) {
                    Ok((rows, skipped)) => {
                        for s in skipped {
                            warn!("accounting: skipped a corrupt record: {s}");
                        }
                        Ok((rows, self.current_snapshot()))
                    }
                    Err(e) => Err(RmError::Store(e.to_string())),
                };
                let _ = reply.send(rows);
            }
            Command::AmLaunched(attempt, container, result) => {
                self.core.am_launched(&attempt, &container, result, now);
                let _ = self.settle();
            }
        }
    }
}

impl Driver {
    /// Applies a `sched-conf` mutation to the live set, or (dry run) only says whether it
    /// would be accepted.
    fn mutate(
        &mut self,
        m: &SchedConfMutation,
        caller: &Caller,
        dry_run: bool,
        now: u64,
    ) -> Result<(u64, CsProps), RmError> {
        let new_props = capacity::apply_mutation(&self.sched.props, m)?;
        if dry_run {
            let conf = self.check_scheduler_props(&new_props)?;
            self.core.check_reconfigure(&conf)?;
            return Ok((self.sched.version, new_props));
        }
        let version =
            self.apply_scheduler_props(new_props, SchedConfSource::Mutation, caller, now)?;
        Ok((version, self.sched.props.clone()))
    }

    /// Parses `props` and checks the move from the running tree (everything but the
    /// applications, which the core checks).
    fn check_scheduler_props(&self, props: &CsProps) -> Result<SchedulerConf, RmError> {
        let conf = capacity::parse_props(props, &self.sched.site)?;
        capacity::validate_transition(self.core.scheduler_conf(), &conf)
            .map_err(|e| e.locate(props))?;
        Ok(conf)
    }

    /// Validates `props` as a whole, applies them to the core, and makes them durable, in
    /// that order; any refusal leaves the running tree, the live set and the store as they
    /// were. A set equal to the live one changes nothing (and keeps the version).
    fn apply_scheduler_props(
        &mut self,
        props: CsProps,
        source: SchedConfSource,
        caller: &Caller,
        now: u64,
    ) -> Result<u64, RmError> {
        let conf = self.check_scheduler_props(&props)?;
        if props.values() == self.sched.props.values() {
            return Ok(self.sched.version);
        }
        let old = self.core.scheduler_conf().clone();
        if let Err(e) = self.core.reconfigure(conf, now) {
            let _ = self.settle();
            return Err(e.into());
        }
        let version = self.sched.version + 1;
        let stored = StoredSchedConf {
            version,
            source,
            user: caller.user.clone(),
            time: now,
            props: props.values(),
        };
        if let Err(e) = self.store.put_sched_conf(&stored) {
            // Not durable, so not applied: put the old tree back.
            error!("state store write of scheduler configuration version {version} failed: {e}");
            if let Err(re) = self.core.reconfigure(old, now) {
                error!("restoring the previous scheduler configuration failed: {re}");
            }
            let _ = self.settle();
            return Err(RmError::Store(e.to_string()));
        }
        info!(
            version,
            user = %caller.user,
            source = ?source,
            "scheduler configuration applied ({} properties)",
            props.len()
        );
        self.sched.props = props;
        self.sched.version = version;
        self.settle()?;
        Ok(version)
    }
}

/// The span a command is handled in, named for the command and carrying the ids it concerns
/// (`app_id`, `attempt_id`, `container_id`, `node_id`), so that every line logged while it is
/// handled, effects included, says what it is about. AM calls record their attempt once the
/// token is checked ([`Driver::am_call`]). Snapshot reads, the most frequent command, get none.
fn command_span(cmd: &Command) -> tracing::Span {
    use tracing::field::Empty;
    use tracing::info_span;
    match cmd {
        Command::NewApplication(_) => info_span!("new_application"),
        Command::Submit(id, ..) => info_span!("submit", app_id = %id),
        Command::Kill(id, ..) => info_span!("kill", app_id = %id),
        Command::RegisterNode(reg, _) => info_span!("register_node", node_id = %reg.id),
        Command::Heartbeat { node, .. } => info_span!("node_heartbeat", node_id = %node),
        Command::GpuUse { node, .. } => info_span!("gpu_use", node_id = %node),
        Command::AmRegister { .. } => info_span!("am_register", app_id = Empty, attempt_id = Empty),
        Command::AmAllocate { .. } => info_span!("am_allocate", app_id = Empty, attempt_id = Empty),
        Command::AmFinish { .. } => info_span!("am_finish", app_id = Empty, attempt_id = Empty),
        Command::UnregisterNode(node, _) => info_span!("unregister_node", node_id = %node),
        Command::ChangeLabels { .. } => info_span!("change_labels"),
        Command::NodeSelfReport { node, .. } => info_span!("node_self_report", node_id = %node),
        Command::MoveApp { id, .. } => info_span!("move_app", app_id = %id),
        Command::SetPriority { id, .. } => info_span!("set_priority", app_id = %id),
        Command::UpdateLifetime { id, .. } => info_span!("update_lifetime", app_id = %id),
        Command::QueueAccess { .. } | Command::CheckAdmin(..) | Command::GetSchedulerConf(..) => {
            info_span!("check_access")
        }
        Command::RefreshNodes { .. } => info_span!("refresh_nodes"),
        Command::RefreshQueues { .. } => info_span!("refresh_queues"),
        Command::MutateSchedulerConf { .. } => info_span!("mutate_scheduler_conf"),
        Command::AmLaunched(attempt, container, _) => info_span!(
            "am_launched",
            app_id = %attempt.application_id,
            attempt_id = %attempt,
            container_id = %container,
        ),
        Command::Snapshot(_) => tracing::Span::none(),
        #[allow(unreachable_patterns)]
        _ => info_span!("command"),
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
    crate::config::warn_unknown_keys(&conf.unknown_keys);
    let mut store = StateStore::open(&conf.store_path)?;
    let recovered = store.recover()?;
    for s in &recovered.skipped {
        warn!("state store: skipped unreadable record: {s}");
    }
    let sched = stored_scheduler_conf(&store, &conf)?;
    let mut core_conf = conf.core.clone();
    if let Some((props, parsed)) = &sched.1 {
        core_conf.scheduler = parsed.clone();
        info!(
            version = sched.0,
            "capacity scheduler configured from the state store ({} properties set through scheduler-conf; capacity-scheduler.xml is not read until refreshQueues)",
            props.len()
        );
    }
    let sched = SchedConfState {
        version: sched.0,
        props: sched
            .1
            .map(|(p, _)| p)
            .unwrap_or_else(|| conf.scheduler_props.clone()),
        site: conf.scheduler_site.clone(),
    };
    let cluster_ts = now_ms();
    // The AM-RM key is the stored one (AM-RM tokens survive a restart); the container-token
    // master key is new at every start, never stored, and rolled below.
    let first_key = ContainerKey::random_id()
        .and_then(ContainerKey::generate)
        .context("generating the container-token master key")?;
    let mut core = RmCore::with_container_key(
        core_conf,
        cluster_ts,
        recovered.epoch,
        recovered.secret,
        first_key,
    );
    let cancelled_user_tokens = store.cancelled_user_tokens(cluster_ts)?;
    let labels = store.labels()?;
    if !labels.cluster.is_empty() {
        info!(
            "node labels recovered from the state store: {}",
            labels.cluster.keys().cloned().collect::<Vec<_>>().join(",")
        );
    }
    core.set_labels(labels, cluster_ts);
    // Excluded hosts are turned away from the first registration on.
    let hosts = conf.hosts.read().context(
        "reading the host files (yarn.resourcemanager.nodes.include-path / exclude-path)",
    )?;
    if !hosts.exclude.is_empty() || !hosts.include.is_empty() {
        info!(
            excluded = hosts.exclude.len(),
            included = hosts.include.len(),
            "host lists read"
        );
    }
    core.set_host_lists(hosts);
    // At start the labels may not have been added yet: a queue naming an unknown one is
    // told, not refused (a refresh or a scheduler-conf change refuses it).
    if let Err(e) = core.check_queue_labels(&core.conf().scheduler) {
        warn!("capacity scheduler: {e}; add the label with rmadmin -addToClusterNodeLabels (its capacity is unused until then)");
    }
    // What AMs dial: a wildcard bind is no address (see `spindle_common::net`).
    let host =
        spindle_common::net::advertised_host(conf.rm_hostname.as_deref(), &addr.ip().to_string());
    core.set_rm_address(format!("{}://{host}:{}", conf.http.scheme(), addr.port()));
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
    let rolling_ms = conf.container_key_rolling_ms;
    let (tx, mut rx) = mpsc::channel::<Command>(4096);
    let (publish, snapshot) = watch::channel(Arc::new(Snapshot::of(&core)));
    let mut http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .connect_timeout(Duration::from_secs(3));
    // NMs under HTTPS_ONLY: trusted through the system roots and spindle.ssl.client.ca-file.
    if let Some((file, pem)) = &conf.http.client.ca {
        for cert in reqwest::Certificate::from_pem_bundle(pem)
            .with_context(|| format!("reading the CA certificates in {}", file.display()))?
        {
            http = http.add_root_certificate(cert);
        }
    }
    let http = http.build().context("building the HTTP client")?;
    let mut driver = Driver {
        core,
        store,
        sched,
        publish,
        published_version: u64::MAX,
        tx: tx.downgrade(),
        http,
        nm_scheme: conf.http.client.policy.scheme(),
    };
    let _ = driver.settle();
    let metrics = Arc::new(crate::rest::RmMetrics::new());
    let loop_metrics = metrics.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let rolling = Duration::from_millis(rolling_ms);
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
                    driver.core.tick(now_ms());
                    for e in driver.core.take_idle_events() {
                        info!(container_id = %e.container, queue = %e.queue, action = e.action.as_str(),
                            gpus = e.gpus, idle_ms = e.idle_ms, timeout_ms = e.timeout_ms,
                            "container holds idle GPUs past its queue's gpu-idle-timeout-ms");
                    }
                    let _ = driver.settle();
                    "tick"
                }
            };
            loop_metrics.observe_core_call(call, start.elapsed());
            loop_metrics.observe_gang_waits(&driver.core.take_gang_waits());
        }
    });
    let handle = DriverHandle { tx, snapshot };
    let info = crate::rest::RmInfo {
        cancelled_user_tokens,
        cluster_ts,
        started_on: cluster_ts,
        cluster_id: conf.cluster_id.clone(),
        store_path: conf.store_path.display().to_string(),
        conf: Arc::new(conf),
        metrics,
    };
    let http_conf = info.conf.http.clone();
    let router = crate::rest::router(handle.clone(), info);
    let serve: Serve = Box::new(move |shutdown| {
        Box::pin(async move {
            spindle_rest_edge::serve::serve(listener, router, http_conf, shutdown)
                .await
                .context("serving HTTP")
        })
    });
    Ok((RunningRm { addr, handle }, serve))
}

/// The configuration version, and the stored property set with its parsed tree when the
/// last applied change was a mutation (which then wins over `capacity-scheduler.xml`, as
/// YARN's mutable configuration stores do). A stored set that no longer validates (say,
/// yarn-site.xml lowered the maximum allocation) stops the RM with an error naming it,
/// rather than silently running a different tree.
#[allow(clippy::type_complexity)]
fn stored_scheduler_conf(
    store: &StateStore,
    conf: &RmConfig,
) -> anyhow::Result<(u64, Option<(CsProps, SchedulerConf)>)> {
    let Some(stored) = store.latest_sched_conf()? else {
        return Ok((0, None));
    };
    if stored.source != SchedConfSource::Mutation {
        return Ok((stored.version, None));
    }
    let origin = format!(
        "{} (scheduler-conf version {})",
        conf.store_path.display(),
        stored.version
    );
    let props = CsProps::from_pairs(stored.props, Some(&origin));
    let parsed = capacity::parse_props(&props, &conf.scheduler_site).map_err(|e| {
        anyhow::anyhow!(
            "the capacity-scheduler configuration stored by PUT /ws/v1/cluster/scheduler-conf (version {}, by {}) is refused: {e}",
            stored.version,
            stored.user
        )
    })?;
    Ok((stored.version, Some((props, parsed))))
}
