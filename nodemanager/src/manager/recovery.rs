//! NM recovery: taking back what the previous NM left (re-attaching to live containers
//! through their stored [`crate::launcher::ExecHandle`], reporting the ones that died while
//! no NM watched them) and writing the recovery store.
//!
//! The store is written once per batch of commands ([`Manager::persist`] only marks it);
//! this code must not write it from anywhere else, and must not signal a recovered process
//! the executor does not find alive (its pid may belong to someone else by now).

use spindle_common::states::{exit_status, NmContainerState};
use spindle_common::time::now_ms;
use tracing::{error, info};

use super::{span, Manager};
use crate::containers::{Completion, Container, End, Live, Phase, ProcessExit, StopReason};
use crate::launcher::{file_tail, Adoptee, Reattached, StopSignal};
use crate::store::{CompletedRecord, ContainerRecord};

impl Manager {
    /// Takes back what the previous NM left: re-attaches to live containers, reports dead
    /// ones.
    pub fn recover(&mut self, records: Vec<ContainerRecord>) {
        let now = now_ms();
        for r in records {
            let id = r.container_id;
            let _g = span(&id).entered();
            let mut c = Container::new(r.token, r.work_dir, r.log_dirs, r.start_time_ms);
            c.user = r.user;
            if let Some(done) = r.completed {
                c.phase = Phase::Complete(Completion {
                    end: done
                        .state
                        .parse()
                        .ok()
                        .and_then(End::of_state)
                        .unwrap_or(End::Failed),
                    exit_status: Some(done.exit_status).filter(|s| *s != exit_status::INVALID),
                    diagnostics: done.diagnostics,
                    finish_time_ms: done.finish_time_ms,
                    process: r.process,
                    acknowledged: false,
                });
                let _ = self.table.insert(c);
                continue;
            }
            let Some(process) = r.process else {
                c.phase = Phase::Complete(Completion {
                    end: End::LocalizationFailed,
                    exit_status: Some(exit_status::ABORTED),
                    diagnostics: "The NodeManager restarted while the container was being \
                                  localized."
                        .into(),
                    finish_time_ms: now,
                    process: None,
                    acknowledged: false,
                });
                info!("container was localizing when the NM stopped; reporting it aborted");
                let _ = self.table.insert(c);
                continue;
            };
            let stop = r.stop.as_deref().and_then(StopReason::parse);
            c.phase = match stop {
                Some(reason) => Phase::Killing {
                    process: process.clone(),
                    reason,
                },
                None => Phase::Running(Live {
                    process: process.clone(),
                    updating: None,
                }),
            };
            let adoptee = Adoptee {
                id,
                work_dir: &c.work_dir,
                memory_mb: c.resource.memory_mb,
            };
            match self.executor.reattach(&process, &adoptee) {
                Reattached::Running(exit) => {
                    info!(%process, "re-adopted a running container");
                    // Its devices stay its own: no new container may be given them.
                    self.plugins.restore(id, &r.devices);
                    if stop.is_some() {
                        // The stop's SIGKILL deadline died with the old NM.
                        self.signal(&process, StopSignal::Kill);
                    }
                    let stderr = c.log_dirs.first().map(|d| d.join("stderr"));
                    self.spawn_reaper(id, exit, stderr);
                    let _ = self.table.insert(c);
                }
                Reattached::Ended(exit) => {
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
            .filter(|c| c.state() != NmContainerState::DONE)
            .map(|c| ContainerRecord {
                container_id: c.id,
                user: c.user.clone(),
                token: c.token.clone(),
                process: c.process().cloned(),
                start_time_ms: c.start_time_ms,
                work_dir: c.work_dir.clone(),
                log_dirs: c.log_dirs.clone(),
                stop: c.stop_reason().map(|s| s.as_str().to_string()),
                completed: c.is_complete().then(|| CompletedRecord {
                    state: c.state().to_string(),
                    exit_status: c.exit_code(),
                    diagnostics: c.diagnostics().to_string(),
                    finish_time_ms: c.finish_time_ms().unwrap_or(0),
                }),
                devices: self.plugins.assigned_minors(&c.id),
            })
            .collect();
        if let Err(e) = store.save(&records) {
            error!(error = %e, "cannot write the recovery store");
        }
    }
}
