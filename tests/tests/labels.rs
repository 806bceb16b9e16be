//! System test of node labels, node attributes and placement constraints on the real
//! binaries, through the CLI and REST.
//!
//! Four NMs with 2 fake GPUs each: nm0 (H100) and nm1 (A100) are put in the exclusive
//! partition `train`, nm3 in the non-exclusive `ib`, nm2 stays in the default partition; the
//! GPU model is the NM's own `nm.yarn.io/gpu-model` attribute (from the fake `nvidia-smi`),
//! and an operator sets `rm.yarn.io/tier` centrally. A `spindle train` job constrained to
//! `train` and to the H100 model runs only on nm0; a distributed shell with the placement spec
//! `zk=2,NOTIN,NODE,zk` puts one container on each of the two nodes open to the default
//! partition (nm2, and nm3 lent by `ib`), and a spec that needs more nodes than there are is
//! refused with its reason. After an RM restart the labels, the node mappings and the central
//! attribute are all still there.
//!
//! Workers write their pids; the test kills them by pid when it ends, and the cluster's
//! daemons and directories go with the `Cluster`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use spindle_system_tests::{app_id_in, cs_xml, fake_gpus_in, wait_until, Cluster, ClusterOpts};

const GPU: &str = "yarn.io/gpu";
const H100: &str = "NVIDIA H100 80GB HBM3";
const A100: &str = "NVIDIA A100-SXM4-80GB";
const LIMIT: Duration = Duration::from_secs(90);

/// A directory with the fake `nvidia-smi` reporting `count` GPUs of `model`.
fn gpus(dir: &Path, name: &str, count: u32, model: &str) -> PathBuf {
    fake_gpus_in(
        dir,
        name,
        &format!(
            "FAKE_GPU_COUNT={count}
FAKE_GPU_MODEL={model}
"
        ),
    )
}

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Kills every pid written under `dir` when dropped.
struct KillPids(PathBuf);

