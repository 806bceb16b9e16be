//! The state store in memory, for tests: what it gives back is what a serializing backend
//! would (records pass through their stored form), and it passes the same suite as
//! [`super::SqliteStore`].

use std::collections::BTreeMap;

use spindle_common::token::TokenSecret;
use spindle_common::ApplicationId;

use super::records::{from_stored, to_stored};
use super::{
    Recovered, StateStore, StoreError, StoredSchedConf, UsageRecord, SCHED_CONF_VERSIONS_KEPT,
};
use crate::core::labels::NodeLabels;
use crate::core::scheduler::FairshareRecord;
use crate::core::AppRecord;

pub(crate) struct MemoryStore {
    /// `None` until the first recovery (the SQLite store's `-1`).
    epoch: Option<u32>,
    secret: TokenSecret,
    apps: BTreeMap<ApplicationId, AppRecord>,
    usage: BTreeMap<ApplicationId, UsageRecord>,
    labels: NodeLabels,
    /// Cancelled user tokens: sequence number to max date.
    cancelled: BTreeMap<u64, u64>,
    sched_conf: BTreeMap<u64, StoredSchedConf>,
    fairshare: BTreeMap<(String, String), FairshareRecord>,
}

impl MemoryStore {
    /// An empty store with a fresh token secret.
    pub(crate) fn new() -> Self {
        Self {
            epoch: None,
            secret: TokenSecret::generate().expect("a random token secret"),
            apps: BTreeMap::new(),
            usage: BTreeMap::new(),
            labels: NodeLabels::default(),
            cancelled: BTreeMap::new(),
            sched_conf: BTreeMap::new(),
            fairshare: BTreeMap::new(),
        }
    }
}

impl StateStore for MemoryStore {
    fn recover(&mut self) -> Result<Recovered, StoreError> {
        let epoch = self.epoch.map_or(0, |e| e.saturating_add(1));
        self.epoch = Some(epoch);
        Ok(Recovered {
            epoch,
            secret: self.secret.clone(),
            apps: self.apps.values().cloned().collect(),
            skipped: Vec::new(),
        })
    }

    fn put_app(&mut self, rec: &AppRecord) -> Result<(), StoreError> {
        if rec.state.is_final() {
            self.usage.insert(rec.id, UsageRecord::of(rec));
        }
        // What a serializing backend would give back.
        self.apps.insert(rec.id, from_stored(to_stored(rec)));
        Ok(())
    }

    fn delete_app(&mut self, id: &ApplicationId) -> Result<(), StoreError> {
        self.apps.remove(id);
        Ok(())
    }

    fn usage_between(
        &self,
        from: u64,
        to: u64,
    ) -> Result<(Vec<UsageRecord>, Vec<String>), StoreError> {
        let ran = |u: &&UsageRecord| u.finish_time >= from && u.start_time <= to;
        let rows = self.usage.values().filter(ran);
        Ok((rows.cloned().collect(), Vec::new()))
    }

    fn put_labels(&mut self, labels: &NodeLabels) -> Result<(), StoreError> {
        self.labels = labels.clone();
        Ok(())
    }

    fn labels(&self) -> Result<NodeLabels, StoreError> {
        Ok(self.labels.clone())
    }

    fn cancel_user_token(&mut self, seq: u64, max_date: u64, now: u64) -> Result<(), StoreError> {
        self.cancelled.retain(|_, max| *max >= now);
        self.cancelled.insert(seq, max_date);
        Ok(())
    }

    fn is_user_token_cancelled(&self, seq: u64, now: u64) -> Result<bool, StoreError> {
        Ok(self.cancelled.get(&seq).is_some_and(|max| *max >= now))
    }

    fn put_sched_conf(&mut self, conf: &StoredSchedConf) -> Result<(), StoreError> {
        self.sched_conf.insert(conf.version, conf.clone());
        let newest = conf.version;
        self.sched_conf
            .retain(|v, _| v.saturating_add(SCHED_CONF_VERSIONS_KEPT) > newest);
        Ok(())
    }

    fn latest_sched_conf(&self) -> Result<Option<StoredSchedConf>, StoreError> {
        Ok(self.sched_conf.values().next_back().cloned())
    }

    fn put_fairshare(&mut self, records: &[FairshareRecord]) -> Result<(), StoreError> {
        for r in records {
            self.fairshare
                .insert((r.queue.clone(), r.user.clone()), r.clone());
        }
        Ok(())
    }

    fn fairshare(&self) -> Result<Vec<FairshareRecord>, StoreError> {
        Ok(self.fairshare.values().cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_store_passes_the_store_suite() {
        super::super::suite::run(MemoryStore::new);
    }
}
