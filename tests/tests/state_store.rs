//! The RM's state store at the edges of its life, on the real binaries: submissions made
//! before any NodeManager has registered are accepted and run once nodes arrive; a zero-byte
//! or damaged store file is refused at start with one line naming the problem and left byte
//! for byte as it was; `--format-state-store` is the explicit way to start fresh.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use spindle_system_tests::{app_id_in, bin, output_within, Cluster, ClusterOpts};

const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn submissions_before_any_nodemanager_are_accepted_and_run_once_nodes_arrive() {
    let mut c = Cluster::start(ClusterOpts {
        nodes: 0,
        ..Default::default()
    });
    let mut apps = Vec::new();
    for i in 0..3 {
        let out = c.spindle_within(
            &[
                "distributed-shell",
                "--detach",
                "--num-containers",
                "1",
                "--shell-command",
                &format!("echo early {i}"),
            ],
            LIMIT,
        );
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "submission {i}: {text}");
        apps.push(app_id_in(&text).unwrap_or_else(|| panic!("no app id in: {text}")));
    }
    // Nothing to run on yet: every one waits, none is refused.
    std::thread::sleep(Duration::from_secs(1));
    for id in &apps {
        let a = c.app(id);
        assert_eq!(a["state"], "ACCEPTED", "{id} before any node: {a}");
    }
    c.add_nm(&[]);
    c.wait_nodes_running(1);
    for id in &apps {
        let a = c.wait_app_state(id, &["FINISHED", "FAILED", "KILLED"], LIMIT);
        if a["finalStatus"] != "SUCCEEDED" {
            c.dump_logs();
        }
        assert_eq!(a["finalStatus"], "SUCCEEDED", "{id}: {a}");
    }
}

/// Starts the RM on `store`; it must exit with a failure within the limit. Returns its
/// output.
fn rm_refuses(c: &Cluster, store: &Path) -> String {
    let mut cmd = Command::new(bin("resourcemanager"));
    cmd.args([
        "--conf-dir",
        &c.conf_dir.display().to_string(),
        "-D",
        "yarn.resourcemanager.webapp.address=127.0.0.1:0",
        "-D",
        &format!(
            "spindle.resourcemanager.state-store.path={}",
            store.display()
        ),
    ]);
    let out = output_within(cmd, Duration::from_secs(30));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !out.status.success(),
        "the RM started on {}: {text}",
        store.display()
    );
    text
}

#[test]
fn a_zero_byte_and_a_damaged_store_are_refused_and_left_byte_identical() {
    let c = Cluster::start(ClusterOpts {
        nodes: 1,
        ..Default::default()
    });
    let dir = tempfile::tempdir().expect("tempdir");

    // Zero bytes: never taken for a new store.
    let empty = dir.path().join("empty.sqlite");
    std::fs::write(&empty, b"").expect("write");
    let text = rm_refuses(&c, &empty);
    let line = text
        .lines()
        .find(|l| l.contains("error:"))
        .unwrap_or_else(|| panic!("no error line: {text}"));
    assert!(line.contains("is empty (0 bytes)"), "{line}");
    assert!(line.contains("--format-state-store"), "{line}");
    assert_eq!(std::fs::read(&empty).expect("read").len(), 0);

    // A store the RM wrote, then damaged: its pages overwritten in the middle.
    let store = c.dir.path().join("rm").join("rmstore.sqlite");
    let out = c.spindle_within(
        &[
            "distributed-shell",
            "--num-containers",
            "1",
            "--shell-command",
            "true",
        ],
        LIMIT,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let copy = dir.path().join("damaged.sqlite");
    // The WAL is folded into the file when the RM stops; a copy taken while it runs may
    // not have it, so stop it first.
    let mut c = c;
    c.rm.signal(nix::sys::signal::Signal::SIGTERM);
    spindle_system_tests::wait_until("the RM to stop", Duration::from_secs(15), || {
        (!c.rm.is_running()).then_some(())
    });
    let mut bytes = std::fs::read(&store).expect("read store");
    assert!(bytes.len() >= 3 * 4096, "{} bytes", bytes.len());
    for b in &mut bytes[4096 + 8..2 * 4096] {
        *b = 0x5a;
    }
    std::fs::write(&copy, &bytes).expect("write copy");
    let text = rm_refuses(&c, &copy);
    assert!(
        text.contains("damaged") || text.contains("not a Spindle"),
        "{text}"
    );
    assert_eq!(
        std::fs::read(&copy).expect("read"),
        bytes,
        "left byte-identical"
    );

    // Somebody's text file.
    let notes = dir.path().join("notes.sqlite");
    std::fs::write(&notes, "not a database\n").expect("write");
    let text = rm_refuses(&c, &notes);
    assert!(text.contains("not an SQLite database"), "{text}");
    assert_eq!(
        std::fs::read_to_string(&notes).expect("read"),
        "not a database\n"
    );

    // The explicit way to start fresh.
    let mut cmd = Command::new(bin("resourcemanager"));
    cmd.args([
        "--conf-dir",
        &c.conf_dir.display().to_string(),
        "-D",
        &format!(
            "spindle.resourcemanager.state-store.path={}",
            empty.display()
        ),
        "--format-state-store",
    ]);
    let out = output_within(cmd, Duration::from_secs(30));
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("Formatted the state store"), "{stdout}");
    assert!(!empty.exists());
}
