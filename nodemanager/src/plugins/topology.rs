//! GPU interconnect topology and the topology-aware pick.
//!
//! The matrix comes from `nvidia-smi topo -m` (or NVML's equivalent queries): for every pair
//! of GPUs, how traffic between them travels. A container asking for k GPUs gets the k free
//! GPUs whose pairwise connections cost least, so a 2-GPU job lands on an NVLink pair rather
//! than across the CPU interconnect.
//!
//! Cost of a pair (lower is better), in the order NVIDIA's legend ranks them:
//!
//! | link | meaning | cost |
//! |---|---|---|
//! | `NV#` | a bonded set of # NVLinks | `max(1, 10 - #)` (more links, cheaper) |
//! | `PIX` | at most one PCIe bridge | 20 |
//! | `PXB` | several PCIe bridges, no host bridge | 30 |
//! | `PHB` | through a PCIe host bridge (the CPU) | 40 |
//! | `NODE` | between host bridges within a NUMA node | 50 |
//! | `SYS` | across the NUMA interconnect (QPI/UPI) | 60 |
//! | unknown | not in the matrix | 70 |
//!
//! The pick minimizes the sum of the pair costs within the chosen set; ties go to the set
//! that leaves the *remaining* free GPUs best connected among themselves (so a lone 1-GPU ask
//! takes the GPU that is worst connected to the others, keeping NVLink groups whole for
//! bigger asks), then to the lowest indexes. Sets are searched exhaustively while there are
//! at most [`EXHAUSTIVE_LIMIT`] of them (all asks on a 16-GPU node), greedily beyond.

use std::collections::BTreeMap;

/// How two GPUs are connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    NvLink(u32),
    Pix,
    Pxb,
    Phb,
    Node,
    Sys,
}

impl Link {
    /// Reads a `topo -m` cell (`NV12`, `PIX`, ... ; the pre-2019 `SOC` means `SYS`).
    pub fn parse(cell: &str) -> Option<Self> {
        let c = cell.trim();
        if let Some(n) = c.strip_prefix("NV") {
            return n.parse().ok().filter(|n| *n > 0).map(Link::NvLink);
        }
        Some(match c {
            "PIX" => Link::Pix,
            "PXB" => Link::Pxb,
            "PHB" => Link::Phb,
            "NODE" => Link::Node,
            "SYS" | "SOC" => Link::Sys,
            _ => return None,
        })
    }

    pub fn cost(self) -> u64 {
        match self {
            Link::NvLink(n) => u64::from(10u32.saturating_sub(n).max(1)),
            Link::Pix => 20,
            Link::Pxb => 30,
            Link::Phb => 40,
            Link::Node => 50,
            Link::Sys => 60,
        }
    }
}

impl std::fmt::Display for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Link::NvLink(n) => write!(f, "NV{n}"),
            Link::Pix => f.write_str("PIX"),
            Link::Pxb => f.write_str("PXB"),
            Link::Phb => f.write_str("PHB"),
            Link::Node => f.write_str("NODE"),
            Link::Sys => f.write_str("SYS"),
        }
    }
}

/// The cost of an unknown pair.
pub const UNKNOWN_COST: u64 = 70;
/// Largest number of candidate sets searched exhaustively.
pub const EXHAUSTIVE_LIMIT: u64 = 20_000;

/// Pairwise links between GPUs, keyed by their position in the discovery output (`GPU<n>`
/// in `topo -m`, which is also the position in `nvidia-smi -q -x`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Topology {
    links: BTreeMap<(u32, u32), Link>,
}

impl Topology {
    pub fn set(&mut self, a: u32, b: u32, link: Link) {
        if a != b {
            self.links.insert((a.min(b), a.max(b)), link);
        }
    }

    pub fn link(&self, a: u32, b: u32) -> Option<Link> {
        self.links.get(&(a.min(b), a.max(b))).copied()
    }

    pub fn cost(&self, a: u32, b: u32) -> u64 {
        if a == b {
            return 0;
        }
        self.link(a, b).map(Link::cost).unwrap_or(UNKNOWN_COST)
    }

    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    /// Re-keys the matrix (position -> device minor number, say); pairs with an unmapped end
    /// are dropped.
    pub fn remap(&self, f: impl Fn(u32) -> Option<u32>) -> Topology {
        let mut t = Topology::default();
        for (&(a, b), &l) in &self.links {
            if let (Some(x), Some(y)) = (f(a), f(b)) {
                t.set(x, y, l);
            }
        }
        t
    }

