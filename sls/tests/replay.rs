//! Replays through the real core: exact completion times on hand-made traces for every
//! policy preset, determinism, conservation of GPU-seconds with the core's sanity check
//! after every step, and refusals of bad input before anything runs.

use std::path::Path;

use spindle_sls::cluster::{ClusterSpec, Uniform};
use spindle_sls::replay::{self, Options, Outcome, RunResult};
use spindle_sls::trace::{self, Defaults, Job, RowProblem};
use spindle_sls::{policy, report, SlsError};

fn cluster(nodes: usize, gpus: i64) -> ClusterSpec {
    ClusterSpec::uniform(&Uniform {
        nodes,
        gpus_per_node: gpus,
        ..Uniform::default()
    })
    .expect("cluster")
}

fn checked() -> Options {
    Options {
        check: true,
        timing: false,
        ..Options::default()
    }
}

fn replay(
    csv: &str,
    c: &ClusterSpec,
    preset: &str,
    conf_dir: Option<&Path>,
) -> (Vec<Job>, RunResult) {
    let jobs = trace::parse_csv(Path::new("t.csv"), csv, &Defaults::default()).expect("trace");
    let preset = policy::find(preset).expect("preset");
    let loaded = policy::load(conf_dir, Some(preset), &[], c).expect("configuration");
    replay::check_jobs(&jobs, c, &loaded.rm).expect("valid jobs");
    let opts = Options {
        oracle_priority: preset.oracle_priority,
        ..checked()
    };
    let run = replay::run(&jobs, c, &loaded.rm, &opts, &mut |_| {}).expect("replay");
    (jobs, run)
}

/// (job id, start s, finish s) of every job.
fn times(jobs: &[Job], run: &RunResult) -> Vec<(String, f64, f64)> {
    jobs.iter()
        .zip(&run.jobs)
        .map(|(j, r)| {
            assert_eq!(r.outcome, Outcome::Finished, "{}", j.id);
            (
                j.id.clone(),
                r.start_ms.expect("started") as f64 / 1000.0,
                r.finish_ms.expect("finished") as f64 / 1000.0,
            )
        })
        .collect()
}

fn t(id: &str, start: f64, finish: f64) -> (String, f64, f64) {
    (id.to_string(), start, finish)
}

/// Three 4-GPU nodes. A, A2 and A3 fill 4, 2 and 3 GPUs of one node each for 100 s; B, a
/// 4-GPU gang on one node, must wait for one of them; C, one GPU for 10 s, arrives after B.
const HEAD_OF_LINE: &str = "\
job_id,submit_time,num_gpus,duration,placement
A,0,4,100,STRICT_PACK
A2,0,2,100,STRICT_PACK
A3,0,3,100,STRICT_PACK
B,1,4,50,STRICT_PACK
C,2,1,10,
";

#[test]
fn strict_fifo_blocks_behind_the_gang_at_the_head_and_capacity_backfills_past_it() {
    // Under strict FIFO, C waits behind B although a GPU is free; under the capacity
    // scheduler, B holds a node as it drains and C runs at once on a GPU B will not use.
    for (preset, c) in [
        ("fifo", t("C", 100.0, 110.0)),
        ("fifo-fair", t("C", 100.0, 110.0)),
        ("capacity", t("C", 2.0, 12.0)),
        ("capacity-fair", t("C", 2.0, 12.0)),
    ] {
        let (jobs, run) = replay(HEAD_OF_LINE, &cluster(3, 4), preset, None);
        assert_eq!(
            times(&jobs, &run),
            [
                t("A", 0.0, 100.0),
                t("A2", 0.0, 100.0),
                t("A3", 0.0, 100.0),
                // B waits for a node to drain under every policy.
                t("B", 100.0, 150.0),
                c,
            ],
            "{preset}"
        );
    }
}

