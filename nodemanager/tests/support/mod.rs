//! Test harness: a fake ResourceManager at the network boundary and an in-process NM.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use spindle_common::config::{keys, Configuration};
use spindle_common::ids::{ApplicationAttemptId, ApplicationId, ContainerId, NodeId};
use spindle_common::records::node::{
    ContainerLaunchContext, LaunchHold, ReleaseContainersRequest, ReleaseContainersResponse,
    StartContainerRequest, StartContainersRequest, StartContainersResponse, StopContainersRequest,
    StopContainersResponse,
};
use spindle_common::records::resource::ResourceInfo;
use spindle_common::records::tracker::{
    MasterKey, NmContainerReport, NodeAction, NodeHeartbeatRequest, NodeHeartbeatResponse,
    RegisterNodeManagerRequest, RegisterNodeManagerResponse,
};
use spindle_common::resource::Resource;
use spindle_common::states::ContainerState;
use spindle_common::time::now_ms;
use spindle_common::token::{
    issue_container_token, unverified_container_identifier, ContainerKey, ContainerTokenIdentifier,
};
use spindle_nodemanager::{NmConfig, NmError};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub(crate) mod cgroups;

pub(crate) const WAIT: Duration = Duration::from_secs(15);

#[derive(Default)]
pub(crate) struct RmState {
    pub registrations: Vec<RegisterNodeManagerRequest>,
    pub heartbeats: Vec<NodeHeartbeatRequest>,
    pub containers_to_cleanup: Vec<ContainerId>,
    pub applications_to_cleanup: Vec<ApplicationId>,
    /// Acknowledge completed containers (containersToBeRemovedFromNm) once seen.
    pub ack_completed: bool,
    /// Answer the next heartbeat with this action.
    pub next_action: Option<NodeAction>,
    /// Refuse every report's node labels with this diagnostics message.
    pub refuse_labels: Option<String>,
    /// Send this container-token master key in the next heartbeat answer (a roll).
    pub roll_key: Option<ContainerKey>,
}

/// A ResourceManager that answers register/heartbeat and records what it was told.
pub(crate) struct FakeRm {
    pub addr: SocketAddr,
    /// The container-token master key the fake RM signs with and sends (unwrapped: the
    /// test NMs run without a cluster secret).
    pub key: ContainerKey,
    pub state: Arc<Mutex<RmState>>,
    task: JoinHandle<()>,
}

#[derive(Clone)]
struct RmShared {
    key: ContainerKey,
    state: Arc<Mutex<RmState>>,
}

/// Each fake RM's key by its address, so a [`TestNm`] pointed at it can act as the
/// application master that holds the containers' tokens (see [`TestNm::bearer`]).
static RM_KEYS: Mutex<BTreeMap<String, ContainerKey>> = Mutex::new(BTreeMap::new());

fn plain_master_key(k: &ContainerKey) -> MasterKey {
    MasterKey {
        key_id: k.id(),
        wrapped_key: None,
        bytes: Some(hex::encode(k.bytes())),
        unwrapped: true,
    }
}

async fn register(
    State(s): State<RmShared>,
    Json(req): Json<RegisterNodeManagerRequest>,
) -> Json<RegisterNodeManagerResponse> {
    let mut st = s.state.lock().unwrap();
    st.registrations.push(req);
    Json(RegisterNodeManagerResponse {
        node_action: NodeAction::NORMAL,
        rm_identifier: 1,
        container_token_master_key: Some(plain_master_key(&s.key)),
        heartbeat_interval_ms: 100,
        diagnostics_message: st.refuse_labels.clone().unwrap_or_default(),
        rm_version: "fake".into(),
        are_node_labels_accepted_by_rm: st.refuse_labels.is_none(),
        are_node_attributes_accepted_by_rm: true,
    })
}

async fn heartbeat(
    State(s): State<RmShared>,
    Json(req): Json<NodeHeartbeatRequest>,
) -> Json<NodeHeartbeatResponse> {
    let mut st = s.state.lock().unwrap();
    let removed = if st.ack_completed {
        req.node_status
            .containers_statuses
            .iter()
            .filter(|r| r.status.state == ContainerState::COMPLETE)
            .map(|r| r.status.container_id)
            .collect()
    } else {
        Vec::new()
    };
    let response_id = req.response_id + 1;
    st.heartbeats.push(req);
    Json(NodeHeartbeatResponse {
        response_id,
        node_action: st.next_action.take().unwrap_or(NodeAction::NORMAL),
        containers_to_cleanup: std::mem::take(&mut st.containers_to_cleanup),
        applications_to_cleanup: std::mem::take(&mut st.applications_to_cleanup),
        containers_to_be_removed_from_nm: removed,
        next_heartbeat_interval_ms: 100,
        container_token_master_key: st.roll_key.take().map(|k| plain_master_key(&k)),
        diagnostics_message: st.refuse_labels.clone().unwrap_or_default(),
        are_node_labels_accepted_by_rm: st.refuse_labels.is_none(),
        are_node_attributes_accepted_by_rm: true,
        images_to_prefetch: Vec::new(),
    })
}

