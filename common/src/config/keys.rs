//! YARN property names and their defaults (yarn-default.xml), so that no daemon spells a key
//! twice. STUB: being completed (helper task).

pub const RM_WEBAPP_ADDRESS: &str = "yarn.resourcemanager.webapp.address";
pub const DEFAULT_RM_WEBAPP_ADDRESS: &str = "0.0.0.0:8088";
pub const NM_WEBAPP_ADDRESS: &str = "yarn.nodemanager.webapp.address";
pub const DEFAULT_NM_WEBAPP_ADDRESS: &str = "0.0.0.0:8042";
pub const NM_HOSTNAME: &str = "yarn.nodemanager.hostname";
pub const NM_RESOURCE_MEMORY_MB: &str = "yarn.nodemanager.resource.memory-mb";
pub const DEFAULT_NM_RESOURCE_MEMORY_MB: i64 = 8192;
pub const NM_RESOURCE_CPU_VCORES: &str = "yarn.nodemanager.resource.cpu-vcores";
pub const DEFAULT_NM_RESOURCE_CPU_VCORES: i64 = 8;
pub const NM_LOCAL_DIRS: &str = "yarn.nodemanager.local-dirs";
pub const NM_LOG_DIRS: &str = "yarn.nodemanager.log-dirs";
pub const NM_SLEEP_DELAY_BEFORE_SIGKILL_MS: &str = "yarn.nodemanager.sleep-delay-before-sigkill.ms";
pub const DEFAULT_NM_SLEEP_DELAY_BEFORE_SIGKILL_MS: u64 = 250;
pub const NM_RECOVERY_DIR: &str = "yarn.nodemanager.recovery.dir";
pub const SCHEDULER_MIN_ALLOCATION_MB: &str = "yarn.scheduler.minimum-allocation-mb";
pub const DEFAULT_SCHEDULER_MIN_ALLOCATION_MB: i64 = 1024;
pub const SCHEDULER_MAX_ALLOCATION_MB: &str = "yarn.scheduler.maximum-allocation-mb";
pub const DEFAULT_SCHEDULER_MAX_ALLOCATION_MB: i64 = 8192;
pub const SCHEDULER_MIN_ALLOCATION_VCORES: &str = "yarn.scheduler.minimum-allocation-vcores";
pub const DEFAULT_SCHEDULER_MIN_ALLOCATION_VCORES: i64 = 1;
pub const SCHEDULER_MAX_ALLOCATION_VCORES: &str = "yarn.scheduler.maximum-allocation-vcores";
pub const DEFAULT_SCHEDULER_MAX_ALLOCATION_VCORES: i64 = 4;
pub const RM_NM_HEARTBEAT_INTERVAL_MS: &str =
    "yarn.resourcemanager.nodemanagers.heartbeat-interval-ms";
pub const DEFAULT_RM_NM_HEARTBEAT_INTERVAL_MS: u64 = 1000;
pub const NM_LIVENESS_EXPIRY_MS: &str = "yarn.nm.liveness-monitor.expiry-interval-ms";
pub const DEFAULT_NM_LIVENESS_EXPIRY_MS: u64 = 600_000;
pub const RM_AM_MAX_ATTEMPTS: &str = "yarn.resourcemanager.am.max-attempts";
pub const DEFAULT_RM_AM_MAX_ATTEMPTS: i64 = 2;
pub const RM_STORE_PATH: &str = "yarn.resourcemanager.store.path";
pub const RM_CLUSTER_ID: &str = "yarn.resourcemanager.cluster-id";
pub const RM_MAX_COMPLETED_APPLICATIONS: &str = "yarn.resourcemanager.max-completed-applications";
pub const DEFAULT_RM_MAX_COMPLETED_APPLICATIONS: i64 = 1000;
pub const RM_CONTAINER_ALLOCATION_EXPIRY_MS: &str =
    "yarn.resourcemanager.rm.container-allocation.expiry-interval-ms";
pub const DEFAULT_RM_CONTAINER_ALLOCATION_EXPIRY_MS: u64 = 600_000;
pub const AM_LIVENESS_EXPIRY_MS: &str = "yarn.am.liveness-monitor.expiry-interval-ms";
pub const DEFAULT_AM_LIVENESS_EXPIRY_MS: u64 = 600_000;
