//! NM recovery: taking back what the previous NM left (re-adopting live process groups,
//! reporting the ones that died while no NM watched them) and writing the recovery store.
//!
//! The store is written once per batch of commands ([`Manager::persist`] only marks it);
//! this code must not write it from anywhere else, and must not signal a recovered pid whose
//! start time does not match the record (it may belong to someone else by now).

use spindle_common::states::{exit_status, NmContainerState};
use spindle_common::time::now_ms;
use tracing::{error, info};

use super::reaper::recorded_exit;
use super::{span, Manager};
use crate::containers::{Container, ProcessExit, StopReason};
use crate::launcher::{file_tail, StopSignal};
use crate::store::{CompletedRecord, ContainerRecord};

impl Manager {
    /// Takes back what the previous NM left: adopts live process groups, reports dead ones.
    pub fn recover(&mut self, records: Vec<ContainerRecord>) {
        let now = now_ms();
        for r in records {
            let id = r.container_id;
            let _g = span(&id).entered();
            let mut c = Container::new(r.token, r.work_dir, r.log_dirs, r.start_time_ms);
            c.user = r.user;
            c.pid = r.pid;
            c.start_ticks = r.start_ticks;
            c.stop = r.stop.as_deref().and_then(StopReason::parse);
            if let Some(done) = r.completed {
                c.state = done
                    .state
                    .parse()
                    .unwrap_or(NmContainerState::EXITED_WITH_FAILURE);
                c.exit_status = done.exit_status;
                c.diagnostics = done.diagnostics;
                c.finish_time_ms = Some(done.finish_time_ms);
                let _ = self.table.insert(c);
                continue;
            }
            let Some(pid) = r.pid else {
                c.state = NmContainerState::LOCALIZATION_FAILED;
                c.exit_status = exit_status::ABORTED;
                c.diagnostics =
                    "The NodeManager restarted while the container was being localized.".into();
                c.finish_time_ms = Some(now);
                info!("container was localizing when the NM stopped; reporting it aborted");
                let _ = self.table.insert(c);
                continue;
            };
            c.state = if c.stop.is_some() {
                NmContainerState::KILLING
            } else {
                NmContainerState::RUNNING
            };
            if self.executor.is_alive(pid, c.start_ticks) {
                info!(pid, "re-adopted a running container");
                // Its devices stay its own: no new container may be given them.
                self.plugins.restore(id, &r.devices);
                if c.stop.is_some() {
                    // The stop's SIGKILL deadline died with the old NM.
                    self.signal(pid, StopSignal::Kill);
                }
                self.spawn_poller(&c, pid);
                let _ = self.table.insert(c);
            } else {
                let exit = recorded_exit(self.executor.as_ref(), &c.work_dir);
                let exit = self.executor.adopted_ended(&id, c.resource.memory_mb, exit);
                let stderr = c.log_dirs.first().map(|d| d.join("stderr"));
                let tail = match &exit {
                    ProcessExit::Code(0) => String::new(),
                    _ => stderr
                        .map(|p| file_tail(&p, self.ctx.stderr_tail_bytes))
                        .unwrap_or_default(),
                };
                let _ = self.table.insert(c);
                if let Some(o) = self.table.exited(&id, &exit, &tail, now) {
                    info!(?exit, "container ended while the NM was down");
                    self.completed(id, o, false);
                }
            }
        }
        self.persist();
    }

    /// Marks the recovery store for writing at the end of the current batch of commands.
    pub(super) fn persist(&self) {
        self.dirty.set(true);
    }

    pub(super) fn write_store(&self) {
        let Some(store) = &self.store else {
            return;
        };
        let records: Vec<ContainerRecord> = self
            .table
            .iter()
            .filter(|c| c.state != NmContainerState::DONE)
            .map(|c| ContainerRecord {
                container_id: c.id,
                user: c.user.clone(),
                token: c.token.clone(),
                pid: c.pid,
                start_ticks: c.start_ticks,
                start_time_ms: c.start_time_ms,
                work_dir: c.work_dir.clone(),
                log_dirs: c.log_dirs.clone(),
                stop: c.stop.map(|s| s.as_str().to_string()),
                completed: c.is_complete().then(|| CompletedRecord {
                    state: c.state.to_string(),
                    exit_status: c.exit_status,
                    diagnostics: c.diagnostics.clone(),
                    finish_time_ms: c.finish_time_ms.unwrap_or(0),
                }),
                devices: self.plugins.assigned_minors(&c.id),
            })
            .collect();
        if let Err(e) = store.save(&records) {
            error!(error = %e, "cannot write the recovery store");
        }
    }
}
