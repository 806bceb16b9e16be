//! Resource vectors: `memory-mb`, `vcores` and any countable type from `resource-types.xml`
//! (`yarn.io/gpu`, `yarn.io/fpga`, ...).
//!
//! Values are whole units as YARN's countable resources are. A missing extended type means 0,
//! so a GPU-less ask fits on a GPU-less node without either side naming the type.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::{Mutex, OnceLock};

use smallvec::SmallVec;

pub const MEMORY_MB: &str = "memory-mb";
pub const VCORES: &str = "vcores";
pub const GPU: &str = "yarn.io/gpu";

/// The node attribute naming a node's GPU model (one model per node; mixed nodes report the
/// first GPU's and `mixed` in the value's stead).
pub const GPU_MODEL_ATTRIBUTE: &str = "nm.yarn.io/gpu-model";
pub const FPGA: &str = "yarn.io/fpga";

/// Distinct extended type names kept; names past this (only garbage input produces them)
/// all map to [`UNKNOWN_TYPE`], which no node offers, so such asks are refused as unknown.
const MAX_INTERNED: usize = 4096;
pub const UNKNOWN_TYPE: &str = "<unknown-resource-type>";

/// Resource type names are interned, so a vector is plain data (copied without allocating)
/// and a name compares by pointer in the common case.
fn intern(name: &str) -> &'static str {
    match name {
        GPU => return GPU,
        FPGA => return FPGA,
        _ => {}
    }
    static TABLE: OnceLock<Mutex<BTreeSet<&'static str>>> = OnceLock::new();
    let table = TABLE.get_or_init(|| Mutex::new(BTreeSet::new()));
    let mut set = match table.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    if let Some(s) = set.get(name) {
        return s;
    }
    if set.len() >= MAX_INTERNED {
        return UNKNOWN_TYPE;
    }
    let leaked: &'static str = Box::leak(name.to_string().into_boxed_str());
    set.insert(leaked);
    leaked
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Resource {
    pub memory_mb: i64,
    pub vcores: i64,
    /// Extended countable types sorted by name, never containing `memory-mb` or `vcores`;
    /// zero entries are removed so that equality is structural. Inline for up to three
    /// types: the scheduler copies vectors on every step.
    others: SmallVec<[(&'static str, i64); 3]>,
}

impl Resource {
    pub fn new(memory_mb: i64, vcores: i64) -> Self {
        Self {
            memory_mb,
            vcores,
            others: SmallVec::new(),
        }
    }

    pub fn zero() -> Self {
        Self::default()
    }

    /// Builder: sets an extended type (or memory/vcores by their YARN names).
    pub fn with(mut self, name: &str, value: i64) -> Self {
        self.set(name, value);
        self
    }

    fn position(&self, name: &str) -> Result<usize, usize> {
        self.others.binary_search_by(|(k, _)| (*k).cmp(name))
    }

    pub fn set(&mut self, name: &str, value: i64) {
        match name {
            MEMORY_MB | "memory" => self.memory_mb = value,
            VCORES => self.vcores = value,
            _ => match self.position(name) {
                Ok(i) => {
                    if value == 0 {
                        self.others.remove(i);
                    } else {
                        self.others[i].1 = value;
                    }
                }
                Err(i) => {
                    if value != 0 {
                        self.others.insert(i, (intern(name), value));
                    }
                }
            },
        }
    }

    pub fn get(&self, name: &str) -> i64 {
        match name {
            MEMORY_MB | "memory" => self.memory_mb,
            VCORES => self.vcores,
            _ => self.extended_value(name),
        }
    }

    /// An extended type's value (0 when absent). Pointer equality first: names are
    /// interned, so a name taken from another vector is found without comparing strings,
    /// and a vector without extended types answers at once.
    #[inline]
    fn extended_value(&self, name: &str) -> i64 {
        let others = self.others.as_slice();
        match others {
            [] => return 0,
            [(k, v)] if std::ptr::eq(*k, name) => return *v,
            _ => {}
        }
        if let Some((_, v)) = others.iter().find(|(k, _)| std::ptr::eq(*k, name)) {
            return *v;
        }
        self.position(name).map(|i| others[i].1).unwrap_or(0)
    }

    /// Every named value, memory and vcores first, then extended types in name order.
    pub fn entries(&self) -> impl Iterator<Item = (&'static str, i64)> + '_ {
        [(MEMORY_MB, self.memory_mb), (VCORES, self.vcores)]
            .into_iter()
            .chain(self.others.iter().copied())
    }

    pub fn extended(&self) -> impl Iterator<Item = (&'static str, i64)> + '_ {
        self.others.iter().copied()
    }

    pub fn is_zero(&self) -> bool {
        self.memory_mb == 0 && self.vcores == 0 && self.others.is_empty()
    }

    pub fn any_negative(&self) -> bool {
        self.memory_mb < 0 || self.vcores < 0 || self.others.iter().any(|(_, v)| *v < 0)
    }

    /// True when every component of `self` is at most the same component of `other`.
    pub fn fits_in(&self, other: &Resource) -> bool {
        if self.memory_mb > other.memory_mb || self.vcores > other.vcores {
            return false;
        }
        // Most vectors carry one extended type at most (GPUs): no loop for them.
        match self.others.as_slice() {
            [] => true,
            [(k, v)] => *v <= other.extended_value(k),
            many => many.iter().all(|(k, v)| *v <= other.extended_value(k)),
        }
    }

    /// The largest share of `base` this vector takes over the types it uses (each value
    /// over `base`'s; a type `base` has none of counts as infinite when used): the
    /// dominant-resource calculator's ratio. Values at or below zero count nothing.
    pub fn dominant_ratio(&self, base: &Resource) -> f64 {
        let part = |v: i64, b: i64| {
            if v <= 0 {
                0.0
            } else if b > 0 {
                v as f64 / b as f64
            } else {
                f64::INFINITY
            }
        };
        let mut worst = part(self.memory_mb, base.memory_mb).max(part(self.vcores, base.vcores));
        for (k, v) in &self.others {
            worst = worst.max(part(*v, base.extended_value(k)));
        }
        worst
    }

    /// Saturating, so that no input (a node claiming i64::MAX MB) can overflow a total; the
    /// edges refuse such values (over 2^53) before they get here.
    fn merge(&mut self, o: &Resource, sign: i64) {
        self.memory_mb = self
            .memory_mb
            .saturating_add(sign.saturating_mul(o.memory_mb));
        self.vcores = self.vcores.saturating_add(sign.saturating_mul(o.vcores));
        for (k, v) in &o.others {
            match self.position(k) {
                Ok(i) => {
                    self.others[i].1 = self.others[i].1.saturating_add(sign.saturating_mul(*v));
                    if self.others[i].1 == 0 {
                        self.others.remove(i);
                    }
                }
                Err(i) => self.others.insert(i, (*k, sign.saturating_mul(*v))),
            }
        }
    }

    pub fn add_assign(&mut self, o: &Resource) {
        self.merge(o, 1);
    }

    pub fn sub_assign(&mut self, o: &Resource) {
        self.merge(o, -1);
    }

    pub fn plus(&self, o: &Resource) -> Resource {
        let mut r = self.clone();
        r.add_assign(o);
        r
    }

    pub fn minus(&self, o: &Resource) -> Resource {
        let mut r = self.clone();
        r.sub_assign(o);
        r
    }

    /// Component-wise multiple, for `n` containers of one shape.
    pub fn times(&self, n: i64) -> Resource {
        let mut r = Resource::new(self.memory_mb * n, self.vcores * n);
        if n != 0 {
            r.others = self.others.iter().map(|(k, v)| (*k, v * n)).collect();
        }
        r
    }

    /// Component-wise maximum with zero: what is left when usage may exceed capacity.
    pub fn clamp_non_negative(&self) -> Resource {
        let mut r = Resource::new(self.memory_mb.max(0), self.vcores.max(0));
        r.others = self
            .others
            .iter()
            .filter(|(_, v)| *v > 0)
            .copied()
            .collect();
        r
    }

    /// The largest share of `total` this vector takes over all types (the dominant share
    /// of DRF). A type the cluster has none of counts as a full share when asked for.
    pub fn dominant_share(&self, total: &Resource) -> f64 {
        self.entries()
            .map(|(k, v)| {
                let t = total.get(k);
                if v <= 0 {
                    0.0
                } else if t <= 0 {
                    1.0
                } else {
                    v as f64 / t as f64
                }
            })
            .fold(0.0, f64::max)
    }
}

impl fmt::Display for Resource {
    /// YARN's `<memory:1024, vCores:1, yarn.io/gpu: 2>` form, used in diagnostics and the
    /// scheduler REST view's `usedResources`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<memory:{}, vCores:{}", self.memory_mb, self.vcores)?;
        for (k, v) in &self.others {
            write!(f, ", {k}: {v}")?;
        }
        write!(f, ">")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_and_fit() {
        let node = Resource::new(8192, 8).with(GPU, 4);
        let ask = Resource::new(1024, 1).with(GPU, 1);
        assert!(ask.fits_in(&node));
        assert!(!ask.fits_in(&Resource::new(8192, 8)));
        let left = node.minus(&ask.times(4));
        assert_eq!(left, Resource::new(4096, 4));
        assert!(left.extended().next().is_none());
        assert_eq!(left.plus(&ask.times(4)), node);
        assert_eq!(ask.to_string(), "<memory:1024, vCores:1, yarn.io/gpu: 1>");
    }

    #[test]
    fn dominant_share_is_the_largest() {
        let total = Resource::new(10_000, 10).with(GPU, 4);
        let r = Resource::new(1000, 1).with(GPU, 2);
        assert!((r.dominant_share(&total) - 0.5).abs() < 1e-9);
        assert_eq!(
            Resource::new(0, 0).with(FPGA, 1).dominant_share(&total),
            1.0
        );
    }
}
