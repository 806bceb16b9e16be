//! YARN property names and their defaults (from Hadoop's `yarn-default.xml` and
//! `core-default.xml`, plus Spindle's own `spindle.*` keys), so that no daemon spells a key
//! twice and `docs/configuration.md` has one list to describe.
//!
//! String defaults may contain `${...}`: [`super::Configuration::get_string`] expands them,
//! and a `${key}` reference to an unset key resolves to its entry in [`DEFAULTS`], as it
//! would in Hadoop where the `*-default.xml` files are loaded first.
//!
//! This file is also the list of keys Spindle knows ([`super::known`] reads it): every
//! `pub const NAME: &str = "...";` whose name does not start with `DEFAULT_` or end with
//! `_PREFIX` is a key, and `CS_QUEUE_*` are per-queue capacity-scheduler properties. A key
//! added here is known (not reported as a typo) with nothing else to change; spell it as a
//! string literal on the constant itself.

// ---- Hadoop core ---------------------------------------------------------------------

/// Base directory for the other temporary and state directories' defaults.
pub const HADOOP_TMP_DIR: &str = "hadoop.tmp.dir";
pub const DEFAULT_HADOOP_TMP_DIR: &str = "/tmp/hadoop-${user.name}";
/// Hadoop's static user-to-groups table, consulted before any group lookup:
/// `user1=group1,group2;user2=;` (the default gives the web user `dr.who` no groups).
pub const HADOOP_USER_GROUP_STATIC_MAPPING_OVERRIDES: &str =
    "hadoop.user.group.static.mapping.overrides";
pub const DEFAULT_HADOOP_USER_GROUP_STATIC_MAPPING_OVERRIDES: &str = "dr.who=;";
/// How long a user's groups are cached, in seconds.
pub const HADOOP_SECURITY_GROUPS_CACHE_SECS: &str = "hadoop.security.groups.cache.secs";
pub const DEFAULT_HADOOP_SECURITY_GROUPS_CACHE_SECS: u64 = 300;
/// How long a failed group lookup (no such user) is cached, in seconds.
pub const HADOOP_SECURITY_GROUPS_NEGATIVE_CACHE_SECS: &str =
    "hadoop.security.groups.negative-cache.secs";
pub const DEFAULT_HADOOP_SECURITY_GROUPS_NEGATIVE_CACHE_SECS: u64 = 30;
/// How long one group lookup command (`id -Gn`) may run; Hadoop's 0 means no limit (the RM
/// takes 0 as 5 s, because a hung lookup would hold a REST request forever).
pub const HADOOP_SECURITY_GROUPS_SHELL_COMMAND_TIMEOUT: &str =
    "hadoop.security.groups.shell.command.timeout";
pub const DEFAULT_HADOOP_SECURITY_GROUPS_SHELL_COMMAND_TIMEOUT: u64 = 0;
/// RM: how REST callers are authenticated on `/ws/v1/cluster/...`: `simple` (Hadoop's pseudo
/// authentication: the caller is whoever `?user.name=` names) or `token` (Spindle's signed
/// bearer tokens, in the spirit of RM delegation tokens: `Authorization: Bearer <token>` or
/// `Hadoop-YARN-RM-Delegation-Token: <token>`; the caller is the token's owner and
/// `?user.name=` is ignored). Hadoop's `kerberos` is not implemented.
pub const HADOOP_HTTP_AUTHENTICATION_TYPE: &str = "hadoop.http.authentication.type";
pub const DEFAULT_HADOOP_HTTP_AUTHENTICATION_TYPE: &str = "simple";
/// RM, `simple` mode: whether a call without `?user.name=` is taken as `dr.who` (true) or
/// refused with 401 (false).
pub const HADOOP_HTTP_AUTHENTICATION_SIMPLE_ANONYMOUS_ALLOWED: &str =
    "hadoop.http.authentication.simple.anonymous.allowed";
pub const DEFAULT_HADOOP_HTTP_AUTHENTICATION_SIMPLE_ANONYMOUS_ALLOWED: bool = true;
/// RM, `token` mode (required there), and `spindle token -issue`: the file holding the key
/// users' tokens are signed with, hex of at least 32 random bytes, mode `0600` (the RM refuses
/// to start on a missing, short, non-hex or group/other-readable file).
pub const HADOOP_HTTP_AUTHENTICATION_SIGNATURE_SECRET_FILE: &str =
    "hadoop.http.authentication.signature.secret.file";
/// RM, `token` mode: the longest validity (ms) of a token the RM issues over REST
/// (`POST /ws/v1/cluster/delegation-token`); never beyond the max date of the token that
/// asked. Hadoop's default, 7 days.
pub const RM_DELEGATION_TOKEN_MAX_LIFETIME: &str =
    "yarn.resourcemanager.delegation.token.max-lifetime";
pub const DEFAULT_RM_DELEGATION_TOKEN_MAX_LIFETIME: u64 = 604_800_000;
/// Both daemons: the file the audit lines (YARN's `RMAuditLogger` lines: USER, IP, OPERATION,
/// TARGET, RESULT, ...) are appended to, created `0600`. Unset: they go to the daemon's log
/// with the other lines (target `RMAuditLogger`).
pub const SPINDLE_AUDIT_LOG_FILE: &str = "spindle.audit.log-file";
/// Clients: a file holding the caller's token for an RM in `token` mode (`$SPINDLE_TOKEN`,
/// then `$SPINDLE_TOKEN_FILE`, win over it).
pub const SPINDLE_CLIENT_TOKEN_FILE: &str = "spindle.client.token-file";

// ---- ResourceManager -----------------------------------------------------------------

/// Host the RM's addresses default to (the `${yarn.resourcemanager.hostname}` in them).
pub const RM_HOSTNAME: &str = "yarn.resourcemanager.hostname";
pub const DEFAULT_RM_HOSTNAME: &str = "0.0.0.0";
/// Address (`host:port`) the RM serves its REST API and web UI on; every Spindle protocol
/// to the RM (client, AM, NM) goes through it.
/// Clients (`spindle train`, `distributed-shell`): a directory on a file system every NM
/// reads (NFS, a parallel file system) where shipped code is staged and read by the NMs as
/// `file://` resources. Unset (the default): shipped code is uploaded to the RM's blob
/// store and the NMs download it from the RM ([`SPINDLE_RM_BLOB_STORE_DIR`]).
pub const CLIENT_STAGING_DIR: &str = "spindle.client.staging-dir";
/// Both daemons: how they write their log lines to stderr, `text` (one human line per event)
/// or `json` (one JSON object per line, the enclosing spans' fields such as `app_id` flattened
/// into it, for a log shipper). The `--log-format` flag wins over it.
pub const LOG_FORMAT: &str = "spindle.log.format";
pub const DEFAULT_LOG_FORMAT: &str = "text";
pub const RM_WEBAPP_ADDRESS: &str = "yarn.resourcemanager.webapp.address";
pub const DEFAULT_RM_WEBAPP_ADDRESS: &str = "${yarn.resourcemanager.hostname}:8088";
/// Scheduler implementation, as a Hadoop class name; Spindle implements only the
/// CapacityScheduler.
pub const RM_SCHEDULER_CLASS: &str = "yarn.resourcemanager.scheduler.class";
pub const DEFAULT_RM_SCHEDULER_CLASS: &str =
    "org.apache.hadoop.yarn.server.resourcemanager.scheduler.capacity.CapacityScheduler";
/// Heartbeat interval the RM tells NodeManagers to use.
pub const RM_NM_HEARTBEAT_INTERVAL_MS: &str =
    "yarn.resourcemanager.nodemanagers.heartbeat-interval-ms";
pub const DEFAULT_RM_NM_HEARTBEAT_INTERVAL_MS: u64 = 1000;
/// How long an NM may stay silent before the RM declares it LOST.
pub const NM_LIVENESS_EXPIRY_MS: &str = "yarn.nm.liveness-monitor.expiry-interval-ms";
pub const DEFAULT_NM_LIVENESS_EXPIRY_MS: u64 = 600_000;
/// How long an AM may stay silent before the RM fails its attempt.
pub const AM_LIVENESS_EXPIRY_MS: &str = "yarn.am.liveness-monitor.expiry-interval-ms";
pub const DEFAULT_AM_LIVENESS_EXPIRY_MS: u64 = 600_000;
/// How long an allocated container may go unlaunched before the RM takes it back.
pub const RM_CONTAINER_ALLOCATION_EXPIRY_MS: &str =
    "yarn.resourcemanager.rm.container-allocation.expiry-interval-ms";
pub const DEFAULT_RM_CONTAINER_ALLOCATION_EXPIRY_MS: u64 = 600_000;
/// How often the RM rolls its container-token master key (seconds): a fresh random key is
/// sent to every NM at once and signs new container tokens after 1.5 x
/// [`NM_LIVENESS_EXPIRY_MS`]; the key before it is still accepted until the next roll. Must be
/// more than 3 x [`NM_LIVENESS_EXPIRY_MS`] (YARN's rule).
pub const RM_CONTAINER_TOKEN_MASTER_KEY_ROLLING_INTERVAL_SECS: &str =
    "yarn.resourcemanager.container-tokens.master-key-rolling-interval-secs";
pub const DEFAULT_RM_CONTAINER_TOKEN_MASTER_KEY_ROLLING_INTERVAL_SECS: i64 = 86_400;
/// Cluster-wide cap on application attempts (an application may ask for fewer).
pub const RM_AM_MAX_ATTEMPTS: &str = "yarn.resourcemanager.am.max-attempts";
pub const DEFAULT_RM_AM_MAX_ATTEMPTS: i64 = 2;
/// How many finished applications the RM keeps in memory (and in its store).
pub const RM_MAX_COMPLETED_APPLICATIONS: &str = "yarn.resourcemanager.max-completed-applications";
pub const DEFAULT_RM_MAX_COMPLETED_APPLICATIONS: i64 = 1000;
/// File of the hosts allowed to join (one `host` or `host:port` a line); unset or empty
/// file: every host. Read at start and by `rmadmin -refreshNodes`.
pub const RM_NODES_INCLUDE_PATH: &str = "yarn.resourcemanager.nodes.include-path";
/// File of the hosts to decommission (`rmadmin -refreshNodes`); plain text or YARN's XML
/// `<hosts><host><name>..</name><timeout>..</timeout></host></hosts>`.
pub const RM_NODES_EXCLUDE_PATH: &str = "yarn.resourcemanager.nodes.exclude-path";
/// A graceful decommission's timeout when `-refreshNodes -g` names none (seconds;
/// negative: no timeout).
pub const RM_NM_GRACEFUL_DECOMMISSION_TIMEOUT_SECS: &str =
    "yarn.resourcemanager.nodemanager-graceful-decommission-timeout-secs";
