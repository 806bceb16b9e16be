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

use std::collections::{BTreeMap, BTreeSet};
use std::io::{ErrorKind, Read as _, Write as _};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{fill_with, parse_spec, read_spec, section, METHODS};

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

// ------------------------------------------------------------------ the spec

/// A JSON type, coarsely, as the spec's schemas give a property's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Str,
    Int,
    Num,
    Bool,
    Arr,
    Obj,
    /// oneOf/allOf/untyped: anything may be right.
    Any,
}

fn kind_of(t: &str) -> Kind {
    match t {
        "string" => Kind::Str,
        "integer" => Kind::Int,
        "number" => Kind::Num,
        "boolean" => Kind::Bool,
        "array" => Kind::Arr,
        "object" => Kind::Obj,
        _ => Kind::Any,
    }
}

/// One operation of a daemon in the spec, with what the barrage needs of it.
#[derive(Debug)]
pub struct Op {
    /// The path template (`/ws/v1/cluster/apps/{appid}`).
    pub path: String,
    /// Upper case.
    pub method: String,
    pub statuses: BTreeSet<u16>,
    /// Names of the query parameters it documents.
    pub query: Vec<String>,
    /// Its request body's top-level fields, if it documents a body.
    pub body: Option<Vec<(String, Kind)>>,
}

impl Op {
    /// The names of its path parameters, in order.
    pub fn params(&self) -> Vec<String> {
        let mut out = Vec::new();
        fill_with(&self.path, |p| {
            out.push(p.to_string());
            String::new()
        });
        out
    }
}

/// The index in `ops` of the operation `method` (upper case) `path`; panics if the spec has
/// none.
pub fn op_index(ops: &[Op], method: &str, path: &str) -> usize {
    ops.iter()
        .position(|o| o.method == method && o.path == path)
        .unwrap_or_else(|| panic!("{method} {path} in the spec"))
}

/// The operations of `daemon` in `docs/openapi.yaml` (see `read_ops`), for a test of the
/// crate at `crate_dir` (see `read_spec`).
pub fn spec_ops(crate_dir: &str, daemon: &str) -> Vec<Op> {
    read_ops(&read_spec(crate_dir), daemon)
}

/// A schema field as read: its kind, or the schema it refers to (resolved once all are read).
type SpecField = (String, Result<Kind, String>);

fn key_of(t: &str) -> &str {
    t.split(':')
        .next()
        .unwrap_or("")
        .trim()
        .trim_matches(|c| c == '\'' || c == '"')
}

fn ref_name(t: &str) -> Option<String> {
    let (_, r) = t.split_once("$ref:")?;
    Some(
        r.trim()
            .trim_matches(|c| c == '\'' || c == '"')
            .rsplit('/')
            .next()?
            .to_string(),
    )
}

