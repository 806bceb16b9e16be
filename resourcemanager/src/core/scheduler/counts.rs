//! A map of counts by key, one rule for every such count the scheduler keeps (node shapes,
//! members per partition): a key is present exactly while something counts it.

use std::collections::BTreeMap;

/// A map of counts by key: one more or one fewer, a count that reaches zero removed (so a
/// key is present exactly while something counts it).
pub(super) trait Counts<Q: ?Sized> {
    fn slot(&mut self, key: &Q) -> Option<&mut usize>;
    /// `key` counted once, where it was absent.
    fn first(&mut self, key: &Q);
    fn forget(&mut self, key: &Q);

    /// Counts one more (`up`) or one fewer of `key`.
    fn count(&mut self, key: &Q, up: bool) {
        match self.slot(key) {
            Some(c) if up => *c += 1,
            None if up => self.first(key),
            Some(c) => {
                *c = c.saturating_sub(1);
                if *c == 0 {
                    self.forget(key);
                }
            }
            None => {}
        }
    }
}

impl<K, Q> Counts<Q> for BTreeMap<K, usize>
where
    K: Ord + std::borrow::Borrow<Q>,
    Q: Ord + ToOwned<Owned = K> + ?Sized,
{
    fn slot(&mut self, key: &Q) -> Option<&mut usize> {
        self.get_mut(key)
    }
    fn first(&mut self, key: &Q) {
        self.insert(key.to_owned(), 1);
    }
    fn forget(&mut self, key: &Q) {
        self.remove(key);
    }
}