pub const DEFAULT_RM_NM_GRACEFUL_DECOMMISSION_TIMEOUT_SECS: i64 = 3600;
/// Name of the cluster (Hadoop uses it for RM HA; it has no default there). Spindle reads it
/// with the default `spindle`; with HA it names the etcd key prefix `/spindle/<cluster-id>/`.
pub const RM_CLUSTER_ID: &str = "yarn.resourcemanager.cluster-id";
pub const DEFAULT_RM_CLUSTER_ID: &str = "spindle";
/// ResourceManager high availability: an active and standby RMs sharing the etcd state store.
pub const RM_HA_ENABLED: &str = "yarn.resourcemanager.ha.enabled";
pub const DEFAULT_RM_HA_ENABLED: bool = false;
/// The RMs of the cluster, by id (`rm1,rm2`): at least two.
pub const RM_HA_RM_IDS: &str = "yarn.resourcemanager.ha.rm-ids";
/// Which of the `rm-ids` this RM is.
pub const RM_HA_ID: &str = "yarn.resourcemanager.ha.id";
/// Whether the RMs elect the active themselves (else an admin transitions them).
pub const RM_HA_AUTOMATIC_FAILOVER_ENABLED: &str =
    "yarn.resourcemanager.ha.automatic-failover.enabled";
pub const DEFAULT_RM_HA_AUTOMATIC_FAILOVER_ENABLED: bool = true;
/// The keys that take a per-RM `.<rm-id>` suffix under HA (YARN's `HAUtil.RM_ADDRESS_CONF_KEYS`
/// that Spindle serves): `yarn.resourcemanager.webapp.address.rm1`, `...hostname.rm1`.
pub const RM_HA_PER_ID_KEYS: &[&str] = &[RM_WEBAPP_ADDRESS, RM_HOSTNAME];
/// Clients of an HA cluster (the CLI, the SDK, NodeManagers): how many times one call fails
/// over to the next RM of `yarn.resourcemanager.ha.rm-ids` before giving up.
pub const CLIENT_FAILOVER_MAX_ATTEMPTS: &str = "yarn.client.failover-max-attempts";
pub const DEFAULT_CLIENT_FAILOVER_MAX_ATTEMPTS: u32 = 15;
/// The first pause between failovers (the first failover is at once); doubled each time.
pub const CLIENT_FAILOVER_SLEEP_BASE_MS: &str = "yarn.client.failover-sleep-base-ms";
pub const DEFAULT_CLIENT_FAILOVER_SLEEP_BASE_MS: u64 = 500;
/// The longest pause between failovers.
pub const CLIENT_FAILOVER_SLEEP_MAX_MS: &str = "yarn.client.failover-sleep-max-ms";
pub const DEFAULT_CLIENT_FAILOVER_SLEEP_MAX_MS: u64 = 15000;
/// etcd client URLs of the HA state store and election (`http://host:2379,...`; Spindle's key).
pub const SPINDLE_HA_ETCD_ENDPOINTS: &str = "spindle.ha.etcd.endpoints";
/// How long the active's etcd lease lasts: an active that stops renewing it is replaced after
/// at most this long (Spindle's key; at least 1000).
pub const SPINDLE_HA_ETCD_LEASE_MS: &str = "spindle.ha.etcd.lease-ms";
pub const DEFAULT_SPINDLE_HA_ETCD_LEASE_MS: u64 = 5000;
/// SQLite file of the RM state store (applications with their live attempt, the epoch, the
/// token secret, scheduler-conf versions) that makes an RM restart lose nothing. Created 0600.
pub const SPINDLE_RM_STATE_STORE_PATH: &str = "spindle.resourcemanager.state-store.path";
pub const DEFAULT_SPINDLE_RM_STATE_STORE_PATH: &str =
    "${hadoop.tmp.dir}/yarn/system/rmstore.sqlite";
/// Directory of the RM's blob store: the files clients ship (`--files`, `--archives`,
/// `--src-dir`) uploaded to the RM, one file per SHA-256, with `blobs.sqlite` recording who
/// uploaded each and which applications use it. Unset: `blobs` next to the state store
/// ([`SPINDLE_RM_STATE_STORE_PATH`]'s directory). Created 0700.
pub const SPINDLE_RM_BLOB_STORE_DIR: &str = "spindle.resourcemanager.blob-store.dir";
/// The largest file the blob store accepts, in bytes (an upload above it is refused with
/// 413 naming this key).
pub const SPINDLE_RM_BLOB_STORE_MAX_FILE_BYTES: &str =
    "spindle.resourcemanager.blob-store.max-file-bytes";
pub const DEFAULT_SPINDLE_RM_BLOB_STORE_MAX_FILE_BYTES: u64 = 4 << 30;
/// The most bytes the blob store keeps for one user (the blobs they uploaded, each counted
/// once), in bytes; an upload that would pass it is refused with 413 naming this key.
pub const SPINDLE_RM_BLOB_STORE_MAX_USER_BYTES: &str =
    "spindle.resourcemanager.blob-store.max-user-bytes";
pub const DEFAULT_SPINDLE_RM_BLOB_STORE_MAX_USER_BYTES: u64 = 20 << 30;
/// How long a blob is kept after the last application using it ended (or, for one never
/// used by a submitted application, after its last upload or claim), in ms.
pub const SPINDLE_RM_BLOB_STORE_RETENTION_MS: &str =
    "spindle.resourcemanager.blob-store.retention-ms";
pub const DEFAULT_SPINDLE_RM_BLOB_STORE_RETENTION_MS: u64 = 3_600_000;
/// How often the RM looks for blobs to remove, in ms.
pub const SPINDLE_RM_BLOB_STORE_CLEANER_INTERVAL_MS: &str =
    "spindle.resourcemanager.blob-store.cleaner-interval-ms";
pub const DEFAULT_SPINDLE_RM_BLOB_STORE_CLEANER_INTERVAL_MS: u64 = 60_000;
/// Older spelling of [`SPINDLE_RM_STATE_STORE_PATH`] (not a Hadoop key); read only when the
/// `spindle.*` key is unset.
pub const RM_STORE_PATH: &str = "yarn.resourcemanager.store.path";
/// Whether scheduling monitors such as capacity preemption run.
pub const RM_SCHEDULER_MONITOR_ENABLE: &str = "yarn.resourcemanager.scheduler.monitor.enable";
pub const DEFAULT_RM_SCHEDULER_MONITOR_ENABLE: bool = false;
/// The capacity-preemption monitor's properties (YARN's `ProportionalCapacityPreemptionPolicy`).
pub const PREEMPTION_PREFIX: &str = "yarn.resourcemanager.monitor.capacity.preemption.";
/// Decide and report, but send no notice and kill nothing.
pub const PREEMPTION_OBSERVE_ONLY: &str =
    "yarn.resourcemanager.monitor.capacity.preemption.observe_only";
pub const DEFAULT_PREEMPTION_OBSERVE_ONLY: bool = false;
/// How often the monitor looks for starved queues.
pub const PREEMPTION_MONITORING_INTERVAL: &str =
    "yarn.resourcemanager.monitor.capacity.preemption.monitoring_interval";
pub const DEFAULT_PREEMPTION_MONITORING_INTERVAL_MS: u64 = 3000;
/// How long after its notice a container is killed (an acknowledgement may shorten it).
pub const PREEMPTION_MAX_WAIT_BEFORE_KILL: &str =
    "yarn.resourcemanager.monitor.capacity.preemption.max_wait_before_kill";
pub const DEFAULT_PREEMPTION_MAX_WAIT_BEFORE_KILL_MS: u64 = 15_000;
/// The most of the cluster one round takes back (a round always serves at least one
/// preemptor, since a gang is taken whole).
pub const PREEMPTION_TOTAL_PER_ROUND: &str =
    "yarn.resourcemanager.monitor.capacity.preemption.total_preemption_per_round";
pub const DEFAULT_PREEMPTION_TOTAL_PER_ROUND: f64 = 0.1;
/// A queue over its guarantee by less than this fraction is left alone (a dead zone).
pub const PREEMPTION_MAX_IGNORED_OVER_CAPACITY: &str =
    "yarn.resourcemanager.monitor.capacity.preemption.max_ignored_over_capacity";
pub const DEFAULT_PREEMPTION_MAX_IGNORED_OVER_CAPACITY: f64 = 0.1;
/// The share of a queue's excess one round takes from it (at least one victim).
pub const PREEMPTION_NATURAL_TERMINATION_FACTOR: &str =
    "yarn.resourcemanager.monitor.capacity.preemption.natural_termination_factor";
pub const DEFAULT_PREEMPTION_NATURAL_TERMINATION_FACTOR: f64 = 0.2;
/// Whether applications of a leaf preempt lower-ranked ones of the same leaf (by application
/// priority, by user limit, by `las` level).
pub const PREEMPTION_INTRA_QUEUE_ENABLED: &str =
    "yarn.resourcemanager.monitor.capacity.preemption.intra-queue-preemption.enabled";
pub const DEFAULT_PREEMPTION_INTRA_QUEUE_ENABLED: bool = false;
/// In a `fairshare` leaf, with intra-queue preemption on, a waiting application whose user
/// is below their share takes containers from users above theirs whose decayed usage over
/// share is at least this multiple of its user's (at least 1; a name in YARN's intra-queue
/// family).
pub const PREEMPTION_INTRA_QUEUE_FAIRSHARE_USAGE_FACTOR: &str =
    "yarn.resourcemanager.monitor.capacity.preemption.intra-queue-preemption.fairshare.usage-factor";
