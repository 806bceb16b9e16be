//! System test: configuration mistakes are named, on the real binaries. A misspelt key in
//! `yarn-site.xml` and in `capacity-scheduler.xml` is logged by the RM and the NM at start
//! with its file, line and the closest known key (other components' keys are not); `spindle
//! schedulerconf` refuses a misspelt queue property before sending and applies a good one; a
//! refresh of an edited file with a negative capacity is refused quoting the value as written,
//! and the refusal is in the RM's log with who asked; an RM whose file has an unclosed
//! `<property>` refuses to start, naming the line it opened on. Every process is killed by pid
//! when the test ends (the `Cluster`'s drop) and the temp dir removed.

use std::process::Command;
use std::time::Duration;

use spindle_system_tests::{bin, cs_xml, output_within, wait_until, Cluster, ClusterOpts};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn config_mistakes_are_named() {
    let site = "<?xml version=\"1.0\"?>\n<configuration>\n  <property>\n    <name>fs.defaultFS</name>\n    <value>hdfs://nn:8020</value>\n  </property>\n  <property>\n    <name>yarn.nodemanager.resource.memory_mb</name>\n    <value>2048</value>\n  </property>\n</configuration>\n";
    let cs = cs_xml(&[
        ("root.queues", "a,b"),
        ("root.a.capacity", "70"),
        ("root.b.capacity", "30"),
        ("root.b.maximum-capacty", "50"),
    ]);
    let c = Cluster::start_with_files(
        ClusterOpts {
            nodes: 1,
            ..Default::default()
        },
        &[("yarn-site.xml", site), ("capacity-scheduler.xml", &cs)],
    );
    let site_file = c.conf_dir.join("yarn-site.xml").display().to_string();
    let cs_file = c
        .conf_dir
        .join("capacity-scheduler.xml")
        .display()
        .to_string();
    let typo = format!(
        "{site_file}:7: unknown key 'yarn.nodemanager.resource.memory_mb'; did you mean 'yarn.nodemanager.resource.memory-mb'?"
    );
    let cs_typo = format!(
        "{cs_file}:15: unknown key 'yarn.scheduler.capacity.root.b.maximum-capacty'; did you mean 'yarn.scheduler.capacity.root.b.maximum-capacity'?"
    );
    // Both daemons, at start; the RM's log is complete once it listens, the NM's once it ran.
    let rm_log = c.rm.log_text();
    assert!(rm_log.contains(&typo), "{rm_log}");
    assert!(rm_log.contains(&cs_typo), "{rm_log}");
    assert!(!rm_log.contains("fs.defaultFS"), "{rm_log}");
    wait_until("the NM's warning", Duration::from_secs(10), || {
        c.nms[0].log_text().contains(&typo).then_some(())
    });

    // schedulerconf: the misspelt property is refused before anything is sent ...
    let out = c.spindle_as(
        "admin",
        &["schedulerconf", "-update", "root.b:maximum-capacty=50"],
    );
    assert_eq!(out.status.code(), Some(255), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(
            "Unknown property 'maximum-capacty' for queue root.b; did you mean 'maximum-capacity'?"
        ),
        "{}",
        text(&out.stderr)
    );
    // ... the right one is applied, says what changed and warns of a key it stores without
    // reading; it shows in -getconf.
    let out = c.spindle_as(
        "admin",
        &[
            "schedulerconf",
            "-update",
            "root.b:maximum-capacity=50,reservable=true",
        ],
    );
    let b_max = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        b_max.starts_with("Configuration changed successfully.\n"),
        "{b_max}"
    );
    assert!(
        b_max.contains("  root.b.maximum-capacity: added (50)"),
        "{b_max}"
    );
    assert!(
        b_max.contains("  root.b.reservable: added (true)"),
        "{b_max}"
    );
    assert!(
        text(&out.stderr)
            .contains("warning: 'root.b.reservable' is a YARN property Spindle does not read"),
        "{}",
        text(&out.stderr)
    );
    let out = c.spindle_as("admin", &["schedulerconf", "-getconf"]);
    assert!(
        text(&out.stdout).contains(
            "<name>yarn.scheduler.capacity.root.b.maximum-capacity</name>\n    <value>50</value>"
        ),
        "{}",
        text(&out.stdout)
    );

    // A refresh of an edited file with a negative capacity: refused, the value as written,
    // and the refusal audited in the RM's log with who asked.
    std::fs::write(
        c.conf_dir.join("capacity-scheduler.xml"),
        cs_xml(&[
            ("root.queues", "a,b"),
            ("root.a.capacity", "-60"),
            ("root.b.capacity", "30"),
        ]),
    )
    .expect("edit");
    let out = c.spindle_as("carol", &["rmadmin", "-refreshQueues"]);
    assert_eq!(out.status.code(), Some(255), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("Illegal capacity of -60 for queue root.a"),
        "{}",
        text(&out.stderr)
    );
    let audit = wait_until("the audit line", Duration::from_secs(10), || {
        c.rm.log_text()
            .lines()
            .find(|l| l.contains("USER=carol") && l.contains("RESULT=FAILURE"))
            .map(str::to_string)
    });
    for part in [
        "\tIP=127.0.0.1\tOPERATION=refreshQueues\tTARGET=AdminService\tRESULT=FAILURE\tDESCRIPTION=Failed to re-init queues : ",
        "Illegal capacity of -60 for queue root.a",
    ] {
        assert!(audit.contains(part), "{part}\n{audit}");
    }
}

#[test]
fn an_unclosed_property_stops_the_rm_naming_the_line_it_opened_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let conf = dir.path().join("conf");
    std::fs::create_dir_all(&conf).expect("conf dir");
    std::fs::write(
        conf.join("yarn-site.xml"),
        "<configuration>\n  <property>\n    <name>a</name>\n    <value>1</value>\n  <property>\n    <name>b</name>\n    <value>2</value>\n  </property>\n</configuration>\n",
    )
    .expect("write");
    let mut cmd = Command::new(bin("resourcemanager"));
    cmd.arg("--conf-dir").arg(&conf);
    let out = output_within(cmd, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr).trim(),
        format!(
            "error: {}:5: <property> opened on line 2 is not closed before the next <property>",
            conf.join("yarn-site.xml").display()
        )
    );
}
