//! Idle GPUs: what the NMs sample of each container's GPUs, the per-application figures
//! the app view shows (current mean utilization, GPU-time held idle), and the queue policy
//! (`<queue>.gpu-idle-timeout-ms` with `gpu-idle-action` `report`, `notify` or `release`)
//! that the tick applies to containers whose GPUs stayed idle past the timeout.
//!
//! A GPU is idle when its sampled utilization is below its queue's
//! `gpu-idle-threshold-percent`; a container is idle when every GPU it holds is. Its idle
//! spell starts at the first idle sample and ends at the first busy one (which also re-arms
//! the policy for the next spell); its length is what the samples cover, so a container whose
//! samples stop is not judged on stale ones. GPU-time held idle is integrated between samples: from one
//! sample to the next, each GPU that was idle in the earlier one counts. Pure: every input
//! carries the time, and what the edge must log comes back as [`IdleGpuEvent`]s.

use super::*;
use queue_conf::{GpuIdleAction, GpuIdlePolicy};

/// One GPU's sample, validated at the edge (utilization in 0..=100).
#[derive(Debug, Clone, PartialEq)]
pub struct GpuSample {
    pub index: u32,
    pub minor: u32,
    /// Percent.
    pub utilization: f64,
    pub memory_used_mib: Option<u64>,
    pub temperature_c: Option<f64>,
}

/// What an NM's heartbeat says of one container's GPUs.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerGpuUse {
    pub container: ContainerId,
    pub gpus: Vec<GpuSample>,
}

/// What the core keeps of one container's GPUs.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerIdle {
    /// The last sample.
    pub gpus: Vec<GpuSample>,
    /// When it arrived.
    pub sampled_at: u64,
    /// The threshold the last sample was judged by (its queue's).
    pub threshold: f64,
    /// Since when every GPU has been idle; None while one is busy.
    pub idle_since: Option<u64>,
    /// GPU-milliseconds held idle so far.
    pub idle_gpu_ms: u64,
    /// The policy's action was taken in this idle spell.
    pub acted: bool,
}

impl ContainerIdle {
    /// The mean utilization of its GPUs in the last sample.
    pub fn mean(&self) -> f64 {
        mean(&self.gpus)
    }

    fn idle_gpus(&self) -> u64 {
        self.gpus
            .iter()
            .filter(|g| g.utilization < self.threshold)
            .count() as u64
    }
}

fn mean(gpus: &[GpuSample]) -> f64 {
    if gpus.is_empty() {
        return 0.0;
    }
    gpus.iter().map(|g| g.utilization).sum::<f64>() / gpus.len() as f64
}

/// An application's GPU figures (the app view's `gpuUtilization` and `idleGpuSeconds`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AppGpuUse {
    /// Mean utilization over the GPUs of its live containers; None when none is sampled.
    pub utilization: Option<f64>,
    /// GPU-milliseconds held idle, ended containers included.
    pub idle_gpu_ms: u64,
}

/// A container reported to its AM under the `notify` action.
#[derive(Debug, Clone, PartialEq)]
pub struct IdleGpuNotice {
    pub container: ContainerId,
    pub idle_since: u64,
    pub gpus: u32,
    pub utilization: f64,
}

/// What the policy did, for the RM's log.
#[derive(Debug, Clone, PartialEq)]
pub struct IdleGpuEvent {
    pub container: ContainerId,
    pub queue: String,
    pub action: GpuIdleAction,
    pub gpus: u32,
    pub idle_ms: u64,
    pub timeout_ms: u64,
}

/// Why a sample was not taken (the edge logs it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IgnoredGpuUse {
    /// No such container, or it is no longer running.
    NotRunning(ContainerId),
    /// The container runs on another node than the one reporting it.
    OtherNode(ContainerId),
}

/// The idle-GPU bookkeeping of the core.
#[derive(Debug, Clone, Default)]
pub(super) struct IdleState {
    containers: BTreeMap<ContainerId, ContainerIdle>,
    /// GPU-milliseconds held idle by containers that ended, per application.
    ended: BTreeMap<ApplicationId, u64>,
    /// `notify` notices not yet sent, per application.
    notices: BTreeMap<ApplicationId, Vec<IdleGpuNotice>>,
    /// Events not yet logged.
    events: Vec<IdleGpuEvent>,
    /// The policy's diagnostic of containers it released, until their NM confirms.
    released: BTreeMap<ContainerId, String>,
}

