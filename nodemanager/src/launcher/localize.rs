//! Localization: copying a container's local resources into its work dir before it starts.
//!
//! Spindle has no distributed file system, so a resource is a local file or directory
//! (`file://` URL or absolute path on a file system this NM can read). A `FILE` resource is
//! copied with its permission bits; an `ARCHIVE` (`.tar`, `.tar.gz`, `.tgz`, told by the
//! source's name as YARN does) is unpacked into a directory named by its key, or, with the
//! reserved key [`WORK_DIR_KEY`] (`.`), into the work dir itself (how `spindle train
//! --src-dir` lands the user's code where `python3 train.py` finds it). This module must not
//! write outside the container's work dir (a resource name is a plain relative path, checked
//! by [`resource_target`]; an archive entry that is absolute, climbs with `..`, is a device or
//! a link pointing out is refused, [`ArchiveError`]) and must not fetch anything from another
//! host.

use std::fs;
use std::io::Read;
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

/// The local resource key of an `ARCHIVE` unpacked into the work dir itself rather than into
/// a directory of its own (only an `ARCHIVE` may use it).
pub const WORK_DIR_KEY: &str = ".";

/// A resource key must name a place inside the work dir.
/// Where local resource `key` goes in `work_dir`; an error names a key that is not a plain
/// relative path (empty, absolute, or with `..`). [`WORK_DIR_KEY`] is the work dir itself.
pub fn resource_target(work_dir: &Path, key: &str) -> Result<PathBuf, String> {
    if key == WORK_DIR_KEY {
        return Ok(work_dir.to_path_buf());
    }
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
    let archive = match kind.as_str() {
        "" | "FILE" => false,
        "ARCHIVE" => true,
        _ => {
            return Err(LaunchError::Localization(format!(
                "local resource '{key}': type {} is not supported (only FILE and ARCHIVE)",
                res.kind
            )))
        }
    };
    let src = resource_source(&res.resource)
        .map_err(|m| LaunchError::Localization(format!("local resource '{key}': {m}")))?;
    let dst = resource_target(work_dir, key).map_err(LaunchError::Localization)?;
    if archive {
        return unpack_archive(&src, &dst).map_err(|e| {
            LaunchError::Localization(format!("local resource '{key}' (ARCHIVE): {e}"))
        });
    }
    if key == WORK_DIR_KEY {
        return Err(LaunchError::Localization(format!(
            "local resource '{key}': only an ARCHIVE may be unpacked into the work dir itself"
        )));
    }
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

/// Why an `ARCHIVE` resource could not be unpacked. Each entry is checked before anything of
/// it is written: nothing may land outside the target directory.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error(
        "{path}: archive format not supported (only .tar, .tar.gz and .tgz; zip and jar are not)"
    )]
    UnsupportedFormat { path: String },
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("entry '{entry}' has an absolute path")]
    AbsolutePath { entry: String },
    #[error("entry '{entry}' climbs out of the target directory with '..'")]
    ParentDir { entry: String },
    #[error("entry '{entry}' links to '{target}', outside the target directory")]
    LinkOutside { entry: String, target: String },
    #[error("entry '{entry}' is a {kind}; only files, directories and links are unpacked")]
    UnsupportedEntry { entry: String, kind: &'static str },
    #[error("cannot unpack entry '{entry}': {source}")]
    Unpack {
        entry: String,
        source: std::io::Error,
    },
}

/// The archive formats localization unpacks, told by the file name (as YARN's `FileUtil`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchiveFormat {
    Tar,
    TarGz,
}

impl ArchiveFormat {
    /// `.tar`, `.tar.gz`, `.tgz` (any case); anything else is refused.
    pub fn of(path: &Path) -> Result<Self, ArchiveError> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        if name.ends_with(".tar.gz") || name.ends_with(".tgz") {
            Ok(Self::TarGz)
        } else if name.ends_with(".tar") {
            Ok(Self::Tar)
        } else {
            Err(ArchiveError::UnsupportedFormat {
                path: path.display().to_string(),
            })
        }
    }
}

