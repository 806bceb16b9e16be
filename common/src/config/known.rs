//! Which configuration keys Spindle knows, and the closest known key to one it does not.
//!
//! A key is **known** when [`keys`](super::keys) names it: every `pub const X: &str` there
//! whose name does not start with `DEFAULT_` and does not end with `_PREFIX` is a key (the
//! `CS_QUEUE_*` constants are the capacity scheduler's per-queue properties, the suffix after
//! `yarn.scheduler.capacity.<queue path>.`). The list is read from the text of `keys.rs` itself
//! (at the first check, once), so a key added there is known at once, with nothing else to
//! keep in step; a unit test checks the reading against the constants.
//!
//! A few families are known by their shape: `yarn.resource-types.<type>.{units,
//! minimum-allocation,maximum-allocation}`, `yarn.nodemanager.resource-type.<type>`,
//! `yarn.scheduler.capacity.user.<user>.max-parallel-apps` and a queue's
//! `accessible-node-labels.<label>.{capacity,maximum-capacity}`.
//!
//! A key is **ignored** when it belongs to Hadoop but not to what Spindle implements: the
//! YARN keys and families in [`IGNORED_KEYS`], [`IGNORED_PREFIXES`], [`IGNORED_CS_KEYS`],
//! [`IGNORED_CS_PREFIXES`], [`IGNORED_QUEUE_PROPERTIES`] and [`IGNORED_QUEUE_PREFIXES`], and
//! every key outside the `yarn.` and `spindle.` namespaces (`hadoop.*`, `fs.*`,
//! `mapreduce.*`, ...). A file shared with a Hadoop cluster therefore makes no noise.
//!
//! Anything else is **unknown**, reported with the closest known key by edit distance (a
//! transposition counts as one edit), when one is close enough to be the likely intent. An
//! ignored family or another component's namespace still reports a key one or two edits from
//! a known one (`hadoop.tmp.dri`), since that is a typo and not another component's key.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::OnceLock;

use super::keys;
use super::Source;

/// The text the known keys are read from.
const KEYS_SOURCE: &str = include_str!("keys.rs");

