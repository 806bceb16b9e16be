//! Contract test: `docs/openapi.yaml` against the RM's router, in both directions.
//!
//! 1. Every RM path + method in the spec is routed: the RM (in-process, port 0) answers a
//!    request for it with something other than the router's fallbacks (404 `no resource at`,
//!    405 `WebApplicationException`), and with one of the statuses the spec lists for it.
//! 2. Every `.route("...", ...)` in `resourcemanager/src` (read as text) is in the spec, with
//!    the same methods.
//!
//! The spec is read with a small line-based parser (no YAML dependency); the format rules it
//! relies on are written at the top of `docs/openapi.yaml`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use spindle_common::config::Configuration;
use spindle_resourcemanager::config::RmConfig;

const DAEMON: &str = "rm";
const METHODS: &[&str] = &["get", "put", "post", "delete", "patch"];

fn spec_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/openapi.yaml")
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// A syntactically valid value for each path parameter the spec uses.
fn sample(param: &str) -> &'static str {
    match param {
        "appid" => "application_1700000000000_0001",
        "attemptid" => "appattempt_1700000000000_0001_000001",
        "containerid" => "container_1700000000000_0001_01_000001",
        "nodeid" => "host.example.com:45454",
        "filename" => "stdout",
        "user" => "alice",
        "queue" => "default",
        other => panic!("docs/openapi.yaml uses path parameter {{{other}}}: add a sample value to the contract test"),
    }
}

// ------------------------------------------------------------------------------ the spec

#[derive(Debug)]
struct Operation {
    method: String,
    statuses: BTreeSet<u16>,
}

#[derive(Debug)]
struct PathItem {
    path: String,
    line: usize,
    daemons: BTreeSet<String>,
    ops: Vec<Operation>,
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

fn key(line: &str) -> Option<&str> {
    let t = line.trim();
    let (k, _) = t.split_once(':')?;
    Some(k.trim().trim_matches(|c| c == '\'' || c == '"'))
}

/// Parses the `paths:` section of the spec (see the format rules at the top of the file).
fn parse_spec(text: &str) -> Vec<PathItem> {
    let mut items: Vec<PathItem> = Vec::new();
    let mut in_paths = false;
    let mut in_responses = false;
    for (n, line) in text.lines().enumerate() {
        let line_no = n + 1;
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let ind = indent(line);
        if ind == 0 {
            if in_paths {
                break;
            }
            in_paths = line.trim_end() == "paths:";
            continue;
        }
        if !in_paths {
            continue;
        }
        match ind {
            2 => {
                let raw = trimmed.strip_suffix(':').unwrap_or_else(|| {
                    panic!("openapi.yaml:{line_no}: a path key must end with ':'")
                });
                let path = raw.trim_matches(|c| c == '\'' || c == '"').to_string();
                assert!(
                    path.starts_with('/'),
                    "openapi.yaml:{line_no}: a 2-space key under paths: must be a path, got {path:?}"
                );
                assert!(
                    items.iter().all(|i| i.path != path),
                    "openapi.yaml:{line_no}: path {path} listed twice"
                );
                items.push(PathItem {
                    path,
                    line: line_no,
                    daemons: BTreeSet::new(),
                    ops: Vec::new(),
                });
                in_responses = false;
            }
            4 => {
                let item = items
                    .last_mut()
                    .unwrap_or_else(|| panic!("openapi.yaml:{line_no}: key before any path"));
                let k = key(line).unwrap_or("");
                if k == "x-daemon" {
                    let (_, v) = trimmed.split_once(':').unwrap_or_default();
                    item.daemons = v
                        .split(|c: char| c == ',' || c.is_whitespace())
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect();
                } else if METHODS.contains(&k) {
                    assert!(
                        item.ops.iter().all(|o| o.method != k),
                        "openapi.yaml:{line_no}: {k} listed twice for {}",
                        item.path
                    );
                    item.ops.push(Operation {
                        method: k.to_string(),
                        statuses: BTreeSet::new(),
                    });
                }
                in_responses = false;
            }
            6 => {
                in_responses = key(line) == Some("responses")
                    && items.last().is_some_and(|i| !i.ops.is_empty());
            }
            8 if in_responses => {
                let k = key(line).unwrap_or("");
                let status: u16 = k.parse().unwrap_or_else(|_| {
                    panic!("openapi.yaml:{line_no}: expected a quoted status code, got {k:?}")
                });
                if let Some(op) = items.last_mut().and_then(|i| i.ops.last_mut()) {
                    op.statuses.insert(status);
                }
            }
            _ => {}
        }
    }
    for i in &items {
        assert!(
            !i.daemons.is_empty(),
            "openapi.yaml:{}: {} has no x-daemon",
            i.line,
            i.path
        );
        assert!(
            !i.ops.is_empty(),
            "openapi.yaml:{}: {} has no operation",
            i.line,
            i.path
        );
        for op in &i.ops {
            assert!(
                !op.statuses.is_empty(),
                "openapi.yaml: {} {} lists no response status",
                op.method,
                i.path
            );
        }
    }
    items
}

/// `/a/{x}/b/{y}` -> `/a/{}/b/{}`.
fn normalize(path: &str) -> String {
    let mut out = String::new();
    let mut in_param = false;
    for c in path.chars() {
        match c {
            '{' => {
                in_param = true;
                out.push_str("{}");
            }
            '}' => in_param = false,
            _ if in_param => {}
            _ => out.push(c),
        }
    }
    out
}

fn fill(path: &str) -> String {
    let mut out = String::new();
    let mut rest = path;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let end = rest[start..].find('}').expect("unclosed {") + start;
        out.push_str(sample(&rest[start + 1..end]));
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

// ------------------------------------------------------------------------------ the source

#[derive(Debug)]
struct Route {
    path: String,
    methods: BTreeSet<String>,
    file: String,
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every `.route("path", <method router>)` in the text, with the axum method functions
/// (`get(..)`, `.post(..)`, ...) called at the top level of its second argument.
fn routes_in(text: &str, file: &str) -> Vec<Route> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(pos) = text[from..].find(".route(") {
        let start = from + pos + ".route(".len();
        from = start;
        let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
        if text[line_start..start].trim_start().starts_with("//") {
            continue;
        }
        let mut i = start;
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        assert!(
            bytes.get(i) == Some(&b'"'),
            "{file}: .route( whose path is not a string literal; the contract test cannot read it"
        );
        let path_end = text[i + 1..].find('"').expect("unterminated path literal") + i + 1;
        let path = text[i + 1..path_end].to_string();
        // Walk the rest of the call, tracking parentheses and skipping string literals.
        let mut depth = 1usize;
        let mut j = path_end + 1;
        let mut token = String::new();
        let mut methods = BTreeSet::new();
        while j < bytes.len() && depth > 0 {
            let c = bytes[j] as char;
            match c {
                '"' => {
                    j += 1;
                    while j < bytes.len() && bytes[j] != b'"' {
                        if bytes[j] == b'\\' {
                            j += 1;
                        }
                        j += 1;
                    }
                    token.clear();
                }
                '(' => {
                    if depth == 1 && METHODS.contains(&token.as_str()) {
                        methods.insert(token.clone());
                    }
                    depth += 1;
                    token.clear();
                }
                ')' => {
                    depth -= 1;
                    token.clear();
                }
                c if c.is_ascii_alphanumeric() || c == '_' => token.push(c),
                _ => token.clear(),
            }
            j += 1;
        }
        assert!(
            !methods.is_empty(),
            "{file}: route {path} has no get/put/post/delete/patch method router the contract test can read"
        );
        out.push(Route {
            path,
            methods,
            file: file.to_string(),
        });
    }
    out
}

fn source_routes() -> Vec<Route> {
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    let mut routes = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("read source");
        let name = f.display().to_string();
        for forbidden in [".nest(", ".nest_service(", ".route_service("] {
            assert!(
                !text.contains(forbidden),
                "{name} uses {forbidden}: teach tests/openapi.rs to read it, so the spec stays checked"
            );
        }
        routes.extend(routes_in(&text, &name));
    }
    routes
}

// ------------------------------------------------------------------------------ the RM

struct Rm {
    base: String,
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
        base: format!("http://{}", rm.addr),
        stop: Some(tx),
        server,
        _dir: dir,
    }
}

