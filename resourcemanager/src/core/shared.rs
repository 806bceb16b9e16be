//! `SharedMap`: the persistent map the core keeps its applications, nodes and containers in.
//!
//! A REST read snapshot clones it in O(1) and shares every node of the tree with the core;
//! a write copies only the path it changes. Values sit behind an `Arc`, so a B-tree node
//! holds pointers, not records: a node split moves a few hundred bytes, never tens of
//! kilobytes. (Holding `App` by value, a debug-build RM overflowed its 2 MiB worker stack at
//! its 98th application.) `get_mut` clones a record only while a snapshot still shares it.

use std::borrow::Borrow;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// An ordered persistent map with values behind a shared pointer (see the module docs).
pub struct SharedMap<K, V> {
    inner: imbl::OrdMap<K, Arc<V>>,
    /// Entries the walks of this map could visit (its length at each `iter`, `keys` or
    /// `values`): a work counter, so that a walk of every container or node where a lookup
    /// would do shows in the work-ceiling test (`tests/work_ceilings.rs`). Atomic because
    /// read snapshots are shared between threads; one add per walk, not per entry.
    walked: AtomicU64,
}

impl<K: Ord + Clone, V: Clone> SharedMap<K, V> {
    pub fn new() -> Self {
        Self {
            inner: imbl::OrdMap::new(),
            walked: AtomicU64::new(0),
        }
    }

    /// See `walked`: the sum of this map's length at each walk so far.
    pub fn walked(&self) -> u64 {
        self.walked.load(Ordering::Relaxed)
    }

    fn count_walk(&self) {
        self.walked
            .fetch_add(self.inner.len() as u64, Ordering::Relaxed);
    }

    pub fn len(&self) -> usize {
        self.inner.len()
    }

    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.inner.contains_key(key)
    }

    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.inner.get(key).map(Arc::as_ref)
    }

    /// The value's shared pointer: a copy that costs a count, to read while the map
    /// changes (a `get_mut` of the same key while it lives clones the record).
    pub fn get_shared<Q>(&self, key: &Q) -> Option<Arc<V>>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.inner.get(key).cloned()
    }

    /// The value to change in place; cloned first only if a snapshot shares it.
    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.inner.get_mut(key).map(Arc::make_mut)
    }

    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        self.inner
            .insert(key, Arc::new(value))
            .map(Arc::unwrap_or_clone)
    }

    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.inner.remove(key).map(Arc::unwrap_or_clone)
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&K, &V)> + '_ {
        self.count_walk();
        self.inner.iter().map(|(k, v)| (k, v.as_ref()))
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &K> + '_ {
        self.count_walk();
        self.inner.keys()
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + '_ {
        self.count_walk();
        self.inner.values().map(Arc::as_ref)
    }
}

impl<K: Ord + Clone, V: Clone> Default for SharedMap<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Clone, V> Clone for SharedMap<K, V> {
    /// O(1): the clone shares the whole tree.
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            walked: AtomicU64::new(self.walked.load(Ordering::Relaxed)),
        }
    }
}

impl<K: Ord + Clone + fmt::Debug, V: fmt::Debug> fmt::Debug for SharedMap<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.inner.iter().map(|(k, v)| (k, v.as_ref())))
            .finish()
    }
}

impl<K: Ord + Clone, V: Clone, Q: Ord + ?Sized> std::ops::Index<&Q> for SharedMap<K, V>
where
    K: Borrow<Q>,
{
    type Output = V;
    /// Panics when the key is absent, as `BTreeMap`'s index does: for tests and for keys
    /// the caller has just checked.
    fn index(&self, key: &Q) -> &V {
        self.get(key).expect("SharedMap: no entry for key")
    }
}

impl<'a, K: Ord + Clone, V: Clone> IntoIterator for &'a SharedMap<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = Box<dyn Iterator<Item = (&'a K, &'a V)> + 'a>;
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_keeps_its_values_while_the_original_changes() {
        let mut m: SharedMap<u32, String> = SharedMap::new();
        for i in 0..1000 {
            m.insert(i, format!("v{i}"));
        }
        let snap = m.clone();
        m.get_mut(&7).expect("present").push_str("-changed");
        assert_eq!(m.remove(&8).as_deref(), Some("v8"));
        assert_eq!(snap.get(&7).map(String::as_str), Some("v7"));
        assert_eq!(snap.get(&8).map(String::as_str), Some("v8"));
        assert_eq!(m.get(&7).map(String::as_str), Some("v7-changed"));
        assert_eq!((m.len(), snap.len()), (999, 1000));
        assert!(m.iter().map(|(k, _)| *k).eq((0..1000).filter(|&k| k != 8)));
    }
}
