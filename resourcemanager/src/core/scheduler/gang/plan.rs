//! The gang planner: where a gang's members would go on the nodes as they are now, by its
//! placement policy (pack, strict pack, spread, same rack) within its GPU model and topology
//! constraints, or how far the best attempt got; and the diagnostic a waiting gang shows.
//! The one fit check for gangs; pure and deterministic for the same inputs.

use super::*;

/// One member container to place: its ask key and shape.
#[derive(Debug, Clone)]
pub struct Unit {
    pub key: AskKey,
    pub cap: Resource,
}

/// The result of planning: where each unit goes, or how far the best attempt got.
pub enum Plan {
    Fits(Vec<(AskKey, usize, Resource)>),
    Short { placed: usize, nodes: Vec<usize> },
}

/// How many GPUs, then how much memory: the order units are packed in (largest first).
fn size_key(r: &Resource) -> (i64, i64, i64) {
    (r.get(GPU), r.memory_mb, r.vcores)
}

/// Plans `app`'s gang `units` onto nodes given each node's capacity (`cap`), by
/// `params`: the one fit check. A node must pass `allowed` (reservations of others,
/// racks), be in the gang's partition and satisfy its placement constraint; then come the
/// topology domain, the GPU model and the placement policy. A constraint that keeps the
/// gang's own tag off a node already holding one spreads the members one per node.
/// Deterministic for the same inputs.
pub fn plan(
    app: &ApplicationId,
    nodes: &NodeIndex,
    units: &[Unit],
    params: &GangParams,
    cap: &dyn Fn(usize) -> Option<Resource>,
    allowed: &dyn Fn(usize) -> bool,
) -> Plan {
    let asker = crate::core::scheduler::placement::Asker { app };
    let eligible = |s: usize| {
        allowed(s)
            && nodes.get(s).is_some_and(|n| {
                crate::core::scheduler::placement::admits(
                    nodes,
                    n,
                    &params.partition,
                    params.constraint.as_ref(),
                    &asker,
                )
            })
    };
    let spread;
    let params = match &params.constraint {
        Some(c) if c.spreads(&params.tags) && params.policy != GangPolicy::Spread => {
            spread = GangParams {
                policy: GangPolicy::Spread,
                ..params.clone()
            };
            &spread
        }
        _ => params,
    };
    let plan_on = |allowed: &dyn Fn(usize) -> bool| match &params.domain {
        Some(d) => {
            crate::core::scheduler::topology::plan_in_domain(nodes, units, params, d, cap, allowed)
        }
        None => plan_models(nodes, units, params, cap, allowed),
    };
    // The whole gang on nodes already holding its image, when it fits there.
    if let Some(image) = params.image.as_deref() {
        let holding = |s: usize| nodes.holds_image(s, image) && eligible(s);
        if let p @ Plan::Fits(_) = plan_on(&holding) {
            return p;
        }
    }
    plan_on(&eligible)
}

/// [`plan`] without a topology domain: the gang's GPU-model constraints, then its policy.
pub fn plan_models(
    nodes: &NodeIndex,
    units: &[Unit],
    params: &GangParams,
    cap: &dyn Fn(usize) -> Option<Resource>,
    allowed: &dyn Fn(usize) -> bool,
) -> Plan {
    let model_of = |s: usize| nodes.get(s).and_then(|n| n.gpu_model.clone());
    if let Some(m) = &params.gpu_model {
        let only = |s: usize| allowed(s) && model_of(s).as_deref() == Some(m.as_str());
        return plan_within(nodes, units, params, cap, &only);
    }
    if params.same_gpu_model {
        let models: BTreeSet<String> = nodes
            .by_free_desc(&params.partition)
            .filter(|s| allowed(*s))
            .filter_map(model_of)
            .collect();
        let mut best: Option<Plan> = None;
        for m in models.iter().filter(|m| m.as_str() != "mixed") {
            let only = |s: usize| allowed(s) && model_of(s).as_deref() == Some(m.as_str());
            let p = plan_within(nodes, units, params, cap, &only);
            best = Some(better(best, p));
        }
        return best.unwrap_or(Plan::Short {
            placed: 0,
            nodes: vec![],
        });
    }
    plan_within(nodes, units, params, cap, allowed)
}

