//! Resource plugins: the devices of this node (GPUs, FPGAs), which container holds which, and
//! what a container is told about its devices.
//!
//! The shape is YARN's pluggable device framework: a [`DevicePlugin`] *discovers* its devices
//! once at NM start (id, device node with major/minor, bus id, health, and for GPUs model and
//! memory), *chooses* which free devices a container gets (the GPU plugin by topology), gives
//! the container's *runtime environment* for the devices granted, and hears when they are
//! *released*. The framework ([`Plugins`]) keeps the bookkeeping that every plugin would
//! otherwise repeat: free/assigned tables, refusing asks that do not fit, rolling back a
//! partial grant, recovery after an NM restart, the device numbers the executor must deny, and
//! the views REST and the health report read. Another accelerator is one new module that
//! implements [`DevicePlugin`] plus one line in [`Plugins::from_config`].
//!
//! The [`crate::manager`] actor owns the [`Plugins`], so the tables need no lock. What changes
//! behind the actor's back (a GPU's utilization, a discovery that starts failing) is published
//! by each plugin on a `watch` channel ([`PluginStatus`]), which the actor, REST and the status
//! updater read without asking anyone. Enforcement (cgroup device lists) belongs to the
//! executor: plugins only say which device numbers a container may and may not use
//! ([`Grant`], [`Plugins::managed_devices`]).

pub mod exec;
pub mod fpga;
pub mod gpu;
pub mod nvidia_smi;
pub mod nvml;
pub mod topology;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use spindle_common::ids::ContainerId;
use spindle_common::resource::Resource;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::config::ResourcePluginsConfig;
use crate::isolation::DeviceNumber;

pub use nvidia_smi::GpuDeviceInformation;

/// A container's ask could not be met.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("resource plugin {plugin}: {message}")]
pub struct PluginError {
    pub plugin: String,
    pub message: String,
}

/// One device a plugin manages (YARN's `Device`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// The number containers know the device by: a GPU's index in `CUDA_VISIBLE_DEVICES`, an
    /// FPGA's `aclN` number.
    pub index: u32,
    /// Device node numbers: what the devices cgroup allows or denies. The minor number is
    /// also the device's identity inside the framework (stable across config changes).
    pub major: u32,
    pub minor: u32,
    pub dev_path: Option<PathBuf>,
    /// PCI address, e.g. `00000000:18:00.0`.
    pub bus_id: Option<String>,
    /// As discovered at start; [`PluginStatus::unhealthy`] has the live view.
    pub healthy: bool,
    pub status: String,
    /// GPU product name / FPGA board, when known.
    pub model: Option<String>,
    pub memory_mib: Option<u64>,
    pub uuid: Option<String>,
    /// A vendor alias (`acl0` for Intel FPGAs).
    pub alias: Option<String>,
}

impl Device {
    /// The character device the cgroup names (`c 195:2`).
    pub fn number(&self) -> DeviceNumber {
        DeviceNumber::char(self.major, self.minor)
    }
}

/// Plugin-specific live details that REST shows.
#[derive(Debug, Clone, Default)]
pub enum PluginDetails {
    #[default]
    None,
    /// The last good `nvidia-smi`/NVML reading (None until one succeeded).
    Gpu(Option<Arc<GpuDeviceInformation>>),
}

/// What a plugin publishes about itself while the NM runs.
#[derive(Debug, Clone, Default)]
pub struct PluginStatus {
    /// Human-readable problems (discovery failing, a configured device missing, ...): they go
    /// into the node's health report and REST. Empty when all is well.
    pub problems: Vec<String>,
    /// Minor numbers of devices that must not be handed out now (vanished, failed).
    pub unhealthy: BTreeSet<u32>,
    pub details: PluginDetails,
}

