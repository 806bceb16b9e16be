//! Jobs in their own container images, on the real binaries (issue 28), offline: a
//! `docker-registry` of the test's own on 127.0.0.1 holds an image the test builds
//! (busybox-static and an `/etc/os-release` of its own, packed with `umoci`, pushed with
//! `skopeo`), and NMs allow the `runc` runtime (crun) with that registry as insecure.
//!
//! - `distributed-shell --image` runs its containers in the image: they print the image's
//!   os-release, not the host's; the first pull's progress is in the container's log; the
//!   node then reports the image (`node -status`, `image -list`), and a second application's
//!   container pulls nothing.
//! - A disallowed mount and an unreachable registry each fail the container with their
//!   reason.
//! - A container granted one of two fake GPUs (device nodes the test makes, a CDI spec naming
//!   them, with a hook) sees only that one and the spec's environment, and the hook never
//!   runs; a container over its memory limit is killed with -104, as a process is.
//! - Under a pids limit of 32 a container in an image cannot fork 80 processes; a layer
//!   corrupted in the registry's storage fails a node's pull with the digest mismatch named.
//! - A `train --image` gang of 4 all-reduces its ranks in the image (the node lends its C
//!   library and the worker binary through allowed read-only mounts).
//! - An NM killed with SIGKILL and started again re-adopts a running image container, which
//!   then ends well; nothing of it is left mounted, and its bundle is removed.
//! - `image -prefetch -nodes` pulls the image on one of two nodes, and a job asking for the
//!   image lands there, although a job naming no image goes to the other (larger) one.
//!
//! Needs root (overlay mounts, crun) and the Debian packages `.ci/run` installs: skipped with
//! the reason outside CI, failed under `CI=true`.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use spindle_system_tests::{app_id_in, Cluster, ClusterOpts};
use spindle_test_support::images::{build_image, free_port, tools_present, Registry};

const LIMIT: Duration = Duration::from_secs(120);

fn ready(test: &str) -> bool {
    if spindle_test_support::require::root(test, "image containers mount overlays and run crun")
        .is_none()
    {
        return false;
    }
    if !Path::new("/usr/bin/crun").exists() {
        spindle_test_support::require::skip(test, "crun is not installed");
        return false;
    }
    tools_present(test)
}

fn nm_props(registry: &str, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut p = vec![
        (
            "yarn.nodemanager.runtime.linux.allowed-runtimes".to_string(),
            "default,runc".to_string(),
        ),
        (
            "spindle.nodemanager.runtime.oci.insecure-registries".to_string(),
            registry.to_string(),
        ),
    ];
    p.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    p
}

/// Runs `distributed-shell` with `args` to its end; its stdout and the application id.
fn dshell(c: &Cluster, args: &[&str]) -> (String, String) {
    let mut all = vec!["distributed-shell", "--no-follow"];
    all.extend_from_slice(args);
    let out = c.spindle_within(&all, LIMIT);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let id = app_id_in(&text).unwrap_or_else(|| panic!("no application id in:\n{text}"));
    (text, id)
}

