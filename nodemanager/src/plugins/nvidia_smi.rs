//! `nvidia-smi -x -q`: finding the executable, running it, and reading its XML.
//!
//! The XML starts with `<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_vNN.dtd">`; the DTD is
//! never fetched (quick-xml does not resolve external entities), as YARN disables it too.
//! Only the fields YARN reads (plus CUDA version, PCI bus id and the NVLink fabric ids) are
//! kept; every other element is skipped, so newer drivers that add elements parse unchanged.
//! The output must be complete: a document that ends inside an element (a killed or crashed
//! `nvidia-smi`) is an error, not a shorter GPU list.

use std::path::{Path, PathBuf};
use std::time::Duration;

use quick_xml::events::Event;
use quick_xml::Reader;

use super::exec::{self, is_executable, ExecError};

/// Where YARN looks for `nvidia-smi` when no path is configured.
pub const DEFAULT_SEARCH_DIRS: &[&str] = &["/usr/bin", "/bin", "/usr/local/nvidia/bin"];
pub const BINARY: &str = "nvidia-smi";

/// Every GPU in the system as the discovery tool reports it (YARN's `GpuDeviceInformation`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuDeviceInformation {
    pub driver_version: Option<String>,
    pub cuda_version: Option<String>,
    pub gpus: Vec<PerGpuDeviceInformation>,
}

/// One GPU (YARN's `PerGpuDeviceInformation`). Missing or `N/A` values are None.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PerGpuDeviceInformation {
    pub product_name: Option<String>,
    pub uuid: Option<String>,
    pub minor_number: Option<u32>,
    pub pci_bus_id: Option<String>,
    pub memory_total_mib: Option<u64>,
    pub memory_used_mib: Option<u64>,
    pub memory_free_mib: Option<u64>,
    /// Percent.
    pub gpu_util: Option<f32>,
    /// Celsius.
    pub gpu_temp: Option<f32>,
    pub gpu_temp_max_threshold: Option<f32>,
    pub gpu_temp_slow_threshold: Option<f32>,
    /// The NVLink fabric's cluster UUID (`<fabric><clusterUuid>`, "ClusterUUID" in the text
    /// `-q`), on NVLink-fabric (multi-node NVLink) systems only.
    pub fabric_cluster_uuid: Option<String>,
    /// The NVLink fabric's clique id (`<fabric><cliqueId>`, "CliqueId" in the text `-q`).
    pub fabric_clique_id: Option<String>,
    /// When the periodic sample ([`sample`], or NVML's) last set `gpu_util`,
    /// `memory_used_mib` and `gpu_temp` (ms since the epoch); None when they come from a
    /// discovery reading only. Only sampled values go to the RM.
    pub sampled_at_ms: Option<u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum SmiError {
    #[error(transparent)]
    Exec(#[from] ExecError),
    #[error("{path} -x -q failed with {status}: {stderr}")]
    Failed {
        path: PathBuf,
        status: String,
        stderr: String,
    },
    #[error("cannot parse the nvidia-smi XML: {0}")]
    Parse(String),
    #[error("{path} --query-gpu failed with {status}: {stderr}")]
    QueryFailed {
        path: PathBuf,
        status: String,
        stderr: String,
    },
    #[error("cannot parse the nvidia-smi --query-gpu output: {0}")]
    QueryParse(String),
}

/// What [`sample`] asks for, in this order.
pub const QUERY_GPU_FIELDS: &str = "index,uuid,utilization.gpu,memory.used,temperature.gpu";

/// One GPU's utilization sample (`--query-gpu` or NVML).
#[derive(Debug, Clone, PartialEq)]
pub struct GpuUtilSample {
    /// `nvidia-smi`'s index: the GPU's position in its output.
    pub index: u32,
    pub uuid: Option<String>,
    /// Percent; None when the GPU does not say (`[N/A]`, `[Not Supported]`).
    pub utilization: Option<f32>,
    pub memory_used_mib: Option<u64>,
    pub temperature_c: Option<f32>,
}

/// Runs `<exe> --query-gpu=index,uuid,utilization.gpu,memory.used,temperature.gpu
/// --format=csv,noheader,nounits` and parses it: the cheap periodic sample.
pub async fn sample(exe: &Path, timeout: Duration) -> Result<Vec<GpuUtilSample>, SmiError> {
    let query = format!("--query-gpu={QUERY_GPU_FIELDS}");
    let out = exec::run(exe, &[&query, "--format=csv,noheader,nounits"], timeout).await?;
    if !out.status.success() {
        return Err(SmiError::QueryFailed {
            path: exe.to_path_buf(),
            status: out.describe_status(),
            stderr: out.stderr_line(),
        });
    }
    parse_query_gpu(&String::from_utf8_lossy(&out.stdout)).map_err(SmiError::QueryParse)
}

/// A `--query-gpu` value: `[N/A]`, `[Not Supported]`, `N/A` and empty are None.
fn csv_value(s: &str) -> Option<&str> {
    let t = s.trim();
    (!t.is_empty() && !t.starts_with('[') && t != "N/A").then_some(t)
}

/// Parses [`QUERY_GPU_FIELDS`] as `csv,noheader,nounits` (one line per GPU).
pub fn parse_query_gpu(text: &str) -> Result<Vec<GpuUtilSample>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let cols: Vec<&str> = line.split(',').collect();
        if cols.len() != 5 {
            return Err(format!(
                "line {}: expected 5 comma-separated values ({QUERY_GPU_FIELDS}), got {}: {line:?}",
                n + 1,
                cols.len()
            ));
        }
        let index = cols[0].trim().parse::<u32>().map_err(|_| {
            format!(
                "line {}: the index {:?} is not a number",
                n + 1,
                cols[0].trim()
            )
        })?;
        let number = |i: usize, what: &str| -> Result<Option<f32>, String> {
            match csv_value(cols[i]) {
                None => Ok(None),
                Some(v) => v
                    .parse::<f32>()
                    .ok()
                    .filter(|x| x.is_finite() && *x >= 0.0)
                    .map(Some)
                    .ok_or_else(|| format!("line {}: {what} {v:?} is not a number", n + 1)),
            }
        };
        let utilization = number(2, "utilization.gpu")?;
        if utilization.is_some_and(|u| u > 100.0) {
            return Err(format!(
                "line {}: utilization.gpu {} is above 100",
                n + 1,
                cols[2].trim()
            ));
        }
        out.push(GpuUtilSample {
            index,
            uuid: csv_value(cols[1]).map(str::to_string),
            utilization,
            memory_used_mib: number(3, "memory.used")?.map(|m| m as u64),
            temperature_c: number(4, "temperature.gpu")?,
        });
    }
    Ok(out)
}

