//! `spindle schedulerconf`, as `yarn schedulerconf` (YARN's `SchedConfCLI`): changes the
//! capacity scheduler's live configuration through the RM's mutation API
//! (`PUT /ws/v1/cluster/scheduler-conf`), or prints it (`-getconf`).
//!
//! ```text
//! spindle schedulerconf -add "root.a.a1:capacity=60,maximum-capacity=100;root.a.a2:capacity=40"
//!                       -update "root.b:state=STOPPED" -remove "root.c;root.d"
//!                       -global yarn.scheduler.capacity.maximum-applications=5000
//! ```
//!
//! SchedConfCLI's syntax: queues separated by `;`, a queue's path then `:` then its
//! `key=value` pairs separated by `,` (`\,` for a comma inside a value); `key=` unsets the
//! key. `-add`, `-update`, `-remove` and `-global` make one mutation, applied by the RM in
//! YARN's order (removals, additions, updates, global updates) or refused as a whole.
//! YARN's `-format` (drop the stored versions and reload the file) has no counterpart in
//! Spindle's REST API: `spindle rmadmin -refreshQueues` makes the file authoritative again.
//!
//! A queue property or global key Spindle does not know (`maximum-capacty`) is refused before
//! anything is sent, with the closest known one, as the RM would refuse it.
//!
//! Output as SchedConfCLI's: `Configuration changed successfully.` (exit 0); a refusal is
//! `Configuration change unsuccessful: <the RM's message>` on stderr with exit 255 (YARN's
//! -1); `-getconf` prints the live properties as YARN's `ConfInfo` XML.

use spindle_common::config::known::{self, KeyStatus};
use spindle_common::records::cluster::{
    ConfEntries, ConfEntry, QueueConfigInfo, SchedConfUpdateInfo,
};

use super::args::{Opt, Parsed, UsageError};
use super::rmadmin::remote_message;
use super::{parse_or_usage, rm_client, usage_error, EXIT_OK, EXIT_USAGE};

