//! The edge between the core's domain types and the wire records of `common::records`: one
//! place for the conversions of the core's output types (`LaunchSpec`, `Allocation`,
//! `CompletedContainer`, `GangView`) that the driver, the REST handlers, the state store and
//! the benchmark make, so the core never names a record (its purity test checks). Requests
//! are turned into core inputs by the REST handler that parses them
//! (`rest::cluster::submit::submission`, the AM's asks in `rest::am`).

use std::collections::BTreeMap;

use spindle_common::records::am::{
    CheckpointReport, Container, ContainerStatus, ContainerUpdateType, GangSpec, GangState,
    GangStatus, PreemptionAcknowledgement, PreemptionContainer, PreemptionContract,
    PreemptionMessage, PreemptionResourceRequest, ResizeDemand, ResizeOffer, ResourceRequest,
    SizeRule, StrictPreemptionContract, ThroughputReport, UpdateContainerError,
    UpdateContainerRequest, UpdatedContainer,
};
use spindle_common::records::cluster::{
    AppFairSharePriorityInfo, LocalResourceInfo, QueueFairShareInfo, UserFairShareInfo,
};
use spindle_common::records::node::ContainerLaunchContext;
use spindle_common::records::resource::ResourceInfo;

use crate::core::scheduler::elastic_policy::{ElasticSpec, SizeRule as ElasticRule};
use crate::core::scheduler::gang::GangPhase;
use crate::core::scheduler::placement::{Constraint, Scope, TagScope, TagTarget};
use crate::core::scheduler::topology::Domain;
use crate::core::{
    Allocation, AmReport, Checkpoint, CompletedContainer, ContainerUpdate, GangView, LaunchSpec,
    LocalResource, PreemptionNotice, ResizeDemandView, ResizeOfferView, UpdateErrorView,
    UpdateKind, UpdatedView,
};
use spindle_common::records::labels::{AttributeOp, ConstraintScope, PlacementConstraintInfo};

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
/// An ask's allocation tags: trimmed, non-empty, without `/` (a tag names no namespace),
/// at most 64 of at most 255 characters.
pub fn allocation_tags(tags: Vec<String>) -> Result<Vec<String>, String> {
    if tags.len() > 64 {
        return Err(format!("at most 64 allocationTags, got {}", tags.len()));
    }
    let mut out = Vec::with_capacity(tags.len());
    for t in tags {
        let t = t.trim().to_string();
        if t.is_empty() || t.len() > 255 || t.contains('/') || t.contains(',') {
            return Err(format!(
                "allocation tag `{t}` is invalid: non-empty, at most 255 characters, no '/' or ','"
            ));
        }
        if !out.contains(&t) {
            out.push(t);
        }
    }
    Ok(out)
}

/// A tag with YARN's namespace: `t` or `self/t`, `not-self/t`, `all/t`,
/// `app-id/<application id>/t`, `app-tag/<application tag>/t`.
fn tag_target(text: &str) -> Result<TagTarget, String> {
    let bad = |why: &str| format!("tag `{text}` {why}");
    let (scope, tag) = match text.split_once('/') {
        None => (TagScope::This, text),
        Some(("self", t)) => (TagScope::This, t),
        Some(("not-self", t)) => (TagScope::NotThis, t),
        Some(("all", t)) => (TagScope::All, t),
        Some(("app-id", rest)) => {
            let (id, t) = rest
                .split_once('/')
                .ok_or_else(|| bad("needs app-id/<application id>/<tag>"))?;
            let id = id
                .parse()
                .map_err(|_| bad(&format!("names `{id}`, which is not an application id")))?;
            (TagScope::App(id), t)
        }
        Some(("app-tag", rest)) => {
            let (g, t) = rest
                .split_once('/')
                .ok_or_else(|| bad("needs app-tag/<application tag>/<tag>"))?;
            (TagScope::AppTag(g.trim().to_lowercase()), t)
        }
        Some((ns, _)) => {
            return Err(bad(&format!(
                "has an unknown namespace `{ns}`: expected self, not-self, all, app-id or app-tag"
            )))
        }
    };
    let tag = tag.trim();
    if tag.is_empty() || tag.contains('/') {
        return Err(bad("names no tag"));
    }
    Ok(TagTarget {
        scope,
        tag: tag.to_string(),
    })
}

/// An attribute name in a constraint: a bare name is `rm.yarn.io/<name>`; the prefix must
/// be `rm.yarn.io/` or `nm.yarn.io/`.
fn attribute_name(name: &str) -> Result<String, String> {
    let name = name.trim();
    match name.split_once('/') {
        None if !name.is_empty() => Ok(format!("{}{name}", crate::core::labels::RM_PREFIX)),
        Some((p, n)) if (p == "rm.yarn.io" || p == "nm.yarn.io") && !n.is_empty() => {
            Ok(name.to_string())
        }
        _ => Err(format!(
            "attribute `{name}` has a bad prefix: expected rm.yarn.io/ or nm.yarn.io/ (or a bare name)"
        )),
    }
}

