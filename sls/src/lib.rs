//! `spindle sls`: the scheduler load simulator. It replays a GPU cluster's job trace through
//! the ResourceManager's own pure core ([`spindle_resourcemanager::core::RmCore`], the same
//! code the live RM runs, configured from the same `capacity-scheduler.xml` and
//! `yarn-site.xml`), with simulated NodeManagers and one simulated ApplicationMaster per job,
//! in virtual time: events are taken in time order and nothing sleeps.
//!
//! Rooms: [`trace`] (the jobs, from Spindle's CSV or YARN SLS JSON, checked whole before a
//! replay starts), [`cluster`] (the simulated nodes), [`policy`] (named presets over the
//! configuration), [`replay`] (the event loop that drives the core), [`report`] (summary,
//! per-job table, timeline), [`plot`] (SVG charts), [`compare`] (several runs side by side), [`fairness`] (users' usage against
//! their shares over a replay)
//! and [`generate`] (seeded synthetic traces).
//!
//! Architecture invariant: the simulator never decides where or when anything runs; the
//! core does. It only plays the parts of the NMs and AMs, with the inputs the live daemons
//! would send, and measures what the core decided.

#![forbid(unsafe_code)]

pub mod cluster;
pub mod compare;
pub mod error;
pub mod fairness;
pub mod generate;
pub mod plot;
pub mod policy;
pub mod replay;
pub mod report;
pub mod synergy;
pub mod trace;

pub use error::SlsError;
