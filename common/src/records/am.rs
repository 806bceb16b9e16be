//! The ApplicationMasterProtocol as JSON (`/ws/v1/am/register`, `/allocate`, `/finish`).
//!
//! The AM proves itself with the AM-RM token from its environment
//! ([`crate::env::AMRM_TOKEN`]), sent as `Authorization: Bearer <token>`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::resource::ResourceInfo;
use crate::ids::{ContainerId, NodeId};
use crate::states::{ContainerState, FinalApplicationStatus};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct RegisterApplicationMasterRequest {
    pub host: String,
    pub rpc_port: i32,
    pub tracking_url: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct RegisterApplicationMasterResponse {
    pub maximum_resource_capability: ResourceInfo,
    pub queue: String,
    pub containers_from_previous_attempts: Vec<Container>,
    /// `MEMORY`, `CPU`, plus the names of extended types the scheduler knows.
    pub scheduler_resource_types: Vec<String>,
}

/// One ask, keyed by (`priority`, `allocationRequestId`, `resourceName`). `numContainers` is
/// the absolute number still wanted and replaces the previous ask for the same key, as in YARN.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct ResourceRequest {
    pub priority: i32,
    pub resource_name: String,
    pub capability: ResourceInfo,
    pub num_containers: i32,
    pub relax_locality: bool,
    pub node_label_expression: Option<String>,
    pub allocation_request_id: i64,
    /// Spindle's extension: this ask belongs to a gang, granted whole or not at all. Every
    /// ask of the application naming the same gang id is a member (several shapes, e.g. one
    /// chief and seven workers); the gang's settings are taken from the member that carries
    /// them (the first one sent wins).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gang: Option<GangSpec>,
    /// Allocation tags of the containers this ask yields (YARN's `SchedulingRequest`
    /// `allocationTags`): what other asks' placement constraints count.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allocation_tags: Vec<String>,
    /// Where the containers may go (YARN's `SchedulingRequest` `placementConstraint`):
    /// checked with the node's label, attributes and tags, for gang members too.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement_constraint: Option<super::labels::PlacementConstraintInfo>,
    /// Spindle's extension: the container image the containers will run in (what the
    /// launch context's `YARN_CONTAINER_RUNTIME_RUNC_IMAGE` names). Nodes that already hold
    /// it are preferred among those that fit; never a reason to wait.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Spindle's extension: the containers' vcores as a range, `MIN..MAX` per container
    /// (`capability.vCores` is then taken as `MIN`), or `auto` (one per GPU up to the
    /// node's CPUs per GPU times `spindle.scheduler.cpu-policy.auto-factor`). For GPU
    /// containers: granted at least the minimum and sized within the range by the
    /// partition's CPU policy; resizes reach the AM as `updatedContainers`. Absent: fixed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vcores_range: Option<String>,
}

/// How a gang wants to be placed and how long it may wait.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct GangSpec {
    /// The gang's id within the application (any non-empty string).
    pub id: String,
    /// PACK (fewest nodes, tightest fit; the default), STRICT_PACK (all on one node, or on
    /// at most `maxNodes`), SPREAD (at most one member per node), SAME_RACK (one rack).
    pub placement: GangPlacement,
    /// At most this many nodes (0: no limit).
    pub max_nodes: u32,
    /// How long the gang may wait for its placement, in ms (0: the RM's default).
    pub timeout_ms: u64,
    /// SOFT: when the timeout passes, the gang's asks are withdrawn and the AM is told
    /// (it may relax and ask again); HARD: the application fails.
    pub timeout_policy: GangTimeoutPolicy,
    /// All of the gang's nodes have GPUs of one model (whichever fits best).
    pub same_gpu_model: bool,
    /// Only nodes whose GPUs are of this model (`nvidia-smi`'s product name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_model: Option<String>,
    /// Elastic gangs: the fewest members the job can run with (0: not elastic; the gang is
    /// rigid at its asks' `numContainers`). An elastic gang has one ask, whose
    /// `numContainers` is its maximum; the RM grants at least `minContainers` whole, then
    /// grows it with `resizeOffers` and shrinks it with `resizeDemands`.
    #[serde(skip_serializing_if = "is_zero")]
    pub min_containers: u32,
    /// Elastic gangs: the most members (0: the ask's `numContainers`).
    #[serde(skip_serializing_if = "is_zero")]
    pub max_containers: u32,
    /// Elastic gangs: which sizes are legal (`POWER_OF_TWO`, the default; `MULTIPLE` of
    /// `sizeMultiple`; `ANY`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size_rule: Option<SizeRule>,
    /// With `sizeRule: MULTIPLE`: sizes are multiples of this.
    #[serde(skip_serializing_if = "is_zero")]
    pub size_multiple: u32,
    /// Elastic gangs: the job's throughput (any unit, e.g. images/s) by member count, as
    /// `{"1": 318.0, "2": 576.2}`: the RM's speed model. Sizes not given are interpolated;
    /// what the AM reports in `throughputReports` replaces it for that size.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub throughput: BTreeMap<String, f64>,
    /// The job's throughput per GPU (any unit) by CPUs per GPU, as `{"1": 100, "3": 180}`:
    /// the adaptive CPU policy's speed model for members asking a `vcoresRange`; what the
    /// AM reports with `vcores` in `throughputReports` is added to it.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub cpu_throughput: BTreeMap<String, f64>,
    /// Every member in one domain of this topology level (`rack`, or a node attribute's
    /// name such as `nm.yarn.io/nvlink-clique`), or none at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub required_domain: Option<String>,
    /// One domain of this level if any fits, else anywhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preferred_domain: Option<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The legal sizes of an elastic gang.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[allow(non_camel_case_types)]
