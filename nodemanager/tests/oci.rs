//! The OCI executor with the real `crun`, as root: a container runs in a busybox image the
//! test builds (one layer, its own `/etc/os-release`), in the container's Spindle cgroups.
//! Without root, crun or busybox each test prints why and returns (and fails under
//! `CI=true`); the refusals need none of them.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use spindle_common::ids::ContainerId;
use spindle_nodemanager::cgroups::{Cgroups, Layout};
use spindle_nodemanager::containers::ProcessExit;
use spindle_nodemanager::isolation::{DeviceNumber, IsolationSpec};
use spindle_nodemanager::launcher::{
    ContainerExecutor, Enforcement, LaunchError, LaunchSpec, ProcessExecutor, StartedProcess,
    StopSignal, EXIT_CODE_FILE,
};
use spindle_nodemanager::oci::{
    find_runtime_binary, ImageConfig, ImageError, ImageSource, OciExecutor, RootfsLayers,
    RuntimeKind, RuntimePolicy,
};
use spindle_nodemanager::runas::Credentials;
use spindle_test_support::require;
use support::cgroups::{cgroups_or_skip, Hierarchy};

const IMAGE: &str = "localhost/spindle-test/busybox:1";
const OS_RELEASE: &str = "ID=spindle-oci-test\n";
const END: Duration = Duration::from_secs(60);

/// An image store holding one image: the test's layer directory.
struct OneImage {
    layer: PathBuf,
}

