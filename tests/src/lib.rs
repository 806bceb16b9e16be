//! Support for Spindle's system tests: start the real `resourcemanager`, `nodemanager` and
//! `spindle` binaries on 127.0.0.1 with ephemeral ports and a private work directory, drive
//! them over HTTP, and kill every process they started (by pid) when the test ends, even
//! when it panics. A binary stuck past [`watchdog`]'s limit kills its daemons and fails.
//!
//! [`Cluster`] runs every daemon on 127.0.0.1 with one file system; [`hosts::Hosts`] runs the
//! RM and each NM as a separate host (own network, host name, `/tmp` and directories) for
//! partition tests. Both write their daemons' configuration with [`conf`] and drive the RM
//! through [`rest::Rm`].
//!
//! The binaries are found next to the test executable's `target/<profile>/` directory; the
//! test command builds them first (`cargo build --workspace --bins`).

#![forbid(unsafe_code)]

pub mod cgroup;
pub mod conf;
pub mod etcd_history;
pub mod ha;
pub mod hosts;
pub mod rest;
pub mod watchdog;

pub use rest::{DshellSpec, Rm};

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;

/// `target/<profile>/` of the current build.
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe.parent().expect("exe dir");
    // Test binaries live in target/<profile>/deps/, binaries in target/<profile>/.
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir.parent().expect("target dir").to_path_buf()
    } else {
        dir.to_path_buf()
    }
}

pub fn bin(name: &str) -> PathBuf {
    let p = bin_dir().join(name);
    assert!(
        p.exists(),
        "{} is missing: run `cargo build --workspace --bins` before the system tests",
        p.display()
    );
    p
}

/// A child process that is killed (SIGKILL to its process group) when dropped.
pub struct Daemon {
    pub name: String,
    pub child: Child,
    pub log: PathBuf,
}

impl Daemon {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }
    pub fn signal(&self, sig: Signal) {
        let _ = kill(Pid::from_raw(self.pid()), sig);
    }
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
    /// The last `n` lines of its log.
    pub fn log_tail(&self, n: usize) -> String {
        file_tail(&self.log, n)
    }
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        watchdog::stopped(self.pid());
        if let Ok(None) = self.child.try_wait() {
            let _ = kill(Pid::from_raw(self.pid()), Signal::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(3);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The last `n` lines of the file at `path` (none when it cannot be read).
pub fn file_tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Whether process `pid` runs: it exists and is not a zombie (its `/proc/<pid>/stat`).
pub fn running(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .is_some_and(|state| state != "Z")
}

/// Spawns `bin` with `args`, stderr and stdout to `log`.
pub fn spawn(
    name: &str,
    bin: &Path,
    args: &[String],
    log: PathBuf,
    env: &[(&str, String)],
) -> Daemon {
    let mut cmd = Command::new(bin);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    spawn_command(name, cmd, log)
}

/// Spawns `cmd` (whose program ends by `exec`ing the daemon, so its pid is the daemon's),
/// stderr and stdout to `log`, stdin empty.
pub fn spawn_command(name: &str, mut cmd: Command, log: PathBuf) -> Daemon {
    let out = std::fs::File::create(&log).expect("log file");
    let err = out.try_clone().expect("log clone");
    cmd.stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .stdin(Stdio::null());
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("spawning {:?}: {e}", cmd.get_program()));
    watchdog::started(child.id() as i32, name, log.clone());
    Daemon {
        name: name.to_string(),
        child,
        log,
    }
}

/// The first application id (`application_<ts>_<n>`) a client's output names.
pub fn app_id_in(text: &str) -> Option<String> {
    text.split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
        .find(|w| w.starts_with("application_"))
        .map(String::from)
}

/// Polls `f` every 50 ms until it returns Some or `timeout` passes.
pub fn wait_until<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The property naming the cluster secret file (every [`Cluster`] sets it on its RM and NMs).
pub const CLUSTER_SECRET_FILE: &str = "spindle.cluster.secret-file";

/// Writes a new cluster secret to `path` as `spindle cluster-secret -generate` does: 32
/// bytes of `/dev/urandom` as hex, in a file created `0600` that did not exist.
pub fn write_cluster_secret(path: &Path) {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut key = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut key))
        .expect("read /dev/urandom");
    let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(format!("{hex}\n").as_bytes()))
        .unwrap_or_else(|e| panic!("cluster secret {}: {e}", path.display()));
}

