//! Manual HA transitions (`rmadmin -transitionToActive|-transitionToStandby`, YARN's
//! `HAServiceProtocol`) and what an RM says about itself (`-getServiceState`): the REST edge
//! sends a [`Transition`] to the RM's election loop through an [`HaControl`], which answers
//! once it is done or refused.
//!
//! Rules, as YARN's `HAAdmin` and `AdminService`:
//! - under automatic failover a transition is refused unless forced (`--forcemanual`);
//! - a forced `-transitionToStandby` of the active resigns its leadership at once (the
//!   election key is deleted and the lease revoked, so another RM takes over without waiting
//!   for the lease: YARN-11870 was a forced transition that kept the lock); the RM then stays
//!   out of the election for one lease length, then campaigns again;
//! - with automatic failover off an RM waits as standby until `-transitionToActive`, then
//!   campaigns; `-transitionToStandby` resigns and it waits again;
//! - `-transitionToActive` while another RM is active is refused, naming it (make that one
//!   standby first).

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, watch};

use super::{ElectionError, HaState};

/// The election's connection to the coordination service (YARN's
/// `haZooKeeperConnectionState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionState {
    /// Not connected yet (etcd unreachable since the start).
    Connecting,
    /// The last call to the service was answered.
    Connected,
    /// The last call to the service failed; the election retries.
    Disconnected,
}

impl ConnectionState {
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectionState::Connecting => "CONNECTING",
            ConnectionState::Connected => "CONNECTED",
            ConnectionState::Disconnected => "DISCONNECTED",
        }
    }

    /// The `/metrics` gauge value: 0 connecting, 1 connected, 2 disconnected.
    pub fn gauge(self) -> i64 {
        match self {
            ConnectionState::Connecting => 0,
            ConnectionState::Connected => 1,
            ConnectionState::Disconnected => 2,
        }
    }
}

/// Which way an admin asks an RM to go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    ToActive,
    ToStandby,
}

impl Transition {
    /// `rmadmin`'s name of the command.
    pub fn command(self) -> &'static str {
        match self {
            Transition::ToActive => "transitionToActive",
            Transition::ToStandby => "transitionToStandby",
        }
    }
}

/// Why a transition was refused or failed; one variant per refusal.
#[derive(Debug, thiserror::Error)]
pub enum TransitionError {
    /// YARN's words: automatic failover manages the state.
    #[error("Refusing to manually manage HA state, since it may cause a split-brain scenario or other incorrect state. Automatic failover is enabled (yarn.resourcemanager.ha.automatic-failover.enabled); if you are very sure you know what you are doing, please specify the --forcemanual flag.")]
    AutomaticFailover,
    /// Another RM holds the leadership.
    #[error("ResourceManager {active} is active; make it standby first (rmadmin -transitionToStandby {active})")]
    OtherActive { active: String },
    /// The election is not connected to etcd yet.
    #[error("the leader election is not connected to its coordination service yet; try again")]
    NotConnected,
    /// Giving the leadership up failed (the lease still ends it within its length).
    #[error("resigning the leadership failed: {0}")]
    Resign(#[source] ElectionError),
    /// Asking who leads failed.
    #[error("asking who leads failed: {0}")]
    Election(#[source] ElectionError),
    /// The RM did not become active in time (it is still campaigning or recovering).
    #[error("this ResourceManager did not become active within {secs} s; it is still trying")]
    NotActiveInTime { secs: u64 },
    /// The RM is shutting down.
    #[error("this ResourceManager is shutting down")]
    Stopping,
}

/// One request to the election loop, with where to answer.
pub struct Request {
    pub transition: Transition,
    pub reply: oneshot::Sender<Result<(), TransitionError>>,
}

/// What the REST edge holds to ask the election loop for transitions and read the state.
#[derive(Clone)]
pub struct HaControl {
    pub rm_id: String,
    pub automatic_failover: bool,
    requests: mpsc::Sender<Request>,
    state: watch::Receiver<HaState>,
    connection: watch::Receiver<ConnectionState>,
    leader: watch::Receiver<Option<String>>,
}

/// The election loop's side of an [`HaControl`].
pub struct ControlInbox {
    pub requests: mpsc::Receiver<Request>,
    pub state: Arc<watch::Sender<HaState>>,
    pub connection: watch::Sender<ConnectionState>,
}

impl HaControl {
    /// A control and its inbox, for the RM `rm_id` whose election reports who leads on
    /// `leader`.
    pub fn new(
        rm_id: &str,
        automatic_failover: bool,
        leader: watch::Receiver<Option<String>>,
    ) -> (Self, ControlInbox) {
        let (tx, rx) = mpsc::channel(8);
        let (state_tx, state) = watch::channel(HaState::Standby);
        let (conn_tx, connection) = watch::channel(ConnectionState::Connecting);
        let c = Self {
            rm_id: rm_id.to_string(),
            automatic_failover,
            requests: tx,
            state,
            connection,
            leader,
        };
        let inbox = ControlInbox {
            requests: rx,
            state: Arc::new(state_tx),
            connection: conn_tx,
        };
        (c, inbox)
    }

    pub fn state(&self) -> HaState {
        *self.state.borrow()
    }

    pub fn connection(&self) -> ConnectionState {
        *self.connection.borrow()
    }

    /// Who leads, as this RM's election last saw it.
    pub fn leader(&self) -> Option<String> {
        self.leader.borrow().clone()
    }

    /// A receiver of the state (to wait for a change).
    pub fn state_signal(&self) -> watch::Receiver<HaState> {
        self.state.clone()
    }

    /// Asks for `transition`; `forced` is `--forcemanual`. Refused under automatic failover
    /// unless forced; else answered by the election loop once done.
    pub async fn transition(
        &self,
        transition: Transition,
        forced: bool,
    ) -> Result<(), TransitionError> {
        if self.automatic_failover && !forced {
            return Err(TransitionError::AutomaticFailover);
        }
        let (reply, answer) = oneshot::channel();
        self.requests
            .send(Request { transition, reply })
            .await
            .map_err(|_| TransitionError::Stopping)?;
        answer.await.map_err(|_| TransitionError::Stopping)?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn under_automatic_failover_a_transition_needs_forcemanual() {
        let (_leader_tx, leader) = watch::channel(None);
        let (c, mut inbox) = HaControl::new("rm1", true, leader);
        for t in [Transition::ToActive, Transition::ToStandby] {
            assert!(matches!(
                c.transition(t, false).await,
                Err(TransitionError::AutomaticFailover)
            ));
        }
        assert!(
            inbox.requests.try_recv().is_err(),
            "nothing reached the loop"
        );
        // Forced, it reaches the loop and gets its answer.
        let asked = tokio::spawn({
            let c = c.clone();
            async move { c.transition(Transition::ToStandby, true).await }
        });
        let req = inbox.requests.recv().await.expect("request");
        assert_eq!(req.transition, Transition::ToStandby);
        req.reply.send(Ok(())).ok();
        assert!(asked.await.unwrap().is_ok());
        // A stopped loop answers Stopping, never hangs.
        drop(inbox);
        assert!(matches!(
            c.transition(Transition::ToActive, true).await,
            Err(TransitionError::Stopping)
        ));
    }
}
