//! A client of NodeManagers: start, stop, signal and status of containers
//! (`/ws/v1/node/containers/...`), and their logs.
//!
//! NMs are addressed by their `nodeHttpAddress` (`host:port`, with or without `http://`),
//! as a granted [`Container`] carries it.
//!
//! The calls that act on containers (stop, release, signal, re-initialize, update) carry
//! `Authorization: Bearer <container token>` of the application that owns them, as the NM
//! requires: the client remembers the token of every container it starts (and of those given
//! to [`NmClient::remember`], e.g. containers kept from an earlier attempt) and sends the
//! container's own token, else another of the same application on the same node.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::Method;
use serde_json::Value;
use spindle_common::ids::{ApplicationId, ContainerId};
use spindle_common::records::am::Container;
use spindle_common::records::node::{
    ContainerLaunchContext, LaunchHold, NmAppBody, NmContainerBody, NmContainerInfo,
    ReinitializeContainerRequest, ReleaseContainersRequest, ReleaseContainersResponse,
    SignalContainerCommand, SignalContainerRequest, SignalContainerResponse, StartContainerRequest,
    StartContainersRequest, StartContainersResponse, StopContainersRequest, StopContainersResponse,
    NODE_FULL_EXCEPTION,
};

use spindle_common::token::unverified_container_identifier;

use crate::error::ClientError;
use crate::http::{build_client, decode, Http};

const NODE: &str = "/ws/v1/node";
/// How often, and how far apart, a start an NM refused as full (`NODE_FULL_EXCEPTION`: it
/// still runs a container the RM stopped, and hears so at its next heartbeat) is sent again:
/// about 5 s in all, as the RM tries an AM start.
const NODE_FULL_TRIES: u32 = 25;
const NODE_FULL_PAUSE: Duration = Duration::from_millis(200);

/// The NM's answer to [`NmClient::reinitialize_container`]: the new process runs.
pub use spindle_common::records::node::ReinitializeContainerResponse as ReinitializedContainer;
/// YARN's `ContainerUpdateRequest` and `ContainerUpdateResponse`: the body of
/// [`NmClient::update_containers`] and the NM's answer.
pub use spindle_common::records::node::{ContainerUpdateRequest, ContainerUpdateResponse};

/// One log file of a container, as the NM lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFileInfo {
    pub file_name: String,
    /// Bytes, when the NM says.
    pub file_size: Option<u64>,
    pub last_modified_time: Option<String>,
}

/// How [`NmClient::start_gang`] went.
#[derive(Debug)]
pub struct GangLaunch {
    /// Per member: started (held, then released), or why not.
    pub outcome: Vec<(ContainerId, Result<(), ClientError>)>,
    /// From the first held start call sent to the last one answered.
    pub held_in: std::time::Duration,
    /// From the first release call sent to the last one answered; None if some member could
    /// not be held, so none was released.
    pub released_in: Option<std::time::Duration>,
}

/// Client of any number of NMs (one connection pool).
#[derive(Debug, Clone)]
pub struct NmClient {
    client: reqwest::Client,
    /// The container tokens seen (started or remembered), with the node each is for: the
    /// bearer of the calls acting on containers. Shared by clones.
    tokens: Arc<Mutex<HashMap<ContainerId, (String, String)>>>,
}

/// `host:port` of a node address, with or without a scheme (how tokens are matched to nodes).
fn node_key(addr: &str) -> &str {
    let a = addr
        .strip_prefix("http://")
        .or_else(|| addr.strip_prefix("https://"))
        .unwrap_or(addr);
    a.trim_end_matches('/')
}

impl NmClient {
    pub fn new() -> Result<Self, ClientError> {
        Ok(Self {
            client: build_client()?,
            tokens: Arc::default(),
        })
    }

    /// Remembers `container`'s token (from an allocate answer, or a register answer's
    /// containers from previous attempts), so that stop, signal, release and re-initialize
    /// calls for it carry it. Starting a container through this client does it already.
    pub fn remember(&self, container: &Container) {
        self.remember_token(
            container.id,
            &container.node_http_address,
            &container.container_token,
        );
    }

