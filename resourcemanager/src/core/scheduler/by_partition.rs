//! `ByPartition`: a map keyed by node partition whose default partition (`""`) is reached
//! without comparing strings.
//!
//! A pass looks its partition up at every step (the node index's buckets and totals, where
//! a leaf's visit resumes), and almost every lookup is of the default partition: in a
//! string-keyed `BTreeMap` each is a library `memcmp` call, even for an empty key. Labelled
//! partitions keep a `BTreeMap`; the default partition sits in a field of its own. Walks go
//! in name order, the default partition first, as a `BTreeMap<String, _>` would.
//!
//! Must not: know what its values are.

use std::collections::BTreeMap;

use super::counts::Counts;

/// A map from partition name to `V` (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ByPartition<V> {
    default: Option<V>,
    labelled: BTreeMap<String, V>,
}

impl<V> Default for ByPartition<V> {
    fn default() -> Self {
        Self {
            default: None,
            labelled: BTreeMap::new(),
        }
    }
}

impl<V> ByPartition<V> {
    pub(super) fn get(&self, partition: &str) -> Option<&V> {
        if partition.is_empty() {
            self.default.as_ref()
        } else {
            self.labelled.get(partition)
        }
    }

    pub(super) fn get_mut(&mut self, partition: &str) -> Option<&mut V> {
        if partition.is_empty() {
            self.default.as_mut()
        } else {
            self.labelled.get_mut(partition)
        }
    }

    /// The value of `partition`, made by `new` first if it has none (its name copied only
    /// then).
    pub(super) fn get_or_insert_with(
        &mut self,
        partition: &str,
        new: impl FnOnce() -> V,
    ) -> &mut V {
        if partition.is_empty() {
            return self.default.get_or_insert_with(new);
        }
        if !self.labelled.contains_key(partition) {
            self.labelled.insert(partition.to_string(), new());
        }
        self.labelled
            .get_mut(partition)
            .expect("inserted just above")
    }

    pub(super) fn insert(&mut self, partition: &str, value: V) -> Option<V> {
        if partition.is_empty() {
            self.default.replace(value)
        } else {
            self.labelled.insert(partition.to_string(), value)
        }
    }

    pub(super) fn remove(&mut self, partition: &str) -> Option<V> {
        if partition.is_empty() {
            self.default.take()
        } else {
            self.labelled.remove(partition)
        }
    }

    /// Every partition with its value, in name order (the default partition first).
    pub(super) fn iter(&self) -> impl Iterator<Item = (&str, &V)> {
        self.default
            .iter()
            .map(|v| ("", v))
            .chain(self.labelled.iter().map(|(k, v)| (k.as_str(), v)))
    }

    pub(super) fn keys(&self) -> impl Iterator<Item = &str> {
        self.iter().map(|(k, _)| k)
    }

    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.default.iter_mut().chain(self.labelled.values_mut())
    }
}

/// Nodes counted per partition (`NodeIndex`'s members).
impl Counts<str> for ByPartition<usize> {
    fn slot(&mut self, partition: &str) -> Option<&mut usize> {
        self.get_mut(partition)
    }
    fn first(&mut self, partition: &str) {
        self.insert(partition, 1);
    }
    fn forget(&mut self, partition: &str) {
        self.remove(partition);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_partition_is_one_among_the_others_in_name_order() {
        let mut m: ByPartition<u32> = ByPartition::default();
        m.insert("gpu", 2);
        *m.get_or_insert_with("", || 0) += 1;
        m.insert("a100", 3);
        assert_eq!(m.get(""), Some(&1));
        assert_eq!(m.keys().collect::<Vec<_>>(), ["", "a100", "gpu"]);
        assert_eq!(m.remove(""), Some(1));
        assert_eq!(m.get(""), None);
        assert_eq!(m.remove("gpu"), Some(2));
        assert_eq!(m.iter().collect::<Vec<_>>(), [("a100", &3)]);
    }

    #[test]
    fn counts_drop_their_partition_at_zero() {
        let mut m: ByPartition<usize> = ByPartition::default();
        m.count("", true);
        m.count("", true);
        m.count("x", true);
        m.count("", false);
        m.count("x", false);
        assert_eq!(m.iter().collect::<Vec<_>>(), [("", &1)]);
        m.count("", false);
        assert!(m.keys().next().is_none());
    }
}
