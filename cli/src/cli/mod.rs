//! The `spindle` command line, modelled on `yarn`: `application`, `applicationattempt`,
//! `container`, `node`, `queue`, `top`, `rmadmin`, `schedulerconf`, `nodeattributes`,
//! `cluster`, `cluster-secret`, `token`, `accounting`, `logs`, `distributed-shell`, `train`,
//! `sweep`, `minicluster`, `bench`, `sls`, `completion` (and the hidden `distributed-shell-am`,
//! `train-am` and `sweep-am`), one file each; YARN's output layouts are in [`format`].
//!
//! This module is the binary's edge: commands report with `anyhow` and context, print
//! user-facing output on stdout and errors on stderr, and map outcomes to exit statuses:
//! 0 success, 1 error (unreachable RM, I/O, ...), 2 a distributed shell application or
//! minicluster demo that did not succeed, 255 (YARN's -1) bad usage or an unknown id.

/// `println!` for user-facing output that survives a closed stdout (`spindle logs | head`).
macro_rules! say {
    ($($t:tt)*) => { $crate::cli::out(&format!("{}\n", format_args!($($t)*))) };
}

/// `print!` counterpart of [`say!`].
macro_rules! say_raw {
    ($($t:tt)*) => { $crate::cli::out(&format!($($t)*)) };
}

pub mod accounting;
pub mod application;
pub mod applicationattempt;
pub mod args;
pub mod bench;
pub mod cluster;
pub mod clustersecret;
pub mod completion;
pub mod container;
pub mod dshell;
pub mod format;
pub mod image;
pub mod launch;
pub mod logs;
pub mod minicluster;
pub mod node;
pub mod nodeattributes;
pub mod queue;
pub mod rmadmin;
pub mod rmadmin_ha;
pub mod schedulerconf;
pub mod sls;
pub mod submit;
pub mod sweep;
pub mod token;
pub mod top;
pub mod train;

use std::path::PathBuf;

use anyhow::Context;

use args::{Opt, Parsed, UsageError};
use spindle_appmaster_sdk::address::{RmAddress, RmAddresses};
use spindle_appmaster_sdk::rm_client::RmClient;

pub const EXIT_OK: u8 = 0;
pub const EXIT_ERROR: u8 = 1;
pub const EXIT_APP_FAILED: u8 = 2;
pub const EXIT_USAGE: u8 = 255;

/// Options every client command takes.
pub const COMMON_OPTS: [Opt; 3] = [
    Opt::one("rm-address", &["rmAddress"]),
    Opt::one("conf-dir", &["confDir"]),
    Opt::flag("help", &["h"]),
];

/// A command's arguments parsed with its options and the common ones, as `run` parses
/// them (for the commands' unit tests).
#[cfg(test)]
pub(crate) fn parse_with_common(
    opts: &[Opt],
    a: &[&str],
) -> Result<args::Parsed, args::UsageError> {
    let all: Vec<Opt> = opts.iter().chain(COMMON_OPTS.iter()).copied().collect();
    args::parse(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>(), &all)
}

const USAGE: &str = "\
usage: spindle COMMAND [options]

