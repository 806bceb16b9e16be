//! The typed commands the REST edge sends the driver, in five families (`App`, `Am`, `Node`,
//! `Admin`, `Query`; each handled by one
//! function of the driver), with the name each has in `/metrics` and the span it is handled
//! in.

use std::collections::BTreeMap;
use std::sync::Arc;

use spindle_common::states::FinalApplicationStatus;
use spindle_common::token::{ContainerKey, ContainerTokenIdentifier, TokenError};
use spindle_common::{ApplicationAttemptId, ApplicationId, ContainerId, NodeId, Resource};
use tokio::sync::oneshot;

use super::{RmError, Snapshot};
use crate::config::capacity::{CsProps, SchedConfMutation};
use crate::core::labels::LabelChange;
use crate::core::{
    AllocateReply, AmReport, AskUpdate, Caller, ContainerGpuUse, CoreError, HeartbeatReply,
    IgnoredGpuUse, KillOutcome, NodeRegistration, QueueAclType, ReportedContainer, Submission,
};
use crate::store::UsageRecord;

/// Where a command's answer goes.
pub type Reply<T> = oneshot::Sender<Result<T, RmError>>;

/// Every command the driver takes, by family.
pub enum Command {
    App(AppCommand),
    Am(AmCommand),
    Node(NodeCommand),
    Admin(AdminCommand),
    Query(QueryCommand),
    /// Internal: a REST read wants a snapshot as of now. Built only when the state changed
    /// since the last one, so writes (heartbeats, allocate calls) never pay for copies.
    Snapshot(oneshot::Sender<Arc<Snapshot>>),
}

/// A client's calls on applications (`/ws/v1/cluster/apps...`).
pub enum AppCommand {
    NewApplication(Reply<(ApplicationId, Resource)>),
    Submit(ApplicationId, Box<Submission>, Reply<()>),
    Kill(ApplicationId, Caller, Reply<KillOutcome>),
    /// `PUT /apps/{id}/queue`: answers the new leaf's path.
    MoveApp {
        id: ApplicationId,
        queue: String,
        caller: Caller,
        reply: Reply<spindle_common::QueuePath>,
    },
    /// `PUT /apps/{id}/priority`: answers the effective priority.
    SetPriority {
        id: ApplicationId,
        priority: i32,
        caller: Caller,
        reply: Reply<i32>,
    },
    /// `PUT /apps/{id}/timeout` (`LIFETIME`): answers the deadline in effect (ms).
    UpdateLifetime {
        id: ApplicationId,
        expiry: u64,
        caller: Caller,
        reply: Reply<u64>,
    },
}

/// The ApplicationMasterProtocol, and how an AM launch went.
pub enum AmCommand {
    Register {
        token: String,
        host: String,
        rpc_port: i32,
        tracking_url: String,
        /// Maximum allocation, queue, containers kept from earlier attempts.
        reply: Reply<(
            Resource,
            String,
            Vec<spindle_common::records::am::Container>,
        )>,
    },
    Allocate {
        token: String,
        response_id: i32,
        asks: Vec<AskUpdate>,
        release: Vec<ContainerId>,
        progress: f32,
        report: AmReport,
        reply: Reply<AllocateReply>,
    },
    Finish {
        token: String,
        status: FinalApplicationStatus,
        diagnostics: String,
        tracking_url: String,
        reply: Reply<()>,
    },
    /// Internal: how an AM launch went.
    Launched(ApplicationAttemptId, ContainerId, Result<(), String>),
}

/// The ResourceTracker protocol: what NodeManagers send.
pub enum NodeCommand {
    /// A registration, with what the NM says of itself (applied only if it is admitted).
    Register {
        registration: Box<NodeRegistration>,
        says: SelfReport,
        reply: Reply<NodeRegistered>,
    },
    /// A heartbeat with its GPU samples and what the NM says of itself, applied at once.
    Heartbeat {
        beat: Box<NodeBeat>,
        reply: Reply<HeartbeatAnswer>,
    },
    Unregister(NodeId, Reply<()>),
    /// `spindle image -prefetch`: nodes (all RUNNING ones when empty) pull an image (its
    /// normalized reference) ahead of jobs; answered with the nodes asked.
    Prefetch {
        image: String,
        nodes: Vec<NodeId>,
        reply: Reply<Result<Vec<NodeId>, CoreError>>,
    },
}