/// A cluster of real processes: one RM and N NMs.
pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub rm: Daemon,
    pub rm_addr: String,
    pub nms: Vec<Daemon>,
    pub nm_addrs: Vec<String>,
    /// Each NM's command line, to start it again ([`Cluster::restart_nm_after`]).
    pub nm_args: Vec<Vec<String>>,
    pub http: reqwest::blocking::Client,
    pub conf_dir: PathBuf,
    /// The RM's command line, to start it again on the same state store
    /// ([`Cluster::restart_rm`]).
    pub rm_args: Vec<String>,
    /// How many times the RM was restarted (each run logs to its own file).
    pub rm_restarts: usize,
    /// `http`, or `https` for a cluster started with [`Cluster::start_tls`].
    pub scheme: &'static str,
}

/// Extra `-D` properties for the RM and the NMs.
#[derive(Default, Clone)]
pub struct ClusterOpts {
    pub nodes: usize,
    pub rm_props: Vec<(String, String)>,
    pub nm_props: Vec<(String, String)>,
}

impl ClusterOpts {
    /// `nodes` NMs with the fake GPUs of `discovery` (see [`fake_gpus`]) and 8 vcores each,
    /// `yarn.io/gpu` a resource type of the RM.
    pub fn with_fake_gpus(nodes: usize, discovery: &Path) -> Self {
        const GPU: &str = "yarn.io/gpu";
        ClusterOpts {
            nodes,
            rm_props: vec![("yarn.resource-types".into(), GPU.into())],
            nm_props: vec![
                ("yarn.nodemanager.resource-plugins".into(), GPU.into()),
                (
                    "yarn.nodemanager.resource-plugins.gpu.path-to-discovery-executables".into(),
                    discovery.display().to_string(),
                ),
                ("yarn.nodemanager.resource.cpu-vcores".into(), "8".into()),
            ],
        }
    }
}

/// The address `d` wrote to `path` (its `--address-file`), waited for; panics with its log
/// if it exits first.
pub fn read_addr(path: &Path, d: &mut Daemon) -> String {
    wait_until(
        &format!("{} to listen ({})", d.name, d.log.display()),
        Duration::from_secs(20),
        || {
            if !d.is_running() {
                panic!("{} exited early:\n{}", d.name, d.log_text());
            }
            std::fs::read_to_string(path)
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        },
    )
}

impl Cluster {
    pub fn start(opts: ClusterOpts) -> Self {
        Self::start_with_files(opts, &[])
    }

    /// Like [`Cluster::start`], with extra files (`capacity-scheduler.xml`, ...) written into
    /// the configuration directory the daemons and the CLI read, as `(file name, content)`.
    pub fn start_with_files(opts: ClusterOpts, files: &[(&str, &str)]) -> Self {
        Self::start_inner(opts, files, None)
    }

    /// A cluster whose configuration files (a `yarn-site.xml` among `files`) say
    /// `yarn.http.policy` `HTTPS_ONLY`: the test's client dials `https://` and trusts
    /// `ca_pem` (the CA that signed the daemons' certificate).
    pub fn start_tls(opts: ClusterOpts, files: &[(&str, &str)], ca_pem: &str) -> Self {
        Self::start_inner(opts, files, Some(ca_pem))
    }

    fn start_inner(opts: ClusterOpts, files: &[(&str, &str)], ca_pem: Option<&str>) -> Self {
        let mut http = reqwest::blocking::Client::builder().timeout(Duration::from_secs(10));
        if let Some(pem) = ca_pem {
            http = http.add_root_certificate(
                reqwest::Certificate::from_pem(pem.as_bytes()).expect("CA certificate"),
            );
        }
        let http = http.build().expect("client");
        let dir = tempfile::tempdir().expect("tempdir");
        let conf_dir = conf::write_conf_dir(&dir.path().join("conf"), files);
        let rm_dir = dir.path().join("rm");
        std::fs::create_dir_all(&rm_dir).expect("rm dir");
        // Every cluster authenticates its NMs (a test may set the key empty to turn it off).
        let secret = dir.path().join("cluster-secret");
        write_cluster_secret(&secret);
        let props = conf::rm_props(&secret, "127.0.0.1", &rm_dir, &opts.rm_props);
        let args = conf::daemon_args(&conf_dir, &props, &rm_dir.join("address"));
        let mut rm = spawn(
            "resourcemanager",
            &bin("resourcemanager"),
            &args,
            dir.path().join("rm.log"),
            &[],
        );
        let rm_addr = read_addr(&rm_dir.join("address"), &mut rm);
        let rm_args = args;
        let mut c = Cluster {
            dir,
            rm,
            rm_addr,
            nms: vec![],
            nm_addrs: vec![],
            nm_args: vec![],
            http,
            conf_dir,
            rm_args,
            rm_restarts: 0,
            scheme: if ca_pem.is_some() { "https" } else { "http" },
        };
        for _ in 0..opts.nodes {
            c.add_nm(&opts.nm_props);
        }
        let n = opts.nodes;
        c.wait_nodes_running(n);
        c
    }

