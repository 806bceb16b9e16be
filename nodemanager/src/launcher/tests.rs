//! Unit tests of the launcher's pure parts: local resource URLs and names, localization into
//! a temporary dir, the plain-argv fast path, placeholders, file tails and `/proc` reads.
//! They must not start containers (the executor is tested in `nodemanager/tests`).

use super::files::open_log;
use super::localize::localize_as;
use super::*;
use std::fs;
use std::os::unix::fs::PermissionsExt;

#[test]
fn resource_urls() {
    assert_eq!(
        resource_source("file:///a/b").unwrap(),
        PathBuf::from("/a/b")
    );
    assert_eq!(
        resource_source("file://localhost/a%20b").unwrap(),
        PathBuf::from("/a b")
    );
    assert_eq!(resource_source("file:/x").unwrap(), PathBuf::from("/x"));
    assert_eq!(resource_source("/abs").unwrap(), PathBuf::from("/abs"));
    assert!(resource_source("hdfs://nn/x")
        .unwrap_err()
        .contains("not supported"));
    assert!(resource_source("file://other/x")
        .unwrap_err()
        .contains("remote host"));
    assert!(resource_source("rel/x").is_err());
    let w = Path::new("/w");
    assert_eq!(resource_target(w, "a/b").unwrap(), PathBuf::from("/w/a/b"));
    for bad in ["", "../x", "/abs", "a/../../b", "./"] {
        assert!(resource_target(w, bad).is_err(), "{bad}");
    }
    assert_eq!(
        resource_target(w, WORK_DIR_KEY).unwrap(),
        PathBuf::from("/w")
    );
}

#[test]
fn plain_commands_are_exec_d_directly_and_shell_syntax_is_not() {
    assert_eq!(
        plain_argv("/usr/bin/sleep 10", false),
        Some(vec!["/usr/bin/sleep", "10"])
    );
    assert_eq!(
        plain_argv("python3 train.py --lr 0.1", true),
        Some(vec!["python3", "train.py", "--lr", "0.1"])
    );
    assert_eq!(
        plain_argv("python3 train.py", false),
        None,
        "no PATH: leave it to bash"
    );
    assert_eq!(
        plain_argv("exec /bin/prog a", false),
        Some(vec!["/bin/prog", "a"])
    );
    assert_eq!(
        plain_argv("exec python3 t.py --lr=0.1", true),
        Some(vec!["python3", "t.py", "--lr=0.1"])
    );
    for shell in [
        "echo hi",
        "exit 3",
        "a=1 prog",
        "prog > out",
        "prog | x",
        "prog; y",
        "p $X",
        "p \"a b\"",
        "./spindle am",
        "p *.txt",
        "cd /tmp",
        "p 'a'",
        "p && q",
    ] {
        assert_eq!(plain_argv(shell, true), None, "{shell}");
    }
}

#[test]
fn placeholders() {
    let s = expand_placeholders("x 1><LOG_DIR>/stdout {{HOME}} a<CPS>b {{", Path::new("/l"));
    assert_eq!(s, "x 1>/l/stdout $HOME a:b {{");
}

#[test]
fn localization_copies_with_mode_and_refuses_missing() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("tool.sh");
    fs::write(&src, "echo hi").unwrap();
    fs::set_permissions(&src, fs::Permissions::from_mode(0o755)).unwrap();
    let work = d.path().join("work");
    fs::create_dir_all(&work).unwrap();
    let res = LocalResourceInfo {
        resource: format!("file://{}", src.display()),
        kind: "FILE".into(),
        ..Default::default()
    };
    localize(&work, "bin/tool.sh", &res).unwrap();
    let mode = fs::metadata(work.join("bin/tool.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
    let missing = LocalResourceInfo {
        resource: "/no/such/file".into(),
        ..Default::default()
    };
    let e = localize(&work, "m", &missing).unwrap_err();
    assert!(e.is_localization());
    assert!(e.to_string().contains("/no/such/file"), "{e}");
}

#[test]
fn tails_and_proc_stat() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("f");
    fs::write(&p, "0123456789").unwrap();
    assert_eq!(file_tail(&p, 4), "6789");
    assert_eq!(file_tail(&p, 100), "0123456789");
    assert_eq!(file_tail(&d.path().join("none"), 4), "");
    let me = std::process::id() as i32;
    let ticks = proc_start_ticks(me);
    assert!(ticks.is_some());
    let ex = ProcessExecutor::new();
    assert!(ex.is_alive(&ExecHandle::process_group(me, ticks)));
    assert!(!ex.is_alive(&ExecHandle::process_group(me, ticks.map(|t| t + 1))));
    assert!(!ex.is_alive(&ExecHandle::process_group(0, None)));
    assert!(!ex.is_alive(&ExecHandle::process_group(1, None)));
}