#[test]
fn jobs_run_back_to_back_when_each_needs_the_whole_cluster() {
    // One 8-GPU node: every gang needs all of it, so each starts when the last one ends,
    // under every policy.
    let csv = "job_id,submit_time,num_gpus,duration\nx,0,8,30\ny,5,8,20\nz,5,8,10.5\n";
    for p in policy::PRESETS {
        let (jobs, run) = replay(csv, &cluster(1, 8), p.name, None);
        let expected = if p.oracle_priority {
            // The oracle knows z is shorter.
            [t("x", 0.0, 30.0), t("y", 40.5, 60.5), t("z", 30.0, 40.5)]
        } else {
            [t("x", 0.0, 30.0), t("y", 30.0, 50.0), t("z", 50.0, 60.5)]
        };
        assert_eq!(times(&jobs, &run), expected, "{}", p.name);
        assert_eq!(run.timeline.last().map(|s| s.used_gpus), Some(0));
    }
}

/// One 8-GPU node. L needs it for 1000 s (8000 GPU-seconds: past `las`'s first level, 3600,
/// after 450 s); S needs it for 100 s and arrives at 500 s.
const LONG_THEN_SHORT: &str = "job_id,submit_time,num_gpus,duration\nL,0,8,1000\nS,500,8,100\n";

#[test]
fn las_preempts_a_demoted_job_for_a_new_one_which_resumes_from_its_checkpoint() {
    let c = cluster(1, 8);
    let (jobs, run) = replay(LONG_THEN_SHORT, &c, "fifo", None);
    assert_eq!(
        times(&jobs, &run),
        [t("L", 0.0, 1000.0), t("S", 1000.0, 1100.0)]
    );
    // las: the monitor's round at 510 s (every 15 s while S waits) notices L on level 1;
    // L's AM acknowledges and checkpoints in 30 s and gives the node back at 540 s; S runs
    // to 640 s; L resumes with the 490 s its checkpoint at 510 s left it.
    let (jobs, run) = replay(LONG_THEN_SHORT, &c, "las", None);
    assert_eq!(
        times(&jobs, &run),
        [t("L", 0.0, 1130.0), t("S", 540.0, 640.0)]
    );
    assert_eq!(run.preemptions, 1);
    assert_eq!(run.jobs[0].preemptions, 1);
    assert_eq!(
        run.lost_gpu_ms,
        8 * 30_000,
        "only the checkpoint's 30 s are lost"
    );
    // Each of L's eight 1-GPU members exited 30 s after the notice.
    assert_eq!(run.notice_to_exit_ms, vec![30_000; 8]);
    let used: u128 = run.jobs.iter().map(|r| r.gpu_ms_used).sum();
    let trace: u128 = jobs.iter().map(Job::gpu_ms).sum();
    assert_eq!(
        used,
        trace + run.lost_gpu_ms,
        "GPU time run = the trace's + the lost"
    );
}

#[test]
fn an_am_that_ignores_the_notice_is_killed_at_the_deadline_and_loses_its_work() {
    let c = cluster(1, 8);
    let jobs =
        trace::parse_csv(Path::new("t.csv"), LONG_THEN_SHORT, &Defaults::default()).expect("trace");
    let loaded = policy::load(
        None,
        Some(policy::find("las").expect("preset")),
        &[(
            "yarn.resourcemanager.monitor.capacity.preemption.max_wait_before_kill".into(),
            "0".into(),
        )],
        &c,
    )
    .expect("configuration");
    let opts = Options {
        ack_preemption: false,
        ..checked()
    };
    let run = replay::run(&jobs, &c, &loaded.rm, &opts, &mut |_| {}).expect("replay");
    // Killed at the notice (its deadline, 1 ms later), with no checkpoint in 510 s (they
    // are hourly): all of L's work is lost and it runs again whole after S.
    assert_eq!(
        times(&jobs, &run),
        [t("L", 0.0, 1610.001), t("S", 510.001, 610.001)]
    );
    assert_eq!(run.lost_gpu_ms, 8 * 510_001);
}

