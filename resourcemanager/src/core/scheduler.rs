//! The allocation engine: free resources per node, outstanding asks per application, and the
//! placement of containers. Pure: it is told about nodes, asks and releases, and answers with
//! placements; the lifecycle layer ([`super::RmCore`]) turns placements into containers.
//!
//! Session-1 policy: applications are served in order of application priority (higher first)
//! then submission; within an application, asks by YARN request priority (lower value first).
//! Locality: host asks are tried first; with `relaxLocality` the ask falls back to any node.
//! Nodes are visited round-robin from a moving cursor so that independent containers spread.
//! (Queues, user limits, delay scheduling and gangs arrive with the capacity scheduler.)

use std::collections::BTreeMap;

use spindle_common::{ApplicationId, NodeId, Resource};

/// (YARN request priority, allocationRequestId): the key of a desired-state ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AskKey {
    pub priority: i32,
    pub allocation_request_id: i64,
}

/// The desired state for one [`AskKey`]: how many containers are still wanted anywhere
/// (`any`), on given hosts and racks, and whether the ask may fall back from them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    pub capability: Resource,
    pub any: u32,
    pub relax_locality: bool,
    pub hosts: BTreeMap<String, u32>,
    pub racks: BTreeMap<String, u32>,
    /// The application's AM container ask.
    pub is_am: bool,
}

impl Ask {
    pub fn new(capability: Resource, n: u32) -> Self {
        Self {
            capability,
            any: n,
            relax_locality: true,
            hosts: BTreeMap::new(),
            racks: BTreeMap::new(),
            is_am: false,
        }
    }
}

#[derive(Debug, Clone)]
pub struct SchedNode {
    pub host: String,
    pub rack: String,
    pub total: Resource,
    pub used: Resource,
    /// RUNNING nodes take containers; others (NEW, UNHEALTHY) keep what they have.
    pub schedulable: bool,
}

impl SchedNode {
    pub fn free(&self) -> Resource {
        self.total.minus(&self.used)
    }
}

#[derive(Debug, Clone)]
pub struct SchedApp {
    pub priority: i32,
    pub submit_seq: u64,
    pub queue: String,
    pub user: String,
    pub asks: BTreeMap<AskKey, Ask>,
    pub used: Resource,
}

/// One decision: place a container of `resource` for `app`'s ask `key` on `node`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub app: ApplicationId,
    pub key: AskKey,
    pub node: NodeId,
    pub resource: Resource,
    pub is_am: bool,
}

#[derive(Debug, Default, Clone)]
pub struct Scheduler {
    nodes: BTreeMap<NodeId, SchedNode>,
    apps: BTreeMap<ApplicationId, SchedApp>,
    /// Round-robin start for the next node scan.
    cursor: usize,
}

impl Scheduler {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn nodes(&self) -> &BTreeMap<NodeId, SchedNode> {
        &self.nodes
    }

    pub fn apps(&self) -> &BTreeMap<ApplicationId, SchedApp> {
        &self.apps
    }

    pub fn node(&self, id: &NodeId) -> Option<&SchedNode> {
        self.nodes.get(id)
    }

    pub fn app(&self, id: &ApplicationId) -> Option<&SchedApp> {
        self.apps.get(id)
    }

    pub fn add_node(&mut self, id: NodeId, rack: String, total: Resource, used: Resource) {
        let host = id.host.clone();
        self.nodes.insert(
            id,
            SchedNode {
                host,
                rack,
                total,
                used,
                schedulable: true,
            },
        );
    }

    pub fn remove_node(&mut self, id: &NodeId) -> Option<SchedNode> {
        self.nodes.remove(id)
    }

    pub fn set_schedulable(&mut self, id: &NodeId, schedulable: bool) {
        if let Some(n) = self.nodes.get_mut(id) {
            n.schedulable = schedulable;
        }
    }

    pub fn add_app(
        &mut self,
        id: ApplicationId,
        priority: i32,
        submit_seq: u64,
        queue: &str,
        user: &str,
    ) {
        self.apps.insert(
            id,
            SchedApp {
                priority,
                submit_seq,
                queue: queue.to_string(),
                user: user.to_string(),
                asks: BTreeMap::new(),
                used: Resource::zero(),
            },
        );
    }

