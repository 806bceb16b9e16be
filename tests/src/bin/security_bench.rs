//! Benchmark (not a test): what authentication and TLS cost on the real RM binary. Two
//! clusters are started one after the other (no NodeManager, so nothing else runs):
//!
//! - `off`: plain HTTP, YARN's simple authentication, node-tracker calls unauthenticated;
//! - `on`: `yarn.http.policy=HTTPS_ONLY` (a CA and a P-256 certificate made with `openssl`),
//!   `hadoop.http.authentication.type=token` (every REST call carries a signed bearer token),
//!   and the cluster secret (every node-tracker call HMAC-signed).
//!
//! In each, `--threads` clients submit `--submissions` applications in all (new-application
//! then submit, keep-alive connections: submissions per second), then one simulated
//! NodeManager registers and sends `--heartbeats` heartbeats one after another (the latency
//! of each, p50/p99). Prints one JSON line per mode.
//!
//! `cargo build --release --workspace --bins && ./target/release/security_bench`

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use spindle_common::cluster_secret::{random_nonce, ClusterSecret};
use spindle_common::user_token::{UserTokenIdentifier, UserTokenKey};
use spindle_system_tests::{Cluster, ClusterOpts, CLUSTER_SECRET_FILE};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let submissions = arg(&args, "--submissions", 2000);
    let heartbeats = arg(&args, "--heartbeats", 2000);
    let threads = arg(&args, "--threads", 4).max(1);
    let rounds = arg(&args, "--rounds", 1).max(1);
    // `--parts`: also the parts of `on` alone (TLS only, tokens only), to see what costs.
    let parts = args.iter().any(|a| a == "--parts");
    let mut modes = vec![("off", Mode::OFF), ("on", Mode::ON)];
    if parts {
        modes.push((
            "tls-only",
            Mode {
                tls: true,
                ..Mode::OFF
            },
        ));
        modes.push((
            "token-only",
            Mode {
                token: true,
                ..Mode::OFF
            },
        ));
        modes.push((
            "node-secret-only",
            Mode {
                node_secret: true,
                ..Mode::OFF
            },
        ));
    }
    for round in 0..rounds {
        for (name, mode) in &modes {
            let r = run(*mode, submissions, heartbeats, threads);
            println!("{}", json!({"round": round, "mode": name, "result": r}));
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Mode {
    tls: bool,
    token: bool,
    node_secret: bool,
}

impl Mode {
    const OFF: Mode = Mode {
        tls: false,
        token: false,
        node_secret: false,
    };
    const ON: Mode = Mode {
        tls: true,
        token: true,
        node_secret: true,
    };
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA and a certificate for 127.0.0.1 it signed: (ca.pem, server.pem, server.key) in `dir`.
fn make_certs(dir: &Path) {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut a = vec!["req", "-x509"];
    a.extend(ec);
    a.extend([
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "1",
        "-subj",
        "/CN=bench-ca",
    ]);
    openssl(dir, &a);
    let mut a = vec!["req"];
    a.extend(ec);
    a.extend([
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    openssl(dir, &a);
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .expect("ext");
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "1",
            "-extfile",
            "ext.cnf",
        ],
    );
}

fn site(props: &[(&str, String)]) -> String {
    let mut x = String::from("<configuration>\n");
    for (k, v) in props {
        x.push_str(&format!(
            "  <property><name>{k}</name><value>{v}</value></property>\n"
        ));
    }
    x.push_str("</configuration>\n");
    x
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn run(mode: Mode, submissions: usize, heartbeats: usize, threads: usize) -> Value {
    let work = tempfile::tempdir().expect("tempdir");
    let mut props: Vec<(&str, String)> = Vec::new();
    let mut token = None;
    let mut ca = None;
    if mode.tls {
        make_certs(work.path());
        let p = |f: &str| work.path().join(f).display().to_string();
        props.push(("yarn.http.policy", "HTTPS_ONLY".into()));
        props.push(("spindle.ssl.server.certificate-file", p("server.pem")));
        props.push(("spindle.ssl.server.private-key-file", p("server.key")));
        props.push(("spindle.ssl.client.ca-file", p("ca.pem")));
        ca = Some(std::fs::read_to_string(work.path().join("ca.pem")).expect("ca"));
    }
    if mode.token {
        let key_file = work.path().join("user-token.key");
        let key = UserTokenKey::create_file(&key_file).expect("token key");
        let id = UserTokenIdentifier::new("bench", "", now_ms(), 3_600_000).expect("id");
        token = Some(key.issue(&id));
        props.push(("hadoop.http.authentication.type", "token".into()));
        props.push((
            "hadoop.http.authentication.signature.secret.file",
            key_file.display().to_string(),
        ));
    }
    let yarn_site = site(&props);
    let opts = ClusterOpts {
        rm_props: if mode.node_secret {
            vec![]
        } else {
            vec![(CLUSTER_SECRET_FILE.to_string(), String::new())]
        },
        ..Default::default()
    };
    let files = [("yarn-site.xml", yarn_site.as_str())];
    let mut client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(30));
    let c = match &ca {
        Some(ca) => {
            client = client
                .add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes()).expect("pem"));
            Cluster::start_tls(opts, &files, ca)
        }
        None => Cluster::start_with_files(opts, &files),
    };
    let client = client.build().expect("client");
    let base = c.url("");
    let secret = if mode.node_secret {
        Some(ClusterSecret::load(&c.cluster_secret()).expect("cluster secret"))
    } else {
        None
    };

    // Submissions per second.
    let per = submissions.div_ceil(threads);
    let token = Arc::new(token);
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let client = client.clone();
            let base = base.clone();
            let token = token.clone();
            std::thread::spawn(move || {
                let auth = |rb: reqwest::blocking::RequestBuilder| match token.as_ref() {
                    Some(t) => rb.bearer_auth(t),
                    None => rb.query(&[("user.name", "bench")]),
                };
                for _ in 0..per {
                    let r = auth(client.post(format!("{base}/ws/v1/cluster/apps/new-application")))
                        .send()
                        .expect("new-application");
                    assert!(r.status().is_success(), "new-application: {}", r.status());
                    let v: Value = r.json().expect("json");
                    let id = v["application-id"].as_str().expect("id").to_string();
                    let body = json!({
                        "application-id": id,
                        "application-name": "bench",
                        "am-container-spec": {"commands": {"command": "sleep 1"}},
                        "resource": {"memory": 128, "vCores": 1},
                        "application-type": "YARN",
                    });
                    let r = auth(client.post(format!("{base}/ws/v1/cluster/apps")))
                        .json(&body)
                        .send()
                        .expect("submit");
                    assert_eq!(r.status().as_u16(), 202, "submit: {:?}", r.text());
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("submitter");
    }
    let elapsed = start.elapsed().as_secs_f64();
    let submitted = per * threads;

    // Heartbeat latency of one simulated NM.
    let node = "bench-node:45454";
    let send = |path: &str, body: &Value| -> Value {
        let bytes = serde_json::to_vec(body).expect("body");
        let mut rb = client
            .post(format!("{base}{path}"))
            .header("content-type", "application/json");
        if let Some(s) = &secret {
            let nonce = random_nonce().expect("nonce");
            rb = rb.header(
                "authorization",
                s.sign("POST", path, node, &bytes, now_ms(), nonce),
            );
        }
        let r = rb.body(bytes).send().expect("tracker call");
        assert!(r.status().is_success(), "{path}: {}", r.status());
        r.json().expect("json")
    };
    send(
        "/ws/v1/node-tracker/register",
        &json!({
            "nodeId": node, "httpAddress": "bench-node:8042",
            "resource": {"memory": 8192, "vCores": 8}, "nmVersion": "bench",
        }),
    );
    let mut lat = Vec::with_capacity(heartbeats);
    let mut response_id = 0;
    for _ in 0..heartbeats {
        let body = json!({
            "nodeId": node, "responseId": response_id,
            "nodeStatus": {"healthy": true, "healthReport": "", "lastHealthReportTime": now_ms(),
                           "containersStatuses": []},
        });
        let t = Instant::now();
        let v = send("/ws/v1/node-tracker/heartbeat", &body);
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
        response_id = v["responseId"].as_i64().unwrap_or(0) as i32;
    }
    lat.sort_by(f64::total_cmp);
    drop(c);
    json!({
        "submissions": submitted,
        "submissions_per_s": (submitted as f64 / elapsed * 10.0).round() / 10.0,
        "heartbeats": heartbeats,
        "heartbeat_ms_p50": (pct(&lat, 0.5) * 1000.0).round() / 1000.0,
        "heartbeat_ms_p99": (pct(&lat, 0.99) * 1000.0).round() / 1000.0,
    })
}
