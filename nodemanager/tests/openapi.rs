//! Contract test: `docs/openapi.yaml` against the NM's router, in both directions.
//!
//! 1. Every NM path + method in the spec (`x-daemon: nm`) is routed: the NM (in-process, port
//!    0, registered with a fake RM) answers a request for it with something other than the
//!    router's fallbacks (404 `no resource at`, 405 `WebApplicationException`), and with one
//!    of the statuses the spec lists for it.
//! 2. Every `.route("...", ...)` in `nodemanager/src` (read as text) is in the spec, with the
//!    same methods.
//!
//! The spec and source readers and the comparisons live in `spindle_test_support::contract`, shared
//! with the RM's contract test; this file holds what is the NM's own.

use std::path::{Path, PathBuf};
use std::time::Duration;

mod support;

use spindle_test_support::contract::{self, parse_spec, Answer, PROBE_PATH};
use support::{FakeRm, TestNm};

const DAEMON: &str = "nm";

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Sample values for the path parameters only the NM's paths use (see `contract::fill`).
const SAMPLES: &[(&str, &str)] = &[("resourcename", "yarn.io%2Fgpu")];

// ------------------------------------------------------------------------------ the NM

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
    let start = items
        .iter()
        .find(|i| i.path == "/ws/v1/node/containers/start")
        .expect("/ws/v1/node/containers/start in the spec");
    let methods: Vec<&str> = start.ops.iter().map(|o| o.method.as_str()).collect();
    assert_eq!(methods, ["post"]);
    assert!(start.ops[0].statuses.contains(&200));
    assert!(start.daemons.contains("nm"));
    let metrics = items
        .iter()
        .find(|i| i.path == "/metrics")
        .expect("/metrics");
    assert!(metrics.daemons.contains("rm") && metrics.daemons.contains("nm"));
    assert_eq!(
        contract::fill(
            "/ws/v1/node/containerlogs/{containerid}/{filename}",
            SAMPLES
        ),
        "/ws/v1/node/containerlogs/container_1700000000000_0001_01_000001/stdout"
    );
}

#[test]
fn every_router_route_is_in_the_spec() {
    let text = contract::read_spec(env!("CARGO_MANIFEST_DIR"));
    let items = parse_spec(&text);
    let routes = contract::source_routes(&src_dir());
    assert!(
        routes.len() > 8,
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
        let rm = FakeRm::start().await;
        let dirs = tempfile::tempdir().expect("tempdir");
        let mut nm = TestNm::start(dirs.path(), rm.addr, false).await;
        rm.wait_registered(1).await;
        let http = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(10))
            .build()
            .expect("client");

        // Learn what the fallbacks look like.
        let nf = send(&http, &nm.base, "get", PROBE_PATH).await;
        let fallback_prefix = nf.fallback_prefix(PROBE_PATH);
        assert!(!fallback_prefix.is_empty(), "{fallback_prefix}{PROBE_PATH}");
        let na = send(&http, &nm.base, "delete", "/ws/v1/node/info").await;
        na.assert_method_fallback();

        let mut problems = Vec::new();
        let mut checked = 0;
        for call in contract::calls(&items, DAEMON, SAMPLES) {
            let a = send(&http, &nm.base, &call.op.method, &call.path).await;
            checked += 1;
            problems.extend(call.problem(&a, &fallback_prefix));
        }
        nm.stop().await.expect("NM stopped cleanly");
        drop(rm);
        assert!(checked > 10, "checked only {checked} operations");
        assert!(problems.is_empty(), "\n{}", problems.join("\n"));
    })
    .await
    .expect("the contract test took too long");
}
