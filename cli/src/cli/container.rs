//! `spindle container -list ATTEMPTID | -status CONTAINERID`, as `yarn container`.

use anyhow::Context;
use spindle_appmaster_sdk::rm_client::RmClient;
use spindle_common::ids::{ApplicationAttemptId, ContainerId};

use super::args::{Opt, UsageError};
use super::format::{format_container_list, format_container_report};
use super::{parse_or_usage, rm_client, usage_error, EXIT_OK, EXIT_USAGE};

pub const USAGE: &str = "\
usage: spindle container <command> [--rm-address HOST:PORT] [--conf-dir DIR]
  -list ATTEMPTID      list the containers of an application attempt
  -status CONTAINERID  print the container's report";

pub const OPTS: &[Opt] = &[Opt::one("list", &[]), Opt::one("status", &[])];

pub async fn run(args: Vec<String>) -> anyhow::Result<u8> {
    let Some(p) = parse_or_usage(&args, OPTS, USAGE)? else {
        return Ok(EXIT_OK);
    };
    if let Some(id) = p.value("list") {
        let rm = rm_client(&p)?;
        return list(&rm, id.trim()).await;
    }
    if let Some(id) = p.value("status") {
        let rm = rm_client(&p)?;
        return status(&rm, id.trim()).await;
    }
    Err(usage_error(
        UsageError::Other("give -list ATTEMPTID or -status CONTAINERID".into()),
        USAGE,
    ))
}

async fn list(rm: &RmClient, id: &str) -> anyhow::Result<u8> {
    let attempt: ApplicationAttemptId = match id.parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return Ok(EXIT_USAGE);
        }
    };
    let mut containers = match rm.attempt_containers(&attempt).await {
        Ok(c) => c,
        Err(e) if e.is_not_found() => {
            eprintln!("Application Attempt with id '{attempt}' doesn't exist in RM.");
            return Ok(EXIT_USAGE);
        }
        Err(e) => {
            return Err(e).with_context(|| format!("cannot list the containers of {attempt}"))
        }
    };
    containers.sort_by(|a, b| a.container_id.cmp(&b.container_id));
    say_raw!("{}", format_container_list(&containers));
    Ok(EXIT_OK)
}

async fn status(rm: &RmClient, id: &str) -> anyhow::Result<u8> {
    let cid: ContainerId = match id.parse() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return Ok(EXIT_USAGE);
        }
    };
    match rm.container(&cid).await {
        Ok(c) => {
            say_raw!("{}", format_container_report(&c));
            Ok(EXIT_OK)
        }
        Err(e) if e.is_not_found() => {
            say!("Container with id '{id}' doesn't exist in RM or Timeline Server.");
            Ok(EXIT_USAGE)
        }
        Err(e) => Err(e).with_context(|| format!("cannot get the report of {id}")),
    }
}
