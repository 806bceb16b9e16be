//! Contract test: `docs/openapi.yaml` against the RM's router, in both directions.
//!
//! 1. Every RM path + method in the spec is routed: the RM (in-process, port 0) answers a
//!    request for it with something other than the router's fallbacks (404 `no resource at`,
//!    405 `WebApplicationException`), and with one of the statuses the spec lists for it.
//! 2. Every `.route("...", ...)` in `resourcemanager/src` (read as text) is in the spec, with
//!    the same methods.
//!
//! The spec and source readers and the comparisons live in `spindle_test_support::contract`, shared
//! with the NM's contract test; this file holds what is the RM's own.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use spindle_common::config::Configuration;
use spindle_test_support::contract::{self, parse_spec, Answer, PROBE_PATH};
use support::start_rm_with;

const DAEMON: &str = "rm";

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Sample values for the path parameters only the RM's paths use (see `contract::fill`).
const SAMPLES: &[(&str, &str)] = &[
    ("queue", "default"),
    ("type", "LIFETIME"),
    (
        "digest",
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    ),
];

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
    let text = contract::read_spec(env!("CARGO_MANIFEST_DIR"));
    contract::assert_readers_work(&text);
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
    assert_eq!(
        contract::fill("/ws/v1/cluster/apps/{appid}/state", SAMPLES),
        "/ws/v1/cluster/apps/application_1700000000000_0001/state"
    );
}

#[test]
fn every_router_route_is_in_the_spec() {
    let text = contract::read_spec(env!("CARGO_MANIFEST_DIR"));
    let items = parse_spec(&text);
    let routes = contract::source_routes(&src_dir());
    assert!(
        routes.len() > 10,
        "found only {} routes in src/",
        routes.len()
    );
    let problems = contract::route_problems(&items, &routes, DAEMON);
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[tokio::test]
async fn every_spec_operation_is_routed() {
    tokio::time::timeout(Duration::from_secs(90), async {
        let text = contract::read_spec(env!("CARGO_MANIFEST_DIR"));
        let items = parse_spec(&text);
        let rm = start_rm_with(Configuration::new()).await;
        let http = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(10))
            .build()
            .expect("client");

        // Learn what the fallbacks look like.
        let nf = send(&http, &rm.base, "get", PROBE_PATH).await;
        let fallback_prefix = nf.fallback_prefix(PROBE_PATH);
        assert!(
            fallback_prefix.starts_with("java.lang.Exception: no resource at"),
            "{fallback_prefix}"
        );
        let na = send(&http, &rm.base, "delete", "/ws/v1/cluster/info").await;
        na.assert_method_fallback();

        let mut problems = Vec::new();
        let mut checked = 0;
        for call in contract::calls(&items, DAEMON, SAMPLES) {
            let a = send(&http, &rm.base, &call.op.method, &call.path).await;
            checked += 1;
            problems.extend(call.problem(&a, &fallback_prefix));
        }
        rm.shutdown().await;
        assert!(checked > 20, "checked only {checked} operations");
        assert!(problems.is_empty(), "\n{}", problems.join("\n"));
    })
    .await
    .expect("the contract test took too long");
}
