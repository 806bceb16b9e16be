//! `spindle application -list | -status | -kill | -movetoqueue | -changeQueue |
//! -updatePriority | -updateLifetime`, as `yarn application`, and `-priority` (Slurm's
//! `sprio`).

use std::time::{Duration, Instant};

use anyhow::Context;
use spindle_common::ids::ApplicationId;
use spindle_common::states::YarnApplicationState;

use super::args::{Opt, Parsed, UsageError};
use super::format::{format_app_list, format_app_priority, format_app_report};
use super::{parse_or_usage, rm_client, usage_error, EXIT_OK, EXIT_USAGE};
use spindle_appmaster_sdk::rm_client::{AppsFilter, KillOutcome, RmClient};
use spindle_common::records::cluster::AppInfo;

pub const USAGE: &str = "\
usage: spindle application <command> [--rm-address HOST:PORT] [--conf-dir DIR]
  -list                          list applications (default states SUBMITTED, ACCEPTED, RUNNING)
    -appStates S1,S2|ALL         only these states (ALL: every state)
    -appTypes T1,T2              only these application types
    -appTags t1,t2               only applications with any of these tags
    -queue Q                     only applications in queue Q (leaf name or full path;
                                 as YARN, unfinished ones only)
    -user U                      only applications of user U
                                 Columns after YARN's: GPUS (held now, +N still asked for),
                                 GPU-HOURS, GPU-UTIL (mean over the GPUs held, as last
                                 sampled) and REASON (why a waiting application waits)
  -status APPID                  print the application report
  -priority APPID                why a waiting application of a fairshare queue is where it
                                 is (Slurm's sprio): its place, its user's fair share,
                                 its age and the bound, its attained service
  -kill APPID [APPID...]         kill applications
  -movetoqueue APPID -queue Q    move an application to another queue
  -changeQueue Q -appId APPID    the same, YARN's other spelling
  -updatePriority P -appId APPID change an application's priority
  -updateLifetime SECONDS -appId APPID
                                 the application is killed SECONDS from now (its lifetime)";

pub const OPTS: &[Opt] = &[
    Opt::flag("list", &[]),
    Opt::list("appStates", &["states"]),
    Opt::list("appTypes", &["applicationTypes"]),
    Opt::list("appTags", &["applicationTags"]),
    Opt::one("status", &[]),
    Opt::one("priority", &[]),
    Opt::one("kill", &[]),
    Opt::one("movetoqueue", &[]),
    Opt::one("queue", &[]),
    Opt::one("user", &[]),
    Opt::one("changeQueue", &[]),
    Opt::one("appId", &["applicationId"]),
    Opt::one("updatePriority", &[]),
    Opt::one("updateLifetime", &[]),
];

/// How long `-kill` waits for the application to reach a final state.
const KILL_WAIT: Duration = Duration::from_secs(60);
const KILL_POLL: Duration = Duration::from_millis(200);

/// What `-list` asked for, resolved: the REST filter and the header's sets.
#[derive(Debug, Clone, PartialEq)]
pub struct ListRequest {
    pub states: Vec<YarnApplicationState>,
    pub types: Vec<String>,
    /// As given (trimmed), sorted; the RM compares them without case.
    pub tags: Vec<String>,
    /// `-queue`: a leaf name or a full path.
    pub queue: Option<String>,
    /// `-user`.
    pub user: Option<String>,
}

impl ListRequest {
    /// Whether `a` is one the request asks for (the RM filters already; this keeps the
    /// output right against any RM).
    pub fn matches(&self, a: &AppInfo) -> bool {
        let any_of = |set: &[String], v: &str| {
            set.is_empty() || set.iter().any(|t| t.eq_ignore_ascii_case(v.trim()))
        };
        self.states.contains(&a.state)
            && any_of(&self.types, &a.application_type)
            && (self.tags.is_empty()
                || a.application_tags
                    .split(',')
                    .any(|have| any_of(&self.tags, have)))
            && self
                .queue
                .as_deref()
                .is_none_or(|q| q == a.queue || q.rsplit('.').next() == Some(a.queue.as_str()))
            && self.user.as_deref().is_none_or(|u| u == a.user)
    }
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
    let mut tags: Vec<String> = p
        .values("appTags")
        .iter()
        .map(|t| t.trim().to_string())
        .collect();
    tags.sort();
    tags.dedup();
    let given = |k: &str| {
        p.value(k)
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    Ok(ListRequest {
        states,
        types,
        tags,
        queue: given("queue"),
        user: given("user"),
    })
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
    if let Some(id) = p.value("priority") {
        let rm = rm_client(&p)?;
        return priority(&rm, id).await;
    }
    if let Some(app) = p.value("movetoqueue") {
        let Some(queue) = p.value("queue") else {
            return Err(usage_error(
                UsageError::Other("-movetoqueue APPID needs -queue QUEUE".into()),
                USAGE,
            ));
        };
        let rm = rm_client(&p)?;
        return move_to_queue(&rm, app, queue).await;
    }
    if let Some(queue) = p.value("changeQueue") {
        let app = need_app_id(&p, "-changeQueue QUEUE")?;
        let rm = rm_client(&p)?;
        return move_to_queue(&rm, app, queue).await;
    }
    if let Some(priority) = p.value("updatePriority") {
        let app = need_app_id(&p, "-updatePriority PRIORITY")?;
        let priority: i32 = priority.trim().parse().map_err(|_| {
            usage_error(
                UsageError::Invalid {
                    option: "updatePriority",
                    value: priority.to_string(),
                    reason: "not a whole number".into(),
                },
                USAGE,
            )
        })?;
        let rm = rm_client(&p)?;
        return update_priority(&rm, app, priority).await;
    }
    if let Some(secs) = p.value("updateLifetime") {
        let app = need_app_id(&p, "-updateLifetime SECONDS")?;
        let secs: u64 = secs.trim().parse().map_err(|_| {
            usage_error(
                UsageError::Invalid {
                    option: "updateLifetime",
                    value: secs.to_string(),
                    reason: "not a whole number of seconds (0 or more)".into(),
                },
                USAGE,
            )
        })?;
        let rm = rm_client(&p)?;
        return update_lifetime(&rm, app, secs).await;
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
        UsageError::Other(
            "give one of -list, -status APPID, -priority APPID, -kill APPID, -movetoqueue APPID -queue Q, \
             -changeQueue Q -appId APPID, -updatePriority P -appId APPID, \
             -updateLifetime SECONDS -appId APPID"
                .into(),
        ),
        USAGE,
    ))
}

async fn list(rm: &RmClient, req: &ListRequest) -> anyhow::Result<u8> {
    let filter = AppsFilter {
        states: req.states.clone(),
        application_types: req.types.clone(),
        application_tags: req.tags.clone(),
        queue: req.queue.clone(),
        user: req.user.clone(),
        ..Default::default()
    };
    let mut apps = rm
        .apps(&filter)
        .await
        .with_context(|| format!("cannot list applications at {}", rm.address()))?;
    apps.retain(|a| req.matches(a));
    say_raw!(
        "{}",
        format_app_list(&apps, &req.types, &req.states, &req.tags)
    );
    Ok(EXIT_OK)
}

fn parse_app_id(id: &str) -> Result<ApplicationId, String> {
    id.trim()
        .parse()
        .map_err(|e: spindle_common::ids::IdParseError| e.to_string())
}

/// `-appId`, which the `-changeQueue`/`-updatePriority`/`-updateLifetime` forms need.
fn need_app_id<'a>(p: &'a Parsed, form: &str) -> anyhow::Result<&'a str> {
    p.value("appId").ok_or_else(|| {
        usage_error(
            UsageError::Other(format!("{form} needs -appId APPID")),
            USAGE,
        )
    })
}

