//! The node's own health checks through a real NM: the health script's ERROR lines and the
//! disk checker turn the heartbeat's `healthy` false with the reason (and the NM's REST says
//! so); the node turns healthy again when the checks pass.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use support::*;

fn health_script(dir: &Path) -> std::path::PathBuf {
    let p = dir.join("health.sh");
    let flag = dir.join("bad");
    std::fs::write(
        &p,
        format!(
            "#!/bin/sh\nif [ -e {} ]; then echo 'checking'; echo 'ERROR disk sda failed'; else echo OK; fi\n",
            flag.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// Waits for a heartbeat whose health is `healthy`; answers its report.
async fn wait_health(rm: &FakeRm, healthy: bool) -> String {
    wait_until(&format!("a heartbeat with healthy={healthy}"), || {
        let st = rm.state.lock().unwrap();
        st.heartbeats
            .last()
            .filter(|h| h.node_status.healthy == healthy)
            .map(|h| h.node_status.health_report.clone())
    })
    .await
}

#[tokio::test]
async fn the_health_script_takes_the_node_out_and_back() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let mut conf = nm_config(dirs.path(), rm.addr, false);
    conf.health.script = Some(health_script(dirs.path()));
    conf.health.script_interval = Duration::from_millis(100);
    conf.health.disks.enabled = false;
    let mut nm = TestNm::start_with(dirs.path(), conf).await;
    rm.wait_registered(1).await;
    assert_eq!(wait_health(&rm, true).await, "");

    std::fs::write(dirs.path().join("bad"), "").unwrap();
    let report = wait_health(&rm, false).await;
    assert_eq!(report, "ERROR disk sda failed");
    let (_, info) = nm.get_json("/ws/v1/node/info").await;
    assert_eq!(info["nodeInfo"]["nodeHealthy"], false, "{info}");
    assert_eq!(info["nodeInfo"]["healthReport"], "ERROR disk sda failed");

    std::fs::remove_file(dirs.path().join("bad")).unwrap();
    assert_eq!(wait_health(&rm, true).await, "");
    let (_, info) = nm.get_json("/ws/v1/node/info").await;
    assert_eq!(info["nodeInfo"]["nodeHealthy"], true, "{info}");
    nm.stop().await.unwrap();
}

#[tokio::test]
async fn full_disks_make_the_node_unhealthy() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let mut conf = nm_config(dirs.path(), rm.addr, false);
    // Every file system is fuller than 0 %.
    conf.health.disks.max_utilization_percent = 0.0;
    conf.health.disks.interval = Duration::from_millis(100);
    let mut nm = TestNm::start_with(dirs.path(), conf).await;
    rm.wait_registered(1).await;
    let report = wait_health(&rm, false).await;
    assert!(report.contains("1/1 local-dirs are bad"), "{report}");
    assert!(report.contains("1/1 log-dirs are bad"), "{report}");
    assert!(report.contains("above the threshold of 0.0%"), "{report}");
    nm.stop().await.unwrap();
}
