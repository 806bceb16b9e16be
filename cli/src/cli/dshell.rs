//! `spindle distributed-shell` (the client) and `spindle distributed-shell-am` (the AM the
//! client ships).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use spindle_common::env;
use spindle_common::image_ref::ImageRef;
use spindle_common::records::resource::parse_resource_list;
use spindle_common::resource::Resource;
use spindle_common::runtime_request::{parse_mounts, MountMode, RuntimeKind, RuntimeRequest};
use spindle_common::states::FinalApplicationStatus;

use super::args::{Opt, Parsed, UsageError};
use super::launch::{
    am_clients, app_options, exit_status, ignore_am_args, invalid, memory_mb, run_client, AppFields,
};
use super::train::{prepare_shipment, shipment_from};
use super::{parse_or_usage, usage_error, EXIT_OK};
use spindle_appmaster_sdk::dshell::{
    default_container_resources, run_am_with, DsAmConfig, DsOptions, DEFAULT_NO_PROGRESS_TIMEOUT,
    SHELL_SCRIPT_NAME,
};
use spindle_appmaster_sdk::placement;
use spindle_appmaster_sdk::ship::{Shipment, Shipped};

pub const USAGE: &str = "\
usage: spindle distributed-shell --shell-command CMD [options]
  -num_containers N             containers to run the command in (default 1)
  -container_resources LIST     per container, e.g. memory-mb=256,vcores=1,yarn.io/gpu=1
                                (default memory-mb=256,vcores=1)
  -container_memory MB          per-container memory (older form)
  -container_vcores N           per-container vcores (older form)
  -shell_command CMD            the command, run with bash -c
  -shell_script FILE            ship FILE and run it (bash ExecScript.sh, as YARN's); not
                                with -shell_command
  -shell_args ARG               appended to the command (repeatable)
  -shell_env K=V                environment of the command (repeatable)
  --files A,B                   copy these files into every container's working directory
                                (FILE#NAME renames one)
  --archives X.tgz,...          unpack each .tar/.tar.gz/.tgz into a directory of its name
                                in every container's working directory
  --src-dir DIR                 pack DIR and unpack it in every container's working directory
  --image IMG                   run every container in this image (registry/repo:tag,
                                repo@sha256:..., oci:/dir); the NodeManager pulls and caches
                                it; nodes that hold it already are preferred
  --mount SRC:DST[:ro|rw]       bind a node directory into the image, read-only unless :rw
                                (repeatable; the node must allow SRC); needs --image
  --staging-dir DIR             stage what is shipped in DIR, on a file system every NM
                                reads (default: spindle.client.staging-dir; unset: it is
                                uploaded to the ResourceManager, which NMs download from)
  -queue Q                      queue to submit to
  -appname NAME                 application name (default DistributedShell)
  -priority P                   application priority
  -master_memory MB             AM memory (default 512)
  -master_vcores N              AM vcores (default 1)
  -container_priority P         priority of the container requests (default 0)
  -max_app_attempts N           AM attempts
  -time T                       the application's lifetime in Slurm's formats (MM, MM:SS,
                                HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS): the ResourceManager
                                kills it T after submission (YARN's LIFETIME), also with
                                -detach; capped by the queue's maximum-application-lifetime
  -timeout_ms MS                the same lifetime in milliseconds
  -after APP[,APP]              start only once these applications have ended (afterany)
  -after_ok APP[,APP]           start only once these applications have succeeded (afterok);
                                if one does not, this application fails
  -no_progress_timeout_ms MS    the AM gives up after MS without progress (default 300000)
  -placement_spec SPEC          YARN's placement spec: Tag=N[,Constraint][:Tag=N...], e.g.
                                zk=3,NOTIN,NODE,zk:hbase=5,IN,RACK,zk; each tag's N containers
                                carry the tag and its constraint (IN|NOTIN,NODE|RACK,Tag;
                                CARDINALITY,Scope,Tag,Min,Max; attr=v; attr!=v; AND(c:c);
                                OR(c:c)); -num_containers is then ignored
  -node_label_expression EXPR   run the containers in this partition (node label); also the
                                application's label expression
  --follow, --no-follow         stream the first container's stdout and stderr as they are
                                written, each line prefixed [task 0 stdout] (default: follow
                                when stdout is a terminal)
  --detach                      return once the application is accepted, printing its id and
                                the commands to follow it, kill it and fetch its logs;
                                without it, Ctrl-C kills the application
  --rm-address HOST:PORT, --conf-dir DIR
The client prints why the application waits (once per change), its containers' progress,
and at the end each container's node, state and exit status.
Exit status 0 only if the application FINISHED with SUCCEEDED, 2 if it did not or was
refused before submission (unknown queue, too large; no application id is used), 130 if
interrupted (the application is killed), 255 for a usage error.";

pub const OPTS: &[Opt] = &[
    Opt::one("num_containers", &[]),
    Opt::one("container_resources", &[]),
    Opt::one("container_memory", &[]),
    Opt::one("container_vcores", &[]),
    Opt::one("shell_command", &[]),
    Opt::one("shell_script", &[]),
    Opt::repeated("shell_args", &[]),
    Opt::repeated("shell_env", &[]),
    Opt::one("src_dir", &[]),
    Opt::one("image", &[]),
    Opt::repeated("mount", &[]),
    Opt::repeated("files", &[]),
    Opt::repeated("archives", &[]),
    Opt::one("staging_dir", &[]),
    Opt::one("queue", &[]),
    Opt::one("appname", &["app_name", "name"]),
    Opt::one("priority", &[]),
    Opt::one("master_memory", &[]),
    Opt::one("master_vcores", &[]),
    Opt::one("container_priority", &["shell_cmd_priority"]),
    Opt::one("max_app_attempts", &[]),
    Opt::one("time", &[]),
    Opt::one("timeout_ms", &["timeout"]),
    Opt::repeated("after", &[]),
    Opt::repeated("after_ok", &[]),
    Opt::one("no_progress_timeout_ms", &[]),
    Opt::one("placement_spec", &[]),
    Opt::one("node_label_expression", &[]),
    Opt::flag("follow", &[]),
    Opt::flag("no_follow", &[]),
    Opt::flag("detach", &[]),
];

/// A resource list over the defaults: `yarn.io/gpu=1` alone keeps the default memory and
/// vcores.
pub(crate) fn over_defaults(list: &str) -> Result<Resource, String> {
    let given = parse_resource_list(list)?;
    let named = |names: &[&str]| {
        list.split(',')
            .filter_map(|p| p.split_once('='))
            .any(|(k, _)| names.contains(&k.trim()))
    };
    let mut r = default_container_resources();
    for (k, v) in given.entries() {
        let explicit = match k {
            "memory-mb" => named(&["memory-mb", "memory"]),
            "vcores" => named(&["vcores"]),
            _ => true,
        };
        if explicit {
            r.set(k, v);
        }
    }
    Ok(r)
}

/// The command of `-shell_command CMD` or `-shell_script FILE` (shipped as `ExecScript.sh`
/// and run with bash, as YARN's distributed shell does), with `-shell_args` appended.
pub(crate) fn shell_command_from(p: &Parsed, ship: &mut Shipment) -> Result<String, UsageError> {
    let mut command = match (p.value("shell_command"), p.value("shell_script")) {
        (Some(_), Some(f)) => {
            return Err(invalid(
                "shell_script",
                f,
                "-shell_command and -shell_script exclude each other: give one",
            ))
        }
        (Some(c), None) => c.to_string(),
        (None, Some(f)) => {
            ship.files.push((SHELL_SCRIPT_NAME.into(), f.into()));
            format!("bash {SHELL_SCRIPT_NAME}")
        }
        (None, None) => {
            return Err(UsageError::Other(
                "no shell command given: use --shell-command CMD or --shell-script FILE".into(),
            ))
        }
    };
    for a in p.values("shell_args") {
        command.push(' ');
        command.push_str(a);
    }
    if command.trim().is_empty() {
        return Err(UsageError::Other("the shell command is empty".into()));
    }
    Ok(command)
}

/// The containers' environment: every `K=V` of a repeatable environment option
/// (`-shell_env`, `--env`), and YARN's runtime variables for `--image` and `--mount`.
pub(crate) fn env_from(
    p: &Parsed,
    option: &'static str,
) -> Result<BTreeMap<String, String>, UsageError> {
    let mut env = plain_env(p, option)?;
    let Some(image) = image_request(p)? else {
        return Ok(env);
    };
    for (k, v) in image.to_env() {
        if env.contains_key(&k) {
            return Err(invalid(
                option,
                &k,
                "--image sets this variable: give --image or the variable, not both",
            ));
        }
        env.insert(k, v);
    }
    Ok(env)
}

/// `--image IMG` with its `--mount SRC:DST[:ro|rw]`s (read-only without a mode), checked
/// as the NodeManager will.
fn image_request(p: &Parsed) -> Result<Option<RuntimeRequest>, UsageError> {
    let var = env::YARN_CONTAINER_RUNTIME_RUNC_MOUNTS;
    let mut mounts = Vec::new();
    for m in p.values("mount") {
        mounts.extend(
            parse_mounts(m, var, MountMode::ReadOnly)
                .map_err(|e| invalid("mount", m, e.to_string()))?,
        );
    }
    let Some(v) = p.value("image") else {
        if let Some(m) = p.values("mount").first() {
            return Err(invalid(
                "mount",
                m,
                "--mount needs --image (it binds into the image's file system)",
            ));
        }
        return Ok(None);
    };
    let image = ImageRef::parse(v).map_err(|e| invalid("image", v, e.to_string()))?;
    Ok(Some(RuntimeRequest {
        kind: RuntimeKind::Runc,
        image: Some(image.to_string()),
        mounts,
        privileged: false,
    }))
}

fn plain_env(p: &Parsed, option: &'static str) -> Result<BTreeMap<String, String>, UsageError> {
    let mut env = BTreeMap::new();
    for kv in p.values(option) {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| invalid(option, kv, "expected K=V"))?;
        if k.trim().is_empty() {
            return Err(invalid(option, kv, "empty variable name"));
        }
        env.insert(k.trim().to_string(), v.to_string());
    }
    Ok(env)
}

/// The check before submission that a `--shell_script` exists.
pub(crate) fn check_shell_script(p: &Parsed) -> anyhow::Result<()> {
    if let Some(f) = p.value("shell_script") {
        if !std::path::Path::new(f).is_file() {
            return Err(spindle_appmaster_sdk::ship::ShipError::NotFound {
                option: "--shell_script",
                path: f.to_string(),
            }
            .into());
        }
    }
    Ok(())
}

/// Builds the options from parsed arguments.
pub fn options_from(p: &Parsed) -> Result<DsOptions, UsageError> {
    let mut ship = shipment_from(p)?;
    let command = shell_command_from(p, &mut ship)?;
    // Parsed here, before anything is submitted, so that a mistake is named at once.
    let placement = match p.value("placement_spec") {
        Some(v) => placement::parse(v).map_err(|e| invalid("placement_spec", v, e.to_string()))?,
        None => Vec::new(),
    };
    let num_containers = if placement.is_empty() {
        let n = p.parse::<u32>("num_containers")?.unwrap_or(1);
        if n == 0 {
            return Err(invalid("num_containers", "0", "must be at least 1"));
        }
        n
    } else {
        if p.has("num_containers") {
            tracing::warn!("-num_containers is ignored with -placement_spec");
        }
        placement::total_containers(&placement)
    };
    let node_label_expression = match p.value("node_label_expression").map(str::trim) {
        Some("") => {
            return Err(invalid(
                "node_label_expression",
                "",
                "empty label expression",
            ))
        }
        Some(e) => Some(e.to_string()),
        None => None,
    };
    let mut resources: Resource = match p.value("container_resources") {
        Some(v) => over_defaults(v).map_err(|r| invalid("container_resources", v, r))?,
        None => default_container_resources(),
    };
    if let Some(v) = p.value("container_memory") {
        resources.memory_mb = memory_mb("container_memory", v)?;
    }
    if let Some(n) = p.parse::<i64>("container_vcores")? {
        resources.vcores = n;
    }
    if resources.memory_mb <= 0 || resources.vcores <= 0 {
        return Err(invalid(
            "container_resources",
            p.value("container_resources").unwrap_or(""),
            "memory-mb and vcores must both be positive",
        ));
    }
    let shell_env = env_from(p, "shell_env")?;
    let no_progress_timeout = p
        .parse::<u64>("no_progress_timeout_ms")?
        .map(Duration::from_millis)
        .unwrap_or(DEFAULT_NO_PROGRESS_TIMEOUT);
    let mut o = DsOptions::new(DsAmConfig {
        num_containers,
        container_resources: resources,
        shell_command: command,
        shell_env,
        container_priority: p.parse::<i32>("container_priority")?.unwrap_or(0),
        no_progress_timeout,
        placement,
        node_label_expression,
    });
    app_options(
        p,
        AppFields {
            app_name: &mut o.app_name,
            queue: &mut o.queue,
            priority: &mut o.priority,
            master_resources: &mut o.master_resources,
            max_app_attempts: Some(&mut o.max_app_attempts),
            lifetime: &mut o.lifetime,
            dependencies: &mut o.dependencies,
        },
    )?;
    o.ship = ship;
    Ok(o)
}

pub async fn run_client_cmd(args: Vec<String>) -> anyhow::Result<u8> {
    let Some(p) = parse_or_usage(&args, OPTS, USAGE)? else {
        return Ok(EXIT_OK);
    };
    let mut opts = options_from(&p).map_err(|e| usage_error(e, USAGE))?;
    check_shell_script(&p)?;
    let words: Vec<String> = opts
        .am
        .shell_command
        .split_whitespace()
        .map(str::to_string)
        .collect();
    prepare_shipment(&p, &mut opts.ship, &words)?;
    run_client(&p, &opts.launch(), "distributed shell").await
}

/// The AM: configuration and identity from the environment; exit 0 on SUCCEEDED, 2 else
/// (as YARN's distributed shell AM).
pub async fn run_am_cmd(args: Vec<String>) -> anyhow::Result<u8> {
    ignore_am_args("distributed-shell-am", &args);
    let cfg = DsAmConfig::from_env().context("bad distributed shell configuration")?;
    let (mut amrm, nm, host) = am_clients()?;
    let app = amrm.client().attempt_id().application_id;
    let shipped = Shipped::from_env(app).context("bad distributed shell configuration")?;
    let report = run_am_with(&cfg, &shipped, &mut amrm, &nm, &host, &mut |l| say!("{l}"))
        .await
        .context("distributed shell application master failed")?;
    Ok(exit_status(
        report.final_status == FinalApplicationStatus::SUCCEEDED,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(a: &[&str]) -> Parsed {
        super::super::parse_with_common(OPTS, a).expect("parses")
    }

    #[test]
    fn image_and_mounts_become_yarns_runtime_variables() {
        let o = options_from(&parsed(&[
            "--shell-command",
            "cat /etc/os-release",
            "--image",
            "127.0.0.1:5000/busybox:1",
            "--mount",
            "/data:/data:ro",
        ]))
        .unwrap();
        let env = &o.am.shell_env;
        assert_eq!(env["YARN_CONTAINER_RUNTIME_TYPE"], "runc");
        assert_eq!(
            env["YARN_CONTAINER_RUNTIME_RUNC_IMAGE"],
            "127.0.0.1:5000/busybox:1"
        );
        assert_eq!(env["YARN_CONTAINER_RUNTIME_RUNC_MOUNTS"], "/data:/data:ro");
        let err = |a: &[&str]| options_from(&parsed(a)).unwrap_err().to_string();
        let e = err(&["--shell-command", "x", "--image", "Bad Image"]);
        assert!(e.contains("image") && e.contains("Bad Image"), "{e}");
        let e = err(&["--shell-command", "x", "--mount", "/a:/b"]);
        assert!(e.contains("needs --image"), "{e}");
        let e = err(&[
            "--shell-command",
            "x",
            "--image",
            "busybox",
            "--mount",
            "a:/b",
        ]);
        assert!(e.contains("absolute"), "{e}");
        let e = err(&[
            "--shell-command",
            "x",
            "--image",
            "busybox",
            "-shell_env",
            "YARN_CONTAINER_RUNTIME_TYPE=docker",
        ]);
        assert!(e.contains("not both"), "{e}");
    }

    #[test]
    fn yarn_spellings() {
        let p = parsed(&[
            "-num_containers",
            "3",
            "-container_resources",
            "memory-mb=512,vcores=2,yarn.io/gpu=1",
            "-shell_command",
            "echo hi",
            "-shell_args",
            "there",
            "-shell_env",
            "A=1=2",
            "-container_priority",
            "4",
            "-master_memory",
            "1G",
        ]);
        let o = options_from(&p).unwrap();
        assert_eq!(o.am.num_containers, 3);
        assert_eq!(
            o.am.container_resources,
            Resource::new(512, 2).with("yarn.io/gpu", 1)
        );
        assert_eq!(o.am.shell_command, "echo hi there");
        assert_eq!(o.am.shell_env.get("A").map(String::as_str), Some("1=2"));
        assert_eq!(o.am.container_priority, 4);
        assert_eq!(o.master_resources, Resource::new(1024, 1));
        assert_eq!(o.app_name, "DistributedShell");
        assert_eq!(o.lifetime, None);
        assert!(o.dependencies.is_empty());
    }

    #[test]
    fn time_limits_and_dependencies() {
        let o = options_from(&parsed(&[
            "-shell_command",
            "true",
            "--time",
            "1-02:03",
            "--after",
            "application_1_0001,application_1_0002",
            "--after-ok",
            "application_1_0003",
        ]))
        .unwrap();
        assert_eq!(
            o.lifetime,
            Some(Duration::from_secs(86_400 + 2 * 3600 + 180))
        );
        assert_eq!(
            o.dependencies.after_any,
            vec![
                "application_1_0001".parse().unwrap(),
                "application_1_0002".parse().unwrap()
            ]
        );
        assert_eq!(
            o.dependencies.after_ok,
            vec!["application_1_0003".parse().unwrap()]
        );
        for (args, named) in [
            (vec!["--time", "1:2:3:4"], "HH:MM:SS"),
            (vec!["--time", "0"], "above zero"),
            (vec!["--after", "app_1"], "after"),
            (vec!["--time", "5", "--timeout-ms", "100"], "not both"),
        ] {
            let mut all = vec!["-shell_command", "true"];
            all.extend(args);
            let e = options_from(&parsed(&all)).unwrap_err().to_string();
            assert!(e.contains(named), "{e}");
        }
    }

    #[test]
    fn gnu_spellings_and_defaults() {
        let p = parsed(&[
            "--num-containers=2",
            "--container-resources",
            "memory-mb=256,vcores=1",
            "--shell-command",
            "exit 1",
            "--queue",
            "a",
            "--appname",
            "x",
            "--priority",
            "7",
            "--timeout-ms",
            "5000",
            "--master-vcores",
            "2",
        ]);
        let o = options_from(&p).unwrap();
        assert_eq!(o.am.num_containers, 2);
        assert_eq!(o.queue.as_deref(), Some("a"));
        assert_eq!(o.app_name, "x");
        assert_eq!(o.priority, Some(7));
        assert_eq!(o.lifetime, Some(Duration::from_millis(5000)));
        assert_eq!(o.master_resources, Resource::new(512, 2));
        let o = options_from(&parsed(&[
            "-shell_command",
            "true",
            "-container_resources",
            "yarn.io/gpu=2",
        ]))
        .unwrap();
        assert_eq!(
            o.am.container_resources,
            default_container_resources().with("yarn.io/gpu", 2)
        );
        let o = options_from(&parsed(&["-shell_command", "true"])).unwrap();
        assert_eq!(o.am.num_containers, 1);
        assert_eq!(o.am.container_resources, default_container_resources());
    }

    #[test]
    fn placement_spec_and_label() {
        let o = options_from(&parsed(&[
            "-shell_command",
            "true",
            "-num_containers",
            "0",
            "-placement_spec",
            "zk=3,NOTIN,NODE,zk:hbase=5,IN,RACK,zk",
            "-node_label_expression",
            "h100",
        ]))
        .expect("good options");
        assert_eq!(o.am.num_containers, 8);
        assert_eq!(o.am.placement.len(), 2);
        assert_eq!(o.am.placement[1].source_tag, "hbase");
        assert_eq!(o.am.node_label_expression.as_deref(), Some("h100"));
        assert_eq!(o.launch().app_node_label_expression, Some("h100"));
        // The GNU spelling, and the mistake named before anything is submitted.
        let e = options_from(&parsed(&[
            "--shell-command",
            "true",
            "--placement-spec",
            "zk=3,NOTIN,NODES,zk",
        ]))
        .expect_err("bad scope");
        assert!(
            e.to_string()
                .contains("unknown scope `NODES` at position 12 in `zk=3,NOTIN,NODES,zk`"),
            "{e}"
        );
        assert!(options_from(&parsed(&[
            "-shell_command",
            "true",
            "-node_label_expression",
            " "
        ]))
        .is_err());
    }

    #[test]
    fn bad_options_are_refused() {
        assert!(options_from(&parsed(&[])).is_err());
        let o = options_from(&parsed(&["-shell_script", "run.sh", "-shell_args", "1"])).unwrap();
        assert_eq!(o.am.shell_command, "bash ExecScript.sh 1");
        assert_eq!(
            o.ship.files,
            [("ExecScript.sh".to_string(), "run.sh".into())]
        );
        let e = options_from(&parsed(&[
            "-shell_script",
            "run.sh",
            "-shell_command",
            "true",
        ]))
        .unwrap_err();
        assert!(e.to_string().contains("exclude each other"), "{e}");
        let o = options_from(&parsed(&[
            "-shell_command",
            "python3 t.py",
            "--files",
            "t.py,conf/a.yaml#a.yaml",
            "--src-dir",
            ".",
        ]))
        .unwrap();
        let names: Vec<&str> = o.ship.files.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["t.py", "a.yaml"]);
        assert_eq!(o.ship.src_dir.as_deref(), Some(std::path::Path::new(".")));
        for bad in [
            &["-shell_command", "x", "-num_containers", "0"][..],
            &["-shell_command", "x", "-num_containers", "many"],
            &[
                "-shell_command",
                "x",
                "-container_resources",
                "memory-mb=abc",
            ],
            &["-shell_command", "x", "-container_resources", "vcores=0"],
            &["-shell_command", "x", "-shell_env", "NOEQUALS"],
            &["-shell_command", " "],
        ] {
            assert!(options_from(&parsed(bad)).is_err(), "{bad:?}");
        }
    }
}
