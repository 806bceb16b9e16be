//! Start-up and assembly: opens the state store, recovers, builds the core and the driver,
//! and serves the REST edge. The one module that names both the driver and `rest`.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use spindle_common::time::now_ms;
use spindle_common::token::ContainerKey;
use tokio::net::TcpListener;
use tracing::{info, warn};

use crate::blob_replicas::BlobReplicas;
use crate::blobs::{AppEnd, BlobStore};
use crate::config::capacity::{self, CsProps};
use crate::config::RmConfig;
use crate::core::queue_conf::SchedulerConf;
use crate::core::RmCore;
use crate::driver::{
    self, DriverHandle, DriverParts, LoopObserver, SchedConfState, WeakDriverHandle,
};
use crate::rest::{self, RmMetrics};
use crate::store::{Recovered, SchedConfSource, SqliteStore, StateStore};

/// A started RM, for tests and the binary.
pub struct RunningRm {
    pub addr: SocketAddr,
    pub handle: DriverHandle,
}

/// Starts the RM (HA or not, as [`start_serving`]) and serves on `listener` until
/// `shutdown` resolves.
pub async fn run(
    listener: TcpListener,
    conf: RmConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let addr = listener.local_addr().context("reading the bound address")?;
    let serve = start_serving(listener, conf).await?;
    info!("ResourceManager listening on http://{addr}");
    serve(Box::pin(shutdown)).await
}

pub type Serve = Box<
    dyn FnOnce(
            std::pin::Pin<Box<dyn Future<Output = ()> + Send>>,
        ) -> std::pin::Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send>>
        + Send,
>;

/// The driver's timings go to the REST edge's `/metrics`.
impl LoopObserver for RmMetrics {
    fn core_call(&self, call: &'static str, took: Duration) {
        self.observe_core_call(call, took);
    }

    fn gang_waits(&self, waits_ms: &[u64]) {
        self.observe_gang_waits(waits_ms);
    }
}

/// Starts the driver and returns the handle plus a closure that serves HTTP until shutdown
/// (one RM on the SQLite store; an HA RM starts through [`crate::failover::start`]).
pub async fn start(listener: TcpListener, conf: RmConfig) -> anyhow::Result<(RunningRm, Serve)> {
    let addr = listener.local_addr().context("reading the bound address")?;
    crate::config::warn_unknown_keys(&conf.unknown_keys);
    let store = SqliteStore::open(&conf.store_path)?;
    let conf = Arc::new(conf);
    let blobs = BlobParts::open(&conf)?;
    let (handle, router) = assemble(conf.clone(), addr, store, StoreKind::Sqlite, blobs)?;
    let http_conf = conf.http.clone();
    let serve: Serve = Box::new(move |shutdown| {
        Box::pin(async move {
            spindle_rest_edge::serve::serve(listener, router, http_conf, shutdown)
                .await
                .context("serving HTTP")
        })
    });
    Ok((RunningRm { addr, handle }, serve))
}

/// Starts either kind of RM (HA when `yarn.resourcemanager.ha.enabled`) and returns the
/// closure that serves HTTP until shutdown.
pub async fn start_serving(listener: TcpListener, conf: RmConfig) -> anyhow::Result<Serve> {
    if conf.ha.is_some() {
        crate::failover::start(listener, conf).await
    } else {
        Ok(start(listener, conf).await?.1)
    }
}

/// Which store the RM runs on, as `/ws/v1/cluster/info` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    Sqlite,
    /// The etcd store of an HA cluster (this RM is its active).
    Etcd,
}

/// The blob store, opened once per process (an HA RM receives other RMs' pushes while
/// standby and serves the same store when active), and the RMs it copies blobs to.
#[derive(Debug, Clone)]
pub struct BlobParts {
    pub store: Arc<BlobStore>,
    pub replicas: Option<Arc<BlobReplicas>>,
}

impl BlobParts {
    /// Opens `spindle.resourcemanager.blob-store.dir`; under HA with a cluster secret, the
    /// other RMs too, with the retry of failed pushes running (needs a Tokio runtime).
    pub fn open(conf: &RmConfig) -> anyhow::Result<Self> {
        let store =
            Arc::new(BlobStore::open(conf.blobs.clone()).with_context(|| {
                format!("opening the blob store in {}", conf.blobs.dir.display())
            })?);
        // No total timeout: a large file takes its time; a silent peer is cut by the read
        // timeout.
        let builder = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(3))
            .read_timeout(Duration::from_secs(30));
        let replicas = BlobReplicas::from_conf(conf, client_with_roots(conf, builder)?);
        if let Some(r) = &replicas {
            tokio::spawn(crate::blob_replicas::retry_loop(
                Arc::downgrade(r),
                store.clone(),
            ));
        }
        Ok(Self { store, replicas })
    }
}

