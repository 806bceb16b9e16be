//! Submitting your own application master: a builder for the application (YARN's `yarn jar`
//! and distributed shell client, in Rust), which `spindle submit` itself uses.
//!
//! ```no_run
//! use spindle_appmaster_sdk::launch::Watch;
//! use spindle_appmaster_sdk::submission::Submission;
//! use spindle_appmaster_sdk::{RmClient, RmAddress, Resource};
//!
//! # async fn example() -> anyhow::Result<()> {
//! let rm = RmClient::new(&RmAddress::resolve(None, None)?)?;
//! let s = Submission::new("hpsearch")
//!     .am_file("target/release/hpsearch-am")? // shipped like --files, run as ./hpsearch-am
//!     .local_resource("grid.json", "grid.json") // in the AM's working directory too
//!     .env("TRIALS", "16")
//!     .queue("default")
//!     .am_resources(Resource::new(512, 1))
//!     .lifetime(std::time::Duration::from_secs(3600));
//! let id = s.submit(&rm, &mut |line| println!("{line}")).await?;
//! # let _ = id;
//! # Ok(())
//! # }
//! ```
//!
//! The AM runs in its own container with the RM's address and its AM-RM token in the
//! environment (`AmClient::from_env`); everything shipped (`am_file`, `local_resource`,
//! `archive`, `src_dir`) is in its working directory, and handed to it in
//! `SPINDLE_LOCAL_RESOURCES` for its workers ([`crate::ship::Shipped`]).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use spindle_common::ids::ApplicationId;
use spindle_common::resource::Resource;
use spindle_common::runtime_request::RuntimeRequest;

use crate::dshell::client::DsClientError;
use crate::launch::{self, AmLaunch, ClientEnd, Dependencies, Watch};
use crate::rm_client::RmClient;
use crate::ship::{ShipError, Shipment};

/// YARN's application type of a submitted AM (what `application -list -appTypes` filters).
pub const APPLICATION_TYPE: &str = "SPINDLE";

/// The AM container's resources when none are given: YARN's default AM (1 GB would waste a
/// GPU node's memory on a small AM; the distributed shell's default).
pub fn default_am_resources() -> Resource {
    Resource::new(512, 1)
}

/// Why a submission cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum SubmissionError {
    /// Neither an AM file nor an AM command: nothing would run.
    #[error("no application master: give an AM file (am_file, --am-file) or a command (am_command, --am-command)")]
    NoAm,
    /// The AM file's name cannot be a command word.
    #[error("AM file {path}: its name is not a plain file name")]
    BadAmFileName { path: String },
    #[error(transparent)]
    Ship(#[from] ShipError),
}

/// An application whose AM is the caller's program; see the module doc.
#[derive(Debug, Clone, PartialEq)]
pub struct Submission {
    name: String,
    application_type: String,
    am_command: Option<String>,
    am_args: Vec<String>,
    am_file: Option<String>,
    env: Vec<(String, String)>,
    queue: Option<String>,
    priority: Option<i32>,
    am_resources: Resource,
    max_app_attempts: Option<i32>,
    lifetime: Option<Duration>,
    dependencies: Dependencies,
    image: Option<RuntimeRequest>,
    ship: Shipment,
}