pub const DEFAULT_PREEMPTION_INTRA_QUEUE_FAIRSHARE_USAGE_FACTOR: f64 = 2.0;
/// Spindle's: a job (a gang, or a container) that has run less than this is not preempted,
/// and a preempted one not again before it has run this long again.
pub const PREEMPTION_MIN_RUNTIME_MS: &str = "spindle.preemption.min-runtime-ms";
/// Elastic gangs: no gang is resized more often than this (ms).
pub const ELASTIC_RESIZE_INTERVAL_MS: &str = "spindle.elastic.resize-interval-ms";
pub const DEFAULT_ELASTIC_RESIZE_INTERVAL_MS: u64 = 300_000;
/// Elastic gangs: what one resize costs the job (checkpoint, stop, restart), in ms; a grow
/// is made only when it is predicted to save more than this.
pub const ELASTIC_RESTART_COST_MS: &str = "spindle.elastic.restart-cost-ms";
pub const DEFAULT_ELASTIC_RESTART_COST_MS: u64 = 10_000;
/// Elastic gangs: how long an AM has to give back the members a shrink demands (ms).
pub const ELASTIC_SHRINK_DEADLINE_MS: &str = "spindle.elastic.shrink-deadline-ms";
pub const DEFAULT_ELASTIC_SHRINK_DEADLINE_MS: u64 = 30_000;
/// Elastic gangs: how often the doubling policy's round runs (ms).
pub const ELASTIC_MONITORING_INTERVAL_MS: &str = "spindle.elastic.monitoring-interval-ms";
pub const DEFAULT_ELASTIC_MONITORING_INTERVAL_MS: u64 = 1_000;
/// Fair share with memory: billing units per unit of each resource type per second
/// (Slurm's `TRESBillingWeights`), `type=weight` pairs; types not listed cost nothing.
pub const FAIRSHARE_BILLING_WEIGHTS: &str = "spindle.scheduler.fairshare.billing-weights";
pub const DEFAULT_FAIRSHARE_BILLING_WEIGHTS: &str =
    "yarn.io/gpu=1.0,vcores=0.01,memory-mb=0.000001";
/// Fair share with memory: users' usage halves every this many ms (Slurm's
/// `PriorityDecayHalfLife`, 7 days); 0: usage never decays. At least 1000 otherwise.
pub const FAIRSHARE_DECAY_HALF_LIFE_MS: &str = "spindle.scheduler.fairshare.decay-half-life-ms";
pub const DEFAULT_FAIRSHARE_DECAY_HALF_LIFE_MS: u64 = 604_800_000;
/// Fair share with memory: how often users' places in `fairshare` leaves follow the usage
/// of their running containers, in ms (Slurm's `PriorityCalcPeriod`, 5 minutes).
pub const FAIRSHARE_CALC_PERIOD_MS: &str = "spindle.scheduler.fairshare.calc-period-ms";
pub const DEFAULT_FAIRSHARE_CALC_PERIOD_MS: u64 = 300_000;
pub const DEFAULT_PREEMPTION_MIN_RUNTIME_MS: u64 = 60_000;
/// How GPU containers asking a vcores range or `auto` get their CPUs: `proportional` (the
/// node's CPUs divided by its GPUs, per GPU), `static` (`cpus-per-gpu` per GPU, Slurm's
/// `--cpus-per-gpu`) or `adaptive` (sized and moved by predicted throughput).
pub const CPU_POLICY: &str = "spindle.scheduler.cpu-policy";
pub const DEFAULT_CPU_POLICY: &str = "proportional";
/// A partition's own CPU policy: `spindle.scheduler.cpu-policy.partition.<label>` (the
/// default partition is `<DEFAULT>`).
pub const CPU_POLICY_PARTITION_PREFIX: &str = "spindle.scheduler.cpu-policy.partition.";
/// `static`'s CPUs per GPU (Slurm's `DefCpuPerGPU`).
pub const CPU_POLICY_CPUS_PER_GPU: &str = "spindle.scheduler.cpu-policy.cpus-per-gpu";
pub const DEFAULT_CPU_POLICY_CPUS_PER_GPU: u32 = 3;
/// How often the adaptive round moves CPUs (ms, positive).
pub const CPU_POLICY_INTERVAL_MS: &str = "spindle.scheduler.cpu-policy.interval-ms";
pub const DEFAULT_CPU_POLICY_INTERVAL_MS: u64 = 30_000;
/// No container's CPUs change more often than this (ms).
pub const CPU_POLICY_RESIZE_INTERVAL_MS: &str = "spindle.scheduler.cpu-policy.resize-interval-ms";
pub const DEFAULT_CPU_POLICY_RESIZE_INTERVAL_MS: u64 = 60_000;
/// How long a job with neither a throughput table nor reports is explored (ms).
pub const CPU_POLICY_EXPLORE_MS: &str = "spindle.scheduler.cpu-policy.explore-ms";
pub const DEFAULT_CPU_POLICY_EXPLORE_MS: u64 = 300_000;
/// `auto`'s top: the node's CPUs per GPU times this, per GPU (at least 1).
pub const CPU_POLICY_AUTO_FACTOR: &str = "spindle.scheduler.cpu-policy.auto-factor";
pub const DEFAULT_CPU_POLICY_AUTO_FACTOR: f64 = 4.0;

/// How long a gang may wait for all of its containers when its AM names no timeout
/// (Spindle's own key).
pub const SPINDLE_SCHEDULER_GANG_TIMEOUT_MS: &str = "spindle.scheduler.gang.timeout-ms";
pub const DEFAULT_SPINDLE_SCHEDULER_GANG_TIMEOUT_MS: u64 = 600_000;

// ---- Security and priorities -----------------------------------------------------------

/// RM and every NM: the cluster secret file (hex of at least 32 random bytes, mode `0600`
/// or `0400`, owned by the daemon's user; `spindle cluster-secret -generate FILE` writes
/// one). When set, every node-tracker call (register, heartbeat, unregister) is signed with
/// it and the RM refuses unsigned ones with 401; unset, the RM accepts any node
/// (compatibility mode, logged at start). The same file on every daemon of a cluster.
pub const CLUSTER_SECRET_FILE: &str = "spindle.cluster.secret-file";

/// Whether queue and admin ACLs are enforced at all.
pub const ACL_ENABLE: &str = "yarn.acl.enable";
pub const DEFAULT_ACL_ENABLE: bool = false;
/// Who may run admin operations (`rmadmin`, scheduler-conf mutation): `users groups`, `*`.
pub const ADMIN_ACL: &str = "yarn.admin.acl";
pub const DEFAULT_ADMIN_ACL: &str = "*";
/// Highest application priority accepted; 0 means priorities are off.
pub const CLUSTER_MAX_APPLICATION_PRIORITY: &str = "yarn.cluster.max-application-priority";
pub const DEFAULT_CLUSTER_MAX_APPLICATION_PRIORITY: i64 = 0;
/// Whether node labels (partitions) may be used.
pub const NODE_LABELS_ENABLED: &str = "yarn.node-labels.enabled";
pub const DEFAULT_NODE_LABELS_ENABLED: bool = false;
/// Who sets node labels: `centralized` (rmadmin and REST) or `distributed` (each NM reports
/// its own partition). YARN's `delegated-centralized` is not supported.
pub const NODE_LABELS_CONFIGURATION_TYPE: &str = "yarn.node-labels.configuration-type";
pub const DEFAULT_NODE_LABELS_CONFIGURATION_TYPE: &str = "centralized";

// ---- Scheduler -----------------------------------------------------------------------

/// Smallest memory a container gets; requests are rounded up to a multiple of it.
pub const SCHEDULER_MIN_ALLOCATION_MB: &str = "yarn.scheduler.minimum-allocation-mb";
pub const DEFAULT_SCHEDULER_MIN_ALLOCATION_MB: i64 = 1024;
/// Largest memory one container may ask for; larger requests are refused.
pub const SCHEDULER_MAX_ALLOCATION_MB: &str = "yarn.scheduler.maximum-allocation-mb";
pub const DEFAULT_SCHEDULER_MAX_ALLOCATION_MB: i64 = 8192;
/// Fewest vcores a container gets.
pub const SCHEDULER_MIN_ALLOCATION_VCORES: &str = "yarn.scheduler.minimum-allocation-vcores";
pub const DEFAULT_SCHEDULER_MIN_ALLOCATION_VCORES: i64 = 1;
/// Most vcores one container may ask for.
pub const SCHEDULER_MAX_ALLOCATION_VCORES: &str = "yarn.scheduler.maximum-allocation-vcores";
pub const DEFAULT_SCHEDULER_MAX_ALLOCATION_VCORES: i64 = 4;
/// Prefix of every CapacityScheduler property (`capacity-scheduler.xml`), e.g.
/// `yarn.scheduler.capacity.root.queues`.
pub const CAPACITY_SCHEDULER_PREFIX: &str = "yarn.scheduler.capacity.";
/// How the CapacityScheduler compares resources; GPU/FPGA scheduling needs the
/// `DominantResourceCalculator`.
pub const CS_RESOURCE_CALCULATOR: &str = "yarn.scheduler.capacity.resource-calculator";
pub const DEFAULT_CS_RESOURCE_CALCULATOR: &str =
    "org.apache.hadoop.yarn.util.resource.DefaultResourceCalculator";
/// Cluster-wide cap on pending plus running applications (split among leaf queues).
pub const CS_MAXIMUM_APPLICATIONS: &str = "yarn.scheduler.capacity.maximum-applications";
pub const DEFAULT_CS_MAXIMUM_APPLICATIONS: i64 = 10_000;
/// Share of a queue's resources that application masters may use.
pub const CS_MAXIMUM_AM_RESOURCE_PERCENT: &str =
    "yarn.scheduler.capacity.maximum-am-resource-percent";
pub const DEFAULT_CS_MAXIMUM_AM_RESOURCE_PERCENT: f64 = 0.1;
/// Cluster-wide cap on running applications; unset means no cap.
pub const CS_MAX_PARALLEL_APPS: &str = "yarn.scheduler.capacity.max-parallel-apps";
/// Cap on each user's running applications; unset means no cap.
pub const CS_USER_MAX_PARALLEL_APPS: &str = "yarn.scheduler.capacity.user.max-parallel-apps";
/// Prefix of per-user settings: `yarn.scheduler.capacity.user.<user>.max-parallel-apps`
/// (the suffix is [`CS_QUEUE_MAX_PARALLEL_APPS`]).
pub const CS_USER_PREFIX: &str = "yarn.scheduler.capacity.user.";
/// Placement rules, `u:<user>:<queue>` / `g:<group>:<queue>`, first match wins.
pub const CS_QUEUE_MAPPINGS: &str = "yarn.scheduler.capacity.queue-mappings";
/// Whether a mapping overrides the queue an application names.
pub const CS_QUEUE_MAPPINGS_OVERRIDE_ENABLE: &str =
    "yarn.scheduler.capacity.queue-mappings-override.enable";
