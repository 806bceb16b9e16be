//! `spindle rmadmin -refreshQueues`, as `yarn rmadmin -refreshQueues`: the RM re-reads
//! `capacity-scheduler.xml` from its configuration directory and applies it, or refuses it
//! as a whole (the running queues stay as they were) with the reason.

use super::args::{Opt, UsageError};
use super::{parse_or_usage, rm_client, usage_error, EXIT_OK, EXIT_USAGE};

pub const USAGE: &str = "\
usage: spindle rmadmin -refreshQueues [--rm-address HOST:PORT] [--conf-dir DIR]
  -refreshQueues   reload the queues from the RM's capacity-scheduler.xml (admins only when
                   yarn.acl.enable is true); prints nothing on success";

const OPTS: &[Opt] = &[Opt::flag("refreshQueues", &[])];

pub async fn run(args: Vec<String>) -> anyhow::Result<u8> {
    let Some(p) = parse_or_usage(&args, OPTS, USAGE)? else {
        return Ok(EXIT_OK);
    };
    if !p.has("refreshQueues") {
        return Err(usage_error(
            UsageError::Other("give -refreshQueues".into()),
            USAGE,
        ));
    }
    let rm = rm_client(&p)?;
    match rm.refresh_queues().await {
        Ok(version) => {
            tracing::debug!(version, "queues refreshed");
            Ok(EXIT_OK)
        }
        // YARN's RMAdminCLI: `refreshQueues: <message>` on stderr, exit -1.
        Err(e) => {
            let msg = match e.remote_exception() {
                Some(re) => re.message,
                None => e.to_string(),
            };
            eprintln!("refreshQueues: {msg}");
            Ok(EXIT_USAGE)
        }
    }
}
