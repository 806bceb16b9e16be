//! Spindle's shared vocabulary: newtype ids with YARN's text forms, resource vectors, the
//! state enums, the wire records of every REST protocol, RM-signed tokens, and the Hadoop
//! XML configuration reader.
//!
//! This crate owns no I/O beyond reading configuration files and resolving this machine's
//! host name (`net`), and no async: both daemons, the scheduler core and the SDK depend on
//! it, and it must stay cheap for all of them. (Test harnesses live in `spindle-test-support`.)

#![forbid(unsafe_code)]

pub mod cluster_secret;
pub mod config;
pub mod env;
pub mod failover;
pub mod ids;
pub mod image_ref;
pub mod localtime;
pub mod net;
pub mod paths;
pub mod records;
pub mod resource;
pub mod resource_url;
pub mod runtime_request;
pub mod states;
pub mod time;
pub mod tls;
pub mod token;
pub mod user_token;

pub use ids::{ApplicationAttemptId, ApplicationId, ContainerId, NodeId, QueuePath};
pub use resource::Resource;