/// Each container's (node http address, id) of an application, AM excluded.
fn task_containers(c: &Cluster, app: &str) -> Vec<(String, String, Value)> {
    c.containers_of(app)
        .into_iter()
        .filter(|x| !x["containerId"].as_str().unwrap_or("").ends_with("_000001"))
        .map(|x| {
            (
                x["nodeHttpAddress"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                x["containerId"].as_str().unwrap_or_default().to_string(),
                x,
            )
        })
        .collect()
}

/// A registry of the test's own holding the test image as `spindle/busybox:1`, the image's
/// reference, and the OCI layout it was pushed from.
fn image_registry(dir: &Path) -> (Registry, String, std::path::PathBuf) {
    let layout = build_image(dir);
    let registry = Registry::start(dir);
    registry.push(&layout, dir, "spindle/busybox:1");
    let image = format!("{}/spindle/busybox:1", registry.host());
    (registry, image, layout)
}

/// The diagnostics of an application's task containers, joined.
fn diagnostics(c: &Cluster, app: &str) -> String {
    task_containers(c, app)
        .into_iter()
        .map(|(_, _, x)| {
            x["diagnosticsInfo"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

#[test]
fn a_shell_runs_in_its_image_pulled_once_per_node() {
    if !ready("a_shell_runs_in_its_image_pulled_once_per_node") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let (registry, image, _) = image_registry(tmp.path());
    let allowed = tmp.path().join("data");
    std::fs::create_dir_all(&allowed).expect("data dir");
    std::fs::write(allowed.join("hello"), "from the node\n").expect("data file");
    let c = Cluster::start(ClusterOpts {
        nodes: 1,
        nm_props: nm_props(
            &registry.host(),
            &[(
                "yarn.nodemanager.runtime.linux.runc.allowed-ro-mounts",
                &allowed.display().to_string(),
            )],
        ),
        ..Default::default()
    });

    // Two containers at once: one pull (single-flight), both see the image's os-release
    // and the allowed mount.
    let mount = format!("{}:/data:ro", allowed.display());
    let (text, app) = dshell(
        &c,
        &[
            "--shell-command",
            "cat /etc/os-release /data/hello",
            "-num_containers",
            "2",
            "--image",
            &image,
            "--mount",
            &mount,
        ],
    );
    assert!(text.contains("SUCCEEDED"), "{text}");
    let tasks = task_containers(&c, &app);
    assert_eq!(tasks.len(), 2, "{tasks:?}");
    let mut pulled_lines = 0;
    for (node, id, _) in &tasks {
        let out = c.container_log(node, id, "stdout");
        assert!(out.contains("ID=spindle-test"), "{id}: {out}");
        assert!(out.contains("from the node"), "{id}: {out}");
        let host = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
        let host_id = host
            .lines()
            .find(|l| l.starts_with("ID="))
            .unwrap_or("ID=?");
        assert!(
            !out.contains(host_id),
            "{id} saw the host's {host_id}: {out}"
        );
        let err = c.container_log(node, id, "stderr");
        pulled_lines += err.lines().filter(|l| l.contains("pulled ")).count();
    }
    assert!(
        pulled_lines >= 1,
        "no pull progress in either container's log"
    );

    // The node reports the image; a second application pulls nothing.
    let status = c.spindle_within(&["node", "-status", &c.nm_addrs[0]], LIMIT);
    let status = String::from_utf8_lossy(&status.stdout).to_string();
    assert!(status.contains("Cached Images : 1"), "{status}");
    assert!(status.contains(&image), "{status}");
    let list = c.spindle_within(&["image", "-list"], LIMIT);
    let list = String::from_utf8_lossy(&list.stdout).to_string();
    assert!(
        list.contains(&image) && list.contains(&c.nm_addrs[0]),
        "{list}"
    );
    let (text, again) = dshell(
        &c,
        &["--shell-command", "cat /etc/os-release", "--image", &image],
    );
    assert!(text.contains("SUCCEEDED"), "{text}");
    for (node, id, _) in task_containers(&c, &again) {
        let err = c.container_log(&node, &id, "stderr");
        assert!(!err.contains("pulling"), "{id} pulled again: {err}");
    }

    // A mount outside the allow-list, and an unreachable registry: each fails with its reason.
    let (text, bad_mount) = dshell(
        &c,
        &[
            "--shell-command",
            "true",
            "--image",
            &image,
            "--mount",
            "/etc:/hostetc",
        ],
    );
    assert!(!text.contains("SUCCEEDED"), "{text}");
    let diag = diagnostics(&c, &bad_mount);
    assert!(diag.contains("allowed"), "{diag}");
    let nowhere = format!("127.0.0.1:{}/spindle/busybox:1", free_port());
    let (text, unreachable) = dshell(&c, &["--shell-command", "true", "--image", &nowhere]);
    assert!(!text.contains("SUCCEEDED"), "{text}");
    let diag = diagnostics(&c, &unreachable);
    assert!(diag.contains("cannot get image"), "{diag}");
}

#[test]
fn a_job_prefers_the_node_that_holds_its_image() {
    if !ready("a_job_prefers_the_node_that_holds_its_image") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let (registry, image, _) = image_registry(tmp.path());
    // Two nodes, the second twice as large, where the scheduler puts a container that names
    // no image (the node with the most room); the image is pulled on the first only.
    let mut c = Cluster::start(ClusterOpts {
        nodes: 1,
        nm_props: nm_props(&registry.host(), &[]),
        ..Default::default()
    });
    c.add_nm(&nm_props(
        &registry.host(),
        &[("yarn.nodemanager.resource.memory-mb", "8192")],
    ));
    c.wait_nodes_running(2);
    let target = c.nm_addrs[0].clone();
    let (text, plain) = dshell(&c, &["--shell-command", "true"]);
    assert!(text.contains("SUCCEEDED"), "{text}");
    assert_eq!(
        task_containers(&c, &plain)[0].2["nodeId"],
        c.nm_addrs[1].as_str(),
        "without an image the task goes to the larger node"
    );
    let out = c.spindle_within(&["image", "-prefetch", &image, "-nodes", &target], LIMIT);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("1 of 1 node(s) hold"), "{text}");
    for _ in 0..3 {
        let (text, app) = dshell(&c, &["--shell-command", "true", "--image", &image]);
        assert!(text.contains("SUCCEEDED"), "{text}");
        let tasks = task_containers(&c, &app);
        assert!(
            tasks.iter().all(|(_, _, x)| x["nodeId"] == target.as_str()),
            "expected every task on {target}: {tasks:?}"
        );
    }
    // A bad reference is refused before anything is asked of a node.
    let out = c.spindle_within(&["image", "-prefetch", "Not An Image"], LIMIT);
    assert_eq!(out.status.code(), Some(255), "{out:?}");
}

#[test]
fn a_training_gang_all_reduces_inside_the_image() {
    if !ready("a_training_gang_all_reduces_inside_the_image") {
        return;
    }
    const WORKERS: u64 = 4;
    let tmp = tempfile::tempdir().expect("tmp");
    let (registry, image, _) = image_registry(tmp.path());
    let reports = tmp.path().join("reports");
    std::fs::create_dir_all(&reports).expect("reports dir");
    // The image has no C library: the node lends its own, and the worker binary, read-only.
    let bin_dir = spindle_system_tests::bin_dir().display().to_string();
    let ro = format!("/lib,/lib64,{bin_dir}");
    let gpus = spindle_system_tests::fake_gpus(tmp.path(), 2);
    let mut opts = ClusterOpts::with_fake_gpus(2, &gpus);
    opts.nm_props.extend(nm_props(
        &registry.host(),
        &[
            ("yarn.nodemanager.runtime.linux.runc.allowed-ro-mounts", &ro),
            (
                "yarn.nodemanager.runtime.linux.runc.allowed-rw-mounts",
                &reports.display().to_string(),
            ),
        ],
    ));
    let c = Cluster::start(opts);
    let worker = spindle_system_tests::bin("allreduce_worker")
        .display()
        .to_string();
    let report_env = format!("ALLREDUCE_REPORT_DIR={}", reports.display());
    let rw = format!("{0}:{0}:rw", reports.display());
    let bins = format!("{bin_dir}:{bin_dir}:ro");
    let out = c.spindle_within(
        &[
            "train",
            "--workers",
            "4",
            "--worker-resources",
            "yarn.io/gpu=1,vcores=1,memory-mb=256",
            "--gang-timeout-ms",
            "60000",
            "--image",
            &image,
            "--mount",
            "/lib:/lib:ro",
            "--mount",
            "/lib64:/lib64:ro",
            "--mount",
            &bins,
            "--mount",
            &rw,
            "--env",
            &report_env,
            "--",
            &worker,
        ],
        LIMIT,
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    if !out.status.success() {
        c.dump_logs();
    }
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sum = WORKERS * (WORKERS - 1) / 2;
    for rank in 0..WORKERS {
        let p = reports.join(format!("attempt-1-rank-{rank}.txt"));
        let report = std::fs::read_to_string(&p).unwrap_or_default();
        assert!(
            report.contains(&format!("rank {rank} of {WORKERS}: allreduce sum {sum}")),
            "rank {rank}: {report}"
        );
    }
    // They ran in the image: it has no bash, which the executor says in each worker's log.
    let app = app_id_in(&text).expect("application id");
    let tasks = task_containers(&c, &app);
    assert_eq!(tasks.len() as u64, WORKERS, "{tasks:?}");
    for (node, id, _) in tasks {
        let err = c.container_log(&node, &id, "stderr");
        assert!(err.contains("the image has no bash"), "{id}: {err}");
    }
}

#[test]
fn a_killed_nodemanager_readopts_a_running_image_container() {
    if !ready("a_killed_nodemanager_readopts_a_running_image_container") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let (registry, image, _) = image_registry(tmp.path());
    let mut c = Cluster::start(ClusterOpts {
        nodes: 1,
        nm_props: nm_props(
            &registry.host(),
            &[("yarn.nodemanager.recovery.enabled", "true")],
        ),
        ..Default::default()
    });
    let out = c.spindle_within(
        &[
            "distributed-shell",
            "--detach",
            "--shell-command",
            "echo up; sleep 6; cat /etc/os-release",
            "--image",
            &image,
        ],
        LIMIT,
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let app = app_id_in(&text).unwrap_or_else(|| panic!("{text}"));
    // Running as its NM says (which the NM has recorded for recovery by then: durable
    // before visible), and its command started.
    let (first_node, first_id) = spindle_system_tests::wait_until("the task to run", LIMIT, || {
        let t = task_containers(&c, &app);
        let (node, id, _) = t.first()?;
        (c.nm_container_state(node, id).0 == "RUNNING"
            && c.container_log(node, id, "stdout").contains("up"))
        .then(|| (node.clone(), id.clone()))
    });
    c.restart_nm_after(0, nix::sys::signal::Signal::SIGKILL);
    let end = c.wait_app_state(&app, &["FINISHED", "FAILED", "KILLED"], LIMIT);
    assert_eq!(end["finalStatus"], "SUCCEEDED", "{end}");
    // The same container ran to its end: re-adopted, not lost and run again.
    let tasks = task_containers(&c, &app);
    let ids: Vec<&str> = tasks.iter().map(|(_, id, _)| id.as_str()).collect();
    assert_eq!(ids, [first_id.as_str()], "{tasks:?}");
    let out = c.container_log(&first_node, &first_id, "stdout");
    assert!(out.contains("ID=spindle-test"), "{out}");
    // Nothing of it is left: no mount naming the node's directories, no bundle, no runtime
    // state.
    let nm_dir = c.dir.path().join("nm0");
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    assert!(
        !mounts.contains(&nm_dir.display().to_string()),
        "left mounted:\n{mounts}"
    );
    let oci = nm_dir.join("local/nmPrivate/oci");
    spindle_system_tests::wait_until("the bundle to go", Duration::from_secs(20), || {
        let left: Vec<_> = std::fs::read_dir(oci.join("bundles"))
            .map(|d| d.filter_map(Result::ok).collect())
            .unwrap_or_default();
        left.is_empty().then_some(())
    });
}

#[test]
fn a_granted_gpu_is_the_only_one_inside_and_the_memory_limit_holds() {
    let test = "a_granted_gpu_is_the_only_one_inside_and_the_memory_limit_holds";
    if !ready(test) {
        return;
    }
    use nix::sys::stat::{makedev, mknod, Mode, SFlag};
    let tmp = tempfile::tempdir().expect("tmp");
    let (registry, image, _) = image_registry(tmp.path());
    // Two fake GPUs (minors 0 and 1): device nodes the test makes, and a CDI spec naming
    // them (with a hook, which must never run).
    let dev = tmp.path().join("dev");
    std::fs::create_dir_all(&dev).expect("dev dir");
    let mut devices = Vec::new();
    for minor in 0..2u32 {
        let p = dev.join(format!("nvidia{minor}"));
        if let Err(e) = mknod(
            &p,
            SFlag::S_IFCHR,
            Mode::from_bits_truncate(0o666),
            makedev(195, minor.into()),
        ) {
            spindle_test_support::require::skip(test, format_args!("cannot mknod: {e}"));
            return;
        }
        devices.push(serde_json::json!({
            "name": format!("gpu{minor}"),
            "containerEdits": {"deviceNodes": [{"path": format!("/dev/nvidia{minor}"), "hostPath": p}]}
        }));
    }
    let cdi = tmp.path().join("cdi");
    std::fs::create_dir_all(&cdi).expect("cdi dir");
    let hook_ran = tmp.path().join("hook-ran");
    let spec = serde_json::json!({
        "cdiVersion": "0.6.0", "kind": "nvidia.com/gpu", "devices": devices,
        "containerEdits": {"env": ["FROM_CDI=1"], "hooks": [{"hookName": "createContainer",
            "path": "/usr/bin/touch", "args": ["touch", hook_ran.display().to_string()]}]}
    });
    std::fs::write(cdi.join("nvidia.json"), spec.to_string()).expect("cdi spec");
    let gpus = spindle_system_tests::fake_gpus(tmp.path(), 2);
    let mut opts = ClusterOpts::with_fake_gpus(1, &gpus);
    opts.nm_props.extend(nm_props(
        &registry.host(),
        &[(
            "spindle.nodemanager.runtime.oci.cdi-spec-dirs",
            &cdi.display().to_string(),
        )],
    ));
    let c = Cluster::start(opts);
    let (text, app) = dshell(
        &c,
        &[
            "--shell-command",
            r#"ls /dev | grep nvidia; echo "gpus=$CUDA_VISIBLE_DEVICES cdi=$FROM_CDI""#,
            "--container-resources",
            "yarn.io/gpu=1,memory-mb=256,vcores=1",
            "--image",
            &image,
        ],
    );
    assert!(text.contains("SUCCEEDED"), "{text}");
    let (node, id, _) = task_containers(&c, &app).remove(0);
    let out = c.container_log(&node, &id, "stdout");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "one device and the environment: {out}");
    let (device, env) = (lines[0], lines[1]);
    let minor = device.trim_start_matches("nvidia");
    assert!(minor == "0" || minor == "1", "{out}");
    assert_eq!(env, format!("gpus={minor} cdi=1"), "{out}");
    assert!(!hook_ran.exists(), "a CDI hook ran");

    // Over its memory limit, a container in an image is killed as a process one is (-104).
    let (text, oom) = dshell(
        &c,
        &[
            "--shell-command",
            "dd if=/dev/zero of=/dev/null bs=400M count=1",
            "--container-resources",
            "memory-mb=128,vcores=1",
            "--image",
            &image,
        ],
    );
    assert!(!text.contains("SUCCEEDED"), "{text}");
    let (_, _, x) = task_containers(&c, &oom).remove(0);
    assert_eq!(x["containerExitStatus"], -104, "{x}");
}

#[test]
fn a_corrupted_layer_is_a_digest_mismatch_and_a_fork_bomb_is_bounded() {
    let test = "a_corrupted_layer_is_a_digest_mismatch_and_a_fork_bomb_is_bounded";
    if !ready(test) {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let (registry, image, layout) = image_registry(tmp.path());
    let c = Cluster::start(ClusterOpts {
        nodes: 1,
        nm_props: nm_props(
            &registry.host(),
            &[("spindle.nodemanager.container.pids-limit", "32")],
        ),
        ..Default::default()
    });
    // At most 32 processes: not all 80 background sleeps can be forked.
    let (_, bomb) = dshell(
        &c,
        &[
            "--shell-command",
            "for i in $(seq 1 80); do sleep 3 & done; echo forked-all",
            "--image",
            &image,
        ],
    );
    let (node, id, _) = task_containers(&c, &bomb).remove(0);
    let err = c.container_log(&node, &id, "stderr");
    let out = c.container_log(&node, &id, "stdout");
    assert!(err.contains("fork"), "no fork was refused: {err}\n{out}");
    assert!(!out.contains("forked-all"), "{out}");

    // Corrupt the image's top layer in the registry's storage: a node that pulls it now fails
    // the container with the digest mismatch named.
    let index: Value = serde_json::from_str(
        &std::fs::read_to_string(layout.join("index.json")).expect("index.json"),
    )
    .expect("index");
    let manifest_hex = index["manifests"][0]["digest"]
        .as_str()
        .and_then(|d| d.strip_prefix("sha256:"))
        .expect("manifest digest")
        .to_string();
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(layout.join("blobs/sha256").join(&manifest_hex))
            .expect("manifest"),
    )
    .expect("manifest json");
    let layers = manifest["layers"].as_array().expect("layers");
    let hex = layers[layers.len() - 1]["digest"]
        .as_str()
        .and_then(|d| d.strip_prefix("sha256:"))
        .expect("layer digest")
        .to_string();
    let data = registry.blob_data(&hex);
    let mut bytes = std::fs::read(&data).expect("the layer blob");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&data, bytes).expect("corrupt it");
    // A node of its own, whose cache is empty.
    drop(c);
    let c = Cluster::start(ClusterOpts {
        nodes: 1,
        nm_props: nm_props(&registry.host(), &[]),
        ..Default::default()
    });
    let broken = image.clone();
    let (text, app) = dshell(
        &c,
        &[
            "--shell-command",
            "true",
            "--image",
            &broken,
            "-num_containers",
            "2",
        ],
    );
    assert!(!text.contains("SUCCEEDED"), "{text}");
    let diag = diagnostics(&c, &app);
    assert!(diag.contains("digest"), "{diag}");
}
