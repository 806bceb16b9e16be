//! Spindle's shared vocabulary: newtype ids with YARN's text forms, resource vectors, the
//! state enums, the wire records of every REST protocol, RM-signed tokens, and the Hadoop
//! XML configuration reader.
//!
//! This crate owns no I/O beyond reading configuration files and resolving this machine's
//! host name (`net`), and no async: both daemons, the scheduler core and the SDK depend on
//! it, and it must stay cheap for all of them. (The robustness-test harness,
//! `contract::robust`, opens sockets, but only behind the `robust-tests` feature that the
//! daemons' tests enable.)

pub mod config;
/// The OpenAPI contract tests' spec and route readers (text processing, used by the RM's and
/// the NM's `tests/openapi.rs`), and with the `robust-tests` feature their robustness
/// harness. It lives here because both daemon crates already depend on this one, so one
/// copy serves both without a new crate or dependency.
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
