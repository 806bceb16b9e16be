//! `spindle node -list | -status NODEID`, as `yarn node`.

use anyhow::Context;
use spindle_common::states::NodeState;

use super::args::{Opt, Parsed, UsageError};
use spindle_appmaster_sdk::rm_client::RmClient;
use spindle_common::ids::NodeId;

use super::format::{format_node_list, format_node_status, node_states};
use super::{parse_or_usage, rm_client, usage_error, EXIT_OK, EXIT_USAGE};

pub const USAGE: &str = "\
usage: spindle node -list [-all] [-states S1,S2] [-showDetails] | -status NODEID
                  [--rm-address HOST:PORT] [--conf-dir DIR]
  -status NODEID  print the node's report (NODEID is host:port, as -list shows it)
  -list           list nodes (RUNNING ones unless -all or -states)
  -all            nodes in every state
  -states S1,S2   nodes in these states (NEW, RUNNING, UNHEALTHY, DECOMMISSIONED, LOST,
                  REBOOTED, DECOMMISSIONING, SHUTDOWN)
  -showDetails    resources, utilization and labels of each node";

pub const OPTS: &[Opt] = &[
    Opt::flag("list", &[]),
    Opt::one("status", &[]),
    Opt::flag("all", &[]),
    Opt::list("states", &["nodeStates"]),
    Opt::flag("showDetails", &["details"]),
];

/// The states `-list` shows, or YARN's message for an invalid one.
pub fn requested_states(p: &Parsed) -> Result<Vec<NodeState>, String> {
    let mut states = Vec::new();
    for s in p.values("states") {
        if s.eq_ignore_ascii_case("ALL") {
            return Ok(NodeState::ALL.to_vec());
        }
        states.push(s.parse::<NodeState>().map_err(|_| {
            let valid: Vec<&str> = NodeState::ALL.iter().map(|s| s.as_str()).collect();
            format!(
                "The node state {s} is invalid.\nThe valid node state can be one of the following: {}.",
                valid.join(",")
            )
        })?);
    }
    Ok(node_states(p.has("all"), &states))
}

pub async fn run(args: Vec<String>) -> anyhow::Result<u8> {
    let Some(p) = parse_or_usage(&args, OPTS, USAGE)? else {
        return Ok(EXIT_OK);
    };
    if let Some(id) = p.value("status") {
        let rm = rm_client(&p)?;
        return status(&rm, id.trim()).await;
    }
    if !p.has("list") {
        return Err(usage_error(
            UsageError::Other("give -list or -status NODEID".into()),
            USAGE,
        ));
    }
    let states = match requested_states(&p) {
        Ok(s) => s,
        Err(msg) => {
            eprintln!("{msg}");
            return Ok(EXIT_USAGE);
        }
    };
    let rm = rm_client(&p)?;
    let mut nodes = rm
        .nodes(&states)
        .await
        .with_context(|| format!("cannot list nodes at {}", rm.address()))?;
    nodes.retain(|n| states.contains(&n.state));
    nodes.sort_by(|a, b| a.id.cmp(&b.id));
    say_raw!("{}", format_node_list(&nodes, p.has("showDetails")));
    Ok(EXIT_OK)
}

/// NodeCLI's `-status`: the report, or its words for a node the RM does not know (exit 255).
async fn status(rm: &RmClient, id: &str) -> anyhow::Result<u8> {
    let node_id: NodeId = match id.parse() {
        Ok(n) => n,
        Err(e) => {
            eprintln!(
                "Invalid NodeId: {id} ({e}); a node id is host:port, as `node -list` shows it"
            );
            return Ok(EXIT_USAGE);
        }
    };
    match rm.node(&node_id).await {
        Ok(n) => {
            say_raw!("{}", format_node_status(&n));
            Ok(EXIT_OK)
        }
        Err(e) if e.is_not_found() => {
            say!("Could not find the node report for node id : {id}");
            Ok(EXIT_USAGE)
        }
        Err(e) => Err(e).with_context(|| format!("cannot get the report of node {id}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(a: &[&str]) -> Parsed {
        super::super::parse_with_common(OPTS, a).expect("parses")
    }

    #[test]
    fn states_like_node_cli() {
        assert_eq!(
            requested_states(&parsed(&["-list"])).unwrap(),
            vec![NodeState::RUNNING]
        );
        assert_eq!(
            requested_states(&parsed(&["-list", "-all"])).unwrap().len(),
            NodeState::ALL.len()
        );
        assert_eq!(
            requested_states(&parsed(&["-list", "-states", "lost,UNHEALTHY"])).unwrap(),
            vec![NodeState::LOST, NodeState::UNHEALTHY]
        );
        assert!(requested_states(&parsed(&["-list", "-states", "DEAD"]))
            .unwrap_err()
            .starts_with("The node state DEAD is invalid."));
        assert!(parsed(&["--list", "--show-details"]).has("showDetails"));
        assert_eq!(parsed(&["-status", "h:1"]).value("status"), Some("h:1"));
    }
}
