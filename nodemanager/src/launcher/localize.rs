//! Localization: copying a container's local resources into its work dir before it starts.
//!
//! Spindle has no distributed file system, so a resource is a local file or directory
//! (`file://` URL or absolute path), copied with its permission bits. This module must not
//! write outside the container's work dir (a resource name is a plain relative path, checked
//! by [`resource_target`]) and must not fetch anything from another host.

use std::fs;
use std::path::{Component, Path, PathBuf};

use spindle_common::records::cluster::LocalResourceInfo;

use super::{io_err, LaunchError};

/// The source path of a local resource: a `file://` URL (host empty or `localhost`) or an
/// absolute path. Anything else is refused: Spindle has no distributed file system.
pub fn resource_source(url: &str) -> Result<PathBuf, String> {
    let path = if let Some(rest) = url.strip_prefix("file://") {
        let rest = rest.strip_prefix("localhost").unwrap_or(rest);
        if !rest.starts_with('/') {
            return Err(format!(
                "resource URL '{url}' names a remote host; only local files can be localized"
            ));
        }
        rest.to_string()
    } else if let Some(rest) = url.strip_prefix("file:") {
        rest.to_string()
    } else if url.starts_with('/') {
        return Ok(PathBuf::from(url));
    } else {
        return Err(format!(
            "resource URL '{url}' is not supported: expected file:// or an absolute path"
        ));
    };
    if !path.starts_with('/') {
        return Err(format!("resource URL '{url}' is not an absolute file path"));
    }
    let decoded = urlencoding::decode(&path)
        .map_err(|_| format!("resource URL '{url}' is not valid percent-encoded UTF-8"))?;
    Ok(PathBuf::from(decoded.into_owned()))
}

/// A resource key must name a place inside the work dir.
/// Where local resource `key` goes in `work_dir`; an error names a key that is not a plain
/// relative path (empty, absolute, or with `..`).
pub fn resource_target(work_dir: &Path, key: &str) -> Result<PathBuf, String> {
    let rel = Path::new(key);
    if key.is_empty() || !rel.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(format!(
            "local resource name '{key}' must be a relative path without '..'"
        ));
    }
    Ok(work_dir.join(rel))
}

pub(super) fn localize(
    work_dir: &Path,
    key: &str,
    res: &LocalResourceInfo,
) -> Result<(), LaunchError> {
    let kind = res.kind.to_ascii_uppercase();
    if !(kind.is_empty() || kind == "FILE") {
        return Err(LaunchError::Localization(format!(
            "local resource '{key}': type {} is not supported (only FILE)",
            res.kind
        )));
    }
    let src = resource_source(&res.resource)
        .map_err(|m| LaunchError::Localization(format!("local resource '{key}': {m}")))?;
    let dst = resource_target(work_dir, key).map_err(LaunchError::Localization)?;
    let meta = fs::metadata(&src).map_err(|e| {
        LaunchError::Localization(format!(
            "local resource '{key}': cannot read {}: {e}",
            src.display()
        ))
    })?;
    if let Some(parent) = dst.parent() {
        fs::create_dir_all(parent).map_err(io_err("create directory", parent))?;
    }
    if meta.is_dir() {
        copy_dir(&src, &dst)
    } else {
        // fs::copy keeps the permission bits, so executables stay executable.
        fs::copy(&src, &dst).map(|_| ()).map_err(|e| {
            LaunchError::Localization(format!(
                "local resource '{key}': cannot copy {}: {e}",
                src.display()
            ))
        })
    }
}

fn copy_dir(src: &Path, dst: &Path) -> Result<(), LaunchError> {
    fs::create_dir_all(dst).map_err(io_err("create directory", dst))?;
    let perms = fs::metadata(src)
        .map_err(io_err("read", src))?
        .permissions();
    for entry in fs::read_dir(src).map_err(io_err("read directory", src))? {
        let entry = entry.map_err(io_err("read directory", src))?;
        let from = entry.path();
        let to = dst.join(entry.file_name());
        let ft = entry.file_type().map_err(io_err("read", &from))?;
        if ft.is_dir() {
            copy_dir(&from, &to)?;
        } else {
            fs::copy(&from, &to).map_err(io_err("copy", &from))?;
        }
    }
    fs::set_permissions(dst, perms).map_err(io_err("set permissions on", dst))
}
