//! Submitting an application and following it to the end: one launcher for the distributed
//! shell, `spindle train`, `spindle sweep` (whose AM is this binary) and `spindle submit` (a
//! user's AM, [`crate::submission::Submission`]), which differ only in what [`AmLaunch`]
//! holds.

use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant, UNIX_EPOCH};

use spindle_common::ids::ApplicationId;
use spindle_common::records::cluster::{
    AmContainerSpec, ApplicationSubmissionContext, CapacitySchedulerQueueInfo, CommandsInfo,
    KeyValue, KeyValues, LocalResourceEntry, LocalResourceInfo, LocalResourcesInfo,
    SubmissionDependencies, SubmissionDependency, SubmissionTimeout, SubmissionTimeouts,
};
use spindle_common::records::resource::ResourceInfo;
use spindle_common::resource::Resource;

use spindle_common::states::YarnApplicationState;

use crate::dshell::client::{follow_application, DsClientError, DsOutcome, POLL_INTERVAL};
use crate::follow::{self, AppKind, FollowEnd, FollowOptions};
use crate::rm_client::RmClient;

/// One application whose AM is run as `am_command` with its parameters in `am_env`: this
/// binary (the `exe` the launcher is given), shipped as local resource `am_resource_key`, or,
/// without one, a program the AM's node has or one shipped with `ship`.
#[derive(Debug, Clone, PartialEq)]
pub struct AmLaunch<'a> {
    /// YARN's application type.
    pub application_type: &'a str,
    pub am_resource_key: Option<&'a str>,
    pub am_command: &'a str,
    pub am_env: Vec<(String, String)>,
    /// What `ship` stages is also the AM container's own local resources (in its working
    /// directory), not only handed to it for its workers.
    pub am_localizes_shipment: bool,
    pub app_name: &'a str,
    pub queue: Option<&'a str>,
    pub priority: Option<i32>,
    pub master_resources: &'a Resource,
    pub max_app_attempts: Option<i32>,
    /// YARN's keep-containers-across-application-attempts: a failed AM's containers keep
    /// running and are handed to the next attempt.
    pub keep_containers: bool,
    /// YARN's `LIFETIME`: the RM kills the application this long after its submission
    /// (whether the client stays or not), capped by its queue's maximum.
    pub lifetime: Option<Duration>,
    /// What the RM waits for before it schedules the application.
    pub dependencies: &'a Dependencies,
    /// The application's node label expression (YARN's `appNodeLabelExpression`): the
    /// partition its containers run in unless an ask names another. The AM keeps the
    /// default (`amContainerNodeLabelExpression` unset).
    pub app_node_label_expression: Option<&'a str>,
    /// The asks besides the AM's, by what they are called in the refusal, checked before
    /// the AM's against the cluster's maximum container.
    pub asks: Vec<(&'static str, &'a Resource)>,
    /// Names the application in the line after submission: "Submitted {this} {id}{detail}".
    pub submitted_as: &'static str,
    pub submitted_detail: String,
    /// The user's code to ship to the containers ([`crate::ship`]), staged once the
    /// application id is known.
    pub ship: Option<&'a crate::ship::Shipment>,
}

/// What an application waits for before it is scheduled (Slurm's `--dependency`): the RM
/// holds it ACCEPTED until every `after_any` application has ended and every `after_ok` one
/// has succeeded (and fails it when one of those does not).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dependencies {
    pub after_any: Vec<ApplicationId>,
    pub after_ok: Vec<ApplicationId>,
}

impl Dependencies {
    pub fn is_empty(&self) -> bool {
        self.after_any.is_empty() && self.after_ok.is_empty()
    }

    /// The submission body's `dependencies`, None when there are none.
    pub fn to_wire(&self) -> Option<SubmissionDependencies> {
        let entry = |kind: &'static str| {
            move |id: &ApplicationId| SubmissionDependency {
                application_id: id.to_string(),
                dependency_type: kind.to_string(),
            }
        };
        let all: Vec<_> = (self.after_any.iter().map(entry("afterany")))
            .chain(self.after_ok.iter().map(entry("afterok")))
            .collect();
        (!all.is_empty()).then(|| SubmissionDependencies {
            dependency: all.into(),
        })
    }
}