/// A tar entry header named `name` (written raw, so hostile names survive the builder's
/// own checks).
fn raw_header(name: &str, kind: tar::EntryType, size: u64, link: Option<&str>) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_size(size);
    h.set_mode(0o755);
    h.set_mtime(0);
    let old = h.as_old_mut();
    old.name[..name.len()].copy_from_slice(name.as_bytes());
    if let Some(l) = link {
        old.linkname[..l.len()].copy_from_slice(l.as_bytes());
    }
    h.set_cksum();
    h
}

/// Writes a `.tar.gz` of the given entries: (name, type, content or link target).
fn tgz(path: &Path, entries: &[(&str, tar::EntryType, &str)]) {
    let f = fs::File::create(path).unwrap();
    let gz = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
    let mut b = tar::Builder::new(gz);
    for (name, kind, body) in entries {
        if *kind == tar::EntryType::Regular {
            let h = raw_header(name, *kind, body.len() as u64, None);
            b.append(&h, body.as_bytes()).unwrap();
        } else if *kind == tar::EntryType::Directory {
            b.append(&raw_header(name, *kind, 0, None), std::io::empty())
                .unwrap();
        } else {
            b.append(&raw_header(name, *kind, 0, Some(body)), std::io::empty())
                .unwrap();
        }
    }
    b.into_inner().unwrap().finish().unwrap();
}

fn archive_res(path: &Path) -> LocalResourceInfo {
    LocalResourceInfo {
        resource: format!("file://{}", path.display()),
        kind: "ARCHIVE".into(),
        ..Default::default()
    }
}