Client commands (each takes --rm-address HOST:PORT and --conf-dir DIR; the RM address
defaults to $SPINDLE_RM_ADDRESS, then yarn.resourcemanager.webapp.address in the conf dir):
  application        -list [-appStates S1,S2|ALL] [-appTypes T] [-appTags t] [-queue Q]
                     [-user U] | -status APPID | -priority APPID
                     | -kill APPID | -movetoqueue APPID -queue Q | -changeQueue Q -appId APPID
                     | -updatePriority P -appId APPID | -updateLifetime SECONDS -appId APPID
  applicationattempt -list APPID | -status ATTEMPTID
  container          -list ATTEMPTID | -status CONTAINERID
  node               -list [-all] [-states S1,S2] [-showDetails] | -status NODEID
  queue              -status QUEUE | -list [PARENT|all] | -fairshare [QUEUE]
  top                a live view of the cluster and its applications (q to quit)
  accounting         [-from T] [-to T] [-groupBy queue|user|application]: GPU-hours,
                     lost GPU-hours, wall hours per group over a period (like sreport)
  rmadmin            -refreshQueues | -refreshNodes [-g [TIMEOUT] [-client|-server]]
                     | -getGroups [USER...] | -addToClusterNodeLabels L
                     | -removeFromClusterNodeLabels L
                     | -replaceLabelsOnNode \"node=label ...\" [-failOnUnknownNodes]
  schedulerconf      -add|-update \"root.a:capacity=10,maximum-capacity=20;...\" | -remove \"root.x;...\"
                     | -global key=val,... | -getconf
  nodeattributes     -add|-remove|-replace \"node:attr=value ...\" | -list | -attributestonodes
                     | -nodestoattributes
  cluster            -lnl (--list-node-labels) | -lna (--list-node-attributes)
  token              -newKey FILE | -issue -user USER [-validity 7d] | -fetch | -cancel
                     | -print: users' tokens for an RM with hadoop.http.authentication.type=token
  image              -list | -prefetch IMAGE [-nodes N1,N2]: container images on the nodes,
                     and pulling one ahead of jobs (`spindle image -help`)
  logs               -applicationId APPID [-containerId CID] [-log_files F1,F2]
  distributed-shell  run a shell command in N containers (see `spindle distributed-shell -help`)
  train              run N workers as one gang with torchrun's rank environment (`spindle train -help`)
  submit             run your own application master: --am-file BIN (shipped) or --am-command
                     CMD, followed like train (`spindle submit -help`)
  sweep              run a command once per trial of a grid (--param) or Slurm job array
                     (--array 0-31%4), at most K at once (`spindle sweep -help`)
  minicluster        start a resourcemanager and N nodemanagers on this machine
  cluster-secret     -generate FILE | -check FILE: the secret the RM and NMs share to
                     authenticate node registrations and heartbeats
  bench scheduler|gangs  --nodes N: benchmark the scheduler core (one JSON line)
  bench http         submissions/s and heartbeat latency of a running RM over HTTP(S), or
                     load it with nodes, applications and kills (`spindle bench http -help`;
                     one JSON line)
  sls                replay a GPU job trace through the scheduler core in virtual time
                     (`spindle sls -help`; also sls generate | policies | compare)
  completion         bash|zsh|fish: print a shell completion script

Options may be spelled -name, --name, -name=value; YARN's names (-appStates, -num_containers)
and GNU ones (--app-states, --num-containers) both work. `spindle COMMAND -help` for more.";

/// Runs the command line (without the program name) and returns the exit status.
pub async fn run(args: Vec<String>) -> u8 {
    let Some((cmd, rest)) = args.split_first() else {
        eprintln!("{USAGE}");
        return EXIT_USAGE;
    };
    let rest = rest.to_vec();
    let result = match cmd.as_str() {
        "application" | "app" | "-application" => application::run(rest).await,
        "applicationattempt" | "-applicationattempt" => applicationattempt::run(rest).await,
        "container" | "-container" => container::run(rest).await,
        "top" | "-top" => top::run(rest).await,
        "token" | "-token" => token::run(rest).await,
        "accounting" | "-accounting" => accounting::run(rest).await,
        "completion" => completion::run(rest).await,
        "node" | "-node" => node::run(rest).await,
        "image" | "-image" => image::run(rest).await,
        "queue" | "-queue" => queue::run(rest).await,
        "rmadmin" | "-rmadmin" => rmadmin::run(rest).await,
        "schedulerconf" | "-schedulerconf" => schedulerconf::run(rest).await,
        "nodeattributes" | "-nodeattributes" => nodeattributes::run(rest).await,
        "cluster" | "-cluster" => cluster::run(rest).await,
        "cluster-secret" | "-cluster-secret" => clustersecret::run(rest).await,
        "logs" | "-logs" => logs::run(rest).await,
        "distributed-shell" | "distributedshell" | "dshell" => dshell::run_client_cmd(rest).await,
        "distributed-shell-am" => dshell::run_am_cmd(rest).await,
        "train" => train::run_client_cmd(rest).await,
        "submit" => submit::run_client_cmd(rest).await,
        "train-am" => train::run_am_cmd(rest).await,
        "sweep" => sweep::run_client_cmd(rest).await,
        "sweep-am" => sweep::run_am_cmd(rest).await,
        "minicluster" => minicluster::run(rest).await,
        "bench" => bench::run(rest).await,
        "sls" => sls::run(rest).await,
        "help" | "-help" | "--help" | "-h" => {
            say!("{USAGE}");
            Ok(EXIT_OK)
        }
        "version" | "-version" | "--version" => {
            say!("spindle {}", env!("CARGO_PKG_VERSION"));
            Ok(EXIT_OK)
        }
        other => {
            eprintln!("error: unknown command '{other}'\n\n{USAGE}");
            Ok(EXIT_USAGE)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            if let Some(u) = e.downcast_ref::<CommandUsage>() {
                eprintln!("error: {}\n\n{}", u.error, u.usage);
                return EXIT_USAGE;
            }
            eprintln!("error: {}", error_text(&e));
            EXIT_ERROR
        }
    }
}