impl RmCore {
    /// The queue policy of the application a container belongs to.
    fn gpu_idle_policy(&self, app: &ApplicationId) -> Option<(String, GpuIdlePolicy)> {
        let a = self.apps.get(app)?;
        let tree = self.sched.tree();
        let q = tree.get(tree.leaf(&a.queue)?)?;
        Some((q.spec.path.to_string(), q.spec.gpu_idle))
    }

    /// An NM's samples of its containers' GPUs (`containersGpuUtilization` in a heartbeat).
    /// Returns what was not taken, for the edge to log.
    pub fn record_gpu_use(
        &mut self,
        node: &NodeId,
        uses: Vec<ContainerGpuUse>,
        now: u64,
    ) -> Vec<IgnoredGpuUse> {
        let mut ignored = Vec::new();
        for u in uses {
            match self.containers.get(&u.container) {
                Some(c) if c.is_live() && c.node != *node => {
                    ignored.push(IgnoredGpuUse::OtherNode(u.container));
                    continue;
                }
                Some(c) if c.is_live() => {}
                _ => {
                    ignored.push(IgnoredGpuUse::NotRunning(u.container));
                    continue;
                }
            }
            if u.gpus.is_empty() {
                continue;
            }
            let threshold = self
                .gpu_idle_policy(&u.container.application_id())
                .map_or(GpuIdlePolicy::default().threshold_percent, |(_, p)| {
                    p.threshold_percent
                });
            let all_idle = u.gpus.iter().all(|g| g.utilization < threshold);
            let rec = self
                .idle
                .containers
                .entry(u.container)
                .or_insert_with(|| ContainerIdle {
                    gpus: Vec::new(),
                    sampled_at: now,
                    threshold,
                    idle_since: None,
                    idle_gpu_ms: 0,
                    acted: false,
                });
            let since_last = now.saturating_sub(rec.sampled_at);
            rec.idle_gpu_ms += since_last * rec.idle_gpus();
            rec.gpus = u.gpus;
            rec.sampled_at = now;
            rec.threshold = threshold;
            if all_idle {
                rec.idle_since.get_or_insert(now);
            } else {
                rec.idle_since = None;
                rec.acted = false;
            }
        }
        self.changed();
        ignored
    }

    /// The last sample of a container's GPUs.
    pub fn container_gpu_use(&self, id: &ContainerId) -> Option<&ContainerIdle> {
        self.idle.containers.get(id)
    }

    /// Every application's GPU figures (those with a sampled GPU).
    pub fn gpu_use_by_app(&self) -> BTreeMap<ApplicationId, AppGpuUse> {
        let mut out: BTreeMap<ApplicationId, (f64, usize, u64)> = BTreeMap::new();
        for (app, ms) in &self.idle.ended {
            out.entry(*app).or_default().2 += ms;
        }
        for (cid, rec) in &self.idle.containers {
            let e = out.entry(cid.application_id()).or_default();
            e.2 += rec.idle_gpu_ms;
            if self.containers.get(cid).is_some_and(RmContainer::is_live) {
                e.0 += rec.gpus.iter().map(|g| g.utilization).sum::<f64>();
                e.1 += rec.gpus.len();
            }
        }
        out.into_iter()
            .map(|(app, (sum, n, idle))| {
                (
                    app,
                    AppGpuUse {
                        utilization: (n > 0).then(|| sum / n as f64),
                        idle_gpu_ms: idle,
                    },
                )
            })
            .collect()
    }

    /// The diagnostic of a container the NM reports ended: the policy's reason first when
    /// the policy released it (the NM only knows the RM asked it to stop).
    pub(super) fn idle_release_diagnostics(&mut self, id: &ContainerId, nm: String) -> String {
        match self.idle.released.remove(id) {
            Some(ours) if nm.is_empty() || nm == ours => ours,
            Some(ours) => format!("{ours}; {nm}"),
            None => nm,
        }
    }

    /// The `notify` notices for an application's AM, taken once.
    pub(super) fn take_idle_notices(&mut self, app: &ApplicationId) -> Vec<IdleGpuNotice> {
        self.idle.notices.remove(app).unwrap_or_default()
    }

    /// What the policy did since the last call, for the RM's log.
    pub fn take_idle_events(&mut self) -> Vec<IdleGpuEvent> {
        std::mem::take(&mut self.idle.events)
    }

