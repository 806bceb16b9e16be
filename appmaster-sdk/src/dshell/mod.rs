//! Distributed shell, as Hadoop YARN's: a client that submits an application whose AM is
//! this same `spindle` binary (`spindle distributed-shell-am`), and that AM, which runs a
//! shell command in N containers and succeeds only if every one exits 0.
//!
//! The client hands the AM its parameters in the AM container's environment
//! (`DISTRIBUTEDSHELL_*`, see [`DsAmConfig::to_env`]).

pub mod am;
pub mod client;

use std::collections::BTreeMap;
use std::time::Duration;

use spindle_common::records::resource::parse_resource_list;
use spindle_common::resource::Resource;

use crate::placement::{self, PlacementSpec};

pub use am::{run_am, run_am_with, DsAmReport};
pub use client::{build_submission, follow_application, run_client, DsOptions, DsOutcome};

pub const ENV_NUM_CONTAINERS: &str = "DISTRIBUTEDSHELL_NUM_CONTAINERS";
pub const ENV_CONTAINER_RESOURCES: &str = "DISTRIBUTEDSHELL_CONTAINER_RESOURCES";
pub const ENV_SHELL_COMMAND: &str = "DISTRIBUTEDSHELL_SHELL_COMMAND";
/// A JSON object of the containers' environment, `{"K":"V",...}`.
pub const ENV_SHELL_ENV: &str = "DISTRIBUTEDSHELL_SHELL_ENV";
pub const ENV_CONTAINER_PRIORITY: &str = "DISTRIBUTEDSHELL_CONTAINER_PRIORITY";
pub const ENV_NO_PROGRESS_TIMEOUT_MS: &str = "DISTRIBUTEDSHELL_NO_PROGRESS_TIMEOUT_MS";
/// The `--placement_spec` (as [`crate::placement::render`] writes it); absent without one.
pub const ENV_PLACEMENT_SPEC: &str = "DISTRIBUTEDSHELL_PLACEMENT_SPEC";
/// The containers' node label expression; absent without one.
pub const ENV_NODE_LABEL_EXPRESSION: &str = "DISTRIBUTEDSHELL_NODE_LABEL_EXPRESSION";

/// YARN's application type for these applications.
pub const APPLICATION_TYPE: &str = "DISTRIBUTEDSHELL";
/// The key of the shipped binary among the AM's local resources, and so its file name.
pub const AM_RESOURCE_KEY: &str = "spindle";
pub const AM_COMMAND: &str = "./spindle distributed-shell-am";
/// `--shell_script FILE` is shipped under this name and run as `bash ExecScript.sh`, as in
/// YARN's distributed shell.
pub const SHELL_SCRIPT_NAME: &str = "ExecScript.sh";
/// The AM gives up when nothing happens for this long (no grant, start or completion).
pub const DEFAULT_NO_PROGRESS_TIMEOUT: Duration = Duration::from_secs(300);

