//! The serve loop on a real port: caps, deadlines, `ConnectInfo`, shutdown.

use super::*;
use axum::routing::get;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{oneshot, Notify};

/// Bound on every wait in these tests (nothing here should take more than a fraction).
const BOUND: Duration = Duration::from_secs(10);

struct Server {
    addr: SocketAddr,
    /// Answers the requests waiting in `GET /wait`.
    release: Arc<Notify>,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<io::Result<()>>,
}

impl Server {
    async fn start(conf: HttpServerConfig) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let release = Arc::new(Notify::new());
        let waiting = Arc::clone(&release);
        let router = Router::new()
            .route(
                "/peer",
                get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.to_string() }),
            )
            .route(
                "/wait",
                get(move || async move {
                    waiting.notified().await;
                    "waited".to_string()
                }),
            );
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(serve(listener, router, conf, async move {
            let _ = rx.await;
        }));
        Server {
            addr,
            release,
            stop: Some(tx),
            task,
        }
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(BOUND, self.task)
            .await
            .expect("the serve loop returns after shutdown")
            .unwrap()
            .unwrap();
    }
}

fn conf(header_ms: u64, idle_ms: u64) -> HttpServerConfig {
    HttpServerConfig {
        max_connections: 64,
        max_connections_per_peer: 64,
        header_read_timeout: Duration::from_millis(header_ms),
        idle_timeout: Duration::from_millis(idle_ms),
        max_queued_connections_per_peer: 64,
        connection_queue_timeout: Duration::from_millis(20_000),
        reserved_file_descriptors: 0,
        tls: None,
        client: ClientTls::default(),
    }
}

/// Sends one keep-alive GET /peer and reads its answer's body (Content-Length framed).
async fn get_peer<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S) -> io::Result<String> {
    get_path(s, "/peer").await
}

/// Sends one keep-alive GET of `path` and reads its answer's body.
async fn get_path<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S, path: &str) -> io::Result<String> {
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        let n = tokio::time::timeout(BOUND, s.read(&mut chunk))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no answer"))??;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed"));
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).to_string();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(|v| v.trim().parse().unwrap())
                })
                .unwrap();
            if body.len() >= len {
                assert!(head.starts_with("HTTP/1.1 200"), "{head}");
                return Ok(body[..len].to_string());
            }
        }
    }
}

/// Waits until the server closes `s` (EOF or reset); how long that took.
async fn closed_within(s: &mut TcpStream, bound: Duration) -> Option<Duration> {
    let start = Instant::now();
    let mut chunk = [0u8; 256];
    loop {
        match tokio::time::timeout_at(start + bound, s.read(&mut chunk)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(start.elapsed()),
            Ok(Ok(_)) => continue,
        }
    }
}

#[tokio::test]
async fn requests_carry_the_peer_address() {
    let server = Server::start(conf(5_000, 5_000)).await;
    let mut s = TcpStream::connect(server.addr).await.unwrap();
    let local = s.local_addr().unwrap();
    assert_eq!(get_peer(&mut s).await.unwrap(), local.to_string());
    // Kept alive: a second request on the same connection.
    assert_eq!(get_peer(&mut s).await.unwrap(), local.to_string());
    drop(s);
    server.stop().await;
}

#[tokio::test]
async fn a_half_sent_request_line_is_closed_after_the_header_read_timeout() {
    let server = Server::start(conf(300, 60_000)).await;
    let mut half = TcpStream::connect(server.addr).await.unwrap();
    half.write_all(b"GET /peer HT").await.unwrap();
    let mut silent = TcpStream::connect(server.addr).await.unwrap();
    let took = closed_within(&mut half, BOUND)
        .await
        .expect("a half-sent request line is closed");
    assert!(took >= Duration::from_millis(250), "closed after {took:?}");
    assert!(
        closed_within(&mut silent, BOUND).await.is_some(),
        "a connection that sends nothing is closed"
    );
    // The server still answers others.
    let mut ok = TcpStream::connect(server.addr).await.unwrap();
    get_peer(&mut ok).await.unwrap();
    drop(ok);
    server.stop().await;
}

