//! `spindle completion bash|zsh|fish`: a shell completion script generated from the CLI
//! definition — each command's option table ([`Opt`], the same tables the parser reads)
//! plus the options every client command takes ([`COMMON_OPTS`](super::COMMON_OPTS)).
//! Options are offered in YARN's single-dash spelling (`-appStates`), with their aliases.
//!
//! Install: `source <(spindle completion bash)`; zsh: `spindle completion zsh >
//! "${fpath[1]}/_spindle"`; fish: `spindle completion fish > ~/.config/fish/completions/spindle.fish`.

use super::args::{Arity, Opt, UsageError};
use super::token;
use super::{
    accounting, application, applicationattempt, cluster, clustersecret, container, dshell, image,
    logs, minicluster, node, nodeattributes, queue, rmadmin, schedulerconf, sls, submit, sweep,
    top, train, usage_error, EXIT_OK,
};

pub const USAGE: &str = "\
usage: spindle completion bash|zsh|fish
  Prints a completion script for the shell, generated from the commands' option tables:
    bash:  source <(spindle completion bash)
    zsh:   spindle completion zsh > \"${fpath[1]}/_spindle\"
    fish:  spindle completion fish > ~/.config/fish/completions/spindle.fish";

/// One command as completion sees it.
#[derive(Debug, Clone, Copy)]
pub struct Command {
    pub name: &'static str,
    pub about: &'static str,
    /// Its option table (without the common options).
    pub opts: &'static [Opt],
    /// Whether it takes `--rm-address`, `--conf-dir` and `-help`.
    pub common: bool,
    /// Words it takes in first position (`sls generate`, `bench gangs`).
    pub words: &'static [&'static str],
}

const fn cmd(
    name: &'static str,
    about: &'static str,
    opts: &'static [Opt],
    common: bool,
) -> Command {
    Command {
        name,
        about,
        opts,
        common,
        words: &[],
    }
}

/// Every user-facing command (the hidden `*-am` ones are left out).
pub const COMMANDS: &[Command] = &[
    cmd(
        "application",
        "list, inspect, kill, move or update applications",
        application::OPTS,
        true,
    ),
    cmd(
        "applicationattempt",
        "list or inspect application attempts",
        applicationattempt::OPTS,
        true,
    ),
    cmd(
        "container",
        "list or inspect containers of an attempt",
        container::OPTS,
        true,
    ),
    cmd(
        "node",
        "list nodes or print a node's report",
        node::OPTS,
        true,
    ),
    cmd(
        "image",
        "container images on the nodes, or pull one ahead of jobs",
        image::OPTS,
        true,
    ),
    cmd(
        "queue",
        "a queue's information, or a table of queues",
        queue::OPTS,
        true,
    ),
    cmd(
        "top",
        "a live view of the cluster and its applications",
        top::OPTS,
        true,
    ),
    cmd(
        "accounting",
        "GPU-hours and wall hours per queue, user or application over a period",
        accounting::OPTS,
        true,
    ),
    cmd(
        "rmadmin",
        "ResourceManager administration",
        rmadmin::OPTS,
        true,
    ),
    cmd(
        "schedulerconf",
        "change or print the capacity scheduler's live configuration",
        schedulerconf::OPTS,
        true,
    ),
    cmd(
        "nodeattributes",
        "node attributes",
        nodeattributes::OPTS,
        true,
    ),
    cmd(
        "cluster",
        "cluster-wide node labels and attributes",
        cluster::OPTS,
        true,
    ),
    cmd("logs", "container logs of an application", logs::OPTS, true),
    cmd(
        "distributed-shell",
        "run a shell command in N containers",
        dshell::OPTS,
        true,
    ),
    cmd("train", "run N workers as one gang", train::OPTS, true),
    cmd(
        "submit",
        "run your own application master (--am-file BIN or --am-command CMD)",
        submit::OPTS,
        true,
    ),
    cmd(
        "sweep",
        "run a command per trial of a grid or job array",
        sweep::OPTS,
        true,
    ),
    cmd(
        "token",
        "mint, fetch, cancel or print users' tokens (token authentication)",
        token::OPTS,
        true,
    ),
    cmd(
        "minicluster",
        "a ResourceManager and NodeManagers on this machine",
        minicluster::OPTS,
        false,
    ),
    cmd(
        "cluster-secret",
        "create or check the secret that authenticates NodeManagers",
        clustersecret::OPTS,
        false,
    ),
    Command {
        name: "bench",
        about: "benchmark the scheduler core or a running RM's HTTP edge",
        opts: &[],
        common: false,
        words: &["scheduler", "gangs", "http"],
    },
    Command {
        name: "sls",
        about: "replay a job trace through the scheduler core",
        opts: sls::OPTS,
        common: false,
        words: &["generate", "policies", "compare"],
    },
    Command {
        name: "completion",
        about: "print a shell completion script",
        opts: &[],
        common: false,
        words: &["bash", "zsh", "fish"],
    },
    cmd("help", "print the usage", &[], false),
    cmd("version", "print the version", &[], false),
];

