//! How a fit is found: the orders the index offers (best fit for GPU asks, most free first)
//! and the bounded searches over them (anywhere in a partition, on named hosts or racks, or
//! on a node holding an image), each counting the nodes it looks at.

use super::*;

impl NodeIndex {
    fn fits(&self, slot: usize, ask: &Resource) -> bool {
        self.probes.set(self.probes.get() + 1);
        let Some(n) = self.get(slot) else {
            return false;
        };
        if !n.schedulable || !ask.fits_in(&n.free) {
            return false;
        }
        if !self.reserved.contains_key(&slot) {
            return true;
        }
        // A held node takes an ask only beside what its holder will need of it: in every
        // type the ask uses, what runs there now, the ask and the hold fit the node.
        let Some(need) = self.reserved_need.get(&slot) else {
            return false;
        };
        ask.entries()
            .filter(|(_, v)| *v > 0)
            .all(|(k, v)| n.used.get(k) + v + need.get(k) <= n.total.get(k))
    }

    /// A node holding `image` that fits `ask` and passes `also` (at most `PROBES * 4` of
    /// the holders looked at, in slot order).
    pub fn find_holding(
        &self,
        image: &str,
        ask: &Resource,
        also: &dyn Fn(&SchedNode) -> bool,
    ) -> Option<usize> {
        self.images
            .holders(image)
            .take(PROBES * 4)
            .find(|s| self.fits(*s, ask) && self.get(*s).is_some_and(also))
    }

    /// Every indexed node (with room for at least a minimum allocation), most free GPUs
    /// first and, within that, most free memory first.
    pub fn by_free_desc<'a>(&'a self, partition: &str) -> impl Iterator<Item = usize> + 'a {
        let p = self.buckets.get(partition);
        (0..=MAX_BUCKET)
            .rev()
            .filter_map(move |b| p.map(|p| &p[b]))
            .flat_map(|set| set.iter().rev().map(|(_, s)| *s))
            .inspect(|_| self.probes.set(self.probes.get() + 1))
    }

    /// Indexed nodes with at least `gpus` free GPUs and `mem` free memory, fewest free GPUs
    /// first and, within that, least free memory first (best fit).
    pub fn best_fit_order<'a>(
        &'a self,
        partition: &str,
        gpus: i64,
        mem: i64,
    ) -> impl Iterator<Item = usize> + 'a {
        let g = gpus.clamp(0, MAX_BUCKET as i64) as usize;
        let p = self.buckets.get(partition);
        (g..=MAX_BUCKET)
            .filter_map(move |b| p.map(|p| &p[b]))
            .flat_map(move |set| set.range((mem, 0)..).map(|(_, s)| *s))
            .inspect(|_| self.probes.set(self.probes.get() + 1))
    }

    /// Indexed nodes of every partition whose free room takes `ask` (`ask` at least the
    /// minimum allocation, as every indexed node's room is), by partition and best fit.
    pub fn taking_anywhere<'a>(&'a self, ask: &'a Resource) -> impl Iterator<Item = usize> + 'a {
        self.buckets
            .keys()
            .flat_map(move |p| self.best_fit_order(p, ask.get(GPU), ask.memory_mb))
            .filter(move |s| self.get(*s).is_some_and(|n| ask.fits_in(&n.free)))
    }

    /// Slots of every node, schedulable or not. Counted (`walked`).
    pub fn slots(&self) -> impl Iterator<Item = usize> + '_ {
        self.by_id
            .values()
            .copied()
            .inspect(|_| self.walked.set(self.walked.get() + 1))
    }

    /// A node of `partition` that fits `ask` and passes `also`, by the placement policy of
    /// this module. `probes` bounds the nodes looked at per bucket.
    pub fn find_any(
        &self,
        ask: &Resource,
        partition: &str,
        probes: usize,
        also: &dyn Fn(&SchedNode) -> bool,
    ) -> Option<usize> {
        let ok = |s: usize| self.fits(s, ask) && self.get(s).is_some_and(also);
        let g = ask.get(GPU).clamp(0, MAX_BUCKET as i64) as usize;
        if g > 0 {
            for b in g..=MAX_BUCKET {
                let found = self
                    .bucket(partition, b)?
                    .range((ask.memory_mb, 0)..)
                    .take(probes)
                    .map(|(_, s)| *s)
                    .find(|s| ok(*s));
                if found.is_some() {
                    return found;
                }
            }
            return None;
        }
        for b in 0..=MAX_BUCKET {
            let found = self
                .bucket(partition, b)?
                .iter()
                .rev()
                .take_while(|(mem, _)| *mem >= ask.memory_mb)
                .take(probes)
                .map(|(_, s)| *s)
                .find(|s| ok(*s));
            if found.is_some() {
                return found;
            }
        }
        None
    }

    /// A node on one of `hosts` that fits and passes `also`.
    pub fn find_on_hosts<'a>(
        &self,
        hosts: impl Iterator<Item = &'a String>,
        ask: &Resource,
        also: &dyn Fn(&SchedNode) -> bool,
    ) -> Option<usize> {
        self.find_in_groups(&self.by_host, hosts, usize::MAX, ask, also)
    }

    /// A node in one of `racks` that fits and passes `also` (bounded probes per rack).
    pub fn find_in_racks<'a>(
        &self,
        racks: impl Iterator<Item = &'a String>,
        ask: &Resource,
        also: &dyn Fn(&SchedNode) -> bool,
    ) -> Option<usize> {
        self.find_in_groups(&self.by_rack, racks, PROBES * 4, ask, also)
    }

    /// The first node, group by group in the order of `names` (at most `probes` looked at
    /// per group), that fits `ask` and passes `also`.
    fn find_in_groups<'a>(
        &self,
        groups: &BTreeMap<String, BTreeSet<usize>>,
        names: impl Iterator<Item = &'a String>,
        probes: usize,
        ask: &Resource,
        also: &dyn Fn(&SchedNode) -> bool,
    ) -> Option<usize> {
        let ok = |s: usize| self.fits(s, ask) && self.get(s).is_some_and(also);
        names
            .filter_map(|n| groups.get(n))
            .find_map(|slots| slots.iter().copied().take(probes).find(|s| ok(*s)))
    }
}