/// Recovers from `store`, builds the core and the driver, and returns the driver's handle
/// and the REST router: what an RM serves while it is active. Blocks on the store: call it
/// off the async workers when the store is remote.
pub fn assemble(
    conf: Arc<RmConfig>,
    addr: SocketAddr,
    mut store: impl StateStore + 'static,
    kind: StoreKind,
    blob_parts: BlobParts,
) -> anyhow::Result<(DriverHandle, axum::Router)> {
    let (store_path, store_kind) = match (kind, &conf.ha) {
        (StoreKind::Etcd, Some(ha)) => (
            format!("etcd {} {}", ha.etcd.list(), ha.keys.prefix()),
            rest::StoreName::Etcd,
        ),
        _ => (
            conf.store_path.display().to_string(),
            rest::StoreName::Sqlite,
        ),
    };
    let recovered = store.recover()?;
    for s in &recovered.skipped {
        warn!("state store: skipped unreadable record: {s}");
    }
    let cluster_ts = now_ms();
    let (core, sched) = recovered_core(&conf, &store, &store_path, recovered, addr, cluster_ts)?;
    let metrics = Arc::new(RmMetrics::new());
    let blobs = blob_parts.store;
    let parts = DriverParts {
        core,
        store: Box::new(store),
        sched,
        http: nm_client(&conf)?,
        nm_scheme: conf.http.client.policy.scheme(),
        container_key_rolling: Duration::from_millis(conf.container_key_rolling_ms),
    };
    let handle = driver::spawn(parts, metrics.clone());
    tokio::spawn(clean_blobs(
        blobs.clone(),
        handle.downgrade(),
        metrics.clone(),
    ));
    let info = rest::RmInfo {
        cluster_ts,
        started_on: cluster_ts,
        cluster_id: conf.cluster_id.clone(),
        store_path,
        store_kind,
        conf,
        metrics,
        blobs,
        replicas: blob_parts.replicas,
    };
    let router = rest::router(handle.clone(), info);
    Ok((handle, router))
}

/// Every `cleaner-interval-ms`, removes the blobs whose applications ended a retention
/// period ago, as the driver's snapshot tells where each application stands; ends with the
/// driver.
async fn clean_blobs(blobs: Arc<BlobStore>, driver: WeakDriverHandle, metrics: Arc<RmMetrics>) {
    let mut every = tokio::time::interval(blobs.config().cleaner_interval);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let Some(handle) = driver.upgrade() else {
            return;
        };
        let snapshot = handle.snapshot().await;
        drop(handle);
        let store = blobs.clone();
        let swept = tokio::task::spawn_blocking(move || {
            store.sweep(now_ms(), |id| match snapshot.apps.get(id) {
                None => AppEnd::Unknown,
                Some(a) if a.state.is_final() => AppEnd::Ended(a.finish_time),
                Some(_) => AppEnd::Live,
            })
        })
        .await;
        match swept {
            Ok(Ok(removed)) if !removed.is_empty() => {
                metrics.blobs_removed(removed.len() as u64);
                info!(
                    count = removed.len(),
                    "blob store: removed blobs no application uses"
                );
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => warn!("blob store: the cleaner failed: {e}"),
            Err(e) => warn!("blob store: the cleaner task failed: {e}"),
        }
    }
}

