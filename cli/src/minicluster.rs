//! A cluster on this machine for trying things out and for tests: one `resourcemanager` and
//! N `nodemanager` processes (the real binaries, found next to the current executable or
//! on `PATH`) on 127.0.0.1 with ephemeral ports, each with its own directories under a work
//! directory and its output in `<work>/<name>.log`.
//!
//! Every daemon is owned by a guard: dropping the [`MiniCluster`] (also on an error path or
//! a cancelled start) sends SIGTERM to each, waits up to 5 s, then SIGKILLs what is left.
//!
//! With [`MiniClusterOptions::gpus_per_node`], every NM discovers that many fake GPUs: the
//! repository's `scripts/fake-nvidia-smi` (compiled in, so an installed `spindle` has it) is
//! written to `<work>/fake-gpus/nvidia-smi` with its `fake-gpu.conf`, the NMs get the GPU
//! plugin pointed at it, and the RM gets `yarn.io/gpu` in `yarn.resource-types`. It needs
//! `python3` on the machine.
//!
//! Node-tracker calls are authenticated: the minicluster writes a cluster secret to
//! `<work>/cluster-secret` (or reuses a valid one already there) and gives the RM and every
//! NM `spindle.cluster.secret-file` pointing at it ([`MiniCluster::cluster_secret`]); a
//! `-D spindle.cluster.secret-file=...` of the caller wins.
//!
//! [`MiniClusterOptions::defines`] (`-D name=value`) go to the RM and every NM after the
//! minicluster's own, so they win. [`MINICLUSTER_DEFAULTS`] are the RM settings a cluster of a
//! few nodes on one machine needs where YARN's defaults are sized for large clusters; each is
//! applied only when neither the configuration directory nor a `-D` sets the key, and
//! [`MiniCluster::defaults_applied`] says which were.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use spindle_common::cluster_secret::{ClusterSecret, ClusterSecretError};
use spindle_common::config::keys;
use spindle_common::states::NodeState;

use spindle_appmaster_sdk::address::RmAddress;
use spindle_appmaster_sdk::error::ClientError;
use spindle_appmaster_sdk::rm_client::RmClient;

pub const RM_BINARY: &str = "resourcemanager";
pub const NM_BINARY: &str = "nodemanager";
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// `scripts/fake-nvidia-smi`, written out for `--gpus-per-node`.
pub const FAKE_NVIDIA_SMI: &str = include_str!("../../scripts/fake-nvidia-smi");
use spindle_common::resource::GPU;
const STOP_GRACE: Duration = Duration::from_secs(5);
const POLL: Duration = Duration::from_millis(50);

#[derive(Debug, Clone)]
pub struct MiniClusterOptions {
    pub nodes: u32,
    /// Where the RM listens (`127.0.0.1:0`, an ephemeral port, by default).
    pub rm_bind: Option<String>,
    /// Passed to every daemon; when it does not exist an empty one is made in the work dir.
    pub conf_dir: Option<PathBuf>,
    /// A new directory under the system temp dir by default.
    pub work_dir: Option<PathBuf>,
    pub startup_timeout: Duration,
    /// Where the daemon binaries are; default: next to the current executable, then `PATH`.
    pub bin_dir: Option<PathBuf>,
    /// Fake GPUs each NM discovers (0: the GPU plugin is left as the configuration says).
    pub gpus_per_node: u32,
    /// `-D name=value` for the RM and every NM, after the minicluster's own (they win).
    pub defines: Vec<(String, String)>,
}

/// RM settings for a small cluster on one machine, used where the configuration directory
/// and the `-D`s leave the key unset: YARN's 10 % AM share lets a 2-node cluster start
/// one or two applications at a time; half of a queue lets several run together.
pub const MINICLUSTER_DEFAULTS: &[(&str, &str)] = &[(keys::CS_MAXIMUM_AM_RESOURCE_PERCENT, "0.5")];

