//! The immutable copy of the core that REST reads serve, rebuilt by the driver only when a
//! read comes and the state changed since the last one.

use std::collections::BTreeMap;

use spindle_common::{ApplicationId, ContainerId, NodeId, Resource};

use crate::core::labels::NodeLabels;
use crate::core::scheduler::{Ask, AskKey};
use crate::core::{App, Counters, Node, QueueView, RmContainer, RmCore, SharedMap};
use crate::wire;

/// An immutable copy of what REST reads serve, rebuilt on demand after a change.
#[derive(Clone)]
pub struct Snapshot {
    pub cluster_ts: u64,
    pub apps: SharedMap<ApplicationId, App>,
    pub nodes: SharedMap<NodeId, Node>,
    pub containers: SharedMap<ContainerId, RmContainer>,
    pub counters: Counters,
    pub pending_containers: u64,
    pub pending: Resource,
    /// Every queue, parents before children (`/scheduler`, the UI, `queue -status`).
    pub queue_views: Vec<QueueView>,
    pub max_allocation: Resource,
    /// Resources used per application, as the scheduler accounts them; an application that
    /// uses nothing (every waiting one) is left out: read it as zero.
    pub app_usage: BTreeMap<ApplicationId, Resource>,
    /// (total, used) per schedulable node.
    pub node_usage: BTreeMap<NodeId, (Resource, Resource)>,
    /// Why an application's AM container waits, for those whose AM ask has no queue room.
    pub am_waits: BTreeMap<ApplicationId, String>,
    /// Gangs per application (Spindle's `gangs` extension of the app view).
    pub app_gangs: BTreeMap<ApplicationId, Vec<spindle_common::records::am::GangStatus>>,
    /// Outstanding asks per application, for `resourceRequests`.
    pub app_asks: BTreeMap<ApplicationId, Vec<(AskKey, Ask)>>,
    /// Containers under a preemption notice, per application.
    pub notices: BTreeMap<ApplicationId, u32>,
    /// What the preemption monitor has done (`/metrics`).
    pub preemption: crate::core::PreemptionCounters,
    /// The cluster's labels, mappings and central attributes.
    pub labels: NodeLabels,
    /// Per node: its partition, its attributes (the NM's and the central ones) and the
    /// allocation tags of what runs there.
    pub node_placement: BTreeMap<NodeId, NodePlacement>,
    /// The scheduling passes' work counters (`/metrics`).
    pub pass_stats: crate::core::scheduler::PassStats,
    /// Sampled GPU use per application (`gpuUtilization`, `idleGpuSeconds`).
    pub app_gpu: BTreeMap<ApplicationId, crate::core::AppGpuUse>,
    /// Why each waiting application of a `fairshare` leaf is where it is.
    pub app_places: BTreeMap<ApplicationId, crate::core::scheduler::AppPlace>,
    /// `http` or `https` (`yarn.http.policy`, as in the address AMs are told): the scheme of
    /// the URLs REST answers carry (tracking and log URLs, a container's node address).
    pub scheme: &'static str,
}

/// A node as placement sees it.
#[derive(Debug, Clone, Default)]
pub struct NodePlacement {
    pub partition: String,
    pub attributes: BTreeMap<String, String>,
    pub tags: BTreeMap<String, u32>,
}

impl Snapshot {
    pub(super) fn of(core: &RmCore) -> Self {
        let (pending_containers, pending) = core.scheduler().pending();
        Self {
            cluster_ts: core.cluster_timestamp(),
            apps: core.apps().clone(),
            nodes: core.nodes().clone(),
            containers: core.containers().clone(),
            counters: core.counters().clone(),
            pending_containers,
            pending,
            queue_views: core.queue_views(),
            max_allocation: core.max_allocation(),
            app_usage: core
                .scheduler()
                .apps()
                .iter()
                // Not the waiting ones: with 100,000 pending applications these zeros
                // were 11 MB per snapshot, and two snapshots live while one is rebuilt.
                .filter(|(_, v)| !v.used.is_zero())
                .map(|(k, v)| (*k, v.used.clone()))
                .collect(),
            node_usage: core
                .scheduler()
                .nodes()
                .iter()
                .map(|n| (n.id.clone(), (n.total.clone(), n.used.clone())))
                .collect(),
            labels: core.node_labels().clone(),
            node_placement: core
                .nodes()
                .keys()
                .map(|id| {
                    let tags = core
                        .scheduler()
                        .node(id)
                        .map(|n| n.tags.totals().clone())
                        .unwrap_or_default();
                    let p = NodePlacement {
                        partition: core.partition_of(id),
                        attributes: core.node_attributes(id),
                        tags,
                    };
                    (id.clone(), p)
                })
                .collect(),
            app_gangs: core
                .scheduler()
                .apps()
                .iter()
                .filter(|(_, a)| !a.gangs.is_empty())
                .map(|(k, _)| (*k, wire::all(core.gang_statuses(k))))
                .collect(),
            am_waits: core
                .scheduler()
                .apps()
                .iter()
                .filter(|(_, a)| a.asks.values().any(|x| x.is_am && x.any > 0))
                .filter_map(|(k, _)| Some((*k, core.am_wait_reason(k)?)))
                .collect(),
            app_asks: core
                .scheduler()
                .apps()
                .iter()
                .filter(|(_, a)| !a.asks.is_empty())
                .map(|(k, a)| (*k, a.asks.iter().map(|(k, v)| (*k, v.clone())).collect()))
                .collect(),
            notices: core
                .preemption()
                .notices
                .keys()
                .fold(BTreeMap::new(), |mut m, c| {
                    *m.entry(c.application_id()).or_insert(0) += 1;
                    m
                }),
            preemption: core.preemption().counters.clone(),
            pass_stats: core.scheduler().stats.clone(),
            app_gpu: core.gpu_use_by_app(),
            app_places: core.scheduler().app_places(),
            scheme: if core.conf().rm_address.starts_with("https://") {
                "https"
            } else {
                "http"
            },
        }
    }
}