/// The operations of `daemon` in the spec: `contract::parse_spec`'s paths, methods and
/// statuses, plus the query parameters and request-body fields read here (same layout
/// rules: parameters at 6-space indent, `- name:`/`- $ref:` items at 8, `in:` at 10;
/// schemas at 4 under `components: schemas:`, `properties:` at 6, fields at 8).
pub fn read_ops(text: &str, daemon: &str) -> Vec<Op> {
    // components: parameters (ref -> (name, in)), schemas (fields, own type)
    let mut params: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut schemas: BTreeMap<String, Vec<SpecField>> = BTreeMap::new();
    let mut schema_type: BTreeMap<String, String> = BTreeMap::new();
    let mut sub = String::new();
    let mut cur = String::new();
    let mut in_props = false;
    let mut prop: Option<String> = None;
    for line in section(text, "components") {
        let t = line.text;
        match line.indent {
            2 => sub = key_of(t).to_string(),
            4 => {
                cur = key_of(t).to_string();
                in_props = false;
                prop = None;
            }
            6 if sub == "parameters" => {
                let v = t.split_once(':').map(|x| x.1.trim()).unwrap_or("");
                let e = params.entry(cur.clone()).or_default();
                match key_of(t) {
                    "name" => e.0 = v.to_string(),
                    "in" => e.1 = v.to_string(),
                    _ => {}
                }
            }
            6 if sub == "schemas" => {
                in_props = key_of(t) == "properties";
                if key_of(t) == "type" {
                    let v = t.split_once(':').map(|x| x.1.trim()).unwrap_or("");
                    schema_type.insert(cur.clone(), v.to_string());
                }
            }
            8 if sub == "schemas" && in_props => {
                let name = key_of(t).to_string();
                let rest = t.split_once(':').map(|x| x.1.trim()).unwrap_or("");
                let kind = if let Some(inline) = rest.strip_prefix('{') {
                    let ty = inline
                        .split(',')
                        .find_map(|kv| kv.trim().strip_prefix("type:"))
                        .map(|v| v.trim().trim_end_matches('}').trim().to_string());
                    Ok(ty.map_or(Kind::Any, |v| kind_of(&v)))
                } else {
                    Ok(Kind::Any)
                };
                schemas
                    .entry(cur.clone())
                    .or_default()
                    .push((name.clone(), kind));
                prop = rest.is_empty().then_some(name);
            }
            10 if sub == "schemas" && in_props => {
                // The first type-giving line of a multi-line property decides its kind.
                if let Some(p) = prop.take() {
                    let k = if let Some(r) = ref_name(t) {
                        Err(r)
                    } else if let Some(v) = t.strip_prefix("type:") {
                        Ok(kind_of(v.trim()))
                    } else if t.starts_with("oneOf:") || t.starts_with("allOf:") {
                        Ok(Kind::Any)
                    } else {
                        prop = Some(p);
                        continue;
                    };
                    if let Some(f) = schemas
                        .get_mut(&cur)
                        .and_then(|f| f.iter_mut().find(|f| f.0 == p))
                    {
                        f.1 = k;
                    }
                }
            }
            _ => {}
        }
    }
    let resolve = |k: &Result<Kind, String>| match k {
        Ok(k) => *k,
        Err(r) => schema_type.get(r).map_or(Kind::Obj, |t| kind_of(t)),
    };

    // paths: per (path, method) the query parameters and the body schema
    let mut extra: BTreeMap<(String, String), (Vec<String>, Option<String>)> = BTreeMap::new();
    let (mut path, mut method) = (String::new(), String::new());
    let (mut in_params, mut in_body) = (false, false);
    let mut pending: Option<String> = None;
    for line in section(text, "paths") {
        let t = line.text;
        match line.indent {
            2 => {
                path = key_of(t).to_string();
                method.clear();
            }
            4 => {
                let k = key_of(t);
                method = if METHODS.contains(&k) {
                    k.to_string()
                } else {
                    String::new()
                };
                in_params = false;
                in_body = false;
            }
            6 => {
                in_params = key_of(t) == "parameters";
                in_body = key_of(t) == "requestBody";
            }
            _ if method.is_empty() => {}
            8 if in_params => {
                let e = extra.entry((path.clone(), method.clone())).or_default();
                if let Some(n) = t.strip_prefix("- name:") {
                    pending = Some(n.trim().to_string());
                } else if let Some(r) = ref_name(t) {
                    pending = None;
                    if let Some((name, loc)) = params.get(&r) {
                        if loc == "query" {
                            e.0.push(name.clone());
                        }
                    }
                }
            }
            10 if in_params && t == "in: query" => {
                if let Some(n) = pending.take() {
                    extra
                        .entry((path.clone(), method.clone()))
                        .or_default()
                        .0
                        .push(n);
                }
            }
            _ if in_body => {
                if let Some(r) = ref_name(t) {
                    let e = extra.entry((path.clone(), method.clone())).or_default();
                    if e.1.is_none() {
                        e.1 = Some(r);
                    }
                }
            }
            _ => {}
        }
    }

    let mut ops = Vec::new();
    for item in parse_spec(text)
        .into_iter()
        .filter(|i| i.daemons.contains(daemon))
    {
        for op in &item.ops {
            let (query, body) = extra
                .get(&(item.path.clone(), op.method.clone()))
                .cloned()
                .unwrap_or_default();
            let body = body.map(|s| {
                schemas
                    .get(&s)
                    .map(|f| f.iter().map(|(n, k)| (n.clone(), resolve(k))).collect())
                    .unwrap_or_default()
            });
            ops.push(Op {
                path: item.path.clone(),
                method: op.method.to_uppercase(),
                statuses: op.statuses.clone(),
                query,
                body,
            });
        }
    }
    ops
}