    fn remember_token(&self, id: ContainerId, node: &str, token: &str) {
        if token.is_empty() {
            return;
        }
        if let Ok(mut t) = self.tokens.lock() {
            t.insert(id, (node_key(node).to_string(), token.to_string()));
        }
    }

    fn forget_token(&self, id: &ContainerId) {
        if let Ok(mut t) = self.tokens.lock() {
            t.remove(id);
        }
    }

    /// The bearer token for a call naming `ids` on `node`: the first one's own token, else
    /// any remembered token of its application for that node.
    fn bearer(&self, node: &str, ids: &[ContainerId]) -> Option<String> {
        let first = ids.first()?;
        let t = self.tokens.lock().ok()?;
        if let Some((_, tok)) = ids.iter().find_map(|id| t.get(id)) {
            return Some(tok.clone());
        }
        let node = node_key(node);
        t.iter()
            .find(|(id, (n, _))| {
                id.application_id() == first.application_id() && n.as_str() == node
            })
            .map(|(_, (_, tok))| tok.clone())
    }

    /// POSTs `body` to an NM's container call with the bearer token for `ids`.
    async fn post_container_call<B: serde::Serialize + ?Sized, T: serde::de::DeserializeOwned>(
        &self,
        node_http_address: &str,
        path: &str,
        body: &B,
        bearer: Option<String>,
        timeout: Option<Duration>,
    ) -> Result<T, ClientError> {
        let http = self.at(node_http_address);
        let (mut rb, url) = http.request(Method::POST, path);
        if let Some(t) = bearer {
            rb = rb.bearer_auth(t);
        }
        if let Some(t) = timeout {
            rb = rb.timeout(t);
        }
        let resp = http.send_ok(rb.json(body), &url).await?;
        decode(resp, &url).await
    }

    fn at(&self, node_http_address: &str) -> Http {
        Http::with_client(self.client.clone(), node_http_address)
    }

    /// Starts `container` with `ctx`; a refusal in `failedRequests` is an error.
    pub async fn start_container(
        &self,
        container: &Container,
        ctx: ContainerLaunchContext,
    ) -> Result<(), ClientError> {
        self.remember(container);
        let req = StartContainersRequest {
            start_container_request: vec![StartContainerRequest {
                container_token: container.container_token.clone(),
                container_launch_context: ctx,
            }],
            hold: None,
        };
        let mut tries = 1;
        let resp = loop {
            let resp = self
                .start_containers(&container.node_http_address, &req)
                .await?;
            let full = resp
                .failed_requests
                .iter()
                .any(|f| f.exception == NODE_FULL_EXCEPTION);
            if !full || tries >= NODE_FULL_TRIES {
                break resp;
            }
            tracing::info!(container = %container.id, "the node is still full; starting again");
            tries += 1;
            tokio::time::sleep(NODE_FULL_PAUSE).await;
        };
        let id = container.id.to_string();
        if let Some(f) = resp
            .failed_requests
            .iter()
            .find(|f| f.container_id == id)
            .or(resp.failed_requests.first())
        {
            return Err(ClientError::ContainerRequest {
                operation: "start",
                container_id: f.container_id.clone(),
                exception: f.exception.clone(),
                message: f.message.clone(),
            });
        }
        if !resp.successfully_started_containers.contains(&container.id) {
            return Err(ClientError::Protocol {
                url: self
                    .at(&container.node_http_address)
                    .url(&format!("{NODE}/containers/start")),
                message: format!("container {id} is neither started nor failed in the answer"),
            });
        }
        Ok(())
    }

    /// Starts several containers on one NM in one call (each with its launch context), so
    /// that the node admits them together; the outcome per container, in the given order.
    /// A failed call fails every one of them.
    pub async fn start_batch(
        &self,
        node_http_address: &str,
        batch: Vec<(Container, ContainerLaunchContext)>,
    ) -> Vec<(ContainerId, Result<(), ClientError>)> {
        self.start_batch_with(node_http_address, batch, None).await
    }

