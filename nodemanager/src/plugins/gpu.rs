//! The `yarn.io/gpu` plugin: NVIDIA GPUs, found through NVML or `nvidia-smi`.
//!
//! Discovery at NM start decides the devices the node offers (and registers with):
//!
//! 1. `path-to-discovery-executables` set: that `nvidia-smi` (file, or directory holding it),
//!    even where NVML is present, because the operator chose it;
//! 2. else NVML (`libnvidia-ml.so.1`, loaded at run time) when it loads;
//! 3. else `nvidia-smi` from `/usr/bin`, `/bin`, `/usr/local/nvidia/bin` (YARN's search);
//! 4. else none: with `allowed-gpu-devices=auto` the node offers 0 GPUs and says why.
//!
//! With `auto`, a GPU's index is its position in the discovery output and its minor number
//! is `minor_number`; an explicit `index:minor` list is used as given (YARN's rule, for
//! machines where discovery does not work), checked against discovery when it does.
//!
//! A failing discovery (non-zero exit, a hang past the timeout, truncated or garbage XML)
//! never stops the NM: it starts with 0 GPUs (or keeps the last good reading while running)
//! and reports the problem in the node's health report, the logs and REST. While running, a
//! background refresh re-reads utilization, memory and temperature every
//! `spindle.nodemanager.resource-plugins.gpu.refresh-interval-ms`; a GPU that vanishes from
//! the output is marked unhealthy and not handed out. After 10 consecutive failures the
//! refresh gives up (YARN's `MAX_REPEATED_ERROR_ALLOWED`) and says so.
//!
//! Utilization sampling: every
//! `spindle.nodemanager.resource-plugins.gpu.utilization-interval-ms` the same background task
//! samples each GPU's utilization, memory used and temperature (NVML, or the cheap
//! `nvidia-smi --query-gpu=index,uuid,utilization.gpu,memory.used,temperature.gpu
//! --format=csv,noheader,nounits`, bounded by the discovery timeout) into the published
//! reading, marked with `sampled_at_ms`; a failed sample clears them, so nothing stale is
//! reported. [`container_utilization`] attributes the samples to the containers the GPUs are
//! assigned to (the heartbeat's `containersGpuUtilization`); [`samples`] is the per-GPU view
//! (NM metrics).
//!
//! Containers get `CUDA_VISIBLE_DEVICES` and `NVIDIA_VISIBLE_DEVICES` with the granted
//! indexes (YARN's choice), plus `CUDA_DEVICE_ORDER=PCI_BUS_ID` so that CUDA numbers the
//! GPUs as `nvidia-smi` does and the indexes mean the same devices.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use spindle_common::resource::GPU;
use tokio::sync::watch;
use tracing::{info, warn};

use spindle_common::ids::ContainerId;
use spindle_common::records::tracker::{ContainerGpuUtilization, GpuUtilization};

use super::nvidia_smi::{self, GpuDeviceInformation, GpuUtilSample};
use super::topology::{self, Topology};
use super::{exec, nvml, Device, DevicePlugin, PluginDetails, PluginStatus, ResourceView};
use crate::config::{AllowedGpus, GpuPluginConfig};

/// YARN's `MAX_REPEATED_ERROR_ALLOWED`: consecutive discovery failures before giving up.
pub const MAX_REPEATED_FAILURES: u32 = 10;
pub const CUDA_VISIBLE_DEVICES: &str = "CUDA_VISIBLE_DEVICES";
pub const NVIDIA_VISIBLE_DEVICES: &str = "NVIDIA_VISIBLE_DEVICES";
pub const CUDA_DEVICE_ORDER: &str = "CUDA_DEVICE_ORDER";

/// Where the GPU readings come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Nvml,
    NvidiaSmi(PathBuf),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Nvml => f.write_str("NVML"),
            Source::NvidiaSmi(p) => write!(f, "{}", p.display()),
        }
    }
}

/// One reading: the GPUs, and the topology keyed by position when the source gives it.
type Reading = (GpuDeviceInformation, Option<Topology>);

