//! Benchmark (not a test): shipping code through the RM on a cluster of hosts
//! (`spindle_system_tests::hosts`: the RM and one NodeManager each in its own network
//! namespace, joined by veth pairs to a bridge; the client on the bridge), against `curl` of
//! the same bytes over the same links, in the same run.
//!
//! `cargo build --release --workspace --bins && ./target/release/ship_bench --mb 500 --runs 3 --rss-mb 1024`
//!
//! Each run, with a fresh file of `--mb` MiB of random bytes (a new digest: really sent):
//! - upload: `spindle distributed-shell --detach --src-dir DIR` from the switch; the time
//!   from its start to its line "Uploading ... to the ResourceManager" (packing and hashing)
//!   and from that line to its exit (the upload, streamed, and the submission);
//! - localization: on the NM, from the worker container's "container accepted; localizing"
//!   to its "container process started" (download, digest check, unpacking), from the NM's
//!   JSON log (the distributed-shell AM ships nothing);
//! - `curl -o /dev/null` from the NM's host of the blob at the RM's download route
//!   (`GET /ws/v1/cluster/blobs/{digest}`, `?user.name=` as the CLI) and of the same file
//!   served by `python3 -m http.server` on the RM's host, the order alternating between runs;
//! - the same file shipped with `--files`: hashing, upload and localization without packing.
//!
//! Then `--rss-mb` MiB shipped with `--files`: the RM's and the client's peak RSS (`VmHWM`;
//! the client's sampled every 10 ms while it runs), against a 1 KiB file's. The big files
//! live on tmpfs (`/dev/shm`: the client's file and temporary directory, the RM's blob
//! store, the NM's local dir), so no disk is measured. Root only, as the harness.

#![forbid(unsafe_code)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use spindle_system_tests::hosts::{self, net, Hosts, HostsOpts};
use spindle_system_tests::{app_id_in, wait_until};

const MIB: u64 = 1 << 20;
const SHM: &str = "/dev/shm";
const LIMIT: Duration = Duration::from_secs(600);

fn arg(args: &[String], name: &str, default: u64) -> u64 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (mb, runs, rss_mb) = (
        arg(&args, "--mb", 500),
        arg(&args, "--runs", 3),
        arg(&args, "--rss-mb", 1024),
    );
    if let Err(why) = hosts::available() {
        eprintln!("ship_bench: a cluster of hosts cannot run here: {why}");
        std::process::exit(2);
    }
    let pairs = |p: &[(&str, &str)]| -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    // The big files on tmpfs (the client's and its temporary files, the RM's blobs, the
    // NM's local dir): memory rather than this machine's small disk, and no disk in the
    // figures.
    let work = tempfile::Builder::new()
        .prefix("ship-bench-")
        .tempdir_in(SHM)
        .expect("work dir");
    let blobs = work.path().join("blobs");
    let local = work.path().join("nm-local").display().to_string();
    let c = Hosts::start(HostsOpts {
        nms: 1,
        rm_props: pairs(&[
            ("spindle.resourcemanager.blob-store.retention-ms", "1000"),
            (
                "spindle.resourcemanager.blob-store.cleaner-interval-ms",
                "1000",
            ),
            (
                "spindle.resourcemanager.blob-store.dir",
                &blobs.display().to_string(),
            ),
        ]),
        nm_props: pairs(&[
            ("spindle.log.format", "json"),
            ("yarn.nodemanager.local-dirs", &local),
        ]),
        ..Default::default()
    });
    let blobs = blobs.join("sha256");
    let http = HttpServer::start(&c, &blobs);
    println!(
        "| run | --src-dir pack+hash s | --src-dir upload s | --src-dir localize s | --files hash s | --files upload s | --files localize s | curl RM route s | curl http.server s |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for run in 1..=runs {
        one_run(&c, &http, work.path(), run, mb);
    }
    if rss_mb > 0 {
        rss(&c, work.path(), rss_mb);
    }
}

