//! High availability: which of the configured ResourceManagers is active. Behind
//! [`LeaderElector`] so that the coordination service can change (etcd today,
//! [`EtcdElector`]; a ZooKeeper backend could implement the same trait with an ephemeral
//! lock znode, as YARN's `ActiveStandbyElectorLock`).
//!
//! Leadership is a [`Term`]: the election key this RM created and the revision that created
//! it. The state store takes the term and fences every write with it (a write only happens
//! while the election key still has that creation revision), so an RM that lost leadership
//! without noticing (paused past its lease, cut off from etcd) can write nothing: its write
//! fails with `StoreError::Fenced` and it steps down.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::watch;

pub mod cancelled_tokens;
pub mod control;
mod etcd;
#[cfg(test)]
mod failover_tests;
pub mod keys;
#[cfg(test)]
mod model;
#[cfg(test)]
pub(crate) mod testing;

pub use etcd::{EtcdElector, EtcdEndpoints};
pub use keys::EtcdKeys;

/// One leadership: the key the winner created and its creation revision (the fencing token;
/// with ZooKeeper it would be the lock znode's path and creation zxid), and who holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    /// The election key (`/spindle/<cluster-id>/leader`).
    pub key: String,
    /// The revision at which the winner created the key; unique per term, increasing.
    pub revision: i64,
    /// The winner's `yarn.resourcemanager.ha.id`.
    pub holder: String,
}

/// What an RM is, as `haState` reports it (YARN's `HAServiceState` names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HaState {
    Active,
    Standby,
}

impl HaState {
    /// YARN's spelling in `/ws/v1/cluster/info`.
    pub fn as_str(self) -> &'static str {
        match self {
            HaState::Active => "ACTIVE",
            HaState::Standby => "STANDBY",
        }
    }
}

/// Why the election could not be run.
#[derive(Debug, thiserror::Error)]
pub enum ElectionError {
    /// The coordination service did not answer or refused a call.
    #[error("leader election on {endpoints}: {source}")]
    Backend {
        endpoints: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The election key holds something this RM cannot read as a holder's id.
    #[error("leader election on {endpoints}: the election key {key} is corrupt: {message}")]
    Corrupt {
        endpoints: String,
        key: String,
        message: String,
    },
}

/// Why a leadership ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LostBecause {
    /// The lease was not renewed within its length (paused, or cut off from the service).
    LeaseExpired,
    /// The election key is gone or was created again by someone else.
    KeyLost,
    /// A fenced store write was refused.
    Fenced,
}

/// A won election: the term, and a signal that turns to `Some(reason)` once the leadership is
/// lost. Dropping it stops renewing the lease (which then expires); [`LeaderElector::resign`]
/// gives it up at once.
pub struct Leadership {
    pub term: Term,
    lost: watch::Receiver<Option<LostBecause>>,
    alarm: FenceAlarm,
    /// The backend's handle on what keeps the leadership (the etcd lease and its renewal).
    pub(crate) hold: Box<dyn std::any::Any + Send + Sync>,
}

impl Leadership {
    /// Waits until the leadership is lost, and says why.
    pub async fn lost(&mut self) -> LostBecause {
        loop {
            if let Some(why) = *self.lost.borrow_and_update() {
                return why;
            }
            if self.lost.changed().await.is_err() {
                return LostBecause::LeaseExpired;
            }
        }
    }

    /// Whether the leadership is known to be lost now.
    pub fn is_lost(&self) -> bool {
        self.lost.borrow().is_some()
    }

    /// A receiver of the same signal (for a task that must stop when leadership is lost).
    pub fn lost_signal(&self) -> watch::Receiver<Option<LostBecause>> {
        self.lost.clone()
    }

    /// What the fenced store raises when a write of this term is refused.
    pub fn alarm(&self) -> FenceAlarm {
        self.alarm.clone()
    }

    pub(crate) fn new(
        term: Term,
        hold: Box<dyn std::any::Any + Send + Sync>,
    ) -> (Self, FenceAlarm) {
        let (tx, lost) = watch::channel(None);
        let alarm = FenceAlarm(Arc::new(tx));
        let l = Self {
            term,
            lost,
            alarm: alarm.clone(),
            hold,
        };
        (l, alarm)
    }
}

/// Ends a [`Leadership`] from outside the elector: the store raises it on a refused (fenced)
/// write, the elector's renewal on an expired lease or a lost key. The first reason stays.
#[derive(Clone)]
pub struct FenceAlarm(Arc<watch::Sender<Option<LostBecause>>>);

impl FenceAlarm {
    /// Marks the leadership lost because of `why` (the first reason given is kept).
    pub fn raise(&self, why: LostBecause) {
        self.0.send_if_modified(|v| {
            if v.is_none() {
                *v = Some(why);
                true
            } else {
                false
            }
        });
    }

    /// Whether the leadership was already marked lost.
    pub fn is_raised(&self) -> bool {
        self.0.borrow().is_some()
    }

    /// An alarm tied to no leadership (for a store used without an elector in tests).
    pub fn detached() -> Self {
        Self(Arc::new(watch::channel(None).0))
    }
}

/// Chooses the active RM among those configured. Standbys campaign; the winner holds a
/// [`Leadership`] until it resigns or loses it.
pub trait LeaderElector: Send + Sync {
    /// Waits until this RM is elected; meanwhile `observed` is told who leads (None when no
    /// one does). Returns an error only when the service cannot be reached at all for a
    /// call; the caller retries.
    fn campaign(
        &self,
        observed: &watch::Sender<Option<String>>,
    ) -> impl Future<Output = Result<Leadership, ElectionError>> + Send;

    /// Gives the leadership up at once: deletes the election key if it is still this term's,
    /// and ends the lease (a forced `-transitionToStandby` releases the lock; YARN-11870).
    fn resign(
        &self,
        leadership: Leadership,
    ) -> impl Future<Output = Result<(), ElectionError>> + Send;

    /// The current leader's id, if any.
    fn leader(&self) -> impl Future<Output = Result<Option<String>, ElectionError>> + Send;
}