fn generated(jobs: usize, seed: u64) -> String {
    spindle_sls::generate::generate(&spindle_sls::generate::GenSpec {
        jobs,
        mean_interarrival_s: 40.0,
        gpu_mix: vec![(1, 0.5), (2, 0.15), (4, 0.15), (8, 0.15), (16, 0.05)],
        durations: spindle_sls::generate::Durations::Exponential { mean_s: 900.0 },
        users: 5,
        queues: vec![("a".into(), 0.6), ("b".into(), 0.4)],
        seed,
    })
    .expect("generate")
}

/// Two queues with guarantees of 60% and 40%, each allowed the whole cluster.
fn two_queue_conf(dir: &Path) {
    std::fs::write(
        dir.join("capacity-scheduler.xml"),
        r#"<configuration>
  <property><name>yarn.scheduler.capacity.root.queues</name><value>a,b</value></property>
  <property><name>yarn.scheduler.capacity.root.a.capacity</name><value>60</value></property>
  <property><name>yarn.scheduler.capacity.root.b.capacity</name><value>40</value></property>
  <property><name>yarn.scheduler.capacity.root.a.maximum-capacity</name><value>100</value></property>
  <property><name>yarn.scheduler.capacity.root.b.maximum-capacity</name><value>100</value></property>
  <property><name>yarn.scheduler.capacity.root.a.user-limit-factor</name><value>-1</value></property>
  <property><name>yarn.scheduler.capacity.root.b.user-limit-factor</name><value>-1</value></property>
</configuration>"#,
    )
    .expect("write conf");
}

#[test]
fn the_same_inputs_give_byte_identical_outputs_and_conserve_gpu_seconds() {
    let conf = tempfile::tempdir().expect("tmp");
    two_queue_conf(conf.path());
    let csv = generated(400, 11);
    let c = cluster(4, 8);
    let mut outputs = Vec::new();
    for _ in 0..2 {
        let (jobs, run) = replay(&csv, &c, "capacity", Some(conf.path()));
        let labels = report::Labels {
            policy: "capacity",
            trace: "t.csv",
            nodes: 4,
            timing: false,
        };
        let summary = report::summarize(&jobs, &run, &labels);
        // Rigid jobs: every GPU-second of the trace ran, no more, no less.
        assert_eq!(summary.finished, 400);
        assert_eq!(summary.gpu_seconds_used, summary.gpu_seconds_trace);
        assert!(summary.gpu_utilization > 0.0 && summary.gpu_utilization <= 1.0);
        assert!(summary.multi_gpu.jobs > 0 && summary.single_gpu.jobs > 0);
        let out = tempfile::tempdir().expect("tmp");
        report::write(out.path(), &jobs, &run, &summary, &[]).expect("write");
        let read = |f: &str| std::fs::read(out.path().join(f)).expect("read");
        outputs.push((read("summary.json"), read("jobs.csv"), read("timeline.csv")));
    }
    assert!(outputs[0] == outputs[1], "two runs differ");
}

#[test]
fn an_sls_json_trace_replays_its_tasks_as_independent_containers() {
    let dir = tempfile::tempdir().expect("tmp");
    let p = dir.path().join("sls.json");
    // Job 1: 3 one-GPU tasks of 40 s and 1 of 10 s; job 2 (20 s later): 2 of 30 s.
    std::fs::write(
        &p,
        r#"{"job.start.ms": 5000, "job.end.ms": 60000, "job.queue.name": "default", "job.id": "j1",
            "job.tasks": [{"container.count": 3, "container.start.ms": 5000, "container.end.ms": 45000, "container.gpus": 1},
                          {"container.start.ms": 5000, "container.end.ms": 15000, "container.gpus": 1}]}
           {"job.start.ms": 25000, "job.id": "j2",
            "job.tasks": [{"container.count": 2, "container.start.ms": 25000, "container.end.ms": 55000, "container.gpus": 1}]}"#,
    )
    .expect("write");
    let jobs = trace::read(&p, &Defaults::default()).expect("trace");
    let c = cluster(1, 4);
    let loaded = policy::load(None, None, &[], &c).expect("conf");
    replay::check_jobs(&jobs, &c, &loaded.rm).expect("valid");
    let run = replay::run(&jobs, &c, &loaded.rm, &checked(), &mut |_| {}).expect("run");
    // j1's four tasks fill the node; its short task frees a GPU at 10 s, so j2 (at 20 s)
    // gets one GPU then and its second at 40 s: it finishes at 70 s.
    assert_eq!(
        times(&jobs, &run),
        [t("j1", 0.0, 40.0), t("j2", 20.0, 70.0)]
    );
}