/// Administrators' changes.
pub enum AdminCommand {
    /// A label or central attribute change: validated whole, stored, then applied.
    ChangeLabels {
        change: LabelChange,
        caller: Caller,
        reply: Reply<()>,
    },
    /// `refreshNodes`: the host lists as the REST layer read them, and how newly excluded
    /// nodes leave.
    RefreshNodes {
        hosts: crate::core::HostLists,
        how: crate::core::DecommissionType,
        caller: Caller,
        reply: Reply<crate::core::NodesRefreshed>,
    },
    /// `refreshQueues`: replace the live capacity-scheduler properties by `props` (read from
    /// `capacity-scheduler.xml` by the REST layer). Answers the configuration version.
    RefreshQueues {
        props: Box<CsProps>,
        caller: Caller,
        reply: Reply<u64>,
    },
    /// `PUT /scheduler-conf` (`dry_run`: `POST /scheduler-conf/validate`). Answers the
    /// version and the resulting (or would-be) property set.
    MutateSchedulerConf {
        mutation: Box<SchedConfMutation>,
        caller: Caller,
        dry_run: bool,
        reply: Reply<Mutated>,
    },
    /// `DELETE /delegation-token`: a user token cancelled (its sequence number and max
    /// date), written to the state store so a restarted RM still refuses it.
    CancelUserToken {
        seq: u64,
        max_date: u64,
        reply: Reply<()>,
    },
}

/// Questions that change nothing.
pub enum QueryCommand {
    /// `GET /queues/{queue}/access`: whether `user` holds `acl` on `queue`. The `caller`
    /// must administer the queue to ask about someone else.
    QueueAccess {
        queue: String,
        caller: Caller,
        user: Caller,
        acl: QueueAclType,
        reply: Reply<bool>,
    },
    /// The queue a submission would be placed in (after the queue mappings), and whether its
    /// submitter may submit there; `None` when the queue does not exist (the scheduler fails
    /// the submission with its own words).
    SubmitAccess {
        submission: Box<Submission>,
        reply: Reply<Option<(String, bool)>>,
    },
    /// Fails with 403 unless the caller is a cluster administrator (checked before the
    /// REST layer reads any file on the caller's behalf).
    CheckAdmin(Caller, Reply<()>),
    /// `GET /scheduler-conf` and `/scheduler-conf/version`: the live set and its version.
    GetSchedulerConf(Caller, Reply<(u64, CsProps)>),
    /// `GET /accounting`: the state store's usage records of applications within
    /// `[from, to]` (ms), with the snapshot of the same moment (for the applications not
    /// recorded yet: running, or final with containers still live).
    Accounting {
        from: u64,
        to: u64,
        reply: Reply<(Vec<UsageRecord>, Arc<Snapshot>)>,
    },
    /// Whether a user token was cancelled (the state store is the one place that knows).
    UserTokenCancelled { seq: u64, reply: Reply<bool> },
    /// An NM's download from the blob store: the identifier of a container token whose
    /// signature one of the RM's container-token master keys verifies (expiry not checked:
    /// the token proves its application, as for an NM's stop calls).
    OpenContainerToken {
        token: String,
        reply: Reply<Result<ContainerTokenIdentifier, TokenError>>,
    },
}

/// What an NM says of itself: its partition (distributed configuration) and its
/// `nm.yarn.io/` attributes.
#[derive(Debug, Default)]
pub struct SelfReport {
    pub labels: Option<Vec<String>>,
    pub attributes: Option<BTreeMap<String, String>>,
    /// The container images in its cache, when they changed.
    pub images: Option<Vec<crate::core::images::NodeImage>>,
    /// Pulls that failed since its last report.
    pub pull_failures: Vec<crate::core::images::PullFailure>,
}

