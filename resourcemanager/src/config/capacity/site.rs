//! The yarn-site settings the capacity scheduler reads ([`SiteSettings`]): the cluster's
//! maximum allocation and resource types, the highest application priority, the admin ACL,
//! whether ACLs are on, and the fair share's accounting.
//!
//! Owns reading those keys from the whole configuration once, at start. They are fixed for
//! the life of the RM: nothing here may read `capacity-scheduler.xml` properties, and a
//! mutation or `refreshQueues` must never change these.

use spindle_common::config::{keys, Configuration};
use spindle_common::Resource;

use crate::core::queue_conf::{Acl, FairshareConf};

use super::error::Result;
use super::{parse_acl, CapacityConfError, Rule};

/// What the capacity scheduler reads from `yarn-site.xml` (and `resource-types.xml`):
/// fixed for the life of the RM, never changed through the mutation API.
#[derive(Debug, Clone, PartialEq)]
pub struct SiteSettings {
    /// `yarn.scheduler.maximum-allocation-*` and each type's maximum allocation: no queue's
    /// maximum allocation may exceed it.
    pub max_allocation: Resource,
    /// The extended resource types (`yarn.resource-types`) an absolute capacity may name.
    pub resource_types: Vec<String>,
    pub max_application_priority: i32,
    pub admin_acl: Acl,
    pub acl_enabled: bool,
    /// `spindle.scheduler.fairshare.*`: billing weights, half-life, calc period.
    pub fairshare: FairshareConf,
}

impl SiteSettings {
    pub fn from_conf(conf: &Configuration, max_allocation: &Resource) -> Result<Self> {
        let site_err = |name: &str, message: String| {
            let mut e = CapacityConfError::new(Rule::BadValue, message).property(name);
            e.place = conf.source(name).map(|s| s.to_string());
            e
        };
        let resource_types = conf
            .get_strings(keys::RESOURCE_TYPES)
            .map_err(|e| site_err(keys::RESOURCE_TYPES, e.to_string()))?;
        let prio_key = keys::CLUSTER_MAX_APPLICATION_PRIORITY;
        let prio = conf
            .get_i64(prio_key, keys::DEFAULT_CLUSTER_MAX_APPLICATION_PRIORITY)
            .map_err(|e| site_err(prio_key, e.to_string()))?;
        let max_application_priority =
            i32::try_from(prio)
                .ok()
                .filter(|p| *p >= 0)
                .ok_or_else(|| {
                    let mut e = site_err(
                        prio_key,
                        format!("must be from 0 to {}, got {prio}", i32::MAX),
                    );
                    e.rule = Rule::LimitRange;
                    e
                })?;
        let acl_raw = conf
            .get(keys::ADMIN_ACL)
            .map_err(|e| site_err(keys::ADMIN_ACL, e.to_string()))?
            .unwrap_or_else(|| keys::DEFAULT_ADMIN_ACL.to_string());
        let admin_acl = parse_acl(&acl_raw).map_err(|m| {
            let mut e = site_err(keys::ADMIN_ACL, m);
            e.rule = Rule::InvalidAcl;
            e
        })?;
        let acl_enabled = conf
            .get_bool(keys::ACL_ENABLE, keys::DEFAULT_ACL_ENABLE)
            .map_err(|e| site_err(keys::ACL_ENABLE, e.to_string()))?;
        let fairshare = super::fairshare::site(conf, &resource_types)?;
        Ok(Self {
            max_allocation: max_allocation.clone(),
            fairshare,
            resource_types,
            max_application_priority,
            admin_acl,
            acl_enabled,
        })
    }

    /// Defaults for tests: YARN's `maximum-allocation` (8192 MB, 4 vcores), no extra types,
    /// ACLs off.
    pub fn for_tests() -> Self {
        Self {
            max_allocation: Resource::new(8192, 4),
            resource_types: Vec::new(),
            max_application_priority: 0,
            admin_acl: Acl::everyone(),
            acl_enabled: false,
            fairshare: FairshareConf::default(),
        }
    }
}
