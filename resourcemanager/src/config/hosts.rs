//! The include and exclude host files (`yarn.resourcemanager.nodes.include-path`,
//! `...exclude-path`) and the graceful decommission timeout: what `rmadmin -refreshNodes`
//! makes the RM read again. The files are read here, off the core (the core gets the
//! [`HostLists`]); a file that is named but missing or unreadable is an error naming it.
//!
//! The format is Hadoop's `HostsFileReader`'s: plain text, entries separated by white space
//! (one a line, usually), `#` starting a comment to the end of its line; or, for a file whose
//! name ends in `.xml` or whose text starts with `<`, YARN's XML form, where an excluded host
//! may carry its own graceful timeout:
//!
//! ```xml
//! <hosts>
//!   <host><name>host1</name></host>
//!   <host><name>host2:8042</name><timeout>123</timeout></host>
//!   <host><name>host3, host4</name><timeout>-1</timeout></host>
//! </hosts>
//! ```
//!
//! An entry is a host (every NM on it) or `host:port` (one NM).

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
                .map(|(h, _)| h)
                .collect();
        }
        if let Some(p) = &self.exclude_path {
            lists.exclude = read_hosts(p, keys::RM_NODES_EXCLUDE_PATH)?
                .into_iter()
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
    #[error("{path}:{line}: {reason} (property '{key}')")]
    BadXml {
        key: &'static str,
        path: PathBuf,
        line: usize,
        reason: String,
    },
}

/// What is wrong with a host file, and on which line (from 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostsProblem {
    Entry { line: usize, entry: String },
    Xml { line: usize, reason: String },
}

/// A host file's entries, each with its own timeout (XML form only).
fn read_hosts(
    path: &Path,
    key: &'static str,
) -> Result<Vec<(String, Option<i64>)>, HostsFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| HostsFileError::Unreadable {
        key,
        path: path.to_path_buf(),
        source,
    })?;
    let xml = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("xml"))
        || text.trim_start().starts_with('<');
    let parsed = if xml {
        parse_hosts_xml(&text)
    } else {
        parse_hosts(&text)
            .map(|v| v.into_iter().map(|h| (h, None)).collect())
            .map_err(|(line, entry)| HostsProblem::Entry { line, entry })
    };
    parsed.map_err(|p| match p {
        HostsProblem::Entry { line, entry } => HostsFileError::BadEntry {
            key,
            path: path.to_path_buf(),
            line,
            entry,
        },
        HostsProblem::Xml { line, reason } => HostsFileError::BadXml {
            key,
            path: path.to_path_buf(),
            line,
            reason,
        },
    })
}

