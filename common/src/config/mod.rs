//! Hadoop XML configuration: `<configuration><property><name/><value/><final/></property>`.
//!
//! This is the *raw* layer of Spindle's configuration: named string properties, layered from
//! several files the way Hadoop's `org.apache.hadoop.conf.Configuration` layers resources,
//! with `${...}` expansion on read and typed getters whose errors name the file, the line
//! and the property. The typed, validated layer (queues, resource types, ...) lives in the
//! crates that own those ideas and is built from this one.
//!
//! Rules (see `docs/configuration.md` for the operator's view):
//! - files are read in [`CONF_FILES`] order; a later definition replaces an earlier one
//!   unless the earlier one was marked `<final>true</final>`, in which case the later one is
//!   ignored and [`Configuration::source`] keeps naming the final definition;
//! - values are stored verbatim and expanded by [`Configuration::get`]: `${name}`,
//!   `${env.NAME}`, `${env.NAME:-default}`, `${env.NAME-default}`; at most [`MAX_SUBST`]
//!   nested references; unresolvable references stay verbatim; cycles are an error;
//! - typed getters trim the value and report a bad one as [`ConfigError::BadValue`].
//!
//! Nothing here panics on input from a file, and no DTD or external entity is ever fetched.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

mod expand;
pub mod keys;
pub mod known;
pub mod value;
mod xml;

#[cfg(test)]
mod tests;

/// The files read from a configuration directory, in load order. Each is optional.
pub const CONF_FILES: &[&str] = &[
    "yarn-site.xml",
    "capacity-scheduler.xml",
    "resource-types.xml",
    "node-resources.xml",
];

/// Hadoop's `MAX_SUBST`: how deep `${...}` references may nest (and how many re-scans of a
/// value are made) before expansion gives up with [`ConfigError::Expansion`].
pub const MAX_SUBST: usize = 20;

/// Longest value expansion may produce. A few properties that each reference the previous
/// one twice would otherwise grow a value exponentially (a "billion laughs" in a config
/// file); past this size expansion fails instead of exhausting memory.
pub const MAX_EXPANDED_LEN: usize = 1 << 20;

/// The file name that [`Configuration::set`] records: a value given on the command line
/// (`-D name=value`) or by the program, not read from any file.
pub const COMMANDLINE_SOURCE: &str = "-D";

/// The file name reported when a built-in default (a `keys::DEFAULT_*` string) fails to
/// expand.
pub const DEFAULT_SOURCE: &str = "<default>";

/// Where a property was defined. `line` is 1-based; 0 means "not from a file" (see
/// [`COMMANDLINE_SOURCE`]) and is left out of the `Display` form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub file: PathBuf,
    pub line: u32,
}

impl Source {
    /// The source of a programmatic or command-line override (`-D`, line 0).
    pub fn commandline() -> Self {
        Source {
            file: PathBuf::from(COMMANDLINE_SOURCE),
            line: 0,
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Location(&self.file, self.line).fmt(f)
    }
}

/// `file:line`, or just `file` when the line is 0 (a value that came from no file).
struct Location<'a>(&'a Path, u32);

impl fmt::Display for Location<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.1 == 0 {
            write!(f, "{}", self.0.display())
        } else {
            write!(f, "{}:{}", self.0.display(), self.1)
        }
    }
}

/// Shows text from a file inside a one-line error message: control characters (a newline
/// in a multi-line `<value>`) are escaped, and very long text is cut, so that `error: {e}`
/// stays one line an operator can read.
struct OneLine<'a>(&'a str);