pub const DEFAULT_CS_QUEUE_MAPPINGS_OVERRIDE_ENABLE: bool = false;
/// Missed scheduling opportunities before a node-local request may go rack-local.
/// Spindle's: how many waiting gangs one scheduling pass plans onto the free nodes (gangs
/// holding nodes aside), in queue order; the rest wait for a later pass. Like Slurm's
/// `bf_max_job_test`, it bounds a pass when thousands of gangs wait.
pub const CS_GANG_MAX_PLANS_PER_PASS: &str = "yarn.scheduler.capacity.gang.max-plans-per-pass";
pub const DEFAULT_CS_GANG_MAX_PLANS_PER_PASS: u32 = 8;
pub const CS_NODE_LOCALITY_DELAY: &str = "yarn.scheduler.capacity.node-locality-delay";
pub const DEFAULT_CS_NODE_LOCALITY_DELAY: u32 = 40;
/// Further missed opportunities before a rack-local request may go off-switch; -1 derives
/// it from the cluster's size.
pub const CS_RACK_LOCALITY_ADDITIONAL_DELAY: &str =
    "yarn.scheduler.capacity.rack-locality-additional-delay";
pub const DEFAULT_CS_RACK_LOCALITY_ADDITIONAL_DELAY: i32 = -1;

// ---- CapacityScheduler, per queue --------------------------------------------------------
//
// A queue's keys are `yarn.scheduler.capacity.<queue-path>.<suffix>`, e.g.
// `yarn.scheduler.capacity.root.a.capacity`; the constants below are the suffixes.

/// The queue's children, a comma list of short names.
pub const CS_QUEUE_QUEUES: &str = "queues";
/// Guaranteed share: a percentage, a weight (`2w`) or an absolute resource.
pub const CS_QUEUE_CAPACITY: &str = "capacity";
/// Ceiling: a percentage (`-1` for none) or an absolute resource.
pub const CS_QUEUE_MAXIMUM_CAPACITY: &str = "maximum-capacity";
/// `RUNNING` or `STOPPED`; unset inherits the parent's.
pub const CS_QUEUE_STATE: &str = "state";
/// How far one user may go beyond the queue's capacity; -1 for no limit.
pub const CS_QUEUE_USER_LIMIT_FACTOR: &str = "user-limit-factor";
pub const DEFAULT_CS_QUEUE_USER_LIMIT_FACTOR: f64 = 1.0;
/// The share each active user is guaranteed, in percent.
pub const CS_QUEUE_MINIMUM_USER_LIMIT_PERCENT: &str = "minimum-user-limit-percent";
pub const DEFAULT_CS_QUEUE_MINIMUM_USER_LIMIT_PERCENT: f64 = 100.0;
/// The queue's cap on pending plus running applications; unset or negative derives it from
/// [`CS_MAXIMUM_APPLICATIONS`].
pub const CS_QUEUE_MAXIMUM_APPLICATIONS: &str = "maximum-applications";
/// The queue's cap on running applications (also the suffix of the per-user form).
pub const CS_QUEUE_MAX_PARALLEL_APPS: &str = "max-parallel-apps";
/// The queue's own [`CS_MAXIMUM_AM_RESOURCE_PERCENT`]; unset inherits the global one.
pub const CS_QUEUE_MAXIMUM_AM_RESOURCE_PERCENT: &str = "maximum-am-resource-percent";
/// The queue's largest container memory; unset inherits the parent's (or the cluster's).
pub const CS_QUEUE_MAXIMUM_ALLOCATION_MB: &str = "maximum-allocation-mb";
/// The queue's largest container vcores; unset inherits the parent's (or the cluster's).
pub const CS_QUEUE_MAXIMUM_ALLOCATION_VCORES: &str = "maximum-allocation-vcores";
/// Who may submit to the queue (an ACL); unset inherits.
pub const CS_QUEUE_ACL_SUBMIT_APPLICATIONS: &str = "acl_submit_applications";
/// Who may administer the queue (an ACL); unset inherits.
pub const CS_QUEUE_ACL_ADMINISTER_QUEUE: &str = "acl_administer_queue";
/// `fifo` or `fair` for a leaf, `utilization` or `priority-utilization` for a parent.
pub const CS_QUEUE_ORDERING_POLICY: &str = "ordering-policy";
/// Spindle's: whether a leaf's later applications may be placed while an earlier one waits
/// (backfill, the default), or the queue is served strictly in order, its first waiting
/// application blocking the rest (head-of-line, what a FIFO queue does to gangs elsewhere).
pub const CS_QUEUE_BACKFILL: &str = "backfill";
pub const DEFAULT_CS_QUEUE_BACKFILL: bool = true;
/// Spindle's: how many waiting gangs of a leaf may hold nodes at once (in the leaf's order).
/// One (EASY backfilling's single reservation) keeps smaller work flowing around the gang
/// at the head; each further one fences off more nodes.
pub const CS_QUEUE_GANG_MAX_RESERVATIONS: &str = "gang.max-reservations";
pub const DEFAULT_CS_QUEUE_GANG_MAX_RESERVATIONS: u32 = 1;
/// The preemption monitor takes nothing from this queue (inherited; YARN's name).
pub const CS_QUEUE_DISABLE_PREEMPTION: &str = "disable_preemption";
/// Applications of this leaf never preempt each other (inherited; YARN's name).
pub const CS_QUEUE_INTRA_QUEUE_DISABLE_PREEMPTION: &str =
    "intra-queue-preemption.disable_preemption";
/// Spindle's `las` ordering: the attained-service thresholds, in GPU-seconds, between its
/// levels (a comma list, ascending; n thresholds make n+1 levels).
pub const CS_QUEUE_LAS_THRESHOLDS: &str = "ordering-policy.las.thresholds";
pub const DEFAULT_CS_QUEUE_LAS_THRESHOLDS: &str = "3600,36000";
/// Spindle's `las` ordering: a waiting application whose wait since it last ran exceeds
/// this many times its attained running time goes back to the first level (0: never).
pub const CS_QUEUE_LAS_PROMOTION_FACTOR: &str = "ordering-policy.las.promotion-factor";
pub const DEFAULT_CS_QUEUE_LAS_PROMOTION_FACTOR: f64 = 4.0;
/// Spindle's `fairshare` ordering: an application that has waited this many ms for its
/// next container goes ahead of every one that has not (Slurm's `PriorityMaxAge` as a hard
/// bound, and its default of 7 days); 0: never. A bound that fires under ordinary load
/// puts hundreds of jobs ahead of the fair-share order just when the queue is long
/// (`docs/simulator.md`: 24 h cost 1.1x-1.8x average JCT on Philly's trace at 256-384 GPUs).
pub const CS_QUEUE_FAIRSHARE_MAX_WAIT_MS: &str = "ordering-policy.fairshare.max-wait-ms";
pub const DEFAULT_CS_QUEUE_FAIRSHARE_MAX_WAIT_MS: u64 = 7 * 86_400_000;
/// YARN's per-user settings of a leaf, `user-settings.<user>.weight`: the user's share
/// (default 1; the `fairshare` ordering divides usage by it). The prefix of the family.
pub const CS_QUEUE_USER_SETTINGS_PREFIX: &str = "user-settings.";
/// What follows `user-settings.<user>.` for a user's weight.
pub const USER_SETTINGS_WEIGHT: &str = "weight";
/// Spindle's elastic gangs: how the leaf sizes them, `none` (granted the largest legal size
/// that fits when placed, never grown; shrunk toward their minimum before a rigid gang is
/// preempted) or `doubling` (the study's heuristic: every elastic job its minimum first,
/// then doublings by the best predicted time saved per added GPU; shrinks for waiting work).
pub const CS_QUEUE_ELASTIC_POLICY: &str = "elastic-policy";
pub const DEFAULT_CS_QUEUE_ELASTIC_POLICY: &str = "none";
/// How long a container's GPUs may stay idle (utilization below the queue's
/// `gpu-idle-threshold-percent` in every sample) before `gpu-idle-action` applies; 0 (the
/// default) turns the policy off. Inherited by children.
pub const CS_QUEUE_GPU_IDLE_TIMEOUT_MS: &str = "gpu-idle-timeout-ms";
pub const DEFAULT_CS_QUEUE_GPU_IDLE_TIMEOUT_MS: u64 = 0;
/// What happens to a container whose GPUs stayed idle past the timeout: `report` (the
/// application's diagnostics and the RM's log), `notify` (its AM hears of it in the allocate
/// answer's `idleGpuContainers`) or `release` (the RM stops the container). Inherited.
pub const CS_QUEUE_GPU_IDLE_ACTION: &str = "gpu-idle-action";
pub const DEFAULT_CS_QUEUE_GPU_IDLE_ACTION: &str = "report";
/// A GPU whose utilization is below this percent is idle (0..=100; inherited; default 5).
pub const CS_QUEUE_GPU_IDLE_THRESHOLD_PERCENT: &str = "gpu-idle-threshold-percent";
pub const DEFAULT_CS_QUEUE_GPU_IDLE_THRESHOLD_PERCENT: f64 = 5.0;
/// Priority of an application that names none.
pub const CS_QUEUE_DEFAULT_APPLICATION_PRIORITY: &str = "default-application-priority";
pub const DEFAULT_CS_QUEUE_DEFAULT_APPLICATION_PRIORITY: i32 = 0;
/// Seconds an application of the queue lives when it asks for no lifetime (-1: none).
pub const CS_QUEUE_DEFAULT_APPLICATION_LIFETIME: &str = "default-application-lifetime";
/// Seconds an application of the queue lives at most (-1: no maximum).
pub const CS_QUEUE_MAXIMUM_APPLICATION_LIFETIME: &str = "maximum-application-lifetime";
/// The queue's priority among its siblings.
pub const CS_QUEUE_PRIORITY: &str = "priority";
pub const DEFAULT_CS_QUEUE_PRIORITY: i32 = 0;
/// Whether the children of a queue with a nonzero capacity may sum to 0.
pub const CS_QUEUE_ALLOW_ZERO_CAPACITY_SUM: &str = "allow-zero-capacity-sum";
pub const DEFAULT_CS_QUEUE_ALLOW_ZERO_CAPACITY_SUM: bool = false;
/// The labelled partitions the queue may use (`*`, a comma list, blank for none); unset
/// inherits. Also the prefix of `accessible-node-labels.<label>.capacity` and
/// `.maximum-capacity`.
pub const CS_QUEUE_ACCESSIBLE_NODE_LABELS: &str = "accessible-node-labels";
/// The partition of the queue's asks (and applications) that name none.
pub const CS_QUEUE_DEFAULT_NODE_LABEL_EXPRESSION: &str = "default-node-label-expression";

