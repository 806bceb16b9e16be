//! Every command of README.md's quick start, run as written against the cluster the README
//! starts.
//!
//! The commands are read from README.md itself: every line of the ```sh blocks of the
//! sections [`QUICK_START`] names (a line ending in `\` continues on the next), so this test
//! breaks when the README changes in a way that stops working. Each runs with `sh -c`, in the
//! repository root (the README's commands assume it), and must exit 0:
//!
//! - `cargo build ...`: the build is this test's precondition (the system tests run after
//!   `cargo build --workspace --bins`); it must build the binaries (`--bins`) and is not run
//!   again here. What follows its `&&` runs.
//! - `export NAME=VALUE`: evaluated by `sh` (after the substitutions below) and kept in the
//!   environment of every later command, as the README's shell would keep it.
//! - `spindle minicluster ...` without `--demo`: the cluster the README keeps running in
//!   another shell. It runs in the background, as written, until the end of the test, then
//!   gets SIGTERM by pid (and SIGKILL if it lingers), as Ctrl-C would stop it.
//! - Anything else runs to its end, bounded by [`COMMAND_TIMEOUT`].
//!
//! The only substitutions are the placeholders the README tells the user to fill in:
//! `<port>` (the port of the `SPINDLE_RM_ADDRESS=127.0.0.1:<port>` line the minicluster
//! prints) and `<ts>` (the running cluster's start time, read from the first application
//! id a command prints after it started). A command with any other `<placeholder>` fails the test. If the build's
//! target directory is not `./target` (`CARGO_TARGET_DIR`), `./target/debug` and
//! `$PWD/target/debug` are replaced by the directory holding this build's binaries.
//!
//! Every minicluster's temporary work directory is made under a private `TMPDIR` for the
//! test, and the test checks that it is gone once the minicluster has stopped, as the
//! README says.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use spindle_system_tests::{app_id_in, bin_dir};

/// The README sections whose ```sh blocks are the quick start (and the Slurm rows).
const QUICK_START: &[&str] = &["Quick start", "Using a cluster", "Coming from Slurm"];
/// The most one command may take (a training gang waits for its nodes' heartbeats).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(240);
/// How long the background minicluster may take to print its address.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(90);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// The ```sh blocks' commands of each named `## ` section, continuation lines joined.
fn quick_start_commands(readme: &str) -> Vec<String> {
    let mut commands = Vec::new();
    for name in QUICK_START {
        let heading = format!("## {name}\n");
        let start = readme
            .find(&heading)
            .unwrap_or_else(|| panic!("README.md has no '## {name}' section"));
        let body = &readme[start + heading.len()..];
        let body = &body[..body.find("\n## ").unwrap_or(body.len())];
        let before = commands.len();
        let mut in_block = false;
        let mut pending = String::new();
        for line in body.lines() {
            let t = line.trim_end();
            if !in_block {
                in_block = t == "```sh";
                continue;
            }
            if t == "```" {
                in_block = false;
                assert!(
                    pending.is_empty(),
                    "a block ends inside a `\\` line: {pending}"
                );
                continue;
            }
            if t.trim().is_empty() || t.trim_start().starts_with('#') {
                continue;
            }
            match t.strip_suffix('\\') {
                Some(head) => {
                    pending.push_str(head.trim_end());
                    pending.push(' ');
                }
                None => {
                    pending.push_str(t.trim());
                    commands.push(std::mem::take(&mut pending));
                }
            }
        }
        assert!(
            commands.len() > before,
            "README.md's '## {name}' has no ```sh commands"
        );
    }
    commands
}

