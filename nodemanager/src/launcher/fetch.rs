//! Fetching a remote local resource: one path for both remote forms of
//! `spindle_common::resource_url` — a blob of the RM's blob store (`spindle-rm:///blobs/...`,
//! fetched from the RM this NM reports to, never from a host a URL names, with the
//! container's application's container token) and an `http(s)://` URL (fetched as it is;
//! its `#sha256=` fragment is never sent).
//!
//! The body is streamed into a new file (never held in memory) while it is counted and
//! hashed; then the size must be the resource's `size` (when it is not negative) and the
//! SHA-256 the blob's digest or the URL's fragment. Any difference refuses the resource with
//! a [`FetchError`] naming the resource, the URL and both values, which becomes the
//! container's diagnostics, and the file is removed. `localize` places what was fetched.
//!
//! Runs on the launcher's blocking thread; the request runs on the NM's runtime
//! (`Handle::block_on`).

use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::libc;
use spindle_common::image_ref::digest::Hasher;
use spindle_common::image_ref::Digest;
use spindle_common::resource_url::LOCALIZER_BLOBS_PATH;
use spindle_common::tls::ClientTls;

/// Where a remote resource comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Remote {
    /// A blob of the RM's blob store.
    Rm(Digest),
    /// An HTTP(S) URL (fragment removed) and the SHA-256 it must have, if named.
    Http { url: String, sha256: Option<Digest> },
}