/// The better of two plans: a fit over a miss, fewer nodes over more, more placed over less.
fn better(a: Option<Plan>, b: Plan) -> Plan {
    match (a, b) {
        (Some(Plan::Fits(x)), Plan::Fits(y)) => {
            Plan::Fits(if distinct(&y) < distinct(&x) { y } else { x })
        }
        (Some(Plan::Fits(x)), _) => Plan::Fits(x),
        (_, Plan::Fits(y)) => Plan::Fits(y),
        (
            Some(Plan::Short {
                placed: pa,
                nodes: na,
            }),
            Plan::Short {
                placed: pb,
                nodes: nb,
            },
        ) => {
            if pb > pa {
                Plan::Short {
                    placed: pb,
                    nodes: nb,
                }
            } else {
                Plan::Short {
                    placed: pa,
                    nodes: na,
                }
            }
        }
        (None, p) => p,
    }
}

fn plan_within(
    nodes: &NodeIndex,
    units: &[Unit],
    params: &GangParams,
    cap: &dyn Fn(usize) -> Option<Resource>,
    allowed: &dyn Fn(usize) -> bool,
) -> Plan {
    let max_nodes = match (params.policy, params.max_nodes) {
        (GangPolicy::StrictPack, 0) => 1,
        (_, 0) => usize::MAX,
        (_, n) => n as usize,
    };
    let mut sorted: Vec<&Unit> = units.iter().collect();
    sorted.sort_by(|a, b| {
        size_key(&b.cap)
            .cmp(&size_key(&a.cap))
            .then(a.key.cmp(&b.key))
    });
    match params.policy {
        GangPolicy::Spread => spread(nodes, &params.partition, &sorted, max_nodes, cap, allowed),
        GangPolicy::SameRack => {
            let mut racks: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
            for s in nodes
                .by_free_desc(&params.partition)
                .filter(|s| allowed(*s))
            {
                if let Some(n) = nodes.get(s) {
                    racks.entry(n.rack.as_str()).or_default().push(s);
                }
            }
            let mut best: Option<Plan> = None;
            for slots in racks.values() {
                let set: BTreeSet<usize> = slots.iter().copied().collect();
                let p = pack(nodes, &params.partition, &sorted, max_nodes, cap, &|s| {
                    set.contains(&s)
                });
                best = Some(better(best, p));
            }
            best.unwrap_or(Plan::Short {
                placed: 0,
                nodes: vec![],
            })
        }
        GangPolicy::Pack | GangPolicy::StrictPack => {
            pack(nodes, &params.partition, &sorted, max_nodes, cap, allowed)
        }
    }
}

/// What a plan puts on each node, summed.
pub fn per_node(assign: &[(AskKey, usize, Resource)]) -> BTreeMap<usize, Resource> {
    let mut out: BTreeMap<usize, Resource> = BTreeMap::new();
    for (_, s, cap) in assign {
        out.entry(*s).or_insert_with(Resource::zero).add_assign(cap);
    }
    out
}

fn distinct(p: &[(AskKey, usize, Resource)]) -> usize {
    p.iter().map(|(_, s, _)| *s).collect::<BTreeSet<_>>().len()
}

fn total(units: &[&Unit]) -> Resource {
    units
        .iter()
        .fold(Resource::zero(), |acc, u| acc.plus(&u.cap))
}

