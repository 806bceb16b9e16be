//! The HTTP serve loop both daemons use: accepts on a [`TcpListener`], serves an axum
//! [`Router`] over HTTP/1.1 (hyper's connection builder), and bounds what a caller can hold:
//!
//! - at most `spindle.http.max-connections` open connections, and at most
//!   `spindle.http.max-connections-per-peer` from one IP address; a new connection past a cap
//!   is not reset: it waits for a place (bounded, with a deadline) while the oldest idle
//!   connection in the cap's scope is asked to close ([`admission`] has the rules);
//! - near the open-file limit (`RLIMIT_NOFILE`, read at each accept, less
//!   `spindle.http.reserved-file-descriptors`) every new connection has the connection idle
//!   the longest closed, so idle connections never cost a request its descriptor;
//! - a connection that has not sent a whole request head within
//!   `spindle.http.header-read-timeout-ms` (from its start, or from the first byte of a later
//!   request on a kept-alive connection; a TLS handshake counts in the same time) is closed;
//! - a kept-alive connection idle (no request in flight, no byte either way) for
//!   `spindle.http.idle-timeout-ms` is closed;
//! - an accept error (`EMFILE`: out of file descriptors) never ends the loop: it closes idle
//!   connections to free descriptors (or, with none idle, waits a moment) and accepts again,
//!   logging once per burst; the connections waiting in the listener's backlog are kept.
//!
//! With `yarn.http.policy` `HTTPS_ONLY` every connection is TLS (rustls, the certificate and
//! key of `spindle.ssl.server.certificate-file` / `private-key-file`, loaded and checked
//! against each other when the configuration is read, so a bad file stops the daemon at start
//! naming it); anything else on the port (plain HTTP) is closed.
//!
//! Each request carries `ConnectInfo<SocketAddr>` (the peer), as axum's
//! `into_make_service_with_connect_info` gives. On shutdown the loop stops accepting, asks
//! every connection to close after its request in flight (idle ones close at once) and
//! returns when all are gone.
//!
//! Must not: know either daemon's routes or state.

mod admission;
mod track;

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use spindle_common::config::{keys, ConfigError, Configuration};
use spindle_common::tls::{place, ClientTls, HttpPolicy, TlsConfError};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use admission::{Admission, Caps, Entry, Refusal, Scope, Slot};
use tokio::time::Instant;
use tower::ServiceExt;
use tracing::{debug, info, warn};
use track::{Expiry, Track, TrackedIo};

/// How long the loop waits after an accept error that is not the caller's (out of file
/// descriptors or memory) before accepting again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
/// At most one WARN line per this period for each kind of turned-away connection.
const WARN_EVERY: Duration = Duration::from_secs(10);
/// How often a waiting connection asks again for an idle one to close.
const EVICT_RETRY: Duration = Duration::from_millis(250);
/// How many idle connections one `EMFILE` at accept closes.
const SHED_ON_EMFILE: usize = 8;

/// The limits of the serve loop (see the module doc), and its TLS identity under
/// `HTTPS_ONLY`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpServerConfig {
    pub max_connections: usize,
    pub max_connections_per_peer: usize,
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    /// Most connections of one peer waiting for a place at once.
    pub max_queued_connections_per_peer: usize,
    /// How long a connection may wait for a place.
    pub connection_queue_timeout: Duration,
    /// Descriptors left to the rest of the daemon under the open-file limit.
    pub reserved_file_descriptors: u64,
    /// `Some` exactly when `yarn.http.policy` is `HTTPS_ONLY`.
    pub tls: Option<ServerTls>,
    /// What the daemon's own HTTP client (RM to NM, NM to RM) dials and trusts: the same
    /// policy, and `spindle.ssl.client.ca-file`.
    pub client: ClientTls,
}

impl HttpServerConfig {
    /// The scheme this daemon serves and advertises: `http` or `https`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }
}

