//! The scheduler benchmark behind `spindle bench scheduler --nodes N`: it feeds the pure core
//! (the same [`RmCore`] the live RM runs) a large cluster, a three-level tree of 64 leaf
//! queues and 2,000 applications with 200,000 pending containers of mixed shapes, through
//! the same inputs the live RM gives it (node registrations, submissions, AM registration,
//! allocate calls, container completions in node heartbeats), and times it. Not a test: the
//! figures go to `docs/performance.md`.

use std::time::Instant;

use spindle_common::resource::GPU;
use spindle_common::states::{ContainerState, FinalApplicationStatus};
use spindle_common::token::TokenSecret;
use spindle_common::{NodeId, QueuePath, Resource};

use crate::core::queue_conf::{CapacitySpec, QueueSpec, SchedulerConf};
use crate::core::{
    AskUpdate, CoreConfig, LaunchSpec, NodeRegistration, ReportedContainer, RmCore, Submission,
    WorkCounts,
};

/// What to build.
#[derive(Debug, Clone)]
pub struct BenchSpec {
    pub nodes: usize,
    pub racks: usize,
    pub apps: usize,
    pub containers_per_app: u32,
    /// Container completions (each followed by one scheduling pass) in the steady phase.
    pub steady_events: usize,
    pub seed: u64,
    /// Run the preemption monitor (intra-queue too) in the steady phase's ticks.
    pub preemption: bool,
    /// Half the applications' asks carry placement constraints: a node attribute (`=`),
    /// anti-affinity to their own tag (NOTIN NODE), and an attribute `!=` with a node
    /// cardinality (AND); half the nodes have the attribute's value.
    pub constrained: bool,
    /// Every leaf's ordering policy; `None`: half the leaves `fifo`, half `fair`.
    pub ordering: Option<crate::core::queue_conf::OrderingPolicy>,
    /// The CPU policy of every partition (`spindle.scheduler.cpu-policy`); proportional
    /// when `None`.
    pub cpu_policy: Option<crate::core::CpuPolicy>,
}

impl BenchSpec {
    pub fn new(nodes: usize) -> Self {
        Self {
            nodes,
            racks: 40,
            apps: 2_000,
            containers_per_app: 100,
            steady_events: 20_000,
            seed: 42,
            preemption: false,
            constrained: false,
            ordering: None,
            cpu_policy: None,
        }
    }
}

/// The figures, printed as one JSON line.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BenchResult {
    pub nodes: usize,
    pub racks: usize,
    pub leaf_queues: usize,
    pub apps: usize,
    pub pending_containers: u64,
    /// Containers allocated while the backlog was fed in (allocate calls).
    pub fill_allocations: u64,
    pub fill_secs: f64,
    /// Allocations per second while the backlog is fed in and the cluster has room: the
    /// scheduler's throughput (allocate calls, placement, accounting, container records and
    /// their signed tokens).
    pub allocations_per_sec: f64,
    /// Allocations per second over the whole run, steady phase included (where most
    /// completions free room no pending shape fits, so passes end without placing).
    pub overall_allocations_per_sec: f64,
    /// Steady state: one container completes on a full cluster, one pass refills it.
    pub steady_allocations: u64,
    pub steady_allocations_per_sec: f64,
    pub pass_p50_us: f64,
    pub pass_p99_us: f64,
    pub pass_max_us: f64,
    /// Wall time per allocation while filling, in nanoseconds.
    pub ns_per_allocation: f64,
    /// Work per steady-state pass: applications looked at and node searches made.
    pub steady_apps_visited_per_pass: f64,
    pub steady_node_searches_per_pass: f64,
    /// What the core counted of its work while the backlog was fed in, and in the steady
    /// phase (the benchmark's own reads of the container table left out): deterministic.
    #[serde(serialize_with = "work_as_map")]
    pub work_fill: WorkCounts,
    #[serde(serialize_with = "work_as_map")]
    pub work_steady: WorkCounts,
}

