//! Starting containers: checking each start request (the container token, the node, the
//! user, the environment, local resource names, devices), building its launch spec, and, once
//! it is localized, starting its process (or holding it, for a gang launch).
//!
//! Slow work (localization) runs in its own task and reports back with
//! [`Command::Localized`]; this code must not wait for it, and must not answer a start call
//! with success for a request it could already tell would fail.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use spindle_common::env;
use spindle_common::ids::ContainerId;
use spindle_common::records::node::{
    ContainerLaunchContext, FailedContainerRequest, StartContainerRequest, StartContainersResponse,
    NODE_FULL_EXCEPTION,
};
use spindle_common::token::{verify_container_token, ContainerTokenIdentifier};
use tracing::{debug, info, warn, Instrument};

use super::handle::LaunchFailure;
use super::{span, Command, Manager};
use crate::containers::Container;
use crate::launcher::{expand_placeholders, LaunchSpec};

impl Manager {
    pub(super) fn start(
        &mut self,
        requests: Vec<StartContainerRequest>,
        now: u64,
    ) -> StartContainersResponse {
        let mut resp = StartContainersResponse::default();
        for req in requests {
            match self.admit(req, now) {
                Ok(id) => resp.successfully_started_containers.push(id),
                Err(f) => {
                    warn!(container_id = %f.container_id, exception = %f.exception, message = %f.message, "start refused");
                    resp.failed_requests.push(f);
                }
            }
        }
        if !resp.successfully_started_containers.is_empty() {
            self.persist();
            self.wake.notify_one();
        }
        resp
    }

    /// The gate every call carrying a container token passes (start, update): the NM is
    /// up and registered, the token is the RM's, unexpired, and for this node.
    pub(super) fn verified_token(
        &mut self,
        token: &str,
        now: u64,
    ) -> Result<ContainerTokenIdentifier, FailedContainerRequest> {
        let label = token_label(token);
        if self.closing {
            return Err(fail(
                &label,
                "YarnException",
                "the NodeManager is shutting down".into(),
            ));
        }
        if self.keys.current().is_none() {
            return Err(fail(
                &label,
                "NMNotYetReadyException",
                "the NodeManager has not registered with the ResourceManager yet".into(),
            ));
        }
        let ident = verify_container_token(&self.keys, token, now).map_err(|e| {
            fail(
                &label,
                "InvalidToken",
                format!("container token refused: {e}"),
            )
        })?;
        if ident.node_id != self.ctx.node_id {
            return Err(fail(
                &ident.container_id.to_string(),
                "InvalidToken",
                format!(
                    "container token is for node {}, but this is node {}",
                    ident.node_id, self.ctx.node_id
                ),
            ));
        }
        self.remember_token(token, &ident);
        Ok(ident)
    }