/// The submission body's `application-timeouts` for a lifetime (whole seconds, rounded up;
/// at least one).
pub fn lifetime_timeouts(lifetime: Option<Duration>) -> Option<SubmissionTimeouts> {
    lifetime.map(|l| SubmissionTimeouts {
        timeout: vec![SubmissionTimeout {
            timeout_type: "LIFETIME".into(),
            seconds: i64::try_from(l.as_millis().div_ceil(1000).max(1)).unwrap_or(i64::MAX),
        }]
        .into(),
    })
}

/// The `application-submission-context` whose AM is `exe`.
pub fn build_submission(
    launch: &AmLaunch<'_>,
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
    let env = launch
        .am_env
        .iter()
        .map(|(key, value)| KeyValue {
            key: key.clone(),
            value: value.clone(),
        })
        .collect::<Vec<_>>();
    let am_file = launch.am_resource_key.map(|key| LocalResourceEntry {
        key: key.into(),
        value: LocalResourceInfo {
            resource: format!("file://{}", exe.display()),
            kind: "FILE".into(),
            visibility: "APPLICATION".into(),
            size,
            timestamp,
        },
    });
    ApplicationSubmissionContext {
        application_id: app_id.to_string(),
        application_name: Some(launch.app_name.to_string()),
        queue: launch.queue.map(str::to_string),
        priority: launch.priority,
        am_container_spec: AmContainerSpec {
            local_resources: am_file.map(|e| LocalResourcesInfo {
                entry: vec![e].into(),
            }),
            environment: Some(KeyValues { entry: env.into() }),
            commands: Some(CommandsInfo {
                command: launch.am_command.into(),
            }),
            service_data: None,
            application_acls: None,
        },
        unmanaged_am: false,
        max_app_attempts: launch.max_app_attempts,
        resource: Some(ResourceInfo::plain(launch.master_resources)),
        application_type: Some(launch.application_type.into()),
        keep_containers_across_application_attempts: launch.keep_containers,
        application_tags: None,
        attempt_failures_validity_interval: None,
        app_node_label_expression: launch.app_node_label_expression.map(str::to_string),
        am_container_node_label_expression: None,
        application_timeouts: lifetime_timeouts(launch.lifetime),
        dependencies: launch.dependencies.to_wire(),
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

/// Submits the application and follows it to a final state.
pub async fn run_client(
    rm: &RmClient,
    launch: &AmLaunch<'_>,
    exe: &Path,
    out: &mut (dyn FnMut(&str) + Send),
) -> Result<DsOutcome, DsClientError> {
    let app_id = submit(rm, launch, exe, out).await?;
    let end = follow_application(rm, &app_id, POLL_INTERVAL, out).await;
    crate::ship::clean_after_end(launch.ship, &app_id);
    Ok(end?)
}

/// How the client stays with the application it submitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Watch {
    /// Stream rank 0's (the distributed shell's first container's) stdout and stderr.
    pub follow: bool,
    /// Return once the RM has accepted the application, leaving it running.
    pub detach: bool,
}

/// How [`run_client_watched`] ended.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEnd {
    /// The application reached a final state.
    Finished(DsOutcome),
    /// `--detach`: the application was accepted and is left running; `state` is what the RM
    /// said last.
    Detached {
        app_id: ApplicationId,
        state: YarnApplicationState,
    },
    /// The client was interrupted and asked the RM to kill the application; `state` is the
    /// final state the RM reported (None if it did not in time).
    Interrupted {
        app_id: ApplicationId,
        state: Option<YarnApplicationState>,
    },
}

/// How long a detaching client waits for the RM to accept the application.
pub const ACCEPT_WAIT: Duration = Duration::from_secs(10);

