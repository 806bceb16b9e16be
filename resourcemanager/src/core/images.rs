//! The container images each node holds, as its NodeManager reports them: shown to users
//! (`node -status`, the nodes REST resource) and given to the scheduler, whose asks for an
//! image prefer nodes that hold it (`scheduler/image_holders.rs`).

use std::collections::BTreeSet;

use spindle_common::states::NodeState;
use spindle_common::NodeId;

use super::{CoreError, RmCore};

/// Most images one node may report (a node's cache holds tens).
pub const MAX_NODE_IMAGES: usize = 1024;
/// Most failed pulls remembered per node (the newest).
pub const MAX_PULL_FAILURES: usize = 16;

/// One image in a node's cache: the canonical references it was pulled as, and its manifest
/// digest (`sha256:...`), either of which an ask may name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeImage {
    pub names: Vec<String>,
    pub digest: String,
    pub size_bytes: u64,
}

/// A pull that failed on a node, as its NM reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullFailure {
    /// The reference as asked (normalized).
    pub image: String,
    pub reason: String,
    /// When the RM heard of it (ms).
    pub at: u64,
}

impl RmCore {
    /// Asks `nodes` (every RUNNING node when empty) to pull `image` ahead of the jobs
    /// that will want it (`spindle image -prefetch`); it rides each node's next heartbeat
    /// answer. Forgets earlier failures of the same image there. The nodes asked.
    pub fn prefetch_image(
        &mut self,
        image: &str,
        nodes: &[NodeId],
    ) -> Result<Vec<NodeId>, CoreError> {
        let running = |n: &super::model::Node| n.state == NodeState::RUNNING;
        let targets: Vec<NodeId> = if nodes.is_empty() {
            self.nodes
                .values()
                .filter(|n| running(n))
                .map(|n| n.id.clone())
                .collect()
        } else {
            for id in nodes {
                let n = self
                    .nodes
                    .get(id)
                    .ok_or_else(|| CoreError::UnknownNode(id.to_string()))?;
                if !running(n) {
                    return Err(CoreError::NodeNotRunning {
                        node: id.to_string(),
                        state: format!("{}", n.state),
                    });
                }
            }
            nodes.to_vec()
        };
        if targets.is_empty() {
            return Err(CoreError::NoNodeToPrefetch);
        }
        for id in &targets {
            if let Some(n) = self.nodes.get_mut(id) {
                n.pull_failures.retain(|f| f.image != image);
                n.to_prefetch.insert(image.to_string());
            }
        }
        Ok(targets)
    }

    /// The images `id` is to pull, handed over once (for its heartbeat answer).
    pub fn take_prefetch(&mut self, id: &NodeId) -> Vec<String> {
        self.nodes
            .get_mut(id)
            .map(|n| std::mem::take(&mut n.to_prefetch).into_iter().collect())
            .unwrap_or_default()
    }

    /// Pulls that failed on `id` (heard of at `now`), newest last; the oldest beyond the
    /// bound are dropped.
    pub fn report_pull_failures(&mut self, id: &NodeId, failures: Vec<PullFailure>, now: u64) {
        if let Some(n) = self.nodes.get_mut(id) {
            for mut f in failures {
                f.at = now;
                n.pull_failures.retain(|x| x.image != f.image);
                n.pull_failures.push(f);
            }
            let over = n.pull_failures.len().saturating_sub(MAX_PULL_FAILURES);
            n.pull_failures.drain(..over);
        }
    }

    /// The node's NM says it now holds `images` (its whole cache).
    pub fn report_node_images(
        &mut self,
        id: &NodeId,
        images: Vec<NodeImage>,
    ) -> Result<(), CoreError> {
        if images.len() > MAX_NODE_IMAGES {
            return Err(CoreError::TooManyNodeImages {
                count: images.len(),
                max: MAX_NODE_IMAGES,
            });
        }
        let keys: BTreeSet<String> = images
            .iter()
            .flat_map(|i| i.names.iter().chain(std::iter::once(&i.digest)))
            .filter(|k| !k.is_empty())
            .cloned()
            .collect();
        let Some(n) = self.nodes.get_mut(id) else {
            return Ok(());
        };
        n.images = images;
        n.pull_failures.retain(|f| !keys.contains(&f.image));
        self.sched.set_node_images(id, keys);
        Ok(())
    }

    /// The images the node last reported.
    pub fn node_images(&self, id: &NodeId) -> &[NodeImage] {
        self.nodes.get(id).map_or(&[], |n| n.images.as_slice())
    }
}
