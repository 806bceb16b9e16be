//! `${...}` expansion, following Hadoop's `Configuration.substituteVars`:
//!
//! - a reference is `${` + one or more characters other than `}`, `$` and space + `}`;
//!   anything else (`${}`, `${a b}`, a lone `$`) is plain text;
//! - `${env.NAME}` is the environment variable, `${env.NAME:-dflt}` uses `dflt` when it is
//!   unset *or empty*, `${env.NAME-dflt}` only when it is unset; an unset `${env.NAME}` falls
//!   back to a property literally named `env.NAME`, as in Hadoop;
//! - otherwise the built-in "system properties" `user.name`, `user.home`, `java.io.tmpdir`
//!   win (Hadoop looks at Java system properties first), then the configuration's own
//!   properties, then the built-in defaults of [`keys::DEFAULTS`];
//! - a reference that resolves to nothing is left verbatim, and the rest of the value is
//!   still expanded (Hadoop stops at the first one; going on is strictly more useful);
//! - the expansion of a referenced value is itself expanded, and a value is re-scanned after
//!   each pass so that references assembled from pieces (`${env.X:-${y}}`) resolve.
//!
//! Where Spindle differs on purpose: Hadoop returns a self-referential value unexpanded and
//! throws only when its substitution budget runs out; here a reference cycle is reported as
//! a cycle (`a -> b -> a`), and the budget is [`MAX_SUBST`] levels of *nesting* (and
//! re-scans), not 20 references per value, so a long list of `${x}/dir` entries works.
//! Expansions are memoised per call, so a property referenced many times is expanded once
//! and the work stays proportional to the configuration's size.

use std::collections::HashMap;

use super::{keys, Configuration, MAX_EXPANDED_LEN, MAX_SUBST};

impl Configuration {
    /// Expands `value`, the value of property `root` (or its default). Errors are messages
    /// for [`super::ConfigError::Expansion`].
    pub(super) fn expand(&self, root: &str, value: &str) -> Result<String, String> {
        if !value.contains("${") {
            return Ok(value.to_string());
        }
        let mut expander = Expander {
            conf: self,
            chain: vec![root.to_string()],
            memo: HashMap::new(),
        };
        expander.expand_text(value)
    }

    /// An environment variable, from the [`Configuration::with_env`] map if one was given.
    fn env_var(&self, name: &str) -> Option<String> {
        // The standard library refuses these names; they can never be set.
        if name.is_empty() || name.contains(['=', '\0']) {
            return None;
        }
        match &self.env {
            Some(map) => map.get(name).cloned(),
            None => std::env::var_os(name).map(|v| v.to_string_lossy().into_owned()),
        }
    }

    /// Hadoop's built-in Java system properties that configuration files commonly use.
    fn builtin(&self, name: &str) -> Option<String> {
        match name {
            "user.name" => self
                .env_var("USER")
                .filter(|u| !u.is_empty())
                .or_else(|| os_user().map(|u| u.name)),
            "user.home" => self
                .env_var("HOME")
                .filter(|h| !h.is_empty())
                .or_else(|| os_user().and_then(|u| u.home)),
            // Java's default on Unix, whatever $TMPDIR says.
            "java.io.tmpdir" => Some("/tmp".to_string()),
            _ => None,
        }
    }

    /// A property's stored value, else its built-in default.
    fn raw_or_default(&self, name: &str) -> Option<&str> {
        self.get_raw(name).or_else(|| keys::default_of(name))
    }
}

struct Expander<'c> {
    conf: &'c Configuration,
    /// The references being expanded, outermost first: property names, and `env.NAME` for
    /// environment variables whose values are being expanded.
    chain: Vec<String>,
    /// Finished expansions by reference key. Sound because a reference that expanded once
    /// without error expands the same way from anywhere else in this call: had it been part
    /// of a cycle, its first expansion would already have met the cycle.
    memo: HashMap<String, String>,
}

