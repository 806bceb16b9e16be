//! Names and ACL text: whether a queue name is acceptable ([`check_queue_name`]), Hadoop's
//! ACL syntax to an [`Acl`] ([`parse_acl`]) and back ([`acl_string`], as `queueAcls` shows
//! it).
//!
//! Owns the syntax only, returning a plain reason on refusal; the caller wraps it in a
//! [`CapacityConfError`](super::CapacityConfError) with the rule and the property. It must
//! not decide who may do what (the core checks ACLs) and must not read properties.

use crate::core::queue_conf::Acl;

/// Longest queue name accepted.
const MAX_QUEUE_NAME: usize = 255;

/// Why a queue name is refused, if it is: YARN splits paths on `.`, and mappings and ACLs
/// on `:`, `,` and spaces.
pub fn check_queue_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() {
        return Err("empty name".into());
    }
    if name.len() > MAX_QUEUE_NAME {
        return Err(format!("longer than {MAX_QUEUE_NAME} bytes"));
    }
    if let Some(c) = name.chars().find(|c| {
        c.is_whitespace() || c.is_control() || matches!(c, '.' | ':' | '/' | ',' | '%' | '*')
    }) {
        return Err(format!("may not contain {:?}", c));
    }
    Ok(())
}

/// A Hadoop ACL: `"user1,user2 group1,group2"`; `*` for everyone; a lone space (or nothing)
/// for no one. Trailing whitespace, and leading whitespace that holds a newline or a tab (XML
/// formatting), are ignored; leading *spaces* alone are kept, because `" admins"` means
/// "only the group admins".
pub fn parse_acl(raw: &str) -> std::result::Result<Acl, String> {
    let text = raw.trim_end();
    let lead = &text[..text.len() - text.trim_start().len()];
    let text = if lead.contains(['\n', '\r', '\t']) {
        text.trim_start()
    } else {
        text
    };
    let (users, groups) = text.split_once(' ').unwrap_or((text, ""));
    if users.trim() == "*" || groups.trim() == "*" {
        return Ok(Acl::everyone());
    }
    let mut acl = Acl::nobody();
    for (part, set, what) in [
        (users, &mut acl.users, "user"),
        (groups, &mut acl.groups, "group"),
    ] {
        for n in part.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if n.contains(char::is_whitespace) {
                return Err(format!(
                    "ACL '{text}' has more than two space-separated parts; the form is \"user1,user2 group1,group2\""
                ));
            }
            if n.contains('*') || n.chars().any(char::is_control) {
                return Err(format!(
                    "ACL '{text}': {what} name '{n}' is invalid ('*' must stand alone, meaning everyone)"
                ));
            }
            set.insert(n.to_string());
        }
    }
    Ok(acl)
}

/// Hadoop's string form of an ACL, as `queueAcls` shows it.
pub fn acl_string(acl: &Acl) -> String {
    if acl.all {
        return "*".into();
    }
    let users: Vec<&str> = acl.users.iter().map(String::as_str).collect();
    let groups: Vec<&str> = acl.groups.iter().map(String::as_str).collect();
    if groups.is_empty() {
        if users.is_empty() {
            " ".into()
        } else {
            users.join(",")
        }
    } else {
        format!("{} {}", users.join(","), groups.join(","))
    }
}
