//! The gang client (`request_gang`, `release_gang`), the event stream and the training AM
//! against a fake RM that speaks the gang protocol (all-or-nothing grants, PENDING /
//! RESERVED / ALLOCATED / TIMED_OUT / FAILED statuses) and fake NMs, served by axum in the
//! test on several ports (one per fake node) that share one state. The fake can also behave
//! as an RM that ignores the gang field (plain asks, granted a few per heartbeat), and can
//! preempt: a notice (YARN's `preemptionMessage` with Spindle's deadline) repeated in every
//! answer while its containers run, which the fake NM's `containers/signal` ends with -102.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::StreamExt;
use serde_json::json;
use spindle_appmaster_sdk::amrm::{
    AllocationEvent, AmRmClient, ContainerRequest, PreemptionNotice, FAST_INTERVAL,
};
use spindle_appmaster_sdk::gang::{GangError, GangMember, GangPhase, GangRequest};
use spindle_appmaster_sdk::train::{self, TrainAmConfig};
use spindle_appmaster_sdk::{AmClient, AmEnv, NmClient, RmAddress};
use spindle_common::ids::{ApplicationAttemptId, ApplicationId, ContainerId, NodeId};
use spindle_common::records::am::{
    AllocateRequest, AllocateResponse, CheckpointReport, Container, ContainerStatus,
    FinishApplicationMasterRequest, FinishApplicationMasterResponse, GangPlacement, GangSpec,
    GangState, GangStatus, GangTimeoutPolicy, PreemptionContainer, PreemptionMessage,
    RegisterApplicationMasterResponse, StrictPreemptionContract,
};
use spindle_common::records::exception::ExceptionKind;
use spindle_common::records::node::{
    ContainerLaunchContext, NmContainerBody, NmContainerInfo, ReleaseContainersRequest,
    ReleaseContainersResponse, SignalContainerCommand, SignalContainerRequest,
    SignalContainerResponse, StartContainersRequest, StartContainersResponse,
    StopContainersRequest, StopContainersResponse,
};
use spindle_common::records::resource::ResourceInfo;
use spindle_common::resource::Resource;
use spindle_common::states::{ContainerState, FinalApplicationStatus};

const TOKEN: &str = "amrm-token";
/// YARN's ContainerExitStatus.PREEMPTED.
const PREEMPTED: i32 = -102;
/// Every test is bounded by this.
const LIMIT: Duration = Duration::from_secs(30);

fn attempt() -> ApplicationAttemptId {
    ApplicationAttemptId::new(ApplicationId::new(1, 1), 1)
}

#[derive(Debug, Clone)]
struct Ask {
    num: i32,
    capability: ResourceInfo,
    gang: Option<GangSpec>,
}

#[derive(Debug, Clone)]
struct FGang {
    state: GangState,
    size: u32,
    members: Vec<ContainerId>,
    failed: Vec<ContainerId>,
    since: Instant,
    timeout_ms: u64,
    hard: bool,
    diagnostics: String,
}

#[derive(Debug, Clone)]
struct FContainer {
    node: usize,
    gang: Option<String>,
    running: bool,
    started: bool,
}

#[derive(Default)]
struct Fake {
    nm_addrs: Vec<String>,
    /// Free container slots per node.
    free: Vec<u32>,
    /// Speak the gang protocol; otherwise treat gang asks as plain asks.
    gang_mode: bool,
    /// Plain asks granted per allocate call.
    plain_per_call: u32,
    asks: BTreeMap<(i32, i64), Ask>,
    gangs: BTreeMap<String, FGang>,
    calls: Vec<AllocateRequest>,
    next_seq: u64,
    containers: BTreeMap<ContainerId, FContainer>,
    completed: Vec<ContainerStatus>,
    started: Vec<(usize, ContainerId, ContainerLaunchContext)>,
    /// (node, containers) per start call.
    start_calls: Vec<(usize, usize)>,
    /// Containers of held start calls, not yet released, with their scripted exit.
    held: BTreeMap<ContainerId, Option<i32>>,
    /// Every container a release call let run.
    released: Vec<ContainerId>,
    stops: Vec<ContainerId>,
    /// Exit status of (gang attempt, rank); unscripted ranks exit 0, or keep running in
    /// the attempts listed in `hang_attempts`.
    script: BTreeMap<(u32, u32), i32>,
    hang_attempts: BTreeSet<u32>,
    /// Refuse gang asks with this placement (400), as an RM refuses a bad ask.
    reject_placement: Option<GangPlacement>,
    free_port_calls: u32,
    finished: Option<FinishApplicationMasterRequest>,
    /// A HARD gang timeout failed the application: allocate answers 409 from then on.
    app_failed: bool,
    /// A preemption notice: (containers, deadline in ms, gang ids), told in every answer
    /// while any of its containers runs.
    notice: Option<(Vec<ContainerId>, u64, Vec<String>)>,
    /// Signal calls: the container, the command, and the preemption marker's content in
    /// `marker_dir` at that moment.
    signals: Vec<(ContainerId, SignalContainerCommand, Option<String>)>,
    /// Where the training AM writes its preemption marker (its checkpoint dir).
    marker_dir: Option<std::path::PathBuf>,
}

type Shared = Arc<Mutex<Fake>>;

#[derive(Clone)]
struct S {
    shared: Shared,
    node: usize,
}

fn lock(s: &Shared) -> MutexGuard<'_, Fake> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

