//! [`ImageStore`]: the executor's entry point. `ensure` turns a reference into an
//! [`ImageHandle`] (pinned layers, lowest first, and the image config), pulling at most once
//! however many containers ask at the same moment (single-flight: the first asker starts a
//! task, every asker waits on its shared result and watches its progress).
//!
//! A cached name is used as it is, without asking the registry (YARN's
//! `docker.image-update=false`): a second container on the node pulls nothing.

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::{FutureExt, Shared};
use tokio::sync::watch;

use super::cache::{Cache, CachedImage};
use super::digest::Digest;
use super::error::ImageError;
use super::layout::LayoutSource;
use super::manifest::ImageConfig;
use super::progress::PullProgress;
use super::pull::{Pull, Source};
use super::reference::ImageRef;
use super::registry::RegistrySource;
use super::ImageStoreConfig;

type PullResult = Result<Digest, ImageError>;
type SharedPull = Shared<Pin<Box<dyn Future<Output = PullResult> + Send>>>;

#[derive(Clone)]
struct Flight {
    id: u64,
    result: SharedPull,
    progress: watch::Receiver<PullProgress>,
}

struct Inner {
    config: ImageStoreConfig,
    cache: Cache,
    inflight: Mutex<HashMap<String, Flight>>,
    next_flight: AtomicU64,
    fetched: AtomicU64,
}

/// The node's image store (cheap to clone; clones share everything).
#[derive(Clone)]
pub struct ImageStore {
    inner: Arc<Inner>,
}

/// An image held for a container: its layers cannot be evicted until this drops.
pub struct ImageHandle {
    inner: Arc<Inner>,
    digest: Digest,
    layers: Vec<PathBuf>,
    config: ImageConfig,
}

impl std::fmt::Debug for ImageHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageHandle")
            .field("digest", &self.digest)
            .field("layers", &self.layers)
            .finish_non_exhaustive()
    }
}

impl ImageHandle {
    /// The image's manifest digest (what a recovered container re-pins with).
    pub fn digest(&self) -> &Digest {
        &self.digest
    }

    /// The unpacked layer directories, lowest first (overlayfs's `lowerdir` lists them
    /// highest first, so reverse them there).
    pub fn layers(&self) -> &[PathBuf] {
        &self.layers
    }

    /// Env, Entrypoint, Cmd, User and WorkingDir of the image config.
    pub fn config(&self) -> &ImageConfig {
        &self.config
    }
}

impl Drop for ImageHandle {
    fn drop(&mut self) {
        self.inner.cache.unpin(&self.digest);
    }
}

impl ImageStore {
    /// Opens the cache at `config.cache_dir`, removing what a crash left half-written.
    pub fn open(config: ImageStoreConfig) -> Result<ImageStore, ImageError> {
        let cache = Cache::open(&config.cache_dir, config.max_bytes)?;
        Ok(ImageStore {
            inner: Arc::new(Inner {
                config,
                cache,
                inflight: Mutex::new(HashMap::new()),
                next_flight: AtomicU64::new(0),
                fetched: AtomicU64::new(0),
            }),
        })
    }

    /// The image, pulled if the node does not hold it, pinned for as long as the handle
    /// lives. `progress` is called as the pull advances (also when another container's
    /// pull of the same reference is being waited for).
    pub async fn ensure(
        &self,
        reference: &ImageRef,
        progress: &(dyn Fn(&PullProgress) + Send + Sync),
    ) -> Result<ImageHandle, ImageError> {
        let name = reference.to_string();
        // A just-pulled image can be evicted by another pull before it is pinned here:
        // then pull again (bounded).
        for _ in 0..3 {
            if let Some(d) = self.inner.cache.lookup(&name) {
                if let Ok(h) = self.pin(&d) {
                    return Ok(h);
                }
            }
            let flight = self.join_flight(reference, &name);
            let digest = wait(flight, progress).await?;
            if let Ok(h) = self.pin(&digest) {
                return Ok(h);
            }
        }
        Err(ImageError::NotCached { digest: name })
    }

