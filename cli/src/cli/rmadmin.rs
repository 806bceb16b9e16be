//! `spindle rmadmin`, as `yarn rmadmin`: `-refreshQueues` (the RM re-reads
//! `capacity-scheduler.xml` from its configuration directory and applies it, or refuses it as
//! a whole, the running queues staying as they were, with the reason) and the node label
//! commands `-addToClusterNodeLabels`, `-removeFromClusterNodeLabels` and
//! `-replaceLabelsOnNode`, in RMAdminCLI's syntax.
//!
//! As RMAdminCLI: success prints nothing; the RM's refusal is `<command>: <message>` on
//! stderr with exit status 255 (YARN's -1).

use spindle_appmaster_sdk::ClientError;
use spindle_common::records::labels::{NodeLabelInfo, NodeToLabelsEntry, NodeToLabelsEntryList};

use super::args::{Opt, Parsed, UsageError};
use super::{parse_or_usage, rm_client, usage_error, EXIT_OK, EXIT_USAGE};

pub const USAGE: &str = "\
usage: spindle rmadmin COMMAND [--rm-address HOST:PORT] [--conf-dir DIR]
  -refreshQueues                  reload the queues from the RM's capacity-scheduler.xml
  -addToClusterNodeLabels \"label1(exclusive=true),label2(exclusive=false),label3\"
                                  add labels (partitions) to the cluster; exclusive defaults
                                  to true
  -removeFromClusterNodeLabels \"label1,label2\"
                                  remove labels from the cluster (refused while a queue or
                                  node still uses one)
  -replaceLabelsOnNode \"node1[:port]=label1 node2[:port]=label2\" [-failOnUnknownNodes]
                                  replace the labels of nodes (one label per node; `node=`
                                  clears it; a host without port means every NM on it;
                                  mappings may also be separated by `,`); with
                                  -failOnUnknownNodes a node the RM does not know fails the
                                  whole change
Every command is an admin operation (admins only when yarn.acl.enable is true) and prints
nothing on success.";

pub const OPTS: &[Opt] = &[
    Opt::flag("refreshQueues", &[]),
    Opt::one("addToClusterNodeLabels", &[]),
    Opt::one("removeFromClusterNodeLabels", &[]),
    Opt::one("replaceLabelsOnNode", &[]),
    Opt::flag("failOnUnknownNodes", &[]),
];

/// The commands, by option name (exactly one per call).
const COMMANDS: [&str; 4] = [
    "refreshQueues",
    "addToClusterNodeLabels",
    "removeFromClusterNodeLabels",
    "replaceLabelsOnNode",
];

/// What one `spindle rmadmin` call does.
#[derive(Debug, Clone, PartialEq)]
pub enum AdminCommand {
    RefreshQueues,
    AddLabels(Vec<NodeLabelInfo>),
    RemoveLabels(Vec<String>),
    ReplaceLabels(NodeToLabelsEntryList),
}

impl AdminCommand {
    /// RMAdminCLI's name, which prefixes its error messages.
    pub fn name(&self) -> &'static str {
        match self {
            AdminCommand::RefreshQueues => "refreshQueues",
            AdminCommand::AddLabels(_) => "addToClusterNodeLabels",
            AdminCommand::RemoveLabels(_) => "removeFromClusterNodeLabels",
            AdminCommand::ReplaceLabels(_) => "replaceLabelsOnNode",
        }
    }
}

/// YARN's label (and attribute value) pattern: `^[0-9a-zA-Z][0-9a-zA-Z-_]*`, at most 255.
pub fn check_label_name(label: &str) -> Result<(), String> {
    let mut chars = label.chars();
    let ok_first = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    let ok_rest = chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if label.is_empty() {
        return Err("empty label name".into());
    }
    if !ok_first || !ok_rest || label.len() > 255 {
        return Err(format!(
            "label name `{label}` is invalid: it must start with a letter or digit and hold \
             only letters, digits, `-` and `_` (at most 255)"
        ));
    }
    Ok(())
}

