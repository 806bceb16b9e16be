//! A small argument parser for YARN-style options.
//!
//! `yarn` takes single-dash long options (`-list`, `-appStates RUNNING,ACCEPTED`), Hadoop's
//! distributed shell takes `-num_containers`; GNU style is `--num-containers`. Every spelling
//! is accepted: one or two dashes, `-name value` or `-name=value`, and names compare without
//! case, `-` or `_` (`-appStates` = `--app-states`, `-num_containers` = `--num-containers`).
//! A value may start with a dash (`--shell-command -x` takes `-x`).

use std::collections::BTreeMap;

/// How many values an option takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arity {
    /// A switch: `-list`.
    Flag,
    /// One value; given twice, the last wins.
    One,
    /// One value per occurrence, repeatable: `--shell-env A=1 --shell-env B=2`.
    Repeated,
    /// Like commons-cli's unlimited arguments: values up to the next option, each also split
    /// on commas: `-appStates RUNNING ACCEPTED`, `-appStates RUNNING,ACCEPTED`.
    List,
}

#[derive(Debug, Clone, Copy)]
pub struct Opt {
    /// The canonical name, as printed in messages (`appStates`).
    pub name: &'static str,
    /// Other names (`app-types`, `applicationTypes`); compared normalized as well.
    pub aliases: &'static [&'static str],
    pub arity: Arity,
}