/// YARN keys (outside the capacity scheduler) that Spindle accepts without reading them.
pub const IGNORED_KEYS: &[&str] = &[
    "yarn.acl.reservation-enable",
    "yarn.application.classpath",
    "yarn.client.application-client-protocol.poll-interval-ms",
    "yarn.client.failover-proxy-provider",
    "yarn.client.nodemanager-connect.max-wait-ms",
    "yarn.client.nodemanager-connect.retry-interval-ms",
    "yarn.fail-fast",
    "yarn.is.minicluster",
    "yarn.nodemanager.address",
    "yarn.nodemanager.admin-env",
    "yarn.nodemanager.bind-host",
    "yarn.nodemanager.container-diagnostics-maximum-size",
    "yarn.nodemanager.container-retry-minimum-interval-ms",
    "yarn.nodemanager.containers-launcher.class",
    "yarn.nodemanager.delete.thread-count",
    "yarn.nodemanager.disk-validator",
    "yarn.nodemanager.emit-container-events",
    "yarn.nodemanager.keytab",
    "yarn.nodemanager.log-container-debug-info.enabled",
    "yarn.nodemanager.log.deletion-threads-count",
    "yarn.nodemanager.principal",
    "yarn.nodemanager.process-kill-wait.ms",
    "yarn.nodemanager.remote-app-log-dir",
    "yarn.nodemanager.remote-app-log-dir-suffix",
    "yarn.nodemanager.resource-plugins.gpu.docker-plugin",
    "yarn.nodemanager.resource-plugins.gpu.docker-plugin.nvidia-docker-v1.endpoint",
    "yarn.nodemanager.resource.count-logical-processors-as-cores",
    "yarn.nodemanager.resource.pcores-vcores-multiplier",
    "yarn.nodemanager.resource.percentage-physical-cpu-limit",
    "yarn.nodemanager.resource.system-reserved-memory-mb",
    "yarn.nodemanager.user-home-dir",
    "yarn.nodemanager.windows-container.cpu-limit.enabled",
    "yarn.nodemanager.windows-container.memory-limit.enabled",
    "yarn.resourcemanager.address",
    "yarn.resourcemanager.admin.address",
    "yarn.resourcemanager.admin.client.thread-count",
    "yarn.resourcemanager.amlauncher.thread-count",
    "yarn.resourcemanager.application-timeouts.monitor.interval-ms",
    "yarn.resourcemanager.auto-update.containers",
    "yarn.resourcemanager.bind-host",
    "yarn.resourcemanager.client.thread-count",
    "yarn.resourcemanager.configuration.provider-class",
    "yarn.resourcemanager.container.liveness-monitor.interval-ms",
    "yarn.resourcemanager.fail-fast",
    "yarn.resourcemanager.keytab",
    "yarn.resourcemanager.max-log-aggregation-diagnostics-in-memory",
    "yarn.resourcemanager.nm-tokens.master-key-rolling-interval-secs",
    "yarn.resourcemanager.nm.liveness-monitor.interval-ms",
    "yarn.resourcemanager.node-removal-untracked.timeout-ms",
    "yarn.resourcemanager.nodemanager.minimum.version",
    "yarn.resourcemanager.nodemanagers.heartbeat-interval-max-ms",
    "yarn.resourcemanager.nodemanagers.heartbeat-interval-min-ms",
    "yarn.resourcemanager.nodemanagers.heartbeat-interval-scaling-enable",
    "yarn.resourcemanager.nodemanagers.heartbeat-interval-slowdown-factor",
    "yarn.resourcemanager.nodemanagers.heartbeat-interval-speedup-factor",
    "yarn.resourcemanager.principal",
    "yarn.resourcemanager.proxy-user-privileges.enabled",
    "yarn.resourcemanager.recovery.enabled",
    "yarn.resourcemanager.resource-tracker.address",
    "yarn.resourcemanager.resource-tracker.client.thread-count",
    "yarn.resourcemanager.scheduler.address",
    "yarn.resourcemanager.scheduler.client.thread-count",
    "yarn.resourcemanager.scheduler.monitor.policies",
    "yarn.resourcemanager.store.class",
    "yarn.resourcemanager.work-preserving-recovery.enabled",
    "yarn.resourcemanager.work-preserving-recovery.scheduling-wait-ms",
    "yarn.scheduler.include-port-in-node-name",
    "yarn.scheduler.increment-allocation-mb",
    "yarn.scheduler.increment-allocation-vcores",
    "yarn.scheduler.maximum-allocation-vcores-per-node",
    "yarn.scheduler.skip.node.multiplier",
    "yarn.web-proxy.address",
];

