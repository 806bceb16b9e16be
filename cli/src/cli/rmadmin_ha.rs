//! `spindle rmadmin`'s HA commands, as YARN's `RMAdminCLI`/`HAAdmin`:
//! `-getServiceState <id>` (`active` or `standby`), `-getAllServiceState` (`host:port`
//! and state per RM, `%-50s %-10s`, or `Failed to connect: ...`), and
//! `-transitionToActive|-transitionToStandby [--forcemanual] <id>` (nothing printed on
//! success; a refusal is `<command>: <message>` with exit status 255). The RM ids and
//! addresses are read from the conf dir (`yarn.resourcemanager.ha.rm-ids`,
//! `yarn.resourcemanager.webapp.address.<id>`), and each RM is asked itself (its
//! `/ws/v1/ha/*` is never redirected).

use std::path::PathBuf;

use anyhow::Context;
use spindle_appmaster_sdk::address::load_conf_dir;
use spindle_appmaster_sdk::rm_client::HaTransition;
use spindle_appmaster_sdk::RmAddress;
use spindle_common::config::Configuration;
use spindle_common::failover::ha_rm_addresses;

use super::args::{Parsed, UsageError};
use super::rmadmin::remote_message;
use super::{rm_client_at, EXIT_USAGE};

/// One HA command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HaCommand {
    GetServiceState(String),
    GetAllServiceState,
    Transition {
        to: HaTransition,
        id: String,
        forced: bool,
    },
}

impl HaCommand {
    /// The option names of the HA commands.
    pub const NAMES: [&'static str; 4] = [
        "getServiceState",
        "getAllServiceState",
        "transitionToActive",
        "transitionToStandby",
    ];

    pub fn name(&self) -> &'static str {
        match self {
            HaCommand::GetServiceState(_) => "getServiceState",
            HaCommand::GetAllServiceState => "getAllServiceState",
            HaCommand::Transition {
                to: HaTransition::ToActive,
                ..
            } => "transitionToActive",
            HaCommand::Transition {
                to: HaTransition::ToStandby,
                ..
            } => "transitionToStandby",
        }
    }

    /// The command `one` (one of [`Self::NAMES`]) with its id.
    /// The transitions take the id as their argument, as `HAAdmin`
    /// (`-transitionToStandby [--forcemanual] <serviceId>`).
    pub fn from(p: &Parsed, one: &str) -> Result<Self, UsageError> {
        let transition = one.starts_with("transition");
        let extra = p.positionals.get(usize::from(transition));
        if let Some(a) = extra {
            return Err(UsageError::Other(format!(
                "unexpected argument '{a}' for -{one}"
            )));
        }
        let forced = p.has("forcemanual");
        let id = match transition {
            true => p.positionals.first().cloned().ok_or_else(|| {
                UsageError::Other(format!("-{one} needs the RM's id (<serviceId>)"))
            })?,
            false => p.value(one).unwrap_or_default().trim().to_string(),
        };
        let to = match one {
            "transitionToActive" => HaTransition::ToActive,
            "transitionToStandby" => HaTransition::ToStandby,
            _ if forced => {
                return Err(UsageError::Other(
                    "--forcemanual goes with -transitionToActive or -transitionToStandby".into(),
                ))
            }
            "getAllServiceState" => return Ok(HaCommand::GetAllServiceState),
            _ => return Ok(HaCommand::GetServiceState(id)),
        };
        Ok(HaCommand::Transition { to, id, forced })
    }
}

/// YARN's `%-50s %-10s` line of `-getAllServiceState`.
pub fn state_line(address: &str, state: &str) -> String {
    format!("{address:<50} {state:<10}").trim_end().to_string()
}

/// The RMs of the conf dir, by id, with their addresses.
fn rms(conf_dir: Option<&std::path::Path>) -> anyhow::Result<Vec<(String, String)>> {
    let dir = Configuration::resolve_conf_dir(conf_dir);
    let conf = load_conf_dir(&dir)?;
    ha_rm_addresses(&conf)
        .with_context(|| format!("reading the RM HA settings in {}", dir.display()))?
        .with_context(|| {
            format!(
                "ResourceManager HA is not enabled in {} (yarn.resourcemanager.ha.enabled, \
                 yarn.resourcemanager.ha.rm-ids and yarn.resourcemanager.webapp.address.<id>)",
                dir.display()
            )
        })
}

