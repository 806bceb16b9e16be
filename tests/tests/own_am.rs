//! System test of "Your own application master" (docs/sdk.md) on the real binaries: the
//! repository's example AM (`examples/am`: incremental one-GPU asks, a release of a running
//! container, a two-member gang, preemption answered with an acknowledgement) is submitted
//! with `spindle submit --am-file` on one NM of 4 fake GPUs, shipped through the RM's blob
//! store like `--files`. The client follows it to SUCCEEDED (exit 0), and `spindle logs`
//! shows the AM's output and its trials'. The second runs docs/sdk.md's "Trying preemption
//! locally" as written (the minicluster command, `spindle submit`, `spindle train`): the
//! example AM's trials are preempted, it answers, runs them again and succeeds; the
//! minicluster gets SIGTERM by pid at the end (its `Daemon` guard). The daemons are stopped by pid (the `Cluster`'s
//! drop) and the temp dirs removed.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use spindle_system_tests::{
    app_id_in, bin, fake_gpus, output_within, spawn_command, wait_until, Cluster, ClusterOpts,
};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn the_example_am_submitted_with_spindle_submit_succeeds_and_logs_its_work() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let gpus = fake_gpus(scratch.path(), 4);
    let c = Cluster::start(ClusterOpts::with_fake_gpus(1, &gpus));
    c.wait_nodes_running(1);
    let am = bin("spindle-example-am");
    let out = c.spindle_within(
        &[
            "submit",
            "--am-file",
            &am.display().to_string(),
            "--env",
            "TRIALS=3",
            "--appname",
            "example-am",
            "--time",
            "10",
            "--no-follow",
        ],
        Duration::from_secs(240),
    );
    let stdout = text(&out.stdout);
    let app = app_id_in(&stdout).unwrap_or_default();
    if !out.status.success() {
        eprintln!("---- AM stdout ----\n{}", c.am_stdout(&app));
        c.dump_logs();
    }
    assert!(
        out.status.success(),
        "spindle submit: {stdout}\n{}",
        text(&out.stderr)
    );
    assert!(
        stdout.contains("Submitted application application_"),
        "{stdout}"
    );
    assert!(stdout.contains("SUCCEEDED"), "{stdout}");
    assert_eq!(c.app(&app)["finalStatus"], "SUCCEEDED");
    assert_eq!(c.app(&app)["applicationType"], "SPINDLE");

    let logs = c.spindle_within(&["logs", "-applicationId", &app], Duration::from_secs(60));
    assert!(logs.status.success(), "{}", text(&logs.stderr));
    let logs = text(&logs.stdout);
    for line in [
        "trial 0 done",
        "trial 2 done",
        "released container",
        "gang pair granted: 2 members",
        "gang pair done",
        "example AM finished: SUCCEEDED",
        // The trials' own output, from their containers' logs.
        "trial 1 on GPU",
        "gang member container_",
    ] {
        assert!(logs.contains(line), "'{line}' not in the logs:\n{logs}");
    }
    // A released container still completes: -106 once it ran, -100 if it had not started.
    assert!(
        logs.contains("ended with -106") || logs.contains("ended with -100"),
        "{logs}"
    );
}

/// The commands of docs/sdk.md's "Trying preemption locally" (its ```sh blocks, a line
/// ending in `\` continued on the next).
fn preemption_recipe() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let doc = std::fs::read_to_string(root.join("docs/sdk.md")).expect("docs/sdk.md");
    let start = doc
        .find("### Trying preemption locally")
        .expect("docs/sdk.md has the preemption recipe");
    let section = &doc[start..];
    let section = &section[..section[4..].find("\n#").map_or(section.len(), |e| e + 4)];
    let mut commands = Vec::new();
    let mut in_sh = false;
    let mut current = String::new();
    for line in section.lines() {
        match (in_sh, line.trim()) {
            (false, "```sh") => in_sh = true,
            (true, "```") => in_sh = false,
            (true, l) => match l.strip_suffix('\\') {
                Some(part) => current.push_str(part),
                None => {
                    current.push_str(l);
                    commands.push(std::mem::take(&mut current));
                }
            },
            _ => {}
        }
    }
    commands
}

/// The recipe's words, its `spindle` and example AM the ones this build made.
fn words(command: &str) -> Vec<String> {
    command
        .split_whitespace()
        .map(|w| match w {
            "target/debug/spindle-example-am" => bin("spindle-example-am").display().to_string(),
            w => w.to_string(),
        })
        .collect()
}

#[test]
fn the_documented_preemption_recipe_preempts_the_example_am_and_it_recovers() {
    let recipe = preemption_recipe();
    assert_eq!(recipe.len(), 3, "minicluster, submit, train: {recipe:?}");
    let scratch = tempfile::tempdir().expect("tempdir");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut cluster_cmd = Command::new(bin("spindle"));
    let cluster_words = words(&recipe[0]);
    assert_eq!(cluster_words[..2], ["spindle", "minicluster"]);
    cluster_cmd
        .args(&cluster_words[1..])
        .current_dir(&root)
        .env("TMPDIR", scratch.path())
        .env_remove("SPINDLE_RM_ADDRESS");
    let log = scratch.path().join("minicluster.log");
    let cluster = spawn_command("minicluster", cluster_cmd, log.clone());
    let address = wait_until("the minicluster's address", Duration::from_secs(90), || {
        std::fs::read_to_string(&log)
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("SPINDLE_RM_ADDRESS="))
            .map(str::to_string)
    });
    let run = |command: &str| {
        let w = words(command);
        assert_eq!(w[0], "spindle", "{command}");
        let mut cmd = Command::new(bin("spindle"));
        cmd.args(&w[1..])
            .current_dir(&root)
            .env("SPINDLE_RM_ADDRESS", &address);
        let out = output_within(cmd, Duration::from_secs(180));
        assert!(
            out.status.success(),
            "{command}: {}\n{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        text(&out.stdout)
    };
    let app = app_id_in(&run(&recipe[1])).expect("the example AM's id");
    let rest = reqwest::blocking::Client::new();
    let app_view = || -> serde_json::Value {
        rest.get(format!("http://{address}/ws/v1/cluster/apps/{app}"))
            .send()
            .and_then(|r| r.json())
            .map(|v: serde_json::Value| v["app"].clone())
            .unwrap_or_default()
    };
    wait_until(
        "the example AM to hold 4 GPUs",
        Duration::from_secs(90),
        || (app_view()["allocatedGpus"].as_i64() == Some(4)).then_some(()),
    );
    run(&recipe[2]);
    let end = wait_until("the example AM to end", Duration::from_secs(180), || {
        let v = app_view();
        let s = v["finalStatus"].as_str().unwrap_or("UNDEFINED").to_string();
        (s != "UNDEFINED").then_some(s)
    });
    let logs = run(&format!("spindle logs -applicationId {app}"));
    assert_eq!(end, "SUCCEEDED", "{logs}");
    for line in [
        "preemption notice for container_",
        "was preempted: it runs again",
        "example AM finished: SUCCEEDED",
    ] {
        assert!(logs.contains(line), "'{line}' not in the logs:\n{logs}");
    }
    drop(cluster);
}
