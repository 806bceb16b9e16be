//! Registry credentials from a Docker-style `config.json` (the file
//! `spindle.nodemanager.runtime.oci.auth-file` names): its `auths` map, keyed by registry
//! (`host:port`, optionally with a scheme and a path, as `docker login` writes them), each
//! with a base64 `auth` of `user:password` or a `username` and `password`.
//!
//! Read at each pull (a rotated file takes effect without an NM restart); a file that cannot
//! be read or parsed is an [`ImageError::AuthFile`], never a silent anonymous pull.

use std::collections::HashMap;
use std::path::Path;

use base64::Engine as _;
use serde::Deserialize;

use super::error::ImageError;

/// The largest auth file read.
const MAX_AUTH_FILE_BYTES: u64 = 1 << 20;

/// A user name and password for one registry.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials({}, ***)", self.username)
    }
}

#[derive(Deserialize)]
struct AuthFile {
    #[serde(default)]
    auths: HashMap<String, AuthEntry>,
}

#[derive(Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
}

/// `https://host:port/v1/` → `host:port`; Docker Hub's legacy key means `docker.io`.
fn registry_key(key: &str) -> String {
    let k = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let host = k.split('/').next().unwrap_or(k);
    match host {
        "index.docker.io" | "registry-1.docker.io" => "docker.io".to_string(),
        h => h.to_string(),
    }
}

/// The credentials for `registry` in the auth file at `path`, if it has any.
pub fn credentials_for(path: &Path, registry: &str) -> Result<Option<Credentials>, ImageError> {
    let problem = |p: String| ImageError::AuthFile {
        path: path.to_path_buf(),
        problem: p,
    };
    let meta = std::fs::metadata(path).map_err(|e| problem(e.to_string()))?;
    if meta.len() > MAX_AUTH_FILE_BYTES {
        return Err(problem(format!("larger than {MAX_AUTH_FILE_BYTES} bytes")));
    }
    let text = std::fs::read(path).map_err(|e| problem(e.to_string()))?;
    let file: AuthFile = serde_json::from_slice(&text).map_err(|e| problem(e.to_string()))?;
    let Some((key, entry)) = file.auths.iter().find(|(k, _)| registry_key(k) == registry) else {
        return Ok(None);
    };
    if let (Some(u), Some(p)) = (&entry.username, &entry.password) {
        return Ok(Some(Credentials {
            username: u.clone(),
            password: p.clone(),
        }));
    }
    let Some(auth) = &entry.auth else {
        return Err(problem(format!(
            "entry '{key}' has neither auth nor username and password"
        )));
    };
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(auth.trim())
        .map_err(|e| problem(format!("entry '{key}': auth is not base64 ({e})")))?;
    let text = String::from_utf8(decoded)
        .map_err(|_| problem(format!("entry '{key}': auth is not UTF-8")))?;
    match text.split_once(':') {
        Some((u, p)) => Ok(Some(Credentials {
            username: u.to_string(),
            password: p.to_string(),
        })),
        None => Err(problem(format!("entry '{key}': auth is not user:password"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_and_key_spellings() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("config.json");
        std::fs::write(
            &p,
            r#"{"auths":{"https://index.docker.io/v1/":{"auth":"dTpw"},
                "127.0.0.1:5000":{"username":"alice","password":"s:e"}}}"#,
        )
        .unwrap();
        let hub = credentials_for(&p, "docker.io").unwrap().unwrap();
        assert_eq!((hub.username.as_str(), hub.password.as_str()), ("u", "p"));
        let local = credentials_for(&p, "127.0.0.1:5000").unwrap().unwrap();
        assert_eq!(local.password, "s:e");
        assert_eq!(credentials_for(&p, "nvcr.io").unwrap(), None);
        assert!(
            !format!("{local:?}").contains("s:e"),
            "passwords never printed"
        );
    }

    #[test]
    fn bad_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("config.json");
        assert!(matches!(
            credentials_for(&p, "x"),
            Err(ImageError::AuthFile { .. })
        ));
        std::fs::write(&p, "{not json").unwrap();
        assert!(matches!(
            credentials_for(&p, "x"),
            Err(ImageError::AuthFile { .. })
        ));
        std::fs::write(&p, r#"{"auths":{"x":{"auth":"!!"}}}"#).unwrap();
        assert!(matches!(
            credentials_for(&p, "x"),
            Err(ImageError::AuthFile { .. })
        ));
    }
}
