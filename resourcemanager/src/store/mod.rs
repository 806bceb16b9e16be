//! The RM state store: what must survive a restart, behind the [`StateStore`] trait so the
//! backend can change (SQLite, [`SqliteStore`], the embedded default for a single RM; etcd,
//! [`EtcdStore`], shared by an active and standby RMs and fenced by the active's term)
//! without touching the driver.
//!
//! It keeps the applications with their submission contexts, states, live attempts,
//! lifetimes and usage, the restart
//! epoch, the AM-RM token secret, and every accepted capacity-scheduler change, versioned,
//! written before the client is answered; one usage record per finished application
//! (its resource-milliseconds per type, for `/accounting`), written when it becomes final
//! and kept after the application itself is forgotten (`max-completed-applications`); the
//! node labels and central attributes; and the users' tokens cancelled through
//! `DELETE /ws/v1/cluster/delegation-token` (sequence number and max date, kept until that
//! date); the users' decayed usage per leaf (the fair share's memory: decayed and raw
//! billing-unit-seconds and when they were brought up to date); nothing else. The cancelled-token set lives here and only here: the REST edge asks the driver,
//! which asks the store.
//!
//! Architecture invariant: the driver sees the store only through [`StateStore`], whose
//! calls and [`StoreError`] name no backend type; the SQLite and in-memory implementations
//! pass one test suite (`suite.rs`).

use std::collections::BTreeMap;

use spindle_common::token::TokenSecret;
use spindle_common::{ApplicationId, Resource};

use crate::core::labels::NodeLabels;
use crate::core::scheduler::FairshareRecord;
use crate::core::AppRecord;

mod etcd;
mod etcd_bridge;
#[cfg(test)]
mod memory;
mod records;
mod sqlite;
mod sqlite_open;
#[cfg(test)]
pub(crate) mod suite;

pub use etcd::{EtcdStore, MAX_WRITE_BYTES, USAGE_RECORDS_KEPT};
pub use sqlite::SqliteStore;
pub use sqlite_open::{Formatted, SCHEMA_VERSION};

/// Why the state store could not be opened, read or written. Each refusal to open a file
/// names the file and leaves it as it was.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The backend failed a read or a write (its own error is the source).
    #[error("state store {path}: {source}")]
    Backend {
        path: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
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
    /// A write of a deposed active: the election key is no longer the one its term created
    /// (another RM is active, or none is). Nothing was written; the RM must step down.
    #[error("state store {path}: write refused: this ResourceManager ({holder}) is no longer active (its term, election key {key} created at revision {revision}, has ended)")]
    Fenced {
        path: String,
        holder: String,
        key: String,
        revision: i64,
    },
    /// One record is larger than the backend takes in one request (etcd: 1.5 MiB).
    #[error("state store {path}: record {key} is {bytes} bytes, over the {limit}-byte limit of one write")]
    TooLarge {
        path: String,
        key: String,
        bytes: usize,
        limit: usize,
    },
    #[error("state store {path}: cannot format it: {source}")]
    Format {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// The calls the driver makes on the state store. Every write returns once it is durable
/// (the driver answers no client before that).
pub trait StateStore: Send {
    /// Bumps the restart epoch, loads the token secret (made with the store, never here)
    /// and reads every application.
    fn recover(&mut self) -> Result<Recovered, StoreError>;

    /// Writes the application's record; a final one's usage record too, atomically.
    fn put_app(&mut self, rec: &AppRecord) -> Result<(), StoreError>;

    /// Forgets an application's record (its usage record stays).
    fn delete_app(&mut self, id: &ApplicationId) -> Result<(), StoreError>;

    /// Usage records of the applications that ran within `[from, to]` (ms since the epoch):
    /// finished at or after `from`, submitted at or before `to`, in id order. A record that
    /// cannot be read is skipped and named in the second list.
    fn usage_between(
        &self,
        from: u64,
        to: u64,
    ) -> Result<(Vec<UsageRecord>, Vec<String>), StoreError>;

    /// Writes the cluster's node labels, mappings and central attributes (replacing them).
    fn put_labels(&mut self, labels: &NodeLabels) -> Result<(), StoreError>;

    /// The stored node labels (empty when none were ever set).
    fn labels(&self) -> Result<NodeLabels, StoreError>;

    /// Records a cancelled user token by its sequence number until its max date, and
    /// forgets the cancellations past theirs at `now`.
    fn cancel_user_token(&mut self, seq: u64, max_date: u64, now: u64) -> Result<(), StoreError>;

    /// Whether the user token with sequence number `seq` was cancelled (and its max date is
    /// not past at `now`).
    fn is_user_token_cancelled(&self, seq: u64, now: u64) -> Result<bool, StoreError>;

    /// Records an applied scheduler configuration as its version and drops versions older
    /// than the newest [`SCHED_CONF_VERSIONS_KEPT`], atomically.
    fn put_sched_conf(&mut self, conf: &StoredSchedConf) -> Result<(), StoreError>;

    /// The newest stored scheduler configuration, if any change was ever applied.
    fn latest_sched_conf(&self) -> Result<Option<StoredSchedConf>, StoreError>;

    /// Writes users' decayed usage (one row per leaf and user, replaced), atomically.
    fn put_fairshare(&mut self, records: &[FairshareRecord]) -> Result<(), StoreError>;

    /// Every stored user's decayed usage, by leaf then user.
    fn fairshare(&self) -> Result<Vec<FairshareRecord>, StoreError>;
}

/// What a restarted RM gets back.
pub struct Recovered {
    pub epoch: u32,
    pub secret: TokenSecret,
    pub apps: Vec<AppRecord>,
    /// Records that could not be read, with the reason; logged, never fatal.
    pub skipped: Vec<String>,
}

/// One finished application's usage as the store keeps it.
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

impl UsageRecord {
    /// The usage record of an application (written once it is final).
    pub(crate) fn of(rec: &AppRecord) -> Self {
        Self {
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

/// One stored version of the live capacity-scheduler property set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSchedConf {
    pub version: u64,
    pub source: SchedConfSource,
    pub user: String,
    pub time: u64,
    pub props: BTreeMap<String, String>,
}
