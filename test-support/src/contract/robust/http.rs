//! A raw HTTP/1.1 client: paths go on the request line verbatim; a dropped connection or a
//! hang shows as one.

use std::io::{ErrorKind, Read as _, Write as _};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::Instant;

use serde_json::Value;

use super::REQUEST_TIMEOUT;

/// One request, sent verbatim.
#[derive(Clone)]
pub struct Req {
    pub method: String,
    /// Path and query, as they go on the request line.
    pub target: String,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

impl Req {
    pub fn new(method: &str, target: impl Into<String>) -> Self {
        Self {
            method: method.to_string(),
            target: target.into(),
            headers: Vec::new(),
            body: Vec::new(),
        }
    }
    pub fn header(mut self, k: &str, v: impl Into<Vec<u8>>) -> Self {
        self.headers.push((k.to_string(), v.into()));
        self
    }
    /// The body, as `application/json`.
    pub fn json(self, body: impl Into<Vec<u8>>) -> Self {
        self.header("Content-Type", "application/json").body(body)
    }
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }
    pub fn bearer(self, token: &str) -> Self {
        self.header("Authorization", format!("Bearer {token}"))
    }
}

/// A whole answer.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub content_type: String,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }
    /// The `RemoteException` if the body is one with all three fields non-empty strings.
    pub fn remote_exception(&self) -> Option<(String, String, String)> {
        let v = self.json()?;
        let re = v.get("RemoteException")?;
        let field = |k: &str| {
            re.get(k)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        Some((
            field("exception")?,
            field("message")?,
            field("javaClassName")?,
        ))
    }
}

fn dechunk(mut b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let nl = b.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&b[..nl]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        b = &b[nl + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(b.get(..size)?);
        b = b.get(size + 2..)?;
    }
}

/// Parses a whole response; None if it is incomplete. The answer to a HEAD request has no
/// body whatever its `Content-Length` says (RFC 9110, 9.3.2).
fn parse_response(buf: &[u8], head_request: bool) -> Option<Resp> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&buf[..end]);
    let rest = &buf[end + 4..];
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    let mut content_type = String::new();
    let mut length = None;
    let mut chunked = false;
    for l in lines {
        let (k, v) = l.split_once(':')?;
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
        match k.as_str() {
            "content-type" => content_type = v.to_string(),
            "content-length" => length = v.parse::<usize>().ok(),
            "transfer-encoding" => chunked = v.eq_ignore_ascii_case("chunked"),
            _ => {}
        }
    }
    let body = if head_request {
        Vec::new()
    } else if chunked {
        dechunk(rest)?
    } else if let Some(n) = length {
        rest.get(..n)?.to_vec()
    } else {
        rest.to_vec()
    };
    Some(Resp {
        status,
        content_type,
        body,
    })
}

/// Sends `r` on a fresh connection (`Connection: close`) and reads the whole answer, within
/// `REQUEST_TIMEOUT` in all. The body is written (by a second thread) while the answer is
/// read, so a server that answers before reading all of a large body is seen answering, not
/// as a broken pipe.
pub fn send(addr: SocketAddr, r: &Req) -> Result<Resp, String> {
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    let hang = || Err(format!("no answer within {REQUEST_TIMEOUT:?} (hang)"));
    let mut head = Vec::new();
    let _ = write!(
        head,
        "{} {} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n",
        r.method, r.target
    );
    for (k, v) in &r.headers {
        head.extend_from_slice(k.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(v);
        head.extend_from_slice(b"\r\n");
    }
    let _ = write!(head, "Content-Length: {}\r\n\r\n", r.body.len());
    let stream = match TcpStream::connect_timeout(&addr, REQUEST_TIMEOUT) {
        Ok(s) => s,
        Err(e) if e.kind() == ErrorKind::TimedOut => return hang(),
        Err(e) => return Err(format!("connect: {e}")),
    };
    let mut wr = stream.try_clone().map_err(|e| format!("connect: {e}"))?;
    std::thread::scope(|scope| {
        // The writer's handle is a second descriptor of the same socket: when it is dropped,
        // the connection is not half-closed.
        let (wrote_tx, wrote_rx) = std::sync::mpsc::channel();
        scope.spawn(move || {
            let res = wr
                .write_all(&head)
                .and_then(|()| wr.write_all(&r.body))
                .and_then(|()| wr.flush());
            let _ = wrote_tx.send(res);
        });
        let mut rd = &stream;
        let mut buf = Vec::new();
        let mut chunk = vec![0u8; 64 * 1024];
        let read = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break None;
            }
            if let Err(e) = rd.set_read_timeout(Some(left)) {
                break Some(Err(e));
            }
            match rd.read(&mut chunk) {
                Ok(0) => break Some(Ok(buf.len())),
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                    ) => {}
                Err(e) => break Some(Err(e)),
            }
        };
        let wrote = read.as_ref().and_then(|_| {
            wrote_rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .ok()
        });
        let (Some(read), Some(wrote)) = (read, wrote) else {
            // Frees a writer blocked on a server that stopped reading.
            let _ = stream.shutdown(Shutdown::Both);
            return hang();
        };
        match parse_response(&buf, r.method.eq_ignore_ascii_case("HEAD")) {
            Some(resp) => Ok(resp),
            None => Err(format!(
                "connection closed without a whole answer (read: {read:?}, write: {wrote:?}, {} bytes: {:?})",
                buf.len(),
                String::from_utf8_lossy(&buf[..buf.len().min(200)])
            )),
        }
    })
}
