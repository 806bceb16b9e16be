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
//!   configuration names one, as an NM does; their p50/p99/mean latency; then it unregisters;
//! - **a large cluster**, for measuring the RM at scale (`scripts/rm-memory.sh`): first,
//!   `--nodes N` registers N benchmark nodes (`spindle-bench-<pid>-<i>:1`, as small as the
//!   heartbeat node unless `--node-memory`/`--node-vcores` say otherwise; no NM listens at
//!   their address) from `--concurrency C` clients, each heartbeating once, signed the same
//!   way, and leaves them registered; last, `--kill K` kills the K oldest unfinished
//!   applications of this benchmark (type `SPINDLE-BENCH`, in id order: the first K
//!   submitted) as `spindle application -kill` does, so that they end KILLED and are kept.
//!
//! The RM address, the TLS settings and the caller's token come from the same places as every
//! client command's (`--rm-address`, `--conf-dir`). One JSON line. A benchmark, not a test:
//! the submitted applications run on the cluster; use a quiet cluster and a release build.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::{json, Value};
use spindle_appmaster_sdk::rm_client::{AppsFilter, KillOutcome, RmClient};
use spindle_common::cluster_secret::{random_nonce, ClusterSecret};
use spindle_common::config::{keys, Configuration};
use spindle_common::records::cluster::{
    AmContainerSpec, ApplicationSubmissionContext, CommandsInfo,
};
use spindle_common::records::resource::ResourceInfo;
use spindle_common::states::YarnApplicationState;

use crate::cli::args::Opt;
use crate::cli::{parse_or_usage, rm_client, EXIT_OK};

pub(super) const USAGE: &str = "\
usage: spindle bench http [--submissions N] [--concurrency C] [--heartbeats H] [--nodes N [--node-memory MB] [--node-vcores V]] [--kill K] [--rm-address HOST:PORT] [--conf-dir DIR]
  --submissions N   applications to submit (default 200; 0: none)
  --concurrency C   concurrent clients submitting, registering nodes and killing (default 8)
  --heartbeats H    heartbeats of the benchmark node (default 500; 0: none)
  --nodes N         first register N benchmark nodes (spindle-bench-<pid>-<i>:1, one
                    heartbeat each) and leave them registered (default 0; at most 100000):
                    they stay until they expire or the RM stops. The RM refuses an AM
                    larger than its largest node: with no other node, give them room (and
                    keep AMs off them, no NM listens there: max-parallel-apps 0)
  --node-memory MB  memory of each of those nodes (default 1)
  --node-vcores V   vcores of each of those nodes (default 1)
  --kill K          last kill the K oldest unfinished applications of this benchmark (type
                    SPINDLE-BENCH, in id order), as `application -kill` does (default 0)";

pub(super) const OPTS: &[Opt] = &[
    Opt::one("submissions", &[]),
    Opt::one("concurrency", &[]),
    Opt::one("heartbeats", &[]),
    Opt::one("nodes", &[]),
    Opt::one("node-memory", &[]),
    Opt::one("node-vcores", &[]),
    Opt::one("kill", &[]),
];

/// The application type of every submission, by which `--kill` finds them.
const APP_TYPE: &str = "SPINDLE-BENCH";
/// The most nodes `--nodes` registers.
const MAX_NODES: usize = 100_000;
/// Applications `--kill` lists per call (small, so the RM never builds a large answer).
const KILL_PAGE: usize = 500;
/// How long a kill the RM answers 202 (in progress) may take, as `application -kill` waits.
const KILL_WAIT: Duration = Duration::from_secs(60);

const REGISTER: &str = "/ws/v1/node-tracker/register";
const HEARTBEAT: &str = "/ws/v1/node-tracker/heartbeat";
const UNREGISTER: &str = "/ws/v1/node-tracker/unregister";

/// POSTs `body` to the node-tracker `path` as `node`, signed with the cluster secret when
/// there is one (as an NM does); the answer's JSON.
async fn tracker_post(
    http: &reqwest::Client,
    base: &str,
    secret: Option<&ClusterSecret>,
    path: &'static str,
    node: &str,
    body: &Value,
) -> anyhow::Result<Value> {
    let bytes = serde_json::to_vec(body).expect("a JSON value encodes");
    let mut req = http
        .post(format!("{base}{path}"))
        .header(reqwest::header::CONTENT_TYPE, "application/json");
    if let Some(s) = secret {
        let now = spindle_common::time::now_ms();
        let nonce = random_nonce().context("the system's random source")?;
        req = req.header(
            reqwest::header::AUTHORIZATION,
            s.sign("POST", path, node, &bytes, now, nonce),
        );
    }
    let r = req.body(bytes).send().await?;
    let status = r.status();
    let v: Value = r.json().await.unwrap_or(Value::Null);
    if !status.is_success() {
        bail!("POST {path} as {node}: HTTP {status}: {v}");
    }
    anyhow::Ok(v)
}

