//! `resourcemanager`: parse flags, load configuration, run the RM until SIGINT/SIGTERM.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use spindle::logging::{self, LogFormat};
use spindle_common::config::Configuration;
use spindle_resourcemanager::config::RmConfig;

#[derive(Parser, Debug)]
#[command(name = "resourcemanager", version, about = "Spindle ResourceManager")]
struct Args {
    /// Configuration directory (else $SPINDLE_CONF_DIR, else ./conf).
    #[arg(long)]
    conf_dir: Option<PathBuf>,
    /// Override a property: -D name=value (repeatable), as Hadoop's generic option.
    #[arg(short = 'D', value_name = "NAME=VALUE")]
    define: Vec<String>,
    /// Write the bound host:port here once listening (for port 0).
    #[arg(long)]
    address_file: Option<PathBuf>,
    /// Log lines as `text` or `json` (one object per line, span ids flattened); else the
    /// yarn-site key spindle.log.format, else text.
    #[arg(long, value_name = "text|json")]
    log_format: Option<LogFormat>,
}

/// Loads the configuration directory and the `-D` overrides; the RM keeps both, so that
/// `refreshQueues` re-reads `capacity-scheduler.xml` with the same overrides on top. Also
/// decides the log format (the flag, else `spindle.log.format`).
fn load(args: &Args) -> Result<(RmConfig, LogFormat), String> {
    let dir = Configuration::resolve_conf_dir(args.conf_dir.as_deref());
    let mut overrides = Vec::new();
    for d in &args.define {
        let (k, v) = d
            .split_once('=')
            .ok_or_else(|| format!("-D {d}: expected NAME=VALUE"))?;
        overrides.push((k.trim().to_string(), v.to_string()));
    }
    let rm = RmConfig::load(&dir, &overrides).map_err(|e| e.to_string())?;
    let format = match args.log_format {
        Some(f) => f,
        None => {
            let mut conf = Configuration::load_dir(&dir).map_err(|e| e.to_string())?;
            for (k, v) in &overrides {
                conf.set(k, v);
            }
            logging::resolve(None, &conf).map_err(|e| e.to_string())?
        }
    };
    Ok((rm, format))
}

fn main() -> ExitCode {
    let args = Args::parse();
    let (conf, format) = match load(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    logging::init(format);
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match rt.block_on(serve(args, conf)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

async fn serve(args: Args, conf: RmConfig) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(&conf.webapp_address)
        .await
        .with_context(|| {
            format!(
                "binding yarn.resourcemanager.webapp.address {}",
                conf.webapp_address
            )
        })?;
    let addr = listener.local_addr()?;
    let (_rm, serve) = spindle_resourcemanager::driver::start(listener, conf).await?;
    if let Some(path) = &args.address_file {
        // An address to dial: a wildcard bind is written as 127.0.0.1, as the NM does.
        let dial = if addr.ip().is_unspecified() {
            std::net::SocketAddr::from(([127, 0, 0, 1], addr.port()))
        } else {
            addr
        };
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, format!("{dial}\n"))
            .with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    }
    tracing::info!("ResourceManager listening on http://{addr}");
    serve(Box::pin(shutdown_signal())).await
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = term.recv() => {},
    }
    tracing::info!("shutting down");
}
