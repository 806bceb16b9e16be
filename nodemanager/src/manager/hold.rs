//! Held starts (gang launches): a start call with `hold` sets its containers up to just
//! before their `exec`, answers once all are held (or failed), and lets them run when
//! `POST /ws/v1/node/containers/release` names them; what is not released in time is stopped.
//!
//! It owns the hold groups' book-keeping and the gates; it must not start or stop a process
//! itself (it asks [`Manager::stop`](super::Manager) and the gates), and a release must open
//! every named gate before any other work, so that a gang's members exec together.

use std::collections::HashSet;
use std::time::Duration;

use spindle_common::ids::ContainerId;
use spindle_common::records::node::{
    FailedContainerRequest, LaunchHold, ReleaseContainersResponse, StartContainerRequest,
    StartContainersResponse,
};
use tracing::{info, warn};

use super::{Command, Manager, Reply};
use crate::containers::StopReason;

/// One held start call (a gang's members on this node).
pub(super) struct HoldGroup {
    /// Not yet released, stopped or complete.
    members: Vec<ContainerId>,
    /// Still being localized and set up; the call is answered when none is left.
    waiting: HashSet<ContainerId>,
    /// The answer being built (containers that fail to set up move to `failedRequests`).
    resp: StartContainersResponse,
    reply: Option<Reply<StartContainersResponse>>,
}

impl Manager {
    /// Admits a held start; the reply waits until every container is held or has failed.
    pub(super) fn start_held(
        &mut self,
        requests: Vec<StartContainerRequest>,
        hold: LaunchHold,
        reply: Reply<StartContainersResponse>,
        now: u64,
    ) {
        let resp = self.start(requests, now);
        if resp.successfully_started_containers.is_empty() {
            // Nothing to hold: every request was refused.
            let _ = reply.send(resp);
            return;
        }
        let group = self.next_hold;
        self.next_hold += 1;
        let waiting: HashSet<ContainerId> = resp
            .successfully_started_containers
            .iter()
            .copied()
            .collect();
        for id in &waiting {
            self.held_in.insert(*id, group);
        }
        let timeout = hold
            .timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(self.ctx.launch_hold_timeout);
        info!(
            group,
            app_id = %group_app(waiting.iter()),
            containers = waiting.len(),
            timeout_ms = timeout.as_millis() as u64,
            "held start accepted"
        );
        self.holds.insert(
            group,
            HoldGroup {
                members: waiting.iter().copied().collect(),
                waiting,
                resp,
                reply: Some(reply),
            },
        );
        self.maybe_answer_hold(group);
        let tx = self.tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(timeout).await;
            let _ = tx.send(Command::HoldExpired { group }).await;
        });
    }

    /// A container of a held start is set up (held), or failed (`Some(why)`): the start call
    /// is answered once none is left setting up.
    pub(super) fn hold_settled(&mut self, id: ContainerId, failed: Option<String>) {
        let Some(&group) = self.held_in.get(&id) else {
            return;
        };
        if let Some(g) = self.holds.get_mut(&group) {
            if !g.waiting.remove(&id) {
                return;
            }
            if let Some(message) = failed {
                g.resp.successfully_started_containers.retain(|c| *c != id);
                g.resp.failed_requests.push(FailedContainerRequest {
                    container_id: id.to_string(),
                    exception: "YarnException".into(),
                    message,
                });
            }
        }
        self.maybe_answer_hold(group);
    }

    pub(super) fn maybe_answer_hold(&mut self, group: u64) {
        if let Some(g) = self.holds.get_mut(&group) {
            if g.waiting.is_empty() {
                if let Some(reply) = g.reply.take() {
                    info!(
                        group,
                        held = g.resp.successfully_started_containers.len(),
                        failed = g.resp.failed_requests.len(),
                        "held start answered"
                    );
                    let _ = reply.send(std::mem::take(&mut g.resp));
                }
            }
        }
    }

    /// Opens the gates of the named held containers, all before any book-keeping, so that
    /// they exec as close together as this node can make it.
    pub(super) fn release(&mut self, ids: Vec<ContainerId>) -> ReleaseContainersResponse {
        let mut resp = ReleaseContainersResponse::default();
        let mut opened = Vec::with_capacity(ids.len());
        for id in ids {
            match self.gates.remove(&id) {
                Some(gate) => match gate.open() {
                    Ok(()) => opened.push(id),
                    Err(e) => resp.failed_requests.push(FailedContainerRequest {
                        container_id: id.to_string(),
                        exception: "YarnException".into(),
                        message: format!("cannot release container {id}: {e}"),
                    }),
                },
                None => {
                    let message = match self.table.get(&id) {
                        Some(c) => format!("container {id} is not held (state {})", c.state()),
                        None => format!("Container {id} is not handled by this NodeManager"),
                    };
                    resp.failed_requests.push(FailedContainerRequest {
                        container_id: id.to_string(),
                        exception: "YarnException".into(),
                        message,
                    });
                }
            }
        }
        for id in &opened {
            if self.table.released(id) {
                let accepted = self.table.get(id).map_or(0, |c| c.start_time_ms);
                self.metrics
                    .record_launch(accepted, spindle_common::time::now_ms());
            }
            self.forget_hold(id);
        }
        // Nothing to store or tell the RM: the store keeps no state for a live container and
        // the RM already sees it RUNNING. Not waking the heartbeat or writing the store here
        // leaves this node's CPUs to the processes now starting.
        if !opened.is_empty() {
            info!(containers = opened.len(), "held containers released");
        }
        resp.successfully_released_containers = opened;
        resp
    }

    /// A held start's time is up: what was not released is stopped, and a call still waiting
    /// for its containers to be set up is answered with what there is.
    pub(super) fn hold_expired(&mut self, group: u64, now: u64) {
        let Some(mut g) = self.holds.remove(&group) else {
            return;
        };
        let mut stopped = 0;
        for id in &g.members {
            self.held_in.remove(id);
            let held = self.gates.remove(id).is_some();
            let localizing = g.waiting.contains(id);
            if held || localizing {
                stopped += 1;
                let _ = self.stop(*id, StopReason::HoldExpired, now);
            }
        }
        if stopped > 0 {
            warn!(
                group,
                app_id = %group_app(g.members.iter()),
                stopped,
                "held start was not released in time; its containers are stopped"
            );
        }
        if let Some(reply) = g.reply.take() {
            for id in g.waiting.drain() {
                g.resp.successfully_started_containers.retain(|c| *c != id);
                g.resp.failed_requests.push(FailedContainerRequest {
                    container_id: id.to_string(),
                    exception: "YarnException".into(),
                    message: "still being set up when the hold timed out; stopped".into(),
                });
            }
            let _ = reply.send(g.resp);
        }
    }

    /// The container is no longer held (released, stopped or complete).
    pub(super) fn forget_hold(&mut self, id: &ContainerId) {
        self.gates.remove(id);
        if let Some(group) = self.held_in.remove(id) {
            if let Some(g) = self.holds.get_mut(&group) {
                g.members.retain(|m| m != id);
                if g.members.is_empty() && g.reply.is_none() {
                    self.holds.remove(&group);
                }
            }
        }
    }
}

/// The application a held start's containers belong to (a gang is one application's), for
/// the log lines about the whole group; empty for an empty group.
fn group_app<'a>(mut ids: impl Iterator<Item = &'a ContainerId>) -> String {
    ids.next()
        .map(|c| c.application_id().to_string())
        .unwrap_or_default()
}