    /// [`NmClient::start_batch`], held: the NM sets every container up (localized, in its
    /// cgroups) and holds it before it runs; the call returns once all are held. Each one
    /// runs when [`NmClient::release_containers`] names it, or is stopped (-100) if it is not
    /// released within the hold's timeout. A gang released on all its nodes at once starts
    /// within milliseconds, however long each node took to set its members up.
    pub async fn start_batch_held(
        &self,
        node_http_address: &str,
        batch: Vec<(Container, ContainerLaunchContext)>,
        hold: LaunchHold,
    ) -> Vec<(ContainerId, Result<(), ClientError>)> {
        self.start_batch_with(node_http_address, batch, Some(hold))
            .await
    }

    /// The batch start: one call, then again for the containers the NM refused as full
    /// (`NODE_FULL_EXCEPTION`: it still holds cores the RM took back from a neighbour for
    /// them, a decrease that neighbour's AM has not yet handed over, or a container the RM
    /// stopped), as [`NmClient::start_container`] does, about 5 s in all.
    async fn start_batch_with(
        &self,
        node_http_address: &str,
        batch: Vec<(Container, ContainerLaunchContext)>,
        hold: Option<LaunchHold>,
    ) -> Vec<(ContainerId, Result<(), ClientError>)> {
        let ids: Vec<ContainerId> = batch.iter().map(|(c, _)| c.id).collect();
        for (c, _) in &batch {
            self.remember(c);
        }
        let mut pending: Vec<(ContainerId, StartContainerRequest)> = batch
            .into_iter()
            .map(|(c, ctx)| {
                let r = StartContainerRequest {
                    container_token: c.container_token,
                    container_launch_context: ctx,
                };
                (c.id, r)
            })
            .collect();
        let url = self
            .at(node_http_address)
            .url(&format!("{NODE}/containers/start"));
        let protocol = |message: String| ClientError::Protocol {
            url: url.clone(),
            message,
        };
        let mut outcome: BTreeMap<ContainerId, Result<(), ClientError>> = BTreeMap::new();
        let mut tries = 1;
        while !pending.is_empty() {
            let req = StartContainersRequest {
                start_container_request: pending.iter().map(|(_, r)| r.clone()).collect(),
                hold: hold.clone(),
            };
            let resp = match self.start_containers(node_http_address, &req).await {
                Ok(r) => r,
                Err(e) => {
                    let msg = e.to_string();
                    for (id, _) in pending.drain(..) {
                        outcome.insert(id, Err(protocol(msg.clone())));
                    }
                    break;
                }
            };
            let mut full = Vec::new();
            for (id, r) in pending.drain(..) {
                let key = id.to_string();
                let result = match resp.failed_requests.iter().find(|f| f.container_id == key) {
                    Some(f) if f.exception == NODE_FULL_EXCEPTION && tries < NODE_FULL_TRIES => {
                        full.push((id, r));
                        continue;
                    }
                    Some(f) => Err(ClientError::ContainerRequest {
                        operation: "start",
                        container_id: f.container_id.clone(),
                        exception: f.exception.clone(),
                        message: f.message.clone(),
                    }),
                    None if resp.successfully_started_containers.contains(&id) => Ok(()),
                    None => Err(protocol(format!(
                        "container {id} is neither started nor failed in the answer"
                    ))),
                };
                outcome.insert(id, result);
            }
            if !full.is_empty() {
                tracing::info!(
                    node = node_http_address,
                    containers = full.len(),
                    "the node is still full; starting again"
                );
                tries += 1;
                tokio::time::sleep(NODE_FULL_PAUSE).await;
            }
            pending = full;
        }
        ids.into_iter()
            .map(|id| {
                let r = outcome
                    .remove(&id)
                    .unwrap_or_else(|| Err(protocol(format!("container {id} was not sent"))));
                (id, r)
            })
            .collect()
    }

    /// `GET /ws/v1/node/ports/free` (Spindle's extension): a TCP port free on that node a
    /// moment ago, for a rendezvous such as `MASTER_PORT`.
    pub async fn free_port(&self, node_http_address: &str) -> Result<u16, ClientError> {
        let http = self.at(node_http_address);
        let path = format!("{NODE}/ports/free");
        let v: Value = http.get_json(&path).await?;
        v.get("port")
            .and_then(Value::as_u64)
            .and_then(|p| u16::try_from(p).ok())
            .filter(|p| *p != 0)
            .ok_or_else(|| ClientError::Decode {
                url: http.url(&path),
                message: format!("expected {{\"port\": 1..65535}}, got {v}"),
            })
    }

