//! [`OciExecutor`]: the node's executor when it may run images. A container whose launch
//! environment asks for no runtime goes to the process executor unchanged; one asking for
//! `runc`/`docker` gets a bundle and a leader that runs the OCI runtime (see the module above).

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use spindle_common::ids::ContainerId;
use tracing::{info, warn};

use super::bundle::{self, BundleInput};
use super::{ImagePin, ImageSource, OciError, RuntimePolicy, RuntimeRequest};
use crate::containers::ProcessExit;
use crate::isolation::IsolationSpec;
use crate::launcher::{
    signal_group, Adoptee, ContainerExecutor, ExecHandle, LaunchError, LaunchSpec, Leader,
    PrivateMounts, ProcessExecutor, Reattached, StartedProcess, StopSignal,
};

/// The file in a bundle naming its image's manifest digest.
const IMAGE_DIGEST_FILE: &str = "image-digest";

/// A prepared OCI container, between `prepare` and `start`.
struct Prepared {
    /// `<container id>.<ms>`: a re-initialized container gets a new bundle and runtime name,
    /// so the old one's clean-up never touches the new one.
    runtime_id: String,
    mounts: PrivateMounts,
    pin: Option<ImagePin>,
}

/// Runs process containers through a [`ProcessExecutor`] and image containers through the
/// OCI runtime, whose leader the same process executor forks and watches.
pub struct OciExecutor {
    process: ProcessExecutor,
    policy: Arc<RuntimePolicy>,
    images: Arc<dyn ImageSource>,
    /// `<first local dir>/nmPrivate/oci`: `bundles/<id>` and the runtime's `state`.
    root: PathBuf,
    hostname: String,
    prepared: Mutex<HashMap<ContainerId, Prepared>>,
}

