//! Resizing an elastic gang in place (see the module doc of [`super`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use spindle_common::ids::ContainerId;
use spindle_common::records::am::Container;
use spindle_common::records::node::ContainerLaunchContext as Ctx;
use spindle_common::time::now_ms;

use super::watch::{decline, CheckpointWatch};
use super::{Attempt, Resize};
use crate::amrm::AmRmClient;
use crate::train::{assign_ranks, checkpoint, RankInfo, GANG_ID};

/// How long a worker has from its SIGTERM to checkpoint and exit when the gang grows (a
/// shrink gives it until the RM's deadline, less [`RESIZE_MARGIN`]).
const RESIZE_GRACE: Duration = Duration::from_secs(30);
/// Kept between a shrink's stop of the workers and the RM's deadline, for the release.
const RESIZE_MARGIN: Duration = Duration::from_millis(1500);
/// What a container runs between its worker's exit and its restart at the new size.
const PARKED: &str = "exec sleep 2147483647";

impl Attempt<'_> {
    /// Restarts the whole gang at its new size (see the module doc): every running worker
    /// checkpoints and exits (its container re-initialized with a placeholder), demanded
    /// containers go back, then every worker starts with its new rank. The new ranks, or why
    /// the gang cannot go on (a failure: the attempt restarts the gang).
    pub(super) async fn resize(
        &self,
        amrm: &mut AmRmClient,
        ranks: &[RankInfo],
        resize: Resize,
        checkpoints: &mut CheckpointWatch<'_>,
        out: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Vec<RankInfo>, String> {
        let started = Instant::now();
        let plan = Plan::new(ranks, &resize);
        let (from, to) = (plan.from, plan.to);
        if to == from {
            out(&format!(
                "gang {GANG_ID}: the resize names none of the running workers; nothing to do"
            ));
            return Ok(ranks.to_vec());
        }
        if to == 0 {
            return Err(format!(
                "gang {GANG_ID} was asked to shrink to no worker at all"
            ));
        }
        let grace = self.announce(amrm, &plan, &resize, out);
        // 1. Every running worker checkpoints and exits; its container stays, parked.
        if let Some(f) = self.park_all(ranks, grace, out).await {
            if let Resize::Grow(o) = &resize {
                decline(amrm, o);
            }
            return Err(f);
        }
        out(&format!(
            "all {from} workers checkpointed and exited in {} ms",
            started.elapsed().as_millis()
        ));
        checkpoints.report(amrm, true);
        if let Some(dir) = &self.cfg.checkpoint_dir {
            // A throughput measured at the old size is not this size's.
            let _ = checkpoint::remove_file(Path::new(dir), checkpoint::THROUGHPUT_FILE);
        }
        // 2. The demanded containers go back (their workers have exited).
        if !plan.leaving.is_empty() {
            let ids: Vec<ContainerId> = plan.leaving.iter().copied().collect();
            amrm.release_members(GANG_ID, &ids);
        }
        // 3. Every worker starts again at the new size.
        let new_ranks = self.restart_all(&plan, out).await?;
        out(&format!(
            "gang {GANG_ID} runs at {to} workers (resize {} done in {} ms)",
            self.resizes.get(),
            started.elapsed().as_millis()
        ));
        Ok(new_ranks)
    }

    /// Writes the resize marker and tells of the resize (a shrink is acknowledged to the
    /// RM); the grace the running workers get to checkpoint and exit.
    fn announce(
        &self,
        amrm: &mut AmRmClient,
        plan: &Plan,
        resize: &Resize,
        out: &mut (dyn FnMut(&str) + Send),
    ) -> Duration {
        let (from, to) = (plan.from, plan.to);
        let left = plan.deadline_ms.saturating_sub(now_ms());
        let grace = match resize {
            Resize::Grow(_) => RESIZE_GRACE,
            Resize::Shrink(_) => Duration::from_millis(left)
                .saturating_sub(RESIZE_MARGIN)
                .clamp(Duration::from_millis(100), RESIZE_GRACE),
        };
        if let Some(dir) = &self.cfg.checkpoint_dir {
            if let Err(e) =
                checkpoint::write_resize_marker(Path::new(dir), from, to, plan.deadline_ms)
            {
                out(&format!(
                    "cannot write the resize marker in {dir}: {e}; the workers will take the \
                     SIGTERM for a preemption"
                ));
            }
        }
        match resize {
            Resize::Grow(o) => {
                let nodes: BTreeSet<String> =
                    o.containers.iter().map(|c| c.node_id.to_string()).collect();
                out(&format!(
                    "gang {GANG_ID} grown {from} -> {to}: {} new worker(s) on {}; asking the \
                     {from} running workers to checkpoint and exit",
                    o.containers.len(),
                    nodes.into_iter().collect::<Vec<_>>().join(", ")
                ));
            }
            Resize::Shrink(_) => {
                amrm.acknowledge_preemption(left);
                out(&format!(
                    "gang {GANG_ID} shrunk {from} -> {to} (deadline in {left} ms): asking the \
                     {from} running workers to checkpoint and exit; {} container(s) go back",
                    plan.leaving.len()
                ));
            }
        }
        grace
    }

    /// Re-initializes every running worker's container with the placeholder (its worker
    /// checkpoints and exits within `grace`); the first failure, if any.
    async fn park_all(
        &self,
        ranks: &[RankInfo],
        grace: Duration,
        out: &mut (dyn FnMut(&str) + Send),
    ) -> Option<String> {
        let parked = Ctx {
            commands: vec![PARKED.into()],
            environment: BTreeMap::new(),
            local_resources: BTreeMap::new(),
        };
        let stops = futures::future::join_all(ranks.iter().map(|r| {
            let ctx = parked.clone();
            async move {
                let c = &r.container;
                let res = self
                    .nm
                    .reinitialize_container(&c.node_http_address, &c.id, ctx, Some(grace))
                    .await;
                (r, res)
            }
        }))
        .await;
        let mut failure = None;
        for (r, res) in stops {
            if let Err(e) = res {
                let l = format!(
                    "worker rank {} could not be stopped for the resize in container {} on {}: {e}",
                    r.rank, r.container.id, r.container.node_id
                );
                out(&l);
                failure.get_or_insert(l);
            }
        }
        failure
    }

    /// Ranks the resized gang and starts every worker at the new size: the kept containers
    /// re-initialized with the worker command, the joining ones started. The new ranks, or
    /// the first failure.
    async fn restart_all(
        &self,
        plan: &Plan,
        out: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Vec<RankInfo>, String> {
        let to = plan.to;
        let all: Vec<Container> = plan
            .kept
            .iter()
            .chain(plan.joining.iter())
            .cloned()
            .collect();
        let new_ranks = assign_ranks(&all);
        let Some(master) = new_ranks.first().map(|r| r.container.clone()) else {
            return Err("the resized gang is empty".into());
        };
        let port = self.free_port(&master).await.map_err(|e| {
            format!(
                "cannot get a free port on rank 0's node {}: {e}",
                master.node_id
            )
        })?;
        let master_addr = master.node_id.host.clone();
        self.resizes.set(self.resizes.get() + 1);
        if let Some(dir) = &self.cfg.checkpoint_dir {
            if let Err(e) = checkpoint::remove_file(Path::new(dir), checkpoint::RESIZE_MARKER) {
                out(&format!("cannot remove the resize marker in {dir}: {e}"));
            }
        }
        out(&format!(
            "rendezvous: MASTER_ADDR={master_addr} MASTER_PORT={port} WORLD_SIZE={to} \
             (resize {})",
            self.resizes.get()
        ));
        let joining_ids: BTreeSet<ContainerId> = plan.joining.iter().map(|c| c.id).collect();
        let restarts = self.reinit_workers(
            new_ranks
                .iter()
                .filter(|r| !joining_ids.contains(&r.container.id)),
            to,
            &master_addr,
            port,
        );
        let fresh: Vec<RankInfo> = new_ranks
            .iter()
            .filter(|r| joining_ids.contains(&r.container.id))
            .cloned()
            .collect();
        let (restarted, failure) = futures::join!(restarts, async {
            if fresh.is_empty() {
                None
            } else {
                self.start_all(&fresh, to, &master_addr, port, out).await
            }
        });
        let mut failure = failure;
        for (r, res) in restarted {
            match res {
                Ok(()) => out(&format!(
                    "worker rank {} restarted in container {} on node {} (local rank {} of {})",
                    r.rank, r.container.id, r.container.node_id, r.local_rank, r.local_world_size
                )),
                Err(e) => {
                    let l = format!(
                        "worker rank {} could not be restarted in container {} on {}: {e}",
                        r.rank, r.container.id, r.container.node_id
                    );
                    out(&l);
                    failure.get_or_insert(l);
                }
            }
        }
        match failure {
            Some(f) => Err(f),
            None => Ok(new_ranks),
        }
    }
}

/// Who leaves, who joins and who stays in a resize, and by when.
struct Plan {
    leaving: BTreeSet<ContainerId>,
    joining: Vec<Container>,
    kept: Vec<Container>,
    /// The RM's deadline for a shrink; the grace from now for a growth.
    deadline_ms: u64,
    from: u32,
    to: u32,
}

impl Plan {
    fn new(ranks: &[RankInfo], resize: &Resize) -> Self {
        let (leaving, joining, deadline_ms): (BTreeSet<ContainerId>, Vec<Container>, u64) =
            match resize {
                Resize::Grow(o) => (
                    BTreeSet::new(),
                    o.containers.clone(),
                    now_ms().saturating_add(RESIZE_GRACE.as_millis() as u64),
                ),
                Resize::Shrink(d) => (
                    d.containers
                        .iter()
                        .filter(|c| ranks.iter().any(|r| r.container.id == **c))
                        .copied()
                        .collect(),
                    Vec::new(),
                    d.deadline_ms,
                ),
            };
        let kept: Vec<Container> = ranks
            .iter()
            .filter(|r| !leaving.contains(&r.container.id))
            .map(|r| r.container.clone())
            .collect();
        let to = (kept.len() + joining.len()) as u32;
        Self {
            leaving,
            joining,
            kept,
            deadline_ms,
            from: ranks.len() as u32,
            to,
        }
    }
}
