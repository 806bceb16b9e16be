//! End-to-end behaviour of an in-process NM against a fake RM: launch, environment, tokens,
//! stop, RM cleanup, RM SHUTDOWN, registration retries, and recovery.

mod support;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{kill, killpg};
use nix::unistd::Pid;
use spindle_common::records::cluster::LocalResourceInfo;
use spindle_common::records::node::{ContainerLaunchContext, StartContainerRequest};
use spindle_common::records::tracker::NodeAction;
use spindle_common::states::ContainerState;
use spindle_common::time::now_ms;
use spindle_common::token::{issue_container_token, ContainerKey};
use support::*;

#[tokio::test]
async fn a_container_runs_and_its_exit_code_reaches_the_rm() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let mut nm = TestNm::start(dirs.path(), rm.addr, false).await;
    rm.wait_registered(1).await;

    let id = cid(1, 1);
    nm.run_container(&rm, id, "alice", "echo hello; echo err >&2; exit 3")
        .await;
    let done = rm.wait_state(&id, ContainerState::COMPLETE).await;
    assert_eq!(done.status.exit_status, 3);
    assert!(done.status.diagnostics.contains("exit code 3"), "{done:?}");
    assert!(
        done.status.diagnostics.contains("err"),
        "stderr tail: {done:?}"
    );
    assert_eq!(done.resource.memory, 512);

    let logs = nm.log_dir(&id);
    assert_eq!(
        std::fs::read_to_string(logs.join("stdout")).unwrap(),
        "hello\n"
    );
    assert_eq!(
        std::fs::read_to_string(logs.join("stderr")).unwrap(),
        "err\n"
    );

    let (_, c) = nm.get_json(&format!("/ws/v1/node/containers/{id}")).await;
    assert_eq!(c["container"]["state"], "EXITED_WITH_FAILURE");
    assert_eq!(c["container"]["exitCode"], 3);
    let (_, metrics) = nm.get("/metrics").await;
    assert!(
        metrics.contains("spindle_nm_containers_launched_total 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("spindle_nm_containers_failed_total 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("spindle_nm_containers_running 0\n"),
        "{metrics}"
    );
    nm.stop().await.unwrap();
}

