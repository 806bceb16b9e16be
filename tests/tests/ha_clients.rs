//! Everyone follows the active, on the real binaries: a one-member etcd, two
//! ResourceManagers and one NodeManager with fake GPUs that is given both RMs by id (no
//! address of its own). The NM registers with the active; `kill -9` of the active: the
//! standby takes over and the NM registers with it (its heartbeats to the dead RM fail
//! over under `yarn.client.failover-*`, the new active asks it to resync); the CLI given
//! both addresses (the dead one first) answers from the new active, and so does the CLI
//! given only the conf dir's `rm-ids`. The times from the kill are printed. Skipped without
//! etcd (a failure under CI).

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use spindle_system_tests::ha::{Ha, LEASE_MS};
use spindle_system_tests::{fake_gpus, output_text, wait_until};
use spindle_test_support::etcd::present;

const GPU: &str = "yarn.io/gpu";

#[test]
fn a_nodemanager_and_the_cli_follow_the_new_active_after_kill_9() {
    let test = "a_nodemanager_and_the_cli_follow_the_new_active_after_kill_9";
    if !present(test) {
        return;
    }
    let mut ha = Ha::start_with(
        LEASE_MS,
        &[
            ("yarn.resource-types", GPU),
            ("yarn.client.failover-sleep-base-ms", "100"),
            ("yarn.client.failover-sleep-max-ms", "500"),
        ],
    );
    let active = ha.wait_roles(Duration::from_secs(30));
    let standby = 1 - active;
    let gpus = fake_gpus(ha.dir.path(), 2);
    ha.start_nm(&[
        ("yarn.nodemanager.resource-plugins".into(), GPU.into()),
        (
            "yarn.nodemanager.resource-plugins.gpu.path-to-discovery-executables".into(),
            gpus.display().to_string(),
        ),
        ("yarn.client.failover-sleep-base-ms".into(), "100".into()),
        ("yarn.client.failover-sleep-max-ms".into(), "500".into()),
    ]);
    wait_until(
        "the NM to register with the active",
        Duration::from_secs(30),
        || (ha.rm(active).running_nodes() == 1).then_some(()),
    );

    let killed = Instant::now();
    ha.rms[active]
        .as_ref()
        .expect("active")
        .signal(Signal::SIGKILL);
    wait_until(
        "the standby to become ACTIVE",
        Duration::from_secs(30),
        || (ha.ha_state(standby).as_deref() == Some("ACTIVE")).then_some(()),
    );
    let serving = killed.elapsed();
    wait_until(
        "the NM to register with the new active",
        Duration::from_secs(60),
        || (ha.rm(standby).running_nodes() == 1).then_some(()),
    );
    println!(
        "{test}: kill -9 of rm{} to an ACTIVE rm{}: {} ms; to the NM RUNNING on it: {} ms (lease {LEASE_MS} ms)",
        active + 1,
        standby + 1,
        serving.as_millis(),
        killed.elapsed().as_millis()
    );
    let (_, nodes) = ha.rm(standby).get("/ws/v1/cluster/nodes");
    let node = &nodes["nodes"]["node"][0];
    assert_eq!(node["state"], "RUNNING", "{nodes}");
    let log = ha.nms[0].log_text();
    let at_new = format!("rm=http://{}", ha.address(standby));
    assert!(
        log.lines()
            .any(|l| l.contains("registered with the ResourceManager") && l.contains(&at_new)),
        "{log}"
    );

    // The CLI given both addresses, the dead one first, answers from the new active.
    let both = format!("{},{}", ha.address(active), ha.address(standby));
    let out = ha.spindle(&["node", "-list", "--rm-address", &both]);
    assert!(out.status.success(), "{}", output_text(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("RUNNING"), "{text}");
    // ... and given only the conf dir's rm-ids.
    let out = ha.spindle(&["node", "-list"]);
    assert!(out.status.success(), "{}", output_text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("RUNNING"));
}
