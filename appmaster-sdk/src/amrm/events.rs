//! What a heartbeat brought, as a batch and as single events.

use spindle_common::ids::{ContainerId, NodeId};
use spindle_common::records::am::{
    Container, ContainerStatus, ContainerUpdateType, GangStatus, NodeReport, UpdateContainerError,
    UpdatedContainer,
};

#[derive(Debug, Clone, Default)]
pub struct AllocationEvents {
    pub allocated: Vec<Container>,
    pub completed: Vec<ContainerStatus>,
    pub nodes: Vec<NodeReport>,
    /// Gang statuses that changed (state, diagnostics, reserved nodes or failed members)
    /// since the AM last heard of that gang; the RM repeats them every heartbeat, the client
    /// passes each change on once.
    pub gangs: Vec<GangStatus>,
    /// Preemption notices: containers the RM newly put under notice (each container once,
    /// although the RM repeats its message until they are gone).
    pub preempted: Vec<PreemptionNotice>,
    /// Elastic gangs the RM grew (each offer once; its containers are not in `allocated`).
    pub offers: Vec<GangOffer>,
    /// Elastic gangs the RM shrinks (each demand once, although the RM repeats it).
    pub demands: Vec<GangDemand>,
    /// Containers the RM resized as asked ([`AmRmClient::request_container_update`]): each
    /// at its new version, with a new token for its NM.
    pub updated: Vec<UpdatedContainer>,
    /// Container updates the RM refused.
    pub update_errors: Vec<UpdateContainerError>,
    /// Containers whose GPUs stayed idle past their queue's `gpu-idle-timeout-ms` (the
    /// queue's `gpu-idle-action` is `notify`); each told once per idle spell.
    pub idle_gpus: Vec<spindle_common::records::am::IdleGpuContainer>,
}

/// The RM grew an elastic gang from `from` to `to` members
/// ([`AllocationEvent::ResizeOffered`]).
#[derive(Debug, Clone, PartialEq)]
pub struct GangOffer {
    pub gang_id: String,
    /// The new members, granted: start them to accept, or [`AmRmClient::decline_offer`].
    pub containers: Vec<Container>,
    pub from: u32,
    pub to: u32,
}

/// The RM shrinks an elastic gang from `from` to `to` members
/// ([`AllocationEvent::ResizeDemanded`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GangDemand {
    pub gang_id: String,
    /// The members to give back (release) by `deadline_ms`.
    pub containers: Vec<ContainerId>,
    pub from: u32,
    pub to: u32,
    /// When the RM kills what is left (exit -102; not a failure of the gang), ms since the
    /// epoch.
    pub deadline_ms: u64,
}

/// Containers the RM takes back ([`AllocationEvent::Preempted`]): what the AM should
/// checkpoint and give back before `deadline_ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreemptionNotice {
    /// The containers newly under notice (a gang's live members all together).
    pub containers: Vec<PreemptedContainer>,
    /// When the RM kills what is still live, with exit status -102 (ms since the epoch).
    pub deadline_ms: u64,
    /// The gangs the RM takes back whole.
    pub gang_ids: Vec<String>,
}

/// A container under a preemption notice, with what the AM needs to act on it: the node it
/// runs on (signal or stop it there, or by id alone with
/// [`crate::NmClient::signal_container_by_id`]) and its gang.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreemptedContainer {
    pub id: ContainerId,
    /// The node it runs on, and that NM's HTTP address (`None` only from an RM that does
    /// not say).
    pub node_id: Option<NodeId>,
    pub node_http_address: Option<String>,
    /// The gang it is a member of.
    pub gang_id: Option<String>,
}

impl PreemptionNotice {
    /// The ids of the containers under notice.
    pub fn ids(&self) -> Vec<ContainerId> {
        self.containers.iter().map(|c| c.id).collect()
    }
}

impl AllocationEvents {
    pub fn is_empty(&self) -> bool {
        self.allocated.is_empty()
            && self.completed.is_empty()
            && self.nodes.is_empty()
            && self.gangs.is_empty()
            && self.preempted.is_empty()
            && self.offers.is_empty()
            && self.demands.is_empty()
            && self.updated.is_empty()
            && self.update_errors.is_empty()
            && self.idle_gpus.is_empty()
    }

    /// Appends `other` after these events.
    pub fn extend(&mut self, other: AllocationEvents) {
        self.allocated.extend(other.allocated);
        self.completed.extend(other.completed);
        self.nodes.extend(other.nodes);
        self.gangs.extend(other.gangs);
        self.preempted.extend(other.preempted);
        self.offers.extend(other.offers);
        self.demands.extend(other.demands);
        self.updated.extend(other.updated);
        self.update_errors.extend(other.update_errors);
        self.idle_gpus.extend(other.idle_gpus);
    }

