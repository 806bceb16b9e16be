//! Two RMs' blob stores in-process: the active's pushes land in the peer's store, unsigned
//! or foreign pushes are refused, a peer that was down catches up on the retry.

use std::path::Path;

use futures::stream;
use spindle_common::config::{keys, Configuration};

use super::*;
use crate::blobs::Upload;

/// The configuration of `rm_id` in a two-RM cluster whose `rm2` listens on `rm2_port`,
/// with the secret file `secret` and the blob store under `dir`.
fn conf(rm_id: &str, rm2_port: u16, secret: &Path, dir: &Path) -> RmConfig {
    let mut c = Configuration::new();
    c.set(keys::RM_HA_ENABLED, "true");
    c.set(keys::RM_HA_RM_IDS, "rm1,rm2");
    c.set(keys::RM_HA_ID, rm_id);
    c.set(&format!("{}.rm1", keys::RM_WEBAPP_ADDRESS), "127.0.0.1:1");
    c.set(
        &format!("{}.rm2", keys::RM_WEBAPP_ADDRESS),
        &format!("127.0.0.1:{rm2_port}"),
    );
    c.set(keys::SPINDLE_HA_ETCD_ENDPOINTS, "http://127.0.0.1:2");
    c.set(keys::CLUSTER_SECRET_FILE, &secret.display().to_string());
    c.set(
        keys::SPINDLE_RM_BLOB_STORE_DIR,
        &dir.join(rm_id).display().to_string(),
    );
    RmConfig::from_conf(&c).unwrap()
}

/// Serves `rm2`'s receiving routes on `listener`.
fn serve_rm2(conf: &RmConfig, listener: std::net::TcpListener) -> Arc<BlobStore> {
    let store = Arc::new(BlobStore::open(conf.blobs.clone()).unwrap());
    let router = crate::rest::blob_replicas::routes(conf, store.clone());
    listener.set_nonblocking(true).unwrap();
    let l = tokio::net::TcpListener::from_std(listener).unwrap();
    tokio::spawn(async move { axum::serve(l, router).await });
    store
}

async fn put(store: &BlobStore, bytes: &[u8], app: ApplicationId) -> BlobUse {
    let digest = Digest::of(bytes);
    let up = Upload {
        digest: digest.clone(),
        user: "alice".into(),
        app,
        declared_len: Some(bytes.len() as u64),
    };
    let body = stream::iter([Ok::<_, std::io::Error>(bytes.to_vec())]);
    store.put(up, body, 1).await.unwrap();
    BlobUse {
        digest,
        user: "alice".into(),
        app,
    }
}

fn app(n: u32) -> ApplicationId {
    format!("application_1_{n:04}").parse().unwrap()
}

struct Pair {
    _dir: tempfile::TempDir,
    rm1: RmConfig,
    rm2: RmConfig,
    port: u16,
}

fn pair() -> Pair {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    ClusterSecret::generate_file(&secret).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    Pair {
        rm1: conf("rm1", port, &secret, dir.path()),
        rm2: conf("rm2", port, &secret, dir.path()),
        port,
        _dir: dir,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_active_copies_blobs_and_uses_to_the_peer_before_answering() {
    let p = pair();
    let l = std::net::TcpListener::bind(("127.0.0.1", p.port)).unwrap();
    let rm2 = serve_rm2(&p.rm2, l);
    let store1 = BlobStore::open(p.rm1.blobs.clone()).unwrap();
    let replicas = BlobReplicas::from_conf(&p.rm1, reqwest::Client::new()).unwrap();
    let bytes = b"a shipped file".repeat(50_000);
    let first = put(&store1, &bytes, app(1)).await;
    let (ok, failed) = replicas.replicate(&store1, &first).await;
    assert_eq!((ok, failed), (vec!["rm2".to_string()], vec![]));
    assert_eq!(
        rm2.size_for_app(&first.digest, &app(1)).unwrap(),
        Some(bytes.len() as u64)
    );
    assert_eq!(std::fs::read(rm2.path_of(&first.digest)).unwrap(), bytes);
    // Another application of the same user: a claim on the peer, the use recorded.
    let second = BlobUse {
        app: app(2),
        ..first.clone()
    };
    store1.claim(&second.digest, "alice", &app(2), 2).unwrap();
    let (ok, _) = replicas.replicate(&store1, &second).await;
    assert_eq!(ok, ["rm2"]);
    assert!(rm2.size_for_app(&first.digest, &app(2)).unwrap().is_some());
    assert_eq!(replicas.pending(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushes_unsigned_or_from_no_peer_are_refused_and_store_nothing() {
    let p = pair();
    let l = std::net::TcpListener::bind(("127.0.0.1", p.port)).unwrap();
    let rm2 = serve_rm2(&p.rm2, l);
    let bytes = b"hostile".to_vec();
    let d = Digest::of(&bytes);
    let path = format!("{PEER_BLOBS_PATH}/{d}?applicationId={}&user=alice", app(1));
    let url = format!("http://127.0.0.1:{}{path}", p.port);
    let http = reqwest::Client::new();
    let unsigned = http.put(&url).body(bytes.clone()).send().await.unwrap();
    assert_eq!(unsigned.status(), 401);
    let text = unsigned.text().await.unwrap();
    assert!(text.contains("SpindleNode"), "{text}");
    // Signed with the right secret, but by rm2 itself: not another RM.
    let secret = p.rm2.cluster_secret.clone().unwrap();
    let sig = secret.sign(
        "PUT",
        &path,
        "rm2",
        b"",
        spindle_common::time::now_ms(),
        [1; 16],
    );
    let own = http
        .put(&url)
        .header("Authorization", sig)
        .body(bytes.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(own.status(), 401);
    assert!(own
        .text()
        .await
        .unwrap()
        .contains("not another ResourceManager"));
    // Signed by rm1 with another secret.
    let other = ClusterSecret::from_bytes(&[9u8; 32]).unwrap();
    let sig = other.sign(
        "PUT",
        &path,
        "rm1",
        b"",
        spindle_common::time::now_ms(),
        [2; 16],
    );
    let forged = http
        .put(&url)
        .header("Authorization", sig)
        .body(bytes.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 401);
    assert!(rm2.size_for_app(&d, &app(1)).unwrap().is_none());
    assert!(!rm2.path_of(&d).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_was_down_catches_up_on_the_retry() {
    let p = pair();
    let store1 = BlobStore::open(p.rm1.blobs.clone()).unwrap();
    let replicas = BlobReplicas::from_conf(&p.rm1, reqwest::Client::new()).unwrap();
    let blob = put(&store1, b"while rm2 was down", app(3)).await;
    // Nothing listens on rm2's port: the upload is not failed, the push waits.
    let (ok, failed) = replicas.replicate(&store1, &blob).await;
    assert!(ok.is_empty());
    assert_eq!(failed, ["rm2"]);
    assert_eq!(replicas.pending(), 1);
    let l = std::net::TcpListener::bind(("127.0.0.1", p.port)).unwrap();
    let rm2 = serve_rm2(&p.rm2, l);
    replicas.retry(&store1).await;
    assert_eq!(replicas.pending(), 0);
    assert!(rm2.size_for_app(&blob.digest, &app(3)).unwrap().is_some());
}
