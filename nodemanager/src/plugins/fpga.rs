//! The `yarn.io/fpga` plugin in the shape of YARN's Intel FPGA OpenCL plugin.
//!
//! Discovery runs `<aocl> diagnose` once at NM start: the executable is
//! `yarn.nodemanager.resource-plugins.fpga.path-to-discovery-executables`, else
//! `$ALTERAOCLSDKROOT/bin/aocl`, else `aocl` on the NM's `PATH` (YARN's order). `aocl diagnose`
//! exits 1 even when it succeeds, so, as YARN does, its exit status is ignored and the output
//! decides: it must say `DIAGNOSTIC_PASSED`. Each `aclN` section gives a device (alias `aclN`,
//! index N), its device name (`aclnalla_pcie0`), PCIe bus, temperature and whether it passed.
//! Major and minor numbers come from `/dev/<device name>` when that node exists (YARN stats
//! it too); otherwise the major is `...fpga.major-device-number` (YARN's default 246) and the
//! minor is N. `allowed-fpga-devices` keeps only the listed minors.
//!
//! Containers get `FPGA_VISIBLE_DEVICES=acl0,acl2`: the aliases OpenCL tools (`aocl program
//! acl0 ...`) address devices by. YARN itself sets no variable for FPGAs; the name follows
//! `CUDA_VISIBLE_DEVICES`. Programming an IP (`REQUESTED_FPGA_IP_ID`) is not done.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use spindle_common::resource::FPGA;
use tokio::sync::watch;
use tracing::{info, warn};

use super::exec::{self, is_executable};
use super::{Device, DevicePlugin, PluginDetails, PluginStatus};
use crate::config::{AllowedFpgas, FpgaPluginConfig};

pub const FPGA_VISIBLE_DEVICES: &str = "FPGA_VISIBLE_DEVICES";
pub const SDK_ROOT_ENV: &str = "ALTERAOCLSDKROOT";
pub const BINARY: &str = "aocl";

/// One `aclN` section of `aocl diagnose`.
#[derive(Debug, Clone, PartialEq)]
pub struct AoclDevice {
    /// `acl0`.
    pub alias: String,
    pub number: u32,
    /// `aclnalla_pcie0`: the node under `/dev`.
    pub device_name: Option<String>,
    pub board: Option<String>,
    /// `02:00.00`.
    pub bus: Option<String>,
    pub temperature_c: Option<f32>,
    pub passed: bool,
}

/// Parses `aocl diagnose` output (Intel FPGA SDK for OpenCL 17+ format).
pub fn parse_diagnose(out: &str) -> Result<Vec<AoclDevice>, String> {
    if !out.contains("DIAGNOSTIC_PASSED") {
        let last = out
            .lines()
            .map(str::trim)
            .rfind(|l| !l.is_empty())
            .unwrap_or("no output");
        return Err(format!("aocl diagnose did not pass (last line: '{last}')"));
    }
    let mut devices: Vec<AoclDevice> = Vec::new();
    let mut cur: Option<AoclDevice> = None;
    for raw in out.lines() {
        let line = raw.trim();
        // A section header: `------------------------- acl0 -------------------------`.
        if line.starts_with("---") {
            let name = line.trim_matches('-').trim();
            if let Some(n) = name.strip_prefix("acl").and_then(|n| n.parse::<u32>().ok()) {
                if let Some(d) = cur.take() {
                    devices.push(d);
                }
                cur = Some(AoclDevice {
                    alias: name.to_string(),
                    number: n,
                    device_name: None,
                    board: None,
                    bus: None,
                    temperature_c: None,
                    passed: false,
                });
            }
            continue;
        }
        let Some(d) = cur.as_mut() else { continue };
        if line.starts_with("DIAGNOSTIC_") {
            d.passed = line == "DIAGNOSTIC_PASSED";
            if let Some(d) = cur.take() {
                devices.push(d);
            }
            continue;
        }
        if let (Some(open), Some(close)) = (line.rfind('('), line.rfind(')')) {
            if d.device_name.is_none()
                && open < close
                && (line.contains("Passed") || line.contains("Failed"))
            {
                d.device_name = Some(line[open + 1..close].trim().to_string());
                let before = line[..open].trim();
                d.board = before.split_whitespace().last().map(str::to_string);
            }
        }
        if let Some((_, rest)) = line.split_once("bus:slot.func =") {
            d.bus = rest.split(',').next().map(|b| b.trim().to_string());
        }
        if let Some((_, rest)) = line.split_once("FPGA temperature") {
            d.temperature_c = rest
                .trim_start_matches([' ', '='])
                .split_whitespace()
                .next()
                .and_then(|t| t.parse().ok());
        }
    }
    if let Some(d) = cur.take() {
        devices.push(d);
    }
    let mut seen = BTreeSet::new();
    for d in &devices {
        if !seen.insert(d.number) {
            return Err(format!("{} is listed twice", d.alias));
        }
    }
    Ok(devices)
}

