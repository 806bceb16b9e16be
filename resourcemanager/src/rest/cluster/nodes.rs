//! `/ws/v1/cluster/nodes`: the node list (with YARN's state filters) and one node.

use super::*;

pub(in crate::rest) fn node_info(s: &Snapshot, n: &Node) -> NodeInfo {
    let (total, used) = s
        .node_usage
        .get(&n.id)
        .cloned()
        .unwrap_or_else(|| (n.total.clone(), Resource::zero()));
    let avail = total.minus(&used).clamp_non_negative();
    let placement = s.node_placement.get(&n.id);
    NodeInfo {
        rack: n.rack.clone(),
        state: n.state,
        id: n.id.to_string(),
        node_host_name: n.id.host.clone(),
        node_http_address: n.http_address.clone(),
        last_health_update: n.last_health_update,
        version: n.version.clone(),
        health_report: n.health_report.clone(),
        num_containers: n.containers.len() as i64,
        used_memory_mb: used.memory_mb,
        avail_memory_mb: avail.memory_mb,
        used_virtual_cores: used.vcores,
        available_virtual_cores: avail.vcores,
        mem_utilization: 0.0,
        cpu_utilization: n.cpu_usage,
        used_resource: ResourceInfo::from(&used),
        available_resource: ResourceInfo::from(&avail),
        total_resource: ResourceInfo::from(&n.total),
        node_labels: placement
            .map(|p| p.partition.clone())
            .filter(|p| !p.is_empty())
            .into_iter()
            .collect(),
        allocation_tags: serde_json::json!({
            "allocationTagInfo": placement.map(|p| p.tags.iter().map(|(t, c)| {
                serde_json::json!({"allocationTag": t, "allocationsCount": c})
            }).collect::<Vec<_>>()).unwrap_or_default()
        }),
        node_attributes_info: serde_json::to_value(
            spindle_common::records::labels::NodeAttributesInfo {
                node_attribute_info: placement
                    .map(|p| {
                        p.attributes
                            .iter()
                            .map(|(k, v)| super::labels::attribute_info(k, v))
                            .collect()
                    })
                    .unwrap_or_default(),
            },
        )
        .unwrap_or_default(),
        decommissioning_timeout: n
            .decommissioning
            .and_then(|d| d.timeout_secs)
            .map(|t| i64::try_from(t).unwrap_or(i64::MAX)),
        images: n
            .images
            .iter()
            .map(|i| spindle_common::records::tracker::NodeImageInfo {
                names: i.names.clone(),
                digest: i.digest.clone(),
                size_bytes: i.size_bytes,
            })
            .collect(),
        image_pull_failures: n
            .pull_failures
            .iter()
            .map(|f| spindle_common::records::tracker::ImagePullFailureInfo {
                image: f.image.clone(),
                reason: f.reason.clone(),
                time: f.at,
            })
            .collect(),
        ..Default::default()
    }
}

pub(super) fn parse_list<T: std::str::FromStr<Err = String>>(
    q: &HashMap<String, String>,
    key: &str,
) -> Result<Option<Vec<T>>, ApiError> {
    let Some(raw) = q.get(key) else {
        return Ok(None);
    };
    let mut out = Vec::new();
    for part in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        out.push(part.parse::<T>().map_err(ApiError::bad_request)?);
    }
    Ok(if out.is_empty() { None } else { Some(out) })
}

pub(super) async fn nodes(State(st): State<AppState>, Query(q): Q) -> Result<Response, ApiError> {
    let s = st.driver.snapshot().await;
    let states = match parse_list::<NodeState>(&q, "states")? {
        Some(v) => Some(v),
        None => parse_list::<NodeState>(&q, "state")?,
    };
    let offset = super::apps::paging_offset(&q)?;
    let limit = match q.get("limit") {
        None => usize::MAX,
        Some(v) => match v.trim().parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => {
                return Err(ApiError::bad_request(format!(
                    "limit must be a number greater than 0, got {v}"
                )))
            }
        },
    };
    let mut total = 0usize;
    let mut list: Vec<NodeInfo> = Vec::new();
    for n in s
        .nodes
        .values()
        .filter(|n| states.as_ref().is_none_or(|st| st.contains(&n.state)))
    {
        if total >= offset && list.len() < limit {
            list.push(node_info(&s, n));
        }
        total += 1;
    }
    let body = Json(NodesBody {
        nodes: if list.is_empty() {
            None
        } else {
            Some(Nodes {
                node: OneOrMany(list),
            })
        },
    });
    Ok(([(super::apps::TOTAL_COUNT, total.to_string())], body).into_response())
}

/// `GET /ws/v1/cluster/nodes-summary?groupBy=<attribute>` (Spindle's extension, for the web
/// UI's overview at any cluster size): the nodes grouped by the value of one node attribute
/// (default `nm.yarn.io/gpu-model`; nodes without it fall in the group with an empty value),
/// each group with its node count per state and the total and used resources of its
/// schedulable nodes.
pub(super) async fn nodes_summary(
    State(st): State<AppState>,
    Query(q): Q,
) -> Result<Json<serde_json::Value>, ApiError> {
    let attribute = q
        .get("groupBy")
        .map(|a| a.trim())
        .filter(|a| !a.is_empty())
        .unwrap_or(spindle_common::resource::GPU_MODEL_ATTRIBUTE)
        .to_string();
    if attribute.len() > 256 {
        return Err(ApiError::bad_request(
            "groupBy: an attribute name is at most 256 characters",
        ));
    }
    let s = st.driver.snapshot().await;
    #[derive(Default)]
    struct Group {
        nodes: u64,
        states: std::collections::BTreeMap<&'static str, u64>,
        total: Resource,
        used: Resource,
    }
    let mut groups: std::collections::BTreeMap<String, Group> = Default::default();
    for n in s.nodes.values() {
        let value = s
            .node_placement
            .get(&n.id)
            .and_then(|p| p.attributes.get(&attribute))
            .cloned()
            .unwrap_or_default();
        let g = groups.entry(value).or_default();
        g.nodes += 1;
        *g.states.entry(n.state.as_str()).or_default() += 1;
        if let Some((t, u)) = s.node_usage.get(&n.id) {
            g.total.add_assign(t);
            g.used.add_assign(u);
        }
    }
    let group: Vec<serde_json::Value> = groups
        .into_iter()
        .map(|(value, g)| {
            serde_json::json!({
                "value": value,
                "nodes": g.nodes,
                "nodesByState": g.states,
                "totalResource": ResourceInfo::from(&g.total),
                "usedResource": ResourceInfo::from(&g.used),
            })
        })
        .collect();
    Ok(Json(serde_json::json!({
        "nodesSummary": {"groupBy": attribute, "group": group}
    })))
}

#[tracing::instrument(skip_all, fields(node_id = %id))]
pub(super) async fn node(
    State(st): State<AppState>,
    PathParams(id): PathParams<String>,
) -> Result<Json<NodeBody>, ApiError> {
    let nid: NodeId = id
        .parse()
        .map_err(|_| ApiError::bad_request(format!("Invalid NodeId [{id}]. Expected host:port")))?;
    let s = st.driver.snapshot().await;
    let n = s.nodes.get(&nid).ok_or_else(|| {
        ApiError::not_found(format!("java.lang.Exception: nodeId, {id}, is not found"))
    })?;
    Ok(Json(NodeBody {
        node: node_info(&s, n),
    }))
}
