//! The etcd state store, shared by a cluster's active and standby RMs: one key per record
//! under `/spindle/<cluster-id>/` (layout in [`crate::ha::keys`]), values as the SQLite
//! store's (JSON through `records.rs`).
//!
//! Fencing: every write is one etcd transaction guarded by
//! `Compare(CreateRevision(leader key) == the term's revision)`; when the compare fails
//! nothing is written, the call returns [`StoreError::Fenced`] and the term's
//! [`FenceAlarm`] is raised, so a deposed active (paused past its lease, cut off, or
//! superseded) can write nothing and steps down. Reads are linearizable and unfenced.
//!
//! Bounds (etcd takes at most 1.5 MiB per request and keeps 2 GiB by default): one record
//! is refused over [`MAX_WRITE_BYTES`] ([`StoreError::TooLarge`], the RM keeps running, as
//! YARN-5006 asks); completed applications are forgotten by the driver past
//! `yarn.resourcemanager.max-completed-applications`; usage records are pruned to the
//! newest [`USAGE_RECORDS_KEPT`] (by submission order) at each recovery
//! and every [`PRUNE_EVERY`] finished applications; scheduler-configuration versions to
//! [`SCHED_CONF_VERSIONS_KEPT`]; cancelled tokens past their max date at each cancellation.
//! Reads go in pages of [`PAGE`] keys, so no answer outgrows the client's message limit.

use etcd_client::{
    Compare, CompareOp, DeleteOptions, GetOptions, SortOrder, SortTarget, Txn, TxnOp, TxnOpResponse,
};
use spindle_common::token::TokenSecret;
use spindle_common::ApplicationId;

use super::etcd_bridge::{Bridge, CallError};
use super::records::{from_stored, to_stored, StoredApp, StoredConf, StoredLabels, StoredUsage};
use super::sqlite_open::{parse_epoch, SCHEMA_VERSION};
use super::{
    Recovered, StateStore, StoreError, StoredSchedConf, UsageRecord, SCHED_CONF_VERSIONS_KEPT,
};
use crate::core::labels::NodeLabels;
use crate::core::scheduler::decayed_usage::DecayedUsage;
use crate::core::scheduler::FairshareRecord;
use crate::core::AppRecord;
use crate::ha::keys::Family;
use crate::ha::{EtcdEndpoints, EtcdKeys, FenceAlarm, Leadership, LostBecause, Term};

/// How many usage records (finished applications, for `/accounting`) are kept.
pub const USAGE_RECORDS_KEPT: usize = 100_000;
/// How many finished applications between two prunings of the usage records.
const PRUNE_EVERY: u64 = 1_000;
/// The most one write may carry: under etcd's default `--max-request-bytes` (1.5 MiB),
/// with room for the keys and the transaction around them.
pub const MAX_WRITE_BYTES: usize = 1_400_000;
/// Keys read per request.
const PAGE: i64 = 500;
/// Operations per transaction (etcd's default `--max-txn-ops` is 128).
const MAX_TXN_OPS: usize = 100;

/// The state store on etcd, fenced by one leadership term.
pub struct EtcdStore {
    bridge: Bridge,
    keys: EtcdKeys,
    fence: Term,
    alarm: FenceAlarm,
    /// `etcd <endpoints> <prefix>`, naming the store in errors.
    name: String,
    finished_since_prune: u64,
    /// [`USAGE_RECORDS_KEPT`], lowered by tests.
    usage_kept: usize,
}

/// The writes of one transaction, with their size.
#[derive(Default)]
struct Writes {
    ops: Vec<TxnOp>,
    bytes: usize,
    largest: (String, usize),
}

impl Writes {
    fn put(&mut self, key: String, value: String) {
        let n = key.len() + value.len();
        self.bytes += n;
        if n > self.largest.1 {
            self.largest = (key.clone(), n);
        }
        self.ops.push(TxnOp::put(key, value, None));
    }

    fn delete(&mut self, key: String) {
        self.bytes += key.len();
        self.ops.push(TxnOp::delete(key, None));
    }

    /// Deletes the keys in `[start, end)`.
    fn delete_range(&mut self, start: String, end: String) {
        self.bytes += start.len() + end.len();
        let opts = DeleteOptions::new().with_range(end);
        self.ops.push(TxnOp::delete(start, Some(opts)));
    }
}

