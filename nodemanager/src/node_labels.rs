//! What this node says it is: its partition (node label) and its own `nm.yarn.io/`
//! attributes, under YARN's *distributed* node label and attribute configuration.
//!
//! Each has a provider (`yarn.nodemanager.node-labels.provider`,
//! `yarn.nodemanager.node-attributes.provider`):
//! - none (unset): the NM reports no label (`nodeLabels` absent) and only the attributes
//!   device discovery derives (`nm.yarn.io/gpu-*`);
//! - `config`: a fixed partition (`...configured-node-partition`, empty is the default
//!   partition) or fixed attributes (`...configured-node-attributes`,
//!   `name,STRING,value:name2,STRING,value2`), read once at NM start;
//! - `script`: an executable run every `...fetch-interval-ms` (the first run before the NM
//!   registers), killed with its whole process group after `...fetch-timeout-ms`. Its standard
//!   output is read line by line: `NODE_PARTITION:<label>` (the last such line wins; none
//!   means the default partition) or `NODE_ATTRIBUTE:name,STRING,value`; other lines are
//!   ignored. A run that fails, times out or prints a bad line keeps the previous value and
//!   logs a warning naming the script.
//!
//! Attribute names without a prefix get `nm.yarn.io/`; any other prefix (`rm.yarn.io/` is the
//! RM's own) is refused, as is a type other than `STRING` (YARN's only attribute type).
//!
//! This module owns the parsing (pure functions) and the background fetches; the
//! [`crate::status_updater`] decides when the RM hears of a change. It must not talk to the RM.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tracing::{info, warn};

use crate::plugins::exec::{self, ExecError};

/// The prefix of every attribute a NodeManager may set.
pub const NM_ATTRIBUTE_PREFIX: &str = "nm.yarn.io/";
/// The line a label script prints to name the node's partition.
pub const PARTITION_LINE: &str = "NODE_PARTITION:";
/// The line an attribute script prints per attribute.
pub const ATTRIBUTE_LINE: &str = "NODE_ATTRIBUTE:";
/// YARN's only node attribute type.
pub const STRING_TYPE: &str = "STRING";
/// The longest label, attribute name or attribute value YARN accepts.
const MAX_LEN: usize = 255;

/// Why a partition or an attribute was refused. One variant per rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeLabelError {
    #[error("'{0}' is not a node label: it must start with a letter or digit and hold only letters, digits, '-' and '_' (at most 255)")]
    BadPartition(String),
    #[error("'{0}' names more than one partition; a node is in exactly one")]
    MoreThanOnePartition(String),
    #[error("'{0}' is not an attribute as name,type,value")]
    BadAttributeTriple(String),
    #[error("attribute '{name}' has type '{kind}'; the only attribute type is STRING")]
    UnsupportedAttributeType { name: String, kind: String },
    #[error("attribute '{name}' has the prefix '{prefix}'; a NodeManager may only set nm.yarn.io/ attributes")]
    ForeignPrefix { name: String, prefix: String },
    #[error("'{0}' is not an attribute name: it must start with a letter or digit and hold only letters, digits, '-' and '_' (at most 255)")]
    BadAttributeName(String),
    #[error("attribute '{name}' has the value '{value}': a value must start with a letter or digit and hold only letters, digits, '-', '_' and '.' (at most 255)")]
    BadAttributeValue { name: String, value: String },
    #[error("attribute '{0}' is given more than once")]
    DuplicateAttribute(String),
}

/// Why one run of a provider script produced nothing usable.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error(transparent)]
    Exec(#[from] ExecError),
    #[error("{path} ended with {status}: {stderr}")]
    Failed {
        path: PathBuf,
        status: String,
        stderr: String,
    },
    #[error("{path} printed a bad line: {source}")]
    Output {
        path: PathBuf,
        source: NodeLabelError,
    },
}

// ---- parsing (pure) ---------------------------------------------------------------------

fn valid_name(s: &str, extra: &[char]) -> bool {
    let mut chars = s.chars();
    s.len() <= MAX_LEN
        && matches!(chars.next(), Some(c) if c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || extra.contains(&c))
}

/// One partition: `""` (trimmed empty) is the default partition; a comma list is refused.
pub fn parse_partition(raw: &str) -> Result<String, NodeLabelError> {
    let label = raw.trim();
    if label.contains(',') {
        return Err(NodeLabelError::MoreThanOnePartition(label.to_string()));
    }
    if label.is_empty() {
        return Ok(String::new());
    }
    if !valid_name(label, &[]) {
        return Err(NodeLabelError::BadPartition(label.to_string()));
    }
    Ok(label.to_string())
}

