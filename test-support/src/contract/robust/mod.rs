//! The daemon-independent half of the robustness tests (`resourcemanager/tests/robustness.rs`
//! and `nodemanager/tests/robustness.rs`): hostile requests built from `docs/openapi.yaml`
//! for every operation of a daemon, sent over raw TCP, and the checks on each answer.
//!
//! Here: a reader for what the barrage needs of the spec beyond `parse_spec` (each
//! operation's query parameters and request-body fields), a raw HTTP/1.1 client (paths go on
//! the request line verbatim; a dropped connection or a hang shows as one), the catalogues of
//! hostile path parameters, queries, headers and bodies, the spec-driven barrage
//! (`spec_cases`), the rules every answer must keep (`run_barrage`) and a panic recorder
//! that tells the daemon's panics from the test's. What stays in each test is its daemon's:
//! starting it, the sample values and benign bodies, its hand-written attacks and its checks
//! after the barrage.
//!
//! Plain std: the client is blocking, `CONCURRENCY` threads at a time; an async test calls
//! `run_barrage` inside `tokio::task::block_in_place`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

mod hostile;
mod http;
mod spec;

pub use hostile::spec_cases;
pub use http::{send, Req, Resp};
pub use spec::{op_index, read_ops, spec_ops, Kind, Op};

/// Requests in flight at once.
pub const CONCURRENCY: usize = 8;
/// The longest any one request may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

// ------------------------------------------------------------------ panics

static PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Records every panic (with its thread) from now on, then lets the usual hook print it.
pub fn record_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let thread = std::thread::current()
                .name()
                .unwrap_or("<unnamed>")
                .to_string();
            if let Ok(mut p) = PANICS.lock() {
                p.push(format!("[thread {thread}] {info}"));
            }
            prev(info);
        }));
    });
}