/// The device-plugin interface (YARN's `DevicePlugin` + `DevicePluginScheduler`).
///
/// Discovery happens when the plugin is built (see [`gpu::GpuPlugin::start`]); from then on
/// the device set is fixed, as YARN's is, because the node registered that many units.
pub trait DevicePlugin: Send + 'static {
    /// The resource type, e.g. `yarn.io/gpu`.
    fn resource_name(&self) -> &str;
    /// The devices found at start, in index order.
    fn devices(&self) -> &[Device];
    /// The plugin's live status channel.
    fn status(&self) -> watch::Receiver<PluginStatus>;
    /// Picks `count` devices among `free` (never fewer than `count` are passed) and returns
    /// their minor numbers. Stateless, like YARN's `DevicePluginScheduler`; the default takes
    /// the lowest indexes.
    fn choose(&self, free: &[&Device], count: usize) -> Vec<u32> {
        let mut f: Vec<&&Device> = free.iter().collect();
        f.sort_by_key(|d| d.index);
        f.into_iter().take(count).map(|d| d.minor).collect()
    }
    /// Environment for a container granted `granted` (YARN's `onDevicesAllocated`).
    fn on_devices_allocated(&mut self, granted: &[&Device]) -> BTreeMap<String, String>;
    /// The container that held `released` is complete (YARN's `onDevicesReleased`).
    fn on_devices_released(&mut self, _released: &[&Device]) {}
}

/// What the plugins give one container.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grant {
    /// Added to the container's environment (after the launch context's, before NM's own).
    pub env: BTreeMap<String, String>,
    /// The device nodes it may use; every other managed one is denied.
    pub devices: Vec<DeviceNumber>,
}

/// One plugin with its bookkeeping.
struct Slot {
    plugin: Box<dyn DevicePlugin>,
    status: watch::Receiver<PluginStatus>,
    /// Container -> minor numbers it holds. May name minors the plugin no longer knows
    /// (recovered from a store written with other devices): they stay held, never reused.
    assigned: BTreeMap<ContainerId, Vec<u32>>,
}

impl Slot {
    fn name(&self) -> &str {
        self.plugin.resource_name()
    }

    fn held(&self) -> BTreeSet<u32> {
        self.assigned.values().flatten().copied().collect()
    }

    fn devices_of(&self, minors: &[u32]) -> Vec<&Device> {
        self.plugin
            .devices()
            .iter()
            .filter(|d| minors.contains(&d.minor))
            .collect()
    }
}

/// A read-only view of one resource for REST (`/ws/v1/node/resources/{name}`).
#[derive(Debug, Clone)]
pub struct ResourceView {
    pub resource_name: String,
    /// Every device, with `healthy` as it is now.
    pub devices: Vec<Device>,
    /// (container, device) for every device held, in container order.
    pub assigned: Vec<(ContainerId, Device)>,
    pub problems: Vec<String>,
    pub details: PluginDetails,
}

/// The health every plugin publishes, readable from any task (status updater, REST).
#[derive(Clone, Default)]
pub struct HealthView {
    sources: Vec<(String, watch::Receiver<PluginStatus>)>,
    /// The node's own checks (health script, disks), which decide `healthy`.
    node: Option<watch::Receiver<crate::health::NodeCheck>>,
}

impl std::fmt::Debug for HealthView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.sources.iter().map(|(n, _)| n))
            .finish()
    }
}

impl HealthView {
    /// Adds the node's own checks ([`crate::health`]).
    pub fn with_node_checks(mut self, rx: watch::Receiver<crate::health::NodeCheck>) -> Self {
        self.node = Some(rx);
        self
    }

    /// What the node's own checks say; plugins never make a node unhealthy.
    pub fn healthy(&self) -> bool {
        self.node.as_ref().is_none_or(|n| n.borrow().healthy)
    }

