//! Fair share with memory: the cluster's accounting from yarn-site
//! (`spindle.scheduler.fairshare.billing-weights`, `.decay-half-life-ms`, `.calc-period-ms`)
//! and a leaf's `fairshare` ordering settings (`<qp>.user-settings.<user>.weight`,
//! `<qp>.ordering-policy.fairshare.max-wait-ms`).

use std::collections::BTreeMap;

use spindle_common::config::{keys, Configuration};
use spindle_common::resource::{MEMORY_MB, VCORES};

use super::error::Result;
use super::props::key;
use super::{CapacityConfError, CsProps, Rule, PREFIX};
use crate::core::queue_conf::{BillingWeights, FairshareConf, FairshareSpec};

/// The shortest half-life accepted (besides 0, no decay).
const MIN_HALF_LIFE_MS: u64 = 1_000;

/// The cluster's fair-share accounting; `resource_types` are the extended types billing
/// weights may name besides memory and vcores.
pub(super) fn site(conf: &Configuration, resource_types: &[String]) -> Result<FairshareConf> {
    let err = |name: &str, rule: Rule, message: String| {
        let mut e = CapacityConfError::new(rule, message).property(name);
        e.place = conf.source(name).map(|s| s.to_string());
        e
    };
    let b_key = keys::FAIRSHARE_BILLING_WEIGHTS;
    let raw = conf
        .get(b_key)
        .map_err(|e| err(b_key, Rule::BadValue, e.to_string()))?
        .unwrap_or_else(|| keys::DEFAULT_FAIRSHARE_BILLING_WEIGHTS.to_string());
    let billing =
        billing_weights(&raw, resource_types).map_err(|m| err(b_key, Rule::BadValue, m))?;
    let h_key = keys::FAIRSHARE_DECAY_HALF_LIFE_MS;
    let half_life_ms = conf
        .get_u64(h_key, keys::DEFAULT_FAIRSHARE_DECAY_HALF_LIFE_MS)
        .map_err(|e| err(h_key, Rule::BadValue, e.to_string()))?;
    if half_life_ms != 0 && half_life_ms < MIN_HALF_LIFE_MS {
        return Err(err(
            h_key,
            Rule::LimitRange,
            format!("must be 0 (no decay) or at least {MIN_HALF_LIFE_MS} ms, got {half_life_ms}"),
        ));
    }
    let c_key = keys::FAIRSHARE_CALC_PERIOD_MS;
    let calc_period_ms = conf
        .get_u64(c_key, keys::DEFAULT_FAIRSHARE_CALC_PERIOD_MS)
        .map_err(|e| err(c_key, Rule::BadValue, e.to_string()))?;
    if calc_period_ms == 0 {
        return Err(err(
            c_key,
            Rule::LimitRange,
            "must be at least 1 ms".to_string(),
        ));
    }
    Ok(FairshareConf {
        billing,
        half_life_ms,
        calc_period_ms,
    })
}

/// `type=weight,...`: each type memory-mb, vcores or a configured extended type, each
/// weight a finite number of at least 0, no type twice.
pub(super) fn billing_weights(
    raw: &str,
    resource_types: &[String],
) -> std::result::Result<BillingWeights, String> {
    let mut out = BTreeMap::new();
    for part in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((name, w)) = part.split_once('=') else {
            return Err(format!(
                "'{part}' is not type=weight (such as yarn.io/gpu=1.0)"
            ));
        };
        let name = name.trim();
        let known = name == MEMORY_MB
            || name == VCORES
            || name == spindle_common::resource::GPU
            || resource_types.iter().any(|t| t == name);
        if !known {
            return Err(format!(
                "'{name}' is not a resource type of this cluster (memory-mb, vcores, yarn.io/gpu or one of yarn.resource-types)"
            ));
        }
        let weight: f64 = w
            .trim()
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| {
                format!(
                    "weight '{}' of {name} is not a number of at least 0",
                    w.trim()
                )
            })?;
        if out.insert(name.to_string(), weight).is_some() {
            return Err(format!("{name} is given twice"));
        }
    }
    Ok(BillingWeights(out))
}

/// A leaf's `fairshare` settings: its users' weights and the wait bound.
pub(super) fn spec(props: &CsProps, path: &str) -> Result<FairshareSpec> {
    let prefix = format!("{PREFIX}{path}.{}", keys::CS_QUEUE_USER_SETTINGS_PREFIX);
    let mut user_weights = BTreeMap::new();
    for (name, _) in props.pairs().filter(|(k, _)| k.starts_with(&prefix)) {
        let Some((user, what)) = name[prefix.len()..].rsplit_once('.') else {
            continue;
        };
        if what != keys::USER_SETTINGS_WEIGHT || user.is_empty() || user.contains('.') {
            continue;
        }
        let w = props.f64(name)?.unwrap_or(1.0);
        if !(w.is_finite() && w >= 0.0) {
            return Err(props
                .err(
                    Rule::LimitRange,
                    name,
                    format!(
                        "a user's weight must be a number of at least 0 (0: no share), got {}",
                        props.written(name)
                    ),
                )
                .queue(path));
        }
        user_weights.insert(user.to_string(), w);
    }
    let m_key = key(path, keys::CS_QUEUE_FAIRSHARE_MAX_WAIT_MS);
    let max_wait_ms = match props.int(&m_key)? {
        None => keys::DEFAULT_CS_QUEUE_FAIRSHARE_MAX_WAIT_MS,
        Some(n) => u64::try_from(n).map_err(|_| {
            props
                .err(
                    Rule::LimitRange,
                    &m_key,
                    format!(
                        "must be 0 (no bound) or a positive number of milliseconds, got {}",
                        props.written(&m_key)
                    ),
                )
                .queue(path)
        })?,
    };
    Ok(FairshareSpec {
        user_weights,
        max_wait_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_billing_weights_are_the_core_default() {
        let parsed = billing_weights(keys::DEFAULT_FAIRSHARE_BILLING_WEIGHTS, &[]).unwrap();
        assert_eq!(parsed, BillingWeights::default());
    }

    #[test]
    fn billing_weights_refuse_what_they_cannot_bill() {
        for bad in [
            "yarn.io/gpu",
            "fpga=1",
            "vcores=-1",
            "vcores=x",
            "vcores=1,vcores=2",
        ] {
            assert!(billing_weights(bad, &[]).is_err(), "{bad}");
        }
        let ok = billing_weights("yarn.io/fpga=2, vcores=0.5", &["yarn.io/fpga".into()]).unwrap();
        assert_eq!(ok.0.get("yarn.io/fpga"), Some(&2.0));
    }
}
