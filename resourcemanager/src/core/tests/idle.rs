//! Idle GPUs on the pure core: the per-container and per-application bookkeeping (idle
//! since, GPU-time held idle integrated between samples, the mean utilization), and the
//! queue policy's three actions (`report`, `notify`, `release`) applied by the tick after
//! `gpu-idle-timeout-ms`, while a busy container is left alone.

use spindle_common::states::exit_status;
use spindle_common::{ApplicationId, ContainerId};

use super::preemption::{conf, leaf, Cluster};
use crate::core::queue_conf::{GpuIdleAction, GpuIdlePolicy};
use crate::core::*;

const TIMEOUT: u64 = 2_000;

/// One queue `root.q` with the policy `action` after [`TIMEOUT`]; a 2-node, 4-GPU cluster.
fn cluster(action: GpuIdleAction) -> Cluster {
    let mut q = leaf("root.q", 100.0);
    q.gpu_idle = GpuIdlePolicy {
        timeout_ms: TIMEOUT,
        action,
        threshold_percent: 5.0,
    };
    Cluster::new(conf(vec![q], 0), 2, 4)
}

/// Starts an application in `root.q` with `n` containers of one GPU each.
fn start(c: &mut Cluster, n: u32) -> (ApplicationId, Vec<ContainerId>) {
    let app = c.start("root.q", "alice", 0);
    let r = c.gang(&app, "g", n, 1);
    let ids: Vec<ContainerId> = r.allocated.iter().map(|a| a.id).collect();
    assert_eq!(ids.len(), n as usize);
    (app, ids)
}

/// Each container's NM reports its one GPU at `util` percent.
fn sample(c: &mut Cluster, uses: &[(ContainerId, f64)]) -> Vec<IgnoredGpuUse> {
    let mut ignored = Vec::new();
    for (cid, util) in uses {
        let node = c.env.core.containers()[cid].node.clone();
        ignored.extend(c.env.core.record_gpu_use(
            &node,
            vec![ContainerGpuUse {
                container: *cid,
                gpus: vec![GpuSample {
                    index: 0,
                    minor: 0,
                    utilization: *util,
                    memory_used_mib: Some(10),
                    temperature_c: Some(40.0),
                }],
            }],
            c.env.now,
        ));
    }
    c.env.step();
    ignored
}

/// `ms` pass in 500 ms steps, each container sampled at its utilization every step.
fn run(c: &mut Cluster, ms: u64, uses: &[(ContainerId, f64)]) {
    let mut left = ms;
    while left > 0 {
        let step = left.min(500);
        c.env.advance(step);
        sample(c, uses);
        c.nm_round();
        left -= step;
    }
}

#[test]
fn bookkeeping_integrates_idle_time_and_means_per_application() {
    // Off (timeout 0): figures are kept, nothing is done.
    let mut q = leaf("root.q", 100.0);
    q.gpu_idle.timeout_ms = 0;
    let mut c2 = Cluster::new(conf(vec![q], 0), 2, 4);
    let (app, ids) = start(&mut c2, 2);
    let (idle, busy) = (ids[0], ids[1]);
    let t0 = c2.env.now;
    sample(&mut c2, &[(idle, 0.0), (busy, 85.0)]);
    let rec = c2.env.core.container_gpu_use(&idle).expect("sampled");
    assert_eq!(rec.idle_since, Some(t0));
    assert_eq!(rec.idle_gpu_ms, 0);
    assert_eq!(
        c2.env.core.container_gpu_use(&busy).unwrap().idle_since,
        None
    );
    run(&mut c2, 10_000, &[(idle, 0.0), (busy, 85.0)]);
    let rec = c2.env.core.container_gpu_use(&idle).unwrap();
    assert_eq!(rec.idle_gpu_ms, 10_000, "one idle GPU for 10 s");
    assert_eq!(rec.idle_since, Some(t0), "still the same idle spell");
    let by_app = c2.env.core.gpu_use_by_app();
    assert_eq!(by_app[&app].idle_gpu_ms, 10_000);
    assert_eq!(by_app[&app].utilization, Some(42.5));
    // Nothing acted: the policy is off.
    assert!(c2.env.core.containers()[&idle].is_live());
    assert!(c2.env.core.take_idle_events().is_empty());
    // A busy sample ends the spell; the idle time stays.
    run(&mut c2, 1_000, &[(idle, 50.0), (busy, 85.0)]);
    let rec = c2.env.core.container_gpu_use(&idle).unwrap();
    assert_eq!(rec.idle_since, None);
    assert_eq!(rec.idle_gpu_ms, 10_500, "idle until the first busy sample");
    // The container ends: its idle time stays with the application.
    let node = c2.env.core.containers()[&idle].node.clone();
    let others: Vec<_> = c2.env.core.nodes()[&node]
        .containers
        .iter()
        .filter(|x| **x != idle)
        .map(|x| super::TestEnv::running(*x))
        .chain([super::TestEnv::done(idle, 0)])
        .collect();
    c2.env.heartbeat(&node, others);
    c2.env.advance(100);
    assert!(c2.env.core.container_gpu_use(&idle).is_none());
    let by_app = c2.env.core.gpu_use_by_app();
    assert_eq!(by_app[&app].idle_gpu_ms, 10_500);
    assert_eq!(by_app[&app].utilization, Some(85.0), "live containers only");
    // Samples of unknown containers or from the wrong node are refused, not taken.
    let ignored = sample(&mut c2, &[(idle, 0.0)]);
    assert_eq!(ignored, vec![IgnoredGpuUse::NotRunning(idle)]);
    let other = c2
        .nodes
        .iter()
        .find(|n| **n != c2.env.core.containers()[&busy].node)
        .unwrap()
        .clone();
    let ignored = c2.env.core.record_gpu_use(
        &other,
        vec![ContainerGpuUse {
            container: busy,
            gpus: vec![],
        }],
        c2.env.now,
    );
    assert_eq!(ignored, vec![IgnoredGpuUse::OtherNode(busy)]);
}