/// A daemon's TLS identity: its certificate chain and private key, checked to match.
#[derive(Clone)]
pub struct ServerTls {
    pub certificate_file: PathBuf,
    pub private_key_file: PathBuf,
    acceptor: tokio_rustls::TlsAcceptor,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("certificate_file", &self.certificate_file)
            .field("private_key_file", &self.private_key_file)
            .finish_non_exhaustive()
    }
}

impl PartialEq for ServerTls {
    fn eq(&self, other: &Self) -> bool {
        self.certificate_file == other.certificate_file
            && self.private_key_file == other.private_key_file
    }
}

impl Eq for ServerTls {}

impl ServerTls {
    /// Loads the PEM certificate chain (own certificate first) and private key (PKCS#8,
    /// PKCS#1 or SEC1), refusing files that cannot be read or parsed and a key that is not
    /// the certificate's.
    pub fn from_files(cert: &Path, key: &Path) -> Result<Self, HttpConfigError> {
        Self::load(&Configuration::new(), cert, key)
    }

    fn load(conf: &Configuration, cert: &Path, key: &Path) -> Result<Self, HttpConfigError> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let bad = |name: &'static str, file: &Path, problem: String| HttpConfigError::TlsFile {
            place: place(conf, name),
            name,
            file: file.to_path_buf(),
            problem,
        };
        let cert_pem =
            spindle_common::tls::read_pem(conf, keys::SSL_SERVER_CERTIFICATE_FILE, cert)?;
        let chain = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| {
                bad(
                    keys::SSL_SERVER_CERTIFICATE_FILE,
                    cert,
                    format!("not a PEM certificate chain: {e}"),
                )
            })?;
        if chain.is_empty() {
            return Err(bad(
                keys::SSL_SERVER_CERTIFICATE_FILE,
                cert,
                "holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into(),
            ));
        }
        let key_pem = spindle_common::tls::read_pem(conf, keys::SSL_SERVER_PRIVATE_KEY_FILE, key)?;
        let private = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
            bad(
                keys::SSL_SERVER_PRIVATE_KEY_FILE,
                key,
                format!("holds no PEM private key (PKCS#8, PKCS#1 or SEC1): {e}"),
            )
        })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mismatch = |problem: String| HttpConfigError::TlsKeyMismatch {
            certificate: cert.to_path_buf(),
            key: key.to_path_buf(),
            problem,
        };
        // rustls checks the key against the certificate's public key here.
        rustls::sign::CertifiedKey::from_der(chain.clone(), private.clone_key(), &provider)
            .and_then(|c| c.keys_match())
            .map_err(|e| mismatch(e.to_string()))?;
        let mut server = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| mismatch(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(chain, private)
            .map_err(|e| mismatch(e.to_string()))?;
        server.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            certificate_file: cert.to_path_buf(),
            private_key_file: key.to_path_buf(),
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(server)),
        })
    }
}

impl Default for HttpServerConfig {
    fn default() -> Self {
        Self {
            max_connections: keys::DEFAULT_HTTP_MAX_CONNECTIONS as usize,
            max_connections_per_peer: keys::DEFAULT_HTTP_MAX_CONNECTIONS_PER_PEER as usize,
            header_read_timeout: Duration::from_millis(keys::DEFAULT_HTTP_HEADER_READ_TIMEOUT_MS),
            idle_timeout: Duration::from_millis(keys::DEFAULT_HTTP_IDLE_TIMEOUT_MS),
            max_queued_connections_per_peer: keys::DEFAULT_HTTP_MAX_QUEUED_CONNECTIONS_PER_PEER
                as usize,
            connection_queue_timeout: Duration::from_millis(
                keys::DEFAULT_HTTP_CONNECTION_QUEUE_TIMEOUT_MS,
            ),
            reserved_file_descriptors: keys::DEFAULT_HTTP_RESERVED_FILE_DESCRIPTORS,
            tls: None,
            client: ClientTls::default(),
        }
    }
}

