//! System tests of a new user's first hour (issue 14) on the real binaries: the user's code
//! is shipped to the containers (`spindle train --src-dir` with a relative `python3
//! train.py`, the distributed shell's `--shell_script`, `--files` and `--archives`), staged
//! and removed with the application; a worker program that fails at once ends the
//! application after one gang attempt with its stderr in the diagnostic; a gang larger than
//! its queue's maximum is refused at once; an unshipped local program is warned about.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use spindle_system_tests::{
    app_id_in, bin, cs_xml, output_within, wait_until, Cluster, ClusterOpts,
};

const RUN_LIMIT: Duration = Duration::from_secs(120);

fn cluster(nodes: usize) -> Cluster {
    Cluster::start(ClusterOpts {
        nodes,
        ..Default::default()
    })
}

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The staging directory the client named ("Staged ... in DIR").
fn staged_dir(out: &str) -> PathBuf {
    let line = out
        .lines()
        .find(|l| l.starts_with("Staged "))
        .unwrap_or_else(|| panic!("no staging line in:\n{out}"));
    let (_, dir) = line.rsplit_once(" in ").expect("a directory");
    PathBuf::from(dir.trim())
}

/// Waits (bounded) for the staging directory to be gone: the AM removes it when it
/// unregisters, the client once more when it has seen the end.
fn assert_removed(dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while dir.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        !dir.exists(),
        "staging directory {} left behind",
        dir.display()
    );
}

#[test]
fn train_ships_the_src_dir_and_runs_a_relative_python_script_on_every_worker() {
    let c = cluster(2);
    let src = c.dir.path().join("project");
    std::fs::create_dir_all(src.join("lib")).unwrap();
    std::fs::write(src.join("lib/__init__.py"), "").unwrap();
    std::fs::write(src.join("lib/greet.py"), "WORD = 'shipped'\n").unwrap();
    std::fs::write(
        src.join("train.py"),
        "import os\n\
         from lib.greet import WORD\n\
         rank = os.environ['RANK']\n\
         out = os.path.join(os.environ['OUT'], 'rank-' + rank)\n\
         with open(out, 'w') as f:\n\
         \x20   f.write(WORD + ' ' + os.environ['WORLD_SIZE'] + ' ' + os.getcwd())\n\
         print('rank', rank, 'wrote', out)\n",
    )
    .unwrap();
    let out_dir = c.dir.path().join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let staging = c.dir.path().join("staging");
    let o = c.spindle_within(
        &[
            "train",
            "--workers",
            "2",
            "--worker-resources",
            "memory-mb=256,vcores=1",
            "--src-dir",
            src.to_str().unwrap(),
            "--staging-dir",
            staging.to_str().unwrap(),
            "--env",
            &format!("OUT={}", out_dir.display()),
            "--",
            "python3",
            "train.py",
        ],
        RUN_LIMIT,
    );
    let t = text(&o);
    if !o.status.success() {
        c.dump_logs();
    }
    assert!(o.status.success(), "{t}");
    let id = app_id_in(&t).expect("an application id");
    assert_eq!(c.app(&id)["finalStatus"], "SUCCEEDED", "{t}");
    for rank in 0..2 {
        let got = std::fs::read_to_string(out_dir.join(format!("rank-{rank}")))
            .unwrap_or_else(|e| panic!("rank {rank} wrote nothing ({e}):\n{t}"));
        assert!(got.starts_with("shipped 2 "), "rank {rank}: {got}");
        // It ran in its container's working directory, where the code was unpacked.
        assert!(
            got.contains(&id.replace("application_", "container_")),
            "{got}"
        );
    }
    let dir = staged_dir(&t);
    assert!(dir.starts_with(&staging), "{}", dir.display());
    assert!(dir.ends_with(&id), "{}", dir.display());
    assert_removed(&dir);
}

