//! CPU-sensitive jobs in a replay: one 8-GPU/24-CPU node (and a CPU node for the AMs), an
//! input-bound job beside a language model. Under `proportional` both run their trace
//! duration; under `adaptive` the RM moves the language model's spare CPUs to the
//! input-bound job, which finishes much sooner, while the other is no slower.

use std::path::Path;

use spindle_sls::cluster::{ClusterSpec, Uniform};
use spindle_sls::replay::{self, Options, Outcome, RunResult};
use spindle_sls::trace::{self, Defaults, Job};
use spindle_sls::{policy, report};

const TRACE: &str = "\
job_id,submit_time,num_gpus,duration,cpu_throughput
alexnet,0,4,3000,1:0.4;3:1;6:1.9;9:2.55;12:2.94
lstm,0,4,3000,1:1
";

fn replay(cpu_policy: &str) -> (Vec<Job>, RunResult) {
    replay_with(TRACE, "capacity", cpu_policy, true)
}

/// `ack`: the AMs answer a notice with a checkpoint (else the RM kills at once).
fn replay_with(
    trace_csv: &str,
    preset: &str,
    cpu_policy: &str,
    ack: bool,
) -> (Vec<Job>, RunResult) {
    let dir = tempfile::tempdir().expect("temp dir");
    let nodes = dir.path().join("nodes.csv");
    std::fs::write(
        &nodes,
        "count,gpus,vcores,memory_mb,rack\n1,8,24,1048576,/r1\n1,0,64,1048576,/am\n",
    )
    .expect("node file");
    let c = ClusterSpec::from_file(&nodes, &Uniform::default()).expect("cluster");
    let jobs =
        trace::parse_csv(Path::new("t.csv"), trace_csv, &Defaults::default()).expect("trace");
    let preset = policy::find(preset).expect("preset");
    let mut overrides = vec![(
        "spindle.scheduler.cpu-policy".to_string(),
        cpu_policy.to_string(),
    )];
    if !ack {
        overrides.push((
            "yarn.resourcemanager.monitor.capacity.preemption.max_wait_before_kill".into(),
            "0".into(),
        ));
    }
    let loaded = policy::load(None, Some(preset), &overrides, &c).expect("configuration");
    replay::check_jobs(&jobs, &c, &loaded.rm).expect("valid jobs");
    let opts = Options {
        check: true,
        timing: false,
        ack_preemption: ack,
        ..Options::default()
    };
    let run = replay::run(&jobs, &c, &loaded.rm, &opts, &mut |_| {}).expect("replay");
    (jobs, run)
}

fn jct(run: &RunResult, i: usize) -> f64 {
    let r = &run.jobs[i];
    assert_eq!(r.outcome, Outcome::Finished);
    r.finish_ms.expect("finished") as f64 / 1000.0
}

#[test]
fn adaptive_speeds_the_input_bound_job_and_slows_no_one() {
    let (_, prop) = replay("proportional");
    let (jobs, adapt) = replay("adaptive");
    // Proportional: 3 CPUs per GPU, each job its trace duration.
    assert!((jct(&prop, 0) - 3000.0).abs() < 1.0, "{}", jct(&prop, 0));
    assert!((jct(&prop, 1) - 3000.0).abs() < 1.0, "{}", jct(&prop, 1));
    // Adaptive: the language model keeps one CPU per GPU, AlexNet gets the other 20.
    assert!(
        jct(&adapt, 0) * 1.3 <= jct(&prop, 0),
        "alexnet {} vs {}",
        jct(&adapt, 0),
        jct(&prop, 0)
    );
    assert!(jct(&adapt, 1) <= jct(&prop, 1) * 1.05);
    let summary = |run: &RunResult, policy: &str| {
        report::summarize(
            &jobs,
            run,
            &report::Labels {
                policy,
                trace: "t.csv",
                nodes: 2,
                timing: false,
            },
        )
    };
    let s = summary(&adapt, "adaptive");
    let u = s.cpu_utilization.expect("a CPU figure");
    assert!(u > 0.0 && u <= 1.0, "{u}");
    assert!(s.resizes > 0);
    // At 3 CPUs per GPU AlexNet's GPUs compute 1/2.94 of the time, the LSTM's all of it:
    // (1/2.94 + 1) / 2 of what both held. Adaptive feeds AlexNet's GPUs better.
    let busy_prop = summary(&prop, "proportional")
        .gpu_busy
        .expect("a busy figure");
    assert!(
        (busy_prop - (1.0 / 2.94 + 1.0) / 2.0).abs() < 0.01,
        "{busy_prop}"
    );
    let busy_adapt = s.gpu_busy.expect("a busy figure");
    assert!(busy_adapt > busy_prop + 0.05, "{busy_adapt} vs {busy_prop}");
}

/// One 8-GPU node. L, CPU-sensitive, needs it for 1000 s at the proportional share (past
/// `las`'s first level after 450 s); S needs it for 100 s and arrives at 500 s.
const LONG_THEN_SHORT: &str = "\
job_id,submit_time,num_gpus,duration,cpu_throughput
L,0,8,1000,1:0.4;3:1;6:1.9
S,500,8,100,1:0.4;3:1;6:1.9
";

#[test]
fn a_preempted_cpu_sensitive_job_resumes_from_its_checkpoint() {
    // As for a job without a CPU table (tests/replay.rs): the monitor's round at 510 s
    // notices L, which checkpoints in 30 s and gives the node back at 540 s; S runs to
    // 640 s; L resumes with the 490 s of work its checkpoint at 510 s left it, at its
    // proportional pace, and does not start over.
    for cpu_policy in ["proportional", "adaptive"] {
        let (_, run) = replay_with(LONG_THEN_SHORT, "las", cpu_policy, true);
        assert_eq!(run.preemptions, 1, "{cpu_policy}");
        let s = &run.jobs[1];
        assert_eq!(s.start_ms, Some(540_000), "{cpu_policy}");
        assert_eq!(s.finish_ms, Some(640_000), "{cpu_policy}");
        assert!(
            (jct(&run, 0) - 1130.0).abs() < 1.0,
            "{cpu_policy}: L finished at {} s",
            jct(&run, 0)
        );
    }
}

#[test]
fn a_cpu_sensitive_job_killed_without_a_checkpoint_runs_again_whole() {
    // Killed at the notice (its deadline, 1 ms later) with no checkpoint in 510 s (they
    // are hourly): all of L's work is lost, whatever it had done by the notice.
    for cpu_policy in ["proportional", "adaptive"] {
        let (_, run) = replay_with(LONG_THEN_SHORT, "las", cpu_policy, false);
        assert_eq!(run.jobs[1].start_ms, Some(510_001), "{cpu_policy}");
        assert!(
            (jct(&run, 0) - 1610.001).abs() < 1.0,
            "{cpu_policy}: L finished at {} s",
            jct(&run, 0)
        );
    }
}
