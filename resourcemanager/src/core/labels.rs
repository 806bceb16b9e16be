//! Node labels (partitions) and node attributes: the cluster's label set with exclusivity,
//! which node is in which partition (set centrally, or reported by NMs under distributed
//! configuration), the centrally set `rm.yarn.io/` attributes, and what they make of each
//! node in the scheduler (its partition, its attributes merged with the NM's `nm.yarn.io/`
//! ones).
//!
//! A change is validated whole first ([`RmCore::plan_labels`] returns the state it would
//! produce, or the refusal), the driver writes that state to the store, and only then is it
//! applied ([`RmCore::set_labels`]): durable before visible, nothing half-applied.
//!
//! Room a non-exclusive partition lent to the default partition is taken back, by preemption
//! notices, when the partition's own asks wait (run by the preemption monitor).

use std::collections::{BTreeMap, BTreeSet};

use spindle_common::{ContainerId, NodeId};

use super::{CoreError, RmCore};

/// The centrally set attributes' prefix.
pub const RM_PREFIX: &str = "rm.yarn.io/";
/// The NM-reported attributes' prefix.
pub const NM_PREFIX: &str = "nm.yarn.io/";

/// Labels and central attributes: what the store keeps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeLabels {
    /// Label to exclusivity.
    pub cluster: BTreeMap<String, bool>,
    /// Centralized mappings: `host:port` or `host` (every NM on it) to its label.
    pub mapping: BTreeMap<String, String>,
    /// Centrally set attributes by host: `rm.yarn.io/<name>` to value.
    pub attributes: BTreeMap<String, BTreeMap<String, String>>,
}

/// How an attribute mapping applies (YARN's `AttributeMappingOperationType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttributeOp {
    Add,
    Remove,
    Replace,
}

/// One change an administrator asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelChange {
    /// Labels with their exclusivity.
    AddLabels(Vec<(String, bool)>),
    RemoveLabels(Vec<String>),
    /// `host[:port]` to at most one label (none: the default partition).
    ReplaceNodeLabels {
        nodes: Vec<(String, Vec<String>)>,
        fail_on_unknown: bool,
    },
    /// Hosts (or `host:port`) to `(name, value)` pairs.
    Attributes {
        op: AttributeOp,
        nodes: Vec<(String, Vec<(String, String)>)>,
        fail_on_unknown: bool,
    },
}

/// YARN's label name rule: a letter or digit, then letters, digits, `-` or `_`; at most 255.
pub fn check_label_name(name: &str) -> Result<(), CoreError> {
    let ok = !name.is_empty()
        && name.len() <= 255
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(CoreError::InvalidLabelName(name.to_string()))
    }
}

/// A centrally set attribute's full name: a bare name gets `rm.yarn.io/`; another prefix is
/// refused (`nm.yarn.io/` belongs to the NMs).
pub fn central_attribute(name: &str) -> Result<String, CoreError> {
    let bare = match name.split_once('/') {
        None => name,
        Some((p, rest)) if format!("{p}/") == RM_PREFIX => rest,
        Some(_) => {
            return Err(CoreError::BadAttributePrefix {
                name: name.to_string(),
            })
        }
    };
    let ok = !bare.is_empty()
        && bare.len() <= 255
        && bare
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && bare
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !ok {
        return Err(CoreError::InvalidAttributeName(name.to_string()));
    }
    Ok(format!("{RM_PREFIX}{bare}"))
}

impl NodeLabels {
    /// The label `node` is in by the centralized mappings (`host:port` before `host`).
    pub fn central_label(&self, node: &NodeId) -> Option<&str> {
        self.mapping
            .get(&node.to_string())
            .or_else(|| self.mapping.get(&node.host))
            .map(String::as_str)
    }
}

impl RmCore {
    pub fn node_labels(&self) -> &NodeLabels {
        &self.labels
    }

    /// The partition a node is in now (`""`: the default).
    pub fn partition_of(&self, node: &NodeId) -> String {
        if self.conf.distributed_labels {
            return self.reported_labels.get(node).cloned().unwrap_or_default();
        }
        self.labels
            .central_label(node)
            .unwrap_or_default()
            .to_string()
    }

    fn known_node(&self, spec: &str) -> bool {
        self.nodes
            .keys()
            .any(|n| n.to_string() == spec || n.host == spec)
    }