/// The first key after every key starting with `prefix`.
fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

impl EtcdStore {
    /// Opens the store of the cluster `keys` names for the active holding `leadership`:
    /// connects, refuses a store written by a newer schema, and makes the token secret once
    /// per cluster (fenced, like every write).
    pub fn open(
        endpoints: &EtcdEndpoints,
        keys: EtcdKeys,
        leadership: &Leadership,
    ) -> Result<Self, StoreError> {
        Self::open_fenced(endpoints, keys, leadership.term.clone(), leadership.alarm())
    }

    /// [`EtcdStore::open`] with the term and its alarm given apart.
    pub fn open_fenced(
        endpoints: &EtcdEndpoints,
        keys: EtcdKeys,
        fence: Term,
        alarm: FenceAlarm,
    ) -> Result<Self, StoreError> {
        let name = format!("etcd {} {}", endpoints.list(), keys.prefix());
        let bridge = Bridge::connect(endpoints).map_err(|e| backend(&name, e))?;
        let store = Self {
            bridge,
            keys,
            fence,
            alarm,
            name,
            finished_since_prune: 0,
            usage_kept: USAGE_RECORDS_KEPT,
        };
        store.check_schema()?;
        store.make_secret_once()?;
        Ok(store)
    }

    /// The term this store writes for.
    pub fn term(&self) -> &Term {
        &self.fence
    }

    fn err(&self, e: CallError) -> StoreError {
        backend(&self.name, e)
    }

    fn corrupt(&self, key: impl Into<String>, message: impl ToString) -> StoreError {
        StoreError::Corrupt {
            path: self.name.clone(),
            key: key.into(),
            message: message.to_string(),
        }
    }

