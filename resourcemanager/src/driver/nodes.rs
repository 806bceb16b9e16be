//! The node family: what NodeManagers send (registration, heartbeats, unregistration).
//! A heartbeat, with its GPU samples and what the NM says of itself, is applied at once:
//! no other command runs between its parts.

use spindle_common::NodeId;
use tracing::{info, warn};

use super::command::{
    HeartbeatAnswer, NodeBeat, NodeCommand, NodeRegistered, SelfReport, SelfReportRefusals,
};
use super::{Driver, Durability};
use crate::core::NodeRegistration;

impl Driver {
    pub(super) fn node(&mut self, cmd: NodeCommand, now: u64) {
        match cmd {
            NodeCommand::Register {
                registration,
                says,
                reply,
            } => {
                let r = self.register_node(*registration, says, now);
                self.settle_and_reply(Ok(r), Durability::Logged, reply);
            }
            NodeCommand::Heartbeat { beat, reply } => {
                let r = self.heartbeat(*beat, now);
                self.settle_and_reply(Ok(r), Durability::Logged, reply);
            }
            NodeCommand::Prefetch {
                image,
                nodes,
                reply,
            } => {
                let r = self.core.prefetch_image(&image, &nodes);
                if let Ok(targets) = &r {
                    info!(image = %image, nodes = targets.len(), "image prefetch asked");
                }
                self.settle_and_reply(Ok(r), Durability::Logged, reply);
            }
            NodeCommand::Unregister(node, reply) => {
                self.core.unregister_node(&node, now);
                info!(node_id = %node, "node unregistered (SHUTDOWN)");
                self.settle_and_reply(Ok(()), Durability::Logged, reply);
            }
        }
    }

    /// Admits the node (unless the host lists keep it out), then takes what it says of
    /// itself.
    fn register_node(
        &mut self,
        registration: NodeRegistration,
        says: SelfReport,
        now: u64,
    ) -> NodeRegistered {
        let id = registration.id.clone();
        let (interval_ms, refused, self_report) =
            match self.core.try_register_node(registration, now) {
                Ok(interval) => {
                    info!(node_id = %id, "node registered");
                    (interval, None, self.self_report(&id, says, now))
                }
                Err(why) => {
                    warn!(node_id = %id, "node refused: {why}");
                    let interval = self.core.conf().heartbeat_interval_ms;
                    (interval, Some(why), SelfReportRefusals::default())
                }
            };
        NodeRegistered {
            interval_ms,
            container_key: self.core.newest_container_key().clone(),
            rm_identifier: self.core.cluster_timestamp(),
            refused,
            self_report,
        }
    }

    /// The heartbeat itself, then its GPU samples, then what the NM says of itself.
    fn heartbeat(&mut self, beat: NodeBeat, now: u64) -> HeartbeatAnswer {
        let NodeBeat {
            node,
            healthy,
            report,
            containers,
            gpu,
            says,
        } = beat;
        let reply = self
            .core
            .node_heartbeat(&node, healthy, report, containers, now);
        let ignored_gpu = if gpu.is_empty() {
            Vec::new()
        } else {
            self.core.record_gpu_use(&node, gpu, now)
        };
        let refused = self.self_report(&node, says, now);
        HeartbeatAnswer {
            reply,
            container_key: self.core.newest_container_key().clone(),
            ignored_gpu,
            refused,
            images_to_prefetch: self.core.take_prefetch(&node),
        }
    }

    /// What an NM says of itself: its partition and its `nm.yarn.io/` attributes, each
    /// refused on its own; the scheduler runs after a change.
    fn self_report(&mut self, node: &NodeId, says: SelfReport, now: u64) -> SelfReportRefusals {
        if says.is_empty() {
            return SelfReportRefusals::default();
        }
        let labels = says
            .labels
            .and_then(|l| self.core.report_node_labels(node, &l).err());
        let attributes = says
            .attributes
            .and_then(|a| self.core.report_node_attributes(node, a).err());
        let images = says
            .images
            .and_then(|i| self.core.report_node_images(node, i).err());
        if !says.pull_failures.is_empty() {
            self.core
                .report_pull_failures(node, says.pull_failures, now);
        }
        if let Some(why) = labels.as_ref().or(attributes.as_ref()).or(images.as_ref()) {
            warn!(node_id = %node, "refused what the node says of itself: {why}");
        }
        self.core.run_after_change(now);
        SelfReportRefusals {
            labels,
            attributes,
            images,
        }
    }
}
