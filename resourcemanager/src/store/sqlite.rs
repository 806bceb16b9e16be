//! The SQLite state store, through rusqlite (opening, checking and formatting a file are in
//! `sqlite_open.rs`).
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

use rusqlite::{params, Connection, OptionalExtension};
use spindle_common::token::TokenSecret;
use spindle_common::{ApplicationId, Resource};

use super::records::{
    from_stored, resource_json, source_name, source_of, to_stored, StoredApp, StoredLabels,
};
use super::sqlite_open::{backend, parse_epoch};
use super::{
    Recovered, StateStore, StoreError, StoredSchedConf, UsageRecord, SCHED_CONF_VERSIONS_KEPT,
};
use crate::core::labels::NodeLabels;
use crate::core::scheduler::decayed_usage::DecayedUsage;
use crate::core::scheduler::FairshareRecord;
use crate::core::AppRecord;

/// The state store in one SQLite file.
pub struct SqliteStore {
    pub(super) conn: Connection,
    pub(super) path: String,
}

/// The `meta` key marking the usage table's backfill done.
const USAGE_SCHEMA_KEY: &str = "usage-schema";

/// A value as SQLite's INTEGER keeps it (saturating).
fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl SqliteStore {
    /// A rusqlite failure as the store's error, naming the file.
    fn sq(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        |source| backend(&self.path, source)
    }

    fn corrupt(&self, key: impl Into<String>, message: impl ToString) -> StoreError {
        StoreError::Corrupt {
            path: self.path.clone(),
            key: key.into(),
            message: message.to_string(),
        }
    }

    /// Bumps the epoch and reads the token secret, in one transaction.
    fn next_epoch(&mut self) -> Result<(u32, TokenSecret), StoreError> {
        let path = self.path.clone();
        let sq = |source| backend(&path, source);
        let corrupt = |key: &str, message: String| StoreError::Corrupt {
            path: path.clone(),
            key: key.into(),
            message,
        };
        let tx = self.conn.transaction().map_err(sq)?;
        let get = |key: &str| -> Result<Option<String>, StoreError> {
            tx.query_row("SELECT value FROM meta WHERE key=?1", params![key], |r| {
                r.get::<_, String>(0)
            })
            .optional()
            .map_err(sq)
        };
        // `open` checked both; a store changed under a running RM is still named, never
        // reset to epoch 0 or given a new key.
        let epoch = match get("epoch")?.as_deref().map(parse_epoch) {
            Some(Ok(e)) => e.map_or(0, |e| e.saturating_add(1)),
            Some(Err(message)) => return Err(corrupt("epoch", message)),
            None => return Err(corrupt("epoch", "missing".into())),
        };
        let secret = match get("token-secret")?.as_deref().map(TokenSecret::from_hex) {
            Some(Ok(s)) => s,
            Some(Err(e)) => return Err(corrupt("token-secret", e.to_string())),
            None => return Err(corrupt("token-secret", "missing".into())),
        };
        tx.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES('epoch', ?1)",
            params![epoch.to_string()],
        )
        .map_err(sq)?;
        tx.commit().map_err(sq)?;
        Ok((epoch, secret))
    }

    /// Every stored application; a record that cannot be read is named in the second list.
    fn read_apps(&self) -> Result<(Vec<AppRecord>, Vec<String>), StoreError> {
        let mut apps = Vec::new();
        let mut skipped = Vec::new();
        let mut stmt = self
            .conn
            .prepare("SELECT id, record FROM apps ORDER BY id")
            .map_err(self.sq())?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .map_err(self.sq())?;
        for row in rows {
            let (id, json) = row.map_err(self.sq())?;
            match serde_json::from_str::<StoredApp>(&json) {
                Ok(s) => apps.push(from_stored(s)),
                Err(e) => skipped.push(format!("application {id}: {e}")),
            }
        }
        Ok((apps, skipped))
    }

    /// Once per store: the final applications an older store kept get their usage rows
    /// (from `memorySeconds`/`vcoreSeconds` where no per-type figures were kept).
    fn backfill_usage(&mut self, apps: &[AppRecord]) -> Result<(), StoreError> {
        let path = self.path.clone();
        let sq = |source| backend(&path, source);
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
                put_usage(&tx, &UsageRecord::of(rec), "INSERT OR IGNORE").map_err(sq)?;
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
}