/// The application's report, or YARN's message (exit 255) for a bad or unknown id.
async fn report_or_exit(rm: &RmClient, id: &str) -> anyhow::Result<Result<AppInfo, u8>> {
    let app_id = match parse_app_id(id) {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("{msg}");
            return Ok(Err(EXIT_USAGE));
        }
    };
    match rm.app(&app_id).await {
        Ok(a) => Ok(Ok(a)),
        Err(e) if e.is_not_found() => {
            eprintln!("Application with id '{app_id}' doesn't exist in RM.");
            Ok(Err(EXIT_USAGE))
        }
        Err(e) => Err(e).with_context(|| format!("cannot get the report of {app_id}")),
    }
}

/// `-priority APPID`: the factors of a waiting application's place in its `fairshare` leaf.
async fn priority(rm: &RmClient, id: &str) -> anyhow::Result<u8> {
    let app = match report_or_exit(rm, id).await? {
        Ok(a) => a,
        Err(code) => return Ok(code),
    };
    match format_app_priority(&app) {
        Some(t) => say_raw!("{t}"),
        None => say!(
            "Application {} is not waiting in a fairshare queue (state {}, queue {}): it has no place to explain.",
            app.id,
            app.state.as_str(),
            app.queue
        ),
    }
    Ok(EXIT_OK)
}

/// `-movetoqueue APPID -queue Q` / `-changeQueue Q -appId APPID`, in ApplicationCLI's words.
async fn move_to_queue(rm: &RmClient, id: &str, queue: &str) -> anyhow::Result<u8> {
    let app = match report_or_exit(rm, id).await? {
        Ok(a) => a,
        Err(code) => return Ok(code),
    };
    let app_id = parse_app_id(&app.id).map_err(anyhow::Error::msg)?;
    if app.state.is_final() {
        say!("Application {app_id} has already finished ");
        return Ok(EXIT_OK);
    }
    say!("Moving application {app_id} to queue {queue}");
    rm.move_app(&app_id, queue.trim())
        .await
        .with_context(|| format!("cannot move {app_id} to queue {queue}"))?;
    say!("Successfully completed move.");
    Ok(EXIT_OK)
}

