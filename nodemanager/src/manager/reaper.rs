//! Watching container processes until they end: the exit future of a child this NM started,
//! or of a process re-attached after an NM restart (the executor's, which polls what is not
//! its child).
//!
//! The watch runs as its own task and reports the end with [`Command::Exited`]; it must not
//! touch the table, and it lets go of the process (without signalling it) when the NM stops.

use std::path::PathBuf;

use spindle_common::ids::ContainerId;
use tracing::{debug, Instrument};

use super::{span, until_stopped, Command, Manager};
use crate::containers::ProcessExit;
use crate::launcher::{file_tail, ExitFuture};

impl Manager {
    /// Waits for a container's process to end and reports it. Lets go when the NM stops.
    pub(super) fn spawn_reaper(&self, id: ContainerId, exit: ExitFuture, stderr: Option<PathBuf>) {
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
}

async fn read_tail(exit: &ProcessExit, stderr: Option<PathBuf>, max: u64) -> String {
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