/// A `<word>` left in a command after the substitutions.
fn placeholder(cmd: &str) -> Option<&str> {
    cmd.match_indices('<').find_map(|(start, _)| {
        let end = start + cmd[start..].find('>')?;
        let word = &cmd[start + 1..end];
        (!word.is_empty() && word.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
            .then(|| &cmd[start..=end])
    })
}

/// SIGTERM to the process group `pgid`, up to `grace` for `child` to exit, then SIGKILL to
/// the group: the command, and whatever it started that is still in its group (a
/// minicluster's daemons).
fn stop_group(child: &mut Child, grace: Duration) -> Option<std::process::ExitStatus> {
    if let Ok(Some(s)) = child.try_wait() {
        return Some(s);
    }
    let pgid = Pid::from_raw(child.id() as i32);
    let _ = nix::sys::signal::killpg(pgid, Signal::SIGTERM);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(s)) = child.try_wait() {
            let _ = nix::sys::signal::killpg(pgid, Signal::SIGKILL);
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = nix::sys::signal::killpg(pgid, Signal::SIGKILL);
    let _ = child.wait();
    None
}

/// Runs `cmd` (in its own process group) to its end, output through files; past `timeout`
/// its whole group is stopped and the test fails.
fn output_within(mut cmd: Command, timeout: Duration) -> std::process::Output {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let (out_path, err_path) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let mut child = cmd
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).expect("stdout file"))
        .stderr(std::fs::File::create(&err_path).expect("stderr file"))
        .spawn()
        .expect("spawn sh");
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Ok(Some(s)) = child.try_wait() {
            break s;
        }
        if Instant::now() > deadline {
            stop_group(&mut child, Duration::from_secs(10));
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

/// The minicluster the README keeps running, in its own process group; stopped when
/// dropped.
struct Background {
    child: Child,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Background {
    fn output(&self) -> String {
        format!(
            "stdout:\n{}\nstderr:\n{}",
            std::fs::read_to_string(&self.stdout).unwrap_or_default(),
            std::fs::read_to_string(&self.stderr).unwrap_or_default()
        )
    }

    /// SIGTERM to the minicluster (by pid, as Ctrl-C would stop it) and up to `grace` for
    /// it to exit; then SIGKILL to its process group. Its exit status, if it exited by
    /// itself.
    fn stop(&mut self, grace: Duration) -> Option<std::process::ExitStatus> {
        if let Ok(Some(s)) = self.child.try_wait() {
            return Some(s);
        }
        let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(s)) = self.child.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        stop_group(&mut self.child, Duration::ZERO)
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(10));
    }
}

/// The minicluster work directories under `tmp`.
fn work_dirs(tmp: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(tmp)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("spindle-minicluster-"))
                })
                .collect()
        })
        .unwrap_or_default()
}

struct Session {
    repo: PathBuf,
    tmp: tempfile::TempDir,
    env: BTreeMap<String, String>,
    /// `./target/debug` as this build has it, when it is elsewhere.
    target_debug: Option<PathBuf>,
    port: Option<String>,
    ts: Option<String>,
    cluster: Option<Background>,
    transcript: String,
}

impl Session {
    fn substitute(&self, cmd: &str) -> String {
        let mut c = cmd.to_string();
        if let Some(dir) = &self.target_debug {
            let d = dir.display().to_string();
            c = c
                .replace("$PWD/target/debug", &d)
                .replace("./target/debug", &d);
        }
        if c.contains("<port>") {
            let port = self.port.as_deref().unwrap_or_else(|| {
                panic!("`{cmd}` needs <port>, but no minicluster has printed its address")
            });
            c = c.replace("<port>", port);
        }
        if c.contains("<ts>") {
            let ts = self.ts.as_deref().unwrap_or_else(|| {
                panic!("`{cmd}` needs <ts>, but no command has printed an application id yet")
            });
            c = c.replace("<ts>", ts);
        }
        if let Some(p) = placeholder(&c) {
            panic!("README command `{cmd}` has the placeholder {p}, which the README does not tell the user how to fill (this test knows <port> and <ts>)");
        }
        c
    }