/// Submits the application, then: with `watch.detach`, returns once the RM has accepted it;
/// else follows it to a final state ([`crate::follow`]: waiting reasons, progress, with
/// `watch.follow` rank 0's output, the exit summary), killing it if `interrupt` completes
/// first (the CLI's Ctrl-C).
pub async fn run_client_watched<I: Future<Output = ()>>(
    rm: &RmClient,
    launch: &AmLaunch<'_>,
    exe: &Path,
    watch: Watch,
    interrupt: I,
    out: &mut (dyn FnMut(&str) + Send),
) -> Result<ClientEnd, DsClientError> {
    let app_id = submit(rm, launch, exe, out).await?;
    if watch.detach {
        let state = accepted_state(rm, &app_id).await?;
        return Ok(ClientEnd::Detached { app_id, state });
    }
    let opts = FollowOptions {
        kind: AppKind::of_type(launch.application_type),
        logs: if watch.follow {
            follow::Logs::First
        } else {
            follow::Logs::Off
        },
        tail: None,
    };
    let end = follow::follow(rm, &app_id, &opts, interrupt, out).await;
    // The staging directory goes with the application (crate::ship).
    crate::ship::clean_after_end(launch.ship, &app_id);
    Ok(match end? {
        FollowEnd::Finished(o) => ClientEnd::Finished(o),
        FollowEnd::Interrupted { app_id, state } => ClientEnd::Interrupted { app_id, state },
    })
}

/// The application's state once the RM has accepted it (ACCEPTED or later), or what it is
/// after [`ACCEPT_WAIT`].
async fn accepted_state(
    rm: &RmClient,
    app_id: &ApplicationId,
) -> Result<YarnApplicationState, DsClientError> {
    let start = Instant::now();
    loop {
        let s = rm.app_state(app_id).await?;
        let waiting = matches!(
            s,
            YarnApplicationState::NEW
                | YarnApplicationState::NEW_SAVING
                | YarnApplicationState::SUBMITTED
        );
        if !waiting || start.elapsed() >= ACCEPT_WAIT {
            return Ok(s);
        }
        tokio::time::sleep(follow::POLL_INTERVAL).await;
    }
}

/// What can be checked before asking for an application id, so that a refusal burns none:
/// the queue is a leaf of the RM's tree, the asks fit its maximum container. When the RM's
/// scheduler view cannot be read, the RM's own checks (after new-application) stand.
async fn precheck(rm: &RmClient, launch: &AmLaunch<'_>) -> Result<(), DsClientError> {
    let info = match rm.scheduler().await {
        Ok(i) => i,
        Err(e) => {
            tracing::debug!(error = %e, "no scheduler view for the pre-submission checks");
            return Ok(());
        }
    };
    let queues: Vec<&CapacitySchedulerQueueInfo> = info
        .queues
        .iter()
        .flat_map(|qs| qs.queue.0.iter())
        .flat_map(|q| q.walk())
        .collect();
    if let Some(asked) = launch.queue.map(str::trim) {
        known_leaf(asked, &queues, info.queues.is_some())?;
    }
    let max = info.maximum_allocation.to_resource();
    for (what, asked) in &launch.asks {
        check_fits(what, asked, &max)?;
    }
    check_fits("application master", launch.master_resources, &max)
}

/// `asked` names a leaf queue (by name or full path) among `queues`; queues that create
/// their children on demand accept any name below them. `have_tree`: the RM listed queues.
fn known_leaf(
    asked: &str,
    queues: &[&CapacitySchedulerQueueInfo],
    have_tree: bool,
) -> Result<(), DsClientError> {
    let auto_parent = queues
        .iter()
        .any(|q| q.leaf.is_none() && q.auto_create_child_queue_enabled);
    if !have_tree || auto_parent {
        return Ok(());
    }
    let leaves: Vec<&CapacitySchedulerQueueInfo> = queues
        .iter()
        .copied()
        .filter(|q| q.leaf.is_some())
        .collect();
    if leaves
        .iter()
        .any(|q| q.queue_name == asked || q.queue_path == asked)
    {
        return Ok(());
    }
    Err(DsClientError::UnknownQueue {
        queue: asked.to_string(),
        leaves: leaves.iter().map(|q| q.queue_path.clone()).collect(),
    })
}

