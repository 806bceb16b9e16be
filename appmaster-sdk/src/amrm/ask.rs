//! The ask table: YARN's container requests, mirrored as the RM's desired-state table.

use std::collections::{BTreeMap, BTreeSet};

use spindle_common::records::am::{Container, GangSpec, ResourceRequest};
use spindle_common::records::labels::PlacementConstraintInfo;
use spindle_common::records::resource::ResourceInfo;
use spindle_common::resource::Resource;

use super::ANY;
use crate::cpus::VcoresRange;

/// YARN's `AMRMClient.ContainerRequest`: one container of `capability`, anywhere (`*`) and,
/// if given, preferably on `nodes` / `racks`.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerRequest {
    pub capability: Resource,
    /// Lower values are served first within an application, as in YARN.
    pub priority: i32,
    pub nodes: Vec<String>,
    pub racks: Vec<String>,
    /// False forbids falling back from the named nodes/racks to `*`.
    pub relax_locality: bool,
    pub allocation_request_id: i64,
    pub node_label_expression: Option<String>,
    /// Spindle's extension: the gang this request is a member of (granted whole or not at
    /// all with the gang's other members). Usually set through [`crate::gang::GangRequest`].
    pub gang: Option<GangSpec>,
    /// Allocation tags of the container (what placement constraints count).
    pub allocation_tags: Vec<String>,
    /// Where the container may go: tags (IN, NOTIN, CARDINALITY) and node attributes.
    pub placement_constraint: Option<PlacementConstraintInfo>,
    /// Spindle's extension: the container image the container will run in (set the same
    /// image in its launch context). Nodes already holding it are preferred.
    pub image: Option<String>,
    /// Spindle's extension: let the RM's CPU policy size the container's vcores in this
    /// range (the capability carries its minimum); None: the capability's vcores.
    pub vcores_range: Option<VcoresRange>,
}

impl ContainerRequest {
    pub fn new(capability: Resource, priority: i32) -> Self {
        Self {
            capability,
            priority,
            nodes: Vec::new(),
            racks: Vec::new(),
            relax_locality: true,
            allocation_request_id: 0,
            node_label_expression: None,
            gang: None,
            allocation_tags: Vec::new(),
            placement_constraint: None,
            image: None,
            vcores_range: None,
        }
    }
    /// Lets the RM size the vcores in `range` (set the capability's vcores to its minimum).
    pub fn vcores_range(mut self, range: VcoresRange) -> Self {
        self.vcores_range = Some(range);
        self
    }
    /// The image the container runs in: nodes already holding it are preferred.
    pub fn image(mut self, image: impl Into<String>) -> Self {
        self.image = Some(image.into());
        self
    }
    /// The image a launch environment asks for (YARN's `YARN_CONTAINER_RUNTIME_*`
    /// variables), if any and well formed: what the RM prefers nodes by.
    pub fn image_of_env(mut self, env: &BTreeMap<String, String>) -> Self {
        if let Some(i) = spindle_common::runtime_request::requested_image(env) {
            self.image = Some(i);
        }
        self
    }
    pub fn allocation_tags(mut self, tags: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.allocation_tags = tags.into_iter().map(Into::into).collect();
        self
    }
    pub fn placement_constraint(mut self, c: PlacementConstraintInfo) -> Self {
        self.placement_constraint = Some(c);
        self
    }
    pub fn gang(mut self, spec: GangSpec) -> Self {
        self.gang = Some(spec);
        self
    }
    pub fn nodes(mut self, nodes: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.nodes = nodes.into_iter().map(Into::into).collect();
        self
    }
    pub fn racks(mut self, racks: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.racks = racks.into_iter().map(Into::into).collect();
        self
    }
    pub fn relax_locality(mut self, relax: bool) -> Self {
        self.relax_locality = relax;
        self
    }
    pub fn allocation_request_id(mut self, id: i64) -> Self {
        self.allocation_request_id = id;
        self
    }
    pub fn node_label_expression(mut self, expr: impl Into<String>) -> Self {
        self.node_label_expression = Some(expr.into());
        self
    }

