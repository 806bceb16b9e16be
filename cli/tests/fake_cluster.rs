//! The clients and the distributed shell (client and AM) against a small fake RM + NM served
//! by axum in the test: a fake at the network boundary, speaking the records of
//! `spindle_common` on the paths of the team brief.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use spindle::cli::logs::print_logs;
use spindle_appmaster_sdk::amrm::{AmRmClient, ContainerRequest};
use spindle_appmaster_sdk::dshell::{run_am, run_client, DsAmConfig, DsOptions};
use spindle_appmaster_sdk::rm_client::{AppsFilter, KillOutcome};
use spindle_appmaster_sdk::{AmClient, AmEnv, AmError, ClientError, NmClient, RmAddress, RmClient};
use spindle_common::ids::{ApplicationAttemptId, ApplicationId, ContainerId, NodeId};
use spindle_common::records::am::{
    AllocateRequest, AllocateResponse, AmCommand, Container, ContainerStatus,
    FinishApplicationMasterRequest, FinishApplicationMasterResponse,
    RegisterApplicationMasterResponse, ResourceRequest,
};
use spindle_common::records::cluster::ApplicationSubmissionContext;
use spindle_common::records::exception::ExceptionKind;
use spindle_common::records::node::{
    ContainerLaunchContext, StartContainersRequest, StartContainersResponse,
};
use spindle_common::records::resource::ResourceInfo;
use spindle_common::resource::Resource;
use spindle_common::states::{ContainerState, FinalApplicationStatus};

const TOKEN: &str = "amrm-token";

fn app_id() -> ApplicationId {
    ApplicationId::new(1, 1)
}

fn attempt() -> ApplicationAttemptId {
    ApplicationAttemptId::new(app_id(), 1)
}

#[derive(Default)]
struct Fake {
    addr: String,
    registered: u32,
    register_calls: u32,
    response_id: i32,
    response_id_mismatches: u32,
    allocate_calls: u32,
    asks: Vec<ResourceRequest>,
    /// Containers still to grant, by allocationRequestId (the `*` ask's desired count).
    wanted: std::collections::BTreeMap<i64, i32>,
    capability: ResourceInfo,
    next_seq: u64,
    granted: Vec<ContainerId>,
    pending_completed: Vec<ContainerStatus>,
    released: Vec<ContainerId>,
    started: Vec<(ContainerId, ContainerLaunchContext)>,
    /// Exit status of each started container in order; 0 once exhausted.
    exit_codes: VecDeque<i32>,
    /// Never grant anything (a full cluster).
    never_grant: bool,
    /// Answer AM_RESYNC on this allocate call (1-based).
    resync_at: Option<u32>,
    finished: Option<FinishApplicationMasterRequest>,
    submitted: Option<ApplicationSubmissionContext>,
    write_queries: Vec<String>,
    app_polls: u32,
    killed: bool,
}

type Shared = Arc<Mutex<Fake>>;

fn remote(kind: ExceptionKind, msg: &str) -> Response {
    let status = StatusCode::from_u16(kind.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, Json(kind.body(msg))).into_response()
}

fn authorized(h: &HeaderMap) -> bool {
    h.get("authorization").and_then(|v| v.to_str().ok()) == Some(format!("Bearer {TOKEN}").as_str())
}

async fn register(State(s): State<Shared>, h: HeaderMap) -> Response {
    if !authorized(&h) {
        return remote(ExceptionKind::Authorization, "bad AMRM token");
    }
    let mut f = s.lock().unwrap();
    f.registered += 1;
    f.register_calls += 1;
    f.response_id = 0;
    Json(RegisterApplicationMasterResponse {
        maximum_resource_capability: ResourceInfo::from(&Resource::new(8192, 4)),
        queue: "default".into(),
        ..Default::default()
    })
    .into_response()
}

