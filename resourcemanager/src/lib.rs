//! The Spindle ResourceManager: the pure scheduling and lifecycle core, the driver task that
//! owns it, the state store behind its trait, the REST API (YARN's `/ws/v1/cluster`, the AM
//! and node-tracker protocols, the web UI), and the daemon that assembles them.
//!
//! Must not touch: processes, cgroups or devices (the NodeManager's), and no REST handler
//! holds cluster state: handlers send typed commands to the driver and read its snapshot.

#![forbid(unsafe_code)]

pub mod bench;
pub mod blob_replicas;
pub mod blobs;
pub mod config;
pub mod core;
pub mod daemon;
pub mod driver;
pub mod failover;
pub mod ha;
pub mod rest;
pub mod store;
pub mod wire;

pub use daemon::{run, start, RunningRm};