/// `-updatePriority P -appId APPID`, in ApplicationCLI's words.
async fn update_priority(rm: &RmClient, id: &str, priority: i32) -> anyhow::Result<u8> {
    let app_id = match parse_app_id(id) {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("{msg}");
            return Ok(EXIT_USAGE);
        }
    };
    say!("Updating priority of an application {app_id}");
    let effective = match rm.set_priority(&app_id, priority).await {
        Ok(p) => p,
        Err(e) if e.is_not_found() => {
            eprintln!("Application with id '{app_id}' doesn't exist in RM.");
            return Ok(EXIT_USAGE);
        }
        Err(e) => return Err(e).with_context(|| format!("cannot update the priority of {app_id}")),
    };
    if effective == priority {
        say!("Successfully updated the application {app_id} with priority '{priority}'");
    } else {
        say!(
            "Updated priority of an application  {app_id} to cluster max priority OR keeping old priority as application is in final states"
        );
    }
    Ok(EXIT_OK)
}

/// `-updateLifetime SECONDS -appId APPID`: the lifetime ends SECONDS from now (YARN sends
/// the ISO 8601 time, as here), in ApplicationCLI's words.
async fn update_lifetime(rm: &RmClient, id: &str, secs: u64) -> anyhow::Result<u8> {
    let app_id = match parse_app_id(id) {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("{msg}");
            return Ok(EXIT_USAGE);
        }
    };
    let asked = spindle_common::time::format_iso8601(
        spindle_common::time::now_ms().saturating_add(secs.saturating_mul(1000)),
    );
    say!("Updating timeout for given timeoutType: LIFETIME of an application {app_id}");
    let t = match rm.update_lifetime(&app_id, &asked).await {
        Ok(t) => t,
        Err(e) if e.is_not_found() => {
            eprintln!("Application with id '{app_id}' doesn't exist in RM.");
            return Ok(EXIT_USAGE);
        }
        Err(e) => return Err(e).with_context(|| format!("cannot update the lifetime of {app_id}")),
    };
    if t.expiry_time != asked {
        say!(
            "Updated lifetime of an application  {app_id} to queue max/default lifetime. New expiry time is {}",
            t.expiry_time
        );
    } else {
        say!(
            "Successfully updated LIFETIME of an application {app_id}. New expiry time is {}",
            t.expiry_time
        );
    }
    Ok(EXIT_OK)
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
    use super::*;

    fn parsed(a: &[&str]) -> Parsed {
        super::super::parse_with_common(OPTS, a).expect("parses")
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
        let r = list_request(&parsed(&["-list", "-appTags", "b,a", "--app-tags", "a"])).unwrap();
        assert_eq!(r.tags, vec!["a", "b"]);
        let e = list_request(&parsed(&["-list", "-appStates", "RUNING"])).unwrap_err();
        assert!(
            e.starts_with("The application state RUNING is invalid."),
            "{e}"
        );
    }

    #[test]
    fn queue_and_user_filter_the_list() {
        let r = list_request(&parsed(&["-list", "-queue", "root.prod", "-user", "alice"])).unwrap();
        assert_eq!(r.queue.as_deref(), Some("root.prod"));
        assert_eq!(r.user.as_deref(), Some("alice"));
        let app = |queue: &str, user: &str| AppInfo {
            queue: queue.into(),
            user: user.into(),
            state: YarnApplicationState::RUNNING,
            ..Default::default()
        };
        assert!(r.matches(&app("prod", "alice")));
        assert!(!r.matches(&app("research", "alice")));
        assert!(!r.matches(&app("prod", "bob")));
        let r = list_request(&parsed(&["-list", "--queue", "prod"])).unwrap();
        assert!(r.matches(&app("prod", "bob")));
        assert!(!r.matches(&app("default", "bob")));
        let r = list_request(&parsed(&["-list"])).unwrap();
        assert!(r.queue.is_none() && r.user.is_none());
        assert!(r.matches(&app("default", "bob")));
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
        let p = parsed(&["-movetoqueue", "application_1_0001", "-queue", "b"]);
        assert_eq!(p.value("movetoqueue"), Some("application_1_0001"));
        assert_eq!(p.value("queue"), Some("b"));
        let p = parsed(&["-changeQueue", "b", "-appId", "application_1_0001"]);
        assert_eq!(p.value("changeQueue"), Some("b"));
        assert_eq!(p.value("appId"), Some("application_1_0001"));
        let p = parsed(&["-updateLifetime", "60", "--app-id", "application_1_0001"]);
        assert_eq!(p.value("updateLifetime"), Some("60"));
        assert_eq!(p.value("appId"), Some("application_1_0001"));
    }
}