async fn allocate(
    State(s): State<Shared>,
    h: HeaderMap,
    Json(req): Json<AllocateRequest>,
) -> Response {
    if !authorized(&h) {
        return remote(ExceptionKind::Authorization, "bad AMRM token");
    }
    let mut f = s.lock().unwrap();
    if f.registered == 0 {
        let mut body = ExceptionKind::Conflict.body("AM is not registered");
        body.remote_exception.exception = "ApplicationMasterNotRegisteredException".into();
        return (StatusCode::CONFLICT, Json(body)).into_response();
    }
    f.allocate_calls += 1;
    if f.resync_at == Some(f.allocate_calls) {
        f.registered = 0;
        return Json(AllocateResponse {
            am_command: Some(AmCommand::AM_RESYNC),
            ..Default::default()
        })
        .into_response();
    }
    if req.response_id != f.response_id {
        f.response_id_mismatches += 1;
    }
    for a in &req.ask {
        if a.resource_name == "*" {
            f.wanted.insert(a.allocation_request_id, a.num_containers);
            f.capability = a.capability.clone();
        }
        f.asks.push(a.clone());
    }
    for r in &req.release {
        f.released.push(*r);
        f.pending_completed.push(ContainerStatus {
            container_id: *r,
            state: ContainerState::COMPLETE,
            exit_status: -100,
            diagnostics: "Container released by application".into(),
            gang_id: None,
        });
    }
    let node: NodeId = f.addr.parse().unwrap();
    let mut allocated = Vec::new();
    while !f.never_grant {
        let Some((&request_id, _)) = f.wanted.iter().find(|(_, &n)| n > 0) else {
            break;
        };
        *f.wanted.entry(request_id).or_default() -= 1;
        f.next_seq += 1;
        let id = ContainerId::new(attempt(), 0, f.next_seq + 1);
        f.granted.push(id);
        allocated.push(Container {
            id,
            node_id: node.clone(),
            node_http_address: f.addr.clone(),
            resource: f.capability.clone(),
            priority: 0,
            container_token: id.to_string(),
            execution_type: "GUARANTEED".into(),
            allocation_request_id: request_id,
            version: 0,
        });
    }
    f.response_id += 1;
    Json(AllocateResponse {
        response_id: f.response_id,
        allocated_containers: allocated,
        completed_container_statuses: std::mem::take(&mut f.pending_completed),
        num_cluster_nodes: 1,
        ..Default::default()
    })
    .into_response()
}

async fn finish(
    State(s): State<Shared>,
    h: HeaderMap,
    Json(req): Json<FinishApplicationMasterRequest>,
) -> Response {
    if !authorized(&h) {
        return remote(ExceptionKind::Authorization, "bad AMRM token");
    }
    s.lock().unwrap().finished = Some(req);
    Json(FinishApplicationMasterResponse {
        is_unregistered: true,
    })
    .into_response()
}

async fn nm_start(State(s): State<Shared>, Json(req): Json<StartContainersRequest>) -> Response {
    let mut f = s.lock().unwrap();
    let mut resp = StartContainersResponse::default();
    for r in req.start_container_request {
        let Ok(id) = r.container_token.parse::<ContainerId>() else {
            return remote(ExceptionKind::BadRequest, "bad token");
        };
        f.started.push((id, r.container_launch_context));
        let exit = f.exit_codes.pop_front().unwrap_or(0);
        f.pending_completed.push(ContainerStatus {
            container_id: id,
            state: ContainerState::COMPLETE,
            exit_status: exit,
            diagnostics: if exit == -100 {
                "Container released on a *lost* node".into()
            } else {
                String::new()
            },
            gang_id: None,
        });
        resp.successfully_started_containers.push(id);
    }
    Json(resp).into_response()
}

async fn new_application(State(s): State<Shared>, RawQuery(q): RawQuery) -> Response {
    s.lock().unwrap().write_queries.push(q.unwrap_or_default());
    Json(json!({
        "application-id": app_id().to_string(),
        "maximum-resource-capability": {"memory": 8192, "vCores": 4}
    }))
    .into_response()
}

async fn submit(
    State(s): State<Shared>,
    RawQuery(q): RawQuery,
    Json(ctx): Json<ApplicationSubmissionContext>,
) -> Response {
    let mut f = s.lock().unwrap();
    f.write_queries.push(q.unwrap_or_default());
    let loc = format!(
        "http://{}/ws/v1/cluster/apps/{}",
        f.addr, ctx.application_id
    );
    f.submitted = Some(ctx);
    (StatusCode::ACCEPTED, [("Location", loc)]).into_response()
}

fn app_json(f: &Fake) -> Value {
    let (state, final_status) = if f.killed {
        ("KILLED", "KILLED")
    } else {
        match f.app_polls {
            0 | 1 => ("ACCEPTED", "UNDEFINED"),
            2 => ("RUNNING", "UNDEFINED"),
            _ => ("FINISHED", "SUCCEEDED"),
        }
    };
    json!({"id": app_id().to_string(), "state": state, "finalStatus": final_status,
           "applicationType": "DISTRIBUTEDSHELL", "name": "DistributedShell",
           "amContainerLogs": format!("http://{}/node/containerlogs/container_1_0001_01_000001/u", f.addr)})
}

async fn apps(State(s): State<Shared>) -> Response {
    let f = s.lock().unwrap();
    if f.submitted.is_none() {
        return Json(json!({"apps": null})).into_response();
    }
    Json(json!({"apps": {"app": [app_json(&f)]}})).into_response()
}

