//! The `spindle train` client: new application, submission of the training AM (this binary,
//! shipped as a local resource), and following it to the end, as the distributed shell does.

use std::path::Path;
use std::time::Duration;

use spindle_common::ids::ApplicationId;
use spindle_common::records::cluster::ApplicationSubmissionContext;
use spindle_common::resource::Resource;

use super::{TrainAmConfig, AM_COMMAND, AM_RESOURCE_KEY, APPLICATION_TYPE};
use crate::dshell::client::{DsClientError, DsOutcome};
use crate::launch::{self, AmLaunch};
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
    /// YARN's `LIFETIME`, enforced by the RM (see [`AmLaunch::lifetime`]).
    pub lifetime: Option<Duration>,
    /// What the RM waits for before it schedules the application.
    pub dependencies: crate::launch::Dependencies,
    /// AM attempts. Default 2: the application keeps its containers across attempts, so a
    /// second AM takes the running gang over instead of starting the training again
    /// (restarts after a worker failure are the gang's business, `--max-restarts`).
    pub max_app_attempts: Option<i32>,
    /// `--files`, `--archives`, `--src-dir`: shipped to every worker.
    pub ship: crate::ship::Shipment,
    /// Fail fast (`--fail-fast-window-ms`): a gang attempt whose workers all failed alike
    /// within this long of starting ends the application (None: the AM's default).
    pub fail_fast_window: Option<Duration>,
}

impl TrainOptions {
    /// Name `spindle-train`, an AM of 512 MB and 1 vcore, two AM attempts.
    pub fn new(am: TrainAmConfig) -> Self {
        Self {
            am,
            app_name: "spindle-train".into(),
            queue: None,
            priority: None,
            master_resources: Resource::new(512, 1),
            lifetime: None,
            dependencies: Default::default(),
            max_app_attempts: Some(2),
            ship: crate::ship::Shipment::default(),
            fail_fast_window: None,
        }
    }
}

impl TrainOptions {
    /// What the shared launcher submits: `./spindle train-am` with the parameters in
    /// `SPINDLE_TRAIN_*`, its workers checked before submission.
    pub fn launch(&self) -> AmLaunch<'_> {
        AmLaunch {
            application_type: APPLICATION_TYPE,
            am_resource_key: Some(AM_RESOURCE_KEY),
            am_localizes_shipment: false,
            am_command: AM_COMMAND,
            am_env: {
                let mut env = self.am.to_env();
                if let Some(w) = self.fail_fast_window {
                    env.push((
                        super::ENV_FAIL_FAST_WINDOW_MS.into(),
                        w.as_millis().to_string(),
                    ));
                }
                env
            },
            app_name: &self.app_name,
            queue: self.queue.as_deref(),
            priority: self.priority,
            master_resources: &self.master_resources,
            max_app_attempts: self.max_app_attempts,
            keep_containers: true,
            lifetime: self.lifetime,
            dependencies: &self.dependencies,
            app_node_label_expression: self.am.node_label_expression.as_deref(),
            asks: vec![("worker", &self.am.worker_resources)],
            submitted_as: "training application",
            submitted_detail: match &self.am.elastic {
                Some(e) => format!(
                    " ({} to {} elastic workers of {})",
                    e.min, e.max, self.am.worker_resources
                ),
                None => format!(
                    " ({} workers of {})",
                    self.am.workers, self.am.worker_resources
                ),
            },
            ship: Some(&self.ship),
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
    launch::build_submission(&opts.launch(), app_id, exe)
}

/// Submits the training application and follows it to a final state.
pub async fn run_client(
    rm: &RmClient,
    opts: &TrainOptions,
    exe: &Path,
    out: &mut (dyn FnMut(&str) + Send),
) -> Result<DsOutcome, DsClientError> {
    launch::run_client(rm, &opts.launch(), exe, out).await
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
            checkpoint_check: false,
            command: vec!["/bin/worker".into(), "--x".into()],
            worker_env: BTreeMap::new(),
            elastic: None,
            node_label_expression: None,
            gpu_model: None,
            cpus_per_gpu: None,
            cpu_throughput: Default::default(),
        });
        let v = serde_json::to_value(build_submission(&opts, &id, &exe)).unwrap();
        assert_eq!(v["application-type"], "SPINDLE_TRAIN");
        assert_eq!(v["max-app-attempts"], 2);
        assert_eq!(v["keep-containers-across-application-attempts"], true);
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