#[test]
fn a_gang_that_times_out_is_reported_and_its_gpus_are_not_counted() {
    let csv = "job_id,submit_time,num_gpus,duration\nlong,0,4,1000\nbig,1,8,10\n";
    let c = cluster(2, 4);
    let jobs = trace::parse_csv(Path::new("t.csv"), csv, &Defaults::default()).expect("trace");
    let loaded =
        policy::load(None, Some(policy::find("capacity").expect("p")), &[], &c).expect("conf");
    let opts = Options {
        gang_timeout_ms: Some(60_000),
        ..checked()
    };
    let run = replay::run(&jobs, &c, &loaded.rm, &opts, &mut |_| {}).expect("run");
    assert_eq!(run.jobs[0].outcome, Outcome::Finished);
    assert!(
        matches!(&run.jobs[1].outcome, Outcome::TimedOut(d) if d.contains("timed out")),
        "{:?}",
        run.jobs[1].outcome
    );
    assert_eq!(run.timeline.last().map(|s| s.pending_gpus), Some(0));
}

#[test]
fn a_gpu_model_constraint_keeps_the_gang_on_its_model() {
    let dir = tempfile::tempdir().expect("tmp");
    let nodes = dir.path().join("nodes.csv");
    std::fs::write(&nodes, "count,gpus,gpu_model\n2,4,A100\n1,8,H100\n").expect("write");
    let c = ClusterSpec::from_file(&nodes, &Uniform::default()).expect("nodes");
    let csv = "job_id,submit_time,num_gpus,duration,gpu_model\nh,0,8,10,H100\na,0,8,10,A100\n";
    let (jobs, run) = replay(csv, &c, "capacity", None);
    assert_eq!(times(&jobs, &run), [t("h", 0.0, 10.0), t("a", 0.0, 10.0)]);
    assert_eq!(run.jobs[0].nodes.len(), 1, "the H100 node holds all 8");
    assert_eq!(run.jobs[1].nodes.len(), 2, "the two A100 nodes");
}