async fn app(State(s): State<Shared>, Path(id): Path<String>) -> Response {
    let mut f = s.lock().unwrap();
    if f.submitted.is_none() || id != app_id().to_string() {
        return remote(
            ExceptionKind::NotFound,
            &format!("java.lang.Exception: app with id: {id} not found"),
        );
    }
    f.app_polls += 1;
    Json(json!({"app": app_json(&f)})).into_response()
}

async fn kill(State(s): State<Shared>, RawQuery(q): RawQuery, Json(body): Json<Value>) -> Response {
    let mut f = s.lock().unwrap();
    f.write_queries.push(q.unwrap_or_default());
    if body["state"] != "KILLED" {
        return remote(
            ExceptionKind::BadRequest,
            "Only 'KILLED' is allowed as a target state.",
        );
    }
    f.killed = true;
    (StatusCode::ACCEPTED, Json(json!({"state": "ACCEPTED"}))).into_response()
}

async fn attempts(State(s): State<Shared>) -> Response {
    let a = s.lock().unwrap().addr.clone();
    Json(
        json!({"appAttempts": {"appAttempt": [{"id": 1, "appAttemptId": attempt().to_string(),
        "containerId": "container_1_0001_01_000001", "nodeId": a, "nodeHttpAddress": a}]}}),
    )
    .into_response()
}

async fn attempt_containers(State(s): State<Shared>) -> Response {
    let a = s.lock().unwrap().addr.clone();
    Json(
        json!({"containers": {"container": {"containerId": "container_1_0001_01_000002",
        "nodeId": a, "nodeHttpAddress": format!("http://{a}")}}}),
    )
    .into_response()
}

async fn nodes(State(s): State<Shared>) -> Response {
    let a = s.lock().unwrap().addr.clone();
    Json(json!({"nodes": {"node": [{"id": a, "state": "RUNNING", "nodeHTTPAddress": a}]}}))
        .into_response()
}

async fn nm_app() -> Response {
    Json(
        json!({"app": {"id": app_id().to_string(), "user": "u", "state": "RUNNING",
        "containerids": ["container_1_0001_01_000003", "container_1_0001_01_000002"]}}),
    )
    .into_response()
}

async fn log_list(Path(_cid): Path<String>) -> Response {
    Json(json!({"containerLogsInfo": {"containerLogInfo": [
        {"fileName": "stdout", "fileSize": 10, "lastModifiedTime": 1},
        {"fileName": "stderr", "fileSize": 0, "lastModifiedTime": 1}]}}))
    .into_response()
}

async fn log_file(Path((cid, file)): Path<(String, String)>) -> String {
    format!("{file} of {cid}\n")
}