/// `-addToClusterNodeLabels "h100(exclusive=true),ib(exclusive=false),x"`.
pub fn parse_cluster_labels(arg: &str) -> Result<Vec<NodeLabelInfo>, String> {
    let mut out: Vec<NodeLabelInfo> = Vec::new();
    for item in arg.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, exclusivity) = match item.split_once('(') {
            None => (item, true),
            Some((name, rest)) => {
                let inner = rest.strip_suffix(')').ok_or_else(|| {
                    format!("`{item}`: expected label(exclusive=true|false), missing `)`")
                })?;
                let (k, v) = inner
                    .split_once('=')
                    .ok_or_else(|| format!("`{item}`: expected label(exclusive=true|false)"))?;
                if !k.trim().eq_ignore_ascii_case("exclusive") {
                    return Err(format!(
                        "`{item}`: unknown label attribute `{}`; only exclusive=true|false",
                        k.trim()
                    ));
                }
                let ex = match v.trim().to_ascii_lowercase().as_str() {
                    "true" => true,
                    "false" => false,
                    other => {
                        return Err(format!(
                            "`{item}`: exclusive must be true or false, not `{other}`"
                        ))
                    }
                };
                (name.trim(), ex)
            }
        };
        check_label_name(name).map_err(|e| format!("`{item}`: {e}"))?;
        if out.iter().any(|l| l.name == name) {
            return Err(format!("label `{name}` is given twice"));
        }
        out.push(NodeLabelInfo {
            name: name.to_string(),
            exclusivity,
        });
    }
    if out.is_empty() {
        return Err("no label given".into());
    }
    Ok(out)
}

/// `-removeFromClusterNodeLabels "a,b"`.
pub fn parse_label_names(arg: &str) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    for l in arg.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        check_label_name(l)?;
        if !out.iter().any(|o| o == l) {
            out.push(l.to_string());
        }
    }
    if out.is_empty() {
        return Err("no label given".into());
    }
    Ok(out)
}

/// A node in a mapping: `host` or `host:port`.
fn check_node(node: &str, mapping: &str) -> Result<(), String> {
    if node.is_empty() {
        return Err(format!("`{mapping}`: node name cannot be empty"));
    }
    if let Some((host, port)) = node.rsplit_once(':') {
        if host.is_empty() || port.parse::<u16>().is_err() {
            return Err(format!("`{mapping}`: `{node}` is not host or host:port"));
        }
    }
    Ok(())
}

/// `-replaceLabelsOnNode "node1[:port]=label1 node2=label2"`: mappings separated by spaces
/// (or newlines), or by `,` (`n1=a,n2=b`); `node=` or `node` alone clears the node's label;
/// RMAdminCLI's older `node,label` is read too. At most one label per node; a node given
/// twice keeps its last mapping.
pub fn parse_node_to_labels(
    arg: &str,
    fail_on_unknown_nodes: bool,
) -> Result<NodeToLabelsEntryList, String> {
    let mut entries: Vec<NodeToLabelsEntry> = Vec::new();
    let mut push = |node: &str, labels: Vec<String>, mapping: &str| -> Result<(), String> {
        check_node(node, mapping)?;
        if labels.len() > 1 {
            return Err(format!(
                "`{mapping}`: {} labels on node {node}; a node has at most one label",
                labels.len()
            ));
        }
        for l in &labels {
            check_label_name(l).map_err(|e| format!("`{mapping}`: {e}"))?;
        }
        entries.retain(|e| e.node_id != node);
        entries.push(NodeToLabelsEntry {
            node_id: node.to_string(),
            labels,
        });
        Ok(())
    };
    let labels_of = |s: &str| -> Vec<String> {
        s.split(',')
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect()
    };
    for token in arg.split_whitespace() {
        if token.starts_with('#') {
            continue;
        }
        match token.matches('=').count() {
            0 => match token.split_once(',') {
                // RMAdminCLI's `node,label`.
                Some((node, labels)) => push(node.trim(), labels_of(labels), token)?,
                None => push(token, Vec::new(), token)?,
            },
            1 => {
                let (node, labels) = token.split_once('=').unwrap_or((token, ""));
                push(node.trim(), labels_of(labels), token)?;
            }
            // `n1=a,n2=b`: mappings separated by commas.
            _ => {
                for m in token.split(',').filter(|m| !m.trim().is_empty()) {
                    let Some((node, label)) = m.split_once('=') else {
                        return Err(format!(
                            "`{token}`: `{m}` is not node=label (with several mappings \
                             separated by `,`, each needs its `=`)"
                        ));
                    };
                    push(node.trim(), labels_of(label), m)?;
                }
            }
        }
    }
    if entries.is_empty() {
        return Err(
            "no node-to-labels mapping given; expected \"node1[:port]=label1 node2=label2\"".into(),
        );
    }
    Ok(NodeToLabelsEntryList {
        node_to_labels: entries,
        fail_on_unknown_nodes,
    })
}

