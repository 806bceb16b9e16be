//! The container images each node holds, as its NodeManager reports them: shown to users
//! (`node -status`, the nodes REST resource) and given to the scheduler, whose asks for an
//! image prefer nodes that hold it (`scheduler/image_holders.rs`).

use std::collections::BTreeSet;

use spindle_common::NodeId;

use super::{CoreError, RmCore};

/// Most images one node may report (a node's cache holds tens).
pub const MAX_NODE_IMAGES: usize = 1024;

/// One image in a node's cache: the canonical references it was pulled as, and its manifest
/// digest (`sha256:...`), either of which an ask may name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeImage {
    pub names: Vec<String>,
    pub digest: String,
    pub size_bytes: u64,
}

impl RmCore {
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
        self.sched.set_node_images(id, keys);
        Ok(())
    }

    /// The images the node last reported.
    pub fn node_images(&self, id: &NodeId) -> &[NodeImage] {
        self.nodes.get(id).map_or(&[], |n| n.images.as_slice())
    }
}
