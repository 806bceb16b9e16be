//! YARN's LinuxContainerExecutor in non-secure mode, through a real NM: containers run as
//! the configured local user (`nobody`) or, with `limit-users` false, as their submitter
//! within the node's bounds; a refused user fails the start call with the reason. Needs root
//! (to switch users); skips otherwise, and fails under `CI=true`.

mod support;

use std::collections::{BTreeMap, BTreeSet};

use spindle_common::records::node::{ContainerLaunchContext, StartContainerRequest};
use spindle_common::states::ContainerState;
use spindle_nodemanager::runas::{Credentials, RunAs};
use spindle_test_support::require;
use support::*;

fn root_or_skip() -> bool {
    require::root("run_as", "switching container users needs root").is_some()
}

fn request(
    nm: &TestNm,
    rm: &FakeRm,
    id: spindle_common::ids::ContainerId,
    user: &str,
) -> StartContainerRequest {
    StartContainerRequest {
        container_token: rm.token(&nm.ident(id, user)),
        container_launch_context: ContainerLaunchContext {
            commands: vec!["id -u; echo $USER; touch mine".into()],
            environment: BTreeMap::new(),
            local_resources: BTreeMap::new(),
        },
    }
}

#[tokio::test]
async fn limited_users_run_every_container_as_the_local_user() {
    if !root_or_skip() {
        return;
    }
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let mut conf = nm_config(dirs.path(), rm.addr, false);
    let nobody = Credentials::lookup("nobody").expect("nobody");
    conf.run_as = RunAs::LocalUser(nobody.clone());
    let mut nm = TestNm::start_with(dirs.path(), conf).await;
    rm.wait_registered(1).await;

    let id = cid(61, 1);
    let resp = nm
        .start_containers(vec![request(&nm, &rm, id, "alice")])
        .await;
    assert_eq!(resp.successfully_started_containers, vec![id], "{resp:?}");
    let done = rm.wait_state(&id, ContainerState::COMPLETE).await;
    assert_eq!(done.status.exit_status, 0, "{done:?}");
    let out = std::fs::read_to_string(nm.log_dir(&id).join("stdout")).unwrap();
    // The uid is nobody's; USER still names the submitter, as in YARN.
    assert_eq!(out, format!("{}\nalice\n", nobody.uid));
    nm.stop().await.unwrap();
}

#[tokio::test]
async fn submitters_run_as_themselves_within_the_nodes_bounds() {
    if !root_or_skip() {
        return;
    }
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let mut conf = nm_config(dirs.path(), rm.addr, false);
    conf.run_as = RunAs::Submitter {
        min_uid: 1000,
        banned: BTreeSet::from(["bin".to_string()]),
    };
    let mut nm = TestNm::start_with(dirs.path(), conf).await;
    rm.wait_registered(1).await;

    let (ok, low, unknown, banned) = (cid(62, 1), cid(62, 2), cid(62, 3), cid(62, 4));
    let resp = nm
        .start_containers(vec![
            request(&nm, &rm, ok, "nobody"),
            request(&nm, &rm, low, "root"),
            request(&nm, &rm, unknown, "no-such-user-spindle"),
            request(&nm, &rm, banned, "bin"),
        ])
        .await;
    assert_eq!(resp.successfully_started_containers, vec![ok], "{resp:?}");
    let why = |id: spindle_common::ids::ContainerId| {
        resp.failed_requests
            .iter()
            .find(|f| f.container_id == id.to_string())
            .map(|f| f.message.clone())
            .unwrap_or_default()
    };
    assert!(why(low).contains("below the minimum 1000"), "{}", why(low));
    assert!(why(unknown).contains("no local user"), "{}", why(unknown));
    assert!(why(banned).contains("banned"), "{}", why(banned));
    let done = rm.wait_state(&ok, ContainerState::COMPLETE).await;
    assert_eq!(done.status.exit_status, 0, "{done:?}");
    let nobody = Credentials::lookup("nobody").expect("nobody");
    let out = std::fs::read_to_string(nm.log_dir(&ok).join("stdout")).unwrap();
    assert_eq!(out, format!("{}\nnobody\n", nobody.uid));
    nm.stop().await.unwrap();
}