impl OciExecutor {
    pub fn new(
        process: ProcessExecutor,
        policy: RuntimePolicy,
        images: Arc<dyn ImageSource>,
        first_local_dir: &Path,
    ) -> Self {
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "localhost".into());
        Self {
            process,
            policy: Arc::new(policy),
            images,
            root: first_local_dir.join("nmPrivate").join("oci"),
            hostname,
            prepared: Mutex::new(HashMap::new()),
        }
    }

    pub fn process(&self) -> &ProcessExecutor {
        &self.process
    }

    /// The runtime name (and bundle) of `id`'s latest start, if it has one on disk.
    pub fn runtime_id_of(&self, id: &ContainerId) -> Option<String> {
        let prefix = format!("{id}.");
        std::fs::read_dir(self.root.join("bundles"))
            .ok()?
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.starts_with(&prefix))
            .max()
    }

    /// Where the bundle of the container the runtime names `runtime_id` is.
    pub fn bundle_dir(&self, runtime_id: &str) -> PathBuf {
        self.root.join("bundles").join(runtime_id)
    }

    fn state_dir(&self) -> PathBuf {
        self.root.join("state")
    }

    fn binary(&self) -> Result<&Path, OciError> {
        self.policy
            .binary
            .as_deref()
            .map_err(|e| OciError::Refused(super::RuntimeRefusal::NoRuntimeBinary(e.clone())))
    }

    fn prepared(&self) -> std::sync::MutexGuard<'_, HashMap<ContainerId, Prepared>> {
        self.prepared
            .lock()
            .expect("the prepared-bundles lock is never poisoned")
    }

    fn prepare_oci(&self, spec: &LaunchSpec) -> Result<(), LaunchError> {
        let request = RuntimeRequest::from_env(&spec.env)
            .map_err(super::RuntimeRefusal::from)
            .and_then(|r| self.policy.admit(r))
            .map_err(OciError::from)?;
        self.process.prepare(spec)?;
        let Some(request) = request else {
            return Ok(());
        };
        // A pull's progress goes to the container's stderr log (`spindle logs -follow`).
        let log = spec
            .stderr_path()
            .and_then(|p| crate::launcher::open_log(&p).ok())
            .map(std::sync::Mutex::new);
        let say = |line: &str| {
            if let Some(f) = &log {
                use std::io::Write;
                let mut f = f.lock().unwrap_or_else(|e| e.into_inner());
                let _ = writeln!(f, "spindle: {line}");
            }
        };
        let rootfs = self
            .images
            .rootfs(&request.image, &spec.container_id, &say)
            .map_err(|source| OciError::Image {
                image: request.image.clone(),
                source,
            })?;
        let runtime_id = format!("{}.{}", spec.container_id, spindle_common::time::now_ms());
        let dir = self.bundle_dir(&runtime_id);
        let input = BundleInput {
            spec,
            request: &request,
            rootfs: &rootfs,
            cdi_dirs: &self.policy.cdi_dirs,
            hostname: self.hostname.clone(),
        };
        let mounts = match bundle::write(&dir, &input) {
            Ok(m) => m,
            Err(e) => {
                remove_bundle(&dir);
                return Err(e.into());
            }
        };
        if let Some(d) = &rootfs.digest {
            // Read back by `reattach` after an NM restart, to pin the image again.
            let _ = std::fs::write(dir.join(IMAGE_DIGEST_FILE), d);
        }
        info!(image = %request.image, layers = rootfs.layers.len(), bundle = %dir.display(), "OCI bundle written");
        self.prepared().insert(
            spec.container_id,
            Prepared {
                runtime_id,
                mounts,
                pin: rootfs.pin,
            },
        );
        Ok(())
    }

    fn start_oci(
        &self,
        spec: &LaunchSpec,
        prepared: Prepared,
        hold: bool,
    ) -> Result<StartedProcess, LaunchError> {
        let binary = self.binary()?.to_path_buf();
        let runtime_id = prepared.runtime_id;
        let dir = self.bundle_dir(&runtime_id);
        let state = self.state_dir();
        let argv: Vec<&OsStr> = vec![
            binary.as_os_str(),
            OsStr::new("--root"),
            state.as_os_str(),
            OsStr::new("--cgroup-manager=disabled"),
            OsStr::new("run"),
            OsStr::new("--bundle"),
            dir.as_os_str(),
            OsStr::new(&runtime_id),
        ];
        let env = BTreeMap::from([(
            "PATH".to_string(),
            std::env::var("PATH").unwrap_or_else(|_| "/usr/sbin:/usr/bin:/sbin:/bin".into()),
        )]);
        let started = self.process.start_leader(
            spec,
            &Leader {
                program: &binary,
                argv: &argv,
                env: &env,
                dir: &dir,
                run_as: None,
                mounts: Some(&prepared.mounts),
            },
            hold,
        );
        let p = match started {
            Ok(p) => p,
            Err(e) => {
                self.cleanup(&runtime_id);
                return Err(e);
            }
        };
        let (pid, ticks) = p
            .handle
            .as_process_group()
            .expect("the process executor's handle names a process group");
        let handle = ExecHandle::oci_container(pid, ticks, runtime_id.clone());
        let cleaner = self.cleaner();
        let pin = prepared.pin;
        let exit = Box::pin(async move {
            let exit = p.exit.await;
            let _ = tokio::task::spawn_blocking(move || cleaner.cleanup(&runtime_id)).await;
            drop(pin);
            exit
        });
        Ok(StartedProcess {
            handle,
            exit,
            gate: p.gate,
        })
    }

    fn cleaner(&self) -> Cleaner {
        Cleaner {
            binary: self.policy.binary.clone().ok(),
            state: self.state_dir(),
            bundles: self.root.join("bundles"),
        }
    }

    /// Deletes the runtime's state of a container and removes its bundle. Blocking.
    pub fn cleanup(&self, runtime_id: &str) {
        self.cleaner().cleanup(runtime_id);
    }

    /// The host pid of the container's PID 1, from the runtime's state, if it is still the
    /// leader's child (not a reused pid).
    fn container_init(&self, runtime_id: &str, leader: i32) -> Option<i32> {
        let status = self.state_dir().join(runtime_id).join("status");
        let text = std::fs::read_to_string(status).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        let pid = i32::try_from(v.get("pid")?.as_i64()?).ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let ppid: i32 = stat[stat.rfind(')')? + 1..]
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()?;
        (pid > 1 && ppid == leader).then_some(pid)
    }
}

/// What cleaning up after a container needs, movable into a blocking task.
#[derive(Debug, Clone)]
struct Cleaner {
    binary: Option<PathBuf>,
    state: PathBuf,
    bundles: PathBuf,
}

