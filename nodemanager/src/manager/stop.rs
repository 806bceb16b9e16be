//! Stopping containers and what follows their end: SIGTERM to the container's process with
//! the SIGKILL deadline, signals without a stop (`containers/signal`), completion
//! book-keeping (metrics, devices, holds, the store, the heartbeat), the drain of a stopping
//! NM, and deleting a finished application's local dirs.
//!
//! It must never signal anything but a container's own process (its [`ExecHandle`]), and
//! must not delete an application's logs (only its local dirs; log retention is
//! [`crate::retention`]'s).

use std::path::PathBuf;

use spindle_common::ids::{ApplicationId, ContainerId};
use spindle_common::records::node::{
    SignalContainerCommand, SignalContainerResponse, StopContainersResponse,
};
use tracing::{info, warn};

use super::start::fail;
use super::{span, Command, Manager};
use crate::containers::{Live, Outcome, Phase, StopAction, StopReason, APP_FINISHED};
use crate::launcher::{ExecHandle, StopSignal};

impl Manager {
    /// `POST /containers/stop`: stops each container for its AM; the answer lists each as
    /// stopped or refused.
    pub(super) fn stop_by_app_master(
        &mut self,
        ids: Vec<ContainerId>,
        now: u64,
    ) -> StopContainersResponse {
        let mut resp = StopContainersResponse::default();
        for id in ids {
            match self.stop(id, StopReason::AppMaster, now) {
                Ok(()) => resp.successfully_stopped_containers.push(id),
                Err(message) => {
                    resp.failed_requests
                        .push(fail(&id.to_string(), "YarnException", message))
                }
            }
        }
        resp
    }

    /// `POST /containers/signal`, answered as YARN's `SignalContainerResponse`.
    pub(super) fn signal_answer(
        &mut self,
        id: ContainerId,
        command: SignalContainerCommand,
    ) -> SignalContainerResponse {
        let mut resp = SignalContainerResponse::default();
        match self.signal_container(id, command) {
            Ok(()) => resp.successfully_signaled_containers.push(id),
            Err(message) => {
                resp.failed_requests
                    .push(fail(&id.to_string(), "YarnException", message))
            }
        }
        resp
    }

