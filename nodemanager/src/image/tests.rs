//! The store end to end on OCI layouts written by the tests (no registry): ensure, a second
//! ensure fetching nothing, single-flight, digest mismatch, pins against eviction, restart
//! cleanup, archives and multi-arch indexes. The registry path is in
//! `nodemanager/tests/image_registry.rs`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::*;

fn layer_tar(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        b.append_data(&mut h, name, *data).unwrap();
    }
    b.into_inner().unwrap()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn put_blob(layout: &Path, bytes: &[u8]) -> Digest {
    let d = Digest::of(bytes);
    std::fs::write(layout.join("blobs/sha256").join(d.hex()), bytes).unwrap();
    d
}

/// Writes (or adds to) an OCI layout at `layout` with one image tagged `tag` whose layers
/// hold `layers`' files; returns the manifest digest and the layer digests.
pub(super) fn write_layout(
    layout: &Path,
    tag: &str,
    layers: &[&[(&str, &[u8])]],
    multi_arch: bool,
) -> (Digest, Vec<Digest>) {
    std::fs::create_dir_all(layout.join("blobs/sha256")).unwrap();
    std::fs::write(
        layout.join("oci-layout"),
        r#"{"imageLayoutVersion":"1.0.0"}"#,
    )
    .unwrap();
    let mut descs = Vec::new();
    let mut diff_ids = Vec::new();
    let mut digests = Vec::new();
    for files in layers {
        let tar = layer_tar(files);
        diff_ids.push(format!("\"{}\"", Digest::of(&tar)));
        let gz = gzip(&tar);
        let d = put_blob(layout, &gz);
        descs.push(format!(
            r#"{{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"{d}","size":{}}}"#,
            gz.len()
        ));
        digests.push(d);
    }
    let config = format!(
        r#"{{"architecture":"amd64","os":"linux","config":{{"Env":["PATH=/bin","IMG={tag}"],"Cmd":["/bin/sh"],"WorkingDir":"/"}},"rootfs":{{"type":"layers","diff_ids":[{}]}}}}"#,
        diff_ids.join(",")
    );
    let cd = put_blob(layout, config.as_bytes());
    let manifest = format!(
        r#"{{"schemaVersion":2,"mediaType":"{}","config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"{cd}","size":{}}},"layers":[{}]}}"#,
        manifest::OCI_MANIFEST,
        config.len(),
        descs.join(",")
    );
    let md = put_blob(layout, manifest.as_bytes());
    let mut top = format!(
        r#"{{"mediaType":"{}","digest":"{md}","size":{}"#,
        manifest::OCI_MANIFEST,
        manifest.len()
    );
    if multi_arch {
        let other = format!("sha256:{}", "0".repeat(64));
        let index = format!(
            r#"{{"schemaVersion":2,"manifests":[{{"mediaType":"{m}","digest":"{other}","size":1,"platform":{{"os":"linux","architecture":"arm64"}}}},{{"mediaType":"{m}","digest":"{md}","size":{},"platform":{{"os":"linux","architecture":"amd64"}}}}]}}"#,
            manifest.len(),
            m = manifest::OCI_MANIFEST,
        );
        let id = put_blob(layout, index.as_bytes());
        top = format!(
            r#"{{"mediaType":"{}","digest":"{id}","size":{}"#,
            manifest::OCI_INDEX,
            index.len()
        );
    }
    let index_path = layout.join("index.json");
    let mut entries: Vec<String> = std::fs::read_to_string(&index_path)
        .ok()
        .and_then(|s| {
            let v: serde_json::Value = serde_json::from_str(&s).ok()?;
            Some(
                v["manifests"]
                    .as_array()?
                    .iter()
                    .map(|e| e.to_string())
                    .collect(),
            )
        })
        .unwrap_or_default();
    entries.push(format!(
        r#"{top},"annotations":{{"org.opencontainers.image.ref.name":"{tag}"}}}}"#
    ));
    std::fs::write(
        &index_path,
        format!(
            r#"{{"schemaVersion":2,"manifests":[{}]}}"#,
            entries.join(",")
        ),
    )
    .unwrap();
    (md, digests)
}

