//! The include and exclude host files (`yarn.resourcemanager.nodes.include-path`,
//! `...exclude-path`) and the graceful decommission timeout: what `rmadmin -refreshNodes`
//! makes the RM read again. The files are read here, off the core (the core gets the
//! [`HostLists`]); a file that is named but missing or unreadable is an error naming it.
//!
//! The format is Hadoop's `HostsFileReader` plain text: entries separated by white space
//! (one a line, usually), `#` starts a comment to the end of its line; an entry is a host
//! (every NM on it) or `host:port` (one NM).

use std::path::{Path, PathBuf};

use spindle_common::config::{keys, Configuration};

use super::{load_conf, RmConfig, RmConfigError};
use crate::core::HostLists;

/// Where the host files are and the default graceful timeout, from yarn-site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostsConfig {
    pub include_path: Option<PathBuf>,
    pub exclude_path: Option<PathBuf>,
    /// `yarn.resourcemanager.nodemanager-graceful-decommission-timeout-secs`: a graceful
    /// decommission's timeout when the request names none (negative: none).
    pub graceful_timeout_secs: i64,
}

impl Default for HostsConfig {
    fn default() -> Self {
        Self {
            include_path: None,
            exclude_path: None,
            graceful_timeout_secs: keys::DEFAULT_RM_NM_GRACEFUL_DECOMMISSION_TIMEOUT_SECS,
        }
    }
}

impl HostsConfig {
    pub fn from_conf(conf: &Configuration) -> Result<Self, RmConfigError> {
        Ok(Self {
            include_path: conf
                .get_nonempty(keys::RM_NODES_INCLUDE_PATH)?
                .map(PathBuf::from),
            exclude_path: conf
                .get_nonempty(keys::RM_NODES_EXCLUDE_PATH)?
                .map(PathBuf::from),
            graceful_timeout_secs: conf.get_i64(
                keys::RM_NM_GRACEFUL_DECOMMISSION_TIMEOUT_SECS,
                keys::DEFAULT_RM_NM_GRACEFUL_DECOMMISSION_TIMEOUT_SECS,
            )?,
        })
    }

    /// Reads both files (an unset path is an empty list).
    pub fn read(&self) -> Result<HostLists, HostsFileError> {
        let mut lists = HostLists::default();
        if let Some(p) = &self.include_path {
            lists.include = read_hosts(p, keys::RM_NODES_INCLUDE_PATH)?
                .into_iter()
                .collect();
        }
        if let Some(p) = &self.exclude_path {
            lists.exclude = read_hosts(p, keys::RM_NODES_EXCLUDE_PATH)?
                .into_iter()
                .map(|h| (h, None))
                .collect();
        }
        Ok(lists)
    }
}

impl RmConfig {
    /// The host-file settings as yarn-site says now: as YARN does, `refreshNodes` reads
    /// the paths again, so a path set after the start needs no restart. Reads the
    /// configuration directory: call it off the driver task.
    pub fn reload_hosts(&self) -> Result<HostsConfig, RmConfigError> {
        match &self.conf_dir {
            Some(dir) => HostsConfig::from_conf(&load_conf(dir, &self.overrides)?),
            None => Ok(self.hosts.clone()),
        }
    }
}

/// Why a host file could not be used: nothing changed.
#[derive(Debug, thiserror::Error)]
pub enum HostsFileError {
    #[error("cannot read {path} (property '{key}'): {source}")]
    Unreadable {
        key: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}: `{entry}` is not a host or host:port (property '{key}')")]
    BadEntry {
        key: &'static str,
        path: PathBuf,
        line: usize,
        entry: String,
    },
}

fn read_hosts(path: &Path, key: &'static str) -> Result<Vec<String>, HostsFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| HostsFileError::Unreadable {
        key,
        path: path.to_path_buf(),
        source,
    })?;
    parse_hosts(&text).map_err(|(line, entry)| HostsFileError::BadEntry {
        key,
        path: path.to_path_buf(),
        line,
        entry,
    })
}

/// The entries of a plain-text host file, or the first bad one with its line (from 1).
pub fn parse_hosts(text: &str) -> Result<Vec<String>, (usize, String)> {
    let mut out: Vec<String> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default();
        for entry in line.split_whitespace() {
            if !valid_entry(entry) {
                return Err((i + 1, entry.to_string()));
            }
            if !out.iter().any(|e| e == entry) {
                out.push(entry.to_string());
            }
        }
    }
    Ok(out)
}

fn valid_entry(entry: &str) -> bool {
    let host_ok = |h: &str| {
        !h.is_empty()
            && h.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    };
    match entry.rsplit_once(':') {
        Some((host, port)) => host_ok(host) && port.parse::<u16>().is_ok(),
        None => host_ok(entry),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_hosts_like_hadoop() {
        let hosts = parse_hosts(
            "# decommission\nnm1.example.com\n  127.0.0.1:8042 nm2 # old\nnm1.example.com\n\n",
        )
        .expect("parses");
        assert_eq!(hosts, vec!["nm1.example.com", "127.0.0.1:8042", "nm2"]);
        assert_eq!(parse_hosts(""), Ok(vec![]));
        assert_eq!(parse_hosts("ok\nnm1:port"), Err((2, "nm1:port".into())));
        assert_eq!(parse_hosts("a/b"), Err((1, "a/b".into())));
        assert_eq!(parse_hosts(":8042"), Err((1, ":8042".into())));
    }

    #[test]
    fn a_missing_file_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("exclude");
        let c = HostsConfig {
            exclude_path: Some(missing.clone()),
            ..Default::default()
        };
        let e = c.read().expect_err("missing");
        assert!(matches!(e, HostsFileError::Unreadable { .. }));
        let text = e.to_string();
        assert!(text.contains(&missing.display().to_string()), "{text}");
        assert!(text.contains(keys::RM_NODES_EXCLUDE_PATH), "{text}");
        std::fs::write(&missing, "h1\nh2:9\nbad:x\n").expect("write");
        let e = c.read().expect_err("bad entry");
        assert!(e.to_string().contains(":3: `bad:x`"), "{e}");
        std::fs::write(&missing, "h1\nh2:9\n").expect("write");
        let lists = c.read().expect("reads");
        assert_eq!(lists.exclude.len(), 2);
        assert!(lists.include.is_empty());
    }
}
