//! The image store as the rest of the NodeManager uses it ([`NodeImages`]): the OCI
//! executor's [`ImageSource`] (a container's image, pulled if needed, its progress written
//! to the container's stderr log), the RM's prefetch requests, and what the heartbeats say
//! (the images held, pulls that failed).
//!
//! Local sources (`oci:/dir`, `oci-archive:/file.tar`) are read as root, so an application
//! master may name only those under `spindle.nodemanager.runtime.oci.local-image-dirs`
//! (none by default): otherwise any file of the host could be imported into a container.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use spindle_common::ids::ContainerId;
use spindle_common::image_ref::ImageRef;
use spindle_common::records::tracker::{ImagePullFailureInfo, NodeImageInfo};
use tracing::{info, warn};

use super::{ImageHandle, ImageStore, PullPhase, PullProgress};
use crate::oci::{ImageError, ImageSource, RootfsLayers};

/// How often a pull's progress is written to a container's log (besides phase changes).
const PROGRESS_EVERY: Duration = Duration::from_secs(2);
/// Most failed pulls kept for the next heartbeat.
const MAX_PENDING_FAILURES: usize = 16;

/// Why a local image source is refused.
#[derive(Debug, thiserror::Error)]
pub enum LocalSourceError {
    #[error("local image {path} is not under spindle.nodemanager.runtime.oci.local-image-dirs ({allowed})")]
    NotAllowed { path: PathBuf, allowed: String },
    #[error("cannot resolve local image {path}: {source}")]
    Resolve {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The node's images: the store, the local directories images may come from, and the
/// failed pulls not yet reported.
pub struct NodeImages {
    store: ImageStore,
    local_dirs: Vec<PathBuf>,
    runtime: tokio::runtime::Handle,
    failures: Mutex<Vec<ImagePullFailureInfo>>,
    /// The last progress line of each container whose image is being pulled.
    pulling: Mutex<std::collections::HashMap<ContainerId, String>>,
}

impl NodeImages {
    /// Over an opened store; `local_dirs` (`local-image-dirs`) are resolved here (a missing
    /// one is skipped).
    pub fn new(store: ImageStore, local_dirs: &[PathBuf], runtime: tokio::runtime::Handle) -> Self {
        let local_dirs = local_dirs
            .iter()
            .filter_map(|d| std::fs::canonicalize(d).ok())
            .collect();
        Self {
            store,
            local_dirs,
            runtime,
            failures: Mutex::new(Vec::new()),
            pulling: Mutex::new(std::collections::HashMap::new()),
        }
    }

    /// Parses `image` and checks a local source against the allowed directories.
    fn admit(&self, image: &str) -> Result<ImageRef, ImageError> {
        let r = ImageRef::parse(image)?;
        let path = match &r {
            ImageRef::Registry(_) => return Ok(r),
            ImageRef::Layout { path, .. } | ImageRef::Archive { path, .. } => path,
        };
        let resolved = std::fs::canonicalize(path).map_err(|source| LocalSourceError::Resolve {
            path: path.clone(),
            source,
        })?;
        if self.local_dirs.iter().any(|d| resolved.starts_with(d)) {
            return Ok(r);
        }
        let allowed = if self.local_dirs.is_empty() {
            "none".to_string()
        } else {
            let dirs: Vec<String> = self
                .local_dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect();
            dirs.join(",")
        };
        Err(LocalSourceError::NotAllowed {
            path: path.clone(),
            allowed,
        }
        .into())
    }

    /// `image` on this node, pulled if needed; a failure is kept for the next heartbeat.
    pub async fn ensure(
        &self,
        image: &str,
        progress: &(dyn Fn(&PullProgress) + Send + Sync),
    ) -> Result<ImageHandle, ImageError> {
        let result = match self.admit(image) {
            Ok(r) => self
                .store
                .ensure(&r, progress)
                .await
                .map_err(ImageError::from),
            Err(e) => Err(e),
        };
        if let Err(e) = &result {
            self.failed(image, e.to_string());
        }
        result
    }

    fn failed(&self, image: &str, reason: String) {
        let image = ImageRef::parse(image).map_or_else(|_| image.to_string(), |r| r.to_string());
        let mut f = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        f.retain(|x| x.image != image);
        f.push(ImagePullFailureInfo {
            image,
            reason,
            time: 0,
        });
        let over = f.len().saturating_sub(MAX_PENDING_FAILURES);
        f.drain(..over);
    }

    /// The RM asked for `images` ahead of jobs: each pulled in the background.
    pub fn prefetch(self: &std::sync::Arc<Self>, images: Vec<String>) {
        for image in images {
            let me = std::sync::Arc::clone(self);
            tokio::spawn(async move {
                info!(image = %image, "prefetching an image the ResourceManager asked for");
                match me.ensure(&image, &|_| {}).await {
                    Ok(h) => info!(image = %image, digest = %h.digest(), "image prefetched"),
                    Err(e) => warn!(image = %image, "image prefetch failed: {e}"),
                }
            });
        }
    }

    /// What the node holds, for the RM (names, digest, size), in a stable order.
    pub fn report(&self) -> Vec<NodeImageInfo> {
        let mut out: Vec<NodeImageInfo> = self
            .store
            .cached()
            .into_iter()
            .map(|c| NodeImageInfo {
                names: c.names,
                digest: c.digest.to_string(),
                size_bytes: c.size_bytes,
            })
            .collect();
        out.sort_by(|a, b| a.digest.cmp(&b.digest));
        out
    }

    /// The failed pulls since the last call.
    pub fn take_failures(&self) -> Vec<ImagePullFailureInfo> {
        std::mem::take(&mut *self.failures.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl ImageSource for NodeImages {
    fn rootfs(
        &self,
        image: &str,
        container: &ContainerId,
        say: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<RootfsLayers, ImageError> {
        let last = Mutex::new((None::<PullPhase>, Instant::now()));
        let progress = |p: &PullProgress| {
            self.pulling
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(*container, p.to_string());
            let mut l = last.lock().unwrap_or_else(|e| e.into_inner());
            if l.0 != Some(p.phase) || l.1.elapsed() >= PROGRESS_EVERY {
                *l = (Some(p.phase), Instant::now());
                say(&p.to_string());
            }
        };
        let result = self.runtime.block_on(self.ensure(image, &progress));
        self.pulling
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(container);
        let handle = result?;
        Ok(RootfsLayers {
            layers: handle.layers().to_vec(),
            config: handle.config().clone(),
            digest: Some(handle.digest().to_string()),
            pin: Some(Box::new(handle)),
        })
    }

    fn progress(&self, container: &ContainerId) -> Option<String> {
        self.pulling
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(container)
            .cloned()
    }

    fn repin(&self, digest: &str) -> Option<crate::oci::ImagePin> {
        let digest = digest.parse().ok()?;
        let handle = self.store.pin(&digest).ok()?;
        Some(Box::new(handle))
    }
}
