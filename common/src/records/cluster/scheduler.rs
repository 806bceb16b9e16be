//! `/ws/v1/cluster/scheduler` (the capacity scheduler view), `/scheduler-conf` (YARN's
//! mutation API) and `/queues/{queue}/access`.

use serde::{Deserialize, Serialize};

use super::super::resource::ResourceInfo;
use super::super::OneOrMany;

fn no_items<T>(v: &OneOrMany<T>) -> bool {
    v.0.is_empty()
}

/// `GET /scheduler`: `{"scheduler":{"schedulerInfo":{"type":"capacityScheduler",...}}}`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SchedulerBody {
    pub scheduler: SchedulerTypeInfo,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SchedulerTypeInfo {
    #[serde(rename = "schedulerInfo")]
    pub scheduler_info: CapacitySchedulerInfo,
}

/// The root of YARN's `CapacitySchedulerInfo`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CapacitySchedulerInfo {
    /// `capacityScheduler`.
    #[serde(rename = "type")]
    pub kind: String,
    pub capacity: f64,
    pub used_capacity: f64,
    pub max_capacity: f64,
    pub weight: f64,
    pub normalized_weight: f64,
    pub queue_name: String,
    pub queue_path: String,
    pub queue_type: String,
    pub mode: String,
    pub queues: Option<CapacitySchedulerQueues>,
    pub capacities: QueueCapacities,
    pub health: CapacitySchedulerHealthInfo,
    pub maximum_allocation: ResourceInfo,
    pub queue_acls: QueueAclsInfo,
    pub queue_priority: i32,
    pub ordering_policy_info: String,
    pub auto_create_child_queue_enabled: bool,
    pub creation_method: String,
    pub auto_creation_eligibility: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CapacitySchedulerQueues {
    pub queue: OneOrMany<CapacitySchedulerQueueInfo>,
}

/// One queue of the tree (YARN's `CapacitySchedulerQueueInfo`); a leaf carries the
/// `capacitySchedulerLeafQueueInfo` fields in [`Self::leaf`], a parent its children in
/// [`Self::queues`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CapacitySchedulerQueueInfo {
    pub queue_path: String,
    pub capacity: f64,
    pub used_capacity: f64,
    pub max_capacity: f64,
    pub absolute_capacity: f64,
    pub absolute_max_capacity: f64,
    pub absolute_used_capacity: f64,
    pub weight: f64,
    pub normalized_weight: f64,
    pub num_applications: u64,
    pub max_parallel_apps: i64,
    pub queue_name: String,
    pub is_absolute_resource: bool,
    pub state: String,
    /// YARN's `<memory:0, vCores:0>` string.
    pub used_resources: String,
    pub resources_used: ResourceInfo,
    pub hide_reservation_queues: bool,
    pub node_labels: Vec<String>,
    pub default_node_label_expression: Option<String>,
    pub allocated_containers: u64,
    pub reserved_containers: u64,
    pub pending_containers: u64,
    pub capacities: QueueCapacities,
    pub resources: ResourceUsages,
    pub min_effective_capacity: ResourceInfo,
    pub max_effective_capacity: ResourceInfo,
    pub maximum_allocation: ResourceInfo,
    pub queue_acls: QueueAclsInfo,
    pub queue_priority: i32,
    pub ordering_policy_info: String,
    pub auto_create_child_queue_enabled: bool,
    /// percentage, absolute, weight or mixed.
    pub mode: String,
    /// parent or leaf.
    pub queue_type: String,
    pub creation_method: String,
    pub auto_creation_eligibility: String,
    /// Spindle's extension: decayed usage (its users' standing in a leaf).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fair_share: Option<super::QueueFairShareInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queues: Option<CapacitySchedulerQueues>,
    #[serde(flatten)]
    pub leaf: Option<LeafQueueInfo>,
}

impl CapacitySchedulerQueueInfo {
    /// This queue and every queue below it, parents first.
    pub fn walk(&self) -> Vec<&CapacitySchedulerQueueInfo> {
        let mut out = vec![self];
        if let Some(qs) = &self.queues {
            for q in &qs.queue.0 {
                out.extend(q.walk());
            }
        }
        out
    }
}

