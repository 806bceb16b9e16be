//! One RM's HA state and manual transitions (`/ws/v1/ha/*`, `rmadmin -getServiceState`,
//! `-transitionToActive`, `-transitionToStandby`): asked of that RM itself, never of the
//! active it would redirect to.

use reqwest::Method;
use spindle_common::records::admin::HaStatusInfo;

use super::RmClient;
use crate::error::ClientError;
use crate::http::decode;

/// Which way `transition` asks an RM to go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HaTransition {
    ToActive,
    ToStandby,
}

impl RmClient {
    /// `GET /ws/v1/ha/state` of this RM.
    pub async fn ha_state(&self) -> Result<HaStatusInfo, ClientError> {
        let (rb, url) = self.http.request(Method::GET, "/ws/v1/ha/state");
        let resp = self
            .http
            .send_ok(rb.query(&self.user_query()), &url)
            .await?;
        decode(resp, &url).await
    }

    /// `POST /ws/v1/ha/transition-to-{active,standby}[?forcemanual=true]`; answers the
    /// RM's state after it.
    pub async fn ha_transition(
        &self,
        to: HaTransition,
        forcemanual: bool,
    ) -> Result<HaStatusInfo, ClientError> {
        let path = match to {
            HaTransition::ToActive => "/ws/v1/ha/transition-to-active",
            HaTransition::ToStandby => "/ws/v1/ha/transition-to-standby",
        };
        let (rb, url) = self.http.request(Method::POST, path);
        let mut rb = rb.query(&self.user_query());
        if forcemanual {
            rb = rb.query(&[("forcemanual", "true")]);
        }
        let resp = self.http.send_ok(rb, &url).await?;
        decode(resp, &url).await
    }
}
