//! The NodeManager's REST API: YARN's NM REST v1 (`/ws/v1/node/...`) and the container
//! management calls an AM (or the RM's AM launcher) makes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::cluster::LocalResourceInfo;
use super::OneOrMany;
use crate::ids::ContainerId;

// ---------------------------------------------------------------------------------------
// Container management (AM/RM → NM)

/// What to run in a container, YARN's `ContainerLaunchContext`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct ContainerLaunchContext {
    /// Joined with spaces and run with `bash -c`, as YARN's launch script does.
    pub commands: Vec<String>,
    pub environment: BTreeMap<String, String>,
    pub local_resources: BTreeMap<String, LocalResourceInfo>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartContainerRequest {
    pub container_token: String,
    pub container_launch_context: ContainerLaunchContext,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct StartContainersRequest {
    pub start_container_request: Vec<StartContainerRequest>,
    /// Spindle's extension for gangs: set up every container of this call (localized, in its
    /// cgroups, logs open) but hold it before its `exec` until
    /// `POST /ws/v1/node/containers/release` names it. The answer comes once all are held
    /// (or failed), so an AM can release a gang on every node at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hold: Option<LaunchHold>,
}

/// How a held start waits (see [`StartContainersRequest::hold`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LaunchHold {
    /// Containers not released this long after the start call are stopped (exit status
    /// -100, ABORTED) without having run. None: the NM's default. At most [`LaunchHold::MAX_TIMEOUT_MS`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

impl LaunchHold {
    /// The longest hold an NM accepts (ten minutes).
    pub const MAX_TIMEOUT_MS: u64 = 600_000;
}

/// `POST /ws/v1/node/containers/release`: lets held containers run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ReleaseContainersRequest {
    pub container_ids: Vec<ContainerId>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ReleaseContainersResponse {
    pub successfully_released_containers: Vec<ContainerId>,
    pub failed_requests: Vec<FailedContainerRequest>,
}

/// The exception an NM answers a start with when the container does not fit beside the
/// containers it runs (those it is killing aside): passing when the RM handed on the room of
/// a container the NM has not yet been told to stop; the RM's AM launch and the SDK's start
/// try again for a few seconds.
pub const NODE_FULL_EXCEPTION: &str = "NodeCapacityExceededException";

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FailedContainerRequest {
    pub container_id: String,
    pub exception: String,
    pub message: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct StartContainersResponse {
    pub successfully_started_containers: Vec<ContainerId>,
    pub failed_requests: Vec<FailedContainerRequest>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct StopContainersRequest {
    pub container_ids: Vec<ContainerId>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct StopContainersResponse {
    pub successfully_stopped_containers: Vec<ContainerId>,
    pub failed_requests: Vec<FailedContainerRequest>,
}

/// YARN's `SignalContainerCommand`: what `POST /ws/v1/node/containers/signal` sends to the
/// container's process group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[allow(non_camel_case_types)]
pub enum SignalContainerCommand {
    /// SIGQUIT (a JVM prints its threads; most other programs end).
    OUTPUT_THREAD_DUMP,
    /// SIGTERM, with no SIGKILL after it: the container exits in its own time.
    GRACEFUL_SHUTDOWN,
    /// SIGKILL.
    FORCEFUL_SHUTDOWN,
}

impl SignalContainerCommand {
    /// The signal's name (`SIGTERM`, ...).
    pub fn signal_name(self) -> &'static str {
        match self {
            Self::OUTPUT_THREAD_DUMP => "SIGQUIT",
            Self::GRACEFUL_SHUTDOWN => "SIGTERM",
            Self::FORCEFUL_SHUTDOWN => "SIGKILL",
        }
    }
}

/// `POST /ws/v1/node/containers/signal`: YARN's `SignalContainerRequest`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SignalContainerRequest {
    pub container_id: ContainerId,
    pub command: SignalContainerCommand,
}

/// The answer to a signal: the container signalled, or why not (as a stop's answer).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SignalContainerResponse {
    pub successfully_signaled_containers: Vec<ContainerId>,
    pub failed_requests: Vec<FailedContainerRequest>,
}

/// `POST /ws/v1/node/containers/update`: YARN's `ContainerUpdateRequest`, the new container
/// tokens the RM issued (an allocate answer's `updatedContainers`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerUpdateRequest {
    pub containers_to_update: Vec<String>,
}

/// YARN's `ContainerUpdateResponse`: the containers updated, or why not.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ContainerUpdateResponse {
    pub successfully_updated_containers: Vec<ContainerId>,
    pub failed_requests: Vec<FailedContainerRequest>,
}

/// `POST /ws/v1/node/containers/reinitialize`: the body of YARN's `reInitializeContainer`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReinitializeContainerRequest {
    pub container_id: ContainerId,
    pub container_launch_context: ContainerLaunchContext,
    /// SIGTERM to SIGKILL for the old process (absent: the NM's sigkill delay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_period_ms: Option<u64>,
}

/// The answer to a re-initialization: the new process runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReinitializeContainerResponse {
    pub container_id: ContainerId,
    /// When the new process started, ms since the epoch.
    pub start_time: u64,
    /// From the SIGTERM to the old process's end (0 if it had already ended).
    pub stopped_in_ms: u64,
    /// Re-initializations of this container so far.
    pub reinitializations: u32,
}

// ---------------------------------------------------------------------------------------
// NM REST v1 read shapes

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeInfoBody {
    #[serde(rename = "nodeInfo")]
    pub node_info: NmNodeInfo,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NmNodeInfo {
    pub id: String,
    pub node_host_name: String,
    #[serde(rename = "totalPmemAllocatedContainersMB")]
    pub total_pmem_allocated_containers_mb: i64,
    #[serde(rename = "totalVmemAllocatedContainersMB")]
    pub total_vmem_allocated_containers_mb: i64,
    pub total_v_cores_allocated_containers: i64,
    pub vmem_check_enabled: bool,
    pub pmem_check_enabled: bool,
    pub last_node_update_time: u64,
    pub nm_startup_time: u64,
    pub health_report: String,
    pub node_healthy: bool,
    pub node_manager_version: String,
    pub node_manager_build_version: String,
    pub node_manager_version_built_on: String,
    pub hadoop_version: String,
    pub hadoop_build_version: String,
    pub hadoop_version_built_on: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NmAppsBody {
    pub apps: Option<NmApps>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct NmApps {
    pub app: OneOrMany<NmAppInfo>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NmAppBody {
    pub app: NmAppInfo,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct NmAppInfo {
    pub id: String,
    pub user: String,
    /// NEW, INITING, RUNNING, FINISHING_CONTAINERS_WAIT, APPLICATION_RESOURCES_CLEANINGUP, FINISHED
    pub state: String,
    pub containerids: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NmContainersBody {
    pub containers: Option<NmContainers>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct NmContainers {
    pub container: OneOrMany<NmContainerInfo>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NmContainerBody {
    pub container: NmContainerInfo,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NmContainerInfo {
    pub id: String,
    pub state: String,
    /// -1000 (INVALID) while running.
    pub exit_code: i32,
    pub diagnostics: String,
    pub user: String,
    #[serde(rename = "totalMemoryNeededMB")]
    pub total_memory_needed_mb: i64,
    pub total_v_cores_needed: i64,
    pub container_logs_link: String,
    pub node_id: String,
    pub execution_type: String,
    pub container_log_files: Vec<String>,
}
