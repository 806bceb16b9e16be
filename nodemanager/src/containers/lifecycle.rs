//! A container's ordinary life on the table: its start (or held start), a stop, and the end
//! of its process.

use spindle_common::ids::ContainerId;
use spindle_common::states::exit_status;

use super::{ContainerTable, End, Live, Outcome, Phase, ProcessExit, StopReason};
use crate::launcher::ExecHandle;

/// What a stop request needs done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopAction {
    /// Not on this node.
    Unknown,
    /// Already complete or already being stopped: nothing more to do.
    Nothing,
    /// Was still localizing: now complete, no process to signal.
    CompletedBeforeStart(Outcome),
    /// SIGTERM the container's process now, SIGKILL it after the delay.
    Terminate { process: ExecHandle },
}

impl ContainerTable {
    /// Localization finished: true if the process should be started now.
    pub fn may_start(&self, id: &ContainerId) -> bool {
        matches!(self.get(id), Some(c) if c.phase == Phase::Localizing)
    }

    /// Its process runs: `RUNNING`.
    pub fn started(&mut self, id: &ContainerId, process: ExecHandle) {
        self.forked(id, Phase::Running(Live::new(process)));
    }

    /// Its process is set up and held before `exec` (a held gang start): `SCHEDULED`, YARN's
    /// state for a localized container waiting to run, until [`ContainerTable::released`].
    pub fn held(&mut self, id: &ContainerId, process: ExecHandle) {
        self.forked(id, Phase::Held(Live::new(process)));
    }

    fn forked(&mut self, id: &ContainerId, to: Phase) {
        if let Some(c) = self.get_mut(id) {
            if c.phase == Phase::Localizing {
                c.phase = to;
            }
        }
    }

    /// A held container was let go: true if it was held (it is `RUNNING` now).
    pub fn released(&mut self, id: &ContainerId) -> bool {
        match self.get_mut(id) {
            Some(c) => match &c.phase {
                Phase::Held(live) => {
                    c.phase = Phase::Running(live.clone());
                    true
                }
                _ => false,
            },
            None => false,
        }
    }

    /// Localization (or the process start) failed: the container never ran.
    pub fn launch_failed(
        &mut self,
        id: &ContainerId,
        localization: bool,
        exit_status: Option<i32>,
        diag: String,
        now_ms: u64,
    ) -> Option<Outcome> {
        let c = self.get_mut(id)?;
        if c.phase != Phase::Localizing {
            return None;
        }
        let end = if localization {
            End::LocalizationFailed
        } else {
            End::Failed
        };
        c.complete(end, exit_status, diag, now_ms);
        Some(Outcome::Failed)
    }

    pub fn request_stop(
        &mut self,
        id: &ContainerId,
        reason: StopReason,
        now_ms: u64,
    ) -> StopAction {
        let Some(c) = self.get_mut(id) else {
            return StopAction::Unknown;
        };
        let killed = Some(reason.exit_status());
        let process = match &c.phase {
            Phase::Localizing => {
                let diag = format!(
                    "{} Container was stopped before it started.",
                    reason.describe()
                );
                c.complete(End::Killed, killed, diag, now_ms);
                return StopAction::CompletedBeforeStart(Outcome::Killed);
            }
            Phase::Reinitializing(r) if r.old_exited() => {
                // No process runs: the old one ended, the new one has not started.
                let diag = format!(
                    "{} Container was stopped while it was being re-initialized.",
                    reason.describe()
                );
                c.complete(End::Killed, killed, diag, now_ms);
                return StopAction::CompletedBeforeStart(Outcome::Killed);
            }
            Phase::Reinitializing(r) => r.old().clone(),
            Phase::Running(live) | Phase::Held(live) => live.process.clone(),
            Phase::Killing { .. } | Phase::Complete(_) => return StopAction::Nothing,
        };
        c.phase = Phase::Killing {
            process: process.clone(),
            reason,
        };
        StopAction::Terminate { process }
    }

    /// The process ended. Returns how it counts, or None if it was already complete.
    pub fn exited(
        &mut self,
        id: &ContainerId,
        exit: &ProcessExit,
        stderr_tail: &str,
        now_ms: u64,
    ) -> Option<Outcome> {
        let c = self.get_mut(id)?;
        let status = exit.exit_status();
        let how = match exit {
            ProcessExit::Code(code) => format!("Exit code is {code}"),
            ProcessExit::Signal(s) => format!("Killed by signal {s}"),
            ProcessExit::Unknown(why) => why.clone(),
            ProcessExit::MemoryExceeded { detail, .. } => format!("Killed: {detail}"),
        };
        let with_tail = |mut diag: String| {
            if !stderr_tail.is_empty() {
                diag.push_str(&format!(
                    "\nLast {} bytes of stderr :\n{stderr_tail}",
                    stderr_tail.len()
                ));
            }
            diag
        };
        match (&c.phase, exit) {
            (Phase::Running(_), ProcessExit::MemoryExceeded { limit_mb, .. }) => {
                // YARN's pmem kill: the NM (or the kernel on its behalf) killed the container.
                let diag = with_tail(format!(
                    "Container killed for exceeding its memory limit of {limit_mb} MB. {how}."
                ));
                c.complete(End::Killed, Some(status), diag, now_ms);
                Some(Outcome::Killed)
            }
            (Phase::Running(_), _) if status == 0 => {
                c.complete(End::Succeeded, Some(0), String::new(), now_ms);
                Some(Outcome::Succeeded)
            }
            (Phase::Running(_), _) => {
                let diag = with_tail(match exit {
                    ProcessExit::Unknown(_) => how,
                    _ => format!("Container exited with a non-zero exit code {status}. {how}."),
                });
                c.complete(End::Failed, Some(status), diag, now_ms);
                Some(Outcome::Failed)
            }
            (Phase::Held(_), _) => {
                // Its gate was closed without a release (or someone else killed it): the
                // command never ran.
                let status = match exit {
                    ProcessExit::Code(code) if *code != 0 => *code,
                    _ => exit_status::ABORTED,
                };
                let diag =
                    format!("Container ended while held for its gang launch; it never ran. {how}.");
                c.complete(End::Failed, Some(status), diag, now_ms);
                Some(Outcome::Failed)
            }
            (Phase::Killing { reason, .. }, _) => {
                let reason = *reason;
                let diag = format!("{} Container killed on request. {how}", reason.describe());
                c.complete(End::Killed, Some(reason.exit_status()), diag, now_ms);
                Some(Outcome::Killed)
            }
            _ => None,
        }
    }
}