#[tokio::test]
async fn containers_get_yarns_environment_and_local_resources() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let mut nm = TestNm::start(dirs.path(), rm.addr, false).await;
    rm.wait_registered(1).await;

    let tool = dirs.path().join("tool.sh");
    std::fs::write(&tool, "#!/bin/bash\necho tool-ran\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let id = cid(2, 1);
    let resp = nm
        .start_containers(vec![StartContainerRequest {
            container_token: rm.token(&nm.ident(id, "alice")),
            container_launch_context: ContainerLaunchContext {
                commands: vec!["env > envfile;".into(), "./tool.sh > toolout".into()],
                environment: [("FOO".to_string(), "bar baz".to_string())].into(),
                local_resources: [(
                    "tool.sh".to_string(),
                    LocalResourceInfo {
                        resource: format!("file://{}", tool.display()),
                        kind: "FILE".into(),
                        visibility: "APPLICATION".into(),
                        ..Default::default()
                    },
                )]
                .into(),
            },
        }])
        .await;
    assert_eq!(resp.successfully_started_containers, vec![id], "{resp:?}");
    let done = rm.wait_state(&id, ContainerState::COMPLETE).await;
    assert_eq!(done.status.exit_status, 0, "{done:?}");

    let work = nm.work_dir("alice", &id);
    let env: BTreeMap<String, String> = std::fs::read_to_string(work.join("envfile"))
        .unwrap()
        .lines()
        .filter_map(|l| {
            l.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect();
    let port = nm.addr.port().to_string();
    let app_dir = dirs
        .path()
        .join("local/usercache/alice/appcache")
        .join(id.application_id().to_string());
    assert_eq!(env["CONTAINER_ID"], id.to_string());
    assert_eq!(env["NM_HOST"], "127.0.0.1");
    assert_eq!(env["NM_PORT"], port);
    assert_eq!(env["NM_HTTP_PORT"], port);
    assert_eq!(env["LOCAL_DIRS"], app_dir.display().to_string());
    assert_eq!(env["LOG_DIRS"], nm.log_dir(&id).display().to_string());
    assert_eq!(env["USER"], "alice");
    assert_eq!(env["LOGNAME"], "alice");
    assert_eq!(env["PWD"], work.display().to_string());
    assert!(env.contains_key("HOME"));
    assert_eq!(
        env["SPINDLE_CONF_DIR"],
        dirs.path().join("conf").display().to_string()
    );
    assert_eq!(env["FOO"], "bar baz");
    assert!(env.contains_key("PATH"), "PATH is whitelisted");

    let copied = work.join("tool.sh");
    assert_eq!(
        std::fs::metadata(&copied).unwrap().permissions().mode() & 0o111,
        0o111
    );
    assert_eq!(
        std::fs::read_to_string(work.join("toolout")).unwrap(),
        "tool-ran\n"
    );
    nm.stop().await.unwrap();
}

#[tokio::test]
async fn a_missing_local_resource_fails_localization() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let mut nm = TestNm::start(dirs.path(), rm.addr, false).await;
    rm.wait_registered(1).await;
    let (a, b) = (cid(3, 1), cid(3, 2));
    let res = |url: &str| {
        [(
            "x".to_string(),
            LocalResourceInfo {
                resource: url.to_string(),
                ..Default::default()
            },
        )]
        .into()
    };
    let resp = nm
        .start_containers(vec![
            StartContainerRequest {
                container_token: rm.token(&nm.ident(a, "alice")),
                container_launch_context: ContainerLaunchContext {
                    commands: vec!["true".into()],
                    local_resources: res("/no/such/file"),
                    ..Default::default()
                },
            },
            StartContainerRequest {
                container_token: rm.token(&nm.ident(b, "alice")),
                container_launch_context: ContainerLaunchContext {
                    commands: vec!["true".into()],
                    local_resources: res("hdfs://nn:8020/x"),
                    ..Default::default()
                },
            },
        ])
        .await;
    assert_eq!(resp.successfully_started_containers.len(), 2);
    for (id, want) in [(a, "/no/such/file"), (b, "not supported")] {
        let done = rm.wait_state(&id, ContainerState::COMPLETE).await;
        assert_eq!(done.status.exit_status, -1000);
        assert!(done.status.diagnostics.contains(want), "{done:?}");
        let (_, c) = nm.get_json(&format!("/ws/v1/node/containers/{id}")).await;
        assert_eq!(c["container"]["state"], "LOCALIZATION_FAILED");
    }
    // A name that is not a plain relative path is refused by the start call itself.
    for (i, key) in ["../escape", "", "/etc/x"].into_iter().enumerate() {
        let id = cid(3, 10 + i as u64);
        let resp = nm
            .start_containers(vec![StartContainerRequest {
                container_token: rm.token(&nm.ident(id, "alice")),
                container_launch_context: ContainerLaunchContext {
                    commands: vec!["true".into()],
                    local_resources: [(
                        key.to_string(),
                        LocalResourceInfo {
                            resource: "/bin/true".into(),
                            ..Default::default()
                        },
                    )]
                    .into(),
                    ..Default::default()
                },
            }])
            .await;
        assert!(
            resp.successfully_started_containers.is_empty(),
            "{key}: {resp:?}"
        );
        assert!(
            resp.failed_requests[0]
                .message
                .contains("must be a relative path"),
            "{key}: {resp:?}"
        );
    }
    nm.stop().await.unwrap();
}

#[tokio::test]
async fn bad_tokens_and_duplicates_are_refused() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let mut nm = TestNm::start(dirs.path(), rm.addr, false).await;
    rm.wait_registered(1).await;

    let req = |token: String| StartContainerRequest {
        container_token: token,
        container_launch_context: ContainerLaunchContext {
            commands: vec!["sleep 0.2".into()],
            ..Default::default()
        },
    };
    // Another key under the RM's key id: the signature does not verify.
    let forged = issue_container_token(
        &ContainerKey::generate(rm.key.id()).unwrap(),
        &nm.ident(cid(4, 1), "u"),
    );
    let mut other = nm.ident(cid(4, 2), "u");
    other.node_id.port = other.node_id.port.wrapping_add(1);
    let mut expired = nm.ident(cid(4, 3), "u");
    expired.expiry_time_ms = now_ms() - 1;
    let good = nm.ident(cid(4, 4), "u");
    let resp = nm
        .start_containers(vec![
            req(forged),
            req(rm.token(&other)),
            req(rm.token(&expired)),
            req("not a token".into()),
            req(rm.token(&good)),
            req(rm.token(&good)),
        ])
        .await;
    assert_eq!(resp.successfully_started_containers, vec![cid(4, 4)]);
    let f = &resp.failed_requests;
    assert_eq!(f.len(), 5, "{f:?}");
    assert!(f.iter().all(|r| r.exception == "InvalidToken"), "{f:?}");
    assert_eq!(f[0].container_id, cid(4, 1).to_string());
    assert!(f[0].message.contains("signature"), "{f:?}");
    assert!(f[1].message.contains("is for node"), "{f:?}");
    assert!(f[2].message.contains("expired"), "{f:?}");
    assert!(f[3].message.contains("malformed"), "{f:?}");
    assert!(f[4].message.contains("already known"), "{f:?}");
    // Refused containers never ran.
    let (_, c) = nm
        .get(&format!("/ws/v1/node/containers/{}", cid(4, 1)))
        .await;
    assert!(c.contains("NotFoundException"), "{c}");
    nm.stop().await.unwrap();
}