    /// Starts a gang's members together: one held start call per node, all nodes at once;
    /// then, only if every member is held, one release call per node, all at once. So no
    /// member runs unless all can, and the members start within the spread of the release
    /// calls rather than of the whole launch path. Members that were held but not released
    /// (because another failed) are left to the caller to stop, or to the hold's timeout.
    pub async fn start_gang(
        &self,
        members: Vec<(Container, ContainerLaunchContext)>,
        hold: LaunchHold,
    ) -> GangLaunch {
        let mut by_node: std::collections::BTreeMap<
            String,
            Vec<(Container, ContainerLaunchContext)>,
        > = std::collections::BTreeMap::new();
        for (c, ctx) in members {
            by_node
                .entry(c.node_http_address.clone())
                .or_default()
                .push((c, ctx));
        }
        let nodes: Vec<(String, Vec<ContainerId>)> = by_node
            .iter()
            .map(|(addr, b)| (addr.clone(), b.iter().map(|(c, _)| c.id).collect()))
            .collect();
        let began = std::time::Instant::now();
        let held = futures::future::join_all(by_node.into_iter().map(|(addr, batch)| {
            let hold = hold.clone();
            async move { self.start_batch_held(&addr, batch, hold).await }
        }))
        .await;
        let held_in = began.elapsed();
        let mut outcome: Vec<(ContainerId, Result<(), ClientError>)> =
            held.into_iter().flatten().collect();
        if outcome.iter().any(|(_, r)| r.is_err()) {
            return GangLaunch {
                outcome,
                held_in,
                released_in: None,
            };
        }
        let began = std::time::Instant::now();
        let released = futures::future::join_all(nodes.into_iter().map(|(addr, ids)| async move {
            let r = self.release_containers(&addr, ids.clone()).await;
            (addr, ids, r)
        }))
        .await;
        let released_in = began.elapsed();
        let mut failed: std::collections::BTreeMap<ContainerId, ClientError> = Default::default();
        for (addr, ids, r) in released {
            match r {
                Ok(resp) => {
                    for id in ids {
                        let key = id.to_string();
                        if let Some(f) = resp.failed_requests.iter().find(|f| f.container_id == key)
                        {
                            failed.insert(
                                id,
                                ClientError::ContainerRequest {
                                    operation: "release",
                                    container_id: f.container_id.clone(),
                                    exception: f.exception.clone(),
                                    message: f.message.clone(),
                                },
                            );
                        } else if !resp.successfully_released_containers.contains(&id) {
                            failed.insert(
                                id,
                                ClientError::Protocol {
                                    url: self.at(&addr).url(&format!("{NODE}/containers/release")),
                                    message: format!(
                                        "container {id} is neither released nor failed in the answer"
                                    ),
                                },
                            );
                        }
                    }
                }
                Err(e) => {
                    let message = e.to_string();
                    for id in ids {
                        failed.insert(
                            id,
                            ClientError::Protocol {
                                url: self.at(&addr).url(&format!("{NODE}/containers/release")),
                                message: message.clone(),
                            },
                        );
                    }
                }
            }
        }
        for (id, r) in outcome.iter_mut() {
            if let Some(e) = failed.remove(id) {
                *r = Err(e);
            }
        }
        GangLaunch {
            outcome,
            held_in,
            released_in: Some(released_in),
        }
    }

    /// `POST /ws/v1/node/containers/release` (Spindle's extension): held containers run now.
    pub async fn release_containers(
        &self,
        node_http_address: &str,
        ids: Vec<ContainerId>,
    ) -> Result<ReleaseContainersResponse, ClientError> {
        let bearer = self.bearer(node_http_address, &ids);
        self.post_container_call(
            node_http_address,
            &format!("{NODE}/containers/release"),
            &ReleaseContainersRequest { container_ids: ids },
            bearer,
            None,
        )
        .await
    }

