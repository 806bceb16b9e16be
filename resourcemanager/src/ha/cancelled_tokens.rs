//! The cancelled user tokens as an HA RM reads them where it has no store open: the HA
//! admin routes (`/ws/v1/ha/*`), which a standby answers itself, check a `token`-mode
//! caller's token against etcd's `cancelled-tokens/<sequence number>` records (the active's
//! store writes them, fenced), read-only, with one client connected on first use and
//! reconnected after a failure. A check that cannot be answered refuses the call (never lets
//! it through).

use spindle_common::time::now_ms;
use tokio::sync::Mutex;

use super::keys::Family;
use super::{EtcdEndpoints, EtcdKeys};

/// Why a cancellation could not be checked: one variant per reason.
#[derive(Debug, thiserror::Error)]
pub enum CancelCheckError {
    #[error("cannot read the cancelled tokens from etcd ({urls}): {detail}")]
    Unreachable { urls: String, detail: String },
    #[error("the cancelled-token record {key} in etcd is not a date: '{value}'")]
    Corrupt { key: String, value: String },
}

/// The read-only view (see the module doc).
pub struct CancelledTokens {
    endpoints: EtcdEndpoints,
    keys: EtcdKeys,
    client: Mutex<Option<etcd_client::Client>>,
}

impl std::fmt::Debug for CancelledTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CancelledTokens({})", self.keys.prefix())
    }
}

/// Whether a stored cancellation (its value: the token's max date, ms) still holds at
/// `now`; None when the value is not a date. The one reading of the record, for the store
/// and this view.
pub fn still_cancelled(value: &str, now: u64) -> Option<bool> {
    value.trim().parse::<u64>().ok().map(|max| max >= now)
}

impl CancelledTokens {
    pub fn new(endpoints: EtcdEndpoints, keys: EtcdKeys) -> Self {
        Self {
            endpoints,
            keys,
            client: Mutex::new(None),
        }
    }

    /// Whether the token with sequence number `seq` was cancelled (and is not past its max
    /// date).
    pub async fn is_cancelled(&self, seq: u64) -> Result<bool, CancelCheckError> {
        let unreachable = |e: &dyn std::fmt::Display| CancelCheckError::Unreachable {
            urls: self.endpoints.list(),
            detail: e.to_string(),
        };
        let key = self.keys.numbered(Family::CancelledTokens, seq);
        let mut held = self.client.lock().await;
        let mut client = match held.as_ref() {
            Some(c) => c.clone(),
            None => {
                let c =
                    tokio::time::timeout(self.endpoints.call_timeout(), self.endpoints.connect())
                        .await
                        .map_err(|e| unreachable(&e))?
                        .map_err(|e| unreachable(&e))?;
                *held = Some(c.clone());
                c
            }
        };
        drop(held);
        let got = tokio::time::timeout(
            self.endpoints.call_timeout(),
            client.get(key.as_str(), None),
        )
        .await;
        let resp = match got {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                *self.client.lock().await = None;
                return Err(unreachable(&e));
            }
            Err(e) => {
                *self.client.lock().await = None;
                return Err(unreachable(&e));
            }
        };
        let Some(kv) = resp.kvs().first() else {
            return Ok(false);
        };
        let value = String::from_utf8_lossy(kv.value()).into_owned();
        still_cancelled(&value, now_ms()).ok_or(CancelCheckError::Corrupt { key, value })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ha::testing::{active_store, endpoints, etcd, runtime};
    use crate::store::StateStore;

    #[test]
    fn a_stored_cancellation_holds_until_its_max_date() {
        assert_eq!(still_cancelled("100", 100), Some(true));
        assert_eq!(still_cancelled(" 100\n", 99), Some(true));
        assert_eq!(still_cancelled("100", 101), Some(false));
        assert_eq!(still_cancelled("soon", 1), None);
    }

    #[test]
    fn a_view_without_a_store_sees_the_actives_cancellations_in_etcd() {
        let test = "a_view_without_a_store_sees_the_actives_cancellations_in_etcd";
        let Some((_dir, cluster)) = etcd(test, 1) else {
            return;
        };
        let rt = runtime();
        let ep = endpoints(cluster.endpoint_list(), 2000);
        let (_elector, _leadership, mut store) = active_store(&rt, &ep, "tokens", "rm1");
        let now = now_ms();
        store.cancel_user_token(7, now + 3_600_000, now).unwrap();
        let view = CancelledTokens::new(ep.clone(), EtcdKeys::new("tokens").unwrap());
        rt.block_on(async {
            assert!(view.is_cancelled(7).await.unwrap());
            assert!(!view.is_cancelled(8).await.unwrap());
        });
        // No etcd: refused by name, never let through.
        let gone = CancelledTokens::new(
            endpoints(vec!["http://127.0.0.1:1".into()], 1000),
            EtcdKeys::new("tokens").unwrap(),
        );
        let e = rt.block_on(gone.is_cancelled(7)).unwrap_err();
        assert!(matches!(e, CancelCheckError::Unreachable { .. }), "{e}");
    }
}