    pub fn add_nm(&mut self, props: &[(String, String)]) -> usize {
        let i = self.nms.len();
        let d = self.dir.path().join(format!("nm{i}"));
        std::fs::create_dir_all(&d).expect("nm dir");
        let secret = self.cluster_secret();
        let secret = secret.exists().then_some(secret.as_path());
        let all = conf::nm_props("127.0.0.1", &self.rm_addr, &d, secret, props);
        let args = conf::daemon_args(&self.conf_dir, &all, &d.join("address"));
        let mut nm = spawn(
            &format!("nodemanager{i}"),
            &bin("nodemanager"),
            &args,
            self.dir.path().join(format!("nm{i}.log")),
            &[],
        );
        let addr = read_addr(&d.join("address"), &mut nm);
        self.nms.push(nm);
        self.nm_addrs.push(addr);
        self.nm_args.push(args);
        i
    }

    /// Stops NM `i` with `sig` (SIGKILL: a crash; its containers, in sessions of their own,
    /// live on) and starts it again on the same address and directories, so that with
    /// `yarn.nodemanager.recovery.enabled` it re-adopts them.
    pub fn restart_nm_after(&mut self, i: usize, sig: Signal) {
        self.nms[i].signal(sig);
        wait_until("the NM to exit", Duration::from_secs(15), || {
            (!self.nms[i].is_running()).then_some(())
        });
        let addr = self.nm_addrs[i].clone();
        let args: Vec<String> = self.nm_args[i]
            .iter()
            .map(|a| {
                if a == "yarn.nodemanager.webapp.address=127.0.0.1:0" {
                    format!("yarn.nodemanager.webapp.address={addr}")
                } else {
                    a.clone()
                }
            })
            .collect();
        let d = self.dir.path().join(format!("nm{i}"));
        let _ = std::fs::remove_file(d.join("address"));
        let mut nm = spawn(
            &format!("nodemanager{i}"),
            &bin("nodemanager"),
            &args,
            self.dir.path().join(format!("nm{i}-restarted.log")),
            &[],
        );
        read_addr(&d.join("address"), &mut nm);
        self.nms[i] = nm;
    }

    /// Stops the RM (SIGTERM, then SIGKILL after 10 s) and starts a new one with the same
    /// configuration, state store and address, so the NMs and clients find it again.
    pub fn restart_rm(&mut self) {
        self.restart_rm_after(Signal::SIGTERM);
    }

    /// Stops the RM with `sig` (SIGKILL: a crash) and starts it again on the same address
    /// and state store.
    pub fn restart_rm_after(&mut self, sig: Signal) {
        // A dead and reaped RM's pid may belong to another process by now.
        if self.rm.is_running() {
            self.rm.signal(sig);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.rm.is_running() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if self.rm.is_running() {
            let _ = self.rm.child.kill();
        }
        let _ = self.rm.child.wait();
        self.rm_restarts += 1;
        let webapp = "yarn.resourcemanager.webapp.address=";
        let mut args = self.rm_args.clone();
        for a in args.iter_mut() {
            if a.starts_with(webapp) {
                *a = format!("{webapp}{}", self.rm_addr);
            }
        }
        let addr_file = self.dir.path().join("rm").join("address");
        let _ = std::fs::remove_file(&addr_file);
        let mut rm = spawn(
            "resourcemanager",
            &bin("resourcemanager"),
            &args,
            self.dir
                .path()
                .join(format!("rm-restart{}.log", self.rm_restarts)),
            &[],
        );
        let addr = read_addr(&addr_file, &mut rm);
        assert_eq!(
            addr, self.rm_addr,
            "the restarted RM binds the same address"
        );
        self.rm = rm;
    }

    /// The cluster secret file the RM and the NMs were given (`<dir>/cluster-secret`; it
    /// does not exist for a cluster a test put together itself).
    pub fn cluster_secret(&self) -> PathBuf {
        self.dir.path().join("cluster-secret")
    }

    /// The RM's REST API, as [`rest::Rm`] drives it.
    pub fn rest(&self) -> Rm<'_> {
        Rm {
            http: &self.http,
            base: format!("{}://{}", self.scheme, self.rm_addr),
        }
    }

