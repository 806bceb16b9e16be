//! The ApplicationMasterProtocol client (`/ws/v1/am/register`, `/allocate`, `/finish`).
//!
//! An AM finds everything it needs in the environment the RM and the NM gave its container:
//! `SPINDLE_RM_ADDRESS`, `SPINDLE_AMRM_TOKEN`, `SPINDLE_APPLICATION_ATTEMPT_ID` and
//! `CONTAINER_ID`. The token travels as `Authorization: Bearer <token>` on every call.
//! [`AmClient`] is the raw protocol (it keeps the `responseId`); [`crate::amrm::AmRmClient`]
//! builds YARN's ask bookkeeping on top of it.

use std::time::Duration;

use reqwest::Method;
use serde::de::DeserializeOwned;
use serde::Serialize;
use spindle_common::env;
use spindle_common::ids::{ApplicationAttemptId, ApplicationId, ContainerId};
use spindle_common::records::am::{
    AllocateRequest, AllocateResponse, FinishApplicationMasterRequest,
    FinishApplicationMasterResponse, RegisterApplicationMasterRequest,
    RegisterApplicationMasterResponse,
};
use spindle_common::states::FinalApplicationStatus;

use crate::address::RmAddress;
use crate::amrm::AskError;
use crate::error::ClientError;
use crate::http::{decode, Http, Resend};

const AM: &str = "/ws/v1/am";
/// YARN's AMRMClient retries an unfinished unregistration every 100 ms; we bound it.
const FINISH_RETRY: Duration = Duration::from_millis(100);
const FINISH_ATTEMPTS: u32 = 100;

/// Why an AM call failed.
#[derive(Debug, thiserror::Error)]
pub enum AmError {
    #[error("environment variable {name} is not set (is this running in an AM container?)")]
    MissingEnv { name: &'static str },
    #[error("environment variable {name}='{value}' is invalid: {reason}")]
    BadEnv {
        name: &'static str,
        value: String,
        reason: String,
    },
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Ask(#[from] AskError),
    /// The RM answered `AM_SHUTDOWN`: it no longer knows this attempt; the AM must exit.
    #[error("the ResourceManager told this application master to shut down (AM_SHUTDOWN)")]
    Shutdown,
    #[error("allocate called before register")]
    NotRegistered,
    #[error("the ResourceManager did not confirm unregistration after {attempts} attempts")]
    NotUnregistered { attempts: u32 },
}

/// What an AM container's environment says about it.
#[derive(Debug, Clone, PartialEq)]
pub struct AmEnv {
    /// The RM that launched the AM (the first of `SPINDLE_RM_ADDRESS`).
    pub rm_address: RmAddress,
    /// The other RMs of an HA cluster (the rest of `SPINDLE_RM_ADDRESS`, comma-separated):
    /// the AM fails over to them as every client does.
    pub other_rms: Vec<RmAddress>,
    pub token: String,
    pub attempt_id: ApplicationAttemptId,
    pub container_id: ContainerId,
}

impl AmEnv {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self, AmError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads through `lookup` (tests pass a map).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, AmError> {
        let get = |name: &'static str| {
            lookup(name)
                .filter(|v| !v.trim().is_empty())
                .ok_or(AmError::MissingEnv { name })
        };
        let bad = |name: &'static str, value: &str, reason: String| AmError::BadEnv {
            name,
            value: value.to_string(),
            reason,
        };
        let addr = get(env::RM_ADDRESS)?;
        let mut rms = addr
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(|a| RmAddress::parse(a).map_err(|r| bad(env::RM_ADDRESS, a, r)));
        let rm_address = rms
            .next()
            .unwrap_or_else(|| Err(bad(env::RM_ADDRESS, &addr, "no address".into())))?;
        let other_rms = rms.collect::<Result<Vec<_>, _>>()?;
        let token = get(env::AMRM_TOKEN)?.trim().to_string();
        let att = get(env::APPLICATION_ATTEMPT_ID)?;
        let attempt_id: ApplicationAttemptId =
            att.trim()
                .parse()
                .map_err(|e: spindle_common::ids::IdParseError| {
                    bad(env::APPLICATION_ATTEMPT_ID, &att, e.to_string())
                })?;
        let cid = get(env::CONTAINER_ID)?;
        let container_id: ContainerId =
            cid.trim()
                .parse()
                .map_err(|e: spindle_common::ids::IdParseError| {
                    bad(env::CONTAINER_ID, &cid, e.to_string())
                })?;
        if container_id.attempt_id.application_id != attempt_id.application_id {
            return Err(bad(
                env::CONTAINER_ID,
                &cid,
                format!("belongs to another application than {attempt_id}"),
            ));
        }
        Ok(Self {
            rm_address,
            other_rms,
            token,
            attempt_id,
            container_id,
        })
    }
}