// ------------------------------------------------------------------ a raw HTTP/1.1 client

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

/// Parses a whole response; None if it is incomplete.
fn parse_response(buf: &[u8]) -> Option<Resp> {
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
    let body = if chunked {
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
        match parse_response(&buf) {
            Some(resp) => Ok(resp),
            None => Err(format!(
                "connection closed without a whole answer (read: {read:?}, write: {wrote:?}, {} bytes: {:?})",
                buf.len(),
                String::from_utf8_lossy(&buf[..buf.len().min(200)])
            )),
        }
    })
}

// ------------------------------------------------------------------ hostile catalogues

/// Garbage for path parameters, percent-encoded as it goes on the request line.
fn path_garbage() -> Vec<String> {
    let mut v: Vec<String> = [
        "x",
        "application_",
        "application_1_",
        "application_1_x",
        "application__1",
        "appattempt_1_2",
        "appattempt_1_1_1_1",
        "container_1_2_3_4_5_6",
        "container_e_1_1_1_1",
        "container_e99999999999_1_1_1_1",
        "container_99999999999999999999_1_1_1",
        "application_99999999999999999999_1",
        "application_1_99999999999",
        "application_-1_1",
        "appattempt_1_1_99999999999",
        "-1",
        "0",
        "99999999999999999999",
        "%00",
        "%00application_1_1",
        "..%2F..",
        "..%2F..%2F..%2Fetc%2Fpasswd",
        "%2Fetc%2Fpasswd",
        "..",
        ".",
        "%2e%2e",
        "%FF%FE",
        "%C3%28",
        "%",
        "%zz",
        "%25",
        "%20",
        "%0A",
        "%0D%0AX-Injected:%201",
        "%3Cscript%3Ealert(1)%3C%2Fscript%3E",
        "nohost:1",
        "host:99999",
        ":",
        "%3A%3A",
        "stdout%00.txt",
        "%5C..%5C..",
        "%E2%80%AE",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push("a".repeat(5000));
    v
}

/// Query strings any operation may be sent.
fn generic_queries() -> Vec<String> {
    let mut v: Vec<String> = [
        "unknown=1",
        "a=1&a=2",
        "user.name=",
        "user.name=%00",
        "user.name=-rf",
        "user.name=..%2F..",
        "user.name=a&user.name=b",
        "user.name=%FF%FE",
        "%FF=%FE",
        "&&&",
        "=",
        "a",
        "%",
        "a=%zz",
        "a=%0D%0AX-Injected:%201",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push(format!("user.name={}", "u".repeat(300)));
    v.push(format!("x={}", "y".repeat(5000)));
    v
}

/// Bad values for a documented query parameter `p`.
fn param_queries(p: &str) -> Vec<String> {
    let mut v: Vec<String> = [
        "",
        "BOGUS",
        "-1",
        "abc",
        "99999999999999999999",
        "%00",
        "%FF",
        ",,,",
    ]
    .iter()
    .map(|x| format!("{p}={x}"))
    .collect();
    v.push(format!("{p}=a&{p}=b"));
    v.push(format!("{p}={}", "z".repeat(300)));
    v.push(p.to_string());
    v
}

/// A body that is not JSON (or not readable JSON): the operations that read a body must
/// answer each with 400.
fn unreadable_bodies() -> Vec<(String, Vec<u8>)> {
    let mut random = Vec::new();
    let mut x: u32 = 0x9e37_79b9;
    for _ in 0..96 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        random.push((x & 0xff) as u8);
    }
    random[0] = 0xff;
    let mut v: Vec<(String, Vec<u8>)> = vec![
        ("empty".into(), Vec::new()),
        ("random bytes".into(), random),
        ("BOM + {}".into(), b"\xef\xbb\xbf{}".to_vec()),
        ("{".into(), b"{".to_vec()),
        ("{\"a\":".into(), b"{\"a\":".to_vec()),
        ("[1,]".into(), b"[1,]".to_vec()),
        ("{\"a\":1,}".into(), b"{\"a\":1,}".to_vec()),
        ("two documents".into(), b"{} {}".to_vec()),
        ("1e999".into(), b"1e999".to_vec()),
        ("NaN".into(), b"NaN".to_vec()),
        ("single quotes".into(), b"{'a':1}".to_vec()),
        ("NUL".into(), b"\0".to_vec()),
        ("xml".into(), b"<?xml version=\"1.0\"?><a/>".to_vec()),
    ];
    v.push(("10000 x [".into(), "[".repeat(10_000).into_bytes()));
    v.push((
        "10000 levels [[..]]".into(),
        format!("{}{}", "[".repeat(10_000), "]".repeat(10_000)).into_bytes(),
    ));
    v
}

/// Bodies that are JSON (or that serde may skip unchecked, inside a field it ignores) but
/// not the operation's shape, or hostile in size.
fn odd_bodies() -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = [
        "null",
        "[]",
        "\"x\"",
        "{}",
        "{\"a\":1}",
        "1",
        "-0",
        "true",
        "{\"\":null}",
        "{\"a\":1,\"a\":2}",
        "[{}]",
        "{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
    ]
    .iter()
    .map(|s| (s.to_string(), s.as_bytes().to_vec()))
    .collect();
    // serde skips the value of a field it ignores without checking its UTF-8 or its depth.
    v.push((
        "invalid utf-8 in a string".into(),
        b"{\"a\":\"\xff\xfe\"}".to_vec(),
    ));
    v.push(("lone surrogate".into(), b"{\"a\":\"\\ud800\"}".to_vec()));
    v.push((
        "10000 levels {\"a\":..}".into(),
        format!("{}1{}", "{\"a\":".repeat(10_000), "}".repeat(10_000)).into_bytes(),
    ));
    // ~2 MB, under axum's 2 MiB body limit so the whole body is read and parsed.
    v.push((
        "~2 MB string".into(),
        format!("{{\"x\":\"{}\"}}", "a".repeat(2_000_000)).into_bytes(),
    ));
    let mut arr = String::from("[0");
    while arr.len() < 2_000_000 {
        arr.push_str(",0");
    }
    arr.push(']');
    v.push(("~2 MB array".into(), arr.into_bytes()));
    v
}