/// The options a command's completion offers, in YARN's spelling: `-name` and `-alias`.
pub fn option_words(c: &Command) -> Vec<String> {
    let common: &[Opt] = if c.common { &super::COMMON_OPTS } else { &[] };
    let mut out: Vec<String> = Vec::new();
    for o in c.opts.iter().chain(common) {
        for n in std::iter::once(o.name).chain(o.aliases.iter().copied()) {
            let w = format!("-{n}");
            if !out.contains(&w) {
                out.push(w);
            }
        }
    }
    out
}

/// Whether the option takes a value (a file or a word follows it).
fn takes_value(o: &Opt) -> bool {
    o.arity != Arity::Flag
}

fn single_quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

pub fn bash() -> String {
    let names: Vec<&str> = COMMANDS.iter().map(|c| c.name).collect();
    let mut s = String::new();
    s.push_str("# spindle completion for bash, generated by `spindle completion bash`.\n");
    s.push_str("# Use: source <(spindle completion bash)\n");
    s.push_str("_spindle() {\n");
    s.push_str("    local cur=\"${COMP_WORDS[COMP_CWORD]}\"\n");
    s.push_str("    if [[ $COMP_CWORD -eq 1 ]]; then\n");
    s.push_str(&format!(
        "        COMPREPLY=( $(compgen -W \"{}\" -- \"$cur\") )\n",
        names.join(" ")
    ));
    s.push_str("        return\n    fi\n");
    s.push_str("    local opts=\"\" words=\"\"\n");
    s.push_str("    case \"${COMP_WORDS[1]}\" in\n");
    for c in COMMANDS {
        s.push_str(&format!(
            "        {}) opts=\"{}\"; words=\"{}\" ;;\n",
            c.name,
            option_words(c).join(" "),
            c.words.join(" ")
        ));
    }
    s.push_str("    esac\n");
    s.push_str("    if [[ $COMP_CWORD -eq 2 && -n \"$words\" && \"$cur\" != -* ]]; then\n");
    s.push_str(
        "        COMPREPLY=( $(compgen -W \"$words\" -- \"$cur\") )\n        return\n    fi\n",
    );
    s.push_str("    if [[ \"$cur\" == -* ]]; then\n");
    s.push_str("        COMPREPLY=( $(compgen -W \"$opts\" -- \"$cur\") )\n    fi\n");
    s.push_str("}\n");
    s.push_str("complete -o default -F _spindle spindle\n");
    s
}

pub fn zsh() -> String {
    let quoted = |ws: &mut dyn Iterator<Item = String>| {
        ws.map(|w| single_quoted(&w)).collect::<Vec<_>>().join(" ")
    };
    let mut s = String::new();
    s.push_str("#compdef spindle\n");
    s.push_str("# spindle completion for zsh, generated by `spindle completion zsh`.\n");
    s.push_str("_spindle() {\n");
    // `words` is zsh's array of the command line: the tables use other names.
    s.push_str("    local -a commands opts subs\n");
    s.push_str("    commands=(\n");
    for c in COMMANDS {
        s.push_str(&format!(
            "        {}\n",
            single_quoted(&format!("{}:{}", c.name, c.about))
        ));
    }
    s.push_str("    )\n");
    s.push_str("    if (( CURRENT == 2 )); then\n");
    s.push_str(
        "        _describe -t commands 'spindle command' commands\n        return\n    fi\n",
    );
    s.push_str("    case ${words[2]} in\n");
    for c in COMMANDS {
        s.push_str(&format!(
            "        {}) opts=({}); subs=({}) ;;\n",
            c.name,
            quoted(&mut option_words(c).into_iter()),
            quoted(&mut c.words.iter().map(|w| w.to_string())),
        ));
    }
    s.push_str("    esac\n");
    s.push_str("    if (( CURRENT == 3 )) && (( ${#subs} )) && [[ $PREFIX != -* ]]; then\n");
    s.push_str("        compadd -a subs\n        return\n    fi\n");
    s.push_str("    if [[ $PREFIX == -* ]]; then\n");
    s.push_str("        compadd -a opts\n    else\n        _files\n    fi\n");
    s.push_str("}\n");
    s.push_str("compdef _spindle spindle\n");
    s
}

