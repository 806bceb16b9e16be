//! The NM's recovery store: the containers it is responsible for, so that a restarted NM can
//! re-adopt still-running process groups and report the ones that ended while it was down.
//!
//! Format: one JSON file, `<yarn.nodemanager.recovery.dir>/nm-containers.json`, rewritten
//! whole on every change (temp file, fsync, rename). Version 2 keeps a container's process as
//! its executor named it (`"process": {"processGroup": {"pid": .., "startTicks": ..}}`, an
//! [`ExecHandle`]); a version 1 file (`pid` and `startTicks` beside the other fields) is read
//! and migrated, and the next write is version 2. A node holds tens of containers, so a
//! whole-file rewrite is cheap, atomic without a schema, and readable by an operator; SQLite
//! would buy nothing at this size. These records are the store's on-disk wire format, which
//! is why they derive serde here rather than in `common::records`.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use spindle_common::ids::ContainerId;
use spindle_common::token::ContainerTokenIdentifier;

use crate::launcher::ExecHandle;

pub const STORE_FILE: &str = "nm-containers.json";
const VERSION: u32 = 2;
/// The version before processes were stored as executor handles.
const VERSION_PID: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("recovery store {path}: cannot {what}: {source}")]
    Io {
        path: PathBuf,
        what: &'static str,
        source: std::io::Error,
    },
    #[error(
        "recovery store {path} is corrupt: {message} (move it aside to start without recovery)"
    )]
    Corrupt { path: PathBuf, message: String },
}

/// One container as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecord {
    pub container_id: ContainerId,
    pub user: String,
    /// The verified token identifier: resource, submitter, node, expiry.
    pub token: ContainerTokenIdentifier,
    /// The container's process as its executor names it; None while localizing.
    #[serde(default)]
    pub process: Option<ExecHandle>,
    pub start_time_ms: u64,
    pub work_dir: PathBuf,
    pub log_dirs: Vec<PathBuf>,
    /// A stop that was in progress (`APP_MASTER`, `RESOURCE_MANAGER`, `NODE_SHUTDOWN`,
    /// `HOLD_EXPIRED`).
    #[serde(default)]
    pub stop: Option<String>,
    /// Set once complete, until the RM acknowledges it.
    #[serde(default)]
    pub completed: Option<CompletedRecord>,
    /// Devices the container holds, by resource type (`yarn.io/gpu`), as device minor
    /// numbers: a restarted NM gives them back to the re-adopted container and to no other.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub devices: BTreeMap<String, Vec<u32>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompletedRecord {
    /// The NM detailed state it ended in.
    pub state: String,
    /// YARN's `-1000` for a container that never had an exit status.
    pub exit_status: i32,
    pub diagnostics: String,
    pub finish_time_ms: u64,
}

#[derive(Debug, Serialize, Deserialize)]
struct StoreFile<C> {
    version: u32,
    containers: Vec<C>,
}

/// Reads a version 1 record into version 2: its `pid` and `startTicks` become a
/// process-group handle.
fn migrate_pid_record(mut r: serde_json::Value) -> Result<ContainerRecord, serde_json::Error> {
    if let Some(o) = r.as_object_mut() {
        let pid = o.remove("pid").and_then(|v| v.as_i64());
        let ticks = o.remove("startTicks").and_then(|v| v.as_u64());
        if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
            let handle = ExecHandle::process_group(pid, ticks);
            o.insert("process".into(), serde_json::to_value(handle)?);
        }
    }
    serde_json::from_value(r)
}

#[derive(Debug)]
pub struct Store {
    path: PathBuf,
}