    /// `POST /ws/v1/node/containers/start`.
    pub async fn start_containers(
        &self,
        node_http_address: &str,
        req: &StartContainersRequest,
    ) -> Result<StartContainersResponse, ClientError> {
        self.at(node_http_address)
            .post_json(&format!("{NODE}/containers/start"), req)
            .await
    }

    /// `POST /ws/v1/node/containers/stop` for one container; a refusal is an error.
    pub async fn stop_container(
        &self,
        node_http_address: &str,
        id: &ContainerId,
    ) -> Result<(), ClientError> {
        let req = StopContainersRequest {
            container_ids: vec![*id],
        };
        let bearer = self.bearer(node_http_address, &req.container_ids);
        let resp: StopContainersResponse = self
            .post_container_call(
                node_http_address,
                &format!("{NODE}/containers/stop"),
                &req,
                bearer,
                None,
            )
            .await?;
        if let Some(f) = resp.failed_requests.first() {
            return Err(ClientError::ContainerRequest {
                operation: "stop",
                container_id: f.container_id.clone(),
                exception: f.exception.clone(),
                message: f.message.clone(),
            });
        }
        self.forget_token(id);
        Ok(())
    }

    /// `POST /ws/v1/node/containers/signal` (YARN's `signalToContainer`): `GRACEFUL_SHUTDOWN`
    /// (SIGTERM, with no SIGKILL after it), `FORCEFUL_SHUTDOWN` (SIGKILL) or
    /// `OUTPUT_THREAD_DUMP` (SIGQUIT) to the container's process group. A refusal (an unknown
    /// container, or one with no process to signal) is an error.
    pub async fn signal_container(
        &self,
        node_http_address: &str,
        id: &ContainerId,
        command: SignalContainerCommand,
    ) -> Result<(), ClientError> {
        let req = SignalContainerRequest {
            container_id: *id,
            command,
        };
        let path = format!("{NODE}/containers/signal");
        let http = self.at(node_http_address);
        let bearer = self.bearer(node_http_address, &[*id]);
        let resp: SignalContainerResponse = self
            .post_container_call(node_http_address, &path, &req, bearer, None)
            .await?;
        if let Some(f) = resp.failed_requests.first() {
            return Err(ClientError::ContainerRequest {
                operation: "signal",
                container_id: f.container_id.clone(),
                exception: f.exception.clone(),
                message: f.message.clone(),
            });
        }
        if !resp.successfully_signaled_containers.contains(id) {
            return Err(ClientError::Protocol {
                url: http.url(&path),
                message: format!("container {id} is neither signalled nor failed in the answer"),
            });
        }
        Ok(())
    }

    /// The NM address (`host:port`) of a container this client started or remembered (and
    /// has not stopped since).
    pub fn node_of(&self, id: &ContainerId) -> Option<String> {
        self.tokens
            .lock()
            .ok()?
            .get(id)
            .map(|(node, _)| node.clone())
    }

    /// [`Self::signal_container`] by container id alone, for a container this client
    /// started or [remembered](Self::remember): what an AM does with a preemption notice
    /// without keeping its own map of containers to nodes.
    /// [`ClientError::UnknownContainer`] for any other.
    pub async fn signal_container_by_id(
        &self,
        id: &ContainerId,
        command: SignalContainerCommand,
    ) -> Result<(), ClientError> {
        let node = self
            .node_of(id)
            .ok_or_else(|| ClientError::UnknownContainer {
                container_id: id.to_string(),
            })?;
        self.signal_container(&node, id, command).await
    }