/// YARN's search for the discovery executable.
pub fn resolve_executable(configured: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(p) = configured {
        if is_executable(p) {
            return Ok(p.to_path_buf());
        }
        let in_dir = p.join(BINARY);
        if is_executable(&in_dir) {
            return Ok(in_dir);
        }
        return Err(format!(
            "the configured discovery executable {} does not exist or is not executable",
            p.display()
        ));
    }
    if let Some(root) = std::env::var_os(SDK_ROOT_ENV) {
        let p = Path::new(&root).join("bin").join(BINARY);
        if is_executable(&p) {
            return Ok(p);
        }
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(BINARY))
        .find(|p| is_executable(p))
        .ok_or_else(|| format!("no {BINARY} under ${SDK_ROOT_ENV}/bin or on PATH"))
}

async fn discover(exe: &Path, timeout: Duration) -> Result<Vec<AoclDevice>, String> {
    let out = exec::run(exe, &["diagnose"], timeout)
        .await
        .map_err(|e| e.to_string())?;
    parse_diagnose(&String::from_utf8_lossy(&out.stdout)).map_err(|e| {
        format!(
            "{e}; {} exited with {}",
            exe.display(),
            out.describe_status()
        )
    })
}

/// The FPGA plugin.
pub struct FpgaPlugin {
    devices: Vec<Device>,
    status: watch::Receiver<PluginStatus>,
    /// Kept so the channel stays open (FPGA status does not change after start).
    _tx: watch::Sender<PluginStatus>,
}

impl FpgaPlugin {
    pub async fn start(cfg: FpgaPluginConfig) -> Self {
        let mut problems = Vec::new();
        let found = match resolve_executable(cfg.discovery_executable.as_deref()) {
            Ok(exe) => match discover(&exe, cfg.timeout).await {
                Ok(d) => d,
                Err(e) => {
                    problems.push(format!(
                        "FPGA discovery failed: {e}; the node offers no FPGAs"
                    ));
                    Vec::new()
                }
            },
            Err(e) => {
                problems.push(format!("no FPGA discovery: {e}; the node offers no FPGAs"));
                Vec::new()
            }
        };
        let mut devices = Vec::new();
        for a in found {
            let node = a.device_name.as_ref().map(|n| Path::new("/dev").join(n));
            let (major, minor) = node
                .as_deref()
                .and_then(stat_char_device)
                .unwrap_or((cfg.major, a.number));
            if let AllowedFpgas::Minors(m) = &cfg.allowed {
                if !m.contains(&minor) {
                    continue;
                }
            }
            if devices.iter().any(|d: &Device| d.minor == minor) {
                problems.push(format!(
                    "{} has the same minor number {minor} as another FPGA; not offered",
                    a.alias
                ));
                continue;
            }
            if !a.passed {
                problems.push(format!(
                    "{} did not pass aocl diagnose; not offered",
                    a.alias
                ));
                continue;
            }
            devices.push(Device {
                index: a.number,
                major,
                minor,
                dev_path: node,
                bus_id: a.bus.clone(),
                healthy: true,
                status: "OK".into(),
                model: a.board.clone(),
                memory_mib: None,
                uuid: None,
                alias: Some(a.alias.clone()),
            });
        }
        if let AllowedFpgas::Minors(m) = &cfg.allowed {
            for minor in m {
                if !devices.iter().any(|d| d.minor == *minor) {
                    problems.push(format!("allowed FPGA minor {minor} was not discovered"));
                }
            }
        }
        devices.sort_by_key(|d| d.index);
        for p in &problems {
            warn!(problem = %p, "FPGA plugin");
        }
        info!(fpgas = devices.len(), "FPGA discovery done");
        let (tx, rx) = watch::channel(PluginStatus {
            problems,
            unhealthy: BTreeSet::new(),
            details: PluginDetails::None,
        });
        Self {
            devices,
            status: rx,
            _tx: tx,
        }
    }
}