    fn sh(&self, cmd: &str) -> Command {
        let mut c = Command::new("sh");
        // The README's shell: in the repository root, with what its exports set and no
        // address or configuration directory from this test's environment.
        c.arg("-c")
            .arg(cmd)
            .current_dir(&self.repo)
            .env("PWD", &self.repo)
            .env("TMPDIR", self.tmp.path())
            .env_remove("SPINDLE_RM_ADDRESS")
            .env_remove("SPINDLE_CONF_DIR")
            .envs(&self.env);
        c
    }

    fn run(&mut self, readme_cmd: &str) {
        let mut cmd = readme_cmd.to_string();
        if cmd.starts_with("cargo build") {
            let (build, rest) = cmd.split_once("&&").unwrap_or((cmd.as_str(), ""));
            assert!(
                build.contains("--bins"),
                "the README's build must build the binaries its commands run: {build}"
            );
            if rest.trim().is_empty() {
                return;
            }
            cmd = rest.trim().to_string();
        }
        let cmd = self.substitute(&cmd);
        if let Some(assignment) = cmd.strip_prefix("export ") {
            let name = assignment
                .split_once('=')
                .map(|(n, _)| n.trim().to_string())
                .unwrap_or_else(|| panic!("`{readme_cmd}`: export without NAME=VALUE"));
            let out = output_within(
                self.sh(&format!("{cmd}; printf '%s' \"${name}\"")),
                COMMAND_TIMEOUT,
            );
            assert!(out.status.success(), "`{readme_cmd}` failed");
            let value = String::from_utf8_lossy(&out.stdout).to_string();
            self.transcript
                .push_str(&format!("$ {readme_cmd}\n({name}={value})\n"));
            self.env.insert(name, value);
            return;
        }
        let words: Vec<&str> = cmd.split_whitespace().collect();
        let is_minicluster = words
            .windows(2)
            .any(|w| w[0].ends_with("spindle") && w[1] == "minicluster");
        if is_minicluster && !words.contains(&"--demo") {
            self.start_cluster(readme_cmd, &cmd);
            return;
        }
        let out = output_within(self.sh(&cmd), COMMAND_TIMEOUT);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        self.transcript
            .push_str(&format!("$ {readme_cmd}\n{text}\n"));
        assert!(
            out.status.success(),
            "README command `{readme_cmd}` (run as `{cmd}`) exited with {}:\n{text}\n---- the quick start so far ----\n{}",
            out.status,
            self.transcript
        );
        if self.ts.is_none() {
            if let Some(id) = app_id_in(&text) {
                self.ts = id.split('_').nth(1).map(str::to_string);
            }
        }
        if is_minicluster {
            self.check_demo(readme_cmd, &text);
        }
    }

    /// `--demo` shows the distributed shell's output and then every rank's environment, and
    /// leaves no work directory behind.
    fn check_demo(&self, readme_cmd: &str, text: &str) {
        assert!(
            text.contains("hello from container_"),
            "`{readme_cmd}` shows no distributed-shell output:\n{text}"
        );
        for rank in [
            "RANK=0 WORLD_SIZE=2 LOCAL_RANK=",
            "RANK=1 WORLD_SIZE=2 LOCAL_RANK=",
        ] {
            assert!(
                text.lines()
                    .any(|l| l.trim_start().starts_with(rank) && l.contains("MASTER_PORT=")),
                "`{readme_cmd}` shows no '{rank}...' line:\n{text}"
            );
        }
        assert!(
            text.contains("CUDA_VISIBLE_DEVICES=0") || text.contains("CUDA_VISIBLE_DEVICES=1"),
            "the demo's workers got no GPUs:\n{text}"
        );
        let left = work_dirs(self.tmp.path());
        assert!(left.is_empty(), "`{readme_cmd}` left {left:?}");
    }

