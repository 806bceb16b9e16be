//! What a refused capacity-scheduler configuration looks like: the [`Rule`] catalogue (one
//! variant per rule, with the id operators search for) and [`CapacityConfError`] (the rule,
//! the place, the queue, the property and YARN's message), plus how messages print numbers
//! and resources the way YARN's do.
//!
//! Owns the error type and its one-line `Display` form, which tests, docs and operators
//! match on: change no wording here. It must not decide anything about a configuration
//! (the rules are checked where the properties are read) and must not parse messages back.

use std::fmt;

use spindle_common::Resource;

use super::CsProps;

/// Which validation rule a configuration broke. The ids follow the rule catalogue of
/// YARN's configuration validator where it has one, so operators can search for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// A value is not of the type the property takes (a number, a boolean, ...).
    BadValue,
    /// A queue name is empty or has `.`, whitespace, `:` or `/` in it.
    InvalidQueueName,
    /// A child listed twice under one parent.
    DuplicateQueue,
    /// Two leaf queues share a short name (YARN: leaf names must be distinct).
    DuplicateLeafName,
    /// The tree is deeper than [`MAX_DEPTH`](super::MAX_DEPTH).
    TreeTooDeep,
    /// `root.queues` lists no queue.
    RootWithoutChildren,
    /// A capacity (or a maximum-capacity) outside `[0, 100]`, or a malformed one.
    CapacityRange,
    /// Percent children of a parent do not sum to 100 (or to 0 where allowed).
    CapacitySum,
    /// `maximum-capacity` below `capacity`.
    MaxCapacityBelowCapacity,
    /// Siblings mix percent, absolute and weight capacities.
    MixedChildrenCapacityTypes,
    /// A parent and its child use percent and absolute capacities.
    ParentChildCapacityType,
    /// Absolute children together ask for more than their parent has.
    AbsoluteExceedsParent,
    /// An absolute capacity names a resource type the cluster does not have.
    UnknownResourceType,
    /// A per-queue maximum allocation above the cluster's or the parent's.
    MaximumAllocation,
    /// `state` is neither RUNNING nor STOPPED.
    InvalidState,
    /// A child explicitly RUNNING under a STOPPED parent.
    RunningChildOfStoppedParent,
    /// A malformed ACL.
    InvalidAcl,
    /// A malformed or dangling `queue-mappings` entry.
    InvalidQueueMapping,
    /// An unknown or misplaced `ordering-policy`.
    InvalidOrderingPolicy,
    InvalidElasticPolicy,
    /// `gpu-idle-action` is not `report`, `notify` or `release`.
    InvalidGpuIdleAction,
    /// A malformed node label setting (`accessible-node-labels`, a per-label capacity, a
    /// label a parent cannot access, children's label capacities not summing to 100).
    InvalidNodeLabels,
    /// `resource-calculator` is not one of YARN's two calculators.
    InvalidResourceCalculator,
    /// A limit out of its range (user-limit-factor, am-resource-percent, ...).
    LimitRange,
    /// A queue present before is gone but was not STOPPED.
    QueueRemovalNotStopped,
    /// A queue reappears under another parent.
    QueueMoved,
    /// A RUNNING leaf became a parent.
    LeafToParentConversion,
    /// A `sched-conf` mutation that cannot be applied (unknown queue, existing queue, ...).
    InvalidMutation,
    /// A `sched-conf` mutation naming a property Spindle does not know (a typo, most
    /// likely): refused with the closest known one rather than stored.
    UnknownProperty,
}