pub enum SizeRule {
    /// 1, 2, 4, 8, ... (ring all-reduce's doubling-halving is fastest at powers of two).
    #[default]
    POWER_OF_TWO,
    /// Multiples of `sizeMultiple` (e.g. whole 8-GPU nodes).
    MULTIPLE,
    /// Any count between the minimum and the maximum.
    ANY,
}

impl Default for GangSpec {
    fn default() -> Self {
        Self {
            id: String::new(),
            placement: GangPlacement::PACK,
            max_nodes: 0,
            timeout_ms: 0,
            timeout_policy: GangTimeoutPolicy::SOFT,
            same_gpu_model: false,
            gpu_model: None,
            min_containers: 0,
            max_containers: 0,
            size_rule: None,
            size_multiple: 0,
            throughput: BTreeMap::new(),
            cpu_throughput: BTreeMap::new(),
            required_domain: None,
            preferred_domain: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[allow(non_camel_case_types)]
pub enum GangPlacement {
    #[default]
    PACK,
    STRICT_PACK,
    SPREAD,
    SAME_RACK,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[allow(non_camel_case_types)]
pub enum GangTimeoutPolicy {
    #[default]
    SOFT,
    HARD,
}

/// A gang's state as the AM sees it in allocate responses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[allow(non_camel_case_types)]
pub enum GangState {
    /// Waiting for a fit; nothing held.
    #[default]
    PENDING,
    /// Waiting, with nodes reserved for it as they drain.
    RESERVED,
    /// Granted whole in this response (or an earlier one).
    ALLOCATED,
    /// The soft timeout passed; the asks were withdrawn.
    TIMED_OUT,
    /// A member ended (failed, or its node was lost); see `failedContainers`.
    FAILED,
    /// The RM took the gang back whole (its members ended with -102 PREEMPTED); ask again.
    PREEMPTED,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct GangStatus {
    pub id: String,
    pub state: GangState,
    /// Containers the gang asks for in all.
    pub size: u32,
    /// Why it waits, in words ("needs 16 GPUs on at most 2 nodes; the best fit now is 12;
    /// reserved nodes a, b").
    #[serde(default)]
    pub diagnostics: String,
    #[serde(default)]
    pub reserved_nodes: Vec<NodeId>,
    /// Members that ended while the gang ran (state FAILED).
    #[serde(default)]
    pub failed_containers: Vec<ContainerId>,
    /// Elastic gangs: the members it runs with now (0 for a rigid gang).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub current_size: u32,
    /// Elastic gangs: how many times it was resized.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resizes: u32,
}

/// Spindle's extension: the RM grows an elastic gang. The containers are allocated (they are
/// also in `allocatedContainers`) and are the gang's members from now on; the AM accepts by
/// starting them (typically after checkpointing and restarting the whole gang at `toSize`)
/// and declines by releasing them.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct ResizeOffer {
    pub gang_id: String,
    pub from_size: u32,
    pub to_size: u32,
    pub containers: Vec<ContainerId>,
}

/// Spindle's extension: the RM shrinks an elastic gang. The AM releases `containers` by
/// `deadline` (ms since the epoch), typically after checkpointing and restarting the rest
/// at `toSize`; it may acknowledge with `preemptionAcknowledgement` as for a preemption.
/// What is left at the deadline is killed (exit status -102); the gang goes on at `toSize`.
/// Repeated in every response until the containers are gone.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct ResizeDemand {
    pub gang_id: String,
    pub from_size: u32,
    pub to_size: u32,
    pub containers: Vec<ContainerId>,
    pub deadline: u64,
}

/// Spindle's extension: an elastic gang's measured throughput at its current size (same
/// unit as the gang's `throughput` table), the RM's speed model for it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct ThroughputReport {
    pub gang_id: String,
    /// The member count it was measured at.
    pub size: u32,
    pub throughput: f64,
    /// Spindle's extension: the vcores each worker container had when this was measured
    /// (0: not said). With it, the report also feeds the CPU policy's model.
    #[serde(skip_serializing_if = "is_zero")]
    pub vcores: u32,
}

impl Default for ResourceRequest {
    fn default() -> Self {
        Self {
            priority: 0,
            resource_name: "*".into(),
            capability: ResourceInfo::default(),
            num_containers: 0,
            relax_locality: true,
            node_label_expression: None,
            allocation_request_id: 0,
            gang: None,
            allocation_tags: Vec::new(),
            placement_constraint: None,
            image: None,
            vcores_range: None,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct BlacklistRequest {
    pub blacklist_additions: Vec<String>,
    pub blacklist_removals: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AllocateRequest {
    /// The last `responseId` the AM saw; 0 on the first call.
    pub response_id: i32,
    pub ask: Vec<ResourceRequest>,
    pub release: Vec<ContainerId>,
    pub progress: f32,
    pub blacklist_request: Option<BlacklistRequest>,
    pub tracking_url: Option<String>,
    /// Spindle's extension: the application's last checkpoint. The RM counts work lost to
    /// a preemption from it (GPU-seconds since the checkpoint; since the containers' start
    /// when no AM ever reported one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<CheckpointReport>,
    /// Spindle's extension: the answer to a `preemptionMessage`: the AM will checkpoint and
    /// give the containers back within `checkpointEtaMs`. The RM then kills what is left at
    /// the earlier of that and its `max_wait_before_kill`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preemption_acknowledgement: Option<PreemptionAcknowledgement>,
    /// Spindle's extension: elastic gangs' measured throughput (the doubling policy's
    /// speed model); `progress` is read as the fraction of the job's work done.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub throughput_reports: Vec<ThroughputReport>,
    /// YARN's container updates: change a running container's resources (single
    /// containers; a gang member is resized with elastic gangs instead).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub update_requests: Vec<UpdateContainerRequest>,
}

/// YARN's `UpdateContainerRequest`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct UpdateContainerRequest {
    pub container_id: ContainerId,
    /// The version the AM holds (from its last `Container`); a stale one is refused.
    #[serde(default)]
    pub container_version: i32,
    #[serde(default)]
    pub container_update_type: ContainerUpdateType,
    /// The new size (INCREASE/DECREASE_RESOURCE).
    #[serde(default)]
    pub capability: ResourceInfo,
}

/// YARN's `ContainerUpdateType` (the execution-type changes are refused: Spindle runs
/// GUARANTEED containers only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[allow(non_camel_case_types)]
pub enum ContainerUpdateType {
    #[default]
    INCREASE_RESOURCE,
    DECREASE_RESOURCE,
    PROMOTE_EXECUTION_TYPE,
    DEMOTE_EXECUTION_TYPE,
}

/// YARN's `UpdatedContainer`: the container at its new version and size, with a new token
/// the AM hands to the container's NM (`POST /ws/v1/node/containers/update`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct UpdatedContainer {
    pub update_type: ContainerUpdateType,
    pub container: Container,
}

/// YARN's `UpdateContainerError`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct UpdateContainerError {
    /// YARN's reason word (`INCORRECT_CONTAINER_VERSION_ERROR`, `UPDATE_OUTSTANDING_ERROR`,
    /// `INVALID_TARGET_CAPABILITY`, `INVALID_CONTAINER_ID`, `NOT_SUPPORTED`).
    pub reason: String,
    /// Spindle's extension: the reason in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub diagnostics: String,
    pub current_container_version: i32,
    pub update_container_request: UpdateContainerRequest,
}

/// Where the application's work is saved up to.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default, rename_all = "camelCase")]
pub struct CheckpointReport {
    /// When the checkpoint was written, in ms since the epoch.
    pub time: u64,
    /// The training step it holds, if the AM knows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<u64>,
    /// A free-form label (a path, a tag).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// An AM's acknowledgement of a preemption notice.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default, rename_all = "camelCase")]
pub struct PreemptionAcknowledgement {
    /// In how many ms the AM expects its containers to have checkpointed and exited.
    pub checkpoint_eta_ms: u64,
}

/// YARN's `PreemptionMessage`: containers the RM takes back. Spindle always fills the strict
/// contract (these containers will be killed; a gang's members all together) and repeats them,
/// with the resources they free, in the negotiable `contract`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct PreemptionMessage {
    pub strict_contract: Option<StrictPreemptionContract>,
    pub contract: Option<PreemptionContract>,
    /// Spindle's extension: when (ms since the epoch) the RM kills, with exit status -102
    /// (PREEMPTED), what has not exited by then, unless an acknowledgement names an earlier time.
    pub deadline: u64,
    /// Spindle's extension: the gangs taken back whole.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gang_ids: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct StrictPreemptionContract {
    pub container: Vec<PreemptionContainer>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct PreemptionContract {
    pub resource: Vec<PreemptionResourceRequest>,
    pub container: Vec<PreemptionContainer>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PreemptionContainer {
    pub id: ContainerId,
    /// Spindle's extension: the node the container runs on, and its NM's HTTP address (where
    /// the AM signals or stops it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<NodeId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_http_address: Option<String>,
    /// Spindle's extension: the gang the container is a member of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gang_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PreemptionResourceRequest {
    pub resource: ResourceRequest,
}

/// A granted container, with the RM-signed token that the NM checks before it starts it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    pub id: ContainerId,
    pub node_id: NodeId,
    pub node_http_address: String,
    pub resource: ResourceInfo,
    pub priority: i32,
    pub container_token: String,
    #[serde(default = "guaranteed")]
    pub execution_type: String,
    #[serde(default)]
    pub allocation_request_id: i64,
    #[serde(default)]
    pub version: i32,
}

fn guaranteed() -> String {
    "GUARANTEED".into()
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStatus {
    pub container_id: ContainerId,
    pub state: ContainerState,
    /// YARN's `ContainerExitStatus` (-1000 while running).
    pub exit_status: i32,
    #[serde(default)]
    pub diagnostics: String,
    /// Spindle's extension: the gang the container belonged to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gang_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeReport {
    pub node_id: NodeId,
    pub node_state: crate::states::NodeState,
    pub http_address: String,
    #[serde(default)]
    pub health_report: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[allow(non_camel_case_types)]
pub enum AmCommand {
    AM_RESYNC,
    AM_SHUTDOWN,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AllocateResponse {
    pub response_id: i32,
    pub allocated_containers: Vec<Container>,
    pub completed_container_statuses: Vec<ContainerStatus>,
    /// Headroom: what the application could still be given.
    pub available_resources: ResourceInfo,
    pub updated_nodes: Vec<NodeReport>,
    pub num_cluster_nodes: i32,
    pub am_command: Option<AmCommand>,
    pub application_priority: i32,
    /// Spindle's extension: the state of every gang the application asked for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gang_statuses: Vec<GangStatus>,
    /// Containers the RM is taking back (YARN's `PreemptionMessage`), repeated in every
    /// response until they have exited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preemption_message: Option<PreemptionMessage>,
    /// Elastic gangs the RM grows (see [`ResizeOffer`]); each offer is sent once.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resize_offers: Vec<ResizeOffer>,
    /// Elastic gangs the RM shrinks (see [`ResizeDemand`]), repeated until done.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resize_demands: Vec<ResizeDemand>,
    /// YARN's: containers updated as asked (an increase may come in a later answer).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub updated_containers: Vec<UpdatedContainer>,
    /// YARN's: updates refused, with the reason.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub update_errors: Vec<UpdateContainerError>,
    /// Spindle's extension: containers whose GPUs stayed idle past their queue's
    /// `gpu-idle-timeout-ms` under the `notify` action; each is sent once per idle spell.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub idle_gpu_containers: Vec<IdleGpuContainer>,
}

/// A container holding idle GPUs (see [`AllocateResponse::idle_gpu_containers`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IdleGpuContainer {
    pub container_id: ContainerId,
    /// When its GPUs' utilization first fell below the threshold (ms since the epoch).
    pub idle_since_ms: u64,
    /// How many GPUs it holds.
    pub gpus: u32,
    /// The mean utilization (percent) of its GPUs in the last sample.
    pub gpu_utilization: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FinishApplicationMasterRequest {
    pub final_application_status: FinalApplicationStatus,
    #[serde(default)]
    pub diagnostics: String,
    #[serde(default)]
    pub tracking_url: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct FinishApplicationMasterResponse {
    pub is_unregistered: bool,
}
