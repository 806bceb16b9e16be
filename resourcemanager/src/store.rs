//! The RM state store: SQLite through rusqlite. It keeps what must survive a restart (the
//! applications with their submission contexts and final states, the restart epoch, the
//! token secret, and every accepted capacity-scheduler change, versioned), written before
//! the client is answered; and one usage record per finished application (`usage`: its
//! resource-milliseconds per type, for `/accounting`), written when its last container has
//! ended and kept after the application itself is forgotten (`max-completed-applications`);
//! and the users' tokens cancelled through `DELETE /ws/v1/cluster/delegation-token`
//! (`cancelled_user_tokens`: sequence number and max date, kept until that date).
//!
//! Schema changes are additive: tables are created if missing (`CREATE TABLE IF NOT
//! EXISTS`), record fields added later are `serde(default)`, and a one-off migration step is
//! marked done under a `meta` key (`usage-schema`: usage rows backfilled from the final
//! applications an older store kept).
//!
//! WAL mode with `synchronous=NORMAL`: a committed write survives a process crash; only an
//! operating-system crash may lose the last transactions, the trade YARN's LevelDB store
//! makes too.

use std::collections::BTreeMap;
use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};
use spindle_common::records::node::ContainerLaunchContext;
use spindle_common::states::{FinalApplicationStatus, YarnApplicationState};
use spindle_common::token::TokenSecret;
use spindle_common::{ApplicationId, ContainerId, NodeId, Resource};

use crate::core::labels::NodeLabels;
use crate::core::{AppQueue, AppRecord, AttemptRecord, Submission};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("state store {path}: {source}")]
    Sqlite {
        path: String,
        #[source]
        source: rusqlite::Error,
    },
    #[error("state store {path}: cannot create its directory: {source}")]
    Dir {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("state store {path}: cannot create it owner-only (0600): {source}")]
    File {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("state store {path}: record {key} is corrupt: {message}")]
    Corrupt {
        path: String,
        key: String,
        message: String,
    },
    #[error("state store {path} is empty (0 bytes), not a Spindle state store; it is left as it is: restore it from a backup, or start fresh with `resourcemanager --format-state-store` (which deletes it)")]
    Empty { path: String },
    #[error("state store {path} is not a Spindle state store ({why}); it is left as it is: point spindle.resourcemanager.state-store.path elsewhere, or start fresh with `resourcemanager --format-state-store` (which deletes it)")]
    Foreign { path: String, why: String },
    #[error("state store {path} is damaged ({what}: {message}); it is left as it is: restore it from a backup, or start fresh with `resourcemanager --format-state-store` (which deletes it)")]
    Damaged {
        path: String,
        what: &'static str,
        message: String,
    },
    #[error("state store {path} has schema version {found}, newer than this ResourceManager's {supported}; it is left as it is: run the Spindle release that wrote it")]
    NewerSchema {
        path: String,
        found: u32,
        supported: u32,
    },
    #[error("state store {path}: cannot format it: {source}")]
    Format {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

pub struct StateStore {
    conn: Connection,
    path: String,
}

/// The `meta` row naming a file as Spindle's, and the schema version this build writes.
const FORMAT_KEY: &str = "store-format";
const FORMAT_VALUE: &str = "spindle-rm-state-store";
const SCHEMA_KEY: &str = "schema-version";
pub const SCHEMA_VERSION: u32 = 1;
/// What every SQLite database file starts with.
const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// What `--format-state-store` removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Formatted {
    /// The files deleted (the store and its `-wal`/`-shm` companions), with their sizes.
    pub removed: Vec<(String, u64)>,
}

/// What a restarted RM gets back.
pub struct Recovered {
    pub epoch: u32,
    pub secret: TokenSecret,
    pub apps: Vec<AppRecord>,
    /// Records that could not be read, with the reason; logged, never fatal.
    pub skipped: Vec<String>,
}

#[derive(Serialize, Deserialize)]
struct StoredApp {
    #[serde(default)]
    node_label_expression: Option<String>,
    #[serde(default)]
    am_node_label_expression: Option<String>,
    id: ApplicationId,
    name: String,
    queue_requested: String,
    queue: String,
    user: String,
    priority: i32,
    application_type: String,
    tags: Vec<String>,
    am_memory_mb: i64,
    am_vcores: i64,
    #[serde(default)]
    am_extended: Vec<(String, i64)>,
    am_launch: ContainerLaunchContext,
    max_app_attempts: u32,
    keep_containers: bool,
    state: YarnApplicationState,
    final_status: FinalApplicationStatus,
    diagnostics: String,
    submit_time: u64,
    launch_time: u64,
    finish_time: u64,
    attempts: u32,
    memory_ms: i64,
    vcore_ms: i64,
    /// Absent in records written before work-preserving recovery.
    #[serde(default)]
    live_attempt: Option<StoredAttempt>,
    /// The `LIFETIME` deadline (ms since the epoch); absent when unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lifetime: Option<u64>,
    /// Resource-milliseconds per type; absent in records written before usage accounting
    /// (then `memory_ms` and `vcore_ms` stand for it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    resource_ms: Vec<(String, i64)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    preempted_ms: Vec<(String, i64)>,
}

/// One finished application's usage as the store keeps it (the `usage` table).
#[derive(Debug, Clone, PartialEq)]
pub struct UsageRecord {
    pub id: ApplicationId,
    pub user: String,
    /// The full queue path.
    pub queue: String,
    pub name: String,
    /// Submission and finish, ms since the epoch.
    pub start_time: u64,
    pub finish_time: u64,
    /// Resource-milliseconds per type, and those of preempted containers.
    pub resource_ms: Resource,
    pub preempted_ms: Resource,
}

/// The `meta` key marking the usage table's backfill done.
const USAGE_SCHEMA_KEY: &str = "usage-schema";