struct Env {
    tmp: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        Env {
            tmp: tempfile::tempdir().unwrap(),
        }
    }
    fn layout(&self) -> PathBuf {
        self.tmp.path().join("layout")
    }
    fn config(&self, max_bytes: u64) -> ImageStoreConfig {
        ImageStoreConfig {
            local_image_dirs: Vec::new(),
            cache_dir: self.tmp.path().join("cache"),
            max_bytes,
            insecure_registries: vec![],
            auth_file: None,
        }
    }
    fn store(&self, max_bytes: u64) -> ImageStore {
        ImageStore::open(self.config(max_bytes)).unwrap()
    }
    fn r(&self, tag: &str) -> ImageRef {
        format!("oci:{}:{tag}", self.layout().display())
            .parse()
            .unwrap()
    }
}

const GIB: u64 = 1 << 30;

fn quiet(_: &PullProgress) {}

fn read_in_layers(h: &ImageHandle, file: &str) -> Option<Vec<u8>> {
    h.layers()
        .iter()
        .rev()
        .find_map(|l| std::fs::read(l.join(file)).ok())
}

#[tokio::test]
async fn ensure_from_a_layout_then_again_fetches_nothing() {
    let env = Env::new();
    let (md, _) = write_layout(
        &env.layout(),
        "1",
        &[
            &[("etc/os-release", b"ID=lower\n")],
            &[("etc/os-release", b"ID=spindle-test\n"), ("bin/x", b"x")],
        ],
        false,
    );
    let store = env.store(GIB);
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let h = store
        .ensure(&env.r("1"), &move |p: &PullProgress| {
            s2.lock().unwrap().push(p.clone())
        })
        .await
        .unwrap();
    assert_eq!(h.digest(), &md);
    assert_eq!(h.layers().len(), 2);
    assert_eq!(
        read_in_layers(&h, "etc/os-release").unwrap(),
        b"ID=spindle-test\n"
    );
    assert!(h.config().env.contains(&"IMG=1".to_string()));
    assert_eq!(h.config().cmd, vec!["/bin/sh"]);
    let fetched = store.blobs_fetched();
    assert_eq!(fetched, 3, "config and two layers");
    let last = seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(last.phase, PullPhase::Done);
    assert_eq!(last.done_bytes, last.total_bytes);

    let h2 = store.ensure(&env.r("1"), &quiet).await.unwrap();
    assert_eq!(
        store.blobs_fetched(),
        fetched,
        "a cached image pulls nothing"
    );
    assert_eq!(h2.layers(), h.layers());
    let listed = store.cached();
    assert_eq!(listed.len(), 1);
    assert!(listed[0].in_use);
    assert_eq!(listed[0].names, vec![env.r("1").to_string()]);
    drop((h, h2));
    assert!(!store.cached()[0].in_use);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_ensures_pull_once() {
    let env = Env::new();
    write_layout(
        &env.layout(),
        "1",
        &[&[("big", &vec![7u8; 4 << 20])]],
        false,
    );
    let store = env.store(GIB);
    let r = env.r("1");
    let handles = futures::future::join_all((0..8).map(|_| store.ensure(&r, &quiet))).await;
    for h in &handles {
        assert!(h.is_ok(), "{h:?}");
    }
    assert_eq!(store.blobs_fetched(), 2, "one config and one layer, once");
}

#[tokio::test]
async fn a_corrupt_blob_is_a_digest_mismatch_and_is_not_kept() {
    let env = Env::new();
    let (_, layers) = write_layout(&env.layout(), "1", &[&[("f", b"hello")]], false);
    let blob = env.layout().join("blobs/sha256").join(layers[0].hex());
    let mut bytes = std::fs::read(&blob).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&blob, bytes).unwrap();
    let store = env.store(GIB);
    let e = store.ensure(&env.r("1"), &quiet).await.unwrap_err();
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
    let cache = env.tmp.path().join("cache");
    assert_eq!(std::fs::read_dir(cache.join("layers")).unwrap().count(), 0);
    assert_eq!(std::fs::read_dir(cache.join("tmp")).unwrap().count(), 0);
    assert!(store.cached().is_empty());
}

