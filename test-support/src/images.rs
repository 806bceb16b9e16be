//! Container images for tests, offline: an OCI layout the test builds (busybox-static and an
//! `/etc/os-release` of its own, packed with `umoci`), and a `docker-registry` of the test's
//! own on 127.0.0.1 with an ephemeral port, pushed to with `skopeo`. Debian's packages;
//! `.ci/run` installs them.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The tools these helpers run.
pub const TOOLS: &[&str] = &[
    "/usr/bin/docker-registry",
    "/usr/bin/umoci",
    "/usr/bin/skopeo",
    "/bin/busybox",
];

/// Whether the tools are here; else skips with the reason (a failure under CI).
pub fn tools_present(test: &str) -> bool {
    let missing: Vec<_> = TOOLS.iter().filter(|t| !Path::new(t).exists()).collect();
    if missing.is_empty() {
        return true;
    }
    crate::require::skip(
        test,
        format_args!("missing {missing:?} (.ci/run installs them)"),
    );
    false
}

/// Runs `cmd`, panicking with its stderr when it fails.
pub fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A port free on 127.0.0.1 now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `umoci unpack` of `image` (`layout:tag`) into the bundle `bundle` (rootless when not root).
fn unpack(image: &str, bundle: &Path) {
    let mut cmd = Command::new("umoci");
    cmd.arg("unpack");
    if !nix::unistd::geteuid().is_root() {
        cmd.arg("--rootless");
    }
    run(cmd.args(["--image", image]).arg(bundle));
}

/// An OCI layout at `<dir>/layout` with the image tagged `1`: busybox and an os-release.
pub fn build_image(dir: &Path) -> PathBuf {
    let layout = dir.join("layout");
    let bundle = dir.join("bundle");
    let image = format!("{}:1", layout.display());
    run(Command::new("umoci")
        .arg("init")
        .arg("--layout")
        .arg(&layout));
    run(Command::new("umoci").args(["new", "--image", &image]));
    unpack(&image, &bundle);
    let rootfs = bundle.join("rootfs");
    std::fs::create_dir_all(rootfs.join("bin")).unwrap();
    std::fs::create_dir_all(rootfs.join("etc")).unwrap();
    std::fs::copy("/bin/busybox", rootfs.join("bin/busybox")).unwrap();
    std::os::unix::fs::symlink("busybox", rootfs.join("bin/sh")).unwrap();
    std::fs::write(
        rootfs.join("etc/os-release"),
        "ID=spindle-test\nNAME=\"Spindle image-store test\"\n",
    )
    .unwrap();
    run(Command::new("umoci")
        .args(["repack", "--image", &image])
        .arg(&bundle));
    run(Command::new("umoci").args([
        "config",
        "--image",
        &image,
        "--config.env",
        "PATH=/bin",
        "--config.cmd",
        "/bin/sh",
    ]));
    layout
}

/// Adds `layers` layers on top of the layout's image tagged `1`: `fill(i, rootfs)` writes the
/// i-th layer's files into the image's unpacked root file system and `umoci repack` records
/// what changed as a new layer. The unpacked copy (under `dir`) and the blobs no longer
/// referenced are removed at the end.
pub fn add_layers(dir: &Path, layout: &Path, layers: usize, mut fill: impl FnMut(usize, &Path)) {
    let bundle = dir.join("add-layers-bundle");
    let image = format!("{}:1", layout.display());
    unpack(&image, &bundle);
    for i in 0..layers {
        fill(i, &bundle.join("rootfs"));
        run(Command::new("umoci")
            .args(["repack", "--refresh-bundle", "--image", &image])
            .arg(&bundle));
    }
    std::fs::remove_dir_all(&bundle).unwrap();
    run(Command::new("umoci").arg("gc").arg("--layout").arg(layout));
}

/// `skopeo` with a policy (in `dir`) that accepts any image: the registry is the test's own.
pub fn skopeo(dir: &Path) -> Command {
    let policy = dir.join("policy.json");
    std::fs::write(
        &policy,
        r#"{"default":[{"type":"insecureAcceptAnything"}]}"#,
    )
    .unwrap();
    let mut cmd = Command::new("skopeo");
    cmd.arg("--policy").arg(policy);
    cmd
}

/// A `docker-registry` of the test's own, killed by pid on drop.
pub struct Registry {
    child: Child,
    pub port: u16,
    pub storage: PathBuf,
}

impl Registry {
    pub fn start(dir: &Path) -> Registry {
        let port = free_port();
        let storage = dir.join("storage");
        let config = dir.join("registry.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
                storage.display()
            ),
        )
        .unwrap();
        let child = Command::new("/usr/bin/docker-registry")
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let reg = Registry {
            child,
            port,
            storage,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "docker-registry did not come up on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        reg
    }

    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Pushes the layout's image tagged `1` as `repo` (`name:tag`).
    pub fn push(&self, layout: &Path, dir: &Path, repo: &str) {
        run(skopeo(dir)
            .args(["copy", "--dest-tls-verify=false"])
            .arg(format!("oci:{}:1", layout.display()))
            .arg(format!("docker://{}/{repo}", self.host())));
    }

    /// Where the registry keeps a blob (to corrupt it in a test).
    pub fn blob_data(&self, hex: &str) -> PathBuf {
        self.storage
            .join("docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