/// Values of the wrong JSON type for a field of kind `k` (a parser must refuse them all).
fn wrong_values(k: Kind) -> Vec<String> {
    let v: &[&str] = match k {
        Kind::Str => &["1", "true", "[\"x\"]", "{\"a\":1}", "-1.5e300"],
        Kind::Int => &[
            "\"x\"",
            "1.5",
            "99999999999999999999",
            "-99999999999999999999",
            "true",
            "[]",
            "{}",
            "1e400",
        ],
        Kind::Num => &["\"x\"", "[]", "{}", "true"],
        Kind::Bool => &["\"true\"", "1", "[]", "{}"],
        Kind::Arr => &["1", "true", "{\"a\":1}", "[[[]]]"],
        Kind::Obj => &["\"x\"", "1", "true", "[1,2,3]"],
        Kind::Any => &[],
    };
    v.iter().map(|s| s.to_string()).collect()
}

/// Values of the right type that are hostile all the same (may be accepted).
fn edge_values(k: Kind) -> Vec<String> {
    match k {
        Kind::Str => vec![
            "\"\"".into(),
            "\"\\u0000\"".into(),
            "\"../../etc/passwd\"".into(),
            format!("\"{}\"", "s".repeat(5000)),
        ],
        Kind::Int => vec![
            "-1".into(),
            "2147483648".into(),
            "-9223372036854775808".into(),
            "18446744073709551615".into(),
        ],
        Kind::Num => vec!["1e308".into(), "-1e308".into(), "1e39".into()],
        Kind::Arr => vec!["[]".into(), "[null]".into()],
        Kind::Any | Kind::Obj => vec!["null".into(), "{}".into(), "[]".into()],
        Kind::Bool => vec!["null".into()],
    }
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

/// The spec-driven barrage: every operation, every class. `sample(param)` is a real value
/// for each path parameter; `benign(op)` a body that gets a request past parsing (for the
/// operations that read one); `auth(op)` a valid bearer token, where the operation needs one;
/// `safe_path(op)` the path for the requests whose body or query could otherwise change
/// state the test keeps; `required_query(op)` a query the operation needs to get past its
/// door (`?user=alice`), or "". With `content_type_required`, the operations that read a body
/// must refuse one without a Content-Type or with an XML one (400).
pub fn spec_cases(
    ops: &[Op],
    sample: &dyn Fn(&str) -> String,
    benign: &dyn Fn(&Op) -> Option<Vec<u8>>,
    auth: &dyn Fn(&Op) -> Option<String>,
    safe_path: &dyn Fn(&Op) -> String,
    required_query: &dyn Fn(&Op) -> String,
    content_type_required: bool,
) -> Vec<Case> {
    let mut cases = Vec::new();
    let base = |op: &Op, target: String| {
        let mut r = Req::new(&op.method, target);
        if let Some(t) = auth(op) {
            r = r.bearer(&t);
        }
        r
    };
    let with_benign = |op: &Op, r: Req| match benign(op) {
        Some(b) => r.json(b),
        None => r,
    };
    let garbage = path_garbage();
    let all_methods = ["GET", "PUT", "POST", "DELETE", "PATCH", "OPTIONS"];
    let mut seen_paths = BTreeSet::new();
    for (i, op) in ops.iter().enumerate() {
        let params = op.params();
        // Path parameters: each in turn garbage, the others real.
        for p in &params {
            let expect = if p == "user" || p == "resourcename" {
                Expect::Spec
            } else {
                Expect::ClientError
            };
            for g in &garbage {
                let target = fill_with(&op.path, |q| if q == p { g.clone() } else { sample(q) })
                    + &required_query(op);
                cases.push(Case {
                    class: "path-param",
                    op: i,
                    expect,
                    req: with_benign(op, base(op, target)),
                });
            }
        }
        // Query strings: generic, then bad values of each documented parameter.
        let qpath = safe_path(op);
        let mut queries = generic_queries();
        for p in &op.query {
            queries.extend(param_queries(p));
        }
        for q in queries {
            cases.push(Case {
                class: "query",
                op: i,
                expect: Expect::Spec,
                req: with_benign(op, base(op, format!("{qpath}?{q}"))),
            });
        }
        // Headers: Accept, odd Content-Types (with the benign body, or `{}`).
        for accept in ["application/xml", "text/html", "garbage/;;;", ""] {
            cases.push(Case {
                class: "accept",
                op: i,
                expect: Expect::Spec,
                req: with_benign(op, base(op, qpath.clone())).header("Accept", accept),
            });
        }
        // Odd Content-Types, with the benign body (or `{}`), where a body may be read.
        let body = benign(op).unwrap_or_else(|| b"{}".to_vec());
        let cts: &[Option<&str>] = if op.method == "GET" {
            &[]
        } else {
            &[
                None,
                Some("text/plain"),
                Some("application/xml"),
                Some("text/xml; charset=utf-8"),
                Some("application/json; charset=utf-16"),
                Some("application/x-www-form-urlencoded"),
                Some("multipart/form-data; boundary=x"),
                Some(""),
                Some("application/jsonx"),
            ]
        };
        for &ct in cts {
            let mut r = base(op, qpath.clone()).body(body.clone());
            if let Some(ct) = ct {
                r = r.header("Content-Type", ct);
            }
            let expect = match (ct, op.body.is_some()) {
                // The spec's convention: XML bodies are refused (where JSON is enforced).
                (Some(c), true) if content_type_required && c.contains("xml") => Expect::Is(400),
                (None, true) if content_type_required => Expect::Is(400),
                _ => Expect::Spec,
            };
            cases.push(Case {
                class: "content-type",
                op: i,
                expect,
                req: r,
            });
        }
        // Bodies: unreadable ones (400 where a body is read), odd JSON, wrong-typed fields.
        let strict = if op.body.is_some() {
            Expect::Is(400)
        } else {
            Expect::Spec
        };
        let unreadable = unreadable_bodies();
        let odd = odd_bodies();
        let body_list: Vec<(Vec<u8>, Expect, &'static str)> = if op.body.is_some() {
            let mut l: Vec<(Vec<u8>, Expect, &'static str)> = unreadable
                .into_iter()
                .map(|(_, b)| (b, strict, "body-unreadable"))
                .chain(odd.into_iter().map(|(_, b)| (b, Expect::Spec, "body-odd")))
                .collect();
            for (field, kind) in op.body.iter().flatten() {
                let f = serde_json::to_string(field).expect("field name");
                for v in wrong_values(*kind) {
                    l.push((
                        format!("{{{f}:{v}}}").into_bytes(),
                        Expect::Is(400),
                        "body-wrong-type",
                    ));
                }
                for v in edge_values(*kind) {
                    l.push((
                        format!("{{{f}:{v}}}").into_bytes(),
                        Expect::Spec,
                        "body-edge",
                    ));
                }
            }
            l
        } else {
            // Operations without a documented body: a body must not matter.
            vec![
                (
                    b"\xff\xfe\x00garbage".to_vec(),
                    Expect::Spec,
                    "body-ignored",
                ),
                (b"[[[[[[[[[[".to_vec(), Expect::Spec, "body-ignored"),
            ]
        };
        for (b, expect, class) in body_list {
            cases.push(Case {
                class,
                op: i,
                expect,
                req: base(op, qpath.clone()).json(b),
            });
        }
        // Wrong methods and path shapes, once per path.
        if seen_paths.insert(op.path.clone()) {
            let listed: BTreeSet<&str> = ops
                .iter()
                .filter(|o| o.path == op.path)
                .map(|o| o.method.as_str())
                .collect();
            let real = fill_with(&op.path, sample);
            for m in all_methods.iter().filter(|m| !listed.contains(*m)) {
                cases.push(Case {
                    class: "wrong-method",
                    op: i,
                    expect: Expect::Is(405),
                    req: Req::new(m, real.clone()).json("{}"),
                });
            }
            for shape in [
                format!("{real}/"),
                format!("{real}//x"),
                format!("/{real}"),
                format!("{real}%2F"),
                format!("{real}/.."),
                format!("{real}/./"),
                real.to_ascii_uppercase(),
                format!("{real}#frag"),
            ] {
                cases.push(Case {
                    class: "path-shape",
                    op: i,
                    expect: Expect::Any,
                    req: with_benign(op, base(op, shape)),
                });
            }
        }
    }
    cases
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead as _;
    use std::net::TcpListener;

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
