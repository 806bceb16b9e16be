//! The SDK's side of YARN's container update against a fake RM + NM served by axum: an
//! update asked with `AmRmClient::request_container_update` goes out in the next allocate
//! call (once), the RM's `updatedContainers` and `updateErrors` come back as
//! `ContainerUpdated` / `ContainerUpdateFailed` events, and `NmClient::update_container(s)`
//! hands the new token to the NM's `POST /ws/v1/node/containers/update`.

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};
use spindle_appmaster_sdk::amrm::{AllocationEvent, AmRmClient, ContainerUpdateType};
use spindle_appmaster_sdk::{AmClient, AmEnv, ClientError, NmClient, RmAddress};
use spindle_common::ids::{ApplicationAttemptId, ApplicationId, ContainerId, NodeId};
use spindle_common::records::am::{
    AllocateRequest, AllocateResponse, Container, RegisterApplicationMasterResponse,
    UpdateContainerError, UpdateContainerRequest, UpdatedContainer,
};
use spindle_common::records::resource::ResourceInfo;
use spindle_common::resource::Resource;

fn attempt() -> ApplicationAttemptId {
    ApplicationAttemptId::new(ApplicationId::new(1, 1), 1)
}

fn cid(seq: u64) -> ContainerId {
    ContainerId::new(attempt(), 0, seq)
}

#[derive(Default)]
struct Fake {
    addr: String,
    /// Every allocate call's update requests.
    sent: Vec<Vec<UpdateContainerRequest>>,
    /// NM update calls' tokens.
    nm_tokens: Vec<Vec<String>>,
}

type Shared = Arc<Mutex<Fake>>;

async fn register() -> Response {
    Json(RegisterApplicationMasterResponse {
        maximum_resource_capability: ResourceInfo::from(&Resource::new(8192, 4)),
        queue: "default".into(),
        ..Default::default()
    })
    .into_response()
}

/// Answers each update request at once: an increase of container 2 is granted (version+1,
/// token `new-token-<version>`), anything else is refused as a wrong version.
async fn allocate(State(s): State<Shared>, Json(req): Json<AllocateRequest>) -> Response {
    let mut f = s.lock().expect("fake");
    f.sent.push(req.update_requests.clone());
    let mut resp = AllocateResponse::default();
    for u in req.update_requests {
        if u.container_id == cid(2) {
            let version = u.container_version + 1;
            resp.updated_containers.push(UpdatedContainer {
                update_type: u.container_update_type,
                container: Container {
                    id: u.container_id,
                    node_id: NodeId::new("127.0.0.1", 1),
                    node_http_address: f.addr.clone(),
                    resource: u.capability.clone(),
                    priority: 0,
                    container_token: format!("new-token-{version}"),
                    execution_type: "GUARANTEED".into(),
                    allocation_request_id: 0,
                    version,
                },
            });
        } else {
            resp.update_errors.push(UpdateContainerError {
                reason: "INCORRECT_CONTAINER_VERSION_ERROR".into(),
                diagnostics: String::new(),
                current_container_version: 3,
                update_container_request: u,
            });
        }
    }
    Json(resp).into_response()
}

/// The NM: `new-token-*` tokens update container 2; anything else is refused.
async fn nm_update(State(s): State<Shared>, Json(body): Json<Value>) -> Response {
    let tokens: Vec<String> =
        serde_json::from_value(body["containersToUpdate"].clone()).expect("containersToUpdate");
    s.lock().expect("fake").nm_tokens.push(tokens.clone());
    let (ok, failed): (Vec<_>, Vec<_>) = tokens.iter().partition(|t| t.starts_with("new-token"));
    Json(json!({
        "successfullyUpdatedContainers": ok.iter().map(|_| cid(2).to_string()).collect::<Vec<_>>(),
        "failedRequests": failed.iter().map(|_| json!({
            "containerId": cid(3).to_string(),
            "exception": "InvalidToken",
            "message": "Container container_1_0001_01_000003 is at version 1; an update to version 1 is stale or replayed",
        })).collect::<Vec<_>>(),
    }))
    .into_response()
}