    /// What `change` would make of the labels, or why it is refused; changes nothing.
    pub fn plan_labels(&self, change: LabelChange) -> Result<NodeLabels, CoreError> {
        let mut next = self.labels.clone();
        match change {
            LabelChange::AddLabels(labels) => {
                for (name, exclusive) in labels {
                    check_label_name(&name)?;
                    match next.cluster.get(&name) {
                        Some(e) if *e != exclusive => {
                            return Err(CoreError::LabelExists {
                                label: name,
                                exclusive: *e,
                            })
                        }
                        _ => {
                            next.cluster.insert(name, exclusive);
                        }
                    }
                }
            }
            LabelChange::RemoveLabels(labels) => {
                for name in labels {
                    if next.cluster.remove(&name).is_none() {
                        return Err(CoreError::UnknownLabel(name));
                    }
                    if let Some(node) = self
                        .nodes
                        .keys()
                        .find(|n| self.partition_of(n) == name)
                        .map(ToString::to_string)
                        .or_else(|| {
                            next.mapping
                                .iter()
                                .find(|(_, l)| **l == name)
                                .map(|(n, _)| n.clone())
                        })
                    {
                        return Err(CoreError::LabelInUseByNode { label: name, node });
                    }
                    if let Some(queue) = self.queue_using_label(&name) {
                        return Err(CoreError::LabelInUseByQueue { label: name, queue });
                    }
                }
            }
            LabelChange::ReplaceNodeLabels {
                nodes,
                fail_on_unknown,
            } => {
                if self.conf.distributed_labels {
                    return Err(CoreError::DistributedLabels);
                }
                for (node, labels) in nodes {
                    if node.trim().is_empty() {
                        return Err(CoreError::UnknownNode(node));
                    }
                    if fail_on_unknown && !self.known_node(&node) {
                        return Err(CoreError::UnknownNode(node));
                    }
                    let set: BTreeSet<String> =
                        labels.into_iter().filter(|l| !l.is_empty()).collect();
                    if set.len() > 1 {
                        return Err(CoreError::MoreThanOneLabel {
                            node,
                            labels: set.into_iter().collect(),
                        });
                    }
                    match set.into_iter().next() {
                        Some(l) if !next.cluster.contains_key(&l) => {
                            return Err(CoreError::UnknownLabel(l))
                        }
                        Some(l) => {
                            next.mapping.insert(node, l);
                        }
                        None => {
                            next.mapping.remove(&node);
                        }
                    }
                }
            }
            LabelChange::Attributes {
                op,
                nodes,
                fail_on_unknown,
            } => {
                for (node, attrs) in nodes {
                    if node.trim().is_empty() || (fail_on_unknown && !self.known_node(&node)) {
                        return Err(CoreError::UnknownNode(node));
                    }
                    let host = node.split(':').next().unwrap_or(&node).to_string();
                    let mut named = BTreeMap::new();
                    for (name, value) in attrs {
                        named.insert(central_attribute(&name)?, value);
                    }
                    let e = next.attributes.entry(host.clone()).or_default();
                    match op {
                        AttributeOp::Add => e.extend(named),
                        AttributeOp::Replace => *e = named,
                        AttributeOp::Remove => {
                            for k in named.keys() {
                                if e.remove(k).is_none() {
                                    return Err(CoreError::UnknownAttribute {
                                        node: node.clone(),
                                        name: k.clone(),
                                    });
                                }
                            }
                        }
                    }
                    if e.is_empty() {
                        next.attributes.remove(&host);
                    }
                }
            }
        }
        Ok(next)
    }

    /// The partition an ask of `app` runs in: its own label expression, else the
    /// application's, else its queue's `default-node-label-expression`, else the default
    /// (`""`; YARN's `*` too). The label must exist and the queue may have to access it.
    pub(super) fn ask_partition(
        &self,
        app: &spindle_common::ApplicationId,
        label: Option<&str>,
        is_am: bool,
    ) -> Result<String, CoreError> {
        let rec = self.apps.get(app);
        let leaf = self.sched.app(app).map(|a| a.queue);
        let queue = leaf.and_then(|l| self.sched.tree().get(l));
        let from_app = rec.and_then(|a| {
            if is_am {
                a.sub.am_node_label_expression.as_deref()
            } else {
                None
            }
            .or(a.sub.node_label_expression.as_deref())
        });
        let expr = label
            .or(from_app)
            .or(queue.and_then(|q| q.spec.default_label_expression.as_deref()))
            .unwrap_or_default()
            .trim();
        if expr.is_empty() || expr == "*" {
            return Ok(String::new());
        }
        if !self.labels.cluster.contains_key(expr) {
            return Err(CoreError::UnknownLabel(expr.to_string()));
        }
        if let Some(q) = queue.filter(|q| !q.accessible.allows(expr)) {
            return Err(CoreError::LabelNotAccessible {
                queue: q.spec.path.to_string(),
                label: expr.to_string(),
            });
        }
        Ok(expr.to_string())
    }

