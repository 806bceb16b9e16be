//! The `spindle` command line and the local minicluster: what a user or an operator runs.
//!
//! This crate is the one `cargo install` finds: it installs `spindle` (the client CLI,
//! modelled on `yarn`, which also runs the ready AMs), `resourcemanager` and `nodemanager`
//! (thin daemon binaries over their library crates). An application master that links
//! `spindle-appmaster-sdk` pulls in none of this, nor the RM, SQLite or axum.
//!
//! Its tests (`cli/tests/`) also drive the SDK's clients, gangs and ready AMs against a fake
//! RM and NM at the network boundary, so the SDK itself needs no HTTP server, even to test.
//!
//! Must not: hold daemon logic (the binaries parse flags and start the libraries), or define
//! wire types (they live in `common::records`).

#![forbid(unsafe_code)]

pub mod cli;
pub mod logging;
pub mod minicluster;