/// Unpacks the archive `src` into `dst` (created if missing), refusing any entry that would
/// land or point outside it.
pub fn unpack_archive(src: &Path, dst: &Path) -> Result<(), ArchiveError> {
    let format = ArchiveFormat::of(src)?;
    let read_err = |source| ArchiveError::Read {
        path: src.display().to_string(),
        source,
    };
    let file = fs::File::open(src).map_err(read_err)?;
    let reader: Box<dyn Read> = match format {
        ArchiveFormat::Tar => Box::new(std::io::BufReader::new(file)),
        ArchiveFormat::TarGz => {
            Box::new(flate2::read::GzDecoder::new(std::io::BufReader::new(file)))
        }
    };
    fs::create_dir_all(dst).map_err(|source| ArchiveError::Unpack {
        entry: dst.display().to_string(),
        source,
    })?;
    let mut archive = tar::Archive::new(reader);
    archive.set_preserve_permissions(false);
    archive.set_unpack_xattrs(false);
    archive.set_overwrite(true);
    for entry in archive.entries().map_err(read_err)? {
        let mut entry = entry.map_err(read_err)?;
        let name = entry.path_bytes();
        let name = String::from_utf8_lossy(&name).into_owned();
        check_entry(&entry, &name)?;
        entry
            .unpack_in(dst)
            .map_err(|source| ArchiveError::Unpack {
                entry: name.clone(),
                source,
            })?;
    }
    Ok(())
}

/// An entry's path: relative and without `..`; the depth of its parent directory.
fn relative_depth(entry: &str, path: &Path) -> Result<usize, ArchiveError> {
    let mut depth = 0usize;
    for c in path.components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => {
                return Err(ArchiveError::ParentDir {
                    entry: entry.to_string(),
                })
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(ArchiveError::AbsolutePath {
                    entry: entry.to_string(),
                })
            }
        }
    }
    Ok(depth.saturating_sub(1))
}

/// Whether relative link `target`, followed from a directory `depth` levels below the root,
/// stays inside the root (read lexically, as a link is resolved).
fn link_stays_inside(depth: usize, target: &Path) -> bool {
    let mut d = depth as isize;
    for c in target.components() {
        match c {
            Component::Normal(_) => d += 1,
            Component::CurDir => {}
            Component::ParentDir => {
                d -= 1;
                if d < 0 {
                    return false;
                }
            }
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

fn check_entry<R: Read>(entry: &tar::Entry<'_, R>, name: &str) -> Result<(), ArchiveError> {
    let path = entry.path().map_err(|source| ArchiveError::Unpack {
        entry: name.to_string(),
        source,
    })?;
    let depth = relative_depth(name, &path)?;
    let kind = entry.header().entry_type();
    let unsupported = |kind: &'static str| ArchiveError::UnsupportedEntry {
        entry: name.to_string(),
        kind,
    };
    match kind {
        tar::EntryType::Regular
        | tar::EntryType::Continuous
        | tar::EntryType::Directory
        | tar::EntryType::GNUSparse
        // `git archive` writes one (the commit id); nothing is unpacked from it.
        | tar::EntryType::XGlobalHeader => Ok(()),
        tar::EntryType::Symlink | tar::EntryType::Link => {
            let target = entry
                .link_name()
                .map_err(|source| ArchiveError::Unpack {
                    entry: name.to_string(),
                    source,
                })?
                .map(|t| t.into_owned())
                .unwrap_or_default();
            let outside = || ArchiveError::LinkOutside {
                entry: name.to_string(),
                target: target.display().to_string(),
            };
            if kind == tar::EntryType::Link {
                // A hard link names another entry of the archive, from its root.
                relative_depth(name, &target).map_err(|_| outside())?;
                Ok(())
            } else if target.is_absolute() || !link_stays_inside(depth, &target) {
                Err(outside())
            } else {
                Ok(())
            }
        }
        tar::EntryType::Char => Err(unsupported("character device")),
        tar::EntryType::Block => Err(unsupported("block device")),
        tar::EntryType::Fifo => Err(unsupported("fifo")),
        // Metadata entries (pax headers, GNU long names) are consumed by the reader.
        _ => Err(unsupported("special entry")),
    }
}