fn stat_char_device(path: &Path) -> Option<(u32, u32)> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
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

impl DevicePlugin for FpgaPlugin {
    fn resource_name(&self) -> &str {
        FPGA
    }

    fn devices(&self) -> &[Device] {
        &self.devices
    }

    fn status(&self) -> watch::Receiver<PluginStatus> {
        self.status.clone()
    }

    fn on_devices_allocated(&mut self, granted: &[&Device]) -> BTreeMap<String, String> {
        let mut g: Vec<&&Device> = granted.iter().collect();
        g.sort_by_key(|d| d.index);
        let list = g
            .iter()
            .map(|d| d.alias.clone().unwrap_or_else(|| format!("acl{}", d.index)))
            .collect::<Vec<_>>()
            .join(",");
        [(FPGA_VISIBLE_DEVICES.to_string(), list)].into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) const TWO: &str = "aocl diagnose: Running diagnose from /opt/intelFPGA_pro/17.1/hld/board/nalla_pcie/linux64/libexec

------------------------- acl0 -------------------------
Vendor: Nallatech ltd

Phys Dev Name  Status   Information

aclnalla_pcie0Passed   nalla_pcie (aclnalla_pcie0)
                       PCIe dev_id = 2494, bus:slot.func = 02:00.00, Gen3 x8
                       FPGA temperature = 54.4 degrees C.
                       Total Card Power Usage = 31.7 Watts.
                       Device Power Usage = 0.0 Watts.

DIAGNOSTIC_PASSED
---------------------------------------------------------

------------------------- acl1 -------------------------
Vendor: Nallatech ltd

Phys Dev Name  Status   Information

aclnalla_pcie1Passed   nalla_pcie (aclnalla_pcie1)
                       PCIe dev_id = 2494, bus:slot.func = 03:00.00, Gen3 x8
                       FPGA temperature = 50.1 degrees C.

DIAGNOSTIC_PASSED
---------------------------------------------------------
";

    #[test]
    fn parses_aocl_diagnose() {
        let d = parse_diagnose(TWO).unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].alias, "acl0");
        assert_eq!(d[0].device_name.as_deref(), Some("aclnalla_pcie0"));
        assert_eq!(d[0].board.as_deref(), Some("nalla_pcie"));
        assert_eq!(d[0].bus.as_deref(), Some("02:00.00"));
        assert_eq!(d[0].temperature_c, Some(54.4));
        assert!(d[0].passed && d[1].passed);
        assert_eq!(d[1].number, 1);
        let failed = TWO.replacen("DIAGNOSTIC_PASSED", "DIAGNOSTIC_FAILED", 1);
        let d = parse_diagnose(&failed).unwrap();
        assert!(!d[0].passed && d[1].passed);
        assert!(parse_diagnose("aocl: command failed\n")
            .unwrap_err()
            .contains("aocl: command failed"));
        assert!(parse_diagnose(&TWO.replace("acl1 ", "acl0 ")).is_err());
    }
}