impl StateStore {
    /// Opens the store at `path`, creating it when no file is there. An existing file is
    /// checked before anything is written to it: a zero-byte, foreign (not SQLite, or SQLite
    /// without Spindle's `meta` rows) or damaged file, or one with a newer schema, is refused
    /// with a [`StoreError`] naming the problem, and left byte for byte as it was.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let p = path.display().to_string();
        match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Self::create(path)?,
            Err(source) => return Err(StoreError::File { path: p, source }),
            Ok(_) => Self::check_existing(path)?,
        }
        // Owner-only (the store holds the AM-RM token key), tightened if it was not; SQLite
        // gives its WAL and shared-memory files the database file's mode.
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(
                |source| StoreError::File {
                    path: p.clone(),
                    source,
                },
            )?;
        }
        let conn = Connection::open(path).map_err(|source| StoreError::Sqlite {
            path: p.clone(),
            source,
        })?;
        Self::init_schema(&conn).map_err(|source| StoreError::Sqlite {
            path: p.clone(),
            source,
        })?;
        Ok(Self { conn, path: p })
    }

    /// The tables (created if missing: schema changes are additive) and the connection's
    /// pragmas.
    fn init_schema(conn: &Connection) -> Result<(), rusqlite::Error> {
        conn.execute_batch(
            "PRAGMA journal_mode=WAL;
             PRAGMA synchronous=NORMAL;
             PRAGMA busy_timeout=5000;
             CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS apps (
                id TEXT PRIMARY KEY,
                record TEXT NOT NULL,
                state TEXT NOT NULL,
                finish_time INTEGER NOT NULL
             );
             CREATE TABLE IF NOT EXISTS sched_conf (
                version INTEGER PRIMARY KEY,
                source TEXT NOT NULL,
                user TEXT NOT NULL,
                time INTEGER NOT NULL,
                props TEXT NOT NULL
             );
             CREATE TABLE IF NOT EXISTS usage (
                id TEXT PRIMARY KEY,
                user TEXT NOT NULL,
                queue TEXT NOT NULL,
                name TEXT NOT NULL,
                start_time INTEGER NOT NULL,
                finish_time INTEGER NOT NULL,
                resource_ms TEXT NOT NULL,
                preempted_ms TEXT NOT NULL
             );
             CREATE INDEX IF NOT EXISTS usage_by_finish ON usage(finish_time);
             CREATE TABLE IF NOT EXISTS cancelled_user_tokens (
                seq INTEGER PRIMARY KEY,
                max_date INTEGER NOT NULL
             );",
        )?;
        // A store written before the format row was kept is stamped once it has passed
        // the checks (`check_existing` accepted its epoch and token key).
        conn.execute(
            "INSERT OR IGNORE INTO meta(key, value) VALUES(?1, ?2)",
            params![FORMAT_KEY, FORMAT_VALUE],
        )?;
        conn.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES(?1, ?2)",
            params![SCHEMA_KEY, SCHEMA_VERSION.to_string()],
        )?;
        Ok(())
    }

    /// A new store, built whole beside `path` and renamed into place, so a crash while it is
    /// made never leaves a zero-byte or half-made file under the store's name. It holds its
    /// format and schema rows, epoch -1 (the first `recover` makes it 0) and a fresh AM-RM
    /// token key.
    fn create(path: &Path) -> Result<(), StoreError> {
        let p = path.display().to_string();
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir).map_err(|source| StoreError::Dir {
                    path: p.clone(),
                    source,
                })?;
            }
        }
        let mut tmp_name = path.as_os_str().to_owned();
        tmp_name.push(format!(".new-{}", std::process::id()));
        let tmp = std::path::PathBuf::from(tmp_name);
        let _ = std::fs::remove_file(&tmp);
        {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)
                .map_err(|source| StoreError::File {
                    path: p.clone(),
                    source,
                })?;
        }
        let secret = TokenSecret::generate().map_err(|e| StoreError::Corrupt {
            path: p.clone(),
            key: "token-secret".into(),
            message: e.to_string(),
        })?;
        let made = (|| -> Result<(), rusqlite::Error> {
            let conn = Connection::open(&tmp)?;
            // The rollback journal while it is built: one file to rename.
            conn.execute_batch("PRAGMA journal_mode=DELETE;")?;
            conn.execute_batch(
                "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);",
            )?;
            conn.execute(
                "INSERT INTO meta(key, value) VALUES(?1, ?2), (?3, ?4), ('epoch', '-1'), ('token-secret', ?5)",
                params![
                    FORMAT_KEY,
                    FORMAT_VALUE,
                    SCHEMA_KEY,
                    SCHEMA_VERSION.to_string(),
                    secret.to_hex()
                ],
            )?;
            conn.close().map_err(|(_, e)| e)
        })();
        if let Err(source) = made {
            let _ = std::fs::remove_file(&tmp);
            return Err(StoreError::Sqlite { path: p, source });
        }
        std::fs::File::open(&tmp)
            .and_then(|f| f.sync_all())
            .and_then(|_| std::fs::rename(&tmp, path))
            .map_err(|source| {
                let _ = std::fs::remove_file(&tmp);
                StoreError::File {
                    path: p.clone(),
                    source,
                }
            })?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
        }
        Ok(())
    }

    /// Reads an existing file without writing a byte: SQLite's header, Spindle's format
    /// and schema rows, the epoch and token key, and SQLite's own page checks.
    fn check_existing(path: &Path) -> Result<(), StoreError> {
        use std::io::Read;
        let p = path.display().to_string();
        let file_err = |source| StoreError::File {
            path: p.clone(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(file_err)?;
        if !meta.is_file() {
            return Err(StoreError::Foreign {
                path: p,
                why: "not a regular file".into(),
            });
        }
        if meta.len() == 0 {
            return Err(StoreError::Empty { path: p });
        }
        let mut head = [0u8; 16];
        let n = std::fs::File::open(path)
            .and_then(|mut f| f.read(&mut head))
            .map_err(file_err)?;
        if n < head.len() || &head != SQLITE_MAGIC {
            return Err(StoreError::Foreign {
                path: p,
                why: "not an SQLite database".into(),
            });
        }
        let damaged = |what: &'static str| {
            let p = p.clone();
            move |e: rusqlite::Error| StoreError::Damaged {
                path: p.clone(),
                what,
                message: e.to_string(),
            }
        };
        // Read-only: no checkpoint, no journal change, nothing written on close.
        let conn = Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(damaged("opening it"))?;
        let has_meta: bool = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='meta'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map_err(damaged("reading its tables"))?
            > 0;
        if !has_meta {
            return Err(StoreError::Foreign {
                path: p,
                why: "an SQLite database without Spindle's meta table".into(),
            });
        }
        let get = |key: &str| -> Result<Option<String>, StoreError> {
            conn.query_row("SELECT value FROM meta WHERE key=?1", params![key], |r| {
                r.get::<_, String>(0)
            })
            .optional()
            .map_err(damaged("reading its meta table"))
        };
        let format = get(FORMAT_KEY)?;
        let epoch = get("epoch")?;
        match format.as_deref() {
            Some(FORMAT_VALUE) => {}
            Some(other) => {
                return Err(StoreError::Foreign {
                    path: p,
                    why: format!("its {FORMAT_KEY} is '{other}'"),
                })
            }
            // Written before the format row was kept: Spindle's if it has an epoch.
            None if epoch.is_some() => {}
            None => {
                return Err(StoreError::Foreign {
                    path: p,
                    why: format!("an SQLite database whose meta table has no {FORMAT_KEY} row"),
                })
            }
        }
        if let Some(v) = get(SCHEMA_KEY)? {
            match v.trim().parse::<u32>() {
                Ok(found) if found > SCHEMA_VERSION => {
                    return Err(StoreError::NewerSchema {
                        path: p,
                        found,
                        supported: SCHEMA_VERSION,
                    })
                }
                Ok(_) => {}
                Err(_) => {
                    return Err(StoreError::Corrupt {
                        path: p,
                        key: SCHEMA_KEY.into(),
                        message: format!("'{v}' is not a schema version"),
                    })
                }
            }
        }
        match epoch.as_deref().map(parse_epoch) {
            None => {
                return Err(StoreError::Corrupt {
                    path: p,
                    key: "epoch".into(),
                    message: "missing".into(),
                })
            }
            Some(Err(message)) => {
                return Err(StoreError::Corrupt {
                    path: p,
                    key: "epoch".into(),
                    message,
                })
            }
            Some(Ok(_)) => {}
        }
        match get("token-secret")?.as_deref().map(TokenSecret::from_hex) {
            Some(Ok(_)) => {}
            None => {
                return Err(StoreError::Corrupt {
                    path: p,
                    key: "token-secret".into(),
                    message: "missing (AM-RM tokens of running applications could not be checked; it is never regenerated silently)".into(),
                })
            }
            Some(Err(e)) => {
                return Err(StoreError::Corrupt {
                    path: p,
                    key: "token-secret".into(),
                    message: e.to_string(),
                })
            }
        }
        let check: String = conn
            .query_row("PRAGMA quick_check", [], |r| r.get(0))
            .map_err(damaged("checking its pages"))?;
        if check != "ok" {
            return Err(StoreError::Damaged {
                path: p,
                what: "SQLite's quick_check",
                message: check,
            });
        }
        Ok(())
    }

    /// YARN's `-format-state-store`: deletes the store at `path` and its `-wal`/`-shm`
    /// files (whatever they hold), so the next start creates a fresh one. Run it only while
    /// no ResourceManager uses the store.
    pub fn format(path: &Path) -> Result<Formatted, StoreError> {
        let mut removed = Vec::new();
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut name = path.as_os_str().to_owned();
            name.push(suffix);
            let f = std::path::PathBuf::from(name);
            match std::fs::symlink_metadata(&f) {
                Ok(m) => {
                    std::fs::remove_file(&f).map_err(|source| StoreError::Format {
                        path: f.display().to_string(),
                        source,
                    })?;
                    removed.push((f.display().to_string(), m.len()));
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(StoreError::Format {
                        path: f.display().to_string(),
                        source,
                    })
                }
            }
        }
        Ok(Formatted { removed })
    }

    fn sq(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    /// Bumps the restart epoch, loads the token secret (made with the store, never here)
    /// and reads every app.
    pub fn recover(&mut self) -> Result<Recovered, StoreError> {
        let tx = self.conn.transaction().map_err(|e| StoreError::Sqlite {
            path: self.path.clone(),
            source: e,
        })?;
        let get = |key: &str| -> Result<Option<String>, rusqlite::Error> {
            tx.query_row("SELECT value FROM meta WHERE key=?1", params![key], |r| {
                r.get::<_, String>(0)
            })
            .optional()
        };
        let epoch = get("epoch").map_err(|e| StoreError::Sqlite {
            path: self.path.clone(),
            source: e,
        })?;
        // `open` checked both; a store changed under a running RM is still named, never
        // reset to epoch 0 or given a new key.
        let epoch = match epoch.as_deref().map(parse_epoch) {
            Some(Ok(e)) => e.map_or(0, |e| e.saturating_add(1)),
            Some(Err(message)) => {
                return Err(StoreError::Corrupt {
                    path: self.path.clone(),
                    key: "epoch".into(),
                    message,
                })
            }
            None => {
                return Err(StoreError::Corrupt {
                    path: self.path.clone(),
                    key: "epoch".into(),
                    message: "missing".into(),
                })
            }
        };
        tx.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES('epoch', ?1)",
            params![epoch.to_string()],
        )
        .map_err(|e| StoreError::Sqlite {
            path: self.path.clone(),
            source: e,
        })?;
        let secret_hex = get("token-secret").map_err(|e| StoreError::Sqlite {
            path: self.path.clone(),
            source: e,
        })?;
        let secret = match secret_hex.as_deref().map(TokenSecret::from_hex) {
            Some(Ok(s)) => s,
            Some(Err(e)) => {
                return Err(StoreError::Corrupt {
                    path: self.path.clone(),
                    key: "token-secret".into(),
                    message: e.to_string(),
                })
            }
            None => {
                return Err(StoreError::Corrupt {
                    path: self.path.clone(),
                    key: "token-secret".into(),
                    message: "missing".into(),
                })
            }
        };
        tx.commit().map_err(|e| StoreError::Sqlite {
            path: self.path.clone(),
            source: e,
        })?;
        let mut apps = Vec::new();
        let mut skipped = Vec::new();
        let mut stmt = self
            .conn
            .prepare("SELECT id, record FROM apps ORDER BY id")
            .map_err(|e| StoreError::Sqlite {
                path: self.path.clone(),
                source: e,
            })?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .map_err(|e| StoreError::Sqlite {
                path: self.path.clone(),
                source: e,
            })?;
        for row in rows {
            let (id, json) = row.map_err(|e| StoreError::Sqlite {
                path: self.path.clone(),
                source: e,
            })?;
            match serde_json::from_str::<StoredApp>(&json) {
                Ok(s) => apps.push(from_stored(s)),
                Err(e) => skipped.push(format!("application {id}: {e}")),
            }
        }
        drop(stmt);
        self.backfill_usage(&apps)?;
        Ok(Recovered {
            epoch,
            secret,
            apps,
            skipped,
        })
    }

    /// Writes the application's record; a final one's usage record too, in the same
    /// transaction.
    pub fn put_app(&mut self, rec: &AppRecord) -> Result<(), StoreError> {
        let stored = to_stored(rec);
        let json = serde_json::to_string(&stored).map_err(|e| StoreError::Corrupt {
            path: self.path.clone(),
            key: rec.id.to_string(),
            message: e.to_string(),
        })?;
        let path = self.path.clone();
        let sq = |source| StoreError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(sq)?;
        tx.execute(
            "INSERT OR REPLACE INTO apps(id, record, state, finish_time) VALUES(?1, ?2, ?3, ?4)",
            params![
                rec.id.to_string(),
                json,
                rec.state.as_str(),
                rec.finish_time as i64
            ],
        )
        .map_err(sq)?;
        if rec.state.is_final() {
            put_usage(&tx, &usage_of(rec), "INSERT OR REPLACE").map_err(sq)?;
        }
        tx.commit().map_err(sq)?;
        Ok(())
    }

    /// Usage records of the applications that ran within `[from, to]` (ms since the epoch):
    /// finished at or after `from`, submitted at or before `to`. A corrupt row is skipped
    /// and named in the second list.
    pub fn usage_between(
        &self,
        from: u64,
        to: u64,
    ) -> Result<(Vec<UsageRecord>, Vec<String>), StoreError> {
        let clamp = |t: u64| i64::try_from(t).unwrap_or(i64::MAX);
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, user, queue, name, start_time, finish_time, resource_ms, preempted_ms
                 FROM usage WHERE finish_time >= ?1 AND start_time <= ?2 ORDER BY id",
            )
            .map_err(|e| self.sq(e))?;
        let rows = stmt
            .query_map(params![clamp(from), clamp(to)], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, i64>(5)?,
                    r.get::<_, String>(6)?,
                    r.get::<_, String>(7)?,
                ))
            })
            .map_err(|e| self.sq(e))?;
        let mut out = Vec::new();
        let mut skipped = Vec::new();
        for row in rows {
            let (id, user, queue, name, start, finish, res, pre) = row.map_err(|e| self.sq(e))?;
            let parsed = id
                .parse::<ApplicationId>()
                .map_err(|e| e.to_string())
                .and_then(|app| Ok((app, resource_json(&res)?, resource_json(&pre)?)));
            match parsed {
                Ok((app, resource_ms, preempted_ms)) => out.push(UsageRecord {
                    id: app,
                    user,
                    queue,
                    name,
                    start_time: start.max(0) as u64,
                    finish_time: finish.max(0) as u64,
                    resource_ms,
                    preempted_ms,
                }),
                Err(e) => skipped.push(format!("usage of {id}: {e}")),
            }
        }
        Ok((out, skipped))
    }

    /// Once per store: the final applications an older store kept get their usage rows
    /// (from `memorySeconds`/`vcoreSeconds` where no per-type figures were kept).
    fn backfill_usage(&mut self, apps: &[AppRecord]) -> Result<(), StoreError> {
        let path = self.path.clone();
        let sq = |source| StoreError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(sq)?;
        let done: Option<String> = tx
            .query_row(
                "SELECT value FROM meta WHERE key=?1",
                params![USAGE_SCHEMA_KEY],
                |r| r.get(0),
            )
            .optional()
            .map_err(sq)?;
        if done.is_none() {
            for rec in apps.iter().filter(|r| r.state.is_final()) {
                put_usage(&tx, &usage_of(rec), "INSERT OR IGNORE").map_err(sq)?;
            }
            tx.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES(?1, '1')",
                params![USAGE_SCHEMA_KEY],
            )
            .map_err(sq)?;
        }
        tx.commit().map_err(sq)?;
        Ok(())
    }

    pub fn delete_app(&mut self, id: &ApplicationId) -> Result<(), StoreError> {
        self.conn
            .execute("DELETE FROM apps WHERE id = ?1", params![id.to_string()])
            .map_err(|e| self.sq(e))?;
        Ok(())
    }
}

