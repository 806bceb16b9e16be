//! The edge between the core's domain types and the wire records of `common::records`: one
//! place for every conversion the driver, the REST handlers, the state store and the
//! benchmark make, so the core never names a record (its purity test checks).

use std::collections::BTreeMap;

use spindle_common::records::am::{
    CheckpointReport, Container, ContainerStatus, ContainerUpdateType, GangSpec, GangState,
    GangStatus, PreemptionAcknowledgement, PreemptionContainer, PreemptionContract,
    PreemptionMessage, PreemptionResourceRequest, ResizeDemand, ResizeOffer, ResourceRequest,
    SizeRule, StrictPreemptionContract, ThroughputReport, UpdateContainerError,
    UpdateContainerRequest, UpdatedContainer,
};
use spindle_common::records::cluster::LocalResourceInfo;
use spindle_common::records::node::ContainerLaunchContext;
use spindle_common::records::resource::ResourceInfo;

use crate::core::scheduler::elastic::{ElasticSpec, SizeRule as ElasticRule};
use crate::core::scheduler::gang::GangPhase;
use crate::core::scheduler::topology::Domain;
use crate::core::{
    Allocation, AmReport, Checkpoint, CompletedContainer, ContainerUpdate, GangView, LaunchSpec,
    LocalResource, PreemptionNotice, ResizeDemandView, ResizeOfferView, UpdateErrorView,
    UpdateKind, UpdatedView,
};

impl From<LocalResourceInfo> for LocalResource {
    fn from(r: LocalResourceInfo) -> Self {
        Self {
            url: r.resource,
            kind: r.kind,
            visibility: r.visibility,
            size: r.size,
            timestamp: r.timestamp,
        }
    }
}

impl From<LocalResource> for LocalResourceInfo {
    fn from(r: LocalResource) -> Self {
        Self {
            resource: r.url,
            kind: r.kind,
            visibility: r.visibility,
            size: r.size,
            timestamp: r.timestamp,
        }
    }
}

impl From<ContainerLaunchContext> for LaunchSpec {
    fn from(c: ContainerLaunchContext) -> Self {
        Self {
            commands: c.commands,
            environment: c.environment,
            local_resources: c
                .local_resources
                .into_iter()
                .map(|(k, v)| (k, v.into()))
                .collect(),
        }
    }
}

impl From<LaunchSpec> for ContainerLaunchContext {
    fn from(l: LaunchSpec) -> Self {
        Self {
            commands: l.commands,
            environment: l.environment,
            local_resources: l
                .local_resources
                .into_iter()
                .map(|(k, v)| (k, v.into()))
                .collect(),
        }
    }
}

impl From<Allocation> for Container {
    fn from(a: Allocation) -> Self {
        Self {
            id: a.id,
            node_id: a.node_id,
            node_http_address: a.node_http_address,
            resource: ResourceInfo::from(&a.resource),
            priority: a.priority,
            container_token: a.container_token,
            execution_type: "GUARANTEED".into(),
            allocation_request_id: a.allocation_request_id,
            version: a.version,
        }
    }
}

impl From<CompletedContainer> for ContainerStatus {
    fn from(c: CompletedContainer) -> Self {
        Self {
            container_id: c.container_id,
            state: c.state,
            exit_status: c.exit_status,
            diagnostics: c.diagnostics,
            gang_id: c.gang_id,
        }
    }
}

impl From<GangView> for GangStatus {
    fn from(g: GangView) -> Self {
        Self {
            id: g.id,
            state: match g.phase {
                GangPhase::Pending => GangState::PENDING,
                GangPhase::Reserved => GangState::RESERVED,
                GangPhase::Allocated => GangState::ALLOCATED,
                GangPhase::TimedOut => GangState::TIMED_OUT,
                GangPhase::Failed => GangState::FAILED,
                GangPhase::Preempted => GangState::PREEMPTED,
            },
            size: g.size,
            diagnostics: g.diagnostics,
            reserved_nodes: g.reserved_nodes,
            failed_containers: g.failed_containers,
            current_size: g.current_size,
            resizes: g.resizes,
        }
    }
}

