//! The body of YARN's `/ws/v1/cluster/delegation-token` (RMWebServices' `DelegationToken`):
//! the request names the renewer; the answer adds the token and what it says.

use serde::{Deserialize, Serialize};

/// YARN's `DelegationToken` record, request and answer alike (absent fields are not sent).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelegationToken {
    /// The token, as a caller sends it (`Authorization: Bearer` or
    /// `Hadoop-YARN-RM-Delegation-Token`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renewer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// `RM_DELEGATION_TOKEN`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// When the token stops being accepted (ms since the epoch).
    #[serde(
        rename = "expiration-time",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub expiration_time: Option<u64>,
    /// Its max date (Spindle's tokens are not renewed: the same as `expiration-time`).
    #[serde(
        rename = "max-validity",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub max_validity: Option<u64>,
}
