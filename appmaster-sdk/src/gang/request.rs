//! What an AM asks for: a gang's members, its elasticity, placement and timeout, checked
//! and turned into the ask table's container requests.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use spindle_common::records::am::{GangPlacement, GangSpec, GangTimeoutPolicy, SizeRule};
use spindle_common::resource::Resource;

use super::GangError;
use crate::amrm::ContainerRequest;
use crate::cpus::VcoresRange;

/// One shape of a gang: `count` containers of `capability` under one allocationRequestId.
#[derive(Debug, Clone, PartialEq)]
pub struct GangMember {
    pub capability: Resource,
    pub count: u32,
    /// Distinct per shape (and from the application's other asks): the RM keys asks by
    /// (priority, allocationRequestId), and grants are matched to shapes by it.
    pub allocation_request_id: i64,
    pub priority: i32,
    pub node_label_expression: Option<String>,
    /// Let the RM's CPU policy size each member's vcores in this range (the capability
    /// carries its minimum); None: the capability's vcores.
    pub vcores_range: Option<VcoresRange>,
}

impl GangMember {
    pub fn new(capability: Resource, count: u32, allocation_request_id: i64) -> Self {
        Self {
            capability,
            count,
            allocation_request_id,
            priority: 0,
            node_label_expression: None,
            vcores_range: None,
        }
    }
    /// Lets the RM size each member's vcores in `range` (see [`VcoresRange`]).
    pub fn vcores_range(mut self, range: VcoresRange) -> Self {
        self.vcores_range = Some(range);
        self
    }
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }
    pub fn node_label_expression(mut self, expr: impl Into<String>) -> Self {
        self.node_label_expression = Some(expr.into());
        self
    }
}

/// A whole gang: its members and how it wants to be placed and to wait.
#[derive(Debug, Clone, PartialEq)]
pub struct GangRequest {
    /// Unique among the application's live gangs; reusable after the gang timed out or was
    /// released.
    pub id: String,
    pub members: Vec<GangMember>,
    pub placement: GangPlacement,
    /// At most this many nodes (0: no limit).
    pub max_nodes: u32,
    /// How long the gang may wait (None: the RM's default).
    pub timeout: Option<Duration>,
    pub policy: GangTimeoutPolicy,
    /// All nodes with GPUs of one model.
    pub same_gpu_model: bool,
    /// Only nodes with this GPU model.
    pub gpu_model: Option<String>,
    /// Set for an elastic gang (see [`GangRequest::elastic`]).
    pub elastic: Option<Elasticity>,
    /// A topology level all members must share a domain of (`rack`, or a node attribute's
    /// name), and whether that is required or only preferred.
    pub domain: Option<(String, bool)>,
    /// The container image the members run in: nodes holding it are preferred.
    pub image: Option<String>,
    /// The job's throughput per GPU (any unit) by CPUs per GPU: the RM's CPU policy's
    /// model for members with a [`VcoresRange`] (reports with vcores refine it).
    pub cpu_throughput: BTreeMap<u32, f64>,
}

/// How an elastic gang may be sized: the RM grants it at least `min` members whole, then
/// grows it (resize offers) and shrinks it (resize demands) between `min` and `max`, in the
/// sizes `rule` allows.
#[derive(Debug, Clone, PartialEq)]
pub struct Elasticity {
    pub min: u32,
    pub max: u32,
    pub rule: SizeRule,
    /// With [`SizeRule::MULTIPLE`]: sizes are multiples of this.
    pub multiple: u32,
    /// The job's throughput (any unit) by member count: the RM's speed model until the AM
    /// reports measured values ([`AmRmClient::report_throughput`]).
    pub throughput: BTreeMap<u32, f64>,
}

impl Elasticity {
    /// Whether `n` members is a size the rule allows within `[min, max]`.
    pub fn legal(&self, n: u32) -> bool {
        (self.min..=self.max).contains(&n)
            && match self.rule {
                SizeRule::POWER_OF_TWO => n.is_power_of_two(),
                SizeRule::MULTIPLE => self.multiple > 0 && n.is_multiple_of(self.multiple),
                SizeRule::ANY => n > 0,
            }
    }
}

