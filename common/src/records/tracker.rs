//! The ResourceTracker protocol, NM → RM (`/ws/v1/node-tracker/register`, `/heartbeat`).

use serde::{Deserialize, Serialize};

use super::am::ContainerStatus;
use super::resource::ResourceInfo;
use crate::cluster_secret::{ClusterSecret, NodeAuthError, WrappedKey};
use crate::ids::{ApplicationId, ContainerId, NodeId};
use crate::token::{ContainerKey, TokenError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[allow(non_camel_case_types)]
pub enum NodeAction {
    NORMAL,
    /// Re-register: the RM does not know this node (it restarted, or the node was LOST).
    RESYNC,
    SHUTDOWN,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegisterNodeManagerRequest {
    pub node_id: NodeId,
    /// `host:port` of the NM's web server (the same as the node id in Spindle).
    pub http_address: String,
    pub resource: ResourceInfo,
    #[serde(default)]
    pub nm_version: String,
    #[serde(default)]
    pub rack: Option<String>,
    /// Containers the NM still runs, so a restarted RM does not lose them.
    #[serde(default)]
    pub container_statuses: Vec<NmContainerReport>,
    /// Node attributes the NM reports (YARN's distributed `nm.yarn.io/` attributes), e.g.
    /// `nm.yarn.io/gpu-model`.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub node_attributes: std::collections::BTreeMap<String, String>,
    /// The NM's partition under distributed label configuration
    /// (`yarn.node-labels.configuration-type=distributed`): `[]` for the default
    /// partition; absent when the NM does not provide labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_labels: Option<Vec<String>>,
    /// Spindle's extension: the container images in the NM's cache (absent: it runs no
    /// image containers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_images: Option<Vec<NodeImageInfo>>,
}

/// Spindle's extension: a pull that failed on a node (`time` is set by the RM when it
/// shows it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImagePullFailureInfo {
    pub image: String,
    pub reason: String,
    #[serde(default)]
    pub time: u64,
}

/// Spindle's extension: one container image a node holds, as the NM reports it (register,
/// and heartbeats when the cache changed) and the RM shows it (`images` of a node).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeImageInfo {
    /// The references it was pulled as (`registry/repo:tag`).
    #[serde(default)]
    pub names: Vec<String>,
    /// Its manifest digest (`sha256:...`).
    pub digest: String,
    /// Bytes its unpacked layers take on the node.
    #[serde(default)]
    pub size_bytes: u64,
}

pub use crate::resource::GPU_MODEL_ATTRIBUTE;
/// The number of GPUs the NM manages.
pub const GPU_COUNT_ATTRIBUTE: &str = "nm.yarn.io/gpu-count";
/// Framebuffer memory per GPU in MiB (the smallest when the GPUs differ).
pub const GPU_MEMORY_MB_ATTRIBUTE: &str = "nm.yarn.io/gpu-memory-mb";
/// The NVIDIA driver version (`nvidia-smi`'s `driver_version`).
pub const GPU_DRIVER_VERSION_ATTRIBUTE: &str = "nm.yarn.io/gpu-driver-version";
/// The CUDA version the driver supports (`nvidia-smi`'s `cuda_version`).
pub const CUDA_VERSION_ATTRIBUTE: &str = "nm.yarn.io/cuda-version";
/// The NVLink fabric's cluster UUID (`nvidia-smi -q`'s Fabric ClusterUUID).
pub const NVLINK_CLUSTER_UUID_ATTRIBUTE: &str = "nm.yarn.io/nvlink-cluster-uuid";
/// The NVLink fabric's clique id (`nvidia-smi -q`'s Fabric CliqueId).
pub const NVLINK_CLIQUE_ATTRIBUTE: &str = "nm.yarn.io/nvlink-clique";

/// A container as the NM reports it, with its resource so that a recovering RM can account it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NmContainerReport {
    #[serde(flatten)]
    pub status: ContainerStatus,
    #[serde(default)]
    pub resource: ResourceInfo,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegisterNodeManagerResponse {
    pub node_action: NodeAction,
    /// The RM's cluster timestamp, YARN's `rmIdentifier`.
    pub rm_identifier: u64,
    /// YARN's `containerTokenMasterKey`: the key the NM checks container tokens with,
    /// wrapped with the cluster secret (absent when the node was refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_token_master_key: Option<MasterKey>,
    pub heartbeat_interval_ms: u64,
    #[serde(default)]
    pub diagnostics_message: String,
    #[serde(default)]
    pub rm_version: String,
    /// YARN's `areNodeLabelsAcceptedByRM`: false when the labels the NM reported were
    /// refused (unknown label, or centralized configuration); `diagnosticsMessage` says why.
    #[serde(
        default = "accepted",
        rename = "areNodeLabelsAcceptedByRM",
        alias = "areNodeLabelsAcceptedByRm"
    )]
    pub are_node_labels_accepted_by_rm: bool,
    /// YARN's `areNodeAttributesAcceptedByRM`.
    #[serde(
        default = "accepted",
        rename = "areNodeAttributesAcceptedByRM",
        alias = "areNodeAttributesAcceptedByRm"
    )]
    pub are_node_attributes_accepted_by_rm: bool,
}