    /// Checks one start request and, if it is good, begins localizing it.
    pub(super) fn admit(
        &mut self,
        req: StartContainerRequest,
        now: u64,
    ) -> Result<ContainerId, FailedContainerRequest> {
        let ident = self.verified_token(&req.container_token, now)?;
        let id = ident.container_id;
        let label = id.to_string();
        if let Some(c) = self.table.get(&id) {
            return Err(fail(
                &label,
                "InvalidToken",
                format!(
                    "container {id} is already known to this NodeManager (state {})",
                    c.state()
                ),
            ));
        }
        if !valid_user(&ident.app_submitter) {
            return Err(fail(
                &label,
                "YarnException",
                format!(
                    "invalid user name '{}' in the container token",
                    ident.app_submitter
                ),
            ));
        }
        let run_as = self
            .ctx
            .run_as
            .credentials_for(&ident.app_submitter)
            .map_err(|e| fail(&label, "YarnException", e))?;
        let ctx = &req.container_launch_context;
        if let Some(bad) = ctx.environment.iter().find(|(k, v)| !valid_env(k, v)) {
            return Err(fail(
                &label,
                "YarnException",
                format!(
                    "invalid environment variable '{}' in the launch context",
                    bad.0
                ),
            ));
        }
        // Refused now rather than failing at localization after the start call said yes.
        if let Some(e) = ctx
            .local_resources
            .keys()
            .find_map(|k| crate::launcher::resource_target(Path::new("."), k).err())
        {
            return Err(fail(&label, "YarnException", e));
        }
        let grant = self
            .plugins
            .assign(id, &ident.resource.to_resource())
            .map_err(|e| fail(&label, "YarnException", e.to_string()))?;
        // After the devices (a device plugin names its shortage more exactly).
        if let Err(full) = self.fits(&ident) {
            self.plugins.release(id);
            return Err(fail(&label, NODE_FULL_EXCEPTION, full.to_string()));
        }
        let mut spec = self.launch_spec(&ident, ctx, grant.env);
        spec.run_as = run_as;
        // Every device node a plugin manages that this container was not granted is denied
        // (also when it asked for none, so a CPU-only container cannot open a GPU).
        spec.isolation.denied_devices = self
            .plugins
            .managed_devices()
            .into_iter()
            .filter(|d| !grant.devices.contains(d))
            .collect();
        spec.isolation.granted_devices = grant.devices;
        let container = Container::new(ident, spec.work_dir.clone(), spec.log_dirs.clone(), now);
        if self.table.insert(container).is_err() {
            self.plugins.release(id);
            return Err(fail(
                &label,
                "InvalidToken",
                format!("container {id} is already known"),
            ));
        }
        let span = span(&id);
        span.in_scope(
            || info!(user = %spec.user, command = %spec.command, "container accepted; localizing"),
        );
        self.pending.insert(id, spec.clone());
        let executor = Arc::clone(&self.executor);
        let tx = self.tx.clone();
        tokio::spawn(
            async move {
                let result =
                    match tokio::task::spawn_blocking(move || executor.prepare(&spec)).await {
                        Ok(Ok(())) => Ok(()),
                        Ok(Err(e)) => Err(LaunchFailure {
                            localization: e.is_localization(),
                            exit_status: e.exit_status(),
                            diagnostics: e.to_string(),
                        }),
                        Err(e) => Err(LaunchFailure {
                            localization: true,
                            exit_status: None,
                            diagnostics: format!("localization task failed: {e}"),
                        }),
                    };
                let _ = tx.send(Command::Localized { id, result }).await;
            }
            .instrument(span),
        );
        Ok(id)
    }

