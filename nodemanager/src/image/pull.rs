//! One pull: from a [`Source`] (a registry or a local OCI layout) to a recorded image in the
//! [`Cache`]. The manifest (and an index's linux/amd64 entry), the config and every layer
//! the node lacks are fetched through a [`BlobWriter`], which checks each blob's size and
//! sha256 before it is used and removes it when they are wrong; layers are unpacked
//! ([`super::unpack`]) on a blocking thread into `tmp/` and checked against the config's
//! diff ids before they are renamed into the cache. Up to [`PARALLEL_LAYERS`] layers are
//! in flight at once, so later layers download while an earlier one unpacks.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use futures::stream::{FuturesOrdered, StreamExt};
use tokio::io::AsyncWriteExt;
use tokio::sync::watch;

use super::cache::{Cache, ImageRecord, LayerRecord};
use super::digest::{Digest, Hasher};
use super::error::{BlobKind, ImageError};
use super::layout::LayoutSource;
use super::manifest::{self, Blob, Document, ImageManifest, MAX_DOCUMENT_BYTES};
use super::progress::{PullPhase, PullProgress};
use super::registry::RegistrySource;
use super::unpack::unpack_layer;

/// How many layers one pull fetches and unpacks at a time: the next layers download while
/// one unpacks (on a blocking thread), each streamed to its own file in `tmp/`.
const PARALLEL_LAYERS: usize = 3;

/// Where an image's blobs come from.
pub(crate) enum Source {
    Registry(RegistrySource),
    Layout(LayoutSource),
}

impl Source {
    /// The manifest the reference names (`None`), or the one with `digest`.
    async fn manifest(&self, digest: Option<&Digest>) -> Result<Vec<u8>, ImageError> {
        match self {
            Source::Registry(r) => r.manifest(digest).await,
            Source::Layout(l) => l.manifest(digest).await,
        }
    }

    async fn blob(&self, blob: &Blob, out: &mut BlobWriter<'_>) -> Result<(), ImageError> {
        match self {
            Source::Registry(r) => r.blob(blob, out).await,
            Source::Layout(l) => l.blob(blob, out).await,
        }
    }
}

/// Writes one blob to a file, counting and hashing it; [`BlobWriter::finish`] checks it.
pub(crate) struct BlobWriter<'a> {
    file: tokio::fs::File,
    path: PathBuf,
    hasher: Hasher,
    written: u64,
    blob: &'a Blob,
    kind: BlobKind,
    progress: &'a watch::Sender<PullProgress>,
}

impl<'a> BlobWriter<'a> {
    async fn create(
        path: PathBuf,
        blob: &'a Blob,
        kind: BlobKind,
        progress: &'a watch::Sender<PullProgress>,
    ) -> Result<BlobWriter<'a>, ImageError> {
        let file = tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .await
            .map_err(|e| ImageError::io("create", &path, e))?;
        Ok(BlobWriter {
            file,
            path,
            hasher: Hasher::default(),
            written: 0,
            blob,
            kind,
            progress,
        })
    }

    /// Appends `chunk`; more bytes than the descriptor declares is a [`ImageError::SizeMismatch`].
    pub(crate) async fn write(&mut self, chunk: &[u8]) -> Result<(), ImageError> {
        let len = chunk.len() as u64;
        if self.written + len > self.blob.size {
            return Err(ImageError::SizeMismatch {
                kind: self.kind,
                digest: self.blob.digest.to_string(),
                declared: self.blob.size,
            });
        }
        self.hasher.update(chunk);
        self.file
            .write_all(chunk)
            .await
            .map_err(|e| ImageError::io("write", &self.path, e))?;
        self.written += len;
        self.progress.send_modify(|p| p.done_bytes += len);
        Ok(())
    }

    /// The digest that was expected, for a source's own verification error.
    pub(crate) fn digest_mismatch(&self, actual: String) -> ImageError {
        ImageError::DigestMismatch {
            kind: self.kind,
            expected: self.blob.digest.to_string(),
            actual,
        }
    }

    async fn finish(mut self) -> Result<PathBuf, ImageError> {
        self.file
            .flush()
            .await
            .map_err(|e| ImageError::io("write", &self.path, e))?;
        let actual = std::mem::take(&mut self.hasher).finish();
        if actual != self.blob.digest {
            return Err(self.digest_mismatch(actual.to_string()));
        }
        Ok(self.path)
    }
}