fn accepted() -> bool {
    true
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeHeartbeatRequest {
    pub node_id: NodeId,
    pub response_id: i32,
    pub node_status: NodeStatus,
    /// The NM's labels when its provider's answer changed since the last report (absent:
    /// unchanged or not provided).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_labels: Option<Vec<String>>,
    /// The NM's `nm.yarn.io/` attributes when they changed since the last report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_attributes: Option<std::collections::BTreeMap<String, String>>,
    /// The NM's cached container images when they changed since the last report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_images: Option<Vec<NodeImageInfo>>,
    /// Spindle's extension: pulls that failed since the last report (prefetches, or a
    /// container's image).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_image_pull_failures: Vec<ImagePullFailureInfo>,
    /// YARN's `lastKnownContainerTokenMasterKey`: the id of the newest container-token
    /// master key the NM holds (`keyId` only; never the key). The RM sends its newest key in
    /// the answer when the ids differ (or this is absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_known_container_token_master_key: Option<MasterKey>,
}

/// YARN's `MasterKey`: a container-token master key and its id. Between daemons the key
/// travels wrapped with the cluster secret (`wrappedKey`, see
/// [`crate::cluster_secret::ClusterSecret::wrap_key`]); only when the RM has no cluster
/// secret (compatibility mode) does it go as plain hex in `bytes`, with `unwrapped: true`,
/// which an NM that has a secret refuses. In `lastKnownContainerTokenMasterKey` only `keyId`
/// is set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MasterKey {
    pub key_id: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wrapped_key: Option<WrappedKey>,
    /// The key in hex, compatibility mode only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<String>,
    /// True when `bytes` carries the key unwrapped (no cluster secret on the RM).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unwrapped: bool,
}

impl MasterKey {
    /// Just the id (`lastKnownContainerTokenMasterKey`).
    pub fn id_only(key_id: u32) -> Self {
        Self {
            key_id,
            wrapped_key: None,
            bytes: None,
            unwrapped: false,
        }
    }

    /// The key inside, as a receiver with `secret` (an NM's cluster secret, if it has one)
    /// may take it: wrapped only when it has a secret, unwrapped only when it has none.
    pub fn open(&self, secret: Option<&ClusterSecret>) -> Result<ContainerKey, MasterKeyError> {
        let bytes = match (secret, &self.wrapped_key, &self.bytes) {
            (Some(s), Some(w), _) => {
                if w.key_id != self.key_id {
                    return Err(MasterKeyError::IdMismatch {
                        key_id: self.key_id,
                        wrapped_id: w.key_id,
                    });
                }
                s.unwrap_key(w).map_err(MasterKeyError::Unwrap)?
            }
            (Some(_), None, _) => {
                return Err(MasterKeyError::Unwrapped {
                    key_id: self.key_id,
                })
            }
            (None, _, Some(hex_bytes)) if self.unwrapped => {
                hex::decode(hex_bytes.trim()).map_err(|_| MasterKeyError::Bytes {
                    key_id: self.key_id,
                    source: TokenError::BadSecret,
                })?
            }
            (None, Some(_), _) => {
                return Err(MasterKeyError::NoSecret {
                    key_id: self.key_id,
                })
            }
            (None, _, _) => {
                return Err(MasterKeyError::Empty {
                    key_id: self.key_id,
                })
            }
        };
        ContainerKey::from_bytes(self.key_id, bytes).map_err(|source| MasterKeyError::Bytes {
            key_id: self.key_id,
            source,
        })
    }
}

/// Why a [`MasterKey`] from the RM could not be taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MasterKeyError {
    #[error("the ResourceManager sent container-token master key {key_id} unwrapped (it has no cluster secret), but this node has one: refused; set spindle.cluster.secret-file on the ResourceManager too")]
    Unwrapped { key_id: u32 },
    #[error("the ResourceManager sent container-token master key {key_id} wrapped with a cluster secret, but this node has none: set spindle.cluster.secret-file")]
    NoSecret { key_id: u32 },
    #[error("container-token master key {key_id} carries no key")]
    Empty { key_id: u32 },
    #[error("container-token master key {key_id} is wrapped under key id {wrapped_id}")]
    IdMismatch { key_id: u32, wrapped_id: u32 },
    #[error("container-token master key: {0} (is spindle.cluster.secret-file the same file as the ResourceManager's?)")]
    Unwrap(NodeAuthError),
    #[error("container-token master key {key_id}: {source}")]
    Bytes { key_id: u32, source: TokenError },
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NodeStatus {
    pub healthy: bool,
    pub health_report: String,
    pub last_health_report_time: u64,
    /// Every container the NM knows, running or completed since the last heartbeat.
    pub containers_statuses: Vec<NmContainerReport>,
    pub node_utilization: Option<NodeUtilization>,
    /// Spindle's extension: the last sample of the GPUs each running container holds (the
    /// NM's `utilization-interval-ms`); absent from NMs that do not sample.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub containers_gpu_utilization: Vec<ContainerGpuUtilization>,
}

