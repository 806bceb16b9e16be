//! `spindle nodeattributes`, as `yarn nodeattributes` (NodeAttributesCLI): centrally set
//! node attributes (`rm.yarn.io/`) added, removed or replaced, and the cluster's attributes
//! listed by key, by attribute (its nodes and values) and by node.
//!
//! Mapping syntax: `"node1:attr[(type)][=value],attr2 node2:attr3=v"`: mappings separated by
//! spaces (or newlines), a node's attributes by `,`. The only type is `STRING` (the default).
//! A name without prefix means `rm.yarn.io/`; `nm.yarn.io/` attributes belong to the
//! NodeManagers and are refused before any call.

use std::fmt::Write as _;

use anyhow::Context;
use spindle_common::records::labels::{
    AttributeMappingOperation, AttributesToNodesInfo, NodeAttributeInfo, NodeAttributesInfo,
    NodeToAttributes, NodeToAttributesInfo, NodesToAttributesMappingRequest, NM_ATTRIBUTE_PREFIX,
    RM_ATTRIBUTE_PREFIX,
};

use super::args::{Opt, Parsed, UsageError};
use super::rmadmin::remote_message;
use super::{parse_or_usage, rm_client, usage_error, EXIT_OK, EXIT_USAGE};

pub const USAGE: &str = "\
usage: spindle nodeattributes COMMAND [--rm-address HOST:PORT] [--conf-dir DIR]
  -add \"node1:attr[(type)][=value],attr2[=value] node2:attr3[=value]\" [-failOnUnknownNodes]
                          add attributes to nodes (or change their values)
  -remove \"node1:attr,attr2 node2:attr3\" [-failOnUnknownNodes]
                          remove attributes from nodes
  -replace \"node1:attr[(type)][=value],attr2 node2:\" [-failOnUnknownNodes]
                          replace every centrally set attribute of each node (node: alone
                          clears them)
  -list                   the attribute keys in the cluster, with their type
  -attributestonodes [-attributes rm.yarn.io/a,b]
                          each attribute's nodes and values (all attributes by default)
  -nodestoattributes [-nodes host1,host2]
                          each node's attributes (all nodes by default)
Nodes are host names (every NM on the host). The only type is STRING (the default). A name
without prefix means rm.yarn.io/; nm.yarn.io/ attributes are reported by NodeManagers and
cannot be set here. -add, -remove and -replace are admin operations and print nothing on
success.";

pub const OPTS: &[Opt] = &[
    Opt::one("add", &[]),
    Opt::one("remove", &[]),
    Opt::one("replace", &[]),
    Opt::flag("failOnUnknownNodes", &[]),
    Opt::flag("list", &[]),
    Opt::flag("attributestonodes", &[]),
    Opt::list("attributes", &[]),
    Opt::flag("nodestoattributes", &[]),
    Opt::list("nodes", &[]),
];

const COMMANDS: [&str; 6] = [
    "add",
    "remove",
    "replace",
    "list",
    "attributestonodes",
    "nodestoattributes",
];

/// What one `spindle nodeattributes` call does.
#[derive(Debug, Clone, PartialEq)]
pub enum AttributesCommand {
    Map(NodesToAttributesMappingRequest),
    List,
    AttributesToNodes(Vec<String>),
    NodesToAttributes(Vec<String>),
}

impl AttributesCommand {
    /// The option's name, which prefixes the RM's refusal.
    pub fn name(&self) -> &'static str {
        match self {
            AttributesCommand::Map(r) => match r.operation {
                AttributeMappingOperation::ADD => "add",
                AttributeMappingOperation::REMOVE => "remove",
                AttributeMappingOperation::REPLACE => "replace",
            },
            AttributesCommand::List => "list",
            AttributesCommand::AttributesToNodes(_) => "attributestonodes",
            AttributesCommand::NodesToAttributes(_) => "nodestoattributes",
        }
    }
}

