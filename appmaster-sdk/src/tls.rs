//! What this process's Spindle HTTP clients dial and trust: YARN's `yarn.http.policy` (an
//! address written without a scheme, `host:port`, takes `https://` under `HTTPS_ONLY`) and the
//! CA certificates of `spindle.ssl.client.ca-file`, added to the system roots.
//!
//! Read once per process from the configuration directory: the one [`init`] was given (the
//! CLI's `--conf-dir`), else `$SPINDLE_CONF_DIR` (an AM's container has the NM's), else
//! `./conf`; without a configuration directory, plain HTTP and the system roots.

use std::path::Path;
use std::sync::OnceLock;

use spindle_common::config::Configuration;
use spindle_common::tls::{ClientTls, TlsConfError};

static PROCESS: OnceLock<Result<ClientTls, TlsConfError>> = OnceLock::new();

fn load(conf_dir: Option<&Path>) -> Result<ClientTls, TlsConfError> {
    let dir = Configuration::resolve_conf_dir(conf_dir);
    if !dir.is_dir() {
        return Ok(ClientTls::default());
    }
    ClientTls::from_conf(&Configuration::load_dir(&dir)?)
}

/// Reads the settings from `conf_dir` (else the default directory) unless they were read
/// already; the CLI calls it with its `--conf-dir` before building a client.
pub fn init(conf_dir: Option<&Path>) -> Result<&'static ClientTls, TlsConfError> {
    PROCESS
        .get_or_init(|| load(conf_dir))
        .as_ref()
        .map_err(Clone::clone)
}

/// This process's settings (read from the default directory on first use).
pub fn client_tls() -> Result<&'static ClientTls, TlsConfError> {
    init(None)
}

/// `http` or `https`: the scheme of an address written without one (`http` when the
/// configuration cannot be read; building a client then reports why).
pub fn scheme() -> &'static str {
    client_tls().map_or("http", |t| t.policy.scheme())
}
