//! Watching container processes until they end: the reaper of a child this NM started, and
//! the poller of a process re-adopted after an NM restart (not our child, so polled).
//!
//! Both run as their own tasks and report the end with [`Command::Exited`]; they must not
//! touch the table, and they let go of the process (without signalling it) when the NM stops.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use spindle_common::ids::ContainerId;
use tracing::{debug, Instrument};

use super::{span, until_stopped, Command, Manager, ADOPTED_POLL_INTERVAL};
use crate::containers::{Container, ProcessExit};
use crate::launcher::{file_tail, ContainerExecutor};

impl Manager {
    /// Waits for a child process and reports its end. Lets go when the NM stops.
    pub(super) fn spawn_reaper(
        &self,
        id: ContainerId,
        exit: Pin<Box<dyn Future<Output = ProcessExit> + Send>>,
        stderr: Option<PathBuf>,
    ) {
        let tx = self.tx.clone();
        let mut stopping = self.stopping.clone();
        let tail = self.ctx.stderr_tail_bytes;
        tokio::spawn(
            async move {
                tokio::select! {
                    exit = exit => {
                        let stderr_tail = read_tail(&exit, stderr, tail).await;
                        let _ = tx.send(Command::Exited { id, exit, stderr_tail }).await;
                    }
                    _ = until_stopped(&mut stopping) => {
                        debug!("NM stopping; leaving the container process to itself");
                    }
                }
            }
            .instrument(span(&id)),
        );
    }

    /// Watches a re-adopted process, which is not our child, by polling.
    pub(super) fn spawn_poller(&self, c: &Container, pid: i32) {
        let id = c.id;
        let ticks = c.start_ticks;
        let memory_mb = c.resource.memory_mb;
        let work_dir = c.work_dir.clone();
        let stderr = c.log_dirs.first().map(|d| d.join("stderr"));
        let tx = self.tx.clone();
        let executor = Arc::clone(&self.executor);
        let mut stopping = self.stopping.clone();
        let tail = self.ctx.stderr_tail_bytes;
        tokio::spawn(
            async move {
                loop {
                    tokio::select! {
                        _ = tokio::time::sleep(ADOPTED_POLL_INTERVAL) => {}
                        _ = until_stopped(&mut stopping) => return,
                    }
                    if executor.is_alive(pid, ticks) {
                        continue;
                    }
                    let exit = recorded_exit(executor.as_ref(), &work_dir);
                    let ex = Arc::clone(&executor);
                    let exit =
                        tokio::task::spawn_blocking(move || ex.adopted_ended(&id, memory_mb, exit))
                            .await
                            .unwrap_or_else(|e| {
                                ProcessExit::Unknown(format!("cannot clean up: {e}"))
                            });
                    let stderr_tail = read_tail(&exit, stderr, tail).await;
                    let _ = tx
                        .send(Command::Exited {
                            id,
                            exit,
                            stderr_tail,
                        })
                        .await;
                    return;
                }
            }
            .instrument(span(&id)),
        );
    }
}

pub(super) fn recorded_exit(executor: &dyn ContainerExecutor, work_dir: &Path) -> ProcessExit {
    match executor.recorded_exit_code(work_dir) {
        Some(code) => ProcessExit::Code(code),
        None => ProcessExit::Unknown(
            "The container's process ended while it was not watched by this NodeManager; \
             its exit status is unknown."
                .into(),
        ),
    }
}

pub(super) async fn read_tail(exit: &ProcessExit, stderr: Option<PathBuf>, max: u64) -> String {
    if matches!(exit, ProcessExit::Code(0)) || max == 0 {
        return String::new();
    }
    let Some(path) = stderr else {
        return String::new();
    };
    tokio::task::spawn_blocking(move || file_tail(&path, max))
        .await
        .unwrap_or_default()
}