    /// The node's health report text: the node checks' findings, then the plugins' problems,
    /// `; `-joined, each plugin problem prefixed with its resource; empty when none. Plugin
    /// problems keep the node healthy (schedulable) for work that needs no device: a broken
    /// `nvidia-smi` must not take the CPUs offline.
    pub fn report(&self) -> String {
        let mut parts = Vec::new();
        if let Some(n) = &self.node {
            let n = n.borrow();
            if !n.report.is_empty() {
                parts.push(n.report.clone());
            }
        }
        for (name, rx) in &self.sources {
            for p in &rx.borrow().problems {
                parts.push(format!("{name}: {p}"));
            }
        }
        parts.join("; ")
    }
}

/// The plugins of this node.
#[derive(Default)]
pub struct Plugins {
    slots: Vec<Slot>,
}

impl std::fmt::Debug for Plugins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.slots.iter().map(|s| s.name()))
            .finish()
    }
}

impl Plugins {
    pub fn new(plugins: Vec<Box<dyn DevicePlugin>>) -> Self {
        Self {
            slots: plugins
                .into_iter()
                .map(|plugin| Slot {
                    status: plugin.status(),
                    plugin,
                    assigned: BTreeMap::new(),
                })
                .collect(),
        }
    }

    /// Builds the plugins `yarn.nodemanager.resource-plugins` enables, running discovery
    /// (bounded by the discovery timeout). Never fails: a plugin whose discovery fails offers
    /// no devices and says why in its status.
    pub async fn from_config(conf: &ResourcePluginsConfig) -> Self {
        let mut plugins: Vec<Box<dyn DevicePlugin>> = Vec::new();
        if let Some(g) = &conf.gpu {
            plugins.push(Box::new(gpu::GpuPlugin::start(g.clone()).await));
        }
        if let Some(f) = &conf.fpga {
            plugins.push(Box::new(fpga::FpgaPlugin::start(f.clone()).await));
        }
        let p = Self::new(plugins);
        for s in &p.slots {
            let problems = s.status.borrow().problems.clone();
            info!(
                resource = s.name(),
                devices = s.plugin.devices().len(),
                ?problems,
                "resource plugin ready"
            );
        }
        p
    }

    /// Sets every plugin's device count on the node's base resource.
    pub fn node_resource(&self, base: &Resource) -> Resource {
        let mut r = base.clone();
        for s in &self.slots {
            r.set(s.name(), s.plugin.devices().len() as i64);
        }
        r
    }

