//! Files that respect the container's user, on a real cluster whose containers run as
//! `nobody` (YARN's LinuxContainerExecutor in non-secure mode, `limit-users` true) while the
//! NodeManager is root:
//! * a container that replaces its own stdout with a link to a root-only file gets nothing
//!   out of it: every NM log endpoint refuses the link (403, audited), never the marker;
//! * a root-only file named as a `file://` local resource fails the launch with a
//!   diagnostic naming the resource and `nobody`, and no container ever sees it.
//!
//! Needs root (the NM switches users); outside CI it skips with the reason, under `CI=true`
//! it fails.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};
use spindle_system_tests::{bin, wait_until, Cluster, ClusterOpts};

const LCE: &str = "org.apache.hadoop.yarn.server.nodemanager.LinuxContainerExecutor";

/// One NM whose containers run as `nobody`, with its audit lines in their own file.
fn nobody_cluster() -> Cluster {
    let props = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    Cluster::start(ClusterOpts {
        nodes: 1,
        nm_props: props(&[
            ("yarn.nodemanager.container-executor.class", LCE),
            (
                "yarn.nodemanager.linux-container-executor.nonsecure-mode.limit-users",
                "true",
            ),
            (
                "yarn.nodemanager.linux-container-executor.nonsecure-mode.local-user",
                "nobody",
            ),
            // What is tested here is who reads files, not cgroups.
            ("spindle.nodemanager.cgroups.enabled", "false"),
        ]),
        ..Default::default()
    })
}

/// A root-only file (0600, owned by root) holding `marker`, in the test's temp dir.
fn root_only_file(c: &Cluster, marker: &str) -> std::path::PathBuf {
    let p = c.dir.path().join("root-only-secret.txt");
    std::fs::write(&p, format!("{marker}\n")).expect("write the secret");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).expect("chmod 0600");
    let meta = std::fs::metadata(&p).unwrap();
    assert_eq!(
        std::os::unix::fs::MetadataExt::uid(&meta),
        0,
        "owned by root"
    );
    p
}

fn marker() -> String {
    format!(
        "SPINDLE-ROOT-ONLY-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

fn new_app(c: &Cluster) -> String {
    let (status, v, _) = c.send(
        Method::POST,
        "/ws/v1/cluster/apps/new-application",
        &json!({}),
    );
    assert_eq!(status, 200, "{v}");
    v["application-id"].as_str().expect("id").to_string()
}

fn local_resource(key: &str, path: &Path) -> Value {
    json!({"key": key, "value": {
        "resource": format!("file://{}", path.display()),
        "type": "FILE",
        "visibility": "APPLICATION"}})
}

/// Submits YARN's submission context for a distributed-shell AM running `command` in one
/// worker, with `extra` local resources for the AM.
fn submit(c: &Cluster, command: &str, am_command: &str, extra: Vec<Value>) -> String {
    let id = new_app(c);
    let mut resources = vec![local_resource("spindle", &bin("spindle"))];
    resources.extend(extra);
    let ctx = json!({
        "application-id": id,
        "application-name": "security-files",
        "application-type": "DISTRIBUTEDSHELL",
        "queue": "default",
        "max-app-attempts": 1,
        "am-container-spec": {
            "local-resources": {"entry": resources},
            "environment": {"entry": [
                {"key": "DISTRIBUTEDSHELL_NUM_CONTAINERS", "value": "1"},
                {"key": "DISTRIBUTEDSHELL_CONTAINER_RESOURCES", "value": "memory-mb=256,vcores=1"},
                {"key": "DISTRIBUTEDSHELL_SHELL_COMMAND", "value": command}
            ]},
            "commands": {"command": am_command}
        },
        "resource": {"memory": 256, "vCores": 1}
    });
    let (status, body, _) = c.send(Method::POST, "/ws/v1/cluster/apps", &ctx);
    assert_eq!(status, 202, "{body}");
    id
}

fn get_text(c: &Cluster, url: &str) -> (u16, String) {
    let r = c.http.get(url).send().expect("GET");
    (r.status().as_u16(), r.text().unwrap_or_default())
}

/// Every regular file below `dir`, walked without following a link.
fn regular_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.filter_map(Result::ok) {
        let p = e.path();
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => regular_files(&p, out),
            Ok(m) if m.is_file() => out.push(p),
            _ => {}
        }
    }
}

