//! The NM's side of the ResourceTracker protocol: register, then heartbeat until stopped.
//!
//! Registration is retried every 500 ms until the RM answers (a failure is logged on the
//! first try and every tenth after, so a missing RM does not flood the log). Heartbeats go
//! every `nextHeartbeatIntervalMs`, and at once when the container manager wakes us (a
//! container was accepted or completed). An unreachable RM never stops containers: the NM
//! keeps running them and keeps trying. RESYNC means register again (with every container
//! still unacknowledged); SHUTDOWN means the NM exits. The container-token master key in an
//! answer is unwrapped with the cluster secret before the container manager gets it.
//!
//! Distributed node labels and attributes ([`crate::node_labels`]): registration waits for
//! the providers' first answer and carries the partition (`nodeLabels`, absent without a label
//! provider) and the providers' attributes merged with the device-derived ones (those win on
//! a clash). A heartbeat carries either only when it differs from what the RM last received.
//! A refusal by the RM (`areNodeLabelsAcceptedByRM: false`, or the attributes' flag) is logged
//! with its diagnostics and not retried until the value changes again (or the NM registers
//! again), so a refused label never makes the NM loop.

use spindle_common::failover::{FailoverPolicy, Next as Failover, Rotation};
use spindle_common::tls::{with_roots, ClientTls};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use spindle_common::cluster_secret::{random_nonce, ClusterSecret};
use spindle_common::ids::NodeId;
use spindle_common::records::resource::ResourceInfo;
use spindle_common::records::tracker::{
    MasterKey, NodeAction, NodeHeartbeatRequest, NodeHeartbeatResponse, NodeImageInfo, NodeStatus,
    RegisterNodeManagerRequest, RegisterNodeManagerResponse,
};
use spindle_common::resource::Resource;
use spindle_common::time::now_ms;
use tokio::sync::{oneshot, watch, Notify};
use tracing::{debug, error, info, warn};

use crate::image::node::NodeImages;
use crate::manager::{until_stopped, NmHandle};
use crate::node_labels::NodeDescriptorView;
use crate::plugins::HealthView;