/// Samples every GPU's utilization, memory used and temperature once, bounded by `timeout`.
async fn sample(source: &Source, timeout: Duration) -> Result<Vec<GpuUtilSample>, String> {
    match source {
        Source::Nvml => {
            let task = tokio::task::spawn_blocking(|| nvml::sample(&nvml::load()?));
            match tokio::time::timeout(timeout, task).await {
                Ok(Ok(r)) => r,
                Ok(Err(e)) => Err(format!("NVML sample task failed: {e}")),
                Err(_) => Err(format!(
                    "NVML did not answer within {} ms",
                    timeout.as_millis()
                )),
            }
        }
        Source::NvidiaSmi(exe) => nvidia_smi::sample(exe, timeout)
            .await
            .map_err(|e| e.to_string()),
    }
}

/// `info` with each GPU's sample applied (matched by UUID, else by position), stamped
/// `at`; `None` samples clear what an earlier sample set.
fn apply_samples(
    info: &GpuDeviceInformation,
    samples: Option<&[GpuUtilSample]>,
    at: u64,
) -> GpuDeviceInformation {
    let mut out = info.clone();
    for (pos, g) in out.gpus.iter_mut().enumerate() {
        let Some(samples) = samples else {
            if g.sampled_at_ms.take().is_some() {
                g.gpu_util = None;
                g.memory_used_mib = None;
                g.gpu_temp = None;
            }
            continue;
        };
        let s = samples
            .iter()
            .find(|s| s.uuid.is_some() && s.uuid == g.uuid)
            .or_else(|| {
                samples
                    .iter()
                    .find(|s| s.index as usize == pos && (s.uuid.is_none() || g.uuid.is_none()))
            });
        match s {
            Some(s) => {
                g.gpu_util = s.utilization;
                g.memory_used_mib = s.memory_used_mib.or(g.memory_used_mib);
                g.gpu_temp = s.temperature_c.or(g.gpu_temp);
                g.sampled_at_ms = s.utilization.map(|_| at);
            }
            None => {
                g.sampled_at_ms = None;
                g.gpu_util = None;
            }
        }
    }
    out
}

/// One GPU's last sample, for the NM's metrics and the heartbeat.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuSampleView {
    pub device: Device,
    /// Percent.
    pub utilization: f32,
    pub memory_used_mib: Option<u64>,
    pub temperature_c: Option<f32>,
    pub sampled_at_ms: u64,
}

/// Every GPU of `view` the periodic sample has a utilization for, by minor number.
pub fn samples(view: &ResourceView) -> BTreeMap<u32, GpuSampleView> {
    let PluginDetails::Gpu(Some(info)) = &view.details else {
        return BTreeMap::new();
    };
    view.devices
        .iter()
        .filter_map(|d| {
            let g = info.gpus.iter().find(|g| {
                g.minor_number == Some(d.minor) || (g.uuid.is_some() && g.uuid == d.uuid)
            })?;
            Some((
                d.minor,
                GpuSampleView {
                    device: d.clone(),
                    utilization: g.gpu_util?,
                    memory_used_mib: g.memory_used_mib,
                    temperature_c: g.gpu_temp,
                    sampled_at_ms: g.sampled_at_ms?,
                },
            ))
        })
        .collect()
}

/// The samples of the GPUs each container holds (the heartbeat's
/// `containersGpuUtilization`); containers without a sampled GPU are left out.
pub fn container_utilization(view: &ResourceView) -> Vec<ContainerGpuUtilization> {
    let by_minor = samples(view);
    let mut out: BTreeMap<ContainerId, Vec<GpuUtilization>> = BTreeMap::new();
    for (cid, d) in &view.assigned {
        if let Some(s) = by_minor.get(&d.minor) {
            out.entry(*cid).or_default().push(GpuUtilization {
                index: d.index,
                minor_number: d.minor,
                uuid: d.uuid.clone(),
                utilization_percent: f64::from(s.utilization),
                memory_used_mib: s.memory_used_mib,
                temperature_c: s.temperature_c.map(f64::from),
            });
        }
    }
    out.into_iter()
        .map(|(container_id, gpus)| ContainerGpuUtilization { container_id, gpus })
        .collect()
}

/// Reads the GPUs once, bounded by `timeout`.
async fn read(source: &Source, timeout: Duration) -> Result<Reading, String> {
    match source {
        Source::Nvml => {
            let task = tokio::task::spawn_blocking(|| {
                let n = nvml::load()?;
                nvml::query(&n)
            });
            match tokio::time::timeout(timeout, task).await {
                Ok(Ok(Ok((info, topo)))) => Ok((info, Some(topo))),
                Ok(Ok(Err(e))) => Err(e),
                Ok(Err(e)) => Err(format!("NVML query task failed: {e}")),
                Err(_) => Err(format!(
                    "NVML did not answer within {} ms",
                    timeout.as_millis()
                )),
            }
        }
        Source::NvidiaSmi(exe) => nvidia_smi::query(exe, timeout)
            .await
            .map(|i| (i, None))
            .map_err(|e| e.to_string()),
    }
}

