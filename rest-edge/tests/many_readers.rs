//! 1,000 concurrent readers from one host (127.0.0.1: one peer, as clients behind one proxy
//! or NAT look) against the serve loop with the default caps (512 per peer): every one is
//! answered 200, none reset; those past the per-peer cap wait for a place. Its own test
//! binary because it raises the process's open-file soft limit to the hard limit (it holds
//! 2,000 sockets: both ends).

use std::net::SocketAddr;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use spindle_rest_edge::serve::{raise_nofile_limit, serve, HttpServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const READERS: usize = 1000;

/// One GET on a fresh connection; the answer's text, or the error.
async fn read_once(addr: SocketAddr) -> Result<String, String> {
    let mut s = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    s.write_all(b"GET /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .map_err(|e| format!("write: {e}"))?;
    let mut got = Vec::new();
    s.read_to_end(&mut got)
        .await
        .map_err(|e| format!("read: {e}"))?;
    Ok(String::from_utf8_lossy(&got).to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_readers_from_one_host_are_all_served() {
    let limit = raise_nofile_limit().expect("raise the open-file limit");
    assert!(
        limit >= 2 * READERS as u64 + 200,
        "this test holds {} sockets; the open-file limit is {limit}",
        2 * READERS
    );
    let conf = HttpServerConfig::default();
    assert!(READERS > conf.max_connections_per_peer);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // Each answer takes a moment, so many readers are in flight at once.
    let router = Router::new().route(
        "/ok",
        get(|| async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            "ok"
        }),
    );
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, router, conf, async move {
        let _ = stop_rx.await;
    }));
    let readers: Vec<_> = (0..READERS)
        .map(|_| tokio::spawn(read_once(addr)))
        .collect();
    let mut failed = Vec::new();
    for (i, r) in readers.into_iter().enumerate() {
        let got = tokio::time::timeout(Duration::from_secs(120), r)
            .await
            .expect("every reader finishes within 120 s")
            .unwrap();
        match got {
            Ok(text) if text.starts_with("HTTP/1.1 200") && text.ends_with("ok") => {}
            Ok(text) => failed.push(format!("reader {i}: {text:?}")),
            Err(e) => failed.push(format!("reader {i}: {e}")),
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {READERS} readers not answered 200: {:?}",
        failed.len(),
        &failed[..failed.len().min(10)]
    );
    let _ = stop_tx.send(());
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("the serve loop returns after shutdown")
        .unwrap()
        .unwrap();
}
