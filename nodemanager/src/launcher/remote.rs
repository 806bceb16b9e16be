//! Localizing a remote resource (a blob of the RM's blob store, an `http(s)://` URL): fetched
//! by [`super::fetch`] into a scratch file of the NM's own, then placed as `localize` places
//! a local one: a `FILE` written into the work dir without following a link (mode 0755, as
//! YARN's localizer makes shipped files executable), an `ARCHIVE` unpacked with the same
//! per-entry checks (its format told by its bytes, since a blob has no name), then the
//! scratch file is removed. Local resources go to `localize` unchanged.

use std::fs;
use std::io::Read;
use std::path::Path;

use spindle_common::records::cluster::LocalResourceInfo;
use spindle_common::resource_url::ResourceUrl;

use super::fetch::{FetchError, Fetcher, Remote};
use super::localize::{
    localize_as, no_links_above, resource_target, unpack_reader, write_new_file, ArchiveError,
    ArchiveFormat, WORK_DIR_KEY,
};
use super::{io_err, LaunchError};
use crate::runas::Credentials;

/// What a container's remote resources are fetched with.
#[derive(Clone, Copy)]
pub(super) struct Remotes<'a> {
    pub fetcher: Option<&'a Fetcher>,
    /// The container token RM blobs are fetched with.
    pub token: Option<&'a str>,
    /// Where a fetched file is written; it is read back through its descriptor only, so
    /// a directory the container's user can write is safe.
    pub scratch: &'a Path,
}

/// Localizes one resource of any form into `work_dir`.
pub(super) fn localize_resource(
    work_dir: &Path,
    key: &str,
    res: &LocalResourceInfo,
    run_as: Option<&Credentials>,
    remotes: Remotes<'_>,
) -> Result<(), LaunchError> {
    let bad = |m: String| LaunchError::Localization(format!("local resource '{key}': {m}"));
    let remote = match ResourceUrl::parse(&res.resource).map_err(|e| bad(e.to_string()))? {
        ResourceUrl::Local(_) => return localize_as(work_dir, key, res, run_as),
        ResourceUrl::Rm(d) => Remote::Rm(d),
        ResourceUrl::Http { url, sha256 } => Remote::Http { url, sha256 },
    };
    let archive = match res.kind.to_ascii_uppercase().as_str() {
        "" | "FILE" => false,
        "ARCHIVE" => true,
        _ => {
            return Err(bad(format!(
                "type {} is not supported (only FILE and ARCHIVE)",
                res.kind
            )))
        }
    };
    if !archive && key == WORK_DIR_KEY {
        return Err(bad(
            "only an ARCHIVE may be unpacked into the work dir itself".into(),
        ));
    }
    let Some(fetcher) = remotes.fetcher else {
        return Err(FetchError::NoFetcher {
            key: key.into(),
            url: res.resource.clone(),
        }
        .into());
    };
    let dst = resource_target(work_dir, key).map_err(LaunchError::Localization)?;
    no_links_above(work_dir, key)?;
    fs::create_dir_all(remotes.scratch).map_err(io_err("create directory", remotes.scratch))?;
    let nonce = spindle_common::cluster_secret::random_nonce().unwrap_or_default();
    let scratch = remotes
        .scratch
        .join(format!(".spindle-fetch-{}.part", hex::encode(nonce)));
    let file = fetcher.fetch(key, &remote, res.size, remotes.token, &scratch)?;
    // Unlinked at once: it is read through its descriptor only.
    let _ = fs::remove_file(&scratch);
    place(key, archive, file, &dst)
}

fn place(key: &str, archive: bool, mut file: fs::File, dst: &Path) -> Result<(), LaunchError> {
    if !archive {
        return write_new_file(&mut file, dst, true);
    }
    if key != WORK_DIR_KEY && fs::symlink_metadata(dst).is_ok_and(|m| m.file_type().is_symlink()) {
        fs::remove_file(dst).map_err(io_err("replace", dst))?;
    }
    let in_archive = |e: ArchiveError| {
        LaunchError::Localization(format!("local resource '{key}' (ARCHIVE): {e}"))
    };
    let format = sniff(&mut file, key).map_err(in_archive)?;
    std::io::Seek::rewind(&mut file).map_err(io_err("read", dst))?;
    unpack_reader(format, Path::new(key), &mut file, dst).map_err(in_archive)
}

/// A gzip stream (`1f 8b`) is a `.tar.gz`; a `ustar` header is a `.tar`; anything else is
/// refused as [`ArchiveFormat::of`] refuses an unknown name.
fn sniff(file: &mut fs::File, key: &str) -> Result<ArchiveFormat, ArchiveError> {
    let mut head = [0u8; 262];
    let mut n = 0;
    while n < head.len() {
        match file.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(source) => {
                return Err(ArchiveError::Read {
                    path: key.into(),
                    source,
                })
            }
        }
    }
    if n >= 2 && head[..2] == [0x1f, 0x8b] {
        Ok(ArchiveFormat::TarGz)
    } else if n >= 262 && &head[257..262] == b"ustar" {
        Ok(ArchiveFormat::Tar)
    } else {
        Err(ArchiveError::UnsupportedFormat { path: key.into() })
    }
}

impl From<FetchError> for LaunchError {
    fn from(e: FetchError) -> Self {
        LaunchError::Fetch(Box::new(e))
    }
}
