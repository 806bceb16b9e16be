//! The RM's blob store: the files clients ship (`--files`, `--archives`, the packed
//! `--src-dir`) when no shared staging directory is configured, so that NMs on hosts without
//! a shared file system can localize them from the RM.
//!
//! Content-addressed by SHA-256: one file `<dir>/sha256/<hex>` per digest (mode 0600 under a
//! 0700 directory, `spindle.resourcemanager.blob-store.dir`, by default `blobs` beside the
//! state store). An upload is streamed to `<dir>/tmp/` while it is hashed and counted, never
//! held in memory; above `max-file-bytes` it stops at once; its digest must be the one the
//! client declared; it is synced and renamed into place. `blobs.sqlite` (`db`) records each
//! blob's size, the users who uploaded it (only they may claim or read it without sending it
//! again: knowing a digest grants nothing) and the applications that use it.
//!
//! A blob is removed by [`BlobStore::sweep`] once no application using it is live and the
//! retention period has passed since the last of: its upload, each user's last upload or
//! claim, each using application's claim and, for applications the RM knows, their finish.
//! Everything survives an RM restart; at open, temp files are removed and records and files
//! that lost each other are reconciled.
//!
//! Must not: hold a blob in memory; know about HTTP (the `rest::blobs` handlers map
//! [`BlobError`]s to statuses).

mod db;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use futures::{Stream, StreamExt};
use spindle_common::config::keys;
use spindle_common::image_ref::digest::Hasher;
use spindle_common::image_ref::Digest;
use spindle_common::ApplicationId;
use tokio::io::AsyncWriteExt;

use crate::config::blobs::BlobStoreConfig;
pub use db::{AppEnd, BlobRecord};

/// Why the blob store refused or failed a call: one variant per reason.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    #[error(
        "the file is {size} bytes, larger than the limit {}={limit} bytes",
        keys::SPINDLE_RM_BLOB_STORE_MAX_FILE_BYTES
    )]
    FileTooLarge { size: u64, limit: u64 },
    #[error(
        "the upload passed the limit {}={limit} bytes and was stopped",
        keys::SPINDLE_RM_BLOB_STORE_MAX_FILE_BYTES
    )]
    StreamTooLarge { limit: u64 },
    #[error("user {user} holds {held} bytes in the blob store; {size} more would pass the limit {}={limit} bytes", keys::SPINDLE_RM_BLOB_STORE_MAX_USER_BYTES)]
    UserLimit {
        user: String,
        held: u64,
        size: u64,
        limit: u64,
    },
    #[error(
        "the uploaded bytes have digest {actual}, not the declared {declared}; nothing was stored"
    )]
    DigestMismatch { declared: Digest, actual: Digest },
    #[error("blob {0} is not stored for this caller")]
    NotFound(Digest),
    #[error("cannot read the upload: {0}")]
    Body(String),
    #[error("blob store: cannot {what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("blob store database {path}: {source}")]
    Db {
        path: PathBuf,
        source: rusqlite::Error,
    },
}

/// What an upload did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// The bytes were new: stored.
    New { size: u64 },
    /// The digest was stored already; the caller proved they hold the bytes (or already
    /// had it) and may now use it.
    Existed { size: u64 },
}

/// One upload's facts, before its body.
#[derive(Debug, Clone)]
pub struct Upload {
    pub digest: Digest,
    pub user: String,
    /// The application that will use it.
    pub app: ApplicationId,
    /// `Content-Length`, when the client sent one.
    pub declared_len: Option<u64>,
}

/// The store (see the module doc).
pub struct BlobStore {
    conf: BlobStoreConfig,
    db: Mutex<db::BlobDb>,
}

impl std::fmt::Debug for BlobStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BlobStore({})", self.conf.dir.display())
    }
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> BlobError + 'a {
    move |source| BlobError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