/// `prefix/name` split, a bare name taking `rm.yarn.io`.
pub fn split_attribute_key(key: &str) -> (String, String) {
    match key.rsplit_once('/') {
        Some((prefix, name)) => (prefix.to_string(), name.to_string()),
        None => (RM_ATTRIBUTE_PREFIX.to_string(), key.to_string()),
    }
}

/// One attribute of a mapping: `attr[(type)][=value]`.
fn parse_attribute(
    s: &str,
    node: &str,
    op: AttributeMappingOperation,
) -> Result<NodeAttributeInfo, String> {
    let (key, value) = match s.split_once('=') {
        Some((k, v)) => (k.trim(), v.trim()),
        None => (s.trim(), ""),
    };
    let (name, attribute_type) = match key.find('(') {
        None => (key, "STRING".to_string()),
        Some(0) => {
            return Err(format!(
                "attribute for node {node} is not properly configured: `{s}`"
            ))
        }
        Some(open) => {
            let close = key.rfind(')').filter(|&c| c > open && c == key.len() - 1);
            let Some(close) = close else {
                return Err(format!(
                    "attribute for node {node} is not properly configured: `{s}`"
                ));
            };
            let t = key[open + 1..close].trim().to_ascii_uppercase();
            if t != "STRING" {
                return Err(format!(
                    "invalid attribute type `{}` in `{s}`; the only type is STRING",
                    &key[open + 1..close]
                ));
            }
            (key[..open].trim(), t)
        }
    };
    if name.is_empty() {
        return Err(format!(
            "attribute name cannot be empty (node {node}: `{s}`)"
        ));
    }
    let (prefix, bare) = split_attribute_key(name);
    if bare.is_empty() {
        return Err(format!(
            "attribute name cannot be empty (node {node}: `{s}`)"
        ));
    }
    if op != AttributeMappingOperation::REMOVE {
        if prefix == NM_ATTRIBUTE_PREFIX {
            return Err(format!(
                "`{name}` is a NodeManager attribute ({NM_ATTRIBUTE_PREFIX}/ is reported by the \
                 NodeManagers' configuration, script or device discovery); only \
                 {RM_ATTRIBUTE_PREFIX}/ attributes can be set centrally"
            ));
        }
        if prefix != RM_ATTRIBUTE_PREFIX {
            return Err(format!(
                "`{name}` has the prefix `{prefix}/`; only {RM_ATTRIBUTE_PREFIX}/ attributes \
                 can be set centrally (a name without prefix gets it)"
            ));
        }
    }
    Ok(NodeAttributeInfo {
        prefix,
        name: bare,
        attribute_type,
        value: if op == AttributeMappingOperation::REMOVE {
            String::new()
        } else {
            value.to_string()
        },
    })
}

/// `"node1:attr[(type)][=value],attr2 node2:attr3"` for `-add`, `-remove` or `-replace`.
/// `-add` and `-remove` need at least one attribute per node; `-replace` with `node:` alone
/// clears the node's attributes.
pub fn parse_mapping(
    arg: &str,
    operation: AttributeMappingOperation,
    fail_on_unknown_nodes: bool,
) -> Result<NodesToAttributesMappingRequest, String> {
    let mut nodes: Vec<NodeToAttributes> = Vec::new();
    for token in arg.split_whitespace() {
        if token.starts_with('#') {
            continue;
        }
        let Some((node, attrs)) = token.split_once(':') else {
            return Err(format!(
                "`{token}` is not node:attr[(type)][=value][,attr...]"
            ));
        };
        let node = node.trim();
        if node.is_empty() {
            return Err(format!("`{token}`: node name cannot be empty"));
        }
        if nodes.iter().any(|n| n.node == node) {
            return Err(format!("node {node} is given twice"));
        }
        let mut list: Vec<NodeAttributeInfo> = Vec::new();
        for a in attrs.split(',').filter(|a| !a.trim().is_empty()) {
            let attr = parse_attribute(a, node, operation)?;
            if list
                .iter()
                .any(|x| x.prefix == attr.prefix && x.name == attr.name)
            {
                return Err(format!(
                    "attribute {}/{} is mapped more than once in `{token}`",
                    attr.prefix, attr.name
                ));
            }
            list.push(attr);
        }
        if list.is_empty() && operation != AttributeMappingOperation::REPLACE {
            return Err(format!("no attribute given for node {node} in `{token}`"));
        }
        nodes.push(NodeToAttributes {
            node: node.to_string(),
            node_attributes: list,
        });
    }
    if nodes.is_empty() {
        return Err(
            "no node-to-attributes mapping given; expected \"node1:attr=value node2:attr2\"".into(),
        );
    }
    Ok(NodesToAttributesMappingRequest {
        operation,
        nodes_to_attributes: nodes,
        fail_on_unknown_nodes,
    })
}