/// `nvidia-smi topo -m`, or None (logged) when it fails: topology only improves the pick.
async fn read_topology(exe: &Path, timeout: Duration) -> Option<Topology> {
    match exec::run(exe, &["topo", "-m"], timeout).await {
        Ok(o) if o.status.success() => {
            match topology::parse_topo(&String::from_utf8_lossy(&o.stdout)) {
                Ok(t) => Some(t),
                Err(e) => {
                    warn!(exe = %exe.display(), error = %e, "cannot parse nvidia-smi topo -m; GPUs are picked by index");
                    None
                }
            }
        }
        Ok(o) => {
            warn!(exe = %exe.display(), status = %o.describe_status(), stderr = %o.stderr_line(),
                "nvidia-smi topo -m failed; GPUs are picked by index");
            None
        }
        Err(e) => {
            warn!(error = %e, "nvidia-smi topo -m failed; GPUs are picked by index");
            None
        }
    }
}

/// Major and minor of `path` when it is a character device.
fn stat_char_device(path: &Path) -> Option<(u32, u32)> {
    let m = std::fs::metadata(path).ok()?;
    if !m.file_type().is_char_device() {
        return None;
    }
    let dev = m.rdev();
    Some((
        nix::sys::stat::major(dev) as u32,
        nix::sys::stat::minor(dev) as u32,
    ))
}

fn gpu_device(
    index: u32,
    minor: u32,
    info: Option<&nvidia_smi::PerGpuDeviceInformation>,
    default_major: u32,
) -> Device {
    let path = PathBuf::from(format!("/dev/nvidia{minor}"));
    let major = match stat_char_device(&path) {
        Some((major, m)) if m == minor => major,
        _ => default_major,
    };
    Device {
        index,
        major,
        minor,
        dev_path: Some(path),
        bus_id: info.and_then(|g| g.pci_bus_id.clone()),
        healthy: true,
        status: "OK".into(),
        model: info.and_then(|g| g.product_name.clone()),
        memory_mib: info.and_then(|g| g.memory_total_mib),
        uuid: info.and_then(|g| g.uuid.clone()),
        alias: None,
    }
}

/// The devices to offer, and the problems found building them.
fn build_devices(
    allowed: &AllowedGpus,
    info: Option<&GpuDeviceInformation>,
    default_major: u32,
) -> (Vec<Device>, Vec<String>) {
    let mut problems = Vec::new();
    let mut devices: Vec<Device> = Vec::new();
    match allowed {
        AllowedGpus::Auto => {
            for (pos, g) in info
                .map(|i| i.gpus.as_slice())
                .unwrap_or_default()
                .iter()
                .enumerate()
            {
                let bus = g.pci_bus_id.as_deref().unwrap_or("unknown bus");
                let Some(minor) = g.minor_number else {
                    problems.push(format!("the GPU at position {pos} ({bus}) reports no minor number; it is not offered"));
                    continue;
                };
                if devices.iter().any(|d| d.minor == minor) {
                    problems.push(format!("two GPUs report minor number {minor}; the one at position {pos} ({bus}) is not offered"));
                    continue;
                }
                devices.push(gpu_device(pos as u32, minor, Some(g), default_major));
            }
        }
        AllowedGpus::List(pairs) => {
            for &(index, minor) in pairs {
                let found =
                    info.and_then(|i| i.gpus.iter().find(|g| g.minor_number == Some(minor)));
                if info.is_some() && found.is_none() {
                    problems.push(format!(
                        "allowed GPU {index}:{minor} is not among the GPUs discovery found; it is offered as configured"
                    ));
                }
                devices.push(gpu_device(index, minor, found, default_major));
            }
            devices.sort_by_key(|d| d.index);
        }
    }
    (devices, problems)
}

/// The NVIDIA GPU plugin.
pub struct GpuPlugin {
    devices: Vec<Device>,
    /// Keyed by device minor number.
    topology: Option<Topology>,
    status: watch::Receiver<PluginStatus>,
    refresh: Option<tokio::task::AbortHandle>,
}

impl Drop for GpuPlugin {
    fn drop(&mut self) {
        if let Some(h) = self.refresh.take() {
            h.abort();
        }
    }
}

