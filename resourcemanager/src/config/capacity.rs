//! `capacity-scheduler.xml` (and the `scheduler-conf` mutation API) to the typed, validated
//! [`SchedulerConf`] the scheduler core runs on.
//!
//! Two layers, as everywhere in Spindle's configuration: the raw *live property set*
//! ([`CsProps`]: every `yarn.scheduler.capacity.*` key with its value and where it came
//! from) and the typed tree built from it by [`parse_props`]. The property set is what
//! `GET /scheduler-conf` shows, what a mutation edits ([`apply_mutation`]) and what the
//! state store keeps; the typed tree is what the core gets. Every rule YARN's refresh
//! enforces has its own [`Rule`], and every error names the place (`file:line` when the
//! value came from a file), the queue, the property and the rule, in YARN's words where
//! YARN has them, so a refused `refreshQueues` or `PUT /scheduler-conf` tells the operator
//! exactly what to fix. [`validate_transition`] holds the rules about going from the
//! running tree to a new one (no removing a RUNNING queue, no moving a queue, no turning a
//! RUNNING leaf into a parent); running applications are the core's to check.
//!
//! Nothing here does I/O: files are read by the caller into a [`Configuration`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use spindle_common::config::{keys, value, Configuration};
use spindle_common::Resource;

use crate::core::queue_conf::{
    Acl, Calculator, CapacitySpec, MaxCapacitySpec, OrderingPolicy, QueueMapping, QueueSpec,
    QueueState, SchedulerConf,
};

/// Prefix of every capacity-scheduler property.
pub const PREFIX: &str = keys::CAPACITY_SCHEDULER_PREFIX;
/// Deepest queue tree accepted (root is depth 0); a guard against runaway recursion.
pub const MAX_DEPTH: usize = 32;
/// YARN's tolerance on a percent sum, as a fraction (`PRECISION` in ParentQueue).
const PRECISION: f64 = 0.0005;
/// Longest queue name accepted.
const MAX_QUEUE_NAME: usize = 255;

const DEFAULT_CALCULATOR_CLASS: &str =
    "org.apache.hadoop.yarn.util.resource.DefaultResourceCalculator";
const DOMINANT_CALCULATOR_CLASS: &str =
    "org.apache.hadoop.yarn.util.resource.DominantResourceCalculator";

// ------------------------------------------------------------------------------- errors

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
    /// The tree is deeper than [`MAX_DEPTH`].
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
            Rule::InvalidResourceCalculator => "invalid-resource-calculator",
            Rule::LimitRange => "limit-range",
            Rule::QueueRemovalNotStopped => "queue-removal-not-stopped",
            Rule::QueueMoved => "queue-moved",
            Rule::LeafToParentConversion => "leaf-to-parent-conversion",
            Rule::InvalidMutation => "invalid-mutation",
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
    fn new(rule: Rule, message: impl Into<String>) -> Self {
        Self {
            rule,
            place: None,
            queue: None,
            property: None,
            message: message.into(),
        }
    }
    fn queue(mut self, q: &str) -> Self {
        self.queue = Some(q.to_string());
        self
    }
    fn property(mut self, p: &str) -> Self {
        self.property = Some(p.to_string());
        self
    }
    /// Fills in where the named property came from, if `props` knows (errors built without
    /// the property set, such as [`validate_transition`]'s, get their place this way).
    pub fn locate(mut self, props: &CsProps) -> Self {
        if self.place.is_none() {
            if let Some(p) = &self.property {
                self.place = props.origin(p).map(str::to_string);
            }
        }
        self
    }
}

type Result<T> = std::result::Result<T, CapacityConfError>;

// ---------------------------------------------------------------------- the property set

/// One live capacity-scheduler property.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsProp {
    /// The value, `${...}` already expanded, not trimmed (ACLs care about a leading space).
    pub value: String,
    /// Where it came from (`conf/capacity-scheduler.xml:12`, `-D`, `<default>`); `None` for
    /// a value set through the mutation API or restored from the state store.
    pub origin: Option<String>,
}

/// The live set of `yarn.scheduler.capacity.*` properties, in name order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CsProps(BTreeMap<String, CsProp>);

/// Where YARN's built-in defaults are said to come from.
const DEFAULT_ORIGIN: &str = "<default>";

impl CsProps {
    /// Every capacity-scheduler property of `conf`, expanded, with its `file:line`. When the
    /// configuration names no queue at all, YARN's shipped defaults (`root.queues=default`,
    /// `root.default.capacity=100`) are added, so that the live set always describes a tree
    /// (and `GET /scheduler-conf` shows it).
    pub fn from_conf(conf: &Configuration) -> Result<Self> {
        let mut out = BTreeMap::new();
        for name in conf.names_with_prefix(PREFIX) {
            let value = conf
                .get(name)
                .map_err(|e| CapacityConfError::new(Rule::BadValue, e.to_string()).property(name))?
                .unwrap_or_default();
            let origin = conf.source(name).map(|s| s.to_string());
            out.insert(name.to_string(), CsProp { value, origin });
        }
        let mut props = CsProps(out);
        props.add_yarn_defaults();
        Ok(props)
    }

