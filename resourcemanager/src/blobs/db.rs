//! `blobs.sqlite`: the blob store's records. `blobs` (digest, size, when stored), `users`
//! (who uploaded each, and when they last uploaded or claimed it), `apps` (which
//! applications use each, and when they claimed it). Created 0600; schema changes are
//! additive.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension};
use spindle_common::image_ref::Digest;
use spindle_common::ApplicationId;

use super::BlobError;

/// Where an application using a blob stands, as the RM knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppEnd {
    /// Not finished: its blobs stay.
    Live,
    /// Finished at this time (ms).
    Ended(u64),
    /// Not known to the RM (never submitted, or forgotten): only its claim counts.
    Unknown,
}

/// One blob with everything its removal depends on.
#[derive(Debug, Clone)]
pub struct BlobRecord {
    pub digest: Digest,
    pub size: u64,
    pub stored_ms: u64,
    /// The latest upload or claim by any user.
    pub touched_ms: u64,
    /// (application, when it claimed the blob).
    pub apps: Vec<(ApplicationId, u64)>,
}

impl BlobRecord {
    /// When the retention period starts: `None` while an application using it is live.
    pub fn last_activity(&self, app_end: &impl Fn(&ApplicationId) -> AppEnd) -> Option<u64> {
        let mut last = self.stored_ms.max(self.touched_ms);
        for (app, claimed) in &self.apps {
            last = last.max(*claimed);
            match app_end(app) {
                AppEnd::Live => return None,
                AppEnd::Ended(t) => last = last.max(t),
                AppEnd::Unknown => {}
            }
        }
        Some(last)
    }
}

pub(super) struct BlobDb {
    conn: Connection,
    path: PathBuf,
}

fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl BlobDb {
    pub(super) fn open(path: &Path) -> Result<Self, BlobError> {
        use std::os::unix::fs::OpenOptionsExt;
        let db_err = |source| BlobError::Db {
            path: path.to_path_buf(),
            source,
        };
        // Created owner-only before SQLite opens it (its WAL files take its mode).
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)
            .map_err(|source| BlobError::Io {
                what: "create",
                path: path.to_path_buf(),
                source,
            })?;
        let conn = Connection::open(path).map_err(db_err)?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL;
             PRAGMA synchronous=NORMAL;
             CREATE TABLE IF NOT EXISTS blobs (
                 digest TEXT PRIMARY KEY, size INTEGER NOT NULL, stored_ms INTEGER NOT NULL);
             CREATE TABLE IF NOT EXISTS users (
                 digest TEXT NOT NULL, user TEXT NOT NULL, touched_ms INTEGER NOT NULL,
                 PRIMARY KEY (digest, user));
             CREATE TABLE IF NOT EXISTS apps (
                 digest TEXT NOT NULL, app TEXT NOT NULL, claimed_ms INTEGER NOT NULL,
                 PRIMARY KEY (digest, app));",
        )
        .map_err(db_err)?;
        Ok(Self {
            conn,
            path: path.to_path_buf(),
        })
    }

    fn err(&self) -> impl Fn(rusqlite::Error) -> BlobError + '_ {
        |source| BlobError::Db {
            path: self.path.clone(),
            source,
        }
    }

    pub(super) fn all_digests(&self) -> Result<Vec<Digest>, BlobError> {
        let mut st = self
            .conn
            .prepare("SELECT digest FROM blobs")
            .map_err(self.err())?;
        let rows = st
            .query_map([], |r| r.get::<_, String>(0))
            .map_err(self.err())?;
        let mut out = Vec::new();
        for r in rows {
            // A row that is not a digest is nobody's: skipped (and its file, if any, is
            // removed by the reconciliation as unrecorded).
            if let Ok(d) = r.map_err(self.err())?.parse() {
                out.push(d);
            }
        }
        Ok(out)
    }

    pub(super) fn size_of(&self, digest: &Digest) -> Result<Option<u64>, BlobError> {
        self.conn
            .query_row(
                "SELECT size FROM blobs WHERE digest = ?1",
                params![digest.to_string()],
                |r| r.get::<_, i64>(0),
            )
            .optional()
            .map(|s| s.map(to_u64))
            .map_err(self.err())
    }

    pub(super) fn size_for_user(
        &self,
        digest: &Digest,
        user: &str,
    ) -> Result<Option<u64>, BlobError> {
        self.conn
            .query_row(
                "SELECT b.size FROM blobs b JOIN users u ON u.digest = b.digest
                 WHERE b.digest = ?1 AND u.user = ?2",
                params![digest.to_string(), user],
                |r| r.get::<_, i64>(0),
            )
            .optional()
            .map(|s| s.map(to_u64))
            .map_err(self.err())
    }

    pub(super) fn size_for_app(
        &self,
        digest: &Digest,
        app: &ApplicationId,
    ) -> Result<Option<u64>, BlobError> {
        self.conn
            .query_row(
                "SELECT b.size FROM blobs b JOIN apps a ON a.digest = b.digest
                 WHERE b.digest = ?1 AND a.app = ?2",
                params![digest.to_string(), app.to_string()],
                |r| r.get::<_, i64>(0),
            )
            .optional()
            .map(|s| s.map(to_u64))
            .map_err(self.err())
    }

    /// The bytes of every blob `user` holds, each once.
    pub(super) fn bytes_of_user(&self, user: &str) -> Result<u64, BlobError> {
        self.conn
            .query_row(
                "SELECT COALESCE(SUM(b.size), 0) FROM blobs b JOIN users u ON u.digest = b.digest
                 WHERE u.user = ?1",
                params![user],
                |r| r.get::<_, i64>(0),
            )
            .map(to_u64)
            .map_err(self.err())
    }

    pub(super) fn insert(&self, digest: &Digest, size: u64, now_ms: u64) -> Result<(), BlobError> {
        self.conn
            .execute(
                "INSERT OR IGNORE INTO blobs (digest, size, stored_ms) VALUES (?1, ?2, ?3)",
                params![digest.to_string(), to_i64(size), to_i64(now_ms)],
            )
            .map(|_| ())
            .map_err(self.err())
    }

    /// `user` holds `digest` and `app` uses it, as of `now_ms`.
    pub(super) fn add_use(
        &self,
        digest: &Digest,
        user: &str,
        app: &ApplicationId,
        now_ms: u64,
    ) -> Result<(), BlobError> {
        let (d, now) = (digest.to_string(), to_i64(now_ms));
        self.conn
            .execute(
                "INSERT INTO users (digest, user, touched_ms) VALUES (?1, ?2, ?3)
                 ON CONFLICT (digest, user) DO UPDATE SET touched_ms = excluded.touched_ms",
                params![d, user, now],
            )
            .map_err(self.err())?;
        self.conn
            .execute(
                "INSERT INTO apps (digest, app, claimed_ms) VALUES (?1, ?2, ?3)
                 ON CONFLICT (digest, app) DO UPDATE SET claimed_ms = excluded.claimed_ms",
                params![d, app.to_string(), now],
            )
            .map(|_| ())
            .map_err(self.err())
    }

    pub(super) fn remove(&self, digest: &Digest) -> Result<(), BlobError> {
        let d = digest.to_string();
        for sql in [
            "DELETE FROM apps WHERE digest = ?1",
            "DELETE FROM users WHERE digest = ?1",
            "DELETE FROM blobs WHERE digest = ?1",
        ] {
            self.conn.execute(sql, params![d]).map_err(self.err())?;
        }
        Ok(())
    }

    /// Every blob with its users' latest touch and its applications.
    pub(super) fn records(&self) -> Result<Vec<BlobRecord>, BlobError> {
        let mut st = self
            .conn
            .prepare(
                "SELECT b.digest, b.size, b.stored_ms,
                        COALESCE((SELECT MAX(touched_ms) FROM users u WHERE u.digest = b.digest), 0)
                 FROM blobs b",
            )
            .map_err(self.err())?;
        let rows = st
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, i64>(3)?,
                ))
            })
            .map_err(self.err())?;
        let mut out = Vec::new();
        for row in rows {
            let (d, size, stored, touched) = row.map_err(self.err())?;
            let Ok(digest) = d.parse::<Digest>() else {
                continue;
            };
            out.push(BlobRecord {
                digest,
                size: to_u64(size),
                stored_ms: to_u64(stored),
                touched_ms: to_u64(touched),
                apps: Vec::new(),
            });
        }
        let index: std::collections::HashMap<String, usize> = out
            .iter()
            .enumerate()
            .map(|(i, r)| (r.digest.to_string(), i))
            .collect();
        let mut st = self
            .conn
            .prepare("SELECT digest, app, claimed_ms FROM apps")
            .map_err(self.err())?;
        let rows = st
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            })
            .map_err(self.err())?;
        for row in rows {
            let (d, app, claimed) = row.map_err(self.err())?;
            let (Some(i), Ok(app)) = (index.get(&d), app.parse::<ApplicationId>()) else {
                continue;
            };
            out[*i].apps.push((app, to_u64(claimed)));
        }
        Ok(out)
    }
}