/// The panics recorded (see `record_panics`) on threads other than the test threads named
/// `test_names` (their panics are assertion failures): the daemon's.
pub fn daemon_panics(test_names: &[&str]) -> Vec<String> {
    PANICS
        .lock()
        .map(|p| {
            p.iter()
                .filter(|m| {
                    !test_names
                        .iter()
                        .any(|t| m.contains(&format!("[thread {t}]")))
                })
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

// ------------------------------------------------------------------ checking

/// What a request's answer must be, beyond the universal rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// One of the statuses the spec lists.
    Spec,
    /// Exactly this status.
    Is(u16),
    /// A 4xx the spec lists.
    ClientError,
    /// Any status but a server error (the request may land on another route).
    Any,
}

/// One request of the barrage and what it must get.
pub struct Case {
    pub class: &'static str,
    /// Index into the operations (for the spec's statuses).
    pub op: usize,
    pub expect: Expect,
    pub req: Req,
}

/// The daemon the barrage is aimed at.
pub struct Daemon<'a> {
    /// Its short name (`RM`, `NM`), for the summary.
    pub name: &'a str,
    pub addr: SocketAddr,
    /// The start of the message of its router's fallback 404.
    pub fallback_prefix: &'a str,
}

/// Whether errors on this path must be JSON `RemoteException`s (the REST API and the
/// metrics) rather than the UI's HTML or plain text.
fn json_errors(path: &str) -> bool {
    path.starts_with("/ws/") || path == "/metrics"
}

/// What is wrong with the answer to `c`, if anything.
fn problem(op: &Op, c: &Case, got: &Result<Resp, String>, fallback_prefix: &str) -> Option<String> {
    let r = match got {
        Ok(r) => r,
        Err(e) => return Some(e.clone()),
    };
    let st = r.status;
    let exc = r.remote_exception();
    let fallback = st == 404
        && exc
            .as_ref()
            .is_some_and(|e| e.0 == "NotFoundException" && e.1.starts_with(fallback_prefix));
    if st >= 500 && !(st == 503 && op.statuses.contains(&503)) {
        return Some(format!("server error {st}"));
    }
    match c.expect {
        Expect::Is(s) if st != s && !fallback => {
            return Some(format!("expected {s}"));
        }
        Expect::ClientError if !(400..500).contains(&st) => {
            return Some("expected a 4xx".into());
        }
        _ => {}
    }
    let method_fallback = st == 405 && c.expect == Expect::Is(405);
    if !fallback && !method_fallback && c.expect != Expect::Any && !op.statuses.contains(&st) {
        return Some(format!("status not in the spec {:?}", op.statuses));
    }
    // A HEAD answer carries the headers of the GET it stands for, never a body.
    if op.method.eq_ignore_ascii_case("HEAD") {
        return None;
    }
    if st >= 400 {
        let json_ct = r.content_type.starts_with("application/json");
        if json_errors(&op.path) || fallback || method_fallback {
            if exc.is_none() || !json_ct {
                return Some(format!(
                    "error is not a RemoteException (content-type {:?})",
                    r.content_type
                ));
            }
        } else if r.json().is_some() && exc.is_none() {
            return Some("JSON error that is not a RemoteException".into());
        }
    } else if r.content_type.starts_with("application/json") && r.json().is_none() {
        return Some("application/json answer that does not parse".into());
    }
    None
}

fn shorten(s: &str, n: usize) -> String {
    let s: String = s
        .chars()
        .map(|c| if c.is_control() { '·' } else { c })
        .collect();
    if s.chars().count() <= n {
        s
    } else {
        let head: String = s.chars().take(n).collect();
        format!("{head}…({} chars)", s.chars().count())
    }
}

fn describe_body(b: &[u8]) -> String {
    if b.is_empty() {
        return "-".into();
    }
    shorten(&String::from_utf8_lossy(b), 40)
}

fn describe_headers(h: &[(String, Vec<u8>)]) -> String {
    if h.is_empty() {
        return "-".into();
    }
    shorten(
        &h.iter()
            .map(|(k, v)| format!("{k}: {}", String::from_utf8_lossy(v)))
            .collect::<Vec<_>>()
            .join("; "),
        50,
    )
}

/// Sends every case to `daemon`, `CONCURRENCY` at a time, and checks each answer (`problem`,
/// then the daemon's own `extra_check`). Prints how many cases took how long and, per class,
/// the number of cases and the statuses they got, and the failures as a table (see `table`);
/// answers the failures' table rows (none when all passed). Blocks until every case is
/// answered (from an async test: inside `tokio::task::block_in_place`).
pub fn run_barrage(
    daemon: &Daemon,
    ops: &[Op],
    cases: Vec<Case>,
    extra_check: &dyn Fn(&Case, &Resp) -> Option<String>,
) -> Vec<String> {
    let total = cases.len();
    assert!(
        (1000..8000).contains(&total),
        "{total} requests: keep the barrage bounded"
    );
    let started = Instant::now();
    let queue = Mutex::new(cases.into_iter());
    let results: Mutex<Vec<(Case, Result<Resp, String>)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..CONCURRENCY {
            scope.spawn(|| loop {
                let Some(c) = queue.lock().expect("lock").next() else {
                    break;
                };
                let got = send(daemon.addr, &c.req);
                results.lock().expect("lock").push((c, got));
            });
        }
    });
    let results = results.into_inner().expect("lock");
    let mut seen: BTreeMap<&'static str, BTreeMap<String, usize>> = BTreeMap::new();
    for (c, got) in &results {
        let status = got
            .as_ref()
            .map_or("none".to_string(), |r| r.status.to_string());
        *seen.entry(c.class).or_default().entry(status).or_default() += 1;
    }
    let summary = seen
        .iter()
        .map(|(class, st)| {
            let n: usize = st.values().sum();
            let st: Vec<String> = st.iter().map(|(s, k)| format!("{s}x{k}")).collect();
            format!("  {class:<16} {n:>5}: {}", st.join(" "))
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut rows = Vec::new();
    for (c, got) in &results {
        let p = problem(&ops[c.op], c, got, daemon.fallback_prefix)
            .or_else(|| got.as_ref().ok().and_then(|r| extra_check(c, r)));
        if let Some(p) = p {
            let (status, body) = match got {
                Ok(r) => (r.status.to_string(), describe_body(&r.body)),
                Err(_) => ("-".into(), "-".into()),
            };
            rows.push(format!(
                "{:<14} | {:<6} {:<60} | {:<30} | {:<42} | {:>3} {:<60} | {}",
                c.class,
                c.req.method,
                shorten(&c.req.target, 60),
                describe_headers(&c.req.headers),
                describe_body(&c.req.body),
                status,
                body,
                p
            ));
        }
    }
    println!(
        "{total} hostile requests to {} {} operations in {:?}; per class, status x count:\n{summary}",
        ops.len(),
        daemon.name,
        started.elapsed()
    );
    if !rows.is_empty() {
        eprintln!("\n{}", table(&rows));
    }
    rows
}

/// Fails the test if the barrage found wrong answers (`rows`, from `run_barrage`), the
/// daemon misbehaved after it (`after`) or panicked (`panics`, from `daemon_panics`).
pub fn assert_survived(rows: &[String], after: &[String], panics: &[String]) {
    let mut failure = String::new();
    if !rows.is_empty() {
        failure.push_str(&table(rows));
    }
    for p in after {
        failure.push_str(&format!("after the barrage: {p}\n"));
    }
    for p in panics {
        failure.push_str(&format!("daemon panic: {p}\n"));
    }
    assert!(failure.is_empty(), "\n{failure}");
}

fn table(rows: &[String]) -> String {
    let mut out = format!(
        "{} of the hostile requests got a wrong answer:\n{:<14} | {:<67} | {:<30} | {:<42} | {:<64} | problem\n",
        rows.len(),
        "class",
        "request",
        "headers",
        "body",
        "answer"
    );
    for r in rows.iter().take(120) {
        out.push_str(r);
        out.push('\n');
    }
    if rows.len() > 120 {
        out.push_str(&format!("... and {} more\n", rows.len() - 120));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::io::{BufRead as _, Read as _, Write as _};
    use std::net::TcpListener;
    use std::net::TcpStream;

    /// Serves one connection on a fresh port with `serve`; answers its address.
    fn server(serve: impl FnOnce(TcpStream) + Send + 'static) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        std::thread::spawn(move || serve(l.accept().expect("accept").0));
        addr
    }

    /// Reads the request's head (up to the blank line), not its body.
    fn read_head(s: &TcpStream) -> String {
        let mut r = std::io::BufReader::new(s);
        let mut head = String::new();
        while r.read_line(&mut head).expect("read") > 2 {}
        head
    }

    #[test]
    fn send_reads_a_chunked_answer() {
        let addr = server(|mut s| {
            let head = read_head(&s);
            assert!(head.starts_with("GET /a%2Fb?x=1 HTTP/1.1\r\n"), "{head}");
            assert!(head.contains("\r\nAuthorization: Bearer t\r\n"), "{head}");
            s.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n3\r\n{\"a\r\n5;x=y\r\n\":1}\n\r\n0\r\n\r\n")
                .expect("write");
        });
        let r = send(addr, &Req::new("GET", "/a%2Fb?x=1").bearer("t")).expect("answer");
        assert_eq!(r.status, 404);
        assert_eq!(r.content_type, "application/json");
        assert_eq!(r.json(), Some(serde_json::json!({"a": 1})));
    }

    #[test]
    fn send_sees_an_answer_before_a_large_body_is_read() {
        let addr = server(|mut s| {
            let mut r = std::io::BufReader::new(s.try_clone().expect("clone"));
            let mut head = String::new();
            while r.read_line(&mut head).expect("read") > 2 {}
            s.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 2\r\n\r\nno")
                .expect("write");
            // Only then the body, so that closing does not reset the connection.
            let n = std::io::copy(&mut r.take(3_000_000), &mut std::io::sink()).expect("body");
            assert_eq!(n, 3_000_000);
        });
        let r = send(addr, &Req::new("POST", "/").json(vec![b'a'; 3_000_000])).expect("answer");
        assert_eq!((r.status, r.body.as_slice()), (400, &b"no"[..]));
    }

    #[test]
    fn send_reports_a_dropped_connection() {
        let addr = server(|s| {
            read_head(&s);
        });
        let e = send(addr, &Req::new("GET", "/")).expect_err("no answer");
        assert!(
            e.starts_with("connection closed without a whole answer"),
            "{e}"
        );
    }

    #[test]
    fn params_names_the_path_parameters() {
        let op = Op {
            path: "/a/{x}/b/{yy}".into(),
            method: "GET".into(),
            statuses: BTreeSet::new(),
            query: Vec::new(),
            body: None,
        };
        assert_eq!(op.params(), ["x", "yy"]);
    }
}
