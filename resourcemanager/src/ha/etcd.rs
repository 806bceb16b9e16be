//! Leader election on etcd: the winner is whoever creates `/spindle/<cluster-id>/leader` (a
//! transaction that puts it only if its `CreateRevision` is 0, i.e. it does not exist),
//! bound to a lease the winner renews every third of its length. The key's creation revision
//! is the term's fencing token. A standby watches the key and campaigns again when it is
//! deleted (its holder resigned, or its lease expired), and at least once per lease length.
//!
//! The leadership is lost, and its [`FenceAlarm`] raised, when the lease was not renewed
//! within its length as measured from the send time of the last acknowledged renewal
//! (conservative: the server's lease started no earlier), when etcd answers that the lease
//! is gone, or when the key is deleted or replaced.

use std::any::Any;
use std::time::{Duration, Instant};

use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, EventType, PutOptions, Txn, TxnOp, TxnOpResponse,
    WatchOptions,
};
use tokio::sync::watch;
use tracing::{info, warn};

use super::{ElectionError, EtcdKeys, FenceAlarm, LeaderElector, Leadership, LostBecause, Term};

/// Where etcd is and how long a leadership lease lasts (`spindle.ha.etcd.endpoints`,
/// `spindle.ha.etcd.lease-ms`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdEndpoints {
    /// Client URLs, e.g. `http://10.0.0.1:2379`.
    pub urls: Vec<String>,
    /// The lease length: how long an active that stopped renewing stays active.
    pub lease: Duration,
}

impl EtcdEndpoints {
    /// The URLs comma-separated (for messages).
    pub fn list(&self) -> String {
        self.urls.join(",")
    }

    /// The lease TTL in whole seconds, at least 1 (etcd's granularity; etcd raises a TTL
    /// below its own minimum, about 2 s with default timings).
    pub fn ttl_secs(&self) -> i64 {
        i64::try_from(self.lease.as_millis().div_ceil(1000))
            .unwrap_or(i64::MAX)
            .max(1)
    }

    /// How long one unary call may take before it counts as failed: the lease length, at
    /// least one second.
    pub fn call_timeout(&self) -> Duration {
        self.lease.max(Duration::from_secs(1))
    }

    /// A client of these endpoints (connect timeout bounded; no per-request deadline, which
    /// would end the renewal and watch streams: unary calls are bounded by the caller).
    pub async fn connect(&self) -> Result<Client, etcd_client::Error> {
        let opts = ConnectOptions::new()
            .with_connect_timeout(self.call_timeout())
            .with_keep_alive(Duration::from_secs(2), self.call_timeout())
            .with_keep_alive_while_idle(true);
        Client::connect(&self.urls, Some(opts)).await
    }
}

/// The etcd elector of one RM.
pub struct EtcdElector {
    client: Client,
    keys: EtcdKeys,
    rm_id: String,
    endpoints: EtcdEndpoints,
}

/// What keeps an etcd leadership: the lease and the task renewing it (stopped when the
/// leadership is dropped; the lease then expires).
struct EtcdHold {
    lease: i64,
    /// The renewal and the watch on the election key.
    tasks: [tokio::task::JoinHandle<()>; 2],
}

impl Drop for EtcdHold {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl EtcdElector {
    /// Connects to etcd for the RM `rm_id` of the cluster whose keys are `keys`.
    pub async fn connect(
        endpoints: &EtcdEndpoints,
        keys: EtcdKeys,
        rm_id: &str,
    ) -> Result<Self, ElectionError> {
        let client = endpoints
            .connect()
            .await
            .map_err(|e| backend(endpoints, e))?;
        Ok(Self {
            client,
            keys,
            rm_id: rm_id.to_string(),
            endpoints: endpoints.clone(),
        })
    }

    fn err(&self, e: impl std::error::Error + Send + Sync + 'static) -> ElectionError {
        backend(&self.endpoints, e)
    }

    /// One unary call, bounded by the call timeout.
    async fn bounded<T>(
        &self,
        call: impl std::future::Future<Output = Result<T, etcd_client::Error>>,
    ) -> Result<T, ElectionError> {
        match tokio::time::timeout(self.endpoints.call_timeout(), call).await {
            Ok(r) => r.map_err(|e| self.err(e)),
            Err(_) => Err(self.err(CallTimedOut(self.endpoints.call_timeout()))),
        }
    }