// ---- HTTP serving (both daemons) -------------------------------------------------------

/// Most connections a daemon keeps open at once; a connection past it is closed as soon as
/// it is accepted (accepting never blocks). Spindle's own: YARN's Jetty has no such key.
pub const HTTP_MAX_CONNECTIONS: &str = "spindle.http.max-connections";
pub const DEFAULT_HTTP_MAX_CONNECTIONS: u64 = 8192;
/// Most connections one peer IP address may hold open at once (an NM, its AMs and clients
/// on one host share it); past it, that peer's new connections are closed at once.
pub const HTTP_MAX_CONNECTIONS_PER_PEER: &str = "spindle.http.max-connections-per-peer";
pub const DEFAULT_HTTP_MAX_CONNECTIONS_PER_PEER: u64 = 512;
/// How long a connection may take to send a whole request head (request line and headers;
/// on a kept-alive connection, from the first byte of the request; with TLS the handshake
/// counts too) before it is closed.
pub const HTTP_HEADER_READ_TIMEOUT_MS: &str = "spindle.http.header-read-timeout-ms";
pub const DEFAULT_HTTP_HEADER_READ_TIMEOUT_MS: u64 = 10_000;
/// How long a kept-alive connection may stay idle (no request in flight, no byte either way)
/// before it is closed.
pub const HTTP_IDLE_TIMEOUT_MS: &str = "spindle.http.idle-timeout-ms";
pub const DEFAULT_HTTP_IDLE_TIMEOUT_MS: u64 = 60_000;
/// Most connections from one peer IP address that may wait for a place (past
/// `spindle.http.max-connections-per-peer`, or the total cap) at once; past it a new
/// connection from that peer is closed at once with a WARN. Spindle's own.
pub const HTTP_MAX_QUEUED_CONNECTIONS_PER_PEER: &str =
    "spindle.http.max-queued-connections-per-peer";
pub const DEFAULT_HTTP_MAX_QUEUED_CONNECTIONS_PER_PEER: u64 = 1024;
/// How long a connection may wait for a place before it is closed unserved, with a WARN.
pub const HTTP_CONNECTION_QUEUE_TIMEOUT_MS: &str = "spindle.http.connection-queue-timeout-ms";
pub const DEFAULT_HTTP_CONNECTION_QUEUE_TIMEOUT_MS: u64 = 30_000;
/// File descriptors the serve loop leaves to the rest of the daemon (store, logs, container
/// pipes): with this few left under the open-file limit, the connection idle the longest is
/// closed to make room for each new one.
pub const HTTP_RESERVED_FILE_DESCRIPTORS: &str = "spindle.http.reserved-file-descriptors";
pub const DEFAULT_HTTP_RESERVED_FILE_DESCRIPTORS: u64 = 128;
/// YARN's `yarn.http.policy`: `HTTP_ONLY` (plain HTTP) or `HTTPS_ONLY` (both daemons serve
/// TLS only, advertise `https://` addresses and every Spindle client dials with TLS).
pub const HTTP_POLICY: &str = "yarn.http.policy";
pub const DEFAULT_HTTP_POLICY: &str = "HTTP_ONLY";
/// With `HTTPS_ONLY`: the daemon's certificate chain, PEM (its own certificate first).
pub const SSL_SERVER_CERTIFICATE_FILE: &str = "spindle.ssl.server.certificate-file";
/// With `HTTPS_ONLY`: the private key of that certificate, PEM (PKCS#8, PKCS#1 or SEC1).
pub const SSL_SERVER_PRIVATE_KEY_FILE: &str = "spindle.ssl.server.private-key-file";
/// The CA certificates (PEM) Spindle's clients trust besides the system roots: the RM
/// dialing NMs, NMs dialing the RM, AMs and the CLI.
pub const SSL_CLIENT_CA_FILE: &str = "spindle.ssl.client.ca-file";

// ---- Resource types (resource-types.xml, node-resources.xml) ---------------------------

/// Resource types beyond memory and vcores, e.g. `yarn.io/gpu,yarn.io/fpga`.
pub const RESOURCE_TYPES: &str = "yarn.resource-types";
/// Prefix of per-type settings: `yarn.resource-types.<type>.units`, `.minimum-allocation`,
/// `.maximum-allocation`.
pub const RESOURCE_TYPES_PREFIX: &str = "yarn.resource-types.";
/// Suffix of a type's largest allocation: `yarn.resource-types.<type>.maximum-allocation`.
pub const RESOURCE_TYPE_MAXIMUM_ALLOCATION: &str = "maximum-allocation";
/// Prefix of an NM's amount of each resource type: `yarn.nodemanager.resource-type.<type>`.
pub const NM_RESOURCE_TYPE_PREFIX: &str = "yarn.nodemanager.resource-type.";

// ---- NodeManager ---------------------------------------------------------------------

/// Host name the NM registers under (its NodeId host).
pub const NM_HOSTNAME: &str = "yarn.nodemanager.hostname";
pub const DEFAULT_NM_HOSTNAME: &str = "0.0.0.0";
/// Address the NM serves its REST API (container start/stop, node info) on; port 0 picks a
/// free port, so that several NMs fit on one host.
pub const NM_WEBAPP_ADDRESS: &str = "yarn.nodemanager.webapp.address";
pub const DEFAULT_NM_WEBAPP_ADDRESS: &str = "${yarn.nodemanager.hostname}:8042";
/// Where the NM finds the RM (`host:port`); empty means the RM webapp address.
pub const SPINDLE_NM_RM_ADDRESS: &str = "spindle.nodemanager.rm-address";
pub const DEFAULT_SPINDLE_NM_RM_ADDRESS: &str = "";
/// Memory the NM offers to containers.
pub const NM_RESOURCE_MEMORY_MB: &str = "yarn.nodemanager.resource.memory-mb";
pub const DEFAULT_NM_RESOURCE_MEMORY_MB: i64 = 8192;
/// Vcores the NM offers to containers.
pub const NM_RESOURCE_CPU_VCORES: &str = "yarn.nodemanager.resource.cpu-vcores";
pub const DEFAULT_NM_RESOURCE_CPU_VCORES: i64 = 8;
/// Whether the NM sizes memory and vcores from the machine instead of the two keys above.
pub const NM_DETECT_HARDWARE_CAPABILITIES: &str =
    "yarn.nodemanager.resource.detect-hardware-capabilities";
pub const DEFAULT_NM_DETECT_HARDWARE_CAPABILITIES: bool = false;
/// Device plugins the NM loads: `yarn.io/gpu`, `yarn.io/fpga`; empty for none.
pub const NM_RESOURCE_PLUGINS: &str = "yarn.nodemanager.resource-plugins";
pub const DEFAULT_NM_RESOURCE_PLUGINS: &str = "";
/// GPUs the NM may hand out: `auto` (all discovered) or `index:minor,...`.
pub const NM_GPU_ALLOWED_DEVICES: &str =
    "yarn.nodemanager.resource-plugins.gpu.allowed-gpu-devices";
pub const DEFAULT_NM_GPU_ALLOWED_DEVICES: &str = "auto";
/// Where to find `nvidia-smi` (file or directory) when NVML is unavailable; unset: the
/// NM's built-in search.
pub const NM_GPU_PATH_TO_DISCOVERY_EXECUTABLES: &str =
    "yarn.nodemanager.resource-plugins.gpu.path-to-discovery-executables";
/// FPGAs the NM may hand out: `auto` or a list of minor numbers.
pub const NM_FPGA_ALLOWED_DEVICES: &str =
    "yarn.nodemanager.resource-plugins.fpga.allowed-fpga-devices";
pub const DEFAULT_NM_FPGA_ALLOWED_DEVICES: &str = "auto";
/// Directories (comma list) for container working directories and localized files.
pub const NM_LOCAL_DIRS: &str = "yarn.nodemanager.local-dirs";
pub const DEFAULT_NM_LOCAL_DIRS: &str = "${hadoop.tmp.dir}/nm-local-dir";
/// Directories (comma list) for container stdout/stderr (Hadoop's default uses
/// `${yarn.log.dir}`, which Spindle does not have).
pub const NM_LOG_DIRS: &str = "yarn.nodemanager.log-dirs";
pub const DEFAULT_NM_LOG_DIRS: &str = "${hadoop.tmp.dir}/nm-logs";
/// Directory of the NM's own store of running containers, which survives an NM restart.
pub const NM_RECOVERY_DIR: &str = "yarn.nodemanager.recovery.dir";
pub const DEFAULT_NM_RECOVERY_DIR: &str = "${hadoop.tmp.dir}/yarn-nm-recovery";
/// Grace period between SIGTERM and SIGKILL when a container is stopped.
pub const NM_SLEEP_DELAY_BEFORE_SIGKILL_MS: &str = "yarn.nodemanager.sleep-delay-before-sigkill.ms";
pub const DEFAULT_NM_SLEEP_DELAY_BEFORE_SIGKILL_MS: u64 = 250;
/// How long a held gang start (`"hold"` on a start call) waits for its release when the call
/// names no timeout; held containers not released by then are stopped. 1 ms to 10 min.
pub const SPINDLE_NM_LAUNCH_HOLD_TIMEOUT_MS: &str = "spindle.nodemanager.launch-hold.timeout-ms";
pub const DEFAULT_SPINDLE_NM_LAUNCH_HOLD_TIMEOUT_MS: u64 = 60_000;
/// Seconds to keep a finished container's directories before deleting them (debugging).
pub const NM_DELETE_DEBUG_DELAY_SEC: &str = "yarn.nodemanager.delete.debug-delay-sec";
pub const DEFAULT_NM_DELETE_DEBUG_DELAY_SEC: i64 = 0;
/// Whether a container exceeding its virtual-memory limit is killed.
pub const NM_VMEM_CHECK_ENABLED: &str = "yarn.nodemanager.vmem-check-enabled";
pub const DEFAULT_NM_VMEM_CHECK_ENABLED: bool = true;
/// Whether a container exceeding its physical-memory limit is killed.
pub const NM_PMEM_CHECK_ENABLED: &str = "yarn.nodemanager.pmem-check-enabled";
pub const DEFAULT_NM_PMEM_CHECK_ENABLED: bool = true;
/// Virtual memory a container may use per unit of its physical memory limit.
pub const NM_VMEM_PMEM_RATIO: &str = "yarn.nodemanager.vmem-pmem-ratio";
pub const DEFAULT_NM_VMEM_PMEM_RATIO: f64 = 2.1;
/// How often the NM measures each container's memory and CPU use.
pub const NM_CONTAINER_MONITOR_INTERVAL_MS: &str = "yarn.nodemanager.container-monitor.interval-ms";
pub const DEFAULT_NM_CONTAINER_MONITOR_INTERVAL_MS: u64 = 3000;
/// How often the NM runs its health check script.
pub const NM_HEALTH_CHECKER_INTERVAL_MS: &str = "yarn.nodemanager.health-checker.interval-ms";
pub const DEFAULT_NM_HEALTH_CHECKER_INTERVAL_MS: u64 = 600_000;
/// Health check script; output starting with `ERROR` marks the node unhealthy. Unset: none.
pub const NM_HEALTH_CHECKER_SCRIPT_PATH: &str = "yarn.nodemanager.health-checker.script.path";
/// How long the health check script may run before it counts as failed.
pub const NM_HEALTH_CHECKER_SCRIPT_TIMEOUT_MS: &str =
    "yarn.nodemanager.health-checker.script.timeout-ms";
