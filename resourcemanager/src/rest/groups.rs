//! The caller's groups, resolved at the REST edge as Hadoop's `ShellBasedUnixGroupsMapping`
//! does (`id -Gn <user>`), for queue ACLs, admin ACLs and `g:`/`%primary_group` queue
//! mappings. The core never does this I/O: it gets the groups with the request.
//!
//! Lookups run with a timeout and are cached (`hadoop.security.groups.cache.secs`; failures,
//! such as an unknown user, for `...negative-cache.secs`), so a burst of requests costs one
//! process per user, and a hung lookup never holds a request for long. Any failure means
//! "no groups", which can only deny, never grant, access. Users in
//! `hadoop.user.group.static.mapping.overrides` are never looked up.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use tracing::debug;

use crate::config::GroupsConfig;

/// Most cached users; past it, expired entries are dropped, then everything (a flood of
/// made-up `?user.name=` values must not grow memory without bound).
const MAX_CACHED_USERS: usize = 10_000;

pub(crate) struct Groups {
    conf: GroupsConfig,
    /// user -> (expires, groups). A cache, not cluster state: losing it costs lookups.
    cache: Mutex<HashMap<String, (Instant, Vec<String>)>>,
}

impl Groups {
    pub(crate) fn new(conf: GroupsConfig) -> Self {
        Self {
            conf,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The user's groups, primary group first; empty when unknown.
    pub(crate) async fn of(&self, user: &str) -> Vec<String> {
        if let Some(g) = self.conf.static_overrides.get(user) {
            return g.clone();
        }
        let now = Instant::now();
        if let Ok(cache) = self.cache.lock() {
            if let Some((expires, g)) = cache.get(user) {
                if *expires > now {
                    return g.clone();
                }
            }
        }
        let (groups, ttl) = match lookup(user, self.conf.command_timeout).await {
            Ok(g) => (g, self.conf.cache_ttl),
            Err(e) => {
                debug!(user, "no groups: {e}");
                (Vec::new(), self.conf.negative_cache_ttl)
            }
        };
        if let Ok(mut cache) = self.cache.lock() {
            if cache.len() >= MAX_CACHED_USERS {
                cache.retain(|_, (expires, _)| *expires > now);
                if cache.len() >= MAX_CACHED_USERS {
                    cache.clear();
                }
            }
            cache.insert(user.to_string(), (now + ttl, groups.clone()));
        }
        groups
    }
}

/// `id -Gn -- <user>`: the groups, primary first, space-separated.
async fn lookup(user: &str, timeout: std::time::Duration) -> Result<Vec<String>, String> {
    if user.is_empty() || user.starts_with('-') || user.contains(char::is_control) {
        return Err("not a user name".into());
    }
    let child = tokio::process::Command::new("id")
        .arg("-Gn")
        .arg("--")
        .arg(user)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(timeout, child)
        .await
        .map_err(|_| format!("id -Gn {user} took longer than {timeout:?}"))?
        .map_err(|e| format!("id -Gn {user}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "id -Gn {user}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn static_overrides_lookups_and_failures() {
        let mut conf = GroupsConfig::default();
        conf.static_overrides
            .insert("alice".into(), vec!["devs".into(), "ops".into()]);
        conf.command_timeout = Duration::from_secs(5);
        let g = Groups::new(conf);
        assert_eq!(g.of("alice").await, vec!["devs", "ops"]);
        assert!(g.of("dr.who").await.is_empty(), "Hadoop's default override");
        assert!(g.of("no-such-user-spindle-test").await.is_empty());
        assert!(g.of("-rf").await.is_empty());
        // The user running the tests exists (when `id` does): its primary group comes first.
        let me = String::from_utf8(
            std::process::Command::new("id")
                .arg("-un")
                .output()
                .map(|o| o.stdout)
                .unwrap_or_default(),
        )
        .unwrap_or_default();
        let me = me.trim();
        if !me.is_empty() {
            let groups = g.of(me).await;
            assert!(!groups.is_empty(), "{me} has a primary group");
            // Cached: the same answer again.
            assert_eq!(g.of(me).await, groups);
        }
    }
}
