//! GPUs and FPGAs through a whole in-process NodeManager (fake RM at the network boundary,
//! `scripts/fake-nvidia-smi` / `scripts/fake-fpga-discovery` as the discovery tools): the node
//! registers its devices, containers get distinct devices and exactly those in their
//! environment and isolation spec, REST shows YARN's shapes, assignments survive an NM
//! restart, and a broken `nvidia-smi` leaves the NM running and reporting the problem.

mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use spindle_common::config::{keys, Configuration};
use spindle_common::ids::ContainerId;
use spindle_common::records::node::{
    ContainerLaunchContext, StartContainerRequest, StartContainersResponse,
};
use spindle_common::records::resource::ResourceInfo;
use spindle_common::resource::{Resource, FPGA, GPU};
use spindle_common::states::ContainerState;
use spindle_nodemanager::config::{NM_DEVICE_DISCOVERY_TIMEOUT_MS, NM_RECOVERY_ENABLED};
use spindle_nodemanager::isolation::{DeviceNumber, IsolationSpec};
use spindle_nodemanager::launcher::{
    Adoptee, ContainerExecutor, ExecHandle, LaunchError, LaunchSpec, ProcessExecutor, Reattached,
    StartedProcess, StopSignal,
};
use spindle_nodemanager::plugins::Plugins;
use spindle_nodemanager::NmConfig;
use support::*;

const GPU_PATH: &str = "/ws/v1/node/resources/yarn.io%2Fgpu";

fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts")
}

/// A private directory holding `nvidia-smi` (a symlink to the fake) and its config.
fn fake_gpus(dir: &Path, conf: &str) -> PathBuf {
    let d = dir.join("gpus");
    std::fs::create_dir_all(&d).unwrap();
    let exe = d.join("nvidia-smi");
    if !exe.exists() {
        std::os::unix::fs::symlink(scripts().join("fake-nvidia-smi"), &exe).unwrap();
    }
    std::fs::write(d.join("fake-gpu.conf"), conf).unwrap();
    d
}

fn conf_with(dirs: &Path, rm: SocketAddr, recovery: bool, extra: &[(&str, String)]) -> NmConfig {
    let mut c = Configuration::new();
    c.set(keys::NM_WEBAPP_ADDRESS, "127.0.0.1:0");
    c.set(keys::RM_WEBAPP_ADDRESS, &rm.to_string());
    c.set(
        keys::NM_LOCAL_DIRS,
        &dirs.join("local").display().to_string(),
    );
    c.set(keys::NM_LOG_DIRS, &dirs.join("logs").display().to_string());
    c.set(
        keys::NM_RECOVERY_DIR,
        &dirs.join("recovery").display().to_string(),
    );
    c.set(NM_RECOVERY_ENABLED, if recovery { "true" } else { "false" });
    c.set(keys::NM_RESOURCE_MEMORY_MB, "4096");
    c.set(keys::NM_RESOURCE_CPU_VCORES, "8");
    // The node's health must not depend on how full the test machine's disk is.
    c.set(keys::NM_DISK_CHECKER_MAX_UTILIZATION, "100");
    for (k, v) in extra {
        c.set(k, v);
    }
    NmConfig::from_configuration(&c, &dirs.join("conf")).unwrap()
}

fn gpu_props(gpus: &Path) -> Vec<(&'static str, String)> {
    vec![
        (keys::NM_RESOURCE_PLUGINS, GPU.to_string()),
        (
            keys::NM_GPU_PATH_TO_DISCOVERY_EXECUTABLES,
            gpus.display().to_string(),
        ),
    ]
}

fn request(
    nm: &TestNm,
    rm: &FakeRm,
    id: ContainerId,
    ask: &Resource,
    cmd: &str,
) -> StartContainerRequest {
    let mut ident = nm.ident(id, "alice");
    ident.resource = ResourceInfo::from(ask);
    StartContainerRequest {
        container_token: rm.token(&ident),
        container_launch_context: ContainerLaunchContext {
            commands: vec![cmd.to_string()],
            environment: BTreeMap::new(),
            local_resources: BTreeMap::new(),
        },
    }
}

