//! Shipped files and the web UI across a failover, on the real binaries: a one-member etcd
//! and two ResourceManagers. The standby's `/ui` sends the browser to the active (a 307,
//! once it has seen who leads; a 503 with `Retry-After` before). A
//! distributed shell shipping a file through the RM's blob store is submitted with
//! `--detach` while no NodeManager runs (so nothing has fetched the file yet): the upload is
//! on the standby's disk before the client was answered; `kill -9` of the active; a
//! NodeManager given both RMs then starts, the new active launches the AM and the worker,
//! and the worker reads the file the new active serves. Skipped without etcd (a failure
//! under CI).

use std::time::Duration;

use nix::sys::signal::Signal;
use sha2::{Digest as _, Sha256};
use spindle_system_tests::ha::Ha;
use spindle_system_tests::{app_id_in, output_text, wait_until};
use spindle_test_support::etcd::present;

const RUN_LIMIT: Duration = Duration::from_secs(120);

/// The standby's `/ui` answers 307 to the active's, which serves the page.
fn the_standby_sends_the_ui_to_the_active(ha: &Ha, active: usize) {
    let standby = 1 - active;
    for path in ["/ui", "/cluster"] {
        // 503 until the standby has seen who leads (its watch of the leader key).
        let location = wait_until("the standby to redirect", Duration::from_secs(30), || {
            let r = ha
                .http
                .get(format!("{}{path}", ha.base(standby)))
                .send()
                .ok()?;
            assert!(
                r.status() == 307 || r.status() == 503,
                "{path}: {}",
                r.status()
            );
            r.headers()
                .get("location")
                .and_then(|l| l.to_str().ok())
                .map(str::to_string)
        });
        assert_eq!(location, format!("{}{path}", ha.base(active)));
        let page = ha.http.get(&location).send().expect("GET the active's UI");
        assert_eq!(page.status(), 200, "{location}");
    }
}

#[test]
fn a_shipped_file_reaches_its_worker_through_the_new_active_after_kill_9() {
    let test = "a_shipped_file_reaches_its_worker_through_the_new_active_after_kill_9";
    if !present(test) {
        return;
    }
    let mut ha = Ha::start_with(
        1000,
        &[
            ("yarn.client.failover-sleep-base-ms", "100"),
            ("yarn.client.failover-sleep-max-ms", "500"),
        ],
    );
    let active = ha.wait_roles(Duration::from_secs(30));
    let standby = 1 - active;
    the_standby_sends_the_ui_to_the_active(&ha, active);

    let data: Vec<u8> = (0..700_000u32).map(|i| (i % 251) as u8).collect();
    let file = ha.dir.path().join("data.bin");
    std::fs::write(&file, &data).unwrap();
    let result = ha.dir.path().join("result");
    let cmd = format!("cat data.bin > {}.$CONTAINER_ID", result.display());
    let files = format!("{}#data.bin", file.display());
    let o = ha.spindle(&[
        "distributed-shell",
        "-shell_command",
        &cmd,
        "--files",
        &files,
        "-num_containers",
        "1",
        "--detach",
    ]);
    let t = output_text(&o);
    assert!(o.status.success(), "{t}\n{}", ha.logs());
    assert!(t.contains("to the ResourceManager"), "{t}");
    let app = app_id_in(&t).expect("an application id");

    // Acknowledged, so already on the standby's disk.
    let hex = hex::encode(Sha256::digest(&data));
    let copy = ha
        .dir
        .path()
        .join(format!("rm{}", standby + 1))
        .join("blobs/sha256")
        .join(&hex);
    assert_eq!(
        std::fs::read(&copy).ok().as_deref(),
        Some(&data[..]),
        "{}",
        ha.logs()
    );

    ha.rms[active]
        .as_ref()
        .expect("active")
        .signal(Signal::SIGKILL);
    wait_until(
        "the standby to become ACTIVE",
        Duration::from_secs(30),
        || (ha.ha_state(standby).as_deref() == Some("ACTIVE")).then_some(()),
    );
    ha.start_nm(&[
        ("yarn.client.failover-sleep-base-ms".into(), "100".into()),
        ("yarn.client.failover-sleep-max-ms".into(), "500".into()),
    ]);
    let state = wait_until("the application to end", RUN_LIMIT, || {
        let (_, v) = ha.rm(standby).get(&format!("/ws/v1/cluster/apps/{app}"));
        let s = v["app"]["finalStatus"].as_str().unwrap_or("").to_string();
        (s == "SUCCEEDED" || s == "FAILED" || s == "KILLED").then_some(v)
    });
    assert_eq!(
        state["app"]["finalStatus"],
        "SUCCEEDED",
        "{state}\n{}",
        ha.logs()
    );
    let outputs: Vec<Vec<u8>> = std::fs::read_dir(ha.dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("result."))
        .map(|e| std::fs::read(e.path()).unwrap())
        .collect();
    assert_eq!(outputs, vec![data], "the worker read the shipped file");
}