/// The core as the state store left it: the scheduler configuration (the stored one when
/// the last change was a mutation), the labels, the host lists, the address AMs dial, and
/// the recovered applications; with the live scheduler configuration the driver keeps.
fn recovered_core(
    conf: &RmConfig,
    store: &impl StateStore,
    store_name: &str,
    recovered: Recovered,
    addr: SocketAddr,
    cluster_ts: u64,
) -> anyhow::Result<(RmCore, SchedConfState)> {
    let (version, stored) = stored_scheduler_conf(store, store_name, conf)?;
    let mut core_conf = conf.core.clone();
    if let Some((props, parsed)) = &stored {
        core_conf.scheduler = parsed.clone();
        info!(
            version,
            "capacity scheduler configured from the state store ({} properties set through scheduler-conf; capacity-scheduler.xml is not read until refreshQueues)",
            props.len()
        );
    }
    let sched = SchedConfState {
        version,
        props: stored
            .map(|(p, _)| p)
            .unwrap_or_else(|| conf.scheduler_props.clone()),
        site: conf.scheduler_site.clone(),
    };
    // The AM-RM key is the stored one (AM-RM tokens survive a restart); the container-token
    // master key is new at every start, never stored, and rolled by the driver.
    let first_key = ContainerKey::random_id()
        .and_then(ContainerKey::generate)
        .context("generating the container-token master key")?;
    let mut core = RmCore::with_container_key(
        core_conf,
        cluster_ts,
        recovered.epoch,
        recovered.secret,
        first_key,
    );
    let labels = store.labels()?;
    if !labels.cluster.is_empty() {
        info!(
            "node labels recovered from the state store: {}",
            labels.cluster.keys().cloned().collect::<Vec<_>>().join(",")
        );
    }
    core.set_labels(labels, cluster_ts);
    // Users' decayed usage is back before recovery charges any container.
    let fairshare = store.fairshare()?;
    if !fairshare.is_empty() {
        info!(
            "fair share: decayed usage of {} users (per leaf) recovered from the state store",
            fairshare.len()
        );
    }
    core.restore_fairshare(fairshare);
    // Excluded hosts are turned away from the first registration on.
    let hosts = conf.hosts.read().context(
        "reading the host files (yarn.resourcemanager.nodes.include-path / exclude-path)",
    )?;
    if !hosts.exclude.is_empty() || !hosts.include.is_empty() {
        info!(
            excluded = hosts.exclude.len(),
            included = hosts.include.len(),
            "host lists read"
        );
    }
    core.set_host_lists(hosts);
    // At start the labels may not have been added yet: a queue naming an unknown one is
    // told, not refused (a refresh or a scheduler-conf change refuses it).
    if let Err(e) = core.check_queue_labels(&core.conf().scheduler) {
        warn!("capacity scheduler: {e}; add the label with rmadmin -addToClusterNodeLabels (its capacity is unused until then)");
    }
    // What AMs dial: a wildcard bind is no address (see `spindle_common::net`).
    let host =
        spindle_common::net::advertised_host(conf.rm_hostname.as_deref(), &addr.ip().to_string());
    // Under HA the AM is given every RM, this one first, to fail over among.
    let scheme = conf.http.scheme();
    let mut rms = vec![format!("{scheme}://{host}:{}", addr.port())];
    if let Some(ha) = &conf.ha {
        rms.extend(
            ha.webapp
                .iter()
                .filter(|(id, _)| **id != ha.rm_id)
                .map(|(_, a)| format!("{scheme}://{a}")),
        );
    }
    core.set_rm_address(rms.join(","));
    let n = recovered.apps.len();
    for rec in recovered.apps {
        core.recover_app(rec, cluster_ts);
    }
    if n > 0 {
        info!(
            epoch = recovered.epoch,
            "recovered {n} applications from {store_name}"
        );
    }
    Ok((core, sched))
}

/// The HTTP client AM launches use. NMs under HTTPS_ONLY are trusted through the system
/// roots and `spindle.ssl.client.ca-file`.
fn nm_client(conf: &RmConfig) -> anyhow::Result<reqwest::Client> {
    let builder = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .connect_timeout(Duration::from_secs(3));
    client_with_roots(conf, builder)
}

/// `http` trusting `spindle.ssl.client.ca-file`, built.
fn client_with_roots(
    conf: &RmConfig,
    mut http: reqwest::ClientBuilder,
) -> anyhow::Result<reqwest::Client> {
    if let Some((file, pem)) = &conf.http.client.ca {
        for cert in reqwest::Certificate::from_pem_bundle(pem)
            .with_context(|| format!("reading the CA certificates in {}", file.display()))?
        {
            http = http.add_root_certificate(cert);
        }
    }
    http.build().context("building the HTTP client")
}

/// The configuration version, and the stored property set with its parsed tree when the
/// last applied change was a mutation (which then wins over `capacity-scheduler.xml`, as
/// YARN's mutable configuration stores do). A stored set that no longer validates (say,
/// yarn-site.xml lowered the maximum allocation) stops the RM with an error naming it,
/// rather than silently running a different tree.
#[allow(clippy::type_complexity)]
fn stored_scheduler_conf(
    store: &impl StateStore,
    store_name: &str,
    conf: &RmConfig,
) -> anyhow::Result<(u64, Option<(CsProps, SchedulerConf)>)> {
    let Some(stored) = store.latest_sched_conf()? else {
        return Ok((0, None));
    };
    if stored.source != SchedConfSource::Mutation {
        return Ok((stored.version, None));
    }
    let origin = format!("{store_name} (scheduler-conf version {})", stored.version);
    let props = CsProps::from_pairs(stored.props, Some(&origin));
    let parsed = capacity::parse_props(&props, &conf.scheduler_site).map_err(|e| {
        anyhow::anyhow!(
            "the capacity-scheduler configuration stored by PUT /ws/v1/cluster/scheduler-conf (version {}, by {}) is refused: {e}",
            stored.version,
            stored.user
        )
    })?;
    Ok((stored.version, Some((props, parsed))))
}
