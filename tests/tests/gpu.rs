//! System test of GPU scheduling on the real binaries: a 2-node cluster whose NodeManagers
//! each discover 4 fake GPUs (`scripts/fake-nvidia-smi`) runs a distributed shell of 8
//! one-GPU containers at once. Every container sees a different `CUDA_VISIBLE_DEVICES` on its
//! node, and the RM's view (`/ws/v1/cluster/nodes`, `usedResource` of `yarn.io/gpu`) and the
//! NMs' views (`/ws/v1/node/resources/yarn.io%2Fgpu`) agree on which container holds which GPU.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};
use spindle_system_tests::{bin, wait_until, Cluster, ClusterOpts};

const GPU: &str = "yarn.io/gpu";

/// A directory with `nvidia-smi` (a symlink to the fake) and its config: 4 GPUs.
fn fake_gpus(dir: &Path) -> PathBuf {
    let d = dir.join("gpus");
    std::fs::create_dir_all(&d).expect("gpus dir");
    let fake = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/fake-nvidia-smi");
    std::os::unix::fs::symlink(&fake, d.join("nvidia-smi")).expect("symlink");
    std::fs::write(d.join("fake-gpu.conf"), "FAKE_GPU_COUNT=4\n").expect("conf");
    d
}

fn resource_value(r: &Value, name: &str) -> i64 {
    r["resourceInformations"]["resourceInformation"]
        .as_array()
        .and_then(|a| a.iter().find(|i| i["name"] == name))
        .and_then(|i| i["value"].as_i64())
        .unwrap_or(0)
}

fn nm_get(c: &Cluster, nm: &str, path: &str) -> Value {
    c.http
        .get(format!("http://{nm}{path}"))
        .send()
        .and_then(|r| r.json())
        .unwrap_or(Value::Null)
}