/// Which command the arguments ask for, its argument parsed.
pub fn command_from(p: &Parsed) -> Result<AdminCommand, UsageError> {
    let given: Vec<&str> = COMMANDS.iter().copied().filter(|c| p.has(c)).collect();
    let invalid = |option: &'static str, value: &str, reason: String| UsageError::Invalid {
        option,
        value: value.to_string(),
        reason,
    };
    match given.as_slice() {
        [] => Err(UsageError::Other(
            "give one of -refreshQueues, -addToClusterNodeLabels, \
             -removeFromClusterNodeLabels, -replaceLabelsOnNode"
                .into(),
        )),
        [one] => {
            if p.has("failOnUnknownNodes") && *one != "replaceLabelsOnNode" {
                return Err(UsageError::Other(
                    "-failOnUnknownNodes goes with -replaceLabelsOnNode".into(),
                ));
            }
            let v = p.value(one).unwrap_or_default();
            Ok(match *one {
                "refreshQueues" => AdminCommand::RefreshQueues,
                "addToClusterNodeLabels" => AdminCommand::AddLabels(
                    parse_cluster_labels(v).map_err(|r| invalid("addToClusterNodeLabels", v, r))?,
                ),
                "removeFromClusterNodeLabels" => AdminCommand::RemoveLabels(
                    parse_label_names(v)
                        .map_err(|r| invalid("removeFromClusterNodeLabels", v, r))?,
                ),
                _ => AdminCommand::ReplaceLabels(
                    parse_node_to_labels(v, p.has("failOnUnknownNodes"))
                        .map_err(|r| invalid("replaceLabelsOnNode", v, r))?,
                ),
            })
        }
        many => Err(UsageError::Other(format!(
            "give one command at a time, not -{}",
            many.join(" and -")
        ))),
    }
}

/// The RM's words for a refusal: its `RemoteException` message, else the error.
pub fn remote_message(e: &ClientError) -> String {
    match e.remote_exception() {
        Some(re) => re.message,
        None => e.to_string(),
    }
}