impl Drop for KillPids {
    fn drop(&mut self) {
        for e in std::fs::read_dir(&self.0).into_iter().flatten().flatten() {
            if let Some(pid) = std::fs::read_to_string(e.path())
                .ok()
                .and_then(|s| s.trim().parse::<i32>().ok())
            {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

#[test]
fn labels_attributes_and_constraints_place_work_and_survive_a_restart() {
    let scratch = tempfile::tempdir().expect("scratch");
    let pids = scratch.path().join("pids");
    let seen = scratch.path().join("seen");
    std::fs::create_dir_all(&pids).expect("pids");
    std::fs::create_dir_all(&seen).expect("seen");
    let _kill = KillPids(pids.clone());
    let queues = cs_xml(&[
        (
            "resource-calculator",
            "org.apache.hadoop.yarn.util.resource.DominantResourceCalculator",
        ),
        ("maximum-am-resource-percent", "0.5"),
        ("root.queues", "default"),
        ("root.default.capacity", "100"),
        ("root.default.user-limit-factor", "-1"),
        ("root.default.accessible-node-labels", "*"),
        ("root.default.accessible-node-labels.train.capacity", "100"),
        ("root.default.accessible-node-labels.ib.capacity", "100"),
    ]);
    let prop = |k: &str, v: &str| (k.to_string(), v.to_string());
    let mut c = Cluster::start_with_files(
        ClusterOpts {
            nodes: 0,
            rm_props: vec![prop("yarn.resource-types", GPU)],
            nm_props: vec![],
        },
        &[("capacity-scheduler.xml", &queues)],
    );
    for (i, model) in [H100, A100, H100, H100].iter().enumerate() {
        let d = gpus(scratch.path(), &format!("gpus{i}"), 2, model);
        c.add_nm(&[
            prop("yarn.nodemanager.resource-plugins", GPU),
            prop(
                "yarn.nodemanager.resource-plugins.gpu.path-to-discovery-executables",
                &d.display().to_string(),
            ),
        ]);
    }
    c.wait_nodes_running(4);
    let nm = c.nm_addrs.clone();

    // Labels and mappings through the CLI.
    let o = c.spindle(&[
        "rmadmin",
        "-addToClusterNodeLabels",
        "train(exclusive=true),ib(exclusive=false)",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let mapping = format!("{}=train {}=train {}=ib", nm[0], nm[1], nm[3]);
    let o = c.spindle(&[
        "rmadmin",
        "-replaceLabelsOnNode",
        &mapping,
        "-failOnUnknownNodes",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    // A mistake is named and changes nothing.
    let o = c.spindle(&[
        "rmadmin",
        "-replaceLabelsOnNode",
        &format!("{}=nope", nm[2]),
    ]);
    assert!(!o.status.success());
    assert!(text(&o).contains("nope"), "{}", text(&o));
    let o = c.spindle(&["nodeattributes", "-add", "127.0.0.1:tier=gold"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = c.spindle(&["nodeattributes", "-add", "127.0.0.1:nm.yarn.io/x=1"]);
    assert!(
        !o.status.success(),
        "nm.yarn.io/ is the NMs' own: {}",
        text(&o)
    );
    let (_, m) = c.get("/ws/v1/cluster/get-node-to-labels");
    let labelled = |id: &str| {
        m["nodeToLabels"][id]["nodeLabelInfo"][0]["name"]
            .as_str()
            .map(str::to_string)
    };
    assert_eq!(labelled(&nm[0]).as_deref(), Some("train"), "{m}");
    assert_eq!(labelled(&nm[3]).as_deref(), Some("ib"), "{m}");
    assert_eq!(labelled(&nm[2]), None, "{m}");

    // A training job in `train`, on H100s only: nm0.
    let worker = format!(
        "echo $$ > {pids}/$$.pid; echo $NM_HTTP_PORT > {seen}/train-$RANK; sleep 1",
        pids = pids.display(),
        seen = seen.display()
    );
    let o = c.spindle_within(
        &[
            "train",
            "--workers",
            "2",
            "--worker-resources",
            "yarn.io/gpu=1,vcores=1,memory-mb=256",
            "--node-label-expression",
            "train",
            "--gpu-model",
            H100,
            "--timeout-ms",
            "60000",
            "--",
            "sh",
            "-c",
            &worker,
        ],
        LIMIT,
    );
    assert!(o.status.success(), "{}", text(&o));
    let port0 = nm[0].rsplit(':').next().expect("port").to_string();
    for rank in 0..2 {
        let p = std::fs::read_to_string(seen.join(format!("train-{rank}"))).expect("ran");
        assert_eq!(p.trim(), port0, "rank {rank} ran on nm0 (train, H100)");
    }

    // A distributed shell that spreads: one container per node.
    let shell = format!(
        "echo $$ > {pids}/$$.pid; echo $NM_HTTP_PORT > {seen}/zk-$CONTAINER_ID; sleep 1",
        pids = pids.display(),
        seen = seen.display()
    );
    let o = c.spindle_within(
        &[
            "distributed-shell",
            "-shell_command",
            &shell,
            "-placement_spec",
            "zk=2,NOTIN,NODE,zk",
            "-timeout_ms",
            "60000",
        ],
        LIMIT,
    );
    assert!(o.status.success(), "{}", text(&o));
    let ports: Vec<String> = std::fs::read_dir(&seen)
        .expect("seen")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("zk-"))
        .map(|e| {
            std::fs::read_to_string(e.path())
                .expect("port")
                .trim()
                .to_string()
        })
        .collect();
    assert_eq!(ports.len(), 2, "{ports:?}");
    let distinct: BTreeSet<&String> = ports.iter().collect();
    assert_eq!(distinct.len(), 2, "one container per node: {ports:?}");
    let port1 = nm[1].rsplit(':').next().expect("port").to_string();
    assert!(
        !ports.contains(&port0) && !ports.contains(&port1),
        "nothing of the default partition in exclusive `train`: {ports:?}"
    );
    // More anti-affine containers than nodes: refused, with the reason.
    let o = c.spindle_within(
        &[
            "distributed-shell",
            "-shell_command",
            "true",
            "-placement_spec",
            "zk=3,NOTIN,NODE,zk",
            "-timeout_ms",
            "30000",
        ],
        LIMIT,
    );
    assert!(!o.status.success(), "{}", text(&o));
    if let Some(app) = app_id_in(&text(&o)) {
        let diag = c.app(&app)["diagnostics"].to_string();
        let out = format!("{}{diag}", text(&o));
        assert!(out.contains("only 2 nodes"), "{out}");
    }

    // Restart the RM: labels, mappings and the central attribute come back.
    c.restart_rm();
    c.wait_nodes_running(4);
    let o = c.spindle(&["cluster", "--list-node-labels"]);
    let out = text(&o);
    assert!(out.contains("train") && out.contains("ib"), "{out}");
    wait_until(
        "the mappings after the restart",
        Duration::from_secs(20),
        || {
            let (_, m) = c.get("/ws/v1/cluster/get-node-to-labels");
            (m["nodeToLabels"][nm[0].as_str()]["nodeLabelInfo"][0]["name"] == "train"
                && m["nodeToLabels"][nm[3].as_str()]["nodeLabelInfo"][0]["name"] == "ib")
                .then_some(())
        },
    );
    let o = c.spindle(&["nodeattributes", "-list"]);
    assert!(text(&o).contains("tier"), "{}", text(&o));
    let (_, nodes) = c.get("/ws/v1/cluster/nodes");
    let attrs = nodes.to_string();
    assert!(
        attrs.contains("gpu-model") && attrs.contains("A100"),
        "{attrs}"
    );
    assert!(attrs.contains("\"tier\""), "{attrs}");
}