/// What the AM is asked to do.
#[derive(Debug, Clone, PartialEq)]
pub struct DsAmConfig {
    pub num_containers: u32,
    pub container_resources: Resource,
    pub shell_command: String,
    pub shell_env: BTreeMap<String, String>,
    pub container_priority: i32,
    pub no_progress_timeout: Duration,
    /// YARN's `-placement_spec`: one ask per source tag, its containers tagged with it and
    /// placed by its constraint. When given, `num_containers` is the sum of its counts.
    pub placement: Vec<PlacementSpec>,
    /// YARN's `-node_label_expression`: the partition the containers run in.
    pub node_label_expression: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum DsConfigError {
    #[error("environment variable {0} is not set (is this the distributed shell AM container?)")]
    Missing(&'static str),
    #[error("environment variable {name}='{value}' is invalid: {reason}")]
    Invalid {
        name: &'static str,
        value: String,
        reason: String,
    },
}

/// `memory-mb=256,vcores=1,yarn.io/gpu=1`, as `-container_resources` takes it.
pub fn resource_list(r: &Resource) -> String {
    r.entries()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

impl DsAmConfig {
    /// The AM container's environment entries that carry this configuration.
    pub fn to_env(&self) -> Vec<(String, String)> {
        let env_json = serde_json::to_string(&self.shell_env).unwrap_or_else(|_| "{}".into());
        let mut env = vec![
            (ENV_NUM_CONTAINERS.into(), self.num_containers.to_string()),
            (
                ENV_CONTAINER_RESOURCES.into(),
                resource_list(&self.container_resources),
            ),
            (ENV_SHELL_COMMAND.into(), self.shell_command.clone()),
            (ENV_SHELL_ENV.into(), env_json),
            (
                ENV_CONTAINER_PRIORITY.into(),
                self.container_priority.to_string(),
            ),
            (
                ENV_NO_PROGRESS_TIMEOUT_MS.into(),
                self.no_progress_timeout.as_millis().to_string(),
            ),
        ];
        if !self.placement.is_empty() {
            env.push((
                ENV_PLACEMENT_SPEC.into(),
                placement::render(&self.placement),
            ));
        }
        if let Some(e) = &self.node_label_expression {
            env.push((ENV_NODE_LABEL_EXPRESSION.into(), e.clone()));
        }
        env
    }

    pub fn from_env() -> Result<Self, DsConfigError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads the configuration back; the command and count are required.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, DsConfigError> {
        let invalid = |name: &'static str, value: &str, reason: String| DsConfigError::Invalid {
            name,
            value: value.to_string(),
            reason,
        };
        let n = lookup(ENV_NUM_CONTAINERS).ok_or(DsConfigError::Missing(ENV_NUM_CONTAINERS))?;
        let num_containers: u32 = n
            .trim()
            .parse()
            .map_err(|_| invalid(ENV_NUM_CONTAINERS, &n, "not a whole number".into()))?;
        if num_containers == 0 {
            return Err(invalid(ENV_NUM_CONTAINERS, &n, "must be at least 1".into()));
        }
        let shell_command =
            lookup(ENV_SHELL_COMMAND).ok_or(DsConfigError::Missing(ENV_SHELL_COMMAND))?;
        if shell_command.trim().is_empty() {
            return Err(invalid(ENV_SHELL_COMMAND, &shell_command, "empty".into()));
        }
        let container_resources = match lookup(ENV_CONTAINER_RESOURCES) {
            Some(v) => {
                parse_resource_list(&v).map_err(|r| invalid(ENV_CONTAINER_RESOURCES, &v, r))?
            }
            None => default_container_resources(),
        };
        let shell_env = match lookup(ENV_SHELL_ENV).filter(|v| !v.trim().is_empty()) {
            Some(v) => serde_json::from_str(&v).map_err(|e| {
                invalid(
                    ENV_SHELL_ENV,
                    &v,
                    format!("not a JSON object of strings: {e}"),
                )
            })?,
            None => BTreeMap::new(),
        };
        let container_priority = match lookup(ENV_CONTAINER_PRIORITY) {
            Some(v) => v
                .trim()
                .parse()
                .map_err(|_| invalid(ENV_CONTAINER_PRIORITY, &v, "not an integer".into()))?,
            None => 0,
        };
        let no_progress_timeout = match lookup(ENV_NO_PROGRESS_TIMEOUT_MS) {
            Some(v) => Duration::from_millis(v.trim().parse().map_err(|_| {
                invalid(
                    ENV_NO_PROGRESS_TIMEOUT_MS,
                    &v,
                    "not a number of milliseconds".into(),
                )
            })?),
            None => DEFAULT_NO_PROGRESS_TIMEOUT,
        };
        let placement = match lookup(ENV_PLACEMENT_SPEC).filter(|v| !v.trim().is_empty()) {
            Some(v) => {
                placement::parse(&v).map_err(|e| invalid(ENV_PLACEMENT_SPEC, &v, e.to_string()))?
            }
            None => Vec::new(),
        };
        let num_containers = if placement.is_empty() {
            num_containers
        } else {
            placement::total_containers(&placement)
        };
        let node_label_expression = lookup(ENV_NODE_LABEL_EXPRESSION)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty());
        Ok(Self {
            num_containers,
            container_resources,
            shell_command,
            shell_env,
            container_priority,
            no_progress_timeout,
            placement,
            node_label_expression,
        })
    }
}

/// `memory-mb=256,vcores=1`.
pub fn default_container_resources() -> Resource {
    Resource::new(256, 1)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use spindle_common::resource::GPU;

    use super::*;

    #[test]
    fn config_round_trips_through_the_environment() {
        let cfg = DsAmConfig {
            num_containers: 3,
            container_resources: Resource::new(512, 2).with(GPU, 1),
            shell_command: "echo \"a b\" && exit 3".into(),
            shell_env: BTreeMap::from([("A".into(), "1=2".into()), ("B".into(), "x y".into())]),
            container_priority: 5,
            no_progress_timeout: Duration::from_millis(1234),
            placement: Vec::new(),
            node_label_expression: None,
        };
        let env: HashMap<String, String> = cfg.to_env().into_iter().collect();
        assert_eq!(
            env[ENV_CONTAINER_RESOURCES],
            "memory-mb=512,vcores=2,yarn.io/gpu=1"
        );
        let back = DsAmConfig::from_lookup(|k| env.get(k).cloned()).unwrap();
        assert_eq!(back, cfg);
        assert!(!env.contains_key(ENV_PLACEMENT_SPEC));
    }

    #[test]
    fn placement_and_label_travel_to_the_am() {
        let cfg = DsAmConfig {
            num_containers: 8,
            container_resources: Resource::new(256, 1),
            shell_command: "true".into(),
            shell_env: BTreeMap::new(),
            container_priority: 0,
            no_progress_timeout: DEFAULT_NO_PROGRESS_TIMEOUT,
            placement: placement::parse("zk=3,NOTIN,NODE,zk:hbase=5,IN,RACK,zk").unwrap(),
            node_label_expression: Some("h100".into()),
        };
        let env: HashMap<String, String> = cfg.to_env().into_iter().collect();
        assert_eq!(
            env[ENV_PLACEMENT_SPEC],
            "zk=3,NOTIN,NODE,zk:hbase=5,IN,RACK,zk"
        );
        assert_eq!(env[ENV_NODE_LABEL_EXPRESSION], "h100");
        let back = DsAmConfig::from_lookup(|k| env.get(k).cloned()).unwrap();
        assert_eq!(back, cfg);
        // The count follows the spec, whatever NUM_CONTAINERS says.
        let mut env = env;
        env.insert(ENV_NUM_CONTAINERS.into(), "1".into());
        let back = DsAmConfig::from_lookup(|k| env.get(k).cloned()).unwrap();
        assert_eq!(back.num_containers, 8);
        env.insert(ENV_PLACEMENT_SPEC.into(), "zk=3,NOTIN,NODES,zk".into());
        let e = DsAmConfig::from_lookup(|k| env.get(k).cloned()).unwrap_err();
        assert!(e.to_string().contains("unknown scope `NODES`"), "{e}");
    }

    #[test]
    fn bad_environment_is_named() {
        let mut env = HashMap::from([
            (ENV_NUM_CONTAINERS.to_string(), "2".to_string()),
            (ENV_SHELL_COMMAND.to_string(), "true".to_string()),
        ]);
        let cfg = DsAmConfig::from_lookup(|k| env.get(k).cloned()).unwrap();
        assert_eq!(cfg.container_resources, default_container_resources());
        assert!(cfg.shell_env.is_empty());
        env.insert(ENV_NUM_CONTAINERS.into(), "zero".into());
        let e = DsAmConfig::from_lookup(|k| env.get(k).cloned()).unwrap_err();
        assert!(e.to_string().contains(ENV_NUM_CONTAINERS), "{e}");
        env.insert(ENV_NUM_CONTAINERS.into(), "1".into());
        env.insert(ENV_SHELL_ENV.into(), "[1]".into());
        let e = DsAmConfig::from_lookup(|k| env.get(k).cloned()).unwrap_err();
        assert!(e.to_string().contains(ENV_SHELL_ENV), "{e}");
        env.remove(ENV_SHELL_COMMAND);
        assert!(matches!(
            DsAmConfig::from_lookup(|k| env.get(k).cloned()),
            Err(DsConfigError::Missing(ENV_SHELL_COMMAND))
        ));
    }
}