async fn serve() -> (Shared, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let shared = Arc::new(Mutex::new(Fake {
        addr: addr.clone(),
        ..Default::default()
    }));
    let router = Router::new()
        .route("/ws/v1/am/register", post(register))
        .route("/ws/v1/am/allocate", post(allocate))
        .route("/ws/v1/node/containers/update", post(nm_update))
        .with_state(shared.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (shared, addr)
}

async fn client(addr: &str) -> AmRmClient {
    let env = AmEnv {
        rm_address: RmAddress::parse(addr).expect("address"),
        other_rms: Vec::new(),
        token: "amrm-token".into(),
        attempt_id: attempt(),
        container_id: cid(1),
    };
    let mut amrm = AmRmClient::new(AmClient::new(env).expect("client"));
    amrm.register("127.0.0.1", -1, "").await.expect("register");
    amrm
}

#[tokio::test]
async fn updates_are_sent_once_and_their_answers_become_events() {
    let (shared, addr) = serve().await;
    let mut amrm = client(&addr).await;
    let bigger = Resource::new(2048, 2);
    amrm.request_container_update(cid(2), 0, ContainerUpdateType::INCREASE_RESOURCE, &bigger);
    // A second request for the same container replaces the first before it is sent.
    amrm.request_container_update(cid(3), 0, ContainerUpdateType::DECREASE_RESOURCE, &bigger);
    amrm.request_container_update(
        cid(3),
        1,
        ContainerUpdateType::DECREASE_RESOURCE,
        &Resource::new(256, 1),
    );
    assert_eq!(amrm.pending_updates().len(), 2);
    let events: Vec<AllocationEvent> = amrm.poll().await.expect("poll").into_items().collect();
    assert!(amrm.pending_updates().is_empty());
    {
        let f = shared.lock().expect("fake");
        assert_eq!(f.sent.len(), 1);
        let sent = &f.sent[0];
        assert_eq!(sent.len(), 2, "{sent:?}");
        assert_eq!(sent[0].container_id, cid(2));
        assert_eq!(sent[0].container_version, 0);
        assert_eq!(
            sent[0].container_update_type,
            ContainerUpdateType::INCREASE_RESOURCE
        );
        assert_eq!(sent[0].capability, ResourceInfo::from(&bigger));
        assert_eq!(sent[1].container_id, cid(3));
        assert_eq!(sent[1].container_version, 1);
        assert_eq!(
            sent[1].capability,
            ResourceInfo::from(&Resource::new(256, 1))
        );
    }
    let mut updated = None;
    let mut failed = None;
    for e in events {
        match e {
            AllocationEvent::ContainerUpdated {
                update_type,
                container,
            } => {
                assert_eq!(update_type, ContainerUpdateType::INCREASE_RESOURCE);
                updated = Some(container);
            }
            AllocationEvent::ContainerUpdateFailed { error } => failed = Some(error),
            other => panic!("unexpected event {other:?}"),
        }
    }
    let updated = updated.expect("a ContainerUpdated event");
    assert_eq!(updated.id, cid(2));
    assert_eq!(updated.version, 1);
    assert_eq!(updated.resource, ResourceInfo::from(&bigger));
    assert_eq!(updated.container_token, "new-token-1");
    let failed = failed.expect("a ContainerUpdateFailed event");
    assert_eq!(failed.reason, "INCORRECT_CONTAINER_VERSION_ERROR");
    assert_eq!(failed.current_container_version, 3);
    assert_eq!(failed.update_container_request.container_id, cid(3));

    // Nothing more is sent once answered.
    amrm.poll().await.expect("poll");
    assert!(shared.lock().expect("fake").sent[1].is_empty());

    // The AM hands the new token to the container's NM.
    let nm = NmClient::new().expect("nm client");
    nm.update_container(&updated).await.expect("update");
    let resp = nm
        .update_containers(&addr, vec!["old-token".into()])
        .await
        .expect("update call");
    assert!(resp.successfully_updated_containers.is_empty());
    assert_eq!(resp.failed_requests[0].exception, "InvalidToken");
    let mut stale = updated.clone();
    stale.container_token = "old-token".into();
    stale.id = cid(3);
    match nm.update_container(&stale).await {
        Err(ClientError::ContainerRequest {
            operation,
            exception,
            message,
            ..
        }) => {
            assert_eq!(operation, "update");
            assert_eq!(exception, "InvalidToken");
            assert!(message.contains("stale or replayed"), "{message}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let f = shared.lock().expect("fake");
    assert_eq!(
        f.nm_tokens,
        vec![
            vec!["new-token-1".to_string()],
            vec!["old-token".to_string()],
            vec!["old-token".to_string()]
        ]
    );
}
