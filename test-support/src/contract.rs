//! The daemon-independent half of the OpenAPI contract tests (`resourcemanager/tests/openapi.rs`
//! and `nodemanager/tests/openapi.rs`), which check `docs/openapi.yaml` against each daemon's
//! router in both directions.
//!
//! Everything here is text processing: a line-based reader for the `paths:` section of the
//! spec (no YAML dependency; the format rules it relies on are written at the top of
//! `docs/openapi.yaml`), a reader for the `.route("...", ...)` calls in a daemon's source, and
//! the comparisons between the two. What stays in each test is what differs per daemon: how
//! to start it, how to send it a request, its source folder and its `x-daemon` name.
//!
//! The functions panic with the spec's file and line (or the source file) when their input
//! breaks the rules they read it by: they serve tests, where a panic is the report.
//!
//! `robust` is the daemon-independent half of the robustness tests (`tests/robustness.rs` of
//! both daemons), which aim hostile requests built from the same spec at each daemon; it is
//! the one part of this module that does I/O (a blocking raw-TCP client, on std threads).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

pub mod robust;

/// The HTTP methods the spec and the routers use, as spec keys and axum method functions.
pub const METHODS: &[&str] = &["get", "head", "put", "post", "delete", "patch"];

/// A path no daemon routes: a request for it shows what the router's fallback 404 looks like.
pub const PROBE_PATH: &str = "/__spindle_openapi_contract__/no/such/path";

/// A syntactically valid value for the path parameters both daemons' paths use.
const SAMPLES: &[(&str, &str)] = &[
    ("appid", "application_1700000000000_0001"),
    ("attemptid", "appattempt_1700000000000_0001_000001"),
    ("containerid", "container_1700000000000_0001_01_000001"),
    ("nodeid", "host.example.com:45454"),
    ("filename", "stdout"),
    ("user", "alice"),
];

// ------------------------------------------------------------------------------ the spec

/// One method of a spec path, with the response statuses the spec lists for it.
#[derive(Debug)]
pub struct Operation {
    pub method: String,
    pub statuses: BTreeSet<u16>,
}

/// One path of the spec's `paths:` section.
#[derive(Debug)]
pub struct PathItem {
    pub path: String,
    /// The 1-based line of the path key in the spec.
    pub line: usize,
    /// The daemons `x-daemon` names (`rm`, `nm`).
    pub daemons: BTreeSet<String>,
    pub ops: Vec<Operation>,
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// One line of the spec, as `section` gives it.
struct Line<'a> {
    /// 1-based.
    no: usize,
    indent: usize,
    /// The line without its indent and trailing white space.
    text: &'a str,
}

/// The lines of the spec's top-level section `name` (after the line `name:` up to the next
/// unindented line), without blank and comment lines.
fn section<'a>(text: &'a str, name: &str) -> impl Iterator<Item = Line<'a>> {
    let head = format!("{name}:");
    text.lines()
        .enumerate()
        .filter_map(|(n, line)| {
            let t = line.trim();
            (!t.is_empty() && !t.starts_with('#')).then(|| Line {
                no: n + 1,
                indent: indent(line),
                text: t,
            })
        })
        .skip_while(move |l| !(l.indent == 0 && l.text == head))
        .skip(1)
        .take_while(|l| l.indent > 0)
}

fn key(line: &str) -> Option<&str> {
    let t = line.trim();
    let (k, _) = t.split_once(':')?;
    Some(k.trim().trim_matches(|c| c == '\'' || c == '"'))
}