    fn check_schema(&self) -> Result<(), StoreError> {
        let key = self.keys.meta("schema");
        let Some((v, _)) = self.get(&key)? else {
            return Ok(());
        };
        let found: u32 = v.trim().parse().map_err(|e| self.corrupt(&key, e))?;
        if found > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema {
                path: self.name.clone(),
                found,
                supported: SCHEMA_VERSION,
            });
        }
        Ok(())
    }

    /// The token secret, epoch `-1` and schema version, written only if no secret is there.
    fn make_secret_once(&self) -> Result<(), StoreError> {
        let secret_key = self.keys.meta("token-secret");
        if self.get(&secret_key)?.is_some() {
            return Ok(());
        }
        let secret = TokenSecret::generate().map_err(|e| self.corrupt(&secret_key, e))?;
        let mut w = Writes::default();
        w.put(secret_key.clone(), secret.to_hex());
        w.put(self.keys.meta("epoch"), "-1".into());
        w.put(self.keys.meta("schema"), SCHEMA_VERSION.to_string());
        // Another RM of this term cannot exist; the inner compare only keeps a secret made
        // earlier (never remade).
        let absent = Compare::create_revision(secret_key, CompareOp::Equal, 0);
        self.fenced(vec![absent], w).map(|_| ())
    }

    /// One fenced transaction: `writes` happen only while the term holds and `conditions`
    /// are true. Ok(false) when the term holds but a condition was false (nothing written).
    fn fenced(&self, conditions: Vec<Compare>, w: Writes) -> Result<bool, StoreError> {
        if w.bytes > MAX_WRITE_BYTES {
            return Err(StoreError::TooLarge {
                path: self.name.clone(),
                key: w.largest.0,
                bytes: w.bytes,
                limit: MAX_WRITE_BYTES,
            });
        }
        let nested = !conditions.is_empty();
        let ops = if nested {
            vec![TxnOp::txn(Txn::new().when(conditions).and_then(w.ops))]
        } else {
            w.ops
        };
        let fence = Compare::create_revision(
            self.fence.key.clone(),
            CompareOp::Equal,
            self.fence.revision,
        );
        let txn = Txn::new().when([fence]).and_then(ops);
        let resp = self.bridge.txn(txn).map_err(|e| self.err(e))?;
        if !resp.succeeded() {
            self.alarm.raise(LostBecause::Fenced);
            return Err(StoreError::Fenced {
                path: self.name.clone(),
                holder: self.fence.holder.clone(),
                key: self.fence.key.clone(),
                revision: self.fence.revision,
            });
        }
        if !nested {
            return Ok(true);
        }
        Ok(resp
            .op_responses()
            .into_iter()
            .any(|r| matches!(r, TxnOpResponse::Txn(t) if t.succeeded())))
    }

    /// One key's value and modification revision.
    fn get(&self, key: &str) -> Result<Option<(String, i64)>, StoreError> {
        let k = key.to_string();
        let resp = self.bridge.get(k, None).map_err(|e| self.err(e))?;
        let Some(kv) = resp.kvs().first() else {
            return Ok(None);
        };
        let v = kv.value_str().map_err(|e| self.corrupt(key, e))?;
        Ok(Some((v.to_string(), kv.mod_revision())))
    }

    /// Every record of a family, in key order, read in pages: (key, value).
    fn family(&self, family: Family) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let prefix = self.keys.family(family);
        let end = prefix_end(&prefix);
        let mut from = prefix.into_bytes();
        let mut out = Vec::new();
        loop {
            let opts = GetOptions::new().with_range(end.clone()).with_limit(PAGE);
            let start = from.clone();
            let mut resp = self
                .bridge
                .get(start, Some(opts))
                .map_err(|e| self.err(e))?;
            let more = resp.more();
            let kvs = resp.take_kvs();
            let Some(last) = kvs.last() else { break };
            from = last.key().to_vec();
            from.push(0);
            for kv in kvs {
                let (k, v) = kv.into_key_value();
                out.push((String::from_utf8_lossy(&k).into_owned(), v));
            }
            if !more {
                break;
            }
        }
        Ok(out)
    }

    /// Deletes the given keys, [`MAX_TXN_OPS`] to a transaction.
    fn delete_keys(&self, keys: Vec<String>) -> Result<(), StoreError> {
        for chunk in keys.chunks(MAX_TXN_OPS) {
            let mut w = Writes::default();
            for k in chunk {
                w.delete(k.clone());
            }
            self.fenced(Vec::new(), w)?;
        }
        Ok(())
    }

    /// Deletes the oldest usage records past the newest [`USAGE_RECORDS_KEPT`].
    fn prune_usage(&mut self) -> Result<(), StoreError> {
        self.finished_since_prune = 0;
        let prefix = self.keys.family(Family::Usage);
        let end = prefix_end(&prefix);
        let opts = GetOptions::new().with_range(end.clone()).with_count_only();
        let p = prefix.clone();
        let count = self
            .bridge
            .get(p, Some(opts))
            .map_err(|e| self.err(e))?
            .count();
        let excess = usize::try_from(count)
            .unwrap_or(0)
            .saturating_sub(self.usage_kept);
        if excess == 0 {
            return Ok(());
        }
        let opts = GetOptions::new()
            .with_range(end)
            .with_keys_only()
            .with_limit(i64::try_from(excess).unwrap_or(i64::MAX));
        let resp = self
            .bridge
            .get(prefix, Some(opts))
            .map_err(|e| self.err(e))?;
        let oldest = resp
            .kvs()
            .iter()
            .map(|kv| String::from_utf8_lossy(kv.key()).into_owned())
            .collect();
        self.delete_keys(oldest)
    }

    fn json<T: serde::Serialize>(&self, key: &str, v: &T) -> Result<String, StoreError> {
        serde_json::to_string(v).map_err(|e| self.corrupt(key, e))
    }
}

fn backend(name: &str, e: CallError) -> StoreError {
    StoreError::Backend {
        path: name.to_string(),
        source: Box::new(e),
    }
}

