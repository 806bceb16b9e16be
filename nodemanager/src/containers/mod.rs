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
//! [`Phase::Reinitializing`]; the old process's end is not a completion. A resource update
//! (YARN's `updateContainer`) keeps the state: a newer token's memory and vcores replace the
//! container's ([`ContainerTable::begin_update`], [`ContainerTable::finish_update`]). Every
//! one of those ends is *complete* to the RM and is reported in each heartbeat until the RM
//! acknowledges it in `containersToBeRemovedFromNm`; the container is then `DONE`. `DONE`
//! containers stay visible to REST (bounded by [`ContainerTable::prune_done`]).
//!
//! A container's [`Phase`] carries what is valid in it: the [`ExecHandle`] of its process
//! while it has one, the stop reason while it is being killed, the re-initialization's step,
//! and the exit status and diagnostics once it is complete. Its YARN state name is derived
//! ([`Container::state`]); so is the wire's `-1000` for a container without exit status
//! ([`Container::exit_code`]).
//!
//! Files: this module (the container, its phase, the table and its queries), `lifecycle.rs`
//! (start, hold, stop and exit), `reinit.rs` (re-initialization), `update.rs` (resource
//! updates).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use spindle_common::ids::{ApplicationId, ContainerId};
use spindle_common::records::am::ContainerStatus;
use spindle_common::records::resource::ResourceInfo;
use spindle_common::records::tracker::NmContainerReport;
use spindle_common::resource::Resource;
use spindle_common::states::{exit_status, ContainerState, NmContainerState};
use spindle_common::token::ContainerTokenIdentifier;

use crate::launcher::ExecHandle;

mod lifecycle;
mod reinit;
mod update;

pub use lifecycle::StopAction;
pub use reinit::{Reinit, ReinitRefusal, ReinitStep};
pub use update::{UpdatePlan, UpdateRefusal};

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
    /// Where it is in its life, with the data valid there.
    pub phase: Phase,
    pub start_time_ms: u64,
    pub work_dir: PathBuf,
    pub log_dirs: Vec<PathBuf>,
    /// Re-initializations done (each one a new process in this container).
    pub reinits: u32,
}

/// Where a container is in its life. Each variant is one (or, complete, five) of YARN's NM
/// detailed states ([`Container::state`]) and carries what is valid in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// `LOCALIZING`: accepted, its resources being localized; no process yet.
    Localizing,
    /// `SCHEDULED`: its process is set up and held before `exec` (a held gang start) until
    /// [`ContainerTable::released`].
    Held(Live),
    /// `RUNNING`.
    Running(Live),
    /// `REINITIALIZING`: a new launch context replaces the process; the old one is named in
    /// the step.
    Reinitializing(Reinit),
    /// `KILLING`: its process was told to stop on `reason`'s behalf.
    Killing {
        process: ExecHandle,
        reason: StopReason,
    },
    /// Complete to the RM.
    Complete(Completion),
}

/// A container with a process of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Live {
    pub process: ExecHandle,
    /// The version of a resource update whose limits are being applied (YARN's
    /// `updateContainer`); `Some` only while the actor waits for the executor.
    pub updating: Option<i32>,
}

impl Live {
    fn new(process: ExecHandle) -> Self {
        Self {
            process,
            updating: None,
        }
    }
}

/// How a container completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    pub end: End,
    /// None for a container that never had one (it never ran): the wire shows `-1000`.
    pub exit_status: Option<i32>,
    pub diagnostics: String,
    pub finish_time_ms: u64,
    /// The process it had, if any: a stopped container's stragglers are killed through it.
    pub process: Option<ExecHandle>,
    /// The RM acknowledged it (`containersToBeRemovedFromNm`): `DONE`.
    pub acknowledged: bool,
}

/// YARN's terminal detailed states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// `LOCALIZATION_FAILED`
    LocalizationFailed,
    /// `EXITED_WITH_SUCCESS`
    Succeeded,
    /// `EXITED_WITH_FAILURE`
    Failed,
    /// `CONTAINER_CLEANEDUP_AFTER_KILL`
    Killed,
}

impl End {
    pub fn state(self) -> NmContainerState {
        match self {
            Self::LocalizationFailed => NmContainerState::LOCALIZATION_FAILED,
            Self::Succeeded => NmContainerState::EXITED_WITH_SUCCESS,
            Self::Failed => NmContainerState::EXITED_WITH_FAILURE,
            Self::Killed => NmContainerState::CONTAINER_CLEANEDUP_AFTER_KILL,
        }
    }