    pub(super) fn stop(
        &mut self,
        id: ContainerId,
        reason: StopReason,
        now: u64,
    ) -> Result<(), String> {
        let _g = span(&id).entered();
        // A held process must not run now: without its gate it exits even before the signal.
        self.gates.remove(&id);
        match self.table.request_stop(&id, reason, now) {
            StopAction::Unknown => {
                Err(format!("Container {id} is not handled by this NodeManager"))
            }
            StopAction::Nothing => Ok(()),
            StopAction::CompletedBeforeStart(o) => {
                info!(?reason, "container stopped before its process started");
                self.completed(id, o, true);
                Ok(())
            }
            StopAction::Terminate { process } => {
                info!(?reason, %process, "stopping container: SIGTERM to its process");
                self.signal(&process, StopSignal::Term);
                self.persist();
                let tx = self.tx.clone();
                let delay = self.ctx.sigkill_delay;
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let _ = tx.send(Command::KillDeadline { id }).await;
                });
                Ok(())
            }
        }
    }

    /// YARN's `signalToContainer`: the signal goes to the process group of a running (or
    /// stopping) container, and nothing else changes: no stop reason is recorded and no
    /// SIGKILL follows a GRACEFUL_SHUTDOWN, so the container ends as its process does.
    /// An unknown container is refused as a stop refuses it; so is one with no process to
    /// signal (not started yet, held, or already complete).
    pub(super) fn signal_container(
        &mut self,
        id: ContainerId,
        command: SignalContainerCommand,
    ) -> Result<(), String> {
        let _g = span(&id).entered();
        let Some(c) = self.table.get(&id) else {
            return Err(format!("Container {id} is not handled by this NodeManager"));
        };
        let process = match &c.phase {
            Phase::Running(Live { process, .. }) | Phase::Killing { process, .. } => process,
            _ => {
                return Err(format!(
                    "Container {id} is not running (state {}); nothing was signalled",
                    c.state()
                ))
            }
        };
        let sig = match command {
            SignalContainerCommand::OUTPUT_THREAD_DUMP => StopSignal::Quit,
            SignalContainerCommand::GRACEFUL_SHUTDOWN => StopSignal::Term,
            SignalContainerCommand::FORCEFUL_SHUTDOWN => StopSignal::Kill,
        };
        info!(
            ?command,
            %process,
            "signalling container: {}",
            command.signal_name()
        );
        self.executor
            .signal(process, sig)
            .map_err(|e| format!("Cannot signal container {id}: {e}"))
    }

    /// Book-keeping once a container is complete. `observed` is false for containers found
    /// dead during recovery: their pid may already belong to someone else.
    pub(super) fn completed(&mut self, id: ContainerId, outcome: Outcome, observed: bool) {
        if observed {
            match outcome {
                Outcome::Succeeded => self.metrics.completed += 1,
                Outcome::Failed => self.metrics.failed += 1,
                Outcome::Killed => self.metrics.killed += 1,
            }
            use spindle_common::states::exit_status::{KILLED_EXCEEDED_PMEM, KILLED_EXCEEDED_VMEM};
            if self.table.get(&id).is_some_and(|c| {
                matches!(
                    c.exit_status(),
                    Some(KILLED_EXCEEDED_PMEM | KILLED_EXCEEDED_VMEM)
                )
            }) {
                self.metrics.oom_killed += 1;
            }
        }
        self.plugins.release(id);
        self.pending.remove(&id);
        self.reinit_ended(id);
        if self.held_in.contains_key(&id) {
            self.hold_settled(
                id,
                Some("the container ended before it was released".into()),
            );
        }
        self.forget_hold(&id);
        // A stopped container's leader is gone: whatever it left behind in its group gets the
        // SIGKILL now rather than at the deadline. (Exits nobody asked for leave stragglers
        // alone, as YARN without cgroups does.)
        if observed && outcome == Outcome::Killed {
            if let Some(process) = self.table.get(&id).and_then(|c| c.process()) {
                self.signal(process, StopSignal::Kill);
            }
        }
        self.persist();
        self.wake.notify_one();
        self.maybe_clean_app(id.application_id());
        self.check_drained();
    }

    pub(super) fn signal(&self, process: &ExecHandle, sig: StopSignal) {
        if let Err(e) = self.executor.signal(process, sig) {
            warn!(error = %e, "cannot signal container");
        }
    }

    pub(super) fn check_drained(&mut self) {
        if !self.drain_waiters.is_empty() && self.table.running_count() == 0 {
            for w in self.drain_waiters.drain(..) {
                let _ = w.send(());
            }
        }
    }

    /// Deletes a finished application's local dirs (its logs stay).
    pub(super) fn maybe_clean_app(&mut self, app: ApplicationId) {
        let Some(a) = self.table.app(&app) else {
            return;
        };
        if self.table.app_state(a) != APP_FINISHED || !self.cleaned_apps.insert(app) {
            return;
        }
        let dirs: Vec<PathBuf> = self
            .ctx
            .local_dirs
            .iter()
            .map(|d| {
                d.join("usercache")
                    .join(&a.user)
                    .join("appcache")
                    .join(app.to_string())
            })
            .collect();
        // The client's staging directory goes too, whoever ended the application (a
        // detached one killed with `application -kill` has no AM or client to do it).
        let staging =
            spindle_common::paths::staging_dir(&self.ctx.staging_root, &a.user, &app.to_string());
        info!(app_id = %app, "application finished here; deleting its local dirs");
        tokio::task::spawn_blocking(move || {
            if let Some(d) = staging {
                remove_staging(&d);
            }
            for d in dirs {
                if let Err(e) = std::fs::remove_dir_all(&d) {
                    if e.kind() != std::io::ErrorKind::NotFound {
                        warn!(dir = %d.display(), error = %e, "cannot delete application dir");
                    }
                }
            }
        });
    }
}

/// Removes a finished application's staging directory `<root>/<user>/<app>`: only when
/// `<root>/<user>` is a real directory (not a link someone could point elsewhere); the
/// directory itself is removed without following links inside it. Gone already is fine.
fn remove_staging(dir: &std::path::Path) {
    let parent_is_dir = dir
        .parent()
        .and_then(|p| std::fs::symlink_metadata(p).ok())
        .is_some_and(|m| m.is_dir());
    if !parent_is_dir {
        return;
    }
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => match std::fs::remove_dir_all(dir) {
            Ok(()) => info!(dir = %dir.display(), "removed the application's staging directory"),
            Err(e) => {
                warn!(dir = %dir.display(), error = %e, "cannot remove the staging directory")
            }
        },
        Ok(_) => {
            warn!(dir = %dir.display(), "the staging directory is not a directory; left alone")
        }
        Err(_) => {}
    }
}