/// One `name,type,value` triple, as `(nm.yarn.io/name, value)`.
pub fn parse_attribute(triple: &str) -> Result<(String, String), NodeLabelError> {
    let parts: Vec<&str> = triple.split(',').map(str::trim).collect();
    let [name, kind, value] = parts[..] else {
        return Err(NodeLabelError::BadAttributeTriple(
            triple.trim().to_string(),
        ));
    };
    let local = match name.rsplit_once('/') {
        Some((prefix, local)) => {
            let prefix = format!("{prefix}/");
            if prefix != NM_ATTRIBUTE_PREFIX {
                return Err(NodeLabelError::ForeignPrefix {
                    name: name.to_string(),
                    prefix,
                });
            }
            local
        }
        None => name,
    };
    if !valid_name(local, &[]) {
        return Err(NodeLabelError::BadAttributeName(name.to_string()));
    }
    let full = format!("{NM_ATTRIBUTE_PREFIX}{local}");
    if kind != STRING_TYPE {
        return Err(NodeLabelError::UnsupportedAttributeType {
            name: full,
            kind: kind.to_string(),
        });
    }
    if !value.is_empty() && !valid_name(value, &['.']) {
        return Err(NodeLabelError::BadAttributeValue {
            name: full,
            value: value.to_string(),
        });
    }
    Ok((full, value.to_string()))
}

fn insert_attribute(
    map: &mut BTreeMap<String, String>,
    triple: &str,
) -> Result<(), NodeLabelError> {
    let (name, value) = parse_attribute(triple)?;
    if map.contains_key(&name) {
        return Err(NodeLabelError::DuplicateAttribute(name));
    }
    map.insert(name, value);
    Ok(())
}

/// `yarn.nodemanager.node-attributes.provider.configured-node-attributes`:
/// `name,STRING,value:name2,STRING,value2`; empty items are skipped.
pub fn parse_configured_attributes(raw: &str) -> Result<BTreeMap<String, String>, NodeLabelError> {
    let mut map = BTreeMap::new();
    for item in raw.split(':').map(str::trim).filter(|i| !i.is_empty()) {
        insert_attribute(&mut map, item)?;
    }
    Ok(map)
}

/// A label script's output: the last `NODE_PARTITION:` line wins; none is the default
/// partition (`""`). Other lines are ignored.
pub fn parse_partition_output(text: &str) -> Result<String, NodeLabelError> {
    match text
        .lines()
        .filter_map(|l| l.trim().strip_prefix(PARTITION_LINE))
        .next_back()
    {
        Some(label) => parse_partition(label),
        None => Ok(String::new()),
    }
}

/// An attribute script's output: every `NODE_ATTRIBUTE:name,type,value` line. Other lines
/// are ignored; one bad attribute line refuses the whole output.
pub fn parse_attribute_output(text: &str) -> Result<BTreeMap<String, String>, NodeLabelError> {
    let mut map = BTreeMap::new();
    for triple in text
        .lines()
        .filter_map(|l| l.trim().strip_prefix(ATTRIBUTE_LINE))
    {
        insert_attribute(&mut map, triple)?;
    }
    Ok(map)
}

// ---- configuration ----------------------------------------------------------------------

/// A provider script and when it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptSpec {
    pub path: PathBuf,
    pub opts: Vec<String>,
    /// How often it runs (`...fetch-interval-ms`).
    pub interval: Duration,
    /// How long one run may take before its process group is killed (`...fetch-timeout-ms`).
    pub timeout: Duration,
}

/// Where a value comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Provider<T> {
    /// Fixed in the configuration.
    Config(T),
    /// Printed by a script.
    Script(ScriptSpec),
}

/// The label and attribute providers; None: not provided.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodeLabelsConfig {
    /// The partition (`""`: the default partition).
    pub partition: Option<Provider<String>>,
    /// `nm.yarn.io/` attributes, names already prefixed.
    pub attributes: Option<Provider<BTreeMap<String, String>>>,
}

// ---- the running providers --------------------------------------------------------------

/// What the providers say now.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodeDescriptor {
    /// None: no label provider. `Some("")`: the default partition.
    pub partition: Option<String>,
    /// The providers' attributes (not the device-derived ones).
    pub attributes: BTreeMap<String, String>,
}