    /// The table entries this request counts in, with the relaxLocality each carries
    /// (named nodes and racks: true; `*`: the request's own flag), as YARN's AMRMClient.
    fn keys(&self) -> Vec<(AskKey, bool)> {
        let key = |name: &str| AskKey {
            priority: self.priority,
            allocation_request_id: self.allocation_request_id,
            resource_name: name.to_string(),
        };
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for n in self.nodes.iter().chain(self.racks.iter()) {
            if n != ANY && seen.insert(n.clone()) {
                out.push((key(n), true));
            }
        }
        out.push((key(ANY), self.relax_locality));
        out
    }
}

/// Why a container request was refused (nothing was changed).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AskError {
    #[error("container request capability {0} is empty or negative")]
    BadCapability(String),
    #[error("cannot turn off locality relaxation on a request with no nodes or racks")]
    RelaxWithoutLocation,
    #[error(
        "'{resource_name}' at priority {priority}, allocationRequestId {allocation_request_id} \
         already has {existing} outstanding; a request for {requested} needs another \
         allocationRequestId or priority"
    )]
    CapabilityMismatch {
        priority: i32,
        allocation_request_id: i64,
        resource_name: String,
        existing: String,
        requested: String,
    },
    #[error(
        "cannot ask for '{resource_name}' at priority {priority} with relaxLocality={requested} \
         while it is already asked with relaxLocality={existing}"
    )]
    RelaxLocalityMismatch {
        priority: i32,
        resource_name: String,
        existing: bool,
        requested: bool,
    },
    /// The RM keys asks by (priority, allocationRequestId): one key cannot serve two gangs,
    /// or a gang and plain asks.
    #[error(
        "priority {priority}, allocationRequestId {allocation_request_id} is already asked \
         {existing}; a request {requested} needs another allocationRequestId"
    )]
    GangMismatch {
        priority: i32,
        allocation_request_id: i64,
        existing: String,
        requested: String,
    },
    /// The RM places a gang itself; its members name no nodes or racks.
    #[error("a gang member cannot name nodes or racks (gang '{0}')")]
    GangWithLocality(String),
}

fn gang_words(g: &Option<GangSpec>) -> String {
    match g {
        Some(g) => format!("for gang '{}'", g.id),
        None => "without a gang".into(),
    }
}

/// The RM's key for an ask: SchedulerRequestKey(priority, allocationRequestId) x resourceName.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AskKey {
    pub priority: i32,
    pub allocation_request_id: i64,
    pub resource_name: String,
}

#[derive(Debug, Clone, PartialEq)]
struct AskEntry {
    capability: Resource,
    num_containers: i32,
    relax_locality: bool,
    node_label_expression: Option<String>,
    gang: Option<GangSpec>,
    allocation_tags: Vec<String>,
    placement_constraint: Option<PlacementConstraintInfo>,
    image: Option<String>,
    vcores_range: Option<VcoresRange>,
}

/// The client side of the desired-state ask table.
#[derive(Debug, Clone, Default)]
pub struct AskTable {
    entries: BTreeMap<AskKey, AskEntry>,
    /// What the RM was last told for each key.
    sent: BTreeMap<AskKey, AskEntry>,
    /// Outstanding requests, oldest first, to match grants against.
    requests: Vec<ContainerRequest>,
}

