//! What the node offers beyond memory and vcores: the device plugins' settings (GPU, FPGA:
//! `yarn.nodemanager.resource-plugins` and each plugin's keys) and the extended resource
//! types of `node-resources.xml`.
//!
//! It only parses and checks; it must not run discovery or open device nodes (that is
//! [`crate::plugins`], which takes these settings), and must not spell a key itself.

use std::path::{Path, PathBuf};
use std::time::Duration;

use spindle_common::config::{keys, Configuration};
use spindle_common::resource::Resource;

use super::validate::{absolute, at};
use super::NmConfigError;

/// Which GPUs the NM may hand out (`yarn.nodemanager.resource-plugins.gpu.allowed-gpu-devices`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedGpus {
    /// Every GPU discovery finds; index = position in the discovery output.
    Auto,
    /// Exactly these `(index, minor)` pairs, discovered or not (YARN's rule: an explicit list
    /// is authoritative, for machines where discovery does not work).
    List(Vec<(u32, u32)>),
}

/// Which FPGAs the NM may hand out (`...fpga.allowed-fpga-devices`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedFpgas {
    Auto,
    /// Discovered devices with these minor numbers only.
    Minors(Vec<u32>),
}

/// The GPU plugin's settings (`yarn.io/gpu` in `yarn.nodemanager.resource-plugins`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuPluginConfig {
    pub allowed: AllowedGpus,
    /// `path-to-discovery-executables` (file or directory). When set, `nvidia-smi` is used
    /// even where NVML is present: the operator chose the tool.
    pub discovery_executable: Option<PathBuf>,
    pub timeout: Duration,
    /// None: no background refresh.
    pub refresh_interval: Option<Duration>,
    /// How often each GPU's utilization, memory used and temperature are sampled
    /// (`spindle.nodemanager.resource-plugins.gpu.utilization-interval-ms`); None: never.
    pub utilization_interval: Option<Duration>,
    pub major: u32,
}

/// The FPGA plugin's settings (`yarn.io/fpga` in `yarn.nodemanager.resource-plugins`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FpgaPluginConfig {
    pub allowed: AllowedFpgas,
    pub discovery_executable: Option<PathBuf>,
    pub timeout: Duration,
    pub major: u32,
}

/// The enabled resource plugins; both None when `yarn.nodemanager.resource-plugins` is empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourcePluginsConfig {
    pub gpu: Option<GpuPluginConfig>,
    pub fpga: Option<FpgaPluginConfig>,
}

/// Adds the extended types `node-resources.xml` offers to `base` (memory and vcores). A type
/// a resource plugin manages (`yarn.io/gpu`, `yarn.io/fpga`) is then set by the plugin to
/// what it discovered, as in YARN.
pub(super) fn node_resource_types(
    conf: &Configuration,
    base: Resource,
) -> Result<Resource, NmConfigError> {
    let mut r = base;
    let names: Vec<String> = conf
        .names_with_prefix(keys::NM_RESOURCE_TYPE_PREFIX)
        .map(String::from)
        .collect();
    for name in names {
        let ty = &name[keys::NM_RESOURCE_TYPE_PREFIX.len()..];
        let bad = |expected: &str, value: String| NmConfigError::BadValue {
            at: at(conf, &name),
            name: keys::NM_RESOURCE_TYPE_PREFIX,
            expected: format!("{expected} (in {name})"),
            value,
        };
        let valid_type = !ty.is_empty()
            && ty
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-/".contains(c));
        if !valid_type || ty == "memory-mb" || ty == "vcores" {
            return Err(bad(
                "an extended resource type name (memory and vcores are yarn.nodemanager.resource.*)",
                ty.to_string(),
            ));
        }
        let v = conf.get_i64(&name, 0)?;
        if v < 0 {
            return Err(bad("an amount of 0 or more", v.to_string()));
        }
        r.set(ty, v);
    }
    Ok(r)
}