/// Why a remote resource was refused: one variant per reason.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("local resource '{key}': {url} answered {status}: {body}")]
    Status {
        key: String,
        url: String,
        status: u16,
        body: String,
    },
    #[error("local resource '{key}': cannot fetch {url}: {detail}")]
    Request {
        key: String,
        url: String,
        detail: String,
    },
    #[error("local resource '{key}': {url} sent {got} bytes, but the resource's size is {declared} (set size to -1 when it is not known); refused")]
    SizeMismatch {
        key: String,
        url: String,
        declared: i64,
        got: u64,
    },
    #[error("local resource '{key}': the bytes from {url} have digest {actual}, not the expected {expected}; refused")]
    DigestMismatch {
        key: String,
        url: String,
        expected: Digest,
        actual: Digest,
    },
    #[error("local resource '{key}': {url} is a blob of the ResourceManager's blob store, and this container has no credential to fetch it (its NodeManager holds no container-token master key)")]
    NoCredential { key: String, url: String },
    #[error("local resource '{key}': cannot fetch {url}: this NodeManager's executor has no fetcher (remote resources are not supported here)")]
    NoFetcher { key: String, url: String },
    #[error("local resource '{key}': cannot write {path}: {source}")]
    Write {
        key: String,
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The NM's client for remote resources.
#[derive(Debug, Clone)]
pub struct Fetcher {
    client: reqwest::Client,
    /// The RM's base URL (`http(s)://host:port`).
    rm_base: String,
    runtime: tokio::runtime::Handle,
}

impl Fetcher {
    /// A fetcher for the RM at `rm_base`, trusting `tls`'s roots, running requests on
    /// `runtime`.
    pub fn new(
        rm_base: String,
        tls: &ClientTls,
        runtime: tokio::runtime::Handle,
    ) -> Result<Self, reqwest::Error> {
        let builder = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(Duration::from_secs(120));
        let client = spindle_common::tls::with_roots(builder, tls)?.build()?;
        Ok(Self {
            client,
            rm_base: rm_base.trim_end_matches('/').to_string(),
            runtime,
        })
    }

    /// The URL `remote` is fetched from.
    pub fn url_of(&self, remote: &Remote) -> String {
        match remote {
            Remote::Rm(d) => format!("{}{LOCALIZER_BLOBS_PATH}/{d}", self.rm_base),
            Remote::Http { url, .. } => url.clone(),
        }
    }

    /// Fetches `remote` into the new file `to` (created `0600`, never through a link),
    /// checking the size against `declared_size` (when not negative) and the digest;
    /// `token` is the container token RM blobs are fetched with. Returns the file, read and
    /// written through the one descriptor and positioned at its start, so what was checked
    /// is what is read (the path is never opened again). On any failure `to` is removed.
    pub fn fetch(
        &self,
        key: &str,
        remote: &Remote,
        declared_size: i64,
        token: Option<&str>,
        to: &Path,
    ) -> Result<fs::File, FetchError> {
        let r = self.fetch_inner(key, remote, declared_size, token, to);
        if r.is_err() {
            let _ = fs::remove_file(to);
        }
        r
    }

    fn fetch_inner(
        &self,
        key: &str,
        remote: &Remote,
        declared_size: i64,
        token: Option<&str>,
        to: &Path,
    ) -> Result<fs::File, FetchError> {
        let url = self.url_of(remote);
        let mut req = self.client.get(&url);
        if let Remote::Rm(_) = remote {
            let token = token.ok_or_else(|| FetchError::NoCredential {
                key: key.into(),
                url: url.clone(),
            })?;
            req = req.bearer_auth(token);
        }
        let write_err = |source| FetchError::Write {
            key: key.into(),
            path: to.to_path_buf(),
            source,
        };
        let mut file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(to)
            .map_err(write_err)?;
        let request_err = |e: reqwest::Error| FetchError::Request {
            key: key.into(),
            url: url.clone(),
            detail: e.to_string(),
        };
        let (got, actual) = self.runtime.block_on(async {
            let mut resp = req.send().await.map_err(request_err)?;
            let status = resp.status();
            if !status.is_success() {
                let body = resp.text().await.unwrap_or_default();
                return Err(FetchError::Status {
                    key: key.into(),
                    url: url.clone(),
                    status: status.as_u16(),
                    body: body.chars().take(500).collect(),
                });
            }
            let mut hasher = Hasher::default();
            let mut got = 0u64;
            let mut out = std::io::BufWriter::with_capacity(256 * 1024, &mut file);
            while let Some(chunk) = resp.chunk().await.map_err(request_err)? {
                got += chunk.len() as u64;
                // More than declared: stopped at once, not after the whole body.
                if declared_size >= 0 && got > declared_size.unsigned_abs() {
                    return Err(FetchError::SizeMismatch {
                        key: key.into(),
                        url: url.clone(),
                        declared: declared_size,
                        got,
                    });
                }
                hasher.update(&chunk);
                out.write_all(&chunk).map_err(write_err)?;
            }
            out.flush().map_err(write_err)?;
            Ok((got, hasher.finish()))
        })?;
        if declared_size >= 0 && got != declared_size.unsigned_abs() {
            return Err(FetchError::SizeMismatch {
                key: key.into(),
                url,
                declared: declared_size,
                got,
            });
        }
        let expected = match remote {
            Remote::Rm(d) => Some(d),
            Remote::Http { sha256, .. } => sha256.as_ref(),
        };
        if let Some(expected) = expected.filter(|e| **e != actual) {
            return Err(FetchError::DigestMismatch {
                key: key.into(),
                url,
                expected: expected.clone(),
                actual,
            });
        }
        use std::io::Seek;
        file.rewind().map_err(write_err)?;
        Ok(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-shot HTTP server on 127.0.0.1 answering every request with `body`; the
    /// requests' heads are returned through the channel.
    fn serve(body: Vec<u8>) -> (String, std::sync::mpsc::Receiver<String>) {
        use std::io::Read;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for s in l.incoming().take(9) {
                let Ok(mut s) = s else { return };
                let mut buf = [0u8; 4096];
                let n = s.read(&mut buf).unwrap_or(0);
                let _ = tx.send(String::from_utf8_lossy(&buf[..n]).into_owned());
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = s.write_all(&body);
            }
        });
        (format!("http://{addr}"), rx)
    }

    fn fetcher(base: &str) -> Fetcher {
        Fetcher::new(
            base.into(),
            &ClientTls::default(),
            tokio::runtime::Handle::current(),
        )
        .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn both_forms_are_fetched_checked_and_refused_by_name() {
        let body = b"hello, shipped world\n".to_vec();
        let d = Digest::of(&body);
        let (base, heads) = serve(body.clone());
        let dir = tempfile::tempdir().unwrap();
        let f = fetcher(&base);
        let out = dir.path().to_path_buf();
        let (b2, d2) = (base.clone(), d.clone());
        let r = tokio::task::spawn_blocking(move || {
            let n = body.len() as i64;
            let rm = Remote::Rm(d2.clone());
            f.fetch("a", &rm, n, Some("TOKEN"), &out.join("a"))?;
            let mut back = String::new();
            std::io::Read::read_to_string(
                &mut f.fetch("a2", &rm, n, Some("T"), &out.join("a2"))?,
                &mut back,
            )
            .unwrap();
            assert_eq!(back, "hello, shipped world\n");
            let http = Remote::Http {
                url: format!("{b2}/x.tgz"),
                sha256: Some(d2.clone()),
            };
            f.fetch("b", &http, -1, None, &out.join("b"))?;
            // Each refusal, named; nothing left behind.
            let size = f
                .fetch("c", &http, n + 1, None, &out.join("c"))
                .unwrap_err();
            let wrong = Remote::Http {
                url: format!("{b2}/x.tgz"),
                sha256: Some(Digest::of(b"other")),
            };
            let digest = f.fetch("d", &wrong, n, None, &out.join("d")).unwrap_err();
            let short = f
                .fetch("e", &http, n - 1, None, &out.join("e"))
                .unwrap_err();
            let cred = f.fetch("f", &rm, n, None, &out.join("f")).unwrap_err();
            Ok::<_, FetchError>((size, digest, short, cred))
        })
        .await
        .unwrap()
        .unwrap();
        let (size, digest, short, cred) = r;
        assert!(matches!(size, FetchError::SizeMismatch { .. }), "{size}");
        assert!(matches!(short, FetchError::SizeMismatch { .. }), "{short}");
        assert!(
            matches!(digest, FetchError::DigestMismatch { .. }),
            "{digest}"
        );
        assert!(digest.to_string().contains("refused"), "{digest}");
        assert!(matches!(cred, FetchError::NoCredential { .. }), "{cred}");
        assert_eq!(
            fs::read(dir.path().join("a")).unwrap(),
            b"hello, shipped world\n"
        );
        assert_eq!(
            fs::read(dir.path().join("b")).unwrap(),
            b"hello, shipped world\n"
        );
        for gone in ["c", "d", "e", "f"] {
            assert!(!dir.path().join(gone).exists(), "{gone}");
        }
        // The RM blob went to the RM's localizer path with the token; the URL as it is,
        // without one.
        let heads: Vec<String> = heads.try_iter().map(|h| h.to_ascii_lowercase()).collect();
        let blob_get = format!("get {LOCALIZER_BLOBS_PATH}/{d} ").to_ascii_lowercase();
        assert!(
            heads
                .iter()
                .any(|h| h.starts_with(&blob_get) && h.contains("authorization: bearer token")),
            "{heads:?}"
        );
        let url_gets: Vec<&String> = heads
            .iter()
            .filter(|h| h.starts_with("get /x.tgz "))
            .collect();
        assert!(!url_gets.is_empty(), "{heads:?}");
        assert!(
            url_gets.iter().all(|h| !h.contains("authorization")),
            "{heads:?}"
        );
    }
}
