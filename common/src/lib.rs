//! Spindle's shared vocabulary: newtype ids with YARN's text forms, resource vectors, the
//! state enums, the wire records of every REST protocol, RM-signed tokens, and the Hadoop
//! XML configuration reader.
//!
//! This crate owns no I/O beyond reading configuration files, and no async: both daemons,
//! the scheduler core and the SDK depend on it, and it must stay cheap for all of them.

pub mod config;
/// The OpenAPI contract tests' spec and route readers (pure text processing, used only by
/// the RM's and the NM's `tests/openapi.rs`). It lives here because both daemon crates
/// already depend on this one, so one copy serves both without a new crate or dependency.
pub mod contract;
pub mod env;
pub mod ids;
pub mod net;
pub mod records;
pub mod resource;
pub mod states;
pub mod time;
pub mod token;

pub use ids::{ApplicationAttemptId, ApplicationId, ContainerId, NodeId, QueuePath};
pub use resource::Resource;
