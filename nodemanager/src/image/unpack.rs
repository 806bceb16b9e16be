//! Unpacking one layer tar into its own directory, safely against a hostile layer (item 5 of
//! issue 28), with OCI whiteouts turned into overlayfs's form so the layer directories stack
//! as `lowerdir`s.
//!
//! Rules, each refusal a named [`UnsafeEntry`]:
//! - a path that is absolute or has a `..` component is refused;
//! - nothing is ever written through a symbolic link: every parent of an entry must be a
//!   real directory of this layer (a parent that is a symlink is refused), the entry itself
//!   replaces (unlinks) whatever was at its name, and files are created with
//!   `O_CREAT|O_EXCL|O_NOFOLLOW`;
//! - a hard link must name a file of this layer by a relative path without `..`;
//! - device nodes are refused (a container gets its devices from the runtime, never from an
//!   image); FIFOs are kept;
//! - symlinks are kept as symlinks; an absolute target is fine (it is resolved inside the
//!   container's root), a relative one that climbs above the layer root is rewritten to the
//!   absolute path it means inside the container (`..` at `/` stays at `/`), so no relative
//!   link in the cache points at the host;
//! - setuid and setgid bits on files are stripped: containers run with no-new-privileges, so
//!   inside they would be inert, and outside they would make a root-owned binary planted by
//!   an image author a host privilege escalation should the cache ever be exposed;
//!   extended attributes (file capabilities included) are not restored, for the same reason;
//! - `.wh.NAME` becomes a 0:0 character device `NAME`, `.wh..wh..opq` sets
//!   `trusted.overlay.opaque=y` on its directory (both need root, as overlayfs does).
//!
//! Runs on a blocking thread; `dest` is a fresh private directory that only this unpack
//! writes, so the checks cannot be raced by the layer itself.

use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use nix::sys::stat::{makedev, mknod, Mode, SFlag};

use super::digest::{Digest, HashingReader};
use super::error::{ImageError, UnsafeEntry};
use super::manifest::Compression;

const WHITEOUT_PREFIX: &str = ".wh.";
const OPAQUE_WHITEOUT: &str = ".wh..wh..opq";

/// What an unpack produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unpacked {
    /// Bytes of regular files written.
    pub bytes: u64,
    /// The sha256 of the uncompressed tar (the image config's diff id for this layer).
    pub diff_id: Digest,
}

/// Unpacks the layer blob at `blob` into the empty directory `dest`. `layer` names the layer
/// in errors; more than `max_bytes` of file content is [`ImageError::CacheFull`].
pub fn unpack_layer(
    blob: &Path,
    compression: Compression,
    dest: &Path,
    layer: &str,
    max_bytes: u64,
) -> Result<Unpacked, ImageError> {
    let file = File::open(blob).map_err(|e| ImageError::io("open layer blob", blob, e))?;
    let reader: Box<dyn Read> = match compression {
        Compression::None => Box::new(BufReader::new(file)),
        Compression::Gzip => Box::new(flate2::read::GzDecoder::new(BufReader::new(file))),
    };
    let mut archive = tar::Archive::new(HashingReader::new(reader));
    let mut u = Unpacker {
        dest,
        layer,
        max_bytes,
        bytes: 0,
        dir_modes: Vec::new(),
        is_root: nix::unistd::geteuid().is_root(),
    };
    let entries = archive
        .entries()
        .map_err(|e| ImageError::io("read layer", blob, e))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| ImageError::io("read layer", blob, e))?;
        u.entry(&mut entry)?;
    }
    let diff_id = archive
        .into_inner()
        .finish()
        .map_err(|e| ImageError::io("read layer", blob, e))?;
    u.apply_dir_modes()?;
    Ok(Unpacked {
        bytes: u.bytes,
        diff_id,
    })
}

struct Unpacker<'a> {
    dest: &'a Path,
    layer: &'a str,
    max_bytes: u64,
    bytes: u64,
    /// Directory modes, applied at the end (a read-only directory must still take entries).
    dir_modes: Vec<(PathBuf, u32)>,
    is_root: bool,
}

