//! The hostile catalogues (path parameters, queries, headers, bodies) and the spec-driven
//! barrage built from them.

use std::collections::BTreeSet;

use super::super::fill_with;
use super::{Case, Expect, Kind, Op, Req};

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
    let mut b = Barrage {
        sample,
        benign,
        auth,
        cases: Vec::new(),
    };
    let garbage = path_garbage();
    let mut seen_paths = BTreeSet::new();
    for (i, op) in ops.iter().enumerate() {
        b.path_params(i, op, &garbage, &required_query(op));
        let qpath = safe_path(op);
        b.queries(i, op, &qpath);
        b.headers(i, op, &qpath, content_type_required);
        b.bodies(i, op, &qpath);
        // Wrong methods and path shapes, once per path.
        if seen_paths.insert(op.path.clone()) {
            b.path_shapes(ops, i, op);
        }
    }
    b.cases
}

/// The cases of [`spec_cases`] as they are built, one method per class.
struct Barrage<'a> {
    sample: &'a dyn Fn(&str) -> String,
    benign: &'a dyn Fn(&Op) -> Option<Vec<u8>>,
    auth: &'a dyn Fn(&Op) -> Option<String>,
    cases: Vec<Case>,
}

impl Barrage<'_> {
    /// `op`'s request to `target`, with the bearer token where it needs one.
    fn base(&self, op: &Op, target: String) -> Req {
        let mut r = Req::new(&op.method, target);
        if let Some(t) = (self.auth)(op) {
            r = r.bearer(&t);
        }
        r
    }

    /// [`Self::base`] with the benign body, where `op` has one.
    fn with_benign(&self, op: &Op, target: String) -> Req {
        let r = self.base(op, target);
        match (self.benign)(op) {
            Some(b) => r.json(b),
            None => r,
        }
    }

    fn push(&mut self, class: &'static str, op: usize, expect: Expect, req: Req) {
        self.cases.push(Case {
            class,
            op,
            expect,
            req,
        });
    }

    /// Path parameters: each in turn garbage, the others real.
    fn path_params(&mut self, i: usize, op: &Op, garbage: &[String], required_query: &str) {
        for p in &op.params() {
            let expect = if p == "user" || p == "resourcename" {
                Expect::Spec
            } else {
                Expect::ClientError
            };
            for g in garbage {
                let target = fill_with(
                    &op.path,
                    |q| {
                        if q == p {
                            g.clone()
                        } else {
                            (self.sample)(q)
                        }
                    },
                ) + required_query;
                let req = self.with_benign(op, target);
                self.push("path-param", i, expect, req);
            }
        }
    }

    /// Query strings: generic, then bad values of each documented parameter.
    fn queries(&mut self, i: usize, op: &Op, qpath: &str) {
        let mut queries = generic_queries();
        for p in &op.query {
            queries.extend(param_queries(p));
        }
        for q in queries {
            let req = self.with_benign(op, format!("{qpath}?{q}"));
            self.push("query", i, Expect::Spec, req);
        }
    }

    /// Headers: Accept, then odd Content-Types with the benign body (or `{}`) where a body
    /// may be read.
    fn headers(&mut self, i: usize, op: &Op, qpath: &str, content_type_required: bool) {
        for accept in ["application/xml", "text/html", "garbage/;;;", ""] {
            let req = self
                .with_benign(op, qpath.to_string())
                .header("Accept", accept);
            self.push("accept", i, Expect::Spec, req);
        }
        let body = (self.benign)(op).unwrap_or_else(|| b"{}".to_vec());
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
            let mut r = self.base(op, qpath.to_string()).body(body.clone());
            if let Some(ct) = ct {
                r = r.header("Content-Type", ct);
            }
            let expect = match (ct, op.body.is_some()) {
                // The spec's convention: XML bodies are refused (where JSON is enforced).
                (Some(c), true) if content_type_required && c.contains("xml") => Expect::Is(400),
                (None, true) if content_type_required => Expect::Is(400),
                _ => Expect::Spec,
            };
            self.push("content-type", i, expect, r);
        }
    }

    /// Bodies: unreadable ones (400 where a body is read), odd JSON, wrong-typed fields.
    fn bodies(&mut self, i: usize, op: &Op, qpath: &str) {
        for (b, expect, class) in body_list(op) {
            let req = self.base(op, qpath.to_string()).json(b);
            self.push(class, i, expect, req);
        }
    }

    /// Methods the path does not list (405) and odd shapes of the path.
    fn path_shapes(&mut self, ops: &[Op], i: usize, op: &Op) {
        let listed: BTreeSet<&str> = ops
            .iter()
            .filter(|o| o.path == op.path)
            .map(|o| o.method.as_str())
            .collect();
        let real = fill_with(&op.path, self.sample);
        let all_methods = ["GET", "PUT", "POST", "DELETE", "PATCH", "OPTIONS"];
        for m in all_methods.iter().filter(|m| !listed.contains(*m)) {
            self.push(
                "wrong-method",
                i,
                Expect::Is(405),
                Req::new(m, real.clone()).json("{}"),
            );
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
            let req = self.with_benign(op, shape);
            self.push("path-shape", i, Expect::Any, req);
        }
    }
}

/// The bodies sent to `op`, what each must get, and its class.
fn body_list(op: &Op) -> Vec<(Vec<u8>, Expect, &'static str)> {
    let Some(fields) = &op.body else {
        // Operations without a documented body: a body must not matter.
        return vec![
            (
                b"\xff\xfe\x00garbage".to_vec(),
                Expect::Spec,
                "body-ignored",
            ),
            (b"[[[[[[[[[[".to_vec(), Expect::Spec, "body-ignored"),
        ];
    };
    let mut l: Vec<(Vec<u8>, Expect, &'static str)> = unreadable_bodies()
        .into_iter()
        .map(|(_, b)| (b, Expect::Is(400), "body-unreadable"))
        .chain(
            odd_bodies()
                .into_iter()
                .map(|(_, b)| (b, Expect::Spec, "body-odd")),
        )
        .collect();
    for (field, kind) in fields {
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
}
