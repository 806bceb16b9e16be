//! `GET /ws/v1/cluster/scheduler`: the capacity scheduler's queue tree as YARN shows it (capacities, usage, users, ACLs, health).

use super::*;

pub(super) fn capacity_mode(c: &CapacitySpec) -> &'static str {
    match c {
        CapacitySpec::Percent(_) => "percentage",
        CapacitySpec::Absolute(_) => "absolute",
        CapacitySpec::Weight(_) => "weight",
    }
}

/// YARN reports `capacity`/`maxCapacity` as percents of the parent even for absolute and
/// weight queues (derived from the effective resources); `weight`/`normalizedWeight` only
/// for weight queues (-1 and 0 otherwise).
pub(super) struct Shares {
    capacity: f64,
    max_capacity: f64,
    weight: f64,
    normalized_weight: f64,
}

pub(super) fn shares(views: &[QueueView], v: &QueueView) -> Shares {
    let parent = v
        .parent
        .as_deref()
        .and_then(|p| views.iter().find(|x| *x.path == *p));
    let relative = |own: f64, of: Option<f64>| match of {
        Some(p) if p > 0.0 => (own * 100.0 / p).min(100.0),
        Some(_) => 0.0,
        None => own,
    };
    let capacity = match v.capacity {
        CapacitySpec::Percent(p) => p,
        _ => relative(v.absolute_capacity, parent.map(|p| p.absolute_capacity)),
    };
    let max_capacity = match v.max_capacity {
        MaxCapacitySpec::Percent(p) => p,
        MaxCapacitySpec::Absolute(_) => relative(
            v.absolute_max_capacity,
            parent.map(|p| p.absolute_max_capacity),
        ),
    };
    let (weight, normalized_weight) = match v.capacity {
        CapacitySpec::Weight(w) => {
            let sum: f64 = views
                .iter()
                .filter(|x| x.parent == v.parent)
                .filter_map(|x| match x.capacity {
                    CapacitySpec::Weight(w) => Some(w),
                    _ => None,
                })
                .sum();
            (w, if sum > 0.0 { w / sum } else { 0.0 })
        }
        _ => (-1.0, 0.0),
    };
    Shares {
        capacity,
        max_capacity,
        weight,
        normalized_weight,
    }
}

pub(super) fn queue_acls(v: &QueueView) -> QueueAclsInfo {
    QueueAclsInfo {
        queue_acl: vec![
            QueueAclInfo {
                access_type: "ADMINISTER_QUEUE".into(),
                access_control_list: v.acl_admin.clone(),
            },
            QueueAclInfo {
                access_type: "SUBMIT_APP".into(),
                access_control_list: v.acl_submit.clone(),
            },
        ],
    }
}

pub(super) fn capacities(v: &QueueView, sh: &Shares) -> QueueCapacities {
    let zero = ResourceInfo::from(&Resource::zero());
    let (cfg_min, cfg_max) = match (&v.capacity, &v.max_capacity) {
        (CapacitySpec::Absolute(r), MaxCapacitySpec::Absolute(m)) => {
            (ResourceInfo::from(r), ResourceInfo::from(m))
        }
        (CapacitySpec::Absolute(r), _) => (ResourceInfo::from(r), zero.clone()),
        (_, MaxCapacitySpec::Absolute(m)) => (zero.clone(), ResourceInfo::from(m)),
        _ => (zero.clone(), zero),
    };
    QueueCapacities {
        queue_capacities_by_partition: vec![PartitionQueueCapacitiesInfo {
            partition_name: String::new(),
            capacity: sh.capacity,
            used_capacity: v.used_capacity,
            max_capacity: sh.max_capacity,
            absolute_capacity: v.absolute_capacity,
            absolute_used_capacity: v.absolute_used_capacity,
            absolute_max_capacity: v.absolute_max_capacity,
            max_am_limit_percentage: v.max_am_resource_percent * 100.0,
            weight: sh.weight,
            normalized_weight: sh.normalized_weight,
            configured_min_resource: cfg_min,
            configured_max_resource: cfg_max,
            effective_min_resource: ResourceInfo::from(&v.guaranteed),
            effective_max_resource: ResourceInfo::from(&v.maximum),
        }]
        .into_iter()
        .chain(v.partitions.iter().map(|(name, p)| {
            let used = |base: &Resource| {
                let x = crate::core::scheduler::queue_tree::ratio(
                    crate::core::queue_conf::Calculator::Dominant,
                    &p.used,
                    base,
                );
                if x.is_finite() {
                    x * 100.0
                } else {
                    0.0
                }
            };
            PartitionQueueCapacitiesInfo {
                partition_name: name.clone(),
                capacity: p.capacity,
                used_capacity: used(&p.guaranteed),
                max_capacity: p.max_capacity,
                absolute_capacity: p.abs_capacity,
                absolute_used_capacity: used(&p.maximum) * p.abs_max_capacity / 100.0,
                absolute_max_capacity: p.abs_max_capacity,
                max_am_limit_percentage: v.max_am_resource_percent * 100.0,
                weight: -1.0,
                normalized_weight: 0.0,
                configured_min_resource: ResourceInfo::from(&Resource::zero()),
                configured_max_resource: ResourceInfo::from(&Resource::zero()),
                effective_min_resource: ResourceInfo::from(&p.guaranteed),
                effective_max_resource: ResourceInfo::from(&p.maximum),
            }
        }))
        .collect(),
    }
}

