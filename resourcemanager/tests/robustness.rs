//! Robustness: hostile requests against every RM operation in `docs/openapi.yaml`.
//!
//! The rule under test: no request may panic the RM or corrupt its state, and every REST
//! error is a YARN `RemoteException` body with the right status (400 bad input, 401/403,
//! 404 unknown id, 405/409 wrong method or state; 500 only for real bugs).
//!
//! The RM runs in-process on 127.0.0.1:0 with a fake NM at the network boundary (as in
//! `rest_api.rs`). Before the barrage the test makes a sentinel application A (AM launched,
//! named by no hostile request except the semantic attacks aimed at it) and a victim B
//! (AM registered; the AM-protocol requests carry its token). The barrage is built from the
//! spec: for every RM path and method, hostile path parameters, query strings, bodies
//! (generic ones and wrong-typed values for each field of the operation's request schema),
//! content types, `Accept`, bearer tokens, wrong methods and path shapes; then hand-written
//! semantic attacks (forged tokens for A, B releasing A's container, absurd asks, a rogue
//! node claiming A's AM container, absurd node sizes, hostile submissions and scheduler
//! mutations, bodies past the 2 MiB limit). Requests go over raw TCP (paths are sent
//! verbatim; a dropped connection shows as one), 8 at a time.
//!
//! Each answer must come (no hang, no dropped connection), must not be a 5xx other than a
//! 503 the spec lists, must carry a status the spec lists for the operation (or the router's
//! fallback 404, or 405 for a wrong method), must be the status the request class calls for
//! where there is one (401 for a bad token, 400 for unreadable JSON, 4xx for a garbage id),
//! and, when it is an error on a REST path, must be a `RemoteException` body. After the
//! barrage the RM must still serve normal requests, A must be unchanged, no application or
//! node may exist that the test did not make, and no thread may have panicked.
//!
//! The generic half (spec reading, raw client, catalogues, checks) is duplicated in
//! `nodemanager/tests/robustness.rs`; keep the two in step.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::routing::post;
use axum::{Json, Router};
use futures::StreamExt;
use serde_json::{json, Value};
use spindle_common::config::Configuration;
use spindle_common::contract::{self, parse_spec, METHODS};
use spindle_common::ids::ApplicationAttemptId;
use spindle_common::records::node::{StartContainersRequest, StartContainersResponse};
use spindle_common::token::{issue_amrm_token, TokenSecret};
use spindle_resourcemanager::config::RmConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const DAEMON: &str = "rm";
/// The start of the message of the router's fallback 404.
const FALLBACK_PREFIX: &str = "java.lang.Exception: no resource at";
/// Requests in flight at once.
const CONCURRENCY: usize = 8;
/// The longest any one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The test threads of this file (their panics are assertion failures, not daemon panics).
const TEST_NAMES: &[&str] = &[
    "every_rm_operation_survives_hostile_requests",
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

// ====================================================================== the RM

struct Rm {
    addr: SocketAddr,
    base: String,
    http: reqwest::Client,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    server: tokio::task::JoinHandle<anyhow::Result<()>>,
    _dir: tempfile::TempDir,
}

async fn start_rm() -> Rm {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut conf = Configuration::new();
    conf.set(
        "spindle.resourcemanager.state-store.path",
        &dir.path().join("rm.sqlite").display().to_string(),
    );
    conf.set("yarn.scheduler.minimum-allocation-mb", "128");
    let rm_conf = RmConfig::from_conf(&conf).expect("config");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let (rm, serve) = spindle_resourcemanager::driver::start(listener, rm_conf)
        .await
        .expect("start");
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(Box::pin(async move {
        let _ = rx.await;
    })));
    Rm {
        addr: rm.addr,
        base: format!("http://{}", rm.addr),
        http: reqwest::Client::builder()
            .no_proxy()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .expect("client"),
        stop: Some(tx),
        server,
        _dir: dir,
    }
}

