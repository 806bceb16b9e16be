//! The serve loop on a real port: caps, deadlines, `ConnectInfo`, shutdown.

use super::*;
use axum::routing::get;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;

/// Bound on every wait in these tests (nothing here should take more than a fraction).
const BOUND: Duration = Duration::from_secs(10);

struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<io::Result<()>>,
}

impl Server {
    async fn start(conf: HttpServerConfig) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let router = Router::new().route(
            "/peer",
            get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.to_string() }),
        );
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(serve(listener, router, conf, async move {
            let _ = rx.await;
        }));
        Server {
            addr,
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
    }
}

/// Sends one keep-alive GET /peer and reads its answer's body (Content-Length framed).
async fn get_peer(s: &mut TcpStream) -> io::Result<String> {
    s.write_all(b"GET /peer HTTP/1.1\r\nHost: x\r\n\r\n")
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
async fn the_per_peer_cap_closes_connections_beyond_it() {
    let mut c = conf(10_000, 10_000);
    c.max_connections_per_peer = 3;
    let server = Server::start(c).await;
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut s = TcpStream::connect(server.addr).await.unwrap();
        get_peer(&mut s).await.unwrap();
        held.push(s);
    }
    let mut over = TcpStream::connect(server.addr).await.unwrap();
    assert!(
        closed_within(&mut over, Duration::from_secs(2))
            .await
            .is_some(),
        "the 4th connection from one peer is closed at once"
    );
    // The held ones still work; closing one makes room again.
    get_peer(&mut held[0]).await.unwrap();
    drop(held.pop());
    let mut again = None;
    for _ in 0..50 {
        let mut s = TcpStream::connect(server.addr).await.unwrap();
        if get_peer(&mut s).await.is_ok() {
            again = Some(s);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        again.is_some(),
        "a place freed by a closed connection is reused"
    );
    drop(again);
    drop(held);
    server.stop().await;
}

#[tokio::test]
async fn the_global_cap_closes_connections_beyond_it_and_accepting_goes_on() {
    let mut c = conf(10_000, 10_000);
    c.max_connections = 2;
    let server = Server::start(c).await;
    let mut a = TcpStream::connect(server.addr).await.unwrap();
    get_peer(&mut a).await.unwrap();
    let mut b = TcpStream::connect(server.addr).await.unwrap();
    get_peer(&mut b).await.unwrap();
    for _ in 0..5 {
        let mut over = TcpStream::connect(server.addr).await.unwrap();
        assert!(closed_within(&mut over, Duration::from_secs(2))
            .await
            .is_some());
    }
    drop(a);
    let mut ok = false;
    for _ in 0..50 {
        let mut s = TcpStream::connect(server.addr).await.unwrap();
        if get_peer(&mut s).await.is_ok() {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(ok);
    get_peer(&mut b).await.unwrap();
    drop(b);
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
    let h = HttpServerConfig::from_conf(&c).unwrap();
    assert_eq!(h.max_connections, 100);
    assert_eq!(h.max_connections_per_peer, 7);
    assert_eq!(h.header_read_timeout, Duration::from_millis(1500));
    assert_eq!(h.idle_timeout, Duration::from_millis(2500));
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
