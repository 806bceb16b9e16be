//! Opening the SQLite state store: a new one is created `0600`, built whole beside its path
//! and renamed into place; an existing file is checked, without a byte written, before it is
//! used (SQLite header, `store-format` and `schema-version` rows, epoch, AM-RM key,
//! `quick_check`: a zero-byte, foreign or damaged file, or one with a newer schema, is
//! refused with a `StoreError` naming the problem and left as it was); and YARN's
//! `-format-state-store` (`SqliteStore::format`) deletes one.

use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension};
use spindle_common::token::TokenSecret;

use super::sqlite::SqliteStore;
use super::StoreError;

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

impl SqliteStore {
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
        let conn = Connection::open(path)
            .and_then(|conn| Self::init_schema(&conn).map(|()| conn))
            .map_err(|source| backend(&p, source))?;
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
             );
             CREATE TABLE IF NOT EXISTS fairshare_usage (
                queue TEXT NOT NULL,
                user TEXT NOT NULL,
                decayed REAL NOT NULL,
                raw REAL NOT NULL,
                at INTEGER NOT NULL,
                PRIMARY KEY (queue, user)
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
            return Err(backend(&p, source));
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
}

/// A rusqlite failure as the store's error, naming the file.
pub(super) fn backend(path: &str, source: rusqlite::Error) -> StoreError {
    StoreError::Backend {
        path: path.to_string(),
        source: Box::new(source),
    }
}

/// The stored epoch: `-1` for a store no RM has started on yet (`None`), else the last
/// RM's epoch.
pub(super) fn parse_epoch(v: &str) -> Result<Option<u32>, String> {
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
    use crate::store::suite::record;
    use crate::store::StateStore;

    /// A store made and recovered once, then closed (its WAL checkpointed).
    fn made_store(dir: &Path) -> std::path::PathBuf {
        let path = dir.join("rm.sqlite");
        let mut s = SqliteStore::open(&path).unwrap();
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
        let err = match SqliteStore::open(path).and_then(|mut s| s.recover().map(|_| s)) {
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
        let mut s = SqliteStore::open(&path).unwrap();
        assert_eq!(s.recover().unwrap().epoch, 0);
        drop(s);
        let names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(!names.iter().any(|n| n.contains(".new-")), "{names:?}");
        let mut s = SqliteStore::open(&path).unwrap();
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
        let mut s = SqliteStore::open(&path).unwrap();
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
        let f = SqliteStore::format(&empty).unwrap();
        assert_eq!(f.removed.len(), 2, "{f:?}");
        assert!(!empty.exists());
        let mut s = SqliteStore::open(&empty).unwrap();
        assert_eq!(s.recover().unwrap().epoch, 0);
        // Nothing there: nothing removed.
        let none = d.path().join("none.sqlite");
        assert!(SqliteStore::format(&none).unwrap().removed.is_empty());
    }
}
