//! Re-initializing a running container, YARN's `reInitializeContainer`
//! (`POST /ws/v1/node/containers/reinitialize`): the container keeps its id, allocation,
//! devices, cgroup limits, work dir and logs; only its process is replaced.
//!
//! The steps, each driven by a command so the actor never waits:
//! 1. [`Manager::reinitialize`] checks the request, builds the new launch spec from the
//!    container's token and the new launch context (the same environment rules as a start,
//!    the same devices), marks the container `REINITIALIZING` and localizes the new context in
//!    a task ([`Command::ReinitLocalized`]). The old process keeps running meanwhile, so a
//!    context that cannot be localized is refused with the old process untouched.
//! 2. Localized: SIGTERM to the old process group, and a timer for the grace
//!    ([`Command::ReinitGraceOver`]: SIGKILL to what is left).
//! 3. The old leader's exit (its reaper's [`Command::Exited`]) is not a completion: the
//!    group's stragglers get SIGKILL and the new process starts in the same container, which
//!    is `RUNNING` again. The caller's reply says when.
//!
//! To the RM the container is `RUNNING` throughout (every state before completion is).
//! A stop during a re-initialization stops the container as usual (its caller is answered
//! with [`ReinitError::Ended`]).

use std::sync::Arc;
use std::time::Duration;

use spindle_common::ids::ContainerId;
use spindle_common::records::node::ContainerLaunchContext;
use spindle_common::states::NmContainerState;
use tracing::{info, warn, Instrument};

use super::start::valid_env;
use super::{span, Command, Manager, Reply};
use crate::containers::{Reinit, ReinitRefusal, ReinitStep};
use crate::launcher::{ExecHandle, StopSignal};

/// The longest grace a re-initialization may ask for (ten minutes).
pub const MAX_REINIT_GRACE: Duration = Duration::from_secs(600);

/// A re-initialization done: the new process runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reinitialized {
    pub id: ContainerId,
    /// When the new process started (ms since the epoch).
    pub started_ms: u64,
    /// How long the old process took to go, from the SIGTERM (0 if it had already ended).
    pub stopped_in_ms: u64,
    /// Re-initializations of this container so far, this one included.
    pub reinits: u32,
}

/// Why a re-initialization did not happen (or did not finish).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReinitError {
    /// Refused before anything changed: unknown, not running, already re-initializing.
    #[error(transparent)]
    Refused(#[from] ReinitRefusal),
    /// The new launch context is malformed; nothing changed.
    #[error("Invalid launch context for container {id}: {message}")]
    BadContext { id: ContainerId, message: String },
    /// The new launch context could not be localized: the old process runs on (or, if it
    /// had ended meanwhile, the container failed).
    #[error("Cannot localize the new launch context of container {id}: {message}")]
    Localization { id: ContainerId, message: String },
    /// The old process is gone but the new one could not start: the container failed.
    #[error("Container {id} could not start its new process: {message}")]
    StartFailed { id: ContainerId, message: String },
    /// The container was stopped (or ended) before the new process started.
    #[error("Container {id} ended before its re-initialization finished: {message}")]
    Ended { id: ContainerId, message: String },
    /// The NM is shutting down.
    #[error("the NodeManager is shutting down")]
    ShuttingDown,
}

type ReinitReply = Reply<Result<Reinitialized, ReinitError>>;

impl Manager {
    pub(super) fn reinitialize(
        &mut self,
        id: ContainerId,
        context: ContainerLaunchContext,
        grace: Option<Duration>,
        reply: ReinitReply,
        now: u64,
    ) {
        let _g = span(&id).entered();
        if self.closing {
            let _ = reply.send(Err(ReinitError::ShuttingDown));
            return;
        }
        let bad = |message: String| ReinitError::BadContext { id, message };
        let checked =
            (|| {
                if context.commands.iter().all(|c| c.trim().is_empty()) {
                    return Err(bad("no command to run".into()));
                }
                if let Some((k, _)) = context.environment.iter().find(|(k, v)| !valid_env(k, v)) {
                    return Err(bad(format!(
                        "invalid environment variable '{k}' in the launch context"
                    )));
                }
                if let Some(e) = context.local_resources.keys().find_map(|k| {
                    crate::launcher::resource_target(std::path::Path::new("."), k).err()
                }) {
                    return Err(bad(e));
                }
                if grace.is_some_and(|g| g > MAX_REINIT_GRACE) {
                    return Err(bad(format!(
                        "gracePeriodMs may be at most {}",
                        MAX_REINIT_GRACE.as_millis()
                    )));
                }
                Ok(())
            })();
        if let Err(e) = checked {
            let _ = reply.send(Err(e));
            return;
        }
        let grace = grace.unwrap_or(self.ctx.sigkill_delay);
        let grace_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
        let Some(c) = self.table.get(&id) else {
            let _ = reply.send(Err(ReinitRefusal::Unknown(id).into()));
            return;
        };
        let token = c.token.clone();
        let user = c.user.clone();
        if let Err(refusal) = self.table.begin_reinit(&id, grace_ms) {
            let _ = reply.send(Err(refusal.into()));
            return;
        }
        // The same devices as before, told to the process the same way.
        let grant = self.plugins.grant_of(&id);
        let mut spec = self.launch_spec(&token, &context, grant.env);
        spec.run_as = match self.ctx.run_as.credentials_for(&user) {
            Ok(r) => r,
            Err(e) => {
                // Cannot happen for a container that started as this user; refuse anyway.
                self.table.reinit_localized(&id, Err(e.clone()), now);
                let _ = reply.send(Err(bad(e)));
                return;
            }
        };
        spec.isolation.denied_devices = self
            .plugins
            .managed_devices()
            .into_iter()
            .filter(|d| !grant.devices.contains(d))
            .collect();
        spec.isolation.granted_devices = grant.devices;
        info!(command = %spec.command, grace_ms, "re-initializing container: localizing its new launch context");
        self.pending.insert(id, spec.clone());
        self.reinit_waiters.insert(id, reply);
        self.persist();
        let executor = Arc::clone(&self.executor);
        let tx = self.tx.clone();
        tokio::spawn(
            async move {
                let result =
                    match tokio::task::spawn_blocking(move || executor.prepare(&spec)).await {
                        Ok(r) => r.map_err(|e| e.to_string()),
                        Err(e) => Err(format!("localization task failed: {e}")),
                    };
                let _ = tx.send(Command::ReinitLocalized { id, result }).await;
            }
            .instrument(span(&id)),
        );
    }

