//! GPU discovery through NVML (`libnvidia-ml.so.1`), loaded at run time by `nvml-wrapper`.
//!
//! The library is opened with `dlopen` when discovery runs, so the NM builds and runs on
//! machines without it; there [`load`] fails and the GPU plugin falls back to `nvidia-smi`.
//! NVML calls are synchronous and can block on a wedged driver, so callers run them on the
//! blocking pool under the discovery timeout.

use std::ffi::OsStr;

use nvml_wrapper::enum_wrappers::device::{TemperatureSensor, TemperatureThreshold, TopologyLevel};
use nvml_wrapper::Nvml;

use super::nvidia_smi::{GpuDeviceInformation, GpuUtilSample, PerGpuDeviceInformation};
use super::topology::{Link, Topology};

/// The versioned soname, present wherever the driver is installed (the unversioned
/// `libnvidia-ml.so` only comes with development packages).
pub const LIBRARY: &str = "libnvidia-ml.so.1";
/// NVML's `NVML_NVLINK_MAX_LINKS`.
const MAX_NVLINKS: u32 = 18;

/// Opens NVML, or says why not (no library, no driver).
pub fn load() -> Result<Nvml, String> {
    Nvml::builder()
        .lib_path(OsStr::new(LIBRARY))
        .init()
        .map_err(|e| e.to_string())
}

/// The periodic sample: each GPU's utilization, memory used and temperature (the same
/// fields as `nvidia-smi --query-gpu`), indexed as NVML (and `nvidia-smi`) number them.
pub fn sample(nvml: &Nvml) -> Result<Vec<GpuUtilSample>, String> {
    let count = nvml
        .device_count()
        .map_err(|e| format!("NVML device count: {e}"))?;
    let mut out = Vec::new();
    for i in 0..count {
        let d = nvml
            .device_by_index(i)
            .map_err(|e| format!("NVML device {i}: {e}"))?;
        out.push(GpuUtilSample {
            index: i,
            uuid: d.uuid().ok(),
            utilization: d.utilization_rates().ok().map(|u| u.gpu as f32),
            memory_used_mib: d.memory_info().ok().map(|m| m.used >> 20),
            temperature_c: d.temperature(TemperatureSensor::Gpu).ok().map(|t| t as f32),
        });
    }
    Ok(out)
}

/// Reads every GPU and the pairwise topology (keyed by NVML index, which is also
/// `nvidia-smi`'s order).
pub fn query(nvml: &Nvml) -> Result<(GpuDeviceInformation, Topology), String> {
    let err =
        |what: &'static str| move |e: nvml_wrapper::error::NvmlError| format!("NVML {what}: {e}");
    let count = nvml.device_count().map_err(err("device count"))?;
    let mut info = GpuDeviceInformation {
        driver_version: nvml.sys_driver_version().ok(),
        cuda_version: nvml.sys_cuda_driver_version().ok().map(|v| {
            format!(
                "{}.{}",
                nvml_wrapper::cuda_driver_version_major(v),
                nvml_wrapper::cuda_driver_version_minor(v)
            )
        }),
        gpus: Vec::new(),
    };
    let mut bus_ids = Vec::new();
    for i in 0..count {
        let d = nvml.device_by_index(i).map_err(err("device"))?;
        let mem = d.memory_info().ok();
        let bus = d.pci_info().ok().map(|p| p.bus_id);
        bus_ids.push(bus.clone().unwrap_or_default());
        info.gpus.push(PerGpuDeviceInformation {
            product_name: d.name().ok(),
            uuid: d.uuid().ok(),
            minor_number: Some(d.minor_number().map_err(err("minor number"))?),
            pci_bus_id: bus,
            memory_total_mib: mem.as_ref().map(|m| m.total >> 20),
            memory_used_mib: mem.as_ref().map(|m| m.used >> 20),
            memory_free_mib: mem.as_ref().map(|m| m.free >> 20),
            gpu_util: d.utilization_rates().ok().map(|u| u.gpu as f32),
            gpu_temp: d.temperature(TemperatureSensor::Gpu).ok().map(|t| t as f32),
            gpu_temp_max_threshold: d
                .temperature_threshold(TemperatureThreshold::Shutdown)
                .ok()
                .map(|t| t as f32),
            gpu_temp_slow_threshold: d
                .temperature_threshold(TemperatureThreshold::Slowdown)
                .ok()
                .map(|t| t as f32),
            // nvml-wrapper 0.13 has no nvmlDeviceGetGpuFabricInfo; unknown through NVML.
            fabric_cluster_uuid: None,
            fabric_clique_id: None,
            sampled_at_ms: None,
        });
    }
    let mut topo = Topology::default();
    for a in 0..count {
        let Ok(da) = nvml.device_by_index(a) else {
            continue;
        };
        // NVLinks from `a`, counted per remote bus id.
        let mut links: Vec<String> = Vec::new();
        for l in 0..MAX_NVLINKS {
            let w = da.link_wrapper_for(l);
            if w.is_active().unwrap_or(false) {
                if let Ok(p) = w.remote_pci_info() {
                    links.push(p.bus_id);
                }
            }
        }
        for b in a + 1..count {
            let n = bus_ids
                .get(b as usize)
                .map(|bus| links.iter().filter(|r| r.eq_ignore_ascii_case(bus)).count())
                .unwrap_or(0);
            if n > 0 {
                topo.set(a, b, Link::NvLink(n as u32));
                continue;
            }
            let Ok(db) = nvml.device_by_index(b) else {
                continue;
            };
            if let Ok(level) = da.topology_common_ancestor(db) {
                topo.set(
                    a,
                    b,
                    match level {
                        TopologyLevel::Internal | TopologyLevel::Single => Link::Pix,
                        TopologyLevel::Multiple => Link::Pxb,
                        TopologyLevel::HostBridge => Link::Phb,
                        TopologyLevel::Node => Link::Node,
                        TopologyLevel::System => Link::Sys,
                    },
                );
            }
        }
    }
    Ok((info, topo))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_machine_without_the_library_is_not_an_error() {
        // On CI and development machines there is no NVIDIA driver: load() must fail
        // cleanly, not panic. (Where the library exists, it must load.)
        match super::load() {
            Ok(_) => {}
            Err(e) => assert!(!e.is_empty()),
        }
    }
}
