//! `resourcemanager`: parse flags, load configuration, run the RM until SIGINT/SIGTERM.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
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
}

/// Loads the configuration directory and the `-D` overrides; the RM keeps both, so that
/// `refreshQueues` re-reads `capacity-scheduler.xml` with the same overrides on top.
fn load(args: &Args) -> Result<RmConfig, String> {
    let dir = Configuration::resolve_conf_dir(args.conf_dir.as_deref());
    let mut overrides = Vec::new();
    for d in &args.define {
        let (k, v) = d
            .split_once('=')
            .ok_or_else(|| format!("-D {d}: expected NAME=VALUE"))?;
        overrides.push((k.trim().to_string(), v.to_string()));
    }
    RmConfig::load(&dir, &overrides).map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let args = Args::parse();
    let conf = match load(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
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
