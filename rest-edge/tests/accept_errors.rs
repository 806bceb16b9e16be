//! The serve loop out of file descriptors (`EMFILE`): it keeps running, and once descriptors
//! are free again it accepts the connections that waited and answers them. Its own test
//! binary (one process), because it lowers the process's open-file limit.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use axum::routing::get;
use axum::Router;
use nix::sys::resource::{getrlimit, setrlimit, Resource};
use spindle_rest_edge::serve::{serve, HttpServerConfig};

fn open_fds() -> u64 {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count() as u64)
        .unwrap_or(0)
}

/// One GET on `s`; the answer's text (empty when the connection was closed or timed out).
fn get_on(s: &mut TcpStream) -> String {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    if s.write_all(b"GET /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return String::new();
    }
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    String::from_utf8_lossy(&got).to_string()
}

#[test]
fn out_of_file_descriptors_the_loop_waits_and_serves_what_waited() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let router = Router::new().route("/ok", get(|| async { "ok" }));
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = rt.spawn(serve(
        listener,
        router,
        HttpServerConfig::default(),
        async move {
            let _ = stop_rx.await;
        },
    ));

    // Client sockets made before the limit is lowered (connecting needs no new descriptor).
    let sockets: Vec<socket2::Socket> = (0..30)
        .map(|_| socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap())
        .collect();
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    // Room for a few accepted connections only.
    setrlimit(Resource::RLIMIT_NOFILE, open_fds() + 5, hard).unwrap();
    let mut clients: Vec<TcpStream> = sockets
        .into_iter()
        .map(|s| {
            s.connect_timeout(&addr.into(), Duration::from_secs(5))
                .expect("connect (queued by the kernel even while the server cannot accept)");
            s.into()
        })
        .collect();
    // Let the loop hit EMFILE and back off a few times.
    std::thread::sleep(Duration::from_millis(300));
    assert!(!server.is_finished(), "the serve loop ended on EMFILE");

    // Descriptors back: every waiting connection is accepted and answered.
    setrlimit(Resource::RLIMIT_NOFILE, soft, hard).unwrap();
    let start = Instant::now();
    for (i, c) in clients.iter_mut().enumerate() {
        let got = get_on(c);
        assert!(
            got.starts_with("HTTP/1.1 200") && got.ends_with("ok"),
            "connection {i} (of those that waited): {got:?}"
        );
    }
    assert!(start.elapsed() < Duration::from_secs(20));
    let mut fresh = TcpStream::connect(addr).unwrap();
    assert!(get_on(&mut fresh).starts_with("HTTP/1.1 200"));

    drop(clients);
    drop(fresh);
    let _ = stop_tx.send(());
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .expect("the serve loop returns after shutdown")
            .unwrap()
            .unwrap();
    });
}
