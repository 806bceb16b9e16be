//! The synchronous [`super::StateStore`] calls over the async etcd client: the store owns a
//! small tokio runtime of its own (one worker thread, `etcd-store`) on which the client and
//! its connections live; a call spawns its future there and the calling thread waits for the
//! result with `futures::executor::block_on` (never tokio's, so it works from the driver
//! task's thread without blocking the store's reactor), outside tokio's cooperative budget:
//! a driver task that spent its budget would otherwise have the result's wake-up deferred
//! until it yields, which a blocked task never does (the RM hung after a failover's burst
//! of commands, `tests/ha_hosts.rs`). Every call is bounded by a timeout,
//! within which a call refused as unavailable (a member just died, a connection broke) is
//! tried again on the client's other endpoints: every store call is safe to repeat (puts and
//! deletes are idempotent, and a repeated compare fails rather than writes twice).

use std::future::Future;
use std::time::Duration;

use etcd_client::{Client, GetOptions, GetResponse, Txn, TxnResponse};

use crate::ha::EtcdEndpoints;

/// Why one bridged call failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CallError {
    #[error(transparent)]
    Etcd(#[from] etcd_client::Error),
    #[error("etcd did not answer within {0:?}")]
    TimedOut(Duration),
    #[error("the state store's runtime stopped: {0}")]
    Stopped(String),
}

/// The store's runtime and client.
pub(crate) struct Bridge {
    rt: Option<tokio::runtime::Runtime>,
    client: Client,
    timeout: Duration,
}

impl Bridge {
    /// Starts the runtime and connects to `endpoints`.
    pub(crate) fn connect(endpoints: &EtcdEndpoints) -> Result<Self, CallError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("etcd-store")
            .enable_all()
            .build()
            .map_err(|e| CallError::Stopped(e.to_string()))?;
        let timeout = endpoints.call_timeout();
        let ep = endpoints.clone();
        let client = wait(&rt, timeout, async move { ep.connect().await })?;
        Ok(Self {
            rt: Some(rt),
            client,
            timeout,
        })
    }

    /// One transaction.
    pub(crate) fn txn(&self, txn: Txn) -> Result<TxnResponse, CallError> {
        self.call(move |mut c| {
            let txn = txn.clone();
            async move { c.txn(txn).await }
        })
    }

    /// One range read.
    pub(crate) fn get(
        &self,
        key: impl Into<Vec<u8>>,
        opts: Option<GetOptions>,
    ) -> Result<GetResponse, CallError> {
        let key = key.into();
        self.call(move |mut c| {
            let (key, opts) = (key.clone(), opts.clone());
            async move { c.get(key, opts).await }
        })
    }

    /// Runs `call` with a clone of the client on the store's runtime and waits for it,
    /// trying again (at most [`TRIES`] times in all) while etcd answers unavailable.
    fn call<T, F>(&self, call: impl Fn(Client) -> F + Send + 'static) -> Result<T, CallError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, etcd_client::Error>> + Send + 'static,
    {
        let rt = self
            .rt
            .as_ref()
            .ok_or(CallError::Stopped("dropped".into()))?;
        let client = self.client.clone();
        let attempt = (self.timeout / TRIES).max(Duration::from_millis(500));
        wait(rt, self.timeout, async move {
            let mut tried = 1;
            loop {
                let r = tokio::time::timeout(attempt, call(client.clone())).await;
                match r {
                    // Unanswered or unavailable: another endpoint (or a new raft leader) may
                    // answer the next try.
                    Err(_) if tried < TRIES => {}
                    Ok(Err(e)) if unavailable(&e) && tried < TRIES => {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    Err(_) => return Err(CallError::TimedOut(attempt)),
                    Ok(r) => return r.map_err(CallError::Etcd),
                }
                tried += 1;
            }
        })
    }
}

/// How many times one call is tried while etcd answers unavailable.
const TRIES: u32 = 4;

/// gRPC's CANCELLED status code (the protocol's, stable).
const GRPC_CANCELLED: i32 = 1;
/// gRPC's UNAVAILABLE status code (the protocol's, stable).
const GRPC_UNAVAILABLE: i32 = 14;

/// Whether `e` says the endpoint could not serve the call (so another may). The store never
/// cancels a call itself (a timeout drops the future), so CANCELLED comes from the channel:
/// a member died with the call in flight and its connection closed ("operation was
/// canceled ... connection closed"), which the next try sends to a live member.
fn unavailable(e: &etcd_client::Error) -> bool {
    match e {
        etcd_client::Error::TransportError(_) => true,
        etcd_client::Error::GRpcStatus(s) => retriable(s.code() as i32),
        _ => false,
    }
}

/// Whether a gRPC status code names the channel's failure rather than etcd's refusal.
fn retriable(code: i32) -> bool {
    matches!(code, GRPC_UNAVAILABLE | GRPC_CANCELLED)
}

fn wait<T, E, F>(rt: &tokio::runtime::Runtime, timeout: Duration, f: F) -> Result<T, CallError>
where
    T: Send + 'static,
    E: Into<CallError> + Send + 'static,
    F: Future<Output = Result<T, E>> + Send + 'static,
{
    let handle = rt.spawn(async move { tokio::time::timeout(timeout, f).await });
    match futures::executor::block_on(tokio::task::unconstrained(handle)) {
        Ok(Ok(r)) => r.map_err(Into::into),
        Ok(Err(_)) => Err(CallError::TimedOut(timeout)),
        Err(e) => Err(CallError::Stopped(e.to_string())),
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        // The store may be dropped inside another runtime (the driver task): shutting down
        // in the background never blocks there.
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store call made by a task that has spent its cooperative budget (as the driver does
    /// in a burst of commands) still returns.
    #[test]
    fn a_call_from_a_task_out_of_budget_returns() {
        let store = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let main = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let (done, finished) = std::sync::mpsc::channel();
        main.spawn(async move {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            for _ in 0..1000 {
                tx.send(()).unwrap();
            }
            // Each ready receive spends budget; stop with none left, without yielding.
            while tokio::task::coop::has_budget_remaining() {
                rx.recv().await;
            }
            let r = wait(&store, Duration::from_secs(5), async {
                Ok::<_, CallError>(7)
            });
            let _ = done.send(r.ok());
            store.shutdown_background();
        });
        let got = finished.recv_timeout(Duration::from_secs(20));
        // Never waits for a worker that may be blocked.
        main.shutdown_background();
        assert_eq!(got, Ok(Some(7)), "the call never returned");
    }

    /// A call cut by a dying member's closed connection is tried again; a refusal by etcd
    /// itself (a bad request) is not.
    #[test]
    fn a_connection_closed_under_a_call_is_tried_again() {
        // gRPC's codes: 1 CANCELLED, 14 UNAVAILABLE, 3 INVALID_ARGUMENT, 9 FAILED_PRECONDITION.
        assert!(retriable(1) && retriable(14));
        assert!(!retriable(3) && !retriable(9));
    }
}