impl FakeRm {
    pub(crate) async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        Self::start_on(listener)
    }

    pub(crate) fn start_on(listener: TcpListener) -> Self {
        let addr = listener.local_addr().unwrap();
        let key = ContainerKey::generate(ContainerKey::random_id().unwrap()).unwrap();
        RM_KEYS
            .lock()
            .unwrap()
            .insert(addr.to_string(), key.clone());
        let state = Arc::new(Mutex::new(RmState::default()));
        let app = Router::new()
            .route("/ws/v1/node-tracker/register", post(register))
            .route("/ws/v1/node-tracker/heartbeat", post(heartbeat))
            .with_state(RmShared {
                key: key.clone(),
                state: Arc::clone(&state),
            });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            addr,
            key,
            state,
            task,
        }
    }

    pub(crate) fn registrations(&self) -> usize {
        self.state.lock().unwrap().registrations.len()
    }

    /// The latest report of a container in any heartbeat.
    pub(crate) fn last_report(&self, id: &ContainerId) -> Option<NmContainerReport> {
        let st = self.state.lock().unwrap();
        st.heartbeats
            .iter()
            .rev()
            .flat_map(|h| h.node_status.containers_statuses.iter())
            .find(|r| r.status.container_id == *id)
            .cloned()
    }

    pub(crate) async fn wait_registered(&self, n: usize) {
        wait_until("NM registration", || {
            (self.registrations() >= n).then_some(())
        })
        .await;
    }

    pub(crate) async fn wait_state(
        &self,
        id: &ContainerId,
        state: ContainerState,
    ) -> NmContainerReport {
        wait_until(&format!("{id} reported {state}"), || {
            self.last_report(id).filter(|r| r.status.state == state)
        })
        .await
    }

    pub(crate) fn token(&self, ident: &ContainerTokenIdentifier) -> String {
        issue_container_token(&self.key, ident)
    }
}

impl Drop for FakeRm {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Polls `f` every 25 ms until it yields, panicking after [`WAIT`].
pub(crate) async fn wait_until<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// An NM running in this process.
pub(crate) struct TestNm {
    pub addr: SocketAddr,
    pub node_id: NodeId,
    pub base: String,
    pub dirs: PathBuf,
    pub http: reqwest::Client,
    /// The fake RM's key, when this NM talks to one: the harness signs the bearer tokens of
    /// the calls that act on containers with it, as the containers' AM would hold them.
    pub rm_key: Option<ContainerKey>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), NmError>>>,
}

pub(crate) fn nm_config(dirs: &Path, rm: SocketAddr, recovery: bool) -> NmConfig {
    nm_config_with(dirs, rm, recovery, &[])
}

/// [`nm_config`] with more properties set.
pub(crate) fn nm_config_with(
    dirs: &Path,
    rm: SocketAddr,
    recovery: bool,
    extra: &[(&str, &str)],
) -> NmConfig {
    let mut c = Configuration::new();
    c.set(keys::NM_WEBAPP_ADDRESS, "127.0.0.1:0");
    c.set(keys::RM_WEBAPP_ADDRESS, &rm.to_string());
    c.set(
        keys::NM_LOCAL_DIRS,
        &dirs.join("local").display().to_string(),
    );
    c.set(keys::NM_LOG_DIRS, &dirs.join("logs").display().to_string());
    c.set(
        keys::NM_RECOVERY_DIR,
        &dirs.join("recovery").display().to_string(),
    );
    c.set(
        spindle_nodemanager::config::NM_RECOVERY_ENABLED,
        if recovery { "true" } else { "false" },
    );
    c.set(keys::NM_SLEEP_DELAY_BEFORE_SIGKILL_MS, "250");
    c.set(keys::NM_RESOURCE_MEMORY_MB, "4096");
    c.set(keys::NM_RESOURCE_CPU_VCORES, "4");
    // Tests must not depend on how full the host's disk is.
    c.set(
        spindle_nodemanager::config::NM_DISK_CHECKER_MAX_UTILIZATION,
        "100",
    );
    for (k, v) in extra {
        c.set(k, v);
    }
    NmConfig::from_configuration(&c, &dirs.join("conf")).unwrap()
}

