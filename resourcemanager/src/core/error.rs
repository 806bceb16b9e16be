//! `CoreError`: every refusal of the core, one variant each, carrying its data. The texts
//! are YARN's where YARN has one (clients and tests read them); the REST edge maps each
//! variant to its HTTP status and exception through [`CoreError::class`], never by reading
//! the text.

use spindle_common::states::{YarnApplicationAttemptState, YarnApplicationState};
use spindle_common::token::TokenError;
use spindle_common::{ApplicationAttemptId, ApplicationId, QueuePath, Resource};

/// YARN's answer to a non-admin on an admin-only operation.
pub const ONLY_ADMINS: &str = "Only admins can carry out this operation.";

/// How a refusal reaches a client: the REST edge picks status and exception from this.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalClass {
    NotFound,
    BadRequest,
    /// The AM-RM token does not hold (YARN's `InvalidToken`, 401-like).
    Authorization,
    /// The AM must register first (YARN's `ApplicationMasterNotRegisteredException`).
    AmNotRegistered,
    /// The application or attempt is in a state that forbids the call.
    Conflict,
    /// The caller may not do this (YARN's 403 `ForbiddenException`).
    Forbidden,
}

/// Resources in a variant are boxed: the error travels in every `Result` of the core.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoreError {
    #[error("Dependency {0} is not an application the ResourceManager knows (an application cannot depend on itself)")]
    UnknownDependency(ApplicationId),
    // ------------------------------------------------------------ AM-RM tokens
    #[error("Invalid AMRMToken: {0}")]
    InvalidToken(TokenError),
    #[error("Invalid AMRMToken: application {0} is unknown")]
    TokenForUnknownApp(ApplicationId),
    #[error("Invalid AMRMToken: {0} is not the current attempt")]
    TokenForOldAttempt(ApplicationAttemptId),

    // ------------------------------------------------------------ not found
    #[error("app with id: {0} not found")]
    AppNotFound(ApplicationId),
    /// The application an AM call names is gone (evicted after it ended).
    #[error("application {0} not found")]
    AttemptAppNotFound(ApplicationId),
    #[error("attempt {0} not found")]
    AttemptNotFound(ApplicationAttemptId),
    #[error("queue {0} not found")]
    QueueNotFound(String),

    // ------------------------------------------------------------ the AM protocol
    #[error("Application {app} is already {state}")]
    AppAlreadyFinal {
        app: ApplicationId,
        state: YarnApplicationState,
    },
    #[error("Application attempt {attempt} has already ended ({state})")]
    AttemptEnded {
        attempt: ApplicationAttemptId,
        state: YarnApplicationAttemptState,
    },
    #[error("Application Master is already registered : {0}")]
    AlreadyRegistered(ApplicationId),
    #[error("Application attempt {0} is not registered; register before allocate")]
    NotRegistered(ApplicationAttemptId),
    #[error("Invalid resource request: priority {0} is negative")]
    NegativePriority(i32),

    // ------------------------------------------------------------ resources
    #[error("Invalid resource request: requested resource {0} has a negative value")]
    NegativeResource(Box<Resource>),
    #[error(
        "Invalid resource request: requested resource type=[{resource_type}] < 0 or greater than maximum allowed allocation. \
         Requested resource={requested}, maximum allowed allocation={max}, please note that maximum \
         allowed allocation is calculated by scheduler based on maximum resource of registered \
         NodeManagers, which might be less than configured maximum allocation={max}"
    )]
    OverMaximumAllocation {
        resource_type: String,
        requested: Box<Resource>,
        max: Box<Resource>,
    },

    // ------------------------------------------------------------ submission
    /// A submission under an id the RM holds that is not the one it holds (the same one
    /// again is accepted without a second application: a client resending a submission
    /// whose answer was lost).
    #[error("Application with id {app} is already present with a different submission ({field} differs)! Cannot add a duplicate!")]
    DuplicateApp {
        app: ApplicationId,
        field: &'static str,
    },
    #[error("Application id {0} was not issued by this ResourceManager; ask POST /ws/v1/cluster/apps/new-application first")]
    AppIdNotIssued(ApplicationId),
    #[error("Unmanaged AMs are not supported by Spindle yet (unmanaged-AM must be false)")]
    UnmanagedAm,
    #[error("am-container-spec.commands.command must not be empty")]
    EmptyAmCommand,

    // ------------------------------------------------------------ move and priority
    #[error("App in {0} state cannot be moved.")]
    CannotMove(YarnApplicationState),
    #[error("Failed to move {app} to queue {queue}: queue does not exist")]
    MoveToUnknownQueue { app: ApplicationId, queue: String },
    #[error("Failed to move {app} to queue {queue}: {path} is not a leaf queue")]
    MoveToParentQueue {
        app: ApplicationId,
        queue: String,
        path: QueuePath,
    },
    #[error("Failed to move {app} to queue {path}: the queue is STOPPED")]
    MoveToStoppedQueue { app: ApplicationId, path: QueuePath },
    #[error("Failed to move {app} to queue {path}: it already has {apps} applications")]
    MoveToFullQueue {
        app: ApplicationId,
        path: QueuePath,
        apps: usize,
    },
    #[error(
        "Failed to move {app} to queue {path}: its usage {used} would exceed the maximum of {over}"
    )]
    MoveOverMaximum {
        app: ApplicationId,
        path: QueuePath,
        used: Box<Resource>,
        over: QueuePath,
    },
    #[error("Application {app} is in {state} state; its priority cannot be updated")]
    PriorityOfEndedApp {
        app: ApplicationId,
        state: YarnApplicationState,
    },
    #[error("Application {app} is in {state} state; its lifetime cannot be updated")]
    LifetimeOfEndedApp {
        app: ApplicationId,
        state: YarnApplicationState,
    },
    #[error(
        "Expire time is less than current time, current-time={now} expire-time={expiry} (ms since the epoch)"
    )]
    LifetimeInThePast { expiry: u64, now: u64 },

    // ------------------------------------------------------------ reconfiguration
    #[error("Failed to re-init queues : {0}")]
    Reinit(ReinitRefusal),

    // ------------------------------------------------------------ ACLs
    #[error("User {user} does not have privilege to {what} application {app}: only its owner ({owner}), an administrator of queue {queue} or a cluster administrator may")]
    NotAppAdmin {
        user: String,
        what: &'static str,
        app: ApplicationId,
        owner: String,
        queue: String,
    },
    #[error("User {user} may not submit to queue {queue}")]
    MayNotSubmitTo { user: String, queue: QueuePath },
    #[error("{ONLY_ADMINS}")]
    NotClusterAdmin,
    #[error("User={user} doesn't haven access to queue={queue} so it cannot check ACLs for other users.")]
    MayNotCheckOthers { user: String, queue: String },

    // ------------------------------------------------------------ labels and attributes
    #[error("label name `{0}` is invalid: it must start with a letter or digit and contain only letters, digits, '-' and '_' (at most 255 characters)")]
    InvalidLabelName(String),
    #[error("label {label} already exists with exclusivity={exclusive}")]
    LabelExists { label: String, exclusive: bool },
    #[error("label {0} is not in the cluster's node labels (add it with rmadmin -addToClusterNodeLabels)")]
    UnknownLabel(String),
    #[error("cannot remove label {label}: node {node} is in it")]
    LabelInUseByNode { label: String, node: String },
    #[error("cannot remove label {label}: queue {queue} names it in its configuration")]
    LabelInUseByQueue { label: String, queue: String },
    #[error("node {node} may have at most one label (a partition), got {labels:?}")]
    MoreThanOneLabel { node: String, labels: Vec<String> },
    #[error("node {0} is not known to the ResourceManager")]
    UnknownNode(String),
    #[error("node labels are set by the NodeManagers (yarn.node-labels.configuration-type=distributed): they cannot be replaced centrally")]
    DistributedLabels,
    #[error("node labels are set centrally (yarn.node-labels.configuration-type=centralized): a NodeManager's labels are ignored")]
    CentralizedLabels,
    #[error("attribute {name} has a bad prefix: centrally set attributes are rm.yarn.io/ (or bare names), NodeManagers report nm.yarn.io/")]
    BadAttributePrefix { name: String },
    #[error("the node reports {count} container images; at most {max} are taken")]
    TooManyNodeImages { count: usize, max: usize },
    #[error("node {node} is {state}: only RUNNING nodes pull images")]
    NodeNotRunning { node: String, state: String },
    #[error("no RUNNING node to pull the image on")]
    NoNodeToPrefetch,
    #[error("attribute name `{0}` is invalid: it must start with a letter or digit and contain only letters, digits, '-', '_' and '.'")]
    InvalidAttributeName(String),
    #[error("node {node} has no attribute {name}")]
    UnknownAttribute { node: String, name: String },
    #[error("queue {queue} names label {label}, which is not in the cluster's node labels")]
    QueueNamesUnknownLabel { queue: String, label: String },
    #[error("queue {queue} cannot access node label {label} (its accessible-node-labels do not list it)")]
    LabelNotAccessible { queue: String, label: String },
    #[error("placement constraint cannot be satisfied: {0}")]
    Unsatisfiable(String),
    #[error("Gang {gang} of {members} can never be granted: {why}")]
    GangNeverFits {
        gang: String,
        members: u32,
        why: super::scheduler::feasible::NeverFits,
    },
}