/// The one image's digest, and how often a re-adopting executor pinned it again.
const DIGEST: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000001";
static REPINS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl ImageSource for OneImage {
    fn rootfs(
        &self,
        image: &str,
        _: &ContainerId,
        _: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<RootfsLayers, ImageError> {
        if image != IMAGE {
            return Err(format!("no image '{image}'").into());
        }
        Ok(RootfsLayers {
            layers: vec![self.layer.clone()],
            config: ImageConfig {
                env: vec!["IMAGE_VAR=from-image".into()],
                ..Default::default()
            },
            pin: None,
            digest: Some(DIGEST.into()),
        })
    }

    fn repin(&self, digest: &str) -> Option<spindle_nodemanager::oci::ImagePin> {
        (digest == DIGEST).then(|| {
            REPINS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::new(()) as spindle_nodemanager::oci::ImagePin
        })
    }
}

/// A busybox layer: `/bin/busybox`, its applets as links, and an `/etc/os-release`.
fn busybox_layer(dir: &Path) -> PathBuf {
    let layer = dir.join("layer");
    std::fs::create_dir_all(layer.join("bin")).unwrap();
    std::fs::create_dir_all(layer.join("etc")).unwrap();
    std::fs::create_dir_all(layer.join("tmp")).unwrap();
    std::fs::copy("/bin/busybox", layer.join("bin/busybox")).unwrap();
    for applet in [
        "sh", "cat", "ls", "id", "sleep", "echo", "touch", "seq", "dd", "head", "true",
    ] {
        std::os::unix::fs::symlink("busybox", layer.join("bin").join(applet)).unwrap();
    }
    std::fs::write(layer.join("etc/os-release"), OS_RELEASE).unwrap();
    layer
}

/// Everything a real-crun test needs; None (after saying why) where the machine lacks it.
struct Node {
    _dir: tempfile::TempDir,
    base: PathBuf,
    layer: PathBuf,
    hierarchy: Hierarchy,
    layout: Layout,
}

impl Node {
    fn new(test: &str) -> Option<Self> {
        require::root(test, "crun, mounts and cgroups need root")?;
        if let Err(e) = find_runtime_binary(Some("crun")) {
            require::skip(test, format_args!("no crun: {e}"));
            return None;
        }
        if !Path::new("/bin/busybox").is_file() {
            require::skip(test, "no /bin/busybox (busybox-static)");
            return None;
        }
        let layout = cgroups_or_skip(test)?;
        let hierarchy = Hierarchy::new(&layout);
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_path_buf();
        let layer = busybox_layer(&base);
        Some(Self {
            _dir: dir,
            base,
            layer,
            hierarchy,
            layout,
        })
    }

    fn policy(&self) -> RuntimePolicy {
        RuntimePolicy {
            allowed: BTreeSet::from([RuntimeKind::Default, RuntimeKind::Runc, RuntimeKind::Docker]),
            binary: find_runtime_binary(Some("crun")),
            cdi_dirs: vec![self.base.join("cdi")],
            ..Default::default()
        }
    }

    fn executor(&self, policy: RuntimePolicy) -> OciExecutor {
        let cg = Arc::new(
            Cgroups::new(&self.layout, &self.hierarchy.config(), "nm-test")
                .expect("cgroups as root"),
        );
        let process = ProcessExecutor::with_enforcement(Enforcement::Cgroups {
            cgroups: cg,
            interval: Duration::from_millis(100),
        });
        OciExecutor::new(
            process,
            policy,
            Arc::new(OneImage {
                layer: self.layer.clone(),
            }),
            &self.base.join("local"),
        )
    }
}

fn nobody() -> Credentials {
    Credentials::lookup("nobody").expect("nobody exists")
}

/// An OCI container's launch spec, run as `nobody`, with dirs under `base`.
fn spec(base: &Path, n: u64, command: &str, env: &[(&str, &str)]) -> LaunchSpec {
    let id: ContainerId = format!("container_1700000000000_0099_01_{n:06}")
        .parse()
        .unwrap();
    let app = base.join("local/usercache/nobody/appcache/application_1700000000000_0099");
    let mut environment: BTreeMap<String, String> = [
        ("YARN_CONTAINER_RUNTIME_TYPE", "runc"),
        ("YARN_CONTAINER_RUNTIME_RUNC_IMAGE", IMAGE),
    ]
    .iter()
    .chain(env)
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    environment.insert("PATH".into(), "/host/bin:/usr/bin".into());
    LaunchSpec {
        container_id: id,
        user: "nobody".into(),
        command: command.into(),
        env: environment,
        work_dir: app.join(id.to_string()),
        app_local_dirs: vec![app],
        log_dirs: vec![base.join("logs").join(id.to_string())],
        local_resources: BTreeMap::new(),
        isolation: IsolationSpec {
            vcores: 1,
            memory_mb: 256,
            pids_max: 64,
            ..Default::default()
        },
        run_as: Some(nobody()),
        fetch_token: None,
    }
}

fn start(ex: &OciExecutor, s: &LaunchSpec) -> StartedProcess {
    ex.prepare(s).expect("prepare");
    ex.start(s, false).expect("start")
}

async fn wait_exit(p: StartedProcess) -> ProcessExit {
    tokio::time::timeout(END, p.exit)
        .await
        .expect("container did not end in time")
}

fn stdout(s: &LaunchSpec) -> String {
    std::fs::read_to_string(s.stdout_path().unwrap()).unwrap_or_default()
}
fn stderr(s: &LaunchSpec) -> String {
    std::fs::read_to_string(s.stderr_path().unwrap()).unwrap_or_default()
}

/// Waits (bounded) until the container's command printed `up`.
async fn wait_for_start(s: &LaunchSpec) {
    for _ in 0..300 {
        if stdout(s).contains("up") {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("never ran: {}", stderr(s));
}

/// Nothing of the test's node is mounted on the host, its bundles and runtime state are gone.
fn assert_nothing_left(base: &Path, ex: &OciExecutor, s: &LaunchSpec) {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let needle = base.to_string_lossy();
    assert!(
        !mountinfo.lines().any(|l| l.contains(needle.as_ref())),
        "mounts left under {needle}:\n{mountinfo}"
    );
    assert_eq!(ex.runtime_id_of(&s.container_id), None, "bundle left");
    let state = base.join("local/nmPrivate/oci/state");
    let left: Vec<_> = std::fs::read_dir(&state)
        .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "runtime state left: {left:?}");
}

#[tokio::test]
async fn a_container_runs_in_its_image_as_its_user_and_leaves_nothing() {
    let test = "a_container_runs_in_its_image_as_its_user_and_leaves_nothing";
    let Some(node) = Node::new(test) else {
        return;
    };
    let ex = node.executor(node.policy());
    let s = spec(
        &node.base,
        1,
        r#"cat /etc/os-release; id -u; id -g; echo "$IMAGE_VAR $PATH"; pwd; grep -c . /etc/passwd >/dev/null; head -c0 /etc/passwd && id -un"#,
        &[],
    );
    let exit = wait_exit(start(&ex, &s)).await;
    let out = stdout(&s);
    assert_eq!(
        exit,
        ProcessExit::Code(0),
        "stdout: {out}\nstderr: {}",
        stderr(&s)
    );
    let who = nobody();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        OS_RELEASE.trim(),
        "the image's os-release, not the host's"
    );
    assert_eq!(lines[1], who.uid.to_string());
    assert_eq!(lines[2], who.gid.to_string());
    assert_eq!(
        lines[3], "from-image /host/bin:/usr/bin",
        "YARN's PATH; the image's other variables"
    );
    assert_eq!(
        lines[4],
        s.work_dir.to_string_lossy(),
        "cwd is the work dir at its own path"
    );
    assert_eq!(lines.last(), Some(&"nobody"), "a passwd entry was provided");
    assert!(
        stderr(&s).contains("the image has no bash"),
        "says it fell back to sh: {}",
        stderr(&s)
    );
    assert_eq!(
        std::fs::read_to_string(s.work_dir.join(EXIT_CODE_FILE))
            .unwrap()
            .trim(),
        "0"
    );
    assert_nothing_left(&node.base, &ex, &s);
}

#[tokio::test]
async fn memory_and_pids_limits_hold_inside() {
    let test = "memory_and_pids_limits_hold_inside";
    let Some(node) = Node::new(test) else {
        return;
    };
    let ex = node.executor(node.policy());
    let mut s = spec(
        &node.base,
        2,
        r#"a=xxxxxxxxxxxxxxxx; while :; do a="$a$a"; done"#,
        &[],
    );
    s.isolation.memory_mb = 48;
    let exit = wait_exit(start(&ex, &s)).await;
    assert!(
        matches!(exit, ProcessExit::MemoryExceeded { limit_mb: 48, .. }),
        "{exit:?}; stderr: {}",
        stderr(&s)
    );
    assert_eq!(exit.exit_status(), -104);
    assert_nothing_left(&node.base, &ex, &s);

    let mut s = spec(
        &node.base,
        3,
        r#"n=0; for i in $(seq 1 80); do sleep 20 & done; echo done"#,
        &[],
    );
    s.isolation.pids_max = 16;
    let p = start(&ex, &s);
    let mut forked_too_many = false;
    for _ in 0..200 {
        if stderr(&s).contains("fork") {
            forked_too_many = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(forked_too_many, "no fork was refused: {}", stderr(&s));
    ex.signal(&p.handle, StopSignal::Kill).unwrap();
    wait_exit(p).await;
    assert_nothing_left(&node.base, &ex, &s);
}

#[tokio::test]
async fn refused_requests_fail_with_their_reason() {
    let dir = tempfile::tempdir().unwrap();
    let allowed = dir.path().join("allowed");
    std::fs::create_dir(&allowed).unwrap();
    let policy = RuntimePolicy {
        allowed: BTreeSet::from([RuntimeKind::Default, RuntimeKind::Runc]),
        binary: Ok(PathBuf::from("/usr/bin/crun")),
        allowed_ro: vec![allowed.canonicalize().unwrap()],
        ..Default::default()
    };
    let ex = OciExecutor::new(
        ProcessExecutor::new(),
        policy,
        Arc::new(OneImage {
            layer: dir.path().join("none"),
        }),
        &dir.path().join("local"),
    );
    let outside = dir.path().to_string_lossy().into_owned();
    let mount = format!("{outside}:/data:ro");
    let inside = format!("{}:/data:rw", allowed.display());
    for (env, why) in [
        (
            vec![("YARN_CONTAINER_RUNTIME_RUNC_MOUNTS", mount.as_str())],
            "allowed-ro-mounts",
        ),
        (
            vec![("YARN_CONTAINER_RUNTIME_RUNC_MOUNTS", inside.as_str())],
            "allowed-rw-mounts",
        ),
        (
            vec![(
                "YARN_CONTAINER_RUNTIME_RUNC_RUN_PRIVILEGED_CONTAINER",
                "true",
            )],
            "privileged containers are not allowed",
        ),
        (
            vec![
                ("YARN_CONTAINER_RUNTIME_TYPE", "docker"),
                ("YARN_CONTAINER_RUNTIME_DOCKER_IMAGE", IMAGE),
            ],
            "'docker' is not allowed",
        ),
    ] {
        let mut s = spec(dir.path(), 4, "true", &env);
        s.run_as = None;
        let e: LaunchError = ex.prepare(&s).unwrap_err();
        assert!(e.to_string().contains(why), "{env:?}: {e}");
        assert_eq!(e.exit_status(), Some(7), "{e}");
        assert!(!e.is_localization());
        assert!(
            !s.work_dir.exists(),
            "nothing prepared for a refused request"
        );
    }
}

#[tokio::test]
async fn an_allowed_mount_is_visible_read_only() {
    let test = "an_allowed_mount_is_visible_read_only";
    let Some(node) = Node::new(test) else {
        return;
    };
    let data = node.base.join("datasets");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("hello"), "hi from the host\n").unwrap();
    let mut policy = node.policy();
    policy.allowed_ro = vec![data.canonicalize().unwrap()];
    let ex = node.executor(policy);
    let mount = format!("{}:/data", data.display());
    let s = spec(
        &node.base,
        5,
        "cat /data/hello; if touch /data/x 2>/dev/null; then echo writable; else echo read-only; fi",
        &[("YARN_CONTAINER_RUNTIME_RUNC_MOUNTS", &mount)],
    );
    let exit = wait_exit(start(&ex, &s)).await;
    assert_eq!(exit, ProcessExit::Code(0), "stderr: {}", stderr(&s));
    assert_eq!(stdout(&s), "hi from the host\nread-only\n");
    assert!(!data.join("x").exists());
    assert_nothing_left(&node.base, &ex, &s);
}

#[tokio::test]
async fn a_granted_gpu_is_the_only_one_inside() {
    let test = "a_granted_gpu_is_the_only_one_inside";
    let Some(node) = Node::new(test) else {
        return;
    };
    use nix::sys::stat::{makedev, mknod, Mode, SFlag};
    let dev = node.base.join("dev");
    std::fs::create_dir(&dev).unwrap();
    let mut devices = Vec::new();
    for minor in 0..4u32 {
        let p = dev.join(format!("nvidia{minor}"));
        if let Err(e) = mknod(
            &p,
            SFlag::S_IFCHR,
            Mode::from_bits_truncate(0o666),
            makedev(195, minor.into()),
        ) {
            require::skip(test, format_args!("cannot mknod {}: {e}", p.display()));
            return;
        }
        devices.push(serde_json::json!({
            "name": format!("gpu{minor}"),
            "containerEdits": {"deviceNodes": [{"path": format!("/dev/nvidia{minor}"), "hostPath": p}]}
        }));
    }
    std::fs::create_dir(node.base.join("cdi")).unwrap();
    let cdi = serde_json::json!({
        "cdiVersion": "0.6.0", "kind": "nvidia.com/gpu", "devices": devices,
        "containerEdits": {"env": ["FROM_CDI=1"], "hooks": [{"hookName": "createContainer", "path": "/bin/false"}]}
    });
    std::fs::write(node.base.join("cdi/nvidia.json"), cdi.to_string()).unwrap();
    let ex = node.executor(node.policy());
    let mut s = spec(
        &node.base,
        6,
        r#"ls /dev | grep nvidia; echo "$CUDA_VISIBLE_DEVICES $NVIDIA_VISIBLE_DEVICES $FROM_CDI""#,
        &[
            ("CUDA_VISIBLE_DEVICES", "1"),
            ("NVIDIA_VISIBLE_DEVICES", "1"),
        ],
    );
    s.isolation.granted_devices = vec![DeviceNumber::char(195, 1)];
    s.isolation.denied_devices = [0, 2, 3]
        .iter()
        .map(|m| DeviceNumber::char(195, *m))
        .collect();
    let exit = wait_exit(start(&ex, &s)).await;
    assert_eq!(exit, ProcessExit::Code(0), "stderr: {}", stderr(&s));
    assert_eq!(stdout(&s), "nvidia1\n1 1 1\n");
    assert_nothing_left(&node.base, &ex, &s);
}

#[tokio::test]
async fn a_stop_reaches_the_command_and_nothing_stays_mounted() {
    let test = "a_stop_reaches_the_command_and_nothing_stays_mounted";
    let Some(node) = Node::new(test) else {
        return;
    };
    let ex = node.executor(node.policy());
    let s = spec(&node.base, 7, "echo up; sleep 300", &[]);
    let p = start(&ex, &s);
    wait_for_start(&s).await;
    ex.signal(&p.handle, StopSignal::Term).unwrap();
    let exit = wait_exit(p).await;
    assert_eq!(exit, ProcessExit::Code(143), "stderr: {}", stderr(&s));
    assert_eq!(
        std::fs::read_to_string(s.work_dir.join(EXIT_CODE_FILE))
            .unwrap()
            .trim(),
        "143"
    );
    assert_nothing_left(&node.base, &ex, &s);
}

#[tokio::test]
async fn a_readopted_container_is_cleaned_up_when_it_ends_and_reclaim_removes_strays() {
    let test = "a_readopted_container_is_cleaned_up_when_it_ends_and_reclaim_removes_strays";
    let Some(node) = Node::new(test) else {
        return;
    };
    let first = node.executor(node.policy());
    let s = spec(&node.base, 8, "echo up; sleep 300", &[]);
    let p = start(&first, &s);
    wait_for_start(&s).await;
    // The first NM dies: nobody waits on its leader any more.
    let handle = p.handle.clone();
    drop(p);
    // A stray bundle of a container no NM re-adopts.
    let stray = first.bundle_dir("container_1700000000000_0099_01_000099.1");
    std::fs::create_dir_all(stray.join("upper")).unwrap();
    let second = node.executor(node.policy());
    second.reclaim(&[s.container_id]);
    assert!(!stray.exists(), "reclaim removes a stray bundle");
    assert!(
        second.runtime_id_of(&s.container_id).is_some(),
        "a live one stays"
    );
    let adoptee = spindle_nodemanager::launcher::Adoptee {
        id: s.container_id,
        work_dir: &s.work_dir,
        memory_mb: 256,
    };
    let spindle_nodemanager::launcher::Reattached::Running(exit) =
        second.reattach(&handle, &adoptee)
    else {
        panic!("the container still runs");
    };
    assert_eq!(
        REPINS.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the re-adopted container's image is pinned again"
    );
    second.signal(&handle, StopSignal::Term).unwrap();
    let exit = tokio::time::timeout(END, exit).await.expect("ended");
    assert_eq!(exit, ProcessExit::Code(143), "its wrapper's recorded code");
    assert_nothing_left(&node.base, &second, &s);
}

#[tokio::test]
async fn a_prepared_container_that_never_starts_leaves_no_bundle() {
    let test = "a_prepared_container_that_never_starts_leaves_no_bundle";
    let Some(node) = Node::new(test) else {
        return;
    };
    let ex = node.executor(node.policy());
    let s = spec(&node.base, 9, "true", &[]);
    ex.prepare(&s).expect("prepare");
    assert!(
        ex.runtime_id_of(&s.container_id).is_some(),
        "a bundle was written"
    );
    ex.discard(&s.container_id);
    assert_nothing_left(&node.base, &ex, &s);
}
