//! `spindle rmadmin`, as `yarn rmadmin`: `-refreshQueues` (the RM re-reads
//! `capacity-scheduler.xml` from its configuration directory and applies it, or refuses it as
//! a whole, the running queues staying as they were, with the reason) and the node label
//! commands `-addToClusterNodeLabels`, `-removeFromClusterNodeLabels` and
//! `-replaceLabelsOnNode`, in RMAdminCLI's syntax; `-refreshNodes [-g|-graceful [TIMEOUT]
//! [-client|-server]]` (the RM re-reads its include and exclude host files and
//! decommissions, at once or gracefully, the nodes they now keep out) and `-getGroups
//! [USER...]` (`user : group1 group2`, as the RM resolves them).
//!
//! As RMAdminCLI, the RM's refusal is `<command>: <message>` on stderr with exit status 255
//! (YARN's -1); success prints nothing, but `-refreshQueues`, which prints each property
//! that changed (`old -> new`) and, on stderr, each unknown key the RM ignored.

use std::time::{Duration, Instant};

use spindle_appmaster_sdk::{ClientError, RmClient};
use spindle_common::records::admin::DecommissionType;
use spindle_common::records::labels::{NodeLabelInfo, NodeToLabelsEntry, NodeToLabelsEntryList};

use super::args::{Opt, Parsed, UsageError};
pub use super::rmadmin_ha::HaCommand;
use super::{parse_or_usage, rm_client, usage_error, EXIT_OK, EXIT_USAGE};

pub const USAGE: &str = "\
usage: spindle rmadmin COMMAND [--rm-address HOST:PORT] [--conf-dir DIR]
  -refreshQueues                  reload the queues from the RM's capacity-scheduler.xml
  -refreshNodes [-g|-graceful [TIMEOUT] [-client|-server]]
                                  re-read the host files (yarn.resourcemanager.nodes.
                                  include-path / exclude-path) and decommission the nodes
                                  they now keep out: at once (their containers are killed),
                                  or with -g gracefully: DECOMMISSIONING nodes take no new
                                  containers and turn DECOMMISSIONED when their containers
                                  are done, or after TIMEOUT seconds (default yarn.
                                  resourcemanager.nodemanager-graceful-decommission-
                                  timeout-secs, 3600; negative: none), when what is left is
                                  killed. -server (the default): the RM tracks the timeout;
                                  -client: this command waits and decommissions at once when
                                  TIMEOUT passes (none: waits until done). Nodes taken off
                                  the exclude list while DECOMMISSIONING are recommissioned
  -getGroups [USER...]            the groups of each user (default: you) as the RM resolves
                                  them, as `user : group1 group2`
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
  -getServiceState <serviceId>    the HA state of one RM of yarn.resourcemanager.ha.rm-ids:
                                  active or standby
  -getAllServiceState             every RM's address and HA state, one per line
  -transitionToActive [--forcemanual] <serviceId>
  -transitionToStandby [--forcemanual] <serviceId>
                                  make an RM active or standby; refused under automatic
                                  failover (yarn.resourcemanager.ha.automatic-failover.
                                  enabled, the default) unless --forcemanual. A forced
                                  -transitionToStandby of the active releases its leadership
                                  at once and the other RM takes over
The HA commands read the RM ids and addresses (yarn.resourcemanager.webapp.address.<id>)
from the conf dir and ask each RM itself.
Every command but -getGroups is an admin operation (admins only when yarn.acl.enable is
true) and prints nothing on success.";

pub const OPTS: &[Opt] = &[
    Opt::flag("refreshQueues", &[]),
    Opt::one("addToClusterNodeLabels", &[]),
    Opt::one("removeFromClusterNodeLabels", &[]),
    Opt::one("replaceLabelsOnNode", &[]),
    Opt::flag("failOnUnknownNodes", &[]),
    Opt::flag("refreshNodes", &[]),
    Opt::flag("graceful", &["g"]),
    Opt::flag("client", &[]),
    Opt::flag("server", &[]),
    Opt::flag("getGroups", &[]),
    Opt::one("getServiceState", &[]),
    Opt::flag("getAllServiceState", &[]),
    Opt::flag("transitionToActive", &[]),
    Opt::flag("transitionToStandby", &[]),
    Opt::flag("forcemanual", &[]),
];