impl TestNm {
    pub(crate) async fn start(dirs: &Path, rm: SocketAddr, recovery: bool) -> Self {
        Self::start_with(dirs, nm_config(dirs, rm, recovery)).await
    }

    pub(crate) async fn start_with(dirs: &Path, conf: NmConfig) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let rm_key = RM_KEYS.lock().unwrap().get(&conf.rm_address).cloned();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(spindle_nodemanager::run(listener, conf, async move {
            let _ = rx.await;
        }));
        Self {
            addr,
            node_id: NodeId::new("127.0.0.1", addr.port()),
            base: format!("http://{addr}"),
            dirs: dirs.to_path_buf(),
            http: reqwest::Client::builder().no_proxy().build().unwrap(),
            rm_key,
            stop: Some(tx),
            task: Some(task),
        }
    }

    /// Signals shutdown and waits for `run` to return.
    pub(crate) async fn stop(&mut self) -> Result<(), NmError> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        self.join().await
    }

    /// Waits for `run` to return by itself.
    pub(crate) async fn join(&mut self) -> Result<(), NmError> {
        let task = self.task.take().expect("joined twice");
        tokio::time::timeout(Duration::from_secs(20), task)
            .await
            .expect("NM did not stop in time")
            .expect("NM task panicked")
    }

    pub(crate) fn ident(&self, id: ContainerId, user: &str) -> ContainerTokenIdentifier {
        ContainerTokenIdentifier {
            container_id: id,
            node_id: self.node_id.clone(),
            app_submitter: user.to_string(),
            resource: ResourceInfo::from(&Resource::new(512, 1)),
            expiry_time_ms: now_ms() + 600_000,
            rm_identifier: 1,
            is_am: false,
            version: 0,
            master_key_id: 0,
        }
    }

    /// POSTs `body` as JSON to `path`; asserts 200 and decodes the answer.
    async fn post_ok<R: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        body: &impl serde::Serialize,
    ) -> R {
        let (status, v) = self
            .post_json(path, &serde_json::to_value(body).unwrap())
            .await;
        assert_eq!(status, 200, "{path}: {v}");
        serde_json::from_value(v).unwrap()
    }

    pub(crate) async fn start_containers(
        &self,
        reqs: Vec<StartContainerRequest>,
    ) -> StartContainersResponse {
        let body = StartContainersRequest {
            start_container_request: reqs,
            hold: None,
        };
        self.post_ok("/ws/v1/node/containers/start", &body).await
    }

    /// A held start (a gang launch): answers once every container is held or failed.
    /// `timeout_ms` None: the NM's default hold timeout.
    pub(crate) async fn start_containers_held(
        &self,
        reqs: Vec<StartContainerRequest>,
        timeout_ms: Option<u64>,
    ) -> StartContainersResponse {
        let body = StartContainersRequest {
            start_container_request: reqs,
            hold: Some(LaunchHold { timeout_ms }),
        };
        self.post_ok("/ws/v1/node/containers/start", &body).await
    }

    /// Lets held containers run.
    pub(crate) async fn release_containers(
        &self,
        ids: Vec<ContainerId>,
    ) -> ReleaseContainersResponse {
        let body = ReleaseContainersRequest { container_ids: ids };
        self.post_ok("/ws/v1/node/containers/release", &body).await
    }

    /// `Authorization: Bearer` with a container token of `id`'s application, signed by the
    /// fake RM's key: what the container's AM would send.
    pub(crate) fn bearer(&self, id: ContainerId) -> Option<String> {
        let key = self.rm_key.as_ref()?;
        Some(format!(
            "Bearer {}",
            issue_container_token(key, &self.ident(id, "u"))
        ))
    }

    /// The bearer a container call's body needs: of the first container it names (its
    /// `containerIds`, `containerId` or first update token), else of any application (a call
    /// naming nothing).
    fn bearer_for_body(&self, path: &str, body: &serde_json::Value) -> Option<String> {
        const CALLS: [&str; 5] = ["stop", "release", "signal", "reinitialize", "update"];
        let call = path.strip_prefix("/ws/v1/node/containers/")?;
        if !CALLS.contains(&call) {
            return None;
        }
        let named = body["containerIds"][0]
            .as_str()
            .or(body["containerId"].as_str())
            .and_then(|s| s.parse::<ContainerId>().ok())
            .or_else(|| {
                body["containersToUpdate"][0]
                    .as_str()
                    .and_then(|t| unverified_container_identifier(t).ok())
                    .map(|i| i.container_id)
            });
        let id = named.unwrap_or_else(|| {
            ContainerId::new(
                ApplicationAttemptId::new(ApplicationId::new(1, 999), 1),
                0,
                1,
            )
        });
        self.bearer(id)
    }

    /// POSTs a raw JSON body; answers the status and the body as JSON. A call acting on
    /// containers carries the bearer token their AM would send ([`Self::bearer`]).
    pub(crate) async fn post_json(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> (u16, serde_json::Value) {
        let auth = self.bearer_for_body(path, body);
        self.post_json_as(path, body, auth.as_deref()).await
    }

    /// POSTs a raw JSON body with this `Authorization` header (none: without one).
    pub(crate) async fn post_json_as(
        &self,
        path: &str,
        body: &serde_json::Value,
        auth: Option<&str>,
    ) -> (u16, serde_json::Value) {
        let mut req = self.http.post(format!("{}{path}", self.base)).json(body);
        if let Some(a) = auth {
            req = req.header("Authorization", a);
        }
        let r = req.send().await.unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        let v = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}: {text}"));
        (status, v)
    }

    /// Starts one container of `user` running `command`; asserts it was accepted.
    pub(crate) async fn run_container(
        &self,
        rm: &FakeRm,
        id: ContainerId,
        user: &str,
        command: &str,
    ) {
        self.run_container_with(rm, id, user, command, BTreeMap::new())
            .await;
    }

    pub(crate) async fn run_container_with(
        &self,
        rm: &FakeRm,
        id: ContainerId,
        user: &str,
        command: &str,
        env: BTreeMap<String, String>,
    ) {
        let resp = self
            .start_containers(vec![StartContainerRequest {
                container_token: rm.token(&self.ident(id, user)),
                container_launch_context: ContainerLaunchContext {
                    commands: vec![command.to_string()],
                    environment: env,
                    local_resources: BTreeMap::new(),
                },
            }])
            .await;
        assert_eq!(resp.successfully_started_containers, vec![id], "{resp:?}");
    }

    pub(crate) async fn stop_containers(&self, ids: Vec<ContainerId>) -> StopContainersResponse {
        let body = StopContainersRequest { container_ids: ids };
        self.post_ok("/ws/v1/node/containers/stop", &body).await
    }

    pub(crate) async fn get(&self, path: &str) -> (u16, String) {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.text().await.unwrap())
    }

    pub(crate) async fn get_json(&self, path: &str) -> (u16, serde_json::Value) {
        let (s, body) = self.get(path).await;
        let v = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"));
        (s, v)
    }

    pub(crate) fn work_dir(&self, user: &str, id: &ContainerId) -> PathBuf {
        self.dirs
            .join("local/usercache")
            .join(user)
            .join("appcache")
            .join(id.application_id().to_string())
            .join(id.to_string())
    }

    pub(crate) fn log_dir(&self, id: &ContainerId) -> PathBuf {
        self.dirs
            .join("logs")
            .join(id.application_id().to_string())
            .join(id.to_string())
    }
}