#[test]
fn a_worker_program_that_fails_at_once_ends_the_application_after_one_gang_attempt() {
    let c = cluster(2);
    let marker = "FIRST-USE-MARKER: ImportError: no module named torchh";
    let script = format!("echo '{marker}' >&2; echo second line >&2; exit 1");
    let o = c.spindle_within(
        &[
            "train",
            "--workers",
            "2",
            "--worker-resources",
            "memory-mb=256,vcores=1",
            "--max-restarts",
            "3",
            "--",
            "/bin/sh",
            "-c",
            &script,
        ],
        RUN_LIMIT,
    );
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    let id = app_id_in(&t).expect("an application id");
    let app = c.app(&id);
    assert_eq!(app["finalStatus"], "FAILED", "{t}");
    let diag = app["diagnostics"].as_str().unwrap_or_default().to_string();
    assert!(diag.contains(marker), "diagnostics: {diag}\n{t}");
    assert!(diag.contains("exit status 1"), "{diag}");
    assert!(diag.contains("not restarting"), "{diag}");
    // One gang attempt: no restart was tried.
    let am = c.am_stdout(&id);
    assert!(am.contains("gang workers attempt 1"), "{am}");
    assert!(!am.contains("gang workers attempt 2"), "{am}");
    assert!(!am.contains("restarting the gang (attempt"), "{am}");
    // And the CLI's status report carries it.
    let s = c.spindle_within(&["application", "-status", &id], Duration::from_secs(30));
    assert!(text(&s).contains(marker), "{}", text(&s));
}

#[test]
fn distributed_shell_runs_a_shipped_shell_script() {
    let c = cluster(1);
    let out_dir = c.dir.path().join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let script = c.dir.path().join("job.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"script ran with $1 in $(pwd)\" > {}/script-$1\n",
            out_dir.display()
        ),
    )
    .unwrap();
    let o = c.spindle_within(
        &[
            "distributed-shell",
            "-shell_script",
            script.to_str().unwrap(),
            "-shell_args",
            "alpha",
            "-num_containers",
            "1",
        ],
        RUN_LIMIT,
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let got = std::fs::read_to_string(out_dir.join("script-alpha"))
        .unwrap_or_else(|e| panic!("the script did not run ({e}):\n{t}"));
    assert!(got.starts_with("script ran with alpha in /"), "{got}");
    // Without a configured staging directory the script went through the RM's blob store
    // (the default since shipped files reach NMs without a shared file system); nothing was
    // staged on this machine.
    assert!(
        t.contains("Uploading ExecScript.sh (") && t.contains("to the ResourceManager"),
        "{t}"
    );
    assert!(!t.lines().any(|l| l.starts_with("Staged ")), "{t}");
    // The two ways of giving the command exclude each other, by name.
    let o = c.spindle_within(
        &[
            "distributed-shell",
            "-shell_script",
            script.to_str().unwrap(),
            "-shell_command",
            "true",
        ],
        Duration::from_secs(30),
    );
    assert!(!o.status.success());
    assert!(text(&o).contains("exclude each other"), "{}", text(&o));
}

#[test]
fn distributed_shell_ships_files_and_archives() {
    let c = cluster(1);
    let data = c.dir.path().join("data.txt");
    std::fs::write(&data, "file-content\n").unwrap();
    // An archive made with the system's tar, as a user would.
    let tree = c.dir.path().join("tree");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    std::fs::write(tree.join("sub/inner.txt"), "archive-content\n").unwrap();
    let archive = c.dir.path().join("bundle.tgz");
    let st = Command::new("tar")
        .args([
            "czf",
            archive.to_str().unwrap(),
            "-C",
            tree.to_str().unwrap(),
            ".",
        ])
        .status()
        .expect("tar");
    assert!(st.success());
    let result = c.dir.path().join("result.txt");
    let o = c.spindle_within(
        &[
            "distributed-shell",
            "-shell_command",
            &format!(
                "cat data.txt bundle.tgz/sub/inner.txt renamed.txt > {}",
                result.display()
            ),
            "--files",
            &format!("{},{}#renamed.txt", data.display(), data.display()),
            "--archives",
            archive.to_str().unwrap(),
            "--staging-dir",
            c.dir.path().join("staging").to_str().unwrap(),
        ],
        RUN_LIMIT,
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert_eq!(
        std::fs::read_to_string(&result).unwrap_or_default(),
        "file-content\narchive-content\nfile-content\n",
        "{t}"
    );
    assert_removed(&staged_dir(&t));
    // A format the NMs do not unpack is refused before anything is submitted.
    let zip = c.dir.path().join("code.zip");
    std::fs::write(&zip, "PK").unwrap();
    let o = c.spindle_within(
        &[
            "distributed-shell",
            "-shell_command",
            "true",
            "--archives",
            zip.to_str().unwrap(),
        ],
        Duration::from_secs(30),
    );
    assert!(!o.status.success());
    assert!(
        text(&o).contains("archive format not supported"),
        "{}",
        text(&o)
    );
    assert!(app_id_in(&text(&o)).is_none(), "{}", text(&o));
}

#[test]
fn an_unshipped_local_program_is_warned_about_before_submission() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("train.py"), "print(1)\n").unwrap();
    // Nothing answers at this address: the client stops after its warning.
    let mut cmd = Command::new(bin("spindle"));
    cmd.current_dir(d.path())
        .env("SPINDLE_CONF_DIR", d.path().join("no-conf"))
        .args([
            "train",
            "--rm-address",
            "127.0.0.1:9",
            "--workers",
            "2",
            "--worker-resources",
            "vcores=1",
            "--",
            "python3",
            "train.py",
        ]);
    let o = output_within(cmd, Duration::from_secs(60));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("warning: 'train.py'"), "{err}");
    assert!(
        err.contains("--src-dir .") && err.contains("--files train.py"),
        "{err}"
    );
}