async fn serve(fake: Fake) -> (Shared, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let shared = Arc::new(Mutex::new(Fake {
        addr: addr.clone(),
        ..fake
    }));
    let router = Router::new()
        .route("/ws/v1/am/register", post(register))
        .route("/ws/v1/am/allocate", post(allocate))
        .route("/ws/v1/am/finish", post(finish))
        .route("/ws/v1/node/containers/start", post(nm_start))
        .route("/ws/v1/node/apps/{id}", get(nm_app))
        .route("/ws/v1/node/containers/{id}/logs", get(log_list))
        .route("/ws/v1/node/containerlogs/{id}/{file}", get(log_file))
        .route("/ws/v1/cluster/apps/new-application", post(new_application))
        .route("/ws/v1/cluster/apps", get(apps).post(submit))
        .route("/ws/v1/cluster/apps/{id}", get(app))
        .route("/ws/v1/cluster/apps/{id}/state", axum::routing::put(kill))
        .route("/ws/v1/cluster/apps/{id}/appattempts", get(attempts))
        .route(
            "/ws/v1/cluster/apps/{id}/appattempts/{att}/containers",
            get(attempt_containers),
        )
        .route("/ws/v1/cluster/nodes", get(nodes))
        .with_state(shared.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (shared, addr)
}

fn am_env(addr: &str, token: &str) -> AmEnv {
    AmEnv {
        rm_address: RmAddress::parse(addr).unwrap(),
        other_rms: Vec::new(),
        token: token.into(),
        attempt_id: attempt(),
        container_id: ContainerId::new(attempt(), 0, 1),
    }
}

fn ds_config(n: u32) -> DsAmConfig {
    DsAmConfig {
        num_containers: n,
        container_resources: Resource::new(256, 1),
        shell_command: "echo hello from $CONTAINER_ID".into(),
        shell_env: [("GREETING".to_string(), "hi".to_string())].into(),
        container_priority: 0,
        no_progress_timeout: Duration::from_secs(10),
        placement: Vec::new(),
        node_label_expression: None,
    }
}

type AmRun = (
    Shared,
    Result<spindle_appmaster_sdk::dshell::DsAmReport, AmError>,
    Vec<String>,
);

async fn run_ds_am(fake: Fake, n: u32) -> AmRun {
    run_ds_am_with(fake, ds_config(n)).await
}

async fn run_ds_am_with(fake: Fake, cfg: DsAmConfig) -> AmRun {
    let (shared, addr) = serve(fake).await;
    let mut amrm = AmRmClient::new(AmClient::new(am_env(&addr, TOKEN)).unwrap());
    let nm = NmClient::new().unwrap();
    let mut lines = Vec::new();
    let r = tokio::time::timeout(
        Duration::from_secs(30),
        run_am(&cfg, &mut amrm, &nm, "127.0.0.1", &mut |l| {
            lines.push(l.to_string())
        }),
    )
    .await
    .expect("the AM finished in time");
    (shared, r, lines)
}

#[tokio::test]
async fn ds_am_succeeds_and_asks_again_for_an_aborted_container() {
    let fake = Fake {
        exit_codes: VecDeque::from([-100]),
        ..Default::default()
    };
    let (shared, report, lines) = run_ds_am(fake, 3).await;
    let report = report.unwrap();
    assert_eq!(
        report.final_status,
        FinalApplicationStatus::SUCCEEDED,
        "{lines:#?}"
    );
    assert_eq!((report.succeeded, report.failed, report.retried), (3, 0, 1));
    let f = shared.lock().unwrap();
    let fin = f.finished.as_ref().unwrap();
    assert_eq!(
        fin.final_application_status,
        FinalApplicationStatus::SUCCEEDED
    );
    assert_eq!(f.granted.len(), 4, "3 asked + 1 re-asked");
    assert_eq!(f.started.len(), 4);
    assert_eq!(f.response_id_mismatches, 0);
    // Desired-state asks: 3 at first, then an absolute 1 for the replacement.
    let any: Vec<i32> = f
        .asks
        .iter()
        .filter(|a| a.resource_name == "*")
        .map(|a| a.num_containers)
        .collect();
    assert_eq!(any, vec![3, 1]);
    // The launch context is the shell command with the shell env.
    let (_, ctx) = &f.started[0];
    assert_eq!(
        ctx.commands,
        vec!["echo hello from $CONTAINER_ID".to_string()]
    );
    assert_eq!(
        ctx.environment.get("GREETING").map(String::as_str),
        Some("hi")
    );
    let aborted = lines
        .iter()
        .find(|l| l.contains("exit status -100 (ABORTED)"))
        .unwrap_or_else(|| panic!("{lines:#?}"));
    assert!(aborted.starts_with("container container_1_0001_01_000002 completed on 127.0.0.1:"));
    assert!(aborted.contains("Container released on a *lost* node"));
}

#[tokio::test]
async fn ds_am_fails_when_a_container_fails() {
    let fake = Fake {
        exit_codes: VecDeque::from([0, 3]),
        ..Default::default()
    };
    let (shared, report, lines) = run_ds_am(fake, 2).await;
    let report = report.unwrap();
    assert_eq!(report.final_status, FinalApplicationStatus::FAILED);
    assert_eq!(report.diagnostics, "1 of 2 containers failed");
    let f = shared.lock().unwrap();
    let fin = f.finished.as_ref().unwrap();
    assert_eq!(fin.final_application_status, FinalApplicationStatus::FAILED);
    assert_eq!(fin.diagnostics, "1 of 2 containers failed");
    assert!(
        lines.iter().any(|l| l.ends_with("with exit status 3")),
        "{lines:#?}"
    );
}

#[tokio::test]
async fn ds_am_asks_once_per_placement_spec_source_tag() {
    let fake = Fake {
        // One zk container is aborted: it is asked for again with zk's tag and constraint.
        exit_codes: VecDeque::from([-100]),
        ..Default::default()
    };
    let cfg = DsAmConfig {
        placement: spindle_appmaster_sdk::placement::parse(
            "zk=2,NOTIN,NODE,zk:spark=1,AND(IN,RACK,zk:os=ubuntu)",
        )
        .expect("a good spec"),
        node_label_expression: Some("h100".into()),
        // Ignored with a spec: the count is the spec's.
        ..ds_config(9)
    };
    let (shared, report, lines) = run_ds_am_with(fake, cfg).await;
    let report = report.expect("the AM ran");
    assert_eq!(
        report.final_status,
        FinalApplicationStatus::SUCCEEDED,
        "{lines:#?}"
    );
    assert_eq!(
        (report.total, report.succeeded, report.retried),
        (3, 3, 1),
        "{lines:#?}"
    );
    let f = shared.lock().unwrap();
    assert_eq!(f.granted.len(), 4, "3 asked + 1 re-asked");
    let any: Vec<&ResourceRequest> = f.asks.iter().filter(|a| a.resource_name == "*").collect();
    let first = |id: i64| {
        any.iter()
            .find(|a| a.allocation_request_id == id)
            .unwrap_or_else(|| panic!("no ask {id}: {any:#?}"))
    };
    let zk = first(1);
    assert_eq!(zk.num_containers, 2);
    assert_eq!(zk.allocation_tags, vec!["zk".to_string()]);
    assert_eq!(zk.node_label_expression.as_deref(), Some("h100"));
    assert_eq!(
        serde_json::to_value(&zk.placement_constraint).expect("json"),
        json!({"type": "NOTIN", "scope": "NODE", "tag": "zk"})
    );
    let spark = first(2);
    assert_eq!(spark.num_containers, 1);
    assert_eq!(spark.allocation_tags, vec!["spark".to_string()]);
    assert_eq!(
        serde_json::to_value(&spark.placement_constraint).expect("json"),
        json!({"type": "AND", "children": [
            {"type": "IN", "scope": "RACK", "tag": "zk"},
            {"type": "NODE_ATTRIBUTE", "name": "rm.yarn.io/os", "op": "EQ", "values": ["ubuntu"]},
        ]})
    );
    // The replacement is zk's again (desired state: an absolute 1 on allocationRequestId 1).
    let last_zk = any
        .iter()
        .rev()
        .find(|a| a.allocation_request_id == 1)
        .expect("zk asks");
    assert_eq!(last_zk.num_containers, 1);
    assert_eq!(last_zk.allocation_tags, vec!["zk".to_string()]);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("2 containers tagged 'zk' placed by NOTIN,NODE,zk")),
        "{lines:#?}"
    );
}