async fn start(
    nm: &TestNm,
    rm: &FakeRm,
    id: ContainerId,
    ask: &Resource,
    cmd: &str,
) -> StartContainersResponse {
    nm.start_containers(vec![request(nm, rm, id, ask, cmd)])
        .await
}

fn gpus(n: i64) -> Resource {
    Resource::new(256, 1).with(GPU, n)
}

/// A command that records the GPU variables in `<out>/<id>` and then sleeps.
fn record_env(out: &Path, id: &ContainerId, sleep: u32) -> String {
    format!(
        "echo \"$CUDA_VISIBLE_DEVICES $NVIDIA_VISIBLE_DEVICES $FPGA_VISIBLE_DEVICES\" > {}/{id}; sleep {sleep}",
        out.display()
    )
}

#[tokio::test]
async fn containers_get_distinct_gpus_and_rest_shows_who_holds_which() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let out = dirs.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let g = fake_gpus(dirs.path(), "FAKE_GPU_COUNT=4\n");
    let mut nm = TestNm::start_with(
        dirs.path(),
        conf_with(dirs.path(), rm.addr, false, &gpu_props(&g)),
    )
    .await;
    rm.wait_registered(1).await;
    let registered = rm.state.lock().unwrap().registrations[0]
        .resource
        .to_resource();
    assert_eq!(registered.get(GPU), 4, "{registered}");

    let ids: Vec<ContainerId> = (1..=4).map(|i| cid(1, i)).collect();
    for id in &ids {
        let r = start(&nm, &rm, *id, &gpus(1), &record_env(&out, id, 30)).await;
        assert_eq!(r.successfully_started_containers, vec![*id], "{r:?}");
    }
    let mut seen = BTreeMap::new();
    for id in &ids {
        let line = read_when_written(&out.join(id.to_string())).await;
        let mut w = line.split_whitespace();
        let (cuda, nvidia) = (w.next().unwrap().to_string(), w.next().unwrap());
        assert_eq!(cuda, nvidia, "{line}");
        seen.insert(cuda, *id);
    }
    assert_eq!(
        seen.keys().cloned().collect::<Vec<_>>(),
        vec!["0", "1", "2", "3"]
    );

    // A fifth GPU container does not fit: refused with the reason.
    let r = start(&nm, &rm, cid(1, 5), &gpus(1), "true").await;
    assert!(r.successfully_started_containers.is_empty());
    assert!(
        r.failed_requests[0]
            .message
            .contains("only 0 of the node's 4"),
        "{r:?}"
    );

    // REST: YARN's NMGpuResourceInfo, agreeing with the containers' environments.
    let (s, v) = nm.get_json(GPU_PATH).await;
    assert_eq!(s, 200);
    let info = &v["gpuDeviceInformation"];
    assert_eq!(info["driverVersion"], "535.129.03");
    assert_eq!(info["gpus"].as_array().unwrap().len(), 4);
    let g0 = &info["gpus"][0];
    assert_eq!(g0["productName"], "NVIDIA H100 80GB HBM3");
    assert_eq!(g0["minorNumber"], 0);
    assert!(g0["uuid"].as_str().unwrap().starts_with("GPU-"));
    assert_eq!(g0["gpuMemoryUsage"]["totalMemoryMiB"], 81559);
    assert_eq!(g0["gpuMemoryUsage"]["usedMemoryMiB"], 0);
    assert_eq!(g0["gpuUtilizations"]["overallGpuUtilization"], 0.0);
    assert_eq!(g0["temperature"]["currentGpuTemp"], 30.0);
    assert_eq!(g0["temperature"]["maxGpuTemp"], 92.0);
    assert_eq!(g0["temperature"]["slowThresholdGpuTemp"], 89.0);
    assert_eq!(
        v["totalGpuDevices"][3],
        serde_json::json!({"index": 3, "minorNumber": 3})
    );
    let assigned = v["assignedGpuDevices"].as_array().unwrap();
    assert_eq!(assigned.len(), 4);
    for a in assigned {
        let index = a["index"].as_u64().unwrap().to_string();
        assert_eq!(a["containerId"], seen[&index].to_string(), "{a}");
        assert_eq!(a["minorNumber"], a["index"]);
    }
    assert!(v.get("discoveryProblems").is_none(), "{v}");
    // A name no plugin manages: YARN's empty NMResourceInfo.
    let (s, v) = nm.get_json("/ws/v1/node/resources/nvidia.com%2Fgpu").await;
    assert_eq!((s, v), (200, serde_json::json!({})));

    // Stopping the container on GPU 2 frees it for the next one.
    let on_two = seen["2"];
    nm.stop_containers(vec![on_two]).await;
    rm.wait_state(&on_two, ContainerState::COMPLETE).await;
    let next = cid(1, 6);
    let r = start(&nm, &rm, next, &gpus(1), &record_env(&out, &next, 30)).await;
    assert_eq!(r.successfully_started_containers, vec![next], "{r:?}");
    assert!(read_when_written(&out.join(next.to_string()))
        .await
        .starts_with("2 2"));
    let (_, v) = nm.get_json(GPU_PATH).await;
    let holders: Vec<String> = v["assignedGpuDevices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["index"] == 2)
        .map(|a| a["containerId"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(holders, vec![next.to_string()]);
    nm.stop().await.unwrap();
}

#[tokio::test]
async fn gpu_assignments_survive_an_nm_restart() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let out = dirs.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let g = fake_gpus(dirs.path(), "FAKE_GPU_COUNT=4\n");
    let conf = || conf_with(dirs.path(), rm.addr, true, &gpu_props(&g));
    let mut nm = TestNm::start_with(dirs.path(), conf()).await;
    rm.wait_registered(1).await;
    let held = cid(2, 1);
    let r = start(&nm, &rm, held, &gpus(2), &record_env(&out, &held, 60)).await;
    assert_eq!(r.successfully_started_containers, vec![held], "{r:?}");
    let before = read_when_written(&out.join(held.to_string())).await;
    let held_gpus: Vec<String> = before
        .split_whitespace()
        .next()
        .unwrap()
        .split(',')
        .map(str::to_string)
        .collect();
    assert_eq!(held_gpus.len(), 2);
    let pid = wait_until("the container's pid", || {
        let store =
            std::fs::read_to_string(dirs.path().join("recovery/nm-containers.json")).ok()?;
        let v: serde_json::Value = serde_json::from_str(&store).ok()?;
        let c = &v["containers"][0];
        assert_eq!(c["devices"][GPU].as_array()?.len(), 2, "{c}");
        c["process"]["processGroup"]["pid"].as_i64()
    })
    .await as i32;
    // The NM goes away (recovery: the container keeps running) and a new one starts.
    nm.stop().await.unwrap();
    let mut nm = TestNm::start_with(dirs.path(), conf()).await;
    rm.wait_registered(2).await;

    // The recovered container still holds its two GPUs.
    let (_, v) = nm.get_json(GPU_PATH).await;
    let mut recovered: Vec<String> = v["assignedGpuDevices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            assert_eq!(a["containerId"], held.to_string());
            a["index"].to_string()
        })
        .collect();
    recovered.sort();
    assert_eq!(recovered, held_gpus);
    // A new container gets the other two, never one the recovered container holds.
    let fresh = cid(3, 1);
    let r = start(&nm, &rm, fresh, &gpus(2), &record_env(&out, &fresh, 30)).await;
    assert_eq!(r.successfully_started_containers, vec![fresh], "{r:?}");
    let got = read_when_written(&out.join(fresh.to_string())).await;
    for gpu in got.split_whitespace().next().unwrap().split(',') {
        assert!(
            !held_gpus.contains(&gpu.to_string()),
            "{gpu} in {held_gpus:?}"
        );
    }
    let r = start(&nm, &rm, cid(3, 2), &gpus(1), "true").await;
    assert!(r.successfully_started_containers.is_empty(), "{r:?}");
    // Cleanup: the recovered container is not this NM's child; stop it through the NM.
    // One stop per application: a stop carries one application's container token.
    nm.stop_containers(vec![held]).await;
    nm.stop_containers(vec![fresh]).await;
    rm.wait_state(&held, ContainerState::COMPLETE).await;
    kill_group(pid);
    nm.stop().await.unwrap();
}