/// Parses the `paths:` section of the spec (see the format rules at the top of the file).
pub fn parse_spec(text: &str) -> Vec<PathItem> {
    let mut items: Vec<PathItem> = Vec::new();
    let mut in_responses = false;
    for Line {
        no: line_no,
        indent: ind,
        text: trimmed,
    } in section(text, "paths")
    {
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
                let k = key(trimmed).unwrap_or("");
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
                in_responses = key(trimmed) == Some("responses")
                    && items.last().is_some_and(|i| !i.ops.is_empty());
            }
            8 if in_responses => {
                let k = key(trimmed).unwrap_or("");
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
pub fn normalize(path: &str) -> String {
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

/// The path with each `{param}` replaced by a sample value: the daemon's `extra` samples
/// first, then the ids every daemon uses. Panics on a parameter neither knows.
pub fn fill(path: &str, extra: &[(&str, &str)]) -> String {
    fill_with(path, |param| {
        extra
            .iter()
            .chain(SAMPLES)
            .find(|(name, _)| *name == param)
            .map(|(_, value)| value.to_string())
            .unwrap_or_else(|| {
                panic!("docs/openapi.yaml uses path parameter {{{param}}}: add a sample value to the contract test")
            })
    })
}

/// The path with each `{param}` replaced by `value(param)`.
pub fn fill_with(path: &str, mut value: impl FnMut(&str) -> String) -> String {
    let mut out = String::new();
    let mut rest = path;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let end = rest[start..].find('}').expect("unclosed {") + start;
        out.push_str(&value(&rest[start + 1..end]));
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

// ------------------------------------------------------------------------------ the source

/// One `.route("path", ...)` call found in a daemon's source.
#[derive(Debug)]
pub struct Route {
    pub path: String,
    pub methods: BTreeSet<String>,
    pub file: String,
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
pub fn routes_in(text: &str, file: &str) -> Vec<Route> {
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

/// Every route in the `.rs` files below `src_dir`. Panics on a file that mounts routes in a
/// way `routes_in` cannot read (`.nest(`, `.nest_service(`, `.route_service(`).
pub fn source_routes(src_dir: &Path) -> Vec<Route> {
    let mut files = Vec::new();
    rust_files(src_dir, &mut files);
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

/// The text of `docs/openapi.yaml`, for a test of the crate at `crate_dir` (a sibling of
/// `docs/`; pass `env!("CARGO_MANIFEST_DIR")`).
pub fn read_spec(crate_dir: &str) -> String {
    std::fs::read_to_string(Path::new(crate_dir).join("../docs/openapi.yaml"))
        .expect("read docs/openapi.yaml")
}

/// Asserts that the spec `text` names both daemons' default servers, and that `normalize`
/// and `routes_in` read a known sample as they should, so that a broken reader fails the
/// contract tests instead of letting them pass on nothing.
pub fn assert_readers_work(text: &str) {
    assert!(
        text.contains("url: http://localhost:8088"),
        "RM default port"
    );
    assert!(
        text.contains("url: http://localhost:8042"),
        "NM default port"
    );
    assert_eq!(normalize("/a/{x}/b/{yy}"), "/a/{}/b/{}");
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

// ------------------------------------------------------------------------------ comparisons

/// What differs between the spec's paths for `daemon` and the routes in its source: a route
/// the spec does not list, a route with other methods than the spec's, a spec path no route
/// serves. Empty when they agree.
pub fn route_problems(items: &[PathItem], routes: &[Route], daemon: &str) -> Vec<String> {
    let mut spec: BTreeMap<String, &PathItem> = BTreeMap::new();
    for i in items.iter().filter(|i| i.daemons.contains(daemon)) {
        spec.insert(normalize(&i.path), i);
    }
    let mut problems = Vec::new();
    let mut routed = BTreeSet::new();
    for r in routes {
        let n = normalize(&r.path);
        routed.insert(n.clone());
        match spec.get(&n) {
            None => problems.push(format!(
                "{} routes {} {:?}, which docs/openapi.yaml does not list for x-daemon {daemon}",
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
                "docs/openapi.yaml:{} lists {} for x-daemon {daemon}, but no .route(...) in src/ serves it",
                item.line, item.path
            ));
        }
    }
    problems
}

/// A daemon's answer to one request: its status and body.
pub struct Answer {
    pub status: u16,
    pub body: String,
}

impl Answer {
    /// The `RemoteException`'s `exception` and `message`, if the body is one.
    pub fn exception(&self) -> Option<(String, String)> {
        let v: Value = serde_json::from_str(&self.body).ok()?;
        let re = v.get("RemoteException")?;
        Some((
            re.get("exception")?.as_str()?.to_string(),
            re.get("message")?.as_str()?.to_string(),
        ))
    }

    /// For the answer to a request for `probe` (a path nothing routes): asserts it is the
    /// router's fallback 404 and returns the part of its message before the path.
    pub fn fallback_prefix(&self, probe: &str) -> String {
        assert_eq!(self.status, 404, "{}", self.body);
        let (exc, msg) = self.exception().expect("fallback 404 is a RemoteException");
        assert_eq!(exc, "NotFoundException");
        msg.strip_suffix(probe)
            .expect("the fallback 404 message ends with the path")
            .to_string()
    }

    /// Asserts this is the router's 405 for a routed path with an unrouted method.
    pub fn assert_method_fallback(&self) {
        assert_eq!(self.status, 405, "{}", self.body);
        assert_eq!(
            self.exception().map(|e| e.0).as_deref(),
            Some("WebApplicationException")
        );
    }
}

/// One request the contract test sends: a spec operation at its path with samples filled in.
pub struct Call<'a> {
    pub item: &'a PathItem,
    pub op: &'a Operation,
    /// The request path (`fill`ed).
    pub path: String,
}

/// Every operation the spec lists for `daemon`, each at its path filled with samples (see
/// `fill` for `extra`).
pub fn calls<'a>(items: &'a [PathItem], daemon: &str, extra: &[(&str, &str)]) -> Vec<Call<'a>> {
    let mut out = Vec::new();
    for item in items.iter().filter(|i| i.daemons.contains(daemon)) {
        let path = fill(&item.path, extra);
        for op in &item.ops {
            out.push(Call {
                item,
                op,
                path: path.clone(),
            });
        }
    }
    out
}

impl Call<'_> {
    /// What is wrong with the daemon's answer to this call, if anything: the fallback 404
    /// (whose message starts with `fallback_prefix`), the router's 405, or a status the
    /// spec does not list.
    pub fn problem(&self, a: &Answer, fallback_prefix: &str) -> Option<String> {
        let exc = a.exception();
        let what = format!(
            "{} {} (as {})",
            self.op.method.to_uppercase(),
            self.item.path,
            self.path
        );
        if a.status == 404
            && exc
                .as_ref()
                .is_some_and(|(_, m)| m.starts_with(fallback_prefix))
        {
            Some(format!("{what}: no route (fallback 404: {})", a.body))
        } else if a.status == 405 {
            Some(format!("{what}: method not routed (405: {})", a.body))
        } else if !self.op.statuses.contains(&a.status) {
            Some(format!(
                "{what}: answered {} which the spec does not list ({:?}); body: {}",
                a.status,
                self.op.statuses,
                a.body.chars().take(300).collect::<String>()
            ))
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_work() {
        assert_readers_work(&read_spec(env!("CARGO_MANIFEST_DIR")));
    }

    #[test]
    fn route_problems_names_each_mismatch() {
        let spec = "paths:\n  /a/{x}:\n    x-daemon: rm\n    get:\n      responses:\n        '200':\n  /b:\n    x-daemon: rm, nm\n    get:\n      responses:\n        '200':\n";
        let items = parse_spec(spec);
        let routes = routes_in(
            ".route(\"/a/{id}\", get(h).put(h)).route(\"/c\", get(h))",
            "t.rs",
        );
        let problems = route_problems(&items, &routes, "rm");
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].contains("/a/{id} with"));
        assert!(problems[1].contains("/c"));
        assert!(problems[2].contains("lists /b"));
        assert_eq!(route_problems(&items[1..], &routes[1..], "nm").len(), 2);
    }

    #[test]
    fn fill_prefers_extra_samples() {
        assert_eq!(
            fill("/q/{queue}/{user}", &[("queue", "default")]),
            "/q/default/alice"
        );
    }
}
