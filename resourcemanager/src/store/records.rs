//! The stored form of what the state store keeps, shared by the backends that serialize:
//! field names and defaults are the on-disk schema (additive: fields added later are
//! `serde(default)`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use spindle_common::records::node::ContainerLaunchContext;
use spindle_common::states::{FinalApplicationStatus, YarnApplicationState};
use spindle_common::{ApplicationId, ContainerId, NodeId, Resource};

use crate::core::labels::NodeLabels;
use crate::core::{AppQueue, AppRecord, AttemptRecord, Dependency, DependencyKind, Submission};

#[derive(Serialize, Deserialize)]
pub(super) struct StoredApp {
    #[serde(default)]
    node_label_expression: Option<String>,
    #[serde(default)]
    am_node_label_expression: Option<String>,
    id: ApplicationId,
    name: String,
    queue_requested: String,
    queue: String,
    user: String,
    priority: i32,
    application_type: String,
    tags: Vec<String>,
    am_memory_mb: i64,
    am_vcores: i64,
    #[serde(default)]
    am_extended: Vec<(String, i64)>,
    am_launch: ContainerLaunchContext,
    max_app_attempts: u32,
    keep_containers: bool,
    state: YarnApplicationState,
    final_status: FinalApplicationStatus,
    diagnostics: String,
    submit_time: u64,
    launch_time: u64,
    finish_time: u64,
    attempts: u32,
    memory_ms: i64,
    vcore_ms: i64,
    /// Absent in records written before work-preserving recovery.
    #[serde(default)]
    live_attempt: Option<StoredAttempt>,
    /// The `LIFETIME` deadline (ms since the epoch); absent when unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lifetime: Option<u64>,
    /// Resource-milliseconds per type; absent in records written before usage accounting
    /// (then `memory_ms` and `vcore_ms` stand for it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    resource_ms: Vec<(String, i64)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    preempted_ms: Vec<(String, i64)>,
    /// The lifetime asked for at submission (seconds); absent when none was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lifetime_secs: Option<u64>,
    /// `afterany`/`afterok` dependencies; absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    dependencies: Vec<StoredDependency>,
}

/// A dependency as stored: the application and `afterany` or `afterok`.
#[derive(Serialize, Deserialize)]
pub(super) struct StoredDependency {
    app: ApplicationId,
    after_ok: bool,
}

/// Node labels and centrally set attributes as stored (one JSON value under the meta key
/// `node-labels`).
#[derive(Serialize, Deserialize, Default)]
pub(super) struct StoredLabels {
    #[serde(default)]
    cluster: BTreeMap<String, bool>,
    #[serde(default)]
    mapping: BTreeMap<String, String>,
    #[serde(default)]
    attributes: BTreeMap<String, BTreeMap<String, String>>,
}

impl From<&NodeLabels> for StoredLabels {
    fn from(l: &NodeLabels) -> Self {
        Self {
            cluster: l.cluster.clone(),
            mapping: l.mapping.clone(),
            attributes: l.attributes.clone(),
        }
    }
}

impl From<StoredLabels> for NodeLabels {
    fn from(s: StoredLabels) -> Self {
        NodeLabels {
            cluster: s.cluster,
            mapping: s.mapping,
            attributes: s.attributes,
        }
    }
}

/// The stored form of [`AttemptRecord`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct StoredAttempt {
    am_container: ContainerId,
    am_node: NodeId,
    am_node_http: String,
    start_time: u64,
    host: String,
    rpc_port: i32,
    tracking_url: String,
}

pub(super) fn to_stored(r: &AppRecord) -> StoredApp {
    StoredApp {
        node_label_expression: r.sub.node_label_expression.clone(),
        am_node_label_expression: r.sub.am_node_label_expression.clone(),
        id: r.id,
        name: r.sub.name.clone(),
        queue_requested: r.sub.queue.clone(),
        queue: r.queue.to_string(),
        user: r.sub.user.clone(),
        priority: r.sub.priority,
        application_type: r.sub.application_type.clone(),
        tags: r.sub.tags.clone(),
        am_memory_mb: r.sub.am_resource.memory_mb,
        am_vcores: r.sub.am_resource.vcores,
        am_extended: r
            .sub
            .am_resource
            .extended()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        am_launch: r.sub.am_launch.clone().into(),
        max_app_attempts: r.sub.max_app_attempts,
        keep_containers: r.sub.keep_containers,
        state: r.state,
        final_status: r.final_status,
        diagnostics: r.diagnostics.clone(),
        submit_time: r.submit_time,
        launch_time: r.launch_time,
        finish_time: r.finish_time,
        attempts: r.attempts,
        memory_ms: r.memory_ms,
        vcore_ms: r.vcore_ms,
        lifetime: r.lifetime,
        lifetime_secs: r.sub.lifetime_secs,
        dependencies: r
            .sub
            .dependencies
            .iter()
            .map(|d| StoredDependency {
                app: d.app,
                after_ok: d.kind == DependencyKind::AfterOk,
            })
            .collect(),
        resource_ms: entries_of(&r.usage.resource_ms),
        preempted_ms: entries_of(&r.usage.preempted_ms),
        live_attempt: r.live_attempt.as_ref().map(|a| StoredAttempt {
            am_container: a.am_container,
            am_node: a.am_node.clone(),
            am_node_http: a.am_node_http.clone(),
            start_time: a.start_time,
            host: a.host.clone(),
            rpc_port: a.rpc_port,
            tracking_url: a.tracking_url.clone(),
        }),
    }
}