/// Resolves `path-to-discovery-executables`: a file is used as is, a directory must hold
/// `nvidia-smi`. Unset: the first executable `nvidia-smi` in [`DEFAULT_SEARCH_DIRS`].
pub fn resolve_executable(configured: Option<&Path>) -> Result<PathBuf, String> {
    match configured {
        Some(p) if p.is_dir() => {
            let exe = p.join(BINARY);
            if is_executable(&exe) {
                Ok(exe)
            } else {
                Err(format!("{} has no executable {BINARY}", p.display()))
            }
        }
        Some(p) if is_executable(p) => Ok(p.to_path_buf()),
        Some(p) => Err(format!(
            "the configured discovery executable {} does not exist or is not executable",
            p.display()
        )),
        None => DEFAULT_SEARCH_DIRS
            .iter()
            .map(|d| Path::new(d).join(BINARY))
            .find(|p| is_executable(p))
            .ok_or_else(|| format!("no {BINARY} in {}", DEFAULT_SEARCH_DIRS.join(", "))),
    }
}

/// Runs `<exe> -x -q` (YARN's argument order) and parses it.
pub async fn query(exe: &Path, timeout: Duration) -> Result<GpuDeviceInformation, SmiError> {
    let out = exec::run(exe, &["-x", "-q"], timeout).await?;
    if !out.status.success() {
        return Err(SmiError::Failed {
            path: exe.to_path_buf(),
            status: out.describe_status(),
            stderr: out.stderr_line(),
        });
    }
    parse(&String::from_utf8_lossy(&out.stdout)).map_err(SmiError::Parse)
}