/// An ask's placement constraint in the core's terms; every mistake named.
pub fn constraint(c: &PlacementConstraintInfo) -> Result<Constraint, String> {
    fn depth(c: &PlacementConstraintInfo, d: usize) -> Result<Constraint, String> {
        if d > 16 {
            return Err("placement constraint nests deeper than 16 levels".into());
        }
        let scope = |s: &ConstraintScope| match s {
            ConstraintScope::NODE => Scope::Node,
            ConstraintScope::RACK => Scope::Rack,
        };
        Ok(match c {
            PlacementConstraintInfo::IN { scope: s, tag } => Constraint::Cardinality {
                scope: scope(s),
                target: tag_target(tag)?,
                min: 1,
                max: u32::MAX,
            },
            PlacementConstraintInfo::NOTIN { scope: s, tag } => Constraint::Cardinality {
                scope: scope(s),
                target: tag_target(tag)?,
                min: 0,
                max: 0,
            },
            PlacementConstraintInfo::CARDINALITY {
                scope: s,
                tag,
                min_cardinality,
                max_cardinality,
            } => {
                if min_cardinality > max_cardinality {
                    return Err(format!(
                        "CARDINALITY on `{tag}`: minCardinality {min_cardinality} exceeds maxCardinality {max_cardinality}"
                    ));
                }
                Constraint::Cardinality {
                    scope: scope(s),
                    target: tag_target(tag)?,
                    min: *min_cardinality,
                    max: *max_cardinality,
                }
            }
            PlacementConstraintInfo::NODE_ATTRIBUTE { name, op, values } => {
                if values.is_empty() {
                    return Err(format!("NODE_ATTRIBUTE `{name}` names no value"));
                }
                Constraint::Attribute {
                    name: attribute_name(name)?,
                    equal: *op == AttributeOp::EQ,
                    values: values.iter().map(|v| v.trim().to_string()).collect(),
                }
            }
            PlacementConstraintInfo::AND { children }
            | PlacementConstraintInfo::OR { children } => {
                if children.is_empty() {
                    return Err("AND and OR need at least one child constraint".into());
                }
                let cs = children
                    .iter()
                    .map(|x| depth(x, d + 1))
                    .collect::<Result<Vec<_>, _>>()?;
                if matches!(c, PlacementConstraintInfo::AND { .. }) {
                    Constraint::And(cs)
                } else {
                    Constraint::Or(cs)
                }
            }
        })
    }
    depth(c, 0)
}

pub fn all<A, B: From<A>>(v: Vec<A>) -> Vec<B> {
    v.into_iter().map(B::from).collect()
}

/// An ask's `vcoresRange` and its gang's `cpuThroughput`, for the core (which grants a
/// range's minimum first).
pub fn cpu_ask(
    range: Option<&str>,
    table: &BTreeMap<String, f64>,
) -> Result<Option<crate::core::CpuAsk>, crate::core::CpuPolicyError> {
    use crate::core::{CpuAsk, CpuCurve, VcoresAsk};
    let Some(range) = range else {
        return Ok(None);
    };
    let vcores = VcoresAsk::parse(range)?;
    let rows: Vec<String> = table.iter().map(|(k, v)| format!("{k}:{v}")).collect();
    let table = CpuCurve::parse(&rows.join(";"))?;
    Ok(Some(CpuAsk { vcores, table }))
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
        cpu_throughput: throughput
            .iter()
            .take(64)
            .filter(|t| t.vcores > 0)
            .map(|t| (t.vcores, t.throughput))
            .collect(),
        throughput: throughput
            .into_iter()
            .take(64)
            .filter(|t| !t.gang_id.is_empty() && t.size > 0)
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
        .map(|c| PreemptionContainer {
            id: c.id,
            node_id: Some(c.node.clone()),
            node_http_address: Some(c.node_http.clone()),
            gang_id: c.gang.clone(),
        })
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
        last_preempted_by: p.preempted_by.as_ref().map(|b| {
            spindle_common::records::cluster::PreemptedBy {
                application_id: b.app.to_string(),
                queue: b.queue.clone(),
            }
        }),
    })
}

impl From<&crate::core::scheduler::UserFairshare> for UserFairShareInfo {
    fn from(u: &crate::core::scheduler::UserFairshare) -> Self {
        Self {
            username: u.user.clone(),
            weight: u.weight,
            norm_shares: u.norm_share,
            raw_usage: u.raw_usage,
            decayed_usage: u.decayed_usage,
            effective_usage: u.norm_usage,
            level_fs: u.level_fs,
            fair_share_factor: u.factor,
            billing_rate: u.billing_rate,
        }
    }
}

impl From<&crate::core::scheduler::QueueFairshare> for QueueFairShareInfo {
    fn from(q: &crate::core::scheduler::QueueFairshare) -> Self {
        Self {
            raw_usage: q.raw_usage,
            decayed_usage: q.decayed_usage,
            users: q.users.iter().map(UserFairShareInfo::from).collect(),
        }
    }
}

impl From<&crate::core::scheduler::AppPlace> for AppFairSharePriorityInfo {
    fn from(p: &crate::core::scheduler::AppPlace) -> Self {
        Self {
            queue: p.queue.to_string(),
            position: p.rank as u64,
            waiting_applications: p.waiting as u64,
            user: UserFairShareInfo::from(&p.user),
            age_ms: p.age_ms,
            max_wait_ms: p.max_wait_ms,
            overdue: p.overdue,
            attained_service_seconds: p.attained_s,
        }
    }
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
