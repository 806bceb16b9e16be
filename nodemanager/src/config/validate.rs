//! The shared checks and conversions of the parser: where a value came from (for error
//! messages), addresses and host names, directory lists, environment variable names.
//!
//! Pure functions of their arguments (and of the raw [`Configuration`]'s sources): they must
//! not read keys of their own or know what any one key means; the modules that read a key
//! decide which check applies.

use std::path::{Path, PathBuf};

use spindle_common::config::{Configuration, DEFAULT_SOURCE};
use spindle_common::net::is_wildcard;

use super::NmConfigError;

/// Replaces a wildcard listen host with the loopback address, so the text can be dialled.
pub fn connectable(addr: &str) -> String {
    match addr.rsplit_once(':') {
        Some((host, port)) if is_wildcard(host) => format!("127.0.0.1:{port}"),
        _ => addr.to_string(),
    }
}

/// `file:line`, `-D` for a command-line override, `<default>` when the property is unset.
pub(super) fn at(conf: &Configuration, name: &str) -> String {
    conf.source(name)
        .map(ToString::to_string)
        .unwrap_or_else(|| DEFAULT_SOURCE.to_string())
}

/// A comma list of directories, made absolute (`file://` prefixes allowed, as in YARN).
pub(super) fn dirs(raw: &str) -> Vec<PathBuf> {
    raw.split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| absolute(Path::new(d.strip_prefix("file://").unwrap_or(d))))
        .collect()
}

pub(super) fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

pub(super) fn check_address(
    conf: &Configuration,
    name: &'static str,
    value: &str,
    allow_port_zero: bool,
) -> Result<(), NmConfigError> {
    let ok = match value.rsplit_once(':') {
        Some((host, port)) => {
            let port_ok = port
                .parse::<u16>()
                .map(|p| allow_port_zero || p > 0)
                .unwrap_or(false);
            port_ok && (is_wildcard(host) || valid_hostname(host))
        }
        None => false,
    };
    if ok {
        Ok(())
    } else {
        Err(NmConfigError::BadAddress {
            at: at(conf, name),
            name,
            value: value.to_string(),
        })
    }
}

/// The characters `NodeId` accepts, so that the NodeId built from it always parses.
pub(super) fn valid_hostname(h: &str) -> bool {
    !h.is_empty()
        && h.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

pub(super) fn valid_env_name(v: &str) -> bool {
    let mut chars = v.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
