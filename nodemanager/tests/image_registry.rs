//! The image store against a real registry: Debian's `docker-registry` started on
//! 127.0.0.1 with an ephemeral port and its own storage, holding an image the test builds
//! (busybox-static and an `/etc/os-release` of its own, packed with `umoci`, pushed with
//! `skopeo`). Pulled as an insecure registry: the layers hold the image's os-release, a
//! second ensure fetches nothing, concurrent ensures fetch once, a corrupted blob in the
//! registry's storage is a digest mismatch, and a refused credential, an unreachable port
//! and a missing repository each give their own error. The same image imports from its
//! `oci:` layout without any registry.
//!
//! Skipped with a printed reason when a tool is missing; under CI=true that is a failure.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use spindle_nodemanager::image::{
    BlobKind, ImageError, ImageRef, ImageStore, ImageStoreConfig, PullPhase, PullProgress,
};
use spindle_test_support::images::{build_image, free_port, tools_present, Registry};

fn store(dir: &Path, name: &str, insecure: &[String], auth_file: Option<PathBuf>) -> ImageStore {
    ImageStore::open(ImageStoreConfig {
        local_image_dirs: Vec::new(),
        cache_dir: dir.join(name),
        max_bytes: 1 << 30,
        insecure_registries: insecure.to_vec(),
        auth_file,
    })
    .unwrap()
}

fn quiet(_: &PullProgress) {}

fn os_release(h: &spindle_nodemanager::image::ImageHandle) -> String {
    h.layers()
        .iter()
        .rev()
        .find_map(|l| std::fs::read_to_string(l.join("etc/os-release")).ok())
        .expect("an os-release in the layers")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pulls_through_a_local_registry() {
    if !tools_present("image_registry") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let layout = build_image(tmp.path());
    let reg = Registry::start(tmp.path());
    reg.push(&layout, tmp.path(), "spindle/busybox:1");
    let insecure = vec![reg.host()];
    let r: ImageRef = format!("{}/spindle/busybox:1", reg.host()).parse().unwrap();

    // Four containers at once: one download of the config and the layer.
    let s = store(tmp.path(), "cache", &insecure, None);
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let s2 = seen.clone();
    let record = move |p: &PullProgress| {
        if p.phase == PullPhase::Downloading {
            s2.lock().unwrap().push(p.to_string());
        }
    };
    let all = futures::future::join_all((0..4).map(|_| s.ensure(&r, &record))).await;
    let handles: Vec<_> = all.into_iter().map(Result::unwrap).collect();
    assert_eq!(s.blobs_fetched(), 2, "config and one layer, fetched once");
    assert!(os_release(&handles[0]).contains("ID=spindle-test"));
    assert_eq!(handles[0].config().cmd, vec!["/bin/sh"]);
    assert!(handles[0].layers()[0].join("bin/busybox").is_file());
    let progress = seen.lock().unwrap().clone();
    let prefix = format!("pulling {r}: ");
    assert!(
        progress
            .iter()
            .any(|p| p.starts_with(&prefix) && p.ends_with(" MB")),
        "{progress:?}"
    );

    // A second ensure pulls nothing; the cache lists the image as in use.
    drop(s.ensure(&r, &quiet).await.unwrap());
    assert_eq!(s.blobs_fetched(), 2);
    let cached = s.cached();
    assert_eq!(cached.len(), 1);
    assert!(cached[0].in_use);
    assert_eq!(cached[0].names, vec![r.to_string()]);

    // By digest too (the manifest's), from the same cache after a restart of the store.
    let digest = handles[0].digest().clone();
    drop(handles);
    drop(s);
    let s = store(tmp.path(), "cache", &insecure, None);
    let by_digest: ImageRef = format!("{}/spindle/busybox@{digest}", reg.host())
        .parse()
        .unwrap();
    let h = s.ensure(&by_digest, &quiet).await.unwrap();
    assert_eq!(h.digest(), &digest);
    assert_eq!(
        s.blobs_fetched(),
        1,
        "only the config: the layer is already unpacked"
    );

    // Errors, each its own.
    let missing: ImageRef = format!("{}/spindle/nothing:1", reg.host()).parse().unwrap();
    let e = s.ensure(&missing, &quiet).await.unwrap_err();
    assert!(matches!(e, ImageError::NotFound { .. }), "{e}");
    let closed: ImageRef = format!("127.0.0.1:{}/spindle/busybox:1", free_port())
        .parse()
        .unwrap();
    let e = store(
        tmp.path(),
        "c2",
        &[closed.registry().unwrap().to_string()],
        None,
    )
    .ensure(&closed, &quiet)
    .await
    .unwrap_err();
    assert!(matches!(e, ImageError::RegistryUnreachable { .. }), "{e}");
    // Not listed as insecure: HTTPS to a plain-HTTP registry never succeeds.
    let e = store(tmp.path(), "c3", &[], None)
        .ensure(&r, &quiet)
        .await
        .unwrap_err();
    assert!(matches!(e, ImageError::RegistryUnreachable { .. }), "{e}");

    // A corrupted layer in the registry's storage: a digest mismatch, nothing kept.
    let layer_hex = h.layers()[0]
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let data = reg.blob_data(&layer_hex);
    let mut bytes = std::fs::read(&data).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&data, bytes).unwrap();
    let fresh = store(tmp.path(), "c4", &insecure, None);
    let e = fresh.ensure(&r, &quiet).await.unwrap_err();
    assert!(
        matches!(
            e,
            ImageError::DigestMismatch {
                kind: BlobKind::Layer,
                ..
            }
        ),
        "{e}"
    );
    assert!(fresh.cached().is_empty());
    assert_eq!(
        std::fs::read_dir(tmp.path().join("c4/layers"))
            .unwrap()
            .count(),
        0
    );
    assert_eq!(
        std::fs::read_dir(tmp.path().join("c4/tmp"))
            .unwrap()
            .count(),
        0
    );

    // The same image from its OCI layout, no registry involved.
    let local: ImageRef = format!("oci:{}:1", layout.display()).parse().unwrap();
    let h = store(tmp.path(), "c5", &[], None)
        .ensure(&local, &quiet)
        .await
        .unwrap();
    assert_eq!(h.digest(), &digest);
    assert!(os_release(&h).contains("ID=spindle-test"));
}

/// A registry that refuses every credential (`401` with a Basic challenge, as
/// `docker-registry` with htpasswd answers a wrong password).
async fn refusing_registry() -> (String, tokio::task::JoinHandle<()>) {
    use axum::http::{header, StatusCode};
    let app = axum::Router::new().fallback(|| async {
        (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Basic realm=\"spindle-test\"")],
            r#"{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}"#,
        )
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (addr.to_string(), task)
}

#[tokio::test]
async fn a_refused_credential_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let (host, server) = refusing_registry().await;
    let auth = tmp.path().join("config.json");
    std::fs::write(
        &auth,
        format!(r#"{{"auths":{{"{host}":{{"username":"alice","password":"wrong"}}}}}}"#),
    )
    .unwrap();
    let r: ImageRef = format!("{host}/spindle/busybox:1").parse().unwrap();
    let s = store(tmp.path(), "cache", std::slice::from_ref(&host), Some(auth));
    let e = s.ensure(&r, &quiet).await.unwrap_err();
    assert!(
        matches!(e, ImageError::CredentialsRefused { status: 401, .. }),
        "{e}"
    );
    server.abort();
}
