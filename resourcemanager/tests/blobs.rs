//! Integration test of the blob store's routes: the RM in-process on an ephemeral port, a
//! fake NM receiving the AM launch (its container token is the application's credential).
//! Upload (streamed in chunks), the claim that skips an upload, existence, download, the
//! NM's download with a container token, refusals: a caller without rights, no or a foreign
//! token, a file or user over its limit (413 naming the key), a digest that is not the
//! bytes' (400); the counters in `/metrics`; the records surviving a restart.

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};
use support::{fake_nm, start_rm_with, Rm};

fn digest_of(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The value of the sample `name` in `/metrics`.
async fn counter(rm: &Rm, name: &str) -> f64 {
    let text = rm
        .http
        .get(format!("{}/metrics", rm.base))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("{name} not in /metrics"))
}

async fn put(rm: &Rm, path: &str, body: Vec<u8>) -> (u16, Value) {
    // A streamed body (no Content-Length): the RM counts it as it comes.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        body.chunks(4096).map(|c| Ok(c.to_vec())).collect();
    let r = rm
        .http
        .put(format!("{}{path}", rm.base))
        .body(reqwest::Body::wrap_stream(futures::stream::iter(chunks)))
        .send()
        .await
        .expect("put");
    let s = r.status().as_u16();
    (s, r.json().await.unwrap_or(Value::Null))
}

async fn status(rm: &Rm, req: reqwest::RequestBuilder) -> (u16, Vec<u8>) {
    let _ = rm;
    let r = req.send().await.expect("send");
    let s = r.status().as_u16();
    (s, r.bytes().await.expect("body").to_vec())
}

async fn new_app(rm: &Rm) -> String {
    let r: Value = rm
        .http
        .post(format!("{}/ws/v1/cluster/apps/new-application", rm.base))
        .send()
        .await
        .expect("new")
        .json()
        .await
        .expect("json");
    r["application-id"].as_str().expect("id").to_string()
}

async fn start(dir: &std::path::Path) -> Rm {
    let mut conf = spindle_common::config::Configuration::new();
    conf.set("yarn.scheduler.minimum-allocation-mb", "128");
    conf.set(
        "spindle.resourcemanager.state-store.path",
        &dir.join("rm.sqlite").display().to_string(),
    );
    conf.set(
        "spindle.resourcemanager.blob-store.max-file-bytes",
        "300000",
    );
    conf.set(
        "spindle.resourcemanager.blob-store.max-user-bytes",
        "400000",
    );
    start_rm_with(conf).await
}

#[tokio::test]
async fn blobs_are_uploaded_once_claimed_served_and_refused_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rm = start(dir.path()).await;
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let d = digest_of(&data);
    let app = new_app(&rm).await;
    let blob = format!("/ws/v1/cluster/blobs/{d}");

    // Asked first: not there (an upload of that size would fit).
    let (s, _) = status(
        &rm,
        rm.http.put(format!(
            "{}{blob}/apps/{app}?size={}&user.name=alice",
            rm.base,
            data.len()
        )),
    )
    .await;
    assert_eq!(s, 404);
    // Uploaded: 201, stored.
    let (s, v) = put(
        &rm,
        &format!("{blob}?applicationId={app}&user.name=alice"),
        data.clone(),
    )
    .await;
    assert_eq!(s, 201, "{v}");
    assert_eq!(v["blob"]["digest"], d.as_str());
    assert_eq!(v["blob"]["uploaded"], true);
    assert_eq!(
        counter(&rm, "spindle_rm_blob_uploaded_bytes_total").await,
        200_000.0
    );
    // The second application of the same user: the claim is enough, no bytes sent.
    let app2 = new_app(&rm).await;
    let (s, body) = status(
        &rm,
        rm.http.put(format!(
            "{}{blob}/apps/{app2}?size={}&user.name=alice",
            rm.base,
            data.len()
        )),
    )
    .await;
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(
        counter(&rm, "spindle_rm_blob_uploads_skipped_total").await,
        1.0
    );
    assert_eq!(
        counter(&rm, "spindle_rm_blob_uploaded_bytes_total").await,
        200_000.0
    );
    // Existence and download for the holder.
    let (s, _) = status(
        &rm,
        rm.http.head(format!("{}{blob}?user.name=alice", rm.base)),
    )
    .await;
    assert_eq!(s, 200);
    let (s, back) = status(
        &rm,
        rm.http.get(format!("{}{blob}?user.name=alice", rm.base)),
    )
    .await;
    assert_eq!((s, back.len()), (200, data.len()));
    assert_eq!(back, data);
    // Bob knows the digest, nothing more: no existence, no bytes, no claim.
    for req in [
        rm.http.head(format!("{}{blob}?user.name=bob", rm.base)),
        rm.http.get(format!("{}{blob}?user.name=bob", rm.base)),
        rm.http
            .put(format!("{}{blob}/apps/{app2}?user.name=bob", rm.base)),
    ] {
        let (s, body) = status(&rm, req).await;
        assert_eq!(s, 404, "{}", String::from_utf8_lossy(&body));
        assert!(!body.windows(4).any(|w| w == &data[..4]));
    }

    // Refusals by name.
    let big = vec![1u8; 300_001];
    let (s, body) = status(
        &rm,
        rm.http.put(format!(
            "{}/ws/v1/cluster/blobs/{}/apps/{app}?size={}&user.name=alice",
            rm.base,
            digest_of(&big),
            big.len()
        )),
    )
    .await;
    let text = String::from_utf8_lossy(&body);
    assert_eq!(s, 413, "{text}");
    assert!(
        text.contains("spindle.resourcemanager.blob-store.max-file-bytes=300000"),
        "{text}"
    );
    let (s, v) = put(
        &rm,
        &format!(
            "/ws/v1/cluster/blobs/{}?applicationId={app}&user.name=alice",
            digest_of(&big)
        ),
        big.clone(),
    )
    .await;
    assert_eq!(s, 413, "{v}");
    // Alice holds 200000 of 400000 bytes: another 250000 pass her limit.
    let more = vec![2u8; 250_000];
    let (s, v) = put(
        &rm,
        &format!(
            "/ws/v1/cluster/blobs/{}?applicationId={app}&user.name=alice",
            digest_of(&more)
        ),
        more.clone(),
    )
    .await;
    assert_eq!(s, 413, "{v}");
    let msg = v["RemoteException"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("spindle.resourcemanager.blob-store.max-user-bytes=400000"),
        "{v}"
    );
    // Bob may upload the same bytes (he proves he holds them).
    let (s, v) = put(
        &rm,
        &format!(
            "/ws/v1/cluster/blobs/{}?applicationId={app}&user.name=bob",
            digest_of(&more)
        ),
        more.clone(),
    )
    .await;
    assert_eq!(s, 201, "{v}");
    // The bytes are not the declared digest's: refused, nothing stored.
    let (s, v) = put(
        &rm,
        &format!("{blob}?applicationId={app}&user.name=carol"),
        b"not the same bytes".to_vec(),
    )
    .await;
    assert_eq!(s, 400, "{v}");
    let msg = v["RemoteException"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("not the declared"), "{v}");
    let (s, _) = status(
        &rm,
        rm.http.head(format!("{}{blob}?user.name=carol", rm.base)),
    )
    .await;
    assert_eq!(s, 404);
    // An application another user submitted is not Alice's to attach blobs to.
    submit(&rm, &app2, "dave").await;
    let (s, _) = status(
        &rm,
        rm.http
            .put(format!("{}{blob}/apps/{app2}?user.name=alice", rm.base)),
    )
    .await;
    assert_eq!(s, 403);

    // The records survive a restart.
    rm.shutdown().await;
    let rm = start(dir.path()).await;
    let (s, back) = status(
        &rm,
        rm.http.get(format!("{}{blob}?user.name=alice", rm.base)),
    )
    .await;
    assert_eq!((s, back == data), (200, true));
    rm.shutdown().await;
}

