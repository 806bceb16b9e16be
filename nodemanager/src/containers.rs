//! The container table and each container's state machine, with no I/O.
//!
//! The [`crate::manager`] actor owns the one table and performs the effects that the
//! transitions here ask for (signals, store writes, heartbeats); keeping this part pure lets
//! the exit-status rules be tested without processes.
//!
//! Life of a container (NM detailed states, as the REST API shows them):
//! `LOCALIZING` → `RUNNING` → `EXITED_WITH_SUCCESS` | `EXITED_WITH_FAILURE`, or
//! `RUNNING` → `KILLING` → `CONTAINER_CLEANEDUP_AFTER_KILL` when stopped, or
//! `LOCALIZING` → `LOCALIZATION_FAILED`. A re-initialization (YARN's
//! `reInitializeContainer`) goes `RUNNING` → `REINITIALIZING` → `RUNNING` with a new process
//! in the same container (same id, allocation, devices, work dir), its step in
//! [`Container::reinit`]. A resource update (YARN's `updateContainer`) keeps the state: a
//! newer token's memory and vcores replace the container's ([`ContainerTable::begin_update`],
//! [`ContainerTable::finish_update`]); the old process's end is not a completion. Every one of those ends is *complete* to the RM and
//! is reported in each heartbeat until the RM acknowledges it in
//! `containersToBeRemovedFromNm`; the container is then `DONE`. `DONE` containers stay
//! visible to REST (bounded by [`ContainerTable::prune_done`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use spindle_common::ids::{ApplicationId, ContainerId};
use spindle_common::records::am::ContainerStatus;
use spindle_common::records::resource::ResourceInfo;
use spindle_common::records::tracker::NmContainerReport;
use spindle_common::resource::Resource;
use spindle_common::states::{exit_status, ContainerState, NmContainerState};
use spindle_common::token::ContainerTokenIdentifier;

/// Who asked for a container to stop; decides its exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// `POST /containers/stop` (an AM): -105 KILLED_BY_APPMASTER.
    AppMaster,
    /// The RM's `containersToCleanup` / `applicationsToCleanup`: -106 KILLED_BY_RESOURCEMANAGER.
    ResourceManager,
    /// The NM is shutting down without recovery: -100 ABORTED.
    NodeShutdown,
    /// Held for a gang launch that was not released in time: -100 ABORTED.
    HoldExpired,
}

impl StopReason {
    pub fn exit_status(self) -> i32 {
        match self {
            Self::AppMaster => exit_status::KILLED_BY_APPMASTER,
            Self::ResourceManager => exit_status::KILLED_BY_RESOURCEMANAGER,
            Self::NodeShutdown | Self::HoldExpired => exit_status::ABORTED,
        }
    }
    fn describe(self) -> &'static str {
        match self {
            Self::AppMaster => "Container killed by the ApplicationMaster.",
            Self::ResourceManager => "Container killed by the ResourceManager.",
            Self::NodeShutdown => "Container killed because the NodeManager is shutting down.",
            Self::HoldExpired => {
                "Container was held for a gang launch that was not released in time; it never ran."
            }
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AppMaster => "APP_MASTER",
            Self::ResourceManager => "RESOURCE_MANAGER",
            Self::NodeShutdown => "NODE_SHUTDOWN",
            Self::HoldExpired => "HOLD_EXPIRED",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "APP_MASTER" => Some(Self::AppMaster),
            "RESOURCE_MANAGER" => Some(Self::ResourceManager),
            "NODE_SHUTDOWN" => Some(Self::NodeShutdown),
            "HOLD_EXPIRED" => Some(Self::HoldExpired),
            _ => None,
        }
    }
}

/// How a container's process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessExit {
    /// Exited with this code (bash already turns a signalled command into 128+signo).
    Code(i32),
    /// The process itself was killed by this signal.
    Signal(i32),
    /// Not observed (it ended while the NM was down and left no exit-code file).
    Unknown(String),
    /// Killed for exceeding its memory limit: by the kernel's OOM killer in its cgroup, or by
    /// the NM's process-tree watcher. `detail` says which, for the diagnostics.
    MemoryExceeded { limit_mb: i64, detail: String },
}

impl ProcessExit {
    /// YARN's reporting of a process end: the code, 128+signo for a signal, -100 if unknown.
    pub fn exit_status(&self) -> i32 {
        match self {
            Self::Code(c) => *c,
            Self::Signal(s) => 128 + s,
            Self::Unknown(_) => exit_status::ABORTED,
            Self::MemoryExceeded { .. } => exit_status::KILLED_EXCEEDED_PMEM,
        }
    }
}

/// How a completed container counts in the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Succeeded,
    Failed,
    Killed,
}

/// One container on this node.
#[derive(Debug, Clone)]
pub struct Container {
    pub id: ContainerId,
    pub user: String,
    pub resource: Resource,
    pub token: ContainerTokenIdentifier,
    pub state: NmContainerState,
    /// -1000 (INVALID) until it completes.
    pub exit_status: i32,
    pub diagnostics: String,
    /// The process-group leader (the pgid), once started.
    pub pid: Option<i32>,
    /// The leader's start time in clock ticks since boot, to tell it from a reused pid.
    pub start_ticks: Option<u64>,
    pub start_time_ms: u64,
    pub finish_time_ms: Option<u64>,
    pub work_dir: PathBuf,
    pub log_dirs: Vec<PathBuf>,
    pub stop: Option<StopReason>,
    /// The re-initialization under way: `Some` exactly while the state is `REINITIALIZING`.
    pub reinit: Option<Reinit>,
    /// Re-initializations done (each one a new process in this container).
    pub reinits: u32,
    /// The version of a resource update whose limits are being applied (YARN's
    /// `updateContainer`); `Some` only while the actor waits for the executor.
    pub updating: Option<i32>,
}

/// Where a re-initialization stands (the container is `REINITIALIZING`). The old process
/// runs until the new launch context is localized, then gets SIGTERM, and SIGKILL after
/// `grace_ms`; the new process starts once the old one's leader has exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reinit {
    /// The new launch context is being localized; the old process group `old_pgid` still
    /// runs, unless `old_exited` (it ended on its own meanwhile).
    Localizing {
        old_pgid: i32,
        old_exited: bool,
        grace_ms: u64,
    },
    /// SIGTERM went to `old_pgid` at `since_ms`; SIGKILL follows at `since_ms + grace_ms`.
    Stopping {
        old_pgid: i32,
        since_ms: u64,
        grace_ms: u64,
    },
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

