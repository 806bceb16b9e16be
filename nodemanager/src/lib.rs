//! Spindle's NodeManager: runs containers on one machine for the ResourceManager.
//!
//! It owns the node's containers from the start request to the RM's acknowledgement of their
//! completion: token checks, localization, the process group of each container with YARN's
//! environment and directory layout, stop (SIGTERM, then SIGKILL), exit statuses with YARN's
//! meanings, the register/heartbeat protocol to the RM, the NM REST API and container logs,
//! Prometheus metrics, and a recovery store so a restarted NM re-adopts running containers.
//!
//! It must not touch the scheduler or any application state beyond its own containers, must
//! not define wire records (they live in `spindle_common::records`; only the REST module and
//! the store's on-disk format derive serde here), and must never signal a process it did not
//! start. Limits are enforced by the executor: cgroups ([`cgroups`]) where the node has them,
//! else a process-tree memory watcher ([`isolation::proctree`]).
//! GPUs and FPGAs are discovered, assigned and released by the device plugins ([`plugins`]),
//! which tell the executor which device nodes each container may use.
//!
//! Shape: one actor ([`manager::Manager`]) owns the container table; HTTP handlers
//! ([`rest`]), the [`status_updater`], and per-container tasks talk to it by message.

pub mod cgroups;
pub mod config;
pub mod containers;
pub mod health;
pub mod image;
pub mod isolation;
pub mod launcher;
pub mod logs;
pub mod manager;
pub mod metrics;
pub mod node_labels;
pub mod oci;
pub mod plugins;
pub mod rest;
pub mod rest_auth;
pub mod retention;
pub mod runas;
pub mod status_updater;
pub mod store;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use spindle_common::ids::NodeId;
use spindle_common::resource::Resource;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch, Notify};
use tracing::{info, info_span, warn, Instrument};

pub use config::{NmConfig, NmConfigError};

use crate::containers::StopReason;
use crate::launcher::{ContainerExecutor, ProcessExecutor};
use crate::manager::{Manager, NmHandle, NodeContext};
use crate::plugins::Plugins;
use crate::rest::RestState;
use crate::status_updater::{RmError, StatusUpdater};
use crate::store::{Store, StoreError};