impl Drop for TestNm {
    fn drop(&mut self) {
        // A test that failed midway: stop the NM, which stops its containers (no recovery)
        // or leaves them (recovery); tests with recovery kill their own leftovers.
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

pub(crate) fn cid(app: u32, seq: u64) -> ContainerId {
    ContainerId::new(
        ApplicationAttemptId::new(ApplicationId::new(1_700_000_000_000, app), 1),
        0,
        seq,
    )
}

/// Reads a file the container writes, once it exists and is non-empty.
pub(crate) async fn read_when_written(path: &Path) -> String {
    wait_until(&format!("{} to be written", path.display()), || {
        std::fs::read_to_string(path)
            .ok()
            .filter(|s| s.ends_with('\n'))
    })
    .await
}

/// True if some non-zombie process is in process group `pgid` (scans /proc).
pub(crate) fn group_has_live_members(pgid: i32) -> bool {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return false;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        // fields[0] = state, fields[2] = pgrp
        if fields.len() > 2 && fields[2] == pgid.to_string() && fields[0] != "Z" && fields[0] != "X"
        {
            return true;
        }
    }
    false
}

/// Kills a process group the test knows about (cleanup after recovery tests).
pub(crate) fn kill_group(pgid: i32) {
    if pgid > 1 {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pgid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}
