//! `spindle cluster-secret -generate FILE | -check FILE`: the cluster secret the
//! ResourceManager and every NodeManager share (`spindle.cluster.secret-file`, see
//! `spindle_common::cluster_secret`). `-generate` writes a new one, created `0600` and
//! never over an existing file; `-check` loads a file with the daemons' own rules (mode,
//! owner, length) and says whether they would accept it.

use std::path::Path;

use anyhow::Context;
use spindle_common::cluster_secret::{ClusterSecret, GENERATED_SECRET_BYTES};
use spindle_common::config::keys::CLUSTER_SECRET_FILE;

use super::args::{Opt, Parsed, UsageError};
use super::{parse_or_usage, usage_error, EXIT_OK};

pub const USAGE: &str = "\
usage: spindle cluster-secret -generate FILE | -check FILE
  -generate FILE   write a new cluster secret to FILE: 32 random bytes from the operating
                   system, as hex, in a file created with mode 0600 (owned by you); an
                   existing FILE is never overwritten
  -check FILE      read FILE as the daemons do (a regular file, mode 0600 or 0400, owned by
                   you, hex of at least 32 bytes) and say whether they would accept it
Copy the same file to the ResourceManager and every NodeManager (as the user each daemon
runs as, mode 0600) and set spindle.cluster.secret-file to its path in their yarn-site.xml:
node registrations, heartbeats and unregistrations are then signed with it, and the RM
refuses (401) any that are not.";

pub const OPTS: &[Opt] = &[Opt::one("generate", &[]), Opt::one("check", &[])];

/// What one call does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretCommand {
    Generate(String),
    Check(String),
}

pub fn command_from(p: &Parsed) -> Result<SecretCommand, UsageError> {
    if let Some(extra) = p.positionals.first() {
        return Err(UsageError::Other(format!("unexpected argument '{extra}'")));
    }
    match (p.value("generate"), p.value("check")) {
        (Some(f), None) => Ok(SecretCommand::Generate(f.to_string())),
        (None, Some(f)) => Ok(SecretCommand::Check(f.to_string())),
        (None, None) => Err(UsageError::Other(
            "give -generate FILE or -check FILE".into(),
        )),
        (Some(_), Some(_)) => Err(UsageError::Other("give one of -generate and -check".into())),
    }
}

pub async fn run(args: Vec<String>) -> anyhow::Result<u8> {
    let Some(p) = parse_or_usage(&args, OPTS, USAGE)? else {
        return Ok(EXIT_OK);
    };
    match command_from(&p).map_err(|e| usage_error(e, USAGE))? {
        SecretCommand::Generate(file) => {
            ClusterSecret::generate_file(Path::new(&file)).context("no cluster secret written")?;
            say!(
                "wrote a new cluster secret ({GENERATED_SECRET_BYTES} random bytes, hex) to {file}, mode 0600; \
                 copy it to the ResourceManager and every NodeManager and set {CLUSTER_SECRET_FILE} to its path"
            );
        }
        SecretCommand::Check(file) => {
            ClusterSecret::load(Path::new(&file)).context("the daemons would refuse it")?;
            say!("{file}: a valid cluster secret (the daemons accept it as {CLUSTER_SECRET_FILE})");
        }
    }
    Ok(EXIT_OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<SecretCommand, UsageError> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        command_from(&super::super::args::parse(&args, OPTS).unwrap())
    }

    #[test]
    fn one_command_with_its_file() {
        assert_eq!(
            parse(&["-generate", "/x/s"]),
            Ok(SecretCommand::Generate("/x/s".into()))
        );
        assert_eq!(
            parse(&["--check=/x/s"]),
            Ok(SecretCommand::Check("/x/s".into()))
        );
        assert!(parse(&[]).is_err());
        assert!(parse(&["-generate", "a", "-check", "b"]).is_err());
        assert!(parse(&["-generate", "a", "b"]).is_err());
    }
}
