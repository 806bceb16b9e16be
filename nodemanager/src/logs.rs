//! Container log files on local disk: where they are, which names may be asked for, and
//! how to read them.
//!
//! A container's logs live in `<log-dir>/<appId>/<containerId>/` for every log dir, a path
//! the container id alone determines, so they are served straight from disk: for running and
//! finished containers alike, and for containers this NM has already forgotten.
//!
//! The container owns its log directory (it runs as `nobody` or its submitter while the NM
//! is root), so it may put anything there. The NM serves only regular files inside it:
//! every component below the configured log dir is opened relative to its parent without
//! following a link (`O_NOFOLLOW`, `O_DIRECTORY`), the file with `O_NOFOLLOW|O_NONBLOCK`, and
//! what was opened is checked with `fstat`: a regular file with exactly one link. A symbolic
//! link, a fifo, a device, a directory or a hard link is refused ([`LogError`]; the REST edge
//! answers 403 with an audit line), and the
//! listing shows only servable files, sized without following anything.

use std::io::SeekFrom;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use axum::body::Bytes;
use futures::Stream;
use nix::errno::Errno;
use nix::fcntl::{self, AtFlags, OFlag};
use nix::libc;
use nix::sys::stat::{self, Mode};
use spindle_common::ids::ContainerId;
use tokio::io::{AsyncReadExt, AsyncSeekExt};

const CHUNK: usize = 64 * 1024;

/// One log file of a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFile {
    pub name: String,
    pub size: u64,
    pub modified_ms: u64,
}

/// A log file name is one plain path component: no separators, no `.`/`..`, no NUL.
pub fn valid_file_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0'])
}

/// Why a log file is not served: one variant per refusal. The NM runs as root while a
/// container (as `nobody` or its submitter) owns its log directory, so anything the container
/// could have put there in place of a plain log file is refused, never followed.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("Invalid log file name: {name}")]
    InvalidName { name: String },
    #[error("Cannot find this log on the local disk: {name}")]
    Missing { name: String },
    #[error(
        "log file '{name}' is a symbolic link: only regular files inside the container's log directory are served"
    )]
    Symlink { name: String },
    #[error("log file '{name}' is a {kind}: only regular files are served")]
    NotRegular { name: String, kind: &'static str },
    #[error(
        "log file '{name}' has {links} hard links: a log file that is also another file is not served"
    )]
    HardLinked { name: String, links: u64 },
    #[error(
        "the container's log directory {dir} is reached through a {kind}, not a plain directory: nothing in it is served"
    )]
    UnsafeDir { dir: String, kind: &'static str },
    #[error("cannot read log file '{name}': {source}")]
    Io {
        name: String,
        source: std::io::Error,
    },
}

impl LogError {
    /// The file exists but is refused (a link, a fifo, a device, a directory, a hard link):
    /// 403, and an audit line. The rest are 400 (a bad name), 404 (missing) or 500.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            Self::Symlink { .. }
                | Self::NotRegular { .. }
                | Self::HardLinked { .. }
                | Self::UnsafeDir { .. }
        )
    }
}

/// What kind of file an `st_mode` is, for the refusals' messages.
fn kind_of(mode: u32) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFREG => "regular file",
        libc::S_IFDIR => "directory",
        libc::S_IFLNK => "symbolic link",
        libc::S_IFIFO => "fifo",
        libc::S_IFSOCK => "socket",
        libc::S_IFCHR => "character device",
        libc::S_IFBLK => "block device",
        _ => "special file",
    }
}

fn errno_io(e: Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(e as i32)
}

