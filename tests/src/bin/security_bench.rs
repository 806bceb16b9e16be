//! Benchmark (not a test): what authentication and TLS cost on the real RM binary. Two
//! clusters are started one after the other (no NodeManager, so nothing else runs):
//!
//! - `off`: plain HTTP, YARN's simple authentication, node-tracker calls unauthenticated;
//! - `on`: `yarn.http.policy=HTTPS_ONLY` (a CA and a P-256 certificate made with `openssl`),
//!   `hadoop.http.authentication.type=token` (every REST call carries a signed bearer token),
//!   and the cluster secret (every node-tracker call HMAC-signed).
//!
//! In each, `spindle bench http` measures from a client (with the cluster's configuration
//! directory, so it dials https and signs heartbeats as the mode says, and `SPINDLE_TOKEN`):
//! `--concurrency` clients submit `--submissions` applications in all (submissions per
//! second), then a benchmark node sends `--heartbeats` heartbeats one after another (their
//! p50/p99). Prints one JSON line per mode.
//!
//! `cargo build --release --workspace --bins && ./target/release/security_bench [--parts] [--rounds R]`

#![forbid(unsafe_code)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use spindle_common::user_token::{UserTokenIdentifier, UserTokenKey};
use spindle_system_tests::{
    bin, output_within, write_cluster_secret, Cluster, ClusterOpts, CLUSTER_SECRET_FILE,
};

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
    let submissions = arg(&args, "--submissions", 1000);
    let heartbeats = arg(&args, "--heartbeats", 1000);
    let concurrency = arg(&args, "--concurrency", 8).max(1);
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
            let r = run(*mode, submissions, heartbeats, concurrency);
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

fn run(mode: Mode, submissions: usize, heartbeats: usize, concurrency: usize) -> Value {
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
    // The secret is named in yarn-site.xml, where the benchmark client finds it too.
    let secret = if mode.node_secret {
        let f = work.path().join("cluster-secret");
        write_cluster_secret(&f);
        f.display().to_string()
    } else {
        String::new()
    };
    props.push((CLUSTER_SECRET_FILE, secret.clone()));
    let yarn_site = site(&props);
    let opts = ClusterOpts {
        rm_props: vec![(CLUSTER_SECRET_FILE.to_string(), secret)],
        ..Default::default()
    };
    let files = [("yarn-site.xml", yarn_site.as_str())];
    let c = match &ca {
        Some(ca) => Cluster::start_tls(opts, &files, ca),
        None => Cluster::start_with_files(opts, &files),
    };
    let mut cmd = Command::new(bin("spindle"));
    cmd.args([
        "bench",
        "http",
        "--submissions",
        &submissions.to_string(),
        "--concurrency",
        &concurrency.to_string(),
        "--heartbeats",
        &heartbeats.to_string(),
        "--rm-address",
        &c.rm_addr,
        "--conf-dir",
        &c.conf_dir.display().to_string(),
    ]);
    cmd.env_remove("SPINDLE_TOKEN")
        .env_remove("SPINDLE_TOKEN_FILE");
    if let Some(t) = &token {
        cmd.env("SPINDLE_TOKEN", t);
    }
    let out = output_within(cmd, Duration::from_secs(600));
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "spindle bench http: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON line in: {stdout}"));
    serde_json::from_str(line).expect("bench http's JSON line")
}
