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
    /// trying again while etcd answers unavailable or a try goes unanswered, until the
    /// call's timeout: each try at most a [`TRIES`]th of it, the pause after an unavailable
    /// answer doubling from [`FIRST_PAUSE`] to [`MAX_PAUSE`]. Tries are bounded by time, not
    /// counted: with one member of three dead, the client's balancer may send several tries
    /// in a row to it (each refused at connect), and a count of four ran out that way.
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
        let timeout = self.timeout;
        // The tries end by themselves within `timeout`; the outer bound is the backstop.
        wait(rt, timeout + OUTER_SLACK, async move {
            match try_until(timeout, move || call(client.clone()), unavailable).await {
                Some(r) => r.map_err(CallError::Etcd),
                None => Err(CallError::TimedOut(timeout)),
            }
        })
    }
}

/// Tries `call` until it answers other than unavailable, or `timeout` runs out: each try at
/// most a [`TRIES`]th of it (half a second at least), the pause after an unavailable answer
/// doubling from [`FIRST_PAUSE`] to [`MAX_PAUSE`]. The last answer, or None when the last
/// try went unanswered.
async fn try_until<T, E, F>(
    timeout: Duration,
    call: impl Fn() -> F,
    unavailable: impl Fn(&E) -> bool,
) -> Option<Result<T, E>>
where
    F: Future<Output = Result<T, E>>,
{
    let attempt = (timeout / TRIES).max(Duration::from_millis(500));
    let deadline = tokio::time::Instant::now() + timeout;
    let left = || deadline.saturating_duration_since(tokio::time::Instant::now());
    let mut pause = FIRST_PAUSE;
    loop {
        let one = call();
        match tokio::time::timeout(attempt.min(left()), one).await {
            // Unanswered or unavailable: another endpoint (or a new raft leader) may answer
            // the next try.
            Err(_) if left() >= MIN_TRY => {}
            Err(_) => return None,
            Ok(Err(e)) if unavailable(&e) && left() >= pause + MIN_TRY => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_PAUSE);
            }
            Ok(r) => return Some(r),
        }
    }
}

/// The longest one try may take, as a fraction of the call's timeout.
const TRIES: u32 = 4;
/// The pause after the first unavailable answer, doubled after each up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(50);
const MAX_PAUSE: Duration = Duration::from_millis(400);
/// No try starts with less than this left of the call's timeout.
const MIN_TRY: Duration = Duration::from_millis(100);
/// How long past its timeout the caller waits for the tries to end on their own.
const OUTER_SLACK: Duration = Duration::from_millis(500);

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

    /// How a test call answers: unavailable (`true`) or refused (`false`).
    type Answer = Result<u32, bool>;

    /// Tries of `answers` in turn (then the last again) under a 1 s timeout: the result and
    /// how many tries were made.
    fn tries(answers: Vec<Option<Answer>>) -> (Option<Answer>, usize, Duration) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let n = std::sync::atomic::AtomicUsize::new(0);
        let started = std::time::Instant::now();
        let r = rt.block_on(try_until(
            Duration::from_secs(1),
            || {
                let i = n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let a = answers[i.min(answers.len() - 1)];
                async move {
                    match a {
                        Some(a) => a,
                        None => std::future::pending().await,
                    }
                }
            },
            |unavailable: &bool| *unavailable,
        ));
        (r, n.into_inner(), started.elapsed())
    }

    /// With one member of three dead, the balancer may send several tries in a row to it:
    /// four unavailable answers (all the tries a count of four once allowed) and the fifth
    /// try still succeeds within the timeout.
    #[test]
    fn unavailable_answers_are_tried_again_until_the_timeout() {
        let answers = vec![Some(Err(true)); 4].into_iter().chain([Some(Ok(7))]);
        let (r, n, _) = tries(answers.collect());
        assert_eq!((r, n), (Some(Ok(7)), 5));
        // Unavailable for good: the last answer (not a timeout), after more than four tries.
        let (r, n, _) = tries(vec![Some(Err(true))]);
        assert_eq!(r, Some(Err(true)));
        assert!(n > 4, "{n} tries");
    }

    #[test]
    fn a_refusal_is_not_tried_again_and_silence_times_out() {
        assert_eq!(tries(vec![Some(Err(false))]).0, Some(Err(false)));
        assert_eq!(tries(vec![Some(Err(false))]).1, 1);
        // Unanswered: tries of half a second until the timeout, then None.
        let (r, n, took) = tries(vec![None]);
        assert_eq!(r, None);
        assert!(
            n >= 2 && took >= Duration::from_secs(1),
            "{n} tries in {took:?}"
        );
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