/// The commands, by option name (exactly one per call).
const COMMANDS: [&str; 10] = [
    "refreshQueues",
    "addToClusterNodeLabels",
    "removeFromClusterNodeLabels",
    "replaceLabelsOnNode",
    "refreshNodes",
    "getGroups",
    "getServiceState",
    "getAllServiceState",
    "transitionToActive",
    "transitionToStandby",
];

/// Who waits out a graceful decommission's timeout (RMAdminCLI's `-client|-server`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tracking {
    /// The RM: the command returns at once.
    Server,
    /// This command: it waits for the nodes, and decommissions them at once (FORCEFUL) when
    /// the timeout passes.
    Client,
}

/// `-refreshNodes -g [TIMEOUT] [-client|-server]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Graceful {
    /// Seconds; `None`: the RM's default (`-server`) or no limit (`-client`).
    pub timeout_secs: Option<i64>,
    pub tracking: Tracking,
}

/// What one `spindle rmadmin` call does.
#[derive(Debug, Clone, PartialEq)]
pub enum AdminCommand {
    RefreshQueues,
    AddLabels(Vec<NodeLabelInfo>),
    RemoveLabels(Vec<String>),
    ReplaceLabels(NodeToLabelsEntryList),
    /// `None`: at once.
    RefreshNodes(Option<Graceful>),
    /// The users (none: the caller).
    GetGroups(Vec<String>),
    /// The HA commands ([`super::rmadmin_ha`]).
    Ha(HaCommand),
}