/// Needs the RM to refuse an infeasible gang (issue 14, item 2: the allocate call carrying
/// it is answered 400, `Gang <id> of <n> can never be granted: <why>`).
#[test]
fn a_gang_larger_than_its_queue_maximum_is_refused_at_once() {
    let c = Cluster::start_with_files(
        ClusterOpts {
            nodes: 2,
            ..Default::default()
        },
        &[(
            "capacity-scheduler.xml",
            &cs_xml(&[
                ("root.queues", "a,b"),
                ("root.a.capacity", "50"),
                ("root.a.maximum-capacity", "50"),
                ("root.b.capacity", "50"),
            ]),
        )],
    );
    // Two nodes of 4096 MB; queue a may use at most 4096 MB: 6 workers of 1024 MB never fit
    // there (the cluster could hold them beside the AM).
    let mut cmd = Command::new(bin("spindle"));
    cmd.env("SPINDLE_RM_ADDRESS", &c.rm_addr)
        .env("SPINDLE_CONF_DIR", &c.conf_dir)
        .args([
            "train",
            "--queue",
            "a",
            "--workers",
            "6",
            "--worker-resources",
            "memory-mb=1024,vcores=1",
            "--gang-timeout-ms",
            "600000",
            "--timeout-ms",
            "90000",
            "--",
            "true",
        ]);
    let client = std::thread::spawn(move || output_within(cmd, Duration::from_secs(120)));
    // From the moment the AM registered (RUNNING) to the application's end.
    let id = wait_until("the application", Duration::from_secs(60), || {
        let (_, apps) = c.get("/ws/v1/cluster/apps");
        apps["apps"]["app"].as_array()?.first()?["id"]
            .as_str()
            .map(str::to_string)
    });
    let end = c.wait_app_state(
        &id,
        &["FINISHED", "FAILED", "KILLED"],
        Duration::from_secs(100),
    );
    let o = client.join().expect("client thread");
    let t = text(&o);
    let diag = end["diagnostics"].as_str().unwrap_or_default();
    assert_eq!(end["finalStatus"], "FAILED", "{end}\n{t}");
    assert!(diag.contains("refused"), "{diag}");
    assert!(
        diag.contains("root.a"),
        "the diagnostic names the queue: {diag}"
    );
    assert!(!o.status.success(), "{t}");
    // Refused by the AM's first allocate call, not after the gang timeout (600 s): from the
    // AM's launch to the application's end (AM start, registration, the refused allocate,
    // unregistration), the RM's own clock; one second asked, three allowed.
    let ms = |k: &str| end[k].as_u64().unwrap_or(0);
    let took = ms("finishedTime").saturating_sub(ms("launchTime"));
    assert!(ms("launchTime") > 0 && took < 3000, "took {took} ms: {end}");
    // The RM's refusal, quoted: the gang, its size and the reason.
    assert!(
        diag.contains("Gang") && diag.contains("can never be granted"),
        "{diag}\n{t}"
    );
}