fn remote(kind: ExceptionKind, exception: &str, msg: &str) -> Response {
    let status = StatusCode::from_u16(kind.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut body = kind.body(msg);
    body.remote_exception.exception = exception.into();
    (status, Json(body)).into_response()
}

impl Fake {
    fn complete(&mut self, id: ContainerId, exit: i32, diag: &str) {
        let Some(c) = self.containers.get_mut(&id) else {
            return;
        };
        if !c.running {
            return;
        }
        c.running = false;
        let node = c.node;
        let gang = c.gang.clone();
        self.free[node] += 1;
        if let Some(g) = gang.as_ref().and_then(|g| self.gangs.get_mut(g)) {
            if exit == PREEMPTED {
                g.state = GangState::PREEMPTED;
            } else if exit != 0 && g.members.contains(&id) && !g.failed.contains(&id) {
                g.failed.push(id);
                g.state = GangState::FAILED;
                g.diagnostics = format!("member {id} ended with exit status {exit}");
            }
        }
        self.completed.push(ContainerStatus {
            container_id: id,
            state: ContainerState::COMPLETE,
            exit_status: exit,
            diagnostics: diag.into(),
            gang_id: gang,
        });
    }

    fn grant(
        &mut self,
        key: (i32, i64),
        cap: &ResourceInfo,
        gang: Option<String>,
    ) -> Option<Container> {
        let node = (0..self.free.len()).max_by_key(|n| (self.free[*n], usize::MAX - n))?;
        if self.free[node] == 0 {
            return None;
        }
        self.free[node] -= 1;
        self.next_seq += 1;
        let id = ContainerId::new(attempt(), 0, self.next_seq + 1);
        let addr = self.nm_addrs[node].clone();
        self.containers.insert(
            id,
            FContainer {
                node,
                gang: gang.clone(),
                running: true,
                started: false,
            },
        );
        if let Some(g) = gang.and_then(|g| self.gangs.get_mut(&g)) {
            g.members.push(id);
        }
        Some(Container {
            id,
            node_id: addr.parse().unwrap_or_else(|_| NodeId::new("127.0.0.1", 1)),
            node_http_address: addr,
            resource: cap.clone(),
            priority: key.0,
            container_token: id.to_string(),
            execution_type: "GUARANTEED".into(),
            allocation_request_id: key.1,
            version: 0,
        })
    }

    fn schedule(&mut self) -> Vec<Container> {
        let mut out = Vec::new();
        if self.gang_mode {
            let ids: Vec<String> = self.gangs.keys().cloned().collect();
            for id in ids {
                let waiting = self
                    .gangs
                    .get(&id)
                    .is_some_and(|g| matches!(g.state, GangState::PENDING | GangState::RESERVED));
                if !waiting {
                    continue;
                }
                let keys: Vec<((i32, i64), Ask)> = self
                    .asks
                    .iter()
                    .filter(|(_, a)| a.num > 0 && a.gang.as_ref().is_some_and(|g| g.id == id))
                    .map(|(k, a)| (*k, a.clone()))
                    .collect();
                let need: u32 = keys.iter().map(|(_, a)| a.num as u32).sum();
                let free: u32 = self.free.iter().sum();
                let Some(g) = self.gangs.get_mut(&id) else {
                    continue;
                };
                g.size = need;
                if need > 0 && need <= free {
                    g.state = GangState::ALLOCATED;
                    g.diagnostics.clear();
                    for (k, a) in keys {
                        for _ in 0..a.num {
                            if let Some(c) = self.grant(k, &a.capability, Some(id.clone())) {
                                out.push(c);
                            }
                        }
                        if let Some(x) = self.asks.get_mut(&k) {
                            x.num = 0;
                        }
                    }
                } else if g.timeout_ms > 0
                    && g.since.elapsed() > Duration::from_millis(g.timeout_ms)
                {
                    g.state = GangState::TIMED_OUT;
                    let hard = g.hard;
                    g.diagnostics = format!(
                        "gang {id} timed out after {} ms: needs {need} containers; {free} free",
                        g.timeout_ms
                    );
                    for (k, _) in keys {
                        if let Some(x) = self.asks.get_mut(&k) {
                            x.num = 0;
                        }
                    }
                    self.app_failed |= hard;
                } else {
                    g.state = if free > 0 {
                        GangState::RESERVED
                    } else {
                        GangState::PENDING
                    };
                    g.diagnostics = format!("needs {need} containers; {free} free");
                }
            }
        }
        let mut budget = self.plain_per_call;
        let keys: Vec<(i32, i64)> = self.asks.keys().copied().collect();
        for k in keys {
            while budget > 0 {
                let Some(a) = self.asks.get(&k).cloned() else {
                    break;
                };
                let plain = a.gang.is_none() || !self.gang_mode;
                if !plain || a.num <= 0 {
                    break;
                }
                let Some(c) = self.grant(k, &a.capability, None) else {
                    break;
                };
                out.push(c);
                budget -= 1;
                if let Some(x) = self.asks.get_mut(&k) {
                    x.num -= 1;
                }
            }
        }
        out
    }

    fn statuses(&self) -> Vec<GangStatus> {
        if !self.gang_mode {
            return vec![];
        }
        self.gangs
            .iter()
            .map(|(id, g)| GangStatus {
                id: id.clone(),
                state: g.state,
                size: g.size,
                diagnostics: g.diagnostics.clone(),
                reserved_nodes: if g.state == GangState::RESERVED {
                    vec![NodeId::new("127.0.0.1", 1)]
                } else {
                    vec![]
                },
                failed_containers: g.failed.clone(),
                ..Default::default()
            })
            .collect()
    }

    /// The notice's message, listing its containers that still run.
    fn preemption_message(&self) -> Option<PreemptionMessage> {
        let (ids, deadline, gangs) = self.notice.as_ref()?;
        let live: Vec<PreemptionContainer> = ids
            .iter()
            .filter_map(|id| Some((id, self.containers.get(id).filter(|c| c.running)?)))
            .map(|(id, c)| {
                let addr = self.nm_addrs[c.node].clone();
                PreemptionContainer {
                    id: *id,
                    node_id: addr.parse().ok(),
                    node_http_address: Some(addr),
                    gang_id: c.gang.clone(),
                }
            })
            .collect();
        (!live.is_empty()).then(|| PreemptionMessage {
            strict_contract: Some(StrictPreemptionContract {
                container: live.clone(),
            }),
            contract: None,
            deadline: *deadline,
            gang_ids: gangs.clone(),
        })
    }

    /// Allocate calls that carried asks of gang `id`.
    fn gang_calls(&self, id: &str) -> Vec<&AllocateRequest> {
        self.calls
            .iter()
            .filter(|c| {
                c.ask
                    .iter()
                    .any(|a| a.gang.as_ref().is_some_and(|g| g.id == id) && a.num_containers > 0)
            })
            .collect()
    }
}

async fn register(State(s): State<S>) -> Response {
    let _ = &s;
    Json(RegisterApplicationMasterResponse {
        maximum_resource_capability: ResourceInfo::from(&Resource::new(8192, 8)),
        queue: "default".into(),
        ..Default::default()
    })
    .into_response()
}

async fn allocate(State(s): State<S>, Json(req): Json<AllocateRequest>) -> Response {
    let mut f = lock(&s.shared);
    f.calls.push(req.clone());
    if f.app_failed {
        return remote(
            ExceptionKind::Conflict,
            "YarnException",
            "Application application_1_0001 is already FAILED",
        );
    }
    if let Some(p) = f.reject_placement {
        if req
            .ask
            .iter()
            .any(|a| a.gang.as_ref().is_some_and(|g| g.placement == p))
        {
            return remote(
                ExceptionKind::BadRequest,
                "InvalidResourceRequestException",
                "placement not supported here",
            );
        }
    }
    for a in &req.ask {
        let key = (a.priority, a.allocation_request_id);
        if let (true, Some(g)) = (f.gang_mode, &a.gang) {
            if a.num_containers > 0 {
                let fresh = f
                    .gangs
                    .get(&g.id)
                    .is_none_or(|x| !matches!(x.state, GangState::PENDING | GangState::RESERVED));
                if fresh {
                    f.gangs.insert(
                        g.id.clone(),
                        FGang {
                            state: GangState::PENDING,
                            size: 0,
                            members: vec![],
                            failed: vec![],
                            since: Instant::now(),
                            timeout_ms: g.timeout_ms,
                            hard: g.timeout_policy == GangTimeoutPolicy::HARD,
                            diagnostics: String::new(),
                        },
                    );
                }
            }
        }
        f.asks.insert(
            key,
            Ask {
                num: a.num_containers,
                capability: a.capability.clone(),
                gang: a.gang.clone(),
            },
        );
    }
    for r in &req.release {
        f.complete(*r, -100, "Container released by application");
    }
    let allocated = f.schedule();
    if f.app_failed {
        // The RM fails the application at a HARD timeout; this AM hears no more.
        return remote(
            ExceptionKind::Conflict,
            "YarnException",
            "Application application_1_0001 is already FAILED",
        );
    }
    let statuses = f.statuses();
    let preemption_message = f.preemption_message();
    Json(AllocateResponse {
        response_id: f.calls.len() as i32,
        allocated_containers: allocated,
        completed_container_statuses: std::mem::take(&mut f.completed),
        num_cluster_nodes: f.nm_addrs.len() as i32,
        gang_statuses: statuses,
        preemption_message,
        ..Default::default()
    })
    .into_response()
}

async fn finish(State(s): State<S>, Json(req): Json<FinishApplicationMasterRequest>) -> Response {
    lock(&s.shared).finished = Some(req);
    Json(FinishApplicationMasterResponse {
        is_unregistered: true,
    })
    .into_response()
}

async fn nm_start(State(s): State<S>, Json(req): Json<StartContainersRequest>) -> Response {
    let mut f = lock(&s.shared);
    let mut resp = StartContainersResponse::default();
    f.start_calls
        .push((s.node, req.start_container_request.len()));
    for r in req.start_container_request {
        let Ok(id) = r.container_token.parse::<ContainerId>() else {
            return remote(
                ExceptionKind::BadRequest,
                "BadRequestException",
                "bad token",
            );
        };
        let env = &r.container_launch_context.environment;
        let num = |k: &str| env.get(k).and_then(|v| v.parse::<u32>().ok());
        let exit = match (num("SPINDLE_GANG_ATTEMPT"), num("RANK")) {
            (Some(a), Some(rank)) => match f.script.get(&(a, rank)) {
                Some(e) => Some(*e),
                None if f.hang_attempts.contains(&a) => None,
                None => Some(0),
            },
            _ => None,
        };
        if let Some(c) = f.containers.get_mut(&id) {
            c.started = true;
        }
        f.started.push((s.node, id, r.container_launch_context));
        if req.hold.is_some() {
            f.held.insert(id, exit);
        } else if let Some(e) = exit {
            f.complete(id, e, "");
        }
        resp.successfully_started_containers.push(id);
    }
    Json(resp).into_response()
}

/// As a real NM: a call acting on containers carries `Authorization: Bearer` with a container
/// token of their application (this fake's tokens are the container ids), else 401.
fn bearer_refusal(headers: &axum::http::HeaderMap, ids: &[ContainerId]) -> Option<Response> {
    let token = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .and_then(|t| t.parse::<ContainerId>().ok());
    match token {
        Some(t)
            if ids
                .iter()
                .all(|id| id.application_id() == t.application_id()) =>
        {
            None
        }
        _ => Some(remote(
            ExceptionKind::Authorization,
            "AuthorizationException",
            "no container token of the application",
        )),
    }
}

async fn nm_release(
    State(s): State<S>,
    headers: axum::http::HeaderMap,
    Json(req): Json<ReleaseContainersRequest>,
) -> Response {
    if let Some(r) = bearer_refusal(&headers, &req.container_ids) {
        return r;
    }
    let mut f = lock(&s.shared);
    let mut resp = ReleaseContainersResponse::default();
    for id in req.container_ids {
        let Some(exit) = f.held.remove(&id) else {
            return remote(ExceptionKind::BadRequest, "BadRequestException", "not held");
        };
        f.released.push(id);
        if let Some(e) = exit {
            f.complete(id, e, "");
        }
        resp.successfully_released_containers.push(id);
    }
    Json(resp).into_response()
}

async fn nm_stop(
    State(s): State<S>,
    headers: axum::http::HeaderMap,
    Json(req): Json<StopContainersRequest>,
) -> Response {
    if let Some(r) = bearer_refusal(&headers, &req.container_ids) {
        return r;
    }
    let mut f = lock(&s.shared);
    let mut resp = StopContainersResponse::default();
    for id in req.container_ids {
        f.stops.push(id);
        f.complete(id, -105, "Container killed by the ApplicationMaster.");
        resp.successfully_stopped_containers.push(id);
    }
    Json(resp).into_response()
}

/// As the NM and the RM together: a SIGTERM'd worker of a gang under notice checkpoints and
/// exits, and the RM reports it -102 (PREEMPTED) with the RM's diagnostics.
async fn nm_signal(
    State(s): State<S>,
    headers: axum::http::HeaderMap,
    Json(req): Json<SignalContainerRequest>,
) -> Response {
    if let Some(r) = bearer_refusal(&headers, &[req.container_id]) {
        return r;
    }
    let mut f = lock(&s.shared);
    let marker = f
        .marker_dir
        .as_ref()
        .and_then(|d| std::fs::read_to_string(d.join(".spindle-preempted")).ok());
    f.signals.push((req.container_id, req.command, marker));
    let mut resp = SignalContainerResponse::default();
    if !f
        .containers
        .get(&req.container_id)
        .is_some_and(|c| c.running)
    {
        resp.failed_requests
            .push(spindle_common::records::node::FailedContainerRequest {
                container_id: req.container_id.to_string(),
                exception: "YarnException".into(),
                message: format!(
                    "Container {} is not handled by this NodeManager",
                    req.container_id
                ),
            });
        return Json(resp).into_response();
    }
    if req.command == SignalContainerCommand::GRACEFUL_SHUTDOWN {
        f.held.remove(&req.container_id);
        f.complete(
            req.container_id,
            PREEMPTED,
            "Container preempted by scheduler for application_1_0002 (a queue below its \
             guarantee): it exited with status 0 before its deadline, 40 ms after its notice",
        );
    }
    resp.successfully_signaled_containers.push(req.container_id);
    Json(resp).into_response()
}

async fn nm_container(State(s): State<S>, Path(id): Path<String>) -> Response {
    let f = lock(&s.shared);
    let Some(c) = id
        .parse::<ContainerId>()
        .ok()
        .and_then(|i| f.containers.get(&i))
    else {
        return remote(
            ExceptionKind::NotFound,
            "NotFoundException",
            "no such container",
        );
    };
    Json(NmContainerBody {
        container: NmContainerInfo {
            id: id.clone(),
            state: if c.running {
                "RUNNING"
            } else {
                "CONTAINER_CLEANEDUP_AFTER_KILL"
            }
            .into(),
            exit_code: -1000,
            diagnostics: String::new(),
            user: "u".into(),
            total_memory_needed_mb: 128,
            total_v_cores_needed: 1,
            container_logs_link: String::new(),
            node_id: f.nm_addrs[s.node].clone(),
            execution_type: "GUARANTEED".into(),
            container_log_files: vec![],
        },
    })
    .into_response()
}

async fn nm_free_port(State(s): State<S>) -> Response {
    let mut f = lock(&s.shared);
    f.free_port_calls += 1;
    Json(json!({"port": 29400 + s.node as u16})).into_response()
}

/// Serves the fake on `nodes` ports; node 0 is also the RM.
async fn serve(nodes: usize, slots_per_node: u32, fake: Fake) -> (Shared, String) {
    let mut listeners = Vec::new();
    let mut addrs = Vec::new();
    for _ in 0..nodes {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        addrs.push(l.local_addr().unwrap().to_string());
        listeners.push(l);
    }
    let shared = Arc::new(Mutex::new(Fake {
        nm_addrs: addrs.clone(),
        free: vec![slots_per_node; nodes],
        ..fake
    }));
    for (node, listener) in listeners.into_iter().enumerate() {
        let router = Router::new()
            .route("/ws/v1/am/register", post(register))
            .route("/ws/v1/am/allocate", post(allocate))
            .route("/ws/v1/am/finish", post(finish))
            .route("/ws/v1/node/containers/start", post(nm_start))
            .route("/ws/v1/node/containers/stop", post(nm_stop))
            .route("/ws/v1/node/containers/release", post(nm_release))
            .route("/ws/v1/node/containers/signal", post(nm_signal))
            .route("/ws/v1/node/containers/{id}", get(nm_container))
            .route("/ws/v1/node/ports/free", get(nm_free_port))
            .with_state(S {
                shared: shared.clone(),
                node,
            });
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
    }
    (shared, addrs[0].clone())
}

async fn client(addr: &str) -> AmRmClient {
    let env = AmEnv {
        rm_address: RmAddress::parse(addr).unwrap(),
        other_rms: Vec::new(),
        token: TOKEN.into(),
        attempt_id: attempt(),
        container_id: ContainerId::new(attempt(), 0, 1),
    };
    let mut amrm = AmRmClient::new(AmClient::new(env).unwrap());
    amrm.register("127.0.0.1", -1, "").await.unwrap();
    amrm
}

fn gang_mode() -> Fake {
    Fake {
        gang_mode: true,
        plain_per_call: 100,
        ..Default::default()
    }
}

/// One chief (2 vcores) and seven workers, as in docs/sdk.md.
fn chief_and_workers(id: &str) -> GangRequest {
    GangRequest::new(
        id,
        vec![
            GangMember::new(Resource::new(1024, 2), 1, 1),
            GangMember::new(Resource::new(512, 1), 7, 2),
        ],
    )
}

async fn bounded<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, f)
        .await
        .expect("finished in time")
}