/// A root-only file (0600, owned by root, under a directory `nobody` may pass through) and a
/// world-readable one, for the tests below.
fn secret_and_public(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711)).unwrap();
    let secret = dir.join("secret.txt");
    std::fs::write(&secret, "ROOT-ONLY-MARKER").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let public = dir.join("public.txt");
    std::fs::write(&public, "PUBLIC").unwrap();
    std::fs::set_permissions(&public, std::fs::Permissions::from_mode(0o644)).unwrap();
    (secret, public)
}

fn with_resource(
    nm: &TestNm,
    rm: &FakeRm,
    id: spindle_common::ids::ContainerId,
    command: &str,
    key: &str,
    path: &std::path::Path,
) -> StartContainerRequest {
    use spindle_common::records::cluster::LocalResourceInfo;
    StartContainerRequest {
        container_token: rm.token(&nm.ident(id, "alice")),
        container_launch_context: ContainerLaunchContext {
            commands: vec![command.into()],
            environment: BTreeMap::new(),
            local_resources: BTreeMap::from([(
                key.to_string(),
                LocalResourceInfo {
                    resource: format!("file://{}", path.display()),
                    kind: "FILE".into(),
                    visibility: "APPLICATION".into(),
                    size: 0,
                    timestamp: 0,
                },
            )]),
        },
    }
}

/// Local resources are read as the container's user: a root-only file named as a resource
/// of a container run as `nobody` fails its launch with a diagnostic naming the resource
/// and the user, and nothing of it reaches the container; a world-readable one is
/// localized and read.
#[tokio::test]
async fn local_resources_are_read_as_the_containers_user() {
    if !root_or_skip() {
        return;
    }
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let (secret, public) = secret_and_public(dirs.path());
    let mut conf = nm_config(dirs.path(), rm.addr, false);
    conf.run_as = RunAs::LocalUser(Credentials::lookup("nobody").expect("nobody"));
    let mut nm = TestNm::start_with(dirs.path(), conf).await;
    rm.wait_registered(1).await;

    let (refused, fine) = (cid(63, 1), cid(63, 2));
    let resp = nm
        .start_containers(vec![
            with_resource(&nm, &rm, refused, "cat secret", "secret", &secret),
            with_resource(&nm, &rm, fine, "cat public", "public", &public),
        ])
        .await;
    assert!(resp.failed_requests.is_empty(), "{resp:?}");
    let done = rm.wait_state(&refused, ContainerState::COMPLETE).await;
    let diag = &done.status.diagnostics;
    assert!(
        diag.contains("local resource 'secret'") && diag.contains("is not readable by nobody"),
        "{diag}"
    );
    assert!(!diag.contains("ROOT-ONLY-MARKER"), "{diag}");
    assert!(!nm.work_dir("alice", &refused).join("secret").exists());
    let out = std::fs::read_to_string(nm.log_dir(&refused).join("stdout")).unwrap_or_default();
    assert!(!out.contains("ROOT-ONLY-MARKER"), "{out}");

    let done = rm.wait_state(&fine, ContainerState::COMPLETE).await;
    assert_eq!(done.status.exit_status, 0, "{done:?}");
    let out = std::fs::read_to_string(nm.log_dir(&fine).join("stdout")).unwrap();
    assert_eq!(out, "PUBLIC");
    nm.stop().await.unwrap();
}

