//! Shipped files survive a failover: the active HA RM copies every blob it stores, and every
//! use of one an application claims, to the other RMs of `yarn.resourcemanager.ha.rm-ids`
//! before it answers the client, so whichever RM becomes active next holds the bytes and the
//! records an NM's localizer download is checked against.
//!
//! A push is the client's own protocol, RM to RM (`rest::blob_replicas` receives it): first
//! `PUT /ws/v1/ha/blobs/{digest}/apps/{appid}?user=U` (the peer records the use when it
//! holds the bytes, 200, else 404), then, on a 404, `PUT /ws/v1/ha/blobs/{digest}?
//! applicationId=A&user=U` streaming the file (the peer checks the digest, syncs and renames
//! it, as for an upload). Every push is signed with the cluster secret
//! (`spindle.cluster.secret-file`) as node-tracker calls are, by this RM's id over the path
//! and query (the body is bound by the digest the path names); without a secret nothing is
//! replicated (the RM warns at start) and peers refuse pushes.
//!
//! A peer that does not answer (down, restarting, cut off) never fails the upload: the push
//! is logged and kept in a bounded queue that is retried every [`RETRY_EVERY`] while this RM
//! runs, so a standby that comes back catches up. Until it has, a failover to it loses the
//! files of the pushes it missed (their containers fail localizing with a named 404).
//!
//! Must not: decide who may use a blob (the blob store and the REST edge do).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use spindle_common::cluster_secret::{random_nonce, ClusterSecret};
use spindle_common::config::keys;
use spindle_common::image_ref::Digest;
use spindle_common::ApplicationId;
use tracing::{info, warn};

use crate::blobs::{BlobError, BlobStore};
use crate::config::RmConfig;

/// The paths the peers receive on (`rest::blob_replicas`).
pub const PEER_BLOBS_PATH: &str = "/ws/v1/ha/blobs";
/// How often the pushes that failed are tried again.
pub const RETRY_EVERY: Duration = Duration::from_secs(5);
/// The most failed pushes kept for a retry; older ones are dropped (and logged).
pub const MAX_PENDING: usize = 10_000;

/// One blob use to copy: the digest, the user who uploaded or claimed it, the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobUse {
    pub digest: Digest,
    pub user: String,
    pub app: ApplicationId,
}

/// Why a push to one peer failed: one variant per reason.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    #[error("ResourceManager {peer} ({url}) did not answer: {detail}")]
    Unreachable {
        peer: String,
        url: String,
        detail: String,
    },
    #[error("ResourceManager {peer} ({url}) answered {status}: {body}")]
    Refused {
        peer: String,
        url: String,
        status: u16,
        body: String,
    },
    #[error("cannot read the blob to push: {0}")]
    Blob(#[from] BlobError),
    #[error("cannot sign the push: {0}")]
    Sign(#[from] spindle_common::cluster_secret::ClusterSecretError),
}

/// Another RM of the cluster.
#[derive(Debug, Clone)]
struct Peer {
    id: String,
    /// `http(s)://host:port`.
    base: String,
}

/// A push that failed, for the retry.
#[derive(Debug, Clone)]
struct Pending {
    peer: usize,
    blob: BlobUse,
}

/// The other RMs and how to reach them (see the module doc).
pub struct BlobReplicas {
    rm_id: String,
    peers: Vec<Peer>,
    secret: ClusterSecret,
    http: reqwest::Client,
    pending: Mutex<VecDeque<Pending>>,
}

impl std::fmt::Debug for BlobReplicas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<&str> = self.peers.iter().map(|p| p.id.as_str()).collect();
        write!(f, "BlobReplicas({} -> {ids:?})", self.rm_id)
    }
}

impl BlobReplicas {
    /// The replicas of an HA RM with a cluster secret; None (with a warning when HA is on)
    /// otherwise.
    pub fn from_conf(conf: &RmConfig, http: reqwest::Client) -> Option<Arc<Self>> {
        let ha = conf.ha.as_ref()?;
        let Some(secret) = conf.cluster_secret.clone() else {
            warn!(
                "HA: shipped files are not copied to the other ResourceManagers ({} is unset, and pushes between RMs are signed with it): after a failover the new active lacks them",
                keys::CLUSTER_SECRET_FILE
            );
            return None;
        };
        let scheme = conf.http.scheme();
        let peers = ha
            .rm_ids
            .iter()
            .filter(|id| **id != ha.rm_id)
            .filter_map(|id| {
                ha.webapp.get(id).map(|a| Peer {
                    id: id.clone(),
                    base: format!("{scheme}://{a}"),
                })
            })
            .collect();
        Some(Arc::new(Self {
            rm_id: ha.rm_id.clone(),
            peers,
            secret,
            http,
            pending: Mutex::new(VecDeque::new()),
        }))
    }