    pub fn url(&self, path: &str) -> String {
        self.rest().url(path)
    }

    pub fn get(&self, path: &str) -> (u16, Value) {
        self.rest().get(path)
    }

    pub fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: &Value,
    ) -> (u16, Value, Option<String>) {
        self.rest().send(method, path, body)
    }

    /// [`Rm::submit_dshell`]: a distributed shell `name` into `queue` (as `user` when one is
    /// named) whose one worker (256 MB, 1 vcore) runs `command`; its id once accepted.
    pub fn submit_dshell(
        &self,
        name: &str,
        queue: &str,
        user: Option<&str>,
        command: &str,
    ) -> String {
        self.rest().submit_dshell(name, queue, user, command)
    }

    pub fn running_nodes(&self) -> usize {
        self.rest().running_nodes()
    }

    pub fn wait_nodes_running(&self, n: usize) {
        self.rest().wait_nodes_running(n)
    }

    /// Every container the RM lists for every attempt of `app`, AM first.
    pub fn containers_of(&self, app: &str) -> Vec<Value> {
        self.rest().containers_of(app)
    }

    pub fn app(&self, id: &str) -> Value {
        self.rest().app(id)
    }

    /// Waits until the app reaches one of `states`; returns the app object.
    pub fn wait_app_state(&self, id: &str, states: &[&str], timeout: Duration) -> Value {
        self.rest().wait_app_state(id, states, timeout)
    }

    /// Runs the `spindle` CLI against this cluster.
    pub fn spindle(&self, args: &[&str]) -> std::process::Output {
        Command::new(bin("spindle"))
            .args(args)
            .env("SPINDLE_RM_ADDRESS", &self.rm_addr)
            .env("SPINDLE_CONF_DIR", &self.conf_dir)
            .output()
            .expect("run spindle")
    }

    /// Runs the `spindle` CLI as `user` (its `?user.name=`).
    pub fn spindle_as(&self, user: &str, args: &[&str]) -> std::process::Output {
        Command::new(bin("spindle"))
            .args(args)
            .env("SPINDLE_RM_ADDRESS", &self.rm_addr)
            .env("SPINDLE_CONF_DIR", &self.conf_dir)
            .env("USER", user)
            .output()
            .expect("run spindle")
    }

    /// The RM's current container-token master key, obtained as an NM obtains it: a
    /// registration (of a node `127.0.0.1:1` with no resources, unregistered at once) signed
    /// with this cluster's secret, whose answer carries the key wrapped with that secret.
    pub fn container_key(&self) -> spindle_common::token::ContainerKey {
        use spindle_common::cluster_secret::ClusterSecret;
        let secret = ClusterSecret::load(&self.cluster_secret()).expect("the cluster secret");
        let node = "127.0.0.1:1";
        let call = |path: &str, body: Value, nonce: u8| {
            let body = body.to_string();
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("clock")
                .as_millis() as u64;
            let mut n = [nonce; 16];
            n[..8].copy_from_slice(&now.to_be_bytes());
            let auth = secret.sign("POST", path, node, body.as_bytes(), now, n);
            let r = self
                .http
                .post(self.url(path))
                .header("content-type", "application/json")
                .header("authorization", auth)
                .body(body)
                .send()
                .expect("node-tracker call");
            assert_eq!(r.status().as_u16(), 200, "{path}");
            r.json::<Value>().expect("JSON answer")
        };
        let reg = call(
            "/ws/v1/node-tracker/register",
            serde_json::json!({"nodeId": node, "httpAddress": node,
                "resource": {"memory": 0, "vCores": 0}, "nmVersion": "system-test"}),
            1,
        );
        call(
            "/ws/v1/node-tracker/unregister",
            serde_json::json!({ "nodeId": node }),
            2,
        );
        let mk: spindle_common::records::tracker::MasterKey =
            serde_json::from_value(reg["containerTokenMasterKey"].clone())
                .expect("containerTokenMasterKey");
        mk.open(Some(&secret)).expect("the secret unwraps the key")
    }

    /// `Bearer <container token>` for `container` on `node` (its NM's `host:port`): what the
    /// container's AM sends to the NM calls that act on it (stop, release, signal, ...).
    pub fn container_bearer(&self, container: &str, node: &str) -> String {
        use spindle_common::token::{issue_container_token, ContainerTokenIdentifier};
        let id = container.parse().expect("container id");
        let ident = ContainerTokenIdentifier::new(
            id,
            node.parse().expect("node id"),
            "system-test".into(),
            &spindle_common::Resource::new(128, 1),
            u64::MAX / 2,
            0,
            false,
        );
        format!(
            "Bearer {}",
            issue_container_token(&self.container_key(), &ident)
        )
    }

    /// Dumps every daemon log to stderr (call on failure paths for diagnosis).
    pub fn dump_logs(&self) {
        let mut e = std::io::stderr();
        let _ = writeln!(e, "---- rm.log ----\n{}", self.rm.log_text());
        for nm in &self.nms {
            let _ = writeln!(e, "---- {} ----\n{}", nm.name, nm.log_text());
        }
    }
}