impl Rule {
    pub fn id(&self) -> &'static str {
        match self {
            Rule::BadValue => "bad-value",
            Rule::InvalidQueueName => "invalid-queue-name",
            Rule::DuplicateQueue => "duplicate-queue",
            Rule::DuplicateLeafName => "duplicate-leaf-queue-name",
            Rule::TreeTooDeep => "queue-tree-too-deep",
            Rule::RootWithoutChildren => "root-without-children",
            Rule::CapacityRange => "capacity-range",
            Rule::CapacitySum => "capacity-sum",
            Rule::MaxCapacityBelowCapacity => "maximum-capacity-below-capacity",
            Rule::MixedChildrenCapacityTypes => "mixed-children-capacity-types",
            Rule::ParentChildCapacityType => "parent-child-capacity-type",
            Rule::AbsoluteExceedsParent => "absolute-children-exceed-parent",
            Rule::UnknownResourceType => "unknown-resource-type",
            Rule::MaximumAllocation => "maximum-allocation",
            Rule::InvalidState => "invalid-queue-state",
            Rule::RunningChildOfStoppedParent => "running-child-of-stopped-parent",
            Rule::InvalidAcl => "invalid-acl",
            Rule::InvalidQueueMapping => "invalid-queue-mapping",
            Rule::InvalidOrderingPolicy => "invalid-ordering-policy",
            Rule::InvalidElasticPolicy => "invalid-elastic-policy",
            Rule::InvalidGpuIdleAction => "invalid-gpu-idle-action",
            Rule::InvalidNodeLabels => "invalid-node-labels",
            Rule::InvalidResourceCalculator => "invalid-resource-calculator",
            Rule::LimitRange => "limit-range",
            Rule::QueueRemovalNotStopped => "queue-removal-not-stopped",
            Rule::QueueMoved => "queue-moved",
            Rule::LeafToParentConversion => "leaf-to-parent-conversion",
            Rule::InvalidMutation => "invalid-mutation",
            Rule::UnknownProperty => "unknown-property",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// A refused capacity-scheduler configuration. `Display` is one line:
/// `[<place>: ]<message> (queue <q>, property <p>, rule <id>)`, where the message is YARN's
/// text when YARN has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapacityConfError {
    pub rule: Rule,
    /// `file:line` (or `file`, or `-D`) of the property, when it came from one.
    pub place: Option<String>,
    pub queue: Option<String>,
    /// The full property name.
    pub property: Option<String>,
    pub message: String,
}

impl fmt::Display for CapacityConfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(p) = &self.place {
            write!(f, "{p}: ")?;
        }
        f.write_str(&self.message)?;
        let mut ctx = Vec::new();
        if let Some(q) = &self.queue {
            ctx.push(format!("queue {q}"));
        }
        if let Some(p) = &self.property {
            ctx.push(format!("property {p}"));
        }
        ctx.push(format!("rule {}", self.rule));
        write!(f, " ({})", ctx.join(", "))
    }
}

impl std::error::Error for CapacityConfError {}

impl CapacityConfError {
    pub(super) fn new(rule: Rule, message: impl Into<String>) -> Self {
        Self {
            rule,
            place: None,
            queue: None,
            property: None,
            message: message.into(),
        }
    }
    pub(super) fn queue(mut self, q: &str) -> Self {
        self.queue = Some(q.to_string());
        self
    }
    pub(super) fn property(mut self, p: &str) -> Self {
        self.property = Some(p.to_string());
        self
    }
    /// Fills in where the named property came from, if `props` knows (errors built without
    /// the property set, such as [`validate_transition`](super::validate_transition)'s, get
    /// their place this way).
    pub fn locate(mut self, props: &CsProps) -> Self {
        if self.place.is_none() {
            if let Some(p) = &self.property {
                self.place = props.origin(p).map(str::to_string);
            }
        }
        self
    }
}

pub(super) type Result<T> = std::result::Result<T, CapacityConfError>;

/// A number as YARN's messages print it: no trailing zeros.
pub(super) fn num(v: f64) -> String {
    let s = format!("{:.4}", v);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

pub(super) fn res(r: &Resource) -> String {
    let parts: Vec<String> = r
        .entries()
        .map(|(k, v)| {
            if v == i64::MAX {
                format!("{k}=unbounded")
            } else {
                format!("{k}={v}")
            }
        })
        .collect();
    format!("[{}]", parts.join(","))
}

pub(super) fn mem_vcores(r: &Resource) -> String {
    format!("<memory:{}, vCores:{}>", r.memory_mb, r.vcores)
}