impl AskTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts `req` in (one more container on each of its keys). Refused as a whole when it
    /// conflicts with what is outstanding under the same key.
    pub fn add(&mut self, req: ContainerRequest) -> Result<(), AskError> {
        if req.capability.any_negative() || req.capability.is_zero() {
            return Err(AskError::BadCapability(req.capability.to_string()));
        }
        if !req.relax_locality && req.nodes.is_empty() && req.racks.is_empty() {
            return Err(AskError::RelaxWithoutLocation);
        }
        if let Some(g) = &req.gang {
            if !req.nodes.is_empty() || !req.racks.is_empty() {
                return Err(AskError::GangWithLocality(g.id.clone()));
            }
        }
        let keys = req.keys();
        for (k, relax) in &keys {
            if let Some(e) = self.entries.get(k).filter(|e| e.num_containers > 0) {
                if e.gang.as_ref().map(|g| &g.id) != req.gang.as_ref().map(|g| &g.id) {
                    return Err(AskError::GangMismatch {
                        priority: k.priority,
                        allocation_request_id: k.allocation_request_id,
                        existing: gang_words(&e.gang),
                        requested: gang_words(&req.gang),
                    });
                }
                if e.capability != req.capability {
                    return Err(AskError::CapabilityMismatch {
                        priority: k.priority,
                        allocation_request_id: k.allocation_request_id,
                        resource_name: k.resource_name.clone(),
                        existing: e.capability.to_string(),
                        requested: req.capability.to_string(),
                    });
                }
                if e.relax_locality != *relax {
                    return Err(AskError::RelaxLocalityMismatch {
                        priority: k.priority,
                        resource_name: k.resource_name.clone(),
                        existing: e.relax_locality,
                        requested: *relax,
                    });
                }
            }
        }
        for (k, relax) in keys {
            let e = self.entries.entry(k).or_insert_with(|| AskEntry {
                capability: req.capability.clone(),
                num_containers: 0,
                relax_locality: relax,
                node_label_expression: req.node_label_expression.clone(),
                gang: req.gang.clone(),
                allocation_tags: req.allocation_tags.clone(),
                placement_constraint: req.placement_constraint.clone(),
                image: req.image.clone(),
                vcores_range: req.vcores_range,
            });
            if e.num_containers == 0 {
                e.capability = req.capability.clone();
                e.relax_locality = relax;
                e.node_label_expression = req.node_label_expression.clone();
                e.gang = req.gang.clone();
                e.allocation_tags = req.allocation_tags.clone();
                e.placement_constraint = req.placement_constraint.clone();
                e.image = req.image.clone();
                e.vcores_range = req.vcores_range;
            }
            e.num_containers += 1;
        }
        self.requests.push(req);
        Ok(())
    }

    /// Takes one container away from each of `req`'s keys (never below zero). Returns
    /// whether an equal outstanding request was found.
    pub fn remove(&mut self, req: &ContainerRequest) -> bool {
        let found = match self.requests.iter().position(|r| r == req) {
            Some(i) => {
                self.requests.remove(i);
                true
            }
            None => false,
        };
        if found {
            for (k, _) in req.keys() {
                if let Some(e) = self.entries.get_mut(&k) {
                    e.num_containers = (e.num_containers - 1).max(0);
                }
            }
        }
        found
    }

    /// Takes every outstanding request that `pred` selects out of the table; returns how many.
    ///
    /// With `rm_knows` (the RM already dropped them, as for a gang whose soft timeout passed,
    /// or never accepted them, as for a refused allocate call) the RM's remembered view is
    /// counted down too, so nothing is sent; without it the new absolute counts (zero) are
    /// sent with the next heartbeat, withdrawing the asks at the RM.
    pub fn withdraw(&mut self, pred: impl Fn(&ContainerRequest) -> bool, rm_knows: bool) -> usize {
        let (gone, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.requests)
            .into_iter()
            .partition(|r| pred(r));
        self.requests = kept;
        for req in &gone {
            for (k, _) in req.keys() {
                if let Some(e) = self.entries.get_mut(&k) {
                    e.num_containers = (e.num_containers - 1).max(0);
                }
                if rm_knows {
                    if let Some(e) = self.sent.get_mut(&k) {
                        e.num_containers = (e.num_containers - 1).max(0);
                    }
                    if self.entries.get(&k).is_some_and(|e| e.num_containers == 0)
                        && self.sent.get(&k).is_none_or(|s| s.num_containers == 0)
                    {
                        self.entries.remove(&k);
                        self.sent.remove(&k);
                    }
                }
            }
        }
        gone.len()
    }

    /// Containers still wanted: the sum of the `*` entries.
    pub fn outstanding(&self) -> i32 {
        self.entries
            .iter()
            .filter(|(k, _)| k.resource_name == ANY)
            .map(|(_, e)| e.num_containers)
            .sum()
    }

    /// The outstanding requests, oldest first.
    pub fn requests(&self) -> &[ContainerRequest] {
        &self.requests
    }

    /// The absolute number wanted under a key (0 if absent).
    pub fn num_containers(&self, key: &AskKey) -> i32 {
        self.entries.get(key).map_or(0, |e| e.num_containers)
    }

    /// The entries to send: those that differ from what the RM last heard, in key order.
    pub fn changes(&self) -> Vec<ResourceRequest> {
        self.entries
            .iter()
            .filter(|(k, e)| match self.sent.get(*k) {
                Some(s) => s != *e,
                None => e.num_containers > 0,
            })
            .map(|(k, e)| ResourceRequest {
                priority: k.priority,
                resource_name: k.resource_name.clone(),
                capability: ResourceInfo::from(&e.capability),
                num_containers: e.num_containers,
                relax_locality: e.relax_locality,
                node_label_expression: e.node_label_expression.clone(),
                allocation_request_id: k.allocation_request_id,
                gang: e.gang.clone(),
                allocation_tags: e.allocation_tags.clone(),
                placement_constraint: e.placement_constraint.clone(),
                image: e.image.clone(),
                vcores_range: e.vcores_range.map(|r| r.wire()),
            })
            .collect()
    }

    pub fn has_changes(&self) -> bool {
        !self.changes().is_empty()
    }

    /// Records that the RM heard `sent` (the output of [`AskTable::changes`]); entries that
    /// reached zero are forgotten on both sides.
    pub fn commit(&mut self, sent: &[ResourceRequest]) {
        for r in sent {
            let k = AskKey {
                priority: r.priority,
                allocation_request_id: r.allocation_request_id,
                resource_name: r.resource_name.clone(),
            };
            let Some(e) = self.entries.get(&k) else {
                continue;
            };
            if e.num_containers == 0 {
                self.entries.remove(&k);
                self.sent.remove(&k);
            } else {
                self.sent.insert(k, e.clone());
            }
        }
    }

    /// Forgets what the RM was told, so that the next changes are the whole table (resync).
    pub fn mark_all_unsent(&mut self) {
        self.sent.clear();
        self.entries.retain(|_, e| e.num_containers > 0);
    }

    /// Counts a grant against the oldest matching request (same priority and
    /// allocationRequestId, a capability that fits; one naming the container's node
    /// preferred) and removes it from both the table and the RM's remembered view, since the
    /// RM already counted it down. Returns the matched request.
    pub fn on_allocated(&mut self, c: &Container) -> Option<ContainerRequest> {
        let granted = c.resource.to_resource();
        let node = c.node_id.to_string();
        let same_key = |r: &ContainerRequest| {
            r.priority == c.priority && r.allocation_request_id == c.allocation_request_id
        };
        let fits = |r: &ContainerRequest| r.capability.fits_in(&granted);
        let on_node =
            |r: &ContainerRequest| r.nodes.iter().any(|n| n == &node || n == &c.node_id.host);
        let idx = self
            .requests
            .iter()
            .position(|r| same_key(r) && fits(r) && on_node(r))
            .or_else(|| self.requests.iter().position(|r| same_key(r) && fits(r)))
            .or_else(|| self.requests.iter().position(same_key))?;
        let req = self.requests.remove(idx);
        for (k, _) in req.keys() {
            for table in [&mut self.entries, &mut self.sent] {
                if let Some(e) = table.get_mut(&k) {
                    e.num_containers = (e.num_containers - 1).max(0);
                }
            }
            if self.entries.get(&k).is_some_and(|e| e.num_containers == 0)
                && self.sent.get(&k).is_none_or(|s| s.num_containers == 0)
            {
                self.entries.remove(&k);
                self.sent.remove(&k);
            }
        }
        Some(req)
    }
}

