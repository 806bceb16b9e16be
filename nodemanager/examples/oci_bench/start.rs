//! The start of a container from a cached image, launch to reaped, `/bin/true`: (A) a process
//! container, (B) an image container through the OCI executor and crun, (C) `podman run --rm`
//! of the same image with crun. Interleaved, the order rotating every round, so that the
//! machine's noise falls on all three alike.
//!
//! None of the three has cgroups: A and B run under a `ProcessExecutor` without enforcement
//! (`cgroup_bench` measures what cgroups add), C under `--cgroups=disabled`. All three share
//! the host's network (`--network host` for C).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use spindle_common::ids::ContainerId;
use spindle_nodemanager::image::node::NodeImages;
use spindle_nodemanager::image::{ImageStore, ImageStoreConfig};
use spindle_nodemanager::isolation::IsolationSpec;
use spindle_nodemanager::launcher::{ContainerExecutor, LaunchSpec, ProcessExecutor};
use spindle_nodemanager::oci::{find_runtime_binary, OciExecutor, RuntimeKind, RuntimePolicy};
use spindle_test_support::images::{add_layers, build_image};

use crate::{ms, Args, Summary};

/// Rounds run first and not counted (the first image start also fills the cache).
const WARMUP: usize = 3;
/// The longest one start may take.
const START_LIMIT: Duration = Duration::from_secs(60);

fn cid(seq: usize) -> ContainerId {
    format!("container_1700000000000_0028_01_{seq:06}")
        .parse()
        .expect("a well-formed container id")
}

/// `/bin/true` as root, with an image (B) or without (A).
fn spec(dir: &Path, seq: usize, image: Option<&str>) -> LaunchSpec {
    let id = cid(seq);
    let app = dir.join("app");
    let mut env = BTreeMap::from([("PATH".to_string(), "/usr/bin:/bin".to_string())]);
    if let Some(image) = image {
        env.insert("YARN_CONTAINER_RUNTIME_TYPE".into(), "runc".into());
        env.insert("YARN_CONTAINER_RUNTIME_RUNC_IMAGE".into(), image.into());
    }
    LaunchSpec {
        container_id: id,
        user: "root".into(),
        command: "/bin/true".into(),
        env,
        work_dir: app.join(id.to_string()),
        app_local_dirs: vec![app],
        log_dirs: vec![dir.join("logs").join(id.to_string())],
        local_resources: BTreeMap::new(),
        isolation: IsolationSpec::default(),
        run_as: None,
        fetch_token: None,
    }
}

/// One launch as the NM does it (prepare on a blocking thread, start, wait for the exit);
/// the time to prepared and to reaped.
async fn launch(ex: &Arc<OciExecutor>, spec: LaunchSpec) -> Result<(Duration, Duration), String> {
    let t = Instant::now();
    let (ex2, s2) = (Arc::clone(ex), spec.clone());
    tokio::task::spawn_blocking(move || ex2.prepare(&s2))
        .await
        .map_err(|e| format!("prepare: {e}"))?
        .map_err(|e| format!("prepare: {e}"))?;
    let prepared = t.elapsed();
    let p = ex.start(&spec, false).map_err(|e| format!("start: {e}"))?;
    let exit = tokio::time::timeout(START_LIMIT, p.exit)
        .await
        .map_err(|_| format!("{} did not end in {START_LIMIT:?}", spec.container_id))?;
    let reaped = t.elapsed();
    if exit.exit_status() != 0 {
        let stderr = spec
            .stderr_path()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default();
        return Err(format!("{}: {exit:?}: {stderr}", spec.container_id));
    }
    let _ = std::fs::remove_dir_all(&spec.work_dir);
    for d in &spec.log_dirs {
        let _ = std::fs::remove_dir_all(d);
    }
    Ok((prepared, reaped))
}

/// Rootful podman with its storage under the bench's directory, the image imported once.
struct Podman {
    global: Vec<OsString>,
    image_id: String,
}

