//! Where the ResourceManager is, and who the caller is.
//!
//! Every client command finds the RM the same way: `--rm-address HOST:PORT`, else
//! `$SPINDLE_RM_ADDRESS`, else `yarn.resourcemanager.webapp.address` from the configuration
//! directory (`--conf-dir`, `$SPINDLE_CONF_DIR`, `./conf`), else YARN's default `0.0.0.0:8088`.
//! A wildcard host (`0.0.0.0`, `::`) means "this machine" and becomes `127.0.0.1`.
//!
//! With RM high availability ([`RmAddresses::resolve`]) the flag and the variable may list
//! several RMs, comma-separated, and without them the RMs are those of
//! `yarn.resourcemanager.ha.rm-ids` (each `yarn.resourcemanager.webapp.address.<id>`) when
//! `yarn.resourcemanager.ha.enabled` is true; clients fail over among them under the
//! `yarn.client.failover-*` policy ([`spindle_common::failover`]).

use std::fmt;
use std::path::{Path, PathBuf};

use spindle_common::config::{keys, ConfigError, Configuration};
use spindle_common::env;
use spindle_common::failover::{ha_rm_addresses, FailoverPolicy, HaAddressError};

/// `host:port` of the RM's web port (its REST API, the AM protocol and the NM tracker).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RmAddress {
    host: String,
    port: u16,
    /// `Some("https")` when written `https://host:port`; else the configured policy's.
    scheme: Option<&'static str>,
}

#[derive(Debug, thiserror::Error)]
pub enum AddressError {
    #[error("invalid RM address '{value}' from {origin}: {reason}")]
    Invalid {
        origin: String,
        value: String,
        reason: String,
    },
    /// The HA settings of the configuration directory are wrong.
    #[error("cannot read the RM HA settings in {}: {error}", dir.display())]
    Ha {
        dir: PathBuf,
        error: Box<HaAddressError>,
    },
    /// `ConfigError` already names the file and line; it is not a `source()` so that it
    /// is printed once.
    #[error("cannot read the configuration in {}: {error}", dir.display())]
    Config {
        dir: PathBuf,
        error: Box<ConfigError>,
    },
}

impl RmAddress {
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        let host = host.into();
        let host = if is_wildcard(&host) {
            "127.0.0.1".to_string()
        } else {
            host
        };
        Self {
            host,
            port,
            scheme: None,
        }
    }

    /// Accepts `host:port`, `http://host:port`, `https://host:port` and a trailing `/` or
    /// path (ignored). Without `https://` the scheme is `yarn.http.policy`'s.
    pub fn parse(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let https = t.starts_with("https://");
        let t = t.strip_prefix("https://").unwrap_or(t);
        let t = t.strip_prefix("http://").unwrap_or(t);
        let t = t.split('/').next().unwrap_or("");
        if t.is_empty() {
            return Err("expected HOST:PORT".into());
        }
        let (host, port) = if let Some(rest) = t.strip_prefix('[') {
            // [v6]:port
            let (h, p) = rest
                .split_once("]:")
                .ok_or_else(|| "expected [IPV6]:PORT".to_string())?;
            (format!("[{h}]"), p)
        } else {
            let (h, p) = t
                .rsplit_once(':')
                .ok_or_else(|| "expected HOST:PORT (the port is missing)".to_string())?;
            (h.to_string(), p)
        };
        if host.is_empty() || host.contains(char::is_whitespace) {
            return Err("the host is empty or contains spaces".into());
        }
        let port: u16 = port
            .parse()
            .map_err(|_| format!("port '{port}' is not a number from 0 to 65535"))?;
        if port == 0 {
            return Err("port 0 is a listening wildcard, not an address to connect to".into());
        }
        let mut a = Self::new(host, port);
        if https {
            a.scheme = Some("https");
        }
        Ok(a)
    }

    pub fn host(&self) -> &str {
        &self.host
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://host:port`, or `https://` (written so, or under `yarn.http.policy`
    /// `HTTPS_ONLY`).
    pub fn base_url(&self) -> String {
        let scheme = self.scheme.unwrap_or_else(crate::tls::scheme);
        format!("{scheme}://{}:{}", self.host, self.port)
    }

    /// Resolves the address as every client command does (see the module doc), reading the
    /// process environment and configuration directory.
    pub fn resolve(flag: Option<&str>, conf_dir: Option<&Path>) -> Result<Self, AddressError> {
        let env_value = std::env::var(env::RM_ADDRESS).ok();
        Self::resolve_from(flag, env_value.as_deref(), || {
            let dir = Configuration::resolve_conf_dir(conf_dir);
            let conf = load_conf_dir(&dir)?;
            let v = conf
                .get_string(keys::RM_WEBAPP_ADDRESS, keys::DEFAULT_RM_WEBAPP_ADDRESS)
                .map_err(|source| AddressError::Config {
                    dir: dir.clone(),
                    error: Box::new(source),
                })?;
            Ok((
                v,
                format!("{} in {}", keys::RM_WEBAPP_ADDRESS, dir.display()),
            ))
        })
    }

    /// The resolution rule with its inputs passed in: the flag, the environment value, and
    /// a loader giving the configured value and where it came from.
    pub fn resolve_from(
        flag: Option<&str>,
        env_value: Option<&str>,
        conf: impl FnOnce() -> Result<(String, String), AddressError>,
    ) -> Result<Self, AddressError> {
        let invalid = |origin: &str, value: &str, reason: String| AddressError::Invalid {
            origin: origin.to_string(),
            value: value.to_string(),
            reason,
        };
        if let Some(f) = flag.filter(|f| !f.trim().is_empty()) {
            return Self::parse(f).map_err(|r| invalid("--rm-address", f, r));
        }
        if let Some(e) = env_value.filter(|e| !e.trim().is_empty()) {
            return Self::parse(e).map_err(|r| invalid(&format!("${}", env::RM_ADDRESS), e, r));
        }
        let (value, origin) = conf()?;
        Self::parse(&value).map_err(|r| invalid(&origin, &value, r))
    }
}

