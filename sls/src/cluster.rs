//! The simulated cluster: nodes with GPUs (of a model), vcores and memory, in racks. Made
//! from `--nodes N --gpus-per-node G --racks R ...`, or read from a node file for a
//! heterogeneous cluster.

use std::collections::BTreeSet;
use std::path::Path;

use spindle_common::resource::GPU;
use spindle_common::Resource;

use crate::SlsError;

/// More simulated nodes than this is a typo, not a cluster (and would exhaust memory).
pub const MAX_NODES: usize = 1_000_000;

#[derive(Debug, Clone, PartialEq)]
pub struct SimNode {
    pub host: String,
    pub rack: String,
    pub gpus: i64,
    pub vcores: i64,
    pub memory_mb: i64,
    pub gpu_model: Option<String>,
}

impl SimNode {
    pub fn total(&self) -> Resource {
        Resource::new(self.memory_mb, self.vcores).with(GPU, self.gpus)
    }
}

/// A uniform cluster's shape (the command line's flags).
#[derive(Debug, Clone, PartialEq)]
pub struct Uniform {
    pub nodes: usize,
    pub gpus_per_node: i64,
    pub racks: usize,
    pub vcores_per_node: i64,
    pub memory_mb_per_node: i64,
    pub gpu_model: Option<String>,
}