fn update_type(k: UpdateKind) -> ContainerUpdateType {
    match k {
        UpdateKind::IncreaseResource => ContainerUpdateType::INCREASE_RESOURCE,
        UpdateKind::DecreaseResource => ContainerUpdateType::DECREASE_RESOURCE,
        UpdateKind::PromoteExecutionType => ContainerUpdateType::PROMOTE_EXECUTION_TYPE,
        UpdateKind::DemoteExecutionType => ContainerUpdateType::DEMOTE_EXECUTION_TYPE,
    }
}

impl From<UpdatedView> for UpdatedContainer {
    fn from(u: UpdatedView) -> Self {
        Self {
            update_type: update_type(u.kind),
            container: Container::from(u.allocation),
        }
    }
}

impl From<UpdateErrorView> for UpdateContainerError {
    fn from(e: UpdateErrorView) -> Self {
        Self {
            reason: e.refusal.word().to_string(),
            diagnostics: e.refusal.to_string(),
            current_container_version: e.current_version,
            update_container_request: UpdateContainerRequest {
                container_id: e.request.container,
                container_version: e.request.version,
                container_update_type: update_type(e.request.kind),
                capability: ResourceInfo::from(&e.request.capability),
            },
        }
    }
}

impl From<ResizeOfferView> for ResizeOffer {
    fn from(o: ResizeOfferView) -> Self {
        Self {
            gang_id: o.gang,
            from_size: o.from,
            to_size: o.to,
            containers: o.containers,
        }
    }
}

impl From<ResizeDemandView> for ResizeDemand {
    fn from(d: ResizeDemandView) -> Self {
        Self {
            gang_id: d.gang,
            from_size: d.from,
            to_size: d.to,
            containers: d.containers,
            deadline: d.deadline,
        }
    }
}

/// A gang's topology domain for the core; the reason when it is malformed.
pub fn gang_domain(g: &GangSpec) -> Result<Option<Domain>, String> {
    let (level, required) = match (&g.required_domain, &g.preferred_domain) {
        (Some(_), Some(_)) => {
            return Err("gang.requiredDomain and gang.preferredDomain exclude each other".into())
        }
        (Some(l), None) => (l, true),
        (None, Some(l)) => (l, false),
        (None, None) => return Ok(None),
    };
    let level = level.trim();
    if level.is_empty() || level.len() > 256 {
        return Err("a gang's domain level must be a non-empty name of at most 256 characters (rack, or a node attribute)".into());
    }
    Ok(Some(Domain {
        level: level.to_string(),
        required,
    }))
}

/// The most members an elastic gang may declare.
pub const MAX_ELASTIC_MEMBERS: u32 = 100_000;

/// An ask's elastic settings for the core: None for a rigid gang; the reason when they
/// cannot be honoured.
pub fn elastic_spec(g: &GangSpec, num_containers: i32) -> Result<Option<ElasticSpec>, String> {
    if g.min_containers == 0 {
        return Ok(None);
    }
    let max = if g.max_containers > 0 {
        g.max_containers
    } else {
        u32::try_from(num_containers).unwrap_or(0)
    };
    if max > MAX_ELASTIC_MEMBERS {
        return Err(format!(
            "gang.maxContainers {max} is more than {MAX_ELASTIC_MEMBERS}"
        ));
    }
    if g.min_containers > max {
        return Err(format!(
            "gang.minContainers {} is more than its maximum {max}",
            g.min_containers
        ));
    }
    let rule = match g.size_rule.unwrap_or_default() {
        SizeRule::POWER_OF_TWO => ElasticRule::PowerOfTwo,
        SizeRule::ANY => ElasticRule::Any,
        SizeRule::MULTIPLE if g.size_multiple == 0 => {
            return Err("gang.sizeRule MULTIPLE needs sizeMultiple of at least 1".into())
        }
        SizeRule::MULTIPLE => ElasticRule::Multiple(g.size_multiple),
    };
    let mut throughput = BTreeMap::new();
    for (k, v) in &g.throughput {
        let n: u32 = k
            .trim()
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("gang.throughput key '{k}' is not a member count"))?;
        if !(v.is_finite() && *v > 0.0) {
            return Err(format!(
                "gang.throughput at {n} members must be a positive number, not {v}"
            ));
        }
        throughput.insert(n, *v);
    }
    let spec = ElasticSpec {
        min: g.min_containers,
        max,
        rule,
        throughput,
    };
    if spec.sizes().is_empty() {
        return Err(format!(
            "no size between gang.minContainers {} and maxContainers {max} is legal under its sizeRule",
            g.min_containers
        ));
    }
    Ok(Some(spec))
}