/// Work counts as a JSON object of name to count (the core has no serde).
fn work_as_map<S: serde::Serializer>(w: &WorkCounts, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let named = w.named();
    let mut m = s.serialize_map(Some(named.len()))?;
    for (k, v) in named {
        m.serialize_entry(k, &v)?;
    }
    m.end()
}

/// A small deterministic PRNG (xorshift64*), so runs are repeatable without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// root -> 4 x 25% -> 4 x 25% -> 4 x 25% = 64 leaves, every queue elastic to 100%, users
/// unbounded by the user-limit factor (so the tree, not user limits, decides); leaves
/// ordered by `ordering`, or alternately `fifo` and `fair`.
fn tree(
    ordering: Option<crate::core::queue_conf::OrderingPolicy>,
) -> (SchedulerConf, Vec<QueuePath>) {
    let mut conf = SchedulerConf::single_default_queue();
    let mut root = QueueSpec::new(QueuePath::root(), CapacitySpec::Percent(100.0));
    let mut leaves = Vec::new();
    for a in 0..4 {
        let pa = QueuePath::root().child(&format!("d{a}"));
        let mut qa = QueueSpec::new(pa.clone(), CapacitySpec::Percent(25.0));
        for b in 0..4 {
            let pb = pa.child(&format!("t{b}"));
            let mut qb = QueueSpec::new(pb.clone(), CapacitySpec::Percent(25.0));
            for c in 0..4 {
                let pc = pb.child(&format!("q{c}"));
                let mut leaf = QueueSpec::new(pc.clone(), CapacitySpec::Percent(25.0));
                leaf.user_limit_factor = -1.0;
                leaf.max_am_resource_percent = 0.5;
                leaf.ordering = ordering.unwrap_or(if c % 2 == 0 {
                    crate::core::queue_conf::OrderingPolicy::Fifo
                } else {
                    crate::core::queue_conf::OrderingPolicy::Fair
                });
                qb.children.push(leaf);
                leaves.push(pc);
            }
            qa.children.push(qb);
        }
        root.children.push(qa);
    }
    conf.root = root;
    conf.max_applications = 100_000;
    (conf, leaves)
}

/// Mixed shapes: 1-GPU and 8-GPU training workers, 2-GPU inference, CPU-only preprocessing.
fn shape(i: u64) -> Resource {
    match i % 10 {
        0 => Resource::new(512 * 1024, 64).with(GPU, 8),
        1 | 2 => Resource::new(128 * 1024, 16).with(GPU, 2),
        3..=5 => Resource::new(64 * 1024, 8).with(GPU, 1),
        _ => Resource::new(16 * 1024, 4),
    }
}