    /// Forgets an application. Its containers must have been released first.
    pub fn remove_app(&mut self, id: &ApplicationId) {
        self.apps.remove(id);
    }

    /// Replaces the desired state for one key. `n == 0` everywhere removes it.
    pub fn set_ask(&mut self, app: &ApplicationId, key: AskKey, ask: Ask) {
        if let Some(a) = self.apps.get_mut(app) {
            if ask.any == 0 && ask.hosts.values().all(|v| *v == 0) {
                a.asks.remove(&key);
            } else {
                a.asks.insert(key, ask);
            }
        }
    }

    pub fn ask_mut(&mut self, app: &ApplicationId, key: &AskKey) -> Option<&mut Ask> {
        self.apps.get_mut(app).and_then(|a| a.asks.get_mut(key))
    }

    pub fn clear_asks(&mut self, app: &ApplicationId) {
        if let Some(a) = self.apps.get_mut(app) {
            a.asks.clear();
        }
    }

    /// Accounts a container that exists already (recovered, or re-reported by an NM).
    pub fn charge(&mut self, app: &ApplicationId, node: &NodeId, r: &Resource) {
        if let Some(n) = self.nodes.get_mut(node) {
            n.used.add_assign(r);
        }
        if let Some(a) = self.apps.get_mut(app) {
            a.used.add_assign(r);
        }
    }

    /// Gives a finished or released container's resources back.
    pub fn release(&mut self, app: &ApplicationId, node: &NodeId, r: &Resource) {
        if let Some(n) = self.nodes.get_mut(node) {
            n.used.sub_assign(r);
        }
        if let Some(a) = self.apps.get_mut(app) {
            a.used.sub_assign(r);
        }
    }

    /// Places as many outstanding asks as fit now, and charges them.
    pub fn schedule(&mut self) -> Vec<Placement> {
        let mut out = Vec::new();
        if self.nodes.is_empty() {
            return out;
        }
        let mut order: Vec<(i32, u64, ApplicationId)> = self
            .apps
            .iter()
            .filter(|(_, a)| !a.asks.is_empty())
            .map(|(id, a)| (-a.priority, a.submit_seq, *id))
            .collect();
        order.sort();
        let node_ids: Vec<NodeId> = self.nodes.keys().cloned().collect();
        for (_, _, app_id) in order {
            let keys: Vec<AskKey> = match self.apps.get(&app_id) {
                Some(a) => a.asks.keys().copied().collect(),
                None => continue,
            };
            for key in keys {
                while let Some(ask) = self.apps.get(&app_id).and_then(|a| a.asks.get(&key)) {
                    if ask.any == 0 {
                        break;
                    }
                    let Some((node, pos)) = self.pick_node(&node_ids, ask) else {
                        break;
                    };
                    self.cursor = pos + 1;
                    let resource = ask.capability.clone();
                    let is_am = ask.is_am;
                    self.commit(&app_id, &key, &node, &resource);
                    out.push(Placement {
                        app: app_id,
                        key,
                        node,
                        resource,
                        is_am,
                    });
                }
            }
        }
        out
    }

    fn pick_node(&self, node_ids: &[NodeId], ask: &Ask) -> Option<(NodeId, usize)> {
        let fits = |n: &SchedNode| n.schedulable && ask.capability.fits_in(&n.free());
        let len = node_ids.len();
        let start = self.cursor % len;
        let scan = (0..len).map(|i| &node_ids[(start + i) % len]);
        let wanted_host = |n: &SchedNode| ask.hosts.get(&n.host).is_some_and(|c| *c > 0);
        let wanted_rack = |n: &SchedNode| ask.racks.get(&n.rack).is_some_and(|c| *c > 0);
        let mut chosen = None;
        if ask.hosts.values().any(|c| *c > 0) {
            chosen = scan.clone().find(|id| {
                self.nodes
                    .get(*id)
                    .is_some_and(|n| fits(n) && wanted_host(n))
            });
        }
        if chosen.is_none() && ask.racks.values().any(|c| *c > 0) {
            chosen = scan.clone().find(|id| {
                self.nodes
                    .get(*id)
                    .is_some_and(|n| fits(n) && wanted_rack(n))
            });
        }
        let has_locality = ask.hosts.values().any(|c| *c > 0) || ask.racks.values().any(|c| *c > 0);
        if chosen.is_none() && (ask.relax_locality || !has_locality) {
            chosen = scan
                .clone()
                .find(|id| self.nodes.get(*id).is_some_and(fits));
        }
        let chosen = chosen.cloned()?;
        let pos = node_ids.iter().position(|n| *n == chosen).unwrap_or(0);
        Some((chosen, pos))
    }