/// Why a resource update (YARN's `updateContainer`, `POST /containers/update`) is refused,
/// with nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpdateRefusal {
    #[error("Container {0} is not handled by this NodeManager")]
    Unknown(ContainerId),
    #[error("Container {id} is {state}; only a live container (localizing, held or running) can be updated")]
    NotLive {
        id: ContainerId,
        state: NmContainerState,
    },
    #[error("Container {0} is being re-initialized; update it once its new process runs")]
    Reinitializing(ContainerId),
    #[error("Container {0} has another resource update being applied; retry once it is answered")]
    Busy(ContainerId),
    #[error("Container {id} is at version {current}; an update to version {offered} is stale or replayed")]
    Stale {
        id: ContainerId,
        current: i32,
        offered: i32,
    },
    #[error("Container {id}: {name} would change from {from} to {to}; device counts cannot change in place; use an elastic gang")]
    DeviceChange {
        id: ContainerId,
        name: String,
        from: i64,
        to: i64,
    },
    #[error("Container {id}: the new resource <memory:{memory_mb}, vCores:{vcores}> is not a container size")]
    Invalid {
        id: ContainerId,
        memory_mb: i64,
        vcores: i64,
    },
}

impl UpdateRefusal {
    /// The exception name of the `failedRequests` entry (YARN's words).
    pub fn exception(&self) -> &'static str {
        match self {
            Self::Stale { .. } => "InvalidToken",
            Self::Unknown(_) => "InvalidContainerException",
            _ => "YarnException",
        }
    }
}

/// An accepted update: what the container's limits go from and to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdatePlan {
    pub old: Resource,
    pub new: Resource,
    /// True if the container has a process (held or running) whose isolation must change;
    /// false while it is localizing (only its launch spec changes).
    pub has_process: bool,
}

/// What the actor does next in a re-initialization.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReinitStep {
    /// Nothing yet (waiting for the localization or for the old process to exit).
    Wait,
    /// SIGTERM the old group now; SIGKILL it after `grace_ms` if its leader still runs.
    TerminateOld { pgid: i32, grace_ms: u64 },
    /// The old process is gone: kill its stragglers in `old_pgid` and start the new one.
    StartNew { old_pgid: i32 },
    /// It cannot go on: the container is back to `RUNNING` with its old process.
    Reverted,
    /// It cannot go on and the old process is gone: the container completed (failed).
    Failed(Outcome),
    /// The container is no longer re-initializing (stopped meanwhile).
    Abandoned,
}

impl Container {
    /// A container accepted for launch, in `LOCALIZING`.
    pub fn new(
        token: ContainerTokenIdentifier,
        work_dir: PathBuf,
        log_dirs: Vec<PathBuf>,
        now_ms: u64,
    ) -> Self {
        Self {
            id: token.container_id,
            user: token.app_submitter.clone(),
            resource: token.resource.to_resource(),
            token,
            state: NmContainerState::LOCALIZING,
            exit_status: exit_status::INVALID,
            diagnostics: String::new(),
            pid: None,
            start_ticks: None,
            start_time_ms: now_ms,
            finish_time_ms: None,
            work_dir,
            log_dirs,
            stop: None,
            reinit: None,
            reinits: 0,
            updating: None,
        }
    }

    pub fn app_id(&self) -> ApplicationId {
        self.id.application_id()
    }

    /// Complete to the RM (terminal here), whether or not the RM has acknowledged it.
    pub fn is_complete(&self) -> bool {
        is_terminal(self.state)
    }

    /// Holds node resources: accepted and not yet complete.
    pub fn is_live(&self) -> bool {
        !self.is_complete()
    }

    /// YARN's public state: everything before completion is RUNNING to the RM.
    pub fn public_state(&self) -> ContainerState {
        if self.is_complete() {
            ContainerState::COMPLETE
        } else {
            ContainerState::RUNNING
        }
    }

    pub fn report(&self) -> NmContainerReport {
        NmContainerReport {
            status: ContainerStatus {
                container_id: self.id,
                state: self.public_state(),
                exit_status: self.exit_status,
                diagnostics: self.diagnostics.clone(),
                gang_id: None,
            },
            resource: ResourceInfo::from(&self.resource),
        }
    }

    fn complete(&mut self, state: NmContainerState, status: i32, diag: String, now_ms: u64) {
        self.state = state;
        self.exit_status = status;
        self.diagnostics = diag;
        self.finish_time_ms = Some(now_ms);
    }
}

pub fn is_terminal(s: NmContainerState) -> bool {
    matches!(
        s,
        NmContainerState::LOCALIZATION_FAILED
            | NmContainerState::EXITED_WITH_SUCCESS
            | NmContainerState::EXITED_WITH_FAILURE
            | NmContainerState::CONTAINER_CLEANEDUP_AFTER_KILL
            | NmContainerState::DONE
    )
}

/// What a stop request needs done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopAction {
    /// Not on this node.
    Unknown,
    /// Already complete or already being stopped: nothing more to do.
    Nothing,
    /// Was still localizing: now complete, no process to signal.
    CompletedBeforeStart(Outcome),
    /// SIGTERM the group now, SIGKILL it after the delay.
    SignalGroup { pgid: i32 },
}

/// An application as the NM sees it: the containers it ran here.
#[derive(Debug, Clone)]
pub struct App {
    pub id: ApplicationId,
    pub user: String,
    pub containers: BTreeSet<ContainerId>,
    /// The RM listed it in `applicationsToCleanup`.
    pub finishing: bool,
}

/// The NM application states YARN's REST reports.
pub const APP_RUNNING: &str = "RUNNING";
pub const APP_FINISHING: &str = "FINISHING_CONTAINERS_WAIT";
pub const APP_FINISHED: &str = "FINISHED";

#[derive(Debug, Default)]
pub struct ContainerTable {
    containers: BTreeMap<ContainerId, Container>,
    apps: BTreeMap<ApplicationId, App>,
}

impl ContainerTable {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn get(&self, id: &ContainerId) -> Option<&Container> {
        self.containers.get(id)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Container> + '_ {
        self.containers.values()
    }

