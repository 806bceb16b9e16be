//! YARN's `sched-conf` mutation as a domain value ([`SchedConfMutation`], [`QueueParams`])
//! and its application to the live property set ([`apply_mutation`]), as YARN's
//! `ConfigurationUpdateAssembler` does: removals, additions, updates, then global updates.
//!
//! Owns only what makes a mutation impossible to apply (an unknown queue, an existing one,
//! a missing parent, a key outside the capacity scheduler's prefix). It must not validate
//! the result: the caller parses the proposed set as a whole ([`parse_props`](super::parse_props))
//! and checks the transition ([`validate_transition`](super::validate_transition)). It knows
//! nothing of the REST wire format.

use spindle_common::config::known::{self, KeyStatus};
use spindle_common::config::{keys, value};

use super::error::Result;
use super::props::key;
use super::{check_queue_name, CapacityConfError, CsProps, Rule, PREFIX};

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
    /// The keys it sets that are YARN's but not read by Spindle (stored, without effect):
    /// warnings for whoever sent it.
    pub fn ignored_keys(&self) -> Vec<String> {
        let queue_keys = self
            .add_queues
            .iter()
            .chain(&self.update_queues)
            .flat_map(|q| {
                q.params
                    .iter()
                    .map(move |(k, _)| (q.queue.trim(), k.trim()))
            })
            .filter(|(_, k)| known::queue_property_status(k) == KeyStatus::Ignored)
            .map(|(q, k)| format!("{q}.{k}"));
        let global = self
            .global
            .iter()
            .map(|(k, _)| k.trim())
            .filter(|k| known::key_status(k) == KeyStatus::Ignored)
            .map(str::to_string);
        queue_keys
            .chain(global)
            .map(|k| {
                format!("'{k}' is a YARN property Spindle does not read: stored, without effect")
            })
            .collect()
    }

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

/// Refuses a queue parameter Spindle does not know (`maximum-capacty`), naming the closest
/// known one, instead of storing it where nothing reads it. YARN's properties that Spindle
/// accepts without implementing them pass (see `spindle_common::config::known`).
fn check_param_known(queue: &str, k: &str) -> Result<()> {
    let k = k.trim();
    if let KeyStatus::Unknown { suggestion } = known::queue_property_status(k) {
        let hint = match &suggestion {
            Some(s) => format!("; did you mean '{s}'?"),
            None => "; docs/configuration.md lists the queue properties".to_string(),
        };
        return Err(CapacityConfError::new(
            Rule::UnknownProperty,
            format!("Unknown property '{k}' for queue {queue}{hint}"),
        )
        .queue(queue)
        .property(&key(queue, k)));
    }
    Ok(())
}

/// The same for a `global-updates` key (a full name).
fn check_global_known(k: &str) -> Result<()> {
    if let KeyStatus::Unknown { suggestion } = known::key_status(k) {
        let hint = match &suggestion {
            Some(s) => format!("; did you mean '{s}'?"),
            None => "; docs/configuration.md lists the capacity-scheduler properties".to_string(),
        };
        return Err(CapacityConfError::new(
            Rule::UnknownProperty,
            format!("Unknown property '{k}'{hint}"),
        )
        .property(k));
    }
    Ok(())
}

/// Applies a mutation to the live set, as YARN's `ConfigurationUpdateAssembler` does, and
/// returns the proposed set (to be parsed and validated as a whole by the caller). Refuses
/// what cannot even be applied: removing an unknown queue, adding an existing one or one
/// without a parent, updating an unknown one, a global key outside the capacity
/// scheduler's prefix, and a property Spindle does not know (`unknown-property`).
pub fn apply_mutation(props: &CsProps, m: &SchedConfMutation) -> Result<CsProps> {
    let mut out = props.clone();
    for q in &m.remove_queues {
        let q = full_path(q, "remove")?;
        let (parent, leaf) = q.rsplit_once('.').unwrap_or(("root", q.as_str()));
        let parent_key = key(parent, keys::CS_QUEUE_QUEUES);
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
            out.remove(&key(parent, keys::CS_QUEUE_ORDERING_POLICY));
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
        let parent_key = key(parent, keys::CS_QUEUE_QUEUES);
        let mut siblings = out
            .get(&parent_key)
            .map(value::split_list)
            .unwrap_or_default();
        siblings.push(leaf.to_string());
        out.set(&parent_key, &siblings.join(","));
        for (k, v) in &add.params {
            check_param_key(&q, k)?;
            check_param_known(&q, k)?;
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
            check_param_known(&q, k)?;
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
        check_global_known(k)?;
        set_or_unset(&mut out, k, v);
    }
    Ok(out)
}
