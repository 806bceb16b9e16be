//! Files in directories a container owns (its work and log dirs), opened without following
//! a link or waiting on a fifo. A new container's work dir is made anew (whatever was put at
//! its place is removed) and written through an `O_NOFOLLOW` descriptor; its stdout/stderr
//! logs, its stderr tail and `.exitcode` must be regular files with one link.

use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use tracing::warn;

use super::LaunchError;

pub(super) fn io_err<'a>(
    what: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> LaunchError + 'a {
    move |source| LaunchError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// The work dir of a container run as another user, opened without following a link. Its
/// parent (the application's dir) belongs to that user, so anything may have been put at its
/// place before the NM makes it: for a container never prepared (`fresh`), whatever is there
/// (a link to a root directory, say) is removed and a new directory made, which must then be
/// the NM's own. A re-initialized container's existing work dir must be a directory, not a
/// link.
pub(super) fn open_work_dir(work_dir: &Path, fresh: bool) -> Result<fs::File, LaunchError> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    if let Some(parent) = work_dir.parent() {
        fs::create_dir_all(parent).map_err(io_err("create directory", parent))?;
    }
    if fresh {
        match fs::symlink_metadata(work_dir) {
            Ok(m) => {
                warn!(dir = %work_dir.display(), "removing what was put at a new container's work dir before the NodeManager made it");
                let removed = if m.is_dir() {
                    fs::remove_dir_all(work_dir)
                } else {
                    fs::remove_file(work_dir)
                };
                removed.map_err(io_err("remove what was put at", work_dir))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err("inspect", work_dir)(e)),
        }
        fs::create_dir(work_dir).map_err(io_err("create directory", work_dir))?;
    } else if let Err(e) = fs::create_dir(work_dir) {
        if e.kind() != std::io::ErrorKind::AlreadyExists {
            return Err(io_err("create directory", work_dir)(e));
        }
    }
    let dir = fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_DIRECTORY)
        .open(work_dir)
        .map_err(|e| {
            LaunchError::Localization(format!(
                "the work directory {} is not a plain directory (a link?): {e}",
                work_dir.display()
            ))
        })?;
    let meta = dir.metadata().map_err(io_err("inspect", work_dir))?;
    if fresh && meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err(LaunchError::Localization(format!(
            "the new work directory {} is not the NodeManager's own (uid {})",
            work_dir.display(),
            meta.uid()
        )));
    }
    Ok(dir)
}

/// Opens (creating) a container's log file for appending. The container owns its log dir,
/// so the file is opened without following a link (`O_NOFOLLOW`, `O_NONBLOCK` so a fifo
/// cannot hang the NM) and must be a regular file with one link: a log replaced by a link
/// to another file (before a re-initialization, say) is never written or given away.
pub(crate) fn open_log(path: &Path) -> Result<fs::File, LaunchError> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(io_err("open log file", path))?;
    check_plain(&f).map_err(io_err("open log file", path))?;
    Ok(f)
}

/// Whether an opened file is a regular file with exactly one link; else an error saying
/// what it is.
fn check_plain(f: &fs::File) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let m = f.metadata()?;
    if !m.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if m.nlink() != 1 {
        return Err(std::io::Error::other(format!(
            "a regular file with {} hard links",
            m.nlink()
        )));
    }
    Ok(())
}

/// Opens a file a container may have replaced (in its work or log dir) for reading, as
/// [`open_log`] does: no link followed, no fifo waited on, a regular file with one link.
pub fn open_plain_file(path: &Path) -> std::io::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)?;
    check_plain(&f)?;
    Ok(f)
}

/// The last `max` bytes of a file, lossily decoded; empty if unreadable or not a plain
/// file ([`open_plain_file`]: a container's stderr replaced by a link is not read).
pub fn file_tail(path: &Path, max: u64) -> String {
    let Ok(mut f) = open_plain_file(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(max);
    if f.seek(SeekFrom::Start(start)).is_err() {
        return String::new();
    }
    let mut buf = Vec::new();
    let _ = f.take(max).read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}