impl Rm {
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
        token: Option<&str>,
    ) -> (u16, Value) {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(b) = body {
            req = req.json(&b);
        }
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let r = req.send().await.unwrap_or_else(|e| panic!("{path}: {e}"));
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }
    async fn get(&self, path: &str) -> (u16, Value) {
        self.call(reqwest::Method::GET, path, None, None).await
    }
    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.call(reqwest::Method::POST, path, Some(body), None)
            .await
    }
    async fn new_app_id(&self) -> String {
        let (status, v) = self
            .post("/ws/v1/cluster/apps/new-application", json!({}))
            .await;
        assert_eq!(status, 200, "{v}");
        v["application-id"].as_str().expect("id").to_string()
    }
    async fn shutdown(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        let _ = tokio::time::timeout(Duration::from_secs(10), &mut self.server).await;
        self.server.abort();
    }
}

/// A fake NM web server that accepts (and records) the AM launches the RM sends it.
async fn fake_nm() -> (String, Arc<Mutex<Vec<StartContainersRequest>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let app = Router::new().route(
        "/ws/v1/node/containers/start",
        post(move |Json(req): Json<StartContainersRequest>| {
            let s2 = s2.clone();
            async move {
                s2.lock().expect("lock").push(req);
                Json(StartContainersResponse::default())
            }
        }),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = l.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(l, app).await });
    (addr.to_string(), seen)
}

/// An application whose AM the fake NM was asked to launch.
struct Launched {
    id: String,
    attempt: String,
    am_container: String,
    token: String,
}