    /// Refuses an ask whose own anti-affinity can never hold: more containers that must each
    /// be on a node without their tag than the partition has nodes.
    pub(super) fn check_satisfiable(
        &self,
        partition: &str,
        tags: &[String],
        constraint: Option<&super::scheduler::placement::Constraint>,
        count: u32,
    ) -> Result<(), CoreError> {
        let Some(c) = constraint.filter(|c| c.spreads(tags)) else {
            return Ok(());
        };
        let _ = c;
        // A default-partition ask may also use the nodes of partitions that lend.
        let index = self.sched.nodes();
        let nodes: usize = self
            .sched
            .with_lenders(partition)
            .map(|p| index.partition_nodes(p))
            .sum();
        if nodes > 0 && count as usize > nodes {
            return Err(CoreError::Unsatisfiable(format!(
                "{count} containers tagged {} must each be on a node without that tag, but {} has only {nodes} nodes",
                tags.join(","),
                if partition.is_empty() {
                    "the default partition".to_string()
                } else {
                    format!("partition {partition}")
                }
            )));
        }
        Ok(())
    }

    /// Takes back room non-exclusive partitions lent to the default partition: where a
    /// partition's own asks wait, default-partition containers on its nodes get a
    /// preemption notice (newest first) until what they free covers what waits. Run by the
    /// preemption monitor, so only when preemption is enabled.
    pub(super) fn reclaim_lent(&mut self, conf: &super::PreemptionConf, now: u64) {
        let lending: Vec<String> = self
            .labels
            .cluster
            .iter()
            .filter(|(_, exclusive)| !**exclusive)
            .map(|(l, _)| l.clone())
            .collect();
        for part in lending {
            // What this partition's own asks wait for, and whose they are.
            let mut want = spindle_common::Resource::zero();
            let mut preemptor = None;
            for (id, a) in self.sched.apps() {
                for ask in a.asks.values().filter(|x| x.partition == part && x.any > 0) {
                    want.add_assign(&ask.capability.times(i64::from(ask.any)));
                    preemptor.get_or_insert((*id, a.queue));
                }
            }
            let Some((preemptor, leaf)) = preemptor else {
                continue;
            };
            // Free room of the partition already counts.
            for n in self.sched.nodes().iter().filter(|n| n.partition == part) {
                want.sub_assign(&n.free);
            }
            let noticed = |c: &ContainerId| self.preemption.notices.contains_key(c);
            let mut lent: Vec<(u64, ContainerId, spindle_common::Resource)> = self
                .containers
                .iter()
                .filter(|(_, c)| c.is_live() && !c.is_am && c.partition.is_empty())
                .filter(|(id, _)| !noticed(id))
                .filter(|(_, c)| {
                    self.sched
                        .node(&c.node)
                        .is_some_and(|n| n.partition == part)
                })
                .map(|(id, c)| (c.allocated_time, *id, c.resource.clone()))
                .collect();
            lent.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
            let deadline = now.saturating_add(conf.max_wait_before_kill_ms);
            for (_, c, r) in lent {
                if !want.entries().any(|(_, v)| v > 0) {
                    break;
                }
                want.sub_assign(&r);
                if conf.observe_only {
                    continue;
                }
                self.preemption.counters.containers_noticed += 1;
                self.preemption.notices.insert(
                    c,
                    super::preemption::Notice {
                        preemptor,
                        leaf,
                        reason: super::scheduler::victims::Reason::Partition,
                        notified_at: now,
                        deadline,
                        kill_at: deadline,
                        acknowledged: false,
                        killed: false,
                        shrink: None,
                    },
                );
                self.effects
                    .push(super::Effect::PreemptionNotice(c.attempt_id));
            }
        }
    }