/// A directory holding an `nvidia-smi` (a symlink to `scripts/fake-nvidia-smi`) whose
/// `fake-gpu.conf` says `count` GPUs, for `...gpu.path-to-discovery-executables`.
pub fn fake_gpus(dir: &Path, count: u32) -> PathBuf {
    fake_gpus_in(dir, "gpus", &format!("FAKE_GPU_COUNT={count}\n"))
}

/// A directory `dir/name` with the fake `nvidia-smi` and its `fake-gpu.conf` (`KEY=value`
/// lines, read literally: no quotes), for NMs whose GPUs differ (model, count, ...).
pub fn fake_gpus_in(dir: &Path, name: &str, conf: &str) -> PathBuf {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).expect("gpus dir");
    let fake = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/fake-nvidia-smi");
    std::os::unix::fs::symlink(&fake, d.join("nvidia-smi")).expect("symlink");
    std::fs::write(d.join("fake-gpu.conf"), conf).expect("conf");
    d
}

/// A `capacity-scheduler.xml` setting `yarn.scheduler.capacity.<key>` for each pair.
pub fn cs_xml(pairs: &[(&str, &str)]) -> String {
    let mut x = String::from("<?xml version=\"1.0\"?>\n<configuration>\n");
    for (k, v) in pairs {
        x.push_str(&format!(
            "  <property>\n    <name>yarn.scheduler.capacity.{k}</name>\n    <value>{v}</value>\n  </property>\n"
        ));
    }
    x.push_str("</configuration>\n");
    x
}

/// A finished command's stdout then stderr, as text.
pub fn output_text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Runs `cmd` to its end with stdout and stderr captured (through files, so a chatty child
/// never blocks on a full pipe); kills it (SIGKILL) and panics if it runs past `timeout`.
pub fn output_within(mut cmd: Command, timeout: Duration) -> std::process::Output {
    let dir = tempfile::tempdir().expect("tempdir");
    let (out_path, err_path) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let out = std::fs::File::create(&out_path).expect("stdout file");
    let err = std::fs::File::create(&err_path).expect("stderr file");
    let mut child = cmd
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Ok(Some(s)) = child.try_wait() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{cmd:?} ran longer than {timeout:?}\nstdout:\n{}\nstderr:\n{}",
                std::fs::read_to_string(&out_path).unwrap_or_default(),
                std::fs::read_to_string(&err_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    std::process::Output {
        status,
        stdout: std::fs::read(&out_path).unwrap_or_default(),
        stderr: std::fs::read(&err_path).unwrap_or_default(),
    }
}

impl Cluster {
    /// [`Cluster::spindle`], killed (and the test failed) if it runs past `timeout`.
    pub fn spindle_within(&self, args: &[&str], timeout: Duration) -> std::process::Output {
        let mut cmd = Command::new(bin("spindle"));
        cmd.args(args)
            .env("SPINDLE_RM_ADDRESS", &self.rm_addr)
            .env("SPINDLE_CONF_DIR", &self.conf_dir);
        output_within(cmd, timeout)
    }

    /// The text of a container's log file (`stdout`, `stderr`) from its NM; empty if the NM
    /// does not answer.
    pub fn container_log(&self, nm_http: &str, container_id: &str, file: &str) -> String {
        self.rest().container_log(nm_http, container_id, file)
    }

    /// What the NM says of a container: (state, exit code); see [`Rest::nm_container_state`].
    pub fn nm_container_state(&self, nm_http: &str, container_id: &str) -> (String, i64) {
        self.rest().nm_container_state(nm_http, container_id)
    }

    /// The AM container's `stdout` of the application's first attempt (empty if unknown).
    pub fn am_stdout(&self, app_id: &str) -> String {
        self.rest().am_stdout(app_id, 1)
    }
}