/// How many scheduler-configuration versions are kept (YARN's
/// `yarn.scheduler.configuration.store.max-logs`); only the newest one is ever read back, the
/// rest are an audit trail.
pub const SCHED_CONF_VERSIONS_KEPT: u64 = 1000;

/// Where a stored scheduler configuration came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedConfSource {
    /// `PUT /scheduler-conf`: the stored set wins over `capacity-scheduler.xml` at the next
    /// start, as with YARN's mutable configuration stores.
    Mutation,
    /// `refreshQueues` from the file: the file is authoritative again (the set is kept for
    /// the audit trail and the version count only).
    Refresh,
}

impl SchedConfSource {
    fn as_str(&self) -> &'static str {
        match self {
            Self::Mutation => "mutation",
            Self::Refresh => "refresh",
        }
    }
}

/// Node labels and centrally set attributes as stored (one JSON value under the meta key
/// `node-labels`).
#[derive(Serialize, Deserialize, Default)]
struct StoredLabels {
    #[serde(default)]
    cluster: BTreeMap<String, bool>,
    #[serde(default)]
    mapping: BTreeMap<String, String>,
    #[serde(default)]
    attributes: BTreeMap<String, BTreeMap<String, String>>,
}

/// One stored version of the live capacity-scheduler property set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSchedConf {
    pub version: u64,
    pub source: SchedConfSource,
    pub user: String,
    pub time: u64,
    pub props: BTreeMap<String, String>,
}

