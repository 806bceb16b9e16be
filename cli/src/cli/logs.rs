//! `spindle logs -applicationId APPID`, as `yarn logs` for logs still on the NodeManagers
//! (`LogAggregationType: LOCAL`).
//!
//! The containers are found through the RM (every attempt's AM container and
//! `/appattempts/{id}/containers`) and, for containers the RM no longer lists, through each
//! node's `/ws/v1/node/apps/{id}`; the logs come from the NMs.
//!
//! `-rank N`, `-tail N` and `-follow` read the application by its ranks (a training job's, from
//! its AM's rank file) or tasks (the distributed shell's containers in id order), with the
//! attached client's follower ([`spindle_appmaster_sdk::follow`]): each line as
//! `[rank 1 stdout] line`; `-follow` streams until the application ends.

use std::collections::BTreeMap;

use anyhow::Context;
use spindle_common::ids::{ApplicationAttemptId, ApplicationId, ContainerId};

use super::args::{Opt, UsageError};
use super::format::format_log_file;
use super::{parse_or_usage, rm_client, usage_error, EXIT_OK, EXIT_USAGE};
use spindle_appmaster_sdk::follow::{
    follow_to_end, print_units, AppKind, FollowOptions, Logs, Unit, Work, STREAMS,
};
use spindle_appmaster_sdk::nm_client::NmClient;
use spindle_appmaster_sdk::rm_client::RmClient;
use spindle_common::records::cluster::AppInfo;

pub const USAGE: &str = "\
usage: spindle logs -applicationId APPID [-containerId CID] [-log_files F1,F2] [-follow] [-rank N] [-tail N] [--rm-address HOST:PORT] [--conf-dir DIR]
  -applicationId APPID   the application whose container logs to print
  -containerId CID       only this container
  -log_files F1,F2       only these files (e.g. stdout); ALL or * for every file (default;
                         stdout and stderr with -follow, -rank or -tail)
  -follow                stream the ranks' (tasks') stdout and stderr as they are written, as
                         the attached `spindle train` does, until the application ends
  -rank N                only rank N (a training job's RANK; the distributed shell's Nth task)
  -tail N                start each file with its last N lines";

pub const OPTS: &[Opt] = &[
    Opt::one("applicationId", &["appId"]),
    Opt::one("containerId", &[]),
    Opt::list("log_files", &["logFiles"]),
    Opt::one("nodeAddress", &[]),
    Opt::one("appOwner", &[]),
    Opt::flag("follow", &["f"]),
    Opt::one("rank", &[]),
    Opt::one("tail", &[]),
];

/// Why `-follow`, `-rank` or `-tail` cannot read an application's logs.
#[derive(Debug, thiserror::Error)]
pub enum RankLogsError {
    #[error(
        "application {app} never ran: it is {state} and no ApplicationMaster was started, so it \
         has no logs"
    )]
    NeverRan { app: ApplicationId, state: String },
    #[error("application {app} is {state} and started no {unit}s: there are no {unit} logs")]
    NoUnits {
        app: ApplicationId,
        state: String,
        unit: &'static str,
    },
    #[error("application {app} has no {unit} {asked}: its {unit}s are {known}")]
    NoSuchUnit {
        app: ApplicationId,
        unit: &'static str,
        asked: u32,
        known: String,
    },
    #[error(transparent)]
    Client(#[from] spindle_appmaster_sdk::ClientError),
}

/// What `-follow`, `-rank` and `-tail` ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankLogs {
    pub follow: bool,
    pub rank: Option<u32>,
    pub tail: Option<usize>,
}

/// The files `-log_files` names for `-follow`/`-rank`/`-tail`: stdout and stderr when it
/// names none, or all (`ALL`, `*`).
pub fn followed_files(files: &[String]) -> Vec<&str> {
    let all = files
        .iter()
        .any(|f| f == "*" || f.eq_ignore_ascii_case("ALL"));
    if files.is_empty() || all {
        STREAMS.to_vec()
    } else {
        files.iter().map(String::as_str).collect()
    }
}