#[tokio::test]
async fn starts_before_registration_are_refused_as_not_ready() {
    // An RM address nobody listens on: the NM never registers.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = dead.local_addr().unwrap();
    drop(dead);
    let dirs = tempfile::tempdir().unwrap();
    let mut nm = TestNm::start(dirs.path(), addr, false).await;
    let secret = ContainerKey::generate(1).unwrap();
    let resp = nm
        .start_containers(vec![StartContainerRequest {
            container_token: issue_container_token(&secret, &nm.ident(cid(5, 1), "u")),
            container_launch_context: ContainerLaunchContext::default(),
        }])
        .await;
    assert_eq!(resp.failed_requests.len(), 1);
    assert_eq!(resp.failed_requests[0].exception, "NMNotYetReadyException");
    assert_eq!(resp.failed_requests[0].container_id, cid(5, 1).to_string());
    nm.stop().await.unwrap();
}

#[tokio::test]
async fn registration_is_retried_until_the_rm_answers() {
    let spot = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = spot.local_addr().unwrap();
    drop(spot);
    let dirs = tempfile::tempdir().unwrap();
    let mut nm = TestNm::start(dirs.path(), addr, false).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let rm = FakeRm::start_on(tokio::net::TcpListener::bind(addr).await.unwrap());
    rm.wait_registered(1).await;
    wait_until("a heartbeat", || {
        (!rm.state.lock().unwrap().heartbeats.is_empty()).then_some(())
    })
    .await;
    nm.stop().await.unwrap();
}