pub async fn run(args: Vec<String>) -> anyhow::Result<u8> {
    let Some(p) = parse_or_usage(&args, OPTS, USAGE)? else {
        return Ok(EXIT_OK);
    };
    let cmd = command_from(&p).map_err(|e| usage_error(e, USAGE))?;
    let rm = rm_client(&p)?;
    let result = match &cmd {
        AdminCommand::RefreshQueues => rm.refresh_queues().await.map(|version| {
            tracing::debug!(version, "queues refreshed");
        }),
        AdminCommand::AddLabels(labels) => rm.add_node_labels(labels).await,
        AdminCommand::RemoveLabels(labels) => rm.remove_node_labels(labels).await,
        AdminCommand::ReplaceLabels(mapping) => rm.replace_node_to_labels(mapping).await,
    };
    match result {
        Ok(()) => Ok(EXIT_OK),
        // YARN's RMAdminCLI: `<command>: <message>` on stderr, exit -1.
        Err(e) => {
            eprintln!("{}: {}", cmd.name(), remote_message(&e));
            Ok(EXIT_USAGE)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::args::parse;
    use super::*;

    fn label(name: &str, exclusivity: bool) -> NodeLabelInfo {
        NodeLabelInfo {
            name: name.into(),
            exclusivity,
        }
    }

    fn entry(node: &str, labels: &[&str]) -> NodeToLabelsEntry {
        NodeToLabelsEntry {
            node_id: node.into(),
            labels: labels.iter().map(|l| l.to_string()).collect(),
        }
    }

    #[test]
    fn cluster_labels_like_rmadmin() {
        assert_eq!(
            parse_cluster_labels("h100(exclusive=true),ib(exclusive=false),x"),
            Ok(vec![
                label("h100", true),
                label("ib", false),
                label("x", true)
            ])
        );
        assert_eq!(
            parse_cluster_labels(" gpu ( Exclusive = FALSE ) , "),
            Ok(vec![label("gpu", false)])
        );
        for bad in [
            "",
            " , ",
            "h100(exclusive=maybe)",
            "h100(shared=true)",
            "h100(exclusive=true",
            "h100(true)",
            "-x",
            "a b",
            "a,a",
            "(exclusive=true)",
        ] {
            assert!(parse_cluster_labels(bad).is_err(), "{bad}");
        }
        assert!(parse_cluster_labels("h100(exclusive=maybe)")
            .unwrap_err()
            .contains("exclusive must be true or false, not `maybe`"));
    }

    #[test]
    fn label_names() {
        assert_eq!(
            parse_label_names("a, b,,a"),
            Ok(vec!["a".to_string(), "b".to_string()])
        );
        assert!(parse_label_names(" ").is_err());
        assert!(parse_label_names("a,b!").is_err());
    }

    #[test]
    fn node_to_labels_like_rmadmin() {
        let m = parse_node_to_labels("h1:8041=h100 h2=ib\nh3= h4", true).expect("parses");
        assert!(m.fail_on_unknown_nodes);
        assert_eq!(
            m.node_to_labels,
            vec![
                entry("h1:8041", &["h100"]),
                entry("h2", &["ib"]),
                entry("h3", &[]),
                entry("h4", &[]),
            ]
        );
        // Mappings separated by commas, and RMAdminCLI's older `node,label`.
        let m = parse_node_to_labels("h1=a,h2=b h3,c", false).expect("parses");
        assert_eq!(
            m.node_to_labels,
            vec![
                entry("h1", &["a"]),
                entry("h2", &["b"]),
                entry("h3", &["c"])
            ]
        );
        // The last mapping of a node wins.
        let m = parse_node_to_labels("h1=a h1=b", false).expect("parses");
        assert_eq!(m.node_to_labels, vec![entry("h1", &["b"])]);
        for bad in [
            "", "  ", "=a", "h1=a,b", "h1:x=a", ":1=a", "h1=a,h2", "h1=a!",
        ] {
            assert!(parse_node_to_labels(bad, false).is_err(), "{bad}");
        }
        assert!(parse_node_to_labels("h1=a,b", false)
            .unwrap_err()
            .contains("a node has at most one label"));
    }

    fn parsed(a: &[&str]) -> Parsed {
        let all: Vec<Opt> = OPTS
            .iter()
            .chain(super::super::COMMON_OPTS.iter())
            .copied()
            .collect();
        parse(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>(), &all).expect("parses")
    }

    #[test]
    fn one_command_at_a_time() {
        assert_eq!(
            command_from(&parsed(&["-refreshQueues"])),
            Ok(AdminCommand::RefreshQueues)
        );
        assert_eq!(
            command_from(&parsed(&["-removeFromClusterNodeLabels", "a,b"])),
            Ok(AdminCommand::RemoveLabels(vec!["a".into(), "b".into()]))
        );
        let c = command_from(&parsed(&[
            "-replaceLabelsOnNode",
            "h1=a",
            "-failOnUnknownNodes",
        ]))
        .expect("good");
        assert_eq!(c.name(), "replaceLabelsOnNode");
        assert!(command_from(&parsed(&[])).is_err());
        assert!(
            command_from(&parsed(&["-refreshQueues", "-addToClusterNodeLabels", "a"])).is_err()
        );
        assert!(command_from(&parsed(&["-refreshQueues", "-failOnUnknownNodes"])).is_err());
        let e = command_from(&parsed(&["-addToClusterNodeLabels", "a(exclusive=no)"]))
            .expect_err("bad");
        assert!(e.to_string().contains("-addToClusterNodeLabels"), "{e}");
    }
}