/// Every RM a client may call, in order (the first is tried first), and how it fails
/// over among them.
#[derive(Debug, Clone, PartialEq)]
pub struct RmAddresses {
    pub addresses: Vec<RmAddress>,
    pub policy: FailoverPolicy,
}

impl RmAddresses {
    /// `--rm-address` (comma-separated), else `$SPINDLE_RM_ADDRESS` (likewise), else the
    /// HA RMs of the configuration directory, else its one RM (as [`RmAddress::resolve`]).
    /// The policy is the directory's `yarn.client.failover-*` (defaults when an address
    /// was given and the directory cannot be read).
    pub fn resolve(flag: Option<&str>, conf_dir: Option<&Path>) -> Result<Self, AddressError> {
        let env_value = std::env::var(env::RM_ADDRESS).ok();
        let dir = Configuration::resolve_conf_dir(conf_dir);
        let config_err = |e: ConfigError| AddressError::Config {
            dir: dir.clone(),
            error: Box::new(e),
        };
        let given = [
            (flag, "--rm-address".to_string()),
            (env_value.as_deref(), format!("${}", env::RM_ADDRESS)),
        ]
        .into_iter()
        .find_map(|(v, origin)| v.filter(|v| !v.trim().is_empty()).map(|v| (v, origin)));
        // Without an address given, the directory must be readable; with one, it only
        // gives the policy.
        let conf = match &given {
            Some(_) => load_conf_dir(&dir).ok(),
            None => Some(load_conf_dir(&dir)?),
        };
        let addresses = match (&given, &conf) {
            (Some((v, origin)), _) => parse_list(v, origin)?,
            (None, None) => vec![RmAddress::resolve(None, conf_dir)?],
            (None, Some(c)) => match ha_rm_addresses(c) {
                Ok(Some(rms)) => rms
                    .iter()
                    .map(|(id, a)| {
                        let origin =
                            format!("{}.{id} in {}", keys::RM_WEBAPP_ADDRESS, dir.display());
                        parse_list(a, &origin).map(|mut l| l.remove(0))
                    })
                    .collect::<Result<_, _>>()?,
                Ok(None) => vec![RmAddress::resolve(None, conf_dir)?],
                Err(e) => {
                    return Err(AddressError::Ha {
                        dir: dir.clone(),
                        error: Box::new(e),
                    })
                }
            },
        };
        let policy = match conf {
            Some(c) => FailoverPolicy::from_conf(&c).map_err(config_err)?,
            None => FailoverPolicy::default(),
        };
        Ok(Self { addresses, policy })
    }
}

/// `a:1,b:2` (at least one address).
fn parse_list(v: &str, origin: &str) -> Result<Vec<RmAddress>, AddressError> {
    let list: Vec<RmAddress> = v
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(|a| {
            RmAddress::parse(a).map_err(|reason| AddressError::Invalid {
                origin: origin.to_string(),
                value: a.to_string(),
                reason,
            })
        })
        .collect::<Result<_, _>>()?;
    if list.is_empty() {
        return Err(AddressError::Invalid {
            origin: origin.to_string(),
            value: v.to_string(),
            reason: "expected HOST:PORT[,HOST:PORT...]".into(),
        });
    }
    Ok(list)
}