/// Families of YARN keys for features Spindle does not implement. A key in one of them is
/// silent unless it is one or two edits from a known key.
pub const IGNORED_PREFIXES: &[&str] = &[
    "yarn.am.",
    "yarn.app.",
    "yarn.client.",
    "yarn.dispatcher.",
    "yarn.federation.",
    "yarn.ipc.",
    "yarn.log-aggregation",
    "yarn.log.",
    "yarn.minicluster.",
    "yarn.node-attribute.",
    "yarn.node-labels.",
    "yarn.nodemanager.amrmproxy.",
    "yarn.nodemanager.aux-services",
    "yarn.nodemanager.collector-service.",
    "yarn.nodemanager.container-executor.",
    "yarn.nodemanager.container-localizer.",
    "yarn.nodemanager.container-manager.",
    "yarn.nodemanager.container-metrics.",
    "yarn.nodemanager.container-monitor.",
    "yarn.nodemanager.default-container-executor.",
    "yarn.nodemanager.distributed-scheduling.",
    "yarn.nodemanager.elastic-memory-control.",
    "yarn.nodemanager.health-checker.",
    "yarn.nodemanager.disk-health-checker.",
    "yarn.nodemanager.linux-container-executor.",
    "yarn.nodemanager.local-cache.",
    "yarn.nodemanager.localizer.",
    "yarn.nodemanager.log-aggregation.",
    "yarn.nodemanager.logaggregation.",
    "yarn.nodemanager.numa-awareness.",
    "yarn.nodemanager.opportunistic-containers",
    "yarn.nodemanager.pluggable-device-framework.",
    "yarn.nodemanager.recovery.",
    "yarn.nodemanager.resource-plugins.",
    "yarn.nodemanager.resource.cpu.",
    "yarn.nodemanager.resource.memory.",
    "yarn.nodemanager.resource.network.",
    "yarn.nodemanager.resource.disk.",
    "yarn.nodemanager.runtime.",
    "yarn.nodemanager.webapp.",
    "yarn.nodemanager.node-attributes.",
    "yarn.nodemanager.node-labels.",
    "yarn.nodemanager.container-log-monitor.",
    "yarn.nodemanager.resourcemanager.",
    "yarn.nodemanager.windows-",
    "yarn.resourcemanager.activities-manager.",
    "yarn.resourcemanager.address.",
    "yarn.resourcemanager.admin.address.",
    "yarn.resourcemanager.amliveliness-monitor.",
    "yarn.resourcemanager.application-tokens.",
    "yarn.resourcemanager.delayed.delegation-token.",
    "yarn.resourcemanager.hostname.",
    "yarn.resourcemanager.resource-tracker.address.",
    "yarn.resourcemanager.scheduler.address.",
    "yarn.resourcemanager.am-rm-tokens.",
    "yarn.resourcemanager.application-tag-based-placement.",
    "yarn.resourcemanager.connect.",
    "yarn.resourcemanager.decommissioning-nodes-watcher.",
    "yarn.resourcemanager.delegation",
    "yarn.resourcemanager.epoch.",
    "yarn.resourcemanager.fs.state-store.",
    "yarn.resourcemanager.ha.",
    "yarn.resourcemanager.history-writer.",
    "yarn.resourcemanager.leveldb-state-store.",
    "yarn.resourcemanager.metrics.",
    "yarn.resourcemanager.monitor.",
    "yarn.resourcemanager.queue.",
    "yarn.resourcemanager.nm-container-queuing.",
    "yarn.resourcemanager.node-labels.",
    "yarn.resourcemanager.opportunistic-container-allocation.",
    "yarn.resourcemanager.placement-constraints.",
    "yarn.resourcemanager.proxy",
    "yarn.resourcemanager.reservation-system.",
    "yarn.resourcemanager.resource-profiles.",
    "yarn.resourcemanager.state-store.",
    "yarn.resourcemanager.submission-preprocessor.",
    "yarn.resourcemanager.system-metrics-publisher.",
    "yarn.resourcemanager.webapp.",
    "yarn.resourcemanager.zk",
    "yarn.router.",
    "yarn.scheduler.configuration.",
    "yarn.scheduler.fair.",
    "yarn.scheduler.queue-placement-rules",
    "yarn.sharedcache.",
    "yarn.timeline-service.",
    "yarn.web-proxy.",
    "yarn.webapp.",
    "yarn.workflow-id.",
];

/// Global capacity-scheduler keys (after `yarn.scheduler.capacity.`) Spindle does not read.
pub const IGNORED_CS_KEYS: &[&str] = &[
    "application.fail-fast",
    "global-queue-max-application",
    "lazy-preemption-enabled",
    "minimum-user-limit-percent",
    "legacy-queue-mode.enabled",
    "multi-node-placement-enabled",
    "node-locality-delay-per-rack",
    "rack-locality-full-reset",
    "reservations-continue-look-all-nodes",
    "skip-allocate-on-nodes-with-reserved-containers",
    "user-limit-factor",
    "workflow-priority-mappings",
    "workflow-priority-mappings-override.enable",
];