pub const DEFAULT_NM_HEALTH_CHECKER_SCRIPT_TIMEOUT_MS: u64 = 1_200_000;
/// cgroup (under each controller's root) that holds all of the NM's containers.
pub const NM_CGROUPS_HIERARCHY: &str =
    "yarn.nodemanager.linux-container-executor.cgroups.hierarchy";
pub const DEFAULT_NM_CGROUPS_HIERARCHY: &str = "/spindle";
/// Where cgroups are mounted; unset: found from `/proc/self/mountinfo`.
pub const NM_CGROUPS_MOUNT_PATH: &str =
    "yarn.nodemanager.linux-container-executor.cgroups.mount-path";

// ---- NodeManager: keys its `config` module used to spell itself. Their defaults are not
// (yet) in `DEFAULTS` below: listing them there would change what a `${key}` reference to an
// unset key expands to.

/// Whether a stopped NM leaves its containers running for the next NM to re-adopt.
pub const NM_RECOVERY_ENABLED: &str = "yarn.nodemanager.recovery.enabled";
pub const DEFAULT_NM_RECOVERY_ENABLED: bool = false;
/// NM environment variables a container inherits unless its launch context sets them.
pub const NM_ENV_WHITELIST: &str = "yarn.nodemanager.env-whitelist";
pub const DEFAULT_NM_ENV_WHITELIST: &str = "JAVA_HOME,PATH,LANG,TZ,TMPDIR,RUST_LOG,RUST_BACKTRACE";
/// How much of a failed container's stderr goes into its diagnostics.
pub const NM_STDERR_TAIL_BYTES: &str = "yarn.nodemanager.container.stderr.tail.bytes";
pub const DEFAULT_NM_STDERR_TAIL_BYTES: u64 = 4096;
/// Seconds an ended application's container logs are kept (no log aggregation); negative:
/// forever.
pub const NM_LOG_RETAIN_SECONDS: &str = "yarn.nodemanager.log.retain-seconds";
pub const DEFAULT_NM_LOG_RETAIN_SECONDS: i64 = 10_800;

/// Where the FPGA vendor's discovery tool (`aocl`) is; unset: `$ALTERAOCLSDKROOT/bin/aocl`,
/// else `aocl` on the NM's `PATH` (YARN's order).
pub const NM_FPGA_PATH_TO_DISCOVERY_EXECUTABLES: &str =
    "yarn.nodemanager.resource-plugins.fpga.path-to-discovery-executables";
/// The FPGA vendor plugin; YARN ships (and Spindle implements) only Intel's OpenCL one.
pub const NM_FPGA_VENDOR_PLUGIN_CLASS: &str =
    "yarn.nodemanager.resource-plugins.fpga.vendor-plugin.class";
pub const DEFAULT_NM_FPGA_VENDOR_PLUGIN_CLASS: &str =
    "org.apache.hadoop.yarn.server.nodemanager.containermanager.resourceplugin.fpga.IntelFpgaOpenclPlugin";
/// How long one run of a discovery executable (`nvidia-smi`, `aocl diagnose`) may take before
/// it is killed. YARN hard-codes 10 s; configurable so tests of a hanging tool stay short.
pub const SPINDLE_NM_DEVICE_DISCOVERY_TIMEOUT_MS: &str =
    "spindle.nodemanager.resource-plugins.discovery-timeout-ms";
pub const DEFAULT_SPINDLE_NM_DEVICE_DISCOVERY_TIMEOUT_MS: u64 = 10_000;
/// How often the GPU plugin re-reads utilization, memory and temperature (and notices GPUs
/// that vanished); 0 disables the refresh. YARN re-runs `nvidia-smi` on every REST read
/// instead; a background refresh keeps a hanging `nvidia-smi` away from REST callers.
pub const SPINDLE_NM_GPU_REFRESH_INTERVAL_MS: &str =
    "spindle.nodemanager.resource-plugins.gpu.refresh-interval-ms";
pub const DEFAULT_SPINDLE_NM_GPU_REFRESH_INTERVAL_MS: u64 = 30_000;
/// How often the GPU plugin samples every GPU's utilization, memory used and temperature
/// (`nvidia-smi --query-gpu`, or NVML), so that each container's GPUs' use goes to the RM
/// with the heartbeats (idle-GPU detection); 0 disables the sampling.
pub const SPINDLE_NM_GPU_UTILIZATION_INTERVAL_MS: &str =
    "spindle.nodemanager.resource-plugins.gpu.utilization-interval-ms";
pub const DEFAULT_SPINDLE_NM_GPU_UTILIZATION_INTERVAL_MS: u64 = 10_000;
/// Major number of GPU device nodes (`/dev/nvidia<minor>`) when the node itself cannot be
/// stat'ed (YARN's container-executor `gpu.major-device-number`).
pub const SPINDLE_NM_GPU_MAJOR_DEVICE_NUMBER: &str =
    "spindle.nodemanager.resource-plugins.gpu.major-device-number";
pub const DEFAULT_SPINDLE_NM_GPU_MAJOR_DEVICE_NUMBER: u32 = 195;
/// Major number of FPGA device nodes when `/dev/<name>` cannot be stat'ed (YARN's
/// container-executor `fpga.major-device-number`).
pub const SPINDLE_NM_FPGA_MAJOR_DEVICE_NUMBER: &str =
    "spindle.nodemanager.resource-plugins.fpga.major-device-number";
pub const DEFAULT_SPINDLE_NM_FPGA_MAJOR_DEVICE_NUMBER: u32 = 246;

/// YARN's executor choice: a class name ending in `DefaultContainerExecutor` turns cgroups
/// off, one ending in `LinuxContainerExecutor` asks for them; unset means "cgroups where the
/// node has them" (Spindle's default, unlike YARN's).
pub const NM_CONTAINER_EXECUTOR_CLASS: &str = "yarn.nodemanager.container-executor.class";
/// Spindle's switch: false keeps containers out of cgroups whatever the executor class.
pub const SPINDLE_NM_CGROUPS_ENABLED: &str = "spindle.nodemanager.cgroups.enabled";
pub const DEFAULT_SPINDLE_NM_CGROUPS_ENABLED: bool = true;
/// A hard CPU quota of `vcores` cores per container, not only a proportional share.
pub const NM_CGROUPS_STRICT_RESOURCE_USAGE: &str =
    "yarn.nodemanager.linux-container-executor.cgroups.strict-resource-usage";
pub const DEFAULT_NM_CGROUPS_STRICT_RESOURCE_USAGE: bool = false;
/// `pids.max` of every container; 0 = no limit. The default is generous for training jobs
/// with many data-loader workers, and small enough to stop a fork bomb from taking the node's
/// pid space.
pub const SPINDLE_NM_CONTAINER_PIDS_LIMIT: &str = "spindle.nodemanager.container.pids-limit";
pub const DEFAULT_SPINDLE_NM_CONTAINER_PIDS_LIMIT: u64 = 4096;
/// The container runtimes the NM allows (YARN: `default`, `docker`, `runc`), comma-separated.
pub const NM_RUNTIME_ALLOWED_RUNTIMES: &str = "yarn.nodemanager.runtime.linux.allowed-runtimes";
pub const DEFAULT_NM_RUNTIME_ALLOWED_RUNTIMES: &str = "default";
/// The OCI runtime binary (a path or a name in `PATH`); empty: `crun` in `PATH`, else `runc`.
pub const SPINDLE_NM_RUNTIME_OCI_BINARY: &str = "spindle.nodemanager.runtime.oci.binary";
/// Host directories (and what is below them) an AM may mount read-only into a container.
pub const NM_RUNC_ALLOWED_RO_MOUNTS: &str = "yarn.nodemanager.runtime.linux.runc.allowed-ro-mounts";
/// Host directories an AM may mount read-write (read-only too).
pub const NM_RUNC_ALLOWED_RW_MOUNTS: &str = "yarn.nodemanager.runtime.linux.runc.allowed-rw-mounts";
/// Mounts every OCI container gets read-only (`src:dst` or `path`, comma-separated).
pub const NM_RUNC_DEFAULT_RO_MOUNTS: &str = "yarn.nodemanager.runtime.linux.runc.default-ro-mounts";
/// Mounts every OCI container gets read-write.
pub const NM_RUNC_DEFAULT_RW_MOUNTS: &str = "yarn.nodemanager.runtime.linux.runc.default-rw-mounts";
/// Whether an AM may ask for a privileged OCI container.
pub const NM_RUNC_PRIVILEGED_ALLOWED: &str =
    "yarn.nodemanager.runtime.linux.runc.privileged-containers.allowed";
pub const DEFAULT_NM_RUNC_PRIVILEGED_ALLOWED: bool = false;
/// Where CDI specifications are read from (comma-separated directories, JSON files).
pub const SPINDLE_NM_RUNTIME_OCI_CDI_SPEC_DIRS: &str =
    "spindle.nodemanager.runtime.oci.cdi-spec-dirs";
