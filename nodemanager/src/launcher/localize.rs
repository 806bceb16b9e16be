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
//!
//! **Read as the container's user.** When the container runs as another user than the NM's
//! own ([`crate::runas`]: `nobody`, or the submitter), the NM (root) does not read the source
//! itself: a child process with that user's supplementary groups, gid and uid reads it
//! ([`UserReader`]: `cat` for a file, `tar -c` for a directory, behind a one-byte header that
//! says which) and the NM writes what comes through the pipe into the work dir, so the
//! kernel decides what the user may read. A source the user cannot read fails the launch
//! with [`SourceError::NotReadable`] ("... is not readable by nobody"), a fifo, device or
//! socket with [`SourceError::NotAFile`]. A directory arrives as a tar stream and is
//! unpacked with the same per-entry checks as an `ARCHIVE`; an `ARCHIVE` is read the same
//! way and then unpacked as before. The copy is written without following a link already at
//! its place. As the NM's own user, sources are read directly, as before.

use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Component, Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};

use nix::libc;
use spindle_common::paths::link_stays_inside;
use spindle_common::records::cluster::LocalResourceInfo;

use super::{io_err, LaunchError};
use crate::runas::Credentials;

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

/// Localizes one resource, reading its source as the NM's own user.
#[cfg(test)]
pub(super) fn localize(
    work_dir: &Path,
    key: &str,
    res: &LocalResourceInfo,
) -> Result<(), LaunchError> {
    localize_as(work_dir, key, res, None)
}

/// Localizes one resource into `work_dir`; with `run_as` another user than the NM's own,
/// its source is read as that user ([`UserReader`]).
pub(super) fn localize_as(
    work_dir: &Path,
    key: &str,
    res: &LocalResourceInfo,
    run_as: Option<&Credentials>,
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
    let nm_uid = nix::unistd::geteuid().as_raw();
    if let Some(user) = run_as.filter(|c| c.uid != nm_uid) {
        return localize_read_as(key, archive, &src, &dst, user);
    }
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

/// Why a local resource's source could not be read as the container's user.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("local resource '{key}': {path} is not readable by {user}: {detail}")]
    NotReadable {
        key: String,
        path: PathBuf,
        user: String,
        detail: String,
    },
    #[error(
        "local resource '{key}': {path} is neither a regular file nor a directory (as {user} sees it); only files and directories are localized"
    )]
    NotAFile {
        key: String,
        path: PathBuf,
        user: String,
    },
    #[error("local resource '{key}': an ARCHIVE must be a file, and {path} is a directory")]
    ArchiveIsDirectory { key: String, path: PathBuf },
    #[error("local resource '{key}': cannot read {path} as {user}: {source}")]
    Reader {
        key: String,
        path: PathBuf,
        user: String,
        source: io::Error,
    },
}

/// What the reading child found at the source (its first byte on stdout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// A regular file, its bytes follow; `executable`: the user may execute it.
    File { executable: bool },
    /// A directory, a tar stream of it follows.
    Directory,
}

/// The reading child's script: the header byte (`D` directory, `X` executable file, `F`
/// file), then `tar -c` of the directory (links followed, as a copy follows them) or `cat` of
/// the file; exit 3 for anything else (a fifo is never opened, so nothing hangs). Every test
/// and read is the user's own, so the kernel decides.
const READ_SCRIPT: &str = r#"if [ -d "$1" ]; then printf D && exec tar -C "$1" -h -cf - .
elif [ -e "$1" ] && ! [ -f "$1" ]; then exit 3
elif [ -x "$1" ]; then printf X && exec cat -- "$1"
else printf F && exec cat -- "$1"; fi"#;

/// The exit code of [`READ_SCRIPT`] for a source that is neither a file nor a directory.
const NOT_A_FILE_EXIT: i32 = 3;

/// A child process reading one source as a user: its stdout carries the header byte and the
/// bytes; stderr is drained by a thread (a chatty `tar` cannot block it). Killed and reaped
/// when dropped unfinished.
pub struct UserReader {
    child: Child,
    /// None once [`UserReader::abort`] closed it.
    stdout: Option<ChildStdout>,
    stderr: Option<std::thread::JoinHandle<String>>,
    pub kind: SourceKind,
    key: String,
    path: PathBuf,
    user: String,
}

