//! `spindle sls` as a user runs it: the binary with a generated trace, a bad trace, the
//! presets and `compare`.

use std::path::Path;
use std::process::{Command, Output};

fn spindle(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_spindle"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run spindle")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn generate_replay_and_compare_as_the_readme_says() {
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path();
    let o = spindle(
        d,
        &[
            "sls",
            "generate",
            "--jobs",
            "120",
            "--interarrival",
            "20",
            "--seed",
            "5",
            "--out",
            "t.csv",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    for p in ["fifo", "capacity"] {
        let o = spindle(
            d,
            &[
                "sls",
                "--trace",
                "t.csv",
                "--nodes",
                "2",
                "--gpus-per-node",
                "8",
                "--policy",
                p,
                "--out",
                p,
                "--check",
            ],
        );
        let t = text(&o);
        assert!(o.status.success(), "{t}");
        assert!(t.contains("Replaying 120 jobs"), "{t}");
        assert!(
            t.contains("backfill="),
            "the preset's settings are printed: {t}"
        );
        assert!(t.contains("120 of 120 jobs finished"), "{t}");
        for f in [
            "summary.json",
            "jobs.csv",
            "timeline.csv",
            "settings.txt",
            "gpus.svg",
            "queue.svg",
            "jct_cdf.svg",
        ] {
            assert!(d.join(p).join(f).is_file(), "{p}/{f}");
        }
        let s: serde_json::Value = serde_json::from_slice(
            &std::fs::read(d.join(p).join("summary.json")).expect("summary"),
        )
        .expect("json");
        assert_eq!(s["jobs"], 120);
        assert_eq!(s["gpu_seconds_used"], s["gpu_seconds_trace"]);
    }
    let o = spindle(d, &["sls", "compare", "fifo", "capacity", "--out", "cmp"]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("avg JCT (s)") && t.contains("capacity"), "{t}");
    assert!(d.join("cmp/jct_cdf.svg").is_file());
    let o = spindle(d, &["sls", "policies"]);
    assert!(text(&o).contains("fifo-fair"), "{}", text(&o));
}

#[test]
fn a_bad_trace_is_named_by_line_and_nothing_is_written() {
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path();
    std::fs::write(
        d.join("bad.csv"),
        "submit_time,num_gpus,duration,queue\n0,1,10,default\n1,64,10,default\n2,1,-5,default\n3,1,10,research\n",
    )
    .expect("write");
    let o = spindle(
        d,
        &["sls", "--trace", "bad.csv", "--nodes", "2", "--out", "out"],
    );
    let t = text(&o);
    assert!(!o.status.success());
    assert!(t.contains("line 4") && t.contains("negative"), "{t}");
    assert!(t.contains("nothing was replayed"), "{t}");
    assert!(
        !d.join("out").exists(),
        "nothing starts, nothing is written"
    );
    // The parse errors come first; once fixed, the cluster checks name their lines.
    std::fs::write(
        d.join("bad.csv"),
        "submit_time,num_gpus,duration,queue\n0,1,10,default\n1,64,10,default\n3,1,10,research\n",
    )
    .expect("write");
    let o = spindle(
        d,
        &["sls", "--trace", "bad.csv", "--nodes", "2", "--out", "out"],
    );
    let t = text(&o);
    assert!(!o.status.success());
    assert!(
        t.contains("line 3: the job needs 64 GPUs, more than the whole cluster's 16"),
        "{t}"
    );
    assert!(t.contains("line 4: unknown queue 'research'"), "{t}");
    assert!(!d.join("out").exists());
    let o = spindle(d, &["sls", "--trace", "bad.csv", "--policy", "sjf"]);
    assert!(text(&o).contains("unknown policy 'sjf'"), "{}", text(&o));
}
