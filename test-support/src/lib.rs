//! What Spindle's tests share and no product build links: the OpenAPI contract readers and
//! the robustness harness both daemons' tests aim at their routers (`contract`), and the
//! rule for tests that need root or cgroups (`require`).
//!
//! Only `[dev-dependencies]` name this crate: it opens sockets and threads (`contract::robust`)
//! and panics as a report, which a daemon or an application master must never do.

#![forbid(unsafe_code)]

pub mod contract;
pub mod etcd;
pub mod images;
pub mod require;