#[tokio::test]
async fn a_broken_nvidia_smi_does_not_stop_the_nm_and_is_reported() {
    // Only the hanging case relies on the timeout; the others get a generous one, so that a
    // busy machine (the fake is a Python script) cannot turn their failure into a timeout.
    for (name, conf, timeout_ms, want) in [
        (
            "hang",
            "FAKE_GPU_HANG=30\n",
            "500",
            "did not finish within 500 ms",
        ),
        ("exit", "FAKE_GPU_FAIL=9\n", "20000", "exit status 9"),
        (
            "truncated",
            "FAKE_GPU_TRUNCATE=3000\n",
            "20000",
            "truncated",
        ),
    ] {
        let rm = FakeRm::start().await;
        let dirs = tempfile::tempdir().unwrap();
        let g = fake_gpus(dirs.path(), conf);
        let mut props = gpu_props(&g);
        props.push((NM_DEVICE_DISCOVERY_TIMEOUT_MS, timeout_ms.into()));
        let mut nm =
            TestNm::start_with(dirs.path(), conf_with(dirs.path(), rm.addr, false, &props)).await;
        rm.wait_registered(1).await;
        let registered = rm.state.lock().unwrap().registrations[0]
            .resource
            .to_resource();
        assert_eq!(registered.get(GPU), 0, "{name}: {registered}");

        // The problem is in the node's health report (REST and heartbeats) and on REST.
        let (_, info) = nm.get_json("/ws/v1/node/info").await;
        let report = info["nodeInfo"]["healthReport"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(report.contains(want), "{name}: {report}");
        assert_eq!(info["nodeInfo"]["nodeHealthy"], true, "{name}: {report}");
        wait_until("a heartbeat with the health report", || {
            let st = rm.state.lock().unwrap();
            st.heartbeats
                .iter()
                .any(|h| h.node_status.health_report.contains(want))
                .then_some(())
        })
        .await;
        let (_, v) = nm.get_json(GPU_PATH).await;
        assert!(v["gpuDeviceInformation"].is_null(), "{v}");
        assert_eq!(v["totalGpuDevices"], serde_json::json!([]));
        assert!(
            v["discoveryProblems"][0].as_str().unwrap().contains(want),
            "{v}"
        );

        // CPU work still runs; a GPU ask is refused with the reason.
        let id = cid(4, 1);
        let r = start(&nm, &rm, id, &Resource::new(256, 1), "exit 0").await;
        assert_eq!(r.successfully_started_containers, vec![id], "{name}: {r:?}");
        rm.wait_state(&id, ContainerState::COMPLETE).await;
        let r = start(&nm, &rm, cid(4, 2), &gpus(1), "true").await;
        assert!(
            r.failed_requests[0].message.contains("yarn.io/gpu"),
            "{r:?}"
        );
        nm.stop().await.unwrap();
    }
}

#[tokio::test]
async fn gpus_and_fpgas_together() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let out = dirs.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let g = fake_gpus(dirs.path(), "FAKE_GPU_COUNT=2\n");
    let props = vec![
        (keys::NM_RESOURCE_PLUGINS, format!("{GPU},{FPGA}")),
        (
            keys::NM_GPU_PATH_TO_DISCOVERY_EXECUTABLES,
            g.display().to_string(),
        ),
        (
            spindle_nodemanager::config::NM_FPGA_PATH_TO_DISCOVERY_EXECUTABLES,
            scripts().join("fake-fpga-discovery").display().to_string(),
        ),
    ];
    let mut nm =
        TestNm::start_with(dirs.path(), conf_with(dirs.path(), rm.addr, false, &props)).await;
    rm.wait_registered(1).await;
    let registered = rm.state.lock().unwrap().registrations[0]
        .resource
        .to_resource();
    assert_eq!((registered.get(GPU), registered.get(FPGA)), (2, 2));

    let id = cid(5, 1);
    let ask = Resource::new(256, 1).with(GPU, 2).with(FPGA, 1);
    let r = start(&nm, &rm, id, &ask, &record_env(&out, &id, 30)).await;
    assert_eq!(r.successfully_started_containers, vec![id], "{r:?}");
    let line = read_when_written(&out.join(id.to_string())).await;
    assert_eq!(line.trim(), "0,1 0,1 acl0");

    let (_, v) = nm.get_json("/ws/v1/node/resources/yarn.io%2Ffpga").await;
    assert_eq!(v["totalDevices"].as_array().unwrap().len(), 2);
    let d = &v["totalDevices"][1];
    assert_eq!(d["id"], 1);
    assert_eq!(d["majorNumber"], 246);
    assert_eq!(d["minorNumber"], 1);
    assert_eq!(d["busID"], "03:00.00");
    assert_eq!(d["healthy"], true);
    assert_eq!(v["assignedDevices"][0]["containerId"], id.to_string());
    assert_eq!(v["assignedDevices"][0]["device"]["id"], 0);
    // An FPGA ask that does not fit releases the GPUs it would have had.
    let r = start(
        &nm,
        &rm,
        cid(5, 2),
        &Resource::new(256, 1).with(FPGA, 2),
        "true",
    )
    .await;
    assert!(
        r.failed_requests[0].message.contains("yarn.io/fpga"),
        "{r:?}"
    );
    nm.stop().await.unwrap();
}