    /// `POST /ws/v1/node/containers/reinitialize` (YARN's `reInitializeContainer`): runs
    /// `ctx` in the running container `id` in place of its process. The NM sends SIGTERM to
    /// the container's process group, SIGKILL after `grace` (None: the NM's
    /// `sleep-delay-before-sigkill`), and starts the new process in the same container (same
    /// allocation, devices, work dir); the container stays RUNNING to the RM and the old
    /// process's end is not reported as a completion. Resolves once the new process runs.
    /// Refusals are [`ClientError::Remote`]: 404 unknown container, 409 not running or
    /// already re-initializing, 400 a bad launch context.
    pub async fn reinitialize_container(
        &self,
        node_http_address: &str,
        id: &ContainerId,
        ctx: ContainerLaunchContext,
        grace: Option<Duration>,
    ) -> Result<ReinitializedContainer, ClientError> {
        let body = ReinitializeContainerRequest {
            container_id: *id,
            container_launch_context: ctx,
            grace_period_ms: grace.map(|g| u64::try_from(g.as_millis()).unwrap_or(u64::MAX)),
        };
        let path = format!("{NODE}/containers/reinitialize");
        // The answer waits for the old process to go: up to the grace, beyond the usual
        // request timeout.
        let wait = grace.unwrap_or(Duration::from_secs(30)) + Duration::from_secs(60);
        let bearer = self.bearer(node_http_address, &[*id]);
        self.post_container_call(node_http_address, &path, &body, bearer, Some(wait))
            .await
    }

    /// `POST /ws/v1/node/containers/update` (YARN's `updateContainer`): hands the NM the
    /// new tokens of its containers (from [`crate::amrm::AllocationEvent::ContainerUpdated`],
    /// i.e. the RM's `updatedContainers`); each live container takes its token's memory and
    /// vcores (cgroup limits, memory watcher) without a restart. Per-container refusals
    /// (stale or replayed version, a device count change, an unknown or finished container,
    /// a bad token) are in the answer's `failedRequests`, not an error.
    pub async fn update_containers(
        &self,
        node_http_address: &str,
        tokens: Vec<String>,
    ) -> Result<ContainerUpdateResponse, ClientError> {
        // The new tokens are the application's own: the first one is the bearer (else, for a
        // token that does not parse, whatever this client holds for its container).
        let named: Vec<ContainerId> = tokens
            .iter()
            .filter_map(|t| unverified_container_identifier(t).ok())
            .map(|i| i.container_id)
            .collect();
        let bearer = tokens
            .iter()
            .find(|t| unverified_container_identifier(t).is_ok())
            .cloned()
            .or_else(|| self.bearer(node_http_address, &named));
        let resp: ContainerUpdateResponse = self
            .post_container_call(
                node_http_address,
                &format!("{NODE}/containers/update"),
                &ContainerUpdateRequest {
                    containers_to_update: tokens.clone(),
                },
                bearer,
                None,
            )
            .await?;
        // The updated containers' new tokens are their tokens from now on.
        for t in &tokens {
            if let Ok(i) = unverified_container_identifier(t) {
                if resp
                    .successfully_updated_containers
                    .contains(&i.container_id)
                {
                    self.remember_token(i.container_id, node_http_address, t);
                }
            }
        }
        Ok(resp)
    }

    /// [`NmClient::update_containers`] for one updated container (its node, its new token);
    /// a refusal is a [`ClientError::ContainerRequest`].
    pub async fn update_container(&self, container: &Container) -> Result<(), ClientError> {
        let resp = self
            .update_containers(
                &container.node_http_address,
                vec![container.container_token.clone()],
            )
            .await?;
        if let Some(f) = resp.failed_requests.first() {
            return Err(ClientError::ContainerRequest {
                operation: "update",
                container_id: f.container_id.clone(),
                exception: f.exception.clone(),
                message: f.message.clone(),
            });
        }
        if !resp.successfully_updated_containers.contains(&container.id) {
            return Err(ClientError::Protocol {
                url: format!("{}{NODE}/containers/update", container.node_http_address),
                message: format!(
                    "container {} is neither updated nor failed in the answer",
                    container.id
                ),
            });
        }
        Ok(())
    }

    /// `GET /ws/v1/node/containers/{id}`.
    pub async fn container_status(
        &self,
        node_http_address: &str,
        id: &ContainerId,
    ) -> Result<NmContainerInfo, ClientError> {
        let b: NmContainerBody = self
            .at(node_http_address)
            .get_json(&format!("{NODE}/containers/{id}"))
            .await?;
        Ok(b.container)
    }

