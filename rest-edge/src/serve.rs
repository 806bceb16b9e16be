//! The HTTP serve loop both daemons use: accepts on a [`TcpListener`], serves an axum
//! [`Router`] over HTTP/1.1 (hyper's connection builder), and bounds what a caller can hold:
//!
//! - at most `spindle.http.max-connections` open connections; past it a new connection is
//!   closed at once (accept never blocks, so the listener's queue never fills with callers
//!   who would wait for nothing);
//! - at most `spindle.http.max-connections-per-peer` from one IP address;
//! - a connection that has not sent a whole request head within
//!   `spindle.http.header-read-timeout-ms` (from its start, or from the first byte of a later
//!   request on a kept-alive connection; a TLS handshake counts in the same time) is closed;
//! - a kept-alive connection idle (no request in flight, no byte either way) for
//!   `spindle.http.idle-timeout-ms` is closed;
//! - an accept error (`EMFILE`: out of file descriptors) never ends the loop: it waits a
//!   moment and accepts again, logging once per burst.
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

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use spindle_common::config::{keys, ConfigError, Configuration};
use spindle_common::tls::{place, ClientTls, HttpPolicy, TlsConfError};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};
use tokio::time::Instant;
use tower::ServiceExt;
use tracing::{debug, info, warn};

/// How long the loop waits after an accept error that is not the caller's (out of file
/// descriptors or memory) before accepting again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
/// At most one WARN line per this period for each kind of turned-away connection.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// The limits of the serve loop (see the module doc), and its TLS identity under
/// `HTTPS_ONLY`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpServerConfig {
    pub max_connections: usize,
    pub max_connections_per_peer: usize,
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
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
        conf,
        open: AtomicUsize::new(0),
        per_peer: Mutex::new(HashMap::new()),
        drained: Notify::new(),
        over_total: RateLimited::default(),
        over_peer: RateLimited::default(),
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
                        "cannot accept connections (out of file descriptors?); retrying every {} ms",
                        ACCEPT_BACKOFF.as_millis()
                    );
                }
                failing += 1;
                tokio::select! {
                    biased;
                    _ = &mut shutdown => break,
                    _ = tokio::time::sleep(ACCEPT_BACKOFF) => continue,
                }
            }
        };
        let Some(slot) = Slot::admit(&shared, peer.ip()) else {
            // Dropped here: closed at once, before a byte is read.
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(connection(
            stream,
            peer,
            router.clone(),
            slot,
            stop_rx.clone(),
        ));
    }
    drop(listener);
    let _ = stop_tx.send(true);
    loop {
        let drained = shared.drained.notified();
        tokio::pin!(drained);
        drained.as_mut().enable();
        if shared.open.load(Ordering::Acquire) == 0 {
            break;
        }
        drained.await;
    }
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