/// Fewest nodes, tightest fit: if what is left fits on one node, the node that fits it most
/// tightly; otherwise the node with the most room (most free GPUs, then memory), filled
/// first-fit with the largest units, and again.
fn pack(
    nodes: &NodeIndex,
    part: &str,
    units: &[&Unit],
    max_nodes: usize,
    cap: &dyn Fn(usize) -> Option<Resource>,
    allowed: &dyn Fn(usize) -> bool,
) -> Plan {
    let mut left: Vec<&Unit> = units.to_vec();
    let mut out: Vec<(AskKey, usize, Resource)> = Vec::new();
    let mut used: Vec<usize> = Vec::new();
    // Bounds the search on huge clusters: a gang never needs more candidates than this.
    let budget = 256 + 8 * units.len();
    while !left.is_empty() {
        if used.len() >= max_nodes {
            break;
        }
        let rest = total(&left);
        let mut probes = 0;
        let single = nodes
            .best_fit_order(part, rest.get(GPU), rest.memory_mb)
            .filter(|s| !used.contains(s) && allowed(*s))
            .take_while(|_| {
                probes += 1;
                probes <= budget
            })
            .find(|s| cap(*s).is_some_and(|c| rest.fits_in(&c)));
        if let Some(s) = single {
            for u in left.drain(..) {
                out.push((u.key, s, u.cap.clone()));
            }
            used.push(s);
            break;
        }
        // The roomiest node that takes at least one unit.
        let mut chosen = None;
        for s in nodes
            .by_free_desc(part)
            .filter(|s| !used.contains(s) && allowed(*s))
            .take(budget)
        {
            let Some(mut room) = cap(s) else { continue };
            let mut took = Vec::new();
            for (i, u) in left.iter().enumerate() {
                if u.cap.fits_in(&room) {
                    room.sub_assign(&u.cap);
                    took.push(i);
                }
            }
            if !took.is_empty() {
                chosen = Some((s, took));
                break;
            }
        }
        let Some((s, took)) = chosen else { break };
        for i in took.into_iter().rev() {
            let u = left.remove(i);
            out.push((u.key, s, u.cap.clone()));
        }
        used.push(s);
    }
    if left.is_empty() {
        Plan::Fits(out)
    } else {
        Plan::Short {
            placed: out.len(),
            nodes: used,
        }
    }
}

/// At most one member per node.
fn spread(
    nodes: &NodeIndex,
    part: &str,
    units: &[&Unit],
    max_nodes: usize,
    cap: &dyn Fn(usize) -> Option<Resource>,
    allowed: &dyn Fn(usize) -> bool,
) -> Plan {
    let mut out = Vec::new();
    let mut used: Vec<usize> = Vec::new();
    let budget = 256 + 8 * units.len();
    for u in units {
        if used.len() >= max_nodes {
            break;
        }
        let s = nodes
            .by_free_desc(part)
            .filter(|s| !used.contains(s) && allowed(*s))
            .take(budget)
            .find(|s| cap(*s).is_some_and(|c| u.cap.fits_in(&c)));
        match s {
            Some(s) => {
                out.push((u.key, s, u.cap.clone()));
                used.push(s);
            }
            None => break,
        }
    }
    if out.len() == units.len() {
        Plan::Fits(out)
    } else {
        Plan::Short {
            placed: out.len(),
            nodes: used,
        }
    }
}

/// "needs 16 GPUs, 64 vcores, 65536 MB on at most 2 nodes; the best fit now is 12 of 16
/// containers; reserved nodes a, b", the reason a gang waits, for its AM and the REST view.
pub fn describe(units: &[Unit], params: &GangParams, placed: usize, reserved: &[NodeId]) -> String {
    let need = units
        .iter()
        .fold(Resource::zero(), |acc, u| acc.plus(&u.cap));
    let mut parts = vec![];
    if need.get(GPU) > 0 {
        parts.push(format!("{} GPUs", need.get(GPU)));
    }
    parts.push(format!("{} vcores", need.vcores));
    parts.push(format!("{} MB", need.memory_mb));
    let scope = match (params.policy, params.max_nodes) {
        (GangPolicy::StrictPack, 0) | (_, 1) => " on one node".to_string(),
        (GangPolicy::Spread, _) => format!(" on {} distinct nodes", units.len()),
        (GangPolicy::SameRack, 0) => " in one rack".to_string(),
        (_, 0) => String::new(),
        (_, n) => format!(" on at most {n} nodes"),
    };
    let mut s = format!(
        "gang of {} containers needs {}{scope}; the best fit now is {placed} of {}",
        units.len(),
        parts.join(", "),
        units.len()
    );
    if let Some(m) = &params.gpu_model {
        s.push_str(&format!(" (GPU model {m})"));
    } else if params.same_gpu_model {
        s.push_str(" (all GPUs of one model)");
    }
    if !reserved.is_empty() {
        let names: Vec<String> = reserved.iter().map(|n| n.to_string()).collect();
        s.push_str(&format!("; reserved nodes {}", names.join(", ")));
    }
    s
}
