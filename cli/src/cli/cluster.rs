//! `spindle cluster`, as `yarn cluster` (ClusterCLI): `-lnl` lists the cluster's node labels,
//! `-lna` its node attributes.

use anyhow::Context;
use spindle_common::records::labels::{NodeAttributeInfo, NodeLabelInfo};

use super::args::{Opt, UsageError};
use super::{parse_or_usage, rm_client, usage_error, EXIT_OK};

pub const USAGE: &str = "\
usage: spindle cluster -lnl | -lna [--rm-address HOST:PORT] [--conf-dir DIR]
  -lnl, --list-node-labels      the cluster's node labels, with their exclusivity
  -lna, --list-node-attributes  the cluster's node attribute keys, with their type";

pub const OPTS: &[Opt] = &[
    Opt::flag("list-node-labels", &["lnl"]),
    Opt::flag("list-node-attributes", &["lna"]),
];

/// ClusterCLI's line: `Node Labels: <h100:exclusivity=true>,<ib:exclusivity=false>`.
pub fn format_node_labels(labels: &[NodeLabelInfo]) -> String {
    let items: Vec<String> = labels
        .iter()
        .map(|l| format!("<{}:exclusivity={}>", l.name, l.exclusivity))
        .collect();
    format!("Node Labels: {}", items.join(","))
}

/// ClusterCLI's `-lna`: one `prefix/name(TYPE)` per line.
pub fn format_node_attributes(attrs: &[NodeAttributeInfo]) -> String {
    attrs
        .iter()
        .map(|a| {
            let t = if a.attribute_type.is_empty() {
                "STRING"
            } else {
                &a.attribute_type
            };
            format!("{}/{}({t})\n", a.prefix, a.name)
        })
        .collect()
}

pub async fn run(args: Vec<String>) -> anyhow::Result<u8> {
    let Some(p) = parse_or_usage(&args, OPTS, USAGE)? else {
        return Ok(EXIT_OK);
    };
    let (labels, attributes) = (p.has("list-node-labels"), p.has("list-node-attributes"));
    if !labels && !attributes {
        return Err(usage_error(
            UsageError::Other(
                "give -lnl (--list-node-labels) or -lna (--list-node-attributes)".into(),
            ),
            USAGE,
        ));
    }
    let rm = rm_client(&p)?;
    if labels {
        let l = rm
            .node_labels()
            .await
            .with_context(|| format!("cannot read the node labels at {}", rm.address()))?;
        say!("{}", format_node_labels(&l));
    }
    if attributes {
        let a = rm
            .node_attributes()
            .await
            .with_context(|| format!("cannot read the node attributes at {}", rm.address()))?;
        say_raw!("{}", format_node_attributes(&a.node_attribute_info));
    }
    Ok(EXIT_OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_cluster_cli() {
        let labels = [
            NodeLabelInfo {
                name: "h100".into(),
                exclusivity: true,
            },
            NodeLabelInfo {
                name: "ib".into(),
                exclusivity: false,
            },
        ];
        assert_eq!(
            format_node_labels(&labels),
            "Node Labels: <h100:exclusivity=true>,<ib:exclusivity=false>"
        );
        assert_eq!(format_node_labels(&[]), "Node Labels: ");
        let a = NodeAttributeInfo {
            prefix: "rm.yarn.io".into(),
            name: "os".into(),
            attribute_type: String::new(),
            value: String::new(),
        };
        assert_eq!(format_node_attributes(&[a]), "rm.yarn.io/os(STRING)\n");
    }
}
