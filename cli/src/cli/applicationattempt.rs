//! `spindle applicationattempt -list APPID | -status ATTEMPTID`, as `yarn applicationattempt`.

use anyhow::Context;
use spindle_appmaster_sdk::rm_client::RmClient;
use spindle_common::ids::{ApplicationAttemptId, ApplicationId};

use super::args::{Opt, UsageError};
use super::format::{format_attempt_list, format_attempt_report, AttemptContext};
use super::{parse_or_usage, rm_client, usage_error, EXIT_OK, EXIT_USAGE};

pub const USAGE: &str = "\
usage: spindle applicationattempt <command> [--rm-address HOST:PORT] [--conf-dir DIR]
  -list APPID          list the application's attempts
  -status ATTEMPTID    print the attempt's report (appattempt_<clusterTs>_<app>_<attempt>)";

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
        UsageError::Other("give -list APPID or -status ATTEMPTID".into()),
        USAGE,
    ))
}

async fn list(rm: &RmClient, id: &str) -> anyhow::Result<u8> {
    let app_id: ApplicationId = match id.parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return Ok(EXIT_USAGE);
        }
    };
    let app = match rm.app(&app_id).await {
        Ok(a) => a,
        Err(e) if e.is_not_found() => {
            eprintln!("Application with id '{app_id}' doesn't exist in RM.");
            return Ok(EXIT_USAGE);
        }
        Err(e) => return Err(e).with_context(|| format!("cannot get the report of {app_id}")),
    };
    let attempts = rm
        .app_attempts(&app_id)
        .await
        .with_context(|| format!("cannot list the attempts of {app_id}"))?;
    let current = attempts.iter().map(|a| a.id).max().unwrap_or(0);
    let rows: Vec<_> = attempts
        .into_iter()
        .map(|a| {
            let ctx = AttemptContext::of(&app, a.id, current);
            (a, ctx)
        })
        .collect();
    say_raw!("{}", format_attempt_list(&rows));
    Ok(EXIT_OK)
}

async fn status(rm: &RmClient, id: &str) -> anyhow::Result<u8> {
    let attempt_id: ApplicationAttemptId = match id.parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return Ok(EXIT_USAGE);
        }
    };
    let app_id = attempt_id.application_id;
    let app = match rm.app(&app_id).await {
        Ok(a) => a,
        Err(e) if e.is_not_found() => {
            say!(
                "Application for AppAttempt with id '{id}' doesn't exist in RM or Timeline Server."
            );
            return Ok(EXIT_USAGE);
        }
        Err(e) => return Err(e).with_context(|| format!("cannot get the report of {app_id}")),
    };
    let attempt = match rm.app_attempt(&attempt_id).await {
        Ok(a) => a,
        Err(e) if e.is_not_found() => {
            say!("Application Attempt with id '{id}' doesn't exist in RM or Timeline Server.");
            return Ok(EXIT_USAGE);
        }
        Err(e) => return Err(e).with_context(|| format!("cannot get the report of {id}")),
    };
    let current = rm
        .app_attempts(&app_id)
        .await
        .map(|all| all.iter().map(|a| a.id).max().unwrap_or(0))
        .unwrap_or(attempt.id);
    let ctx = AttemptContext::of(&app, attempt.id, current);
    say_raw!("{}", format_attempt_report(&attempt, &ctx));
    Ok(EXIT_OK)
}