    /// The end a terminal state names; None for a state that is not an end.
    pub fn of_state(s: NmContainerState) -> Option<Self> {
        match s {
            NmContainerState::LOCALIZATION_FAILED => Some(Self::LocalizationFailed),
            NmContainerState::EXITED_WITH_SUCCESS => Some(Self::Succeeded),
            NmContainerState::EXITED_WITH_FAILURE => Some(Self::Failed),
            NmContainerState::CONTAINER_CLEANEDUP_AFTER_KILL => Some(Self::Killed),
            _ => None,
        }
    }
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
            phase: Phase::Localizing,
            start_time_ms: now_ms,
            work_dir,
            log_dirs,
            reinits: 0,
        }
    }

    pub fn app_id(&self) -> ApplicationId {
        self.id.application_id()
    }

    /// YARN's NM detailed state.
    pub fn state(&self) -> NmContainerState {
        match &self.phase {
            Phase::Localizing => NmContainerState::LOCALIZING,
            Phase::Held(_) => NmContainerState::SCHEDULED,
            Phase::Running(_) => NmContainerState::RUNNING,
            Phase::Reinitializing(_) => NmContainerState::REINITIALIZING,
            Phase::Killing { .. } => NmContainerState::KILLING,
            Phase::Complete(c) if c.acknowledged => NmContainerState::DONE,
            Phase::Complete(c) => c.end.state(),
        }
    }

    fn completion(&self) -> Option<&Completion> {
        match &self.phase {
            Phase::Complete(c) => Some(c),
            _ => None,
        }
    }

    /// How it ended; None until complete, or if it never had an exit status.
    pub fn exit_status(&self) -> Option<i32> {
        self.completion().and_then(|c| c.exit_status)
    }

    /// The exit status as the wire carries it: YARN's `-1000` (INVALID) when there is none.
    pub fn exit_code(&self) -> i32 {
        self.exit_status().unwrap_or(exit_status::INVALID)
    }

    /// Why it ended; empty until complete.
    pub fn diagnostics(&self) -> &str {
        self.completion().map_or("", |c| c.diagnostics.as_str())
    }

    pub fn finish_time_ms(&self) -> Option<u64> {
        self.completion().map(|c| c.finish_time_ms)
    }

    /// The process it has (the one being replaced, while re-initializing), or had once
    /// complete.
    pub fn process(&self) -> Option<&ExecHandle> {
        match &self.phase {
            Phase::Localizing => None,
            Phase::Held(l) | Phase::Running(l) => Some(&l.process),
            Phase::Reinitializing(r) => Some(r.old()),
            Phase::Killing { process, .. } => Some(process),
            Phase::Complete(c) => c.process.as_ref(),
        }
    }

    /// Who is stopping it, while it is being killed.
    pub fn stop_reason(&self) -> Option<StopReason> {
        match &self.phase {
            Phase::Killing { reason, .. } => Some(*reason),
            _ => None,
        }
    }

    /// The version of the resource update being applied to it, if any.
    pub fn updating(&self) -> Option<i32> {
        match &self.phase {
            Phase::Held(l) | Phase::Running(l) => l.updating,
            _ => None,
        }
    }

    /// The re-initialization under way, if any.
    pub fn reinit(&self) -> Option<&Reinit> {
        match &self.phase {
            Phase::Reinitializing(r) => Some(r),
            _ => None,
        }
    }

    /// Complete to the RM (terminal here), whether or not the RM has acknowledged it.
    pub fn is_complete(&self) -> bool {
        matches!(self.phase, Phase::Complete(_))
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
                exit_status: self.exit_code(),
                diagnostics: self.diagnostics().to_string(),
                gang_id: None,
            },
            resource: ResourceInfo::from(&self.resource),
        }
    }

    /// Completes it: keeps the process it has (or had) for a straggler kill.
    fn complete(&mut self, end: End, exit_status: Option<i32>, diag: String, now_ms: u64) {
        let process = self.process().cloned();
        self.phase = Phase::Complete(Completion {
            end,
            exit_status,
            diagnostics: diag,
            finish_time_ms: now_ms,
            process,
            acknowledged: false,
        });
    }
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

    fn get_mut(&mut self, id: &ContainerId) -> Option<&mut Container> {
        self.containers.get_mut(id)
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
            return Err(old.state());
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

    /// Marks the RM-acknowledged complete containers `DONE`; returns how many changed.
    pub fn acknowledge(&mut self, ids: &[ContainerId]) -> usize {
        let mut n = 0;
        for id in ids {
            if let Some(Phase::Complete(c)) = self.containers.get_mut(id).map(|c| &mut c.phase) {
                if !c.acknowledged {
                    c.acknowledged = true;
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
            .filter(|c| c.state() != NmContainerState::DONE)
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

    /// What the containers that keep their room hold: every live one but those being
    /// killed (the RM stopped them, and may have handed their room on already).
    pub fn committed(&self) -> Resource {
        let mut r = Resource::zero();
        for c in self.containers.values().filter(|c| c.is_live()) {
            if !matches!(c.phase, Phase::Killing { .. }) {
                r.add_assign(&c.resource);
            }
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
            .filter(|c| c.state() == NmContainerState::DONE)
            .map(|c| (c.finish_time_ms().unwrap_or(0), c.id))
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
mod tests;