impl NodeDescriptor {
    /// The wire form of the partition: `[label]`, `[]` for the default partition, None when
    /// labels are not provided.
    pub fn labels(&self) -> Option<Vec<String>> {
        self.partition.as_ref().map(|p| {
            if p.is_empty() {
                Vec::new()
            } else {
                vec![p.clone()]
            }
        })
    }
}

#[derive(Debug, Clone, Default)]
struct Shared {
    descriptor: NodeDescriptor,
    /// Scripts whose first run has not ended yet.
    first_runs_left: u8,
}

/// The status updater's view of the providers.
#[derive(Debug, Clone)]
pub struct NodeDescriptorView(watch::Receiver<Shared>);

impl Default for NodeDescriptorView {
    /// No providers: no label, no attributes.
    fn default() -> Self {
        Self(watch::channel(Shared::default()).1)
    }
}

impl NodeDescriptorView {
    /// What the providers say now.
    pub fn current(&self) -> NodeDescriptor {
        self.0.borrow().descriptor.clone()
    }

    /// Waits until every script has run once (at once without scripts).
    pub async fn ready(&mut self) {
        let _ = self.0.wait_for(|s| s.first_runs_left == 0).await;
    }
}

/// Starts the providers: the fixed values at once, a task per script. A change wakes the
/// status updater (`wake`). The tasks end when `stopping` turns true.
pub fn spawn(
    conf: NodeLabelsConfig,
    wake: Arc<Notify>,
    stopping: watch::Receiver<bool>,
) -> NodeDescriptorView {
    let mut shared = Shared::default();
    let mut partition_script = None;
    let mut attribute_script = None;
    match conf.partition {
        None => {}
        Some(Provider::Config(p)) => shared.descriptor.partition = Some(p),
        Some(Provider::Script(s)) => {
            shared.descriptor.partition = Some(String::new());
            shared.first_runs_left += 1;
            partition_script = Some(s);
        }
    }
    match conf.attributes {
        None => {}
        Some(Provider::Config(a)) => shared.descriptor.attributes = a,
        Some(Provider::Script(s)) => {
            shared.first_runs_left += 1;
            attribute_script = Some(s);
        }
    }
    let (tx, rx) = watch::channel(shared);
    let tx = Arc::new(tx);
    if let Some(spec) = partition_script {
        tokio::spawn(fetch_loop(
            spec,
            Arc::clone(&tx),
            Arc::clone(&wake),
            stopping.clone(),
            "node label",
            parse_partition_output,
            |d, p| replace(&mut d.partition, Some(p)),
        ));
    }
    if let Some(spec) = attribute_script {
        tokio::spawn(fetch_loop(
            spec,
            tx,
            wake,
            stopping,
            "node attribute",
            parse_attribute_output,
            |d, a| replace(&mut d.attributes, a),
        ));
    }
    NodeDescriptorView(rx)
}

/// Sets `slot` to `value`; true when it changed.
fn replace<T: PartialEq>(slot: &mut T, value: T) -> bool {
    if *slot == value {
        return false;
    }
    *slot = value;
    true
}

async fn fetch_loop<T: std::fmt::Debug>(
    spec: ScriptSpec,
    tx: Arc<watch::Sender<Shared>>,
    wake: Arc<Notify>,
    mut stopping: watch::Receiver<bool>,
    what: &'static str,
    parse: impl Fn(&str) -> Result<T, NodeLabelError>,
    apply: impl Fn(&mut NodeDescriptor, T) -> bool,
) {
    let mut due = tokio::time::interval(spec.interval);
    due.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut first = true;
    loop {
        tokio::select! {
            _ = due.tick() => {}
            _ = crate::manager::until_stopped(&mut stopping) => return,
        }
        let fetched = tokio::select! {
            r = fetch(&spec, &parse) => r,
            _ = crate::manager::until_stopped(&mut stopping) => return,
        };
        let changed = tx.send_if_modified(|s| {
            let changed = match fetched {
                Ok(v) => {
                    let new = format!("{v:?}");
                    let changed = apply(&mut s.descriptor, v);
                    if changed {
                        info!(script = %spec.path.display(), value = %new,
                            "the {what} script reports a new value");
                    }
                    changed
                }
                Err(ref e) => {
                    warn!(script = %spec.path.display(), error = %e,
                        "the {what} script failed; keeping the previous value");
                    false
                }
            };
            if first {
                s.first_runs_left = s.first_runs_left.saturating_sub(1);
                return true;
            }
            changed
        });
        first = false;
        if changed {
            wake.notify_one();
        }
    }
}