/// Why the serve loop's configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpConfigError {
    /// The raw reader refused a value (not a number, a `${...}` cycle).
    #[error(transparent)]
    Value(#[from] ConfigError),
    /// A limit or timeout of 0, which would refuse every connection.
    #[error("{place}property '{name}': must be at least 1, got {value}")]
    NotPositive {
        place: String,
        name: &'static str,
        value: u64,
    },
    /// `yarn.http.policy` or a TLS file (unreadable, not PEM).
    #[error(transparent)]
    Tls(#[from] TlsConfError),
    /// `HTTPS_ONLY` without the certificate or key file.
    #[error("property '{policy}' is HTTPS_ONLY but '{name}' is not set")]
    MissingTlsFile {
        policy: &'static str,
        name: &'static str,
    },
    /// A certificate or key file that is not what it should be.
    #[error("{place}property '{name}': {}: {problem}", file.display())]
    TlsFile {
        place: String,
        name: &'static str,
        file: PathBuf,
        problem: String,
    },
    /// The private key is not the certificate's (or rustls cannot use the pair).
    #[error("the private key {} does not match the certificate {}: {problem}", key.display(), certificate.display())]
    TlsKeyMismatch {
        certificate: PathBuf,
        key: PathBuf,
        problem: String,
    },
}

impl HttpServerConfig {
    /// Reads the `spindle.http.*` keys (both daemons read the same ones).
    pub fn from_conf(conf: &Configuration) -> Result<Self, HttpConfigError> {
        let positive = |name: &'static str, default: u64| -> Result<u64, HttpConfigError> {
            let v = conf.get_u64(name, default)?;
            if v == 0 {
                return Err(HttpConfigError::NotPositive {
                    place: place(conf, name),
                    name,
                    value: v,
                });
            }
            Ok(v)
        };
        Ok(Self {
            max_connections: positive(
                keys::HTTP_MAX_CONNECTIONS,
                keys::DEFAULT_HTTP_MAX_CONNECTIONS,
            )? as usize,
            max_connections_per_peer: positive(
                keys::HTTP_MAX_CONNECTIONS_PER_PEER,
                keys::DEFAULT_HTTP_MAX_CONNECTIONS_PER_PEER,
            )? as usize,
            header_read_timeout: Duration::from_millis(positive(
                keys::HTTP_HEADER_READ_TIMEOUT_MS,
                keys::DEFAULT_HTTP_HEADER_READ_TIMEOUT_MS,
            )?),
            idle_timeout: Duration::from_millis(positive(
                keys::HTTP_IDLE_TIMEOUT_MS,
                keys::DEFAULT_HTTP_IDLE_TIMEOUT_MS,
            )?),
            max_queued_connections_per_peer: positive(
                keys::HTTP_MAX_QUEUED_CONNECTIONS_PER_PEER,
                keys::DEFAULT_HTTP_MAX_QUEUED_CONNECTIONS_PER_PEER,
            )? as usize,
            connection_queue_timeout: Duration::from_millis(positive(
                keys::HTTP_CONNECTION_QUEUE_TIMEOUT_MS,
                keys::DEFAULT_HTTP_CONNECTION_QUEUE_TIMEOUT_MS,
            )?),
            reserved_file_descriptors: conf.get_u64(
                keys::HTTP_RESERVED_FILE_DESCRIPTORS,
                keys::DEFAULT_HTTP_RESERVED_FILE_DESCRIPTORS,
            )?,
            tls: match HttpPolicy::from_conf(conf)? {
                HttpPolicy::HttpOnly => None,
                HttpPolicy::HttpsOnly => {
                    let file = |name: &'static str| -> Result<PathBuf, HttpConfigError> {
                        conf.get_nonempty(name)?.map(PathBuf::from).ok_or(
                            HttpConfigError::MissingTlsFile {
                                policy: keys::HTTP_POLICY,
                                name,
                            },
                        )
                    };
                    let cert = file(keys::SSL_SERVER_CERTIFICATE_FILE)?;
                    let key = file(keys::SSL_SERVER_PRIVATE_KEY_FILE)?;
                    Some(ServerTls::load(conf, &cert, &key)?)
                }
            },
            client: ClientTls::from_conf(conf)?,
        })
    }
}