    /// One [`AllocationEvent`] per item, in the order preemption notices, resize demands,
    /// resize offers, gang statuses, grants, container updates, refused updates, idle GPUs,
    /// completions, node updates (a gang's status comes before its containers' later
    /// completions).
    pub fn into_items(self) -> impl Iterator<Item = AllocationEvent> {
        self.preempted
            .into_iter()
            .map(|n| AllocationEvent::Preempted {
                containers: n.containers,
                deadline_ms: n.deadline_ms,
                gang_ids: n.gang_ids,
            })
            .chain(
                self.demands
                    .into_iter()
                    .map(|d| AllocationEvent::ResizeDemanded {
                        gang_id: d.gang_id,
                        containers: d.containers,
                        from: d.from,
                        to: d.to,
                        deadline_ms: d.deadline_ms,
                    }),
            )
            .chain(
                self.offers
                    .into_iter()
                    .map(|o| AllocationEvent::ResizeOffered {
                        gang_id: o.gang_id,
                        containers: o.containers,
                        from: o.from,
                        to: o.to,
                    }),
            )
            .chain(self.gangs.into_iter().map(AllocationEvent::Gang))
            .chain(self.allocated.into_iter().map(AllocationEvent::Allocated))
            .chain(
                self.updated
                    .into_iter()
                    .map(|u| AllocationEvent::ContainerUpdated {
                        update_type: u.update_type,
                        container: u.container,
                    }),
            )
            .chain(
                self.update_errors
                    .into_iter()
                    .map(|error| AllocationEvent::ContainerUpdateFailed { error }),
            )
            .chain(self.idle_gpus.into_iter().map(AllocationEvent::IdleGpus))
            .chain(self.completed.into_iter().map(AllocationEvent::Completed))
            .chain(self.nodes.into_iter().map(AllocationEvent::NodeUpdated))
    }
}

/// One thing the RM told the AM, as [`AmRmClient::events`] yields them.
#[derive(Debug, Clone)]
pub enum AllocationEvent {
    Allocated(Container),
    Completed(ContainerStatus),
    NodeUpdated(NodeReport),
    Gang(GangStatus),
    /// The RM takes these containers back: checkpoint and give them back before
    /// `deadline_ms` (ms since the epoch), when the RM kills what is left with -102
    /// (PREEMPTED). Told once per newly noticed container.
    Preempted {
        containers: Vec<PreemptedContainer>,
        deadline_ms: u64,
        gang_ids: Vec<String>,
    },
    /// The RM grew the elastic gang `gang_id` from `from` to `to` members: `containers` are
    /// granted and belong to the gang. Accept by starting them (typically after restarting
    /// the whole gang at `to`), decline with [`AmRmClient::decline_offer`]. Told once.
    ResizeOffered {
        gang_id: String,
        containers: Vec<Container>,
        from: u32,
        to: u32,
    },
    /// The RM shrinks the elastic gang `gang_id` from `from` to `to`: give `containers` back
    /// ([`AmRmClient::release_members`]) by `deadline_ms` (ms since the epoch), when the RM
    /// kills what is left with -102 (the gang goes on at `to`). Told once per demand, although
    /// the RM repeats it until the containers are gone.
    ResizeDemanded {
        gang_id: String,
        containers: Vec<ContainerId>,
        from: u32,
        to: u32,
        deadline_ms: u64,
    },
    /// The RM resized a container as asked ([`AmRmClient::request_container_update`]; an
    /// increase may come some heartbeats later): `container` is at its new `version` and
    /// `resource`, with a new `container_token`. The running container does not change until
    /// the AM hands that token to its NM: [`crate::nm_client::NmClient::update_container`]
    /// (or `update_containers`). The SDK does not do it by itself, so that the AM decides
    /// when (after a decrease, the process should already fit the smaller size).
    ContainerUpdated {
        update_type: ContainerUpdateType,
        container: Container,
    },
    /// The RM refused an update (`error.reason` says why, e.g.
    /// `INCORRECT_CONTAINER_VERSION_ERROR`; `error.current_container_version` is the version
    /// to ask from).
    ContainerUpdateFailed {
        error: UpdateContainerError,
    },
    /// The RM says this container's GPUs have been idle since `idle_since_ms`, longer than
    /// its queue's `gpu-idle-timeout-ms` (`gpu-idle-action=notify`): the AM may checkpoint
    /// and release it, or put it to work. Told once per idle spell.
    IdleGpus(spindle_common::records::am::IdleGpuContainer),
}
