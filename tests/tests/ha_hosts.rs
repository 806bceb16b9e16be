//! Issue 30 on the many-hosts harness (`spindle_system_tests::hosts::ha`): a three-member
//! etcd cluster (each member a host of its own), two ResourceManagers `rm1` and `rm2` (each
//! on its own host, automatic failover on etcd) and NodeManager hosts that follow the
//! active. What YARN's HA promises, checked on the RMs' REST views, the NMs' own, the
//! hosts' process lists and etcd's history:
//!
//! - `kill -9` of the active while 200 applications are submitted through the CLI (given
//!   both RMs) and 30 run with live AMs: every acknowledged submission reaches a final state,
//!   no live AM gets a second attempt (one whose start had not reached its NM at the kill gets
//!   one, not counted, and says so), no container process outlives its application and no node
//!   is over-allocated (the RM's and the NMs' views, sampled throughout: an NM's live
//!   containers but those it is killing within its capacity), no submission is refused (the
//!   CLI sends one in flight at the kill again); the time from the kill to a serving active
//!   and to the next AM launch is printed;
//! - `SIGSTOP` of the active past its lease, then `SIGCONT`: the standby took over; the
//!   submission the paused RM received while it was stopped is never written (etcd's history
//!   after the new term holds no write of it, and none made under another leader key), and
//!   the old active is STANDBY, redirecting;
//! - the active cut off from etcd only (the harness's blackhole routes) steps down before
//!   the other becomes active, which takes over with every application;
//! - two of three etcd members stopped: no RM is active, nothing is accepted and nothing is
//!   written but the election; quorum back, an RM becomes active with every application in
//!   the state it had.
//!
//! Root only and etcd needed: skipped with the reason, a failure under `CI=true`. Run each
//! alone: `cargo test -p spindle-system-tests --test ha_hosts -- --test-threads=1`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::sys::signal::Signal;
use serde_json::Value;
use spindle_common::records::node::NODE_FULL_EXCEPTION;
use spindle_system_tests::etcd_history::Event;
use spindle_system_tests::hosts::ha::{start_or_skip, HaHosts, HaHostsOpts, CLUSTER_ID};
use spindle_system_tests::{app_id_in, bin, cs_xml, output_text, wait_until};

const FINAL: [&str; 3] = ["FINISHED", "FAILED", "KILLED"];
/// What each NM offers: room for 32 containers of 128 MB.
const NM_MB: i64 = 4096;
const NM_VCORES: i64 = 32;
/// NM container states that keep their room: every live one but KILLING (a container the
/// RM stopped, whose room it may have handed on; the NM refuses a start that does not fit
/// beside the others).
const HOLDING: [&str; 4] = ["LOCALIZING", "SCHEDULED", "RUNNING", "REINITIALIZING"];