    fn set_cost(&self, set: &[u32]) -> u64 {
        let mut c = 0;
        for (i, a) in set.iter().enumerate() {
            for b in &set[i + 1..] {
                c += self.cost(*a, *b);
            }
        }
        c
    }

    /// Picks `count` of `free` (ids as keyed in this matrix, given in preference order for
    /// ties, e.g. by index) per the rules in the module doc. Returns them in `free`'s order.
    pub fn best_set(&self, free: &[u32], count: usize) -> Vec<u32> {
        if count == 0 || count >= free.len() {
            return free.iter().copied().take(count).collect();
        }
        let score = |chosen: &[usize]| -> (u64, u64, Vec<usize>) {
            let set: Vec<u32> = chosen.iter().map(|&i| free[i]).collect();
            let rest: Vec<u32> = (0..free.len())
                .filter(|i| !chosen.contains(i))
                .map(|i| free[i])
                .collect();
            (self.set_cost(&set), self.set_cost(&rest), chosen.to_vec())
        };
        if combinations(free.len() as u64, count as u64) <= EXHAUSTIVE_LIMIT {
            let mut best: Option<(u64, u64, Vec<usize>)> = None;
            let mut idx: Vec<usize> = (0..count).collect();
            loop {
                let s = score(&idx);
                if best.as_ref().is_none_or(|b| s < *b) {
                    best = Some(s);
                }
                if !next_combination(&mut idx, free.len()) {
                    break;
                }
            }
            return best
                .map(|(_, _, set)| set.into_iter().map(|i| free[i]).collect())
                .unwrap_or_default();
        }
        // Greedy: the cheapest pair, then the device adding least cost, until `count`.
        let mut chosen: Vec<usize> = Vec::new();
        let mut best_pair = (u64::MAX, 0, 1);
        for i in 0..free.len() {
            for j in i + 1..free.len() {
                let c = self.cost(free[i], free[j]);
                if c < best_pair.0 {
                    best_pair = (c, i, j);
                }
            }
        }
        chosen.push(best_pair.1);
        chosen.push(best_pair.2);
        while chosen.len() < count {
            let next = (0..free.len())
                .filter(|i| !chosen.contains(i))
                .min_by_key(|&i| {
                    chosen
                        .iter()
                        .map(|&c| self.cost(free[i], free[c]))
                        .sum::<u64>()
                });
            match next {
                Some(n) => chosen.push(n),
                None => break,
            }
        }
        chosen.sort_unstable();
        chosen.into_iter().map(|i| free[i]).collect()
    }
}

fn combinations(n: u64, k: u64) -> u64 {
    let k = k.min(n - k);
    let mut c: u64 = 1;
    for i in 0..k {
        c = c.saturating_mul(n - i) / (i + 1);
        if c > EXHAUSTIVE_LIMIT {
            return u64::MAX;
        }
    }
    c
}

/// Advances `idx` (strictly increasing indexes < n) to the next k-combination.
fn next_combination(idx: &mut [usize], n: usize) -> bool {
    let k = idx.len();
    for i in (0..k).rev() {
        if idx[i] < n - k + i {
            idx[i] += 1;
            for j in i + 1..k {
                idx[j] = idx[j - 1] + 1;
            }
            return true;
        }
    }
    false
}