    pub fn apps(&self) -> impl Iterator<Item = &App> + '_ {
        self.apps.values()
    }

    pub fn app(&self, id: &ApplicationId) -> Option<&App> {
        self.apps.get(id)
    }

    /// Adds a container (new, or recovered from the store). Refuses a known id.
    pub fn insert(&mut self, c: Container) -> Result<(), NmContainerState> {
        if let Some(old) = self.containers.get(&c.id) {
            return Err(old.state);
        }
        let app = self.apps.entry(c.app_id()).or_insert_with(|| App {
            id: c.app_id(),
            user: c.user.clone(),
            containers: BTreeSet::new(),
            finishing: false,
        });
        app.containers.insert(c.id);
        self.containers.insert(c.id, c);
        Ok(())
    }

    /// Localization finished: true if the process should be started now.
    pub fn may_start(&self, id: &ContainerId) -> bool {
        matches!(self.containers.get(id), Some(c) if c.state == NmContainerState::LOCALIZING)
    }

    pub fn started(&mut self, id: &ContainerId, pid: i32, start_ticks: Option<u64>) {
        self.forked(id, pid, start_ticks, NmContainerState::RUNNING);
    }

    /// Its process is set up and held before `exec` (a held gang start): `SCHEDULED`, YARN's
    /// state for a localized container waiting to run, until [`ContainerTable::released`].
    pub fn held(&mut self, id: &ContainerId, pid: i32, start_ticks: Option<u64>) {
        self.forked(id, pid, start_ticks, NmContainerState::SCHEDULED);
    }

    fn forked(
        &mut self,
        id: &ContainerId,
        pid: i32,
        start_ticks: Option<u64>,
        to: NmContainerState,
    ) {
        if let Some(c) = self.containers.get_mut(id) {
            if c.state == NmContainerState::LOCALIZING {
                c.state = to;
                c.pid = Some(pid);
                c.start_ticks = start_ticks;
            }
        }
    }

    /// A held container was let go: true if it was held (it is `RUNNING` now).
    pub fn released(&mut self, id: &ContainerId) -> bool {
        match self.containers.get_mut(id) {
            Some(c) if c.state == NmContainerState::SCHEDULED => {
                c.state = NmContainerState::RUNNING;
                true
            }
            _ => false,
        }
    }

    /// Localization (or the process start) failed: the container never ran.
    pub fn launch_failed(
        &mut self,
        id: &ContainerId,
        localization: bool,
        diag: String,
        now_ms: u64,
    ) -> Option<Outcome> {
        let c = self.containers.get_mut(id)?;
        if c.state != NmContainerState::LOCALIZING {
            return None;
        }
        let state = if localization {
            NmContainerState::LOCALIZATION_FAILED
        } else {
            NmContainerState::EXITED_WITH_FAILURE
        };
        c.complete(state, exit_status::INVALID, diag, now_ms);
        Some(Outcome::Failed)
    }

    pub fn request_stop(
        &mut self,
        id: &ContainerId,
        reason: StopReason,
        now_ms: u64,
    ) -> StopAction {
        let Some(c) = self.containers.get_mut(id) else {
            return StopAction::Unknown;
        };
        match c.state {
            NmContainerState::LOCALIZING => {
                c.stop = Some(reason);
                c.complete(
                    NmContainerState::CONTAINER_CLEANEDUP_AFTER_KILL,
                    reason.exit_status(),
                    format!(
                        "{} Container was stopped before it started.",
                        reason.describe()
                    ),
                    now_ms,
                );
                StopAction::CompletedBeforeStart(Outcome::Killed)
            }
            NmContainerState::REINITIALIZING => match c.reinit.take() {
                Some(Reinit::Localizing {
                    old_exited: true, ..
                }) => {
                    // No process runs: the old one ended, the new one has not started.
                    c.stop = Some(reason);
                    c.complete(
                        NmContainerState::CONTAINER_CLEANEDUP_AFTER_KILL,
                        reason.exit_status(),
                        format!(
                            "{} Container was stopped while it was being re-initialized.",
                            reason.describe()
                        ),
                        now_ms,
                    );
                    StopAction::CompletedBeforeStart(Outcome::Killed)
                }
                Some(Reinit::Localizing { old_pgid, .. } | Reinit::Stopping { old_pgid, .. }) => {
                    c.state = NmContainerState::KILLING;
                    c.stop = Some(reason);
                    StopAction::SignalGroup { pgid: old_pgid }
                }
                None => StopAction::Nothing,
            },
            NmContainerState::RUNNING | NmContainerState::SCHEDULED => match c.pid {
                Some(pgid) => {
                    c.state = NmContainerState::KILLING;
                    c.stop = Some(reason);
                    StopAction::SignalGroup { pgid }
                }
                None => StopAction::Nothing,
            },
            _ => StopAction::Nothing,
        }
    }

    /// The process ended. Returns how it counts, or None if it was already complete.
    pub fn exited(
        &mut self,
        id: &ContainerId,
        exit: &ProcessExit,
        stderr_tail: &str,
        now_ms: u64,
    ) -> Option<Outcome> {
        let c = self.containers.get_mut(id)?;
        let status = exit.exit_status();
        let how = match exit {
            ProcessExit::Code(code) => format!("Exit code is {code}"),
            ProcessExit::Signal(s) => format!("Killed by signal {s}"),
            ProcessExit::Unknown(why) => why.clone(),
            ProcessExit::MemoryExceeded { detail, .. } => format!("Killed: {detail}"),
        };
        match c.state {
            NmContainerState::RUNNING if matches!(exit, ProcessExit::MemoryExceeded { .. }) => {
                // YARN's pmem kill: the NM (or the kernel on its behalf) killed the container.
                let limit = match exit {
                    ProcessExit::MemoryExceeded { limit_mb, .. } => *limit_mb,
                    _ => 0,
                };
                let mut diag = format!(
                    "Container killed for exceeding its memory limit of {limit} MB. {how}."
                );
                if !stderr_tail.is_empty() {
                    diag.push_str(&format!(
                        "\nLast {} bytes of stderr :\n{stderr_tail}",
                        stderr_tail.len()
                    ));
                }
                c.complete(
                    NmContainerState::CONTAINER_CLEANEDUP_AFTER_KILL,
                    status,
                    diag,
                    now_ms,
                );
                Some(Outcome::Killed)
            }
            NmContainerState::RUNNING => {
                if status == 0 {
                    c.complete(
                        NmContainerState::EXITED_WITH_SUCCESS,
                        0,
                        String::new(),
                        now_ms,
                    );
                    Some(Outcome::Succeeded)
                } else {
                    let mut diag = match exit {
                        ProcessExit::Unknown(_) => how,
                        _ => format!("Container exited with a non-zero exit code {status}. {how}."),
                    };
                    if !stderr_tail.is_empty() {
                        diag.push_str(&format!(
                            "\nLast {} bytes of stderr :\n{stderr_tail}",
                            stderr_tail.len()
                        ));
                    }
                    c.complete(NmContainerState::EXITED_WITH_FAILURE, status, diag, now_ms);
                    Some(Outcome::Failed)
                }
            }
            NmContainerState::SCHEDULED => {
                // Its gate was closed without a release (or someone else killed it): the
                // command never ran.
                let status = match exit {
                    ProcessExit::Code(code) if *code != 0 => *code,
                    _ => exit_status::ABORTED,
                };
                c.complete(
                    NmContainerState::EXITED_WITH_FAILURE,
                    status,
                    format!("Container ended while held for its gang launch; it never ran. {how}."),
                    now_ms,
                );
                Some(Outcome::Failed)
            }
            NmContainerState::KILLING => {
                let reason = c.stop.unwrap_or(StopReason::AppMaster);
                c.complete(
                    NmContainerState::CONTAINER_CLEANEDUP_AFTER_KILL,
                    reason.exit_status(),
                    format!("{} Container killed on request. {how}", reason.describe()),
                    now_ms,
                );
                Some(Outcome::Killed)
            }
            _ => None,
        }
    }

    /// Begins a re-initialization: a `RUNNING` container with a process goes
    /// `REINITIALIZING` (localizing its new launch context). Refused, with nothing changed,
    /// for an unknown container, one not running, or one already re-initializing.
    pub fn begin_reinit(&mut self, id: &ContainerId, grace_ms: u64) -> Result<(), ReinitRefusal> {
        let Some(c) = self.containers.get_mut(id) else {
            return Err(ReinitRefusal::Unknown(*id));
        };
        match (c.state, c.pid) {
            (NmContainerState::RUNNING, Some(_)) if c.updating.is_some() => {
                Err(ReinitRefusal::Updating(*id))
            }
            (NmContainerState::RUNNING, Some(pgid)) => {
                c.state = NmContainerState::REINITIALIZING;
                c.reinit = Some(Reinit::Localizing {
                    old_pgid: pgid,
                    old_exited: false,
                    grace_ms,
                });
                Ok(())
            }
            (NmContainerState::REINITIALIZING, _) => Err(ReinitRefusal::AlreadyReinitializing(*id)),
            (state, _) => Err(ReinitRefusal::NotRunning { id: *id, state }),
        }
    }

    /// The new launch context is localized (`Ok`) or could not be (`Err(diagnostics)`).
    pub fn reinit_localized(
        &mut self,
        id: &ContainerId,
        result: Result<(), String>,
        now_ms: u64,
    ) -> ReinitStep {
        let Some(c) = self.containers.get_mut(id) else {
            return ReinitStep::Abandoned;
        };
        let Some(Reinit::Localizing {
            old_pgid,
            old_exited,
            grace_ms,
        }) = c.reinit
        else {
            return ReinitStep::Abandoned;
        };
        match (result, old_exited) {
            (Ok(()), false) => {
                c.reinit = Some(Reinit::Stopping {
                    old_pgid,
                    since_ms: now_ms,
                    grace_ms,
                });
                ReinitStep::TerminateOld {
                    pgid: old_pgid,
                    grace_ms,
                }
            }
            (Ok(()), true) => ReinitStep::StartNew { old_pgid },
            (Err(_), false) => {
                c.reinit = None;
                c.state = NmContainerState::RUNNING;
                ReinitStep::Reverted
            }
            (Err(diag), true) => {
                c.reinit = None;
                c.complete(
                    NmContainerState::EXITED_WITH_FAILURE,
                    exit_status::INVALID,
                    format!(
                        "Container's process ended while it was being re-initialized, and its                          new launch context could not be localized: {diag}"
                    ),
                    now_ms,
                );
                ReinitStep::Failed(Outcome::Failed)
            }
        }
    }

    /// The leader of a re-initializing container's old process exited. None if the
    /// container is not re-initializing (the exit is an ordinary one).
    pub fn reinit_old_exited(&mut self, id: &ContainerId) -> Option<ReinitStep> {
        let c = self.containers.get_mut(id)?;
        match c.reinit.as_mut()? {
            Reinit::Localizing { old_exited, .. } => {
                *old_exited = true;
                Some(ReinitStep::Wait)
            }
            Reinit::Stopping { old_pgid, .. } => Some(ReinitStep::StartNew {
                old_pgid: *old_pgid,
            }),
        }
    }

    /// The old process group whose SIGKILL is due, if the container still waits for it.
    pub fn reinit_kill_due(&self, id: &ContainerId, pgid: i32) -> bool {
        matches!(
            self.containers.get(id).and_then(|c| c.reinit),
            Some(Reinit::Stopping { old_pgid, .. }) if old_pgid == pgid
        )
    }

    /// The new process runs: the container is `RUNNING` again, with its new leader.
    pub fn reinit_started(&mut self, id: &ContainerId, pid: i32, start_ticks: Option<u64>) {
        if let Some(c) = self.containers.get_mut(id) {
            if c.state == NmContainerState::REINITIALIZING {
                c.state = NmContainerState::RUNNING;
                c.reinit = None;
                c.pid = Some(pid);
                c.start_ticks = start_ticks;
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
        let c = self.containers.get_mut(id)?;
        if c.state != NmContainerState::REINITIALIZING {
            return None;
        }
        c.reinit = None;
        c.complete(
            NmContainerState::EXITED_WITH_FAILURE,
            exit_status::INVALID,
            format!("Container was re-initialized but its new process could not start: {diag}"),
            now_ms,
        );
        Some(Outcome::Failed)
    }

    /// Checks a verified update token against the container (YARN's `updateContainer`):
    /// the container must be live and not re-initializing, have no other update in flight,
    /// and be at an older version than the token's; memory and vcores may change, extended
    /// resources (devices) may not. Accepted, a container with a process is marked as
    /// updating until [`ContainerTable::finish_update`]; nothing changes on a refusal.
    pub fn begin_update(
        &mut self,
        ident: &ContainerTokenIdentifier,
    ) -> Result<UpdatePlan, UpdateRefusal> {
        let id = ident.container_id;
        let Some(c) = self.containers.get_mut(&id) else {
            return Err(UpdateRefusal::Unknown(id));
        };
        let has_process = match c.state {
            NmContainerState::LOCALIZING => false,
            NmContainerState::SCHEDULED | NmContainerState::RUNNING => true,
            NmContainerState::REINITIALIZING => return Err(UpdateRefusal::Reinitializing(id)),
            state => return Err(UpdateRefusal::NotLive { id, state }),
        };
        if c.updating.is_some() {
            return Err(UpdateRefusal::Busy(id));
        }
        if ident.version <= c.token.version {
            return Err(UpdateRefusal::Stale {
                id,
                current: c.token.version,
                offered: ident.version,
            });
        }
        let new = ident.resource.to_resource();
        if new.memory_mb <= 0 || new.vcores <= 0 {
            return Err(UpdateRefusal::Invalid {
                id,
                memory_mb: new.memory_mb,
                vcores: new.vcores,
            });
        }
        let old = c.resource.clone();
        let names: BTreeSet<&'static str> = old
            .extended()
            .chain(new.extended())
            .map(|(n, _)| n)
            .collect();
        if let Some(name) = names.into_iter().find(|n| old.get(n) != new.get(n)) {
            return Err(UpdateRefusal::DeviceChange {
                id,
                name: name.to_string(),
                from: old.get(name),
                to: new.get(name),
            });
        }
        if has_process {
            c.updating = Some(ident.version);
        }
        Ok(UpdatePlan {
            old,
            new,
            has_process,
        })
    }

    /// An accepted update is done: with `applied`, the container takes the token's resource
    /// and version (what heartbeats report and the recovery store keeps); else only the
    /// in-flight mark goes. False if the container is no longer live (it ended meanwhile),
    /// in which case nothing is recorded.
    pub fn finish_update(&mut self, ident: &ContainerTokenIdentifier, applied: bool) -> bool {
        let Some(c) = self.containers.get_mut(&ident.container_id) else {
            return false;
        };
        if c.updating == Some(ident.version) {
            c.updating = None;
        }
        if c.is_complete() {
            return false;
        }
        if applied && ident.version > c.token.version {
            c.resource = ident.resource.to_resource();
            c.token = ident.clone();
        }
        true
    }

    /// Marks the RM-acknowledged complete containers `DONE`; returns how many changed.
    pub fn acknowledge(&mut self, ids: &[ContainerId]) -> usize {
        let mut n = 0;
        for id in ids {
            if let Some(c) = self.containers.get_mut(id) {
                if c.is_complete() && c.state != NmContainerState::DONE {
                    c.state = NmContainerState::DONE;
                    n += 1;
                }
            }
        }
        n
    }

    /// Containers the RM must hear about: all but the acknowledged ones.
    pub fn reports(&self) -> Vec<NmContainerReport> {
        self.containers
            .values()
            .filter(|c| c.state != NmContainerState::DONE)
            .map(Container::report)
            .collect()
    }

    pub fn live_ids(&self) -> Vec<ContainerId> {
        self.containers
            .values()
            .filter(|c| c.is_live())
            .map(|c| c.id)
            .collect()
    }

    pub fn live_of_app(&self, app: &ApplicationId) -> Vec<ContainerId> {
        self.apps
            .get(app)
            .map(|a| {
                a.containers
                    .iter()
                    .filter(|id| self.containers.get(id).is_some_and(Container::is_live))
                    .copied()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The RM said the application is over. Returns true if it was known here.
    pub fn finish_app(&mut self, app: &ApplicationId) -> bool {
        match self.apps.get_mut(app) {
            Some(a) => {
                a.finishing = true;
                true
            }
            None => false,
        }
    }

    /// YARN's NM application state.
    pub fn app_state(&self, app: &App) -> &'static str {
        let live = app
            .containers
            .iter()
            .any(|id| self.containers.get(id).is_some_and(Container::is_live));
        match (app.finishing, live) {
            (false, _) => APP_RUNNING,
            (true, true) => APP_FINISHING,
            (true, false) => APP_FINISHED,
        }
    }

    /// Sum of what live containers hold.
    pub fn allocated(&self) -> Resource {
        let mut r = Resource::zero();
        for c in self.containers.values().filter(|c| c.is_live()) {
            r.add_assign(&c.resource);
        }
        r
    }

    pub fn running_count(&self) -> usize {
        self.containers.values().filter(|c| c.is_live()).count()
    }

    /// Forgets the oldest `DONE` containers beyond `keep`, and applications left empty.
    pub fn prune_done(&mut self, keep: usize) {
        let mut done: Vec<(u64, ContainerId)> = self
            .containers
            .values()
            .filter(|c| c.state == NmContainerState::DONE)
            .map(|c| (c.finish_time_ms.unwrap_or(0), c.id))
            .collect();
        if done.len() <= keep {
            return;
        }
        done.sort();
        let excess = done.len() - keep;
        for (_, id) in done.into_iter().take(excess) {
            self.containers.remove(&id);
            if let Some(app) = self.apps.get_mut(&id.application_id()) {
                app.containers.remove(&id);
                if app.containers.is_empty() {
                    self.apps.remove(&id.application_id());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spindle_common::ids::{ApplicationAttemptId, NodeId};

    fn cid(app: u32, seq: u64) -> ContainerId {
        ContainerId::new(
            ApplicationAttemptId::new(ApplicationId::new(1, app), 1),
            0,
            seq,
        )
    }

    fn container(id: ContainerId) -> Container {
        let token = ContainerTokenIdentifier {
            container_id: id,
            node_id: NodeId::new("h", 1),
            app_submitter: "alice".into(),
            resource: ResourceInfo::plain(&Resource::new(1024, 1)),
            expiry_time_ms: 0,
            rm_identifier: 1,
            is_am: false,
            version: 0,
            master_key_id: 0,
        };
        Container::new(token, PathBuf::from("/w"), vec![PathBuf::from("/l")], 10)
    }

    fn running(t: &mut ContainerTable, id: ContainerId, pid: i32) {
        t.insert(container(id)).unwrap();
        assert!(t.may_start(&id));
        t.started(&id, pid, None);
    }

    #[test]
    fn exit_codes_are_reported_as_yarn_does() {
        let mut t = ContainerTable::new();
        let (a, b, c) = (cid(1, 1), cid(1, 2), cid(1, 3));
        running(&mut t, a, 100);
        running(&mut t, b, 101);
        running(&mut t, c, 102);
        assert_eq!(t.allocated(), Resource::new(3072, 3));
        assert_eq!(
            t.exited(&a, &ProcessExit::Code(0), "", 20),
            Some(Outcome::Succeeded)
        );
        assert_eq!(
            t.exited(&b, &ProcessExit::Code(3), "boom", 20),
            Some(Outcome::Failed)
        );
        assert_eq!(
            t.exited(&c, &ProcessExit::Signal(9), "", 20),
            Some(Outcome::Failed)
        );
        let get = |id| t.get(&id).unwrap().clone();
        assert_eq!(get(a).state, NmContainerState::EXITED_WITH_SUCCESS);
        assert_eq!(get(b).exit_status, 3);
        assert!(get(b).diagnostics.contains("boom"));
        assert_eq!(get(c).exit_status, 137);
        assert_eq!(t.allocated(), Resource::zero());
        // A second exit report changes nothing.
        assert_eq!(t.exited(&a, &ProcessExit::Code(1), "", 30), None);
    }

    #[test]
    fn stops_carry_the_requesters_status() {
        let mut t = ContainerTable::new();
        let (a, b, c) = (cid(1, 1), cid(1, 2), cid(1, 3));
        running(&mut t, a, 100);
        running(&mut t, b, 101);
        t.insert(container(c)).unwrap();
        assert_eq!(
            t.request_stop(&a, StopReason::AppMaster, 1),
            StopAction::SignalGroup { pgid: 100 }
        );
        // A later stop by someone else does not change the first reason.
        assert_eq!(
            t.request_stop(&a, StopReason::ResourceManager, 1),
            StopAction::Nothing
        );
        assert_eq!(
            t.request_stop(&b, StopReason::ResourceManager, 1),
            StopAction::SignalGroup { pgid: 101 }
        );
        assert_eq!(
            t.request_stop(&c, StopReason::AppMaster, 1),
            StopAction::CompletedBeforeStart(Outcome::Killed)
        );
        assert!(!t.may_start(&c));
        assert_eq!(
            t.exited(&a, &ProcessExit::Code(143), "", 2),
            Some(Outcome::Killed)
        );
        assert_eq!(
            t.exited(&b, &ProcessExit::Signal(9), "", 2),
            Some(Outcome::Killed)
        );
        assert_eq!(t.get(&a).unwrap().exit_status, -105);
        assert_eq!(t.get(&b).unwrap().exit_status, -106);
        assert_eq!(t.get(&c).unwrap().exit_status, -105);
        assert_eq!(
            t.request_stop(&cid(9, 9), StopReason::AppMaster, 1),
            StopAction::Unknown
        );
        assert_eq!(
            t.request_stop(&a, StopReason::AppMaster, 1),
            StopAction::Nothing
        );
    }

    #[test]
    fn completed_containers_are_reported_until_acknowledged() {
        let mut t = ContainerTable::new();
        let (a, b) = (cid(1, 1), cid(1, 2));
        running(&mut t, a, 100);
        running(&mut t, b, 101);
        t.exited(&a, &ProcessExit::Code(0), "", 5);
        let r = t.reports();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].status.state, ContainerState::COMPLETE);
        assert_eq!(r[1].status.state, ContainerState::RUNNING);
        assert_eq!(r[1].status.exit_status, -1000);
        // Acknowledging a running container is ignored.
        assert_eq!(t.acknowledge(&[a, b]), 1);
        assert_eq!(t.reports().len(), 1);
        assert_eq!(t.get(&a).unwrap().state, NmContainerState::DONE);
        t.prune_done(0);
        assert!(t.get(&a).is_none());
        assert!(t.get(&b).is_some());
    }

    #[test]
    fn apps_finish_when_their_containers_are_done() {
        let mut t = ContainerTable::new();
        let (a, b) = (cid(1, 1), cid(2, 1));
        running(&mut t, a, 100);
        running(&mut t, b, 101);
        let app = a.application_id();
        assert_eq!(t.app_state(t.app(&app).unwrap()), APP_RUNNING);
        assert!(t.finish_app(&app));
        assert_eq!(t.live_of_app(&app), vec![a]);
        assert_eq!(t.app_state(t.app(&app).unwrap()), APP_FINISHING);
        t.request_stop(&a, StopReason::ResourceManager, 1);
        t.exited(&a, &ProcessExit::Signal(15), "", 2);
        assert_eq!(t.app_state(t.app(&app).unwrap()), APP_FINISHED);
        assert!(t.live_of_app(&app).is_empty());
        assert_eq!(t.live_ids(), vec![b]);
        assert!(t.insert(container(b)).is_err());
    }

    #[test]
    fn a_memory_kill_is_reported_with_minus_104() {
        let mut t = ContainerTable::new();
        let (a, b) = (cid(1, 1), cid(1, 2));
        running(&mut t, a, 100);
        running(&mut t, b, 101);
        let oom = ProcessExit::MemoryExceeded {
            limit_mb: 64,
            detail: "the kernel's OOM killer killed 1 of its processes".into(),
        };
        assert_eq!(t.exited(&a, &oom, "Killed", 5), Some(Outcome::Killed));
        let c = t.get(&a).unwrap();
        assert_eq!(c.exit_status, -104);
        assert_eq!(c.state, NmContainerState::CONTAINER_CLEANEDUP_AFTER_KILL);
        assert!(
            c.diagnostics
                .starts_with("Container killed for exceeding its memory limit of 64 MB."),
            "{}",
            c.diagnostics
        );
        assert!(c.diagnostics.contains("OOM killer"), "{}", c.diagnostics);
        // A container being stopped keeps its stopper's status.
        t.request_stop(&b, StopReason::AppMaster, 6);
        assert_eq!(t.exited(&b, &oom, "", 7), Some(Outcome::Killed));
        assert_eq!(t.get(&b).unwrap().exit_status, -105);
    }

    #[test]
    fn localization_failures_never_ran() {
        let mut t = ContainerTable::new();
        let a = cid(1, 1);
        t.insert(container(a)).unwrap();
        assert_eq!(
            t.launch_failed(&a, true, "no such file".into(), 3),
            Some(Outcome::Failed)
        );
        let c = t.get(&a).unwrap();
        assert_eq!(c.state, NmContainerState::LOCALIZATION_FAILED);
        assert_eq!(c.exit_status, -1000);
        assert_eq!(c.public_state(), ContainerState::COMPLETE);
    }

    #[test]
    fn a_reinitialization_replaces_the_process_without_completing() {
        let mut t = ContainerTable::new();
        let (a, b, c) = (cid(1, 1), cid(1, 2), cid(1, 3));
        running(&mut t, a, 100);
        t.insert(container(b)).unwrap();
        // Refusals change nothing.
        assert_eq!(
            t.begin_reinit(&cid(9, 9), 10),
            Err(ReinitRefusal::Unknown(cid(9, 9)))
        );
        assert!(matches!(
            t.begin_reinit(&b, 10),
            Err(ReinitRefusal::NotRunning {
                state: NmContainerState::LOCALIZING,
                ..
            })
        ));
        assert_eq!(t.begin_reinit(&a, 500), Ok(()));
        assert_eq!(
            t.begin_reinit(&a, 500),
            Err(ReinitRefusal::AlreadyReinitializing(a))
        );
        let got = t.get(&a).unwrap();
        assert_eq!(got.state, NmContainerState::REINITIALIZING);
        // Still running to the RM, still holding its resources.
        assert_eq!(got.public_state(), ContainerState::RUNNING);
        assert_eq!(t.allocated(), Resource::new(2048, 2));
        assert_eq!(
            t.reinit_localized(&a, Ok(()), 50),
            ReinitStep::TerminateOld {
                pgid: 100,
                grace_ms: 500
            }
        );
        assert!(t.reinit_kill_due(&a, 100));
        assert!(!t.reinit_kill_due(&a, 101));
        // The old leader's exit is a step, not a completion.
        assert_eq!(
            t.reinit_old_exited(&a),
            Some(ReinitStep::StartNew { old_pgid: 100 })
        );
        t.reinit_started(&a, 200, Some(7));
        let got = t.get(&a).unwrap();
        assert_eq!(
            (got.state, got.pid, got.reinits, got.reinit),
            (NmContainerState::RUNNING, Some(200), 1, None)
        );
        assert_eq!(got.exit_status, exit_status::INVALID);
        assert_eq!(t.reinit_old_exited(&a), None);
        // The new process's end is an ordinary one.
        assert_eq!(
            t.exited(&a, &ProcessExit::Code(0), "", 90),
            Some(Outcome::Succeeded)
        );

        // The old process ending while the new context is localized: start at once.
        running(&mut t, c, 300);
        t.begin_reinit(&c, 10).unwrap();
        assert_eq!(t.reinit_old_exited(&c), Some(ReinitStep::Wait));
        assert_eq!(
            t.reinit_localized(&c, Ok(()), 5),
            ReinitStep::StartNew { old_pgid: 300 }
        );
    }

    #[test]
    fn a_failed_localization_keeps_or_fails_the_container() {
        let mut t = ContainerTable::new();
        let (a, b) = (cid(1, 1), cid(1, 2));
        running(&mut t, a, 100);
        running(&mut t, b, 101);
        t.begin_reinit(&a, 10).unwrap();
        assert_eq!(
            t.reinit_localized(&a, Err("no such file".into()), 5),
            ReinitStep::Reverted
        );
        assert_eq!(t.get(&a).unwrap().state, NmContainerState::RUNNING);
        assert_eq!(t.get(&a).unwrap().pid, Some(100));
        // Its old process gone too: the container failed.
        t.begin_reinit(&b, 10).unwrap();
        t.reinit_old_exited(&b);
        assert_eq!(
            t.reinit_localized(&b, Err("no such file".into()), 5),
            ReinitStep::Failed(Outcome::Failed)
        );
        let got = t.get(&b).unwrap();
        assert_eq!(got.state, NmContainerState::EXITED_WITH_FAILURE);
        assert!(
            got.diagnostics.contains("no such file"),
            "{}",
            got.diagnostics
        );
    }

    #[test]
    fn a_stop_during_a_reinitialization_stops_the_container() {
        let mut t = ContainerTable::new();
        let (a, b) = (cid(1, 1), cid(1, 2));
        running(&mut t, a, 100);
        running(&mut t, b, 101);
        t.begin_reinit(&a, 10).unwrap();
        t.reinit_localized(&a, Ok(()), 5);
        assert_eq!(
            t.request_stop(&a, StopReason::AppMaster, 6),
            StopAction::SignalGroup { pgid: 100 }
        );
        // The localization finishing late, or the old process's exit, no longer start anything.
        assert_eq!(t.reinit_localized(&a, Ok(()), 7), ReinitStep::Abandoned);
        assert_eq!(t.reinit_old_exited(&a), None);
        assert_eq!(
            t.exited(&a, &ProcessExit::Code(143), "", 8),
            Some(Outcome::Killed)
        );
        assert_eq!(t.get(&a).unwrap().exit_status, -105);
        // Between the old process's end and the new one's start: completed at once.
        t.begin_reinit(&b, 10).unwrap();
        t.reinit_old_exited(&b);
        assert_eq!(
            t.request_stop(&b, StopReason::ResourceManager, 9),
            StopAction::CompletedBeforeStart(Outcome::Killed)
        );
        assert_eq!(t.get(&b).unwrap().exit_status, -106);
        // A start failure after the old process went fails the container.
        let c = cid(1, 3);
        running(&mut t, c, 102);
        t.begin_reinit(&c, 10).unwrap();
        t.reinit_localized(&c, Ok(()), 1);
        t.reinit_old_exited(&c);
        assert_eq!(
            t.reinit_start_failed(&c, "ENOENT".into(), 2),
            Some(Outcome::Failed)
        );
        assert_eq!(
            t.get(&c).unwrap().state,
            NmContainerState::EXITED_WITH_FAILURE
        );
    }

    fn update_token(id: ContainerId, version: i32, r: Resource) -> ContainerTokenIdentifier {
        let mut t = container(id).token;
        t.version = version;
        t.resource = ResourceInfo::from(&r);
        t
    }

    #[test]
    fn an_update_takes_a_newer_version_and_its_resource() {
        let mut t = ContainerTable::new();
        let id = cid(1, 1);
        running(&mut t, id, 100);
        let up = update_token(id, 1, Resource::new(4096, 3));
        let plan = t.begin_update(&up).unwrap();
        assert_eq!(plan.old, Resource::new(1024, 1));
        assert_eq!(plan.new, Resource::new(4096, 3));
        assert!(plan.has_process);
        // While it is applied, another update and a re-initialization wait.
        assert_eq!(
            t.begin_update(&update_token(id, 2, Resource::new(2048, 1))),
            Err(UpdateRefusal::Busy(id))
        );
        assert_eq!(t.begin_reinit(&id, 10), Err(ReinitRefusal::Updating(id)));
        assert!(t.finish_update(&up, true));
        let c = t.get(&id).unwrap();
        assert_eq!(c.resource, Resource::new(4096, 3));
        assert_eq!(c.token.version, 1);
        assert_eq!(c.state, NmContainerState::RUNNING);
        assert_eq!(c.updating, None);
        assert_eq!(t.allocated(), Resource::new(4096, 3));
        assert_eq!(
            t.reports()[0].resource,
            ResourceInfo::from(&Resource::new(4096, 3))
        );
        // The same token again, or an older one, is stale.
        assert!(matches!(
            t.begin_update(&up),
            Err(UpdateRefusal::Stale {
                current: 1,
                offered: 1,
                ..
            })
        ));
        // A decrease to a newer version goes through.
        let down = update_token(id, 2, Resource::new(512, 1));
        t.begin_update(&down).unwrap();
        assert!(t.finish_update(&down, true));
        assert_eq!(t.get(&id).unwrap().resource, Resource::new(512, 1));
    }

    #[test]
    fn a_failed_update_changes_nothing() {
        let mut t = ContainerTable::new();
        let id = cid(1, 1);
        running(&mut t, id, 100);
        let up = update_token(id, 1, Resource::new(4096, 3));
        t.begin_update(&up).unwrap();
        assert!(t.finish_update(&up, false));
        let c = t.get(&id).unwrap();
        assert_eq!(c.resource, Resource::new(1024, 1));
        assert_eq!(c.token.version, 0);
        assert_eq!(c.updating, None);
        // ... so the same version may be offered again.
        t.begin_update(&up).unwrap();
    }

    #[test]
    fn devices_cannot_change_in_place() {
        let mut t = ContainerTable::new();
        let id = cid(1, 1);
        let mut c = container(id);
        c.token.resource = ResourceInfo::from(&Resource::new(1024, 1).with("yarn.io/gpu", 2));
        c.resource = c.token.resource.to_resource();
        t.insert(c).unwrap();
        t.started(&id, 100, None);
        let more = update_token(id, 1, Resource::new(1024, 1).with("yarn.io/gpu", 4));
        let e = t.begin_update(&more).unwrap_err();
        assert!(
            matches!(&e, UpdateRefusal::DeviceChange { name, from: 2, to: 4, .. } if name == "yarn.io/gpu")
        );
        assert!(e.to_string().contains("use an elastic gang"), "{e}");
        let none = update_token(id, 1, Resource::new(1024, 1));
        assert!(matches!(
            t.begin_update(&none),
            Err(UpdateRefusal::DeviceChange { from: 2, to: 0, .. })
        ));
        // Memory with the same devices is fine.
        let mem = update_token(id, 1, Resource::new(8192, 1).with("yarn.io/gpu", 2));
        t.begin_update(&mem).unwrap();
        assert_eq!(t.get(&id).unwrap().updating, Some(1));
    }

    #[test]
    fn only_live_containers_are_updated() {
        let mut t = ContainerTable::new();
        let unknown = cid(1, 9);
        assert_eq!(
            t.begin_update(&update_token(unknown, 1, Resource::new(2048, 1))),
            Err(UpdateRefusal::Unknown(unknown))
        );
        // Localizing: accepted with no process to touch, and recorded at once.
        let loc = cid(1, 1);
        t.insert(container(loc)).unwrap();
        let up = update_token(loc, 1, Resource::new(2048, 2));
        assert!(!t.begin_update(&up).unwrap().has_process);
        assert_eq!(t.get(&loc).unwrap().updating, None);
        assert!(t.finish_update(&up, true));
        assert_eq!(t.get(&loc).unwrap().resource, Resource::new(2048, 2));
        // Re-initializing, stopping, and finished containers are refused.
        let re = cid(1, 2);
        running(&mut t, re, 200);
        t.begin_reinit(&re, 10).unwrap();
        assert_eq!(
            t.begin_update(&update_token(re, 1, Resource::new(2048, 1))),
            Err(UpdateRefusal::Reinitializing(re))
        );
        let done = cid(1, 3);
        running(&mut t, done, 300);
        t.exited(&done, &ProcessExit::Code(0), "", 20);
        assert!(matches!(
            t.begin_update(&update_token(done, 1, Resource::new(2048, 1))),
            Err(UpdateRefusal::NotLive {
                state: NmContainerState::EXITED_WITH_SUCCESS,
                ..
            })
        ));
        // A container that ended while its update was applied records nothing.
        let gone = cid(1, 4);
        running(&mut t, gone, 400);
        let up = update_token(gone, 1, Resource::new(2048, 1));
        t.begin_update(&up).unwrap();
        t.exited(&gone, &ProcessExit::Code(1), "", 20);
        assert!(!t.finish_update(&up, true));
        assert_eq!(t.get(&gone).unwrap().resource, Resource::new(1024, 1));
        assert!(matches!(
            t.begin_update(&update_token(loc, 2, Resource::new(0, 1))),
            Err(UpdateRefusal::Invalid { .. })
        ));
    }
}