#[tokio::test]
async fn ds_am_gives_up_when_nothing_is_granted() {
    let fake = Fake {
        never_grant: true,
        ..Default::default()
    };
    let cfg = DsAmConfig {
        no_progress_timeout: Duration::from_millis(400),
        ..ds_config(2)
    };
    let (shared, report, _lines) = run_ds_am_with(fake, cfg).await;
    let report = report.unwrap();
    assert_eq!(report.final_status, FinalApplicationStatus::FAILED);
    assert!(
        report.diagnostics.starts_with("gave up after"),
        "{}",
        report.diagnostics
    );
    assert!(
        report.diagnostics.contains("2 still requested"),
        "{}",
        report.diagnostics
    );
    let f = shared.lock().unwrap();
    assert_eq!(
        f.finished.as_ref().unwrap().final_application_status,
        FinalApplicationStatus::FAILED
    );
}

#[tokio::test]
async fn ds_am_survives_a_resync() {
    let fake = Fake {
        resync_at: Some(1),
        ..Default::default()
    };
    let (shared, report, _lines) = run_ds_am(fake, 2).await;
    assert_eq!(
        report.unwrap().final_status,
        FinalApplicationStatus::SUCCEEDED
    );
    let f = shared.lock().unwrap();
    assert_eq!(f.register_calls, 2, "registered again after AM_RESYNC");
    assert_eq!(
        f.response_id_mismatches, 0,
        "responseId restarts at 0 after a resync"
    );
    assert_eq!(f.granted.len(), 2);
}

#[tokio::test]
async fn am_client_errors_are_typed() {
    let (_shared, addr) = serve(Fake::default()).await;
    // A wrong token is refused with the RM's RemoteException.
    let mut bad = AmClient::new(am_env(&addr, "wrong")).unwrap();
    let e = bad.allocate(AllocateRequest::default()).await.unwrap_err();
    match e {
        AmError::Client(ClientError::Remote {
            status, exception, ..
        }) => {
            assert_eq!(status, 401);
            assert_eq!(exception, "AuthorizationException");
        }
        other => panic!("{other:?}"),
    }
    // Polling before registering is a local error.
    let mut amrm = AmRmClient::new(AmClient::new(am_env(&addr, TOKEN)).unwrap());
    assert!(matches!(amrm.poll().await, Err(AmError::NotRegistered)));
    // Nobody listening: a connection error naming the address.
    let dead = AmClient::new(am_env("127.0.0.1:9", TOKEN)).unwrap();
    let mut dead = AmRmClient::new(dead);
    let e = dead.register("h", -1, "").await.unwrap_err();
    assert!(e.to_string().contains("127.0.0.1:9"), "{e}");
    // Asks are validated before anything is sent.
    assert!(amrm
        .add_container_request(ContainerRequest::new(Resource::zero(), 0))
        .is_err());
}