#[test]
fn eight_one_gpu_containers_on_two_4_gpu_nodes_get_distinct_gpus() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let gpus = fake_gpus(scratch.path());
    let release = scratch.path().join("release");
    let c = Cluster::start(ClusterOpts {
        nodes: 2,
        rm_props: vec![("yarn.resource-types".into(), GPU.into())],
        nm_props: vec![
            ("yarn.nodemanager.resource-plugins".into(), GPU.into()),
            (
                "yarn.nodemanager.resource-plugins.gpu.path-to-discovery-executables".into(),
                gpus.display().to_string(),
            ),
            // Room for 4 one-vcore GPU containers and the AM on one node.
            ("yarn.nodemanager.resource.cpu-vcores".into(), "8".into()),
        ],
    });
    // Both nodes registered 4 GPUs.
    let (_, nodes) = c.get("/ws/v1/cluster/nodes");
    let totals: Vec<i64> = nodes["nodes"]["node"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| resource_value(&n["totalResource"], GPU))
        .collect();
    assert_eq!(totals, vec![4, 4], "{nodes}");
    // Each node reports its GPU model as a node attribute (gangs may ask for one model).
    for n in nodes["nodes"]["node"].as_array().expect("nodes") {
        let attrs = &n["nodeAttributesInfo"]["nodeAttributeInfo"];
        let model = attrs
            .as_array()
            .and_then(|a| a.iter().find(|x| x["name"] == "gpu-model"))
            .and_then(|x| x["value"].as_str())
            .unwrap_or_default()
            .to_string();
        assert!(!model.is_empty(), "gpu-model attribute missing: {n}");
    }

    // The containers print their GPUs, then wait (bounded) until the test has looked.
    let command = format!(
        "echo \"CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES\"; \
         for i in $(seq 300); do [ -e {} ] && break; sleep 0.1; done",
        release.display()
    );
    let (s, v, _) = c.send(
        Method::POST,
        "/ws/v1/cluster/apps/new-application",
        &json!({}),
    );
    assert_eq!(s, 200, "{v}");
    let id = v["application-id"].as_str().expect("id").to_string();
    let (s, body, _) = c.send(
        Method::POST,
        "/ws/v1/cluster/apps?user.name=tester",
        &json!({
            "application-id": id,
            "application-name": "gpu-dshell",
            "application-type": "DISTRIBUTEDSHELL",
            "queue": "default",
            "max-app-attempts": 1,
            "am-container-spec": {
                "local-resources": {"entry": [{"key": "spindle", "value": {
                    "resource": format!("file://{}", bin("spindle").display()),
                    "type": "FILE", "visibility": "APPLICATION"}}]},
                "environment": {"entry": [
                    {"key": "DISTRIBUTEDSHELL_NUM_CONTAINERS", "value": "8"},
                    {"key": "DISTRIBUTEDSHELL_CONTAINER_RESOURCES",
                     "value": "memory-mb=256,vcores=1,yarn.io/gpu=1"},
                    {"key": "DISTRIBUTEDSHELL_SHELL_COMMAND", "value": command}
                ]},
                "commands": {"command": "./spindle distributed-shell-am"}
            },
            "resource": {"memory": 256, "vCores": 1}
        }),
    );
    assert_eq!(s, 202, "{body}");

    // All 8 run at once: the RM shows 4 GPUs used on each node.
    let deadline = Instant::now() + Duration::from_secs(60);
    let nodes = loop {
        let (_, nodes) = c.get("/ws/v1/cluster/nodes");
        let used: Vec<i64> = nodes["nodes"]["node"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|n| resource_value(&n["usedResource"], GPU))
                    .collect()
            })
            .unwrap_or_default();
        if used == vec![4, 4] {
            break nodes;
        }
        if Instant::now() > deadline {
            c.dump_logs();
            panic!("the 8 GPU containers did not all run: GPUs used per node {used:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    for n in nodes["nodes"]["node"].as_array().expect("nodes") {
        assert_eq!(resource_value(&n["availableResource"], GPU), 0, "{n}");
    }

    // The RM's placement: GPU containers (not the AM) by node.
    let containers = c.containers_of(&id);
    let mut rm_view: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for ct in &containers {
        if ct["allocatedResources"][GPU].as_i64() == Some(1) {
            let node = ct["nodeHttpAddress"]
                .as_str()
                .unwrap_or_default()
                .trim_start_matches("http://")
                .to_string();
            let cid = ct["containerId"].as_str().unwrap_or_default().to_string();
            rm_view.entry(node).or_default().insert(cid);
        }
    }
    assert_eq!(
        rm_view.values().map(BTreeSet::len).collect::<Vec<_>>(),
        vec![4, 4],
        "{rm_view:?}"
    );
    // The NMs' view: container -> GPU index, 4 distinct per node.
    let mut holder: BTreeMap<String, (String, i64)> = BTreeMap::new();
    for nm in &c.nm_addrs {
        // The RM counts a container from its allocation; the NM assigns its GPU when the AM's
        // start call arrives, a moment later.
        let (v, assigned) = wait_until(
            &format!("{nm} to assign 4 GPUs"),
            Duration::from_secs(30),
            || {
                let v = nm_get(&c, nm, "/ws/v1/node/resources/yarn.io%2Fgpu");
                let assigned = v["assignedGpuDevices"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                (assigned.len() == 4).then_some((v, assigned))
            },
        );
        assert_eq!(assigned.len(), 4, "{nm}: {v}");
        let idx: BTreeSet<i64> = assigned
            .iter()
            .filter_map(|a| a["index"].as_i64())
            .collect();
        assert_eq!(idx, (0..4).collect(), "{nm}: {v}");
        for a in &assigned {
            let cid = a["containerId"].as_str().unwrap_or_default().to_string();
            holder.insert(cid, (nm.clone(), a["index"].as_i64().unwrap_or(-1)));
        }
        let nm_set: BTreeSet<String> = assigned
            .iter()
            .map(|a| a["containerId"].as_str().unwrap_or_default().to_string())
            .collect();
        assert_eq!(
            rm_view.get(nm),
            Some(&nm_set),
            "the RM and NM {nm} disagree on who holds its GPUs"
        );
    }
    assert_eq!(holder.len(), 8, "{holder:?}");

    // Let them finish; each container printed exactly the GPU its NM says it holds.
    std::fs::write(&release, "").expect("release");
    let app = c.wait_app_state(
        &id,
        &["FINISHED", "FAILED", "KILLED"],
        Duration::from_secs(60),
    );
    if app["finalStatus"] != "SUCCEEDED" {
        c.dump_logs();
    }
    assert_eq!(app["finalStatus"], "SUCCEEDED", "{app}");
    for (cid, (nm, index)) in &holder {
        let out = c
            .http
            .get(format!("http://{nm}/ws/v1/node/containerlogs/{cid}/stdout"))
            .send()
            .and_then(|r| r.text())
            .unwrap_or_default();
        assert_eq!(
            out.trim(),
            format!("CUDA_VISIBLE_DEVICES={index}"),
            "{cid} on {nm}"
        );
    }
    // Every GPU is free again on both sides.
    wait_until("GPUs released", Duration::from_secs(20), || {
        let (_, nodes) = c.get("/ws/v1/cluster/nodes");
        let used: i64 = nodes["nodes"]["node"]
            .as_array()?
            .iter()
            .map(|n| resource_value(&n["usedResource"], GPU))
            .sum();
        let nm_free = c.nm_addrs.iter().all(|nm| {
            nm_get(&c, nm, "/ws/v1/node/resources/yarn.io%2Fgpu")["assignedGpuDevices"]
                .as_array()
                .is_some_and(Vec::is_empty)
        });
        (used == 0 && nm_free).then_some(())
    });
}
