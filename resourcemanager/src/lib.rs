//! The Spindle ResourceManager: the pure scheduling and lifecycle core, the driver task that
//! owns it, the SQLite state store, and the REST API (YARN's `/ws/v1/cluster`, the AM and
//! node-tracker protocols, the web UI).
//!
//! Must not touch: processes, cgroups or devices (the NodeManager's), and no REST handler
//! holds cluster state: handlers send typed commands to the driver and read its snapshot.

#![forbid(unsafe_code)]

pub mod bench;
pub mod config;
pub mod core;
pub mod driver;
pub mod rest;
pub mod store;
pub mod wire;

pub use driver::{run, RunningRm};
