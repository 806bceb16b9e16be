//! GPUs from a CDI specification (Container Device Interface, `cdiVersion` 0.x JSON in
//! `/etc/cdi` or `/var/run/cdi`, as `nvidia-ctk cdi generate --format=json` writes): for the
//! devices a container was granted, Spindle applies the specification's `containerEdits`
//! itself (`deviceNodes`, `mounts`, `env`, `additionalGids`), the device's own and the
//! specification's common ones. **Hooks are never run** (the `LD_PRELOAD` lesson of
//! CVE-2025-23266 and the link-following of CVE-2025-23267): they are logged as skipped.
//!
//! A CDI device is matched to a granted GPU by its device node's numbers (`major:minor`,
//! given in the spec or read from the node on the host), not by its name, so `0`, `gpu0`
//! or a UUID all work. YAML specifications are not read (logged as skipped): generate JSON.
//! The specification is the node administrator's file; a bad one is logged and ignored,
//! never a panic.

use std::os::unix::fs::FileTypeExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use tracing::warn;

use super::spec::{Device, Mount};
use crate::isolation::DeviceNumber;

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpecFile {
    #[allow(dead_code)]
    cdi_version: String,
    kind: String,
    #[serde(default)]
    devices: Vec<SpecDevice>,
    #[serde(default)]
    container_edits: Edits,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpecDevice {
    name: String,
    #[serde(default)]
    container_edits: Edits,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Edits {
    #[serde(default)]
    env: Vec<String>,
    #[serde(default)]
    device_nodes: Vec<DeviceNode>,
    #[serde(default)]
    mounts: Vec<CdiMount>,
    #[serde(default)]
    hooks: Vec<serde_json::Value>,
    #[serde(default)]
    additional_gids: Vec<u32>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DeviceNode {
    path: String,
    host_path: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    major: Option<i64>,
    minor: Option<i64>,
    file_mode: Option<u32>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CdiMount {
    host_path: String,
    container_path: String,
    #[serde(default)]
    options: Vec<String>,
}

/// What the CDI specifications add to a container for its granted devices.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CdiEdits {
    pub devices: Vec<Device>,
    pub mounts: Vec<Mount>,
    pub env: Vec<(String, String)>,
    pub additional_gids: Vec<u32>,
    /// `kind=name` of each CDI device applied.
    pub applied: Vec<String>,
}

impl DeviceNode {
    /// The node's type and numbers: from the spec, else from the node on the host.
    fn numbers(&self) -> Option<(String, i64, i64)> {
        if let (Some(maj), Some(min)) = (self.major, self.minor) {
            return Some((self.kind.clone().unwrap_or_else(|| "c".into()), maj, min));
        }
        let host = self.host_path.as_deref().unwrap_or(&self.path);
        let m = std::fs::metadata(host).ok()?;
        let ft = m.file_type();
        let kind = if ft.is_char_device() {
            "c"
        } else if ft.is_block_device() {
            "b"
        } else {
            return None;
        };
        let rdev = m.rdev();
        Some((
            kind.into(),
            nix::sys::stat::major(rdev) as i64,
            nix::sys::stat::minor(rdev) as i64,
        ))
    }

    fn device(&self) -> Option<Device> {
        let (kind, major, minor) = self.numbers()?;
        Some(Device {
            path: self.path.clone(),
            kind,
            major,
            minor,
            file_mode: self.file_mode.unwrap_or(0o666),
            uid: 0,
            gid: 0,
        })
    }
}

fn read_specs(dirs: &[PathBuf]) -> Vec<(PathBuf, SpecFile)> {
    let mut files: Vec<PathBuf> = dirs
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flat_map(|rd| rd.flatten().map(|e| e.path()))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let is_file = std::fs::symlink_metadata(&f).is_ok_and(|m| m.is_file());
        match f.extension().and_then(|e| e.to_str()) {
            Some("json") if is_file => {}
            Some("yaml" | "yml") => {
                warn!(file = %f.display(), "CDI specification skipped: only JSON is read (nvidia-ctk cdi generate --format=json)");
                continue;
            }
            _ => continue,
        }
        let parsed = std::fs::read(&f)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice::<SpecFile>(&b).map_err(|e| e.to_string()));
        match parsed {
            Ok(s) => out.push((f, s)),
            Err(e) => warn!(file = %f.display(), error = %e, "CDI specification ignored"),
        }
    }
    out
}

/// The edits of the CDI devices whose nodes are `granted` (none found: empty, and the
/// caller falls back to what discovery found).
pub fn edits_for(dirs: &[PathBuf], granted: &[DeviceNumber]) -> CdiEdits {
    let mut out = CdiEdits::default();
    if granted.is_empty() {
        return out;
    }
    for (file, spec) in read_specs(dirs) {
        let mut any = false;
        for d in &spec.devices {
            let matches = d.container_edits.device_nodes.iter().any(|n| {
                n.numbers().is_some_and(|(k, maj, min)| {
                    granted.iter().any(|g| {
                        k.starts_with(g.kind)
                            && maj == i64::from(g.major)
                            && min == i64::from(g.minor)
                    })
                })
            });
            if matches {
                any = true;
                apply(&mut out, &d.container_edits, &file);
                out.applied.push(format!("{}={}", spec.kind, d.name));
            }
        }
        if any {
            apply(&mut out, &spec.container_edits, &file);
        }
    }
    out
}

fn apply(out: &mut CdiEdits, e: &Edits, file: &Path) {
    for n in &e.device_nodes {
        match n.device() {
            Some(d) if !out.devices.contains(&d) => out.devices.push(d),
            Some(_) => {}
            None => {
                warn!(file = %file.display(), path = %n.path, "CDI device node skipped: no device numbers")
            }
        }
    }
    for m in &e.mounts {
        if !(m.host_path.starts_with('/') && m.container_path.starts_with('/')) {
            warn!(file = %file.display(), "CDI mount skipped: paths must be absolute");
            continue;
        }
        let read_only = !m.options.iter().any(|o| o == "rw");
        let mount = Mount::bind(&m.host_path, &m.container_path, read_only);
        if !out.mounts.contains(&mount) {
            out.mounts.push(mount);
        }
    }
    for kv in &e.env {
        if let Some((k, v)) = kv.split_once('=') {
            out.env.push((k.to_string(), v.to_string()));
        }
    }
    out.additional_gids.extend(&e.additional_gids);
    if !e.hooks.is_empty() {
        warn!(file = %file.display(), hooks = e.hooks.len(), "CDI hooks are not run by Spindle (the device nodes, mounts and environment are applied)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn applies_the_edits_of_the_granted_devices_only() {
        let d = tempfile::tempdir().unwrap();
        let spec = serde_json::json!({
            "cdiVersion": "0.6.0",
            "kind": "nvidia.com/gpu",
            "devices": [
                {"name": "0", "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0}]}},
                {"name": "1", "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia1", "type": "c", "major": 195, "minor": 1}], "env": ["GPU_ONE=yes"]}}
            ],
            "containerEdits": {
                "deviceNodes": [{"path": "/dev/nvidiactl", "major": 195, "minor": 255}],
                "mounts": [{"hostPath": "/usr/lib/libcuda.so.1", "containerPath": "/usr/lib/libcuda.so.1", "options": ["ro", "nosuid"]}],
                "hooks": [{"hookName": "createContainer", "path": "/usr/bin/nvidia-cdi-hook"}]
            }
        });
        std::fs::write(d.path().join("nvidia.json"), spec.to_string()).unwrap();
        std::fs::write(d.path().join("broken.json"), "{").unwrap();
        std::fs::write(d.path().join("other.yaml"), "cdiVersion: 0.6.0").unwrap();
        let e = edits_for(&[d.path().to_path_buf()], &[DeviceNumber::char(195, 1)]);
        let paths: Vec<&str> = e.devices.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, ["/dev/nvidia1", "/dev/nvidiactl"]);
        assert_eq!(e.env, vec![("GPU_ONE".to_string(), "yes".to_string())]);
        assert_eq!(e.mounts.len(), 1);
        assert!(e.mounts[0].options.contains(&"ro".to_string()));
        assert_eq!(e.applied, ["nvidia.com/gpu=1"]);
        assert_eq!(
            edits_for(&[d.path().to_path_buf()], &[]),
            CdiEdits::default()
        );
        let none = edits_for(&[d.path().to_path_buf()], &[DeviceNumber::char(195, 7)]);
        assert!(none.devices.is_empty());
    }
}
