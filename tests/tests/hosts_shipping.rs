//! Issue 29, item 1 on a cluster of hosts (`spindle_system_tests::hosts`): three NodeManager
//! hosts, each with its own network, `/tmp` and directories, and no directory shared with the
//! client, so shipped code and files can only reach the workers through the RM's blob store:
//!
//! - the README's `spindle train --src-dir examples/train -- python3 train.py` (fake GPUs, one
//!   per host, so the two ranks run on two hosts) succeeds, every rank running the shipped
//!   `train.py` and its `model.py`;
//! - `spindle distributed-shell --detach --files <file>`, with the client's file (in the
//!   test's `/tmp`, which no host sees) removed as soon as the CLI returns: every container
//!   reads the file's bytes;
//! - the same `--src-dir` submitted again uploads no byte: the RM's
//!   `spindle_rm_blob_uploaded_bytes_total` is unchanged and
//!   `spindle_rm_blob_uploads_skipped_total` grows.
//!
//! The CLI runs on the switch, as a client machine of the cluster. Root only (network and
//! mount namespaces): skipped with the reason outside CI, a failure under `CI=true`.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use spindle_system_tests::hosts::{start_or_skip, Hosts, HostsOpts};
use spindle_system_tests::{
    app_id_in, bin_dir, fake_gpus, output_text as text, output_within, ClusterOpts,
};

const LIMIT: Duration = Duration::from_secs(120);
const UPLOADED: &str = "spindle_rm_blob_uploaded_bytes_total";
const SKIPPED: &str = "spindle_rm_blob_uploads_skipped_total";

/// The README's training command, from the workspace root as its reader runs it.
fn readme_train(c: &Hosts) -> Output {
    let mut cmd = c.spindle_command(&[
        "train",
        "--workers",
        "2",
        "--worker-resources",
        "yarn.io/gpu=1,vcores=1,memory-mb=512",
        "--src-dir",
        "examples/train",
        "--",
        "python3",
        "train.py",
    ]);
    cmd.current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."));
    output_within(cmd, LIMIT)
}

/// Each worker container of `app`: its host's name and its stdout.
fn worker_outputs(c: &Hosts, app: &str) -> Vec<(String, String)> {
    c.rest()
        .workers_of(app)
        .iter()
        .map(|w| {
            let node = w["nodeId"].as_str().unwrap_or_default();
            let host = c.nm_host_of(node).expect("the worker's host").name.clone();
            let out = c.rest().container_log(
                w["nodeHttpAddress"].as_str().unwrap_or_default(),
                w["containerId"].as_str().unwrap_or_default(),
                "stdout",
            );
            (host, out)
        })
        .collect()
}

#[test]
fn shipped_code_and_files_reach_hosts_without_a_shared_disk_and_are_sent_once() {
    let test = "shipped_code_and_files_reach_hosts_without_a_shared_disk_and_are_sent_once";
    // The fake GPUs' discovery directory: outside /tmp (each host has its own), readable
    // from every host like the binaries.
    let root = bin_dir().join("hosts-tests");
    std::fs::create_dir_all(&root).expect("hosts-tests dir");
    let scratch = tempfile::Builder::new()
        .prefix("gpus-")
        .tempdir_in(&root)
        .expect("tempdir");
    let gpu = ClusterOpts::with_fake_gpus(3, &fake_gpus(scratch.path(), 1));
    let Some(c) = start_or_skip(
        test,
        HostsOpts {
            nms: 3,
            rm_props: gpu.rm_props,
            nm_props: gpu.nm_props,
            ..Default::default()
        },
    ) else {
        return;
    };

    // (a) The README's command: the packed directory goes to the RM, each rank (one GPU
    // per host: two hosts) unpacks it and runs train.py with its model.py.
    let o = readme_train(&c);
    let t = text(&o);
    assert!(o.status.success(), "{t}\n{}", c.logs());
    assert!(
        t.contains("Uploading the --src-dir examples/train (")
            && t.contains("to the ResourceManager"),
        "{t}"
    );
    assert!(!t.lines().any(|l| l.starts_with("Staged ")), "{t}");
    let app = app_id_in(&t).expect("an application id");
    let ranks = worker_outputs(&c, &app);
    assert_eq!(ranks.len(), 2, "{ranks:?}");
    assert_ne!(ranks[0].0, ranks[1].0, "two hosts: {ranks:?}");
    for (host, out) in &ranks {
        assert!(
            out.contains("step 3 loss") && out.contains(" done"),
            "{host}: {out}"
        );
    }
    let uploaded = c.rest().metric(UPLOADED);
    assert!(uploaded > 0.0, "{uploaded}");
    let skipped = c.rest().metric(SKIPPED);

    // (b) distributed-shell --files, detached, the client's file gone once it returns.
    let client = tempfile::tempdir().expect("the client's own directory (its /tmp)");
    let file = client.path().join("data.txt");
    let data = format!(
        "shipped through the RM to every host, test {}\n",
        std::process::id()
    );
    std::fs::write(&file, &data).expect("data");
    let files = format!("{}#data.txt", file.display());
    let o = c.spindle_within(
        &[
            "distributed-shell",
            "--detach",
            "-shell_command",
            "cat data.txt",
            "--files",
            &files,
            "-num_containers",
            "3",
        ],
        LIMIT,
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}\n{}", c.logs());
    drop(client);
    assert!(!file.exists());
    let app = app_id_in(&t).expect("an application id");
    let a = c
        .rest()
        .wait_app_state(&app, &["FINISHED", "FAILED", "KILLED"], LIMIT);
    assert_eq!(a["finalStatus"], "SUCCEEDED", "{a}\n{}", c.logs());
    let outs = worker_outputs(&c, &app);
    assert_eq!(outs.len(), 3, "{outs:?}");
    for (host, out) in &outs {
        assert_eq!(out, &data, "{host}");
    }
    let uploaded = uploaded + data.len() as f64;
    assert_eq!(c.rest().metric(UPLOADED), uploaded);

    // (c) The same --src-dir again: asked by digest, not sent; the job runs as before.
    let o = readme_train(&c);
    let t = text(&o);
    assert!(o.status.success(), "{t}\n{}", c.logs());
    assert!(
        t.contains("The ResourceManager has the --src-dir examples/train (")
            && t.contains("already: not sent"),
        "{t}"
    );
    assert!(!t.contains("Uploading the --src-dir"), "{t}");
    assert_eq!(c.rest().metric(UPLOADED), uploaded, "no byte uploaded");
    assert!(c.rest().metric(SKIPPED) > skipped);
    let app = app_id_in(&t).expect("an application id");
    for (host, out) in &worker_outputs(&c, &app) {
        assert!(out.contains(" done"), "{host}: {out}");
    }
}
