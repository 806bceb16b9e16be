//! `resourcemanager`: parse flags, load configuration, run the RM until SIGINT/SIGTERM.

#![forbid(unsafe_code)]

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
    /// YARN's -format-state-store: delete the state store (spindle.resourcemanager.state-store.path,
    /// with its -wal/-shm files) and exit, so that the next start begins with a fresh one.
    /// Every application it holds is forgotten. Run it only while no RM uses the store.
    #[arg(long = "format-state-store", alias = "format_state_store")]
    format_state_store: bool,
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
    if args.format_state_store {
        return format_state_store(&conf);
    }
    if let Err(e) = logging::init_with_audit(format, conf.auth.audit_log_file.as_deref()) {
        eprintln!("error: {e}");
        return ExitCode::from(1);
    }
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
            eprintln!("error: {}", spindle::cli::error_text(&e));
            ExitCode::from(1)
        }
    }
}

/// `--format-state-store`: removes the store and says what was removed.
fn format_state_store(conf: &RmConfig) -> ExitCode {
    let path = &conf.store_path;
    match spindle_resourcemanager::store::SqliteStore::format(path) {
        Ok(f) if f.removed.is_empty() => {
            println!(
                "No state store at {} (spindle.resourcemanager.state-store.path): nothing to format; the next start creates one",
                path.display()
            );
            ExitCode::SUCCESS
        }
        Ok(f) => {
            for (file, bytes) in &f.removed {
                println!("Removed {file} ({bytes} bytes)");
            }
            println!(
                "Formatted the state store {}: the next start creates a fresh one",
                path.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

async fn serve(args: Args, conf: RmConfig) -> anyhow::Result<()> {
    // A descriptor per connection, container pipe and file: take the hard limit.
    match spindle_rest_edge::serve::raise_nofile_limit() {
        Ok(n) => tracing::info!(
            limit = n,
            "open-file limit (RLIMIT_NOFILE): {n} (the hard limit)"
        ),
        Err(e) => tracing::warn!("cannot raise the open-file limit (RLIMIT_NOFILE): {e}"),
    }
    let listener = tokio::net::TcpListener::bind(&conf.webapp_address)
        .await
        .with_context(|| {
            format!(
                "binding yarn.resourcemanager.webapp.address {}",
                conf.webapp_address
            )
        })?;
    let addr = listener.local_addr()?;
    let scheme = conf.http.scheme();
    let serve = spindle_resourcemanager::daemon::start_serving(listener, conf).await?;
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
    tracing::info!("ResourceManager listening on {scheme}://{addr}");
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