/// `"81559 MiB"` -> 81559; `"N/A"` -> None.
fn leading_u64(s: &str) -> Option<u64> {
    s.split_whitespace().next()?.parse().ok()
}

/// `"75.6 %"`, `"34 C"` -> the number; `"N/A"` -> None.
fn leading_f32(s: &str) -> Option<f32> {
    s.split_whitespace()
        .next()?
        .parse::<f32>()
        .ok()
        .filter(|v| v.is_finite())
}

fn text_value(s: &str) -> Option<String> {
    let t = s.trim();
    (!t.is_empty() && t != "N/A").then(|| t.to_string())
}

/// Parses `nvidia-smi -q -x` output (any `nvsmi_device_v*` version).
pub fn parse(xml: &str) -> Result<GpuDeviceInformation, String> {
    let mut reader = Reader::from_str(xml);
    reader.config_mut().trim_text(true);
    let mut stack: Vec<String> = Vec::new();
    let mut info = GpuDeviceInformation::default();
    let mut saw_root = false;
    let mut closed_root = false;
    let mut gpu: Option<PerGpuDeviceInformation> = None;
    loop {
        let event = reader.read_event().map_err(|e| {
            let at = reader.buffer_position();
            // An error at the very end is a document cut off mid-tag.
            if at as usize >= xml.len() {
                format!("truncated: the document ends inside a tag ({e})")
            } else {
                format!("at byte {at}: {e}")
            }
        })?;
        match event {
            Event::Start(e) => {
                let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
                if stack.is_empty() {
                    if name != "nvidia_smi_log" || saw_root {
                        return Err(format!("unexpected root element <{name}>"));
                    }
                    saw_root = true;
                }
                if stack.len() == 1 && name == "gpu" {
                    let mut g = PerGpuDeviceInformation::default();
                    for a in e.attributes().flatten() {
                        if a.key.as_ref() == b"id" {
                            g.pci_bus_id = a.unescape_value().ok().and_then(|v| text_value(&v));
                        }
                    }
                    gpu = Some(g);
                }
                stack.push(name);
            }
            Event::Empty(_) => {}
            Event::End(_) => {
                let name = stack.pop().unwrap_or_default();
                if stack.len() == 1 && name == "gpu" {
                    if let Some(g) = gpu.take() {
                        info.gpus.push(g);
                    }
                }
                if stack.is_empty() {
                    closed_root = true;
                }
            }
            Event::Text(t) => {
                let v = t
                    .unescape()
                    .map_err(|e| format!("at byte {}: {e}", reader.buffer_position()))?;
                let path: Vec<&str> = stack.iter().map(String::as_str).collect();
                match path.as_slice() {
                    ["nvidia_smi_log", "driver_version"] => info.driver_version = text_value(&v),
                    ["nvidia_smi_log", "cuda_version"] => info.cuda_version = text_value(&v),
                    ["nvidia_smi_log", "gpu", rest @ ..] => {
                        if let Some(g) = gpu.as_mut() {
                            set_gpu_field(g, rest, &v)?;
                        }
                    }
                    _ => {}
                }
            }
            Event::Eof => break,
            // Declaration, DOCTYPE (never fetched), comments, processing instructions.
            _ => {}
        }
    }
    if !saw_root {
        return Err("no <nvidia_smi_log> element: not nvidia-smi -q -x output".into());
    }
    if !closed_root {
        return Err(format!(
            "truncated: the document ends inside <{}>",
            stack.join("><")
        ));
    }
    Ok(info)
}

/// One GPU's (ClusterUUID, CliqueId) from the text `nvidia-smi -q`.
pub type TextFabric = (Option<String>, Option<String>);

