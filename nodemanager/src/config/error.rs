//! Why the NodeManager's configuration was refused: [`NmConfigError`], one variant per rule.
//!
//! Every message is one line, `<where>: property '<name>': expected ..., got '...'`, the form
//! the daemons print before they exit with status 1. This module only defines the messages; it
//! must not decide what is valid (the readers do).

use spindle_common::config::ConfigError;

use crate::node_labels::NodeLabelError;

/// Why the configuration was refused. One variant per rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NmConfigError {
    /// The raw reader refused a file or a value (bad XML, not a number, ...).
    #[error(transparent)]
    Conf(#[from] ConfigError),
    /// The RM HA settings (`yarn.resourcemanager.ha.rm-ids` and each RM's address).
    #[error("RM high availability: {0}")]
    RmHa(Box<spindle_common::failover::HaAddressError>),
    /// The HTTP serve loop's limits or TLS settings (`spindle.http.*`, `yarn.http.policy`).
    #[error(transparent)]
    Http(#[from] spindle_rest_edge::serve::HttpConfigError),
    #[error("{at}: property '{name}': expected host:port, got '{value}'")]
    BadAddress {
        at: String,
        name: &'static str,
        value: String,
    },
    #[error("{at}: property '{name}': expected a host name or IPv4 address, got '{value}'")]
    BadHostname {
        at: String,
        name: &'static str,
        value: String,
    },
    #[error("{at}: property '{name}': expected a memory size in MB greater than 0, got '{value}'")]
    MemoryNotPositive {
        at: String,
        name: &'static str,
        value: String,
    },
    #[error("{at}: property '{name}': expected a number of vcores greater than 0, got '{value}'")]
    VcoresNotPositive {
        at: String,
        name: &'static str,
        value: String,
    },
    #[error("{at}: property '{name}': expected at least one local directory, got '{value}'")]
    NoLocalDirs {
        at: String,
        name: &'static str,
        value: String,
    },
    #[error("{at}: property '{name}': expected at least one log directory, got '{value}'")]
    NoLogDirs {
        at: String,
        name: &'static str,
        value: String,
    },
    #[error("{at}: property '{name}': expected a duration from 1 ms to 10 min, got {value} ms")]
    BadLaunchHoldTimeout {
        at: String,
        name: &'static str,
        value: u64,
    },
    #[error("{at}: property '{name}': expected a directory path, got '{value}'")]
    BadRecoveryDir {
        at: String,
        name: &'static str,
        value: String,
    },
    #[error(
        "{at}: property '{name}': expected comma-separated environment variable names, got '{value}'"
    )]
    BadEnvWhitelist {
        at: String,
        name: &'static str,
        value: String,
    },
    #[error("{at}: property '{name}': expected resource plugins among yarn.io/gpu, yarn.io/fpga, got '{value}'")]
    UnknownResourcePlugin {
        at: String,
        name: &'static str,
        value: String,
    },
    #[error("{at}: property '{name}': expected 'auto' or index:minor pairs such as 0:0,1:1, got '{value}' ({reason})")]
    BadAllowedGpus {
        at: String,
        name: &'static str,
        value: String,
        reason: String,
    },
    #[error("{at}: property '{name}': expected 'auto' or minor numbers such as 0,1, got '{value}' ({reason})")]
    BadAllowedFpgas {
        at: String,
        name: &'static str,
        value: String,
        reason: String,
    },
    #[error("{at}: property '{name}': expected IntelFpgaOpenclPlugin (the only FPGA vendor plugin), got '{value}'")]
    UnknownFpgaVendorPlugin {
        at: String,
        name: &'static str,
        value: String,
    },
    #[error("{at}: property '{name}': expected a time in ms greater than 0, got '{value}'")]
    TimeoutNotPositive {
        at: String,
        name: &'static str,
        value: String,
    },
    #[error("{at}: property '{name}': expected a device major number (0 to 4095), got '{value}'")]
    BadMajorNumber {
        at: String,
        name: &'static str,
        value: String,
    },
    // ---- Container isolation
    #[error("{at}: property '{name}': expected DefaultContainerExecutor or LinuxContainerExecutor, got '{value}'")]
    UnknownContainerExecutor {
        at: String,
        name: &'static str,
        value: String,
    },
    #[error("{at}: property '{name}': expected {expected}, got '{value}'")]
    BadValue {
        at: String,
        name: &'static str,
        expected: String,
        value: String,
    },
    #[error("{at}: property '{name}': invalid value '{value}': {reason}")]
    BadRuntimeSetting {
        at: String,
        name: &'static str,
        value: String,
        reason: String,
    },
    #[error("{at}: property '{name}': expected a local user to run containers as, got '{value}' ({reason})")]
    BadRunAsUser {
        at: String,
        name: &'static str,
        value: String,
        reason: String,
    },
    #[error("{at}: property '{name}': expected a cgroup path of names without '.', '..' or ',' (such as /spindle), got '{value}'")]
    BadCgroupHierarchy {
        at: String,
        name: &'static str,
        value: String,
    },
    #[error("{at}: property '{name}': expected auto, v1 or ebpf, got '{value}'")]
    UnknownDeviceIsolation {
        at: String,
        name: &'static str,
        value: String,
    },
    #[error("{at}: property '{name}': expected an interval in ms greater than 0, got '{value}'")]
    MonitorIntervalNotPositive {
        at: String,
        name: &'static str,
        value: String,
    },
    // ---- Distributed node labels and attributes
    #[error("{at}: property '{name}': expected {expected}, got '{value}' ({reason})")]
    BadNodeDescriptor {
        at: String,
        name: &'static str,
        expected: &'static str,
        value: String,
        /// Boxed: it would make every `Result<_, NmConfigError>` larger.
        reason: Box<NodeLabelError>,
    },
    /// `spindle.cluster.secret-file` names a file that cannot be the cluster secret;
    /// `problem` is the `ClusterSecretError`'s text (it names the file).
    #[error("{at}: property '{name}': {problem}")]
    ClusterSecret {
        at: String,
        name: &'static str,
        problem: String,
    },
}
