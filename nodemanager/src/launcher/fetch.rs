//! Fetching a remote local resource: one path for both remote forms of
//! `spindle_common::resource_url` — a blob of the RM's blob store (`spindle-rm:///blobs/...`,
//! fetched from the RMs this NM reports to, failing over to the active under HA as
//! heartbeats do, never from a host a URL names, with the container's application's
//! container token) and an `http(s)://` URL (fetched as it is;
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
use std::sync::Arc;
use std::time::Duration;

use nix::libc;
use spindle_common::failover::{FailoverPolicy, Next as Failover, Rotation};
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
    /// For `http(s)://` URLs (redirects followed, as any client does).
    client: reqwest::Client,
    /// For the RMs: a standby's 307 is followed here, by the rotation, with the token kept.
    rm_client: reqwest::Client,
    /// The RMs' base URLs (`http(s)://host:port`): one, or every HA RM, among which a blob
    /// download fails over as heartbeats do ([`spindle_common::failover`]).
    rms: Arc<Rotation>,
    runtime: tokio::runtime::Handle,
}

impl Fetcher {
    /// A fetcher for the RMs at `rm_bases` (the first tried first), failing over among them
    /// under `policy`, trusting `tls`'s roots, running requests on `runtime`.
    pub fn new(
        rm_bases: Vec<String>,
        policy: FailoverPolicy,
        tls: &ClientTls,
        runtime: tokio::runtime::Handle,
    ) -> Result<Self, reqwest::Error> {
        let builder = || {
            reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(10))
                .read_timeout(Duration::from_secs(120))
        };
        let client = spindle_common::tls::with_roots(builder(), tls)?.build()?;
        let rm_client = spindle_common::tls::with_roots(
            builder().redirect(reqwest::redirect::Policy::none()),
            tls,
        )?
        .build()?;
        let bases = rm_bases
            .iter()
            .map(|b| b.trim_end_matches('/').to_string())
            .collect();
        Ok(Self {
            client,
            rm_client,
            rms: Arc::new(Rotation::new(bases, policy)),
            runtime,
        })
    }

    /// The URL `remote` is fetched from (an RM blob: from the RM in use now).
    pub fn url_of(&self, remote: &Remote) -> String {
        match remote {
            Remote::Rm(d) => format!("{}{LOCALIZER_BLOBS_PATH}/{d}", self.rms.current()),
            Remote::Http { url, .. } => url.clone(),
        }
    }

    /// Sends the GET of `remote`: an URL once; an RM blob to the RM in use, failing over
    /// (a refused connection, a timeout, a standby's 503, or its 307 naming the active)
    /// within the policy. The answer, successful, and the URL that gave it.
    async fn send(
        &self,
        key: &str,
        remote: &Remote,
        token: Option<&str>,
    ) -> Result<(reqwest::Response, String), FetchError> {
        let request_err = |url: &str, e: reqwest::Error| FetchError::Request {
            key: key.into(),
            url: url.to_string(),
            detail: e.to_string(),
        };
        if let Remote::Http { url, .. } = remote {
            let resp = self
                .client
                .get(url)
                .send()
                .await
                .map_err(|e| request_err(url, e))?;
            return success(key, url.clone(), resp).await;
        }
        loop {
            let base = self.rms.current().to_string();
            let url = self.url_of(remote);
            let mut req = self.rm_client.get(&url);
            if let Some(t) = token {
                req = req.bearer_auth(t);
            }
            let failed = match req.send().await {
                Err(e) if e.is_connect() || e.is_timeout() => request_err(&url, e),
                Err(e) => return Err(request_err(&url, e)),
                Ok(resp) => {
                    let status = resp.status();
                    if status == reqwest::StatusCode::TEMPORARY_REDIRECT {
                        if let Some(active) = location_origin(&resp) {
                            self.rms.follow(&active);
                        }
                    } else if status != reqwest::StatusCode::SERVICE_UNAVAILABLE {
                        self.rms.succeeded();
                        return success(key, url, resp).await;
                    }
                    status_error(key, url, resp).await
                }
            };
            match self.rms.failed(&base) {
                Failover::Retry { address, pause } => {
                    tracing::info!(from = %base, to = %address, error = %failed, "blob download: ResourceManager failover");
                    tokio::time::sleep(pause).await;
                }
                Failover::GiveUp { .. } => return Err(failed),
            }
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
        let token = match remote {
            Remote::Rm(_) => Some(token.ok_or_else(|| FetchError::NoCredential {
                key: key.into(),
                url: self.url_of(remote),
            })?),
            Remote::Http { .. } => None,
        };
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
        let (got, actual, url) = self.runtime.block_on(async {
            let (mut resp, url) = self.send(key, remote, token).await?;
            let request_err = |e: reqwest::Error| FetchError::Request {
                key: key.into(),
                url: url.clone(),
                detail: e.to_string(),
            };
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
            Ok((got, hasher.finish(), url.clone()))
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

/// `resp` when it is a success, else [`FetchError::Status`] with its body's start.
async fn success(
    key: &str,
    url: String,
    resp: reqwest::Response,
) -> Result<(reqwest::Response, String), FetchError> {
    if resp.status().is_success() {
        return Ok((resp, url));
    }
    Err(status_error(key, url, resp).await)
}

/// [`FetchError::Status`] of an answer that is not a success, with its body's start.
async fn status_error(key: &str, url: String, resp: reqwest::Response) -> FetchError {
    let status = resp.status().as_u16();
    let body = resp.text().await.unwrap_or_default();
    FetchError::Status {
        key: key.into(),
        url,
        status,
        body: body.chars().take(500).collect(),
    }
}

/// The origin (`scheme://host:port`) a 307's `Location` names.
fn location_origin(resp: &reqwest::Response) -> Option<String> {
    let loc = resp
        .headers()
        .get(reqwest::header::LOCATION)?
        .to_str()
        .ok()?;
    let url = reqwest::Url::parse(loc).ok()?;
    Some(url.origin().ascii_serialization())
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
            vec![base.into()],
            FailoverPolicy::default(),
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

    /// A one-shot server answering every request with the raw `head` (no body).
    fn answer_with(head: String) -> String {
        use std::io::Read;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in l.incoming().take(9) {
                let Ok(mut s) = s else { return };
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                let _ = s.write_all(head.as_bytes());
            }
        });
        format!("http://{addr}")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_rm_blob_follows_the_active_past_a_dead_rm_and_a_standby() {
        let body = b"shipped across a failover\n".to_vec();
        let d = Digest::of(&body);
        let (active, heads) = serve(body.clone());
        // A dead RM (nothing listens), then a standby naming the active in its 307.
        let dead = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            format!("http://{}", l.local_addr().unwrap())
        };
        let standby = answer_with(format!(
            "HTTP/1.1 307 Temporary Redirect\r\nLocation: {active}{LOCALIZER_BLOBS_PATH}/{d}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        ));
        let policy = FailoverPolicy {
            max_attempts: 4,
            sleep_base: Duration::from_millis(10),
            sleep_max: Duration::from_millis(20),
        };
        let f = Fetcher::new(
            vec![dead, standby, active.clone()],
            policy,
            &ClientTls::default(),
            tokio::runtime::Handle::current(),
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let to = dir.path().join("a");
        let f2 = f.clone();
        let rm = Remote::Rm(d.clone());
        let n = body.len() as i64;
        tokio::task::spawn_blocking(move || f2.fetch("a", &rm, n, Some("TOKEN"), &to))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(fs::read(dir.path().join("a")).unwrap(), body);
        // The active got the token; later downloads go to it first.
        let head = heads.try_iter().next().unwrap().to_ascii_lowercase();
        assert!(head.contains("authorization: bearer token"), "{head}");
        assert!(f.url_of(&Remote::Rm(d)).starts_with(&active));
        // With every RM gone, the download gives up within the policy, by name.
        let gone = Fetcher::new(
            vec![answer_with(
                "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\nConnection: close\r\n\r\nnone".into(),
            )],
            policy,
            &ClientTls::default(),
            tokio::runtime::Handle::current(),
        )
        .unwrap();
        let to = dir.path().join("b");
        let rm = Remote::Rm(Digest::of(b"x"));
        let e = tokio::task::spawn_blocking(move || gone.fetch("b", &rm, 1, Some("T"), &to))
            .await
            .unwrap()
            .unwrap_err();
        assert!(matches!(e, FetchError::Status { status: 503, .. }), "{e}");
        assert!(!dir.path().join("b").exists());
    }
}