pub(super) fn from_stored(s: StoredApp) -> AppRecord {
    let usage = crate::core::usage::AppUsage {
        resource_ms: if s.resource_ms.is_empty() {
            // Written before per-type usage: memory and vcores are all it kept.
            Resource::new(s.memory_ms, s.vcore_ms)
        } else {
            resource_of(s.resource_ms)
        },
        preempted_ms: resource_of(s.preempted_ms),
    };
    let mut am_resource = Resource::new(s.am_memory_mb, s.am_vcores);
    for (k, v) in &s.am_extended {
        am_resource.set(k, *v);
    }
    AppRecord {
        id: s.id,
        sub: Submission {
            name: s.name,
            queue: s.queue_requested,
            user: s.user,
            priority: s.priority,
            application_type: s.application_type,
            tags: s.tags,
            am_resource,
            am_launch: s.am_launch.into(),
            max_app_attempts: s.max_app_attempts,
            keep_containers: s.keep_containers,
            unmanaged_am: false,
            groups: Vec::new(),
            node_label_expression: s.node_label_expression,
            am_node_label_expression: s.am_node_label_expression,
            lifetime_secs: s.lifetime_secs,
            dependencies: s
                .dependencies
                .iter()
                .map(|d| Dependency {
                    app: d.app,
                    kind: if d.after_ok {
                        DependencyKind::AfterOk
                    } else {
                        DependencyKind::AfterAny
                    },
                })
                .collect(),
        },
        queue: AppQueue::recovered(s.queue),
        state: s.state,
        final_status: s.final_status,
        diagnostics: s.diagnostics,
        submit_time: s.submit_time,
        launch_time: s.launch_time,
        finish_time: s.finish_time,
        attempts: s.attempts,
        memory_ms: s.memory_ms,
        vcore_ms: s.vcore_ms,
        lifetime: s.lifetime,
        live_attempt: s.live_attempt.map(|a| AttemptRecord {
            am_container: a.am_container,
            am_node: a.am_node,
            am_node_http: a.am_node_http,
            start_time: a.start_time,
            host: a.host,
            rpc_port: a.rpc_port,
            tracking_url: a.tracking_url,
        }),
        usage,
    }
}

pub(super) fn resource_json(s: &str) -> Result<Resource, String> {
    let m: BTreeMap<String, i64> = serde_json::from_str(s).map_err(|e| e.to_string())?;
    Ok(resource_of(m))
}

fn resource_of(entries: impl IntoIterator<Item = (String, i64)>) -> Resource {
    let mut r = Resource::zero();
    for (k, v) in entries {
        r.set(&k, v);
    }
    r
}

fn entries_of(r: &Resource) -> Vec<(String, i64)> {
    r.entries()
        .filter(|(_, v)| *v != 0)
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

/// A usage record as the key-value backends store it (one JSON value per application).
#[derive(Serialize, Deserialize)]
pub(super) struct StoredUsage {
    id: ApplicationId,
    user: String,
    queue: String,
    name: String,
    start_time: u64,
    finish_time: u64,
    #[serde(default)]
    resource_ms: Vec<(String, i64)>,
    #[serde(default)]
    preempted_ms: Vec<(String, i64)>,
}

impl From<&super::UsageRecord> for StoredUsage {
    fn from(u: &super::UsageRecord) -> Self {
        Self {
            id: u.id,
            user: u.user.clone(),
            queue: u.queue.clone(),
            name: u.name.clone(),
            start_time: u.start_time,
            finish_time: u.finish_time,
            resource_ms: entries_of(&u.resource_ms),
            preempted_ms: entries_of(&u.preempted_ms),
        }
    }
}

impl From<StoredUsage> for super::UsageRecord {
    fn from(s: StoredUsage) -> Self {
        Self {
            id: s.id,
            user: s.user,
            queue: s.queue,
            name: s.name,
            start_time: s.start_time,
            finish_time: s.finish_time,
            resource_ms: resource_of(s.resource_ms),
            preempted_ms: resource_of(s.preempted_ms),
        }
    }
}

/// A stored scheduler-configuration version as the key-value backends store it.
#[derive(Serialize, Deserialize)]
pub(super) struct StoredConf {
    version: u64,
    /// `mutation` or `refresh`.
    source: String,
    user: String,
    time: u64,
    props: BTreeMap<String, String>,
}

impl From<&super::StoredSchedConf> for StoredConf {
    fn from(c: &super::StoredSchedConf) -> Self {
        Self {
            version: c.version,
            source: source_name(c.source).to_string(),
            user: c.user.clone(),
            time: c.time,
            props: c.props.clone(),
        }
    }
}

impl TryFrom<StoredConf> for super::StoredSchedConf {
    type Error = String;
    fn try_from(s: StoredConf) -> Result<Self, String> {
        Ok(Self {
            version: s.version,
            source: source_of(&s.source)?,
            user: s.user,
            time: s.time,
            props: s.props,
        })
    }
}

/// How the stores name a [`super::SchedConfSource`].
pub(super) fn source_name(s: super::SchedConfSource) -> &'static str {
    match s {
        super::SchedConfSource::Mutation => "mutation",
        super::SchedConfSource::Refresh => "refresh",
    }
}

/// The source a stored name stands for.
pub(super) fn source_of(name: &str) -> Result<super::SchedConfSource, String> {
    match name {
        "mutation" => Ok(super::SchedConfSource::Mutation),
        "refresh" => Ok(super::SchedConfSource::Refresh),
        other => Err(format!("unknown source '{other}'")),
    }
}