#[test]
fn bad_input_is_named_by_line_and_nothing_runs() {
    let c = cluster(2, 8);
    let loaded = policy::load(None, None, &[], &c).expect("conf");
    // Malformed and negative rows are refused while reading.
    let err = trace::parse_csv(
        Path::new("bad.csv"),
        "submit_time,num_gpus,duration\n0,1,10\n5,one,10\n-3,1,10\n7,1\n",
        &Defaults::default(),
    )
    .expect_err("refused");
    let text = err.to_string();
    assert!(
        text.contains("line 3") && text.contains("num_gpus"),
        "{text}"
    );
    assert!(
        text.contains("line 4") && text.contains("negative"),
        "{text}"
    );
    assert!(
        text.contains("line 5") && text.contains("duration"),
        "{text}"
    );
    // A job larger than the cluster, and an unknown queue, against the cluster.
    let jobs = trace::parse_csv(
        Path::new("t.csv"),
        "submit_time,num_gpus,duration,queue\n0,1,10,default\n1,32,10,default\n2,1,10,nope\n",
        &Defaults::default(),
    )
    .expect("parses");
    let rows = replay::check_jobs(&jobs, &c, &loaded.rm).expect_err("refused");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].line, 3);
    assert!(matches!(
        rows[0].problem,
        RowProblem::LargerThanCluster {
            gpus: 32,
            cluster: 16
        }
    ));
    assert_eq!(rows[1].line, 4);
    assert!(matches!(&rows[1].problem, RowProblem::UnknownQueue { queue, .. } if queue == "nope"));
    // Gangs whose placement no cluster shape allows.
    let jobs = trace::parse_csv(
        Path::new("t.csv"),
        "submit_time,num_gpus,duration,placement\n0,3,10,SPREAD\n0,12,10,STRICT_PACK\n",
        &Defaults::default(),
    )
    .expect("parses");
    let shape_rows = replay::check_jobs(&jobs, &c, &loaded.rm).expect_err("refused");
    assert!(matches!(
        shape_rows[0].problem,
        RowProblem::SpreadWiderThanCluster {
            containers: 3,
            nodes: 2
        }
    ));
    assert!(matches!(
        shape_rows[1].problem,
        RowProblem::LargerThanAnyNode { .. }
    ));
    let e = SlsError::BadRows {
        path: "t.csv".into(),
        rows,
    };
    assert!(e.to_string().contains("nothing was replayed"), "{e}");
}

/// Found by the property test below (it looped in about one run in four): a job waited
/// forever under `fairshare` while the replay ticked.
const FAIRSHARE_LOOP: &str = "\
job_id,submit_time,num_gpus,duration,placement,queue
j0,17,1,14,,b
j1,169,1,50,PACK,b
j2,13,2,94,,a
j3,136,2,44,STRICT_PACK,a
j4,23,0,95,PACK,b
j5,54,1,80,SPREAD,b
j6,89,2,62,STRICT_PACK,b
j7,5,2,11,,b
j8,104,2,98,PACK,b
j9,126,4,6,STRICT_PACK,a
j10,116,0,64,PACK,b
j11,174,3,30,PACK,a
j12,24,8,100,PACK,b
j13,66,8,118,STRICT_PACK,b
j14,10,3,53,,b
j15,92,12,107,,b
";

#[test]
fn a_fairshare_replay_that_once_looped_finishes_every_job() {
    let conf = tempfile::tempdir().expect("tmp");
    two_queue_conf(conf.path());
    let (_, run) = replay(
        FAIRSHARE_LOOP,
        &cluster(3, 8),
        "fairshare",
        Some(conf.path()),
    );
    for r in &run.jobs {
        assert_eq!(r.outcome, Outcome::Finished);
    }
}

