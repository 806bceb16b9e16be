//! One queue of the capacity-scheduler tree: reading and checking its own properties
//! (children list, state, user limits, application limits, AM share, maximum allocation,
//! ACLs, ordering policy, priorities), then walking into its children.
//!
//! Owns the per-queue rules, each with its own [`Rule`]. It must not decide how capacities
//! are written or how siblings' capacities add up (that is `capacities`), nor read global
//! settings (that is `parse`); it reads properties only through [`CsProps`].

use std::collections::{BTreeMap, BTreeSet};

use spindle_common::config::{keys, value};
use spindle_common::{QueuePath, Resource};

use crate::core::queue_conf::{
    AccessibleLabels, Acl, CapacitySpec, ElasticPolicy, LabelCapacity, LasSpec, LifetimeLimits,
    MaxCapacitySpec, OrderingPolicy, QueueSpec, QueueState,
};

use super::capacities::Mode;
use super::error::{mem_vcores, Result};
use super::parse::{ParentCtx, Parser};
use super::props::key;
use super::{check_queue_name, parse_acl, Rule, MAX_DEPTH};

#[cfg(doc)]
use super::CsProps;

/// A queue's capacities as written, and as fractions of the cluster when they can be known
/// without its size (percent all the way up).
struct QueueCaps {
    capacity: CapacitySpec,
    max_capacity: MaxCapacitySpec,
    abs_capacity: Option<f64>,
    abs_max: Option<f64>,
}