    pub(super) fn reinit_localized(
        &mut self,
        id: ContainerId,
        result: Result<(), String>,
        now: u64,
    ) {
        let _g = span(&id).entered();
        let diag = result.as_ref().err().cloned();
        let step = self.table.reinit_localized(&id, result, now);
        if let Some(message) = diag {
            warn!(%message, "the new launch context could not be localized");
            self.pending.remove(&id);
            self.answer(id, Err(ReinitError::Localization { id, message }));
        }
        self.reinit_step(id, step, now);
    }

    pub(super) fn reinit_grace_over(&mut self, id: ContainerId, old: &ExecHandle) {
        if self.table.reinit_kill_due(&id, old) {
            let _g = span(&id).entered();
            info!(process = %old, "the process being replaced ignored SIGTERM; sending SIGKILL");
            self.signal(old, StopSignal::Kill);
        }
    }

    /// Carries out what the table decided.
    pub(super) fn reinit_step(&mut self, id: ContainerId, step: ReinitStep, now: u64) {
        match step {
            ReinitStep::Wait => {}
            ReinitStep::Reverted => {
                info!("re-initialization abandoned; the old process runs on");
                self.persist();
            }
            ReinitStep::Failed(outcome) => {
                self.completed(id, outcome, true);
            }
            ReinitStep::Abandoned => {
                self.pending.remove(&id);
                let message = match self.table.get(&id) {
                    Some(c) => format!("it is {}", c.state()),
                    None => "it is gone".into(),
                };
                self.answer(id, Err(ReinitError::Ended { id, message }));
            }
            ReinitStep::TerminateOld { old, grace_ms } => {
                info!(process = %old, grace_ms, "re-initializing container: SIGTERM to its old process");
                self.signal(&old, StopSignal::Term);
                let tx = self.tx.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(grace_ms)).await;
                    let _ = tx.send(Command::ReinitGraceOver { id, old }).await;
                });
            }
            ReinitStep::StartNew { old } => self.reinit_start(id, &old, now),
        }
    }

    fn reinit_start(&mut self, id: ContainerId, old: &ExecHandle, now: u64) {
        // Whatever the old process left behind goes now.
        self.signal(old, StopSignal::Kill);
        let stopped_in_ms = match self.table.get(&id).and_then(|c| c.reinit()) {
            Some(Reinit::Stopping { since_ms, .. }) => now.saturating_sub(*since_ms),
            _ => 0,
        };
        let Some(spec) = self.pending.remove(&id) else {
            warn!("re-initialized container has no launch spec");
            if let Some(o) = self
                .table
                .reinit_start_failed(&id, "no launch spec".into(), now)
            {
                self.completed(id, o, true);
            }
            return;
        };
        match self.executor.start(&spec, false) {
            Ok(p) => {
                info!(
                    process = %p.handle,
                    stopped_in_ms, "container re-initialized: its new process started"
                );
                self.table.reinit_started(&id, p.handle);
                self.metrics.launched += 1;
                self.persist();
                self.spawn_reaper(id, p.exit, spec.stderr_path());
                let reinits = self.table.get(&id).map_or(0, |c| c.reinits);
                self.answer(
                    id,
                    Ok(Reinitialized {
                        id,
                        started_ms: spindle_common::time::now_ms(),
                        stopped_in_ms,
                        reinits,
                    }),
                );
            }
            Err(e) => {
                warn!(error = %e, "the re-initialized container's new process did not start");
                let message = e.to_string();
                if let Some(o) = self.table.reinit_start_failed(&id, message.clone(), now) {
                    self.answer(id, Err(ReinitError::StartFailed { id, message }));
                    self.completed(id, o, true);
                }
            }
        }
    }

    /// Answers the caller waiting for `id`'s re-initialization, if any.
    pub(super) fn answer(&mut self, id: ContainerId, r: Result<Reinitialized, ReinitError>) {
        if let Some(w) = self.reinit_waiters.remove(&id) {
            let _ = w.send(r);
        }
    }

    /// A container completed: a re-initialization still waiting on it will not finish.
    pub(super) fn reinit_ended(&mut self, id: ContainerId) {
        if self.reinit_waiters.contains_key(&id) {
            let message = match self.table.get(&id) {
                Some(c) if c.state() == NmContainerState::CONTAINER_CLEANEDUP_AFTER_KILL => {
                    "it was stopped".to_string()
                }
                Some(c) => format!("it is {}: {}", c.state(), c.diagnostics()),
                None => "it is gone".into(),
            };
            self.answer(id, Err(ReinitError::Ended { id, message }));
        }
    }
}