/// YARN's XML host file: `<hosts><host><name>h1, h2</name><timeout>S</timeout></host>...`.
pub fn parse_hosts_xml(text: &str) -> Result<Vec<(String, Option<i64>)>, HostsProblem> {
    use quick_xml::events::Event;
    // An empty file excludes nothing, whatever its name.
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let line_of = |pos: u64| {
        let end = usize::try_from(pos).unwrap_or(usize::MAX).min(text.len());
        text.as_bytes()[..end]
            .iter()
            .filter(|b| **b == b'\n')
            .count()
            + 1
    };
    let mut reader = quick_xml::Reader::from_str(text);
    reader.config_mut().check_end_names = true;
    let mut out: Vec<(String, Option<i64>)> = Vec::new();
    let mut open: Vec<String> = Vec::new();
    // The <host> being read: its names, timeout and the line it opened on.
    let mut host: Option<(Vec<String>, Option<i64>, usize)> = None;
    let mut saw_hosts = false;
    loop {
        let pos = reader.buffer_position();
        let event = reader.read_event().map_err(|e| HostsProblem::Xml {
            line: line_of(reader.error_position()),
            reason: format!("malformed XML: {e}"),
        })?;
        match event {
            Event::Start(e) => {
                let tag = String::from_utf8_lossy(e.name().as_ref()).into_owned();
                let expected = match open.last().map(String::as_str) {
                    None => "hosts",
                    Some("hosts") => "host",
                    Some("host") if tag == "name" || tag == "timeout" => tag.as_str(),
                    Some(other) => {
                        return Err(HostsProblem::Xml {
                            line: line_of(pos),
                            reason: format!("unexpected <{tag}> inside <{other}>"),
                        })
                    }
                };
                if tag != expected {
                    return Err(HostsProblem::Xml {
                        line: line_of(pos),
                        reason: format!("expected <{expected}>, found <{tag}>"),
                    });
                }
                if tag == "hosts" {
                    saw_hosts = true;
                }
                if tag == "host" {
                    host = Some((Vec::new(), None, line_of(pos)));
                }
                open.push(tag);
            }
            Event::Empty(e) => {
                let tag = String::from_utf8_lossy(e.name().as_ref()).into_owned();
                if open.is_empty() && tag == "hosts" {
                    saw_hosts = true;
                } else if !(open.last().is_some_and(|t| t == "hosts") && tag == "host") {
                    return Err(HostsProblem::Xml {
                        line: line_of(pos),
                        reason: format!("unexpected empty <{tag}/>"),
                    });
                }
            }
            Event::Text(t) => {
                let raw = t.unescape().map_err(|e| HostsProblem::Xml {
                    line: line_of(pos),
                    reason: format!("malformed XML: {e}"),
                })?;
                let value = raw.trim();
                match (open.last().map(String::as_str), host.as_mut()) {
                    (Some("name"), Some(h)) => {
                        for entry in value
                            .split([',', ' ', '\t', '\n'])
                            .filter(|e| !e.is_empty())
                        {
                            if !valid_entry(entry) {
                                return Err(HostsProblem::Entry {
                                    line: line_of(pos),
                                    entry: entry.to_string(),
                                });
                            }
                            h.0.push(entry.to_string());
                        }
                    }
                    (Some("timeout"), Some(h)) => {
                        h.1 = Some(value.parse::<i64>().map_err(|_| HostsProblem::Xml {
                            line: line_of(pos),
                            reason: format!(
                                "<timeout> `{value}` is not a number of seconds (negative: none)"
                            ),
                        })?);
                    }
                    _ if value.is_empty() => {}
                    (place, _) => {
                        return Err(HostsProblem::Xml {
                            line: line_of(pos),
                            reason: format!(
                                "unexpected text `{value}` {}",
                                place
                                    .map_or("outside <hosts>".to_string(), |p| format!("in <{p}>"))
                            ),
                        })
                    }
                }
            }
            Event::End(_) => {
                let closed = open.pop();
                let done = match closed.as_deref() {
                    Some("host") => host.take(),
                    _ => None,
                };
                if let Some((names, timeout, line)) = done {
                    if names.is_empty() {
                        return Err(HostsProblem::Xml {
                            line,
                            reason: "<host> without a <name>".into(),
                        });
                    }
                    for n in names {
                        out.retain(|(e, _)| *e != n);
                        out.push((n, timeout));
                    }
                }
            }
            Event::Eof => break,
            // The declaration, comments, processing instructions.
            _ => {}
        }
    }
    if !saw_hosts {
        return Err(HostsProblem::Xml {
            line: 1,
            reason: "no <hosts> element".into(),
        });
    }
    Ok(out)
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
    fn xml_hosts_like_yarn() {
        let xml = r#"<?xml version="1.0"?>
<!-- decommissioning -->
<hosts>
  <host><name>host1</name></host>
  <host><name>host2:8042</name><timeout>123</timeout></host>
  <host><name>host3, host4,host5</name><timeout>-1</timeout></host>
</hosts>
"#;
        assert_eq!(
            parse_hosts_xml(xml),
            Ok(vec![
                ("host1".to_string(), None),
                ("host2:8042".to_string(), Some(123)),
                ("host3".to_string(), Some(-1)),
                ("host4".to_string(), Some(-1)),
                ("host5".to_string(), Some(-1)),
            ])
        );
        assert_eq!(parse_hosts_xml("<hosts></hosts>"), Ok(vec![]));
        assert_eq!(parse_hosts_xml(" \n"), Ok(vec![]));
        let bad = |x: &str| parse_hosts_xml(x).expect_err(x);
        assert_eq!(parse_hosts_xml("<hosts/>"), Ok(vec![]));
        assert!(
            matches!(bad("<!-- none -->"), HostsProblem::Xml { line: 1, ref reason } if reason.contains("no <hosts>"))
        );
        assert!(matches!(
            bad("<hosts>
        <host><name>h1</name><timeout>soon</timeout></host></hosts>"),
            HostsProblem::Xml { line: 2, ref reason } if reason.contains("`soon`")
        ));
        assert!(matches!(
            bad("<hosts>

<host><name>a/b</name></host></hosts>"),
            HostsProblem::Entry { line: 3, ref entry } if entry == "a/b"
        ));
        assert!(matches!(
            bad("<hosts>
        <host><timeout>1</timeout></host></hosts>"),
            HostsProblem::Xml { line: 2, ref reason } if reason.contains("without a <name>")
        ));
        assert!(matches!(
            bad("<hosts><node>x</node></hosts>"),
            HostsProblem::Xml { .. }
        ));
        assert!(matches!(
            bad("<hosts>
<host><name>h1</name>
</hosts>"),
            HostsProblem::Xml { line: 3, ref reason } if reason.contains("malformed")
        ));
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
        // The XML form, with a per-host timeout; its errors name the file and line too.
        std::fs::write(
            &missing,
            "<hosts>\n  <host><name>h1</name><timeout>60</timeout></host>\n</hosts>\n",
        )
        .expect("write");
        let lists = c.read().expect("reads xml");
        assert_eq!(lists.exclude.get("h1"), Some(&Some(60)));
        std::fs::write(&missing, "<hosts>\n  <host><name>h1</name></hots>\n").expect("write");
        let e = c.read().expect_err("bad xml");
        assert!(matches!(e, HostsFileError::BadXml { line: 2, .. }), "{e}");
        assert!(
            e.to_string().contains(&format!("{}:2:", missing.display())),
            "{e}"
        );
    }
}