impl Parser<'_> {
    pub(super) fn queue(
        &mut self,
        path: &str,
        parent: &ParentCtx,
        depth: usize,
        global_am: f64,
    ) -> Result<QueueSpec> {
        let child_names = self.child_names(path, depth)?;
        let is_root = path == "root";
        let is_leaf = child_names.is_empty();
        let caps = self.capacities_of(path, parent)?;
        let state = self.state(path, parent)?;
        // Cannot fail: every part of the path passed `check_queue_name`.
        let typed = QueuePath::parse(path).map_err(|e| {
            super::CapacityConfError::new(Rule::InvalidQueueName, e.to_string()).queue(path)
        })?;
        let mut spec = QueueSpec::new(typed, caps.capacity.clone());
        spec.max_capacity = caps.max_capacity;
        spec.state = state;
        self.limits(path, parent, global_am, &mut spec)?;
        self.policies(path, parent, is_leaf, &mut spec)?;
        self.node_labels(path, &mut spec)?;
        if is_leaf {
            if !is_root {
                self.register_leaf(path, &spec)?;
            }
            return Ok(spec);
        }
        let ctx = ParentCtx {
            path: path.to_string(),
            state,
            abs_capacity: if is_root {
                Some(1.0)
            } else {
                caps.abs_capacity
            },
            abs_max: if is_root { Some(1.0) } else { caps.abs_max },
            capacity: if is_root {
                None
            } else {
                Some(spec.capacity.clone())
            },
            max_allocation: spec.max_allocation.clone(),
            disable_preemption: spec.disable_preemption,
            intra_queue_disable_preemption: spec.intra_queue_disable_preemption,
            elastic: spec.elastic,
            gpu_idle: spec.gpu_idle,
            lifetime: spec.lifetime,
        };
        let mut set_modes = Vec::new();
        for c in &child_names {
            let child_path = format!("{path}.{c}");
            let child = self.queue(&child_path, &ctx, depth + 1, global_am)?;
            if self
                .props
                .get(&key(&child_path, keys::CS_QUEUE_CAPACITY))
                .is_some()
            {
                set_modes.push((child_path.clone(), Mode::of(&child.capacity)));
            }
            spec.children.push(child);
        }
        self.check_children(&spec, &set_modes)?;
        self.check_label_children(&spec)?;
        Ok(spec)
    }

    /// `<qp>.queues`: the children's names, each legal and listed once.
    fn child_names(&self, path: &str, depth: usize) -> Result<Vec<String>> {
        let props = self.props;
        let children_key = key(path, keys::CS_QUEUE_QUEUES);
        if depth > MAX_DEPTH {
            return Err(props
                .err(
                    Rule::TreeTooDeep,
                    &children_key,
                    format!("queue tree deeper than {MAX_DEPTH} levels"),
                )
                .queue(path));
        }
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

        Ok(child_names)
    }

    /// `<qp>.capacity` and `.maximum-capacity`, checked against each other and against the
    /// parent's way of writing capacities.
    fn capacities_of(&self, path: &str, parent: &ParentCtx) -> Result<QueueCaps> {
        let props = self.props;
        let is_root = path == "root";
        let cap_key = key(path, keys::CS_QUEUE_CAPACITY);
        let cap_set = !is_root && props.get(&cap_key).is_some();
        let capacity = if is_root {
            CapacitySpec::Percent(100.0)
        } else {
            match props.trimmed(&cap_key) {
                None => CapacitySpec::Percent(0.0),
                Some(raw) => self.capacity(path, &cap_key, raw)?,
            }
        };
        let max_key = key(path, keys::CS_QUEUE_MAXIMUM_CAPACITY);
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

        Ok(QueueCaps {
            capacity,
            max_capacity,
            abs_capacity,
            abs_max,
        })
    }

    /// `<qp>.state`: unset inherits; a RUNNING child of a STOPPED parent is refused.
    fn state(&self, path: &str, parent: &ParentCtx) -> Result<QueueState> {
        let props = self.props;
        let state_key = key(path, keys::CS_QUEUE_STATE);
        Ok(match props.trimmed(&state_key) {
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
        })
    }

    /// User limits, application limits, the AM share and the maximum allocation.
    fn limits(
        &self,
        path: &str,
        parent: &ParentCtx,
        global_am: f64,
        spec: &mut QueueSpec,
    ) -> Result<()> {
        let props = self.props;
        let ulf_key = key(path, keys::CS_QUEUE_USER_LIMIT_FACTOR);
        let user_limit_factor = props
            .f64(&ulf_key)?
            .unwrap_or(keys::DEFAULT_CS_QUEUE_USER_LIMIT_FACTOR);
        if !(user_limit_factor > 0.0 || user_limit_factor == -1.0) {
            return Err(props
                .err(
                    Rule::LimitRange,
                    &ulf_key,
                    format!(
                        "user-limit-factor must be positive, or -1 for no limit, got {}",
                        props.written(&ulf_key)
                    ),
                )
                .queue(path));
        }
        let mulp_key = key(path, keys::CS_QUEUE_MINIMUM_USER_LIMIT_PERCENT);
        let minimum_user_limit_percent = props
            .f64(&mulp_key)?
            .unwrap_or(keys::DEFAULT_CS_QUEUE_MINIMUM_USER_LIMIT_PERCENT);
        if !(minimum_user_limit_percent > 0.0 && minimum_user_limit_percent <= 100.0) {
            return Err(props
                .err(
                    Rule::LimitRange,
                    &mulp_key,
                    format!(
                        "minimum-user-limit-percent must be above 0 and at most 100, got {}",
                        props.written(&mulp_key)
                    ),
                )
                .queue(path));
        }
        let ma_key = key(path, keys::CS_QUEUE_MAXIMUM_APPLICATIONS);
        // YARN: a negative (or unset) per-queue value derives it from the global one.
        let max_applications = match props.int(&ma_key)? {
            None => None,
            Some(n) if n < 0 => None,
            Some(n) => Some(u32::try_from(n).map_err(|_| {
                props
                    .err(
                        Rule::LimitRange,
                        &ma_key,
                        format!(
                            "maximum-applications must be at most {}, got {}",
                            u32::MAX,
                            props.written(&ma_key)
                        ),
                    )
                    .queue(path)
            })?),
        };
        let max_parallel_apps = props
            .count(&key(path, keys::CS_QUEUE_MAX_PARALLEL_APPS))
            .map_err(|e| e.queue(path))?;
        let max_am_resource_percent = self
            .am_percent(
                &key(path, keys::CS_QUEUE_MAXIMUM_AM_RESOURCE_PERCENT),
                global_am,
            )
            .map_err(|e| e.queue(path))?;
        let max_allocation = self.max_allocation(path, parent)?;

        spec.user_limit_factor = user_limit_factor;
        spec.minimum_user_limit_percent = minimum_user_limit_percent;
        spec.max_applications = max_applications;
        spec.max_parallel_apps = max_parallel_apps;
        spec.max_am_resource_percent = max_am_resource_percent;
        spec.max_allocation = max_allocation;
        Ok(())
    }

    /// ACLs, ordering, backfill, gang reservations, preemption, LAS, elasticity, idle GPUs
    /// and priorities.
    fn policies(
        &self,
        path: &str,
        parent: &ParentCtx,
        is_leaf: bool,
        spec: &mut QueueSpec,
    ) -> Result<()> {
        let props = self.props;
        // ACLs: unset inherits (YARN ORs up the tree; root defaults to everyone).
        let acl_submit = self.acl(path, keys::CS_QUEUE_ACL_SUBMIT_APPLICATIONS)?;
        let acl_admin = self.acl(path, keys::CS_QUEUE_ACL_ADMINISTER_QUEUE)?;

        // Ordering.
        let op_key = key(path, keys::CS_QUEUE_ORDERING_POLICY);
        let ordering = match props.trimmed(&op_key) {
            None => OrderingPolicy::Fifo,
            Some(raw) => self.ordering(path, &op_key, raw, is_leaf)?,
        };
        let backfill = props.bool(
            &key(path, keys::CS_QUEUE_BACKFILL),
            keys::DEFAULT_CS_QUEUE_BACKFILL,
        )?;
        let gmr_key = key(path, keys::CS_QUEUE_GANG_MAX_RESERVATIONS);
        let gang_max_reservations = props
            .count(&gmr_key)?
            .unwrap_or(keys::DEFAULT_CS_QUEUE_GANG_MAX_RESERVATIONS);
        if gang_max_reservations == 0 {
            return Err(props.err(
                Rule::LimitRange,
                &gmr_key,
                "must be at least 1 (a gang that may never hold nodes can wait forever)",
            ));
        }
        let disable_preemption = props.bool(
            &key(path, keys::CS_QUEUE_DISABLE_PREEMPTION),
            parent.disable_preemption,
        )?;
        let intra_queue_disable_preemption = props.bool(
            &key(path, keys::CS_QUEUE_INTRA_QUEUE_DISABLE_PREEMPTION),
            parent.intra_queue_disable_preemption,
        )?;
        let las = self.las(path)?;
        let fairshare = super::fairshare::spec(props, path)?;
        let ep_key = key(path, keys::CS_QUEUE_ELASTIC_POLICY);
        let elastic = match props.trimmed(&ep_key) {
            None => parent.elastic,
            Some("none") => ElasticPolicy::None,
            Some("doubling") => ElasticPolicy::Doubling,
            Some("doubling-by-gain") => ElasticPolicy::DoublingByGain,
            Some("doubling-adaptive") => ElasticPolicy::DoublingAdaptive,
            Some(raw) => {
                return Err(props
                    .err(
                        Rule::InvalidElasticPolicy,
                        &ep_key,
                        format!(
                            "elastic-policy '{raw}' is not one of none, doubling, doubling-by-gain, doubling-adaptive"
                        ),
                    )
                    .queue(path))
            }
        };
        let gpu_idle = super::gpu_idle::policy(props, path, parent.gpu_idle)?;
        let dap_key = key(path, keys::CS_QUEUE_DEFAULT_APPLICATION_PRIORITY);
        let default_application_priority = self
            .i32(path, &dap_key)?
            .unwrap_or(keys::DEFAULT_CS_QUEUE_DEFAULT_APPLICATION_PRIORITY);
        let priority = self
            .i32(path, &key(path, keys::CS_QUEUE_PRIORITY))?
            .unwrap_or(keys::DEFAULT_CS_QUEUE_PRIORITY);
        let lifetime = self.lifetime(path, parent.lifetime)?;

        spec.acl_submit = acl_submit;
        spec.acl_admin = acl_admin;
        spec.ordering = ordering;
        spec.backfill = backfill;
        spec.gang_max_reservations = gang_max_reservations;
        spec.disable_preemption = disable_preemption;
        spec.intra_queue_disable_preemption = intra_queue_disable_preemption;
        spec.las = las;
        spec.fairshare = fairshare;
        spec.elastic = elastic;
        spec.gpu_idle = gpu_idle;
        spec.default_application_priority = default_application_priority;
        spec.lifetime = lifetime;
        spec.priority = priority;
        Ok(())
    }

    /// Leaf names are distinct across the tree.
    fn register_leaf(&mut self, path: &str, spec: &QueueSpec) -> Result<()> {
        let props = self.props;
        if let Some(other) = self.leaves.insert(spec.name.clone(), path.to_string()) {
            return Err(props
                        .err(
                            Rule::DuplicateLeafName,
                            &key(
                                path.rsplit_once('.').map(|(p, _)| p).unwrap_or("root"),
                                keys::CS_QUEUE_QUEUES,
                            ),
                            format!(
                                "Two leaf queues were named {}. Leaf queue names must be distinct ({other} and {path})",
                                spec.name
                            ),
                        )
                        .queue(path));
        }
        Ok(())
    }

    /// `<qp>.accessible-node-labels` (`*`, a comma list, or blank for none; unset
    /// inherits), `<qp>.accessible-node-labels.<label>.capacity` and `.maximum-capacity`
    /// (percent, 0 and 100 by default), `<qp>.default-node-label-expression`.
    fn node_labels(&self, path: &str, spec: &mut QueueSpec) -> Result<()> {
        let props = self.props;
        let acc_key = key(path, keys::CS_QUEUE_ACCESSIBLE_NODE_LABELS);
        spec.accessible_labels = props.get(&acc_key).map(|raw| {
            let raw = raw.trim();
            if raw == "*" {
                AccessibleLabels::Any
            } else {
                AccessibleLabels::Only(
                    raw.split(',')
                        .map(str::trim)
                        .filter(|l| !l.is_empty())
                        .map(str::to_string)
                        .collect(),
                )
            }
        });
        let prefix = format!("{acc_key}.");
        let mut caps: BTreeMap<String, LabelCapacity> = BTreeMap::new();
        for (name, _) in props.pairs().filter(|(k, _)| k.starts_with(&prefix)) {
            let rest = &name[prefix.len()..];
            let Some((label, what)) = rest.rsplit_once('.') else {
                continue;
            };
            if what != "capacity" && what != "maximum-capacity" {
                continue;
            }
            let v = props.f64(name)?.unwrap_or_default();
            if !(0.0..=100.0).contains(&v) {
                return Err(props
                    .err(
                        Rule::InvalidNodeLabels,
                        name,
                        format!(
                            "{what} for label {label} must be between 0 and 100, got {}",
                            props.written(name)
                        ),
                    )
                    .queue(path));
            }
            let e = caps.entry(label.to_string()).or_insert(LabelCapacity {
                capacity: 0.0,
                max_capacity: 100.0,
            });
            if what == "capacity" {
                e.capacity = v;
            } else {
                e.max_capacity = v;
            }
        }
        for (label, c) in &caps {
            if c.max_capacity < c.capacity {
                return Err(props
                    .err(
                        Rule::InvalidNodeLabels,
                        &format!("{prefix}{label}.maximum-capacity"),
                        format!(
                            "maximum-capacity {} for label {label} is below its capacity {}",
                            c.max_capacity, c.capacity
                        ),
                    )
                    .queue(path));
            }
            if let Some(AccessibleLabels::Only(l)) = &spec.accessible_labels {
                if c.capacity > 0.0 && !l.contains(label) {
                    return Err(props
                        .err(
                            Rule::InvalidNodeLabels,
                            &format!("{prefix}{label}.capacity"),
                            format!("queue {path} has capacity for label {label}, which its accessible-node-labels do not list"),
                        )
                        .queue(path));
                }
            }
        }
        spec.label_capacities = caps;
        let dkey = key(path, keys::CS_QUEUE_DEFAULT_NODE_LABEL_EXPRESSION);
        spec.default_label_expression = props
            .trimmed(&dkey)
            .filter(|l| !l.is_empty())
            .map(str::to_string);
        if let (Some(l), Some(a)) = (&spec.default_label_expression, &spec.accessible_labels) {
            if !a.allows(l) {
                return Err(props
                    .err(
                        Rule::InvalidNodeLabels,
                        &dkey,
                        format!("default-node-label-expression {l} is not among queue {path}'s accessible-node-labels"),
                    )
                    .queue(path));
            }
        }
        Ok(())
    }

    /// Per label, the children's capacities sum to 100 (or to 0: none of them uses it), as
    /// YARN's "Illegal capacity sum ... for label".
    fn check_label_children(&self, spec: &QueueSpec) -> Result<()> {
        let labels: BTreeSet<&String> = spec
            .children
            .iter()
            .flat_map(|c| c.label_capacities.keys())
            .collect();
        for label in labels {
            let sum: f64 = spec
                .children
                .iter()
                .filter_map(|c| c.label_capacities.get(label))
                .map(|c| c.capacity)
                .sum();
            if sum.abs() > 1e-6 && (sum - 100.0).abs() > 1e-6 {
                return Err(super::CapacityConfError::new(
                    Rule::InvalidNodeLabels,
                    format!(
                        "Illegal capacity sum of {} for children of queue {} for label={label}. It should be either 0 or 1.0",
                        sum / 100.0,
                        spec.path
                    ),
                )
                .queue(&spec.path.to_string()));
            }
        }
        Ok(())
    }

    /// `default-application-lifetime` and `maximum-application-lifetime`: seconds, each
    /// inherited when unset, a value of zero or below meaning none; the default may not
    /// exceed the maximum (YARN refuses that too).
    fn lifetime(&self, path: &str, inherited: LifetimeLimits) -> Result<LifetimeLimits> {
        let one = |name: &str, from: Option<u64>| -> Result<Option<u64>> {
            let k = key(path, name);
            Ok(match self.props.int(&k).map_err(|e| e.queue(path))? {
                None => from,
                Some(n) => u64::try_from(n).ok().filter(|&n| n > 0),
            })
        };
        let limits = LifetimeLimits {
            default_secs: one(
                keys::CS_QUEUE_DEFAULT_APPLICATION_LIFETIME,
                inherited.default_secs,
            )?,
            max_secs: one(
                keys::CS_QUEUE_MAXIMUM_APPLICATION_LIFETIME,
                inherited.max_secs,
            )?,
        };
        if let (Some(d), Some(m)) = (limits.default_secs, limits.max_secs) {
            if d > m {
                let k = key(path, keys::CS_QUEUE_DEFAULT_APPLICATION_LIFETIME);
                return Err(self
                    .props
                    .err(
                        Rule::LimitRange,
                        &k,
                        format!(
                            "Default lifetime {d} can't exceed maximum lifetime {m} (queue {path})"
                        ),
                    )
                    .queue(path));
            }
        }
        Ok(limits)
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
                            "expected an integer from {} to {}, got {}",
                            i32::MIN,
                            i32::MAX,
                            self.props.written(name)
                        ),
                    )
                    .queue(path)
            }),
        }
    }

    pub(super) fn am_percent(&self, name: &str, default: f64) -> Result<f64> {
        let v = self.props.f64(name)?.unwrap_or(default);
        if !(0.0..=1.0).contains(&v) {
            return Err(self.props.err(
                Rule::LimitRange,
                name,
                format!(
                    "maximum-am-resource-percent is a fraction from 0 to 1 (0.1 = 10%), got {}",
                    self.props.written(name)
                ),
            ));
        }
        Ok(v)
    }

    fn max_allocation(&self, path: &str, parent: &ParentCtx) -> Result<Option<Resource>> {
        let props = self.props;
        let mb_key = key(path, keys::CS_QUEUE_MAXIMUM_ALLOCATION_MB);
        let vc_key = key(path, keys::CS_QUEUE_MAXIMUM_ALLOCATION_VCORES);
        let mb = props.int(&mb_key).map_err(|e| e.queue(path))?;
        let vc = props.int(&vc_key).map_err(|e| e.queue(path))?;
        for (k, v) in [(&mb_key, mb), (&vc_key, vc)] {
            if let Some(v) = v {
                if v <= 0 {
                    return Err(props
                        .err(
                            Rule::MaximumAllocation,
                            k,
                            format!(
                                "queue maximum allocation must be positive, got {}",
                                props.written(k)
                            ),
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

    /// The `las` ordering's thresholds (ascending GPU-seconds) and promotion factor.
    fn las(&self, path: &str) -> Result<LasSpec> {
        let props = self.props;
        let t_key = key(path, keys::CS_QUEUE_LAS_THRESHOLDS);
        let raw = props
            .trimmed(&t_key)
            .unwrap_or(keys::DEFAULT_CS_QUEUE_LAS_THRESHOLDS);
        let mut thresholds_gpu_s = Vec::new();
        for part in value::split_list(raw) {
            let t: u64 = part.parse().map_err(|_| {
                props
                    .err(
                        Rule::LimitRange,
                        &t_key,
                        format!("'{part}' is not a whole number of GPU-seconds"),
                    )
                    .queue(path)
            })?;
            if thresholds_gpu_s.last().is_some_and(|last| t <= *last) || t == 0 {
                return Err(props
                    .err(
                        Rule::LimitRange,
                        &t_key,
                        format!("thresholds must be positive and ascending, got '{raw}'"),
                    )
                    .queue(path));
            }
            thresholds_gpu_s.push(t);
        }
        if thresholds_gpu_s.len() > 15 {
            return Err(props
                .err(
                    Rule::LimitRange,
                    &t_key,
                    "at most 15 thresholds (16 levels)",
                )
                .queue(path));
        }
        let f_key = key(path, keys::CS_QUEUE_LAS_PROMOTION_FACTOR);
        let promotion_factor = props
            .f64(&f_key)?
            .unwrap_or(keys::DEFAULT_CS_QUEUE_LAS_PROMOTION_FACTOR);
        if !(0.0..=1e6).contains(&promotion_factor) {
            return Err(props
                .err(
                    Rule::LimitRange,
                    &f_key,
                    format!("must be between 0 (no promotion) and 1000000, got {promotion_factor}"),
                )
                .queue(path));
        }
        Ok(LasSpec {
            thresholds_gpu_s,
            promotion_factor,
        })
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
            "las" => Some(OrderingPolicy::Las),
            "fairshare" => Some(OrderingPolicy::Fairshare),
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
                    format!("ordering-policy '{raw}' is for parent queues; leaf queue {path} takes fifo, fair, las or fairshare"),
                )
                .queue(path)),
            (None, false, _) => Err(props
                .err(
                    Rule::InvalidOrderingPolicy,
                    name,
                    format!("unknown ordering-policy '{raw}' for queue {path}: Spindle supports fifo, fair, las and fairshare for leaf queues, utilization and priority-utilization for parents"),
                )
                .queue(path)),
        }
    }
}
