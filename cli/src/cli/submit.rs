//! `spindle submit`: runs the user's own application master on the cluster (YARN's `yarn
//! jar`, the distributed shell client's `--jar`), on
//! [`spindle_appmaster_sdk::submission::Submission`]; following, Ctrl-C and the exit status
//! are the other submitting commands' ([`super::launch::run_client`]).

use spindle_appmaster_sdk::submission::{default_am_resources, Submission};
use spindle_common::records::resource::parse_resource_list;

use super::args::{Opt, Parsed, UsageError};
use super::dshell::env_from;
use super::launch::{app_options, invalid, run_client, AppFields};
use super::train::{prepare_shipment, shipment_from};
use super::{parse_or_usage, usage_error, EXIT_OK};
use spindle_appmaster_sdk::launch::shell_word;

pub const USAGE: &str = "\
usage: spindle submit (--am-file BIN | --am-command CMD) [options] [-- AM ARGS...]
Runs your own application master (a program linking spindle-appmaster-sdk, docs/sdk.md) on
the cluster: in its own container, with the RM's address and its AM-RM token in its
environment, and everything shipped in its working directory. Without --detach the client
stays with the application (its waiting reason, progress, the exit summary) and Ctrl-C kills
it.

  --am-file BIN                 the AM program: shipped like --files and run as ./BIN with the
                                words after -- as its arguments
  --am-command CMD              the AM's command line instead (a program the node has, or one
                                shipped with --files, --archives or --src-dir)
  --env K=V                     a variable of the AM's environment (repeatable)
  --am-resources LIST           the AM container, over memory-mb=512,vcores=1 (the default);
                                --master-memory and --master-vcores also work
  --queue Q                     the leaf queue (default: the RM's default queue)
  --appname NAME                the application's name (default: the AM file's name)
  --priority P                  the application's priority
  --max-app-attempts N          AM attempts (default: yarn.resourcemanager.am.max-attempts)
  --time T                      Slurm's --time formats (MM, HH:MM:SS, D-HH): the RM kills the
                                application this long after submission (YARN's LIFETIME)
  --after IDS, --after-ok IDS   run only after these applications ended (succeeded)
  --image IMG [--mount S:D[:ro|rw]]  run the AM in a container image
  --files F1[#name],...         files for the AM's working directory (repeatable)
  --archives A.tgz[#dir],...    archives unpacked there (repeatable)
  --src-dir DIR                 a source directory, unpacked into the working directory
  --staging-dir DIR             stage in this shared directory instead of the RM's blob store
  --follow, --no-follow         stream the first container's stdout and stderr as they are
                                written (default: follow when stdout is a terminal)
  --detach                      return once the application is accepted, printing its id and
                                the commands to follow it, kill it and fetch its logs

Exit status: 0 when the application succeeded, 2 when it failed or was killed, 130 when
interrupted (the application is killed), 255 for a usage error.";

pub const OPTS: &[Opt] = &[
    Opt::one("am_file", &[]),
    Opt::one("am_command", &[]),
    Opt::repeated("env", &["am_env"]),
    Opt::one("am_resources", &[]),
    Opt::one("queue", &[]),
    Opt::one("appname", &["app_name", "name"]),
    Opt::one("priority", &[]),
    Opt::one("master_memory", &[]),
    Opt::one("master_vcores", &[]),
    Opt::one("max_app_attempts", &[]),
    Opt::one("time", &[]),
    Opt::one("timeout_ms", &["timeout"]),
    Opt::repeated("after", &[]),
    Opt::repeated("after_ok", &[]),
    Opt::one("image", &[]),
    Opt::repeated("mount", &[]),
    Opt::repeated("files", &[]),
    Opt::repeated("archives", &[]),
    Opt::one("src_dir", &[]),
    Opt::one("staging_dir", &[]),
    Opt::flag("follow", &[]),
    Opt::flag("no_follow", &[]),
    Opt::flag("detach", &[]),
];

/// The submission a command line describes.
pub fn submission_from(p: &Parsed) -> Result<Submission, UsageError> {
    let am_file = match p.value("am_file").map(str::trim) {
        Some("") => return Err(invalid("am_file", "", "empty")),
        other => other,
    };
    let mut app_name = am_file
        .and_then(|f| std::path::Path::new(f).file_name())
        .map_or_else(|| "spindle-am".into(), |n| n.to_string_lossy().into_owned());
    let (mut queue, mut priority, mut attempts) = (None, None, None);
    let mut am_resources = default_am_resources();
    let mut lifetime = None;
    let mut dependencies = Default::default();
    app_options(
        p,
        AppFields {
            app_name: &mut app_name,
            queue: &mut queue,
            priority: &mut priority,
            master_resources: &mut am_resources,
            max_app_attempts: Some(&mut attempts),
            lifetime: &mut lifetime,
            dependencies: &mut dependencies,
        },
    )?;
    if let Some(list) = p.value("am_resources") {
        let given = parse_resource_list(list).map_err(|r| invalid("am_resources", list, r))?;
        for (k, v) in given.entries().filter(|(_, v)| *v > 0) {
            am_resources.set(k, v);
        }
    }
    let mut s = Submission::new(app_name)
        .am_resources(am_resources)
        .dependencies(dependencies);
    *s.shipment_mut() = shipment_from(p)?;
    s = match (am_file, p.value("am_command")) {
        (Some(f), None) => s
            .am_file(f)
            .map_err(|e| invalid("am_file", f, e.to_string()))?
            .am_args(p.positionals.iter().cloned()),
        (None, Some(c)) if c.trim().is_empty() => return Err(invalid("am_command", c, "empty")),
        (None, Some(c)) => {
            let mut command = c.to_string();
            for a in &p.positionals {
                command.push(' ');
                command.push_str(&shell_word(a));
            }
            s.am_command(command)
        }
        (Some(f), Some(_)) => {
            return Err(invalid(
                "am_command",
                f,
                "--am-file and --am-command exclude each other: give one",
            ))
        }
        (None, None) => {
            return Err(UsageError::Other(
                "no application master given: use --am-file BIN or --am-command CMD".into(),
            ))
        }
    };
    for (k, v) in env_from(p, "env")? {
        s = s.env(k, v);
    }
    if let Some(q) = queue {
        s = s.queue(q);
    }
    if let Some(pr) = priority {
        s = s.priority(pr);
    }
    if let Some(n) = attempts {
        s = s.max_app_attempts(n);
    }
    if let Some(l) = lifetime {
        s = s.lifetime(l);
    }
    Ok(s)
}

pub async fn run_client_cmd(args: Vec<String>) -> anyhow::Result<u8> {
    let Some(p) = parse_or_usage(&args, OPTS, USAGE)? else {
        return Ok(EXIT_OK);
    };
    let mut s = submission_from(&p).map_err(|e| usage_error(e, USAGE))?;
    let command = s
        .command()
        .map_err(|e| usage_error(UsageError::Other(e.to_string()), USAGE))?;
    let words: Vec<String> = command.split_whitespace().map(str::to_string).collect();
    prepare_shipment(&p, s.shipment_mut(), &words)?;
    run_client(&p, &s.launch(&command), "application").await
}

#[cfg(test)]
mod tests {
    use super::super::args::parse;
    use super::*;

    fn from(a: &[&str]) -> Result<Submission, UsageError> {
        let args: Vec<String> = a.iter().map(|s| s.to_string()).collect();
        submission_from(&parse(&args, OPTS)?)
    }

    #[test]
    fn an_am_file_with_its_arguments_env_and_resources() {
        let s = from(&[
            "--am-file",
            "/opt/hp/hp-am",
            "--env",
            "TRIALS=4",
            "--am-resources",
            "memory-mb=1024",
            "--queue",
            "default",
            "--time",
            "10",
            "--",
            "--grid",
            "a b",
        ])
        .expect("parses");
        assert_eq!(s.command().unwrap(), "./hp-am --grid 'a b'");
        let cmd = s.command().unwrap();
        let l = s.launch(&cmd);
        assert_eq!(l.app_name, "hp-am");
        assert_eq!(l.queue, Some("default"));
        assert_eq!(l.master_resources.memory_mb, 1024);
        assert_eq!(l.master_resources.vcores, 1, "the default kept");
        assert_eq!(l.lifetime, Some(std::time::Duration::from_secs(600)));
        assert!(l.am_env.contains(&("TRIALS".to_string(), "4".to_string())));
        assert_eq!(s.shipment().files[0].0, "hp-am");
    }

    #[test]
    fn one_am_is_required() {
        let e = from(&["--queue", "q"]).unwrap_err().to_string();
        assert!(e.contains("--am-file BIN or --am-command CMD"), "{e}");
        let e = from(&["--am-file", "a", "--am-command", "b"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("exclude each other"), "{e}");
        let s = from(&[
            "--am-command",
            "python3 am.py",
            "--files",
            "am.py",
            "--",
            "x",
        ])
        .expect("parses");
        assert_eq!(s.command().unwrap(), "python3 am.py x");
        assert!(from(&["--am-file", "x", "--env", "NOEQUALS"]).is_err());
    }
}
