//! How the rest of the NM talks to the actor: the [`Command`]s it accepts and [`NmHandle`],
//! the cheap, cloneable sender that HTTP handlers, the status updater and the background
//! tasks hold.
//!
//! A handle only sends and waits for a reply; it must not hold or cache container state, and
//! nothing here may block the caller beyond the channel's back-pressure.

use spindle_common::ids::{ApplicationId, ContainerId};
use std::time::Duration;

use spindle_common::records::node::{
    ContainerLaunchContext, ContainerUpdateResponse, LaunchHold, ReleaseContainersResponse,
    SignalContainerCommand, SignalContainerResponse, StartContainerRequest,
    StartContainersResponse, StopContainersResponse,
};
use spindle_common::records::tracker::NmContainerReport;
use spindle_common::token::{ContainerKey, ContainerTokenIdentifier};
use tokio::sync::{mpsc, oneshot};

use super::reinit::{ReinitError, Reinitialized};
use super::{AppView, NodeView, Reply};
use crate::containers::{Container, ProcessExit, StopReason};
use crate::launcher::ExecHandle;
use crate::metrics::NmMetrics;

/// Everything the actor can be asked or told.
pub enum Command {
    /// Start containers; with `hold`, the reply waits until all are held or failed.
    Start {
        requests: Vec<StartContainerRequest>,
        hold: Option<LaunchHold>,
        reply: Reply<StartContainersResponse>,
    },
    /// Let held containers run.
    Release {
        ids: Vec<ContainerId>,
        reply: Reply<ReleaseContainersResponse>,
    },
    /// A held start's timeout: stop what was not released.
    HoldExpired {
        group: u64,
    },
    Stop {
        ids: Vec<ContainerId>,
        reply: Reply<StopContainersResponse>,
    },
    /// YARN's `signalToContainer`: a signal to a running container's process group.
    Signal {
        id: ContainerId,
        command: SignalContainerCommand,
        reply: Reply<SignalContainerResponse>,
    },
    /// YARN's `reInitializeContainer`: a new process, from a new launch context, in a
    /// running container; the reply comes once it started (or why not).
    Reinitialize {
        id: ContainerId,
        context: ContainerLaunchContext,
        grace: Option<Duration>,
        reply: Reply<Result<Reinitialized, ReinitError>>,
    },
    /// A re-initialization's new launch context is localized (or not).
    ReinitLocalized {
        id: ContainerId,
        result: Result<(), String>,
    },
    /// A re-initialization's grace is over: SIGKILL what is left of `old`.
    ReinitGraceOver {
        id: ContainerId,
        old: ExecHandle,
    },
    /// YARN's `updateContainer`: new container tokens whose memory and vcores a live
    /// container takes; the reply comes once the limits are applied (or why not).
    Update {
        tokens: Vec<String>,
        reply: Reply<ContainerUpdateResponse>,
    },
    /// An update call's limits were applied (or not), per token; `response` holds what was
    /// answered before the executor ran.
    UpdatesApplied {
        results: Vec<(ContainerTokenIdentifier, Result<(), String>)>,
        response: ContainerUpdateResponse,
        reply: Reply<ContainerUpdateResponse>,
    },
    Node {
        reply: Reply<NodeView>,
    },
    Apps {
        reply: Reply<Vec<AppView>>,
    },
    Containers {
        reply: Reply<Vec<Container>>,
    },
    Container {
        id: ContainerId,
        reply: Reply<Option<Container>>,
    },
    Metrics {
        reply: Reply<NmMetrics>,
    },
    /// A resource plugin's devices and who holds them (None: no plugin for that type).
    Resource {
        name: String,
        reply: Reply<Option<crate::plugins::ResourceView>>,
    },
    /// The RM accepted our registration, with its container-token master key.
    Registered {
        key: ContainerKey,
        rm_identifier: u64,
    },
    /// A newer container-token master key from a heartbeat answer (the RM rolled it): it
    /// becomes current, the current one previous.
    MasterKey {
        key: ContainerKey,
    },
    /// Who a bearer container token speaks for: the application of a container whose start
    /// this NM verified with that very token, or of any token a held key signed.
    Authorize {
        token: String,
        reply: Reply<Result<super::TokenOwner, super::ContainerAuthError>>,
    },
    /// What to tell the RM in a heartbeat or registration.
    Reports {
        reply: Reply<Vec<NmContainerReport>>,
    },
    /// The RM answered a heartbeat.
    HeartbeatAnswered {
        containers_to_cleanup: Vec<ContainerId>,
        applications_to_cleanup: Vec<ApplicationId>,
        containers_to_be_removed: Vec<ContainerId>,
    },
    Localized {
        id: ContainerId,
        result: Result<(), LaunchFailure>,
    },
    Exited {
        id: ContainerId,
        exit: ProcessExit,
        stderr_tail: String,
    },
    KillDeadline {
        id: ContainerId,
    },
    /// Stops every live container; replies once none is live.
    StopAll {
        reason: StopReason,
        reply: Reply<()>,
    },
    /// Ends the actor. Containers are left as they are.
    Shutdown {
        reply: Reply<()>,
    },
}

/// The actor is gone (the NM is stopping).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the NodeManager is shutting down")]
pub struct Unavailable;