/// What shipping one thing took: the client's packing and hashing (start to its
/// "Uploading" line), the upload (that line to its exit, the submission included), the
/// worker's localization on the NM; and the blob the RM stored.
struct Shipped {
    prep: Duration,
    upload: Duration,
    localize: Duration,
    blob: PathBuf,
    size: u64,
}

/// `spindle distributed-shell --detach <option> <path>` whose worker checks `data.bin`,
/// waited for.
fn ship(c: &Hosts, http: &HttpServer, option: &str, path: &Path, uploading: &str) -> Shipped {
    let path = path.display().to_string();
    let cli = timed_cli(
        c,
        &[
            "distributed-shell",
            "--detach",
            option,
            &path,
            "-shell_command",
            "test -s data.bin",
            "-num_containers",
            "1",
        ],
    );
    let prep = cli
        .at(uploading)
        .unwrap_or_else(|| panic!("no line '{uploading}':\n{}", cli.text()));
    let app = app_id_in(&cli.text()).expect("an application id");
    let a = c
        .rest()
        .wait_app_state(&app, &["FINISHED", "FAILED", "KILLED"], LIMIT);
    assert_eq!(a["finalStatus"], "SUCCEEDED", "{a}\n{}", c.logs());
    let blob = newest_blob(&http.dir);
    let localize = localize_times(c, &app)
        .into_iter()
        .find(|(id, _)| !id.ends_with("_000001"))
        .map(|(_, d)| d)
        .unwrap_or_else(|| panic!("the worker's localization in the NM's log"));
    Shipped {
        prep,
        upload: cli.total - prep,
        localize,
        size: std::fs::metadata(&blob).expect("blob").len(),
        blob,
    }
}

/// One run: a fresh file of `mb` MiB shipped as a `--src-dir` (packed), its blob fetched by
/// curl from the RM and from http.server, then the same file shipped with `--files`.
fn one_run(c: &Hosts, http: &HttpServer, work: &Path, run: u64, mb: u64) {
    let src = work.join(format!("src-{run}"));
    std::fs::create_dir_all(&src).expect("src dir");
    let data = src.join("data.bin");
    random_file(&data, mb * MIB);
    let s = ship(c, http, "--src-dir", &src, "Uploading the --src-dir");
    let hex = s.blob.file_name().unwrap().to_string_lossy().to_string();
    let rm_url = format!(
        "http://{}/ws/v1/cluster/blobs/sha256:{hex}?user.name={}",
        c.rm_addr,
        std::env::var("USER").unwrap_or_else(|_| "root".into())
    );
    let py_url = format!("{}/{hex}", http.base);
    let (rm, py) = if run % 2 == 1 {
        let rm = curl(c, &rm_url, s.size);
        (rm, curl(c, &py_url, s.size))
    } else {
        let py = curl(c, &py_url, s.size);
        (curl(c, &rm_url, s.size), py)
    };
    let f = ship(c, http, "--files", &data, "Uploading data.bin");
    let secs = |d: Duration| d.as_secs_f64();
    println!(
        "| {run} | {:.2} | {:.2} ({:.0} MB/s) | {:.2} | {:.2} | {:.2} ({:.0} MB/s) | {:.2} | {:.2} ({:.0} MB/s) | {:.2} ({:.0} MB/s) |",
        secs(s.prep),
        secs(s.upload),
        mbps(s.size, s.upload),
        secs(s.localize),
        secs(f.prep),
        secs(f.upload),
        mbps(f.size, f.upload),
        secs(f.localize),
        secs(rm),
        mbps(s.size, rm),
        secs(py),
        mbps(s.size, py)
    );
    let _ = std::fs::remove_dir_all(&src);
}

fn mbps(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / 1e6 / d.as_secs_f64()
}