    /// A set from plain pairs (the state store, tests), all with the same origin.
    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
        origin: Option<&str>,
    ) -> Self {
        let mut props = CsProps(
            pairs
                .into_iter()
                .map(|(k, v)| {
                    (
                        k.into(),
                        CsProp {
                            value: v.into(),
                            origin: origin.map(str::to_string),
                        },
                    )
                })
                .collect(),
        );
        props.add_yarn_defaults();
        props
    }

    fn add_yarn_defaults(&mut self) {
        let root_queues = format!("{PREFIX}root.queues");
        if self.0.contains_key(&root_queues) {
            return;
        }
        let default = CsProp {
            value: "default".into(),
            origin: Some(DEFAULT_ORIGIN.into()),
        };
        self.0.insert(root_queues, default);
        let cap = format!("{PREFIX}root.default.capacity");
        self.0.entry(cap).or_insert(CsProp {
            value: "100".into(),
            origin: Some(DEFAULT_ORIGIN.into()),
        });
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(|p| p.value.as_str())
    }

    pub fn origin(&self, name: &str) -> Option<&str> {
        self.0.get(name).and_then(|p| p.origin.as_deref())
    }

    pub fn set(&mut self, name: &str, value: &str) {
        self.0.insert(
            name.to_string(),
            CsProp {
                value: value.to_string(),
                origin: None,
            },
        );
    }

    pub fn remove(&mut self, name: &str) {
        self.0.remove(name);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `(name, value)` in name order.
    pub fn pairs(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.0.iter().map(|(k, v)| (k.as_str(), v.value.as_str()))
    }

    /// The same values with their origins forgotten, to compare two sets by content.
    pub fn values(&self) -> BTreeMap<String, String> {
        self.pairs()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn err(&self, rule: Rule, name: &str, message: impl Into<String>) -> CapacityConfError {
        let mut e = CapacityConfError::new(rule, message).property(name);
        e.place = self.origin(name).map(str::to_string);
        e
    }

    /// Trimmed value, `None` when unset.
    fn trimmed(&self, name: &str) -> Option<&str> {
        self.get(name).map(str::trim)
    }

    fn f64(&self, name: &str) -> Result<Option<f64>> {
        match self.trimmed(name) {
            None => Ok(None),
            Some(v) => value::parse_f64(v).map(Some).ok_or_else(|| {
                self.err(
                    Rule::BadValue,
                    name,
                    format!("expected a number, got '{v}'"),
                )
            }),
        }
    }

    fn int(&self, name: &str) -> Result<Option<i64>> {
        match self.trimmed(name) {
            None => Ok(None),
            Some(v) => value::parse_integer(v)
                .and_then(|n| i64::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| {
                    self.err(
                        Rule::BadValue,
                        name,
                        format!("expected {}, got '{v}'", value::EXPECTED_INTEGER),
                    )
                }),
        }
    }

    fn bool(&self, name: &str, default: bool) -> Result<bool> {
        match self.trimmed(name) {
            None => Ok(default),
            Some(v) => value::parse_bool(v).ok_or_else(|| {
                self.err(
                    Rule::BadValue,
                    name,
                    format!("expected {}, got '{v}'", value::EXPECTED_BOOL),
                )
            }),
        }
    }

    /// A count that must fit a `u32`; `None` when unset.
    fn count(&self, name: &str) -> Result<Option<u32>> {
        match self.int(name)? {
            None => Ok(None),
            Some(n) => u32::try_from(n).map(Some).map_err(|_| {
                self.err(
                    Rule::LimitRange,
                    name,
                    format!("expected an integer from 0 to {}, got {n}", u32::MAX),
                )
            }),
        }
    }

    /// The queue paths of the tree these properties describe (root first, then each
    /// parent's children in listed order), ignoring anything malformed: for mutations,
    /// which must know what exists before the result is validated as a whole.
    pub fn queue_paths(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![("root".to_string(), 0usize)];
        let mut seen = BTreeSet::new();
        while let Some((path, depth)) = stack.pop() {
            if !seen.insert(path.clone()) || depth > MAX_DEPTH {
                continue;
            }
            out.push(path.clone());
            let children = self
                .get(&key(&path, "queues"))
                .map(value::split_list)
                .unwrap_or_default();
            for c in children.iter().rev() {
                stack.push((format!("{path}.{c}"), depth + 1));
            }
        }
        out
    }
}

fn key(queue: &str, suffix: &str) -> String {
    format!("{PREFIX}{queue}.{suffix}")
}

// ------------------------------------------------------------------- yarn-site settings

/// What the capacity scheduler reads from `yarn-site.xml` (and `resource-types.xml`):
/// fixed for the life of the RM, never changed through the mutation API.
#[derive(Debug, Clone, PartialEq)]
pub struct SiteSettings {
    /// `yarn.scheduler.maximum-allocation-*` and each type's maximum allocation: no queue's
    /// maximum allocation may exceed it.
    pub max_allocation: Resource,
    /// The extended resource types (`yarn.resource-types`) an absolute capacity may name.
    pub resource_types: Vec<String>,
    pub max_application_priority: i32,
    pub admin_acl: Acl,
    pub acl_enabled: bool,
}

impl SiteSettings {
    pub fn from_conf(conf: &Configuration, max_allocation: &Resource) -> Result<Self> {
        let site_err = |name: &str, message: String| {
            let mut e = CapacityConfError::new(Rule::BadValue, message).property(name);
            e.place = conf.source(name).map(|s| s.to_string());
            e
        };
        let resource_types = conf
            .get_strings(keys::RESOURCE_TYPES)
            .map_err(|e| site_err(keys::RESOURCE_TYPES, e.to_string()))?;
        let prio_key = keys::CLUSTER_MAX_APPLICATION_PRIORITY;
        let prio = conf
            .get_i64(prio_key, keys::DEFAULT_CLUSTER_MAX_APPLICATION_PRIORITY)
            .map_err(|e| site_err(prio_key, e.to_string()))?;
        let max_application_priority =
            i32::try_from(prio)
                .ok()
                .filter(|p| *p >= 0)
                .ok_or_else(|| {
                    let mut e = site_err(
                        prio_key,
                        format!("must be from 0 to {}, got {prio}", i32::MAX),
                    );
                    e.rule = Rule::LimitRange;
                    e
                })?;
        let acl_raw = conf
            .get(keys::ADMIN_ACL)
            .map_err(|e| site_err(keys::ADMIN_ACL, e.to_string()))?
            .unwrap_or_else(|| keys::DEFAULT_ADMIN_ACL.to_string());
        let admin_acl = parse_acl(&acl_raw).map_err(|m| {
            let mut e = site_err(keys::ADMIN_ACL, m);
            e.rule = Rule::InvalidAcl;
            e
        })?;
        let acl_enabled = conf
            .get_bool(keys::ACL_ENABLE, keys::DEFAULT_ACL_ENABLE)
            .map_err(|e| site_err(keys::ACL_ENABLE, e.to_string()))?;
        Ok(Self {
            max_allocation: max_allocation.clone(),
            resource_types,
            max_application_priority,
            admin_acl,
            acl_enabled,
        })
    }

    /// Defaults for tests: YARN's `maximum-allocation` (8192 MB, 4 vcores), no extra types,
    /// ACLs off.
    pub fn for_tests() -> Self {
        Self {
            max_allocation: Resource::new(8192, 4),
            resource_types: Vec::new(),
            max_application_priority: 0,
            admin_acl: Acl::everyone(),
            acl_enabled: false,
        }
    }
}

// ------------------------------------------------------------------------- entry points

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
    let global_am = p.am_percent(&format!("{PREFIX}maximum-am-resource-percent"), 0.1)?;
    let root_ctx = ParentCtx {
        path: String::new(),
        state: QueueState::Running,
        abs_capacity: Some(1.0),
        abs_max: Some(1.0),
        capacity: None,
        max_allocation: None,
    };
    let root = p.queue("root", &root_ctx, 0, global_am)?;
    if root.children.is_empty() {
        let k = key("root", "queues");
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
    let max_applications = props.count(max_apps_key)?.unwrap_or(10_000);
    let max_parallel_apps = props.count(&format!("{PREFIX}max-parallel-apps"))?;
    let user_max_parallel_apps = props.count(&format!("{PREFIX}user.max-parallel-apps"))?;
    let mut user_max_parallel_apps_for = BTreeMap::new();
    let user_prefix = format!("{PREFIX}user.");
    for (name, _) in props.pairs() {
        let Some(rest) = name.strip_prefix(&user_prefix) else {
            continue;
        };
        let Some(user) = rest.strip_suffix(".max-parallel-apps") else {
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
    let queue_mappings_override =
        props.bool(&format!("{PREFIX}queue-mappings-override.enable"), false)?;
    let nld_key = format!("{PREFIX}node-locality-delay");
    let node_locality_delay = match props.int(&nld_key)? {
        None => 40,
        Some(n) => u32::try_from(n).map_err(|_| {
            props.err(
                Rule::LimitRange,
                &nld_key,
                format!(
                    "node-locality-delay must be from 0 to {}, got {n}",
                    u32::MAX
                ),
            )
        })?,
    };
    let rld_key = format!("{PREFIX}rack-locality-additional-delay");
    let rack_locality_additional_delay = match props.int(&rld_key)? {
        None => -1,
        Some(n) => i32::try_from(n).ok().filter(|n| *n >= -1).ok_or_else(|| {
            props.err(
                Rule::LimitRange,
                &rld_key,
                format!("rack-locality-additional-delay must be -1 (derived) or a count of missed opportunities, got {n}"),
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
        rack_locality_additional_delay,
        max_application_priority: site.max_application_priority,
        admin_acl: site.admin_acl.clone(),
        acl_enabled: site.acl_enabled,
    })
}

// ------------------------------------------------------------------------ the tree walk

/// What a child needs to know about its parent.
struct ParentCtx {
    /// Empty for root's "parent".
    path: String,
    state: QueueState,
    /// Fraction of the cluster, when it can be known without the cluster's size (only
    /// percent capacities all the way up).
    abs_capacity: Option<f64>,
    abs_max: Option<f64>,
    /// The parent's own capacity; None for root.
    capacity: Option<CapacitySpec>,
    /// The parent's effective maximum allocation, if it or an ancestor set one.
    max_allocation: Option<Resource>,
}

struct Parser<'a> {
    props: &'a CsProps,
    site: &'a SiteSettings,
    /// Leaf short name -> path, to refuse duplicates.
    leaves: BTreeMap<String, String>,
}

/// Whether a capacity was configured and in which form, for the sibling checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Mode {
    Percent,
    Absolute,
    Weight,
}

impl Mode {
    fn of(c: &CapacitySpec) -> Self {
        match c {
            CapacitySpec::Percent(_) => Mode::Percent,
            CapacitySpec::Absolute(_) => Mode::Absolute,
            CapacitySpec::Weight(_) => Mode::Weight,
        }
    }
    fn word(&self) -> &'static str {
        match self {
            Mode::Percent => "percentage",
            Mode::Absolute => "absolute",
            Mode::Weight => "weight",
        }
    }
}

impl Parser<'_> {
    fn queue(
        &mut self,
        path: &str,
        parent: &ParentCtx,
        depth: usize,
        global_am: f64,
    ) -> Result<QueueSpec> {
        let props = self.props;
        let children_key = key(path, "queues");
        if depth > MAX_DEPTH {
            return Err(props
                .err(
                    Rule::TreeTooDeep,
                    &children_key,
                    format!("queue tree deeper than {MAX_DEPTH} levels"),
                )
                .queue(path));
        }
        let is_root = path == "root";
        let child_names = props
            .get(&children_key)
            .map(value::split_list)
            .unwrap_or_default();
        let mut seen = BTreeSet::new();
        for c in &child_names {
            if let Err(why) = check_queue_name(c) {
                return Err(props
                    .err(
                        Rule::InvalidQueueName,
                        &children_key,
                        format!("Illegal queue name '{c}' under {path}: {why}"),
                    )
                    .queue(path));
            }
            if !seen.insert(c.as_str()) {
                return Err(props
                    .err(
                        Rule::DuplicateQueue,
                        &children_key,
                        format!("queue {path}.{c} is listed twice in {children_key}"),
                    )
                    .queue(path));
            }
        }

        // Capacity.
        let cap_key = key(path, "capacity");
        let cap_set = !is_root && props.get(&cap_key).is_some();
        let capacity = if is_root {
            CapacitySpec::Percent(100.0)
        } else {
            match props.trimmed(&cap_key) {
                None => CapacitySpec::Percent(0.0),
                Some(raw) => self.capacity(path, &cap_key, raw)?,
            }
        };
        let max_key = key(path, "maximum-capacity");
        let max_capacity = if is_root {
            MaxCapacitySpec::Percent(100.0)
        } else {
            match props.trimmed(&max_key) {
                None => MaxCapacitySpec::Percent(100.0),
                Some(raw) => self.max_capacity(path, &max_key, raw)?,
            }
        };
        // Absolute figures (fractions of the cluster) when percent all the way up.
        let (abs_capacity, abs_max) = match (&capacity, &max_capacity) {
            (CapacitySpec::Percent(c), MaxCapacitySpec::Percent(m)) => (
                parent.abs_capacity.map(|a| a * c / 100.0),
                parent.abs_max.map(|a| a * m / 100.0),
            ),
            _ => (None, None),
        };
        self.check_max_vs_capacity(
            path,
            &cap_key,
            &max_key,
            &capacity,
            &max_capacity,
            abs_capacity,
            abs_max,
        )?;
        if let (CapacitySpec::Absolute(_), Some(pc)) = (&capacity, &parent.capacity) {
            if Mode::of(pc) == Mode::Percent {
                return Err(props
                    .err(
                        Rule::ParentChildCapacityType,
                        &cap_key,
                        format!(
                            "Parent queue '{}' and child queue '{path}' should use either percentage based capacity or absolute resource together for label:",
                            parent.path
                        ),
                    )
                    .queue(path));
            }
        }
        if let (CapacitySpec::Percent(_), Some(CapacitySpec::Absolute(_))) =
            (&capacity, &parent.capacity)
        {
            if cap_set {
                return Err(props
                    .err(
                        Rule::ParentChildCapacityType,
                        &cap_key,
                        format!(
                            "Parent queue '{}' and child queue '{path}' should use either percentage based capacity or absolute resource together for label:",
                            parent.path
                        ),
                    )
                    .queue(path));
            }
        }

        // State.
        let state_key = key(path, "state");
        let state = match props.trimmed(&state_key) {
            None => parent.state,
            Some(s) if s.eq_ignore_ascii_case("RUNNING") => {
                if parent.state == QueueState::Stopped {
                    return Err(props
                        .err(
                            Rule::RunningChildOfStoppedParent,
                            &state_key,
                            format!(
                                "The parent queue:{} cannot be STOPPED as the child queue:{path} is in RUNNING state.",
                                parent.path
                            ),
                        )
                        .queue(path));
                }
                QueueState::Running
            }
            Some(s) if s.eq_ignore_ascii_case("STOPPED") => QueueState::Stopped,
            Some(s) => {
                return Err(props
                    .err(
                        Rule::InvalidState,
                        &state_key,
                        format!("queue state must be RUNNING or STOPPED, got '{s}'"),
                    )
                    .queue(path))
            }
        };

        // Limits.
        let ulf_key = key(path, "user-limit-factor");
        let user_limit_factor = props.f64(&ulf_key)?.unwrap_or(1.0);
        if !(user_limit_factor > 0.0 || user_limit_factor == -1.0) {
            return Err(props
                .err(
                    Rule::LimitRange,
                    &ulf_key,
                    format!(
                        "user-limit-factor must be positive, or -1 for no limit, got {}",
                        num(user_limit_factor)
                    ),
                )
                .queue(path));
        }
        let mulp_key = key(path, "minimum-user-limit-percent");
        let minimum_user_limit_percent = props.f64(&mulp_key)?.unwrap_or(100.0);
        if !(minimum_user_limit_percent > 0.0 && minimum_user_limit_percent <= 100.0) {
            return Err(props
                .err(
                    Rule::LimitRange,
                    &mulp_key,
                    format!(
                        "minimum-user-limit-percent must be above 0 and at most 100, got {}",
                        num(minimum_user_limit_percent)
                    ),
                )
                .queue(path));
        }
        let ma_key = key(path, "maximum-applications");
        // YARN: a negative (or unset) per-queue value derives it from the global one.
        let max_applications = match props.int(&ma_key)? {
            None => None,
            Some(n) if n < 0 => None,
            Some(n) => Some(u32::try_from(n).map_err(|_| {
                props
                    .err(
                        Rule::LimitRange,
                        &ma_key,
                        format!("maximum-applications must be at most {}, got {n}", u32::MAX),
                    )
                    .queue(path)
            })?),
        };
        let max_parallel_apps = props
            .count(&key(path, "max-parallel-apps"))
            .map_err(|e| e.queue(path))?;
        let max_am_resource_percent = self
            .am_percent(&key(path, "maximum-am-resource-percent"), global_am)
            .map_err(|e| e.queue(path))?;
        let max_allocation = self.max_allocation(path, parent)?;

        // ACLs: unset inherits (YARN ORs up the tree; root defaults to everyone).
        let acl_submit = self.acl(path, "acl_submit_applications")?;
        let acl_admin = self.acl(path, "acl_administer_queue")?;

        // Ordering.
        let op_key = key(path, "ordering-policy");
        let is_leaf = child_names.is_empty();
        let ordering = match props.trimmed(&op_key) {
            None => OrderingPolicy::Fifo,
            Some(raw) => self.ordering(path, &op_key, raw, is_leaf)?,
        };
        let dap_key = key(path, "default-application-priority");
        let default_application_priority = self.i32(path, &dap_key)?.unwrap_or(0);
        let priority = self.i32(path, &key(path, "priority"))?.unwrap_or(0);

        let mut spec = QueueSpec::new(path, capacity.clone());
        spec.max_capacity = max_capacity;
        spec.state = state;
        spec.user_limit_factor = user_limit_factor;
        spec.minimum_user_limit_percent = minimum_user_limit_percent;
        spec.max_applications = max_applications;
        spec.max_parallel_apps = max_parallel_apps;
        spec.max_am_resource_percent = max_am_resource_percent;
        spec.max_allocation = max_allocation.clone();
        spec.acl_submit = acl_submit;
        spec.acl_admin = acl_admin;
        spec.ordering = ordering;
        spec.default_application_priority = default_application_priority;
        spec.priority = priority;

        if is_leaf {
            if !is_root {
                if let Some(other) = self.leaves.insert(spec.name.clone(), path.to_string()) {
                    return Err(props
                        .err(
                            Rule::DuplicateLeafName,
                            &key(
                                path.rsplit_once('.').map(|(p, _)| p).unwrap_or("root"),
                                "queues",
                            ),
                            format!(
                                "Two leaf queues were named {}. Leaf queue names must be distinct ({other} and {path})",
                                spec.name
                            ),
                        )
                        .queue(path));
                }
            }
            return Ok(spec);
        }

        let ctx = ParentCtx {
            path: path.to_string(),
            state,
            abs_capacity: if is_root { Some(1.0) } else { abs_capacity },
            abs_max: if is_root { Some(1.0) } else { abs_max },
            capacity: if is_root {
                None
            } else {
                Some(capacity.clone())
            },
            max_allocation,
        };
        let mut set_modes = Vec::new();
        for c in &child_names {
            let child_path = format!("{path}.{c}");
            let child = self.queue(&child_path, &ctx, depth + 1, global_am)?;
            if props.get(&key(&child_path, "capacity")).is_some() {
                set_modes.push((child_path.clone(), Mode::of(&child.capacity)));
            }
            spec.children.push(child);
        }
        self.check_children(&spec, &set_modes)?;
        Ok(spec)
    }

    fn i32(&self, path: &str, name: &str) -> Result<Option<i32>> {
        match self.props.int(name).map_err(|e| e.queue(path))? {
            None => Ok(None),
            Some(n) => i32::try_from(n).map(Some).map_err(|_| {
                self.props
                    .err(
                        Rule::LimitRange,
                        name,
                        format!(
                            "expected an integer from {} to {}, got {n}",
                            i32::MIN,
                            i32::MAX
                        ),
                    )
                    .queue(path)
            }),
        }
    }

    fn am_percent(&self, name: &str, default: f64) -> Result<f64> {
        let v = self.props.f64(name)?.unwrap_or(default);
        if !(0.0..=1.0).contains(&v) {
            return Err(self.props.err(
                Rule::LimitRange,
                name,
                format!(
                    "maximum-am-resource-percent is a fraction from 0 to 1 (0.1 = 10%), got {}",
                    num(v)
                ),
            ));
        }
        Ok(v)
    }

    fn capacity(&self, path: &str, name: &str, raw: &str) -> Result<CapacitySpec> {
        let props = self.props;
        if raw.starts_with('[') {
            return self
                .absolute(path, name, raw, false)
                .map(CapacitySpec::Absolute);
        }
        if let Some(w) = raw.strip_suffix(['w', 'W']) {
            let weight = value::parse_f64(w.trim()).ok_or_else(|| {
                props
                    .err(
                        Rule::CapacityRange,
                        name,
                        format!("Illegal weight '{raw}' for queue {path}: expected a number followed by w, such as 2w"),
                    )
                    .queue(path)
            })?;
            if weight < 0.0 {
                return Err(props
                    .err(
                        Rule::CapacityRange,
                        name,
                        format!(
                            "Illegal weight of {} for queue {path}: weights may not be negative",
                            num(weight)
                        ),
                    )
                    .queue(path));
            }
            return Ok(CapacitySpec::Weight(weight));
        }
        let pct = value::parse_f64(raw.trim_end_matches('%').trim()).ok_or_else(|| {
            props
                .err(
                    Rule::CapacityRange,
                    name,
                    format!(
                        "Illegal capacity '{raw}' for queue {path}: expected a percentage (12.5), a weight (2w) or an absolute resource ([memory=10240,vcores=12])"
                    ),
                )
                .queue(path)
        })?;
        if !(0.0..=100.0).contains(&pct) {
            return Err(props
                .err(
                    Rule::CapacityRange,
                    name,
                    format!("Illegal capacity of {} for queue {path}", num(pct / 100.0)),
                )
                .queue(path));
        }
        Ok(CapacitySpec::Percent(pct))
    }

    fn max_capacity(&self, path: &str, name: &str, raw: &str) -> Result<MaxCapacitySpec> {
        let props = self.props;
        if raw.starts_with('[') {
            return self
                .absolute(path, name, raw, true)
                .map(MaxCapacitySpec::Absolute);
        }
        if raw.ends_with(['w', 'W']) {
            return Err(props
                .err(
                    Rule::CapacityRange,
                    name,
                    format!("maximum-capacity of queue {path} has no weight form; give a percentage or an absolute resource, got '{raw}'"),
                )
                .queue(path));
        }
        let pct = value::parse_f64(raw.trim_end_matches('%').trim()).ok_or_else(|| {
            props
                .err(
                    Rule::CapacityRange,
                    name,
                    format!("Illegal maximum-capacity '{raw}' for queue {path}: expected a percentage or an absolute resource"),
                )
                .queue(path)
        })?;
        // YARN's -1: no limit below the parent's maximum.
        if pct == -1.0 {
            return Ok(MaxCapacitySpec::Percent(100.0));
        }
        if !(0.0..=100.0).contains(&pct) {
            return Err(props
                .err(
                    Rule::CapacityRange,
                    name,
                    format!(
                        "Illegal maximum-capacity of {} for queue {path}",
                        num(pct / 100.0)
                    ),
                )
                .queue(path));
        }
        Ok(MaxCapacitySpec::Percent(pct))
    }

    /// `[memory=10240,vcores=12,yarn.io/gpu=8]`. Memory takes YARN's units (`Mi`, the
    /// default, `Gi`, `Ti`). In a maximum, a type left out is unbounded; in a capacity, 0.
    fn absolute(&self, path: &str, name: &str, raw: &str, is_max: bool) -> Result<Resource> {
        let props = self.props;
        let bad = |why: String| {
            props
                .err(
                    Rule::CapacityRange,
                    name,
                    format!("Illegal absolute resource '{raw}' for queue {path}: {why}"),
                )
                .queue(path)
        };
        let inner = raw
            .strip_prefix('[')
            .and_then(|r| r.strip_suffix(']'))
            .ok_or_else(|| bad("expected [name=value,...]".into()))?;
        let mut out = Resource::zero();
        let mut named = BTreeSet::new();
        for part in inner.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| bad(format!("'{part}' is not name=value")))?;
            let k = k.trim();
            let v = v.trim();
            let canonical = match k {
                "memory" | "memory-mb" => "memory-mb",
                "vcores" => "vcores",
                other if self.site.resource_types.iter().any(|t| t == other) => other,
                other => {
                    let mut known = vec!["memory-mb".to_string(), "vcores".to_string()];
                    known.extend(self.site.resource_types.iter().cloned());
                    return Err(props
                        .err(
                            Rule::UnknownResourceType,
                            name,
                            format!(
                                "resource type '{other}' in '{raw}' is not known to the cluster (known: {}; declare others in resource-types.xml)",
                                known.join(", ")
                            ),
                        )
                        .queue(path));
                }
            };
            if !named.insert(canonical) {
                return Err(bad(format!("{canonical} is given twice")));
            }
            if v.ends_with('%') || v.ends_with(['w', 'W']) {
                return Err(bad(format!(
                    "'{part}': per-resource percentages and weights (YARN's universal capacity vector) are not supported; give whole units"
                )));
            }
            let (digits, mult) = if canonical == "memory-mb" {
                if let Some(d) = v.strip_suffix("Ti") {
                    (d, 1024 * 1024)
                } else if let Some(d) = v.strip_suffix("Gi") {
                    (d, 1024)
                } else if let Some(d) = v.strip_suffix("Mi") {
                    (d, 1)
                } else {
                    (v, 1)
                }
            } else {
                (v, 1)
            };
            let n = value::parse_integer(digits.trim())
                .and_then(|n| i64::try_from(n).ok())
                .and_then(|n| n.checked_mul(mult))
                .filter(|n| *n >= 0)
                .ok_or_else(|| bad(format!("'{part}' is not a non-negative whole number")))?;
            out.set(canonical, n);
        }
        if named.is_empty() {
            return Err(bad("no resource given".into()));
        }
        if is_max {
            for t in ["memory-mb", "vcores"]
                .into_iter()
                .chain(self.site.resource_types.iter().map(String::as_str))
            {
                if !named.contains(t) {
                    out.set(t, i64::MAX);
                }
            }
        }
        Ok(out)
    }

    #[allow(clippy::too_many_arguments)]
    fn check_max_vs_capacity(
        &self,
        path: &str,
        cap_key: &str,
        max_key: &str,
        capacity: &CapacitySpec,
        max: &MaxCapacitySpec,
        abs_capacity: Option<f64>,
        abs_max: Option<f64>,
    ) -> Result<()> {
        let props = self.props;
        let name = if props.get(max_key).is_some() {
            max_key
        } else {
            cap_key
        };
        match (capacity, max) {
            (CapacitySpec::Percent(c), MaxCapacitySpec::Percent(m)) => {
                // YARN compares the absolute figures (CSQueueUtils.checkAbsoluteCapacity);
                // when they cannot be known, the configured percentages.
                let (ac, am) = match (abs_capacity, abs_max) {
                    (Some(ac), Some(am)) => (ac, am),
                    _ => (c / 100.0, m / 100.0),
                };
                if am < ac - 1e-6 {
                    return Err(props
                        .err(
                            Rule::MaxCapacityBelowCapacity,
                            name,
                            format!(
                                "Illegal call to setMaxCapacity. Queue '{path}' has an absolute capacity ({}) greater than its absolute maximumCapacity ({})",
                                num(ac),
                                num(am)
                            ),
                        )
                        .queue(path));
                }
            }
            (CapacitySpec::Absolute(c), MaxCapacitySpec::Absolute(m)) if !c.fits_in(m) => {
                return Err(props
                    .err(
                        Rule::MaxCapacityBelowCapacity,
                        name,
                        format!(
                            "Min resource configuration {} is greater than its max value:{} in queue:{path}",
                            res(c),
                            res(m)
                        ),
                    )
                    .queue(path));
            }
            _ => {}
        }
        Ok(())
    }

    fn max_allocation(&self, path: &str, parent: &ParentCtx) -> Result<Option<Resource>> {
        let props = self.props;
        let mb_key = key(path, "maximum-allocation-mb");
        let vc_key = key(path, "maximum-allocation-vcores");
        let mb = props.int(&mb_key).map_err(|e| e.queue(path))?;
        let vc = props.int(&vc_key).map_err(|e| e.queue(path))?;
        for (k, v) in [(&mb_key, mb), (&vc_key, vc)] {
            if let Some(v) = v {
                if v <= 0 {
                    return Err(props
                        .err(
                            Rule::MaximumAllocation,
                            k,
                            format!("queue maximum allocation must be positive, got {v}"),
                        )
                        .queue(path));
                }
            }
        }
        if mb.is_none() && vc.is_none() {
            return Ok(parent.max_allocation.clone());
        }
        let cluster = &self.site.max_allocation;
        let base = parent
            .max_allocation
            .clone()
            .unwrap_or_else(|| cluster.clone());
        let mut own = base.clone();
        if let Some(mb) = mb {
            own.memory_mb = mb;
        }
        if let Some(vc) = vc {
            own.vcores = vc;
        }
        let name = if mb.is_some() { &mb_key } else { &vc_key };
        if own.memory_mb > cluster.memory_mb || own.vcores > cluster.vcores {
            return Err(props
                .err(
                    Rule::MaximumAllocation,
                    name,
                    format!(
                        "Queue maximum allocation cannot be larger than the cluster setting for queue {path} max allocation per queue: {} cluster setting: {}",
                        mem_vcores(&own),
                        mem_vcores(cluster)
                    ),
                )
                .queue(path));
        }
        if let Some(pm) = &parent.max_allocation {
            if own.memory_mb > pm.memory_mb || own.vcores > pm.vcores {
                return Err(props
                    .err(
                        Rule::MaximumAllocation,
                        name,
                        format!(
                            "Queue maximum allocation cannot be larger than the parent queue's for queue {path} max allocation per queue: {} parent {}: {}",
                            mem_vcores(&own),
                            parent.path,
                            mem_vcores(pm)
                        ),
                    )
                    .queue(path));
            }
        }
        Ok(Some(own))
    }

    fn acl(&self, path: &str, suffix: &str) -> Result<Option<Acl>> {
        let name = key(path, suffix);
        match self.props.get(&name) {
            None => Ok(None),
            Some(raw) => parse_acl(raw)
                .map(Some)
                .map_err(|m| self.props.err(Rule::InvalidAcl, &name, m).queue(path)),
        }
    }

    fn ordering(&self, path: &str, name: &str, raw: &str, is_leaf: bool) -> Result<OrderingPolicy> {
        let props = self.props;
        let leaf_policy = match raw {
            "fifo"
            | "org.apache.hadoop.yarn.server.resourcemanager.scheduler.policy.FifoOrderingPolicy" => {
                Some(OrderingPolicy::Fifo)
            }
            "fair"
            | "org.apache.hadoop.yarn.server.resourcemanager.scheduler.policy.FairOrderingPolicy" => {
                Some(OrderingPolicy::Fair)
            }
            _ => None,
        };
        let parent_policy = matches!(raw, "utilization" | "priority-utilization");
        match (leaf_policy, parent_policy, is_leaf) {
            (Some(p), _, true) => Ok(p),
            // A parent orders its children by how under-served they are, then by priority
            // (YARN's priority-utilization); both of YARN's parent policies are accepted.
            (None, true, false) => Ok(OrderingPolicy::Fifo),
            (Some(_), _, false) => Err(props
                .err(
                    Rule::InvalidOrderingPolicy,
                    name,
                    format!("ordering-policy '{raw}' is for leaf queues; parent queue {path} takes utilization or priority-utilization"),
                )
                .queue(path)),
            (None, true, true) => Err(props
                .err(
                    Rule::InvalidOrderingPolicy,
                    name,
                    format!("ordering-policy '{raw}' is for parent queues; leaf queue {path} takes fifo or fair"),
                )
                .queue(path)),
            (None, false, _) => Err(props
                .err(
                    Rule::InvalidOrderingPolicy,
                    name,
                    format!("unknown ordering-policy '{raw}' for queue {path}: Spindle supports fifo and fair for leaf queues, utilization and priority-utilization for parents"),
                )
                .queue(path)),
        }
    }

    /// Sibling rules: no mixing of capacity forms; percent children sum to 100 (or to 0
    /// where YARN allows it); absolute children fit in an absolute parent.
    fn check_children(&self, parent: &QueueSpec, set_modes: &[(String, Mode)]) -> Result<()> {
        let props = self.props;
        let path = &parent.path;
        let children_key = key(path, "queues");
        let modes: BTreeSet<Mode> = set_modes.iter().map(|(_, m)| *m).collect();
        if modes.len() > 1 {
            let details: Vec<String> = set_modes
                .iter()
                .map(|(q, m)| format!("{{Queue={q}, label= uses {} mode}}", m.word()))
                .collect();
            return Err(props
                .err(
                    Rule::MixedChildrenCapacityTypes,
                    &children_key,
                    format!(
                        "Parent queue '{path}' have children queue used mixed of weight mode, percentage and absolute mode, it is not allowed, please double check, details:{}",
                        details.join(". ")
                    ),
                )
                .queue(path));
        }
        let mode = modes.into_iter().next().unwrap_or(Mode::Percent);
        match mode {
            Mode::Percent => {
                let sum: f64 = parent
                    .children
                    .iter()
                    .map(|c| match c.capacity {
                        CapacitySpec::Percent(p) => p,
                        _ => 0.0,
                    })
                    .sum();
                let fraction = sum / 100.0;
                let listing = || {
                    parent
                        .children
                        .iter()
                        .map(|c| match c.capacity {
                            CapacitySpec::Percent(p) => format!("{}={}", c.path, num(p)),
                            _ => format!("{}=?", c.path),
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                if (1.0 - fraction).abs() > PRECISION {
                    if fraction.abs() > PRECISION {
                        return Err(props
                            .err(
                                Rule::CapacitySum,
                                &children_key,
                                format!(
                                    "Illegal capacity sum of {} for children of queue {path} for label=. It should be either 0 or 1.0 [{}]",
                                    num(fraction),
                                    listing()
                                ),
                            )
                            .queue(path));
                    }
                    let parent_pct = match parent.capacity {
                        CapacitySpec::Percent(p) => Some(p),
                        _ => None,
                    };
                    let allow_zero = props
                        .bool(&key(path, "allow-zero-capacity-sum"), false)
                        .map_err(|e| e.queue(path))?;
                    if parent_pct.is_some_and(|p| p.abs() > PRECISION) && !allow_zero {
                        return Err(props
                            .err(
                                Rule::CapacitySum,
                                &children_key,
                                format!(
                                    "Illegal capacity sum of {} for children of queue {path} for label=. It is set to 0, but parent percent != 0, and doesn't allow children capacity to set to 0 [{}]",
                                    num(fraction),
                                    listing()
                                ),
                            )
                            .queue(path));
                    }
                }
            }
            Mode::Absolute => {
                let mut sum = Resource::zero();
                for c in &parent.children {
                    if let CapacitySpec::Absolute(r) = &c.capacity {
                        sum.add_assign(r);
                    }
                }
                if let CapacitySpec::Absolute(pr) = &parent.capacity {
                    if !sum.fits_in(pr) {
                        return Err(props
                            .err(
                                Rule::AbsoluteExceedsParent,
                                &children_key,
                                format!(
                                    "Parent Queues capacity: {} is less than to its children:{} for queue:{path}",
                                    res(pr),
                                    res(&sum)
                                ),
                            )
                            .queue(path));
                    }
                }
                if let MaxCapacitySpec::Absolute(pm) = &parent.max_capacity {
                    for c in &parent.children {
                        if let MaxCapacitySpec::Absolute(cm) = &c.max_capacity {
                            if !cm.fits_in(pm) {
                                return Err(props
                                    .err(
                                        Rule::AbsoluteExceedsParent,
                                        &key(&c.path, "maximum-capacity"),
                                        format!(
                                            "Max resource configuration {} is greater than parents max value:{} in queue:{}",
                                            res(cm),
                                            res(pm),
                                            c.path
                                        ),
                                    )
                                    .queue(&c.path));
                            }
                        }
                    }
                }
            }
            Mode::Weight => {}
        }
        Ok(())
    }

    /// `queue-mappings`: `u:<user>:<queue>` / `g:<group>:<queue>`, first match wins.
    fn mappings(&self, root: &QueueSpec) -> Result<Vec<QueueMapping>> {
        let props = self.props;
        let name = format!("{PREFIX}queue-mappings");
        let Some(raw) = props.get(&name) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for entry in value::split_list(raw) {
            let bad = |why: String| {
                props.err(
                    Rule::InvalidQueueMapping,
                    &name,
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

/// Why a queue name is refused, if it is: YARN splits paths on `.`, and mappings and ACLs
/// on `:`, `,` and spaces.
pub fn check_queue_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() {
        return Err("empty name".into());
    }
    if name.len() > MAX_QUEUE_NAME {
        return Err(format!("longer than {MAX_QUEUE_NAME} bytes"));
    }
    if let Some(c) = name.chars().find(|c| {
        c.is_whitespace() || c.is_control() || matches!(c, '.' | ':' | '/' | ',' | '%' | '*')
    }) {
        return Err(format!("may not contain {:?}", c));
    }
    Ok(())
}

/// A Hadoop ACL: `"user1,user2 group1,group2"`; `*` for everyone; a lone space (or nothing)
/// for no one. Trailing whitespace, and leading whitespace that holds a newline or a tab (XML
/// formatting), are ignored; leading *spaces* alone are kept, because `" admins"` means
/// "only the group admins".
pub fn parse_acl(raw: &str) -> std::result::Result<Acl, String> {
    let text = raw.trim_end();
    let lead = &text[..text.len() - text.trim_start().len()];
    let text = if lead.contains(['\n', '\r', '\t']) {
        text.trim_start()
    } else {
        text
    };
    let (users, groups) = text.split_once(' ').unwrap_or((text, ""));
    if users.trim() == "*" || groups.trim() == "*" {
        return Ok(Acl::everyone());
    }
    let mut acl = Acl::nobody();
    for (part, set, what) in [
        (users, &mut acl.users, "user"),
        (groups, &mut acl.groups, "group"),
    ] {
        for n in part.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if n.contains(char::is_whitespace) {
                return Err(format!(
                    "ACL '{text}' has more than two space-separated parts; the form is \"user1,user2 group1,group2\""
                ));
            }
            if n.contains('*') || n.chars().any(char::is_control) {
                return Err(format!(
                    "ACL '{text}': {what} name '{n}' is invalid ('*' must stand alone, meaning everyone)"
                ));
            }
            set.insert(n.to_string());
        }
    }
    Ok(acl)
}

/// Hadoop's string form of an ACL, as `queueAcls` shows it.
pub fn acl_string(acl: &Acl) -> String {
    if acl.all {
        return "*".into();
    }
    let users: Vec<&str> = acl.users.iter().map(String::as_str).collect();
    let groups: Vec<&str> = acl.groups.iter().map(String::as_str).collect();
    if groups.is_empty() {
        if users.is_empty() {
            " ".into()
        } else {
            users.join(",")
        }
    } else {
        format!("{} {}", users.join(","), groups.join(","))
    }
}

/// A number as YARN's messages print it: no trailing zeros.
fn num(v: f64) -> String {
    let s = format!("{:.4}", v);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

fn res(r: &Resource) -> String {
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

fn mem_vcores(r: &Resource) -> String {
    format!("<memory:{}, vCores:{}>", r.memory_mb, r.vcores)
}

// ----------------------------------------------------------------- transitions

/// A queue's state, STOPPED if it or any ancestor is (YARN's effective state).
fn effective_states(root: &QueueSpec) -> BTreeMap<String, (QueueState, bool)> {
    fn walk(q: &QueueSpec, parent_stopped: bool, out: &mut BTreeMap<String, (QueueState, bool)>) {
        let stopped = parent_stopped || q.state == QueueState::Stopped;
        let state = if stopped {
            QueueState::Stopped
        } else {
            QueueState::Running
        };
        out.insert(q.path.clone(), (state, q.is_leaf()));
        for c in &q.children {
            walk(c, stopped, out);
        }
    }
    let mut out = BTreeMap::new();
    walk(root, false, &mut out);
    out
}

/// YARN's rules for replacing the running tree `old` by `new` (`validateQueueHierarchy`):
/// a queue that disappears must have been STOPPED; a queue may not reappear under another
/// parent; a leaf may become a parent only if it was (or is now configured) STOPPED.
/// Applications are not looked at: the core refuses to drop or convert a queue that still
/// has them.
pub fn validate_transition(old: &SchedulerConf, new: &SchedulerConf) -> Result<()> {
    let old_states = effective_states(&old.root);
    let new_states = effective_states(&new.root);
    let new_by_name: BTreeMap<&str, &str> = new
        .root
        .walk()
        .into_iter()
        .map(|q| (q.name.as_str(), q.path.as_str()))
        .collect();
    for q in old.root.walk() {
        let parent_queues = |p: &str| {
            key(
                p.rsplit_once('.')
                    .map(|(parent, _)| parent)
                    .unwrap_or("root"),
                "queues",
            )
        };
        match new_states.get(&q.path) {
            None => {
                if let Some(moved_to) = new_by_name.get(q.name.as_str()) {
                    return Err(CapacityConfError::new(
                        Rule::QueueMoved,
                        format!(
                            "{} is moved from:{} to:{} after refresh, which is not allowed.",
                            q.name, q.path, moved_to
                        ),
                    )
                    .queue(&q.path)
                    .property(&parent_queues(moved_to)));
                }
                let (state, _) = old_states
                    .get(&q.path)
                    .copied()
                    .unwrap_or((q.state, q.is_leaf()));
                if state != QueueState::Stopped {
                    return Err(CapacityConfError::new(
                        Rule::QueueRemovalNotStopped,
                        format!(
                            "{} cannot be deleted from the capacity scheduler configuration, as the queue is not yet in stopped state. Current State : {}",
                            q.path,
                            state.as_str()
                        ),
                    )
                    .queue(&q.path)
                    .property(&parent_queues(&q.path)));
                }
            }
            Some((new_state, new_is_leaf)) => {
                let (old_state, _) = old_states
                    .get(&q.path)
                    .copied()
                    .unwrap_or((q.state, q.is_leaf()));
                if q.is_leaf()
                    && !new_is_leaf
                    && old_state != QueueState::Stopped
                    && *new_state != QueueState::Stopped
                {
                    return Err(CapacityConfError::new(
                        Rule::LeafToParentConversion,
                        format!(
                            "Can not convert the leaf queue: {} to parent queue since it is not yet in stopped state. Current State : {}",
                            q.path,
                            old_state.as_str()
                        ),
                    )
                    .queue(&q.path)
                    .property(&key(&q.path, "queues")));
                }
            }
        }
    }
    Ok(())
}

// ----------------------------------------------------------------- mutations

/// One queue's parameters in a mutation: keys relative to the queue's prefix
/// (`capacity`, `state`, ...); an empty value unsets the key, as in YARN.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueueParams {
    pub queue: String,
    pub params: Vec<(String, String)>,
}

/// YARN's `sched-conf` body as a domain value (converted from the wire at the REST edge).
/// Applied in YARN's order: removals, additions, updates, then global updates.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SchedConfMutation {
    pub remove_queues: Vec<String>,
    pub add_queues: Vec<QueueParams>,
    pub update_queues: Vec<QueueParams>,
    /// Full property names.
    pub global: Vec<(String, String)>,
}

impl SchedConfMutation {
    pub fn is_empty(&self) -> bool {
        self.remove_queues.is_empty()
            && self.add_queues.is_empty()
            && self.update_queues.is_empty()
            && self.global.is_empty()
    }
}

fn mutation_err(queue: Option<&str>, message: String) -> CapacityConfError {
    let e = CapacityConfError::new(Rule::InvalidMutation, message);
    match queue {
        Some(q) => e.queue(q),
        None => e,
    }
}

fn full_path(q: &str, what: &str) -> Result<String> {
    let q = q.trim();
    if q == "root" || !q.starts_with("root.") {
        return Err(mutation_err(
            Some(q),
            format!("Can't {what} queue {q}: give a full path below root, such as root.a.b"),
        ));
    }
    for part in q.split('.').skip(1) {
        check_queue_name(part).map_err(|why| {
            mutation_err(
                Some(q),
                format!("Can't {what} invalid queue {q}: '{part}' {why}"),
            )
        })?;
    }
    Ok(q.to_string())
}

fn set_or_unset(props: &mut CsProps, name: &str, value: &str) {
    if value.is_empty() {
        props.remove(name);
    } else {
        props.set(name, value);
    }
}

fn check_param_key(queue: &str, k: &str) -> Result<()> {
    if k.trim().is_empty() || k.contains(char::is_whitespace) || k.starts_with('.') {
        return Err(mutation_err(
            Some(queue),
            format!("invalid parameter name '{k}' for queue {queue}: give the key relative to the queue, such as capacity"),
        ));
    }
    Ok(())
}

/// Applies a mutation to the live set, as YARN's `ConfigurationUpdateAssembler` does, and
/// returns the proposed set (to be parsed and validated as a whole by the caller). Refuses
/// what cannot even be applied: removing an unknown queue, adding an existing one or one
/// without a parent, updating an unknown one, a global key outside the capacity
/// scheduler's prefix.
pub fn apply_mutation(props: &CsProps, m: &SchedConfMutation) -> Result<CsProps> {
    let mut out = props.clone();
    for q in &m.remove_queues {
        let q = full_path(q, "remove")?;
        let (parent, leaf) = q.rsplit_once('.').unwrap_or(("root", q.as_str()));
        let parent_key = key(parent, "queues");
        let mut siblings = out
            .get(&parent_key)
            .map(value::split_list)
            .unwrap_or_default();
        let Some(pos) = siblings.iter().position(|s| s == leaf) else {
            return Err(mutation_err(Some(&q), format!("Queue {q} not found")));
        };
        siblings.remove(pos);
        if siblings.is_empty() {
            out.remove(&parent_key);
            // A parent without children is a leaf again; its parent-only policy goes.
            out.remove(&key(parent, "ordering-policy"));
        } else {
            out.set(&parent_key, &siblings.join(","));
        }
        let prefix = format!("{PREFIX}{q}.");
        let doomed: Vec<String> = out
            .pairs()
            .filter(|(k, _)| k.starts_with(&prefix))
            .map(|(k, _)| k.to_string())
            .collect();
        for k in doomed {
            out.remove(&k);
        }
    }
    for add in &m.add_queues {
        let q = full_path(&add.queue, "add")?;
        let (parent, leaf) = q.rsplit_once('.').unwrap_or(("root", q.as_str()));
        let existing = out.queue_paths();
        if existing.iter().any(|p| p == &q) {
            return Err(mutation_err(
                Some(&q),
                format!("Can't add existing queue {q}"),
            ));
        }
        if !existing.iter().any(|p| p == parent) {
            return Err(mutation_err(
                Some(&q),
                format!("Can't add queue {q}: its parent queue {parent} does not exist"),
            ));
        }
        let parent_key = key(parent, "queues");
        let mut siblings = out
            .get(&parent_key)
            .map(value::split_list)
            .unwrap_or_default();
        siblings.push(leaf.to_string());
        out.set(&parent_key, &siblings.join(","));
        for (k, v) in &add.params {
            check_param_key(&q, k)?;
            set_or_unset(&mut out, &key(&q, k.trim()), v);
        }
    }
    for upd in &m.update_queues {
        let q = upd.queue.trim().to_string();
        if q != "root" {
            full_path(&q, "update")?;
        }
        if !out.queue_paths().iter().any(|p| p == &q) {
            return Err(mutation_err(
                Some(&q),
                format!("Can't update queue {q}: it does not exist (add it with add-queue)"),
            ));
        }
        for (k, v) in &upd.params {
            check_param_key(&q, k)?;
            set_or_unset(&mut out, &key(&q, k.trim()), v);
        }
    }
    for (k, v) in &m.global {
        let k = k.trim();
        if !k.starts_with(PREFIX) || k.len() == PREFIX.len() {
            return Err(mutation_err(
                None,
                format!(
                    "global-updates key '{k}' is not a capacity-scheduler property ({PREFIX}*); other settings belong in yarn-site.xml"
                ),
            )
            .property(k));
        }
        set_or_unset(&mut out, k, v);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