    fn commit(&mut self, app: &ApplicationId, key: &AskKey, node: &NodeId, r: &Resource) {
        let (host, rack) = match self.nodes.get(node) {
            Some(n) => (n.host.clone(), n.rack.clone()),
            None => return,
        };
        self.charge(app, node, r);
        if let Some(a) = self.apps.get_mut(app) {
            let mut remove = false;
            if let Some(ask) = a.asks.get_mut(key) {
                ask.any = ask.any.saturating_sub(1);
                if let Some(c) = ask.hosts.get_mut(&host) {
                    *c = c.saturating_sub(1);
                }
                if let Some(c) = ask.racks.get_mut(&rack) {
                    *c = c.saturating_sub(1);
                }
                remove = ask.any == 0;
            }
            if remove {
                a.asks.remove(key);
            }
        }
    }

    /// Outstanding containers and resources over all asks (the cluster's pending figures).
    pub fn pending(&self) -> (u64, Resource) {
        let mut n = 0u64;
        let mut r = Resource::zero();
        for a in self.apps.values() {
            for ask in a.asks.values() {
                n += u64::from(ask.any);
                r.add_assign(&ask.capability.times(i64::from(ask.any)));
            }
        }
        (n, r)
    }

    /// Checks the scheduler's own invariants: no node over-allocated, no negative usage.
    pub fn check(&self) -> Result<(), String> {
        for (id, n) in &self.nodes {
            if !n.used.fits_in(&n.total) || n.used.any_negative() {
                return Err(format!(
                    "node {id} used {} exceeds total {}",
                    n.used, n.total
                ));
            }
        }
        for (id, a) in &self.apps {
            if a.used.any_negative() {
                return Err(format!("app {id} has negative usage {}", a.used));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(n: u32) -> ApplicationId {
        ApplicationId::new(1, n)
    }

    #[test]
    fn spreads_and_never_overallocates() {
        let mut s = Scheduler::new();
        s.add_node(
            NodeId::new("a", 1),
            "/r".into(),
            Resource::new(4096, 4),
            Resource::zero(),
        );
        s.add_node(
            NodeId::new("b", 1),
            "/r".into(),
            Resource::new(4096, 4),
            Resource::zero(),
        );
        s.add_app(app(1), 0, 1, "default", "u");
        s.set_ask(
            &app(1),
            AskKey {
                priority: 1,
                allocation_request_id: 0,
            },
            Ask::new(Resource::new(1024, 1), 10),
        );
        let p = s.schedule();
        assert_eq!(p.len(), 8);
        assert_eq!(p[0].node.host, "a");
        assert_eq!(p[1].node.host, "b");
        s.check().unwrap();
        assert_eq!(s.pending().0, 2);
    }

    #[test]
    fn strict_locality_waits_for_its_host() {
        let mut s = Scheduler::new();
        s.add_node(
            NodeId::new("a", 1),
            "/r".into(),
            Resource::new(1024, 1),
            Resource::zero(),
        );
        s.add_app(app(1), 0, 1, "default", "u");
        let mut ask = Ask::new(Resource::new(1024, 1), 1);
        ask.relax_locality = false;
        ask.hosts.insert("b".into(), 1);
        let key = AskKey {
            priority: 1,
            allocation_request_id: 0,
        };
        s.set_ask(&app(1), key, ask);
        assert!(s.schedule().is_empty());
        s.add_node(
            NodeId::new("b", 1),
            "/r".into(),
            Resource::new(1024, 1),
            Resource::zero(),
        );
        let p = s.schedule();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].node.host, "b");
    }
}