impl SelfReport {
    pub fn is_empty(&self) -> bool {
        self.labels.is_none()
            && self.attributes.is_none()
            && self.images.is_none()
            && self.pull_failures.is_empty()
    }
}

/// Why an NM's own labels or attributes were refused, if they were.
#[derive(Debug, Default)]
pub struct SelfReportRefusals {
    pub labels: Option<CoreError>,
    pub attributes: Option<CoreError>,
    pub images: Option<CoreError>,
}

/// One NM heartbeat as the driver applies it.
pub struct NodeBeat {
    pub node: NodeId,
    pub healthy: bool,
    pub report: String,
    pub containers: Vec<ReportedContainer>,
    /// The GPU samples it carried (those the edge could read).
    pub gpu: Vec<ContainerGpuUse>,
    pub says: SelfReport,
}

/// The answer to a heartbeat.
pub struct HeartbeatAnswer {
    pub reply: HeartbeatReply,
    /// The RM's newest container-token master key (the REST edge sends it when the node's
    /// last known key differs).
    pub container_key: ContainerKey,
    /// GPU samples the core did not take.
    pub ignored_gpu: Vec<IgnoredGpuUse>,
    pub refused: SelfReportRefusals,
    /// Images the node is asked to pull (`spindle image -prefetch`), once.
    pub images_to_prefetch: Vec<String>,
}

pub struct NodeRegistered {
    pub interval_ms: u64,
    /// The container-token master key the node must hold (the REST edge wraps it).
    pub container_key: ContainerKey,
    pub rm_identifier: u64,
    /// The host lists keep this node out: the NM is told to shut down.
    pub refused: Option<crate::core::NodeRefused>,
    /// What was refused of what the NM said of itself (nothing when it was not admitted).
    pub self_report: SelfReportRefusals,
}

/// Each family's commands are commands.
macro_rules! families {
    ($($variant:ident: $family:ident),*) => {$(
        impl From<$family> for Command {
            fn from(c: $family) -> Self {
                Command::$variant(c)
            }
        }
    )*};
}

families!(
    App: AppCommand,
    Am: AmCommand,
    Node: NodeCommand,
    Admin: AdminCommand,
    Query: QueryCommand
);

