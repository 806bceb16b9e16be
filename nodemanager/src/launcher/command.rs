//! A container's command line: YARN's placeholders, and the plain commands exec'd without bash.

use std::path::Path;

/// bash builtins and keywords: a command starting with one must run in bash.
const SHELL_WORDS: &[&str] = &[
    "!",
    ".",
    ":",
    "[",
    "[[",
    "alias",
    "bg",
    "bind",
    "break",
    "builtin",
    "caller",
    "case",
    "cd",
    "command",
    "compgen",
    "complete",
    "continue",
    "coproc",
    "declare",
    "dirs",
    "disown",
    "do",
    "done",
    "echo",
    "elif",
    "else",
    "enable",
    "esac",
    "eval",
    "exec",
    "exit",
    "export",
    "false",
    "fc",
    "fg",
    "fi",
    "for",
    "function",
    "getopts",
    "hash",
    "help",
    "history",
    "if",
    "in",
    "jobs",
    "kill",
    "let",
    "local",
    "logout",
    "mapfile",
    "popd",
    "printf",
    "pushd",
    "pwd",
    "read",
    "readarray",
    "readonly",
    "return",
    "select",
    "set",
    "shift",
    "shopt",
    "source",
    "suspend",
    "test",
    "then",
    "time",
    "times",
    "trap",
    "true",
    "type",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "unset",
    "until",
    "wait",
    "while",
];

/// The argv of a command bash would run as one plain program with literal arguments (no
/// quotes, expansions, redirections, globs, operators or assignments), or None. A program
/// without a slash needs the container's `PATH` to be found; a relative path with a slash is
/// left to bash, whose meaning of it (the work dir) is certain.
pub fn plain_argv(command: &str, has_path: bool) -> Option<Vec<&str>> {
    let plain =
        |c: char| c.is_ascii_alphanumeric() || "_./:,@%+=-".contains(c) || c == ' ' || c == '\t';
    if !command.chars().all(plain) {
        return None;
    }
    let mut words: Vec<&str> = command.split_ascii_whitespace().collect();
    // `exec prog args` is what bash would do with a plain command anyway.
    if words.first() == Some(&"exec") {
        words.remove(0);
    }
    let prog = *words.first()?;
    // `X=1 prog` is an assignment; a builtin or keyword needs bash.
    if prog.contains('=') || SHELL_WORDS.contains(&prog) {
        return None;
    }
    let absolute = prog.starts_with('/');
    if !absolute && (prog.contains('/') || !has_path) {
        return None;
    }
    Some(words)
}

/// Expands YARN's command placeholders: `<LOG_DIR>` (the container's first log dir),
/// `<CPS>` (the class-path separator) and `{{VAR}}` (`$VAR`, YARN's cross-platform form).
pub fn expand_placeholders(s: &str, log_dir: &Path) -> String {
    let mut out = s
        .replace("<LOG_DIR>", &log_dir.to_string_lossy())
        .replace("<CPS>", ":");
    while let Some(start) = out.find("{{") {
        let Some(len) = out[start + 2..].find("}}") else {
            break;
        };
        let name = out[start + 2..start + 2 + len].to_string();
        out.replace_range(start..start + 2 + len + 2, &format!("${name}"));
    }
    out
}