impl StateStore {
    /// Writes the cluster's node labels, mappings and central attributes (replacing them).
    pub fn put_labels(&mut self, l: &NodeLabels) -> Result<(), StoreError> {
        let stored = StoredLabels {
            cluster: l.cluster.clone(),
            mapping: l.mapping.clone(),
            attributes: l.attributes.clone(),
        };
        let json = serde_json::to_string(&stored).map_err(|e| StoreError::Corrupt {
            path: self.path.clone(),
            key: "node-labels".into(),
            message: e.to_string(),
        })?;
        self.conn
            .execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES('node-labels', ?1)",
                params![json],
            )
            .map(|_| ())
            .map_err(|e| StoreError::Sqlite {
                path: self.path.clone(),
                source: e,
            })
    }

    /// Records a cancelled user token (`DELETE /ws/v1/cluster/delegation-token`) by its
    /// sequence number until its max date, and forgets the cancellations past theirs.
    pub fn cancel_user_token(
        &mut self,
        seq: u64,
        max_date: u64,
        now: u64,
    ) -> Result<(), StoreError> {
        let sql = |e| StoreError::Sqlite {
            path: self.path.clone(),
            source: e,
        };
        let i = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        self.conn
            .execute(
                "DELETE FROM cancelled_user_tokens WHERE max_date < ?1",
                params![i(now)],
            )
            .map_err(sql)?;
        self.conn
            .execute(
                "INSERT OR REPLACE INTO cancelled_user_tokens(seq, max_date) VALUES(?1, ?2)",
                params![i(seq), i(max_date)],
            )
            .map(|_| ())
            .map_err(sql)
    }

    /// The cancelled user tokens not yet past their max date at `now`: (sequence number,
    /// max date).
    pub fn cancelled_user_tokens(&self, now: u64) -> Result<Vec<(u64, u64)>, StoreError> {
        let sql = |e| StoreError::Sqlite {
            path: self.path.clone(),
            source: e,
        };
        let mut st = self
            .conn
            .prepare("SELECT seq, max_date FROM cancelled_user_tokens WHERE max_date >= ?1")
            .map_err(sql)?;
        let rows = st
            .query_map(params![i64::try_from(now).unwrap_or(i64::MAX)], |r| {
                Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64))
            })
            .map_err(sql)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(sql)
    }

    /// The stored node labels (empty when none were ever set).
    pub fn labels(&self) -> Result<NodeLabels, StoreError> {
        let json: Option<String> = self
            .conn
            .query_row("SELECT value FROM meta WHERE key='node-labels'", [], |r| {
                r.get(0)
            })
            .optional()
            .map_err(|e| StoreError::Sqlite {
                path: self.path.clone(),
                source: e,
            })?;
        let Some(json) = json else {
            return Ok(NodeLabels::default());
        };
        let s: StoredLabels = serde_json::from_str(&json).map_err(|e| StoreError::Corrupt {
            path: self.path.clone(),
            key: "node-labels".into(),
            message: e.to_string(),
        })?;
        Ok(NodeLabels {
            cluster: s.cluster,
            mapping: s.mapping,
            attributes: s.attributes,
        })
    }

    /// Records an applied scheduler configuration as `version` and drops versions older than
    /// the newest [`SCHED_CONF_VERSIONS_KEPT`], in one transaction.
    pub fn put_sched_conf(&mut self, conf: &StoredSchedConf) -> Result<(), StoreError> {
        let json = serde_json::to_string(&conf.props).map_err(|e| StoreError::Corrupt {
            path: self.path.clone(),
            key: format!("scheduler configuration version {}", conf.version),
            message: e.to_string(),
        })?;
        let version = i64::try_from(conf.version).unwrap_or(i64::MAX);
        let time = i64::try_from(conf.time).unwrap_or(i64::MAX);
        let tx = self.conn.transaction().map_err(|e| StoreError::Sqlite {
            path: self.path.clone(),
            source: e,
        })?;
        let r = tx
            .execute(
                "INSERT OR REPLACE INTO sched_conf(version, source, user, time, props) VALUES(?1, ?2, ?3, ?4, ?5)",
                params![version, conf.source.as_str(), conf.user, time, json],
            )
            .and_then(|_| {
                tx.execute(
                    "DELETE FROM sched_conf WHERE version <= ?1",
                    params![version.saturating_sub(SCHED_CONF_VERSIONS_KEPT as i64)],
                )
            })
            .and_then(|_| tx.commit());
        r.map(|_| ()).map_err(|e| StoreError::Sqlite {
            path: self.path.clone(),
            source: e,
        })
    }

    /// The newest stored scheduler configuration, if any change was ever applied.
    pub fn latest_sched_conf(&self) -> Result<Option<StoredSchedConf>, StoreError> {
        let row = self
            .conn
            .query_row(
                "SELECT version, source, user, time, props FROM sched_conf ORDER BY version DESC LIMIT 1",
                [],
                |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, i64>(3)?,
                        r.get::<_, String>(4)?,
                    ))
                },
            )
            .optional()
            .map_err(|e| self.sq(e))?;
        let Some((version, source, user, time, json)) = row else {
            return Ok(None);
        };
        let corrupt = |message: String| StoreError::Corrupt {
            path: self.path.clone(),
            key: format!("scheduler configuration version {version}"),
            message,
        };
        let source = match source.as_str() {
            "mutation" => SchedConfSource::Mutation,
            "refresh" => SchedConfSource::Refresh,
            other => return Err(corrupt(format!("unknown source '{other}'"))),
        };
        let props: BTreeMap<String, String> =
            serde_json::from_str(&json).map_err(|e| corrupt(e.to_string()))?;
        Ok(Some(StoredSchedConf {
            version: u64::try_from(version).unwrap_or(0),
            source,
            user,
            time: u64::try_from(time).unwrap_or(0),
            props,
        }))
    }
}