fn props(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Clients (the CLI, AMs, NMs) fail over quickly: every daemon and the CLI read the conf dir.
fn fast_failover_site() -> (String, String) {
    let site = "<configuration>\n\
  <property><name>yarn.client.failover-sleep-base-ms</name><value>100</value></property>\n\
  <property><name>yarn.client.failover-sleep-max-ms</name><value>1000</value></property>\n\
</configuration>\n";
    ("yarn-site.xml".into(), site.into())
}

/// Every application `rm<i+1>` lists: id -> the app object.
fn apps_of(c: &HaHosts, i: usize) -> Option<BTreeMap<String, Value>> {
    let (s, v) = c.rest(i).try_get("/ws/v1/cluster/apps")?;
    (s == 200).then(|| {
        v["apps"]["app"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| Some((a["id"].as_str()?.to_string(), a.clone())))
            .collect()
    })
}

/// Submits a distributed shell through the CLI given both RMs, its AM the `spindle` binary
/// of this build by path (every host sees the build): the id once the RM acknowledged it,
/// else the CLI's words.
fn submit(c: &HaHosts, name: &str, command: &str) -> Result<String, String> {
    let am = format!("{} distributed-shell-am", bin("spindle").display());
    let cmd_env = format!("DISTRIBUTEDSHELL_SHELL_COMMAND={command}");
    let out = c.spindle_within(
        &[
            "submit",
            "--detach",
            "--am-command",
            &am,
            "--am-resources",
            "memory-mb=128,vcores=1",
            "--appname",
            name,
            "--max-app-attempts",
            "2",
            "--env",
            "DISTRIBUTEDSHELL_NUM_CONTAINERS=1",
            "--env",
            "DISTRIBUTEDSHELL_CONTAINER_RESOURCES=memory-mb=128,vcores=1",
            "--env",
            &cmd_env,
        ],
        Duration::from_secs(120),
    );
    let text = output_text(&out);
    match app_id_in(&String::from_utf8_lossy(&out.stdout)) {
        Some(id) if out.status.success() => Ok(id),
        _ => Err(text),
    }
}

/// Those of `ids` that `rm<i+1>` does not list in a final state: id -> its state and
/// diagnostics. None when it does not answer.
fn unfinished(c: &HaHosts, i: usize, ids: &[String]) -> Option<Vec<(String, String)>> {
    let apps = apps_of(c, i)?;
    Some(
        ids.iter()
            .filter_map(|id| match apps.get(id) {
                None => Some((id.clone(), "not listed".to_string())),
                Some(a) if FINAL.contains(&a["state"].as_str().unwrap_or_default()) => None,
                Some(a) => Some((id.clone(), format!("{} {}", a["state"], a["diagnostics"]))),
            })
            .collect(),
    )
}

/// Every daemon log line that names one of `ids` (at most 400), for a failure's message.
fn lines_naming<'a>(c: &HaHosts, ids: impl Iterator<Item = &'a str>) -> String {
    let ids: Vec<&str> = ids.collect();
    let mut out = String::new();
    let logs = c.logs();
    let mut file = "";
    for l in logs.lines() {
        if l.starts_with("---- ") {
            file = l;
            continue;
        }
        let short = |id: &str| id.trim_start_matches("application_").to_string();
        if ids
            .iter()
            .any(|id| l.contains(id) || l.contains(&short(id)))
        {
            out.push_str(&format!("{file} {l}\n"));
            if out.lines().count() >= 400 {
                break;
            }
        }
    }
    out
}

/// What a sample of the nodes found over capacity: the RM's view (`/ws/v1/cluster/nodes`),
/// and the NMs' own (the containers each runs that hold resources).
#[derive(Default)]
struct Over {
    rm: Vec<String>,
    nm: Vec<String>,
}

/// One sample of both views through the active `rm<active+1>`.
fn over_allocations(c: &HaHosts, active: usize, into: &mut Over) {
    let bad = &mut into.rm;
    let nodes = c.rest(active).try_get("/ws/v1/cluster/nodes");
    let nodes = nodes.map(|(_, v)| v["nodes"]["node"].clone());
    for n in nodes
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let (mb, vc) = (
            n["usedMemoryMB"].as_i64().unwrap_or(0),
            n["usedVirtualCores"].as_i64().unwrap_or(0),
        );
        if mb > NM_MB || vc > NM_VCORES || n["availMemoryMB"].as_i64().unwrap_or(0) < 0 {
            bad.push(format!("RM view of {}: {n}", n["id"]));
        }
    }
    let rm_used = |id: &str| {
        nodes
            .as_ref()
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|n| n["id"] == id)
            .map(|n| n["usedMemoryMB"].clone())
    };
    for (addr, h) in c.nm_addrs.iter().zip(&c.nm_hosts) {
        let url = format!("http://{addr}/ws/v1/node/containers");
        let Some(v) = c
            .site
            .http
            .get(&url)
            .send()
            .ok()
            .and_then(|r| r.json::<Value>().ok())
        else {
            continue;
        };
        let held: Vec<&Value> = v["containers"]["container"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|x| HOLDING.contains(&x["state"].as_str().unwrap_or_default()))
            .collect();
        let mb: i64 = held
            .iter()
            .map(|x| x["totalMemoryNeededMB"].as_i64().unwrap_or(0))
            .sum();
        if mb > NM_MB {
            let at = now_ms();
            let each: Vec<String> = held
                .iter()
                .map(|x| {
                    let id = x["id"].as_str().unwrap_or_default();
                    format!("{id} NM {} RM {}", x["state"], rm_view(c, active, id))
                })
                .collect();
            into.nm.push(format!(
                "{} runs {mb} MB of containers at {at} (the RM counts {:?} MB used):\n  {}",
                h.name,
                rm_used(addr),
                each.join("\n  ")
            ));
        }
    }
}