/// Which command the arguments ask for, its argument parsed.
pub fn command_from(p: &Parsed) -> Result<AttributesCommand, UsageError> {
    let given: Vec<&str> = COMMANDS.iter().copied().filter(|c| p.has(c)).collect();
    let [one] = given.as_slice() else {
        return Err(UsageError::Other(if given.is_empty() {
            "give one of -add, -remove, -replace, -list, -attributestonodes, -nodestoattributes"
                .into()
        } else {
            format!("give one command at a time, not -{}", given.join(" and -"))
        }));
    };
    let mapping = matches!(*one, "add" | "remove" | "replace");
    if p.has("failOnUnknownNodes") && !mapping {
        return Err(UsageError::Other(
            "-failOnUnknownNodes goes with -add, -remove or -replace".into(),
        ));
    }
    if p.has("attributes") && *one != "attributestonodes" {
        return Err(UsageError::Other(
            "-attributes goes with -attributestonodes".into(),
        ));
    }
    if p.has("nodes") && *one != "nodestoattributes" {
        return Err(UsageError::Other(
            "-nodes goes with -nodestoattributes".into(),
        ));
    }
    let map = |option: &'static str, op| {
        let v = p.value(option).unwrap_or_default();
        parse_mapping(v, op, p.has("failOnUnknownNodes"))
            .map(AttributesCommand::Map)
            .map_err(|reason| UsageError::Invalid {
                option,
                value: v.to_string(),
                reason,
            })
    };
    match *one {
        "add" => map("add", AttributeMappingOperation::ADD),
        "remove" => map("remove", AttributeMappingOperation::REMOVE),
        "replace" => map("replace", AttributeMappingOperation::REPLACE),
        "list" => Ok(AttributesCommand::List),
        "attributestonodes" => Ok(AttributesCommand::AttributesToNodes(
            p.values("attributes")
                .iter()
                .map(|a| {
                    let (prefix, name) = split_attribute_key(a);
                    format!("{prefix}/{name}")
                })
                .collect(),
        )),
        _ => Ok(AttributesCommand::NodesToAttributes(
            p.values("nodes").to_vec(),
        )),
    }
}

/// `prefix/name(TYPE)=value`, as YARN prints a node attribute.
pub fn attribute_text(a: &NodeAttributeInfo) -> String {
    let t = if a.attribute_type.is_empty() {
        "STRING"
    } else {
        &a.attribute_type
    };
    format!("{}/{}({t})={}", a.prefix, a.name, a.value)
}

/// `-list`: NodeAttributesCLI's `%40s\t%20s` table of key and type.
pub fn format_attribute_list(info: &NodeAttributesInfo) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{:>40}\t{:>20}", "Attribute", "Type");
    for a in &info.node_attribute_info {
        let t = if a.attribute_type.is_empty() {
            "STRING"
        } else {
            &a.attribute_type
        };
        let _ = writeln!(s, "{:>40}\t{:>20}", format!("{}/{}", a.prefix, a.name), t);
    }
    s
}

/// `-attributestonodes`: for each attribute, `key :` then a `%40s\t%20s` table of hostname
/// and value.
pub fn format_attributes_to_nodes(info: &AttributesToNodesInfo) -> String {
    let mut s = String::new();
    for (key, nodes) in &info.attributes_to_nodes {
        let _ = writeln!(s, "{key} :");
        let _ = writeln!(s, "{:>40}\t{:>20}", "Hostname", "Attribute-value");
        for n in nodes {
            let _ = writeln!(s, "{:>40}\t{:>20}", n.hostname, n.attribute_value);
        }
    }
    s
}