/// The raw ApplicationMasterProtocol.
#[derive(Debug, Clone)]
pub struct AmClient {
    http: Http,
    env: AmEnv,
    response_id: i32,
}

impl AmClient {
    pub fn new(env: AmEnv) -> Result<Self, AmError> {
        Ok(Self {
            http: Http::new(&env.rm_address.base_url())?.with_failover(
                &std::iter::once(&env.rm_address)
                    .chain(&env.other_rms)
                    .map(RmAddress::base_url)
                    .collect::<Vec<_>>(),
                spindle_common::failover::FailoverPolicy::default(),
            )?,
            env,
            response_id: 0,
        })
    }

    /// [`AmEnv::from_env`] then [`AmClient::new`].
    pub fn from_env() -> Result<Self, AmError> {
        Self::new(AmEnv::from_env()?)
    }

    pub fn env(&self) -> &AmEnv {
        &self.env
    }

    pub fn application_id(&self) -> ApplicationId {
        self.env.attempt_id.application_id
    }

    pub fn attempt_id(&self) -> ApplicationAttemptId {
        self.env.attempt_id
    }

    pub fn container_id(&self) -> ContainerId {
        self.env.container_id
    }

    /// The last `responseId` seen (0 before the first allocate).
    pub fn response_id(&self) -> i32 {
        self.response_id
    }

    /// Starts over at responseId 0, as after a resync.
    pub fn reset_response_id(&mut self) {
        self.response_id = 0;
    }

    async fn call<B: Serialize, T: DeserializeOwned>(
        &self,
        op: &str,
        body: &B,
    ) -> Result<T, ClientError> {
        let (rb, url) = self.http.request(Method::POST, &format!("{AM}/{op}"));
        let rb = rb.bearer_auth(&self.env.token).json(body);
        // Every AM-RM call may be repeated on the next RM when its answer was lost.
        let resp = self.http.send_ok_with(rb, &url, Resend::Always).await?;
        decode(resp, &url).await
    }

    pub async fn register(
        &mut self,
        req: &RegisterApplicationMasterRequest,
    ) -> Result<RegisterApplicationMasterResponse, AmError> {
        let resp = self.call("register", req).await?;
        tracing::info!(attempt = %self.env.attempt_id, "registered with the ResourceManager");
        Ok(resp)
    }

    /// One allocate call. `req.response_id` is overwritten with the tracked value, and the
    /// answer's `responseId` is remembered for the next call.
    pub async fn allocate(
        &mut self,
        mut req: AllocateRequest,
    ) -> Result<AllocateResponse, AmError> {
        req.response_id = self.response_id;
        let resp: AllocateResponse = self.call("allocate", &req).await?;
        self.response_id = resp.response_id;
        Ok(resp)
    }

    /// One finish call; see [`AmClient::finish`] for the retrying form.
    pub async fn finish_once(
        &mut self,
        req: &FinishApplicationMasterRequest,
    ) -> Result<FinishApplicationMasterResponse, AmError> {
        Ok(self.call("finish", req).await?)
    }

