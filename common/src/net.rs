//! The address a daemon gives others to reach it.
//!
//! A daemon bound to the wildcard (`0.0.0.0`, YARN's default) listens on every interface,
//! but that is no address to dial: others must be told a name. YARN advertises the local
//! host name (`InetAddress.getLocalHost()`); so does Spindle, when the name resolves, and
//! falls back to 127.0.0.1 otherwise (a single-machine setup still works).

use std::net::ToSocketAddrs;

/// True for the hosts that mean "every interface".
pub fn is_wildcard(host: &str) -> bool {
    matches!(host, "0.0.0.0" | "::" | "[::]" | "")
}

/// This machine's host name if it resolves to an address here, else None.
pub fn local_hostname() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let name = name.trim();
    if name.is_empty() || name == "localhost" {
        return None;
    }
    (name, 0).to_socket_addrs().ok()?.next()?;
    Some(name.to_string())
}

/// The host to advertise for a daemon bound to `bind_host`: an explicit, non-wildcard
/// `configured` host wins; then a non-wildcard bind host; then the local host name; then
/// 127.0.0.1.
pub fn advertised_host(configured: Option<&str>, bind_host: &str) -> String {
    if let Some(h) = configured.filter(|h| !is_wildcard(h)) {
        return h.to_string();
    }
    if !is_wildcard(bind_host) {
        return bind_host.to_string();
    }
    local_hostname().unwrap_or_else(|| "127.0.0.1".to_string())
}

/// A bounded metrics label for an HTTP request method: the standard ones by name, anything
/// else `other` (a caller choosing methods must not grow a metric's label set).
pub fn method_label(method: &str) -> &'static str {
    match method {
        "GET" => "GET",
        "POST" => "POST",
        "PUT" => "PUT",
        "DELETE" => "DELETE",
        "HEAD" => "HEAD",
        "OPTIONS" => "OPTIONS",
        "PATCH" => "PATCH",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_then_bound_then_local_name() {
        assert_eq!(advertised_host(Some("rm.example"), "0.0.0.0"), "rm.example");
        assert_eq!(advertised_host(Some("0.0.0.0"), "10.0.0.5"), "10.0.0.5");
        assert_eq!(advertised_host(None, "127.0.0.1"), "127.0.0.1");
        let wild = advertised_host(None, "0.0.0.0");
        assert!(!is_wildcard(&wild));
        assert!(
            (wild.as_str(), 0).to_socket_addrs().is_ok(),
            "{wild} resolves"
        );
    }
}