/// `0, 1, 2`: the indices of `units`.
fn indices(units: &[Unit]) -> String {
    units
        .iter()
        .map(|u| u.index.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Prints (or, with `-follow` on a running application, streams) the ranks' logs.
pub async fn rank_logs(
    rm: &RmClient,
    app: &AppInfo,
    app_id: &ApplicationId,
    want: RankLogs,
    files: &[&str],
    out: &mut (dyn FnMut(&str) + Send),
) -> Result<(), RankLogsError> {
    let kind = AppKind::of_type(&app.application_type);
    let state = app.state.to_string();
    let work = Work::read(rm, app_id, kind).await?;
    if app.state.is_final() && work.am.is_none() {
        return Err(RankLogsError::NeverRan {
            app: *app_id,
            state,
        });
    }
    let all = work.all_units(kind);
    if let (Some(n), false) = (want.rank, all.is_empty()) {
        if !all.iter().any(|u| u.index == n) {
            return Err(RankLogsError::NoSuchUnit {
                app: *app_id,
                unit: kind.unit(),
                asked: n,
                known: indices(&all),
            });
        }
    }
    if want.follow && !app.state.is_final() {
        let opts = FollowOptions {
            kind,
            logs: Logs::Ranks(want.rank),
            tail: want.tail,
        };
        follow_to_end(rm, app_id, &opts, out).await?;
        return Ok(());
    }
    if all.is_empty() {
        return Err(RankLogsError::NoUnits {
            app: *app_id,
            state,
            unit: kind.unit(),
        });
    }
    let units = work.units(kind, Logs::Ranks(want.rank));
    print_units(&units, kind, files, want.tail, out).await?;
    Ok(())
}

/// Where a container ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerLocation {
    pub node_id: String,
    pub node_http_address: String,
}

/// Every container of the application the RM or the NMs know, with its node.
pub async fn find_containers(
    rm: &RmClient,
    nm: &NmClient,
    app_id: &ApplicationId,
) -> anyhow::Result<BTreeMap<ContainerId, ContainerLocation>> {
    let mut found = BTreeMap::new();
    let attempts = rm
        .app_attempts(app_id)
        .await
        .with_context(|| format!("cannot list the attempts of {app_id}"))?;
    for att in &attempts {
        if let Ok(cid) = att.container_id.parse::<ContainerId>() {
            if !att.node_http_address.is_empty() {
                found.insert(
                    cid,
                    ContainerLocation {
                        node_id: att.node_id.clone(),
                        node_http_address: att.node_http_address.clone(),
                    },
                );
            }
        }
        let attempt_id = att
            .app_attempt_id
            .parse::<ApplicationAttemptId>()
            .unwrap_or_else(|_| ApplicationAttemptId::new(*app_id, att.id));
        match rm.attempt_containers(&attempt_id).await {
            Ok(cs) => {
                for c in cs {
                    let Ok(cid) = c.container_id.parse::<ContainerId>() else {
                        continue;
                    };
                    let node_id = if c.node_id.is_empty() {
                        c.assigned_node_id.clone()
                    } else {
                        c.node_id.clone()
                    };
                    let http = if c.node_http_address.is_empty() {
                        node_id.clone()
                    } else {
                        c.node_http_address.clone()
                    };
                    found.entry(cid).or_insert(ContainerLocation {
                        node_id,
                        node_http_address: http,
                    });
                }
            }
            Err(e) => tracing::warn!(attempt = %attempt_id, error = %e, "cannot list containers"),
        }
    }
    // Finished containers the RM has forgotten: ask every node that knows the app.
    match rm.nodes(spindle_common::states::NodeState::ALL).await {
        Ok(nodes) => {
            for n in nodes.iter().filter(|n| !n.state.is_inactive()) {
                let Ok(ids) = nm.app_containers(&n.node_http_address, app_id).await else {
                    continue;
                };
                for id in ids {
                    if let Ok(cid) = id.parse::<ContainerId>() {
                        found.entry(cid).or_insert(ContainerLocation {
                            node_id: n.id.clone(),
                            node_http_address: n.node_http_address.clone(),
                        });
                    }
                }
            }
        }
        Err(e) => tracing::warn!(error = %e, "cannot list nodes"),
    }
    Ok(found)
}

/// True when `files` selects `name` (empty, `ALL` or `*` select everything).
pub fn selects(files: &[String], name: &str) -> bool {
    files.is_empty()
        || files
            .iter()
            .any(|f| f == name || f == "*" || f.eq_ignore_ascii_case("ALL"))
}

/// Prints the selected log files of the selected containers; returns how many files were
/// printed.
pub async fn print_logs(
    rm: &RmClient,
    app_id: &ApplicationId,
    only_container: Option<&ContainerId>,
    files: &[String],
    out: &mut (dyn FnMut(&str) + Send),
) -> anyhow::Result<usize> {
    let nm = NmClient::new()?;
    let mut containers = find_containers(rm, &nm, app_id).await?;
    if let Some(c) = only_container {
        containers.retain(|id, _| id == c);
        if containers.is_empty() {
            anyhow::bail!("container {c} is not known to the ResourceManager or any running NodeManager for {app_id}");
        }
    }
    let mut printed = 0;
    for (cid, loc) in &containers {
        let list = match nm.container_log_files(&loc.node_http_address, cid).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("Can not get the log files of {cid} on {}: {e}", loc.node_id);
                continue;
            }
        };
        for f in list.iter().filter(|f| selects(files, &f.file_name)) {
            match nm
                .container_log(&loc.node_http_address, cid, &f.file_name)
                .await
            {
                Ok(content) => {
                    out(&format_log_file(
                        &cid.to_string(),
                        &loc.node_id,
                        &f.file_name,
                        f.last_modified_time.as_deref(),
                        &content,
                    ));
                    printed += 1;
                }
                Err(e) => eprintln!(
                    "Can not get {} of {cid} on {}: {e}",
                    f.file_name, loc.node_id
                ),
            }
        }
    }
    Ok(printed)
}

