//! Container log files on local disk: where they are, which names may be asked for, and
//! how to read them.
//!
//! A container's logs live in `<log-dir>/<appId>/<containerId>/` for every log dir, a path
//! the container id alone determines, so they are served straight from disk: for running and
//! finished containers alike, and for containers this NM has already forgotten.

use std::io::SeekFrom;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use axum::body::Bytes;
use futures::Stream;
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

/// `<log-dir>/<appId>/<containerId>` for every log dir.
pub fn container_log_dirs(log_roots: &[PathBuf], id: &ContainerId) -> Vec<PathBuf> {
    log_roots
        .iter()
        .map(|r| r.join(id.application_id().to_string()).join(id.to_string()))
        .collect()
}

/// A log file name is one plain path component: no separators, no `.`/`..`, no NUL.
pub fn valid_file_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0'])
}

/// The files of a container's log dirs (first dir wins on a name clash), sorted by name.
/// None when no log dir of the container exists.
pub async fn list(dirs: &[PathBuf]) -> Option<Vec<LogFile>> {
    let mut found_dir = false;
    let mut files: Vec<LogFile> = Vec::new();
    for d in dirs {
        let Ok(mut rd) = tokio::fs::read_dir(d).await else {
            continue;
        };
        found_dir = true;
        while let Ok(Some(entry)) = rd.next_entry().await {
            let Ok(meta) = entry.metadata().await else {
                continue;
            };
            if !meta.is_file() {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            if files.iter().any(|f| f.name == name) {
                continue;
            }
            let modified_ms = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0);
            files.push(LogFile {
                name,
                size: meta.len(),
                modified_ms,
            });
        }
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    found_dir.then_some(files)
}

/// Finds a log file by name in a container's log dirs.
pub async fn find(dirs: &[PathBuf], name: &str) -> Option<PathBuf> {
    if !valid_file_name(name) {
        return None;
    }
    for d in dirs {
        let p = d.join(name);
        if tokio::fs::metadata(&p).await.is_ok_and(|m| m.is_file()) {
            return Some(p);
        }
    }
    None
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

/// Streams a log file. `size` as in YARN: positive is the first `size` bytes, negative the
/// last `|size|` bytes, absent (or 0) the whole file.
pub async fn open(
    path: &Path,
    size: Option<i64>,
) -> std::io::Result<impl Stream<Item = std::io::Result<Bytes>> + Send + 'static> {
    open_selection(path, size.map_or(Selection::Whole, Selection::Size)).await
}

/// Streams the selected bytes of a log file.
pub async fn open_selection(
    path: &Path,
    selection: Selection,
) -> std::io::Result<impl Stream<Item = std::io::Result<Bytes>> + Send + 'static> {
    let mut file = tokio::fs::File::open(path).await?;
    let len = file.metadata().await?.len();
    let (start, count) = selection.bytes(len);
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

/// YARN's `Times.format` form, in UTC: `Thu Mar 07 12:34:56 +0000 2024`.
pub fn format_time(ms: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{} {} {:02} {:02}:{:02}:{:02} +0000 {}",
        DAYS[(days % 7) as usize],
        MONTHS[(m - 1) as usize],
        d,
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60,
        y
    )
}

/// Days since 1970-01-01 to (year, month 1-12, day 1-31); Howard Hinnant's algorithm.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
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

    #[test]
    fn times() {
        assert_eq!(format_time(0), "Thu Jan 01 00:00:00 +0000 1970");
        // 2024-03-07T12:34:56Z
        assert_eq!(
            format_time(1_709_814_896_000),
            "Thu Mar 07 12:34:56 +0000 2024"
        );
        // 2000-02-29T23:59:59Z, a leap day
        assert_eq!(
            format_time(951_868_799_000),
            "Tue Feb 29 23:59:59 +0000 2000"
        );
    }

    async fn read_all(path: &Path, size: Option<i64>) -> String {
        let s = open(path, size).await.unwrap();
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
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        std::fs::write(a.join("stdout"), "0123456789").unwrap();
        std::fs::write(b.join("stdout"), "shadowed").unwrap();
        std::fs::write(b.join("syslog"), "s").unwrap();
        let dirs = vec![a.clone(), b, d.path().join("missing")];
        let files = list(&dirs).await.unwrap();
        let names: Vec<_> = files.iter().map(|f| (f.name.as_str(), f.size)).collect();
        assert_eq!(names, vec![("stdout", 10), ("syslog", 1)]);
        assert!(list(&[d.path().join("none")]).await.is_none());
        let p = find(&dirs, "stdout").await.unwrap();
        assert_eq!(p, a.join("stdout"));
        assert!(find(&dirs, "..").await.is_none());
        assert_eq!(read_all(&p, None).await, "0123456789");
        assert_eq!(read_all(&p, Some(3)).await, "012");
        assert_eq!(read_all(&p, Some(-3)).await, "789");
        assert_eq!(read_all(&p, Some(-300)).await, "0123456789");
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
        let p = d.path().join("stdout");
        std::fs::write(&p, "one\n").unwrap();
        let path = p.as_path();
        let read = |start| async move {
            let s = open_selection(
                path,
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
        };
        let first = read(0).await;
        assert_eq!(first, b"one\n");
        std::fs::write(&p, "one\ntwo\n").unwrap();
        assert_eq!(read(first.len() as i64).await, b"two\n");
        assert!(read(8).await.is_empty());
    }
}
