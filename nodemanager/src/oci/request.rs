//! The node's side of a runtime request: the launch environment is read by
//! [`spindle_common::runtime_request`] (shared with the client and the AMs), and the node's
//! answer ([`crate::oci::RuntimePolicy::admit`]) is an [`OciRequest`] to run, or a
//! [`RuntimeRefusal`] naming why not.

use std::path::PathBuf;

use spindle_common::runtime_request::RuntimeRequestError;
pub use spindle_common::runtime_request::{
    parse_mounts, BindMount, MountMode, RuntimeKind, RuntimeRequest,
};

/// An OCI container the node agreed to run: what the OCI executor needs besides the
/// [`crate::launcher::LaunchSpec`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciRequest {
    pub kind: RuntimeKind,
    pub image: String,
    /// The node's default mounts, then the AM's, sources resolved (no links left).
    pub mounts: Vec<BindMount>,
    pub privileged: bool,
}

/// Why a runtime request is refused. The container fails at launch with this as its
/// diagnostic (YARN's shape for an invalid Docker request).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeRefusal {
    /// The environment itself is wrong (no image, a bad mount entry, ...).
    #[error(transparent)]
    Request(#[from] RuntimeRequestError),
    #[error("container runtime '{runtime}' is not allowed on this node (yarn.nodemanager.runtime.linux.allowed-runtimes = {allowed})")]
    NotAllowed {
        runtime: RuntimeKind,
        allowed: String,
    },
    #[error("mount source {path} ({mode}) is not under the node's allowed {mode} mounts ({list})")]
    MountNotAllowed {
        path: PathBuf,
        mode: MountMode,
        list: &'static str,
    },
    #[error("cannot resolve mount source {path}: {reason}")]
    MountSource { path: PathBuf, reason: String },
    #[error("privileged containers are not allowed on this node (yarn.nodemanager.runtime.linux.runc.privileged-containers.allowed = false)")]
    PrivilegedNotAllowed,
    #[error("no OCI runtime binary on this node: {0}")]
    NoRuntimeBinary(String),
}

impl RuntimeRefusal {
    /// The exit code of a container refused at launch: YARN's container-executor code for a
    /// launch it could not carry out (`UNABLE_TO_EXECUTE_CONTAINER_SCRIPT`, 7).
    pub const EXIT_CODE: i32 = 7;
}