impl Default for Uniform {
    fn default() -> Self {
        Self {
            nodes: 16,
            gpus_per_node: 8,
            racks: 1,
            vcores_per_node: 96,
            memory_mb_per_node: 1_048_576,
            gpu_model: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ClusterSpec {
    pub nodes: Vec<SimNode>,
}

impl ClusterSpec {
    pub fn uniform(u: &Uniform) -> Result<Self, SlsError> {
        if u.nodes == 0 {
            return Err(SlsError::NoNodes);
        }
        if u.nodes > MAX_NODES {
            return Err(SlsError::BadOption {
                option: "--nodes",
                expected: "at most 1,000,000",
                value: u.nodes.to_string(),
            });
        }
        let racks = u.racks.clamp(1, u.nodes);
        let per_rack = u.nodes.div_ceil(racks);
        let nodes = (0..u.nodes)
            .map(|i| SimNode {
                host: format!("node{:05}", i + 1),
                rack: format!("/rack{:03}", i / per_rack + 1),
                gpus: u.gpus_per_node,
                vcores: u.vcores_per_node,
                memory_mb: u.memory_mb_per_node,
                gpu_model: u.gpu_model.clone(),
            })
            .collect();
        Ok(Self { nodes })
    }

    /// A node file: CSV with a header naming any of `count` (identical nodes, default 1),
    /// `host`, `rack`, `gpus`, `vcores`, `memory_mb` and `gpu_model`; missing columns take
    /// the uniform defaults in `d`.
    pub fn from_file(path: &Path, d: &Uniform) -> Result<Self, SlsError> {
        let text = std::fs::read_to_string(path).map_err(|source| SlsError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut reader = csv::ReaderBuilder::new()
            .trim(csv::Trim::All)
            .flexible(true)
            .comment(Some(b'#'))
            .from_reader(text.as_bytes());
        let bad = |line: usize, reason: String| SlsError::BadNodeLine {
            path: path.to_path_buf(),
            line,
            reason,
        };
        let header = reader.headers().map_err(|e| bad(1, e.to_string()))?.clone();
        let col = |name: &str| header.iter().position(|h| h.eq_ignore_ascii_case(name));
        let (c_count, c_host, c_rack, c_gpus, c_vcores, c_mem, c_model) = (
            col("count"),
            col("host"),
            col("rack"),
            col("gpus"),
            col("vcores"),
            col("memory_mb"),
            col("gpu_model"),
        );
        let mut nodes = Vec::new();
        let mut hosts = BTreeSet::new();
        for (i, rec) in reader.records().enumerate() {
            let rec = rec.map_err(|e| bad(i + 2, e.to_string()))?;
            let line = rec.position().map(|p| p.line() as usize).unwrap_or(i + 2);
            let get = |c: Option<usize>| c.and_then(|c| rec.get(c)).filter(|s| !s.is_empty());
            let int = |c: Option<usize>, name: &str, default: i64, min: i64| match get(c) {
                None => Ok(default),
                Some(v) => match v.parse::<i64>() {
                    Ok(n) if n >= min => Ok(n),
                    _ => Err(bad(
                        line,
                        format!("`{name}` must be a whole number >= {min}, got '{v}'"),
                    )),
                },
            };
            let count = int(c_count, "count", 1, 1)?;
            if nodes.len() as i64 + count > MAX_NODES as i64 {
                return Err(bad(
                    line,
                    format!("the cluster would have more than {MAX_NODES} nodes"),
                ));
            }
            let gpus = int(c_gpus, "gpus", d.gpus_per_node, 0)?;
            let vcores = int(c_vcores, "vcores", d.vcores_per_node, 1)?;
            let memory_mb = int(c_mem, "memory_mb", d.memory_mb_per_node, 1)?;
            let rack = get(c_rack)
                .map(str::to_string)
                .unwrap_or_else(|| "/rack001".into());
            if !rack.starts_with('/') {
                return Err(bad(
                    line,
                    format!("`rack` must start with '/', got '{rack}'"),
                ));
            }
            let model = get(c_model)
                .map(str::to_string)
                .or_else(|| d.gpu_model.clone());
            for k in 0..count {
                let host = match (get(c_host), count) {
                    (Some(h), 1) => h.to_string(),
                    (Some(h), _) => format!("{h}{:03}", k + 1),
                    (None, _) => format!("node{:05}", nodes.len() + 1),
                };
                if !hosts.insert(host.clone()) {
                    return Err(bad(line, format!("host '{host}' appears twice")));
                }
                nodes.push(SimNode {
                    host,
                    rack: rack.clone(),
                    gpus,
                    vcores,
                    memory_mb,
                    gpu_model: model.clone(),
                });
            }
        }
        if nodes.is_empty() {
            return Err(SlsError::NoNodes);
        }
        Ok(Self { nodes })
    }

    pub fn total_gpus(&self) -> i64 {
        self.nodes.iter().map(|n| n.gpus).sum()
    }

    pub fn gpu_models(&self) -> BTreeSet<String> {
        self.nodes
            .iter()
            .filter_map(|n| n.gpu_model.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_nodes_are_spread_over_racks() {
        let c = ClusterSpec::uniform(&Uniform {
            nodes: 4,
            racks: 2,
            ..Uniform::default()
        })
        .expect("test");
        let racks: Vec<&str> = c.nodes.iter().map(|n| n.rack.as_str()).collect();
        assert_eq!(racks, ["/rack001", "/rack001", "/rack002", "/rack002"]);
        assert_eq!(c.total_gpus(), 32);
        let too_many = ClusterSpec::uniform(&Uniform {
            nodes: MAX_NODES + 1,
            ..Uniform::default()
        });
        assert!(matches!(
            too_many,
            Err(SlsError::BadOption {
                option: "--nodes",
                ..
            })
        ));
    }

    #[test]
    fn a_node_file_makes_a_mixed_cluster_and_names_bad_lines() {
        let dir = tempfile::tempdir().expect("test");
        let p = dir.path().join("nodes.csv");
        std::fs::write(
            &p,
            "count,gpus,gpu_model,rack\n2,8,H100,/r1\n1,4,A100,/r2\n",
        )
        .expect("test");
        let c = ClusterSpec::from_file(&p, &Uniform::default()).expect("test");
        assert_eq!(c.nodes.len(), 3);
        assert_eq!(c.total_gpus(), 20);
        assert_eq!(c.gpu_models().len(), 2);
        std::fs::write(&p, "count,gpus\n1,8\n1,-2\n").expect("test");
        let err = ClusterSpec::from_file(&p, &Uniform::default()).expect_err("test");
        assert!(err.to_string().contains("line 3"), "{err}");
    }
}