pub const REGISTER_PATH: &str = "/ws/v1/node-tracker/register";
pub const HEARTBEAT_PATH: &str = "/ws/v1/node-tracker/heartbeat";
pub const UNREGISTER_PATH: &str = "/ws/v1/node-tracker/unregister";
/// Delay between registration attempts.
pub const REGISTER_RETRY: Duration = Duration::from_millis(500);
/// Failures are logged on the first attempt and then once per this many.
const LOG_EVERY: u32 = 10;
/// A floor under the RM's heartbeat interval, so a bad answer cannot make us spin.
const MIN_HEARTBEAT: Duration = Duration::from_millis(10);
/// How long the last heartbeat of a stopping NM may take.
const FINAL_HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub enum RmError {
    #[error("cannot reach the ResourceManager: {0}")]
    Http(#[from] reqwest::Error),
    #[error("the ResourceManager answered {status}: {body}")]
    Status { status: u16, body: String },
    /// 401: the RM wants node-tracker calls signed with the cluster secret and this one's
    /// signature (or its absence) was refused.
    #[error("the ResourceManager refused this node's signature: check {key} (the same secret file on the RM and every NM; clocks within 5 minutes): {body}", key = spindle_common::config::keys::CLUSTER_SECRET_FILE)]
    Unauthenticated { body: String },
    #[error("cannot sign the request: {0}")]
    Sign(#[from] spindle_common::cluster_secret::ClusterSecretError),
    #[error("cannot parse the ResourceManager's answer: {0}")]
    Body(#[from] serde_json::Error),
    /// 307: a standby RM named the active.
    #[error("redirected by a standby ResourceManager to {location}")]
    Redirect { location: String },
}

impl RmError {
    /// Whether another RM may answer: none answered here (refused, timed out), a standby
    /// that knows no active (503), or one whose redirect could not be followed.
    fn worth_failover(&self) -> bool {
        match self {
            RmError::Http(e) => e.is_connect() || e.is_timeout() || e.is_request(),
            RmError::Status { status, .. } => *status == 503,
            RmError::Redirect { .. } => true,
            RmError::Unauthenticated { .. } | RmError::Sign(_) | RmError::Body(_) => false,
        }
    }
}

pub struct StatusUpdater {
    client: reqwest::Client,
    /// The RMs' base URLs and the one in use: one, or the HA RMs, among which calls fail
    /// over under the shared policy ([`spindle_common::failover`]).
    rms: Rotation,
    /// The RMs' `host:port` and the policy, to rebuild `rms` with another scheme.
    rm_addresses: Vec<String>,
    policy: FailoverPolicy,
    node_id: NodeId,
    resource: Resource,
    handle: NmHandle,
    wake: Arc<Notify>,
    stopping: watch::Receiver<bool>,
    rm_shutdown: Option<oneshot::Sender<()>>,
    /// Device plugins' problems, sent as the heartbeat's health report.
    health: HealthView,
    /// Device-derived attributes (the GPU model and the like).
    attributes: BTreeMap<String, String>,
    /// The partition and attribute providers.
    descriptor: NodeDescriptorView,
    /// What the RM last received (at registration or in an answered heartbeat).
    sent: Reported,
    /// Signs every call (`spindle.cluster.secret-file`); `None`: calls go unsigned.
    cluster_secret: Option<ClusterSecret>,
    /// The id of the newest container-token master key the RM sent (YARN's
    /// `lastKnownContainerTokenMasterKey`, sent back in every heartbeat).
    key_id: Option<u32>,
    /// The node's image store: its images reported, the RM's prefetches pulled into it.
    images: Option<Arc<NodeImages>>,
}

/// The labels and attributes of one report.
#[derive(Debug, Clone, Default, PartialEq)]
struct Reported {
    labels: Option<Vec<String>>,
    attributes: BTreeMap<String, String>,
    /// The images in the node's cache (None: no image store).
    images: Option<Vec<NodeImageInfo>>,
}

/// What a heartbeat carries beyond the node status: values changed since the last report.
#[derive(Debug, Clone, Default)]
struct Changes {
    labels: Option<Vec<String>>,
    attributes: Option<BTreeMap<String, String>>,
    images: Option<Vec<NodeImageInfo>>,
}

enum Next {
    Register,
    Stop,
}

impl StatusUpdater {
    /// For the RMs at `rm_addresses` (`host:port` or a URL; the first is tried first),
    /// failing over among them under the default policy ([`Self::with_failover`]).
    pub fn new(
        rm_addresses: &[String],
        node_id: NodeId,
        resource: Resource,
        handle: NmHandle,
        wake: Arc<Notify>,
        stopping: watch::Receiver<bool>,
        rm_shutdown: oneshot::Sender<()>,
    ) -> Result<Self, RmError> {
        let client = client_builder().build()?;
        let policy = FailoverPolicy::default();
        // An address written with its scheme keeps it (`https://rm:8088`).
        let bases = rm_addresses
            .iter()
            .map(|a| spindle_common::tls::HttpPolicy::HttpOnly.base_url(a))
            .collect();
        Ok(Self {
            client,
            rms: Rotation::new(bases, policy),
            rm_addresses: rm_addresses.to_vec(),
            policy,
            node_id,
            resource,
            handle,
            wake,
            stopping,
            rm_shutdown: Some(rm_shutdown),
            health: HealthView::default(),
            attributes: BTreeMap::new(),
            descriptor: NodeDescriptorView::default(),
            sent: Reported::default(),
            cluster_secret: None,
            key_id: None,
            images: None,
        })
    }

    /// Fails over among the RMs under `policy` (`yarn.client.failover-*`).
    pub fn with_failover(mut self, policy: FailoverPolicy) -> Self {
        self.policy = policy;
        let bases = self.rms.addresses().to_vec();
        self.rms = Rotation::new(bases, policy);
        self
    }

    /// Dials the RM as `yarn.http.policy` says (`https://` under `HTTPS_ONLY`), trusting the
    /// system roots and `spindle.ssl.client.ca-file`.
    pub fn with_tls(mut self, tls: &ClientTls) -> Result<Self, RmError> {
        let bases = self.rm_addresses.iter().map(|a| tls.base_url(a)).collect();
        self.rms = Rotation::new(bases, self.policy);
        self.client = with_roots(client_builder(), tls)?.build()?;
        Ok(self)
    }

    /// The node's image store (reported in heartbeats, prefetched into).
    pub fn with_images(mut self, images: Option<Arc<NodeImages>>) -> Self {
        self.images = images;
        self
    }

    /// Signs every register and heartbeat with the cluster secret.
    pub fn with_cluster_secret(mut self, secret: Option<ClusterSecret>) -> Self {
        self.cluster_secret = secret;
        self
    }

    /// Reports the plugins' problems (a failing `nvidia-smi`, a vanished GPU) in every
    /// heartbeat's health report. The node stays healthy: it can still run CPU-only work.
    pub fn with_health(mut self, health: HealthView) -> Self {
        self.health = health;
        self
    }

    /// Node attributes sent at registration (the GPU model).
    pub fn with_attributes(mut self, attributes: BTreeMap<String, String>) -> Self {
        self.attributes = attributes;
        self
    }

    /// The node's partition and own attributes, from its providers.
    pub fn with_node_descriptor(mut self, descriptor: NodeDescriptorView) -> Self {
        self.descriptor = descriptor;
        self
    }

    /// What the providers say now, in wire form: the partition, and their attributes merged
    /// with the device-derived ones (those win on a clash).
    fn current(&self) -> Reported {
        let d = self.descriptor.current();
        let mut attributes = d.attributes.clone();
        attributes.extend(self.attributes.iter().map(|(k, v)| (k.clone(), v.clone())));
        Reported {
            labels: d.labels(),
            attributes,
            images: self.images.as_ref().map(|i| i.report()),
        }
    }

    /// The values that differ from what the RM last received.
    fn changes(&self) -> (Reported, Changes) {
        let now = self.current();
        let changes = Changes {
            labels: (now.labels.is_some() && now.labels != self.sent.labels)
                .then(|| now.labels.clone())
                .flatten(),
            attributes: (now.attributes != self.sent.attributes).then(|| now.attributes.clone()),
            images: (now.images != self.sent.images)
                .then(|| now.images.clone())
                .flatten(),
        };
        (now, changes)
    }

    /// Logs the RM's refusal of labels or attributes this report carried.
    fn check_accepted(sent: &Changes, labels_ok: bool, attributes_ok: bool, diagnostics: &str) {
        if let (Some(labels), false) = (&sent.labels, labels_ok) {
            warn!(?labels, diagnostics = %diagnostics,
                "the ResourceManager refused this node's labels; they are sent again when they change");
        }
        if let (Some(attributes), false) = (&sent.attributes, attributes_ok) {
            warn!(?attributes, diagnostics = %diagnostics,
                "the ResourceManager refused this node's attributes; they are sent again when they change");
        }
    }

    /// Registers and heartbeats until the NM stops or the RM says SHUTDOWN, in a span naming
    /// this node (`node_id`).
    #[tracing::instrument(name = "status_updater", skip_all, fields(node_id = %self.node_id))]
    pub async fn run(mut self) {
        loop {
            let Some(reg) = self.register().await else {
                return;
            };
            match self.heartbeat_loop(reg.heartbeat_interval_ms).await {
                Next::Register => continue,
                Next::Stop => return,
            }
        }
    }

    /// None when the NM is stopping (or the RM told it to).
    async fn register(&mut self) -> Option<RegisterNodeManagerResponse> {
        // A label or attribute script's first run decides what the node registers with.
        tokio::select! {
            _ = self.descriptor.ready() => {}
            _ = until_stopped(&mut self.stopping) => return None,
        }
        let mut attempt: u32 = 0;
        loop {
            let reports = self.handle.reports().await.ok()?;
            let running = reports.len();
            let now = self.current();
            let req = RegisterNodeManagerRequest {
                node_id: self.node_id.clone(),
                http_address: self.node_id.to_string(),
                resource: ResourceInfo::from(&self.resource),
                nm_version: env!("CARGO_PKG_VERSION").to_string(),
                rack: None,
                container_statuses: reports,
                node_attributes: now.attributes.clone(),
                node_labels: now.labels.clone(),
                node_images: now.images.clone(),
            };
            let failure = match self
                .post::<_, RegisterNodeManagerResponse>(REGISTER_PATH, &req)
                .await
            {
                Ok(resp) if resp.node_action == NodeAction::SHUTDOWN => {
                    error!(diagnostics = %resp.diagnostics_message,
                        "the ResourceManager refused this node and told it to shut down");
                    self.request_shutdown();
                    return None;
                }
                Ok(resp) => match self.take_key(resp.container_token_master_key.as_ref()) {
                    Ok(key) => {
                        self.handle.registered(key, resp.rm_identifier).await.ok()?;
                        let sent = Changes {
                            labels: now.labels.clone(),
                            attributes: (!now.attributes.is_empty())
                                .then(|| now.attributes.clone()),
                            images: now.images.clone(),
                        };
                        Self::check_accepted(
                            &sent,
                            resp.are_node_labels_accepted_by_rm,
                            resp.are_node_attributes_accepted_by_rm,
                            &resp.diagnostics_message,
                        );
                        self.sent = now;
                        info!(rm = %self.rms.current(), node_id = %self.node_id, containers = running,
                            heartbeat_ms = resp.heartbeat_interval_ms,
                            "registered with the ResourceManager");
                        return Some(resp);
                    }
                    Err(e) => e,
                },
                Err(e) => e.to_string(),
            };
            if attempt.is_multiple_of(LOG_EVERY) {
                warn!(attempt = attempt + 1, rm = %self.rms.current(), error = %failure,
                    "cannot register with the ResourceManager; retrying every 500 ms");
            }
            attempt = attempt.saturating_add(1);
            tokio::select! {
                _ = tokio::time::sleep(REGISTER_RETRY) => {}
                _ = until_stopped(&mut self.stopping) => return None,
            }
        }
    }

    async fn heartbeat_loop(&mut self, first_interval_ms: u64) -> Next {
        let mut interval = interval_of(first_interval_ms);
        let mut response_id = 0;
        let mut failures: u32 = 0;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = self.wake.notified() => {}
                _ = until_stopped(&mut self.stopping) => {
                    let last = self.heartbeat(response_id, Changes::default());
                    match tokio::time::timeout(FINAL_HEARTBEAT_TIMEOUT, last).await {
                        Ok(Ok(_)) => debug!("sent the final heartbeat"),
                        _ => debug!("could not send the final heartbeat"),
                    }
                    return Next::Stop;
                }
            }
            let (now, changes) = self.changes();
            let resp = match self.heartbeat(response_id, changes.clone()).await {
                Ok(Some(r)) => r,
                Ok(None) => return Next::Stop,
                Err(e) => {
                    if failures.is_multiple_of(LOG_EVERY) {
                        warn!(failures = failures + 1, error = %e,
                            "heartbeat failed; containers keep running, retrying");
                    }
                    failures = failures.saturating_add(1);
                    continue;
                }
            };
            if failures > 0 {
                info!(failures, "heartbeats reach the ResourceManager again");
                failures = 0;
            }
            response_id = resp.response_id;
            if let Some(k) = &resp.container_token_master_key {
                // A roll: the new key becomes current. One that cannot be taken is logged and
                // asked for again (the next heartbeat names the old id).
                match self.take_key(Some(k)) {
                    Ok(key) => {
                        if self.handle.master_key(key).await.is_err() {
                            return Next::Stop;
                        }
                    }
                    Err(e) => error!("{e}"),
                }
            }
            interval = interval_of(resp.next_heartbeat_interval_ms);
            Self::check_accepted(
                &changes,
                resp.are_node_labels_accepted_by_rm,
                resp.are_node_attributes_accepted_by_rm,
                &resp.diagnostics_message,
            );
            self.sent = now;
            match resp.node_action {
                NodeAction::RESYNC => {
                    info!("the ResourceManager asked for a resync; registering again");
                    return Next::Register;
                }
                NodeAction::SHUTDOWN => {
                    warn!(diagnostics = %resp.diagnostics_message,
                        "the ResourceManager told this node to shut down");
                    self.request_shutdown();
                    return Next::Stop;
                }
                NodeAction::NORMAL => {
                    if let Some(i) = &self.images {
                        i.prefetch(resp.images_to_prefetch);
                    }
                    if self
                        .handle
                        .heartbeat_answered(
                            resp.containers_to_cleanup,
                            resp.applications_to_cleanup,
                            resp.containers_to_be_removed_from_nm,
                        )
                        .await
                        .is_err()
                    {
                        return Next::Stop;
                    }
                }
            }
        }
    }

    /// Ok(None) when the container manager is gone.
    async fn heartbeat(
        &self,
        response_id: i32,
        changes: Changes,
    ) -> Result<Option<NodeHeartbeatResponse>, RmError> {
        let Ok(reports) = self.handle.reports().await else {
            return Ok(None);
        };
        // The sampled GPUs of each container (none without a GPU plugin or a sample).
        let Ok(gpus) = self
            .handle
            .resource(spindle_common::resource::GPU.to_string())
            .await
        else {
            return Ok(None);
        };
        let containers_gpu_utilization = gpus
            .as_ref()
            .map(crate::plugins::gpu::container_utilization)
            .unwrap_or_default();
        let req = NodeHeartbeatRequest {
            node_id: self.node_id.clone(),
            response_id,
            node_status: NodeStatus {
                healthy: self.health.healthy(),
                health_report: self.health.report(),
                last_health_report_time: now_ms(),
                containers_statuses: reports,
                node_utilization: None,
                containers_gpu_utilization,
            },
            node_labels: changes.labels,
            node_attributes: changes.attributes,
            node_images: changes.images,
            node_image_pull_failures: self
                .images
                .as_ref()
                .map(|i| i.take_failures())
                .unwrap_or_default(),
            last_known_container_token_master_key: self.key_id.map(MasterKey::id_only),
        };
        self.post(HEARTBEAT_PATH, &req).await.map(Some)
    }

    fn request_shutdown(&mut self) {
        if let Some(tx) = self.rm_shutdown.take() {
            let _ = tx.send(());
        }
    }

    /// The container-token master key an answer carried, unwrapped with the cluster secret
    /// (see [`MasterKey::open`]); remembered as the last known key.
    fn take_key(
        &mut self,
        key: Option<&MasterKey>,
    ) -> Result<spindle_common::token::ContainerKey, String> {
        let key = key
            .ok_or_else(|| "the ResourceManager sent no container-token master key".to_string())?;
        let k = key
            .open(self.cluster_secret.as_ref())
            .map_err(|e| e.to_string())?;
        self.key_id = Some(k.id());
        Ok(k)
    }

    /// A node-tracker call on the RM in use. Among HA RMs, no answer or a 503 (a standby
    /// that knows no active, an RM stopping) goes to the next RM after the policy's pause,
    /// and a standby's 307 to the RM it names (followed here: a redirect to another host
    /// would drop the signature), until the policy gives up; the caller's loop then goes
    /// on as with one RM. The new active answers an unknown node's heartbeat with RESYNC,
    /// and the NM registers again with its containers, as after an RM restart.
    async fn post<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        path: &str,
        body: &Req,
    ) -> Result<Resp, RmError> {
        let mut redirects = 0;
        loop {
            let base = self.rms.current().to_string();
            let err = match self.post_to(&base, path, body).await {
                Ok(r) => {
                    self.rms.succeeded();
                    return Ok(r);
                }
                Err(RmError::Redirect { location }) if redirects < MAX_REDIRECTS => {
                    redirects += 1;
                    let to = location
                        .parse::<reqwest::Url>()
                        .map(|u| u.origin().ascii_serialization())
                        .unwrap_or_default();
                    debug!(from = %base, to = %to, "a standby ResourceManager redirected");
                    self.rms.follow(&to);
                    continue;
                }
                Err(e) if self.rms.is_ha() && e.worth_failover() => e,
                Err(e) => return Err(e),
            };
            match self.rms.failed(&base) {
                Failover::Retry { address, pause } => {
                    info!(from = %base, to = %address, error = %err, "ResourceManager failover");
                    let mut stopping = self.stopping.clone();
                    tokio::select! {
                        _ = tokio::time::sleep(pause) => {}
                        _ = until_stopped(&mut stopping) => return Err(err),
                    }
                }
                Failover::GiveUp { .. } => return Err(err),
            }
        }
    }

    async fn post_to<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        base: &str,
        path: &str,
        body: &Req,
    ) -> Result<Resp, RmError> {
        let resp = signed_post(
            &self.client,
            base,
            path,
            &self.node_id,
            self.cluster_secret.as_ref(),
            body,
        )?
        .send()
        .await?;
        let status = resp.status();
        if status == reqwest::StatusCode::TEMPORARY_REDIRECT {
            if let Some(location) = resp
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
            {
                return Err(RmError::Redirect {
                    location: location.to_string(),
                });
            }
        }
        let bytes = resp.bytes().await?;
        if !status.is_success() {
            let body = String::from_utf8_lossy(&bytes[..bytes.len().min(500)]).into_owned();
            if status == reqwest::StatusCode::UNAUTHORIZED {
                return Err(RmError::Unauthenticated { body });
            }
            return Err(RmError::Status {
                status: status.as_u16(),
                body,
            });
        }
        Ok(serde_json::from_slice(&bytes)?)
    }
}

