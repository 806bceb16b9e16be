//! `spindle sls`: replay a GPU-cluster trace through the RM's own scheduler core in virtual
//! time (`spindle_sls`), and its helpers `generate`, `policies` and `compare`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::Context;
use spindle_sls::cluster::{ClusterSpec, Uniform};
use spindle_sls::generate::{self, GenSpec};
use spindle_sls::replay::{self, Options, Progress};
use spindle_sls::{compare, plot, policy, report, trace, SlsError};

use super::args::{Opt, UsageError};
use super::{parse_or_usage, usage_error, EXIT_OK};

pub const USAGE: &str = "\
usage: spindle sls --trace FILE [--policy NAME] [--conf-dir DIR] [-D name=value]... [--queue LEAF]
                   [--nodes N --gpus-per-node G --racks R --vcores-per-node V
                    --memory-mb-per-node M --gpu-model MODEL | --node-file FILE]
                   [--out DIR] [--check] [--no-timing] [--gang-timeout-s S]
                   [--checkpoint-interval-s S] [--checkpoint-cost-s S] [--ignore-preemption-notice]
                   [--make-elastic | --rigid | --fixed-gpus K] [--throughput TABLE]
                   [--restart-cost-s S] [--cpu-policy proportional|static|adaptive]
                   [--cpu-mix synergy [--seed S]]
       spindle sls generate --jobs N [--interarrival S] [--gpu-mix 1:0.6,8:0.4]
                   [--duration exp:MEAN_S|lognormal:MU,SIGMA|fixed:S] [--users N] [--queues a,b]
                   [--seed S] [--out FILE]
       spindle sls policies
       spindle sls compare DIR... [--out DIR]

