//! Container tokens and the calls that act on containers, on an in-process NM against a fake
//! RM: the NM checks a start token with the master key it names (current or previous, as the
//! RM rolls them), refuses forged and tampered tokens, and refuses stop, release, signal,
//! re-initialize and update without the owning application's container token (401) or with
//! another application's (403), leaving the container running.

mod support;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::json;
use spindle_common::records::node::{ContainerLaunchContext, StartContainerRequest};
use spindle_common::states::ContainerState;
use spindle_common::token::{issue_container_token, unverified_container_identifier, ContainerKey};
use support::*;

fn sleeper(token: String) -> StartContainerRequest {
    StartContainerRequest {
        container_token: token,
        container_launch_context: ContainerLaunchContext {
            commands: vec!["sleep 30".into()],
            ..Default::default()
        },
    }
}

/// `token` with its identifier changed by `f` and the signature kept.
fn tampered(token: &str, f: impl FnOnce(&mut serde_json::Value)) -> String {
    let ident = unverified_container_identifier(token).unwrap();
    let mut v = serde_json::to_value(&ident).unwrap();
    f(&mut v);
    let sig = token.split_once('.').unwrap().1;
    format!(
        "{}.{sig}",
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&v).unwrap())
    )
}

async fn state_of(nm: &TestNm, id: &spindle_common::ids::ContainerId) -> String {
    let (_, c) = nm.get_json(&format!("/ws/v1/node/containers/{id}")).await;
    c["container"]["state"].as_str().unwrap_or("").to_string()
}

#[tokio::test]
async fn forged_and_tampered_tokens_start_nothing() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let mut nm = TestNm::start(dirs.path(), rm.addr, false).await;
    rm.wait_registered(1).await;

    let good = rm.token(&nm.ident(cid(1, 1), "alice"));
    let forged = issue_container_token(
        &ContainerKey::generate(rm.key.id()).unwrap(),
        &nm.ident(cid(1, 2), "alice"),
    );
    let as_root = tampered(&rm.token(&nm.ident(cid(1, 3), "alice")), |v| {
        v["appSubmitter"] = json!("root")
    });
    let bigger = tampered(&rm.token(&nm.ident(cid(1, 4), "alice")), |v| {
        v["resource"]["memory"] = json!(1_000_000)
    });
    let other_key_id = tampered(&rm.token(&nm.ident(cid(1, 5), "alice")), |v| {
        v["masterKeyId"] = json!(rm.key.id().wrapping_add(7))
    });
    let resp = nm
        .start_containers(vec![
            sleeper(good),
            sleeper(forged),
            sleeper(as_root),
            sleeper(bigger),
            sleeper(other_key_id),
        ])
        .await;
    assert_eq!(resp.successfully_started_containers, vec![cid(1, 1)]);
    assert_eq!(resp.failed_requests.len(), 4, "{resp:?}");
    for f in &resp.failed_requests {
        assert_eq!(f.exception, "InvalidToken", "{f:?}");
    }
    let msgs: Vec<&str> = resp
        .failed_requests
        .iter()
        .map(|f| f.message.as_str())
        .collect();
    assert!(msgs[0].contains("signature does not verify"), "{msgs:?}");
    assert!(msgs[1].contains("signature does not verify"), "{msgs:?}");
    assert!(msgs[2].contains("signature does not verify"), "{msgs:?}");
    assert!(msgs[3].contains("not held"), "{msgs:?}");
    for seq in 2..=5 {
        let (status, _) = nm
            .get(&format!("/ws/v1/node/containers/{}", cid(1, seq)))
            .await;
        assert_eq!(status, 404, "a refused start left container {seq} behind");
    }
    nm.stop().await.unwrap();
}

#[tokio::test]
async fn rolled_keys_previous_accepted_older_refused() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let mut nm = TestNm::start(dirs.path(), rm.addr, false).await;
    rm.wait_registered(1).await;
    let k1 = rm.key.clone();
    let k2 = ContainerKey::generate(k1.id().wrapping_add(1)).unwrap();
    let k3 = ContainerKey::generate(k1.id().wrapping_add(2)).unwrap();
    let token = |k: &ContainerKey, seq| issue_container_token(k, &nm.ident(cid(2, seq), "alice"));

    // Before the roll the NM knows only k1.
    let early = token(&k1, 1);
    let r = nm.start_containers(vec![sleeper(early.clone())]).await;
    assert_eq!(r.successfully_started_containers, vec![cid(2, 1)], "{r:?}");
    let r = nm.start_containers(vec![sleeper(token(&k2, 2))]).await;
    assert!(r.failed_requests[0].message.contains("not held"), "{r:?}");

    // The RM rolls to k2: heartbeats name the key the NM holds; the answer carries k2.
    let last_known = |st: &RmState| {
        st.heartbeats
            .last()
            .and_then(|h| h.last_known_container_token_master_key.as_ref())
            .map(|k| k.key_id)
    };
    wait_until("a heartbeat naming k1", || {
        (last_known(&rm.state.lock().unwrap()) == Some(k1.id())).then_some(())
    })
    .await;
    rm.state.lock().unwrap().roll_key = Some(k2.clone());
    wait_until("a heartbeat naming k2", || {
        (last_known(&rm.state.lock().unwrap()) == Some(k2.id())).then_some(())
    })
    .await;
    let r = nm
        .start_containers(vec![sleeper(token(&k2, 3)), sleeper(token(&k1, 4))])
        .await;
    assert_eq!(
        r.successfully_started_containers,
        vec![cid(2, 3), cid(2, 4)],
        "the new key and the previous one both start: {r:?}"
    );

    // A second roll: k1 is two keys old and refused.
    rm.state.lock().unwrap().roll_key = Some(k3.clone());
    wait_until("a heartbeat naming k3", || {
        (last_known(&rm.state.lock().unwrap()) == Some(k3.id())).then_some(())
    })
    .await;
    let r = nm
        .start_containers(vec![sleeper(token(&k1, 5)), sleeper(token(&k2, 6))])
        .await;
    assert_eq!(r.successfully_started_containers, vec![cid(2, 6)], "{r:?}");
    assert!(r.failed_requests[0].message.contains("not held"), "{r:?}");

    // The start token of container 1 (signed by k1, now rolled out) still stops it: the NM
    // verified that very token at the start.
    let stop = json!({"containerIds": [cid(2, 1).to_string()]});
    let (status, body) = nm
        .post_json_as(
            "/ws/v1/node/containers/stop",
            &stop,
            Some(&format!("Bearer {early}")),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["successfullyStoppedContainers"][0],
        cid(2, 1).to_string()
    );
    // Another token signed by k1 is no longer proof of anything.
    let (status, body) = nm
        .post_json_as(
            "/ws/v1/node/containers/stop",
            &json!({"containerIds": [cid(2, 3).to_string()]}),
            Some(&format!("Bearer {}", token(&k1, 9))),
        )
        .await;
    assert_eq!(status, 401, "{body}");
    nm.stop().await.unwrap();
}