    /// Attributes this node reports to the RM (YARN's distributed `nm.yarn.io/` attributes),
    /// from GPU discovery; one that discovery does not know is left out, never guessed:
    ///
    /// - `gpu-model`: the product name; `mixed` when the GPUs differ;
    /// - `gpu-count`: the GPUs the NM manages (whenever the GPU plugin is enabled);
    /// - `gpu-memory-mb`: framebuffer MiB per GPU, the smallest when they differ (only when
    ///   every GPU reports it);
    /// - `gpu-driver-version`, `cuda-version`: from `nvidia-smi` or NVML;
    /// - `nvlink-cluster-uuid`, `nvlink-clique`: the NVLink fabric of the managed GPUs, when
    ///   every one reports the same one. The clique is `<ClusterUUID>.<CliqueId>`, as NVIDIA's
    ///   `nvidia.com/gpu.clique` label: clique ids are only unique within one cluster, so a
    ///   gang kept to one value of it stays inside one NVLink partition.
    pub fn node_attributes(&self) -> BTreeMap<String, String> {
        use spindle_common::records::tracker as t;
        let mut out = BTreeMap::new();
        let Some(slot) = self
            .slots
            .iter()
            .find(|s| s.name() == spindle_common::resource::GPU)
        else {
            return out;
        };
        let devices = slot.plugin.devices();
        let models: BTreeSet<&String> = devices.iter().filter_map(|d| d.model.as_ref()).collect();
        match models.len() {
            0 => {}
            1 => {
                if let Some(m) = models.into_iter().next() {
                    out.insert(t::GPU_MODEL_ATTRIBUTE.to_string(), m.clone());
                }
            }
            _ => {
                out.insert(t::GPU_MODEL_ATTRIBUTE.to_string(), "mixed".to_string());
            }
        }
        out.insert(
            t::GPU_COUNT_ATTRIBUTE.to_string(),
            devices.len().to_string(),
        );
        let memory: Option<Vec<u64>> = devices.iter().map(|d| d.memory_mib).collect();
        if let Some(smallest) = memory.and_then(|m| m.into_iter().min()) {
            out.insert(t::GPU_MEMORY_MB_ATTRIBUTE.to_string(), smallest.to_string());
        }
        let details = slot.status.borrow().details.clone();
        if let PluginDetails::Gpu(Some(info)) = details {
            if let Some(v) = &info.driver_version {
                out.insert(t::GPU_DRIVER_VERSION_ATTRIBUTE.to_string(), v.clone());
            }
            if let Some(v) = &info.cuda_version {
                out.insert(t::CUDA_VERSION_ATTRIBUTE.to_string(), v.clone());
            }
            // The discovered GPUs this node manages (matched by minor number).
            let managed: Vec<&nvidia_smi::PerGpuDeviceInformation> = info
                .gpus
                .iter()
                .filter(|g| {
                    g.minor_number
                        .is_some_and(|m| devices.iter().any(|d| d.minor == m))
                })
                .collect();
            // The one value every managed GPU reports, or None.
            let common = |f: fn(&nvidia_smi::PerGpuDeviceInformation) -> Option<&String>| {
                let all: Option<BTreeSet<&String>> = managed.iter().map(|g| f(g)).collect();
                match all {
                    Some(set) if set.len() == 1 && managed.len() == devices.len() => {
                        set.into_iter().next().cloned()
                    }
                    _ => None,
                }
            };
            let cluster = common(|g| g.fabric_cluster_uuid.as_ref());
            let clique = common(|g| g.fabric_clique_id.as_ref());
            if let Some(c) = &cluster {
                out.insert(t::NVLINK_CLUSTER_UUID_ATTRIBUTE.to_string(), c.clone());
                if let Some(q) = clique {
                    out.insert(t::NVLINK_CLIQUE_ATTRIBUTE.to_string(), format!("{c}.{q}"));
                }
            }
        }
        out
    }

    /// Every device node any plugin manages: what a container without a grant is denied.
    pub fn managed_devices(&self) -> Vec<DeviceNumber> {
        let mut v: Vec<DeviceNumber> = self
            .slots
            .iter()
            .flat_map(|s| s.plugin.devices().iter().map(Device::number))
            .collect();
        v.sort();
        v.dedup();
        v
    }

    pub fn health_view(&self) -> HealthView {
        HealthView {
            sources: self
                .slots
                .iter()
                .map(|s| (s.name().to_string(), s.status.clone()))
                .collect(),
            node: None,
        }
    }

    /// Grants a container the devices its ask names, from every plugin whose type it asks
    /// for; all or nothing (a later plugin's refusal releases what earlier ones gave).
    pub fn assign(&mut self, id: ContainerId, ask: &Resource) -> Result<Grant, PluginError> {
        let mut grant = Grant::default();
        for i in 0..self.slots.len() {
            let want = ask.get(self.slots[i].name());
            if want <= 0 {
                continue;
            }
            match Self::assign_one(&mut self.slots[i], id, want) {
                Ok(g) => {
                    grant.env.extend(g.env);
                    grant.devices.extend(g.devices);
                }
                Err(e) => {
                    for s in &mut self.slots[..i] {
                        Self::release_one(s, id);
                    }
                    return Err(e);
                }
            }
        }
        Ok(grant)
    }

