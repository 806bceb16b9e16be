//! The ResourceManager REST API v1 (`/ws/v1/cluster/...`), field for field as Hadoop YARN
//! 3.3/3.4. Roots are kept (`{"apps":{"app":[...]}}`), as YARN's JAXB "natural" notation does.

use serde::{Deserialize, Serialize};

use super::resource::ResourceInfo;
use super::OneOrMany;
use crate::ids::ApplicationId;
use crate::states::{FinalApplicationStatus, NodeState, YarnApplicationState};

// /scheduler, /scheduler-conf and /queues/{queue}/access.
mod fairshare;
mod images;
mod scheduler;

pub use fairshare::*;
pub use images::*;
pub use scheduler::*;

// ---------------------------------------------------------------------------------------
// /info, /metrics

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClusterInfoBody {
    #[serde(rename = "clusterInfo")]
    pub cluster_info: ClusterInfo,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ClusterInfo {
    pub id: u64,
    pub started_on: u64,
    pub state: String,
    pub ha_state: String,
    pub rm_state_store_name: String,
    pub resource_manager_version: String,
    pub resource_manager_build_version: String,
    pub resource_manager_version_built_on: String,
    pub hadoop_version: String,
    pub hadoop_build_version: String,
    pub hadoop_version_built_on: String,
    pub ha_zoo_keeper_connection_state: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClusterMetricsBody {
    #[serde(rename = "clusterMetrics")]
    pub cluster_metrics: ClusterMetrics,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ClusterMetrics {
    pub apps_submitted: u64,
    pub apps_completed: u64,
    pub apps_pending: u64,
    pub apps_running: u64,
    pub apps_failed: u64,
    pub apps_killed: u64,
    #[serde(rename = "reservedMB")]
    pub reserved_mb: i64,
    #[serde(rename = "availableMB")]
    pub available_mb: i64,
    #[serde(rename = "allocatedMB")]
    pub allocated_mb: i64,
    #[serde(rename = "pendingMB")]
    pub pending_mb: i64,
    #[serde(rename = "totalMB")]
    pub total_mb: i64,
    pub reserved_virtual_cores: i64,
    pub available_virtual_cores: i64,
    pub allocated_virtual_cores: i64,
    pub pending_virtual_cores: i64,
    pub total_virtual_cores: i64,
    pub containers_allocated: u64,
    pub containers_reserved: u64,
    pub containers_pending: u64,
    pub total_nodes: u64,
    pub active_nodes: u64,
    pub lost_nodes: u64,
    pub unhealthy_nodes: u64,
    pub decommissioning_nodes: u64,
    pub decommissioned_nodes: u64,
    pub rebooted_nodes: u64,
    pub shutdown_nodes: u64,
    #[serde(rename = "utilizedMBPercent")]
    pub utilized_mb_percent: i64,
    pub utilized_vcores_percent: i64,
    pub total_used_resources_across_partition: ResourceInfo,
    pub total_cluster_resources_across_partition: ResourceInfo,
    pub total_reserved_resources_across_partition: ResourceInfo,
    pub total_allocated_containers_across_partition: u64,
}

// ---------------------------------------------------------------------------------------
// /apps

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AppsBody {
    /// `null` when there are none, as YARN answers.
    pub apps: Option<Apps>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Apps {
    pub app: OneOrMany<AppInfo>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AppBody {
    pub app: AppInfo,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AppInfo {
    pub id: String,
    pub user: String,
    pub name: String,
    pub queue: String,
    pub state: YarnApplicationState,
    pub final_status: FinalApplicationStatus,
    pub progress: f32,
    #[serde(rename = "trackingUI")]
    pub tracking_ui: String,
    pub tracking_url: Option<String>,
    pub diagnostics: String,
    pub cluster_id: u64,
    pub application_type: String,
    pub application_tags: String,
    pub priority: i32,
    pub started_time: u64,
    pub launch_time: u64,
    pub finished_time: u64,
    pub elapsed_time: u64,
    pub am_container_logs: Option<String>,
    pub am_host_http_address: Option<String>,
    #[serde(rename = "amRPCAddress")]
    pub am_rpc_address: Option<String>,
    pub master_node_id: Option<String>,
    #[serde(rename = "allocatedMB")]
    pub allocated_mb: i64,
    #[serde(rename = "allocatedVCores")]
    pub allocated_v_cores: i64,
    #[serde(rename = "reservedMB")]
    pub reserved_mb: i64,
    #[serde(rename = "reservedVCores")]
    pub reserved_v_cores: i64,
    pub running_containers: i64,
    pub memory_seconds: i64,
    pub vcore_seconds: i64,
    pub queue_usage_percentage: f32,
    pub cluster_usage_percentage: f32,
    #[serde(rename = "preemptedResourceMB")]
    pub preempted_resource_mb: i64,
    pub preempted_resource_v_cores: i64,
    #[serde(rename = "numNonAMContainerPreempted")]
    pub num_non_am_container_preempted: i64,
    #[serde(rename = "numAMContainerPreempted")]
    pub num_am_container_preempted: i64,
    pub preempted_memory_seconds: i64,
    pub preempted_vcore_seconds: i64,
    pub log_aggregation_status: String,
    pub unmanaged_application: bool,
    pub app_node_label_expression: Option<String>,
    pub am_node_label_expression: Option<String>,
    pub resource_requests: Vec<AppResourceRequestInfo>,
    /// Spindle's extension: the application's gangs and why any of them waits.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gangs: Vec<super::am::GangStatus>,
    /// Spindle's extension: what preemption took from the application.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preemption: Option<AppPreemptionInfo>,
    /// YARN's `timeouts`: the application's `LIFETIME` (`UNLIMITED` when none is set).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeouts: Option<AppTimeoutsInfo>,
    /// YARN's `resourceSecondsMap`: resource x seconds per type (`memory-mb`, `vcores`,
    /// `yarn.io/gpu`, ...) of every container the application held, running ones up to now.
    pub resource_seconds_map: ResourceSecondsMap,
    /// YARN's `preemptedResourceSecondsMap`: the same for its containers that were preempted.
    pub preempted_resource_seconds_map: ResourceSecondsMap,
    /// Spindle's extension: the mean utilization (percent) of the GPUs its running containers
    /// hold, as their NodeManagers last sampled them; absent when none was sampled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_utilization: Option<f64>,
    /// Spindle's extension: GPU-seconds its containers held GPUs idle (below their queue's
    /// `gpu-idle-threshold-percent`), running ones up to their last sample; absent when no
    /// GPU of the application was ever sampled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_gpu_seconds: Option<u64>,
    /// Spindle's extension: the GPUs (`yarn.io/gpu`) its running containers hold now, as
    /// `allocatedMB` counts memory (-1 once it ended).
    pub allocated_gpus: i64,
    /// Spindle's extension: the GPUs its outstanding asks (gangs included) still want (0 once
    /// it ended).
    pub pending_gpus: i64,
    /// Spindle's extension: why it is where it is in its `fairshare` leaf's order, while it
    /// waits there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fair_share_priority: Option<AppFairSharePriorityInfo>,
}

/// YARN's `Map<String, Long>` of resource-seconds as JAXB writes it:
/// `{"entry":[{"key":"yarn.io/gpu","value":7200}]}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ResourceSecondsMap {
    pub entry: OneOrMany<ResourceSecondsEntry>,
}

impl ResourceSecondsMap {
    /// The seconds of one resource type (0 when absent).
    pub fn get(&self, key: &str) -> i64 {
        self.entry
            .0
            .iter()
            .find(|e| e.key == key)
            .map_or(0, |e| e.value)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ResourceSecondsEntry {
    pub key: String,
    pub value: i64,
}

// ---------------------------------------------------------------------------------------
// /accounting (Spindle's: usage by queue, user or application over a period)

/// `GET /accounting`: `{"accounting":{...}}`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AccountingBody {
    pub accounting: AccountingInfo,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AccountingInfo {
    /// The period, ms since the epoch, and the same as ISO 8601.
    pub from: u64,
    pub to: u64,
    pub from_time: String,
    pub to_time: String,
    /// `queue`, `user` or `application`.
    pub group_by: String,
    /// One row per group, by GPU-hours (most first), then name.
    pub group: Vec<AccountingGroup>,
    /// Every group summed.
    pub total: AccountingGroup,
}

/// One group's usage within the period. Hours are prorated: an application that overlaps
/// the period counts the fraction of its life inside it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AccountingGroup {
    /// The queue (leaf name), the user, or the application id.
    pub name: String,
    pub gpu_hours: f64,
    /// GPU-hours of containers that were preempted.
    pub lost_gpu_hours: f64,
    /// The applications' durations within the period, summed.
    pub wall_hours: f64,
    #[serde(rename = "memoryGBHours")]
    pub memory_gb_hours: f64,
    pub vcore_hours: f64,
    /// Applications counted.
    pub apps: u64,
}

/// An application's preemption record (Spindle's extension of the app view).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct AppPreemptionInfo {
    /// Units taken back: whole gangs, or single containers.
    pub preemptions: u32,
    /// Containers under notice now.
    pub containers_under_notice: u32,
    /// GPU-seconds of work lost (since the last checkpoint, else since the start).
    pub lost_gpu_seconds: f64,
    /// GPU-seconds the preempted containers had run.
    pub preempted_gpu_seconds: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_notice_to_exit_ms: Option<u64>,
    pub max_notice_to_exit_ms: u64,
    /// The last checkpoint its AM reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_checkpoint: Option<super::am::CheckpointReport>,
    /// Who the last preemption took its containers for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_preempted_by: Option<PreemptedBy>,
}

/// The application a preemption took containers for (Spindle's extension).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct PreemptedBy {
    pub application_id: String,
    /// Its leaf queue's path.
    pub queue: String,
}

impl Default for AppInfo {
    fn default() -> Self {
        Self {
            id: String::new(),
            user: String::new(),
            name: String::new(),
            queue: String::new(),
            state: YarnApplicationState::NEW,
            final_status: FinalApplicationStatus::UNDEFINED,
            progress: 0.0,
            tracking_ui: "UNASSIGNED".into(),
            tracking_url: None,
            diagnostics: String::new(),
            cluster_id: 0,
            application_type: String::new(),
            application_tags: String::new(),
            priority: 0,
            started_time: 0,
            launch_time: 0,
            finished_time: 0,
            elapsed_time: 0,
            am_container_logs: None,
            am_host_http_address: None,
            am_rpc_address: None,
            master_node_id: None,
            allocated_mb: 0,
            allocated_v_cores: 0,
            reserved_mb: 0,
            reserved_v_cores: 0,
            running_containers: 0,
            memory_seconds: 0,
            vcore_seconds: 0,
            queue_usage_percentage: 0.0,
            cluster_usage_percentage: 0.0,
            preempted_resource_mb: 0,
            preempted_resource_v_cores: 0,
            num_non_am_container_preempted: 0,
            num_am_container_preempted: 0,
            preempted_memory_seconds: 0,
            preempted_vcore_seconds: 0,
            log_aggregation_status: "DISABLED".into(),
            unmanaged_application: false,
            app_node_label_expression: None,
            am_node_label_expression: None,
            resource_requests: Vec::new(),
            gangs: Vec::new(),
            preemption: None,
            timeouts: None,
            resource_seconds_map: ResourceSecondsMap::default(),
            preempted_resource_seconds_map: ResourceSecondsMap::default(),
            gpu_utilization: None,
            idle_gpu_seconds: None,
            allocated_gpus: 0,
            pending_gpus: 0,
            fair_share_priority: None,
        }
    }
}

/// An outstanding ask as `/apps/{id}` shows it under `resourceRequests`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AppResourceRequestInfo {
    pub capability: RequestCapabilityInfo,
    pub node_label_expression: String,
    pub num_containers: i64,
    pub priority: PriorityInfo,
    pub relax_locality: bool,
    pub resource_name: String,
    pub allocation_request_id: i64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct RequestCapabilityInfo {
    pub memory: i64,
    pub virtual_cores: i64,
    /// Every resource type the ask names (`memory-mb`, `vcores`, then `yarn.io/gpu` and the
    /// other extended types), as YARN's `ResourceInfo` lists them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_informations: Option<super::resource::ResourceInformations>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PriorityInfo {
    pub priority: i32,
}

// ---------------------------------------------------------------------------------------
// Attempts and their containers

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AppAttemptsBody {
    #[serde(rename = "appAttempts")]
    pub app_attempts: AppAttempts,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct AppAttempts {
    #[serde(rename = "appAttempt")]
    pub app_attempt: OneOrMany<AppAttemptInfo>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AppAttemptBody {
    #[serde(rename = "appAttempt")]
    pub app_attempt: AppAttemptInfo,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AppAttemptInfo {
    /// The attempt number, as YARN's `id` is.
    pub id: u32,
    pub start_time: u64,
    pub finished_time: u64,
    pub container_id: String,
    pub node_http_address: String,
    pub node_id: String,
    pub logs_link: String,
    pub blacklisted_nodes: String,
    pub nodes_blacklisted_by_system: String,
    pub app_attempt_id: String,
    pub app_attempt_state: String,
    pub diagnostics_info: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContainersBody {
    pub containers: Option<Containers>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Containers {
    pub container: OneOrMany<ContainerReportInfo>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContainerReportBody {
    pub container: ContainerReportInfo,
}

/// YARN's `ContainerInfo` of the RM/AHS web services.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ContainerReportInfo {
    pub container_id: String,
    #[serde(rename = "allocatedMB")]
    pub allocated_mb: i64,
    pub allocated_v_cores: i64,
    pub assigned_node_id: String,
    pub priority: i32,
    pub started_time: u64,
    pub finished_time: u64,
    pub elapsed_time: u64,
    pub diagnostics_info: String,
    pub log_url: String,
    pub container_exit_status: i32,
    pub container_state: String,
    pub node_http_address: String,
    pub node_id: String,
    pub allocated_resources: std::collections::BTreeMap<String, i64>,
}

// ---------------------------------------------------------------------------------------
// Writable app APIs

/// `POST /apps/new-application` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NewApplication {
    #[serde(rename = "application-id")]
    pub application_id: ApplicationId,
    #[serde(rename = "maximum-resource-capability")]
    pub maximum_resource_capability: ResourceInfo,
}

/// `POST /apps` body, YARN's hyphenated `application-submission-context`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case")]
pub struct ApplicationSubmissionContext {
    pub application_id: String,
    pub application_name: Option<String>,
    pub queue: Option<String>,
    pub priority: Option<i32>,
    pub am_container_spec: AmContainerSpec,
    #[serde(rename = "unmanaged-AM")]
    pub unmanaged_am: bool,
    pub max_app_attempts: Option<i32>,
    pub resource: Option<ResourceInfo>,
    pub application_type: Option<String>,
    pub keep_containers_across_application_attempts: bool,
    pub application_tags: Option<ApplicationTags>,
    pub attempt_failures_validity_interval: Option<i64>,
    pub app_node_label_expression: Option<String>,
    pub am_container_node_label_expression: Option<String>,
    /// YARN's `application-timeouts` (only `LIFETIME`): the RM kills the application this
    /// many seconds after its submission, capped by its queue's `maximum-application-lifetime`.
    pub application_timeouts: Option<SubmissionTimeouts>,
    /// Spindle's extension, Slurm's `--dependency=afterany/afterok`: the RM keeps the
    /// application ACCEPTED until the named applications end (or succeed).
    pub dependencies: Option<SubmissionDependencies>,
}

/// `application-timeouts` of a submission: `{"timeout": [{"type": "LIFETIME", "seconds": 300}]}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SubmissionTimeouts {
    pub timeout: OneOrMany<SubmissionTimeout>,
}

/// One timeout of a submission: its type (`LIFETIME`) and length in seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SubmissionTimeout {
    #[serde(rename = "type")]
    pub timeout_type: String,
    pub seconds: i64,
}

/// `dependencies` of a submission:
/// `{"dependency": [{"application-id": "application_1_0001", "type": "afterok"}]}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SubmissionDependencies {
    pub dependency: OneOrMany<SubmissionDependency>,
}

/// One dependency: the application it names and Slurm's type, `afterany` (it ended) or
/// `afterok` (it succeeded).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case")]
pub struct SubmissionDependency {
    pub application_id: String,
    #[serde(rename = "type")]
    pub dependency_type: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ApplicationTags {
    pub tag: OneOrMany<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case")]
pub struct AmContainerSpec {
    pub local_resources: Option<LocalResourcesInfo>,
    pub environment: Option<KeyValues>,
    pub commands: Option<CommandsInfo>,
    pub service_data: Option<KeyValues>,
    pub application_acls: Option<KeyValues>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CommandsInfo {
    pub command: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct KeyValues {
    pub entry: OneOrMany<KeyValue>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct KeyValue {
    pub key: String,
    pub value: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LocalResourcesInfo {
    pub entry: OneOrMany<LocalResourceEntry>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LocalResourceEntry {
    pub key: String,
    pub value: LocalResourceInfo,
}

/// A file to place in the container's working directory. Spindle localizes `file://` URLs
/// and absolute paths on the node (there is no HDFS); other schemes are refused at launch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LocalResourceInfo {
    pub resource: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub visibility: String,
    pub size: i64,
    pub timestamp: i64,
}

/// `GET/PUT /apps/{id}/state`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AppStateBody {
    pub state: String,
}

/// `GET/PUT /apps/{id}/queue`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AppQueueBody {
    pub queue: String,
}

/// `GET/PUT /apps/{id}/priority`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AppPriorityBody {
    pub priority: i32,
}

/// YARN's `AppTimeoutInfo`: one timeout of an application. `expiryTime` is ISO 8601
/// (`yyyy-MM-dd'T'HH:mm:ss.SSSZ`) or `UNLIMITED`; `remainingTimeInSeconds` is -1 when
/// unlimited. Only `LIFETIME` exists.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AppTimeoutInfo {
    #[serde(rename = "type")]
    pub timeout_type: String,
    pub expiry_time: String,
    pub remaining_time_in_seconds: i64,
}

/// `PUT /apps/{id}/timeout` body and answer, `GET /apps/{id}/timeouts/{type}` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AppTimeoutBody {
    pub timeout: AppTimeoutInfo,
}

/// `GET /apps/{id}/timeouts`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AppTimeoutsBody {
    pub timeouts: AppTimeoutsInfo,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AppTimeoutsInfo {
    #[serde(default)]
    pub timeout: Vec<AppTimeoutInfo>,
}

/// `GET /appstatistics`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AppStatisticsBody {
    #[serde(rename = "appStatInfo")]
    pub app_stat_info: AppStatInfo,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AppStatInfo {
    pub stat_item: Vec<StatItem>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StatItem {
    pub state: YarnApplicationState,
    #[serde(rename = "type")]
    pub kind: String,
    pub count: u64,
}

// ---------------------------------------------------------------------------------------
// /nodes

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodesBody {
    pub nodes: Option<Nodes>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Nodes {
    pub node: OneOrMany<NodeInfo>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeBody {
    pub node: NodeInfo,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NodeInfo {
    pub rack: String,
    pub state: NodeState,
    pub id: String,
    pub node_host_name: String,
    #[serde(rename = "nodeHTTPAddress")]
    pub node_http_address: String,
    pub last_health_update: u64,
    pub version: String,
    pub health_report: String,
    pub num_containers: i64,
    #[serde(rename = "usedMemoryMB")]
    pub used_memory_mb: i64,
    #[serde(rename = "availMemoryMB")]
    pub avail_memory_mb: i64,
    pub used_virtual_cores: i64,
    pub available_virtual_cores: i64,
    pub mem_utilization: f32,
    pub cpu_utilization: f32,
    pub num_running_opport_containers: i64,
    #[serde(rename = "usedMemoryOpportGB")]
    pub used_memory_opport_gb: i64,
    pub used_virtual_cores_opport: i64,
    pub num_queued_containers: i64,
    pub node_labels: Vec<String>,
    pub allocation_tags: serde_json::Value,
    pub resource_utilization: ResourceUtilizationInfo,
    pub used_resource: ResourceInfo,
    pub available_resource: ResourceInfo,
    pub total_resource: ResourceInfo,
    pub node_attributes_info: serde_json::Value,
    /// YARN's `decommissioningTimeout`: a DECOMMISSIONING node's graceful timeout in
    /// seconds (absent otherwise, and when it has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decommissioning_timeout: Option<i64>,
    /// Spindle's extension: the container images the node holds.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<crate::records::tracker::NodeImageInfo>,
    /// Spindle's extension: the node's last failed image pulls.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub image_pull_failures: Vec<crate::records::tracker::ImagePullFailureInfo>,
}

impl Default for NodeInfo {
    fn default() -> Self {
        Self {
            rack: "/default-rack".into(),
            state: NodeState::NEW,
            id: String::new(),
            node_host_name: String::new(),
            node_http_address: String::new(),
            last_health_update: 0,
            version: String::new(),
            health_report: String::new(),
            num_containers: 0,
            used_memory_mb: 0,
            avail_memory_mb: 0,
            used_virtual_cores: 0,
            available_virtual_cores: 0,
            mem_utilization: 0.0,
            cpu_utilization: 0.0,
            num_running_opport_containers: 0,
            used_memory_opport_gb: 0,
            used_virtual_cores_opport: 0,
            num_queued_containers: 0,
            node_labels: Vec::new(),
            allocation_tags: serde_json::json!({}),
            resource_utilization: Default::default(),
            used_resource: Default::default(),
            available_resource: Default::default(),
            total_resource: Default::default(),
            node_attributes_info: serde_json::json!({}),
            decommissioning_timeout: None,
            images: Vec::new(),
            image_pull_failures: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ResourceUtilizationInfo {
    #[serde(rename = "nodePhysicalMemoryMB")]
    pub node_physical_memory_mb: i64,
    #[serde(rename = "nodeVirtualMemoryMB")]
    pub node_virtual_memory_mb: i64,
    #[serde(rename = "nodeCPUUsage")]
    pub node_cpu_usage: f32,
    #[serde(rename = "aggregatedContainersPhysicalMemoryMB")]
    pub aggregated_containers_physical_memory_mb: i64,
    #[serde(rename = "aggregatedContainersVirtualMemoryMB")]
    pub aggregated_containers_virtual_memory_mb: i64,
    #[serde(rename = "containersCPUUsage")]
    pub containers_cpu_usage: f32,
}