/// Families of global capacity-scheduler keys (after `yarn.scheduler.capacity.`) Spindle
/// does not read.
pub const IGNORED_CS_PREFIXES: &[&str] = &[
    "schedule-asynchronously.",
    "per-node-heartbeat.",
    "multi-node-sorting.",
    "queue-mappings.",
    "mapping-rule-",
    "auto-queue-creation-v2.",
];

/// Per-queue properties (after `yarn.scheduler.capacity.<queue path>.`) that YARN has and
/// Spindle does not read.
pub const IGNORED_QUEUE_PROPERTIES: &[&str] = &[
    "acl_administer_reservations",
    "acl_application_max_priority",
    "acl_list_reservations",
    "acl_submit_reservations",
    "average-capacity",
    "instantaneous-max-capacity",
    "maximum-allocation",
    "multi-node-placement-policy",
    "ordering-policy.fair.enable-size-based-weight",
    "reservable",
    "reservation-agent",
    "reservation-enforcement-window",
    "reservation-move-on-expiry",
    "reservation-planner",
    "reservation-policy",
    "reservation-window",
    "show-reservations-as-queues",
    "user-limit",
];

/// Families of per-queue properties YARN has and Spindle does not read.
pub const IGNORED_QUEUE_PREFIXES: &[&str] = &[
    "auto-create-child-queue.",
    "auto-queue-creation-v2.",
    "leaf-queue-template.",
    "user-settings.",
    "ordering-policy.fair.",
    "ordering-policy.priority-utilization.",
];

/// `<qp>.accessible-node-labels`: the prefix of the per-label properties.
const LABELS_PROPERTY: &str = keys::CS_QUEUE_ACCESSIBLE_NODE_LABELS;
/// What may follow `<qp>.accessible-node-labels.<label>.`.
const LABEL_PROPERTIES: &[&str] = &["capacity", "maximum-capacity"];
/// Per-label properties YARN has and Spindle does not read.
const IGNORED_LABEL_PROPERTIES: &[&str] = &["maximum-am-resource-percent", "user-limit-factor"];
/// What may follow `yarn.resource-types.<type>.`.
const RESOURCE_TYPE_PROPERTIES: &[&str] = &["units", "minimum-allocation", "maximum-allocation"];
/// What YARN also has there (the FairScheduler's increment), which Spindle does not read.
const IGNORED_RESOURCE_TYPE_PROPERTIES: &[&str] = &["increment-allocation"];

/// What Spindle makes of one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyStatus {
    /// A key Spindle reads.
    Known,
    /// Hadoop's, for a feature or component Spindle does not implement: accepted, unread.
    Ignored,
    /// Neither: a typo, most likely. `suggestion` is the closest known key (for a queue
    /// property checked alone, the closest known property), when one is close.
    Unknown { suggestion: Option<String> },
}

/// An unknown key found in a configuration, with where it was defined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownKey {
    pub name: String,
    pub source: Source,
    pub suggestion: Option<String>,
}

impl fmt::Display for UnknownKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: unknown key '{}'", self.source, self.name)?;
        match &self.suggestion {
            Some(s) => write!(f, "; did you mean '{s}'?"),
            None => write!(
                f,
                " (no known key is close; docs/configuration.md lists the keys Spindle reads)"
            ),
        }
    }
}

/// The keys read from [`KEYS_SOURCE`].
struct Catalogue {
    /// Full keys.
    keys: BTreeSet<&'static str>,
    /// Per-queue properties (`CS_QUEUE_*`).
    queue_properties: BTreeSet<&'static str>,
}