impl Command {
    /// The call's name in `/metrics` (`spindle_rm_core_call_duration_seconds{call}`): one per
    /// command, snake_case.
    pub(super) fn name(&self) -> &'static str {
        match self {
            Command::App(c) => match c {
                AppCommand::NewApplication(..) => "new_application",
                AppCommand::Submit(..) => "submit",
                AppCommand::Kill(..) => "kill",
                AppCommand::MoveApp { .. } => "move_app",
                AppCommand::SetPriority { .. } => "set_priority",
                AppCommand::UpdateLifetime { .. } => "update_lifetime",
            },
            Command::Am(c) => match c {
                AmCommand::Register { .. } => "am_register",
                AmCommand::Allocate { .. } => "am_allocate",
                AmCommand::Finish { .. } => "am_finish",
                AmCommand::Launched(..) => "am_launched",
            },
            Command::Node(c) => match c {
                NodeCommand::Register { .. } => "register_node",
                NodeCommand::Heartbeat { .. } => "node_heartbeat",
                NodeCommand::Unregister(..) => "unregister_node",
                NodeCommand::Prefetch { .. } => "prefetch_image",
            },
            Command::Admin(c) => match c {
                AdminCommand::ChangeLabels { .. } => "change_labels",
                AdminCommand::RefreshNodes { .. } => "refresh_nodes",
                AdminCommand::RefreshQueues { .. } => "refresh_queues",
                AdminCommand::MutateSchedulerConf { .. } => "mutate_scheduler_conf",
                AdminCommand::CancelUserToken { .. } => "cancel_user_token",
            },
            Command::Query(c) => match c {
                QueryCommand::QueueAccess { .. } => "queue_access",
                QueryCommand::SubmitAccess { .. } => "submit_access",
                QueryCommand::CheckAdmin(..) => "check_admin",
                QueryCommand::GetSchedulerConf(..) => "get_scheduler_conf",
                QueryCommand::Accounting { .. } => "accounting",
                QueryCommand::UserTokenCancelled { .. } => "user_token_cancelled",
                QueryCommand::OpenContainerToken { .. } => "open_container_token",
            },
            Command::Snapshot(_) => "snapshot",
        }
    }

    /// The span a command is handled in, named for the command and carrying the ids it
    /// concerns (`app_id`, `attempt_id`, `container_id`, `node_id`), so that every line logged
    /// while it is handled, effects included, says what it is about. AM calls record their
    /// attempt once the token is checked (`Driver::am_call`). Snapshot reads, the most
    /// frequent command, get none.
    pub(super) fn span(&self) -> tracing::Span {
        use tracing::field::Empty;
        use tracing::info_span;
        match self {
            Command::App(c) => match c {
                AppCommand::NewApplication(_) => info_span!("new_application"),
                AppCommand::Submit(id, ..) => info_span!("submit", app_id = %id),
                AppCommand::Kill(id, ..) => info_span!("kill", app_id = %id),
                AppCommand::MoveApp { id, .. } => info_span!("move_app", app_id = %id),
                AppCommand::SetPriority { id, .. } => info_span!("set_priority", app_id = %id),
                AppCommand::UpdateLifetime { id, .. } => {
                    info_span!("update_lifetime", app_id = %id)
                }
            },
            Command::Am(c) => match c {
                AmCommand::Register { .. } => {
                    info_span!("am_register", app_id = Empty, attempt_id = Empty)
                }
                AmCommand::Allocate { .. } => {
                    info_span!("am_allocate", app_id = Empty, attempt_id = Empty)
                }
                AmCommand::Finish { .. } => {
                    info_span!("am_finish", app_id = Empty, attempt_id = Empty)
                }
                AmCommand::Launched(attempt, container, _) => info_span!(
                    "am_launched",
                    app_id = %attempt.application_id,
                    attempt_id = %attempt,
                    container_id = %container,
                ),
            },
            Command::Node(c) => match c {
                NodeCommand::Register { registration, .. } => {
                    info_span!("register_node", node_id = %registration.id)
                }
                NodeCommand::Heartbeat { beat, .. } => {
                    info_span!("node_heartbeat", node_id = %beat.node)
                }
                NodeCommand::Unregister(node, _) => info_span!("unregister_node", node_id = %node),
                NodeCommand::Prefetch { image, .. } => info_span!("prefetch_image", image = %image),
            },
            Command::Admin(c) => match c {
                AdminCommand::ChangeLabels { .. } => info_span!("change_labels"),
                AdminCommand::RefreshNodes { .. } => info_span!("refresh_nodes"),
                AdminCommand::RefreshQueues { .. } => info_span!("refresh_queues"),
                AdminCommand::MutateSchedulerConf { .. } => info_span!("mutate_scheduler_conf"),
                AdminCommand::CancelUserToken { .. } => info_span!("cancel_user_token"),
            },
            Command::Query(c) => match c {
                QueryCommand::QueueAccess { .. }
                | QueryCommand::SubmitAccess { .. }
                | QueryCommand::CheckAdmin(..)
                | QueryCommand::GetSchedulerConf(..) => info_span!("check_access"),
                QueryCommand::Accounting { .. } => info_span!("accounting"),
                QueryCommand::UserTokenCancelled { .. } => info_span!("user_token_cancelled"),
                QueryCommand::OpenContainerToken { .. } => info_span!("open_container_token"),
            },
            Command::Snapshot(_) => tracing::Span::none(),
        }
    }
}

/// What a scheduler-configuration mutation did (or, in a dry run, would do): the version
/// then live, the whole property set, and one line per property changed
/// (`root.a.capacity: 50 -> 60`, see `CsProps::changes_to`).
#[derive(Debug, Clone)]
pub struct Mutated {
    pub version: u64,
    pub props: CsProps,
    pub changes: Vec<String>,
}
