//! Node labels (partitions), node attributes and placement constraints on the wire: the
//! bodies of YARN's label endpoints (`/ws/v1/cluster/get-node-labels`, `add-node-labels`,
//! `replace-node-to-labels`, ...), Spindle's node-attribute endpoints (YARN's
//! `NodesToAttributesMappingRequest` as JSON) and the placement constraint an ask carries
//! (YARN's `PlacementConstraint`, as a tagged tree).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The centrally set attributes' prefix (`spindle nodeattributes`, REST).
pub const RM_ATTRIBUTE_PREFIX: &str = "rm.yarn.io";
/// The NM-reported attributes' prefix (configuration, script, device discovery).
pub const NM_ATTRIBUTE_PREFIX: &str = "nm.yarn.io";

/// One cluster label: YARN's `NodeLabelInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeLabelInfo {
    pub name: String,
    /// Exclusive (the default): only requests for this label run on its nodes.
    /// Non-exclusive: its idle resources are lent to default-partition requests.
    #[serde(default = "yes")]
    pub exclusivity: bool,
}

fn yes() -> bool {
    true
}

/// YARN's `NodeLabelsInfo`: `{"nodeLabelInfo": [...]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NodeLabelsInfo {
    pub node_label_info: Vec<NodeLabelInfo>,
}

/// `GET /get-node-labels`: `{"nodeLabelsInfo": {"nodeLabelInfo": [...]}}`; `POST
/// /add-node-labels` takes it too, or the inner object alone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeLabelsEnvelope {
    pub node_labels_info: NodeLabelsInfo,
}

/// What `add-node-labels` accepts: YARN's root-wrapped form or the bare list object.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum NodeLabelsBody {
    Wrapped(NodeLabelsEnvelope),
    Bare(NodeLabelsInfo),
}

impl NodeLabelsBody {
    pub fn into_labels(self) -> Vec<NodeLabelInfo> {
        match self {
            NodeLabelsBody::Wrapped(w) => w.node_labels_info.node_label_info,
            NodeLabelsBody::Bare(b) => b.node_label_info,
        }
    }
}

/// One node's labels: YARN's `NodeToLabelsEntry`. `nodeId` is `host:port`, or a host alone
/// for every NM on it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NodeToLabelsEntry {
    pub node_id: String,
    pub labels: Vec<String>,
}

/// `POST /replace-node-to-labels`: YARN's `NodeToLabelsEntryList`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NodeToLabelsEntryList {
    pub node_to_labels: Vec<NodeToLabelsEntry>,
    /// Refuse the whole change if a node is not known to the RM (`-failOnUnknownNodes`).
    pub fail_on_unknown_nodes: bool,
}

/// `GET /get-node-to-labels`: node id to its labels (YARN's `NodeToLabelsInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NodeToLabelsInfo {
    pub node_to_labels: BTreeMap<String, NodeLabelsInfo>,
}

/// The nodes of one label (YARN's `NodeIDsInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NodeIdsInfo {
    pub node_id: Vec<String>,
    pub exclusivity: bool,
}

/// `GET /label-mappings`: label to its nodes (YARN's `LabelsToNodesInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LabelsToNodesInfo {
    pub labels_to_nodes: BTreeMap<String, NodeIdsInfo>,
}

/// One node attribute: YARN's `NodeAttributeInfo` (`type` is always `STRING`, the only type
/// YARN has).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NodeAttributeInfo {
    pub prefix: String,
    pub name: String,
    #[serde(rename = "type")]
    pub attribute_type: String,
    pub value: String,
}

/// `{"nodeAttributeInfo": [...]}`: a node's attributes in `/nodes` (`nodeAttributesInfo`),
/// and the cluster's attribute names in `GET /get-node-attributes`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NodeAttributesInfo {
    pub node_attribute_info: Vec<NodeAttributeInfo>,
}

/// YARN's `AttributeMappingOperationType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[allow(non_camel_case_types)]
pub enum AttributeMappingOperation {
    /// Replace every centrally set attribute of each named node with the given ones.
    #[default]
    REPLACE,
    /// Add (or change the value of) the given attributes.
    ADD,
    /// Remove the given attributes (values are ignored).
    REMOVE,
}

/// One node's side of a mapping request (YARN's `NodeToAttributes`): `node` is a host name
/// (every NM on it) or `host:port`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NodeToAttributes {
    pub node: String,
    pub node_attributes: Vec<NodeAttributeInfo>,
}

/// `POST /node-attributes-mapping`: YARN's `NodesToAttributesMappingRequest`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NodesToAttributesMappingRequest {
    pub operation: AttributeMappingOperation,
    pub nodes_to_attributes: Vec<NodeToAttributes>,
    pub fail_on_unknown_nodes: bool,
}

/// A node and its value of one attribute (YARN's `NodeToAttributeValue`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NodeToAttributeValue {
    pub hostname: String,
    pub attribute_value: String,
}

/// `GET /get-attributes-to-nodes[?attributes=prefix/name,...]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AttributesToNodesInfo {
    pub attributes_to_nodes: BTreeMap<String, Vec<NodeToAttributeValue>>,
}

/// `GET /get-node-to-attributes[?hostnames=h1,h2]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NodeToAttributesInfo {
    pub node_to_attributes: BTreeMap<String, Vec<NodeAttributeInfo>>,
}

/// Where a tag constraint counts containers: YARN's `PlacementConstraints.NODE` / `RACK`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[allow(non_camel_case_types)]
pub enum ConstraintScope {
    #[default]
    NODE,
    RACK,
}

/// A node attribute test's operator (YARN's `NodeAttributeOpCode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[allow(non_camel_case_types)]
pub enum AttributeOp {
    /// The node has the attribute with one of the values.
    #[default]
    EQ,
    /// The node lacks the attribute or has another value.
    NE,
}

/// An ask's placement constraint: YARN's `PlacementConstraint` tree. Tags are written with
/// YARN's namespaces: `zk` (this application, `self/`), `not-self/zk`, `all/zk`,
/// `app-id/<applicationId>/zk`, `app-tag/<applicationTag>/zk`. Attribute names carry their
/// prefix (`rm.yarn.io/os`, `nm.yarn.io/gpu-model`); a bare name means `rm.yarn.io/`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
#[allow(non_camel_case_types)]
pub enum PlacementConstraintInfo {
    /// Only where `scope` already holds a container tagged `tag` (affinity).
    IN { scope: ConstraintScope, tag: String },
    /// Never where `scope` holds a container tagged `tag` (anti-affinity).
    NOTIN { scope: ConstraintScope, tag: String },
    /// Where `scope` holds between `minCardinality` and `maxCardinality` containers tagged
    /// `tag`, counting the new one's own tags when they match.
    CARDINALITY {
        scope: ConstraintScope,
        tag: String,
        #[serde(rename = "minCardinality", default)]
        min_cardinality: u32,
        #[serde(rename = "maxCardinality")]
        max_cardinality: u32,
    },
    /// A node attribute test.
    NODE_ATTRIBUTE {
        name: String,
        op: AttributeOp,
        values: Vec<String>,
    },
    AND {
        children: Vec<PlacementConstraintInfo>,
    },
    OR {
        children: Vec<PlacementConstraintInfo>,
    },
}
