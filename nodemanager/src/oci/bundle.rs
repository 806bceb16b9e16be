//! Writing a container's OCI bundle (`<bundle root>/<container id>/`, the NM's own, `0700`):
//! `config.json`, a `passwd` and `group` holding the image's entries plus the container's
//! user, `l/<n>` links to the image's layers (short, so many layers fit in one overlay
//! mount's options), and the overlay's `upper/`, `work/` and `rootfs/`. The overlay itself is
//! mounted by the runtime's leader in a mount namespace of its own
//! ([`crate::launcher::PrivateMounts`]), so it ends with the container whatever happens to
//! the NM.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use tracing::warn;

use super::cdi;
use super::request::{MountMode, OciRequest};
use super::spec::{
    self, Capabilities, Config, Device, DeviceRule, Linux, Mount, Namespace, Process, Resources,
    Root, User,
};
use super::{OciError, RootfsLayers};
use crate::isolation::DeviceNumber;
use crate::launcher::{LaunchSpec, PrivateMounts};

/// The command runs as in the process executor (under bash, exit code recorded in the work
/// dir for recovery), but inside the image, whose only certain shell is `/bin/sh`: the
/// wrapper runs under `sh`, and the command under bash where the image has it, else under
/// `sh`, saying so on stderr. As PID 1 of the container, the wrapper's no-op traps keep it
/// alive through a stop's SIGTERM to record `143`.
pub const OCI_WRAPPER: &str = r#"trap : TERM INT HUP; if command -v bash >/dev/null 2>&1; then bash -c "$1"; else echo "spindle: the image has no bash: the command runs under /bin/sh" >&2; sh -c "$1"; fi; rc=$?; printf '%s\n' "$rc" > .exitcode; exit "$rc""#;

/// The PATH of a container whose image and launch context set none.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// NVIDIA's control devices, given (where the host has them) to a container granted a GPU.
const NVIDIA_CONTROL_DEVICES: &[&str] = &[
    "/dev/nvidiactl",
    "/dev/nvidia-uvm",
    "/dev/nvidia-uvm-tools",
    "/dev/nvidia-modeset",
];
const NVIDIA_MAJOR: u32 = 195;

/// Everything a bundle is made of.
pub struct BundleInput<'a> {
    pub spec: &'a LaunchSpec,
    pub request: &'a OciRequest,
    pub rootfs: &'a RootfsLayers,
    pub cdi_dirs: &'a [PathBuf],
    pub hostname: String,
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> OciError + 'a {
    move |source| OciError::Bundle {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// Writes the bundle in `dir` (replacing a leftover) and returns the leader's private
/// mounts (run from `dir`).
pub fn write(dir: &Path, input: &BundleInput<'_>) -> Result<PrivateMounts, OciError> {
    if fs::symlink_metadata(dir).is_ok() {
        fs::remove_dir_all(dir).map_err(io("remove the leftover bundle", dir))?;
    }
    if let Some(parent) = dir.parent() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(io("create", parent))?;
    }
    fs::DirBuilder::new()
        .mode(0o700)
        .create(dir)
        .map_err(io("create", dir))?;
    for sub in ["rootfs", "upper", "work", "l"] {
        let p = dir.join(sub);
        fs::create_dir(&p).map_err(io("create", &p))?;
    }
    // Layers lowest first; overlay lists the top one first.
    let mut lower = Vec::new();
    for (i, layer) in input.rootfs.layers.iter().enumerate() {
        if !fs::symlink_metadata(layer).is_ok_and(|m| m.is_dir()) {
            return Err(OciError::Layer(layer.clone()));
        }
        let link = dir.join("l").join(i.to_string());
        std::os::unix::fs::symlink(layer, &link).map_err(io("link", &link))?;
        lower.push(format!("l/{i}"));
    }
    if lower.is_empty() {
        let empty = dir.join("l/empty");
        fs::create_dir(&empty).map_err(io("create", &empty))?;
        lower.push("l/empty".into());
    }
    lower.reverse();
    let (uid, gid, groups) = match &input.spec.run_as {
        Some(c) => (c.uid, c.gid, c.groups.clone()),
        None => (
            nix::unistd::geteuid().as_raw(),
            nix::unistd::getegid().as_raw(),
            Vec::new(),
        ),
    };
    let passwd = account_file(
        &input.rootfs.layers,
        "passwd",
        &input.spec.user,
        uid,
        |name| {
            format!(
                "{name}:x:{uid}:{gid}:{name}:{}:/bin/sh",
                input.spec.work_dir.display()
            )
        },
    );
    let group = account_file(
        &input.rootfs.layers,
        "group",
        &input.spec.user,
        gid,
        |name| format!("{name}:x:{gid}:"),
    );
    for (name, text) in [("passwd", passwd), ("group", group)] {
        let p = dir.join(name);
        fs::write(&p, text).map_err(io("write", &p))?;
    }
    let config = config(
        dir,
        input,
        User {
            uid,
            gid,
            additional_gids: groups,
        },
    );
    let p = dir.join("config.json");
    let json = serde_json::to_vec_pretty(&config).map_err(|e| OciError::Bundle {
        what: "serialise",
        path: p.clone(),
        source: std::io::Error::other(e),
    })?;
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&p)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &json))
        .map_err(io("write", &p))?;
    let data = format!("lowerdir={},upperdir=upper,workdir=work", lower.join(":"));
    PrivateMounts::new()
        .detach(Path::new("/sys/fs/cgroup/unified"))
        .and_then(|m| m.mount("overlay", Path::new("rootfs"), "overlay", &data))
        .map_err(io("prepare the mounts of", dir))
}