impl fmt::Display for OneLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const MAX_CHARS: usize = 200;
        for (i, c) in self.0.chars().enumerate() {
            if i == MAX_CHARS {
                return f.write_str("...");
            }
            if c.is_control() {
                write!(f, "{}", c.escape_default())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

/// Every way reading configuration can fail. The `Display` form is always one line that
/// starts with the place (`file:line`, or `file` when there is no line) so that daemons can
/// print `error: {e}` and an operator can go straight to the offending line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The file is not well-formed XML, or not a Hadoop configuration document.
    #[error("{}: {}", Location(file, *line), OneLine(message))]
    Xml {
        file: PathBuf,
        line: u32,
        message: String,
    },
    /// A property's value does not have the type the reader asked for.
    #[error("{}: property '{}': expected {expected}, got '{}'", Location(file, *line), OneLine(name), OneLine(value))]
    BadValue {
        file: PathBuf,
        line: u32,
        name: String,
        expected: String,
        value: String,
    },
    /// A file or directory could not be read at all.
    #[error("{}: {}", file.display(), OneLine(message))]
    Io { file: PathBuf, message: String },
    /// `${...}` expansion of a property's value failed (a reference cycle, references nested
    /// deeper than [`MAX_SUBST`], or a result longer than [`MAX_EXPANDED_LEN`]). The place
    /// is where the property being read was defined.
    #[error("{}: property '{}': {}", Location(file, *line), OneLine(name), OneLine(message))]
    Expansion {
        file: PathBuf,
        line: u32,
        name: String,
        message: String,
    },
}

/// One stored definition.
#[derive(Debug, Clone)]
struct Property {
    /// Verbatim (not trimmed, not expanded), as Hadoop stores it.
    value: String,
    source: Source,
    is_final: bool,
}

/// A layered set of Hadoop-style properties. Cheap to clone; holds no open files.
#[derive(Debug, Clone, Default)]
pub struct Configuration {
    props: BTreeMap<String, Property>,
    /// `Some`: `${env.*}` and the built-ins derived from the environment are resolved from
    /// this map instead of the process environment (tests, embedding).
    env: Option<BTreeMap<String, String>>,
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

    /// Loads every file of [`CONF_FILES`] present in `dir`, in order. A missing file is
    /// skipped (each is optional); a missing directory is an error, because a daemon started
    /// with a mistyped `--conf-dir` must not silently run on built-in defaults.
    pub fn load_dir(dir: &Path) -> Result<Self, ConfigError> {
        let io = |message: String| ConfigError::Io {
            file: dir.to_path_buf(),
            message,
        };
        match std::fs::metadata(dir) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return Err(io("not a directory".to_string())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(io(
                    "configuration directory not found (set --conf-dir or SPINDLE_CONF_DIR)"
                        .to_string(),
                ))
            }
            Err(e) => return Err(io(format!("cannot read configuration directory: {e}"))),
        }
        let mut conf = Self::new();
        for name in CONF_FILES {
            let path = dir.join(name);
            match std::fs::symlink_metadata(&path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                _ => conf.add_file(&path)?,
            }
        }
        Ok(conf)
    }

    /// Adds one more resource (a file), after those already loaded. The file is parsed
    /// completely before anything is applied, so a broken file changes nothing.
    pub fn add_file(&mut self, path: &Path) -> Result<(), ConfigError> {
        let bytes = std::fs::read(path).map_err(|e| ConfigError::Io {
            file: path.to_path_buf(),
            message: match e.kind() {
                std::io::ErrorKind::NotFound => "file not found".to_string(),
                _ => format!("cannot read: {e}"),
            },
        })?;
        self.add_bytes(path, &bytes)
    }

    /// Parses `bytes` (a file's content, which must be UTF-8, optionally with a byte-order
    /// mark) as if it were the file `name`. For XML that arrives other than as a file, such as
    /// a request body.
    pub fn add_bytes(&mut self, name: &Path, bytes: &[u8]) -> Result<(), ConfigError> {
        let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        match std::str::from_utf8(bytes) {
            Ok(text) => self.add_str(name, text),
            Err(e) => {
                let valid = &bytes[..e.valid_up_to()];
                let line = 1 + valid.iter().filter(|&&b| b == b'\n').count();
                Err(ConfigError::Xml {
                    file: name.to_path_buf(),
                    line: u32::try_from(line).unwrap_or(u32::MAX),
                    message: format!(
                        "not valid UTF-8 (byte {}); configuration files must be UTF-8",
                        e.valid_up_to()
                    ),
                })
            }
        }
    }

    /// Parses `xml` as if it were the file `name`. All or nothing: on error nothing is added.
    pub fn add_str(&mut self, name: &Path, xml: &str) -> Result<(), ConfigError> {
        for p in xml::parse(name, xml)? {
            self.define(
                p.name,
                p.value,
                Source {
                    file: name.to_path_buf(),
                    line: p.line,
                },
                p.is_final,
            );
        }
        Ok(())
    }

    /// Applies one definition from a file with Hadoop's `final` rule: a final property keeps
    /// its first definition and later ones are dropped without a word (Hadoop only logs).
    fn define(&mut self, name: String, value: String, source: Source, is_final: bool) {
        if self.props.get(&name).is_some_and(|p| p.is_final) {
            return;
        }
        self.props.insert(
            name,
            Property {
                value,
                source,
                is_final,
            },
        );
    }

    /// A programmatic override (`-D name=value` flags, tests). Recorded with source `-D`
    /// (line 0), so an error about it reads `-D: property 'x': ...`. Ignores `final`, like
    /// Hadoop's `Configuration.set`: the command line is the operator's last word. A final
    /// property stays final against files added later.
    pub fn set(&mut self, name: &str, value: &str) {
        let is_final = self.props.get(name).is_some_and(|p| p.is_final);
        self.props.insert(
            name.to_string(),
            Property {
                value: value.to_string(),
                source: Source::commandline(),
                is_final,
            },
        );
    }

    /// Resolves `${env.*}` (and `user.name` / `user.home` when taken from `$USER` / `$HOME`)
    /// from `vars` instead of the process environment, so tests and embedders get
    /// deterministic expansion without touching the process-wide environment.
    pub fn with_env<K, V>(mut self, vars: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: Into<String>,
        V: Into<String>,
    {
        self.env = Some(
            vars.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        );
        self
    }

    /// The stored value, verbatim: not trimmed, `${...}` not expanded.
    pub fn get_raw(&self, name: &str) -> Option<&str> {
        self.props.get(name).map(|p| p.value.as_str())
    }

    /// Where the value in effect was defined.
    pub fn source(&self, name: &str) -> Option<&Source> {
        self.props.get(name).map(|p| &p.source)
    }

    /// Whether the value in effect was marked `<final>true</final>`.
    pub fn is_final(&self, name: &str) -> bool {
        self.props.get(name).is_some_and(|p| p.is_final)
    }

    /// The value with `${...}` expanded (not trimmed), or None if unset. References to
    /// unset properties fall back to the built-in defaults of [`keys::DEFAULTS`], as they
    /// would in Hadoop where the `*-default.xml` files are loaded first.
    pub fn get(&self, name: &str) -> Result<Option<String>, ConfigError> {
        let Some(p) = self.props.get(name) else {
            return Ok(None);
        };
        self.expand(name, &p.value)
            .map(Some)
            .map_err(|message| ConfigError::Expansion {
                file: p.source.file.clone(),
                line: p.source.line,
                name: name.to_string(),
                message,
            })
    }

    /// Trimmed, expanded value or `default` (also expanded, so a default such as
    /// `${hadoop.tmp.dir}/x` works as it does in Hadoop).
    pub fn get_string(&self, name: &str, default: &str) -> Result<String, ConfigError> {
        match self.get(name)? {
            Some(v) => Ok(v.trim().to_string()),
            None => self
                .expand(name, default)
                .map(|v| v.trim().to_string())
                .map_err(|message| ConfigError::Expansion {
                    file: PathBuf::from(DEFAULT_SOURCE),
                    line: 0,
                    name: name.to_string(),
                    message,
                }),
        }
    }

    /// Trimmed, expanded value; None when unset *or blank*. For "empty means: work it out"
    /// properties such as `spindle.nodemanager.rm-address`.
    pub fn get_nonempty(&self, name: &str) -> Result<Option<String>, ConfigError> {
        Ok(self
            .get(name)?
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty()))
    }

    /// Runs `parse` on the trimmed, expanded value; a `None` from it becomes
    /// [`ConfigError::BadValue`] saying `expected`.
    fn typed<T>(
        &self,
        name: &str,
        default: T,
        expected: &str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Result<T, ConfigError> {
        let Some(v) = self.get(name)? else {
            return Ok(default);
        };
        let v = v.trim();
        parse(v).ok_or_else(|| {
            let (file, line) = self
                .source(name)
                .map(|s| (s.file.clone(), s.line))
                .unwrap_or_default();
            ConfigError::BadValue {
                file,
                line,
                name: name.to_string(),
                expected: expected.to_string(),
                value: v.to_string(),
            }
        })
    }

    /// A decimal (or `0x` hexadecimal, as Hadoop's `getLong` accepts) integer.
    pub fn get_i64(&self, name: &str, default: i64) -> Result<i64, ConfigError> {
        self.typed(name, default, value::EXPECTED_INTEGER, |v| {
            value::parse_integer(v).and_then(|n| i64::try_from(n).ok())
        })
    }

    /// Like [`Self::get_i64`], for `i32`-sized settings.
    pub fn get_i32(&self, name: &str, default: i32) -> Result<i32, ConfigError> {
        self.typed(
            name,
            default,
            "an integer from -2147483648 to 2147483647",
            |v| value::parse_integer(v).and_then(|n| i32::try_from(n).ok()),
        )
    }

    /// A non-negative integer (counts, sizes in MB, intervals).
    pub fn get_u64(&self, name: &str, default: u64) -> Result<u64, ConfigError> {
        self.typed(name, default, "a non-negative integer", |v| {
            value::parse_integer(v).and_then(|n| u64::try_from(n).ok())
        })
    }

    /// Like [`Self::get_u64`], for `u32`-sized settings.
    pub fn get_u32(&self, name: &str, default: u32) -> Result<u32, ConfigError> {
        self.typed(name, default, "an integer from 0 to 4294967295", |v| {
            value::parse_integer(v).and_then(|n| u32::try_from(n).ok())
        })
    }

    /// A port number or other `u16` setting.
    pub fn get_u16(&self, name: &str, default: u16) -> Result<u16, ConfigError> {
        self.typed(name, default, "an integer from 0 to 65535", |v| {
            value::parse_integer(v).and_then(|n| u16::try_from(n).ok())
        })
    }

    /// A finite decimal number (`12.5`, `1e3`); NaN and infinities are refused.
    pub fn get_f64(&self, name: &str, default: f64) -> Result<f64, ConfigError> {
        self.typed(name, default, "a number", value::parse_f64)
    }

    /// `true` or `false`, case-insensitively; nothing else (Hadoop also refuses `yes`/`1`).
    pub fn get_bool(&self, name: &str, default: bool) -> Result<bool, ConfigError> {
        self.typed(name, default, value::EXPECTED_BOOL, value::parse_bool)
    }

    /// A duration in milliseconds; a bare number is milliseconds; suffixes ns, us, ms, s, m,
    /// h, d (case-insensitive, integers only; ns and us round down).
    pub fn get_duration_ms(&self, name: &str, default_ms: u64) -> Result<u64, ConfigError> {
        self.typed(
            name,
            default_ms,
            value::EXPECTED_DURATION,
            value::parse_duration_ms,
        )
    }

    /// A size in bytes; a bare number is bytes; suffixes k, m, g, t, p (binary,
    /// case-insensitive, optional trailing `b`).
    pub fn get_size_bytes(&self, name: &str, default: u64) -> Result<u64, ConfigError> {
        self.typed(name, default, value::EXPECTED_SIZE, value::parse_size_bytes)
    }

    /// Comma-separated, trimmed, empty entries dropped; empty when unset.
    pub fn get_strings(&self, name: &str) -> Result<Vec<String>, ConfigError> {
        Ok(self
            .get(name)?
            .map(|v| value::split_list(&v))
            .unwrap_or_default())
    }

    /// Every property name, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.props.keys().map(String::as_str)
    }

    /// The names that start with `prefix` (for example [`keys::CAPACITY_SCHEDULER_PREFIX`]),
    /// sorted.
    pub fn names_with_prefix<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.props
            .range::<str, _>((
                std::ops::Bound::Included(prefix),
                std::ops::Bound::Unbounded,
            ))
            .map(|(k, _)| k.as_str())
            .take_while(move |k| k.starts_with(prefix))
    }
}

impl Configuration {
    /// The keys defined here that Spindle does not know (see [`known`]): each with where it
    /// was defined and the closest known key, in file and line order. Keys of other Hadoop
    /// components and of YARN features Spindle does not implement are not listed. The
    /// daemons log these as warnings at start and on `refreshQueues`.
    pub fn unknown_keys(&self) -> Vec<known::UnknownKey> {
        let mut out: Vec<known::UnknownKey> = self
            .props
            .iter()
            .filter_map(|(name, p)| match known::key_status(name) {
                known::KeyStatus::Unknown { suggestion } => Some(known::UnknownKey {
                    name: name.clone(),
                    source: p.source.clone(),
                    suggestion,
                }),
                known::KeyStatus::Known | known::KeyStatus::Ignored => None,
            })
            .collect();
        out.sort_by(|a, b| {
            (&a.source.file, a.source.line, &a.name).cmp(&(&b.source.file, b.source.line, &b.name))
        });
        out
    }
}