/// `bytes` random bytes (from `/dev/urandom`) in `path`.
fn random_file(path: &Path, bytes: u64) {
    let mut from = std::fs::File::open("/dev/urandom")
        .expect("urandom")
        .take(bytes);
    let mut to = std::fs::File::create(path).expect("file");
    std::io::copy(&mut from, &mut to).expect("random bytes");
}

/// The most recently written blob of the RM's blob directory `dir`.
fn newest_blob(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .filter(|e| e.file_name().len() == 64)
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
        .map(|e| e.path())
        .expect("a blob")
}

/// A CLI run: each output line with the time since the start, the whole run's time, and the
/// client's peak RSS in KiB (its `VmHWM`, sampled while it ran).
struct CliRun {
    lines: Vec<(Duration, String)>,
    total: Duration,
    hwm_kib: u64,
}

impl CliRun {
    fn at(&self, needle: &str) -> Option<Duration> {
        self.lines
            .iter()
            .find(|(_, l)| l.contains(needle))
            .map(|(t, _)| *t)
    }
    fn text(&self) -> String {
        self.lines.iter().map(|(_, l)| format!("{l}\n")).collect()
    }
}

fn timed_cli(c: &Hosts, args: &[&str]) -> CliRun {
    let start = Instant::now();
    let mut child = c
        .spindle_command(args)
        .env("TMPDIR", SHM)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spindle");
    let (tx, rx) = mpsc::channel();
    let readers: Vec<_> = [
        Box::new(child.stdout.take().expect("stdout")) as Box<dyn Read + Send>,
        Box::new(child.stderr.take().expect("stderr")),
    ]
    .into_iter()
    .map(|r| {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for l in BufReader::new(r).lines().map_while(Result::ok) {
                let _ = tx.send((start.elapsed(), l));
            }
        })
    })
    .collect();
    drop(tx);
    let mut hwm_kib = 0;
    let status = loop {
        hwm_kib = hwm_kib.max(vm_hwm_kib(child.id() as i32).unwrap_or(0));
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(start.elapsed() < LIMIT, "the CLI ran past {LIMIT:?}");
        std::thread::sleep(Duration::from_millis(10));
    };
    let total = start.elapsed();
    for r in readers {
        let _ = r.join();
    }
    let mut lines: Vec<(Duration, String)> = rx.into_iter().collect();
    lines.sort_by_key(|(t, _)| *t);
    let run = CliRun {
        lines,
        total,
        hwm_kib,
    };
    assert!(status.success(), "{}", run.text());
    run
}