/// Raises this process's open-file soft limit to its hard limit (a daemon holds a descriptor
/// per connection, container pipe and file) and returns the limit now in force.
pub fn raise_nofile_limit() -> io::Result<u64> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(io::Error::from)?;
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).map_err(io::Error::from)?;
    }
    let (soft, _) = getrlimit(Resource::RLIMIT_NOFILE).map_err(io::Error::from)?;
    Ok(soft)
}

/// Serves `router` on `listener` under `conf`'s limits until `shutdown` resolves, then
/// closes every connection once its request in flight is answered and returns.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    conf: HttpServerConfig,
    shutdown: impl Future<Output = ()> + Send,
) -> io::Result<()> {
    let shared = Arc::new(Shared {
        admission: Admission::new(Caps {
            total: conf.max_connections,
            per_peer: conf.max_connections_per_peer,
            queued_per_peer: conf.max_queued_connections_per_peer,
        }),
        conf,
        refused: RateLimited::default(),
        evicted: RateLimited::default(),
    });
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::pin!(shutdown);
    // Accept errors since the last accepted connection (one WARN per burst).
    let mut failing: u64 = 0;
    loop {
        let accepted = tokio::select! {
            biased;
            _ = &mut shutdown => break,
            r = listener.accept() => r,
        };
        let (stream, peer) = match accepted {
            Ok(a) => {
                if failing > 0 {
                    info!(
                        errors = failing,
                        "accepting connections again after accept errors"
                    );
                    failing = 0;
                }
                a
            }
            // The caller gave up before we accepted: nothing to wait for.
            Err(e) if is_per_connection(&e) => continue,
            Err(e) => {
                if failing == 0 {
                    warn!(
                        error = %e,
                        "cannot accept connections (out of file descriptors?); closing idle connections, or retrying every {} ms",
                        ACCEPT_BACKOFF.as_millis()
                    );
                }
                failing += 1;
                // Out of descriptors: idle connections make room for those in the backlog.
                let shed = (0..SHED_ON_EMFILE)
                    .take_while(|_| shared.evict(Scope::All, Pressure::AcceptFailed))
                    .count();
                let pause = if shed > 0 {
                    Duration::from_millis(5)
                } else {
                    ACCEPT_BACKOFF
                };
                tokio::select! {
                    biased;
                    _ = &mut shutdown => break,
                    _ = tokio::time::sleep(pause) => continue,
                }
            }
        };
        shared.make_room_for_descriptors();
        let _ = stream.set_nodelay(true);
        tokio::spawn(connection(
            stream,
            peer,
            router.clone(),
            Arc::clone(&shared),
            stop_rx.clone(),
        ));
    }
    drop(listener);
    let _ = stop_tx.send(true);
    shared.admission.drained().await;
    Ok(())
}

/// An accept error about one connection (it was reset before we took it), not the listener.
fn is_per_connection(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::Interrupted
    )
}

/// The open-file soft limit now (`RLIMIT_NOFILE`; `None` when it cannot be read).
fn open_file_limit() -> Option<u64> {
    use nix::sys::resource::{getrlimit, Resource};
    getrlimit(Resource::RLIMIT_NOFILE)
        .ok()
        .map(|(soft, _)| soft)
}

/// What every connection of one serve loop shares.
struct Shared {
    conf: HttpServerConfig,
    admission: Arc<Admission>,
    refused: RateLimited,
    evicted: RateLimited,
}

/// Why an idle connection is asked to close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pressure {
    /// A new connection from this peer waits: the peer holds its cap.
    PeerCap(std::net::IpAddr, usize),
    /// A new connection waits: the total cap is reached.
    TotalCap(usize),
    /// This many connections are held, near the open-file limit.
    FileLimit { held: usize, limit: u64 },
    /// Accepting failed for want of descriptors.
    AcceptFailed,
}