    /// The first queue whose configuration names `label`.
    pub(super) fn queue_using_label(&self, label: &str) -> Option<String> {
        self.sched.tree().iter().find_map(|(_, q)| {
            let s = &q.spec;
            let listed = matches!(&s.accessible_labels,
                Some(super::queue_conf::AccessibleLabels::Only(l)) if l.contains(label));
            (listed
                || s.label_capacities.contains_key(label)
                || s.default_label_expression.as_deref() == Some(label))
            .then(|| s.path.to_string())
        })
    }

    /// Every label a queue configuration names must exist (`*` aside).
    pub fn check_queue_labels(
        &self,
        conf: &super::queue_conf::SchedulerConf,
    ) -> Result<(), CoreError> {
        for q in conf.root.walk() {
            let mut named: Vec<&String> = q.label_capacities.keys().collect();
            if let Some(super::queue_conf::AccessibleLabels::Only(l)) = &q.accessible_labels {
                named.extend(l.iter());
            }
            named.extend(q.default_label_expression.iter());
            if let Some(l) = named
                .into_iter()
                .find(|l| !l.is_empty() && !self.labels.cluster.contains_key(*l))
            {
                return Err(CoreError::QueueNamesUnknownLabel {
                    queue: q.path.to_string(),
                    label: l.clone(),
                });
            }
        }
        Ok(())
    }

    /// Applies labels the store now holds: the scheduler's label set, then every node's
    /// partition and attributes.
    pub fn set_labels(&mut self, labels: NodeLabels, now: u64) {
        self.labels = labels;
        self.sched.set_labels(self.labels.cluster.clone());
        let ids: Vec<NodeId> = self.nodes.keys().cloned().collect();
        for id in ids {
            self.apply_node_labels(&id);
        }
        self.run_scheduler(now);
        self.changed();
    }

    /// An NM's report under distributed configuration: its partition, or why it is refused
    /// (the node keeps its previous one).
    pub fn report_node_labels(&mut self, id: &NodeId, labels: &[String]) -> Result<(), CoreError> {
        if !self.conf.distributed_labels {
            return Err(CoreError::CentralizedLabels);
        }
        let set: BTreeSet<&String> = labels.iter().filter(|l| !l.is_empty()).collect();
        if set.len() > 1 {
            return Err(CoreError::MoreThanOneLabel {
                node: id.to_string(),
                labels: set.into_iter().cloned().collect(),
            });
        }
        let label = set.into_iter().next().cloned().unwrap_or_default();
        if !label.is_empty() && !self.labels.cluster.contains_key(&label) {
            return Err(CoreError::UnknownLabel(label));
        }
        self.reported_labels.insert(id.clone(), label);
        self.apply_node_labels(id);
        Ok(())
    }

    /// Runs the scheduler after a node changed what it is.
    pub fn run_after_change(&mut self, now: u64) {
        self.run_scheduler(now);
        self.changed();
    }

    /// The NM's own attributes changed: they must all be `nm.yarn.io/`.
    pub fn report_node_attributes(
        &mut self,
        id: &NodeId,
        attributes: BTreeMap<String, String>,
    ) -> Result<(), CoreError> {
        if let Some(bad) = attributes.keys().find(|k| !k.starts_with(NM_PREFIX)) {
            return Err(CoreError::BadAttributePrefix { name: bad.clone() });
        }
        if let Some(n) = self.nodes.get_mut(id) {
            n.attributes = attributes;
        }
        self.apply_node_labels(id);
        Ok(())
    }

    /// The node's attributes: the NM's and the central ones for its host.
    pub fn node_attributes(&self, id: &NodeId) -> BTreeMap<String, String> {
        let mut out = self
            .nodes
            .get(id)
            .map(|n| n.attributes.clone())
            .unwrap_or_default();
        if let Some(c) = self.labels.attributes.get(&id.host) {
            out.extend(c.clone());
        }
        out
    }

    /// Tells the scheduler a node's partition and attributes.
    pub(super) fn apply_node_labels(&mut self, id: &NodeId) {
        let part = self.partition_of(id);
        let part = if self.labels.cluster.contains_key(&part) {
            part
        } else {
            String::new()
        };
        self.sched.set_partition(id, &part);
        let attrs = self.node_attributes(id);
        self.sched.set_node_attributes(id, attrs);
    }
}