/// A process's peak resident set (`VmHWM`, KiB).
fn vm_hwm_kib(pid: i32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// Seconds since midnight (UTC) of an RFC 3339 timestamp's time of day.
fn time_of_day(ts: &str) -> Option<f64> {
    let t = ts.split('T').nth(1)?.trim_end_matches('Z');
    let t = t.split(['+', '-']).next()?;
    let mut parts = t.split(':');
    let h: f64 = parts.next()?.parse().ok()?;
    let m: f64 = parts.next()?.parse().ok()?;
    let s: f64 = parts.next()?.parse().ok()?;
    Some(h * 3600.0 + m * 60.0 + s)
}

/// For each container of `app` on the NM, its id and the time from "container accepted;
/// localizing" to "container process started", from the NM's JSON log.
fn localize_times(c: &Hosts, app: &str) -> Vec<(String, Duration)> {
    let log = c.nms[0].log_text();
    let events: Vec<serde_json::Value> = log
        .lines()
        .filter(|l| l.contains(app.trim_start_matches("application_")))
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let when = |v: &serde_json::Value| time_of_day(v["timestamp"].as_str().unwrap_or_default());
    let mut out = vec![];
    for x in c.rest().containers_of(app) {
        let id = x["containerId"].as_str().unwrap_or_default();
        let of = |msg: &str| {
            events
                .iter()
                .find(|v| v["message"] == msg && v.to_string().contains(id))
                .and_then(when)
        };
        if let (Some(a), Some(b)) = (
            of("container accepted; localizing"),
            of("container process started"),
        ) {
            out.push((id.to_string(), Duration::from_secs_f64((b - a).max(0.0))));
        }
    }
    out
}

/// `curl -o /dev/null url` from the NM's host: its time; panics unless `size` bytes came.
fn curl(c: &Hosts, url: &str, size: u64) -> Duration {
    let out = Command::new("nsenter")
        .arg(format!(
            "--net={}",
            net::netns_path(&c.nm_hosts[0].link.netns)
        ))
        .args([
            "--",
            "curl",
            "-sS",
            "-f",
            "-o",
            "/dev/null",
            "-w",
            "%{time_total} %{size_download}",
            url,
        ])
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "curl {url}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut f = text.split_whitespace();
    let secs: f64 = f.next().and_then(|s| s.parse().ok()).expect("time_total");
    let got: u64 = f
        .next()
        .and_then(|s| s.parse().ok())
        .expect("size_download");
    assert_eq!(got, size, "{url}");
    Duration::from_secs_f64(secs)
}

/// `python3 -m http.server` on the RM's host, serving the RM's blob directory `dir`.
struct HttpServer {
    child: std::process::Child,
    base: String,
    dir: PathBuf,
}

impl HttpServer {
    fn start(c: &Hosts, dir: &Path) -> HttpServer {
        std::fs::create_dir_all(dir).expect("blob dir");
        let ip = &c.rm_host.link.ip;
        let port = "18080";
        let child = Command::new("nsenter")
            .arg(format!("--net={}", net::netns_path(&c.rm_host.link.netns)))
            .args([
                "--",
                "python3",
                "-m",
                "http.server",
                port,
                "--bind",
                ip,
                "--directory",
            ])
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 -m http.server");
        let base = format!("http://{ip}:{port}");
        wait_until("http.server to listen", Duration::from_secs(20), || {
            Command::new("nsenter")
                .arg(format!(
                    "--net={}",
                    net::netns_path(&c.nm_hosts[0].link.netns)
                ))
                .args(["--", "curl", "-sf", "-o", "/dev/null", &base])
                .status()
                .ok()
                .filter(|s| s.success())
        });
        HttpServer {
            child,
            base,
            dir: dir.to_path_buf(),
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The RM's and the client's peak RSS shipping a 1 KiB file, then one of `mb` MiB.
fn rss(c: &Hosts, work: &Path, mb: u64) {
    println!();
    println!(
        "| shipped with --files | client VmHWM MiB | RM VmHWM MiB before | RM VmHWM MiB after |"
    );
    println!("| --- | --- | --- | --- |");
    for (name, bytes) in [("1 KiB", 1024), (&*format!("{mb} MiB"), mb * MIB)] {
        let file = work.join("rss.bin");
        random_file(&file, bytes);
        let comm = std::fs::read_to_string(format!("/proc/{}/comm", c.rm.pid()));
        assert_eq!(
            comm.ok().as_deref(),
            Some("resourcemanager\n"),
            "the RM's pid"
        );
        let before = vm_hwm_kib(c.rm.pid()).unwrap_or(0);
        let files = file.display().to_string();
        let cli = timed_cli(
            c,
            &[
                "distributed-shell",
                "--detach",
                "--files",
                &files,
                "-shell_command",
                "true",
                "-num_containers",
                "1",
            ],
        );
        let after = vm_hwm_kib(c.rm.pid()).unwrap_or(0);
        let app = app_id_in(&cli.text()).expect("an application id");
        c.rest()
            .wait_app_state(&app, &["FINISHED", "FAILED", "KILLED"], LIMIT);
        let _ = std::fs::remove_file(&file);
        println!(
            "| {name} | {:.1} | {:.1} | {:.1} |",
            cli.hwm_kib as f64 / 1024.0,
            before as f64 / 1024.0,
            after as f64 / 1024.0
        );
    }
}
