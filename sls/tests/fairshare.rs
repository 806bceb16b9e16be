//! Fair share in the simulator: the shipped `conf/` replays as it is (no daemon's secret
//! file needed), the trace's `user` column is read and bad names are refused by line, and
//! the `fairshare` preset serves a user who has used nothing before one who has used much,
//! which the fairness figures show.

use std::path::{Path, PathBuf};

use spindle_sls::cluster::{ClusterSpec, Uniform};
use spindle_sls::replay::{self, Options, Outcome, RunResult};
use spindle_sls::trace::{self, Defaults, Job, RowProblem};
use spindle_sls::{policy, SlsError};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace")
        .to_path_buf()
}

fn one_node(gpus: i64) -> ClusterSpec {
    ClusterSpec::uniform(&Uniform {
        nodes: 1,
        gpus_per_node: gpus,
        ..Uniform::default()
    })
    .expect("cluster")
}

fn run(jobs: &[Job], c: &ClusterSpec, preset: Option<&str>, conf: Option<&Path>) -> RunResult {
    let preset = preset.map(|p| policy::find(p).expect("preset"));
    let loaded = policy::load(conf, preset, &[], c).expect("configuration");
    replay::check_jobs(jobs, c, &loaded.rm).expect("valid jobs");
    let opts = Options {
        check: true,
        timing: false,
        ..Options::default()
    };
    replay::run(jobs, c, &loaded.rm, &opts, &mut |_| {}).expect("replay")
}

#[test]
fn the_shipped_conf_replays_as_it_is_without_the_daemons_secret_files() {
    let conf = repo().join("conf");
    let c = ClusterSpec::uniform(&Uniform {
        nodes: 4,
        gpus_per_node: 8,
        ..Uniform::default()
    })
    .expect("cluster");
    let loaded = policy::load(Some(&conf), None, &[], &c).expect("conf/ loads");
    // The cluster secret conf/yarn-site.xml names is not read (the file need not exist).
    assert!(loaded
        .applied
        .iter()
        .any(|(k, v)| k == "spindle.cluster.secret-file" && v.is_empty()));
    assert!(loaded.rm.cluster_secret.is_none());
    // Jobs of 1 to 8 GPUs in conf/'s queues, with containers within conf/'s maximum
    // allocation (8 GB, 8 vcores).
    let mut csv = String::from("submit_time,num_gpus,duration,queue,user,memory_mb,vcores\n");
    for i in 0..24 {
        let q = if i % 3 == 0 { "gpu" } else { "default" };
        csv.push_str(&format!(
            "{},{},{},{q},u{},4096,2\n",
            i * 30,
            1 << (i % 4),
            600 + i * 50,
            i % 5
        ));
    }
    let jobs = trace::parse_csv(Path::new("t.csv"), &csv, &Defaults::default()).expect("trace");
    let r = run(&jobs, &c, None, Some(&conf));
    assert!(r.jobs.iter().all(|j| j.outcome == Outcome::Finished));
}

#[test]
fn the_user_column_is_read_and_bad_names_are_refused_by_line() {
    let jobs = trace::parse_csv(
        Path::new("t.csv"),
        "submit_time,num_gpus,duration,user\n0,1,10,vc8\n1,1,10,\n2,1,10,alice@EXAMPLE\n",
        &Defaults::default(),
    )
    .expect("trace");
    let users: Vec<&str> = jobs.iter().map(|j| j.user.as_str()).collect();
    assert_eq!(users, ["vc8", "user", "alice@EXAMPLE"]);
    let err = trace::parse_csv(
        Path::new("t.csv"),
        "submit_time,num_gpus,duration,user\n0,1,10,ok\n0,1,10,a/b\n0,1,10,x=y\n0,1,10,\"a b\"\n",
        &Defaults::default(),
    )
    .expect_err("bad users");
    let SlsError::BadRows { rows, .. } = err else {
        panic!("{err}")
    };
    let lines: Vec<usize> = rows.iter().map(|r| r.line).collect();
    assert_eq!(lines, [3, 4, 5]);
    assert!(rows
        .iter()
        .all(|r| matches!(r.problem, RowProblem::BadUser(_))));
    assert!(rows[0].problem.to_string().contains("'a/b'"));
    let err = trace::parse_sls_json(
        Path::new("t.json"),
        r#"{"job.start.ms": 0, "job.end.ms": 10, "job.user": "bad user", "job.tasks": [{"container.start.ms": 0, "container.end.ms": 10}]}"#,
        &Defaults::default(),
    )
    .expect_err("bad user");
    assert!(matches!(err, SlsError::BadSlsJob { .. }), "{err}");
    assert!(err.to_string().contains("not a user name"), "{err}");
}

/// User `a` fills a 4-GPU node with eight 1,000 s jobs at 0; user `b` submits one at 10 s.
fn heavy_and_light() -> Vec<Job> {
    let mut csv = String::from("job_id,submit_time,num_gpus,duration,user\n");
    for i in 0..8 {
        csv.push_str(&format!("a{i},0,1,1000,a\n"));
    }
    csv.push_str("b0,10,1,1000,b\n");
    trace::parse_csv(Path::new("t.csv"), &csv, &Defaults::default()).expect("trace")
}

fn start_of(jobs: &[Job], r: &RunResult, id: &str) -> u64 {
    let i = jobs.iter().position(|j| j.id == id).expect("job");
    r.jobs[i].start_ms.expect("started") / 1000
}

#[test]
fn fairshare_serves_the_user_who_used_nothing_first_and_the_figures_show_it() {
    let jobs = heavy_and_light();
    let c = one_node(4);
    let fifo = run(&jobs, &c, Some("capacity"), None);
    let fair = run(&jobs, &c, Some("fairshare"), None);
    // Under FIFO, b waits behind a's four waiting jobs; under fair share it goes first
    // when the first GPUs free up.
    assert_eq!(start_of(&jobs, &fifo, "b0"), 2000);
    assert_eq!(start_of(&jobs, &fair, "b0"), 1000);
    for r in [&fifo, &fair] {
        assert!(r.jobs.iter().all(|j| j.outcome == Outcome::Finished));
    }
    // b arrived into a full node at 10 s and held what it asked for (1 GPU, under its
    // share of 2) at 1,000 s under fair share, at 2,000 s under FIFO.
    let (ff, fs) = (&fifo.fairness, &fair.fairness);
    assert_eq!((ff.users, fs.users), (2, 2));
    assert_eq!((ff.share_episodes, fs.share_episodes), (1, 1));
    assert_eq!(fs.time_to_share_s, Some(990.0));
    assert_eq!(ff.time_to_share_s, Some(1990.0));
    // While both waited, b had no usage: every such sample is (a's x, 0), Jain 1/2.
    assert_eq!(fs.jain_index, Some(0.5));
    assert_eq!(ff.jain_index, Some(0.5));
    assert_eq!((ff.samples, fs.samples), (3, 3), "{ff:?} {fs:?}");
    assert_eq!(fs.zero_usage_samples, fs.samples);
}