impl StateStore for EtcdStore {
    fn recover(&mut self) -> Result<Recovered, StoreError> {
        let epoch_key = self.keys.meta("epoch");
        let (epoch, epoch_rev) = match self.get(&epoch_key)? {
            Some((v, rev)) => match parse_epoch(&v) {
                Ok(e) => (e.map_or(0, |e| e.saturating_add(1)), rev),
                Err(m) => return Err(self.corrupt("epoch", m)),
            },
            None => return Err(self.corrupt("epoch", "missing")),
        };
        let secret = match self.get(&self.keys.meta("token-secret"))? {
            Some((hex, _)) => {
                TokenSecret::from_hex(&hex).map_err(|e| self.corrupt("token-secret", e))?
            }
            None => return Err(self.corrupt("token-secret", "missing")),
        };
        let mut w = Writes::default();
        w.put(epoch_key.clone(), epoch.to_string());
        let unchanged = Compare::mod_revision(epoch_key, CompareOp::Equal, epoch_rev);
        if !self.fenced(vec![unchanged], w)? {
            return Err(self.corrupt("epoch", "changed while this RM recovered"));
        }
        let mut apps = Vec::new();
        let mut skipped = Vec::new();
        for (key, value) in self.family(Family::Apps)? {
            match serde_json::from_slice::<StoredApp>(&value) {
                Ok(s) => apps.push(from_stored(s)),
                Err(e) => skipped.push(format!("application {key}: {e}")),
            }
        }
        apps.sort_by_key(|a| a.id);
        self.prune_usage()?;
        Ok(Recovered {
            epoch,
            secret,
            apps,
            skipped,
        })
    }

    fn put_app(&mut self, rec: &AppRecord) -> Result<(), StoreError> {
        let key = self.keys.record(Family::Apps, &rec.id.to_string());
        let mut w = Writes::default();
        w.put(key.clone(), self.json(&key, &to_stored(rec))?);
        let fin = rec.state.is_final();
        if fin {
            let ukey = self.keys.usage(&rec.id);
            let usage = StoredUsage::from(&UsageRecord::of(rec));
            w.put(ukey.clone(), self.json(&ukey, &usage)?);
        }
        self.fenced(Vec::new(), w)?;
        if fin {
            self.finished_since_prune += 1;
            if self.finished_since_prune >= PRUNE_EVERY {
                self.prune_usage()?;
            }
        }
        Ok(())
    }

    fn delete_app(&mut self, id: &ApplicationId) -> Result<(), StoreError> {
        let mut w = Writes::default();
        w.delete(self.keys.record(Family::Apps, &id.to_string()));
        self.fenced(Vec::new(), w).map(|_| ())
    }

    fn usage_between(
        &self,
        from: u64,
        to: u64,
    ) -> Result<(Vec<UsageRecord>, Vec<String>), StoreError> {
        let mut rows = Vec::new();
        let mut skipped = Vec::new();
        for (key, value) in self.family(Family::Usage)? {
            match serde_json::from_slice::<StoredUsage>(&value) {
                Ok(s) => {
                    let u = UsageRecord::from(s);
                    if u.finish_time >= from && u.start_time <= to {
                        rows.push(u);
                    }
                }
                Err(e) => skipped.push(format!("usage {key}: {e}")),
            }
        }
        rows.sort_by_key(|u| u.id);
        Ok((rows, skipped))
    }

    fn put_labels(&mut self, labels: &NodeLabels) -> Result<(), StoreError> {
        let key = self.keys.meta("node-labels");
        let mut w = Writes::default();
        w.put(key.clone(), self.json(&key, &StoredLabels::from(labels))?);
        self.fenced(Vec::new(), w).map(|_| ())
    }

    fn labels(&self) -> Result<NodeLabels, StoreError> {
        let Some((json, _)) = self.get(&self.keys.meta("node-labels"))? else {
            return Ok(NodeLabels::default());
        };
        let s: StoredLabels =
            serde_json::from_str(&json).map_err(|e| self.corrupt("node-labels", e))?;
        Ok(s.into())
    }

    fn cancel_user_token(&mut self, seq: u64, max_date: u64, now: u64) -> Result<(), StoreError> {
        let expired: Vec<String> = self
            .family(Family::CancelledTokens)?
            .into_iter()
            .filter(|(_, v)| {
                std::str::from_utf8(v)
                    .ok()
                    .and_then(|v| v.parse::<u64>().ok())
                    .is_some_and(|max| max < now)
            })
            .map(|(k, _)| k)
            .collect();
        self.delete_keys(expired)?;
        let mut w = Writes::default();
        w.put(
            self.keys.numbered(Family::CancelledTokens, seq),
            max_date.to_string(),
        );
        self.fenced(Vec::new(), w).map(|_| ())
    }

