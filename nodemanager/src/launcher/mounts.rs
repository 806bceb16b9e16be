//! [`PrivateMounts`]: what a forked child mounts in a mount namespace of its own before its
//! `exec` (the C strings are made here, before the fork; `spawn.rs` makes the calls).

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::spawn::cstr;

/// Mounts made in a child's own mount namespace (the OCI runtime's leader: its container's
/// root file system, and no cgroup2 mount on a hybrid node, which crun refuses to work with).
#[derive(Debug, Default)]
pub struct PrivateMounts {
    /// Detached (`umount2(MNT_DETACH)`) if mounted; a path that is not a mount point is fine.
    pub(super) detach: Vec<CString>,
    /// `mount(source, target, fstype, 0, data)`, in order.
    pub(super) mounts: Vec<[CString; 4]>,
}

impl PrivateMounts {
    pub fn new() -> Self {
        Self::default()
    }
    /// Unmounts `path` in the namespace if it is mounted there.
    pub fn detach(mut self, path: &Path) -> io::Result<Self> {
        self.detach
            .push(cstr(path.as_os_str().as_bytes(), "a mount point")?);
        Ok(self)
    }
    /// Mounts a file system of `fstype` on `target` (relative to the child's directory).
    pub fn mount(
        mut self,
        source: &str,
        target: &Path,
        fstype: &str,
        data: &str,
    ) -> io::Result<Self> {
        self.mounts.push([
            cstr(source.as_bytes(), "a mount source")?,
            cstr(target.as_os_str().as_bytes(), "a mount point")?,
            cstr(fstype.as_bytes(), "a file system type")?,
            cstr(data.as_bytes(), "mount options")?,
        ]);
        Ok(self)
    }
}