pub const USAGE: &str = "\
usage: spindle schedulerconf [-add \"queueAddPath1:confKey1=confVal1,confKey2=confVal2;queueAddPath2:confKey3=confVal3\"]
                             [-remove \"queueRemovePath1;queueRemovePath2\"]
                             [-update \"queueUpdatePath1:confKey1=confVal1\"]
                             [-global globalConfKey1=globalConfVal1,globalConfKey2=globalConfVal2]
                             [-getconf] [--rm-address HOST:PORT] [--conf-dir DIR]
  -add      add queues with their properties (full paths below root)
  -remove   remove queues (they must be STOPPED, with no applications left)
  -update   change queues' properties; `key=` unsets a key
  -global   change global capacity-scheduler properties (full names)
  -getconf  print the live capacity-scheduler configuration (XML)
Queues are separated by `;`, properties by `,`; write `\\,` for a comma inside a value.
Examples:
  spindle schedulerconf -add \"root.a.a1:capacity=100,maximum-capacity=100;root.a.a2:capacity=0,maximum-capacity=0\"
  spindle schedulerconf -update \"root.default:acl_administer_queue=user1\\,user2 group1\\,group2,maximum-capacity=25\"
  spindle schedulerconf -remove \"root.a.a1;root.a.a2\"
  spindle schedulerconf -global yarn.scheduler.capacity.maximum-applications=10000
The change is one mutation, applied whole or refused whole (an admin operation when
yarn.acl.enable is true). YARN's -format has no counterpart: `spindle rmadmin -refreshQueues`
reloads capacity-scheduler.xml.";

pub const OPTS: &[Opt] = &[
    Opt::one("add", &["addQueues"]),
    Opt::one("remove", &["removeQueues"]),
    Opt::one("update", &["updateQueues"]),
    Opt::one("global", &["globalUpdates"]),
    Opt::flag("getconf", &["getConf"]),
    Opt::flag("format", &["formatConfig"]),
];

/// SchedConfCLI's message for a pair without `=`.
const CONF_ERR_MSG: &str = "Specify configuration key value as confKey=confVal.";

/// What one `spindle schedulerconf` call does.
#[derive(Debug, Clone)]
pub enum SchedConfCommand {
    /// `PUT /scheduler-conf` with this mutation.
    Update(SchedConfUpdateInfo),
    /// `GET /scheduler-conf`, printed as XML.
    GetConf,
}

/// Splits on commas not preceded by a backslash, then drops the backslashes (SchedConfCLI's
/// `(?<!\\),` split and `replace("\\", "")`).
fn split_unescaped_commas(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut escaped = false;
    for c in s.chars() {
        match c {
            '\\' if !escaped => escaped = true,
            ',' if !escaped => out.push(std::mem::take(&mut cur)),
            // A backslash before anything else is dropped too, as YARN drops them all.
            c => {
                cur.push(c);
                escaped = false;
            }
        }
    }
    out.push(cur);
    out
}

/// `key=value` pairs separated by unescaped commas; `key=` is an unset (`null`).
pub fn parse_pairs(arg: &str) -> Result<Vec<ConfEntry>, String> {
    let mut out: Vec<ConfEntry> = Vec::new();
    for pair in split_unescaped_commas(arg) {
        let pair = pair.trim();
        if pair.is_empty() {
            continue;
        }
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| format!("`{pair}`: {CONF_ERR_MSG}"))?;
        let k = k.trim();
        if k.is_empty() {
            return Err(format!("`{pair}`: {CONF_ERR_MSG}"));
        }
        out.retain(|e| e.key != k);
        out.push(ConfEntry {
            key: k.to_string(),
            value: (!v.is_empty()).then(|| v.to_string()),
        });
    }
    Ok(out)
}

/// Refuses a queue property Spindle does not know, naming the closest known one.
fn check_property(queue: &str, key: &str) -> Result<(), String> {
    match known::queue_property_status(key) {
        KeyStatus::Unknown { suggestion } => Err(match suggestion {
            Some(s) => format!(
                "Unknown property '{key}' for queue {queue}; did you mean '{s}'?"
            ),
            None => format!(
                "Unknown property '{key}' for queue {queue} (docs/configuration.md lists the queue properties)"
            ),
        }),
        KeyStatus::Known | KeyStatus::Ignored => Ok(()),
    }
}

/// `-add` / `-update`: `path:k=v,k2=v2;path2:k=v`.
pub fn parse_queues(arg: &str) -> Result<Vec<QueueConfigInfo>, String> {
    let mut out = Vec::new();
    for item in arg.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        let (path, params) = match item.split_once(':') {
            Some((p, rest)) => (p.trim(), rest),
            None => (item, ""),
        };
        if path.is_empty() {
            return Err(format!("`{item}`: no queue path before `:`"));
        }
        let entries = parse_pairs(params)?;
        for e in &entries {
            check_property(path, &e.key)?;
        }
        out.push(QueueConfigInfo {
            queue_name: path.to_string(),
            params: (!entries.is_empty()).then(|| ConfEntries {
                entry: entries.into(),
            }),
        });
    }
    if out.is_empty() {
        return Err("no queue given".into());
    }
    Ok(out)
}

/// `-remove "root.a;root.b"`.
pub fn parse_removals(arg: &str) -> Result<Vec<String>, String> {
    let out: Vec<String> = arg
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    if out.is_empty() {
        return Err("no queue given".into());
    }
    Ok(out)
}

/// `-global k=v,k2=v2`: full property names.
pub fn parse_global(arg: &str) -> Result<Vec<ConfEntry>, String> {
    let entries = parse_pairs(arg)?;
    if entries.is_empty() {
        return Err(CONF_ERR_MSG.into());
    }
    for e in &entries {
        if let KeyStatus::Unknown { suggestion } = known::key_status(&e.key) {
            return Err(match suggestion {
                Some(s) => format!("Unknown property '{}'; did you mean '{s}'?", e.key),
                None => format!(
                    "Unknown property '{}' (docs/configuration.md lists the capacity-scheduler properties)",
                    e.key
                ),
            });
        }
    }
    Ok(entries)
}