/// Strips ANSI escape sequences (`topo -m` underlines its header on some drivers).
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for d in chars.by_ref() {
                    if d.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// Parses `nvidia-smi topo -m`. Rows and columns named `GPU<n>`; other columns (NICs, CPU
/// and NUMA affinity) and the legend are ignored. Errors when no GPU header is found or a
/// GPU-GPU cell is not a known link.
pub fn parse_topo(text: &str) -> Result<Topology, String> {
    let text = strip_ansi(text);
    let mut header: Option<Vec<Option<u32>>> = None;
    let mut topo = Topology::default();
    let gpu_no = |s: &str| {
        s.trim()
            .strip_prefix("GPU")
            .and_then(|n| n.parse::<u32>().ok())
    };
    for line in text.lines() {
        let cells: Vec<&str> = line.split('\t').map(str::trim).collect();
        let words: Vec<&str> = line.split_whitespace().collect();
        if header.is_none() {
            if words.first().and_then(|w| gpu_no(w)).is_some() {
                // Header: the first cell is empty when tab-separated; with spaces it starts
                // with GPU0 directly.
                let cols: Vec<Option<u32>> = if line.contains('\t') {
                    cells.iter().skip(1).map(|c| gpu_no(c)).collect()
                } else {
                    words.iter().map(|c| gpu_no(c)).collect()
                };
                header = Some(cols);
            }
            continue;
        }
        let Some(cols) = &header else { continue };
        let Some(row) = words.first().and_then(|w| gpu_no(w)) else {
            if words.first().is_some_and(|w| w.starts_with("Legend")) {
                break;
            }
            continue;
        };
        let values: Vec<&str> = if line.contains('\t') {
            cells.iter().skip(1).copied().collect()
        } else {
            words.iter().skip(1).copied().collect()
        };
        for (i, col) in cols.iter().enumerate() {
            let Some(col) = col else { continue };
            if *col == row {
                continue;
            }
            let Some(cell) = values.get(i) else {
                return Err(format!("row GPU{row} has no column GPU{col}"));
            };
            let link = Link::parse(cell)
                .ok_or_else(|| format!("unknown link '{cell}' between GPU{row} and GPU{col}"))?;
            topo.set(row, *col, link);
        }
    }
    if header.is_none() {
        return Err("no GPU header line: not nvidia-smi topo -m output".into());
    }
    Ok(topo)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DGX1: &str = "\t\u{1b}[4mGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tCPU Affinity\tNUMA Affinity\u{1b}[0m
GPU0\t X \tNV1\tNV1\tNV2\tNV2\tSYS\tSYS\tSYS\t0-19,40-59\t0
GPU1\tNV1\t X \tNV2\tNV1\tSYS\tNV2\tSYS\tSYS\t0-19,40-59\t0
GPU2\tNV1\tNV2\t X \tNV2\tSYS\tSYS\tNV1\tSYS\t0-19,40-59\t0
GPU3\tNV2\tNV1\tNV2\t X \tSYS\tSYS\tSYS\tNV1\t0-19,40-59\t0
GPU4\tNV2\tSYS\tSYS\tSYS\t X \tNV1\tNV1\tNV2\t20-39,60-79\t1
GPU5\tSYS\tNV2\tSYS\tSYS\tNV1\t X \tNV2\tNV1\t20-39,60-79\t1
GPU6\tSYS\tSYS\tNV1\tSYS\tNV1\tNV2\t X \tNV2\t20-39,60-79\t1
GPU7\tSYS\tSYS\tSYS\tNV1\tNV2\tNV1\tNV2\t X \t20-39,60-79\t1

Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NV#  = Connection traversing a bonded set of # NVLinks
";

    #[test]
    fn parses_a_dgx1_matrix() {
        let t = parse_topo(DGX1).unwrap();
        assert_eq!(t.link(0, 3), Some(Link::NvLink(2)));
        assert_eq!(t.link(3, 0), Some(Link::NvLink(2)));
        assert_eq!(t.link(1, 7), Some(Link::Sys));
        assert_eq!(t.cost(0, 0), 0);
        assert!(parse_topo("garbage").is_err());
        assert!(parse_topo("\tGPU0\tGPU1\nGPU0\t X \tQQQ\n")
            .unwrap_err()
            .contains("QQQ"));
    }

    #[test]
    fn picks_the_best_connected_free_set() {
        let t = parse_topo(DGX1).unwrap();
        let all: Vec<u32> = (0..8).collect();
        // Two GPUs: a double-NVLink pair.
        let two = t.best_set(&all, 2);
        assert_eq!(t.link(two[0], two[1]), Some(Link::NvLink(2)), "{two:?}");
        // Four: a fully NVLinked quad (0,1,2,3 costs 1 NV1*... rather than mixing halves).
        assert_eq!(t.best_set(&all, 4), vec![0, 1, 2, 3]);
        // Only SYS-separated GPUs free except one pair: the pair wins.
        assert_eq!(t.best_set(&[1, 4, 6, 7], 2), vec![4, 7]);
        // Ties on PCIe-only topology fall to the lowest indexes.
        let mut pcie = Topology::default();
        for a in 0..4 {
            for b in a + 1..4 {
                pcie.set(a, b, if a / 2 == b / 2 { Link::Pix } else { Link::Sys });
            }
        }
        assert_eq!(pcie.best_set(&[0, 1, 2, 3], 2), vec![0, 1]);
        // One GPU: the one whose loss hurts the rest least (GPU 2's partner 3 is busy).
        assert_eq!(pcie.best_set(&[0, 1, 2], 1), vec![2]);
        // Greedy beyond the exhaustive limit still returns `count` distinct devices.
        let big = Topology::default();
        let many: Vec<u32> = (0..40).collect();
        let s = big.best_set(&many, 20);
        assert_eq!(s.len(), 20);
        assert_eq!(combinations(8, 4), 70);
    }
}
