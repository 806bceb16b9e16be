//! [`ImageError`]: one variant per reason an image cannot be had, so that the executor (and
//! through it an application master) can tell a bad reference from an unreachable registry,
//! a refused credential, a missing image, a corrupt blob, a hostile layer or a full cache.
//!
//! Cloneable (sources behind `Arc`): one single-flight pull hands the same error to every
//! container that waited for it.

use std::path::PathBuf;
use std::sync::Arc;

use super::reference::ReferenceError;

/// Which kind of blob a digest check was about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlobKind {
    Manifest,
    Config,
    Layer,
    /// A layer's uncompressed content against the image config's `rootfs.diff_ids`.
    LayerContent,
}

impl std::fmt::Display for BlobKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BlobKind::Manifest => "manifest",
            BlobKind::Config => "image config",
            BlobKind::Layer => "layer",
            BlobKind::LayerContent => "layer content (diff id)",
        })
    }
}

/// Why a layer was refused (item 5 of issue 28: hostile layers). `entry` is the archive path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnsafeEntry {
    #[error("entry '{entry}' has an absolute path")]
    AbsolutePath { entry: String },
    #[error("entry '{entry}' has a '..' component")]
    ParentComponent { entry: String },
    #[error("entry '{entry}' would be written through the symbolic link '{link}'")]
    ThroughSymlink { entry: String, link: String },
    #[error("hard link '{entry}' points outside the layer ('{target}')")]
    HardLinkOutside { entry: String, target: String },
    #[error("hard link '{entry}' points to '{target}', which is not a file of this layer")]
    HardLinkTargetMissing { entry: String, target: String },
    #[error("entry '{entry}' is a device node")]
    DeviceNode { entry: String },
    #[error("entry '{entry}' has an unsupported tar entry type ({kind})")]
    UnsupportedEntryType { entry: String, kind: u8 },
    #[error("whiteout '{entry}' names no file")]
    BadWhiteout { entry: String },
}

/// Everything that can go wrong between an image reference and its unpacked layers.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ImageError {
    #[error("bad image reference '{reference}': {problem}")]
    BadReference {
        reference: String,
        #[source]
        problem: ReferenceError,
    },
    #[error("registry {registry} unreachable: {detail}")]
    RegistryUnreachable { registry: String, detail: String },
    #[error("registry {registry} refused the credentials (HTTP {status}) for {reference}")]
    CredentialsRefused {
        registry: String,
        reference: String,
        status: u16,
    },
    #[error("image {reference} not found: {detail}")]
    NotFound { reference: String, detail: String },
    #[error("registry {registry} answered {reference} wrongly: {detail}")]
    RegistryProtocol {
        registry: String,
        reference: String,
        detail: String,
    },
    #[error("{kind} {expected} failed its digest check (got {actual})")]
    DigestMismatch {
        kind: BlobKind,
        expected: String,
        actual: String,
    },
    #[error("{kind} {digest} is larger than the {declared} bytes its descriptor declares")]
    SizeMismatch {
        kind: BlobKind,
        digest: String,
        declared: u64,
    },
    #[error("unsupported media type '{media_type}' for {what}")]
    UnsupportedMediaType {
        what: &'static str,
        media_type: String,
    },
    #[error("image {reference} has no linux/amd64 manifest in its index")]
    NoMatchingPlatform { reference: String },
    #[error("malformed {what} in {reference}: {detail}")]
    BadManifest {
        reference: String,
        what: &'static str,
        detail: String,
    },
    #[error("unsafe layer {layer}: {problem}")]
    UnsafeLayer {
        layer: String,
        #[source]
        problem: UnsafeEntry,
    },
    #[error("image cache full: {needed} more bytes needed, {in_use} bytes held by images in use, limit {limit}")]
    CacheFull {
        needed: u64,
        in_use: u64,
        limit: u64,
    },
    #[error("image {digest} is not in the node's cache")]
    NotCached { digest: String },
    #[error("auth file {path}: {problem}")]
    AuthFile { path: PathBuf, problem: String },
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: Arc<std::io::Error>,
    },
    #[error("image pull task ended abnormally: {detail}")]
    PullAborted { detail: String },
}

impl ImageError {
    /// An I/O error on `path` while doing `op` (`"create"`, `"read"`, ...).
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ImageError::Io {
            op,
            path: path.into(),
            source: Arc::new(source),
        }
    }
}