/// One queue in YARN's `capacityScheduler` shape; children nested under `queues.queue[]`.
pub(super) fn queue_info(views: &[QueueView], v: &QueueView) -> CapacitySchedulerQueueInfo {
    let sh = shares(views, v);
    let leaf = v.is_leaf.then(|| {
        let users: Vec<UserInfo> = v
            .users
            .iter()
            .map(|u| UserInfo {
                username: u.name.clone(),
                resources_used: ResourceInfo::from(&u.used),
                num_pending_applications: u.pending_apps as u64,
                num_active_applications: u.active_apps as u64,
                am_resource_used: ResourceInfo::from(&u.am_used),
                user_resource_limit: ResourceInfo::from(&u.user_limit),
                user_weight: u.weight,
                is_active: u.active_apps > 0,
            })
            .collect();
        LeafQueueInfo {
            kind: "capacitySchedulerLeafQueueInfo".into(),
            num_active_applications: v.num_active_applications as u64,
            num_pending_applications: v.num_pending_applications as u64,
            num_containers: v.num_containers as u64,
            max_applications: u64::from(v.max_applications),
            max_applications_per_user: u64::from(v.max_applications_per_user),
            user_limit: v.minimum_user_limit_percent,
            users: (!users.is_empty()).then_some(UsersInfo {
                user: OneOrMany(users),
            }),
            user_limit_factor: v.user_limit_factor,
            configured_max_am_resource_limit: v.max_am_resource_percent,
            am_resource_limit: ResourceInfo::from(&v.am_limit),
            used_am_resource: ResourceInfo::from(&v.am_used),
            user_am_resource_limit: ResourceInfo::from(&v.user_am_limit),
            preemption_disabled: !v.preemption.inter_queue,
            intra_queue_preemption_disabled: !v.preemption.intra_queue,
            default_priority: v.default_application_priority,
            is_auto_created_leaf_queue: false,
            max_application_lifetime: v.lifetime.max_secs.map_or(-1, |s| s as i64),
            default_application_lifetime: v.lifetime.default_secs.map_or(-1, |s| s as i64),
        }
    });
    let queues = (!v.is_leaf).then(|| CapacitySchedulerQueues {
        queue: OneOrMany(
            views
                .iter()
                .filter(|c| c.parent.as_deref() == Some(v.path.as_str()))
                .map(|c| queue_info(views, c))
                .collect(),
        ),
    });
    CapacitySchedulerQueueInfo {
        queue_path: v.path.to_string(),
        capacity: sh.capacity,
        used_capacity: v.used_capacity,
        max_capacity: sh.max_capacity,
        absolute_capacity: v.absolute_capacity,
        absolute_max_capacity: v.absolute_max_capacity,
        absolute_used_capacity: v.absolute_used_capacity,
        weight: sh.weight,
        normalized_weight: sh.normalized_weight,
        num_applications: v.num_applications as u64,
        max_parallel_apps: v
            .max_parallel_apps
            .map(i64::from)
            .unwrap_or(i64::from(i32::MAX)),
        queue_name: v.name.clone(),
        is_absolute_resource: matches!(v.capacity, CapacitySpec::Absolute(_)),
        state: v.state.as_str().into(),
        used_resources: v.used.to_string(),
        resources_used: ResourceInfo::from(&v.used),
        hide_reservation_queues: false,
        node_labels: v.accessible_labels.clone(),
        default_node_label_expression: v.default_label_expression.clone(),
        allocated_containers: v.num_containers as u64,
        reserved_containers: 0,
        pending_containers: 0,
        capacities: capacities(v, &sh),
        resources: ResourceUsages {
            resource_usages_by_partition: vec![PartitionResourcesInfo {
                partition_name: String::new(),
                // What the labelled partitions leave of its use.
                used: ResourceInfo::from(
                    &v.partitions
                        .values()
                        .fold(v.used.clone(), |acc, p| acc.minus(&p.used)),
                ),
                // Gangs' holds are kept in the default partition only.
                reserved: ResourceInfo::from(&v.reserved),
                pending: ResourceInfo::from(&v.pending),
                am_used: ResourceInfo::from(&v.am_used),
                am_limit: ResourceInfo::from(&v.am_limit),
                user_am_limit: ResourceInfo::from(&v.user_am_limit),
            }]
            .into_iter()
            .chain(v.partitions.iter().map(|(name, p)| PartitionResourcesInfo {
                partition_name: name.clone(),
                used: ResourceInfo::from(&p.used),
                reserved: ResourceInfo::from(&Resource::zero()),
                pending: ResourceInfo::from(&Resource::zero()),
                am_used: ResourceInfo::from(&Resource::zero()),
                am_limit: ResourceInfo::from(&Resource::zero()),
                user_am_limit: ResourceInfo::from(&Resource::zero()),
            }))
            .collect(),
        },
        min_effective_capacity: ResourceInfo::from(&v.guaranteed),
        max_effective_capacity: ResourceInfo::from(&v.maximum),
        maximum_allocation: ResourceInfo::from(&v.max_allocation),
        queue_acls: queue_acls(v),
        queue_priority: v.priority,
        ordering_policy_info: if v.is_leaf {
            v.ordering.as_str().into()
        } else {
            "utilization".into()
        },
        auto_create_child_queue_enabled: false,
        mode: capacity_mode(&v.capacity).into(),
        queue_type: if v.is_leaf { "leaf" } else { "parent" }.into(),
        creation_method: "static".into(),
        auto_creation_eligibility: "off".into(),
        fair_share: Some(QueueFairShareInfo::from(&v.fairshare)),
        queues,
        leaf,
    }
}

