//! Spindle's client side: everything that talks *to* the daemons rather than being one.
//!
//! - [`rm_client`]: the ResourceManager REST API v1 (`/ws/v1/cluster/...`, the node label and
//!   node attribute endpoints included), as YARN's, with [`address`] resolving where the RM
//!   is (`--rm-address`, `$SPINDLE_RM_ADDRESS`, the conf dir);
//! - [`am_client`] and [`amrm`]: the ApplicationMasterProtocol (`/ws/v1/am/...`) for AMs, and
//!   YARN's AMRMClient ask bookkeeping on top of it (`amrm::ask`: the desired-state ask table;
//!   `amrm::events`: what a heartbeat brought; releases, resync, adaptive heartbeat,
//!   incremental asks as a `futures::Stream`);
//! - [`gang`]: all-or-nothing gangs on top of it (`request_gang`, `release_gang`;
//!   `gang::request`: what an AM asks of a gang);
//! - [`nm_client`]: starting, stopping and watching containers on NodeManagers, and their logs
//!   (`start_gang`: a held start on every node, then the release);
//! - ready AMs: [`dshell`] (YARN's distributed shell, client and AM; its `register_fitting`,
//!   registration and the maximum-container check, serves both AMs) and [`train`] (the
//!   distributed-training launcher: a gang of workers with torchrun's rank environment;
//!   `train::am` the AM, `train::status` its rank file `spindle-ranks.json`, a file between
//!   the AM and its own client, not a daemon protocol);
//! - [`sweep`]: hyperparameter sweeps and Slurm job arrays (client and AM): trials in
//!   containers asked for one by one, at most K at once, each given back as its trial ends,
//!   failed trials retried; `sweep::status` its trials file `spindle-trials.json` for the
//!   client's table; it shares the distributed shell's configuration and heartbeat loop;
//! - [`submission`]: your own AM submitted (`Submission::new(name).am_file(..)`, what
//!   `spindle submit` uses);
//! - [`launch`]: what those clients share, submitting the AM and
//!   following the application to its end ([`follow`]: waiting reasons, progress, rank 0's
//!   output, the exit summary; Ctrl-C kills the application);
//! - [`placement`]: YARN distributed shell's `--placement_spec` text (allocation tags and
//!   placement constraints);
//! - [`ship`]: `--src-dir`/`--files`/`--archives`, staged in `<staging>/<user>/<app id>`,
//!   handed to the AM as local resources, removed with the application;
//! - [`error`] (`ClientError`), [`user_token`] (the caller's token for an RM in `token` mode),
//!   [`tls`] (the process's `yarn.http.policy` and trusted CAs) and `http` (the JSON-over-HTTP
//!   layer the clients share).
//!
//! The `spindle` CLI and the local minicluster live in the `spindle` crate (`cli/`), so that an
//! AM linking this SDK pulls in neither the RM nor SQLite nor axum.
//!
//! This crate must not touch the daemons' internals: it depends only on `spindle-common`
//! (ids, records, configuration) and speaks to the RM and NMs over HTTP exactly as any other
//! client would, so that it also proves the wire contract. It defines no wire types of its own
//! (they live in `common::records`); it never reads daemon state from disk. The library parts
//! report with `thiserror` enums; `cli` is the binary's edge and uses `anyhow`.

#![forbid(unsafe_code)]

pub mod address;
pub mod am_client;
pub mod amrm;
pub mod cpus;
pub mod dshell;
pub mod error;
pub mod follow;
pub mod gang;
mod http;
pub mod launch;
mod logging;
pub mod nm_client;
pub mod placement;
pub mod rm_client;
pub mod ship;
pub mod submission;
pub mod sweep;
pub mod tls;
pub mod train;
pub mod user_token;

/// The shared vocabulary (ids, resources, states, the wire records), so that an AM needs
/// only this crate in its `Cargo.toml`: `spindle_appmaster_sdk::common::records::am::...`.
pub use spindle_common as common;
pub use spindle_common::ids::{ApplicationId, ContainerId, NodeId};
pub use spindle_common::records::am::Container;
pub use spindle_common::records::node::{ContainerLaunchContext, SignalContainerCommand};
pub use spindle_common::resource::{Resource, GPU};
pub use spindle_common::states::FinalApplicationStatus;

pub use address::{current_user, RmAddress, RmAddresses};
pub use am_client::{AmClient, AmEnv, AmError};
pub use amrm::{
    AllocationEvent, AllocationEvents, AmRmClient, AskError, ContainerRequest, PreemptedContainer,
};
pub use error::ClientError;
pub use gang::{GangError, GangMember, GangRequest};
pub use logging::init_logging;
pub use nm_client::NmClient;
pub use rm_client::{AppsFilter, KillOutcome, RmClient};
pub use submission::Submission;

/// `docs/sdk.md`, compiled as doc tests: an example there that no longer builds fails the
/// suite (`cargo test -p spindle-appmaster-sdk --doc`).
#[cfg(doctest)]
#[doc = include_str!("../../docs/sdk.md")]
pub struct SdkGuide;
