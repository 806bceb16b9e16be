//! The distributed shell client: new application, submission, and following it to the end.

use std::path::Path;
use std::time::{Duration, Instant};

use spindle_common::ids::ApplicationId;
use spindle_common::records::cluster::{AppInfo, ApplicationSubmissionContext};
use spindle_common::resource::Resource;
use spindle_common::states::{FinalApplicationStatus, YarnApplicationState};

use super::{DsAmConfig, AM_COMMAND, AM_RESOURCE_KEY, APPLICATION_TYPE};
use crate::error::ClientError;
use crate::launch::{self, AmLaunch};
use crate::rm_client::RmClient;

/// How often the client looks at the application.
pub const POLL_INTERVAL: Duration = Duration::from_millis(200);
/// How long the client keeps trying while the RM cannot be reached (e.g. it restarts).
pub const RM_UNREACHABLE_GRACE: Duration = Duration::from_secs(30);

/// One look at the application for a client that follows it: `None` after an unreachable RM
/// (retry: the wait of `retry` is done), the error once the RM has been unreachable longer
/// than [`RM_UNREACHABLE_GRACE`] (`unreachable_since` keeps when that began) or for any
/// other failure.
pub(crate) async fn look_at_app(
    rm: &RmClient,
    app_id: &ApplicationId,
    unreachable_since: &mut Option<Instant>,
    retry: Duration,
) -> Result<Option<AppInfo>, ClientError> {
    match rm.app(app_id).await {
        Ok(a) => {
            *unreachable_since = None;
            Ok(Some(a))
        }
        // A status read is safe to repeat: an RM that cannot be reached, or that went away
        // under the request (killed mid-answer), is waited for alike.
        Err(e) if e.is_connect() || e.is_peer_gone() => {
            let since = *unreachable_since.get_or_insert_with(Instant::now);
            if since.elapsed() > RM_UNREACHABLE_GRACE {
                return Err(e);
            }
            tracing::warn!(error = %e, "ResourceManager unreachable; retrying");
            tokio::time::sleep(retry).await;
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Everything `spindle distributed-shell` takes.
#[derive(Debug, Clone, PartialEq)]
pub struct DsOptions {
    pub am: DsAmConfig,
    pub app_name: String,
    pub queue: Option<String>,
    /// Application priority (higher is more important).
    pub priority: Option<i32>,
    pub master_resources: Resource,
    /// YARN's `LIFETIME`, enforced by the RM (see [`AmLaunch::lifetime`]).
    pub lifetime: Option<Duration>,
    /// What the RM waits for before it schedules the application.
    pub dependencies: crate::launch::Dependencies,
    pub max_app_attempts: Option<i32>,
    /// `--files`, `--archives`, `--src-dir`, `--shell_script`: shipped to every container.
    pub ship: crate::ship::Shipment,
}

impl DsOptions {
    /// YARN's defaults: name `DistributedShell`, AM of 512 MB and 1 vcore.
    pub fn new(am: DsAmConfig) -> Self {
        Self {
            am,
            app_name: "DistributedShell".into(),
            queue: None,
            priority: None,
            master_resources: Resource::new(512, 1),
            lifetime: None,
            dependencies: Default::default(),
            max_app_attempts: None,
            ship: crate::ship::Shipment::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DsClientError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("{what} resources {asked} exceed the cluster's maximum container {max}; ask for less")]
    TooLarge {
        what: &'static str,
        asked: String,
        max: String,
    },
    /// What `--files`, `--archives`, `--src-dir` or `--shell_script` name cannot be shipped.
    #[error(transparent)]
    Ship(#[from] crate::ship::ShipError),
    /// The queue is not a leaf queue of the RM's tree (checked before asking for an id).
    #[error("unknown queue '{queue}': the leaf queues are {}", leaves.join(", "))]
    UnknownQueue { queue: String, leaves: Vec<String> },
}

impl DsClientError {
    /// Whether the client refused the submission itself (nothing ran): too large an ask,
    /// an unknown queue, files that cannot be shipped.
    pub fn is_client_refusal(&self) -> bool {
        !matches!(self, Self::Client(_))
    }
}

/// How the application ended.
#[derive(Debug, Clone, PartialEq)]
pub struct DsOutcome {
    pub app_id: ApplicationId,
    pub state: YarnApplicationState,
    pub final_status: FinalApplicationStatus,
    pub diagnostics: String,
    pub am_container_logs: Option<String>,
}

impl DsOutcome {
    /// FINISHED with SUCCEEDED: the only outcome the client exits 0 for.
    pub fn succeeded(&self) -> bool {
        self.state == YarnApplicationState::FINISHED
            && self.final_status == FinalApplicationStatus::SUCCEEDED
    }
}

impl DsOptions {
    /// What the shared launcher submits: `./spindle distributed-shell-am` with the
    /// parameters in `DISTRIBUTEDSHELL_*`, its containers checked before submission.
    pub fn launch(&self) -> AmLaunch<'_> {
        AmLaunch {
            application_type: APPLICATION_TYPE,
            am_resource_key: Some(AM_RESOURCE_KEY),
            am_localizes_shipment: false,
            am_command: AM_COMMAND,
            am_env: self.am.to_env(),
            app_name: &self.app_name,
            queue: self.queue.as_deref(),
            priority: self.priority,
            master_resources: &self.master_resources,
            max_app_attempts: self.max_app_attempts,
            keep_containers: false,
            lifetime: self.lifetime,
            dependencies: &self.dependencies,
            app_node_label_expression: self.am.node_label_expression.as_deref(),
            asks: vec![("container", &self.am.container_resources)],
            submitted_as: "application",
            submitted_detail: String::new(),
            ship: Some(&self.ship),
        }
    }
}

/// The `application-submission-context` whose AM is `exe` (shipped as local resource
/// `spindle`) run as `./spindle distributed-shell-am`.
pub fn build_submission(
    opts: &DsOptions,
    app_id: &ApplicationId,
    exe: &Path,
) -> ApplicationSubmissionContext {
    launch::build_submission(&opts.launch(), app_id, exe)
}

/// Submits the distributed shell and follows it to a final state.
pub async fn run_client(
    rm: &RmClient,
    opts: &DsOptions,
    exe: &Path,
    out: &mut (dyn FnMut(&str) + Send),
) -> Result<DsOutcome, DsClientError> {
    launch::run_client(rm, &opts.launch(), exe, out).await
}

/// Polls the application every `poll` until it reaches a final state, printing each state
/// change, then the final report.
pub async fn follow_application(
    rm: &RmClient,
    app_id: &ApplicationId,
    poll: Duration,
    out: &mut (dyn FnMut(&str) + Send),
) -> Result<DsOutcome, ClientError> {
    let mut last_state: Option<YarnApplicationState> = None;
    let mut sizes = GangSizes::default();
    let mut unreachable_since: Option<Instant> = None;
    loop {
        let Some(app) = look_at_app(rm, app_id, &mut unreachable_since, poll).await? else {
            continue;
        };
        if last_state != Some(app.state) {
            out(&state_line(&app));
            last_state = Some(app.state);
        }
        for l in sizes.lines(&app) {
            out(&l);
        }
        if app.state.is_final() {
            let outcome = DsOutcome {
                app_id: *app_id,
                state: app.state,
                final_status: app.final_status,
                diagnostics: app.diagnostics.clone(),
                am_container_logs: app.am_container_logs.clone().filter(|s| !s.is_empty()),
            };
            for l in final_report(&outcome) {
                out(&l);
            }
            return Ok(outcome);
        }
        tokio::time::sleep(poll).await;
    }
}

/// What the client last saw of each elastic gang (members now, resizes, the RM's words), to
/// print each resize once.
#[derive(Debug, Default)]
pub struct GangSizes {
    seen: std::collections::BTreeMap<String, (u32, u32)>,
    diagnostics: String,
}

impl GangSizes {
    /// Lines for what changed since the last look: `gang workers grown 4 -> 8`, `gang
    /// workers shrunk 8 -> 4`, and the RM's word on a resize under way (its deadline).
    pub fn lines(&mut self, app: &AppInfo) -> Vec<String> {
        let mut out = Vec::new();
        let d = app.diagnostics.trim();
        if d != self.diagnostics {
            if d.starts_with("Gang ") && (d.contains("shrink") || d.contains("growth")) {
                out.push(format!("ResourceManager: {d}"));
            }
            self.diagnostics = d.to_string();
        }
        for g in app.gangs.iter().filter(|g| g.current_size > 0) {
            let now = (g.current_size, g.resizes);
            match self.seen.insert(g.id.clone(), now) {
                Some((was, _)) if now.0 > was => {
                    out.push(format!("gang {} grown {was} -> {}", g.id, now.0))
                }
                Some((was, _)) if now.0 < was => {
                    out.push(format!("gang {} shrunk {was} -> {}", g.id, now.0))
                }
                Some(_) => {}
                None => out.push(format!("gang {} runs at {} members", g.id, now.0)),
            }
        }
        out
    }
}

fn state_line(app: &AppInfo) -> String {
    let mut l = format!("Application {} is {}", app.id, app.state);
    if let Some(u) = app.tracking_url.as_deref().filter(|u| !u.is_empty()) {
        if app.state == YarnApplicationState::RUNNING {
            l.push_str(&format!(" (tracking URL: {u})"));
        }
    }
    l
}

/// The closing lines: final state and status, diagnostics, where the logs are.
pub fn final_report(o: &DsOutcome) -> Vec<String> {
    let diag = if o.diagnostics.trim().is_empty() {
        "(none)".to_string()
    } else {
        o.diagnostics.trim().to_string()
    };
    vec![
        format!(
            "Application {} finished with state {} and final status {}",
            o.app_id, o.state, o.final_status
        ),
        format!("Diagnostics: {diag}"),
        format!(
            "AM container logs: {}",
            o.am_container_logs.as_deref().unwrap_or("(not available)")
        ),
        format!(
            "All container logs: spindle logs -applicationId {}",
            o.app_id
        ),
    ]
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn opts() -> DsOptions {
        DsOptions::new(DsAmConfig {
            num_containers: 2,
            container_resources: Resource::new(256, 1),
            shell_command: "echo hi".into(),
            shell_env: BTreeMap::from([("K".into(), "V".into())]),
            container_priority: 0,
            no_progress_timeout: Duration::from_secs(60),
            placement: Vec::new(),
            node_label_expression: None,
        })
    }

    #[test]
    fn submission_ships_this_binary_as_the_am() {
        let exe = std::env::current_exe().unwrap();
        let id: ApplicationId = "application_1_0002".parse().unwrap();
        let ctx = build_submission(&opts(), &id, &exe);
        let v = serde_json::to_value(&ctx).unwrap();
        assert_eq!(v["application-id"], "application_1_0002");
        assert_eq!(v["application-type"], "DISTRIBUTEDSHELL");
        assert_eq!(v["application-name"], "DistributedShell");
        assert_eq!(v["resource"], serde_json::json!({"memory":512,"vCores":1}));
        let spec = &v["am-container-spec"];
        assert_eq!(
            spec["commands"]["command"],
            "./spindle distributed-shell-am"
        );
        let lr = &spec["local-resources"]["entry"][0];
        assert_eq!(lr["key"], "spindle");
        assert_eq!(lr["value"]["type"], "FILE");
        assert_eq!(lr["value"]["visibility"], "APPLICATION");
        assert_eq!(lr["value"]["resource"], format!("file://{}", exe.display()));
        assert!(lr["value"]["size"].as_i64().unwrap() > 0);
        let env = spec["environment"]["entry"].as_array().unwrap();
        let get = |k: &str| {
            env.iter()
                .find(|e| e["key"] == k)
                .map(|e| e["value"].as_str().unwrap().to_string())
        };
        assert_eq!(get("DISTRIBUTEDSHELL_NUM_CONTAINERS").unwrap(), "2");
        assert_eq!(get("DISTRIBUTEDSHELL_SHELL_COMMAND").unwrap(), "echo hi");
        assert_eq!(get("DISTRIBUTEDSHELL_SHELL_ENV").unwrap(), r#"{"K":"V"}"#);
        assert_eq!(
            get("DISTRIBUTEDSHELL_CONTAINER_RESOURCES").unwrap(),
            "memory-mb=256,vcores=1"
        );
        assert!(v
            .get("app-node-label-expression")
            .is_none_or(|l| l.is_null()));
        assert!(get("DISTRIBUTEDSHELL_PLACEMENT_SPEC").is_none());
    }

    #[test]
    fn placement_spec_and_label_are_submitted() {
        let mut o = opts();
        o.am.placement = crate::placement::parse("zk=2,NOTIN,NODE,zk").expect("parses");
        o.am.num_containers = 2;
        o.am.node_label_expression = Some("h100".into());
        let exe = std::env::current_exe().expect("test binary");
        let id: ApplicationId = "application_1_0002".parse().expect("id");
        let v = serde_json::to_value(build_submission(&o, &id, &exe)).expect("json");
        assert_eq!(v["app-node-label-expression"], "h100");
        assert!(v
            .get("am-container-node-label-expression")
            .is_none_or(|l| l.is_null()));
        let env = v["am-container-spec"]["environment"]["entry"]
            .as_array()
            .expect("env")
            .clone();
        let get = |k: &str| {
            env.iter()
                .find(|e| e["key"] == k)
                .and_then(|e| e["value"].as_str().map(str::to_string))
        };
        assert_eq!(
            get("DISTRIBUTEDSHELL_PLACEMENT_SPEC").as_deref(),
            Some("zk=2,NOTIN,NODE,zk")
        );
        assert_eq!(
            get("DISTRIBUTEDSHELL_NODE_LABEL_EXPRESSION").as_deref(),
            Some("h100")
        );
    }

    #[test]
    fn final_report_names_the_logs() {
        let o = DsOutcome {
            app_id: "application_1_0002".parse().unwrap(),
            state: YarnApplicationState::FINISHED,
            final_status: FinalApplicationStatus::FAILED,
            diagnostics: "1 of 2 containers failed".into(),
            am_container_logs: Some("http://h:1/node/containerlogs/c/u".into()),
        };
        assert!(!o.succeeded());
        let r = final_report(&o);
        assert_eq!(
            r[0],
            "Application application_1_0002 finished with state FINISHED and final status FAILED"
        );
        assert_eq!(r[1], "Diagnostics: 1 of 2 containers failed");
        assert!(r[2].ends_with("/node/containerlogs/c/u"));
        assert_eq!(
            r[3],
            "All container logs: spindle logs -applicationId application_1_0002"
        );
    }

    #[test]
    fn elastic_gang_resizes_are_told_once() {
        let app = |current: u32, resizes: u32, diag: &str| -> AppInfo {
            serde_json::from_value(serde_json::json!({
                "id": "application_1_0001", "state": "RUNNING", "diagnostics": diag,
                "gangs": [{"id": "workers", "state": "ALLOCATED", "size": current,
                           "currentSize": current, "resizes": resizes}],
            }))
            .expect("an app")
        };
        let mut g = GangSizes::default();
        assert_eq!(g.lines(&app(2, 0, "")), ["gang workers runs at 2 members"]);
        assert!(g.lines(&app(2, 0, "")).is_empty());
        assert_eq!(g.lines(&app(8, 1, "")), ["gang workers grown 2 -> 8"]);
        let asked = "Gang workers asked to shrink from 8 to 4 members by 10000 ms from now";
        assert_eq!(
            g.lines(&app(8, 2, asked)),
            [format!("ResourceManager: {asked}")]
        );
        assert_eq!(g.lines(&app(4, 2, asked)), ["gang workers shrunk 8 -> 4"]);
        // A rigid gang (no current size) says nothing.
        let mut rigid = app(0, 0, "");
        rigid.gangs[0].current_size = 0;
        assert!(GangSizes::default().lines(&rigid).is_empty());
    }
}