pub fn fish() -> String {
    let names: Vec<&str> = COMMANDS.iter().map(|c| c.name).collect();
    let mut s = String::new();
    s.push_str("# spindle completion for fish, generated by `spindle completion fish`.\n");
    for c in COMMANDS {
        s.push_str(&format!(
            "complete -c spindle -f -n 'not __fish_seen_subcommand_from {}' -a {} -d {}\n",
            names.join(" "),
            c.name,
            single_quoted(c.about)
        ));
    }
    for c in COMMANDS {
        let cond = format!("__fish_seen_subcommand_from {}", c.name);
        for w in c.words {
            s.push_str(&format!("complete -c spindle -f -n '{cond}' -a {w}\n"));
        }
        let common: &[Opt] = if c.common { &super::COMMON_OPTS } else { &[] };
        for o in c.opts.iter().chain(common) {
            for n in std::iter::once(o.name).chain(o.aliases.iter().copied()) {
                // `-o name` is fish's single-dash long option: YARN's `-name`.
                let value = if takes_value(o) { " -r" } else { "" };
                s.push_str(&format!(
                    "complete -c spindle -n '{cond}' -o {}{value}\n",
                    single_quoted(n)
                ));
            }
        }
    }
    s
}

pub async fn run(args: Vec<String>) -> anyhow::Result<u8> {
    let shell = match args.as_slice() {
        [one] if matches!(one.as_str(), "-help" | "--help" | "-h") => {
            say!("{USAGE}");
            return Ok(EXIT_OK);
        }
        [one] => one.as_str(),
        _ => {
            return Err(usage_error(
                UsageError::Other("name one shell: bash, zsh or fish".into()),
                USAGE,
            ))
        }
    };
    let script = match shell {
        "bash" => bash(),
        "zsh" => zsh(),
        "fish" => fish(),
        other => {
            return Err(usage_error(
                UsageError::Other(format!("unknown shell '{other}': bash, zsh or fish")),
                USAGE,
            ))
        }
    };
    say_raw!("{script}");
    Ok(EXIT_OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every command the usage text lists (its first column) has a completion entry.
    #[test]
    fn every_command_in_the_usage_is_completed() {
        let usage_cmds: Vec<&str> = super::super::USAGE
            .lines()
            .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
            .filter_map(|l| l.split_whitespace().next())
            .filter(|w| w.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
            .collect();
        assert!(usage_cmds.len() >= 10, "{usage_cmds:?}");
        for u in &usage_cmds {
            assert!(
                COMMANDS.iter().any(|c| c.name == *u),
                "`{u}` is in the usage but has no completion entry"
            );
        }
    }

    #[test]
    fn every_command_and_option_appears_in_each_script() {
        for (shell, script) in [("bash", bash()), ("zsh", zsh()), ("fish", fish())] {
            for c in COMMANDS {
                assert!(script.contains(c.name), "{shell}: command {}", c.name);
                let common: &[Opt] = if c.common {
                    &super::super::COMMON_OPTS
                } else {
                    &[]
                };
                for o in c.opts.iter().chain(common) {
                    for n in std::iter::once(o.name).chain(o.aliases.iter().copied()) {
                        let spelled = match shell {
                            "fish" => format!("-o '{n}'"),
                            "zsh" => format!("'-{n}'"),
                            _ => format!("-{n}"),
                        };
                        assert!(
                            script.contains(&spelled),
                            "{shell}: {} -{n} missing",
                            c.name
                        );
                    }
                }
                for w in c.words {
                    assert!(script.contains(w), "{shell}: {} {w}", c.name);
                }
            }
        }
        // The new commands' options, by name.
        let b = bash();
        for w in [
            "-movetoqueue",
            "-changeQueue",
            "-updatePriority",
            "-updateLifetime",
            "-appTags",
            "-delay",
        ] {
            assert!(b.contains(w), "{w}");
        }
    }
}
