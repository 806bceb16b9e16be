//! GPU utilization sampling through the public plugin API with the repository's fake
//! `nvidia-smi` (`scripts/fake-nvidia-smi`): the plugin samples every GPU with
//! `--query-gpu` at its interval, attributes each sample to the container holding the GPU,
//! follows a change of the fake's per-GPU utilization while it runs, and clears the values
//! when sampling fails (nothing stale reaches the heartbeat).

use std::path::{Path, PathBuf};
use std::time::Duration;

use spindle_common::ids::{ApplicationAttemptId, ApplicationId, ContainerId};
use spindle_common::resource::{Resource, GPU};
use spindle_nodemanager::config::{AllowedGpus, GpuPluginConfig};
use spindle_nodemanager::plugins::gpu::{container_utilization, samples, GpuPlugin};
use spindle_nodemanager::plugins::Plugins;

/// A private directory with `nvidia-smi` (a symlink to the fake) and its `fake-gpu.conf`.
fn fake(dir: &Path, conf: &str) -> PathBuf {
    let fake = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/fake-nvidia-smi");
    std::os::unix::fs::symlink(&fake, dir.join("nvidia-smi")).unwrap();
    std::fs::write(dir.join("fake-gpu.conf"), conf).unwrap();
    dir.join("nvidia-smi")
}

fn cid(seq: u64) -> ContainerId {
    ContainerId::new(
        ApplicationAttemptId::new(ApplicationId::new(1_700_000_000_000, 1), 1),
        0,
        seq,
    )
}

/// Waits (bounded) until the GPU view satisfies `f`.
async fn until(
    plugins: &Plugins,
    what: &str,
    f: impl Fn(&spindle_nodemanager::plugins::ResourceView) -> bool,
) {
    for _ in 0..200 {
        if plugins.view(GPU).is_some_and(|v| f(&v)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!(
        "timed out waiting for {what}: {:?}",
        plugins.view(GPU).map(|v| samples(&v))
    );
}

#[tokio::test]
async fn samples_follow_the_fake_and_are_attributed_to_containers() {
    let d = tempfile::tempdir().unwrap();
    let exe = fake(
        d.path(),
        "FAKE_GPU_COUNT=3\nFAKE_GPU_UTILIZATION=0:0,1:85\nFAKE_GPU_MEMORY_USED_MIB=1:40960\n",
    );
    let p = GpuPlugin::start(GpuPluginConfig {
        allowed: AllowedGpus::Auto,
        discovery_executable: Some(exe),
        timeout: Duration::from_secs(10),
        refresh_interval: None,
        utilization_interval: Some(Duration::from_millis(50)),
        major: 195,
    })
    .await;
    let mut plugins = Plugins::new(vec![Box::new(p)]);
    let one = Resource::new(128, 1).with(GPU, 1);
    assert_eq!(
        plugins.assign(cid(2), &one).unwrap().env["CUDA_VISIBLE_DEVICES"],
        "0"
    );
    assert_eq!(
        plugins.assign(cid(3), &one).unwrap().env["CUDA_VISIBLE_DEVICES"],
        "1"
    );

    until(&plugins, "a first sample", |v| samples(v).len() == 3).await;
    let v = plugins.view(GPU).unwrap();
    let s = samples(&v);
    assert_eq!(
        (s[&0].utilization, s[&1].utilization, s[&2].utilization),
        (0.0, 85.0, 0.0)
    );
    assert_eq!(s[&1].memory_used_mib, Some(40960));
    assert_eq!(s[&1].temperature_c, Some(31.0));
    let per = container_utilization(&v);
    assert_eq!(per.len(), 2, "GPU 2 is held by no container: {per:?}");
    assert_eq!(per[0].container_id, cid(2));
    assert_eq!(per[0].gpus[0].utilization_percent, 0.0);
    assert_eq!(per[1].container_id, cid(3));
    assert_eq!(per[1].gpus[0].utilization_percent, 85.0);
    assert_eq!(per[1].gpus[0].index, 1);

    // The fake's file changes while the plugin runs: the next samples follow.
    std::fs::write(
        d.path().join("fake-gpu.conf"),
        "FAKE_GPU_COUNT=3\nFAKE_GPU_UTILIZATION=60\n",
    )
    .unwrap();
    until(&plugins, "the new utilization", |v| {
        samples(v).values().all(|s| s.utilization == 60.0)
    })
    .await;

    // Sampling fails: the values are cleared, nothing is reported.
    std::fs::write(
        d.path().join("fake-gpu.conf"),
        "FAKE_GPU_COUNT=3\nFAKE_GPU_FAIL=9\n",
    )
    .unwrap();
    until(&plugins, "the values to clear", |v| samples(v).is_empty()).await;
    assert!(container_utilization(&plugins.view(GPU).unwrap()).is_empty());
}