async fn submit(rm: &Rm, app: &str, user: &str) {
    let r = rm
        .http
        .post(format!("{}/ws/v1/cluster/apps?user.name={user}", rm.base))
        .json(
            &json!({"application-id": app, "application-name": "b", "queue": "default",
               "am-container-spec": {"commands": {"command": "./am"}},
               "resource": {"memory": 256, "vCores": 1}}),
        )
        .send()
        .await
        .expect("submit");
    assert_eq!(r.status().as_u16(), 202);
}

#[tokio::test]
async fn a_node_manager_downloads_with_the_applications_container_token_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rm = start(dir.path()).await;
    let (nm, launches) = fake_nm().await;
    let r = rm
        .http
        .post(format!("{}/ws/v1/node-tracker/register", rm.base))
        .json(&json!({"nodeId": nm, "httpAddress": nm, "nmVersion": "t",
                      "resource": {"memory": 8192, "vCores": 8}}))
        .send()
        .await
        .expect("register");
    assert_eq!(r.status().as_u16(), 200);
    let data = b"#!/bin/sh\necho shipped\n".to_vec();
    let d = digest_of(&data);
    let (app, other) = (new_app(&rm).await, new_app(&rm).await);
    let (s, v) = put(
        &rm,
        &format!("/ws/v1/cluster/blobs/{d}?applicationId={app}&user.name=alice"),
        data.clone(),
    )
    .await;
    assert_eq!(s, 201, "{v}");
    let other_data = b"other".to_vec();
    let (s, _) = put(
        &rm,
        &format!(
            "/ws/v1/cluster/blobs/{}?applicationId={other}&user.name=alice",
            digest_of(&other_data)
        ),
        other_data,
    )
    .await;
    assert_eq!(s, 201);
    submit(&rm, &app, "alice").await;
    let token = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let Some(l) = launches.lock().expect("lock").first() {
                return l.start_container_request[0].container_token.clone();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the AM launch");
    let url = |d: &str| format!("{}/ws/v1/localizer/blobs/{d}", rm.base);
    let (s, back) = status(&rm, rm.http.get(url(&d)).bearer_auth(&token)).await;
    assert_eq!((s, back), (200, data.clone()));
    // No token, a forged one: 401. The token of this application, a blob of another: 404.
    let (s, _) = status(&rm, rm.http.get(url(&d))).await;
    assert_eq!(s, 401);
    let (s, _) = status(&rm, rm.http.get(url(&d)).bearer_auth(format!("{token}x"))).await;
    assert_eq!(s, 401);
    let (s, _) = status(
        &rm,
        rm.http.get(url(&digest_of(b"other"))).bearer_auth(&token),
    )
    .await;
    assert_eq!(s, 404);
    // A user token path does not serve NMs, and the user route does not take container
    // tokens as users.
    let (s, _) = status(
        &rm,
        rm.http
            .get(format!("{}/ws/v1/cluster/blobs/{d}", rm.base))
            .bearer_auth(&token),
    )
    .await;
    assert_eq!(s, 404);
    assert!(counter(&rm, "spindle_rm_blob_downloaded_bytes_total").await >= data.len() as f64);
    rm.shutdown().await;
}