    pub(super) fn launch_spec(
        &self,
        ident: &ContainerTokenIdentifier,
        ctx: &ContainerLaunchContext,
        plugin_env: BTreeMap<String, String>,
    ) -> LaunchSpec {
        let id = ident.container_id;
        let app = id.application_id().to_string();
        let user = ident.app_submitter.clone();
        let app_local_dirs: Vec<PathBuf> = self
            .ctx
            .local_dirs
            .iter()
            .map(|d| d.join("usercache").join(&user).join("appcache").join(&app))
            .collect();
        let first_local = app_local_dirs
            .first()
            .cloned()
            .unwrap_or_else(|| std::env::temp_dir().join(&app));
        let work_dir = first_local.join(id.to_string());
        let log_dirs: Vec<PathBuf> = self
            .ctx
            .log_dirs
            .iter()
            .map(|d| d.join(&app).join(id.to_string()))
            .collect();
        let first_log = log_dirs
            .first()
            .cloned()
            .unwrap_or_else(|| work_dir.clone());

        let mut envs = self.ctx.inherited_env.clone();
        for (k, v) in &ctx.environment {
            envs.insert(k.clone(), expand_placeholders(v, &first_log));
        }
        let home = Path::new("/home").join(&user);
        let home = if home.is_dir() {
            home
        } else {
            work_dir.clone()
        };
        envs.entry(env::HOME.into())
            .or_insert_with(|| home.to_string_lossy().into_owned());
        envs.entry(env::CONF_DIR.into())
            .or_insert_with(|| self.ctx.conf_dir.to_string_lossy().into_owned());
        envs.extend(plugin_env);
        let join = |dirs: &[PathBuf]| {
            dirs.iter()
                .map(|d| d.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(",")
        };
        let port = self.ctx.node_id.port.to_string();
        for (k, v) in [
            (env::CONTAINER_ID, id.to_string()),
            (env::NM_HOST, self.ctx.node_id.host.clone()),
            (env::NM_PORT, port.clone()),
            (env::NM_HTTP_PORT, port),
            (env::LOCAL_DIRS, join(&app_local_dirs)),
            (env::LOG_DIRS, join(&log_dirs)),
            (env::USER, user.clone()),
            (env::LOGNAME, user.clone()),
            (env::PWD, work_dir.to_string_lossy().into_owned()),
        ] {
            envs.insert(k.to_string(), v);
        }
        LaunchSpec {
            container_id: id,
            user,
            command: expand_placeholders(&ctx.commands.join(" "), &first_log),
            env: envs,
            work_dir,
            app_local_dirs,
            log_dirs,
            local_resources: ctx.local_resources.clone(),
            isolation: crate::isolation::IsolationSpec::for_resource(&ident.resource.to_resource())
                .with_node_policy(&self.ctx.isolation),
            run_as: None,
            fetch_token: self
                .keys
                .current()
                .map(|k| spindle_common::token::issue_container_token(k, ident)),
        }
    }

    pub(super) fn localized(
        &mut self,
        id: ContainerId,
        result: Result<(), LaunchFailure>,
        now: u64,
    ) {
        let _g = span(&id).entered();
        let Some(spec) = self.pending.remove(&id) else {
            return;
        };
        if let Err(f) = result {
            let diag = f.diagnostics;
            warn!(%diag, "localization failed");
            self.hold_settled(id, Some(diag.clone()));
            if let Some(o) = self
                .table
                .launch_failed(&id, f.localization, f.exit_status, diag, now)
            {
                self.completed(id, o, true);
            }
            return;
        }
        if !self.table.may_start(&id) {
            debug!("container was stopped while localizing; not starting it");
            let executor = Arc::clone(&self.executor);
            tokio::task::spawn_blocking(move || executor.discard(&id));
            self.hold_settled(
                id,
                Some("the container was stopped before it started".into()),
            );
            return;
        }
        let hold = self.held_in.contains_key(&id);
        match self.executor.start(&spec, hold) {
            Ok(p) => {
                match p.gate {
                    Some(gate) => {
                        info!(process = %p.handle, "container process set up; held for its gang launch");
                        self.table.held(&id, p.handle);
                        self.gates.insert(id, gate);
                    }
                    None => {
                        info!(process = %p.handle, "container process started");
                        self.table.started(&id, p.handle);
                        let accepted = self.table.get(&id).map_or(0, |c| c.start_time_ms);
                        self.metrics
                            .record_launch(accepted, spindle_common::time::now_ms());
                    }
                }
                self.persist();
                self.spawn_reaper(id, p.exit, spec.stderr_path());
                self.hold_settled(id, None);
            }
            Err(e) => {
                warn!(error = %e, "container failed to start");
                self.hold_settled(id, Some(e.to_string()));
                if let Some(o) = self.table.launch_failed(
                    &id,
                    e.is_localization(),
                    e.exit_status(),
                    e.to_string(),
                    now,
                ) {
                    self.completed(id, o, true);
                }
            }
        }
    }
}

/// The container id a token claims, read without verifying it: only to label a refusal.
pub(super) fn token_label(token: &str) -> String {
    token
        .split_once('.')
        .and_then(|(body, _)| URL_SAFE_NO_PAD.decode(body.trim()).ok())
        .and_then(|p| serde_json::from_slice::<serde_json::Value>(&p).ok())
        .and_then(|v| v.get("containerId")?.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// A user name that is safe as a path component.
pub(super) fn valid_user(u: &str) -> bool {
    !u.is_empty()
        && u.len() <= 256
        && u != "."
        && u != ".."
        && !u.starts_with('-')
        && u.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@'))
}

pub(super) fn valid_env(k: &str, v: &str) -> bool {
    !k.is_empty() && !k.contains('=') && !k.contains('\0') && !v.contains('\0')
}

/// A refused container request, as the NM's answer lists it.
impl Manager {
    /// Whether the container fits beside the live ones (those being killed aside).
    fn fits(&self, ident: &ContainerTokenIdentifier) -> Result<(), Box<NodeFull>> {
        let asked = ident.resource.to_resource();
        let committed = self.table.committed();
        if committed.plus(&asked).fits_in(&self.ctx.capacity) {
            return Ok(());
        }
        Err(Box::new(NodeFull {
            container: ident.container_id,
            asked,
            committed,
            capacity: self.ctx.capacity.clone(),
        }))
    }
}

/// A start refused because the container does not fit beside the ones this node runs: the
/// NM never runs more than its capacity, whatever an RM (or a deposed one's AM) allocated.
#[derive(Debug, thiserror::Error)]
#[error("container {container} ({asked}) does not fit on this node: its containers hold {committed} of {capacity} (those being killed aside)")]
pub(super) struct NodeFull {
    container: ContainerId,
    asked: spindle_common::Resource,
    committed: spindle_common::Resource,
    capacity: spindle_common::Resource,
}

pub(super) fn fail(label: &str, exception: &str, message: String) -> FailedContainerRequest {
    FailedContainerRequest {
        container_id: label.to_string(),
        exception: exception.to_string(),
        message,
    }
}