fn catalogue() -> &'static Catalogue {
    static CATALOGUE: OnceLock<Catalogue> = OnceLock::new();
    CATALOGUE.get_or_init(|| {
        let mut c = Catalogue {
            keys: BTreeSet::new(),
            queue_properties: BTreeSet::new(),
        };
        for (ident, value) in string_consts(KEYS_SOURCE) {
            if ident.starts_with("DEFAULT_") || ident.ends_with("_PREFIX") {
                continue;
            }
            if ident.starts_with("CS_QUEUE_") && !value.starts_with(keys::CAPACITY_SCHEDULER_PREFIX)
            {
                c.queue_properties.insert(value);
            } else if value.contains('.') && !value.ends_with('.') {
                c.keys.insert(value);
            }
        }
        c
    })
}

/// `(NAME, "value")` of every `pub const NAME: &str = "value";` in `src`. Values with an
/// escape are left out (no key has one).
fn string_consts(src: &'static str) -> Vec<(&'static str, &'static str)> {
    let mut out = Vec::new();
    let mut rest = src;
    while let Some(at) = rest.find("pub const ") {
        rest = &rest[at + "pub const ".len()..];
        let Some((ident, after)) = rest.split_once(':') else {
            break;
        };
        let ident = ident.trim();
        if !ident
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        {
            continue;
        }
        let Some((ty, after)) = after.split_once('=') else {
            break;
        };
        if ty.trim() != "&str" && ty.trim() != "&'static str" {
            continue;
        }
        let Some(lit) = after.trim_start().strip_prefix('"') else {
            continue;
        };
        let Some(end) = lit.find('"') else {
            break;
        };
        let value = &lit[..end];
        if !value.contains('\\') && lit[end + 1..].trim_start().starts_with(';') {
            out.push((ident, value));
        }
    }
    out
}

/// Every key Spindle reads (full names; queue properties are in [`known_queue_properties`]).
pub fn known_keys() -> impl Iterator<Item = &'static str> {
    catalogue().keys.iter().copied()
}

/// Every per-queue property Spindle reads (`capacity`, `maximum-capacity`, ...).
pub fn known_queue_properties() -> impl Iterator<Item = &'static str> {
    catalogue().queue_properties.iter().copied()
}

/// Edit distance with adjacent transpositions (optimal string alignment), on bytes.
pub fn distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let n = b.len();
    // Three rows: two back, one back, current.
    let mut prev2: Vec<usize> = vec![0; n + 1];
    let mut prev: Vec<usize> = (0..=n).collect();
    let mut cur: Vec<usize> = vec![0; n + 1];
    for i in 1..=a.len() {
        cur[0] = i;
        for j in 1..=n {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(prev2[j - 2] + 1);
            }
            cur[j] = d;
        }
        std::mem::swap(&mut prev2, &mut prev);
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[n]
}

