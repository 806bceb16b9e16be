//! How the RM authenticates REST callers on `/ws/v1/cluster/...`: Hadoop's
//! `hadoop.http.authentication.type`, `simple` (YARN's pseudo authentication, the default) or
//! `token` (users' signed bearer tokens, `spindle_common::user_token`), with the key read and
//! checked here, at start.

use std::path::PathBuf;

use spindle_common::config::{keys, Configuration};
use spindle_common::user_token::{KeyFileError, UserTokenKey};

use super::{written, Place, RmConfigError};

/// How callers are authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthMode {
    /// `?user.name=` names the caller; without it the caller is `dr.who`, or is refused (401)
    /// when anonymous calls are not allowed.
    Simple { anonymous_allowed: bool },
    /// A valid token names the caller; every other call (but the few open ones) is 401.
    Token {
        key: UserTokenKey,
        /// Where the key was read from (for the start-up line).
        key_file: PathBuf,
        /// The longest validity of a token the RM issues over REST, in ms.
        max_lifetime_ms: u64,
    },
}

/// The RM's REST authentication settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthConfig {
    pub mode: AuthMode,
    /// Where the audit lines go (`spindle.audit.log-file`; the binary's logging setup opens
    /// it); `None`: the daemon's log.
    pub audit_log_file: Option<PathBuf>,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            mode: AuthMode::Simple {
                anonymous_allowed: true,
            },
            audit_log_file: None,
        }
    }
}

/// Why the authentication settings were refused.
#[derive(Debug, thiserror::Error)]
pub enum AuthConfigError {
    /// `hadoop.http.authentication.type` is neither `simple` nor `token`.
    #[error("{place}property '{name}': expected simple or token, got '{value}' (kerberos is not implemented)")]
    UnknownType {
        place: Place,
        name: &'static str,
        value: String,
    },
    /// `token` mode without a key file named.
    #[error("{place}property '{name}': token authentication needs a key file; set {file} to a 0600 file of hex random bytes (`spindle token -newKey FILE`)", file = keys::HADOOP_HTTP_AUTHENTICATION_SIGNATURE_SECRET_FILE)]
    NoKeyFile { place: Place, name: &'static str },
    /// The key file is missing, unreadable, too open, not hex or too short.
    #[error("{place}property '{name}': {error}")]
    KeyFile {
        place: Place,
        name: &'static str,
        error: KeyFileError,
    },
    /// `yarn.resourcemanager.delegation.token.max-lifetime` is 0 or negative.
    #[error("{place}property '{name}': must be a positive number of milliseconds, got {written}")]
    MaxLifetimeNotPositive {
        place: Place,
        name: &'static str,
        written: String,
    },
}

impl AuthConfig {
    pub fn from_conf(conf: &Configuration) -> Result<Self, RmConfigError> {
        let name = keys::HADOOP_HTTP_AUTHENTICATION_TYPE;
        let kind = conf.get_string(name, keys::DEFAULT_HADOOP_HTTP_AUTHENTICATION_TYPE)?;
        let mode = match kind.trim().to_ascii_lowercase().as_str() {
            "simple" => AuthMode::Simple {
                anonymous_allowed: conf.get_bool(
                    keys::HADOOP_HTTP_AUTHENTICATION_SIMPLE_ANONYMOUS_ALLOWED,
                    keys::DEFAULT_HADOOP_HTTP_AUTHENTICATION_SIMPLE_ANONYMOUS_ALLOWED,
                )?,
            },
            "token" => {
                let file_key = keys::HADOOP_HTTP_AUTHENTICATION_SIGNATURE_SECRET_FILE;
                let Some(file) = conf.get_nonempty(file_key)? else {
                    return Err(AuthConfigError::NoKeyFile {
                        place: Place::of(conf, name),
                        name,
                    }
                    .into());
                };
                let key_file = PathBuf::from(file.trim());
                let key = UserTokenKey::read_file(&key_file).map_err(|error| {
                    AuthConfigError::KeyFile {
                        place: Place::of(conf, file_key),
                        name: file_key,
                        error,
                    }
                })?;
                let life = keys::RM_DELEGATION_TOKEN_MAX_LIFETIME;
                let max =
                    conf.get_i64(life, keys::DEFAULT_RM_DELEGATION_TOKEN_MAX_LIFETIME as i64)?;
                if max <= 0 {
                    return Err(AuthConfigError::MaxLifetimeNotPositive {
                        place: Place::of(conf, life),
                        name: life,
                        written: written(conf, life),
                    }
                    .into());
                }
                AuthMode::Token {
                    key,
                    key_file,
                    max_lifetime_ms: max as u64,
                }
            }
            _ => {
                return Err(AuthConfigError::UnknownType {
                    place: Place::of(conf, name),
                    name,
                    value: kind,
                }
                .into())
            }
        };
        Ok(Self {
            mode,
            audit_log_file: conf
                .get_nonempty(keys::SPINDLE_AUDIT_LOG_FILE)?
                .map(|p| PathBuf::from(p.trim())),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(pairs: &[(&str, &str)]) -> Configuration {
        let mut c = Configuration::new();
        for (k, v) in pairs {
            c.set(k, v);
        }
        c
    }

    #[test]
    fn simple_is_the_default_and_token_needs_a_private_key() {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            AuthConfig::from_conf(&conf(&[])).unwrap(),
            AuthConfig::default()
        );
        assert_eq!(
            AuthConfig::from_conf(&conf(&[(
                keys::HADOOP_HTTP_AUTHENTICATION_SIMPLE_ANONYMOUS_ALLOWED,
                "false"
            )]))
            .unwrap()
            .mode,
            AuthMode::Simple {
                anonymous_allowed: false
            }
        );
        let e = AuthConfig::from_conf(&conf(&[(
            keys::HADOOP_HTTP_AUTHENTICATION_TYPE,
            "kerberos",
        )]))
        .unwrap_err();
        assert!(e.to_string().contains("expected simple or token"), "{e}");
        let e = AuthConfig::from_conf(&conf(&[(keys::HADOOP_HTTP_AUTHENTICATION_TYPE, "token")]))
            .unwrap_err();
        assert!(
            matches!(e, RmConfigError::Auth(AuthConfigError::NoKeyFile { .. })),
            "{e}"
        );
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("key");
        let token = |p: &std::path::Path| {
            AuthConfig::from_conf(&conf(&[
                (keys::HADOOP_HTTP_AUTHENTICATION_TYPE, "token"),
                (
                    keys::HADOOP_HTTP_AUTHENTICATION_SIGNATURE_SECRET_FILE,
                    p.to_str().unwrap(),
                ),
            ]))
        };
        let e = token(&p).unwrap_err();
        assert!(
            matches!(
                e,
                RmConfigError::Auth(AuthConfigError::KeyFile {
                    error: KeyFileError::Missing { .. },
                    ..
                })
            ),
            "{e}"
        );
        assert!(!e.to_string().contains('\n'), "one line: {e}");
        let key = UserTokenKey::create_file(&p).unwrap();
        match token(&p).unwrap().mode {
            AuthMode::Token {
                key: k,
                max_lifetime_ms,
                ..
            } => {
                assert_eq!(k, key);
                assert_eq!(max_lifetime_ms, 604_800_000);
            }
            m => panic!("{m:?}"),
        }
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert!(matches!(
            token(&p).unwrap_err(),
            RmConfigError::Auth(AuthConfigError::KeyFile {
                error: KeyFileError::TooOpen { .. },
                ..
            })
        ));
    }
}
