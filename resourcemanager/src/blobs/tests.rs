use std::time::Duration;

use super::*;

fn conf(dir: &Path) -> BlobStoreConfig {
    BlobStoreConfig {
        dir: dir.join("blobs"),
        max_file_bytes: 1000,
        max_user_bytes: 1500,
        retention: Duration::from_millis(100),
        cleaner_interval: Duration::from_millis(50),
    }
}

fn app(n: u32) -> ApplicationId {
    format!("application_1_{n:04}").parse().unwrap()
}

fn upload(bytes: &[u8], user: &str, a: u32) -> Upload {
    Upload {
        digest: Digest::of(bytes),
        user: user.into(),
        app: app(a),
        declared_len: Some(bytes.len() as u64),
    }
}

fn body(bytes: &[u8]) -> impl Stream<Item = Result<Vec<u8>, String>> + Unpin {
    // In small chunks: the store never sees the whole body at once.
    let chunks: Vec<Result<Vec<u8>, String>> = bytes.chunks(7).map(|c| Ok(c.to_vec())).collect();
    futures::stream::iter(chunks)
}

#[tokio::test]
async fn uploads_are_stored_once_claimed_by_holders_only_and_survive_a_reopen() {
    let d = tempfile::tempdir().unwrap();
    let s = BlobStore::open(conf(d.path())).unwrap();
    let data = b"print('hello')\n".repeat(3);
    let up = upload(&data, "alice", 1);
    let digest = up.digest.clone();
    assert_eq!(
        s.put(up.clone(), body(&data), 10).await.unwrap(),
        Stored::New {
            size: data.len() as u64
        }
    );
    assert_eq!(std::fs::read(s.path_of(&digest)).unwrap(), data);
    // Alice may claim it for another application; Bob, who only knows the digest, may not.
    assert_eq!(
        s.claim(&digest, "alice", &app(2), 11).unwrap(),
        data.len() as u64
    );
    assert!(matches!(
        s.claim(&digest, "bob", &app(3), 11),
        Err(BlobError::NotFound(_))
    ));
    assert_eq!(s.size_for_user(&digest, "bob").unwrap(), None);
    assert_eq!(
        s.size_for_app(&digest, &app(2)).unwrap(),
        Some(data.len() as u64)
    );
    assert_eq!(s.size_for_app(&digest, &app(3)).unwrap(), None);
    // Bob proves he holds the bytes by sending them: stored once, now his too.
    assert_eq!(
        s.put(upload(&data, "bob", 3), body(&data), 12)
            .await
            .unwrap(),
        Stored::Existed {
            size: data.len() as u64
        }
    );
    assert!(s.size_for_app(&digest, &app(3)).unwrap().is_some());
    drop(s);
    let s = BlobStore::open(conf(d.path())).unwrap();
    assert!(s.size_for_user(&digest, "bob").unwrap().is_some());
    let (mut f, len) = s.open_blob(&digest).unwrap();
    let mut back = Vec::new();
    std::io::Read::read_to_end(&mut f, &mut back).unwrap();
    assert_eq!((back, len), (data.clone(), data.len() as u64));
}

