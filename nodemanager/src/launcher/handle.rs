//! [`ExecHandle`]: how an executor names a container's started process.
//!
//! The container lifecycle keeps it, hands it back to signal the process or to re-attach to
//! it after an NM restart, and persists it in the recovery store; it never looks inside. Only
//! the executor that made a handle (and its tests) reads what it holds.

use std::fmt;

use serde::{Deserialize, Serialize};

/// An executor's name for a container's started process: opaque to the container lifecycle,
/// serialisable so that the recovery store can keep it across an NM restart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ExecHandle(Repr);

/// One variant per executor. Stored as `{"processGroup": {"pid": .., "startTicks": ..}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
enum Repr {
    /// A process group of [`super::ProcessExecutor`]: its leader's pid (the pgid) and the
    /// leader's start time in clock ticks since boot, to tell it from a reused pid.
    #[serde(rename_all = "camelCase")]
    ProcessGroup {
        pid: i32,
        #[serde(default)]
        start_ticks: Option<u64>,
    },
    /// A container of the OCI executor (`crate::oci`): its leader is the runtime (`crun
    /// run`), a process group as above; `runtime_id` is the container's name in the runtime.
    #[serde(rename_all = "camelCase")]
    OciContainer {
        pid: i32,
        #[serde(default)]
        start_ticks: Option<u64>,
        runtime_id: String,
    },
}

impl ExecHandle {
    /// A process group led by `pid`, started at `start_ticks` (None: not known).
    pub fn process_group(pid: i32, start_ticks: Option<u64>) -> Self {
        Self(Repr::ProcessGroup { pid, start_ticks })
    }

    /// An OCI container whose leader (the runtime) is `pid`, named `runtime_id` in the runtime.
    pub fn oci_container(pid: i32, start_ticks: Option<u64>, runtime_id: String) -> Self {
        Self(Repr::OciContainer {
            pid,
            start_ticks,
            runtime_id,
        })
    }

    /// The leader's pid and start time of a process-group handle (an OCI container's leader
    /// is one too): for the executors and their tests only, never for the container lifecycle.
    pub fn as_process_group(&self) -> Option<(i32, Option<u64>)> {
        match self.0 {
            Repr::ProcessGroup { pid, start_ticks }
            | Repr::OciContainer {
                pid, start_ticks, ..
            } => Some((pid, start_ticks)),
        }
    }

    /// The runtime's name of an OCI container; None for a plain process group.
    pub fn oci_runtime_id(&self) -> Option<&str> {
        match &self.0 {
            Repr::OciContainer { runtime_id, .. } => Some(runtime_id),
            Repr::ProcessGroup { .. } => None,
        }
    }
}

impl fmt::Display for ExecHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::ProcessGroup { pid, .. } => write!(f, "process group {pid}"),
            Repr::OciContainer {
                pid, runtime_id, ..
            } => write!(
                f,
                "OCI container {runtime_id} (runtime process group {pid})"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_group_round_trips_in_its_stored_form() {
        let h = ExecHandle::process_group(42, Some(7));
        let v = serde_json::to_value(&h).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"processGroup": {"pid": 42, "startTicks": 7}})
        );
        assert_eq!(serde_json::from_value::<ExecHandle>(v).unwrap(), h);
        assert_eq!(h.to_string(), "process group 42");
        assert_eq!(h.as_process_group(), Some((42, Some(7))));
        assert_eq!(h.oci_runtime_id(), None);
    }

    #[test]
    fn an_oci_container_round_trips_in_its_stored_form() {
        let h = ExecHandle::oci_container(42, Some(7), "container_1_0001_01_000002".into());
        let v = serde_json::to_value(&h).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"ociContainer": {"pid": 42, "startTicks": 7, "runtimeId": "container_1_0001_01_000002"}})
        );
        assert_eq!(serde_json::from_value::<ExecHandle>(v).unwrap(), h);
        assert_eq!(h.as_process_group(), Some((42, Some(7))));
        assert_eq!(h.oci_runtime_id(), Some("container_1_0001_01_000002"));
    }
}