/// A container run as `nobody` that replaces its stdout and stderr with links to a root-only
/// file: the NM's log endpoints refuse them (403 naming the file), the listing leaves them
/// out, and the exit diagnostic (the stderr tail) does not follow the link either.
#[tokio::test]
async fn a_log_replaced_by_a_link_is_not_served() {
    if !root_or_skip() {
        return;
    }
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let (secret, _) = secret_and_public(dirs.path());
    let mut conf = nm_config(dirs.path(), rm.addr, false);
    conf.run_as = RunAs::LocalUser(Credentials::lookup("nobody").expect("nobody"));
    let mut nm = TestNm::start_with(dirs.path(), conf).await;
    rm.wait_registered(1).await;

    let id = cid(64, 1);
    let s = secret.display();
    let resp = nm
        .start_containers(vec![StartContainerRequest {
            container_token: rm.token(&nm.ident(id, "alice")),
            container_launch_context: ContainerLaunchContext {
                commands: vec![format!(
                    "echo kept > <LOG_DIR>/own.log; ln -sf {s} <LOG_DIR>/stdout; \
                     ln -sf {s} <LOG_DIR>/stderr; ln -sf {s} .exitcode; exit 3"
                )],
                environment: BTreeMap::new(),
                local_resources: BTreeMap::new(),
            },
        }])
        .await;
    assert_eq!(resp.successfully_started_containers, vec![id], "{resp:?}");
    let done = rm.wait_state(&id, ContainerState::COMPLETE).await;
    assert_eq!(done.status.exit_status, 3, "{done:?}");
    assert!(
        !done.status.diagnostics.contains("ROOT-ONLY-MARKER"),
        "{done:?}"
    );
    assert!(std::fs::symlink_metadata(nm.log_dir(&id).join("stdout"))
        .unwrap()
        .file_type()
        .is_symlink());

    for path in [
        format!("/ws/v1/node/containerlogs/{id}/stdout"),
        format!("/ws/v1/node/containers/{id}/logs/stderr"),
        format!("/ws/v1/node/containerlogs/{id}/stdout?start=0&end=100"),
        format!("/node/containerlogs/{id}/alice/stdout"),
    ] {
        let (status, body) = nm.get(&path).await;
        assert_eq!(status, 403, "{path}: {body}");
        assert!(!body.contains("ROOT-ONLY-MARKER"), "{path}: {body}");
        assert!(body.contains("is a symbolic link"), "{path}: {body}");
        if path.starts_with("/ws/") {
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert_eq!(
                v["RemoteException"]["exception"], "ForbiddenException",
                "{body}"
            );
        }
    }
    let (status, list) = nm
        .get_json(&format!("/ws/v1/node/containers/{id}/logs"))
        .await;
    assert_eq!(status, 200);
    let names: Vec<&str> = list["containerLogsInfo"]["containerLogInfo"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["fileName"].as_str())
        .collect();
    assert_eq!(names, vec!["own.log"], "{list}");
    let (status, body) = nm
        .get(&format!("/ws/v1/node/containerlogs/{id}/own.log"))
        .await;
    assert_eq!((status, body.as_str()), (200, "kept\n"));
    nm.stop().await.unwrap();
}

/// Every container of `limit-users` runs as `nobody`, and an application's local dir is
/// `nobody`'s: a container may put a link where a later container's work dir will be. The NM
/// does not localize through it (it makes the work dir anew) and nothing lands where the
/// link pointed.
#[tokio::test]
async fn a_link_planted_at_a_work_dir_is_not_written_through() {
    if !root_or_skip() {
        return;
    }
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let (_, public) = secret_and_public(dirs.path());
    let mut conf = nm_config(dirs.path(), rm.addr, false);
    conf.run_as = RunAs::LocalUser(Credentials::lookup("nobody").expect("nobody"));
    let mut nm = TestNm::start_with(dirs.path(), conf).await;
    rm.wait_registered(1).await;

    let id = cid(65, 2);
    let outside = dirs.path().join("root-owned");
    std::fs::create_dir_all(&outside).unwrap();
    let work = nm.work_dir("alice", &id);
    std::fs::create_dir_all(work.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&outside, &work).unwrap();

    let resp = nm
        .start_containers(vec![with_resource(
            &nm,
            &rm,
            id,
            "cat public",
            "public",
            &public,
        )])
        .await;
    assert_eq!(resp.successfully_started_containers, vec![id], "{resp:?}");
    let done = rm.wait_state(&id, ContainerState::COMPLETE).await;
    assert_eq!(done.status.exit_status, 0, "{done:?}");
    assert_eq!(
        std::fs::read_to_string(nm.log_dir(&id).join("stdout")).unwrap(),
        "PUBLIC"
    );
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        0,
        "nothing was written through the planted link"
    );
    nm.stop().await.unwrap();
}
