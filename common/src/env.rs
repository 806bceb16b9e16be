//! Names of the environment variables a container is started with (YARN's
//! `ApplicationConstants.Environment`, plus Spindle's own for reaching the RM).

pub const CONTAINER_ID: &str = "CONTAINER_ID";
pub const NM_HOST: &str = "NM_HOST";
pub const NM_PORT: &str = "NM_PORT";
pub const NM_HTTP_PORT: &str = "NM_HTTP_PORT";
pub const LOCAL_DIRS: &str = "LOCAL_DIRS";
pub const LOG_DIRS: &str = "LOG_DIRS";
pub const USER: &str = "USER";
pub const LOGNAME: &str = "LOGNAME";
pub const PWD: &str = "PWD";
pub const HOME: &str = "HOME";
pub const APP_SUBMIT_TIME_ENV: &str = "APP_SUBMIT_TIME_ENV";
pub const MAX_APP_ATTEMPTS: &str = "MAX_APP_ATTEMPTS";
/// The RM's web address (`http://host:port`), set for AM containers.
pub const RM_ADDRESS: &str = "SPINDLE_RM_ADDRESS";
/// The AM-RM token, set for AM containers; sent as `Authorization: Bearer`.
pub const AMRM_TOKEN: &str = "SPINDLE_AMRM_TOKEN";
/// A client's token for an RM in `token` mode (wins over [`TOKEN_FILE`]).
pub const TOKEN: &str = "SPINDLE_TOKEN";
/// A file holding a client's token (wins over the yarn-site key `spindle.client.token-file`).
pub const TOKEN_FILE: &str = "SPINDLE_TOKEN_FILE";
/// The application attempt id, set for AM containers.
pub const APPLICATION_ATTEMPT_ID: &str = "SPINDLE_APPLICATION_ATTEMPT_ID";
/// Directory holding the spindle config the AM should read (the NM's conf dir).
pub const CONF_DIR: &str = "SPINDLE_CONF_DIR";
/// GPUs granted to the container.
pub const CUDA_VISIBLE_DEVICES: &str = "CUDA_VISIBLE_DEVICES";
pub const NVIDIA_VISIBLE_DEVICES: &str = "NVIDIA_VISIBLE_DEVICES";
/// YARN's container runtime request (set by an AM in the launch context): `default`,
/// `runc` or `docker` (the last two both run an OCI image under the NM's OCI runtime).
pub const YARN_CONTAINER_RUNTIME_TYPE: &str = "YARN_CONTAINER_RUNTIME_TYPE";
/// The image of a `runc` container.
pub const YARN_CONTAINER_RUNTIME_RUNC_IMAGE: &str = "YARN_CONTAINER_RUNTIME_RUNC_IMAGE";
/// A `runc` container's mounts: `src:dst[:ro|rw]`, comma-separated.
pub const YARN_CONTAINER_RUNTIME_RUNC_MOUNTS: &str = "YARN_CONTAINER_RUNTIME_RUNC_MOUNTS";
/// The image of a `docker` container (no Docker daemon: the same OCI runtime runs it).
pub const YARN_CONTAINER_RUNTIME_DOCKER_IMAGE: &str = "YARN_CONTAINER_RUNTIME_DOCKER_IMAGE";
/// A `docker` container's mounts, as for `runc`.
pub const YARN_CONTAINER_RUNTIME_DOCKER_MOUNTS: &str = "YARN_CONTAINER_RUNTIME_DOCKER_MOUNTS";
/// `true` asks for a privileged container (refused unless the node allows them).
pub const YARN_CONTAINER_RUNTIME_DOCKER_RUN_PRIVILEGED_CONTAINER: &str =
    "YARN_CONTAINER_RUNTIME_DOCKER_RUN_PRIVILEGED_CONTAINER";
/// The `runc` spelling of the privileged request.
pub const YARN_CONTAINER_RUNTIME_RUNC_RUN_PRIVILEGED_CONTAINER: &str =
    "YARN_CONTAINER_RUNTIME_RUNC_RUN_PRIVILEGED_CONTAINER";