#[tokio::test]
async fn a_kept_alive_connection_lives_past_the_header_timeout_until_idle() {
    let server = Server::start(conf(200, 1_500)).await;
    let mut s = TcpStream::connect(server.addr).await.unwrap();
    get_peer(&mut s).await.unwrap();
    // Idle for longer than the header timeout, shorter than the idle timeout: still open.
    tokio::time::sleep(Duration::from_millis(600)).await;
    get_peer(&mut s).await.unwrap();
    // Then idle past the idle timeout: closed.
    let took = closed_within(&mut s, BOUND)
        .await
        .expect("an idle kept-alive connection is closed");
    assert!(
        took >= Duration::from_millis(1_000),
        "closed after {took:?}"
    );
    server.stop().await;
}

#[tokio::test]
async fn over_the_per_peer_cap_a_new_connection_waits_and_the_oldest_idle_one_makes_room() {
    let mut c = conf(10_000, 10_000);
    c.max_connections_per_peer = 3;
    let server = Server::start(c).await;
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut s = TcpStream::connect(server.addr).await.unwrap();
        get_peer(&mut s).await.unwrap();
        held.push(s);
    }
    // The 4th is not reset: it waits, and once the oldest idle connection has been quiet
    // for the grace it is closed and the 4th served.
    let mut over = TcpStream::connect(server.addr).await.unwrap();
    get_peer(&mut over)
        .await
        .expect("the 4th connection from one peer is served");
    assert!(
        closed_within(&mut held[0], BOUND).await.is_some(),
        "the oldest idle connection made room"
    );
    get_peer(&mut held[1]).await.unwrap();
    get_peer(&mut held[2]).await.unwrap();
    drop(held);
    drop(over);
    server.stop().await;
}

#[tokio::test]
async fn over_the_global_cap_a_new_connection_waits_and_accepting_goes_on() {
    let mut c = conf(10_000, 10_000);
    c.max_connections = 2;
    let server = Server::start(c).await;
    let mut a = TcpStream::connect(server.addr).await.unwrap();
    get_peer(&mut a).await.unwrap();
    let mut b = TcpStream::connect(server.addr).await.unwrap();
    get_peer(&mut b).await.unwrap();
    let mut over = TcpStream::connect(server.addr).await.unwrap();
    get_peer(&mut over)
        .await
        .expect("served once an idle one made room");
    assert!(closed_within(&mut a, BOUND).await.is_some());
    get_peer(&mut b).await.unwrap();
    drop((b, over));
    server.stop().await;
}

