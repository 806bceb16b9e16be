//! `POST /ws/v1/cluster/images/prefetch`: nodes pull an image ahead of the jobs that will
//! want it (Spindle's; YARN has none). The pull rides each node's next heartbeat answer;
//! what the nodes then hold shows in `/ws/v1/cluster/nodes` (`images`,
//! `imagePullFailures`).

use spindle_common::image_ref::ImageRef;

use super::*;
use crate::driver::NodeCommand;

/// Most nodes one prefetch may name.
const MAX_PREFETCH_NODES: usize = 10_000;

pub(super) async fn prefetch(
    State(st): State<AppState>,
    JsonBody(body): JsonBody<ImagePrefetchRequest>,
) -> Result<Json<ImagePrefetchInfo>, ApiError> {
    let image = ImageRef::parse(&body.image)
        .map_err(|e| ApiError::bad_request(e.to_string()))?
        .to_string();
    if body.nodes.len() > MAX_PREFETCH_NODES {
        return Err(ApiError::bad_request(format!(
            "{} nodes named; at most {MAX_PREFETCH_NODES}",
            body.nodes.len()
        )));
    }
    let nodes = body
        .nodes
        .iter()
        .map(|n| {
            n.trim().parse::<NodeId>().map_err(|e| {
                ApiError::bad_request(format!("`{n}` is not a node id (host:port): {e}"))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let image_for_driver = image.clone();
    let targets = st
        .driver
        .call(|reply| NodeCommand::Prefetch {
            image: image_for_driver,
            nodes,
            reply,
        })
        .await?
        .map_err(|e| ApiError::from(crate::driver::RmError::Core(e)))?;
    Ok(Json(ImagePrefetchInfo {
        image,
        nodes: targets.iter().map(ToString::to_string).collect(),
    }))
}