impl Podman {
    fn command(&self) -> Command {
        let mut c = Command::new("podman");
        c.args(&self.global);
        c
    }

    fn new(dir: &Path, layout: &Path) -> Result<Podman, String> {
        if which("podman").is_none() {
            return Err("podman is not installed (Debian: apt-get install podman)".into());
        }
        let arg = |s: &str| OsString::from(s);
        let path = |p: PathBuf| p.into_os_string();
        let global = vec![
            arg("--root"),
            path(dir.join("podman/root")),
            arg("--runroot"),
            path(dir.join("podman/run")),
            arg("--tmpdir"),
            path(dir.join("podman/tmp")),
            arg("--network-config-dir"),
            path(dir.join("podman/networks")),
            arg("--storage-driver=overlay"),
            arg("--cgroup-manager=cgroupfs"),
            arg("--events-backend=file"),
            arg("--runtime=crun"),
            // As the OCI executor runs crun: it leaves cgroups alone.
            arg("--runtime-flag=cgroup-manager=disabled"),
        ];
        let mut p = Podman {
            global,
            image_id: String::new(),
        };
        let out = p
            .command()
            .args(["pull", "-q"])
            .arg(format!("oci:{}:1", layout.display()))
            .output()
            .map_err(|e| format!("podman pull: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "podman pull: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        p.image_id = String::from_utf8_lossy(&out.stdout).trim().to_string();
        Ok(p)
    }

    /// `podman run --rm` of `/bin/true`, in a mount namespace without the cgroup2 mount of a
    /// hybrid node (crun refuses such a node even with its cgroup manager disabled; the OCI
    /// executor's leader detaches it the same way). podman's default rlimits (1048576 open
    /// files and processes) need CAP_SYS_RESOURCE, so the run asks for ordinary ones.
    fn run(&self) -> Result<Duration, String> {
        let mut c = Command::new("unshare");
        c.args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg(r#"umount -l /sys/fs/cgroup/unified 2>/dev/null; exec "$0" "$@""#)
            .arg("podman")
            .args(&self.global)
            .args(["run", "--rm", "--network=host", "--cgroups=disabled"])
            .args(["--ulimit=nofile=1024:1024", "--ulimit=nproc=4096:4096"])
            .args([&self.image_id, "/bin/true"]);
        let t = Instant::now();
        let out = c.output().map_err(|e| format!("podman run: {e}"))?;
        let d = t.elapsed();
        if !out.status.success() {
            return Err(format!(
                "podman run: {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(d)
    }

    /// Removes the containers and the image (and so the storage's mounts).
    fn remove(&self) {
        for args in [["rm", "-af"], ["rmi", "-af"]] {
            let _ = self.command().args(args).output();
        }
    }
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

/// Launch times of the three, after the warm-up.
#[derive(Default)]
struct Times {
    process: Vec<Duration>,
    image: Vec<Duration>,
    image_prepare: Vec<Duration>,
    podman: Vec<Duration>,
}

fn executor(dir: &Path, rt: &tokio::runtime::Runtime) -> Result<Arc<OciExecutor>, String> {
    let config = ImageStoreConfig {
        cache_dir: dir.join("cache"),
        max_bytes: 1 << 30,
        insecure_registries: Vec::new(),
        auth_file: None,
        local_image_dirs: vec![dir.to_path_buf()],
    };
    let store = ImageStore::open(config).map_err(|e| format!("image store: {e}"))?;
    let images = NodeImages::new(store, &[dir.to_path_buf()], rt.handle().clone());
    let policy = RuntimePolicy {
        allowed: BTreeSet::from([RuntimeKind::Default, RuntimeKind::Runc]),
        binary: find_runtime_binary(Some("crun")),
        ..Default::default()
    };
    Ok(Arc::new(OciExecutor::new(
        ProcessExecutor::new(),
        policy,
        Arc::new(images),
        &dir.join("local"),
    )))
}

/// The rounds, each A, B and C in a rotating order; podman's first failure ends its column.
fn rounds(
    dir: &Path,
    starts: usize,
    ex: &Arc<OciExecutor>,
    podman: &mut Result<Podman, String>,
    image: &str,
    rt: &tokio::runtime::Runtime,
) -> Result<Times, String> {
    let mut t = Times::default();
    for round in 0..starts + WARMUP {
        let counted = round >= WARMUP;
        for k in 0..3 {
            match (round + k) % 3 {
                0 => {
                    let (_, d) = rt.block_on(launch(ex, spec(dir, 2 * round + 1, None)))?;
                    if counted {
                        t.process.push(d);
                    }
                }
                1 => {
                    let s = spec(dir, 2 * round + 2, Some(image));
                    let (p, d) = rt.block_on(launch(ex, s))?;
                    if counted {
                        t.image.push(d);
                        t.image_prepare.push(p);
                    }
                }
                _ => {
                    let Ok(pm) = podman.as_ref() else { continue };
                    match pm.run() {
                        Ok(d) if counted => t.podman.push(d),
                        Ok(_) => {}
                        Err(e) => {
                            pm.remove();
                            *podman = Err(e);
                        }
                    }
                }
            }
        }
    }
    Ok(t)
}

pub(crate) fn run(dir: &Path, args: &Args) -> Result<String, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let layout = build_image(dir);
    add_layers(dir, &layout, 1, |_, rootfs| {
        std::os::unix::fs::symlink("busybox", rootfs.join("bin/true")).expect("link /bin/true")
    });
    let image = format!("oci:{}:1", layout.display());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    let ex = executor(dir, &rt)?;
    // The one host path podman writes outside its storage here: rootful netavark's run
    // directory, removed again when podman made it (only while it is empty).
    let netavark_run = Path::new("/run/containers/networks");
    let made_run_dir = !netavark_run.parent().is_some_and(Path::exists);
    let mut podman = if args.podman {
        Podman::new(dir, &layout)
    } else {
        Err("not run (--no-podman)".into())
    };
    let times = rounds(dir, args.starts, &ex, &mut podman, &image, &rt);
    if let Ok(p) = &podman {
        p.remove();
    }
    if made_run_dir {
        let _ = std::fs::remove_dir(netavark_run);
        let _ = netavark_run.parent().map(std::fs::remove_dir);
    }
    ex.shutdown();
    let t = times?;
    Ok(table(t, podman.err()))
}

fn table(t: Times, podman_missing: Option<String>) -> String {
    let row = |name: &str, s: &Summary| {
        format!(
            "| {name} | {} | {} | {} | {} |\n",
            s.n,
            ms(s.p50),
            ms(s.p90),
            ms(s.max)
        )
    };
    let a = Summary::of(t.process);
    let b = Summary::of(t.image);
    let bp = Summary::of(t.image_prepare);
    let mut out = String::from("start from a cached image, launch to reaped, /bin/true (ms):\n\n| container | n | p50 | p90 | max |\n|---|---|---|---|---|\n");
    out += &row("A process (ProcessExecutor)", &a);
    out += &row("B image (OciExecutor, crun)", &b);
    out += &row("  of which prepare (image pin + bundle)", &bp);
    let ratio = |x: Duration, y: Duration| x.as_secs_f64() / y.as_secs_f64();
    let mut ratios = format!(
        "\nB/A: p50 {:.2}x, p90 {:.2}x",
        ratio(b.p50, a.p50),
        ratio(b.p90, a.p90)
    );
    match podman_missing {
        None if !t.podman.is_empty() => {
            let c = Summary::of(t.podman);
            out += &row("C podman run --rm (crun)", &c);
            ratios += &format!(
                "; C/B: p50 {:.2}x, p90 {:.2}x",
                ratio(c.p50, b.p50),
                ratio(c.p90, b.p90)
            );
        }
        None => out += "| C podman run --rm (crun) | 0 | - | - | - |\n",
        Some(why) => out += &format!("| C podman run --rm: {why} | 0 | - | - | - |\n"),
    }
    out + &ratios + "\n"
}