#[test]
fn report_names_the_idle_container_in_the_diagnostics() {
    let mut c = cluster(GpuIdleAction::Report);
    let (app, ids) = start(&mut c, 2);
    let (idle, busy) = (ids[0], ids[1]);
    run(&mut c, TIMEOUT - 500, &[(idle, 0.0), (busy, 85.0)]);
    assert!(c.env.core.take_idle_events().is_empty(), "not yet");
    assert!(!c.env.app(&app).diagnostics.contains("idle GPUs"));
    // The spell is what the samples cover: first idle sample to the last one.
    run(&mut c, 1_500, &[(idle, 0.0), (busy, 85.0)]);
    let events = c.env.core.take_idle_events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].container, idle);
    assert_eq!(events[0].action, GpuIdleAction::Report);
    assert_eq!(events[0].queue, "root.q");
    let diag = &c.env.app(&app).diagnostics;
    assert!(
        diag.contains(&idle.to_string()) && !diag.contains(&busy.to_string()),
        "{diag}"
    );
    assert!(diag.contains("gpu-idle-timeout-ms of 2000 ms"), "{diag}");
    assert!(c.env.core.containers()[&idle].is_live(), "report keeps it");
    // Once per spell.
    run(&mut c, 2_000, &[(idle, 0.0), (busy, 85.0)]);
    assert!(c.env.core.take_idle_events().is_empty());
    // A busy sample re-arms it.
    run(&mut c, 500, &[(idle, 60.0), (busy, 85.0)]);
    run(&mut c, TIMEOUT + 1_000, &[(idle, 0.0), (busy, 85.0)]);
    assert_eq!(c.env.core.take_idle_events().len(), 1);
}

#[test]
fn notify_tells_the_am_once() {
    let mut c = cluster(GpuIdleAction::Notify);
    let (app, ids) = start(&mut c, 2);
    let (idle, busy) = (ids[0], ids[1]);
    let t0 = c.env.now;
    sample(&mut c, &[(idle, 0.0), (busy, 85.0)]);
    run(&mut c, TIMEOUT + 500, &[(idle, 0.0), (busy, 85.0)]);
    let r = c.poll(&app, AmReport::default());
    assert_eq!(
        r.idle_gpus,
        vec![IdleGpuNotice {
            container: idle,
            idle_since: t0,
            gpus: 1,
            utilization: 0.0
        }]
    );
    assert!(c.env.core.containers()[&idle].is_live());
    let r = c.poll(&app, AmReport::default());
    assert!(r.idle_gpus.is_empty(), "sent once");
}

#[test]
fn release_stops_the_idle_container_and_leaves_the_busy_one() {
    let mut c = cluster(GpuIdleAction::Release);
    let (app, ids) = start(&mut c, 2);
    let (idle, busy) = (ids[0], ids[1]);
    // Samples every 500 ms from +500 ms: at the tick of +2500 ms they cover 1500 ms.
    run(&mut c, TIMEOUT + 500, &[(idle, 0.0), (busy, 85.0)]);
    assert!(c.env.core.containers()[&idle].is_live());
    // At +3000 ms they cover the 2000 ms timeout.
    c.env.advance(500);
    // The tick asked the NM to stop it; the NM's report (-106, as the NM stops what the RM
    // cleans up) completes it with the policy's diagnostic first.
    let node = c.env.core.containers()[&idle].node.clone();
    assert!(c.env.core.nodes()[&node].to_cleanup.contains(&idle));
    assert!(!c.env.core.nodes()[&node].to_cleanup.contains(&busy));
    let reports = c.env.core.nodes()[&node]
        .containers
        .iter()
        .map(|x| {
            if *x == idle {
                super::TestEnv::done(idle, exit_status::KILLED_BY_RESOURCEMANAGER)
            } else {
                super::TestEnv::running(*x)
            }
        })
        .collect();
    c.env.heartbeat(&node, reports);
    let rc = &c.env.core.containers()[&idle];
    assert!(!rc.is_live(), "released");
    assert_eq!(rc.exit_status, exit_status::KILLED_BY_RESOURCEMANAGER);
    assert!(
        rc.diagnostics.contains("idle") && rc.diagnostics.contains("gpu-idle-action release"),
        "{}",
        rc.diagnostics
    );
    assert!(
        c.env.core.containers()[&busy].is_live(),
        "85% is left alone"
    );
    let r = c.poll(&app, AmReport::default());
    let done = r
        .completed
        .iter()
        .find(|d| d.container_id == idle)
        .expect("the AM hears of it");
    assert_eq!(done.exit_status, exit_status::KILLED_BY_RESOURCEMANAGER);
}

#[test]
fn a_container_whose_samples_stop_is_not_judged_on_stale_ones() {
    let mut c = cluster(GpuIdleAction::Release);
    let (_, ids) = start(&mut c, 2);
    let (idle, busy) = (ids[0], ids[1]);
    run(&mut c, 1_000, &[(idle, 0.0), (busy, 85.0)]);
    // No more samples (the NM's sampling fails): time passes well beyond the timeout.
    c.run_for(10 * TIMEOUT);
    assert!(
        c.env.core.containers()[&idle].is_live(),
        "not released on stale samples"
    );
    assert!(c.env.core.take_idle_events().is_empty());
    // Samples resume, still idle: the spell goes on and the policy applies.
    run(&mut c, TIMEOUT, &[(idle, 0.0), (busy, 85.0)]);
    assert_eq!(c.env.core.take_idle_events().len(), 1);
}