#[test]
fn archives_unpack_into_their_key_or_the_work_dir_itself() {
    use tar::EntryType as T;
    let d = tempfile::tempdir().unwrap();
    let a = d.path().join("code.tgz");
    tgz(
        &a,
        &[
            ("./", T::Directory, ""),
            ("./train.py", T::Regular, "print(1)"),
            ("./pkg/", T::Directory, ""),
            ("./pkg/m.py", T::Regular, "x = 1"),
            ("./pkg/link", T::Symlink, "../train.py"),
            ("./again", T::Link, "pkg/m.py"),
        ],
    );
    let work = d.path().join("work");
    fs::create_dir_all(&work).unwrap();
    localize(&work, WORK_DIR_KEY, &archive_res(&a)).unwrap();
    assert_eq!(
        fs::read_to_string(work.join("train.py")).unwrap(),
        "print(1)"
    );
    assert_eq!(fs::read_to_string(work.join("pkg/m.py")).unwrap(), "x = 1");
    assert_eq!(
        fs::read_to_string(work.join("pkg/link")).unwrap(),
        "print(1)"
    );
    assert_eq!(fs::read_to_string(work.join("again")).unwrap(), "x = 1");
    let mode = fs::metadata(work.join("train.py"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755, "modes are kept");
    // Under its key, and a plain .tar.
    let t = d.path().join("data.TAR");
    {
        let mut b = tar::Builder::new(fs::File::create(&t).unwrap());
        let h = raw_header("set/a.txt", T::Regular, 2, None);
        b.append(&h, &b"ok"[..]).unwrap();
        b.finish().unwrap();
    }
    localize(&work, "data", &archive_res(&t)).unwrap();
    assert_eq!(
        fs::read_to_string(work.join("data/set/a.txt")).unwrap(),
        "ok"
    );
    // A FILE may not take the work dir's key; other formats are named.
    let file = LocalResourceInfo {
        resource: a.display().to_string(),
        kind: "FILE".into(),
        ..Default::default()
    };
    let e = localize(&work, WORK_DIR_KEY, &file).unwrap_err();
    assert!(e.to_string().contains("only an ARCHIVE"), "{e}");
    let zip = d.path().join("code.zip");
    fs::write(&zip, "PK").unwrap();
    let e = localize(&work, "z", &archive_res(&zip)).unwrap_err();
    assert!(e.is_localization());
    assert!(
        e.to_string().contains("archive format not supported"),
        "{e}"
    );
    let e = localize(
        &work,
        "p",
        &LocalResourceInfo {
            kind: "PATTERN".into(),
            ..archive_res(&a)
        },
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("type PATTERN is not supported"),
        "{e}"
    );
}

#[test]
fn hostile_archives_are_refused_before_anything_lands_outside() {
    use tar::EntryType as T;
    let d = tempfile::tempdir().unwrap();
    let outside = d.path().join("outside");
    fs::create_dir_all(&outside).unwrap();
    type Entries<'a> = &'a [(&'a str, T, &'a str)];
    let cases: &[(&str, Entries<'_>, &str)] = &[
        (
            "climb",
            &[("../outside/evil", T::Regular, "x")],
            "climbs out",
        ),
        (
            "deep",
            &[("a/../../outside/evil", T::Regular, "x")],
            "climbs out",
        ),
        (
            "abs",
            &[("/tmp/spindle-evil", T::Regular, "x")],
            "absolute path",
        ),
        (
            "symabs",
            &[("l", T::Symlink, "/etc/passwd")],
            "outside the target",
        ),
        (
            "symup",
            &[("a/l", T::Symlink, "../../outside")],
            "outside the target",
        ),
        (
            "through",
            &[("l", T::Symlink, "../outside"), ("l/evil", T::Regular, "x")],
            "outside the target",
        ),
        (
            "hard",
            &[("h", T::Link, "../outside/evil")],
            "outside the target",
        ),
        ("fifo", &[("f", T::Fifo, "")], "fifo"),
        ("dev", &[("c", T::Char, "")], "character device"),
    ];
    for (name, entries, why) in cases {
        let a = d.path().join(format!("{name}.tar.gz"));
        tgz(&a, entries);
        let work = d.path().join(format!("work-{name}"));
        fs::create_dir_all(&work).unwrap();
        let e = localize(&work, WORK_DIR_KEY, &archive_res(&a)).unwrap_err();
        assert!(e.is_localization(), "{name}");
        assert!(e.to_string().contains(why), "{name}: {e}");
        assert!(fs::read_dir(&outside).unwrap().next().is_none(), "{name}");
    }
    assert!(!Path::new("/tmp/spindle-evil").exists());
}

/// A stderr (or `.exitcode`) a container replaced by a link, a fifo or a hard link is not
/// read by the NM, and a log replaced by a link is not opened for writing.
#[test]
fn files_a_container_may_replace_are_not_followed() {
    let d = tempfile::tempdir().unwrap();
    let secret = d.path().join("secret");
    fs::write(&secret, "MARKER").unwrap();
    let link = d.path().join("stderr");
    std::os::unix::fs::symlink(&secret, &link).unwrap();
    assert_eq!(file_tail(&link, 100), "");
    let fifo = d.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    assert_eq!(file_tail(&fifo, 100), "", "a fifo is not waited on");
    let hard = d.path().join("hard");
    fs::hard_link(&secret, &hard).unwrap();
    assert_eq!(file_tail(&hard, 100), "");
    assert!(open_log(&link).is_err());
    assert!(open_log(&fifo).is_err());
    assert_eq!(fs::read_to_string(&secret).unwrap(), "MARKER");
    let work = d.path().join("work");
    fs::create_dir_all(&work).unwrap();
    std::os::unix::fs::symlink(d.path().join("code"), work.join(EXIT_CODE_FILE)).unwrap();
    fs::write(d.path().join("code"), "7\n").unwrap();
    assert_eq!(ProcessExecutor::new().recorded_exit_code(&work), None);
    fs::remove_file(work.join(EXIT_CODE_FILE)).unwrap();
    fs::write(work.join(EXIT_CODE_FILE), "7\n").unwrap();
    assert_eq!(ProcessExecutor::new().recorded_exit_code(&work), Some(7));
}

fn file_res(path: &Path) -> LocalResourceInfo {
    LocalResourceInfo {
        resource: format!("file://{}", path.display()),
        kind: "FILE".into(),
        ..Default::default()
    }
}

/// With containers run as `nobody`, local resources are read as `nobody`: a root-only file
/// (or directory entry, or archive) is refused naming the resource and the user, a
/// world-readable one is localized, and a fifo is refused without hanging.
#[test]
fn resources_are_read_as_the_containers_user() {
    if spindle_test_support::require::root(
        "resources_are_read_as_the_containers_user",
        "reading as nobody needs root",
    )
    .is_none()
    {
        return;
    }
    let nobody = crate::runas::Credentials::lookup("nobody").expect("nobody exists");
    let d = tempfile::tempdir().unwrap();
    // nobody may pass through the test's dir, not list it.
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o711)).unwrap();
    let src = d.path().join("src");
    fs::create_dir(&src).unwrap();
    fs::set_permissions(&src, fs::Permissions::from_mode(0o755)).unwrap();
    let secret = src.join("secret");
    fs::write(&secret, "MARKER").unwrap();
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o600)).unwrap();
    let open = src.join("open.sh");
    fs::write(&open, "echo hi").unwrap();
    fs::set_permissions(&open, fs::Permissions::from_mode(0o755)).unwrap();
    let plain = src.join("plain.txt");
    fs::write(&plain, "text").unwrap();
    fs::set_permissions(&plain, fs::Permissions::from_mode(0o644)).unwrap();
    let work = d.path().join("work");
    fs::create_dir_all(&work).unwrap();
    let as_nobody =
        |key: &str, res: &LocalResourceInfo| localize_as(&work, key, res, Some(&nobody));

    // The root-only file: refused, named, nothing left behind.
    let e = as_nobody("s", &file_res(&secret)).unwrap_err();
    assert!(e.is_localization());
    assert!(
        matches!(&e, LaunchError::Source(SourceError::NotReadable { user, .. }) if user == "nobody"),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(msg.contains("local resource 's'"), "{msg}");
    assert!(msg.contains("is not readable by nobody"), "{msg}");
    assert!(!work.join("s").exists());
    // As the NM's own user it is read directly, as before.
    localize(&work, "s-as-nm", &file_res(&secret)).unwrap();
    assert_eq!(fs::read_to_string(work.join("s-as-nm")).unwrap(), "MARKER");

    // World-readable files: localized, an executable stays executable.
    as_nobody("bin/open.sh", &file_res(&open)).unwrap();
    as_nobody("plain.txt", &file_res(&plain)).unwrap();
    assert_eq!(
        fs::read_to_string(work.join("bin/open.sh")).unwrap(),
        "echo hi"
    );
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&work.join("bin/open.sh")), 0o755);
    assert_eq!(mode(&work.join("plain.txt")), 0o644);
    // A link already at the destination is replaced, not written through.
    let target = d.path().join("target");
    fs::write(&target, "untouched").unwrap();
    std::os::unix::fs::symlink(&target, work.join("again.txt")).unwrap();
    as_nobody("again.txt", &file_res(&plain)).unwrap();
    assert_eq!(fs::read_to_string(&target).unwrap(), "untouched");
    assert_eq!(fs::read_to_string(work.join("again.txt")).unwrap(), "text");

    // A directory nobody can read whole: refused (its root-only file); one it can: copied.
    let e = as_nobody("dir", &file_res(&src)).unwrap_err();
    assert!(e.to_string().contains("is not readable by nobody"), "{e}");
    let pub_dir = d.path().join("pub");
    fs::create_dir_all(pub_dir.join("sub")).unwrap();
    fs::write(pub_dir.join("sub/a.txt"), "a").unwrap();
    fs::set_permissions(&pub_dir, fs::Permissions::from_mode(0o755)).unwrap();
    as_nobody("pubdir", &file_res(&pub_dir)).unwrap();
    assert_eq!(
        fs::read_to_string(work.join("pubdir/sub/a.txt")).unwrap(),
        "a"
    );

    // A fifo is refused at once.
    let fifo = src.join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o666)).unwrap();
    let e = as_nobody("f", &file_res(&fifo)).unwrap_err();
    assert!(
        matches!(e, LaunchError::Source(SourceError::NotAFile { .. })),
        "{e:?}"
    );

    // ARCHIVEs go through the same read: root-only refused, readable unpacked (checked).
    use tar::EntryType as T;
    let secret_tgz = src.join("secret.tgz");
    tgz(&secret_tgz, &[("./x", T::Regular, "MARKER")]);
    fs::set_permissions(&secret_tgz, fs::Permissions::from_mode(0o600)).unwrap();
    let e = as_nobody("arch", &archive_res(&secret_tgz)).unwrap_err();
    assert!(e.to_string().contains("is not readable by nobody"), "{e}");
    assert!(!work.join("arch/x").exists());
    let open_tgz = src.join("open.tgz");
    tgz(&open_tgz, &[("./x", T::Regular, "ok")]);
    fs::set_permissions(&open_tgz, fs::Permissions::from_mode(0o644)).unwrap();
    as_nobody("arch", &archive_res(&open_tgz)).unwrap();
    assert_eq!(fs::read_to_string(work.join("arch/x")).unwrap(), "ok");
    let evil_tgz = src.join("evil.tgz");
    tgz(&evil_tgz, &[("../escape", T::Regular, "x")]);
    fs::set_permissions(&evil_tgz, fs::Permissions::from_mode(0o644)).unwrap();
    let e = as_nobody("evil", &archive_res(&evil_tgz)).unwrap_err();
    assert!(e.to_string().contains("climbs out"), "{e}");
    // An ARCHIVE that is a directory is refused.
    let e = as_nobody("d", &archive_res(&pub_dir)).unwrap_err();
    assert!(
        matches!(
            e,
            LaunchError::Source(SourceError::ArchiveIsDirectory { .. })
        ),
        "{e:?}"
    );
}