#[tokio::test]
async fn container_calls_need_the_owning_applications_token() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let mut nm = TestNm::start(dirs.path(), rm.addr, false).await;
    rm.wait_registered(1).await;

    let x = cid(3, 1);
    nm.run_container(&rm, x, "alice", "sleep 30").await;
    rm.wait_state(&x, ContainerState::RUNNING).await;
    // The RM hears RUNNING from acceptance on; the NM's own state leaves LOCALIZING once
    // the process runs (later on a busy machine).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while state_of(&nm, &x).await != "RUNNING" {
        assert!(std::time::Instant::now() < deadline, "{x} never ran");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let x_token = format!("Bearer {}", rm.token(&nm.ident(cid(3, 2), "alice")));
    let y_token = format!("Bearer {}", rm.token(&nm.ident(cid(4, 1), "mallory")));
    let forged_x = format!(
        "Bearer {}",
        issue_container_token(
            &ContainerKey::generate(rm.key.id()).unwrap(),
            &nm.ident(cid(3, 3), "mallory"),
        )
    );
    let mut elsewhere = nm.ident(cid(3, 4), "mallory");
    elsewhere.node_id.port = elsewhere.node_id.port.wrapping_add(1);
    let other_node = format!("Bearer {}", rm.token(&elsewhere));
    let update_token = {
        let mut i = nm.ident(x, "alice");
        i.version = 1;
        rm.token(&i)
    };
    let calls: Vec<(&str, serde_json::Value)> = vec![
        ("stop", json!({"containerIds": [x.to_string()]})),
        ("release", json!({"containerIds": [x.to_string()]})),
        (
            "signal",
            json!({"containerId": x.to_string(), "command": "OUTPUT_THREAD_DUMP"}),
        ),
        (
            "reinitialize",
            json!({"containerId": x.to_string(), "containerLaunchContext": {"commands": ["true"]}}),
        ),
        ("update", json!({"containersToUpdate": [update_token]})),
    ];
    for (call, body) in &calls {
        let path = format!("/ws/v1/node/containers/{call}");
        for (auth, want, exception) in [
            (None, 401, "AuthorizationException"),
            (Some("Basic YWxpY2U6eA=="), 401, "AuthorizationException"),
            (Some("Bearer garbage"), 401, "AuthorizationException"),
            (Some(forged_x.as_str()), 401, "AuthorizationException"),
            (Some(other_node.as_str()), 401, "AuthorizationException"),
            (Some(y_token.as_str()), 403, "ForbiddenException"),
        ] {
            let (status, v) = nm.post_json_as(&path, body, auth).await;
            assert_eq!(status, want, "{call} with {auth:?}: {v}");
            assert_eq!(v["RemoteException"]["exception"], exception, "{v}");
            assert_eq!(state_of(&nm, &x).await, "RUNNING", "{call} with {auth:?}");
        }
    }
    let (_, v) = nm
        .post_json_as("/ws/v1/node/containers/stop", &calls[0].1, Some(&y_token))
        .await;
    let msg = v["RemoteException"]["message"].as_str().unwrap();
    assert!(
        msg.contains(&x.application_id().to_string())
            && msg.contains(&cid(4, 1).application_id().to_string()),
        "{msg}"
    );
    // A call naming containers of two applications needs one token for both: refused.
    let (status, _) = nm
        .post_json_as(
            "/ws/v1/node/containers/stop",
            &json!({"containerIds": [x.to_string(), cid(4, 1).to_string()]}),
            Some(&x_token),
        )
        .await;
    assert_eq!(status, 403);
    assert_eq!(state_of(&nm, &x).await, "RUNNING");

    // The owner's token (of another of its containers, expired or not) stops it.
    let mut expired = nm.ident(cid(3, 5), "alice");
    expired.expiry_time_ms = 1;
    let (status, v) = nm
        .post_json_as(
            "/ws/v1/node/containers/stop",
            &calls[0].1,
            Some(&format!("Bearer {}", rm.token(&expired))),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["successfullyStoppedContainers"][0], x.to_string());
    rm.wait_state(&x, ContainerState::COMPLETE).await;
    nm.stop().await.unwrap();
}