impl Cleaner {
    fn cleanup(&self, runtime_id: &str) {
        if runtime_id.is_empty() || runtime_id.contains('/') || runtime_id.starts_with('.') {
            return;
        }
        if self.state.join(runtime_id).exists() {
            if let Some(bin) = &self.binary {
                match std::process::Command::new(bin)
                    .arg("--root")
                    .arg(&self.state)
                    .args(["delete", "-f", runtime_id])
                    .stdin(std::process::Stdio::null())
                    .output()
                {
                    Ok(o) if o.status.success() => {}
                    Ok(o) => {
                        warn!(runtime_id, stderr = %String::from_utf8_lossy(&o.stderr).trim(), "the OCI runtime could not delete a container")
                    }
                    Err(e) => {
                        warn!(runtime_id, error = %e, "cannot run the OCI runtime to delete a container")
                    }
                }
            }
        }
        remove_bundle(&self.bundles.join(runtime_id));
    }
}

fn remove_bundle(dir: &Path) {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => warn!(bundle = %dir.display(), error = %e, "cannot remove an OCI bundle"),
    }
}

impl ContainerExecutor for OciExecutor {
    fn prepare(&self, spec: &LaunchSpec) -> Result<(), LaunchError> {
        self.prepare_oci(spec)
    }

    fn start(&self, spec: &LaunchSpec, hold: bool) -> Result<StartedProcess, LaunchError> {
        let prepared = self.prepared().remove(&spec.container_id);
        match prepared {
            Some(p) => self.start_oci(spec, p, hold),
            None => self.process.start(spec, hold),
        }
    }

    fn discard(&self, id: &ContainerId) {
        let prepared = self.prepared().remove(id);
        if let Some(p) = prepared {
            self.cleanup(&p.runtime_id);
        }
    }

    fn signal(&self, handle: &ExecHandle, signal: StopSignal) -> Result<(), LaunchError> {
        self.process.signal(handle, signal)?;
        let (Some(runtime_id), Some((leader, _))) =
            (handle.oci_runtime_id(), handle.as_process_group())
        else {
            return Ok(());
        };
        match self.container_init(runtime_id, leader) {
            Some(init) => signal_group(init, signal, handle),
            None => Ok(()),
        }
    }

    fn progress(&self, id: &ContainerId) -> Option<String> {
        self.images.progress(id)
    }

    fn reattach(&self, handle: &ExecHandle, adoptee: &Adoptee<'_>) -> Reattached {
        let found = self.process.reattach(handle, adoptee);
        let Some(runtime_id) = handle.oci_runtime_id().map(str::to_string) else {
            return found;
        };
        match found {
            Reattached::Ended(exit) => {
                self.cleanup(&runtime_id);
                Reattached::Ended(exit)
            }
            Reattached::Running(fut) => {
                let cleaner = self.cleaner();
                // Its image stays pinned while it runs, as before the restart.
                let pin =
                    std::fs::read_to_string(self.bundle_dir(&runtime_id).join(IMAGE_DIGEST_FILE))
                        .ok()
                        .and_then(|d| self.images.repin(d.trim()));
                Reattached::Running(Box::pin(async move {
                    let exit: ProcessExit = fut.await;
                    let _ = tokio::task::spawn_blocking(move || cleaner.cleanup(&runtime_id)).await;
                    drop(pin);
                    exit
                }))
            }
        }
    }

    fn reclaim(&self, live: &[ContainerId]) {
        self.process.reclaim(live);
        let keep: Vec<String> = live.iter().map(ToString::to_string).collect();
        let Ok(rd) = std::fs::read_dir(self.root.join("bundles")) else {
            return;
        };
        let mut n = 0;
        for e in rd.flatten() {
            if let Some(name) = e.file_name().to_str() {
                let id = name.split('.').next().unwrap_or(name);
                if !keep.iter().any(|k| k == id) {
                    self.cleanup(name);
                    n += 1;
                }
            }
        }
        if n > 0 {
            info!(
                reclaimed = n,
                "removed OCI bundles left by an earlier NodeManager"
            );
        }
    }

    fn update_limits(
        &self,
        id: &ContainerId,
        old: &IsolationSpec,
        new: &IsolationSpec,
    ) -> Result<(), LaunchError> {
        self.process.update_limits(id, old, new)
    }

    fn shutdown(&self) {
        self.process.shutdown();
    }
}