#[tokio::test]
async fn registration_carries_the_gpu_node_attributes() {
    use spindle_common::records::tracker as t;
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let g = fake_gpus(
        dirs.path(),
        "FAKE_GPU_COUNT=4\nFAKE_GPU_MODEL=NVIDIA GB200\nFAKE_GPU_MEMORY_MIB=189471\n\
         FAKE_GPU_DRIVER=570.86.15\nFAKE_GPU_CUDA=12.8\n\
         FAKE_GPU_FABRIC_CLUSTER_UUID=3ba4fc1b-46e0-4e42-9c32-3f7a5d4b0c11\n\
         FAKE_GPU_FABRIC_CLIQUE=32766\n",
    );
    let mut nm = TestNm::start_with(
        dirs.path(),
        conf_with(dirs.path(), rm.addr, false, &gpu_props(&g)),
    )
    .await;
    rm.wait_registered(1).await;
    let attrs = rm.state.lock().unwrap().registrations[0]
        .node_attributes
        .clone();
    let want: BTreeMap<String, String> = [
        (t::GPU_MODEL_ATTRIBUTE, "NVIDIA GB200"),
        (t::GPU_COUNT_ATTRIBUTE, "4"),
        (t::GPU_MEMORY_MB_ATTRIBUTE, "189471"),
        (t::GPU_DRIVER_VERSION_ATTRIBUTE, "570.86.15"),
        (t::CUDA_VERSION_ATTRIBUTE, "12.8"),
        (
            t::NVLINK_CLUSTER_UUID_ATTRIBUTE,
            "3ba4fc1b-46e0-4e42-9c32-3f7a5d4b0c11",
        ),
        (
            t::NVLINK_CLIQUE_ATTRIBUTE,
            "3ba4fc1b-46e0-4e42-9c32-3f7a5d4b0c11.32766",
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(attrs, want);
    nm.stop().await.unwrap();

    // A node outside any NVLink fabric (the fake's default) reports no fabric attributes.
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let g = fake_gpus(dirs.path(), "FAKE_GPU_COUNT=2\n");
    let mut nm = TestNm::start_with(
        dirs.path(),
        conf_with(dirs.path(), rm.addr, false, &gpu_props(&g)),
    )
    .await;
    rm.wait_registered(1).await;
    let attrs = rm.state.lock().unwrap().registrations[0]
        .node_attributes
        .clone();
    assert_eq!(attrs[t::GPU_COUNT_ATTRIBUTE], "2");
    assert_eq!(attrs[t::GPU_DRIVER_VERSION_ATTRIBUTE], "535.129.03");
    assert!(!attrs.contains_key(t::NVLINK_CLIQUE_ATTRIBUTE), "{attrs:?}");
    assert!(
        !attrs.contains_key(t::NVLINK_CLUSTER_UUID_ATTRIBUTE),
        "{attrs:?}"
    );
    nm.stop().await.unwrap();
}

/// Records every container's isolation spec, then runs it as the real executor does.
struct Recording {
    inner: ProcessExecutor,
    specs: Arc<Mutex<Vec<(ContainerId, IsolationSpec)>>>,
}

impl ContainerExecutor for Recording {
    fn prepare(&self, spec: &LaunchSpec) -> Result<(), LaunchError> {
        self.inner.prepare(spec)
    }
    fn start(&self, spec: &LaunchSpec, hold: bool) -> Result<StartedProcess, LaunchError> {
        self.specs
            .lock()
            .unwrap()
            .push((spec.container_id, spec.isolation.clone()));
        self.inner.start(spec, hold)
    }
    fn signal(&self, handle: &ExecHandle, signal: StopSignal) -> Result<(), LaunchError> {
        self.inner.signal(handle, signal)
    }
    fn reattach(&self, handle: &ExecHandle, adoptee: &Adoptee<'_>) -> Reattached {
        self.inner.reattach(handle, adoptee)
    }
}

#[tokio::test]
async fn every_managed_device_a_container_was_not_granted_is_denied() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let g = fake_gpus(dirs.path(), "FAKE_GPU_COUNT=4\n");
    let conf = conf_with(dirs.path(), rm.addr, false, &gpu_props(&g));
    let specs = Arc::new(Mutex::new(Vec::new()));
    let executor = Arc::new(Recording {
        inner: ProcessExecutor::new(),
        specs: Arc::clone(&specs),
    });
    let plugins = Plugins::from_config(&conf.plugins).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(spindle_nodemanager::run_with(
        listener,
        conf,
        executor,
        plugins,
        async move {
            let _ = stop_rx.await;
        },
    ));
    rm.wait_registered(1).await;
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let ident = |id: ContainerId, ask: Resource| {
        let mut i = spindle_common::token::ContainerTokenIdentifier {
            container_id: id,
            node_id: spindle_common::ids::NodeId::new("127.0.0.1", addr.port()),
            app_submitter: "alice".into(),
            resource: ResourceInfo::default(),
            expiry_time_ms: spindle_common::time::now_ms() + 600_000,
            rm_identifier: 1,
            is_am: false,
            version: 0,
            master_key_id: 0,
        };
        i.resource = ResourceInfo::from(&ask);
        StartContainerRequest {
            container_token: rm.token(&i),
            container_launch_context: ContainerLaunchContext {
                commands: vec!["sleep 30".into()],
                environment: BTreeMap::new(),
                local_resources: BTreeMap::new(),
            },
        }
    };
    let (a, b) = (cid(6, 1), cid(6, 2));
    let body = spindle_common::records::node::StartContainersRequest {
        start_container_request: vec![ident(a, gpus(1)), ident(b, Resource::new(256, 1))],
        hold: None,
    };
    let r: StartContainersResponse = http
        .post(format!("http://{addr}/ws/v1/node/containers/start"))
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r.successfully_started_containers.len(), 2, "{r:?}");
    let got = wait_until("both containers started", || {
        let s = specs.lock().unwrap();
        (s.len() == 2).then(|| s.clone())
    })
    .await;
    let all: Vec<DeviceNumber> = (0..4).map(|m| DeviceNumber::char(195, m)).collect();
    for (id, iso) in got {
        if id == a {
            assert_eq!(iso.granted_devices.len(), 1);
            let mut both = iso.granted_devices.clone();
            both.extend(iso.denied_devices.iter().copied());
            both.sort();
            assert_eq!(both, all, "granted + denied = every GPU");
            assert!(!iso.denied_devices.contains(&iso.granted_devices[0]));
        } else {
            // No GPU asked: every GPU denied.
            assert!(iso.granted_devices.is_empty());
            assert_eq!(iso.denied_devices, all);
        }
    }
    let _ = stop_tx.send(());
    tokio::time::timeout(Duration::from_secs(20), task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