pub const DEFAULT_SPINDLE_NM_RUNTIME_OCI_CDI_SPEC_DIRS: &str = "/etc/cdi,/var/run/cdi";
/// `auto`, `v1` (devices.deny) or `ebpf` (a cgroup2 device program).
pub const SPINDLE_NM_CGROUPS_DEVICE_ISOLATION: &str =
    "spindle.nodemanager.cgroups.device-isolation";
pub const DEFAULT_SPINDLE_NM_CGROUPS_DEVICE_ISOLATION: &str = "auto";

/// `limit-users` of YARN's non-secure LinuxContainerExecutor: one local user for all.
pub const NM_LCE_LIMIT_USERS: &str =
    "yarn.nodemanager.linux-container-executor.nonsecure-mode.limit-users";
pub const DEFAULT_NM_LCE_LIMIT_USERS: bool = true;
/// The local user containers run as when users are limited.
pub const NM_LCE_LOCAL_USER: &str =
    "yarn.nodemanager.linux-container-executor.nonsecure-mode.local-user";
pub const DEFAULT_NM_LCE_LOCAL_USER: &str = "nobody";
/// The lowest uid a submitter's containers may run as (`container-executor.cfg`'s
/// `min.user.id`).
pub const SPINDLE_NM_LCE_MIN_USER_ID: &str =
    "spindle.nodemanager.linux-container-executor.min-user-id";
pub const DEFAULT_SPINDLE_NM_LCE_MIN_USER_ID: u64 = 1000;
/// Users whose containers may never run (`container-executor.cfg`'s `banned.users`).
pub const SPINDLE_NM_LCE_BANNED_USERS: &str =
    "spindle.nodemanager.linux-container-executor.banned-users";
pub const DEFAULT_SPINDLE_NM_LCE_BANNED_USERS: &str = "yarn,hdfs,mapred,bin";

// ---- The NM's image store (issue 28): pulls, cache, credentials.
/// Where pulled images live: blobs, one unpacked directory per layer, a record per image.
/// Unset: `<first of yarn.nodemanager.local-dirs>/images`.
pub const SPINDLE_NM_OCI_CACHE_DIR: &str = "spindle.nodemanager.runtime.oci.cache-dir";
/// Above this size, least-recently-used images no container uses are evicted (a size:
/// bytes, or with k/m/g/t suffixes).
pub const SPINDLE_NM_OCI_CACHE_MAX_BYTES: &str = "spindle.nodemanager.runtime.oci.cache-max-bytes";
pub const DEFAULT_SPINDLE_NM_OCI_CACHE_MAX_BYTES: u64 = 50 << 30;
/// Registries (`host:port`, comma-separated) pulled from over plain HTTP; every other
/// registry is HTTPS only.
pub const SPINDLE_NM_OCI_INSECURE_REGISTRIES: &str =
    "spindle.nodemanager.runtime.oci.insecure-registries";
/// A Docker-style `config.json` (its `auths` map) with registry credentials. Unset:
/// anonymous pulls.
pub const SPINDLE_NM_OCI_AUTH_FILE: &str = "spindle.nodemanager.runtime.oci.auth-file";
/// Directories (comma-separated) under which an application master may name a local image
/// (`oci:/dir`, `oci-archive:/file.tar`); none by default, since the NM reads them as root.
pub const SPINDLE_NM_OCI_LOCAL_IMAGE_DIRS: &str =
    "spindle.nodemanager.runtime.oci.local-image-dirs";

/// YARN 3's name for [`NM_HEALTH_CHECKER_SCRIPT_TIMEOUT_MS`]; when set it wins, and when
/// unset the older key (and its default) applies.
pub const NM_HEALTH_CHECKER_TIMEOUT_MS: &str = "yarn.nodemanager.health-checker.timeout-ms";
/// Arguments of the health check script, split on white space.
pub const NM_HEALTH_CHECKER_SCRIPT_OPTS: &str = "yarn.nodemanager.health-checker.script.opts";
pub const DEFAULT_NM_HEALTH_CHECKER_SCRIPT_OPTS: &str = "";
/// Whether the local and log dirs are checked (a bad dir can make the node unhealthy).
pub const NM_DISK_CHECKER_ENABLE: &str = "yarn.nodemanager.disk-health-checker.enable";
pub const DEFAULT_NM_DISK_CHECKER_ENABLE: bool = true;
/// How often the dirs are checked.
pub const NM_DISK_CHECKER_INTERVAL_MS: &str = "yarn.nodemanager.disk-health-checker.interval-ms";
pub const DEFAULT_NM_DISK_CHECKER_INTERVAL_MS: u64 = 120_000;
/// Fraction (0..=1) of the local dirs, and of the log dirs, that must be good.
pub const NM_DISK_CHECKER_MIN_HEALTHY: &str =
    "yarn.nodemanager.disk-health-checker.min-healthy-disks";
pub const DEFAULT_NM_DISK_CHECKER_MIN_HEALTHY: f64 = 0.25;
/// A file system fuller than this (percent) makes its dir bad.
pub const NM_DISK_CHECKER_MAX_UTILIZATION: &str =
    "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage";
pub const DEFAULT_NM_DISK_CHECKER_MAX_UTILIZATION: f64 = 90.0;
/// Less free space than this (MB) makes a dir bad.
pub const NM_DISK_CHECKER_MIN_FREE_MB: &str =
    "yarn.nodemanager.disk-health-checker.min-free-space-per-disk-mb";
pub const DEFAULT_NM_DISK_CHECKER_MIN_FREE_MB: u64 = 0;

/// Where the NM's node label (its partition) comes from under distributed label
/// configuration: unset (none), `config` or `script`.
pub const NM_NODE_LABELS_PROVIDER: &str = "yarn.nodemanager.node-labels.provider";
/// The `config` provider's partition: one label; empty is the default partition.
pub const NM_NODE_LABELS_PROVIDER_CONFIGURED_NODE_PARTITION: &str =
    "yarn.nodemanager.node-labels.provider.configured-node-partition";
/// The `script` provider's executable; it prints `NODE_PARTITION:<label>`.
pub const NM_NODE_LABELS_PROVIDER_SCRIPT_PATH: &str =
    "yarn.nodemanager.node-labels.provider.script.path";
/// The label script's arguments, split on white space.
pub const NM_NODE_LABELS_PROVIDER_SCRIPT_OPTS: &str =
    "yarn.nodemanager.node-labels.provider.script.opts";
/// How often the label script runs.
pub const NM_NODE_LABELS_PROVIDER_FETCH_INTERVAL_MS: &str =
    "yarn.nodemanager.node-labels.provider.fetch-interval-ms";
pub const DEFAULT_NM_NODE_LABELS_PROVIDER_FETCH_INTERVAL_MS: u64 = 600_000;
/// How long one run of the label script may take before it is killed.
pub const NM_NODE_LABELS_PROVIDER_FETCH_TIMEOUT_MS: &str =
    "yarn.nodemanager.node-labels.provider.fetch-timeout-ms";
pub const DEFAULT_NM_NODE_LABELS_PROVIDER_FETCH_TIMEOUT_MS: u64 = 1_200_000;
/// Where the NM's own `nm.yarn.io/` attributes come from: unset or `none`, `config`, `script`.
pub const NM_NODE_ATTRIBUTES_PROVIDER: &str = "yarn.nodemanager.node-attributes.provider";
/// The `config` provider's attributes: `name,STRING,value:name2,STRING,value2`.
pub const NM_NODE_ATTRIBUTES_PROVIDER_CONFIGURED_NODE_ATTRIBUTES: &str =
    "yarn.nodemanager.node-attributes.provider.configured-node-attributes";
/// The `script` provider's executable; it prints `NODE_ATTRIBUTE:name,STRING,value` lines.
pub const NM_NODE_ATTRIBUTES_PROVIDER_SCRIPT_PATH: &str =
    "yarn.nodemanager.node-attributes.provider.script.path";
/// The attribute script's arguments, split on white space.
pub const NM_NODE_ATTRIBUTES_PROVIDER_SCRIPT_OPTS: &str =
    "yarn.nodemanager.node-attributes.provider.script.opts";
/// How often the attribute script runs.
pub const NM_NODE_ATTRIBUTES_PROVIDER_FETCH_INTERVAL_MS: &str =
    "yarn.nodemanager.node-attributes.provider.fetch-interval-ms";
pub const DEFAULT_NM_NODE_ATTRIBUTES_PROVIDER_FETCH_INTERVAL_MS: u64 = 600_000;
/// How long one run of the attribute script may take before it is killed.
pub const NM_NODE_ATTRIBUTES_PROVIDER_FETCH_TIMEOUT_MS: &str =
    "yarn.nodemanager.node-attributes.provider.fetch-timeout-ms";
pub const DEFAULT_NM_NODE_ATTRIBUTES_PROVIDER_FETCH_TIMEOUT_MS: u64 = 1_200_000;

/// The decimal text of `v` at compile time, left-aligned, with its length: how
/// [`DEFAULTS`] spells a typed default without writing its number a second time.
pub const fn decimal(v: i128) -> ([u8; 40], usize) {
    let mut rev = [0u8; 40];
    let mut n = v.unsigned_abs();
    let mut i = 0;
    if n == 0 {
        rev[0] = b'0';
        i = 1;
    }
    while n > 0 {
        rev[i] = b'0' + (n % 10) as u8;
        n /= 10;
        i += 1;
    }
    let mut out = [0u8; 40];
    let mut j = 0;
    if v < 0 {
        out[0] = b'-';
        j = 1;
    }
    while i > 0 {
        i -= 1;
        out[j] = rev[i];
        j += 1;
    }
    (out, j)
}

/// The text of an integer default constant, made from the constant itself.
macro_rules! int_text {
    ($c:expr) => {{
        const DIGITS: ([u8; 40], usize) = decimal($c as i128);
        const TEXT: &str = match std::str::from_utf8(DIGITS.0.split_at(DIGITS.1).0) {
            Ok(t) => t,
            Err(_) => panic!("decimal digits are ASCII"),
        };
        TEXT
    }};
}

/// The text of a boolean default constant.
macro_rules! bool_text {
    ($c:expr) => {
        if $c {
            "true"
        } else {
            "false"
        }
    };
}