/// The image's `/etc/<name>` (from the topmost layer holding it as a plain file; a whiteout
/// or a link ends the search) plus a line for `user` when no line has `id`.
fn account_file(
    layers: &[PathBuf],
    name: &str,
    user: &str,
    id: u32,
    line: impl Fn(&str) -> String,
) -> String {
    let mut text = String::new();
    for layer in layers.iter().rev() {
        let etc = layer.join("etc");
        let Ok(m) = fs::symlink_metadata(&etc) else {
            continue;
        };
        if !m.is_dir() {
            break;
        }
        let f = etc.join(name);
        match fs::symlink_metadata(&f) {
            Ok(m) if m.is_file() => {
                if let Ok(file) = fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(nix::libc::O_NOFOLLOW)
                    .open(&f)
                {
                    let _ = file.take(1 << 20).read_to_string(&mut text);
                }
                break;
            }
            Ok(m) if m.file_type().is_char_device() && m.rdev() == 0 => break,
            Ok(_) => break,
            Err(_) => {}
        }
    }
    let has = text
        .lines()
        .any(|l| l.split(':').nth(2) == Some(&id.to_string()));
    if !has {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&line(user));
        text.push('\n');
    }
    text
}

/// The words of a command, quoted for `sh -c`.
fn shell_words(words: &[String]) -> String {
    words
        .iter()
        .map(|w| format!("'{}'", w.replace('\'', r#"'\''"#)))
        .collect::<Vec<_>>()
        .join(" ")
}

fn environment(input: &BundleInput<'_>, cdi_env: &[(String, String)]) -> Vec<String> {
    let mut env: BTreeMap<String, String> = input.spec.env.clone();
    for (k, v) in input
        .rootfs
        .config
        .env
        .iter()
        .filter_map(|e| e.split_once('='))
    {
        // The image's PATH is the image's; otherwise YARN's environment wins.
        if k == "PATH" || !env.contains_key(k) {
            env.insert(k.to_string(), v.to_string());
        }
    }
    for (k, v) in cdi_env {
        env.entry(k.clone()).or_insert_with(|| v.clone());
    }
    env.entry("PATH".into())
        .or_insert_with(|| DEFAULT_PATH.into());
    env.into_iter().map(|(k, v)| format!("{k}={v}")).collect()
}

/// The device nodes of the granted devices: the CDI specification's edits, else the nodes
/// discovery numbered (`/dev/nvidia<minor>`) and the NVIDIA control devices the host has.
fn devices(input: &BundleInput<'_>) -> cdi::CdiEdits {
    let granted = &input.spec.isolation.granted_devices;
    let mut edits = cdi::edits_for(input.cdi_dirs, granted);
    if !edits.applied.is_empty() || granted.is_empty() {
        return edits;
    }
    let node = |path: &str, d: DeviceNumber| Device {
        path: path.into(),
        kind: d.kind.to_string(),
        major: i64::from(d.major),
        minor: i64::from(d.minor),
        file_mode: 0o666,
        uid: 0,
        gid: 0,
    };
    for d in granted {
        if d.major == NVIDIA_MAJOR {
            edits
                .devices
                .push(node(&format!("/dev/nvidia{}", d.minor), *d));
        } else {
            warn!(device = %d, "granted device has no known path: not created in the container");
        }
    }
    for path in NVIDIA_CONTROL_DEVICES {
        if let Ok(m) = fs::metadata(path) {
            if m.file_type().is_char_device() {
                let r = m.rdev();
                let d = DeviceNumber::char(
                    nix::sys::stat::major(r) as u32,
                    nix::sys::stat::minor(r) as u32,
                );
                edits.devices.push(node(path, d));
            }
        }
    }
    edits
}

fn config(dir: &Path, input: &BundleInput<'_>, mut user: User) -> Config {
    let spec = input.spec;
    let edits = devices(input);
    user.additional_gids.extend(&edits.additional_gids);
    let command = if spec.command.trim().is_empty() {
        let c = &input.rootfs.config;
        shell_words(&[c.entrypoint.clone(), c.cmd.clone()].concat())
    } else {
        spec.command.clone()
    };
    let caps: Vec<String> = if input.request.privileged {
        spec::ALL_CAPABILITIES
    } else {
        spec::DEFAULT_CAPABILITIES
    }
    .iter()
    .map(|c| c.to_string())
    .collect();
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let mut mounts = vec![
        Mount::new("/proc", "proc", "proc", &["nosuid", "noexec", "nodev"]),
        Mount::new(
            "/dev",
            "tmpfs",
            "tmpfs",
            &["nosuid", "strictatime", "mode=755", "size=65536k"],
        ),
        Mount::new(
            "/dev/pts",
            "devpts",
            "devpts",
            &[
                "nosuid",
                "noexec",
                "newinstance",
                "ptmxmode=0666",
                "mode=0620",
            ],
        ),
        Mount::new(
            "/dev/shm",
            "tmpfs",
            "shm",
            &["nosuid", "noexec", "nodev", "mode=1777"],
        ),
        Mount::new(
            "/dev/mqueue",
            "mqueue",
            "mqueue",
            &["nosuid", "noexec", "nodev"],
        ),
        Mount::new(
            "/sys",
            "sysfs",
            "sysfs",
            &["nosuid", "noexec", "nodev", "ro"],
        ),
    ];
    for d in std::iter::once(&spec.work_dir)
        .chain(&spec.app_local_dirs)
        .chain(&spec.log_dirs)
    {
        mounts.push(Mount::bind(&s(d), &s(d), false));
    }
    for f in ["/etc/resolv.conf", "/etc/hosts"] {
        if Path::new(f).is_file() {
            mounts.push(Mount::bind(f, f, true));
        }
    }
    mounts.push(Mount::bind(&s(&dir.join("passwd")), "/etc/passwd", true));
    mounts.push(Mount::bind(&s(&dir.join("group")), "/etc/group", true));
    for m in &input.request.mounts {
        mounts.push(Mount::bind(
            &s(&m.source),
            &s(&m.destination),
            m.mode == MountMode::ReadOnly,
        ));
    }
    mounts.extend(edits.mounts.iter().cloned());
    let mut rules = vec![DeviceRule {
        allow: false,
        kind: None,
        major: None,
        minor: None,
        access: "rwm",
    }];
    let allow = |kind: &str, major: i64, minor: Option<i64>| DeviceRule {
        allow: true,
        kind: Some(kind.into()),
        major: Some(major),
        minor,
        access: "rwm",
    };
    for (maj, min) in [(1, 3), (1, 5), (1, 7), (1, 8), (1, 9), (5, 0), (5, 2)] {
        rules.push(allow("c", maj, Some(min)));
    }
    rules.push(allow("c", 136, None));
    for d in &edits.devices {
        rules.push(allow(&d.kind, d.major, Some(d.minor)));
    }
    Config {
        oci_version: "1.0.2",
        process: Process {
            terminal: false,
            user,
            args: ["/bin/sh", "-c", OCI_WRAPPER, "spindle-container", &command]
                .iter()
                .map(|a| a.to_string())
                .collect(),
            env: environment(input, &edits.env),
            cwd: s(&spec.work_dir),
            capabilities: Capabilities {
                bounding: caps.clone(),
                effective: caps.clone(),
                permitted: caps,
            },
            no_new_privileges: !input.request.privileged,
        },
        root: Root {
            path: "rootfs".into(),
            readonly: false,
        },
        hostname: input.hostname.clone(),
        mounts,
        linux: Linux {
            namespaces: ["pid", "ipc", "uts", "mount"]
                .into_iter()
                .map(|kind| Namespace { kind })
                .collect(),
            devices: edits.devices,
            resources: Resources { devices: rules },
            masked_paths: spec::MASKED_PATHS.iter().map(|p| p.to_string()).collect(),
            readonly_paths: spec::READONLY_PATHS.iter().map(|p| p.to_string()).collect(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn account_files_keep_the_image_entries_and_add_the_user() {
        let d = tempfile::tempdir().unwrap();
        let (low, high) = (d.path().join("low"), d.path().join("high"));
        fs::create_dir_all(low.join("etc")).unwrap();
        fs::create_dir_all(high.join("etc")).unwrap();
        fs::write(low.join("etc/passwd"), "root:x:0:0::/root:/bin/sh\n").unwrap();
        let layers = vec![low.clone(), high.clone()];
        let text = account_file(&layers, "passwd", "alice", 1234, |n| {
            format!("{n}:x:1234:1234::/w:/bin/sh")
        });
        assert_eq!(
            text,
            "root:x:0:0::/root:/bin/sh\nalice:x:1234:1234::/w:/bin/sh\n"
        );
        let text = account_file(&layers, "passwd", "root", 0, |n| format!("{n}:dup"));
        assert_eq!(text, "root:x:0:0::/root:/bin/sh\n", "uid 0 is in the image");
        // A link in the top layer is not followed: the search ends there.
        std::os::unix::fs::symlink("/etc/shadow", high.join("etc/passwd")).unwrap();
        let text = account_file(&layers, "passwd", "alice", 1234, |n| format!("{n}:x"));
        assert_eq!(text, "alice:x\n");
    }

    #[test]
    fn shell_words_are_quoted() {
        assert_eq!(
            shell_words(&["echo".into(), "it's".into()]),
            r#"'echo' 'it'\''s'"#
        );
    }
}