/// The constraint of a constrained application's `k`-th ask (see [`BenchSpec::constrained`]).
fn bench_constraint(k: u64) -> crate::core::scheduler::placement::Constraint {
    use crate::core::scheduler::placement::{Constraint, Scope, TagScope, TagTarget};
    let model = |equal| Constraint::Attribute {
        name: "nm.yarn.io/gpu-model".into(),
        equal,
        values: vec!["H100".into()],
    };
    let own = |max| Constraint::Cardinality {
        scope: Scope::Node,
        target: TagTarget {
            scope: TagScope::This,
            tag: format!("t{k}"),
        },
        min: 0,
        max,
    };
    match k {
        0 => model(true),
        1 => own(0),
        _ => Constraint::And(vec![model(false), own(2)]),
    }
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// A core with `spec.nodes` 8-GPU nodes in `spec.racks` racks and `spec.apps` applications
/// spread over the 64 leaves, each AM placed, launched and registered: what both benchmarks
/// start from.
struct Setup {
    core: RmCore,
    attempts: Vec<spindle_common::ApplicationAttemptId>,
    leaves: usize,
    now: u64,
}

fn setup(spec: &BenchSpec, gang_timeout_ms: u64) -> Setup {
    let (sched, leaves) = tree(spec.ordering);
    let conf = CoreConfig {
        min_allocation: Resource::new(1024, 1),
        max_allocation: Resource::new(1024 * 1024, 96).with(GPU, 8),
        heartbeat_interval_ms: 1000,
        nm_expiry_ms: u64::MAX / 4,
        am_expiry_ms: u64::MAX / 4,
        am_max_attempts: 2,
        container_alloc_expiry_ms: u64::MAX / 4,
        max_completed_apps: 10_000,
        rm_address: "http://127.0.0.1:8088".into(),
        scheduler: sched,
        elastic: crate::core::ElasticConf::default(),
        cpu: crate::core::CpuConf {
            policy: spec.cpu_policy.unwrap_or_default(),
            ..crate::core::CpuConf::default()
        },
        distributed_labels: false,
        gang_timeout_ms,
        preemption: crate::core::PreemptionConf {
            enabled: spec.preemption,
            intra_queue: spec.preemption,
            min_runtime_ms: 0,
            ..crate::core::PreemptionConf::default()
        },
    };
    let secret = TokenSecret::from_hex("000102030405060708090a0b0c0d0e0f")
        .unwrap_or_else(|_| unreachable_secret());
    let mut core = RmCore::new(conf, 1, 0, secret);
    let now: u64 = 1_000;
    for i in 0..spec.nodes {
        let id = NodeId::new(format!("n{i:05}.r{:02}", i % spec.racks), 8042);
        core.register_node(
            NodeRegistration {
                id: id.clone(),
                http_address: id.to_string(),
                rack: format!("/rack{:02}", i % spec.racks),
                total: Resource::new(1024 * 1024, 96).with(GPU, 8),
                version: "bench".into(),
                containers: vec![],
                attributes: if spec.constrained {
                    std::collections::BTreeMap::from([(
                        "nm.yarn.io/gpu-model".to_string(),
                        if i % 2 == 0 { "H100" } else { "A100" }.to_string(),
                    )])
                } else {
                    Default::default()
                },
            },
            now,
        );
    }
    let _ = core.take_effects();
    // Submit every application; each AM is allocated at once, and registers.
    let mut attempts = Vec::with_capacity(spec.apps);
    for a in 0..spec.apps {
        let id = core.new_application();
        let sub = Submission {
            name: format!("bench-{a}"),
            queue: leaves[a % leaves.len()].to_string(),
            user: format!("user{}", a % 200),
            priority: 0,
            application_type: "BENCH".into(),
            tags: vec![],
            am_resource: Resource::new(2048, 1),
            am_launch: LaunchSpec {
                commands: vec!["am".into()],
                ..Default::default()
            },
            max_app_attempts: 1,
            keep_containers: false,
            unmanaged_am: false,
            groups: vec![],
            node_label_expression: None,
            am_node_label_expression: None,
            lifetime_secs: None,
            dependencies: Vec::new(),
        };
        if core.submit(id, sub, now).is_err() {
            continue;
        }
        for e in core.take_effects() {
            if let crate::core::Effect::LaunchAm {
                attempt, container, ..
            } = e
            {
                core.am_launched(&attempt, &container, Ok(()), now);
                let _ = core.am_register(&attempt, "am".into(), 0, String::new(), now);
                attempts.push(attempt);
            }
        }
    }
    Setup {
        core,
        attempts,
        leaves: leaves.len(),
        now,
    }
}

/// The `i`th application's asks: its containers in three shapes, each under its own
/// priority; every other one placed by tag constraints when `spec.constrained`.
fn app_asks(spec: &BenchSpec, i: usize) -> Vec<AskUpdate> {
    let per_shape = spec.containers_per_app / 3;
    let counts = [
        per_shape,
        per_shape,
        spec.containers_per_app - 2 * per_shape,
    ];
    let constrained = spec.constrained && i % 2 == 1;
    (0..3u64)
        .map(|k| AskUpdate {
            image: None,
            label: None,
            tags: if constrained {
                vec![format!("t{k}")]
            } else {
                Vec::new()
            },
            constraint: constrained.then(|| bench_constraint(k)),
            priority: 1 + k as i32,
            allocation_request_id: k as i64,
            resource_name: "*".into(),
            capability: shape(i as u64 * 3 + k),
            num_containers: counts[k as usize],
            relax_locality: true,
            gang: None,
            cpu: None,
        })
        .collect()
}

pub fn run(spec: &BenchSpec) -> BenchResult {
    let Setup {
        mut core,
        attempts,
        leaves,
        mut now,
    } = setup(spec, crate::core::DEFAULT_GANG_TIMEOUT_MS);
    let mut rng = Rng(spec.seed | 1);
    // Feed the backlog: every AM asks for its containers in one allocate call (three shapes
    // per application), and the core places what fits at once.
    let mut pending: u64 = 0;
    let mut allocated: u64 = 0;
    let work_start = core.work();
    let fill_start = Instant::now();
    for (i, att) in attempts.iter().enumerate() {
        let asks = app_asks(spec, i);
        pending += u64::from(spec.containers_per_app);
        if let Ok(r) = core.am_allocate(att, 0, asks, vec![], 0.0, now) {
            allocated += r.allocated.len() as u64;
        }
        now += 1;
    }
    let fill_secs = fill_start.elapsed().as_secs_f64();
    let fill_allocations = allocated;
    let work_filled = core.work();
    // Steady state: a random running worker completes (reported in its node's heartbeat);
    // the pass that follows refills the space.
    let mut live: Vec<(spindle_common::ContainerId, NodeId)> = core
        .containers()
        .values()
        .filter(|c| c.is_live() && !c.is_am)
        .map(|c| (c.id, c.node.clone()))
        .collect();
    // The benchmark's own walks of the container table are not the core's work.
    let mut own_walks = core.work().containers_walked - work_filled.containers_walked;
    let stats_before = core.scheduler().stats.clone();
    let mut passes = Vec::with_capacity(spec.steady_events);
    let mut steady_allocated: u64 = 0;
    let steady_start = Instant::now();
    for event in 0..spec.steady_events {
        if live.is_empty() {
            break;
        }
        // 30 ms of RM time per event: a tick every 100 events, so with the monitor on
        // (every 3 s) each tick runs a preemption round; the ticks count in the figures.
        let tick = event % 100 == 99;
        let i = rng.below(live.len() as u64) as usize;
        let (cid, node) = live.swap_remove(i);
        let before = core.counters().containers_allocated;
        let t = Instant::now();
        core.node_heartbeat(
            &node,
            true,
            String::new(),
            vec![ReportedContainer {
                id: cid,
                state: ContainerState::COMPLETE,
                exit_status: 0,
                diagnostics: String::new(),
                resource: Resource::zero(),
            }],
            now,
        );
        let killed_before = core.preemption().counters.containers_killed;
        if tick {
            core.tick(now);
        }
        passes.push(t.elapsed().as_secs_f64() * 1e6);
        let after = core.counters().containers_allocated;
        let new = after - before;
        steady_allocated += new;
        if new > 0 {
            // Pick up what was placed so it can complete later too.
            let walked = core.containers().walked();
            live.extend(
                core.containers()
                    .values()
                    .rev()
                    .filter(|c| c.is_live() && !c.is_am)
                    .take(new as usize)
                    .map(|c| (c.id, c.node.clone())),
            );
            own_walks += core.containers().walked() - walked;
        }
        if core.preemption().counters.containers_killed != killed_before {
            // Containers preempted by the round are gone (the benchmark's own bookkeeping:
            // done only when there were some, as it is not the scheduler's work).
            live.retain(|(c, _)| core.containers().get(c).is_some_and(|x| x.is_live()));
        }
        now += 30;
    }
    let steady_secs = steady_start.elapsed().as_secs_f64();
    let mut work_steady = core.work().since(&work_filled);
    work_steady.containers_walked -= own_walks;
    let stats = core.scheduler().stats.clone();
    let steady_passes = (stats.passes - stats_before.passes).max(1) as f64;
    let apps_per_pass = (stats.apps_visited - stats_before.apps_visited) as f64 / steady_passes;
    let searches_per_pass =
        (stats.node_searches - stats_before.node_searches) as f64 / steady_passes;
    // Let every AM finish, so a run also exercises teardown (not timed).
    for att in &attempts {
        let _ = core.am_finish(
            att,
            FinalApplicationStatus::SUCCEEDED,
            String::new(),
            String::new(),
            now,
        );
    }
    passes.sort_by(f64::total_cmp);
    let total_alloc = fill_allocations + steady_allocated;
    let total_secs = fill_secs + steady_secs;
    BenchResult {
        nodes: spec.nodes,
        racks: spec.racks,
        leaf_queues: leaves,
        apps: attempts.len(),
        pending_containers: pending,
        fill_allocations,
        fill_secs,
        allocations_per_sec: fill_allocations as f64 / fill_secs.max(1e-9),
        overall_allocations_per_sec: total_alloc as f64 / total_secs.max(1e-9),
        steady_allocations: steady_allocated,
        steady_allocations_per_sec: steady_allocated as f64 / steady_secs.max(1e-9),
        pass_p50_us: pct(&passes, 0.5),
        pass_p99_us: pct(&passes, 0.99),
        pass_max_us: passes.last().copied().unwrap_or(0.0),
        ns_per_allocation: fill_secs * 1e9 / (fill_allocations.max(1) as f64),
        steady_apps_visited_per_pass: apps_per_pass,
        steady_node_searches_per_pass: searches_per_pass,
        work_fill: work_filled.since(&work_start),
        work_steady,
    }
}

fn unreachable_secret() -> TokenSecret {
    // from_hex of a constant 16-byte string cannot fail; keep a non-panicking path anyway.
    TokenSecret::generate().unwrap_or_else(|_| std::process::abort())
}

/// The figures of the gang benchmark, printed as one JSON line.
#[derive(Debug, Clone, serde::Serialize)]
pub struct GangBenchResult {
    pub nodes: usize,
    pub apps: usize,
    pub gangs_asked: u64,
    pub gangs_placed_fill: u64,
    pub fill_secs: f64,
    /// Gang placements per second while the backlog is fed in.
    pub gang_placements_per_sec: f64,
    /// Steady state: a running gang ends, its application asks for a new one.
    pub steady_gang_placements: u64,
    pub steady_gang_placements_per_sec: f64,
    pub pass_p50_us: f64,
    pub pass_p99_us: f64,
    pub containers_in_gangs: u64,
    /// What the core counted of its work in each phase: deterministic.
    #[serde(serialize_with = "work_as_map")]
    pub work_fill: WorkCounts,
    #[serde(serialize_with = "work_as_map")]
    pub work_steady: WorkCounts,
}

/// Gangs of 1 to 32 one-GPU members (8 vcores, 64 GiB each) from every application, beside
/// CPU-only single asks, on N 8-GPU nodes: how fast whole gangs are placed.
pub fn run_gangs(spec: &BenchSpec) -> GangBenchResult {
    use crate::core::scheduler::gang::{GangPolicy, GangRequest};
    let Setup {
        mut core,
        attempts,
        mut now,
        ..
    } = setup(spec, u64::MAX / 4);
    let mut rng = Rng(spec.seed | 1);
    let sizes = [1u32, 2, 4, 8, 16, 32];
    let gang_ask = |size: u32, round: u64| AskUpdate {
        image: None,
        cpu: None,
        label: None,
        tags: Vec::new(),
        constraint: None,
        priority: 1,
        allocation_request_id: 1,
        resource_name: "*".into(),
        capability: Resource::new(64 * 1024, 8).with(GPU, 1),
        num_containers: size,
        relax_locality: true,
        gang: Some((
            format!("g{round}"),
            GangRequest {
                policy: GangPolicy::Pack,
                max_nodes: 0,
                timeout_ms: 0,
                hard: false,
                ..Default::default()
            },
        )),
    };
    let cpu_ask = AskUpdate {
        priority: 2,
        allocation_request_id: 2,
        capability: Resource::new(16 * 1024, 4),
        gang: None,
        ..gang_ask(20, 0)
    };
    let mut gangs_asked = 0u64;
    let mut placed = 0u64;
    let mut containers = 0u64;
    let mut app_size = Vec::with_capacity(attempts.len());
    let mut running: Vec<(usize, Vec<(spindle_common::ContainerId, NodeId)>)> = Vec::new();
    let work_start = core.work();
    let fill_start = Instant::now();
    for (i, att) in attempts.iter().enumerate() {
        let size = sizes[rng.below(sizes.len() as u64) as usize];
        app_size.push(size);
        gangs_asked += 1;
        if let Ok(r) = core.am_allocate(
            att,
            0,
            vec![gang_ask(size, 0), cpu_ask.clone()],
            vec![],
            0.0,
            now,
        ) {
            let members: Vec<_> = r
                .allocated
                .iter()
                .filter(|c| c.allocation_request_id == 1)
                .map(|c| (c.id, c.node_id.clone()))
                .collect();
            if !members.is_empty() {
                placed += 1;
                containers += members.len() as u64;
                running.push((i, members));
            }
        }
        now += 1;
    }
    let fill_secs = fill_start.elapsed().as_secs_f64();
    let fill_placed = placed;
    let work_filled = core.work();
    // Steady state: a random running gang ends; its application asks for a new one. Each
    // allocate call is one pass that may place this gang or any waiting one.
    let mut passes = Vec::new();
    let gangs_before = core.scheduler().stats.gangs_placed;
    let steady_start = Instant::now();
    for round in 1..=spec.steady_events.min(5_000) as u64 {
        if running.is_empty() {
            break;
        }
        let k = rng.below(running.len() as u64) as usize;
        let (app_idx, members) = running.swap_remove(k);
        let mut by_node: std::collections::BTreeMap<NodeId, Vec<ReportedContainer>> =
            Default::default();
        for (cid, node) in members {
            by_node.entry(node).or_default().push(ReportedContainer {
                id: cid,
                state: ContainerState::COMPLETE,
                exit_status: 0,
                diagnostics: String::new(),
                resource: Resource::zero(),
            });
        }
        for (node, reports) in by_node {
            core.node_heartbeat(&node, true, String::new(), reports, now);
        }
        let att = attempts[app_idx];
        let before = core.counters().containers_allocated;
        let t = Instant::now();
        let r = core.am_allocate(
            &att,
            0,
            vec![gang_ask(app_size[app_idx], round)],
            vec![],
            0.0,
            now,
        );
        passes.push(t.elapsed().as_secs_f64() * 1e6);
        let _ = before;
        if let Ok(r) = r {
            let members: Vec<_> = r
                .allocated
                .iter()
                .filter(|c| c.allocation_request_id == 1)
                .map(|c| (c.id, c.node_id.clone()))
                .collect();
            if !members.is_empty() {
                running.push((app_idx, members));
            }
        }
        now += 1;
    }
    let steady_secs = steady_start.elapsed().as_secs_f64();
    // Every gang placed in the steady phase, whichever application it belonged to.
    let steady_placed = core.scheduler().stats.gangs_placed - gangs_before;
    passes.sort_by(f64::total_cmp);
    GangBenchResult {
        nodes: spec.nodes,
        apps: attempts.len(),
        gangs_asked,
        gangs_placed_fill: fill_placed,
        fill_secs,
        gang_placements_per_sec: fill_placed as f64 / fill_secs.max(1e-9),
        steady_gang_placements: steady_placed,
        steady_gang_placements_per_sec: steady_placed as f64 / steady_secs.max(1e-9),
        pass_p50_us: pct(&passes, 0.5),
        pass_p99_us: pct(&passes, 0.99),
        containers_in_gangs: containers,
        work_fill: work_filled.since(&work_start),
        work_steady: core.work().since(&work_filled),
    }
}
