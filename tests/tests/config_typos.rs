//! System test: a typo in `capacity-scheduler.xml` reaches the typist, on the real
//! binaries. `rmadmin -refreshQueues` of a file with `root.b.maximum-capacty` is refused
//! (exit 255) naming the file, the line and `maximum-capacity`, and the queues stay as they
//! were (`queue -list` before and after); so is a property of a queue no `.queues` list
//! declares (`root.bb.maximum-capacity`, naming root.b); the corrected file is applied and the command
//! prints what changed (`old -> new`). Every process is killed by pid when the test ends
//! (the `Cluster`'s drop) and the temp dir removed.

use spindle_system_tests::{cs_xml, Cluster, ClusterOpts};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn queues(b_max_key: &str, b_max: &str) -> String {
    cs_xml(&[
        ("root.queues", "a,b"),
        ("root.a.capacity", "70"),
        ("root.b.capacity", "30"),
        (b_max_key, b_max),
    ])
}

#[test]
fn a_misspelt_queue_property_is_refused_and_a_good_refresh_says_what_changed() {
    let c = Cluster::start_with_files(
        ClusterOpts {
            nodes: 1,
            ..Default::default()
        },
        &[(
            "capacity-scheduler.xml",
            &queues("root.b.maximum-capacity", "100"),
        )],
    );
    let file = c.conf_dir.join("capacity-scheduler.xml");
    let list = || text(&c.spindle(&["queue", "-list"]).stdout);
    let before = list();

    std::fs::write(&file, queues("root.b.maximum-capacty", "50")).expect("edit");
    let out = c.spindle_as("admin", &["rmadmin", "-refreshQueues"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(255), "{err}");
    let want = format!(
        "{}:15: unknown key 'yarn.scheduler.capacity.root.b.maximum-capacty'; did you mean 'yarn.scheduler.capacity.root.b.maximum-capacity'?",
        file.display()
    );
    assert!(err.contains(&want), "{err}");
    assert!(err.contains("nothing applied"), "{err}");
    assert_eq!(
        list(),
        before,
        "the queues changed though the refresh was refused"
    );

    // A property of a queue no `.queues` list declares: refused too, naming the queue.
    std::fs::write(&file, queues("root.bb.maximum-capacity", "50")).expect("edit");
    let out = c.spindle_as("admin", &["rmadmin", "-refreshQueues"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(255), "{err}");
    assert!(
        err.contains("names queue root.bb, which no '.queues' list declares; did you mean root.b?"),
        "{err}"
    );
    assert_eq!(
        list(),
        before,
        "the queues changed though the refresh was refused"
    );

    std::fs::write(&file, queues("root.b.maximum-capacity", "50")).expect("edit");
    let out = c.spindle_as("admin", &["rmadmin", "-refreshQueues"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        stdout,
        "Queues refreshed (1 property changed):\n  root.b.maximum-capacity: 100 -> 50\n"
    );
    assert_ne!(list(), before);
    // Nothing to change: it says so.
    let out = c.spindle_as("admin", &["rmadmin", "-refreshQueues"]);
    assert_eq!(
        text(&out.stdout),
        "Queues refreshed: no property changed.\n"
    );
}