/// The registration of a benchmark node of `memory` MB and `vcores` vcores (1 and 1: nothing
/// is ever placed on it). Its address is its id, where no NM listens.
fn registration(node: &str, memory: u64, vcores: u64) -> Value {
    json!({
        "nodeId": node, "httpAddress": node, "nmVersion": "spindle-bench",
        "resource": {"memory": memory, "vCores": vcores},
    })
}

/// A healthy heartbeat of `node` with no containers.
fn heartbeat(node: &str, response_id: i64) -> Value {
    json!({
        "nodeId": node, "responseId": response_id,
        "nodeStatus": {"healthy": true, "healthReport": "",
            "lastHealthReportTime": spindle_common::time::now_ms(),
            "containersStatuses": [], "nodeUtilization": null},
    })
}

/// Registers `n` benchmark nodes (`spindle-bench-<pid>-<i>:1`) of `memory` MB and `vcores`
/// vcores from `concurrency` clients,
/// each then heartbeating once, and leaves them registered. Answers how many registered and
/// the seconds it took.
async fn register_nodes(
    http: &reqwest::Client,
    base: &str,
    secret: Option<&ClusterSecret>,
    n: usize,
    (memory, vcores): (u64, u64),
    concurrency: usize,
) -> anyhow::Result<(usize, f64)> {
    let started = Instant::now();
    let pid = std::process::id();
    let next = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..concurrency.min(n) {
        let (http, base, secret, next) = (
            http.clone(),
            base.to_string(),
            secret.cloned(),
            Arc::clone(&next),
        );
        workers.push(tokio::spawn(async move {
            let mut done = 0usize;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let node = format!("spindle-bench-{pid}-{i}:1");
                let s = secret.as_ref();
                let reg = registration(&node, memory, vcores);
                tracker_post(&http, &base, s, REGISTER, &node, &reg).await?;
                tracker_post(&http, &base, s, HEARTBEAT, &node, &heartbeat(&node, 0)).await?;
                done += 1;
            }
            anyhow::Ok(done)
        }));
    }
    let mut registered = 0;
    for w in workers {
        registered += w.await.context("a registering task failed")??;
    }
    Ok((registered, started.elapsed().as_secs_f64()))
}

