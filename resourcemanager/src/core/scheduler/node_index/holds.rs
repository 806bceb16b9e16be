//! The holds gangs keep on nodes: a node held whole for one gang, or held for what the
//! gang will need of it (other asks fit beside that need, see [`NodeIndex::fits`]).

use super::*;

impl NodeIndex {
    /// Holds `slot` for a gang, all of it (`None` frees it).
    pub fn reserve(
        &mut self,
        slot: usize,
        holder: Option<(spindle_common::ApplicationId, String)>,
    ) {
        self.room_epoch += 1;
        self.reserved_need.remove(&slot);
        match holder {
            Some(h) => {
                self.reserved.insert(slot, h);
            }
            None => {
                self.reserved.remove(&slot);
            }
        }
    }

    /// Holds `slot` for a gang that will need `need` of it.
    pub fn hold(
        &mut self,
        slot: usize,
        holder: (spindle_common::ApplicationId, String),
        need: Resource,
    ) {
        self.reserve(slot, Some(holder));
        self.reserved_need.insert(slot, need);
    }

    pub fn reserved_by(&self, slot: usize) -> Option<&(spindle_common::ApplicationId, String)> {
        self.reserved.get(&slot)
    }

    pub fn reservations(&self) -> &BTreeMap<usize, (spindle_common::ApplicationId, String)> {
        self.holds_read
            .set(self.holds_read.get() + self.reserved.len() as u64);
        &self.reserved
    }
}
