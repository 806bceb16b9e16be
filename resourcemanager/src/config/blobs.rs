//! The blob store's configuration (`spindle.resourcemanager.blob-store.*`): where shipped
//! files live on the RM, the size limits per file and per user, and how long a blob is kept
//! after the last application using it ended.

use std::path::{Path, PathBuf};
use std::time::Duration;

use spindle_common::config::{keys, Configuration};

use super::{positive, RmConfigError};

/// Typed `spindle.resourcemanager.blob-store.*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobStoreConfig {
    /// The directory of the blob files and `blobs.sqlite`.
    pub dir: PathBuf,
    pub max_file_bytes: u64,
    pub max_user_bytes: u64,
    pub retention: Duration,
    pub cleaner_interval: Duration,
}

impl BlobStoreConfig {
    /// Read from `conf`; the directory defaults to `blobs` beside the state store at
    /// `store_path`.
    pub fn from_conf(conf: &Configuration, store_path: &Path) -> Result<Self, RmConfigError> {
        let dir = match conf.get_nonempty(keys::SPINDLE_RM_BLOB_STORE_DIR)? {
            Some(d) => PathBuf::from(d),
            None => store_path
                .parent()
                .unwrap_or_else(|| Path::new("."))
                .join("blobs"),
        };
        let num = |name, default: u64| -> Result<u64, RmConfigError> {
            let d = i64::try_from(default).unwrap_or(i64::MAX);
            Ok(positive(conf, name, d)?.unsigned_abs())
        };
        Ok(Self {
            dir,
            max_file_bytes: num(
                keys::SPINDLE_RM_BLOB_STORE_MAX_FILE_BYTES,
                keys::DEFAULT_SPINDLE_RM_BLOB_STORE_MAX_FILE_BYTES,
            )?,
            max_user_bytes: num(
                keys::SPINDLE_RM_BLOB_STORE_MAX_USER_BYTES,
                keys::DEFAULT_SPINDLE_RM_BLOB_STORE_MAX_USER_BYTES,
            )?,
            retention: Duration::from_millis(num(
                keys::SPINDLE_RM_BLOB_STORE_RETENTION_MS,
                keys::DEFAULT_SPINDLE_RM_BLOB_STORE_RETENTION_MS,
            )?),
            cleaner_interval: Duration::from_millis(num(
                keys::SPINDLE_RM_BLOB_STORE_CLEANER_INTERVAL_MS,
                keys::DEFAULT_SPINDLE_RM_BLOB_STORE_CLEANER_INTERVAL_MS,
            )?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_sit_beside_the_state_store_and_limits_must_be_positive() {
        let conf = Configuration::new();
        let c = BlobStoreConfig::from_conf(&conf, Path::new("/var/rm/rm.sqlite")).unwrap();
        assert_eq!(c.dir, PathBuf::from("/var/rm/blobs"));
        assert_eq!(c.max_file_bytes, 4 << 30);
        assert_eq!(c.max_user_bytes, 20 << 30);
        assert_eq!(c.retention, Duration::from_secs(3600));
        let mut conf = Configuration::new();
        conf.set(keys::SPINDLE_RM_BLOB_STORE_MAX_FILE_BYTES, "0");
        let e = BlobStoreConfig::from_conf(&conf, Path::new("/x"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(keys::SPINDLE_RM_BLOB_STORE_MAX_FILE_BYTES),
            "{e}"
        );
    }
}
