//! The blob store's REST bodies (`/ws/v1/cluster/blobs/...`): what an upload or a claim of a
//! stored blob answers.

use serde::{Deserialize, Serialize};

/// A blob the caller may now use: `{"blob": {"digest": "sha256:...", "size": N,
/// "uploaded": bool}}`. `uploaded` is false when no byte was stored by this call (the
/// digest was held already).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BlobInfo {
    pub digest: String,
    pub size: u64,
    pub uploaded: bool,
}

/// The envelope, as YARN wraps each body in its name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BlobBody {
    pub blob: BlobInfo,
}