#[tokio::test]
async fn refusals_are_named_and_store_nothing() {
    let d = tempfile::tempdir().unwrap();
    let s = BlobStore::open(conf(d.path())).unwrap();
    let big = vec![7u8; 1001];
    let e = s
        .put(upload(&big, "alice", 1), body(&big), 1)
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            BlobError::FileTooLarge {
                size: 1001,
                limit: 1000
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("spindle.resourcemanager.blob-store.max-file-bytes=1000"),
        "{e}"
    );
    // Without a declared length, the stream is cut at the limit.
    let mut up = upload(&big, "alice", 1);
    up.declared_len = None;
    let e = s.put(up, body(&big), 1).await.unwrap_err();
    assert!(
        matches!(e, BlobError::StreamTooLarge { limit: 1000 }),
        "{e}"
    );
    // A digest that is not the bytes'.
    let mut up = upload(b"abc", "alice", 1);
    up.digest = Digest::of(b"abd");
    let e = s.put(up, body(b"abc"), 1).await.unwrap_err();
    assert!(matches!(e, BlobError::DigestMismatch { .. }), "{e}");
    // The user limit: 900 + 700 > 1500.
    let a = vec![1u8; 900];
    let b = vec![2u8; 700];
    s.put(upload(&a, "alice", 1), body(&a), 1).await.unwrap();
    let e = s
        .put(upload(&b, "alice", 1), body(&b), 1)
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            BlobError::UserLimit {
                held: 900,
                size: 700,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("spindle.resourcemanager.blob-store.max-user-bytes=1500"),
        "{e}"
    );
    // Another user is not charged for Alice's bytes.
    s.put(upload(&b, "bob", 2), body(&b), 1).await.unwrap();
    // Nothing refused was kept, and no temp file is left.
    let files = std::fs::read_dir(d.path().join("blobs/sha256"))
        .unwrap()
        .count();
    assert_eq!(files, 2);
    assert_eq!(
        std::fs::read_dir(d.path().join("blobs/tmp"))
            .unwrap()
            .count(),
        0
    );
}

#[tokio::test]
async fn a_blob_goes_when_its_last_application_ended_and_retention_passed() {
    let d = tempfile::tempdir().unwrap();
    let s = BlobStore::open(conf(d.path())).unwrap();
    let data = b"x".to_vec();
    let digest = Digest::of(&data);
    s.put(upload(&data, "alice", 1), body(&data), 1000)
        .await
        .unwrap();
    s.claim(&digest, "alice", &app(2), 1000).unwrap();
    let live_2 = |a: &ApplicationId| {
        if *a == app(2) {
            AppEnd::Live
        } else {
            AppEnd::Ended(1050)
        }
    };
    // Application 2 still runs: kept long after.
    assert!(s.sweep(10_000, live_2).unwrap().is_empty());
    // Both ended, 2 at 5000: kept until 5000 + retention.
    let ended = |a: &ApplicationId| AppEnd::Ended(if *a == app(2) { 5000 } else { 1050 });
    assert!(s.sweep(5050, ended).unwrap().is_empty());
    assert_eq!(s.sweep(5100, ended).unwrap(), vec![digest.clone()]);
    assert!(!s.path_of(&digest).exists());
    assert_eq!(s.size_for_user(&digest, "alice").unwrap(), None);
    // A blob only unknown applications claimed goes a retention after its claim.
    s.put(upload(&data, "alice", 9), body(&data), 20_000)
        .await
        .unwrap();
    let unknown = |_: &ApplicationId| AppEnd::Unknown;
    assert!(s.sweep(20_099, unknown).unwrap().is_empty());
    assert_eq!(s.sweep(20_100, unknown).unwrap().len(), 1);
}

#[tokio::test]
async fn records_and_files_that_lost_each_other_are_dropped_at_open() {
    let d = tempfile::tempdir().unwrap();
    let s = BlobStore::open(conf(d.path())).unwrap();
    let data = b"y".to_vec();
    let digest = Digest::of(&data);
    s.put(upload(&data, "alice", 1), body(&data), 1)
        .await
        .unwrap();
    drop(s);
    std::fs::remove_file(d.path().join("blobs/sha256").join(digest.hex())).unwrap();
    let stray = d.path().join("blobs/sha256").join(Digest::of(b"z").hex());
    std::fs::write(&stray, "z").unwrap();
    std::fs::write(d.path().join("blobs/tmp/x.part"), "partial").unwrap();
    let s = BlobStore::open(conf(d.path())).unwrap();
    assert_eq!(s.size_for_user(&digest, "alice").unwrap(), None);
    assert!(!stray.exists());
    assert_eq!(
        std::fs::read_dir(d.path().join("blobs/tmp"))
            .unwrap()
            .count(),
        0
    );
}