    /// Unregisters with the final status and diagnostics, retrying (every 100 ms, bounded)
    /// until the RM answers `isUnregistered`.
    pub async fn finish(
        &mut self,
        status: FinalApplicationStatus,
        diagnostics: &str,
    ) -> Result<(), AmError> {
        self.finish_request(&FinishApplicationMasterRequest {
            final_application_status: status,
            diagnostics: diagnostics.to_string(),
            tracking_url: String::new(),
        })
        .await
    }

    /// [`AmClient::finish`] with a whole request (e.g. a final tracking URL).
    pub async fn finish_request(
        &mut self,
        req: &FinishApplicationMasterRequest,
    ) -> Result<(), AmError> {
        for _ in 0..FINISH_ATTEMPTS {
            if self.finish_once(req).await?.is_unregistered {
                tracing::info!(
                    attempt = %self.env.attempt_id,
                    status = %req.final_application_status,
                    "unregistered"
                );
                return Ok(());
            }
            tokio::time::sleep(FINISH_RETRY).await;
        }
        Err(AmError::NotUnregistered {
            attempts: FINISH_ATTEMPTS,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn lookup<'a>(m: &'a HashMap<&str, &str>) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| m.get(k).map(|v| v.to_string())
    }

    #[test]
    fn env_is_read_and_checked() {
        let mut m = HashMap::from([
            (env::RM_ADDRESS, "http://127.0.0.1:8088"),
            (env::AMRM_TOKEN, "abc.def"),
            (
                env::APPLICATION_ATTEMPT_ID,
                "appattempt_1404198295326_0003_000001",
            ),
            (env::CONTAINER_ID, "container_1404198295326_0003_01_000001"),
        ]);
        let e = AmEnv::from_lookup(lookup(&m)).unwrap();
        assert_eq!(e.rm_address, RmAddress::new("127.0.0.1", 8088));
        assert_eq!(e.token, "abc.def");
        assert_eq!(e.container_id.seq, 1);
        // The form clients are given (`host:port`) is read too: one parser for both.
        m.insert(env::RM_ADDRESS, "127.0.0.1:8088");
        let e = AmEnv::from_lookup(lookup(&m)).unwrap();
        assert_eq!(e.rm_address, RmAddress::new("127.0.0.1", 8088));
        assert!(e.other_rms.is_empty());
        // HA: the launching RM first, then the others.
        m.insert(env::RM_ADDRESS, "http://127.0.0.1:8088,http://h2:18088");
        let e = AmEnv::from_lookup(lookup(&m)).unwrap();
        assert_eq!(e.rm_address, RmAddress::new("127.0.0.1", 8088));
        assert_eq!(e.other_rms, [RmAddress::new("h2", 18088)]);
        m.insert(env::RM_ADDRESS, "h1:1,nonsense");
        assert!(matches!(
            AmEnv::from_lookup(lookup(&m)),
            Err(AmError::BadEnv { name, .. }) if name == env::RM_ADDRESS
        ));
        m.insert(env::RM_ADDRESS, "127.0.0.1:8088");

        m.insert(env::CONTAINER_ID, "container_1404198295326_0004_01_000001");
        let err = AmEnv::from_lookup(lookup(&m)).unwrap_err();
        assert!(matches!(err, AmError::BadEnv { name, .. } if name == env::CONTAINER_ID));

        m.insert(env::APPLICATION_ATTEMPT_ID, "garbage");
        let err = AmEnv::from_lookup(lookup(&m)).unwrap_err();
        assert!(
            err.to_string().contains("SPINDLE_APPLICATION_ATTEMPT_ID"),
            "{err}"
        );

        m.remove(env::AMRM_TOKEN);
        let err = AmEnv::from_lookup(lookup(&m)).unwrap_err();
        assert!(matches!(err, AmError::MissingEnv { name } if name == env::AMRM_TOKEN));

        m.insert(env::AMRM_TOKEN, "t");
        m.insert(env::RM_ADDRESS, "nonsense");
        let err = AmEnv::from_lookup(lookup(&m)).unwrap_err();
        assert!(matches!(err, AmError::BadEnv { name, .. } if name == env::RM_ADDRESS));
    }
}