/// Kills the `k` oldest unfinished applications of type [`APP_TYPE`] (in id order: the first
/// submitted), listed [`KILL_PAGE`] at a time, from `concurrency` clients, as `spindle
/// application -kill` does: a kill the RM answers 202 is polled until the application is
/// final (at most [`KILL_WAIT`] per page). Answers how many were killed (fewer than `k`
/// when fewer were unfinished) and the seconds it took.
async fn kill_oldest(
    rm: &Arc<RmClient>,
    k: usize,
    concurrency: usize,
) -> anyhow::Result<(usize, f64)> {
    use YarnApplicationState::*;
    let started = Instant::now();
    let mut killed = 0;
    // Every page kills all it lists (or fails), so the pages are bounded.
    for _ in 0..k.div_ceil(KILL_PAGE) {
        let want = (k - killed).min(KILL_PAGE);
        let filter = AppsFilter {
            states: vec![NEW, NEW_SAVING, SUBMITTED, ACCEPTED, RUNNING],
            application_types: vec![APP_TYPE.into()],
            limit: Some(want as u64),
            ..Default::default()
        };
        let page = rm
            .apps(&filter)
            .await
            .context("listing the applications to kill")?;
        if page.is_empty() {
            break;
        }
        let ids = page
            .iter()
            .take(want)
            .map(|a| {
                a.id.parse()
                    .map_err(|e| anyhow::anyhow!("application id {}: {e}", a.id))
            })
            .collect::<anyhow::Result<Vec<spindle_common::ids::ApplicationId>>>()?;
        let ids = Arc::new(ids);
        let next = Arc::new(AtomicUsize::new(0));
        let mut workers = Vec::new();
        for _ in 0..concurrency.min(ids.len()) {
            let (rm, ids, next) = (Arc::clone(rm), Arc::clone(&ids), Arc::clone(&next));
            workers.push(tokio::spawn(async move {
                let mut waiting = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(id) = ids.get(i) else { break };
                    let outcome = rm.kill(id).await.with_context(|| format!("killing {id}"))?;
                    if outcome == KillOutcome::InProgress {
                        waiting.push(*id);
                    }
                }
                // Kills in progress: poll each until final, bounded in time.
                let deadline = Instant::now() + KILL_WAIT;
                for id in waiting {
                    loop {
                        match rm.app_state(&id).await {
                            Ok(s) if s.is_final() => break,
                            Ok(_) => {}
                            Err(e) => tracing::debug!(error = %e, "state poll failed"),
                        }
                        if Instant::now() > deadline {
                            bail!(
                                "application {id} was not killed within {} s",
                                KILL_WAIT.as_secs()
                            );
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
                anyhow::Ok(())
            }));
        }
        for w in workers {
            w.await.context("a killing task failed")??;
        }
        killed += ids.len();
    }
    Ok((killed, started.elapsed().as_secs_f64()))
}

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
    let nodes: usize = p.parse("nodes")?.unwrap_or(0);
    if nodes > MAX_NODES {
        bail!("--nodes may be at most {MAX_NODES}, got {nodes}");
    }
    let node_size = (
        p.parse("node-memory")?.unwrap_or(1u64),
        p.parse("node-vcores")?.unwrap_or(1u64),
    );
    let kill: usize = p.parse("kill")?.unwrap_or(0);
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

    let mut builder = reqwest::Client::builder().timeout(Duration::from_secs(10));
    if let Some((_, pem)) = &tls.ca {
        for cert in reqwest::Certificate::from_pem_bundle(pem)? {
            builder = builder.add_root_certificate(cert);
        }
    }
    let http = builder.build()?;

    // Benchmark nodes, left registered.
    let (registered, register_secs) = if nodes > 0 {
        register_nodes(&http, &base, secret.as_ref(), nodes, node_size, concurrency).await?
    } else {
        (0, 0.0)
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
                    application_type: Some(APP_TYPE.into()),
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
    let node = format!("spindle-bench-{}:1", std::process::id());
    let post = |path: &'static str, body: Value| {
        let (http, base, secret, node) = (&http, &base, secret.as_ref(), &node);
        async move { tracker_post(http, base, secret, path, node, &body).await }
    };
    let register = registration(&node, 1, 1);
    let mut beat_lat = Vec::new();
    // As an NM does, the heartbeat names the newest container-token key it was sent
    // (`lastKnownContainerTokenMasterKey`), so answers carry a key only after a roll.
    let key_id = |v: &Value| v["containerTokenMasterKey"]["keyId"].as_u64();
    if heartbeats > 0 {
        let mut known = key_id(&post(REGISTER, register.clone()).await?);
        let mut response_id = 0i64;
        for _ in 0..heartbeats {
            let mut body = heartbeat(&node, response_id);
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

    // Kills, last, so that the killed applications are final and kept.
    let (killed, kill_secs) = if kill > 0 {
        kill_oldest(&rm, kill, concurrency).await?
    } else {
        (0, 0.0)
    };

    let line = json!({
        "rm": base,
        "tls": base.starts_with("https://"),
        "signed_heartbeats": secret.is_some(),
        "submissions": submissions,
        "concurrency": concurrency,
        "submissions_per_sec": if submit_secs > 0.0 { submit_lat.len() as f64 / submit_secs } else { 0.0 },
        "submission_latency": summary(&mut submit_lat),
        "heartbeat_latency": summary(&mut beat_lat),
        "nodes_registered": registered,
        "register_secs": register_secs,
        "killed": killed,
        "kill_secs": kill_secs,
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

    #[test]
    fn benchmark_nodes_register_their_size_and_heartbeat_healthy_and_empty() {
        let r = registration("spindle-bench-7-3:1", 1, 1);
        assert_eq!(r["nodeId"], "spindle-bench-7-3:1");
        assert_eq!(r["resource"], json!({"memory": 1, "vCores": 1}));
        let r = registration("n:1", 8192, 8);
        assert_eq!(r["resource"], json!({"memory": 8192, "vCores": 8}));
        let h = heartbeat("spindle-bench-7-3:1", 4);
        assert_eq!(h["responseId"], 4);
        assert_eq!(h["nodeStatus"]["healthy"], true);
        assert_eq!(h["nodeStatus"]["containersStatuses"], json!([]));
    }
}
