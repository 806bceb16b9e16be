//! YARN's container update API for single containers: an AM asks, in an allocate call, to
//! change a live container's resources. A decrease is applied at once; an increase as soon
//! as its node has the room and every queue on the path stays within its maximum (retried
//! at each of the AM's allocate calls until then). The container's version goes up by one
//! and the AM gets a new container token with the new size and version, which it hands to
//! the container's NM (`POST /ws/v1/node/containers/update`), which applies the limits. A
//! gang member is resized through an elastic gang instead, and device counts (GPUs,
//! FPGAs) never change in place.

use super::*;

/// YARN's `ContainerUpdateType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateKind {
    IncreaseResource,
    DecreaseResource,
    PromoteExecutionType,
    DemoteExecutionType,
}

/// One `UpdateContainerRequest`.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerUpdate {
    pub container: ContainerId,
    pub version: i32,
    pub kind: UpdateKind,
    pub capability: Resource,
}

/// A container at its new size and version.
#[derive(Debug, Clone, PartialEq)]
pub struct UpdatedView {
    pub kind: UpdateKind,
    pub allocation: Allocation,
    pub version: i32,
}

/// Why an update is refused (YARN's reason word first).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum UpdateRefusal {
    #[error("INVALID_CONTAINER_ID: no live container of this application with that id")]
    UnknownContainer,
    #[error("INCORRECT_CONTAINER_VERSION_ERROR: the container is at version {current}")]
    StaleVersion { current: i32 },
    #[error("UPDATE_OUTSTANDING_ERROR: an increase of this container is still pending")]
    Outstanding,
    #[error("INVALID_TARGET_CAPABILITY: {0}")]
    BadCapability(String),
    #[error("NOT_SUPPORTED: execution-type changes (Spindle runs GUARANTEED containers only)")]
    ExecutionType,
    #[error("NOT_SUPPORTED: gang {0}'s members are resized as an elastic gang")]
    GangMember(String),
    #[error("NOT_SUPPORTED: the AM container's size is fixed at submission")]
    AmContainer,
    #[error("NOT_SUPPORTED: device counts ({0}) cannot change in place")]
    Devices(String),
}

impl UpdateRefusal {
    /// YARN's reason word (what a YARN client compares).
    pub fn word(&self) -> &'static str {
        match self {
            Self::UnknownContainer => "INVALID_CONTAINER_ID",
            Self::StaleVersion { .. } => "INCORRECT_CONTAINER_VERSION_ERROR",
            Self::Outstanding => "UPDATE_OUTSTANDING_ERROR",
            Self::BadCapability(_) => "INVALID_TARGET_CAPABILITY",
            Self::ExecutionType | Self::GangMember(_) | Self::AmContainer | Self::Devices(_) => {
                "NOT_SUPPORTED"
            }
        }
    }
}

/// A refused update, as its AM hears of it.
#[derive(Debug, Clone, PartialEq)]
pub struct UpdateErrorView {
    pub refusal: UpdateRefusal,
    pub current_version: i32,
    pub request: ContainerUpdate,
}

impl RmCore {
    /// The updates of one allocate call, then the increases still pending.
    pub(super) fn container_updates(
        &mut self,
        attempt: &ApplicationAttemptId,
        updates: Vec<ContainerUpdate>,
        now: u64,
    ) {
        for u in updates {
            match self.check_update(attempt, &u) {
                Ok(target) => self.try_update(attempt, u, target, now),
                Err((refusal, current_version)) => {
                    if let Ok(att) = self.live_attempt_mut(attempt) {
                        att.update_errors.push(UpdateErrorView {
                            refusal,
                            current_version,
                            request: u,
                        });
                    }
                }
            }
        }
        let pending = self
            .live_attempt_mut(attempt)
            .map(|a| std::mem::take(&mut a.pending_increases))
            .unwrap_or_default();
        for (u, target) in pending {
            let live = self
                .containers
                .get(&u.container)
                .is_some_and(RmContainer::is_live);
            if live {
                self.try_update(attempt, u, target, now);
            }
        }
    }