pub async fn run(p: &Parsed, cmd: &HaCommand) -> anyhow::Result<u8> {
    let conf_dir = p.value("conf-dir").map(PathBuf::from);
    let rms = rms(conf_dir.as_deref())?;
    let client_of = |address: &str| -> anyhow::Result<_> {
        let a = RmAddress::parse(address)
            .map_err(|r| anyhow::anyhow!("RM address '{address}': {r}"))?;
        rm_client_at(conf_dir.as_deref(), &a)
    };
    let of_id = |id: &str| -> anyhow::Result<String> {
        rms.iter()
            .find(|(i, _)| i == id)
            .map(|(_, a)| a.clone())
            .with_context(|| {
                let ids: Vec<&str> = rms.iter().map(|(i, _)| i.as_str()).collect();
                format!(
                    "'{id}' is not one of yarn.resourcemanager.ha.rm-ids ({})",
                    ids.join(",")
                )
            })
    };
    // An id not in rm-ids is refused as the RM's refusals are (`<command>: ...`, 255).
    let target = match cmd {
        HaCommand::GetServiceState(id) | HaCommand::Transition { id, .. } => match of_id(id) {
            Ok(a) => a,
            Err(e) => {
                eprintln!("{}: {e}", cmd.name());
                return Ok(EXIT_USAGE);
            }
        },
        HaCommand::GetAllServiceState => String::new(),
    };
    let result = match cmd {
        HaCommand::GetAllServiceState => {
            for (_, address) in &rms {
                let line = match client_of(address)?.ha_state().await {
                    Ok(s) => state_line(address, &s.ha_state.to_ascii_lowercase()),
                    Err(e) => state_line(
                        address,
                        &format!("Failed to connect: {}", remote_message(&e)),
                    ),
                };
                println!("{line}");
            }
            Ok(())
        }
        HaCommand::GetServiceState(_) => client_of(&target)?
            .ha_state()
            .await
            .map(|s| println!("{}", s.ha_state.to_ascii_lowercase())),
        HaCommand::Transition { to, forced, .. } => client_of(&target)?
            .ha_transition(*to, *forced)
            .await
            .map(|_| ()),
    };
    Ok(super::rmadmin::exit_status(cmd.name(), result))
}

#[cfg(test)]
mod tests {
    use super::super::rmadmin::{command_from, AdminCommand, OPTS};
    use super::*;

    fn parsed(a: &[&str]) -> Parsed {
        super::super::parse_with_common(OPTS, a).expect("parses")
    }

    #[test]
    fn ha_commands_like_rmadmin() {
        assert_eq!(
            command_from(&parsed(&["-getServiceState", "rm1"])),
            Ok(AdminCommand::Ha(HaCommand::GetServiceState("rm1".into())))
        );
        assert_eq!(
            command_from(&parsed(&["-getAllServiceState"])),
            Ok(AdminCommand::Ha(HaCommand::GetAllServiceState))
        );
        for args in [
            &["-transitionToStandby", "--forcemanual", "rm2"][..],
            &["--forcemanual", "-transitionToStandby", "rm2"],
            &["-transitionToStandby", "rm2", "-forcemanual"],
        ] {
            assert_eq!(
                command_from(&parsed(args)),
                Ok(AdminCommand::Ha(HaCommand::Transition {
                    to: HaTransition::ToStandby,
                    id: "rm2".into(),
                    forced: true
                })),
                "{args:?}"
            );
        }
        assert_eq!(
            command_from(&parsed(&["-transitionToActive", "rm1"])),
            Ok(AdminCommand::Ha(HaCommand::Transition {
                to: HaTransition::ToActive,
                id: "rm1".into(),
                forced: false
            }))
        );
        for bad in [
            &["-getServiceState", "rm1", "--forcemanual"][..],
            &["-refreshQueues", "--forcemanual"],
            &["-getAllServiceState", "extra"],
            &["-transitionToActive"],
            &["-transitionToActive", "rm1", "rm2"],
        ] {
            assert!(command_from(&parsed(bad)).is_err(), "{bad:?}");
        }
        assert!(super::super::parse_with_common(OPTS, &["-getServiceState"]).is_err());
        assert_eq!(
            state_line("127.0.0.1:8088", "active"),
            format!("127.0.0.1:8088{}active", " ".repeat(37))
        );
    }
}
