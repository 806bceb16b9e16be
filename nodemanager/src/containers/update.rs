//! Resizing a live container from a newer token (YARN's `updateContainer`).

use std::collections::BTreeSet;

use spindle_common::ids::ContainerId;
use spindle_common::resource::Resource;
use spindle_common::states::NmContainerState;
use spindle_common::token::ContainerTokenIdentifier;

use super::{ContainerTable, Phase};

/// Why a resource update (YARN's `updateContainer`, `POST /containers/update`) is refused,
/// with nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpdateRefusal {
    #[error("Container {0} is not handled by this NodeManager")]
    Unknown(ContainerId),
    #[error("Container {id} is {state}; only a live container (localizing, held or running) can be updated")]
    NotLive {
        id: ContainerId,
        state: NmContainerState,
    },
    #[error("Container {0} is being re-initialized; update it once its new process runs")]
    Reinitializing(ContainerId),
    #[error("Container {0} has another resource update being applied; retry once it is answered")]
    Busy(ContainerId),
    #[error("Container {id} is at version {current}; an update to version {offered} is stale or replayed")]
    Stale {
        id: ContainerId,
        current: i32,
        offered: i32,
    },
    #[error("Container {id}: {name} would change from {from} to {to}; device counts cannot change in place; use an elastic gang")]
    DeviceChange {
        id: ContainerId,
        name: String,
        from: i64,
        to: i64,
    },
    #[error("Container {id}: the new resource <memory:{memory_mb}, vCores:{vcores}> is not a container size")]
    Invalid {
        id: ContainerId,
        memory_mb: i64,
        vcores: i64,
    },
}

impl UpdateRefusal {
    /// The exception name of the `failedRequests` entry (YARN's words).
    pub fn exception(&self) -> &'static str {
        match self {
            Self::Stale { .. } => "InvalidToken",
            Self::Unknown(_) => "InvalidContainerException",
            _ => "YarnException",
        }
    }
}

/// An accepted update: what the container's limits go from and to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdatePlan {
    pub old: Resource,
    pub new: Resource,
    /// True if the container has a process (held or running) whose isolation must change;
    /// false while it is localizing (only its launch spec changes).
    pub has_process: bool,
}

impl ContainerTable {
    /// Checks a verified update token against the container (YARN's `updateContainer`):
    /// the container must be live and not re-initializing, have no other update in flight,
    /// and be at an older version than the token's; memory and vcores may change, extended
    /// resources (devices) may not. Accepted, a container with a process is marked as
    /// updating until [`ContainerTable::finish_update`]; nothing changes on a refusal.
    pub fn begin_update(
        &mut self,
        ident: &ContainerTokenIdentifier,
    ) -> Result<UpdatePlan, UpdateRefusal> {
        let id = ident.container_id;
        let Some(c) = self.get_mut(&id) else {
            return Err(UpdateRefusal::Unknown(id));
        };
        let has_process = match &c.phase {
            Phase::Localizing => false,
            Phase::Held(_) | Phase::Running(_) => true,
            Phase::Reinitializing(_) => return Err(UpdateRefusal::Reinitializing(id)),
            Phase::Killing { .. } | Phase::Complete(_) => {
                return Err(UpdateRefusal::NotLive {
                    id,
                    state: c.state(),
                })
            }
        };
        if c.updating().is_some() {
            return Err(UpdateRefusal::Busy(id));
        }
        if ident.version <= c.token.version {
            return Err(UpdateRefusal::Stale {
                id,
                current: c.token.version,
                offered: ident.version,
            });
        }
        let new = ident.resource.to_resource();
        if new.memory_mb <= 0 || new.vcores <= 0 {
            return Err(UpdateRefusal::Invalid {
                id,
                memory_mb: new.memory_mb,
                vcores: new.vcores,
            });
        }
        let old = c.resource.clone();
        let names: BTreeSet<&'static str> = old
            .extended()
            .chain(new.extended())
            .map(|(n, _)| n)
            .collect();
        if let Some(name) = names.into_iter().find(|n| old.get(n) != new.get(n)) {
            return Err(UpdateRefusal::DeviceChange {
                id,
                name: name.to_string(),
                from: old.get(name),
                to: new.get(name),
            });
        }
        if let Phase::Held(live) | Phase::Running(live) = &mut c.phase {
            live.updating = Some(ident.version);
        }
        Ok(UpdatePlan {
            old,
            new,
            has_process,
        })
    }

    /// An accepted update is done: with `applied`, the container takes the token's resource
    /// and version (what heartbeats report and the recovery store keeps); else only the
    /// in-flight mark goes. False if the container is no longer live (it ended meanwhile),
    /// in which case nothing is recorded.
    pub fn finish_update(&mut self, ident: &ContainerTokenIdentifier, applied: bool) -> bool {
        let Some(c) = self.get_mut(&ident.container_id) else {
            return false;
        };
        if let Phase::Held(live) | Phase::Running(live) = &mut c.phase {
            if live.updating == Some(ident.version) {
                live.updating = None;
            }
        }
        if c.is_complete() {
            return false;
        }
        if applied && ident.version > c.token.version {
            c.resource = ident.resource.to_resource();
            c.token = ident.clone();
        }
        true
    }
}
