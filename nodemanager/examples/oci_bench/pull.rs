//! The pull of a large image from a local registry, cold: Spindle's `ImageStore::ensure`
//! (fetch, sha256, gunzip, unpack into the cache) against `skopeo copy` of the same image
//! into `oci:` and `dir:` (fetch and digest check only: skopeo keeps the blobs compressed),
//! and Spindle's import of the same image from its OCI layout (no HTTP). Interleaved, the
//! order rotating every round. Then Spindle's stages alone over the layer blobs on disk
//! (sha256, gunzip, gunzip + unpack), to say what bounds the pull.
//!
//! The image: busybox plus `--layers` layers of pseudo-random bytes (splitmix64 from
//! `--seed`, so incompressible; never committed), `--image-mb` in all, packed by umoci
//! (gzip) and pushed with skopeo to a `docker-registry` on 127.0.0.1.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use spindle_nodemanager::image::manifest::{self, Blob, Compression, Document};
use spindle_nodemanager::image::unpack::unpack_layer;
use spindle_nodemanager::image::{ImageRef, ImageStore, ImageStoreConfig, PullProgress};
use spindle_test_support::images::{add_layers, build_image, skopeo, Registry};

use crate::{Args, Summary};

const MIB: u64 = 1 << 20;

/// Writes `bytes` pseudo-random bytes (splitmix64 seeded with `seed`) to `path`.
fn write_random(path: &Path, bytes: u64, seed: u64) -> std::io::Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut state = seed;
    let mut buf = vec![0u8; MIB as usize];
    let mut left = bytes;
    while left > 0 {
        for word in buf.chunks_exact_mut(8) {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            word.copy_from_slice(&(z ^ (z >> 31)).to_le_bytes());
        }
        let n = left.min(MIB) as usize;
        f.write_all(&buf[..n])?;
        left -= n as u64;
    }
    f.flush()
}

/// The layout's image tagged `1`: its layer blobs, lowest first.
fn layer_blobs(layout: &Path) -> Result<Vec<(PathBuf, Blob)>, String> {
    let read = |p: PathBuf| std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()));
    let index = read(layout.join("index.json"))?;
    let Document::Index(entries) =
        manifest::parse_document("layout", &index).map_err(|e| e.to_string())?
    else {
        return Err("index.json is not an index".into());
    };
    let entry = entries.first().ok_or("index.json lists no image")?;
    let blobs = layout.join("blobs/sha256");
    let hex = entry.digest.trim_start_matches("sha256:");
    let bytes = read(blobs.join(hex))?;
    match manifest::parse_document("layout", &bytes).map_err(|e| e.to_string())? {
        Document::Image(m) => Ok(m
            .layers
            .into_iter()
            .map(|b| (blobs.join(b.digest.hex()), b))
            .collect()),
        Document::Index(_) => Err("the layout's manifest is an index".into()),
    }
}

/// A cold pull through a fresh image store; the bytes it fetched and the time.
fn ensure(
    rt: &tokio::runtime::Runtime,
    cache: &Path,
    insecure: &[String],
    reference: &str,
) -> Result<(u64, Duration), String> {
    let store = ImageStore::open(ImageStoreConfig {
        cache_dir: cache.to_path_buf(),
        max_bytes: 16 << 30,
        insecure_registries: insecure.to_vec(),
        auth_file: None,
        local_image_dirs: Vec::new(),
    })
    .map_err(|e| format!("image store: {e}"))?;
    let r: ImageRef = reference.parse().map_err(|e| format!("{reference}: {e}"))?;
    let total = AtomicU64::new(0);
    let progress = |p: &PullProgress| total.store(p.total_bytes, Ordering::Relaxed);
    let t = Instant::now();
    let handle = rt
        .block_on(async {
            tokio::time::timeout(Duration::from_secs(600), store.ensure(&r, &progress)).await
        })
        .map_err(|_| format!("{reference}: no pull in 600 s"))?
        .map_err(|e| format!("{reference}: {e}"))?;
    let d = t.elapsed();
    drop(handle);
    drop(store);
    remove(cache);
    Ok((total.load(Ordering::Relaxed), d))
}