/// `-nodestoattributes`: a `%40s\t%s` table of hostname and its attributes
/// (`prefix/name(TYPE)=value`, comma-separated).
pub fn format_nodes_to_attributes(info: &NodeToAttributesInfo) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{:>40}\tNode-attributes", "Hostname");
    for (host, attrs) in &info.node_to_attributes {
        let list: Vec<String> = attrs.iter().map(attribute_text).collect();
        let _ = writeln!(s, "{host:>40}\t{}", list.join(","));
    }
    s
}

pub async fn run(args: Vec<String>) -> anyhow::Result<u8> {
    let Some(p) = parse_or_usage(&args, OPTS, USAGE)? else {
        return Ok(EXIT_OK);
    };
    let cmd = command_from(&p).map_err(|e| usage_error(e, USAGE))?;
    let rm = rm_client(&p)?;
    let at = || format!("cannot read node attributes at {}", rm.address());
    match &cmd {
        AttributesCommand::Map(req) => match rm.map_node_attributes(req).await {
            Ok(()) => Ok(EXIT_OK),
            Err(e) => {
                eprintln!("{}: {}", cmd.name(), remote_message(&e));
                Ok(EXIT_USAGE)
            }
        },
        AttributesCommand::List => {
            let info = rm.node_attributes().await.with_context(at)?;
            say_raw!("{}", format_attribute_list(&info));
            Ok(EXIT_OK)
        }
        AttributesCommand::AttributesToNodes(keys) => {
            let info = rm.attributes_to_nodes(keys).await.with_context(at)?;
            say_raw!("{}", format_attributes_to_nodes(&info));
            Ok(EXIT_OK)
        }
        AttributesCommand::NodesToAttributes(hosts) => {
            let info = rm.node_to_attributes(hosts).await.with_context(at)?;
            say_raw!("{}", format_nodes_to_attributes(&info));
            Ok(EXIT_OK)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use spindle_common::records::labels::NodeToAttributeValue;

    use super::*;

    fn attr(name: &str, value: &str) -> NodeAttributeInfo {
        NodeAttributeInfo {
            prefix: "rm.yarn.io".into(),
            name: name.into(),
            attribute_type: "STRING".into(),
            value: value.into(),
        }
    }

    #[test]
    fn mappings_like_node_attributes_cli() {
        let r = parse_mapping(
            "node1:os(string)=ubuntu,rm.yarn.io/py=3 node2:java",
            AttributeMappingOperation::ADD,
            true,
        )
        .expect("parses");
        assert_eq!(r.operation, AttributeMappingOperation::ADD);
        assert!(r.fail_on_unknown_nodes);
        assert_eq!(
            r.nodes_to_attributes,
            vec![
                NodeToAttributes {
                    node: "node1".into(),
                    node_attributes: vec![attr("os", "ubuntu"), attr("py", "3")],
                },
                NodeToAttributes {
                    node: "node2".into(),
                    node_attributes: vec![attr("java", "")],
                },
            ]
        );
        // Remove ignores values; replace may clear a node.
        let r =
            parse_mapping("n1:os=x,py", AttributeMappingOperation::REMOVE, false).expect("parses");
        assert_eq!(
            r.nodes_to_attributes[0].node_attributes,
            vec![attr("os", ""), attr("py", "")]
        );
        let r = parse_mapping("n1:", AttributeMappingOperation::REPLACE, false).expect("parses");
        assert!(r.nodes_to_attributes[0].node_attributes.is_empty());
    }

    #[test]
    fn bad_mappings_are_named() {
        use AttributeMappingOperation::*;
        for (bad, op) in [
            ("", ADD),
            ("node1", ADD),
            (":os=x", ADD),
            ("n1:", ADD),
            ("n1:", REMOVE),
            ("n1:(STRING)=x", ADD),
            ("n1:os(INT)=1", ADD),
            ("n1:os(STRING=1", ADD),
            ("n1:os=a,os=b", ADD),
            ("n1:a n1:b", ADD),
            ("n1:=x", ADD),
            ("n1:nm.yarn.io/gpu=1", ADD),
            ("n1:nm.yarn.io/gpu=1", REPLACE),
            ("n1:example.com/x=1", ADD),
        ] {
            assert!(parse_mapping(bad, op, false).is_err(), "{bad} {op:?}");
        }
        let e = parse_mapping("n1:nm.yarn.io/gpu-count=8", ADD, false).expect_err("refused");
        assert!(e.contains("is a NodeManager attribute"), "{e}");
        assert!(
            e.contains("only rm.yarn.io/ attributes can be set centrally"),
            "{e}"
        );
        let e = parse_mapping("n1:os(INT)=1", ADD, false).expect_err("refused");
        assert!(e.contains("the only type is STRING"), "{e}");
    }

    fn parsed(a: &[&str]) -> Parsed {
        super::super::parse_with_common(OPTS, a).expect("parses")
    }

    #[test]
    fn commands() {
        assert_eq!(
            command_from(&parsed(&["-list"])),
            Ok(AttributesCommand::List)
        );
        assert_eq!(
            command_from(&parsed(&[
                "-attributestonodes",
                "-attributes",
                "os,nm.yarn.io/gpu-model"
            ])),
            Ok(AttributesCommand::AttributesToNodes(vec![
                "rm.yarn.io/os".into(),
                "nm.yarn.io/gpu-model".into()
            ]))
        );
        assert_eq!(
            command_from(&parsed(&["-nodestoattributes", "-nodes", "h1,h2"])),
            Ok(AttributesCommand::NodesToAttributes(vec![
                "h1".into(),
                "h2".into()
            ]))
        );
        let c =
            command_from(&parsed(&["-replace", "h1:os=x", "-failOnUnknownNodes"])).expect("good");
        assert_eq!(c.name(), "replace");
        for bad in [
            &[][..],
            &["-list", "-add", "h:a"],
            &["-list", "-failOnUnknownNodes"],
            &["-list", "-nodes", "h1"],
            &["-nodestoattributes", "-attributes", "a"],
            &["-add", "h1:nm.yarn.io/x=1"],
        ] {
            assert!(command_from(&parsed(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn tables() {
        let info = NodeAttributesInfo {
            node_attribute_info: vec![NodeAttributeInfo {
                prefix: "rm.yarn.io".into(),
                name: "os".into(),
                attribute_type: "STRING".into(),
                value: String::new(),
            }],
        };
        assert_eq!(
            format_attribute_list(&info),
            format!(
                "{:>40}\t{:>20}\n{:>40}\t{:>20}\n",
                "Attribute", "Type", "rm.yarn.io/os", "STRING"
            )
        );
        let a2n = AttributesToNodesInfo {
            attributes_to_nodes: BTreeMap::from([(
                "rm.yarn.io/os".to_string(),
                vec![NodeToAttributeValue {
                    hostname: "h1".into(),
                    attribute_value: "ubuntu".into(),
                }],
            )]),
        };
        let t = format_attributes_to_nodes(&a2n);
        assert!(t.starts_with("rm.yarn.io/os :\n"), "{t}");
        assert!(
            t.ends_with(&format!("{:>40}\t{:>20}\n", "h1", "ubuntu")),
            "{t}"
        );
        let n2a = NodeToAttributesInfo {
            node_to_attributes: BTreeMap::from([(
                "h1".to_string(),
                vec![attr("os", "ubuntu"), attr("py", "3")],
            )]),
        };
        assert_eq!(
            format_nodes_to_attributes(&n2a),
            format!(
                "{:>40}\tNode-attributes\n{:>40}\trm.yarn.io/os(STRING)=ubuntu,rm.yarn.io/py(STRING)=3\n",
                "Hostname", "h1"
            )
        );
    }
}
