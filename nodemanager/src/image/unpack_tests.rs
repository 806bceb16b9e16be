//! Hostile and ordinary layers against [`unpack_layer`]: every escape refused or
//! neutralized, and a file planted outside the layer untouched.

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use super::*;

enum E<'a> {
    File(&'a str, &'a [u8], u32),
    Dir(&'a str),
    Symlink(&'a str, &'a str),
    HardLink(&'a str, &'a str),
    CharDev(&'a str),
}

/// A tar whose names are written raw (the tar crate's builder refuses `..`, which is the
/// point of these tests).
fn layer(entries: &[E<'_>]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for e in entries {
        let mut h = tar::Header::new_old();
        let (name, data): (&str, &[u8]) = match e {
            E::File(n, d, mode) => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_mode(*mode);
                (n, d)
            }
            E::Dir(n) => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(0o755);
                (n, b"")
            }
            E::Symlink(n, t) | E::HardLink(n, t) => {
                h.set_entry_type(if matches!(e, E::Symlink(..)) {
                    tar::EntryType::Symlink
                } else {
                    tar::EntryType::Link
                });
                h.as_old_mut().linkname[..t.len()].copy_from_slice(t.as_bytes());
                h.set_mode(0o777);
                (n, b"")
            }
            E::CharDev(n) => {
                h.set_entry_type(tar::EntryType::Char);
                h.set_mode(0o666);
                (n, b"")
            }
        };
        h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        h.set_size(data.len() as u64);
        h.set_uid(0);
        h.set_gid(0);
        h.set_cksum();
        b.append(&h, data).unwrap();
    }
    b.into_inner().unwrap()
}

struct Fixture {
    _tmp: tempfile::TempDir,
    host: std::path::PathBuf,
    dest: std::path::PathBuf,
    blob: std::path::PathBuf,
}

/// `<tmp>/host/planted` (the host file) and `<tmp>/cache/layer` (the layer's directory,
/// two levels down so that `../../host/planted` reaches the host file).
fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let host = tmp.path().join("host");
    fs::create_dir(&host).unwrap();
    fs::write(host.join("planted"), b"host").unwrap();
    let dest = tmp.path().join("cache/layer");
    fs::create_dir_all(&dest).unwrap();
    Fixture {
        blob: tmp.path().join("blob.tar"),
        host,
        dest,
        _tmp: tmp,
    }
}

impl Fixture {
    fn unpack(&self, entries: &[E<'_>]) -> Result<Unpacked, ImageError> {
        fs::write(&self.blob, layer(entries)).unwrap();
        unpack_layer(
            &self.blob,
            Compression::None,
            &self.dest,
            "sha256:test",
            1 << 30,
        )
    }

    fn host_untouched(&self) {
        assert_eq!(fs::read(self.host.join("planted")).unwrap(), b"host");
        let names: Vec<_> = fs::read_dir(&self.host)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec!["planted"], "nothing new beside the host file");
    }
}

fn refused(r: Result<Unpacked, ImageError>) -> UnsafeEntry {
    match r {
        Err(ImageError::UnsafeLayer { problem, .. }) => problem,
        other => panic!("expected an unsafe-layer refusal, got {other:?}"),
    }
}

#[test]
fn path_traversal_is_refused() {
    let f = fixture();
    let p = refused(f.unpack(&[E::File("../../host/planted", b"pwned", 0o644)]));
    assert_eq!(
        p,
        UnsafeEntry::ParentComponent {
            entry: "../../host/planted".into()
        }
    );
    let p = refused(f.unpack(&[E::File("a/../../x", b"pwned", 0o644)]));
    assert!(matches!(p, UnsafeEntry::ParentComponent { .. }));
    f.host_untouched();
}

#[test]
fn absolute_paths_are_refused() {
    let f = fixture();
    let abs = format!("{}/planted", f.host.display());
    let p = refused(f.unpack(&[E::File(&abs, b"pwned", 0o644)]));
    assert!(matches!(p, UnsafeEntry::AbsolutePath { .. }), "{p:?}");
    f.host_untouched();
}

#[test]
fn a_write_through_an_absolute_symlink_is_refused() {
    let f = fixture();
    let host = f.host.display().to_string();
    let p = refused(f.unpack(&[
        E::Symlink("evil", &host),
        E::File("evil/planted", b"pwned", 0o644),
    ]));
    assert_eq!(
        p,
        UnsafeEntry::ThroughSymlink {
            entry: "evil/planted".into(),
            link: "evil".into()
        }
    );
    f.host_untouched();
}

#[test]
fn an_absolute_symlink_alone_is_kept_and_a_later_file_replaces_it() {
    let f = fixture();
    let planted = format!("{}/planted", f.host.display());
    f.unpack(&[
        E::Symlink("etc-passwd", "/etc/passwd"),
        E::Symlink("replace-me", &planted),
        E::File("replace-me", b"layer", 0o644),
    ])
    .unwrap();
    assert_eq!(
        fs::read_link(f.dest.join("etc-passwd")).unwrap(),
        Path::new("/etc/passwd")
    );
    // The file entry replaced the link; it did not write through it.
    let m = fs::symlink_metadata(f.dest.join("replace-me")).unwrap();
    assert!(m.is_file());
    assert_eq!(fs::read(f.dest.join("replace-me")).unwrap(), b"layer");
    f.host_untouched();
}