    fn start_cluster(&mut self, readme_cmd: &str, cmd: &str) {
        use std::os::unix::process::CommandExt;
        assert!(self.cluster.is_none(), "the README starts two clusters");
        let stdout = self.tmp.path().join("minicluster.stdout");
        let stderr = self.tmp.path().join("minicluster.stderr");
        let child = self
            .sh(&format!("exec {cmd}"))
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).expect("stdout file"))
            .stderr(std::fs::File::create(&stderr).expect("stderr file"))
            .spawn()
            .expect("spawn the minicluster");
        let mut bg = Background {
            child,
            stdout,
            stderr,
        };
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        let address = loop {
            let text = std::fs::read_to_string(&bg.stdout).unwrap_or_default();
            if let Some(a) = text
                .lines()
                .find_map(|l| l.strip_prefix("SPINDLE_RM_ADDRESS="))
            {
                break a.trim().to_string();
            }
            if let Ok(Some(s)) = bg.child.try_wait() {
                panic!(
                    "`{readme_cmd}` exited with {s} before printing its address:\n{}",
                    bg.output()
                );
            }
            assert!(
                Instant::now() < deadline,
                "`{readme_cmd}` printed no SPINDLE_RM_ADDRESS within {STARTUP_TIMEOUT:?}:\n{}",
                bg.output()
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        let port = address.strip_prefix("127.0.0.1:").unwrap_or_else(|| {
            panic!("the README says 127.0.0.1:<port>; the minicluster printed {address}")
        });
        self.transcript.push_str(&format!(
            "$ {readme_cmd}   (in the background)\nSPINDLE_RM_ADDRESS={address}\n"
        ));
        self.port = Some(port.to_string());
        // `<ts>` is this cluster's: the ids an earlier (demo) cluster printed do not count.
        self.ts = None;
        self.cluster = Some(bg);
    }

    /// Ctrl-C for the background cluster: it stops its daemons, exits 0 and removes its
    /// work directory.
    fn stop_cluster(&mut self) {
        let Some(mut bg) = self.cluster.take() else {
            return;
        };
        let status = bg.stop(Duration::from_secs(30));
        assert!(
            status.is_some_and(|s| s.success()),
            "the minicluster did not exit 0 on SIGTERM ({status:?}):\n{}",
            bg.output()
        );
        let left = work_dirs(self.tmp.path());
        assert!(
            left.is_empty(),
            "the minicluster left {left:?}:\n{}",
            bg.output()
        );
    }
}

#[test]
fn every_quick_start_command_runs_as_written() {
    let repo = repo();
    let readme = std::fs::read_to_string(repo.join("README.md")).expect("README.md");
    let commands = quick_start_commands(&readme);
    let bins = bin_dir();
    let target_debug =
        (bins.canonicalize().ok() != repo.join("target/debug").canonicalize().ok()).then_some(bins);
    let mut s = Session {
        repo,
        tmp: tempfile::tempdir().expect("tempdir"),
        env: BTreeMap::new(),
        target_debug,
        port: None,
        ts: None,
        cluster: None,
        transcript: String::new(),
    };
    for c in &commands {
        s.run(c);
    }
    assert!(
        s.cluster.is_some(),
        "the quick start keeps no cluster running"
    );
    s.stop_cluster();
    // Shown with --nocapture: what the quick start printed.
    println!("{}", s.transcript);
}

#[test]
fn the_extraction_reads_blocks_continuations_and_placeholders() {
    let readme = "# T\n\n## Quick start\n\ntext\n\n```sh\na \\\n    b\n# comment\n\nc\n```\n\n```xml\n<x/>\n```\n\n## Using a cluster\n\n```sh\nd <ts>\n```\n\n## Other\n\n```sh\nnot run\n```\n\n## Coming from Slurm\n\n| a | table |\n\n```sh\ne\n```\n";
    assert_eq!(quick_start_commands(readme), ["a b", "c", "d <ts>", "e"]);
    assert_eq!(
        placeholder("spindle -status application_<ts>_0001"),
        Some("<ts>")
    );
    assert_eq!(placeholder("echo a > b"), None);
    assert_eq!(placeholder("a < b; c <ts>"), Some("<ts>"));
    assert_eq!(placeholder("x <port> y"), Some("<port>"));
}