/// Localizing as another user never writes through a link in the work dir (which that user
/// owns when a container is re-initialized): a linked directory of a nested key is refused,
/// a link at a directory resource's place is replaced.
#[test]
fn localization_as_another_user_writes_through_no_link() {
    if spindle_test_support::require::root(
        "localization_as_another_user_writes_through_no_link",
        "reading as nobody needs root",
    )
    .is_none()
    {
        return;
    }
    let nobody = crate::runas::Credentials::lookup("nobody").expect("nobody exists");
    let d = tempfile::tempdir().unwrap();
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o711)).unwrap();
    let public = d.path().join("public.txt");
    fs::write(&public, "text").unwrap();
    fs::set_permissions(&public, fs::Permissions::from_mode(0o644)).unwrap();
    let pub_dir = d.path().join("pubdir");
    fs::create_dir(&pub_dir).unwrap();
    fs::write(pub_dir.join("f"), "f").unwrap();
    fs::set_permissions(&pub_dir, fs::Permissions::from_mode(0o755)).unwrap();
    let outside = d.path().join("outside");
    fs::create_dir(&outside).unwrap();
    let work = d.path().join("work");
    fs::create_dir(&work).unwrap();
    std::os::unix::fs::symlink(&outside, work.join("sub")).unwrap();
    std::os::unix::fs::symlink(&outside, work.join("tree")).unwrap();

    let e = localize_as(&work, "sub/x.txt", &file_res(&public), Some(&nobody)).unwrap_err();
    assert!(
        e.to_string()
            .contains("'sub' in the work dir is a symbolic link"),
        "{e}"
    );
    localize_as(&work, "tree", &file_res(&pub_dir), Some(&nobody)).unwrap();
    assert_eq!(
        fs::read_dir(&outside).unwrap().count(),
        0,
        "nothing written outside"
    );
    assert!(!fs::symlink_metadata(work.join("tree"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(fs::read_to_string(work.join("tree/f")).unwrap(), "f");
}