    /// The container ids an NM knows for an application (`GET /ws/v1/node/apps/{id}`).
    pub async fn app_containers(
        &self,
        node_http_address: &str,
        app: &ApplicationId,
    ) -> Result<Vec<String>, ClientError> {
        let b: NmAppBody = self
            .at(node_http_address)
            .get_json(&format!("{NODE}/apps/{app}"))
            .await?;
        Ok(b.app.containerids)
    }

    /// `GET /ws/v1/node/containers/{id}/logs`: the container's log files.
    pub async fn container_log_files(
        &self,
        node_http_address: &str,
        id: &ContainerId,
    ) -> Result<Vec<LogFileInfo>, ClientError> {
        let http = self.at(node_http_address);
        let (rb, url) = http.request(Method::GET, &format!("{NODE}/containers/{id}/logs"));
        let resp = http.send_ok(rb, &url).await?;
        let v: Value = decode(resp, &url).await?;
        Ok(parse_log_files(&v))
    }

    /// The last `bytes` bytes of a container's log file as text (YARN's `?size=-N`).
    pub async fn container_log_tail(
        &self,
        node_http_address: &str,
        id: &ContainerId,
        file: &str,
        bytes: u64,
    ) -> Result<String, ClientError> {
        let file = urlencoding::encode(file);
        self.at(node_http_address)
            .get_text(&format!("{NODE}/containerlogs/{id}/{file}?size=-{bytes}"))
            .await
    }

    /// `GET /ws/v1/node/containerlogs/{id}/{file}` as text.
    pub async fn container_log(
        &self,
        node_http_address: &str,
        id: &ContainerId,
        file: &str,
    ) -> Result<String, ClientError> {
        let file = urlencoding::encode(file);
        self.at(node_http_address)
            .get_text(&format!("{NODE}/containerlogs/{id}/{file}"))
            .await
    }
}