/// The GPUs one container holds, as the NM last sampled them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerGpuUtilization {
    pub container_id: ContainerId,
    pub gpus: Vec<GpuUtilization>,
}

/// One GPU's sample (`nvidia-smi --query-gpu=index,uuid,utilization.gpu,memory.used,
/// temperature.gpu`, or NVML).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuUtilization {
    /// The GPU's index on the node (`CUDA_VISIBLE_DEVICES`).
    pub index: u32,
    pub minor_number: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// `utilization.gpu`: percent of the sample period a kernel ran, 0..=100.
    pub utilization_percent: f64,
    #[serde(
        default,
        rename = "memoryUsedMiB",
        skip_serializing_if = "Option::is_none"
    )]
    pub memory_used_mib: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_c: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NodeUtilization {
    #[serde(rename = "physicalMemoryMB")]
    pub physical_memory_mb: i64,
    #[serde(rename = "virtualMemoryMB")]
    pub virtual_memory_mb: i64,
    pub cpu: f32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeHeartbeatResponse {
    pub response_id: i32,
    pub node_action: NodeAction,
    #[serde(default)]
    pub containers_to_cleanup: Vec<ContainerId>,
    #[serde(default)]
    pub applications_to_cleanup: Vec<ApplicationId>,
    /// Completed containers the RM has recorded; the NM may forget them.
    #[serde(default)]
    pub containers_to_be_removed_from_nm: Vec<ContainerId>,
    pub next_heartbeat_interval_ms: u64,
    #[serde(default)]
    pub diagnostics_message: String,
    /// YARN's `containerTokenMasterKey`: the RM's newest container-token master key, sent
    /// when the request's `lastKnownContainerTokenMasterKey` names another (after a roll).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_token_master_key: Option<MasterKey>,
    /// See [`RegisterNodeManagerResponse::are_node_labels_accepted_by_rm`].
    #[serde(
        default = "accepted",
        rename = "areNodeLabelsAcceptedByRM",
        alias = "areNodeLabelsAcceptedByRm"
    )]
    pub are_node_labels_accepted_by_rm: bool,
    #[serde(
        default = "accepted",
        rename = "areNodeAttributesAcceptedByRM",
        alias = "areNodeAttributesAcceptedByRm"
    )]
    pub are_node_attributes_accepted_by_rm: bool,
    /// Spindle's extension: images to pull ahead of jobs (`spindle image -prefetch`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images_to_prefetch: Vec<String>,
}

/// `POST /ws/v1/node-tracker/unregister`: a NodeManager stopping for good (YARN's
/// `unRegisterNodeManager`); the node turns SHUTDOWN and its containers end.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnRegisterNodeManagerRequest {
    pub node_id: NodeId,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(b: u8) -> ClusterSecret {
        ClusterSecret::from_bytes(&[b; 32]).unwrap()
    }

    fn wrapped(s: &ClusterSecret, k: &ContainerKey) -> MasterKey {
        MasterKey {
            key_id: k.id(),
            wrapped_key: Some(s.wrap_key(k.id(), k.bytes(), [4; 16])),
            bytes: None,
            unwrapped: false,
        }
    }

    fn plain(k: &ContainerKey) -> MasterKey {
        MasterKey {
            key_id: k.id(),
            wrapped_key: None,
            bytes: Some(hex::encode(k.bytes())),
            unwrapped: true,
        }
    }

    #[test]
    fn a_master_key_opens_only_as_its_sender_meant() {
        let k = ContainerKey::generate(12).unwrap();
        let s = secret(1);
        assert_eq!(wrapped(&s, &k).open(Some(&s)).unwrap(), k);
        assert_eq!(plain(&k).open(None).unwrap(), k);
        // A node with a secret refuses an unwrapped key; one without cannot open a wrapped one.
        assert_eq!(
            plain(&k).open(Some(&s)),
            Err(MasterKeyError::Unwrapped { key_id: 12 })
        );
        assert_eq!(
            wrapped(&s, &k).open(None),
            Err(MasterKeyError::NoSecret { key_id: 12 })
        );
        // Another cluster's secret, a relabelled id, an empty or short key.
        assert!(matches!(
            wrapped(&s, &k).open(Some(&secret(2))),
            Err(MasterKeyError::Unwrap(_))
        ));
        let mut relabelled = wrapped(&s, &k);
        relabelled.key_id = 13;
        assert_eq!(
            relabelled.open(Some(&s)),
            Err(MasterKeyError::IdMismatch {
                key_id: 13,
                wrapped_id: 12
            })
        );
        assert_eq!(
            MasterKey::id_only(12).open(None),
            Err(MasterKeyError::Empty { key_id: 12 })
        );
        let mut short = plain(&k);
        short.bytes = Some("abcd".into());
        assert!(matches!(
            short.open(None),
            Err(MasterKeyError::Bytes { key_id: 12, .. })
        ));
        // The id-only form is what a heartbeat sends back: no key material.
        let v = serde_json::to_value(MasterKey::id_only(12)).unwrap();
        assert_eq!(v, serde_json::json!({"keyId": 12}));
    }
}