/// An error and its causes on one line, `outer: cause: cause`, each cause once. Many error
/// types write their source into their own message (`"the configuration: {0}"`) and also
/// return it as `source()`, so `{:#}` (which appends every source) printed such a cause two
/// or three times; a cause whose text the line already holds is left out here.
pub fn error_text(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if text.is_empty() || out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// Writes to stdout; a closed or broken stdout is not worth failing (or panicking) for.
pub fn out(s: &str) {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(s.as_bytes()).and_then(|()| o.flush());
}

/// A usage error with the command's usage text.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct CommandUsage {
    pub error: UsageError,
    pub usage: &'static str,
}

/// Parses a command's arguments; `Ok(None)` when `-help` was asked (usage already printed).
pub fn parse_or_usage(
    args: &[String],
    opts: &[Opt],
    usage: &'static str,
) -> anyhow::Result<Option<Parsed>> {
    let all: Vec<Opt> = opts.iter().chain(COMMON_OPTS.iter()).copied().collect();
    let p = args::parse(args, &all).map_err(|error| CommandUsage { error, usage })?;
    if p.has("help") {
        say!("{usage}");
        return Ok(None);
    }
    Ok(Some(p))
}

pub fn usage_error(error: UsageError, usage: &'static str) -> anyhow::Error {
    CommandUsage { error, usage }.into()
}

/// The RM client for `--rm-address` / `$SPINDLE_RM_ADDRESS` / the conf dir.
pub fn rm_client(p: &Parsed) -> anyhow::Result<RmClient> {
    let conf_dir = p.value("conf-dir").map(PathBuf::from);
    init_tls(conf_dir.as_deref())?;
    let rms = RmAddresses::resolve(p.value("rm-address"), conf_dir.as_deref())
        .context("cannot tell where the ResourceManager is")?;
    let first = rms
        .addresses
        .first()
        .context("cannot tell where the ResourceManager is")?;
    tracing::debug!(rm = %first, all = rms.addresses.len(), "using ResourceManager");
    rm_client_at(conf_dir.as_deref(), first)?
        .with_failover(&rms.addresses, rms.policy)
        .context("cannot build the HTTP client")
}

/// `yarn.http.policy` and `spindle.ssl.client.ca-file` for every client this process builds.
fn init_tls(conf_dir: Option<&std::path::Path>) -> anyhow::Result<()> {
    spindle_appmaster_sdk::tls::init(conf_dir)
        .context("cannot read the TLS settings (yarn.http.policy, spindle.ssl.client.ca-file)")?;
    Ok(())
}

/// The RM client of the RM at `addr`, with the caller's token (an RM in token mode wants it
/// on every call).
pub fn rm_client_at(
    conf_dir: Option<&std::path::Path>,
    addr: &RmAddress,
) -> anyhow::Result<RmClient> {
    init_tls(conf_dir)?;
    let token = spindle_appmaster_sdk::user_token::resolve(conf_dir)
        .context("cannot read the caller's token")?;
    Ok(RmClient::new(addr)
        .context("cannot build the HTTP client")?
        .with_token(token))
}

/// Logs go to stderr; `RUST_LOG` overrides the default level (`info` for the AM, whose
/// stderr is its log file, else `warn`).
pub fn init_tracing(args: &[String]) {
    let default = match args.first().map(String::as_str) {
        Some("distributed-shell-am")
        | Some("train-am")
        | Some("sweep-am")
        | Some("minicluster") => "info",
        _ => "warn",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cluster secret file /tmp/s: cannot read it: {source}")]
    struct Inner {
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("property 'spindle.cluster.secret-file': {source}")]
    struct Middle {
        #[source]
        source: Inner,
    }

    #[derive(Debug, thiserror::Error)]
    enum Outer {
        #[error("the configuration: {0}")]
        Config(#[from] Middle),
    }

    #[test]
    fn each_cause_is_printed_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e = anyhow::Error::from(Outer::from(Middle {
            source: Inner { source: io },
        }))
        .context("cannot start the simulator");
        // `{:#}` repeats what the messages already say.
        assert_eq!(format!("{e:#}").matches("no such file").count(), 4);
        assert_eq!(
            error_text(&e),
            "cannot start the simulator: the configuration: property 'spindle.cluster.secret-file': cluster secret file /tmp/s: cannot read it: no such file"
        );
        // Causes a message does not repeat are all kept.
        let e = anyhow::anyhow!("disk full")
            .context("cannot write x")
            .context("cannot save");
        assert_eq!(error_text(&e), "cannot save: cannot write x: disk full");
    }
}