/// Reads `yarn.nodemanager.resource-plugins` and the keys of each plugin it enables.
pub(super) fn resource_plugins(
    conf: &Configuration,
) -> Result<ResourcePluginsConfig, NmConfigError> {
    let raw = conf.get_string(keys::NM_RESOURCE_PLUGINS, keys::DEFAULT_NM_RESOURCE_PLUGINS)?;
    let mut out = ResourcePluginsConfig::default();
    let names: Vec<&str> = raw
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if names.is_empty() {
        return Ok(out);
    }
    let timeout_ms = conf.get_duration_ms(
        keys::SPINDLE_NM_DEVICE_DISCOVERY_TIMEOUT_MS,
        keys::DEFAULT_SPINDLE_NM_DEVICE_DISCOVERY_TIMEOUT_MS,
    )?;
    if timeout_ms == 0 {
        return Err(NmConfigError::TimeoutNotPositive {
            at: at(conf, keys::SPINDLE_NM_DEVICE_DISCOVERY_TIMEOUT_MS),
            name: keys::SPINDLE_NM_DEVICE_DISCOVERY_TIMEOUT_MS,
            value: timeout_ms.to_string(),
        });
    }
    let timeout = Duration::from_millis(timeout_ms);
    for n in names {
        match n {
            spindle_common::resource::GPU => {
                let allowed_raw = conf.get_string(
                    keys::NM_GPU_ALLOWED_DEVICES,
                    keys::DEFAULT_NM_GPU_ALLOWED_DEVICES,
                )?;
                let allowed = parse_allowed_gpus(&allowed_raw).map_err(|reason| {
                    NmConfigError::BadAllowedGpus {
                        at: at(conf, keys::NM_GPU_ALLOWED_DEVICES),
                        name: keys::NM_GPU_ALLOWED_DEVICES,
                        value: allowed_raw.clone(),
                        reason,
                    }
                })?;
                let refresh = conf.get_duration_ms(
                    keys::SPINDLE_NM_GPU_REFRESH_INTERVAL_MS,
                    keys::DEFAULT_SPINDLE_NM_GPU_REFRESH_INTERVAL_MS,
                )?;
                let sample = conf.get_duration_ms(
                    keys::SPINDLE_NM_GPU_UTILIZATION_INTERVAL_MS,
                    keys::DEFAULT_SPINDLE_NM_GPU_UTILIZATION_INTERVAL_MS,
                )?;
                out.gpu = Some(GpuPluginConfig {
                    allowed,
                    discovery_executable: conf
                        .get_nonempty(keys::NM_GPU_PATH_TO_DISCOVERY_EXECUTABLES)?
                        .map(|p| absolute(Path::new(&p))),
                    timeout,
                    refresh_interval: (refresh > 0).then(|| Duration::from_millis(refresh)),
                    utilization_interval: (sample > 0).then(|| Duration::from_millis(sample)),
                    major: major_number(
                        conf,
                        keys::SPINDLE_NM_GPU_MAJOR_DEVICE_NUMBER,
                        keys::DEFAULT_SPINDLE_NM_GPU_MAJOR_DEVICE_NUMBER,
                    )?,
                });
            }
            spindle_common::resource::FPGA => {
                let allowed_raw = conf.get_string(
                    keys::NM_FPGA_ALLOWED_DEVICES,
                    keys::DEFAULT_NM_FPGA_ALLOWED_DEVICES,
                )?;
                let allowed = parse_allowed_fpgas(&allowed_raw).map_err(|reason| {
                    NmConfigError::BadAllowedFpgas {
                        at: at(conf, keys::NM_FPGA_ALLOWED_DEVICES),
                        name: keys::NM_FPGA_ALLOWED_DEVICES,
                        value: allowed_raw.clone(),
                        reason,
                    }
                })?;
                let class = conf.get_string(
                    keys::NM_FPGA_VENDOR_PLUGIN_CLASS,
                    keys::DEFAULT_NM_FPGA_VENDOR_PLUGIN_CLASS,
                )?;
                let short = class.rsplit('.').next().unwrap_or_default().trim();
                if short != "IntelFpgaOpenclPlugin" {
                    return Err(NmConfigError::UnknownFpgaVendorPlugin {
                        at: at(conf, keys::NM_FPGA_VENDOR_PLUGIN_CLASS),
                        name: keys::NM_FPGA_VENDOR_PLUGIN_CLASS,
                        value: class,
                    });
                }
                out.fpga = Some(FpgaPluginConfig {
                    allowed,
                    discovery_executable: conf
                        .get_nonempty(keys::NM_FPGA_PATH_TO_DISCOVERY_EXECUTABLES)?
                        .map(|p| absolute(Path::new(&p))),
                    timeout,
                    major: major_number(
                        conf,
                        keys::SPINDLE_NM_FPGA_MAJOR_DEVICE_NUMBER,
                        keys::DEFAULT_SPINDLE_NM_FPGA_MAJOR_DEVICE_NUMBER,
                    )?,
                });
            }
            _ => {
                return Err(NmConfigError::UnknownResourcePlugin {
                    at: at(conf, keys::NM_RESOURCE_PLUGINS),
                    name: keys::NM_RESOURCE_PLUGINS,
                    value: raw.clone(),
                })
            }
        }
    }
    Ok(out)
}