impl Opt {
    pub const fn flag(name: &'static str, aliases: &'static [&'static str]) -> Self {
        Self {
            name,
            aliases,
            arity: Arity::Flag,
        }
    }
    pub const fn one(name: &'static str, aliases: &'static [&'static str]) -> Self {
        Self {
            name,
            aliases,
            arity: Arity::One,
        }
    }
    pub const fn repeated(name: &'static str, aliases: &'static [&'static str]) -> Self {
        Self {
            name,
            aliases,
            arity: Arity::Repeated,
        }
    }
    pub const fn list(name: &'static str, aliases: &'static [&'static str]) -> Self {
        Self {
            name,
            aliases,
            arity: Arity::List,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UsageError {
    #[error("unknown option '{0}'")]
    Unknown(String),
    #[error("option '-{0}' needs a value")]
    MissingValue(&'static str),
    #[error("option '-{0}' takes no value")]
    UnexpectedValue(&'static str),
    #[error("invalid value '{value}' for '-{option}': {reason}")]
    Invalid {
        option: &'static str,
        value: String,
        reason: String,
    },
    #[error("{0}")]
    Other(String),
}

/// What was given, by canonical option name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    values: BTreeMap<&'static str, Vec<String>>,
    pub positionals: Vec<String>,
}

impl Parsed {
    pub fn has(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }
    /// The last value of a single-valued option.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.values
            .get(name)
            .and_then(|v| v.last())
            .map(String::as_str)
    }
    /// Every value (list options already split on commas, empties dropped).
    pub fn values(&self, name: &str) -> &[String] {
        self.values.get(name).map_or(&[], Vec::as_slice)
    }
    /// Parses the value with `FromStr`, naming the option on failure.
    pub fn parse<T: std::str::FromStr>(&self, opt: &'static str) -> Result<Option<T>, UsageError> {
        self.value(opt)
            .map(|v| {
                v.trim().parse().map_err(|_| UsageError::Invalid {
                    option: opt,
                    value: v.to_string(),
                    reason: "not a valid number".into(),
                })
            })
            .transpose()
    }
}

fn normalize(s: &str) -> String {
    s.chars()
        .filter(|c| *c != '-' && *c != '_')
        .flat_map(char::to_lowercase)
        .collect()
}

fn find<'a>(opts: &'a [Opt], name: &str) -> Option<&'a Opt> {
    let n = normalize(name);
    opts.iter()
        .find(|o| normalize(o.name) == n || o.aliases.iter().any(|a| normalize(a) == n))
}

/// True for `-x`, `--xyz`, but not `-` alone or a negative number.
fn looks_like_option(a: &str) -> bool {
    a.len() > 1 && a.starts_with('-') && a[1..].parse::<f64>().is_err()
}

pub fn parse(args: &[String], opts: &[Opt]) -> Result<Parsed, UsageError> {
    let mut p = Parsed::default();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if a == "--" {
            p.positionals.extend(args[i..].iter().cloned());
            break;
        }
        if !looks_like_option(a) {
            p.positionals.push(a.clone());
            continue;
        }
        let body = a.strip_prefix("--").unwrap_or_else(|| &a[1..]);
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (body, None),
        };
        let opt = find(opts, name).ok_or_else(|| UsageError::Unknown(a.clone()))?;
        let slot = p.values.entry(opt.name).or_default();
        match opt.arity {
            Arity::Flag => {
                if inline.is_some() {
                    return Err(UsageError::UnexpectedValue(opt.name));
                }
            }
            Arity::One | Arity::Repeated => {
                let v = match inline {
                    Some(v) => v,
                    None => {
                        let v = args.get(i).ok_or(UsageError::MissingValue(opt.name))?;
                        i += 1;
                        v.clone()
                    }
                };
                slot.push(v);
            }
            Arity::List => {
                let mut raw = Vec::new();
                if let Some(v) = inline {
                    raw.push(v);
                } else {
                    while let Some(v) = args.get(i).filter(|v| !looks_like_option(v)) {
                        raw.push(v.clone());
                        i += 1;
                    }
                    if raw.is_empty() {
                        return Err(UsageError::MissingValue(opt.name));
                    }
                }
                slot.extend(
                    raw.iter()
                        .flat_map(|r| r.split(','))
                        .map(|s| s.trim().to_string())
                        .filter(|s| !s.is_empty()),
                );
            }
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPTS: &[Opt] = &[
        Opt::flag("list", &[]),
        Opt::list("appStates", &[]),
        Opt::one("status", &[]),
        Opt::one("shell_command", &[]),
        Opt::repeated("shell_env", &[]),
        Opt::one("priority", &[]),
        Opt::list("appTypes", &["applicationTypes"]),
    ];

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn yarn_and_gnu_spellings() {
        let p = parse(&args(&["-list", "-appStates", "RUNNING,ACCEPTED"]), OPTS).unwrap();
        assert!(p.has("list"));
        assert_eq!(p.values("appStates"), ["RUNNING", "ACCEPTED"]);
        let p = parse(
            &args(&["--list", "--app-states=running", "--app_states", "NEW"]),
            OPTS,
        )
        .unwrap();
        assert_eq!(p.values("appStates"), ["running", "NEW"]);
        let p = parse(&args(&["-appStates", "RUNNING", "ACCEPTED", "-list"]), OPTS).unwrap();
        assert_eq!(p.values("appStates"), ["RUNNING", "ACCEPTED"]);
        assert!(p.has("list"));
        let p = parse(&args(&["-applicationTypes", "MAPREDUCE"]), OPTS).unwrap();
        assert_eq!(p.values("appTypes"), ["MAPREDUCE"]);
    }

    #[test]
    fn values_may_look_like_options() {
        let p = parse(
            &args(&[
                "--shell-command",
                "-x",
                "-shell_env",
                "A=1",
                "--shell-env=B=2",
            ]),
            OPTS,
        )
        .unwrap();
        assert_eq!(p.value("shell_command"), Some("-x"));
        assert_eq!(p.values("shell_env"), ["A=1", "B=2"]);
        let p = parse(&args(&["--priority", "-1"]), OPTS).unwrap();
        assert_eq!(p.parse::<i32>("priority").unwrap(), Some(-1));
    }

    #[test]
    fn errors() {
        assert_eq!(
            parse(&args(&["-lst"]), OPTS),
            Err(UsageError::Unknown("-lst".into()))
        );
        assert_eq!(
            parse(&args(&["-status"]), OPTS),
            Err(UsageError::MissingValue("status"))
        );
        assert_eq!(
            parse(&args(&["-appStates", "-list"]), OPTS),
            Err(UsageError::MissingValue("appStates"))
        );
        assert_eq!(
            parse(&args(&["-list=1"]), OPTS),
            Err(UsageError::UnexpectedValue("list"))
        );
        let p = parse(&args(&["-priority", "x"]), OPTS).unwrap();
        assert!(p.parse::<i32>("priority").is_err());
        let p = parse(&args(&["a", "--", "-list"]), OPTS).unwrap();
        assert_eq!(p.positionals, ["a", "-list"]);
    }
}