impl StateStore for SqliteStore {
    fn recover(&mut self) -> Result<Recovered, StoreError> {
        let (epoch, secret) = self.next_epoch()?;
        let (apps, skipped) = self.read_apps()?;
        self.backfill_usage(&apps)?;
        Ok(Recovered {
            epoch,
            secret,
            apps,
            skipped,
        })
    }

    fn put_app(&mut self, rec: &AppRecord) -> Result<(), StoreError> {
        let json = serde_json::to_string(&to_stored(rec))
            .map_err(|e| self.corrupt(rec.id.to_string(), e))?;
        let path = self.path.clone();
        let sq = |source| backend(&path, source);
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
            put_usage(&tx, &UsageRecord::of(rec), "INSERT OR REPLACE").map_err(sq)?;
        }
        tx.commit().map_err(sq)?;
        Ok(())
    }

    fn delete_app(&mut self, id: &ApplicationId) -> Result<(), StoreError> {
        self.conn
            .execute("DELETE FROM apps WHERE id = ?1", params![id.to_string()])
            .map_err(self.sq())?;
        Ok(())
    }

    fn usage_between(
        &self,
        from: u64,
        to: u64,
    ) -> Result<(Vec<UsageRecord>, Vec<String>), StoreError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, user, queue, name, start_time, finish_time, resource_ms, preempted_ms
                 FROM usage WHERE finish_time >= ?1 AND start_time <= ?2 ORDER BY id",
            )
            .map_err(self.sq())?;
        let rows = stmt
            .query_map(params![int(from), int(to)], |r| {
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
            .map_err(self.sq())?;
        let mut out = Vec::new();
        let mut skipped = Vec::new();
        for row in rows {
            let (id, user, queue, name, start, finish, res, pre) = row.map_err(self.sq())?;
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

    fn put_labels(&mut self, l: &NodeLabels) -> Result<(), StoreError> {
        let json = serde_json::to_string(&StoredLabels::from(l))
            .map_err(|e| self.corrupt("node-labels", e))?;
        self.conn
            .execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES('node-labels', ?1)",
                params![json],
            )
            .map(|_| ())
            .map_err(self.sq())
    }

    fn labels(&self) -> Result<NodeLabels, StoreError> {
        let json: Option<String> = self
            .conn
            .query_row("SELECT value FROM meta WHERE key='node-labels'", [], |r| {
                r.get(0)
            })
            .optional()
            .map_err(self.sq())?;
        let Some(json) = json else {
            return Ok(NodeLabels::default());
        };
        let s: StoredLabels =
            serde_json::from_str(&json).map_err(|e| self.corrupt("node-labels", e))?;
        Ok(s.into())
    }

    fn cancel_user_token(&mut self, seq: u64, max_date: u64, now: u64) -> Result<(), StoreError> {
        self.conn
            .execute(
                "DELETE FROM cancelled_user_tokens WHERE max_date < ?1",
                params![int(now)],
            )
            .map_err(self.sq())?;
        self.conn
            .execute(
                "INSERT OR REPLACE INTO cancelled_user_tokens(seq, max_date) VALUES(?1, ?2)",
                params![int(seq), int(max_date)],
            )
            .map(|_| ())
            .map_err(self.sq())
    }

    fn is_user_token_cancelled(&self, seq: u64, now: u64) -> Result<bool, StoreError> {
        self.conn
            .query_row(
                "SELECT 1 FROM cancelled_user_tokens WHERE seq = ?1 AND max_date >= ?2",
                params![int(seq), int(now)],
                |_| Ok(()),
            )
            .optional()
            .map(|row| row.is_some())
            .map_err(self.sq())
    }

    fn put_sched_conf(&mut self, conf: &StoredSchedConf) -> Result<(), StoreError> {
        let json = serde_json::to_string(&conf.props).map_err(|e| {
            self.corrupt(
                format!("scheduler configuration version {}", conf.version),
                e,
            )
        })?;
        let version = int(conf.version);
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(|e| backend(&path, e))?;
        let r = tx
            .execute(
                "INSERT OR REPLACE INTO sched_conf(version, source, user, time, props) VALUES(?1, ?2, ?3, ?4, ?5)",
                params![version, source_name(conf.source), conf.user, int(conf.time), json],
            )
            .and_then(|_| {
                tx.execute(
                    "DELETE FROM sched_conf WHERE version <= ?1",
                    params![version.saturating_sub(SCHED_CONF_VERSIONS_KEPT as i64)],
                )
            })
            .and_then(|_| tx.commit());
        r.map(|_| ()).map_err(|e| backend(&path, e))
    }

    fn latest_sched_conf(&self) -> Result<Option<StoredSchedConf>, StoreError> {
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
            .map_err(self.sq())?;
        let Some((version, source, user, time, json)) = row else {
            return Ok(None);
        };
        let key = format!("scheduler configuration version {version}");
        let source = source_of(&source).map_err(|e| self.corrupt(key.clone(), e))?;
        let props: BTreeMap<String, String> =
            serde_json::from_str(&json).map_err(|e| self.corrupt(key, e))?;
        Ok(Some(StoredSchedConf {
            version: u64::try_from(version).unwrap_or(0),
            source,
            user,
            time: u64::try_from(time).unwrap_or(0),
            props,
        }))
    }

    fn put_fairshare(&mut self, records: &[FairshareRecord]) -> Result<(), StoreError> {
        let tx = self
            .conn
            .transaction()
            .map_err(|e| backend(&self.path, e))?;
        for r in records {
            tx.execute(
                "INSERT OR REPLACE INTO fairshare_usage(queue, user, decayed, raw, at)
                 VALUES(?1, ?2, ?3, ?4, ?5)",
                params![
                    r.queue,
                    r.user,
                    r.usage.decayed,
                    r.usage.raw,
                    int(r.usage.at)
                ],
            )
            .map_err(|e| backend(&self.path, e))?;
        }
        tx.commit().map_err(|e| backend(&self.path, e))
    }

    fn fairshare(&self) -> Result<Vec<FairshareRecord>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT queue, user, decayed, raw, at FROM fairshare_usage ORDER BY queue, user",
            )
            .map_err(self.sq())?;
        let rows = stmt
            .query_map([], |row| {
                Ok(FairshareRecord {
                    queue: row.get(0)?,
                    user: row.get(1)?,
                    usage: DecayedUsage {
                        decayed: row.get(2)?,
                        raw: row.get(3)?,
                        at: u64::try_from(row.get::<_, i64>(4)?).unwrap_or(0),
                    },
                })
            })
            .map_err(self.sq())?;
        let mut out = Vec::new();
        for r in rows {
            let r = r.map_err(self.sq())?;
            if !(r.usage.decayed.is_finite() && r.usage.raw.is_finite()) {
                return Err(self.corrupt(
                    format!("fairshare_usage {} {}", r.queue, r.user),
                    "usage is not a finite number",
                ));
            }
            out.push(r);
        }
        Ok(out)
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
            int(u.start_time),
            int(u.finish_time),
            json(&u.resource_ms),
            json(&u.preempted_ms),
        ],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::suite::{self, record};
    use crate::store::SchedConfSource;
    use spindle_common::states::YarnApplicationState;

    #[test]
    fn the_sqlite_store_passes_the_store_suite() {
        let dir = tempfile::tempdir().unwrap();
        let n = std::cell::Cell::new(0);
        suite::run(|| {
            n.set(n.get() + 1);
            SqliteStore::open(&dir.path().join(format!("rm{}.sqlite", n.get()))).unwrap()
        });
    }

    #[test]
    fn apps_usage_tokens_epoch_and_secret_survive_reopen() {
        use spindle_common::resource::GPU;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/rm.sqlite");
        let live = record();
        let mut done = record();
        done.id = ApplicationId::new(5, 2);
        done.live_attempt = None;
        done.state = YarnApplicationState::FINISHED;
        done.finish_time = 3_600_001;
        done.usage
            .add(&Resource::new(2048, 2).with(GPU, 4), 3_600_000, false);
        let secret = {
            let mut s = SqliteStore::open(&path).unwrap();
            let r = s.recover().unwrap();
            assert_eq!(r.epoch, 0);
            s.put_app(&live).unwrap();
            s.put_app(&done).unwrap();
            s.delete_app(&done.id).unwrap();
            s.cancel_user_token(7, u64::MAX / 2, 1).unwrap();
            r.secret
        };
        let mut s = SqliteStore::open(&path).unwrap();
        let r = s.recover().unwrap();
        assert_eq!(r.epoch, 1);
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "the store holds the token secret");
        }
        assert_eq!(r.secret, secret);
        assert_eq!(r.apps.len(), 1);
        assert_eq!(r.apps[0].sub.am_resource, live.sub.am_resource);
        assert_eq!(r.apps[0].live_attempt, live.live_attempt);
        assert_eq!(r.apps[0].lifetime, live.lifetime);
        let (rows, skipped) = s.usage_between(0, u64::MAX).unwrap();
        assert!(skipped.is_empty(), "{skipped:?}");
        assert_eq!(rows, vec![UsageRecord::of(&done)]);
        assert!(s.is_user_token_cancelled(7, 2).unwrap());
    }

    #[test]
    fn an_older_store_gets_usage_rows_for_its_final_apps_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rm.sqlite");
        {
            let mut s = SqliteStore::open(&path).unwrap();
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
        let mut s = SqliteStore::open(&path).unwrap();
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
    fn an_older_store_without_decayed_usage_gets_the_table_and_keeps_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rm.sqlite");
        {
            let mut s = SqliteStore::open(&path).unwrap();
            s.recover().unwrap();
            s.put_app(&record()).unwrap();
            // What a store written before fair share with memory looks like.
            s.conn.execute("DROP TABLE fairshare_usage", []).unwrap();
        }
        let mut s = SqliteStore::open(&path).unwrap();
        let r = s.recover().unwrap();
        assert_eq!(r.apps.len(), 1);
        assert!(s.fairshare().unwrap().is_empty());
        let rec = crate::core::scheduler::FairshareRecord {
            queue: "root.a".into(),
            user: "alice".into(),
            usage: DecayedUsage {
                decayed: 1.5,
                raw: 2.0,
                at: 9,
            },
        };
        s.put_fairshare(std::slice::from_ref(&rec)).unwrap();
        drop(s);
        let s = SqliteStore::open(&path).unwrap();
        assert_eq!(s.fairshare().unwrap(), vec![rec]);
    }

    #[test]
    fn scheduler_conf_versions_survive_reopen_and_are_pruned() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rm.sqlite");
        let conf = suite::sched_conf;
        {
            let mut s = SqliteStore::open(&path).unwrap();
            assert_eq!(s.latest_sched_conf().unwrap(), None);
            s.put_sched_conf(&conf(1, SchedConfSource::Mutation))
                .unwrap();
            s.put_sched_conf(&conf(2, SchedConfSource::Refresh))
                .unwrap();
            s.put_sched_conf(&conf(3, SchedConfSource::Mutation))
                .unwrap();
        }
        let mut s = SqliteStore::open(&path).unwrap();
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
}