fn major_number(
    conf: &Configuration,
    name: &'static str,
    default: u32,
) -> Result<u32, NmConfigError> {
    let v = conf.get_u64(name, u64::from(default))?;
    // Linux majors are 12 bits.
    match u32::try_from(v) {
        Ok(m) if m < 4096 => Ok(m),
        _ => Err(NmConfigError::BadMajorNumber {
            at: at(conf, name),
            name,
            value: v.to_string(),
        }),
    }
}

/// `auto`, or `index:minor[,index:minor]`: every pair two unsigned integers, no index and no
/// minor twice. The error is the reason, for [`NmConfigError::BadAllowedGpus`].
pub fn parse_allowed_gpus(raw: &str) -> Result<AllowedGpus, String> {
    let t = raw.trim();
    if t.eq_ignore_ascii_case("auto") {
        return Ok(AllowedGpus::Auto);
    }
    if t.is_empty() {
        return Err("empty".into());
    }
    let mut pairs: Vec<(u32, u32)> = Vec::new();
    for item in t.split(',').map(str::trim) {
        let parsed = item.split_once(':').and_then(|(i, m)| {
            Some((i.trim().parse::<u32>().ok()?, m.trim().parse::<u32>().ok()?))
        });
        let Some((index, minor)) = parsed else {
            return Err(format!("'{item}' is not index:minor"));
        };
        if pairs.iter().any(|(i, _)| *i == index) {
            return Err(format!("index {index} is listed twice"));
        }
        if pairs.iter().any(|(_, m)| *m == minor) {
            return Err(format!("minor number {minor} is listed twice"));
        }
        pairs.push((index, minor));
    }
    Ok(AllowedGpus::List(pairs))
}

/// `auto`, or a comma list of distinct minor numbers.
pub fn parse_allowed_fpgas(raw: &str) -> Result<AllowedFpgas, String> {
    let t = raw.trim();
    if t.eq_ignore_ascii_case("auto") {
        return Ok(AllowedFpgas::Auto);
    }
    if t.is_empty() {
        return Err("empty".into());
    }
    let mut minors = Vec::new();
    for item in t.split(',').map(str::trim) {
        let Ok(m) = item.parse::<u32>() else {
            return Err(format!("'{item}' is not a minor number"));
        };
        if minors.contains(&m) {
            return Err(format!("minor number {m} is listed twice"));
        }
        minors.push(m);
    }
    Ok(AllowedFpgas::Minors(minors))
}
