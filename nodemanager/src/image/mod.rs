//! The node's image store (issue 28, items 2 and 5): an image reference becomes a set of
//! verified, unpacked, read-only layer directories, ready to be stacked as overlayfs
//! `lowerdir`s by the OCI executor.
//!
//! Split by noun:
//! - [`reference`], [`digest`]: [`ImageRef`] parsing (Docker's defaults;
//!   `oci:`/`oci-archive:`) and sha256 digests, from `spindle_common::image_ref`, shared
//!   with the client and the RM;
//! - [`manifest`]: index, manifest and image config documents, media types, platform;
//! - [`auth`]: credentials from a Docker `config.json`;
//! - [`registry`]: the OCI distribution protocol (`oci-client`), errors by type;
//! - [`layout`]: local OCI layouts and archives;
//! - [`pull`]: one pull from a source into the cache, every blob checked;
//! - [`unpack`]: hostile-layer-safe unpacking with overlayfs whiteouts;
//! - [`cache`]: the content-addressed cache on disk, pins, LRU eviction, crash cleanup;
//! - [`progress`]: pull progress for diagnostics;
//! - [`store`]: [`ImageStore`], single-flight `ensure`, [`ImageHandle`] pins;
//! - [`error`]: [`ImageError`], one variant per reason.
//!
//! It does not launch containers, mount anything, or read configuration keys (the NM's
//! configuration parser builds [`ImageStoreConfig`]).

use std::path::PathBuf;

pub mod auth;
pub mod cache;
pub use spindle_common::image_ref::digest;
pub mod error;
mod layout;
pub mod manifest;
pub mod node;
pub mod progress;
mod pull;
pub use spindle_common::image_ref as reference;
mod registry;
pub mod store;
pub mod unpack;

pub use cache::CachedImage;
pub use digest::Digest;
pub use error::{BlobKind, ImageError, UnsafeEntry};
pub use manifest::ImageConfig;
pub use progress::{PullPhase, PullProgress};
pub use reference::{ImageRef, ReferenceError, RegistryRef};
pub use store::{ImageHandle, ImageStore};

/// The image store's settings (`spindle.nodemanager.runtime.oci.*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageStoreConfig {
    /// `cache-dir`: blobs, layers and records (default `<first local dir>/images`).
    pub cache_dir: PathBuf,
    /// `cache-max-bytes`: above it, least recently used images not in use are evicted.
    pub max_bytes: u64,
    /// `insecure-registries`: `host:port`s reached over plain HTTP.
    pub insecure_registries: Vec<String>,
    /// `auth-file`: a Docker `config.json` with registry credentials.
    pub auth_file: Option<PathBuf>,
    /// `local-image-dirs`: where local images (`oci:`, `oci-archive:`) may be named from.
    pub local_image_dirs: Vec<PathBuf>,
}

#[cfg(test)]
mod tests;
