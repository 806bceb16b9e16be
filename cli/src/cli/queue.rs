//! `spindle queue -status QUEUE`, as `yarn queue -status`.

use anyhow::Context;

use super::args::{Opt, UsageError};
use super::format::format_queue_status;
use super::{parse_or_usage, rm_client, usage_error, EXIT_OK, EXIT_USAGE};

pub const USAGE: &str = "\
usage: spindle queue -status QUEUE [--rm-address HOST:PORT] [--conf-dir DIR]
  -status QUEUE   print the queue's information (a leaf name such as default, or a full
                  path such as root.default)";

const OPTS: &[Opt] = &[Opt::one("status", &[])];

pub async fn run(args: Vec<String>) -> anyhow::Result<u8> {
    let Some(p) = parse_or_usage(&args, OPTS, USAGE)? else {
        return Ok(EXIT_OK);
    };
    let Some(name) = p.value("status").map(str::trim) else {
        return Err(usage_error(
            UsageError::Other("give -status QUEUE".into()),
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
