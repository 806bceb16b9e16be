//! `spindle application -list | -status | -kill`, as `yarn application`.

use std::time::{Duration, Instant};

use anyhow::Context;
use spindle_common::ids::ApplicationId;
use spindle_common::states::YarnApplicationState;

use super::args::{Opt, Parsed, UsageError};
use super::format::{format_app_list, format_app_report};
use super::{parse_or_usage, rm_client, usage_error, EXIT_OK, EXIT_USAGE};
use spindle_appmaster_sdk::rm_client::{AppsFilter, KillOutcome, RmClient};

pub const USAGE: &str = "\
usage: spindle application <command> [--rm-address HOST:PORT] [--conf-dir DIR]
  -list                      list applications (default states SUBMITTED, ACCEPTED, RUNNING)
    -appStates S1,S2|ALL     only these states (ALL: every state)
    -appTypes T1,T2          only these application types
  -status APPID              print the application report
  -kill APPID [APPID...]     kill applications";

const OPTS: &[Opt] = &[
    Opt::flag("list", &[]),
    Opt::list("appStates", &["states"]),
    Opt::list("appTypes", &["applicationTypes"]),
    Opt::one("status", &[]),
    Opt::one("kill", &[]),
];

/// How long `-kill` waits for the application to reach a final state.
const KILL_WAIT: Duration = Duration::from_secs(60);
const KILL_POLL: Duration = Duration::from_millis(200);

/// What `-list` asked for, resolved: the REST filter and the header's sets.
#[derive(Debug, Clone, PartialEq)]
pub struct ListRequest {
    pub states: Vec<YarnApplicationState>,
    pub types: Vec<String>,
}

/// `-appStates`/`-appTypes` as YARN reads them: states case-insensitive, `ALL` for every
/// state, default SUBMITTED, ACCEPTED, RUNNING; types upper-cased. Both in a stable order.
pub fn list_request(p: &Parsed) -> Result<ListRequest, String> {
    let mut states: Vec<YarnApplicationState> = Vec::new();
    for s in p.values("appStates") {
        if s.eq_ignore_ascii_case("ALL") {
            states = YarnApplicationState::ALL.to_vec();
            break;
        }
        let st = s.parse::<YarnApplicationState>().map_err(|_| {
            let valid: Vec<&str> = YarnApplicationState::ALL.iter().map(|s| s.as_str()).collect();
            format!(
                "The application state {s} is invalid.\nThe valid application state can be one of the following: ALL,{}",
                valid.join(",")
            )
        })?;
        states.push(st);
    }
    if states.is_empty() {
        states = vec![
            YarnApplicationState::SUBMITTED,
            YarnApplicationState::ACCEPTED,
            YarnApplicationState::RUNNING,
        ];
    }
    // EnumSet order, no duplicates.
    states = YarnApplicationState::ALL
        .iter()
        .copied()
        .filter(|s| states.contains(s))
        .collect();
    let mut types: Vec<String> = p
        .values("appTypes")
        .iter()
        .map(|t| t.trim().to_ascii_uppercase())
        .collect();
    types.sort();
    types.dedup();
    Ok(ListRequest { states, types })
}

pub async fn run(args: Vec<String>) -> anyhow::Result<u8> {
    let Some(p) = parse_or_usage(&args, OPTS, USAGE)? else {
        return Ok(EXIT_OK);
    };
    if p.has("list") {
        let req = match list_request(&p) {
            Ok(r) => r,
            Err(msg) => {
                eprintln!("{msg}");
                return Ok(EXIT_USAGE);
            }
        };
        let rm = rm_client(&p)?;
        return list(&rm, &req).await;
    }
    if let Some(id) = p.value("status") {
        let rm = rm_client(&p)?;
        return status(&rm, id).await;
    }
    if let Some(first) = p.value("kill") {
        let rm = rm_client(&p)?;
        let mut code = EXIT_OK;
        for id in std::iter::once(first).chain(p.positionals.iter().map(String::as_str)) {
            let c = kill(&rm, id).await?;
            code = code.max(c);
        }
        return Ok(code);
    }
    Err(usage_error(
        UsageError::Other("give one of -list, -status APPID, -kill APPID".into()),
        USAGE,
    ))
}

async fn list(rm: &RmClient, req: &ListRequest) -> anyhow::Result<u8> {
    let filter = AppsFilter {
        states: req.states.clone(),
        application_types: req.types.clone(),
        ..Default::default()
    };
    let mut apps = rm
        .apps(&filter)
        .await
        .with_context(|| format!("cannot list applications at {}", rm.address()))?;
    // The RM filters already; filtering again keeps the output right against any RM.
    apps.retain(|a| {
        req.states.contains(&a.state)
            && (req.types.is_empty()
                || req
                    .types
                    .iter()
                    .any(|t| t.eq_ignore_ascii_case(&a.application_type)))
    });
    say_raw!("{}", format_app_list(&apps, &req.types, &req.states));
    Ok(EXIT_OK)
}

