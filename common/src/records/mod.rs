//! Wire records: the serde types of every REST body Spindle sends or accepts.
//!
//! Only this module (and the daemons' REST modules) derive `Serialize`/`Deserialize`; the
//! scheduler core and the lifecycles work on domain types and convert explicitly. Field names
//! follow Hadoop YARN 3.3/3.4 exactly where YARN has the record (`cluster`, `node`), and
//! YARN's protobuf names in camelCase where YARN speaks RPC (`am`, `tracker`).
//!
//! Every record tolerates missing fields (`#[serde(default)]`) so that clients of other
//! YARN versions and older Spindle peers can still talk to us.

pub mod admin;
pub mod am;
pub mod auth;
pub mod blob;
pub mod cluster;
pub mod exception;
pub mod labels;
pub mod nm;
pub mod node;
pub mod resource;
pub mod tracker;
mod util;

pub use util::OneOrMany;
