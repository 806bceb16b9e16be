//! `spindle bench http`: what the RM's HTTP edge costs, measured from a client against a
//! running cluster, so the same command compares TLS (`yarn.http.policy`) and authentication
//! on and off:
//!
//! - **submissions per second**: `--submissions N` applications (each `new-application` then
//!   `POST /apps`, an AM of 128 MB running `true`) from `--concurrency C` concurrent
//!   clients; the rate, and each submission's p50/p99 latency;
//! - **heartbeat latency**: a benchmark node (`spindle-bench-<pid>:1`, 1 MB and 1 vcore, so
//!   nothing is ever placed on it) registers and sends `--heartbeats H` heartbeats one after
//!   another on one kept-alive connection, signed with `spindle.cluster.secret-file` when the
//!   configuration names one, as an NM does; their p50/p99/mean latency; then it unregisters.
//!
//! The RM address, the TLS settings and the caller's token come from the same places as every
//! client command's (`--rm-address`, `--conf-dir`). One JSON line. A benchmark, not a test:
//! the submitted applications run on the cluster; use a quiet cluster and a release build.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::{json, Value};
use spindle_common::cluster_secret::{random_nonce, ClusterSecret};
use spindle_common::config::{keys, Configuration};
use spindle_common::records::cluster::{
    AmContainerSpec, ApplicationSubmissionContext, CommandsInfo,
};
use spindle_common::records::resource::ResourceInfo;

use crate::cli::args::Opt;
use crate::cli::{parse_or_usage, rm_client, EXIT_OK};

pub(super) const USAGE: &str = "\
usage: spindle bench http [--submissions N] [--concurrency C] [--heartbeats H] [--rm-address HOST:PORT] [--conf-dir DIR]
  --submissions N   applications to submit (default 200; 0: none)
  --concurrency C   concurrent submitting clients (default 8)
  --heartbeats H    heartbeats of the benchmark node (default 500; 0: none)";

pub(super) const OPTS: &[Opt] = &[
    Opt::one("submissions", &[]),
    Opt::one("concurrency", &[]),
    Opt::one("heartbeats", &[]),
];

const REGISTER: &str = "/ws/v1/node-tracker/register";
const HEARTBEAT: &str = "/ws/v1/node-tracker/heartbeat";
const UNREGISTER: &str = "/ws/v1/node-tracker/unregister";

/// p50, p99 and mean of `d`, in ms.
fn summary(d: &mut [Duration]) -> Value {
    if d.is_empty() {
        return Value::Null;
    }
    d.sort();
    let at = |q: f64| {
        let i = ((d.len() as f64 * q).ceil() as usize).clamp(1, d.len()) - 1;
        d[i].as_secs_f64() * 1000.0
    };
    let mean = d.iter().map(Duration::as_secs_f64).sum::<f64>() / d.len() as f64 * 1000.0;
    json!({"p50_ms": at(0.5), "p99_ms": at(0.99), "mean_ms": mean, "n": d.len()})
}

