//! Policies are configurations the live RM also runs. A replay's configuration is the
//! `--conf-dir` files (as the RM reads them), then what the simulator must fill in where the
//! files are silent (GPUs as a resource, container maxima the simulated nodes can hold),
//! then a named preset (`--policy`), then `-D name=value` overrides. `spindle sls policies`
//! prints each preset's properties, so a preset can be deployed as written.

use std::path::Path;

use spindle_common::config::{keys, Configuration};
use spindle_resourcemanager::config::RmConfig;

use crate::cluster::ClusterSpec;
use crate::SlsError;

/// A named configuration: properties set on every leaf queue (`<leaf>` stands for the
/// leaf's path in `yarn.scheduler.capacity.<leaf>.<suffix>`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Preset {
    pub name: &'static str,
    pub summary: &'static str,
    pub leaf_props: &'static [(&'static str, &'static str)],
    /// Cluster-wide properties (yarn-site and capacity-scheduler globals).
    pub site_props: &'static [(&'static str, &'static str)],
    /// The simulator submits each job with a priority from its duration (the oracle).
    pub oracle_priority: bool,
}

/// The preemption monitor on, inside queues too, with a notice its AMs answer by
/// checkpointing, and a minimum runtime before a container may be taken back.
const MONITOR_WITH_NOTICE: &[(&str, &str)] = &[
    ("yarn.resourcemanager.scheduler.monitor.enable", "true"),
    (
        "yarn.resourcemanager.monitor.capacity.preemption.intra-queue-preemption.enabled",
        "true",
    ),
    (
        "yarn.resourcemanager.monitor.capacity.preemption.monitoring_interval",
        "15000",
    ),
    (
        "yarn.resourcemanager.monitor.capacity.preemption.max_wait_before_kill",
        "60000",
    ),
    ("spindle.preemption.min-runtime-ms", "60000"),
];