/// Five layers, the fourth the same blob as the second: fetched and unpacked several at a
/// time, they are still stacked in the manifest's order and the repeated one is fetched once.
const FIVE_LAYERS: [&[(&str, &[u8])]; 5] = [
    &[("f", b"0"), ("a", b"a")],
    &[("g", b"same")],
    &[("f", b"2")],
    &[("g", b"same")],
    &[("h", b"4")],
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn layers_pulled_together_stack_in_order_and_a_repeated_one_is_fetched_once() {
    let env = Env::new();
    let (_, digests) = write_layout(&env.layout(), "1", &FIVE_LAYERS, false);
    assert_eq!(digests[1], digests[3]);
    let store = env.store(GIB);
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let h = store
        .ensure(&env.r("1"), &move |p: &PullProgress| {
            s2.lock().unwrap().push(p.clone())
        })
        .await
        .unwrap();
    let dirs: Vec<PathBuf> = digests
        .iter()
        .map(|d| env.tmp.path().join("cache/layers").join(d.hex()))
        .collect();
    assert_eq!(h.layers(), dirs.as_slice());
    assert_eq!(read_in_layers(&h, "f").unwrap(), b"2");
    assert_eq!(read_in_layers(&h, "a").unwrap(), b"a");
    assert_eq!(read_in_layers(&h, "h").unwrap(), b"4");
    assert_eq!(
        store.blobs_fetched(),
        5,
        "the config and four distinct layers"
    );
    let last = seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(last.phase, PullPhase::Done);
    assert_eq!(last.done_bytes, last.total_bytes);
    let cache = env.tmp.path().join("cache");
    assert_eq!(std::fs::read_dir(cache.join("layers")).unwrap().count(), 4);
    assert_eq!(std::fs::read_dir(cache.join("tmp")).unwrap().count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_layer_among_several_fails_the_pull_and_keeps_no_layer() {
    let env = Env::new();
    let (_, digests) = write_layout(&env.layout(), "1", &FIVE_LAYERS, false);
    let blob = env.layout().join("blobs/sha256").join(digests[2].hex());
    let mut bytes = std::fs::read(&blob).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&blob, bytes).unwrap();
    let store = env.store(GIB);
    let e = store.ensure(&env.r("1"), &quiet).await.unwrap_err();
    match &e {
        ImageError::DigestMismatch {
            kind: BlobKind::Layer,
            expected,
            ..
        } => assert_eq!(expected, &digests[2].to_string()),
        other => panic!("{other}"),
    }
    let cache = env.tmp.path().join("cache");
    assert_eq!(std::fs::read_dir(cache.join("layers")).unwrap().count(), 0);
    assert_eq!(std::fs::read_dir(cache.join("tmp")).unwrap().count(), 0);
    assert!(store.cached().is_empty());
}

#[tokio::test]
async fn missing_tag_and_bad_layout_are_not_found() {
    let env = Env::new();
    write_layout(&env.layout(), "1", &[&[("f", b"x")]], false);
    let store = env.store(GIB);
    let e = store.ensure(&env.r("nope"), &quiet).await.unwrap_err();
    assert!(matches!(e, ImageError::NotFound { .. }), "{e}");
    let r: ImageRef = "oci:/nonexistent/layout:1".parse().unwrap();
    let e = store.ensure(&r, &quiet).await.unwrap_err();
    assert!(matches!(e, ImageError::NotFound { .. }), "{e}");
}

#[tokio::test]
async fn a_pinned_image_is_never_evicted_and_lru_goes_first() {
    let env = Env::new();
    let a = vec![1u8; 300_000];
    let b = vec![2u8; 300_000];
    write_layout(&env.layout(), "a", &[&[("a", &a)]], false);
    write_layout(&env.layout(), "b", &[&[("b", &b)]], false);
    // Room for one image's layer, not two.
    let store = env.store(450_000);
    let ha = store.ensure(&env.r("a"), &quiet).await.unwrap();
    let e = store.ensure(&env.r("b"), &quiet).await.unwrap_err();
    assert!(matches!(e, ImageError::CacheFull { .. }), "{e}");
    assert!(
        ha.layers()[0].join("a").is_file(),
        "the pinned image is intact"
    );
    drop(ha);
    let hb = store.ensure(&env.r("b"), &quiet).await.unwrap();
    let names: Vec<_> = store.cached().into_iter().flat_map(|c| c.names).collect();
    assert_eq!(
        names,
        vec![env.r("b").to_string()],
        "a, unused, was evicted"
    );
    assert!(hb.layers()[0].join("b").is_file());
}

#[tokio::test]
async fn a_restart_keeps_records_and_removes_half_written_entries() {
    let env = Env::new();
    let (md, _) = write_layout(&env.layout(), "1", &[&[("f", b"x")]], false);
    let cache = env.tmp.path().join("cache");
    {
        let store = env.store(GIB);
        drop(store.ensure(&env.r("1"), &quiet).await.unwrap());
    }
    // What a crash leaves: a half-unpacked layer in tmp/, an orphan layer, a record whose
    // layer is gone.
    std::fs::create_dir_all(cache.join("tmp/layer-1-0/etc")).unwrap();
    let orphan = cache.join("layers").join("e".repeat(64));
    std::fs::create_dir_all(&orphan).unwrap();
    let broken = "d".repeat(64);
    let rec = format!(
        r#"{{"manifest":"sha256:{broken}","names":["x"],"config_digest":"sha256:{broken}","config":{{}},"layers":[{{"digest":"sha256:{}","bytes":1}}],"last_used_ms":0}}"#,
        "c".repeat(64)
    );
    std::fs::write(cache.join(format!("images/{broken}.json")), rec).unwrap();

    let store = env.store(GIB);
    assert_eq!(std::fs::read_dir(cache.join("tmp")).unwrap().count(), 0);
    assert!(!orphan.exists());
    assert!(!cache.join(format!("images/{broken}.json")).exists());
    let h = store.pin(&md).unwrap();
    assert!(h.layers()[0].join("f").is_file());
    let fetched = store.blobs_fetched();
    drop(store.ensure(&env.r("1"), &quiet).await.unwrap());
    assert_eq!(store.blobs_fetched(), fetched);
    let unknown = Digest::from_hex(&"f".repeat(64)).unwrap();
    assert!(matches!(
        store.pin(&unknown),
        Err(ImageError::NotCached { .. })
    ));
}

#[tokio::test]
async fn archives_and_multi_arch_indexes() {
    let env = Env::new();
    let (md, _) = write_layout(
        &env.layout(),
        "m",
        &[&[("etc/os-release", b"ID=multi\n")]],
        true,
    );
    let archive = env.tmp.path().join("image.tar");
    let mut b = tar::Builder::new(std::fs::File::create(&archive).unwrap());
    b.append_dir_all(".", env.layout()).unwrap();
    b.finish().unwrap();
    let store = env.store(GIB);
    let r: ImageRef = format!("oci-archive:{}:m", archive.display())
        .parse()
        .unwrap();
    let h = store.ensure(&r, &quiet).await.unwrap();
    assert_eq!(h.digest(), &md, "the amd64 manifest of the index");
    assert_eq!(read_in_layers(&h, "etc/os-release").unwrap(), b"ID=multi\n");
    let tmp = env.tmp.path().join("cache/tmp");
    assert_eq!(
        std::fs::read_dir(tmp).unwrap().count(),
        0,
        "the extracted archive is gone"
    );
}
