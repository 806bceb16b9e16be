//! Bodies of Spindle's REST forms of two `yarn rmadmin` commands YARN only has over RPC:
//! `-refreshNodes` (`POST /ws/v1/cluster/refresh-nodes`) and `-getGroups`
//! (`GET /ws/v1/cluster/users/{user}/groups`).

use serde::{Deserialize, Serialize};

/// YARN's `DecommissionType` (the `decommissionType` query parameter of `refresh-nodes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum DecommissionType {
    /// Newly excluded nodes are decommissioned at once (their containers killed).
    #[default]
    NORMAL,
    /// Newly excluded nodes turn DECOMMISSIONING and drain, up to the timeout.
    GRACEFUL,
    /// As NORMAL, for the end of a client-tracked graceful decommission: DECOMMISSIONING
    /// nodes are decommissioned at once.
    FORCEFUL,
}

/// What a `refresh-nodes` changed, by node id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RefreshNodesInfo {
    pub decommissioned: Vec<String>,
    pub decommissioning: Vec<String>,
    pub recommissioned: Vec<String>,
}

/// `GET /users/{user}/groups`: the user's groups as the RM resolves them, primary first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct UserGroupsInfo {
    pub user: String,
    pub groups: Vec<String>,
}

/// `GET /ws/v1/ha/state` (`rmadmin -getServiceState`, YARN's `HAServiceStatus`): what one
/// ResourceManager is, as it answers itself (a standby answers too, never redirecting).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HaStatusInfo {
    /// `yarn.resourcemanager.ha.id` of the RM that answered.
    pub rm_id: String,
    /// `ACTIVE` or `STANDBY` (YARN's `HAServiceState`).
    pub ha_state: String,
    /// The election's connection to its coordination service: `CONNECTING`, `CONNECTED`
    /// or `DISCONNECTED` (YARN's `haZooKeeperConnectionState`).
    pub connection_state: String,
    /// `yarn.resourcemanager.ha.automatic-failover.enabled`.
    pub automatic_failover: bool,
    /// The id of the active RM as this RM's election last saw it, if any.
    pub active_rm_id: Option<String>,
}
