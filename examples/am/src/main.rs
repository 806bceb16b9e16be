//! The application master of `docs/sdk.md` ("Your own application master"), built by the
//! suite and run on a minicluster by `tests/tests/own_am.rs` with `spindle submit --am-file`.
//!
//! It registers, then:
//! 1. runs `TRIALS` trials (default 3) of `TRIAL_SECONDS` (default 1), one GPU each, asking
//!    for containers one at a time as earlier trials end (at most `AT_ONCE`, default 2);
//! 2. releases a running container and waits for its completion (YARN's release: the
//!    container is killed and still completes, with -106 KILLED_BY_RESOURCEMANAGER);
//! 3. asks for a two-member gang (both granted together or neither) and runs it;
//!
//! and all along answers a preemption notice: it signals the containers named (by id alone),
//! acknowledges with the time left to the RM's deadline, and runs a preempted trial again.
//! It unregisters SUCCEEDED, or FAILED naming what went wrong.

use std::collections::{BTreeMap, VecDeque};

use spindle_appmaster_sdk::common::time::now_ms;
use spindle_appmaster_sdk::{
    AllocationEvent, AmClient, AmRmClient, Container, ContainerId, ContainerLaunchContext,
    ContainerRequest, FinalApplicationStatus, GangMember, GangRequest, NmClient, Resource,
    SignalContainerCommand, GPU,
};

/// YARN's exit status of a container the scheduler preempted.
const PREEMPTED: i32 = -102;

/// The AM's clients; its event loop answers preemption notices itself.
struct Am {
    amrm: AmRmClient,
    nm: NmClient,
}

impl Am {
    /// The next event that is not a preemption notice; notices are answered here.
    async fn next(&mut self) -> anyhow::Result<AllocationEvent> {
        loop {
            match self.amrm.next_event().await? {
                AllocationEvent::Preempted {
                    containers,
                    deadline_ms,
                    ..
                } => {
                    for c in &containers {
                        println!(
                            "preemption notice for {} on {} (gang {})",
                            c.id,
                            c.node_http_address.as_deref().unwrap_or("?"),
                            c.gang_id.as_deref().unwrap_or("-")
                        );
                        let graceful = SignalContainerCommand::GRACEFUL_SHUTDOWN;
                        if let Err(e) = self.nm.signal_container_by_id(&c.id, graceful).await {
                            eprintln!("cannot signal {}: {e}", c.id);
                        }
                    }
                    self.amrm
                        .acknowledge_preemption(deadline_ms.saturating_sub(now_ms()));
                }
                other => return Ok(other),
            }
        }
    }

    async fn start(&self, c: &Container, command: String) -> anyhow::Result<()> {
        let ctx = ContainerLaunchContext {
            commands: vec![command],
            ..Default::default()
        };
        self.nm.start_container(c, ctx).await?;
        Ok(())
    }

    /// Step 1: `trials` one-GPU trials, asked for one at a time as earlier ones end, at
    /// most `at_once` asked for or running; a preempted trial waits to run again.
    async fn trials(&mut self, trials: u32, at_once: usize, secs: u32) -> anyhow::Result<()> {
        let gpu = Resource::new(256, 1).with(GPU, 1);
        let mut waiting: VecDeque<u32> = (0..trials).collect();
        let mut running: BTreeMap<ContainerId, u32> = BTreeMap::new();
        let (mut asked, mut done) = (0, 0);
        while done < trials {
            while asked + running.len() < at_once && asked < waiting.len() {
                self.amrm
                    .add_container_request(ContainerRequest::new(gpu.clone(), 0))?;
                asked += 1;
            }
            match self.next().await? {
                AllocationEvent::Allocated(c) => {
                    asked = asked.saturating_sub(1);
                    let Some(n) = waiting.pop_front() else {
                        self.amrm.release(c.id);
                        continue;
                    };
                    println!("trial {n}: container {} on {}", c.id, c.node_http_address);
                    let cmd = format!("echo trial {n} on GPU $CUDA_VISIBLE_DEVICES; sleep {secs}");
                    self.start(&c, cmd).await?;
                    running.insert(c.id, n);
                }
                AllocationEvent::Completed(s) => match running.remove(&s.container_id) {
                    Some(n) if s.exit_status == PREEMPTED => {
                        println!("trial {n} was preempted: it runs again");
                        waiting.push_back(n);
                    }
                    Some(n) if s.exit_status != 0 => {
                        anyhow::bail!("trial {n} failed with {}: {}", s.exit_status, s.diagnostics)
                    }
                    Some(n) => {
                        println!("trial {n} done");
                        done += 1;
                    }
                    None => {}
                },
                _ => {}
            }
        }
        Ok(())
    }

    /// Step 2: a container released while it runs is killed and still completes.
    async fn release_one(&mut self) -> anyhow::Result<()> {
        self.amrm
            .add_container_request(ContainerRequest::new(Resource::new(256, 1), 1))?;
        let id = loop {
            if let AllocationEvent::Allocated(c) = self.next().await? {
                self.start(&c, "sleep 600".into()).await?;
                self.amrm.release(c.id);
                break c.id;
            }
        };
        loop {
            if let AllocationEvent::Completed(s) = self.next().await? {
                if s.container_id == id {
                    println!(
                        "released container {id} ended with {}: {}",
                        s.exit_status, s.diagnostics
                    );
                    return Ok(());
                }
            }
        }
    }

    /// Step 3: a gang of two one-GPU members, granted together.
    async fn gang(&mut self) -> anyhow::Result<()> {
        let member = GangMember::new(Resource::new(256, 1).with(GPU, 1), 2, 7);
        let members = self
            .amrm
            .request_gang(GangRequest::new("pair", vec![member]))
            .await?;
        println!("gang pair granted: {} members", members.len());
        for c in &members {
            self.start(c, "echo gang member $CONTAINER_ID; sleep 1".into())
                .await?;
        }
        let mut left = members.len();
        while left > 0 {
            if let AllocationEvent::Completed(s) = self.next().await? {
                if s.gang_id.as_deref() == Some("pair") {
                    left -= 1;
                }
            }
        }
        println!("gang pair done");
        Ok(())
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    spindle_appmaster_sdk::init_logging();
    let host = std::env::var("NM_HOST").unwrap_or_else(|_| "localhost".into());
    let mut am = Am {
        amrm: AmRmClient::new(AmClient::from_env()?),
        nm: NmClient::new()?,
    };
    am.amrm.register(&host, -1, "").await?;
    let setting = |name: &str, default: u32| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let (trials, at_once) = (setting("TRIALS", 3), setting("AT_ONCE", 2));
    let secs = setting("TRIAL_SECONDS", 1);
    let run = async {
        am.trials(trials, at_once as usize, secs).await?;
        am.release_one().await?;
        am.gang().await
    }
    .await;
    let (status, diagnostics) = match &run {
        Ok(()) => (FinalApplicationStatus::SUCCEEDED, String::new()),
        Err(e) => (FinalApplicationStatus::FAILED, e.to_string()),
    };
    am.amrm.finish(status, &diagnostics).await?;
    println!("example AM finished: {status:?} {diagnostics}");
    run
}
