//! Fair share with memory as REST shows it: a queue's `fairShare` object in
//! `/ws/v1/cluster/scheduler` (Slurm's `sshare`: per user, shares, raw and decayed usage,
//! the fair-share factor) and an application's `fairSharePriority` in `/apps/{id}` (Slurm's
//! `sprio`: why a waiting application of a `fairshare` leaf is where it is).

use serde::{Deserialize, Serialize};

/// A queue's fair-share figures: a leaf's users, or a parent's sums over its leaves.
/// Usage is in billing-unit-seconds (`spindle.scheduler.fairshare.billing-weights`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct QueueFairShareInfo {
    /// Every usage ever charged, never decayed.
    pub raw_usage: f64,
    /// The same, decayed to now (`decay-half-life-ms`).
    pub decayed_usage: f64,
    /// A leaf's users: those ever charged there, and those with applications there.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<UserFairShareInfo>,
}

/// One user's standing in a leaf (a row of Slurm's `sshare -l`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct UserFairShareInfo {
    pub username: String,
    /// `user-settings.<user>.weight` (Slurm's RawShares).
    pub weight: f64,
    /// The weight over the leaf's users' weights (NormShares).
    pub norm_shares: f64,
    /// Billing-unit-seconds, never decayed.
    pub raw_usage: f64,
    /// Billing-unit-seconds, decayed to now.
    pub decayed_usage: f64,
    /// The decayed usage over the leaf's (EffectvUsage).
    pub effective_usage: f64,
    /// Fair Tree's level fair share, `normShares / effectiveUsage`; absent when the user
    /// has no usage (infinite).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub level_fs: Option<f64>,
    /// `2^(-effectiveUsage / normShares)` in [0, 1]: 1 without usage, 0.5 at the share.
    pub fair_share_factor: f64,
    /// What the user's running containers bill per second now.
    pub billing_rate: f64,
}

/// Why a waiting application of a `fairshare` leaf is where it is (Slurm's `sprio`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AppFairSharePriorityInfo {
    pub queue: String,
    /// 1-based place among the leaf's waiting applications.
    pub position: u64,
    pub waiting_applications: u64,
    /// Its user's standing in the leaf (the order between users).
    pub user: UserFairShareInfo,
    /// How long it has waited for its next container, and the leaf's bound
    /// (`ordering-policy.fairshare.max-wait-ms`, 0: none).
    pub age_ms: u64,
    pub max_wait_ms: u64,
    /// The bound passed: it goes ahead of every application that has not waited as long.
    pub overdue: bool,
    /// GPU-seconds (vcore-seconds without GPUs) it has attained: the order among its
    /// user's own applications (least first).
    pub attained_service_seconds: f64,
}