/// The stored form of [`AttemptRecord`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredAttempt {
    am_container: ContainerId,
    am_node: NodeId,
    am_node_http: String,
    start_time: u64,
    host: String,
    rpc_port: i32,
    tracking_url: String,
}

fn to_stored(r: &AppRecord) -> StoredApp {
    StoredApp {
        node_label_expression: r.sub.node_label_expression.clone(),
        am_node_label_expression: r.sub.am_node_label_expression.clone(),
        id: r.id,
        name: r.sub.name.clone(),
        queue_requested: r.sub.queue.clone(),
        queue: r.queue.to_string(),
        user: r.sub.user.clone(),
        priority: r.sub.priority,
        application_type: r.sub.application_type.clone(),
        tags: r.sub.tags.clone(),
        am_memory_mb: r.sub.am_resource.memory_mb,
        am_vcores: r.sub.am_resource.vcores,
        am_extended: r
            .sub
            .am_resource
            .extended()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        am_launch: r.sub.am_launch.clone().into(),
        max_app_attempts: r.sub.max_app_attempts,
        keep_containers: r.sub.keep_containers,
        state: r.state,
        final_status: r.final_status,
        diagnostics: r.diagnostics.clone(),
        submit_time: r.submit_time,
        launch_time: r.launch_time,
        finish_time: r.finish_time,
        attempts: r.attempts,
        memory_ms: r.memory_ms,
        vcore_ms: r.vcore_ms,
        lifetime: r.lifetime,
        resource_ms: entries_of(&r.usage.resource_ms),
        preempted_ms: entries_of(&r.usage.preempted_ms),
        live_attempt: r.live_attempt.as_ref().map(|a| StoredAttempt {
            am_container: a.am_container,
            am_node: a.am_node.clone(),
            am_node_http: a.am_node_http.clone(),
            start_time: a.start_time,
            host: a.host.clone(),
            rpc_port: a.rpc_port,
            tracking_url: a.tracking_url.clone(),
        }),
    }
}

