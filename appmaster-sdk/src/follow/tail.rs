//! Following a container's log files through its NM's log REST
//! (`/ws/v1/node/containerlogs/{id}/{file}?start=&end=`): the bytes already printed are the
//! next read's `start`, lines are cut where they end, and each is printed with its source,
//! `[rank 1 stdout] line`.
//!
//! A follow may start with the last N lines of each file (`spindle logs -tail N`): the
//! file's size comes from the NM's log listing, the read starts [`tail_window`] bytes before
//! its end (the partial line there is dropped), and only the last N complete lines of that
//! first read are printed.

use std::collections::VecDeque;

use reqwest::Method;
use spindle_common::ids::ContainerId;

use crate::http::Http;
use crate::nm_client::parse_log_files;

/// The most bytes of one log file read per look.
const LOG_CHUNK: u64 = 1 << 20;
/// The longest unfinished line kept back for its end.
pub const MAX_LINE: usize = 64 * 1024;

/// How many bytes before a file's end a tail of `lines` lines starts reading: room for
/// lines of up to 1 KiB on average, at least 64 KiB, at most [`LOG_CHUNK`] * 16.
pub fn tail_window(lines: usize) -> u64 {
    (lines as u64)
        .saturating_mul(1024)
        .clamp(64 * 1024, LOG_CHUNK * 16)
}

/// One followed log file: the bytes printed so far and an unfinished last line.
#[derive(Debug)]
pub struct TailFile {
    pub name: String,
    /// Bytes of the file already read.
    pub offset: u64,
    partial: Vec<u8>,
    /// The read started inside a line: the bytes up to the first newline are dropped.
    mid_line: bool,
}

impl TailFile {
    pub fn new(name: &str) -> Self {
        Self::at(name, 0)
    }

    /// Reading from `offset`; a line cut there is dropped.
    pub fn at(name: &str, offset: u64) -> Self {
        Self {
            name: name.to_string(),
            offset,
            partial: Vec::new(),
            mid_line: offset > 0,
        }
    }

    /// Takes newly read bytes; returns the lines they complete (without their newline). An
    /// unfinished line longer than [`MAX_LINE`] bytes is given out as it is.
    pub fn take(&mut self, bytes: &[u8]) -> Vec<String> {
        self.offset += bytes.len() as u64;
        let mut bytes = bytes;
        if self.mid_line {
            match bytes.iter().position(|b| *b == b'\n') {
                Some(i) => {
                    bytes = &bytes[i + 1..];
                    self.mid_line = false;
                }
                None => return Vec::new(),
            }
        }
        self.partial.extend_from_slice(bytes);
        let mut lines: Vec<String> = match self.partial.iter().rposition(|b| *b == b'\n') {
            Some(last) => {
                let rest = self.partial.split_off(last + 1);
                let done = std::mem::replace(&mut self.partial, rest);
                done[..done.len() - 1]
                    .split(|b| *b == b'\n')
                    .map(|l| {
                        String::from_utf8_lossy(l.strip_suffix(b"\r").unwrap_or(l)).into_owned()
                    })
                    .collect()
            }
            None => Vec::new(),
        };
        if self.partial.len() > MAX_LINE {
            lines.extend(self.rest());
        }
        lines
    }

    /// The unfinished last line, if any (at the end of the output).
    pub fn rest(&mut self) -> Option<String> {
        (!self.partial.is_empty())
            .then(|| String::from_utf8_lossy(&std::mem::take(&mut self.partial)).into_owned())
    }
}

/// A followed container's log files (stdout and stderr, unless told others).
#[derive(Debug)]
pub struct LogTail {
    pub container: ContainerId,
    node: String,
    label: String,
    files: Vec<TailFile>,
    /// The first look prints only the last this many lines of each file.
    tail: Option<usize>,
}

impl LogTail {
    /// Follows `files` of `container` on the NM at `node` (its web address), each line
    /// printed as `[label file] line`; with `tail`, starting with the last lines.
    pub fn new(
        container: ContainerId,
        node: String,
        label: String,
        files: &[&str],
        tail: Option<usize>,
    ) -> Self {
        Self {
            container,
            node,
            label,
            files: files.iter().map(|f| TailFile::new(f)).collect(),
            tail,
        }
    }