/// How long a stopping NM waits beyond the SIGKILL delay for its containers to end.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// How long in-flight HTTP requests get once the NM stops.
const SERVER_DRAIN: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum NmError {
    #[error("cannot read the listening address: {0}")]
    LocalAddr(std::io::Error),
    #[error("the NodeManager needs at least one local dir and one log dir")]
    NoDirs,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot create the ResourceManager client: {0}")]
    RmClient(#[from] RmError),
    #[error("the HTTP server failed: {0}")]
    Server(std::io::Error),
    #[error("containers are configured to run as {0} (LinuxContainerExecutor), which needs the NodeManager to run as root")]
    RunAsNeedsRoot(String),
    #[error("cannot open the image cache (spindle.nodemanager.runtime.oci.cache-dir): {0}")]
    Images(#[from] image::ImageError),
    #[error("cannot build the HTTP client that fetches remote local resources: {0}")]
    Fetcher(reqwest::Error),
}

/// Runs a NodeManager on `listener` until `shutdown` resolves or the RM says SHUTDOWN.
///
/// Its NodeId is `<conf.hostname>:<the listener's port>`, so tests bind port 0. On the way
/// out it stops every container (SIGTERM, SIGKILL after the configured delay) unless
/// recovery is enabled, in which case the containers keep running and the next NM started on
/// the same recovery dir re-adopts them.
pub async fn run(
    listener: TcpListener,
    conf: NmConfig,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), NmError> {
    // GPU/FPGA discovery (bounded by the discovery timeout; never fails the NM).
    let plugins = Plugins::from_config(&conf.plugins).await;
    // cgroups where the node has them, else the process-tree watcher (warns once).
    // Image containers go to the OCI runtime, whose leader the process executor runs.
    let first_local = conf
        .local_dirs
        .first()
        .map(PathBuf::as_path)
        .unwrap_or(Path::new("/"));
    // The image store, where the node allows image containers at all.
    let images = if conf.runtime.allows_images() {
        let store = image::ImageStore::open(conf.images.clone())?;
        Some(Arc::new(image::node::NodeImages::new(
            store,
            &conf.images.local_image_dirs,
            tokio::runtime::Handle::current(),
        )))
    } else {
        None
    };
    let source: Arc<dyn oci::ImageSource> = match &images {
        Some(i) => Arc::clone(i) as Arc<dyn oci::ImageSource>,
        None => Arc::new(oci::NoImages),
    };
    // RM blobs are fetched from the RMs this NM reports to (following the active under
    // HA, as heartbeats do), HTTP(S) URLs as they are, with the same TLS roots as heartbeats.
    let fetcher = launcher::fetch::Fetcher::new(
        conf.rm_addresses
            .iter()
            .map(|a| conf.http.client.base_url(a))
            .collect(),
        conf.rm_failover,
        &conf.http.client,
        tokio::runtime::Handle::current(),
    )
    .map_err(NmError::Fetcher)?;
    let executor = Arc::new(oci::OciExecutor::new(
        ProcessExecutor::for_node(&conf.isolation, first_local).with_fetcher(fetcher),
        conf.runtime.clone(),
        source,
        first_local,
    ));
    run_with_images(listener, conf, executor, plugins, images, shutdown).await
}

/// [`run`] with a chosen executor and resource plugins, and no image store.
pub async fn run_with(
    listener: TcpListener,
    conf: NmConfig,
    executor: Arc<dyn ContainerExecutor>,
    plugins: Plugins,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), NmError> {
    run_with_images(listener, conf, executor, plugins, None, shutdown).await
}

/// [`run_with`] with the node's image store (reported in heartbeats, prefetched into).
pub async fn run_with_images(
    listener: TcpListener,
    conf: NmConfig,
    executor: Arc<dyn ContainerExecutor>,
    plugins: Plugins,
    images: Option<Arc<image::node::NodeImages>>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), NmError> {
    let port = listener.local_addr().map_err(NmError::LocalAddr)?.port();
    let node_id = NodeId::new(conf.hostname.clone(), port);
    if conf.local_dirs.is_empty() || conf.log_dirs.is_empty() {
        return Err(NmError::NoDirs);
    }
    if conf.run_as.switches_user() && !nix::unistd::geteuid().is_root() {
        let who = match &conf.run_as {
            runas::RunAs::LocalUser(c) => format!("'{}'", c.user),
            _ => "their submitting users".to_string(),
        };
        return Err(NmError::RunAsNeedsRoot(who));
    }
    let span = info_span!("nodemanager", node_id = %node_id);
    serve(listener, conf, node_id, executor, plugins, images, shutdown)
        .instrument(span)
        .await
}

/// What the container manager knows about this node, from the configuration.
fn node_context(conf: &NmConfig, node_id: &NodeId, capacity: &Resource) -> NodeContext {
    let inherited_env: BTreeMap<String, String> = conf
        .env_whitelist
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.clone(), v)))
        .collect();
    NodeContext {
        node_id: node_id.clone(),
        local_dirs: conf.local_dirs.clone(),
        log_dirs: conf.log_dirs.clone(),
        conf_dir: conf.conf_dir.clone(),
        staging_root: conf.staging_root.clone(),
        inherited_env,
        sigkill_delay: conf.sigkill_delay,
        launch_hold_timeout: conf.launch_hold_timeout,
        run_as: conf.run_as.clone(),
        stderr_tail_bytes: conf.stderr_tail_bytes,
        capacity: capacity.clone(),
        isolation: conf.isolation.clone(),
    }
}

/// The NM is stopping: with recovery (and not told to go by the RM) its containers stay for
/// the next NM; else they are stopped and the node unregisters.
async fn leave_or_stop_containers(
    conf: &NmConfig,
    node_id: &NodeId,
    handle: &NmHandle,
    told_by_rm: bool,
) {
    if conf.recovery_enabled && !told_by_rm {
        info!("recovery enabled: leaving containers running for the next NodeManager");
        return;
    }
    info!("stopping all containers");
    let wait = conf.sigkill_delay + STOP_GRACE;
    if tokio::time::timeout(wait, handle.stop_all(StopReason::NodeShutdown))
        .await
        .is_err()
    {
        warn!("some containers did not end in time");
    }
    // Its containers are gone: the RM may mark the node SHUTDOWN now.
    status_updater::unregister(
        &conf.rm_address,
        node_id,
        conf.cluster_secret.as_ref(),
        &conf.http.client,
    )
    .await;
}