/// What `rm<active+1>` says of container `id`: its state and exit status, or the answer.
fn rm_view(c: &HaHosts, active: usize, id: &str) -> String {
    let Ok(cid) = id.parse::<spindle_common::ContainerId>() else {
        return "(not a container id)".into();
    };
    let path = format!(
        "/ws/v1/cluster/apps/{}/appattempts/{}/containers/{id}",
        cid.attempt_id.application_id, cid.attempt_id
    );
    match c.rest(active).try_get(&path) {
        Some((200, v)) => format!(
            "{} exit {} finished {}",
            v["container"]["containerState"],
            v["container"]["containerExitStatus"],
            v["container"]["finishedTime"]
        ),
        Some((s, v)) => format!("{s} {v}"),
        None => "(no answer)".into(),
    }
}

/// The processes on NM hosts but their NodeManagers.
fn leftovers(c: &HaHosts) -> Vec<(String, i32, String)> {
    let nm_pids: Vec<i32> = c.nms.iter().map(|d| d.pid()).collect();
    c.nm_hosts
        .iter()
        .flat_map(|h| {
            c.site
                .processes(h)
                .into_iter()
                .filter(|(p, _)| !nm_pids.contains(p))
                .map(|(p, cmd)| (h.name.clone(), p, cmd))
        })
        .collect()
}