/// What every connection of one serve loop shares.
struct Shared {
    conf: HttpServerConfig,
    open: AtomicUsize,
    per_peer: Mutex<HashMap<IpAddr, usize>>,
    /// Woken when the last connection closes.
    drained: Notify,
    over_total: RateLimited,
    over_peer: RateLimited,
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

/// One admitted connection's place under the caps; given back when dropped.
struct Slot {
    shared: Arc<Shared>,
    peer: IpAddr,
}

impl Slot {
    /// Takes a place for a connection from `peer`, or says (rate-limited) why there is none.
    fn admit(shared: &Arc<Shared>, peer: IpAddr) -> Option<Slot> {
        let max = shared.conf.max_connections;
        let open = shared.open.fetch_add(1, Ordering::AcqRel);
        if open >= max {
            shared.open.fetch_sub(1, Ordering::AcqRel);
            if let Some(unlogged) = shared.over_total.should_log() {
                warn!(
                    peer = %peer,
                    open,
                    "closing a new connection from {peer}: {open} connections are open, the limit (spindle.http.max-connections) is {max}; {unlogged} more turned away since the last such line"
                );
            }
            return None;
        }
        let per_peer_max = shared.conf.max_connections_per_peer;
        let mut per_peer = shared.per_peer.lock().unwrap_or_else(|p| p.into_inner());
        let n = per_peer.entry(peer).or_insert(0);
        if *n >= per_peer_max {
            let held = *n;
            drop(per_peer);
            shared.open.fetch_sub(1, Ordering::AcqRel);
            if let Some(unlogged) = shared.over_peer.should_log() {
                warn!(
                    peer = %peer,
                    open = held,
                    "closing a new connection from {peer}: it has {held} open, the limit per peer (spindle.http.max-connections-per-peer) is {per_peer_max}; {unlogged} more turned away since the last such line"
                );
            }
            return None;
        }
        *n += 1;
        Some(Slot {
            shared: Arc::clone(shared),
            peer,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        {
            let mut per_peer = self
                .shared
                .per_peer
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if let Some(n) = per_peer.get_mut(&self.peer) {
                *n -= 1;
                if *n == 0 {
                    per_peer.remove(&self.peer);
                }
            }
        }
        if self.shared.open.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.shared.drained.notify_waiters();
        }
    }
}

/// Where one connection stands, for its header-read and idle deadlines.
struct Track {
    state: Mutex<TrackState>,
    /// Woken when a request starts or ends (the deadline moves).
    changed: Notify,
}

struct TrackState {
    started: Instant,
    /// Requests whose answer is not yet complete.
    in_flight: usize,
    /// Requests whose head arrived.
    served: u64,
    /// The first byte of a request head not yet complete, on a kept-alive connection.
    head_since: Option<Instant>,
    /// The last byte read or written.
    last_activity: Instant,
}

/// Why a connection was closed by its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expiry {
    HeaderRead,
    Idle,
}

impl Track {
    fn new() -> Self {
        let now = Instant::now();
        Self {
            state: Mutex::new(TrackState {
                started: now,
                in_flight: 0,
                served: 0,
                head_since: None,
                last_activity: now,
            }),
            changed: Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TrackState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn on_read(&self) {
        let now = Instant::now();
        let mut s = self.lock();
        s.last_activity = now;
        if s.in_flight == 0 && s.served > 0 && s.head_since.is_none() {
            s.head_since = Some(now);
        }
    }

    fn on_write(&self) {
        self.lock().last_activity = Instant::now();
    }

    fn request_started(self: &Arc<Self>) -> InFlight {
        {
            let mut s = self.lock();
            s.in_flight += 1;
            s.served += 1;
            s.head_since = None;
            s.last_activity = Instant::now();
        }
        self.changed.notify_one();
        InFlight(Arc::clone(self))
    }

    /// When this connection is closed unless something happens first, and why; `None` while
    /// a request is in flight.
    fn deadline(&self, conf: &HttpServerConfig) -> Option<(Instant, Expiry)> {
        let s = self.lock();
        if s.in_flight > 0 {
            None
        } else if s.served == 0 {
            Some((s.started + conf.header_read_timeout, Expiry::HeaderRead))
        } else if let Some(t) = s.head_since {
            Some((t + conf.header_read_timeout, Expiry::HeaderRead))
        } else {
            Some((s.last_activity + conf.idle_timeout, Expiry::Idle))
        }
    }
}

/// A request in flight; its end moves the connection's deadline.
struct InFlight(Arc<Track>);

impl Drop for InFlight {
    fn drop(&mut self) {
        {
            let mut s = self.0.lock();
            s.in_flight -= 1;
            s.last_activity = Instant::now();
        }
        self.0.changed.notify_one();
    }
}

/// The connection's byte stream, noting every read and write in its [`Track`].
struct TrackedIo<I> {
    inner: I,
    track: Arc<Track>,
}

impl<I: AsyncRead + Unpin> AsyncRead for TrackedIo<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.track.on_read();
        }
        r
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for TrackedIo<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.track.on_write();
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.track.on_write();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Serves one connection (after its TLS handshake, which must end within the header-read
/// timeout) until it ends, its deadline passes, or (after shutdown) its last request is
/// answered.
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    router: Router,
    slot: Slot,
    stop: watch::Receiver<bool>,
) {
    let conf = &slot.shared.conf;
    let track = Arc::new(Track::new());
    match &conf.tls {
        None => http(stream, peer, router, conf, track, stop).await,
        Some(tls) => {
            let by = Instant::now() + conf.header_read_timeout;
            match tokio::time::timeout_at(by, tls.acceptor.accept(stream)).await {
                Ok(Ok(s)) => http(s, peer, router, conf, track, stop).await,
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