impl GangRequest {
    /// An elastic gang of one shape: `member.count` is set to `max` (the one ask's
    /// `numContainers`); the RM grants at least `min`. PACK, the RM's default timeout, SOFT.
    pub fn elastic(
        id: impl Into<String>,
        member: GangMember,
        min: u32,
        max: u32,
        rule: SizeRule,
    ) -> Self {
        let member = GangMember {
            count: max,
            ..member
        };
        let mut g = Self::new(id, vec![member]);
        g.elastic = Some(Elasticity {
            min,
            max,
            rule,
            multiple: 0,
            throughput: BTreeMap::new(),
        });
        g
    }

    /// With [`SizeRule::MULTIPLE`]: sizes are multiples of `k`.
    pub fn size_multiple(mut self, k: u32) -> Self {
        if let Some(e) = self.elastic.as_mut() {
            e.multiple = k;
        }
        self
    }

    /// An elastic gang's throughput by member count (any unit, e.g. samples/s).
    pub fn throughput(mut self, table: BTreeMap<u32, f64>) -> Self {
        if let Some(e) = self.elastic.as_mut() {
            e.throughput = table;
        }
        self
    }

    /// PACK, no node limit, the RM's default timeout, SOFT.
    pub fn new(id: impl Into<String>, members: Vec<GangMember>) -> Self {
        Self {
            id: id.into(),
            members,
            placement: GangPlacement::PACK,
            max_nodes: 0,
            timeout: None,
            policy: GangTimeoutPolicy::SOFT,
            same_gpu_model: false,
            gpu_model: None,
            elastic: None,
            domain: None,
            image: None,
            cpu_throughput: BTreeMap::new(),
        }
    }

    /// The job's throughput per GPU by CPUs per GPU, `{1: 100, 3: 180}` (any unit).
    pub fn cpu_throughput(mut self, table: BTreeMap<u32, f64>) -> Self {
        self.cpu_throughput = table;
        self
    }

    /// Every member in one domain of `level` (`rack`, or a node attribute such as
    /// `nm.yarn.io/nvlink-clique`), or none granted at all.
    pub fn required_domain(mut self, level: impl Into<String>) -> Self {
        self.domain = Some((level.into(), true));
        self
    }

    /// One domain of `level` if any fits, else anywhere.
    pub fn preferred_domain(mut self, level: impl Into<String>) -> Self {
        self.domain = Some((level.into(), false));
        self
    }

    /// All of the gang's nodes have GPUs of one model (whichever fits best).
    pub fn same_gpu_model(mut self) -> Self {
        self.same_gpu_model = true;
        self
    }