/// A job its queue's maximum can never hold, under a policy whose clock ticks while
/// anything waits: the replay ends (after a bounded idle stretch) and says why it waits.
#[test]
fn a_job_that_can_never_start_ends_the_replay_unfinished_with_its_reason() {
    let conf = tempfile::tempdir().expect("tmp");
    two_queue_conf(conf.path());
    let xml = conf.path().join("capacity-scheduler.xml");
    let text = std::fs::read_to_string(&xml).expect("conf");
    let text = text
        .replace(
            "capacity.root.a.capacity</name><value>60",
            "capacity.root.a.capacity</name><value>100",
        )
        .replace(
            "capacity.root.b.capacity</name><value>40",
            "capacity.root.b.capacity</name><value>0",
        )
        .replace(
            "root.b.maximum-capacity</name><value>100",
            "root.b.maximum-capacity</name><value>0",
        );
    std::fs::write(&xml, text).expect("conf");
    let csv = "job_id,submit_time,num_gpus,duration,queue\nok,0,2,10,a\nnever,0,1,10,b\n";
    let (_, run) = replay(csv, &cluster(3, 8), "fairshare", Some(conf.path()));
    assert_eq!(run.jobs[0].outcome, Outcome::Finished);
    match &run.jobs[1].outcome {
        Outcome::Unfinished(why) => assert!(!why.is_empty(), "a reason"),
        other => panic!("{other:?}"),
    }
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// A random job: (submit s, GPUs, duration s, placement, queue).
    fn job() -> impl Strategy<Value = (u32, u32, u32, usize, bool)> {
        (
            0..200u32,
            prop_oneof![
                Just(0u32),
                Just(1),
                Just(2),
                Just(3),
                Just(4),
                Just(8),
                Just(12)
            ],
            1..120u32,
            0..4usize,
            any::<bool>(),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// Whatever the trace and the preset: every job that fits the cluster finishes (no
        /// policy deadlocks), no node is ever over-allocated and every usage figure adds up
        /// (the core's sanity check after every step), the GPU-seconds run equal the
        /// trace's, and a gang runs whole.
        #[test]
        fn every_job_finishes_whole_and_gpu_seconds_are_conserved(
            jobs in proptest::collection::vec(job(), 1..30),
            preset in 0..policy::PRESETS.len(),
        ) {
            let conf = tempfile::tempdir().expect("tmp");
            two_queue_conf(conf.path());
            let mut csv = String::from("job_id,submit_time,num_gpus,duration,placement,queue\n");
            for (i, (t, g, d, p, q)) in jobs.iter().enumerate() {
                let placement = ["", "PACK", "SPREAD", "STRICT_PACK"][*p];
                // STRICT_PACK must fit one 8-GPU node, SPREAD three nodes (the replay
                // refuses the others before it starts).
                let g = match p {
                    3 => (*g).min(8),
                    2 => (*g).min(3),
                    _ => *g,
                };
                let q = if *q { "a" } else { "b" };
                csv.push_str(&format!("j{i},{t},{g},{d},{placement},{q}\n"));
            }
            let c = cluster(3, 8);
            let name = policy::PRESETS[preset].name;
            let (jobs, run) = replay(&csv, &c, name, Some(conf.path()));
            for (j, r) in jobs.iter().zip(&run.jobs) {
                prop_assert_eq!(&r.outcome, &Outcome::Finished, "{} under {}", j.id, name);
                let (s, f) = (r.start_ms.unwrap_or(0), r.finish_ms.unwrap_or(0));
                if r.preemptions == 0 {
                    prop_assert_eq!(f - s, j.tasks[0].duration_ms, "{} ran whole", j.id);
                } else {
                    prop_assert!(f - s >= j.tasks[0].duration_ms, "{} ran all its work", j.id);
                }
                prop_assert!(s >= j.submit_ms);
            }
            // Every GPU-second of the trace ran, plus exactly what preemption lost.
            let used: u128 = run.jobs.iter().map(|r| r.gpu_ms_used).sum();
            let trace: u128 = jobs.iter().map(Job::gpu_ms).sum();
            prop_assert_eq!(used, trace + run.lost_gpu_ms);
            prop_assert!(run.timeline.iter().all(|s| s.used_gpus <= 24 && s.used_gpus >= 0));
        }
    }
}

/// One 8-GPU node. R, rigid, holds 4 GPUs for 100 s; E is elastic (1 to 8 GPUs), 1000 s
/// of work at 8 GPUs, scaling linearly.
const ELASTIC: &str = "\
job_id,submit_time,num_gpus,duration,min_gpus,max_gpus
R,0,4,100,,
E,0,8,1000,1,8
";

#[test]
fn an_elastic_job_starts_on_what_is_free_grows_by_doubling_and_does_the_same_work() {
    let c = cluster(1, 8);
    let (jobs, run) = replay(ELASTIC, &c, "doubling", None);
    // E starts at once on the 4 free GPUs (1 -> 2 -> 4 in the round that admits it); when
    // R ends at 100 s it doubles to 8; the restart costs 10 s; the 8000 GPU-s of work less
    // the 400 done by then take 950 s more.
    let got = times(&jobs, &run);
    assert_eq!(got[1].1, 0.0);
    assert!((got[1].2 - 1060.0).abs() < 0.01, "{got:?}");
    assert_eq!(run.resizes, 1);
    // Rigid, E waits for R and runs its 1000 s at 8 GPUs.
    let jobs = trace::parse_csv(Path::new("t.csv"), ELASTIC, &Defaults::default()).expect("trace");
    let loaded = policy::load(None, Some(policy::find("doubling").expect("p")), &[], &c)
        .expect("configuration");
    let opts = Options {
        rigid: true,
        ..checked()
    };
    let run = replay::run(&jobs, &c, &loaded.rm, &opts, &mut |_| {}).expect("replay");
    assert_eq!(times(&jobs, &run)[1], ("E".to_string(), 100.0, 1100.0));
}

#[test]
fn an_elastic_job_shrinks_for_a_new_one_and_grows_back_when_it_ends() {
    // E runs at 8 when F (elastic, 1-8 GPUs, 100 s at 8) arrives at 100 s: under the
    // study's rule F gets its minimum first, so E halves to 4 and F starts on the 4 freed
    // (1 -> 2 -> 4); when F ends, E grows back to 8.
    let csv = "\
job_id,submit_time,num_gpus,duration,min_gpus,max_gpus
E,0,8,1000,1,8
F,100,8,100,1,8
";
    let c = cluster(1, 8);
    let (jobs, run) = replay(csv, &c, "doubling", None);
    let got = times(&jobs, &run);
    assert_eq!(run.resizes, 2, "E shrinks, then grows back");
    // F: 800 GPU-s of work at 4 GPUs from 100 s: 200 s.
    assert!((got[1].2 - 300.0).abs() < 0.01, "{got:?}");
    // E: 800 done by 100 s; at 4 GPUs from 110 s (restart) to 300 s: 760 more; grows back
    // at the first round after 300 s (310 s, 10 s rounds) and restarts until 320 s: 80 more
    // at 4 from 300 to 310; then 8000 - 1640 left at 8 GPUs: 795 s.
    assert!((got[0].2 - 1115.0).abs() < 0.01, "{got:?}");
    // Under doubling-by-gain, F (as long as E's rest) is not worth shrinking E for: it
    // waits for E, then runs at 8.
    let (jobs, run) = replay(csv, &c, "doubling-by-gain", None);
    let got = times(&jobs, &run);
    assert_eq!(run.resizes, 0);
    assert_eq!(got[0].2, 1000.0);
    assert_eq!(got[1], ("F".to_string(), 1000.0, 1100.0));
}

#[test]
fn fixed_allocations_scale_a_job_by_its_throughput_table() {
    let csv = "\
job_id,submit_time,num_gpus,duration,throughput
R,0,8,5040,1:318.0;2:576.2;4:1152.4;8:2177.8
";
    let jobs = trace::parse_csv(Path::new("t.csv"), csv, &Defaults::default()).expect("trace");
    let one = replay::fixed_allocation(&jobs, 1, None);
    assert_eq!(one[0].gpus(), 1);
    assert_eq!(
        one[0].tasks[0].duration_ms,
        (5_040_000.0f64 * 2177.8 / 318.0).round() as u64
    );
    let four = replay::fixed_allocation(&jobs, 4, None);
    assert_eq!(four[0].containers(), 4);
    assert!(four[0].is_gang());
    // A bad table is named with its row.
    let bad = "job_id,submit_time,num_gpus,duration,throughput\nR,0,8,10,1:x\n";
    match trace::parse_csv(Path::new("t.csv"), bad, &Defaults::default()) {
        Err(SlsError::BadRows { rows, .. }) => {
            assert!(
                matches!(rows[0].problem, RowProblem::BadThroughput(_)),
                "{rows:?}"
            )
        }
        other => panic!("{other:?}"),
    }
}
