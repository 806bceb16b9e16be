//! Node labels and node attributes: YARN's label endpoints (`get-node-labels`,
//! `add-node-labels`, `remove-node-labels`, `replace-node-to-labels`, `get-node-to-labels`,
//! `label-mappings`, `nodes/{id}/get-labels`, `nodes/{id}/replace-labels`) and the node
//! attribute endpoints (`get-node-attributes`, `get-attributes-to-nodes`,
//! `get-node-to-attributes`, and Spindle's `node-attributes-mapping`, YARN's
//! `NodesToAttributesMappingRequest` as JSON). Mutations are admin operations; a refused
//! change changes nothing.

use std::collections::BTreeMap;

use axum::extract::RawQuery;
use spindle_common::records::labels::*;

use super::*;
use crate::core::labels::{AttributeOp, LabelChange};

/// The raw query's pairs, percent-decoded (`+` is a space), as `Query` would read them.
fn pairs(raw: &Option<String>) -> Vec<(String, String)> {
    let Some(raw) = raw.as_deref().filter(|r| !r.is_empty()) else {
        return vec![];
    };
    reqwest::Url::parse(&format!("http://q/?{raw}"))
        .map(|u| u.query_pairs().into_owned().collect())
        .unwrap_or_default()
}

/// Every value of `key` in the raw query, repeated (`labels=a&labels=b`) or comma-separated.
fn values(raw: &Option<String>, key: &str) -> Vec<String> {
    pairs(raw)
        .into_iter()
        .filter(|(k, _)| k == key)
        .flat_map(|(_, v)| {
            v.split(',')
                .map(|x| x.trim().to_string())
                .collect::<Vec<_>>()
        })
        .filter(|x| !x.is_empty())
        .collect()
}

/// `user.name` from the raw query, as the other endpoints read it.
fn query_map(raw: &Option<String>) -> HashMap<String, String> {
    pairs(raw).into_iter().collect()
}

fn label_info(s: &Snapshot, names: impl Iterator<Item = String>) -> NodeLabelsInfo {
    NodeLabelsInfo {
        node_label_info: names
            .map(|name| NodeLabelInfo {
                exclusivity: s.labels.cluster.get(&name).copied().unwrap_or(true),
                name,
            })
            .collect(),
    }
}

async fn change(st: &AppState, raw: &Option<String>, change: LabelChange) -> Result<(), ApiError> {
    let caller = st.caller(&query_map(raw)).await;
    st.driver
        .call(|reply| AdminCommand::ChangeLabels {
            change,
            caller,
            reply,
        })
        .await?;
    Ok(())
}

pub(super) async fn get_node_labels(State(st): State<AppState>) -> Json<NodeLabelsEnvelope> {
    let s = st.driver.snapshot().await;
    Json(NodeLabelsEnvelope {
        node_labels_info: label_info(&s, s.labels.cluster.keys().cloned()),
    })
}

pub(super) async fn add_node_labels(
    State(st): State<AppState>,
    RawQuery(raw): RawQuery,
    JsonBody(body): JsonBody<serde_json::Value>,
) -> Result<StatusCode, ApiError> {
    // YARN's root-wrapped form when the root is there, else the bare list object: an
    // untagged enum would read a wrapped body with a bad inner value as an empty bare one.
    let body = if body.get("nodeLabelsInfo").is_some() {
        serde_json::from_value::<NodeLabelsEnvelope>(body).map(NodeLabelsBody::Wrapped)
    } else {
        serde_json::from_value::<NodeLabelsInfo>(body).map(NodeLabelsBody::Bare)
    }
    .map_err(|e| ApiError::bad_request(format!("bad nodeLabelsInfo body: {e}")))?;
    let labels = body
        .into_labels()
        .into_iter()
        .map(|l| (l.name.trim().to_string(), l.exclusivity))
        .collect();
    change(&st, &raw, LabelChange::AddLabels(labels)).await?;
    Ok(StatusCode::OK)
}