impl UserReader {
    /// Starts the child as `user` (supplementary groups, gid, then uid, before `exec`) and
    /// reads the header. An error names the resource, the path and the user.
    pub fn start(key: &str, path: &Path, user: &Credentials) -> Result<Self, SourceError> {
        let reader_err = |source| SourceError::Reader {
            key: key.to_string(),
            path: path.to_path_buf(),
            user: user.user.clone(),
            source,
        };
        let groups: Vec<libc::gid_t> = user.groups.iter().map(|g| *g as libc::gid_t).collect();
        let (uid, gid) = (user.uid as libc::uid_t, user.gid as libc::gid_t);
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(READ_SCRIPT)
            .arg("spindle-localize")
            .arg(path)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("LC_ALL", "C")
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: between fork and exec the closure makes only the async-signal-safe system
        // calls setgroups, setgid and setuid, on data made before the fork (no allocation).
        unsafe {
            cmd.pre_exec(move || {
                if libc::setgroups(groups.len(), groups.as_ptr()) != 0
                    || libc::setgid(gid) != 0
                    || libc::setuid(uid) != 0
                {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(reader_err)?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut err_pipe = child.stderr.take().expect("stderr is piped");
        let stderr = std::thread::spawn(move || {
            let mut kept = Vec::new();
            let mut buf = [0u8; 4096];
            while let Ok(n) = err_pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if kept.len() < 4096 {
                    kept.extend_from_slice(&buf[..n.min(4096 - kept.len())]);
                }
            }
            String::from_utf8_lossy(&kept).trim().to_string()
        });
        let mut r = Self {
            child,
            stdout: Some(stdout),
            stderr: Some(stderr),
            kind: SourceKind::File { executable: false },
            key: key.to_string(),
            path: path.to_path_buf(),
            user: user.user.clone(),
        };
        let mut header = [0u8; 1];
        let n = loop {
            match r.read(&mut header) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(reader_err_of(&r, e)),
            }
        };
        r.kind = match (n, header[0]) {
            (1, b'D') => SourceKind::Directory,
            (1, b'X') => SourceKind::File { executable: true },
            (1, b'F') => SourceKind::File { executable: false },
            // No header: the child failed before reading anything.
            _ => {
                return Err(r
                    .finish()
                    .err()
                    .unwrap_or_else(|| r_unexpected(key, path, user)))
            }
        };
        Ok(r)
    }

    /// Waits for the child once its output has been read: an error when it did not end
    /// with 0 (the user could not read the source, or it is not a file).
    pub fn finish(&mut self) -> Result<(), SourceError> {
        // What the reader did not consume (a tar stream's trailing blocks) is drained, so
        // the child is never left blocked on a full pipe.
        if let Some(out) = self.stdout.as_mut() {
            let _ = io::copy(out, &mut io::sink());
        }
        let status = self.child.wait().map_err(|e| reader_err_of(self, e))?;
        self.judge(status)
    }

    /// After the NM gave up on the output (it could not be written or unpacked): kills the
    /// child and returns its own failure if it had one (the user could not read the
    /// source, so the stream was cut short), which is then the cause to report.
    pub fn abort(&mut self) -> Option<SourceError> {
        // Our end of the pipe closes: a child still writing ends (SIGPIPE); one that failed
        // on its own (`cat` closes its output before it exits) is given a moment to exit
        // with its status. Then it is killed.
        drop(self.stdout.take());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                _ => {
                    let _ = self.child.kill();
                    break self.child.wait().ok()?;
                }
            }
        };
        status.code()?;
        self.judge(status).err()
    }

    fn judge(&mut self, status: std::process::ExitStatus) -> Result<(), SourceError> {
        let detail = self
            .stderr
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        if status.success() {
            return Ok(());
        }
        if status.code() == Some(NOT_A_FILE_EXIT) {
            return Err(SourceError::NotAFile {
                key: self.key.clone(),
                path: self.path.clone(),
                user: self.user.clone(),
            });
        }
        Err(SourceError::NotReadable {
            key: self.key.clone(),
            path: self.path.clone(),
            user: self.user.clone(),
            detail: if detail.is_empty() {
                format!("the read ended with {status}")
            } else {
                detail
            },
        })
    }
}

fn reader_err_of(r: &UserReader, source: io::Error) -> SourceError {
    SourceError::Reader {
        key: r.key.clone(),
        path: r.path.clone(),
        user: r.user.clone(),
        source,
    }
}

fn r_unexpected(key: &str, path: &Path, user: &Credentials) -> SourceError {
    SourceError::Reader {
        key: key.to_string(),
        path: path.to_path_buf(),
        user: user.user.clone(),
        source: io::Error::other("the reading process wrote no header"),
    }
}

impl Read for UserReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.stdout.as_mut() {
            Some(out) => out.read(buf),
            None => Ok(0),
        }
    }
}