#[tokio::test]
async fn a_gang_is_asked_in_one_call_and_granted_whole() {
    let (shared, addr) = serve(2, 4, gang_mode()).await;
    let mut amrm = client(&addr).await;
    let mut seen = Vec::new();
    let got = bounded(amrm.request_gang_with(chief_and_workers("g"), &mut |s| seen.push(s.state)))
        .await
        .unwrap();
    assert_eq!(got.len(), 8);
    assert_eq!(
        got.iter().filter(|c| c.allocation_request_id == 1).count(),
        1
    );
    assert_eq!(
        got.iter().filter(|c| c.allocation_request_id == 2).count(),
        7
    );
    assert_eq!(seen, vec![GangState::ALLOCATED]);
    {
        let f = lock(&shared);
        let calls = f.gang_calls("g");
        assert_eq!(
            calls.len(),
            1,
            "every member's ask in the same allocate call"
        );
        let asks = &calls[0].ask;
        let spec = asks[0].gang.clone().unwrap();
        assert_eq!(spec.placement, GangPlacement::PACK);
        assert!(asks.iter().all(|a| a.gang.as_ref() == Some(&spec)));
        let mut counts: Vec<(i64, i32)> = asks
            .iter()
            .map(|a| (a.allocation_request_id, a.num_containers))
            .collect();
        counts.sort();
        assert_eq!(counts, vec![(1, 1), (2, 7)]);
    }
    let view = amrm.gang("g").unwrap();
    assert_eq!(view.phase, GangPhase::Allocated);
    assert_eq!(view.live.len(), 8);
    assert_eq!(amrm.gang_of(&got[0].id), Some("g"));
    // Granted gang containers are not handed out a second time by poll.
    let ev = amrm.poll().await.unwrap();
    assert!(ev.allocated.is_empty());
    assert_eq!(amrm.outstanding_requests(), 0);
    // The same id cannot be asked while it is held.
    assert!(matches!(
        amrm.submit_gang(chief_and_workers("g")),
        Err(GangError::Invalid(_))
    ));
}

