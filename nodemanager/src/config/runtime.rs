//! The container runtimes' settings (`yarn.nodemanager.runtime.linux.*` and
//! `spindle.nodemanager.runtime.oci.*`) read into a [`RuntimePolicy`]. It resolves the runtime
//! binary and the allow-listed directories once; it creates nothing.

use std::collections::BTreeSet;
use std::path::PathBuf;

use spindle_common::config::{keys, Configuration};

use super::validate::at;
use super::NmConfigError;
use crate::oci::request::parse_mounts;
use crate::oci::{find_runtime_binary, MountMode, RuntimeKind, RuntimePolicy};

fn list(conf: &Configuration, key: &str, default: &str) -> Result<Vec<String>, NmConfigError> {
    Ok(conf
        .get_string(key, default)?
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect())
}

fn bad(conf: &Configuration, name: &'static str, value: String, reason: String) -> NmConfigError {
    NmConfigError::BadRuntimeSetting {
        at: at(conf, name),
        name,
        value,
        reason,
    }
}

/// Reads the runtime policy. An allow-listed directory that does not exist is left out (with
/// nothing under it, nothing is allowed); a runtime that is unknown is an error.
pub(super) fn runtime_policy(conf: &Configuration) -> Result<RuntimePolicy, NmConfigError> {
    let mut allowed = BTreeSet::new();
    for name in list(
        conf,
        keys::NM_RUNTIME_ALLOWED_RUNTIMES,
        keys::DEFAULT_NM_RUNTIME_ALLOWED_RUNTIMES,
    )? {
        let kind = RuntimeKind::parse(&name).ok_or_else(|| {
            bad(
                conf,
                keys::NM_RUNTIME_ALLOWED_RUNTIMES,
                name.clone(),
                "expected default, runc or docker".into(),
            )
        })?;
        allowed.insert(kind);
    }
    let configured = conf.get_nonempty(keys::SPINDLE_NM_RUNTIME_OCI_BINARY)?;
    let binary = find_runtime_binary(configured.as_deref());
    let dirs = |key: &'static str| -> Result<Vec<PathBuf>, NmConfigError> {
        Ok(list(conf, key, "")?
            .into_iter()
            .filter_map(|d| PathBuf::from(d).canonicalize().ok())
            .collect())
    };
    let mut default_mounts = Vec::new();
    for (key, mode) in [
        (keys::NM_RUNC_DEFAULT_RO_MOUNTS, MountMode::ReadOnly),
        (keys::NM_RUNC_DEFAULT_RW_MOUNTS, MountMode::ReadWrite),
    ] {
        let text = conf.get_string(key, "")?;
        let mounts = parse_mounts(&text, "configuration", mode)
            .map_err(|e| bad(conf, key, text.clone(), e.to_string()))?;
        default_mounts.extend(mounts.into_iter().map(|mut m| {
            m.mode = mode;
            m
        }));
    }
    Ok(RuntimePolicy {
        allowed,
        binary,
        allowed_ro: dirs(keys::NM_RUNC_ALLOWED_RO_MOUNTS)?,
        allowed_rw: dirs(keys::NM_RUNC_ALLOWED_RW_MOUNTS)?,
        default_mounts,
        privileged_allowed: conf.get_bool(
            keys::NM_RUNC_PRIVILEGED_ALLOWED,
            keys::DEFAULT_NM_RUNC_PRIVILEGED_ALLOWED,
        )?,
        cdi_dirs: list(
            conf,
            keys::SPINDLE_NM_RUNTIME_OCI_CDI_SPEC_DIRS,
            keys::DEFAULT_SPINDLE_NM_RUNTIME_OCI_CDI_SPEC_DIRS,
        )?
        .into_iter()
        .map(PathBuf::from)
        .collect(),
    })
}