/// `openat(dir, name, flags)` as an owned descriptor.
fn open_at(dir: Option<&OwnedFd>, name: &Path, flags: OFlag) -> Result<OwnedFd, Errno> {
    let fd = fcntl::openat(
        dir.map(AsRawFd::as_raw_fd),
        name,
        flags | OFlag::O_CLOEXEC | OFlag::O_NOCTTY,
        Mode::empty(),
    )?;
    // SAFETY: openat just returned this descriptor, which nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens a container's log directory, `<root>/<appId>/<containerId>`: the root as
/// configured, then each component below it relative to its parent without following a
/// symbolic link (`O_NOFOLLOW|O_DIRECTORY`). None when it does not exist.
fn open_container_dir(root: &Path, id: &ContainerId) -> Result<Option<OwnedFd>, LogError> {
    let mut fd = match open_at(None, root, OFlag::O_RDONLY | OFlag::O_DIRECTORY) {
        Ok(fd) => fd,
        Err(_) => return Ok(None),
    };
    let mut path = root.to_path_buf();
    for comp in [id.application_id().to_string(), id.to_string()] {
        path.push(&comp);
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW;
        fd = match open_at(Some(&fd), Path::new(&comp), flags) {
            Ok(next) => next,
            Err(Errno::ENOENT) => return Ok(None),
            Err(Errno::ELOOP | Errno::ENOTDIR) => {
                let kind = stat::fstatat(
                    Some(fd.as_raw_fd()),
                    comp.as_str(),
                    AtFlags::AT_SYMLINK_NOFOLLOW,
                )
                .map(|st| kind_of(st.st_mode))
                .unwrap_or("special file");
                return Err(LogError::UnsafeDir {
                    dir: path.display().to_string(),
                    kind,
                });
            }
            Err(e) => {
                return Err(LogError::Io {
                    name: path.display().to_string(),
                    source: errno_io(e),
                })
            }
        };
    }
    Ok(Some(fd))
}

/// Whether a stat is a servable log file: regular, one link.
fn check_stat(name: &str, st: &stat::FileStat) -> Result<(), LogError> {
    let mode = st.st_mode;
    if mode & libc::S_IFMT == libc::S_IFLNK {
        return Err(LogError::Symlink {
            name: name.to_string(),
        });
    }
    if mode & libc::S_IFMT != libc::S_IFREG {
        return Err(LogError::NotRegular {
            name: name.to_string(),
            kind: kind_of(mode),
        });
    }
    if st.st_nlink != 1 {
        return Err(LogError::HardLinked {
            name: name.to_string(),
            links: st.st_nlink,
        });
    }
    Ok(())
}

fn log_file_of(name: String, st: &stat::FileStat) -> LogFile {
    LogFile {
        name,
        size: st.st_size.max(0) as u64,
        modified_ms: (st.st_mtime.max(0) as u64) * 1000
            + (st.st_mtime_nsec.max(0) as u64) / 1_000_000,
    }
}

/// The servable files of a container's log dirs (first dir wins on a name clash), sorted by
/// name: regular files with one link, never followed through a link (anything else in the
/// directory is left out). None when no log dir of the container exists (or none can be
/// opened safely).
pub fn list_blocking(log_roots: &[PathBuf], id: &ContainerId) -> Option<Vec<LogFile>> {
    let mut found_dir = false;
    let mut files: Vec<LogFile> = Vec::new();
    for root in log_roots {
        let Ok(Some(dir)) = open_container_dir(root, id) else {
            continue;
        };
        found_dir = true;
        // The names of the directory just opened (its descriptor, not its path again).
        let proc_path = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
        let Ok(rd) = std::fs::read_dir(&proc_path) else {
            continue;
        };
        for entry in rd.filter_map(Result::ok) {
            let name = entry.file_name();
            let Ok(st) = stat::fstatat(
                Some(dir.as_raw_fd()),
                name.as_os_str(),
                AtFlags::AT_SYMLINK_NOFOLLOW,
            ) else {
                continue;
            };
            let name = name.to_string_lossy().into_owned();
            if check_stat(&name, &st).is_err() || files.iter().any(|f| f.name == name) {
                continue;
            }
            files.push(log_file_of(name, &st));
        }
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    found_dir.then_some(files)
}

/// [`list_blocking`] off the runtime.
pub async fn list(log_roots: &[PathBuf], id: &ContainerId) -> Option<Vec<LogFile>> {
    let (roots, id) = (log_roots.to_vec(), *id);
    tokio::task::spawn_blocking(move || list_blocking(&roots, &id))
        .await
        .ok()
        .flatten()
}

/// An opened log file, checked after open.
#[derive(Debug)]
pub struct OpenLog {
    pub file: std::fs::File,
    pub len: u64,
}

/// Opens log file `name` of a container: the first log dir that has an entry of that name
/// decides. The entry is opened relative to the directory with
/// `O_NOFOLLOW|O_NONBLOCK` (a link is refused, a fifo cannot hang the NM) and checked after
/// the open with `fstat`: a regular file with exactly one link, else a [`LogError`].
pub fn open_blocking(
    log_roots: &[PathBuf],
    id: &ContainerId,
    name: &str,
) -> Result<OpenLog, LogError> {
    if !valid_file_name(name) {
        return Err(LogError::InvalidName {
            name: name.to_string(),
        });
    }
    for root in log_roots {
        let Some(dir) = open_container_dir(root, id)? else {
            continue;
        };
        // Refuse what is not a regular file before opening it (a device is never opened).
        match stat::fstatat(Some(dir.as_raw_fd()), name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => check_stat(name, &st)?,
            // No such entry (or a name no file system holds): look in the next log dir.
            Err(Errno::ENOENT | Errno::ENAMETOOLONG) => continue,
            Err(e) => {
                return Err(LogError::Io {
                    name: name.to_string(),
                    source: errno_io(e),
                })
            }
        }
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK;
        let fd = match open_at(Some(&dir), Path::new(name), flags) {
            Ok(fd) => fd,
            Err(Errno::ELOOP) => {
                return Err(LogError::Symlink {
                    name: name.to_string(),
                })
            }
            Err(Errno::ENOENT) => continue,
            Err(e) => {
                return Err(LogError::Io {
                    name: name.to_string(),
                    source: errno_io(e),
                })
            }
        };
        // The entry may have been swapped between the check and the open: check what was
        // opened.
        let st = stat::fstat(fd.as_raw_fd()).map_err(|e| LogError::Io {
            name: name.to_string(),
            source: errno_io(e),
        })?;
        check_stat(name, &st)?;
        return Ok(OpenLog {
            file: std::fs::File::from(fd),
            len: st.st_size.max(0) as u64,
        });
    }
    Err(LogError::Missing {
        name: name.to_string(),
    })
}

/// [`open_blocking`] off the runtime.
pub async fn open_log(
    log_roots: &[PathBuf],
    id: &ContainerId,
    name: &str,
) -> Result<OpenLog, LogError> {
    let (roots, id, name) = (log_roots.to_vec(), *id, name.to_string());
    tokio::task::spawn_blocking(move || open_blocking(&roots, &id, &name))
        .await
        .unwrap_or_else(|e| {
            Err(LogError::Io {
                name: String::new(),
                source: std::io::Error::other(e),
            })
        })
}

/// Which bytes of a log file to serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Selection {
    /// The whole file.
    #[default]
    Whole,
    /// YARN's `size`: positive is the first `size` bytes, negative the last `|size|` bytes,
    /// 0 the whole file.
    Size(i64),
    /// YARN's log page `start`/`end`: the bytes from offset `start` (default 0) up to, not
    /// including, offset `end` (default the file's length); a negative offset counts from the
    /// end. A client following a growing file asks for `start` = the bytes it already has.
    Range {
        start: Option<i64>,
        end: Option<i64>,
    },
}

impl Selection {
    /// `(offset, count)` of the selected bytes in a file of `len` bytes.
    pub fn bytes(self, len: u64) -> (u64, u64) {
        let at = |v: i64| {
            if v >= 0 {
                v.unsigned_abs().min(len)
            } else {
                len - v.unsigned_abs().min(len)
            }
        };
        match self {
            Self::Size(n) if n > 0 => (0, n.unsigned_abs().min(len)),
            Self::Size(n) if n < 0 => {
                let want = n.unsigned_abs().min(len);
                (len - want, want)
            }
            Self::Size(_) | Self::Whole => (0, len),
            Self::Range { start, end } => {
                let from = start.map_or(0, at);
                let to = end.map_or(len, at);
                (from, to.saturating_sub(from))
            }
        }
    }
}

/// Streams the selected bytes of an opened log file.
pub async fn stream_selection(
    log: OpenLog,
    selection: Selection,
) -> std::io::Result<impl Stream<Item = std::io::Result<Bytes>> + Send + 'static> {
    let mut file = tokio::fs::File::from_std(log.file);
    let (start, count) = selection.bytes(log.len);
    file.seek(SeekFrom::Start(start)).await?;
    Ok(futures::stream::unfold(
        (file, count),
        |(mut file, remaining)| async move {
            if remaining == 0 {
                return None;
            }
            let want = remaining.min(CHUNK as u64) as usize;
            let mut buf = vec![0u8; want];
            match file.read(&mut buf).await {
                Ok(0) => None,
                Ok(n) => {
                    buf.truncate(n);
                    Some((Ok(Bytes::from(buf)), (file, remaining - n as u64)))
                }
                Err(e) => Some((Err(e), (file, 0))),
            }
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    #[test]
    fn file_names() {
        assert!(valid_file_name("stdout"));
        assert!(valid_file_name("app.log.1"));
        for bad in ["", ".", "..", "../x", "a/b", "a\\b", "a\0"] {
            assert!(!valid_file_name(bad), "{bad:?}");
        }
    }

    fn cid() -> ContainerId {
        "container_1_0001_01_000002".parse().unwrap()
    }

    /// `<root>/<appId>/<containerId>`, made.
    fn container_dir(root: &Path) -> PathBuf {
        let d = root
            .join(cid().application_id().to_string())
            .join(cid().to_string());
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    async fn read_all(roots: &[PathBuf], name: &str, selection: Selection) -> String {
        let log = open_log(roots, &cid(), name).await.unwrap();
        let s = stream_selection(log, selection).await.unwrap();
        let chunks: Vec<_> = s.collect().await;
        let mut out = Vec::new();
        for c in chunks {
            out.extend_from_slice(&c.unwrap());
        }
        String::from_utf8(out).unwrap()
    }

    #[tokio::test]
    async fn lists_and_reads() {
        let d = tempfile::tempdir().unwrap();
        let (ra, rb) = (d.path().join("a"), d.path().join("b"));
        let (a, b) = (container_dir(&ra), container_dir(&rb));
        std::fs::write(a.join("stdout"), "0123456789").unwrap();
        std::fs::write(b.join("stdout"), "shadowed").unwrap();
        std::fs::write(b.join("syslog"), "s").unwrap();
        let roots = vec![ra.clone(), rb, d.path().join("missing")];
        let files = list(&roots, &cid()).await.unwrap();
        let names: Vec<_> = files.iter().map(|f| (f.name.as_str(), f.size)).collect();
        assert_eq!(names, vec![("stdout", 10), ("syslog", 1)]);
        assert!(files[0].modified_ms > 0);
        assert!(list(&[d.path().join("none")], &cid()).await.is_none());
        let size = |n| Selection::Size(n);
        assert_eq!(
            read_all(&roots, "stdout", Selection::Whole).await,
            "0123456789"
        );
        assert_eq!(read_all(&roots, "stdout", size(3)).await, "012");
        assert_eq!(read_all(&roots, "stdout", size(-3)).await, "789");
        assert_eq!(read_all(&roots, "stdout", size(-300)).await, "0123456789");
        let range = Selection::Range {
            start: Some(2),
            end: Some(5),
        };
        assert_eq!(read_all(&roots, "stdout", range).await, "234");
        assert_eq!(read_all(&roots, "syslog", Selection::Whole).await, "s");
        assert!(matches!(
            open_log(&roots, &cid(), "nothing").await,
            Err(LogError::Missing { .. })
        ));
    }

    /// Everything a container could put in its log directory in place of a log file is
    /// refused, by name and reason, and left out of the listing.
    #[tokio::test]
    async fn links_fifos_directories_and_hard_links_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("logs");
        let dir = container_dir(&root);
        let secret = d.path().join("secret");
        std::fs::write(&secret, "MARKER").unwrap();
        std::fs::write(dir.join("stdout"), "fine").unwrap();
        std::os::unix::fs::symlink(&secret, dir.join("stderr")).unwrap();
        std::os::unix::fs::symlink("stdout", dir.join("relative")).unwrap();
        nix::unistd::mkfifo(&dir.join("fifo"), Mode::S_IRWXU).unwrap();
        std::fs::create_dir(dir.join("subdir")).unwrap();
        std::fs::hard_link(&secret, dir.join("hard")).unwrap();
        let roots = vec![root.clone()];

        let names: Vec<_> = list(&roots, &cid())
            .await
            .unwrap()
            .into_iter()
            .map(|f| f.name)
            .collect();
        assert_eq!(names, vec!["stdout"]);

        let err = |name: &'static str| {
            let roots = roots.clone();
            async move { open_log(&roots, &cid(), name).await.unwrap_err() }
        };
        let e = err("stderr").await;
        assert!(
            matches!(e, LogError::Symlink { .. }) && e.is_refusal(),
            "{e}"
        );
        assert!(e.to_string().contains("'stderr' is a symbolic link"), "{e}");
        assert!(matches!(err("relative").await, LogError::Symlink { .. }));
        // A fifo is refused at once: nothing waits for a writer.
        let e = tokio::time::timeout(std::time::Duration::from_secs(5), err("fifo"))
            .await
            .expect("a fifo must not hang the NM");
        assert!(
            matches!(e, LogError::NotRegular { kind: "fifo", .. }),
            "{e}"
        );
        assert!(matches!(
            err("subdir").await,
            LogError::NotRegular {
                kind: "directory",
                ..
            }
        ));
        let e = err("hard").await;
        assert!(matches!(e, LogError::HardLinked { links: 2, .. }), "{e}");
        for bad in ["..", "../stdout", ".", "a/b", ""] {
            let e = open_log(&roots, &cid(), bad).await.unwrap_err();
            assert!(matches!(e, LogError::InvalidName { .. }), "{bad:?}: {e}");
            assert!(!e.is_refusal());
        }
        // The one regular file is still served.
        assert_eq!(read_all(&roots, "stdout", Selection::Whole).await, "fine");
    }

    /// A container directory (or its application directory) that is a link is not entered.
    #[tokio::test]
    async fn a_linked_directory_component_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let elsewhere = d.path().join("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("stdout"), "MARKER").unwrap();

        // The container's own directory is a link.
        let root = d.path().join("logs1");
        let app = root.join(cid().application_id().to_string());
        std::fs::create_dir_all(&app).unwrap();
        std::os::unix::fs::symlink(&elsewhere, app.join(cid().to_string())).unwrap();
        let roots = vec![root];
        let e = open_log(&roots, &cid(), "stdout").await.unwrap_err();
        assert!(
            matches!(
                e,
                LogError::UnsafeDir {
                    kind: "symbolic link",
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.is_refusal());
        assert!(list(&roots, &cid()).await.is_none());

        // The application's directory is a link.
        let root = d.path().join("logs2");
        std::fs::create_dir_all(elsewhere.join(cid().to_string())).unwrap();
        std::fs::write(elsewhere.join(cid().to_string()).join("stdout"), "MARKER").unwrap();
        std::fs::create_dir_all(&root).unwrap();
        std::os::unix::fs::symlink(&elsewhere, root.join(cid().application_id().to_string()))
            .unwrap();
        let e = open_log(&[root], &cid(), "stdout").await.unwrap_err();
        assert!(matches!(e, LogError::UnsafeDir { .. }), "{e}");
    }

    #[test]
    fn selections() {
        let r = |start, end| Selection::Range { start, end };
        assert_eq!(Selection::Whole.bytes(10), (0, 10));
        assert_eq!(Selection::Size(3).bytes(10), (0, 3));
        assert_eq!(Selection::Size(-3).bytes(10), (7, 3));
        assert_eq!(Selection::Size(0).bytes(10), (0, 10));
        assert_eq!(r(Some(4), None).bytes(10), (4, 6));
        assert_eq!(r(Some(10), None).bytes(10), (10, 0));
        assert_eq!(r(Some(25), None).bytes(10), (10, 0));
        assert_eq!(r(Some(2), Some(5)).bytes(10), (2, 3));
        assert_eq!(r(Some(5), Some(2)).bytes(10), (5, 0));
        assert_eq!(r(Some(-4), None).bytes(10), (6, 4));
        assert_eq!(r(None, Some(-4)).bytes(10), (0, 6));
        assert_eq!(r(Some(-40), Some(40)).bytes(10), (0, 10));
    }

    #[tokio::test]
    async fn a_growing_file_is_read_from_an_offset() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("logs");
        let p = container_dir(&root).join("stdout");
        std::fs::write(&p, "one\n").unwrap();
        let roots = vec![root];
        let read = |start| {
            let roots = roots.clone();
            async move {
                let log = open_log(&roots, &cid(), "stdout").await.unwrap();
                let s = stream_selection(
                    log,
                    Selection::Range {
                        start: Some(start),
                        end: None,
                    },
                )
                .await
                .unwrap();
                let chunks: Vec<_> = s.collect().await;
                chunks
                    .into_iter()
                    .flat_map(|c| c.unwrap().to_vec())
                    .collect::<Vec<u8>>()
            }
        };
        let first = read(0).await;
        assert_eq!(first, b"one\n");
        std::fs::write(&p, "one\ntwo\n").unwrap();
        assert_eq!(read(first.len() as i64).await, b"two\n");
        assert!(read(8).await.is_empty());
    }
}