#[cfg(test)]
mod tests {
    use spindle_common::ids::{ApplicationAttemptId, ApplicationId, ContainerId, NodeId};

    use super::*;

    fn res(mb: i64) -> Resource {
        Resource::new(mb, 1)
    }

    fn asks(t: &AskTable) -> Vec<(String, i32, i32, bool)> {
        t.changes()
            .into_iter()
            .map(|r| {
                (
                    r.resource_name,
                    r.priority,
                    r.num_containers,
                    r.relax_locality,
                )
            })
            .collect()
    }

    fn container(seq: u64, priority: i32, mb: i64, node: &str) -> Container {
        let att = ApplicationAttemptId::new(ApplicationId::new(1, 1), 1);
        let node_id: NodeId = node.parse().unwrap();
        Container {
            id: ContainerId::new(att, 0, seq),
            node_http_address: node.to_string(),
            node_id,
            resource: ResourceInfo::from(&res(mb)),
            priority,
            container_token: String::new(),
            execution_type: "GUARANTEED".into(),
            allocation_request_id: 0,
            version: 0,
        }
    }

    #[test]
    fn absolute_counts_and_only_changes_are_sent() {
        let mut t = AskTable::new();
        for _ in 0..3 {
            t.add(ContainerRequest::new(res(256), 0)).unwrap();
        }
        assert_eq!(asks(&t), vec![("*".into(), 0, 3, true)]);
        let sent = t.changes();
        t.commit(&sent);
        assert!(t.changes().is_empty());
        assert_eq!(t.outstanding(), 3);

        // Another priority is a separate key; only it changes.
        t.add(ContainerRequest::new(res(512), 1)).unwrap();
        assert_eq!(asks(&t), vec![("*".into(), 1, 1, true)]);
        let sent = t.changes();
        t.commit(&sent);

        // Removing sends the new absolute count, and zero when the key empties.
        assert!(t.remove(&ContainerRequest::new(res(256), 0)));
        assert!(t.remove(&ContainerRequest::new(res(512), 1)));
        assert_eq!(
            asks(&t),
            vec![("*".into(), 0, 2, true), ("*".into(), 1, 0, true)]
        );
        let sent = t.changes();
        t.commit(&sent);
        assert!(t.changes().is_empty());
        assert!(!t.remove(&ContainerRequest::new(res(512), 1)));
        assert_eq!(t.outstanding(), 2);
    }