impl std::fmt::Display for Pressure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::PeerCap(peer, max) => write!(
                f,
                "a new connection from {peer} waits: it holds {max} open, the limit per peer (spindle.http.max-connections-per-peer)"
            ),
            Self::TotalCap(max) => write!(
                f,
                "a new connection waits: {max} are open, the limit (spindle.http.max-connections)"
            ),
            Self::FileLimit { held, limit } => write!(
                f,
                "{held} connections are held and the open-file limit (RLIMIT_NOFILE) is {limit}, less spindle.http.reserved-file-descriptors"
            ),
            Self::AcceptFailed => write!(f, "accepting failed: out of file descriptors"),
        }
    }
}

impl Shared {
    /// Asks the connection idle the longest in `scope` to close; whether one was asked.
    fn evict(&self, scope: Scope, why: Pressure) -> bool {
        let Some((victim, idle)) = self.admission.evict_one(scope) else {
            return false;
        };
        if let Some(unlogged) = self.evicted.should_log() {
            warn!(
                peer = %victim,
                "closing the connection from {victim} idle for {} ms to make room: {why}; {unlogged} more closed so since the last such line",
                idle.as_millis()
            );
        }
        true
    }

    /// Near the open-file limit, has the connection idle the longest closed for the one just
    /// accepted.
    fn make_room_for_descriptors(&self) {
        let Some(limit) = open_file_limit() else {
            return;
        };
        let held = self.admission.held() + 1;
        if held as u64 + self.conf.reserved_file_descriptors >= limit {
            self.evict(Scope::All, Pressure::FileLimit { held, limit });
        }
    }

    fn pressure(&self, scope: Scope) -> Pressure {
        match scope {
            Scope::Peer(peer) => Pressure::PeerCap(peer, self.conf.max_connections_per_peer),
            Scope::All => Pressure::TotalCap(self.conf.max_connections),
        }
    }

    /// A place for a new connection from `peer`: at once, or after waiting (asking idle
    /// connections to close meanwhile), or a refusal.
    async fn admit(
        &self,
        peer: SocketAddr,
        track: &Arc<Track>,
        stop: &mut watch::Receiver<bool>,
    ) -> Result<Slot, Refusal> {
        let (mut ticket, scope) = match self.admission.enter(peer.ip(), track)? {
            Entry::Admitted(slot) => return Ok(slot),
            Entry::Queued(ticket, scope) => (ticket, scope),
        };
        debug!(peer = %peer, "a new connection waits for a place");
        self.evict(scope, self.pressure(scope));
        let since = Instant::now();
        let deadline = since + self.conf.connection_queue_timeout;
        enum Woken {
            Granted,
            Retry,
            Timeout,
            Stop,
        }
        loop {
            let woken = tokio::select! {
                biased;
                _ = ticket.granted() => Woken::Granted,
                _ = stop.wait_for(|s| *s) => Woken::Stop,
                _ = tokio::time::sleep_until(deadline) => Woken::Timeout,
                _ = tokio::time::sleep(EVICT_RETRY) => Woken::Retry,
            };
            match woken {
                Woken::Granted => return Ok(ticket.into_slot()),
                Woken::Stop => return Err(Refusal::ShuttingDown),
                Woken::Timeout => {
                    return Err(Refusal::Timeout {
                        waited: since.elapsed(),
                    })
                }
                Woken::Retry => {
                    if let Some(scope) = self.admission.scope_for(peer.ip()) {
                        self.evict(scope, self.pressure(scope));
                    }
                }
            }
        }
    }
}

/// A WARN at most once per [`WARN_EVERY`], counting the events it did not log.
#[derive(Default)]
struct RateLimited {
    last: Mutex<Option<Instant>>,
    suppressed: AtomicU64,
}

