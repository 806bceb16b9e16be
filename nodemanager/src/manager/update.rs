//! Resizing a live container, YARN's `ContainerManagementProtocol.updateContainer`
//! (`POST /ws/v1/node/containers/update`): the AM hands over the RM's new container token,
//! and the container's memory and CPU limits follow it without a restart.
//!
//! Each token is checked as a start's is (signature, expiry, this node), then against the
//! container by the table ([`ContainerTable::begin_update`]: live, not re-initializing, a
//! newer version than the container's, the same devices). Then:
//! - a container still localizing has no process: its launch spec takes the new limits and
//!   the table records the update at once;
//! - a held or running one is marked as updating, and the executor applies the limits
//!   ([`crate::launcher::ContainerExecutor::update_limits`]: cgroups, the RSS watcher) in a
//!   blocking task, since a shrink may make the kernel reclaim memory; the task reports back
//!   with [`Command::UpdatesApplied`], and only then does the table take the new resource and
//!   version ([`ContainerTable::finish_update`]), which the recovery store and the heartbeats
//!   carry from there on.
//!
//! A failure to apply leaves the container at its old version (the same token may be offered
//! again); the answer lists each container under `successfullyUpdatedContainers` or
//! `failedRequests`, as a start's does.
//!
//! [`ContainerTable::begin_update`]: crate::containers::ContainerTable::begin_update
//! [`ContainerTable::finish_update`]: crate::containers::ContainerTable::finish_update

use std::sync::Arc;

use spindle_common::ids::ContainerId;
use spindle_common::records::node::{ContainerUpdateResponse, FailedContainerRequest};
use spindle_common::token::ContainerTokenIdentifier;
use tracing::{info, warn, Instrument};

use super::start::fail;
use super::{span, Command, Manager, Reply};
use crate::isolation::IsolationSpec;

/// One accepted update whose limits the executor applies.
struct LimitChange {
    ident: ContainerTokenIdentifier,
    old: IsolationSpec,
    new: IsolationSpec,
}

/// What became of an accepted update token.
enum Admitted {
    /// Recorded already (a container still localizing).
    Recorded(ContainerId),
    /// Its limits must be applied to the container's process first.
    Apply(Box<LimitChange>),
}

impl Manager {
    pub(super) fn update(
        &mut self,
        tokens: Vec<String>,
        reply: Reply<ContainerUpdateResponse>,
        now: u64,
    ) {
        let mut resp = ContainerUpdateResponse::default();
        let mut changes = Vec::new();
        for token in tokens {
            match self.admit_update(&token, now) {
                Ok(Admitted::Recorded(id)) => {
                    resp.successfully_updated_containers.push(id);
                    self.persist();
                }
                Ok(Admitted::Apply(change)) => changes.push(*change),
                Err(f) => {
                    warn!(container_id = %f.container_id, exception = %f.exception, message = %f.message, "container update refused");
                    resp.failed_requests.push(f);
                }
            }
        }
        if changes.is_empty() {
            let _ = reply.send(resp);
            return;
        }
        let executor = Arc::clone(&self.executor);
        let tx = self.tx.clone();
        let idents: Vec<ContainerTokenIdentifier> =
            changes.iter().map(|c| c.ident.clone()).collect();
        tokio::spawn(
            async move {
                let applied = tokio::task::spawn_blocking(move || {
                    changes
                        .into_iter()
                        .map(|c| {
                            let r = executor
                                .update_limits(&c.ident.container_id, &c.old, &c.new)
                                .map_err(|e| e.to_string());
                            (c.ident, r)
                        })
                        .collect::<Vec<_>>()
                })
                .await;
                let results = match applied {
                    Ok(r) => r,
                    Err(e) => idents
                        .into_iter()
                        .map(|i| (i, Err(format!("the update task failed: {e}"))))
                        .collect(),
                };
                let _ = tx
                    .send(Command::UpdatesApplied {
                        results,
                        response: resp,
                        reply,
                    })
                    .await;
            }
            .in_current_span(),
        );
    }

    /// Checks one token and records it, or says what the executor must apply.
    fn admit_update(&mut self, token: &str, now: u64) -> Result<Admitted, FailedContainerRequest> {
        let ident = self.verified_token(token, now)?;
        let id = ident.container_id;
        let label = id.to_string();
        let plan = self
            .table
            .begin_update(&ident)
            .map_err(|r| fail(&label, r.exception(), r.to_string()))?;
        let _g = span(&id).entered();
        let policy = &self.ctx.isolation;
        let old = IsolationSpec::for_resource(&plan.old).with_node_policy(policy);
        let new = IsolationSpec::for_resource(&plan.new).with_node_policy(policy);
        info!(
            version = ident.version,
            from_mb = old.memory_mb,
            to_mb = new.memory_mb,
            from_vcores = old.vcores,
            to_vcores = new.vcores,
            "updating container resources"
        );
        if !plan.has_process {
            // Still localizing: the process will start with the new limits.
            if let Some(spec) = self.pending.get_mut(&id) {
                spec.isolation.memory_mb = new.memory_mb;
                spec.isolation.vcores = new.vcores;
            }
            self.table.finish_update(&ident, true);
            return Ok(Admitted::Recorded(id));
        }
        Ok(Admitted::Apply(Box::new(LimitChange { ident, old, new })))
    }

    /// The executor applied (or failed to apply) a call's limit changes: record and answer.
    pub(super) fn updates_applied(
        &mut self,
        results: Vec<(ContainerTokenIdentifier, Result<(), String>)>,
        mut response: ContainerUpdateResponse,
        reply: Reply<ContainerUpdateResponse>,
    ) {
        for (ident, result) in results {
            let id = ident.container_id;
            let _g = span(&id).entered();
            let live = self.table.finish_update(&ident, result.is_ok());
            let failure = match (result, live) {
                (Ok(()), true) => {
                    info!(version = ident.version, "container resources updated");
                    response.successfully_updated_containers.push(id);
                    self.persist();
                    continue;
                }
                (Ok(()), false) => format!("Container {id} ended while its update was applied"),
                (Err(e), _) => format!("Cannot apply the new limits of container {id}: {e}"),
            };
            warn!(message = %failure, "container update failed");
            response.failed_requests.push(FailedContainerRequest {
                container_id: id.to_string(),
                exception: "YarnException".into(),
                message: failure,
            });
        }
        let _ = reply.send(response);
    }
}