    /// The tick's part: forget ended containers (keeping their idle time), then apply each
    /// queue's policy to containers idle past its timeout.
    pub(super) fn idle_tick(&mut self, now: u64) {
        if self.idle.containers.is_empty()
            && self.idle.ended.is_empty()
            && self.idle.released.is_empty()
        {
            return;
        }
        let gone: Vec<ContainerId> = self
            .idle
            .containers
            .keys()
            .filter(|c| !self.containers.get(c).is_some_and(RmContainer::is_live))
            .copied()
            .collect();
        for c in gone {
            if let Some(rec) = self.idle.containers.remove(&c) {
                *self.idle.ended.entry(c.application_id()).or_default() += rec.idle_gpu_ms;
            }
        }
        let containers = &self.containers;
        self.idle
            .released
            .retain(|c, _| containers.get(c).is_some_and(RmContainer::is_live));
        let apps = &self.apps;
        self.idle.ended.retain(|a, _| apps.contains_key(a));
        self.idle.notices.retain(|a, _| apps.contains_key(a));
        // The idle time is what the samples cover (first idle sample to the last one), not
        // the time since: when samples stop coming (an NM that cannot sample reports none),
        // nothing is decided on stale readings.
        let due: Vec<(ContainerId, u64, u64)> = self
            .idle
            .containers
            .iter()
            .filter(|(_, r)| !r.acted)
            .filter_map(|(c, r)| r.idle_since.map(|s| (*c, s, r.sampled_at)))
            .collect();
        let mut reported: BTreeSet<ApplicationId> = BTreeSet::new();
        for (cid, since, last) in due {
            let app = cid.application_id();
            let Some((queue, policy)) = self.gpu_idle_policy(&app) else {
                continue;
            };
            let idle_ms = last.saturating_sub(since);
            if policy.timeout_ms == 0 || idle_ms < policy.timeout_ms {
                continue;
            }
            let Some(rec) = self.idle.containers.get_mut(&cid) else {
                continue;
            };
            rec.acted = true;
            let gpus = rec.gpus.len() as u32;
            let utilization = rec.mean();
            let is_am = self.containers.get(&cid).is_some_and(|c| c.is_am);
            // An AM container is never stopped for idle GPUs (that would end the attempt):
            // it is reported instead.
            let action = match policy.action {
                GpuIdleAction::Release if is_am => GpuIdleAction::Report,
                a => a,
            };
            self.idle.events.push(IdleGpuEvent {
                container: cid,
                queue: queue.clone(),
                action,
                gpus,
                idle_ms,
                timeout_ms: policy.timeout_ms,
            });
            match action {
                GpuIdleAction::Report => {
                    reported.insert(app);
                }
                GpuIdleAction::Notify => {
                    self.idle
                        .notices
                        .entry(app)
                        .or_default()
                        .push(IdleGpuNotice {
                            container: cid,
                            idle_since: since,
                            gpus,
                            utilization,
                        });
                }
                GpuIdleAction::Release => {
                    let diag = format!(
                        "Container {cid} was released by the ResourceManager: its {gpus} GPU(s) \
                         were idle (utilization below {}%) for {idle_ms} ms, longer than queue \
                         {queue}'s gpu-idle-timeout-ms of {} ms (gpu-idle-action release)",
                        policy.threshold_percent, policy.timeout_ms
                    );
                    self.idle.released.insert(cid, diag.clone());
                    self.kill_container(&cid, exit_status::KILLED_BY_RESOURCEMANAGER, diag, now);
                }
            }
            self.changed();
        }
        for app in reported {
            self.report_idle(&app);
        }
    }

    /// Sets the application's diagnostics to the containers that hold idle GPUs past the
    /// timeout (`report`).
    fn report_idle(&mut self, app: &ApplicationId) {
        let Some((queue, policy)) = self.gpu_idle_policy(app) else {
            return;
        };
        let lines: Vec<String> = self
            .idle
            .containers
            .iter()
            .filter(|(c, r)| c.application_id() == *app && r.acted)
            .filter_map(|(c, r)| {
                r.idle_since.map(|s| {
                    format!(
                        "{c} ({} GPU(s) idle for {} ms)",
                        r.gpus.len(),
                        r.sampled_at.saturating_sub(s)
                    )
                })
            })
            .collect();
        if lines.is_empty() {
            return;
        }
        let text = format!(
            "Containers holding idle GPUs (utilization below {}%) longer than queue {queue}'s \
             gpu-idle-timeout-ms of {} ms: {}",
            policy.threshold_percent,
            policy.timeout_ms,
            lines.join(", ")
        );
        if let Some(a) = self.apps.get_mut(app) {
            if !a.state.is_final()
                && matches!(
                    a.diagnostics_kind,
                    DiagnosticsKind::Lasting | DiagnosticsKind::IdleGpu
                )
                && (a.diagnostics.is_empty() || a.diagnostics_kind == DiagnosticsKind::IdleGpu)
            {
                a.set_diagnostics(DiagnosticsKind::IdleGpu, text);
            }
        }
    }
}