impl BlobStore {
    /// Opens (creating) the store under `conf.dir`: removes leftover temp files, and
    /// reconciles records and files (a record whose file is gone, or a file without a
    /// record, is dropped).
    pub fn open(conf: BlobStoreConfig) -> Result<Self, BlobError> {
        use std::os::unix::fs::PermissionsExt;
        let dir = conf.dir.clone();
        for d in [dir.clone(), dir.join("sha256"), dir.join("tmp")] {
            std::fs::create_dir_all(&d).map_err(io_err("create", &d))?;
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700))
                .map_err(io_err("restrict", &d))?;
        }
        let tmp = dir.join("tmp");
        for e in std::fs::read_dir(&tmp).map_err(io_err("read", &tmp))? {
            let p = e.map_err(io_err("read", &tmp))?.path();
            let _ = std::fs::remove_file(&p);
        }
        let db = db::BlobDb::open(&dir.join("blobs.sqlite"))?;
        let store = Self {
            conf,
            db: Mutex::new(db),
        };
        store.reconcile()?;
        Ok(store)
    }

    pub fn config(&self) -> &BlobStoreConfig {
        &self.conf
    }

    fn db(&self) -> std::sync::MutexGuard<'_, db::BlobDb> {
        self.db.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Where the blob `digest` lives.
    pub fn path_of(&self, digest: &Digest) -> PathBuf {
        self.conf.dir.join("sha256").join(digest.hex())
    }

    fn reconcile(&self) -> Result<(), BlobError> {
        let db = self.db();
        let known = db.all_digests()?;
        for d in &known {
            if !self.path_of(d).is_file() {
                tracing::warn!(digest = %d, "blob store: the file of a recorded blob is gone; its record is dropped");
                db.remove(d)?;
            }
        }
        let files = self.conf.dir.join("sha256");
        for e in std::fs::read_dir(&files).map_err(io_err("read", &files))? {
            let e = e.map_err(io_err("read", &files))?;
            let name = e.file_name().to_string_lossy().into_owned();
            let recorded = Digest::from_hex(&name).is_ok_and(|d| known.contains(&d));
            if !recorded {
                let _ = std::fs::remove_file(e.path());
            }
        }
        Ok(())
    }

    /// The blob's size, when it is stored and `user` may use it (uploaded it once).
    pub fn size_for_user(&self, digest: &Digest, user: &str) -> Result<Option<u64>, BlobError> {
        self.db().size_for_user(digest, user)
    }

    /// The blob's size, when it is stored and `app` uses it.
    pub fn size_for_app(
        &self,
        digest: &Digest,
        app: &ApplicationId,
    ) -> Result<Option<u64>, BlobError> {
        self.db().size_for_app(digest, app)
    }

    /// Records that `app` uses the stored blob `digest`, for a `user` who may use it;
    /// [`BlobError::NotFound`] otherwise (the client then uploads it).
    pub fn claim(
        &self,
        digest: &Digest,
        user: &str,
        app: &ApplicationId,
        now_ms: u64,
    ) -> Result<u64, BlobError> {
        let db = self.db();
        let size = db
            .size_for_user(digest, user)?
            .ok_or_else(|| BlobError::NotFound(digest.clone()))?;
        db.add_use(digest, user, app, now_ms)?;
        Ok(size)
    }

    /// The limits an upload of `size` bytes by `user` must pass (the user limit counts
    /// only blobs the user does not hold yet).
    pub fn check_upload(&self, digest: &Digest, user: &str, size: u64) -> Result<(), BlobError> {
        let limit = self.conf.max_file_bytes;
        if size > limit {
            return Err(BlobError::FileTooLarge { size, limit });
        }
        let db = self.db();
        if db.size_for_user(digest, user)?.is_some() {
            return Ok(());
        }
        let held = db.bytes_of_user(user)?;
        let limit = self.conf.max_user_bytes;
        if held.saturating_add(size) > limit {
            return Err(BlobError::UserLimit {
                user: user.to_string(),
                held,
                size,
                limit,
            });
        }
        Ok(())
    }

    /// Stores an upload streamed from `body`: limits first (by the declared length), then
    /// written to a temp file while hashed and counted (stopped above the file limit), the
    /// digest checked, the user limit checked by the real size, and renamed into place.
    pub async fn put<S, B, E>(&self, up: Upload, body: S, now_ms: u64) -> Result<Stored, BlobError>
    where
        S: Stream<Item = Result<B, E>> + Unpin,
        B: AsRef<[u8]>,
        E: std::fmt::Display,
    {
        if let Some(len) = up.declared_len {
            self.check_upload(&up.digest, &up.user, len)?;
        }
        let tmp = self.conf.dir.join("tmp").join(format!(
            "{}.{}.part",
            up.digest.hex(),
            hex::encode(spindle_common::cluster_secret::random_nonce().unwrap_or_default())
        ));
        let result = self.receive(&up, body, &tmp).await;
        let committed = match result {
            Ok(size) => self.commit(&up, &tmp, size, now_ms),
            Err(e) => Err(e),
        };
        let _ = std::fs::remove_file(&tmp);
        committed
    }

    /// Writes the body to `tmp`, returning its size once its digest is the declared one.
    async fn receive<S, B, E>(&self, up: &Upload, mut body: S, tmp: &Path) -> Result<u64, BlobError>
    where
        S: Stream<Item = Result<B, E>> + Unpin,
        B: AsRef<[u8]>,
        E: std::fmt::Display,
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true).mode(0o600);
        let file = opts.open(tmp).map_err(io_err("create", tmp))?;
        let mut out =
            tokio::io::BufWriter::with_capacity(256 * 1024, tokio::fs::File::from_std(file));
        let mut hasher = Hasher::default();
        let mut size = 0u64;
        let limit = self.conf.max_file_bytes;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| BlobError::Body(e.to_string()))?;
            let chunk = chunk.as_ref();
            size += chunk.len() as u64;
            if size > limit {
                return Err(BlobError::StreamTooLarge { limit });
            }
            hasher.update(chunk);
            out.write_all(chunk).await.map_err(io_err("write", tmp))?;
        }
        out.flush().await.map_err(io_err("write", tmp))?;
        out.get_mut()
            .sync_all()
            .await
            .map_err(io_err("sync", tmp))?;
        let actual = hasher.finish();
        if actual != up.digest {
            return Err(BlobError::DigestMismatch {
                declared: up.digest.clone(),
                actual,
            });
        }
        Ok(size)
    }

    /// Under the database lock (so the cleaner never sees a file without its record):
    /// the user limit by the real size, the rename, the records.
    fn commit(&self, up: &Upload, tmp: &Path, size: u64, now_ms: u64) -> Result<Stored, BlobError> {
        self.check_upload(&up.digest, &up.user, size)?;
        let db = self.db();
        let existed = db.size_of(&up.digest)?.is_some();
        if !existed {
            let to = self.path_of(&up.digest);
            std::fs::rename(tmp, &to).map_err(io_err("store", &to))?;
            db.insert(&up.digest, size, now_ms)?;
        }
        db.add_use(&up.digest, &up.user, &up.app, now_ms)?;
        Ok(if existed {
            Stored::Existed { size }
        } else {
            Stored::New { size }
        })
    }

    /// Opens a stored blob for reading.
    pub fn open_blob(&self, digest: &Digest) -> Result<(std::fs::File, u64), BlobError> {
        let path = self.path_of(digest);
        let f = std::fs::File::open(&path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => BlobError::NotFound(digest.clone()),
            _ => BlobError::Io {
                what: "open",
                path: path.clone(),
                source: e,
            },
        })?;
        let len = f.metadata().map_err(io_err("read", &path))?.len();
        Ok((f, len))
    }

    /// Removes every blob no live application uses whose retention has passed; `app_end`
    /// says where an application stands. The digests removed.
    pub fn sweep(
        &self,
        now_ms: u64,
        app_end: impl Fn(&ApplicationId) -> AppEnd,
    ) -> Result<Vec<Digest>, BlobError> {
        let retention = u64::try_from(self.conf.retention.as_millis()).unwrap_or(u64::MAX);
        let db = self.db();
        let mut removed = Vec::new();
        for rec in db.records()? {
            let Some(last) = rec.last_activity(&app_end) else {
                continue;
            };
            if now_ms.saturating_sub(last) < retention {
                continue;
            }
            let path = self.path_of(&rec.digest);
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "blob store: cannot remove a blob");
                    continue;
                }
            }
            db.remove(&rec.digest)?;
            removed.push(rec.digest);
        }
        Ok(removed)
    }
}

/// The bytes of one read of a blob being sent.
pub const CHUNK: usize = 256 * 1024;

/// A stored blob's bytes (from [`BlobStore::open_blob`]), [`CHUNK`] at a time, never the
/// whole file in memory: what the REST edge serves and what is pushed to other RMs.
pub fn read_chunks(
    file: std::fs::File,
) -> impl Stream<Item = Result<Vec<u8>, io::Error>> + Send + 'static {
    let file = tokio::fs::File::from_std(file);
    futures::stream::unfold(Some(file), |file| async move {
        use tokio::io::AsyncReadExt;
        let mut file = file?;
        let mut buf = vec![0u8; CHUNK];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(buf), Some(file)))
            }
            Err(e) => Some((Err(e), None)),
        }
    })
}

#[cfg(test)]
mod tests;
