//! The `spindle train` client: new application, submission of the training AM (this binary,
//! shipped as a local resource), and following it to the end, as the distributed shell does.

use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use spindle_common::ids::ApplicationId;
use spindle_common::records::cluster::{
    AmContainerSpec, ApplicationSubmissionContext, CommandsInfo, KeyValue, KeyValues,
    LocalResourceEntry, LocalResourceInfo, LocalResourcesInfo,
};
use spindle_common::records::resource::ResourceInfo;
use spindle_common::resource::Resource;

use super::{TrainAmConfig, AM_COMMAND, AM_RESOURCE_KEY, APPLICATION_TYPE};
use crate::dshell::client::{follow_application, DsClientError, DsOutcome, POLL_INTERVAL};
use crate::rm_client::RmClient;

/// Everything `spindle train` takes.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainOptions {
    pub am: TrainAmConfig,
    pub app_name: String,
    pub queue: Option<String>,
    /// Application priority (higher is more important).
    pub priority: Option<i32>,
    pub master_resources: Resource,
    /// Kill the application when it has not finished after this long.
    pub timeout: Option<Duration>,
    /// AM attempts. Default 1: a new AM attempt would start the training over with its own
    /// gang attempts; restarts are the gang's business (`--max-restarts`).
    pub max_app_attempts: Option<i32>,
}

impl TrainOptions {
    /// Name `spindle-train`, an AM of 512 MB and 1 vcore, one AM attempt.
    pub fn new(am: TrainAmConfig) -> Self {
        Self {
            am,
            app_name: "spindle-train".into(),
            queue: None,
            priority: None,
            master_resources: Resource::new(512, 1),
            timeout: None,
            max_app_attempts: Some(1),
        }
    }
}

/// The `application-submission-context` whose AM is `exe` (shipped as local resource
/// `spindle`) run as `./spindle train-am`, its parameters in `SPINDLE_TRAIN_*`.
pub fn build_submission(
    opts: &TrainOptions,
    app_id: &ApplicationId,
    exe: &Path,
) -> ApplicationSubmissionContext {
    let meta = std::fs::metadata(exe).ok();
    let size = meta
        .as_ref()
        .map(|m| i64::try_from(m.len()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    let timestamp = meta
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    let env = opts
        .am
        .to_env()
        .into_iter()
        .map(|(key, value)| KeyValue { key, value })
        .collect::<Vec<_>>();
    ApplicationSubmissionContext {
        application_id: app_id.to_string(),
        application_name: Some(opts.app_name.clone()),
        queue: opts.queue.clone(),
        priority: opts.priority,
        am_container_spec: AmContainerSpec {
            local_resources: Some(LocalResourcesInfo {
                entry: vec![LocalResourceEntry {
                    key: AM_RESOURCE_KEY.into(),
                    value: LocalResourceInfo {
                        resource: format!("file://{}", exe.display()),
                        kind: "FILE".into(),
                        visibility: "APPLICATION".into(),
                        size,
                        timestamp,
                    },
                }]
                .into(),
            }),
            environment: Some(KeyValues { entry: env.into() }),
            commands: Some(CommandsInfo {
                command: AM_COMMAND.into(),
            }),
            service_data: None,
            application_acls: None,
        },
        unmanaged_am: false,
        max_app_attempts: opts.max_app_attempts,
        resource: Some(ResourceInfo::plain(&opts.master_resources)),
        application_type: Some(APPLICATION_TYPE.into()),
        keep_containers_across_application_attempts: false,
        application_tags: None,
        attempt_failures_validity_interval: None,
        app_node_label_expression: None,
        am_container_node_label_expression: None,
    }
}

fn check_fits(what: &'static str, asked: &Resource, max: &Resource) -> Result<(), DsClientError> {
    // Only the types the RM reports a maximum for can be checked.
    let over = asked
        .entries()
        .any(|(k, v)| v > max.get(k) && (max.get(k) > 0 || k == "memory-mb" || k == "vcores"));
    if !max.is_zero() && over {
        return Err(DsClientError::TooLarge {
            what,
            asked: asked.to_string(),
            max: max.to_string(),
        });
    }
    Ok(())
}

/// Submits the training application and follows it to a final state.
pub async fn run_client(
    rm: &RmClient,
    opts: &TrainOptions,
    exe: &Path,
    out: &mut (dyn FnMut(&str) + Send),
) -> Result<DsOutcome, DsClientError> {
    let new_app = rm.new_application().await?;
    let app_id = new_app.application_id;
    let max = new_app.maximum_resource_capability.to_resource();
    check_fits("worker", &opts.am.worker_resources, &max)?;
    check_fits("application master", &opts.master_resources, &max)?;
    let ctx = build_submission(opts, &app_id, exe);
    rm.submit(&ctx).await?;
    out(&format!(
        "Submitted training application {app_id} ({} workers of {}) to ResourceManager at {}",
        opts.am.workers,
        opts.am.worker_resources,
        rm.address()
    ));
    Ok(follow_application(rm, &app_id, POLL_INTERVAL, opts.timeout, out).await?)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use spindle_common::records::am::GangPlacement;

    use super::*;

    #[test]
    fn submission_ships_this_binary_as_the_train_am() {
        let exe = std::env::current_exe().unwrap();
        let id: ApplicationId = "application_1_0003".parse().unwrap();
        let opts = TrainOptions::new(TrainAmConfig {
            workers: 16,
            worker_resources: Resource::new(256, 1).with("yarn.io/gpu", 1),
            placement: GangPlacement::PACK,
            max_nodes: 0,
            gang_timeout: None,
            max_restarts: 3,
            checkpoint_dir: None,
            command: vec!["/bin/worker".into(), "--x".into()],
            worker_env: BTreeMap::new(),
        });
        let v = serde_json::to_value(build_submission(&opts, &id, &exe)).unwrap();
        assert_eq!(v["application-type"], "SPINDLE_TRAIN");
        assert_eq!(v["max-app-attempts"], 1);
        let spec = &v["am-container-spec"];
        assert_eq!(spec["commands"]["command"], "./spindle train-am");
        assert_eq!(spec["local-resources"]["entry"][0]["key"], "spindle");
        let env = spec["environment"]["entry"].as_array().unwrap();
        let get = |k: &str| {
            env.iter()
                .find(|e| e["key"] == k)
                .and_then(|e| e["value"].as_str())
                .map(str::to_string)
        };
        assert_eq!(get("SPINDLE_TRAIN_WORKERS").as_deref(), Some("16"));
        assert_eq!(
            get("SPINDLE_TRAIN_COMMAND").as_deref(),
            Some(r#"["/bin/worker","--x"]"#)
        );
        assert_eq!(get("SPINDLE_TRAIN_PLACEMENT").as_deref(), Some("PACK"));
    }
}
