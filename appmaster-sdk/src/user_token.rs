//! The caller's token for an RM in `token` mode (`hadoop.http.authentication.type=token`),
//! found the same way by every client: `$SPINDLE_TOKEN` (the token itself), else the file
//! `$SPINDLE_TOKEN_FILE` names, else the file `spindle.client.token-file` names in the
//! configuration directory; none of them: no token (an RM in `simple` mode needs none).
//! [`crate::rm_client::RmClient::with_token`] sends it on every cluster REST call.

use std::path::{Path, PathBuf};

use spindle_common::config::{keys, Configuration};
use spindle_common::env;

use crate::address::{load_conf_dir, AddressError};

/// Why the token could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TokenSourceError {
    #[error("cannot read the token file {} (from {origin}): {source}", path.display())]
    Unreadable {
        path: PathBuf,
        origin: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the token file {} (from {origin}) is empty", path.display())]
    Empty { path: PathBuf, origin: String },
    #[error(transparent)]
    Config(#[from] AddressError),
}

/// The token as the process environment and configuration directory give it (see the
/// module doc).
pub fn resolve(conf_dir: Option<&Path>) -> Result<Option<String>, TokenSourceError> {
    let token = std::env::var(env::TOKEN).ok();
    let file = std::env::var(env::TOKEN_FILE).ok();
    resolve_from(token.as_deref(), file.as_deref(), || {
        let dir = Configuration::resolve_conf_dir(conf_dir);
        let conf = load_conf_dir(&dir)?;
        let v = conf
            .get_nonempty(keys::SPINDLE_CLIENT_TOKEN_FILE)
            .map_err(|source| AddressError::Config {
                dir: dir.clone(),
                error: Box::new(source),
            })?;
        Ok(v.map(|p| {
            (
                PathBuf::from(p.trim()),
                format!("{} in {}", keys::SPINDLE_CLIENT_TOKEN_FILE, dir.display()),
            )
        }))
    })
}

/// The rule with its inputs passed in: the token variable, the file variable, and a loader
/// of the configured file with where it came from.
pub fn resolve_from(
    token: Option<&str>,
    file: Option<&str>,
    configured: impl FnOnce() -> Result<Option<(PathBuf, String)>, AddressError>,
) -> Result<Option<String>, TokenSourceError> {
    if let Some(t) = token.map(str::trim).filter(|t| !t.is_empty()) {
        return Ok(Some(t.to_string()));
    }
    let (path, origin) = match file.map(str::trim).filter(|f| !f.is_empty()) {
        Some(f) => (PathBuf::from(f), format!("${}", env::TOKEN_FILE)),
        None => match configured()? {
            Some(c) => c,
            None => return Ok(None),
        },
    };
    let text = std::fs::read_to_string(&path).map_err(|source| TokenSourceError::Unreadable {
        path: path.clone(),
        origin: origin.clone(),
        source,
    })?;
    match text.trim() {
        "" => Err(TokenSourceError::Empty { path, origin }),
        t => Ok(Some(t.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variable_wins_then_its_file_then_the_configured_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("tok");
        std::fs::write(&f, " file-token\n").unwrap();
        let g = dir.path().join("conf-tok");
        std::fs::write(&g, "conf-token").unwrap();
        let conf = || Ok(Some((g.clone(), "conf".to_string())));
        let fs = f.to_str();
        assert_eq!(
            resolve_from(Some("env-token"), fs, conf)
                .unwrap()
                .as_deref(),
            Some("env-token")
        );
        assert_eq!(
            resolve_from(Some(" "), fs, conf).unwrap().as_deref(),
            Some("file-token")
        );
        assert_eq!(
            resolve_from(None, None, conf).unwrap().as_deref(),
            Some("conf-token")
        );
        assert_eq!(resolve_from(None, None, || Ok(None)).unwrap(), None);
        let missing = dir.path().join("nope");
        let e = resolve_from(None, missing.to_str(), conf).unwrap_err();
        assert!(e.to_string().contains("SPINDLE_TOKEN_FILE"), "{e}");
        std::fs::write(&f, "\n").unwrap();
        assert!(matches!(
            resolve_from(None, fs, conf),
            Err(TokenSourceError::Empty { .. })
        ));
    }
}