#[tokio::test]
async fn an_am_stop_kills_the_process_group_with_minus_105() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let mut nm = TestNm::start(dirs.path(), rm.addr, false).await;
    rm.wait_registered(1).await;

    let (a, b) = (cid(6, 1), cid(6, 2));
    // `a` execs sleep; `b` leaves a child that ignores SIGTERM, so only SIGKILL ends it.
    nm.run_container(
        &rm,
        a,
        "alice",
        "read -r _ _ _ _ g _ < /proc/$$/stat; echo $g > pgid; exec sleep 100",
    )
    .await;
    nm.run_container(
        &rm,
        b,
        "alice",
        "read -r _ _ _ _ g _ < /proc/$$/stat; echo $g > pgid; (trap '' TERM; exec sleep 100) & echo $! > child; wait",
    )
    .await;
    let pgid_a: i32 = read_when_written(&nm.work_dir("alice", &a).join("pgid"))
        .await
        .trim()
        .parse()
        .unwrap();
    let pgid_b: i32 = read_when_written(&nm.work_dir("alice", &b).join("pgid"))
        .await
        .trim()
        .parse()
        .unwrap();
    read_when_written(&nm.work_dir("alice", &b).join("child")).await;
    let own_pgid = nix::unistd::getpgrp().as_raw();
    assert_ne!(
        pgid_a, own_pgid,
        "container must have its own process group"
    );
    rm.wait_state(&a, ContainerState::RUNNING).await;

    let resp = nm.stop_containers(vec![a, b, cid(6, 99)]).await;
    assert_eq!(resp.successfully_stopped_containers, vec![a, b]);
    assert_eq!(resp.failed_requests.len(), 1);
    assert_eq!(resp.failed_requests[0].container_id, cid(6, 99).to_string());

    for (id, pgid) in [(a, pgid_a), (b, pgid_b)] {
        let done = rm.wait_state(&id, ContainerState::COMPLETE).await;
        assert_eq!(done.status.exit_status, -105, "{done:?}");
        assert!(
            done.status.diagnostics.contains("ApplicationMaster"),
            "{done:?}"
        );
        // The group leader has been reaped by the NM.
        assert_eq!(kill(Pid::from_raw(pgid), None), Err(Errno::ESRCH));
        wait_until("the process group to be gone", || {
            (!group_has_live_members(pgid)).then_some(())
        })
        .await;
    }
    // `a` had no stragglers, so its whole group is gone.
    assert_eq!(killpg(Pid::from_raw(pgid_a), None), Err(Errno::ESRCH));
    let (_, c) = nm.get_json(&format!("/ws/v1/node/containers/{a}")).await;
    assert_eq!(c["container"]["state"], "CONTAINER_CLEANEDUP_AFTER_KILL");
    assert_eq!(c["container"]["exitCode"], -105);
    let (_, metrics) = nm.get("/metrics").await;
    assert!(
        metrics.contains("spindle_nm_containers_killed_total 2\n"),
        "{metrics}"
    );
    nm.stop().await.unwrap();
}

#[tokio::test]
async fn rm_cleanup_gives_minus_106_and_finishes_the_app() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let mut nm = TestNm::start(dirs.path(), rm.addr, false).await;
    rm.wait_registered(1).await;

    let (a, b) = (cid(7, 1), cid(8, 1));
    nm.run_container(&rm, a, "alice", "sleep 100").await;
    nm.run_container(&rm, b, "alice", "sleep 100").await;
    rm.wait_state(&a, ContainerState::RUNNING).await;
    rm.wait_state(&b, ContainerState::RUNNING).await;
    rm.state.lock().unwrap().containers_to_cleanup.push(a);
    let done = rm.wait_state(&a, ContainerState::COMPLETE).await;
    assert_eq!(done.status.exit_status, -106, "{done:?}");

    let app_b = b.application_id();
    let app_dir = dirs
        .path()
        .join("local/usercache/alice/appcache")
        .join(app_b.to_string());
    assert!(app_dir.is_dir());
    rm.state.lock().unwrap().applications_to_cleanup.push(app_b);
    let done = rm.wait_state(&b, ContainerState::COMPLETE).await;
    assert_eq!(done.status.exit_status, -106, "{done:?}");
    let (_, app) = nm.get_json(&format!("/ws/v1/node/apps/{app_b}")).await;
    assert_eq!(app["app"]["state"], "FINISHED");
    wait_until("the finished app's local dir to be deleted", || {
        (!app_dir.exists()).then_some(())
    })
    .await;
    // Its logs stay.
    assert!(nm.log_dir(&b).join("stdout").exists());
    nm.stop().await.unwrap();
}