impl Rm {
    async fn shutdown(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        let _ = tokio::time::timeout(Duration::from_secs(10), &mut self.server).await;
        self.server.abort();
    }
}

struct Answer {
    status: u16,
    body: String,
}

impl Answer {
    fn exception(&self) -> Option<(String, String)> {
        let v: Value = serde_json::from_str(&self.body).ok()?;
        let re = v.get("RemoteException")?;
        Some((
            re.get("exception")?.as_str()?.to_string(),
            re.get("message")?.as_str()?.to_string(),
        ))
    }
}

async fn send(http: &reqwest::Client, base: &str, method: &str, path: &str) -> Answer {
    let m = reqwest::Method::from_bytes(method.to_ascii_uppercase().as_bytes()).expect("method");
    let mut req = http.request(m, format!("{base}{path}"));
    if method == "post" || method == "put" || method == "patch" {
        req = req.header("Content-Type", "application/json").body("{}");
    }
    if path.starts_with("/ws/v1/am/") {
        req = req.bearer_auth("not-a-valid-token");
    }
    let r = req
        .send()
        .await
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    let status = r.status().as_u16();
    Answer {
        status,
        body: r.text().await.unwrap_or_default(),
    }
}

#[test]
fn spec_parser_reads_the_layout() {
    let text = std::fs::read_to_string(spec_path()).expect("read docs/openapi.yaml");
    assert!(
        text.contains("url: http://localhost:8088"),
        "RM default port"
    );
    assert!(
        text.contains("url: http://localhost:8042"),
        "NM default port"
    );
    let items = parse_spec(&text);
    let apps = items
        .iter()
        .find(|i| i.path == "/ws/v1/cluster/apps")
        .expect("/ws/v1/cluster/apps in the spec");
    let methods: Vec<&str> = apps.ops.iter().map(|o| o.method.as_str()).collect();
    assert_eq!(methods, ["get", "post"]);
    assert!(apps.ops[1].statuses.contains(&202));
    assert!(apps.daemons.contains("rm"));
    assert!(items.iter().any(|i| i.daemons.contains("nm")));
    assert_eq!(normalize("/a/{x}/b/{yy}"), "/a/{}/b/{}");
    assert_eq!(
        fill("/ws/v1/cluster/apps/{appid}/state"),
        "/ws/v1/cluster/apps/application_1700000000000_0001/state"
    );
    let routes = routes_in(
        "r.route(\"/x/{id}\", get(|| async { \"(\" }).put(h))\n// .route(\"/no\", get(h))\n.route(\n  \"/y\",\n  post(h),\n)",
        "t.rs",
    );
    assert_eq!(routes.len(), 2);
    assert_eq!(routes[0].path, "/x/{id}");
    assert_eq!(
        routes[0]
            .methods
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        ["get", "put"]
    );
    assert_eq!(routes[1].path, "/y");
}