#[tokio::test]
async fn rm_client_and_ds_client_against_the_fake_rm() {
    let (shared, addr) = serve(Fake::default()).await;
    let rm = RmClient::new(&RmAddress::parse(&addr).unwrap())
        .unwrap()
        .with_user("alice");
    // No apps: YARN's {"apps":null}.
    assert!(rm.apps(&AppsFilter::default()).await.unwrap().is_empty());
    let e = rm.app(&app_id()).await.unwrap_err();
    assert!(e.is_not_found(), "{e}");
    assert!(e.to_string().contains("not found"), "{e}");

    let opts = DsOptions::new(ds_config(2));
    let exe = std::env::current_exe().unwrap();
    let mut lines = Vec::new();
    let outcome = run_client(&rm, &opts, &exe, &mut |l| lines.push(l.to_string()))
        .await
        .unwrap();
    assert!(outcome.succeeded(), "{lines:#?}");
    assert!(lines[0].starts_with("Submitted application application_1_0001"));
    assert!(lines.contains(&"Application application_1_0001 is ACCEPTED".to_string()));
    assert!(lines.contains(&"Application application_1_0001 is RUNNING".to_string()));
    assert!(lines
        .iter()
        .any(|l| l.contains("finished with state FINISHED and final status SUCCEEDED")));
    assert!(lines
        .iter()
        .any(|l| l.starts_with("AM container logs: http://")));
    {
        let f = shared.lock().unwrap();
        let ctx = f.submitted.as_ref().unwrap();
        assert_eq!(ctx.application_type.as_deref(), Some("DISTRIBUTEDSHELL"));
        assert!(
            f.write_queries.iter().all(|q| q == "user.name=alice"),
            "{:?}",
            f.write_queries
        );
    }
    assert_eq!(rm.apps(&AppsFilter::default()).await.unwrap().len(), 1);
    assert_eq!(rm.kill(&app_id()).await.unwrap(), KillOutcome::InProgress);
}

#[tokio::test]
async fn logs_are_gathered_from_attempts_and_nodes() {
    let (_shared, addr) = serve(Fake::default()).await;
    let rm = RmClient::new(&RmAddress::parse(&addr).unwrap()).unwrap();
    let mut out = String::new();
    let n = print_logs(&rm, &app_id(), None, &[], &mut |s| out.push_str(s))
        .await
        .unwrap();
    // AM container (attempt), container 2 (RM + NM), container 3 (NM only): 2 files each.
    assert_eq!(n, 6, "{out}");
    assert!(out.contains(&format!(
        "Container: container_1_0001_01_000003 on {addr}\n"
    )));
    let body = "stdout of container_1_0001_01_000001\n";
    assert!(out.contains(&format!(
        "LogType:stdout\nLogLastModifiedTime:1\nLogLength:{}\nLogContents:\n{body}",
        body.len()
    )));
    let mut out = String::new();
    let only: ContainerId = "container_1_0001_01_000002".parse().unwrap();
    let n = print_logs(&rm, &app_id(), Some(&only), &["stderr".into()], &mut |s| {
        out.push_str(s)
    })
    .await
    .unwrap();
    assert_eq!(n, 1, "{out}");
    assert!(out.contains("stderr of container_1_0001_01_000002"));
}

async fn spindle(args: &[&str], env: &[(&str, String)]) -> (i32, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_spindle"))
        .args(args)
        .env_remove("SPINDLE_RM_ADDRESS")
        .envs(env.iter().map(|(k, v)| (k.to_string(), v.clone())))
        .output()
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn cli_against_the_fake_rm() {
    let (shared, addr) = serve(Fake::default()).await;
    let (code, out, err) = spindle(
        &[
            "application",
            "-list",
            "-appStates",
            "RUNNING,ACCEPTED",
            "--rm-address",
            &addr,
        ],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with(
        "Total number of applications (application-types: [], states: [ACCEPTED, RUNNING] and tags: []):0\n"
    ));
    assert!(out
        .lines()
        .nth(1)
        .unwrap()
        .trim_start()
        .starts_with("Application-Id\t"));

    let (code, _out, err) = spindle(
        &["application", "-status", "application_1_0001"],
        &[("SPINDLE_RM_ADDRESS", format!("http://{addr}"))],
    )
    .await;
    assert_eq!(code, 255, "env var is read; unknown app: {err}");
    assert_eq!(
        err.trim(),
        "Application with id 'application_1_0001' doesn't exist in RM."
    );

    shared.lock().unwrap().submitted = Some(ApplicationSubmissionContext::default());
    let (code, out, err) = spindle(
        &[
            "application",
            "--list",
            "--app-states",
            "ALL",
            "--rm-address",
            &addr,
        ],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("):1\n"), "{out}");
    assert!(out.contains("DISTRIBUTEDSHELL"), "{out}");
    let (code, out, err) = spindle(
        &[
            "application",
            "-status",
            "application_1_0001",
            "--rm-address",
            &addr,
        ],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("Application Report : \n\tApplication-Id : application_1_0001\n"));

    let (code, out, err) = spindle(&["node", "-list", "--rm-address", &addr], &[]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("Total Nodes:1\n"), "{out}");

    let (code, _out, err) = spindle(&["application", "-lst"], &[]).await;
    assert_eq!(code, 255);
    assert!(err.contains("unknown option '-lst'"), "{err}");
}

#[tokio::test]
async fn ds_am_binary_reads_its_environment() {
    let (shared, addr) = serve(Fake::default()).await;
    let mut env: Vec<(&str, String)> = vec![
        ("SPINDLE_RM_ADDRESS", format!("http://{addr}")),
        ("SPINDLE_AMRM_TOKEN", TOKEN.into()),
        ("SPINDLE_APPLICATION_ATTEMPT_ID", attempt().to_string()),
        (
            "CONTAINER_ID",
            ContainerId::new(attempt(), 0, 1).to_string(),
        ),
        ("NM_HOST", "127.0.0.1".into()),
    ];
    let ds: Vec<(String, String)> = ds_config(2).to_env();
    let ds: Vec<(&str, String)> = ds.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    env.extend(ds.iter().map(|(k, v)| (*k, v.clone())));
    let (code, out, err) = spindle(&["distributed-shell-am"], &env).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains("application master finished with status SUCCEEDED"),
        "{out}"
    );
    assert_eq!(shared.lock().unwrap().started.len(), 2);

    // Missing identity: a clear error, non-zero.
    let (code, _out, err) = spindle(&["distributed-shell-am"], &ds).await;
    assert_eq!(code, 1);
    assert!(err.contains("SPINDLE_RM_ADDRESS"), "{err}");
}