/// A POST of `body` as JSON to the RM's `path`, with the `SpindleNode` signature of exactly
/// those bytes when there is a cluster secret.
fn signed_post<Req: Serialize>(
    client: &reqwest::Client,
    rm_base: &str,
    path: &str,
    node_id: &NodeId,
    secret: Option<&ClusterSecret>,
    body: &Req,
) -> Result<reqwest::RequestBuilder, RmError> {
    let bytes = serde_json::to_vec(body)?;
    let mut req = client
        .post(format!("{rm_base}{path}"))
        .header(reqwest::header::CONTENT_TYPE, "application/json");
    if let Some(secret) = secret {
        let auth = secret.sign(
            "POST",
            path,
            &node_id.to_string(),
            &bytes,
            now_ms(),
            random_nonce()?,
        );
        req = req.header(reqwest::header::AUTHORIZATION, auth);
    }
    Ok(req.body(bytes))
}

/// The node-tracker client: short timeouts, and no redirect followed by itself (a standby's
/// 307 is followed by [`StatusUpdater::post`], signed again).
fn client_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .no_proxy()
        .connect_timeout(Duration::from_secs(2))
        .timeout(Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
}

/// Most redirects one call follows (a standby names the active; two standbys pointing at
/// each other must not loop).
const MAX_REDIRECTS: u32 = 3;