impl GpuPlugin {
    /// Discovers the GPUs and starts the background refresh. Never fails (see module doc).
    pub async fn start(cfg: GpuPluginConfig) -> Self {
        let source = match &cfg.discovery_executable {
            Some(p) => nvidia_smi::resolve_executable(Some(p)).map(Source::NvidiaSmi),
            None => {
                let probe = tokio::time::timeout(
                    cfg.timeout,
                    tokio::task::spawn_blocking(|| nvml::load().map(|_| ())),
                )
                .await;
                match probe {
                    Ok(Ok(Ok(()))) => Ok(Source::Nvml),
                    other => {
                        let why = match other {
                            Ok(Ok(Err(e))) => e,
                            Ok(Err(e)) => e.to_string(),
                            _ => "loading it timed out".into(),
                        };
                        info!(library = nvml::LIBRARY, reason = %why, "NVML is not available; looking for nvidia-smi");
                        nvidia_smi::resolve_executable(None)
                            .map(Source::NvidiaSmi)
                            .map_err(|e| format!("NVML is not available ({why}) and {e}"))
                    }
                }
            }
        };
        let (reading, mut problems) = match &source {
            Ok(s) => match read(s, cfg.timeout).await {
                Ok(r) => (Some(r), Vec::new()),
                Err(e) => (None, vec![format!("GPU discovery through {s} failed: {e}")]),
            },
            Err(e) if cfg.allowed == AllowedGpus::Auto => (
                None,
                vec![format!("no GPU discovery: {e}; the node offers no GPUs")],
            ),
            Err(e) => {
                info!(reason = %e, "no GPU discovery; offering the configured allowed-gpu-devices");
                (None, Vec::new())
            }
        };
        let info = reading.as_ref().map(|(i, _)| i);
        let (devices, build_problems) = build_devices(&cfg.allowed, info, cfg.major);
        problems.extend(build_problems);
        // Topology by position -> by minor number.
        let by_position = match (&source, &reading) {
            (_, Some((_, Some(t)))) => Some(t.clone()),
            (Ok(Source::NvidiaSmi(exe)), Some(_)) => read_topology(exe, cfg.timeout).await,
            _ => None,
        };
        let topology = match (by_position, info) {
            (Some(t), Some(i)) => {
                let minors: Vec<Option<u32>> = i.gpus.iter().map(|g| g.minor_number).collect();
                let t = t.remap(|pos| minors.get(pos as usize).copied().flatten());
                (!t.is_empty()).then_some(t)
            }
            _ => None,
        };
        for p in &problems {
            warn!(problem = %p, "GPU plugin");
        }
        info!(
            source = %source.as_ref().map(ToString::to_string).unwrap_or_else(|e| format!("none ({e})")),
            gpus = devices.len(),
            topology = topology.is_some(),
            "GPU discovery done"
        );
        let present: BTreeSet<u32> = info
            .map(|i| i.gpus.iter().filter_map(|g| g.minor_number).collect())
            .unwrap_or_default();
        let initial = PluginStatus {
            problems: problems.clone(),
            unhealthy: BTreeSet::new(),
            details: PluginDetails::Gpu(reading.map(|(i, _)| Arc::new(i))),
        };
        let (tx, rx) = watch::channel(initial);
        let refresh = match (source, cfg.refresh_interval, cfg.utilization_interval) {
            (Ok(s), every, sample_every) if every.is_some() || sample_every.is_some() => {
                let r = Refresher {
                    source: s,
                    timeout: cfg.timeout,
                    every,
                    sample_every,
                    last_samples: None,
                    sample_failures: 0,
                    allowed: cfg.allowed.clone(),
                    offered: devices.clone(),
                    present_at_start: present,
                    failures: u32::from(problems.iter().any(|p| p.starts_with("GPU discovery"))),
                };
                Some(tokio::spawn(r.run(tx)).abort_handle())
            }
            _ => None,
        };
        Self {
            devices,
            topology,
            status: rx,
            refresh,
        }
    }
}

/// The background refresh (see module doc).
struct Refresher {
    source: Source,
    timeout: Duration,
    /// The discovery refresh's period (None: no refresh).
    every: Option<Duration>,
    /// The utilization sample's period (None: no sampling).
    sample_every: Option<Duration>,
    /// The last good sample and its time, laid over each refreshed reading.
    last_samples: Option<(Vec<GpuUtilSample>, u64)>,
    sample_failures: u32,
    allowed: AllowedGpus,
    offered: Vec<Device>,
    present_at_start: BTreeSet<u32>,
    failures: u32,
}