#[tokio::test]
async fn a_waiting_gang_polls_fast_reports_each_change_once_and_keeps_other_events() {
    let (shared, addr) = serve(2, 4, gang_mode()).await;
    let mut amrm = client(&addr).await;
    // A plain container first, then make the cluster too full for the gang.
    amrm.add_container_request(
        ContainerRequest::new(Resource::new(128, 1), 0).allocation_request_id(9),
    )
    .unwrap();
    let ev = bounded(amrm.poll()).await.unwrap();
    assert_eq!(ev.allocated.len(), 1);
    let plain = ev.allocated[0].id;
    lock(&shared).free = vec![0, 3];
    // While the gang waits, the plain container completes and then room appears.
    let s2 = shared.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        lock(&s2).complete(plain, 0, "done");
        tokio::time::sleep(Duration::from_millis(150)).await;
        let mut f = lock(&s2);
        f.free = vec![4, 4];
    });
    let calls_before = lock(&shared).calls.len();
    let started = Instant::now();
    let mut seen: Vec<(GangState, String)> = Vec::new();
    let got = bounded(amrm.request_gang_with(chief_and_workers("g"), &mut |s| {
        seen.push((s.state, s.diagnostics.clone()))
    }))
    .await
    .unwrap();
    let waited = started.elapsed();
    assert_eq!(got.len(), 8);
    let calls = lock(&shared).calls.len() - calls_before;
    // About one heartbeat per 20 ms while the gang waits (generously bounded for slow CI).
    assert!(
        calls as u128 >= waited.as_millis() / 60,
        "{calls} calls in {waited:?}"
    );
    // Each change once, with the RM's words, although the fake repeats them every call.
    let states: Vec<GangState> = seen.iter().map(|(s, _)| *s).collect();
    assert_eq!(states.first(), Some(&GangState::RESERVED), "{seen:?}");
    assert_eq!(states.last(), Some(&GangState::ALLOCATED), "{seen:?}");
    assert!(seen.len() <= 4, "{seen:?}");
    assert!(seen[0].1.contains("needs 8 containers; 3 free"), "{seen:?}");
    // The completion heard meanwhile is not lost.
    let ev = amrm.poll().await.unwrap();
    assert!(
        ev.completed.iter().any(|s| s.container_id == plain),
        "{:?}",
        ev.completed
    );
    assert!(
        ev.gangs.iter().all(|g| g.id != "g"),
        "delivered to the observer already"
    );
}

