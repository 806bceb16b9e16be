//! The node's content-addressed image cache on disk, and its in-memory index.
//!
//! ```text
//! <cache-dir>/blobs/sha256/<hex>   manifests and image configs (layer blobs only while
//!                                  they are being unpacked)
//! <cache-dir>/layers/<hex>/        one unpacked, read-only layer per layer digest, shared
//!                                  by every image and container that uses it
//! <cache-dir>/images/<hex>.json    one record per image (by manifest digest): its names,
//!                                  layers, config and last use
//! <cache-dir>/tmp/                 everything half-written; emptied at open
//! ```
//!
//! Everything becomes visible by a rename out of `tmp/`, and a record is written after the
//! layers it names, so a crash leaves only `tmp/` entries and unreferenced layers, both
//! removed by [`Cache::open`]. Pins (images a running container uses) and reservations
//! (layers a pull in progress relies on) keep eviction away; eviction is least recently
//! used first.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::digest::Digest;
use super::error::ImageError;
use super::manifest::ImageConfig;

/// One unpacked layer of an image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerRecord {
    pub digest: Digest,
    /// Bytes of file content in its directory.
    pub bytes: u64,
}

/// What the cache knows of one image (its `images/<hex>.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageRecord {
    pub manifest: Digest,
    /// The canonical references it was ensured under.
    pub names: Vec<String>,
    pub config_digest: Digest,
    pub config: ImageConfig,
    /// Lowest first.
    pub layers: Vec<LayerRecord>,
    pub last_used_ms: u64,
}

/// A cached image as heartbeats and `node -status` show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedImage {
    pub names: Vec<String>,
    pub digest: Digest,
    /// Bytes of its layers (shared layers counted in each image).
    pub size_bytes: u64,
    pub last_used: SystemTime,
    /// Held by a running container.
    pub in_use: bool,
}

#[derive(Default)]
struct State {
    images: HashMap<Digest, ImageRecord>,
    pins: HashMap<Digest, usize>,
    reserved: HashMap<Digest, usize>,
}

pub(crate) struct Cache {
    root: PathBuf,
    max_bytes: u64,
    state: Mutex<State>,
    seq: AtomicU64,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn private_dir(path: &Path) -> Result<(), ImageError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|e| ImageError::io("create", path, e))
}

fn remove_any(path: &Path) {
    let r = match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(_) => Ok(()),
    };
    if let Err(e) = r {
        tracing::warn!("image cache: cannot remove {}: {e}", path.display());
    }
}

fn entries(dir: &Path) -> Result<Vec<PathBuf>, ImageError> {
    fs::read_dir(dir)
        .map_err(|e| ImageError::io("list", dir, e))?
        .map(|e| {
            e.map(|e| e.path())
                .map_err(|e| ImageError::io("list", dir, e))
        })
        .collect()
}

impl Cache {
    /// Opens (creating) the cache at `root`: removes half-written entries, loads the records
    /// whose layers are all there, and removes layers and blobs no record names.
    pub(crate) fn open(root: &Path, max_bytes: u64) -> Result<Cache, ImageError> {
        for d in ["blobs/sha256", "layers", "images", "tmp"] {
            private_dir(&root.join(d))?;
        }
        let cache = Cache {
            root: root.to_path_buf(),
            max_bytes,
            state: Mutex::new(State::default()),
            seq: AtomicU64::new(0),
        };
        for p in entries(&root.join("tmp"))? {
            remove_any(&p);
        }
        let mut images = HashMap::new();
        for p in entries(&root.join("images"))? {
            match cache.load_record(&p) {
                Some(r) => {
                    images.insert(r.manifest.clone(), r);
                }
                None => {
                    tracing::warn!("image cache: dropping incomplete record {}", p.display());
                    remove_any(&p);
                }
            }
        }
        let layers: HashSet<String> = images
            .values()
            .flat_map(|r| r.layers.iter().map(|l| l.digest.hex().to_string()))
            .collect();
        let blobs: HashSet<String> = images
            .values()
            .flat_map(|r| {
                [
                    r.manifest.hex().to_string(),
                    r.config_digest.hex().to_string(),
                ]
            })
            .collect();
        for (dir, keep) in [("layers", &layers), ("blobs/sha256", &blobs)] {
            for p in entries(&root.join(dir))? {
                let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
                if !name.is_some_and(|n| keep.contains(&n)) {
                    remove_any(&p);
                }
            }
        }
        cache.lock().images = images;
        Ok(cache)
    }

