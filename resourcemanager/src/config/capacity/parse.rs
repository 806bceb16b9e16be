//! The entry points of the capacity-scheduler parser ([`parse`], [`parse_props`]): the
//! global `yarn.scheduler.capacity.*` settings (calculator, application limits, locality
//! delays), `queue-mappings`, and the state the tree walk carries ([`Parser`],
//! [`ParentCtx`]).
//!
//! Owns the order of the walk and the rules on global settings. It must not check one
//! queue's properties (that is `queue`) or the capacity forms (that is `capacities`), must
//! not compare with the running tree (that is `transition`), and does no I/O.

use std::collections::BTreeMap;

use spindle_common::config::{keys, value, Configuration};
use spindle_common::Resource;

use crate::core::queue_conf::{
    Calculator, CapacitySpec, ElasticPolicy, QueueMapping, QueueSpec, QueueState, SchedulerConf,
};

use super::error::Result;
use super::props::key;
use super::{CapacityConfError, CsProps, Rule, SiteSettings};

const DEFAULT_CALCULATOR_CLASS: &str = keys::DEFAULT_CS_RESOURCE_CALCULATOR;
const DOMINANT_CALCULATOR_CLASS: &str =
    "org.apache.hadoop.yarn.util.resource.DominantResourceCalculator";

/// Reads and validates the capacity scheduler from a whole configuration (the CS
/// properties and the yarn-site settings it needs). `cluster_max_allocation` is the
/// configured `yarn.scheduler.maximum-allocation-*` vector.
pub fn parse(
    conf: &Configuration,
    cluster_max_allocation: &Resource,
) -> std::result::Result<SchedulerConf, CapacityConfError> {
    let props = CsProps::from_conf(conf)?;
    let site = SiteSettings::from_conf(conf, cluster_max_allocation)?;
    parse_props(&props, &site)
}

/// Builds and validates the tree from a live property set.
pub fn parse_props(props: &CsProps, site: &SiteSettings) -> Result<SchedulerConf> {
    let mut p = Parser {
        props,
        site,
        leaves: BTreeMap::new(),
    };
    let global_am = p.am_percent(
        keys::CS_MAXIMUM_AM_RESOURCE_PERCENT,
        keys::DEFAULT_CS_MAXIMUM_AM_RESOURCE_PERCENT,
    )?;
    let root_ctx = ParentCtx {
        path: String::new(),
        state: QueueState::Running,
        abs_capacity: Some(1.0),
        abs_max: Some(1.0),
        capacity: None,
        max_allocation: None,
        disable_preemption: false,
        intra_queue_disable_preemption: false,
        elastic: ElasticPolicy::None,
        gpu_idle: crate::core::queue_conf::GpuIdlePolicy::default(),
        lifetime: crate::core::queue_conf::LifetimeLimits::default(),
    };
    let root = p.queue("root", &root_ctx, 0, global_am)?;
    if root.children.is_empty() {
        let k = key("root", keys::CS_QUEUE_QUEUES);
        return Err(props
            .err(
                Rule::RootWithoutChildren,
                &k,
                "root queue must have at least one child queue",
            )
            .queue("root"));
    }
    let calc_key = keys::CS_RESOURCE_CALCULATOR;
    let calculator = match props.trimmed(calc_key) {
        None => Calculator::Memory,
        Some(c) if c == DEFAULT_CALCULATOR_CLASS || c == "DefaultResourceCalculator" => {
            Calculator::Memory
        }
        Some(c) if c == DOMINANT_CALCULATOR_CLASS || c == "DominantResourceCalculator" => {
            Calculator::Dominant
        }
        Some(c) => {
            return Err(props.err(
                Rule::InvalidResourceCalculator,
                calc_key,
                format!(
                    "class {c} is not one of YARN's resource calculators ({DEFAULT_CALCULATOR_CLASS}, {DOMINANT_CALCULATOR_CLASS})"
                ),
            ))
        }
    };
    let max_apps_key = keys::CS_MAXIMUM_APPLICATIONS;
    let max_applications = props
        .count(max_apps_key)?
        .unwrap_or(keys::DEFAULT_CS_MAXIMUM_APPLICATIONS as u32);
    let max_parallel_apps = props.count(keys::CS_MAX_PARALLEL_APPS)?;
    let user_max_parallel_apps = props.count(keys::CS_USER_MAX_PARALLEL_APPS)?;
    let mut user_max_parallel_apps_for = BTreeMap::new();
    let user_suffix = format!(".{}", keys::CS_QUEUE_MAX_PARALLEL_APPS);
    for (name, _) in props.pairs() {
        let Some(rest) = name.strip_prefix(keys::CS_USER_PREFIX) else {
            continue;
        };
        let Some(user) = rest.strip_suffix(&user_suffix) else {
            continue;
        };
        if user.is_empty() {
            continue;
        }
        if let Some(n) = props.count(name)? {
            user_max_parallel_apps_for.insert(user.to_string(), n);
        }
    }
    let queue_mappings = p.mappings(&root)?;
    let queue_mappings_override = props.bool(
        keys::CS_QUEUE_MAPPINGS_OVERRIDE_ENABLE,
        keys::DEFAULT_CS_QUEUE_MAPPINGS_OVERRIDE_ENABLE,
    )?;
    let nld_key = keys::CS_NODE_LOCALITY_DELAY;
    let node_locality_delay = match props.int(nld_key)? {
        None => keys::DEFAULT_CS_NODE_LOCALITY_DELAY,
        Some(n) => u32::try_from(n).map_err(|_| {
            props.err(
                Rule::LimitRange,
                nld_key,
                format!(
                    "node-locality-delay must be from 0 to {}, got {}",
                    u32::MAX,
                    props.written(nld_key)
                ),
            )
        })?,
    };
    let gmp_key = keys::CS_GANG_MAX_PLANS_PER_PASS;
    let gang_max_plans_per_pass = props
        .count(gmp_key)?
        .unwrap_or(keys::DEFAULT_CS_GANG_MAX_PLANS_PER_PASS);
    if gang_max_plans_per_pass == 0 {
        return Err(props.err(
            Rule::LimitRange,
            gmp_key,
            "must be at least 1 (no waiting gang would ever be planned)",
        ));
    }
    let rld_key = keys::CS_RACK_LOCALITY_ADDITIONAL_DELAY;
    let rack_locality_additional_delay = match props.int(rld_key)? {
        None => keys::DEFAULT_CS_RACK_LOCALITY_ADDITIONAL_DELAY,
        Some(n) => i32::try_from(n).ok().filter(|n| *n >= -1).ok_or_else(|| {
            props.err(
                Rule::LimitRange,
                rld_key,
                format!(
                    "rack-locality-additional-delay must be -1 (derived) or a count of missed opportunities, got {}",
                    props.written(rld_key)
                ),
            )
        })?,
    };
    Ok(SchedulerConf {
        root,
        calculator,
        max_applications,
        max_am_resource_percent: global_am,
        max_parallel_apps,
        user_max_parallel_apps,
        user_max_parallel_apps_for,
        queue_mappings,
        queue_mappings_override,
        node_locality_delay,
        gang_max_plans_per_pass,
        rack_locality_additional_delay,
        max_application_priority: site.max_application_priority,
        admin_acl: site.admin_acl.clone(),
        acl_enabled: site.acl_enabled,
        fairshare: site.fairshare.clone(),
    })
}

