//! The `spindle sweep` client's submission: the distributed shell's, with the sweep AM and
//! its trials ([`crate::launch`] submits and follows it).

use crate::dshell::DsOptions;
use crate::launch::AmLaunch;

use super::{SweepAmConfig, Trial, AM_COMMAND, APPLICATION_TYPE};

/// Everything `spindle sweep` takes.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepOptions {
    /// The trials' command, environment and resources, and the application's name, queue,
    /// priority, AM resources, timeout, attempts and shipped files, as the distributed
    /// shell's (`shell.am.num_containers` is the number of trials).
    pub shell: DsOptions,
    pub trials: Vec<Trial>,
    /// `--array`: the trials are a Slurm job array.
    pub array: bool,
    pub parallel: u32,
    pub max_trial_retries: u32,
}

/// The application name when `--appname` is not given.
pub const DEFAULT_APP_NAME: &str = "spindle-sweep";

impl SweepOptions {
    /// What the AM is handed.
    pub fn am_config(&self) -> SweepAmConfig {
        let mut shell = self.shell.am.clone();
        shell.num_containers = self.trials.len() as u32;
        SweepAmConfig {
            shell,
            trials: self.trials.clone(),
            array: self.array,
            parallel: self.parallel,
            max_trial_retries: self.max_trial_retries,
        }
    }

    /// What the shared launcher submits: `./spindle sweep-am` with the parameters in
    /// `DISTRIBUTEDSHELL_*` and `SPINDLE_SWEEP_*`, each trial's container checked before
    /// submission.
    pub fn launch(&self) -> AmLaunch<'_> {
        let mut l = self.shell.launch();
        l.application_type = APPLICATION_TYPE;
        l.am_command = AM_COMMAND;
        l.am_env = self.am_config().to_env();
        l.asks = vec![("trial", &self.shell.am.container_resources)];
        l.submitted_as = "sweep";
        l.submitted_detail = format!(
            " of {} trials (at most {} at once)",
            self.trials.len(),
            self.parallel
        );
        l
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use spindle_common::ids::ApplicationId;
    use spindle_common::resource::Resource;

    use super::*;
    use crate::dshell::{DsAmConfig, DEFAULT_NO_PROGRESS_TIMEOUT};
    use crate::sweep::{grid, parse_param, ENV_PARALLEL, ENV_TRIALS};

    #[test]
    fn the_sweep_am_is_submitted_with_its_trials() {
        let mut shell = DsOptions::new(DsAmConfig {
            num_containers: 1,
            container_resources: Resource::new(256, 1).with("yarn.io/gpu", 1),
            shell_command: "python3 t.py".into(),
            shell_env: BTreeMap::new(),
            container_priority: 0,
            no_progress_timeout: DEFAULT_NO_PROGRESS_TIMEOUT,
            placement: Vec::new(),
            node_label_expression: None,
        });
        shell.app_name = DEFAULT_APP_NAME.into();
        let o = SweepOptions {
            shell,
            trials: grid(&[parse_param("lr=1,2,3").expect("lr")]).expect("grid"),
            array: false,
            parallel: 2,
            max_trial_retries: 1,
        };
        let exe = std::env::current_exe().expect("test binary");
        let id: ApplicationId = "application_1_0002".parse().expect("id");
        let ctx = crate::launch::build_submission(&o.launch(), &id, &exe);
        let v = serde_json::to_value(&ctx).expect("json");
        assert_eq!(v["application-type"], "SPINDLE_SWEEP");
        assert_eq!(v["application-name"], "spindle-sweep");
        let spec = &v["am-container-spec"];
        assert_eq!(spec["commands"]["command"], "./spindle sweep-am");
        let env = spec["environment"]["entry"].as_array().expect("env");
        let get = |k: &str| {
            env.iter()
                .find(|e| e["key"] == k)
                .and_then(|e| e["value"].as_str())
                .map(str::to_string)
        };
        assert_eq!(get(ENV_PARALLEL).as_deref(), Some("2"));
        assert_eq!(get("DISTRIBUTEDSHELL_NUM_CONTAINERS").as_deref(), Some("3"));
        let trials: serde_json::Value =
            serde_json::from_str(&get(ENV_TRIALS).expect("trials")).expect("JSON");
        assert_eq!(
            trials["trials"][2]["params"][0],
            serde_json::json!(["lr", "3"])
        );
        assert_eq!(
            o.launch().submitted_detail,
            " of 3 trials (at most 2 at once)"
        );
    }
}