/// The candidate closest to `name`, with its distance (the first of equals).
fn closest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<(&'a str, usize)> {
    let mut best: Option<(&'a str, usize)> = None;
    for c in candidates {
        let d = distance(name, c);
        if best.is_none_or(|(_, bd)| d < bd) {
            best = Some((c, d));
        }
    }
    best
}

/// Whether a key `d` edits from a known one is worth suggesting: a few edits, more for a
/// long key (a fifth of it), never a rewrite.
fn close_key(name: &str, d: usize) -> bool {
    d <= (name.len() / 5).max(2)
}

/// The same for a short queue property: up to a third of it.
fn close_property(prop: &str, d: usize) -> bool {
    d <= (prop.len() / 3).max(2)
}

/// What Spindle makes of the full key `name`.
pub fn key_status(name: &str) -> KeyStatus {
    let name = name.trim();
    let cat = catalogue();
    if cat.keys.contains(name) {
        return KeyStatus::Known;
    }
    if IGNORED_KEYS.contains(&name) {
        return KeyStatus::Ignored;
    }
    if let Some(rest) = name.strip_prefix(keys::CAPACITY_SCHEDULER_PREFIX) {
        return capacity_scheduler_status(rest);
    }
    if let Some(rest) = name.strip_prefix(keys::RESOURCE_TYPES_PREFIX) {
        if let Some((ty, prop)) = rest.rsplit_once('.') {
            if !ty.is_empty() {
                if RESOURCE_TYPE_PROPERTIES.contains(&prop) {
                    return KeyStatus::Known;
                }
                if IGNORED_RESOURCE_TYPE_PROPERTIES.contains(&prop) {
                    return KeyStatus::Ignored;
                }
                return KeyStatus::Unknown {
                    suggestion: closest(prop, RESOURCE_TYPE_PROPERTIES.iter().copied())
                        .filter(|&(_, d)| close_property(prop, d))
                        .map(|(p, _)| format!("{}{ty}.{p}", keys::RESOURCE_TYPES_PREFIX)),
                };
            }
        }
    }
    if name
        .strip_prefix(keys::CPU_POLICY_PARTITION_PREFIX)
        .is_some_and(|p| !p.is_empty())
    {
        return KeyStatus::Known;
    }
    if name
        .strip_prefix(keys::NM_RESOURCE_TYPE_PREFIX)
        .is_some_and(|t| !t.is_empty())
    {
        return KeyStatus::Known;
    }
    // `<key>.<rm-id>` under RM HA.
    let per_id = |k: &&str| {
        name.strip_prefix(*k)
            .and_then(|r| r.strip_prefix('.'))
            .is_some_and(|id| !id.is_empty() && !id.contains('.'))
    };
    if keys::RM_HA_PER_ID_KEYS.iter().any(per_id) {
        return KeyStatus::Known;
    }
    let best = closest(name, cat.keys.iter().copied());
    let ours = name.starts_with("yarn.") || name.starts_with("spindle.");
    let family = IGNORED_PREFIXES.iter().any(|p| name.starts_with(p));
    match best {
        Some((k, d)) if ours && !family => KeyStatus::Unknown {
            suggestion: close_key(name, d).then(|| k.to_string()),
        },
        None if ours && !family => KeyStatus::Unknown { suggestion: None },
        Some((k, d)) if d <= 2 => KeyStatus::Unknown {
            suggestion: Some(k.to_string()),
        },
        _ => KeyStatus::Ignored,
    }
}

/// `rest` is a capacity-scheduler key without `yarn.scheduler.capacity.`.
fn capacity_scheduler_status(rest: &str) -> KeyStatus {
    let full = |tail: &str| format!("{}{tail}", keys::CAPACITY_SCHEDULER_PREFIX);
    if rest == "root" || rest.starts_with("root.") {
        return queue_key_status(rest);
    }
    if let Some(user_rest) = rest.strip_prefix("user.") {
        // `user.<user>.max-parallel-apps` (`user.max-parallel-apps` is a known key).
        if let Some((user, prop)) = user_rest.rsplit_once('.') {
            if prop == keys::CS_QUEUE_MAX_PARALLEL_APPS {
                return KeyStatus::Known;
            }
            let d = distance(prop, keys::CS_QUEUE_MAX_PARALLEL_APPS);
            return KeyStatus::Unknown {
                suggestion: close_property(prop, d)
                    .then(|| full(&format!("user.{user}.{}", keys::CS_QUEUE_MAX_PARALLEL_APPS))),
            };
        }
    }
    if IGNORED_CS_KEYS.contains(&rest) || IGNORED_CS_PREFIXES.iter().any(|p| rest.starts_with(p)) {
        return KeyStatus::Ignored;
    }
    let globals = catalogue()
        .keys
        .iter()
        .copied()
        .filter(|k| k.starts_with(keys::CAPACITY_SCHEDULER_PREFIX));
    let name = full(rest);
    KeyStatus::Unknown {
        suggestion: closest(&name, globals)
            .filter(|&(_, d)| close_key(&name, d))
            .map(|(k, _)| k.to_string()),
    }
}

/// `rest` is `root...` : a queue path, then one of its properties. Properties may hold dots
/// (`ordering-policy.las.thresholds`), so every split after `root` is tried, shortest path
/// first: the first that leaves a known (or ignored) property decides; else the split whose property is closest to a known
/// one (the longer queue path of equals) gives the suggestion.
fn queue_key_status(rest: &str) -> KeyStatus {
    let mut best: Option<(String, usize)> = None;
    for (i, _) in rest.match_indices('.') {
        let (path, prop) = (&rest[..i], &rest[i + 1..]);
        match property_status(prop) {
            // The shortest queue path that leaves a known or ignored property wins, so
            // that `root.a.leaf-queue-template.capacity` is not read as queue
            // `root.a.leaf-queue-template`'s capacity.
            (KeyStatus::Known, _) => return KeyStatus::Known,
            (KeyStatus::Ignored, _) => return KeyStatus::Ignored,
            (KeyStatus::Unknown { suggestion }, d) => {
                if let Some(s) = suggestion {
                    if best.as_ref().is_none_or(|&(_, bd)| d <= bd) {
                        best = Some((format!("{}{path}.{s}", keys::CAPACITY_SCHEDULER_PREFIX), d));
                    }
                }
            }
        }
    }
    KeyStatus::Unknown {
        suggestion: best.map(|(s, _)| s),
    }
}

/// What Spindle makes of a per-queue property (`capacity`, `maximum-capacty`, ...), the part
/// after `yarn.scheduler.capacity.<queue path>.`, as the scheduler-conf mutation API and
/// `spindle schedulerconf` take it. The suggestion is a property too.
pub fn queue_property_status(prop: &str) -> KeyStatus {
    property_status(prop.trim()).0
}

/// [`queue_property_status`] with the distance of the suggestion (`usize::MAX` without one).
fn property_status(prop: &str) -> (KeyStatus, usize) {
    let cat = catalogue();
    if cat.queue_properties.contains(prop) {
        return (KeyStatus::Known, 0);
    }
    if let Some(rest) = prop
        .strip_prefix(LABELS_PROPERTY)
        .and_then(|r| r.strip_prefix('.'))
    {
        if let Some((label, what)) = rest.rsplit_once('.') {
            if !label.is_empty() {
                if LABEL_PROPERTIES.contains(&what) {
                    return (KeyStatus::Known, 0);
                }
                if IGNORED_LABEL_PROPERTIES.contains(&what) {
                    return (KeyStatus::Ignored, 0);
                }
                return match closest(what, LABEL_PROPERTIES.iter().copied()) {
                    Some((p, d)) if close_property(what, d) => (
                        KeyStatus::Unknown {
                            suggestion: Some(format!("{LABELS_PROPERTY}.{label}.{p}")),
                        },
                        d,
                    ),
                    _ => (KeyStatus::Unknown { suggestion: None }, usize::MAX),
                };
            }
        }
    }
    if let Some((_, what)) = prop
        .strip_prefix(keys::CS_QUEUE_USER_SETTINGS_PREFIX)
        .and_then(|r| r.rsplit_once('.'))
    {
        // `user-settings.<user>.weight` is read; YARN's other user settings are not.
        if what == keys::USER_SETTINGS_WEIGHT {
            return (KeyStatus::Known, 0);
        }
    }
    if IGNORED_QUEUE_PROPERTIES.contains(&prop)
        || IGNORED_QUEUE_PREFIXES.iter().any(|p| prop.starts_with(p))
    {
        return (KeyStatus::Ignored, 0);
    }
    match closest(prop, cat.queue_properties.iter().copied()) {
        Some((p, d)) if close_property(prop, d) => (
            KeyStatus::Unknown {
                suggestion: Some(p.to_string()),
            },
            d,
        ),
        _ => (KeyStatus::Unknown { suggestion: None }, usize::MAX),
    }
}