pub(super) async fn remove_node_labels(
    State(st): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Result<StatusCode, ApiError> {
    let labels = values(&raw, "labels");
    if labels.is_empty() {
        return Err(ApiError::bad_request(
            "name the labels to remove: ?labels=a&labels=b",
        ));
    }
    change(&st, &raw, LabelChange::RemoveLabels(labels)).await?;
    Ok(StatusCode::OK)
}

pub(super) async fn replace_node_to_labels(
    State(st): State<AppState>,
    RawQuery(raw): RawQuery,
    JsonBody(body): JsonBody<NodeToLabelsEntryList>,
) -> Result<StatusCode, ApiError> {
    let nodes = body
        .node_to_labels
        .into_iter()
        .map(|e| (e.node_id.trim().to_string(), e.labels))
        .collect();
    let fail_on_unknown = body.fail_on_unknown_nodes
        || values(&raw, "failOnUnknownNodes")
            .first()
            .map(String::as_str)
            == Some("true");
    change(
        &st,
        &raw,
        LabelChange::ReplaceNodeLabels {
            nodes,
            fail_on_unknown,
        },
    )
    .await?;
    Ok(StatusCode::OK)
}

pub(super) async fn get_node_to_labels(State(st): State<AppState>) -> Json<NodeToLabelsInfo> {
    let s = st.driver.snapshot().await;
    let node_to_labels = s
        .node_placement
        .iter()
        .filter(|(_, p)| !p.partition.is_empty())
        .map(|(id, p)| {
            (
                id.to_string(),
                label_info(&s, std::iter::once(p.partition.clone())),
            )
        })
        .collect();
    Json(NodeToLabelsInfo { node_to_labels })
}

pub(super) async fn label_mappings(
    State(st): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Json<LabelsToNodesInfo> {
    let s = st.driver.snapshot().await;
    let wanted = values(&raw, "labels");
    let mut out: BTreeMap<String, NodeIdsInfo> = BTreeMap::new();
    for (label, exclusive) in &s.labels.cluster {
        if !wanted.is_empty() && !wanted.contains(label) {
            continue;
        }
        let node_id = s
            .node_placement
            .iter()
            .filter(|(_, p)| p.partition == *label)
            .map(|(id, _)| id.to_string())
            .collect();
        out.insert(
            label.clone(),
            NodeIdsInfo {
                node_id,
                exclusivity: *exclusive,
            },
        );
    }
    Json(LabelsToNodesInfo {
        labels_to_nodes: out,
    })
}

fn known_node(s: &Snapshot, id: &str) -> Result<NodeId, ApiError> {
    s.nodes
        .keys()
        .find(|n| n.to_string() == id)
        .cloned()
        .ok_or_else(|| {
            ApiError::not_found(format!("node {id} is not known to the ResourceManager"))
        })
}

#[tracing::instrument(skip_all, fields(node_id = %nodeid))]
pub(super) async fn node_get_labels(
    State(st): State<AppState>,
    PathParams(nodeid): PathParams<String>,
) -> Result<Json<NodeLabelsInfo>, ApiError> {
    let s = st.driver.snapshot().await;
    let id = known_node(&s, &nodeid)?;
    let part = s
        .node_placement
        .get(&id)
        .map(|p| p.partition.clone())
        .unwrap_or_default();
    Ok(Json(label_info(
        &s,
        Some(part).filter(|p| !p.is_empty()).into_iter(),
    )))
}

#[tracing::instrument(skip_all, fields(node_id = %nodeid))]
pub(super) async fn node_replace_labels(
    State(st): State<AppState>,
    PathParams(nodeid): PathParams<String>,
    RawQuery(raw): RawQuery,
) -> Result<StatusCode, ApiError> {
    let s = st.driver.snapshot().await;
    let id = known_node(&s, &nodeid)?;
    let labels = values(&raw, "labels");
    change(
        &st,
        &raw,
        LabelChange::ReplaceNodeLabels {
            nodes: vec![(id.to_string(), labels)],
            fail_on_unknown: true,
        },
    )
    .await?;
    Ok(StatusCode::OK)
}

/// An attribute's wire form from its full name.
pub(in crate::rest) fn attribute_info(name: &str, value: &str) -> NodeAttributeInfo {
    let (prefix, bare) = name.rsplit_once('/').unwrap_or(("", name));
    NodeAttributeInfo {
        prefix: prefix.to_string(),
        name: bare.to_string(),
        attribute_type: "STRING".into(),
        value: value.to_string(),
    }
}

pub(super) async fn get_node_attributes(State(st): State<AppState>) -> Json<NodeAttributesInfo> {
    let s = st.driver.snapshot().await;
    let names: std::collections::BTreeSet<&String> = s
        .node_placement
        .values()
        .flat_map(|p| p.attributes.keys())
        .collect();
    Json(NodeAttributesInfo {
        node_attribute_info: names.into_iter().map(|n| attribute_info(n, "")).collect(),
    })
}

pub(super) async fn get_attributes_to_nodes(
    State(st): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Json<AttributesToNodesInfo> {
    let s = st.driver.snapshot().await;
    let wanted = values(&raw, "attributes");
    let mut out: BTreeMap<String, Vec<NodeToAttributeValue>> = BTreeMap::new();
    for (id, p) in &s.node_placement {
        for (k, v) in &p.attributes {
            if wanted.is_empty() || wanted.contains(k) {
                out.entry(k.clone())
                    .or_default()
                    .push(NodeToAttributeValue {
                        hostname: id.host.clone(),
                        attribute_value: v.clone(),
                    });
            }
        }
    }
    Json(AttributesToNodesInfo {
        attributes_to_nodes: out,
    })
}

pub(super) async fn get_node_to_attributes(
    State(st): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Json<NodeToAttributesInfo> {
    let s = st.driver.snapshot().await;
    let wanted = values(&raw, "hostnames");
    let mut out: BTreeMap<String, Vec<NodeAttributeInfo>> = BTreeMap::new();
    for (id, p) in &s.node_placement {
        if !wanted.is_empty() && !wanted.contains(&id.host) {
            continue;
        }
        let e = out.entry(id.host.clone()).or_default();
        for (k, v) in &p.attributes {
            let a = attribute_info(k, v);
            if !e.contains(&a) {
                e.push(a);
            }
        }
    }
    Json(NodeToAttributesInfo {
        node_to_attributes: out,
    })
}

pub(super) async fn node_attributes_mapping(
    State(st): State<AppState>,
    RawQuery(raw): RawQuery,
    JsonBody(body): JsonBody<NodesToAttributesMappingRequest>,
) -> Result<StatusCode, ApiError> {
    let op = match body.operation {
        AttributeMappingOperation::ADD => AttributeOp::Add,
        AttributeMappingOperation::REMOVE => AttributeOp::Remove,
        AttributeMappingOperation::REPLACE => AttributeOp::Replace,
    };
    let mut nodes = Vec::new();
    for n in body.nodes_to_attributes {
        let mut attrs = Vec::new();
        for a in n.node_attributes {
            if !a.attribute_type.is_empty() && a.attribute_type != "STRING" {
                return Err(ApiError::bad_request(format!(
                    "attribute {} has type {}: STRING is the only attribute type",
                    a.name, a.attribute_type
                )));
            }
            let name = if a.prefix.is_empty() {
                a.name
            } else {
                format!("{}/{}", a.prefix, a.name)
            };
            attrs.push((name, a.value));
        }
        nodes.push((n.node.trim().to_string(), attrs));
    }
    change(
        &st,
        &raw,
        LabelChange::Attributes {
            op,
            nodes,
            fail_on_unknown: body.fail_on_unknown_nodes,
        },
    )
    .await?;
    Ok(StatusCode::OK)
}
