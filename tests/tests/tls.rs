//! `yarn.http.policy` `HTTPS_ONLY` on the real binaries. The test makes a CA and a
//! certificate for 127.0.0.1/localhost that the CA signed (rcgen), and starts an RM and one NM
//! whose `yarn-site.xml` (read by the daemons, the `spindle` client and the AM in its
//! container alike) names the certificate, its key and the CA:
//!
//! - a distributed shell runs to SUCCEEDED (client -> RM, RM -> NM to launch the AM, AM -> RM,
//!   AM -> NM, NM -> RM heartbeats: every hop is TLS, since neither daemon speaks anything
//!   else);
//! - plain HTTP to the RM and to the NM gets no HTTP answer (the connection is closed), and an
//!   HTTPS client that does not trust the CA is refused by its own certificate check;
//! - an RM whose private key is not its certificate's stops at start (exit 1) with one line
//!   naming both files, and so does one whose certificate file is missing.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use spindle_system_tests::{app_id_in, bin, output_within, Cluster, ClusterOpts};

/// A CA, and a certificate for `localhost`/127.0.0.1 it signed: (CA PEM, cert PEM, key PEM).
fn pki() -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "Spindle test CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).expect("CA certificate");
    let key = KeyPair::generate().expect("key");
    let params = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
        .expect("params");
    let cert = params.signed_by(&key, &ca, &ca_key).expect("certificate");
    (ca.pem(), cert.pem(), key.serialize_pem())
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write PEM");
    p
}

fn property(name: &str, value: &Path) -> String {
    format!(
        "  <property><name>{name}</name><value>{}</value></property>\n",
        value.display()
    )
}

/// What a plain-HTTP request to `addr` gets back (the server closes the connection).
fn plain_http(addr: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(15)))
        .expect("timeout");
    let _ =
        s.write_all(b"GET /ws/v1/cluster/info HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    String::from_utf8_lossy(&got).to_string()
}

#[test]
fn an_https_only_cluster_runs_a_distributed_shell_and_refuses_plain_http() {
    let pki_dir = tempfile::tempdir().expect("tempdir");
    let (ca, cert, key) = pki();
    let ca_f = write(pki_dir.path(), "ca.pem", &ca);
    let cert_f = write(pki_dir.path(), "cert.pem", &cert);
    let key_f = write(pki_dir.path(), "key.pem", &key);
    let site = format!(
        "<configuration>\n  <property><name>yarn.http.policy</name><value>HTTPS_ONLY</value></property>\n{}{}{}</configuration>\n",
        property("spindle.ssl.server.certificate-file", &cert_f),
        property("spindle.ssl.server.private-key-file", &key_f),
        property("spindle.ssl.client.ca-file", &ca_f),
    );
    let c = Cluster::start_tls(
        ClusterOpts {
            nodes: 1,
            ..Default::default()
        },
        &[("yarn-site.xml", &site)],
        &ca,
    );
    // HTTPS with the CA: answered (the harness's client dials https://).
    let (status, info) = c.get("/ws/v1/cluster/info");
    assert_eq!(status, 200, "{info}");

    let out = c.spindle(&[
        "distributed-shell",
        "--num-containers",
        "2",
        "--container-resources",
        "memory-mb=128,vcores=1",
        "--shell-command",
        "echo hello over tls",
    ]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !(out.status.success() && text.contains("SUCCEEDED")) {
        c.dump_logs();
        panic!("the distributed shell did not succeed over TLS:\n{text}");
    }
    // The URLs the RM hands out say https too.
    let id = app_id_in(&text).expect("an application id in the client's output");
    let app = c.app(&id);
    for field in ["amContainerLogs", "trackingUrl"] {
        assert!(
            app[field]
                .as_str()
                .is_some_and(|u| u.starts_with("https://")),
            "{field}: {app}"
        );
    }
    let rm_log = c.rm.log_text();
    assert!(
        rm_log.contains(&format!("listening on https://{}", c.rm_addr)),
        "{rm_log}"
    );

    // Plain HTTP: no HTTP answer from either daemon.
    for addr in [&c.rm_addr, &c.nm_addrs[0]] {
        let got = plain_http(addr);
        assert!(
            !got.contains("HTTP/1.1 200") && !got.contains("clusterInfo"),
            "plain HTTP to {addr} was answered: {got}"
        );
    }
    let plain = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    assert!(
        plain
            .get(format!("http://{}/ws/v1/cluster/info", c.rm_addr))
            .send()
            .is_err(),
        "plain HTTP to the RM got an answer"
    );
    // HTTPS without trusting the CA: the client's own check refuses the certificate.
    let e = plain
        .get(format!("https://{}/ws/v1/cluster/info", c.rm_addr))
        .send()
        .expect_err("a certificate from an unknown CA is refused");
    assert!(e.is_connect(), "{e:?}");
}

/// Starts the RM binary with `props` and returns its exit status and stderr (bounded).
fn rm_refusal(props: &[(&str, &Path)], dir: &Path) -> (Option<i32>, String) {
    let conf = dir.join("conf");
    std::fs::create_dir_all(&conf).expect("conf dir");
    std::fs::write(
        conf.join("yarn-site.xml"),
        "<configuration></configuration>\n",
    )
    .expect("yarn-site");
    let mut cmd = Command::new(bin("resourcemanager"));
    cmd.arg("--conf-dir").arg(&conf);
    let mut all = vec![
        (
            "yarn.resourcemanager.webapp.address".to_string(),
            "127.0.0.1:0".to_string(),
        ),
        (
            "spindle.resourcemanager.state-store.path".to_string(),
            dir.join("rmstore.sqlite").display().to_string(),
        ),
        ("yarn.http.policy".to_string(), "HTTPS_ONLY".to_string()),
    ];
    all.extend(
        props
            .iter()
            .map(|(k, v)| (k.to_string(), v.display().to_string())),
    );
    for (k, v) in all {
        cmd.arg("-D").arg(format!("{k}={v}"));
    }
    let out = output_within(cmd, Duration::from_secs(30));
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn a_bad_certificate_stops_the_rm_at_start_naming_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, cert, _) = pki();
    let (_, _, other_key) = pki();
    let cert_f = write(dir.path(), "cert.pem", &cert);
    let other_f = write(dir.path(), "other-key.pem", &other_key);
    let (code, err) = rm_refusal(
        &[
            ("spindle.ssl.server.certificate-file", &cert_f),
            ("spindle.ssl.server.private-key-file", &other_f),
        ],
        dir.path(),
    );
    assert_eq!(code, Some(1), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains("other-key.pem") && lines[0].contains("cert.pem"),
        "{err}"
    );
    let missing = dir.path().join("missing-cert.pem");
    let (code, err) = rm_refusal(
        &[
            ("spindle.ssl.server.certificate-file", &missing),
            ("spindle.ssl.server.private-key-file", &other_f),
        ],
        dir.path(),
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("missing-cert.pem"), "{err}");
    assert!(err.contains("spindle.ssl.server.certificate-file"), "{err}");
}
