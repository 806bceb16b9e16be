//! The tasks of a job as its AM and their NMs live them: granted, started, reported, ended.

use super::*;

impl Sim<'_> {
    /// The AM got containers: a gang starts when all of it is there, other containers at
    /// once.
    pub(super) fn granted(&mut self, j: usize, allocated: Vec<Allocation>) {
        if allocated.is_empty() {
            return;
        }
        for a in allocated {
            self.cpu_granted(j, &a);
            self.runs[j].granted.push(Granted {
                id: a.id,
                node: a.node_id,
                group: a.allocation_request_id.max(0) as usize,
                gpus: a.resource.get(GPU),
                started: false,
                ends_at: 0,
            });
        }
        if self.runs[j].elastic.is_some() {
            self.elastic_granted(j);
            return;
        }
        let job = &self.jobs[j];
        let run = &self.runs[j];
        if job.is_gang() && (run.granted.len() as u32) < job.containers() {
            return;
        }
        let to_start: Vec<usize> = (0..run.granted.len())
            .filter(|i| !run.granted[*i].started)
            .collect();
        self.start(j, to_start);
    }

    pub(super) fn start(&mut self, j: usize, idx: Vec<usize>) {
        let now = self.now;
        if self.runs[j].start_ms.is_none() || self.runs[j].notice.is_some() {
            self.runs[j].notice = None;
        }
        let first = self.runs[j].start_ms.is_none();
        if first {
            self.runs[j].start_ms = Some(now);
        }
        if first || (self.resumable(j) && self.runs[j].run_from == u64::MAX) {
            // Started, or a preempted gang running again.
            self.waiting(j, false);
            self.running_jobs += 1;
        }
        if self.resumable(j) {
            self.runs[j].run_from = now;
        }
        let saved = if self.resumable(j) {
            self.runs[j].saved_ms
        } else {
            0
        };
        let epoch = self.runs[j].epoch;
        let mut nodes: BTreeSet<NodeId> = BTreeSet::new();
        let mut ends: BTreeMap<u64, Vec<ContainerId>> = BTreeMap::new();
        for i in idx {
            let (id, node, group, gpus) = {
                let g = &mut self.runs[j].granted[i];
                g.started = true;
                (g.id, g.node.clone(), g.group, g.gpus)
            };
            let duration = self.jobs[j]
                .tasks
                .get(group)
                .map_or(0, |t| t.duration_ms.saturating_sub(saved));
            self.runs[j].granted[i].ends_at = now.saturating_add(duration);
            self.held(j, gpus);
            self.waits_for(j, -gpus);
            self.runs[j].gpu_ms_used += gpus.max(0) as u128 * u128::from(duration);
            self.running.entry(node.clone()).or_default().insert(id);
            self.runs[j].nodes.insert(node.clone());
            nodes.insert(node);
            ends.entry(now.saturating_add(duration))
                .or_default()
                .push(id);
        }
        for n in nodes {
            self.heartbeat(&n, &[]);
        }
        if self.runs[j].cpu.is_some() {
            // Its end follows its CPUs, not its trace duration.
            self.cpu_started(j);
            return;
        }
        for (t, cs) in ends {
            self.at(t, Ev::End(j, epoch, cs));
        }
    }

    /// An NM heartbeat: everything the node runs, and what just completed.
    pub(super) fn heartbeat(&mut self, node: &NodeId, completed: &[ContainerId]) {
        let mut reports: Vec<ReportedContainer> = self
            .running
            .get(node)
            .map(|s| {
                s.iter()
                    .map(|c| ReportedContainer {
                        id: *c,
                        state: ContainerState::RUNNING,
                        exit_status: -1000,
                        diagnostics: String::new(),
                        resource: Resource::zero(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        reports.extend(completed.iter().map(|c| ReportedContainer {
            id: *c,
            state: ContainerState::COMPLETE,
            exit_status: 0,
            diagnostics: String::new(),
            resource: Resource::zero(),
        }));
        self.timed(|core, now| core.node_heartbeat(node, true, String::new(), reports, now));
    }

    pub(super) fn end_tasks(
        &mut self,
        j: usize,
        epoch: u32,
        containers: Vec<ContainerId>,
    ) -> Result<(), SlsError> {
        if epoch != self.runs[j].epoch {
            // An end of a run the RM took back: that run never reached it.
            return Ok(());
        }
        // A container taken back (independent jobs) is no longer granted: it never ends.
        let containers: Vec<ContainerId> = containers
            .into_iter()
            .filter(|c| self.runs[j].granted.iter().any(|g| g.id == *c && g.started))
            .collect();
        let mut by_node: BTreeMap<NodeId, Vec<ContainerId>> = BTreeMap::new();
        let mut ended_gpus = 0;
        for c in &containers {
            if let Some(g) = self.runs[j].granted.iter().find(|g| g.id == *c) {
                ended_gpus += g.gpus;
                by_node.entry(g.node.clone()).or_default().push(*c);
                let group = g.group;
                if let Some(n) = self.runs[j].ended_by_group.get_mut(group) {
                    *n += 1;
                }
            }
            self.noticed.remove(c);
        }
        self.held(j, -ended_gpus);
        for (node, cs) in by_node {
            if let Some(s) = self.running.get_mut(&node) {
                for c in &cs {
                    s.remove(c);
                }
            }
            self.heartbeat(&node, &cs);
        }
        self.runs[j].ended += containers.len() as u32;
        self.settle()?;
        if self.runs[j].ended >= self.jobs[j].containers() && self.runs[j].outcome.is_none() {
            self.finish(j, Outcome::Finished, FinalApplicationStatus::SUCCEEDED, "")?;
        }
        Ok(())
    }
}