/// The minicluster's own default (`maximum-am-resource-percent` 0.5 where the configuration
/// leaves it unset) lets its 2 nodes run several applications at once: with YARN's 0.1, the
/// third of three applications waits in ACCEPTED for the AM limit while the cluster is idle.
/// An empty configuration directory, so that the default is what decides.
#[test]
fn a_two_node_minicluster_runs_several_applications_at_once() {
    use std::os::unix::process::CommandExt;
    let tmp = tempfile::tempdir().expect("tempdir");
    let conf = tmp.path().join("empty-conf");
    std::fs::create_dir_all(&conf).expect("conf dir");
    let spindle = bin_dir().join("spindle");
    let (stdout, stderr) = (tmp.path().join("mc.stdout"), tmp.path().join("mc.stderr"));
    let child = Command::new(&spindle)
        .args(["minicluster", "--nodes", "2", "--conf-dir"])
        .arg(&conf)
        .env("TMPDIR", tmp.path())
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout).expect("stdout"))
        .stderr(std::fs::File::create(&stderr).expect("stderr"))
        .spawn()
        .expect("spawn the minicluster");
    let mut mc = Background {
        child,
        stdout,
        stderr,
    };
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    let address = loop {
        let text = std::fs::read_to_string(&mc.stdout).unwrap_or_default();
        if let Some(a) = text
            .lines()
            .find_map(|l| l.strip_prefix("SPINDLE_RM_ADDRESS="))
        {
            break a.trim().to_string();
        }
        assert!(
            Instant::now() < deadline && matches!(mc.child.try_wait(), Ok(None)),
            "no address:\n{}",
            mc.output()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        mc.output().contains(
            "Minicluster default (the configuration leaves it unset): \
             yarn.scheduler.capacity.maximum-am-resource-percent=0.5"
        ),
        "{}",
        mc.output()
    );
    // Three clients, each an application whose one container sleeps.
    let mut clients: Vec<Child> = (0..3)
        .map(|i| {
            Command::new(&spindle)
                .args([
                    "distributed-shell",
                    "--num-containers",
                    "1",
                    "--container-resources",
                    "memory-mb=256,vcores=1",
                    "--timeout-ms",
                    "120000",
                    "--shell-command",
                    "sleep 120",
                ])
                .env("SPINDLE_RM_ADDRESS", &address)
                .env("SPINDLE_CONF_DIR", &conf)
                .process_group(0)
                .stdin(Stdio::null())
                .stdout(std::fs::File::create(tmp.path().join(format!("c{i}"))).expect("out"))
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn a client")
        })
        .collect();
    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    let apps = |state: &str| -> Vec<serde_json::Value> {
        http.get(format!(
            "http://{address}/ws/v1/cluster/apps?states={state}"
        ))
        .send()
        .and_then(|r| r.json::<serde_json::Value>())
        .ok()
        .and_then(|v| v["apps"]["app"].as_array().cloned())
        .unwrap_or_default()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let running = apps("RUNNING");
        if running.len() == 3 {
            break;
        }
        if Instant::now() > deadline {
            let accepted = apps("ACCEPTED");
            for c in &mut clients {
                stop_group(c, Duration::from_secs(5));
            }
            panic!(
                "{} of 3 applications RUNNING after 60 s; waiting: {:?}",
                running.len(),
                accepted
                    .iter()
                    .map(|a| a["diagnostics"].to_string())
                    .collect::<Vec<_>>()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    for c in &mut clients {
        stop_group(c, Duration::from_secs(5));
    }
    let status = mc.stop(Duration::from_secs(30));
    assert!(status.is_some_and(|s| s.success()), "{}", mc.output());
    assert!(work_dirs(tmp.path()).is_empty(), "{}", mc.output());
}