/// Converts each element (`Vec<core type>` into `Vec<record>`).
pub fn all<A, B: From<A>>(v: Vec<A>) -> Vec<B> {
    v.into_iter().map(B::from).collect()
}

/// An allocate call's checkpoint report and acknowledgement, for the core.
pub fn am_report(
    checkpoint: Option<CheckpointReport>,
    ack: Option<PreemptionAcknowledgement>,
    throughput: Vec<ThroughputReport>,
    updates: Vec<UpdateContainerRequest>,
) -> AmReport {
    AmReport {
        checkpoint: checkpoint.map(|k| Checkpoint {
            time: k.time,
            step: k.step,
            label: k.label.map(|l| l.chars().take(1024).collect()),
        }),
        acknowledge_eta_ms: ack.map(|a| a.checkpoint_eta_ms),
        throughput: throughput
            .into_iter()
            .take(64)
            .map(|t| (t.gang_id, t.size, t.throughput))
            .collect(),
        updates: updates
            .into_iter()
            .take(1024)
            .map(|u| ContainerUpdate {
                container: u.container_id,
                version: u.container_version,
                kind: match u.container_update_type {
                    ContainerUpdateType::INCREASE_RESOURCE => UpdateKind::IncreaseResource,
                    ContainerUpdateType::DECREASE_RESOURCE => UpdateKind::DecreaseResource,
                    ContainerUpdateType::PROMOTE_EXECUTION_TYPE => UpdateKind::PromoteExecutionType,
                    ContainerUpdateType::DEMOTE_EXECUTION_TYPE => UpdateKind::DemoteExecutionType,
                },
                capability: u.capability.to_resource(),
            })
            .collect(),
    }
}

/// YARN's `PreemptionMessage` for a notice: the containers in the strict contract, and again
/// with the resources they free in the contract; Spindle's deadline and gang ids beside them.
pub fn preemption_message(n: PreemptionNotice) -> PreemptionMessage {
    let containers: Vec<PreemptionContainer> = n
        .containers
        .iter()
        .map(|c| PreemptionContainer { id: *c })
        .collect();
    PreemptionMessage {
        strict_contract: Some(StrictPreemptionContract {
            container: containers.clone(),
        }),
        contract: Some(PreemptionContract {
            resource: vec![PreemptionResourceRequest {
                resource: ResourceRequest {
                    capability: ResourceInfo::from(&n.resource),
                    num_containers: n.containers.len() as i32,
                    ..ResourceRequest::default()
                },
            }],
            container: containers,
        }),
        deadline: n.deadline,
        gang_ids: n.gangs,
    }
}

/// The app view's preemption record; None for an application never preempted nor
/// reporting checkpoints.
pub fn app_preemption(
    p: &crate::core::AppPreemption,
    under_notice: u32,
) -> Option<spindle_common::records::cluster::AppPreemptionInfo> {
    if p.preemptions == 0 && p.checkpoint.is_none() && under_notice == 0 {
        return None;
    }
    Some(spindle_common::records::cluster::AppPreemptionInfo {
        preemptions: p.preemptions,
        containers_under_notice: under_notice,
        lost_gpu_seconds: p.lost_gpu_ms as f64 / 1000.0,
        preempted_gpu_seconds: p.gpu_ms as f64 / 1000.0,
        last_notice_to_exit_ms: p.last_notice_to_exit_ms,
        max_notice_to_exit_ms: p.max_notice_to_exit_ms,
        last_checkpoint: p.checkpoint.as_ref().map(|k| CheckpointReport {
            time: k.time,
            step: k.step,
            label: k.label.clone(),
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_launch_context_survives_the_round_trip() {
        let mut ctx = ContainerLaunchContext {
            commands: vec!["python3 train.py".into()],
            ..Default::default()
        };
        ctx.environment.insert("A".into(), "1".into());
        ctx.local_resources.insert(
            "train.py".into(),
            LocalResourceInfo {
                resource: "file:///tmp/train.py".into(),
                kind: "FILE".into(),
                visibility: "APPLICATION".into(),
                size: 10,
                timestamp: 20,
            },
        );
        let back: ContainerLaunchContext = LaunchSpec::from(ctx.clone()).into();
        assert_eq!(back, ctx);
    }
}
