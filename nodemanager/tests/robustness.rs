//! Robustness: hostile requests against every NM operation in `docs/openapi.yaml`.
//!
//! The rule under test: no request may panic the NM or corrupt its state, and every REST
//! error is a YARN `RemoteException` body with the right status (400 bad input, 404 unknown
//! id, 405 wrong method; 500 only for real bugs). The UI log pages (`/node/containerlogs`)
//! answer errors in plain text, as the spec says; a JSON error from them must still be a
//! `RemoteException`.
//!
//! The NM runs in-process on 127.0.0.1:0, registered with a fake RM (`support`). Before the
//! barrage it runs a sentinel container (`sleep`), which the path parameters name wherever
//! they need a real id (its logs are the ones the file-name attacks aim at). The barrage is
//! built from the spec: for every NM path and method, hostile path parameters, query
//! strings, bodies (generic ones and wrong-typed values for each field of the operation's
//! request schema), content types, `Accept`, wrong methods and path shapes; then hand-written
//! semantic attacks: starts with forged, foreign-node, expired, tampered and duplicate
//! container tokens (the duplicate names the sentinel), correctly signed starts with hostile
//! launch contexts, submitters and sizes, bad hold timeouts, held starts, releases (one
//! of the sentinel, which is not held) and stops of unknown and hostile containers, bodies
//! past the 2 MiB limit, and extreme log sizes. Requests go over raw TCP (paths are sent
//! verbatim; a dropped connection shows as one), 8 at a time.
//!
//! Each answer must come (no hang, no dropped connection), must not be a 5xx other than a
//! 503 the spec lists, must carry a status the spec lists for the operation (or the router's
//! fallback 404, or 405 for a wrong method), must be the status the request class calls for
//! where there is one (400 for unreadable JSON, 4xx for a garbage id), must not show
//! `/etc/passwd`, and, when it is an error on a REST path, must be a `RemoteException` body.
//! After the barrage the NM must still serve normal requests, the sentinel must still be
//! listed and RUNNING, a new container must start and complete, heartbeats must go on, no
//! thread may have panicked, and the NM must stop cleanly.
//!
//! The generic half (spec reading, raw client, catalogues, checks) is duplicated from
//! `resourcemanager/tests/robustness.rs`; keep the two in step.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{json, Value};
use spindle_common::contract::{self, parse_spec, METHODS};
use spindle_common::ids::NodeId;
use spindle_common::states::ContainerState;
use spindle_common::time::now_ms;
use spindle_common::token::{issue_container_token, TokenSecret};
use support::{cid, FakeRm, TestNm};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const DAEMON: &str = "nm";
/// The start of the message of the router's fallback 404.
const FALLBACK_PREFIX: &str = "no such resource:";
/// Requests in flight at once.
const CONCURRENCY: usize = 8;
/// The longest any one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The test threads of this file (their panics are assertion failures, not daemon panics).
const TEST_NAMES: &[&str] = &[
    "every_nm_operation_survives_hostile_requests",
    "the_spec_reader_finds_queries_and_bodies",
];

// ====================================================================== generic half

// ------------------------------------------------------------------ panics

static PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Records every panic (with its thread) from now on, then lets the usual hook print it.
fn record_panics() {
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

/// Panics on threads other than this file's test threads: the daemon's.
fn daemon_panics() -> Vec<String> {
    PANICS
        .lock()
        .map(|p| {
            p.iter()
                .filter(|m| {
                    !TEST_NAMES
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
enum Kind {
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

/// One operation of this daemon in the spec, with what the barrage needs of it.
#[derive(Debug)]
struct Op {
    /// The path template (`/ws/v1/cluster/apps/{appid}`).
    path: String,
    /// Upper case.
    method: String,
    statuses: BTreeSet<u16>,
    /// Names of the query parameters it documents.
    query: Vec<String>,
    /// Its request body's top-level fields, if it documents a body.
    body: Option<Vec<(String, Kind)>>,
}

impl Op {
    fn params(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = self.path.as_str();
        while let Some(s) = rest.find('{') {
            let e = rest[s..].find('}').expect("closed {") + s;
            out.push(rest[s + 1..e].to_string());
            rest = &rest[e + 1..];
        }
        out
    }
}

/// A schema field as read: its kind, or the schema it refers to (resolved once all are read).
type SpecField = (String, Result<Kind, String>);

fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

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
fn read_ops(text: &str, daemon: &str) -> Vec<Op> {
    // components: parameters (ref -> (name, in)), schemas (fields, own type)
    let mut params: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut schemas: BTreeMap<String, Vec<SpecField>> = BTreeMap::new();
    let mut schema_type: BTreeMap<String, String> = BTreeMap::new();
    let mut section = String::new();
    let mut sub = String::new();
    let mut cur = String::new();
    let mut in_props = false;
    let mut prop: Option<String> = None;
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let ind = indent(line);
        if ind == 0 {
            section = key_of(t).to_string();
            continue;
        }
        if section != "components" {
            continue;
        }
        match ind {
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
    let mut in_paths = false;
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let ind = indent(line);
        if ind == 0 {
            if in_paths {
                break;
            }
            in_paths = t == "paths:";
            continue;
        }
        if !in_paths {
            continue;
        }
        match ind {
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

/// The path with each `{param}` replaced by `value(param)`.
fn fill_with(path: &str, value: impl Fn(&str) -> String) -> String {
    let mut out = String::new();
    let mut rest = path;
    while let Some(s) = rest.find('{') {
        out.push_str(&rest[..s]);
        let e = rest[s..].find('}').expect("closed {") + s;
        out.push_str(&value(&rest[s + 1..e]));
        rest = &rest[e + 1..];
    }
    out.push_str(rest);
    out
}

// ------------------------------------------------------------------ a raw HTTP/1.1 client

/// One request, sent verbatim.
#[derive(Clone)]
struct Req {
    method: String,
    /// Path and query, as they go on the request line.
    target: String,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
}

impl Req {
    fn new(method: &str, target: impl Into<String>) -> Self {
        Self {
            method: method.to_string(),
            target: target.into(),
            headers: Vec::new(),
            body: Vec::new(),
        }
    }
    fn header(mut self, k: &str, v: impl Into<Vec<u8>>) -> Self {
        self.headers.push((k.to_string(), v.into()));
        self
    }
    fn json(self, body: impl Into<Vec<u8>>) -> Self {
        self.header("Content-Type", "application/json").body(body)
    }
    fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }
    fn bearer(self, token: &str) -> Self {
        self.header("Authorization", format!("Bearer {token}"))
    }
}

#[derive(Debug)]
struct Resp {
    status: u16,
    content_type: String,
    body: Vec<u8>,
}

impl Resp {
    fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }
    /// The `RemoteException` if the body is one with all three fields non-empty strings.
    fn remote_exception(&self) -> Option<(String, String, String)> {
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

/// Sends `r` on a fresh connection (`Connection: close`) and reads the whole answer. The
/// body is written while the answer is read, so a server that answers before reading all
/// of a large body is seen answering, not as a broken pipe.
async fn send(addr: SocketAddr, r: &Req) -> Result<Resp, String> {
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
    let body = r.body.clone();
    let exchange = async move {
        let stream = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let (mut rd, mut wr) = stream.into_split();
        // The writer hands its half back so the connection is not half-closed early.
        let writer = tokio::spawn(async move {
            let res = async {
                wr.write_all(&head).await?;
                wr.write_all(&body).await?;
                wr.flush().await
            }
            .await;
            (wr, res)
        });
        let mut buf = Vec::new();
        let read = rd.read_to_end(&mut buf).await;
        let (_wr, wrote) = writer.await.map_err(|e| format!("writer: {e}"))?;
        match parse_response(&buf) {
            Some(resp) => Ok(resp),
            None => Err(format!(
                "connection closed without a whole answer (read: {read:?}, write: {wrote:?}, {} bytes: {:?})",
                buf.len(),
                String::from_utf8_lossy(&buf[..buf.len().min(200)])
            )),
        }
    };
    tokio::time::timeout(REQUEST_TIMEOUT, exchange)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {REQUEST_TIMEOUT:?} (hang)")))
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
enum Expect {
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
struct Case {
    class: &'static str,
    /// Index into the operations (for the spec's statuses).
    op: usize,
    expect: Expect,
    req: Req,
}

/// Whether errors on this path must be JSON `RemoteException`s (the REST API and the
/// metrics) rather than the UI's HTML or plain text.
fn json_errors(path: &str) -> bool {
    path.starts_with("/ws/") || path == "/metrics"
}

/// What is wrong with the answer to `c`, if anything.
fn problem(op: &Op, c: &Case, got: &Result<Resp, String>) -> Option<String> {
    let r = match got {
        Ok(r) => r,
        Err(e) => return Some(e.clone()),
    };
    let st = r.status;
    let exc = r.remote_exception();
    let fallback = st == 404
        && exc
            .as_ref()
            .is_some_and(|e| e.0 == "NotFoundException" && e.1.starts_with(FALLBACK_PREFIX));
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

/// Sends every case, `CONCURRENCY` at a time, and checks each answer (`problem`, then the
/// daemon's own `extra_check`); answers the failures as table rows (none when all passed)
/// and, per class, the number of cases and the statuses they got.
async fn run_barrage(
    addr: SocketAddr,
    ops: &[Op],
    cases: Vec<Case>,
    extra_check: &dyn Fn(&Case, &Resp) -> Option<String>,
) -> (Vec<String>, String) {
    let results: Vec<(Case, Result<Resp, String>)> = futures::stream::iter(cases)
        .map(|c| async move {
            let got = send(addr, &c.req).await;
            (c, got)
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
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
        let p = problem(&ops[c.op], c, got)
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
    (rows, summary)
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
/// for each path parameter; `prepare(op, req)` adds what the operation needs to get past its
/// door (a valid token) and a benign body; `target(op)` may replace the path for requests
/// whose body or query could otherwise change state that the test keeps.
fn spec_cases(
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

// ====================================================================== the NM

/// The user every container of the test runs as.
const USER: &str = "alice";

fn launch_context(command: &str) -> Value {
    json!({"commands": [command], "environment": {}, "localResources": {}})
}

fn start_body(token: &str, ctx: Value) -> Value {
    json!({"startContainerRequest": [{"containerToken": token, "containerLaunchContext": ctx}]})
}

/// The parts of a container's report that no request of the barrage may change.
fn fingerprint(v: &Value) -> Value {
    let c = &v["container"];
    json!({
        "id": c["id"], "state": c["state"], "exitCode": c["exitCode"], "user": c["user"],
        "diagnostics": c["diagnostics"], "totalMemoryNeededMB": c["totalMemoryNeededMB"],
        "totalVCoresNeeded": c["totalVCoresNeeded"],
    })
}

#[test]
fn the_spec_reader_finds_queries_and_bodies() {
    let text = contract::read_spec(env!("CARGO_MANIFEST_DIR"));
    let ops = read_ops(&text, DAEMON);
    let find = |m: &str, p: &str| {
        ops.iter()
            .find(|o| o.method == m && o.path == p)
            .unwrap_or_else(|| panic!("{m} {p} in the spec"))
    };
    assert_eq!(find("GET", "/ws/v1/node/apps").query, ["state", "user"]);
    let log = find(
        "GET",
        "/ws/v1/node/containers/{containerid}/logs/{filename}",
    );
    assert_eq!(log.query, ["size", "format"]);
    assert_eq!(log.params(), ["containerid", "filename"]);
    let start = find("POST", "/ws/v1/node/containers/start");
    let fields: BTreeMap<_, _> = start.body.clone().expect("body").into_iter().collect();
    assert_eq!(fields["startContainerRequest"], Kind::Arr);
    assert_eq!(fields["hold"], Kind::Obj, "a $ref to an object schema");
    let stop = find("POST", "/ws/v1/node/containers/stop");
    assert_eq!(
        stop.body.clone().expect("body"),
        [("containerIds".to_string(), Kind::Arr)]
    );
    assert!(find("GET", "/metrics").body.is_none());
    assert!(ops.len() > 15, "{} NM operations", ops.len());
    assert!(ops.iter().all(|o| !o.path.starts_with("/ws/v1/cluster")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_nm_operation_survives_hostile_requests() {
    record_panics();
    let started = Instant::now();
    let text = contract::read_spec(env!("CARGO_MANIFEST_DIR"));
    let ops = read_ops(&text, DAEMON);
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().expect("tempdir");
    let mut nm = TestNm::start(dirs.path(), rm.addr, false).await;
    rm.wait_registered(1).await;

    // ---------------------------------------------------------- before: the sentinel
    let sentinel = cid(1, 1);
    nm.run_container(&rm, sentinel, USER, "echo sentinel; exec sleep 300")
        .await;
    // The RM's coarse RUNNING covers the NM's LOCALIZING: wait for the NM's own RUNNING.
    let sentinel_path = format!("/ws/v1/node/containers/{sentinel}");
    let deadline = Instant::now() + Duration::from_secs(15);
    let before = loop {
        let (s, v) = nm.get_json(&sentinel_path).await;
        assert_eq!(s, 200, "{v}");
        if v["container"]["state"] == "RUNNING" {
            break fingerprint(&v);
        }
        assert!(
            Instant::now() < deadline,
            "the sentinel is not RUNNING: {v}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };

    // ---------------------------------------------------------- the spec-driven barrage
    let sample = |p: &str| -> String {
        match p {
            "appid" => sentinel.application_id().to_string(),
            "containerid" => sentinel.to_string(),
            "filename" => "stdout".into(),
            "user" => USER.into(),
            "resourcename" => "yarn.io%2Fgpu".into(),
            other => panic!("no sample for path parameter {{{other}}}: add one"),
        }
    };
    let benign = |op: &Op| op.body.as_ref().map(|_| b"{}".to_vec());
    let safe_path = |op: &Op| fill_with(&op.path, sample);
    let mut cases = spec_cases(
        &ops,
        &sample,
        &benign,
        &|_| None,
        &safe_path,
        &|_| String::new(),
        false,
    );

    // ---------------------------------------------------------- semantic attacks
    let op_index = |m: &str, p: &str| {
        ops.iter()
            .position(|o| o.method == m && o.path == p)
            .unwrap_or_else(|| panic!("{m} {p} in the spec"))
    };
    let start_op = op_index("POST", "/ws/v1/node/containers/start");
    let start_path = "/ws/v1/node/containers/start";
    let mut add = |class: &'static str, op: usize, expect: Expect, target: String, body: Value| {
        cases.push(Case {
            class,
            op,
            expect,
            req: Req::new(&ops[op].method, target).json(body.to_string()),
        });
    };
    // Tokens that must not start anything: 200 with the container in failedRequests.
    let good = |id| rm.token(&nm.ident(id, USER));
    let forged = issue_container_token(
        &TokenSecret::generate().expect("secret"),
        &nm.ident(cid(2, 1), USER),
    );
    let mut foreign = nm.ident(cid(2, 2), USER);
    foreign.node_id = NodeId::new("127.0.0.1", 1);
    let mut expired = nm.ident(cid(2, 3), USER);
    expired.expiry_time_ms = now_ms() - 1;
    let (forged_payload, _) = forged.split_once('.').expect("token");
    let good_4 = good(cid(2, 4));
    let (_, good_sig) = good_4.split_once('.').expect("token");
    let bad_tokens = vec![
        forged.clone(),
        rm.token(&foreign),
        rm.token(&expired),
        good(sentinel), // a second start of the sentinel
        format!("{forged_payload}.{good_sig}"),
        format!("{good_4}00"),
        String::new(),
        "x".into(),
        ".".into(),
        "a.b".into(),
        "\u{0}".into(),
        "t".repeat(10_000),
    ];
    for t in &bad_tokens {
        add(
            "forged-token",
            start_op,
            Expect::Is(200),
            start_path.into(),
            start_body(t, launch_context("true")),
        );
    }
    add(
        "forged-token",
        start_op,
        Expect::Is(200),
        start_path.into(),
        json!({"startContainerRequest": (0..1000).map(|_| json!({"containerToken": forged, "containerLaunchContext": launch_context("true")})).collect::<Vec<_>>()}),
    );
    // Hold timeouts outside 1..=600000, or not a number: 400 before any token is looked at.
    for hold in [
        json!({"timeoutMs": 0}),
        json!({"timeoutMs": 600_001}),
        json!({"timeoutMs": u64::MAX}),
        json!({"timeoutMs": -1}),
        json!({"timeoutMs": 1.5}),
        json!({"timeoutMs": "x"}),
        json!(5),
        json!("x"),
    ] {
        let mut body = start_body(&forged, launch_context("true"));
        body["hold"] = hold;
        add(
            "bad-hold",
            start_op,
            Expect::Is(400),
            start_path.into(),
            body,
        );
    }
    // Correctly signed starts with hostile launch contexts, submitters and sizes: each is
    // started or refused (200 either way), and nothing else may change.
    let mut n = 0u64;
    let mut next = || {
        n += 1;
        cid(3, n)
    };
    let mut hostile_ctx = vec![
        json!({"commands": ["true"], "environment": {"A=B": "1"}}),
        json!({"commands": ["true"], "environment": {"": "1"}}),
        json!({"commands": ["true"], "environment": {"X\u{0}": "1"}}),
        json!({"commands": ["true"], "environment": {"X": "a\u{0}b"}}),
        json!({"commands": ["true"], "environment": {"PATH": ""}}),
        json!({"commands": ["true"], "localResources": {"..": {"resource": "/nonexistent"}}}),
        json!({"commands": ["true"], "localResources": {"a/b": {"resource": "/nonexistent"}}}),
        json!({"commands": ["true"], "localResources": {"": {"resource": "/nonexistent"}}}),
        json!({"commands": ["true"], "localResources": {"x": {"resource": "file:///nonexistent/x"}}}),
        json!({"commands": ["true"], "localResources": {"y": {"resource": "relative/path"}}}),
        json!({"commands": ["true"], "localResources": {"z": {"resource": "/nonexistent", "type": "ARCHIVE", "size": -1}}}),
        json!({"commands": []}),
        json!({"commands": ["\u{0}"]}),
        json!({"commands": ["true; ".repeat(20_000)]}),
        json!({}),
    ];
    let mut starts = Vec::new();
    for ctx in hostile_ctx.drain(..) {
        starts.push(start_body(&good(next()), ctx));
    }
    for user in ["..", "", "a/b", "-rf", "\u{0}", &"u".repeat(300)] {
        let id = next();
        starts.push(start_body(
            &rm.token(&nm.ident(id, user)),
            launch_context("true"),
        ));
    }
    for (memory, vcores) in [(i64::MAX, i64::MAX), (-1, -1), (0, 0)] {
        let mut ident = nm.ident(next(), USER);
        ident.resource.memory = memory;
        ident.resource.v_cores = vcores;
        starts.push(start_body(&rm.token(&ident), launch_context("true")));
    }
    // The same container twice in one call.
    let twice = good(next());
    starts.push(json!({"startContainerRequest": [
        {"containerToken": twice, "containerLaunchContext": launch_context("true")},
        {"containerToken": twice, "containerLaunchContext": launch_context("true")}]}));
    // A held start that nobody releases (it times out), and one that is released.
    let held = next();
    let mut body = start_body(&good(held), launch_context("true"));
    body["hold"] = json!({"timeoutMs": 300});
    starts.push(body);
    let released = next();
    let mut body = start_body(&good(released), launch_context("true"));
    body["hold"] = json!({});
    starts.push(body);
    for body in starts {
        add(
            "signed-start",
            start_op,
            Expect::Is(200),
            start_path.into(),
            body,
        );
    }
    // Release and stop: the sentinel is not held (refused, 200); unknown ids are refused
    // (200); malformed ids are a 400. Stops name the hostile starts, never the sentinel.
    let release_op = op_index("POST", "/ws/v1/node/containers/release");
    let stop_op = op_index("POST", "/ws/v1/node/containers/stop");
    let unknown = cid(9, 9).to_string();
    for (op, ids, expect) in [
        (release_op, json!([sentinel.to_string()]), Expect::Is(200)),
        (release_op, json!([released.to_string()]), Expect::Is(200)),
        (
            release_op,
            json!([held.to_string(), held.to_string()]),
            Expect::Is(200),
        ),
        (release_op, json!([unknown]), Expect::Is(200)),
        (
            release_op,
            json!(vec![unknown.clone(); 1000]),
            Expect::Is(200),
        ),
        (release_op, json!(["x"]), Expect::Is(400)),
        (release_op, json!([null]), Expect::Is(400)),
        (stop_op, json!([unknown]), Expect::Is(200)),
        (stop_op, json!(vec![unknown.clone(); 1000]), Expect::Is(200)),
        (
            stop_op,
            json!([cid(3, 1).to_string(), cid(3, 2).to_string()]),
            Expect::Is(200),
        ),
        (stop_op, json!(["container_1_2_3_4_5_6"]), Expect::Is(400)),
        (stop_op, json!([1]), Expect::Is(400)),
    ] {
        let path = ops[op].path.clone();
        add(
            "release-stop",
            op,
            expect,
            path,
            json!({"containerIds": ids}),
        );
    }
    // Bodies past axum's 2 MiB limit: a 400, not a reset connection.
    for op in [start_op, stop_op] {
        cases.push(Case {
            class: "over-limit",
            op,
            expect: Expect::Is(400),
            req: Req::new("POST", ops[op].path.clone())
                .json(format!("{{\"x\":\"{}\"}}", "a".repeat(3_000_000))),
        });
    }
    // Extreme log sizes on the sentinel's stdout, on all three log-file paths.
    for path in [
        "/ws/v1/node/containers/{containerid}/logs/{filename}",
        "/ws/v1/node/containerlogs/{containerid}/{filename}",
        "/node/containerlogs/{containerid}/{user}/{filename}",
    ] {
        let op = op_index("GET", path);
        for q in [
            "size=-9223372036854775808",
            "size=9223372036854775807",
            "size=-1",
            "size=0",
            "size=1&format=octet-stream",
            "size=-0",
            "size=+5",
        ] {
            cases.push(Case {
                class: "log-size",
                op,
                expect: Expect::Is(200),
                req: Req::new("GET", format!("{}?{q}", fill_with(path, sample))),
            });
        }
    }

    let total = cases.len();
    assert!(
        (1000..5000).contains(&total),
        "{total} requests: keep the barrage bounded"
    );
    // No answer may show a file outside the container's logs; a bad token never starts one.
    let extra_check = |c: &Case, r: &Resp| -> Option<String> {
        if r.status == 200 && String::from_utf8_lossy(&r.body).contains("root:x:0:0") {
            return Some("the answer shows /etc/passwd".into());
        }
        if c.class == "forged-token" {
            let v = r.json().unwrap_or(Value::Null);
            let ok = v["successfullyStartedContainers"]
                .as_array()
                .map_or(0, Vec::len);
            let failed = v["failedRequests"].as_array().map_or(0, Vec::len);
            if ok > 0 || failed == 0 {
                return Some(format!(
                    "a bad token: {ok} started, {failed} refused (expected all refused)"
                ));
            }
        }
        None
    };
    let heartbeats_before = rm.state.lock().expect("lock").heartbeats.len();
    let barrage_started = Instant::now();
    let (rows, summary) = run_barrage(nm.addr, &ops, cases, &extra_check).await;
    let barrage_took = barrage_started.elapsed();
    println!(
        "{total} hostile requests to {} NM operations in {barrage_took:?}; per class, status x count:\n{summary}",
        ops.len()
    );
    if !rows.is_empty() {
        eprintln!("\n{}", table(&rows));
    }

    // ---------------------------------------------------------- after: the NM still works
    let mut after = Vec::new();
    let (s, info) = nm.get_json("/ws/v1/node/info").await;
    if s != 200 || info["nodeInfo"]["id"] != nm.node_id.to_string() {
        after.push(format!("GET /ws/v1/node/info: {s} {info}"));
    }
    let (s, v) = nm.get_json(&sentinel_path).await;
    if s != 200 || fingerprint(&v) != before {
        after.push(format!(
            "the sentinel container changed: {s}\nbefore: {before}\nafter:  {v}"
        ));
    }
    let (s, list) = nm.get_json("/ws/v1/node/containers").await;
    if s != 200 || !list.to_string().contains(&sentinel.to_string()) {
        after.push(format!(
            "GET /ws/v1/node/containers: {s}, the sentinel not listed"
        ));
    }
    let (s, app) = nm
        .get_json(&format!("/ws/v1/node/apps/{}", sentinel.application_id()))
        .await;
    if s != 200 {
        after.push(format!("GET the sentinel's application: {s} {app}"));
    }
    let (s, log) = nm.get(&format!("{sentinel_path}/logs/stdout")).await;
    if s != 200 || !log.contains("sentinel") {
        after.push(format!("the sentinel's stdout: {s} {log:?}"));
    }
    // Heartbeats go on, and report the sentinel running.
    let deadline = Instant::now() + Duration::from_secs(5);
    while rm.state.lock().expect("lock").heartbeats.len() < heartbeats_before + 2
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let beats = rm.state.lock().expect("lock").heartbeats.len() - heartbeats_before;
    let reported = rm.last_report(&sentinel).map(|r| r.status.state);
    if beats < 2 || reported != Some(ContainerState::RUNNING) {
        after.push(format!(
            "{beats} heartbeats since the barrage began; the sentinel reported {reported:?}"
        ));
    }
    let panics = daemon_panics();
    // A normal container still starts, runs and completes.
    let fresh = cid(1, 99);
    nm.run_container(&rm, fresh, USER, "echo after").await;
    let done = rm.wait_state(&fresh, ContainerState::COMPLETE).await;
    if done.status.exit_status != 0 {
        after.push(format!("a container started after the barrage: {done:?}"));
    }
    let stopped = nm.stop().await;
    if let Err(e) = stopped {
        after.push(format!("the NM did not stop cleanly: {e}"));
    }
    drop(rm);
    println!("whole test {:?}", started.elapsed());

    let mut failure = String::new();
    if !rows.is_empty() {
        failure.push_str(&table(&rows));
    }
    for p in &after {
        failure.push_str(&format!("after the barrage: {p}\n"));
    }
    for p in &panics {
        failure.push_str(&format!("daemon panic: {p}\n"));
    }
    assert!(failure.is_empty(), "\n{failure}");
}