    /// Pins an image already in the cache by its manifest digest (a container recovered
    /// after an NM restart); [`ImageError::NotCached`] when the node no longer holds it.
    pub fn pin(&self, digest: &Digest) -> Result<ImageHandle, ImageError> {
        let rec = self
            .inner
            .cache
            .pin(digest)
            .ok_or_else(|| ImageError::NotCached {
                digest: digest.to_string(),
            })?;
        Ok(ImageHandle {
            inner: self.inner.clone(),
            digest: rec.manifest,
            layers: rec
                .layers
                .iter()
                .map(|l| self.inner.cache.layer_dir(&l.digest))
                .collect(),
            config: rec.config,
        })
    }

    /// The images the node holds, most recently used first (heartbeats, `node -status`).
    pub fn cached(&self) -> Vec<CachedImage> {
        self.inner.cache.list()
    }

    /// Blobs fetched from registries and layouts since the store opened (manifests not
    /// counted): a second `ensure` of a cached image adds nothing.
    pub fn blobs_fetched(&self) -> u64 {
        self.inner.fetched.load(Ordering::Relaxed)
    }

    /// The pull of `name` in flight, or a new one.
    fn join_flight(&self, reference: &ImageRef, name: &str) -> Flight {
        let mut inflight = self
            .inner
            .inflight
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(f) = inflight.get(name) {
            return f.clone();
        }
        let id = self.inner.next_flight.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = watch::channel(PullProgress::new(name.to_string()));
        let inner = self.inner.clone();
        let (reference, key) = (reference.clone(), name.to_string());
        // Its own task: the pull goes on when the first asker gives up, and a panic in the
        // HTTP client stays a failed pull.
        let task = tokio::spawn(async move {
            let result = run_pull(&inner, &reference, &key, &tx).await;
            let mut inflight = inner.inflight.lock().unwrap_or_else(|p| p.into_inner());
            if inflight.get(&key).is_some_and(|f| f.id == id) {
                inflight.remove(&key);
            }
            result
        });
        let result: Pin<Box<dyn Future<Output = PullResult> + Send>> = Box::pin(task.map(|r| {
            r.unwrap_or_else(|e| {
                Err(ImageError::PullAborted {
                    detail: e.to_string(),
                })
            })
        }));
        let flight = Flight {
            id,
            result: result.shared(),
            progress: rx,
        };
        inflight.insert(name.to_string(), flight.clone());
        flight
    }
}

async fn wait(
    flight: Flight,
    progress: &(dyn Fn(&PullProgress) + Send + Sync),
) -> Result<Digest, ImageError> {
    let Flight {
        result,
        progress: mut rx,
        ..
    } = flight;
    tokio::pin!(result);
    let mut last_said = None;
    loop {
        tokio::select! {
            r = &mut result => {
                // The pull's last word (Done) may not have been said yet: say it first.
                let p = rx.borrow_and_update().clone();
                if last_said != Some(p.phase) {
                    progress(&p);
                }
                return r;
            }
            changed = rx.changed() => {
                if changed.is_err() {
                    return result.await;
                }
                let p = rx.borrow_and_update().clone();
                last_said = Some(p.phase);
                progress(&p);
            }
        }
    }
}

async fn run_pull(
    inner: &Inner,
    reference: &ImageRef,
    name: &str,
    progress: &watch::Sender<PullProgress>,
) -> Result<Digest, ImageError> {
    let cfg = &inner.config;
    let (source, expected) = match reference {
        ImageRef::Registry(r) => (
            Source::Registry(RegistrySource::new(
                r,
                &cfg.insecure_registries,
                cfg.auth_file.as_deref(),
            )?),
            r.digest.clone(),
        ),
        ImageRef::Layout { path, tag } => (
            Source::Layout(LayoutSource::dir(path, tag.as_deref(), name)),
            None,
        ),
        ImageRef::Archive { path, tag } => (
            Source::Layout(LayoutSource::archive(path, tag.as_deref(), name, &inner.cache).await?),
            None,
        ),
    };
    Pull {
        cache: &inner.cache,
        source,
        name: name.to_string(),
        expected,
        progress,
        fetched: &inner.fetched,
    }
    .run()
    .await
}
