//! Elastic gangs in the SDK and the training AM, against a fake RM that speaks the elastic
//! protocol (a grant at a chosen size from the minimum up, `resizeOffers` sent once,
//! `resizeDemands` repeated while their containers run, `throughputReports` recorded) and
//! fake NMs that record starts and re-initializations (the SIGTERM + new process of YARN's
//! `reInitializeContainer`), served by axum on one port per fake node.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;
use spindle_appmaster_sdk::amrm::{AllocationEvent, AmRmClient};
use spindle_appmaster_sdk::gang::{GangError, GangMember, GangRequest};
use spindle_appmaster_sdk::train::{self, ElasticWorkers, TrainAmConfig};
use spindle_appmaster_sdk::{AmClient, AmEnv, NmClient, RmAddress};
use spindle_common::ids::{ApplicationAttemptId, ApplicationId, ContainerId, NodeId};
use spindle_common::records::am::{
    AllocateRequest, AllocateResponse, Container, ContainerStatus, FinishApplicationMasterResponse,
    GangPlacement, GangSpec, GangState, GangStatus, RegisterApplicationMasterResponse,
    ResizeDemand, ResizeOffer, SizeRule,
};
use spindle_common::records::node::{
    ContainerLaunchContext, NmContainerBody, NmContainerInfo, ReleaseContainersRequest,
    ReleaseContainersResponse, StartContainersRequest, StartContainersResponse,
    StopContainersRequest, StopContainersResponse,
};
use spindle_common::records::resource::ResourceInfo;
use spindle_common::resource::Resource;
use spindle_common::states::{ContainerState, FinalApplicationStatus};

const LIMIT: Duration = Duration::from_secs(30);

fn attempt() -> ApplicationAttemptId {
    ApplicationAttemptId::new(ApplicationId::new(1, 1), 1)
}

#[derive(Debug, Clone)]
struct FContainer {
    running: bool,
    /// What runs in it now (None: allocated, not started).
    ctx: Option<ContainerLaunchContext>,
}

#[derive(Default)]
struct Fake {
    nm_addrs: Vec<String>,
    /// The size an elastic gang is granted at.
    initial: u32,
    gang: Option<(GangSpec, u32)>,
    next_seq: u64,
    containers: BTreeMap<ContainerId, FContainer>,
    completed: Vec<ContainerStatus>,
    calls: Vec<AllocateRequest>,
    /// Offers (and their containers) for the next answer only.
    offers: Vec<(ResizeOffer, Vec<Container>)>,
    /// The demand, repeated while any of its containers runs.
    demand: Option<ResizeDemand>,
    /// Every start and re-initialization, in order: (container, context, was it a re-init,
    /// did the resize marker exist then).
    launches: Vec<(ContainerId, ContainerLaunchContext, bool, bool)>,
    marker_dir: Option<PathBuf>,
    free_port_calls: u32,
    finished: Option<FinalApplicationStatus>,
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

impl Fake {
    fn grant(&mut self, cap: &ResourceInfo) -> Container {
        self.next_seq += 1;
        let id = ContainerId::new(attempt(), 0, self.next_seq + 1);
        let node = (self.next_seq as usize) % self.nm_addrs.len();
        let addr = self.nm_addrs[node].clone();
        self.containers.insert(
            id,
            FContainer {
                running: true,
                ctx: None,
            },
        );
        Container {
            id,
            node_id: addr.parse().unwrap_or_else(|_| NodeId::new("127.0.0.1", 1)),
            node_http_address: addr,
            resource: cap.clone(),
            priority: 0,
            container_token: id.to_string(),
            execution_type: "GUARANTEED".into(),
            allocation_request_id: train::WORKER_REQUEST_ID,
            version: 0,
        }
    }

    fn complete(&mut self, id: ContainerId, exit: i32) {
        if let Some(c) = self.containers.get_mut(&id).filter(|c| c.running) {
            c.running = false;
            self.completed.push(ContainerStatus {
                container_id: id,
                state: ContainerState::COMPLETE,
                exit_status: exit,
                diagnostics: String::new(),
                gang_id: Some("g".into()),
            });
        }
    }