Replays a trace of jobs through the ResourceManager's own scheduler core (the code the live RM
runs) with simulated nodes and one simulated AM per job, in virtual time.
  --trace FILE          CSV (submit_time,num_gpus,duration[,job_id,user,queue,vcores,memory_mb,
                        gpus_per_container,placement,gpu_model,priority,min_gpus,max_gpus,
                        throughput])
                        or YARN SLS JSON; every bad row is named and nothing runs
  --policy NAME         a preset over the configuration (`spindle sls policies` lists them)
  --conf-dir DIR        capacity-scheduler.xml / yarn-site.xml, as the RM reads them
  -D name=value         a property over both (repeatable)
  --queue LEAF          submit every job to this leaf queue, whatever the trace's `queue`
                        column says (to replay a trace against another cluster's queues)
  --nodes N             simulated nodes (default 16), --gpus-per-node (8), --racks (1),
                        --vcores-per-node (96), --memory-mb-per-node (1048576), --gpu-model
  --node-file FILE      CSV of nodes: count,host,rack,gpus,vcores,memory_mb,gpu_model
  --out DIR             where summary.json, jobs.csv, timeline.csv and the SVG charts go
                        (default sls-out)
  --container-vcores V, --container-memory-mb M
                        per container when the trace has no vcores/memory_mb (4, 16384)
  --am-vcores V, --am-memory-mb M   each job's AM container (1, 1024)
  --gang-timeout-s S    the timeout each gang's AM names (default: none, it waits)
  --checkpoint-interval-s S  each running gang checkpoints this often (default 3600; 0 never):
                        a gang killed without a newer checkpoint loses the work since
  --checkpoint-cost-s S  how long a checkpoint asked for by a preemption notice takes (30)
  --ignore-preemption-notice  AMs do not acknowledge notices: the RM kills at the deadline
                        (with -D ...preemption.max_wait_before_kill=0: at the notice)
  --make-elastic        every multi-container GPU job becomes elastic: min one container,
                        max its num_gpus (rows with min_gpus/max_gpus are elastic already)
  --rigid               run elastic rows rigid at their num_gpus (the fixed allocation)
  --fixed-gpus K        every GPU job rigid at K GPUs, its duration scaled to do the same work
  --throughput TABLE    elastic jobs' throughput by GPU count when the trace's `throughput`
                        column is empty, e.g. 1:318.0;2:576.2;4:1152.4;8:2177.8 (default:
                        linear): a job's work is duration x throughput at num_gpus
  --restart-cost-s S    what one resize costs an elastic job (default 10): the RM's
                        spindle.elastic.restart-cost-ms and the simulated job's pause
  --cpu-policy P         how GPU containers asking `auto` vcores get CPUs (the RM's
                        spindle.scheduler.cpu-policy): proportional (default), static or
                        adaptive; jobs with a `cpu_throughput` table ask `auto`, and their
                        duration is their length at the node's CPUs per GPU
  --cpu-mix synergy     every GPU job without a `cpu_throughput` table gets one drawn from
                        Synergy's model mix (seeded by --seed, default 42)
  --check               run the core's sanity check after every step (slow)
  --no-timing           leave the wall-clock figures out, so two runs are byte-identical
  --quiet               no progress bar";

pub const OPTS: &[Opt] = &[
    Opt::one("trace", &[]),
    Opt::one("policy", &[]),
    Opt::one("queue", &[]),
    Opt::repeated("D", &["define"]),
    Opt::one("nodes", &[]),
    Opt::one("gpus-per-node", &[]),
    Opt::one("racks", &[]),
    Opt::one("vcores-per-node", &[]),
    Opt::one("memory-mb-per-node", &[]),
    Opt::one("gpu-model", &[]),
    Opt::one("node-file", &[]),
    Opt::one("out", &[]),
    Opt::one("container-vcores", &[]),
    Opt::one("container-memory-mb", &[]),
    Opt::one("am-vcores", &[]),
    Opt::one("am-memory-mb", &[]),
    Opt::one("gang-timeout-s", &[]),
    Opt::one("checkpoint-interval-s", &[]),
    Opt::one("checkpoint-cost-s", &[]),
    Opt::flag("ignore-preemption-notice", &[]),
    Opt::flag("make-elastic", &[]),
    Opt::flag("rigid", &[]),
    Opt::one("fixed-gpus", &[]),
    Opt::one("throughput", &[]),
    Opt::one("restart-cost-s", &[]),
    Opt::one("cpu-policy", &[]),
    Opt::one("cpu-mix", &[]),
    Opt::flag("check", &[]),
    Opt::flag("no-timing", &[]),
    Opt::flag("quiet", &[]),
    // generate
    Opt::one("jobs", &[]),
    Opt::one("interarrival", &[]),
    Opt::one("gpu-mix", &[]),
    Opt::one("duration", &[]),
    Opt::one("users", &[]),
    Opt::one("queues", &[]),
    Opt::one("seed", &[]),
];

pub async fn run(args: Vec<String>) -> anyhow::Result<u8> {
    let Some(p) = parse_or_usage(&args, OPTS, USAGE)? else {
        return Ok(EXIT_OK);
    };
    // The simulator is synchronous and single-threaded: keep it off the runtime's workers.
    tokio::task::spawn_blocking(move || dispatch(p))
        .await
        .context("the simulator task failed")?
}

fn dispatch(p: super::args::Parsed) -> anyhow::Result<u8> {
    let sub = p.positionals.first().map(String::as_str);
    match sub {
        Some("policies") => {
            say_raw!("{}", policy::describe());
            Ok(EXIT_OK)
        }
        Some("generate") => generate_cmd(&p),
        Some("compare") => compare_cmd(&p),
        Some("run") | None => replay_cmd(&p),
        Some(other) => Err(usage_error(
            UsageError::Other(format!(
                "unknown sls command '{other}' (run, generate, policies, compare)"
            )),
            USAGE,
        )),
    }
}

fn num<T: std::str::FromStr>(
    p: &super::args::Parsed,
    opt: &'static str,
) -> anyhow::Result<Option<T>> {
    p.parse::<T>(opt).map_err(|e| usage_error(e, USAGE))
}

fn replay_cmd(p: &super::args::Parsed) -> anyhow::Result<u8> {
    let Some(trace_path) = p.value("trace").map(PathBuf::from) else {
        return Err(usage_error(
            UsageError::Other("give --trace FILE (`spindle sls generate` makes one)".into()),
            USAGE,
        ));
    };
    let cluster = cluster_of(p)?;
    let mut defaults = trace::Defaults::default();
    if let Some(v) = num::<i64>(p, "container-vcores")? {
        defaults.vcores = v.max(1);
    }
    if let Some(v) = num::<i64>(p, "container-memory-mb")? {
        defaults.memory_mb = v.max(1);
    }
    let mut opts = options_of(p)?;
    let fixed_gpus = num::<u32>(p, "fixed-gpus")?;
    if fixed_gpus == Some(0) {
        anyhow::bail!("--fixed-gpus must be at least 1");
    }
    if [p.has("make-elastic"), p.has("rigid"), fixed_gpus.is_some()]
        .iter()
        .filter(|x| **x)
        .count()
        > 1
    {
        anyhow::bail!("--make-elastic, --rigid and --fixed-gpus exclude each other");
    }
    let mut overrides = p
        .values("D")
        .iter()
        .map(|d| {
            d.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .with_context(|| format!("-D takes name=value, got '{d}'"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    if let Some(cpu) = p.value("cpu-policy") {
        overrides.push((
            spindle_common::config::keys::CPU_POLICY.to_string(),
            cpu.to_string(),
        ));
    }
    let preset = p.value("policy").map(policy::find).transpose()?;
    let conf_dir = p.value("conf-dir").map(PathBuf::from);
    let mut loaded = policy::load(conf_dir.as_deref(), preset, &overrides, &cluster)?;
    opts.oracle_priority = preset.is_some_and(|p| p.oracle_priority);
    // The RM's resize threshold is the simulated jobs' real restart cost.
    loaded.rm.core.elastic.restart_cost_ms = opts.restart_cost_ms;
    let mut jobs = trace::read(&trace_path, &defaults)?;
    if let Some(q) = p.value("queue") {
        jobs.iter_mut().for_each(|j| j.queue = q.to_string());
    }
    match p.value("cpu-mix") {
        None => {}
        Some("synergy") => {
            let seed = num::<u64>(p, "seed")?.unwrap_or(42);
            let n = spindle_sls::synergy::assign(&mut jobs, seed);
            say!("cpu-mix: {n} GPU jobs drew a model from Synergy's mix (seed {seed})");
        }
        Some(other) => anyhow::bail!("--cpu-mix takes synergy, got '{other}'"),
    }
    if let Some(k) = fixed_gpus {
        jobs = replay::fixed_allocation(&jobs, k, opts.throughput.as_ref());
    }
    if p.has("make-elastic") {
        replay::make_elastic(&mut jobs);
    }
    replay::check_jobs(&jobs, &cluster, &loaded.rm).map_err(|rows| SlsError::BadRows {
        path: trace_path.clone(),
        rows,
    })?;
    let out = PathBuf::from(p.value("out").unwrap_or("sls-out"));
    let policy_name = preset.map_or_else(
        || match &conf_dir {
            Some(d) => format!("conf:{}", d.display()),
            None => "default".to_string(),
        },
        |pr| pr.name.to_string(),
    );
    say!(
        "Replaying {} jobs ({:.0} GPU-hours) from {} on {} nodes / {} GPUs, policy {policy_name}",
        jobs.len(),
        jobs.iter().map(|j| j.gpu_ms() as f64).sum::<f64>() / 3.6e6,
        trace_path.display(),
        cluster.nodes.len(),
        cluster.total_gpus()
    );
    for (k, v) in &loaded.applied {
        say!("  set {k}={v}");
    }
    let bar = progress_bar(p, jobs.len());
    let mut on_progress = |pr: Progress| {
        if let Some(b) = &bar {
            b.set_position(pr.jobs_done as u64);
            b.set_message(format!("{:.1} h", pr.sim_ms as f64 / 3.6e6));
        }
    };
    let result = replay::run(&jobs, &cluster, &loaded.rm, &opts, &mut on_progress)?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let summary = report::summarize(
        &jobs,
        &result,
        &report::Labels {
            policy: &policy_name,
            trace: &trace_path.display().to_string(),
            nodes: cluster.nodes.len(),
            timing: opts.timing,
        },
    );
    report::write(&out, &jobs, &result, &summary, &loaded.applied)?;
    let jct: Vec<f64> = jobs
        .iter()
        .zip(&result.jobs)
        .filter_map(|(j, r)| {
            r.finish_ms
                .map(|f| f.saturating_sub(j.submit_ms) as f64 / 1000.0)
        })
        .collect();
    plot::draw(
        &out,
        &[plot::Series {
            label: policy_name.clone(),
            timeline: &result.timeline,
            jct_s: &jct,
            total_gpus: result.total_gpus,
        }],
    )?;
    tell_summary(&summary, &out);
    Ok(EXIT_OK)
}

/// The simulated cluster: `--node-file`, or uniform nodes as the options say.
fn cluster_of(p: &super::args::Parsed) -> anyhow::Result<ClusterSpec> {
    let mut uniform = Uniform::default();
    if let Some(n) = num::<usize>(p, "nodes")? {
        uniform.nodes = n;
    }
    if let Some(n) = num::<i64>(p, "gpus-per-node")? {
        uniform.gpus_per_node = n;
    }
    if let Some(n) = num::<usize>(p, "racks")? {
        uniform.racks = n;
    }
    if let Some(n) = num::<i64>(p, "vcores-per-node")? {
        uniform.vcores_per_node = n;
    }
    if let Some(n) = num::<i64>(p, "memory-mb-per-node")? {
        uniform.memory_mb_per_node = n;
    }
    uniform.gpu_model = p.value("gpu-model").map(str::to_string);
    if uniform.gpus_per_node < 0 || uniform.vcores_per_node < 1 || uniform.memory_mb_per_node < 1 {
        anyhow::bail!(
            "--gpus-per-node must be >= 0, --vcores-per-node and --memory-mb-per-node >= 1"
        );
    }
    Ok(match p.value("node-file") {
        Some(f) => ClusterSpec::from_file(Path::new(f), &uniform)?,
        None => ClusterSpec::uniform(&uniform)?,
    })
}

/// The replay's options as the command line gives them.
fn options_of(p: &super::args::Parsed) -> anyhow::Result<Options> {
    let mut opts = Options {
        check: p.has("check"),
        timing: !p.has("no-timing"),
        ..Options::default()
    };
    if let Some(v) = num::<i64>(p, "am-vcores")? {
        opts.am_vcores = v.max(1);
    }
    if let Some(v) = num::<i64>(p, "am-memory-mb")? {
        opts.am_memory_mb = v.max(1);
    }
    if let Some(s) = num::<f64>(p, "gang-timeout-s")? {
        if !(s.is_finite() && s > 0.0) {
            anyhow::bail!("--gang-timeout-s must be a positive number of seconds");
        }
        opts.gang_timeout_ms = Some((s * 1000.0) as u64);
    }
    for (opt, slot) in [
        ("checkpoint-interval-s", &mut opts.checkpoint_interval_ms),
        ("checkpoint-cost-s", &mut opts.checkpoint_cost_ms),
    ] {
        if let Some(s) = num::<f64>(p, opt)? {
            if !(s.is_finite() && s >= 0.0) {
                anyhow::bail!("--{opt} must be a number of seconds, 0 or more");
            }
            *slot = (s * 1000.0) as u64;
        }
    }
    opts.ack_preemption = !p.has("ignore-preemption-notice");
    opts.rigid = p.has("rigid");
    if let Some(t) = p.value("throughput") {
        opts.throughput =
            Some(
                trace::parse_throughput(t).map_err(|reason| SlsError::BadOption {
                    option: "--throughput",
                    expected: "GPUS:VALUE pairs such as 1:318.0;2:576.2",
                    value: reason,
                })?,
            );
    }
    if let Some(s) = num::<f64>(p, "restart-cost-s")? {
        if !(s.is_finite() && s >= 0.0) {
            anyhow::bail!("--restart-cost-s must be a number of seconds, 0 or more");
        }
        opts.restart_cost_ms = (s * 1000.0) as u64;
    }
    Ok(opts)
}

/// A progress bar on a terminal, unless `--quiet`.
fn progress_bar(p: &super::args::Parsed, jobs: usize) -> Option<indicatif::ProgressBar> {
    (!p.has("quiet") && std::io::stderr().is_terminal()).then(|| {
        let b = indicatif::ProgressBar::new(jobs as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {pos}/{len} jobs done, simulated {msg} [{elapsed}]",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    })
}

/// The closing lines: what finished, how fast, what preemption cost, where the files are.
fn tell_summary(summary: &report::Summary, out: &Path) {
    say!(
        "{} of {} jobs finished ({} rejected, {} timed out, {} failed, {} never placed)",
        summary.finished,
        summary.jobs,
        summary.rejected,
        summary.timed_out,
        summary.failed,
        summary.unfinished
    );
    say!(
        "avg JCT {:.1} s (p50 {:.1}, p99 {:.1}), avg queue {:.1} s, makespan {:.0} s, GPU utilization {:.1}%",
        summary.avg_jct_s,
        summary.p50_jct_s,
        summary.p99_jct_s,
        summary.avg_queue_s,
        summary.makespan_s,
        summary.gpu_utilization * 100.0
    );
    if let (Some(busy), Some(cpu), Some(stranded)) = (
        summary.gpu_busy,
        summary.cpu_utilization,
        summary.gpus_stranded,
    ) {
        say!(
            "CPU-sensitive jobs' GPUs computed {:.1}% of the time they were held (the rest waiting on input CPUs); GPU nodes' CPUs {:.1}% used; {:.3}% of GPU-seconds stranded without a free CPU",
            busy * 100.0,
            cpu * 100.0,
            stranded * 100.0
        );
    }
    if summary.preemptions > 0 {
        say!(
            "{} preemptions: {:.1} GPU-hours of work lost ({:.2}% of the GPU-hours used); notice to exit {:.1} s on average, {:.1} s at most",
            summary.preemptions,
            summary.lost_gpu_seconds / 3600.0,
            summary.lost_fraction * 100.0,
            summary.notice_to_exit_avg_s,
            summary.notice_to_exit_max_s
        );
    }
    let f = &summary.fairness;
    if let Some(j) = f.jain_index {
        say!(
            "fairness over {} users: Jain index {j:.3} (lowest {:.3}), max/min {}, {} arrivals into a full cluster held their share after {} s on average ({} s at most)",
            f.users,
            f.jain_min.unwrap_or(j),
            f.max_min_ratio.map_or("-".into(), |r| format!("{r:.2}")),
            f.share_episodes,
            f.time_to_share_s.map_or("-".into(), |t| format!("{t:.0}")),
            f.time_to_share_max_s.map_or("-".into(), |t| format!("{t:.0}")),
        );
    }
    if let (Some(p50), Some(p99), Some(w)) = (
        summary.decision_p50_us,
        summary.decision_p99_us,
        summary.wall_s,
    ) {
        say!(
            "{} scheduler decisions, p50 {p50:.0} us, p99 {p99:.0} us; replayed in {w:.1} s",
            summary.scheduler_decisions
        );
    }
    say!(
        "Wrote {}/{{summary.json, jobs.csv, timeline.csv, settings.txt, gpus.svg, queue.svg, jct_cdf.svg}}",
        out.display()
    );
}

fn generate_cmd(p: &super::args::Parsed) -> anyhow::Result<u8> {
    let mut spec = GenSpec::default();
    if let Some(n) = num::<usize>(p, "jobs")? {
        spec.jobs = n;
    }
    if let Some(s) = num::<f64>(p, "interarrival")? {
        spec.mean_interarrival_s = s;
    }
    if let Some(m) = p.value("gpu-mix") {
        spec.gpu_mix = generate::parse_gpu_mix(m)?;
    }
    if let Some(d) = p.value("duration") {
        spec.durations = generate::parse_durations(d)?;
    }
    if let Some(n) = num::<usize>(p, "users")? {
        spec.users = n.max(1);
    }
    if let Some(q) = p.value("queues") {
        spec.queues = generate::parse_queues(q)?;
    }
    if let Some(s) = num::<u64>(p, "seed")? {
        spec.seed = s;
    }
    let text = generate::generate(&spec)?;
    match p.value("out") {
        Some(f) => {
            std::fs::write(f, &text).with_context(|| format!("cannot write {f}"))?;
            eprintln!("Wrote {} jobs to {f} (seed {})", spec.jobs, spec.seed);
        }
        None => say_raw!("{text}"),
    }
    Ok(EXIT_OK)
}

fn compare_cmd(p: &super::args::Parsed) -> anyhow::Result<u8> {
    let dirs: Vec<&Path> = p.positionals[1..].iter().map(Path::new).collect();
    if dirs.is_empty() {
        return Err(usage_error(
            UsageError::Other("give the output directories of the runs to compare".into()),
            USAGE,
        ));
    }
    let runs = compare::load(&dirs)?;
    say_raw!("{}", compare::table(&runs));
    let out = PathBuf::from(p.value("out").unwrap_or("sls-compare"));
    compare::draw(&out, &runs)?;
    say!(
        "Wrote the overlaid charts to {}/{{gpus.svg, queue.svg, jct_cdf.svg}}",
        out.display()
    );
    Ok(EXIT_OK)
}