fn from_stored(s: StoredApp) -> AppRecord {
    let usage = crate::core::usage::AppUsage {
        resource_ms: if s.resource_ms.is_empty() {
            // Written before per-type usage: memory and vcores are all it kept.
            Resource::new(s.memory_ms, s.vcore_ms)
        } else {
            resource_of(s.resource_ms)
        },
        preempted_ms: resource_of(s.preempted_ms),
    };
    let mut am_resource = Resource::new(s.am_memory_mb, s.am_vcores);
    for (k, v) in &s.am_extended {
        am_resource.set(k, *v);
    }
    AppRecord {
        id: s.id,
        sub: Submission {
            name: s.name,
            queue: s.queue_requested,
            user: s.user,
            priority: s.priority,
            application_type: s.application_type,
            tags: s.tags,
            am_resource,
            am_launch: s.am_launch.into(),
            max_app_attempts: s.max_app_attempts,
            keep_containers: s.keep_containers,
            unmanaged_am: false,
            groups: Vec::new(),
            node_label_expression: s.node_label_expression,
            am_node_label_expression: s.am_node_label_expression,
        },
        queue: AppQueue::recovered(s.queue),
        state: s.state,
        final_status: s.final_status,
        diagnostics: s.diagnostics,
        submit_time: s.submit_time,
        launch_time: s.launch_time,
        finish_time: s.finish_time,
        attempts: s.attempts,
        memory_ms: s.memory_ms,
        vcore_ms: s.vcore_ms,
        lifetime: s.lifetime,
        live_attempt: s.live_attempt.map(|a| AttemptRecord {
            am_container: a.am_container,
            am_node: a.am_node,
            am_node_http: a.am_node_http,
            start_time: a.start_time,
            host: a.host,
            rpc_port: a.rpc_port,
            tracking_url: a.tracking_url,
        }),
        usage,
    }
}

fn usage_of(rec: &AppRecord) -> UsageRecord {
    UsageRecord {
        id: rec.id,
        user: rec.sub.user.clone(),
        queue: rec.queue.to_string(),
        name: rec.sub.name.clone(),
        start_time: rec.submit_time,
        finish_time: rec.finish_time,
        resource_ms: rec.usage.resource_ms.clone(),
        preempted_ms: rec.usage.preempted_ms.clone(),
    }
}

fn put_usage(tx: &rusqlite::Transaction<'_>, u: &UsageRecord, verb: &str) -> rusqlite::Result<()> {
    let json = |r: &Resource| {
        let m: BTreeMap<&str, i64> = r.entries().collect();
        serde_json::to_string(&m).unwrap_or_else(|_| "{}".into())
    };
    tx.execute(
        &format!(
            "{verb} INTO usage(id, user, queue, name, start_time, finish_time, resource_ms, preempted_ms)
             VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
        ),
        params![
            u.id.to_string(),
            u.user,
            u.queue,
            u.name,
            i64::try_from(u.start_time).unwrap_or(i64::MAX),
            i64::try_from(u.finish_time).unwrap_or(i64::MAX),
            json(&u.resource_ms),
            json(&u.preempted_ms),
        ],
    )?;
    Ok(())
}

fn resource_json(s: &str) -> Result<Resource, String> {
    let m: BTreeMap<String, i64> = serde_json::from_str(s).map_err(|e| e.to_string())?;
    Ok(resource_of(m))
}

fn resource_of(entries: impl IntoIterator<Item = (String, i64)>) -> Resource {
    let mut r = Resource::zero();
    for (k, v) in entries {
        r.set(&k, v);
    }
    r
}

