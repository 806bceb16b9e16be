//! Where an ask may go besides room: the node's partition (its label) and the ask's
//! placement constraint (YARN's `PlacementConstraint`): allocation tags counted on the node
//! or its rack (IN, NOTIN, CARDINALITY in YARN's namespaces) and node attributes (`=`,
//! `!=`), combined with AND and OR. One predicate, [`admits`], serves single asks in the
//! pass and every member of a gang in the gang planner, so the two cannot disagree.
//!
//! Must not: know about queues or capacities (a partition's share is `queues`' business).

use std::collections::{BTreeMap, BTreeSet};

use spindle_common::ApplicationId;

use super::node_index::{NodeIndex, SchedNode};

/// The default partition: nodes without a label.
pub const DEFAULT_PARTITION: &str = "";

/// Whose containers a tag constraint counts (YARN's allocation tag namespaces).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum TagScope {
    /// `self/` (and a bare tag): this application's containers.
    This,
    /// `not-self/`: every other application's.
    NotThis,
    /// `all/`: everyone's.
    All,
    /// `app-id/<id>/`: one application's.
    App(ApplicationId),
    /// `app-tag/<tag>/`: applications submitted with this application tag.
    AppTag(String),
}

/// A tag as a constraint names it: whose containers, and the tag.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct TagTarget {
    pub scope: TagScope,
    pub tag: String,
}

/// Where tags are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Node,
    Rack,
}

/// An ask's placement constraint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Constraint {
    /// Between `min` and `max` containers tagged `target` in `scope` (IN is `1..`, NOTIN is
    /// `0..=0`), counting the new container itself when its tags match.
    Cardinality {
        scope: Scope,
        target: TagTarget,
        min: u32,
        max: u32,
    },
    /// The node's attribute `name` is one of `values` (`=`), or is not (`!=`, which a node
    /// without the attribute satisfies).
    Attribute {
        name: String,
        equal: bool,
        values: Vec<String>,
    },
    And(Vec<Constraint>),
    Or(Vec<Constraint>),
}

impl Constraint {
    /// Whether the constraint counts tags (so the node must be looked at one by one).
    pub fn counts_tags(&self) -> bool {
        match self {
            Constraint::Cardinality { .. } => true,
            Constraint::Attribute { .. } => false,
            Constraint::And(c) | Constraint::Or(c) => c.iter().any(Constraint::counts_tags),
        }
    }

    /// A gang's members placed by one plan must be on distinct nodes: the constraint keeps
    /// its own tag off a node that already has one (`NOTIN,NODE,<own tag>`), which a plan
    /// made before any member runs cannot see.
    pub fn spreads(&self, own: &[String]) -> bool {
        match self {
            Constraint::Cardinality {
                scope: Scope::Node,
                target,
                max: 0,
                ..
            } => target.scope == TagScope::This && own.contains(&target.tag),
            Constraint::And(c) => c.iter().any(|x| x.spreads(own)),
            _ => false,
        }
    }
}

/// The containers on one node by tag: in all, per application and per application tag.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeTags {
    total: BTreeMap<String, u32>,
    by_app: BTreeMap<(ApplicationId, String), u32>,
    by_app_tag: BTreeMap<(String, String), u32>,
}

impl NodeTags {
    /// One container of `app` (submitted with `app_tags`) tagged `tags` comes (`up`) or goes.
    pub fn count(
        &mut self,
        app: &ApplicationId,
        app_tags: &BTreeSet<String>,
        tags: &[String],
        up: bool,
    ) {
        fn bump<K: Ord>(m: &mut BTreeMap<K, u32>, k: K, up: bool) {
            if up {
                *m.entry(k).or_insert(0) += 1;
            } else if let Some(v) = m.get_mut(&k) {
                *v = v.saturating_sub(1);
                if *v == 0 {
                    m.remove(&k);
                }
            }
        }
        for t in tags {
            bump(&mut self.total, t.clone(), up);
            bump(&mut self.by_app, (*app, t.clone()), up);
            for g in app_tags {
                bump(&mut self.by_app_tag, (g.clone(), t.clone()), up);
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.total.is_empty()
    }

    /// Containers tagged `target.tag` whose owner the target's scope names, as seen by `app`.
    pub fn of(&self, target: &TagTarget, app: &ApplicationId) -> u32 {
        let t = &target.tag;
        let mine = || self.by_app.get(&(*app, t.clone())).copied().unwrap_or(0);
        match &target.scope {
            TagScope::This => mine(),
            TagScope::All => self.total.get(t).copied().unwrap_or(0),
            TagScope::NotThis => self.total.get(t).copied().unwrap_or(0) - mine(),
            TagScope::App(other) => self.by_app.get(&(*other, t.clone())).copied().unwrap_or(0),
            TagScope::AppTag(g) => self
                .by_app_tag
                .get(&(g.clone(), t.clone()))
                .copied()
                .unwrap_or(0),
        }
    }

    /// Every tag with its count (the `allocationTags` of `/nodes`).
    pub fn totals(&self) -> &BTreeMap<String, u32> {
        &self.total
    }
}

/// Who asks: the application (tags in `self/` and `not-self/` are counted from it).
pub struct Asker<'a> {
    pub app: &'a ApplicationId,
}

/// Whether `c` admits `node` for `asker`'s next container.
pub fn satisfied(c: &Constraint, nodes: &NodeIndex, node: &SchedNode, asker: &Asker) -> bool {
    match c {
        Constraint::Cardinality {
            scope,
            target,
            min,
            max,
        } => {
            let here = match scope {
                Scope::Node => node.tags.of(target, asker.app),
                Scope::Rack => nodes.rack_tags(&node.rack, target, asker.app),
            };
            // YARN counts the containers already there: IN is 1.., NOTIN is 0..=0.
            *min <= here && here <= *max
        }
        Constraint::Attribute {
            name,
            equal,
            values,
        } => {
            let has = node
                .attributes
                .get(name)
                .is_some_and(|v| values.iter().any(|x| x == v));
            has == *equal
        }
        Constraint::And(cs) => cs.iter().all(|x| satisfied(x, nodes, node, asker)),
        Constraint::Or(cs) => cs.iter().any(|x| satisfied(x, nodes, node, asker)),
    }
}

/// The one placement predicate: `node` is in `partition` (or lends to it) and satisfies
/// `constraint`.
pub fn admits(
    nodes: &NodeIndex,
    node: &SchedNode,
    partition: &str,
    constraint: Option<&Constraint>,
    asker: &Asker,
) -> bool {
    node.partition == partition && constraint.is_none_or(|c| satisfied(c, nodes, node, asker))
}