impl Refresher {
    async fn run(mut self, tx: watch::Sender<PluginStatus>) {
        let start = tokio::time::Instant::now();
        let mut next_refresh = self.every.map(|e| start + e);
        let mut next_sample = self.sample_every.map(|e| start + e);
        loop {
            let Some(wake) = [next_refresh, next_sample].into_iter().flatten().min() else {
                return;
            };
            tokio::select! {
                _ = tx.closed() => return,
                _ = tokio::time::sleep_until(wake) => {}
            }
            let now = tokio::time::Instant::now();
            if let (Some(at), Some(every)) = (next_sample, self.sample_every) {
                if at <= now {
                    self.sample(&tx).await;
                    next_sample = Some(tokio::time::Instant::now() + every);
                }
            }
            if let (Some(at), Some(every)) = (next_refresh, self.every) {
                if at <= now {
                    if !self.refresh(&tx).await {
                        next_refresh = None;
                    } else {
                        next_refresh = Some(tokio::time::Instant::now() + every);
                    }
                }
            }
        }
    }

    /// One utilization sample, published over the last reading.
    async fn sample(&mut self, tx: &watch::Sender<PluginStatus>) {
        let at = spindle_common::time::now_ms();
        let got = sample(&self.source, self.timeout).await;
        let samples = match got {
            Ok(s) => {
                if self.sample_failures > 0 {
                    info!(
                        failures = self.sample_failures,
                        "GPU utilization sampling works again"
                    );
                }
                self.sample_failures = 0;
                Some(s)
            }
            Err(e) => {
                if self.sample_failures.is_multiple_of(MAX_REPEATED_FAILURES) {
                    warn!(failures = self.sample_failures + 1, error = %e,
                        "GPU utilization sample failed; no utilization is reported until one succeeds");
                }
                self.sample_failures = self.sample_failures.saturating_add(1);
                None
            }
        };
        self.last_samples = samples.clone().map(|s| (s, at));
        tx.send_modify(|s| {
            if let PluginDetails::Gpu(Some(info)) = &s.details {
                s.details =
                    PluginDetails::Gpu(Some(Arc::new(apply_samples(info, samples.as_deref(), at))));
            }
        });
    }

    /// One discovery refresh; false when it gave up.
    async fn refresh(&mut self, tx: &watch::Sender<PluginStatus>) -> bool {
        {
            match read(&self.source, self.timeout).await {
                Ok((info, _)) => {
                    if self.failures > 0 {
                        info!(failures = self.failures, "GPU discovery works again");
                    }
                    self.failures = 0;
                    let info = match &self.last_samples {
                        Some((s, at)) => apply_samples(&info, Some(s), *at),
                        None => info,
                    };
                    let status = self.assess(info);
                    tx.send_replace(status);
                }
                Err(e) => {
                    self.failures += 1;
                    warn!(failures = self.failures, error = %e, "GPU discovery failed");
                    let mut msg = format!(
                        "GPU discovery through {} failed {} time(s) in a row (last: {e}); showing the last good reading",
                        self.source, self.failures
                    );
                    let give_up = self.failures >= MAX_REPEATED_FAILURES;
                    if give_up {
                        msg.push_str(&format!(
                            "; gave up after {MAX_REPEATED_FAILURES} consecutive failures, restart the NodeManager to retry"
                        ));
                    }
                    tx.send_modify(|s| {
                        s.problems.retain(|p| !p.starts_with("GPU discovery"));
                        s.problems.push(msg);
                    });
                    if give_up {
                        warn!("GPU discovery gave up after {MAX_REPEATED_FAILURES} consecutive failures");
                        return false;
                    }
                }
            }
        }
        true
    }