    fn assign_one(slot: &mut Slot, id: ContainerId, want: i64) -> Result<Grant, PluginError> {
        let fail = |message: String| PluginError {
            plugin: slot.name().to_string(),
            message,
        };
        if slot.assigned.contains_key(&id) {
            return Err(fail(format!("container {id} already holds devices")));
        }
        let held = slot.held();
        let unhealthy = slot.status.borrow().unhealthy.clone();
        let devices = slot.plugin.devices();
        let free: Vec<&Device> = devices
            .iter()
            .filter(|d| !held.contains(&d.minor) && !unhealthy.contains(&d.minor))
            .collect();
        let count = usize::try_from(want).unwrap_or(usize::MAX);
        if count > free.len() {
            return Err(fail(format!(
                "container {id} asks for {want} {name} but only {free} of the node's {total} are free \
                 ({busy} assigned, {bad} unhealthy)",
                name = slot.name(),
                free = free.len(),
                total = devices.len(),
                busy = devices.iter().filter(|d| held.contains(&d.minor)).count(),
                bad = devices.iter().filter(|d| unhealthy.contains(&d.minor)).count(),
            )));
        }
        let chosen = slot.plugin.choose(&free, count);
        let distinct: BTreeSet<u32> = chosen.iter().copied().collect();
        if chosen.len() != count
            || distinct.len() != count
            || !chosen.iter().all(|m| free.iter().any(|d| d.minor == *m))
        {
            return Err(fail(format!(
                "the plugin chose {chosen:?} for an ask of {count} free devices: a plugin bug"
            )));
        }
        let granted: Vec<Device> = free
            .iter()
            .filter(|d| distinct.contains(&d.minor))
            .map(|d| (*d).clone())
            .collect();
        let refs: Vec<&Device> = granted.iter().collect();
        let env = slot.plugin.on_devices_allocated(&refs);
        slot.assigned.insert(id, chosen);
        Ok(Grant {
            env,
            devices: granted.iter().map(Device::number).collect(),
        })
    }

    fn release_one(slot: &mut Slot, id: ContainerId) {
        if let Some(minors) = slot.assigned.remove(&id) {
            let devices: Vec<Device> = slot.devices_of(&minors).into_iter().cloned().collect();
            let refs: Vec<&Device> = devices.iter().collect();
            slot.plugin.on_devices_released(&refs);
        }
    }

    /// The container is complete: its devices are free again.
    pub fn release(&mut self, id: ContainerId) {
        for s in &mut self.slots {
            Self::release_one(s, id);
        }
    }

    /// What a container already holds, as a new grant would give it (environment and device
    /// nodes): for a re-initialized container's new process. The plugins are told again
    /// (`on_devices_allocated`), as YARN does for a relaunch.
    pub fn grant_of(&mut self, id: &ContainerId) -> Grant {
        let mut grant = Grant::default();
        for s in &mut self.slots {
            let Some(minors) = s.assigned.get(id).cloned() else {
                continue;
            };
            let devices: Vec<Device> = s.devices_of(&minors).into_iter().cloned().collect();
            let refs: Vec<&Device> = devices.iter().collect();
            grant.env.extend(s.plugin.on_devices_allocated(&refs));
            grant.devices.extend(devices.iter().map(Device::number));
        }
        grant
    }

    /// What a container holds, by resource name, as minor numbers (for the recovery store).
    pub fn assigned_minors(&self, id: &ContainerId) -> BTreeMap<String, Vec<u32>> {
        self.slots
            .iter()
            .filter_map(|s| {
                s.assigned
                    .get(id)
                    .map(|m| (s.name().to_string(), m.clone()))
            })
            .collect()
    }