    fn is_user_token_cancelled(&self, seq: u64, now: u64) -> Result<bool, StoreError> {
        let key = self.keys.numbered(Family::CancelledTokens, seq);
        let Some((v, _)) = self.get(&key)? else {
            return Ok(false);
        };
        crate::ha::cancelled_tokens::still_cancelled(&v, now)
            .ok_or_else(|| self.corrupt(&key, format!("'{v}' is not a date")))
    }

    fn put_sched_conf(&mut self, conf: &StoredSchedConf) -> Result<(), StoreError> {
        let key = self.keys.numbered(Family::SchedConf, conf.version);
        let mut w = Writes::default();
        w.put(key.clone(), self.json(&key, &StoredConf::from(conf))?);
        // Versions at or below `version - KEPT` go, as in the SQLite store.
        let oldest_kept = conf
            .version
            .saturating_sub(SCHED_CONF_VERSIONS_KEPT)
            .saturating_add(1);
        w.delete_range(
            self.keys.numbered(Family::SchedConf, 0),
            self.keys.numbered(Family::SchedConf, oldest_kept),
        );
        self.fenced(Vec::new(), w).map(|_| ())
    }

    fn latest_sched_conf(&self) -> Result<Option<StoredSchedConf>, StoreError> {
        let prefix = self.keys.family(Family::SchedConf);
        let opts = GetOptions::new()
            .with_range(prefix_end(&prefix))
            .with_sort(SortTarget::Key, SortOrder::Descend)
            .with_limit(1);
        let resp = self
            .bridge
            .get(prefix, Some(opts))
            .map_err(|e| self.err(e))?;
        let Some(kv) = resp.kvs().first() else {
            return Ok(None);
        };
        let key = String::from_utf8_lossy(kv.key()).into_owned();
        let stored: StoredConf =
            serde_json::from_slice(kv.value()).map_err(|e| self.corrupt(&key, e))?;
        StoredSchedConf::try_from(stored)
            .map(Some)
            .map_err(|e| self.corrupt(key, e))
    }

    /// One key per leaf and user (a queue path has no `/`, so the key is unique), at most
    /// [`MAX_TXN_OPS`] to a fenced transaction: each record is written whole.
    fn put_fairshare(&mut self, records: &[FairshareRecord]) -> Result<(), StoreError> {
        for chunk in records.chunks(MAX_TXN_OPS) {
            let mut w = Writes::default();
            for r in chunk {
                let key = self
                    .keys
                    .record(Family::Fairshare, &format!("{}/{}", r.queue, r.user));
                let stored = StoredFairshare {
                    queue: r.queue.clone(),
                    user: r.user.clone(),
                    decayed: r.usage.decayed,
                    raw: r.usage.raw,
                    at: r.usage.at,
                };
                w.put(key.clone(), self.json(&key, &stored)?);
            }
            self.fenced(Vec::new(), w)?;
        }
        Ok(())
    }

    fn fairshare(&self) -> Result<Vec<FairshareRecord>, StoreError> {
        let mut out = Vec::new();
        for (key, value) in self.family(Family::Fairshare)? {
            let s: StoredFairshare =
                serde_json::from_slice(&value).map_err(|e| self.corrupt(&key, e))?;
            if !(s.decayed.is_finite() && s.raw.is_finite()) {
                return Err(self.corrupt(&key, "usage is not a finite number"));
            }
            out.push(FairshareRecord {
                queue: s.queue,
                user: s.user,
                usage: DecayedUsage {
                    decayed: s.decayed,
                    raw: s.raw,
                    at: s.at,
                },
            });
        }
        out.sort_by(|a, b| (&a.queue, &a.user).cmp(&(&b.queue, &b.user)));
        Ok(out)
    }
}

/// A user's decayed usage in one leaf, as etcd keeps it.
#[derive(serde::Serialize, serde::Deserialize)]
struct StoredFairshare {
    queue: String,
    user: String,
    decayed: f64,
    raw: f64,
    at: u64,
}

#[cfg(test)]
#[path = "etcd_tests.rs"]
mod tests;