/// One pull of one reference into the cache.
pub(crate) struct Pull<'a> {
    pub cache: &'a Cache,
    pub source: Source,
    /// The canonical reference (the name recorded).
    pub name: String,
    /// The digest the reference itself names, if any.
    pub expected: Option<Digest>,
    pub progress: &'a watch::Sender<PullProgress>,
    /// Blobs fetched (the store's counter).
    pub fetched: &'a AtomicU64,
}

fn remove_quietly(path: &Path) {
    let _ = if path.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    };
}

impl Pull<'_> {
    /// Runs the pull; the image's manifest digest on success.
    pub(crate) async fn run(self) -> Result<Digest, ImageError> {
        let (manifest_digest, manifest_bytes, image) = self.resolve().await?;
        let mut layer_digests: Vec<Digest> =
            image.layers.iter().map(|l| l.digest.clone()).collect();
        // Once each: a failed pull discards the layers only it reserves.
        layer_digests.sort();
        layer_digests.dedup();
        let _reservation = self.cache.reserve(&layer_digests);
        let mut missing: Vec<&Blob> = image
            .layers
            .iter()
            .filter(|l| !self.cache.layer_dir(&l.digest).is_dir())
            .collect();
        // A layer named twice is fetched once.
        missing.sort_by(|a, b| a.digest.cmp(&b.digest));
        missing.dedup_by(|a, b| a.digest == b.digest);
        let needed: u64 = missing.iter().map(|l| l.size).sum();
        self.cache.check_room(needed)?;
        self.progress.send_modify(|p| {
            p.phase = PullPhase::Downloading;
            p.total_bytes = needed + image.config.size;
        });

        let config_path = self.fetch(&image.config, BlobKind::Config).await?;
        let config_bytes =
            std::fs::read(&config_path).map_err(|e| ImageError::io("read", &config_path, e))?;
        let parsed = manifest::parse_config(&self.name, &config_bytes);
        self.cache
            .commit(&config_path, &self.cache.blob_path(&image.config.digest))?;
        let parsed = parsed?;
        if !parsed.diff_ids.is_empty() && parsed.diff_ids.len() != image.layers.len() {
            return Err(ImageError::BadManifest {
                reference: self.name.clone(),
                what: "image config",
                detail: format!(
                    "{} diff ids for {} layers",
                    parsed.diff_ids.len(),
                    image.layers.len()
                ),
            });
        }
        let tmp_manifest = self.cache.tmp_path("manifest");
        std::fs::write(&tmp_manifest, &manifest_bytes)
            .map_err(|e| ImageError::io("write", &tmp_manifest, e))?;
        self.cache
            .commit(&tmp_manifest, &self.cache.blob_path(&manifest_digest))?;

        let layers = self.layers(&image.layers, &parsed.diff_ids).await?;
        self.cache.insert(ImageRecord {
            manifest: manifest_digest.clone(),
            names: vec![self.name.clone()],
            config_digest: image.config.digest.clone(),
            config: parsed.config,
            layers,
            last_used_ms: 0,
        })?;
        self.progress.send_modify(|p| p.phase = PullPhase::Done);
        Ok(manifest_digest)
    }

    /// Makes sure every layer is unpacked in the cache, lowest first: up to
    /// [`PARALLEL_LAYERS`] layers at a time are fetched and unpacked, their results taken in
    /// order. A layer named again later in the list waits for its first occurrence. On an
    /// error no further layer starts, those already started finish, and the layers this
    /// pull committed that no image names are removed; the error of the lowest failed layer
    /// is returned.
    async fn layers(
        &self,
        layers: &[Blob],
        diff_ids: &[Digest],
    ) -> Result<Vec<LayerRecord>, ImageError> {
        let first = |i: usize| !layers[..i].iter().any(|l| l.digest == layers[i].digest);
        let mut starts = (0..layers.len())
            .filter(|&i| first(i))
            .map(|i| self.layer(&layers[i], diff_ids.get(i)));
        let mut running: FuturesOrdered<_> = starts.by_ref().take(PARALLEL_LAYERS).collect();
        let mut records = Vec::with_capacity(layers.len());
        let (mut fresh, mut fresh_bytes) = (Vec::new(), 0u64);
        let mut failed = None;
        for (i, layer) in layers.iter().enumerate() {
            let step = if first(i) {
                let Some(step) = running.next().await else {
                    break;
                };
                if failed.is_none() {
                    running.extend(starts.next());
                }
                step
            } else if failed.is_none() {
                self.layer(layer, diff_ids.get(i)).await
            } else {
                continue;
            };
            // Unpacked sizes are known only now (the descriptors' are compressed): the
            // new layers must still fit beside the images in use.
            let step = step.and_then(|(bytes, new)| {
                if new {
                    fresh.push(layer.digest.clone());
                    fresh_bytes += bytes;
                    self.cache.check_room(fresh_bytes)?;
                }
                Ok(bytes)
            });
            match step {
                Ok(bytes) => records.push(LayerRecord {
                    digest: layer.digest.clone(),
                    bytes,
                }),
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        match failed {
            None => Ok(records),
            Some(e) => {
                self.cache.discard_unreferenced(&fresh);
                Err(e)
            }
        }
    }

    /// The image manifest (through an index's linux/amd64 entry), its digest and bytes.
    async fn resolve(&self) -> Result<(Digest, Vec<u8>, ImageManifest), ImageError> {
        let mut want = self.expected.clone();
        for _ in 0..2 {
            let bytes = self.source.manifest(want.as_ref()).await?;
            if bytes.len() as u64 > MAX_DOCUMENT_BYTES {
                return Err(ImageError::BadManifest {
                    reference: self.name.clone(),
                    what: "manifest",
                    detail: format!("{} bytes (at most {MAX_DOCUMENT_BYTES})", bytes.len()),
                });
            }
            let actual = Digest::of(&bytes);
            if let Some(w) = &want {
                if &actual != w {
                    return Err(ImageError::DigestMismatch {
                        kind: BlobKind::Manifest,
                        expected: w.to_string(),
                        actual: actual.to_string(),
                    });
                }
            }
            match manifest::parse_document(&self.name, &bytes)? {
                Document::Image(m) => return Ok((actual, bytes, m)),
                Document::Index(entries) => {
                    want = Some(manifest::select_platform(&self.name, &entries)?);
                }
            }
        }
        Err(ImageError::BadManifest {
            reference: self.name.clone(),
            what: "index",
            detail: "its linux/amd64 entry is another index".into(),
        })
    }

    /// Fetches one blob into `tmp/`, checked; its path.
    async fn fetch(&self, blob: &Blob, kind: BlobKind) -> Result<PathBuf, ImageError> {
        if kind == BlobKind::Config && blob.size > MAX_DOCUMENT_BYTES {
            return Err(ImageError::SizeMismatch {
                kind,
                digest: blob.digest.to_string(),
                declared: MAX_DOCUMENT_BYTES,
            });
        }
        let path = self.cache.tmp_path("blob");
        let mut out = BlobWriter::create(path.clone(), blob, kind, self.progress).await?;
        let result = match self.source.blob(blob, &mut out).await {
            Ok(()) => out.finish().await,
            Err(e) => Err(e),
        };
        self.fetched.fetch_add(1, Ordering::Relaxed);
        if result.is_err() {
            remove_quietly(&path);
        }
        result
    }

    /// Makes sure the layer is unpacked in the cache; its bytes, and whether this pull
    /// unpacked it.
    async fn layer(
        &self,
        layer: &Blob,
        diff_id: Option<&Digest>,
    ) -> Result<(u64, bool), ImageError> {
        let dest = self.cache.layer_dir(&layer.digest);
        if dest.is_dir() {
            return Ok((self.cache.layer_bytes(&layer.digest).unwrap_or(0), false));
        }
        let blob = self.fetch(layer, BlobKind::Layer).await?;
        let tmp_dir = self.cache.tmp_path("layer");
        let (b, t, compression) = (blob.clone(), tmp_dir.clone(), layer.compression);
        let (name, max) = (layer.digest.to_string(), self.cache.max_bytes());
        let unpacked = tokio::task::spawn_blocking(move || {
            std::fs::create_dir(&t).map_err(|e| ImageError::io("create", &t, e))?;
            unpack_layer(&b, compression, &t, &name, max)
        })
        .await
        .map_err(|e| ImageError::PullAborted {
            detail: e.to_string(),
        })
        .and_then(|r| r);
        remove_quietly(&blob);
        let checked = unpacked.and_then(|u| match diff_id {
            Some(want) if *want != u.diff_id => Err(ImageError::DigestMismatch {
                kind: BlobKind::LayerContent,
                expected: want.to_string(),
                actual: u.diff_id.to_string(),
            }),
            _ => Ok(u.bytes),
        });
        match checked {
            Ok(bytes) => {
                self.cache.commit(&tmp_dir, &dest)?;
                Ok((bytes, true))
            }
            Err(e) => {
                remove_quietly(&tmp_dir);
                Err(e)
            }
        }
    }
}