impl Expander<'_> {
    /// Expands `text` in passes until a pass changes nothing.
    fn expand_text(&mut self, text: &str) -> Result<String, String> {
        let mut current = text.to_string();
        for _ in 0..=MAX_SUBST {
            let (next, changed) = self.pass(&current)?;
            if !changed {
                return Ok(next);
            }
            current = next;
        }
        Err(format!(
            "variable substitution did not settle after {MAX_SUBST} rounds"
        ))
    }

    /// One left-to-right pass: every resolvable reference is replaced by its full expansion.
    fn pass(&mut self, text: &str) -> Result<(String, bool), String> {
        let mut out = String::with_capacity(text.len());
        let mut changed = false;
        let mut pos = 0;
        while let Some((start, end)) = find_reference(text, pos) {
            out.push_str(&text[pos..start]);
            match self.resolve(&text[start + 2..end - 1])? {
                Some(v) => {
                    out.push_str(&v);
                    changed = true;
                }
                None => out.push_str(&text[start..end]),
            }
            if out.len() > MAX_EXPANDED_LEN {
                return Err(too_long());
            }
            pos = end;
        }
        out.push_str(&text[pos..]);
        if out.len() > MAX_EXPANDED_LEN {
            return Err(too_long());
        }
        Ok((out, changed))
    }

    /// The expansion of the reference `${var}`, or None to leave it verbatim.
    fn resolve(&mut self, var: &str) -> Result<Option<String>, String> {
        if let Some(rest) = var.strip_prefix("env.").filter(|r| !r.is_empty()) {
            let (name, default) = split_env(rest);
            let value = self.conf.env_var(name);
            let chosen = match default {
                Some((true, d)) => Some(value.filter(|v| !v.is_empty()).ok_or(d)),
                Some((false, d)) => Some(value.ok_or(d)),
                None => value.map(Ok),
            };
            match chosen {
                Some(Ok(v)) => return self.nested(&format!("env.{name}"), &v).map(Some),
                // A default cannot contain `$` (the reference grammar forbids it): literal.
                Some(Err(d)) => return Ok(Some(d.to_string())),
                None => {}
            }
        }
        if let Some(v) = self.conf.builtin(var) {
            return Ok(Some(v));
        }
        match self.conf.raw_or_default(var) {
            Some(raw) => self.nested(var, raw).map(Some),
            None => Ok(None),
        }
    }

    /// Expands `text`, the value behind reference `key`, one level deeper.
    fn nested(&mut self, key: &str, text: &str) -> Result<String, String> {
        if let Some(done) = self.memo.get(key) {
            return Ok(done.clone());
        }
        if self.chain.iter().any(|k| k == key) {
            return Err(format!(
                "reference cycle {} -> {key} (a value may not refer back to itself)",
                self.chain.join(" -> ")
            ));
        }
        if self.chain.len() > MAX_SUBST {
            return Err(format!(
                "variable substitution depth too large: more than {MAX_SUBST} nested references ({} -> {key})",
                self.chain.join(" -> ")
            ));
        }
        if !text.contains("${") {
            return Ok(text.to_string());
        }
        self.chain.push(key.to_string());
        let result = self.expand_text(text);
        self.chain.pop();
        let done = result?;
        self.memo.insert(key.to_string(), done.clone());
        Ok(done)
    }
}

fn too_long() -> String {
    format!("expanded value is longer than {MAX_EXPANDED_LEN} bytes")
}

/// The first reference at or after byte `from`: `(start of "${", end after "}")`, with
/// Hadoop's grammar (`findSubVariable`): the name is one or more characters other than
/// `}`, `$` and space. All delimiters are ASCII, so the offsets are char boundaries.
fn find_reference(text: &str, from: usize) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut i = from;
    while i + 1 < bytes.len() {
        if bytes[i] != b'$' || bytes[i + 1] != b'{' {
            i += 1;
            continue;
        }
        let mut j = i + 2;
        loop {
            match bytes.get(j) {
                None => return None,
                Some(b'}') if j > i + 2 => return Some((i, j + 1)),
                // `${}` or `${a b}`: not a reference; look again after it.
                Some(b'}') | Some(b' ') => {
                    i = j + 1;
                    break;
                }
                // `${a${b}}`: the inner `$` may start the reference.
                Some(b'$') => {
                    i = j;
                    break;
                }
                Some(_) => j += 1,
            }
        }
    }
    None
}

/// Splits `NAME:-dflt` / `NAME-dflt` / `NAME` the way Hadoop does: at the first `:-` or
/// `-`, whichever comes first. The flag is true for `:-` (default also when empty).
fn split_env(rest: &str) -> (&str, Option<(bool, &str)>) {
    let bytes = rest.as_bytes();
    for (i, &c) in bytes.iter().enumerate() {
        if c == b':' && bytes.get(i + 1) == Some(&b'-') {
            return (&rest[..i], Some((true, &rest[i + 2..])));
        }
        if c == b'-' {
            return (&rest[..i], Some((false, &rest[i + 1..])));
        }
    }
    (rest, None)
}

struct OsUser {
    name: String,
    home: Option<String>,
}

/// The account of this process's uid, from `/etc/passwd`, for `${user.name}` and
/// `${user.home}` when `$USER` / `$HOME` are unset (daemons started by init systems). Falls
/// back to the numeric uid as the name. `None` where the uid cannot be learnt.
fn os_user() -> Option<OsUser> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        // /proc/self belongs to the process's effective uid; no libc call needed.
        let uid = std::fs::metadata("/proc/self").ok()?.uid();
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        let entry = passwd.lines().find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            (fields.len() >= 6 && fields[2].parse() == Ok(uid)).then(|| OsUser {
                name: fields[0].to_string(),
                home: Some(fields[5].to_string()).filter(|h| !h.is_empty()),
            })
        });
        Some(entry.unwrap_or(OsUser {
            name: uid.to_string(),
            home: None,
        }))
    }
    #[cfg(not(unix))]
    {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_grammar_matches_hadoop() {
        assert_eq!(find_reference("a${b}c", 0), Some((1, 5)));
        assert_eq!(find_reference("${}", 0), None);
        assert_eq!(find_reference("${a b}", 0), None);
        assert_eq!(find_reference("${a b} ${c}", 0), Some((7, 11)));
        assert_eq!(find_reference("${a${b}}", 0), Some((3, 7)));
        assert_eq!(find_reference("$${a}", 0), Some((1, 5)));
        assert_eq!(find_reference("${abc", 0), None);
        assert_eq!(find_reference("$", 0), None);
        assert_eq!(find_reference("${é}", 0), Some((0, 5)));
    }

    #[test]
    fn env_split_matches_hadoop() {
        assert_eq!(split_env("X"), ("X", None));
        assert_eq!(split_env("X:-d"), ("X", Some((true, "d"))));
        assert_eq!(split_env("X-d"), ("X", Some((false, "d"))));
        assert_eq!(split_env("X:-"), ("X", Some((true, ""))));
        assert_eq!(split_env("X:y"), ("X:y", None));
        assert_eq!(split_env("X-a:-b"), ("X", Some((false, "a:-b"))));
    }
}