/// Checks the asks against the cluster's maximum container, submits, and says so.
pub async fn submit(
    rm: &RmClient,
    launch: &AmLaunch<'_>,
    exe: &Path,
    out: &mut (dyn FnMut(&str) + Send),
) -> Result<ApplicationId, DsClientError> {
    precheck(rm, launch).await?;
    let new_app = rm.new_application().await?;
    let app_id = new_app.application_id;
    let max = new_app.maximum_resource_capability.to_resource();
    for (what, asked) in &launch.asks {
        check_fits(what, asked, &max)?;
    }
    check_fits("application master", launch.master_resources, &max)?;
    let mut ctx = build_submission(launch, &app_id, exe);
    // Shipping the user's code (crate::ship): staged for this id, removed if not submitted.
    let staged = crate::ship::stage_for_submission(launch.ship, &app_id, &mut ctx, rm, out).await?;
    if let Some(s) = staged.as_ref().filter(|_| launch.am_localizes_shipment) {
        let own = ctx
            .am_container_spec
            .local_resources
            .get_or_insert_with(Default::default);
        own.entry
            .0
            .extend(s.resources.iter().map(|(key, value)| LocalResourceEntry {
                key: key.clone(),
                value: value.clone(),
            }));
    }
    let submitted_at = spindle_common::time::now_ms();
    if let Err(e) = rm.submit(&ctx).await {
        crate::ship::unstage(staged.as_ref());
        return Err(e.into());
    }
    out(&format!(
        "Submitted {} {app_id}{} to ResourceManager at {}",
        launch.submitted_as,
        launch.submitted_detail,
        rm.address()
    ));
    if let Some(asked) = launch.lifetime {
        say_lifetime(rm, &app_id, asked, submitted_at, out).await;
    }
    for (ids, kind) in [
        (&launch.dependencies.after_any, "have ended (afterany)"),
        (&launch.dependencies.after_ok, "have succeeded (afterok)"),
    ] {
        if !ids.is_empty() {
            let names: Vec<String> = ids.iter().map(ToString::to_string).collect();
            out(&format!(
                "The ResourceManager holds it until {} {kind}",
                names.join(", ")
            ));
        }
    }
    Ok(app_id)
}

/// Says when the RM will kill the application, and whether its queue capped the lifetime.
async fn say_lifetime(
    rm: &RmClient,
    app_id: &ApplicationId,
    asked: Duration,
    submitted_at: u64,
    out: &mut (dyn FnMut(&str) + Send),
) {
    use spindle_common::time::{format_slurm_time, parse_iso8601};
    let asked_secs = asked.as_millis().div_ceil(1000).max(1) as u64;
    let timeouts = match rm.app_timeouts(app_id).await {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the application's lifetime");
            return;
        }
    };
    let Some(t) = timeouts.iter().find(|t| t.timeout_type == "LIFETIME") else {
        return;
    };
    let Ok(expiry) = parse_iso8601(&t.expiry_time) else {
        return;
    };
    // The RM counts from its receipt of the submission, a little after `submitted_at`.
    let granted = expiry.saturating_sub(submitted_at) / 1000;
    if granted < asked_secs {
        out(&format!(
            "Lifetime {} is above its queue's maximum-application-lifetime: the ResourceManager \
             capped it to {} and kills the application at {}",
            format_slurm_time(asked_secs),
            format_slurm_time(granted),
            t.expiry_time
        ));
    } else {
        out(&format!(
            "Lifetime {}: the ResourceManager kills the application at {} if it has not ended",
            format_slurm_time(asked_secs),
            t.expiry_time
        ));
    }
}

/// Whether `w` is a shell word that needs no quoting.
pub fn is_plain_word(w: &str) -> bool {
    !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@%+".contains(c))
}

/// A command-line word as a POSIX shell reads it back: quoted when it has to be.
pub fn shell_word(w: &str) -> String {
    if is_plain_word(w) {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversized_asks_are_refused_before_submission() {
        let max = Resource::new(1024, 2);
        assert!(check_fits("container", &Resource::new(1024, 2), &max).is_ok());
        assert!(check_fits("container", &Resource::new(2048, 1), &max).is_err());
        assert!(check_fits(
            "container",
            &Resource::new(1, 1).with("yarn.io/gpu", 1),
            &max
        )
        .is_ok());
        let gmax = Resource::new(1024, 2).with("yarn.io/gpu", 1);
        assert!(check_fits(
            "container",
            &Resource::new(1, 1).with("yarn.io/gpu", 2),
            &gmax
        )
        .is_err());
        assert!(check_fits("container", &Resource::new(9999, 9), &Resource::zero()).is_ok());
    }
}