impl RateLimited {
    /// Whether to log now; if so, how many events went unlogged since the last line.
    fn should_log(&self) -> Option<u64> {
        let now = Instant::now();
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        match *last {
            Some(t) if now.duration_since(t) < WARN_EVERY => {
                self.suppressed.fetch_add(1, Ordering::Relaxed);
                None
            }
            _ => {
                *last = Some(now);
                Some(self.suppressed.swap(0, Ordering::Relaxed))
            }
        }
    }
}

/// Serves one connection once it has a place (after its TLS handshake, which must end
/// within the header-read timeout) until it ends, its deadline passes, it is closed idle to
/// make room, or (after shutdown) its last request is answered.
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    router: Router,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    let track = Arc::new(Track::new());
    let slot = match shared.admit(peer, &track, &mut stop).await {
        Ok(slot) => slot,
        Err(refusal) => {
            if refusal != Refusal::ShuttingDown {
                if let Some(unlogged) = shared.refused.should_log() {
                    warn!(
                        peer = %peer,
                        "closing a new connection from {}: {refusal}; {unlogged} more turned away since the last such line",
                        peer.ip()
                    );
                }
            }
            return;
        }
    };
    let conf = &shared.conf;
    let fd = stream.as_raw_fd();
    match &conf.tls {
        None => http(stream, fd, peer, router, conf, track, stop).await,
        Some(tls) => {
            let by = Instant::now() + conf.header_read_timeout;
            match tokio::time::timeout_at(by, tls.acceptor.accept(stream)).await {
                Ok(Ok(s)) => http(s, fd, peer, router, conf, track, stop).await,
                Ok(Err(e)) => debug!(peer = %peer, error = %e, "TLS handshake failed"),
                Err(_) => debug!(peer = %peer, "no TLS handshake within the header-read timeout"),
            }
        }
    }
    drop(slot);
}

/// HTTP/1.1 on one connection's byte stream, under its deadlines.
async fn http<I: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    stream: I,
    fd: RawFd,
    peer: SocketAddr,
    router: Router,
    conf: &HttpServerConfig,
    track: Arc<Track>,
    mut stop: watch::Receiver<bool>,
) {
    let io = TrackedIo {
        inner: stream,
        track: Arc::clone(&track),
    };
    let svc_track = Arc::clone(&track);
    let svc = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        let in_flight = svc_track.request_started();
        req.extensions_mut().insert(ConnectInfo(peer));
        let router = router.clone();
        async move {
            let resp = router.oneshot(req.map(Body::new)).await;
            drop(in_flight);
            match resp {
                Ok(r) => Ok::<_, Infallible>(r),
                Err(e) => match e {},
            }
        }
    });
    let conn = http1::Builder::new()
        // The deadlines are this module's (hyper's would also cut idle kept-alive
        // connections at the header timeout).
        .header_read_timeout(None)
        .serve_connection(TokioIo::new(io), svc);
    tokio::pin!(conn);
    let mut stopping = *stop.borrow();
    if stopping {
        conn.as_mut().graceful_shutdown();
    }
    loop {
        let deadline = track.deadline(conf);
        let changed = track.changed.notified();
        tokio::select! {
            // The connection first: a request that arrived is read before an ask to close
            // is answered.
            biased;
            r = conn.as_mut() => {
                if let Err(e) = r {
                    debug!(peer = %peer, error = %e, "connection ended with an error");
                }
                break;
            }
            _ = stop.changed(), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
            _ = changed => {}
            _ = track.close_if_idle.notified() => {
                if track.closes_when_asked(fd) {
                    debug!(peer = %peer, "closing the idle connection to make room");
                    break;
                }
            }
            _ = sleep_until(deadline) => {
                if let Some((at, why)) = track.deadline(conf) {
                    if at <= Instant::now() {
                        debug!(peer = %peer, reason = ?why, "closing the connection at its deadline");
                        break;
                    }
                }
            }
        }
    }
}

/// Sleeps until the deadline, or forever without one.
async fn sleep_until(deadline: Option<(Instant, Expiry)>) {
    match deadline {
        Some((at, _)) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests;
