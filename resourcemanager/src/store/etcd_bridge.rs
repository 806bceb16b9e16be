//! The synchronous [`super::StateStore`] calls over the async etcd client: the store owns a
//! small tokio runtime of its own (one worker thread, `etcd-store`) on which the client and
//! its connections live; a call spawns its future there and the calling thread waits for the
//! result with `futures::executor::block_on` (never tokio's, so it works from the driver
//! task's thread without blocking the store's reactor). Every call is bounded by a timeout.

use std::future::Future;
use std::time::Duration;

use etcd_client::Client;

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

    /// Runs `call` with a clone of the client on the store's runtime and waits for it.
    pub(crate) fn call<T, F>(&self, call: impl FnOnce(Client) -> F) -> Result<T, CallError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, etcd_client::Error>> + Send + 'static,
    {
        let rt = self
            .rt
            .as_ref()
            .ok_or(CallError::Stopped("dropped".into()))?;
        wait(rt, self.timeout, call(self.client.clone()))
    }
}

fn wait<T, F>(rt: &tokio::runtime::Runtime, timeout: Duration, f: F) -> Result<T, CallError>
where
    T: Send + 'static,
    F: Future<Output = Result<T, etcd_client::Error>> + Send + 'static,
{
    let handle = rt.spawn(async move { tokio::time::timeout(timeout, f).await });
    match futures::executor::block_on(handle) {
        Ok(Ok(r)) => r.map_err(CallError::Etcd),
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