#[test]
fn every_router_route_is_in_the_spec() {
    let text = std::fs::read_to_string(spec_path()).expect("read docs/openapi.yaml");
    let items = parse_spec(&text);
    let mut spec: BTreeMap<String, &PathItem> = BTreeMap::new();
    for i in items.iter().filter(|i| i.daemons.contains(DAEMON)) {
        spec.insert(normalize(&i.path), i);
    }
    let routes = source_routes();
    assert!(
        routes.len() > 10,
        "found only {} routes in src/",
        routes.len()
    );
    let mut problems = Vec::new();
    let mut routed = BTreeSet::new();
    for r in &routes {
        let n = normalize(&r.path);
        routed.insert(n.clone());
        match spec.get(&n) {
            None => problems.push(format!(
                "{} routes {} {:?}, which docs/openapi.yaml does not list for x-daemon {DAEMON}",
                r.file, r.path, r.methods
            )),
            Some(item) => {
                let listed: BTreeSet<String> = item.ops.iter().map(|o| o.method.clone()).collect();
                if listed != r.methods {
                    problems.push(format!(
                        "{} routes {} with {:?}; docs/openapi.yaml lists {:?}",
                        r.file, r.path, r.methods, listed
                    ));
                }
            }
        }
    }
    for (n, item) in &spec {
        if !routed.contains(n) {
            problems.push(format!(
                "docs/openapi.yaml:{} lists {} for x-daemon {DAEMON}, but no .route(...) in src/ serves it",
                item.line, item.path
            ));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[tokio::test]
async fn every_spec_operation_is_routed() {
    tokio::time::timeout(Duration::from_secs(90), async {
        let text = std::fs::read_to_string(spec_path()).expect("read docs/openapi.yaml");
        let items = parse_spec(&text);
        let rm = start_rm().await;
        let http = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(10))
            .build()
            .expect("client");

        // Learn what the fallbacks look like.
        let probe = "/__spindle_openapi_contract__/no/such/path";
        let nf = send(&http, &rm.base, "get", probe).await;
        assert_eq!(nf.status, 404, "{}", nf.body);
        let (exc, msg) = nf.exception().expect("fallback 404 is a RemoteException");
        assert_eq!(exc, "NotFoundException");
        let fallback_prefix = msg
            .strip_suffix(probe)
            .expect("the fallback 404 message ends with the path")
            .to_string();
        assert!(
            fallback_prefix.starts_with("java.lang.Exception: no resource at"),
            "{fallback_prefix}"
        );
        let na = send(&http, &rm.base, "delete", "/ws/v1/cluster/info").await;
        assert_eq!(na.status, 405, "{}", na.body);
        assert_eq!(
            na.exception().map(|e| e.0).as_deref(),
            Some("WebApplicationException")
        );

        let mut problems = Vec::new();
        let mut checked = 0;
        for item in items.iter().filter(|i| i.daemons.contains(DAEMON)) {
            let path = fill(&item.path);
            for op in &item.ops {
                let a = send(&http, &rm.base, &op.method, &path).await;
                checked += 1;
                let exc = a.exception();
                let what = format!("{} {} (as {path})", op.method.to_uppercase(), item.path);
                if a.status == 404
                    && exc
                        .as_ref()
                        .is_some_and(|(_, m)| m.starts_with(&fallback_prefix))
                {
                    problems.push(format!("{what}: no route (fallback 404: {})", a.body));
                } else if a.status == 405 {
                    problems.push(format!("{what}: method not routed (405: {})", a.body));
                } else if !op.statuses.contains(&a.status) {
                    problems.push(format!(
                        "{what}: answered {} which the spec does not list ({:?}); body: {}",
                        a.status,
                        op.statuses,
                        a.body.chars().take(300).collect::<String>()
                    ));
                }
            }
        }
        rm.shutdown().await;
        assert!(checked > 20, "checked only {checked} operations");
        assert!(problems.is_empty(), "\n{}", problems.join("\n"));
    })
    .await
    .expect("the contract test took too long");
}
