//! GPU and FPGA discovery on recorded tool outputs (two GPU generations and driver/DTD
//! versions), on broken ones (truncated XML, a driver error with a non-zero exit, garbage, a
//! hanging tool), and the topology-aware pick — through the public plugin API, with the
//! "discovery executable" a small script that replays a fixture.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use spindle_common::ids::{ApplicationAttemptId, ApplicationId, ContainerId};
use spindle_common::resource::{Resource, FPGA, GPU};
use spindle_nodemanager::config::{AllowedFpgas, AllowedGpus, FpgaPluginConfig, GpuPluginConfig};
use spindle_nodemanager::isolation::DeviceNumber;
use spindle_nodemanager::plugins::fpga::FpgaPlugin;
use spindle_nodemanager::plugins::gpu::GpuPlugin;
use spindle_nodemanager::plugins::{DevicePlugin, PluginDetails, Plugins};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/bash\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// An `nvidia-smi` that prints `xml` for `-x -q` (or fails when a `fail` file exists next to
/// it) and `topo` for `topo -m`. The XML it prints is `current.xml`, which tests may replace.
fn replaying_smi(dir: &Path, xml: &str, topo: Option<&str>) -> PathBuf {
    std::fs::copy(fixture(xml), dir.join("current.xml")).unwrap();
    let topo_cmd = match topo {
        Some(t) => format!("cat '{}'", fixture(t).display()),
        None => "echo 'topo: not supported' >&2; exit 3".into(),
    };
    script(
        dir,
        "nvidia-smi",
        &format!(
            r#"d=$(dirname "$0")
if [ "$1" = topo ]; then {topo_cmd}; exit; fi
if [ -e "$d/fail" ]; then echo "NVIDIA-SMI has failed" ; exit 9; fi
[ "$1 $2" = "-x -q" ] || exit 2
cat "$d/current.xml""#
        ),
    )
}

fn gpu_conf(exe: &Path) -> GpuPluginConfig {
    GpuPluginConfig {
        allowed: AllowedGpus::Auto,
        discovery_executable: Some(exe.to_path_buf()),
        timeout: Duration::from_secs(10),
        refresh_interval: None,
        utilization_interval: None,
        major: 195,
    }
}

fn cid(seq: u64) -> ContainerId {
    ContainerId::new(
        ApplicationAttemptId::new(ApplicationId::new(1_700_000_000_000, 1), 1),
        0,
        seq,
    )
}

fn gpus(n: i64) -> Resource {
    Resource::new(256, 1).with(GPU, n)
}

fn problems(p: &GpuPlugin) -> Vec<String> {
    p.status().borrow().problems.clone()
}

#[tokio::test]
async fn a_tesla_v100_node_with_driver_450_is_discovered() {
    let d = tempfile::tempdir().unwrap();
    let exe = replaying_smi(
        d.path(),
        "nvidia-smi/tesla-v100-sxm2-driver450-v11.xml",
        Some("nvidia-smi/tesla-v100-sxm2-driver450-topo.txt"),
    );
    let p = GpuPlugin::start(gpu_conf(&exe)).await;
    assert!(problems(&p).is_empty(), "{:?}", problems(&p));
    let devs = p.devices();
    assert_eq!(devs.len(), 4);
    assert_eq!(
        devs.iter().map(|d| (d.index, d.minor)).collect::<Vec<_>>(),
        vec![(0, 0), (1, 1), (2, 2), (3, 3)]
    );
    assert_eq!(devs[0].model.as_deref(), Some("Tesla V100-SXM2-16GB"));
    assert_eq!(devs[0].memory_mib, Some(16160));
    assert_eq!(devs[2].bus_id.as_deref(), Some("00000000:00:1D.0"));
    assert_eq!(
        devs[3].uuid.as_deref(),
        Some("GPU-0b6a3c6e-6a9f-52a1-77c3-19d27e0f8e9d")
    );
    assert_eq!(devs[1].number(), DeviceNumber::char(195, 1));
    let status = p.status().borrow().clone();
    let PluginDetails::Gpu(Some(info)) = &status.details else {
        panic!("no reading: {status:?}");
    };
    assert_eq!(info.driver_version.as_deref(), Some("450.80.02"));
    assert_eq!(info.cuda_version.as_deref(), Some("11.0"));
    assert_eq!(info.gpus[2].gpu_util, Some(97.0));
    assert_eq!(info.gpus[2].memory_used_mib, Some(10233));
    assert_eq!(info.gpus[2].gpu_temp, Some(61.0));
    assert_eq!(info.gpus[2].gpu_temp_slow_threshold, Some(82.0));

    // Topology: the hybrid mesh's double NVLinks are 0-3, 1-2 and 2-3; a 2-GPU ask gets one.
    let mut plugins = Plugins::new(vec![Box::new(p)]);
    let g = plugins.assign(cid(1), &gpus(2)).unwrap();
    let pair = g.env["CUDA_VISIBLE_DEVICES"].clone();
    assert!(["0,3", "1,2", "2,3"].contains(&pair.as_str()), "{pair}");
    assert_eq!(g.env["NVIDIA_VISIBLE_DEVICES"], pair);
}

