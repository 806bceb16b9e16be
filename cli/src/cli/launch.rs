//! The command-line side of [`spindle_appmaster_sdk::launch`], shared by `distributed-shell` and `train` and
//! their AMs: the application options, running the client, and an AM's clients and exit.

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::Context;
use spindle_common::records::resource::parse_resource_list;
use spindle_common::resource::Resource;
use tokio::signal::unix::{signal, SignalKind};

use super::args::{Parsed, UsageError};
use super::{rm_client, EXIT_APP_FAILED, EXIT_OK};
use spindle_appmaster_sdk::amrm::AmRmClient;
use spindle_appmaster_sdk::launch::Dependencies;
use spindle_appmaster_sdk::launch::{shell_word, AmLaunch, ClientEnd, Watch};
use spindle_appmaster_sdk::nm_client::NmClient;
use spindle_appmaster_sdk::AmClient;
use spindle_common::ApplicationId;

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
    pub lifetime: &'a mut Option<Duration>,
    pub dependencies: &'a mut Dependencies,
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
    *o.lifetime = lifetime(p)?;
    o.dependencies.after_any = app_ids(p, "after")?;
    o.dependencies.after_ok = app_ids(p, "after_ok")?;
    Ok(())
}

/// `--time` (Slurm's formats) or `--timeout-ms`: one lifetime, never zero.
fn lifetime(p: &Parsed) -> Result<Option<Duration>, UsageError> {
    let time = match p.value("time") {
        Some(v) => Some(Duration::from_secs(
            spindle_common::time::parse_slurm_time(v).map_err(|e| invalid("time", v, e.reason))?,
        )),
        None => None,
    };
    let ms = p.parse::<u64>("timeout_ms")?.map(Duration::from_millis);
    match (time, ms) {
        (Some(_), Some(_)) => Err(UsageError::Other(
            "give --time or --timeout-ms, not both (they set the same lifetime)".into(),
        )),
        (Some(d), None) | (None, Some(d)) if d.is_zero() => Err(UsageError::Other(
            "a lifetime of zero would kill the application at once; give a positive --time".into(),
        )),
        (t, m) => Ok(t.or(m)),
    }
}

/// The application ids of a repeatable, comma-separated option.
fn app_ids(p: &Parsed, option: &'static str) -> Result<Vec<ApplicationId>, UsageError> {
    let mut out = Vec::new();
    for v in p.values(option) {
        for id in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            out.push(
                id.parse::<ApplicationId>()
                    .map_err(|e| invalid(option, id, e.to_string()))?,
            );
        }
    }
    Ok(out)
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

/// The exit status of a client whose application the user interrupted (Ctrl-C): the
/// shell's 128 + SIGINT.
pub const EXIT_INTERRUPTED: u8 = 130;

/// The usage lines of `--follow`, `--no-follow` and `--detach`, as in both commands' usage.
pub(super) const WATCH_USAGE: &str = "\
  --follow, --no-follow         stream rank 0's stdout and stderr (the distributed shell's
                                first container's) as they are written, each line prefixed
                                [rank 0 stdout] (default: follow when stdout is a terminal)
  --detach                      return once the application is accepted, printing its id and
                                the commands to follow it, kill it and fetch its logs;
                                without it, Ctrl-C kills the application";

/// `--follow` / `--no-follow` (default: whether stdout is a terminal) and `--detach`.
pub(super) fn watch_options(p: &Parsed) -> Result<Watch, UsageError> {
    let detach = p.has("detach");
    let follow = match (p.has("follow"), p.has("no_follow")) {
        (true, true) => {
            return Err(UsageError::Other(
                "--follow and --no-follow exclude each other".into(),
            ))
        }
        (true, false) if detach => {
            return Err(UsageError::Other(
                "--follow and --detach exclude each other: a detached client does not stay".into(),
            ))
        }
        (true, false) => true,
        (false, true) => false,
        (false, false) => !detach && std::io::stdout().is_terminal(),
    };
    Ok(Watch { follow, detach })
}

/// What a detached client prints: the id, and the commands (with this command line's
/// `--rm-address` and `--conf-dir`) to follow the application, kill it and fetch its logs.
pub(super) fn detached_lines(p: &Parsed, app_id: &str, state: &str) -> Vec<String> {
    let mut common = String::new();
    for opt in ["rm-address", "conf-dir"] {
        if let Some(v) = p.value(opt) {
            common.push_str(&format!(" --{opt} {}", shell_word(v)));
        }
    }
    vec![
        format!("Application {app_id} is {state}; detached, it keeps running."),
        format!("  Follow it:       spindle application -status {app_id}{common}"),
        format!("  Kill it:         spindle application -kill {app_id}{common}"),
        format!("  Fetch its logs:  spindle logs -applicationId {app_id}{common}"),
    ]
}

