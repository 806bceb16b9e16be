//! `spindle token`: users' tokens for an RM in `token` mode
//! (`hadoop.http.authentication.type=token`, see `spindle_common::user_token`), in the spirit
//! of `hdfs fetchdt`:
//!
//! * `-newKey FILE`: writes a new signing key (32 random bytes, hex, created `0600`, never
//!   over an existing file) for `hadoop.http.authentication.signature.secret.file`;
//! * `-issue -user U [-renewer R] [-validity 7d] [-keyFile F]`: an operator holding the key
//!   mints a token offline (the bootstrap: the first token cannot come from the RM);
//! * `-fetch [-renewer R]`: asks the RM for a new token for oneself (with a token in hand:
//!   `$SPINDLE_TOKEN`, `$SPINDLE_TOKEN_FILE` or `spindle.client.token-file`);
//! * `-cancel [TOKEN]`: cancels TOKEN (default the one in hand) at the RM;
//! * `-print [TOKEN]`: what a token says (not verified).
//!
//! A minted or fetched token is printed alone on stdout (`spindle token -issue -user alice >
//! alice.token`); what it says goes to stderr.

use std::path::{Path, PathBuf};

use anyhow::Context;
use spindle_appmaster_sdk::address::load_conf_dir;
use spindle_common::config::{keys, Configuration};
use spindle_common::time::{format_iso8601, now_ms};
use spindle_common::user_token::{self, UserTokenIdentifier, UserTokenKey};

use super::args::{Opt, Parsed, UsageError};
use super::{parse_or_usage, rm_client, usage_error, EXIT_OK};

pub const USAGE: &str = "\
usage: spindle token -newKey FILE
                   | -issue -user USER [-renewer USER] [-validity 7d] [-keyFile FILE]
                   | -fetch [-renewer USER] | -cancel [TOKEN] | -print [TOKEN]
  -newKey FILE   write a new token-signing key to FILE (32 random bytes as hex, mode 0600;
                 never over an existing file); name it in the RM's yarn-site.xml as
                 hadoop.http.authentication.signature.secret.file, with
                 hadoop.http.authentication.type=token
  -issue         mint a token for -user offline with the key (-keyFile, else the key file
                 the conf dir names), valid for -validity (s, m, h or d; default 7d); the
                 token alone goes to stdout
  -fetch         ask the RM for a new token for yourself (you need a token already), valid
                 no longer than yours
  -cancel        cancel TOKEN (default: yours) at the RM; its owner or renewer may
  -print         show what TOKEN (default: yours) says, without checking it
Clients send the token from $SPINDLE_TOKEN, else the file $SPINDLE_TOKEN_FILE names, else
the file spindle.client.token-file names in yarn-site.xml.";

pub const OPTS: &[Opt] = &[
    Opt::one("newKey", &["new-key"]),
    Opt::flag("issue", &[]),
    Opt::flag("fetch", &[]),
    Opt::flag("cancel", &[]),
    Opt::flag("print", &[]),
    Opt::one("user", &[]),
    Opt::one("renewer", &[]),
    Opt::one("validity", &[]),
    Opt::one("keyFile", &["key-file"]),
];

/// The default validity of an offline token (Hadoop's delegation-token max lifetime).
const DEFAULT_VALIDITY: &str = "7d";

/// What one call does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenCommand {
    NewKey(PathBuf),
    Issue {
        user: String,
        renewer: String,
        validity_ms: u64,
        key_file: Option<PathBuf>,
    },
    Fetch {
        renewer: Option<String>,
    },
    Cancel(Option<String>),
    Print(Option<String>),
}