#[tokio::test]
async fn an_a100_node_with_driver_535_maps_indexes_to_minors_and_packs_by_nvlink() {
    let d = tempfile::tempdir().unwrap();
    let exe = replaying_smi(
        d.path(),
        "nvidia-smi/a100-pcie-80gb-driver535-v12.xml",
        Some("nvidia-smi/a100-pcie-80gb-driver535-topo.txt"),
    );
    let p = GpuPlugin::start(gpu_conf(&exe)).await;
    assert!(problems(&p).is_empty(), "{:?}", problems(&p));
    // Index = position in the output; minor numbers come from the driver (1, 0, 3, 2).
    assert_eq!(
        p.devices()
            .iter()
            .map(|d| (d.index, d.minor))
            .collect::<Vec<_>>(),
        vec![(0, 1), (1, 0), (2, 3), (3, 2)]
    );
    assert_eq!(
        p.devices()[0].model.as_deref(),
        Some("NVIDIA A100 80GB PCIe")
    );
    assert_eq!(p.devices()[0].memory_mib, Some(81920));
    if let PluginDetails::Gpu(Some(i)) = &p.status().borrow().details {
        assert_eq!(i.driver_version.as_deref(), Some("535.104.05"));
        assert_eq!(i.gpus[2].memory_used_mib, Some(40121));
    } else {
        panic!("no reading");
    }
    let mut plugins = Plugins::new(vec![Box::new(p)]);
    // One GPU: every choice leaves the others equally connected here, so the lowest index.
    let a = plugins.assign(cid(1), &gpus(1)).unwrap();
    assert_eq!(a.env["CUDA_VISIBLE_DEVICES"], "0");
    // Two GPUs: the NVLink pair 2-3, not 1-2 (SYS) although 1 is the lowest free index.
    let b = plugins.assign(cid(2), &gpus(2)).unwrap();
    assert_eq!(b.env["CUDA_VISIBLE_DEVICES"], "2,3");
    assert_eq!(
        b.devices,
        vec![DeviceNumber::char(195, 3), DeviceNumber::char(195, 2)]
    );
    let e = plugins.assign(cid(3), &gpus(2)).unwrap_err();
    assert!(e.message.contains("only 1 of the node's 4 are free"), "{e}");
    plugins.release(cid(2));
    assert_eq!(
        plugins.assign(cid(3), &gpus(3)).unwrap().env["CUDA_VISIBLE_DEVICES"],
        "1,2,3"
    );
}

#[tokio::test]
async fn broken_outputs_leave_the_node_without_gpus_and_say_why() {
    let d = tempfile::tempdir().unwrap();
    // Truncated XML (a crash mid-output), exit 0.
    let exe = replaying_smi(d.path(), "nvidia-smi/broken-truncated.xml", None);
    let p = GpuPlugin::start(gpu_conf(&exe)).await;
    assert!(p.devices().is_empty());
    let pr = problems(&p).join("|");
    assert!(pr.contains("truncated") && pr.contains("failed"), "{pr}");

    // The driver is not loaded: its message on stdout and exit status 9.
    std::fs::write(d.path().join("fail"), "").unwrap();
    let p = GpuPlugin::start(gpu_conf(&exe)).await;
    assert!(p.devices().is_empty());
    assert!(
        problems(&p).join("|").contains("exit status 9"),
        "{:?}",
        problems(&p)
    );
    std::fs::remove_file(d.path().join("fail")).unwrap();

    // Not XML at all.
    let exe = replaying_smi(d.path(), "nvidia-smi/broken-not-xml.txt", None);
    let p = GpuPlugin::start(gpu_conf(&exe)).await;
    assert!(p.devices().is_empty());
    assert!(
        problems(&p).join("|").contains("nvidia_smi_log"),
        "{:?}",
        problems(&p)
    );

    // A configured path that does not exist.
    let p = GpuPlugin::start(gpu_conf(&d.path().join("nope"))).await;
    assert!(problems(&p).join("|").contains("does not exist"));

    // An explicit allowed list is offered even when discovery fails (YARN's rule).
    let mut c = gpu_conf(&exe);
    c.allowed = AllowedGpus::List(vec![(0, 0), (1, 2)]);
    let p = GpuPlugin::start(c).await;
    assert_eq!(
        p.devices()
            .iter()
            .map(|d| (d.index, d.minor))
            .collect::<Vec<_>>(),
        vec![(0, 0), (1, 2)]
    );
    assert!(!problems(&p).is_empty());
}

