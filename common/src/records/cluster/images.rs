//! Spindle's image resources: `POST /ws/v1/cluster/images/prefetch` (`spindle image
//! -prefetch`). What nodes hold is in each node's `images` (and `imagePullFailures`).

use serde::{Deserialize, Serialize};

/// Pull `image` on `nodes` (`host:port`; every RUNNING node when empty) ahead of jobs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ImagePrefetchRequest {
    pub image: String,
    pub nodes: Vec<String>,
}

/// The answer: the image as the nodes will name it, and the nodes asked to pull it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ImagePrefetchInfo {
    pub image: String,
    pub nodes: Vec<String>,
}
