//! The rules about replacing the running queue tree by a new one (YARN's
//! `validateQueueHierarchy`): a queue that disappears must have been STOPPED, a queue may
//! not move to another parent, a RUNNING leaf may not become a parent.
//!
//! Owns those three rules, on two already-validated trees. It must not re-check a tree on
//! its own (that is the parser's) and must not look at applications: the core refuses to
//! drop or convert a queue that still has them. Its errors carry no place; the caller adds
//! one with [`CapacityConfError::locate`].

use std::collections::BTreeMap;

use spindle_common::config::keys;

use crate::core::queue_conf::{QueueSpec, QueueState, SchedulerConf};

use super::error::Result;
use super::props::key;
use super::{CapacityConfError, Rule};

/// A queue's state, STOPPED if it or any ancestor is (YARN's effective state).
fn effective_states(root: &QueueSpec) -> BTreeMap<String, (QueueState, bool)> {
    fn walk(q: &QueueSpec, parent_stopped: bool, out: &mut BTreeMap<String, (QueueState, bool)>) {
        let stopped = parent_stopped || q.state == QueueState::Stopped;
        let state = if stopped {
            QueueState::Stopped
        } else {
            QueueState::Running
        };
        out.insert(q.path.to_string(), (state, q.is_leaf()));
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
                keys::CS_QUEUE_QUEUES,
            )
        };
        match new_states.get(q.path.as_str()) {
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
                    .get(q.path.as_str())
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
                    .get(q.path.as_str())
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
                    .property(&key(&q.path, keys::CS_QUEUE_QUEUES)));
                }
            }
        }
    }
    Ok(())
}
