//! The command-line side of [`spindle_appmaster_sdk::launch`], shared by `distributed-shell` and `train` and
//! their AMs: the application options, running the client, and an AM's clients and exit.

use std::time::Duration;

use anyhow::Context;
use spindle_common::records::resource::parse_resource_list;
use spindle_common::resource::Resource;

use super::args::{Parsed, UsageError};
use super::{rm_client, EXIT_APP_FAILED, EXIT_OK};
use spindle_appmaster_sdk::amrm::AmRmClient;
use spindle_appmaster_sdk::launch::AmLaunch;
use spindle_appmaster_sdk::nm_client::NmClient;
use spindle_appmaster_sdk::AmClient;

pub(super) fn invalid(option: &'static str, value: &str, reason: impl Into<String>) -> UsageError {
    UsageError::Invalid {
        option,
        value: value.to_string(),
        reason: reason.into(),
    }
}

pub(super) fn memory_mb(option: &'static str, v: &str) -> Result<i64, UsageError> {
    parse_resource_list(&format!("memory-mb={v}"))
        .map(|r| r.memory_mb)
        .map_err(|r| invalid(option, v, r))
}

/// The submission fields of a command's options, for [`app_options`] to fill in.
pub(super) struct AppFields<'a> {
    pub app_name: &'a mut String,
    pub queue: &'a mut Option<String>,
    pub priority: &'a mut Option<i32>,
    pub master_resources: &'a mut Resource,
    /// `None` for a command without `-max_app_attempts`.
    pub max_app_attempts: Option<&'a mut Option<i32>>,
    pub timeout: &'a mut Option<Duration>,
}

/// `-appname`, `-queue`, `-priority`, `-master_memory`, `-master_vcores`,
/// `-max_app_attempts` (where the command has it) and `-timeout_ms`, over the defaults.
pub(super) fn app_options(p: &Parsed, o: AppFields<'_>) -> Result<(), UsageError> {
    if let Some(n) = p.value("appname") {
        *o.app_name = n.to_string();
    }
    *o.queue = p.value("queue").map(str::to_string);
    *o.priority = p.parse::<i32>("priority")?;
    if let Some(v) = p.value("master_memory") {
        o.master_resources.memory_mb = memory_mb("master_memory", v)?;
    }
    if let Some(n) = p.parse::<i64>("master_vcores")? {
        o.master_resources.vcores = n;
    }
    if let Some(attempts) = o.max_app_attempts {
        *attempts = p.parse::<i32>("max_app_attempts")?;
    }
    *o.timeout = p.parse::<u64>("timeout_ms")?.map(Duration::from_millis);
    Ok(())
}

/// The path of this binary, to ship as the AM.
pub fn current_exe() -> anyhow::Result<std::path::PathBuf> {
    let exe = std::env::current_exe().context("cannot find the path of this executable")?;
    Ok(exe.canonicalize().unwrap_or(exe))
}

/// 0 for an application (or AM) that succeeded, 2 else.
pub(super) fn exit_status(succeeded: bool) -> u8 {
    if succeeded {
        EXIT_OK
    } else {
        EXIT_APP_FAILED
    }
}

/// Submits `launch` to the RM of the command line, follows it, and tells the exit status;
/// `what` names the application in the error.
pub(super) async fn run_client(
    p: &Parsed,
    launch: &AmLaunch<'_>,
    what: &str,
) -> anyhow::Result<u8> {
    let rm = rm_client(p)?;
    let exe = current_exe()?;
    let outcome =
        spindle_appmaster_sdk::launch::run_client(&rm, launch, &exe, &mut |l| say!("{l}"))
            .await
            .with_context(|| format!("{what} against {} failed", rm.address()))?;
    Ok(exit_status(outcome.succeeded()))
}

/// An AM command takes its parameters from the environment: `args` are only warned about.
pub(super) fn ignore_am_args(command: &str, args: &[String]) {
    if !args.is_empty() {
        tracing::warn!(
            ?args,
            "{command} takes its parameters from the environment; ignoring arguments"
        );
    }
}

/// What an AM runs with: its AM-RM client, an NM client and the host of its node.
pub(super) fn am_clients() -> anyhow::Result<(AmRmClient, NmClient, String)> {
    let client = AmClient::from_env().context("not started as an application master")?;
    let host = std::env::var(spindle_common::env::NM_HOST)
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    let nm = NmClient::new()?;
    Ok((AmRmClient::new(client), nm, host))
}