impl Submission {
    /// An application called `name`, with the default AM resources and no AM yet.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            application_type: APPLICATION_TYPE.into(),
            am_command: None,
            am_args: Vec::new(),
            am_file: None,
            env: Vec::new(),
            queue: None,
            priority: None,
            am_resources: default_am_resources(),
            max_app_attempts: None,
            lifetime: None,
            dependencies: Dependencies::default(),
            image: None,
            ship: Shipment::new(None),
        }
    }

    /// The AM's command line, run by the NM's shell in the AM's working directory (where the
    /// shipped files are). Without it the AM is `./<am file's name>`.
    pub fn am_command(mut self, command: impl Into<String>) -> Self {
        self.am_command = Some(command.into());
        self
    }

    /// Arguments after the AM file's name (shell-quoted) when no `am_command` is given.
    pub fn am_args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.am_args = args.into_iter().map(Into::into).collect();
        self
    }

    /// The AM program: shipped like a `--files` entry (uploaded to the RM's blob store, or
    /// staged in the shared staging directory), executable in the AM's working directory
    /// under its file name.
    pub fn am_file(mut self, path: impl AsRef<Path>) -> Result<Self, SubmissionError> {
        let path = path.as_ref();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| crate::launch::is_plain_word(n))
            .ok_or_else(|| SubmissionError::BadAmFileName {
                path: path.display().to_string(),
            })?
            .to_string();
        self.ship.files.push((name.clone(), path.to_path_buf()));
        self.am_file = Some(name);
        Ok(self)
    }

    /// A file the AM (and, through it, its workers) finds in its working directory as
    /// `key`: YARN's local resource, shipped like `--files`.
    pub fn local_resource(mut self, key: impl Into<String>, path: impl Into<PathBuf>) -> Self {
        self.ship.files.push((key.into(), path.into()));
        self
    }

    /// An archive (`.tar`, `.tar.gz`, `.tgz`) unpacked into the directory `key`.
    pub fn archive(mut self, key: impl Into<String>, path: impl Into<PathBuf>) -> Self {
        self.ship.archives.push((key.into(), path.into()));
        self
    }

    /// A source directory packed and unpacked into the AM's working directory (`--src-dir`).
    pub fn src_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.ship.src_dir = Some(dir.into());
        self
    }

    /// Stage in this shared directory instead of uploading to the RM (`--staging-dir`).
    pub fn staging_root(mut self, root: Option<PathBuf>) -> Self {
        self.ship.staging_root = root;
        self
    }

    /// A variable of the AM's environment.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = Some(queue.into());
        self
    }

    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = Some(priority);
        self
    }

    /// YARN's application type (default [`APPLICATION_TYPE`]).
    pub fn application_type(mut self, t: impl Into<String>) -> Self {
        self.application_type = t.into();
        self
    }

    /// The AM container's resources.
    pub fn am_resources(mut self, r: Resource) -> Self {
        self.am_resources = r;
        self
    }

    pub fn max_app_attempts(mut self, n: i32) -> Self {
        self.max_app_attempts = Some(n);
        self
    }

    /// YARN's `LIFETIME`: the RM kills the application this long after its submission.
    pub fn lifetime(mut self, d: Duration) -> Self {
        self.lifetime = Some(d);
        self
    }

    /// What the RM waits for before it schedules the application.
    pub fn dependencies(mut self, d: Dependencies) -> Self {
        self.dependencies = d;
        self
    }

    /// Runs the AM in a container image (YARN's `YARN_CONTAINER_RUNTIME_*` variables in its
    /// launch environment).
    pub fn image(mut self, request: RuntimeRequest) -> Self {
        self.image = Some(request);
        self
    }

    /// What is shipped (for checks before submitting, [`Shipment::validate`]).
    pub fn shipment(&self) -> &Shipment {
        &self.ship
    }

    pub fn shipment_mut(&mut self) -> &mut Shipment {
        &mut self.ship
    }

    /// The AM's command line.
    pub fn command(&self) -> Result<String, SubmissionError> {
        match (&self.am_command, &self.am_file) {
            (Some(c), _) => Ok(c.clone()),
            (None, Some(f)) => {
                let mut words = vec![format!("./{f}")];
                words.extend(self.am_args.iter().map(|a| crate::launch::shell_word(a)));
                Ok(words.join(" "))
            }
            (None, None) => Err(SubmissionError::NoAm),
        }
    }

    /// What the shared launcher submits; `command` is [`Self::command`]'s.
    pub fn launch<'a>(&'a self, command: &'a str) -> AmLaunch<'a> {
        let mut am_env = self.env.clone();
        if let Some(r) = &self.image {
            am_env.extend(r.to_env());
        }
        AmLaunch {
            application_type: &self.application_type,
            am_resource_key: None,
            am_command: command,
            am_env,
            am_localizes_shipment: true,
            app_name: &self.name,
            queue: self.queue.as_deref(),
            priority: self.priority,
            master_resources: &self.am_resources,
            max_app_attempts: self.max_app_attempts,
            keep_containers: false,
            lifetime: self.lifetime,
            dependencies: &self.dependencies,
            app_node_label_expression: None,
            asks: Vec::new(),
            submitted_as: "application",
            submitted_detail: String::new(),
            ship: Some(&self.ship),
        }
    }

    /// Submits the application (its files shipped first) and returns its id; `out` hears
    /// what is done ("Submitted application ...").
    pub async fn submit(
        &self,
        rm: &RmClient,
        out: &mut (dyn FnMut(&str) + Send),
    ) -> Result<ApplicationId, SubmissionRunError> {
        let command = self.command()?;
        self.ship.validate().map_err(SubmissionError::from)?;
        Ok(launch::submit(rm, &self.launch(&command), Path::new(""), out).await?)
    }

    /// Submits and stays with the application as `spindle train` does: with `watch.detach`
    /// returns once it is accepted, else follows it to its end (waiting reasons, progress,
    /// the exit summary), killing it if `interrupt` completes first.
    pub async fn run<I: Future<Output = ()>>(
        &self,
        rm: &RmClient,
        watch: Watch,
        interrupt: I,
        out: &mut (dyn FnMut(&str) + Send),
    ) -> Result<ClientEnd, SubmissionRunError> {
        let command = self.command()?;
        self.ship.validate().map_err(SubmissionError::from)?;
        let launch = self.launch(&command);
        Ok(launch::run_client_watched(rm, &launch, Path::new(""), watch, interrupt, out).await?)
    }
}