    fn load_record(&self, path: &Path) -> Option<ImageRecord> {
        let r: ImageRecord = serde_json::from_slice(&fs::read(path).ok()?).ok()?;
        let named_right = path.file_stem()?.to_str()? == r.manifest.hex();
        let complete = r.layers.iter().all(|l| self.layer_dir(&l.digest).is_dir());
        (named_right && complete).then_some(r)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    pub(crate) fn layer_dir(&self, digest: &Digest) -> PathBuf {
        self.root.join("layers").join(digest.hex())
    }

    pub(crate) fn blob_path(&self, digest: &Digest) -> PathBuf {
        self.root.join("blobs/sha256").join(digest.hex())
    }

    /// A fresh path under `tmp/` (nothing is created).
    pub(crate) fn tmp_path(&self, label: &str) -> PathBuf {
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        self.root
            .join("tmp")
            .join(format!("{label}-{}-{n}", std::process::id()))
    }

    /// Moves a finished `tmp/` file or directory to `dest`; an existing `dest` (another
    /// pull got there first with the same digest) wins and `tmp` is removed.
    pub(crate) fn commit(&self, tmp: &Path, dest: &Path) -> Result<(), ImageError> {
        if dest.exists() {
            remove_any(tmp);
            return Ok(());
        }
        match fs::rename(tmp, dest) {
            Ok(()) => Ok(()),
            Err(_) if dest.exists() => {
                remove_any(tmp);
                Ok(())
            }
            Err(e) => Err(ImageError::io("rename", tmp, e)),
        }
    }

    /// The recorded size of a layer some image already holds.
    pub(crate) fn layer_bytes(&self, layer: &Digest) -> Option<u64> {
        self.lock()
            .images
            .values()
            .flat_map(|r| r.layers.iter())
            .find(|l| &l.digest == layer)
            .map(|l| l.bytes)
    }

    /// The manifest digest of the image cached under `name`.
    pub(crate) fn lookup(&self, name: &str) -> Option<Digest> {
        self.lock()
            .images
            .values()
            .find(|r| r.names.iter().any(|n| n == name))
            .map(|r| r.manifest.clone())
    }

    /// Pins the image and marks it used now; `None` when it is not cached.
    pub(crate) fn pin(&self, digest: &Digest) -> Option<ImageRecord> {
        let mut st = self.lock();
        let rec = st.images.get_mut(digest)?;
        rec.last_used_ms = now_ms();
        let rec = rec.clone();
        *st.pins.entry(digest.clone()).or_default() += 1;
        drop(st);
        if let Err(e) = self.write_record(&rec) {
            tracing::warn!("image cache: cannot record the use of {digest}: {e}");
        }
        Some(rec)
    }

    pub(crate) fn unpin(&self, digest: &Digest) {
        let mut st = self.lock();
        if let Some(n) = st.pins.get_mut(digest) {
            *n -= 1;
            if *n == 0 {
                st.pins.remove(digest);
            }
        }
    }

    /// Keeps `layers` from eviction until the returned guard drops.
    pub(crate) fn reserve<'a>(&'a self, layers: &[Digest]) -> Reservation<'a> {
        let mut st = self.lock();
        for l in layers {
            *st.reserved.entry(l.clone()).or_default() += 1;
        }
        Reservation {
            cache: self,
            layers: layers.to_vec(),
        }
    }

    /// Bytes of distinct layers held by pinned images and reserved layers.
    fn held_bytes(st: &State) -> u64 {
        let mut sizes: HashMap<&Digest, u64> = HashMap::new();
        for r in st.images.values() {
            let pinned = st.pins.contains_key(&r.manifest);
            for l in &r.layers {
                if pinned || st.reserved.contains_key(&l.digest) {
                    sizes.insert(&l.digest, l.bytes);
                }
            }
        }
        sizes.values().sum()
    }

    fn used_bytes(st: &State) -> u64 {
        let sizes: HashMap<&Digest, u64> = st
            .images
            .values()
            .flat_map(|r| r.layers.iter().map(|l| (&l.digest, l.bytes)))
            .collect();
        sizes.values().sum()
    }

    /// Refuses a pull that needs `needed` more bytes than the images in use leave room for.
    pub(crate) fn check_room(&self, needed: u64) -> Result<(), ImageError> {
        let in_use = Self::held_bytes(&self.lock());
        if in_use.saturating_add(needed) > self.max_bytes {
            return Err(ImageError::CacheFull {
                needed,
                in_use,
                limit: self.max_bytes,
            });
        }
        Ok(())
    }

    /// Removes layers a failed pull committed that no record names and no other pull
    /// reserves (the failed pull's own reservation is still held: one).
    pub(crate) fn discard_unreferenced(&self, layers: &[Digest]) {
        let st = self.lock();
        for l in layers {
            let named = st
                .images
                .values()
                .any(|r| r.layers.iter().any(|x| &x.digest == l));
            if !named && st.reserved.get(l).copied().unwrap_or(0) <= 1 {
                remove_any(&self.layer_dir(l));
            }
        }
    }

    fn write_record(&self, rec: &ImageRecord) -> Result<(), ImageError> {
        let tmp = self.tmp_path("record");
        let bytes = serde_json::to_vec_pretty(rec)
            .map_err(|e| ImageError::io("encode record", &tmp, e.into()))?;
        fs::write(&tmp, bytes).map_err(|e| ImageError::io("write", &tmp, e))?;
        let dest = self
            .root
            .join("images")
            .join(format!("{}.json", rec.manifest.hex()));
        fs::rename(&tmp, &dest).map_err(|e| ImageError::io("rename", &tmp, e))
    }

    /// Records a pulled image (merging names with an existing record of the same manifest),
    /// then evicts least-recently-used images other than it above the size limit.
    pub(crate) fn insert(&self, mut rec: ImageRecord) -> Result<(), ImageError> {
        rec.last_used_ms = now_ms();
        {
            let mut st = self.lock();
            if let Some(old) = st.images.get(&rec.manifest) {
                for n in &old.names {
                    if !rec.names.contains(n) {
                        rec.names.push(n.clone());
                    }
                }
            }
            // A name moves to the newest image pulled under it.
            for other in st.images.values_mut() {
                if other.manifest != rec.manifest {
                    other.names.retain(|n| !rec.names.contains(n));
                }
            }
            st.images.insert(rec.manifest.clone(), rec.clone());
        }
        self.write_record(&rec)?;
        self.evict(&rec.manifest);
        Ok(())
    }

    /// Evicts unpinned images, least recently used first, until the cache fits.
    fn evict(&self, keep: &Digest) {
        loop {
            let mut st = self.lock();
            if Self::used_bytes(&st) <= self.max_bytes {
                return;
            }
            let victim = st
                .images
                .values()
                .filter(|r| &r.manifest != keep && !st.pins.contains_key(&r.manifest))
                .filter(|r| !r.layers.iter().any(|l| st.reserved.contains_key(&l.digest)))
                .min_by_key(|r| r.last_used_ms)
                .map(|r| r.manifest.clone());
            let Some(victim) = victim else { return };
            let Some(rec) = st.images.remove(&victim) else {
                return;
            };
            let still_used: HashSet<&Digest> = st
                .images
                .values()
                .flat_map(|r| r.layers.iter().map(|l| &l.digest))
                .chain(st.reserved.keys())
                .collect();
            let blobs_used: HashSet<&Digest> = st
                .images
                .values()
                .flat_map(|r| [&r.manifest, &r.config_digest])
                .collect();
            tracing::info!("image cache: evicting {} ({:?})", rec.manifest, rec.names);
            remove_any(
                &self
                    .root
                    .join("images")
                    .join(format!("{}.json", rec.manifest.hex())),
            );
            for l in rec
                .layers
                .iter()
                .filter(|l| !still_used.contains(&l.digest))
            {
                remove_any(&self.layer_dir(&l.digest));
            }
            for b in [&rec.manifest, &rec.config_digest] {
                if !blobs_used.contains(b) {
                    remove_any(&self.blob_path(b));
                }
            }
            drop(st);
        }
    }

    pub(crate) fn list(&self) -> Vec<CachedImage> {
        let st = self.lock();
        let mut v: Vec<CachedImage> = st
            .images
            .values()
            .map(|r| CachedImage {
                names: r.names.clone(),
                digest: r.manifest.clone(),
                size_bytes: r.layers.iter().map(|l| l.bytes).sum(),
                last_used: UNIX_EPOCH + Duration::from_millis(r.last_used_ms),
                in_use: st.pins.contains_key(&r.manifest),
            })
            .collect();
        v.sort_by_key(|c| std::cmp::Reverse(c.last_used));
        v
    }
}

/// Layers a pull in progress relies on; released on drop.
pub(crate) struct Reservation<'a> {
    cache: &'a Cache,
    layers: Vec<Digest>,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let mut st = self.cache.lock();
        for l in &self.layers {
            if let Some(n) = st.reserved.get_mut(l) {
                *n -= 1;
                if *n == 0 {
                    st.reserved.remove(l);
                }
            }
        }
    }
}