pub fn command_from(p: &Parsed) -> Result<TokenCommand, UsageError> {
    let chosen: Vec<&str> = ["newKey", "issue", "fetch", "cancel", "print"]
        .into_iter()
        .filter(|o| p.has(o))
        .collect();
    let which = match chosen.as_slice() {
        [one] => *one,
        [] => {
            return Err(UsageError::Other(
                "give one of -newKey, -issue, -fetch, -cancel, -print".into(),
            ))
        }
        many => {
            return Err(UsageError::Other(format!(
                "give one of -newKey, -issue, -fetch, -cancel, -print, not {}",
                many.iter()
                    .map(|m| format!("-{m}"))
                    .collect::<Vec<_>>()
                    .join(" and ")
            )))
        }
    };
    let positional = || p.positionals.first().cloned();
    if p.positionals.len() > usize::from(matches!(which, "cancel" | "print")) {
        return Err(UsageError::Other(format!(
            "unexpected argument '{}'",
            p.positionals.last().map(String::as_str).unwrap_or_default()
        )));
    }
    Ok(match which {
        "newKey" => TokenCommand::NewKey(PathBuf::from(p.value("newKey").unwrap_or_default())),
        "issue" => {
            let user = p
                .value("user")
                .map(str::trim)
                .filter(|u| !u.is_empty())
                .ok_or_else(|| UsageError::Other("-issue needs -user USER".into()))?;
            if !user_token::valid_user(user) {
                return Err(UsageError::Other(format!(
                    "-user '{user}' is not a user name (no spaces, '/', '=' or control characters)"
                )));
            }
            let raw = p.value("validity").unwrap_or(DEFAULT_VALIDITY);
            let validity_ms = user_token::parse_validity(raw).ok_or_else(|| {
                UsageError::Other(format!(
                    "-validity '{raw}': expected a positive number with s, m, h or d (e.g. 7d)"
                ))
            })?;
            TokenCommand::Issue {
                user: user.to_string(),
                renewer: p.value("renewer").unwrap_or_default().to_string(),
                validity_ms,
                key_file: p.value("keyFile").map(PathBuf::from),
            }
        }
        "fetch" => TokenCommand::Fetch {
            renewer: p.value("renewer").map(str::to_string),
        },
        "cancel" => TokenCommand::Cancel(positional()),
        _ => TokenCommand::Print(positional()),
    })
}

/// The key file `-issue` signs with: the flag, else the one the conf dir names.
fn key_file(flag: Option<PathBuf>, conf_dir: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(f) = flag {
        return Ok(f);
    }
    let dir = Configuration::resolve_conf_dir(conf_dir);
    let conf = load_conf_dir(&dir)?;
    conf.get_nonempty(keys::HADOOP_HTTP_AUTHENTICATION_SIGNATURE_SECRET_FILE)?
        .map(|p| PathBuf::from(p.trim()))
        .ok_or_else(|| {
            anyhow::anyhow!(
                "no key file: give -keyFile FILE, or set {} in {}",
                keys::HADOOP_HTTP_AUTHENTICATION_SIGNATURE_SECRET_FILE,
                dir.display()
            )
        })
}

/// `hdfs fetchdt --print`'s shape.
pub fn describe(id: &UserTokenIdentifier) -> String {
    format!(
        "Kind: {}, Ident: (owner={}, renewer={}, issueDate={}, maxDate={} ({}), sequenceNumber={})",
        id.kind,
        id.owner,
        id.renewer,
        id.issue_date,
        id.max_date,
        format_iso8601(id.max_date),
        id.sequence_number
    )
}

/// The caller's token (the argument, else the one clients send).
fn token_in_hand(arg: Option<String>, p: &Parsed) -> anyhow::Result<String> {
    match arg {
        Some(t) => Ok(t),
        None => spindle_appmaster_sdk::user_token::resolve(p.value("conf-dir").map(Path::new))?
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "no token: give TOKEN, or set $SPINDLE_TOKEN or $SPINDLE_TOKEN_FILE"
                )
            }),
    }
}