    #[test]
    fn a_vcores_range_goes_on_the_wire_with_its_minimum_as_the_capability() {
        let mut t = AskTable::new();
        let member = crate::gang::GangMember::new(Resource::new(1024, 4), 2, 1)
            .vcores_range(VcoresRange::Range { min: 4, max: 10 });
        for r in crate::gang::GangRequest::new("g", vec![member]).requests() {
            t.add(r).unwrap();
        }
        t.add(ContainerRequest::new(res(256), 3)).unwrap();
        let sent = t.changes();
        let ranged: Vec<_> = sent.iter().map(|r| r.vcores_range.as_deref()).collect();
        assert_eq!(ranged, vec![Some("4..10"), None]);
        assert_eq!(sent[0].capability.v_cores, 4);
        assert_eq!(sent[0].num_containers, 2);
    }

    #[test]
    fn add_then_remove_before_sending_sends_nothing() {
        let mut t = AskTable::new();
        let r = ContainerRequest::new(res(256), 0);
        t.add(r.clone()).unwrap();
        t.remove(&r);
        assert!(t.changes().is_empty());
    }

    #[test]
    fn hosts_and_racks_get_entries_with_yarn_relax_rules() {
        let mut t = AskTable::new();
        let r = ContainerRequest::new(res(256), 2)
            .nodes(["n1:1", "n2:1", "n1:1"])
            .racks(["/r1"])
            .relax_locality(false);
        t.add(r.clone()).unwrap();
        let mut got = asks(&t);
        got.sort();
        assert_eq!(
            got,
            vec![
                ("*".into(), 2, 1, false),
                ("/r1".into(), 2, 1, true),
                ("n1:1".into(), 2, 1, true),
                ("n2:1".into(), 2, 1, true),
            ]
        );
        // A relaxed ask on the same `*` key conflicts.
        let e = t
            .add(ContainerRequest::new(res(256), 2).nodes(["n3:1"]))
            .unwrap_err();
        assert!(matches!(e, AskError::RelaxLocalityMismatch { .. }));
        // Relax=false needs a location.
        assert_eq!(
            t.add(ContainerRequest::new(res(1), 3).relax_locality(false)),
            Err(AskError::RelaxWithoutLocation)
        );
        // A refused request changed nothing.
        assert_eq!(t.requests().len(), 1);
        assert_eq!(t.outstanding(), 1);
    }

