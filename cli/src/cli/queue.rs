//! `spindle queue -status QUEUE | -list [PARENT|all]`, as `yarn queue`, and
//! `-fairshare [QUEUE]` (Slurm's `sshare`).

use anyhow::Context;

use super::args::{Opt, UsageError};
use spindle_appmaster_sdk::rm_client::RmClient;
use spindle_common::records::cluster::{CapacitySchedulerInfo, CapacitySchedulerQueueInfo};

use super::format::{format_fairshare, format_queue_list, format_queue_status};
use super::{parse_or_usage, rm_client, usage_error, EXIT_OK, EXIT_USAGE};

pub const USAGE: &str = "\
usage: spindle queue -status QUEUE | -list [PARENT|all] | -fairshare [QUEUE]
                    [--rm-address HOST:PORT] [--conf-dir DIR]
  -status QUEUE     print the queue's information (a leaf name such as default, or a full
                    path such as root.default)
  -list [PARENT]    a table of PARENT's child queues; every queue without PARENT or with all
  -fairshare [QUEUE] decayed usage per queue and user (Slurm's sshare): shares, raw and
                    decayed usage, effective usage, level fair share and fair-share factor;
                    QUEUE and the queues below it, every queue without QUEUE";

pub const OPTS: &[Opt] = &[
    Opt::one("status", &[]),
    Opt::flag("list", &[]),
    Opt::flag("fairshare", &[]),
];

pub async fn run(args: Vec<String>) -> anyhow::Result<u8> {
    let Some(p) = parse_or_usage(&args, OPTS, USAGE)? else {
        return Ok(EXIT_OK);
    };
    if p.has("list") {
        let parent = match p.positionals.as_slice() {
            [] => None,
            [one] if one.eq_ignore_ascii_case("all") => None,
            [one] => Some(one.trim().to_string()),
            _ => {
                return Err(usage_error(
                    UsageError::Other("-list takes at most one parent queue".into()),
                    USAGE,
                ))
            }
        };
        let rm = rm_client(&p)?;
        return list(&rm, parent.as_deref()).await;
    }
    if p.has("fairshare") {
        let under = match p.positionals.as_slice() {
            [] => None,
            [one] => Some(one.trim().to_string()),
            _ => {
                return Err(usage_error(
                    UsageError::Other("-fairshare takes at most one queue".into()),
                    USAGE,
                ))
            }
        };
        let rm = rm_client(&p)?;
        return fairshare(&rm, under.as_deref()).await;
    }
    let Some(name) = p.value("status").map(str::trim) else {
        return Err(usage_error(
            UsageError::Other(
                "give -status QUEUE, -list [PARENT|all] or -fairshare [QUEUE]".into(),
            ),
            USAGE,
        ));
    };
    let rm = rm_client(&p)?;
    let info = rm
        .scheduler()
        .await
        .with_context(|| format!("cannot read the queues at {}", rm.address()))?;
    let found = info.queues.as_ref().and_then(|qs| {
        qs.queue
            .0
            .iter()
            .flat_map(|q| q.walk())
            .find(|q| q.queue_path == name || q.queue_name == name)
    });
    match found {
        Some(q) => {
            say_raw!("{}", format_queue_status(q));
            Ok(EXIT_OK)
        }
        None if name == "root" || name == info.queue_path => {
            // The root is the scheduler record itself.
            let mut root = spindle_common::records::cluster::CapacitySchedulerQueueInfo {
                queue_name: info.queue_name.clone(),
                queue_path: info.queue_path.clone(),
                state: "RUNNING".into(),
                capacity: info.capacity,
                used_capacity: info.used_capacity,
                max_capacity: info.max_capacity,
                weight: info.weight,
                max_parallel_apps: i64::from(i32::MAX),
                ..Default::default()
            };
            root.node_labels = vec!["*".into()];
            say_raw!("{}", format_queue_status(&root));
            Ok(EXIT_OK)
        }
        None => {
            // QueueCLI's words and exit status (-1).
            say!("Cannot get queue from RM by queueName = {name}, please check.");
            Ok(EXIT_USAGE)
        }
    }
}

/// The root as a queue record (the scheduler record itself is the root).
fn root_queue(info: &CapacitySchedulerInfo) -> CapacitySchedulerQueueInfo {
    CapacitySchedulerQueueInfo {
        queue_name: info.queue_name.clone(),
        queue_path: info.queue_path.clone(),
        state: "RUNNING".into(),
        capacity: info.capacity,
        used_capacity: info.used_capacity,
        max_capacity: info.max_capacity,
        weight: info.weight,
        max_parallel_apps: i64::from(i32::MAX),
        ..Default::default()
    }
}

/// QueueCLI's `-list`: every queue (the root first, then depth first), or a parent's
/// children; its words for a parent the RM does not have (exit 255).
async fn list(rm: &RmClient, parent: Option<&str>) -> anyhow::Result<u8> {
    let info = rm
        .scheduler()
        .await
        .with_context(|| format!("cannot read the queues at {}", rm.address()))?;
    let top: Vec<&CapacitySchedulerQueueInfo> = info
        .queues
        .as_ref()
        .map(|qs| qs.queue.0.iter().collect())
        .unwrap_or_default();
    let root = root_queue(&info);
    let chosen: Vec<&CapacitySchedulerQueueInfo> = match parent {
        None => std::iter::once(&root)
            .chain(top.iter().flat_map(|q| q.walk()))
            .collect(),
        Some(p) if p == "root" || p == info.queue_path => top,
        Some(p) => {
            match top
                .iter()
                .flat_map(|q| q.walk())
                .find(|q| q.queue_path == p || q.queue_name == p)
            {
                Some(q) => q
                    .queues
                    .as_ref()
                    .map(|c| c.queue.0.iter().collect())
                    .unwrap_or_default(),
                None => {
                    say!("Cannot get any queues under {p} from RM,please check.");
                    return Ok(EXIT_USAGE);
                }
            }
        }
    };
    say_raw!("{}", format_queue_list(&chosen));
    Ok(EXIT_OK)
}

/// `-fairshare [QUEUE]`: QUEUE (a leaf name or a full path) and the queues below it, or
/// every queue.
async fn fairshare(rm: &RmClient, under: Option<&str>) -> anyhow::Result<u8> {
    let info = rm
        .scheduler()
        .await
        .with_context(|| format!("cannot read the queues at {}", rm.address()))?;
    let all: Vec<&CapacitySchedulerQueueInfo> = info
        .queues
        .iter()
        .flat_map(|qs| qs.queue.0.iter())
        .flat_map(|q| q.walk())
        .collect();
    let shown: Vec<&CapacitySchedulerQueueInfo> = match under {
        None => all,
        Some(name) => {
            let Some(top) = all
                .iter()
                .find(|q| q.queue_path == name || q.queue_name == name)
            else {
                say!("Cannot get queue from RM by queueName = {name}, please check.");
                return Ok(EXIT_USAGE);
            };
            top.walk()
        }
    };
    say_raw!("{}", format_fairshare(&shown));
    Ok(EXIT_OK)
}
