//! YARN's `yarn.http.policy` and what Spindle's HTTP clients trust.
//!
//! With `HTTPS_ONLY` both daemons serve TLS only (the server side is `spindle-rest-edge`'s
//! serve loop) and every client dials `https://`: an address written without a scheme
//! (`host:port`, as YARN writes a node's HTTP address) takes the policy's. Clients trust the
//! system roots plus the CA certificates of `spindle.ssl.client.ca-file` ([`ClientTls`]);
//! `with_roots` (behind the `http-client` feature) applies them to a reqwest client.
//!
//! Must not: open connections or build HTTP clients (each client crate applies
//! [`ClientTls`] to its own).

use std::path::{Path, PathBuf};

use crate::config::{keys, ConfigError, Configuration};

/// `yarn.http.policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HttpPolicy {
    /// `HTTP_ONLY` (YARN's default): plain HTTP.
    #[default]
    HttpOnly,
    /// `HTTPS_ONLY`: TLS only, on the same port.
    HttpsOnly,
}

/// Why the TLS settings were refused; each names the property and, for a file, the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsConfError {
    /// The raw reader refused a value.
    #[error(transparent)]
    Value(#[from] ConfigError),
    /// `yarn.http.policy` is neither `HTTP_ONLY` nor `HTTPS_ONLY` (YARN's `HTTP_AND_HTTPS`
    /// needs two ports; Spindle serves one).
    #[error("{place}property '{name}': expected HTTP_ONLY or HTTPS_ONLY, got '{value}'")]
    BadPolicy {
        place: String,
        name: &'static str,
        value: String,
    },
    /// A PEM file named by a property cannot be read.
    #[error("{place}property '{name}': cannot read {}: {problem}", file.display())]
    Unreadable {
        place: String,
        name: &'static str,
        file: PathBuf,
        problem: String,
    },
    /// A CA file holds no PEM certificate.
    #[error("{place}property '{name}': {} holds no PEM certificate (-----BEGIN CERTIFICATE-----)", file.display())]
    NoCertificate {
        place: String,
        name: &'static str,
        file: PathBuf,
    },
}

/// `file:line: ` where `conf` got `name` from, or nothing when it is unset (or set in code).
pub fn place(conf: &Configuration, name: &str) -> String {
    conf.source(name)
        .map(|s| format!("{s}: "))
        .unwrap_or_default()
}

impl HttpPolicy {
    /// Reads `yarn.http.policy` (case-insensitive, as Hadoop's `HttpConfig.Policy`).
    pub fn from_conf(conf: &Configuration) -> Result<Self, TlsConfError> {
        let v = conf.get_string(keys::HTTP_POLICY, keys::DEFAULT_HTTP_POLICY)?;
        match v.trim().to_ascii_uppercase().as_str() {
            "HTTP_ONLY" => Ok(Self::HttpOnly),
            "HTTPS_ONLY" => Ok(Self::HttpsOnly),
            _ => Err(TlsConfError::BadPolicy {
                place: place(conf, keys::HTTP_POLICY),
                name: keys::HTTP_POLICY,
                value: v,
            }),
        }
    }

    /// `http` or `https`.
    pub fn scheme(self) -> &'static str {
        match self {
            Self::HttpOnly => "http",
            Self::HttpsOnly => "https",
        }
    }

    /// `address` (`host:port`, or a URL that already has a scheme, kept) as a base URL
    /// without a trailing `/`.
    pub fn base_url(self, address: &str) -> String {
        let a = address.trim().trim_end_matches('/');
        if a.starts_with("http://") || a.starts_with("https://") {
            a.to_string()
        } else {
            format!("{}://{a}", self.scheme())
        }
    }
}

/// What a Spindle HTTP client needs: the scheme to dial and the extra CA certificates.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClientTls {
    pub policy: HttpPolicy,
    /// `spindle.ssl.client.ca-file`, and its PEM text (read when the configuration is).
    pub ca: Option<(PathBuf, Vec<u8>)>,
}

/// `builder` trusting the CA certificates of `spindle.ssl.client.ca-file` too: how every
/// HTTP client of the cluster (the NM's, the SDK's) is built.
#[cfg(feature = "http-client")]
pub fn with_roots(
    mut builder: reqwest::ClientBuilder,
    tls: &ClientTls,
) -> Result<reqwest::ClientBuilder, reqwest::Error> {
    if let Some((_, pem)) = &tls.ca {
        for cert in reqwest::Certificate::from_pem_bundle(pem)? {
            builder = builder.add_root_certificate(cert);
        }
    }
    Ok(builder)
}

impl ClientTls {
    /// Reads `yarn.http.policy` and `spindle.ssl.client.ca-file` (the file now, so a missing
    /// one is named at start).
    pub fn from_conf(conf: &Configuration) -> Result<Self, TlsConfError> {
        let policy = HttpPolicy::from_conf(conf)?;
        let ca = match conf.get_nonempty(keys::SSL_CLIENT_CA_FILE)? {
            None => None,
            Some(f) => {
                let file = PathBuf::from(f);
                let pem = read_pem(conf, keys::SSL_CLIENT_CA_FILE, &file)?;
                if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
                    return Err(TlsConfError::NoCertificate {
                        place: place(conf, keys::SSL_CLIENT_CA_FILE),
                        name: keys::SSL_CLIENT_CA_FILE,
                        file,
                    });
                }
                Some((file, pem))
            }
        };
        Ok(Self { policy, ca })
    }

    /// See [`HttpPolicy::base_url`].
    pub fn base_url(&self, address: &str) -> String {
        self.policy.base_url(address)
    }
}

/// The bytes of the PEM file `file`, named by property `name`.
pub fn read_pem(
    conf: &Configuration,
    name: &'static str,
    file: &Path,
) -> Result<Vec<u8>, TlsConfError> {
    std::fs::read(file).map_err(|e| TlsConfError::Unreadable {
        place: place(conf, name),
        name,
        file: file.to_path_buf(),
        problem: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_is_read_and_gives_the_scheme() {
        let mut c = Configuration::new();
        assert_eq!(HttpPolicy::from_conf(&c).unwrap(), HttpPolicy::HttpOnly);
        assert_eq!(HttpPolicy::HttpOnly.base_url("h:1/"), "http://h:1");
        c.set(keys::HTTP_POLICY, "https_only");
        let p = HttpPolicy::from_conf(&c).unwrap();
        assert_eq!(p, HttpPolicy::HttpsOnly);
        assert_eq!(p.base_url("h:1"), "https://h:1");
        assert_eq!(p.base_url("http://h:1"), "http://h:1");
        c.set(keys::HTTP_POLICY, "HTTP_AND_HTTPS");
        assert!(matches!(
            HttpPolicy::from_conf(&c),
            Err(TlsConfError::BadPolicy { .. })
        ));
    }

    #[test]
    fn the_ca_file_is_read_at_once_and_must_hold_a_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Configuration::new();
        assert_eq!(ClientTls::from_conf(&c).unwrap().ca, None);
        let missing = dir.path().join("missing.pem");
        c.set(keys::SSL_CLIENT_CA_FILE, missing.to_str().unwrap());
        let e = ClientTls::from_conf(&c).unwrap_err();
        assert!(matches!(&e, TlsConfError::Unreadable { file, .. } if *file == missing));
        assert!(e.to_string().contains("missing.pem"), "{e}");
        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "not a certificate").unwrap();
        c.set(keys::SSL_CLIENT_CA_FILE, junk.to_str().unwrap());
        assert!(matches!(
            ClientTls::from_conf(&c),
            Err(TlsConfError::NoCertificate { .. })
        ));
    }
}