impl Drop for UserReader {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Localizes one resource whose source is read as `user`.
fn localize_read_as(
    key: &str,
    archive: bool,
    src: &Path,
    dst: &Path,
    user: &Credentials,
) -> Result<(), LaunchError> {
    no_links_above(work_dir_of(dst, key), key)?;
    // A link already at a directory's or archive's place is removed, not unpacked through.
    if key != WORK_DIR_KEY && fs::symlink_metadata(dst).is_ok_and(|m| m.file_type().is_symlink()) {
        fs::remove_file(dst).map_err(io_err("replace", dst))?;
    }
    let mut reader = UserReader::start(key, src, user)?;
    let in_archive = |e: ArchiveError| {
        LaunchError::Localization(format!("local resource '{key}' (ARCHIVE): {e}"))
    };
    let result = match (archive, reader.kind) {
        (true, SourceKind::Directory) => Err(SourceError::ArchiveIsDirectory {
            key: key.to_string(),
            path: src.to_path_buf(),
        }
        .into()),
        (true, SourceKind::File { .. }) => {
            let format = ArchiveFormat::of(src).map_err(in_archive)?;
            unpack_reader(format, src, &mut reader, dst).map_err(in_archive)
        }
        (false, _) if key == WORK_DIR_KEY => Err(LaunchError::Localization(format!(
            "local resource '{key}': only an ARCHIVE may be unpacked into the work dir itself"
        ))),
        (false, SourceKind::Directory) => unpack_reader(ArchiveFormat::Tar, src, &mut reader, dst)
            .map_err(|e| {
                LaunchError::Localization(format!("local resource '{key}' (directory): {e}"))
            }),
        (false, SourceKind::File { executable }) => write_new_file(&mut reader, dst, executable),
    };
    if let Err(e) = result {
        // A stream cut short because the user could not read the source: that is the cause.
        return Err(reader.abort().map_or(e, LaunchError::from));
    }
    // Whatever was written, the read itself must have succeeded: a failed `cat` or `tar`
    // (the user may not read the source, or a file below it) fails the launch.
    if let Err(e) = reader.finish() {
        if !archive && !matches!(reader.kind, SourceKind::Directory) {
            let _ = fs::remove_file(dst);
        }
        return Err(e.into());
    }
    Ok(())
}

/// The work dir a resource target was made from (`dst` = work dir + key).
fn work_dir_of<'a>(dst: &'a Path, key: &str) -> &'a Path {
    if key == WORK_DIR_KEY {
        return dst;
    }
    let mut d = dst;
    for _ in Path::new(key).components() {
        d = d.parent().unwrap_or(d);
    }
    d
}

/// No directory of `key` below the work dir (which a re-initialized container's user owns)
/// may be a link: the NM would write through it.
pub(super) fn no_links_above(work_dir: &Path, key: &str) -> Result<(), LaunchError> {
    let rel = Path::new(key);
    let mut at = work_dir.to_path_buf();
    let parents = rel.components().count().saturating_sub(1);
    for c in rel.components().take(parents) {
        at.push(c);
        if fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(LaunchError::Localization(format!(
                "local resource '{key}': '{}' in the work dir is a symbolic link; nothing is written through it",
                c.as_os_str().to_string_lossy()
            )));
        }
    }
    Ok(())
}

/// Writes `from` into a new file `dst` (0755 when the user may execute the source, else
/// 0644), never following a link already at `dst` (an existing entry that is not a directory
/// is removed first).
pub(super) fn write_new_file(
    from: &mut impl Read,
    dst: &Path,
    executable: bool,
) -> Result<(), LaunchError> {
    if let Some(parent) = dst.parent() {
        fs::create_dir_all(parent).map_err(io_err("create directory", parent))?;
    }
    if fs::symlink_metadata(dst).is_ok_and(|m| !m.is_dir()) {
        fs::remove_file(dst).map_err(io_err("replace", dst))?;
    }
    let mode = if executable { 0o755 } else { 0o644 };
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW)
        .open(dst)
        .map_err(io_err("create", dst))?;
    io::copy(from, &mut file).map_err(io_err("write", dst))?;
    file.set_permissions(fs::Permissions::from_mode(mode))
        .map_err(io_err("set permissions on", dst))
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
    let mut file = fs::File::open(src).map_err(|source| ArchiveError::Read {
        path: src.display().to_string(),
        source,
    })?;
    unpack_reader(format, src, &mut file, dst)
}

/// Unpacks an archive of `format` read from `from` (named `src` in errors) into `dst`, with
/// the same per-entry checks.
pub fn unpack_reader(
    format: ArchiveFormat,
    src: &Path,
    from: &mut dyn Read,
    dst: &Path,
) -> Result<(), ArchiveError> {
    let read_err = |source| ArchiveError::Read {
        path: src.display().to_string(),
        source,
    };
    let reader: Box<dyn Read + '_> = match format {
        ArchiveFormat::Tar => Box::new(std::io::BufReader::new(from)),
        ArchiveFormat::TarGz => {
            Box::new(flate2::read::GzDecoder::new(std::io::BufReader::new(from)))
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
