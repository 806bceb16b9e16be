//! Topology domains for gangs: a level of the cluster's topology (`rack`, or any node
//! attribute such as an NVLink domain's `nm.yarn.io/nvlink-clique`) cuts the nodes into
//! domains; a gang may require all its members in one domain of a level, or prefer it. The
//! domain is part of the one gang fit: every domain is planned with the gang's own policy
//! and constraints, the gang goes whole into one domain or waits, and among the domains it
//! fits in it takes the one with the least free room, so small gangs fill partly used
//! domains and whole domains stay free for large ones. Pure, like the rest of the scheduler.

use std::collections::BTreeMap;

use spindle_common::resource::GPU;
use spindle_common::Resource;

use super::gang::{plan_models, GangParams, Plan, Unit};
use super::node_index::{NodeIndex, SchedNode};

/// The level named `rack`: the node's rack, as the NM reported it.
pub const RACK_LEVEL: &str = "rack";

/// A gang's domain requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Domain {
    /// `rack`, or the name of a node attribute.
    pub level: String,
    /// Required (whole in one domain or not at all) or preferred (one domain if any fits).
    pub required: bool,
}

/// The node's domain at `level` (None: the node is in no domain of that level).
pub fn domain_of<'a>(n: &'a SchedNode, level: &str) -> Option<&'a str> {
    if level == RACK_LEVEL {
        Some(n.rack.as_str())
    } else {
        n.attributes.get(level).map(String::as_str)
    }
}

/// Plans the gang inside one domain of `d.level`, the fullest that fits; a preferred
/// domain falls back to the whole cluster when no domain fits.
pub fn plan_in_domain(
    nodes: &NodeIndex,
    units: &[Unit],
    params: &GangParams,
    d: &Domain,
    cap: &dyn Fn(usize) -> Option<Resource>,
    allowed: &dyn Fn(usize) -> bool,
) -> Plan {
    let mut domains: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for s in nodes
        .by_free_desc(&params.partition)
        .filter(|s| allowed(*s))
    {
        if let Some(name) = nodes.get(s).and_then(|n| domain_of(n, &d.level)) {
            domains.entry(name).or_default().push(s);
        }
    }
    // The fullest domain first: least free GPUs, then memory.
    let room = |slots: &[usize]| {
        slots
            .iter()
            .filter_map(|s| cap(*s))
            .fold(Resource::zero(), |acc, r| acc.plus(&r))
    };
    let mut order: Vec<(&str, Vec<usize>, (i64, i64))> = domains
        .into_iter()
        .map(|(name, slots)| {
            let r = room(&slots);
            (name, slots, (r.get(GPU), r.memory_mb))
        })
        .collect();
    order.sort_by_key(|(name, _, free)| (*free, *name));
    let mut best_short: Option<(usize, Vec<usize>)> = None;
    for (_, slots, _) in &order {
        let only = |s: usize| slots.contains(&s);
        match plan_models(nodes, units, params, cap, &only) {
            Plan::Fits(v) => return Plan::Fits(v),
            Plan::Short { placed, .. } => {
                if best_short.as_ref().is_none_or(|(p, _)| placed > *p) {
                    best_short = Some((placed, slots.clone()));
                }
            }
        }
    }
    if !d.required {
        return plan_models(nodes, units, params, cap, allowed);
    }
    let (placed, nodes) = best_short.unwrap_or((0, vec![]));
    Plan::Short { placed, nodes }
}

/// Why a gang that requires a domain waits: the best domain and how far it got.
pub fn shortfall(nodes: &NodeIndex, d: &Domain, best: &[usize], placed: usize, n: usize) -> String {
    match best
        .first()
        .and_then(|s| nodes.get(*s))
        .and_then(|node| domain_of(node, &d.level))
    {
        Some(name) => format!(
            "; it requires one {} (the best, {name}, holds {placed} of {n})",
            d.level
        ),
        None => format!("; it requires one {} and no node is in one", d.level),
    }
}