pub const PRESETS: &[Preset] = &[
    Preset {
        name: "fifo",
        summary: "strict FIFO over gangs: each leaf queue serves its applications in \
                  submission order and the first one waiting blocks all after it \
                  (head-of-line blocking, no backfill)",
        leaf_props: &[("ordering-policy", "fifo"), ("backfill", "false")],
        site_props: &[],
        oracle_priority: false,
    },
    Preset {
        name: "fifo-fair",
        summary: "strict order without backfill, but the order is fair (least-used \
                  application first)",
        leaf_props: &[("ordering-policy", "fair"), ("backfill", "false")],
        site_props: &[],
        oracle_priority: false,
    },
    Preset {
        name: "capacity",
        summary: "Spindle's default: the capacity scheduler with gang reservation and \
                  backfill (a gang that does not fit holds the nodes it will use while \
                  smaller work runs elsewhere), FIFO ordering within a leaf",
        leaf_props: &[("ordering-policy", "fifo"), ("backfill", "true")],
        site_props: &[],
        oracle_priority: false,
    },
    Preset {
        name: "capacity-fair",
        summary: "the capacity scheduler with gang reservation and backfill, fair \
                  ordering within a leaf (least-used application first)",
        leaf_props: &[("ordering-policy", "fair"), ("backfill", "true")],
        site_props: &[],
        oracle_priority: false,
    },
    Preset {
        name: "las",
        summary: "least attained service (Tiresias's discretized 2D-LAS): each leaf orders \
                  its applications by the GPU-seconds they have had (levels at 1 and 10 \
                  GPU-hours, FIFO within a level, promoted back after a long wait), with \
                  backfill and gang reservation; the preemption monitor on, inside queues \
                  too, so a new job takes GPUs back from a demoted one (with notice: its AM \
                  checkpoints first)",
        leaf_props: &[
            ("ordering-policy", "las"),
            ("ordering-policy.las.thresholds", "3600,36000"),
            ("ordering-policy.las.promotion-factor", "4"),
            ("backfill", "true"),
        ],
        site_props: MONITOR_WITH_NOTICE,
        oracle_priority: false,
    },
    Preset {
        name: "fairshare",
        summary: "fair share with memory: each leaf serves its users by decayed GPU usage \
                  over share (users who have used least first; least attained service \
                  among one user's own jobs; an age bound), with backfill and gang \
                  reservation; the preemption monitor on as under `las` (with notice: the \
                  AM checkpoints first)",
        leaf_props: &[("ordering-policy", "fairshare"), ("backfill", "true")],
        site_props: MONITOR_WITH_NOTICE,
        oracle_priority: false,
    },
    Preset {
        name: "doubling",
        summary: "elastic jobs sized by the dynamic-scheduling study's doubling heuristic: \
                  every elastic job (a trace row with min_gpus/max_gpus, or --make-elastic) \
                  gets its minimum first, then the free GPUs go in doublings to the job \
                  with the best predicted time saved per added GPU; jobs shrink when work \
                  waits; rigid jobs as under `capacity`",
        leaf_props: &[
            ("ordering-policy", "fifo"),
            ("backfill", "true"),
            ("elastic-policy", "doubling"),
        ],
        site_props: &[
            ("spindle.elastic.monitoring-interval-ms", "10000"),
            ("spindle.elastic.resize-interval-ms", "60000"),
        ],
        oracle_priority: false,
    },
    Preset {
        name: "doubling-by-gain",
        summary: "the doubling heuristic with one objective (the sum of completion times): \
                  free GPUs go, in doublings, to whichever saves most time per GPU, growing \
                  a running job or starting a waiting one at its minimum; a waiting job is \
                  started by shrinking others only when it saves more than they lose",
        leaf_props: &[
            ("ordering-policy", "fifo"),
            ("backfill", "true"),
            ("elastic-policy", "doubling-by-gain"),
        ],
        site_props: &[
            ("spindle.elastic.monitoring-interval-ms", "10000"),
            ("spindle.elastic.resize-interval-ms", "60000"),
        ],
        oracle_priority: false,
    },
    Preset {
        name: "doubling-adaptive",
        summary: "elastic jobs sized by whichever doubling rule suits them, each round: \
                  every job its minimum first (the study's rule) when they scale \
                  sublinearly (per-GPU throughput at their maximum below 75% of their \
                  minimum's), by gain when they scale almost linearly; no worse than the \
                  best fixed allocation on either of the study's throughput tables",
        leaf_props: &[
            ("ordering-policy", "fifo"),
            ("backfill", "true"),
            ("elastic-policy", "doubling-adaptive"),
        ],
        site_props: &[
            ("spindle.elastic.monitoring-interval-ms", "10000"),
            ("spindle.elastic.resize-interval-ms", "60000"),
        ],
        oracle_priority: false,
    },
    Preset {
        name: "sjf-oracle",
        summary: "a reference only the simulator offers: shortest job first, non-preemptive, \
                  with backfill and gang reservation; each job's priority is read from its \
                  duration in the trace (a live RM never knows it)",
        leaf_props: &[("ordering-policy", "fifo"), ("backfill", "true")],
        site_props: &[("yarn.cluster.max-application-priority", "2000000000")],
        oracle_priority: true,
    },
];

pub fn find(name: &str) -> Result<&'static Preset, SlsError> {
    PRESETS
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| SlsError::UnknownPolicy(name.into()))
}

/// `spindle sls policies`: every preset with the properties it stands for.
pub fn describe() -> String {
    let mut s = String::new();
    for p in PRESETS {
        s.push_str(&format!("{}\n  {}\n", p.name, p.summary));
        for (k, v) in p.leaf_props {
            s.push_str(&format!(
                "  {}<leaf-queue-path>.{k} = {v}\n",
                keys::CAPACITY_SCHEDULER_PREFIX
            ));
        }
        for (k, v) in p.site_props {
            s.push_str(&format!("  {k} = {v}\n"));
        }
        if p.oracle_priority {
            s.push_str("  (each job's priority: 2000000000 - its duration in seconds)\n");
        }
        s.push('\n');
    }
    s.push_str(
        "Without --policy the configuration is the --conf-dir files as they are (the live RM's\n\
         default is `capacity`). Properties are set on every leaf queue; -D name=value wins over both.\n",
    );
    s
}

/// Daemon-only settings that would make the replay read a file, and what the replay uses
/// instead: no cluster secret (no NM signs anything here) and `simple` web authentication
/// (no web server runs).
pub const DAEMON_ONLY: &[(&str, &str)] = &[
    (keys::CLUSTER_SECRET_FILE, ""),
    (keys::HADOOP_HTTP_AUTHENTICATION_TYPE, "simple"),
];

