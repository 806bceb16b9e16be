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
