//! System tests of shipping through the RM (issue 29, items 1 and 2) on the real binaries,
//! without a configured staging directory: `distributed-shell --files` uploads to the RM's
//! blob store and the NMs download from it, also with `--detach` and the client's own files
//! gone before the containers start; an identical second submission uploads no bytes (the
//! RM's counter); a blob altered on the RM's disk is refused by the NM by its digest; a file
//! over the configured limit is refused with the limit named; a local resource that is an
//! `http://` URL of a tiny server the test runs on 127.0.0.1 is fetched and checked.

use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use reqwest::Method;
use serde_json::json;
use sha2::{Digest as _, Sha256};
use spindle_system_tests::{app_id_in, output_text as text, wait_until, Cluster, ClusterOpts};

const RUN_LIMIT: Duration = Duration::from_secs(120);
const LIMIT: &str = "3000000";

fn cluster() -> Cluster {
    Cluster::start(ClusterOpts {
        nodes: 2,
        rm_props: vec![
            (
                "spindle.resourcemanager.blob-store.max-file-bytes".into(),
                LIMIT.into(),
            ),
            (
                "spindle.resourcemanager.blob-store.cleaner-interval-ms".into(),
                "500".into(),
            ),
        ],
        ..Default::default()
    })
}

/// The value of the RM's metric `name`.
fn metric(c: &Cluster, name: &str) -> f64 {
    c.rest().metric(name)
}

fn dshell(c: &Cluster, file: &Path, result: &Path, extra: &[&str]) -> (bool, String) {
    let cmd = format!("cat data.bin > {}.$CONTAINER_ID", result.display());
    let files = format!("{}#data.bin", file.display());
    let mut args = vec![
        "distributed-shell",
        "-shell_command",
        &cmd,
        "--files",
        &files,
        "-num_containers",
        "2",
    ];
    args.extend_from_slice(extra);
    let o = c.spindle_within(&args, RUN_LIMIT);
    (o.status.success(), text(&o))
}

/// The result files the workers wrote (`<result>.<container id>`).
fn results(dir: &Path) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.file_name().to_string_lossy().starts_with("result.") {
            out.push(std::fs::read(e.path()).unwrap());
            std::fs::remove_file(e.path()).unwrap();
        }
    }
    out
}

#[test]
fn files_reach_the_workers_through_the_rm_once_and_altered_or_oversized_ones_are_refused() {
    let c = cluster();
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 253) as u8).collect();
    let file = c.dir.path().join("data.bin");
    std::fs::write(&file, &data).unwrap();
    let result = c.dir.path().join("result");

    // First submission: uploaded, no staging directory anywhere.
    let (ok, t) = dshell(&c, &file, &result, &[]);
    assert!(ok, "{t}");
    assert!(
        t.contains("Uploading data.bin (") && t.contains("to the ResourceManager"),
        "{t}"
    );
    assert!(!t.lines().any(|l| l.starts_with("Staged ")), "{t}");
    assert_eq!(results(c.dir.path()), vec![data.clone(), data.clone()]);
    let uploaded = metric(&c, "spindle_rm_blob_uploaded_bytes_total");
    assert_eq!(uploaded, data.len() as f64);

    // The same again, detached, with the client's file gone before the workers start: no
    // byte is uploaded (the RM's counter), the workers still get it.
    let (ok, t) = dshell(&c, &file, &result, &["--detach"]);
    assert!(ok, "{t}");
    assert!(t.contains("already: not sent"), "{t}");
    let app = app_id_in(&t).expect("an application id");
    std::fs::rename(&file, c.dir.path().join("moved.bin")).unwrap();
    wait_until("the detached application to finish", RUN_LIMIT, || {
        let (_, v) = c.get(&format!("/ws/v1/cluster/apps/{app}"));
        (v["app"]["state"] == "FINISHED").then_some(())
    });
    assert_eq!(results(c.dir.path()), vec![data.clone(), data.clone()]);
    assert_eq!(metric(&c, "spindle_rm_blob_uploaded_bytes_total"), uploaded);
    assert!(metric(&c, "spindle_rm_blob_uploads_skipped_total") >= 1.0);
    std::fs::rename(c.dir.path().join("moved.bin"), &file).unwrap();

    // The blob altered on the RM's disk: the NMs refuse it by its digest.
    let hex = hex::encode(Sha256::digest(&data));
    let blob = c.dir.path().join("rm/blobs/sha256").join(&hex);
    let mut altered = data.clone();
    altered[10] ^= 0xff;
    std::fs::write(&blob, &altered).unwrap();
    let (ok, t) = dshell(&c, &file, &result, &[]);
    assert!(!ok, "{t}");
    assert!(results(c.dir.path()).is_empty());
    let app = app_id_in(&t).expect("an application id");
    let logs = c.spindle_within(&["logs", "-applicationId", &app], RUN_LIMIT);
    let all = format!("{t}{}", text(&logs));
    let diags = container_diagnostics(&c, &app);
    assert!(
        diags.contains(&format!("not the expected sha256:{hex}")) && diags.contains("refused"),
        "{diags}\n{all}"
    );

    // A file over spindle.resourcemanager.blob-store.max-file-bytes: refused by name before
    // anything is sent or submitted.
    let big = c.dir.path().join("big.bin");
    std::fs::write(&big, vec![0u8; 3_000_001]).unwrap();
    let (ok, t) = dshell(&c, &big, &result, &[]);
    assert!(!ok, "{t}");
    assert!(
        t.contains(&format!(
            "spindle.resourcemanager.blob-store.max-file-bytes={LIMIT}"
        )),
        "{t}"
    );
}

