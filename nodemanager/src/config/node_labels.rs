//! Distributed node labels and attributes: the label and attribute providers (YARN's keys
//! and defaults), read into [`NodeLabelsConfig`].
//!
//! It must not run a provider script (that is [`crate::node_labels`] once the NM runs); the
//! only file it touches is a script's metadata, to refuse one that cannot run.

use std::path::PathBuf;
use std::time::Duration;

use spindle_common::config::{keys, Configuration};

use super::validate::at;
use super::NmConfigError;
use crate::node_labels::{
    is_script, parse_configured_attributes, parse_partition, NodeLabelsConfig, Provider, ScriptSpec,
};

/// The keys of one provider.
struct ProviderKeys {
    provider: &'static str,
    path: &'static str,
    opts: &'static str,
    interval: &'static str,
    default_interval_ms: u64,
    timeout: &'static str,
    default_timeout_ms: u64,
}

const LABEL_KEYS: ProviderKeys = ProviderKeys {
    provider: keys::NM_NODE_LABELS_PROVIDER,
    path: keys::NM_NODE_LABELS_PROVIDER_SCRIPT_PATH,
    opts: keys::NM_NODE_LABELS_PROVIDER_SCRIPT_OPTS,
    interval: keys::NM_NODE_LABELS_PROVIDER_FETCH_INTERVAL_MS,
    default_interval_ms: keys::DEFAULT_NM_NODE_LABELS_PROVIDER_FETCH_INTERVAL_MS,
    timeout: keys::NM_NODE_LABELS_PROVIDER_FETCH_TIMEOUT_MS,
    default_timeout_ms: keys::DEFAULT_NM_NODE_LABELS_PROVIDER_FETCH_TIMEOUT_MS,
};

const ATTRIBUTE_KEYS: ProviderKeys = ProviderKeys {
    provider: keys::NM_NODE_ATTRIBUTES_PROVIDER,
    path: keys::NM_NODE_ATTRIBUTES_PROVIDER_SCRIPT_PATH,
    opts: keys::NM_NODE_ATTRIBUTES_PROVIDER_SCRIPT_OPTS,
    interval: keys::NM_NODE_ATTRIBUTES_PROVIDER_FETCH_INTERVAL_MS,
    default_interval_ms: keys::DEFAULT_NM_NODE_ATTRIBUTES_PROVIDER_FETCH_INTERVAL_MS,
    timeout: keys::NM_NODE_ATTRIBUTES_PROVIDER_FETCH_TIMEOUT_MS,
    default_timeout_ms: keys::DEFAULT_NM_NODE_ATTRIBUTES_PROVIDER_FETCH_TIMEOUT_MS,
};

enum Kind {
    Config,
    Script(ScriptSpec),
}

fn bad(conf: &Configuration, name: &'static str, expected: &str, value: String) -> NmConfigError {
    NmConfigError::BadValue {
        at: at(conf, name),
        name,
        expected: expected.to_string(),
        value,
    }
}

/// None: no provider (unset or `none`).
fn provider(conf: &Configuration, k: &ProviderKeys) -> Result<Option<Kind>, NmConfigError> {
    let Some(raw) = conf.get_nonempty(k.provider)? else {
        return Ok(None);
    };
    match raw.trim().to_ascii_lowercase().as_str() {
        "none" => Ok(None),
        "config" => Ok(Some(Kind::Config)),
        "script" => {
            let Some(p) = conf.get_nonempty(k.path)? else {
                return Err(bad(
                    conf,
                    k.path,
                    &format!("an executable file (needed by {}=script)", k.provider),
                    String::new(),
                ));
            };
            let path = PathBuf::from(p.trim());
            if !is_script(&path) {
                return Err(bad(conf, k.path, "an executable file", p));
            }
            let positive_ms = |name: &'static str, default: u64| {
                let ms = conf.get_duration_ms(name, default)?;
                if ms == 0 {
                    return Err(bad(conf, name, "a time greater than 0", "0 ms".into()));
                }
                Ok(Duration::from_millis(ms))
            };
            Ok(Some(Kind::Script(ScriptSpec {
                path,
                opts: conf
                    .get_string(k.opts, "")?
                    .split_whitespace()
                    .map(String::from)
                    .collect(),
                interval: positive_ms(k.interval, k.default_interval_ms)?,
                timeout: positive_ms(k.timeout, k.default_timeout_ms)?,
            })))
        }
        _ => Err(bad(conf, k.provider, "none, config or script", raw)),
    }
}

/// The label and attribute providers (YARN's names and defaults).
pub(super) fn node_labels_config(conf: &Configuration) -> Result<NodeLabelsConfig, NmConfigError> {
    let partition = match provider(conf, &LABEL_KEYS)? {
        None => None,
        Some(Kind::Script(s)) => Some(Provider::Script(s)),
        Some(Kind::Config) => {
            let name = keys::NM_NODE_LABELS_PROVIDER_CONFIGURED_NODE_PARTITION;
            let raw = conf.get_string(name, "")?;
            let label =
                parse_partition(&raw).map_err(|reason| NmConfigError::BadNodeDescriptor {
                    at: at(conf, name),
                    name,
                    expected: "one node label, or empty for the default partition",
                    value: raw.clone(),
                    reason: Box::new(reason),
                })?;
            Some(Provider::Config(label))
        }
    };
    let attributes = match provider(conf, &ATTRIBUTE_KEYS)? {
        None => None,
        Some(Kind::Script(s)) => Some(Provider::Script(s)),
        Some(Kind::Config) => {
            let name = keys::NM_NODE_ATTRIBUTES_PROVIDER_CONFIGURED_NODE_ATTRIBUTES;
            let raw = conf.get_string(name, "")?;
            let map = parse_configured_attributes(&raw).map_err(|reason| {
                NmConfigError::BadNodeDescriptor {
                    at: at(conf, name),
                    name,
                    expected: "attributes as name,STRING,value:name2,STRING,value2",
                    value: raw.clone(),
                    reason: Box::new(reason),
                }
            })?;
            Some(Provider::Config(map))
        }
    };
    Ok(NodeLabelsConfig {
        partition,
        attributes,
    })
}