/// The [`MINICLUSTER_DEFAULTS`] that `conf` (the files and the `-D`s) leaves unset.
pub fn defaults_for(conf: &spindle_common::config::Configuration) -> Vec<(String, String)> {
    MINICLUSTER_DEFAULTS
        .iter()
        .filter(|(k, _)| conf.get(k).ok().flatten().is_none())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

impl MiniClusterOptions {
    /// The configuration directory the daemons will read (`--conf-dir`, `$SPINDLE_CONF_DIR`,
    /// `./conf`), absolute; `None` when it does not exist (the daemons then get an empty one).
    pub fn existing_conf_dir(&self) -> Option<PathBuf> {
        let dir = absolute(&spindle_common::config::Configuration::resolve_conf_dir(
            self.conf_dir.as_deref(),
        ));
        dir.is_dir().then_some(dir)
    }

    /// The configuration as the daemons will see it: the directory (if it exists and loads)
    /// with the `-D`s on top.
    pub fn configuration(&self) -> spindle_common::config::Configuration {
        let mut conf = self
            .existing_conf_dir()
            .and_then(|d| spindle_common::config::Configuration::load_dir(&d).ok())
            .unwrap_or_default();
        for (k, v) in &self.defines {
            conf.set(k, v);
        }
        conf
    }

    /// Whether the NMs would load the GPU plugin without `gpus_per_node` (real GPUs).
    pub fn gpu_plugin_configured(&self) -> bool {
        let conf = self.configuration();
        conf.get_strings(keys::NM_RESOURCE_PLUGINS)
            .unwrap_or_default()
            .iter()
            .any(|p| p == GPU)
    }
}

impl Default for MiniClusterOptions {
    fn default() -> Self {
        Self {
            nodes: 1,
            rm_bind: None,
            conf_dir: None,
            work_dir: None,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            bin_dir: None,
            gpus_per_node: 0,
            defines: Vec::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MiniClusterError {
    #[error("cannot find the '{name}' binary next to {exe_dir} or on PATH (build it with `cargo build --workspace`)")]
    BinaryNotFound { name: String, exe_dir: String },
    #[error("{}: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("cannot start {name} ({}): {error}", binary.display())]
    Spawn {
        name: String,
        binary: PathBuf,
        error: std::io::Error,
    },
    #[error("{name} exited with {status} during startup; see {}{tail}", log.display())]
    DaemonExited {
        name: String,
        status: String,
        log: PathBuf,
        tail: String,
    },
    #[error("{name} exited with {status}; see {}{tail}", log.display())]
    DaemonDied {
        name: String,
        status: String,
        log: PathBuf,
        tail: String,
    },
    #[error("timed out after {}s waiting for {what}; see {}", timeout.as_secs(), logs.iter().map(|l| l.display().to_string()).collect::<Vec<_>>().join(", "))]
    Timeout {
        what: String,
        timeout: Duration,
        logs: Vec<PathBuf>,
    },
    #[error("invalid address '{value}' in {}: {reason}", path.display())]
    BadAddressFile {
        path: PathBuf,
        value: String,
        reason: String,
    },
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    ClusterSecret(#[from] ClusterSecretError),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> MiniClusterError + '_ {
    move |error| MiniClusterError::Io {
        path: path.to_path_buf(),
        error,
    }
}

/// One daemon process.
#[derive(Debug)]
pub struct Daemon {
    pub name: String,
    pub log: PathBuf,
    child: Child,
}

impl Daemon {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}

/// Owns the daemons; stops them when dropped.
#[derive(Debug, Default)]
pub struct ChildGuard {
    daemons: Vec<Daemon>,
}

impl ChildGuard {
    pub fn daemons(&self) -> &[Daemon] {
        &self.daemons
    }

    /// SIGTERM to every live daemon, up to 5 s for them to exit, then SIGKILL; reaps all.
    pub fn stop_all(&mut self) {
        use nix::sys::signal::{kill, Signal};
        use nix::unistd::Pid;
        for d in &mut self.daemons {
            if d.exited().is_none() {
                if let Ok(pid) = i32::try_from(d.child.id()) {
                    tracing::debug!(daemon = %d.name, pid, "SIGTERM");
                    let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
                }
            }
        }
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline && self.daemons.iter_mut().any(|d| d.exited().is_none()) {
            std::thread::sleep(POLL);
        }
        for d in &mut self.daemons {
            if d.exited().is_none() {
                tracing::warn!(daemon = %d.name, "did not stop within 5 s; SIGKILL");
                let _ = d.child.kill();
                let _ = d.child.wait();
            }
        }
        self.daemons.clear();
    }

    /// The first daemon that has exited, if any.
    fn first_exited(&mut self) -> Option<(String, String, PathBuf)> {
        self.daemons.iter_mut().find_map(|d| {
            d.exited()
                .map(|s| (d.name.clone(), s.to_string(), d.log.clone()))
        })
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if !self.daemons.is_empty() {
            self.stop_all();
        }
    }
}

/// A running minicluster.
#[derive(Debug)]
pub struct MiniCluster {
    pub work_dir: PathBuf,
    pub conf_dir: PathBuf,
    pub rm_address: RmAddress,
    pub nm_addresses: Vec<String>,
    /// The [`MINICLUSTER_DEFAULTS`] the RM got, because nothing else set them.
    pub defaults_applied: Vec<(String, String)>,
    /// The cluster secret file the daemons got (`spindle.cluster.secret-file`).
    pub cluster_secret: PathBuf,
    guard: ChildGuard,
}

/// `<work>/cluster-secret`: a new cluster secret, or the valid one a reused work dir holds.
pub fn write_cluster_secret(work_dir: &Path) -> Result<PathBuf, MiniClusterError> {
    let path = work_dir.join("cluster-secret");
    match ClusterSecret::generate_file(&path) {
        Ok(()) => Ok(path),
        Err(ClusterSecretError::Exists { .. }) => {
            ClusterSecret::load(&path)?;
            Ok(path)
        }
        Err(e) => Err(e.into()),
    }
}

/// The last lines of a log, for error messages.
fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = &lines[lines.len().saturating_sub(10)..];
    if tail.is_empty() {
        String::new()
    } else {
        format!("; its last lines:\n{}", tail.join("\n"))
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// `name` next to the current executable (or one level up, for test binaries in `deps/`),
/// else on `PATH`.
pub fn find_binary(name: &str, bin_dir: Option<&Path>) -> Result<PathBuf, MiniClusterError> {
    let exe_dir = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf));
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(d) = bin_dir {
        dirs.push(d.to_path_buf());
    }
    if let Some(d) = &exe_dir {
        dirs.push(d.clone());
        if d.file_name().is_some_and(|n| n == "deps") {
            if let Some(p) = d.parent() {
                dirs.push(p.to_path_buf());
            }
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    dirs.into_iter()
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
        .ok_or_else(|| MiniClusterError::BinaryNotFound {
            name: name.to_string(),
            exe_dir: exe_dir.map_or_else(|| "?".into(), |d| d.display().to_string()),
        })
}

/// A fresh `spindle-minicluster-<pid>-<ms>` directory under the temp dir.
pub fn new_work_dir() -> Result<PathBuf, MiniClusterError> {
    let dir = std::env::temp_dir().join(format!(
        "spindle-minicluster-{}-{}",
        std::process::id(),
        spindle_common::time::now_ms()
    ));
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    Ok(dir)
}

fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|c| c.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    }
}

fn spawn(
    guard: &mut ChildGuard,
    name: &str,
    binary: &Path,
    args: &[String],
    log: PathBuf,
) -> Result<(), MiniClusterError> {
    let out = File::create(&log).map_err(io(&log))?;
    let err = out.try_clone().map_err(io(&log))?;
    tracing::debug!(name, binary = %binary.display(), ?args, "starting daemon");
    let child = Command::new(binary)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|error| MiniClusterError::Spawn {
            name: name.to_string(),
            binary: binary.to_path_buf(),
            error,
        })?;
    guard.daemons.push(Daemon {
        name: name.to_string(),
        log,
        child,
    });
    Ok(())
}

fn d(key: &str, value: impl std::fmt::Display) -> [String; 2] {
    ["-D".to_string(), format!("{key}={value}")]
}

/// `list` (a comma list) with `item` added unless present.
fn with_item(list: &str, item: &str) -> String {
    let mut items: Vec<&str> = list
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if !items.contains(&item) {
        items.push(item);
    }
    items.join(",")
}

/// Writes the fake `nvidia-smi` and its config (`count` GPUs) into `<work>/fake-gpus`.
pub fn write_fake_gpus(work_dir: &Path, count: u32) -> Result<PathBuf, MiniClusterError> {
    use std::os::unix::fs::PermissionsExt;
    let dir = work_dir.join("fake-gpus");
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let exe = dir.join("nvidia-smi");
    std::fs::write(&exe, FAKE_NVIDIA_SMI).map_err(io(&exe))?;
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).map_err(io(&exe))?;
    let conf = dir.join("fake-gpu.conf");
    std::fs::write(
        &conf,
        format!("# Written by the minicluster (--gpus-per-node).\nFAKE_GPU_COUNT={count}\n"),
    )
    .map_err(io(&conf))?;
    Ok(dir)
}

/// What the minicluster adds to the daemons' command lines besides their addresses and
/// directories: defaults, the cluster secret, fake GPUs.
struct Extras {
    rm: Vec<String>,
    nm: Vec<String>,
    defaults_applied: Vec<(String, String)>,
    cluster_secret: PathBuf,
}

impl Extras {
    fn new(opts: &MiniClusterOptions, work_dir: &Path) -> Result<Self, MiniClusterError> {
        let conf = opts.configuration();
        let get = |k: &str| conf.get(k).ok().flatten().unwrap_or_default();
        let (mut rm_extra, mut nm_extra) = (Vec::new(), Vec::new());
        let defaults_applied = defaults_for(&conf);
        for (k, v) in &defaults_applied {
            rm_extra.extend(d(k, v));
        }
        // Every node-tracker call signed; a caller's -D (after these) names another file.
        let cluster_secret = match opts
            .defines
            .iter()
            .rev()
            .find(|(k, _)| k == keys::CLUSTER_SECRET_FILE)
        {
            Some((_, v)) => PathBuf::from(v),
            None => {
                let p = write_cluster_secret(work_dir)?;
                rm_extra.extend(d(keys::CLUSTER_SECRET_FILE, p.display()));
                nm_extra.extend(d(keys::CLUSTER_SECRET_FILE, p.display()));
                p
            }
        };
        // Fake GPUs: the RM schedules yarn.io/gpu, every NM runs the GPU plugin on the fake.
        if opts.gpus_per_node > 0 {
            let fake = write_fake_gpus(work_dir, opts.gpus_per_node)?;
            rm_extra.extend(d(
                keys::RESOURCE_TYPES,
                with_item(&get(keys::RESOURCE_TYPES), GPU),
            ));
            nm_extra.extend(d(
                keys::NM_RESOURCE_PLUGINS,
                with_item(&get(keys::NM_RESOURCE_PLUGINS), GPU),
            ));
            nm_extra.extend(d(
                keys::NM_GPU_PATH_TO_DISCOVERY_EXECUTABLES,
                fake.display(),
            ));
            nm_extra.extend(d(keys::NM_GPU_ALLOWED_DEVICES, "auto"));
        }
        Ok(Self {
            rm: rm_extra,
            nm: nm_extra,
            defaults_applied,
            cluster_secret,
        })
    }
}

/// Starts the RM with `rm_extra` and waits for its address file; its address.
async fn start_rm(
    opts: &MiniClusterOptions,
    guard: &mut ChildGuard,
    rm_bin: &Path,
    (work_dir, conf_dir): (&Path, &Path),
    rm_extra: &[String],
    deadline: Instant,
) -> Result<RmAddress, MiniClusterError> {
    let rm_dir = work_dir.join("rm");
    std::fs::create_dir_all(&rm_dir).map_err(io(&rm_dir))?;
    let rm_address_file = rm_dir.join("address");
    let _ = std::fs::remove_file(&rm_address_file);
    let store = rm_dir.join("rmstore.sqlite");
    let bind = opts.rm_bind.clone().unwrap_or_else(|| "127.0.0.1:0".into());
    let mut args = vec!["--conf-dir".to_string(), conf_dir.display().to_string()];
    args.extend(d(keys::RM_WEBAPP_ADDRESS, &bind));
    args.extend(d(keys::SPINDLE_RM_STATE_STORE_PATH, store.display()));
    args.extend(d(keys::RM_STORE_PATH, store.display()));
    args.extend(rm_extra.iter().cloned());
    args.extend(opts.defines.iter().flat_map(|(k, v)| d(k, v)));
    args.extend([
        "--address-file".to_string(),
        rm_address_file.display().to_string(),
    ]);
    spawn(guard, "rm", rm_bin, &args, work_dir.join("rm.log"))?;
    let rm_text = wait_for_file(
        guard,
        &rm_address_file,
        deadline,
        opts.startup_timeout,
        "the ResourceManager's address file",
    )
    .await?;
    let rm_address =
        RmAddress::parse(&rm_text).map_err(|reason| MiniClusterError::BadAddressFile {
            path: rm_address_file.clone(),
            value: rm_text.clone(),
            reason,
        })?;
    Ok(rm_address)
}

/// Starts the NMs with `nm_extra`, pointed at `rm_address`; their address files.
fn start_nms(
    opts: &MiniClusterOptions,
    guard: &mut ChildGuard,
    nm_bin: &Path,
    (work_dir, conf_dir): (&Path, &Path),
    nm_extra: &[String],
    rm_address: &RmAddress,
) -> Result<Vec<PathBuf>, MiniClusterError> {
    let mut nm_files = Vec::new();
    for i in 0..opts.nodes {
        let nm_dir = work_dir.join(format!("nm{i}"));
        let (local, logs, recovery) = (
            nm_dir.join("local"),
            nm_dir.join("logs"),
            nm_dir.join("recovery"),
        );
        for p in [&local, &logs, &recovery] {
            std::fs::create_dir_all(p).map_err(io(p))?;
        }
        let address_file = nm_dir.join("address");
        let _ = std::fs::remove_file(&address_file);
        let mut args = vec!["--conf-dir".to_string(), conf_dir.display().to_string()];
        args.extend(d(keys::NM_WEBAPP_ADDRESS, "127.0.0.1:0"));
        args.extend(d(keys::SPINDLE_NM_RM_ADDRESS, rm_address));
        args.extend(d(keys::RM_WEBAPP_ADDRESS, rm_address));
        args.extend(d(keys::NM_LOCAL_DIRS, local.display()));
        args.extend(d(keys::NM_LOG_DIRS, logs.display()));
        args.extend(d(keys::NM_RECOVERY_DIR, recovery.display()));
        // A local try-out cluster should not go unhealthy because the developer's disk
        // is over YARN's 90 % (the free-space and writability checks still apply).
        args.extend(d(keys::NM_DISK_CHECKER_MAX_UTILIZATION, "100"));
        args.extend(nm_extra.iter().cloned());
        args.extend(opts.defines.iter().flat_map(|(k, v)| d(k, v)));
        args.extend([
            "--address-file".to_string(),
            address_file.display().to_string(),
        ]);
        let name = format!("nm{i}");
        spawn(
            guard,
            &name,
            nm_bin,
            &args,
            work_dir.join(format!("{name}.log")),
        )?;
        nm_files.push(address_file);
    }
    Ok(nm_files)
}

impl MiniCluster {
    /// Starts the RM, then the NMs, and waits until the RM lists every NM as RUNNING.
    pub async fn start(opts: &MiniClusterOptions) -> Result<Self, MiniClusterError> {
        let deadline = Instant::now() + opts.startup_timeout;
        let mut guard = ChildGuard::default();
        let work_dir = match &opts.work_dir {
            Some(w) => {
                let w = absolute(w);
                std::fs::create_dir_all(&w).map_err(io(&w))?;
                w
            }
            None => new_work_dir()?,
        };
        let conf_dir = match opts.existing_conf_dir() {
            Some(c) => c,
            None => {
                let c = work_dir.join("conf");
                std::fs::create_dir_all(&c).map_err(io(&c))?;
                tracing::info!(using = %c.display(), "no configuration directory; using an empty one");
                c
            }
        };
        let extra = Extras::new(opts, &work_dir)?;
        let rm_bin = find_binary(RM_BINARY, opts.bin_dir.as_deref())?;
        let nm_bin = find_binary(NM_BINARY, opts.bin_dir.as_deref())?;
        let dirs = (work_dir.as_path(), conf_dir.as_path());
        let rm_address = start_rm(opts, &mut guard, &rm_bin, dirs, &extra.rm, deadline).await?;
        let nm_files = start_nms(opts, &mut guard, &nm_bin, dirs, &extra.nm, &rm_address)?;
        let mut nm_addresses = Vec::new();
        for (i, f) in nm_files.iter().enumerate() {
            let what = format!("NodeManager nm{i}'s address file");
            nm_addresses
                .push(wait_for_file(&mut guard, f, deadline, opts.startup_timeout, &what).await?);
        }

        let rm = RmClient::new(&rm_address)?;
        loop {
            check_alive(&mut guard, true)?;
            match rm.nodes(&[NodeState::RUNNING]).await {
                Ok(nodes) => {
                    let running = nodes
                        .iter()
                        .filter(|n| n.state == NodeState::RUNNING)
                        .count();
                    if running >= opts.nodes as usize {
                        break;
                    }
                }
                Err(e) => tracing::debug!(error = %e, "RM not answering yet"),
            }
            if Instant::now() >= deadline {
                return Err(MiniClusterError::Timeout {
                    what: format!("{} RUNNING nodes at {rm_address}", opts.nodes),
                    timeout: opts.startup_timeout,
                    logs: guard.daemons.iter().map(|d| d.log.clone()).collect(),
                });
            }
            tokio::time::sleep(POLL * 4).await;
        }
        Ok(Self {
            work_dir,
            conf_dir,
            rm_address,
            nm_addresses,
            defaults_applied: extra.defaults_applied,
            cluster_secret: extra.cluster_secret,
            guard,
        })
    }

    pub fn daemons(&self) -> &[Daemon] {
        self.guard.daemons()
    }

    /// An error naming the first daemon that has exited, if any.
    pub fn check_alive(&mut self) -> Result<(), MiniClusterError> {
        check_alive(&mut self.guard, false)
    }

    /// Stops every daemon (SIGTERM, 5 s, SIGKILL).
    pub fn stop(&mut self) {
        self.guard.stop_all();
    }
}

fn check_alive(guard: &mut ChildGuard, starting: bool) -> Result<(), MiniClusterError> {
    match guard.first_exited() {
        None => Ok(()),
        Some((name, status, log)) => {
            let tail = log_tail(&log);
            Err(if starting {
                MiniClusterError::DaemonExited {
                    name,
                    status,
                    log,
                    tail,
                }
            } else {
                MiniClusterError::DaemonDied {
                    name,
                    status,
                    log,
                    tail,
                }
            })
        }
    }
}

/// Waits for a daemon's address file (`host:port\n`), failing early if a daemon exits.
async fn wait_for_file(
    guard: &mut ChildGuard,
    path: &Path,
    deadline: Instant,
    timeout: Duration,
    what: &str,
) -> Result<String, MiniClusterError> {
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            let t = text.trim();
            if !t.is_empty() {
                return Ok(t.to_string());
            }
        }
        check_alive(guard, true)?;
        if Instant::now() >= deadline {
            return Err(MiniClusterError::Timeout {
                what: what.to_string(),
                timeout,
                logs: guard.daemons.iter().map(|d| d.log.clone()).collect(),
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cluster_secret_is_written_once_and_reused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = write_cluster_secret(dir.path()).unwrap();
        assert_eq!(p, dir.path().join("cluster-secret"));
        assert_eq!(p.metadata().unwrap().permissions().mode() & 0o777, 0o600);
        let first = std::fs::read(&p).unwrap();
        // A reused work dir keeps its secret.
        assert_eq!(write_cluster_secret(dir.path()).unwrap(), p);
        assert_eq!(std::fs::read(&p).unwrap(), first);
        // One the daemons would refuse is named, not silently replaced.
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = write_cluster_secret(dir.path()).unwrap_err().to_string();
        assert!(e.contains("0644"), "{e}");
        assert_eq!(std::fs::read(&p).unwrap(), first);
    }

    #[test]
    fn fake_gpus_are_written_with_their_count() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let fake = write_fake_gpus(dir.path(), 3).unwrap();
        let exe = fake.join("nvidia-smi");
        assert!(exe.metadata().unwrap().permissions().mode() & 0o111 != 0);
        assert!(std::fs::read_to_string(&exe)
            .unwrap()
            .contains("nvsmi_device_v12"));
        let conf = std::fs::read_to_string(fake.join("fake-gpu.conf")).unwrap();
        assert!(conf.contains("FAKE_GPU_COUNT=3"), "{conf}");
        assert_eq!(with_item("yarn.io/fpga", GPU), "yarn.io/fpga,yarn.io/gpu");
        assert_eq!(with_item(" yarn.io/gpu ", GPU), "yarn.io/gpu");
        assert_eq!(with_item("", GPU), "yarn.io/gpu");
    }

    #[test]
    fn defaults_fill_only_what_the_configuration_leaves_unset() {
        let dir = tempfile::tempdir().unwrap();
        let mut opts = MiniClusterOptions {
            conf_dir: Some(dir.path().to_path_buf()),
            ..Default::default()
        };
        let key = keys::CS_MAXIMUM_AM_RESOURCE_PERCENT;
        assert_eq!(
            defaults_for(&opts.configuration()),
            [(key.to_string(), "0.5".to_string())]
        );
        assert!(!opts.gpu_plugin_configured());
        // Set in the files: left alone.
        std::fs::write(
            dir.path().join("capacity-scheduler.xml"),
            format!("<configuration><property><name>{key}</name><value>0.3</value></property></configuration>"),
        )
        .unwrap();
        assert!(defaults_for(&opts.configuration()).is_empty());
        // Set by a -D: left alone too; a -D naming the GPU plugin counts as configured.
        std::fs::remove_file(dir.path().join("capacity-scheduler.xml")).unwrap();
        opts.defines = vec![
            (key.to_string(), "0.2".to_string()),
            (
                keys::NM_RESOURCE_PLUGINS.to_string(),
                format!("yarn.io/fpga,{GPU}"),
            ),
        ];
        assert!(defaults_for(&opts.configuration()).is_empty());
        assert!(opts.gpu_plugin_configured());
    }

    #[test]
    fn missing_binaries_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let e = find_binary("surely-not-a-spindle-binary", Some(dir.path())).unwrap_err();
        assert!(e.to_string().contains("surely-not-a-spindle-binary"), "{e}");
    }

    #[test]
    fn binaries_are_found_in_the_given_dir() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("fake-daemon");
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        assert!(find_binary("fake-daemon", Some(dir.path())).is_err());
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(find_binary("fake-daemon", Some(dir.path())).unwrap(), p);
    }

    #[tokio::test]
    async fn a_dying_daemon_fails_startup_and_a_stuck_one_is_killed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        // An RM that dies at once.
        let rm = bin.join(RM_BINARY);
        std::fs::write(&rm, "#!/bin/sh\necho 'error: bad config' >&2\nexit 1\n").unwrap();
        let nm = bin.join(NM_BINARY);
        std::fs::write(&nm, "#!/bin/sh\nexit 0\n").unwrap();
        for p in [&rm, &nm] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let opts = MiniClusterOptions {
            nodes: 1,
            work_dir: Some(dir.path().join("work")),
            bin_dir: Some(bin.clone()),
            startup_timeout: Duration::from_secs(10),
            ..Default::default()
        };
        let e = MiniCluster::start(&opts).await.unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("rm exited"), "{msg}");
        assert!(msg.contains("rm.log"), "{msg}");
        assert!(msg.contains("error: bad config"), "{msg}");

        // An RM that ignores SIGTERM and never writes its address: timeout, then killed.
        std::fs::write(
            &rm,
            "#!/bin/sh\ntrap '' TERM\nwhile true; do sleep 0.1; done\n",
        )
        .unwrap();
        let opts = MiniClusterOptions {
            startup_timeout: Duration::from_millis(500),
            ..opts
        };
        let started = Instant::now();
        let e = MiniCluster::start(&opts).await.unwrap_err();
        assert!(matches!(e, MiniClusterError::Timeout { .. }), "{e}");
        assert!(e.to_string().contains("rm.log"), "{e}");
        // The guard waited the grace period and then SIGKILLed it.
        assert!(started.elapsed() >= STOP_GRACE);
    }
}
