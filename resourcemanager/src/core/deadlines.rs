//! `Deadlines`: keys with one time each, soonest first, so that what time drives (a node's
//! liveness) costs the keys that came due, not every key there is.

use std::collections::{BTreeMap, BTreeSet};

/// Keys with one time each. Setting a key's time again replaces it.
#[derive(Debug, Clone)]
pub(super) struct Deadlines<K: Ord + Clone> {
    at: BTreeMap<K, u64>,
    order: BTreeSet<(u64, K)>,
}

impl<K: Ord + Clone> Default for Deadlines<K> {
    fn default() -> Self {
        Self {
            at: BTreeMap::new(),
            order: BTreeSet::new(),
        }
    }
}

impl<K: Ord + Clone> Deadlines<K> {
    /// Gives `key` the time `t` (replacing the time it had).
    pub(super) fn set(&mut self, key: K, t: u64) {
        if let Some(old) = self.at.insert(key.clone(), t) {
            self.order.remove(&(old, key.clone()));
        }
        self.order.insert((t, key));
    }

    /// The time `key` has, if any.
    pub(super) fn get(&self, key: &K) -> Option<u64> {
        self.at.get(key).copied()
    }

    /// Takes out every key whose time is at or before `t`, soonest first.
    pub(super) fn take_until(&mut self, t: u64) -> Vec<(u64, K)> {
        let mut out = Vec::new();
        while self.order.first().is_some_and(|(at, _)| *at <= t) {
            if let Some((at, key)) = self.order.pop_first() {
                self.at.remove(&key);
                out.push((at, key));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_what_came_due_soonest_first_and_a_key_once() {
        let mut d = Deadlines::default();
        d.set("a", 30);
        d.set("b", 10);
        d.set("c", 20);
        d.set("a", 5); // replaces 30
        assert_eq!(d.take_until(10), vec![(5, "a"), (10, "b")]);
        assert_eq!(d.get(&"a"), None);
        assert_eq!(d.get(&"c"), Some(20));
        assert_eq!(d.take_until(19), vec![]);
        assert_eq!(d.take_until(u64::MAX), vec![(20, "c")]);
        assert_eq!(d.take_until(u64::MAX), vec![]);
    }
}