    /// Prints the lines written since the last look, `[rank 0 stdout] line`.
    pub async fn poll(&mut self, client: &reqwest::Client, out: &mut (dyn FnMut(&str) + Send)) {
        let http = Http::with_client(client.clone(), &self.node);
        let tail = self.tail.take();
        if let Some(n) = tail {
            self.start_tails(&http, n).await;
        }
        for f in &mut self.files {
            let mut kept: VecDeque<String> = VecDeque::new();
            loop {
                let path = format!(
                    "/ws/v1/node/containerlogs/{}/{}?start={}&end={}",
                    self.container,
                    urlencoding::encode(&f.name),
                    f.offset,
                    f.offset + LOG_CHUNK
                );
                let (rb, url) = http.request(Method::GET, &path);
                let bytes = match http.send_ok(rb, &url).await {
                    Ok(resp) => match resp.bytes().await {
                        Ok(b) => b,
                        Err(e) => {
                            tracing::debug!(%url, error = %e, "log read");
                            break;
                        }
                    },
                    // Not written yet, or the NM is away for a moment: the next look tells.
                    Err(e) => {
                        tracing::debug!(%url, error = %e, "log read");
                        break;
                    }
                };
                for l in f.take(&bytes) {
                    let line = format!("[{} {}] {l}", self.label, f.name);
                    match tail {
                        Some(n) => {
                            kept.push_back(line);
                            if kept.len() > n {
                                kept.pop_front();
                            }
                        }
                        None => out(&line),
                    }
                }
                if (bytes.len() as u64) < LOG_CHUNK {
                    break;
                }
            }
            for l in kept {
                out(&l);
            }
        }
    }

    /// Moves each file's start to [`tail_window`] bytes before its end, as the NM lists it.
    async fn start_tails(&mut self, http: &Http, lines: usize) {
        let path = format!("/ws/v1/node/containers/{}/logs", self.container);
        let listed = match http.get_text(&path).await {
            Ok(t) => serde_json::from_str(&t)
                .map(|v| parse_log_files(&v))
                .unwrap_or_default(),
            Err(e) => {
                tracing::debug!(error = %e, "log listing for a tail");
                Vec::new()
            }
        };
        for f in &mut self.files {
            let size = listed
                .iter()
                .find(|l| l.file_name == f.name)
                .and_then(|l| l.file_size)
                .unwrap_or(0);
            *f = TailFile::at(&f.name, size.saturating_sub(tail_window(lines)));
        }
    }

    /// Prints what is left of unfinished lines.
    pub fn flush(&mut self, out: &mut (dyn FnMut(&str) + Send)) {
        for f in &mut self.files {
            if let Some(l) = f.rest() {
                out(&format!("[{} {}] {l}", self.label, f.name));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_cut_where_they_end() {
        let mut f = TailFile::new("stdout");
        assert!(f.take(b"hel").is_empty());
        assert_eq!(f.take(b"lo\nwor"), ["hello"]);
        assert_eq!(f.take(b"ld\r\n\nlast"), ["world", ""]);
        assert_eq!(f.offset, 18);
        assert_eq!(f.rest().as_deref(), Some("last"));
        assert_eq!(f.rest(), None);
        // A character split between two reads is whole in its line.
        let e = "é".as_bytes();
        assert!(f.take(&e[..1]).is_empty());
        assert_eq!(f.take(&[&e[1..], b"\n"].concat()), ["é"]);
        // A line without end is not kept back for ever.
        let long = vec![b'x'; MAX_LINE + 1];
        assert_eq!(f.take(&long), [String::from_utf8(long).unwrap()]);
        assert_eq!(f.rest(), None);
    }

    #[test]
    fn a_read_that_starts_inside_a_line_drops_that_line() {
        let mut f = TailFile::at("stdout", 10);
        assert!(f.take(b"tail of a cut line").is_empty());
        assert_eq!(f.take(b" still\nwhole\nnext"), ["whole"]);
        assert_eq!(f.offset, 10 + 18 + 17);
        assert_eq!(f.rest().as_deref(), Some("next"));
        // From the start nothing is dropped.
        assert_eq!(TailFile::at("stdout", 0).take(b"a\n"), ["a"]);
        assert_eq!(tail_window(1), 64 * 1024);
        assert_eq!(tail_window(1000), 1000 * 1024);
        assert_eq!(tail_window(usize::MAX), LOG_CHUNK * 16);
    }
}