    /// Gives a re-adopted container back the devices it held before the NM restarted, so no
    /// new container gets them. Devices this NM no longer knows stay held (and logged):
    /// the process may still be using them.
    pub fn restore(&mut self, id: ContainerId, held: &BTreeMap<String, Vec<u32>>) {
        for (name, minors) in held {
            let Some(slot) = self.slots.iter_mut().find(|s| s.name() == name) else {
                warn!(container_id = %id, resource = %name, ?minors,
                    "recovered container holds devices of a plugin that is no longer enabled");
                continue;
            };
            let others = slot.held();
            if let Some(m) = minors.iter().find(|m| others.contains(m)) {
                warn!(container_id = %id, resource = %name, minor = m,
                    "recovered container holds a device another recovered container holds too");
            }
            let known = slot.devices_of(minors).len();
            if known != minors.len() {
                warn!(container_id = %id, resource = %name, ?minors,
                    "recovered container holds devices discovery no longer reports; they stay held");
            }
            info!(container_id = %id, resource = %name, ?minors, "devices re-assigned to a recovered container");
            slot.assigned.insert(id, minors.clone());
        }
    }

    /// REST's view of `resource_name`, or None when no plugin manages it.
    pub fn view(&self, resource_name: &str) -> Option<ResourceView> {
        let s = self.slots.iter().find(|s| s.name() == resource_name)?;
        let status = s.status.borrow().clone();
        let devices: Vec<Device> = s
            .plugin
            .devices()
            .iter()
            .map(|d| {
                let mut d = d.clone();
                if status.unhealthy.contains(&d.minor) {
                    d.healthy = false;
                    d.status = "UNHEALTHY".into();
                }
                d
            })
            .collect();
        let assigned = s
            .assigned
            .iter()
            .flat_map(|(c, minors)| {
                let devices = &devices;
                minors.iter().filter_map(move |m| {
                    devices
                        .iter()
                        .find(|d| d.minor == *m)
                        .map(|d| (*c, d.clone()))
                })
            })
            .collect();
        Some(ResourceView {
            resource_name: resource_name.to_string(),
            devices,
            assigned,
            problems: status.problems,
            details: status.details,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use spindle_common::ids::{ApplicationAttemptId, ApplicationId};
    use spindle_common::resource::{FPGA, GPU};

    /// A plugin with fixed devices, for framework tests.
    pub(crate) struct FakeDevices {
        pub name: &'static str,
        pub devices: Vec<Device>,
        pub status: watch::Sender<PluginStatus>,
        pub released: Vec<u32>,
    }

    pub(crate) fn device(index: u32, major: u32, minor: u32) -> Device {
        Device {
            index,
            major,
            minor,
            dev_path: None,
            bus_id: None,
            healthy: true,
            status: "OK".into(),
            model: None,
            memory_mib: None,
            uuid: None,
            alias: None,
        }
    }

    impl FakeDevices {
        pub(crate) fn new(name: &'static str, major: u32, n: u32) -> Self {
            Self {
                name,
                devices: (0..n).map(|i| device(i, major, i)).collect(),
                status: watch::channel(PluginStatus::default()).0,
                released: vec![],
            }
        }
    }

    impl DevicePlugin for FakeDevices {
        fn resource_name(&self) -> &str {
            self.name
        }
        fn devices(&self) -> &[Device] {
            &self.devices
        }
        fn status(&self) -> watch::Receiver<PluginStatus> {
            self.status.subscribe()
        }
        fn on_devices_allocated(&mut self, granted: &[&Device]) -> BTreeMap<String, String> {
            let list = granted
                .iter()
                .map(|d| d.index.to_string())
                .collect::<Vec<_>>()
                .join(",");
            [(
                format!("{}_DEVICES", self.name.replace(['.', '/'], "_")),
                list,
            )]
            .into()
        }
        fn on_devices_released(&mut self, released: &[&Device]) {
            self.released.extend(released.iter().map(|d| d.minor));
        }
    }

    pub(crate) fn cid(seq: u64) -> ContainerId {
        ContainerId::new(
            ApplicationAttemptId::new(ApplicationId::new(1, 1), 1),
            0,
            seq,
        )
    }

    /// One test GPU: model, MiB, NVLink fabric (cluster UUID, clique id).
    type TestGpu<'a> = (&'a str, u64, Option<(&'a str, &'a str)>);

    /// A GPU plugin whose devices and last reading are `gpus`.
    fn gpu_plugin(gpus: &[TestGpu<'_>]) -> FakeDevices {
        let mut f = FakeDevices::new(GPU, 195, gpus.len() as u32);
        let mut info = GpuDeviceInformation {
            driver_version: Some("570.86.15".into()),
            cuda_version: Some("12.8".into()),
            gpus: Vec::new(),
        };
        for (d, (model, mib, fabric)) in f.devices.iter_mut().zip(gpus) {
            d.model = Some(model.to_string());
            d.memory_mib = Some(*mib);
            info.gpus.push(nvidia_smi::PerGpuDeviceInformation {
                minor_number: Some(d.minor),
                product_name: Some(model.to_string()),
                memory_total_mib: Some(*mib),
                fabric_cluster_uuid: fabric.map(|(c, _)| c.to_string()),
                fabric_clique_id: fabric.map(|(_, q)| q.to_string()),
                ..Default::default()
            });
        }
        f.status.send_replace(PluginStatus {
            details: PluginDetails::Gpu(Some(Arc::new(info))),
            ..Default::default()
        });
        f
    }

    #[test]
    fn node_attributes_come_from_discovery() {
        use spindle_common::records::tracker as t;
        let fab = Some(("3ba4fc1b-46e0-4e42-9c32-3f7a5d4b0c11", "32766"));
        let p = Plugins::new(vec![Box::new(gpu_plugin(&[
            ("NVIDIA GB200", 189471, fab),
            ("NVIDIA GB200", 189471, fab),
        ]))]);
        let a = p.node_attributes();
        let want: BTreeMap<String, String> = [
            (t::GPU_MODEL_ATTRIBUTE, "NVIDIA GB200"),
            (t::GPU_COUNT_ATTRIBUTE, "2"),
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
        assert_eq!(a, want);

        // Mixed models and memory; GPUs in different cliques (or one outside any fabric):
        // the smallest memory, and no fabric attributes rather than a made-up one.
        let p = Plugins::new(vec![Box::new(gpu_plugin(&[
            ("NVIDIA H100 80GB HBM3", 81559, Some(("c", "1"))),
            ("NVIDIA H100 NVL", 95830, Some(("c", "2"))),
            ("NVIDIA H100 NVL", 95830, None),
        ]))]);
        let a = p.node_attributes();
        assert_eq!(a[t::GPU_MODEL_ATTRIBUTE], "mixed");
        assert_eq!(a[t::GPU_COUNT_ATTRIBUTE], "3");
        assert_eq!(a[t::GPU_MEMORY_MB_ATTRIBUTE], "81559");
        assert!(!a.contains_key(t::NVLINK_CLIQUE_ATTRIBUTE), "{a:?}");
        assert!(!a.contains_key(t::NVLINK_CLUSTER_UUID_ATTRIBUTE), "{a:?}");

        // No reading (discovery failed, explicit device list): only what the devices say.
        let p = Plugins::new(vec![Box::new(FakeDevices::new(GPU, 195, 2))]);
        let a = p.node_attributes();
        assert_eq!(a.len(), 1, "{a:?}");
        assert_eq!(a[t::GPU_COUNT_ATTRIBUTE], "2");
        // No GPU plugin: nothing.
        let p = Plugins::new(vec![Box::new(FakeDevices::new(FPGA, 246, 2))]);
        assert!(p.node_attributes().is_empty());
    }

    #[test]
    fn assigns_distinct_devices_and_releases_them() {
        let mut p = Plugins::new(vec![Box::new(FakeDevices::new(GPU, 195, 2))]);
        assert_eq!(p.node_resource(&Resource::new(1, 1)).get(GPU), 2);
        assert_eq!(
            p.managed_devices(),
            vec![DeviceNumber::char(195, 0), DeviceNumber::char(195, 1)]
        );
        let ask = Resource::new(1, 1).with(GPU, 1);
        let a = p.assign(cid(1), &ask).unwrap();
        let b = p.assign(cid(2), &ask).unwrap();
        assert_eq!(a.devices, vec![DeviceNumber::char(195, 0)]);
        assert_eq!(b.devices, vec![DeviceNumber::char(195, 1)]);
        assert_eq!(a.env["yarn_io_gpu_DEVICES"], "0");
        let e = p.assign(cid(3), &ask).unwrap_err();
        assert!(
            e.message
                .contains("only 0 of the node's 2 are free (2 assigned"),
            "{e}"
        );
        // No GPU asked: no grant, nothing held.
        assert_eq!(
            p.assign(cid(4), &Resource::new(1, 1)).unwrap(),
            Grant::default()
        );
        assert_eq!(
            p.assigned_minors(&cid(2)),
            [(GPU.to_string(), vec![1])].into()
        );
        p.release(cid(1));
        assert!(p.assigned_minors(&cid(1)).is_empty());
        assert_eq!(
            p.assign(cid(3), &ask).unwrap().devices,
            vec![DeviceNumber::char(195, 0)]
        );
        let v = p.view(GPU).unwrap();
        assert_eq!(v.assigned.len(), 2);
        assert!(p.view(FPGA).is_none());
    }

    #[test]
    fn a_partial_grant_is_rolled_back_and_unhealthy_devices_are_skipped() {
        let gpus = FakeDevices::new(GPU, 195, 2);
        let status = gpus.status.clone();
        let mut p = Plugins::new(vec![
            Box::new(gpus),
            Box::new(FakeDevices::new(FPGA, 246, 1)),
        ]);
        let both = Resource::new(1, 1).with(GPU, 1).with(FPGA, 2);
        assert!(p.assign(cid(1), &both).is_err());
        // The GPU given before the FPGA refusal is free again.
        assert!(p.assigned_minors(&cid(1)).is_empty());
        status.send_modify(|s| {
            s.unhealthy.insert(0);
            s.problems.push("GPU 0 vanished".into());
        });
        let g = p.assign(cid(2), &Resource::new(1, 1).with(GPU, 1)).unwrap();
        assert_eq!(g.devices, vec![DeviceNumber::char(195, 1)]);
        let e = p
            .assign(cid(3), &Resource::new(1, 1).with(GPU, 1))
            .unwrap_err();
        assert!(e.message.contains("1 unhealthy"), "{e}");
        assert_eq!(p.health_view().report(), "yarn.io/gpu: GPU 0 vanished");
        assert!(!p.view(GPU).unwrap().devices[0].healthy);
    }

    #[test]
    fn recovered_assignments_are_never_handed_out_again() {
        let mut p = Plugins::new(vec![Box::new(FakeDevices::new(GPU, 195, 4))]);
        p.restore(cid(1), &[(GPU.to_string(), vec![0, 2])].into());
        // A minor discovery no longer knows stays held too.
        p.restore(cid(2), &[(GPU.to_string(), vec![9])].into());
        p.restore(cid(3), &[("nvidia.com/gpu".to_string(), vec![1])].into());
        let g = p.assign(cid(4), &Resource::new(1, 1).with(GPU, 2)).unwrap();
        assert_eq!(
            g.devices,
            vec![DeviceNumber::char(195, 1), DeviceNumber::char(195, 3)]
        );
        assert!(p.assign(cid(5), &Resource::new(1, 1).with(GPU, 1)).is_err());
        assert_eq!(
            p.assigned_minors(&cid(2)),
            [(GPU.to_string(), vec![9])].into()
        );
        p.release(cid(1));
        assert!(p.assign(cid(5), &Resource::new(1, 1).with(GPU, 2)).is_ok());
    }
}