/// Which command the arguments ask for.
pub fn command_from(p: &Parsed) -> Result<SchedConfCommand, UsageError> {
    if let Some(a) = p.positionals.first() {
        return Err(UsageError::Other(format!("unexpected argument '{a}'")));
    }
    if p.has("format") {
        return Err(UsageError::Other(
            "-format is not supported: Spindle keeps every stored version; `spindle rmadmin \
             -refreshQueues` makes capacity-scheduler.xml authoritative again"
                .into(),
        ));
    }
    let changes = ["add", "remove", "update", "global"]
        .into_iter()
        .filter(|o| p.has(o))
        .count();
    if p.has("getconf") {
        if changes > 0 {
            return Err(UsageError::Other(
                "-getconf prints the configuration; give it without -add, -remove, -update or -global"
                    .into(),
            ));
        }
        return Ok(SchedConfCommand::GetConf);
    }
    if changes == 0 {
        return Err(UsageError::Other(
            "give at least one of -add, -remove, -update, -global, or -getconf".into(),
        ));
    }
    let invalid = |option: &'static str, value: &str, reason: String| UsageError::Invalid {
        option,
        value: value.to_string(),
        reason,
    };
    let mut info = SchedConfUpdateInfo::default();
    if let Some(v) = p.value("add") {
        info.add_queue = parse_queues(v).map_err(|r| invalid("add", v, r))?.into();
    }
    if let Some(v) = p.value("remove") {
        info.remove_queue = parse_removals(v)
            .map_err(|r| invalid("remove", v, r))?
            .into();
    }
    if let Some(v) = p.value("update") {
        info.update_queue = parse_queues(v).map_err(|r| invalid("update", v, r))?.into();
    }
    if let Some(v) = p.value("global") {
        info.global_updates = Some(ConfEntries {
            entry: parse_global(v).map_err(|r| invalid("global", v, r))?.into(),
        });
    }
    Ok(SchedConfCommand::Update(info))
}

/// XML text with the five special characters escaped.
fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// YARN's `ConfInfo` as `-getconf` prints it (JAXB, indented by two).
pub fn conf_xml(props: &[(String, String)]) -> String {
    let mut x = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<configuration>\n",
    );
    for (name, value) in props {
        x.push_str(&format!(
            "  <property>\n    <name>{}</name>\n    <value>{}</value>\n  </property>\n",
            xml_escape(name),
            xml_escape(value)
        ));
    }
    x.push_str("</configuration>\n");
    x
}