#[tokio::test]
async fn a_connection_with_a_request_in_flight_is_never_closed_to_make_room() {
    let mut c = conf(10_000, 10_000);
    c.max_connections_per_peer = 1;
    let server = Server::start(c).await;
    let mut busy = TcpStream::connect(server.addr).await.unwrap();
    busy.write_all(b"GET /wait HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut waiting = TcpStream::connect(server.addr).await.unwrap();
    waiting
        .write_all(b"GET /peer HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    // Several eviction rounds pass with the busy one past the grace.
    tokio::time::sleep(admission::EVICT_GRACE * 2).await;
    server.release.notify_waiters();
    let mut got = Vec::new();
    let mut chunk = [0u8; 512];
    while !String::from_utf8_lossy(&got).ends_with("waited") {
        let n = tokio::time::timeout(BOUND, busy.read(&mut chunk))
            .await
            .expect("the request in flight is answered")
            .unwrap();
        assert!(n > 0, "the busy connection was closed: {got:?}");
        got.extend_from_slice(&chunk[..n]);
    }
    // Now idle, it makes room after the grace; the waiting request is served.
    let mut body = Vec::new();
    while !String::from_utf8_lossy(&body).contains("127.0.0.1:") {
        let n = tokio::time::timeout(BOUND, waiting.read(&mut chunk))
            .await
            .expect("the waiting request is served")
            .unwrap();
        assert!(n > 0, "the waiting connection was closed");
        body.extend_from_slice(&chunk[..n]);
    }
    drop((busy, waiting));
    server.stop().await;
}

#[tokio::test]
async fn past_the_queue_bound_or_its_deadline_a_connection_is_closed() {
    let mut c = conf(10_000, 10_000);
    c.max_connections_per_peer = 1;
    c.max_queued_connections_per_peer = 1;
    c.connection_queue_timeout = Duration::from_millis(300);
    let server = Server::start(c).await;
    let mut busy = TcpStream::connect(server.addr).await.unwrap();
    busy.write_all(b"GET /wait HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut queued = TcpStream::connect(server.addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    // Beyond the bound: closed without waiting for the deadline.
    let mut beyond = TcpStream::connect(server.addr).await.unwrap();
    assert!(closed_within(&mut beyond, BOUND).await.is_some());
    // The queued one is closed at its deadline.
    assert!(closed_within(&mut queued, BOUND).await.is_some());
    server.release.notify_waiters();
    drop(busy);
    server.stop().await;
}

#[tokio::test]
async fn shutdown_returns_with_idle_connections_open() {
    let server = Server::start(conf(60_000, 60_000)).await;
    let mut kept = TcpStream::connect(server.addr).await.unwrap();
    get_peer(&mut kept).await.unwrap();
    let _silent = TcpStream::connect(server.addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    server.stop().await;
    assert!(closed_within(&mut kept, BOUND).await.is_some());
}

#[test]
fn the_limits_come_from_the_spindle_http_keys() {
    let mut c = Configuration::new();
    assert_eq!(
        HttpServerConfig::from_conf(&c).unwrap(),
        HttpServerConfig::default()
    );
    c.set(keys::HTTP_MAX_CONNECTIONS, "100");
    c.set(keys::HTTP_MAX_CONNECTIONS_PER_PEER, "7");
    c.set(keys::HTTP_HEADER_READ_TIMEOUT_MS, "1500");
    c.set(keys::HTTP_IDLE_TIMEOUT_MS, "2500");
    c.set(keys::HTTP_MAX_QUEUED_CONNECTIONS_PER_PEER, "9");
    c.set(keys::HTTP_CONNECTION_QUEUE_TIMEOUT_MS, "700");
    c.set(keys::HTTP_RESERVED_FILE_DESCRIPTORS, "0");
    let h = HttpServerConfig::from_conf(&c).unwrap();
    assert_eq!(h.max_connections, 100);
    assert_eq!(h.max_connections_per_peer, 7);
    assert_eq!(h.header_read_timeout, Duration::from_millis(1500));
    assert_eq!(h.idle_timeout, Duration::from_millis(2500));
    assert_eq!(h.max_queued_connections_per_peer, 9);
    assert_eq!(h.connection_queue_timeout, Duration::from_millis(700));
    assert_eq!(h.reserved_file_descriptors, 0);
    c.set(keys::HTTP_MAX_CONNECTIONS_PER_PEER, "0");
    let e = HttpServerConfig::from_conf(&c).unwrap_err();
    assert!(matches!(
        e,
        HttpConfigError::NotPositive {
            name: keys::HTTP_MAX_CONNECTIONS_PER_PEER,
            ..
        }
    ));
}

#[test]
fn the_open_file_limit_is_raised_to_the_hard_limit() {
    use nix::sys::resource::{getrlimit, Resource};
    let now = raise_nofile_limit().unwrap();
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    assert_eq!(now, soft);
    assert_eq!(soft, hard);
}

/// A CA, and a certificate for `localhost`/127.0.0.1 it signed: (CA PEM, cert PEM, key PEM).
fn test_pki() -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let params =
        CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
    (ca.pem(), cert.pem(), key.serialize_pem())
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[tokio::test]
async fn with_tls_requests_are_served_and_plain_http_is_closed() {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};
    let dir = tempfile_dir();
    let (ca, cert, key) = test_pki();
    let mut c = conf(5_000, 5_000);
    c.tls = Some(
        ServerTls::from_files(
            &write(&dir, "cert.pem", &cert),
            &write(&dir, "key.pem", &key),
        )
        .unwrap(),
    );
    let server = Server::start(c).await;

    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca.as_bytes()).unwrap())
        .unwrap();
    let client = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
    let tcp = TcpStream::connect(server.addr).await.unwrap();
    let local = tcp.local_addr().unwrap();
    let mut tls = connector
        .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
        .await
        .expect("TLS handshake with the CA's certificate");
    assert_eq!(get_peer(&mut tls).await.unwrap(), local.to_string());
    assert_eq!(get_peer(&mut tls).await.unwrap(), local.to_string());
    drop(tls);

    // Plain HTTP on the TLS port: closed without an HTTP answer.
    let mut plain = TcpStream::connect(server.addr).await.unwrap();
    plain
        .write_all(b"GET /peer HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    let _ = tokio::time::timeout(BOUND, plain.read_to_end(&mut got)).await;
    assert!(
        !String::from_utf8_lossy(&got).contains("HTTP/1.1 200"),
        "plain HTTP was answered: {}",
        String::from_utf8_lossy(&got)
    );
    server.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A fresh directory under the system temp dir (rest-edge has no tempfile dependency).
fn tempfile_dir() -> PathBuf {
    use std::sync::atomic::AtomicU32;
    static N: AtomicU32 = AtomicU32::new(0);
    let d = std::env::temp_dir().join(format!(
        "spindle-rest-edge-tls-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn bad_tls_files_are_refused_naming_the_file() {
    let dir = tempfile_dir();
    let (_, cert, key) = test_pki();
    let (_, _, other_key) = test_pki();
    let cert_f = write(&dir, "cert.pem", &cert);
    let key_f = write(&dir, "key.pem", &key);
    let other_f = write(&dir, "other-key.pem", &other_key);
    let junk_f = write(&dir, "junk.pem", "not pem");
    let missing = dir.join("missing.pem");

    let e = ServerTls::from_files(&cert_f, &other_f).unwrap_err();
    assert!(matches!(e, HttpConfigError::TlsKeyMismatch { .. }), "{e}");
    assert!(e.to_string().contains("other-key.pem"), "{e}");
    let e = ServerTls::from_files(&missing, &key_f).unwrap_err();
    assert!(
        matches!(&e, HttpConfigError::Tls(TlsConfError::Unreadable { file, .. }) if *file == missing),
        "{e}"
    );
    let e = ServerTls::from_files(&junk_f, &key_f).unwrap_err();
    assert!(
        matches!(
            &e,
            HttpConfigError::TlsFile {
                name: keys::SSL_SERVER_CERTIFICATE_FILE,
                ..
            }
        ),
        "{e}"
    );
    let e = ServerTls::from_files(&cert_f, &junk_f).unwrap_err();
    assert!(
        matches!(
            &e,
            HttpConfigError::TlsFile {
                name: keys::SSL_SERVER_PRIVATE_KEY_FILE,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("junk.pem"), "{e}");

    // Through the configuration: HTTPS_ONLY needs both files.
    let mut c = Configuration::new();
    c.set(keys::HTTP_POLICY, "HTTPS_ONLY");
    assert!(matches!(
        HttpServerConfig::from_conf(&c),
        Err(HttpConfigError::MissingTlsFile {
            name: keys::SSL_SERVER_CERTIFICATE_FILE,
            ..
        })
    ));
    c.set(keys::SSL_SERVER_CERTIFICATE_FILE, cert_f.to_str().unwrap());
    c.set(keys::SSL_SERVER_PRIVATE_KEY_FILE, key_f.to_str().unwrap());
    let h = HttpServerConfig::from_conf(&c).unwrap();
    assert_eq!(h.scheme(), "https");
    assert_eq!(h.tls.unwrap().certificate_file, cert_f);
    let _ = std::fs::remove_dir_all(&dir);
}
