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
    let dir = tempfile::tempdir().expect("temp dir");
    let nodes = dir.path().join("nodes.csv");
    std::fs::write(
        &nodes,
        "count,gpus,vcores,memory_mb,rack\n1,8,24,1048576,/r1\n1,0,64,1048576,/am\n",
    )
    .expect("node file");
    let c = ClusterSpec::from_file(&nodes, &Uniform::default()).expect("cluster");
    let jobs = trace::parse_csv(Path::new("t.csv"), TRACE, &Defaults::default()).expect("trace");
    let preset = policy::find("capacity").expect("preset");
    let overrides = vec![(
        "spindle.scheduler.cpu-policy".to_string(),
        cpu_policy.to_string(),
    )];
    let loaded = policy::load(None, Some(preset), &overrides, &c).expect("configuration");
    replay::check_jobs(&jobs, &c, &loaded.rm).expect("valid jobs");
    let opts = Options {
        check: true,
        timing: false,
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
    let s = report::summarize(
        &jobs,
        &adapt,
        &report::Labels {
            policy: "adaptive",
            trace: "t.csv",
            nodes: 2,
            timing: false,
        },
    );
    let u = s.cpu_utilization.expect("a CPU figure");
    assert!(u > 0.0 && u <= 1.0, "{u}");
    assert!(s.resizes > 0);
}
