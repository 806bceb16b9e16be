//! How an attempt starts its gang's containers: a held start of all at once
//! ([`crate::nm_client::NmClient::start_gang`]), or a re-initialization of running ones
//! with their worker commands (after the checkpoint directory check, after a resize); and
//! the rendezvous port.

use std::collections::BTreeMap;
use std::time::Duration;

use spindle_common::ids::ContainerId;
use spindle_common::records::am::Container;
use spindle_common::records::node::{ContainerLaunchContext, LaunchHold};

use super::{Attempt, FREE_PORT_TRIES, HOLD_TIMEOUT};
use crate::train::RankInfo;

impl Attempt<'_> {
    /// Re-initializes the containers of `ranks` with their worker commands at size `n`, all
    /// at once; each one's outcome.
    pub(super) async fn reinit_workers<'r>(
        &self,
        ranks: impl Iterator<Item = &'r RankInfo>,
        n: u32,
        master_addr: &str,
        port: u16,
    ) -> Vec<(&'r RankInfo, Result<(), crate::ClientError>)> {
        futures::future::join_all(ranks.map(|r| {
            let ctx = self.worker_ctx(r, n, master_addr, port);
            async move {
                let c = &r.container;
                let res = self
                    .nm
                    .reinitialize_container(&c.node_http_address, &c.id, ctx, None)
                    .await;
                (r, res.map(|_| ()))
            }
        }))
        .await
    }

    pub(super) async fn free_port(&self, master: &Container) -> Result<u16, crate::ClientError> {
        let mut tries = 0;
        loop {
            tries += 1;
            match self.nm.free_port(&master.node_http_address).await {
                Ok(p) => return Ok(p),
                Err(e) if tries >= FREE_PORT_TRIES => return Err(e),
                Err(e) => {
                    tracing::warn!(node = %master.node_id, error = %e, "free port; retrying");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    /// Starts every worker together ([`crate::nm_client::NmClient::start_gang`]): every
    /// node sets its workers up and holds them, then all are released at once. Returns the
    /// first failure, if any.
    pub(super) async fn start_all(
        &self,
        ranks: &[RankInfo],
        n: u32,
        master_addr: &str,
        port: u16,
        out: &mut (dyn FnMut(&str) + Send),
    ) -> Option<String> {
        let ctxs = ranks
            .iter()
            .map(|r| self.worker_ctx(r, n, master_addr, port))
            .collect();
        self.launch(ranks, ctxs, "started", out).await
    }

    /// Starts the containers of `ranks` together, each with its context of `ctxs` (in the
    /// same order), held then released at once; each success told as `worker rank R <done>
    /// in container ...`. Returns the first failure, if any.
    pub(super) async fn launch(
        &self,
        ranks: &[RankInfo],
        ctxs: Vec<ContainerLaunchContext>,
        done: &str,
        out: &mut (dyn FnMut(&str) + Send),
    ) -> Option<String> {
        let n = ranks.len();
        let members: Vec<(Container, ContainerLaunchContext)> = ranks
            .iter()
            .map(|r| r.container.clone())
            .zip(ctxs)
            .collect();
        let hold = LaunchHold {
            timeout_ms: Some(HOLD_TIMEOUT.as_millis() as u64),
        };
        let launch = self.nm.start_gang(members, hold).await;
        let outcome: BTreeMap<ContainerId, Result<(), crate::ClientError>> =
            launch.outcome.into_iter().collect();
        let mut failure = None;
        for r in ranks {
            let c = &r.container;
            match outcome.get(&c.id) {
                Some(Ok(())) => out(&format!(
                    "worker rank {} {done} in container {} on node {} (local rank {} of {})",
                    r.rank, c.id, c.node_id, r.local_rank, r.local_world_size
                )),
                Some(Err(e)) => {
                    let l = format!(
                        "worker rank {} could not be started in container {} on node {}: {e}",
                        r.rank, c.id, c.node_id
                    );
                    out(&l);
                    failure.get_or_insert(l);
                }
                None => {
                    let l = format!(
                        "worker rank {} got no start answer from {}",
                        r.rank, c.node_id
                    );
                    out(&l);
                    failure.get_or_insert(l);
                }
            }
        }
        if failure.is_none() {
            out(&format!(
                "all {n} workers set up and held in {:.1} ms; all start calls answered in {:.1} ms",
                launch.held_in.as_secs_f64() * 1e3,
                launch.released_in.unwrap_or_default().as_secs_f64() * 1e3
            ));
        }
        failure
    }
}
