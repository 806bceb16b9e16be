//! `nodemanager`: parse flags, load the configuration, bind, and run the library until
//! SIGINT/SIGTERM.
//!
//! On SIGTERM the NM stops its containers before it exits, unless
//! `yarn.nodemanager.recovery.enabled` is true: then it exits leaving them running, and the
//! next NM started with the same recovery dir re-adopts them.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::Parser;
use spindle::logging::{self, LogFormat};
use spindle_common::config::Configuration;
use spindle_nodemanager::config::connectable;
use spindle_nodemanager::NmConfig;
use tokio::signal::unix::{signal, SignalKind};

#[derive(Debug, Parser)]
#[command(name = "nodemanager", version, about = "Spindle NodeManager")]
struct Args {
    /// Configuration directory (default: $SPINDLE_CONF_DIR, else ./conf).
    #[arg(long = "conf-dir", value_name = "DIR")]
    conf_dir: Option<PathBuf>,
    /// Override a property after the files are loaded (Hadoop's generic option).
    #[arg(short = 'D', value_name = "KEY=VALUE")]
    define: Vec<String>,
    /// Once listening, write the bound host:port here (via a temporary file and a rename).
    #[arg(long = "address-file", value_name = "PATH")]
    address_file: Option<PathBuf>,
    /// Log lines as `text` or `json` (one object per line, span ids flattened); else the
    /// yarn-site key spindle.log.format, else text.
    #[arg(long = "log-format", value_name = "text|json")]
    log_format: Option<LogFormat>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    // The configuration is read before logging starts: it may name the log format.
    let result = load(&args).and_then(|(conf, conf_dir)| {
        logging::init_with_audit(
            logging::resolve(args.log_format, &conf)?,
            logging::audit_file(&conf)?.as_deref(),
        )?;
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")
            .and_then(|rt| rt.block_on(real_main(args, conf, conf_dir)))
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line, as the operators' scripts expect.
            eprintln!("error: {}", spindle::cli::error_text(&e).replace('\n', " "));
            ExitCode::from(1)
        }
    }
}

/// The configuration directory with the `-D` overrides on top, and where it was.
fn load(args: &Args) -> anyhow::Result<(Configuration, PathBuf)> {
    let conf_dir = Configuration::resolve_conf_dir(args.conf_dir.as_deref());
    let mut conf = Configuration::load_dir(&conf_dir)?;
    for d in &args.define {
        let Some((k, v)) = d.split_once('=') else {
            bail!("-D expects key=value, got '{d}'");
        };
        conf.set(k.trim(), v);
    }
    Ok((conf, conf_dir))
}

async fn real_main(args: Args, conf: Configuration, conf_dir: PathBuf) -> anyhow::Result<()> {
    let nm_conf = NmConfig::from_configuration(&conf, &conf_dir)?;
    // A descriptor per connection, container pipe and file: take the hard limit.
    match spindle_rest_edge::serve::raise_nofile_limit() {
        Ok(n) => tracing::info!(
            limit = n,
            "open-file limit (RLIMIT_NOFILE): {n} (the hard limit)"
        ),
        Err(e) => tracing::warn!("cannot raise the open-file limit (RLIMIT_NOFILE): {e}"),
    }

    let listener = tokio::net::TcpListener::bind(&nm_conf.webapp_address)
        .await
        .with_context(|| format!("cannot listen on {}", nm_conf.webapp_address))?;
    let bound = listener
        .local_addr()
        .context("cannot read the listening address")?;
    if let Some(path) = &args.address_file {
        write_address_file(path, &connectable(&bound.to_string()))?;
    }
    let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let shutdown = async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    };
    spindle_nodemanager::run(listener, nm_conf, shutdown)
        .await
        .context("NodeManager failed")
}

fn write_address_file(path: &Path, addr: &str) -> anyhow::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, format!("{addr}\n"))
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot rename to {}", path.display()))
}