/// Why a new queue tree cannot replace the running one, as far as the applications go.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReinitRefusal {
    #[error("queue {0} has running applications and cannot become a parent queue (it must be STOPPED and empty)")]
    QueueWithAppsBecomesParent(String),
    #[error(
        "queue {queue} cannot be removed: it still has applications (application {app} is {state})"
    )]
    QueueWithAppsRemoved {
        queue: String,
        app: ApplicationId,
        state: YarnApplicationState,
    },
}

impl CoreError {
    /// How the refusal reaches a client (status and exception at the REST edge).
    pub fn class(&self) -> RefusalClass {
        use CoreError::*;
        match self {
            InvalidToken(_) | TokenForUnknownApp(_) | TokenForOldAttempt(_) => {
                RefusalClass::Authorization
            }
            AppNotFound(_) | AttemptAppNotFound(_) | AttemptNotFound(_) | QueueNotFound(_) => {
                RefusalClass::NotFound
            }
            AppAlreadyFinal { .. }
            | AttemptEnded { .. }
            | AlreadyRegistered(_)
            | CannotMove(_)
            | PriorityOfEndedApp { .. }
            | LifetimeOfEndedApp { .. }
            | DuplicateApp { .. } => RefusalClass::Conflict,
            NotRegistered(_) => RefusalClass::AmNotRegistered,
            NegativePriority(_)
            | LifetimeInThePast { .. }
            | NegativeResource(_)
            | OverMaximumAllocation { .. }
            | AppIdNotIssued(_)
            | UnknownDependency(_)
            | UnmanagedAm
            | EmptyAmCommand
            | MoveToUnknownQueue { .. }
            | MoveToParentQueue { .. }
            | MoveToStoppedQueue { .. }
            | MoveToFullQueue { .. }
            | MoveOverMaximum { .. }
            | Reinit(_)
            | InvalidLabelName(_)
            | LabelExists { .. }
            | UnknownLabel(_)
            | LabelInUseByNode { .. }
            | LabelInUseByQueue { .. }
            | MoreThanOneLabel { .. }
            | UnknownNode(_)
            | DistributedLabels
            | CentralizedLabels
            | BadAttributePrefix { .. }
            | TooManyNodeImages { .. }
            | NodeNotRunning { .. }
            | NoNodeToPrefetch
            | InvalidAttributeName(_)
            | UnknownAttribute { .. }
            | QueueNamesUnknownLabel { .. }
            | LabelNotAccessible { .. }
            | Unsatisfiable(_)
            | GangNeverFits { .. } => RefusalClass::BadRequest,
            NotAppAdmin { .. }
            | MayNotSubmitTo { .. }
            | NotClusterAdmin
            | MayNotCheckOthers { .. } => RefusalClass::Forbidden,
        }
    }
}