impl Store {
    /// Opens (creating the directory) and returns what the previous NM left.
    pub fn open(dir: &Path) -> Result<(Self, Vec<ContainerRecord>), StoreError> {
        let path = dir.join(STORE_FILE);
        fs::create_dir_all(dir).map_err(|source| StoreError::Io {
            path: dir.to_path_buf(),
            what: "create the directory",
            source,
        })?;
        let records = match fs::read(&path) {
            Ok(bytes) => {
                let corrupt = |e: serde_json::Error| StoreError::Corrupt {
                    path: path.clone(),
                    message: e.to_string(),
                };
                let f: StoreFile<serde_json::Value> =
                    serde_json::from_slice(&bytes).map_err(corrupt)?;
                match f.version {
                    VERSION => f
                        .containers
                        .into_iter()
                        .map(serde_json::from_value)
                        .collect::<Result<_, _>>()
                        .map_err(corrupt)?,
                    VERSION_PID => f
                        .containers
                        .into_iter()
                        .map(migrate_pid_record)
                        .collect::<Result<_, _>>()
                        .map_err(corrupt)?,
                    v => {
                        return Err(StoreError::Corrupt {
                            path,
                            message: format!(
                                "version {v} (this NM reads {VERSION_PID} and {VERSION})"
                            ),
                        })
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(source) => {
                return Err(StoreError::Io {
                    path,
                    what: "read",
                    source,
                })
            }
        };
        Ok((Self { path }, records))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Replaces the stored set atomically.
    pub fn save(&self, records: &[ContainerRecord]) -> Result<(), StoreError> {
        let io = |what: &'static str| {
            let path = self.path.clone();
            move |source| StoreError::Io { path, what, source }
        };
        let body = serde_json::to_vec_pretty(&StoreFile {
            version: VERSION,
            containers: records.to_vec(),
        })
        .map_err(|e| StoreError::Corrupt {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        let tmp = self.path.with_extension("json.tmp");
        let mut f = fs::File::create(&tmp).map_err(io("create the temporary file"))?;
        f.write_all(&body).map_err(io("write"))?;
        f.sync_all().map_err(io("sync"))?;
        fs::rename(&tmp, &self.path).map_err(io("rename the temporary file"))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spindle_common::ids::{ApplicationAttemptId, ApplicationId, NodeId};
    use spindle_common::records::resource::ResourceInfo;

    fn record(seq: u64) -> ContainerRecord {
        let id = ContainerId::new(
            ApplicationAttemptId::new(ApplicationId::new(5, 1), 1),
            0,
            seq,
        );
        ContainerRecord {
            container_id: id,
            user: "bob".into(),
            token: ContainerTokenIdentifier {
                container_id: id,
                node_id: NodeId::new("h", 1),
                app_submitter: "bob".into(),
                resource: ResourceInfo::default(),
                expiry_time_ms: 9,
                rm_identifier: 5,
                is_am: false,
                version: 0,
                master_key_id: 0,
            },
            process: Some(ExecHandle::process_group(42, Some(7))),
            start_time_ms: 1,
            work_dir: "/w".into(),
            log_dirs: vec!["/l".into()],
            stop: None,
            completed: None,
            devices: [("yarn.io/gpu".to_string(), vec![0, 3])].into(),
        }
    }

    #[test]
    fn round_trips_and_replaces() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("rec");
        let (s, none) = Store::open(&dir).unwrap();
        assert!(none.is_empty());
        s.save(&[record(1), record(2)]).unwrap();
        let (s, two) = Store::open(&dir).unwrap();
        assert_eq!(two, vec![record(1), record(2)]);
        s.save(&[record(3)]).unwrap();
        assert_eq!(Store::open(&dir).unwrap().1, vec![record(3)]);
    }

    #[test]
    fn records_without_devices_still_load() {
        // A store written before device plugins existed.
        let d = tempfile::tempdir().unwrap();
        let mut r = serde_json::to_value(record(1)).unwrap();
        r.as_object_mut().unwrap().remove("devices");
        let file = serde_json::json!({"version": VERSION, "containers": [r]});
        fs::write(d.path().join(STORE_FILE), file.to_string()).unwrap();
        let (_, got) = Store::open(d.path()).unwrap();
        assert!(got[0].devices.is_empty());
    }

    #[test]
    fn a_version_1_store_is_migrated() {
        // A store written when records kept the process group's pid and start ticks.
        let d = tempfile::tempdir().unwrap();
        let mut running = serde_json::to_value(record(1)).unwrap();
        let o = running.as_object_mut().unwrap();
        o.remove("process");
        o.insert("pid".into(), 42.into());
        o.insert("startTicks".into(), 7.into());
        let mut localizing = serde_json::to_value(record(2)).unwrap();
        let o = localizing.as_object_mut().unwrap();
        o.remove("process");
        o.insert("pid".into(), serde_json::Value::Null);
        o.insert("startTicks".into(), serde_json::Value::Null);
        let file = serde_json::json!({"version": 1, "containers": [running, localizing]});
        fs::write(d.path().join(STORE_FILE), file.to_string()).unwrap();
        let (s, got) = Store::open(d.path()).unwrap();
        let mut want = record(2);
        want.process = None;
        assert_eq!(got, vec![record(1), want]);
        s.save(&got).unwrap();
        let v: serde_json::Value =
            serde_json::from_slice(&fs::read(d.path().join(STORE_FILE)).unwrap()).unwrap();
        assert_eq!(v["version"], VERSION);
        assert_eq!(v["containers"][0]["process"]["processGroup"]["pid"], 42);
        assert!(v["containers"][0].get("pid").is_none());
    }

    #[test]
    fn unknown_versions_are_refused() {
        let d = tempfile::tempdir().unwrap();
        fs::write(
            d.path().join(STORE_FILE),
            r#"{"version": 9, "containers": []}"#,
        )
        .unwrap();
        let e = Store::open(d.path()).unwrap_err().to_string();
        assert!(e.contains("version 9"), "{e}");
    }

    #[test]
    fn corrupt_files_are_refused_by_name() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join(STORE_FILE), "{not json").unwrap();
        let e = Store::open(d.path()).unwrap_err().to_string();
        assert!(e.contains(STORE_FILE) && e.contains("corrupt"), "{e}");
    }
}