    /// Grows the gang by `k`: the containers go out with the next answer, with the offer.
    fn offer(&mut self, gang: &str, k: u32) -> Vec<ContainerId> {
        let from = self.gang.as_ref().map_or(0, |g| g.1);
        let cap = ResourceInfo::from(&Resource::new(512, 1));
        let cs: Vec<Container> = (0..k).map(|_| self.grant(&cap)).collect();
        let ids: Vec<ContainerId> = cs.iter().map(|c| c.id).collect();
        if let Some(g) = self.gang.as_mut() {
            g.1 += k;
        }
        self.offers.push((
            ResizeOffer {
                gang_id: gang.into(),
                from_size: from,
                to_size: from + k,
                containers: ids.clone(),
            },
            cs,
        ));
        ids
    }

    fn running_workers(&self) -> Vec<(ContainerId, BTreeMap<String, String>)> {
        self.containers
            .iter()
            .filter(|(_, c)| c.running)
            .filter_map(|(id, c)| {
                let ctx = c.ctx.as_ref()?;
                ctx.environment
                    .contains_key("RANK")
                    .then(|| (*id, ctx.environment.clone()))
            })
            .collect()
    }

    fn marker(&self) -> bool {
        self.marker_dir
            .as_ref()
            .is_some_and(|d| d.join(".spindle-resize").exists())
    }
}

async fn register() -> Response {
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
    for r in &req.release {
        f.complete(*r, -100);
    }
    let mut allocated = Vec::new();
    for a in &req.ask {
        if let (Some(g), true) = (&a.gang, a.num_containers > 0) {
            if f.gang.is_none() {
                let n = if g.min_containers > 0 {
                    f.initial
                } else {
                    a.num_containers as u32
                };
                for _ in 0..n {
                    let c = f.grant(&a.capability);
                    allocated.push(c);
                }
                f.gang = Some((g.clone(), n));
            }
        }
    }
    let mut offers = Vec::new();
    for (o, cs) in std::mem::take(&mut f.offers) {
        allocated.extend(cs);
        offers.push(o);
    }
    let demands: Vec<ResizeDemand> = f
        .demand
        .iter()
        .filter(|d| {
            d.containers
                .iter()
                .any(|c| f.containers.get(c).is_some_and(|x| x.running))
        })
        .cloned()
        .collect();
    let statuses = f
        .gang
        .as_ref()
        .map(|(g, n)| GangStatus {
            id: g.id.clone(),
            state: GangState::ALLOCATED,
            size: *n,
            current_size: *n,
            ..Default::default()
        })
        .into_iter()
        .collect();
    Json(AllocateResponse {
        response_id: f.calls.len() as i32,
        allocated_containers: allocated,
        completed_container_statuses: std::mem::take(&mut f.completed),
        num_cluster_nodes: f.nm_addrs.len() as i32,
        gang_statuses: statuses,
        resize_offers: offers,
        resize_demands: demands,
        ..Default::default()
    })
    .into_response()
}

async fn finish(
    State(s): State<S>,
    Json(req): Json<spindle_common::records::am::FinishApplicationMasterRequest>,
) -> Response {
    lock(&s.shared).finished = Some(req.final_application_status);
    Json(FinishApplicationMasterResponse {
        is_unregistered: true,
    })
    .into_response()
}

async fn nm_start(State(s): State<S>, Json(req): Json<StartContainersRequest>) -> Response {
    let mut f = lock(&s.shared);
    let mut resp = StartContainersResponse::default();
    for r in req.start_container_request {
        let Ok(id) = r.container_token.parse::<ContainerId>() else {
            return StatusCode::BAD_REQUEST.into_response();
        };
        let marker = f.marker();
        if let Some(c) = f.containers.get_mut(&id) {
            c.ctx = Some(r.container_launch_context.clone());
        }
        f.launches
            .push((id, r.container_launch_context, false, marker));
        resp.successfully_started_containers.push(id);
    }
    Json(resp).into_response()
}

async fn nm_release(Json(req): Json<ReleaseContainersRequest>) -> Response {
    Json(ReleaseContainersResponse {
        successfully_released_containers: req.container_ids,
        failed_requests: vec![],
    })
    .into_response()
}

async fn nm_stop(State(s): State<S>, Json(req): Json<StopContainersRequest>) -> Response {
    let mut f = lock(&s.shared);
    for id in &req.container_ids {
        f.complete(*id, -105);
    }
    Json(StopContainersResponse {
        successfully_stopped_containers: req.container_ids,
        failed_requests: vec![],
    })
    .into_response()
}

async fn nm_reinit(State(s): State<S>, Json(v): Json<serde_json::Value>) -> Response {
    let mut f = lock(&s.shared);
    let id: ContainerId = match v["containerId"].as_str().and_then(|x| x.parse().ok()) {
        Some(id) => id,
        None => return StatusCode::BAD_REQUEST.into_response(),
    };
    let ctx: ContainerLaunchContext =
        serde_json::from_value(v["containerLaunchContext"].clone()).unwrap_or_default();
    let marker = f.marker();
    let Some(c) = f.containers.get_mut(&id).filter(|c| c.running) else {
        let body = json!({"RemoteException": {"exception": "YarnException",
            "message": format!("Container {id} is not running"),
            "javaClassName": "org.apache.hadoop.yarn.exceptions.YarnException"}});
        return (StatusCode::CONFLICT, Json(body)).into_response();
    };
    c.ctx = Some(ctx.clone());
    f.launches.push((id, ctx, true, marker));
    Json(
        json!({"containerId": id.to_string(), "startTime": 1, "stoppedInMs": 5,
        "reinitializations": 1}),
    )
    .into_response()
}

async fn nm_container(State(s): State<S>, Path(id): Path<String>) -> Response {
    let f = lock(&s.shared);
    let running = id
        .parse::<ContainerId>()
        .ok()
        .and_then(|i| f.containers.get(&i))
        .is_some_and(|c| c.running);
    Json(NmContainerBody {
        container: NmContainerInfo {
            id,
            state: if running {
                "RUNNING"
            } else {
                "CONTAINER_CLEANEDUP_AFTER_KILL"
            }
            .into(),
            exit_code: -1000,
            diagnostics: String::new(),
            user: "u".into(),
            total_memory_needed_mb: 512,
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
    Json(json!({"port": 29400 + f.free_port_calls as u16 + s.node as u16})).into_response()
}

async fn serve(nodes: usize, initial: u32) -> (Shared, String) {
    let mut listeners = Vec::new();
    let mut addrs = Vec::new();
    for _ in 0..nodes {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        addrs.push(l.local_addr().expect("addr").to_string());
        listeners.push(l);
    }
    let shared = Arc::new(Mutex::new(Fake {
        nm_addrs: addrs.clone(),
        initial,
        ..Default::default()
    }));
    for (node, listener) in listeners.into_iter().enumerate() {
        let router = Router::new()
            .route("/ws/v1/am/register", post(register))
            .route("/ws/v1/am/allocate", post(allocate))
            .route("/ws/v1/am/finish", post(finish))
            .route("/ws/v1/node/containers/start", post(nm_start))
            .route("/ws/v1/node/containers/stop", post(nm_stop))
            .route("/ws/v1/node/containers/release", post(nm_release))
            .route("/ws/v1/node/containers/reinitialize", post(nm_reinit))
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
        rm_address: RmAddress::parse(addr).expect("address"),
        other_rms: Vec::new(),
        token: "t".into(),
        attempt_id: attempt(),
        container_id: ContainerId::new(attempt(), 0, 1),
    };
    AmRmClient::new(AmClient::new(env).expect("client"))
}

async fn bounded<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, f)
        .await
        .expect("finished in time")
}

async fn wait_for(shared: &Shared, what: &str, f: impl Fn(&Fake) -> bool) {
    bounded(async {
        while !f(&lock(shared)) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let _ = what;
}

fn elastic_gang() -> GangRequest {
    GangRequest::elastic(
        "g",
        GangMember::new(Resource::new(512, 1), 1, train::WORKER_REQUEST_ID),
        2,
        8,
        SizeRule::POWER_OF_TWO,
    )
    .placement(GangPlacement::SPREAD)
    .throughput(BTreeMap::from([(1, 318.0), (2, 576.2)]))
}

#[tokio::test]
async fn an_elastic_gang_is_granted_at_a_size_and_hears_offers_and_demands_once() {
    let (shared, addr) = serve(4, 4).await;
    let mut amrm = client(&addr).await;
    amrm.register("127.0.0.1", -1, "").await.expect("register");
    // Malformed elastic requests are refused before anything is asked.
    let plain = GangRequest::new("p", vec![GangMember::new(Resource::new(512, 1), 2, 1)]);
    assert!(matches!(
        amrm.request_elastic_gang(plain).await,
        Err(GangError::Invalid(_))
    ));
    let backwards = GangRequest::elastic(
        "b",
        GangMember::new(Resource::new(512, 1), 1, 1),
        4,
        2,
        SizeRule::ANY,
    );
    assert!(matches!(
        amrm.request_elastic_gang(backwards).await,
        Err(GangError::Invalid(_))
    ));
    assert!(lock(&shared).calls.iter().all(|c| c.ask.is_empty()));

    let got = bounded(amrm.request_elastic_gang(elastic_gang()))
        .await
        .expect("granted");
    assert_eq!(
        got.len(),
        4,
        "granted at the RM's size, between min and max"
    );
    {
        let f = lock(&shared);
        let asks: Vec<_> = f.calls.iter().flat_map(|c| c.ask.iter()).collect();
        assert_eq!(asks.len(), 1, "one ask: {asks:?}");
        assert_eq!(asks[0].num_containers, 8, "numContainers is the maximum");
        let g = asks[0].gang.as_ref().expect("gang");
        assert_eq!(
            (g.min_containers, g.max_containers, g.size_rule),
            (2, 8, Some(SizeRule::POWER_OF_TWO))
        );
        assert_eq!(g.throughput.get("2"), Some(&576.2));
        assert_eq!(g.placement, GangPlacement::SPREAD);
    }
    // The rest of the maximum is not asked for again: the RM grows the gang with offers.
    assert_eq!(amrm.outstanding_requests(), 0);
    let ev = amrm.poll().await.expect("poll");
    assert!(ev.offers.is_empty() && ev.allocated.is_empty());
    assert!(lock(&shared).calls.last().expect("call").ask.is_empty());

    // An offer: told once, its containers are the gang's (not plain grants).
    let offered = lock(&shared).offer("g", 4);
    let ev = amrm.poll().await.expect("poll");
    assert!(ev.allocated.is_empty(), "{:?}", ev.allocated);
    assert_eq!(ev.offers.len(), 1);
    assert_eq!((ev.offers[0].from, ev.offers[0].to), (4, 8));
    let ids: Vec<ContainerId> = ev.offers[0].containers.iter().map(|c| c.id).collect();
    assert_eq!(ids, offered);
    assert_eq!(amrm.gang("g").expect("view").live.len(), 8);
    assert!(amrm.poll().await.expect("poll").offers.is_empty());
    // Declining part of it gives those back with the next heartbeat.
    amrm.decline_offer("g", &offered[..2]);
    amrm.poll().await.expect("poll");
    assert_eq!(
        lock(&shared).calls.last().expect("call").release,
        offered[..2].to_vec()
    );
    assert_eq!(amrm.gang("g").expect("view").live.len(), 6);

    // A demand: repeated by the RM, told once.
    let leaving = vec![got[0].id, got[1].id];
    lock(&shared).demand = Some(ResizeDemand {
        gang_id: "g".into(),
        from_size: 6,
        to_size: 4,
        containers: leaving.clone(),
        deadline: 4_000_000_000_000,
    });
    let first = bounded(amrm.next_event()).await.expect("event");
    match first {
        AllocationEvent::ResizeDemanded {
            gang_id,
            containers,
            from,
            to,
            deadline_ms,
        } => {
            assert_eq!((gang_id.as_str(), from, to), ("g", 6, 4));
            assert_eq!(containers, leaving);
            assert_eq!(deadline_ms, 4_000_000_000_000);
        }
        other => panic!("expected the demand, got {other:?}"),
    }
    for _ in 0..3 {
        assert!(amrm.poll().await.expect("poll").demands.is_empty());
    }
    assert_eq!(amrm.under_demand(), leaving);
    // A throughput report goes with the next heartbeat only.
    amrm.report_throughput("g", 4, 1152.4);
    amrm.release_members("g", &leaving);
    amrm.poll().await.expect("poll");
    amrm.poll().await.expect("poll");
    {
        let f = lock(&shared);
        let n = f.calls.len();
        let sent = &f.calls[n - 2];
        assert_eq!(sent.release, leaving);
        assert_eq!(sent.throughput_reports.len(), 1);
        assert_eq!(
            (
                sent.throughput_reports[0].gang_id.as_str(),
                sent.throughput_reports[0].size,
                sent.throughput_reports[0].throughput
            ),
            ("g", 4, 1152.4)
        );
        assert_eq!(sent.throughput_reports[0].vcores, 0, "no vcores said");
        assert!(f.calls[n - 1].throughput_reports.is_empty());
    }
    // Measured with workers of 12 vcores: the report carries them (the CPU policy's model).
    amrm.report_cpu_throughput("g", 4, 1100.0, 12);
    amrm.poll().await.expect("poll");
    let f = lock(&shared);
    let sent = &f.calls[f.calls.len() - 1].throughput_reports;
    assert_eq!(
        sent.iter()
            .map(|r| (r.size, r.throughput, r.vcores))
            .collect::<Vec<_>>(),
        vec![(4, 1100.0, 12)]
    );
    drop(f);
    assert!(
        amrm.under_demand().is_empty(),
        "completed demands are forgotten"
    );
    assert_eq!(amrm.gang("g").expect("view").live.len(), 4);
}

fn env_of(l: &(ContainerId, ContainerLaunchContext, bool, bool), k: &str) -> Option<String> {
    l.1.environment.get(k).cloned()
}

#[tokio::test]
async fn train_am_restarts_the_whole_gang_when_it_grows_and_when_it_shrinks() {
    let (shared, addr) = serve(4, 4).await;
    let ckpt = tempfile::tempdir().expect("tempdir");
    lock(&shared).marker_dir = Some(ckpt.path().to_path_buf());
    std::fs::write(ckpt.path().join(".spindle-throughput"), "1152.4\n").expect("throughput");
    let cfg = TrainAmConfig {
        workers: 8,
        worker_resources: Resource::new(512, 1),
        placement: GangPlacement::PACK,
        max_nodes: 0,
        gang_timeout: None,
        // No restart to spare: resizes must not need one.
        max_restarts: 0,
        checkpoint_dir: Some(ckpt.path().display().to_string()),
        checkpoint_check: false,
        command: vec!["worker".into()],
        worker_env: BTreeMap::new(),
        elastic: Some(ElasticWorkers {
            min: 2,
            max: 8,
            rule: SizeRule::POWER_OF_TWO,
            multiple: 0,
            throughput: BTreeMap::from([(1, 318.0), (8, 2177.8)]),
        }),
        node_label_expression: None,
        gpu_model: None,
        cpus_per_gpu: None,
        cpu_throughput: Default::default(),
    };
    // The cluster: grow the gang once its 4 workers run, shrink it once 8 run, let the
    // 4 left finish.
    let driver = {
        let shared = shared.clone();
        tokio::spawn(async move {
            wait_for(&shared, "4 workers", |f| f.running_workers().len() == 4).await;
            lock(&shared).offer("workers", 4);
            wait_for(&shared, "8 workers at world size 8", |f| {
                let w = f.running_workers();
                w.len() == 8
                    && w.iter()
                        .all(|(_, e)| e.get("WORLD_SIZE").map(String::as_str) == Some("8"))
            })
            .await;
            let leaving: Vec<ContainerId> = {
                let f = lock(&shared);
                f.running_workers().iter().take(4).map(|w| w.0).collect()
            };
            lock(&shared).demand = Some(ResizeDemand {
                gang_id: "workers".into(),
                from_size: 8,
                to_size: 4,
                containers: leaving.clone(),
                deadline: spindle_common::time::now_ms() + 10_000,
            });
            wait_for(&shared, "4 workers at world size 4", |f| {
                let w = f.running_workers();
                w.len() == 4
                    && w.iter()
                        .all(|(_, e)| e.get("WORLD_SIZE").map(String::as_str) == Some("4"))
            })
            .await;
            let mut f = lock(&shared);
            for (id, _) in f.running_workers() {
                f.complete(id, 0);
            }
            leaving
        })
    };
    let mut amrm = client(&addr).await;
    let nm = NmClient::new().expect("nm client");
    let mut lines: Vec<String> = Vec::new();
    let report = bounded(train::run_am(&cfg, &mut amrm, &nm, "127.0.0.1", &mut |l| {
        lines.push(l.to_string())
    }))
    .await
    .expect("AM ran");
    let leaving = bounded(driver).await.expect("driver");
    let text = lines.join("\n");
    assert_eq!(
        report.final_status,
        FinalApplicationStatus::SUCCEEDED,
        "{text}"
    );
    assert_eq!((report.attempts, report.resizes), (1, 2), "{text}");
    assert!(text.contains("gang workers grown 4 -> 8"), "{text}");
    assert!(
        text.contains("gang workers shrunk 8 -> 4 (deadline in"),
        "{text}"
    );
    assert!(
        text.contains("all 4 workers of attempt 1 exited 0"),
        "{text}"
    );
    let f = lock(&shared);
    assert_eq!(f.finished, Some(FinalApplicationStatus::SUCCEEDED));
    // The first 4 started with world size 4 and no resize yet.
    let first: Vec<_> = f.launches.iter().take(4).collect();
    assert!(first.iter().all(|l| !l.2
        && env_of(l, "WORLD_SIZE").as_deref() == Some("4")
        && env_of(l, "SPINDLE_RESIZE_COUNT").as_deref() == Some("0")));
    // Growing: the 4 running workers stopped (parked, with the marker there), then every
    // worker (re)started at world size 8 with the resize counted, ranks 0..8, one master.
    let parked: Vec<_> = f
        .launches
        .iter()
        .filter(|l| l.1.commands.iter().any(|c| c.contains("sleep")))
        .collect();
    assert_eq!(
        parked.len(),
        4 + 8,
        "every running worker parked at each resize"
    );
    assert!(
        parked.iter().all(|l| l.2 && l.3),
        "parked by re-initialization, marker present"
    );
    let at = |world: &str| -> Vec<&(ContainerId, ContainerLaunchContext, bool, bool)> {
        f.launches
            .iter()
            .filter(|l| env_of(l, "WORLD_SIZE").as_deref() == Some(world))
            .filter(|l| l.1.environment.contains_key("RANK"))
            .collect()
    };
    let grown = at("8");
    assert_eq!(grown.len(), 8);
    assert_eq!(
        grown.iter().filter(|l| l.2).count(),
        4,
        "kept ones re-initialized"
    );
    assert_eq!(
        grown.iter().filter(|l| !l.2).count(),
        4,
        "offered ones started"
    );
    assert!(
        grown.iter().all(|l| !l.3),
        "the marker is gone before they start"
    );
    let ranks: BTreeSet<String> = grown.iter().filter_map(|l| env_of(l, "RANK")).collect();
    assert_eq!(ranks.len(), 8);
    let masters: BTreeSet<(Option<String>, Option<String>)> = grown
        .iter()
        .map(|l| (env_of(l, "MASTER_ADDR"), env_of(l, "MASTER_PORT")))
        .collect();
    assert_eq!(masters.len(), 1);
    assert!(grown
        .iter()
        .all(|l| env_of(l, "SPINDLE_RESIZE_COUNT").as_deref() == Some("1")));
    // Shrinking: the 4 kept restarted at world size 4 (a second round of 4), the demanded
    // ones released.
    let shrunk: Vec<_> = at("4").into_iter().skip(4).collect();
    assert_eq!(shrunk.len(), 4);
    assert!(shrunk
        .iter()
        .all(|l| l.2 && env_of(l, "SPINDLE_RESIZE_COUNT").as_deref() == Some("2")));
    assert!(shrunk.iter().all(|l| !leaving.contains(&l.0)));
    let released: BTreeSet<ContainerId> = f
        .calls
        .iter()
        .flat_map(|c| c.release.iter().copied())
        .collect();
    for c in &leaving {
        assert!(released.contains(c), "{c} released");
    }
    // The acknowledgement and the throughput report rode on heartbeats.
    assert!(f
        .calls
        .iter()
        .any(|c| c.preemption_acknowledgement.is_some()));
    assert!(f
        .calls
        .iter()
        .flat_map(|c| c.throughput_reports.iter())
        .any(|t| t.gang_id == "workers" && t.size == 4 && t.throughput == 1152.4));
    assert!(!ckpt.path().join(".spindle-resize").exists());
}