/// The entry's path relative to the layer root, or why it has none.
pub(super) fn relative(name: &str, path: &Path) -> Result<PathBuf, UnsafeEntry> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Normal(x) => out.push(x),
            Component::CurDir => {}
            Component::ParentDir => {
                return Err(UnsafeEntry::ParentComponent { entry: name.into() })
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(UnsafeEntry::AbsolutePath { entry: name.into() })
            }
        }
    }
    Ok(out)
}

/// A relative symlink target that climbs above the root, rewritten to the absolute path it
/// resolves to inside the container; any other target unchanged.
fn neutralize_symlink(link_dir: &Path, target: &Path) -> PathBuf {
    if target.is_absolute() {
        return target.to_path_buf();
    }
    let mut stack: Vec<_> = link_dir.components().collect();
    let mut escaped = false;
    for c in target.components() {
        match c {
            Component::ParentDir => escaped |= stack.pop().is_none(),
            Component::CurDir => {}
            other => stack.push(other),
        }
    }
    if !escaped {
        return target.to_path_buf();
    }
    let mut abs = PathBuf::from("/");
    abs.extend(stack);
    abs
}

impl Unpacker<'_> {
    fn unsafe_entry(&self, problem: UnsafeEntry) -> ImageError {
        ImageError::UnsafeLayer {
            layer: self.layer.to_string(),
            problem,
        }
    }

    fn entry<R: Read>(&mut self, entry: &mut tar::Entry<'_, R>) -> Result<(), ImageError> {
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let path = entry
            .path()
            .map_err(|e| ImageError::io("read layer entry", &name, e))?
            .into_owned();
        let rel = relative(&name, &path).map_err(|p| self.unsafe_entry(p))?;
        let kind = entry.header().entry_type();
        let Some(file_name) = rel.file_name().map(|f| f.to_string_lossy().into_owned()) else {
            return Ok(()); // the layer root itself: its directory is ours
        };
        let parent = rel.parent().unwrap_or(Path::new("")).to_path_buf();
        if file_name.starts_with(WHITEOUT_PREFIX) {
            return self.whiteout(&name, &parent, &file_name);
        }
        self.ensure_dir(&name, &parent)?;
        let target = self.dest.join(&rel);
        let is_dir = kind == tar::EntryType::Directory;
        self.clear(&target, is_dir)?;
        let header = entry.header();
        let mode = header
            .mode()
            .map_err(|e| ImageError::io("read layer entry", &name, e))?;
        let owner = (header.uid().ok(), header.gid().ok());
        match kind {
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                self.file(entry, &name, &target, mode, owner)
            }
            tar::EntryType::Directory => {
                if !target.exists() {
                    fs::create_dir(&target).map_err(|e| ImageError::io("create", &target, e))?;
                }
                self.chown(&target, owner)?;
                self.dir_modes.push((rel, mode & 0o7777));
                Ok(())
            }
            tar::EntryType::Symlink => {
                let link = entry
                    .link_name()
                    .map_err(|e| ImageError::io("read layer entry", &name, e))?
                    .ok_or_else(|| {
                        self.unsafe_entry(UnsafeEntry::UnsupportedEntryType {
                            entry: name.clone(),
                            kind: kind.as_byte(),
                        })
                    })?;
                let link = neutralize_symlink(&parent, &link);
                std::os::unix::fs::symlink(&link, &target)
                    .map_err(|e| ImageError::io("create symlink", &target, e))?;
                self.chown(&target, owner)
            }
            tar::EntryType::Link => self.hard_link(entry, &name, &target),
            tar::EntryType::Char | tar::EntryType::Block => {
                Err(self.unsafe_entry(UnsafeEntry::DeviceNode { entry: name }))
            }
            tar::EntryType::Fifo => {
                nix::unistd::mkfifo(&target, Mode::from_bits_truncate(mode & 0o777))
                    .map_err(|e| ImageError::io("create fifo", &target, e.into()))?;
                self.chown(&target, owner)
            }
            tar::EntryType::XGlobalHeader | tar::EntryType::XHeader => Ok(()),
            other => Err(self.unsafe_entry(UnsafeEntry::UnsupportedEntryType {
                entry: name,
                kind: other.as_byte(),
            })),
        }
    }

    fn file<R: Read>(
        &mut self,
        entry: &mut tar::Entry<'_, R>,
        name: &str,
        target: &Path,
        mode: u32,
        owner: (Option<u64>, Option<u64>),
    ) -> Result<(), ImageError> {
        self.bytes = self
            .bytes
            .saturating_add(entry.header().size().unwrap_or(0));
        if self.bytes > self.max_bytes {
            return Err(ImageError::CacheFull {
                needed: self.bytes,
                in_use: 0,
                limit: self.max_bytes,
            });
        }
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(target)
            .map_err(|e| ImageError::io("create", target, e))?;
        io::copy(entry, &mut f).map_err(|e| ImageError::io("write layer entry", name, e))?;
        if self.is_root {
            if let (Some(uid), Some(gid)) = owner {
                std::os::unix::fs::fchown(&f, u32::try_from(uid).ok(), u32::try_from(gid).ok())
                    .map_err(|e| ImageError::io("chown", target, e))?;
            }
        }
        // After chown (which clears them anyway): no setuid/setgid, see the module doc.
        f.set_permissions(fs::Permissions::from_mode(mode & 0o1777))
            .map_err(|e| ImageError::io("chmod", target, e))
    }

    fn hard_link<R: Read>(
        &mut self,
        entry: &mut tar::Entry<'_, R>,
        name: &str,
        target: &Path,
    ) -> Result<(), ImageError> {
        let link = entry
            .link_name()
            .map_err(|e| ImageError::io("read layer entry", name, e))?
            .unwrap_or_default()
            .into_owned();
        let outside = || UnsafeEntry::HardLinkOutside {
            entry: name.to_string(),
            target: link.display().to_string(),
        };
        let rel = relative(name, &link).map_err(|_| self.unsafe_entry(outside()))?;
        let missing = || UnsafeEntry::HardLinkTargetMissing {
            entry: name.to_string(),
            target: link.display().to_string(),
        };
        if rel.as_os_str().is_empty() || self.symlinked_parent(&rel).is_some() {
            return Err(self.unsafe_entry(missing()));
        }
        let source = self.dest.join(&rel);
        match fs::symlink_metadata(&source) {
            Ok(m) if !m.is_dir() => {}
            _ => return Err(self.unsafe_entry(missing())),
        }
        fs::hard_link(&source, target).map_err(|e| ImageError::io("create hard link", target, e))
    }

    /// The first parent of `rel` (inside the layer) that is not a real directory.
    fn symlinked_parent(&self, rel: &Path) -> Option<PathBuf> {
        let mut cur = self.dest.to_path_buf();
        let parents: Vec<_> = rel.parent()?.components().collect();
        for c in parents {
            cur.push(c);
            match fs::symlink_metadata(&cur) {
                Ok(m) if m.is_dir() => {}
                _ => return Some(cur),
            }
        }
        None
    }

    /// Makes `dir` (relative) a real directory, creating what is missing; a component that
    /// is a symlink is refused, one that is another file is replaced.
    fn ensure_dir(&mut self, name: &str, dir: &Path) -> Result<(), ImageError> {
        let mut cur = self.dest.to_path_buf();
        for c in dir.components() {
            cur.push(c);
            match fs::symlink_metadata(&cur) {
                Ok(m) if m.is_dir() => continue,
                Ok(m) if m.file_type().is_symlink() => {
                    let link = cur.strip_prefix(self.dest).unwrap_or(&cur);
                    return Err(self.unsafe_entry(UnsafeEntry::ThroughSymlink {
                        entry: name.to_string(),
                        link: link.display().to_string(),
                    }));
                }
                Ok(_) => fs::remove_file(&cur).map_err(|e| ImageError::io("remove", &cur, e))?,
                Err(_) => {}
            }
            fs::create_dir(&cur).map_err(|e| ImageError::io("create", &cur, e))?;
        }
        Ok(())
    }

    /// Removes what is at `target` (never following a symlink), except a directory that a
    /// directory entry keeps.
    fn clear(&mut self, target: &Path, keep_dir: bool) -> Result<(), ImageError> {
        match fs::symlink_metadata(target) {
            Ok(m) if m.is_dir() && keep_dir => Ok(()),
            Ok(m) if m.is_dir() => {
                let rel = target
                    .strip_prefix(self.dest)
                    .unwrap_or(target)
                    .to_path_buf();
                self.dir_modes.retain(|(p, _)| !p.starts_with(&rel));
                fs::remove_dir_all(target).map_err(|e| ImageError::io("remove", target, e))
            }
            Ok(_) => fs::remove_file(target).map_err(|e| ImageError::io("remove", target, e)),
            Err(_) => Ok(()),
        }
    }

    fn chown(&self, path: &Path, owner: (Option<u64>, Option<u64>)) -> Result<(), ImageError> {
        if let (true, Some(uid), Some(gid)) = (self.is_root, owner.0, owner.1) {
            std::os::unix::fs::lchown(path, u32::try_from(uid).ok(), u32::try_from(gid).ok())
                .map_err(|e| ImageError::io("chown", path, e))?;
        }
        Ok(())
    }

    fn whiteout(&mut self, name: &str, parent: &Path, file_name: &str) -> Result<(), ImageError> {
        self.ensure_dir(name, parent)?;
        let dir = self.dest.join(parent);
        if file_name == OPAQUE_WHITEOUT {
            return set_opaque(&dir);
        }
        let hidden = &file_name[WHITEOUT_PREFIX.len()..];
        if hidden.starts_with(WHITEOUT_PREFIX) {
            return Ok(()); // other `.wh..wh.` names are AUFS metadata, meaningless here
        }
        if hidden.is_empty() || hidden == "." || hidden == ".." {
            return Err(self.unsafe_entry(UnsafeEntry::BadWhiteout { entry: name.into() }));
        }
        let target = dir.join(hidden);
        self.clear(&target, false)?;
        mknod(&target, SFlag::S_IFCHR, Mode::empty(), makedev(0, 0))
            .map_err(|e| ImageError::io("create whiteout", &target, e.into()))
    }

    fn apply_dir_modes(&self) -> Result<(), ImageError> {
        for (rel, mode) in self.dir_modes.iter().rev() {
            let path = self.dest.join(rel);
            if self.symlinked_parent(&rel.join("x")).is_some() {
                continue; // replaced since; never chmod through a link
            }
            let dir = OpenOptions::new()
                .read(true)
                .custom_flags(nix::libc::O_DIRECTORY | nix::libc::O_NOFOLLOW)
                .open(&path)
                .map_err(|e| ImageError::io("open", &path, e))?;
            dir.set_permissions(fs::Permissions::from_mode(*mode))
                .map_err(|e| ImageError::io("chmod", &path, e))?;
        }
        Ok(())
    }
}

/// `trusted.overlay.opaque=y` on `dir` (never following a symlink).
fn set_opaque(dir: &Path) -> Result<(), ImageError> {
    let c_path = CString::new(dir.as_os_str().as_bytes())
        .map_err(|e| ImageError::io("set opaque on", dir, io::Error::other(e)))?;
    let key = c"trusted.overlay.opaque";
    // SAFETY: both strings are NUL-terminated and live across the call; the value pointer
    // and length describe one valid byte.
    let rc =
        unsafe { nix::libc::lsetxattr(c_path.as_ptr(), key.as_ptr(), b"y".as_ptr().cast(), 1, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(ImageError::io(
            "set trusted.overlay.opaque on",
            dir,
            io::Error::last_os_error(),
        ))
    }
}

#[cfg(test)]
#[path = "unpack_tests.rs"]
mod tests;
