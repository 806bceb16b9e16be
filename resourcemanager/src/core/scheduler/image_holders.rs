//! Which nodes hold which container images, so that an ask for an image can try those nodes
//! first (Kubernetes' ImageLocality; YARN has none). A preference, never a requirement: an
//! ask whose image no fitting node holds is placed as if it named none.
//!
//! Images are opaque strings here (the edge gives canonical references and digests). Kept
//! by slot, beside the [`super::node_index::NodeIndex`] that owns the slots; a removed node's
//! images are forgotten with it.

use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, Default)]
pub(super) struct ImageHolders {
    by_image: BTreeMap<String, BTreeSet<usize>>,
    of_slot: BTreeMap<usize, BTreeSet<String>>,
}

impl ImageHolders {
    /// `slot` now holds exactly `images` (its NM's last report).
    pub(super) fn set(&mut self, slot: usize, images: BTreeSet<String>) {
        self.forget(slot);
        for i in &images {
            self.by_image.entry(i.clone()).or_default().insert(slot);
        }
        if !images.is_empty() {
            self.of_slot.insert(slot, images);
        }
    }

    /// `slot` was removed (or reused): it holds nothing.
    pub(super) fn forget(&mut self, slot: usize) {
        let Some(old) = self.of_slot.remove(&slot) else {
            return;
        };
        for i in old {
            if let Some(set) = self.by_image.get_mut(&i) {
                set.remove(&slot);
                if set.is_empty() {
                    self.by_image.remove(&i);
                }
            }
        }
    }

    /// The slots holding `image`, in slot order.
    pub(super) fn holders<'a>(&'a self, image: &str) -> impl Iterator<Item = usize> + 'a {
        self.by_image.get(image).into_iter().flatten().copied()
    }

    /// Whether `slot` holds `image`.
    pub(super) fn holds(&self, slot: usize, image: &str) -> bool {
        self.of_slot.get(&slot).is_some_and(|s| s.contains(image))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_replaces_the_last_and_removal_forgets() {
        let mut h = ImageHolders::default();
        h.set(1, BTreeSet::from(["a".to_string(), "b".to_string()]));
        h.set(2, BTreeSet::from(["b".to_string()]));
        assert_eq!(h.holders("b").collect::<Vec<_>>(), vec![1, 2]);
        h.set(1, BTreeSet::from(["c".to_string()]));
        assert_eq!(h.holders("a").count(), 0);
        assert_eq!(h.holders("b").collect::<Vec<_>>(), vec![2]);
        assert!(h.holds(1, "c") && !h.holds(1, "b"));
        h.forget(1);
        assert_eq!(h.holders("c").count(), 0);
        assert!(!h.of_slot.contains_key(&1));
        assert!(h.by_image.keys().all(|k| k == "b"));
    }
}
