//! `sanity_check`: the accounting invariants every step must keep, for tests and the simulator.

use super::*;

impl RmCore {
    /// The invariants every step must keep: no node over-allocated, node and app usage
    /// equal the sum of their live containers, every live container belongs to one app's
    /// attempt and one node.
    pub fn sanity_check(&self) -> Result<(), String> {
        self.sched.check()?;
        self.check_decommissioning()?;
        let mut node_use: BTreeMap<&NodeId, Resource> = BTreeMap::new();
        let mut app_use: BTreeMap<ApplicationId, Resource> = BTreeMap::new();
        for c in self.containers.values().filter(|c| c.is_live()) {
            let app = self
                .apps
                .get(&c.id.application_id())
                .ok_or_else(|| format!("{} has no app", c.id))?;
            let att = app
                .attempt(&c.id.attempt_id)
                .ok_or_else(|| format!("{} has no attempt", c.id))?;
            if !att.containers.contains(&c.id) {
                return Err(format!("{} not listed by its attempt", c.id));
            }
            let node = self
                .nodes
                .get(&c.node)
                .ok_or_else(|| format!("{} on unknown node {}", c.id, c.node))?;
            if !node.containers.contains(&c.id) {
                return Err(format!("{} not listed by node {}", c.id, c.node));
            }
            node_use.entry(&c.node).or_default().add_assign(&c.resource);
            app_use
                .entry(c.id.application_id())
                .or_default()
                .add_assign(&c.resource);
        }
        for n in self.sched.nodes().iter() {
            let id = &n.id;
            let expect = node_use.get(id).cloned().unwrap_or_default();
            if n.used != expect {
                return Err(format!(
                    "node {id} accounts {} but its containers sum to {expect}",
                    n.used
                ));
            }
        }
        for (id, a) in self.sched.apps() {
            let expect = app_use.get(id).cloned().unwrap_or_default();
            if a.used != expect {
                return Err(format!(
                    "app {id} accounts {} but its containers sum to {expect}",
                    a.used
                ));
            }
        }
        for (id, n) in &self.nodes {
            if n.state.is_inactive() && !n.containers.is_empty() {
                return Err(format!("inactive node {id} still holds containers"));
            }
        }
        let finals: BTreeSet<(u64, ApplicationId)> = self
            .apps
            .values()
            .filter(|a| a.state.is_final())
            .map(|a| (a.finish_time, a.id))
            .collect();
        if finals != self.completed {
            return Err(format!(
                "the eviction index holds {} final applications, the table {}",
                self.completed.len(),
                finals.len()
            ));
        }
        Ok(())
    }
}
