//! Hadoop XML configuration: `<configuration><property><name/><value/><final/></property>`.
//!
//! STUB: the public API below is the contract; the body is being written (helper task).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub mod keys;

/// The files read from a configuration directory, in load order. Each is optional.
pub const CONF_FILES: &[&str] = &[
    "yarn-site.xml",
    "capacity-scheduler.xml",
    "resource-types.xml",
    "node-resources.xml",
];

/// Where a property was defined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub file: PathBuf,
    pub line: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}:{line}: {message}")]
    Xml {
        file: PathBuf,
        line: u32,
        message: String,
    },
    #[error("{file}:{line}: property '{name}': expected {expected}, got '{value}'")]
    BadValue {
        file: PathBuf,
        line: u32,
        name: String,
        expected: String,
        value: String,
    },
    #[error("{file}: {message}")]
    Io { file: PathBuf, message: String },
}

#[derive(Debug, Clone, Default)]
pub struct Configuration {
    props: BTreeMap<String, (String, Source, bool)>,
}

impl Configuration {
    pub fn new() -> Self {
        Self::default()
    }
    /// `--conf-dir DIR`, else `$SPINDLE_CONF_DIR`, else `./conf`.
    pub fn resolve_conf_dir(flag: Option<&Path>) -> PathBuf {
        flag.map(Path::to_path_buf)
            .or_else(|| std::env::var_os("SPINDLE_CONF_DIR").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from("conf"))
    }
    /// Loads every file of [`CONF_FILES`] present in `dir`, in order.
    pub fn load_dir(dir: &Path) -> Result<Self, ConfigError> {
        let _ = dir;
        Ok(Self::new())
    }
    pub fn add_file(&mut self, path: &Path) -> Result<(), ConfigError> {
        let _ = path;
        Ok(())
    }
    /// Parses `xml` as if it were the file `name`.
    pub fn add_str(&mut self, name: &Path, xml: &str) -> Result<(), ConfigError> {
        let _ = (name, xml);
        Ok(())
    }
    /// A programmatic override (flags, tests); source `<set>`, line 0. Ignores `final`.
    pub fn set(&mut self, name: &str, value: &str) {
        self.props.insert(
            name.to_string(),
            (
                value.to_string(),
                Source {
                    file: PathBuf::from("<set>"),
                    line: 0,
                },
                false,
            ),
        );
    }
    pub fn get_raw(&self, name: &str) -> Option<&str> {
        self.props.get(name).map(|p| p.0.as_str())
    }
    pub fn source(&self, name: &str) -> Option<&Source> {
        self.props.get(name).map(|p| &p.1)
    }
    /// The value with `${...}` expanded (not trimmed), or None if unset.
    pub fn get(&self, name: &str) -> Result<Option<String>, ConfigError> {
        Ok(self.get_raw(name).map(str::to_string))
    }
    /// Trimmed, expanded value or `default`.
    pub fn get_string(&self, name: &str, default: &str) -> Result<String, ConfigError> {
        Ok(self
            .get(name)?
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|| default.to_string()))
    }
    pub fn get_i64(&self, name: &str, default: i64) -> Result<i64, ConfigError> {
        Ok(self
            .get(name)?
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(default))
    }
    pub fn get_u64(&self, name: &str, default: u64) -> Result<u64, ConfigError> {
        Ok(self
            .get(name)?
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(default))
    }
    pub fn get_f64(&self, name: &str, default: f64) -> Result<f64, ConfigError> {
        Ok(self
            .get(name)?
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(default))
    }
    pub fn get_bool(&self, name: &str, default: bool) -> Result<bool, ConfigError> {
        Ok(self
            .get(name)?
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(default))
    }
    /// A duration in milliseconds; a bare number is milliseconds; suffixes ms, s, m, h, d.
    pub fn get_duration_ms(&self, name: &str, default_ms: u64) -> Result<u64, ConfigError> {
        self.get_u64(name, default_ms)
    }
    /// A size in bytes; a bare number is bytes; suffixes k, m, g, t (binary, case-insensitive,
    /// optional trailing `b`).
    pub fn get_size_bytes(&self, name: &str, default: u64) -> Result<u64, ConfigError> {
        self.get_u64(name, default)
    }
    /// Comma-separated, trimmed, empty entries dropped; empty when unset.
    pub fn get_strings(&self, name: &str) -> Result<Vec<String>, ConfigError> {
        Ok(self
            .get(name)?
            .map(|v| {
                v.split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default())
    }
    /// Every property name, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.props.keys().map(String::as_str)
    }
}