async fn serve(
    listener: TcpListener,
    conf: NmConfig,
    node_id: NodeId,
    executor: Arc<dyn ContainerExecutor>,
    plugins: Plugins,
    images: Option<Arc<image::node::NodeImages>>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), NmError> {
    let (store, records) = if conf.recovery_enabled {
        let (s, r) = Store::open(&conf.recovery_dir)?;
        info!(store = %s.path().display(), containers = r.len(), "recovery enabled");
        (Some(s), r)
    } else {
        (None, Vec::new())
    };
    let capacity = plugins.node_resource(&conf.resource);
    let attributes = plugins.node_attributes();
    let plugin_health = plugins.health_view();
    let ctx = node_context(&conf, &node_id, &capacity);
    // The cgroups of containers this NM will not re-adopt are stale: reclaim them first.
    let live: Vec<_> = records
        .iter()
        .filter(|r| r.completed.is_none() && r.process.is_some())
        .map(|r| r.container_id)
        .collect();
    let ex = Arc::clone(&executor);
    let _ = tokio::task::spawn_blocking(move || ex.reclaim(&live)).await;
    let final_executor = Arc::clone(&executor);

    let wake = Arc::new(Notify::new());
    let (stop_tx, stop_rx) = watch::channel(false);
    let (mut manager, handle) = Manager::new(
        ctx,
        executor,
        plugins,
        store,
        Arc::clone(&wake),
        stop_rx.clone(),
    );
    manager.recover(records);
    let manager_task = tokio::spawn(manager.run().in_current_span());
    // The health script and disk checks decide the heartbeat's `healthy`.
    let node_checks = health::spawn(
        conf.health.clone(),
        conf.local_dirs.clone(),
        conf.log_dirs.clone(),
        Arc::clone(&wake),
        stop_rx.clone(),
    );
    let plugin_health = plugin_health.with_node_checks(node_checks);
    retention::spawn(
        conf.log_dirs.clone(),
        conf.log_retain,
        handle.clone(),
        stop_rx.clone(),
    );

    // The node's partition and own attributes (fixed, or re-read from scripts).
    let descriptor =
        node_labels::spawn(conf.node_labels.clone(), Arc::clone(&wake), stop_rx.clone());

    let (rm_shutdown_tx, rm_shutdown_rx) = oneshot::channel();
    let updater = StatusUpdater::new(
        &conf.rm_addresses,
        node_id.clone(),
        capacity.clone(),
        handle.clone(),
        wake,
        stop_rx.clone(),
        rm_shutdown_tx,
    )?
    .with_health(plugin_health.clone())
    .with_attributes(attributes)
    .with_node_descriptor(descriptor)
    .with_cluster_secret(conf.cluster_secret.clone())
    .with_images(images)
    .with_failover(conf.rm_failover)
    .with_tls(&conf.http.client)?;
    let updater_task = tokio::spawn(updater.run().in_current_span());

    let app = rest::router(
        RestState::new(
            handle.clone(),
            node_id.clone(),
            capacity,
            conf.log_dirs.clone(),
        )
        .with_health(plugin_health)
        .with_rm_address(conf.http.client.base_url(&conf.rm_address))
        .with_scheme(conf.http.scheme()),
    );
    let mut server_stop = stop_rx.clone();
    let mut server = tokio::spawn(
        spindle_rest_edge::serve::serve(listener, app, conf.http.clone(), async move {
            manager::until_stopped(&mut server_stop).await;
        })
        .in_current_span(),
    );
    info!(rm = %conf.rm_address, "NodeManager started");

    let mut server_result = None;
    // The RM's SHUTDOWN (a decommissioned or refused node): it has already ended this node's
    // containers, so none is left running for a next NM, recovery or not (as YARN's NM
    // cleans up when decommissioned).
    let mut told_by_rm = false;
    tokio::select! {
        _ = shutdown => info!("NodeManager stopping"),
        r = rm_shutdown_rx => match r {
            Ok(()) => {
                info!("NodeManager stopping at the ResourceManager's request");
                told_by_rm = true;
            }
            Err(_) => warn!("the status updater ended unexpectedly; NodeManager stopping"),
        },
        r = &mut server => {
            warn!("the HTTP server ended unexpectedly; NodeManager stopping");
            server_result = Some(r);
        }
    }

    leave_or_stop_containers(&conf, &node_id, &handle, told_by_rm).await;
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(SERVER_DRAIN, updater_task).await;
    let server_result = match server_result {
        Some(r) => Some(r),
        None => match tokio::time::timeout(SERVER_DRAIN, &mut server).await {
            Ok(r) => Some(r),
            Err(_) => {
                server.abort();
                None
            }
        },
    };
    let _ = handle.shutdown().await;
    let _ = manager_task.await;
    let _ = tokio::task::spawn_blocking(move || final_executor.shutdown()).await;
    info!("NodeManager stopped");
    match server_result {
        Some(Ok(Err(e))) => Err(NmError::Server(e)),
        _ => Ok(()),
    }
}