/// The NVLink fabric of each GPU from the text `nvidia-smi -q`: per `GPU <bus id>` block,
/// the `Fabric` section's `ClusterUUID` and `CliqueId` (None when absent or `N/A`). The XML
/// [`parse`] reads the same values; this is for output captured as text (bug reports, tools
/// that only run `nvidia-smi -q`).
pub fn parse_text_fabric(text: &str) -> Vec<TextFabric> {
    let mut out: Vec<TextFabric> = Vec::new();
    // Indentation of the `Fabric` header while inside its section.
    let mut fabric_indent: Option<usize> = None;
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if indent == 0 && t.starts_with("GPU ") {
            out.push((None, None));
            fabric_indent = None;
            continue;
        }
        if let Some(fi) = fabric_indent {
            if indent <= fi {
                fabric_indent = None;
            }
        }
        let (key, value) = match t.split_once(':') {
            Some((k, v)) => (k.trim(), Some(v)),
            None => (t, None),
        };
        match (fabric_indent, key, value) {
            (None, "Fabric", None) if !out.is_empty() => fabric_indent = Some(indent),
            (Some(_), "ClusterUUID", Some(v)) => {
                if let Some(g) = out.last_mut() {
                    g.0 = text_value(v);
                }
            }
            (Some(_), "CliqueId", Some(v)) => {
                if let Some(g) = out.last_mut() {
                    g.1 = text_value(v);
                }
            }
            _ => {}
        }
    }
    out
}