/// Finds every `{"fileName": ..}` object in a log listing, whatever the wrapping: YARN's
/// `[{"containerLogInfo":[...],"logAggregationType":..}]`,
/// `{"containerLogsInfo":{"containerLogInfo":[...]}}`, or a bare list. Duplicates (the same
/// file listed as local and aggregated) are dropped.
pub fn parse_log_files(v: &Value) -> Vec<LogFileInfo> {
    fn walk(v: &Value, out: &mut Vec<LogFileInfo>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(name)) = m.get("fileName") {
                    let file_size = match m.get("fileSize") {
                        Some(Value::Number(n)) => n.as_u64(),
                        Some(Value::String(s)) => s.trim().parse().ok(),
                        _ => None,
                    };
                    let last_modified_time = match m.get("lastModifiedTime") {
                        Some(Value::String(s)) => Some(s.clone()),
                        Some(Value::Number(n)) => Some(n.to_string()),
                        _ => None,
                    };
                    if !out.iter().any(|f| &f.file_name == name) {
                        out.push(LogFileInfo {
                            file_name: name.clone(),
                            file_size,
                            last_modified_time,
                        });
                    }
                } else {
                    m.values().for_each(|x| walk(x, out));
                }
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A fake NM: each start call's body is recorded, and each container whose token is
    /// in `full` is refused as full for its first `refusals` calls, then started.
    async fn fake_nm(
        full: &'static str,
        refusals: usize,
    ) -> (String, Arc<Mutex<Vec<Vec<String>>>>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let calls: Arc<Mutex<Vec<Vec<String>>>> = Arc::default();
        let seen = calls.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let mut buf = Vec::new();
                let mut chunk = vec![0u8; 8192];
                // Read the head, then the body its content-length names.
                let body = loop {
                    let n = s.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        break None;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    let Some(end) = text.find("\r\n\r\n") else {
                        continue;
                    };
                    let len: usize = text[..end]
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse().ok())?
                        })
                        .unwrap_or(0);
                    if buf.len() >= end + 4 + len {
                        break Some(buf[end + 4..end + 4 + len].to_vec());
                    }
                };
                let Some(body) = body else { continue };
                let req: StartContainersRequest = serde_json::from_slice(&body).unwrap();
                let tokens: Vec<String> = req
                    .start_container_request
                    .iter()
                    .map(|r| r.container_token.clone())
                    .collect();
                let call = {
                    let mut c = seen.lock().unwrap();
                    c.push(tokens.clone());
                    c.len()
                };
                let mut resp = StartContainersResponse::default();
                for t in tokens {
                    let id: ContainerId = t.parse().unwrap();
                    if t == full && call <= refusals {
                        resp.failed_requests.push(
                            spindle_common::records::node::FailedContainerRequest {
                                container_id: t,
                                exception: NODE_FULL_EXCEPTION.into(),
                                message: "does not fit on this node".into(),
                            },
                        );
                    } else {
                        resp.successfully_started_containers.push(id);
                    }
                }
                let body = serde_json::to_string(&resp).unwrap();
                let out = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(out.as_bytes()).await;
            }
        });
        (addr, calls)
    }

    /// A container of `id` on `node`, its token its id (what the fake NM reads).
    fn container(id: &str, node: &str) -> Container {
        Container {
            id: id.parse().unwrap(),
            node_id: spindle_common::NodeId::new("127.0.0.1", 1),
            node_http_address: node.to_string(),
            resource: Default::default(),
            priority: 0,
            container_token: id.to_string(),
            execution_type: "GUARANTEED".into(),
            allocation_request_id: 0,
            version: 0,
        }
    }

    fn ctx() -> ContainerLaunchContext {
        serde_json::from_value(json!({"commands": ["true"]})).unwrap()
    }

    /// A batch start one member of which the NM refuses as full (it still holds cores the
    /// RM took back from a neighbour, whose decrease has not reached it yet) sends that
    /// member again, alone, until it is started; the others are not sent twice.
    #[tokio::test]
    async fn a_batch_member_refused_as_full_is_sent_again_alone_until_it_starts() {
        let (a, b) = ("container_1_0001_01_000002", "container_1_0001_01_000003");
        let (nm, calls) = fake_nm(b, 2).await;
        let client = NmClient::new().unwrap();
        let out = client
            .start_batch(
                &nm,
                vec![(container(a, &nm), ctx()), (container(b, &nm), ctx())],
            )
            .await;
        assert!(out.iter().all(|(_, r)| r.is_ok()), "{out:?}");
        let calls = calls.lock().unwrap().clone();
        assert_eq!(
            calls,
            vec![
                vec![a.to_string(), b.to_string()],
                vec![b.to_string()],
                vec![b.to_string()],
            ]
        );
    }

    /// A member still refused as full after about 5 s fails with the NM's refusal.
    #[tokio::test]
    async fn a_batch_member_full_for_good_fails_with_the_refusal() {
        let a = "container_1_0001_01_000002";
        let (nm, calls) = fake_nm(a, usize::MAX).await;
        let client = NmClient::new().unwrap();
        let out = client
            .start_batch(&nm, vec![(container(a, &nm), ctx())])
            .await;
        let err = out[0].1.as_ref().expect_err("refused");
        assert!(
            matches!(err, ClientError::ContainerRequest { exception, .. } if exception == NODE_FULL_EXCEPTION),
            "{err:?}"
        );
        assert_eq!(calls.lock().unwrap().len(), NODE_FULL_TRIES as usize);
    }

    #[test]
    fn log_listings_of_any_wrapping() {
        let yarn = json!([{"containerLogInfo":[
            {"fileName":"stdout","fileSize":"12","lastModifiedTime":"Mon Jan 01"},
            {"fileName":"stderr","fileSize":"0","lastModifiedTime":"Mon Jan 01"}],
            "logAggregationType":"LOCAL","containerId":"c","nodeId":"n"}]);
        let f = parse_log_files(&yarn);
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].file_name, "stdout");
        assert_eq!(f[0].file_size, Some(12));
        let brief = json!({"containerLogsInfo":{"containerLogInfo":
            {"fileName":"stdout","fileSize":3,"lastModifiedTime":17}}});
        let f = parse_log_files(&brief);
        assert_eq!(
            f,
            vec![LogFileInfo {
                file_name: "stdout".into(),
                file_size: Some(3),
                last_modified_time: Some("17".into())
            }]
        );
        assert!(parse_log_files(&json!({"x":null})).is_empty());
    }
}