#[tokio::test]
async fn completed_containers_are_reported_until_the_rm_acknowledges_them() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let mut nm = TestNm::start(dirs.path(), rm.addr, false).await;
    rm.wait_registered(1).await;
    rm.state.lock().unwrap().ack_completed = true;
    let id = cid(9, 1);
    nm.run_container(&rm, id, "bob", "true").await;
    rm.wait_state(&id, ContainerState::COMPLETE).await;
    // After the acknowledgement the container is DONE and no longer reported.
    wait_until("the container to be DONE", || {
        let st = rm.state.lock().unwrap();
        st.heartbeats
            .last()
            .filter(|h| h.node_status.containers_statuses.is_empty())
            .map(|_| ())
    })
    .await;
    let (_, c) = nm.get_json(&format!("/ws/v1/node/containers/{id}")).await;
    assert_eq!(c["container"]["state"], "DONE");
    assert_eq!(c["container"]["exitCode"], 0);
    nm.stop().await.unwrap();
}

#[tokio::test]
async fn an_rm_shutdown_stops_the_nm_and_its_containers() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let mut nm = TestNm::start(dirs.path(), rm.addr, false).await;
    rm.wait_registered(1).await;
    let id = cid(10, 1);
    nm.run_container(
        &rm,
        id,
        "alice",
        "read -r _ _ _ _ g _ < /proc/$$/stat; echo $g > pgid; exec sleep 100",
    )
    .await;
    let pgid: i32 = read_when_written(&nm.work_dir("alice", &id).join("pgid"))
        .await
        .trim()
        .parse()
        .unwrap();
    rm.state.lock().unwrap().next_action = Some(NodeAction::SHUTDOWN);
    nm.join().await.unwrap();
    assert_eq!(killpg(Pid::from_raw(pgid), None), Err(Errno::ESRCH));
}

#[tokio::test]
async fn a_restarted_nm_re_adopts_running_containers_and_reports_dead_ones() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let mut nm1 = TestNm::start(dirs.path(), rm.addr, true).await;
    rm.wait_registered(1).await;

    let (long, short) = (cid(11, 1), cid(11, 2));
    nm1.run_container(
        &rm,
        long,
        "alice",
        "read -r _ _ _ _ g _ < /proc/$$/stat; echo $g > pgid; exec sleep 100",
    )
    .await;
    // Exits with 7 once the test says so, which will be while no NM is watching.
    nm1.run_container(
        &rm,
        short,
        "alice",
        "echo started > started; while [ ! -f go ]; do sleep 0.05; done; exit 7",
    )
    .await;
    let pgid: i32 = read_when_written(&nm1.work_dir("alice", &long).join("pgid"))
        .await
        .trim()
        .parse()
        .unwrap();
    read_when_written(&nm1.work_dir("alice", &short).join("started")).await;
    rm.wait_state(&long, ContainerState::RUNNING).await;

    // Stop the NM: with recovery enabled its containers keep running.
    nm1.stop().await.unwrap();
    assert_eq!(
        kill(Pid::from_raw(pgid), None),
        Ok(()),
        "container survived the NM"
    );
    let short_dir = nm1.work_dir("alice", &short);
    std::fs::write(short_dir.join("go"), "").unwrap();
    wait_until("the short container to exit", || {
        std::fs::read_to_string(short_dir.join(".exitcode")).ok()
    })
    .await;

    let mut nm2 = TestNm::start(dirs.path(), rm.addr, true).await;
    rm.wait_registered(2).await;
    let reg = rm.state.lock().unwrap().registrations[1].clone();
    let reported = |id| {
        reg.container_statuses
            .iter()
            .find(|r| r.status.container_id == id)
            .cloned()
            .unwrap_or_else(|| panic!("{id} not in {reg:?}"))
    };
    assert_eq!(reported(long).status.state, ContainerState::RUNNING);
    assert_eq!(reported(short).status.state, ContainerState::COMPLETE);
    assert_eq!(reported(short).status.exit_status, 7);
    assert_eq!(reported(long).resource.memory, 512);

    // The re-adopted container can be stopped through the new NM.
    let resp = nm2.stop_containers(vec![long]).await;
    assert_eq!(resp.successfully_stopped_containers, vec![long]);
    let done = rm.wait_state(&long, ContainerState::COMPLETE).await;
    assert_eq!(done.status.exit_status, -105, "{done:?}");
    wait_until("the re-adopted group to be gone", || {
        (!group_has_live_members(pgid)).then_some(())
    })
    .await;
    kill_group(pgid);
    nm2.stop().await.unwrap();
}