/// A cheap, cloneable way to talk to the actor.
#[derive(Clone, Debug)]
pub struct NmHandle {
    pub(super) tx: mpsc::Sender<Command>,
}

impl NmHandle {
    async fn ask<T>(&self, make: impl FnOnce(Reply<T>) -> Command) -> Result<T, Unavailable> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(make(tx)).await.map_err(|_| Unavailable)?;
        rx.await.map_err(|_| Unavailable)
    }
    async fn tell(&self, cmd: Command) -> Result<(), Unavailable> {
        self.tx.send(cmd).await.map_err(|_| Unavailable)
    }

    pub async fn start(
        &self,
        requests: Vec<StartContainerRequest>,
        hold: Option<LaunchHold>,
    ) -> Result<StartContainersResponse, Unavailable> {
        self.ask(|reply| Command::Start {
            requests,
            hold,
            reply,
        })
        .await
    }
    pub async fn release(
        &self,
        ids: Vec<ContainerId>,
    ) -> Result<ReleaseContainersResponse, Unavailable> {
        self.ask(|reply| Command::Release { ids, reply }).await
    }
    pub async fn stop(&self, ids: Vec<ContainerId>) -> Result<StopContainersResponse, Unavailable> {
        self.ask(|reply| Command::Stop { ids, reply }).await
    }
    pub async fn signal(
        &self,
        id: ContainerId,
        command: SignalContainerCommand,
    ) -> Result<SignalContainerResponse, Unavailable> {
        self.ask(|reply| Command::Signal { id, command, reply })
            .await
    }
    /// Re-initializes a running container with `context` (SIGTERM to its process group,
    /// SIGKILL after `grace` or the NM's sigkill delay, then the new process).
    pub async fn reinitialize(
        &self,
        id: ContainerId,
        context: ContainerLaunchContext,
        grace: Option<Duration>,
    ) -> Result<Result<Reinitialized, ReinitError>, Unavailable> {
        self.ask(|reply| Command::Reinitialize {
            id,
            context,
            grace,
            reply,
        })
        .await
    }
    /// Resizes live containers to their new tokens (YARN's `updateContainer`).
    pub async fn update(
        &self,
        tokens: Vec<String>,
    ) -> Result<ContainerUpdateResponse, Unavailable> {
        self.ask(|reply| Command::Update { tokens, reply }).await
    }
    pub async fn node(&self) -> Result<NodeView, Unavailable> {
        self.ask(|reply| Command::Node { reply }).await
    }
    pub async fn apps(&self) -> Result<Vec<AppView>, Unavailable> {
        self.ask(|reply| Command::Apps { reply }).await
    }
    pub async fn containers(&self) -> Result<Vec<Container>, Unavailable> {
        self.ask(|reply| Command::Containers { reply }).await
    }
    pub async fn container(&self, id: ContainerId) -> Result<Option<Container>, Unavailable> {
        self.ask(|reply| Command::Container { id, reply }).await
    }
    pub async fn metrics(&self) -> Result<NmMetrics, Unavailable> {
        self.ask(|reply| Command::Metrics { reply }).await
    }
    pub async fn resource(
        &self,
        name: String,
    ) -> Result<Option<crate::plugins::ResourceView>, Unavailable> {
        self.ask(|reply| Command::Resource { name, reply }).await
    }
    pub async fn registered(
        &self,
        key: ContainerKey,
        rm_identifier: u64,
    ) -> Result<(), Unavailable> {
        self.tell(Command::Registered { key, rm_identifier }).await
    }
    /// Installs a container-token master key a heartbeat answer carried.
    pub async fn master_key(&self, key: ContainerKey) -> Result<(), Unavailable> {
        self.tell(Command::MasterKey { key }).await
    }
    /// Whose application `token` (a bearer container token) proves.
    pub async fn authorize(
        &self,
        token: String,
    ) -> Result<Result<super::TokenOwner, super::ContainerAuthError>, Unavailable> {
        self.ask(|reply| Command::Authorize { token, reply }).await
    }
    pub async fn reports(&self) -> Result<Vec<NmContainerReport>, Unavailable> {
        self.ask(|reply| Command::Reports { reply }).await
    }
    pub async fn heartbeat_answered(
        &self,
        containers_to_cleanup: Vec<ContainerId>,
        applications_to_cleanup: Vec<ApplicationId>,
        containers_to_be_removed: Vec<ContainerId>,
    ) -> Result<(), Unavailable> {
        self.tell(Command::HeartbeatAnswered {
            containers_to_cleanup,
            applications_to_cleanup,
            containers_to_be_removed,
        })
        .await
    }
    pub async fn stop_all(&self, reason: StopReason) -> Result<(), Unavailable> {
        self.ask(|reply| Command::StopAll { reason, reply }).await
    }
    pub async fn shutdown(&self) -> Result<(), Unavailable> {
        self.ask(|reply| Command::Shutdown { reply }).await
    }
}

/// Why a container could not be localized or prepared.
#[derive(Debug, Clone)]
pub struct LaunchFailure {
    /// A localization failure (`LOCALIZATION_FAILED`), else a launch failure.
    pub localization: bool,
    /// The exit code to report (7 for a refused runtime request), if any.
    pub exit_status: Option<i32>,
    pub diagnostics: String,
}
