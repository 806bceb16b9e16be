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
//! Nothing here does I/O: files are read by the caller into a
//! [`Configuration`](spindle_common::config::Configuration).
//!
//! One module per concern; this one only declares them and re-exports what is public, so
//! every `crate::config::capacity::X` path names the same item it always did:
//!
//! - `error`: the [`Rule`] catalogue, [`CapacityConfError`] and how messages print numbers;
//! - `props`: the live property set [`CsProps`] and its typed reads;
//! - `site`: the yarn-site settings the scheduler reads ([`SiteSettings`]);
//! - `parse`: the entry points ([`parse()`], [`parse_props`]), the global settings and
//!   `queue-mappings`;
//! - `queue`: one queue's properties (state, limits, ACLs, ordering, maximum allocation);
//! - `capacities`: the capacity forms and the sibling rules on them;
//! - `acl`: queue names and ACL text ([`check_queue_name`], [`parse_acl`], [`acl_string`]);
//! - `transition`: the rules about replacing the running tree ([`validate_transition`]);
//! - `mutation`: the `sched-conf` mutation ([`SchedConfMutation`], [`apply_mutation`]).

mod acl;
mod capacities;
mod error;
mod fairshare;
mod gpu_idle;
mod mutation;
mod parse;
mod props;
mod queue;
mod site;
mod transition;

use spindle_common::config::keys;

#[cfg(doc)]
use crate::core::queue_conf::SchedulerConf;

pub use acl::{acl_string, check_queue_name, parse_acl};
pub use error::{CapacityConfError, Rule};
pub use mutation::{apply_mutation, QueueParams, SchedConfMutation};
pub use parse::{parse, parse_props};
pub use props::{CsProp, CsProps};
pub use site::SiteSettings;
pub use transition::validate_transition;

/// Prefix of every capacity-scheduler property.
pub const PREFIX: &str = keys::CAPACITY_SCHEDULER_PREFIX;
/// Deepest queue tree accepted (root is depth 0); a guard against runaway recursion.
pub const MAX_DEPTH: usize = 32;

#[cfg(test)]
mod tests;