/// Every default above as the text it would have in a `*-default.xml` file: what a `${key}`
/// reference to an unset key expands to, and what `docs/configuration.md` lists. Keys with
/// no default (unset means "none") are absent.
///
/// Not (yet) listed: the defaults of the keys the RM's configuration moved here without a
/// change of behaviour (the `hadoop.security.groups.*` and static-mapping keys,
/// [`RM_CLUSTER_ID`], [`SPINDLE_SCHEDULER_GANG_TIMEOUT_MS`] and the CapacityScheduler keys
/// after [`CS_MAXIMUM_AM_RESOURCE_PERCENT`]): listing them would change what a `${key}`
/// reference to them expands to.
pub const DEFAULTS: &[(&str, &str)] = &[
    (HADOOP_TMP_DIR, DEFAULT_HADOOP_TMP_DIR),
    (RM_HOSTNAME, DEFAULT_RM_HOSTNAME),
    (RM_WEBAPP_ADDRESS, DEFAULT_RM_WEBAPP_ADDRESS),
    (
        CLIENT_FAILOVER_MAX_ATTEMPTS,
        int_text!(DEFAULT_CLIENT_FAILOVER_MAX_ATTEMPTS),
    ),
    (
        CLIENT_FAILOVER_SLEEP_BASE_MS,
        int_text!(DEFAULT_CLIENT_FAILOVER_SLEEP_BASE_MS),
    ),
    (
        CLIENT_FAILOVER_SLEEP_MAX_MS,
        int_text!(DEFAULT_CLIENT_FAILOVER_SLEEP_MAX_MS),
    ),
    (RM_SCHEDULER_CLASS, DEFAULT_RM_SCHEDULER_CLASS),
    (
        RM_NM_HEARTBEAT_INTERVAL_MS,
        int_text!(DEFAULT_RM_NM_HEARTBEAT_INTERVAL_MS),
    ),
    (
        NM_LIVENESS_EXPIRY_MS,
        int_text!(DEFAULT_NM_LIVENESS_EXPIRY_MS),
    ),
    (
        AM_LIVENESS_EXPIRY_MS,
        int_text!(DEFAULT_AM_LIVENESS_EXPIRY_MS),
    ),
    (
        RM_CONTAINER_ALLOCATION_EXPIRY_MS,
        int_text!(DEFAULT_RM_CONTAINER_ALLOCATION_EXPIRY_MS),
    ),
    (
        RM_CONTAINER_TOKEN_MASTER_KEY_ROLLING_INTERVAL_SECS,
        int_text!(DEFAULT_RM_CONTAINER_TOKEN_MASTER_KEY_ROLLING_INTERVAL_SECS),
    ),
    (RM_AM_MAX_ATTEMPTS, int_text!(DEFAULT_RM_AM_MAX_ATTEMPTS)),
    (
        RM_MAX_COMPLETED_APPLICATIONS,
        int_text!(DEFAULT_RM_MAX_COMPLETED_APPLICATIONS),
    ),
    (
        RM_NM_GRACEFUL_DECOMMISSION_TIMEOUT_SECS,
        int_text!(DEFAULT_RM_NM_GRACEFUL_DECOMMISSION_TIMEOUT_SECS),
    ),
    (
        SPINDLE_RM_STATE_STORE_PATH,
        DEFAULT_SPINDLE_RM_STATE_STORE_PATH,
    ),
    (
        SPINDLE_RM_BLOB_STORE_MAX_FILE_BYTES,
        int_text!(DEFAULT_SPINDLE_RM_BLOB_STORE_MAX_FILE_BYTES),
    ),
    (
        SPINDLE_RM_BLOB_STORE_MAX_USER_BYTES,
        int_text!(DEFAULT_SPINDLE_RM_BLOB_STORE_MAX_USER_BYTES),
    ),
    (
        SPINDLE_RM_BLOB_STORE_RETENTION_MS,
        int_text!(DEFAULT_SPINDLE_RM_BLOB_STORE_RETENTION_MS),
    ),
    (
        SPINDLE_RM_BLOB_STORE_CLEANER_INTERVAL_MS,
        int_text!(DEFAULT_SPINDLE_RM_BLOB_STORE_CLEANER_INTERVAL_MS),
    ),
    (
        RM_SCHEDULER_MONITOR_ENABLE,
        bool_text!(DEFAULT_RM_SCHEDULER_MONITOR_ENABLE),
    ),
    (ACL_ENABLE, bool_text!(DEFAULT_ACL_ENABLE)),
    (ADMIN_ACL, DEFAULT_ADMIN_ACL),
    (
        CLUSTER_MAX_APPLICATION_PRIORITY,
        int_text!(DEFAULT_CLUSTER_MAX_APPLICATION_PRIORITY),
    ),
    (NODE_LABELS_ENABLED, bool_text!(DEFAULT_NODE_LABELS_ENABLED)),
    (
        SCHEDULER_MIN_ALLOCATION_MB,
        int_text!(DEFAULT_SCHEDULER_MIN_ALLOCATION_MB),
    ),
    (
        SCHEDULER_MAX_ALLOCATION_MB,
        int_text!(DEFAULT_SCHEDULER_MAX_ALLOCATION_MB),
    ),
    (
        SCHEDULER_MIN_ALLOCATION_VCORES,
        int_text!(DEFAULT_SCHEDULER_MIN_ALLOCATION_VCORES),
    ),
    (
        SCHEDULER_MAX_ALLOCATION_VCORES,
        int_text!(DEFAULT_SCHEDULER_MAX_ALLOCATION_VCORES),
    ),
    (CS_RESOURCE_CALCULATOR, DEFAULT_CS_RESOURCE_CALCULATOR),
    (
        CS_MAXIMUM_APPLICATIONS,
        int_text!(DEFAULT_CS_MAXIMUM_APPLICATIONS),
    ),
    (CS_MAXIMUM_AM_RESOURCE_PERCENT, "0.1"),
    (NM_HOSTNAME, DEFAULT_NM_HOSTNAME),
    (NM_WEBAPP_ADDRESS, DEFAULT_NM_WEBAPP_ADDRESS),
    (SPINDLE_NM_RM_ADDRESS, DEFAULT_SPINDLE_NM_RM_ADDRESS),
    (
        NM_RESOURCE_MEMORY_MB,
        int_text!(DEFAULT_NM_RESOURCE_MEMORY_MB),
    ),
    (
        NM_RESOURCE_CPU_VCORES,
        int_text!(DEFAULT_NM_RESOURCE_CPU_VCORES),
    ),
    (
        NM_DETECT_HARDWARE_CAPABILITIES,
        bool_text!(DEFAULT_NM_DETECT_HARDWARE_CAPABILITIES),
    ),
    (NM_RESOURCE_PLUGINS, DEFAULT_NM_RESOURCE_PLUGINS),
    (NM_GPU_ALLOWED_DEVICES, DEFAULT_NM_GPU_ALLOWED_DEVICES),
    (NM_FPGA_ALLOWED_DEVICES, DEFAULT_NM_FPGA_ALLOWED_DEVICES),
    (NM_LOCAL_DIRS, DEFAULT_NM_LOCAL_DIRS),
    (NM_LOG_DIRS, DEFAULT_NM_LOG_DIRS),
    (
        SPINDLE_NM_OCI_CACHE_MAX_BYTES,
        int_text!(DEFAULT_SPINDLE_NM_OCI_CACHE_MAX_BYTES),
    ),
    (NM_RECOVERY_DIR, DEFAULT_NM_RECOVERY_DIR),
    (
        NM_SLEEP_DELAY_BEFORE_SIGKILL_MS,
        int_text!(DEFAULT_NM_SLEEP_DELAY_BEFORE_SIGKILL_MS),
    ),
    (
        SPINDLE_NM_LAUNCH_HOLD_TIMEOUT_MS,
        int_text!(DEFAULT_SPINDLE_NM_LAUNCH_HOLD_TIMEOUT_MS),
    ),
    (
        NM_DELETE_DEBUG_DELAY_SEC,
        int_text!(DEFAULT_NM_DELETE_DEBUG_DELAY_SEC),
    ),
    (
        NM_VMEM_CHECK_ENABLED,
        bool_text!(DEFAULT_NM_VMEM_CHECK_ENABLED),
    ),
    (
        NM_PMEM_CHECK_ENABLED,
        bool_text!(DEFAULT_NM_PMEM_CHECK_ENABLED),
    ),
    (NM_VMEM_PMEM_RATIO, "2.1"),
    (
        NM_CONTAINER_MONITOR_INTERVAL_MS,
        int_text!(DEFAULT_NM_CONTAINER_MONITOR_INTERVAL_MS),
    ),
    (
        NM_HEALTH_CHECKER_INTERVAL_MS,
        int_text!(DEFAULT_NM_HEALTH_CHECKER_INTERVAL_MS),
    ),
    (
        NM_HEALTH_CHECKER_SCRIPT_TIMEOUT_MS,
        int_text!(DEFAULT_NM_HEALTH_CHECKER_SCRIPT_TIMEOUT_MS),
    ),
    (NM_CGROUPS_HIERARCHY, DEFAULT_NM_CGROUPS_HIERARCHY),
    (
        NM_RUNTIME_ALLOWED_RUNTIMES,
        DEFAULT_NM_RUNTIME_ALLOWED_RUNTIMES,
    ),
    (
        SPINDLE_NM_RUNTIME_OCI_CDI_SPEC_DIRS,
        DEFAULT_SPINDLE_NM_RUNTIME_OCI_CDI_SPEC_DIRS,
    ),
    (
        NM_NODE_LABELS_PROVIDER_FETCH_INTERVAL_MS,
        int_text!(DEFAULT_NM_NODE_LABELS_PROVIDER_FETCH_INTERVAL_MS),
    ),
    (
        NM_NODE_LABELS_PROVIDER_FETCH_TIMEOUT_MS,
        int_text!(DEFAULT_NM_NODE_LABELS_PROVIDER_FETCH_TIMEOUT_MS),
    ),
    (
        NM_NODE_ATTRIBUTES_PROVIDER_FETCH_INTERVAL_MS,
        int_text!(DEFAULT_NM_NODE_ATTRIBUTES_PROVIDER_FETCH_INTERVAL_MS),
    ),
    (
        NM_NODE_ATTRIBUTES_PROVIDER_FETCH_TIMEOUT_MS,
        int_text!(DEFAULT_NM_NODE_ATTRIBUTES_PROVIDER_FETCH_TIMEOUT_MS),
    ),
];

/// The built-in default of `name`, as text, if it has one.
pub fn default_of(name: &str) -> Option<&'static str> {
    DEFAULTS.iter().find(|(k, _)| *k == name).map(|(_, v)| *v)
}