/// Why submitting or following failed.
#[derive(Debug, thiserror::Error)]
pub enum SubmissionRunError {
    #[error(transparent)]
    Submission(#[from] SubmissionError),
    #[error(transparent)]
    Client(#[from] DsClientError),
}

impl SubmissionRunError {
    /// Refused before the RM ran anything (a usage mistake, a refusal of the submission).
    pub fn is_client_refusal(&self) -> bool {
        match self {
            Self::Submission(_) => true,
            Self::Client(e) => e.is_client_refusal(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_am_file_is_shipped_and_run_from_the_working_directory() {
        let s = Submission::new("hp")
            .am_file("/tmp/build/hp-am")
            .expect("plain name")
            .am_args(["--trials", "4 x"])
            .env("K", "V")
            .queue("default");
        assert_eq!(s.command().unwrap(), "./hp-am --trials '4 x'");
        assert_eq!(
            s.shipment().files,
            vec![("hp-am".to_string(), PathBuf::from("/tmp/build/hp-am"))]
        );
        let cmd = s.command().unwrap();
        let l = s.launch(&cmd);
        assert_eq!(l.am_resource_key, None, "nothing of the client's binary");
        assert!(l.am_localizes_shipment);
        assert_eq!(l.am_env, vec![("K".to_string(), "V".to_string())]);
        assert_eq!(l.application_type, APPLICATION_TYPE);
    }

    #[test]
    fn a_command_wins_and_no_am_is_refused() {
        let s = Submission::new("x").am_command("python3 am.py");
        assert_eq!(s.command().unwrap(), "python3 am.py");
        assert!(matches!(
            Submission::new("x").command(),
            Err(SubmissionError::NoAm)
        ));
        assert!(matches!(
            Submission::new("x").am_file("/"),
            Err(SubmissionError::BadAmFileName { .. })
        ));
    }

    #[test]
    fn the_submission_localizes_the_am_file_for_the_am() {
        let dir = tempfile::tempdir().expect("tempdir");
        let am = dir.path().join("my-am");
        std::fs::write(&am, "#!/bin/sh\n").expect("am");
        let s = Submission::new("hp").am_file(&am).expect("name");
        let cmd = s.command().unwrap();
        let id: ApplicationId = "application_1_0003".parse().expect("id");
        let ctx = launch::build_submission(&s.launch(&cmd), &id, Path::new(""));
        let v = serde_json::to_value(&ctx).expect("json");
        assert_eq!(v["application-type"], APPLICATION_TYPE);
        assert_eq!(v["am-container-spec"]["commands"]["command"], "./my-am");
        // The AM file goes with the shipment (staged at submission), not as a file:// path.
        assert!(v["am-container-spec"]["local-resources"].is_null(), "{v}");
    }
}