#[tokio::test]
async fn train_client_submits_the_training_am_and_follows_it() {
    use spindle_appmaster_sdk::train::{run_client, TrainAmConfig, TrainOptions};
    use spindle_common::records::am::GangPlacement;
    let (shared, addr) = serve(Fake::default()).await;
    let rm = RmClient::new(&RmAddress::parse(&addr).unwrap()).unwrap();
    let opts = TrainOptions::new(TrainAmConfig {
        workers: 4,
        worker_resources: Resource::new(256, 1),
        placement: GangPlacement::SPREAD,
        max_nodes: 0,
        gang_timeout: Some(Duration::from_secs(5)),
        max_restarts: 2,
        checkpoint_dir: None,
        checkpoint_check: false,
        command: vec!["python".into(), "train.py".into()],
        worker_env: Default::default(),
        elastic: None,
        node_label_expression: None,
        gpu_model: None,
        cpus_per_gpu: None,
        cpu_throughput: Default::default(),
    });
    let exe = std::env::current_exe().unwrap();
    let mut lines = Vec::new();
    let outcome = run_client(&rm, &opts, &exe, &mut |l| lines.push(l.to_string()))
        .await
        .unwrap();
    assert!(outcome.succeeded(), "{lines:#?}");
    assert!(lines[0].starts_with("Submitted training application application_1_0001 (4 workers"));
    let f = shared.lock().unwrap();
    let ctx = f.submitted.as_ref().unwrap();
    assert_eq!(ctx.application_type.as_deref(), Some("SPINDLE_TRAIN"));
    let v = serde_json::to_value(ctx).unwrap();
    let env = v["am-container-spec"]["environment"]["entry"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let get = |k: &str| {
        env.iter()
            .find(|e| e["key"] == k)
            .and_then(|e| e["value"].as_str().map(str::to_string))
    };
    assert_eq!(get("SPINDLE_TRAIN_PLACEMENT").as_deref(), Some("SPREAD"));
    assert_eq!(
        get("SPINDLE_TRAIN_GANG_TIMEOUT_MS").as_deref(),
        Some("5000")
    );
    assert_eq!(get("SPINDLE_TRAIN_MAX_RESTARTS").as_deref(), Some("2"));
}

#[tokio::test]
async fn train_cli_refuses_bad_usage_and_the_am_needs_its_environment() {
    let (code, _out, err) = spindle(&["train", "--workers", "2", "--", "w"], &[]).await;
    assert_eq!(code, 255);
    assert!(err.contains("--worker-resources LIST is required"), "{err}");
    let (code, out, _err) = spindle(&["train", "-help"], &[]).await;
    assert_eq!(code, 0);
    assert!(out.contains("--max-restarts K"), "{out}");
    let (code, _out, err) = spindle(&["train-am"], &[]).await;
    assert_eq!(code, 1);
    assert!(err.contains("SPINDLE_TRAIN_WORKERS"), "{err}");
}

async fn run_sweep_am(
    fake: Fake,
    cfg: spindle_appmaster_sdk::sweep::SweepAmConfig,
) -> (
    Shared,
    spindle_appmaster_sdk::sweep::SweepReport,
    Vec<String>,
) {
    let (shared, addr) = serve(fake).await;
    let mut amrm = AmRmClient::new(AmClient::new(am_env(&addr, TOKEN)).unwrap());
    let nm = NmClient::new().unwrap();
    let mut lines = Vec::new();
    let shipped = spindle_appmaster_sdk::ship::Shipped::default();
    let r = tokio::time::timeout(
        Duration::from_secs(30),
        spindle_appmaster_sdk::sweep::run_am_with(
            &cfg,
            &shipped,
            &mut amrm,
            &nm,
            "127.0.0.1",
            &mut |l| lines.push(l.to_string()),
        ),
    )
    .await
    .expect("the AM finished in time")
    .expect("the AM ran");
    (shared, r, lines)
}

fn sweep_config(values: &str, retries: u32) -> spindle_appmaster_sdk::sweep::SweepAmConfig {
    use spindle_appmaster_sdk::sweep::{grid, parse_param, SweepAmConfig};
    let trials = grid(&[parse_param(&format!("lr={values}")).unwrap()]).unwrap();
    SweepAmConfig {
        shell: ds_config(trials.len() as u32),
        trials,
        array: false,
        parallel: 2,
        max_trial_retries: retries,
    }
}

#[tokio::test]
async fn sweep_am_runs_every_trial_at_most_k_at_once_and_retries_a_failure() {
    use spindle_appmaster_sdk::sweep::status::TrialState;
    // Trial 1's first attempt (the second container started) exits 3.
    let fake = Fake {
        exit_codes: VecDeque::from([0, 3]),
        ..Default::default()
    };
    let (shared, report, lines) = run_sweep_am(fake, sweep_config("1,2,3,4,5", 1)).await;
    assert_eq!(
        report.final_status,
        FinalApplicationStatus::SUCCEEDED,
        "{lines:#?}"
    );
    let f = shared.lock().unwrap();
    assert_eq!(f.started.len(), 6, "5 trials and one retry");
    // Never more than 2 containers wanted at once: the asks are incremental, never a gang.
    let any: Vec<i32> = f
        .asks
        .iter()
        .filter(|a| a.resource_name == "*")
        .map(|a| a.num_containers)
        .collect();
    assert!(any.iter().all(|&n| n <= 2), "{any:?}");
    assert_eq!(any.first(), Some(&2), "{any:?}");
    assert!(f.asks.iter().all(|a| a.gang.is_none()));
    // Each trial saw its id and parameter; the retry its attempt number.
    let env = |i: usize, k: &str| f.started[i].1.environment.get(k).cloned();
    assert_eq!(env(0, "SPINDLE_TRIAL_ID").as_deref(), Some("0"));
    assert_eq!(env(0, "SWEEP_LR").as_deref(), Some("1"));
    assert_eq!(env(0, "GREETING").as_deref(), Some("hi"));
    let retry = (0..6)
        .find(|&i| env(i, "SPINDLE_TRIAL_ATTEMPT").as_deref() == Some("2"))
        .expect("a second attempt");
    assert_eq!(env(retry, "SPINDLE_TRIAL_ID").as_deref(), Some("1"));
    let t = &report.trials.trials;
    assert!(t.iter().all(|t| t.state == TrialState::SUCCEEDED), "{t:?}");
    assert_eq!(t[1].attempts, 2);
    assert_eq!(t[1].exit_status, Some(0));
    let last = t[1].last_line.as_deref().unwrap_or_default();
    assert!(last.starts_with("stdout of container_"), "{t:?}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("trial 1 (lr=2) failed; running it again")),
        "{lines:#?}"
    );
    let table = lines
        .iter()
        .position(|l| l == "Trials:")
        .expect("the table");
    assert!(lines[table + 1].contains("TRIAL  PARAMETERS"), "{lines:#?}");
    assert!(lines[table + 3].contains("lr=2"), "{lines:#?}");
}

#[tokio::test]
async fn sweep_am_fails_naming_the_trial_that_failed_for_good() {
    let fake = Fake {
        exit_codes: VecDeque::from([0, 3, 3]),
        ..Default::default()
    };
    let (shared, report, lines) = run_sweep_am(fake, sweep_config("1,2", 1)).await;
    assert_eq!(
        report.final_status,
        FinalApplicationStatus::FAILED,
        "{lines:#?}"
    );
    let want = "1 of 2 trials failed: trial 1 (lr=2) exit status 3 after 2 attempts";
    assert_eq!(report.diagnostics, want);
    let f = shared.lock().unwrap();
    assert_eq!(f.finished.as_ref().unwrap().diagnostics, want);
    assert_eq!(f.started.len(), 3);
}