    /// How many pushes wait for a retry.
    pub fn pending(&self) -> usize {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Copies `blob` to every peer at once; a peer that fails is logged and queued for the
    /// retry. Returns the peers that hold it now and those that failed, by id.
    pub async fn replicate(&self, store: &BlobStore, blob: &BlobUse) -> (Vec<String>, Vec<String>) {
        let pushes = self
            .peers
            .iter()
            .map(|p| async move { (p, self.push(store, p, blob).await) });
        let mut done = (Vec::new(), Vec::new());
        for (i, (peer, r)) in futures::future::join_all(pushes)
            .await
            .into_iter()
            .enumerate()
        {
            match r {
                Ok(()) => done.0.push(peer.id.clone()),
                Err(e) => {
                    warn!(digest = %blob.digest, app = %blob.app, error = %e, "blob store: a shipped file is not yet on ResourceManager {}; retried every {} s", peer.id, RETRY_EVERY.as_secs());
                    self.queue(Pending {
                        peer: i,
                        blob: blob.clone(),
                    });
                    done.1.push(peer.id.clone());
                }
            }
        }
        done
    }

    fn queue(&self, p: Pending) {
        let mut q = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        if q.len() >= MAX_PENDING {
            if let Some(old) = q.pop_front() {
                warn!(digest = %old.blob.digest, "blob store: too many pushes to other ResourceManagers wait; this one is given up");
            }
        }
        q.push_back(p);
    }

    /// Tries every queued push once; the ones that fail again stay queued.
    pub async fn retry(&self, store: &BlobStore) {
        let batch: Vec<Pending> = {
            let mut q = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            q.drain(..).collect()
        };
        let mut caught_up = 0usize;
        for p in batch {
            let Some(peer) = self.peers.get(p.peer) else {
                continue;
            };
            match self.push(store, peer, &p.blob).await {
                Ok(()) => caught_up += 1,
                // A blob the cleaner removed meanwhile needs no copy.
                Err(ReplicaError::Blob(BlobError::NotFound(_))) => {}
                Err(_) => self.queue(p),
            }
        }
        if caught_up > 0 {
            info!(
                count = caught_up,
                "blob store: shipped files copied to other ResourceManagers after a retry"
            );
        }
    }

    /// The signed `PUT` of `path_and_query` to `peer`.
    fn put(
        &self,
        peer: &Peer,
        path_and_query: &str,
    ) -> Result<reqwest::RequestBuilder, ReplicaError> {
        let now = spindle_common::time::now_ms();
        let auth = self.secret.sign(
            "PUT",
            path_and_query,
            &self.rm_id,
            b"",
            now,
            random_nonce()?,
        );
        Ok(self
            .http
            .put(format!("{}{path_and_query}", peer.base))
            .header(reqwest::header::AUTHORIZATION, auth))
    }

    /// Claims the use on `peer`; when it lacks the bytes, sends them.
    async fn push(
        &self,
        store: &BlobStore,
        peer: &Peer,
        blob: &BlobUse,
    ) -> Result<(), ReplicaError> {
        let user = crate::rest::form_encode(&blob.user);
        let claim = format!(
            "{PEER_BLOBS_PATH}/{}/apps/{}?user={user}",
            blob.digest, blob.app
        );
        let resp = self.send(peer, self.put(peer, &claim)?).await?;
        if resp.status().is_success() {
            return Ok(());
        }
        if resp.status() != reqwest::StatusCode::NOT_FOUND {
            return Err(refused(peer, resp).await);
        }
        let (file, len) = store.open_blob(&blob.digest)?;
        let upload = format!(
            "{PEER_BLOBS_PATH}/{}?applicationId={}&user={user}",
            blob.digest, blob.app
        );
        let body = reqwest::Body::wrap_stream(crate::blobs::read_chunks(file));
        let req = self
            .put(peer, &upload)?
            .header(reqwest::header::CONTENT_LENGTH, len)
            .body(body);
        let resp = self.send(peer, req).await?;
        if resp.status().is_success() {
            Ok(())
        } else {
            Err(refused(peer, resp).await)
        }
    }

    async fn send(
        &self,
        peer: &Peer,
        req: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, ReplicaError> {
        req.send().await.map_err(|e| ReplicaError::Unreachable {
            peer: peer.id.clone(),
            url: peer.base.clone(),
            detail: format!("{:#}", anyhow::Error::new(e)),
        })
    }
}

async fn refused(peer: &Peer, resp: reqwest::Response) -> ReplicaError {
    let status = resp.status().as_u16();
    let body = resp.text().await.unwrap_or_default();
    ReplicaError::Refused {
        peer: peer.id.clone(),
        url: peer.base.clone(),
        status,
        body: body.chars().take(300).collect(),
    }
}

/// Retries the failed pushes every [`RETRY_EVERY`] until `replicas` is dropped elsewhere.
pub async fn retry_loop(replicas: std::sync::Weak<BlobReplicas>, store: Arc<BlobStore>) {
    let mut every = tokio::time::interval(RETRY_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let Some(r) = replicas.upgrade() else { return };
        if r.pending() > 0 {
            r.retry(&store).await;
        }
    }
}

#[cfg(test)]
mod tests;