/// The configuration a replay runs, and the settings it filled in or changed, in order,
/// for the run to report.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub rm: RmConfig,
    pub applied: Vec<(String, String)>,
}

/// Loads the replay's configuration (see the module's documentation).
pub fn load(
    conf_dir: Option<&Path>,
    preset: Option<&Preset>,
    overrides: &[(String, String)],
    cluster: &ClusterSpec,
) -> Result<Loaded, SlsError> {
    let mut conf = match conf_dir {
        Some(dir) => Configuration::load_dir(dir)?,
        None => Configuration::new(),
    };
    let mut applied = Vec::new();
    // Files a daemon reads at start (the cluster secret, the web token key) are no part of
    // a scheduling decision: the replay does not read them, so a `conf/` written for the
    // daemons replays as it is, on a machine without those files.
    for (k, v) in DAEMON_ONLY {
        if conf.get_raw(k).is_some_and(|cur| cur.trim() != *v) {
            conf.set(k, v);
            applied.push(((*k).to_string(), (*v).to_string()));
        }
    }
    let largest = |f: fn(&crate::cluster::SimNode) -> i64| {
        cluster
            .nodes
            .iter()
            .map(f)
            .max()
            .unwrap_or(1)
            .max(1)
            .to_string()
    };
    let gpu_max = format!(
        "{}{}.{}",
        keys::RESOURCE_TYPES_PREFIX,
        spindle_common::resource::GPU,
        keys::RESOURCE_TYPE_MAXIMUM_ALLOCATION
    );
    let fill: [(String, String); 5] = [
        (
            keys::RESOURCE_TYPES.into(),
            spindle_common::resource::GPU.into(),
        ),
        (
            keys::CS_RESOURCE_CALCULATOR.into(),
            "org.apache.hadoop.yarn.util.resource.DominantResourceCalculator".into(),
        ),
        (
            keys::SCHEDULER_MAX_ALLOCATION_MB.into(),
            largest(|n| n.memory_mb),
        ),
        (
            keys::SCHEDULER_MAX_ALLOCATION_VCORES.into(),
            largest(|n| n.vcores),
        ),
        (gpu_max, largest(|n| n.gpus)),
    ];
    for (k, v) in fill {
        if conf.get_raw(&k).is_none() {
            conf.set(&k, &v);
            applied.push((k, v));
        }
    }
    if let Some(p) = preset {
        for (k, v) in p.site_props {
            conf.set(k, v);
            applied.push(((*k).to_string(), (*v).to_string()));
        }
        // The leaves come from the configuration as it stands.
        let leaves: Vec<String> = RmConfig::from_conf(&conf)?
            .core
            .scheduler
            .root
            .walk()
            .into_iter()
            .filter(|q| q.is_leaf())
            .map(|q| q.path.to_string())
            .collect();
        for leaf in leaves {
            for (suffix, v) in p.leaf_props {
                let k = format!("{}{leaf}.{suffix}", keys::CAPACITY_SCHEDULER_PREFIX);
                conf.set(&k, v);
                applied.push((k, (*v).to_string()));
            }
        }
    }
    for (k, v) in overrides {
        conf.set(k, v);
        applied.push((k.clone(), v.clone()));
    }
    Ok(Loaded {
        rm: RmConfig::from_conf(&conf)?,
        applied,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::Uniform;

    #[test]
    fn a_preset_sets_every_leaf_and_overrides_win() {
        let cluster = ClusterSpec::uniform(&Uniform::default()).expect("test");
        let l = load(None, Some(find("fifo").expect("test")), &[], &cluster).expect("test");
        let leaf = l.rm.core.scheduler.root.find("default").expect("test");
        assert!(!leaf.backfill);
        let l = load(
            None,
            Some(find("fifo").expect("test")),
            &[(
                "yarn.scheduler.capacity.root.default.backfill".into(),
                "true".into(),
            )],
            &cluster,
        )
        .expect("test");
        assert!(
            l.rm.core
                .scheduler
                .root
                .find("default")
                .expect("test")
                .backfill
        );
        assert!(matches!(find("sjf"), Err(SlsError::UnknownPolicy(_))));
        assert!(describe().contains("backfill = false"));
    }
}