    #[test]
    fn different_shapes_need_different_keys() {
        let mut t = AskTable::new();
        t.add(ContainerRequest::new(res(256), 0)).unwrap();
        let e = t.add(ContainerRequest::new(res(512), 0)).unwrap_err();
        assert!(matches!(e, AskError::CapabilityMismatch { .. }), "{e}");
        t.add(ContainerRequest::new(res(512), 0).allocation_request_id(7))
            .unwrap();
        assert_eq!(t.outstanding(), 2);
        assert!(matches!(
            t.add(ContainerRequest::new(Resource::zero(), 0)),
            Err(AskError::BadCapability(_))
        ));
        // Once a key is empty its shape may change.
        t.remove(&ContainerRequest::new(res(256), 0));
        t.add(ContainerRequest::new(res(512), 0)).unwrap();
    }

    #[test]
    fn grants_are_matched_without_resending() {
        let mut t = AskTable::new();
        t.add(ContainerRequest::new(res(256), 0)).unwrap();
        t.add(ContainerRequest::new(res(256), 0).nodes(["h:2"]))
            .unwrap();
        let sent = t.changes();
        t.commit(&sent);
        // A grant on h:2 matches the request naming it.
        let m = t.on_allocated(&container(2, 0, 1024, "h:2")).unwrap();
        assert_eq!(m.nodes, vec!["h:2".to_string()]);
        assert!(t.changes().is_empty(), "{:?}", t.changes());
        assert_eq!(t.outstanding(), 1);
        let key = AskKey {
            priority: 0,
            allocation_request_id: 0,
            resource_name: "h:2".into(),
        };
        assert_eq!(t.num_containers(&key), 0);
        // The next grant takes the last one; a third matches nothing.
        assert!(t.on_allocated(&container(3, 0, 1024, "g:2")).is_some());
        assert!(t.on_allocated(&container(4, 0, 1024, "g:2")).is_none());
        assert_eq!(t.outstanding(), 0);
        assert!(t.changes().is_empty());
        // A later ask on the same key is sent as an absolute 1.
        t.add(ContainerRequest::new(res(256), 0)).unwrap();
        assert_eq!(asks(&t), vec![("*".into(), 0, 1, true)]);
    }

    #[test]
    fn grant_before_the_ask_was_acknowledged_keeps_counts_sane() {
        let mut t = AskTable::new();
        t.add(ContainerRequest::new(res(256), 0)).unwrap();
        t.add(ContainerRequest::new(res(256), 0)).unwrap();
        // Grant arrives although the commit of the ask never happened (e.g. a retried call).
        t.on_allocated(&container(2, 0, 256, "h:1")).unwrap();
        assert_eq!(asks(&t), vec![("*".into(), 0, 1, true)]);
    }

    #[test]
    fn resync_resends_everything() {
        let mut t = AskTable::new();
        t.add(ContainerRequest::new(res(256), 0)).unwrap();
        t.add(ContainerRequest::new(res(256), 4).nodes(["h:1"]))
            .unwrap();
        let sent = t.changes();
        t.commit(&sent);
        t.mark_all_unsent();
        assert_eq!(t.changes().len(), 3);
    }
}
