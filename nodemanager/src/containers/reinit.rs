//! Re-initializing a running container (YARN's `reInitializeContainer`): a new process in
//! the same container, with the old one's stop and the new one's start in steps.

use spindle_common::ids::ContainerId;
use spindle_common::states::NmContainerState;

use super::{ContainerTable, End, Live, Outcome, Phase};
use crate::launcher::ExecHandle;

/// Where a re-initialization stands (the container is `REINITIALIZING`). The old process
/// runs until the new launch context is localized, then gets SIGTERM, and SIGKILL after
/// `grace_ms`; the new process starts once the old one's leader has exited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reinit {
    /// The new launch context is being localized; the old process `old` still runs, unless
    /// `old_exited` (it ended on its own meanwhile).
    Localizing {
        old: ExecHandle,
        old_exited: bool,
        grace_ms: u64,
    },
    /// SIGTERM went to `old` at `since_ms`; SIGKILL follows at `since_ms + grace_ms`.
    Stopping {
        old: ExecHandle,
        since_ms: u64,
        grace_ms: u64,
    },
}

impl Reinit {
    /// The process being replaced.
    pub fn old(&self) -> &ExecHandle {
        match self {
            Self::Localizing { old, .. } | Self::Stopping { old, .. } => old,
        }
    }

    /// True once the process being replaced has ended while the new context was localized.
    pub fn old_exited(&self) -> bool {
        matches!(
            self,
            Self::Localizing {
                old_exited: true,
                ..
            }
        )
    }
}

/// Why a re-initialization is refused before anything changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReinitRefusal {
    #[error("Container {0} is not handled by this NodeManager")]
    Unknown(ContainerId),
    #[error("Container {id} is not running (state {state}); only a running container can be re-initialized")]
    NotRunning {
        id: ContainerId,
        state: NmContainerState,
    },
    #[error("Container {0} is already being re-initialized")]
    AlreadyReinitializing(ContainerId),
    #[error(
        "Container {0} has a resource update being applied; re-initialize it once that is answered"
    )]
    Updating(ContainerId),
}

/// What the actor does next in a re-initialization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReinitStep {
    /// Nothing yet (waiting for the localization or for the old process to exit).
    Wait,
    /// SIGTERM the old process now; SIGKILL it after `grace_ms` if it still runs.
    TerminateOld { old: ExecHandle, grace_ms: u64 },
    /// The old process is gone: kill its stragglers and start the new one.
    StartNew { old: ExecHandle },
    /// It cannot go on: the container is back to `RUNNING` with its old process.
    Reverted,
    /// It cannot go on and the old process is gone: the container completed (failed).
    Failed(Outcome),
    /// The container is no longer re-initializing (stopped meanwhile).
    Abandoned,
}

impl ContainerTable {
    /// Begins a re-initialization: a `RUNNING` container goes `REINITIALIZING` (localizing
    /// its new launch context). Refused, with nothing changed, for an unknown container, one
    /// not running, one already re-initializing, or one with a resource update in flight.
    pub fn begin_reinit(&mut self, id: &ContainerId, grace_ms: u64) -> Result<(), ReinitRefusal> {
        let Some(c) = self.get_mut(id) else {
            return Err(ReinitRefusal::Unknown(*id));
        };
        let old = match &c.phase {
            Phase::Running(Live {
                updating: Some(_), ..
            }) => return Err(ReinitRefusal::Updating(*id)),
            Phase::Running(live) => live.process.clone(),
            Phase::Reinitializing(_) => return Err(ReinitRefusal::AlreadyReinitializing(*id)),
            _ => {
                return Err(ReinitRefusal::NotRunning {
                    id: *id,
                    state: c.state(),
                })
            }
        };
        c.phase = Phase::Reinitializing(Reinit::Localizing {
            old,
            old_exited: false,
            grace_ms,
        });
        Ok(())
    }

    /// The new launch context is localized (`Ok`) or could not be (`Err(diagnostics)`).
    pub fn reinit_localized(
        &mut self,
        id: &ContainerId,
        result: Result<(), String>,
        now_ms: u64,
    ) -> ReinitStep {
        let Some(c) = self.get_mut(id) else {
            return ReinitStep::Abandoned;
        };
        let Phase::Reinitializing(Reinit::Localizing {
            old,
            old_exited,
            grace_ms,
        }) = &c.phase
        else {
            return ReinitStep::Abandoned;
        };
        let (old, old_exited, grace_ms) = (old.clone(), *old_exited, *grace_ms);
        match (result, old_exited) {
            (Ok(()), false) => {
                c.phase = Phase::Reinitializing(Reinit::Stopping {
                    old: old.clone(),
                    since_ms: now_ms,
                    grace_ms,
                });
                ReinitStep::TerminateOld { old, grace_ms }
            }
            (Ok(()), true) => ReinitStep::StartNew { old },
            (Err(_), false) => {
                c.phase = Phase::Running(Live::new(old));
                ReinitStep::Reverted
            }
            (Err(diag), true) => {
                let diag = format!(
                    "Container's process ended while it was being re-initialized, and its \
                     new launch context could not be localized: {diag}"
                );
                c.complete(End::Failed, None, diag, now_ms);
                ReinitStep::Failed(Outcome::Failed)
            }
        }
    }

    /// The leader of a re-initializing container's old process exited. None if the
    /// container is not re-initializing (the exit is an ordinary one).
    pub fn reinit_old_exited(&mut self, id: &ContainerId) -> Option<ReinitStep> {
        match &mut self.get_mut(id)?.phase {
            Phase::Reinitializing(Reinit::Localizing { old_exited, .. }) => {
                *old_exited = true;
                Some(ReinitStep::Wait)
            }
            Phase::Reinitializing(Reinit::Stopping { old, .. }) => {
                Some(ReinitStep::StartNew { old: old.clone() })
            }
            _ => None,
        }
    }

    /// True if the container still waits for `old` to end, so its SIGKILL is due.
    pub fn reinit_kill_due(&self, id: &ContainerId, old: &ExecHandle) -> bool {
        matches!(
            self.get(id).and_then(|c| c.reinit()),
            Some(r @ Reinit::Stopping { .. }) if r.old() == old
        )
    }

    /// The new process runs: the container is `RUNNING` again, with its new process.
    pub fn reinit_started(&mut self, id: &ContainerId, process: ExecHandle) {
        if let Some(c) = self.get_mut(id) {
            if c.state() == NmContainerState::REINITIALIZING {
                c.phase = Phase::Running(Live::new(process));
                c.reinits += 1;
            }
        }
    }

    /// The new process could not be started (the old one is gone): the container failed.
    pub fn reinit_start_failed(
        &mut self,
        id: &ContainerId,
        diag: String,
        now_ms: u64,
    ) -> Option<Outcome> {
        let c = self.get_mut(id)?;
        c.reinit()?;
        let diag =
            format!("Container was re-initialized but its new process could not start: {diag}");
        c.complete(End::Failed, None, diag, now_ms);
        Some(Outcome::Failed)
    }
}