pub(super) async fn run(args: &[String]) -> anyhow::Result<u8> {
    let Some(p) = parse_or_usage(args, OPTS, USAGE)? else {
        return Ok(EXIT_OK);
    };
    let submissions: usize = p.parse("submissions")?.unwrap_or(200);
    let concurrency: usize = p.parse("concurrency")?.unwrap_or(8).max(1);
    let heartbeats: usize = p.parse("heartbeats")?.unwrap_or(500);
    let rm = Arc::new(rm_client(&p)?);
    let base = rm.base_url().trim_end_matches('/').to_string();
    let tls = spindle_appmaster_sdk::tls::client_tls()?;
    let dir = Configuration::resolve_conf_dir(p.value("conf-dir").map(std::path::Path::new));
    let conf = if dir.is_dir() {
        Configuration::load_dir(&dir)?
    } else {
        Configuration::new()
    };
    let secret = match conf.get_nonempty(keys::CLUSTER_SECRET_FILE)? {
        Some(f) => Some(
            ClusterSecret::load(std::path::Path::new(&f))
                .with_context(|| format!("reading {}", keys::CLUSTER_SECRET_FILE))?,
        ),
        None => None,
    };

    // Submissions.
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..concurrency.min(submissions.max(1)) {
        let (rm, next) = (Arc::clone(&rm), Arc::clone(&next));
        workers.push(tokio::spawn(async move {
            let mut took = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < submissions {
                let t = Instant::now();
                let new = rm.new_application().await?;
                let ctx = ApplicationSubmissionContext {
                    application_id: new.application_id.to_string(),
                    application_name: Some("spindle-bench-http".into()),
                    application_type: Some("SPINDLE-BENCH".into()),
                    max_app_attempts: Some(1),
                    resource: Some(ResourceInfo {
                        memory: 128,
                        v_cores: 1,
                        ..Default::default()
                    }),
                    am_container_spec: AmContainerSpec {
                        commands: Some(CommandsInfo {
                            command: "true".into(),
                        }),
                        ..Default::default()
                    },
                    ..Default::default()
                };
                rm.submit(&ctx).await?;
                took.push(t.elapsed());
            }
            anyhow::Ok(took)
        }));
    }
    let mut submit_lat = Vec::new();
    for w in workers {
        submit_lat.extend(w.await.context("a submitting task failed")??);
    }
    let submit_secs = started.elapsed().as_secs_f64();

    // Heartbeats of a benchmark node that nothing fits on.
    let mut builder = reqwest::Client::builder().timeout(Duration::from_secs(10));
    if let Some((_, pem)) = &tls.ca {
        for cert in reqwest::Certificate::from_pem_bundle(pem)? {
            builder = builder.add_root_certificate(cert);
        }
    }
    let http = builder.build()?;
    let node = format!("spindle-bench-{}:1", std::process::id());
    let post = |path: &'static str, body: Value| {
        let bytes = serde_json::to_vec(&body).expect("a JSON value encodes");
        let mut req = http
            .post(format!("{base}{path}"))
            .header(reqwest::header::CONTENT_TYPE, "application/json");
        if let Some(s) = &secret {
            let now = spindle_common::time::now_ms();
            let nonce = random_nonce().expect("the system's random source");
            req = req.header(
                reqwest::header::AUTHORIZATION,
                s.sign("POST", path, &node, &bytes, now, nonce),
            );
        }
        async move {
            let r = req.body(bytes).send().await?;
            let status = r.status();
            let v: Value = r.json().await.unwrap_or(Value::Null);
            if !status.is_success() {
                bail!("POST {path}: HTTP {status}: {v}");
            }
            anyhow::Ok(v)
        }
    };
    let register = json!({
        "nodeId": node, "httpAddress": node, "nmVersion": "spindle-bench",
        "resource": {"memory": 1, "vCores": 1},
    });
    let mut beat_lat = Vec::new();
    // As an NM does, the heartbeat names the newest container-token key it was sent
    // (`lastKnownContainerTokenMasterKey`), so answers carry a key only after a roll.
    let key_id = |v: &Value| v["containerTokenMasterKey"]["keyId"].as_u64();
    if heartbeats > 0 {
        let mut known = key_id(&post(REGISTER, register.clone()).await?);
        let mut response_id = 0i64;
        for _ in 0..heartbeats {
            let mut body = json!({
                "nodeId": node, "responseId": response_id,
                "nodeStatus": {"healthy": true, "healthReport": "",
                    "lastHealthReportTime": spindle_common::time::now_ms(),
                    "containersStatuses": [], "nodeUtilization": null},
            });
            if let Some(id) = known {
                body["lastKnownContainerTokenMasterKey"] = json!({ "keyId": id });
            }
            let t = Instant::now();
            let v = post(HEARTBEAT, body).await?;
            beat_lat.push(t.elapsed());
            if let Some(id) = key_id(&v) {
                known = Some(id);
            }
            if v["nodeAction"] == "RESYNC" {
                known = key_id(&post(REGISTER, register.clone()).await?).or(known);
                response_id = 0;
            } else {
                response_id = v["responseId"].as_i64().unwrap_or(response_id + 1);
            }
        }
        post(UNREGISTER, json!({"nodeId": node})).await?;
    }

    let line = json!({
        "rm": base,
        "tls": base.starts_with("https://"),
        "signed_heartbeats": secret.is_some(),
        "submissions": submissions,
        "concurrency": concurrency,
        "submissions_per_sec": if submit_secs > 0.0 { submit_lat.len() as f64 / submit_secs } else { 0.0 },
        "submission_latency": summary(&mut submit_lat),
        "heartbeat_latency": summary(&mut beat_lat),
    });
    println!("{line}");
    Ok(EXIT_OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_reads_quantiles_from_the_sorted_sample() {
        let mut d: Vec<Duration> = (1..=100).rev().map(Duration::from_millis).collect();
        let s = summary(&mut d);
        assert_eq!(s["p50_ms"], 50.0);
        assert_eq!(s["p99_ms"], 99.0);
        assert_eq!(s["n"], 100);
        assert!(summary(&mut []).is_null());
    }
}