async fn submit_and_launch(
    rm: &Rm,
    launches: &Arc<Mutex<Vec<StartContainersRequest>>>,
    name: &str,
) -> Launched {
    let id = rm.new_app_id().await;
    let (status, body) = rm
        .call(
            reqwest::Method::POST,
            "/ws/v1/cluster/apps?user.name=alice",
            Some(json!({
                "application-id": id, "application-name": name, "queue": "default",
                "am-container-spec": {"commands": {"command": "sleep 1000"}},
                "resource": {"memory": 256, "vCores": 1}, "application-tags": {"tag": [name]}
            })),
            None,
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let found = launches.lock().expect("lock").iter().find_map(|l| {
            let env = &l.start_container_request[0]
                .container_launch_context
                .environment;
            let attempt = env.get("SPINDLE_APPLICATION_ATTEMPT_ID")?.clone();
            let a: ApplicationAttemptId = attempt.parse().ok()?;
            (a.application_id.to_string() == id)
                .then(|| (attempt, env["SPINDLE_AMRM_TOKEN"].clone()))
        });
        if let Some((attempt, token)) = found {
            let (_, atts) = rm
                .get(&format!("/ws/v1/cluster/apps/{id}/appattempts"))
                .await;
            let am_container = atts["appAttempts"]["appAttempt"][0]["containerId"]
                .as_str()
                .expect("AM container")
                .to_string();
            return Launched {
                id,
                attempt,
                am_container,
                token,
            };
        }
        assert!(
            Instant::now() < deadline,
            "the AM of {name} was not launched"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The parts of an application's report that no request of the barrage may change.
async fn fingerprint(rm: &Rm, id: &str) -> Value {
    let (s, app) = rm.get(&format!("/ws/v1/cluster/apps/{id}")).await;
    assert_eq!(s, 200, "{app}");
    let a = &app["app"];
    let mut keep = serde_json::Map::new();
    for k in [
        "id",
        "user",
        "name",
        "queue",
        "state",
        "finalStatus",
        "progress",
        "trackingUI",
        "diagnostics",
        "applicationType",
        "applicationTags",
        "priority",
        "startedTime",
        "launchTime",
        "finishedTime",
        "amContainerLogs",
        "amHostHttpAddress",
        "amRPCAddress",
        "masterNodeId",
        "allocatedMB",
        "allocatedVCores",
        "runningContainers",
    ] {
        keep.insert(k.to_string(), a[k].clone());
    }
    let (_, atts) = rm
        .get(&format!("/ws/v1/cluster/apps/{id}/appattempts"))
        .await;
    let (_, state) = rm.get(&format!("/ws/v1/cluster/apps/{id}/state")).await;
    let (_, queue) = rm.get(&format!("/ws/v1/cluster/apps/{id}/queue")).await;
    let (_, prio) = rm.get(&format!("/ws/v1/cluster/apps/{id}/priority")).await;
    json!({"app": keep, "attempts": atts, "state": state, "queue": queue, "priority": prio})
}

fn report(v: Value) -> Value {
    json!({"containerId": v["id"], "state": v["state"], "exitStatus": v["exit"], "diagnostics": "", "resource": {"memory": 256, "vCores": 1}})
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
    let apps = find("GET", "/ws/v1/cluster/apps");
    for q in ["states", "limit", "deSelects", "finishedTimeEnd"] {
        assert!(apps.query.iter().any(|x| x == q), "{q}: {:?}", apps.query);
    }
    assert!(apps.body.is_none());
    let submit = find("POST", "/ws/v1/cluster/apps");
    assert_eq!(submit.query, ["user.name"]);
    let fields: BTreeMap<_, _> = submit.body.clone().expect("body").into_iter().collect();
    assert_eq!(fields["application-id"], Kind::Str);
    assert_eq!(fields["priority"], Kind::Int);
    assert_eq!(fields["unmanaged-AM"], Kind::Bool);
    assert_eq!(fields["am-container-spec"], Kind::Obj);
    let alloc = find("POST", "/ws/v1/am/allocate");
    let fields: BTreeMap<_, _> = alloc.body.clone().expect("body").into_iter().collect();
    assert_eq!(fields["ask"], Kind::Arr);
    assert_eq!(fields["progress"], Kind::Num);
    assert_eq!(fields["blacklistRequest"], Kind::Any);
    let finish = find("POST", "/ws/v1/am/finish");
    let fields: BTreeMap<_, _> = finish.body.clone().expect("body").into_iter().collect();
    assert_eq!(
        fields["finalApplicationStatus"],
        Kind::Str,
        "a $ref to a string enum"
    );
    let access = find("GET", "/ws/v1/cluster/queues/{queue}/access");
    assert_eq!(access.query, ["user", "queue-acl-type", "user.name"]);
    assert_eq!(access.params(), ["queue"]);
    assert!(ops.len() > 30, "{} RM operations", ops.len());
    assert!(ops.iter().all(|o| !o.path.starts_with("/ws/v1/node/")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rm_operation_survives_hostile_requests() {
    record_panics();
    let started = Instant::now();
    let text = contract::read_spec(env!("CARGO_MANIFEST_DIR"));
    let ops = read_ops(&text, DAEMON);
    let rm = start_rm().await;

    // ---------------------------------------------------------- before: a node, A and B
    let (nm_addr, launches) = fake_nm().await;
    let (s, v) = rm
        .post(
            "/ws/v1/node-tracker/register",
            json!({"nodeId": nm_addr, "httpAddress": nm_addr, "resource": {"memory": 8192, "vCores": 8}, "nmVersion": "t"}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let a = submit_and_launch(&rm, &launches, "sentinel").await;
    let b = submit_and_launch(&rm, &launches, "victim").await;
    let hb = |containers: Vec<Value>| json!({"nodeId": nm_addr, "responseId": 0, "nodeStatus": {"healthy": true, "containersStatuses": containers}});
    let running = vec![
        report(json!({"id": a.am_container, "state": "RUNNING", "exit": -1000})),
        report(json!({"id": b.am_container, "state": "RUNNING", "exit": -1000})),
    ];
    let (s, v) = rm
        .post("/ws/v1/node-tracker/heartbeat", hb(running.clone()))
        .await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = rm
        .call(
            reqwest::Method::POST,
            "/ws/v1/am/register",
            Some(json!({"host": "h", "rpcPort": 1, "trackingUrl": ""})),
            Some(&b.token),
        )
        .await;
    assert_eq!(s, 200, "B registers: {v}");
    // Ids for the hostile submissions, reserved now so that every app after is accounted for.
    let mut fresh = Vec::new();
    for _ in 0..14 {
        fresh.push(rm.new_app_id().await);
    }
    let (_, info) = rm.get("/ws/v1/cluster/info").await;
    let cluster_ts = info["clusterInfo"]["id"].as_u64().expect("cluster id");
    let unknown_app = format!("application_{cluster_ts}_9999");
    let before_a = fingerprint(&rm, &a.id).await;
    let (_, conf_before) = rm.get("/ws/v1/cluster/scheduler-conf").await;

    // ---------------------------------------------------------- the spec-driven barrage
    let sample = |p: &str| -> String {
        match p {
            "appid" => b.id.clone(),
            "attemptid" => b.attempt.clone(),
            "containerid" => b.am_container.clone(),
            "nodeid" => nm_addr.clone(),
            "queue" => "default".into(),
            other => panic!("no sample for path parameter {{{other}}}: add one"),
        }
    };
    // A body that gets a request past parsing without changing what the test keeps.
    let benign = |op: &Op| -> Option<Vec<u8>> {
        op.body.as_ref()?;
        let b: &[u8] = match (op.method.as_str(), op.path.as_str()) {
            ("PUT", "/ws/v1/cluster/apps/{appid}/state") => b"{\"state\":\"KILLED\"}",
            ("PUT", "/ws/v1/cluster/apps/{appid}/queue") => b"{\"queue\":\"default\"}",
            ("PUT", "/ws/v1/cluster/apps/{appid}/priority") => b"{\"priority\":0}",
            ("POST", "/ws/v1/am/finish") => b"{\"diagnostics\":\"no status\"}",
            _ => b"{}",
        };
        Some(b.to_vec())
    };
    let token_b = b.token.clone();
    let auth = |op: &Op| op.path.starts_with("/ws/v1/am/").then(|| token_b.clone());
    // Requests with a benign body aimed at an application go to one that does not exist
    // (B must not be killed or moved by a query test).
    let safe_path = |op: &Op| -> String {
        if op.method == "PUT" && op.path.contains("{appid}") {
            fill_with(&op.path, |_| unknown_app.clone())
        } else {
            fill_with(&op.path, sample)
        }
    };
    // The queue access check needs the user to check, or it stops before the queue.
    let required_query = |op: &Op| -> String {
        if op.path.ends_with("/access") {
            "?user=alice".into()
        } else {
            String::new()
        }
    };
    let mut cases = spec_cases(
        &ops,
        &sample,
        &benign,
        &auth,
        &safe_path,
        &required_query,
        true,
    );

    // Bearer tokens, on each AM operation: all 401.
    let forged_for_a = issue_amrm_token(
        &TokenSecret::generate().expect("secret"),
        &a.attempt.parse().expect("attempt"),
    );
    let (b_payload, b_sig) = b.token.split_once('.').expect("token");
    let (a_payload, _) = forged_for_a.split_once('.').expect("token");
    let bad_tokens: Vec<Vec<u8>> = vec![
        b"Bearer".to_vec(),
        b"Bearer ".to_vec(),
        b"Bearer  ".to_vec(),
        format!("bearer {}", b.token).into_bytes(),
        format!("Basic {}", b.token).into_bytes(),
        format!("Token {}", b.token).into_bytes(),
        b.token.clone().into_bytes(),
        b"Bearer x".to_vec(),
        b"Bearer .".to_vec(),
        b"Bearer a.b".to_vec(),
        b"Bearer ...".to_vec(),
        format!("Bearer {forged_for_a}").into_bytes(),
        format!("Bearer {a_payload}.{b_sig}").into_bytes(),
        format!("Bearer {b_payload}.{}", "0".repeat(64)).into_bytes(),
        format!("Bearer {b_payload}.{}", &b_sig[..b_sig.len() - 2]).into_bytes(),
        format!("Bearer {b_payload}.{b_sig}00").into_bytes(),
        format!("Bearer {}.{b_sig}", "_-_-").into_bytes(),
        format!("Bearer {} trailing", b.token).into_bytes(),
        format!("Bearer {}", "t".repeat(10_000)).into_bytes(),
        b"Bearer \xff\xfe\xfd".to_vec(),
    ];
    for (i, op) in ops.iter().enumerate() {
        if !op.path.starts_with("/ws/v1/am/") {
            continue;
        }
        // The body would act if the token were taken: finish A (the forged token is A's).
        let body: &[u8] = if op.path.ends_with("/finish") {
            b"{\"finalApplicationStatus\":\"SUCCEEDED\",\"diagnostics\":\"forged\"}"
        } else if op.path.ends_with("/allocate") {
            b"{\"release\":[]}"
        } else {
            b"{\"host\":\"h\"}"
        };
        cases.push(Case {
            class: "auth",
            op: i,
            expect: Expect::Is(401),
            req: Req::new(&op.method, op.path.clone()).json(body),
        });
        for t in &bad_tokens {
            cases.push(Case {
                class: "auth",
                op: i,
                expect: Expect::Is(401),
                req: Req::new(&op.method, op.path.clone())
                    .header("Authorization", t.clone())
                    .json(body),
            });
        }
    }

    // ---------------------------------------------------------- semantic attacks
    let op_index = |m: &str, p: &str| {
        ops.iter()
            .position(|o| o.method == m && o.path == p)
            .unwrap_or_else(|| panic!("{m} {p} in the spec"))
    };
    let mut semantic = |m: &str, p: &str, target: String, body: Value, token: Option<&str>| {
        let mut req = Req::new(m, target).json(body.to_string());
        if let Some(t) = token {
            req = req.bearer(t);
        }
        cases.push(Case {
            class: "semantic",
            op: op_index(m, p),
            expect: Expect::Spec,
            req,
        });
    };
    // B's AM asks for absurd things and releases A's AM container.
    let ask = |extra: Value| {
        let mut a = json!({"priority": 1, "resourceName": "*", "capability": {"memory": 128, "vCores": 1}, "numContainers": 1});
        for (k, v) in extra.as_object().expect("object") {
            a[k] = v.clone();
        }
        json!({"ask": [a]})
    };
    let alloc = "/ws/v1/am/allocate";
    let allocs = vec![
        ask(json!({"numContainers": 2147483647})),
        ask(json!({"numContainers": -1})),
        ask(json!({"capability": {"memory": -1, "vCores": -1}})),
        ask(json!({"capability": {"memory": 0, "vCores": 0}})),
        ask(json!({"capability": {"memory": i64::MAX, "vCores": i64::MAX}})),
        ask(
            json!({"capability": {"memory": 128, "vCores": 1, "resourceInformations": {"resourceInformation": [{"name": "yarn.io/gpu", "value": -5}]}}}),
        ),
        ask(
            json!({"capability": {"memory": 128, "vCores": 1, "resourceInformations": {"resourceInformation": [{"name": "", "value": 1}, {"name": "memory-mb", "value": i64::MAX}]}}}),
        ),
        ask(json!({"priority": i32::MIN})),
        ask(json!({"priority": i32::MAX, "allocationRequestId": i64::MIN})),
        ask(json!({"resourceName": ""})),
        ask(json!({"resourceName": "r".repeat(5000), "relaxLocality": false})),
        ask(json!({"resourceName": "/no-rack", "relaxLocality": false})),
        ask(json!({"resourceName": "\u{0}"})),
        ask(json!({"gang": {"id": "", "placement": "PACK"}})),
        ask(json!({"gang": {"id": "g".repeat(300)}})),
        ask(json!({"gang": {"id": "g", "placement": "BOGUS"}})),
        ask(json!({"gang": {"id": "g", "maxNodes": 0, "timeoutMs": u64::MAX}})),
        ask(json!({"gang": {"id": "g2", "placement": "STRICT_PACK", "numContainers": 1000}})),
        json!({"ask": (0..1000).map(|i| json!({"priority": i, "resourceName": "*", "capability": {"memory": 128, "vCores": 1}, "numContainers": 0})).collect::<Vec<_>>()}),
        json!({"release": [a.am_container]}),
        json!({"release": ["container_1_0001_01_000001"]}),
        json!({"release": [b.am_container, b.am_container]}),
        json!({"release": ["x"]}),
        json!({"progress": 1e39}),
        json!({"progress": -1e30}),
        json!({"responseId": i32::MIN}),
        json!({"responseId": i32::MAX}),
        json!({"blacklistRequest": {"blacklistAdditions": [nm_addr], "blacklistRemovals": ["x"]}}),
        ask(json!({"numContainers": 0})),
    ];
    for body in allocs {
        semantic("POST", alloc, alloc.into(), body, Some(&b.token));
    }
    // B registers again (409).
    semantic(
        "POST",
        "/ws/v1/am/register",
        "/ws/v1/am/register".into(),
        json!({"host": "h"}),
        Some(&b.token),
    );
    // A rogue node (loopback, nothing listens there) claims A's AM container.
    let claim = vec![report(
        json!({"id": a.am_container, "state": "COMPLETE", "exit": 0}),
    )];
    let rogue_hb = |node: &str| json!({"nodeId": node, "responseId": 0, "nodeStatus": {"healthy": true, "containersStatuses": claim.clone()}});
    let tracker = "/ws/v1/node-tracker";
    semantic(
        "POST",
        "/ws/v1/node-tracker/heartbeat",
        format!("{tracker}/heartbeat"),
        rogue_hb("127.0.0.1:1"),
        None,
    );
    semantic(
        "POST",
        "/ws/v1/node-tracker/register",
        format!("{tracker}/register"),
        json!({"nodeId": "127.0.0.1:2", "httpAddress": "127.0.0.1:2", "resource": {"memory": 0, "vCores": 0}, "nmVersion": "rogue", "containerStatuses": claim.clone()}),
        None,
    );
    semantic(
        "POST",
        "/ws/v1/node-tracker/register",
        format!("{tracker}/register"),
        json!({"nodeId": "127.0.0.1:3", "httpAddress": "127.0.0.1:3", "resource": {"memory": -1, "vCores": 1}}),
        None,
    );
    // Absurd node sizes: the cluster's totals are sums of them.
    semantic(
        "POST",
        "/ws/v1/node-tracker/register",
        format!("{tracker}/register"),
        json!({"nodeId": "127.0.0.1:4", "httpAddress": "127.0.0.1:4", "resource": {"memory": i64::MAX, "vCores": i64::MAX}}),
        None,
    );
    semantic(
        "POST",
        "/ws/v1/node-tracker/register",
        format!("{tracker}/register"),
        json!({"nodeId": "127.0.0.1:5", "httpAddress": "127.0.0.1:5", "resource": {"memory": 0, "vCores": 0},
               "containerStatuses": [{"containerId": "container_1_0001_01_000001", "state": "RUNNING", "exitStatus": -1000,
                                      "resource": {"memory": i64::MAX, "vCores": i64::MAX}}]}),
        None,
    );
    semantic(
        "POST",
        "/ws/v1/node-tracker/unregister",
        format!("{tracker}/unregister"),
        json!({"nodeId": "127.0.0.1:1"}),
        None,
    );
    // Hostile submissions, each with its own reserved id.
    let apps_path = "/ws/v1/cluster/apps";
    let spec = |cmd: &str| json!({"commands": {"command": cmd}});
    let submissions = vec![
        json!({"am-container-spec": {"commands": {"command": "true"}, "environment": {"entry": [{"key": "A=B", "value": "1"}]}}}),
        json!({"am-container-spec": {"commands": {"command": "true"}, "environment": {"entry": [{"key": "", "value": "1"}]}}}),
        json!({"am-container-spec": {"commands": {"command": "true"}, "local-resources": {"entry": [{"key": "..", "value": {"resource": "/nonexistent", "type": "FILE"}}]}}}),
        json!({"am-container-spec": {"commands": {"command": "true"}, "local-resources": {"entry": [{"key": "a/b", "value": {"resource": "/nonexistent"}}]}}}),
        json!({"am-container-spec": spec("true"), "resource": {"memory": -1, "vCores": -1}}),
        json!({"am-container-spec": spec("true"), "resource": {"memory": i64::MAX, "vCores": 1}}),
        json!({"am-container-spec": spec("true"), "max-app-attempts": -1}),
        json!({"am-container-spec": spec("true"), "unmanaged-AM": true}),
        json!({"am-container-spec": spec("true"), "priority": i32::MAX, "resource": {"memory": 128, "vCores": 1}}),
        json!({"am-container-spec": spec("true"), "queue": "root"}),
        json!({"am-container-spec": spec("true"), "queue": "q".repeat(5000)}),
        json!({"am-container-spec": spec("true"), "queue": "root..default"}),
        json!({"am-container-spec": spec(&"c".repeat(100_000)), "application-name": "\u{0}<script>", "application-type": "t".repeat(5000), "application-tags": {"tag": (0..1000).map(|i| format!("tag{i}")).collect::<Vec<_>>()}, "resource": {"memory": 128, "vCores": 1}}),
        json!({"am-container-spec": spec("true"), "application-id": " "}),
    ];
    for (i, mut body) in submissions.into_iter().enumerate() {
        if body.get("application-id").is_none() {
            body["application-id"] = json!(fresh[i]);
        }
        semantic("POST", apps_path, apps_path.into(), body, None);
    }
    // A second submission of A's id.
    semantic(
        "POST",
        apps_path,
        apps_path.into(),
        json!({"application-id": a.id, "am-container-spec": spec("true")}),
        None,
    );
    // Moving or re-prioritising A under a name that is not A's.
    for (m, p, body) in [
        (
            "PUT",
            "/ws/v1/cluster/apps/{appid}/queue",
            json!({"queue": "nosuch"}),
        ),
        (
            "PUT",
            "/ws/v1/cluster/apps/{appid}/queue",
            json!({"queue": "root"}),
        ),
        (
            "PUT",
            "/ws/v1/cluster/apps/{appid}/queue",
            json!({"queue": "  "}),
        ),
        (
            "PUT",
            "/ws/v1/cluster/apps/{appid}/state",
            json!({"state": "RUNNING"}),
        ),
    ] {
        semantic(m, p, fill_with(p, |_| b.id.clone()), body, None);
    }
    // Scheduler mutations that must be refused (and, as a dry run, changed nothing anyway).
    let entry = |q: &str, k: &str, v: &str| json!({"update-queue": [{"queue-name": q, "params": {"entry": [{"key": k, "value": v}]}}]});
    let mutations = vec![
        json!({"remove-queue": ["root.default"]}),
        json!({"remove-queue": ["root"]}),
        json!({"remove-queue": "root.default"}),
        entry("root.default", "capacity", "NaN"),
        entry("root.default", "capacity", "-5"),
        entry("root.default", "capacity", "1e309"),
        entry("root.default", "capacity", "abc"),
        entry("root.default", "capacity", "101"),
        entry("root.default", "maximum-capacity", "-1"),
        entry("root.default", "user-limit-factor", "NaN"),
        entry("root.nosuch", "capacity", "10"),
        entry("root", "capacity", "50"),
        json!({"add-queue": [{"queue-name": "root..x"}]}),
        json!({"add-queue": [{"queue-name": "root.default.child", "params": {"entry": [{"key": "capacity", "value": "100"}]}}]}),
        json!({"add-queue": [{"queue-name": format!("root.{}", "n".repeat(5000))}]}),
        json!({"add-queue": [{"queue-name": "root.a b"}]}),
        json!({"global-updates": {"entry": [{"key": "yarn.scheduler.capacity.maximum-applications", "value": "99999999999999999999"}]}}),
        json!({"global-updates": {"entry": [{"key": "yarn.scheduler.capacity.maximum-am-resource-percent", "value": "NaN"}]}}),
        json!({"global-updates": {"entry": [{"key": "yarn.scheduler.capacity.root.queues", "value": ""}]}}),
        json!({"sched-conf": {"sched-conf": {}}}),
    ];
    for body in &mutations {
        semantic(
            "POST",
            "/ws/v1/cluster/scheduler-conf/validate",
            "/ws/v1/cluster/scheduler-conf/validate".into(),
            body.clone(),
            None,
        );
        semantic(
            "PUT",
            "/ws/v1/cluster/scheduler-conf",
            "/ws/v1/cluster/scheduler-conf".into(),
            body.clone(),
            None,
        );
    }

    // Bodies past axum's 2 MiB limit: a 400, not a reset connection.
    for (m, p) in [
        ("POST", "/ws/v1/cluster/apps"),
        ("POST", "/ws/v1/node-tracker/heartbeat"),
    ] {
        cases.push(Case {
            class: "over-limit",
            op: op_index(m, p),
            expect: Expect::Is(400),
            req: Req::new(m, p).json(format!("{{\"x\":\"{}\"}}", "a".repeat(3_000_000))),
        });
    }
    let total = cases.len();
    assert!(
        (1000..5000).contains(&total),
        "{total} requests: keep the barrage bounded"
    );
    let barrage_started = Instant::now();
    let (rows, summary) = run_barrage(rm.addr, &ops, cases, &|_, _| None).await;
    let barrage_took = barrage_started.elapsed();
    println!(
        "{total} hostile requests to {} RM operations in {barrage_took:?}; per class, status x count:\n{summary}",
        ops.len()
    );
    if !rows.is_empty() {
        eprintln!("\n{}", table(&rows));
    }

    // ---------------------------------------------------------- after: the RM still works
    let mut after = Vec::new();
    let (s, info) = rm.get("/ws/v1/cluster/info").await;
    if s != 200 || info["clusterInfo"]["state"] != "STARTED" {
        after.push(format!("GET /ws/v1/cluster/info: {s} {info}"));
    }
    let after_a = fingerprint(&rm, &a.id).await;
    if after_a != before_a {
        after.push(format!(
            "the sentinel application changed:\nbefore: {before_a}\nafter:  {after_a}"
        ));
    }
    let (s, apps) = rm.get("/ws/v1/cluster/apps").await;
    let known: BTreeSet<String> = [a.id.clone(), b.id.clone()]
        .into_iter()
        .chain(fresh.iter().cloned())
        .collect();
    let listed: BTreeSet<String> = apps["apps"]["app"]
        .as_array()
        .map(|l| {
            l.iter()
                .filter_map(|x| x["id"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    if s != 200 || !listed.contains(&a.id) || !listed.contains(&b.id) || !listed.is_subset(&known) {
        after.push(format!(
            "GET /ws/v1/cluster/apps: {s}; apps {listed:?}, expected A, B and some of {fresh:?}"
        ));
    }
    let (s, nodes) = rm.get("/ws/v1/cluster/nodes").await;
    let node_ids: BTreeSet<String> = nodes["nodes"]["node"]
        .as_array()
        .map(|l| {
            l.iter()
                .filter_map(|x| x["id"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let allowed_nodes: BTreeSet<String> = [nm_addr.clone(), "127.0.0.1:2".into()].into();
    if s != 200 || !node_ids.contains(&nm_addr) || !node_ids.is_subset(&allowed_nodes) {
        after.push(format!("GET /ws/v1/cluster/nodes: {s}; nodes {node_ids:?}"));
    }
    let (s, sched) = rm.get("/ws/v1/cluster/scheduler").await;
    let queues = sched.to_string();
    if s != 200 || !queues.contains("root.default") {
        after.push(format!("GET /ws/v1/cluster/scheduler: {s}"));
    }
    let (s, conf_after) = rm.get("/ws/v1/cluster/scheduler-conf").await;
    if s != 200 || conf_after.to_string().contains("NaN") {
        after.push(format!(
            "GET /ws/v1/cluster/scheduler-conf: {s}; before {conf_before}, after {conf_after}"
        ));
    }
    // The driver still takes commands: a normal submission runs; B's AM still allocates.
    // (B's absurd asks may hold every free MB now, so the new AM need not be launched.)
    let (s, v) = rm
        .post("/ws/v1/cluster/apps/new-application", json!({}))
        .await;
    if s != 200 {
        after.push(format!("new-application after the barrage: {s} {v}"));
    }
    let c = v["application-id"].as_str().unwrap_or("none").to_string();
    let (s, v) = rm
        .post(
            apps_path,
            json!({"application-id": c, "am-container-spec": spec("true"), "resource": {"memory": 128, "vCores": 1}}),
        )
        .await;
    let (s2, st) = rm.get(&format!("/ws/v1/cluster/apps/{c}/state")).await;
    if s != 202 || s2 != 200 || st["state"] != "ACCEPTED" {
        after.push(format!(
            "a submission after the barrage: {s} {v}; {s2} {st}"
        ));
    }
    let (s, v) = rm
        .call(
            reqwest::Method::POST,
            alloc,
            Some(json!({"progress": 0.5})),
            Some(&b.token),
        )
        .await;
    if s != 200 {
        after.push(format!("B's allocate after the barrage: {s} {v}"));
    }
    let (s, v) = rm.post("/ws/v1/node-tracker/heartbeat", hb(running)).await;
    if s != 200 || v["nodeAction"] != "NORMAL" {
        after.push(format!("the NM's heartbeat after the barrage: {s} {v}"));
    }
    let panics = daemon_panics();
    rm.shutdown().await;
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
