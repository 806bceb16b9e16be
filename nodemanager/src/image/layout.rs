//! Importing from a local OCI image layout (`oci:/dir[:tag]`) or an OCI archive
//! (`oci-archive:/file.tar[:tag]`), with no registry.
//!
//! The layout's `index.json` names the manifest (by its `org.opencontainers.image.ref.name`
//! annotation, or the only one when no tag is given); blobs are read from
//! `blobs/sha256/<hex>` and checked like a registry's. An archive is first extracted into the
//! cache's `tmp/`, keeping only `index.json`, `oci-layout` and `blobs/sha256/<64 hex>` regular
//! files (so a hostile archive cannot place anything else anywhere), and removed after the
//! pull.

use std::fs;
use std::path::{Path, PathBuf};

use tokio::io::AsyncReadExt;

use super::cache::Cache;
use super::digest::Digest;
use super::error::{BlobKind, ImageError};
use super::manifest::{self, Blob, Document, MAX_DOCUMENT_BYTES};
use super::pull::BlobWriter;

const REF_NAME: &str = "org.opencontainers.image.ref.name";

pub(crate) struct LayoutSource {
    dir: PathBuf,
    tag: Option<String>,
    name: String,
    /// An extracted archive, removed on drop.
    extracted: bool,
}

impl Drop for LayoutSource {
    fn drop(&mut self) {
        if self.extracted {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

impl LayoutSource {
    pub(crate) fn dir(dir: &Path, tag: Option<&str>, name: &str) -> LayoutSource {
        LayoutSource {
            dir: dir.to_path_buf(),
            tag: tag.map(str::to_string),
            name: name.to_string(),
            extracted: false,
        }
    }

    /// Extracts the archive at `path` into the cache's `tmp/`.
    pub(crate) async fn archive(
        path: &Path,
        tag: Option<&str>,
        name: &str,
        cache: &Cache,
    ) -> Result<LayoutSource, ImageError> {
        let dest = cache.tmp_path("archive");
        let mut src = LayoutSource::dir(&dest, tag, name);
        src.extracted = true;
        let (p, d) = (path.to_path_buf(), dest.clone());
        let name = name.to_string();
        tokio::task::spawn_blocking(move || extract(&p, &d, &name))
            .await
            .map_err(|e| ImageError::PullAborted {
                detail: e.to_string(),
            })??;
        Ok(src)
    }

    fn not_found(&self, detail: String) -> ImageError {
        ImageError::NotFound {
            reference: self.name.clone(),
            detail,
        }
    }

    fn blob_path(&self, digest: &Digest) -> PathBuf {
        self.dir.join("blobs/sha256").join(digest.hex())
    }

    /// The manifest `index.json` names for the tag (`None`), or the one with `digest`.
    pub(crate) async fn manifest(&self, digest: Option<&Digest>) -> Result<Vec<u8>, ImageError> {
        let digest = match digest {
            Some(d) => d.clone(),
            None => self.tagged_manifest()?,
        };
        let path = self.blob_path(&digest);
        let bytes = read_small(&path).map_err(|e| match e {
            ReadSmall::Io(e) => self.not_found(format!("{}: {e}", path.display())),
            ReadSmall::TooLarge => ImageError::SizeMismatch {
                kind: BlobKind::Manifest,
                digest: digest.to_string(),
                declared: MAX_DOCUMENT_BYTES,
            },
        })?;
        let actual = Digest::of(&bytes);
        if actual != digest {
            return Err(ImageError::DigestMismatch {
                kind: BlobKind::Manifest,
                expected: digest.to_string(),
                actual: actual.to_string(),
            });
        }
        Ok(bytes)
    }

    fn tagged_manifest(&self) -> Result<Digest, ImageError> {
        let path = self.dir.join("index.json");
        let bytes = read_small(&path).map_err(|e| match e {
            ReadSmall::Io(e) => self.not_found(format!("{}: {e}", path.display())),
            ReadSmall::TooLarge => ImageError::BadManifest {
                reference: self.name.clone(),
                what: "index.json",
                detail: format!("larger than {MAX_DOCUMENT_BYTES} bytes"),
            },
        })?;
        let Document::Index(entries) = manifest::parse_document(&self.name, &bytes)? else {
            return Err(ImageError::BadManifest {
                reference: self.name.clone(),
                what: "index.json",
                detail: "not an image index".into(),
            });
        };
        let chosen = match &self.tag {
            Some(tag) => entries.iter().find(|e| {
                e.annotations
                    .as_ref()
                    .and_then(|a| a.get(REF_NAME))
                    .is_some_and(|n| n == tag)
            }),
            None if entries.len() == 1 => entries.first(),
            None => None,
        };
        let entry = chosen.ok_or_else(|| {
            self.not_found(match &self.tag {
                Some(t) => format!("the layout has no manifest tagged '{t}'"),
                None => format!("the layout has {} manifests; name a tag", entries.len()),
            })
        })?;
        entry.digest.parse().map_err(|e| ImageError::BadManifest {
            reference: self.name.clone(),
            what: "index.json",
            detail: format!("{e}"),
        })
    }

    pub(crate) async fn blob(
        &self,
        blob: &Blob,
        out: &mut BlobWriter<'_>,
    ) -> Result<(), ImageError> {
        let path = self.blob_path(&blob.digest);
        let mut f = tokio::fs::File::open(&path)
            .await
            .map_err(|e| self.not_found(format!("{}: {e}", path.display())))?;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = f
                .read(&mut buf)
                .await
                .map_err(|e| ImageError::io("read", &path, e))?;
            if n == 0 {
                return Ok(());
            }
            out.write(&buf[..n]).await?;
        }
    }
}

enum ReadSmall {
    Io(std::io::Error),
    TooLarge,
}

fn read_small(path: &Path) -> Result<Vec<u8>, ReadSmall> {
    let meta = fs::metadata(path).map_err(ReadSmall::Io)?;
    if meta.len() > MAX_DOCUMENT_BYTES {
        return Err(ReadSmall::TooLarge);
    }
    fs::read(path).map_err(ReadSmall::Io)
}

/// Only the layout's own files, as regular files under `dest`.
fn wanted(rel: &Path) -> bool {
    let s = rel.to_string_lossy();
    match s.strip_prefix("blobs/sha256/") {
        Some(hex) => Digest::from_hex(hex).is_ok(),
        None => s == "index.json" || s == "oci-layout",
    }
}

fn extract(archive: &Path, dest: &Path, name: &str) -> Result<(), ImageError> {
    fs::create_dir_all(dest.join("blobs/sha256")).map_err(|e| ImageError::io("create", dest, e))?;
    let file = fs::File::open(archive).map_err(|e| ImageError::NotFound {
        reference: name.to_string(),
        detail: format!("{}: {e}", archive.display()),
    })?;
    let mut tar = tar::Archive::new(std::io::BufReader::new(file));
    let entries = tar
        .entries()
        .map_err(|e| ImageError::io("read archive", archive, e))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| ImageError::io("read archive", archive, e))?;
        if entry.header().entry_type() != tar::EntryType::Regular {
            continue;
        }
        let path = entry
            .path()
            .map_err(|e| ImageError::io("read archive", archive, e))?
            .into_owned();
        let Ok(rel) = super::unpack::relative("", &path) else {
            continue;
        };
        if !wanted(&rel) {
            continue;
        }
        let target = dest.join(&rel);
        let mut out = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&target)
            .map_err(|e| ImageError::io("create", &target, e))?;
        std::io::copy(&mut entry, &mut out).map_err(|e| ImageError::io("write", &target, e))?;
    }
    Ok(())
}