#[test]
fn a_relative_symlink_above_the_root_is_neutralized() {
    let f = fixture();
    f.unpack(&[
        E::Dir("a"),
        E::Symlink("a/up", "../../host/planted"),
        E::Symlink("a/in", "../etc/os-release"),
    ])
    .unwrap();
    assert_eq!(
        fs::read_link(f.dest.join("a/up")).unwrap(),
        Path::new("/host/planted")
    );
    assert_eq!(
        fs::read_link(f.dest.join("a/in")).unwrap(),
        Path::new("../etc/os-release")
    );
    f.host_untouched();
}

#[test]
fn a_hard_link_out_is_refused() {
    let f = fixture();
    let p = refused(f.unpack(&[E::HardLink("hl", "../../host/planted")]));
    assert!(matches!(p, UnsafeEntry::HardLinkOutside { .. }), "{p:?}");
    let abs = format!("{}/planted", f.host.display());
    let p = refused(f.unpack(&[E::HardLink("hl2", &abs)]));
    assert!(matches!(p, UnsafeEntry::HardLinkOutside { .. }), "{p:?}");
    // Through a symlink to the host: not a file of this layer.
    let host = f.host.display().to_string();
    let p = refused(f.unpack(&[E::Symlink("h", &host), E::HardLink("hl3", "h/planted")]));
    assert!(
        matches!(p, UnsafeEntry::HardLinkTargetMissing { .. }),
        "{p:?}"
    );
    assert_eq!(fs::metadata(f.host.join("planted")).unwrap().nlink(), 1);
    f.host_untouched();
}

#[test]
fn a_hard_link_inside_the_layer_works() {
    let f = fixture();
    f.unpack(&[
        E::File("bin/busybox", b"elf", 0o755),
        E::HardLink("bin/sh", "bin/busybox"),
    ])
    .unwrap();
    assert_eq!(fs::metadata(f.dest.join("bin/sh")).unwrap().nlink(), 2);
}

#[test]
fn a_device_node_is_refused() {
    let f = fixture();
    let p = refused(f.unpack(&[E::CharDev("dev/sda")]));
    assert_eq!(
        p,
        UnsafeEntry::DeviceNode {
            entry: "dev/sda".into()
        }
    );
    f.host_untouched();
}

#[test]
fn setuid_is_stripped_and_sizes_counted() {
    let f = fixture();
    let u = f
        .unpack(&[
            E::File("bin/su", b"12345", 0o4755),
            E::File("x", b"ab", 0o2644),
        ])
        .unwrap();
    assert_eq!(u.bytes, 7);
    assert_eq!(
        fs::metadata(f.dest.join("bin/su")).unwrap().mode() & 0o7777,
        0o755
    );
    assert_eq!(
        fs::metadata(f.dest.join("x")).unwrap().mode() & 0o7777,
        0o644
    );
    let tarball = layer(&[
        E::File("bin/su", b"12345", 0o4755),
        E::File("x", b"ab", 0o2644),
    ]);
    assert_eq!(u.diff_id, Digest::of(&tarball));
}

#[test]
fn over_the_size_limit_is_cache_full() {
    let f = fixture();
    fs::write(&f.blob, layer(&[E::File("big", &[0u8; 100], 0o644)])).unwrap();
    let r = unpack_layer(&f.blob, Compression::None, &f.dest, "l", 10);
    assert!(matches!(r, Err(ImageError::CacheFull { .. })), "{r:?}");
}

#[test]
fn whiteouts_become_overlay_whiteouts() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIP whiteouts_become_overlay_whiteouts: mknod and trusted.* xattrs need root");
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI runs as root"
        );
        return;
    }
    let f = fixture();
    let r = f.unpack(&[
        E::File("etc/.wh.motd", b"", 0o644),
        E::File("opt/.wh..wh..opq", b"", 0o644),
    ]);
    match r {
        // A filesystem without trusted xattrs (tmpfs on old kernels) cannot hold the
        // opaque marker; overlayfs's own upper dirs need the same.
        Err(ImageError::Io {
            op: "set trusted.overlay.opaque on",
            ..
        }) => {
            eprintln!("SKIP opaque check: the temp filesystem has no trusted xattrs");
        }
        other => {
            other.unwrap();
            let mut v = [0u8; 4];
            let c_path = CString::new(f.dest.join("opt").as_os_str().as_bytes()).unwrap();
            // SAFETY: NUL-terminated path and key; the buffer and its length match.
            let n = unsafe {
                nix::libc::lgetxattr(
                    c_path.as_ptr(),
                    c"trusted.overlay.opaque".as_ptr(),
                    v.as_mut_ptr().cast(),
                    v.len(),
                )
            };
            assert_eq!(&v[..usize::try_from(n).unwrap()], b"y");
        }
    }
    let m = fs::symlink_metadata(f.dest.join("etc/motd")).unwrap();
    assert!(m.file_type().is_char_device());
    assert_eq!(m.rdev(), 0);
    assert!(!f.dest.join("etc/.wh.motd").exists());
}