/// Every container diagnostic the RM reports for `app`'s attempts, one per line.
fn container_diagnostics(c: &Cluster, app: &str) -> String {
    let (_, v) = c.get(&format!("/ws/v1/cluster/apps/{app}"));
    let mut out = format!("{}\n", v["app"]["diagnostics"]);
    let (_, attempts) = c.get(&format!("/ws/v1/cluster/apps/{app}/appattempts"));
    for a in attempts["appAttempts"]["appAttempt"]
        .as_array()
        .cloned()
        .unwrap_or_default()
    {
        let id = a["appAttemptId"].as_str().unwrap_or_default().to_string();
        let (_, cs) = c.get(&format!(
            "/ws/v1/cluster/apps/{app}/appattempts/{id}/containers"
        ));
        out.push_str(&cs.to_string());
        out.push('\n');
    }
    out
}

/// A one-thread HTTP server on 127.0.0.1 answering every GET with `body`.
fn serve(body: Vec<u8>) -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(&body);
        }
    });
    format!("http://{addr}")
}

#[test]
fn a_url_resource_is_fetched_and_checked_by_its_size_and_digest() {
    let c = cluster();
    let body = b"served over http\n".to_vec();
    let base = serve(body.clone());
    let hex = hex::encode(Sha256::digest(&body));
    let out = c.dir.path().join("url-got");
    let submit = |fragment: &str, to: &Path| {
        let (_, v, _) = c.send(
            Method::POST,
            "/ws/v1/cluster/apps/new-application",
            &json!({}),
        );
        let id = v["application-id"].as_str().unwrap().to_string();
        let (s, v, _) = c.send(
            Method::POST,
            "/ws/v1/cluster/apps",
            &json!({
                "application-id": id, "application-name": "url", "queue": "default",
                "max-app-attempts": 1,
                "am-container-spec": {
                    "local-resources": {"entry": [{"key": "u.txt", "value": {
                        "resource": format!("{base}/u.txt#sha256={fragment}"),
                        "type": "FILE", "visibility": "APPLICATION",
                        "size": body.len()}}]},
                    "commands": {"command": format!("cat u.txt > {}", to.display())}},
                "resource": {"memory": 256, "vCores": 1}}),
        );
        assert_eq!(s, 202, "{v}");
        id
    };
    let good = submit(&hex, &out);
    wait_until("the URL resource to be localized", RUN_LIMIT, || {
        std::fs::read(&out).ok().filter(|b| *b == body)
    });
    let _ = good;
    // The wrong digest: refused, the command never runs, the diagnostic names both.
    let other = hex::encode(Sha256::digest(b"something else"));
    let bad_out = c.dir.path().join("url-bad");
    let bad = submit(&other, &bad_out);
    let diags = wait_until("the refusal", RUN_LIMIT, || {
        let (_, v) = c.get(&format!("/ws/v1/cluster/apps/{bad}"));
        let d = v["app"]["diagnostics"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        d.contains("not the expected").then_some(d)
    });
    assert!(diags.contains(&format!("sha256:{other}")), "{diags}");
    assert!(!bad_out.exists());
}