    /// One attempt: grants a lease and creates the leader key with it if it does not exist.
    /// Ok(Ok) when this RM won; Ok(Err(holder, revision)) when someone else holds the key.
    async fn try_once(&self) -> Result<Result<Leadership, (Option<String>, i64)>, ElectionError> {
        let mut c = self.client.clone();
        let granted_at = Instant::now();
        let grant = self
            .bounded(c.lease_grant(self.endpoints.ttl_secs(), None))
            .await?;
        let (lease, ttl) = (grant.id(), grant.ttl());
        let key = self.keys.leader();
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                key.clone(),
                self.rm_id.clone(),
                Some(PutOptions::new().with_lease(lease)),
            )])
            .or_else([TxnOp::get(key.clone(), None)]);
        let resp = match self.bounded(c.txn(txn)).await {
            Ok(r) => r,
            Err(e) => {
                let _ = self.bounded(c.lease_revoke(lease)).await;
                return Err(e);
            }
        };
        let revision = resp.header().map_or(0, |h| h.revision());
        if resp.succeeded() {
            let term = Term {
                key,
                revision,
                holder: self.rm_id.clone(),
            };
            let ttl = Duration::from_secs(u64::try_from(ttl.max(1)).unwrap_or(1));
            return Ok(Ok(self.hold(term, lease, ttl, granted_at)));
        }
        let _ = self.bounded(c.lease_revoke(lease)).await;
        let holder = resp.op_responses().into_iter().find_map(|r| match r {
            TxnOpResponse::Get(g) => g.kvs().first().map(|kv| kv.value().to_vec()),
            _ => None,
        });
        let holder = holder
            .map(|v| {
                String::from_utf8(v).map_err(|e| ElectionError::Corrupt {
                    endpoints: self.endpoints.list(),
                    key: self.keys.leader(),
                    message: e.to_string(),
                })
            })
            .transpose()?;
        Ok(Err((holder, revision)))
    }

    /// The leadership of a won term, with its renewal running.
    fn hold(&self, term: Term, lease: i64, ttl: Duration, granted_at: Instant) -> Leadership {
        let (mut leadership, alarm) = Leadership::new(term.clone(), Box::new(()));
        let renewal = tokio::spawn(renew(
            self.client.clone(),
            term.clone(),
            lease,
            ttl,
            granted_at,
            alarm.clone(),
        ));
        let watch = tokio::spawn(watch_key(self.client.clone(), term, alarm));
        leadership.hold = Box::new(EtcdHold {
            lease,
            tasks: [renewal, watch],
        });
        leadership
    }

    /// Waits until the leader key is deleted after `revision`, or one lease length passes.
    async fn wait_for_vacancy(&self, revision: i64) {
        let mut c = self.client.clone();
        let opts = WatchOptions::new().with_start_revision(revision + 1);
        let wait = async {
            let Ok(mut stream) = c.watch(self.keys.leader(), Some(opts)).await else {
                return;
            };
            while let Ok(Some(resp)) = stream.message().await {
                if resp
                    .events()
                    .iter()
                    .any(|e| e.event_type() == EventType::Delete)
                {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(self.endpoints.lease, wait).await;
    }
}

/// A unary etcd call that did not answer in time.
#[derive(Debug, thiserror::Error)]
#[error("etcd did not answer within {0:?}")]
pub(crate) struct CallTimedOut(pub(crate) Duration);

fn backend(
    endpoints: &EtcdEndpoints,
    e: impl std::error::Error + Send + Sync + 'static,
) -> ElectionError {
    ElectionError::Backend {
        endpoints: endpoints.list(),
        source: Box::new(e),
    }
}

impl LeaderElector for EtcdElector {
    async fn campaign(
        &self,
        observed: &watch::Sender<Option<String>>,
    ) -> Result<Leadership, ElectionError> {
        loop {
            match self.try_once().await? {
                Ok(l) => {
                    info!(rm_id = %self.rm_id, revision = l.term.revision, "elected active");
                    observed.send_replace(Some(self.rm_id.clone()));
                    return Ok(l);
                }
                Err((holder, revision)) => {
                    observed.send_replace(holder);
                    self.wait_for_vacancy(revision).await;
                }
            }
        }
    }

    async fn resign(&self, leadership: Leadership) -> Result<(), ElectionError> {
        let term = leadership.term.clone();
        let hold: Box<dyn Any> = leadership.hold;
        let lease = hold.downcast_ref::<EtcdHold>().map(|h| h.lease);
        drop(hold);
        let mut c = self.client.clone();
        let txn = Txn::new()
            .when([Compare::create_revision(
                term.key.clone(),
                CompareOp::Equal,
                term.revision,
            )])
            .and_then([TxnOp::delete(term.key.clone(), None)]);
        self.bounded(c.txn(txn)).await?;
        if let Some(lease) = lease {
            self.bounded(c.lease_revoke(lease)).await?;
        }
        info!(rm_id = %self.rm_id, revision = term.revision, "resigned leadership");
        Ok(())
    }

    async fn leader(&self) -> Result<Option<String>, ElectionError> {
        let mut c = self.client.clone();
        let resp = self.bounded(c.get(self.keys.leader(), None)).await?;
        resp.kvs()
            .first()
            .map(|kv| {
                kv.value_str()
                    .map(str::to_string)
                    .map_err(|e| ElectionError::Corrupt {
                        endpoints: self.endpoints.list(),
                        key: self.keys.leader(),
                        message: e.to_string(),
                    })
            })
            .transpose()
    }
}

/// Renews the lease every third of its length until the leadership is lost (or the task is
/// aborted with its [`Leadership`]); raises the alarm with the reason. A broken renewal
/// stream is opened again; only the deadline (`sent + ttl` of the last acknowledged renewal)
/// or etcd saying the lease is gone ends the leadership.
async fn renew(
    mut client: Client,
    term: Term,
    lease: i64,
    ttl: Duration,
    granted_at: Instant,
    alarm: FenceAlarm,
) {
    let mut valid_until = granted_at + ttl;
    let every = ttl / 3;
    let lost = |why: LostBecause| {
        warn!(holder = %term.holder, revision = term.revision, ?why, "leadership lost");
        alarm.raise(why);
    };
    let mut stream = None;
    loop {
        if alarm.is_raised() {
            return;
        }
        let sent = Instant::now();
        let next = sent + every;
        if stream.is_none() {
            let open = tokio::time::timeout_at(next.into(), client.lease_keep_alive(lease));
            stream = open.await.ok().and_then(Result::ok);
        }
        if let Some((keeper, acks)) = stream.as_mut() {
            let sent_ok = keeper.keep_alive().await.is_ok();
            match tokio::time::timeout_at(next.into(), acks.message()).await {
                Ok(Ok(Some(r))) if sent_ok && r.ttl() > 0 => {
                    valid_until = sent + Duration::from_secs(r.ttl().unsigned_abs());
                }
                Ok(Ok(Some(r))) if sent_ok && r.ttl() <= 0 => {
                    return lost(LostBecause::LeaseExpired)
                }
                // Broken or ended: opened again next round.
                Ok(_) => stream = None,
                // No answer in time: the deadline below decides.
                Err(_) => {}
            }
        }
        if Instant::now() >= valid_until {
            return lost(LostBecause::LeaseExpired);
        }
        tokio::time::sleep_until(next.into()).await;
    }
}

/// Raises the alarm once the election key changes after the term created it (deleted,
/// or made again by another RM). A broken watch is replaced after checking the key directly.
async fn watch_key(mut client: Client, term: Term, alarm: FenceAlarm) {
    let key_lost = || {
        warn!(holder = %term.holder, revision = term.revision, "leadership lost: the election key changed");
        alarm.raise(LostBecause::KeyLost);
    };
    loop {
        let opts = WatchOptions::new().with_start_revision(term.revision + 1);
        if let Ok(mut changes) = client.watch(term.key.clone(), Some(opts)).await {
            while let Ok(Some(r)) = changes.message().await {
                if !r.events().is_empty() {
                    return key_lost();
                }
            }
        }
        if let Ok(r) = client.get(term.key.clone(), None).await {
            let created = r.kvs().first().map(|kv| kv.create_revision());
            if created != Some(term.revision) {
                return key_lost();
            }
        }
        if alarm.is_raised() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
