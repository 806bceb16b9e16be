//! The image store's keys (`spindle.nodemanager.runtime.oci.*`) into
//! [`ImageStoreConfig`]: the cache directory and its size limit, the registries reached
//! over plain HTTP, and the credentials file.
//!
//! Reads and checks only: the cache is opened by [`crate::image::ImageStore::open`].

use std::path::{Path, PathBuf};

use spindle_common::config::{keys, Configuration};

use super::validate::{absolute, at, valid_hostname};
use super::NmConfigError;
use crate::image::ImageStoreConfig;

/// Reads the image store's keys; `local_dirs` gives the default cache directory.
pub(super) fn image_store_config(
    conf: &Configuration,
    local_dirs: &[PathBuf],
) -> Result<ImageStoreConfig, NmConfigError> {
    let cache_dir = match conf.get_nonempty(keys::SPINDLE_NM_OCI_CACHE_DIR)? {
        Some(d) if d.contains(',') => {
            return Err(bad(
                conf,
                keys::SPINDLE_NM_OCI_CACHE_DIR,
                "one directory path",
                d,
            ))
        }
        Some(d) => absolute(Path::new(d.trim())),
        None => local_dirs
            .first()
            .map(|d| d.join("images"))
            .unwrap_or_else(|| PathBuf::from("/tmp/spindle-images")),
    };
    let max_bytes = conf.get_size_bytes(
        keys::SPINDLE_NM_OCI_CACHE_MAX_BYTES,
        keys::DEFAULT_SPINDLE_NM_OCI_CACHE_MAX_BYTES,
    )?;
    if max_bytes == 0 {
        return Err(bad(
            conf,
            keys::SPINDLE_NM_OCI_CACHE_MAX_BYTES,
            "a size greater than 0",
            "0".into(),
        ));
    }
    let insecure_registries = conf.get_strings(keys::SPINDLE_NM_OCI_INSECURE_REGISTRIES)?;
    if let Some(r) = insecure_registries.iter().find(|r| !host_port(r)) {
        return Err(bad(
            conf,
            keys::SPINDLE_NM_OCI_INSECURE_REGISTRIES,
            "comma-separated host:port registries",
            r.clone(),
        ));
    }
    let auth_file = match conf.get_nonempty(keys::SPINDLE_NM_OCI_AUTH_FILE)? {
        Some(f) => {
            let p = absolute(Path::new(f.trim()));
            if !p.is_file() {
                return Err(bad(
                    conf,
                    keys::SPINDLE_NM_OCI_AUTH_FILE,
                    "an existing Docker config.json",
                    f,
                ));
            }
            Some(p)
        }
        None => None,
    };
    let local_image_dirs = conf
        .get_strings(keys::SPINDLE_NM_OCI_LOCAL_IMAGE_DIRS)?
        .iter()
        .map(|d| absolute(Path::new(d.trim())))
        .collect();
    Ok(ImageStoreConfig {
        cache_dir,
        max_bytes,
        insecure_registries,
        auth_file,
        local_image_dirs,
    })
}

fn host_port(r: &str) -> bool {
    matches!(r.rsplit_once(':'), Some((h, p)) if valid_hostname(h) && p.parse::<u16>().is_ok_and(|p| p > 0))
}

fn bad(conf: &Configuration, name: &'static str, expected: &str, value: String) -> NmConfigError {
    NmConfigError::BadValue {
        at: at(conf, name),
        name,
        expected: expected.to_string(),
        value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::NmConfig;

    fn parse(pairs: &[(&str, &str)]) -> Result<NmConfig, NmConfigError> {
        let mut c = Configuration::new();
        c.set(keys::NM_LOCAL_DIRS, "/srv/nm-local");
        for (k, v) in pairs {
            c.set(k, v);
        }
        NmConfig::from_configuration(&c, Path::new("/etc/spindle"))
    }

    #[test]
    fn defaults() {
        let c = parse(&[]).unwrap().images;
        assert_eq!(c.cache_dir, PathBuf::from("/srv/nm-local/images"));
        assert_eq!(c.max_bytes, 50 << 30);
        assert!(c.insecure_registries.is_empty());
        assert_eq!(c.auth_file, None);
    }

    #[test]
    fn keys_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let auth = dir.path().join("config.json");
        std::fs::write(&auth, "{}").unwrap();
        let c = parse(&[
            (keys::SPINDLE_NM_OCI_CACHE_DIR, "/var/cache/spindle"),
            (keys::SPINDLE_NM_OCI_CACHE_MAX_BYTES, "2g"),
            (
                keys::SPINDLE_NM_OCI_INSECURE_REGISTRIES,
                "127.0.0.1:5000, reg.lan:80",
            ),
            (keys::SPINDLE_NM_OCI_AUTH_FILE, auth.to_str().unwrap()),
        ])
        .unwrap()
        .images;
        assert_eq!(c.cache_dir, PathBuf::from("/var/cache/spindle"));
        assert_eq!(c.max_bytes, 2 << 30);
        assert_eq!(c.insecure_registries, vec!["127.0.0.1:5000", "reg.lan:80"]);
        assert_eq!(c.auth_file, Some(auth));
    }

    #[test]
    fn bad_values_are_named() {
        for (key, value) in [
            (keys::SPINDLE_NM_OCI_CACHE_MAX_BYTES, "0"),
            (keys::SPINDLE_NM_OCI_INSECURE_REGISTRIES, "127.0.0.1"),
            (keys::SPINDLE_NM_OCI_INSECURE_REGISTRIES, "http://x:5000"),
            (keys::SPINDLE_NM_OCI_AUTH_FILE, "/nonexistent/config.json"),
            (keys::SPINDLE_NM_OCI_CACHE_DIR, "/a,/b"),
        ] {
            let e = parse(&[(key, value)]).unwrap_err();
            assert!(
                matches!(&e, NmConfigError::BadValue { name, .. } if *name == key),
                "{key}={value}: {e}"
            );
            assert!(e.to_string().contains(key), "{e}");
        }
        assert!(parse(&[(keys::SPINDLE_NM_OCI_CACHE_MAX_BYTES, "lots")]).is_err());
    }
}