/// `yarn.nodemanager.log.retain-seconds`: an ended application's logs go once nothing in
/// them changed for that long; a running application's logs stay however old.
#[tokio::test]
async fn old_logs_of_ended_applications_are_deleted() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let mut conf = nm_config(dirs.path(), rm.addr, false);
    conf.log_retain = Some(Duration::from_secs(1));
    let mut nm = TestNm::start_with(dirs.path(), conf).await;
    rm.wait_registered(1).await;

    let (ended, running) = (cid(9, 1), cid(10, 1));
    nm.run_container(&rm, ended, "alice", "echo bye").await;
    nm.run_container(&rm, running, "alice", "sleep 100").await;
    rm.wait_state(&ended, ContainerState::COMPLETE).await;
    rm.wait_state(&running, ContainerState::RUNNING).await;
    rm.state
        .lock()
        .unwrap()
        .applications_to_cleanup
        .push(ended.application_id());
    let app_logs = nm.log_dir(&ended).parent().unwrap().to_path_buf();
    assert!(app_logs.is_dir());
    wait_until("the ended app's logs to be deleted", || {
        (!app_logs.exists()).then_some(())
    })
    .await;
    // The running one is older than the retention by now, and stays.
    assert!(nm.log_dir(&running).join("stdout").exists());
    nm.stop().await.unwrap();
}

/// The NM never runs more than its capacity (4 vcores here, 1 per container): a fifth start
/// is refused with `NODE_FULL_EXCEPTION`, naming what the others hold; once the NM is
/// killing one of them (the RM stopped it, and may have handed its room on), the same start
/// is taken.
#[tokio::test]
async fn a_start_beyond_the_nodes_capacity_is_refused_until_a_container_is_being_killed() {
    use spindle_common::records::node::NODE_FULL_EXCEPTION;
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let mut nm = TestNm::start(dirs.path(), rm.addr, false).await;
    rm.wait_registered(1).await;
    let running: Vec<spindle_common::ids::ContainerId> = (1..=4).map(|i| cid(9, i)).collect();
    for id in &running {
        nm.run_container(&rm, *id, "alice", "sleep 60").await;
    }
    let fifth = cid(9, 5);
    let start = || StartContainerRequest {
        container_token: rm.token(&nm.ident(fifth, "alice")),
        container_launch_context: ContainerLaunchContext {
            commands: vec!["true".into()],
            environment: BTreeMap::new(),
            local_resources: BTreeMap::new(),
        },
    };
    let resp = nm.start_containers(vec![start()]).await;
    assert!(resp.successfully_started_containers.is_empty(), "{resp:?}");
    let f = &resp.failed_requests[0];
    assert_eq!(f.exception, NODE_FULL_EXCEPTION, "{f:?}");
    assert!(f.message.contains("does not fit"), "{}", f.message);
    let (_, c) = nm
        .get_json(&format!("/ws/v1/node/containers/{fifth}"))
        .await;
    assert!(
        c.get("container").is_none(),
        "a refused start is not kept: {c}"
    );

    let resp = nm.stop_containers(vec![running[0]]).await;
    assert!(resp.failed_requests.is_empty(), "{resp:?}");
    let resp = nm.start_containers(vec![start()]).await;
    assert_eq!(
        resp.successfully_started_containers,
        vec![fifth],
        "{resp:?}"
    );
    nm.stop_containers(running[1..].to_vec()).await;
    nm.stop().await.unwrap();
}
