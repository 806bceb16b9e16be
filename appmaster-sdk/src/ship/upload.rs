//! Shipping through the RM's blob store (the default: no shared staging directory). Each
//! shipped file is hashed (SHA-256, read a block at a time), asked for by digest
//! (`RmClient::claim_blob`: nothing is sent when the RM holds it for the caller), and sent
//! only when it is missing, streamed from disk (`RmClient::upload_blob`). The packed
//! `--src-dir` is written to a temp file of the client's own, removed once sent. Each becomes
//! a local resource `spindle-rm:///blobs/sha256:<hex>` with its size; the NMs verify both.
//! What it does is said through `out`, one line per file.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use spindle_common::ids::ApplicationId;
use spindle_common::image_ref::digest::Hasher;
use spindle_common::image_ref::Digest;
use spindle_common::records::cluster::LocalResourceInfo;
use spindle_common::resource_url::rm_blob_url;

use super::{pack_dir, ShipError, Shipment, Staged, SRC_DIR_KEY};
use crate::rm_client::RmClient;

/// One file to send: its resource key, what it is called in messages, its path and kind.
struct Item {
    key: String,
    shown: String,
    path: PathBuf,
    kind: &'static str,
}

/// Uploads everything `ship` names for `app_id` and returns the resources.
pub(super) async fn upload(
    ship: &Shipment,
    app_id: &ApplicationId,
    rm: &RmClient,
    out: &mut (dyn FnMut(&str) + Send),
) -> Result<Staged, ShipError> {
    ship.validate()?;
    let mut items = Vec::new();
    for (kind, list) in [("FILE", &ship.files), ("ARCHIVE", &ship.archives)] {
        for (name, path) in list {
            items.push(Item {
                key: name.clone(),
                shown: name.clone(),
                path: path.clone(),
                kind,
            });
        }
    }
    // The packed --src-dir lives in a temp dir of the client's, gone when this returns.
    let packed = tempfile_dir()?;
    let mut skipped_links = Vec::new();
    if let Some(src) = &ship.src_dir {
        let to = packed.path().join(super::SRC_ARCHIVE_NAME);
        let src_shown = src.display().to_string();
        skipped_links = tokio::task::spawn_blocking({
            let (src, to) = (src.clone(), to.clone());
            move || pack_dir(&src, &to)
        })
        .await
        .map_err(|e| ShipError::Pack {
            path: src_shown.clone(),
            source: std::io::Error::other(e),
        })?
        .map_err(|source| ShipError::Pack {
            path: src_shown.clone(),
            source,
        })?;
        items.push(Item {
            key: SRC_DIR_KEY.into(),
            shown: format!("the --src-dir {src_shown}"),
            path: to,
            kind: "ARCHIVE",
        });
    }
    let mut resources = BTreeMap::new();
    for item in items {
        let res = send(&item, app_id, rm, out).await?;
        resources.insert(item.key, res);
    }
    Ok(Staged {
        dir: None,
        resources,
        skipped_links,
    })
}

/// A private temp directory (0700) for the packed `--src-dir`.
fn tempfile_dir() -> Result<TempDir, ShipError> {
    let base = std::env::temp_dir();
    let nonce = spindle_common::cluster_secret::random_nonce().unwrap_or_default();
    let path = base.join(format!("spindle-ship-{}", hex_of(&nonce)));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&path)
        .map_err(|source| ShipError::Staging {
            path: path.display().to_string(),
            source,
        })?;
    Ok(TempDir(path))
}

fn hex_of(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The SHA-256 and size of the file at `path`, read a block at a time.
fn hash_file(path: &Path) -> std::io::Result<(Digest, u64, i64)> {
    let mut f = std::fs::File::open(path)?;
    let mtime = f.metadata()?.mtime().saturating_mul(1000);
    let mut h = Hasher::default();
    let mut buf = vec![0u8; 256 * 1024];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        size += n as u64;
        h.update(&buf[..n]);
    }
    Ok((h.finish(), size, mtime))
}

fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} bytes"),
    }
}

async fn send(
    item: &Item,
    app_id: &ApplicationId,
    rm: &RmClient,
    out: &mut (dyn FnMut(&str) + Send),
) -> Result<LocalResourceInfo, ShipError> {
    let read_err = |source| ShipError::Read {
        path: item.path.display().to_string(),
        source,
    };
    let path = item.path.clone();
    let (digest, size, mtime) = tokio::task::spawn_blocking(move || hash_file(&path))
        .await
        .map_err(|e| read_err(std::io::Error::other(e)))?
        .map_err(read_err)?;
    let upload_err = |source| ShipError::Upload {
        name: item.shown.clone(),
        source: Box::new(source),
    };
    let stored = match rm
        .claim_blob(&digest, app_id, size)
        .await
        .map_err(upload_err)?
    {
        Some(held) => {
            out(&format!(
                "The ResourceManager has {} ({}, {digest}) already: not sent",
                item.shown,
                human(held.size)
            ));
            held
        }
        None => {
            out(&format!(
                "Uploading {} ({}) to the ResourceManager",
                item.shown,
                human(size)
            ));
            let file = tokio::fs::File::open(&item.path).await.map_err(read_err)?;
            rm.upload_blob(&digest, app_id, file, size)
                .await
                .map_err(upload_err)?
        }
    };
    if stored.digest != digest.to_string() || stored.size != size {
        return Err(ShipError::Stored {
            name: item.shown.clone(),
            sent: format!("{digest} ({size} bytes)"),
            got: format!("{} ({} bytes)", stored.digest, stored.size),
        });
    }
    Ok(LocalResourceInfo {
        resource: rm_blob_url(&digest),
        kind: item.kind.into(),
        visibility: "APPLICATION".into(),
        size: i64::try_from(size).unwrap_or(i64::MAX),
        timestamp: mtime,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_hash_as_the_rm_checks_them_and_sizes_read_for_people() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x");
        std::fs::write(&p, b"abc").unwrap();
        let (digest, size, _) = hash_file(&p).unwrap();
        assert_eq!(digest, Digest::of(b"abc"));
        assert_eq!(size, 3);
        assert_eq!(human(3), "3 bytes");
        assert_eq!(human(3 << 20), "3.0 MiB");
        let t = tempfile_dir().unwrap();
        let kept = t.path().to_path_buf();
        assert!(kept.is_dir());
        drop(t);
        assert!(!kept.exists());
    }
}