fn interval_of(ms: u64) -> Duration {
    Duration::from_millis(ms).max(MIN_HEARTBEAT)
}

/// Tells the RM this node is stopping for good, so it turns SHUTDOWN at once instead of LOST
/// after the liveness expiry (YARN's `unRegisterNodeManager`). Best effort: one short try.
#[tracing::instrument(skip_all, fields(node_id = %node_id))]
pub async fn unregister(
    rm_address: &str,
    node_id: &NodeId,
    secret: Option<&ClusterSecret>,
    tls: &ClientTls,
) {
    let builder = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(2));
    let Ok(client) = with_roots(builder, tls).and_then(|b| b.build()) else {
        return;
    };
    let req = spindle_common::records::tracker::UnRegisterNodeManagerRequest {
        node_id: node_id.clone(),
    };
    let base = tls.base_url(rm_address);
    let post = match signed_post(&client, &base, UNREGISTER_PATH, node_id, secret, &req) {
        Ok(p) => p,
        Err(e) => return warn!("unregister failed: {e}"),
    };
    match post.send().await {
        Ok(r) if r.status().is_success() => info!("unregistered from the ResourceManager"),
        Ok(r) if r.status() == reqwest::StatusCode::UNAUTHORIZED => warn!(
            "unregister refused: the ResourceManager refused this node's signature: check {}",
            spindle_common::config::keys::CLUSTER_SECRET_FILE
        ),
        Ok(r) => warn!(status = %r.status(), "unregister refused by the ResourceManager"),
        Err(e) => warn!("unregister failed: {e}"),
    }
}
