//! How a queue's capacity and maximum capacity are written (a percentage, a weight such as
//! `2w`, an absolute resource such as `[memory=10240,vcores=12]`), how the two relate, and
//! the rules between siblings: no mixing of forms, percentages that sum to 100 (or to 0
//! where YARN allows it), absolute children that fit in their parent.
//!
//! Owns the capacity rules: `capacity-range`, `capacity-sum`,
//! `mixed-children-capacity-types`, `maximum-capacity-below-capacity`,
//! `absolute-children-exceed-parent` and `unknown-resource-type`. It must not read any
//! other property of a queue (that is `queue`, which also checks that a parent and its
//! child use the same form), and must not know the cluster's size: absolute figures are
//! checked against the configuration alone.

use std::collections::BTreeSet;

use spindle_common::config::{keys, value};
use spindle_common::Resource;

use crate::core::queue_conf::{CapacitySpec, MaxCapacitySpec, QueueSpec};

use super::error::{num, res, Result};
use super::parse::Parser;
use super::props::key;
use super::Rule;

/// YARN's tolerance on a percent sum, as a fraction (`PRECISION` in ParentQueue).
const PRECISION: f64 = 0.0005;

/// Whether a capacity was configured and in which form, for the sibling checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Mode {
    Percent,
    Absolute,
    Weight,
}

impl Mode {
    pub(super) fn of(c: &CapacitySpec) -> Self {
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
    pub(super) fn capacity(&self, path: &str, name: &str, raw: &str) -> Result<CapacitySpec> {
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
                            "Illegal weight of {raw} for queue {path}: weights may not be negative"
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
                    format!("Illegal capacity of {raw} for queue {path}: a percentage must be between 0 and 100"),
                )
                .queue(path));
        }
        Ok(CapacitySpec::Percent(pct))
    }

    pub(super) fn max_capacity(
        &self,
        path: &str,
        name: &str,
        raw: &str,
    ) -> Result<MaxCapacitySpec> {
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
                        "Illegal maximum-capacity of {raw} for queue {path}: a percentage must be between 0 and 100, or -1 for no limit"
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
    pub(super) fn check_max_vs_capacity(
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

    /// Sibling rules: no mixing of capacity forms; percent children sum to 100 (or to 0
    /// where YARN allows it); absolute children fit in an absolute parent.
    pub(super) fn check_children(
        &self,
        parent: &QueueSpec,
        set_modes: &[(String, Mode)],
    ) -> Result<()> {
        let props = self.props;
        let path = &parent.path;
        let children_key = key(path, keys::CS_QUEUE_QUEUES);
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
                        .bool(
                            &key(path, keys::CS_QUEUE_ALLOW_ZERO_CAPACITY_SUM),
                            keys::DEFAULT_CS_QUEUE_ALLOW_ZERO_CAPACITY_SUM,
                        )
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
                                        &key(&c.path, keys::CS_QUEUE_MAXIMUM_CAPACITY),
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
}
