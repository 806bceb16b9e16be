//! The live capacity-scheduler property set ([`CsProps`]): every
//! `yarn.scheduler.capacity.*` key with its expanded value and where it came from, as
//! `GET /scheduler-conf` shows it, a mutation edits it and the state store keeps it; and the
//! typed reads of one property (number, integer, boolean, count) that the parser builds on.
//!
//! Owns the set and the per-property value errors (`bad-value`, a count's `limit-range`).
//! It must not know what a queue's properties mean or check any rule between properties:
//! that is the parser's (`parse`, `queue`, `capacities`).

use std::collections::{BTreeMap, BTreeSet};

use spindle_common::config::{keys, value, Configuration};

use super::error::Result;
use super::{CapacityConfError, Rule, MAX_DEPTH, PREFIX};

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
        let root_queues = key("root", keys::CS_QUEUE_QUEUES);
        if self.0.contains_key(&root_queues) {
            return;
        }
        let default = CsProp {
            value: "default".into(),
            origin: Some(DEFAULT_ORIGIN.into()),
        };
        self.0.insert(root_queues, default);
        let cap = key("root.default", keys::CS_QUEUE_CAPACITY);
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

    /// What changes from `self` to `new`, one line a property in name order (the
    /// `yarn.scheduler.capacity.` prefix left off): `root.prod.maximum-capacity: 100 -> 50`,
    /// `root.c.capacity: added (20)`, `root.c.capacity: removed (was 20)`.
    pub fn changes_to(&self, new: &CsProps) -> Vec<String> {
        let short = |k: &str| k.strip_prefix(PREFIX).unwrap_or(k).to_string();
        let names: BTreeSet<&String> = self.0.keys().chain(new.0.keys()).collect();
        names
            .into_iter()
            .filter_map(|k| match (self.get(k), new.get(k)) {
                (Some(a), Some(b)) if a != b => Some(format!("{}: {a} -> {b}", short(k))),
                (None, Some(b)) => Some(format!("{}: added ({b})", short(k))),
                (Some(a), None) => Some(format!("{}: removed (was {a})", short(k))),
                _ => None,
            })
            .collect()
    }

    /// The same values with their origins forgotten, to compare two sets by content.
    pub fn values(&self) -> BTreeMap<String, String> {
        self.pairs()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    pub(super) fn err(
        &self,
        rule: Rule,
        name: &str,
        message: impl Into<String>,
    ) -> CapacityConfError {
        let mut e = CapacityConfError::new(rule, message).property(name);
        e.place = self.origin(name).map(str::to_string);
        e
    }

    /// Trimmed value, `None` when unset.
    pub(super) fn trimmed(&self, name: &str) -> Option<&str> {
        self.get(name).map(str::trim)
    }

    /// The value as the user wrote it (trimmed), for messages that quote a refused value:
    /// `-60`, not the `-0.6` it was parsed to. Empty when unset.
    pub(super) fn written(&self, name: &str) -> &str {
        self.trimmed(name).unwrap_or_default()
    }

    pub(super) fn f64(&self, name: &str) -> Result<Option<f64>> {
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

    pub(super) fn int(&self, name: &str) -> Result<Option<i64>> {
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

    pub(super) fn bool(&self, name: &str, default: bool) -> Result<bool> {
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
    pub(super) fn count(&self, name: &str) -> Result<Option<u32>> {
        match self.int(name)? {
            None => Ok(None),
            Some(n) => u32::try_from(n).map(Some).map_err(|_| {
                self.err(
                    Rule::LimitRange,
                    name,
                    format!(
                        "expected an integer from 0 to {}, got {}",
                        u32::MAX,
                        self.written(name)
                    ),
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
                .get(&key(&path, keys::CS_QUEUE_QUEUES))
                .map(value::split_list)
                .unwrap_or_default();
            for c in children.iter().rev() {
                stack.push((format!("{path}.{c}"), depth + 1));
            }
        }
        out
    }
}

/// The full name of a queue's property: `yarn.scheduler.capacity.<queue>.<suffix>` (the
/// suffixes are `keys::CS_QUEUE_*`).
pub(super) fn key(queue: &str, suffix: &str) -> String {
    format!("{PREFIX}{queue}.{suffix}")
}
