//! ResourceManager high availability on the real binaries: a one-member etcd
//! (`/usr/bin/etcd`) and two `resourcemanager`s (`rm1`, `rm2`) on 127.0.0.1 sharing its
//! store. One becomes ACTIVE, the other STANDBY (it answers `/ws/v1/cluster/info` and
//! redirects every other call to the active with a 307). An application is submitted; the
//! active is killed with SIGKILL; the standby becomes ACTIVE within the lease plus recovery
//! and serves the application. The killed RM, started again, is a STANDBY redirecting to the
//! new active. The time from the kill to a serving active is printed. Every process is
//! killed by pid and the directories removed at the end. Skipped without etcd (a failure
//! under CI).

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use spindle_system_tests::ha::{Ha, LEASE_MS};
use spindle_system_tests::wait_until;
use spindle_test_support::etcd::present;

#[test]
fn the_standby_takes_over_a_killed_active_with_its_applications() {
    let test = "the_standby_takes_over_a_killed_active_with_its_applications";
    if !present(test) {
        return;
    }
    let mut ha = Ha::start();
    let active = ha.wait_roles(Duration::from_secs(30));
    let standby = 1 - active;
    println!(
        "{test}: rm{} is ACTIVE, rm{} STANDBY",
        active + 1,
        standby + 1
    );

    // The standby answers cluster/info itself and redirects the rest to the active.
    let r = ha
        .http
        .get(format!(
            "{}/ws/v1/cluster/apps?states=RUNNING",
            ha.base(standby)
        ))
        .send()
        .expect("GET the standby");
    assert_eq!(r.status().as_u16(), 307, "{}", ha.logs());
    assert_eq!(
        r.headers().get("location").and_then(|v| v.to_str().ok()),
        Some(format!("{}/ws/v1/cluster/apps?states=RUNNING", ha.base(active)).as_str())
    );

    // An application accepted by the active (no NodeManager: it waits in ACCEPTED).
    let app = ha
        .rm(active)
        .submit_dshell("before-the-kill", "default", None, "true");
    let (s, v) = ha.rm(active).get(&format!("/ws/v1/cluster/apps/{app}"));
    assert_eq!(s, 200, "{v}");

    // kill -9 the active: the standby takes over within the lease plus recovery.
    let killed = Instant::now();
    ha.rms[active]
        .as_ref()
        .expect("active")
        .signal(Signal::SIGKILL);
    let took = wait_until(
        "the standby to become ACTIVE and serve the application",
        Duration::from_secs(30),
        || {
            let (s, v) = ha.rm(standby).get(&format!("/ws/v1/cluster/apps/{app}"));
            (ha.ha_state(standby).as_deref() == Some("ACTIVE") && s == 200)
                .then(|| (killed.elapsed(), v))
        },
    );
    let (elapsed, v) = took;
    println!(
        "{test}: kill -9 of rm{} to a serving active rm{}: {} ms (lease {LEASE_MS} ms)",
        active + 1,
        standby + 1,
        elapsed.as_millis()
    );
    assert_eq!(v["app"]["id"], app, "{v}");
    assert_eq!(v["app"]["state"], "ACCEPTED", "{v}");
    let (_, apps) = ha.rm(standby).get("/ws/v1/cluster/apps");
    assert_eq!(
        apps["apps"]["app"].as_array().map(Vec::len),
        Some(1),
        "{apps}"
    );

    // The killed RM comes back as a STANDBY that redirects to the new active.
    ha.rms[active] = None;
    ha.start_rm(active);
    assert_eq!(
        ha.wait_roles(Duration::from_secs(30)),
        standby,
        "{}",
        ha.logs()
    );
    // It reports STANDBY as soon as it serves, before its first look at the election key;
    // until then it answers 503 with `Retry-After` (no active known), then redirects.
    let url = format!("{}/ws/v1/cluster/apps/{app}", ha.base(active));
    let mut seen = Vec::new();
    let code = spindle_system_tests::wait_until(
        "the restarted RM to redirect",
        Duration::from_secs(15),
        || {
            let code = ha
                .http
                .get(&url)
                .send()
                .expect("GET the restarted RM")
                .status()
                .as_u16();
            seen.push(code);
            (code != 503).then_some(code)
        },
    );
    assert_eq!(code, 307, "answers seen: {seen:?}");
}

#[test]
fn a_paused_active_resumes_as_a_standby_and_its_successor_keeps_every_application() {
    let test = "a_paused_active_resumes_as_a_standby_and_its_successor_keeps_every_application";
    if !present(test) {
        return;
    }
    let ha = Ha::start();
    let active = ha.wait_roles(Duration::from_secs(30));
    let standby = 1 - active;
    let first = ha
        .rm(active)
        .submit_dshell("before-the-pause", "default", None, "true");
    // SIGSTOP past the lease (a long GC pause, a frozen VM): the standby takes over.
    let paused = Instant::now();
    ha.rms[active]
        .as_ref()
        .expect("active")
        .signal(Signal::SIGSTOP);
    wait_until(
        "the standby to become ACTIVE",
        Duration::from_secs(30),
        || (ha.ha_state(standby).as_deref() == Some("ACTIVE")).then_some(()),
    );
    println!(
        "{test}: SIGSTOP of rm{} to an ACTIVE rm{}: {} ms (lease {LEASE_MS} ms)",
        active + 1,
        standby + 1,
        paused.elapsed().as_millis()
    );
    let second = ha
        .rm(standby)
        .submit_dshell("after-the-pause", "default", None, "true");
    // SIGCONT: the old active finds its lease gone and is a standby again, redirecting.
    ha.rms[active]
        .as_ref()
        .expect("paused")
        .signal(Signal::SIGCONT);
    assert_eq!(
        ha.wait_roles(Duration::from_secs(30)),
        standby,
        "{}",
        ha.logs()
    );
    // Until its election sees the new active it answers 503 with Retry-After; then 307.
    let location = wait_until(
        "the resumed RM to redirect",
        Duration::from_secs(10),
        || {
            let r = ha
                .http
                .get(format!("{}/ws/v1/cluster/apps", ha.base(active)))
                .send()
                .ok()?;
            match r.status().as_u16() {
                307 => r
                    .headers()
                    .get("location")?
                    .to_str()
                    .ok()
                    .map(str::to_string),
                503 => None,
                other => panic!("the resumed RM answered {other}"),
            }
        },
    );
    assert_eq!(location, format!("{}/ws/v1/cluster/apps", ha.base(standby)));
    let log = ha.rms[active].as_ref().expect("resumed").log_text();
    assert!(log.contains("leadership lost"), "{log}");
    let (_, apps) = ha.rm(standby).get("/ws/v1/cluster/apps");
    let mut ids: Vec<&str> = apps["apps"]["app"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x["id"].as_str()).collect())
        .unwrap_or_default();
    ids.sort();
    let mut want = vec![first.as_str(), second.as_str()];
    want.sort();
    assert_eq!(ids, want, "{apps}");
}