/// Submits `launch` to the RM of the command line, follows it (or detaches), and tells the
/// exit status; `what` names the application in the error. SIGINT (Ctrl-C) kills the
/// application unless `--detach` was given.
pub(super) async fn run_client(
    p: &Parsed,
    launch: &AmLaunch<'_>,
    what: &str,
) -> anyhow::Result<u8> {
    let watch = watch_options(p).map_err(|e| super::usage_error(e, WATCH_USAGE))?;
    let rm = rm_client(p)?;
    let exe = current_exe()?;
    // Caught from here on, so that a Ctrl-C during the submission still kills what it
    // submitted; a second Ctrl-C exits without waiting for the kill. A detached client
    // keeps the default (it ends at once).
    let (interrupted, on_interrupt) = tokio::sync::oneshot::channel::<()>();
    if !watch.detach {
        let mut sigint = signal(SignalKind::interrupt()).context("cannot catch SIGINT")?;
        tokio::spawn(async move {
            if sigint.recv().await.is_some() {
                let _ = interrupted.send(());
            }
            if sigint.recv().await.is_some() {
                eprintln!("Interrupted again: exiting without waiting for the kill");
                std::process::exit(i32::from(EXIT_INTERRUPTED));
            }
        });
    }
    let interrupt = async move {
        if on_interrupt.await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let end = match spindle_appmaster_sdk::launch::run_client_watched(
        &rm,
        launch,
        &exe,
        watch,
        interrupt,
        &mut |l| say!("{l}"),
    )
    .await
    {
        Ok(end) => end,
        // Refused here, before the RM ran anything: the application did not succeed (2).
        Err(e) if e.is_client_refusal() => {
            eprintln!("error: {what} not submitted: {e}");
            return Ok(EXIT_APP_FAILED);
        }
        Err(e) => return Err(e).with_context(|| format!("{what} against {} failed", rm.address())),
    };
    Ok(match end {
        ClientEnd::Finished(outcome) => exit_status(outcome.succeeded()),
        ClientEnd::Detached { app_id, state } => {
            for l in detached_lines(p, &app_id.to_string(), state.as_str()) {
                say!("{l}");
            }
            EXIT_OK
        }
        ClientEnd::Interrupted { .. } => EXIT_INTERRUPTED,
    })
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

#[cfg(test)]
mod tests {
    use super::super::args::{parse, Opt};
    use super::*;

    fn parsed(a: &[&str]) -> Parsed {
        let opts = [
            Opt::flag("follow", &[]),
            Opt::flag("no_follow", &[]),
            Opt::flag("detach", &[]),
            Opt::one("rm-address", &[]),
            Opt::one("conf-dir", &[]),
        ];
        let args: Vec<String> = a.iter().map(|s| s.to_string()).collect();
        parse(&args, &opts).expect("parses")
    }

    #[test]
    fn follow_and_detach_flags() {
        let w = |a: &[&str]| watch_options(&parsed(a));
        assert_eq!(
            w(&["--follow"]).unwrap(),
            Watch {
                follow: true,
                detach: false
            }
        );
        assert_eq!(
            w(&["--no-follow"]).unwrap(),
            Watch {
                follow: false,
                detach: false
            }
        );
        assert_eq!(
            w(&["-detach"]).unwrap(),
            Watch {
                follow: false,
                detach: true
            }
        );
        assert_eq!(
            w(&["--detach", "--no-follow"]).unwrap(),
            Watch {
                follow: false,
                detach: true
            }
        );
        assert!(w(&["--follow", "--no-follow"]).is_err());
        assert!(w(&["--follow", "--detach"]).is_err());
    }

    #[test]
    fn detached_lines_name_the_commands() {
        let p = parsed(&["--rm-address", "rm:8088", "--conf-dir", "/etc/my conf"]);
        let l = detached_lines(&p, "application_1_0001", "ACCEPTED");
        assert_eq!(
            l[0],
            "Application application_1_0001 is ACCEPTED; detached, it keeps running."
        );
        assert_eq!(
            l[2],
            "  Kill it:         spindle application -kill application_1_0001 \
             --rm-address rm:8088 --conf-dir '/etc/my conf'"
        );
        let l = detached_lines(&parsed(&[]), "application_1_0001", "RUNNING");
        assert_eq!(
            l[3],
            "  Fetch its logs:  spindle logs -applicationId application_1_0001"
        );
        assert_eq!(shell_word("it's"), "'it'\\''s'");
        assert_eq!(shell_word(""), "''");
    }
}