// ------------------------------------------------------------------------ the tree walk
//
// The walk itself is `queue` (one queue) and `capacities` (capacity forms, sibling rules).

/// What a child needs to know about its parent.
pub(super) struct ParentCtx {
    /// Empty for root's "parent".
    pub(super) path: String,
    pub(super) state: QueueState,
    /// Fraction of the cluster, when it can be known without the cluster's size (only
    /// percent capacities all the way up).
    pub(super) abs_capacity: Option<f64>,
    pub(super) abs_max: Option<f64>,
    /// The parent's own capacity; None for root.
    pub(super) capacity: Option<CapacitySpec>,
    /// The parent's effective maximum allocation, if it or an ancestor set one.
    pub(super) max_allocation: Option<Resource>,
    /// The parent's `disable_preemption` and intra-queue flag (children inherit them).
    pub(super) disable_preemption: bool,
    pub(super) intra_queue_disable_preemption: bool,
    /// The parent's `elastic-policy` (children inherit it).
    pub(super) elastic: ElasticPolicy,
    /// The parent's idle-GPU policy (children inherit each of its properties).
    pub(super) gpu_idle: crate::core::queue_conf::GpuIdlePolicy,
    /// The parent's application lifetimes (children inherit each one they do not set).
    pub(super) lifetime: crate::core::queue_conf::LifetimeLimits,
}

pub(super) struct Parser<'a> {
    pub(super) props: &'a CsProps,
    pub(super) site: &'a SiteSettings,
    /// Leaf short name -> path, to refuse duplicates.
    pub(super) leaves: BTreeMap<String, String>,
}

impl Parser<'_> {
    /// `queue-mappings`: `u:<user>:<queue>` / `g:<group>:<queue>`, first match wins.
    pub(super) fn mappings(&self, root: &QueueSpec) -> Result<Vec<QueueMapping>> {
        let props = self.props;
        let name = keys::CS_QUEUE_MAPPINGS;
        let Some(raw) = props.get(name) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for entry in value::split_list(raw) {
            let bad = |why: String| {
                props.err(
                    Rule::InvalidQueueMapping,
                    name,
                    format!("Illegal queue mapping {entry}: {why}"),
                )
            };
            let parts: Vec<&str> = entry.split(':').map(str::trim).collect();
            if parts.len() != 3 {
                return Err(bad("expected u:<user>:<queue> or g:<group>:<queue>".into()));
            }
            let (kind, who, queue) = (parts[0], parts[1], parts[2]);
            if who.is_empty() || queue.is_empty() {
                return Err(bad(
                    "the user (or group) and the queue may not be empty".into()
                ));
            }
            const PLACEHOLDERS: [&str; 5] = [
                "%user",
                "%primary_group",
                "%secondary_group",
                "%primary_group.%user",
                "%secondary_group.%user",
            ];
            if queue.contains('%') && !PLACEHOLDERS.contains(&queue) {
                return Err(bad(format!(
                    "queue '{queue}': expected a queue or one of {}",
                    PLACEHOLDERS.join(", ")
                )));
            }
            if !queue.starts_with('%') {
                let leaf = root.find(queue).filter(|q| q.is_leaf());
                if leaf.is_none() {
                    return Err(bad(format!(
                        "mapping contains invalid or non-leaf queue : {queue}"
                    )));
                }
            }
            let m = if kind.eq_ignore_ascii_case("u") {
                QueueMapping::User {
                    user: who.to_string(),
                    queue: queue.to_string(),
                }
            } else if kind.eq_ignore_ascii_case("g") {
                if who.starts_with('%') {
                    return Err(bad("a group mapping must name a group".into()));
                }
                QueueMapping::Group {
                    group: who.to_string(),
                    queue: queue.to_string(),
                }
            } else {
                return Err(bad(format!(
                    "unknown mapping type '{kind}' (u for a user, g for a group)"
                )));
            };
            out.push(m);
        }
        Ok(out)
    }
}