/// `skopeo copy` from the registry to `dest` (`oci:...` or `dir:...`); the time.
fn skopeo_copy(dir: &Path, from: &str, dest: &str, path: &Path) -> Result<Duration, String> {
    let t = Instant::now();
    let out = skopeo(dir)
        .args(["copy", "--src-tls-verify=false", from, dest])
        .output()
        .map_err(|e| format!("skopeo: {e}"))?;
    let d = t.elapsed();
    remove(path);
    if !out.status.success() {
        return Err(format!(
            "skopeo copy {from} {dest}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(d)
}

fn remove(path: &Path) {
    let _ = std::fs::remove_dir_all(path);
}

/// Spindle's stages alone over the layer blobs: sha256, gunzip, gunzip + unpack; each one
/// pass over all layers, after a pass that reads them into the page cache.
fn stages(dir: &Path, blobs: &[(PathBuf, Blob)]) -> Result<[Duration; 3], String> {
    let io = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    let mut buf = vec![0u8; MIB as usize];
    let pass = |f: &mut dyn FnMut(&Path, &Blob) -> Result<(), String>| {
        let t = Instant::now();
        for (p, b) in blobs {
            f(p, b)?;
        }
        Ok::<_, String>(t.elapsed())
    };
    pass(&mut |p, _| std::fs::read(p).map(drop).map_err(|e| io(p, e)))?;
    let sha = pass(&mut |p, _| {
        let mut h = spindle_nodemanager::image::digest::Hasher::default();
        let mut f = std::fs::File::open(p).map_err(|e| io(p, e))?;
        loop {
            let n = f.read(&mut buf).map_err(|e| io(p, e))?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
        }
        drop(h.finish());
        Ok(())
    })?;
    let gunzip = pass(&mut |p, b| {
        let f = std::io::BufReader::new(std::fs::File::open(p).map_err(|e| io(p, e))?);
        let mut r: Box<dyn Read> = match b.compression {
            Compression::Gzip => Box::new(flate2::read::GzDecoder::new(f)),
            Compression::None => Box::new(f),
        };
        std::io::copy(&mut r, &mut std::io::sink())
            .map(drop)
            .map_err(|e| io(p, e))
    })?;
    let dest = dir.join("unpack");
    let unpack = pass(&mut |p, b| {
        remove(&dest);
        std::fs::create_dir(&dest).map_err(|e| io(&dest, e))?;
        unpack_layer(p, b.compression, &dest, "bench", 16 << 30)
            .map(drop)
            .map_err(|e| e.to_string())
    })?;
    remove(&dest);
    Ok([sha, gunzip, unpack])
}

/// Builds the image in `dir/layout`; its size in bytes.
fn build(dir: &Path, args: &Args) -> Result<PathBuf, String> {
    let layout = build_image(dir);
    let per_layer = args.image_mb * MIB / args.layers as u64;
    let mut failed = None;
    add_layers(dir, &layout, args.layers, |i, rootfs| {
        let path = rootfs.join(format!("random-{i}.bin"));
        if let Err(e) = write_random(&path, per_layer, args.seed.wrapping_add(i as u64)) {
            failed.get_or_insert(format!("{}: {e}", path.display()));
        }
    });
    match failed {
        Some(e) => Err(e),
        None => Ok(layout),
    }
}

/// Per variant, the times of the counted rounds.
#[derive(Default)]
struct Times {
    bytes: u64,
    spindle: Vec<Duration>,
    skopeo_oci: Vec<Duration>,
    skopeo_dir: Vec<Duration>,
    spindle_layout: Vec<Duration>,
}

pub(crate) fn run(dir: &Path, args: &Args) -> Result<String, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let t = Instant::now();
    let layout = build(dir, args)?;
    let built = t.elapsed();
    let reg = Registry::start(dir);
    let t = Instant::now();
    reg.push(&layout, dir, "spindle/bench:1");
    let pushed = t.elapsed();
    let reference = format!("{}/spindle/bench:1", reg.host());
    let from = format!("docker://{reference}");
    let local = format!("oci:{}:1", layout.display());
    let insecure = vec![reg.host()];
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    let mut t = Times::default();
    let out = dir.join("out");
    for round in 0..args.pulls {
        for k in 0..4 {
            match (round + k) % 4 {
                0 => {
                    let (bytes, d) = ensure(&rt, &out, &insecure, &reference)?;
                    t.bytes = bytes;
                    t.spindle.push(d);
                }
                1 => {
                    let dest = format!("oci:{}:1", out.display());
                    t.skopeo_oci.push(skopeo_copy(dir, &from, &dest, &out)?);
                }
                2 => {
                    let dest = format!("dir:{}", out.display());
                    t.skopeo_dir.push(skopeo_copy(dir, &from, &dest, &out)?);
                }
                _ => t.spindle_layout.push(ensure(&rt, &out, &[], &local)?.1),
            }
        }
    }
    drop(reg);
    let blobs = layer_blobs(&layout)?;
    let layer_bytes: u64 = blobs.iter().map(|(_, b)| b.size).sum();
    let st = stages(dir, &blobs)?;
    remove(dir);
    Ok(table(&t, layer_bytes, st, built, pushed, args))
}

fn table(
    t: &Times,
    layer_bytes: u64,
    stages: [Duration; 3],
    built: Duration,
    pushed: Duration,
    args: &Args,
) -> String {
    let mb = |bytes: u64, d: Duration| bytes as f64 / 1e6 / d.as_secs_f64();
    let row = |name: &str, v: &[Duration]| {
        let s = Summary::of(v.to_vec());
        format!(
            "| {name} | {} | {:.2} | {:.2} | {:.0} |\n",
            s.n,
            s.p50.as_secs_f64(),
            s.max.as_secs_f64(),
            mb(t.bytes, s.p50)
        )
    };
    let p50 = |v: &[Duration]| Summary::of(v.to_vec()).p50;
    let mut out = format!(
        "pull of a {:.0} MB image ({} random layers + busybox, gzip by umoci; built in {:.1} s, pushed in {:.1} s), cold, from docker-registry on 127.0.0.1:\n\n| pull | n | p50 s | max s | MB/s at p50 |\n|---|---|---|---|---|\n",
        t.bytes as f64 / 1e6,
        args.layers,
        built.as_secs_f64(),
        pushed.as_secs_f64()
    );
    out += &row(
        "Spindle ImageStore::ensure (fetch, sha256, gunzip, unpack)",
        &t.spindle,
    );
    out += &row(
        "skopeo copy docker:// -> oci: (fetch, digest)",
        &t.skopeo_oci,
    );
    out += &row("skopeo copy docker:// -> dir:", &t.skopeo_dir);
    out += &row(
        "Spindle ImageStore::ensure from the oci: layout (no HTTP)",
        &t.spindle_layout,
    );
    out += &format!(
        "\nSpindle/skopeo-oci time at p50: {:.2}x; Spindle/skopeo-dir: {:.2}x\n",
        p50(&t.spindle).as_secs_f64() / p50(&t.skopeo_oci).as_secs_f64(),
        p50(&t.spindle).as_secs_f64() / p50(&t.skopeo_dir).as_secs_f64()
    );
    out += &format!(
        "Spindle's stages alone over the {:.0} MB of layer blobs, one pass each, page cache warm: sha256 {:.0} MB/s, gunzip {:.0} MB/s, gunzip + unpack (+ diff-id sha256) {:.0} MB/s\n",
        layer_bytes as f64 / 1e6,
        mb(layer_bytes, stages[0]),
        mb(layer_bytes, stages[1]),
        mb(layer_bytes, stages[2])
    );
    out
}