    /// The normalized target size, or the refusal and the container's current version.
    fn check_update(
        &self,
        attempt: &ApplicationAttemptId,
        u: &ContainerUpdate,
    ) -> Result<Resource, (UpdateRefusal, i32)> {
        let c = self
            .containers
            .get(&u.container)
            .filter(|c| c.is_live() && c.id.application_id() == attempt.application_id)
            .ok_or((UpdateRefusal::UnknownContainer, -1))?;
        let v = c.version;
        if matches!(
            u.kind,
            UpdateKind::PromoteExecutionType | UpdateKind::DemoteExecutionType
        ) {
            return Err((UpdateRefusal::ExecutionType, v));
        }
        if c.is_am {
            return Err((UpdateRefusal::AmContainer, v));
        }
        if let Some(g) = &c.gang {
            return Err((UpdateRefusal::GangMember(g.clone()), v));
        }
        if u.version != v {
            return Err((UpdateRefusal::StaleVersion { current: v }, v));
        }
        let pending = self
            .apps
            .get(&attempt.application_id)
            .and_then(|a| a.attempt(attempt))
            .is_some_and(|a| {
                a.pending_increases
                    .iter()
                    .any(|(p, _)| p.container == u.container)
            });
        if pending {
            return Err((UpdateRefusal::Outstanding, v));
        }
        let leaf = self.sched.app(&attempt.application_id).map(|a| a.queue);
        let target = self
            .normalize_in(&u.capability, leaf)
            .map_err(|e| (UpdateRefusal::BadCapability(e.to_string()), v))?;
        let mut devices: Vec<&str> = c
            .resource
            .extended()
            .chain(target.extended())
            .map(|(t, _)| t)
            .filter(|t| c.resource.get(t) != target.get(t))
            .collect();
        devices.dedup();
        if !devices.is_empty() {
            return Err((UpdateRefusal::Devices(devices.join(", ")), v));
        }
        let (bigger, smaller) = (c.resource.fits_in(&target), target.fits_in(&c.resource));
        match u.kind {
            UpdateKind::IncreaseResource if !bigger => Err((
                UpdateRefusal::BadCapability(format!(
                    "an increase to {target} is smaller than the container's {} in some resource",
                    c.resource
                )),
                v,
            )),
            UpdateKind::DecreaseResource if !smaller => Err((
                UpdateRefusal::BadCapability(format!(
                    "a decrease to {target} is larger than the container's {} in some resource",
                    c.resource
                )),
                v,
            )),
            _ => Ok(target),
        }
    }

    /// Applies an update if there is room (a decrease always has); an increase without
    /// room now waits for the AM's next call.
    fn try_update(
        &mut self,
        attempt: &ApplicationAttemptId,
        u: ContainerUpdate,
        target: Resource,
        now: u64,
    ) {
        let Some(c) = self.containers.get(&u.container).cloned() else {
            return;
        };
        if u.kind == UpdateKind::IncreaseResource {
            let delta = target.minus(&c.resource).clamp_non_negative();
            if !self.increase_fits(&attempt.application_id, &c.node, &delta) {
                if let Ok(att) = self.live_attempt_mut(attempt) {
                    att.pending_increases.push((u, target));
                }
                return;
            }
        }
        self.resize_container(attempt, &u.container, u.kind, target, now);
    }

    /// Whether `delta` more fits on `node` (not draining) and in every queue on `app`'s path
    /// up to the root: what an increase (the AM's or the CPU policy's) needs.
    pub(super) fn increase_fits(
        &self,
        app: &ApplicationId,
        node: &NodeId,
        delta: &Resource,
    ) -> bool {
        let room = self
            .sched
            .nodes()
            .slot(node)
            .and_then(|s| self.sched.nodes().get(s))
            .is_some_and(|n| !n.draining && delta.fits_in(&n.free));
        room && self.sched.app(app).is_some_and(|a| {
            let tree = self.sched.tree();
            tree.path_up(a.queue).all(|q| {
                let queue = &tree.queues[q];
                queue.used.plus(delta).fits_in(&queue.maximum)
            })
        })
    }

    /// Applies a checked resize: the container's node, application and queues are charged
    /// the new size, its version goes up by one, and its AM's next allocate answer carries
    /// it (with a new token) in `updatedContainers`.
    pub(super) fn resize_container(
        &mut self,
        attempt: &ApplicationAttemptId,
        cid: &ContainerId,
        kind: UpdateKind,
        target: Resource,
        now: u64,
    ) {
        let Some(c) = self.containers.get(cid).cloned() else {
            return;
        };
        let app = attempt.application_id;
        self.sched.set_now(now);
        self.sched.recharge(&app, &c.node, &c.resource, &target);
        if let Some(rc) = self.containers.get_mut(cid) {
            rc.resource = target;
            rc.version += 1;
            // The new token is good for as long from now as an allocation's.
            rc.token_from = now;
        }
        let Some(allocation) = self.container_record(cid) else {
            return;
        };
        let version = c.version + 1;
        if let Ok(att) = self.live_attempt_mut(attempt) {
            att.updated.push(UpdatedView {
                kind,
                allocation,
                version,
            });
        }
        self.changed();
    }
}
