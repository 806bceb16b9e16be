//! The SDK hears of each completion once, across an RM restart: a restarted RM re-delivers a
//! completion its predecessor sent but whose acknowledgement (the next allocate) never came
//! (the NM keeps it until the AM acknowledges it, see docs/architecture.md). Against a fake
//! RM served by axum: it tells container 2's completion, then restarts (409
//! `ApplicationMasterNotRegisteredException`), then tells container 2 again with container 3.

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use spindle_appmaster_sdk::amrm::{AllocationEvent, AmRmClient};
use spindle_appmaster_sdk::{AmClient, AmEnv, RmAddress};
use spindle_common::ids::{ApplicationAttemptId, ApplicationId, ContainerId};
use spindle_common::records::am::{
    AllocateResponse, ContainerStatus, RegisterApplicationMasterResponse,
};
use spindle_common::records::exception::ExceptionKind;
use spindle_common::records::resource::ResourceInfo;
use spindle_common::resource::Resource;
use spindle_common::states::ContainerState;

fn attempt() -> ApplicationAttemptId {
    ApplicationAttemptId::new(ApplicationId::new(1, 1), 1)
}

fn cid(seq: u64) -> ContainerId {
    ContainerId::new(attempt(), 0, seq)
}

#[derive(Default)]
struct Fake {
    registers: u32,
    allocates: u32,
}

type Shared = Arc<Mutex<Fake>>;

async fn register(State(s): State<Shared>) -> Response {
    s.lock().expect("fake").registers += 1;
    Json(RegisterApplicationMasterResponse {
        maximum_resource_capability: ResourceInfo::from(&Resource::new(8192, 4)),
        queue: "default".into(),
        ..Default::default()
    })
    .into_response()
}

fn done(seq: u64) -> ContainerStatus {
    ContainerStatus {
        container_id: cid(seq),
        state: ContainerState::COMPLETE,
        exit_status: 0,
        diagnostics: String::new(),
        gang_id: None,
    }
}

/// Call 1: container 2 completed. Call 2: the RM has restarted and does not know the AM as
/// registered. Call 3 (after the SDK registered again): containers 2 (re-delivered) and 3.
async fn allocate(State(s): State<Shared>) -> Response {
    let mut f = s.lock().expect("fake");
    f.allocates += 1;
    let completed = match f.allocates {
        1 => vec![done(2)],
        2 => {
            let mut body = ExceptionKind::Conflict.body("AM is not registered");
            body.remote_exception.exception = "ApplicationMasterNotRegisteredException".into();
            return (StatusCode::CONFLICT, Json(body)).into_response();
        }
        3 => vec![done(2), done(3)],
        _ => vec![],
    };
    Json(AllocateResponse {
        completed_container_statuses: completed,
        ..Default::default()
    })
    .into_response()
}

fn completed(events: spindle_appmaster_sdk::amrm::AllocationEvents) -> Vec<ContainerId> {
    events
        .into_items()
        .filter_map(|e| match e {
            AllocationEvent::Completed(s) => Some(s.container_id),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_completion_re_delivered_after_an_rm_restart_is_passed_on_once() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let shared: Shared = Arc::default();
    let router = Router::new()
        .route("/ws/v1/am/register", post(register))
        .route("/ws/v1/am/allocate", post(allocate))
        .with_state(shared.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    let env = AmEnv {
        rm_address: RmAddress::parse(&addr).expect("address"),
        other_rms: Vec::new(),
        token: "amrm-token".into(),
        attempt_id: attempt(),
        container_id: cid(1),
    };
    let mut amrm = AmRmClient::new(AmClient::new(env).expect("client"));
    amrm.register("127.0.0.1", -1, "").await.expect("register");

    assert_eq!(completed(amrm.poll().await.expect("poll 1")), vec![cid(2)]);
    // The restarted RM: the SDK registers again and hears nothing this time.
    assert!(completed(amrm.poll().await.expect("poll 2")).is_empty());
    assert_eq!(shared.lock().expect("fake").registers, 2);
    // Container 2 again (dropped) and container 3 (new).
    assert_eq!(completed(amrm.poll().await.expect("poll 3")), vec![cid(3)]);
}