fn parse_app_id(id: &str) -> Result<ApplicationId, String> {
    id.trim()
        .parse()
        .map_err(|e: spindle_common::ids::IdParseError| e.to_string())
}

async fn status(rm: &RmClient, id: &str) -> anyhow::Result<u8> {
    let app_id = match parse_app_id(id) {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("{msg}");
            return Ok(EXIT_USAGE);
        }
    };
    match rm.app(&app_id).await {
        Ok(app) => {
            say_raw!("{}", format_app_report(&app));
            Ok(EXIT_OK)
        }
        Err(e) if e.is_not_found() => {
            eprintln!("Application with id '{app_id}' doesn't exist in RM.");
            Ok(EXIT_USAGE)
        }
        Err(e) => Err(e).with_context(|| format!("cannot get the report of {app_id}")),
    }
}

async fn kill(rm: &RmClient, id: &str) -> anyhow::Result<u8> {
    let app_id = match parse_app_id(id) {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("{msg}");
            return Ok(EXIT_USAGE);
        }
    };
    let app = match rm.app(&app_id).await {
        Ok(a) => a,
        Err(e) if e.is_not_found() => {
            eprintln!("Application with id '{app_id}' doesn't exist in RM.");
            return Ok(EXIT_USAGE);
        }
        Err(e) => return Err(e).with_context(|| format!("cannot get the state of {app_id}")),
    };
    if app.state.is_final() {
        say!("Application {app_id} has already finished ");
        return Ok(EXIT_OK);
    }
    say!("Killing application {app_id}");
    let outcome = rm
        .kill(&app_id)
        .await
        .with_context(|| format!("cannot kill {app_id}"))?;
    if outcome == KillOutcome::InProgress {
        let start = Instant::now();
        loop {
            match rm.app_state(&app_id).await {
                Ok(s) if s.is_final() => break,
                Ok(_) => {}
                Err(e) => tracing::debug!(error = %e, "state poll failed"),
            }
            if start.elapsed() > KILL_WAIT {
                anyhow::bail!(
                    "application {app_id} was not killed within {} s",
                    KILL_WAIT.as_secs()
                );
            }
            tokio::time::sleep(KILL_POLL).await;
        }
    }
    say!("Killed application {app_id}");
    Ok(EXIT_OK)
}

#[cfg(test)]
mod tests {
    use super::super::args::parse;
    use super::*;

    fn parsed(a: &[&str]) -> Parsed {
        let all: Vec<Opt> = OPTS
            .iter()
            .chain(super::super::COMMON_OPTS.iter())
            .copied()
            .collect();
        parse(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>(), &all).unwrap()
    }

    #[test]
    fn list_defaults_and_filters() {
        use YarnApplicationState::*;
        let r = list_request(&parsed(&["-list"])).unwrap();
        assert_eq!(r.states, vec![SUBMITTED, ACCEPTED, RUNNING]);
        assert!(r.types.is_empty());
        let r = list_request(&parsed(&["-list", "-appStates", "RUNNING,ACCEPTED"])).unwrap();
        assert_eq!(r.states, vec![ACCEPTED, RUNNING]);
        let r = list_request(&parsed(&["--list", "--app-states", "all"])).unwrap();
        assert_eq!(r.states.len(), YarnApplicationState::ALL.len());
        let r = list_request(&parsed(&["-list", "-appTypes", "distributedshell,Spark"])).unwrap();
        assert_eq!(r.types, vec!["DISTRIBUTEDSHELL", "SPARK"]);
        let e = list_request(&parsed(&["-list", "-appStates", "RUNING"])).unwrap_err();
        assert!(
            e.starts_with("The application state RUNING is invalid."),
            "{e}"
        );
    }

    #[test]
    fn commands_and_global_options_parse() {
        let p = parsed(&["-status", "application_1_0001", "--rm-address", "h:1"]);
        assert_eq!(p.value("status"), Some("application_1_0001"));
        assert_eq!(p.value("rm-address"), Some("h:1"));
        let p = parsed(&["-kill", "application_1_0001", "application_1_0002"]);
        assert_eq!(p.value("kill"), Some("application_1_0001"));
        assert_eq!(p.positionals, ["application_1_0002"]);
        assert!(parse_app_id("app_1").is_err());
    }
}