pub async fn run(args: Vec<String>) -> anyhow::Result<u8> {
    let Some(p) = parse_or_usage(&args, OPTS, USAGE)? else {
        return Ok(EXIT_OK);
    };
    match command_from(&p).map_err(|e| usage_error(e, USAGE))? {
        TokenCommand::NewKey(file) => {
            UserTokenKey::create_file(&file).context("no key written")?;
            say!(
                "wrote a new token-signing key to {}, mode 0600; set {} to its path (and {}=token) in the ResourceManager's yarn-site.xml",
                file.display(),
                keys::HADOOP_HTTP_AUTHENTICATION_SIGNATURE_SECRET_FILE,
                keys::HADOOP_HTTP_AUTHENTICATION_TYPE
            );
        }
        TokenCommand::Issue {
            user,
            renewer,
            validity_ms,
            key_file: flag,
        } => {
            let file = key_file(flag, p.value("conf-dir").map(Path::new))?;
            let key = UserTokenKey::read_file(&file)?;
            let id = UserTokenIdentifier::new(&user, &renewer, now_ms(), validity_ms)?;
            eprintln!("{}", describe(&id));
            say!("{}", key.issue(&id));
        }
        TokenCommand::Fetch { renewer } => {
            let rm = rm_client(&p)?;
            let t = rm
                .delegation_token(renewer.as_deref())
                .await
                .with_context(|| format!("cannot get a token from {}", rm.address()))?;
            let token = t
                .token
                .ok_or_else(|| anyhow::anyhow!("{} answered no token", rm.address()))?;
            if let Ok(id) = user_token::decode_unverified(&token) {
                eprintln!("{}", describe(&id));
            }
            say!("{token}");
        }
        TokenCommand::Cancel(arg) => {
            let token = token_in_hand(arg, &p)?;
            let rm = rm_client(&p)?;
            rm.cancel_delegation_token(&token)
                .await
                .with_context(|| format!("cannot cancel the token at {}", rm.address()))?;
            say!("Cancelled the token at {}", rm.address());
        }
        TokenCommand::Print(arg) => {
            let token = token_in_hand(arg, &p)?;
            say!("{}", describe(&user_token::decode_unverified(&token)?));
        }
    }
    Ok(EXIT_OK)
}

#[cfg(test)]
mod tests {
    use super::super::args;
    use super::*;

    fn cmd(a: &[&str]) -> Result<TokenCommand, UsageError> {
        let all: Vec<Opt> = OPTS
            .iter()
            .chain(super::super::COMMON_OPTS.iter())
            .copied()
            .collect();
        let v: Vec<String> = a.iter().map(|s| s.to_string()).collect();
        command_from(&args::parse(&v, &all)?)
    }

    #[test]
    fn commands_parse_like_the_usage_says() {
        assert_eq!(
            cmd(&["-issue", "-user", "alice", "-validity", "12h"]).unwrap(),
            TokenCommand::Issue {
                user: "alice".into(),
                renewer: String::new(),
                validity_ms: 12 * 3_600_000,
                key_file: None
            }
        );
        assert!(matches!(
            cmd(&["-issue", "-user", "alice"]).unwrap(),
            TokenCommand::Issue { validity_ms, .. } if validity_ms == 7 * 86_400_000
        ));
        assert!(cmd(&["-issue"]).is_err());
        assert!(cmd(&["-issue", "-user", "a b"]).is_err());
        assert!(cmd(&["-issue", "-user", "alice", "-validity", "soon"]).is_err());
        assert!(cmd(&[]).is_err());
        assert!(cmd(&["-fetch", "-print"]).is_err());
        assert_eq!(
            cmd(&["-cancel", "tok"]).unwrap(),
            TokenCommand::Cancel(Some("tok".into()))
        );
        assert_eq!(cmd(&["-print"]).unwrap(), TokenCommand::Print(None));
        assert!(cmd(&["-fetch", "extra"]).is_err());
        assert_eq!(
            cmd(&["-newKey", "/tmp/k"]).unwrap(),
            TokenCommand::NewKey("/tmp/k".into())
        );
    }
}