/// The fields only a leaf has (`"type":"capacitySchedulerLeafQueueInfo"`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeafQueueInfo {
    /// `capacitySchedulerLeafQueueInfo`; required, so a parent never parses as a leaf.
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub num_active_applications: u64,
    #[serde(default)]
    pub num_pending_applications: u64,
    #[serde(default)]
    pub num_containers: u64,
    #[serde(default)]
    pub max_applications: u64,
    #[serde(default)]
    pub max_applications_per_user: u64,
    /// `minimum-user-limit-percent`.
    #[serde(default)]
    pub user_limit: f64,
    /// `null` when no user has applications, as YARN answers.
    #[serde(default)]
    pub users: Option<UsersInfo>,
    #[serde(default)]
    pub user_limit_factor: f64,
    #[serde(default, rename = "configuredMaxAMResourceLimit")]
    pub configured_max_am_resource_limit: f64,
    #[serde(default, rename = "AMResourceLimit")]
    pub am_resource_limit: ResourceInfo,
    #[serde(default, rename = "usedAMResource")]
    pub used_am_resource: ResourceInfo,
    #[serde(default, rename = "userAMResourceLimit")]
    pub user_am_resource_limit: ResourceInfo,
    #[serde(default)]
    pub preemption_disabled: bool,
    #[serde(default)]
    pub intra_queue_preemption_disabled: bool,
    #[serde(default)]
    pub default_priority: i32,
    #[serde(default)]
    pub is_auto_created_leaf_queue: bool,
    #[serde(default)]
    pub max_application_lifetime: i64,
    #[serde(default)]
    pub default_application_lifetime: i64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct UsersInfo {
    pub user: OneOrMany<UserInfo>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct UserInfo {
    pub username: String,
    pub resources_used: ResourceInfo,
    pub num_pending_applications: u64,
    pub num_active_applications: u64,
    #[serde(rename = "AMResourceUsed")]
    pub am_resource_used: ResourceInfo,
    pub user_resource_limit: ResourceInfo,
    pub user_weight: f64,
    pub is_active: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct QueueCapacities {
    pub queue_capacities_by_partition: Vec<PartitionQueueCapacitiesInfo>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PartitionQueueCapacitiesInfo {
    pub partition_name: String,
    pub capacity: f64,
    pub used_capacity: f64,
    pub max_capacity: f64,
    pub absolute_capacity: f64,
    pub absolute_used_capacity: f64,
    pub absolute_max_capacity: f64,
    #[serde(rename = "maxAMLimitPercentage")]
    pub max_am_limit_percentage: f64,
    pub weight: f64,
    pub normalized_weight: f64,
    pub configured_min_resource: ResourceInfo,
    pub configured_max_resource: ResourceInfo,
    pub effective_min_resource: ResourceInfo,
    pub effective_max_resource: ResourceInfo,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ResourceUsages {
    pub resource_usages_by_partition: Vec<PartitionResourcesInfo>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PartitionResourcesInfo {
    pub partition_name: String,
    pub used: ResourceInfo,
    pub reserved: ResourceInfo,
    pub pending: ResourceInfo,
    pub am_used: ResourceInfo,
    pub am_limit: ResourceInfo,
    pub user_am_limit: ResourceInfo,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct QueueAclsInfo {
    pub queue_acl: Vec<QueueAclInfo>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct QueueAclInfo {
    /// ADMINISTER_QUEUE, SUBMIT_APP or APPLICATION_MAX_PRIORITY.
    pub access_type: String,
    /// Hadoop's ACL string (`users groups`, `*`, a space for no one).
    pub access_control_list: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CapacitySchedulerHealthInfo {
    pub lastrun: u64,
    pub operations_info: Vec<SchedulerOperationInfo>,
    pub last_run_details: Vec<LastRunDetail>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SchedulerOperationInfo {
    pub operation: String,
    pub node_id: String,
    pub container_id: String,
    pub queue: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LastRunDetail {
    pub operation: String,
    pub count: u64,
    pub resources: ResourceInfo,
}

// ---------------------------------------------------------------------------------------
// /scheduler-conf (YARN's mutation API), /queues/{queue}/access

/// `PUT /scheduler-conf` and `POST /scheduler-conf/validate`: YARN's `sched-conf`
/// (`SchedConfUpdateInfo`). Applied in YARN's order: removals, additions, updates, global
/// updates. Unknown keys are refused, so a misspelt `add_queue` is not a silent no-op.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SchedConfUpdateInfo {
    #[serde(rename = "add-queue", skip_serializing_if = "no_items")]
    pub add_queue: OneOrMany<QueueConfigInfo>,
    #[serde(rename = "update-queue", skip_serializing_if = "no_items")]
    pub update_queue: OneOrMany<QueueConfigInfo>,
    /// Full queue paths.
    #[serde(rename = "remove-queue", skip_serializing_if = "no_items")]
    pub remove_queue: OneOrMany<String>,
    /// Full property names.
    #[serde(rename = "global-updates", skip_serializing_if = "Option::is_none")]
    pub global_updates: Option<ConfEntries>,
    /// YARN federation's target sub-cluster; accepted and ignored.
    #[serde(rename = "subClusterId", skip_serializing_if = "Option::is_none")]
    pub sub_cluster_id: Option<String>,
}

/// `{"queue-name":"root.a","params":{"entry":[{"key":"capacity","value":"10"}]}}`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueueConfigInfo {
    #[serde(rename = "queue-name")]
    pub queue_name: String,
    pub params: Option<ConfEntries>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ConfEntries {
    pub entry: OneOrMany<ConfEntry>,
}

/// A key and its new value; an empty or `null` value unsets the key, as in YARN.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ConfEntry {
    pub key: String,
    pub value: Option<String>,
}

/// `GET /scheduler-conf` (and the would-be configuration `validate` answers): YARN's
/// `ConfInfo`, `{"property":[{"name":...,"value":...}]}`, root unwrapped as YARN sends it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ConfInfo {
    pub property: Vec<ConfItem>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConfItem {
    pub name: String,
    pub value: String,
}

/// `GET /scheduler-conf/version`: `{"versionID":3}`. Spindle's answer to
/// `POST /refresh-queues` adds what changed and the unknown keys it ignored (absent when
/// empty).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ConfigVersionInfo {
    #[serde(rename = "versionID")]
    pub version_id: u64,
    /// `queue.property: old -> new`, one a changed property.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<String>,
    /// `file:line: unknown key '...'`, one an unknown key that was ignored.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// `GET /queues/{queue}/access`: YARN's `RMQueueAclInfo`, root unwrapped.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RmQueueAclInfo {
    pub allowed: bool,
    pub user: String,
    pub diagnostics: String,
}

#[cfg(test)]
mod scheduler_record_tests {
    use super::*;

    #[test]
    fn leaf_fields_only_on_leaves() {
        let v = serde_json::json!({
            "queueName": "root", "queuePath": "root",
            "queues": {"queue": [
                {"queueName": "a", "queuePath": "root.a", "type": "capacitySchedulerLeafQueueInfo",
                 "numActiveApplications": 2, "users": null},
                {"queueName": "b", "queuePath": "root.b", "queues": {"queue": {"queueName": "x", "queuePath": "root.b.x", "type": "capacitySchedulerLeafQueueInfo"}}}
            ]}
        });
        let q: CapacitySchedulerQueueInfo = serde_json::from_value(v).unwrap();
        assert!(q.leaf.is_none());
        let all = q.walk();
        assert_eq!(all.len(), 4);
        assert_eq!(
            all[1].leaf.as_ref().map(|l| l.num_active_applications),
            Some(2)
        );
        assert!(all[2].leaf.is_none(), "a parent without type is no leaf");
        assert_eq!(all[3].queue_path, "root.b.x");
        let out = serde_json::to_value(all[1]).unwrap();
        assert_eq!(out["type"], "capacitySchedulerLeafQueueInfo");
        assert!(out["users"].is_null() && out.get("users").is_some());
        assert!(out.get("queues").is_none());
        let parent = serde_json::to_value(all[2]).unwrap();
        assert!(parent.get("type").is_none() && parent.get("numActiveApplications").is_none());
    }

    #[test]
    fn sched_conf_accepts_single_objects_and_refuses_unknown_keys() {
        let v = serde_json::json!({
            "add-queue": {"queue-name": "root.c", "params": {"entry": {"key": "capacity", "value": "10"}}},
            "remove-queue": "root.b",
            "global-updates": {"entry": [{"key": "yarn.scheduler.capacity.maximum-applications", "value": null}]}
        });
        let s: SchedConfUpdateInfo = serde_json::from_value(v).unwrap();
        assert_eq!(s.add_queue.0[0].queue_name, "root.c");
        assert_eq!(s.remove_queue.0, vec!["root.b".to_string()]);
        assert_eq!(s.global_updates.unwrap().entry.0[0].value, None);
        assert!(serde_json::from_value::<SchedConfUpdateInfo>(
            serde_json::json!({"add_queue": []})
        )
        .is_err());
        let out = serde_json::to_value(SchedConfUpdateInfo::default()).unwrap();
        assert_eq!(out, serde_json::json!({}));
    }
}