/// Loads a configuration directory; a directory that does not exist is an empty configuration
/// (every daemon default applies), as a client on a machine without `conf/` expects.
pub fn load_conf_dir(dir: &Path) -> Result<Configuration, AddressError> {
    if !dir.is_dir() {
        tracing::debug!(dir = %dir.display(), "no configuration directory; using defaults");
        return Ok(Configuration::new());
    }
    Configuration::load_dir(dir).map_err(|source| AddressError::Config {
        dir: dir.to_path_buf(),
        error: Box::new(source),
    })
}

fn is_wildcard(host: &str) -> bool {
    matches!(host, "0.0.0.0" | "::" | "[::]" | "*")
}

impl fmt::Display for RmAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// The caller's user name for YARN's pseudo authentication (`?user.name=`): `$USER`, else
/// the name of the process's uid, else YARN's static web user `dr.who`.
pub fn current_user() -> String {
    if let Ok(u) = std::env::var(env::USER) {
        if !u.trim().is_empty() {
            return u.trim().to_string();
        }
    }
    match nix::unistd::User::from_uid(nix::unistd::getuid()) {
        Ok(Some(u)) => u.name,
        _ => "dr.who".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(v: &str) -> impl FnOnce() -> Result<(String, String), AddressError> + '_ {
        move || Ok((v.to_string(), "yarn-site.xml".to_string()))
    }

    #[test]
    fn parses_with_and_without_scheme() {
        let a = RmAddress::parse("rm.example:8088").unwrap();
        assert_eq!((a.host(), a.port()), ("rm.example", 8088));
        assert_eq!(
            RmAddress::parse("http://rm:1/").unwrap(),
            RmAddress::new("rm", 1)
        );
        assert_eq!(
            RmAddress::parse("http://rm:1/ws/v1/cluster").unwrap(),
            RmAddress::new("rm", 1)
        );
        assert_eq!(
            RmAddress::parse("0.0.0.0:8088").unwrap().host(),
            "127.0.0.1"
        );
        assert_eq!(RmAddress::parse("[::]:8088").unwrap().host(), "127.0.0.1");
        assert_eq!(
            RmAddress::parse("[::1]:9").unwrap().base_url(),
            "http://[::1]:9"
        );
        assert_eq!(RmAddress::parse("h:2").unwrap().to_string(), "h:2");
        assert_eq!(
            RmAddress::parse("https://h:2/").unwrap().base_url(),
            "https://h:2"
        );
        for bad in ["", "host", "host:", "host:x", "host:70000", ":80", "h:0"] {
            assert!(RmAddress::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn flag_beats_env_beats_conf() {
        let a = RmAddress::resolve_from(Some("f:1"), Some("e:2"), conf("c:3")).unwrap();
        assert_eq!(a, RmAddress::new("f", 1));
        let a = RmAddress::resolve_from(None, Some("http://e:2"), conf("c:3")).unwrap();
        assert_eq!(a, RmAddress::new("e", 2));
        let a = RmAddress::resolve_from(None, Some(" "), conf("0.0.0.0:3")).unwrap();
        assert_eq!(a, RmAddress::new("127.0.0.1", 3));
        let a = RmAddress::resolve_from(Some(""), None, conf("c:3")).unwrap();
        assert_eq!(a, RmAddress::new("c", 3));
    }

    #[test]
    fn errors_name_the_origin() {
        let e = RmAddress::resolve_from(Some("nope"), None, conf("c:3")).unwrap_err();
        assert!(e.to_string().contains("--rm-address"), "{e}");
        let e = RmAddress::resolve_from(None, Some("x:y"), conf("c:3")).unwrap_err();
        assert!(e.to_string().contains("$SPINDLE_RM_ADDRESS"), "{e}");
        let e = RmAddress::resolve_from(None, None, conf("bad")).unwrap_err();
        assert!(e.to_string().contains("yarn-site.xml"), "{e}");
    }

    #[test]
    fn missing_conf_dir_gives_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let c = load_conf_dir(&missing).unwrap();
        assert!(c.get_raw(keys::RM_WEBAPP_ADDRESS).is_none());
        let a = RmAddress::resolve(Some("h:5"), Some(&missing)).unwrap();
        assert_eq!(a.port(), 5);
    }

    #[test]
    fn user_is_never_empty() {
        assert!(!current_user().is_empty());
    }
}