fn entries_of(r: &Resource) -> Vec<(String, i64)> {
    r.entries()
        .filter(|(_, v)| *v != 0)
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

/// The stored epoch: `-1` for a store no RM has started on yet (`None`), else the last
/// RM's epoch.
fn parse_epoch(v: &str) -> Result<Option<u32>, String> {
    match v.trim() {
        "-1" => Ok(None),
        t => t
            .parse::<u32>()
            .map(Some)
            .map_err(|_| format!("'{v}' is not an epoch")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> AppRecord {
        AppRecord {
            id: ApplicationId::new(5, 1),
            sub: Submission {
                name: "n".into(),
                queue: "default".into(),
                user: "u".into(),
                priority: 0,
                application_type: "YARN".into(),
                tags: vec!["t".into()],
                am_resource: Resource::new(1024, 1).with("yarn.io/gpu", 1),
                am_launch: Default::default(),
                max_app_attempts: 0,
                keep_containers: false,
                unmanaged_am: false,
                groups: vec![],
                node_label_expression: None,
                am_node_label_expression: None,
            },
            queue: AppQueue::recovered("root.default".into()),
            state: YarnApplicationState::ACCEPTED,
            final_status: FinalApplicationStatus::UNDEFINED,
            diagnostics: String::new(),
            submit_time: 1,
            launch_time: 0,
            finish_time: 0,
            attempts: 1,
            memory_ms: 0,
            vcore_ms: 0,
            lifetime: Some(1_900_000_000_000),
            live_attempt: Some(AttemptRecord {
                am_container: "container_5_0001_01_000001".parse().unwrap(),
                am_node: "127.0.0.1:4545".parse().unwrap(),
                am_node_http: "127.0.0.1:4545".into(),
                start_time: 2,
                host: "h".into(),
                rpc_port: -1,
                tracking_url: String::new(),
            }),
            usage: Default::default(),
        }
    }

    #[test]
    fn usage_records_are_written_when_final_and_outlive_the_app_record() {
        use spindle_common::resource::GPU;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rm.sqlite");
        let mut rec = record();
        rec.live_attempt = None;
        rec.usage
            .add(&Resource::new(2048, 2).with(GPU, 4), 3_600_000, false);
        rec.usage
            .add(&Resource::new(1024, 1).with(GPU, 2), 1_800_000, true);
        {
            let mut s = StateStore::open(&path).unwrap();
            s.recover().unwrap();
            s.put_app(&rec).unwrap();
            assert!(
                s.usage_between(0, u64::MAX).unwrap().0.is_empty(),
                "no usage row while the application runs"
            );
            rec.state = YarnApplicationState::FINISHED;
            rec.finish_time = 3_600_001;
            s.put_app(&rec).unwrap();
            s.delete_app(&rec.id).unwrap();
        }
        let mut s = StateStore::open(&path).unwrap();
        let r = s.recover().unwrap();
        assert!(r.apps.is_empty(), "the app record was forgotten");
        let (rows, skipped) = s.usage_between(0, u64::MAX).unwrap();
        assert!(skipped.is_empty(), "{skipped:?}");
        assert_eq!(rows.len(), 1);
        let u = &rows[0];
        assert_eq!(
            (u.id, u.user.as_str(), u.queue.as_str()),
            (rec.id, "u", "root.default")
        );
        assert_eq!((u.start_time, u.finish_time), (1, 3_600_001));
        assert_eq!(u.resource_ms.get(GPU), 4 * 3_600_000 + 2 * 1_800_000);
        assert_eq!(u.preempted_ms.get(GPU), 2 * 1_800_000);
        assert_eq!(u.resource_ms, rec.usage.resource_ms);
        // The window: finished before `from` or submitted after `to` is left out.
        assert!(s.usage_between(3_600_002, u64::MAX).unwrap().0.is_empty());
        assert!(s.usage_between(0, 0).unwrap().0.is_empty());
        assert_eq!(s.usage_between(3_600_001, 3_600_001).unwrap().0.len(), 1);
    }

    #[test]
    fn an_older_store_gets_usage_rows_for_its_final_apps_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rm.sqlite");
        {
            let mut s = StateStore::open(&path).unwrap();
            s.recover().unwrap();
            // What an older RM wrote: a final record without per-type usage, no usage row.
            let mut rec = record();
            rec.state = YarnApplicationState::FINISHED;
            rec.finish_time = 10;
            rec.memory_ms = 5_000;
            rec.vcore_ms = 7;
            let mut stored = serde_json::to_value(to_stored(&rec)).unwrap();
            stored.as_object_mut().unwrap().remove("resource_ms");
            s.conn
                .execute(
                    "INSERT INTO apps(id, record, state, finish_time) VALUES(?1, ?2, 'FINISHED', 10)",
                    params![rec.id.to_string(), stored.to_string()],
                )
                .unwrap();
            s.conn
                .execute("DELETE FROM meta WHERE key=?1", params![USAGE_SCHEMA_KEY])
                .unwrap();
        }
        let mut s = StateStore::open(&path).unwrap();
        let r = s.recover().unwrap();
        assert_eq!(r.apps[0].usage.resource_ms, Resource::new(5_000, 7));
        let rows = s.usage_between(0, u64::MAX).unwrap().0;
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].resource_ms, Resource::new(5_000, 7));
        // Done once: a row deleted later is not written back at the next start.
        s.conn.execute("DELETE FROM usage", []).unwrap();
        s.recover().unwrap();
        assert!(s.usage_between(0, u64::MAX).unwrap().0.is_empty());
    }

    #[test]
    fn apps_epoch_and_secret_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/rm.sqlite");
        let rec = record();
        let secret = {
            let mut s = StateStore::open(&path).unwrap();
            let r = s.recover().unwrap();
            assert_eq!(r.epoch, 0);
            s.put_app(&rec).unwrap();
            r.secret
        };
        let mut s = StateStore::open(&path).unwrap();
        let r = s.recover().unwrap();
        assert_eq!(r.epoch, 1);
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "the store holds the token secret");
        }
        assert_eq!(r.secret, secret);
        assert_eq!(r.apps.len(), 1);
        assert_eq!(r.apps[0].sub.am_resource, rec.sub.am_resource);
        assert_eq!(r.apps[0].live_attempt, rec.live_attempt);
        assert_eq!(r.apps[0].lifetime, rec.lifetime);
        s.delete_app(&rec.id).unwrap();
        assert!(s.recover().unwrap().apps.is_empty());
    }

    #[test]
    fn scheduler_conf_versions_survive_reopen_and_are_pruned() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rm.sqlite");
        let conf = |version: u64, source| StoredSchedConf {
            version,
            source,
            user: "admin".into(),
            time: 7,
            props: BTreeMap::from([(
                "yarn.scheduler.capacity.root.queues".to_string(),
                format!("a{version}"),
            )]),
        };
        {
            let mut s = StateStore::open(&path).unwrap();
            assert_eq!(s.latest_sched_conf().unwrap(), None);
            s.put_sched_conf(&conf(1, SchedConfSource::Mutation))
                .unwrap();
            s.put_sched_conf(&conf(2, SchedConfSource::Refresh))
                .unwrap();
            s.put_sched_conf(&conf(3, SchedConfSource::Mutation))
                .unwrap();
        }
        let mut s = StateStore::open(&path).unwrap();
        assert_eq!(
            s.latest_sched_conf().unwrap(),
            Some(conf(3, SchedConfSource::Mutation))
        );
        s.put_sched_conf(&conf(
            3 + SCHED_CONF_VERSIONS_KEPT,
            SchedConfSource::Refresh,
        ))
        .unwrap();
        let n: i64 = s
            .conn
            .query_row("SELECT COUNT(*) FROM sched_conf", [], |r| r.get(0))
            .unwrap();
        assert_eq!(
            n, 1,
            "versions older than the newest {SCHED_CONF_VERSIONS_KEPT} are dropped"
        );
        assert_eq!(
            s.latest_sched_conf().unwrap().unwrap().source,
            SchedConfSource::Refresh
        );
    }

    /// A store made and recovered once, then closed (its WAL checkpointed).
    fn made_store(dir: &Path) -> std::path::PathBuf {
        let path = dir.join("rm.sqlite");
        let mut s = StateStore::open(&path).unwrap();
        s.recover().unwrap();
        s.put_app(&record()).unwrap();
        drop(s);
        path
    }

    fn set_meta(path: &Path, sql: &str) {
        let c = Connection::open(path).unwrap();
        c.execute_batch(sql).unwrap();
        c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);").unwrap();
        drop(c);
    }

    fn refused_and_untouched(path: &Path) -> StoreError {
        let before = std::fs::read(path).unwrap();
        let err = match StateStore::open(path).and_then(|mut s| s.recover().map(|_| s)) {
            Ok(_) => panic!("{} was accepted", path.display()),
            Err(e) => e,
        };
        assert_eq!(
            std::fs::read(path).unwrap(),
            before,
            "{} was changed by the refusal ({err})",
            path.display()
        );
        let line = err.to_string();
        assert!(!line.contains('\n'), "one line: {line}");
        assert!(line.contains(&path.display().to_string()), "{line}");
        err
    }

    #[test]
    fn a_new_store_is_made_whole_and_starts_at_epoch_zero() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("rm.sqlite");
        let mut s = StateStore::open(&path).unwrap();
        assert_eq!(s.recover().unwrap().epoch, 0);
        drop(s);
        let names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(!names.iter().any(|n| n.contains(".new-")), "{names:?}");
        let mut s = StateStore::open(&path).unwrap();
        assert_eq!(s.recover().unwrap().epoch, 1);
    }

    #[test]
    fn zero_byte_foreign_and_corrupt_stores_are_refused_and_left_byte_identical() {
        let dir = tempfile::tempdir().unwrap();
        // Zero bytes.
        let empty = dir.path().join("empty.sqlite");
        std::fs::write(&empty, b"").unwrap();
        assert!(matches!(
            refused_and_untouched(&empty),
            StoreError::Empty { .. }
        ));
        // Not SQLite.
        let text = dir.path().join("text.sqlite");
        std::fs::write(&text, b"these are somebody's notes\n").unwrap();
        assert!(matches!(
            refused_and_untouched(&text),
            StoreError::Foreign { .. }
        ));
        // SQLite, but somebody else's.
        let other = dir.path().join("other.sqlite");
        {
            let c = Connection::open(&other).unwrap();
            c.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES(1);")
                .unwrap();
        }
        let e = refused_and_untouched(&other);
        assert!(matches!(e, StoreError::Foreign { .. }), "{e}");
        // A corrupt epoch is named, never reset to 0.
        let d = tempfile::tempdir().unwrap();
        let path = made_store(d.path());
        set_meta(&path, "UPDATE meta SET value='x7' WHERE key='epoch';");
        let e = refused_and_untouched(&path);
        assert!(
            matches!(&e, StoreError::Corrupt { key, .. } if key == "epoch"),
            "{e}"
        );
        // A missing token key is named, never regenerated.
        let d = tempfile::tempdir().unwrap();
        let path = made_store(d.path());
        set_meta(&path, "DELETE FROM meta WHERE key='token-secret';");
        let e = refused_and_untouched(&path);
        assert!(
            matches!(&e, StoreError::Corrupt { key, .. } if key == "token-secret"),
            "{e}"
        );
        // A newer schema is not read by an older RM.
        let d = tempfile::tempdir().unwrap();
        let path = made_store(d.path());
        set_meta(
            &path,
            "UPDATE meta SET value='99' WHERE key='schema-version';",
        );
        assert!(matches!(
            refused_and_untouched(&path),
            StoreError::NewerSchema { found: 99, .. }
        ));
        // Damaged pages (the apps table's page overwritten with garbage).
        let d = tempfile::tempdir().unwrap();
        let path = made_store(d.path());
        let mut bytes = std::fs::read(&path).unwrap();
        let page = 4096;
        assert!(bytes.len() >= 3 * page, "{} bytes", bytes.len());
        for b in &mut bytes[page + 8..2 * page] {
            *b = 0xA5;
        }
        std::fs::write(&path, &bytes).unwrap();
        let e = refused_and_untouched(&path);
        assert!(
            matches!(e, StoreError::Damaged { .. } | StoreError::Foreign { .. }),
            "{e}"
        );
    }

    #[test]
    fn a_store_from_before_the_format_row_is_accepted_and_stamped() {
        let d = tempfile::tempdir().unwrap();
        let path = made_store(d.path());
        set_meta(
            &path,
            "DELETE FROM meta WHERE key IN ('store-format', 'schema-version');",
        );
        let mut s = StateStore::open(&path).unwrap();
        let r = s.recover().unwrap();
        assert_eq!(r.apps.len(), 1);
        assert_eq!(r.epoch, 1);
        let format: String = s
            .conn
            .query_row("SELECT value FROM meta WHERE key='store-format'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(format, FORMAT_VALUE);
    }

    #[test]
    fn format_removes_the_store_and_its_companions() {
        let d = tempfile::tempdir().unwrap();
        let empty = d.path().join("rm.sqlite");
        std::fs::write(&empty, b"").unwrap();
        std::fs::write(d.path().join("rm.sqlite-wal"), b"w").unwrap();
        let f = StateStore::format(&empty).unwrap();
        assert_eq!(f.removed.len(), 2, "{f:?}");
        assert!(!empty.exists());
        let mut s = StateStore::open(&empty).unwrap();
        assert_eq!(s.recover().unwrap().epoch, 0);
        // Nothing there: nothing removed.
        let none = d.path().join("none.sqlite");
        assert!(StateStore::format(&none).unwrap().removed.is_empty());
    }
}