impl AdminCommand {
    /// RMAdminCLI's name, which prefixes its error messages.
    pub fn name(&self) -> &'static str {
        match self {
            AdminCommand::RefreshQueues => "refreshQueues",
            AdminCommand::AddLabels(_) => "addToClusterNodeLabels",
            AdminCommand::RemoveLabels(_) => "removeFromClusterNodeLabels",
            AdminCommand::ReplaceLabels(_) => "replaceLabelsOnNode",
            AdminCommand::RefreshNodes(_) => "refreshNodes",
            AdminCommand::GetGroups(_) => "getGroups",
            AdminCommand::Ha(h) => h.name(),
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
            "give one of -refreshQueues, -refreshNodes, -getGroups, -addToClusterNodeLabels, \
             -removeFromClusterNodeLabels, -replaceLabelsOnNode, -getServiceState, \
             -getAllServiceState, -transitionToActive, -transitionToStandby"
                .into(),
        )),
        [one] if HaCommand::NAMES.contains(one) => HaCommand::from(p, one).map(AdminCommand::Ha),
        [one] => {
            if p.has("forcemanual") {
                return Err(UsageError::Other(
                    "--forcemanual goes with -transitionToActive or -transitionToStandby".into(),
                ));
            }
            if p.has("failOnUnknownNodes") && *one != "replaceLabelsOnNode" {
                return Err(UsageError::Other(
                    "-failOnUnknownNodes goes with -replaceLabelsOnNode".into(),
                ));
            }
            if *one != "refreshNodes" {
                if let Some(o) = ["graceful", "client", "server"]
                    .into_iter()
                    .find(|o| p.has(o))
                {
                    return Err(UsageError::Other(format!("-{o} goes with -refreshNodes")));
                }
            }
            if *one != "getGroups" && *one != "refreshNodes" && !p.positionals.is_empty() {
                return Err(UsageError::Other(format!(
                    "unexpected argument '{}' for -{one}",
                    p.positionals[0]
                )));
            }
            if *one == "refreshNodes" {
                return refresh_nodes_from(p).map(AdminCommand::RefreshNodes);
            }
            if *one == "getGroups" {
                return Ok(AdminCommand::GetGroups(p.positionals.clone()));
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

/// `-refreshNodes [-g [TIMEOUT] [-client|-server]]`.
fn refresh_nodes_from(p: &Parsed) -> Result<Option<Graceful>, UsageError> {
    let graceful = p.has("graceful");
    if !graceful {
        if let Some(o) = ["client", "server"].into_iter().find(|o| p.has(o)) {
            return Err(UsageError::Other(format!(
                "-{o} goes with -refreshNodes -g"
            )));
        }
        if let Some(a) = p.positionals.first() {
            return Err(UsageError::Other(format!(
                "unexpected argument '{a}' for -refreshNodes (a timeout goes after -g)"
            )));
        }
        return Ok(None);
    }
    if p.has("client") && p.has("server") {
        return Err(UsageError::Other(
            "give -client or -server, not both".into(),
        ));
    }
    let timeout_secs = match p.positionals.as_slice() {
        [] => None,
        [t] => Some(t.trim().parse::<i64>().map_err(|_| UsageError::Invalid {
            option: "graceful",
            value: t.clone(),
            reason: "the timeout is a number of seconds (negative: none)".into(),
        })?),
        [_, extra, ..] => {
            return Err(UsageError::Other(format!(
                "unexpected argument '{extra}' for -refreshNodes -g"
            )))
        }
    };
    let tracking = if p.has("client") {
        Tracking::Client
    } else {
        Tracking::Server
    };
    Ok(Some(Graceful {
        timeout_secs,
        tracking,
    }))
}

/// RMAdminCLI's client tracking: a graceful refresh with the RM's own timeout, then a poll
/// each second until no node it put in DECOMMISSIONING is still there; when `timeout`
/// passes first, a FORCEFUL refresh decommissions them at once.
async fn refresh_nodes_client(rm: &RmClient, timeout: Option<i64>) -> Result<(), ClientError> {
    use spindle_common::states::NodeState;
    let started = Instant::now();
    let done = rm.refresh_nodes(DecommissionType::GRACEFUL, None).await?;
    let waiting = done.decommissioning;
    let limit = timeout
        .and_then(|t| u64::try_from(t).ok())
        .map(Duration::from_secs);
    loop {
        let draining: Vec<String> = rm
            .nodes(&[NodeState::DECOMMISSIONING])
            .await?
            .into_iter()
            .map(|n| n.id)
            .filter(|id| waiting.contains(id))
            .collect();
        if draining.is_empty() {
            println!(
                "Graceful decommissioning completed in {} seconds.",
                started.elapsed().as_secs()
            );
            return Ok(());
        }
        if limit.is_some_and(|l| started.elapsed() >= l) {
            println!(
                "Graceful decommissioning not completed in {} seconds; decommissioning {} \
                 forcefully now: {}",
                started.elapsed().as_secs(),
                if draining.len() == 1 {
                    "the node"
                } else {
                    "the nodes"
                },
                draining.join(", ")
            );
            rm.refresh_nodes(DecommissionType::FORCEFUL, None).await?;
            return Ok(());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// `-getGroups`: `user : group1 group2` per user, as RMAdminCLI prints them.
async fn print_groups(rm: &RmClient, users: &[String]) -> Result<(), ClientError> {
    let me = [rm.user().to_string()];
    let users = if users.is_empty() { &me[..] } else { users };
    for u in users {
        let groups = rm.user_groups(u).await?;
        println!("{}", groups_line(u, &groups));
    }
    Ok(())
}

/// RMAdminCLI's `user : group1 group2` (`user : ` when the user has none).
pub fn groups_line(user: &str, groups: &[String]) -> String {
    format!("{user} : {}", groups.join(" "))
}

/// The RM's words for a refusal: its `RemoteException` message, else the error.
pub fn remote_message(e: &ClientError) -> String {
    match e.remote_exception() {
        Some(re) => re.message,
        None => e.to_string(),
    }
}

/// What a successful `-refreshQueues` prints: each changed property, or that nothing did.
fn refresh_report(done: &spindle_common::records::cluster::ConfigVersionInfo) -> String {
    if done.changes.is_empty() {
        return "Queues refreshed: no property changed.\n".to_string();
    }
    let mut s = format!(
        "Queues refreshed ({} propert{} changed):\n",
        done.changes.len(),
        if done.changes.len() == 1 { "y" } else { "ies" }
    );
    for c in &done.changes {
        s.push_str(&format!("  {c}\n"));
    }
    s
}

pub async fn run(args: Vec<String>) -> anyhow::Result<u8> {
    let Some(p) = parse_or_usage(&args, OPTS, USAGE)? else {
        return Ok(EXIT_OK);
    };
    let cmd = command_from(&p).map_err(|e| usage_error(e, USAGE))?;
    if let AdminCommand::Ha(h) = &cmd {
        return super::rmadmin_ha::run(&p, h).await;
    }
    let rm = rm_client(&p)?;
    let result = match &cmd {
        AdminCommand::RefreshQueues => rm.refresh_queues().await.map(|done| {
            print!("{}", refresh_report(&done));
            for w in &done.warnings {
                eprintln!("warning: {w}");
            }
        }),
        AdminCommand::AddLabels(labels) => rm.add_node_labels(labels).await,
        AdminCommand::RemoveLabels(labels) => rm.remove_node_labels(labels).await,
        AdminCommand::ReplaceLabels(mapping) => rm.replace_node_to_labels(mapping).await,
        AdminCommand::RefreshNodes(None) => rm
            .refresh_nodes(DecommissionType::NORMAL, None)
            .await
            .map(|done| tracing::debug!(?done, "nodes refreshed")),
        AdminCommand::RefreshNodes(Some(Graceful {
            timeout_secs,
            tracking: Tracking::Server,
        })) => rm
            .refresh_nodes(DecommissionType::GRACEFUL, *timeout_secs)
            .await
            .map(|done| tracing::debug!(?done, "nodes refreshed")),
        AdminCommand::RefreshNodes(Some(Graceful {
            timeout_secs,
            tracking: Tracking::Client,
        })) => refresh_nodes_client(&rm, *timeout_secs).await,
        AdminCommand::GetGroups(users) => print_groups(&rm, users).await,
        // Answered above, each RM asked itself.
        AdminCommand::Ha(_) => Ok(()),
    };
    Ok(exit_status(cmd.name(), result))
}

/// A command's exit status; a refusal is YARN's RMAdminCLI `<command>: <message>` on stderr,
/// exit -1.
pub fn exit_status(name: &str, result: Result<(), ClientError>) -> u8 {
    match result {
        Ok(()) => EXIT_OK,
        Err(e) => {
            eprintln!("{name}: {}", remote_message(&e));
            EXIT_USAGE
        }
    }
}

#[cfg(test)]
mod tests {
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
        super::super::parse_with_common(OPTS, a).expect("parses")
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

    #[test]
    fn refresh_nodes_like_rmadmin() {
        let g = |timeout_secs, tracking| {
            Ok(AdminCommand::RefreshNodes(Some(Graceful {
                timeout_secs,
                tracking,
            })))
        };
        assert_eq!(
            command_from(&parsed(&["-refreshNodes"])),
            Ok(AdminCommand::RefreshNodes(None))
        );
        assert_eq!(
            command_from(&parsed(&["-refreshNodes", "-g", "30"])),
            g(Some(30), Tracking::Server)
        );
        assert_eq!(
            command_from(&parsed(&["-refreshNodes", "-graceful"])),
            g(None, Tracking::Server)
        );
        assert_eq!(
            command_from(&parsed(&["-refreshNodes", "-g", "3600", "-client"])),
            g(Some(3600), Tracking::Client)
        );
        assert_eq!(
            command_from(&parsed(&["-refreshNodes", "-g", "-1", "-server"])),
            g(Some(-1), Tracking::Server)
        );
        for bad in [
            &["-refreshNodes", "30"][..],
            &["-refreshNodes", "-client"],
            &["-refreshNodes", "-g", "soon"],
            &["-refreshNodes", "-g", "1", "2"],
            &["-refreshNodes", "-g", "-client", "-server"],
            &["-refreshQueues", "-g"],
            &["-refreshQueues", "extra"],
        ] {
            assert!(command_from(&parsed(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn get_groups_like_rmadmin() {
        assert_eq!(
            command_from(&parsed(&["-getGroups"])),
            Ok(AdminCommand::GetGroups(vec![]))
        );
        assert_eq!(
            command_from(&parsed(&["-getGroups", "alice", "bob"])),
            Ok(AdminCommand::GetGroups(vec!["alice".into(), "bob".into()]))
        );
        assert_eq!(
            groups_line("alice", &["devs".into(), "ops".into()]),
            "alice : devs ops"
        );
        assert_eq!(groups_line("nobody", &[]), "nobody : ");
    }
}