    /// The status after a good reading.
    fn assess(&self, info: GpuDeviceInformation) -> PluginStatus {
        let now: BTreeSet<u32> = info.gpus.iter().filter_map(|g| g.minor_number).collect();
        let mut problems = Vec::new();
        let mut unhealthy = BTreeSet::new();
        for d in &self.offered {
            if self.present_at_start.contains(&d.minor) && !now.contains(&d.minor) {
                unhealthy.insert(d.minor);
                problems.push(format!(
                    "GPU {} (minor {}) is no longer reported by discovery; it is not handed out",
                    d.index, d.minor
                ));
            }
        }
        if let AllowedGpus::List(pairs) = &self.allowed {
            for (index, minor) in pairs {
                if !now.contains(minor) && !unhealthy.contains(minor) {
                    problems.push(format!(
                        "allowed GPU {index}:{minor} is not among the GPUs discovery found; it is offered as configured"
                    ));
                }
            }
        } else if self.offered.is_empty() && !now.is_empty() {
            problems.push(format!(
                "discovery now finds {} GPU(s) but the node registered with none; restart the NodeManager to offer them",
                now.len()
            ));
        }
        PluginStatus {
            problems,
            unhealthy,
            details: PluginDetails::Gpu(Some(Arc::new(info))),
        }
    }
}

impl DevicePlugin for GpuPlugin {
    fn resource_name(&self) -> &str {
        GPU
    }

    fn devices(&self) -> &[Device] {
        &self.devices
    }

    fn status(&self) -> watch::Receiver<PluginStatus> {
        self.status.clone()
    }

    fn choose(&self, free: &[&Device], count: usize) -> Vec<u32> {
        let mut sorted: Vec<&Device> = free.to_vec();
        sorted.sort_by_key(|d| d.index);
        let minors: Vec<u32> = sorted.iter().map(|d| d.minor).collect();
        match &self.topology {
            Some(t) => t.best_set(&minors, count),
            None => minors.into_iter().take(count).collect(),
        }
    }