/// YARN's health block; Spindle keeps no per-operation history, so it reads as a scheduler
/// that has done nothing notable (every figure 0, every id `N/A`).
pub(super) fn health() -> CapacitySchedulerHealthInfo {
    CapacitySchedulerHealthInfo {
        lastrun: 0,
        operations_info: [
            "last-allocation",
            "last-release",
            "last-preemption",
            "last-reservation",
        ]
        .into_iter()
        .map(|op| SchedulerOperationInfo {
            operation: op.into(),
            node_id: "N/A".into(),
            container_id: "N/A".into(),
            queue: "N/A".into(),
        })
        .collect(),
        last_run_details: ["releases", "allocations", "reservations"]
            .into_iter()
            .map(|op| LastRunDetail {
                operation: op.into(),
                count: 0,
                resources: ResourceInfo::plain(&Resource::zero()),
            })
            .collect(),
    }
}

pub(super) async fn scheduler(State(st): State<AppState>) -> Json<SchedulerBody> {
    let s = st.driver.snapshot().await;
    let views = &s.queue_views;
    let Some(root) = views.iter().find(|v| v.parent.is_none()) else {
        return Json(SchedulerBody {
            scheduler: SchedulerTypeInfo {
                scheduler_info: CapacitySchedulerInfo {
                    kind: "capacityScheduler".into(),
                    ..Default::default()
                },
            },
        });
    };
    let r = queue_info(views, root);
    Json(SchedulerBody {
        scheduler: SchedulerTypeInfo {
            scheduler_info: CapacitySchedulerInfo {
                kind: "capacityScheduler".into(),
                capacity: 100.0,
                used_capacity: root.used_capacity,
                max_capacity: 100.0,
                weight: -1.0,
                normalized_weight: 0.0,
                queue_name: "root".into(),
                queue_path: "root".into(),
                queue_type: "parent".into(),
                mode: r.mode,
                queues: r.queues,
                capacities: r.capacities,
                health: health(),
                maximum_allocation: ResourceInfo::from(&s.max_allocation),
                queue_acls: r.queue_acls,
                queue_priority: 0,
                ordering_policy_info: "utilization".into(),
                auto_create_child_queue_enabled: false,
                creation_method: "static".into(),
                auto_creation_eligibility: "off".into(),
            },
        },
    })
}