    /// Only nodes whose GPUs are of this model (`nvidia-smi`'s product name).
    pub fn gpu_model(mut self, model: impl Into<String>) -> Self {
        self.gpu_model = Some(model.into());
        self
    }
    /// The image the members run in (set it in their launch contexts too): the RM prefers
    /// nodes that already hold it when the gang fits there.
    pub fn image(mut self, image: impl Into<String>) -> Self {
        self.image = Some(image.into());
        self
    }
    pub fn placement(mut self, placement: GangPlacement) -> Self {
        self.placement = placement;
        self
    }
    pub fn max_nodes(mut self, max_nodes: u32) -> Self {
        self.max_nodes = max_nodes;
        self
    }
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
    pub fn policy(mut self, policy: GangTimeoutPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Containers in all.
    pub fn size(&self) -> u32 {
        self.members.iter().map(|m| m.count).sum()
    }

    /// The wire form every member's ask carries.
    pub fn spec(&self) -> GangSpec {
        GangSpec {
            id: self.id.clone(),
            placement: self.placement,
            max_nodes: self.max_nodes,
            timeout_ms: self
                .timeout
                .map_or(0, |t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
            timeout_policy: self.policy,
            same_gpu_model: self.same_gpu_model,
            gpu_model: self.gpu_model.clone(),
            min_containers: self.elastic.as_ref().map_or(0, |e| e.min),
            max_containers: self.elastic.as_ref().map_or(0, |e| e.max),
            size_rule: self.elastic.as_ref().map(|e| e.rule),
            size_multiple: self.elastic.as_ref().map_or(0, |e| e.multiple),
            throughput: self
                .elastic
                .as_ref()
                .map(|e| {
                    e.throughput
                        .iter()
                        .map(|(n, v)| (n.to_string(), *v))
                        .collect()
                })
                .unwrap_or_default(),
            cpu_throughput: self
                .cpu_throughput
                .iter()
                .map(|(n, v)| (n.to_string(), *v))
                .collect(),
            required_domain: self.domain.as_ref().filter(|d| d.1).map(|d| d.0.clone()),
            preferred_domain: self.domain.as_ref().filter(|d| !d.1).map(|d| d.0.clone()),
        }
    }

    pub(super) fn validate(&self) -> Result<(), GangError> {
        let bad = |m: String| Err(GangError::Invalid(m));
        if self.id.trim().is_empty() {
            return bad("the gang id is empty".into());
        }
        if self.members.is_empty() {
            return bad(format!("gang '{}' has no members", self.id));
        }
        let mut keys = BTreeSet::new();
        for m in &self.members {
            if m.count == 0 {
                return bad(format!(
                    "gang '{}': member shape {} (allocationRequestId {}) has count 0",
                    self.id, m.capability, m.allocation_request_id
                ));
            }
            if !keys.insert((m.priority, m.allocation_request_id)) {
                return bad(format!(
                    "gang '{}': two shapes share priority {} and allocationRequestId {}; give \
                     each shape its own allocationRequestId",
                    self.id, m.priority, m.allocation_request_id
                ));
            }
        }
        if i32::try_from(self.size()).is_err() {
            return bad(format!("gang '{}' asks for too many containers", self.id));
        }
        if let Some(e) = &self.elastic {
            if self.members.len() != 1 {
                return bad(format!(
                    "elastic gang '{}' must have exactly one member shape, not {}",
                    self.id,
                    self.members.len()
                ));
            }
            if e.min == 0 || e.min > e.max {
                return bad(format!(
                    "elastic gang '{}': the minimum ({}) must be from 1 to the maximum ({})",
                    self.id, e.min, e.max
                ));
            }
            if self.size() != e.max {
                return bad(format!(
                    "elastic gang '{}': its shape asks for {} containers, not its maximum {}",
                    self.id,
                    self.size(),
                    e.max
                ));
            }
            if e.rule == SizeRule::MULTIPLE && e.multiple == 0 {
                return bad(format!(
                    "elastic gang '{}': size rule MULTIPLE needs a size multiple",
                    self.id
                ));
            }
            if !(e.min..=e.max).any(|n| e.legal(n)) {
                return bad(format!(
                    "elastic gang '{}': no size from {} to {} is allowed by {:?}",
                    self.id, e.min, e.max, e.rule
                ));
            }
            if let Some((n, v)) = e
                .throughput
                .iter()
                .find(|(n, v)| **n == 0 || !v.is_finite() || **v < 0.0)
            {
                return bad(format!(
                    "elastic gang '{}': throughput {v} at size {n} is not a size and a \
                     non-negative number",
                    self.id
                ));
            }
        }
        Ok(())
    }

    /// The table requests: one per container, each carrying the gang.
    pub(crate) fn requests(&self) -> Vec<ContainerRequest> {
        let spec = self.spec();
        let mut out = Vec::with_capacity(self.size() as usize);
        for m in &self.members {
            for _ in 0..m.count {
                let mut r = ContainerRequest::new(m.capability.clone(), m.priority)
                    .allocation_request_id(m.allocation_request_id)
                    .gang(spec.clone());
                r.node_label_expression = m.node_label_expression.clone();
                r.image = self.image.clone();
                r.vcores_range = m.vcores_range;
                out.push(r);
            }
        }
        out
    }
}