pub async fn run(args: Vec<String>) -> anyhow::Result<u8> {
    let Some(p) = parse_or_usage(&args, OPTS, USAGE)? else {
        return Ok(EXIT_OK);
    };
    let cmd = command_from(&p).map_err(|e| usage_error(e, USAGE))?;
    let rm = rm_client(&p)?;
    match cmd {
        SchedConfCommand::GetConf => match rm.scheduler_conf().await {
            Ok(props) => {
                say_raw!("{}", conf_xml(&props));
                Ok(EXIT_OK)
            }
            Err(e) => {
                eprintln!(
                    "Failed to get scheduler configuration: {}",
                    remote_message(&e)
                );
                Ok(EXIT_USAGE)
            }
        },
        SchedConfCommand::Update(info) => match rm.update_scheduler_conf(&info).await {
            Ok(text) => {
                say!("Configuration changed successfully.");
                for line in text.lines() {
                    if let Some(c) = line.strip_prefix("changed: ") {
                        say!("  {c}");
                    } else if let Some(w) = line.strip_prefix("warning: ") {
                        eprintln!("warning: {w}");
                    }
                }
                Ok(EXIT_OK)
            }
            Err(e) => {
                eprintln!("Configuration change unsuccessful: {}", remote_message(&e));
                Ok(EXIT_USAGE)
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::super::args::parse;
    use super::*;

    fn entry(k: &str, v: Option<&str>) -> ConfEntry {
        ConfEntry {
            key: k.into(),
            value: v.map(str::to_string),
        }
    }

    fn pairs(entries: &[ConfEntry]) -> Vec<(String, Option<String>)> {
        entries
            .iter()
            .map(|e| (e.key.clone(), e.value.clone()))
            .collect()
    }

    #[test]
    fn pairs_split_on_unescaped_commas() {
        let got = parse_pairs(
            "acl_administer_queue=user1\\,user2 group1\\,group2,maximum-capacity=25,state=",
        )
        .unwrap();
        assert_eq!(
            pairs(&got),
            pairs(&[
                entry("acl_administer_queue", Some("user1,user2 group1,group2")),
                entry("maximum-capacity", Some("25")),
                entry("state", None),
            ])
        );
        assert!(parse_pairs("capacity").unwrap_err().contains(CONF_ERR_MSG));
        assert!(parse_pairs("=5").unwrap_err().contains(CONF_ERR_MSG));
        assert!(parse_pairs("").unwrap().is_empty());
    }

    #[test]
    fn queues_like_schedconfcli() {
        let q = parse_queues("root.a.a1:capacity=100,maximum-capacity=100; root.a.a2:capacity=0;")
            .unwrap();
        assert_eq!(q.len(), 2);
        assert_eq!(q[0].queue_name, "root.a.a1");
        assert_eq!(
            pairs(&q[0].params.as_ref().unwrap().entry.0),
            pairs(&[
                entry("capacity", Some("100")),
                entry("maximum-capacity", Some("100"))
            ])
        );
        assert_eq!(q[1].queue_name, "root.a.a2");
        // A queue alone (no properties) is allowed, as in YARN.
        let q = parse_queues("root.x").unwrap();
        assert!(q[0].params.is_none());
        assert!(parse_queues(" ; ").is_err());
        assert!(parse_queues(":capacity=1").is_err());
        assert_eq!(
            parse_removals("root.a.a1; root.a.a2").unwrap(),
            vec!["root.a.a1".to_string(), "root.a.a2".to_string()]
        );
    }

    #[test]
    fn unknown_properties_are_refused_with_the_closest_known_one() {
        assert_eq!(
            parse_queues("root.a:capacity=10,maximum-capacty=20").unwrap_err(),
            "Unknown property 'maximum-capacty' for queue root.a; did you mean 'maximum-capacity'?"
        );
        assert!(parse_queues("root.a:colour=blue")
            .unwrap_err()
            .starts_with("Unknown property 'colour' for queue root.a ("));
        assert_eq!(
            parse_global("yarn.scheduler.capacity.maximum-aplications=10").unwrap_err(),
            "Unknown property 'yarn.scheduler.capacity.maximum-aplications'; did you mean 'yarn.scheduler.capacity.maximum-applications'?"
        );
        // Per-label and YARN properties Spindle accepts pass.
        parse_queues("root.a:accessible-node-labels.gpu.capacity=50,reservable=true").unwrap();
        parse_global("yarn.scheduler.capacity.root.a.capacity=10").unwrap();
    }

    fn command(args: &[&str]) -> Result<SchedConfCommand, UsageError> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let p = parse(&args, OPTS).unwrap();
        command_from(&p)
    }

    #[test]
    fn commands() {
        let SchedConfCommand::Update(info) = command(&[
            "-add",
            "root.c:capacity=10",
            "-remove",
            "root.b",
            "-update",
            "root.a:capacity=60",
            "-global",
            "yarn.scheduler.capacity.maximum-applications=5",
        ])
        .unwrap() else {
            panic!("an update")
        };
        let body = serde_json::to_value(&info).unwrap();
        assert_eq!(
            body,
            serde_json::json!({
                "add-queue": [{"queue-name": "root.c", "params": {"entry": [{"key": "capacity", "value": "10"}]}}],
                "update-queue": [{"queue-name": "root.a", "params": {"entry": [{"key": "capacity", "value": "60"}]}}],
                "remove-queue": ["root.b"],
                "global-updates": {"entry": [{"key": "yarn.scheduler.capacity.maximum-applications", "value": "5"}]},
            })
        );
        assert!(matches!(
            command(&["-getconf"]).unwrap(),
            SchedConfCommand::GetConf
        ));
        for bad in [
            &[][..],
            &["-getconf", "-add", "root.c"],
            &["-format"],
            &["-update", "root.a:capacity"],
            &["-add", "root.c", "extra"],
        ] {
            assert!(command(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn getconf_prints_yarns_conf_info_xml() {
        let x = conf_xml(&[
            ("yarn.scheduler.capacity.root.queues".into(), "a,b".into()),
            (
                "yarn.scheduler.capacity.root.a.acl_submit_applications".into(),
                "<x&y>".into(),
            ),
        ]);
        assert_eq!(
            x,
            "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<configuration>\n  <property>\n    <name>yarn.scheduler.capacity.root.queues</name>\n    <value>a,b</value>\n  </property>\n  <property>\n    <name>yarn.scheduler.capacity.root.a.acl_submit_applications</name>\n    <value>&lt;x&amp;y&gt;</value>\n  </property>\n</configuration>\n"
        );
        // What it prints reads back as a configuration file.
        let mut c = spindle_common::config::Configuration::new();
        c.add_str(std::path::Path::new("x.xml"), &x).unwrap();
        assert_eq!(
            c.get_raw("yarn.scheduler.capacity.root.a.acl_submit_applications"),
            Some("<x&y>")
        );
    }
}