    fn on_devices_allocated(&mut self, granted: &[&Device]) -> BTreeMap<String, String> {
        let mut idx: Vec<u32> = granted.iter().map(|d| d.index).collect();
        idx.sort_unstable();
        let list = idx.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        [
            (CUDA_VISIBLE_DEVICES.to_string(), list.clone()),
            (NVIDIA_VISIBLE_DEVICES.to_string(), list),
            (CUDA_DEVICE_ORDER.to_string(), "PCI_BUS_ID".to_string()),
        ]
        .into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(minors: &[Option<u32>]) -> GpuDeviceInformation {
        GpuDeviceInformation {
            driver_version: Some("1".into()),
            cuda_version: None,
            gpus: minors
                .iter()
                .enumerate()
                .map(|(i, m)| nvidia_smi::PerGpuDeviceInformation {
                    minor_number: *m,
                    pci_bus_id: Some(format!("0000:{i:02}:00.0")),
                    product_name: Some("Tesla T4".into()),
                    memory_total_mib: Some(15360),
                    ..Default::default()
                })
                .collect(),
        }
    }

    #[test]
    fn auto_uses_positions_and_minor_numbers() {
        let (d, p) = build_devices(
            &AllowedGpus::Auto,
            Some(&info(&[Some(0), Some(4), None, Some(4)])),
            195,
        );
        assert_eq!(
            d.iter().map(|d| (d.index, d.minor)).collect::<Vec<_>>(),
            vec![(0, 0), (1, 4)]
        );
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(
            p[0].contains("no minor number") && p[1].contains("minor number 4"),
            "{p:?}"
        );
        assert_eq!(d[1].dev_path.as_deref(), Some(Path::new("/dev/nvidia4")));
        assert_eq!(d[1].model.as_deref(), Some("Tesla T4"));
        let (none, p) = build_devices(&AllowedGpus::Auto, None, 195);
        assert!(none.is_empty() && p.is_empty());
    }

    #[test]
    fn explicit_lists_are_offered_as_configured() {
        let allowed = AllowedGpus::List(vec![(1, 1), (0, 0), (3, 7)]);
        let (d, p) = build_devices(&allowed, Some(&info(&[Some(0), Some(1)])), 195);
        assert_eq!(
            d.iter().map(|d| (d.index, d.minor)).collect::<Vec<_>>(),
            vec![(0, 0), (1, 1), (3, 7)]
        );
        assert_eq!(p.len(), 1);
        assert!(p[0].contains("3:7"), "{p:?}");
        // Without discovery nothing is checked.
        let (d, p) = build_devices(&allowed, None, 195);
        assert_eq!(d.len(), 3);
        assert!(p.is_empty());
    }

    #[test]
    fn env_names_exactly_the_granted_indexes() {
        let (devices, _) =
            build_devices(&AllowedGpus::List(vec![(0, 0), (1, 1), (2, 2)]), None, 195);
        let mut p = GpuPlugin {
            devices,
            topology: None,
            status: watch::channel(PluginStatus::default()).1,
            refresh: None,
        };
        let d = p.devices.clone();
        let env = p.on_devices_allocated(&[&d[2], &d[0]]);
        assert_eq!(env[CUDA_VISIBLE_DEVICES], "0,2");
        assert_eq!(env[NVIDIA_VISIBLE_DEVICES], "0,2");
        assert_eq!(env[CUDA_DEVICE_ORDER], "PCI_BUS_ID");
        assert_eq!(p.choose(&[&d[2], &d[1]], 1), vec![1]);
    }

    #[test]
    fn samples_are_attributed_to_the_containers_holding_the_gpus() {
        let mut i = info(&[Some(0), Some(1), Some(2)]);
        for (n, g) in i.gpus.iter_mut().enumerate() {
            g.uuid = Some(format!("GPU-{n}"));
            g.gpu_util = Some(99.0);
        }
        let sample = |index: u32, uuid: Option<&str>, util: Option<f32>| GpuUtilSample {
            index,
            uuid: uuid.map(str::to_string),
            utilization: util,
            memory_used_mib: Some(100 * u64::from(index)),
            temperature_c: Some(30.0),
        };
        // GPU 0 by UUID (listed last), GPU 1 by position, GPU 2 without a value.
        let got = apply_samples(
            &i,
            Some(&[
                sample(1, None, Some(85.0)),
                sample(2, Some("GPU-2"), None),
                sample(7, Some("GPU-0"), Some(0.0)),
            ]),
            5_000,
        );
        let u: Vec<_> = got
            .gpus
            .iter()
            .map(|g| (g.gpu_util, g.sampled_at_ms))
            .collect();
        assert_eq!(
            u,
            vec![
                (Some(0.0), Some(5_000)),
                (Some(85.0), Some(5_000)),
                (None, None)
            ]
        );
        let (devices, _) = build_devices(&AllowedGpus::Auto, Some(&got), 195);
        let c1 = crate::plugins::tests::cid(1);
        let c2 = crate::plugins::tests::cid(2);
        let view = ResourceView {
            resource_name: GPU.into(),
            assigned: vec![
                (c1, devices[0].clone()),
                (c2, devices[1].clone()),
                (c2, devices[2].clone()),
            ],
            devices,
            problems: vec![],
            details: PluginDetails::Gpu(Some(Arc::new(got.clone()))),
        };
        assert_eq!(samples(&view).len(), 2, "GPU 2 has no sampled value");
        let per = container_utilization(&view);
        assert_eq!(per.len(), 2);
        assert_eq!(per[0].container_id, c1);
        assert_eq!(per[0].gpus[0].utilization_percent, 0.0);
        assert_eq!(per[0].gpus[0].uuid.as_deref(), Some("GPU-0"));
        assert_eq!(per[1].gpus.len(), 1, "only the sampled GPU of c2");
        assert_eq!(per[1].gpus[0].utilization_percent, 85.0);
        assert_eq!(per[1].gpus[0].memory_used_mib, Some(100));
        // A failed sample clears what the samples set; discovery's own readings stay.
        let cleared = apply_samples(&got, None, 6_000);
        assert!(cleared.gpus.iter().all(|g| g.sampled_at_ms.is_none()));
        assert_eq!(cleared.gpus[0].gpu_util, None);
        assert_eq!(apply_samples(&i, None, 6_000), i);
        let view = ResourceView {
            details: PluginDetails::Gpu(Some(Arc::new(cleared))),
            ..view
        };
        assert!(container_utilization(&view).is_empty());
    }

    #[test]
    fn vanished_gpus_become_unhealthy() {
        let (offered, _) = build_devices(&AllowedGpus::Auto, Some(&info(&[Some(0), Some(1)])), 195);
        let r = Refresher {
            source: Source::Nvml,
            timeout: Duration::from_secs(1),
            every: Some(Duration::from_secs(1)),
            sample_every: None,
            last_samples: None,
            sample_failures: 0,
            allowed: AllowedGpus::Auto,
            offered,
            present_at_start: [0, 1].into(),
            failures: 0,
        };
        let s = r.assess(info(&[Some(0)]));
        assert_eq!(s.unhealthy, [1].into());
        assert!(s.problems[0].contains("minor 1"), "{:?}", s.problems);
        assert!(r.assess(info(&[Some(0), Some(1)])).problems.is_empty());
    }
}
