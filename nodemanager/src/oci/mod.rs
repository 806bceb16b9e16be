//! The OCI executor: containers that run in an image's root file system under an OCI runtime
//! (`crun`), keeping every guarantee a process container has.
//!
//! **Asking for it.** An AM sets YARN's variables in the launch context
//! (`YARN_CONTAINER_RUNTIME_TYPE=runc` with `..._RUNC_IMAGE` and `..._RUNC_MOUNTS`, or `docker`
//! with `..._DOCKER_IMAGE`/`..._DOCKER_MOUNTS`, the same thing without any Docker daemon). The
//! NM parses them once ([`RuntimeRequest::from_env`]) and its [`RuntimePolicy`] admits them
//! (allowed runtimes, mount allow-lists, privileged) or refuses with a [`RuntimeRefusal`]: the
//! container then fails at launch with exit code 7 and the refusal as its diagnostic.
//!
//! **Running it** ([`OciExecutor`]). The OCI path reuses the process executor rather than
//! repeating it: the container's leader is forked by Spindle into the container's own cgroups
//! (limits, OOM reporting, held gang starts, recovery by pid, `.exitcode` all as for
//! processes), but what it execs is `crun --cgroup-manager=disabled run --bundle <bundle>
//! <id>` in the foreground: crun leaves the container in the cgroups it was started in
//! (Spindle's, so the limits hold inside) and exits with the container's exit code. Before
//! its `exec` the leader enters a mount namespace of its own, where it mounts the image's
//! overlay (lower: the image's layers; upper and work: in the bundle) and detaches the
//! cgroup2 mount of a hybrid node (crun refuses hybrid nodes whose cgroup2 has controllers,
//! even with its cgroup manager disabled). The overlay is therefore never on the host: it
//! ends with the container's last process, also after an NM `kill -9`.
//!
//! The bundle (`<first local dir>/nmPrivate/oci/bundles/<runtime id>/`, root's, `0700`) is
//! written by the NM in Rust (`<container id>.<ms>`, new for every start, so a
//! re-initialization's bundle is never the old process's) ([`bundle`]): the command under `/bin/sh` (bash inside the image
//! where it has one), as the application's user (a passwd and group entry added when the
//! image lacks one), YARN's environment (the image's `Env` where YARN sets no such name; the
//! image's `PATH`), cwd = the work dir mounted at its own path, the application's local dirs
//! and log dirs likewise, `/etc/resolv.conf` and `/etc/hosts` read-only, the node's default
//! mounts and the AM's admitted ones; namespaces pid, ipc, uts (hostname = the node's) and
//! mount, **not** network (the host's, so NCCL and the rank environment work as today);
//! `noNewPrivileges`, a default capability set ([`spec::DEFAULT_CAPABILITIES`]). Devices: the
//! container's `/dev` is a tmpfs holding the standard nodes plus exactly its granted GPUs'
//! nodes and the control devices, from a CDI specification ([`cdi`]) or from discovery;
//! Spindle's device cgroup still denies every GPU it was not granted.
//!
//! **Signals.** A stop signals the leader's process group (crun forwards to the container's
//! PID 1, the wrapper) and the container's own process group (crun makes the container a
//! session of its own), so the command gets the signal exactly as a process container's would.
//!
//! **Nothing leaks.** When the leader ends (watched, or re-adopted after an NM restart), the
//! executor runs `crun delete -f` (state under `nmPrivate/oci/state`) and removes the bundle;
//! at NM start ([`OciExecutor`]'s `reclaim`) it does the same for every bundle of a container
//! it is not re-adopting.
//!
//! **The image seam.** Layers come from an [`ImageSource`] (the node's image store): for an
//! image reference, unpacked read-only layer directories (lowest first), the image's config
//! and a pin held while the container runs.

pub mod bundle;
pub mod cdi;
mod executor;
pub mod policy;
pub mod request;
pub mod spec;

use std::path::PathBuf;

use spindle_common::ids::ContainerId;

pub use executor::OciExecutor;
pub use policy::{find_runtime_binary, RuntimePolicy};
pub use request::{BindMount, MountMode, OciRequest, RuntimeKind, RuntimeRefusal, RuntimeRequest};

/// The parts of an image's configuration a container uses (its `Env`; `Entrypoint`, `Cmd`,
/// `User` and `WorkingDir` are not: YARN runs the launch command as the application's user in
/// its work dir). The image store's own type.
pub use crate::image::ImageConfig;

/// Something the image store keeps alive while a container uses an image (its layers are not
/// evicted until it is dropped).
pub type ImagePin = Box<dyn Send + Sync>;

/// An image ready to run: what an [`ImageSource`] hands the executor.
pub struct RootfsLayers {
    /// Unpacked, read-only layer directories, lowest first.
    pub layers: Vec<PathBuf>,
    pub config: ImageConfig,
    pub pin: Option<ImagePin>,
    /// The image's manifest digest (`sha256:...`), kept in the bundle so that an NM restarted
    /// under a running container pins its image again ([`ImageSource::repin`]).
    pub digest: Option<String>,
}

impl std::fmt::Debug for RootfsLayers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RootfsLayers")
            .field("layers", &self.layers)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Why an image cannot be had (a bad reference, an unreachable registry, ...): the image
/// store's own error, shown as the container's diagnostic.
pub type ImageError = Box<dyn std::error::Error + Send + Sync>;

/// Where the OCI executor gets an image's layers: the node's image store.
pub trait ImageSource: Send + Sync + 'static {
    /// The layers of `image` for `container`; may pull, telling `say` how it goes (lines
    /// for the container's log). Blocking.
    fn rootfs(
        &self,
        image: &str,
        container: &ContainerId,
        say: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<RootfsLayers, ImageError>;

    /// Pins again the cached image of `digest` for a container re-adopted after an NM
    /// restart (so it is not evicted under it); None when it is not cached. Never pulls.
    fn repin(&self, digest: &str) -> Option<ImagePin> {
        let _ = digest;
        None
    }

    /// How `container`'s pull stands while [`ImageSource::rootfs`] pulls for it (`pulling
    /// IMAGE: 1.2 of 9.8 MB`), for its diagnostics; None otherwise.
    fn progress(&self, container: &ContainerId) -> Option<String> {
        let _ = container;
        None
    }
}

/// No image store on this node: every image is refused.
#[derive(Debug, Default)]
pub struct NoImages;

impl ImageSource for NoImages {
    fn rootfs(
        &self,
        image: &str,
        _: &ContainerId,
        _: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<RootfsLayers, ImageError> {
        Err(format!("this NodeManager has no image store to provide '{image}'").into())
    }
}

/// Why an OCI container could not be prepared or started.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    #[error("container runtime request refused: {0}")]
    Refused(#[from] RuntimeRefusal),
    #[error("cannot get image '{image}': {source}")]
    Image {
        image: String,
        #[source]
        source: ImageError,
    },
    #[error("image layer {0} is not a directory")]
    Layer(PathBuf),
    #[error("cannot {what} {path}: {source}")]
    Bundle {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the container was not prepared (no bundle)")]
    NotPrepared,
}

impl OciError {
    /// The exit code the container fails with: 7 for a refused request (YARN's shape for an
    /// invalid Docker request), else none (a launch failure).
    pub fn exit_status(&self) -> Option<i32> {
        match self {
            Self::Refused(_) => Some(RuntimeRefusal::EXIT_CODE),
            _ => None,
        }
    }
}