/// One run of a provider script, parsed.
async fn fetch<T>(
    spec: &ScriptSpec,
    parse: &impl Fn(&str) -> Result<T, NodeLabelError>,
) -> Result<T, FetchError> {
    let args: Vec<&str> = spec.opts.iter().map(String::as_str).collect();
    let out = exec::run(&spec.path, &args, spec.timeout).await?;
    if !out.status.success() {
        return Err(FetchError::Failed {
            path: spec.path.clone(),
            status: out.describe_status(),
            stderr: out.stderr_line(),
        });
    }
    parse(&String::from_utf8_lossy(&out.stdout)).map_err(|source| FetchError::Output {
        path: spec.path.clone(),
        source,
    })
}

/// True if `p` can be run as a provider script (a file with an execute bit).
pub fn is_script(p: &Path) -> bool {
    exec::is_executable(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn partitions() {
        assert_eq!(parse_partition("gpu").unwrap(), "gpu");
        assert_eq!(parse_partition("  x86_64-a ").unwrap(), "x86_64-a");
        assert_eq!(parse_partition("").unwrap(), "");
        assert_eq!(parse_partition("   ").unwrap(), "");
        assert_eq!(
            parse_partition("a,b"),
            Err(NodeLabelError::MoreThanOnePartition("a,b".into()))
        );
        for bad in ["-gpu", "g p u", "gpu.large", "label/x", &"a".repeat(256)] {
            assert_eq!(
                parse_partition(bad),
                Err(NodeLabelError::BadPartition(bad.into())),
                "{bad}"
            );
        }
    }

    #[test]
    fn attribute_triples() {
        assert_eq!(
            parse_attribute("os,STRING,ubuntu22.04").unwrap(),
            ("nm.yarn.io/os".into(), "ubuntu22.04".into())
        );
        assert_eq!(
            parse_attribute(" nm.yarn.io/rack-pos , STRING , 3 ").unwrap(),
            ("nm.yarn.io/rack-pos".into(), "3".into())
        );
        assert_eq!(
            parse_attribute("empty,STRING,").unwrap(),
            ("nm.yarn.io/empty".into(), String::new())
        );
        assert_eq!(
            parse_attribute("rm.yarn.io/os,STRING,x"),
            Err(NodeLabelError::ForeignPrefix {
                name: "rm.yarn.io/os".into(),
                prefix: "rm.yarn.io/".into()
            })
        );
        assert!(matches!(
            parse_attribute("example.com/os,STRING,x"),
            Err(NodeLabelError::ForeignPrefix { .. })
        ));
        assert_eq!(
            parse_attribute("os,INT,3"),
            Err(NodeLabelError::UnsupportedAttributeType {
                name: "nm.yarn.io/os".into(),
                kind: "INT".into()
            })
        );
        for bad in ["os", "os,STRING", "os,STRING,a,b", ""] {
            assert!(
                matches!(
                    parse_attribute(bad),
                    Err(NodeLabelError::BadAttributeTriple(_))
                ),
                "{bad}"
            );
        }
        assert!(matches!(
            parse_attribute("-os,STRING,x"),
            Err(NodeLabelError::BadAttributeName(_))
        ));
        assert!(matches!(
            parse_attribute("nm.yarn.io/,STRING,x"),
            Err(NodeLabelError::BadAttributeName(_))
        ));
        assert!(matches!(
            parse_attribute("os,STRING,has space"),
            Err(NodeLabelError::BadAttributeValue { .. })
        ));
    }

    #[test]
    fn configured_attributes() {
        assert_eq!(
            parse_configured_attributes("os,STRING,ubuntu:nm.yarn.io/zone,STRING,z1:").unwrap(),
            attrs(&[("nm.yarn.io/os", "ubuntu"), ("nm.yarn.io/zone", "z1")])
        );
        assert_eq!(parse_configured_attributes("").unwrap(), BTreeMap::new());
        assert_eq!(
            parse_configured_attributes("os,STRING,a:nm.yarn.io/os,STRING,b"),
            Err(NodeLabelError::DuplicateAttribute("nm.yarn.io/os".into()))
        );
        assert!(matches!(
            parse_configured_attributes("os,STRING,a:bad"),
            Err(NodeLabelError::BadAttributeTriple(_))
        ));
    }

    #[test]
    fn partition_output() {
        let text =
            "checking...\nNODE_PARTITION:cpu\nnoise NODE_PARTITION:x\n  NODE_PARTITION:gpu  \n";
        assert_eq!(parse_partition_output(text).unwrap(), "gpu");
        assert_eq!(parse_partition_output("nothing here\n").unwrap(), "");
        assert_eq!(parse_partition_output("NODE_PARTITION:").unwrap(), "");
        assert_eq!(
            parse_partition_output("NODE_PARTITION:a,b"),
            Err(NodeLabelError::MoreThanOnePartition("a,b".into()))
        );
        // Only the winner is checked.
        assert_eq!(
            parse_partition_output("NODE_PARTITION:bad label\nNODE_PARTITION:ok").unwrap(),
            "ok"
        );
    }

    #[test]
    fn attribute_output() {
        let text = "hello\nNODE_ATTRIBUTE:os,STRING,centos7\nNODE_ATTRIBUTE:nm.yarn.io/ib,STRING,hdr\nNODE_PARTITION:x\n";
        assert_eq!(
            parse_attribute_output(text).unwrap(),
            attrs(&[("nm.yarn.io/ib", "hdr"), ("nm.yarn.io/os", "centos7")])
        );
        assert_eq!(parse_attribute_output("").unwrap(), BTreeMap::new());
        assert!(matches!(
            parse_attribute_output("NODE_ATTRIBUTE:rm.yarn.io/os,STRING,x"),
            Err(NodeLabelError::ForeignPrefix { .. })
        ));
    }

    #[test]
    fn wire_labels() {
        let mut d = NodeDescriptor::default();
        assert_eq!(d.labels(), None);
        d.partition = Some(String::new());
        assert_eq!(d.labels(), Some(vec![]));
        d.partition = Some("gpu".into());
        assert_eq!(d.labels(), Some(vec!["gpu".to_string()]));
    }

    fn script(dir: &Path, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.join("provider.sh");
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    fn spec(path: PathBuf, timeout_ms: u64) -> ScriptSpec {
        ScriptSpec {
            path,
            opts: vec!["arg1".into()],
            interval: Duration::from_secs(600),
            timeout: Duration::from_millis(timeout_ms),
        }
    }

    #[tokio::test]
    async fn scripts_are_run_parsed_and_bounded() {
        let d = tempfile::tempdir().unwrap();
        let ok = script(d.path(), "echo \"NODE_PARTITION:$1\"");
        assert_eq!(
            fetch(&spec(ok, 5000), &parse_partition_output)
                .await
                .unwrap(),
            "arg1"
        );
        let failing = script(d.path(), "echo NODE_PARTITION:x; exit 2");
        assert!(matches!(
            fetch(&spec(failing, 5000), &parse_partition_output).await,
            Err(FetchError::Failed { .. })
        ));
        let slow = script(d.path(), "sleep 5; echo NODE_PARTITION:x");
        let start = std::time::Instant::now();
        assert!(matches!(
            fetch(&spec(slow, 200), &parse_partition_output).await,
            Err(FetchError::Exec(ExecError::Timeout { .. }))
        ));
        assert!(start.elapsed() < Duration::from_secs(4));
    }

    #[tokio::test]
    async fn a_failing_script_keeps_the_previous_value() {
        let d = tempfile::tempdir().unwrap();
        let flag = d.path().join("fail");
        let path = script(
            d.path(),
            &format!(
                "if [ -e {} ]; then exit 1; fi; echo NODE_ATTRIBUTE:os,STRING,v1",
                flag.display()
            ),
        );
        let (_stop_tx, stop_rx) = watch::channel(false);
        let mut s = spec(path, 5000);
        s.interval = Duration::from_millis(50);
        let mut view = spawn(
            NodeLabelsConfig {
                partition: None,
                attributes: Some(Provider::Script(s)),
            },
            Arc::new(Notify::new()),
            stop_rx,
        );
        view.ready().await;
        assert_eq!(view.current().attributes, attrs(&[("nm.yarn.io/os", "v1")]));
        assert_eq!(view.current().partition, None);
        std::fs::write(&flag, "").unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(view.current().attributes, attrs(&[("nm.yarn.io/os", "v1")]));
    }
}