#[test]
fn kill_9_of_the_active_under_200_submissions_and_30_live_ams_loses_nothing() {
    let test = "kill_9_of_the_active_under_200_submissions_and_30_live_ams_loses_nothing";
    let shared = std::path::PathBuf::from("/ha-shared");
    let cs = cs_xml(&[("maximum-am-resource-percent", "1.0")]);
    let Some(mut c) = start_or_skip(
        test,
        HaHostsOpts {
            nms: 3,
            nm_props: props(&[
                ("yarn.nodemanager.resource.memory-mb", &NM_MB.to_string()),
                (
                    "yarn.nodemanager.resource.cpu-vcores",
                    &NM_VCORES.to_string(),
                ),
            ]),
            files: vec![fast_failover_site(), ("capacity-scheduler.xml".into(), cs)],
            shared: vec![shared.clone()],
            ..Default::default()
        },
    ) else {
        return;
    };
    let src = c.site.shared_source(&shared).expect("shared").to_path_buf();
    let live_cmd = format!(
        "touch {d}/up.$$; while [ ! -e {d}/stop ]; do sleep 1; done",
        d = shared.display()
    );
    let acked: Mutex<Vec<(String, bool, u64)>> = Mutex::new(vec![]);
    let refused: Mutex<Vec<String>> = Mutex::new(vec![]);
    let record = |r: Result<String, String>, live: bool| match r {
        Ok(id) => acked.lock().unwrap().push((id, live, now_ms())),
        Err(e) => refused.lock().unwrap().push(e),
    };
    // 30 live applications, their workers waiting for the stop file.
    std::thread::scope(|s| {
        for t in 0..5 {
            let (c, live_cmd, record) = (&c, &live_cmd, &record);
            s.spawn(move || {
                for k in 0..6 {
                    record(submit(c, &format!("live-{t}-{k}"), live_cmd), true);
                }
            });
        }
    });
    assert_eq!(acked.lock().unwrap().len(), 30, "{:?}", refused.lock());
    let ups = || std::fs::read_dir(&src).map(|d| d.count()).unwrap_or(0);
    wait_until("30 live workers", Duration::from_secs(180), || {
        (ups() >= 30).then_some(())
    });
    let first = c.active().expect("an active RM");
    println!("{test}: 30 live AMs and workers; rm{} is ACTIVE", first + 1);

    // 170 more submissions from 5 clients; the active is killed once 50 are acknowledged.
    let sampling = AtomicBool::new(true);
    let over: Mutex<Over> = Mutex::new(Over::default());
    let (killed, kill_ms, serving) = std::thread::scope(|s| {
        let c = &c;
        s.spawn(|| {
            while sampling.load(Ordering::Relaxed) {
                if let Some(a) = c.active() {
                    over_allocations(c, a, &mut over.lock().unwrap());
                }
                std::thread::sleep(Duration::from_millis(300));
            }
        });
        // The sampler stops however this body ends: a failed wait below panics, and the
        // scope would otherwise wait for the sampler forever instead of failing the test.
        let _stop_sampling = StopOnDrop(&sampling, c);
        // Bounded: a client stops submitting past the deadline (each CLI run has its own).
        let deadline = Instant::now() + Duration::from_secs(240);
        let mut clients = vec![];
        for t in 0..5 {
            let record = &record;
            clients.push(s.spawn(move || {
                for k in 0..34 {
                    if Instant::now() > deadline {
                        return;
                    }
                    record(submit(c, &format!("short-{t}-{k}"), "true"), false);
                }
            }));
        }
        wait_until(
            "50 more acknowledged submissions",
            Duration::from_secs(300),
            || (acked.lock().unwrap().len() >= 80).then_some(()),
        );
        let killed = Instant::now();
        let kill_ms = now_ms();
        c.rms[first]
            .as_ref()
            .expect("active")
            .signal(Signal::SIGKILL);
        let other = 1 - first;
        let serving = wait_until("the standby to serve", Duration::from_secs(60), || {
            (c.ha_state(other).as_deref() == Some("ACTIVE") && apps_of(c, other).is_some())
                .then(|| killed.elapsed())
        });
        for h in clients {
            h.join().expect("a submitting client");
        }
        // Every worker may end now; the sampler goes on until every application ended.
        std::fs::write(src.join("stop"), "").expect("stop file");
        let ids: Vec<String> = acked.lock().unwrap().iter().map(|a| a.0.clone()).collect();
        let until = Instant::now() + Duration::from_secs(300);
        loop {
            let open = unfinished(c, other, &ids);
            if open.as_ref().is_some_and(Vec::is_empty) {
                break;
            }
            assert!(
                Instant::now() < until,
                "acknowledged applications not ended after 300 s: {open:#?}\n{}",
                lines_naming(c, open.iter().flatten().map(|(id, _)| id.as_str()))
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        (killed, kill_ms, serving)
    });
    let other = 1 - first;
    c.rms[first] = None;
    let acked = acked.into_inner().unwrap();
    let refused = refused.into_inner().unwrap();
    let apps = apps_of(&c, other).expect("the new active's applications");

    let mut ids: Vec<&str> = acked.iter().map(|a| a.0.as_str()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(
        ids.len(),
        acked.len(),
        "an id acknowledged twice: {acked:?}"
    );
    for (id, live, _) in &acked {
        let a = &apps[id];
        assert!(
            FINAL.contains(&a["state"].as_str().unwrap_or_default()),
            "{a}"
        );
        assert_eq!(a["finalStatus"], "SUCCEEDED", "{a}\n{}", c.logs());
        let attempts = c.rest(other).attempts_of(id);
        // A live AM never gets a second attempt. An application submitted around the kill
        // whose AM start had not reached its NM (the old active stored the AM container,
        // then died) gets one, not counted, as YARN does: its first attempt then says so.
        let never_started = |a: &Value| {
            a["diagnosticsInfo"]
                .as_str()
                .is_some_and(|d| d.contains("was not reported by its NodeManager"))
        };
        match attempts.as_slice() {
            [_] => {}
            [first, _] if !live && never_started(first) => {
                println!("{test}: {id}: its AM had not started at the kill: {first}");
            }
            _ => panic!("live={live} {id}: {attempts:?}"),
        }
    }
    let over = over.into_inner().unwrap();
    assert!(over.rm.is_empty(), "over-allocated: {:#?}", over.rm);
    // Starts an NM refused as full (the room of a container it still ran was handed on):
    // printed for the record, with the kill's time to place them.
    for (h, d) in c.nm_hosts.iter().zip(&c.nms) {
        for l in d
            .log_text()
            .lines()
            .filter(|l| l.contains(NODE_FULL_EXCEPTION))
        {
            println!("{test}: {} (kill at {kill_ms}): {l}", h.name);
        }
    }
    assert!(
        over.nm.is_empty(),
        "an NM ran more than its capacity (kill at {kill_ms}): {:#?}",
        over.nm
    );
    // A container's processes end with it; give the NMs a bounded while to reap them.
    let deadline = Instant::now() + Duration::from_secs(60);
    let left = loop {
        let l = leftovers(&c);
        if l.is_empty() || Instant::now() > deadline {
            break l;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        left.is_empty(),
        "processes outlived their applications: {left:#?}"
    );
    let next_launch = apps
        .values()
        .filter_map(|a| a["launchTime"].as_u64())
        .filter(|&t| t > kill_ms)
        .min()
        .map(|t| t - kill_ms);
    println!(
        "{test}: {} acknowledged ({} refused), kill -9 of rm{} to a serving active rm{}: {} ms; to the next AM launch: {next_launch:?} ms (lease {} ms); {:?} since the kill",
        acked.len(),
        refused.len(),
        first + 1,
        other + 1,
        serving.as_millis(),
        c.lease_ms,
        killed.elapsed()
    );
    assert!(next_launch.is_some(), "nothing launched after the kill");
    // A submission in flight at the kill is sent again to the new active (the CLI retries
    // new-application and POST /apps through a failover; the RM takes the same submission
    // again without a second application): none is refused.
    assert!(refused.is_empty(), "refused submissions: {refused:#?}");
}

/// Clears its flag when dropped, on a panic too: what a scoped thread polling the flag
/// needs to end. On a panic it also prints the tail of each RM's log (why a wait failed).
struct StopOnDrop<'a>(&'a AtomicBool, &'a HaHosts);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Relaxed);
        if std::thread::panicking() {
            for (i, rm) in self.1.rms.iter().enumerate() {
                let tail = rm.as_ref().map(|d| d.log_tail(80)).unwrap_or_default();
                eprintln!("---- rm{}'s log, its last 80 lines ----\n{tail}", i + 1);
            }
        }
    }
}

/// The new-application id `rm<i+1>` hands out.
fn new_application(c: &HaHosts, i: usize) -> String {
    let (s, v, _) = c.rest(i).send(
        reqwest::Method::POST,
        "/ws/v1/cluster/apps/new-application",
        &serde_json::json!({}),
    );
    assert_eq!(s, 200, "{v}");
    v["application-id"].as_str().expect("id").to_string()
}

/// The body of `POST /apps` for `id`: an AM that waits (no NM needs to run it).
fn submission(id: &str, name: &str) -> Value {
    serde_json::json!({
        "application-id": id,
        "application-name": name,
        "queue": "default",
        "am-container-spec": {"commands": {"command": "sleep 600"}},
        "resource": {"memory": 128, "vCores": 1}
    })
}

#[test]
fn a_paused_active_writes_nothing_after_its_successor_was_elected_and_is_standby() {
    let test = "a_paused_active_writes_nothing_after_its_successor_was_elected_and_is_standby";
    let Some(c) = start_or_skip(
        test,
        HaHostsOpts {
            nms: 0,
            ..Default::default()
        },
    ) else {
        return;
    };
    let a = c.wait_roles(Duration::from_secs(30));
    let b = 1 - a;
    let etcd = c.history(0);
    let leader = c.leader_key();
    let term_a = etcd.get(&leader).expect("etcd").expect("a leader key");
    assert_eq!(term_a.value, format!("rm{}", a + 1));
    let before = c
        .rest(a)
        .submit_dshell("before-the-pause", "default", None, "true");
    let late = new_application(&c, a);

    c.rms[a].as_ref().expect("active").signal(Signal::SIGSTOP);
    let paused = Instant::now();
    let patient = c.site.net.in_switch(|| {
        reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(120))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("client")
    });
    let (status, term_b, cont_rev, after) = std::thread::scope(|s| {
        // Sent to the paused RM: it reads the request when it wakes up.
        let url = format!("http://{}/ws/v1/cluster/apps", c.rm_addrs[a]);
        let body = submission(&late, "sent-to-the-paused-active");
        let pending = s.spawn(move || patient.post(url).json(&body).send().map(|r| r.status()));
        wait_until(
            "the standby to become ACTIVE",
            Duration::from_secs(60),
            || (c.ha_state(b).as_deref() == Some("ACTIVE")).then_some(()),
        );
        println!(
            "{test}: SIGSTOP of rm{} to an ACTIVE rm{}: {} ms (lease {} ms)",
            a + 1,
            b + 1,
            paused.elapsed().as_millis(),
            c.lease_ms
        );
        let term_b = etcd.get(&leader).expect("etcd").expect("a leader key");
        let after = c
            .rest(b)
            .submit_dshell("after-the-pause", "default", None, "true");
        let cont_rev = etcd.revision().expect("etcd revision");
        c.rms[a].as_ref().expect("paused").signal(Signal::SIGCONT);
        let status = pending.join().expect("the late submission");
        (status, term_b, cont_rev, after)
    });
    assert_eq!(term_b.value, format!("rm{}", b + 1));
    assert!(term_b.create_revision > term_a.create_revision);
    // The late submission was not acknowledged by the woken RM, which answered what a
    // client fails over on: 503 (its write refused by the fence) or 307 (a standby already).
    if let Ok(s) = status {
        assert_ne!(s.as_u16(), 202, "the deposed RM acknowledged a submission");
        assert!(
            matches!(s.as_u16(), 503 | 307),
            "the deposed RM answered {s}: not a failover signal"
        );
    }
    assert_eq!(c.wait_roles(Duration::from_secs(30)), b, "{}", c.logs());
    wait_until(
        "the resumed RM to redirect",
        Duration::from_secs(30),
        || {
            let r = c
                .probe
                .get(format!("http://{}/ws/v1/cluster/apps", c.rm_addrs[a]))
                .send()
                .ok()?;
            (r.status().as_u16() == 307).then_some(())
        },
    );
    // The history since the old term: the leader key deleted (its lease expired) and
    // created by the new active; no later change of it, so each later write passed the new
    // term's fence; and no write of the late submission at any revision.
    let end = etcd.revision().expect("etcd revision");
    let events = etcd
        .events(term_a.create_revision + 1, end)
        .expect("etcd history");
    let late_key = format!("/spindle/{CLUSTER_ID}/apps/{late}");
    let written: Vec<&Event> = events.iter().filter(|e| e.key() == late_key).collect();
    assert!(
        written.is_empty(),
        "the late submission was written: {written:?}"
    );
    let leader_changes: Vec<&Event> = events
        .iter()
        .filter(|e| e.key() == leader && e.revision() > term_b.create_revision)
        .collect();
    assert!(leader_changes.is_empty(), "{leader_changes:?}");
    let after_cont: Vec<&Event> = events.iter().filter(|e| e.revision() > cont_rev).collect();
    println!(
        "{test}: terms {} -> {}; {} writes since the old term, {} after SIGCONT: {:?}; the late submission got {status:?}",
        term_a.create_revision,
        term_b.create_revision,
        events.len(),
        after_cont.len(),
        after_cont.iter().map(|e| (e.revision(), e.key())).collect::<Vec<_>>()
    );
    let apps = apps_of(&c, b).expect("the new active's applications");
    let mut got: Vec<&String> = apps.keys().collect();
    got.sort();
    let mut want = vec![&before, &after];
    want.sort();
    assert_eq!(got, want);
    let log = c.rms[a].as_ref().expect("resumed").log_text();
    assert!(log.contains("leadership lost"), "{log}");
}

#[test]
fn an_active_cut_off_from_etcd_steps_down_before_the_other_takes_over() {
    let test = "an_active_cut_off_from_etcd_steps_down_before_the_other_takes_over";
    let Some(c) = start_or_skip(
        test,
        HaHostsOpts {
            nms: 0,
            ..Default::default()
        },
    ) else {
        return;
    };
    let a = c.wait_roles(Duration::from_secs(30));
    let b = 1 - a;
    let app = c
        .rest(a)
        .submit_dshell("before-the-cut", "default", None, "true");
    c.cut_from_etcd(a);
    let cut = Instant::now();
    // The candidate is asked first: were the old active still ACTIVE after the new one
    // said so, two RMs would have been active at once.
    let (mut stepped_down, mut both) = (None, vec![]);
    let took_over = wait_until(
        "the other RM to become ACTIVE",
        Duration::from_secs(60),
        || {
            let new = c.ha_state(b);
            let old = c.ha_state(a);
            if stepped_down.is_none() && old.as_deref() != Some("ACTIVE") {
                stepped_down = Some((cut.elapsed(), old.clone()));
            }
            if new.as_deref() == Some("ACTIVE") && old.as_deref() == Some("ACTIVE") {
                both.push(cut.elapsed());
            }
            (new.as_deref() == Some("ACTIVE")).then(|| cut.elapsed())
        },
    );
    let (down, state) = stepped_down.expect("the cut-off RM to leave ACTIVE");
    println!(
        "{test}: rm{} cut off from etcd: it left ACTIVE ({state:?}) after {} ms, rm{} ACTIVE after {} ms (lease {} ms)",
        a + 1,
        down.as_millis(),
        b + 1,
        took_over.as_millis(),
        c.lease_ms
    );
    assert!(both.is_empty(), "both ACTIVE at {both:?}\n{}", c.logs());
    assert_eq!(state.as_deref(), Some("STANDBY"), "{}", c.logs());
    assert!(down <= took_over);
    let (s, v) = c.rest(b).get(&format!("/ws/v1/cluster/apps/{app}"));
    assert_eq!(s, 200, "{v}");
    // Back on the network it stays a standby of the new active.
    c.reconnect_to_etcd(a);
    assert_eq!(c.wait_roles(Duration::from_secs(30)), b, "{}", c.logs());
}

/// Each application `rm<i+1>` lists, with its state.
fn app_states(c: &HaHosts, i: usize) -> BTreeMap<String, String> {
    apps_of(c, i)
        .unwrap_or_default()
        .into_iter()
        .map(|(id, a)| (id, a["state"].as_str().unwrap_or_default().to_string()))
        .collect()
}

#[test]
fn without_an_etcd_quorum_no_rm_is_active_nothing_is_written_and_nothing_is_lost() {
    let test = "without_an_etcd_quorum_no_rm_is_active_nothing_is_written_and_nothing_is_lost";
    let Some(mut c) = start_or_skip(
        test,
        HaHostsOpts {
            nms: 0,
            ..Default::default()
        },
    ) else {
        return;
    };
    let a = c.wait_roles(Duration::from_secs(30));
    let waiting = c.rest(a).submit_dshell("waiting", "default", None, "true");
    let killed = c.rest(a).submit_dshell("killed", "default", None, "true");
    let (s, v, _) = c.rest(a).send(
        reqwest::Method::PUT,
        &format!("/ws/v1/cluster/apps/{killed}/state"),
        &serde_json::json!({"state": "KILLED"}),
    );
    assert!(s == 200 || s == 202, "{s} {v}");
    c.rest(a)
        .wait_app_state(&killed, &["KILLED"], Duration::from_secs(30));
    let before = app_states(&c, a);
    assert_eq!(before.len(), 2, "{before:?}");
    let rev0 = c.history(2).revision().expect("etcd revision");

    c.etcd.kill(0);
    c.etcd.kill(1);
    let lost = Instant::now();
    wait_until("no RM ACTIVE", Duration::from_secs(60), || {
        c.active().is_none().then_some(())
    });
    println!(
        "{test}: two of three etcd members killed: no RM ACTIVE after {} ms (lease {} ms)",
        lost.elapsed().as_millis(),
        c.lease_ms
    );
    // For two leases: no RM becomes active, and a submission is refused by both.
    let window = Instant::now();
    while window.elapsed() < Duration::from_millis(2 * c.lease_ms) {
        for i in 0..2 {
            let st = c.ha_state(i);
            assert_ne!(
                st.as_deref(),
                Some("ACTIVE"),
                "rm{} without a quorum",
                i + 1
            );
        }
        let r = c
            .probe
            .post(format!(
                "http://{}/ws/v1/cluster/apps/new-application",
                c.rm_addrs[a]
            ))
            .send();
        if let Ok(r) = r {
            assert!(
                !r.status().is_success(),
                "a new application without a quorum"
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }

    c.etcd.restart(0);
    c.etcd.restart(1);
    let back = Instant::now();
    let now_active = c.wait_roles(Duration::from_secs(60));
    println!(
        "{test}: quorum back: rm{} ACTIVE after {} ms",
        now_active + 1,
        back.elapsed().as_millis()
    );
    let etcd = c.history(2);
    let term = etcd
        .get(&c.leader_key())
        .expect("etcd")
        .expect("a leader key");
    let events = etcd
        .events(rev0 + 1, term.create_revision)
        .expect("history");
    let others: Vec<&Event> = events
        .iter()
        .filter(|e| e.key() != c.leader_key())
        .collect();
    assert!(
        others.is_empty(),
        "written between the quorum's loss and the new term: {others:?}"
    );
    let after = wait_until(
        "the applications on the active",
        Duration::from_secs(30),
        || {
            let s = app_states(&c, now_active);
            (!s.is_empty()).then_some(s)
        },
    );
    assert_eq!(after, before);
    assert_eq!(after.get(&waiting).map(String::as_str), Some("ACCEPTED"));
}