fn kill_app(c: &Cluster, id: &str) {
    let _ = c.send(
        Method::PUT,
        &format!("/ws/v1/cluster/apps/{id}/state"),
        &json!({"state": "KILLED"}),
    );
    c.wait_app_state(
        id,
        &["KILLED", "FAILED", "FINISHED"],
        Duration::from_secs(30),
    );
}

#[test]
fn a_log_linked_to_a_root_only_file_is_refused_over_http() {
    if spindle_test_support::require::root(
        "a_log_linked_to_a_root_only_file_is_refused_over_http",
        "containers run as nobody only under a root NodeManager",
    )
    .is_none()
    {
        return;
    }
    let c = nobody_cluster();
    let marker = marker();
    let secret = root_only_file(&c, &marker);
    // The worker replaces its own stdout (its log dir, `$LOG_DIRS`, is nobody's) with a link
    // to the root-only file, says so on stderr, and stays up while the test looks. (Not
    // `<LOG_DIR>`: the NM expands that in the AM's environment, to the AM's log dir.)
    let command = format!(
        "ln -sf {} \"${{LOG_DIRS%%,*}}/stdout\" && echo linked-as-$(id -un) >&2; sleep 120",
        secret.display()
    );
    let app = submit(&c, &command, "./spindle distributed-shell-am", vec![]);
    let worker = wait_until(
        "the worker to link its stdout",
        Duration::from_secs(60),
        || {
            let state = c.app(&app)["state"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if ["FAILED", "KILLED", "FINISHED"].contains(&state.as_str()) {
                c.dump_logs();
                panic!("{app} ended early: {}", c.app(&app));
            }
            c.containers_of(&app).into_iter().skip(1).find(|w| {
                let node = w["nodeHttpAddress"].as_str().unwrap_or_default();
                let cid = w["containerId"].as_str().unwrap_or_default();
                c.container_log(node, cid, "stderr")
                    .contains("linked-as-nobody")
            })
        },
    );
    let node = worker["nodeHttpAddress"]
        .as_str()
        .unwrap()
        .trim_start_matches("http://")
        .to_string();
    let cid = worker["containerId"].as_str().unwrap().to_string();

    for path in [
        format!("/ws/v1/node/containerlogs/{cid}/stdout"),
        format!("/ws/v1/node/containers/{cid}/logs/stdout"),
        format!("/ws/v1/node/containerlogs/{cid}/stdout?start=0&end=4096"),
        format!("/ws/v1/node/containerlogs/{cid}/stdout?size=-4096"),
        format!("/node/containerlogs/{cid}/nobody/stdout"),
    ] {
        let (status, body) = get_text(&c, &format!("http://{node}{path}"));
        assert!(!body.contains(&marker), "{path} served the root-only file");
        assert_eq!(status, 403, "{path}: {body}");
        assert!(
            body.contains("'stdout' is a symbolic link"),
            "{path}: {body}"
        );
    }
    let (status, body) = get_text(
        &c,
        &format!("http://{node}/ws/v1/node/containerlogs/{cid}/stdout"),
    );
    let v: Value = serde_json::from_str(&body).expect("a RemoteException");
    assert_eq!(status, 403);
    assert_eq!(
        v["RemoteException"]["exception"], "ForbiddenException",
        "{v}"
    );
    // The listing leaves the link out; the real stderr is still served.
    let (status, list) = get_text(
        &c,
        &format!("http://{node}/ws/v1/node/containers/{cid}/logs"),
    );
    assert_eq!(status, 200, "{list}");
    let list: Value = serde_json::from_str(&list).unwrap();
    let names: Vec<&str> = list["containerLogsInfo"]["containerLogInfo"]
        .as_array()
        .expect("files")
        .iter()
        .filter_map(|f| f["fileName"].as_str())
        .collect();
    assert_eq!(names, vec!["stderr"], "{list}");
    // The NM's own container report does not size the link either.
    let (_, report) = get_text(&c, &format!("http://{node}/ws/v1/node/containers/{cid}"));
    assert!(!report.contains(&marker), "{report}");
    // The refusal is in the NM's log as an audit line.
    let nm_log = c.nms[0].log_text();
    assert!(
        nm_log.contains("OPERATION=Get Container Log")
            && nm_log.contains("TARGET=NMWebServices")
            && nm_log.contains("RESULT=FAILURE"),
        "no audit line for the refusal:\n{nm_log}"
    );
    assert!(!nm_log.contains(&marker));
    kill_app(&c, &app);
    // Nothing the NM reported to the RM carries the marker either.
    let report = c.app(&app).to_string();
    assert!(!report.contains(&marker), "{report}");
}

#[test]
fn a_root_only_local_resource_fails_the_launch_and_reaches_no_container() {
    if spindle_test_support::require::root(
        "a_root_only_local_resource_fails_the_launch_and_reaches_no_container",
        "containers run as nobody only under a root NodeManager",
    )
    .is_none()
    {
        return;
    }
    let c = nobody_cluster();
    let marker = marker();
    let secret = root_only_file(&c, &marker);
    // Were the file localized, the AM container would print it.
    let app = submit(
        &c,
        "true",
        "cat secret.txt; ./spindle distributed-shell-am",
        vec![local_resource("secret.txt", &secret)],
    );
    let a = c.wait_app_state(
        &app,
        &["FAILED", "FINISHED", "KILLED"],
        Duration::from_secs(60),
    );
    assert_eq!(a["state"], "FAILED", "{a}");
    let diag = a["diagnostics"].as_str().unwrap_or_default();
    assert!(
        diag.contains("local resource 'secret.txt'") && diag.contains("is not readable by nobody"),
        "the diagnostic names the resource and the user: {a}"
    );
    assert!(!diag.contains(&marker), "{a}");
    // No container ran with it: nothing on the node's disks (logs, work dirs) holds it.
    let nm_dir = c.dir.path().join("nm0");
    let mut files = Vec::new();
    regular_files(&nm_dir.join("logs"), &mut files);
    regular_files(&nm_dir.join("local"), &mut files);
    for f in &files {
        let text = std::fs::read(f).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&text).contains(&marker),
            "{} holds the root-only file's content",
            f.display()
        );
    }
    for cont in c.containers_of(&app) {
        let node = cont["nodeHttpAddress"].as_str().unwrap_or_default();
        let cid = cont["containerId"].as_str().unwrap_or_default();
        assert!(!c.container_log(node, cid, "stdout").contains(&marker));
    }
    // The control: a world-readable file is localized for nobody and read.
    let public = c.dir.path().join("public.txt");
    std::fs::write(&public, "PUBLIC-CONTENT\n").unwrap();
    std::fs::set_permissions(&public, std::fs::Permissions::from_mode(0o644)).unwrap();
    // nobody must be able to pass through the test's dir to reach it.
    std::fs::set_permissions(c.dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let ok = submit(
        &c,
        "true",
        "cat public.txt && ./spindle distributed-shell-am",
        vec![local_resource("public.txt", &public)],
    );
    let a = c.wait_app_state(
        &ok,
        &["FAILED", "FINISHED", "KILLED"],
        Duration::from_secs(90),
    );
    assert_eq!(a["finalStatus"], "SUCCEEDED", "{a}");
    assert!(
        c.am_stdout(&ok).contains("PUBLIC-CONTENT"),
        "{}",
        c.am_stdout(&ok)
    );
}