pub async fn run(args: Vec<String>) -> anyhow::Result<u8> {
    let Some(p) = parse_or_usage(&args, OPTS, USAGE)? else {
        return Ok(EXIT_OK);
    };
    let Some(app) = p.value("applicationId") else {
        return Err(usage_error(
            UsageError::MissingValue("applicationId"),
            USAGE,
        ));
    };
    let app_id: ApplicationId = match app.trim().parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("Invalid ApplicationId specified: {e}");
            return Ok(EXIT_USAGE);
        }
    };
    let container = match p.value("containerId") {
        Some(c) => match c.trim().parse::<ContainerId>() {
            Ok(c) => Some(c),
            Err(e) => {
                eprintln!("Invalid ContainerId specified: {e}");
                return Ok(EXIT_USAGE);
            }
        },
        None => None,
    };
    let files = p.values("log_files").to_vec();
    let want = RankLogs {
        follow: p.has("follow"),
        rank: p.parse("rank").map_err(|e| usage_error(e, USAGE))?,
        tail: p.parse("tail").map_err(|e| usage_error(e, USAGE))?,
    };
    let rm = rm_client(&p)?;
    let app = match rm.app(&app_id).await {
        Ok(a) => a,
        Err(e) if e.is_not_found() => {
            eprintln!("Application with id '{app_id}' doesn't exist in RM.");
            return Ok(EXIT_USAGE);
        }
        Err(e) => return Err(e).with_context(|| format!("cannot get {app_id}")),
    };
    if want.follow || want.rank.is_some() || want.tail.is_some() {
        if container.is_some() {
            eprintln!("-containerId cannot be combined with -follow, -rank or -tail: use -rank");
            return Ok(EXIT_USAGE);
        }
        let names = followed_files(&files);
        return match rank_logs(&rm, &app, &app_id, want, &names, &mut |s| say!("{s}")).await {
            Ok(()) => Ok(EXIT_OK),
            Err(
                e @ (RankLogsError::NeverRan { .. }
                | RankLogsError::NoUnits { .. }
                | RankLogsError::NoSuchUnit { .. }),
            ) => {
                eprintln!("{e}");
                Ok(EXIT_USAGE)
            }
            Err(e) => Err(e).with_context(|| format!("cannot read the logs of {app_id}")),
        };
    }
    let printed = print_logs(&rm, &app_id, container.as_ref(), &files, &mut |s| {
        say_raw!("{s}")
    })
    .await?;
    if printed == 0 {
        let pattern = if files.is_empty() {
            "[ALL]".to_string()
        } else {
            format!("[{}]", files.join(", "))
        };
        eprintln!(
            "Can not find any log file matching the pattern: {pattern} for the application: {app_id}"
        );
        return Ok(EXIT_USAGE);
    }
    Ok(EXIT_OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_selection() {
        assert!(selects(&[], "stdout"));
        assert!(selects(&["ALL".into()], "stderr"));
        assert!(selects(&["stdout".into()], "stdout"));
        assert!(!selects(&["stdout".into()], "stderr"));
        assert_eq!(followed_files(&[]), ["stdout", "stderr"]);
        assert_eq!(followed_files(&["ALL".into()]), ["stdout", "stderr"]);
        assert_eq!(followed_files(&["stderr".into()]), ["stderr"]);
    }

    #[test]
    fn refusals_name_the_application_and_the_ranks() {
        let app: ApplicationId = "application_1_0007".parse().unwrap();
        let e = RankLogsError::NoSuchUnit {
            app,
            unit: "rank",
            asked: 5,
            known: "0, 1".into(),
        };
        assert_eq!(
            e.to_string(),
            "application application_1_0007 has no rank 5: its ranks are 0, 1"
        );
        let e = RankLogsError::NeverRan {
            app,
            state: "KILLED".into(),
        };
        assert!(e.to_string().contains("never ran"), "{e}");
    }
}
