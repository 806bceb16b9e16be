//! The NodeManager's remaining REST bodies (`/ws/v1/node/...`): the device plugins' resource
//! info, container log listings, and the free-port answer.
//!
//! These shapes used to be private to the NM's REST module; they live here so that every
//! REST body Spindle sends is a wire record, and clients can read them with the same types.
//! The container management calls and the NM REST v1 read shapes (node info, apps,
//! containers) are in [`super::node`].
//!
//! Only types: no I/O, no conversion from the NM's domain types (the NM builds these from its
//! plugin and log views), and never a field renamed once shipped. YARN's names where YARN has
//! the record (Jersey 1 + Jackson bean names, as YARN 3.3/3.4 answer); Spindle's additions are
//! optional fields with new names.

use serde::{Deserialize, Serialize};

// ---------------------------------------------------------------------------------------
// Resource plugins (`GET /ws/v1/node/resources/{resourcename}`)
//
// YARN 3.3/3.4 answers the GPU plugin with `NMGpuResourceInfo` unwrapped:
// `{gpuDeviceInformation, totalGpuDevices, assignedGpuDevices}`; other device plugins with
// `NMDeviceResourceInfo` `{totalDevices, assignedDevices}`; and an empty `{}` for a name no
// plugin manages. Spindle's additions (`cudaVersion`, `pciBusId`, `discoveryProblems`) are
// optional fields with new names, never renames.

/// YARN's `NMGpuResourceInfo`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct GpuResourceInfo {
    pub gpu_device_information: Option<GpuDeviceInfoJson>,
    pub total_gpu_devices: Vec<GpuDeviceJson>,
    pub assigned_gpu_devices: Vec<AssignedGpuDeviceJson>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub discovery_problems: Vec<String>,
}

/// YARN's `GpuDeviceInformation`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct GpuDeviceInfoJson {
    pub gpus: Vec<PerGpuJson>,
    pub driver_version: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuda_version: Option<String>,
}

/// YARN's `PerGpuDeviceInformation` ("N/A" and -1 where unknown, as YARN's defaults).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PerGpuJson {
    pub product_name: String,
    pub uuid: String,
    pub minor_number: i64,
    pub gpu_utilizations: GpuUtilizationsJson,
    pub gpu_memory_usage: GpuMemoryUsageJson,
    pub temperature: GpuTemperatureJson,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
}

/// YARN's `PerGpuUtilizations`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct GpuUtilizationsJson {
    pub overall_gpu_utilization: f32,
}

/// YARN's `PerGpuMemoryUsage`, in MiB.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct GpuMemoryUsageJson {
    #[serde(rename = "usedMemoryMiB")]
    pub used: i64,
    #[serde(rename = "availMemoryMiB")]
    pub avail: i64,
    #[serde(rename = "totalMemoryMiB")]
    pub total: i64,
}

/// YARN's `PerGpuTemperature`, in °C.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct GpuTemperatureJson {
    pub current_gpu_temp: f32,
    pub max_gpu_temp: f32,
    pub slow_threshold_gpu_temp: f32,
}

/// YARN's `GpuDevice`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct GpuDeviceJson {
    pub index: u32,
    pub minor_number: u32,
}

/// YARN's `AssignedGpuDevice`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AssignedGpuDeviceJson {
    pub index: u32,
    pub minor_number: u32,
    pub container_id: String,
}

/// YARN's `NMDeviceResourceInfo` (every device plugin but the GPU one).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct DeviceResourceInfo {
    pub total_devices: Vec<DeviceJson>,
    pub assigned_devices: Vec<AssignedDeviceJson>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub discovery_problems: Vec<String>,
}

/// YARN's `Device` (plugin API).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct DeviceJson {
    pub id: u32,
    pub dev_path: String,
    pub major_number: u32,
    pub minor_number: u32,
    #[serde(rename = "busID")]
    pub bus_id: String,
    #[serde(rename = "healthy")]
    pub is_healthy: bool,
    pub status: String,
}

/// YARN's `AssignedDevice`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AssignedDeviceJson {
    pub container_id: String,
    pub device: DeviceJson,
}

// ---------------------------------------------------------------------------------------
// Free port (`GET /ws/v1/node/ports/free`, a Spindle extension)

/// A TCP port that was free on the node a moment ago: `{"port":N}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FreePort {
    pub port: u16,
}

// ---------------------------------------------------------------------------------------
// Container logs (`GET /ws/v1/node/containers/{containerid}/logs`)

/// `{"containerLogsInfo": ...}`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ContainerLogsBody {
    #[serde(rename = "containerLogsInfo")]
    pub container_logs_info: ContainerLogsInfo,
}

/// YARN's `ContainerLogsInfo`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ContainerLogsInfo {
    pub container_log_info: Vec<ContainerLogFileInfo>,
    /// `LOCAL`: Spindle has no log aggregation.
    pub log_aggregation_type: String,
    pub container_id: String,
    pub node_id: String,
}

/// YARN's `ContainerLogFileInfo`; YARN writes size and time as strings, and so do we.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ContainerLogFileInfo {
    pub file_name: String,
    pub file_size: String,
    pub last_modified_time: String,
}