#[tokio::test]
async fn a_soft_timeout_ends_the_wait_and_the_gang_can_be_asked_again() {
    let (shared, addr) = serve(1, 2, gang_mode()).await;
    let mut amrm = client(&addr).await;
    let req = chief_and_workers("g").timeout(Duration::from_millis(200));
    let e = bounded(amrm.request_gang(req)).await.unwrap_err();
    match &e {
        GangError::TimedOut { id, diagnostics } => {
            assert_eq!(id, "g");
            assert!(
                diagnostics.contains("timed out after 200 ms"),
                "{diagnostics}"
            );
            assert!(
                diagnostics.contains("needs 8 containers; 2 free"),
                "{diagnostics}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        amrm.outstanding_requests(),
        0,
        "the RM withdrew them; so does the table"
    );
    assert!(amrm.gang("g").is_none());
    let n = lock(&shared).calls.len();
    amrm.poll().await.unwrap();
    assert!(
        lock(&shared).calls[n].ask.is_empty(),
        "nothing is re-sent for a gang the RM withdrew"
    );
    // Relaxed (smaller), the same id fits.
    let small = GangRequest::new("g", vec![GangMember::new(Resource::new(128, 1), 2, 3)]);
    let got = bounded(amrm.request_gang(small)).await.unwrap();
    assert_eq!(got.len(), 2);
}

#[tokio::test]
async fn a_hard_timeout_that_failed_the_application_ends_the_wait_at_once() {
    let (_shared, addr) = serve(1, 2, gang_mode()).await;
    let mut amrm = client(&addr).await;
    let req = chief_and_workers("g")
        .timeout(Duration::from_millis(100))
        .policy(GangTimeoutPolicy::HARD);
    let started = Instant::now();
    let e = bounded(amrm.request_gang(req)).await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "no retrying a 409: {:?}",
        started.elapsed()
    );
    match e {
        GangError::Am(e) => assert!(e.to_string().contains("is already FAILED"), "{e}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_refused_gang_is_rejected_with_the_rm_exception_and_not_resent() {
    let fake = Fake {
        reject_placement: Some(GangPlacement::SAME_RACK),
        ..gang_mode()
    };
    let (shared, addr) = serve(1, 8, fake).await;
    let mut amrm = client(&addr).await;
    let req = chief_and_workers("g").placement(GangPlacement::SAME_RACK);
    match bounded(amrm.request_gang(req)).await.unwrap_err() {
        GangError::Rejected { id, exception } => {
            assert_eq!(id, "g");
            assert_eq!(exception.exception, "InvalidResourceRequestException");
            assert_eq!(exception.message, "placement not supported here");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(amrm.outstanding_requests(), 0);
    let n = lock(&shared).calls.len();
    amrm.poll().await.unwrap();
    assert!(lock(&shared).calls[n].ask.is_empty());
    // Malformed requests are refused before anything is sent.
    for bad in [
        GangRequest::new("", vec![GangMember::new(Resource::new(1, 1), 1, 1)]),
        GangRequest::new("x", vec![]),
        GangRequest::new("x", vec![GangMember::new(Resource::new(1, 1), 0, 1)]),
        GangRequest::new(
            "x",
            vec![
                GangMember::new(Resource::new(1, 1), 1, 1),
                GangMember::new(Resource::new(2, 1), 1, 1),
            ],
        ),
    ] {
        assert!(amrm.submit_gang(bad).is_err());
    }
    // A member key already used by a plain ask is refused as a whole.
    amrm.add_container_request(
        ContainerRequest::new(Resource::new(512, 1), 0).allocation_request_id(2),
    )
    .unwrap();
    assert!(matches!(
        amrm.submit_gang(chief_and_workers("y")),
        Err(GangError::Ask(_))
    ));
    assert_eq!(
        amrm.outstanding_requests(),
        1,
        "nothing of the refused gang stayed"
    );
}

#[tokio::test]
async fn against_an_rm_without_gangs_grants_are_collected_and_the_backstop_holds() {
    // Plain RM: gang asks granted 3 per heartbeat, never a status.
    let fake = Fake {
        gang_mode: false,
        plain_per_call: 3,
        ..Default::default()
    };
    let (shared, addr) = serve(2, 4, fake).await;
    let mut amrm = client(&addr).await;
    let got = bounded(amrm.request_gang(chief_and_workers("g")))
        .await
        .unwrap();
    assert_eq!(got.len(), 8);
    // Too big for the cluster: the client's own backstop (timeout + 2 s grace) gives back
    // what was granted and withdraws the rest.
    lock(&shared).free = vec![2, 1];
    let req = chief_and_workers("h").timeout(Duration::from_millis(100));
    let started = Instant::now();
    let e = bounded(amrm.request_gang(req)).await.unwrap_err();
    assert!(started.elapsed() >= Duration::from_millis(2000));
    match e {
        GangError::TimedOut { diagnostics, .. } => {
            assert!(
                diagnostics.contains("3 of 8 granted were given back"),
                "{diagnostics}"
            )
        }
        other => panic!("{other:?}"),
    }
    amrm.poll().await.unwrap();
    let f = lock(&shared);
    let last = f.calls.last().unwrap();
    let released: usize = f.calls.iter().rev().take(2).map(|c| c.release.len()).sum();
    assert_eq!(
        released,
        3,
        "{:?}",
        f.calls.iter().rev().take(2).collect::<Vec<_>>()
    );
    assert!(
        f.asks.values().all(|a| a.num == 0),
        "withdrawn: {:?} (last call {:?})",
        f.asks,
        last.ask
    );
}

#[tokio::test]
async fn release_gang_stops_members_on_their_nodes_and_the_id_is_reusable() {
    let fake = Fake {
        hang_attempts: BTreeSet::from([1]),
        ..gang_mode()
    };
    let (shared, addr) = serve(2, 4, fake).await;
    let mut amrm = client(&addr).await;
    let nm = NmClient::new().unwrap();
    let got = bounded(amrm.request_gang(chief_and_workers("g")))
        .await
        .unwrap();
    // Start them (they keep running), then one member fails.
    for (rank, c) in got.iter().enumerate() {
        let ctx = ContainerLaunchContext {
            commands: vec!["w".into()],
            environment: [
                ("RANK".to_string(), rank.to_string()),
                ("SPINDLE_GANG_ATTEMPT".to_string(), "1".to_string()),
            ]
            .into(),
            local_resources: Default::default(),
        };
        nm.start_container(c, ctx).await.unwrap();
    }
    let failed = got[3].id;
    lock(&shared).complete(failed, 137, "killed");
    let ev = bounded(amrm.poll()).await.unwrap();
    let st = ev
        .completed
        .iter()
        .find(|s| s.container_id == failed)
        .unwrap();
    assert_eq!(st.gang_id.as_deref(), Some("g"));
    assert!(ev
        .gangs
        .iter()
        .any(|g| g.id == "g" && g.state == GangState::FAILED));
    match amrm.gang("g").unwrap().phase {
        GangPhase::Failed {
            failed_containers, ..
        } => assert_eq!(failed_containers, vec![failed]),
        other => panic!("{other:?}"),
    }
    let r = bounded(amrm.release_gang("g", &nm)).await.unwrap();
    assert_eq!(r.released.len(), 7, "{r:?}");
    assert!(r.problems.is_empty(), "{r:?}");
    {
        let f = lock(&shared);
        let stopped: BTreeSet<ContainerId> = f.stops.iter().copied().collect();
        let expect: BTreeSet<ContainerId> = got
            .iter()
            .map(|c| c.id)
            .filter(|id| *id != failed)
            .collect();
        assert_eq!(stopped, expect);
        // Released in one call, sent at once (before any new ask).
        let last = f.calls.last().unwrap();
        assert_eq!(last.release.len(), 7);
        assert!(f.containers.values().all(|c| !c.running));
    }
    assert!(amrm.gang("g").is_none());
    let again = bounded(amrm.request_gang(chief_and_workers("g")))
        .await
        .unwrap();
    assert_eq!(again.len(), 8);
    assert!(again.iter().all(|c| !got.iter().any(|o| o.id == c.id)));
    assert!(matches!(
        amrm.release_gang("nope", &nm).await,
        Err(GangError::Unknown(_))
    ));
}

#[tokio::test]
async fn incremental_asks_as_a_stream() {
    let fake = Fake {
        gang_mode: true,
        plain_per_call: 2,
        ..Default::default()
    };
    let (shared, addr) = serve(2, 4, fake).await;
    let mut amrm = client(&addr).await;
    for _ in 0..5 {
        amrm.add_container_request(ContainerRequest::new(Resource::new(256, 1), 0))
            .unwrap();
    }
    let mut granted = Vec::new();
    {
        let mut events = amrm.events();
        while granted.len() < 5 {
            match bounded(events.next()).await {
                Some(Ok(AllocationEvent::Allocated(c))) => granted.push(c),
                Some(Ok(other)) => panic!("unexpected {other:?}"),
                Some(Err(e)) => panic!("{e}"),
                None => panic!("the stream ended"),
            }
        }
    }
    assert_eq!(amrm.outstanding_requests(), 0);
    {
        // One call carried the asks; the grants came two per heartbeat.
        let f = lock(&shared);
        assert_eq!(f.calls.iter().filter(|c| !c.ask.is_empty()).count(), 1);
        assert_eq!(f.containers.len(), 5);
    }
    // Completions come through the stream too, one event each.
    for c in &granted[..2] {
        lock(&shared).complete(c.id, 0, "");
    }
    let mut events = amrm.events();
    let mut done = BTreeSet::new();
    while done.len() < 2 {
        if let Some(Ok(AllocationEvent::Completed(s))) = bounded(events.next()).await {
            done.insert(s.container_id);
        }
    }
    assert_eq!(done, granted[..2].iter().map(|c| c.id).collect());
}

fn train_cfg(workers: u32, max_restarts: u32) -> TrainAmConfig {
    TrainAmConfig {
        workers,
        worker_resources: Resource::new(256, 1),
        placement: GangPlacement::PACK,
        max_nodes: 0,
        gang_timeout: None,
        max_restarts,
        checkpoint_dir: Some("/ckpt".into()),
        checkpoint_check: false,
        command: vec!["worker".into(), "--steps".into(), "10".into()],
        worker_env: [("EXTRA".to_string(), "1".to_string())].into(),
        elastic: None,
        node_label_expression: None,
        gpu_model: None,
        cpus_per_gpu: None,
        cpu_throughput: Default::default(),
    }
}

async fn run_train(
    nodes: usize,
    slots: u32,
    fake: Fake,
    cfg: TrainAmConfig,
) -> (Shared, train::TrainReport, Vec<String>) {
    let (shared, addr) = serve(nodes, slots, fake).await;
    let (report, lines) = run_train_on(&addr, cfg).await;
    (shared, report, lines)
}

/// Runs the training AM against the fake already serving at `addr`.
async fn run_train_on(addr: &str, cfg: TrainAmConfig) -> (train::TrainReport, Vec<String>) {
    let env = AmEnv {
        rm_address: RmAddress::parse(addr).expect("the fake RM address"),
        other_rms: Vec::new(),
        token: TOKEN.into(),
        attempt_id: attempt(),
        container_id: ContainerId::new(attempt(), 0, 1),
    };
    let mut amrm = AmRmClient::new(AmClient::new(env).unwrap());
    let nm = NmClient::new().unwrap();
    let mut lines = Vec::new();
    let report = bounded(train::run_am(&cfg, &mut amrm, &nm, "127.0.0.1", &mut |l| {
        lines.push(l.to_string())
    }))
    .await
    .unwrap();
    (report, lines)
}

#[tokio::test]
async fn train_am_gives_every_worker_its_rank_and_restarts_the_gang_on_a_failure() {
    // Attempt 1: rank 2 fails while the others keep running; attempt 2: all exit 0.
    let fake = Fake {
        script: BTreeMap::from([((1, 2), 3)]),
        hang_attempts: BTreeSet::from([1]),
        ..gang_mode()
    };
    let (shared, report, lines) = run_train(3, 2, fake, train_cfg(6, 3)).await;
    assert_eq!(
        report.final_status,
        FinalApplicationStatus::SUCCEEDED,
        "{lines:#?}"
    );
    assert_eq!(report.attempts, 2);
    let f = lock(&shared);
    assert_eq!(
        f.finished.as_ref().unwrap().final_application_status,
        FinalApplicationStatus::SUCCEEDED
    );
    assert_eq!(f.started.len(), 12);
    // Every worker was held until the whole gang was, then released.
    assert_eq!(f.released.len(), 12, "{:?}", f.released);
    assert!(f.held.is_empty(), "{:?}", f.held);
    // One start call per node per attempt.
    assert_eq!(f.start_calls.len(), 6, "{:?}", f.start_calls);
    assert!(f.start_calls.iter().all(|(_, n)| *n == 2));
    for attempt in ["1", "2"] {
        let mine: Vec<&(usize, ContainerId, ContainerLaunchContext)> = f
            .started
            .iter()
            .filter(|(_, _, c)| {
                c.environment
                    .get("SPINDLE_GANG_ATTEMPT")
                    .map(String::as_str)
                    == Some(attempt)
            })
            .collect();
        assert_eq!(mine.len(), 6);
        let mut ranks: Vec<u32> = Vec::new();
        // Rank order is node order, then container id; local ranks count within a node.
        let mut by_rank: BTreeMap<u32, (String, u32, ContainerId)> = BTreeMap::new();
        for (node, id, ctx) in &mine {
            let e = &ctx.environment;
            let get = |k: &str| e.get(k).cloned().unwrap_or_default();
            assert_eq!(get("WORLD_SIZE"), "6");
            assert_eq!(get("LOCAL_WORLD_SIZE"), "2");
            assert_eq!(get("SPINDLE_CHECKPOINT_DIR"), "/ckpt");
            assert_eq!(get("EXTRA"), "1");
            assert_eq!(get("MASTER_ADDR"), "127.0.0.1");
            assert_eq!(ctx.commands, vec!["exec worker --steps 10".to_string()]);
            let rank: u32 = get("RANK").parse().unwrap();
            ranks.push(rank);
            by_rank.insert(
                rank,
                (
                    f.nm_addrs[*node].clone(),
                    get("LOCAL_RANK").parse().unwrap(),
                    *id,
                ),
            );
        }
        ranks.sort();
        assert_eq!(ranks, (0..6).collect::<Vec<_>>());
        let order: Vec<(String, ContainerId)> = by_rank
            .values()
            .map(|(n, _, id)| (n.clone(), *id))
            .collect();
        let mut sorted = order.clone();
        sorted.sort_by(|a, b| {
            a.0.parse::<NodeId>()
                .unwrap()
                .cmp(&b.0.parse::<NodeId>().unwrap())
                .then(a.1.cmp(&b.1))
        });
        assert_eq!(order, sorted);
        let locals: Vec<u32> = by_rank.values().map(|(_, l, _)| *l).collect();
        assert_eq!(locals, vec![0, 1, 0, 1, 0, 1]);
        // MASTER_PORT is the free port rank 0's NM gave (29400 + its node index).
        let rank0_node = f.nm_addrs.iter().position(|a| *a == by_rank[&0].0).unwrap();
        assert!(mine
            .iter()
            .all(|(_, _, c)| c.environment.get("MASTER_PORT")
                == Some(&(29400 + rank0_node).to_string())));
    }
    // The surviving workers of attempt 1 were stopped and released before attempt 2.
    assert_eq!(f.stops.len(), 5, "{:?}", f.stops);
    assert_eq!(f.free_port_calls, 2);
    let text = lines.join("\n");
    for want in [
        "gang workers attempt 1: asking for 6 workers of",
        "gang workers is ALLOCATED",
        "rendezvous: MASTER_ADDR=127.0.0.1",
        "worker rank 0 started in container",
        "worker rank 2 failed: container",
        "with exit status 3",
        "restarting the gang (attempt 2 of at most 4)",
        "gang workers released: 5 running worker(s) stopped",
        "gang workers attempt 2",
        "(6 of 6 done)",
        "all 6 workers of attempt 2 exited 0",
        "application master finished with status SUCCEEDED",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
}

#[tokio::test]
async fn train_am_fails_after_the_last_restart_and_on_a_gang_timeout() {
    let fake = Fake {
        script: BTreeMap::from([((1, 0), 1), ((2, 0), 1)]),
        ..gang_mode()
    };
    let (shared, report, lines) = run_train(2, 4, fake, train_cfg(4, 1)).await;
    assert_eq!(report.final_status, FinalApplicationStatus::FAILED);
    assert_eq!(report.attempts, 2);
    assert!(
        report
            .diagnostics
            .contains("gave up after 2 gang attempt(s) (--max-restarts 1)"),
        "{}",
        report.diagnostics
    );
    assert!(
        report.diagnostics.starts_with("worker rank 0 failed"),
        "{lines:#?}"
    );
    assert_eq!(
        lock(&shared)
            .finished
            .as_ref()
            .unwrap()
            .final_application_status,
        FinalApplicationStatus::FAILED
    );

    // A gang that never fits: the RM's soft timeout ends the application, with its words.
    let cfg = TrainAmConfig {
        gang_timeout: Some(Duration::from_millis(150)),
        ..train_cfg(9, 3)
    };
    let (shared, report, lines) = run_train(2, 4, gang_mode(), cfg).await;
    assert_eq!(report.final_status, FinalApplicationStatus::FAILED);
    assert_eq!(report.attempts, 1);
    assert!(
        report.diagnostics.contains("needs 9 containers; 8 free"),
        "{}",
        report.diagnostics
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("gang workers is RESERVED: needs 9")),
        "{lines:#?}"
    );
    assert!(lock(&shared).started.is_empty());

    // Worker resources over the maximum container: refused at once.
    let cfg = TrainAmConfig {
        worker_resources: Resource::new(1 << 20, 1),
        ..train_cfg(2, 0)
    };
    let (_, report, _) = run_train(1, 4, gang_mode(), cfg).await;
    assert_eq!(report.final_status, FinalApplicationStatus::FAILED);
    assert!(report.diagnostics.contains("exceed the cluster's maximum"));
}

/// The allocate calls' acknowledgements (ETA ms) and checkpoints, in order.
fn acks_and_checkpoints(f: &Fake) -> (Vec<Option<u64>>, Vec<Option<CheckpointReport>>) {
    (
        f.calls
            .iter()
            .map(|c| {
                c.preemption_acknowledgement
                    .as_ref()
                    .map(|a| a.checkpoint_eta_ms)
            })
            .collect(),
        f.calls.iter().map(|c| c.checkpoint.clone()).collect(),
    )
}

fn ckpt(time: u64, step: u64, label: &str) -> CheckpointReport {
    CheckpointReport {
        time,
        step: Some(step),
        label: Some(label.into()),
    }
}

#[tokio::test]
async fn a_preemption_notice_is_told_once_and_the_answers_ride_on_the_heartbeats() {
    let (shared, addr) = serve(3, 4, gang_mode()).await;
    let mut amrm = client(&addr).await;
    let got = bounded(amrm.request_gang(chief_and_workers("g")))
        .await
        .expect("the gang is granted");
    let mut ids: Vec<ContainerId> = got.iter().map(|c| c.id).collect();
    ids.sort();
    let deadline = 1_900_000_000_000;
    lock(&shared).notice = Some((ids.clone(), deadline, vec!["g".into()]));

    // Told once, with the RM's deadline and gang, although the RM repeats it; each
    // container with its node and gang, so it can be signalled by id alone.
    let ev = bounded(amrm.poll()).await.expect("poll");
    assert_eq!(ev.preempted.len(), 1, "{:?}", ev.preempted);
    let n: &PreemptionNotice = &ev.preempted[0];
    assert_eq!(
        (n.ids(), n.deadline_ms, n.gang_ids.clone()),
        (ids.clone(), deadline, vec!["g".to_string()])
    );
    for c in &n.containers {
        let granted = got.iter().find(|g| g.id == c.id).expect("a granted member");
        assert_eq!(
            c.node_http_address.as_deref(),
            Some(granted.node_http_address.as_str())
        );
        assert_eq!(c.gang_id.as_deref(), Some("g"));
    }
    for _ in 0..3 {
        let ev = bounded(amrm.poll()).await.expect("poll");
        assert!(ev.preempted.is_empty(), "told again: {:?}", ev.preempted);
    }
    assert_eq!(amrm.under_notice(), ids);

    // The acknowledgement goes with the next heartbeat only (and speeds it up).
    amrm.acknowledge_preemption(4321);
    assert_eq!(amrm.next_interval(), FAST_INTERVAL);
    let before = lock(&shared).calls.len();
    bounded(amrm.poll()).await.expect("poll");
    bounded(amrm.poll()).await.expect("poll");
    let (acks, _) = acks_and_checkpoints(&lock(&shared));
    assert_eq!(acks[before..], [Some(4321), None]);
    assert!(acks[..before].iter().all(Option::is_none));

    // A checkpoint goes with every heartbeat until a newer one; an older one is ignored.
    amrm.report_checkpoint(1_000, Some(7), Some("ckpt-7".into()));
    let before = lock(&shared).calls.len();
    bounded(amrm.poll()).await.expect("poll");
    bounded(amrm.poll()).await.expect("poll");
    amrm.report_checkpoint(900, Some(6), None);
    bounded(amrm.poll()).await.expect("poll");
    amrm.report_checkpoint(2_000, Some(8), Some("ckpt-8".into()));
    bounded(amrm.poll()).await.expect("poll");
    let (_, ckpts) = acks_and_checkpoints(&lock(&shared));
    assert_eq!(
        ckpts[before..],
        [
            Some(ckpt(1_000, 7, "ckpt-7")),
            Some(ckpt(1_000, 7, "ckpt-7")),
            Some(ckpt(1_000, 7, "ckpt-7")),
            Some(ckpt(2_000, 8, "ckpt-8")),
        ]
    );
    assert_eq!(amrm.checkpoint(), Some(&ckpt(2_000, 8, "ckpt-8")));

    // A second gang put under notice later is told as a new notice (only its containers),
    // through the event stream too.
    let h = bounded(amrm.request_gang(GangRequest::new(
        "h",
        vec![GangMember::new(Resource::new(128, 1), 2, 5)],
    )))
    .await
    .expect("gang h is granted");
    let mut h_ids: Vec<ContainerId> = h.iter().map(|c| c.id).collect();
    h_ids.sort();
    let mut all = ids.clone();
    all.extend(h_ids.iter().copied());
    lock(&shared).notice = Some((all, deadline, vec!["g".into(), "h".into()]));
    {
        let mut events = amrm.events();
        match bounded(events.next()).await {
            Some(Ok(AllocationEvent::Preempted {
                containers,
                deadline_ms,
                gang_ids,
            })) => {
                let got: Vec<ContainerId> = containers.iter().map(|c| c.id).collect();
                assert_eq!(got, h_ids);
                assert!(containers.iter().all(|c| c.gang_id.as_deref() == Some("h")));
                assert_eq!(deadline_ms, deadline);
                assert_eq!(gang_ids, vec!["g".to_string(), "h".to_string()]);
            }
            other => panic!("expected the notice of gang h, got {other:?}"),
        }
    }

    // The members end (-102): completions as usual, and nothing is under notice any more.
    {
        let mut f = lock(&shared);
        for id in ids.iter().chain(h_ids.iter()) {
            f.complete(*id, PREEMPTED, "Container preempted by scheduler");
        }
    }
    let ev = bounded(amrm.poll()).await.expect("poll");
    assert_eq!(ev.completed.len(), 10, "{:?}", ev.completed);
    assert!(ev.completed.iter().all(|s| s.exit_status == PREEMPTED));
    assert!(ev.preempted.is_empty());
    assert!(amrm.under_notice().is_empty());
    assert!(ev
        .gangs
        .iter()
        .any(|g| g.id == "g" && g.state == GangState::PREEMPTED));
    // Signalling a container the NM has no process for is an error naming it.
    let nm = NmClient::new().expect("NM client");
    // A client that never saw the container's token sends none: the NM refuses it.
    match nm
        .signal_container(
            &got[0].node_http_address,
            &ids[0],
            SignalContainerCommand::FORCEFUL_SHUTDOWN,
        )
        .await
    {
        Err(e) => assert_eq!(e.status(), Some(401), "{e}"),
        Ok(()) => panic!("a signal without the container token was accepted"),
    }
    nm.remember(&got[0]);
    match nm
        .signal_container(
            &got[0].node_http_address,
            &ids[0],
            SignalContainerCommand::FORCEFUL_SHUTDOWN,
        )
        .await
    {
        Err(e) => {
            let text = e.to_string();
            assert!(text.contains("signal of container"), "{text}");
            assert!(
                text.contains("is not handled by this NodeManager"),
                "{text}"
            );
        }
        Ok(()) => panic!("a completed container was signalled"),
    }
}

#[tokio::test]
async fn train_am_checkpoints_and_regains_a_preempted_gang_without_using_a_restart() {
    let ckpt_dir = tempfile::tempdir().expect("checkpoint dir");
    std::fs::write(ckpt_dir.path().join("ckpt-a"), "weights").expect("checkpoint");
    std::fs::write(ckpt_dir.path().join(".spindle-step"), "42\n").expect("step");
    // Attempt 1's workers keep running until the preemption; attempt 2's exit 0.
    let fake = Fake {
        hang_attempts: BTreeSet::from([1]),
        marker_dir: Some(ckpt_dir.path().to_path_buf()),
        ..gang_mode()
    };
    let (shared, addr) = serve(2, 2, fake).await;
    let deadline = spindle_common::time::now_ms() + 10_000;
    // Once attempt 1 runs, the RM preempts its gang.
    let s2 = shared.clone();
    tokio::spawn(async move {
        loop {
            {
                let mut f = lock(&s2);
                if f.released.len() >= 4 {
                    let ids = f.released.clone();
                    f.notice = Some((ids, deadline, vec!["workers".into()]));
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let cfg = TrainAmConfig {
        checkpoint_dir: Some(ckpt_dir.path().display().to_string()),
        checkpoint_check: false,
        // No restart to spare: a preemption must not need one.
        ..train_cfg(4, 0)
    };
    let (report, lines) = run_train_on(&addr, cfg).await;
    let text = lines.join("\n");
    assert_eq!(
        report.final_status,
        FinalApplicationStatus::SUCCEEDED,
        "{text}"
    );
    assert_eq!((report.attempts, report.preemptions), (2, 1), "{text}");
    let f = lock(&shared);
    let first: Vec<ContainerId> = f.released[..4].to_vec();
    // Every worker of attempt 1 got SIGTERM (GRACEFUL_SHUTDOWN) through its NM, after the
    // marker with the RM's deadline was written.
    let signalled: BTreeSet<ContainerId> = f.signals.iter().map(|(id, _, _)| *id).collect();
    assert_eq!(
        signalled,
        first.iter().copied().collect(),
        "{:?}",
        f.signals
    );
    for (id, command, marker) in &f.signals {
        assert_eq!(*command, SignalContainerCommand::GRACEFUL_SHUTDOWN, "{id}");
        assert_eq!(
            marker.as_deref(),
            Some(format!("SPINDLE_PREEMPT_DEADLINE_MS={deadline}\n").as_str()),
            "{id}"
        );
    }
    // Nothing was stopped: the workers exited by themselves.
    assert!(f.stops.is_empty(), "{:?}", f.stops);
    // The marker is gone before the workers start again.
    assert!(!ckpt_dir.path().join(".spindle-preempted").exists());
    // One acknowledgement, with about the time left to the deadline.
    let (acks, ckpts) = acks_and_checkpoints(&f);
    let acks: Vec<u64> = acks.into_iter().flatten().collect();
    assert_eq!(acks.len(), 1, "{acks:?}");
    assert!(acks[0] > 5_000 && acks[0] <= 10_000, "{acks:?}");
    // The checkpoint dir's newest file, with the step of .spindle-step, was reported.
    let reported: Vec<CheckpointReport> = ckpts.into_iter().flatten().collect();
    assert!(
        reported
            .iter()
            .any(|k| k.step == Some(42) && k.label.as_deref() == Some("ckpt-a") && k.time > 0),
        "{reported:?}"
    );
    // Attempt 2 started all four workers again, told they are attempt 2.
    assert_eq!(f.started.len(), 8);
    let second: Vec<&ContainerLaunchContext> = f.started[4..].iter().map(|(_, _, c)| c).collect();
    assert!(second.iter().all(|c| c
        .environment
        .get("SPINDLE_GANG_ATTEMPT")
        .map(String::as_str)
        == Some("2")));
    for want in [
        "gang workers of application_1_0001 preempted (deadline in ",
        "asked workers to checkpoint and exit",
        "ended after the preemption notice: container",
        "with exit status -102",
        "it exited with status 0 before its deadline",
        "ms after the notice; asking for the gang again",
        "gang workers attempt 2: asking for 4 workers",
        "all 4 workers of attempt 2 exited 0",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    assert!(!text.contains("restarting the gang"), "{text}");
    assert!(!text.contains("failed"), "{text}");
}