fn set_gpu_field(g: &mut PerGpuDeviceInformation, path: &[&str], v: &str) -> Result<(), String> {
    match path {
        ["product_name"] => g.product_name = text_value(v),
        ["uuid"] => g.uuid = text_value(v),
        ["minor_number"] => {
            g.minor_number = match text_value(v) {
                None => None,
                Some(t) => Some(
                    t.parse()
                        .map_err(|_| format!("minor_number '{t}' is not a number"))?,
                ),
            }
        }
        ["pci", "pci_bus_id"] => g.pci_bus_id = text_value(v).or(g.pci_bus_id.take()),
        ["fb_memory_usage", "total"] => g.memory_total_mib = leading_u64(v),
        ["fb_memory_usage", "used"] => g.memory_used_mib = leading_u64(v),
        ["fb_memory_usage", "free"] => g.memory_free_mib = leading_u64(v),
        ["utilization", "gpu_util"] => g.gpu_util = leading_f32(v),
        ["temperature", "gpu_temp"] => g.gpu_temp = leading_f32(v),
        ["temperature", "gpu_temp_max_threshold"] => g.gpu_temp_max_threshold = leading_f32(v),
        ["temperature", "gpu_temp_slow_threshold"] => g.gpu_temp_slow_threshold = leading_f32(v),
        // Drivers have spelled these both ways; accept either.
        ["fabric", "clusterUuid" | "cluster_uuid" | "ClusterUUID"] => {
            g.fabric_cluster_uuid = text_value(v)
        }
        ["fabric", "cliqueId" | "clique_id" | "CliqueId"] => g.fabric_clique_id = text_value(v),
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {

    #[test]
    fn query_gpu_lines_are_parsed_and_unknowns_are_none() {
        let text = "0, GPU-5eed0000-6b1d-4f0a-9c2e-000000000000, 0, 0, 30\n\
                    1, GPU-5eed0001-6b1d-4f0a-9c2e-000000000001, 85, 40960, 31\n\
                    2, GPU-x, [N/A], [Not Supported], [N/A]\n";
        let s = parse_query_gpu(text).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].index, 0);
        assert_eq!(s[0].utilization, Some(0.0));
        assert_eq!(s[1].utilization, Some(85.0));
        assert_eq!(s[1].memory_used_mib, Some(40960));
        assert_eq!(s[1].temperature_c, Some(31.0));
        assert_eq!(
            s[1].uuid.as_deref(),
            Some("GPU-5eed0001-6b1d-4f0a-9c2e-000000000001")
        );
        assert_eq!(
            (s[2].utilization, s[2].memory_used_mib, s[2].temperature_c),
            (None, None, None)
        );
        assert!(parse_query_gpu("").unwrap().is_empty());
    }

    #[test]
    fn bad_query_gpu_output_is_refused_by_line() {
        for (text, want) in [
            ("0, GPU-a, 5\n", "expected 5"),
            ("x, GPU-a, 5, 1, 30\n", "index"),
            ("0, GPU-a, lots, 1, 30\n", "utilization.gpu"),
            ("0, GPU-a, 150, 1, 30\n", "above 100"),
            ("0, GPU-a, -3, 1, 30\n", "utilization.gpu"),
        ] {
            let e = parse_query_gpu(text).unwrap_err();
            assert!(e.contains(want) && e.contains("line 1"), "{text:?}: {e}");
        }
    }
    use super::*;

    const SMALL: &str = r#"<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
	<driver_version>535.129.03</driver_version>
	<cuda_version>12.2</cuda_version>
	<attached_gpus>1</attached_gpus>
	<gpu id="00000000:18:00.0">
		<product_name>NVIDIA H100 80GB HBM3 &amp; friends</product_name>
		<uuid>GPU-1</uuid>
		<minor_number>3</minor_number>
		<mig_devices>
			None
		</mig_devices>
		<fb_memory_usage>
			<total>81559 MiB</total>
			<reserved>328 MiB</reserved>
			<used>10 MiB</used>
			<free>81220 MiB</free>
		</fb_memory_usage>
		<bar1_memory_usage><total>131072 MiB</total></bar1_memory_usage>
		<utilization><gpu_util>75.5 %</gpu_util></utilization>
		<temperature>
			<gpu_temp>34 C</gpu_temp>
			<gpu_temp_max_threshold>N/A</gpu_temp_max_threshold>
		</temperature>
		<processes/>
	</gpu>
</nvidia_smi_log>
"#;

    #[test]
    fn reads_the_fields_yarn_reads() {
        let i = parse(SMALL).unwrap();
        assert_eq!(i.driver_version.as_deref(), Some("535.129.03"));
        assert_eq!(i.cuda_version.as_deref(), Some("12.2"));
        let g = &i.gpus[0];
        assert_eq!(
            g.product_name.as_deref(),
            Some("NVIDIA H100 80GB HBM3 & friends")
        );
        assert_eq!(g.minor_number, Some(3));
        assert_eq!(g.pci_bus_id.as_deref(), Some("00000000:18:00.0"));
        assert_eq!(
            (g.memory_total_mib, g.memory_used_mib, g.memory_free_mib),
            (Some(81559), Some(10), Some(81220))
        );
        assert_eq!(g.gpu_util, Some(75.5));
        assert_eq!(g.gpu_temp, Some(34.0));
        assert_eq!(g.gpu_temp_max_threshold, None);
    }

    /// The `<fabric>` section of an NVLink-fabric (GB200 NVL72) node, driver 550+.
    const FABRIC: &str = r#"<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
	<driver_version>570.86.15</driver_version>
	<cuda_version>12.8</cuda_version>
	<attached_gpus>2</attached_gpus>
	<gpu id="00000008:01:00.0">
		<product_name>NVIDIA GB200</product_name>
		<uuid>GPU-a</uuid>
		<minor_number>0</minor_number>
		<fabric>
			<state>Completed</state>
			<status>Success</status>
			<cliqueId>32766</cliqueId>
			<clusterUuid>3ba4fc1b-46e0-4e42-9c32-3f7a5d4b0c11</clusterUuid>
			<health>
				<bandwidth>Full</bandwidth>
			</health>
		</fabric>
	</gpu>
	<gpu id="00000009:01:00.0">
		<product_name>NVIDIA GB200</product_name>
		<uuid>GPU-b</uuid>
		<minor_number>1</minor_number>
		<fabric>
			<state>N/A</state>
			<status>N/A</status>
			<cliqueId>N/A</cliqueId>
			<clusterUuid>N/A</clusterUuid>
		</fabric>
	</gpu>
</nvidia_smi_log>
"#;

    #[test]
    fn reads_the_nvlink_fabric() {
        let i = parse(FABRIC).unwrap();
        assert_eq!(i.driver_version.as_deref(), Some("570.86.15"));
        assert_eq!(i.cuda_version.as_deref(), Some("12.8"));
        assert_eq!(
            i.gpus[0].fabric_cluster_uuid.as_deref(),
            Some("3ba4fc1b-46e0-4e42-9c32-3f7a5d4b0c11")
        );
        assert_eq!(i.gpus[0].fabric_clique_id.as_deref(), Some("32766"));
        // N/A (a GPU outside any fabric) is unknown, not a value.
        assert_eq!(
            (&i.gpus[1].fabric_cluster_uuid, &i.gpus[1].fabric_clique_id),
            (&None, &None)
        );
        // Older drivers (no fabric ids) and the other spelling.
        let old = parse(SMALL).unwrap();
        assert_eq!(old.gpus[0].fabric_clique_id, None);
        let snake = FABRIC
            .replace("cliqueId>", "clique_id>")
            .replace("clusterUuid>", "cluster_uuid>");
        assert_eq!(
            parse(&snake).unwrap().gpus[0].fabric_clique_id.as_deref(),
            Some("32766")
        );
    }

    #[test]
    fn reads_the_fabric_section_of_the_text_output() {
        let text = "
==============NVSMI LOG==============

Timestamp                                 : Tue Mar  4 10:12:01 2025
Driver Version                            : 570.86.15
CUDA Version                              : 12.8

Attached GPUs                             : 2
GPU 00000008:01:00.0
    Product Name                          : NVIDIA GB200
    Minor Number                          : 0
    Fabric
        State                             : Completed
        Status                            : Success
        CliqueId                          : 32766
        ClusterUUID                       : 3ba4fc1b-46e0-4e42-9c32-3f7a5d4b0c11
        Health
            Bandwidth                     : Full
    Processes                             : None

GPU 00000009:01:00.0
    Product Name                          : NVIDIA GB200
    Fabric
        State                             : N/A
        Status                            : N/A
        CliqueId                          : N/A
        ClusterUUID                       : N/A
    CliqueId                              : 7
";
        assert_eq!(
            parse_text_fabric(text),
            vec![
                (
                    Some("3ba4fc1b-46e0-4e42-9c32-3f7a5d4b0c11".to_string()),
                    Some("32766".to_string())
                ),
                (None, None),
            ]
        );
        assert!(parse_text_fabric("no GPUs here").is_empty());
    }

    #[test]
    fn broken_documents_are_errors() {
        let cut = &SMALL[..SMALL.find("<utilization>").unwrap()];
        let e = parse(cut).unwrap_err();
        assert!(
            e.contains("truncated") && e.contains("nvidia_smi_log><gpu"),
            "{e}"
        );
        assert!(parse("").unwrap_err().contains("no <nvidia_smi_log>"));
        let mid_tag = &SMALL[..SMALL.find("<utilization>").unwrap() + 5];
        assert!(parse(mid_tag).unwrap_err().contains("truncated"));
        assert!(parse(
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
        )
        .is_err());
        assert!(parse("<html></html>")
            .unwrap_err()
            .contains("unexpected root"));
        let bad_minor = SMALL.replace("<minor_number>3<", "<minor_number>three<");
        assert!(parse(&bad_minor).unwrap_err().contains("three"));
        let mismatched = SMALL.replace("</uuid>", "</uid>");
        assert!(parse(&mismatched).is_err());
        // No GPUs is a valid (empty) answer.
        let none = "<nvidia_smi_log><driver_version>1</driver_version></nvidia_smi_log>";
        assert!(parse(none).unwrap().gpus.is_empty());
    }

    #[test]
    fn executables_are_resolved_as_yarn_does() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        assert!(resolve_executable(Some(d.path()))
            .unwrap_err()
            .contains("no executable"));
        let exe = d.path().join(BINARY);
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(resolve_executable(Some(d.path())).unwrap(), exe);
        assert_eq!(resolve_executable(Some(&exe)).unwrap(), exe);
        assert!(resolve_executable(Some(&d.path().join("nope"))).is_err());
    }
}