#[tokio::test]
async fn a_hanging_nvidia_smi_is_killed_at_the_timeout() {
    let d = tempfile::tempdir().unwrap();
    let pidfile = d.path().join("sleep.pid");
    let exe = script(
        d.path(),
        "nvidia-smi",
        &format!("sleep 60 & echo $! > '{}'; wait", pidfile.display()),
    );
    let mut c = gpu_conf(&exe);
    c.timeout = Duration::from_millis(300);
    let t = Instant::now();
    let p = GpuPlugin::start(c).await;
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(p.devices().is_empty());
    let pr = problems(&p).join("|");
    assert!(pr.contains("did not finish within 300 ms"), "{pr}");
    // Its child was killed with it (no sleeping leftover).
    let pid = std::fs::read_to_string(&pidfile).unwrap();
    let gone = Instant::now() + Duration::from_secs(5);
    while std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()))
        .is_ok_and(|s| !s.contains(") Z") && !s.contains(") X"))
    {
        assert!(Instant::now() < gone, "the hanging tool's child survived");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn the_refresh_keeps_the_last_good_reading_marks_vanished_gpus_and_gives_up() {
    let d = tempfile::tempdir().unwrap();
    let exe = replaying_smi(
        d.path(),
        "nvidia-smi/tesla-v100-sxm2-driver450-v11.xml",
        None,
    );
    let mut c = gpu_conf(&exe);
    c.refresh_interval = Some(Duration::from_millis(30));
    let p = GpuPlugin::start(c).await;
    assert_eq!(p.devices().len(), 4);
    let mut rx = p.status();
    let mut plugins = Plugins::new(vec![Box::new(p)]);

    // GPU 3 falls off the bus: the next reading lacks it.
    let xml =
        std::fs::read_to_string(fixture("nvidia-smi/tesla-v100-sxm2-driver450-v11.xml")).unwrap();
    let cut_at = xml.find("\t<gpu id=\"00000000:00:1E.0\">").unwrap();
    let end = xml.find("</nvidia_smi_log>").unwrap();
    let three = format!("{}{}", &xml[..cut_at], &xml[end..]);
    std::fs::write(d.path().join("current.xml"), three).unwrap();
    tokio::time::timeout(
        Duration::from_secs(10),
        rx.wait_for(|s| s.unhealthy.contains(&3)),
    )
    .await
    .expect("GPU 3 marked unhealthy")
    .unwrap();
    assert!(plugins
        .health_view()
        .report()
        .contains("GPU 3 (minor 3) is no longer reported"));
    // It is never handed out.
    assert_eq!(
        plugins.assign(cid(1), &gpus(3)).unwrap().env["CUDA_VISIBLE_DEVICES"],
        "0,1,2"
    );
    assert!(plugins.assign(cid(2), &gpus(1)).is_err());

    // Now every run fails: the last good reading stays, the failures are counted, and after
    // ten in a row the refresh gives up.
    std::fs::write(d.path().join("fail"), "").unwrap();
    let s = tokio::time::timeout(
        Duration::from_secs(20),
        rx.wait_for(|s| s.problems.iter().any(|p| p.contains("gave up"))),
    )
    .await
    .expect("the refresh gives up")
    .unwrap()
    .clone();
    let report = s.problems.join("|");
    assert!(report.contains("failed 10 time(s) in a row"), "{report}");
    assert!(matches!(&s.details, PluginDetails::Gpu(Some(i)) if i.gpus.len() == 3));
    assert!(plugins.health_view().report().starts_with("yarn.io/gpu: "));
}

#[tokio::test]
async fn the_fake_nvidia_smi_prints_an_8_gpu_h100_node_by_default() {
    let fake = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/fake-nvidia-smi");
    let d = tempfile::tempdir().unwrap();
    // A private config next to a symlink, as the system tests and the minicluster use it.
    let exe = d.path().join("nvidia-smi");
    std::os::unix::fs::symlink(&fake, &exe).unwrap();
    let p = GpuPlugin::start(gpu_conf(&exe)).await;
    assert!(problems(&p).is_empty(), "{:?}", problems(&p));
    assert_eq!(p.devices().len(), 8);
    assert_eq!(
        p.devices()[7].model.as_deref(),
        Some("NVIDIA H100 80GB HBM3")
    );
    std::fs::write(
        d.path().join("fake-gpu.conf"),
        "FAKE_GPU_COUNT=4\nFAKE_GPU_MODEL=Tesla T4\nFAKE_GPU_DEFAULT_LINK=SYS\nFAKE_GPU_LINKS=1-2:NV2\n",
    )
    .unwrap();
    let p = GpuPlugin::start(gpu_conf(&exe)).await;
    assert_eq!(p.devices().len(), 4);
    assert_eq!(p.devices()[0].model.as_deref(), Some("Tesla T4"));
    let mut plugins = Plugins::new(vec![Box::new(p)]);
    assert_eq!(
        plugins.assign(cid(1), &gpus(2)).unwrap().env["CUDA_VISIBLE_DEVICES"],
        "1,2"
    );
    std::fs::write(d.path().join("fake-gpu.conf"), "FAKE_GPU_TRUNCATE=2000\n").unwrap();
    let p = GpuPlugin::start(gpu_conf(&exe)).await;
    assert!(p.devices().is_empty());
    assert!(problems(&p).join("|").contains("truncated"));
}

#[tokio::test]
async fn fpgas_are_discovered_from_aocl_diagnose() {
    let d = tempfile::tempdir().unwrap();
    let exe = script(
        d.path(),
        "aocl",
        &format!(
            "[ \"$1\" = diagnose ] || exit 2; cat '{}'; exit 1",
            fixture("aocl/diagnose-two-nallatech.txt").display()
        ),
    );
    let conf = FpgaPluginConfig {
        allowed: AllowedFpgas::Auto,
        discovery_executable: Some(exe.clone()),
        timeout: Duration::from_secs(10),
        major: 246,
    };
    let p = FpgaPlugin::start(conf.clone()).await;
    assert!(p.status().borrow().problems.is_empty());
    let devs = p.devices();
    assert_eq!(devs.len(), 2);
    assert_eq!(devs[1].alias.as_deref(), Some("acl1"));
    assert_eq!(devs[1].number(), DeviceNumber::char(246, 1));
    assert_eq!(devs[0].bus_id.as_deref(), Some("02:00.00"));
    let mut plugins = Plugins::new(vec![Box::new(p)]);
    let g = plugins
        .assign(cid(1), &Resource::new(1, 1).with(FPGA, 1))
        .unwrap();
    assert_eq!(g.env["FPGA_VISIBLE_DEVICES"], "acl0");
    assert_eq!(plugins.node_resource(&Resource::new(1, 1)).get(FPGA), 2);

    // allowed-fpga-devices keeps only the listed minors.
    let p = FpgaPlugin::start(FpgaPluginConfig {
        allowed: AllowedFpgas::Minors(vec![1]),
        ..conf.clone()
    })
    .await;
    assert_eq!(p.devices().len(), 1);
    assert_eq!(p.devices()[0].minor, 1);

    // A failed diagnostic: no devices, and the problem is said.
    let bad = script(
        d.path(),
        "aocl-bad",
        &format!(
            "cat '{}'; exit 1",
            fixture("aocl/diagnose-failed.txt").display()
        ),
    );
    let p = FpgaPlugin::start(FpgaPluginConfig {
        discovery_executable: Some(bad),
        ..conf
    })
    .await;
    assert!(p.devices().is_empty());
    assert!(!p.status().borrow().problems.is_empty());
}
